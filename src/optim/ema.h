/* Exponential moving averages of variables (Lingvo's task.train.ema_decay; TF's
 * tf.train.ExponentialMovingAverage as Lingvo's CreateEMAForModel sets it up;
 * reference/lingvo_asr_lm.md §10). After every applied training step, at global step
 * `step` (before its increment):
 *
 *   d = min(ema_decay, (1 + step) / (10 + step))     (float32, TF's num_updates form)
 *   d = ema_schedule(step)                            (when a schedule is given instead)
 *   shadow -= (shadow - var) * (1 - d)
 *
 * Each shadow starts as its variable's value when it is added (lv_ema_reset copies the
 * values again, e.g. after a restore from a checkpoint that has no averages), and is
 * checkpointed as "<variable>/ExponentialMovingAverage" beside the variable. Evaluation
 * reads the shadows in place of the variables (runners/instance.h restores them so); the
 * trainer keeps training the raw variables.
 *
 * Ownership: the EMA owns its shadows (device memory of its backend), their host copies
 * and the schedule given to create; the variables' values are borrowed and must stay
 * where they are while the EMA lives. Updates are the backend's optim_ema kernel, so
 * every element's arithmetic is the same on every replica and thread count. */
#ifndef LV_OPTIM_EMA_H
#define LV_OPTIM_EMA_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "core/variable.h"
#include "kernels/kernels.h"
#include "optim/schedule.h"

#define LV_EMA_SUFFIX "/ExponentialMovingAverage"

typedef struct lv_ema lv_ema;

/* decay in (0, 1) (else LV_ERR_INVALID naming task.train.ema_decay); schedule (may be
 * NULL, owned by the EMA also on failure) replaces the decay as Lingvo's ema_schedule. */
lv_status lv_ema_create(double decay, lv_schedule *schedule, const lv_backend *be, lv_ema **out);
void lv_ema_free(lv_ema *e);
/* Adds a shadow of the n floats at value (device memory of the EMA's backend), started
 * from their current values. */
lv_status lv_ema_add(lv_ema *e, const char *var_name, float *value, int64_t n);
/* The EMA of Lingvo's variables for EMA (_VariablesForEMA): every trainable float32
 * variable, and with moving_vars (ema_decay_moving_vars) the non-trainable float32 ones
 * too (batch norm's moving statistics: the model's only non-trainable float variables). */
lv_status lv_ema_create_for_vars(double decay, lv_schedule *schedule, bool moving_vars, const lv_backend *be,
                                 lv_var *const *vars, int nvars, lv_ema **out);

/* The decay the update at global step `step` uses (float32, as TF computes it). */
float lv_ema_decay_at(const lv_ema *e, int64_t step);
/* One update of every shadow at global step `step`. An ema_schedule whose value there is
 * outside [0, 1] (or NaN) is an error, the shadows unchanged (a decay of 2 would make them
 * grow exponentially). */
lv_status lv_ema_apply(lv_ema *e, int64_t step);
/* Every shadow set to its variable's current value. */
void lv_ema_reset(lv_ema *e);
/* Shadow i (0 <= i < lv_ema_num_vars) set to its variable's current value. */
void lv_ema_reset_one(lv_ema *e, int i);

int lv_ema_num_vars(const lv_ema *e);
/* Shadow i: its checkpoint name ("<var>/ExponentialMovingAverage"), device memory and
 * size. */
void lv_ema_shadow(lv_ema *e, int i, const char **name, float **data, int64_t *n);
/* For checkpoints: shadow i's host copy (stable while the EMA lives), and the copies of
 * every shadow to its host copy (before a save or a broadcast) or back (after). */
float *lv_ema_shadow_host(lv_ema *e, int i);
void lv_ema_to_host(lv_ema *e);
void lv_ema_from_host(lv_ema *e);

#endif
