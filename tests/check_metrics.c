/* Metrics: Lingvo's metrics_test.py and scorers_test.py vectors for AverageMetric,
 * UniqueAverageMetric, F1Metric, MCCMetric, CorpusBleuMetric and the BLEU scorer, plus
 * edge cases (empty corpus or hypothesis, weight 0, Unicode white space) and the named
 * metric set's summary order and score text. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "metrics/bleu.h"
#include "metrics/metrics.h"

#define EPS 1e-7

static double value_of(const lv_metric *m) {
  double v = NAN;
  EXPECT_OK(lv_metric_value(m, &v));
  return v;
}

static double bleu_of(const lv_bleu_scorer *s) { return lv_bleu_score(s); }

static void add(lv_bleu_scorer *s, const char *ref, const char *hyp) { EXPECT_OK(lv_bleu_add_sentence(s, ref, hyp)); }

START_TEST(test_average) {
  lv_metric *m = lv_metric_average_new();
  EXPECT_OK(lv_metric_average_update(m, 1.0, 1.0));
  EXPECT_OK(lv_metric_average_update(m, 2.0, 10.0));
  ck_assert(lv_metric_total_value(m) == 21.0);
  ck_assert(value_of(m) == 21.0 / 11.0);
  lv_summary_value sv[LV_METRIC_SUMMARY_MAX];
  int n = 0;
  EXPECT_OK(lv_metric_summary(m, "metric_name", sv, &n));
  ck_assert_int_eq(n, 1);
  ck_assert_str_eq(sv[0].tag, "metric_name");
  ck_assert(sv[0].value == 21.0 / 11.0);
  /* Summary does not reset the statistics. */
  EXPECT_OK(lv_metric_average_update(m, 1.0, 1.0));
  ck_assert(lv_metric_total_value(m) == 22.0);
  EXPECT_ERR(lv_metric_average_update(m, 5.0, -1.0), LV_ERR_INVALID, "weight must be non-negative.  Got: -1.000000");
  ck_assert(lv_metric_total_value(m) == 22.0 && lv_metric_total_weight(m) == 12.0);
  /* Settable totals: Lingvo reports num_predictions as a sum with total_weight = 1. */
  lv_metric_set_totals(m, 300.0, 1.0);
  ck_assert(value_of(m) == 300.0);
  lv_metric_free(m);
}
END_TEST

START_TEST(test_average_weight_zero) {
  lv_metric *m = lv_metric_average_new();
  ck_assert(value_of(m) == 0.0); /* no updates */
  EXPECT_OK(lv_metric_average_update(m, 7.0, 0.0));
  ck_assert(value_of(m) == 0.0);
  ck_assert(lv_metric_total_weight(m) == 0.0);
  EXPECT_OK(lv_metric_average_update(m, 3.0, 2.0));
  ck_assert(value_of(m) == 3.0);
  lv_metric_free(m);
}
END_TEST

START_TEST(test_unique_average) {
  lv_metric *m = lv_metric_unique_average_new(true);
  EXPECT_OK(lv_metric_unique_update(m, "a", 1.0, 1.0));
  EXPECT_OK(lv_metric_unique_update(m, "b", 2.0, 10.0));
  EXPECT_OK(lv_metric_unique_update(m, "a", 2.0, 1.0)); /* different value for 'a' */
  double v = 0;
  EXPECT_ERR(lv_metric_value(m, &v), LV_ERR_INVALID, "duplicate keys with different values", "'a'");
  lv_summary_value sv[LV_METRIC_SUMMARY_MAX];
  int n = 0;
  EXPECT_ERR(lv_metric_summary(m, "x", sv, &n), LV_ERR_INVALID, "'a'");
  lv_metric_free(m);

  m = lv_metric_unique_average_new(true);
  EXPECT_OK(lv_metric_unique_update(m, "a", 1.0, 1.0));
  EXPECT_OK(lv_metric_unique_update(m, "b", 2.0, 10.0));
  EXPECT_OK(lv_metric_unique_update(m, "a", 1.0, 1.0)); /* duplicate ignored */
  ck_assert(lv_metric_total_value(m) == 21.0);
  ck_assert(value_of(m) == 21.0 / 11.0);
  EXPECT_OK(lv_metric_summary(m, "metric_name", sv, &n));
  ck_assert_int_eq(n, 4);
  const char *tags[] = {"metric_name", "metric_name/total_count", "metric_name/total_value",
                        "metric_name/total_weight"};
  const double want[] = {21.0 / 11.0, 2.0, 21.0, 11.0};
  for (int i = 0; i < 4; i++) {
    ck_assert_str_eq(sv[i].tag, tags[i]);
    ck_assert(sv[i].value == want[i]);
  }
  /* np.isclose: a duplicate within rtol 1e-5 is no mismatch. */
  EXPECT_OK(lv_metric_unique_update(m, "b", 2.0 * (1 + 1e-6), 10.0));
  ck_assert(value_of(m) == 21.0 / 11.0);
  /* A negative weight on a new key is an error and records nothing. */
  EXPECT_ERR(lv_metric_unique_update(m, "c", 1.0, -2.0), LV_ERR_INVALID, "weight must be non-negative");
  ck_assert_int_eq(lv_metric_unique_count(m), 2);
  lv_metric_free(m);

  m = lv_metric_unique_average_new(false);
  EXPECT_OK(lv_metric_unique_update(m, "a", 1.0, 1.0));
  EXPECT_OK(lv_metric_unique_update(m, "a", 2.0, 1.0));
  ck_assert(value_of(m) == 1.0); /* only a warning */
  lv_metric_free(m);
}
END_TEST

START_TEST(test_unique_average_many_keys) {
  lv_metric *m = lv_metric_unique_average_new(true);
  char key[32];
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < 5000; i++) {
      snprintf(key, sizeof key, "utt-%d", i);
      EXPECT_OK(lv_metric_unique_update(m, key, (double)(i % 7), 1.0));
    }
  ck_assert_int_eq(lv_metric_unique_count(m), 5000);
  double sum = 0;
  for (int i = 0; i < 5000; i++) sum += i % 7;
  ck_assert(fabs(value_of(m) - sum / 5000) < 1e-12);
  lv_metric_free(m);
}
END_TEST

START_TEST(test_f1_and_mcc) {
  lv_metric *m = lv_metric_f1_new();
  ck_assert(value_of(m) == 0.0); /* nothing counted: 0, not NaN */
  ck_assert(lv_metric_precision(m) == 0.0 && lv_metric_recall(m) == 0.0);
  lv_metric_true_positive(m, 2.0);
  lv_metric_false_positive(m, 1.0);
  lv_metric_false_negative(m, 1.0);
  ck_assert(fabs(lv_metric_precision(m) - 2.0 / 3.0) < EPS);
  ck_assert(fabs(lv_metric_recall(m) - 2.0 / 3.0) < EPS);
  double p = 2.0 / 3.0, r = 2.0 / 3.0;
  ck_assert(fabs(value_of(m) - 2 * p * r / (p + r)) < EPS);
  lv_metric_free(m);

  m = lv_metric_f1_new();
  lv_metric_false_positive(m, 3.0); /* precision 0, recall 0 (no positives) */
  ck_assert(value_of(m) == 0.0);
  lv_metric_free(m);

  m = lv_metric_mcc_new();
  lv_metric_true_positive(m, 2.0);
  lv_metric_true_negative(m, 2.0);
  lv_metric_false_positive(m, 1.0);
  lv_metric_false_negative(m, 1.0);
  ck_assert(fabs(value_of(m) - 1.0 / 3.0) < EPS);
  lv_metric_free(m);

  m = lv_metric_mcc_new();
  lv_metric_true_positive(m, 4.0); /* no negatives: denominator 0 */
  ck_assert(value_of(m) == 0.0);
  lv_metric_free(m);
}
END_TEST

START_TEST(test_corpus_bleu_metric) {
  lv_metric *m = lv_metric_corpus_bleu_new(LV_BLEU_SEP_NONE);
  ck_assert(value_of(m) == 0.0); /* empty corpus */
  EXPECT_OK(lv_metric_bleu_update(m, "a b c d", "a b c d"));
  EXPECT_OK(lv_metric_bleu_update(m, "a b c", "a b c"));
  ck_assert(value_of(m) == 1.0);
  lv_summary_value sv[LV_METRIC_SUMMARY_MAX];
  int n = 0;
  EXPECT_OK(lv_metric_summary(m, "corpus_bleu", sv, &n));
  ck_assert_int_eq(n, 1);
  ck_assert_str_eq(sv[0].tag, "corpus_bleu");
  ck_assert(sv[0].value == 1.0);
  ck_assert_int_eq(lv_metric_bleu_scorer(m)->max_ngram, 4);
  lv_metric_free(m);
}
END_TEST

/* scorers_test.py, vector for vector. */
START_TEST(test_bleu_scorer_vectors) {
  lv_bleu_scorer s;
  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  add(&s, "hyp matches ref str", "hyp matches ref str");
  ck_assert(fabs(bleu_of(&s) - 1.0) < EPS);
  add(&s, "almost right", "almost write");
  ck_assert(fabs(bleu_of(&s) - pow(5.0 / 6 * 3.0 / 4 * 2.0 / 2 * 1.0 / 1, 0.25)) < EPS);

  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  add(&s, "a b c d", "a a b c d"); /* the extra 'a' is clipped */
  ck_assert(fabs(bleu_of(&s) - pow(4.0 / 5 * 3.0 / 4 * 2.0 / 3 * 1.0 / 2, 0.25)) < EPS);

  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  add(&s, "", "");
  ck_assert(fabs(bleu_of(&s)) < EPS);
  const char *grow[] = {"a", "a b", "a b c", "a b c d"};
  for (int i = 0; i < 4; i++) {
    add(&s, grow[i], grow[i]);
    ck_assert(fabs(bleu_of(&s) - 1.0) < EPS);
  }

  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  add(&s, "1 2 3 4 5", "1 2 3 4 -2");
  ck_assert(fabs(bleu_of(&s) - 0.6687403) < EPS);

  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  add(&s, "1 2 3 4 5", "1 2 3 4");
  ck_assert(fabs(bleu_of(&s) - 0.7788008) < EPS);
  ck_assert(fabs(bleu_of(&s) - exp(1 - 5.0 / 4)) < 1e-12);

  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  add(&s, "It is obvious that this will have a certain influence .",
      "It is clear that this will have a certain influence .");
  ck_assert(fabs(bleu_of(&s) - 0.74194467) < EPS);
}
END_TEST

START_TEST(test_bleu_edges) {
  lv_bleu_scorer s;
  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  ck_assert(bleu_of(&s) == 0.0); /* empty corpus */
  add(&s, "a b c", "");
  ck_assert(bleu_of(&s) == 0.0); /* empty hypothesis: no n-grams, no matches */
  ck_assert(s.ref_tokens == 3 && s.hyp_tokens == 0 && s.totals[0] == 0);
  add(&s, "", "x y");
  ck_assert(bleu_of(&s) == 0.0); /* nothing matches */
  add(&s, "p q", "p q");
  /* unigrams 2/4, bigrams 1/2; 4 hyp tokens < 5 ref tokens. */
  double want = exp(1 - 5.0 / 4) * exp((log(2.0 / 4) + log(1.0 / 2)) / 2);
  ck_assert(fabs(bleu_of(&s) - want) < 1e-12);
  /* Orders with no match are skipped, not zero: only unigrams match here. */
  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  add(&s, "a b c d", "d c b a");
  ck_assert(fabs(bleu_of(&s) - 1.0) < EPS);
  /* Clipping counts each n-gram up to its count in the same sentence's reference. */
  EXPECT_OK(lv_bleu_init(&s, 1, LV_BLEU_SEP_NONE));
  add(&s, "the the cat", "the the the the");
  ck_assert(s.matches[0] == 2 && s.totals[0] == 4);
  /* White space as Python's str.split(): tabs, runs, U+00A0, U+2028, U+3000, \x1f. */
  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  add(&s, "  a\tb\xc2\xa0" "c\xe2\x80\xa8" "d\xe3\x80\x80" "e\x1f" "f \n", "a b c d e f");
  ck_assert(s.ref_tokens == 6 && s.hyp_tokens == 6);
  ck_assert(fabs(bleu_of(&s) - 1.0) < EPS);
  /* Non-space multi-byte characters stay inside tokens (U+2581, U+00E9, U+200B). */
  EXPECT_OK(lv_bleu_init(&s, 4, LV_BLEU_SEP_NONE));
  add(&s, "caf\xc3\xa9 \xe2\x96\x81x a\xe2\x80\x8b" "b", "caf\xc3\xa9");
  ck_assert(s.ref_tokens == 3 && s.hyp_tokens == 1 && s.matches[0] == 1);
  EXPECT_ERR(lv_bleu_init(&s, 0, LV_BLEU_SEP_NONE), LV_ERR_INVALID, "max_ngram 0");
}
END_TEST

START_TEST(test_unsegmenter) {
  char *out = NULL;
  EXPECT_OK(lv_bleu_unsegment(LV_BLEU_SEP_BPE, " new@@ s are here@@  ", &out));
  ck_assert_str_eq(out, "news are here");
  free(out);
  EXPECT_OK(lv_bleu_unsegment(LV_BLEU_SEP_WPM, "\xe2\x96\x81new s \xe2\x96\x81" "are", &out));
  ck_assert_str_eq(out, "news are");
  free(out);
  EXPECT_OK(lv_bleu_unsegment(LV_BLEU_SEP_SPM, "\xe2\x96\x81" "a\xe2\x96\x81\xe2\x96\x81" "b \t", &out));
  ck_assert_str_eq(out, "a  b");
  free(out);
  EXPECT_OK(lv_bleu_unsegment(LV_BLEU_SEP_NONE, " x@@ y ", &out));
  ck_assert_str_eq(out, " x@@ y "); /* identity, not even stripped */
  free(out);
  EXPECT_OK(lv_bleu_unsegment(LV_BLEU_SEP_WPM, "   ", &out));
  ck_assert_str_eq(out, "");
  free(out);
  /* MT's CorpusBleuMetric(separator_type='wpm') scores surface words. */
  lv_metric *m = lv_metric_corpus_bleu_new(LV_BLEU_SEP_WPM);
  EXPECT_OK(lv_metric_bleu_update(m, "\xe2\x96\x81hel lo \xe2\x96\x81world", "\xe2\x96\x81hello \xe2\x96\x81wor ld"));
  ck_assert(value_of(m) == 1.0);
  ck_assert_int_eq(lv_metric_bleu_scorer(m)->hyp_tokens, 2);
  lv_metric_free(m);
}
END_TEST

START_TEST(test_metric_set) {
  lv_metric_set *s = lv_metric_set_new();
  EXPECT_OK(lv_metric_set_add(s, "num_samples_in_batch", lv_metric_average_new()));
  EXPECT_OK(lv_metric_set_add(s, "corpus_bleu", lv_metric_corpus_bleu_new(LV_BLEU_SEP_NONE)));
  EXPECT_OK(lv_metric_set_add(s, "examples/sec", lv_metric_average_new()));
  EXPECT_OK(lv_metric_set_add(s, "uniq", lv_metric_unique_average_new(true)));
  EXPECT_ERR(lv_metric_set_add(s, "corpus_bleu", lv_metric_f1_new()), LV_ERR_INVALID, "corpus_bleu: defined twice");
  EXPECT_ERR(lv_metric_set_add(s, "x", NULL), LV_ERR_RESOURCE, "out of memory");
  char longname[200];
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  EXPECT_ERR(lv_metric_set_add(s, longname, lv_metric_average_new()), LV_ERR_INVALID, "longer than");
  ck_assert_int_eq(lv_metric_set_count(s), 4);
  ck_assert_str_eq(lv_metric_set_name(s, 0), "corpus_bleu");
  ck_assert_str_eq(lv_metric_set_name(s, 3), "uniq");
  ck_assert_ptr_null(lv_metric_set_get(s, "missing"));
  lv_metric *bleu = lv_metric_set_get(s, "corpus_bleu");
  ck_assert_int_eq(lv_metric_kind_of(bleu), LV_METRIC_CORPUS_BLEU);
  ck_assert_str_eq(lv_metric_kind_names[lv_metric_kind_of(bleu)], "CorpusBleuMetric");
  EXPECT_OK(lv_metric_bleu_update(bleu, "1 2 3 4 5", "1 2 3 4 -2"));
  EXPECT_OK(lv_metric_average_update(lv_metric_set_get(s, "num_samples_in_batch"), 8, 1));
  EXPECT_OK(lv_metric_average_update(lv_metric_set_get(s, "num_samples_in_batch"), 4, 1));
  lv_metric_set_totals(lv_metric_set_get(s, "examples/sec"), 123.5, 1);
  lv_metric *u = lv_metric_set_get(s, "uniq");
  EXPECT_OK(lv_metric_unique_update(u, "k", 0.5, 2));
  lv_summary_value *v = NULL;
  int n = 0;
  EXPECT_OK(lv_metric_set_summaries(s, &v, &n));
  ck_assert_int_eq(n, 7);
  char *text = lv_summary_score_text(v, n);
  ck_assert_str_eq(text,
                   "corpus_bleu: 0.6687403\n"
                   "examples/sec: 123.5\n"
                   "num_samples_in_batch: 6\n"
                   "uniq: 0.5\n"
                   "uniq/total_count: 1\n"
                   "uniq/total_value: 1\n"
                   "uniq/total_weight: 2");
  free(text);
  free(v);
  /* A failing metric fails the summaries and names itself. */
  EXPECT_OK(lv_metric_unique_update(u, "k", 0.7, 2));
  EXPECT_ERR(lv_metric_set_summaries(s, &v, &n), LV_ERR_INVALID, "metric uniq: ", "'k'");
  ck_assert_ptr_null(v);
  lv_metric_set_free(s);

  s = lv_metric_set_new(); /* empty set: no values */
  EXPECT_OK(lv_metric_set_summaries(s, &v, &n));
  ck_assert_int_eq(n, 0);
  text = lv_summary_score_text(v, n);
  ck_assert_str_eq(text, "");
  free(text);
  free(v);
  lv_metric_set_free(s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("metrics");
  TCase *tc = tcase_create("metrics");
  tcase_add_test(tc, test_average);
  tcase_add_test(tc, test_average_weight_zero);
  tcase_add_test(tc, test_unique_average);
  tcase_add_test(tc, test_unique_average_many_keys);
  tcase_add_test(tc, test_f1_and_mcc);
  tcase_add_test(tc, test_corpus_bleu_metric);
  tcase_add_test(tc, test_bleu_scorer_vectors);
  tcase_add_test(tc, test_bleu_edges);
  tcase_add_test(tc, test_unsegmenter);
  tcase_add_test(tc, test_metric_set);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
