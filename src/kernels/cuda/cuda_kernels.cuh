/* The CUDA backend's internals (built with `make CUDA=1`): its context, the one checking
 * macro per CUDA library, launch helpers and the declarations generated from
 * kernels.def. Only src/kernels/cuda/ includes CUDA headers. Every kernel runs on the
 * context's one stream, so kernels, copies and frees stay in launch order; the host
 * waits only in sync, in device-to-host copies and in error_take's caller's sync. */
#ifndef LV_KERNELS_CUDA_CUDA_KERNELS_CUH
#define LV_KERNELS_CUDA_CUDA_KERNELS_CUH

#include <cublas_v2.h>
#include <cudnn.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "base/status.h"
#include "kernels/cuda/cuda.h"
#include "kernels/kernels.h"
}

/* Host staging buffers for host-to-device copies (pinned, double-buffered). */
#define LV_CUDA_STAGE_BYTES ((size_t)8 << 20)

/* What a kernel writes when it finds a bad id: first error wins (flag set by atomicCAS). */
typedef struct lv_cuda_err {
  int flag;
  int pad_;
  lv_kerror err;
} lv_cuda_err;

struct lv_kctx {
  int ordinal;
  cudaStream_t stream;
  cublasHandle_t blas;
  lv_cuda_err *err;       /* device memory: the first kernel error */
  void *stage[2];         /* pinned host memory, LV_CUDA_STAGE_BYTES each */
  cudaEvent_t staged[2];  /* the last copy out of stage[i] has finished */
  int next_stage;
  bool tf32;
  int sms;                /* multiprocessors, for grid sizes */
  /* cuDNN (cuda_cudnn.cu): the handle, bound to stream, is made on the first conv or
   * pooling call that wants it; dnn_state 0 untried, 1 ready, -1 unavailable (dnn_why
   * says why; the kernels then run lingvoc's own). */
  bool use_cudnn;
  int dnn_state;
  cudnnHandle_t dnn;
  char dnn_why[192];
  struct lv_cudnn_plan *plans; /* LV_CUDNN_PLANS descriptors and algorithms by geometry */
  int next_plan;
};

/* Stream-ordered device memory (cudaMallocAsync on ctx's stream; NULL when out of
 * memory) and its release after the work queued so far. */
void *lv_cuda_alloc(lv_kctx *ctx, size_t bytes);
void lv_cuda_free(lv_kctx *ctx, void *p);
/* Sets ctx->use_cudnn from LINGVOC_CUDNN or lv_cuda_use_cudnn (backend creation). */
void lv_cudnn_init(lv_kctx *ctx);

/* The cuDNN paths of conv2d and average pooling (cuda_cudnn.cu): true when they ran the
 * kernel; false when cuDNN is off, unavailable or does not take the geometry, and the
 * caller runs lingvoc's kernel instead. Scratch as conv2d_scratch sized it. conv2d_bwd
 * sets *gx / *gw to NULL for the parts it ran, leaving the rest to the caller. */
bool lv_cudnn_conv2d_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, float *y,
                         float *scratch, size_t scratch_floats);
bool lv_cudnn_conv2d_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                         float **gx, bool gx_acc, float **gw, bool gw_acc, float *scratch, size_t scratch_floats);
bool lv_cudnn_avg_pool_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, float *y);
bool lv_cudnn_avg_pool_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *gy, float *gx, bool acc);
/* Floats of conv2d scratch the cuDNN path needs: the filter as OHWI and the filter
 * gradient as OHWI (cuDNN has no HWIO layout). */
size_t lv_cudnn_conv2d_scratch(const lv_conv_geom *g);

/* Aborts with file:line and CUDA's message: a failing launch or copy is a programmer
 * error or a broken device, not a bad input (inputs are checked before they get here). */
#define LV_CUDA_CHECK(expr)                                                             \
  do {                                                                                 \
    cudaError_t e_ = (expr);                                                           \
    LV_ASSERTF(e_ == cudaSuccess, "CUDA: %s: %s", #expr, cudaGetErrorString(e_));      \
  } while (0)
#define LV_CUBLAS_CHECK(expr)                                                           \
  do {                                                                                 \
    cublasStatus_t e_ = (expr);                                                        \
    LV_ASSERTF(e_ == CUBLAS_STATUS_SUCCESS, "cuBLAS: %s: %s", #expr,                   \
               cublasGetStatusString(e_));                                             \
  } while (0)
/* After each launch: launch-configuration errors show up here (execution errors at the
 * next sync). */
#define LV_CUDA_LAUNCHED() LV_CUDA_CHECK(cudaGetLastError())

#define LV_CUDA_THREADS 256

/* Blocks for n elements at LV_CUDA_THREADS each, capped (kernels loop grid-stride). */
static inline unsigned lv_cuda_blocks(const lv_kctx *ctx, int64_t n) {
  int64_t b = (n + LV_CUDA_THREADS - 1) / LV_CUDA_THREADS;
  int64_t cap = (int64_t)ctx->sms * 32;
  if (b > cap) b = cap;
  return (unsigned)(b < 1 ? 1 : b);
}

#define LV_GRID_LOOP(i, n) \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* Records err in the context's device flag unless an earlier error is there. */
__device__ inline void lv_cuda_record(lv_cuda_err *e, lv_kerror err) {
  if (atomicCAS(&e->flag, 0, 1) == 0) e->err = err;
}


/* Block-wide sum of v over all threads (blockDim.x a multiple of 32, <= 1024); every
 * thread gets the total. sh: 32 elements of shared memory. */
template <typename T>
__device__ inline T lv_block_sum(T v, T *sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  T t = 0;
  for (int w = 0; w < nw; w++) t += sh[w];
  return t;
}
__device__ inline float lv_block_max(float v, float *sh) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  float t = sh[0];
  for (int w = 1; w < nw; w++) t = fmaxf(t, sh[w]);
  return t;
}

#define K(name, params, args) extern "C" void lv_cuda_##name params;
#define KR(type, name, params, args) extern "C" type lv_cuda_##name params;
#include "kernels/kernels.def"
#undef K
#undef KR

#endif
