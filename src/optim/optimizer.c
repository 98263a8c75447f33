#include "optim/optimizer.h"
#include "base/names.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const lv_optimizer_type_names[LV_OPT_COUNT] = {
    [LV_OPT_SGD] = "SGD",         [LV_OPT_MOMENTUM] = "Momentum", [LV_OPT_RMSPROP] = "RMSProp",
    [LV_OPT_ADAGRAD] = "Adagrad", [LV_OPT_ADADELTA] = "AdaDelta", [LV_OPT_ADAM] = "Adam",
};
_Static_assert(LV_OPT_COUNT == 6, "lv_optimizer_type_names must list every optimizer");

/* Slot suffixes as TF names them: the optimizer's name, then _1 for the second slot of
 * the same variable (TF uniquifies "<var>/<opt name>"). */
static const char *const k_slot_names[LV_OPT_COUNT][2] = {
    [LV_OPT_SGD] = {NULL, NULL},
    [LV_OPT_MOMENTUM] = {"Momentum", NULL},
    [LV_OPT_RMSPROP] = {"RMSProp", "RMSProp_1"},
    [LV_OPT_ADAGRAD] = {"Adagrad", NULL},
    [LV_OPT_ADADELTA] = {"Adadelta", "Adadelta_1"},
    [LV_OPT_ADAM] = {"Adam", "Adam_1"},
};

/* Arrays shorter than this are updated by one thread: the updates are memory-bound, and
 * waking threads costs more than it saves below about a megabyte. */
#define PAR_MIN (1 << 18)

bool lv_optimizer_type_from_name(const char *name, lv_optimizer_type *out) {
  int i = lv_name_index(lv_optimizer_type_names, LV_OPT_COUNT, name);
  if (i >= 0) *out = (lv_optimizer_type)i;
  return i >= 0;
}

lv_optimizer_config lv_optimizer_defaults(lv_optimizer_type t) {
  lv_optimizer_config c;
  memset(&c, 0, sizeof c);
  c.type = t;
  switch (t) {
    case LV_OPT_SGD:
      break;
    case LV_OPT_MOMENTUM:
      c.alpha = 0.9;
      c.use_nesterov = false;
      break;
    case LV_OPT_RMSPROP:
      c.decay = 0.9;
      c.momentum = 0.9;
      c.epsilon = 1.0;
      break;
    case LV_OPT_ADAGRAD:
      c.initial_accumulator_value = 1.0;
      break;
    case LV_OPT_ADADELTA:
      c.decay = 0.95;
      c.epsilon = 1e-8;
      break;
    case LV_OPT_ADAM:
      c.beta1 = 0.9;
      c.beta2 = 0.999;
      c.epsilon = 1e-6;
      break;
    case LV_OPT_COUNT:
      LV_ASSERT(!"bad optimizer type");
  }
  return c;
}

typedef struct opt_var {
  char *name;
  int64_t n;
  float *slot[2];
  char *slot_name[2];
} opt_var;

struct lv_optimizer {
  lv_optimizer_config c;
  int nslots; /* per variable */
  int nvars, cap;
  opt_var *vars;
  float beta1_power, beta2_power;
};

static int slots_per_var(lv_optimizer_type t) {
  return (k_slot_names[t][0] != NULL) + (k_slot_names[t][1] != NULL);
}

lv_status lv_optimizer_create(const lv_optimizer_config *cfg, lv_optimizer **out) {
  *out = NULL;
  if ((int)cfg->type < 0 || cfg->type >= LV_OPT_COUNT)
    return lv_status_make(LV_ERR_INVALID, "unknown optimizer type %d", (int)cfg->type);
  const char *nm = lv_optimizer_type_names[cfg->type];
  switch (cfg->type) {
    case LV_OPT_SGD:
      break;
    case LV_OPT_MOMENTUM:
      if (!(cfg->alpha >= 0))
        return lv_status_make(LV_ERR_INVALID, "%s: alpha must be >= 0, found %g", nm, cfg->alpha);
      break;
    case LV_OPT_RMSPROP:
      if (!(cfg->decay >= 0 && cfg->decay <= 1))
        return lv_status_make(LV_ERR_INVALID, "%s: decay must be in [0, 1], found %g", nm,
                              cfg->decay);
      if (!(cfg->momentum >= 0))
        return lv_status_make(LV_ERR_INVALID, "%s: momentum must be >= 0, found %g", nm,
                              cfg->momentum);
      if (!(cfg->epsilon > 0))
        return lv_status_make(LV_ERR_INVALID, "%s: epsilon must be > 0, found %g", nm,
                              cfg->epsilon);
      break;
    case LV_OPT_ADAGRAD:
      if (!(cfg->initial_accumulator_value > 0))
        return lv_status_make(LV_ERR_INVALID,
                              "%s: initial_accumulator_value must be > 0, found %g", nm,
                              cfg->initial_accumulator_value);
      break;
    case LV_OPT_ADADELTA:
      if (!(cfg->decay >= 0 && cfg->decay <= 1))
        return lv_status_make(LV_ERR_INVALID, "%s: decay must be in [0, 1], found %g", nm,
                              cfg->decay);
      if (!(cfg->epsilon > 0))
        return lv_status_make(LV_ERR_INVALID, "%s: epsilon must be > 0, found %g", nm,
                              cfg->epsilon);
      break;
    case LV_OPT_ADAM:
      if (!(cfg->beta1 >= 0 && cfg->beta1 < 1))
        return lv_status_make(LV_ERR_INVALID, "%s: beta1 must be in [0, 1), found %g", nm,
                              cfg->beta1);
      if (!(cfg->beta2 >= 0 && cfg->beta2 < 1))
        return lv_status_make(LV_ERR_INVALID, "%s: beta2 must be in [0, 1), found %g", nm,
                              cfg->beta2);
      if (!(cfg->epsilon >= 0))
        return lv_status_make(LV_ERR_INVALID, "%s: epsilon must be >= 0, found %g", nm,
                              cfg->epsilon);
      break;
    case LV_OPT_COUNT:
      break;
  }
  lv_optimizer *o = calloc(1, sizeof *o);
  if (!o) return lv_status_make(LV_ERR_RESOURCE, "out of memory creating optimizer %s", nm);
  o->c = *cfg;
  o->nslots = slots_per_var(cfg->type);
  /* TF1 Adam creates both powers with the betas as initial values. */
  o->beta1_power = (float)cfg->beta1;
  o->beta2_power = (float)cfg->beta2;
  *out = o;
  return NULL;
}

static void free_var(opt_var *v) {
  free(v->name);
  for (int k = 0; k < 2; k++) {
    free(v->slot[k]);
    free(v->slot_name[k]);
  }
}

void lv_optimizer_free(lv_optimizer *o) {
  if (!o) return;
  for (int i = 0; i < o->nvars; i++) free_var(&o->vars[i]);
  free(o->vars);
  free(o);
}

const lv_optimizer_config *lv_optimizer_get_config(const lv_optimizer *o) { return &o->c; }
int lv_optimizer_num_vars(const lv_optimizer *o) { return o->nvars; }

lv_status lv_optimizer_add_var(lv_optimizer *o, const char *var_name, int64_t n, int *index) {
  if (n < 0)
    return lv_status_make(LV_ERR_INVALID, "optimizer: variable %s has %lld elements", var_name,
                          (long long)n);
  for (int i = 0; i < o->nvars; i++)
    if (strcmp(o->vars[i].name, var_name) == 0)
      return lv_status_make(LV_ERR_INTERNAL, "optimizer: variable %s added twice", var_name);
  if (o->nvars == o->cap) {
    int cap = o->cap ? 2 * o->cap : 16;
    opt_var *v = realloc(o->vars, (size_t)cap * sizeof *v);
    if (!v) return lv_status_make(LV_ERR_RESOURCE, "out of memory adding variable %s", var_name);
    o->vars = v;
    o->cap = cap;
  }
  opt_var *v = &o->vars[o->nvars];
  memset(v, 0, sizeof *v);
  v->n = n;
  v->name = strdup(var_name);
  bool ok = v->name != NULL;
  for (int k = 0; ok && k < o->nslots; k++) {
    const char *suffix = k_slot_names[o->c.type][k];
    size_t bytes = ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    void *p = NULL;
    ok = posix_memalign(&p, 64, bytes ? bytes : 64) == 0;
    v->slot[k] = p;
    ok = ok && asprintf(&v->slot_name[k], "%s/%s", var_name, suffix) >= 0;
    if (!ok) break;
    float init = 0.0f;
    if (o->c.type == LV_OPT_ADAGRAD) init = (float)o->c.initial_accumulator_value;
    if (o->c.type == LV_OPT_RMSPROP && k == 0) init = 1.0f; /* TF1 RMSProp: ms starts at 1 */
    for (int64_t j = 0; j < n; j++) v->slot[k][j] = init;
  }
  if (!ok) {
    free_var(v);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory for the slots of %s (%lld floats)",
                          var_name, (long long)n);
  }
  if (index) *index = o->nvars;
  o->nvars++;
  return NULL;
}

/* ---- update kernels: TF's training_ops.cc rules, float32 arithmetic in TF's order ---- */

static void apply_sgd(int64_t n, float lr, float *restrict w, const float *restrict g) {
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) w[i] -= g[i] * lr;
}

static void apply_momentum(int64_t n, float lr, float mom, bool nesterov, float *restrict w,
                           const float *restrict g, float *restrict acc) {
  if (nesterov) {
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
      float a = acc[i] * mom + g[i];
      acc[i] = a;
      w[i] -= g[i] * lr + a * mom * lr;
    }
  } else {
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
      float a = acc[i] * mom + g[i];
      acc[i] = a;
      w[i] -= a * lr;
    }
  }
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

static inline __attribute__((always_inline)) void run4(int64_t n, block4_fn fn, float *w,
                                                       const float *g, float *s0, float *s1,
                                                       const kparams *p) {
  const int64_t nb = n / 4;
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
  for (int64_t b = 0; b < nb; b++) {
    int64_t i = 4 * b;
    fn(w + i, g + i, s0 + i, s1 ? s1 + i : NULL, p);
  }
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

/* ApplyRMSProp: ms += (g^2 - ms) * (1 - rho); mom = mom * momentum + g * lr / sqrt(ms + eps);
 * var -= mom. */
static inline void rmsprop4(float *w, const float *g, float *ms, float *mo, const kparams *p) {
  v4 gv = ld4(g), m = ld4(ms);
  m = m + (gv * gv - m) * p->one_minus_rho;
  v4 mom = ld4(mo) * p->mom + (gv * p->lr) / v4_sqrt(m + p->eps);
  st4(ms, m);
  st4(mo, mom);
  st4(w, ld4(w) - mom);
}

/* ApplyAdagrad: accum += g^2; var -= g * lr * rsqrt(accum). */
static inline void adagrad4(float *w, const float *g, float *acc, float *unused,
                            const kparams *p) {
  (void)unused;
  v4 gv = ld4(g), a = ld4(acc) + gv * gv;
  st4(acc, a);
  st4(w, ld4(w) - gv * p->lr * (1.0f / v4_sqrt(a)));
}

/* ApplyAdadelta: accum = accum * rho + g^2 * (1 - rho);
 * update = sqrt(accum_update + eps) * rsqrt(accum + eps) * g; var -= update * lr;
 * accum_update = accum_update * rho + update^2 * (1 - rho). */
static inline void adadelta4(float *w, const float *g, float *acc, float *acc_up,
                             const kparams *p) {
  v4 gv = ld4(g), au = ld4(acc_up);
  v4 a = ld4(acc) * p->rho + gv * gv * p->one_minus_rho;
  v4 up = v4_sqrt(au + p->eps) * (1.0f / v4_sqrt(a + p->eps)) * gv;
  st4(acc, a);
  st4(w, ld4(w) - up * p->lr);
  st4(acc_up, au * p->rho + up * up * p->one_minus_rho);
}

/* ApplyAdam with alpha = lr * sqrt(1 - beta2^t) / (1 - beta1^t) (in p->lr):
 * m += (g - m) * (1 - beta1); v += (g^2 - v) * (1 - beta2); var -= m * alpha / (sqrt(v) + eps).
 * Here rho/one_minus_rho carry (1 - beta1) and mom carries (1 - beta2). */
static inline void adam4(float *w, const float *g, float *m, float *v, const kparams *p) {
  v4 gv = ld4(g), mv = ld4(m), vv = ld4(v);
  mv = mv + (gv - mv) * p->one_minus_rho;
  vv = vv + (gv * gv - vv) * p->mom;
  st4(m, mv);
  st4(v, vv);
  st4(w, ld4(w) - (mv * p->lr) / (v4_sqrt(vv) + p->eps));
}

lv_status lv_optimizer_apply(lv_optimizer *o, float lr, int nvars, float *const *values,
                             const float *const *grads) {
  if (nvars != o->nvars)
    return lv_status_make(LV_ERR_INTERNAL, "optimizer %s: applied to %d variables, %d registered",
                          lv_optimizer_type_names[o->c.type], nvars, o->nvars);
  const lv_optimizer_config *c = &o->c;
  /* TF computes Adam's step size once per step in float32 from the current powers. */
  const float alpha =
      lr * sqrtf(1.0f - o->beta2_power) / (1.0f - o->beta1_power);
  for (int i = 0; i < nvars; i++) {
    opt_var *v = &o->vars[i];
    float *w = values[i];
    const float *g = grads[i];
    switch (c->type) {
      case LV_OPT_SGD:
        apply_sgd(v->n, lr, w, g);
        break;
      case LV_OPT_MOMENTUM:
        apply_momentum(v->n, lr, (float)c->alpha, c->use_nesterov, w, g, v->slot[0]);
        break;
      case LV_OPT_RMSPROP: {
        kparams p = {lr, (float)c->decay, 1.0f - (float)c->decay, (float)c->momentum,
                     (float)c->epsilon};
        run4(v->n, rmsprop4, w, g, v->slot[0], v->slot[1], &p);
        break;
      }
      case LV_OPT_ADAGRAD: {
        kparams p = {lr, 0, 0, 0, 0};
        run4(v->n, adagrad4, w, g, v->slot[0], NULL, &p);
        break;
      }
      case LV_OPT_ADADELTA: {
        kparams p = {lr, (float)c->decay, 1.0f - (float)c->decay, 0, (float)c->epsilon};
        run4(v->n, adadelta4, w, g, v->slot[0], v->slot[1], &p);
        break;
      }
      case LV_OPT_ADAM: {
        kparams p = {alpha, 0, 1.0f - (float)c->beta1, 1.0f - (float)c->beta2, (float)c->epsilon};
        run4(v->n, adam4, w, g, v->slot[0], v->slot[1], &p);
        break;
      }
      case LV_OPT_COUNT:
        LV_ASSERT(!"bad optimizer type");
    }
  }
  if (c->type == LV_OPT_ADAM) {
    o->beta1_power *= (float)c->beta1;
    o->beta2_power *= (float)c->beta2;
  }
  return NULL;
}

int lv_optimizer_num_slot_vars(const lv_optimizer *o) { return o->nvars * o->nslots; }

void lv_optimizer_slot_var(lv_optimizer *o, int i, const char **name, float **data, int64_t *n) {
  LV_ASSERT(i >= 0 && i < o->nvars * o->nslots);
  opt_var *v = &o->vars[i / o->nslots];
  int k = i % o->nslots;
  if (name) *name = v->slot_name[k];
  if (data) *data = v->slot[k];
  if (n) *n = v->n;
}

float *lv_optimizer_find_slot(lv_optimizer *o, const char *name, int64_t *n) {
  for (int i = 0; i < o->nvars; i++) {
    for (int k = 0; k < o->nslots; k++) {
      if (strcmp(o->vars[i].slot_name[k], name) == 0) {
        if (n) *n = o->vars[i].n;
        return o->vars[i].slot[k];
      }
    }
  }
  return NULL;
}

int lv_optimizer_num_nonslot(const lv_optimizer *o) { return o->c.type == LV_OPT_ADAM ? 2 : 0; }

void lv_optimizer_nonslot(lv_optimizer *o, int i, const char **name, float **value) {
  LV_ASSERT(o->c.type == LV_OPT_ADAM && i >= 0 && i < 2);
  if (name) *name = i == 0 ? "beta1_power" : "beta2_power";
  if (value) *value = i == 0 ? &o->beta1_power : &o->beta2_power;
}
