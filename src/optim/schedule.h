/* Learning-rate schedules: Lingvo's lingvo/core/schedule.py (reference/lingvo.md §7.2).
 * The effective learning rate is train.learning_rate * lv_schedule_value(s, step).
 *
 * A schedule is built from a plain config (lv_schedule_config: a type and that type's
 * fields, filled from lv_schedule_defaults and then changed); composite schedules
 * (CombinedMinimum, Piecewise, Cycle) point at child configs. lv_schedule_create
 * validates the config (Lingvo's constructor assertions become LV_ERR_INVALID errors)
 * and deep-copies it, so the config and its children may be freed afterwards. Derived
 * schedules (Continuous, LinearRampup*, ...) are built from the same sub-schedules
 * Lingvo builds, so they agree with it at every step.
 *
 * Ownership: lv_schedule_create's result belongs to the caller (lv_schedule_free).
 * Values are computed in double; comparisons that Lingvo does in float32
 * (PiecewiseConstant boundaries, step casts) are done in float32 too.
 *
 * DevBasedSchedule is the one stateful schedule: its value is its current factor, which
 * lv_schedule_dev_based_update advances from the metric history's (best, last) steps
 * (the trainer reads the file, early_stop.h, before each step). */
#ifndef LV_OPTIM_SCHEDULE_H
#define LV_OPTIM_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef enum {
  LV_SCHED_CONSTANT,
  LV_SCHED_CONSTANT_ONE,
  LV_SCHED_PIECEWISE_CONSTANT,
  LV_SCHED_POLYNOMIAL,
  LV_SCHED_LINEAR,
  LV_SCHED_EXPONENTIAL,
  LV_SCHED_CONTINUOUS,
  LV_SCHED_STEPWISE_EXPONENTIAL,
  LV_SCHED_COMBINED_MINIMUM,
  LV_SCHED_LINEAR_RAMPUP_DECAY,
  LV_SCHED_ANNEALING,
  LV_SCHED_TRANSFORMER,
  LV_SCHED_TRANSFORMER_NO_WARMUP,
  LV_SCHED_TRANSFORMER_MLPERF,
  LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT,
  LV_SCHED_LINEAR_RAMPUP_EXP_DECAY,
  LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY,
  LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS,
  LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT,
  LV_SCHED_COSINE,
  LV_SCHED_LINEAR_RAMPUP_COSINE,
  LV_SCHED_PIECEWISE,
  LV_SCHED_CYCLE,
  LV_SCHED_SQRT_DECAY,
  LV_SCHED_SQRT_DECAY_TO_ZERO,
  LV_SCHED_INVERSE_SIGMOID,
  LV_SCHED_EMA_DECAY,
  LV_SCHED_DEV_BASED,
  LV_SCHED_COUNT
} lv_schedule_type;

/* Lingvo class names: "Constant", "PiecewiseConstantSchedule", "TransformerSchedule", ... */
extern const char *const lv_schedule_type_names[LV_SCHED_COUNT];
/* Returns false if name is not a schedule class. */
bool lv_schedule_type_from_name(const char *name, lv_schedule_type *out);

/* Longest boundaries / values lists a config may carry. */
#define LV_SCHED_MAX_POINTS 64

typedef struct lv_schedule_config lv_schedule_config;

/* (x, y) points of Polynomial/Linear/Exponential. */
typedef struct lv_sched_point {
  double x, y;
} lv_sched_point;

struct lv_schedule_config {
  lv_schedule_type type;
  union {
    struct { double value; } constant; /* CONSTANT, CONSTANT_ONE */
    struct {                           /* PIECEWISE_CONSTANT: len(values) == n + 1 */
      int n;
      double boundaries[LV_SCHED_MAX_POINTS];
      double values[LV_SCHED_MAX_POINTS + 1];
    } piecewise_constant;
    struct { /* POLYNOMIAL, LINEAR (power 1), EXPONENTIAL (power ignored) */
      double power;
      lv_sched_point start, limit;
      bool origin_limit; /* origin = 'limit' (else 'start') */
    } poly;
    struct { double initial_value, start_step, half_life_steps, min; } continuous;
    struct { double decay, num_steps_per_decay; } stepwise_exponential;
    struct { /* COMBINED_MINIMUM (children only), PIECEWISE, CYCLE */
      int n;                                 /* number of child schedules */
      const lv_schedule_config *const *schedules; /* [n], borrowed until create */
      double boundaries[LV_SCHED_MAX_POINTS]; /* PIECEWISE: n-1 boundaries */
      double steps[LV_SCHED_MAX_POINTS];      /* CYCLE: n steps */
      bool pass_absolute_step;                /* CYCLE */
    } composite;
    struct { double peak, end; } linear_rampup_decay;
    struct { double init, lower_bound, factor; } annealing;
    struct {
      double warmup_steps, model_dim, worker_replicas;
      bool has_decay_end;
      double decay_end;
      double decay_factor, start_step;
      bool has_cyclical_step;
      double cyclical_step;
    } transformer;
    struct {
      double decay_start;
      bool has_decay_end;
      double decay_end;
      double model_dim, worker_replicas;
    } transformer_no_warmup;
    struct { double warmup_steps, warmup_init_fraction, model_dim; } transformer_mlperf;
    struct { /* ..._SCALED_BY_NUM_SPLIT and LINEAR_RAMPUP_EXP_DECAY */
      double warmup, warmup_init, decay_start, decay_end, min, max;
      int num_splits; /* 0: the cluster's splits passed to lv_schedule_create */
    } rampup_exp;
    struct { double peak, warmup_steps; } rampup_sqrt;
    struct {
      double warmup_examples;
      bool has_batch_size;
      double batch_size;
      int num_replicas; /* 0: the cluster's splits */
    } rampup_sqrt_bs;
    struct {
      int n; /* >= 2 */
      double boundaries[LV_SCHED_MAX_POINTS];
      double lrs[LV_SCHED_MAX_POINTS];
      int num_splits; /* 0: the cluster's splits */
    } rampup_piecewise;
    struct {
      double initial_value, final_value, total_steps;
      bool cyclical, half_cycle;
    } cosine;
    struct {
      double warmup_init, warmup_steps, initial_value, final_value, total_steps;
      bool cyclical;
      int num_splits; /* <= 0: the cluster's splits */
    } rampup_cosine;
    struct { double warmup_steps, multiplier, offset; } sqrt_decay;
    struct { double warmup_steps, starting_lr, final_steps; } sqrt_decay_to_zero;
    struct { bool has_k; double k; } inverse_sigmoid;
    struct { double ema_decay; } ema_decay;
    struct { double tolerance, window, decay, min_factor; } dev_based;
  } u;
};

typedef struct lv_schedule lv_schedule;

/* ---- schedule classes ----
 * Every schedule type is one class: a table of its params (Lingvo name, type, default,
 * description, and the lv_schedule_config field the value lands in), a build function
 * (Lingvo's constructor: checks, derived constants, sub-schedules) and a value function.
 * lv_schedule_defaults, the params binding (optim_params.c: defining, reading and
 * registering every class) and lv_schedule_create/value all walk this one table; adding
 * a schedule = a config struct in the union above, a class entry, its functions. */
typedef enum {
  LV_SP_FLOAT,     /* float param -> double */
  LV_SP_INT,       /* int param -> double (steps, dims: Lingvo computes in float) */
  LV_SP_INT32,     /* int param -> int (num_splits) */
  LV_SP_BOOL,      /* bool -> bool */
  LV_SP_OPT_FLOAT, /* float or None (default None) -> double, and the bool at aux_off (if
                    * any) says whether it is set; with no flag None leaves the field 0 */
  LV_SP_OPT_INT,   /* int or None, as OPT_FLOAT */
  LV_SP_OPT_INT32, /* int or None -> int, None = 0 */
  LV_SP_POINT,     /* (x, y) -> lv_sched_point; default (def, def_y) written [int, float] */
  LV_SP_ORIGIN,    /* 'start' or 'limit' -> bool, true for 'limit' */
  LV_SP_NUMBERS,   /* list of numbers -> double[max] at off; length = count + count_delta
                    * where count is the int at aux_off, shared by the params that have
                    * the same aux_off (the first one read sets it) */
  LV_SP_SCHEDULES, /* list of schedule params -> composite.schedules (children built
                    * recursively); length = count + count_delta as for NUMBERS */
} lv_sched_param_kind;

typedef struct {
  const char *name; /* Lingvo's param name */
  lv_sched_param_kind kind;
  double def, def_y;   /* scalars; POINT: (def, def_y) */
  const char *def_cls; /* SCHEDULES: the class of the one default item (NULL: empty) */
  const char *desc;
  size_t off;     /* offsetof(lv_schedule_config, ...) of the value */
  size_t aux_off; /* OPT_*: set flag (0: none); NUMBERS, SCHEDULES: the int count */
  int count_delta, max;
} lv_sched_param;

typedef struct {
  const lv_sched_param *params; /* in Lingvo's definition order */
  int nparams;
  int nchild; /* sub-schedules build creates; -1: one per composite.n */
  /* Checks c (errors LV_ERR_INVALID, "<class>: ..."), sets derived fields of s and
   * creates its children; NULL when nothing is to check. cluster_splits as in
   * lv_schedule_create. */
  lv_status (*build)(lv_schedule *s, const lv_schedule_config *c, int cluster_splits);
  double (*value)(const lv_schedule *s, int64_t step);
} lv_schedule_class;

/* The class of type t (its name is lv_schedule_type_names[t]). */
const lv_schedule_class *lv_schedule_class_of(lv_schedule_type t);

/* A config holding the table's defaults for type t (required params such as
 * Annealing.init or InverseSigmoid.k unset; composite schedules with no children: a C
 * config cannot default a pointer, the Params of CombinedMinimumSchedule do hold
 * Lingvo's default [LinearSchedule]). */
lv_schedule_config lv_schedule_defaults(lv_schedule_type t);

/* Validates and builds. cluster_splits is the number of splits per trainer client,
 * used by schedules whose num_splits/num_replicas is 0 (Lingvo infers it from the sync
 * cluster); pass 0 when unknown, and such a schedule is then an LV_ERR_INVALID error. */
lv_status lv_schedule_create(const lv_schedule_config *cfg, int cluster_splits, lv_schedule **out);
void lv_schedule_free(lv_schedule *s);
lv_schedule_type lv_schedule_get_type(const lv_schedule *s);
/* The schedule's value at global step `step`. */
double lv_schedule_value(const lv_schedule *s, int64_t step);

/* DevBasedSchedule (LV_SCHED_DEV_BASED) only: Lingvo's Value() from the history's best
 * and last steps: ref_step = max(ref_step, best); if last - ref_step >= window:
 * cur_factor = max(min_factor, cur_factor * decay), ref_step = last. Returns true when it
 * decayed. */
bool lv_schedule_dev_based_update(lv_schedule *s, int64_t best, int64_t last);
/* Its variables for checkpoints: "LRSched/cur_factor/var" (float32, starts at 1) and
 * "LRSched/ref_step/var" (int64, starts at 0). */
float *lv_schedule_dev_based_factor(lv_schedule *s);
int64_t *lv_schedule_dev_based_ref_step(lv_schedule *s);

#endif
