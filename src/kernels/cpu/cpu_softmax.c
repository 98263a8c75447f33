/* Softmax, log-softmax and the softmax cross-entropies, row-wise over the last axis,
 * with the max subtracted before exp so large logits never overflow. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_math.h"

#define PAR_ROWS 64

void lv_cpu_exp_le0(int64_t n, const float *x, float *y) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) y[i] = lv_kexp_le0(x[i]);
}

#define EXP_CHUNK 256

/* e[j] <- exp(x[j] - m) for j < c (e NULL: into a scratch chunk; e == x: in place) and
 * returns their sum in double, chunk by chunk: each chunk's exps in a float loop of their
 * own (a double accumulator in the same loop widens every lane's select to doubles), then
 * the chunk's sum in a fixed lane order. One helper for every softmax here, so a row's
 * sum has the same bits whichever op takes it, whatever the thread count. */
static double exp_sum(int64_t c, const float *x, float m, float *e) {
  float buf[EXP_CHUNK];
  double s = 0;
  for (int64_t j0 = 0; j0 < c; j0 += EXP_CHUNK) {
    const int64_t n = c - j0 < EXP_CHUNK ? c - j0 : EXP_CHUNK;
    const float *xc = x + j0;
    float *o = e ? e + j0 : buf;
#pragma omp simd
    for (int64_t j = 0; j < n; j++) o[j] = lv_kexp_le0(xc[j] - m);
    double cs = 0;
#pragma omp simd reduction(+ : cs)
    for (int64_t j = 0; j < n; j++) cs += o[j];
    s += cs;
  }
  return s;
}

/* probs <- softmax(x); *max <- max(x); returns log(sum(exp(x - max))). Callers form
 * (x - max) - that, never max + that, so large logits keep their precision. */
static float softmax_row(int64_t c, const float *x, float *p, float *max) {
  float m = -FLT_MAX;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < c; j++) m = x[j] > m ? x[j] : m;
  double s = exp_sum(c, x, m, p);
  float inv = (float)(1.0 / s);
#pragma omp simd
  for (int64_t j = 0; j < c; j++) p[j] *= inv;
  *max = m;
  return (float)log(s);
}

/* Rows are independent: any split over the threads gives the same bits. */
static int64_t row_grain(int64_t rows) { return rows > PAR_ROWS ? lv_cpu_grain(rows, 16) : rows; }

typedef struct sm_job {
  int64_t c;
  const float *x, *y, *gy, *t, *probs, *gloss;
  float *out, *gx, *loss;
  bool log_, acc;
} sm_job;

/* log(sum(exp(x - max))) of a row with *max <- max(x): softmax_row's sum, the same bits,
 * without keeping the exps (log-softmax needs only the sum: the beam search's 8000-way
 * rows at every step). */
static float logsumexp_row(int64_t c, const float *x, float *max) {
  float m = -FLT_MAX;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < c; j++) m = x[j] > m ? x[j] : m;
  const double s = exp_sum(c, x, m, NULL);
  *max = m;
  return (float)log(s);
}

static void log_softmax_row(int64_t c, const float *x, float *out) {
  float m;
  const float ls = logsumexp_row(c, x, &m);
#pragma omp simd
  for (int64_t j = 0; j < c; j++) out[j] = (x[j] - m) - ls;
}

LV_CPU_PAR_LOOP(softmax_rows, sm_job, r, {
  const int64_t c = J->c;
  float m;
  if (J->log_)
    log_softmax_row(c, J->x + r * c, J->out + r * c);
  else
    softmax_row(c, J->x + r * c, J->out + r * c, &m);
})

void lv_cpu_softmax_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, float *y, bool log_) {
  sm_job j = {.c = c, .x = x, .out = y, .log_ = log_};
  lv_cpu_par(ctx, rows, row_grain(rows), softmax_rows, &j);
}

LV_CPU_PAR_LOOP(softmax_bwd_rows, sm_job, r, {
  const int64_t c = J->c;
  const float *yr = J->y + r * c, *gr = J->gy + r * c;
  float *xr = J->gx + r * c;
  double s = 0;
  if (J->log_) {
    for (int64_t j = 0; j < c; j++) s += gr[j];
    for (int64_t j = 0; j < c; j++) {
      float g = gr[j] - lv_kexp_le0(yr[j]) * (float)s;
      xr[j] = J->acc ? xr[j] + g : g;
    }
  } else {
    for (int64_t j = 0; j < c; j++) s += (double)gr[j] * yr[j];
    for (int64_t j = 0; j < c; j++) {
      float g = yr[j] * (gr[j] - (float)s);
      xr[j] = J->acc ? xr[j] + g : g;
    }
  }
})

void lv_cpu_softmax_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *y, const float *gy, float *gx,
                        bool log_, bool acc) {
  sm_job j = {.c = c, .y = y, .gy = gy, .gx = gx, .log_ = log_, .acc = acc};
  lv_cpu_par(ctx, rows, row_grain(rows), softmax_bwd_rows, &j);
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

LV_CPU_PAR_LOOP(xent_rows, sm_job, r, {
  const int64_t c = J->c;
  const float *x = J->x, *t = J->t;
  float m, ls = softmax_row(c, x + r * c, J->out + r * c, &m);
  double l = 0;
  for (int64_t j = 0; j < c; j++) l -= (double)t[r * c + j] * ((x[r * c + j] - m) - ls);
  J->loss[r] = (float)l;
})

void lv_cpu_xent_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const float *t, float *loss,
                     float *probs) {
  sm_job j = {.c = c, .x = x, .t = t, .loss = loss, .out = probs};
  lv_cpu_par(ctx, rows, row_grain(rows), xent_rows, &j);
}

LV_CPU_PAR_LOOP(xent_bwd_rows, sm_job, r, {
  const int64_t c = J->c;
  const float *t = J->t, *probs = J->probs;
  double ts = 0;
  for (int64_t j = 0; j < c; j++) ts += t[r * c + j];
  float gl = J->gloss[r];
  for (int64_t j = 0; j < c; j++) {
    float g = (probs[r * c + j] * (float)ts - t[r * c + j]) * gl;
    J->gx[r * c + j] = J->acc ? J->gx[r * c + j] + g : g;
  }
})

void lv_cpu_xent_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *probs, const float *t,
                     const float *gloss, float *gx, bool acc) {
  sm_job j = {.c = c, .probs = probs, .t = t, .gloss = gloss, .gx = gx, .acc = acc};
  lv_cpu_par(ctx, rows, row_grain(rows), xent_bwd_rows, &j);
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
    for (int64_t j = 0; j < c; j++) yr[j] = pr[j * ps] <= 0.5f ? xr[j] - m : -INFINITY;
    double s = exp_sum(c, yr, 0.0f, yr);
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
_Pragma("omp simd reduction(+ : all)")
  for (int64_t j = 0; j < c; j++) all += (double)((xr[j] - m) - ls);
  double lp_id = (double)((xr[J->ids[r]] - m) - ls);
  double l = -((double)J->on * lp_id + (double)J->off * (all - lp_id));
  J->loss[r] = (float)(J->weights ? l * (double)J->weights[r] : l);
})

LV_CPU_PAR_LOOP(smoothed_bwd_rows, sxent_job, r, {
  const int64_t c = J->c, id = J->ids[r];
  const float gl = J->gloss[r] * (J->weights ? J->weights[r] : 1.0f), off = J->off;
  const float *pr = J->probs + r * c;
  float *gr = J->gx + r * c;
  const float gid = (pr[id] - J->on) * gl;
  if (J->acc) {
    const float before = gr[id];
_Pragma("omp simd")
    for (int64_t j = 0; j < c; j++) gr[j] += (pr[j] - off) * gl;
    gr[id] = before + gid;
  } else {
_Pragma("omp simd")
    for (int64_t j = 0; j < c; j++) gr[j] = (pr[j] - off) * gl;
    gr[id] = gid;
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

/* ---- chunked (projected) smoothed cross-entropy ---- */

void lv_cpu_check_ids(lv_kctx *ctx, int64_t n, const int32_t *ids, int64_t bound, uint64_t tag) {
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= bound) {
      lv_cpu_record_error(ctx, (lv_kerror){tag, i, ids[i], bound});
      return;
    }
}

typedef struct chunk_job {
  int64_t cs, c0, c;
  const float *z_in, *bias, *weights, *gloss, *zid_in, *ls_in, *max_in;
  const int32_t *ids;
  bool first;
  float on, off;
  float *max, *zid, *loss, *ls, *z;
  double *sumexp, *sumz;
  const double *sumexp_in, *sumz_in;
  int32_t *argmax;
} chunk_job;

LV_CPU_PAR_LOOP(chunk_stats_rows, chunk_job, r, {
  const int64_t cs = J->cs;
  const float *zr = J->z_in + r * cs;
  float cm = -INFINITY;
  int64_t ci = 0;
  double sz = 0;
  for (int64_t j = 0; j < cs; j++) {
    float v = zr[j] + (J->bias ? J->bias[j] : 0.0f);
    if (v > cm) {
      cm = v;
      ci = j;
    }
    sz += v;
  }
  float m = J->first || cm > J->max[r] ? cm : J->max[r];
  double s = 0;
  for (int64_t j = 0; j < cs; j++) s += expf((zr[j] + (J->bias ? J->bias[j] : 0.0f)) - m);
  if (J->first) {
    J->sumexp[r] = s;
    J->sumz[r] = sz;
    if (J->argmax) J->argmax[r] = (int32_t)ci;
  } else {
    if (m != J->max[r]) {
      J->sumexp[r] = J->sumexp[r] * exp((double)J->max[r] - (double)m) + s;
      if (J->argmax) J->argmax[r] = (int32_t)(J->c0 + ci);
    } else {
      J->sumexp[r] += s;
    }
    J->sumz[r] += sz;
  }
  J->max[r] = m;
  int64_t id = J->ids[r] - J->c0;
  if (id >= 0 && id < cs) J->zid[r] = zr[id] + (J->bias ? J->bias[id] : 0.0f);
})

void lv_cpu_xent_chunk_stats(lv_kctx *ctx, int64_t rows, int64_t cs, int64_t c0, const float *z, const float *bias,
                             const int32_t *ids, bool first, float *max, double *sumexp, double *sumz, float *zid,
                             int32_t *argmax) {
  chunk_job j = {.cs = cs, .c0 = c0, .z_in = z, .bias = bias, .ids = ids, .first = first, .max = max,
                 .sumexp = sumexp, .sumz = sumz, .zid = zid, .argmax = argmax};
  lv_cpu_par(ctx, rows, rows * cs > 65536 ? lv_cpu_grain(rows, 8) : rows, chunk_stats_rows, &j);
}

LV_CPU_PAR_LOOP(chunk_loss_rows, chunk_job, r, {
  double lse = (double)J->max_in[r] + log(J->sumexp_in[r]);
  double tsum = (double)J->on + (double)J->off * (double)(J->c - 1);
  double l = tsum * lse - (double)J->on * J->zid_in[r] - (double)J->off * (J->sumz_in[r] - J->zid_in[r]);
  J->loss[r] = (float)(J->weights ? l * (double)J->weights[r] : l);
  J->ls[r] = (float)log(J->sumexp_in[r]);
})

void lv_cpu_xent_chunk_loss(lv_kctx *ctx, int64_t rows, int64_t c, const float *weights, float smoothing,
                            const float *max, const double *sumexp, const double *sumz, const float *zid, float *loss,
                            float *ls) {
  chunk_job j = {.c = c, .weights = weights, .max_in = max, .sumexp_in = sumexp, .sumz_in = sumz,
                 .zid_in = zid, .loss = loss, .ls = ls};
  smoothing_targets(c, smoothing, &j.on, &j.off);
  lv_cpu_par(ctx, rows, rows > 4096 ? lv_cpu_grain(rows, 1024) : rows, chunk_loss_rows, &j);
}

LV_CPU_PAR_LOOP(chunk_grad_rows, chunk_job, r, {
  const int64_t cs = J->cs;
  float *zr = J->z + r * cs;
  const float m = J->max_in[r], l = J->ls_in[r];
  const float gl = J->gloss[r] * (J->weights ? J->weights[r] : 1.0f);
  const int64_t id = J->ids[r] - J->c0;
  for (int64_t j = 0; j < cs; j++) {
    float p = expf(((zr[j] + (J->bias ? J->bias[j] : 0.0f)) - m) - l);
    zr[j] = (p - (j == id ? J->on : J->off)) * gl;
  }
})

void lv_cpu_xent_chunk_grad(lv_kctx *ctx, int64_t rows, int64_t cs, int64_t c0, int64_t c, float *z, const float *bias,
                            const int32_t *ids, const float *weights, float smoothing, const float *max, const float *ls,
                            const float *gloss) {
  chunk_job j = {.cs = cs, .c0 = c0, .c = c, .z = z, .bias = bias, .ids = ids, .weights = weights,
                 .max_in = max, .ls_in = ls, .gloss = gloss};
  smoothing_targets(c, smoothing, &j.on, &j.off);
  lv_cpu_par(ctx, rows, rows * cs > 65536 ? lv_cpu_grain(rows, 8) : rows, chunk_grad_rows, &j);
}

/* ---- a decoding step's attention over time-major caches (kernels.def) ---- */

typedef struct ca_job {
  int64_t t, rows, heads, d, dv;
  const float *q, *k, *v;
  const int32_t *anc;
  float *scratch, *out;
} ca_job;

/* Item i = r * heads + n: its logits into scratch, softmax_row's probabilities in place,
 * then the values' rows summed in step order. */
static void cached_attention_item(const ca_job *J, int64_t i) {
  const int64_t t = J->t, rows = J->rows, r = i / J->heads, n = i % J->heads, d = J->d, dv = J->dv;
  const int64_t H = J->heads * d, C = J->heads * dv;
  const float *q = J->q + r * H + n * d;
  float *p = J->scratch + i * t, *o = J->out + r * C + n * dv, m;
  for (int64_t s = 0; s < t; s++) {
    const float *kr = J->k + (J->anc ? J->anc[s * rows + r] : s * rows + r) * H + n * d;
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < d; j++) acc += q[j] * kr[j];
    p[s] = acc;
  }
  softmax_row(t, p, p, &m);
  memset(o, 0, sizeof *o * (size_t)dv);
  for (int64_t s = 0; s < t; s++) {
    const float *vr = J->v + (J->anc ? J->anc[s * rows + r] : s * rows + r) * C + n * dv, ps = p[s];
#pragma omp simd
    for (int64_t j = 0; j < dv; j++) o[j] += ps * vr[j];
  }
}

LV_CPU_PAR_LOOP(cached_attention_items, ca_job, i, { cached_attention_item(J, i); })

void lv_cpu_cached_attention(lv_kctx *ctx, int64_t t, int64_t rows, int64_t heads, int64_t d, int64_t dv, int64_t cap,
                             const float *q, const float *k, const float *v, const int32_t *anc, float *scratch,
                             float *out, uint64_t tag) {
  if (rows <= 0 || heads <= 0) return;
  if (anc)
    for (int64_t i = 0; i < t * rows; i++)
      if (anc[i] < 0 || anc[i] >= cap * rows) {
        lv_cpu_record_error(ctx, (lv_kerror){tag, i, anc[i], cap * rows});
        return;
      }
  ca_job j = {.t = t, .rows = rows, .heads = heads, .d = d, .dv = dv, .q = q, .k = k, .v = v, .anc = anc,
              .scratch = scratch, .out = out};
  const int64_t items = rows * heads;
  lv_cpu_par(ctx, items, items * t * (d + dv) > 65536 ? lv_cpu_grain(items, 4) : items, cached_attention_items, &j);
}
