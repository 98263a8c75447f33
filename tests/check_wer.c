/* WER as Lingvo computes it (metrics/wer.h) on the tables of reference/lingvo_asr_lm.md
 * §6: decoder_utils_test.py's ComputeWer cases, levenshtein/EditDistance cases with their
 * ins/sub/del split, FilterEpsilon / FilterNoise, the in-graph <noise> regex quirk, and
 * model_test.py's testPostProcessDecodeOut totals through the custom metric. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "metrics/metrics.h"
#include "metrics/wer.h"

static void expect_wer(const char *hyp, const char *ref, bool norm, int64_t errors, int64_t words) {
  lv_wer_counts c;
  EXPECT_OK(lv_wer_compute(hyp, ref, norm, &c));
  ck_assert_msg(c.errors == errors && c.ref_words == words, "hyp \"%s\" ref \"%s\": [%lld, %lld], want [%lld, %lld]",
                hyp, ref, (long long)c.errors, (long long)c.ref_words, (long long)errors, (long long)words);
}

START_TEST(test_compute_wer) {
  expect_wer("one", "one", false, 0, 1);
  expect_wer("one two", "one two", false, 0, 2);
  expect_wer("one", "one", false, 0, 1);
  expect_wer("two pigs", "three pink pigs", false, 2, 3);
  expect_wer("one    two", "one two", false, 0, 2);
  expect_wer("one two", "one     two ", false, 0, 2);
  expect_wer("two     pigs", "three pink pigs", false, 2, 3);
  expect_wer("", "", false, 0, 0);
  expect_wer("one two", "", false, 2, 0);
  expect_wer("", "three four five", false, 3, 3);
  expect_wer("ONE two", "one two", false, 1, 2);
  expect_wer("one two", "ONE two", false, 1, 2);
  expect_wer("ONE two.", "one two?", true, 0, 2);
  expect_wer("one! two", "ONE, two", true, 0, 2);
  /* '-' and '\'' are kept; Unicode punctuation goes; tabs and newlines are \s. */
  expect_wer("don't re-do \xe2\x80\x9cit\xe2\x80\x9d\xe3\x80\x82", "don't re-do it", true, 0, 3);
  expect_wer("dont redo it", "don't re-do it", true, 2, 3);
  expect_wer("\tone\n\ntwo ", " one two", false, 0, 2);
}
END_TEST

static void expect_ed(const char *ref, const char *hyp, int64_t ins, int64_t subs, int64_t dels, int64_t total) {
  lv_edit_stats e;
  EXPECT_OK(lv_wer_edit_distance(ref, hyp, &e));
  ck_assert_msg(e.ins == ins && e.subs == subs && e.dels == dels && e.total == total,
                "ref \"%s\" hyp \"%s\": (%lld, %lld, %lld, %lld), want (%lld, %lld, %lld, %lld)", ref, hyp,
                (long long)e.ins, (long long)e.subs, (long long)e.dels, (long long)e.total, (long long)ins,
                (long long)subs, (long long)dels, (long long)total);
}

START_TEST(test_edit_distance) {
  const char *r = "a b c d e f g h";
  expect_ed(r, "a b c d e f g h", 0, 0, 0, 0);
  expect_ed(r, "a b d e f g h", 0, 0, 1, 1);
  expect_ed(r, "a b c i d e f g h", 1, 0, 0, 1);
  expect_ed(r, "a b c i e f g h", 0, 1, 0, 1);
  expect_ed("a b c d e f g j h", "a b c i d e f g h", 1, 0, 1, 2);
  expect_ed("a b c d e f g j h", "a b c i e f g h k", 1, 1, 1, 3);
  expect_ed("", "", 0, 0, 0, 0);
  expect_ed("", "a b c", 3, 0, 0, 3);
  expect_ed("a b c d", "", 0, 0, 4, 4);
  expect_ed("a b c d e   f g h", "a b c d e f g h", 0, 0, 0, 0);
  expect_ed("a b c d e f g h", "a b c d e   f g h", 0, 0, 0, 0);
  static const int ref[] = {0, 1, 2, 3, 9}, hyp[] = {0, 2, 3, 5, 6};
  lv_edit_stats e;
  EXPECT_OK(lv_wer_edit_distance_ids(ref, 5, hyp, 5, &e));
  ck_assert(e.ins == 1 && e.subs == 1 && e.dels == 1 && e.total == 3);
}
END_TEST

static void expect_str(char *got, const char *want) {
  ck_assert_ptr_nonnull(got);
  ck_assert_msg(!strcmp(got, want), "got \"%s\", want \"%s\"", got, want);
  free(got);
}

START_TEST(test_filters) {
  expect_str(lv_wer_filter_epsilon("<epsilon>epsilon tokens are<epsilon>removed<epsilon>"),
             "epsilon tokens are removed");
  expect_str(lv_wer_filter_noise("<noise> noise tokens are <noise> removed <noise>"), "noise tokens are removed");
  /* The in-graph regex replaces non-overlapping matches: of two adjacent <noise>, one
   * stays. */
  expect_str(lv_wer_filter_noise_regex("a <noise> <noise> b"), "a <noise> b");
  expect_str(lv_wer_filter_noise_regex("<noise> a <noise>"), " a ");
  expect_str(lv_wer_filter_noise_regex("<noise>"), " ");
  expect_str(lv_wer_filter_noise_regex("a<noise> b"), "a<noise> b");
  expect_str(lv_wer_filter_epsilon_regex("a<epsilon><epsilon>b"), "a b");
}
END_TEST

/* model_test.py testPostProcessDecodeOut: two utterances, two hypotheses each. */
START_TEST(test_post_process_decode_out) {
  lv_metric *m = lv_wer_metric_new();
  ck_assert_ptr_nonnull(m);
  lv_wer_stats *s = lv_wer_metric_stats(m);
  const char *h0[] = {"a b c d", "a b c d"}, *h1[] = {"wrong", ""};
  /* Reference ids: non-padded target_labels; top hypothesis: topk_ids[row][:topk_lens]. */
  static const int r0[] = {1, 2, 3}, t0[] = {1, 2}, r1[] = {2, 3, 4}, t1[] = {3, 4, 5, 6};
  EXPECT_OK(lv_wer_stats_add(s, "a b c d", h0, 2, r0, 3, t0, 2));
  EXPECT_OK(lv_wer_stats_add(s, "a", h1, 2, r1, 3, t1, 4));
  ck_assert_int_eq(s->norm_errors, 1);
  ck_assert_int_eq(s->norm_words, 5);
  ck_assert_int_eq(s->ed.total, 1);
  ck_assert_int_eq(s->ed_words, 5);
  ck_assert_int_eq(s->ter_errors, 4);
  ck_assert_int_eq(s->ter_tokens, 6);
  ck_assert_double_eq_tol(lv_wer_sacc(s), 0.5, 1e-12);
  ck_assert_double_eq_tol(lv_wer_oracle(s), 0.2, 1e-12);
  {
    /* oracle_norm_wer divides by the filtered reference's words, as Lingvo: the <noise>
     * regex leaves one of two adjacent <noise> (3 words, 1 error), the filter none (2). */
    lv_metric *m2 = lv_wer_metric_new();
    lv_wer_stats *s2 = lv_wer_metric_stats(m2);
    const char *h2[] = {"a b"};
    EXPECT_OK(lv_wer_stats_add(s2, "a <noise> <noise> b", h2, 1, NULL, 0, NULL, 0));
    ck_assert_int_eq(s2->norm_words, 3);
    ck_assert_int_eq(s2->oracle_errors, 1);
    ck_assert_int_eq(s2->ed_words, 2);
    ck_assert_double_eq_tol(lv_wer_oracle(s2), 0.5, 1e-12);
    lv_metric_free(m2);
  }
  double v;
  EXPECT_OK(lv_metric_value(m, &v));
  ck_assert_double_eq_tol(v, 0.2, 1e-12);
  int n = lv_metric_summary_count(m);
  lv_summary_value *sv = calloc((size_t)n, sizeof *sv);
  EXPECT_OK(lv_metric_summary(m, "norm_wer", sv, &n));
  ck_assert_int_eq(n, 13);
  ck_assert_str_eq(sv[0].tag, "norm_wer");
  ck_assert_double_eq_tol(sv[0].value, 0.2, 1e-12);
  int found = 0;
  for (int i = 0; i < n; i++) {
    if (!strcmp(sv[i].tag, "error_rates/sub")) {
      found++;
      ck_assert_double_eq_tol(sv[i].value, 0.2, 1e-12);
    }
    if (!strcmp(sv[i].tag, "error_rates/wer")) {
      found++;
      ck_assert_double_eq_tol(sv[i].value, 0.2, 1e-12);
    }
    if (!strcmp(sv[i].tag, "ter")) {
      found++;
      ck_assert_double_eq_tol(sv[i].value, 4.0 / 6, 1e-12);
    }
  }
  ck_assert_int_eq(found, 3);
  free(sv);
  lv_metric_free(m);
}
END_TEST

/* Case: norm_wer counts it, the case-insensitive rates do not; <noise> and <epsilon> are
 * filtered before either. */
START_TEST(test_case_and_filters_in_stats) {
  lv_wer_stats s = {0};
  const char *h[] = {"The <epsilon>cat <noise> sat"};
  EXPECT_OK(lv_wer_stats_add(&s, "the cat sat", h, 1, NULL, 0, NULL, 0));
  ck_assert_int_eq(s.norm_errors, 1);
  ck_assert_int_eq(s.ed.subs, 1);
  ck_assert_int_eq(s.ed_ci.total, 0);
  ck_assert_int_eq(s.correct, 0);
  ck_assert_int_eq(s.ter_tokens, 0);
  EXPECT_ERR(lv_wer_stats_add(&s, "x", h, 0, NULL, 0, NULL, 0), LV_ERR_INVALID, "at least one hypothesis");
  ck_assert_int_eq(s.utterances, 1);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("wer");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_compute_wer);
  tcase_add_test(tc, test_edit_distance);
  tcase_add_test(tc, test_filters);
  tcase_add_test(tc, test_post_process_decode_out);
  tcase_add_test(tc, test_case_and_filters_in_stats);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
