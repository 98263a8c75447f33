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
};
_Static_assert(LV_SCHED_COUNT == 27, "lv_schedule_type_names must list every schedule type");

bool lv_schedule_type_from_name(const char *name, lv_schedule_type *out) {
  int i = lv_name_index(lv_schedule_type_names, LV_SCHED_COUNT, name);
  if (i >= 0) *out = (lv_schedule_type)i;
  return i >= 0;
}

lv_schedule_config lv_schedule_defaults(lv_schedule_type t) {
  lv_schedule_config c;
  memset(&c, 0, sizeof c);
  c.type = t;
  switch (t) {
    case LV_SCHED_CONSTANT:
    case LV_SCHED_CONSTANT_ONE:
      c.u.constant.value = 1.0;
      break;
    case LV_SCHED_PIECEWISE_CONSTANT:
      break;
    case LV_SCHED_POLYNOMIAL:
    case LV_SCHED_LINEAR:
      c.u.poly.power = 1;
      c.u.poly.start = (lv_sched_point){0, 1.0};
      c.u.poly.limit = (lv_sched_point){1, 1.0};
      break;
    case LV_SCHED_EXPONENTIAL:
      c.u.poly.power = 1;
      c.u.poly.start = (lv_sched_point){0, 1.0};
      c.u.poly.limit = (lv_sched_point){1, 0.5};
      break;
    case LV_SCHED_CONTINUOUS:
      c.u.continuous.initial_value = 1.0;
      c.u.continuous.start_step = 400000;
      c.u.continuous.half_life_steps = 100000;
      c.u.continuous.min = 0.01;
      break;
    case LV_SCHED_STEPWISE_EXPONENTIAL:
      c.u.stepwise_exponential.decay = 0.99;
      c.u.stepwise_exponential.num_steps_per_decay = 1000;
      break;
    case LV_SCHED_COMBINED_MINIMUM:
    case LV_SCHED_PIECEWISE:
      break;
    case LV_SCHED_CYCLE:
      c.u.composite.pass_absolute_step = true;
      break;
    case LV_SCHED_LINEAR_RAMPUP_DECAY:
      c.u.linear_rampup_decay.peak = 1;
      c.u.linear_rampup_decay.end = 2;
      break;
    case LV_SCHED_ANNEALING:
      break;
    case LV_SCHED_TRANSFORMER:
      c.u.transformer.warmup_steps = 4000;
      c.u.transformer.model_dim = 512;
      c.u.transformer.worker_replicas = 1;
      c.u.transformer.decay_factor = -0.5;
      c.u.transformer.start_step = 0;
      break;
    case LV_SCHED_TRANSFORMER_NO_WARMUP:
      c.u.transformer_no_warmup.decay_start = 4000;
      c.u.transformer_no_warmup.model_dim = 512;
      c.u.transformer_no_warmup.worker_replicas = 1;
      break;
    case LV_SCHED_TRANSFORMER_MLPERF:
      c.u.transformer_mlperf.warmup_steps = 4000;
      c.u.transformer_mlperf.warmup_init_fraction = 0.0;
      c.u.transformer_mlperf.model_dim = 512;
      break;
    case LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT:
    case LV_SCHED_LINEAR_RAMPUP_EXP_DECAY:
      c.u.rampup_exp.warmup = 300;
      c.u.rampup_exp.warmup_init = 1.0;
      c.u.rampup_exp.decay_start = 70000;
      c.u.rampup_exp.decay_end = 100000;
      c.u.rampup_exp.min = 0.01;
      c.u.rampup_exp.max = 1e8;
      c.u.rampup_exp.num_splits = 0;
      if (t == LV_SCHED_LINEAR_RAMPUP_EXP_DECAY) {
        c.u.rampup_exp.num_splits = 1;
        c.u.rampup_exp.warmup_init = 0.0;
      }
      break;
    case LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY:
      c.u.rampup_sqrt.peak = 1.0;
      c.u.rampup_sqrt.warmup_steps = 4000;
      break;
    case LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS:
      c.u.rampup_sqrt_bs.warmup_examples = 256.0 * (1 << 20);
      break;
    case LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT:
      break;
    case LV_SCHED_COSINE:
      c.u.cosine.initial_value = 1.0;
      c.u.cosine.final_value = 0.0;
      c.u.cosine.total_steps = 0;
      c.u.cosine.half_cycle = true;
      break;
    case LV_SCHED_LINEAR_RAMPUP_COSINE:
      c.u.rampup_cosine.initial_value = 1.0;
      c.u.rampup_cosine.num_splits = 1;
      break;
    case LV_SCHED_SQRT_DECAY:
      c.u.sqrt_decay.warmup_steps = 10000;
      c.u.sqrt_decay.multiplier = 1.0;
      c.u.sqrt_decay.offset = 0.0;
      break;
    case LV_SCHED_SQRT_DECAY_TO_ZERO:
      c.u.sqrt_decay_to_zero.warmup_steps = 10000.0;
      c.u.sqrt_decay_to_zero.starting_lr = 0.01;
      c.u.sqrt_decay_to_zero.final_steps = 100000.0;
      break;
    case LV_SCHED_INVERSE_SIGMOID:
      break;
    case LV_SCHED_EMA_DECAY:
      c.u.ema_decay.ema_decay = 0.9999;
      break;
    case LV_SCHED_COUNT:
      LV_ASSERT(!"bad schedule type");
  }
  return c;
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
  if (c->type == LV_SCHED_COMBINED_MINIMUM || c->type == LV_SCHED_PIECEWISE ||
      c->type == LV_SCHED_CYCLE)
    s->c.u.composite.schedules = NULL;
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

static lv_status build(lv_schedule *s, const lv_schedule_config *cfg, int splits_in) {
  const lv_schedule_config *c = cfg;
  switch (c->type) {
    case LV_SCHED_CONSTANT:
    case LV_SCHED_CONSTANT_ONE:
    case LV_SCHED_STEPWISE_EXPONENTIAL:
    case LV_SCHED_TRANSFORMER_NO_WARMUP:
    case LV_SCHED_TRANSFORMER_MLPERF:
    case LV_SCHED_SQRT_DECAY:
    case LV_SCHED_EMA_DECAY:
      return NULL;
    case LV_SCHED_PIECEWISE_CONSTANT: {
      int n = c->u.piecewise_constant.n;
      if (n < 0) return sched_err(c, "boundaries and values must be set (n = %d)", n);
      return set_boundaries(s, n, c->u.piecewise_constant.boundaries);
    }
    case LV_SCHED_POLYNOMIAL:
    case LV_SCHED_LINEAR:
      if (!(c->u.poly.start.x < c->u.poly.limit.x))
        return sched_err(c, "%g must be < %g", c->u.poly.start.x, c->u.poly.limit.x);
      return NULL;
    case LV_SCHED_EXPONENTIAL: {
      const lv_sched_point a = c->u.poly.start, b = c->u.poly.limit;
      if (!(a.x < b.x)) return sched_err(c, "%g must be < %g", a.x, b.x);
      if (!(a.y > 0)) return sched_err(c, "%g must be > 0", a.y);
      if (!(b.y > 0)) return sched_err(c, "%g must be > 0", b.y);
      return create_linear_child(s, 0, a.x, log(a.y), b.x, log(b.y));
    }
    case LV_SCHED_CONTINUOUS: {
      double st = c->u.continuous.start_step, hl = c->u.continuous.half_life_steps;
      double mn = c->u.continuous.min;
      if (!(mn > 0 && mn < 1))
        return sched_err(c, "min must be in (0, 1), found %g", mn);
      if (!(hl > 0)) return sched_err(c, "half_life_steps must be > 0, found %g", hl);
      s->scale = c->u.continuous.initial_value;
      return create_exp_child(s, 0, st, 1.0, st + hl * log(mn) / log(0.5), mn);
    }
    case LV_SCHED_COMBINED_MINIMUM:
    case LV_SCHED_PIECEWISE:
    case LV_SCHED_CYCLE: {
      int n = c->u.composite.n;
      if (n < 1) return sched_err(c, "needs at least one schedule, found %d", n);
      if (c->type == LV_SCHED_PIECEWISE) {
        double prev = 0;
        for (int i = 0; i < n - 1; i++) {
          if (c->u.composite.boundaries[i] < prev)
            return sched_err(c, "Invalid boundary %g < %g", c->u.composite.boundaries[i], prev);
          prev = c->u.composite.boundaries[i];
        }
        LV_TRY(set_boundaries(s, n - 1, c->u.composite.boundaries));
      } else if (c->type == LV_SCHED_CYCLE) {
        double b[LV_SCHED_MAX_POINTS], acc = 0;
        for (int i = 0; i < n; i++) {
          if (!(c->u.composite.steps[i] >= 0))
            return sched_err(c, "steps must be >= 0, found %g", c->u.composite.steps[i]);
          acc += c->u.composite.steps[i];
          b[i] = acc;
        }
        if (!(acc > 0)) return sched_err(c, "the steps must sum to > 0, found %g", acc);
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
    case LV_SCHED_LINEAR_RAMPUP_DECAY: {
      double peak = c->u.linear_rampup_decay.peak, end = c->u.linear_rampup_decay.end;
      LV_TRY(create_linear_child(s, 0, 0, 0, peak, 1));
      return create_linear_child(s, 1, peak, 1, end, 0);
    }
    case LV_SCHED_ANNEALING: {
      double f = c->u.annealing.factor;
      if (c->u.annealing.init == 0) return sched_err(c, "init must be set");
      if (c->u.annealing.lower_bound == 0)
        return sched_err(c, "lower_bound must be set");
      if (!(f > 0 && f <= 1)) return sched_err(c, "factor must be in (0, 1], found %g", f);
      return NULL;
    }
    case LV_SCHED_TRANSFORMER:
      if (!(c->u.transformer.warmup_steps * c->u.transformer.worker_replicas > 0))
        return sched_err(c, "warmup_steps * worker_replicas must be > 0, found %g * %g",
                         c->u.transformer.warmup_steps, c->u.transformer.worker_replicas);
      if (c->u.transformer.has_cyclical_step && !(c->u.transformer.cyclical_step > 0))
        return sched_err(c, "cyclical_step must be > 0, found %g",
                         c->u.transformer.cyclical_step);
      return NULL;
    case LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT:
    case LV_SCHED_LINEAR_RAMPUP_EXP_DECAY: {
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
    case LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY:
      if (!(c->u.rampup_sqrt.warmup_steps > 0))
        return sched_err(c, "warmup_steps must be > 0, found %g", c->u.rampup_sqrt.warmup_steps);
      return NULL;
    case LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS: {
      if (!c->u.rampup_sqrt_bs.has_batch_size || !(c->u.rampup_sqrt_bs.batch_size > 0))
        return sched_err(c, "batch_size must be set and > 0, found %g",
                         c->u.rampup_sqrt_bs.has_batch_size ? c->u.rampup_sqrt_bs.batch_size : 0);
      int r = 0;
      LV_TRY(resolve_splits(c, c->u.rampup_sqrt_bs.num_replicas, splits_in, &r));
      s->scale = c->u.rampup_sqrt_bs.warmup_examples / (c->u.rampup_sqrt_bs.batch_size * r);
      return NULL;
    }
    case LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT: {
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
    case LV_SCHED_COSINE:
      if (!(c->u.cosine.total_steps > 0))
        return sched_err(c, "total_steps must be > 0, found %g", c->u.cosine.total_steps);
      return NULL;
    case LV_SCHED_LINEAR_RAMPUP_COSINE: {
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
    case LV_SCHED_SQRT_DECAY_TO_ZERO: {
      double w = c->u.sqrt_decay_to_zero.warmup_steps, f = c->u.sqrt_decay_to_zero.final_steps;
      if (!(w > 0 && f > w))
        return sched_err(c, "needs 0 < warmup_steps < final_steps, found %g and %g", w, f);
      s->scale = c->u.sqrt_decay_to_zero.starting_lr * sqrt(w * f) / (sqrt(f) - sqrt(w));
      return NULL;
    }
    case LV_SCHED_INVERSE_SIGMOID:
      if (!c->u.inverse_sigmoid.has_k || !(c->u.inverse_sigmoid.k >= 1))
        return sched_err(c, "k must be set and >= 1, found %g",
                         c->u.inverse_sigmoid.has_k ? c->u.inverse_sigmoid.k : 0);
      return NULL;
    case LV_SCHED_COUNT:
      break;
  }
  return lv_status_make(LV_ERR_INVALID, "unknown schedule type %d", (int)c->type);
}

static int num_children(const lv_schedule_config *c) {
  switch (c->type) {
    case LV_SCHED_EXPONENTIAL:
    case LV_SCHED_CONTINUOUS:
      return 1;
    case LV_SCHED_COMBINED_MINIMUM:
    case LV_SCHED_PIECEWISE:
    case LV_SCHED_CYCLE:
      return c->u.composite.n > 0 ? c->u.composite.n : 0;
    case LV_SCHED_LINEAR_RAMPUP_DECAY:
    case LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT:
    case LV_SCHED_LINEAR_RAMPUP_COSINE:
      return 2;
    case LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT:
    case LV_SCHED_LINEAR_RAMPUP_EXP_DECAY:
      return 4;
    default:
      return 0;
  }
}

lv_status lv_schedule_create(const lv_schedule_config *cfg, int cluster_splits, lv_schedule **out) {
  *out = NULL;
  if ((int)cfg->type < 0 || cfg->type >= LV_SCHED_COUNT)
    return lv_status_make(LV_ERR_INVALID, "unknown schedule type %d", (int)cfg->type);
  if ((cfg->type == LV_SCHED_COMBINED_MINIMUM || cfg->type == LV_SCHED_PIECEWISE ||
       cfg->type == LV_SCHED_CYCLE) &&
      cfg->u.composite.n > LV_SCHED_MAX_POINTS)
    return sched_err(cfg, "%d schedules; at most %d are supported", cfg->u.composite.n,
                     LV_SCHED_MAX_POINTS);
  int nchild = num_children(cfg);
  lv_schedule *s = NULL;
  LV_TRY(sched_new(cfg, nchild, &s));
  lv_status st = build(s, cfg, cluster_splits);
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

double lv_schedule_value(const lv_schedule *s, int64_t step) {
  const lv_schedule_config *c = &s->c;
  double x = f32((double)step);
  switch (c->type) {
    case LV_SCHED_CONSTANT:
    case LV_SCHED_CONSTANT_ONE:
      return c->u.constant.value;
    case LV_SCHED_PIECEWISE_CONSTANT:
      return c->u.piecewise_constant.values[piecewise_index(s, x)];
    case LV_SCHED_POLYNOMIAL:
    case LV_SCHED_LINEAR:
      return poly_value(s, x);
    case LV_SCHED_EXPONENTIAL:
      return exp(lv_schedule_value(s->child[0], step));
    case LV_SCHED_CONTINUOUS:
      return s->scale * lv_schedule_value(s->child[0], step);
    case LV_SCHED_STEPWISE_EXPONENTIAL:
      return pow(c->u.stepwise_exponential.decay,
                 floor(f32(x / c->u.stepwise_exponential.num_steps_per_decay)));
    case LV_SCHED_COMBINED_MINIMUM:
    case LV_SCHED_LINEAR_RAMPUP_DECAY:
    case LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT:
    case LV_SCHED_LINEAR_RAMPUP_EXP_DECAY:
    case LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT:
    case LV_SCHED_LINEAR_RAMPUP_COSINE:
      return min_children(s, step);
    case LV_SCHED_ANNEALING:
      return fmax(pow(c->u.annealing.factor, x), c->u.annealing.lower_bound);
    case LV_SCHED_TRANSFORMER: {
      const __typeof__(c->u.transformer) *p = &c->u.transformer;
      if (p->has_cyclical_step) x = fmod(x, p->cyclical_step);
      if (p->has_decay_end && !(x < p->decay_end)) x = f32(p->decay_end);
      double w = f32(p->warmup_steps * p->worker_replicas);
      return pow(p->model_dim, -0.5) * fmin((x + 1) * pow(w, p->decay_factor - 1),
                                            pow(x + p->start_step + 1, p->decay_factor));
    }
    case LV_SCHED_TRANSFORMER_NO_WARMUP: {
      const __typeof__(c->u.transformer_no_warmup) *p = &c->u.transformer_no_warmup;
      double w = f32(p->decay_start * p->worker_replicas);
      if (p->has_decay_end && !(x < p->decay_end)) x = f32(p->decay_end);
      return pow(p->model_dim, -0.5) * fmin(fmin(x + 1, pow(x + 1, -0.5)), pow(w, -0.5));
    }
    case LV_SCHED_TRANSFORMER_MLPERF: {
      const __typeof__(c->u.transformer_mlperf) *p = &c->u.transformer_mlperf;
      double w = f32(p->warmup_steps), f = p->warmup_init_fraction;
      double warm = fmin(1.0, f + (1.0 - f) * x / w);
      return pow(p->model_dim, -0.5) * warm / sqrt(fmax(x, w));
    }
    case LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY: {
      double w = c->u.rampup_sqrt.warmup_steps;
      x = fmax(x, 1.0);
      return c->u.rampup_sqrt.peak * fmin(x / w, sqrt(w / x));
    }
    case LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS: {
      double w = f32(s->scale);
      return fmin((x + 1) * pow(w, -1.5), pow(x + 1, -0.5));
    }
    case LV_SCHED_COSINE: {
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
    case LV_SCHED_PIECEWISE: {
      int i = piecewise_index(s, (double)step);
      int64_t start = i == 0 ? 0 : (int64_t)c->u.composite.boundaries[i - 1];
      int64_t rel = step - start > 0 ? step - start : 0;
      return lv_schedule_value(s->child[i], rel);
    }
    case LV_SCHED_CYCLE: {
      int64_t period = (int64_t)s->period;
      int64_t rel = step % period;
      if (rel < 0) rel += period; /* tf.math.mod is a floor mod */
      int i = piecewise_index(s, (double)rel);
      return lv_schedule_value(s->child[i], c->u.composite.pass_absolute_step ? step : rel);
    }
    case LV_SCHED_SQRT_DECAY: {
      const __typeof__(c->u.sqrt_decay) *p = &c->u.sqrt_decay;
      return p->multiplier / sqrt(fmax(x - p->offset, p->warmup_steps));
    }
    case LV_SCHED_SQRT_DECAY_TO_ZERO: {
      const __typeof__(c->u.sqrt_decay_to_zero) *p = &c->u.sqrt_decay_to_zero;
      return s->scale / sqrt(fmax(x, p->warmup_steps)) - s->scale / sqrt(p->final_steps);
    }
    case LV_SCHED_INVERSE_SIGMOID: {
      double k = c->u.inverse_sigmoid.k;
      return k / (k + exp(x / k));
    }
    case LV_SCHED_EMA_DECAY:
      return fmin((1 + x) / (10 + x), c->u.ema_decay.ema_decay);
    case LV_SCHED_COUNT:
      break;
  }
  LV_ASSERT(!"bad schedule type");
  return 0;
}
