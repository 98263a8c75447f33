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
};
_Static_assert(LV_OPT_COUNT == 6, "lv_optimizer_type_names must list every optimizer");

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

#define OFF(field) offsetof(lv_optimizer_config, field)
#define PFLOAT(name, def, range, field, desc) {name, LV_OPTP_FLOAT, def, range, desc, OFF(field)}
#define PBOOL(name, def, field, desc) {name, LV_OPTP_BOOL, def, LV_OPTR_ANY, desc, OFF(field)}

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
};

const lv_optimizer_class *lv_optimizer_class_of(lv_optimizer_type t) {
  LV_ASSERTF((int)t >= 0 && t < LV_OPT_COUNT && g_classes[t].update, "bad optimizer type %d", (int)t);
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
  float *slot[LV_OPT_MAX_SLOTS]; /* [n] device memory */
  float *host[LV_OPT_MAX_SLOTS]; /* [n] host copies for checkpoints */
  char *slot_name[LV_OPT_MAX_SLOTS];
} opt_var;

struct lv_optimizer {
  lv_optimizer_config c;
  const lv_optimizer_class *cls;
  const lv_backend *be;
  const lv_kernel_table *k;
  lv_kctx *ctx;
  int nslots; /* per variable */
  int nvars, cap;
  opt_var *vars;
  float nonslot[LV_OPT_MAX_NONSLOT];
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
    if (cls->params[i].kind == LV_OPTP_FLOAT)
      LV_TRY(check_range(nm, &cls->params[i], *(const double *)((const char *)cfg + cls->params[i].off)));
  lv_optimizer *o = calloc(1, sizeof *o);
  if (!o) return lv_status_make(LV_ERR_RESOURCE, "out of memory creating optimizer %s", nm);
  o->c = *cfg;
  o->cls = cls;
  o->be = be;
  o->k = be->kernels;
  o->ctx = lv_optim_ctx(be);
  o->nslots = cls->nslots;
  if (cls->nonslot_init) cls->nonslot_init(cfg, o->nonslot);
  *out = o;
  return NULL;
}

static void free_var(const lv_optimizer *o, opt_var *v) {
  free(v->name);
  for (int k = 0; k < LV_OPT_MAX_SLOTS; k++) {
    lv_optim_free(o->be, v->slot[k]);
    free(v->host[k]);
    free(v->slot_name[k]);
  }
}

void lv_optimizer_free(lv_optimizer *o) {
  if (!o) return;
  for (int i = 0; i < o->nvars; i++) free_var(o, &o->vars[i]);
  free(o->vars);
  free(o);
}

const lv_optimizer_config *lv_optimizer_get_config(const lv_optimizer *o) { return &o->c; }
const lv_backend *lv_optimizer_backend(const lv_optimizer *o) { return o->be; }
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
    const char *suffix = o->cls->slot_names[k];
    size_t bytes = (size_t)n * sizeof(float);
    v->slot[k] = lv_optim_alloc(o->be, bytes);
    v->host[k] = malloc(bytes ? bytes : 1);
    ok = v->slot[k] && v->host[k] && asprintf(&v->slot_name[k], "%s/%s", var_name, suffix) >= 0;
    if (!ok) break;
    float init = o->cls->slot_init ? o->cls->slot_init(&o->c, k) : 0.0f;
    o->k->optim_fill(o->ctx, n, v->slot[k], init);
    lv_optim_to_host(o->be, v->host[k], v->slot[k], bytes);
  }
  if (!ok) {
    free_var(o, v);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory for the slots of %s (%lld floats)",
                          var_name, (long long)n);
  }
  if (index) *index = o->nvars;
  o->nvars++;
  return NULL;
}

lv_status lv_optimizer_apply(lv_optimizer *o, float lr, int nvars, float *const *values,
                             const float *const *grads) {
  if (nvars != o->nvars)
    return lv_status_make(LV_ERR_INTERNAL, "optimizer %s: applied to %d variables, %d registered",
                          lv_optimizer_type_names[o->c.type], nvars, o->nvars);
  const lv_optimizer_class *cls = o->cls;
  const float rate = cls->step_rate ? cls->step_rate(&o->c, lr, o->nonslot) : lr;
  for (int i = 0; i < nvars; i++) cls->update(o->k, o->ctx, &o->c, rate, o->vars[i].n, values[i], grads[i], o->vars[i].slot);
  if (cls->nonslot_advance) cls->nonslot_advance(&o->c, o->nonslot);
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

float *lv_optimizer_slot_host(lv_optimizer *o, int i) {
  LV_ASSERT(i >= 0 && i < o->nvars * o->nslots);
  return o->vars[i / o->nslots].host[i % o->nslots];
}

void lv_optimizer_slots_to_host(lv_optimizer *o) {
  for (int i = 0; i < o->nvars; i++)
    for (int k = 0; k < o->nslots; k++)
      lv_optim_to_host(o->be, o->vars[i].host[k], o->vars[i].slot[k],
                       (size_t)o->vars[i].n * sizeof(float));
}

void lv_optimizer_slots_from_host(lv_optimizer *o) {
  for (int i = 0; i < o->nvars; i++)
    for (int k = 0; k < o->nslots; k++)
      lv_optim_from_host(o->be, o->vars[i].slot[k], o->vars[i].host[k],
                         (size_t)o->vars[i].n * sizeof(float));
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

int lv_optimizer_num_nonslot(const lv_optimizer *o) { return o->cls->nnonslot; }

void lv_optimizer_nonslot(lv_optimizer *o, int i, const char **name, float **value) {
  LV_ASSERT(i >= 0 && i < o->cls->nnonslot);
  if (name) *name = o->cls->nonslot_names[i];
  if (value) *value = &o->nonslot[i];
}
