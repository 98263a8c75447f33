/* Optimizers (TF1 update rules, slot names) and the learner (Lingvo's learner_test,
 * base_model_test and py_utils_test vectors; reference §7.1). */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "optim/learner.h"
#include "optim/optim_var.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

#define CLOSE(got, want, tol)                                                             \
  do {                                                                                    \
    double g_ = (got), w_ = (want);                                                       \
    ck_assert_msg(fabs(g_ - w_) <= (tol) * (1 + fabs(w_)), "%s: got %.9g, want %.9g", #got, \
                  g_, w_);                                                                \
  } while (0)

#define OK(expr)                                                                     \
  do {                                                                               \
    lv_status s_ = (expr);                                                           \
    ck_assert_msg(s_ == NULL, "%s failed: %s", #expr, s_ ? lv_status_msg(s_) : ""); \
  } while (0)

static void expect_err(lv_status st, lv_code code, const char *needle) {
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(lv_status_code(st), code);
  ck_assert_msg(strstr(lv_status_msg(st), needle), "message '%s' lacks '%s'", lv_status_msg(st),
                needle);
  lv_status_free(st);
}

static lv_optimizer *make_opt(lv_optimizer_config c) {
  lv_optimizer *o = NULL;
  OK(lv_optimizer_create(&c, lv_cpu_backend(), &o));
  return o;
}

static lv_schedule *make_sched(lv_schedule_type t) {
  lv_schedule_config c = lv_schedule_defaults(t);
  lv_schedule *s = NULL;
  OK(lv_schedule_create(&c, 0, &s));
  return s;
}

/* ---------------- optimizers ---------------- */

START_TEST(test_optimizer_names) {
  for (int i = 0; i < LV_OPT_COUNT; i++) {
    lv_optimizer_type t;
    ck_assert(lv_optimizer_type_from_name(lv_optimizer_type_names[i], &t));
    ck_assert_int_eq(t, i);
  }
  lv_optimizer_type t;
  ck_assert(!lv_optimizer_type_from_name("Adamw", &t));
  lv_optimizer_config a = lv_optimizer_defaults(LV_OPT_ADAM);
  ck_assert(a.beta1 == 0.9 && a.beta2 == 0.999 && a.epsilon == 1e-6);
  lv_optimizer_config r = lv_optimizer_defaults(LV_OPT_RMSPROP);
  ck_assert(r.decay == 0.9 && r.momentum == 0.9 && r.epsilon == 1.0);
  lv_optimizer_config d = lv_optimizer_defaults(LV_OPT_ADADELTA);
  ck_assert(d.decay == 0.95 && d.epsilon == 1e-8);
  ck_assert(lv_optimizer_defaults(LV_OPT_MOMENTUM).alpha == 0.9);
  ck_assert(lv_optimizer_defaults(LV_OPT_ADAGRAD).initial_accumulator_value == 1.0);
}
END_TEST

/* Every class of the table: defaults from its params, TF's slot names "<var>/<slot>",
 * its non-slot scalars, and one update of each that moves the variable. */
START_TEST(test_optimizer_classes) {
  for (int t = 0; t < LV_OPT_COUNT; t++) {
    const lv_optimizer_class *k = lv_optimizer_class_of((lv_optimizer_type)t);
    ck_assert((k->update != NULL) != (k->update_shaped != NULL));
    ck_assert((k->slot_shapes != NULL) == (k->update_shaped != NULL));
    ck_assert(k->nslots >= 0 && k->nslots <= LV_OPT_MAX_SLOTS);
    ck_assert(k->nnonslot >= 0 && k->nnonslot <= LV_OPT_MAX_NONSLOT);
    lv_optimizer_config c = lv_optimizer_defaults((lv_optimizer_type)t);
    ck_assert_int_eq(c.type, t);
    for (int i = 0; i < k->nparams; i++) {
      const lv_optim_param *p = &k->params[i];
      const char *f = (const char *)&c + p->off;
      if (p->kind == LV_OPTP_BOOL) ck_assert(*(const bool *)f == (p->def != 0));
      else ck_assert(*(const double *)f == p->def);
    }
    lv_optimizer *o = make_opt(c);
    OK(lv_optimizer_add_var(o, "fc/w/var", 3, NULL));
    /* Shape-dependent slots (Adafactor, beta1 0): one accumulator v for a vector. */
    const int nslots = k->slot_shapes ? 1 : k->nslots;
    ck_assert_int_eq(lv_optimizer_num_slot_vars(o), nslots);
    for (int i = 0; i < nslots; i++) {
      const char *name;
      int64_t n;
      lv_optimizer_slot_var(o, i, &name, NULL, &n);
      char want[128];
      snprintf(want, sizeof want, "fc/w/var/%s", k->slot_names[i]);
      ck_assert_str_eq(name, want);
      ck_assert_int_eq(n, 3);
      ck_assert_ptr_nonnull(lv_optimizer_find_slot(o, want, NULL));
    }
    ck_assert_int_eq(lv_optimizer_num_nonslot(o), k->nnonslot);
    for (int i = 0; i < k->nnonslot; i++) {
      const char *name;
      float *v;
      lv_optimizer_nonslot(o, i, &name, &v);
      ck_assert_str_eq(name, k->nonslot_names[i]);
    }
    float w[3] = {1, 2, 3}, g[3] = {0.5f, -0.5f, 1};
    float *ws[1] = {w};
    const float *gs[1] = {g};
    OK(lv_optimizer_apply(o, 0.1f, 1, ws, gs));
    ck_assert_msg(w[0] < 1 && w[1] > 2 && w[2] < 3, "%s: %g %g %g", lv_optimizer_type_names[t], w[0], w[1], w[2]);
    lv_optimizer_free(o);
  }
}
END_TEST

/* The range checks of the class table name the class, the param and the value; NaN is
 * never in range. */
START_TEST(test_optimizer_ranges) {
  lv_optimizer *o = NULL;
  lv_optimizer_config r = lv_optimizer_defaults(LV_OPT_RMSPROP);
  r.decay = 1.5;
  expect_err(lv_optimizer_create(&r, lv_cpu_backend(), &o), LV_ERR_INVALID, "RMSProp: decay must be in [0, 1], found 1.5");
  lv_optimizer_config m = lv_optimizer_defaults(LV_OPT_MOMENTUM);
  m.alpha = -1;
  expect_err(lv_optimizer_create(&m, lv_cpu_backend(), &o), LV_ERR_INVALID, "Momentum: alpha must be >= 0, found -1");
  lv_optimizer_config d = lv_optimizer_defaults(LV_OPT_ADADELTA);
  d.epsilon = 0;
  expect_err(lv_optimizer_create(&d, lv_cpu_backend(), &o), LV_ERR_INVALID, "AdaDelta: epsilon must be > 0, found 0");
  lv_optimizer_config a = lv_optimizer_defaults(LV_OPT_ADAM);
  a.beta2 = NAN;
  expect_err(lv_optimizer_create(&a, lv_cpu_backend(), &o), LV_ERR_INVALID, "Adam: beta2 must be in [0, 1)");
  a = lv_optimizer_defaults(LV_OPT_ADAM);
  a.epsilon = 0; /* TF's Adam accepts epsilon 0 */
  lv_optimizer_free(make_opt(a));
  ck_assert_ptr_null(o);
}
END_TEST

START_TEST(test_optimizer_validation) {
  lv_optimizer *o = NULL;
  lv_optimizer_config a = lv_optimizer_defaults(LV_OPT_ADAM);
  a.beta1 = 1.0;
  expect_err(lv_optimizer_create(&a, lv_cpu_backend(), &o), LV_ERR_INVALID, "beta1");
  lv_optimizer_config g = lv_optimizer_defaults(LV_OPT_ADAGRAD);
  g.initial_accumulator_value = 0;
  expect_err(lv_optimizer_create(&g, lv_cpu_backend(), &o), LV_ERR_INVALID, "initial_accumulator_value");
  ck_assert_ptr_null(o);
  lv_optimizer *m = make_opt(lv_optimizer_defaults(LV_OPT_MOMENTUM));
  OK(lv_optimizer_add_var(m, "w", 3, NULL));
  expect_err(lv_optimizer_add_var(m, "w", 3, NULL), LV_ERR_INTERNAL, "added twice");
  float w[3] = {0}, gr[3] = {0};
  float *wp[] = {w, w};
  const float *gp[] = {gr, gr};
  expect_err(lv_optimizer_apply(m, 0.1f, 2, wp, gp), LV_ERR_INTERNAL, "2 variables, 1 registered");
  lv_optimizer_free(m);
}
END_TEST

/* TF1 Adam, 3 steps, against values computed by hand (double precision) from
 * lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * var -= lr_t * m / (sqrt(v) + eps) with lr 0.1, b1 0.9, b2 0.999, eps 1e-6. */
START_TEST(test_adam_three_steps) {
  lv_optimizer *o = make_opt(lv_optimizer_defaults(LV_OPT_ADAM));
  int idx = -1;
  OK(lv_optimizer_add_var(o, "fc/w/var", 3, &idx));
  ck_assert_int_eq(idx, 0);
  ck_assert_int_eq(lv_optimizer_num_slot_vars(o), 2);
  const char *name;
  float *data;
  int64_t n;
  lv_optimizer_slot_var(o, 0, &name, &data, &n);
  ck_assert_str_eq(name, "fc/w/var/Adam");
  ck_assert_int_eq(n, 3);
  ck_assert(data[0] == 0 && data[2] == 0);
  lv_optimizer_slot_var(o, 1, &name, NULL, NULL);
  ck_assert_str_eq(name, "fc/w/var/Adam_1");
  ck_assert_int_eq(lv_optimizer_num_nonslot(o), 2);
  float *b1p, *b2p;
  lv_optimizer_nonslot(o, 0, &name, &b1p);
  ck_assert_str_eq(name, "beta1_power");
  lv_optimizer_nonslot(o, 1, &name, &b2p);
  ck_assert_str_eq(name, "beta2_power");
  CLOSE(*b1p, 0.9, 1e-7);
  CLOSE(*b2p, 0.999, 1e-7);

  float w[3] = {1.0f, -2.0f, 0.5f};
  const float g[3][3] = {{0.5f, -1.0f, 2.0f}, {0.25f, 1.0f, -3.0f}, {-0.5f, 0.0f, 1.0f}};
  const double want[3][3] = {{0.900006324, -1.900003162, 0.400001581},
                             {0.806793635, -1.905266202, 0.424771545},
                             {0.795715795, -1.909334548, 0.426138205}};
  for (int t = 0; t < 3; t++) {
    float *wp[] = {w};
    const float *gp[] = {g[t]};
    OK(lv_optimizer_apply(o, 0.1f, 1, wp, gp));
    for (int i = 0; i < 3; i++) CLOSE(w[i], want[t][i], 2e-6);
  }
  float *m = lv_optimizer_find_slot(o, "fc/w/var/Adam", NULL);
  float *v = lv_optimizer_find_slot(o, "fc/w/var/Adam_1", NULL);
  ck_assert_ptr_nonnull(m);
  ck_assert_ptr_nonnull(v);
  ck_assert_ptr_null(lv_optimizer_find_slot(o, "fc/w/var/Momentum", NULL));
  CLOSE(m[0], 0.013, 1e-6);
  CLOSE(m[2], -0.008, 1e-6);
  /* float32's 1 - 0.999f is 0.99998713e-3: v drifts from the double values by ~1e-5
   * relative. */
  ck_assert(fabs(v[0] - 0.00056193775) <= 3e-5 * 0.00056193775);
  ck_assert(fabs(v[2] - 0.013983004) <= 3e-5 * 0.013983004);
  CLOSE(*b1p, pow(0.9, 4), 1e-6);
  CLOSE(*b2p, pow(0.999, 4), 1e-6);
  lv_optimizer_free(o);
}
END_TEST

START_TEST(test_sgd) {
  lv_optimizer *o = make_opt(lv_optimizer_defaults(LV_OPT_SGD));
  OK(lv_optimizer_add_var(o, "w", 2, NULL));
  ck_assert_int_eq(lv_optimizer_num_slot_vars(o), 0);
  ck_assert_int_eq(lv_optimizer_num_nonslot(o), 0);
  float w[2] = {1, 2}, g[2] = {10, -20};
  float *wp[] = {w};
  const float *gp[] = {g};
  OK(lv_optimizer_apply(o, 0.01f, 1, wp, gp));
  CLOSE(w[0], 0.9, 1e-7);
  CLOSE(w[1], 2.2, 1e-7);
  lv_optimizer_free(o);
}
END_TEST

START_TEST(test_momentum) {
  for (int nesterov = 0; nesterov < 2; nesterov++) {
    lv_optimizer_config c = lv_optimizer_defaults(LV_OPT_MOMENTUM);
    c.use_nesterov = nesterov;
    lv_optimizer *o = make_opt(c);
    OK(lv_optimizer_add_var(o, "x/var", 1, NULL));
    const char *name;
    lv_optimizer_slot_var(o, 0, &name, NULL, NULL);
    ck_assert_str_eq(name, "x/var/Momentum");
    float w[1] = {1.0f}, g[1] = {1.0f};
    float *wp[] = {w};
    const float *gp[] = {g};
    OK(lv_optimizer_apply(o, 0.1f, 1, wp, gp));
    /* accum = 0.9 accum + g; plain: w -= lr accum; nesterov: w -= lr g + lr 0.9 accum. */
    CLOSE(w[0], nesterov ? 0.81 : 0.9, 1e-7);
    OK(lv_optimizer_apply(o, 0.1f, 1, wp, gp));
    CLOSE(w[0], nesterov ? 0.539 : 0.71, 1e-7);
    CLOSE(*lv_optimizer_find_slot(o, "x/var/Momentum", NULL), 1.9, 1e-7);
    lv_optimizer_free(o);
  }
}
END_TEST

START_TEST(test_adagrad) {
  lv_optimizer_config c = lv_optimizer_defaults(LV_OPT_ADAGRAD);
  c.initial_accumulator_value = 0.1;
  lv_optimizer *o = make_opt(c);
  OK(lv_optimizer_add_var(o, "v", 5, NULL));
  int64_t n;
  float *acc = lv_optimizer_find_slot(o, "v/Adagrad", &n);
  ck_assert_ptr_nonnull(acc);
  ck_assert_int_eq(n, 5);
  for (int i = 0; i < 5; i++) ck_assert(acc[i] == 0.1f);
  float w[5] = {1, 1, 1, 1, 1}, g[5] = {2, 2, 2, 2, 0};
  float *wp[] = {w};
  const float *gp[] = {g};
  OK(lv_optimizer_apply(o, 0.1f, 1, wp, gp));
  for (int i = 0; i < 4; i++) {
    CLOSE(acc[i], 4.1, 1e-7);
    CLOSE(w[i], 1 - 0.2 / sqrt(4.1), 1e-7);
  }
  ck_assert(w[4] == 1.0f);
  lv_optimizer_free(o);
}
END_TEST

START_TEST(test_rmsprop_adadelta) {
  lv_optimizer *o = make_opt(lv_optimizer_defaults(LV_OPT_RMSPROP));
  OK(lv_optimizer_add_var(o, "v", 1, NULL));
  const char *n0, *n1;
  float *ms, *mom;
  lv_optimizer_slot_var(o, 0, &n0, &ms, NULL);
  lv_optimizer_slot_var(o, 1, &n1, &mom, NULL);
  ck_assert_str_eq(n0, "v/RMSProp");
  ck_assert_str_eq(n1, "v/RMSProp_1");
  ck_assert(ms[0] == 1.0f && mom[0] == 0.0f);
  float w[1] = {1}, g[1] = {1};
  float *wp[] = {w};
  const float *gp[] = {g};
  OK(lv_optimizer_apply(o, 0.1f, 1, wp, gp));
  CLOSE(ms[0], 1.0, 1e-7);
  CLOSE(mom[0], 0.1 / sqrt(2.0), 1e-7);
  CLOSE(w[0], 1 - 0.1 / sqrt(2.0), 1e-7);
  g[0] = 3;
  OK(lv_optimizer_apply(o, 0.1f, 1, wp, gp));
  double ms2 = 1 + (9 - 1) * 0.1, mom2 = 0.9 * 0.1 / sqrt(2.0) + 0.3 / sqrt(ms2 + 1);
  CLOSE(ms[0], ms2, 1e-6);
  CLOSE(w[0], 1 - 0.1 / sqrt(2.0) - mom2, 1e-6);
  lv_optimizer_free(o);

  lv_optimizer *d = make_opt(lv_optimizer_defaults(LV_OPT_ADADELTA));
  OK(lv_optimizer_add_var(d, "v", 1, NULL));
  lv_optimizer_slot_var(d, 0, &n0, &ms, NULL);
  lv_optimizer_slot_var(d, 1, &n1, &mom, NULL);
  ck_assert_str_eq(n0, "v/Adadelta");
  ck_assert_str_eq(n1, "v/Adadelta_1");
  w[0] = 1;
  g[0] = 1;
  OK(lv_optimizer_apply(d, 1.0f, 1, wp, gp));
  double up = sqrt(1e-8) / sqrt(0.05 + 1e-8);
  CLOSE(ms[0], 0.05, 1e-7);
  CLOSE(w[0], 1 - up, 1e-7);
  CLOSE(mom[0], up * up * 0.05, 1e-7);
  lv_optimizer_free(d);
}
END_TEST

/* The vector path (4 lanes + padded tail, OpenMP) gives exactly the scalar TF update,
 * for any thread count. */
static void scalar_adam(int64_t n, float lr, float b1p, float b2p, float *w, const float *g,
                        float *m, float *v) {
  const float alpha = lr * sqrtf(1.0f - b2p) / (1.0f - b1p);
  for (int64_t i = 0; i < n; i++) {
    m[i] = m[i] + (g[i] - m[i]) * (1.0f - 0.9f);
    v[i] = v[i] + (g[i] * g[i] - v[i]) * (1.0f - 0.999f);
    w[i] -= (m[i] * alpha) / (sqrtf(v[i]) + 1e-6f);
  }
}

START_TEST(test_large_deterministic) {
  const int64_t n = 300007; /* above the parallel threshold, not a multiple of 4 */
  float *w1 = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
  float *w3 = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
  float *m3 = calloc(n, sizeof(float)), *v3 = calloc(n, sizeof(float));
  for (int64_t i = 0; i < n; i++) {
    w1[i] = w2[i] = w3[i] = sinf((float)i * 0.001f);
    g[i] = cosf((float)i * 0.37f) * (float)(1 + i % 7);
  }
  lv_optimizer *a = make_opt(lv_optimizer_defaults(LV_OPT_ADAM));
  lv_optimizer *b = make_opt(lv_optimizer_defaults(LV_OPT_ADAM));
  OK(lv_optimizer_add_var(a, "w", n, NULL));
  OK(lv_optimizer_add_var(b, "w", n, NULL));
  int saved = omp_get_max_threads();
  float b1p = 0.9f, b2p = 0.999f;
  for (int step = 0; step < 3; step++) {
    float *wa[] = {w1}, *wb[] = {w2};
    const float *gp[] = {g};
    omp_set_num_threads(1);
    OK(lv_optimizer_apply(a, 0.01f, 1, wa, gp));
    omp_set_num_threads(2);
    OK(lv_optimizer_apply(b, 0.01f, 1, wb, gp));
    scalar_adam(n, 0.01f, b1p, b2p, w3, g, m3, v3);
    b1p *= 0.9f;
    b2p *= 0.999f;
  }
  omp_set_num_threads(saved);
  ck_assert(memcmp(w1, w2, n * sizeof(float)) == 0);
  ck_assert(memcmp(w1, w3, n * sizeof(float)) == 0);
  ck_assert(memcmp(lv_optimizer_find_slot(a, "w/Adam_1", NULL), v3, n * sizeof(float)) == 0);

  double *scratch = malloc((n / LV_OPTIM_SUM_BLOCK + 1) * sizeof(double));
  double s1, s2;
  omp_set_num_threads(1);
  lv_cpu_optim_sum(NULL, n, g, false, scratch, &s1);
  omp_set_num_threads(2);
  lv_cpu_optim_sum(NULL, n, g, false, scratch, &s2);
  omp_set_num_threads(saved);
  free(scratch);
  ck_assert(s1 == s2);
  double ref = 0;
  for (int64_t i = 0; i < n; i++) ref += (double)g[i] * g[i];
  CLOSE(s1, ref, 1e-12);
  lv_optimizer_free(a);
  lv_optimizer_free(b);
  free(w1), free(w2), free(w3), free(g), free(m3), free(v3);
}
END_TEST

/* Slots live on the backend; checkpoints read and write them through host copies (the
 * slots themselves on the host). */
START_TEST(test_optimizer_slots_host_copies) {
  lv_optimizer *o = NULL;
  lv_optimizer_config c = lv_optimizer_defaults(LV_OPT_ADAM);
  expect_err(lv_optimizer_create(&c, NULL, &o), LV_ERR_INTERNAL, "no backend");
  ck_assert_ptr_null(o);
  o = make_opt(c);
  ck_assert_ptr_eq(lv_optimizer_backend(o), lv_cpu_backend());
  OK(lv_optimizer_add_var(o, "w", 5, NULL));
  float w[5] = {1, 2, 3, 4, 5}, g[5] = {1, -1, 2, -2, 3};
  float *wp[] = {w};
  const float *gp[] = {g};
  OK(lv_optimizer_apply(o, 0.1f, 1, wp, gp));
  float *m = lv_optimizer_find_slot(o, "w/Adam", NULL);
  float *hm = lv_optimizer_slot_host(o, 0);
  /* On the host a slot is its own host copy (no second copy of the slots' memory); the
   * copies to and from it keep its values. */
  ck_assert_ptr_eq(hm, m);
  float before[5];
  memcpy(before, m, sizeof before);
  lv_optimizer_slots_to_host(o);
  ck_assert(memcmp(hm, before, 5 * sizeof(float)) == 0);
  ck_assert(hm[4] != 0);
  for (int i = 0; i < 5; i++) hm[i] = (float)i;
  lv_optimizer_slots_from_host(o);
  for (int i = 0; i < 5; i++) ck_assert(m[i] == (float)i);
  lv_optimizer_free(o);
}
END_TEST

/* ---------------- learner ---------------- */

static lv_learner *make_learner(lv_learner_config c, lv_optimizer_type opt, lv_learner_var *v,
                                int n) {
  lv_learner *l = NULL;
  OK(lv_learner_create(&c, make_sched(LV_SCHED_CONTINUOUS), make_opt(lv_optimizer_defaults(opt)),
                       v, n, &l));
  return l;
}

/* lingvo/core/learner_test.py: loss = hello - 2 * world, SGD, lr 0.1, default schedule. */
START_TEST(test_learner_sgd_vector) {
  float hello = 0, world = 0, moon = 0, mars = 0;
  float g_hello = 1, g_world = -2, g_moon = 0, g_mars = 0;
  lv_learner_var v[] = {
      {"hello", &hello, &g_hello, 1, true, false, 0, false, 0, {0}},
      {"world", &world, &g_world, 1, true, false, 0, false, 0, {0}},
      {"moon", &moon, &g_moon, 1, true, false, 0, false, 0, {0}},
      {"mars", &mars, &g_mars, 1, false, false, 0, false, 0, {0}},
  };
  lv_learner_config c = lv_learner_defaults();
  c.learning_rate = 0.1;
  lv_learner *l = make_learner(c, LV_OPT_SGD, v, 4);
  lv_learner_stats s;
  OK(lv_learner_step(l, 0, &s));
  CLOSE(hello, -0.1, 1e-7);
  CLOSE(world, 0.2, 1e-7);
  ck_assert(moon == 0 && mars == 0);
  CLOSE(s.learning_rate, 0.1, 1e-12);
  CLOSE(s.lr_schedule, 1.0, 1e-12);
  CLOSE(s.grad_norm_all, sqrt(5.0), 1e-12);
  CLOSE(s.var_norm_all, 0.0, 1e-12);
  ck_assert(s.grad_scale_all == 1.0 && !s.has_nan_or_inf && !s.skipped);
  CLOSE(lv_learner_learning_rate(l, 500000), 0.05, 1e-9);
  ck_assert_int_eq(lv_learner_num_skipped_steps(l), 0);

  const char *names[9];
  double vals[9];
  int k = lv_learner_stats_metrics(&s, names, vals, 9);
  ck_assert_int_eq(k, 7);
  ck_assert_str_eq(names[0], "learning_rate");
  ck_assert_str_eq(names[2], "grad_norm/all");
  ck_assert_str_eq(names[4], "grad_scale_all");
  CLOSE(vals[2], sqrt(5.0), 1e-12);
  lv_learner_free(l);
}
END_TEST

/* lingvo/core/base_model_test.py: grads of ones -> grad_scale 1. */
START_TEST(test_learner_grad_scale_one) {
  float w[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1};
  lv_learner_var v[] = {{"w", w, g, 4, true, false, 0, false, 0, {0}}};
  lv_learner_config c = lv_learner_defaults();
  c.learning_rate = 1.0;
  lv_learner *l = make_learner(c, LV_OPT_SGD, v, 1);
  lv_learner_stats s;
  OK(lv_learner_step(l, 0, &s));
  ck_assert(s.grad_scale_all == 1.0);
  CLOSE(s.grad_norm_all, 2.0, 1e-12);
  CLOSE(s.var_norm_all, sqrt(30.0), 1e-12);
  ck_assert(w[0] == 0 && w[3] == 3);
  lv_learner_free(l);
}
END_TEST

/* base_model_test: a NaN or -inf gradient -> grad_scale 0, finite (zero) final grads,
 * variables and Adam slots unchanged, the step counted. */
START_TEST(test_learner_nan_inf_skipped) {
  const float bad[] = {NAN, -INFINITY, INFINITY};
  for (int k = 0; k < 3; k++) {
    float w[3] = {1, 2, 3}, g[3] = {0.5f, bad[k], 1};
    float u[2] = {4, 5}, gu[2] = {1, 1};
    lv_learner_var v[] = {{"w", w, g, 3, true, false, 0, false, 0, {0}}, {"u", u, gu, 2, true, false, 0, false, 0, {0}}};
    lv_learner_config c = lv_learner_defaults();
    c.learning_rate = 0.1;
    c.clip_gradient_norm_to_value = 1.0;
    lv_learner *l = make_learner(c, LV_OPT_ADAM, v, 2);
    lv_learner_stats s;
    OK(lv_learner_step(l, 0, &s));
    ck_assert(s.has_nan_or_inf && s.grad_norm_is_nan_or_inf && s.skipped);
    ck_assert(s.grad_scale_all == 0.0);
    for (int i = 0; i < 3; i++) ck_assert(isfinite(g[i]) && g[i] == 0);
    ck_assert(w[0] == 1 && w[1] == 2 && w[2] == 3 && u[0] == 4 && u[1] == 5);
    lv_optimizer *o = lv_learner_optimizer(l);
    float *m = lv_optimizer_find_slot(o, "u/Adam", NULL), *b1p;
    ck_assert(m[0] == 0 && m[1] == 0);
    lv_optimizer_nonslot(o, 0, NULL, &b1p);
    ck_assert(*b1p == 0.9f);
    ck_assert_int_eq(lv_learner_num_nan_inf_steps(l), 1);
    ck_assert_int_eq(lv_learner_num_skipped_steps(l), 1);

    /* The next good step applies normally. */
    g[0] = g[1] = g[2] = 0.1f;
    OK(lv_learner_step(l, 1, &s));
    ck_assert(!s.skipped && w[0] < 1);
    ck_assert_int_eq(lv_learner_num_nan_inf_steps(l), 1);
    lv_learner_free(l);
  }
}
END_TEST

/* Finite gradients whose update is not finite (SGD with lr * g above FLT_MAX; Adam with
 * g^2 overflowing its second moment): the step is undone (values, slots, beta powers
 * bit-identical to before), counted as skipped, and the next sane step applies. */
START_TEST(test_learner_nonfinite_update_undone) {
  for (int adam = 0; adam < 2; adam++) {
    float w[3] = {1, 2, 3}, g[3];
    const float sane[3] = {0.1f, 0.2f, 0.3f}, huge[3] = {0.5f, 1e30f, 1};
    lv_learner_var v[] = {{"w", w, g, 3, true, false, 0, false, 0, {0}}};
    lv_learner_config c = lv_learner_defaults();
    c.learning_rate = adam ? 0.1 : 1e10;
    lv_learner *l = make_learner(c, adam ? LV_OPT_ADAM : LV_OPT_SGD, v, 1);
    lv_optimizer *o = lv_learner_optimizer(l);
    lv_learner_stats s;
    memcpy(g, sane, sizeof g); /* a first step, so that the slots hold something to keep */
    OK(lv_learner_step(l, 0, &s));
    ck_assert(!s.skipped);
    float w0[3], m0[3] = {0}, v0[3] = {0}, b1 = 0, *b1p = NULL;
    memcpy(w0, w, sizeof w);
    if (adam) {
      memcpy(m0, lv_optimizer_find_slot(o, "w/Adam", NULL), sizeof m0);
      memcpy(v0, lv_optimizer_find_slot(o, "w/Adam_1", NULL), sizeof v0);
      lv_optimizer_nonslot(o, 0, NULL, &b1p);
      b1 = *b1p;
    }
    memcpy(g, huge, sizeof g);
    OK(lv_learner_step(l, 1, &s));
    ck_assert(s.skipped && s.update_nonfinite && !s.has_nan_or_inf);
    ck_assert_str_eq(s.nonfinite_update, adam ? "w/Adam_1" : "w");
    ck_assert(memcmp(w, w0, sizeof w) == 0);
    if (adam) {
      ck_assert(memcmp(lv_optimizer_find_slot(o, "w/Adam", NULL), m0, sizeof m0) == 0);
      ck_assert(memcmp(lv_optimizer_find_slot(o, "w/Adam_1", NULL), v0, sizeof v0) == 0);
      ck_assert(*b1p == b1);
    }
    ck_assert_int_eq(lv_learner_num_skipped_steps(l), 1);
    ck_assert_int_eq(lv_learner_num_nan_inf_steps(l), 1);
    memcpy(g, sane, sizeof g);
    OK(lv_learner_step(l, 2, &s));
    ck_assert(!s.skipped && !s.update_nonfinite);
    ck_assert(memcmp(w, w0, sizeof w) != 0 && isfinite(w[0]));
    lv_learner_free(l);
  }
}
END_TEST

/* max_consecutive_skipped_steps: the N-th skipped step in a row is an error (stats still
 * filled); a good step in between resets the count; 0 never stops. */
START_TEST(test_learner_consecutive_skips_stop) {
  float w[2] = {1, 2}, g[2];
  lv_learner_var v[] = {{"w", w, g, 2, true, false, 0, false, 0, {0}}};
  lv_learner_config c = lv_learner_defaults();
  ck_assert_int_eq(c.max_consecutive_skipped_steps, 100);
  c.learning_rate = 0.1;
  c.max_consecutive_skipped_steps = 3;
  lv_learner *l = make_learner(c, LV_OPT_SGD, v, 1);
  lv_learner_stats s;
  int64_t step = 0;
  for (int i = 0; i < 2; i++, step++) {
    g[0] = NAN, g[1] = 1;
    OK(lv_learner_step(l, step, &s));
  }
  g[0] = g[1] = 0.1f;
  OK(lv_learner_step(l, step++, &s));
  for (int i = 0; i < 2; i++, step++) {
    g[0] = NAN, g[1] = 1;
    OK(lv_learner_step(l, step, &s));
  }
  g[0] = NAN, g[1] = 1;
  expect_err(lv_learner_step(l, step, &s), LV_ERR_INTERNAL, "3 consecutive steps skipped");
  ck_assert(s.skipped && s.has_nan_or_inf);
  lv_learner_free(l);
  c.max_consecutive_skipped_steps = 0;
  l = make_learner(c, LV_OPT_SGD, v, 1);
  for (int i = 0; i < 200; i++) {
    g[0] = NAN, g[1] = 1;
    OK(lv_learner_step(l, i, &s));
  }
  lv_learner_free(l);
  c.max_consecutive_skipped_steps = -1;
  expect_err(lv_learner_config_validate(&c), LV_ERR_INVALID, "max_consecutive_skipped_steps");
}
END_TEST

/* base_model_test: clip_gradient_single_norm_to_value = 1 with scalars a = 10, b = 0.5. */
START_TEST(test_learner_single_norm_clip) {
  float a = 0, b = 0, ga = 10, gb = 0.5f;
  lv_learner_var v[] = {{"a", &a, &ga, 1, true, false, 0, false, 0, {0}}, {"b", &b, &gb, 1, true, false, 0, false, 0, {0}}};
  lv_learner_config c = lv_learner_defaults();
  c.learning_rate = 1.0;
  c.clip_gradient_single_norm_to_value = 1.0;
  lv_learner *l = make_learner(c, LV_OPT_SGD, v, 2);
  lv_learner_stats s;
  OK(lv_learner_step(l, 0, &s));
  CLOSE(ga, 1.0, 1e-7);
  CLOSE(gb, 0.5, 1e-7);
  CLOSE(a, -1.0, 1e-7);
  CLOSE(b, -0.5, 1e-7);
  ck_assert(s.grad_scale_all == 1.0 && !s.skipped);
  lv_learner_free(l);
}
END_TEST

START_TEST(test_learner_config_errors) {
  lv_learner_config c = lv_learner_defaults();
  c.clip_gradient_single_norm_to_value = 1.0;
  c.clip_gradient_norm_to_value = 2.0;
  expect_err(lv_learner_config_validate(&c), LV_ERR_INVALID,
             "Cannot use clip_gradient_single_norm_to_value=1.000000 and "
             "clip_gradient_norm_to_value=2.000000.");
  lv_learner *l = (lv_learner *)1;
  expect_err(lv_learner_create(&c, make_sched(LV_SCHED_CONSTANT),
                               make_opt(lv_optimizer_defaults(LV_OPT_SGD)), NULL, 0, &l),
             LV_ERR_INVALID, "clip_gradient_norm_to_value");
  ck_assert_ptr_null(l);
  lv_learner_config d = lv_learner_defaults();
  d.learning_rate = -1e-3;
  expect_err(lv_learner_config_validate(&d), LV_ERR_INVALID, "learning_rate");
  lv_learner_config e = lv_learner_defaults();
  e.grad_norm_to_clip_to_zero = -1;
  expect_err(lv_learner_config_validate(&e), LV_ERR_INVALID, "grad_norm_to_clip_to_zero");
  lv_learner_config f = lv_learner_defaults();
  f.has_l2 = true;
  f.l2_regularizer_weight = -0.1;
  expect_err(lv_learner_config_validate(&f), LV_ERR_INVALID, "l2_regularizer_weight");
  ck_assert_ptr_null(lv_learner_config_validate(&(lv_learner_config){.scale_gradients = true}));
}
END_TEST

/* py_utils_test (w = 0.1): l2_loss = 0.5 * 0.1 * sum gamma^2, grad_gamma += 0.1 gamma;
 * beta (skip_lp) untouched. L1: 0.1 * sum |v|, grad += 0.1 sign(v). */
START_TEST(test_learner_l2_l1) {
  float gamma[3] = {1, -2, 3}, beta[2] = {5, 6};
  float gg[3] = {0.1f, 0.2f, 0.3f}, gb[2] = {1, 1};
  lv_learner_var v[] = {{"gamma", gamma, gg, 3, true, false, 0, false, 0, {0}}, {"beta", beta, gb, 2, true, true, 0, false, 0, {0}}};
  lv_learner_config c = lv_learner_defaults();
  c.has_l2 = true;
  c.l2_regularizer_weight = 0.1;
  lv_learner *l = make_learner(c, LV_OPT_SGD, v, 2); /* learning_rate 0: values stay */
  lv_learner_stats s;
  OK(lv_learner_step(l, 0, &s));
  ck_assert(s.has_l2 && !s.has_l1);
  CLOSE(s.l2_loss, 0.5 * 0.1 * 14, 1e-9);
  CLOSE(gg[0], 0.1 + 0.1, 1e-7);
  CLOSE(gg[1], 0.2 - 0.2, 1e-7);
  CLOSE(gg[2], 0.3 + 0.3, 1e-7);
  ck_assert(gb[0] == 1 && gb[1] == 1);
  /* The global norm is taken after the L2 adjustment. */
  CLOSE(s.grad_norm_all, sqrt(0.04 + 0 + 0.36 + 2), 1e-6);
  const char *names[9];
  int k = lv_learner_stats_metrics(&s, names, NULL, 9);
  ck_assert_int_eq(k, 8);
  ck_assert_str_eq(names[7], "l2_loss");
  lv_learner_free(l);

  float g2[3] = {0.1f, 0.2f, 0.3f};
  lv_learner_var v1[] = {{"gamma", gamma, g2, 3, true, false, 0, false, 0, {0}}};
  lv_learner_config c1 = lv_learner_defaults();
  c1.has_l1 = true;
  c1.l1_regularizer_weight = 0.1;
  l = make_learner(c1, LV_OPT_SGD, v1, 1);
  OK(lv_learner_step(l, 0, &s));
  CLOSE(s.l1_loss, 0.1 * 6, 1e-9);
  CLOSE(g2[0], 0.2, 1e-7);
  CLOSE(g2[1], 0.1, 1e-7);
  CLOSE(g2[2], 0.4, 1e-7);
  lv_learner_free(l);
}
END_TEST

/* An embedding's rows (lp_row_width): Lingvo's AdjustGradientsWithLpLoss on an
 * IndexedSlices gradient regularizes only the looked-up rows (here: the rows with a
 * nonzero gradient), in the gradient and in l2_loss / l1_loss. */
START_TEST(test_learner_lp_looked_up_rows) {
  for (int l1 = 0; l1 < 2; l1++) {
    float emb[6] = {1, -2, 3, 4, -5, 6}, g[6] = {0.5f, 0, 0, 0, 0, -0.25f};
    float w[2] = {7, 8}, gw[2] = {0, 0};
    lv_learner_var v[] = {{"emb", emb, g, 6, true, false, 2, false, 0, {0}}, {"w", w, gw, 2, true, false, 0, false, 0, {0}}};
    lv_learner_config c = lv_learner_defaults();
    if (l1) {
      c.has_l1 = true;
      c.l1_regularizer_weight = 0.1;
    } else {
      c.has_l2 = true;
      c.l2_regularizer_weight = 0.1;
    }
    lv_learner *l = make_learner(c, LV_OPT_SGD, v, 2);
    lv_learner_stats s;
    OK(lv_learner_step(l, 0, &s));
    /* Rows 0 and 2 were looked up; row 1 (gradient 0) is not regularized. The dense
     * variable w is, although its gradient is 0. */
    if (l1) {
      CLOSE(s.l1_loss, 0.1 * (1 + 2 + 5 + 6 + 7 + 8), 1e-9);
      CLOSE(g[0], 0.5 + 0.1, 1e-7);
      CLOSE(g[1], -0.1, 1e-7);
      CLOSE(g[4], -0.1, 1e-7);
      CLOSE(g[5], -0.25 + 0.1, 1e-7);
      CLOSE(gw[0], 0.1, 1e-7);
    } else {
      CLOSE(s.l2_loss, 0.5 * 0.1 * (1 + 4 + 25 + 36 + 49 + 64), 1e-9);
      CLOSE(g[0], 0.5 + 0.1, 1e-7);
      CLOSE(g[1], -0.2, 1e-7);
      CLOSE(g[4], -0.5, 1e-7);
      CLOSE(g[5], -0.25 + 0.6, 1e-7);
      CLOSE(gw[1], 0.8, 1e-7);
    }
    ck_assert(g[2] == 0 && g[3] == 0);
    lv_learner_free(l);
  }
  /* A width that does not divide the variable is a programming error. */
  float e[5] = {0}, ge[5] = {0};
  lv_learner_var bad[] = {{"emb", e, ge, 5, true, false, 2, false, 0, {0}}};
  lv_learner *l = NULL;
  lv_learner_config c = lv_learner_defaults();
  lv_status st = lv_learner_create(&c, make_sched(LV_SCHED_CONTINUOUS), make_opt(lv_optimizer_defaults(LV_OPT_SGD)),
                                   bad, 1, &l);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(lv_status_msg(st), "not rows of 2"), "%s", lv_status_msg(st));
  lv_status_free(st);
}
END_TEST

START_TEST(test_learner_global_norm_clip) {
  float w[2] = {0, 0}, g[2] = {3, 4};
  lv_learner_var v[] = {{"w", w, g, 2, true, false, 0, false, 0, {0}}};
  lv_learner_config c = lv_learner_defaults();
  c.learning_rate = 1.0;
  c.clip_gradient_norm_to_value = 1.0;
  lv_learner *l = make_learner(c, LV_OPT_SGD, v, 1);
  lv_learner_stats s;
  OK(lv_learner_step(l, 0, &s));
  CLOSE(s.grad_norm_all, 5.0, 1e-12);
  CLOSE(s.grad_scale_all, 0.2, 1e-7);
  CLOSE(g[0], 0.6, 1e-7);
  CLOSE(g[1], 0.8, 1e-7);
  CLOSE(w[0], -0.6, 1e-7);
  CLOSE(w[1], -0.8, 1e-7);
  /* Below the clip value the gradients are untouched. */
  g[0] = 0.3f, g[1] = 0.4f;
  OK(lv_learner_step(l, 1, &s));
  ck_assert(s.grad_scale_all == 1.0 && g[0] == 0.3f);
  lv_learner_free(l);

  /* grad_norm_to_clip_to_zero: norm >= 4 -> scale 0, step skipped, not a NaN step. */
  float w2[2] = {1, 1}, h[2] = {3, 4};
  lv_learner_var v2[] = {{"w", w2, h, 2, true, false, 0, false, 0, {0}}};
  lv_learner_config z = lv_learner_defaults();
  z.learning_rate = 1.0;
  z.grad_norm_to_clip_to_zero = 4.0;
  l = make_learner(z, LV_OPT_SGD, v2, 1);
  OK(lv_learner_step(l, 0, &s));
  ck_assert(s.grad_scale_all == 0.0 && s.skipped && !s.has_nan_or_inf);
  ck_assert(s.over_clip_to_zero && !s.tracker_rejected);
  ck_assert(w2[0] == 1 && w2[1] == 1 && h[0] == 0 && h[1] == 0);
  ck_assert_int_eq(lv_learner_num_skipped_steps(l), 1);
  ck_assert_int_eq(lv_learner_num_nan_inf_steps(l), 0);
  h[0] = 0.3f, h[1] = 0.4f;
  OK(lv_learner_step(l, 1, &s));
  ck_assert(s.grad_scale_all == 1.0 && !s.skipped);
  CLOSE(w2[0], 0.7, 1e-7);
  lv_learner_free(l);
}
END_TEST

START_TEST(test_learner_schedule_and_scale_off) {
  float w[1] = {0}, g[1] = {NAN};
  lv_learner_var v[] = {{"w", w, g, 1, true, false, 0, false, 0, {0}}};
  lv_learner_config c = lv_learner_defaults();
  c.learning_rate = 2.0;
  c.scale_gradients = false;
  lv_schedule_config pc = lv_schedule_defaults(LV_SCHED_PIECEWISE_CONSTANT);
  pc.u.piecewise_constant.n = 1;
  pc.u.piecewise_constant.boundaries[0] = 10;
  pc.u.piecewise_constant.values[0] = 1.0;
  pc.u.piecewise_constant.values[1] = 0.1;
  lv_schedule *sched = NULL;
  OK(lv_schedule_create(&pc, 0, &sched));
  lv_learner *l = NULL;
  OK(lv_learner_create(&c, sched, make_opt(lv_optimizer_defaults(LV_OPT_SGD)), v, 1, &l));
  CLOSE(lv_learner_learning_rate(l, 9), 2.0, 1e-12);
  CLOSE(lv_learner_learning_rate(l, 10), 0.2, 1e-12);
  /* scale_gradients = false: Lingvo does no NaN check and no clipping. */
  lv_learner_stats s;
  OK(lv_learner_step(l, 10, &s));
  ck_assert(!s.skipped && isnan(w[0]));
  CLOSE(s.learning_rate, 0.2, 1e-12);
  lv_learner_free(l);
}
END_TEST

/* layers.GradNormTracker: no rejection before total_weight > 0.75 (277 steps at decay
 * 0.995), then a norm far above the moving mean is rejected and counted; norms under
 * grad_norm_clip_cap_min never are. */
START_TEST(test_learner_grad_norm_tracker) {
  for (int capmin = 0; capmin < 2; capmin++) {
    float w[1] = {0}, g[1];
    lv_learner_var v[] = {{"w", w, g, 1, true, false, 0, false, 0, {0}}};
    lv_learner_config c = lv_learner_defaults();
    c.has_grad_norm_tracker = true;
    c.grad_norm_tracker = lv_grad_norm_tracker_defaults();
    if (capmin) c.grad_norm_tracker.grad_norm_clip_cap_min = 20.0;
    lv_learner *l = make_learner(c, LV_OPT_SGD, v, 1);
    ck_assert_int_eq(lv_learner_num_state(l), 4);
    lv_learner_stats s;
    g[0] = 10;
    OK(lv_learner_step(l, 0, &s)); /* no history yet: accepted */
    ck_assert(s.grad_scale_all == 1.0);
    for (int i = 1; i < 300; i++) {
      g[0] = 1;
      OK(lv_learner_step(l, i, &s));
      ck_assert(s.grad_scale_all == 1.0);
    }
    const char *name;
    float *tw, *rej, *mean;
    lv_learner_state(l, 2, &name, &tw);
    ck_assert_str_eq(name, "total_weight");
    CLOSE(*tw, 1 - pow(0.995, 300), 1e-4);
    lv_learner_state(l, 0, &name, &mean);
    ck_assert_str_eq(name, "log_mean");
    lv_learner_state(l, 3, &name, &rej);
    ck_assert_str_eq(name, "total_rejections");
    ck_assert(*rej == 0);
    g[0] = 10;
    OK(lv_learner_step(l, 300, &s));
    if (capmin) {
      ck_assert(s.grad_scale_all == 1.0 && !s.skipped && *rej == 0);
    } else {
      ck_assert(s.grad_scale_all == 0.0 && s.skipped && !s.has_nan_or_inf);
      ck_assert(s.tracker_rejected && !s.over_clip_to_zero); /* the trainer's warning says which */
      ck_assert(*rej == 1);
      ck_assert_int_eq(lv_learner_num_skipped_steps(l), 1);
    }
    /* A NaN step is rejected and leaves the moving statistics alone. */
    float before = *mean;
    g[0] = NAN;
    OK(lv_learner_step(l, 301, &s));
    ck_assert(s.skipped && *mean == before && *rej == (capmin ? 1 : 2) && !s.tracker_rejected);
    lv_learner_free(l);
  }
  lv_learner_config bad = lv_learner_defaults();
  bad.has_grad_norm_tracker = true;
  bad.grad_norm_tracker = lv_grad_norm_tracker_defaults();
  bad.grad_norm_tracker.decay = 1.0;
  expect_err(lv_learner_config_validate(&bad), LV_ERR_INVALID, "grad_norm_tracker.decay");
}
END_TEST

/* Per-variable norms (Lingvo's grad_norm/<var>, var_norm/<var> summaries). */
START_TEST(test_learner_var_norms) {
  float a[2] = {3, 4}, ga[2] = {0, 2}, b[1] = {1}, gb[1] = {-1}, c0[1] = {7}, gc[1] = {7};
  lv_learner_var v[] = {{"a", a, ga, 2, true, false, 0, false, 0, {0}},
                        {"frozen", c0, gc, 1, false, false, 0, false, 0, {0}},
                        {"b", b, gb, 1, true, false, 0, false, 0, {0}}};
  lv_learner *l = make_learner(lv_learner_defaults(), LV_OPT_SGD, v, 3);
  OK(lv_learner_step(l, 0, NULL));
  ck_assert_int_eq(lv_learner_num_vars(l), 2);
  ck_assert_str_eq(lv_learner_var_name(l, 1), "b");
  double gn, vn;
  lv_learner_var_norms(l, 0, &gn, &vn);
  CLOSE(gn, 2.0, 1e-12);
  CLOSE(vn, 5.0, 1e-12);
  lv_learner_var_norms(l, 1, &gn, &vn);
  CLOSE(gn, 1.0, 1e-12);
  CLOSE(vn, 1.0, 1e-12);
  lv_learner_free(l);
}
END_TEST

/* The lv_var adapter: float32 trainable variables only, slots named after them. */
START_TEST(test_learner_for_vars) {
  float wv[6] = {1, 1, 1, 1, 1, 1}, wg[6] = {1, 1, 1, 1, 1, 1};
  int64_t step_v = 7;
  lv_var w, gs;
  memset(&w, 0, sizeof w);
  memset(&gs, 0, sizeof gs);
  strcpy(w.name, "lenet5/fc/w/var");
  w.value = lv_tensor_view(LV_F32, lv_shape2(2, 3), wv);
  w.grad = lv_tensor_view(LV_F32, lv_shape2(2, 3), wg);
  w.trainable = true;
  strcpy(gs.name, "global_step");
  gs.value = lv_tensor_view(LV_I64, lv_shape0(), &step_v);
  gs.trainable = false;
  lv_var *vars[] = {&w, &gs};
  lv_learner_config c = lv_learner_defaults();
  c.learning_rate = 0.5;
  lv_learner *l = NULL;
  OK(lv_learner_create_for_vars(&c, make_sched(LV_SCHED_CONSTANT),
                                make_opt(lv_optimizer_defaults(LV_OPT_ADAM)), vars, 2, &l));
  lv_optimizer *o = lv_learner_optimizer(l);
  ck_assert_int_eq(lv_optimizer_num_slot_vars(o), 2);
  int64_t n;
  ck_assert_ptr_nonnull(lv_optimizer_find_slot(o, "lenet5/fc/w/var/Adam", &n));
  ck_assert_int_eq(n, 6);
  ck_assert_ptr_nonnull(lv_optimizer_find_slot(o, "lenet5/fc/w/var/Adam_1", NULL));
  OK(lv_learner_step(l, 0, NULL));
  /* First Adam step moves each element by about lr. */
  for (int i = 0; i < 6; i++) CLOSE(wv[i], 0.5, 1e-4);
  ck_assert_int_eq(step_v, 7);
  lv_learner_free(l);

  /* An embedding table (lp_looked_up_rows): L2 on its rows with a gradient only. */
  float ev[6] = {1, 2, 3, 4, 5, 6}, eg[6] = {0, 0, 1, 0, 0, 0};
  w.value = lv_tensor_view(LV_F32, lv_shape2(3, 2), ev);
  w.grad = lv_tensor_view(LV_F32, lv_shape2(3, 2), eg);
  w.lp_looked_up_rows = true;
  lv_learner_config c2 = lv_learner_defaults();
  c2.has_l2 = true;
  c2.l2_regularizer_weight = 0.5;
  OK(lv_learner_create_for_vars(&c2, make_sched(LV_SCHED_CONSTANT),
                                make_opt(lv_optimizer_defaults(LV_OPT_SGD)), vars, 2, &l));
  lv_learner_stats st;
  OK(lv_learner_step(l, 0, &st));
  CLOSE(st.l2_loss, 0.5 * 0.5 * (9 + 16), 1e-9);
  ck_assert(eg[0] == 0 && eg[1] == 0 && eg[4] == 0 && eg[5] == 0);
  CLOSE(eg[2], 1 + 1.5, 1e-7);
  CLOSE(eg[3], 2, 1e-7);
  lv_learner_free(l);
  w.lp_looked_up_rows = false;
  w.value = lv_tensor_view(LV_F32, lv_shape2(2, 3), wv);

  w.value.device = (lv_device){LV_DEVICE_CUDA, 0};
  expect_err(lv_learner_create_for_vars(&c, make_sched(LV_SCHED_CONSTANT),
                                        make_opt(lv_optimizer_defaults(LV_OPT_SGD)), vars, 2, &l),
             LV_ERR_INTERNAL, "lenet5/fc/w/var is not on the device of the optimizer's backend");
  ck_assert_ptr_null(l);
  w.value.device = lv_device_host();
  w.grad = lv_tensor_view(LV_F32, lv_shape1(6), wg);
  expect_err(lv_learner_create_for_vars(&c, make_sched(LV_SCHED_CONSTANT),
                                        make_opt(lv_optimizer_defaults(LV_OPT_SGD)), vars, 2, &l),
             LV_ERR_INTERNAL, "lenet5/fc/w/var has no float32 gradient");
  ck_assert_ptr_null(l);
}
END_TEST

/* Lingvo's optimizer.Accumulator (accum_steps 4 around Adam): the variables change only
 * at steps 3, 7, ..., with Adam applied once on the mean of the four steps' gradients,
 * exactly as a plain Adam step on that mean; the sums restart from zero; a skipped step
 * adds nothing. */
START_TEST(test_learner_accumulator) {
  enum { N = 37, K = 4 };
  float wa[N], ga[N], wb[N], gb[N];
  for (int i = 0; i < N; i++) wa[i] = wb[i] = 0.01f * (float)(i - 18);
  lv_learner_var va[] = {{"w", wa, ga, N, true, false, 0, false, 0, {0}}}, vb[] = {{"w", wb, gb, N, true, false, 0, false, 0, {0}}};
  lv_learner_config c = lv_learner_defaults();
  c.learning_rate = 0.01;
  lv_learner *plain = make_learner(c, LV_OPT_ADAM, vb, 1);
  c.accum_steps = K;
  lv_learner *acc = make_learner(c, LV_OPT_ADAM, va, 1);
  ck_assert_int_eq(lv_learner_num_accumulators(acc), 1);
  ck_assert_int_eq(lv_learner_num_accumulators(plain), 0);
  const char *name;
  lv_learner_accumulator(acc, 0, &name, NULL);
  ck_assert_str_eq(name, "w/grad_accumulator/var");
  lv_learner_stats s;
  for (int64_t step = 0; step < 2 * K; step++) {
    float before[N];
    memcpy(before, wa, sizeof before);
    for (int i = 0; i < N; i++) ga[i] = sinf((float)(step * N + i)) * (1.0f + (float)step);
    if (step == 5 || step == 3) { /* a NaN step: skipped, nothing accumulated (3: the cycle's last step, which
                                     * still applies the sum of the others and resets it) */
      float keep = ga[0];
      ga[0] = NAN;
      OK(lv_learner_step(acc, step, &s));
      ck_assert(s.skipped);
      ga[0] = keep;
      for (int i = 0; i < N; i++) ga[i] = 0.0f;
    }
    static float run[N];
    for (int i = 0; i < N; i++) run[i] = (step % K ? run[i] : 0.0f) + ga[i];
    if (step != 5 && step != 3) OK(lv_learner_step(acc, step, &s));
    if (step % K != K - 1) {
      ck_assert_msg(!memcmp(before, wa, sizeof before), "step %lld changed the variables", (long long)step);
      continue;
    }
    for (int i = 0; i < N; i++) gb[i] = run[i] * (float)(1.0 / K);
    OK(lv_learner_step(plain, step / K, &s));
    for (int i = 0; i < N; i++)
      ck_assert_msg(wa[i] == wb[i], "step %lld, element %d: accumulated %.9g, large batch %.9g", (long long)step, i,
                    wa[i], wb[i]);
    lv_learner_accumulators_to_host(acc);
    for (int i = 0; i < N; i++) ck_assert(lv_learner_accumulator_host(acc, 0)[i] == 0.0f);
  }
  float *p;
  lv_optimizer_nonslot(lv_learner_optimizer(acc), 0, NULL, &p);
  CLOSE(*p, 0.9 * 0.9 * 0.9, 1e-6); /* beta1_power advanced twice: two updates */
  lv_learner_free(acc);
  lv_learner_free(plain);
}
END_TEST

/* XLAShardingAdafactor against tests/parity/adafactor_ref.py (a float32 numpy transcription
 * of Lingvo's _resource_apply_dense): 3 steps at global steps 0, 1, 2 with
 * g[i] = sin(0.7 i + step + 1), w[i] = 0.1 (i - n / 3), lr 0.5; the final values and slots
 * (TF's names and the factored shapes). */
typedef struct ada_case {
  int rank;
  int64_t dims[2];
  double beta1, clip, pow_, offset, min_dim;
  bool param_scale, factored;
  const float *w;
  int nslots;
  int slot_rank[3];
  int64_t slot_dims[3][2];
  const float *slot[3];
} ada_case;

static void run_ada_case(const ada_case *k) {
  lv_optimizer_config c = lv_optimizer_defaults(LV_OPT_ADAFACTOR);
  c.beta1 = k->beta1, c.clipping_threshold = k->clip, c.decay_exponent_pow = k->pow_;
  c.decay_exponent_offset = k->offset, c.min_dim_size_to_factor = k->min_dim;
  c.multiply_by_parameter_scale = k->param_scale, c.factored = k->factored;
  lv_optimizer *o = make_opt(c);
  OK(lv_optimizer_add_var_shaped(o, "m/w/var", k->rank, k->dims, NULL));
  const int n = (int)(k->rank == 2 ? k->dims[0] * k->dims[1] : k->dims[0]);
  float w[15], g[15];
  for (int i = 0; i < n; i++) w[i] = 0.1f * (float)(i - n / 3);
  for (int step = 0; step < 3; step++) {
    for (int i = 0; i < n; i++) g[i] = sinf(0.7f * (float)i + (float)(step + 1));
    float *ws[1] = {w};
    const float *gs[1] = {g};
    lv_optimizer_set_step(o, step);
    OK(lv_optimizer_apply(o, 0.5f, 1, ws, gs));
  }
  for (int i = 0; i < n; i++) CLOSE(w[i], k->w[i], 2e-6);
  ck_assert_int_eq(lv_optimizer_num_slot_vars(o), k->nslots);
  for (int s = 0; s < k->nslots; s++) {
    const char *name;
    float *data;
    int64_t sn, dims[LV_KMAX_RANK];
    lv_optimizer_slot_var(o, s, &name, &data, &sn);
    char want[64];
    if (s == 0) snprintf(want, sizeof want, "m/w/var/Adafactor");
    else snprintf(want, sizeof want, "m/w/var/Adafactor_%d", s);
    ck_assert_str_eq(name, want);
    ck_assert_int_eq(lv_optimizer_slot_dims(o, s, dims), k->slot_rank[s]);
    int64_t want_n = 1;
    for (int d = 0; d < k->slot_rank[s]; d++) {
      ck_assert_int_eq(dims[d], k->slot_dims[s][d]);
      want_n *= dims[d];
    }
    ck_assert_int_eq(sn, want_n);
    for (int64_t i = 0; i < sn; i++) CLOSE(data[i], k->slot[s][i], 2e-6);
  }
  lv_optimizer_free(o);
}

START_TEST(test_adafactor_reference) {
  static const float w0[] = {-0.87052685f, -0.453014195f, 0.0255359113f, 0.386276424f, 0.572842598f, 0.52675879f,
                             0.256518036f, -0.0964518636f, -0.285708785f, 0.0335724093f, 0.455602705f, 0.935118258f};
  static const float vr0[] = {0.504374027f, 0.495462537f, 0.494083524f};
  static const float vc0[] = {0.491971374f, 0.512266934f, 0.496000528f, 0.491654575f};
  static const float w1[] = {-0.557858706f, -0.444268078f, -0.322404027f, -0.161699802f, -0.0401016921f,
                             0.0490679704f, 0.121191368f,  0.184334219f,  0.232197449f,  0.34047389f,
                             0.465340555f,  0.603808999f,  0.750577986f,  0.888256371f,  0.95206368f};
  static const float m1[] = {0.0236220025f, 0.00904187839f, -0.00700537302f, -0.0272642467f, -0.0286153127f,
                             -0.015253827f, 0.00359795988f, 0.0214418508f,   0.0345860906f,  0.0236616954f,
                             0.00513553899f, -0.0155730471f, -0.0328640342f, -0.0374214239f, -0.0158555135f};
  static const float vr1[] = {0.358216405f, 0.355380714f, 0.353901446f};
  static const float vc1[] = {0.329760641f, 0.336891651f, 0.379290581f, 0.386572421f, 0.346648902f};
  static const float w2[] = {-1.21700585f, -0.398334414f, 0.53999567f, 1.05436969f, 1.72231674f};
  static const float v2[] = {0.518033803f, 0.48202458f, 0.475855738f, 0.509768009f, 0.527464688f};
  static const float w3[] = {-0.616119087f, -0.377599716f, -0.113535032f, 0.0694729686f, 0.274787337f, 0.247762114f,
                             0.197909355f,  0.140692279f,  0.0757045075f, 0.286948413f,  0.525977015f, 0.790675044f};
  static const float v3[] = {0.518033803f, 0.48202458f,  0.475855738f, 0.509768009f, 0.527464688f, 0.499568224f,
                             0.472388446f, 0.491045654f, 0.524567485f, 0.517305911f, 0.481315166f, 0.476342618f};
  static const float w4[] = {-0.836505234f, -0.43664676f, 0.00582712889f, 0.269470751f, 0.564418912f, 0.387869537f,
                             0.168047726f,  -0.0523275435f, -0.272358418f, 0.0701788291f, 0.471004277f, 0.914390206f};
  const ada_case cases[] = {
      /* [4, 3] defaults (min_dim_size_to_factor 1): vr = mean over rows [3], vc [4] */
      {2, {4, 3}, 0, 0, 0, 0, 1, true, true, w0, 2, {1, 1}, {{3}, {4}}, {vr0, vc0}},
      /* [3, 5] beta1 0.9, clip 0.5, decay_exponent_pow 0.8, offset -2: m, vr [3], vc [5] */
      {2, {3, 5}, 0.9, 0.5, 0.8, -2, 1, true, true, w1, 3, {2, 1, 1}, {{3, 5}, {3}, {5}}, {m1, vr1, vc1}},
      /* [5] without the parameter scale: v [5] */
      {1, {5}, 0, 0, 0, 0, 1, false, true, w2, 1, {1}, {{5}}, {v2}},
      /* [4, 3] factored False, clip 0.5: v [4, 3] */
      {2, {4, 3}, 0, 0.5, 0, 0, 1, true, false, w3, 1, {2}, {{4, 3}}, {v3}},
      /* [4, 3] min_dim_size_to_factor 4: not factored */
      {2, {4, 3}, 0, 0, 0, 0, 4, true, true, w4, 1, {2}, {{4, 3}}, {v3}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_ada_case(&cases[i]);
  /* A rank-3 variable with two dims to factor is refused, naming it. */
  lv_optimizer *o = make_opt(lv_optimizer_defaults(LV_OPT_ADAFACTOR));
  const int64_t d3[3] = {2, 128, 128};
  expect_err(lv_optimizer_add_var_shaped(o, "conv/w/var", 3, d3, NULL), LV_ERR_INVALID, "conv/w/var has rank 3");
  lv_optimizer_config bad = lv_optimizer_defaults(LV_OPT_ADAFACTOR);
  bad.cond_is_finite = true;
  lv_optimizer *b = NULL;
  expect_err(lv_optimizer_create(&bad, lv_cpu_backend(), &b), LV_ERR_INVALID, "cond_is_finite");
  lv_optimizer_free(o);
}
END_TEST

/* Lingvo's LanguageModel.AdjustGradients (max_lstm_gradient_norm): the group's gradients
 * are clipped by their own global norm after grad_norm/all is taken and before the global
 * clip; the others are left alone. */
START_TEST(test_learner_group_clip) {
  float a[2] = {0, 0}, ga[2], b[1] = {0}, gb[1];
  lv_learner_config c = lv_learner_defaults();
  c.learning_rate = 1.0;
  c.max_group_gradient_norm = 2.5;
  c.clip_gradient_norm_to_value = 10.0;
  lv_learner_var v[] = {{"rnn/wm", a, ga, 2, true, false, 0, true, 0, {0}},
                        {"softmax/w", b, gb, 1, true, false, 0, false, 0, {0}}};
  lv_optimizer_config oc = lv_optimizer_defaults(LV_OPT_SGD);
  lv_learner *l = NULL;
  OK(lv_learner_create(&c, make_sched(LV_SCHED_CONSTANT_ONE), make_opt(oc), v, 2, &l));
  ga[0] = 3, ga[1] = 4, gb[0] = 12; /* group norm 5 -> scaled by 0.5; total norm 13 -> 10/13 */
  lv_learner_stats st;
  OK(lv_learner_step(l, 0, &st));
  CLOSE(st.grad_norm_all, 13.0, 1e-12);
  CLOSE(st.grad_scale_all, 10.0 / 13.0, 1e-7);
  CLOSE(a[0], -1.5 * 10.0 / 13.0, 1e-6);
  CLOSE(a[1], -2.0 * 10.0 / 13.0, 1e-6);
  CLOSE(b[0], -12.0 * 10.0 / 13.0, 1e-6);
  /* Under the cap: unchanged. */
  ga[0] = 0.3f, ga[1] = 0.4f, gb[0] = 1;
  float a0 = a[0];
  OK(lv_learner_step(l, 1, &st));
  CLOSE(a[0] - a0, -0.3, 1e-6);
  lv_learner_free(l);
  /* With per-variable clipping, each variable is clipped by the norm of its adjusted
   * gradient (Lingvo: gradient_adjuster, then ApplyGradNormClipping): rnn/wm's (3, 4),
   * 2.5 after the group clip, stays under 3; softmax/w's 12 is clipped to 3. */
  lv_learner_config c1 = c;
  c1.clip_gradient_norm_to_value = 0;
  c1.clip_gradient_single_norm_to_value = 3.0;
  a[0] = a[1] = b[0] = 0;
  OK(lv_learner_create(&c1, make_sched(LV_SCHED_CONSTANT_ONE), make_opt(oc), v, 2, &l));
  ga[0] = 3, ga[1] = 4, gb[0] = 12;
  OK(lv_learner_step(l, 0, &st));
  CLOSE(st.grad_norm_all, 13.0, 1e-12);
  CLOSE(a[0], -1.5, 1e-6);
  CLOSE(a[1], -2.0, 1e-6);
  CLOSE(b[0], -3.0, 1e-6);
  lv_learner_free(l);
  /* A group clip with no variable in the group is an error. */
  v[0].grad_group = false;
  expect_err(lv_learner_create(&c, make_sched(LV_SCHED_CONSTANT_ONE), make_opt(oc), v, 2, &l), LV_ERR_INVALID,
             "max_lstm_gradient_norm");
  c.max_group_gradient_norm = -1;
  expect_err(lv_learner_config_validate(&c), LV_ERR_INVALID, "max_lstm_gradient_norm");
}
END_TEST

int main(void) {
  Suite *s = suite_create("optim");
  TCase *o = tcase_create("optimizer");
  tcase_add_test(o, test_optimizer_names);
  tcase_add_test(o, test_optimizer_validation);
  tcase_add_test(o, test_optimizer_classes);
  tcase_add_test(o, test_optimizer_ranges);
  tcase_add_test(o, test_adam_three_steps);
  tcase_add_test(o, test_sgd);
  tcase_add_test(o, test_momentum);
  tcase_add_test(o, test_adagrad);
  tcase_add_test(o, test_rmsprop_adadelta);
  tcase_add_test(o, test_large_deterministic);
  tcase_add_test(o, test_optimizer_slots_host_copies);
  tcase_add_test(o, test_adafactor_reference);
  suite_add_tcase(s, o);
  TCase *l = tcase_create("learner");
  tcase_add_test(l, test_learner_sgd_vector);
  tcase_add_test(l, test_learner_grad_scale_one);
  tcase_add_test(l, test_learner_nan_inf_skipped);
  tcase_add_test(l, test_learner_nonfinite_update_undone);
  tcase_add_test(l, test_learner_consecutive_skips_stop);
  tcase_add_test(l, test_learner_single_norm_clip);
  tcase_add_test(l, test_learner_config_errors);
  tcase_add_test(l, test_learner_l2_l1);
  tcase_add_test(l, test_learner_lp_looked_up_rows);
  tcase_add_test(l, test_learner_global_norm_clip);
  tcase_add_test(l, test_learner_schedule_and_scale_off);
  tcase_add_test(l, test_learner_grad_norm_tracker);
  tcase_add_test(l, test_learner_var_norms);
  tcase_add_test(l, test_learner_for_vars);
  tcase_add_test(l, test_learner_accumulator);
  tcase_add_test(l, test_learner_group_clip);
  suite_add_tcase(s, l);
  return lv_test_run(s);
}
