#include "optim/optim_params.h"
#include "optim/optim_var.h"
#include "base/log.h"
#include "base/pyre.h"

#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- small helpers ---------------- */

static lv_pvalue *point(int64_t x, double y) {
  lv_pvalue *l = lv_pvalue_list();
  lv_pvalue_append(l, lv_pvalue_int(x));
  lv_pvalue_append(l, lv_pvalue_float(y));
  return l;
}

static lv_params *base_params(const char *cls, const char *name) {
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "cls", cls, "The class these params build.");
  lv_params_define_string(p, "name", name, "Name of this layer object.");
  return p;
}

/* ---------------- schedules: the class table of schedule.h ---------------- */

lv_params *lv_schedule_params(lv_schedule_type t) {
  const lv_schedule_class *k = lv_schedule_class_of(t);
  lv_params *p = base_params(lv_schedule_type_names[t], "LRSched");
  for (int i = 0; i < k->nparams; i++) {
    const lv_sched_param *sp = &k->params[i];
    switch (sp->kind) {
      case LV_SP_FLOAT: lv_params_define_float(p, sp->name, sp->def, sp->desc); break;
      case LV_SP_INT:
      case LV_SP_INT32: lv_params_define_int(p, sp->name, (int64_t)sp->def, sp->desc); break;
      case LV_SP_BOOL: lv_params_define_bool(p, sp->name, sp->def != 0, sp->desc); break;
      case LV_SP_OPT_FLOAT: lv_params_define_none(p, sp->name, LV_PV_FLOAT, sp->desc); break;
      case LV_SP_OPT_INT:
      case LV_SP_OPT_INT32: lv_params_define_none(p, sp->name, LV_PV_INT, sp->desc); break;
      case LV_SP_POINT: lv_params_define_list(p, sp->name, point((int64_t)sp->def, sp->def_y), sp->desc); break;
      case LV_SP_ORIGIN: lv_params_define_string(p, sp->name, "start", sp->desc); break;
      case LV_SP_NUMBERS: lv_params_define_list(p, sp->name, NULL, sp->desc); break;
      case LV_SP_SCHEDULES: {
        lv_params *def = NULL;
        lv_schedule_type dt;
        if (sp->def_cls) {
          LV_ASSERTF(lv_schedule_type_from_name(sp->def_cls, &dt), "bad default class %s", sp->def_cls);
          def = lv_schedule_params(dt);
        }
        lv_params_define_params_list(p, sp->name, &def, def ? 1 : 0, sp->desc);
        break;
      }
    }
  }
  if (t == LV_SCHED_DEV_BASED)
    lv_params_define_params(p, "metric_history", lv_metric_history_params(), "Metric to monitor for stopping.");
  return p;
}

/* ---------------- early stop: early_stop.h ---------------- */

lv_params *lv_metric_history_params(void) {
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "name", "MetricHistory", "Used by SetLogdirInMetricHistories.");
  lv_params_define_string(p, "jobname", "eval_dev", "Job and dataset to which metric applies.");
  lv_params_define_string(p, "metric", "log_pplx", "Metric to record.");
  lv_params_define_bool(p, "minimize", true,
                        "If True, training minimizes the metric. If False, training maximizes the metric.");
  lv_params_define_string(p, "logdir", "", "Root dir for BF logs (lingvoc: always the run's --logdir, as Lingvo "
                                           "sets it).");
  lv_params_define_bool(p, "tfevent_file", false,
                        "If True, read the metric from events.out.tfevents.* files in the job dir instead of "
                        "maintaining a history file (lingvoc: must be False).");
  lv_params_define_bool(p, "local_filesystem", false, "Logdir is on local filesystem (needed for unit test).");
  return p;
}

static lv_params *early_stop_params(void) {
  lv_params *p = base_params("EarlyStop", "EarlyStop");
  lv_params_define_params(p, "metric_history", lv_metric_history_params(), "Metric history params.");
  lv_params_define_float(p, "tolerance", 0.0, "Minimum significant difference in metric; useful if progress is "
                                              "asymptotic.");
  lv_params_define_int(p, "window", 0, "Maximum number of steps between best and current.");
  lv_params_define_bool(p, "verbose", true, "Log early-stop checks.");
  lv_params_define_int(p, "min_steps", 0, "Minimum number of steps before stopping.");
  lv_params_define_int(p, "logging_interval", 100,
                       "The number of global steps after which the early stop metric history is updated.");
  return p;
}

lv_status lv_metric_history_from_params(const lv_params *p, const char *where, lv_metric_history *out) {
  memset(out, 0, sizeof *out);
  if (!p) return lv_status_make(LV_ERR_INVALID, "%s.metric_history: is None", where);
  if (lv_params_bool(p, "tfevent_file"))
    return lv_status_make(LV_ERR_INVALID, "%s.metric_history.tfevent_file: reading the metric from events files is "
                          "not supported by lingvoc; leave it False (the evaler keeps <metric>.history.txt)", where);
  const char *job = lv_params_str(p, "jobname"), *metric = lv_params_str(p, "metric");
  if (!*job || !*metric || strlen(job) >= sizeof out->jobname || strlen(metric) >= sizeof out->metric ||
      strstr(job, "..") || strstr(metric, ".."))
    return lv_status_make(LV_ERR_INVALID, "%s.metric_history: jobname \"%s\" and metric \"%s\": expected non-empty "
                          "names under %zu characters without \"..\"", where, job, metric, sizeof out->jobname);
  snprintf(out->jobname, sizeof out->jobname, "%s", job);
  snprintf(out->metric, sizeof out->metric, "%s", metric);
  out->minimize = lv_params_bool(p, "minimize");
  return NULL;
}

lv_status lv_early_stop_from_params(const lv_params *train, lv_early_stop_config *out) {
  memset(out, 0, sizeof *out);
  const lv_params *p = lv_params_sub(train, "early_stop");
  if (!p || lv_params_int(p, "window") == 0) return NULL;
  out->window = lv_params_int(p, "window");
  out->tolerance = lv_params_float(p, "tolerance");
  out->min_steps = lv_params_int(p, "min_steps");
  out->verbose = lv_params_bool(p, "verbose");
  if (out->window < 0 || !(out->tolerance >= 0))
    return lv_status_make(LV_ERR_INVALID, "task.train.early_stop: window %lld and tolerance %g must be >= 0",
                          (long long)out->window, out->tolerance);
  return lv_metric_history_from_params(lv_params_sub(p, "metric_history"), "task.train.early_stop",
                                       &out->history);
}

bool lv_dev_based_schedule_from_params(const lv_params *train, lv_metric_history *hist, double *tolerance,
                                       lv_status *st) {
  const lv_params *p = lv_params_sub(train, "lr_schedule");
  *st = NULL;
  if (!p || strcmp(lv_params_str(p, "cls"), "DevBasedSchedule") != 0) return false;
  *tolerance = lv_params_float(p, "tolerance");
  *st = lv_metric_history_from_params(lv_params_sub(p, "metric_history"), "task.train.lr_schedule", hist);
  return true;
}

int lv_metric_histories_from_params(const lv_params *train, lv_metric_history *out, int max) {
  int n = 0;
  lv_early_stop_config es;
  lv_status st = lv_early_stop_from_params(train, &es);
  if (!st && es.window > 0 && n < max) out[n++] = es.history;
  lv_status_free(st);
  double tol;
  if (lv_dev_based_schedule_from_params(train, &out[n < max ? n : 0], &tol, &st) && !st && n < max) n++;
  lv_status_free(st);
  return n;
}

/* Reads a list of numbers (ints or floats) into out[max]. */
static lv_status read_numbers(const lv_params *p, const char *cls, const char *key, double *out, int max, int *n) {
  const lv_pvalue *l = lv_params_list(p, key);
  int len = lv_pvalue_len(l);
  if (len > max)
    return lv_status_make(LV_ERR_INVALID, "%s.%s: at most %d values are supported, found %d", cls, key, max, len);
  for (int i = 0; i < len; i++) {
    const lv_pvalue *v = lv_pvalue_at(l, i);
    lv_pv_kind k = v ? lv_pvalue_kind(v) : LV_PV_KIND_COUNT;
    if (k != LV_PV_INT && k != LV_PV_FLOAT)
      return lv_status_make(LV_ERR_INVALID, "%s.%s[%d]: expected a number, found %s", cls, key, i,
                            v ? lv_pv_kind_names[k] : "None");
    out[i] = lv_pvalue_as_float(v);
  }
  *n = len;
  return NULL;
}

/* A list's length against the count its group shares (the first list read sets it). */
static lv_status check_count(const lv_schedule_class *k, const lv_sched_param *sp, const char *cls, int len,
                             lv_schedule_config *c, const lv_sched_param **first) {
  int *count = (int *)((char *)c + sp->aux_off);
  for (const lv_sched_param *q = k->params; q < sp; q++) {
    if (q->aux_off != sp->aux_off || (q->kind != LV_SP_NUMBERS && q->kind != LV_SP_SCHEDULES)) continue;
    int want = *count + sp->count_delta;
    if (len == want) return NULL;
    int d = sp->count_delta - q->count_delta;
    return lv_status_make(LV_ERR_INVALID, "%s.%s: expected len(%s)%s%.0d = %d items, found %d", cls, sp->name,
                          q->name, d > 0 ? " + " : d < 0 ? " - " : "", d < 0 ? -d : d, want, len);
  }
  *count = len - sp->count_delta;
  *first = sp;
  return NULL;
}

static lv_status read_config(const lv_params *p, lv_schedule_config *c);

/* The sub-schedules of a composite: configs read recursively into one allocation (the
 * pointer array, then the configs), released by release_children. */
static lv_status read_children(const lv_params *p, const char *cls, const char *key, lv_schedule_config *c) {
  int n = lv_params_params_list_len(p, key);
  if (n > LV_SCHED_MAX_POINTS)
    return lv_status_make(LV_ERR_INVALID, "%s.%s: at most %d schedules are supported, found %d", cls, key,
                          LV_SCHED_MAX_POINTS, n);
  if (n == 0) return NULL;
  const lv_schedule_config **ptrs = calloc(1, (sizeof(*ptrs) + sizeof(lv_schedule_config)) * (size_t)n);
  if (!ptrs) return lv_status_make(LV_ERR_RESOURCE, "out of memory reading %s.%s", cls, key);
  lv_schedule_config *kids = (lv_schedule_config *)(ptrs + n);
  c->u.composite.schedules = ptrs;
  for (int i = 0; i < n; i++) ptrs[i] = &kids[i];
  for (int i = 0; i < n; i++) {
    kids[i].type = LV_SCHED_CONSTANT; /* a valid type until read, for release_children */
    LV_TRY(lv_status_wrap(read_config(lv_params_params_list_at(p, key, i), &kids[i]), "%s.%s[%d]", cls, key, i));
  }
  return NULL;
}

static void release_children(lv_schedule_config *c) {
  if (lv_schedule_class_of(c->type)->nchild >= 0 || !c->u.composite.schedules) return;
  for (int i = 0; i < c->u.composite.n; i++) release_children((lv_schedule_config *)c->u.composite.schedules[i]);
  free((void *)c->u.composite.schedules);
  c->u.composite.schedules = NULL;
}

static lv_status read_param(const lv_params *p, const char *cls, const lv_schedule_class *k,
                            const lv_sched_param *sp, lv_schedule_config *c) {
  char *f = (char *)c + sp->off;
  const char *key = sp->name;
  bool set = lv_params_is_set(p, key);
  if (sp->aux_off && (sp->kind == LV_SP_OPT_FLOAT || sp->kind == LV_SP_OPT_INT))
    *(bool *)((char *)c + sp->aux_off) = set;
  if (!set) return NULL;
  const lv_sched_param *first = NULL;
  switch (sp->kind) {
    case LV_SP_FLOAT:
    case LV_SP_INT:
    case LV_SP_OPT_FLOAT:
    case LV_SP_OPT_INT: *(double *)f = lv_params_float(p, key); return NULL;
    case LV_SP_INT32:
    case LV_SP_OPT_INT32: {
      int64_t v = lv_params_int(p, key);
      if (v < INT32_MIN || v > INT32_MAX)
        return lv_status_make(LV_ERR_INVALID, "%s.%s = %lld: expected a value that fits int32", cls, key, (long long)v);
      *(int *)f = (int)v;
      return NULL;
    }
    case LV_SP_BOOL: *(bool *)f = lv_params_bool(p, key); return NULL;
    case LV_SP_POINT: {
      double v[2];
      int n = 0;
      lv_status st = read_numbers(p, cls, key, v, 2, &n);
      if (st || n != 2) {
        lv_status_free(st);
        return lv_status_make(LV_ERR_INVALID, "%s.%s: expected a pair (x, y)", cls, key);
      }
      *(lv_sched_point *)f = (lv_sched_point){v[0], v[1]};
      return NULL;
    }
    case LV_SP_ORIGIN: {
      const char *o = lv_params_str(p, key);
      if (strcmp(o, "start") && strcmp(o, "limit"))
        return lv_status_make(LV_ERR_INVALID, "%s.%s: expected 'start' or 'limit', found '%s'", cls, key, o);
      *(bool *)f = strcmp(o, "limit") == 0;
      return NULL;
    }
    case LV_SP_NUMBERS: {
      int n = 0;
      LV_TRY(read_numbers(p, cls, key, (double *)f, sp->max, &n));
      return check_count(k, sp, cls, n, c, &first);
    }
    case LV_SP_SCHEDULES:
      LV_TRY(check_count(k, sp, cls, lv_params_params_list_len(p, key), c, &first));
      return read_children(p, cls, key, c);
  }
  return NULL;
}

/* Fills c (type from p's cls) from the params, recursively for sub-schedules; on
 * error what was allocated is released. */
static lv_status read_config(const lv_params *p, lv_schedule_config *c) {
  const char *cls = lv_params_str(p, "cls");
  lv_schedule_type t;
  if (!lv_schedule_type_from_name(cls, &t))
    return lv_status_make(LV_ERR_INVALID, "cls: %s is not a learning-rate schedule", cls);
  *c = lv_schedule_defaults(t);
  const lv_schedule_class *k = lv_schedule_class_of(t);
  for (int i = 0; i < k->nparams; i++) {
    lv_status st = read_param(p, cls, k, &k->params[i], c);
    if (st) {
      release_children(c);
      return st;
    }
  }
  return NULL;
}

lv_status lv_schedule_from_params(const lv_params *p, int num_splits, lv_schedule **out) {
  *out = NULL;
  if (!p) return lv_status_make(LV_ERR_INVALID, "lr_schedule: is None; set its cls");
  lv_schedule_config c;
  LV_TRY(read_config(p, &c));
  lv_status st = lv_schedule_create(&c, num_splits, out);
  release_children(&c);
  return st;
}

static double getf(const lv_params *p, const char *key) { return lv_params_float(p, key); }

/* ---------------- optimizers ---------------- */

lv_params *lv_optimizer_params(lv_optimizer_type t) {
  const char *cls = lv_optimizer_type_names[t];
  lv_params *p = base_params(cls, t == LV_OPT_ADAFACTOR ? "Adafactor" : cls);
  lv_params_define_bool(p, "use_bf16_gradients_ar", false,
                        "Whether to use bfloat16 dtype for gradients all-reduce. This applies "
                        "to TPU only.");
  lv_params_define_bool(p, "add_summary_in_apply", true,
                        "Whether to add summary in Apply.");
  lv_params_define_none(p, "clear_variable_scope", LV_PV_BOOL,
                        "Whether to clear the variable scope when creating the optimizer's "
                        "slot variables.");
  const lv_optimizer_class *k = lv_optimizer_class_of(t);
  for (int i = 0; i < k->nparams; i++) {
    const lv_optim_param *op = &k->params[i];
    switch (op->kind) {
      case LV_OPTP_BOOL: lv_params_define_bool(p, op->name, op->def != 0, op->desc); break;
      case LV_OPTP_INT: lv_params_define_int(p, op->name, (int64_t)op->def, op->desc); break;
      case LV_OPTP_OPT_FLOAT: lv_params_define_none(p, op->name, LV_PV_FLOAT, op->desc); break;
      case LV_OPTP_FLOAT: lv_params_define_float(p, op->name, op->def, op->desc); break;
      case LV_OPTP_HIDDEN: break;
    }
  }
  return p;
}

lv_status lv_optimizer_from_params(const lv_params *p, const lv_backend *be, lv_optimizer **out) {
  *out = NULL;
  if (!p) return lv_status_make(LV_ERR_INVALID, "optimizer: is None; set its cls");
  const char *cls = lv_params_str(p, "cls");
  lv_optimizer_type t;
  if (!lv_optimizer_type_from_name(cls, &t))
    return lv_status_make(LV_ERR_INVALID, "cls: %s is not an optimizer", cls);
  lv_optimizer_config c = lv_optimizer_defaults(t);
  const lv_optimizer_class *k = lv_optimizer_class_of(t);
  for (int i = 0; i < k->nparams; i++) {
    const lv_optim_param *op = &k->params[i];
    char *f = (char *)&c + op->off;
    if (op->kind == LV_OPTP_HIDDEN) continue;
    if (op->kind == LV_OPTP_BOOL) *(bool *)f = lv_params_bool(p, op->name);
    else if (op->kind == LV_OPTP_OPT_FLOAT) *(double *)f = lv_params_is_set(p, op->name) ? getf(p, op->name) : 0.0;
    else *(double *)f = getf(p, op->name);
  }
  return lv_optimizer_create(&c, be, out);
}

/* Lingvo's optimizer.Accumulator: a wrapper of another optimizer; the learner does the
 * accumulation (lv_learner_config.accum_steps). */
static lv_params *accumulator_params(void) {
  lv_params *p = base_params("Accumulator", "Accumulator");
  lv_params_define_bool(p, "use_bf16_gradients_ar", false,
                        "Whether to use bfloat16 dtype for gradients all-reduce. This applies to TPU only.");
  lv_params_define_bool(p, "add_summary_in_apply", true, "Whether to add summary in Apply.");
  lv_params_define_none(p, "clear_variable_scope", LV_PV_BOOL,
                        "Whether to clear the variable scope when creating the optimizer's slot variables.");
  lv_params_define_params(p, "optimizer_tpl", lv_optimizer_params(LV_OPT_ADAM), "Params for the wrapped optimizer.");
  lv_params_define_int(p, "accum_steps", 5,
                       "Number of gradient accumulation steps before invoking wrapped optimizer.");
  return p;
}

/* ---------------- GradNormTracker ---------------- */

static lv_params *grad_norm_tracker_params(void) {
  lv_params *p = base_params("GradNormTracker", "grad_norm_tracker");
  lv_params_define_float(p, "decay", 0.995, "Decay in updating the moving avgs in grad norm stats");
  lv_params_define_float(p, "grad_norm_lower_cap", 1e-2, "The minimal gradient norm value.");
  lv_params_define_float(p, "clip_threshold", 4.0,
                         "Distance threshold at which gradients are clipped to 0.0. Distance is "
                         "measured in the number of standard deviations a given gradient norm "
                         "is from the mean gradient norm. The default value of 3.0 means we are "
                         "throwing away roughly 0.15% of steps.");
  lv_params_define_float(p, "grad_norm_clip_cap_min", 0.0,
                         "We stop clipping if grad norm is already smaller than this value.");
  return p;
}

/* ---------------- registry ---------------- */

#define SCHED_CTOR(T) \
  static lv_params *ctor_##T(void) { return lv_schedule_params(T); }
/* The registry's constructors take no argument: one per optimizer type by its number,
 * so adding an optimizer class adds nothing here. */
#define OPT_CTOR(i) \
  static lv_params *opt_ctor_##i(void) { return lv_optimizer_params((lv_optimizer_type)(i)); }

SCHED_CTOR(LV_SCHED_CONSTANT)
SCHED_CTOR(LV_SCHED_CONSTANT_ONE)
SCHED_CTOR(LV_SCHED_PIECEWISE_CONSTANT)
SCHED_CTOR(LV_SCHED_POLYNOMIAL)
SCHED_CTOR(LV_SCHED_LINEAR)
SCHED_CTOR(LV_SCHED_EXPONENTIAL)
SCHED_CTOR(LV_SCHED_CONTINUOUS)
SCHED_CTOR(LV_SCHED_STEPWISE_EXPONENTIAL)
SCHED_CTOR(LV_SCHED_COMBINED_MINIMUM)
SCHED_CTOR(LV_SCHED_LINEAR_RAMPUP_DECAY)
SCHED_CTOR(LV_SCHED_ANNEALING)
SCHED_CTOR(LV_SCHED_TRANSFORMER)
SCHED_CTOR(LV_SCHED_TRANSFORMER_NO_WARMUP)
SCHED_CTOR(LV_SCHED_TRANSFORMER_MLPERF)
SCHED_CTOR(LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT)
SCHED_CTOR(LV_SCHED_LINEAR_RAMPUP_EXP_DECAY)
SCHED_CTOR(LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY)
SCHED_CTOR(LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS)
SCHED_CTOR(LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT)
SCHED_CTOR(LV_SCHED_COSINE)
SCHED_CTOR(LV_SCHED_LINEAR_RAMPUP_COSINE)
SCHED_CTOR(LV_SCHED_PIECEWISE)
SCHED_CTOR(LV_SCHED_CYCLE)
SCHED_CTOR(LV_SCHED_SQRT_DECAY)
SCHED_CTOR(LV_SCHED_SQRT_DECAY_TO_ZERO)
SCHED_CTOR(LV_SCHED_INVERSE_SIGMOID)
SCHED_CTOR(LV_SCHED_EMA_DECAY)
SCHED_CTOR(LV_SCHED_DEV_BASED)
OPT_CTOR(0)
OPT_CTOR(1)
OPT_CTOR(2)
OPT_CTOR(3)
OPT_CTOR(4)
OPT_CTOR(5)
OPT_CTOR(6)
OPT_CTOR(7)
OPT_CTOR(8)
OPT_CTOR(9)
OPT_CTOR(10)
OPT_CTOR(11)
static const lv_params_ctor k_opt_ctors[] = {opt_ctor_0, opt_ctor_1, opt_ctor_2, opt_ctor_3,
                                            opt_ctor_4, opt_ctor_5, opt_ctor_6, opt_ctor_7,
                                            opt_ctor_8, opt_ctor_9, opt_ctor_10, opt_ctor_11};
_Static_assert(LV_OPT_COUNT <= LV_ARRAY_LEN(k_opt_ctors), "more optimizer types than OPT_CTORs: add some");

void lv_optim_register_all(void) {
  static const lv_params_ctor scheds[LV_SCHED_COUNT] = {
      [LV_SCHED_CONSTANT] = ctor_LV_SCHED_CONSTANT,
      [LV_SCHED_CONSTANT_ONE] = ctor_LV_SCHED_CONSTANT_ONE,
      [LV_SCHED_PIECEWISE_CONSTANT] = ctor_LV_SCHED_PIECEWISE_CONSTANT,
      [LV_SCHED_POLYNOMIAL] = ctor_LV_SCHED_POLYNOMIAL,
      [LV_SCHED_LINEAR] = ctor_LV_SCHED_LINEAR,
      [LV_SCHED_EXPONENTIAL] = ctor_LV_SCHED_EXPONENTIAL,
      [LV_SCHED_CONTINUOUS] = ctor_LV_SCHED_CONTINUOUS,
      [LV_SCHED_STEPWISE_EXPONENTIAL] = ctor_LV_SCHED_STEPWISE_EXPONENTIAL,
      [LV_SCHED_COMBINED_MINIMUM] = ctor_LV_SCHED_COMBINED_MINIMUM,
      [LV_SCHED_LINEAR_RAMPUP_DECAY] = ctor_LV_SCHED_LINEAR_RAMPUP_DECAY,
      [LV_SCHED_ANNEALING] = ctor_LV_SCHED_ANNEALING,
      [LV_SCHED_TRANSFORMER] = ctor_LV_SCHED_TRANSFORMER,
      [LV_SCHED_TRANSFORMER_NO_WARMUP] = ctor_LV_SCHED_TRANSFORMER_NO_WARMUP,
      [LV_SCHED_TRANSFORMER_MLPERF] = ctor_LV_SCHED_TRANSFORMER_MLPERF,
      [LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT] = ctor_LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT,
      [LV_SCHED_LINEAR_RAMPUP_EXP_DECAY] = ctor_LV_SCHED_LINEAR_RAMPUP_EXP_DECAY,
      [LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY] = ctor_LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY,
      [LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS] = ctor_LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS,
      [LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT] = ctor_LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT,
      [LV_SCHED_COSINE] = ctor_LV_SCHED_COSINE,
      [LV_SCHED_LINEAR_RAMPUP_COSINE] = ctor_LV_SCHED_LINEAR_RAMPUP_COSINE,
      [LV_SCHED_PIECEWISE] = ctor_LV_SCHED_PIECEWISE,
      [LV_SCHED_CYCLE] = ctor_LV_SCHED_CYCLE,
      [LV_SCHED_SQRT_DECAY] = ctor_LV_SCHED_SQRT_DECAY,
      [LV_SCHED_SQRT_DECAY_TO_ZERO] = ctor_LV_SCHED_SQRT_DECAY_TO_ZERO,
      [LV_SCHED_INVERSE_SIGMOID] = ctor_LV_SCHED_INVERSE_SIGMOID,
      [LV_SCHED_EMA_DECAY] = ctor_LV_SCHED_EMA_DECAY,
      [LV_SCHED_DEV_BASED] = ctor_LV_SCHED_DEV_BASED,
  };
  for (int i = 0; i < LV_SCHED_COUNT; i++) {
    LV_ASSERTF(scheds[i], "schedule %s has no ctor", lv_schedule_type_names[i]);
    lv_registry_add(lv_schedule_type_names[i], scheds[i]);
  }
  for (int i = 0; i < LV_OPT_COUNT; i++) lv_registry_add(lv_optimizer_type_names[i], k_opt_ctors[i]);
  lv_registry_add("GradNormTracker", grad_norm_tracker_params);
  lv_registry_add("Accumulator", accumulator_params);
  lv_registry_add("EarlyStop", early_stop_params);
}

/* ---------------- task.train ---------------- */

void lv_optim_define_train_params(lv_params *train) {
  lv_params_define_float(train, "learning_rate", 0.0, "LR of this task.");
  lv_params_define_params(train, "lr_schedule", lv_schedule_params(LV_SCHED_CONTINUOUS),
                          "Learning rate decay schedule.");
  lv_params_define_params(train, "optimizer", lv_optimizer_params(LV_OPT_ADAM),
                          "Params for the optimizer.");
  lv_params_define_none(train, "l2_regularizer_weight", LV_PV_FLOAT,
                        "If not None, L2 regularization to apply to the weights. Otherwise, "
                        "disable L2 regularization.");
  lv_params_define_none(train, "l1_regularizer_weight", LV_PV_FLOAT,
                        "If not None, L1 regularization to apply to the weights. Otherwise, "
                        "disable L1 regularization.");
  lv_params_define_float(train, "clip_gradient_norm_to_value", 0.0,
                         "Clip gradient by global norm to this value. This is similar to the "
                         "bahaviour of tf.clip_by_global_norm, if you are looking for "
                         "tf.clip_by_norm refer to clip_gradient_single_norm_to_value. Note "
                         "these are mutually exclusive.");
  lv_params_define_float(train, "clip_gradient_single_norm_to_value", 0.0,
                         "Clip gradient by single tensor norm to this value. This is similar "
                         "to the bahaviour of tf.clip_by_norm. Note this is mutually "
                         "exlusive to using clip_gradient_norm_to_value.");
  lv_params_define_float(train, "grad_norm_to_clip_to_zero", 0.0,
                         "Clip gradient to 0 if its norm exceeds this value.");
  lv_params_define_bool(train, "scale_gradients", true,
                        "Whether to apply gradients adjustment and scaling.");
  lv_params_define_params(train, "grad_norm_tracker", NULL,
                          "Params for GradNormTracker, to keep track of the gradient norm.");
  lv_params_define_none(train, "bprop_variable_filter", LV_PV_STRING,
                        "If set, only backprop variables whose names partially match this regexp (re.search).");
  lv_params_define_none(train, "bprop_variable_exclusion", LV_PV_STRING,
                        "If set, do not backprop variables whose names partially match this regexp (re.search).");
  lv_params_define_params(train, "early_stop", early_stop_params(), "Early stopping based on dev-set performance.");
  lv_params_define_int(train, "max_consecutive_skipped_steps", 100,
                       "lingvoc: stop the run with an error after this many consecutive skipped steps (NaN/Inf "
                       "gradients or updates, grad_scale 0); 0 never stops.");
}

lv_status lv_learner_config_from_params(const lv_params *t, lv_learner_config *out) {
  lv_learner_config c = lv_learner_defaults();
  c.learning_rate = getf(t, "learning_rate");
  c.has_l2 = lv_params_is_set(t, "l2_regularizer_weight");
  if (c.has_l2) c.l2_regularizer_weight = getf(t, "l2_regularizer_weight");
  c.has_l1 = lv_params_is_set(t, "l1_regularizer_weight");
  if (c.has_l1) c.l1_regularizer_weight = getf(t, "l1_regularizer_weight");
  c.clip_gradient_norm_to_value = getf(t, "clip_gradient_norm_to_value");
  c.clip_gradient_single_norm_to_value = getf(t, "clip_gradient_single_norm_to_value");
  c.grad_norm_to_clip_to_zero = getf(t, "grad_norm_to_clip_to_zero");
  c.scale_gradients = lv_params_bool(t, "scale_gradients");
  c.max_consecutive_skipped_steps = lv_params_int(t, "max_consecutive_skipped_steps");
  /* Defined by the tasks that clip a group of their variables (LanguageModel). */
  if (lv_params_has(t, "max_lstm_gradient_norm")) c.max_group_gradient_norm = getf(t, "max_lstm_gradient_norm");
  const lv_params *gt = lv_params_sub(t, "grad_norm_tracker");
  c.has_grad_norm_tracker = gt != NULL;
  if (gt) {
    c.grad_norm_tracker.decay = getf(gt, "decay");
    c.grad_norm_tracker.grad_norm_lower_cap = getf(gt, "grad_norm_lower_cap");
    c.grad_norm_tracker.clip_threshold = getf(gt, "clip_threshold");
    c.grad_norm_tracker.grad_norm_clip_cap_min = getf(gt, "grad_norm_clip_cap_min");
  }
  lv_status st = lv_learner_config_validate(&c);
  if (st) {
    /* The core's messages start with the key: make it the dotted path. */
    lv_status e = lv_status_make(lv_status_code(st), "task.train.%s", lv_status_msg(st));
    lv_status_free(st);
    return e;
  }
  *out = c;
  return NULL;
}

lv_status lv_learner_from_params(const lv_params *t, int num_splits, const lv_backend *be,
                                 lv_var *const *vars, int nvars, lv_learner **out) {
  *out = NULL;
  lv_learner_config c;
  LV_TRY(lv_learner_config_from_params(t, &c));
  lv_schedule *s = NULL;
  LV_TRY(lv_status_wrap(lv_schedule_from_params(lv_params_sub(t, "lr_schedule"), num_splits, &s),
                        "task.train.lr_schedule"));
  const lv_params *op = lv_params_sub(t, "optimizer");
  const char *where = "task.train.optimizer";
  if (op && !strcmp(lv_params_str(op, "cls"), "Accumulator")) {
    c.accum_steps = lv_params_int(op, "accum_steps");
    if (c.accum_steps < 1) {
      lv_schedule_free(s);
      return lv_status_make(LV_ERR_INVALID, "task.train.optimizer.accum_steps: %lld: expected 1 or more",
                            (long long)c.accum_steps);
    }
    op = lv_params_sub(op, "optimizer_tpl");
    where = "task.train.optimizer.optimizer_tpl";
  }
  lv_optimizer *o = NULL;
  lv_status st = lv_optimizer_from_params(op, be, &o);
  if (st) {
    lv_schedule_free(s);
    return lv_status_wrap(st, "%s", where);
  }
  lv_var **bprop = calloc((size_t)nvars + 1, sizeof *bprop);
  LV_ASSERT(bprop);
  int nb = 0;
  st = lv_bprop_vars(t, vars, nvars, bprop, &nb);
  if (st) {
    free(bprop);
    lv_schedule_free(s);
    lv_optimizer_free(o);
    return st;
  }
  st = lv_learner_create_for_vars(&c, s, o, bprop, nb, out);
  free(bprop);
  return st;
}

/* Whether re (a task.train key's regex, compiled) is found in "<name>:0" (Python's
 * re.search on a TF variable name). */
static bool search_var(const regex_t *re, const char *name) {
  char full[LV_VAR_NAME_MAX + 3];
  snprintf(full, sizeof full, "%s:0", name);
  return regexec(re, full, 0, NULL, 0) == 0;
}

static lv_status compile_key(const lv_params *t, const char *key, regex_t *re, bool *set) {
  *set = lv_params_is_set(t, key);
  char why[160];
  if (*set && lv_pyre_compile(re, lv_params_str(t, key), REG_EXTENDED | REG_NOSUB, why, sizeof why)) {
    *set = false;
    return lv_status_make(LV_ERR_INVALID, "task.train.%s: '%s' is not a regular expression lingvoc reads: %s", key,
                          lv_params_str(t, key), why);
  }
  return NULL;
}

lv_status lv_bprop_vars(const lv_params *t, lv_var *const *vars, int nvars, lv_var **out, int *nout) {
  *nout = 0;
  regex_t f, x;
  bool has_f = false, has_x = false;
  LV_TRY(compile_key(t, "bprop_variable_filter", &f, &has_f));
  lv_status s = compile_key(t, "bprop_variable_exclusion", &x, &has_x);
  if (s) {
    if (has_f) regfree(&f);
    return s;
  }
  int ntrain = 0, nskip = 0;
  char *skipped = NULL;
  size_t slen = 0;
  FILE *sf = open_memstream(&skipped, &slen);
  LV_ASSERT(sf);
  for (int i = 0; i < nvars; i++) {
    lv_var *v = vars[i];
    bool trainable = v->trainable && v->value.dtype == LV_F32;
    ntrain += trainable;
    if (trainable && ((has_f && !search_var(&f, v->name)) || (has_x && search_var(&x, v->name)))) {
      fprintf(sf, "%s%s", nskip++ ? ", " : "", v->name);
      continue;
    }
    out[(*nout)++] = v;
  }
  fclose(sf);
  int nb = 0;
  for (int i = 0; i < *nout; i++) nb += out[i]->trainable && out[i]->value.dtype == LV_F32;
  if ((has_f || has_x) && nb == 0)
    s = lv_status_make(LV_ERR_INVALID, "task.train.bprop_variable_filter / bprop_variable_exclusion ('%s' / '%s') "
                       "leave none of the %d trainable variables to train", has_f ? lv_params_str(t, "bprop_variable_filter") : "None",
                       has_x ? lv_params_str(t, "bprop_variable_exclusion") : "None", ntrain);
  else if (nb < ntrain)
    lv_info("bprop_variable_filter / bprop_variable_exclusion: training %d of %d variables; not trained (kept as "
            "they are, no optimizer slots): %s", nb, ntrain, skipped);
  free(skipped);
  if (has_f) regfree(&f);
  if (has_x) regfree(&x);
  return s;
}

lv_status lv_ema_from_params(const lv_params *t, int num_splits, const lv_backend *be, lv_var *const *vars,
                             int nvars, lv_ema **out) {
  *out = NULL;
  double decay = getf(t, "ema_decay");
  lv_schedule *s = NULL;
  const lv_params *sp = lv_params_sub(t, "ema_schedule");
  /* The schedule is checked whatever ema_decay says: a bad one is never ignored. */
  if (sp && !strcmp(lv_params_str(sp, "cls"), "DevBasedSchedule"))
    return lv_status_make(LV_ERR_INVALID, "task.train.ema_schedule: a DevBasedSchedule is supported as "
                          "task.train.lr_schedule only (as the decay it would stay 1.0: the averages never move)");
  if (sp) LV_TRY(lv_status_wrap(lv_schedule_from_params(sp, num_splits, &s), "task.train.ema_schedule"));
  if (!(decay > 0.0)) {
    lv_schedule_free(s);
    if (!sp) return NULL;
    return lv_status_make(LV_ERR_INVALID, "task.train.ema_schedule is set (%s) but task.train.ema_decay is %g: "
                          "expected ema_decay > 0, which turns the moving averages on (as in Lingvo, the schedule "
                          "alone does not), or no ema_schedule", lv_params_str(sp, "cls"), decay);
  }
  bool moving = lv_params_is_set(t, "ema_decay_moving_vars") && lv_params_bool(t, "ema_decay_moving_vars");
  return lv_ema_create_for_vars(decay, s, moving, be, vars, nvars, out);
}
