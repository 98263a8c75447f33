/* The learner: one training step's gradient processing and update, in the order of
 * Lingvo's Learner.Apply / AdjustGradients / ScaleGradients (lingvo/core/learner.py;
 * reference/lingvo.md §5.2, §5.4):
 *
 *   1. L2 (grad += w * v, l2_loss = 0.5 * w * sum v^2) then L1 (grad += w * sign(v),
 *      l1_loss = w * sum |v|) on trainable variables not marked skip_lp (on an embedding's
 *      rows, only those with a nonzero gradient: lp_row_width);
 *   2. if scale_gradients: global grad norm sqrt(sum g^2), var norm, has_nan_or_inf
 *      (any non-finite gradient or a non-finite norm); the task's adjustment
 *      (max_group_gradient_norm: the LSTM gradients clipped by their own norm); then either per-variable
 *      clip_by_norm (clip_gradient_single_norm_to_value) or a global grad_scale =
 *      min(1, clip_gradient_norm_to_value / norm) x [norm < grad_norm_to_clip_to_zero]
 *      x GradNormTracker (1 or 0), forced to 0 on NaN/Inf; gradients are multiplied by the scale (0 -> zeroed, so
 *      they stay finite);
 *   3. lr = learning_rate * schedule(step); optimizer update.
 *
 * A step whose gradients hold NaN/Inf, or whose grad_scale is 0 (grad_norm_to_clip_to_zero
 * tripped), is skipped: no variable or optimizer slot changes, and it is counted. So is a
 * step whose finite gradients give a non-finite update (a huge learning rate, g^2
 * overflowing Adam's second moment; with scale_gradients, as the gradient checks): after
 * the update every variable and slot is checked
 * (one more ordered sum each), and such a step is undone from a copy of the variables,
 * slots and optimizer/tracker state taken before it (device memory as large as the
 * variables and slots). max_consecutive_skipped_steps skipped steps in a row end the
 * run with an error instead of spinning on a diverged model. Lingvo
 * applies the zeroed gradients, which still moves Adam's moments; skipping keeps
 * variables and slots exactly as they were, which is what "the step is skipped" means
 * to a user.
 *
 * The learner runs on its optimizer's backend: the L1/L2 adjustments, norms, scaling,
 * zeroing and the update are that backend's optim_* kernels (kernels/kernels.h) over the
 * variables' device memory. The host decides (clipping, NaN/Inf, GradNormTracker) from
 * the per-variable sums, which come back in one copy per step; it never reads or writes
 * variable, gradient or slot memory itself.
 *
 * Ownership: the learner owns the schedule and the optimizer passed to create (also on
 * failure). Variable arrays are borrowed and must outlive the learner; lv_learner_step
 * reads and modifies the gradients in place and updates the values. */
#ifndef LV_OPTIM_LEARNER_H
#define LV_OPTIM_LEARNER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

typedef struct lv_learner_var {
  const char *name; /* copied */
  float *value;     /* [n] device memory of the optimizer's backend */
  float *grad;      /* [n] device memory of the optimizer's backend */
  int64_t n;
  bool trainable;   /* false: ignored (no grad use, no update, not in norms) */
  bool skip_lp;     /* excluded from L2/L1 (Lingvo's SKIP_LP_REGULARIZATION) */
  /* > 0: the value is [n / lp_row_width, lp_row_width] rows read by a gather (an
   * EmbeddingLayer shard), whose TF gradient is an IndexedSlices: Lingvo's L2/L1 then
   * regularize (gradient and loss) only the rows the step looked up. lingvoc takes those
   * as the rows with a nonzero gradient after the all-reduce, the same on every replica. */
  int64_t lp_row_width;
  /* In the group clipped by max_group_gradient_norm (the LSTM variables of an LM). */
  bool grad_group;
  /* The value's shape (rank 0: a vector of n), for optimizers that factor by shape
   * (Adafactor). */
  int rank;
  int64_t shape[LV_KMAX_RANK];
} lv_learner_var;

/* Lingvo's layers.GradNormTracker: rejects a step (scale 0) whose log(grad norm + 1)
 * lies more than clip_threshold standard deviations above its decayed moving mean, once
 * enough history exists (total_weight > 0.75), or whose gradients hold NaN/Inf. */
typedef struct lv_grad_norm_tracker_config {
  double decay;                  /* 0.995 */
  double grad_norm_lower_cap;    /* 1e-2 */
  double clip_threshold;         /* 4.0 */
  double grad_norm_clip_cap_min; /* 0.0: never reject norms below this */
} lv_grad_norm_tracker_config;

lv_grad_norm_tracker_config lv_grad_norm_tracker_defaults(void);

typedef struct lv_learner_config {
  double learning_rate;
  bool has_l2; /* l2_regularizer_weight is not None */
  double l2_regularizer_weight;
  bool has_l1; /* l1_regularizer_weight is not None */
  double l1_regularizer_weight;
  double clip_gradient_norm_to_value;        /* 0: off */
  double clip_gradient_single_norm_to_value; /* 0: off; both set is an error */
  double grad_norm_to_clip_to_zero;          /* 0: off */
  bool scale_gradients;                      /* true */
  bool has_grad_norm_tracker;                /* grad_norm_tracker is not None */
  lv_grad_norm_tracker_config grad_norm_tracker;
  int64_t max_consecutive_skipped_steps;     /* a step error after this many in a row; 0: off */
  /* > 1: Lingvo's optimizer.Accumulator: each step's gradients (after L1/L2 and
   * scaling) are added to "<var>/grad_accumulator/var"; the optimizer runs only at the
   * steps where step % accum_steps == accum_steps - 1, on the sums times 1/accum_steps,
   * which are then zeroed. 0 or 1: every step updates. */
  int64_t accum_steps;
  /* > 0: Lingvo's LanguageModel.AdjustGradients (train.max_lstm_gradient_norm): with
   * scale_gradients, after grad_norm/all is taken and before the scaling, the gradients of
   * the variables marked grad_group are clipped by their own global norm
   * (tf.clip_by_global_norm). 0: off. */
  double max_group_gradient_norm;
} lv_learner_config;

/* Lingvo's BaseTask train defaults (learning_rate 0, no L1/L2, no clipping,
 * scale_gradients true), and lingvoc's max_consecutive_skipped_steps 100. */
lv_learner_config lv_learner_defaults(void);
/* Checks the config as Lingvo does; errors are LV_ERR_INVALID naming the key. */
lv_status lv_learner_config_validate(const lv_learner_config *c);

typedef struct lv_learner_stats {
  double learning_rate;  /* learning_rate * lr_schedule */
  double lr_schedule;
  double grad_norm_all;  /* "grad_norm/all" (after L1/L2, before scaling) */
  double var_norm_all;   /* "var_norm/all" */
  double grad_scale_all; /* "grad_scale_all" (1 with single-norm clipping) */
  bool has_nan_or_inf;
  bool grad_norm_is_nan_or_inf;
  bool has_l2, has_l1;
  double l2_loss, l1_loss;
  bool skipped; /* no update was applied this step */
  bool over_clip_to_zero;    /* grad_norm_all >= grad_norm_to_clip_to_zero (scale 0) */
  bool tracker_rejected;     /* the GradNormTracker rejected the norm as an outlier (scale 0) */
  const char *nonfinite_var; /* the first variable whose gradient is NaN or Inf (or NULL);
                              * valid while the learner lives */
  bool update_nonfinite;     /* finite gradients, but the update made a variable or slot
                              * NaN/Inf: undone, and the step skipped */
  const char *nonfinite_update; /* the first variable or slot it made non-finite (or NULL) */
} lv_learner_stats;

/* Fills names/values with the step's eval metrics under Lingvo's names ("learning_rate",
 * "lr_schedule", "grad_norm/all", "var_norm/all", "grad_scale_all", "has_nan_or_inf",
 * "grad_norm_is_nan_or_inf", then "l2_loss"/"l1_loss" where enabled), at most max of them;
 * returns the count (at most LV_LEARNER_MAX_STATS_METRICS). */
#define LV_LEARNER_MAX_STATS_METRICS 9
int lv_learner_stats_metrics(const lv_learner_stats *s, const char **names, double *values,
                             int max);

typedef struct lv_learner lv_learner;

/* Registers the trainable variables with the optimizer (creating their slots); the
 * variables live on the optimizer's backend. */
lv_status lv_learner_create(const lv_learner_config *cfg, lv_schedule *schedule,
                            lv_optimizer *optimizer, const lv_learner_var *vars, int nvars,
                            lv_learner **out);
void lv_learner_free(lv_learner *l);

/* One step at global step `step` (the value before this step's increment). stats may
 * be NULL. Fails (LV_ERR_INTERNAL, after filling stats) when this skipped step is the
 * max_consecutive_skipped_steps-th in a row. */
lv_status lv_learner_step(lv_learner *l, int64_t step, lv_learner_stats *stats);

/* The learning rate the step at `step` uses. */
double lv_learner_learning_rate(const lv_learner *l, int64_t step);
lv_optimizer *lv_learner_optimizer(lv_learner *l);
const lv_schedule *lv_learner_schedule(const lv_learner *l);
/* The same, for the trainer to advance a DevBasedSchedule and checkpoint its state. */
lv_schedule *lv_learner_schedule_mut(lv_learner *l);
/* Steps skipped because of NaN/Inf gradients, and all skipped steps (NaN/Inf or
 * grad_norm_to_clip_to_zero), in this process (Lingvo keeps no such counters, and they are
 * not checkpointed: a resumed run counts from 0, as its consecutive-skip limit does). */
int64_t lv_learner_num_nan_inf_steps(const lv_learner *l);
int64_t lv_learner_num_skipped_steps(const lv_learner *l);
/* The grad norm tracker's float32 state ("log_mean", "log_mean_squared",
 * "total_weight", "total_rejections"; Lingvo's variables under the tracker's scope), for
 * checkpoints: 4 entries with a tracker, 0 without. */
int lv_learner_num_state(const lv_learner *l);
void lv_learner_state(lv_learner *l, int i, const char **name, float **value);
/* Per trainable variable (in registration order), the last step's gradient norm (after
 * L1/L2, before scaling) and value norm: Lingvo's "grad_norm/<var>" and "var_norm/<var>"
 * summaries. Valid after a step with scale_gradients. */
int lv_learner_num_vars(const lv_learner *l);
const char *lv_learner_var_name(const lv_learner *l, int i);
void lv_learner_var_norms(const lv_learner *l, int i, double *grad_norm, double *var_norm);
/* The gradient accumulators (accum_steps > 1; none otherwise), for checkpoints: name
 * "<var>/grad_accumulator/var", n floats, a host copy (stable while the learner lives)
 * and the copies of every accumulator to its host copy (before a save) or back (after a
 * restore). */
int lv_learner_num_accumulators(const lv_learner *l);
void lv_learner_accumulator(lv_learner *l, int i, const char **name, int64_t *n);
float *lv_learner_accumulator_host(lv_learner *l, int i);
void lv_learner_accumulators_to_host(lv_learner *l);
void lv_learner_accumulators_from_host(lv_learner *l);

#endif
