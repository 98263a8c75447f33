/* Tests of src/base/path: a path that fits its buffer is formatted as snprintf would; one
 * that does not is an LV_ERR_INVALID naming its beginning, its length and the limit, and
 * leaves "" behind, never a truncated path. Also the runners' paths built with it: a state
 * file naming an over-long checkpoint, an over-long checkpoint directory. */
#include <check.h>

#include "check_util.h"

#include "base/path.h"
#include "io/ckpt_state.h"
#include "runners/checkpointer.h"

static char *repeat(char c, size_t n) {
  char *s = malloc(n + 1);
  ck_assert_ptr_nonnull(s);
  memset(s, c, n);
  s[n] = 0;
  return s;
}

START_TEST(test_fits) {
  char out[16];
  EXPECT_OK(lv_path_fmt(out, sizeof out, "%s/%s", "log", "train"));
  ck_assert_str_eq(out, "log/train");
  EXPECT_OK(lv_path_fmt(out, sizeof out, "%s/ckpt-%06d", "dir", 7));
  ck_assert_str_eq(out, "dir/ckpt-000007");
  ck_assert_uint_eq(strlen(out), sizeof out - 1); /* the longest that fits: cap - 1 bytes */
  EXPECT_OK(lv_path_fmt(out, sizeof out, "%s", ""));
  ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_one_byte_over) {
  char out[16];
  memset(out, 'x', sizeof out);
  lv_status s = lv_path_fmt(out, sizeof out, "%s/ckpt-%08d", "dir", 70);
  ck_assert_int_eq(lv_status_exit_code(s), 2);
  EXPECT_ERR(s, LV_ERR_INVALID, "path too long: \"dir/ckpt-00000070\" (17 bytes; the limit is 15)");
  ck_assert_str_eq(out, ""); /* nothing truncated is left to be used by mistake */
}
END_TEST

START_TEST(test_long_path_names_its_beginning) {
  char *dir = repeat('d', 5000);
  char out[LV_PATH_MAX];
  char want[128];
  snprintf(want, sizeof want, "path too long: \"/%.63s...\" (5007 bytes; the limit is 4095)", dir);
  EXPECT_ERR(lv_path_fmt(out, sizeof out, "/%s/train", dir), LV_ERR_INVALID, want);
  ck_assert_str_eq(out, "");
  free(dir);
}
END_TEST

START_TEST(test_check) {
  char *p = repeat('p', LV_PATH_MAX - 1);
  EXPECT_OK(lv_path_check(p, LV_PATH_MAX));
  EXPECT_ERR(lv_path_check(p, LV_PATH_MAX - 1), LV_ERR_INVALID, "(4095 bytes; the limit is 4094)", "ppp...\"");
  EXPECT_ERR(lv_path_check("abc", 3), LV_ERR_INVALID, "path too long: \"abc\" (3 bytes; the limit is 2)");
  free(p);
}
END_TEST

START_TEST(test_vfmt_copies_its_arguments) {
  /* The error path formats a second time: the va_list must be copied, not reused. */
  char out[4];
  EXPECT_ERR(lv_path_fmt(out, sizeof out, "%s-%d-%s", "a", 12345, "b"), LV_ERR_INVALID, "\"a-12345-b\" (9 bytes");
}
END_TEST

/* A state file whose model_checkpoint_path does not fit the caller's buffer. */
START_TEST(test_checkpoint_latest_too_long) {
  char dir[256];
  lv_test_mkdtemp(dir, sizeof dir, "lv_check_paths");
  char *longp = repeat('c', 5000);
  memcpy(longp, "/tmp/", 5);
  lv_ckpt_state st = {0};
  st.model_checkpoint_path = longp;
  EXPECT_OK(lv_ckpt_state_write(dir, &st));
  char prefix[LV_PATH_MAX] = "unchanged";
  int64_t step = -1;
  bool found = false;
  EXPECT_ERR(lv_checkpoint_latest(dir, prefix, sizeof prefix, &step, &found), LV_ERR_INVALID, "/checkpoint",
             "path too long: \"/tmp/ccc", "(5000 bytes; the limit is 4095)");
  ck_assert(!found);
  ck_assert_str_eq(prefix, "");
  lv_test_rmtree(dir);
  free(longp);
}
END_TEST

START_TEST(test_checkpointer_dir_too_long) {
  char *dir = repeat('t', LV_PATH_MAX);
  lv_checkpointer *ck = NULL;
  EXPECT_ERR(lv_checkpointer_create(dir, NULL, false, &ck), LV_ERR_INVALID, "checkpoint directory: path too long",
             "(4096 bytes; the limit is 4095)");
  ck_assert_ptr_null(ck);
  free(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("paths");
  TCase *tc = tcase_create("fmt");
  tcase_add_test(tc, test_fits);
  tcase_add_test(tc, test_one_byte_over);
  tcase_add_test(tc, test_long_path_names_its_beginning);
  tcase_add_test(tc, test_check);
  tcase_add_test(tc, test_vfmt_copies_its_arguments);
  suite_add_tcase(s, tc);
  TCase *tr = tcase_create("runners");
  tcase_add_test(tr, test_checkpoint_latest_too_long);
  tcase_add_test(tr, test_checkpointer_dir_too_long);
  suite_add_tcase(s, tr);
  return lv_test_run(s);
}
