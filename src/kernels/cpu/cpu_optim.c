/* The learner's update on the CPU: ordered norms, gradient adjustments and TF1's
 * optimizer rules (training_ops.cc), float32 arithmetic in TF's order. Each element's
 * arithmetic is independent of the thread count and sums use fixed blocks, so results
 * are the same for any number of threads. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

/* Arrays shorter than this are processed by one thread: the updates are memory-bound,
 * and waking threads costs more than it saves below about a megabyte. */
#define PAR_MIN (1 << 18)

static inline double block_sum_sq(const float *x, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
  return s;
}

static inline double block_sum_abs(const float *x, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++) s += fabs((double)x[i]);
  return s;
}

typedef struct sum_job {
  int64_t n;
  const float *x;
  bool absolute;
  double *scratch;
  float *y;
  float v;
} sum_job;

LV_CPU_PAR_LOOP(sum_blocks, sum_job, b, {
  int64_t lo = b * LV_OPTIM_SUM_BLOCK;
  int64_t len = J->n - lo < LV_OPTIM_SUM_BLOCK ? J->n - lo : LV_OPTIM_SUM_BLOCK;
  J->scratch[b] = J->absolute ? block_sum_abs(J->x + lo, len) : block_sum_sq(J->x + lo, len);
})

static void fill_range(void *arg, int64_t lo, int64_t hi, int slot) {
  const sum_job *j = arg;
  (void)slot;
  for (int64_t i = lo; i < hi; i++) j->y[i] = j->v;
}

void lv_cpu_optim_sum(lv_kctx *ctx, int64_t n, const float *x, bool absolute, double *scratch,
                      double *out) {
  const int64_t nb = (n + LV_OPTIM_SUM_BLOCK - 1) / LV_OPTIM_SUM_BLOCK;
  sum_job j = {.n = n, .x = x, .absolute = absolute, .scratch = scratch};
  lv_cpu_par(ctx, nb, n >= PAR_MIN ? lv_cpu_grain(nb, 1) : nb, sum_blocks, &j);
  double total = 0;
  for (int64_t b = 0; b < nb; b++) total += scratch[b];
  *out = total;
}

void lv_cpu_optim_fill(lv_kctx *ctx, int64_t n, float *x, float v) {
  sum_job j = {.y = x, .v = v};
  lv_cpu_par(ctx, n, n >= PAR_MIN ? lv_cpu_grain(n, 4096) : n, fill_range, &j);
}

/* The elementwise rules below, split over the threads by lv_cpu_par (each element's
 * arithmetic is its own). */
typedef struct upd_job {
  const float *x, *g;
  float *y, *w, *acc;
  float s, lr, mom;
} upd_job;

LV_CPU_PAR_SIMD_LOOP(scale_piece, upd_job, i, J->y[i] *= J->s;)
LV_CPU_PAR_SIMD_LOOP(l1_piece, upd_job, i, J->y[i] += J->s * (float)((J->x[i] > 0) - (J->x[i] < 0));)
LV_CPU_PAR_SIMD_LOOP(l2_piece, upd_job, i, J->y[i] += J->s * J->x[i];)
LV_CPU_PAR_SIMD_LOOP(sgd_piece, upd_job, i, J->w[i] -= J->g[i] * J->lr;)
LV_CPU_PAR_SIMD_LOOP(nesterov_piece, upd_job, i, {
  float a = J->acc[i] * J->mom + J->g[i];
  J->acc[i] = a;
  J->w[i] -= J->g[i] * J->lr + a * J->mom * J->lr;
})
LV_CPU_PAR_SIMD_LOOP(momentum_piece, upd_job, i, {
  float a = J->acc[i] * J->mom + J->g[i];
  J->acc[i] = a;
  J->w[i] -= a * J->lr;
})

static int64_t upd_grain(int64_t n) { return n >= PAR_MIN ? lv_cpu_grain(n, 4096) : n; }

LV_CPU_PAR_SIMD_LOOP(ema_piece, upd_job, i, J->y[i] -= (J->y[i] - J->x[i]) * J->s;)

void lv_cpu_optim_ema(lv_kctx *ctx, int64_t n, float a, const float *v, float *s) {
  upd_job j = {.x = v, .y = s, .s = a};
  lv_cpu_par(ctx, n, upd_grain(n), ema_piece, &j);
}

void lv_cpu_optim_scale(lv_kctx *ctx, int64_t n, float *x, float s) {
  upd_job j = {.y = x, .s = s};
  lv_cpu_par(ctx, n, upd_grain(n), scale_piece, &j);
}

void lv_cpu_optim_lp_add(lv_kctx *ctx, int64_t n, const float *x, float w, bool l1, float *g) {
  upd_job j = {.x = x, .y = g, .s = w};
  lv_cpu_par(ctx, n, upd_grain(n), l1 ? l1_piece : l2_piece, &j);
}

typedef struct rows_job {
  int64_t width;
  const float *x;
  float *g;
  float w;
  bool l1;
  double *scratch;
} rows_job;

static void lp_rows_range(void *arg, int64_t lo, int64_t hi, int slot) {
  const rows_job *j = arg;
  (void)slot;
  for (int64_t r = lo; r < hi; r++) {
    const float *x = j->x + r * j->width;
    float *g = j->g + r * j->width;
    bool touched = false;
    for (int64_t i = 0; i < j->width && !touched; i++) touched = g[i] != 0.0f;
    if (!touched) {
      j->scratch[r] = 0.0;
      continue;
    }
    if (j->l1) {
      for (int64_t i = 0; i < j->width; i++) g[i] += j->w * (float)((x[i] > 0) - (x[i] < 0));
      j->scratch[r] = block_sum_abs(x, j->width);
    } else {
      for (int64_t i = 0; i < j->width; i++) g[i] += j->w * x[i];
      j->scratch[r] = block_sum_sq(x, j->width);
    }
  }
}

void lv_cpu_optim_lp_add_rows(lv_kctx *ctx, int64_t rows, int64_t width, const float *x, float w, bool l1,
                              float *g, double *scratch, double *out) {
  rows_job j = {.width = width, .x = x, .g = g, .w = w, .l1 = l1, .scratch = scratch};
  const int64_t n = rows * width;
  lv_cpu_par(ctx, rows, n >= PAR_MIN ? lv_cpu_grain(rows, (4096 + width - 1) / width) : rows, lp_rows_range, &j);
  double total = 0;
  for (int64_t r = 0; r < rows; r++) total += scratch[r];
  *out = total;
}

void lv_cpu_optim_sgd(lv_kctx *ctx, int64_t n, float lr, float *restrict w,
                      const float *restrict g) {
  upd_job j = {.w = w, .g = g, .lr = lr};
  lv_cpu_par(ctx, n, upd_grain(n), sgd_piece, &j);
}

void lv_cpu_optim_momentum(lv_kctx *ctx, int64_t n, float lr, float mom, bool nesterov,
                           float *restrict w, const float *restrict g, float *restrict acc) {
  upd_job j = {.w = w, .g = g, .acc = acc, .lr = lr, .mom = mom};
  lv_cpu_par(ctx, n, upd_grain(n), nesterov ? nesterov_piece : momentum_piece, &j);
}

/* The square-root optimizers run 4 lanes at a time with an explicit vector sqrt: with
 * errno semantics (the build does not pass -fno-math-errno) GCC will not vectorize
 * sqrtf. sqrtps is correctly rounded like sqrtf, so every lane gets exactly the scalar
 * result; the last n % 4 elements go through the same block on a zero-padded copy. */
typedef float v4 __attribute__((vector_size(16)));

static inline v4 v4_sqrt(v4 x) {
#if defined(__SSE__)
  return __builtin_ia32_sqrtps(x);
#else
  for (int k = 0; k < 4; k++) x[k] = sqrtf(x[k]);
  return x;
#endif
}
static inline v4 ld4(const float *p) {
  v4 r;
  memcpy(&r, p, sizeof r);
  return r;
}
static inline void st4(float *p, v4 x) { memcpy(p, &x, sizeof x); }

typedef struct kparams {
  float lr, rho, one_minus_rho, mom, eps;
} kparams;

typedef void (*block4_fn)(float *w, const float *g, float *s0, float *s1, const kparams *p);

typedef struct run4_job {
  block4_fn fn;
  float *w;
  const float *g;
  float *s0, *s1;
  const kparams *p;
} run4_job;

LV_CPU_PAR_LOOP(run4_blocks, run4_job, b, {
  int64_t i = 4 * b;
  J->fn(J->w + i, J->g + i, J->s0 + i, J->s1 ? J->s1 + i : NULL, J->p);
})

static void run4(lv_kctx *ctx, int64_t n, block4_fn fn, float *w, const float *g, float *s0, float *s1,
                 const kparams *p) {
  const int64_t nb = n / 4;
  run4_job j = {fn, w, g, s0, s1, p};
  lv_cpu_par(ctx, nb, n >= PAR_MIN ? lv_cpu_grain(nb, 1024) : nb, run4_blocks, &j);
  int64_t i0 = 4 * nb, r = n - i0;
  if (r > 0) {
    float tw[4] = {0}, tg[4] = {0}, t0[4] = {0}, t1[4] = {0};
    memcpy(tw, w + i0, (size_t)r * sizeof(float));
    memcpy(tg, g + i0, (size_t)r * sizeof(float));
    memcpy(t0, s0 + i0, (size_t)r * sizeof(float));
    if (s1) memcpy(t1, s1 + i0, (size_t)r * sizeof(float));
    fn(tw, tg, t0, s1 ? t1 : NULL, p);
    memcpy(w + i0, tw, (size_t)r * sizeof(float));
    memcpy(s0 + i0, t0, (size_t)r * sizeof(float));
    if (s1) memcpy(s1 + i0, t1, (size_t)r * sizeof(float));
  }
}

static inline void rmsprop4(float *w, const float *g, float *ms, float *mo, const kparams *p) {
  v4 gv = ld4(g), m = ld4(ms);
  m = m + (gv * gv - m) * p->one_minus_rho;
  v4 mom = ld4(mo) * p->mom + (gv * p->lr) / v4_sqrt(m + p->eps);
  st4(ms, m);
  st4(mo, mom);
  st4(w, ld4(w) - mom);
}

void lv_cpu_optim_rmsprop(lv_kctx *ctx, int64_t n, float lr, float rho, float momentum,
                          float eps, float *w, const float *g, float *ms, float *mom) {
  (void)ctx;
  kparams p = {lr, rho, 1.0f - rho, momentum, eps};
  run4(ctx, n, rmsprop4, w, g, ms, mom, &p);
}

static inline void adagrad4(float *w, const float *g, float *acc, float *unused,
                            const kparams *p) {
  (void)unused;
  v4 gv = ld4(g), a = ld4(acc) + gv * gv;
  st4(acc, a);
  st4(w, ld4(w) - gv * p->lr * (1.0f / v4_sqrt(a)));
}

void lv_cpu_optim_adagrad(lv_kctx *ctx, int64_t n, float lr, float *w, const float *g,
                          float *acc) {
  (void)ctx;
  kparams p = {lr, 0, 0, 0, 0};
  run4(ctx, n, adagrad4, w, g, acc, NULL, &p);
}

static inline void adadelta4(float *w, const float *g, float *acc, float *acc_up,
                             const kparams *p) {
  v4 gv = ld4(g), au = ld4(acc_up);
  v4 a = ld4(acc) * p->rho + gv * gv * p->one_minus_rho;
  v4 up = v4_sqrt(au + p->eps) * (1.0f / v4_sqrt(a + p->eps)) * gv;
  st4(acc, a);
  st4(w, ld4(w) - up * p->lr);
  st4(acc_up, au * p->rho + up * up * p->one_minus_rho);
}

void lv_cpu_optim_adadelta(lv_kctx *ctx, int64_t n, float lr, float rho, float eps, float *w,
                           const float *g, float *acc, float *acc_up) {
  (void)ctx;
  kparams p = {lr, rho, 1.0f - rho, 0, eps};
  run4(ctx, n, adadelta4, w, g, acc, acc_up, &p);
}

/* rho/one_minus_rho carry (1 - beta1) and mom carries (1 - beta2). */
static inline void adam4(float *w, const float *g, float *m, float *v, const kparams *p) {
  v4 gv = ld4(g), mv = ld4(m), vv = ld4(v);
  mv = mv + (gv - mv) * p->one_minus_rho;
  vv = vv + (gv * gv - vv) * p->mom;
  st4(m, mv);
  st4(v, vv);
  st4(w, ld4(w) - (mv * p->lr) / (v4_sqrt(vv) + p->eps));
}

void lv_cpu_optim_adam(lv_kctx *ctx, int64_t n, float alpha, float beta1, float beta2, float eps,
                       float *w, const float *g, float *m, float *v) {
  (void)ctx;
  kparams p = {alpha, 0, 1.0f - beta1, 1.0f - beta2, eps};
  run4(ctx, n, adam4, w, g, m, v, &p);
}

/* ---- Adafactor: one thread, sums in double in index order (the reductions make it
 * more than an elementwise rule; its variables are matrices of a model's size). ---- */

static inline float adafactor_x(const lv_adafactor_args *a, const float *g, const float *vr_row,
                                const float *vc_col, float ltm, int64_t r, int64_t c) {
  const int64_t i = r * a->cols + c;
  if (!a->factored) return g[i] * (1.0f / sqrtf(vr_row[i]));
  float vr = a->norm_rows ? vr_row[r] : vc_col[c], vc = a->norm_rows ? vc_col[c] : vr_row[r];
  return g[i] * (1.0f / sqrtf(vr / ltm)) * (1.0f / sqrtf(vc));
}

void lv_cpu_optim_adafactor(lv_kctx *ctx, const lv_adafactor_args *a, float *w, const float *g, float *m1,
                            float *vr_row, float *vc_col, double *scratch) {
  (void)ctx;
  const int64_t rows = a->rows, cols = a->cols, n = rows * cols;
  if (n == 0) return;
  const float decay = a->decay, mix = 1.0f - a->decay;
  float scale = a->lr;
  scratch[0] = a->param_scale ? block_sum_sq(w, n) : 0.0;
  if (a->param_scale) scale = fmaxf(sqrtf((float)(scratch[0] / (double)n)), a->eps2) * a->lr;
  float ltm = 1.0f;
  if (a->factored) {
    for (int64_t r = 0; r < rows; r++) {
      double s = 0;
      for (int64_t c = 0; c < cols; c++) s += (double)(g[r * cols + c] * g[r * cols + c] + a->eps1);
      vr_row[r] = vr_row[r] * decay + (float)(s / (double)cols) * mix;
    }
    for (int64_t c = 0; c < cols; c++) {
      double s = 0;
      for (int64_t r = 0; r < rows; r++) s += (double)(g[r * cols + c] * g[r * cols + c] + a->eps1);
      vc_col[c] = vc_col[c] * decay + (float)(s / (double)rows) * mix;
    }
    const float *vr = a->norm_rows ? vr_row : vc_col;
    const int64_t nvr = a->norm_rows ? rows : cols;
    double s = 0;
    for (int64_t i = 0; i < nvr; i++) s += (double)vr[i];
    scratch[1] = s;
    ltm = (float)(s / (double)nvr);
  } else {
    for (int64_t i = 0; i < n; i++) vr_row[i] = vr_row[i] * decay + (g[i] * g[i] + a->eps1) * mix;
  }
  float denom = 1.0f;
  if (a->clip > 0) {
    double s = 0;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++) {
        float x = adafactor_x(a, g, vr_row, vc_col, ltm, r, c);
        s += (double)x * (double)x;
      }
    scratch[2] = s;
    denom = fmaxf(1.0f, sqrtf((float)(s / (double)n)) / a->clip);
  }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      const int64_t i = r * cols + c;
      float u = adafactor_x(a, g, vr_row, vc_col, ltm, r, c) / denom * scale;
      if (a->beta1 > 0) {
        m1[i] = m1[i] * a->beta1 + u * (1.0f - a->beta1);
        u = m1[i];
      }
      w[i] -= u;
    }
}
