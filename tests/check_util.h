/* Helpers shared by the Check suites (header-only: each suite is its own executable). */
#ifndef LV_TESTS_CHECK_UTIL_H
#define LV_TESTS_CHECK_UTIL_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

#define EXPECT_OK(expr)                                                      \
  do {                                                                       \
    lv_status s_ = (expr);                                                   \
    ck_assert_msg(!s_, "unexpected error: %s", s_ ? lv_status_msg(s_) : ""); \
  } while (0)

/* Requires an error of the given code whose message holds every substring; frees it. */
static inline void expect_err_(lv_status s, lv_code code, const char *const *subs, const char *expr) {
  ck_assert_msg(s, "expected an error from %s", expr);
  ck_assert_msg(lv_status_code(s) == code, "%s: code %s, want %s: %s", expr, lv_code_names[lv_status_code(s)],
                lv_code_names[code], lv_status_msg(s));
  for (int i = 0; subs[i]; i++)
    ck_assert_msg(strstr(lv_status_msg(s), subs[i]), "%s: message lacks \"%s\":\n%s", expr, subs[i],
                  lv_status_msg(s));
  lv_status_free(s);
}
#define EXPECT_ERR(expr, code, ...) \
  expect_err_((expr), (code), (const char *const[]){__VA_ARGS__, NULL}, #expr)

/* The exit code of a suite that could not run (scripts/run-tests.sh counts it as
 * skipped, as automake does). */
#define LV_TEST_SKIPPED 77

/* Reasons given to lv_test_skip, one a line, in a file that lv_test_run opens before
 * Check forks the cases (so a forked case's reason reaches the suite). */
static FILE *lv_test_skips_;

/* A case that cannot run what it is for (no GPU, a missing tool) says why and returns;
 * the suite then exits LV_TEST_SKIPPED unless a case failed, so a skip is never counted
 * as a pass. */
static inline __attribute__((format(printf, 1, 2))) void lv_test_skip(const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  for (char *c = why; *c; c++)
    if (*c == '\n') *c = ' ';
  printf("SKIP: %s\n", why);
  fflush(stdout);
  if (lv_test_skips_) {
    fprintf(lv_test_skips_, "%s\n", why);
    fflush(lv_test_skips_);
  }
}

/* Runs every test of suite s; the suite's exit code: 1 if any test failed, else
 * LV_TEST_SKIPPED (after one line per distinct reason) if any case skipped, else 0. */
static inline int lv_test_run(Suite *s) {
  lv_test_skips_ = tmpfile();
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  int skipped = 0;
  if (lv_test_skips_) {
    char seen[8][512], line[512];
    rewind(lv_test_skips_);
    while (fgets(line, sizeof line, lv_test_skips_)) {
      line[strcspn(line, "\n")] = 0;
      int dup = 0;
      for (int i = 0; i < skipped && i < 8; i++) dup |= !strcmp(seen[i], line);
      if (dup) continue;
      if (skipped < 8) snprintf(seen[skipped], sizeof seen[skipped], "%s", line);
      skipped++;
      printf("skipped: %s\n", line);
    }
    fclose(lv_test_skips_);
    lv_test_skips_ = NULL;
  }
  return failed ? 1 : skipped ? LV_TEST_SKIPPED : 0;
}

/* A fresh directory /tmp/<prefix>_XXXXXX in buf (size n), and its removal. */
static inline void lv_test_mkdtemp(char *buf, size_t n, const char *prefix) {
  snprintf(buf, n, "/tmp/%s_XXXXXX", prefix);
  ck_assert_ptr_nonnull(mkdtemp(buf));
}
static inline void lv_test_rmtree(const char *dir) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

#endif
