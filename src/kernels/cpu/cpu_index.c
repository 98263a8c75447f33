/* Index results: argmax and tf.nn.in_top_k. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_math.h"

/* First maximum on ties. */
void lv_cpu_argmax(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, int32_t *out) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * c;
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
      if (xr[j] > xr[best]) best = j;
    out[r] = (int32_t)best;
  }
}

/* TF's InTopK kernel: the target is in the top k when fewer than k classes score strictly
 * higher (so ties at the boundary all count as in); a label outside [0, C) or a
 * non-finite target score gives 0. */
void lv_cpu_in_top_k(lv_kctx *ctx, int64_t b, int64_t c, const float *x, const int32_t *labels, int k,
                     float *out) {
  for (int64_t r = 0; r < b; r++) {
    const float *xr = x + r * c;
    int32_t t = labels[r];
    if (t < 0 || t >= c || !isfinite(xr[t])) {
      out[r] = 0.0f;
      continue;
    }
    int64_t more = 0;
    for (int64_t j = 0; j < c; j++)
      if (xr[j] > xr[t]) more++;
    out[r] = more < k ? 1.0f : 0.0f;
  }
}

/* Restores the heap below p (root = the worst kept entry). */
static void sift_down(float *v, int32_t *ix, int64_t size, int64_t p) {
  for (;;) {
    int64_t l = 2 * p + 1, r = l + 1, w = p;
    if (l < size && lv_kbetter(v[w], ix[w], v[l], ix[l])) w = l;
    if (r < size && lv_kbetter(v[w], ix[w], v[r], ix[r])) w = r;
    if (w == p) return;
    float tv = v[p];
    int32_t ti = ix[p];
    v[p] = v[w];
    ix[p] = ix[w];
    v[w] = tv;
    ix[w] = ti;
    p = w;
  }
}

typedef struct topk_job {
  int64_t n, k;
  const float *x;
  float *values;
  int32_t *indices;
} topk_job;

/* A heap of the k best seen so far, kept in the row's own output, then sorted by popping
 * the worst to the end: O(n log k) and no scratch. */
LV_CPU_PAR_LOOP(topk_rows, topk_job, r, {
  const int64_t n = J->n, k = J->k;
  const float *xr = J->x + r * n;
  float *v = J->values + r * k;
  int32_t *ix = J->indices + r * k;
  int64_t size = 0;
  for (int64_t j = 0; j < n && k > 0; j++) {
    if (size < k) {
      int64_t c = size++;
      v[c] = xr[j];
      ix[c] = (int32_t)j;
      while (c > 0) { /* sift up: a worse child moves toward the root */
        int64_t p = (c - 1) / 2;
        if (!lv_kbetter(v[p], ix[p], v[c], ix[c])) break;
        float tv = v[p];
        int32_t ti = ix[p];
        v[p] = v[c];
        ix[p] = ix[c];
        v[c] = tv;
        ix[c] = ti;
        c = p;
      }
    } else if (lv_kbetter(xr[j], (int32_t)j, v[0], ix[0])) {
      v[0] = xr[j];
      ix[0] = (int32_t)j;
      sift_down(v, ix, size, 0);
    }
  }
  while (size > 1) {
    float tv = v[0];
    int32_t ti = ix[0];
    size--;
    v[0] = v[size];
    ix[0] = ix[size];
    v[size] = tv;
    ix[size] = ti;
    sift_down(v, ix, size, 0);
  }
})

void lv_cpu_top_k(lv_kctx *ctx, int64_t rows, int64_t n, int64_t k, const float *x, float *values,
                  int32_t *indices) {
  topk_job j = {n, k, x, values, indices};
  lv_cpu_par(ctx, rows, rows * n > 65536 ? lv_cpu_grain(rows, 4) : rows, topk_rows, &j);
}
