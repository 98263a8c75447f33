/* Max and average pooling over NHWC with TF's padding: padded positions never win a max
 * and are not counted in an average. Max pooling keeps the winning input position per
 * output so its gradient goes to exactly that element (the first maximum on ties). */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

static inline void window(int o, int s, int pad, int k, int lim, int *b,
                          int *e) {
  int start = o * s - pad;
  *b = start < 0 ? 0 : start;
  *e = start + k > lim ? lim : start + k;
}

typedef struct pool_job {
  const lv_conv_geom *g;
  const float *x, *gy;
  float *y, *gx;
  int32_t *argmax;
  const int32_t *cargmax;
  bool acc;
} pool_job;

static void max_pool_fwd_images(void *arg, int64_t lo, int64_t hi, int slot) {
  const pool_job *j = arg;
  const lv_conv_geom *g = j->g;
  const float *x = j->x;
  float *y = j->y;
  int32_t *argmax = j->argmax;
  (void)slot;
  const int C = g->c;
  const int64_t xs = (int64_t)g->h * g->w * C, ys = (int64_t)g->oh * g->ow * C;
  for (int64_t n = lo; n < hi; n++) {
    const float *xi = x + n * xs;
    for (int oh = 0; oh < g->oh; oh++) {
      int h0, h1;
      window(oh, g->sh, g->pt, g->kh, g->h, &h0, &h1);
      for (int ow = 0; ow < g->ow; ow++) {
        int w0, w1;
        window(ow, g->sw, g->pl, g->kw, g->w, &w0, &w1);
        float *yo = y + n * ys + ((int64_t)oh * g->ow + ow) * C;
        int32_t *ao = argmax + n * ys + ((int64_t)oh * g->ow + ow) * C;
        if (h1 - h0 == 2 && w1 - w0 == 2) {
          /* The common 2x2 window with no padding, in one pass: the same comparisons in
           * the same order as the general loop below (first maximum wins). */
          int32_t b0 = (int32_t)(((int64_t)h0 * g->w + w0) * C), b1 = b0 + C;
          int32_t b2 = b0 + g->w * C, b3 = b2 + C;
          const float *p0 = xi + b0, *p1 = xi + b1, *p2 = xi + b2, *p3 = xi + b3;
#pragma omp simd
          for (int c = 0; c < C; c++) {
            float v = p0[c];
            int32_t a = b0 + c;
            if (p1[c] > v) { v = p1[c]; a = b1 + c; }
            if (p2[c] > v) { v = p2[c]; a = b2 + c; }
            if (p3[c] > v) { v = p3[c]; a = b3 + c; }
            yo[c] = v;
            ao[c] = a;
          }
          continue;
        }
        /* SAME/VALID windows always hold at least one real element: start from it. */
        int32_t base0 = (int32_t)(((int64_t)h0 * g->w + w0) * C);
        for (int c = 0; c < C; c++) {
          yo[c] = xi[base0 + c];
          ao[c] = base0 + c;
        }
        for (int ih = h0; ih < h1; ih++)
          for (int iw = (ih == h0 ? w0 + 1 : w0); iw < w1; iw++) {
            int32_t base = (int32_t)(((int64_t)ih * g->w + iw) * C);
            const float *xp = xi + base;
#pragma omp simd
            for (int c = 0; c < C; c++) {
              /* Masks instead of branches: which element wins is data-dependent, so a
               * branch mispredicts half the time, and selects vectorize. */
              float v = xp[c], b = yo[c];
              int32_t m = -(int32_t)(v > b);
              yo[c] = v > b ? v : b;
              ao[c] = (ao[c] & ~m) | ((base + c) & m);
            }
          }
      }
    }
  }
}

void lv_cpu_max_pool_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, float *y, int32_t *argmax) {
  pool_job j = {.g = g, .x = x, .y = y, .argmax = argmax};
  lv_cpu_par(ctx, g->n, 1, max_pool_fwd_images, &j);
}

/* Windows that tile the image (window = stride, no padding, no remainder): every input
 * element is in exactly one window, so one streaming pass in input order writes each
 * element's gradient, 0 + gy at the window's argmax and 0 elsewhere (the same bits as
 * zeroing then adding), instead of zeroing the whole gradient and scattering into it. */
static bool windows_tile(const lv_conv_geom *g) {
  return g->kh == g->sh && g->kw == g->sw && g->pt == 0 && g->pl == 0 && (int64_t)g->oh * g->sh == g->h &&
         (int64_t)g->ow * g->sw == g->w;
}

static void max_pool_bwd_tiled(const pool_job *j, int64_t n) {
  const lv_conv_geom *g = j->g;
  const int C = g->c;
  const int64_t xs = (int64_t)g->h * g->w * C, ys = (int64_t)g->oh * g->ow * C;
  const int32_t *am = j->cargmax + n * ys;
  const float *gy = j->gy + n * ys;
  float *gx = j->gx + n * xs;
  for (int oh = 0; oh < g->oh; oh++)
    for (int dh = 0; dh < g->kh; dh++)
      for (int ow = 0; ow < g->ow; ow++) {
        const int64_t o = ((int64_t)oh * g->ow + ow) * C;
        for (int dw = 0; dw < g->kw; dw++) {
          const int32_t base = (int32_t)((((int64_t)oh * g->sh + dh) * g->w + (int64_t)ow * g->sw + dw) * C);
          float *d = gx + base;
#pragma omp simd
          for (int c = 0; c < C; c++) d[c] = am[o + c] == base + c ? 0.0f + gy[o + c] : 0.0f;
        }
      }
}

LV_CPU_PAR_LOOP(max_pool_bwd_images, pool_job, n, {
  const lv_conv_geom *g = J->g;
  const int64_t xs = (int64_t)g->h * g->w * g->c, ys = (int64_t)g->oh * g->ow * g->c;
  const int32_t *argmax = J->cargmax;
  if (!J->acc && windows_tile(g)) {
    max_pool_bwd_tiled(J, n);
    continue;
  }
  /* Zero one image at a time so the scatter below finds it in cache. */
  if (!J->acc) memset(J->gx + n * xs, 0, sizeof(float) * (size_t)xs);
  for (int64_t j = 0; j < ys; j++)
    if (argmax[n * ys + j] >= 0) J->gx[n * xs + argmax[n * ys + j]] += J->gy[n * ys + j];
})

void lv_cpu_max_pool_bwd(lv_kctx *ctx, const lv_conv_geom *g, const int32_t *argmax, const float *gy, float *gx,
                         bool acc) {
  pool_job j = {.g = g, .gy = gy, .gx = gx, .cargmax = argmax, .acc = acc};
  lv_cpu_par(ctx, g->n, 1, max_pool_bwd_images, &j);
}

/* Average pooling, one image per index: images are independent, so any split over the
 * threads gives the same bits. */
LV_CPU_PAR_LOOP(avg_pool_fwd_images, pool_job, n, {
  const lv_conv_geom *g = J->g;
  const int C = g->c;
  const int64_t xs = (int64_t)g->h * g->w * C, ys = (int64_t)g->oh * g->ow * C;
  for (int oh = 0; oh < g->oh; oh++) {
    int h0, h1;
    window(oh, g->sh, g->pt, g->kh, g->h, &h0, &h1);
    for (int ow = 0; ow < g->ow; ow++) {
      int w0, w1;
      window(ow, g->sw, g->pl, g->kw, g->w, &w0, &w1);
      float *yo = J->y + n * ys + ((int64_t)oh * g->ow + ow) * C;
      for (int c = 0; c < C; c++) yo[c] = 0.0f;
      for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
          const float *xp = J->x + n * xs + ((int64_t)ih * g->w + iw) * C;
          for (int c = 0; c < C; c++) yo[c] += xp[c];
        }
      int cnt = (h1 - h0) * (w1 - w0);
      float inv = cnt > 0 ? 1.0f / (float)cnt : 0.0f;
      for (int c = 0; c < C; c++) yo[c] *= inv;
    }
  }
})

void lv_cpu_avg_pool_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, float *y) {
  pool_job j = {.g = g, .x = x, .y = y};
  lv_cpu_par(ctx, g->n, 1, avg_pool_fwd_images, &j);
}

LV_CPU_PAR_LOOP(avg_pool_bwd_images, pool_job, n, {
  const lv_conv_geom *g = J->g;
  const int C = g->c;
  const int64_t xs = (int64_t)g->h * g->w * C, ys = (int64_t)g->oh * g->ow * C;
  for (int oh = 0; oh < g->oh; oh++) {
    int h0, h1;
    window(oh, g->sh, g->pt, g->kh, g->h, &h0, &h1);
    for (int ow = 0; ow < g->ow; ow++) {
      int w0, w1;
      window(ow, g->sw, g->pl, g->kw, g->w, &w0, &w1);
      const float *go = J->gy + n * ys + ((int64_t)oh * g->ow + ow) * C;
      int cnt = (h1 - h0) * (w1 - w0);
      float inv = cnt > 0 ? 1.0f / (float)cnt : 0.0f;
      for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
          float *xp = J->gx + n * xs + ((int64_t)ih * g->w + iw) * C;
          for (int c = 0; c < C; c++) xp[c] += go[c] * inv;
        }
    }
  }
})

void lv_cpu_avg_pool_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *gy, float *gx, bool acc) {
  const int64_t xs = (int64_t)g->h * g->w * g->c;
  if (!acc) memset(gx, 0, sizeof(float) * (size_t)(xs * g->n));
  pool_job j = {.g = g, .gy = gy, .gx = gx};
  lv_cpu_par(ctx, g->n, 1, avg_pool_bwd_images, &j);
}
