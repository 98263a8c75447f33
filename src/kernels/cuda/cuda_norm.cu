/* Layer normalization, batch normalization and per-image standardization on the GPU,
 * with the CPU's formulas and double accumulators: layer norm and per-image statistics
 * one block per row, batch-norm statistics one thread per column. */
#include "kernels/cuda/cuda_kernels.cuh"

#define ROW_THREADS 256
#define ROW_LOOP(r, rows) for (int64_t r = blockIdx.x; r < (rows); r += gridDim.x)
#define COL_LOOP(j, c) for (int64_t j = threadIdx.x; j < (c); j += blockDim.x)

static unsigned row_blocks(int64_t rows) { return (unsigned)(rows < 65535 ? rows : 65535); }

__device__ inline float ln_scale(const float *scale, bool plus1, int64_t j) {
  return scale ? (plus1 ? 1.0f + scale[j] : scale[j]) : 1.0f;
}

__global__ void ln_fwd_k(int64_t rows, int64_t d, const float *x, const float *scale, const float *bias, bool plus1,
                         float eps, float *y, float *mean, float *rstd) {
  __shared__ double shd[32];
  ROW_LOOP(r, rows) {
    const float *xr = x + r * d;
    double s = 0;
    COL_LOOP(j, d) s += xr[j];
    double m = lv_block_sum(s, shd) / (double)d;
    double s2 = 0;
    COL_LOOP(j, d) s2 += (xr[j] - m) * (xr[j] - m);
    s2 = lv_block_sum(s2, shd);
    float rs = (float)(1.0 / sqrt(s2 / (double)d + eps));
    if (threadIdx.x == 0) {
      mean[r] = (float)m;
      rstd[r] = rs;
    }
    COL_LOOP(j, d) {
      float v = (xr[j] - (float)m) * rs;
      if (scale) v *= ln_scale(scale, plus1, j);
      if (bias) v += bias[j];
      y[r * d + j] = v;
    }
    __syncthreads();
  }
}

extern "C" void lv_cuda_layer_norm_fwd(lv_kctx *ctx, int64_t rows, int64_t d, const float *x, const float *scale,
                                       const float *bias, bool plus1, float eps, float *y, float *mean, float *rstd) {
  if (rows <= 0) return;
  ln_fwd_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, d, x, scale, bias, plus1, eps, y, mean, rstd);
  LV_CUDA_LAUNCHED();
}

__global__ void ln_bwd_k(int64_t rows, int64_t d, const float *x, const float *scale, bool plus1, const float *mean,
                         const float *rstd, const float *gy, float *gx, bool acc) {
  __shared__ double shd[32];
  ROW_LOOP(r, rows) {
    const float *xr = x + r * d, *gr = gy + r * d;
    const float mu = mean[r], rs = rstd[r];
    double a = 0, b = 0;
    COL_LOOP(j, d) {
      float g = gr[j] * ln_scale(scale, plus1, j);
      float xh = (xr[j] - mu) * rs;
      a += g;
      b += g * xh;
    }
    a = lv_block_sum(a, shd);
    b = lv_block_sum(b, shd);
    float ma = (float)(a / (double)d), mb = (float)(b / (double)d);
    COL_LOOP(j, d) {
      float g = gr[j] * ln_scale(scale, plus1, j);
      float xh = (xr[j] - mu) * rs;
      float v = rs * (g - ma - xh * mb);
      gx[r * d + j] = acc ? gx[r * d + j] + v : v;
    }
    __syncthreads();
  }
}

/* Scale and bias gradients: one thread per column adds its rows in order (the CPU's). */
__global__ void ln_param_k(int64_t rows, int64_t d, const float *x, const float *mean, const float *rstd,
                           const float *gy, float *gscale, bool gscale_acc, float *gbias, bool gbias_acc) {
  LV_GRID_LOOP(j, d) {
    float ss = gscale && gscale_acc ? gscale[j] : 0.0f, sb = gbias && gbias_acc ? gbias[j] : 0.0f;
    for (int64_t r = 0; r < rows; r++) {
      float g = gy[r * d + j];
      ss += g * ((x[r * d + j] - mean[r]) * rstd[r]);
      sb += g;
    }
    if (gscale) gscale[j] = ss;
    if (gbias) gbias[j] = sb;
  }
}

extern "C" void lv_cuda_layer_norm_bwd(lv_kctx *ctx, int64_t rows, int64_t d, const float *x, const float *scale,
                                       bool plus1, const float *mean, const float *rstd, const float *gy, float *gx,
                                       bool gx_acc, float *gscale, bool gscale_acc, float *gbias, bool gbias_acc) {
  if ((gscale || gbias) && d > 0) {
    ln_param_k<<<lv_cuda_blocks(ctx, d), LV_CUDA_THREADS, 0, ctx->stream>>>(rows, d, x, mean, rstd, gy, gscale,
                                                                            gscale_acc, gbias, gbias_acc);
    LV_CUDA_LAUNCHED();
  }
  if (!gx || rows <= 0) return;
  ln_bwd_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, d, x, scale, plus1, mean, rstd, gy, gx, gx_acc);
  LV_CUDA_LAUNCHED();
}

/* ---- batch norm: scratch is float col[4 * c] (per-column factors). ---- */

extern "C" size_t lv_cuda_batch_norm_scratch(lv_kctx *ctx, int64_t rows, int64_t c) {
  return sizeof(float) * (size_t)(c > 0 ? 4 * c : 1);
}

__device__ inline double bn_w(const float *pad, int64_t r) { return pad ? 1.0f - pad[r] : 1.0f; }

/* One thread per column: the weighted moments in double (two passes), Lingvo's n < 1 case
 * (sums divided by 1) as on the CPU; col = scale, beta. */
__global__ void bn_stats_k(int64_t rows, int64_t c, const float *x, const float *pad, const float *gamma,
                           const float *beta, float eps, bool batch_stats, float *mean, float *var, float *rstd,
                           double *count, float *col) {
  LV_GRID_LOOP(k, c) {
    if (batch_stats) {
      double n = 0, s = 0;
      for (int64_t r = 0; r < rows; r++) {
        double w = bn_w(pad, r);
        n += w;
        s += w * x[r * c + k];
      }
      double m = n > 0 ? s / n : 0.0, q = 0;
      for (int64_t r = 0; r < rows; r++) {
        double w = bn_w(pad, r);
        if (w == 0) continue;
        double dd = x[r * c + k] - m;
        q += w * dd * dd;
      }
      if (n >= 1) {
        mean[k] = (float)m;
        var[k] = (float)(q / n);
      } else {
        const double mk = n * m;
        mean[k] = (float)mk;
        var[k] = (float)(q + n * (m - mk) * (m - mk));
      }
      if (k == 0) *count = n > 1 ? n : 1;
    } else if (k == 0) {
      *count = 1;
    }
    const double rs = 1.0 / sqrt((double)var[k] + (double)eps);
    rstd[k] = (float)rs;
    col[k] = (float)rs * (gamma ? 1.0f + gamma[k] : 1.0f);
    col[c + k] = beta ? beta[k] : 0.0f;
  }
}

__global__ void bn_norm_k(int64_t rows, int64_t c, const float *x, const float *pad, bool zero_padded,
                          const float *mean, const float *col, float *y) {
  LV_GRID_LOOP(i, rows * c) {
    int64_t r = i / c, j = i % c;
    const float w = (float)bn_w(pad, r);
    float v = (x[i] - mean[j]) * col[j] + col[c + j];
    y[i] = zero_padded ? (w == 0 ? 0.0f : (w != 1 ? v * w : v)) : v;
  }
}

extern "C" void lv_cuda_batch_norm_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const float *pad,
                                       const float *gamma, const float *beta, float eps, bool batch_stats,
                                       bool zero_padded, float *mean, float *var, float *rstd, double *count,
                                       void *scratch, float *y) {
  if (c <= 0) return;
  float *col = (float *)scratch;
  bn_stats_k<<<lv_cuda_blocks(ctx, c), LV_CUDA_THREADS, 0, ctx->stream>>>(rows, c, x, pad, gamma, beta, eps,
                                                                          batch_stats, mean, var, rstd, count, col);
  LV_CUDA_LAUNCHED();
  if (rows <= 0) return;
  bn_norm_k<<<lv_cuda_blocks(ctx, rows * c), LV_CUDA_THREADS, 0, ctx->stream>>>(rows, c, x, pad, zero_padded, mean,
                                                                                col, y);
  LV_CUDA_LAUNCHED();
}

/* One thread per column: sums of g and g * xhat (double); col = rstd, k, a, b. */
__global__ void bn_grad_sums_k(int64_t rows, int64_t c, const float *x, const float *pad, const float *gamma,
                               const float *mean, const float *rstd, const double *count, bool batch_stats,
                               bool zero_padded, bool need_sums, const float *gy, float *col, float *ggamma,
                               bool ggamma_acc, float *gbeta, bool gbeta_acc) {
  LV_GRID_LOOP(k, c) {
    double sg = 0, sgx = 0;
    if (need_sums)
      for (int64_t r = 0; r < rows; r++) {
        const float w = zero_padded ? (float)bn_w(pad, r) : 1.0f;
        if (w == 0) continue;
        const float g = gy[r * c + k] * w;
        sg += g;
        sgx += (double)g * ((x[r * c + k] - mean[k]) * rstd[k]);
      }
    if (gbeta) gbeta[k] = gbeta_acc ? gbeta[k] + (float)sg : (float)sg;
    if (ggamma) ggamma[k] = ggamma_acc ? ggamma[k] + (float)sgx : (float)sgx;
    const double n = *count;
    col[k] = rstd[k];
    col[c + k] = rstd[k] * (gamma ? 1.0f + gamma[k] : 1.0f);
    col[2 * c + k] = batch_stats ? (float)(sg / n) : 0.0f;
    col[3 * c + k] = batch_stats ? (float)(sgx / n) : 0.0f;
  }
}

__global__ void bn_grad_k(int64_t rows, int64_t c, const float *x, const float *pad, const float *mean,
                          bool batch_stats, bool zero_padded, const float *gy, const float *col, float *gx, bool acc) {
  LV_GRID_LOOP(i, rows * c) {
    int64_t r = i / c, j = i % c;
    const float w = (float)bn_w(pad, r), go = zero_padded ? w : 1.0f, wm = batch_stats ? w : 0.0f;
    const float *rs = col, *kk = col + c, *a = col + 2 * c, *b = col + 3 * c;
    float v = (go == 0 && wm == 0) ? 0.0f : kk[j] * (gy[i] * go - wm * (a[j] + (x[i] - mean[j]) * rs[j] * b[j]));
    gx[i] = acc ? gx[i] + v : v;
  }
}

extern "C" void lv_cuda_batch_norm_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const float *pad,
                                       const float *gamma, const float *mean, const float *rstd, const double *count,
                                       bool batch_stats, bool zero_padded, const float *gy, void *scratch, float *gx,
                                       bool gx_acc, float *ggamma, bool ggamma_acc, float *gbeta, bool gbeta_acc) {
  if (c <= 0) return;
  float *col = (float *)scratch;
  const bool need_sums = ggamma || gbeta || (gx && batch_stats);
  bn_grad_sums_k<<<lv_cuda_blocks(ctx, c), LV_CUDA_THREADS, 0, ctx->stream>>>(
      rows, c, x, pad, gamma, mean, rstd, count, batch_stats, zero_padded, need_sums, gy, col, ggamma, ggamma_acc,
      gbeta, gbeta_acc);
  LV_CUDA_LAUNCHED();
  if (!gx || rows <= 0) return;
  bn_grad_k<<<lv_cuda_blocks(ctx, rows * c), LV_CUDA_THREADS, 0, ctx->stream>>>(rows, c, x, pad, mean, batch_stats,
                                                                                zero_padded, gy, col, gx, gx_acc);
  LV_CUDA_LAUNCHED();
}

__global__ void per_image_std_k(int64_t n, int64_t per, const float *x, float *y) {
  __shared__ double shd[32];
  ROW_LOOP(i, n) {
    const float *xi = x + i * per;
    double s = 0, s2 = 0;
    COL_LOOP(j, per) {
      s += xi[j];
      s2 += (double)xi[j] * xi[j];
    }
    s = lv_block_sum(s, shd);
    s2 = lv_block_sum(s2, shd);
    double m = s / (double)per;
    double var = s2 / (double)per - m * m;
    if (var < 0) var = 0;
    double sd = sqrt(var), minsd = 1.0 / sqrt((double)per);
    float inv = (float)(1.0 / (sd > minsd ? sd : minsd));
    COL_LOOP(j, per) y[i * per + j] = (xi[j] - (float)m) * inv;
    __syncthreads();
  }
}

extern "C" void lv_cuda_per_image_std(lv_kctx *ctx, int64_t n, int64_t per, const float *x, float *y) {
  if (n <= 0 || per <= 0) return;
  per_image_std_k<<<row_blocks(n), ROW_THREADS, 0, ctx->stream>>>(n, per, x, y);
  LV_CUDA_LAUNCHED();
}
