/* Softmax, log-softmax and the softmax cross-entropies, row-wise over the last axis,
 * with the max subtracted before exp so large logits never overflow. */
#include <float.h>
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

#define PAR_ROWS 64

/* probs <- softmax(x); *max <- max(x); returns log(sum(exp(x - max))). Callers form
 * (x - max) - that, never max + that, so large logits keep their precision. */
static float softmax_row(int64_t c, const float *x, float *p, float *max) {
  float m = -FLT_MAX;
  for (int64_t j = 0; j < c; j++) m = x[j] > m ? x[j] : m;
  double s = 0;
  for (int64_t j = 0; j < c; j++) {
    p[j] = expf(x[j] - m);
    s += p[j];
  }
  float inv = (float)(1.0 / s);
  for (int64_t j = 0; j < c; j++) p[j] *= inv;
  *max = m;
  return (float)log(s);
}

void lv_cpu_softmax_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, float *y, bool log_) {
#pragma omp parallel for if (rows > PAR_ROWS) schedule(dynamic)
  for (int64_t r = 0; r < rows; r++) {
    float m, ls = softmax_row(c, x + r * c, y + r * c, &m);
    if (log_)
      for (int64_t j = 0; j < c; j++) y[r * c + j] = (x[r * c + j] - m) - ls;
  }
}

void lv_cpu_softmax_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *y, const float *gy, float *gx,
                        bool log_, bool acc) {
#pragma omp parallel for if (rows > PAR_ROWS) schedule(dynamic)
  for (int64_t r = 0; r < rows; r++) {
    const float *yr = y + r * c, *gr = gy + r * c;
    float *xr = gx + r * c;
    double s = 0;
    if (log_) {
      for (int64_t j = 0; j < c; j++) s += gr[j];
      for (int64_t j = 0; j < c; j++) {
        float g = gr[j] - expf(yr[j]) * (float)s;
        xr[j] = acc ? xr[j] + g : g;
      }
    } else {
      for (int64_t j = 0; j < c; j++) s += (double)gr[j] * yr[j];
      for (int64_t j = 0; j < c; j++) {
        float g = yr[j] * (gr[j] - (float)s);
        xr[j] = acc ? xr[j] + g : g;
      }
    }
  }
}

typedef struct xent_job {
  int64_t c;
  const float *x, *probs, *gloss;
  const int32_t *ids;
  float *loss, *probs_out, *gx;
  bool acc;
} xent_job;

LV_CPU_PAR_LOOP(sparse_xent_rows, xent_job, r, {
  const int64_t c = J->c;
  float m, ls = softmax_row(c, J->x + r * c, J->probs_out + r * c, &m);
  J->loss[r] = (m - J->x[r * c + J->ids[r]]) + ls;
})

LV_CPU_PAR_LOOP(sparse_xent_bwd_rows, xent_job, r, {
  const int64_t c = J->c;
  float gl = J->gloss[r];
  for (int64_t j = 0; j < c; j++) {
    float g = (J->probs[r * c + j] - (j == J->ids[r] ? 1.0f : 0.0f)) * gl;
    J->gx[r * c + j] = J->acc ? J->gx[r * c + j] + g : g;
  }
})

void lv_cpu_sparse_xent_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x,
                            const int32_t *ids, float *loss, float *probs, uint64_t tag) {
  for (int64_t r = 0; r < rows; r++)
    if (ids[r] < 0 || ids[r] >= c) {
      lv_cpu_record_error(ctx, (lv_kerror){tag, r, ids[r], c});
      return;
    }
  xent_job j = {.c = c, .x = x, .ids = ids, .loss = loss, .probs_out = probs};
  lv_cpu_par(ctx, rows, rows > PAR_ROWS ? lv_cpu_grain(rows, 16) : rows, sparse_xent_rows, &j);
}

void lv_cpu_sparse_xent_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *probs, const int32_t *ids,
                            const float *gloss, float *gx, bool acc) {
  xent_job j = {.c = c, .probs = probs, .ids = ids, .gloss = gloss, .gx = gx, .acc = acc};
  lv_cpu_par(ctx, rows, rows > PAR_ROWS ? lv_cpu_grain(rows, 16) : rows, sparse_xent_bwd_rows, &j);
}

void lv_cpu_xent_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const float *t, float *loss,
                     float *probs) {
#pragma omp parallel for if (rows > PAR_ROWS) schedule(dynamic)
  for (int64_t r = 0; r < rows; r++) {
    float m, ls = softmax_row(c, x + r * c, probs + r * c, &m);
    double l = 0;
    for (int64_t j = 0; j < c; j++) l -= (double)t[r * c + j] * ((x[r * c + j] - m) - ls);
    loss[r] = (float)l;
  }
}

void lv_cpu_xent_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *probs, const float *t,
                     const float *gloss, float *gx, bool acc) {
#pragma omp parallel for if (rows > PAR_ROWS) schedule(dynamic)
  for (int64_t r = 0; r < rows; r++) {
    double ts = 0;
    for (int64_t j = 0; j < c; j++) ts += t[r * c + j];
    float gl = gloss[r];
    for (int64_t j = 0; j < c; j++) {
      float g = (probs[r * c + j] * (float)ts - t[r * c + j]) * gl;
      gx[r * c + j] = acc ? gx[r * c + j] + g : g;
    }
  }
}

/* ---- masked softmax ---- */

typedef struct msm_job {
  const lv_bcast *bc;
  int64_t c, pad_step;
  const float *x, *pad;
  float *y;
} msm_job;

/* Offset in pad of the first element of row r (flat index r * c of x). */
static int64_t pad_row_off(const lv_bcast *bc, int64_t r) {
  int64_t off = 0;
  for (int d = bc->rank - 2; d >= 0; d--) {
    int64_t q = r % bc->shape[d];
    r /= bc->shape[d];
    off += q * bc->sa[d];
  }
  return off;
}

LV_CPU_PAR_LOOP(masked_rows, msm_job, r, {
  const int64_t c = J->c, ps = J->pad_step;
  const float *xr = J->x + r * c, *pr = J->pad + pad_row_off(J->bc, r);
  float *yr = J->y + r * c;
  float m = -FLT_MAX;
  bool any = false;
  for (int64_t j = 0; j < c; j++)
    if (pr[j * ps] <= 0.5f) {
      m = any && m >= xr[j] ? m : xr[j];
      any = true;
    }
  if (!any) {
    for (int64_t j = 0; j < c; j++) yr[j] = 0.0f;
  } else {
    double s = 0;
    for (int64_t j = 0; j < c; j++) {
      yr[j] = pr[j * ps] <= 0.5f ? expf(xr[j] - m) : 0.0f;
      s += yr[j];
    }
    float inv = (float)(1.0 / s);
    for (int64_t j = 0; j < c; j++) yr[j] *= inv;
  }
})

void lv_cpu_masked_softmax_fwd(lv_kctx *ctx, const lv_bcast *bc, const float *x, const float *pad, float *y) {
  int64_t n = 1;
  for (int d = 0; d < bc->rank; d++) n *= bc->shape[d];
  int64_t c = bc->rank ? bc->shape[bc->rank - 1] : 1, rows = c ? n / c : 0;
  msm_job j = {bc, c, bc->rank ? bc->sa[bc->rank - 1] : 0, x, pad, y};
  lv_cpu_par(ctx, rows, rows > PAR_ROWS ? lv_cpu_grain(rows, 16) : rows, masked_rows, &j);
}

/* ---- label-smoothed cross-entropy ---- */

typedef struct sxent_job {
  int64_t c;
  const float *x, *probs, *weights, *gloss;
  const int32_t *ids;
  float on, off;
  float *loss, *probs_out, *gx;
  bool acc;
} sxent_job;

static void smoothing_targets(int64_t c, float smoothing, float *on, float *off) {
  *on = 1.0f - smoothing;
  *off = c > 1 ? smoothing / (float)(c - 1) : 0.0f;
}

LV_CPU_PAR_LOOP(smoothed_rows, sxent_job, r, {
  const int64_t c = J->c;
  const float *xr = J->x + r * c;
  float m, ls = softmax_row(c, xr, J->probs_out + r * c, &m);
  /* -sum_j t_j log p_j = -(on * lp_id + off * (sum_j lp_j - lp_id)) */
  double all = 0;
  for (int64_t j = 0; j < c; j++) all += (double)((xr[j] - m) - ls);
  double lp_id = (double)((xr[J->ids[r]] - m) - ls);
  double l = -((double)J->on * lp_id + (double)J->off * (all - lp_id));
  J->loss[r] = (float)(J->weights ? l * (double)J->weights[r] : l);
})

LV_CPU_PAR_LOOP(smoothed_bwd_rows, sxent_job, r, {
  const int64_t c = J->c;
  float gl = J->gloss[r] * (J->weights ? J->weights[r] : 1.0f);
  for (int64_t j = 0; j < c; j++) {
    float g = (J->probs[r * c + j] - (j == J->ids[r] ? J->on : J->off)) * gl;
    J->gx[r * c + j] = J->acc ? J->gx[r * c + j] + g : g;
  }
})

void lv_cpu_smoothed_xent_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const int32_t *ids,
                              const float *weights, float smoothing, float *loss, float *probs, uint64_t tag) {
  for (int64_t r = 0; r < rows; r++)
    if (ids[r] < 0 || ids[r] >= c) {
      lv_cpu_record_error(ctx, (lv_kerror){tag, r, ids[r], c});
      return;
    }
  sxent_job j = {.c = c, .x = x, .ids = ids, .weights = weights, .loss = loss, .probs_out = probs};
  smoothing_targets(c, smoothing, &j.on, &j.off);
  lv_cpu_par(ctx, rows, rows > PAR_ROWS ? lv_cpu_grain(rows, 16) : rows, smoothed_rows, &j);
}

void lv_cpu_smoothed_xent_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *probs, const int32_t *ids,
                              const float *weights, float smoothing, const float *gloss, float *gx, bool acc) {
  sxent_job j = {.c = c, .probs = probs, .ids = ids, .weights = weights, .gloss = gloss, .gx = gx, .acc = acc};
  smoothing_targets(c, smoothing, &j.on, &j.off);
  lv_cpu_par(ctx, rows, rows > PAR_ROWS ? lv_cpu_grain(rows, 16) : rows, smoothed_bwd_rows, &j);
}
