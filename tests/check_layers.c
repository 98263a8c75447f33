/* Layers, the LeNet5 task and model params: variable names, shapes and dtypes as Lingvo
 * names them, output shapes, experiment loading and its errors. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "core/graph.h"
#include "core/ops.h"
#include "core/variable.h"
#include "layers/conv.h"
#include "layers/layer.h"
#include "layers/pooling.h"
#include "layers/projection.h"
#include "layers/full_softmax.h"
#include "models/model.h"
#include "models/task.h"

static lv_params *lenet5_params(const char *dataset, const char *override) {
  lv_model_options o;
  lv_model_options_init(&o);
  o.model = "image.mnist.LeNet5";
  o.dataset = dataset;
  o.experiments_dir = "experiments";
  o.logdir = "/tmp/lingvoc-check-layers";
  o.params_override = override;
  lv_params *p = NULL;
  lv_status s = lv_model_params_build(&o, &p);
  ck_assert_msg(s == NULL, "%s", lv_status_msg(s));
  return p;
}

START_TEST(test_lenet5_variables) {
  lv_params *p = lenet5_params("Train", NULL);
  const lv_params *tp = lv_params_sub(p, "task");
  const lv_task_class *tc = lv_task_class_find(lv_params_str(tp, "cls"));
  ck_assert_ptr_nonnull(tc);
  lv_varstore *vs = lv_varstore_create();
  lv_task *task = NULL;
  lv_status s = tc->create(tp, lv_params_sub(p, "input"), vs, &task);
  ck_assert_msg(s == NULL, "%s", lv_status_msg(s));
  ck_assert(lv_varstore_finalize(vs, 1) == NULL);
  static const struct { const char *name; int rank; int64_t d[4]; } want[] = {
      {"lenet5/conv0/w/var", 4, {5, 5, 1, 20}},   {"lenet5/conv1/w/var", 4, {5, 5, 20, 50}},
      {"lenet5/fc/w/var", 2, {2450, 300}},        {"lenet5/fc/b/var", 1, {300}},
      {"lenet5/softmax/weight_0/var", 2, {300, 10}}, {"lenet5/softmax/bias_0/var", 1, {10}},
  };
  ck_assert_int_eq(lv_varstore_count(vs), (int)(sizeof want / sizeof want[0]));
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    lv_var *v = lv_varstore_find(vs, want[i].name);
    ck_assert_msg(v != NULL, "missing %s", want[i].name);
    ck_assert_int_eq(v->value.dtype, LV_F32);
    ck_assert_int_eq(v->value.shape.rank, want[i].rank);
    for (int d = 0; d < want[i].rank; d++) ck_assert_int_eq(v->value.shape.d[d], want[i].d[d]);
    ck_assert(v->trainable);
  }
  /* Biases start at zero; weights are Xavier within sqrt(6/(fan_in+fan_out)). */
  lv_var *b = lv_varstore_find(vs, "lenet5/fc/b/var");
  for (int i = 0; i < 300; i++) ck_assert(lv_f32(&b->value)[i] == 0.0f);
  lv_var *w = lv_varstore_find(vs, "lenet5/fc/w/var");
  double lim = 1.000001 * sqrt(6.0 / (2450 + 300)), maxabs = 0;
  for (int i = 0; i < 2450 * 300; i++) maxabs = fmax(maxabs, fabs(lv_f32(&w->value)[i]));
  ck_assert(maxabs <= lim && maxabs > 0.9 * lim);
  task->cls->destroy(task);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

START_TEST(test_lenet5_fprop_shapes_and_metrics) {
  lv_params *p = lenet5_params("Test", NULL);
  const lv_params *tp = lv_params_sub(p, "task");
  const lv_task_class *tc = lv_task_class_find(lv_params_str(tp, "cls"));
  lv_varstore *vs = lv_varstore_create();
  lv_task *task = NULL;
  ck_assert(tc->create(tp, lv_params_sub(p, "input"), vs, &task) == NULL);
  ck_assert(lv_varstore_finalize(vs, 1) == NULL);
  enum { B = 7 };
  static uint8_t raw[B * 28 * 28];
  int32_t labels[B];
  float weights[B];
  for (int i = 0; i < B * 28 * 28; i++) raw[i] = (uint8_t)(i * 37 % 251);
  for (int i = 0; i < B; i++) {
    labels[i] = i % 10;
    weights[i] = 1.0f;
  }
  lv_tensor traw = lv_tensor_view(LV_U8, lv_shape4(B, 28, 28, 1), raw);
  lv_tensor tlabel = lv_tensor_view(LV_I32, lv_shape1(B), labels);
  lv_tensor tweight = lv_tensor_view(LV_F32, lv_shape1(B), weights);
  lv_batch b;
  lv_batch_init(&b);
  ck_assert(lv_nmap_set(&b.map, "raw", &traw) == NULL);
  ck_assert(lv_nmap_set(&b.map, "label", &tlabel) == NULL);
  ck_assert(lv_nmap_set(&b.map, "weight", &tweight) == NULL);
  b.size = B;
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_metrics m = {0};
  ck_assert(tc->fprop(task, g, &b, true, 0, &m));
  const char *names[] = {"loss", "log_pplx", "num_preds", "accuracy", "acc5", "error", "error5"};
  ck_assert_int_eq(m.n, 7);
  for (int i = 0; i < 7; i++) ck_assert_str_eq(m.name[i], names[i]);
  double loss = lv_metrics_value(&m, 0);
  ck_assert(loss > 0.5 && loss < 10);  /* about ln(10) for a fresh model */
  double acc = lv_metrics_value(&m, 3), err = lv_metrics_value(&m, 5);
  ck_assert(fabs(acc + err - 1.0) < 1e-6);
  ck_assert(lv_metrics_value(&m, 2) == B);
  lv_tensor *pred = lv_nmap_get(&m.per_example, "predictions");
  ck_assert_ptr_nonnull(pred);
  ck_assert_int_eq(pred->shape.d[0], B);
  lv_metrics_free(&m);
  lv_batch_free(&b);
  lv_graph_destroy(g);
  task->cls->destroy(task);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

START_TEST(test_model_params_resolution) {
  lv_params *p = lenet5_params("Train", "train.max_steps: 500; task.train.learning_rate: 3e-4");
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), 500);
  ck_assert(lv_params_float(p, "task.train.learning_rate") == 3e-4);
  /* SingleTaskModel copied task.train.save_interval_seconds to the model level. */
  ck_assert_int_eq(lv_params_int(p, "train.save_interval_seconds"), 10);
  ck_assert_str_eq(lv_params_str(p, "input.cls"), "MnistTrainInput");
  ck_assert_int_eq(lv_params_int(p, "input.batch_size"), 256);
  ck_assert(lv_params_bool(p, "input.repeat"));
  ck_assert_str_eq(lv_params_str(p, "task.train.lr_schedule.cls"), "LinearRampupExponentialDecayScaledByNumSplitSchedule");
  ck_assert(!lv_params_has(p, "datasets"));
  ck_assert(lv_params_is_frozen(p));
  lv_params_free(p);
  p = lenet5_params("Test", NULL);
  ck_assert_str_eq(lv_params_str(p, "input.cls"), "MnistTestInput");
  ck_assert(!lv_params_bool(p, "input.repeat"));
  lv_params_free(p);
}
END_TEST

static lv_status build(const char *model, const char *dataset, const char *override) {
  lv_model_options o;
  lv_model_options_init(&o);
  o.model = model;
  o.dataset = dataset;
  o.experiments_dir = "experiments";
  o.params_override = override;
  lv_params *p = NULL;
  lv_status s = lv_model_params_build(&o, &p);
  lv_params_free(p);
  return s;
}

START_TEST(test_model_errors) {
  lv_status s = build("image.mnist.LeNet6", "Train", NULL);
  ck_assert(s != NULL);
  ck_assert_int_eq(lv_status_exit_code(s), 2);
  ck_assert_msg(strstr(lv_status_msg(s), "image.mnist.LeNet5") != NULL, "%s", lv_status_msg(s)); /* lists known */
  lv_status_free(s);
  s = build("image.mnist.LeNet5", "Devother", NULL);
  ck_assert(s != NULL && strstr(lv_status_msg(s), "available datasets are: [Train, Dev, Test]"));
  lv_status_free(s);
  s = build("image.mnist.LeNet5", "Train", "task.train.learnin_rate: 3e-4");
  ck_assert(s != NULL && lv_status_exit_code(s) == 2);
  ck_assert_msg(strstr(lv_status_msg(s), "learning_rate") && strstr(lv_status_msg(s), "<command line>"),
                "%s", lv_status_msg(s));
  lv_status_free(s);
  s = build("image.mnist.LeNet5", "Train", "train.max_steps: many");
  ck_assert(s != NULL && lv_status_exit_code(s) == 2);
  lv_status_free(s);
}
END_TEST

START_TEST(test_layer_param_errors) {
  lv_params *p = lv_fc_layer_params();
  ck_assert(lv_params_set_string(p, "name", "fc") == NULL);
  ck_assert(lv_params_set_int(p, "input_dim", 4) == NULL);
  ck_assert(lv_params_set_int(p, "output_dim", 3) == NULL);
  ck_assert(lv_params_set_string(p, "activation", "RELUU") == NULL);
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_projection_layer l;
  lv_status s = lv_projection_layer_create(&l, p, "top", vs);
  ck_assert(s != NULL);
  ck_assert_msg(strstr(lv_status_msg(s), "top/fc: activation: unknown activation \"RELUU\""), "%s", lv_status_msg(s));
  lv_status_free(s);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

START_TEST(test_conv_pool_shapes) {
  lv_params *cp = lv_conv_layer_params(), *pp = lv_pooling_layer_params();
  int64_t fs[4] = {3, 3, 2, 4}, st[2] = {2, 2}, win[2] = {2, 2};
  ck_assert(lv_params_set_string(cp, "name", "c") == NULL);
  ck_assert(lv_params_set_list(cp, "filter_shape", lv_pvalue_ints(4, fs)) == NULL);
  ck_assert(lv_params_set_list(cp, "filter_stride", lv_pvalue_ints(2, st)) == NULL);
  ck_assert(lv_params_set_bool(cp, "batch_norm", true) == NULL);
  ck_assert(lv_params_set_string(pp, "name", "p") == NULL);
  ck_assert(lv_params_set_list(pp, "window_shape", lv_pvalue_ints(2, win)) == NULL);
  ck_assert(lv_params_set_list(pp, "window_stride", lv_pvalue_ints(2, win)) == NULL);
  lv_params_freeze(cp);
  lv_params_freeze(pp);
  lv_varstore *vs = lv_varstore_create();
  lv_conv_layer c;
  lv_pooling_layer pl;
  memset(&c, 0, sizeof c);
  ck_assert(lv_conv_layer_create(&c, cp, "m", vs) == NULL);
  ck_assert(lv_pooling_layer_create(&pl, pp, "m", vs) == NULL);
  ck_assert(lv_varstore_finalize(vs, 3) == NULL);
  ck_assert_ptr_nonnull(lv_varstore_find(vs, "m/c/w/var"));
  ck_assert_ptr_nonnull(lv_varstore_find(vs, "m/c/moving_mean/var"));
  ck_assert(!lv_varstore_find(vs, "m/c/moving_mean/var")->trainable);
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, true);
  lv_tensor *x = lv_graph_zeros(g, LV_F32, lv_shape4(2, 9, 9, 2));
  for (int i = 0; i < 2 * 9 * 9 * 2; i++) lv_f32(x)[i] = (float)((i * 7) % 13) - 6.0f;
  lv_tensor *y = lv_conv_layer_fprop(&c, g, x);
  ck_assert_ptr_nonnull(y);
  lv_shape want = lv_conv_layer_out_shape(&c, x->shape);
  ck_assert(lv_shape_eq(&y->shape, &want));
  ck_assert_int_eq(y->shape.d[1], 5);
  lv_tensor *z = lv_pooling_layer_fprop(&pl, g, y);
  lv_shape wz = lv_pooling_layer_out_shape(&pl, y->shape);
  ck_assert(lv_shape_eq(&z->shape, &wz));
  ck_assert_int_eq(z->shape.d[1], 3);
  lv_graph_destroy(g);
  lv_conv_layer_destroy(&c);
  lv_varstore_destroy(vs);
  lv_params_free(cp);
  lv_params_free(pp);
}
END_TEST

/* PoolingLayer as experiment files name it (cls "PoolingLayer", built through the
 * registry): 2x2 windows with stride 2 on a known [1, 4, 4, 1] input, MAX and AVG. */
START_TEST(test_pooling_layer_by_class) {
  static const char *const kTypes[2] = {"MAX", "AVG"};
  static const float kWant[2][4] = {{5, 7, 13, 15}, {2.5f, 4.5f, 10.5f, 12.5f}};
  lv_layers_register_all();
  for (int k = 0; k < 2; k++) {
    lv_params *p = NULL;
    int64_t win[2] = {2, 2};
    EXPECT_OK(lv_registry_instantiate("PoolingLayer", &p));
    EXPECT_OK(lv_params_set_string(p, "name", "pool"));
    EXPECT_OK(lv_params_set_list(p, "window_shape", lv_pvalue_ints(2, win)));
    EXPECT_OK(lv_params_set_list(p, "window_stride", lv_pvalue_ints(2, win)));
    EXPECT_OK(lv_params_set_string(p, "pooling_type", kTypes[k]));
    lv_params_freeze(p);
    lv_varstore *vs = lv_varstore_create();
    lv_layer *l = NULL;
    EXPECT_OK(lv_layer_create(p, NULL, vs, &l));
    EXPECT_OK(lv_varstore_finalize(vs, 1));
    ck_assert_int_eq(lv_varstore_count(vs), 0);
    lv_graph *g = lv_graph_create(0);
    lv_tensor *x = lv_graph_zeros(g, LV_F32, lv_shape4(1, 4, 4, 1));
    for (int i = 0; i < 16; i++) lv_f32(x)[i] = (float)i;
    lv_tensor *y = lv_layer_fprop_act(l, g, x);
    ck_assert_msg(y, "%s", lv_status_msg(lv_graph_status(g)));
    ck_assert(y->shape.rank == 4 && y->shape.d[1] == 2 && y->shape.d[2] == 2 && y->shape.d[3] == 1);
    for (int i = 0; i < 4; i++)
      ck_assert_msg(lv_f32(y)[i] == kWant[k][i], "%s pool [%d] = %g, want %g", kTypes[k], i, lv_f32(y)[i],
                    kWant[k][i]);
    lv_graph_destroy(g);
    lv_layer_free(l);
    lv_varstore_destroy(vs);
    lv_params_free(p);
  }
}
END_TEST

int main(void) {
  lv_tasks_register_all();
  Suite *s = suite_create("layers");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_lenet5_variables);
  tcase_add_test(tc, test_lenet5_fprop_shapes_and_metrics);
  tcase_add_test(tc, test_model_params_resolution);
  tcase_add_test(tc, test_model_errors);
  tcase_add_test(tc, test_layer_param_errors);
  tcase_add_test(tc, test_conv_pool_shapes);
  tcase_add_test(tc, test_pooling_layer_by_class);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
