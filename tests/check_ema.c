/* Moving averages of variables (optim/ema.h): Lingvo's ema_test.py vector, the decay
 * rule, ema_schedule, which variables get a shadow, the params binding and its errors,
 * and the host copies a checkpoint saves. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_util.h"
#include "core/backend.h"
#include "models/task.h"
#include "optim/ema.h"
#include "optim/optim_params.h"
#include "params/params.h"

/* The BatchNormLayer variables of ema_test.py's task: beta (trainable) and the moving
 * mean (a moving statistic), both [1] and 0 at the start. */
typedef struct bn_vars {
  lv_varstore *vs;
  lv_var *beta, *mean;
  lv_var *list[2];
} bn_vars;

static void bn_vars_make(bn_vars *b) {
  b->vs = lv_varstore_create();
  lv_var_init zero = {LV_INIT_CONSTANT, 0.0};
  EXPECT_OK(lv_varstore_add(b->vs, "base_mdl/a/beta/var", LV_F32, lv_shape1(1), zero, true, &b->beta));
  EXPECT_OK(lv_varstore_add(b->vs, "base_mdl/a/moving_mean/var", LV_F32, lv_shape1(1), zero, false, &b->mean));
  EXPECT_OK(lv_varstore_finalize(b->vs, 1));
  b->list[0] = b->beta;
  b->list[1] = b->mean;
}

static void set1(lv_var *v, float x) { EXPECT_OK(lv_tensor_from_host(&v->value, &x)); }

static float shadow_value(lv_ema *e, int i) {
  lv_ema_to_host(e);
  return lv_ema_shadow_host(e, i)[0];
}

/* ema_test.py testBatchNormLayer: decay 0.9, global step 100, beta 0.2 and moving mean
 * 0.03 after init; one EMA update gives 0.02 and 0.003 (d = min(0.9, 101/110) = 0.9). */
START_TEST(test_ema_test_vector) {
  bn_vars b;
  bn_vars_make(&b);
  lv_ema *e = NULL;
  EXPECT_OK(lv_ema_create_for_vars(0.9, NULL, true, lv_backend_get(lv_device_host()), b.list, 2, &e));
  ck_assert_int_eq(lv_ema_num_vars(e), 2);
  const char *name;
  lv_ema_shadow(e, 0, &name, NULL, NULL);
  ck_assert_str_eq(name, "base_mdl/a/beta/var/ExponentialMovingAverage");
  lv_ema_shadow(e, 1, &name, NULL, NULL);
  ck_assert_str_eq(name, "base_mdl/a/moving_mean/var/ExponentialMovingAverage");
  set1(b.beta, 0.2f);
  set1(b.mean, 0.03f);
  ck_assert(lv_ema_decay_at(e, 100) == 0.9f);
  EXPECT_OK(lv_ema_apply(e, 100));
  ck_assert_msg(fabsf(shadow_value(e, 0) - 0.02f) < 1e-8f, "EMA(beta) %.9g, want 0.02", shadow_value(e, 0));
  ck_assert_msg(fabsf(shadow_value(e, 1) - 0.003f) < 1e-9f, "EMA(mean) %.9g, want 0.003", shadow_value(e, 1));
  /* TF's assign_moving_average in float32: s -= (s - v) * (1 - d). */
  float a = 1.0f - 0.9f, want = 0.0f - (0.0f - 0.2f) * a;
  ck_assert(shadow_value(e, 0) == want);
  lv_ema_free(e);
  lv_varstore_destroy(b.vs);
}
END_TEST

/* Without ema_decay_moving_vars the moving statistics have no shadow (ema_test's
 * testExponentialMovingAverage: ema.average(mean) is None). */
START_TEST(test_ema_trainable_only) {
  bn_vars b;
  bn_vars_make(&b);
  lv_ema *e = NULL;
  EXPECT_OK(lv_ema_create_for_vars(0.9, NULL, false, lv_backend_get(lv_device_host()), b.list, 2, &e));
  ck_assert_int_eq(lv_ema_num_vars(e), 1);
  const char *name;
  lv_ema_shadow(e, 0, &name, NULL, NULL);
  ck_assert_str_eq(name, "base_mdl/a/beta/var/ExponentialMovingAverage");
  lv_ema_free(e);
  lv_varstore_destroy(b.vs);
}
END_TEST

/* d = min(ema_decay, (1 + step) / (10 + step)), so early steps follow the weights fast;
 * shadows start at the weights, and a reset copies them again. */
START_TEST(test_ema_decay_rule_and_reset) {
  bn_vars b;
  bn_vars_make(&b);
  lv_ema *e = NULL;
  EXPECT_OK(lv_ema_create_for_vars(0.999, NULL, false, lv_backend_get(lv_device_host()), b.list, 2, &e));
  ck_assert(lv_ema_decay_at(e, 0) == 1.0f / 10.0f);
  ck_assert(lv_ema_decay_at(e, 10) == 11.0f / 20.0f);
  ck_assert(lv_ema_decay_at(e, 1000000) == 0.999f);
  ck_assert(shadow_value(e, 0) == 0.0f);
  set1(b.beta, 1.0f);
  EXPECT_OK(lv_ema_apply(e, 0)); /* d = 0.1: 90% of the way to the weight */
  ck_assert(shadow_value(e, 0) == 0.0f - (0.0f - 1.0f) * (1.0f - 0.1f));
  for (int64_t step = 1; step < 200; step++) lv_ema_apply(e, step);
  ck_assert_msg(fabsf(shadow_value(e, 0) - 1.0f) < 1e-6f, "a constant weight's average tends to it: %.9g",
                shadow_value(e, 0));
  set1(b.beta, -3.0f);
  lv_ema_reset(e);
  ck_assert(shadow_value(e, 0) == -3.0f);
  /* The host copies round trip (a checkpoint save and restore). */
  lv_ema_to_host(e);
  lv_ema_shadow_host(e, 0)[0] = 7.5f;
  lv_ema_from_host(e);
  ck_assert(shadow_value(e, 0) == 7.5f);
  lv_ema_free(e);
  lv_varstore_destroy(b.vs);
}
END_TEST

static lv_params *train_with(const char *text) {
  lv_tasks_register_all();
  lv_params *p = lv_task_base_params("BaseTask");
  EXPECT_OK(lv_params_from_text(p, text, "check_ema"));
  return p;
}

/* The params binding: off by default, ema_decay_moving_vars, and ema_schedule replacing
 * the decay (ema_test's schedule case: frozen at decay 1.0, 0.9, then 0.0 copies the
 * variable). */
START_TEST(test_ema_params) {
  bn_vars b;
  bn_vars_make(&b);
  const lv_backend *be = lv_backend_get(lv_device_host());
  lv_params *p = train_with("");
  lv_ema *e = NULL;
  EXPECT_OK(lv_ema_from_params(lv_params_sub(p, "train"), 1, be, b.list, 2, &e));
  ck_assert_ptr_null(e);
  lv_params_free(p);

  p = train_with("train.ema_decay : 0.9\ntrain.ema_decay_moving_vars : True\n");
  EXPECT_OK(lv_ema_from_params(lv_params_sub(p, "train"), 1, be, b.list, 2, &e));
  ck_assert_int_eq(lv_ema_num_vars(e), 2);
  lv_ema_free(e);
  lv_params_free(p);

  p = train_with("train.ema_decay : 0.9\n"
                 "train.ema_schedule.cls : 'PiecewiseConstantSchedule'\n"
                 "train.ema_schedule.boundaries : [50, 150]\n"
                 "train.ema_schedule.values : [1.0, 0.9, 0.0]\n");
  EXPECT_OK(lv_ema_from_params(lv_params_sub(p, "train"), 1, be, b.list, 2, &e));
  ck_assert_int_eq(lv_ema_num_vars(e), 1);
  set1(b.beta, 0.2f);
  EXPECT_OK(lv_ema_apply(e, 1));
  ck_assert(shadow_value(e, 0) == 0.0f);
  EXPECT_OK(lv_ema_apply(e, 100));
  ck_assert(shadow_value(e, 0) == 0.0f - (0.0f - 0.2f) * (1.0f - 0.9f));
  EXPECT_OK(lv_ema_apply(e, 200));
  ck_assert(shadow_value(e, 0) == 0.2f);
  lv_ema_free(e);
  lv_params_free(p);

  /* A schedule's decay outside [0, 1] is an error at the step that gives it. */
  p = train_with("train.ema_decay : 0.9\n"
                 "train.ema_schedule.cls : 'PiecewiseConstantSchedule'\n"
                 "train.ema_schedule.boundaries : [50]\n"
                 "train.ema_schedule.values : [0.5, 2.0]\n");
  EXPECT_OK(lv_ema_from_params(lv_params_sub(p, "train"), 1, be, b.list, 2, &e));
  EXPECT_OK(lv_ema_apply(e, 1));
  float before = shadow_value(e, 0);
  EXPECT_ERR(lv_ema_apply(e, 60), LV_ERR_INVALID, "the decay at step 60 is 2", "[0, 1]");
  ck_assert(shadow_value(e, 0) == before);
  lv_ema_free(e);
  lv_params_free(p);
  p = train_with("train.ema_decay : 0.9\ntrain.ema_schedule.cls : 'DevBasedSchedule'\n");
  EXPECT_ERR(lv_ema_from_params(lv_params_sub(p, "train"), 1, be, b.list, 2, &e), LV_ERR_INVALID,
             "task.train.ema_schedule", "lr_schedule only");
  ck_assert_ptr_null(e);
  lv_params_free(p);

  /* With ema_decay 0 the schedule is still checked, and a good one is refused: alone it
   * would keep no averages without a word. */
  static const char *const off[][2] = {
      {"train.ema_schedule.cls : 'DevBasedSchedule'\n", "lr_schedule only"},
      {"train.ema_schedule.cls : 'Adam'\n", "Adam"},
      {"train.ema_schedule.cls : 'PiecewiseConstantSchedule'\ntrain.ema_schedule.boundaries : [50]\n"
       "train.ema_schedule.values : [0.5, 2.0]\n",
       "ema_decay > 0"},
  };
  for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
    p = train_with(off[i][0]);
    EXPECT_ERR(lv_ema_from_params(lv_params_sub(p, "train"), 1, be, b.list, 2, &e), LV_ERR_INVALID,
               "task.train.ema_schedule", off[i][1]);
    ck_assert_ptr_null(e);
    lv_params_free(p);
  }

  p = train_with("train.ema_decay : 1.0\n");
  EXPECT_ERR(lv_ema_from_params(lv_params_sub(p, "train"), 1, be, b.list, 2, &e), LV_ERR_INVALID,
             "task.train.ema_decay", "(0, 1)");
  ck_assert_ptr_null(e);
  lv_params_free(p);
  lv_varstore_destroy(b.vs);
}
END_TEST

/* The update kernel is TF's form, not d * s + (1 - d) * v (they round differently). */
START_TEST(test_ema_kernel_form) {
  const lv_backend *be = lv_backend_get(lv_device_host());
  enum { N = 1000 };
  static float v[N], s[N], want[N];
  for (int i = 0; i < N; i++) {
    v[i] = sinf((float)i) * 3.0f;
    s[i] = cosf((float)i * 0.7f);
    want[i] = s[i] - (s[i] - v[i]) * 0.001f;
  }
  be->kernels->optim_ema(be->ctx, N, 0.001f, v, s);
  for (int i = 0; i < N; i++) ck_assert_msg(s[i] == want[i], "element %d: %.9g, want %.9g", i, s[i], want[i]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ema");
  TCase *c = tcase_create("ema");
  tcase_add_test(c, test_ema_test_vector);
  tcase_add_test(c, test_ema_trainable_only);
  tcase_add_test(c, test_ema_decay_rule_and_reset);
  tcase_add_test(c, test_ema_params);
  tcase_add_test(c, test_ema_kernel_form);
  suite_add_tcase(s, c);
  return lv_test_run(s);
}
