/* Layer normalization over the last axis and TF's per-image standardization. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

void lv_cpu_layer_norm_fwd(lv_kctx *ctx, int64_t rows, int64_t d, const float *x, const float *scale,
                           const float *bias, bool plus1, float eps, float *y, float *mean, float *rstd) {
#pragma omp parallel for if (rows * d > 65536) schedule(dynamic)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d;
    double s = 0, s2 = 0;
    for (int64_t j = 0; j < d; j++) s += xr[j];
    double m = s / (double)d;
    for (int64_t j = 0; j < d; j++) s2 += (xr[j] - m) * (xr[j] - m);
    float rs = (float)(1.0 / sqrt(s2 / (double)d + eps));
    mean[r] = (float)m;
    rstd[r] = rs;
    for (int64_t j = 0; j < d; j++) {
      float v = (xr[j] - (float)m) * rs;
      if (scale) v *= plus1 ? 1.0f + scale[j] : scale[j];
      if (bias) v += bias[j];
      y[r * d + j] = v;
    }
  }
}

void lv_cpu_layer_norm_bwd(lv_kctx *ctx, int64_t rows, int64_t d, const float *x, const float *scale,
                           bool plus1, const float *mean, const float *rstd, const float *gy, float *gx,
                           bool gx_acc, float *gscale, bool gscale_acc, float *gbias,
                           bool gbias_acc) {
  if (gscale && !gscale_acc) memset(gscale, 0, sizeof(float) * (size_t)d);
  if (gbias && !gbias_acc) memset(gbias, 0, sizeof(float) * (size_t)d);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d, *gr = gy + r * d;
    for (int64_t j = 0; j < d; j++) {
      float xh = (xr[j] - mean[r]) * rstd[r];
      if (gscale) gscale[j] += gr[j] * xh;
      if (gbias) gbias[j] += gr[j];
    }
  }
  if (!gx) return;
#pragma omp parallel for if (rows * d > 65536) schedule(dynamic)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d, *gr = gy + r * d;
    double a = 0, b = 0;
    for (int64_t j = 0; j < d; j++) {
      float g = gr[j] * (scale ? (plus1 ? 1.0f + scale[j] : scale[j]) : 1.0f);
      float xh = (xr[j] - mean[r]) * rstd[r];
      a += g;
      b += g * xh;
    }
    float ma = (float)(a / (double)d), mb = (float)(b / (double)d);
    for (int64_t j = 0; j < d; j++) {
      float g = gr[j] * (scale ? (plus1 ? 1.0f + scale[j] : scale[j]) : 1.0f);
      float xh = (xr[j] - mean[r]) * rstd[r];
      float v = rstd[r] * (g - ma - xh * mb);
      gx[r * d + j] = gx_acc ? gx[r * d + j] + v : v;
    }
  }
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
