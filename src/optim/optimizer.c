#include "optim/optimizer.h"
#include "base/names.h"
#include "optim/optim_dev.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const lv_optimizer_type_names[LV_OPT_COUNT] = {
    [LV_OPT_SGD] = "SGD",         [LV_OPT_MOMENTUM] = "Momentum", [LV_OPT_RMSPROP] = "RMSProp",
    [LV_OPT_ADAGRAD] = "Adagrad", [LV_OPT_ADADELTA] = "AdaDelta", [LV_OPT_ADAM] = "Adam",
    [LV_OPT_ADAFACTOR] = "XLAShardingAdafactor",
};
_Static_assert(LV_OPT_COUNT == 7, "lv_optimizer_type_names must list every optimizer");

bool lv_optimizer_type_from_name(const char *name, lv_optimizer_type *out) {
  int i = lv_name_index(lv_optimizer_type_names, LV_OPT_COUNT, name);
  if (i >= 0) *out = (lv_optimizer_type)i;
  return i >= 0;
}

/* ---------------- the classes ---------------- */

static void update_sgd(const lv_kernel_table *k, lv_kctx *ctx, const lv_optimizer_config *c, float rate, int64_t n,
                       float *w, const float *g, float *const *slot) {
  (void)c;
  (void)slot;
  k->optim_sgd(ctx, n, rate, w, g);
}

static void update_momentum(const lv_kernel_table *k, lv_kctx *ctx, const lv_optimizer_config *c, float rate,
                            int64_t n, float *w, const float *g, float *const *slot) {
  k->optim_momentum(ctx, n, rate, (float)c->alpha, c->use_nesterov, w, g, slot[0]);
}

/* TF1 RMSProp: ms starts at 1, momentum at 0. */
static float slot_init_rmsprop(const lv_optimizer_config *c, int slot) {
  (void)c;
  return slot == 0 ? 1.0f : 0.0f;
}
static void update_rmsprop(const lv_kernel_table *k, lv_kctx *ctx, const lv_optimizer_config *c, float rate,
                           int64_t n, float *w, const float *g, float *const *slot) {
  k->optim_rmsprop(ctx, n, rate, (float)c->decay, (float)c->momentum, (float)c->epsilon, w, g, slot[0], slot[1]);
}

static float slot_init_adagrad(const lv_optimizer_config *c, int slot) {
  (void)slot;
  return (float)c->initial_accumulator_value;
}
static void update_adagrad(const lv_kernel_table *k, lv_kctx *ctx, const lv_optimizer_config *c, float rate,
                           int64_t n, float *w, const float *g, float *const *slot) {
  (void)c;
  k->optim_adagrad(ctx, n, rate, w, g, slot[0]);
}

static void update_adadelta(const lv_kernel_table *k, lv_kctx *ctx, const lv_optimizer_config *c, float rate,
                            int64_t n, float *w, const float *g, float *const *slot) {
  k->optim_adadelta(ctx, n, rate, (float)c->decay, (float)c->epsilon, w, g, slot[0], slot[1]);
}

/* TF1 Adam creates both powers with the betas as initial values. */
static void nonslot_init_adam(const lv_optimizer_config *c, float *p) {
  p[0] = (float)c->beta1;
  p[1] = (float)c->beta2;
}
static void nonslot_advance_adam(const lv_optimizer_config *c, float *p) {
  p[0] *= (float)c->beta1;
  p[1] *= (float)c->beta2;
}
/* TF computes Adam's step size once per step in float32 from the current powers. */
static float step_rate_adam(const lv_optimizer_config *c, float lr, const float *p) {
  (void)c;
  return lr * sqrtf(1.0f - p[1]) / (1.0f - p[0]);
}
static void update_adam(const lv_kernel_table *k, lv_kctx *ctx, const lv_optimizer_config *c, float rate,
                        int64_t n, float *w, const float *g, float *const *slot) {
  k->optim_adam(ctx, n, rate, (float)c->beta1, (float)c->beta2, (float)c->epsilon, w, g, slot[0], slot[1]);
}

/* XLAShardingAdafactorOptimizer._factored_dims: the two largest dims (ties: the lower
 * index first, Python's stable sort), if the second is at least min_dim_size_to_factor. */
static bool adafactor_factored_dims(const lv_optimizer_config *c, int rank, const int64_t *dims, int *d0, int *d1) {
  if (!c->factored || rank < 2) return false;
  int a = 0;
  for (int i = 1; i < rank; i++)
    if (dims[i] > dims[a]) a = i;
  int b = a == 0 ? 1 : 0;
  for (int i = 0; i < rank; i++)
    if (i != a && dims[i] > dims[b]) b = i;
  if ((double)dims[b] < c->min_dim_size_to_factor) return false;
  *d0 = a;
  *d1 = b;
  return true;
}

static void drop_dim(int rank, const int64_t *dims, int d, int *out_rank, int64_t *out) {
  int k = 0;
  for (int i = 0; i < rank; i++)
    if (i != d) out[k++] = dims[i];
  *out_rank = k;
}

static lv_status slot_shapes_adafactor(const lv_optimizer_config *c, const char *var, int rank, const int64_t *dims,
                                       int *nslots, int *slot_rank, int64_t (*slot_dims)[LV_KMAX_RANK]) {
  int k = 0;
  if (c->beta1 != 0) {
    slot_rank[k] = rank;
    memcpy(slot_dims[k++], dims, sizeof(int64_t) * (size_t)rank);
  }
  int d0, d1;
  if (adafactor_factored_dims(c, rank, dims, &d0, &d1)) {
    if (rank != 2)
      return lv_status_make(LV_ERR_INVALID, "XLAShardingAdafactor: variable %s has rank %d with two dims >= "
                            "min_dim_size_to_factor %g: lingvoc factors matrices only (raise min_dim_size_to_factor "
                            "or set factored = False)", var, rank, c->min_dim_size_to_factor);
    drop_dim(rank, dims, d0, &slot_rank[k], slot_dims[k]);
    k++;
    drop_dim(rank, dims, d1, &slot_rank[k], slot_dims[k]);
    k++;
  } else {
    slot_rank[k] = rank;
    memcpy(slot_dims[k++], dims, sizeof(int64_t) * (size_t)rank);
  }
  *nslots = k;
  return NULL;
}

/* Lingvo's _AdafactorDecayRatePow / _AdafactorDecayRateAdam at the global step, in
 * float32 as TF. */
static float adafactor_decay(const lv_optimizer_config *c, int64_t step) {
  const float x = (float)step;
  if (c->decay_exponent_pow != 0)
    return 1.0f - powf(x - (float)c->decay_exponent_offset + 1.0f, -(float)c->decay_exponent_pow);
  const float b2 = (float)c->beta2, t = x + 1.0f;
  return b2 * (1.0f - powf(b2, t - 1.0f)) / (1.0f - powf(b2, t));
}

static void update_adafactor(const lv_kernel_table *k, lv_kctx *ctx, const lv_optimizer_config *c, float lr,
                             int64_t step, int rank, const int64_t *dims, float *w, const float *g,
                             float *const *slot, double *scratch) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  lv_adafactor_args a = {.rows = 1, .cols = n, .param_scale = c->multiply_by_parameter_scale, .lr = lr,
                         .decay = adafactor_decay(c, step), .eps1 = (float)c->epsilon1, .eps2 = (float)c->epsilon2,
                         .clip = (float)c->clipping_threshold, .beta1 = (float)c->beta1};
  float *m1 = c->beta1 != 0 ? slot[0] : NULL;
  float *const *v = slot + (c->beta1 != 0 ? 1 : 0);
  int d0, d1;
  if (adafactor_factored_dims(c, rank, dims, &d0, &d1)) {
    /* [rows, cols]: vr (the mean over d0) is the column accumulator when d0 = 0. */
    a.rows = dims[0], a.cols = dims[1], a.factored = true, a.norm_rows = d0 == 1;
    float *row_acc = d0 == 1 ? v[0] : v[1], *col_acc = d0 == 1 ? v[1] : v[0];
    k->optim_adafactor(ctx, &a, w, g, m1, row_acc, col_acc, scratch);
  } else {
    k->optim_adafactor(ctx, &a, w, g, m1, v[0], NULL, scratch);
  }
}

#define OFF(field) offsetof(lv_optimizer_config, field)
#define PFLOAT(name, def, range, field, desc) {name, LV_OPTP_FLOAT, def, range, desc, OFF(field)}
#define PBOOL(name, def, field, desc) {name, LV_OPTP_BOOL, def, LV_OPTR_ANY, desc, OFF(field)}
#define PKIND(kind, name, def, range, field, desc) {name, kind, def, range, desc, OFF(field)}

static const lv_optim_param p_momentum[] = {
    PFLOAT("alpha", 0.9, LV_OPTR_NONNEG, alpha, "The damping factor in the momentum optimizer."),
    PBOOL("use_nesterov", 0, use_nesterov, "True iff use Nesterov."),
};
static const lv_optim_param p_rmsprop[] = {
    PFLOAT("decay", 0.9, LV_OPTR_UNIT, decay, "Discounting factor for the history/coming gradient."),
    PFLOAT("momentum", 0.9, LV_OPTR_NONNEG, momentum, "Momentum in RMSProp."),
    PFLOAT("epsilon", 1.0, LV_OPTR_POSITIVE, epsilon, "Epsilon term for RMSProp. Small value to avoid zero denominator."),
};
static const lv_optim_param p_adagrad[] = {
    PFLOAT("initial_accumulator_value", 1.0, LV_OPTR_POSITIVE, initial_accumulator_value,
           "Adagrad's initial_accumulator_value."),
};
static const lv_optim_param p_adadelta[] = {
    PFLOAT("decay", 0.95, LV_OPTR_UNIT, decay, "Discounting factor for the history/coming gradient."),
    PFLOAT("epsilon", 1e-8, LV_OPTR_POSITIVE, epsilon, "A constant epsilon used to better condition the grad update."),
};
static const lv_optim_param p_adam[] = {
    PFLOAT("beta1", 0.9, LV_OPTR_UNIT_OPEN, beta1, "Beta1 for Adam."),
    PFLOAT("beta2", 0.999, LV_OPTR_UNIT_OPEN, beta2, "Beta2 for Adam."),
    PFLOAT("epsilon", 1e-6, LV_OPTR_NONNEG, epsilon, "Epsilon for Adam."),
};

static const lv_optim_param p_adafactor[] = {
    PFLOAT("beta1", 0, LV_OPTR_UNIT_OPEN, beta1, "Beta1 of Adam. Can be zero."),
    PFLOAT("beta2", 0.999, LV_OPTR_UNIT_OPEN, beta2, "Beta2 of Adam."),
    PBOOL("multiply_by_parameter_scale", 1, multiply_by_parameter_scale,
          "If True, then compute absolute_update_scale as described in tensor2tensor/utils/adafactor.py. If False, "
          "let absolute_update_scale be the externally supplied learning_rate."),
    PKIND(LV_OPTP_OPT_FLOAT, "clipping_threshold", 0, LV_OPTR_NONNEG, clipping_threshold,
          "Should be >=1.0 or None for no update clipping"),
    PBOOL("factored", 1, factored, "Whether to factor the second-moment estimator. True means less memory usage."),
    PKIND(LV_OPTP_OPT_FLOAT, "decay_exponent_pow", 0, LV_OPTR_NONNEG, decay_exponent_pow,
          "if set, call adafactor_decay_rate_pow from T2T adafactor"),
    PKIND(LV_OPTP_INT, "decay_exponent_offset", 0, LV_OPTR_ANY, decay_exponent_offset,
          "start step number for adafactor decay schedule"),
    PKIND(LV_OPTP_INT, "min_dim_size_to_factor", 128, LV_OPTR_NONNEG, min_dim_size_to_factor,
          "only factor accumulator if two tensor dimensions are at least this size."),
    PBOOL("cond_is_finite", 0, cond_is_finite, "Condition Adafactor update on sufficient stats being finite."),
    PKIND(LV_OPTP_HIDDEN, "epsilon1", 1e-30, LV_OPTR_POSITIVE, epsilon1, "Regularization constant for squared gradient."),
    PKIND(LV_OPTP_HIDDEN, "epsilon2", 1e-3, LV_OPTR_NONNEG, epsilon2, "Regularization constant for parameter scale."),
};

#define PARAMS(p) .params = p, .nparams = (int)LV_ARRAY_LEN(p)

static const lv_optimizer_class g_classes[LV_OPT_COUNT] = {
    [LV_OPT_SGD] = {.update = update_sgd},
    [LV_OPT_MOMENTUM] = {PARAMS(p_momentum), .nslots = 1, .slot_names = {"Momentum"}, .update = update_momentum},
    [LV_OPT_RMSPROP] = {PARAMS(p_rmsprop), .nslots = 2, .slot_names = {"RMSProp", "RMSProp_1"},
                        .slot_init = slot_init_rmsprop, .update = update_rmsprop},
    [LV_OPT_ADAGRAD] = {PARAMS(p_adagrad), .nslots = 1, .slot_names = {"Adagrad"}, .slot_init = slot_init_adagrad,
                        .update = update_adagrad},
    [LV_OPT_ADADELTA] = {PARAMS(p_adadelta), .nslots = 2, .slot_names = {"Adadelta", "Adadelta_1"},
                         .update = update_adadelta},
    [LV_OPT_ADAM] = {PARAMS(p_adam), .nslots = 2, .slot_names = {"Adam", "Adam_1"}, .nnonslot = 2,
                     .nonslot_names = {"beta1_power", "beta2_power"}, .nonslot_init = nonslot_init_adam,
                     .nonslot_advance = nonslot_advance_adam, .step_rate = step_rate_adam, .update = update_adam},
    [LV_OPT_ADAFACTOR] = {PARAMS(p_adafactor), .slot_names = {"Adafactor"}, .slot_shapes = slot_shapes_adafactor,
                          .update_shaped = update_adafactor},
};

const lv_optimizer_class *lv_optimizer_class_of(lv_optimizer_type t) {
  LV_ASSERTF((int)t >= 0 && t < LV_OPT_COUNT && (g_classes[t].update || g_classes[t].update_shaped),
             "bad optimizer type %d", (int)t);
  return &g_classes[t];
}

lv_optimizer_config lv_optimizer_defaults(lv_optimizer_type t) {
  const lv_optimizer_class *k = lv_optimizer_class_of(t);
  lv_optimizer_config c;
  memset(&c, 0, sizeof c);
  c.type = t;
  for (int i = 0; i < k->nparams; i++) {
    const lv_optim_param *p = &k->params[i];
    char *f = (char *)&c + p->off;
    if (p->kind == LV_OPTP_BOOL) *(bool *)f = p->def != 0;
    else *(double *)f = p->def;
  }
  return c;
}

/* Lingvo's constructor assertions: "<class>: <param> must be <range>, found <value>". */
static lv_status check_range(const char *cls, const lv_optim_param *p, double v) {
  static const char *const what[LV_OPTR_COUNT] = {
      [LV_OPTR_ANY] = "", [LV_OPTR_NONNEG] = ">= 0", [LV_OPTR_POSITIVE] = "> 0",
      [LV_OPTR_UNIT] = "in [0, 1]", [LV_OPTR_UNIT_OPEN] = "in [0, 1)",
  };
  bool ok = true;
  switch (p->range) {
    case LV_OPTR_ANY: break;
    case LV_OPTR_NONNEG: ok = v >= 0; break;
    case LV_OPTR_POSITIVE: ok = v > 0; break;
    case LV_OPTR_UNIT: ok = v >= 0 && v <= 1; break;
    case LV_OPTR_UNIT_OPEN: ok = v >= 0 && v < 1; break;
    case LV_OPTR_COUNT: LV_ASSERT(!"bad optimizer param range");
  }
  return ok ? NULL : lv_status_make(LV_ERR_INVALID, "%s: %s must be %s, found %g", cls, p->name, what[p->range], v);
}

typedef struct opt_var {
  char *name;
  int64_t n;
  int rank; /* the variable's shape */
  int64_t dims[LV_KMAX_RANK];
  int nslots;
  float *slot[LV_OPT_MAX_SLOTS]; /* [slot_n[k]] device memory */
  float *host[LV_OPT_MAX_SLOTS]; /* host copies for checkpoints */
  char *slot_name[LV_OPT_MAX_SLOTS];
  int64_t slot_n[LV_OPT_MAX_SLOTS];
  int slot_rank[LV_OPT_MAX_SLOTS];
  int64_t slot_dims[LV_OPT_MAX_SLOTS][LV_KMAX_RANK];
} opt_var;

struct lv_optimizer {
  lv_optimizer_config c;
  const lv_optimizer_class *cls;
  const lv_backend *be;
  const lv_kernel_table *k;
  lv_kctx *ctx;
  int nvars, cap;
  int nslot_vars; /* over all variables */
  opt_var *vars;
  float nonslot[LV_OPT_MAX_NONSLOT];
  int64_t step;
  double *scratch; /* update_shaped's 4 doubles of device memory */
};

lv_status lv_optimizer_create(const lv_optimizer_config *cfg, const lv_backend *be,
                               lv_optimizer **out) {
  *out = NULL;
  if (!be) return lv_status_make(LV_ERR_INTERNAL, "optimizer: no backend for its variables");
  if ((int)cfg->type < 0 || cfg->type >= LV_OPT_COUNT)
    return lv_status_make(LV_ERR_INVALID, "unknown optimizer type %d", (int)cfg->type);
  const char *nm = lv_optimizer_type_names[cfg->type];
  const lv_optimizer_class *cls = lv_optimizer_class_of(cfg->type);
  for (int i = 0; i < cls->nparams; i++)
    if (cls->params[i].kind != LV_OPTP_BOOL)
      LV_TRY(check_range(nm, &cls->params[i], *(const double *)((const char *)cfg + cls->params[i].off)));
  if (cfg->type == LV_OPT_ADAFACTOR && cfg->cond_is_finite)
    return lv_status_make(LV_ERR_INVALID, "%s: cond_is_finite is not supported by lingvoc (its learner already undoes "
                          "an update that makes a variable or slot NaN/Inf); leave it False", nm);
  lv_optimizer *o = calloc(1, sizeof *o);
  if (!o) return lv_status_make(LV_ERR_RESOURCE, "out of memory creating optimizer %s", nm);
  o->c = *cfg;
  o->cls = cls;
  o->be = be;
  o->k = be->kernels;
  o->ctx = lv_optim_ctx(be);
  if (cls->update_shaped && !(o->scratch = lv_optim_alloc(be, 4 * sizeof(double)))) {
    free(o);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory creating optimizer %s", nm);
  }
  if (cls->nonslot_init) cls->nonslot_init(cfg, o->nonslot);
  *out = o;
  return NULL;
}

static void free_var(const lv_optimizer *o, opt_var *v) {
  free(v->name);
  for (int k = 0; k < LV_OPT_MAX_SLOTS; k++) {
    if (v->host[k] != v->slot[k]) free(v->host[k]);
    lv_optim_free(o->be, v->slot[k]);
    free(v->slot_name[k]);
  }
}

void lv_optimizer_free(lv_optimizer *o) {
  if (!o) return;
  for (int i = 0; i < o->nvars; i++) free_var(o, &o->vars[i]);
  free(o->vars);
  lv_optim_free(o->be, o->scratch);
  free(o);
}

const lv_optimizer_config *lv_optimizer_get_config(const lv_optimizer *o) { return &o->c; }
const lv_backend *lv_optimizer_backend(const lv_optimizer *o) { return o->be; }
int lv_optimizer_num_vars(const lv_optimizer *o) { return o->nvars; }
void lv_optimizer_set_step(lv_optimizer *o, int64_t step) { o->step = step; }

lv_status lv_optimizer_add_var(lv_optimizer *o, const char *var_name, int64_t n, int *index) {
  return lv_optimizer_add_var_shaped(o, var_name, 1, &n, index);
}

lv_status lv_optimizer_add_var_shaped(lv_optimizer *o, const char *var_name, int rank, const int64_t *dims,
                                      int *index) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i] < 0 ? -1 : dims[i];
  if (n < 0 || rank < 0 || rank > LV_KMAX_RANK)
    return lv_status_make(LV_ERR_INVALID, "optimizer: variable %s has %lld elements (rank %d)", var_name,
                          (long long)n, rank);
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
  v->rank = rank;
  memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
  if (o->cls->slot_shapes) {
    LV_TRY(o->cls->slot_shapes(&o->c, var_name, rank, dims, &v->nslots, v->slot_rank, v->slot_dims));
  } else {
    v->nslots = o->cls->nslots;
    for (int k = 0; k < v->nslots; k++) {
      v->slot_rank[k] = rank;
      memcpy(v->slot_dims[k], dims, sizeof(int64_t) * (size_t)rank);
    }
  }
  v->name = strdup(var_name);
  bool ok = v->name != NULL;
  for (int k = 0; ok && k < v->nslots; k++) {
    int64_t sn = 1;
    for (int d = 0; d < v->slot_rank[k]; d++) sn *= v->slot_dims[k][d];
    v->slot_n[k] = sn;
    /* TF uniquifies the second and later slots of one name with _1, _2, ... */
    const char *suffix = o->cls->slot_shapes ? o->cls->slot_names[0] : o->cls->slot_names[k];
    size_t bytes = (size_t)sn * sizeof(float);
    v->slot[k] = lv_optim_alloc(o->be, bytes);
    /* On the host the slot is its own host copy (a second copy would double the slots'
     * memory); the copies below are then no-ops. */
    v->host[k] = lv_device_is_host(o->be->device) ? v->slot[k] : malloc(bytes ? bytes : 1);
    ok = v->slot[k] && v->host[k] &&
         (o->cls->slot_shapes && k > 0 ? asprintf(&v->slot_name[k], "%s/%s_%d", var_name, suffix, k)
                                       : asprintf(&v->slot_name[k], "%s/%s", var_name, suffix)) >= 0;
    if (!ok) break;
    float init = o->cls->slot_init ? o->cls->slot_init(&o->c, k) : 0.0f;
    o->k->optim_fill(o->ctx, sn, v->slot[k], init);
    lv_optim_to_host(o->be, v->host[k], v->slot[k], bytes);
  }
  if (!ok) {
    free_var(o, v);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory for the slots of %s (%lld floats)",
                          var_name, (long long)n);
  }
  if (index) *index = o->nvars;
  o->nvars++;
  o->nslot_vars += v->nslots;
  return NULL;
}

lv_status lv_optimizer_apply(lv_optimizer *o, float lr, int nvars, float *const *values,
                             const float *const *grads) {
  if (nvars != o->nvars)
    return lv_status_make(LV_ERR_INTERNAL, "optimizer %s: applied to %d variables, %d registered",
                          lv_optimizer_type_names[o->c.type], nvars, o->nvars);
  const lv_optimizer_class *cls = o->cls;
  const float rate = cls->step_rate ? cls->step_rate(&o->c, lr, o->nonslot) : lr;
  for (int i = 0; i < nvars; i++) {
    opt_var *v = &o->vars[i];
    if (cls->update_shaped)
      cls->update_shaped(o->k, o->ctx, &o->c, rate, o->step, v->rank, v->dims, values[i], grads[i], v->slot,
                         o->scratch);
    else
      cls->update(o->k, o->ctx, &o->c, rate, v->n, values[i], grads[i], v->slot);
  }
  if (cls->nonslot_advance) cls->nonslot_advance(&o->c, o->nonslot);
  return NULL;
}

int lv_optimizer_num_slot_vars(const lv_optimizer *o) { return o->nslot_vars; }

/* Slot i (over all variables, in order) as its variable and that variable's slot k. */
static opt_var *slot_at(const lv_optimizer *o, int i, int *k) {
  LV_ASSERT(i >= 0 && i < o->nslot_vars);
  for (int v = 0; v < o->nvars; v++) {
    if (i < o->vars[v].nslots) {
      *k = i;
      return &o->vars[v];
    }
    i -= o->vars[v].nslots;
  }
  LV_ASSERT(!"slot index out of range");
  return NULL;
}

void lv_optimizer_slot_var(lv_optimizer *o, int i, const char **name, float **data, int64_t *n) {
  int k;
  opt_var *v = slot_at(o, i, &k);
  if (name) *name = v->slot_name[k];
  if (data) *data = v->slot[k];
  if (n) *n = v->slot_n[k];
}

int lv_optimizer_slot_dims(const lv_optimizer *o, int i, int64_t *dims) {
  int k;
  const opt_var *v = slot_at(o, i, &k);
  memcpy(dims, v->slot_dims[k], sizeof(int64_t) * (size_t)v->slot_rank[k]);
  return v->slot_rank[k];
}

float *lv_optimizer_slot_host(lv_optimizer *o, int i) {
  int k;
  opt_var *v = slot_at(o, i, &k);
  return v->host[k];
}

void lv_optimizer_slots_to_host(lv_optimizer *o) {
  for (int i = 0; i < o->nvars; i++)
    for (int k = 0; k < o->vars[i].nslots; k++)
      lv_optim_to_host(o->be, o->vars[i].host[k], o->vars[i].slot[k], (size_t)o->vars[i].slot_n[k] * sizeof(float));
}

void lv_optimizer_slots_from_host(lv_optimizer *o) {
  for (int i = 0; i < o->nvars; i++)
    for (int k = 0; k < o->vars[i].nslots; k++)
      lv_optim_from_host(o->be, o->vars[i].slot[k], o->vars[i].host[k], (size_t)o->vars[i].slot_n[k] * sizeof(float));
}

float *lv_optimizer_find_slot(lv_optimizer *o, const char *name, int64_t *n) {
  for (int i = 0; i < o->nvars; i++) {
    for (int k = 0; k < o->vars[i].nslots; k++) {
      if (strcmp(o->vars[i].slot_name[k], name) == 0) {
        if (n) *n = o->vars[i].slot_n[k];
        return o->vars[i].slot[k];
      }
    }
  }
  return NULL;
}

int lv_optimizer_num_nonslot(const lv_optimizer *o) { return o->cls->nnonslot; }

void lv_optimizer_nonslot(lv_optimizer *o, int i, const char **name, float **value) {
  LV_ASSERT(i >= 0 && i < o->cls->nnonslot);
  if (name) *name = o->cls->nonslot_names[i];
  if (value) *value = &o->nonslot[i];
}
