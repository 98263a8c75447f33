/* Lingvo's global variational weight noise (py_utils.AddVN through BaseLayer.AddGlobalVN;
 * reference/lingvo_asr_lm.md §9) for the trainer: once per training step, every variable
 * its layer marked (lv_var.vn.global, layers/layer.h lv_layer_vn_target) reads
 *
 *   w + scale * noise,   scale = vn.scale if step >= vn.start_step else 0
 *
 * with noise N(0, 1) (U[-0.5, 0.5) with use_uniform_noise) from the backend's add_noise
 * kernel under (vn.seed, stream of the step and the variable's name): the same on every
 * replica and after a restart. The trainer perturbs the variables in place before the
 * forward pass and restores their clean values after the backward pass, so the gradient
 * is taken at the noisy weights and the update applies to the clean ones, as TF's
 * gradient of w + noise. The evaler and the decoder never perturb.
 *
 * Ownership: the lv_vn owns a device copy of each marked variable (the clean values
 * while perturbed); the variables are borrowed and must stay where they are. */
#ifndef LV_OPTIM_VN_H
#define LV_OPTIM_VN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "core/variable.h"
#include "kernels/kernels.h"

typedef struct lv_vn lv_vn;

/* Over the trainable float32 variables among vars with vn.global; *out is NULL when
 * there is none. */
lv_status lv_vn_create(const lv_backend *be, lv_var *const *vars, int nvars, lv_vn **out);
void lv_vn_free(lv_vn *v);
int lv_vn_num_vars(const lv_vn *v);
/* The first step at which some variable gets noise (its smallest start_step). */
int64_t lv_vn_start_step(const lv_vn *v);
/* Variable i (< lv_vn_num_vars). */
const lv_var *lv_vn_var(const lv_vn *v, int i);
/* The noise stream of a variable at a step (the add_noise kernel's stream argument). */
uint64_t lv_vn_stream(const char *var_name, int64_t step);
/* Adds step's noise to every variable whose start_step <= step and scale > 0, keeping
 * their clean values; returns how many it perturbed. */
int lv_vn_perturb(lv_vn *v, int64_t step);
/* Puts the clean values back after lv_vn_perturb (nothing if none is perturbed). */
void lv_vn_restore(lv_vn *v);

#endif
