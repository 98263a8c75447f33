/* The fused LSTMCellSimple gate step (Lingvo's rnn_cell.py): one pass over the 4H gate
 * pre-activations of each row computes the new c and m; the backward pass recomputes the
 * same values from the gates and c_prev instead of keeping them. Rows are independent,
 * so splitting them over threads never changes a bit. Within a row the loop over units
 * vectorizes: kernel_math.h's sigmoid and tanh have no calls or branches, and the job's
 * flags select through bit masks (GCC does not vectorize a select on a loop-invariant
 * scalar bool), which picks the same bits as the branches they replace. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_math.h"

typedef struct lstm_job {
  int64_t h;
  const float *gates, *c_prev, *m_prev, *pad, *gc, *gm;
  float fgb, cap;
  bool out_nl, ggates_acc, gc_acc, gm_acc;
  float *c_out, *m_out, *ggates, *gc_prev, *gm_prev;
} lstm_job;

static inline bool padded(const lstm_job *J, int64_t r) { return J->pad && J->pad[r] > 0.5f; }

/* a where m is all ones, b where it is 0: a select that vectorizes. */
static inline float pick(uint32_t m, float a, float b) {
  uint32_t ua, ub;
  memcpy(&ua, &a, sizeof ua);
  memcpy(&ub, &b, sizeof ub);
  const uint32_t ur = (ua & m) | (ub & ~m);
  float r;
  memcpy(&r, &ur, sizeof r);
  return r;
}
static inline uint32_t mask(bool b) { return b ? 0xffffffffu : 0u; }
static inline float clamp(float x, float cap) { return x < -cap ? -cap : (x > cap ? cap : x); }

static void fwd_rows(void *arg, int64_t lo, int64_t hi, int slot) {
  const lstm_job *J = arg;
  const int64_t h = J->h;
  (void)slot;
  for (int64_t r = lo; r < hi; r++) {
    const float *cp = J->c_prev + r * h;
    float *c = J->c_out + r * h, *m = J->m_out + r * h;
    if (padded(J, r)) {
      const float *mp = J->m_prev + r * h;
      for (int64_t j = 0; j < h; j++) {
        c[j] = cp[j];
        m[j] = mp[j];
      }
      continue;
    }
    const float *ii = J->gates + r * 4 * h, *ig = ii + h, *fg = ig + h, *og = fg + h;
    /* The job's fields in locals: the stores through c and m could alias them. */
    const float fgb = J->fgb, cap = J->cap;
    const uint32_t capped = mask(cap > 0), out_nl = mask(J->out_nl);
#pragma omp simd
    for (int64_t j = 0; j < h; j++) {
      float nc = lv_ksigm(fg[j] + fgb) * cp[j] + lv_ksigm(ig[j]) * lv_ktanh(ii[j]);
      nc = pick(capped, clamp(nc, cap), nc);
      c[j] = nc;
      m[j] = lv_ksigm(og[j]) * pick(out_nl, lv_ktanh(nc), nc);
    }
  }
}

static inline void put(float *p, bool acc, float v) { *p = acc ? *p + v : v; }

/* One unit's gradients: gates (input, input gate, forget gate, output gate) and c_prev. */
typedef struct unit_grads {
  float gi, gig, gfg, gog, gc;
} unit_grads;

/* The backward of one unit from its gate pre-activations, c_prev and the incoming dc, dm
 * (0 where absent); capped and out_nl are masks (see pick), so this vectorizes inline. */
static inline unit_grads unit_bwd(float ii, float ig, float fg, float og, float cp, float fgb, float cap,
                                  uint32_t capped, uint32_t out_nl, float dm, float dc) {
  const float f = lv_ksigm(fg + fgb), i = lv_ksigm(ig), t = lv_ktanh(ii), o = lv_ksigm(og);
  const float nc0 = f * cp + i * t;
  const bool inside = nc0 >= -cap && nc0 <= cap;
  const float nc = pick(capped, clamp(nc0, cap), nc0);
  const float tc = lv_ktanh(nc);
  const float dog = pick(out_nl, dm * tc, dm * nc);
  dc += pick(out_nl, dm * o * (1.0f - tc * tc), dm * o);
  dc = pick(capped, inside ? dc : 0.0f, dc);
  return (unit_grads){.gi = dc * i * (1.0f - t * t), .gig = dc * t * i * (1.0f - i),
                      .gfg = dc * cp * f * (1.0f - f), .gog = dog * o * (1.0f - o), .gc = dc * f};
}

/* One unpadded row's backward with ggates, gc_prev and gm_prev all present (every step
 * but a sequence's first, whose zero state has no gradient): no branches, so the loop
 * vectorizes. */
static void bwd_row_simd(const lstm_job *J, int64_t r) {
  const int64_t h = J->h;
  const float *cp = J->c_prev + r * h;
  const float *ii = J->gates + r * 4 * h, *ig = ii + h, *fg = ig + h, *og = fg + h;
  /* A missing gc or gm reads c_prev (any valid row) and picks 0: no conditional loads. */
  const float *gc = J->gc ? J->gc + r * h : cp, *gm = J->gm ? J->gm + r * h : cp;
  float *gg = J->ggates + r * 4 * h, *gcp = J->gc_prev + r * h, *gmp = J->gm_prev + r * h;
  const float fgb = J->fgb, cap = J->cap;
  const uint32_t capped = mask(cap > 0), out_nl = mask(J->out_nl), has_gc = mask(J->gc), has_gm = mask(J->gm);
  const uint32_t gg_acc = mask(J->ggates_acc), gc_acc = mask(J->gc_acc), gm_acc = mask(J->gm_acc);
#pragma omp simd
  for (int64_t j = 0; j < h; j++) {
    const unit_grads u = unit_bwd(ii[j], ig[j], fg[j], og[j], cp[j], fgb, cap, capped, out_nl,
                                  pick(has_gm, gm[j], 0.0f), pick(has_gc, gc[j], 0.0f));
    gg[j] = pick(gg_acc, gg[j] + u.gi, u.gi);
    gg[h + j] = pick(gg_acc, gg[h + j] + u.gig, u.gig);
    gg[2 * h + j] = pick(gg_acc, gg[2 * h + j] + u.gfg, u.gfg);
    gg[3 * h + j] = pick(gg_acc, gg[3 * h + j] + u.gog, u.gog);
    gcp[j] = pick(gc_acc, gcp[j] + u.gc, u.gc);
    gmp[j] = pick(gm_acc, gmp[j] + 0.0f, 0.0f);
  }
}

static void bwd_rows(void *arg, int64_t lo, int64_t hi, int slot) {
  const lstm_job *J = arg;
  const int64_t h = J->h;
  (void)slot;
  for (int64_t r = lo; r < hi; r++) {
    const float *gc = J->gc ? J->gc + r * h : NULL, *gm = J->gm ? J->gm + r * h : NULL;
    if (padded(J, r)) {
      if (J->ggates)
        for (int64_t j = 0; j < 4 * h; j++) put(J->ggates + r * 4 * h + j, J->ggates_acc, 0.0f);
      for (int64_t j = 0; j < h; j++) {
        if (J->gc_prev) put(J->gc_prev + r * h + j, J->gc_acc, gc ? gc[j] : 0.0f);
        if (J->gm_prev) put(J->gm_prev + r * h + j, J->gm_acc, gm ? gm[j] : 0.0f);
      }
      continue;
    }
    if (J->ggates && J->gc_prev && J->gm_prev) {
      bwd_row_simd(J, r);
      continue;
    }
    /* Some output absent: the same unit gradients, stored where asked. */
    const float *cp = J->c_prev + r * h;
    const float *ii = J->gates + r * 4 * h, *ig = ii + h, *fg = ig + h, *og = fg + h;
    float *gg = J->ggates ? J->ggates + r * 4 * h : NULL;
    const uint32_t capped = mask(J->cap > 0), out_nl = mask(J->out_nl);
    for (int64_t j = 0; j < h; j++) {
      const unit_grads u = unit_bwd(ii[j], ig[j], fg[j], og[j], cp[j], J->fgb, J->cap, capped, out_nl,
                                    gm ? gm[j] : 0.0f, gc ? gc[j] : 0.0f);
      if (gg) {
        put(gg + j, J->ggates_acc, u.gi);
        put(gg + h + j, J->ggates_acc, u.gig);
        put(gg + 2 * h + j, J->ggates_acc, u.gfg);
        put(gg + 3 * h + j, J->ggates_acc, u.gog);
      }
      if (J->gc_prev) put(J->gc_prev + r * h + j, J->gc_acc, u.gc);
      if (J->gm_prev) put(J->gm_prev + r * h + j, J->gm_acc, 0.0f);
    }
  }
}

/* Rows per piece: about 16k gate values, so small batches stay on one thread. */
static int64_t row_grain(int64_t b, int64_t h) {
  int64_t per = 16384 / (4 * h > 0 ? 4 * h : 1);
  return lv_cpu_grain(b, per > 1 ? per : 1);
}

void lv_cpu_lstm_step_fwd(lv_kctx *ctx, int64_t b, int64_t h, const float *gates, const float *c_prev,
                          const float *m_prev, const float *pad, float fgb, float cap, bool out_nl, float *c_out,
                          float *m_out) {
  lstm_job j = {.h = h, .gates = gates, .c_prev = c_prev, .m_prev = m_prev, .pad = pad, .fgb = fgb,
                .cap = cap, .out_nl = out_nl, .c_out = c_out, .m_out = m_out};
  lv_cpu_par(ctx, b, row_grain(b, h), fwd_rows, &j);
}

void lv_cpu_lstm_step_bwd(lv_kctx *ctx, int64_t b, int64_t h, const float *gates, const float *c_prev,
                          const float *pad, float fgb, float cap, bool out_nl, const float *gc, const float *gm,
                          float *ggates, bool ggates_acc, float *gc_prev, bool gc_acc, float *gm_prev,
                          bool gm_acc) {
  lstm_job j = {.h = h, .gates = gates, .c_prev = c_prev, .pad = pad, .fgb = fgb, .cap = cap,
                .out_nl = out_nl, .gc = gc, .gm = gm, .ggates = ggates, .ggates_acc = ggates_acc,
                .gc_prev = gc_prev, .gc_acc = gc_acc, .gm_prev = gm_prev, .gm_acc = gm_acc};
  lv_cpu_par(ctx, b, row_grain(b, h), bwd_rows, &j);
}
