/* The CUDA backend instance: context (stream, cuBLAS handle, error flag, pinned staging),
 * memory, copies, sync, the kernel error and the kernel table from kernels.def. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.cuh"

extern "C" {
#include "base/env.h"
}

static bool g_tf32_env_read, g_tf32;

extern "C" int lv_cuda_device_count(void) {
  int n = 0;
  /* No driver, no device or a driver too old all mean: no GPU this process can use. */
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

static bool tf32_wanted(void) {
  if (!g_tf32_env_read) {
    if (lv_env_get()->cuda_tf32) g_tf32 = true;
    g_tf32_env_read = true;
  }
  return g_tf32;
}

static void apply_math_mode(lv_kctx *ctx) {
  LV_CUBLAS_CHECK(cublasSetMathMode(ctx->blas, ctx->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
}

static lv_kctx *g_ctx[LV_DEVICE_MAX_ORDINAL];

extern "C" void lv_cuda_allow_tf32(bool allow) {
  g_tf32_env_read = true;
  g_tf32 = allow;
  for (int i = 0; i < LV_DEVICE_MAX_ORDINAL; i++)
    if (g_ctx[i]) {
      g_ctx[i]->tf32 = allow;
      apply_math_mode(g_ctx[i]);
    }
}

void *lv_cuda_alloc(lv_kctx *ctx, size_t bytes) {
  LV_CUDA_CHECK(cudaSetDevice(ctx->ordinal));
  void *p = NULL;
  /* Stream-ordered: a block freed by an earlier step is reused without a device-wide
   * synchronization (cudaFree would wait for every queued kernel). */
  cudaError_t e = cudaMallocAsync(&p, bytes ? (bytes + 255) & ~(size_t)255 : 256, ctx->stream);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return NULL;
  }
  LV_CUDA_CHECK(e);
  return p;
}

void lv_cuda_free(lv_kctx *ctx, void *p) {
  if (p) LV_CUDA_CHECK(cudaFreeAsync(p, ctx->stream));
}

/* Host to device through the two pinned buffers: the host data is taken before the copy
 * returns (the caller may reuse it), the transfers run behind the kernels queued on the
 * stream, and filling one buffer overlaps the transfer out of the other. */
static void copy_h2d(lv_kctx *ctx, char *dst, const char *src, size_t bytes) {
  while (bytes > 0) {
    size_t n = bytes < LV_CUDA_STAGE_BYTES ? bytes : LV_CUDA_STAGE_BYTES;
    int s = ctx->next_stage;
    ctx->next_stage ^= 1;
    LV_CUDA_CHECK(cudaEventSynchronize(ctx->staged[s]));
    memcpy(ctx->stage[s], src, n);
    LV_CUDA_CHECK(cudaMemcpyAsync(dst, ctx->stage[s], n, cudaMemcpyHostToDevice, ctx->stream));
    LV_CUDA_CHECK(cudaEventRecord(ctx->staged[s], ctx->stream));
    dst += n;
    src += n;
    bytes -= n;
  }
}

/* Device to host waits for the stream (the data the host asked for is then final). */
static void copy_d2h(lv_kctx *ctx, char *dst, const char *src, size_t bytes) {
  while (bytes > 0) {
    size_t n = bytes < LV_CUDA_STAGE_BYTES ? bytes : LV_CUDA_STAGE_BYTES;
    int s = ctx->next_stage;
    ctx->next_stage ^= 1;
    LV_CUDA_CHECK(cudaEventSynchronize(ctx->staged[s]));
    LV_CUDA_CHECK(cudaMemcpyAsync(ctx->stage[s], src, n, cudaMemcpyDeviceToHost, ctx->stream));
    LV_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    memcpy(dst, ctx->stage[s], n);
    dst += n;
    src += n;
    bytes -= n;
  }
}

static void cu_copy(lv_kctx *ctx, void *dst, const void *src, size_t bytes, lv_copy_kind kind) {
  if (!bytes) return;
  LV_CUDA_CHECK(cudaSetDevice(ctx->ordinal));
  switch (kind) {
    case LV_COPY_HOST_TO_DEVICE: copy_h2d(ctx, (char *)dst, (const char *)src, bytes); break;
    case LV_COPY_DEVICE_TO_HOST: copy_d2h(ctx, (char *)dst, (const char *)src, bytes); break;
    default: LV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->stream)); break;
  }
}

static void cu_sync(lv_kctx *ctx) {
  LV_CUDA_CHECK(cudaSetDevice(ctx->ordinal));
  LV_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

extern "C" bool lv_cuda_error_take(lv_kctx *ctx, lv_kerror *err) {
  lv_cuda_err e;
  LV_CUDA_CHECK(cudaMemcpyAsync(&e, ctx->err, sizeof e, cudaMemcpyDeviceToHost, ctx->stream));
  LV_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
  if (!e.flag) return false;
  *err = e.err;
  LV_CUDA_CHECK(cudaMemsetAsync(ctx->err, 0, sizeof e, ctx->stream));
  return true;
}

static const lv_kernel_table g_cuda_kernels = {
    "cuda",
#define K(name, params, args) lv_cuda_##name,
#define KR(type, name, params, args) K(name, params, args)
#include "kernels/kernels.def"
#undef K
#undef KR
};

typedef struct cuda_backend {
  lv_backend be;
  lv_kctx ctx;
  char name[16];
} cuda_backend;

extern "C" const lv_backend *lv_cuda_backend_create(int ordinal) {
  if (ordinal < 0 || ordinal >= LV_DEVICE_MAX_ORDINAL || ordinal >= lv_cuda_device_count()) return NULL;
  cuda_backend *b = (cuda_backend *)calloc(1, sizeof *b);
  LV_ASSERT(b);
  lv_kctx *ctx = &b->ctx;
  ctx->ordinal = ordinal;
  LV_CUDA_CHECK(cudaSetDevice(ordinal));
  LV_CUDA_CHECK(cudaDeviceGetAttribute(&ctx->sms, cudaDevAttrMultiProcessorCount, ordinal));
  LV_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
  LV_CUBLAS_CHECK(cublasCreate(&ctx->blas));
  LV_CUBLAS_CHECK(cublasSetStream(ctx->blas, ctx->stream));
  ctx->tf32 = tf32_wanted();
  apply_math_mode(ctx);
  lv_cudnn_init(ctx);
  LV_CUDA_CHECK(cudaMalloc((void **)&ctx->err, sizeof(lv_cuda_err)));
  LV_CUDA_CHECK(cudaMemset(ctx->err, 0, sizeof(lv_cuda_err)));
  for (int i = 0; i < 2; i++) {
    LV_CUDA_CHECK(cudaMallocHost(&ctx->stage[i], LV_CUDA_STAGE_BYTES));
    LV_CUDA_CHECK(cudaEventCreateWithFlags(&ctx->staged[i], cudaEventDisableTiming));
  }
  /* Blocks freed back to the pool stay reserved for the next step instead of going back
   * to the driver at every sync. */
  cudaMemPool_t pool;
  LV_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, ordinal));
  uint64_t keep = UINT64_MAX;
  LV_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  snprintf(b->name, sizeof b->name, "cuda:%d", ordinal);
  b->be.name = b->name;
  b->be.device = lv_device_make(LV_DEVICE_CUDA, ordinal);
  b->be.ctx = ctx;
  b->be.alloc = lv_cuda_alloc;
  b->be.free = lv_cuda_free;
  b->be.copy = cu_copy;
  b->be.sync = cu_sync;
  b->be.kernels = &g_cuda_kernels;
  g_ctx[ordinal] = ctx;
  return &b->be;
}
