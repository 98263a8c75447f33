#include "optim/optim_var.h"

#include <stdlib.h>

#include "core/backend.h"

lv_status lv_learner_create_for_vars(const lv_learner_config *cfg, lv_schedule *schedule,
                                     lv_optimizer *optimizer, lv_var *const *vars, int nvars,
                                     lv_learner **out) {
  *out = NULL;
  const lv_backend *be = optimizer ? lv_optimizer_backend(optimizer) : NULL;
  lv_learner_var *lv = calloc((size_t)nvars + 1, sizeof *lv);
  if (!lv) {
    lv_schedule_free(schedule);
    lv_optimizer_free(optimizer);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory creating the learner");
  }
  for (int i = 0; i < nvars; i++) {
    lv_var *v = vars[i];
    bool usable = v->trainable && v->value.dtype == LV_F32;
    const char *why = NULL;
    if (usable && (lv_backend_get(v->value.device) != be || lv_backend_get(v->grad.device) != be))
      why = "is not on the device of the optimizer's backend";
    else if (usable && (v->grad.data == NULL || v->grad.dtype != LV_F32 ||
                        !lv_shape_eq(&v->value.shape, &v->grad.shape)))
      why = "has no float32 gradient of the value's shape";
    if (why) {
      free(lv);
      lv_schedule_free(schedule);
      lv_optimizer_free(optimizer);
      return lv_status_make(LV_ERR_INTERNAL, "learner: trainable variable %s %s", v->name, why);
    }
    lv[i].name = v->name;
    lv[i].value = usable ? lv_f32(&v->value) : NULL;
    lv[i].grad = usable ? lv_f32(&v->grad) : NULL;
    lv[i].n = lv_tensor_numel(&v->value);
    lv[i].trainable = usable;
    lv[i].skip_lp = v->skip_lp_regularization;
    lv[i].grad_group = v->grad_clip_group;
    lv[i].rank = v->value.shape.rank;
    for (int d = 0; d < v->value.shape.rank && d < LV_KMAX_RANK; d++) lv[i].shape[d] = v->value.shape.d[d];
    if (v->lp_looked_up_rows && v->value.shape.rank == 2) lv[i].lp_row_width = v->value.shape.d[1];
  }
  lv_status st = lv_learner_create(cfg, schedule, optimizer, lv, nvars, out);
  free(lv);
  return st;
}
