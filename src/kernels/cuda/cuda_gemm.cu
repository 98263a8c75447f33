/* GEMM and strided batched GEMM on cuBLAS. lingvoc's matrices are row-major; cuBLAS's
 * are column-major, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the operands
 * swap places and keep their transposition flags. Full float32 (no TF32) unless
 * lv_cuda_allow_tf32 or LINGVOC_CUDA_TF32=1. */
#include "kernels/cuda/cuda_kernels.cuh"

__global__ void scale_k(int64_t m, int64_t n, float beta, float *c, int64_t ldc) {
  LV_GRID_LOOP(i, m * n) {
    float *p = c + (i / n) * ldc + i % n;
    *p = beta == 0.0f ? 0.0f : beta * *p;
  }
}

/* k == 0: C = beta * C (beta 0 overwrites, as cuBLAS and BLAS do). */
static void scale_only(lv_kctx *ctx, int64_t batch, int64_t m, int64_t n, float beta, float *c, int64_t ldc,
                       int64_t stride_c) {
  for (int64_t b = 0; b < batch; b++) {
    scale_k<<<lv_cuda_blocks(ctx, m * n), LV_CUDA_THREADS, 0, ctx->stream>>>(m, n, beta, c + b * stride_c, ldc);
    LV_CUDA_LAUNCHED();
  }
}

static void check_int(int64_t v) { LV_ASSERTF(v >= 0 && v <= INT32_MAX, "cuBLAS: dimension %lld exceeds int32", (long long)v); }

extern "C" void lv_cuda_gemm(lv_kctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                             const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                             int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    scale_only(ctx, 1, m, n, beta, c, ldc, 0);
    return;
  }
  check_int(m), check_int(n), check_int(k), check_int(lda), check_int(ldb), check_int(ldc);
  LV_CUBLAS_CHECK(cublasSgemm(ctx->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
                              (int)k, &alpha, b, (int)ldb, a, (int)lda, &beta, c, (int)ldc));
}

extern "C" void lv_cuda_gemm_batched(lv_kctx *ctx, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k,
                                     float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                                     int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                                     int64_t stride_c) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  if (k <= 0) {
    scale_only(ctx, batch, m, n, beta, c, ldc, stride_c);
    return;
  }
  check_int(m), check_int(n), check_int(k), check_int(lda), check_int(ldb), check_int(ldc), check_int(batch);
  LV_CUBLAS_CHECK(cublasSgemmStridedBatched(ctx->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            (int)n, (int)m, (int)k, &alpha, b, (int)ldb, stride_b, a, (int)lda,
                                            stride_a, &beta, c, (int)ldc, stride_c, (int)batch));
}
