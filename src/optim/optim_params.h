/* Params binding of the optim module: each schedule and optimizer class's Lingvo params
 * (names, defaults, descriptions as in lingvo/core/schedule.py and optimizer.py), their
 * registration in the class registry, and converters from a Params tree to the plain
 * configs of schedule.h / optimizer.h / learner.h. Kept apart from the core so the core
 * builds and tests without the params module.
 *
 * Schedule params come from the class table of schedule.h (lv_schedule_class_of): every
 * class there is registered, the composites too (CombinedMinimumSchedule,
 * PiecewiseSchedule, CycleSchedule: `schedules` is a list of params, built recursively).
 * DevBasedSchedule's metric_history (a MetricHistory params) is read by the trainer
 * (lv_dev_based_schedule_from_params), as is task.train.early_stop.
 * Optimizer params likewise come from the class table of optimizer.h
 * (lv_optimizer_class_of): the common keys, then the class's own. */
#ifndef LV_OPTIM_OPTIM_PARAMS_H
#define LV_OPTIM_OPTIM_PARAMS_H

#include "core/variable.h"
#include "kernels/kernels.h"
#include "optim/early_stop.h"
#include "optim/ema.h"
#include "optim/learner.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "params/params.h"

/* Registers every schedule and optimizer class below, and GradNormTracker, under
 * their Lingvo names. */
void lv_optim_register_all(void);

/* Default Params of a schedule / optimizer class (with `cls` and `name`). */
lv_params *lv_schedule_params(lv_schedule_type t);
lv_params *lv_optimizer_params(lv_optimizer_type t);

/* Builds a schedule from its Params (`cls` selects the class; sub-schedules of the
 * composites recursively). num_splits is the cluster's number of splits per trainer
 * client (0 if unknown), used where the schedule's own num_splits/num_replicas is 0.
 * Errors name the key: "PiecewiseSchedule.schedules: expected len(boundaries) + 1 = 2
 * items, found 1", "CombinedMinimumSchedule.schedules[1]: ...". */
lv_status lv_schedule_from_params(const lv_params *p, int num_splits, lv_schedule **out);
lv_status lv_optimizer_from_params(const lv_params *p, const lv_backend *be, lv_optimizer **out);

/* Lingvo's MetricHistory.Params() (jobname, metric, minimize, ...). */
lv_params *lv_metric_history_params(void);
/* Reads one (where names it in errors: "task.train.early_stop"); tfevent_file is refused. */
lv_status lv_metric_history_from_params(const lv_params *mh, const char *where, lv_metric_history *out);
/* task.train.early_stop: out->window 0 when off (window 0 or early_stop None). */
lv_status lv_early_stop_from_params(const lv_params *task_train, lv_early_stop_config *out);
/* True when task.train.lr_schedule is a DevBasedSchedule: its history and tolerance (*st:
 * an error in its metric_history, else NULL). */
bool lv_dev_based_schedule_from_params(const lv_params *task_train, lv_metric_history *hist, double *tolerance,
                                       lv_status *st);
/* The histories the evaler and decoder jobs keep for this task (Lingvo's
 * MetricHistory._metric_histories_map): early_stop's when its window is set, the
 * DevBasedSchedule's; at most max into out; returns the count. Invalid ones are left out
 * (the trainer reports them). */
int lv_metric_histories_from_params(const lv_params *task_train, lv_metric_history *out, int max);

/* Defines the learner keys of BaseTask's `train` params with Lingvo's defaults:
 * learning_rate, lr_schedule (ContinuousSchedule), optimizer (Adam),
 * l2_regularizer_weight, l1_regularizer_weight (None), clip_gradient_norm_to_value,
 * clip_gradient_single_norm_to_value, grad_norm_to_clip_to_zero (0.0),
 * scale_gradients (True), grad_norm_tracker (None; class "GradNormTracker"). */
void lv_optim_define_train_params(lv_params *train);

/* Reads and validates those keys of a task's train params; errors are LV_ERR_INVALID and
 * start with "task.train.<key>". */
lv_status lv_learner_config_from_params(const lv_params *task_train, lv_learner_config *out);

/* The learner of task.train: config, lr_schedule and optimizer (on backend be) from the
 * params, vars registered through lv_learner_create_for_vars (optim_var.h). */
lv_status lv_learner_from_params(const lv_params *task_train, int num_splits,
                                 const lv_backend *be, lv_var *const *vars, int nvars,
                                 lv_learner **out);

/* The variables the learner trains (out[nvars], caller's array): vars less the trainable
 * ones task.train.bprop_variable_filter does not find (re.search on "<name>:0") or
 * bprop_variable_exclusion finds (Lingvo's learner); the others keep their values and
 * get no optimizer slots. Logs what is left out. Errors (LV_ERR_INVALID naming the key):
 * a bad regex, no trainable variable left. */
lv_status lv_bprop_vars(const lv_params *task_train, lv_var *const *vars, int nvars, lv_var **out, int *nout);

/* The moving averages of task.train (ema_decay > 0; ema_decay_moving_vars,
 * ema_schedule) over vars, on backend be (optim/ema.h); *out = NULL when ema_decay <= 0
 * (off). Errors are LV_ERR_INVALID starting with "task.train.<key>". */
lv_status lv_ema_from_params(const lv_params *task_train, int num_splits, const lv_backend *be,
                             lv_var *const *vars, int nvars, lv_ema **out);

#endif
