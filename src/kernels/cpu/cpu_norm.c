/* Layer normalization over the last axis and TF's per-image standardization. */
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

LV_CPU_PAR_LOOP(ln_fwd_rows, ln_job, r, {
  const int64_t d = J->d;
  const float *xr = J->x + r * d;
  double s = 0, s2 = 0;
  for (int64_t j = 0; j < d; j++) s += xr[j];
  double m = s / (double)d;
  for (int64_t j = 0; j < d; j++) s2 += (xr[j] - m) * (xr[j] - m);
  float rs = (float)(1.0 / sqrt(s2 / (double)d + J->eps));
  J->mean_out[r] = (float)m;
  J->rstd_out[r] = rs;
  for (int64_t j = 0; j < d; j++) {
    float v = (xr[j] - (float)m) * rs;
    if (J->scale) v *= J->plus1 ? 1.0f + J->scale[j] : J->scale[j];
    if (J->bias) v += J->bias[j];
    J->y[r * d + j] = v;
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
  double a = 0, b = 0;
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
    J->gx[r * d + j] = J->gx_acc ? J->gx[r * d + j] + v : v;
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
