/* A small Params tree with every kind of entry (int, float, bool, string, nullable,
 * list, nested params, a list of params, registered classes), shared by the params
 * fuzz targets. */
#ifndef LV_FUZZ_PARAMS_TREE_H
#define LV_FUZZ_PARAMS_TREE_H

#include "params/params.h"

static lv_params *fuzz_fc_ctor(void) {
  lv_params *p = lv_params_new_cls("fz.FC");
  lv_params_define_int(p, "input_dim", 0, "Input depth.");
  lv_params_define_int(p, "output_dim", 0, "Output depth.");
  lv_params_define_string(p, "activation", "RELU", "Activation.");
  lv_params_define_bool(p, "has_bias", true, "Bias.");
  return p;
}

static lv_params *fuzz_schedule_ctor(void) {
  lv_params *p = lv_params_new_cls("fz.Piecewise");
  lv_params_define_list(p, "boundaries", NULL, "Step boundaries.");
  lv_params_define_list(p, "values", NULL, "Values.");
  return p;
}

static lv_params *fuzz_model_ctor(void) {
  lv_params *p = lv_params_new_cls("fz.Model");
  lv_params_define_string(p, "name", "", "Name.");
  lv_params_define_float(p, "dropout_prob", 0.0, "Dropout.");
  lv_params_define_list(p, "filter_shapes", NULL, "Filters.");
  lv_params_define_none(p, "l2", LV_PV_FLOAT, "Nullable float.");
  lv_params_define_params(p, "softmax", fuzz_fc_ctor(), "Softmax.");
  lv_params *items[2] = {fuzz_fc_ctor(), fuzz_fc_ctor()};
  lv_params_define_params_list(p, "layers", items, 2, "A layer stack.");
  lv_params *t = lv_params_define_params(p, "train", lv_params_new(), "Train.");
  lv_params_define_float(t, "learning_rate", 0.0, "LR.");
  lv_params_define_int(t, "max_steps", 4000000, "Steps.");
  lv_params_define_params(t, "lr_schedule", NULL, "Schedule.");
  return p;
}

static void fuzz_register_classes(void) {
  lv_registry_add("fz.FC", fuzz_fc_ctor);
  lv_registry_add("fz.Piecewise", fuzz_schedule_ctor);
  lv_registry_add("fz.Model", fuzz_model_ctor);
}

static lv_params *fuzz_root(void) {
  lv_params *p = lv_params_new();
  lv_params_define_params(p, "task", fuzz_model_ctor(), "Task.");
  lv_params *t = lv_params_define_params(p, "train", lv_params_new(), "Train.");
  lv_params_define_int(t, "max_steps", 4000000, "Steps.");
  lv_params_define_bool(t, "async_checkpointing", true, "Async.");
  lv_params_define_string(p, "notes", "", "Free text.");
  return p;
}

#endif
