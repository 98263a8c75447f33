/* Layer normalization over the last axis, batch normalization over the rows and TF's
 * per-image standardization. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

typedef struct ln_job {
  int64_t d;
  const float *x, *scale, *bias, *mean, *rstd, *gy;
  bool plus1, gx_acc;
  float eps;
  int64_t rows;
  float *y, *mean_out, *rstd_out, *gx, *gscale, *gbias;
} ln_job;

/* The rows' sums are SIMD reductions in double (a fixed lane-wise order: the same bits for
 * a row whatever the thread count); the common case of a scale and a bias (no plus1)
 * has its own vectorized loop. */
LV_CPU_PAR_LOOP(ln_fwd_rows, ln_job, r, {
  const int64_t d = J->d;
  const float *xr = J->x + r * d;
  double s = 0, s2 = 0;
_Pragma("omp simd reduction(+ : s)")
  for (int64_t j = 0; j < d; j++) s += xr[j];
  double m = s / (double)d;
_Pragma("omp simd reduction(+ : s2)")
  for (int64_t j = 0; j < d; j++) s2 += (xr[j] - m) * (xr[j] - m);
  float rs = (float)(1.0 / sqrt(s2 / (double)d + J->eps));
  J->mean_out[r] = (float)m;
  J->rstd_out[r] = rs;
  const float mf = (float)m;
  float *yr = J->y + r * d;
  if (J->scale && J->bias && !J->plus1) {
    const float *sc = J->scale, *b = J->bias;
_Pragma("omp simd")
    for (int64_t j = 0; j < d; j++) yr[j] = (xr[j] - mf) * rs * sc[j] + b[j];
    continue;
  }
  for (int64_t j = 0; j < d; j++) {
    float v = (xr[j] - mf) * rs;
    if (J->scale) v *= J->plus1 ? 1.0f + J->scale[j] : J->scale[j];
    if (J->bias) v += J->bias[j];
    yr[j] = v;
  }
})

/* Rows are independent: any split gives the same bits. */
static int64_t ln_grain(int64_t rows, int64_t d) { return rows * d > 65536 ? lv_cpu_grain(rows, 1) : rows; }

void lv_cpu_layer_norm_fwd(lv_kctx *ctx, int64_t rows, int64_t d, const float *x, const float *scale,
                           const float *bias, bool plus1, float eps, float *y, float *mean, float *rstd) {
  ln_job j = {.d = d, .x = x, .scale = scale, .bias = bias, .plus1 = plus1, .eps = eps, .y = y, .mean_out = mean,
              .rstd_out = rstd};
  lv_cpu_par(ctx, rows, ln_grain(rows, d), ln_fwd_rows, &j);
}

LV_CPU_PAR_LOOP(ln_bwd_rows, ln_job, r, {
  const int64_t d = J->d;
  const float *xr = J->x + r * d, *gr = J->gy + r * d, *scale = J->scale;
  const float mean = J->mean[r], rstd = J->rstd[r];
  float *gxr = J->gx + r * d;
  double a = 0, b = 0;
  if (scale && !J->plus1) { /* the common case, vectorized (the same bits as below) */
_Pragma("omp simd reduction(+ : a, b)")
    for (int64_t j = 0; j < d; j++) {
      float g = gr[j] * scale[j];
      a += g;
      b += g * ((xr[j] - mean) * rstd);
    }
    const float ma = (float)(a / (double)d), mb = (float)(b / (double)d);
    if (J->gx_acc) {
_Pragma("omp simd")
      for (int64_t j = 0; j < d; j++) gxr[j] += rstd * (gr[j] * scale[j] - ma - ((xr[j] - mean) * rstd) * mb);
    } else {
_Pragma("omp simd")
      for (int64_t j = 0; j < d; j++) gxr[j] = rstd * (gr[j] * scale[j] - ma - ((xr[j] - mean) * rstd) * mb);
    }
    continue;
  }
  for (int64_t j = 0; j < d; j++) {
    float g = gr[j] * (scale ? (J->plus1 ? 1.0f + scale[j] : scale[j]) : 1.0f);
    float xh = (xr[j] - mean) * rstd;
    a += g;
    b += g * xh;
  }
  float ma = (float)(a / (double)d), mb = (float)(b / (double)d);
  for (int64_t j = 0; j < d; j++) {
    float g = gr[j] * (scale ? (J->plus1 ? 1.0f + scale[j] : scale[j]) : 1.0f);
    float xh = (xr[j] - mean) * rstd;
    float v = rstd * (g - ma - xh * mb);
    gxr[j] = J->gx_acc ? gxr[j] + v : v;
  }
})

/* Scale and bias gradients: each column adds its rows in order, so splitting by columns
 * gives the same bits as one thread. */
static void ln_param_cols(void *arg, int64_t lo, int64_t hi, int slot) {
  const ln_job *J = arg;
  (void)slot;
  const int64_t d = J->d;
  for (int64_t r = 0; r < J->rows; r++) {
    const float *xr = J->x + r * d, *gr = J->gy + r * d;
    for (int64_t j = lo; j < hi; j++) {
      float xh = (xr[j] - J->mean[r]) * J->rstd[r];
      if (J->gscale) J->gscale[j] += gr[j] * xh;
      if (J->gbias) J->gbias[j] += gr[j];
    }
  }
}

void lv_cpu_layer_norm_bwd(lv_kctx *ctx, int64_t rows, int64_t d, const float *x, const float *scale,
                           bool plus1, const float *mean, const float *rstd, const float *gy, float *gx,
                           bool gx_acc, float *gscale, bool gscale_acc, float *gbias,
                           bool gbias_acc) {
  if (gscale && !gscale_acc) memset(gscale, 0, sizeof(float) * (size_t)d);
  if (gbias && !gbias_acc) memset(gbias, 0, sizeof(float) * (size_t)d);
  ln_job j = {.d = d, .rows = rows, .x = x, .scale = scale, .plus1 = plus1, .mean = mean, .rstd = rstd, .gy = gy,
              .gx = gx, .gx_acc = gx_acc, .gscale = gscale, .gbias = gbias};
  if (gscale || gbias) lv_cpu_par(ctx, d, rows * d > 65536 ? lv_cpu_grain(d, 64) : d, ln_param_cols, &j);
  if (!gx) return;
  lv_cpu_par(ctx, rows, ln_grain(rows, d), ln_bwd_rows, &j);
}

/* Batch norm. Rows are cut into blocks of about BN_BLOCK_FLOATS elements (from the shape
 * alone); each block's column statistics go to its own slot of the scratch and are then
 * combined in block order, so the bits do not depend on the threads. The forward reads x
 * once from memory for the moments (a block's second pass, around its own mean, finds it
 * in cache; blocks are merged with Chan et al.'s pairwise update, all in double) and once
 * to normalize. Scratch: double wsum[nb], a[nb * c], b[nb * c], then float col[4 * c]. */
#define BN_BLOCK_FLOATS 16384

static int64_t bn_block_rows(int64_t c) { return c >= BN_BLOCK_FLOATS ? 1 : BN_BLOCK_FLOATS / c; }
static int64_t bn_blocks(int64_t rows, int64_t c) {
  int64_t br = bn_block_rows(c);
  return (rows + br - 1) / br;
}

size_t lv_cpu_batch_norm_scratch(lv_kctx *ctx, int64_t rows, int64_t c) {
  (void)ctx;
  if (c <= 0) return sizeof(double);
  const int64_t nb = rows > 0 ? bn_blocks(rows, c) : 0;
  return sizeof(double) * (size_t)(nb * (2 * c + 1)) + sizeof(float) * (size_t)(4 * c);
}

typedef struct bn_job {
  int64_t rows, c, br, nb;
  const float *x, *pad, *gy;
  const float *mean, *col; /* col: per-column factors of the elementwise pass */
  bool zero_padded, batch_stats;
  double *wsum, *pa, *pb; /* per block: weight, and two [c] partials */
  float *out;             /* y or gx */
  bool acc;
} bn_job;

static inline float bn_w(const float *pad, int64_t r) { return pad ? 1.0f - pad[r] : 1.0f; }

/* Per block: wsum, its mean (pa) and sum of w (x - block mean)^2 (pb). */
static void bn_moment_blocks(void *arg, int64_t lo, int64_t hi, int slot) {
  const bn_job *J = arg;
  (void)slot;
  const int64_t c = J->c;
  for (int64_t blk = lo; blk < hi; blk++) {
    const int64_t r0 = blk * J->br, r1 = r0 + J->br < J->rows ? r0 + J->br : J->rows;
    double *restrict m = J->pa + blk * c, *restrict q = J->pb + blk * c, n = 0;
    for (int64_t j = 0; j < c; j++) m[j] = q[j] = 0;
    for (int64_t r = r0; r < r1; r++) {
      const double w = bn_w(J->pad, r);
      if (w == 0) continue;
      const float *restrict xr = J->x + r * c;
      n += w;
      if (w == 1) {
#pragma omp simd
        for (int64_t j = 0; j < c; j++) m[j] += xr[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < c; j++) m[j] += w * xr[j];
      }
    }
    J->wsum[blk] = n;
    if (n == 0) continue;
    for (int64_t j = 0; j < c; j++) m[j] /= n;
    for (int64_t r = r0; r < r1; r++) {
      const double w = bn_w(J->pad, r);
      if (w == 0) continue;
      const float *restrict xr = J->x + r * c;
#pragma omp simd
      for (int64_t j = 0; j < c; j++) {
        double d = xr[j] - m[j];
        q[j] += w * d * d;
      }
    }
  }
}

/* y = (x - mean) * scale + beta, times w with zero_padded; col = scale[c], beta[c]. */
static void bn_normalize_rows(void *arg, int64_t lo, int64_t hi, int slot) {
  const bn_job *J = arg;
  (void)slot;
  const int64_t c = J->c;
  const float *restrict mean = J->mean, *restrict scale = J->col, *restrict beta = J->col + c;
  for (int64_t r = lo; r < hi; r++) {
    const float *restrict xr = J->x + r * c;
    float *restrict yr = J->out + r * c;
    const float w = bn_w(J->pad, r);
    if (J->zero_padded && w == 0) {
      for (int64_t j = 0; j < c; j++) yr[j] = 0;
    } else if (J->zero_padded && w != 1) {
#pragma omp simd
      for (int64_t j = 0; j < c; j++) yr[j] = ((xr[j] - mean[j]) * scale[j] + beta[j]) * w;
    } else {
#pragma omp simd
      for (int64_t j = 0; j < c; j++) yr[j] = (xr[j] - mean[j]) * scale[j] + beta[j];
    }
  }
}

/* Rows per piece of an elementwise pass: whole blocks, about 16 pieces. */
static int64_t bn_row_grain(int64_t rows, int64_t c) {
  return rows * c > 65536 ? lv_cpu_grain(rows, bn_block_rows(c)) : rows;
}

void lv_cpu_batch_norm_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const float *pad,
                           const float *gamma, const float *beta, float eps, bool batch_stats,
                           bool zero_padded, float *mean, float *var, float *rstd, double *count,
                           void *scratch, float *y) {
  if (c <= 0) return;
  const int64_t nb = rows > 0 ? bn_blocks(rows, c) : 0;
  double *wsum = scratch, *pa = wsum + nb, *pb = pa + nb * c;
  float *col = (float *)(pb + nb * c);
  bn_job j = {.rows = rows, .c = c, .br = bn_block_rows(c), .nb = nb, .x = x, .pad = pad, .mean = mean, .col = col,
              .zero_padded = zero_padded, .wsum = wsum, .pa = pa, .pb = pb, .out = y};
  if (batch_stats) lv_cpu_par(ctx, nb, rows * c > 65536 ? lv_cpu_grain(nb, 1) : nb, bn_moment_blocks, &j);
  double n = 0;
  if (batch_stats)
    for (int64_t b = 0; b < nb; b++) n += wsum[b];
  *count = n > 1 ? n : 1;
  for (int64_t k = 0; k < c; k++) {
    if (batch_stats) {
      /* Chan et al.: block b (weight, mean, M2) merged into the running (N, M, Q). */
      double N = 0, M = 0, Q = 0;
      for (int64_t b = 0; b < nb; b++) {
        const double wb = wsum[b];
        if (wb == 0) continue;
        const double d = pa[b * c + k] - M, nn = N + wb;
        M += d * (wb / nn);
        Q += pb[b * c + k] + d * d * (N * wb / nn);
        N = nn;
      }
      /* n < 1 (every row padded, or fractional weights): Lingvo divides the sums by 1. */
      if (n >= 1) {
        mean[k] = (float)M;
        var[k] = (float)(Q / n);
      } else {
        const double mk = N * M;
        mean[k] = (float)mk;
        var[k] = (float)(Q + N * (M - mk) * (M - mk));
      }
    }
    const double rs = 1.0 / sqrt((double)var[k] + (double)eps);
    rstd[k] = (float)rs;
    col[k] = (float)rs * (gamma ? 1.0f + gamma[k] : 1.0f);
    col[c + k] = beta ? beta[k] : 0.0f;
  }
  lv_cpu_par(ctx, rows, bn_row_grain(rows, c), bn_normalize_rows, &j);
}

/* Per block: sum of g and of g * xhat (g = gy, times w with zero_padded); col = rstd. */
static void bn_grad_blocks(void *arg, int64_t lo, int64_t hi, int slot) {
  const bn_job *J = arg;
  (void)slot;
  const int64_t c = J->c;
  const float *restrict mean = J->mean, *restrict rstd = J->col;
  for (int64_t blk = lo; blk < hi; blk++) {
    const int64_t r0 = blk * J->br, r1 = r0 + J->br < J->rows ? r0 + J->br : J->rows;
    double *restrict sg = J->pa + blk * c, *restrict sgx = J->pb + blk * c;
    for (int64_t j = 0; j < c; j++) sg[j] = sgx[j] = 0;
    for (int64_t r = r0; r < r1; r++) {
      const float w = J->zero_padded ? bn_w(J->pad, r) : 1.0f;
      if (w == 0) continue;
      const float *restrict xr = J->x + r * c, *restrict gr = J->gy + r * c;
#pragma omp simd
      for (int64_t j = 0; j < c; j++) {
        const float g = gr[j] * w;
        sg[j] += g;
        sgx[j] += (double)g * ((xr[j] - mean[j]) * rstd[j]);
      }
    }
  }
}

/* gx (+)= k * (g - w * (a + xhat * b)); col = rstd[c], k[c], a[c], b[c]. */
static void bn_grad_rows(void *arg, int64_t lo, int64_t hi, int slot) {
  const bn_job *J = arg;
  (void)slot;
  const int64_t c = J->c;
  const float *restrict mean = J->mean, *restrict rstd = J->col, *restrict k = J->col + c,
                        *restrict a = J->col + 2 * c, *restrict b = J->col + 3 * c;
  for (int64_t r = lo; r < hi; r++) {
    const float *restrict xr = J->x + r * c, *restrict gr = J->gy + r * c;
    float *restrict gx = J->out + r * c;
    const float w = bn_w(J->pad, r), go = J->zero_padded ? w : 1.0f, wm = J->batch_stats ? w : 0.0f;
    if (go == 0 && wm == 0) {
      if (!J->acc)
        for (int64_t j = 0; j < c; j++) gx[j] = 0;
      continue;
    }
    if (J->acc) {
#pragma omp simd
      for (int64_t j = 0; j < c; j++)
        gx[j] += k[j] * (gr[j] * go - wm * (a[j] + (xr[j] - mean[j]) * rstd[j] * b[j]));
    } else {
#pragma omp simd
      for (int64_t j = 0; j < c; j++)
        gx[j] = k[j] * (gr[j] * go - wm * (a[j] + (xr[j] - mean[j]) * rstd[j] * b[j]));
    }
  }
}

void lv_cpu_batch_norm_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const float *pad,
                           const float *gamma, const float *mean, const float *rstd, const double *count,
                           bool batch_stats, bool zero_padded, const float *gy, void *scratch, float *gx,
                           bool gx_acc, float *ggamma, bool ggamma_acc, float *gbeta, bool gbeta_acc) {
  if (c <= 0) return;
  const int64_t nb = rows > 0 ? bn_blocks(rows, c) : 0;
  double *pa = (double *)scratch + nb, *pb = pa + nb * c;
  float *col = (float *)(pb + nb * c);
  for (int64_t k = 0; k < c; k++) col[k] = rstd[k];
  bn_job j = {.rows = rows, .c = c, .br = bn_block_rows(c), .nb = nb, .x = x, .pad = pad, .gy = gy, .mean = mean,
              .col = col, .zero_padded = zero_padded, .batch_stats = batch_stats, .pa = pa, .pb = pb, .out = gx,
              .acc = gx_acc};
  const bool need_sums = ggamma || gbeta || (gx && batch_stats);
  if (need_sums) lv_cpu_par(ctx, nb, rows * c > 65536 ? lv_cpu_grain(nb, 1) : nb, bn_grad_blocks, &j);
  const double n = *count;
  for (int64_t k = 0; k < c; k++) {
    double sg = 0, sgx = 0;
    if (need_sums)
      for (int64_t b = 0; b < nb; b++) sg += pa[b * c + k], sgx += pb[b * c + k];
    if (gbeta) gbeta[k] = gbeta_acc ? gbeta[k] + (float)sg : (float)sg;
    if (ggamma) ggamma[k] = ggamma_acc ? ggamma[k] + (float)sgx : (float)sgx;
    col[c + k] = rstd[k] * (gamma ? 1.0f + gamma[k] : 1.0f);
    col[2 * c + k] = batch_stats ? (float)(sg / n) : 0.0f;
    col[3 * c + k] = batch_stats ? (float)(sgx / n) : 0.0f;
  }
  if (gx) lv_cpu_par(ctx, rows, bn_row_grain(rows, c), bn_grad_rows, &j);
}

/* tf.image.per_image_standardization: (x - mean) / max(stddev, 1/sqrt(N)), with the
 * variance computed as E[x^2] - E[x]^2 clamped at 0 (TF's formula). */
typedef struct std_job {
  int64_t per;
  const float *x;
  float *y;
} std_job;

static void std_images(void *arg, int64_t lo, int64_t hi, int slot) {
  const std_job *J = arg;
  const int64_t per = J->per;
  float *y = J->y;
  (void)slot;
  for (int64_t i = lo; i < hi; i++) {
    const float *xi = J->x + i * per;
    double s = 0, s2 = 0;
    for (int64_t j = 0; j < per; j++) {
      s += xi[j];
      s2 += (double)xi[j] * xi[j];
    }
    double m = s / (double)per;
    double var = s2 / (double)per - m * m;
    if (var < 0) var = 0;
    double sd = sqrt(var), minsd = 1.0 / sqrt((double)per);
    float inv = (float)(1.0 / (sd > minsd ? sd : minsd));
    for (int64_t j = 0; j < per; j++) y[i * per + j] = (xi[j] - (float)m) * inv;
  }
}

void lv_cpu_per_image_std(lv_kctx *ctx, int64_t n, int64_t per, const float *x, float *y) {
  std_job j = {per, x, y};
  lv_cpu_par(ctx, n, n * per > 65536 ? lv_cpu_grain(n, 1) : n, std_images, &j);
}
