/* Runners: checkpoint policy (Lingvo's ShouldSave), retention, the state file, restore by
 * name with every mismatch listed, the captioned thumbnails, and the checkpoint follower
 * driven through fabricated train dirs with a sleep hook (no test sleeps). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"
#include "check_util.h"
#include "io/ckpt_state.h"
#include "io/caption.h"
#include "models/task.h"
#include "runners/checkpointer.h"
#include "runners/follower.h"

static char g_dir[256];

static void setup(void) { lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_check_runners"); }
static void teardown(void) { lv_test_rmtree(g_dir); }

static lv_params *train_params(int64_t keep, int64_t every_steps) {
  lv_params *p = lv_params_new();
  lv_params_define_int(p, "save_interval_seconds", 600, "s");
  if (every_steps > 0) lv_params_define_int(p, "save_interval_steps", every_steps, "s");
  else lv_params_define_none(p, "save_interval_steps", LV_PV_INT, "s");
  lv_params_define_int(p, "save_max_to_keep", keep, "k");
  lv_params_define_float(p, "save_keep_checkpoint_every_n_hours", 0.0, "h");
  lv_params_freeze(p);
  return p;
}

static lv_params *train_params_hours(int64_t keep, double hours) {
  lv_params *p = lv_params_new();
  lv_params_define_int(p, "save_interval_seconds", 600, "s");
  lv_params_define_none(p, "save_interval_steps", LV_PV_INT, "s");
  lv_params_define_int(p, "save_max_to_keep", keep, "k");
  lv_params_define_float(p, "save_keep_checkpoint_every_n_hours", hours, "h");
  lv_params_freeze(p);
  return p;
}

static bool exists(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  return lv_file_exists(path);
}

/* The steps lv_checkpoint_list gives for g_dir (at most max); returns how many. */
static int listed_steps(int64_t *out, int max) {
  char **prefixes = NULL;
  int64_t *steps = NULL;
  int n = 0;
  ck_assert(lv_checkpoint_list(g_dir, &prefixes, &steps, &n) == NULL);
  ck_assert(n <= max);
  for (int i = 0; i < n; i++) {
    out[i] = steps[i];
    free(prefixes[i]);
  }
  free(prefixes);
  free(steps);
  return n;
}

/* lv_metrics grows as a task adds metrics: no cap, every one kept in order. */
START_TEST(test_metrics_grow) {
  lv_metrics m;
  lv_metrics_init(&m);
  enum { N = 3 * LV_MAX_METRICS + 5 };
  for (int i = 0; i < N; i++) {
    char name[32];
    if (i == N - 1) snprintf(name, sizeof name, "loss");
    else snprintf(name, sizeof name, "metric_%d", i);
    lv_metrics_add_const(&m, name, 0.5 * i, i + 1);
  }
  ck_assert_int_eq(m.n, N);
  for (int i = 0; i < N - 1; i++) {
    char name[32];
    snprintf(name, sizeof name, "metric_%d", i);
    ck_assert_str_eq(m.name[i], name);
    ck_assert(lv_metrics_value(&m, i) == 0.5 * i && m.weight[i] == i + 1);
  }
  ck_assert_str_eq(m.name[N - 1], "loss");
  lv_metrics_free(&m);
  ck_assert_int_eq(m.n, 0);
  lv_metrics_add_const(&m, "again", 1, 1);
  ck_assert_int_eq(m.n, 1);
  lv_metrics_free(&m);
}
END_TEST

START_TEST(test_should_save_and_retention) {
  lv_params *tp = train_params(3, 10);
  lv_checkpointer *ck = NULL;
  ck_assert(lv_checkpointer_create(g_dir, tp, true, &ck) == NULL);
  float w[6] = {1, 2, 3, 4, 5, 6};
  int64_t step_var = 0;
  lv_saveable items[2] = {{"layer/w/var", LV_F32, lv_shape2(2, 3), w, lv_device_host()}, {"global_step", LV_I64, lv_shape0(), &step_var, lv_device_host()}};
  ck_assert(lv_checkpointer_should_save(ck, 0)); /* the first call always saves */
  int saved = 0;
  for (int64_t step = 0; step <= 50; step++) {
    step_var = step;
    w[0] = (float)step;
    if (lv_checkpointer_should_save(ck, step)) {
      ck_assert(lv_checkpointer_save(ck, step, items, 2, "params : 1") == NULL);
      saved++;
    }
  }
  ck_assert_int_eq(saved, 6); /* 0, 10, ..., 50 */
  ck_assert(!lv_checkpointer_should_save(ck, 50));
  ck_assert(lv_checkpointer_destroy(ck) == NULL);
  /* Only the newest 3 are kept, on disk and in the state file. */
  ck_assert(!exists("ckpt-00000000.index") && !exists("ckpt-00000020.data-00000-of-00001"));
  ck_assert(exists("ckpt-00000030.index") && exists("ckpt-00000050.index"));
  int64_t steps[8];
  ck_assert_int_eq(listed_steps(steps, 8), 3);
  ck_assert_int_eq(steps[0], 30);
  ck_assert_int_eq(steps[2], 50);
  char latest[1024];
  int64_t step = 0;
  bool found = false;
  ck_assert(lv_checkpoint_latest(g_dir, latest, sizeof latest, &step, &found) == NULL);
  ck_assert(found);
  ck_assert_int_eq(step, 50);
  /* Restore puts back the values of step 50. */
  w[0] = -1;
  step_var = -1;
  ck_assert(lv_checkpoint_restore(latest, items, 2) == NULL);
  ck_assert(w[0] == 50.0f && w[5] == 6.0f);
  ck_assert_int_eq(step_var, 50);
  lv_params_free(tp);
}
END_TEST

START_TEST(test_restore_lists_every_mismatch) {
  lv_params *tp = train_params(0, 1);
  lv_checkpointer *ck = NULL;
  ck_assert(lv_checkpointer_create(g_dir, tp, false, &ck) == NULL);
  float a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
  lv_saveable items[2] = {{"a", LV_F32, lv_shape1(4), a, lv_device_host()}, {"b", LV_F32, lv_shape1(2), b, lv_device_host()}};
  ck_assert(lv_checkpointer_save(ck, 7, items, 2, NULL) == NULL);
  ck_assert(lv_checkpointer_destroy(ck) == NULL);
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/ckpt-00000007", g_dir);
  float a2[2] = {0, 0}, c[1] = {9};
  lv_saveable want[3] = {{"a", LV_F32, lv_shape1(2), a2, lv_device_host()}, {"b", LV_F32, lv_shape1(2), b, lv_device_host()}, {"c", LV_F32, lv_shape1(1), c, lv_device_host()}};
  b[0] = -5;
  lv_status s = lv_checkpoint_restore(prefix, want, 3);
  ck_assert(s != NULL);
  ck_assert_int_eq(lv_status_exit_code(s), 2);
  const char *m = lv_status_msg(s);
  ck_assert_msg(strstr(m, "2 problems") && strstr(m, "a: checkpoint has float32 [4], the model expects float32 [2]") &&
                    strstr(m, "c: missing from the checkpoint"),
                "%s", m);
  lv_status_free(s);
  ck_assert(b[0] == -5.0f); /* nothing restored when anything mismatches */
  lv_params_free(tp);
}
END_TEST

START_TEST(test_state_paths_are_relative) {
  lv_params *tp = train_params(0, 1);
  lv_checkpointer *ck = NULL;
  ck_assert(lv_checkpointer_create(g_dir, tp, false, &ck) == NULL);
  int64_t gs = 3;
  lv_saveable it = {"global_step", LV_I64, lv_shape0(), &gs, lv_device_host()};
  ck_assert(lv_checkpointer_save(ck, 3, &it, 1, NULL) == NULL);
  ck_assert(lv_checkpointer_destroy(ck) == NULL);
  lv_ckpt_state st = {0};
  bool ex = false;
  ck_assert(lv_ckpt_state_read(g_dir, &st, &ex) == NULL);
  ck_assert(ex);
  ck_assert_str_eq(st.model_checkpoint_path, "ckpt-00000003");
  lv_ckpt_state_free(&st);
  ck_assert_int_eq(lv_checkpoint_step("/x/train/ckpt-00000205"), 205);
  ck_assert_int_eq(lv_checkpoint_step("/x/train/model"), -1);
  lv_params_free(tp);
}
END_TEST

static lv_saveable scalar_item(const char *name, float *v) {
  return (lv_saveable){name, LV_F32, lv_shape0(), v, lv_device_host()};
}

static void save_steps(lv_params *tp, const int64_t *steps, int n, float *v) {
  lv_checkpointer *ck = NULL;
  ck_assert(lv_checkpointer_create(g_dir, tp, false, &ck) == NULL);
  lv_saveable it = scalar_item("v", v);
  for (int i = 0; i < n; i++) {
    *v = (float)steps[i];
    ck_assert(lv_checkpointer_save(ck, steps[i], &it, 1, NULL) == NULL);
  }
  ck_assert(lv_checkpointer_destroy(ck) == NULL);
}

static void touch(const char *path) {
  FILE *f = fopen(path, "w");
  ck_assert(f);
  fclose(f);
}

/* Retention deletes only ckpt-N files of its own directory, by their exact names: paths
 * a state file lists elsewhere, or names that only start like a checkpoint, survive. */
START_TEST(test_retention_only_own_checkpoints) {
  char victim_dir[512], victim[600], path[700];
  snprintf(victim_dir, sizeof victim_dir, "%s/victim", g_dir);
  ck_assert(lv_file_mkdirs(victim_dir) == NULL);
  snprintf(victim, sizeof victim, "%s/notes", victim_dir);
  const char *suffixes[] = {".txt", ".md", ".index"};
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s%s", victim, suffixes[i]);
    touch(path);
  }
  char train[512];
  snprintf(train, sizeof train, "%s/train", g_dir);
  ck_assert(lv_file_mkdirs(train) == NULL);
  char *paths[] = {victim, "../victim/notes", "ckpt-00000001/../../victim/notes", "ckpt-00000001"};
  lv_ckpt_state st = {.model_checkpoint_path = "ckpt-00000001", .num_paths = 4, .all_model_checkpoint_paths = paths};
  ck_assert(lv_ckpt_state_write(train, &st) == NULL);
  snprintf(path, sizeof path, "%s/ckpt-00000001.mine", train);
  touch(path);
  snprintf(path, sizeof path, "%s/ckpt-00000001.index", train);
  touch(path);
  lv_params *tp = train_params(1, 1);
  lv_checkpointer *ck = NULL;
  ck_assert(lv_checkpointer_create(train, tp, false, &ck) == NULL);
  float v = 0;
  lv_saveable it = scalar_item("v", &v);
  ck_assert(lv_checkpointer_save(ck, 2, &it, 1, NULL) == NULL);
  ck_assert(lv_checkpointer_destroy(ck) == NULL);
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s%s", victim, suffixes[i]);
    ck_assert_msg(lv_file_exists(path), "%s was deleted", path);
  }
  snprintf(path, sizeof path, "%s/ckpt-00000001.mine", train);
  ck_assert(lv_file_exists(path));
  snprintf(path, sizeof path, "%s/ckpt-00000001.index", train);
  ck_assert(!lv_file_exists(path)); /* its own old checkpoint is retired */
  lv_ckpt_state rd = {0};
  bool ex = false;
  ck_assert(lv_ckpt_state_read(train, &rd, &ex) == NULL);
  ck_assert_int_eq(rd.num_paths, 1);
  ck_assert_str_eq(rd.all_model_checkpoint_paths[0], "ckpt-00000002");
  lv_ckpt_state_free(&rd);
  lv_params_free(tp);
}
END_TEST

static char *read_file(const char *name) {
  char path[512], *data = NULL;
  size_t len;
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  ck_assert(lv_file_read_all(path, &data, &len) == NULL);
  return data;
}

/* Lingvo's keep-every-n-hours walk starts from time 0 at every update, so what it kept
 * stays kept: with 0.5 h and the newest 2, of checkpoints 2 h, 1.5 h, 1 h and 0.55 h old
 * (last_preserved_timestamp: 10 min ago, as Lingvo writes it), a save keeps the first
 * (from 0), the 1-hour-old one (1 h after it) and the new one (1 h after that), and the
 * newest two; a second save keeps the same three. The same checkpoint listed twice (by
 * two spellings) is listed once and not deleted. */
START_TEST(test_retention_every_n_hours) {
  char train[512], path[700];
  snprintf(train, sizeof train, "%s/train", g_dir);
  ck_assert(lv_file_mkdirs(train) == NULL);
  const double now = lv_now_wall();
  char *paths[] = {"ckpt-00000001", "ckpt-00000002", "ckpt-00000003", "ckpt-00000004", NULL};
  double tss[] = {now - 7200, now - 5400, now - 3600, now - 1980, 0};
  char abs3[600];
  snprintf(abs3, sizeof abs3, "%s/ckpt-00000003", train);
  paths[4] = abs3; /* ckpt-00000003 again, by its absolute path */
  tss[4] = now - 3600;
  lv_ckpt_state st = {.model_checkpoint_path = "ckpt-00000004", .num_paths = 5, .all_model_checkpoint_paths = paths,
                      .all_model_checkpoint_timestamps = tss, .last_preserved_timestamp = now - 600};
  ck_assert(lv_ckpt_state_write(train, &st) == NULL);
  for (int i = 1; i <= 4; i++) {
    snprintf(path, sizeof path, "%s/ckpt-%08d.index", train, i);
    touch(path);
  }
  lv_params *tp = train_params_hours(2, 0.5);
  lv_checkpointer *ck = NULL;
  ck_assert(lv_checkpointer_create(train, tp, false, &ck) == NULL);
  float v = 0;
  lv_saveable it = scalar_item("v", &v);
  const char *want[2][4] = {{"ckpt-00000001", "ckpt-00000003", "ckpt-00000004", "ckpt-00000005"},
                            {"ckpt-00000001", "ckpt-00000003", "ckpt-00000005", "ckpt-00000006"}};
  for (int k = 0; k < 2; k++) {
    ck_assert(lv_checkpointer_save(ck, 5 + k, &it, 1, NULL) == NULL);
    lv_ckpt_state rd = {0};
    bool ex = false;
    ck_assert(lv_ckpt_state_read(train, &rd, &ex) == NULL);
    ck_assert_int_eq(rd.num_paths, 4);
    for (int i = 0; i < 4; i++) ck_assert_str_eq(rd.all_model_checkpoint_paths[i], want[k][i]);
    ck_assert(rd.last_preserved_timestamp >= now);
    lv_ckpt_state_free(&rd);
    snprintf(path, sizeof path, "%s/ckpt-00000002.index", train);
    ck_assert(!lv_file_exists(path));
    for (int i = 0; i < 4; i++) {
      snprintf(path, sizeof path, "%s/%s.index", train, want[k][i]);
      ck_assert_msg(lv_file_exists(path), "%s was deleted", path);
    }
  }
  snprintf(path, sizeof path, "%s/ckpt-00000004.index", train);
  ck_assert(!lv_file_exists(path));
  ck_assert(lv_checkpointer_destroy(ck) == NULL);
  lv_params_free(tp);
}
END_TEST

/* A listed checkpoint is never written again; an unlisted one (a crash before its state
 * update) is replaced. */
START_TEST(test_save_never_overwrites_listed) {
  lv_params *tp = train_params(0, 1);
  float v = 0;
  save_steps(tp, (int64_t[]){7}, 1, &v);
  char *before = read_file("ckpt-00000007.data-00000-of-00001");
  lv_checkpointer *ck = NULL;
  ck_assert(lv_checkpointer_create(g_dir, tp, false, &ck) == NULL);
  v = 99;
  lv_saveable it = scalar_item("v", &v);
  lv_status s = lv_checkpointer_save(ck, 7, &it, 1, NULL);
  ck_assert(s != NULL);
  ck_assert_int_eq(lv_status_exit_code(s), 2);
  ck_assert_msg(strstr(lv_status_msg(s), "not overwriting"), "%s", lv_status_msg(s));
  lv_status_free(s);
  char *after = read_file("ckpt-00000007.data-00000-of-00001");
  ck_assert(!memcmp(before, after, 4));
  free(after);
  /* Unlisted: replaced, index and data together. */
  lv_ckpt_state empty = {0};
  ck_assert(lv_ckpt_state_write(g_dir, &empty) == NULL);
  ck_assert(lv_checkpointer_save(ck, 7, &it, 1, NULL) == NULL);
  ck_assert(lv_checkpointer_destroy(ck) == NULL);
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/ckpt-00000007", g_dir);
  float got = 0;
  lv_saveable back = scalar_item("v", &got);
  ck_assert(lv_checkpoint_restore(prefix, &back, 1) == NULL);
  ck_assert(got == 99.0f);
  free(before);
  lv_params_free(tp);
}
END_TEST

/* train.checkpoint_finite_check: NaN/Inf in a float item is an error, nothing written. */
START_TEST(test_checkpoint_finite_check) {
  lv_params *p = lv_params_new();
  lv_params_define_int(p, "save_interval_seconds", 600, "s");
  lv_params_define_int(p, "save_interval_steps", 1, "s");
  lv_params_define_int(p, "save_max_to_keep", 0, "k");
  lv_params_define_float(p, "save_keep_checkpoint_every_n_hours", 0.0, "h");
  lv_params_define_bool(p, "checkpoint_finite_check", true, "c");
  lv_params_freeze(p);
  lv_checkpointer *ck = NULL;
  ck_assert(lv_checkpointer_create(g_dir, p, true, &ck) == NULL);
  float w[3] = {1, 2, 3};
  lv_saveable it = {"layer/w", LV_F32, lv_shape1(3), w, lv_device_host()};
  ck_assert(lv_checkpointer_save(ck, 1, &it, 1, NULL) == NULL);
  w[2] = INFINITY;
  lv_status s = lv_checkpointer_save(ck, 2, &it, 1, NULL);
  ck_assert(s != NULL);
  ck_assert_msg(strstr(lv_status_msg(s), "checkpoint_finite_check: layer/w[2] is inf"), "%s", lv_status_msg(s));
  lv_status_free(s);
  ck_assert(lv_checkpointer_destroy(ck) == NULL);
  ck_assert(exists("ckpt-00000001.index") && !exists("ckpt-00000002.index") &&
            !exists("ckpt-00000002.data-00000-of-00001"));
  lv_params_free(p);
}
END_TEST

/* A state file that names no checkpoint beside ckpt-N files: an error naming the newest
 * (nothing written), or with rebuild a new state file listing them. */
START_TEST(test_resume_point) {
  char prefix[512];
  int64_t step = -1;
  bool found = true;
  ck_assert(lv_checkpoint_resume_point(g_dir, false, prefix, sizeof prefix, &step, &found) == NULL);
  ck_assert(!found); /* an empty directory: a fresh start */
  lv_params *tp = train_params(0, 1);
  float v = 0;
  save_steps(tp, (int64_t[]){0, 5, 12}, 3, &v);
  char state[512];
  snprintf(state, sizeof state, "%s/checkpoint", g_dir);
  const char *bad[] = {"", "  \n\t\n", "all_model_checkpoint_paths: \"ckpt-00000005\"\n", NULL, "garbage\n"};
  for (int i = 0; i < 5; i++) {
    if (bad[i]) ck_assert(lv_file_write_atomic(state, bad[i], strlen(bad[i])) == NULL);
    else unlink(state);
    lv_status s = lv_checkpoint_resume_point(g_dir, false, prefix, sizeof prefix, &step, &found);
    ck_assert_msg(s != NULL, "case %d", i);
    ck_assert_int_eq(lv_status_exit_code(s), 2);
    ck_assert_msg(strstr(lv_status_msg(s), "the newest") && strstr(lv_status_msg(s), "ckpt-00000012") &&
                      strstr(lv_status_msg(s), "--rebuild_checkpoint_state"),
                  "%s", lv_status_msg(s));
    lv_status_free(s);
    ck_assert(!found);
    ck_assert(bad[i] ? lv_file_exists(state) : !lv_file_exists(state)); /* untouched */
  }
  ck_assert(lv_checkpoint_resume_point(g_dir, true, prefix, sizeof prefix, &step, &found) == NULL);
  ck_assert(found);
  ck_assert_int_eq(step, 12);
  int64_t steps[8];
  ck_assert_int_eq(listed_steps(steps, 8), 3);
  ck_assert(steps[0] == 0 && steps[1] == 5 && steps[2] == 12);
  /* Another writer's name (ckpt-13, no zero padding) is listed as found, not as the
   * ckpt-00000013 that does not exist. */
  unlink(state);
  char other[600];
  snprintf(other, sizeof other, "%s/ckpt-13.index", g_dir);
  touch(other);
  ck_assert(lv_checkpoint_resume_point(g_dir, true, prefix, sizeof prefix, &step, &found) == NULL);
  ck_assert(found);
  ck_assert_int_eq(step, 13);
  ck_assert_msg(strstr(prefix, "/ckpt-13") && !strstr(prefix, "ckpt-00000013"), "%s", prefix);
  lv_params_free(tp);
}
END_TEST

/* Resuming training: tensors of the checkpoint that the run lacks are errors too (another
 * optimizer's slots); a partial restore restores what matches and keeps the rest. */
START_TEST(test_restore_exact_and_partial) {
  lv_params *tp = train_params(0, 1);
  lv_checkpointer *ck = NULL;
  ck_assert(lv_checkpointer_create(g_dir, tp, false, &ck) == NULL);
  float w = 1, m = 2;
  lv_saveable saved[2] = {scalar_item("w", &w), scalar_item("w/Adam", &m)};
  ck_assert(lv_checkpointer_save(ck, 4, saved, 2, "params : 1") == NULL);
  ck_assert(lv_checkpointer_destroy(ck) == NULL);
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/ckpt-00000004", g_dir);
  float w2 = 0, b2 = 7;
  lv_saveable run[2] = {scalar_item("w", &w2), scalar_item("b", &b2)};
  ck_assert(lv_checkpoint_restore(prefix, run, 1) == NULL); /* the evaler's mode: extras ignored */
  ck_assert(w2 == 1.0f);
  w2 = 0;
  lv_status s = lv_checkpoint_restore_mode(prefix, run, 1, LV_RESTORE_EXACT, NULL);
  ck_assert(s != NULL);
  ck_assert_msg(strstr(lv_status_msg(s), "w/Adam: in the checkpoint, not in this run") &&
                    !strstr(lv_status_msg(s), LV_CKPT_PARAMS_TENSOR),
                "%s", lv_status_msg(s));
  lv_status_free(s);
  ck_assert(w2 == 0.0f);
  s = lv_checkpoint_restore_mode(prefix, run, 2, LV_RESTORE_EXACT, NULL);
  ck_assert(s != NULL && strstr(lv_status_msg(s), "b: missing from the checkpoint"));
  lv_status_free(s);
  int restored = 0;
  ck_assert(lv_checkpoint_restore_mode(prefix, run, 2, LV_RESTORE_PARTIAL, &restored) == NULL);
  ck_assert_int_eq(restored, 1);
  ck_assert(w2 == 1.0f && b2 == 7.0f);
  lv_params_free(tp);
}
END_TEST

/* Only our temporary names, only of processes that are gone. */
START_TEST(test_clean_stale_temps) {
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ck_assert(dead > 0);
  waitpid(dead, NULL, 0);
  const char *gone[] = {"checkpoint.tmp%d", "ckpt-00000040.index.tmp%d", "ckpt-00000040.index.tempstate%d-3",
                        "ckpt-00000060.data-00000-of-00001.tempstate%d-0"};
  const char *kept[] = {"notes.tmp%d", "ckpt-00000040.mine.tmp%d", "checkpoint.tmp%dx", "ckpt-x.index.tmp%d",
                        "checkpoint.tmp%d-"};
  char name[256], path[600];
  for (int i = 0; i < 4; i++) {
    snprintf(name, sizeof name, gone[i], (int)dead);
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    touch(path);
  }
  for (int i = 0; i < 5; i++) {
    snprintf(name, sizeof name, kept[i], (int)dead);
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    touch(path);
  }
  /* Our own pid: a dead process's that had it (the cleanup runs before we write). */
  snprintf(path, sizeof path, "%s/ckpt-00000070.index.tmp%d", g_dir, (int)getpid());
  touch(path);
  snprintf(path, sizeof path, "%s/checkpoint.tmp%d", g_dir, (int)getppid()); /* alive */
  touch(path);
  ck_assert_int_eq(lv_checkpoint_clean_stale_temps(g_dir), 5);
  ck_assert(lv_file_exists(path));
  for (int i = 0; i < 5; i++) {
    snprintf(name, sizeof name, kept[i], (int)dead);
    ck_assert_msg(exists(name), "%s was removed", name);
  }
}
END_TEST

START_TEST(test_caption) {
  uint8_t img[4 * 4];
  for (int i = 0; i < 16; i++) img[i] = (uint8_t)(i * 10);
  int h, w, c;
  uint8_t *out = lv_caption_render(img, 4, 4, 1, "9 vs. 1", &h, &w, &c);
  ck_assert_int_eq(c, 1);
  ck_assert_int_eq(h, 4 * 2 + 14);
  ck_assert(w >= 7 * 8);
  int dark = 0;
  for (int y = 8; y < h; y++)
    for (int x = 0; x < w; x++) dark += out[y * w + x] == 0;
  ck_assert(dark > 20); /* glyph pixels drawn in the band */
  int x0 = (w - 8) / 2;
  ck_assert_int_eq(out[1 * w + x0 + 2], img[0 * 4 + 1]); /* scaled 2x */
  free(out);
}
END_TEST

/* A fabricated training run: <g_dir>/train with a state file listing ckpt-<step> for the
 * given steps (an empty .index file each), and <g_dir>/eval_test for the job. */
static void fake_train_dir(const int64_t *steps, int n) {
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/train", g_dir);
  EXPECT_OK(lv_file_mkdirs(dir));
  snprintf(path, sizeof path, "%s/eval_test", g_dir);
  EXPECT_OK(lv_file_mkdirs(path));
  lv_ckpt_state st = {0};
  char **paths = calloc((size_t)n + 1, sizeof *paths);
  for (int i = 0; i < n; i++) {
    paths[i] = malloc(32);
    snprintf(paths[i], 32, "ckpt-%08lld", (long long)steps[i]);
    snprintf(path, sizeof path, "%s/%s.index", dir, paths[i]);
    EXPECT_OK(lv_file_write_atomic(path, "", 0));
  }
  st.num_paths = n;
  st.all_model_checkpoint_paths = paths;
  st.model_checkpoint_path = n ? paths[n - 1] : (char *)"";
  EXPECT_OK(lv_ckpt_state_write(dir, &st));
  for (int i = 0; i < n; i++) free(paths[i]);
  free(paths);
}

/* The sleep hook: records each delay and plays the trainer, replacing the checkpoint
 * list with the next entry of `then` at each sleep. */
typedef struct fake_clock {
  double slept[32];
  int nsleeps;
  const int64_t *then[8]; /* steps after sleep i (NULL: unchanged) */
  int nthen[8];
} fake_clock;

static void fake_sleep(void *ctx, double secs) {
  fake_clock *c = ctx;
  ck_assert_int_lt(c->nsleeps, 32);
  int i = c->nsleeps;
  c->slept[c->nsleeps++] = secs;
  if (i < 8 && c->then[i]) fake_train_dir(c->then[i], c->nthen[i]);
}

static lv_follower_options follower_opts(fake_clock *c, char *train, char *job_dir) {
  sprintf(train, "%s/train", g_dir);
  sprintf(job_dir, "%s/eval_test", g_dir);
  return (lv_follower_options){.train_dir = train, .job_dir = job_dir, .job = "eval_test", .max_steps = 30,
                               .max_poll_secs = 300, .sleep_fn = fake_sleep, .sleep_ctx = c};
}

/* Drives the follower like a job whose processing always succeeds; returns the steps
 * yielded, comma-separated, and the final status. */
static lv_status drive(lv_follower *f, char *got, size_t n) {
  got[0] = '\0';
  for (;;) {
    char prefix[600];
    int64_t step = -1;
    bool done = false;
    LV_TRY(lv_follower_next(f, prefix, sizeof prefix, &step, &done));
    if (done) return NULL;
    ck_assert_int_eq(lv_checkpoint_step(prefix), step);
    snprintf(got + strlen(got), n - strlen(got), "%s%lld", *got ? "," : "", (long long)step);
    LV_TRY(lv_follower_mark_processed(f));
  }
}

static char *processed_text(void) {
  char path[600], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/eval_test/processed_ckpts.txt", g_dir);
  EXPECT_OK(lv_file_read_all(path, &text, &len));
  return text;
}

START_TEST(test_follower_all_checkpoints) {
  fake_train_dir((const int64_t[]){20, 10, 30}, 3);
  fake_clock c = {0};
  char train[512], job[512], got[256];
  lv_follower_options o = follower_opts(&c, train, job);
  o.all_checkpoints = true;
  lv_follower *f = NULL;
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_OK(drive(f, got, sizeof got));
  ck_assert_str_eq(got, "10,20,30"); /* ascending by step; stops at max_steps 30 */
  ck_assert_int_eq(c.nsleeps, 0);
  lv_follower_destroy(f);
  char *text = processed_text(), want[2048];
  snprintf(want, sizeof want, "%s/train/ckpt-00000010\n%s/train/ckpt-00000020\n%s/train/ckpt-00000030\n", g_dir,
           g_dir, g_dir);
  ck_assert_str_eq(text, want);
  free(text);
  /* A restart has nothing left to do: done at once, without sleeping. */
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_OK(drive(f, got, sizeof got));
  ck_assert_str_eq(got, "");
  ck_assert_int_eq(c.nsleeps, 0);
  lv_follower_destroy(f);
}
END_TEST

START_TEST(test_follower_latest_polls_with_backoff) {
  fake_train_dir((const int64_t[]){10}, 1);
  /* The trainer writes 20 after the second sleep, then 25 and 30 after the fifth. */
  fake_clock c = {.then = {NULL, (const int64_t[]){10, 20}, NULL, NULL, (const int64_t[]){20, 25, 30}},
                  .nthen = {0, 2, 0, 0, 3}};
  char train[512], job[512], got[256];
  lv_follower_options o = follower_opts(&c, train, job);
  o.max_poll_secs = 2.0;
  lv_follower *f = NULL;
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_OK(drive(f, got, sizeof got));
  ck_assert_str_eq(got, "10,20,30"); /* only the newest each time: 25 is never yielded */
  ck_assert_int_eq(c.nsleeps, 5);
  /* 1 s, x1.5; reset to 1 s after a checkpoint is processed; capped at max_poll_secs. */
  const double want[] = {1.0, 1.5, 1.0, 1.5, 2.0};
  for (int i = 0; i < 5; i++) ck_assert_msg(c.slept[i] == want[i], "sleep %d: %g", i, c.slept[i]);
  lv_follower_destroy(f);
}
END_TEST

START_TEST(test_follower_timeout) {
  fake_train_dir(NULL, 0);
  fake_clock c = {0};
  char train[512], job[512], got[256];
  lv_follower_options o = follower_opts(&c, train, job);
  o.max_poll_secs = 2.0;
  o.timeout_secs = 10;
  lv_follower *f = NULL;
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_ERR(drive(f, got, sizeof got), LV_ERR_NOT_FOUND, "no new checkpoint in ", "/train for 10 s; giving up");
  const double want[] = {1.0, 1.5, 2.0, 2.0, 2.0, 2.0}; /* 10.5 s waited */
  ck_assert_int_eq(c.nsleeps, 6);
  for (int i = 0; i < 6; i++) ck_assert(c.slept[i] == want[i]);
  lv_follower_destroy(f);
  /* No train dir at all is the same wait, not an error. */
  lv_test_rmtree(train);
  c.nsleeps = 0;
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_ERR(drive(f, got, sizeof got), LV_ERR_NOT_FOUND, "giving up");
  ck_assert_int_eq(c.nsleeps, 6);
  lv_follower_destroy(f);
  o.max_poll_secs = 0;
  EXPECT_ERR(lv_follower_create(&o, &f), LV_ERR_INVALID, "max_poll_secs must be > 0");
}
END_TEST

START_TEST(test_follower_restart_skips_processed) {
  fake_train_dir((const int64_t[]){10, 20, 30, 40}, 4);
  char path[600], line[600];
  snprintf(path, sizeof path, "%s/eval_test/processed_ckpts.txt", g_dir);
  for (int s = 10; s <= 20; s += 10) {
    snprintf(line, sizeof line, "%s/train/ckpt-%08d", g_dir, s);
    EXPECT_OK(lv_file_append_line(path, line));
  }
  fake_clock c = {0};
  char train[512], job[512], got[256];
  lv_follower_options o = follower_opts(&c, train, job);
  o.all_checkpoints = true;
  o.max_steps = 100; /* 40 < max_steps: the trainer may still write more */
  o.timeout_secs = 1;
  lv_follower *f = NULL;
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_ERR(drive(f, got, sizeof got), LV_ERR_NOT_FOUND, "giving up");
  ck_assert_str_eq(got, "30,40");
  ck_assert_int_eq(c.nsleeps, 1);
  lv_follower_destroy(f);
}
END_TEST

START_TEST(test_follower_deleted_checkpoint) {
  fake_train_dir((const int64_t[]){10, 20, 30}, 3);
  fake_clock c = {0};
  char train[512], job[512], prefix[600];
  lv_follower_options o = follower_opts(&c, train, job);
  o.all_checkpoints = true;
  o.verb = "decoded";
  lv_follower *f = NULL;
  EXPECT_OK(lv_follower_create(&o, &f));
  int64_t step;
  bool done;
  EXPECT_OK(lv_follower_next(f, prefix, sizeof prefix, &step, &done));
  ck_assert(!done && step == 10);
  /* Still on disk: the failure is the job's error. */
  EXPECT_ERR(lv_follower_failed(f, lv_status_make(LV_ERR_CORRUPT, "bad crc")), LV_ERR_CORRUPT, "bad crc");
  /* Retention deleted it after the listing: skipped, not recorded, and the job goes on. */
  char index[700];
  snprintf(index, sizeof index, "%s.index", prefix);
  ck_assert_int_eq(remove(index), 0);
  /* ... unless the failure was not about its files (a non-finite metric). */
  EXPECT_ERR(lv_follower_failed(f, lv_status_make(LV_ERR_INVALID, "non-finite log_pplx")), LV_ERR_INVALID,
             "non-finite log_pplx");
  EXPECT_OK(lv_follower_failed(f, lv_status_make(LV_ERR_NOT_FOUND, "gone")));
  EXPECT_OK(lv_follower_next(f, prefix, sizeof prefix, &step, &done));
  ck_assert(!done && step == 20);
  EXPECT_OK(lv_follower_mark_processed(f));
  char got[256];
  EXPECT_OK(drive(f, got, sizeof got));
  ck_assert_str_eq(got, "30");
  lv_follower_destroy(f);
  char *text = processed_text();
  ck_assert_ptr_null(strstr(text, "ckpt-00000010"));
  ck_assert_ptr_nonnull(strstr(text, "ckpt-00000020"));
  free(text);
}
END_TEST

START_TEST(test_follower_once) {
  fake_train_dir((const int64_t[]){10, 20}, 2);
  fake_clock c = {0};
  char train[512], job[512], got[256], given[600];
  lv_follower_options o = follower_opts(&c, train, job);
  o.once = true;
  lv_follower *f = NULL;
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_OK(drive(f, got, sizeof got));
  ck_assert_str_eq(got, "20"); /* the newest, once, even though max_steps is not reached */
  lv_follower_destroy(f);
  /* A given prefix is taken as is (and once means once, processed or not). */
  snprintf(given, sizeof given, "%s/train/ckpt-00000010", g_dir);
  o.checkpoint = given;
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_OK(drive(f, got, sizeof got));
  ck_assert_str_eq(got, "10");
  lv_follower_destroy(f);
  /* A given directory: its newest; a failure is always the job's error. */
  o.checkpoint = train;
  EXPECT_OK(lv_follower_create(&o, &f));
  char prefix[600];
  int64_t step;
  bool done;
  EXPECT_OK(lv_follower_next(f, prefix, sizeof prefix, &step, &done));
  ck_assert(!done && step == 20);
  EXPECT_ERR(lv_follower_failed(f, lv_status_make(LV_ERR_IO, "x")), LV_ERR_IO, "x");
  EXPECT_OK(lv_follower_next(f, prefix, sizeof prefix, &step, &done));
  ck_assert(done);
  lv_follower_destroy(f);
  /* Nothing to evaluate is an error naming the directory. */
  fake_train_dir(NULL, 0);
  o.checkpoint = NULL;
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_ERR(drive(f, got, sizeof got), LV_ERR_NOT_FOUND, "no checkpoint found in ", "/train");
  lv_follower_destroy(f);
  ck_assert_int_eq(c.nsleeps, 0);
}
END_TEST

START_TEST(test_follower_start_after) {
  fake_train_dir((const int64_t[]){10, 20, 30}, 3);
  fake_clock c = {0};
  char train[512], job[512], got[256];
  lv_follower_options o = follower_opts(&c, train, job);
  o.all_checkpoints = true;
  o.start_after = 20;
  o.start_after_name = "eval.start_decoder_after";
  lv_follower *f = NULL;
  EXPECT_OK(lv_follower_create(&o, &f));
  EXPECT_OK(drive(f, got, sizeof got));
  ck_assert_str_eq(got, "20,30");
  lv_follower_destroy(f);
  char *text = processed_text(); /* the skipped one is recorded, as Lingvo's decoder does */
  ck_assert_ptr_nonnull(strstr(text, "ckpt-00000010\n"));
  free(text);
}
END_TEST

int main(void) {
  Suite *s = suite_create("runners");
  TCase *tc = tcase_create("checkpointer");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_metrics_grow);
  tcase_add_test(tc, test_should_save_and_retention);
  tcase_add_test(tc, test_restore_lists_every_mismatch);
  tcase_add_test(tc, test_state_paths_are_relative);
  tcase_add_test(tc, test_retention_only_own_checkpoints);
  tcase_add_test(tc, test_retention_every_n_hours);
  tcase_add_test(tc, test_save_never_overwrites_listed);
  tcase_add_test(tc, test_checkpoint_finite_check);
  tcase_add_test(tc, test_resume_point);
  tcase_add_test(tc, test_restore_exact_and_partial);
  tcase_add_test(tc, test_clean_stale_temps);
  tcase_add_test(tc, test_caption);
  suite_add_tcase(s, tc);
  tc = tcase_create("follower");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_follower_all_checkpoints);
  tcase_add_test(tc, test_follower_latest_polls_with_backoff);
  tcase_add_test(tc, test_follower_timeout);
  tcase_add_test(tc, test_follower_restart_skips_processed);
  tcase_add_test(tc, test_follower_deleted_checkpoint);
  tcase_add_test(tc, test_follower_once);
  tcase_add_test(tc, test_follower_start_after);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
