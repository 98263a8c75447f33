#include "optim/schedule.h"
#include "base/names.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const lv_schedule_type_names[LV_SCHED_COUNT] = {
    [LV_SCHED_CONSTANT] = "Constant",
    [LV_SCHED_CONSTANT_ONE] = "ConstantOne",
    [LV_SCHED_PIECEWISE_CONSTANT] = "PiecewiseConstantSchedule",
    [LV_SCHED_POLYNOMIAL] = "PolynomialSchedule",
    [LV_SCHED_LINEAR] = "LinearSchedule",
    [LV_SCHED_EXPONENTIAL] = "ExponentialSchedule",
    [LV_SCHED_CONTINUOUS] = "ContinuousSchedule",
    [LV_SCHED_STEPWISE_EXPONENTIAL] = "StepwiseExponentialSchedule",
    [LV_SCHED_COMBINED_MINIMUM] = "CombinedMinimumSchedule",
    [LV_SCHED_LINEAR_RAMPUP_DECAY] = "LinearRampupDecaySchedule",
    [LV_SCHED_ANNEALING] = "AnnealingSchedule",
    [LV_SCHED_TRANSFORMER] = "TransformerSchedule",
    [LV_SCHED_TRANSFORMER_NO_WARMUP] = "TransformerScheduleNoWarmUp",
    [LV_SCHED_TRANSFORMER_MLPERF] = "TransformerMLPerfSchedule",
    [LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT] =
        "LinearRampupExponentialDecayScaledByNumSplitSchedule",
    [LV_SCHED_LINEAR_RAMPUP_EXP_DECAY] = "LinearRampupExponentialDecay",
    [LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY] = "LinearRampupSqrtDecay",
    [LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS] =
        "LinearRampupSqrtDecayByBatchSizeAndReplicas",
    [LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT] = "LinearRampupPiecewiseConstantSchedule",
    [LV_SCHED_COSINE] = "CosineSchedule",
    [LV_SCHED_LINEAR_RAMPUP_COSINE] = "LinearRampupCosineSchedule",
    [LV_SCHED_PIECEWISE] = "PiecewiseSchedule",
    [LV_SCHED_CYCLE] = "CycleSchedule",
    [LV_SCHED_SQRT_DECAY] = "SqrtDecay",
    [LV_SCHED_SQRT_DECAY_TO_ZERO] = "SqrtDecayToZero",
    [LV_SCHED_INVERSE_SIGMOID] = "InverseSigmoid",
    [LV_SCHED_EMA_DECAY] = "EmaDecaySchedule",
    [LV_SCHED_DEV_BASED] = "DevBasedSchedule",
};
_Static_assert(LV_SCHED_COUNT == 28, "lv_schedule_type_names must list every schedule type");

bool lv_schedule_type_from_name(const char *name, lv_schedule_type *out) {
  int i = lv_name_index(lv_schedule_type_names, LV_SCHED_COUNT, name);
  if (i >= 0) *out = (lv_schedule_type)i;
  return i >= 0;
}

/* A built schedule: its validated config (child pointers cleared) plus the child
 * schedules it evaluates (the user's children for composites; the sub-schedules Lingvo
 * builds internally for derived schedules). */
struct lv_schedule {
  lv_schedule_config c;
  int nchild;
  lv_schedule **child;
  /* PiecewiseConstant-style selection used by PIECEWISE_CONSTANT, PIECEWISE, CYCLE and
   * LINEAR_RAMPUP_PIECEWISE_CONSTANT's second child: float32 boundaries. */
  int nb;
  float fb[LV_SCHED_MAX_POINTS];
  double scale;  /* CONTINUOUS initial value; SQRT_DECAY_TO_ZERO scale */
  double period; /* CYCLE */
  float dev_factor; /* DEV_BASED: cur_factor */
  int64_t dev_ref_step; /* DEV_BASED: ref_step */
};

void lv_schedule_free(lv_schedule *s) {
  if (!s) return;
  for (int i = 0; i < s->nchild; i++) lv_schedule_free(s->child[i]);
  free(s->child);
  free(s);
}

lv_schedule_type lv_schedule_get_type(const lv_schedule *s) { return s->c.type; }

static lv_status sched_err(const lv_schedule_config *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static lv_status sched_err(const lv_schedule_config *c, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return lv_status_make(LV_ERR_INVALID, "%s: %s", lv_schedule_type_names[c->type], msg);
}

static lv_status sched_new(const lv_schedule_config *c, int nchild, lv_schedule **out) {
  lv_schedule *s = calloc(1, sizeof *s);
  if (!s) return lv_status_make(LV_ERR_RESOURCE, "out of memory creating a schedule");
  s->c = *c;
  if (lv_schedule_class_of(c->type)->nchild < 0) s->c.u.composite.schedules = NULL;
  if (nchild > 0) {
    s->child = calloc((size_t)nchild, sizeof *s->child);
    if (!s->child) {
      free(s);
      return lv_status_make(LV_ERR_RESOURCE, "out of memory creating a schedule");
    }
  }
  s->nchild = nchild;
  *out = s;
  return NULL;
}

/* Stores boundaries as float32 (py_utils.PiecewiseConstant compares in float32) and
 * checks they are sorted, as Lingvo asserts. */
static lv_status set_boundaries(lv_schedule *s, int n, const double *b) {
  if (n < 0 || n > LV_SCHED_MAX_POINTS)
    return sched_err(&s->c, "%d boundaries; at most %d are supported", n, LV_SCHED_MAX_POINTS);
  for (int i = 1; i < n; i++)
    if (b[i] < b[i - 1])
      return sched_err(&s->c, "boundaries must be sorted, found %g after %g", b[i], b[i - 1]);
  s->nb = n;
  for (int i = 0; i < n; i++) s->fb[i] = (float)b[i];
  return NULL;
}

static int piecewise_index(const lv_schedule *s, double x) {
  float xf = (float)x;
  int idx = 0;
  for (int i = 0; i < s->nb; i++) idx += xf >= s->fb[i];
  return idx;
}


static lv_status create_child(lv_schedule *s, int i, const lv_schedule_config *c, int splits) {
  /* Only task.train.lr_schedule itself reads the Dev history (the trainer wires it and
   * saves its state); one inside another schedule would stay at 1.0 silently. */
  if (c->type == LV_SCHED_DEV_BASED)
    return sched_err(&s->c, "a DevBasedSchedule inside another schedule is not supported (it must be "
                     "task.train.lr_schedule itself)");
  lv_status st = lv_schedule_create(c, splits, &s->child[i]);
  return lv_status_wrap(st, "%s", lv_schedule_type_names[s->c.type]);
}

static lv_status create_linear_child(lv_schedule *s, int i, double x0, double y0, double x1,
                                     double y1) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_LINEAR);
  c.u.poly.start = (lv_sched_point){x0, y0};
  c.u.poly.limit = (lv_sched_point){x1, y1};
  return create_child(s, i, &c, 0);
}

static lv_status create_exp_child(lv_schedule *s, int i, double x0, double y0, double x1,
                                  double y1) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_EXPONENTIAL);
  c.u.poly.start = (lv_sched_point){x0, y0};
  c.u.poly.limit = (lv_sched_point){x1, y1};
  return create_child(s, i, &c, 0);
}

static lv_status resolve_splits(const lv_schedule_config *c, int configured, int cluster,
                                int *out) {
  if (configured > 0) {
    *out = configured;
    return NULL;
  }
  if (cluster <= 0)
    return lv_status_make(LV_ERR_INVALID,
                          "%s: num_splits is 0 and the cluster's number of splits is unknown; "
                          "set num_splits or run a sync cluster",
                          lv_schedule_type_names[c->type]);
  *out = cluster;
  return NULL;
}

static lv_status build_piecewise_constant(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  int n = c->u.piecewise_constant.n;
  if (n < 0) return sched_err(c, "boundaries and values must be set (n = %d)", n);
  return set_boundaries(s, n, c->u.piecewise_constant.boundaries);
}
static lv_status build_polynomial(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  if (!(c->u.poly.start.x < c->u.poly.limit.x))
    return sched_err(c, "%g must be < %g", c->u.poly.start.x, c->u.poly.limit.x);
  return NULL;
}
static lv_status build_exponential(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  const lv_sched_point a = c->u.poly.start, b = c->u.poly.limit;
  if (!(a.x < b.x)) return sched_err(c, "%g must be < %g", a.x, b.x);
  if (!(a.y > 0)) return sched_err(c, "%g must be > 0", a.y);
  if (!(b.y > 0)) return sched_err(c, "%g must be > 0", b.y);
  return create_linear_child(s, 0, a.x, log(a.y), b.x, log(b.y));
}
static lv_status build_continuous(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  double st = c->u.continuous.start_step, hl = c->u.continuous.half_life_steps;
  double mn = c->u.continuous.min;
  if (!(mn > 0 && mn < 1))
    return sched_err(c, "min must be in (0, 1), found %g", mn);
  if (!(hl > 0)) return sched_err(c, "half_life_steps must be > 0, found %g", hl);
  s->scale = c->u.continuous.initial_value;
  return create_exp_child(s, 0, st, 1.0, st + hl * log(mn) / log(0.5), mn);
}
/* A step count the schedules compute in int64: a whole number in [0, 2^62]. */
static bool whole_step(double v) { return v >= 0 && v <= 4611686018427387904.0 && v == floor(v); }

static lv_status build_composite(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  int n = c->u.composite.n;
  if (n < 1) return sched_err(c, "needs at least one schedule, found %d", n);
  if (c->type == LV_SCHED_PIECEWISE) {
    double prev = 0;
    for (int i = 0; i < n - 1; i++) {
      if (!whole_step(c->u.composite.boundaries[i]))
        return sched_err(c, "boundaries must be whole step numbers in [0, 2^62], found %g",
                         c->u.composite.boundaries[i]);
      if (c->u.composite.boundaries[i] < prev)
        return sched_err(c, "Invalid boundary %g < %g", c->u.composite.boundaries[i], prev);
      prev = c->u.composite.boundaries[i];
    }
    LV_TRY(set_boundaries(s, n - 1, c->u.composite.boundaries));
  } else if (c->type == LV_SCHED_CYCLE) {
    double b[LV_SCHED_MAX_POINTS], acc = 0;
    for (int i = 0; i < n; i++) {
      if (!whole_step(c->u.composite.steps[i]))
        return sched_err(c, "steps must be whole numbers of steps in [0, 2^62], found %g", c->u.composite.steps[i]);
      acc += c->u.composite.steps[i];
      b[i] = acc;
    }
    if (!(acc > 0) || !whole_step(acc))
      return sched_err(c, "the steps must sum to a whole number in [1, 2^62], found %g", acc);
    s->period = acc;
    LV_TRY(set_boundaries(s, n - 1, b));
  }
  for (int i = 0; i < n; i++) {
    if (!c->u.composite.schedules || !c->u.composite.schedules[i])
      return sched_err(c, "schedule %d of %d is missing", i, n);
    LV_TRY(create_child(s, i, c->u.composite.schedules[i], splits_in));
  }
  return NULL;
}
static lv_status build_linear_rampup_decay(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  double peak = c->u.linear_rampup_decay.peak, end = c->u.linear_rampup_decay.end;
  LV_TRY(create_linear_child(s, 0, 0, 0, peak, 1));
  return create_linear_child(s, 1, peak, 1, end, 0);
}
static lv_status build_annealing(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  double f = c->u.annealing.factor;
  if (c->u.annealing.init == 0) return sched_err(c, "init must be set");
  if (c->u.annealing.lower_bound == 0)
    return sched_err(c, "lower_bound must be set");
  if (!(f > 0 && f <= 1)) return sched_err(c, "factor must be in (0, 1], found %g", f);
  return NULL;
}
static lv_status build_transformer(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  if (!(c->u.transformer.warmup_steps * c->u.transformer.worker_replicas > 0))
    return sched_err(c, "warmup_steps * worker_replicas must be > 0, found %g * %g",
                     c->u.transformer.warmup_steps, c->u.transformer.worker_replicas);
  if (c->u.transformer.has_cyclical_step && !(c->u.transformer.cyclical_step > 0))
    return sched_err(c, "cyclical_step must be > 0, found %g",
                     c->u.transformer.cyclical_step);
  return NULL;
}
static lv_status build_rampup_exp_decay(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  const __typeof__(c->u.rampup_exp) *p = &c->u.rampup_exp;
  if (c->type == LV_SCHED_LINEAR_RAMPUP_EXP_DECAY && p->num_splits != 1)
    return sched_err(c, "num_splits must be 1, found %d", p->num_splits);
  int splits = 0;
  LV_TRY(resolve_splits(c, p->num_splits, splits_in, &splits));
  double warmup_end = p->warmup * splits;
  double decay_start = fmax(warmup_end + 1.0, p->decay_start / splits);
  double peak = 1.0 * splits;
  double decay_end = fmax(decay_start + 1.0, p->decay_end / splits);
  int k = 0;
  bool warm = warmup_end > 0.0;
  /* Re-size to the number of children actually used. */
  s->nchild = warm ? 4 : 3;
  if (warm) LV_TRY(create_linear_child(s, k++, 0.0, p->warmup_init, warmup_end, peak));
  LV_TRY(create_linear_child(s, k++, warmup_end, peak, decay_start, peak));
  LV_TRY(create_exp_child(s, k++, decay_start, peak, decay_end, p->min));
  return create_linear_child(s, k, 0, p->max, decay_end, p->max);
}
static lv_status build_linear_rampup_sqrt_decay(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  if (!(c->u.rampup_sqrt.warmup_steps > 0))
    return sched_err(c, "warmup_steps must be > 0, found %g", c->u.rampup_sqrt.warmup_steps);
  return NULL;
}
static lv_status build_rampup_sqrt_decay_by_bs(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  if (!c->u.rampup_sqrt_bs.has_batch_size || !(c->u.rampup_sqrt_bs.batch_size > 0))
    return sched_err(c, "batch_size must be set and > 0, found %g",
                     c->u.rampup_sqrt_bs.has_batch_size ? c->u.rampup_sqrt_bs.batch_size : 0);
  int r = 0;
  LV_TRY(resolve_splits(c, c->u.rampup_sqrt_bs.num_replicas, splits_in, &r));
  s->scale = c->u.rampup_sqrt_bs.warmup_examples / (c->u.rampup_sqrt_bs.batch_size * r);
  return NULL;
}
static lv_status build_linear_rampup_piecewise_constant(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  const __typeof__(c->u.rampup_piecewise) *p = &c->u.rampup_piecewise;
  if (p->n < 2 || p->n > LV_SCHED_MAX_POINTS)
    return sched_err(c, "needs 2 to %d boundaries and as many lrs, found %d",
                     LV_SCHED_MAX_POINTS, p->n);
  int splits = 0;
  LV_TRY(resolve_splits(c, p->num_splits, splits_in, &splits));
  double sp = (double)splits;
  lv_schedule_config pc = lv_schedule_defaults(LV_SCHED_PIECEWISE_CONSTANT);
  pc.u.piecewise_constant.n = p->n;
  pc.u.piecewise_constant.values[0] = 1e8;
  for (int i = 0; i < p->n; i++) {
    pc.u.piecewise_constant.boundaries[i] = p->boundaries[i] / sp;
    pc.u.piecewise_constant.values[i + 1] = p->lrs[i] * sp;
  }
  LV_TRY(create_linear_child(s, 0, 0.0, 0.0, p->boundaries[0] / sp, p->lrs[0] * sp));
  return create_child(s, 1, &pc, 0);
}
static lv_status build_cosine(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  if (!(c->u.cosine.total_steps > 0))
    return sched_err(c, "total_steps must be > 0, found %g", c->u.cosine.total_steps);
  return NULL;
}
static lv_status build_linear_rampup_cosine(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  const __typeof__(c->u.rampup_cosine) *p = &c->u.rampup_cosine;
  int splits = 0;
  LV_TRY(resolve_splits(c, p->num_splits, splits_in, &splits));
  lv_schedule_config cc = lv_schedule_defaults(LV_SCHED_COSINE);
  cc.u.cosine.initial_value = p->initial_value * splits;
  cc.u.cosine.final_value = p->final_value * splits;
  cc.u.cosine.total_steps = floor(p->total_steps / splits);
  cc.u.cosine.cyclical = p->cyclical;
  LV_TRY(create_linear_child(s, 0, 0.0, p->warmup_init * splits,
                             floor(p->warmup_steps / splits), p->initial_value * splits));
  return create_child(s, 1, &cc, 0);
}
static lv_status build_sqrt_decay_to_zero(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  double w = c->u.sqrt_decay_to_zero.warmup_steps, f = c->u.sqrt_decay_to_zero.final_steps;
  if (!(w > 0 && f > w))
    return sched_err(c, "needs 0 < warmup_steps < final_steps, found %g and %g", w, f);
  s->scale = c->u.sqrt_decay_to_zero.starting_lr * sqrt(w * f) / (sqrt(f) - sqrt(w));
  return NULL;
}
static lv_status build_inverse_sigmoid(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  if (!c->u.inverse_sigmoid.has_k || !(c->u.inverse_sigmoid.k >= 1))
    return sched_err(c, "k must be set and >= 1, found %g",
                     c->u.inverse_sigmoid.has_k ? c->u.inverse_sigmoid.k : 0);
  return NULL;
}

lv_status lv_schedule_create(const lv_schedule_config *cfg, int cluster_splits, lv_schedule **out) {
  *out = NULL;
  if ((int)cfg->type < 0 || cfg->type >= LV_SCHED_COUNT)
    return lv_status_make(LV_ERR_INVALID, "unknown schedule type %d", (int)cfg->type);
  const lv_schedule_class *k = lv_schedule_class_of(cfg->type);
  if (k->nchild < 0 && cfg->u.composite.n > LV_SCHED_MAX_POINTS)
    return sched_err(cfg, "%d schedules; at most %d are supported", cfg->u.composite.n,
                     LV_SCHED_MAX_POINTS);
  int nchild = k->nchild >= 0 ? k->nchild : cfg->u.composite.n > 0 ? cfg->u.composite.n : 0;
  lv_schedule *s = NULL;
  LV_TRY(sched_new(cfg, nchild, &s));
  lv_status st = k->build ? k->build(s, cfg, cluster_splits) : NULL;
  if (st) {
    /* Children not created are NULL; free what exists regardless of s->nchild. */
    s->nchild = nchild;
    lv_schedule_free(s);
    return st;
  }
  *out = s;
  return NULL;
}

/* Lingvo casts the global step to float32 before every schedule formula. */
static inline double f32(double x) { return (double)(float)x; }

static double poly_value(const lv_schedule *s, double x) {
  const lv_sched_point a = s->c.u.poly.start, b = s->c.u.poly.limit;
  if (x < a.x) return a.y;
  if (x >= b.x) return b.y;
  double r = (x - a.x) / (b.x - a.x);
  double p = s->c.type == LV_SCHED_LINEAR ? 1.0 : s->c.u.poly.power;
  double f = s->c.u.poly.origin_limit ? 1.0 - pow(1.0 - r, p) : pow(r, p);
  return a.y + f * (b.y - a.y);
}

static double min_children(const lv_schedule *s, int64_t step) {
  double m = INFINITY;
  for (int i = 0; i < s->nchild; i++) {
    double v = lv_schedule_value(s->child[i], step);
    if (v < m || isnan(v)) m = v;
  }
  return m;
}

static double value_constant(const lv_schedule *s, int64_t step) {
  (void)step;
  const lv_schedule_config *c = &s->c;
  return c->u.constant.value;
}
static double value_piecewise_constant(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  return c->u.piecewise_constant.values[piecewise_index(s, x)];
}
static double value_polynomial(const lv_schedule *s, int64_t step) {
  double x = f32((double)step);
  return poly_value(s, x);
}
static double value_exponential(const lv_schedule *s, int64_t step) {
  return exp(lv_schedule_value(s->child[0], step));
}
static double value_continuous(const lv_schedule *s, int64_t step) {
  return s->scale * lv_schedule_value(s->child[0], step);
}
static double value_stepwise_exponential(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  return pow(c->u.stepwise_exponential.decay,
             floor(f32(x / c->u.stepwise_exponential.num_steps_per_decay)));
}
static double value_annealing(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  return fmax(pow(c->u.annealing.factor, x), c->u.annealing.lower_bound);
}
static double value_transformer(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  const __typeof__(c->u.transformer) *p = &c->u.transformer;
  if (p->has_cyclical_step) x = fmod(x, p->cyclical_step);
  if (p->has_decay_end && !(x < p->decay_end)) x = f32(p->decay_end);
  double w = f32(p->warmup_steps * p->worker_replicas);
  return pow(p->model_dim, -0.5) * fmin((x + 1) * pow(w, p->decay_factor - 1),
                                        pow(x + p->start_step + 1, p->decay_factor));
}
static double value_transformer_no_warmup(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  const __typeof__(c->u.transformer_no_warmup) *p = &c->u.transformer_no_warmup;
  double w = f32(p->decay_start * p->worker_replicas);
  if (p->has_decay_end && !(x < p->decay_end)) x = f32(p->decay_end);
  return pow(p->model_dim, -0.5) * fmin(fmin(x + 1, pow(x + 1, -0.5)), pow(w, -0.5));
}
static double value_transformer_mlperf(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  const __typeof__(c->u.transformer_mlperf) *p = &c->u.transformer_mlperf;
  double w = f32(p->warmup_steps), f = p->warmup_init_fraction;
  double warm = fmin(1.0, f + (1.0 - f) * x / w);
  return pow(p->model_dim, -0.5) * warm / sqrt(fmax(x, w));
}
static double value_linear_rampup_sqrt_decay(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  double w = c->u.rampup_sqrt.warmup_steps;
  x = fmax(x, 1.0);
  return c->u.rampup_sqrt.peak * fmin(x / w, sqrt(w / x));
}
static double value_rampup_sqrt_decay_by_bs(const lv_schedule *s, int64_t step) {
  double x = f32((double)step);
  double w = f32(s->scale);
  return fmin((x + 1) * pow(w, -1.5), pow(x + 1, -0.5));
}
static double value_cosine(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  const __typeof__(c->u.cosine) *p = &c->u.cosine;
  double T = p->total_steps, rel;
  if (!p->cyclical)
    rel = fmin(x, T);
  else if (p->half_cycle)
    rel = fmod(x, T);
  else
    rel = x;
  return p->final_value +
         0.5 * (p->initial_value - p->final_value) * (1 + cos(M_PI * rel / T));
}
static double value_piecewise(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  int i = piecewise_index(s, (double)step);
  int64_t start = i == 0 ? 0 : (int64_t)c->u.composite.boundaries[i - 1];
  int64_t rel = step - start > 0 ? step - start : 0;
  return lv_schedule_value(s->child[i], rel);
}
static double value_cycle(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  int64_t period = (int64_t)s->period;
  int64_t rel = step % period;
  if (rel < 0) rel += period; /* tf.math.mod is a floor mod */
  int i = piecewise_index(s, (double)rel);
  return lv_schedule_value(s->child[i], c->u.composite.pass_absolute_step ? step : rel);
}
static double value_sqrt_decay(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  const __typeof__(c->u.sqrt_decay) *p = &c->u.sqrt_decay;
  return p->multiplier / sqrt(fmax(x - p->offset, p->warmup_steps));
}
static double value_sqrt_decay_to_zero(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  const __typeof__(c->u.sqrt_decay_to_zero) *p = &c->u.sqrt_decay_to_zero;
  return s->scale / sqrt(fmax(x, p->warmup_steps)) - s->scale / sqrt(p->final_steps);
}
static double value_inverse_sigmoid(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  double k = c->u.inverse_sigmoid.k;
  return k / (k + exp(x / k));
}
static double value_ema_decay(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  return fmin((1 + x) / (10 + x), c->u.ema_decay.ema_decay);
}

static double value_dev_based(const lv_schedule *s, int64_t step) {
  (void)step;
  return s->dev_factor;
}

static lv_status build_dev_based(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)splits_in;
  const __typeof__(c->u.dev_based) *p = &c->u.dev_based;
  if (!(p->tolerance >= 0))
    return lv_status_make(LV_ERR_INVALID, "DevBasedSchedule: tolerance must be >= 0, found %g", p->tolerance);
  if (!(p->decay > 0 && p->decay <= 1) || !(p->min_factor >= 0))
    return lv_status_make(LV_ERR_INVALID, "DevBasedSchedule: decay must be in (0, 1] and min_factor >= 0, found %g, %g",
                          p->decay, p->min_factor);
  s->dev_factor = 1.0f;
  s->dev_ref_step = 0;
  return NULL;
}

bool lv_schedule_dev_based_update(lv_schedule *s, int64_t best, int64_t last) {
  LV_ASSERT(s->c.type == LV_SCHED_DEV_BASED);
  const __typeof__(s->c.u.dev_based) *p = &s->c.u.dev_based;
  int64_t ref = s->dev_ref_step > best ? s->dev_ref_step : best;
  const float f = s->dev_factor;
  /* tf.where(last - ref < window, f, max(min_factor, f * decay)) in float32; ref_step
   * moves to last only when the factor changed (at min_factor it stays). */
  float nf = (double)(last - ref) < p->window ? f : fmaxf((float)p->min_factor, f * (float)p->decay);
  s->dev_ref_step = nf == f ? ref : last;
  s->dev_factor = nf;
  return nf != f;
}

float *lv_schedule_dev_based_factor(lv_schedule *s) {
  LV_ASSERT(s->c.type == LV_SCHED_DEV_BASED);
  return &s->dev_factor;
}
int64_t *lv_schedule_dev_based_ref_step(lv_schedule *s) {
  LV_ASSERT(s->c.type == LV_SCHED_DEV_BASED);
  return &s->dev_ref_step;
}

static lv_status build_stepwise_exponential(lv_schedule *s, const lv_schedule_config *c, int splits_in) {
  (void)s;
  (void)splits_in;
  if (!(c->u.stepwise_exponential.num_steps_per_decay > 0))
    return sched_err(c, "num_steps_per_decay must be > 0, found %g", c->u.stepwise_exponential.num_steps_per_decay);
  return NULL;
}

/* ---- the class table ---- */

#define OFF(f) offsetof(lv_schedule_config, u.f)
#define P_(nm, k, d, f, ds) {.name = nm, .kind = k, .def = d, .desc = ds, .off = OFF(f)}
#define PFLOAT(nm, d, f, ds) P_(nm, LV_SP_FLOAT, d, f, ds)
#define PINT(nm, d, f, ds) P_(nm, LV_SP_INT, d, f, ds)
#define PINT32(nm, d, f, ds) P_(nm, LV_SP_INT32, d, f, ds)
#define PBOOL(nm, d, f, ds) P_(nm, LV_SP_BOOL, d, f, ds)
#define POPT(nm, k, f, flag, ds) {.name = nm, .kind = k, .desc = ds, .off = OFF(f), .aux_off = flag}
#define PPOINT(nm, x, y, f, ds) {.name = nm, .kind = LV_SP_POINT, .def = x, .def_y = y, .desc = ds, .off = OFF(f)}
#define PNUMS(nm, f, count, delta, mx, ds) \
  {.name = nm, .kind = LV_SP_NUMBERS, .desc = ds, .off = OFF(f), .aux_off = OFF(count), .count_delta = delta, .max = mx}
#define PSCHEDS(nm, dcls, ds)                                                                                \
  {.name = nm, .kind = LV_SP_SCHEDULES, .def_cls = dcls, .desc = ds, .off = OFF(composite.schedules), \
   .aux_off = OFF(composite.n), .max = LV_SCHED_MAX_POINTS}
#define MAXP LV_SCHED_MAX_POINTS

static const char k_warmup_desc[] = "Increase the learning rate linearly for the first warmup_steps training steps.";
static const char k_model_dim_desc[] = "Model dimension that applies to embedding layers and all Transformer layers.";
static const char k_decay_end_desc[] = "Ends the learning rate decay at decay_end-th step.";
static const char k_subs_desc[] = "A list of sub-schedules (Params of registered schedule classes).";

static const lv_sched_param p_constant[] = {PFLOAT("value", 1.0, constant.value, "The constant value.")};
static const lv_sched_param p_piecewise_constant[] = {
    PNUMS("boundaries", piecewise_constant.boundaries, piecewise_constant.n, 0, MAXP,
          "Boundaries at which learning rate drops."),
    PNUMS("values", piecewise_constant.values, piecewise_constant.n, 1, MAXP + 1, "Values in each interval."),
};
static const lv_sched_param p_polynomial[] = {
    PINT("power", 1, poly.power, "Polynomial power."),
    PPOINT("start", 0, 1.0, poly.start, "(x0, y0)"),
    PPOINT("limit", 1, 1.0, poly.limit, "(x1, y1)"),
    {.name = "origin", .kind = LV_SP_ORIGIN, .desc = "Origin of the polynomial. Can be \"start\" or \"limit\".",
     .off = OFF(poly.origin_limit)},
};
static const lv_sched_param p_exponential[] = {
    PPOINT("start", 0, 1.0, poly.start, "(x0, y0)"),
    PPOINT("limit", 1, 0.5, poly.limit, "(x1, y1)"),
};
static const lv_sched_param p_continuous[] = {
    PFLOAT("initial_value", 1.0, continuous.initial_value, "Initial decay value."),
    PINT("start_step", 400000, continuous.start_step, "Starts to decay the learning rate from this step."),
    PINT("half_life_steps", 100000, continuous.half_life_steps,
         "Halve the learning rate every this many steps after start_step."),
    PFLOAT("min", 0.01, continuous.min, "Minimum relative learning rate."),
};
static const lv_sched_param p_stepwise_exponential[] = {
    PFLOAT("decay", 0.99, stepwise_exponential.decay, "Decay factor."),
    PINT("num_steps_per_decay", 1000, stepwise_exponential.num_steps_per_decay, "Number of steps between decays."),
};
static const lv_sched_param p_combined_minimum[] = {
    PSCHEDS("schedules", "LinearSchedule", "A list of sub-schedules. The min value of all sub-schedules is used."),
};
static const lv_sched_param p_linear_rampup_decay[] = {
    PINT("peak", 1, linear_rampup_decay.peak, "Step at which the ramp-up reaches 1."),
    PINT("end", 2, linear_rampup_decay.end, "Step at which the decay reaches 0."),
};
static const lv_sched_param p_annealing[] = {
    POPT("init", LV_SP_OPT_FLOAT, annealing.init, 0, "start value."),
    POPT("lower_bound", LV_SP_OPT_FLOAT, annealing.lower_bound, 0, "lower bound value."),
    POPT("factor", LV_SP_OPT_FLOAT, annealing.factor, 0, "Anealing factor."),
};
static const lv_sched_param p_transformer[] = {
    PINT("warmup_steps", 4000, transformer.warmup_steps, k_warmup_desc),
    PINT("model_dim", 512, transformer.model_dim, k_model_dim_desc),
    PINT("worker_replicas", 1, transformer.worker_replicas, "Number of worker replicas."),
    POPT("decay_end", LV_SP_OPT_INT, transformer.decay_end, OFF(transformer.has_decay_end), k_decay_end_desc),
    PFLOAT("decay_factor", -0.5, transformer.decay_factor, "Exponent of the decay after warm-up."),
    PINT("start_step", 0, transformer.start_step,
         "Step offset of the decay: the schedule after warm-up is that of step + start_step."),
    POPT("cyclical_step", LV_SP_OPT_INT, transformer.cyclical_step, OFF(transformer.has_cyclical_step),
         "If set, the step is taken modulo cyclical_step."),
};
static const lv_sched_param p_transformer_no_warmup[] = {
    PINT("decay_start", 4000, transformer_no_warmup.decay_start, "It is used to estimate peak-lr."),
    POPT("decay_end", LV_SP_OPT_INT, transformer_no_warmup.decay_end, OFF(transformer_no_warmup.has_decay_end),
         k_decay_end_desc),
    PINT("model_dim", 512, transformer_no_warmup.model_dim, k_model_dim_desc),
    PINT("worker_replicas", 1, transformer_no_warmup.worker_replicas, "Number of worker replicas."),
};
static const lv_sched_param p_transformer_mlperf[] = {
    PINT("warmup_steps", 4000, transformer_mlperf.warmup_steps, k_warmup_desc),
    PFLOAT("warmup_init_fraction", 0.0, transformer_mlperf.warmup_init_fraction,
           "Begin the first step of warm-up with this fraction of the peak LR. Set to 1 for constant peak LR "
           "during the entire warm-up period."),
    PINT("model_dim", 512, transformer_mlperf.model_dim, k_model_dim_desc),
};
#define RAMPUP_EXP_PARAMS(wi_, ns_)                                                           \
  PINT("warmup", 300, rampup_exp.warmup, "Increases the learning rate linearly  before warmup * num_splits steps."), \
  PFLOAT("warmup_init", wi_, rampup_exp.warmup_init, "The initial value of the warm-up phase."),           \
  PINT("decay_start", 70000, rampup_exp.decay_start, "Starts the learning rate decay at decay_start-th step."),    \
  PINT("decay_end", 100000, rampup_exp.decay_end, k_decay_end_desc),                                              \
  PFLOAT("min", 0.01, rampup_exp.min, "After decay_end, the multiplier stays at min."),                           \
  PFLOAT("max", 1e8, rampup_exp.max,                                                                              \
         "The schedule is never larger than this value. By default, 1e8 effectively means there is no cap."),   \
  PINT32("num_splits", ns_, rampup_exp.num_splits,                                                         \
         "Specifies the intended number of splits for the LR. Overrides num_splits_per_client if non-zero.")
static const lv_sched_param p_rampup_exp_scaled[] = {RAMPUP_EXP_PARAMS(1.0, 0)};
static const lv_sched_param p_rampup_exp[] = {RAMPUP_EXP_PARAMS(0.0, 1)};
static const lv_sched_param p_rampup_sqrt[] = {
    PFLOAT("peak", 1.0, rampup_sqrt.peak, "Peak learning rate multiplier."),
    PINT("warmup_steps", 4000, rampup_sqrt.warmup_steps, "Number of warm up steps."),
};
static const lv_sched_param p_rampup_sqrt_bs[] = {
    PINT("warmup_examples", 256.0 * (1 << 20), rampup_sqrt_bs.warmup_examples,
         "Increase the learning rate linearly for the first warmup_examples training examples, and then starts "
         "square-root decay."),
    POPT("batch_size", LV_SP_OPT_INT, rampup_sqrt_bs.batch_size, OFF(rampup_sqrt_bs.has_batch_size),
         "Norminal (per-replica) batch size. Must be provided."),
    POPT("num_replicas", LV_SP_OPT_INT32, rampup_sqrt_bs.num_replicas, 0,
         "Number of worker replicas. If None, determined automatically (and error if this fails)."),
};
static const lv_sched_param p_rampup_piecewise[] = {
    PNUMS("boundaries", rampup_piecewise.boundaries, rampup_piecewise.n, 0, MAXP,
          "Boundaries at which learning rate changes."),
    PNUMS("lrs", rampup_piecewise.lrs, rampup_piecewise.n, 0, MAXP, "A list of learning rate multiplers."),
    PINT32("num_splits", 0, rampup_piecewise.num_splits,
           "Specifies the intended number of num_splits for LR. Overrides num_splits if non-zero."),
};
static const lv_sched_param p_cosine[] = {
    PFLOAT("initial_value", 1.0, cosine.initial_value, "Initial decay value."),
    PFLOAT("final_value", 0.0, cosine.final_value, "Final decay value."),
    PINT("total_steps", 0, cosine.total_steps, "Number of steps to reach full decay."),
    PBOOL("cyclical", 0, cosine.cyclical, "Whether the schedule repeats."),
    PBOOL("half_cycle", 1, cosine.half_cycle,
          "When cyclical: restart from initial_value every total_steps (True) or go back up over the next "
          "total_steps (False)."),
};
static const lv_sched_param p_rampup_cosine[] = {
    PFLOAT("warmup_init", 0.0, rampup_cosine.warmup_init, "The initial lr value of the warm-up phase."),
    PINT("warmup_steps", 0, rampup_cosine.warmup_steps, "Number of warm up steps."),
    PFLOAT("initial_value", 1.0, rampup_cosine.initial_value, "Initial decay value."),
    PFLOAT("final_value", 0.0, rampup_cosine.final_value, "Final decay value."),
    PINT("total_steps", 0, rampup_cosine.total_steps, "Number of steps to reach full decay."),
    PBOOL("cyclical", 0, rampup_cosine.cyclical, "Whether the cosine decay repeats."),
    PINT32("num_splits", 1, rampup_cosine.num_splits,
           "Specifies the intended number of splits for the LR. Overrides num_splits_per_client if non-zero. "
           "Uses num_splits_per_client as num_splits if zero or negative."),
};
static const lv_sched_param p_piecewise[] = {
    PNUMS("boundaries", composite.boundaries, composite.n, -1, MAXP - 1,
          "Boundaries at which the schedule changes; one fewer than schedules."),
    PSCHEDS("schedules", NULL, "A list of sub-schedules, one per interval; each is evaluated at the step "
                               "relative to its interval's start."),
};
static const lv_sched_param p_cycle[] = {
    PSCHEDS("schedules", NULL, k_subs_desc),
    PNUMS("steps", composite.steps, composite.n, 0, MAXP, "The number of steps to run each schedule, in turn."),
    PBOOL("pass_absolute_step", 1, composite.pass_absolute_step,
          "Whether a sub-schedule sees the absolute step (else the step within the cycle)."),
};
static const lv_sched_param p_sqrt_decay[] = {
    PINT("warmup_steps", 10000, sqrt_decay.warmup_steps, "Number of warm up steps."),
    PFLOAT("multiplier", 1.0, sqrt_decay.multiplier, "Multiplier."),
    PFLOAT("offset", 0.0, sqrt_decay.offset, "Offset."),
};
static const lv_sched_param p_sqrt_decay_to_zero[] = {
    PFLOAT("warmup_steps", 10000.0, sqrt_decay_to_zero.warmup_steps, "Number of warm up steps."),
    PFLOAT("starting_lr", 0.01, sqrt_decay_to_zero.starting_lr, "Learning rate at the end of warm-up."),
    PFLOAT("final_steps", 100000.0, sqrt_decay_to_zero.final_steps, "Step at which the rate reaches 0."),
};
static const lv_sched_param p_inverse_sigmoid[] = {
    POPT("k", LV_SP_OPT_FLOAT, inverse_sigmoid.k, OFF(inverse_sigmoid.has_k), "Decay speed, >= 1."),
};
static const lv_sched_param p_ema_decay[] = {
    PFLOAT("ema_decay", 0.9999, ema_decay.ema_decay, "Upper bound of the decay."),
};
static const lv_sched_param p_dev_based[] = {
    PFLOAT("tolerance", 0.0, dev_based.tolerance, "Minimum significant difference in metric."),
    PINT("window", 10000, dev_based.window, "Steps since most recent decay or best_step before decaying."),
    PFLOAT("decay", 0.5, dev_based.decay, "Factor by which learning rate multiplier is decayed."),
    PFLOAT("min_factor", 0.01, dev_based.min_factor, "Minimum learning rate multiplier."),
};

#define CLASS(params, nchild, build, value) {params, (int)LV_ARRAY_LEN(params), nchild, build, value}

static const lv_schedule_class g_classes[LV_SCHED_COUNT] = {
    [LV_SCHED_CONSTANT] = CLASS(p_constant, 0, NULL, value_constant),
    [LV_SCHED_CONSTANT_ONE] = CLASS(p_constant, 0, NULL, value_constant),
    [LV_SCHED_PIECEWISE_CONSTANT] = CLASS(p_piecewise_constant, 0, build_piecewise_constant, value_piecewise_constant),
    [LV_SCHED_POLYNOMIAL] = CLASS(p_polynomial, 0, build_polynomial, value_polynomial),
    [LV_SCHED_LINEAR] = CLASS(p_polynomial, 0, build_polynomial, value_polynomial),
    [LV_SCHED_EXPONENTIAL] = CLASS(p_exponential, 1, build_exponential, value_exponential),
    [LV_SCHED_CONTINUOUS] = CLASS(p_continuous, 1, build_continuous, value_continuous),
    [LV_SCHED_STEPWISE_EXPONENTIAL] =
        CLASS(p_stepwise_exponential, 0, build_stepwise_exponential, value_stepwise_exponential),
    [LV_SCHED_COMBINED_MINIMUM] = CLASS(p_combined_minimum, -1, build_composite, min_children),
    [LV_SCHED_LINEAR_RAMPUP_DECAY] = CLASS(p_linear_rampup_decay, 2, build_linear_rampup_decay, min_children),
    [LV_SCHED_ANNEALING] = CLASS(p_annealing, 0, build_annealing, value_annealing),
    [LV_SCHED_TRANSFORMER] = CLASS(p_transformer, 0, build_transformer, value_transformer),
    [LV_SCHED_TRANSFORMER_NO_WARMUP] = CLASS(p_transformer_no_warmup, 0, NULL, value_transformer_no_warmup),
    [LV_SCHED_TRANSFORMER_MLPERF] = CLASS(p_transformer_mlperf, 0, NULL, value_transformer_mlperf),
    [LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT] =
        CLASS(p_rampup_exp_scaled, 4, build_rampup_exp_decay, min_children),
    [LV_SCHED_LINEAR_RAMPUP_EXP_DECAY] = CLASS(p_rampup_exp, 4, build_rampup_exp_decay, min_children),
    [LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY] =
        CLASS(p_rampup_sqrt, 0, build_linear_rampup_sqrt_decay, value_linear_rampup_sqrt_decay),
    [LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS] =
        CLASS(p_rampup_sqrt_bs, 0, build_rampup_sqrt_decay_by_bs, value_rampup_sqrt_decay_by_bs),
    [LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT] =
        CLASS(p_rampup_piecewise, 2, build_linear_rampup_piecewise_constant, min_children),
    [LV_SCHED_COSINE] = CLASS(p_cosine, 0, build_cosine, value_cosine),
    [LV_SCHED_LINEAR_RAMPUP_COSINE] = CLASS(p_rampup_cosine, 2, build_linear_rampup_cosine, min_children),
    [LV_SCHED_PIECEWISE] = CLASS(p_piecewise, -1, build_composite, value_piecewise),
    [LV_SCHED_CYCLE] = CLASS(p_cycle, -1, build_composite, value_cycle),
    [LV_SCHED_SQRT_DECAY] = CLASS(p_sqrt_decay, 0, NULL, value_sqrt_decay),
    [LV_SCHED_SQRT_DECAY_TO_ZERO] = CLASS(p_sqrt_decay_to_zero, 0, build_sqrt_decay_to_zero, value_sqrt_decay_to_zero),
    [LV_SCHED_INVERSE_SIGMOID] = CLASS(p_inverse_sigmoid, 0, build_inverse_sigmoid, value_inverse_sigmoid),
    [LV_SCHED_EMA_DECAY] = CLASS(p_ema_decay, 0, NULL, value_ema_decay),
    [LV_SCHED_DEV_BASED] = CLASS(p_dev_based, 0, build_dev_based, value_dev_based),
};

const lv_schedule_class *lv_schedule_class_of(lv_schedule_type t) {
  LV_ASSERTF((int)t >= 0 && t < LV_SCHED_COUNT && g_classes[t].value, "bad schedule type %d", (int)t);
  return &g_classes[t];
}

lv_schedule_config lv_schedule_defaults(lv_schedule_type t) {
  const lv_schedule_class *k = lv_schedule_class_of(t);
  lv_schedule_config c;
  memset(&c, 0, sizeof c);
  c.type = t;
  char *base = (char *)&c;
  for (int i = 0; i < k->nparams; i++) {
    const lv_sched_param *p = &k->params[i];
    void *f = base + p->off;
    switch (p->kind) {
      case LV_SP_FLOAT:
      case LV_SP_INT: *(double *)f = p->def; break;
      case LV_SP_INT32: *(int *)f = (int)p->def; break;
      case LV_SP_BOOL: *(bool *)f = p->def != 0; break;
      case LV_SP_POINT: *(lv_sched_point *)f = (lv_sched_point){p->def, p->def_y}; break;
      default: break; /* None, 'start', empty lists: the zeroed field */
    }
  }
  return c;
}

double lv_schedule_value(const lv_schedule *s, int64_t step) { return g_classes[s->c.type].value(s, step); }
