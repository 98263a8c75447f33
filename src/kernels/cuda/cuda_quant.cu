/* Fake quantization on the GPU: kernel_math.h's lv_kfq_* element for element, as the CPU's
 * cpu_quant.c; the range's gradients are block sums (in double, as the CPU's
 * whole sum) added atomically. */
#include "kernels/cuda/cuda_kernels.cuh"
#include "kernels/kernel_math.h"

__global__ void fake_quant_fwd_k(int64_t n, const float *x, const float *min, const float *max, int quant_min,
                                 int quant_max, bool vars, float *y) {
  const lv_kfq q = lv_kfq_nudge(*min, *max, quant_min, quant_max, vars);
  LV_GRID_LOOP(i, n) y[i] = lv_kfq_apply(&q, x[i], vars);
}

__global__ void fake_quant_bwd_k(int64_t n, const float *x, const float *min, const float *max, int quant_min,
                                 int quant_max, bool vars, const float *gy, float *gx, bool gx_acc, float *gmin,
                                 float *gmax) {
  __shared__ double sh[32];
  const lv_kfq q = lv_kfq_nudge(*min, *max, quant_min, quant_max, vars);
  double below = 0.0, above = 0.0;
  LV_GRID_LOOP(i, n) {
    const float v = x[i];
    const bool in = q.zero || (v >= q.nmin && v <= q.nmax);
    if (gx) gx[i] = (gx_acc ? gx[i] : 0.0f) + (in ? gy[i] : 0.0f);
    if (!q.zero && v < q.nmin) below += gy[i];
    if (!q.zero && v > q.nmax) above += gy[i];
  }
  below = lv_block_sum(below, sh);
  __syncthreads();
  above = lv_block_sum(above, sh);
  if (threadIdx.x == 0) {
    if (gmin) atomicAdd(gmin, (float)below);
    if (gmax) atomicAdd(gmax, (float)above);
  }
}

extern "C" void lv_cuda_fake_quant_fwd(lv_kctx *ctx, int64_t n, const float *x, const float *min, const float *max,
                                       int quant_min, int quant_max, bool vars, float *y) {
  if (n <= 0) return;
  fake_quant_fwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, min, max, quant_min,
                                                                               quant_max, vars, y);
  LV_CUDA_LAUNCHED();
}

extern "C" void lv_cuda_fake_quant_bwd(lv_kctx *ctx, int64_t n, const float *x, const float *min,
                                       const float *max, int quant_min, int quant_max, bool vars, const float *gy,
                                       float *gx, bool gx_acc, float *gmin, bool gmin_acc, float *gmax,
                                       bool gmax_acc) {
  if (gmin && !gmin_acc) LV_CUDA_CHECK(cudaMemsetAsync(gmin, 0, sizeof(float), ctx->stream));
  if (gmax && !gmax_acc) LV_CUDA_CHECK(cudaMemsetAsync(gmax, 0, sizeof(float), ctx->stream));
  if (n <= 0) return;
  fake_quant_bwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(
      n, x, min, max, quant_min, quant_max, vars, gy, gx, gx_acc, gmin, gmax);
  LV_CUDA_LAUNCHED();
}
