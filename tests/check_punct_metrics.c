/* Punctuator decoder metrics (metrics/punct_metrics.h) on hand-computed cases: identity,
 * the trivial answer, hypotheses with other words (LCS alignment), repeated marks,
 * white space, empty lines, the trivial answer's text, the report, and a long pair whose
 * alignment table would be too large. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "metrics/punct_metrics.h"

#define EPS 1e-12

static void expect_counts(const lv_punct_metrics *m, lv_punct_class k, int64_t tp, int64_t fp, int64_t fn) {
  const lv_punct_counts *c = &m->counts[k];
  ck_assert_msg(c->tp == tp && c->fp == fp && c->fn == fn, "class %s: tp %lld fp %lld fn %lld, want %lld %lld %lld",
                lv_punct_class_names[k], (long long)c->tp, (long long)c->fp, (long long)c->fn, (long long)tp,
                (long long)fp, (long long)fn);
}

static void one_pair(lv_punct_metrics *m, const char *hyp, const char *ref) {
  EXPECT_OK(lv_punct_metrics_init(m));
  EXPECT_OK(lv_punct_metrics_add(m, hyp, ref));
}

static const char kRef[] = "He said, \"Go home.\" Then he left.";

START_TEST(test_identity) {
  lv_punct_metrics m;
  one_pair(&m, kRef, kRef);
  ck_assert_int_eq(m.sentences, 1);
  ck_assert_int_eq(m.exact, 1);
  ck_assert_int_eq(m.word_mismatch, 0);
  ck_assert_double_eq_tol(lv_punct_exact_rate(&m), 1.0, EPS);
  ck_assert_double_eq_tol(lv_punct_bleu(&m), 100.0, 1e-9);
  expect_counts(&m, LV_PUNCT_COMMA, 1, 0, 0);
  expect_counts(&m, LV_PUNCT_PERIOD, 2, 0, 0);
  expect_counts(&m, LV_PUNCT_QUOTE, 2, 0, 0);
  expect_counts(&m, LV_PUNCT_QUESTION, 0, 0, 0);
  expect_counts(&m, LV_PUNCT_ALL_MARKS, 5, 0, 0);
  expect_counts(&m, LV_PUNCT_CAPITAL, 3, 0, 0);
  double p, r, f;
  lv_punct_prf(&m.counts[LV_PUNCT_PERIOD], &p, &r, &f);
  ck_assert_double_eq_tol(f, 1.0, EPS);
}
END_TEST

/* The trivial answer to kRef is "He said go home then he left.": same words; gaps of
 * the reference: after "said" , and an opening ", after "home" . and a closing ", at
 * the end . -- the answer has only the final . and the capital of "He". */
START_TEST(test_trivial_answer_scores) {
  char *base = NULL;
  EXPECT_OK(lv_punct_trivial_answer(kRef, &base));
  ck_assert_str_eq(base, "He said go home then he left.");
  lv_punct_metrics m;
  one_pair(&m, base, kRef);
  ck_assert_int_eq(m.exact, 0);
  ck_assert_int_eq(m.word_mismatch, 0);
  expect_counts(&m, LV_PUNCT_PERIOD, 1, 0, 1);
  expect_counts(&m, LV_PUNCT_COMMA, 0, 0, 1);
  expect_counts(&m, LV_PUNCT_QUOTE, 0, 0, 2);
  expect_counts(&m, LV_PUNCT_ALL_MARKS, 1, 0, 4);
  expect_counts(&m, LV_PUNCT_CAPITAL, 1, 0, 2);
  double p, r, f;
  lv_punct_prf(&m.counts[LV_PUNCT_PERIOD], &p, &r, &f);
  ck_assert_double_eq_tol(p, 1.0, EPS);
  ck_assert_double_eq_tol(r, 0.5, EPS);
  ck_assert_double_eq_tol(f, 2.0 / 3.0, EPS);
  lv_punct_prf(&m.counts[LV_PUNCT_CAPITAL], &p, &r, &f);
  ck_assert_double_eq_tol(p, 1.0, EPS);
  ck_assert_double_eq_tol(r, 1.0 / 3.0, EPS);
  ck_assert_double_eq_tol(f, 0.5, EPS);
  /* BLEU is sacrebleu's of the same pair */
  lv_sacrebleu sb;
  EXPECT_OK(lv_sacrebleu_init(&sb, NULL));
  EXPECT_OK(lv_sacrebleu_add_sentence(&sb, kRef, base));
  ck_assert_double_eq_tol(lv_punct_bleu(&m), lv_sacrebleu_value(&sb), EPS);
  ck_assert(lv_punct_bleu(&m) > 0 && lv_punct_bleu(&m) < 100);
  free(base);
}
END_TEST

/* hyp words: the cat sat; ref: the black cat sat. LCS aligns the->the, cat->cat,
 * sat->sat, so hyp gaps 0 1 2 3 meet ref gaps 0 1 3 4 and ref gap 2 (after "black") is
 * unmatched. The , after "cat" has no , in ref gap 3: fp. The final . matches. The
 * comma after "black" in the reference is in the unmatched gap: fn. */
START_TEST(test_other_words) {
  lv_punct_metrics m;
  one_pair(&m, "The cat, sat.", "The black, cat sat.");
  ck_assert_int_eq(m.word_mismatch, 1);
  ck_assert_int_eq(m.exact, 0);
  expect_counts(&m, LV_PUNCT_COMMA, 0, 1, 1);
  expect_counts(&m, LV_PUNCT_PERIOD, 1, 0, 0);
  expect_counts(&m, LV_PUNCT_CAPITAL, 1, 0, 0);
  /* A capitalized word only the reference has is missed; one only the hypothesis has
   * is a false positive; a changed word is both. */
  one_pair(&m, "I saw Rome today.", "I saw Paris Today.");
  /* words: i saw rome today / i saw paris today: rome and paris unaligned */
  expect_counts(&m, LV_PUNCT_CAPITAL, 1, 1, 2);
  expect_counts(&m, LV_PUNCT_PERIOD, 1, 0, 0);
  /* Nothing in common: every mark is unmatched. */
  one_pair(&m, "Abc, def.", "Xyz; uvw!");
  expect_counts(&m, LV_PUNCT_ALL_MARKS, 0, 2, 2);
  expect_counts(&m, LV_PUNCT_CAPITAL, 0, 1, 1);
  /* Gap 0 always meets gap 0: the opening quote of a changed first word counts. */
  one_pair(&m, "\"Yes,\" he said.", "\"No,\" he said.");
  expect_counts(&m, LV_PUNCT_QUOTE, 1, 1, 1);
  expect_counts(&m, LV_PUNCT_COMMA, 0, 1, 1);
  expect_counts(&m, LV_PUNCT_PERIOD, 1, 0, 0);
}
END_TEST

/* Repeated marks in one gap count one by one; a word's capital needs its first letter. */
START_TEST(test_repeated_marks) {
  lv_punct_metrics m;
  one_pair(&m, "Wait... what?!", "Wait. What?");
  expect_counts(&m, LV_PUNCT_PERIOD, 1, 2, 0);
  expect_counts(&m, LV_PUNCT_QUESTION, 1, 0, 0);
  expect_counts(&m, LV_PUNCT_EXCLAMATION, 0, 1, 0);
  expect_counts(&m, LV_PUNCT_CAPITAL, 1, 0, 1);
  ck_assert_int_eq(m.word_mismatch, 0);
  /* Marks inside a word (3:16, don't) belong to the gap after it; the apostrophe and
   * hyphen are no class; "(Amen" is capitalized (punctuation before the letter). */
  one_pair(&m, "John 3:16; don't (Amen) well-known:", "John 316: dont Amen wellknown;");
  expect_counts(&m, LV_PUNCT_COLON, 1, 1, 0);
  expect_counts(&m, LV_PUNCT_SEMICOLON, 0, 1, 1);
  expect_counts(&m, LV_PUNCT_CAPITAL, 2, 0, 0);
  ck_assert_int_eq(m.word_mismatch, 0);
}
END_TEST

START_TEST(test_white_space_and_empty) {
  lv_punct_metrics m;
  one_pair(&m, "  Hello,\t world. ", "Hello, world.");
  ck_assert_int_eq(m.exact, 1);
  one_pair(&m, "Hello , world.", "Hello, world.");
  ck_assert_int_eq(m.exact, 0);
  expect_counts(&m, LV_PUNCT_ALL_MARKS, 2, 0, 0);
  one_pair(&m, "", "");
  ck_assert_int_eq(m.exact, 1);
  expect_counts(&m, LV_PUNCT_ALL_MARKS, 0, 0, 0);
  expect_counts(&m, LV_PUNCT_CAPITAL, 0, 0, 0);
  one_pair(&m, "", "Hi.");
  ck_assert_int_eq(m.exact, 0);
  ck_assert_int_eq(m.word_mismatch, 1);
  expect_counts(&m, LV_PUNCT_PERIOD, 0, 0, 1);
  expect_counts(&m, LV_PUNCT_CAPITAL, 0, 0, 1);
  /* Corpus: rates over the sentences added. */
  EXPECT_OK(lv_punct_metrics_init(&m));
  EXPECT_OK(lv_punct_metrics_add(&m, "A b.", "A b."));
  EXPECT_OK(lv_punct_metrics_add(&m, "A b.", "A, b."));
  EXPECT_OK(lv_punct_metrics_add(&m, "A b", "A b."));
  EXPECT_OK(lv_punct_metrics_add(&m, "A b.", "A b."));
  ck_assert_double_eq_tol(lv_punct_exact_rate(&m), 0.5, EPS);
  expect_counts(&m, LV_PUNCT_PERIOD, 3, 0, 1);
  expect_counts(&m, LV_PUNCT_COMMA, 0, 0, 1);
  lv_punct_counts zero = {0, 0, 0};
  double p = -1, r = -1, f = -1;
  lv_punct_prf(&zero, &p, &r, &f);
  ck_assert(p == 0 && r == 0 && f == 0);
  EXPECT_OK(lv_punct_metrics_init(&m));
  ck_assert_double_eq_tol(lv_punct_exact_rate(&m), 0, EPS);
}
END_TEST

START_TEST(test_trivial_answer_text) {
  static const char *const cases[][2] = {
      {"\"Don't,\" he said; 3:16!", "Dont he said 316."},
      {"?!", "."},
      {"", "."},
      {"  Two   words  ", "Two words."},
      {"\xc3\xa9lan vital.", "\xc3\xa9lan vital."}, /* non-ASCII first letter: unchanged */
      {"ALL CAPS, here.", "All caps here."},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *out = NULL;
    EXPECT_OK(lv_punct_trivial_answer(cases[i][0], &out));
    ck_assert_str_eq(out, cases[i][1]);
    free(out);
  }
}
END_TEST

START_TEST(test_format) {
  lv_punct_metrics m;
  one_pair(&m, "He said go home then he left.", kRef);
  char buf[2048];
  int n = lv_punct_metrics_format(&m, buf, sizeof buf);
  ck_assert_int_gt(n, 0);
  ck_assert_int_lt(n, (int)sizeof buf);
  ck_assert_msg(strncmp(buf, "BLEU = ", 7) == 0, "%s", buf);
  ck_assert_msg(strstr(buf, "\nexact match 0.0000 (0 of 1 sentences; 0 with other words than the reference)\n"), "%s",
                buf);
  ck_assert_msg(strstr(buf, "  .        P 1.0000 R 0.5000 F1 0.6667  (tp 1 fp 0 fn 1)\n"), "%s", buf);
  ck_assert_msg(strstr(buf, "  Capital  P 1.0000 R 0.3333 F1 0.5000  (tp 1 fp 0 fn 2)\n"), "%s", buf);
  /* a short buffer is truncated, the length still reported */
  char small[16];
  ck_assert_int_eq(lv_punct_metrics_format(&m, small, sizeof small), n);
  ck_assert_uint_eq(strlen(small), sizeof small - 1);
}
END_TEST

/* 3,000 different words on each side: a 9M-cell table is over the limit, so nothing is
 * aligned and every mark is unmatched; the same words with one changed in the middle
 * align through the common prefix and suffix. */
START_TEST(test_long_lines) {
  enum { N = 3000 };
  char *h = malloc(N * 12 + 1), *r = malloc(N * 12 + 1);
  ck_assert(h && r);
  size_t hn = 0, rn = 0;
  for (int i = 0; i < N; i++) {
    hn += (size_t)sprintf(h + hn, "x%d, ", i);
    rn += (size_t)sprintf(r + rn, "y%d ", i);
  }
  lv_punct_metrics m;
  one_pair(&m, h, r);
  expect_counts(&m, LV_PUNCT_COMMA, 0, N, 0);
  ck_assert_int_eq(m.word_mismatch, 1);
  hn = rn = 0;
  for (int i = 0; i < N; i++) {
    hn += (size_t)sprintf(h + hn, "%s%d, ", i == N / 2 ? "Q" : "w", i);
    rn += (size_t)sprintf(r + rn, "w%d, ", i);
  }
  one_pair(&m, h, r);
  /* the gap after the changed word is unmatched on both sides */
  expect_counts(&m, LV_PUNCT_COMMA, N - 1, 1, 1);
  expect_counts(&m, LV_PUNCT_CAPITAL, 0, 1, 0);
  free(h);
  free(r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("punct_metrics");
  TCase *tc = tcase_create("punct_metrics");
  tcase_add_test(tc, test_identity);
  tcase_add_test(tc, test_trivial_answer_scores);
  tcase_add_test(tc, test_other_words);
  tcase_add_test(tc, test_repeated_marks);
  tcase_add_test(tc, test_white_space_and_empty);
  tcase_add_test(tc, test_trivial_answer_text);
  tcase_add_test(tc, test_format);
  tcase_add_test(tc, test_long_lines);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
