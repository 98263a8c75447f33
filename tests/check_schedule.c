/* Learning-rate schedules against Lingvo's schedule_test.py vectors (reference §7.3). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"
#include "optim/optim_params.h"
#include "optim/schedule.h"
#include "params/params.h"

/* assertAllClose defaults (rtol 1e-6, atol 1e-6) unless a test says otherwise. */
#define CLOSE(got, want, atol, rtol)                                                    \
  do {                                                                                  \
    double g_ = (got), w_ = (want);                                                     \
    ck_assert_msg(fabs(g_ - w_) <= (atol) + (rtol) * fabs(w_), "%s: got %.9g, want %.9g", \
                  #got, g_, w_);                                                        \
  } while (0)

static lv_schedule *make(const lv_schedule_config *c, int splits) {
  lv_schedule *s = NULL;
  lv_status st = lv_schedule_create(c, splits, &s);
  ck_assert_msg(st == NULL, "create failed: %s", st ? lv_status_msg(st) : "");
  return s;
}

static void check_values(const lv_schedule_config *c, int splits, int n, const int64_t *steps,
                         const double *want, double atol, double rtol) {
  lv_schedule *s = make(c, splits);
  for (int i = 0; i < n; i++) {
    double v = lv_schedule_value(s, steps[i]);
    ck_assert_msg(fabs(v - want[i]) <= atol + rtol * fabs(want[i]),
                  "%s at step %lld: got %.9g, want %.9g", lv_schedule_type_names[c->type],
                  (long long)steps[i], v, want[i]);
  }
  lv_schedule_free(s);
}

static void expect_invalid(const lv_schedule_config *c, int splits, const char *needle) {
  lv_schedule *s = NULL;
  lv_status st = lv_schedule_create(c, splits, &s);
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(lv_status_code(st), LV_ERR_INVALID);
  ck_assert_msg(strstr(lv_status_msg(st), needle), "message '%s' lacks '%s'", lv_status_msg(st),
                needle);
  ck_assert_ptr_null(s);
  lv_status_free(st);
}

static lv_schedule_config linear(double x0, double y0, double x1, double y1) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_LINEAR);
  c.u.poly.start = (lv_sched_point){x0, y0};
  c.u.poly.limit = (lv_sched_point){x1, y1};
  return c;
}

static lv_schedule_config exponential(double x0, double y0, double x1, double y1) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_EXPONENTIAL);
  c.u.poly.start = (lv_sched_point){x0, y0};
  c.u.poly.limit = (lv_sched_point){x1, y1};
  return c;
}

START_TEST(test_names) {
  for (int i = 0; i < LV_SCHED_COUNT; i++) {
    lv_schedule_type t;
    ck_assert_ptr_nonnull(lv_schedule_type_names[i]);
    ck_assert(lv_schedule_type_from_name(lv_schedule_type_names[i], &t));
    ck_assert_int_eq(t, i);
  }
  lv_schedule_type t;
  ck_assert(!lv_schedule_type_from_name("NoSuchSchedule", &t));
}
END_TEST

START_TEST(test_constant) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_CONSTANT);
  c.u.constant.value = 5;
  int64_t steps[] = {0, 10, 100, 1000000};
  double want[] = {5, 5, 5, 5};
  check_values(&c, 0, 4, steps, want, 0, 0);
  lv_schedule_config one = lv_schedule_defaults(LV_SCHED_CONSTANT_ONE);
  double ones[] = {1, 1, 1, 1};
  check_values(&one, 0, 4, steps, ones, 0, 0);
}
END_TEST

START_TEST(test_piecewise_constant) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_PIECEWISE_CONSTANT);
  c.u.piecewise_constant.n = 3;
  double b[] = {300000, 400000, 500000}, v[] = {1.0, 0.1, 0.01, 0.001};
  memcpy(c.u.piecewise_constant.boundaries, b, sizeof b);
  memcpy(c.u.piecewise_constant.values, v, sizeof v);
  int64_t steps[] = {299999, 399999, 499999, 599999, 300000, 0};
  double want[] = {1.0, 0.1, 0.01, 0.001, 0.1, 1.0};
  check_values(&c, 0, 6, steps, want, 0, 0);

  /* Comparisons in float32: 16777217 rounds to 16777216 and so reaches that boundary. */
  lv_schedule_config f = lv_schedule_defaults(LV_SCHED_PIECEWISE_CONSTANT);
  f.u.piecewise_constant.n = 1;
  f.u.piecewise_constant.boundaries[0] = 16777217;
  f.u.piecewise_constant.values[0] = 1;
  f.u.piecewise_constant.values[1] = 2;
  int64_t s2[] = {16777215, 16777216};
  double w2[] = {1, 2};
  check_values(&f, 0, 2, s2, w2, 0, 0);

  c.u.piecewise_constant.boundaries[1] = 200000;
  expect_invalid(&c, 0, "sorted");
}
END_TEST

START_TEST(test_continuous) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_CONTINUOUS);
  c.u.continuous.start_step = 1000;
  c.u.continuous.half_life_steps = 100;
  c.u.continuous.min = 0.1;
  int64_t steps[] = {0, 500, 1000, 1100, 1200, 1300, 1400, 2000};
  double want[] = {1.0, 1.0, 1.0, 0.5, 0.25, 0.125, 0.1, 0.1};
  check_values(&c, 0, 8, steps, want, 1e-6, 1e-6);

  lv_schedule_config d = lv_schedule_defaults(LV_SCHED_CONTINUOUS);
  d.u.continuous.start_step = 1000;
  d.u.continuous.half_life_steps = 100;
  d.u.continuous.initial_value = 2.0;
  int64_t s2[] = {0, 1000, 1100, 1200, 1300};
  double w2[] = {2.0, 2.0, 1.0, 0.5, 0.25};
  check_values(&d, 0, 5, s2, w2, 1e-6, 1e-6);

  /* Lingvo's defaults (the learner's default schedule): 1.0 before step 400000. */
  lv_schedule_config e = lv_schedule_defaults(LV_SCHED_CONTINUOUS);
  int64_t s3[] = {0, 400000, 500000};
  double w3[] = {1.0, 1.0, 0.5};
  check_values(&e, 0, 3, s3, w3, 1e-6, 1e-6);
}
END_TEST

START_TEST(test_stepwise_exponential) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_STEPWISE_EXPONENTIAL);
  c.u.stepwise_exponential.decay = 0.5;
  c.u.stepwise_exponential.num_steps_per_decay = 1000;
  int64_t steps[] = {0, 999, 1000, 1999, 2000};
  double want[] = {1.0, 1.0, 0.5, 0.5, 0.25};
  check_values(&c, 0, 5, steps, want, 0, 0);
}
END_TEST

static const int64_t k_tf_steps[] = {0, 1000, 2000, 3000, 4000, 4500, 5000};

START_TEST(test_transformer) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_TRANSFORMER);
  double want[] = {1.74693e-07, 0.000174867, 0.00034956, 0.000524253,
                   0.000698684, 0.000658735, 0.000624937};
  check_values(&c, 0, 7, k_tf_steps, want, 1e-9, 1e-5);

  lv_schedule_config d = c;
  d.u.transformer.decay_factor = -0.8;
  double want8[] = {1.450966e-08, 1.452417e-05, 2.903383e-05, 4.354349e-05,
                    5.802700e-05, 5.281020e-05, 4.854221e-05};
  check_values(&d, 0, 7, k_tf_steps, want8, 1e-11, 1e-5);

  lv_schedule_config e = c;
  e.u.transformer.has_decay_end = true;
  e.u.transformer.decay_end = 5000;
  int64_t se[] = {0, 3000, 5000, 6000, 100000};
  double we[] = {1.74693e-07, 0.000524253, 0.000624937, 0.000624937, 0.000624937};
  check_values(&e, 0, 5, se, we, 1e-9, 1e-5);

  lv_schedule_config f = c;
  f.u.transformer.warmup_steps = 3000;
  f.u.transformer.start_step = 1000;
  int64_t sf[] = {0, 1000, 2000, 3000, 4000};
  double wf[] = {0, 0.000269, 0.000538, 0.000699, 0.000625};
  check_values(&f, 0, 5, sf, wf, 1e-6, 0);
  /* After warm-up it is the start_step-0 schedule shifted by 1000 steps. */
  lv_schedule *sf_s = make(&f, 0);
  lv_schedule_config g = c;
  g.u.transformer.warmup_steps = 3000;
  lv_schedule *sg_s = make(&g, 0);
  for (int64_t x = 3000; x <= 20000; x += 1700)
    CLOSE(lv_schedule_value(sf_s, x), lv_schedule_value(sg_s, x + 1000), 0, 1e-12);
  lv_schedule_free(sf_s);
  lv_schedule_free(sg_s);

  lv_schedule_config h = c;
  h.u.transformer.has_cyclical_step = true;
  h.u.transformer.cyclical_step = 10000;
  lv_schedule *sh = make(&h, 0), *sc = make(&c, 0);
  CLOSE(lv_schedule_value(sh, 12000), lv_schedule_value(sc, 2000), 0, 1e-12);
  lv_schedule_free(sh);
  lv_schedule_free(sc);
}
END_TEST

START_TEST(test_transformer_no_warmup) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_TRANSFORMER_NO_WARMUP);
  c.u.transformer_no_warmup.decay_start = 4000;
  double want[] = {0.000698684, 0.000698684, 0.000698684, 0.000698684,
                   0.000698684, 0.000658735, 0.000624937};
  /* Lingvo's test compares with assertAllClose's default atol of 1e-6: the plateau is
   * really model_dim^-0.5 * decay_start^-0.5, which the vector rounds to its 4001-step
   * neighbour. Check both. */
  check_values(&c, 0, 7, k_tf_steps, want, 1e-6, 1e-6);
  double plateau = pow(512, -0.5) * pow(4000, -0.5);
  double exact[] = {plateau, plateau, plateau, plateau, pow(512, -0.5) * pow(4001, -0.5),
                    0.000658735, 0.000624937};
  check_values(&c, 0, 7, k_tf_steps, exact, 1e-9, 1e-5);
}
END_TEST

START_TEST(test_transformer_mlperf) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_TRANSFORMER_MLPERF);
  c.u.transformer_mlperf.warmup_init_fraction = 0.3;
  lv_schedule *s = make(&c, 0);
  lv_schedule_config t = lv_schedule_defaults(LV_SCHED_TRANSFORMER);
  lv_schedule *ts = make(&t, 0);
  for (int64_t x = 0; x <= 4000; x += 250)
  {
    CLOSE(lv_schedule_value(s, x), 0.3 * 0.000698684 + 0.7 * lv_schedule_value(ts, x), 1e-6, 1e-6);
    double w = 4000, f = 0.3 + 0.7 * (double)x / w;
    CLOSE(lv_schedule_value(s, x), pow(512, -0.5) * (f < 1 ? f : 1) / sqrt(x > w ? x : w), 0,
          1e-12);
  }
  for (int64_t x = 4000; x <= 40000; x += 3000)
    CLOSE(lv_schedule_value(s, x), lv_schedule_value(ts, x), 1e-8, 1e-3);
  lv_schedule_free(s);
  lv_schedule_free(ts);
}
END_TEST

START_TEST(test_polynomial) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_POLYNOMIAL);
  c.u.poly.power = 2;
  c.u.poly.start = (lv_sched_point){0, 0.0};
  c.u.poly.limit = (lv_sched_point){20000, 2.0};
  int64_t steps[] = {0, 10000, 20000};
  double want[] = {0.0, 0.5, 2.0};
  check_values(&c, 0, 3, steps, want, 1e-6, 1e-6);
  c.u.poly.origin_limit = true;
  int64_t s2[] = {0, 5000, 10000, 15000, 20000};
  double w2[] = {0, 0.875, 1.5, 1.875, 2.0};
  check_values(&c, 0, 5, s2, w2, 1e-6, 1e-6);
  c.u.poly.limit.x = 0;
  expect_invalid(&c, 0, "0 must be < 0");
}
END_TEST

START_TEST(test_combined_minimum) {
  lv_schedule_config a = linear(0, 1, 2e6, 8), b = linear(2e6, 8, 4e6, 8),
                     e = exponential(4e6, 8, 8e6, 0.5);
  const lv_schedule_config *kids[] = {&a, &b, &e};
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_COMBINED_MINIMUM);
  c.u.composite.n = 3;
  c.u.composite.schedules = kids;
  int64_t steps[10];
  for (int i = 0; i < 10; i++) steps[i] = i * 1000000LL;
  double want[] = {1.0, 4.5, 8.0, 8.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.5};
  check_values(&c, 0, 10, steps, want, 1e-5, 1e-5);

  lv_schedule_config empty = lv_schedule_defaults(LV_SCHED_COMBINED_MINIMUM);
  expect_invalid(&empty, 0, "at least one");
  lv_schedule_config bad = exponential(0, 0, 1, 1);
  expect_invalid(&bad, 0, "must be > 0");
}
END_TEST

static void rampup_exp_case(lv_schedule_config c, int splits, const double *want, int n) {
  int64_t steps[10];
  for (int i = 0; i < n; i++) steps[i] = i * 1000000LL;
  check_values(&c, splits, n, steps, want, 1e-5, 1e-5);
}

START_TEST(test_linear_rampup_exp_decay_scaled_by_num_split) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_LINEAR_RAMPUP_EXP_DECAY_SCALED_BY_NUM_SPLIT);
  c.u.rampup_exp.warmup = 250000;
  c.u.rampup_exp.decay_start = 32000000;
  c.u.rampup_exp.decay_end = 64000000;
  c.u.rampup_exp.min = 0.5;
  double w1[] = {1.0, 4.5, 8.0, 8.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.5};
  rampup_exp_case(c, 8, w1, 10);

  lv_schedule_config d = c;
  d.u.rampup_exp.warmup_init = 0;
  double w2[] = {0, 4.0, 8.0, 8.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.5};
  rampup_exp_case(d, 8, w2, 10);

  lv_schedule_config m = c;
  m.u.rampup_exp.max = 5.0;
  double w3[] = {1.0, 4.5, 5.0, 5.0, 5.0, 4.0, 2.0, 1.0, 0.5, 0.5};
  rampup_exp_case(m, 8, w3, 10);
  /* Explicit num_splits wins over the cluster's 32 splits. */
  m.u.rampup_exp.num_splits = 8;
  rampup_exp_case(m, 32, w3, 10);

  lv_schedule_config z = c;
  z.u.rampup_exp.warmup = 0;
  double w4[] = {8.0, 8.0, 8.0, 8.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.5};
  rampup_exp_case(z, 8, w4, 10);

  lv_schedule_config y = z;
  y.u.rampup_exp.decay_start = 0;
  y.u.rampup_exp.decay_end = 32000000;
  double w5[] = {8.0, 4.0, 2.0, 1.0, 0.5, 0.5};
  rampup_exp_case(y, 8, w5, 6);

  /* Without num_splits the cluster's splits are required. */
  expect_invalid(&c, 0, "num_splits");
}
END_TEST

START_TEST(test_linear_rampup_exp_decay) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_LINEAR_RAMPUP_EXP_DECAY);
  ck_assert_int_eq(c.u.rampup_exp.num_splits, 1);
  ck_assert(c.u.rampup_exp.warmup_init == 0.0);
  c.u.rampup_exp.warmup = 100;
  c.u.rampup_exp.decay_start = 200;
  c.u.rampup_exp.decay_end = 300;
  c.u.rampup_exp.min = 0.25;
  int64_t steps[] = {0, 50, 100, 150, 200, 250, 300, 1000};
  double want[] = {0.0, 0.5, 1.0, 1.0, 1.0, 0.5, 0.25, 0.25};
  check_values(&c, 8, 8, steps, want, 1e-6, 1e-6);
  c.u.rampup_exp.num_splits = 2;
  expect_invalid(&c, 0, "num_splits must be 1");
}
END_TEST

START_TEST(test_linear_rampup_sqrt_decay) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY);
  c.u.rampup_sqrt.warmup_steps = 100;
  c.u.rampup_sqrt.peak = 2.0;
  int64_t steps[] = {0, 10, 50, 100, 200, 500, 1000};
  double want[] = {0.02, 0.2, 1.0, 2.0, 1.414, 0.894, 0.632};
  check_values(&c, 0, 7, steps, want, 1e-3, 0);
}
END_TEST

START_TEST(test_linear_rampup_sqrt_decay_by_bs) {
  lv_schedule_config c =
      lv_schedule_defaults(LV_SCHED_LINEAR_RAMPUP_SQRT_DECAY_BY_BATCH_SIZE_AND_REPLICAS);
  c.u.rampup_sqrt_bs.warmup_examples = 100000;
  expect_invalid(&c, 10, "batch_size");
  c.u.rampup_sqrt_bs.has_batch_size = true;
  c.u.rampup_sqrt_bs.batch_size = 100;
  int64_t steps[] = {-1, 49, 99, 399, 1599};
  double want[] = {0.0, 0.05, 0.1, 0.05, 0.025};
  check_values(&c, 10, 5, steps, want, 1e-6, 1e-6);
  c.u.rampup_sqrt_bs.num_replicas = 10;
  check_values(&c, 0, 5, steps, want, 1e-6, 1e-6);
}
END_TEST

START_TEST(test_ema_decay) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_EMA_DECAY);
  int64_t steps[] = {0, 25000, 50000, 75000, 100000, 125000};
  double want[] = {0.1, 0.99964017, 0.99982005, 0.99988, 0.9999, 0.9999};
  check_values(&c, 0, 6, steps, want, 1e-6, 1e-6);
}
END_TEST

START_TEST(test_linear_rampup_piecewise_constant) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_LINEAR_RAMPUP_PIECEWISE_CONSTANT);
  c.u.rampup_piecewise.n = 4;
  double b[] = {40, 64, 80, 96}, l[] = {1.0, 0.1, 0.01, 0.001};
  memcpy(c.u.rampup_piecewise.boundaries, b, sizeof b);
  memcpy(c.u.rampup_piecewise.lrs, l, sizeof l);
  int64_t steps[15];
  for (int i = 0; i < 15; i++) steps[i] = i;
  double want[] = {0.0, 1.6, 3.2, 4.8, 6.4, 8.0, 8.0, 8.0, 0.8, 0.8, 0.08, 0.08, 0.008, 0.008, 0.008};
  check_values(&c, 8, 15, steps, want, 1e-6, 1e-6);
  c.u.rampup_piecewise.n = 1;
  expect_invalid(&c, 8, "boundaries");
}
END_TEST

static const int64_t k_cos_steps[] = {0, 100000, 200000, 300000, 400000, 500000};

START_TEST(test_cosine) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_COSINE);
  c.u.cosine.initial_value = 3.0;
  c.u.cosine.final_value = 1.0;
  c.u.cosine.total_steps = 400000;
  double want[] = {3.0, cos(M_PI / 4) + 2, 2.0, cos(3 * M_PI / 4) + 2, 1.0, 1.0};
  check_values(&c, 0, 6, k_cos_steps, want, 1e-6, 1e-6);
  c.u.cosine.cyclical = true;
  double half[] = {3.0, cos(M_PI / 4) + 2, 2.0, cos(3 * M_PI / 4) + 2, 3.0, cos(M_PI / 4) + 2};
  check_values(&c, 0, 6, k_cos_steps, half, 1e-6, 1e-6);
  c.u.cosine.half_cycle = false;
  double full[] = {3.0, cos(M_PI / 4) + 2, 2.0, cos(3 * M_PI / 4) + 2, 1.0, cos(5 * M_PI / 4) + 2};
  check_values(&c, 0, 6, k_cos_steps, full, 1e-6, 1e-6);
  c.u.cosine.total_steps = 0;
  expect_invalid(&c, 0, "total_steps");
}
END_TEST

START_TEST(test_linear_rampup_cosine) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_LINEAR_RAMPUP_COSINE);
  c.u.rampup_cosine.warmup_steps = 200;
  c.u.rampup_cosine.initial_value = 3.0;
  c.u.rampup_cosine.final_value = 1.0;
  c.u.rampup_cosine.total_steps = 400000;
  int64_t steps[] = {0, 100, 200, 100000, 200000, 300000, 399999, 400000, 500000};
  double want[] = {0.0, 1.5, 3.0, cos(M_PI / 4) + 2, 2.0, cos(3 * M_PI / 4) + 2, 1.0, 1.0, 1.0};
  check_values(&c, 0, 9, steps, want, 1e-5, 1e-5);
  c.u.rampup_cosine.cyclical = true;
  want[7] = 3.0;
  want[8] = cos(M_PI / 4) + 2;
  check_values(&c, 0, 9, steps, want, 1e-5, 1e-5);
}
END_TEST

START_TEST(test_piecewise) {
  lv_schedule_config a = linear(0, 0, 20000, 2);
  lv_schedule_config b = lv_schedule_defaults(LV_SCHED_COSINE);
  b.u.cosine.initial_value = 2.0;
  b.u.cosine.total_steps = 40000;
  const lv_schedule_config *kids[] = {&a, &b};
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_PIECEWISE);
  c.u.composite.n = 2;
  c.u.composite.schedules = kids;
  c.u.composite.boundaries[0] = 20000;
  int64_t steps[7];
  for (int i = 0; i < 7; i++) steps[i] = i * 10000;
  double want[] = {0.0, 1.0, 2.0, cos(M_PI / 4) + 1, 1.0, cos(3 * M_PI / 4) + 1, 0.0};
  check_values(&c, 0, 7, steps, want, 1e-6, 1e-6);
  c.u.composite.boundaries[0] = -1;
  expect_invalid(&c, 0, "boundaries must be whole step numbers");
  c.u.composite.boundaries[0] = 2.5;
  expect_invalid(&c, 0, "boundaries must be whole step numbers");
}
END_TEST

START_TEST(test_cycle) {
  lv_schedule_config a = linear(0, 0, 10, 1);
  lv_schedule_config b = lv_schedule_defaults(LV_SCHED_CONSTANT);
  b.u.constant.value = 5.0;
  const lv_schedule_config *kids[] = {&a, &b};
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_CYCLE);
  c.u.composite.n = 2;
  c.u.composite.schedules = kids;
  c.u.composite.steps[0] = 6;
  c.u.composite.steps[1] = 4;
  int64_t steps[7];
  for (int i = 0; i < 7; i++) steps[i] = 2 * i;
  double absolute[] = {0, .2, .4, 5, 5, 1.0, 1.0};
  check_values(&c, 0, 7, steps, absolute, 1e-6, 1e-6);
  c.u.composite.pass_absolute_step = false;
  double relative[] = {0, .2, .4, 5, 5, 0, .2};
  check_values(&c, 0, 7, steps, relative, 1e-6, 1e-6);
  /* Steps are whole numbers: [0.5] made a period of 0 (a division by zero at the first
   * value), 1e19 overflowed int64. */
  c.u.composite.steps[0] = 0.25;
  c.u.composite.steps[1] = 0.25;
  expect_invalid(&c, 0, "steps must be whole numbers");
  c.u.composite.steps[0] = 1e19;
  c.u.composite.steps[1] = 4;
  expect_invalid(&c, 0, "steps must be whole numbers");
  c.u.composite.steps[0] = 0;
  c.u.composite.steps[1] = 0;
  expect_invalid(&c, 0, "must sum to a whole number in [1, 2^62]");
  /* A DevBasedSchedule only works as task.train.lr_schedule itself. */
  c.u.composite.steps[0] = 6;
  lv_schedule_config d = lv_schedule_defaults(LV_SCHED_DEV_BASED);
  kids[1] = &d;
  expect_invalid(&c, 0, "a DevBasedSchedule inside another schedule is not supported");
}
END_TEST

START_TEST(test_annealing) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_ANNEALING);
  expect_invalid(&c, 0, "init");
  c.u.annealing.init = 1;
  c.u.annealing.lower_bound = 0.5;
  c.u.annealing.factor = 0.8;
  int64_t steps[] = {0, 1, 2, 3, 4};
  double want[] = {1.0, 0.8, 0.64, 0.512, 0.5};
  check_values(&c, 0, 5, steps, want, 1e-6, 1e-6);
  c.u.annealing.factor = 1.5;
  expect_invalid(&c, 0, "factor");
}
END_TEST

START_TEST(test_inverse_sigmoid) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_INVERSE_SIGMOID);
  expect_invalid(&c, 0, "k must be set");
  c.u.inverse_sigmoid.has_k = true;
  c.u.inverse_sigmoid.k = 10000;
  int64_t steps[8];
  for (int i = 0; i < 8; i++) steps[i] = i * 25000;
  double want[] = {0.999900, 0.998783, 0.985376, 0.846880, 0.312242, 0.035928, 0.003050, 0.000251};
  check_values(&c, 0, 8, steps, want, 1e-6, 1e-5);
}
END_TEST

START_TEST(test_linear_rampup_decay) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_LINEAR_RAMPUP_DECAY);
  c.u.linear_rampup_decay.peak = 100;
  c.u.linear_rampup_decay.end = 300;
  int64_t steps[] = {0, 50, 100, 200, 300, 400};
  double want[] = {0, 0.5, 1.0, 0.5, 0.0, 0.0};
  check_values(&c, 0, 6, steps, want, 1e-9, 0);
}
END_TEST

START_TEST(test_sqrt_decay) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_SQRT_DECAY);
  c.u.sqrt_decay.warmup_steps = 100;
  c.u.sqrt_decay.multiplier = 2.0;
  c.u.sqrt_decay.offset = 50;
  int64_t steps[] = {0, 150, 450};
  double want[] = {0.2, 0.2, 0.1};
  check_values(&c, 0, 3, steps, want, 1e-9, 0);

  lv_schedule_config z = lv_schedule_defaults(LV_SCHED_SQRT_DECAY_TO_ZERO);
  z.u.sqrt_decay_to_zero.warmup_steps = 100;
  z.u.sqrt_decay_to_zero.final_steps = 10000;
  z.u.sqrt_decay_to_zero.starting_lr = 0.5;
  /* starting_lr during warm-up, zero at final_steps. */
  int64_t zs[] = {0, 100, 10000};
  double zw[] = {0.5, 0.5, 0.0};
  check_values(&z, 0, 3, zs, zw, 1e-9, 0);
  z.u.sqrt_decay_to_zero.final_steps = 50;
  expect_invalid(&z, 0, "final_steps");
}
END_TEST


/* ---- schedules from params: the class table, the composites, lists of params ---- */

static void register_once(void) {
  static int done;
  if (!done) lv_optim_register_all();
  done = 1;
}

/* Params of class cls with text applied (FromText). */
static lv_params *sched_params(const char *cls, const char *text) {
  register_once();
  lv_params *p = NULL;
  lv_status st = lv_registry_instantiate(cls, &p);
  ck_assert_msg(!st, "%s", st ? lv_status_msg(st) : "");
  st = lv_params_from_text(p, text, "t");
  ck_assert_msg(!st, "from_text: %s", st ? lv_status_msg(st) : "");
  return p;
}

static void check_params_values(const lv_params *p, int n, const int64_t *steps, const double *want) {
  lv_schedule *s = NULL;
  lv_status st = lv_schedule_from_params(p, 0, &s);
  ck_assert_msg(!st, "from_params: %s", st ? lv_status_msg(st) : "");
  for (int i = 0; i < n; i++) CLOSE(lv_schedule_value(s, steps[i]), want[i], 1e-6, 1e-6);
  lv_schedule_free(s);
}

static void expect_params_error(const lv_params *p, const char *needle) {
  lv_schedule *s = NULL;
  lv_status st = lv_schedule_from_params(p, 0, &s);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(lv_status_msg(st), needle), "message '%s' lacks '%s'", lv_status_msg(st), needle);
  ck_assert_ptr_null(s);
  lv_status_free(st);
}

START_TEST(test_table_defaults_match_params) {
  register_once();
  /* Every class is registered, its params come from its table, and default params
   * read back into exactly lv_schedule_defaults. */
  for (int t = 0; t < LV_SCHED_COUNT; t++) {
    ck_assert_ptr_nonnull(lv_registry_find(lv_schedule_type_names[t]));
    lv_params *p = lv_schedule_params((lv_schedule_type)t);
    const lv_schedule_class *k = lv_schedule_class_of((lv_schedule_type)t);
    /* + cls, name (and DevBasedSchedule's metric_history, read by the trainer) */
    ck_assert_int_eq(lv_params_num_keys(p), k->nparams + 2 + (t == LV_SCHED_DEV_BASED));
    for (int i = 0; i < k->nparams; i++) ck_assert(lv_params_has(p, k->params[i].name));
    lv_params_free(p);
  }
}
END_TEST

START_TEST(test_combined_minimum_from_params) {
  /* Lingvo's CombinedMinimum vector, built from text as ToText writes it. */
  lv_params *p = sched_params("CombinedMinimumSchedule",
                              "schedules[0].cls : 'LinearSchedule'\n"
                              "schedules[0].start : [0, 1.0]\n"
                              "schedules[0].limit : [2000000, 8.0]\n"
                              "schedules[1].cls : 'LinearSchedule'\n"
                              "schedules[1].start : [2000000, 8.0]\n"
                              "schedules[1].limit : [4000000, 8.0]\n"
                              "schedules[2].cls : 'ExponentialSchedule'\n"
                              "schedules[2].start : [4000000, 8.0]\n"
                              "schedules[2].limit : [8000000, 0.5]\n");
  int64_t steps[10];
  for (int i = 0; i < 10; i++) steps[i] = i * 1000000LL;
  const double want[] = {1.0, 4.5, 8.0, 8.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.5};
  check_params_values(p, 10, steps, want);
  /* ToText round trip into the class's defaults (one default LinearSchedule item). */
  char *text = lv_params_to_text(p);
  ck_assert_ptr_nonnull(strstr(text, "schedules[2].cls : 'ExponentialSchedule'\n"));
  lv_params *q = sched_params("CombinedMinimumSchedule", text);
  ck_assert(lv_params_equal(p, q));
  free(text);
  lv_params_free(q);
  lv_params_free(p);
}
END_TEST

START_TEST(test_piecewise_from_params) {
  lv_params *p = sched_params("PiecewiseSchedule",
                              "boundaries : [20000]\n"
                              "schedules[0].cls : 'LinearSchedule'\n"
                              "schedules[0].start : [0, 0.0]\n"
                              "schedules[0].limit : [20000, 2.0]\n"
                              "schedules[1].cls : 'CosineSchedule'\n"
                              "schedules[1].initial_value : 2.0\n"
                              "schedules[1].total_steps : 40000\n");
  const int64_t steps[] = {0, 10000, 20000, 30000, 40000, 50000, 60000};
  const double want[] = {0.0, 1.0, 2.0, cos(M_PI / 4) + 1, 1.0, cos(3 * M_PI / 4) + 1, 0.0};
  check_params_values(p, 7, steps, want);
  /* len(schedules) must be len(boundaries) + 1 (Lingvo's assertion). */
  ck_assert_ptr_null(lv_params_from_text(p, "boundaries : [100, 200]", "t"));
  expect_params_error(p, "PiecewiseSchedule.schedules: expected len(boundaries) + 1 = 3 items, found 2");
  ck_assert_ptr_null(lv_params_from_text(p, "boundaries : [300]", "t"));
  ck_assert_ptr_null(lv_params_from_text(p, "schedules[1].total_steps : 0", "t"));
  expect_params_error(p, "CosineSchedule: total_steps must be > 0");
  lv_params_free(p);
}
END_TEST

START_TEST(test_cycle_from_params) {
  const char *text = "steps : [6, 4]\n"
                     "schedules[0].cls : 'LinearSchedule'\n"
                     "schedules[0].start : [0, 0.0]\n"
                     "schedules[0].limit : [10, 1.0]\n"
                     "schedules[1].cls : 'Constant'\n"
                     "schedules[1].value : 5.0\n";
  const int64_t steps[] = {0, 2, 4, 6, 8, 10, 12};
  lv_params *p = sched_params("CycleSchedule", text);
  const double absolute[] = {0, .2, .4, 5, 5, 1.0, 1.0};
  check_params_values(p, 7, steps, absolute);
  ck_assert_ptr_null(lv_params_from_text(p, "pass_absolute_step : False", "t"));
  const double relative[] = {0, .2, .4, 5, 5, 0, .2};
  check_params_values(p, 7, steps, relative);
  /* A nested composite: Cycle of [CombinedMinimum[Constant 3, Constant 2], Constant 5]. */
  ck_assert_ptr_null(lv_params_from_text(p,
                                         "schedules[0].cls : 'CombinedMinimumSchedule'\n"
                                         "schedules[0].schedules : []\n"
                                         "schedules[0].schedules[0].cls : 'Constant'\n"
                                         "schedules[0].schedules[0].value : 3.0\n"
                                         "schedules[0].schedules[1].cls : 'Constant'\n"
                                         "schedules[0].schedules[1].value : 2.0\n",
                                         "t"));
  const double nested[] = {2, 2, 2, 5, 5, 2, 2};
  check_params_values(p, 7, steps, nested);
  ck_assert_ptr_null(lv_params_from_text(p, "steps : [6]", "t"));
  expect_params_error(p, "CycleSchedule.steps: expected len(schedules) = 2 items, found 1");
  lv_params_free(p);
}
END_TEST

START_TEST(test_composite_text_errors) {
  register_once();
  lv_params *p = NULL;
  ck_assert_ptr_null(lv_registry_instantiate("CombinedMinimumSchedule", &p));
  /* Past the end: a new item goes at the end, with its cls. */
  lv_status st = lv_params_from_text(p, "schedules[2].cls : 'Constant'", "o");
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(lv_status_msg(st), "o:1: schedules[2]: index 2 out of range: schedules has 1 item"), "%s",
                lv_status_msg(st));
  lv_status_free(st);
  st = lv_params_from_text(p, "schedules[0].valu : 2.0\nschedules[0].cls : 'Constan'", "o");
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(lv_status_msg(st), "o:2: schedules[0].cls: unknown class \"Constan\" (did you mean: ["),
                "%s", lv_status_msg(st));
  lv_status_free(st);
  st = lv_params_from_text(p, "schedules : [1, 2]", "o");
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(lv_status_msg(st), "o:1: schedules: expected [] or keys below its items"), "%s",
                lv_status_msg(st));
  lv_status_free(st);
  lv_params_free(p);
}
END_TEST

static char *write_tmp(const char *text) {
  char *path = strdup("/tmp/check_schedule_XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return path;
}

/* A train-like tree: lr_schedule slot, as task.train has. */
static lv_params *train_tree(void) {
  register_once();
  lv_params *p = lv_params_new();
  lv_params_define_params(p, "lr_schedule", lv_schedule_params(LV_SCHED_CONSTANT), "Schedule.");
  return p;
}

START_TEST(test_composite_experiment_file) {
  char *path = write_tmp("Base = {\n"
                         "  lr_schedule = {\n"
                         "    cls = \"PiecewiseSchedule\";\n"
                         "    boundaries = [100];\n"
                         "    schedules = (\n"
                         "      { cls = \"PiecewiseConstantSchedule\"; boundaries = [50]; values = [1.0, 0.5]; },\n"
                         "      { cls = \"Constant\"; value = 0.1; }\n"
                         "    );\n"
                         "  };\n"
                         "};\n"
                         "Derived = {\n"
                         "  base = \"Base\";\n"
                         "  lr_schedule = { boundaries = []; schedules = ( { cls = \"Constant\"; value = 2.0; } ); };\n"
                         "};\n"
                         "Bad = {\n"
                         "  lr_schedule = {\n"
                         "    cls = \"CombinedMinimumSchedule\";\n"
                         "    schedules = (\n"
                         "      { cls = \"Constant\"; valeu = 2.0; },\n"
                         "      { value = 1.0; },\n"
                         "      { cls = \"Constnt\"; },\n"
                         "      5\n"
                         "    );\n"
                         "  };\n"
                         "};\n");
  lv_params *p = train_tree();
  lv_status st = lv_params_load_cfg(p, path, "Base");
  ck_assert_msg(!st, "%s", st ? lv_status_msg(st) : "");
  ck_assert_int_eq(lv_params_params_list_len(p, "lr_schedule.schedules"), 2);
  ck_assert_str_eq(lv_params_str(p, "lr_schedule.schedules[0].cls"), "PiecewiseConstantSchedule");
  const int64_t steps[] = {0, 49, 50, 99, 100, 1000};
  const double want[] = {1.0, 1.0, 0.5, 0.5, 0.1, 0.1};
  check_params_values(lv_params_sub(p, "lr_schedule"), 6, steps, want);
  /* The text form of the loaded tree reads back into a fresh tree. */
  char *text = lv_params_to_text(p);
  lv_params *q = train_tree();
  st = lv_params_from_text(q, text, "t");
  ck_assert_msg(!st, "%s", st ? lv_status_msg(st) : "");
  ck_assert(lv_params_equal(p, q));
  free(text);
  lv_params_free(q);
  lv_params_free(p);

  /* A derived group's list replaces the base's whole. */
  p = train_tree();
  st = lv_params_load_cfg(p, path, "Derived");
  ck_assert_msg(!st, "%s", st ? lv_status_msg(st) : "");
  ck_assert_int_eq(lv_params_params_list_len(p, "lr_schedule.schedules"), 1);
  ck_assert_double_eq(lv_params_float(p, "lr_schedule.schedules[0].value"), 2.0);
  lv_params_free(p);

  p = train_tree();
  st = lv_params_load_cfg(p, path, "Bad");
  ck_assert_ptr_nonnull(st);
  const char *m = lv_status_msg(st);
  char want_msg[4][256];
  snprintf(want_msg[0], 256, "%s:19: unknown key lr_schedule.schedules[0].valeu (did you mean: [value])", path);
  snprintf(want_msg[1], 256, "%s:20: lr_schedule.schedules[1]: an item of a list of params needs cls", path);
  snprintf(want_msg[2], 256, "%s:21: lr_schedule.schedules[2].cls: unknown class \"Constnt\"", path);
  snprintf(want_msg[3], 256, "%s:22: lr_schedule.schedules[3]: expected a group", path);
  for (int i = 0; i < 4; i++) ck_assert_msg(strstr(m, want_msg[i]), "'%s' lacks '%s'", m, want_msg[i]);
  lv_status_free(st);
  lv_params_free(p);
  unlink(path);
  free(path);
}
END_TEST

START_TEST(test_composite_overrides) {
  lv_params *p = train_tree();
  lv_status st = lv_params_apply_overrides(
      p,
      "lr_schedule.cls : 'CombinedMinimumSchedule'; lr_schedule.schedules[0].cls : 'Constant';"
      "lr_schedule.schedules[0].value : 0.5; lr_schedule.schedules[1].cls : 'Constant';"
      "lr_schedule.schedules[1].value : 0.25",
      NULL);
  ck_assert_msg(!st, "%s", st ? lv_status_msg(st) : "");
  const int64_t steps[] = {0, 10};
  const double want[] = {0.25, 0.25};
  check_params_values(lv_params_sub(p, "lr_schedule"), 2, steps, want);
  lv_params_free(p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("schedule");
  TCase *tc = tcase_create("schedule");
  tcase_add_test(tc, test_names);
  tcase_add_test(tc, test_constant);
  tcase_add_test(tc, test_piecewise_constant);
  tcase_add_test(tc, test_continuous);
  tcase_add_test(tc, test_stepwise_exponential);
  tcase_add_test(tc, test_transformer);
  tcase_add_test(tc, test_transformer_no_warmup);
  tcase_add_test(tc, test_transformer_mlperf);
  tcase_add_test(tc, test_polynomial);
  tcase_add_test(tc, test_combined_minimum);
  tcase_add_test(tc, test_linear_rampup_exp_decay_scaled_by_num_split);
  tcase_add_test(tc, test_linear_rampup_exp_decay);
  tcase_add_test(tc, test_linear_rampup_sqrt_decay);
  tcase_add_test(tc, test_linear_rampup_sqrt_decay_by_bs);
  tcase_add_test(tc, test_ema_decay);
  tcase_add_test(tc, test_linear_rampup_piecewise_constant);
  tcase_add_test(tc, test_cosine);
  tcase_add_test(tc, test_linear_rampup_cosine);
  tcase_add_test(tc, test_piecewise);
  tcase_add_test(tc, test_cycle);
  tcase_add_test(tc, test_annealing);
  tcase_add_test(tc, test_inverse_sigmoid);
  tcase_add_test(tc, test_linear_rampup_decay);
  tcase_add_test(tc, test_sqrt_decay);
  tcase_add_test(tc, test_table_defaults_match_params);
  tcase_add_test(tc, test_combined_minimum_from_params);
  tcase_add_test(tc, test_piecewise_from_params);
  tcase_add_test(tc, test_cycle_from_params);
  tcase_add_test(tc, test_composite_text_errors);
  tcase_add_test(tc, test_composite_experiment_file);
  tcase_add_test(tc, test_composite_overrides);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
