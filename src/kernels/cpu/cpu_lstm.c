/* The fused LSTMCellSimple gate step (Lingvo's rnn_cell.py): one pass over the 4H gate
 * pre-activations of each row computes the new c and m; the backward pass recomputes the
 * same values from the gates and c_prev instead of keeping them. Rows are independent,
 * so splitting them over threads never changes a bit. */
#include <math.h>

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
    for (int64_t j = 0; j < h; j++) {
      float nc = lv_ksigm(fg[j] + J->fgb) * cp[j] + lv_ksigm(ig[j]) * lv_ktanh(ii[j]);
      if (J->cap > 0) nc = nc < -J->cap ? -J->cap : (nc > J->cap ? J->cap : nc);
      c[j] = nc;
      m[j] = lv_ksigm(og[j]) * (J->out_nl ? lv_ktanh(nc) : nc);
    }
  }
}

static inline void put(float *p, bool acc, float v) { *p = acc ? *p + v : v; }

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
    const float *cp = J->c_prev + r * h;
    const float *ii = J->gates + r * 4 * h, *ig = ii + h, *fg = ig + h, *og = fg + h;
    float *gg = J->ggates ? J->ggates + r * 4 * h : NULL;
    for (int64_t j = 0; j < h; j++) {
      float f = lv_ksigm(fg[j] + J->fgb), i = lv_ksigm(ig[j]), t = lv_ktanh(ii[j]), o = lv_ksigm(og[j]);
      float nc = f * cp[j] + i * t;
      bool pass = true;
      if (J->cap > 0) {
        pass = nc >= -J->cap && nc <= J->cap;
        nc = nc < -J->cap ? -J->cap : (nc > J->cap ? J->cap : nc);
      }
      float dm = gm ? gm[j] : 0.0f, dc = gc ? gc[j] : 0.0f, dog;
      if (J->out_nl) {
        float tc = lv_ktanh(nc);
        dog = dm * tc;
        dc += dm * o * (1.0f - tc * tc);
      } else {
        dog = dm * nc;
        dc += dm * o;
      }
      if (!pass) dc = 0.0f;
      if (gg) {
        put(gg + j, J->ggates_acc, dc * i * (1.0f - t * t));
        put(gg + h + j, J->ggates_acc, dc * t * i * (1.0f - i));
        put(gg + 2 * h + j, J->ggates_acc, dc * cp[j] * f * (1.0f - f));
        put(gg + 3 * h + j, J->ggates_acc, dog * o * (1.0f - o));
      }
      if (J->gc_prev) put(J->gc_prev + r * h + j, J->gc_acc, dc * f);
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
