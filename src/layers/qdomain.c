/* Quantization domains (layers/qdomain.h; Lingvo's quant_utils.py). */
#include "layers/qdomain.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/names.h"

/* ---- params ---- */

static void fake_qdomain_params(lv_params *p) {
  lv_params_define_bool(p, "narrow_to_asym_bit_depth", true, "Match TFLite's softmax and tanh bound calculations.");
  lv_params_define_none(p, "log_softmax_range", LV_PV_LIST,
                        "Manual range for quantizing logsoftmax activations. Should be None or a sequence of two "
                        "numbers.");
}

static lv_params *qdomain_params(void) { return lv_layer_base_params("QDomain"); }

static lv_params *fake_quantization_schedule_params(void) {
  lv_params *p = lv_layer_base_params("FakeQuantizationSchedule");
  LV_ASSERT(!lv_params_set_string(p, "name", "FQSchedule"));
  lv_params_define_int(p, "clip_start_step", 0, "We start gradually narrowing clipping cap from start_step.");
  lv_params_define_int(p, "clip_end_step", 15000, "We reach end_cap by end_step.");
  lv_params_define_int(p, "quant_start_step", 15000, "Step at which we begin to apply quantization.");
  lv_params_define_float(p, "start_cap", 8.0, "Default clipping/quant start cap.");
  lv_params_define_float(p, "end_cap", 1.0, "Default clipping/quant end cap.");
  lv_params_define_int(p, "bits", 8, "Default quantized bit depth.");
  return p;
}

static lv_params *linear_clipping_cap_schedule_params(void) {
  lv_params *p = lv_layer_base_params("LinearClippingCapSchedule");
  LV_ASSERT(!lv_params_set_string(p, "name", "CCSchedule"));
  lv_params_define_int(p, "start_step", 0, "We start gradually narrowing clipping cap from start_step.");
  lv_params_define_int(p, "end_step", 15000, "We reach end_cap by end_step.");
  lv_params_define_float(p, "start_cap", 8.0,
                         "We gradually narrow the clipping range over the course of training. This is the clipping "
                         "range we apply when training starts.");
  lv_params_define_float(p, "end_cap", 1.0,
                         "We gradually narrow the clipping range over the course of training. This is the clipping "
                         "range we apply towards the end of training.");
  return p;
}

static lv_params *symmetric_scheduled_clip_qdomain_params(void) {
  lv_params *p = lv_layer_base_params("SymmetricScheduledClipQDomain");
  fake_qdomain_params(p);
  lv_params_define_params(p, "cc_schedule", fake_quantization_schedule_params(), "Quantization clipping schedule.");
  return p;
}

static lv_params *passive_asym_qdomain_params(void) {
  lv_params *p = lv_layer_base_params("PassiveAsymQDomain");
  fake_qdomain_params(p);
  lv_params_define_int(p, "bits", 8, "Default quantized bit depth.");
  lv_params_define_float(p, "ema_decay", 0.99, "Moving average decay.");
  lv_params_define_float(p, "default_min", -1.0, "Default minimum value (so initial graphs are valid).");
  lv_params_define_float(p, "default_max", 1.0, "Default maximum value (so initial graphs are valid).");
  lv_params_define_float(p, "quantize_weight_epsilon", 0.0,
                         "Default epsilon for weight quantization to prevent zero range.");
  lv_params_define_int(p, "delay_start_steps", 0,
                       "Delays applying quantization at training time until after this many steps. 0 = start "
                       "immediately. -1 = start never. This is often needed to allow the model to reach some level "
                       "of convergence prior to applying quantization. Only affects training (not eval/inference).");
  lv_params_define_bool(p, "freeze", false, "Freeze quantization parameters");
  return p;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void register_all(void) {
  lv_registry_add("QDomain", qdomain_params);
  lv_registry_add("SymmetricScheduledClipQDomain", symmetric_scheduled_clip_qdomain_params);
  lv_registry_add("PassiveAsymQDomain", passive_asym_qdomain_params);
  lv_registry_add("FakeQuantizationSchedule", fake_quantization_schedule_params);
  lv_registry_add("LinearClippingCapSchedule", linear_clipping_cap_schedule_params);
}
void lv_qdomain_register_all(void) { pthread_once(&g_once, register_all); }

void lv_qdomain_define_params(lv_params *p, const lv_qdomain_name *names, int n) {
  lv_params *q = lv_params_new();
  lv_params_define_params(q, "default", NULL, "Default quantization domain.");
  for (int i = 0; i < n; i++) lv_params_define_params(q, names[i].name, NULL, names[i].desc);
  lv_params_define_params(p, "qdomain", q, "Container for quantization domains.");
}

void lv_qdomain_scope(lv_varstore *vs, const char *scope, const lv_params *p) {
  if (lv_params_has(p, "qdomain.default") && lv_params_is_set(p, "qdomain.default"))
    lv_varstore_set_scope_qdomain(vs, scope, lv_params_sub(p, "qdomain.default"));
}

/* ---- resolving a domain ---- */

static const char *const kDomainClasses[] = {"QDomain", "SymmetricScheduledClipQDomain", "PassiveAsymQDomain"};
static const char *const kScheduleClasses[] = {"FakeQuantizationSchedule", "LinearClippingCapSchedule"};

static lv_status bits_ok(const char *where, const char *key, int64_t bits) {
  if (bits >= 2 && bits <= 16) return NULL;
  return lv_status_make(LV_ERR_INVALID, "%s.%s: %lld: expected a bit depth in [2, 16] (TF's fake_quant num_bits)",
                        where, key, (long long)bits);
}

lv_status lv_qdomain_init(lv_qdomain *d, const lv_params *p, const char *scope, const char *where) {
  memset(d, 0, sizeof *d);
  if (snprintf(d->scope, sizeof d->scope, "%s", scope) >= (int)sizeof d->scope)
    return lv_status_make(LV_ERR_INVALID, "%s: variable scope too long: %s", where, scope);
  const char *cls = lv_params_has(p, "cls") ? lv_params_str(p, "cls") : "";
  int kind = -1;
  for (int i = 0; i < (int)LV_ARRAY_LEN(kDomainClasses); i++)
    if (!strcmp(cls, kDomainClasses[i])) kind = i;
  if (kind < 0)
    return lv_status_make(LV_ERR_INVALID, "%s.cls: \"%s\" is not a quantization domain (expected one of QDomain, "
                          "SymmetricScheduledClipQDomain, PassiveAsymQDomain)", where, cls);
  d->kind = (lv_qd_kind)kind;
  if (d->kind == LV_QD_IDENTITY) return NULL;
  d->narrow_to_asym_bit_depth = lv_params_bool(p, "narrow_to_asym_bit_depth");
  if (lv_params_is_set(p, "log_softmax_range")) {
    double r[2];
    if (lv_pvalue_to_floats(lv_params_list(p, "log_softmax_range"), r, 2) != 2)
      return lv_status_make(LV_ERR_INVALID, "%s.log_softmax_range: should be None or a sequence of two numbers",
                            where);
    d->has_log_softmax_range = true;
    d->log_softmax_range[0] = (float)r[0];
    d->log_softmax_range[1] = (float)r[1];
  }
  if (d->kind == LV_QD_PASSIVE_ASYM) {
    LV_TRY(bits_ok(where, "bits", lv_params_int(p, "bits")));
    d->bits = (int)lv_params_int(p, "bits");
    d->ema_decay = lv_params_float(p, "ema_decay");
    d->default_min = (float)lv_params_float(p, "default_min");
    d->default_max = (float)lv_params_float(p, "default_max");
    d->quantize_weight_epsilon = (float)lv_params_float(p, "quantize_weight_epsilon");
    d->delay_start_steps = lv_params_int(p, "delay_start_steps");
    d->freeze = lv_params_bool(p, "freeze");
    if (!(d->ema_decay >= 0.0 && d->ema_decay <= 1.0))
      return lv_status_make(LV_ERR_INVALID, "%s.ema_decay: %g: expected a decay in [0, 1]", where, d->ema_decay);
    if (d->delay_start_steps < -1)
      return lv_status_make(LV_ERR_INVALID, "%s.delay_start_steps: %lld: expected 0 (start at once), -1 (never) or "
                            "a step count", where, (long long)d->delay_start_steps);
    return NULL;
  }
  const lv_params *cc = lv_params_sub(p, "cc_schedule");
  const char *ccls = cc && lv_params_has(cc, "cls") ? lv_params_str(cc, "cls") : "None";
  int cck = -1;
  for (int i = 0; i < (int)LV_ARRAY_LEN(kScheduleClasses); i++)
    if (!strcmp(ccls, kScheduleClasses[i])) cck = i;
  if (cck < 0)
    return lv_status_make(LV_ERR_INVALID, "%s.cc_schedule.cls: \"%s\": expected FakeQuantizationSchedule or "
                          "LinearClippingCapSchedule", where, ccls);
  d->cc = (lv_cc_kind)cck;
  d->start_cap = (float)lv_params_float(cc, "start_cap");
  d->end_cap = (float)lv_params_float(cc, "end_cap");
  if (d->cc == LV_CC_LINEAR) {
    d->clip_start_step = lv_params_int(cc, "start_step");
    d->clip_end_step = lv_params_int(cc, "end_step");
    if (d->clip_end_step == d->clip_start_step)
      return lv_status_make(LV_ERR_INVALID, "%s.cc_schedule: start_step and end_step are both %lld: the cap's ramp "
                            "divides by end_step - start_step", where, (long long)d->clip_end_step);
    return NULL;
  }
  d->clip_start_step = lv_params_int(cc, "clip_start_step");
  d->clip_end_step = lv_params_int(cc, "clip_end_step");
  d->quant_start_step = lv_params_int(cc, "quant_start_step");
  LV_TRY(bits_ok(where, "cc_schedule.bits", lv_params_int(cc, "bits")));
  d->cc_bits = (int)lv_params_int(cc, "bits");
  if (d->quant_start_step < d->clip_end_step)
    return lv_status_make(LV_ERR_INVALID, "%s.cc_schedule: quant_start_step must be >= clip_end_step (%lld < %lld)",
                          where, (long long)d->quant_start_step, (long long)d->clip_end_step);
  return NULL;
}

/* ---- the schedules (float32, as Lingvo's graph computes them) ---- */

void lv_qdomain_schedule_range(const lv_qdomain *d, int64_t step, float *min, float *max, bool *quantize,
                               bool *active) {
  const float cs = (float)d->clip_start_step, ce = (float)d->clip_end_step, gs = (float)step;
  if (d->cc == LV_CC_LINEAR) {
    const float r = fminf(ce - cs, gs - cs) / (ce - cs);
    const float cap = step < d->clip_start_step ? d->start_cap : r * d->end_cap + (1.0f - r) * d->start_cap;
    *min = -cap;
    *max = cap;
    *quantize = false;
    *active = true;
    return;
  }
  const float r = fminf(ce - cs, gs - cs) / fmaxf(1.0f, ce - cs);
  const float cap = r * d->end_cap + (1.0f - r) * d->start_cap;
  const float dt_max = (float)(1 << (d->cc_bits - 1));
  *min = -cap;
  *max = cap * (dt_max - 1.0f) / dt_max;
  *quantize = !(gs < (float)d->quant_start_step);
  *active = *quantize || r >= 0.0f;
}

/* ---- ops ---- */

static lv_tensor *scalar(lv_graph *g, float v) { return lv_graph_fill(g, lv_shape0(), v); }

static lv_tensor *all_min(lv_graph *g, lv_tensor *x) {
  lv_tensor *flat = lv_op_reshape(g, x, lv_shape1(lv_tensor_numel(x)));
  return lv_op_scale(g, lv_op_reduce_max(g, lv_op_scale(g, flat, -1.0f), 0, false), -1.0f);
}

static lv_tensor *all_max(lv_graph *g, lv_tensor *x) {
  return lv_op_reduce_max(g, lv_op_reshape(g, x, lv_shape1(lv_tensor_numel(x))), 0, false);
}

/* PassiveAsymQDomain._MaybeFakeQuant: no quantization in training before
 * delay_start_steps (never with -1). */
static bool passive_delayed(const lv_qdomain *d, const lv_graph *g) {
  if (d->delay_start_steps == 0 || !lv_graph_is_training(g)) return false;
  return d->delay_start_steps == -1 || lv_graph_step(g) < d->delay_start_steps;
}

static lv_tensor *scheduled(const lv_qdomain *d, lv_graph *g, lv_tensor *x) {
  float mn, mx;
  bool quant, active;
  lv_qdomain_schedule_range(d, lv_graph_step(g), &mn, &mx, &quant, &active);
  if (!active) return x;
  if (!quant) return lv_op_clip(g, x, mn, mx);
  return lv_op_fake_quant_vars(g, x, scalar(g, mn), scalar(g, mx), d->cc_bits, false);
}

lv_tensor *lv_qdomain_weight(const lv_qdomain *d, lv_graph *g, lv_tensor *w) {
  if (!w) return NULL;
  switch (d->kind) {
    case LV_QD_SCHEDULED_CLIP: return scheduled(d, g, w);
    case LV_QD_PASSIVE_ASYM: {
      if (passive_delayed(d, g)) return w;
      lv_tensor *mn = lv_op_minimum(g, all_min(g, w), scalar(g, -d->quantize_weight_epsilon));
      lv_tensor *mx = lv_op_maximum(g, all_max(g, w), scalar(g, d->quantize_weight_epsilon));
      return lv_op_fake_quant_vars(g, w, mn, mx, d->bits, false);
    }
    default: return w;
  }
}

lv_tensor *lv_qdomain_natural(const lv_qdomain *d, lv_graph *g, lv_tensor *x, float min, float max) {
  if (!x) return NULL;
  switch (d->kind) {
    case LV_QD_SCHEDULED_CLIP: return scheduled(d, g, x);
    case LV_QD_PASSIVE_ASYM:
      if (passive_delayed(d, g)) return x;
      return lv_op_fake_quant_vars(g, x, scalar(g, min), scalar(g, max), d->bits, false);
    default: return x;
  }
}

static lv_tensor *constant_range(const lv_qdomain *d, lv_graph *g, lv_tensor *x, float min, float max) {
  if (d->kind == LV_QD_SCHEDULED_CLIP) return lv_op_clip(g, x, min, max);
  return lv_qdomain_natural(d, g, x, min, max);
}

/* ---- a layer's domains ---- */

lv_status lv_qlayer_setup(lv_qlayer *q, const lv_layer *l) {
  memset(q, 0, sizeof *q);
  q->l = l;
  const lv_params *qp = lv_params_has(l->p, "qdomain") ? lv_params_sub(l->p, "qdomain") : NULL;
  if (!qp) return NULL;
  const int n = lv_params_num_keys(qp);
  LV_ASSERT(n <= LV_QLAYER_MAX_DOMAINS && !strcmp(lv_params_key(qp, 0), "default"));
  q->n_domains = n;
  char where[LV_VAR_NAME_MAX + 64], scope[LV_VAR_NAME_MAX];
  for (int i = 0; i < n; i++) {
    const char *name = q->names[i] = lv_params_key(qp, i);
    const lv_params *dp = lv_params_sub(qp, name);
    snprintf(where, sizeof where, "%s.qdomain.%s", l->scope, name);
    const size_t nl = strlen(name);
    if (nl > 12 && !strcmp(name + nl - 12, "_compression")) {
      if (dp)
        return lv_status_make(LV_ERR_INVALID, "%s: lingvoc has no pruning compression; leave it None", where);
      continue;
    }
    if (i == 0 && !dp) dp = lv_varstore_scope_qdomain(l->vs, l->scope); /* the enclosing layer's or task's */
    if (!dp) continue;
    if (snprintf(scope, sizeof scope, "%s/q/qdomain_%s", l->scope, name) >= (int)sizeof scope)
      return lv_status_make(LV_ERR_INVALID, "%s: variable scope too long", where);
    LV_TRY(lv_qdomain_init(&q->own[i], dp, scope, where));
    q->use[i] = &q->own[i];
  }
  for (int i = 1; i < n; i++)
    if (!q->use[i]) q->use[i] = q->use[0];
  return NULL;
}

bool lv_qlayer_on(const lv_qlayer *q) {
  for (int i = 0; i < q->n_domains; i++)
    if (q->use[i] && q->use[i]->kind != LV_QD_IDENTITY) return true;
  return false;
}

static int domain_index(const lv_qlayer *q, const char *domain) {
  for (int i = 0; i < q->n_domains; i++)
    if (!strcmp(q->names[i], domain)) return i;
  return -1;
}

static lv_status add_qvar(lv_qlayer *q, const lv_qdomain *d, const char *act, const char *suffix, float init,
                          lv_var **out) {
  char name[LV_VAR_NAME_MAX];
  if (snprintf(name, sizeof name, "%s/q/%s_%s/var", d->scope, act, suffix) >= (int)sizeof name)
    return lv_status_make(LV_ERR_INVALID, "%s: variable name too long: %s/q/%s_%s/var", q->l->scope, d->scope, act,
                          suffix);
  lv_var_init vi = {LV_INIT_CONSTANT, init};
  return lv_varstore_add(q->l->vs, name, LV_F32, lv_shape0(), vi, false, out);
}

lv_status lv_qlayer_track(lv_qlayer *q, const char *domain, const char *act) {
  const int di = domain_index(q, domain);
  LV_ASSERT(di >= 0); /* the layer's own domain names */
  for (int i = 0; i < q->n_acts; i++)
    if (!strcmp(q->acts[i].name, act))
      return lv_status_make(LV_ERR_INTERNAL, "%s: act_name='%s' is already tracked for this layer.", q->l->scope, act);
  LV_ASSERT(q->n_acts < LV_QLAYER_MAX_ACTS && strlen(act) < sizeof q->acts[0].name);
  lv_qact *a = &q->acts[q->n_acts++];
  memset(a, 0, sizeof *a);
  snprintf(a->name, sizeof a->name, "%s", act);
  a->d = q->use[di];
  if (a->d && a->d->kind == LV_QD_PASSIVE_ASYM) {
    LV_TRY(add_qvar(q, a->d, act, "min", a->d->default_min, &a->min));
    LV_TRY(add_qvar(q, a->d, act, "max", a->d->default_max, &a->max));
  }
  return NULL;
}

void lv_qlayer_bind_weight(const lv_qlayer *q, const char *domain, lv_var *v) {
  const int di = domain_index(q, domain);
  LV_ASSERT(di >= 0); /* the layer's own domain names */
  if (v) v->qdomain = q->use[di] && q->use[di]->kind != LV_QD_IDENTITY ? q->use[di] : NULL;
}

lv_tensor *lv_qlayer_weight(lv_qlayer *q, lv_graph *g, const char *domain, lv_tensor *w) {
  const int di = domain_index(q, domain);
  if (di < 0 || !q->use[di]) return w;
  /* A weight restored from a quantized model file is already quantized (export put it on
   * the domain's grid where it could, model_export.h): its twin runs as it is. */
  if (w && w->qw && !lv_graph_is_training(g)) return w;
  return lv_qdomain_weight(q->use[di], g, w);
}

/* Training: the batch's range (straddling 0), folded into this step's running min/max,
 * whose moving averages update the variables once the step is applied. */
static lv_tensor *passive_act_train(lv_qact *a, lv_graph *g, lv_tensor *x) {
  const lv_qdomain *d = a->d;
  lv_tensor *bmin = lv_op_minimum(g, all_min(g, x), scalar(g, 0.0f));
  lv_tensor *bmax = lv_op_maximum(g, all_max(g, x), scalar(g, 0.0f));
  if (!bmin || !bmax) return NULL;
  if (a->acc_g != g || a->acc_resets != lv_graph_resets(g)) {
    a->acc_g = g;
    a->acc_resets = lv_graph_resets(g);
    a->acc_min = lv_graph_tensor(g, LV_F32, lv_shape0());
    a->acc_max = lv_graph_tensor(g, LV_F32, lv_shape0());
    if (!a->acc_min || !a->acc_max || !lv_graph_copy_into(g, a->acc_min, 0, bmin) ||
        !lv_graph_copy_into(g, a->acc_max, 0, bmax))
      return NULL;
    if (!d->freeze && !(lv_op_moving_average_update_clip(g, &a->min->value, a->acc_min, d->ema_decay, -INFINITY, 0.0f) &&
                        lv_op_moving_average_update_clip(g, &a->max->value, a->acc_max, d->ema_decay, 0.0f, INFINITY)))
      return NULL;
  } else if (!lv_graph_copy_into(g, a->acc_min, 0, lv_op_minimum(g, a->acc_min, bmin)) ||
             !lv_graph_copy_into(g, a->acc_max, 0, lv_op_maximum(g, a->acc_max, bmax))) {
    return NULL;
  }
  if (passive_delayed(d, g)) return x;
  return lv_op_fake_quant_vars(g, x, bmin, bmax, d->bits, false);
}

lv_tensor *lv_qlayer_act(lv_qlayer *q, lv_graph *g, const char *act, lv_tensor *x) {
  if (!x) return NULL;
  lv_qact *a = NULL;
  for (int i = 0; i < q->n_acts && !a; i++)
    if (!strcmp(q->acts[i].name, act)) a = &q->acts[i];
  LV_ASSERT(a); /* tracked in create */
  if (!a->d) return x;
  switch (a->d->kind) {
    case LV_QD_SCHEDULED_CLIP: return scheduled(a->d, g, x);
    case LV_QD_PASSIVE_ASYM:
      if (lv_graph_is_training(g)) return passive_act_train(a, g, x);
      return lv_op_fake_quant_vars(g, x, &a->min->value, &a->max->value, a->d->bits, false);
    default: return x;
  }
}

lv_tensor *lv_qlayer_ract(lv_qlayer *q, lv_graph *g, const char *domain, lv_tensor *x, lv_qdist dist) {
  const int di = domain_index(q, domain);
  if (!x || di < 0 || !q->use[di] || q->use[di]->kind == LV_QD_IDENTITY) return x;
  const lv_qdomain *d = q->use[di];
  float mn = 0.0f, mx = 1.0f;
  switch (dist) {
    case LV_QDIST_PADDING: return constant_range(d, g, x, 0.0f, 1.0f);
    case LV_QDIST_RELU6: mx = 6.0f; break;
    case LV_QDIST_SOFTMAX:
    case LV_QDIST_TANH: {
      double lo = dist == LV_QDIST_TANH ? -1.0 : 0.0, hi = 1.0;
      const int bits = d->kind == LV_QD_PASSIVE_ASYM ? d->bits : d->cc_bits;
      if (d->narrow_to_asym_bit_depth && bits > 0) hi = lo + (hi - lo) * (ldexp(1.0, bits) - 1.0) / ldexp(1.0, bits);
      mn = (float)lo;
      mx = (float)hi;
      break;
    }
    case LV_QDIST_LOG_SOFTMAX:
      if (!d->has_log_softmax_range) {
        lv_graph_fail(g, "%s: p.log_softmax_range must be set when using fns.qlogsoftmax without qout_name or "
                      "QRAct(..., dist=QDistribution.LOG_SOFTMAX)", d->scope);
        return NULL;
      }
      mn = d->log_softmax_range[0];
      mx = d->log_softmax_range[1];
      break;
    default: break;
  }
  return lv_qdomain_natural(d, g, x, mn, mx);
}

bool lv_qdomain_learned_act_range(lv_varstore *vs, const char *layer_scope, const char *domain, const char *act,
                                  float *min, float *max) {
  char name[LV_VAR_NAME_MAX];
  lv_var *v[2];
  const char *suffix[2] = {"min", "max"};
  for (int i = 0; i < 2; i++) {
    if (snprintf(name, sizeof name, "%s/q/qdomain_%s/q/%s_%s/var", layer_scope, domain ? domain : "default", act,
                 suffix[i]) >= (int)sizeof name)
      return false;
    v[i] = lv_varstore_find(vs, name);
    if (!v[i] || v[i]->value.dtype != LV_F32 || lv_tensor_numel(&v[i]->value) != 1) return false;
  }
  double a = 0, b = 0;
  lv_status s = lv_tensor_item(&v[0]->value, &a);
  if (!s) s = lv_tensor_item(&v[1]->value, &b);
  if (s) {
    lv_status_free(s);
    return false;
  }
  *min = (float)a;
  *max = (float)b;
  return true;
}

/* The scheduled domain's end range; false for a clip-only schedule. */
static bool end_range(const lv_qdomain *d, float *min, float *max, int *bits) {
  if (d->cc != LV_CC_FAKE_QUANT) return false;
  const float dt_max = (float)(1 << (d->cc_bits - 1));
  *min = -d->end_cap;
  *max = d->end_cap * (dt_max - 1.0f) / dt_max;
  *bits = d->cc_bits;
  return true;
}

bool lv_qlayer_act_range(const lv_qlayer *q, const char *act, float *min, float *max, int *bits) {
  for (int i = 0; i < q->n_acts; i++) {
    const lv_qact *a = &q->acts[i];
    if (strcmp(a->name, act) || !a->d) continue;
    if (a->d->kind == LV_QD_SCHEDULED_CLIP) return end_range(a->d, min, max, bits);
    if (a->d->kind != LV_QD_PASSIVE_ASYM) return false;
    double lo = 0, hi = 0;
    lv_status s = lv_tensor_item(&a->min->value, &lo);
    if (!s) s = lv_tensor_item(&a->max->value, &hi);
    if (s) {
      lv_status_free(s);
      return false;
    }
    *min = (float)lo;
    *max = (float)hi;
    *bits = a->d->bits;
    return true;
  }
  return false;
}

bool lv_qlayer_weight_range(const lv_qlayer *q, const char *domain, const lv_tensor *w, float *min, float *max,
                            int *bits) {
  const int di = domain_index(q, domain);
  return lv_qdomain_weight_range(di >= 0 ? q->use[di] : NULL, w, min, max, bits);
}

bool lv_qdomain_weight_range(const lv_qdomain *d, const lv_tensor *w, float *min, float *max, int *bits) {
  if (!d || !w || w->dtype != LV_F32) return false;
  if (d->kind == LV_QD_SCHEDULED_CLIP) return end_range(d, min, max, bits);
  if (d->kind != LV_QD_PASSIVE_ASYM) return false;
  const int64_t n = lv_tensor_numel(w);
  float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!h) return false;
  lv_status s = lv_tensor_to_host(w, h);
  if (s) {
    lv_status_free(s);
    free(h);
    return false;
  }
  float lo = -d->quantize_weight_epsilon, hi = d->quantize_weight_epsilon;
  for (int64_t i = 0; i < n; i++) lo = fminf(lo, h[i]), hi = fmaxf(hi, h[i]);
  free(h);
  *min = lo;
  *max = hi;
  *bits = d->bits;
  return true;
}
