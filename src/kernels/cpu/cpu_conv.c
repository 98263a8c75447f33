/* 2-D convolution, NHWC input and HWIO filter, as batched im2col + one GEMM per chunk of
 * images: a chunk's patches form a [chunk*OH*OW, KH*KW*C] matrix whose product with the
 * filter viewed as [KH*KW*C, O] is directly the NHWC output. Chunks keep the patch matrix
 * near the cache while leaving GEMMs large enough for OpenBLAS to run at speed.
 * Backward recomputes the patches (cheaper than storing them) for the filter gradient
 * and scatters patch gradients back (col2im) for the input gradient. */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

/* Patch-matrix floats per chunk; tuned with bench/bench_lenet_ops. */
#define CHUNK_FLOATS ((size_t)1 << 20)

static int64_t patch_len(const lv_conv_geom *g) { return (int64_t)g->kh * g->kw * g->c; }
static int64_t image_rows(const lv_conv_geom *g) { return (int64_t)g->oh * g->ow; }

static int chunk_images(const lv_conv_geom *g, size_t scratch_floats) {
  size_t per = (size_t)(image_rows(g) * patch_len(g));
  if (per == 0) return g->n > 0 ? g->n : 1;
  size_t nb = scratch_floats / per;
  if (nb < 1) nb = 1;
  if (nb > (size_t)g->n) nb = (size_t)g->n;
  return (int)nb;
}

size_t lv_cpu_conv2d_scratch(const lv_conv_geom *g) {
  size_t per = (size_t)(image_rows(g) * patch_len(g));
  size_t nb = per ? CHUNK_FLOATS / per : 1;
  if (nb < 1) nb = 1;
  if (nb > (size_t)g->n) nb = (size_t)(g->n > 0 ? g->n : 1);
  return nb * per;
}

/* One image's patches: rows (oh, ow), columns (kh, kw, c). */
static void im2col(const lv_conv_geom *g, const float *x, float *cols) {
  const int64_t K = patch_len(g);
  const int C = g->c;
  for (int oh = 0; oh < g->oh; oh++) {
    for (int ow = 0; ow < g->ow; ow++) {
      float *row = cols + ((int64_t)oh * g->ow + ow) * K;
      int iw0 = ow * g->sw - g->pl;
      for (int kh = 0; kh < g->kh; kh++) {
        int ih = oh * g->sh - g->pt + kh * g->dh;
        float *dst = row + (int64_t)kh * g->kw * C;
        if (ih < 0 || ih >= g->h) {
          memset(dst, 0, sizeof(float) * (size_t)g->kw * C);
          continue;
        }
        const float *src = x + (int64_t)ih * g->w * C;
        if (g->dw == 1 && iw0 >= 0 && iw0 + g->kw <= g->w) {
          const float *s = src + (int64_t)iw0 * C;
          const int run = g->kw * C;
          /* Short runs (a single-channel image) cost less as a loop than a memcpy call. */
          if (run <= 16)
            for (int j = 0; j < run; j++) dst[j] = s[j];
          else
            memcpy(dst, s, sizeof(float) * (size_t)run);
          continue;
        }
        for (int kw = 0; kw < g->kw; kw++) {
          int iw = iw0 + kw * g->dw;
          float *d = dst + (int64_t)kw * C;
          if (iw < 0 || iw >= g->w) {
            for (int c = 0; c < C; c++) d[c] = 0.0f;
          } else {
            const float *s = src + (int64_t)iw * C;
            for (int c = 0; c < C; c++) d[c] = s[c];
          }
        }
      }
    }
  }
}

/* Adds one image's patch gradients back into its input gradient. */
static void col2im(const lv_conv_geom *g, const float *cols, float *gx) {
  const int64_t K = patch_len(g);
  const int C = g->c;
  for (int oh = 0; oh < g->oh; oh++) {
    for (int ow = 0; ow < g->ow; ow++) {
      const float *row = cols + ((int64_t)oh * g->ow + ow) * K;
      int iw0 = ow * g->sw - g->pl;
      for (int kh = 0; kh < g->kh; kh++) {
        int ih = oh * g->sh - g->pt + kh * g->dh;
        if (ih < 0 || ih >= g->h) continue;
        const float *src = row + (int64_t)kh * g->kw * C;
        float *dst = gx + (int64_t)ih * g->w * C;
        for (int kw = 0; kw < g->kw; kw++) {
          int iw = iw0 + kw * g->dw;
          if (iw < 0 || iw >= g->w) continue;
          float *d = dst + (int64_t)iw * C;
          const float *s = src + (int64_t)kw * C;
          for (int c = 0; c < C; c++) d[c] += s[c];
        }
      }
    }
  }
}

void lv_cpu_conv2d_fwd(const lv_conv_geom *g, const float *x, const float *w, float *y,
                       float *scratch, size_t scratch_floats) {
  const int64_t K = patch_len(g), R = image_rows(g);
  const int64_t xs = (int64_t)g->h * g->w * g->c;
  int nb = chunk_images(g, scratch_floats);
  for (int n0 = 0; n0 < g->n; n0 += nb) {
    int cnt = g->n - n0 < nb ? g->n - n0 : nb;
#pragma omp parallel for schedule(dynamic) if (cnt > 1)
    for (int i = 0; i < cnt; i++) im2col(g, x + (n0 + i) * xs, scratch + i * R * K);
    lv_cpu_gemm(false, false, cnt * R, g->o, K, 1.0f, scratch, K, w, g->o, 0.0f,
                y + n0 * R * g->o, g->o);
  }
}

void lv_cpu_conv2d_bwd(const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                       float *gx, bool gx_acc, float *gw, bool gw_acc, float *scratch,
                       size_t scratch_floats) {
  const int64_t K = patch_len(g), R = image_rows(g);
  const int64_t xs = (int64_t)g->h * g->w * g->c;
  int nb = chunk_images(g, scratch_floats);
  if (gx && !gx_acc) memset(gx, 0, sizeof(float) * (size_t)(xs * g->n));
  bool first = true;
  for (int n0 = 0; n0 < g->n; n0 += nb) {
    int cnt = g->n - n0 < nb ? g->n - n0 : nb;
    const float *gyc = gy + n0 * R * g->o;
    if (gw) {
#pragma omp parallel for schedule(dynamic) if (cnt > 1)
      for (int i = 0; i < cnt; i++) im2col(g, x + (n0 + i) * xs, scratch + i * R * K);
      lv_cpu_gemm(true, false, K, g->o, cnt * R, 1.0f, scratch, K, gyc, g->o,
                  (first && !gw_acc) ? 0.0f : 1.0f, gw, g->o);
      first = false;
    }
    if (gx) {
      lv_cpu_gemm(false, true, cnt * R, K, g->o, 1.0f, gyc, g->o, w, g->o, 0.0f, scratch, K);
#pragma omp parallel for schedule(dynamic) if (cnt > 1)
      for (int i = 0; i < cnt; i++) col2im(g, scratch + i * R * K, gx + (n0 + i) * xs);
    }
  }
  if (gw && first && !gw_acc) memset(gw, 0, sizeof(float) * (size_t)(K * g->o));
}
