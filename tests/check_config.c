/* libconfig experiment files: base chains, cls replacement, and every error naming
 * file:line (the files under tests/data/params/). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check_util.h"
#include "params/params.h"


/* Test data lives under the repo root, which is the working directory of `make test`. */
static const char *data(const char *name) {
  static char buf[8][512];
  static int k;
  const char *root = getenv("LV_ROOT");
  char *b = buf[k++ % 8];
  snprintf(b, 512, "%s%stests/data/params/%s", root ? root : "", root ? "/" : "", name);
  return b;
}

/* ---- test classes ---- */

static lv_params *softmax_ctor(void) {
  lv_params *p = lv_params_new_cls("cfg.Softmax");
  lv_params_define_int(p, "input_dim", 0, "Input depth.");
  lv_params_define_int(p, "num_classes", 0, "Classes.");
  return p;
}

static lv_params *softmax_b_ctor(void) {
  lv_params *p = lv_params_new_cls("cfg.SoftmaxB");
  lv_params_define_int(p, "input_dim", 0, "Input depth.");
  lv_params_define_int(p, "num_classes", 0, "Classes.");
  lv_params_define_float(p, "label_smoothing", 0.0, "Smoothing.");
  return p;
}

static lv_params *piecewise_ctor(void) {
  lv_params *p = lv_params_new_cls("cfg.Piecewise");
  lv_params_define_list(p, "boundaries", NULL, "Step boundaries.");
  lv_params_define_list(p, "values", NULL, "Values.");
  return p;
}

static lv_params *model_ctor(void) {
  lv_params *p = lv_params_new_cls("cfg.Model");
  lv_params_define_string(p, "name", "", "Name.");
  lv_params_define_float(p, "dropout_prob", 0.0, "Dropout.");
  lv_params_define_list(p, "filter_shapes", NULL, "Filters.");
  lv_params_define_list(p, "window_shapes", NULL, "Windows.");
  lv_params_define_list(p, "tags", NULL, "Tags.");
  lv_params_define_bool(p, "use_bias", false, "Bias.");
  lv_params_define_params(p, "softmax", softmax_ctor(), "Softmax.");
  lv_params *t = lv_params_define_params(p, "train", lv_params_new(), "Train.");
  lv_params_define_float(t, "learning_rate", 0.0, "LR.");
  lv_params_define_int(t, "max_steps", 4000000, "Steps.");
  lv_params_define_float(t, "save_interval_seconds", 600, "Seconds.");
  lv_params_define_params(t, "lr_schedule", NULL, "Schedule.");
  return p;
}

static lv_params *root(void) {
  lv_params *p = lv_params_new();
  lv_params_define_params(p, "task", NULL, "Task.");
  lv_params *t = lv_params_define_params(p, "train", lv_params_new(), "Train.");
  lv_params_define_int(t, "max_steps", 4000000, "Steps.");
  lv_params_define_float(t, "save_interval_seconds", 600, "Seconds.");
  lv_params_define_bool(t, "async_checkpointing", true, "Async.");
  return p;
}

static void expect_list_text(const lv_params *p, const char *key, const char *want) {
  char *t = lv_pvalue_to_text(lv_params_list(p, key));
  ck_assert_msg(!strcmp(t, want), "%s = %s, want %s", key, t, want);
  free(t);
}

START_TEST(test_groups) {
  char **names;
  int n;
  EXPECT_OK(lv_params_cfg_groups(data("good.cfg"), &names, &n));
  ck_assert_int_eq(n, 3);
  ck_assert_str_eq(names[0], "Base");
  ck_assert_str_eq(names[1], "LeNet5");
  ck_assert_str_eq(names[2], "Small");
  ck_assert_ptr_null(names[3]);
  free(names);
  EXPECT_ERR(lv_params_cfg_groups(data("missing.cfg"), &names, &n), LV_ERR_NOT_FOUND, "missing.cfg");
}
END_TEST

START_TEST(test_base_chain) {
  lv_params *p = root();
  EXPECT_OK(lv_params_load_cfg(p, data("good.cfg"), "Base"));
  ck_assert_str_eq(lv_params_str(p, "task.cls"), "cfg.Model");
  ck_assert_str_eq(lv_params_str(p, "task.name"), "base");
  ck_assert_int_eq(lv_params_int(p, "task.softmax.num_classes"), 10);
  lv_params_free(p);

  p = root();
  EXPECT_OK(lv_params_load_cfg(p, data("good.cfg"), "LeNet5"));
  ck_assert_str_eq(lv_params_str(p, "task.name"), "lenet5");
  ck_assert_double_eq(lv_params_float(p, "task.dropout_prob"), 0.2);
  expect_list_text(p, "task.filter_shapes", "[[5, 5, 1, 20], [5, 5, 20, 50]]");
  expect_list_text(p, "task.window_shapes", "[[2, 2], [2, 2]]");
  expect_list_text(p, "task.tags", "['image', 'mnist']");
  ck_assert(lv_params_bool(p, "task.use_bias"));
  ck_assert_int_eq(lv_params_int(p, "task.softmax.input_dim"), 300);
  ck_assert_int_eq(lv_params_int(p, "task.softmax.num_classes"), 10); /* from Base */
  ck_assert_double_eq(lv_params_float(p, "task.train.learning_rate"), 1e-4);
  ck_assert_double_eq(lv_params_float(p, "task.train.save_interval_seconds"), 10.0); /* int into float */
  ck_assert_int_eq(lv_params_int(p, "task.train.max_steps"), 1000);
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), 1000);
  ck_assert(!lv_params_bool(p, "train.async_checkpointing"));
  lv_params_free(p);

  p = root();
  EXPECT_OK(lv_params_load_cfg(p, data("good.cfg"), "Small"));
  ck_assert_str_eq(lv_params_str(p, "task.name"), "lenet5");
  ck_assert_str_eq(lv_params_str(p, "task.softmax.cls"), "cfg.SoftmaxB");
  /* a different class replaced the subtree: LeNet5's input_dim is gone */
  ck_assert_int_eq(lv_params_int(p, "task.softmax.input_dim"), 0);
  ck_assert_int_eq(lv_params_int(p, "task.softmax.num_classes"), 5);
  ck_assert_double_eq(lv_params_float(p, "task.softmax.label_smoothing"), 0.1);
  ck_assert_int_eq(lv_params_int(p, "task.train.max_steps"), 10000000000LL);
  ck_assert_str_eq(lv_params_str(p, "task.train.lr_schedule.cls"), "cfg.Piecewise");
  expect_list_text(p, "task.train.lr_schedule.values", "[1.0, 0.1, 0.01]");
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), 50);

  /* the loaded tree dumps and loads back */
  char *t = lv_params_to_text(p);
  lv_params *q = root();
  EXPECT_OK(lv_params_from_text(q, t, "dump"));
  ck_assert_msg(lv_params_equal(p, q), "%s", t);
  free(t);
  lv_params_free(q);

  lv_params_freeze(p);
  EXPECT_ERR(lv_params_load_cfg(p, data("good.cfg"), "Small"), LV_ERR_INVALID, "immutable");
  lv_params_free(p);
}
END_TEST

START_TEST(test_missing_file_and_group) {
  lv_params *p = root();
  EXPECT_ERR(lv_params_load_cfg(p, data("missing.cfg"), "X"), LV_ERR_NOT_FOUND, "missing.cfg does not exist");
  EXPECT_ERR(lv_params_load_cfg(p, data("good.cfg"), "LeNet"), LV_ERR_NOT_FOUND,
             "good.cfg: no group \"LeNet\"; groups in this file: [Base, LeNet5, Small]");
  lv_params_free(p);
}
END_TEST

START_TEST(test_bad_settings) {
  lv_params *p = root();
  lv_status s = lv_params_load_cfg(p, data("bad.cfg"), "Bad");
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_INVALID);
  const char *m = lv_status_msg(s);
  const char *want[] = {
      "9 errors:",
      "bad.cfg:5: unknown key task.nmae (did you mean: [name])",
      "bad.cfg:6: task.dropout_prob: expected float, found string 'high'",
      "bad.cfg:7: task.train.max_steps: expected int, found float 2.5",
      "bad.cfg:8: task.softmax: expected a group { ... } (nested params), found int 3",
      "bad.cfg:9: task.name: expected string, found a group { ... }",
      "bad.cfg:10: task.filter_shapes: expected list, found int 5",
      "bad.cfg:11: task.window_shapes: expected list, found a group { ... } inside a list",
      "bad.cfg:12: task.use_bias: expected bool, found int 1",
      "bad.cfg:14: unknown key train.bogus (keys are ['async_checkpointing', 'max_steps', 'save_interval_seconds'])",
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    ck_assert_msg(strstr(m, want[i]), "missing \"%s\" in:\n%s", want[i], m);
  lv_status_free(s);
  /* the good settings among them were applied */
  ck_assert_double_eq(lv_params_float(p, "task.train.learning_rate"), 0.1);
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), 10);
  lv_params_free(p);
}
END_TEST

START_TEST(test_unknown_cls) {
  lv_params *p = root();
  lv_status s = lv_params_load_cfg(p, data("bad.cfg"), "UnknownCls");
  ck_assert_ptr_nonnull(s);
  const char *m = lv_status_msg(s);
  ck_assert_msg(strstr(m, "bad.cfg:19: task.cls: unknown class \"cfg.Modle\" (did you mean: [cfg.Model])"), "%s", m);
  ck_assert_msg(!strstr(m, "errors:"), "only the class error, not follow-on ones: %s", m);
  lv_status_free(s);
  lv_params_free(p);

  p = root();
  EXPECT_ERR(lv_params_load_cfg(p, data("bad.cfg"), "NoCls"), LV_ERR_INVALID,
             "bad.cfg:30: task: is None (no class yet): the group needs cls = \"<registered class>\";");
  lv_params_free(p);
}
END_TEST

START_TEST(test_base_errors) {
  lv_params *p = root();
  char want[512];
  snprintf(want, sizeof want, "bad.cfg:25: base: no group \"Nope\" in %s (groups: Bad, UnknownCls, MissingBase, NoCls)",
           data("bad.cfg"));
  EXPECT_ERR(lv_params_load_cfg(p, data("bad.cfg"), "MissingBase"), LV_ERR_INVALID, want);
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), 3); /* the group itself still applied */
  lv_params_free(p);

  p = root();
  EXPECT_ERR(lv_params_load_cfg(p, data("cycle.cfg"), "A"), LV_ERR_INVALID,
             "cycle.cfg:3: base = \"A\" makes a cycle: A -> B -> C -> A");
  lv_params_free(p);
  p = root();
  EXPECT_ERR(lv_params_load_cfg(p, data("cycle.cfg"), "B"), LV_ERR_INVALID,
             "cycle.cfg:1: base = \"B\" makes a cycle: B -> C -> A -> B");
  lv_params_free(p);
}
END_TEST

START_TEST(test_syntax_error) {
  lv_params *p = root();
  EXPECT_ERR(lv_params_load_cfg(p, data("syntax.cfg"), "Broken"), LV_ERR_INVALID, "syntax.cfg:3: syntax error");
  char **names;
  int n;
  EXPECT_ERR(lv_params_cfg_groups(data("syntax.cfg"), &names, &n), LV_ERR_INVALID, "syntax.cfg:3: syntax error");
  lv_params_free(p);
}
END_TEST

START_TEST(test_include) {
  lv_params *p = root();
  EXPECT_ERR(lv_params_load_cfg(p, data("include_main.cfg"), "Main"), LV_ERR_INVALID,
             "include_part.cfg:2: unknown key train.max_step (did you mean: [max_steps])");
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), 7);
  lv_params_free(p);
}
END_TEST

/* libconfig 1.5 keeps an integer without L in 32 bits: 5000000000 became 705032704 and
 * 4294967316 became 20. Every such literal is an error with file:line, in included files
 * too; with L the full value loads. */
START_TEST(test_int_range) {
  lv_params *p = root();
  EXPECT_ERR(lv_params_load_cfg(p, data("int_range.cfg"), "Wide"), LV_ERR_INVALID, "4 errors:",
             "int_range_part.cfg:2: integer 0x100000000 does not fit in 32 bits (libconfig would read 0): write "
             "0x100000000L for a 64-bit integer",
             "int_range.cfg:4: integer 5000000000 does not fit in 32 bits (libconfig would read 705032704): write "
             "5000000000L",
             "int_range.cfg:5: integer 4294967316 does not fit in 32 bits (libconfig would read 20)",
             "int_range.cfg:11: integer 99999999999999999999 is out of the 64-bit range");
  lv_params_free(p);
  /* Without the bad lines, the L values load exactly. */
  char dir[64], path[128];
  lv_test_mkdtemp(dir, sizeof dir, "lv_cfg_int");
  snprintf(path, sizeof path, "%s/wide.cfg", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("Wide: {\n  train: { max_steps = 5000000000L; };\n"
        "  task: { cls = \"cfg.Model\"; filter_shapes = ([5, -2147483648, 2147483647], [0x7fffffff]); };\n};\n", f);
  fclose(f);
  p = root();
  EXPECT_OK(lv_params_load_cfg(p, path, "Wide"));
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), 5000000000LL);
  expect_list_text(p, "task.filter_shapes", "[[5, -2147483648, 2147483647], [2147483647]]");
  lv_params_free(p);
  lv_test_rmtree(dir);
}
END_TEST

/* 5,000 nested groups: an error naming the file, line and limit instead of libconfig's
 * bare "memory exhausted"; an experiment file must be a regular file. */
START_TEST(test_file_limits) {
  lv_params *p = root();
  char dir[64], fifo[128], deep[128];
  lv_test_mkdtemp(dir, sizeof dir, "lv_cfg_limits");
  snprintf(deep, sizeof deep, "%s/deep.cfg", dir);
  FILE *f = fopen(deep, "w");
  ck_assert_ptr_nonnull(f);
  fputs("Deep: { train: { max_steps = 1; };\n  x = ", f);
  for (int i = 0; i < 5000; i++) fputs("{ a = ", f);
  fputs("1;", f);
  for (int i = 0; i < 5000; i++) fputs(" };", f);
  fputs("\n};\n", f);
  fclose(f);
  EXPECT_ERR(lv_params_load_cfg(p, deep, "Deep"), LV_ERR_INVALID, "deep.cfg:2: groups and lists nested more than 64 deep");
  /* A file that includes itself twice: an error, not 2^10 reads (found by fuzz_cfg). */
  char self[128];
  snprintf(self, sizeof self, "%s/self.cfg", dir);
  f = fopen(self, "w");
  ck_assert_ptr_nonnull(f);
  fputs("@include \"self.cfg\"\n@include \"self.cfg\"\nX: { };\n", f);
  fclose(f);
  EXPECT_ERR(lv_params_load_cfg(p, self, "X"), LV_ERR_INVALID,
             "self.cfg:1: @include \"self.cfg\" includes a file that is already being read");
  EXPECT_ERR(lv_params_load_cfg(p, "/tmp", "X"), LV_ERR_INVALID, "experiment file /tmp is a directory");
  EXPECT_ERR(lv_params_load_cfg(p, "/dev/zero", "X"), LV_ERR_INVALID,
             "experiment file /dev/zero is a character device; expected a regular file");
  snprintf(fifo, sizeof fifo, "%s/x.cfg", dir);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  EXPECT_ERR(lv_params_load_cfg(p, fifo, "X"), LV_ERR_INVALID, "is a FIFO; expected a regular file");
  lv_test_rmtree(dir);
  lv_params_free(p);
}
END_TEST

int main(void) {
  lv_registry_add("cfg.Model", model_ctor);
  lv_registry_add("cfg.Softmax", softmax_ctor);
  lv_registry_add("cfg.SoftmaxB", softmax_b_ctor);
  lv_registry_add("cfg.Piecewise", piecewise_ctor);
  Suite *s = suite_create("config");
  TCase *tc = tcase_create("load");
  tcase_add_test(tc, test_groups);
  tcase_add_test(tc, test_base_chain);
  tcase_add_test(tc, test_missing_file_and_group);
  tcase_add_test(tc, test_bad_settings);
  tcase_add_test(tc, test_unknown_cls);
  tcase_add_test(tc, test_base_errors);
  tcase_add_test(tc, test_syntax_error);
  tcase_add_test(tc, test_include);
  tcase_add_test(tc, test_int_range);
  tcase_add_test(tc, test_file_limits);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
