/* Lingvo's early stopping (lingvo/core/early_stop.py, the best_step op) and
 * DevBasedSchedule: the history file format, best_step on Lingvo's own test data
 * (lingvo/core/ops/testdata/history.txt, history_bleu.txt copied to
 * tests/data/early_stop/) with the values of best_step_op_test.py, EarlyStop's trigger on
 * the cases of early_stop_test.py, and DevBasedSchedule's decay on schedule_test.py's
 * vector. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "check_util.h"
#include "optim/early_stop.h"
#include "optim/optim_params.h"
#include "optim/schedule.h"
#include "params/params.h"

static const char *testdata(void) {
  const char *t = getenv("LV_TESTDATA");
  return t && *t ? t : "tests/data";
}

static void best(const char *path, double tol, bool minimize, int64_t want_best, int64_t want_last) {
  int64_t b = -1, l = -1;
  EXPECT_OK(lv_best_step(path, tol, minimize, &b, &l));
  ck_assert_int_eq(b, want_best);
  ck_assert_int_eq(l, want_last);
}

START_TEST(test_best_step_lingvo_data) {
  char h[512], bleu[512];
  snprintf(h, sizeof h, "%s/early_stop/history.txt", testdata());
  snprintf(bleu, sizeof bleu, "%s/early_stop/history_bleu.txt", testdata());
  best(h, 0.0, true, 42122, 42792);   /* testTol0 */
  best(h, 0.1, true, 37553, 42792);   /* testTolNon0 */
  best("", 0.0, true, 0, 0);          /* testNoFile */
  best(bleu, 0.0, false, 41500, 46800); /* testAscendingValTol0 */
}
END_TEST

static char g_dir[] = "/tmp/lv_early_stop.XXXXXX";

static char *tmp_path(const char *name) {
  static char p[256];
  snprintf(p, sizeof p, "%s/%s", g_dir, name);
  return p;
}

/* MetricHistoryTest.testMetricHistoriesFiles: "%d %f" lines, appended. */
START_TEST(test_history_file_format) {
  lv_metric_history mh = {"eval_dev", "log_pplx", true};
  char path[512];
  EXPECT_OK(lv_metric_history_file("/logs/run", &mh, path, sizeof path));
  ck_assert_str_eq(path, "/logs/run/eval_dev/log_pplx.history.txt");
  char *f = tmp_path("m1.history.txt");
  unlink(f);
  EXPECT_OK(lv_metric_history_append(f, 1, 10.0));
  EXPECT_OK(lv_metric_history_append(f, 2, 5.0));
  char *data = NULL;
  size_t len = 0;
  EXPECT_OK(lv_file_read_all(f, &data, &len));
  ck_assert_str_eq(data, "1 10.000000\n2 5.000000\n");
  free(data);
  /* The first line of a step wins (std::map::insert); steps are read in order. */
  FILE *w = fopen(f, "w");
  fputs("7 1.0\n3 9.0\n7 0.5\n5 8.0\n", w);
  fclose(w);
  best(f, 0.0, true, 7, 7);
  /* A malformed line names the file and line. */
  w = fopen(f, "w");
  fputs("1 10.0\n2 five\n", w);
  fclose(w);
  int64_t b, l;
  lv_status s = lv_best_step(f, 0.0, true, &b, &l);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "m1.history.txt:2: expected \"STEP VALUE\""), "%s", lv_status_msg(s));
  lv_status_free(s);
}
END_TEST

/* EarlyStopTest.testEarlyStopping and testEarlyStoppingAscendingMetric: after each
 * append, (best, last) and whether to stop. */
static void early_stop_case(bool minimize, const int64_t *steps, const double *values, const int64_t *bests,
                            const bool *stops, int n) {
  lv_early_stop_config c = {.history = {"eval_dev", "m", minimize}, .tolerance = 1.0, .window = 2};
  char *f = tmp_path(minimize ? "es_min.txt" : "es_max.txt");
  unlink(f);
  for (int i = 0; i < n; i++) {
    EXPECT_OK(lv_metric_history_append(f, steps[i], values[i]));
    int64_t b, l;
    EXPECT_OK(lv_best_step(f, c.tolerance, minimize, &b, &l));
    ck_assert_int_eq(b, bests[i]);
    ck_assert_int_eq(l, steps[i]);
    ck_assert_int_eq(lv_early_stop_triggered(&c, b, l), stops[i]);
  }
}

START_TEST(test_early_stop_lingvo_cases) {
  const int64_t s1[] = {1, 2, 3, 5}, b1[] = {1, 2, 2, 2};
  const double v1[] = {10.0, 5.0, 4.0, 4.0};
  const bool t1[] = {false, false, false, true};
  early_stop_case(true, s1, v1, b1, t1, 4);
  const int64_t s2[] = {1, 2, 3, 5, 6}, b2[] = {1, 1, 3, 3, 3};
  const double v2[] = {0.0, 1.0, 2.5, 2.0, 1.0};
  const bool t2[] = {false, false, false, false, true};
  early_stop_case(false, s2, v2, b2, t2, 5);
  /* window 0 never stops; min_steps holds it back. */
  lv_early_stop_config off = {.window = 0};
  ck_assert(!lv_early_stop_triggered(&off, 1, 1000));
  lv_early_stop_config ms = {.window = 2, .min_steps = 10};
  ck_assert(!lv_early_stop_triggered(&ms, 2, 5));
  ck_assert(lv_early_stop_triggered(&ms, 2, 10));
}
END_TEST

/* schedule_test.py's DevBasedSchedule vector: tolerance 1, window 2, decay 0.5,
 * min_factor 0.2, the history growing one line at a time. */
START_TEST(test_dev_based_schedule) {
  lv_schedule_config c = lv_schedule_defaults(LV_SCHED_DEV_BASED);
  ck_assert(c.u.dev_based.window == 10000 && c.u.dev_based.decay == 0.5 && c.u.dev_based.min_factor == 0.01);
  c.u.dev_based.tolerance = 1.0, c.u.dev_based.window = 2, c.u.dev_based.decay = 0.5, c.u.dev_based.min_factor = 0.2;
  lv_schedule *s = NULL;
  EXPECT_OK(lv_schedule_create(&c, 0, &s));
  ck_assert(lv_schedule_value(s, 0) == 1.0);
  const int64_t steps[] = {1, 2, 5, 6, 9, 10, 13};
  const double vals[] = {10.0, 5.0, 4.0, 4.0, 4.0, 3.9, 3.0};
  const double want[] = {1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.2};
  char *f = tmp_path("dev.txt");
  unlink(f);
  for (int i = 0; i < 7; i++) {
    EXPECT_OK(lv_metric_history_append(f, steps[i], vals[i]));
    int64_t b, l;
    EXPECT_OK(lv_best_step(f, 1.0, true, &b, &l));
    lv_schedule_dev_based_update(s, b, l);
    ck_assert_msg(fabs(lv_schedule_value(s, steps[i]) - want[i]) < 1e-7, "after (%lld, %g): %g, want %g",
                  (long long)steps[i], vals[i], lv_schedule_value(s, steps[i]), want[i]);
  }
  ck_assert_int_eq(*lv_schedule_dev_based_ref_step(s), 13);
  lv_schedule_free(s);
}
END_TEST

/* The params: EarlyStop under task.train, DevBasedSchedule's metric_history, and the
 * histories an evaler keeps. */
START_TEST(test_params) {
  lv_optim_register_all();
  lv_params *t = lv_params_new();
  lv_optim_define_train_params(t);
  lv_early_stop_config es;
  EXPECT_OK(lv_early_stop_from_params(t, &es));
  ck_assert_int_eq(es.window, 0);
  lv_metric_history h[4];
  ck_assert_int_eq(lv_metric_histories_from_params(t, h, 4), 0);
  ck_assert(!lv_params_set_int(t, "early_stop.window", 100));
  ck_assert(!lv_params_set_string(t, "early_stop.metric_history.jobname", "decoder_dev"));
  ck_assert(!lv_params_set_string(t, "early_stop.metric_history.metric", "canonical_bleu"));
  ck_assert(!lv_params_set_bool(t, "early_stop.metric_history.minimize", false));
  EXPECT_OK(lv_early_stop_from_params(t, &es));
  ck_assert_int_eq(es.window, 100);
  ck_assert_str_eq(es.history.jobname, "decoder_dev");
  ck_assert(!es.history.minimize);
  lv_params *ds = NULL;
  EXPECT_OK(lv_registry_instantiate("DevBasedSchedule", &ds));
  ck_assert(!lv_params_set_params(t, "lr_schedule", ds));
  ck_assert_int_eq(lv_metric_histories_from_params(t, h, 4), 2);
  ck_assert_str_eq(h[1].jobname, "eval_dev");
  ck_assert_str_eq(h[1].metric, "log_pplx");
  ck_assert(!lv_params_set_bool(t, "early_stop.metric_history.tfevent_file", true));
  lv_status s = lv_early_stop_from_params(t, &es);
  ck_assert_ptr_nonnull(s);
  ck_assert(strstr(lv_status_msg(s), "tfevent_file"));
  lv_status_free(s);
  lv_params_free(t);
}
END_TEST

int main(void) {
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  Suite *s = suite_create("early_stop");
  TCase *tc = tcase_create("early_stop");
  tcase_add_test(tc, test_best_step_lingvo_data);
  tcase_add_test(tc, test_history_file_format);
  tcase_add_test(tc, test_early_stop_lingvo_cases);
  tcase_add_test(tc, test_dev_based_schedule);
  tcase_add_test(tc, test_params);
  suite_add_tcase(s, tc);
  int rc = lv_test_run(s);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}
