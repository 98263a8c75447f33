/* sacrebleu-compatible BLEU (metrics/sacrebleu.h) against sacrebleu's published vectors:
 *   test/test_bleu.py           raw BLEU, corpus BLEU (13a / none / smoothing none, two
 *                               references), statistics, scoring, offset, effective order,
 *                               degenerate statistics, max n-gram order 1..6;
 *   test/test_sentence_bleu.py  the Romanian sentence (#98) under exp / floor / add-k / none
 *                               and tokenizers 13a / none, and the zero-BLEU cases (#141);
 *   README.md                   the corpus_score lines (two references, and a variable
 *                               number of references) and the signature;
 * (mjpost/sacrebleu, git f615c72). sacrebleu publishes no 13a tokenizer cases: the ones
 * here were written from tokenizer_13a.py / tokenizer_re.py and their outputs checked
 * against that Tokenizer13a. Plus edge cases: empty hypotheses and corpus, UTF-8, Unicode
 * white space, very long lines, several references, bad options. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "metrics/sacrebleu.h"

#define EPSILON 1e-8

/* test_bleu.py's README corpus: 3 hypotheses, two reference streams. */
static const char *const kHyps[] = {"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."};
static const char *const kRefs1[] = {"The dog bit the man.", "It was not unexpected.", "The man bit him first."};
static const char *const kRefs2[] = {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."};

static lv_sacrebleu_opts opts_with(lv_sacrebleu_tokenizer tok, lv_sacrebleu_smooth sm, double v, int order, bool eff) {
  lv_sacrebleu_opts o = lv_sacrebleu_default_opts();
  o.tokenizer = tok;
  o.smooth = sm;
  o.smooth_value = v;
  o.max_ngram_order = order;
  o.effective_order = eff;
  return o;
}

/* sacrebleu.raw_corpus_bleu(hyps, [refs], smooth_value): tokenize none, floor, effective
 * order, one reference stream. */
static lv_sacrebleu_opts raw_opts(double smooth_value) {
  return opts_with(LV_SACREBLEU_TOK_NONE, LV_SACREBLEU_SMOOTH_FLOOR, smooth_value, 4, true);
}

/* Corpus score of n hypotheses against nrefs reference streams. */
static void corpus(const lv_sacrebleu_opts *o, const char *const *hyps, int n, const char *const *const *streams,
                   int nrefs, lv_sacrebleu_score *r) {
  lv_sacrebleu s;
  EXPECT_OK(lv_sacrebleu_init(&s, o));
  for (int i = 0; i < n; i++) {
    const char *refs[8];
    for (int k = 0; k < nrefs; k++) refs[k] = streams[k][i];
    EXPECT_OK(lv_sacrebleu_add(&s, hyps[i], refs, nrefs));
  }
  ck_assert_int_eq(s.segments, n);
  lv_sacrebleu_result(&s, r);
}

static double corpus_score(const lv_sacrebleu_opts *o, const char *const *hyps, int n,
                           const char *const *const *streams, int nrefs) {
  lv_sacrebleu_score r;
  corpus(o, hyps, n, streams, nrefs, &r);
  return r.score;
}

static double one(const lv_sacrebleu_opts *o, const char *hyp, const char *ref) {
  return corpus_score(o, &hyp, 1, (const char *const *const[]){&ref}, 1);
}

#define ASSERT_NEAR(got, want, eps) \
  ck_assert_msg(fabs((got) - (want)) < (eps), "%s = %.12g, want %.12g", #got, (double)(got), (double)(want))

static void expect_tok(lv_sacrebleu_tokenizer tok, const char *in, const char *want) {
  char *out = NULL;
  EXPECT_OK(lv_sacrebleu_tokenize(tok, in, &out));
  ck_assert_msg(!strcmp(out, want), "tokenize(\"%s\") = \"%s\", want \"%s\"", in, out, want);
  free(out);
}

START_TEST(test_tokenizer_13a) {
  const lv_sacrebleu_tokenizer T = LV_SACREBLEU_TOK_13A;
  expect_tok(T, "I'm a student.", "I'm a student .");
  expect_tok(T, "Hello, world. 3.14 and 1,000 -- a-b 1-2", "Hello , world . 3.14 and 1,000 -- a-b 1 - 2");
  /* Entities in order &quot; &amp; &lt; &gt;: "&amp;lt;" becomes "<", "&amp;quot;" "&quot;". */
  expect_tok(T, "&amp;lt; &quot;x&quot; &amp;quot; &lt;b&gt; AT&T &amp", "< \" x \" & quot ; < b > AT & T & amp");
  expect_tok(T, "a<skipped>b <skip>", "ab < skip >");
  expect_tok(T, "inter-\nnational\nline", "international line");
  /* Periods and commas split unless between digits. */
  expect_tok(T, "1.5 .5 5. a.5 5.a 1,2 ,x x, U.S.A.", "1.5 . 5 5 . a . 5 5 . a 1,2 , x x , U . S . A .");
  expect_tok(T, "1.2.3 1,2,3. a..b 1..2 ,,", "1.2.3 1,2,3 . a . . b 1 . . 2 , ,");
  expect_tok(T, "...", ". . .");
  /* A dash splits only after a digit. */
  expect_tok(T, "1-2 a-b 2- -2 1--2 x-1", "1 - 2 a-b 2 - -2 1 - -2 x-1");
  /* The first rule's class; the apostrophe is not in it. */
  expect_tok(T, "{|}~[\\]^_`!\"#$%&()*+:;<=>?@/ don't",
             "{ | } ~ [ \\ ] ^ _ ` ! \" # $ % & ( ) * + : ; < = > ? @ / don't");
  expect_tok(T, "\"Quote,\" she said.", "\" Quote , \" she said .");
  expect_tok(T, "e-mail: a@b.com (50%) $3.50/kg", "e-mail : a @ b . com ( 50 % ) $ 3.50 / kg");
  /* Unicode white space (NBSP, ideographic space, line separator) splits; U+200B does not. */
  expect_tok(T, "a\u00a0b\u3000c\u2028d\u200be", "a b c d\u200be");
  expect_tok(T, "x  \t ", "x");
  expect_tok(T, "", "");
  expect_tok(T, " \t\u3000 ", "");
  /* UTF-8 next to punctuation; the fullwidth comma is not ASCII punctuation. */
  expect_tok(T, "\u0163ar\u0103. \u4e2d\u6587\uff0cend", "\u0163ar\u0103 . \u4e2d\u6587\uff0cend");
  /* rstrip() comes first, so a trailing "-\n" is not joined. */
  expect_tok(T, "end -\n", "end -");
  /* none: white-space split only. */
  expect_tok(LV_SACREBLEU_TOK_NONE, "  Hello, world.\u00a0x \t", "Hello, world. x");
}
END_TEST

/* test_bleu.py: test_corpus_bleu_cases (intl is not implemented), test_max_ngram_order. */
START_TEST(test_corpus_bleu_cases) {
  const char *const *const streams[] = {kRefs1, kRefs2};
  lv_sacrebleu_opts o = lv_sacrebleu_default_opts();
  ASSERT_NEAR(corpus_score(&o, kHyps, 3, streams, 2), 48.530827, EPSILON);
  const char *const empty[] = {"", "", ""};
  ck_assert(corpus_score(&o, empty, 3, streams, 2) == 0.0);
  lv_sacrebleu_opts none = opts_with(LV_SACREBLEU_TOK_NONE, LV_SACREBLEU_SMOOTH_EXP, NAN, 4, false);
  ASSERT_NEAR(corpus_score(&none, kHyps, 3, streams, 2), 49.1919566, EPSILON);
  lv_sacrebleu_opts nosmooth = opts_with(LV_SACREBLEU_TOK_13A, LV_SACREBLEU_SMOOTH_NONE, NAN, 4, false);
  ASSERT_NEAR(corpus_score(&nosmooth, kHyps, 3, streams, 2), 48.530827, EPSILON);

  const char *want[] = {"77.65", "60.50", "53.93", "48.53", "46.14", "43.28"};
  for (int order = 1; order <= 6; order++) {
    lv_sacrebleu_opts oo = opts_with(LV_SACREBLEU_TOK_13A, LV_SACREBLEU_SMOOTH_EXP, NAN, order, false);
    char got[32];
    snprintf(got, sizeof got, "%.2f", corpus_score(&oo, kHyps, 3, streams, 2));
    ck_assert_msg(!strcmp(got, want[order - 1]), "order %d: %s, want %s", order, got, want[order - 1]);
  }
}
END_TEST

/* README.md: print(bleu.corpus_score(sys, refs)) and the variable-references example (an
 * empty reference is a reference of length 0), and the signatures. */
START_TEST(test_readme_lines) {
  const char *const *const streams[] = {kRefs1, kRefs2};
  lv_sacrebleu_opts o = lv_sacrebleu_default_opts();
  lv_sacrebleu_score r;
  char buf[256];
  corpus(&o, kHyps, 3, streams, 2, &r);
  lv_sacrebleu_format(&r, buf, sizeof buf);
  ck_assert_str_eq(buf, "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
  const char *const var1[] = {"", "It was not unexpected.", "The man bit him first."};
  const char *const *const vstreams[] = {var1, kRefs2};
  corpus(&o, kHyps, 3, vstreams, 2, &r);
  lv_sacrebleu_format(&r, buf, sizeof buf);
  ck_assert_str_eq(buf, "BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)");

  lv_sacrebleu_signature(&o, 2, buf, sizeof buf);
  ck_assert_str_eq(buf, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp");
  lv_sacrebleu_signature(&o, -1, buf, sizeof buf);
  ck_assert_str_eq(buf, "nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp");
  lv_sacrebleu_opts f = opts_with(LV_SACREBLEU_TOK_NONE, LV_SACREBLEU_SMOOTH_FLOOR, NAN, 4, true);
  lv_sacrebleu_signature(&f, 1, buf, sizeof buf);
  ck_assert_str_eq(buf, "nrefs:1|case:mixed|eff:yes|tok:none|smooth:floor[0.10]");
  f.smooth = LV_SACREBLEU_SMOOTH_ADD_K;
  f.smooth_value = 2;
  lv_sacrebleu_signature(&f, 1, buf, sizeof buf);
  ck_assert_str_eq(buf, "nrefs:1|case:mixed|eff:yes|tok:none|smooth:add-k[2.00]");
}
END_TEST

/* test_bleu.py: test_raw_bleu_cases, test_case_effective_order, test_case_statistics,
 * test_case_offset (all through raw_corpus_bleu). */
START_TEST(test_raw_bleu) {
  lv_sacrebleu_opts o = raw_opts(0.01);
  const char *const h1[] = {"this is a test", "another test"};
  const char *const r1[] = {"ref1", "ref2"};
  ck_assert(corpus_score(&o, h1, 2, (const char *const *const[]){r1}, 1) == 0.0);
  ASSERT_NEAR(one(&o, "this is a test", "this is a test") / 100, 1.0, EPSILON);
  ASSERT_NEAR(one(&o, "this is a fest", "this is a test") / 100, 0.223606797749979, EPSILON);

  ASSERT_NEAR(one(&o, "test", "a test") / 100, 0.3678794411714425, EPSILON);
  ASSERT_NEAR(one(&o, "a test", "a test") / 100, 1.0, EPSILON);
  ASSERT_NEAR(one(&o, "a little test", "a test") / 100, 0.03218297948685433, EPSILON);

  lv_sacrebleu s;
  EXPECT_OK(lv_sacrebleu_init(&s, &o));
  EXPECT_OK(lv_sacrebleu_add_sentence(&s, "I am a symbol string sequence a a", "am I am a character sequence"));
  const int64_t correct[] = {4, 2, 1, 0}, total[] = {6, 5, 4, 3};
  for (int n = 0; n < 4; n++) {
    ck_assert_int_eq(s.stats.correct[n], correct[n]);
    ck_assert_int_eq(s.stats.total[n], total[n]);
  }

  const char *hyp = "am I am a character sequence", *ref = "I am a symbol string sequence a a";
  lv_sacrebleu_opts zero = raw_opts(0.0);
  ASSERT_NEAR(one(&zero, hyp, ref) / 100, 0.0, EPSILON);
  lv_sacrebleu_opts dflt = raw_opts(NAN); /* floor's default 0.1 */
  ASSERT_NEAR(one(&dflt, hyp, ref) / 100, 0.1555722182, EPSILON);
  lv_sacrebleu_opts pt1 = raw_opts(0.1);
  ASSERT_NEAR(one(&pt1, hyp, ref) / 100, 0.1555722182, EPSILON);
}
END_TEST

static lv_sacrebleu_stats stats(const int64_t *correct, const int64_t *total, int64_t sys_len, int64_t ref_len) {
  lv_sacrebleu_stats st = {.sys_len = sys_len, .ref_len = ref_len};
  for (int n = 0; n < 4; n++) st.correct[n] = correct[n], st.total[n] = total[n];
  return st;
}

/* test_bleu.py: test_case_scoring (compute_bleu's default smoothing 'none') and
 * test_case_degenerate_stats (floor with the given offsets: exactly 0). */
START_TEST(test_compute_bleu) {
  lv_sacrebleu_opts o = opts_with(LV_SACREBLEU_TOK_13A, LV_SACREBLEU_SMOOTH_NONE, NAN, 4, false);
  lv_sacrebleu_score r;
  lv_sacrebleu_stats st = stats((int64_t[]){9, 7, 5, 3}, (int64_t[]){10, 8, 6, 4}, 11, 11);
  lv_sacrebleu_compute(&o, &st, &r);
  ASSERT_NEAR(r.score / 100, 0.8375922397, EPSILON);

  struct {
    int64_t c[4], t[4], sys, ref;
    double offset;
  } cases[] = {
      {{0, 0, 0, 0}, {4, 4, 2, 1}, 0, 1, 0.0},   {{0, 0, 0, 0}, {10, 11, 12, 0}, 14, 10, 0.0},
      {{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.0},   {{6, 5, 4, 0}, {6, 5, 4, 3}, 6, 6, 0.0},
      {{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.1},   {{0, 0, 0, 0}, {0, 0, 0, 0}, 1, 5, 0.01},
  };
  for (size_t i = 0; i < LV_ARRAY_LEN(cases); i++) {
    lv_sacrebleu_opts f = opts_with(LV_SACREBLEU_TOK_13A, LV_SACREBLEU_SMOOTH_FLOOR, cases[i].offset, 4, false);
    st = stats(cases[i].c, cases[i].t, cases[i].sys, cases[i].ref);
    lv_sacrebleu_compute(&f, &st, &r);
    ck_assert_msg(r.score == 0.0, "degenerate case %zu: %.17g", i, r.score);
  }
}
END_TEST

/* test_sentence_bleu.py: sentence_score with effective_order=True (a corpus of one); its
 * tolerance is 1e-3. The hypothesis and reference spell the Romanian t with a comma and
 * with a cedilla (different code points). */
START_TEST(test_sentence_bleu) {
  const char *ref = "produc\u0163ia de zah\u0103r brut se exprim\u0103 \u00een zah\u0103r alb;";
  const char *sys =
      "Produc\u021bia de zah\u0103r prim\u0103 va fi exprimat\u0103 \u00een ceea ce prive\u0219te zah\u0103rul alb;";
  struct {
    lv_sacrebleu_smooth sm;
    double v;
    lv_sacrebleu_tokenizer tok;
    double want;
  } cases[] = {
      {LV_SACREBLEU_SMOOTH_EXP, NAN, LV_SACREBLEU_TOK_13A, 8.493},
      {LV_SACREBLEU_SMOOTH_NONE, NAN, LV_SACREBLEU_TOK_13A, 0.0},
      {LV_SACREBLEU_SMOOTH_FLOOR, NAN, LV_SACREBLEU_TOK_13A, 4.51688},
      {LV_SACREBLEU_SMOOTH_FLOOR, 0.1, LV_SACREBLEU_TOK_13A, 4.51688},
      {LV_SACREBLEU_SMOOTH_FLOOR, 0.5, LV_SACREBLEU_TOK_13A, 10.10},
      {LV_SACREBLEU_SMOOTH_ADD_K, NAN, LV_SACREBLEU_TOK_13A, 14.882},
      {LV_SACREBLEU_SMOOTH_ADD_K, 1, LV_SACREBLEU_TOK_13A, 14.882},
      {LV_SACREBLEU_SMOOTH_ADD_K, 2, LV_SACREBLEU_TOK_13A, 21.389},
      {LV_SACREBLEU_SMOOTH_EXP, NAN, LV_SACREBLEU_TOK_NONE, 7.347},
  };
  for (size_t i = 0; i < LV_ARRAY_LEN(cases); i++) {
    lv_sacrebleu_opts o = opts_with(cases[i].tok, cases[i].sm, cases[i].v, 4, true);
    double got = one(&o, sys, ref);
    ck_assert_msg(fabs(got - cases[i].want) < 1e-3, "case %zu: %.6f, want %.6f", i, got, cases[i].want);
  }
  /* #141: no match at all is 0 whatever the smoothing. */
  for (int sm = 0; sm < LV_SACREBLEU_SMOOTH_COUNT; sm++) {
    lv_sacrebleu_opts o = opts_with(LV_SACREBLEU_TOK_13A, (lv_sacrebleu_smooth)sm, NAN, 4, true);
    ck_assert(one(&o, "this is a cat", "okay thanks") == 0.0);
  }
}
END_TEST

START_TEST(test_empty) {
  lv_sacrebleu s;
  lv_sacrebleu_score r;
  char buf[256];
  /* An empty corpus (sacrebleu raises IndexError): 0, BP 1, ratio 0. */
  EXPECT_OK(lv_sacrebleu_init(&s, NULL));
  lv_sacrebleu_result(&s, &r);
  ck_assert(r.score == 0.0 && r.bp == 1.0 && r.ratio == 0.0);
  lv_sacrebleu_format(&r, buf, sizeof buf);
  ck_assert_str_eq(buf, "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
  /* Empty hypotheses are kept: hyp_len 0 gives BP 0. */
  EXPECT_OK(lv_sacrebleu_add_sentence(&s, "a b c d e", ""));
  EXPECT_OK(lv_sacrebleu_add_sentence(&s, "x", "  \t"));
  lv_sacrebleu_result(&s, &r);
  lv_sacrebleu_format(&r, buf, sizeof buf);
  ck_assert_str_eq(buf, "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 6)");
  /* Empty hypothesis and reference: nothing counted. */
  EXPECT_OK(lv_sacrebleu_init(&s, NULL));
  EXPECT_OK(lv_sacrebleu_add_sentence(&s, "", ""));
  lv_sacrebleu_result(&s, &r);
  ck_assert(r.score == 0.0 && r.bp == 1.0 && r.sys_len == 0 && r.ref_len == 0);
  /* A hypothesis shorter than the order: orders without n-grams stop the loop, and
   * without effective order their zero precision makes the score 0 (exp smoothing too). */
  EXPECT_OK(lv_sacrebleu_init(&s, NULL));
  EXPECT_OK(lv_sacrebleu_add_sentence(&s, "a b c", "a b"));
  lv_sacrebleu_result(&s, &r);
  lv_sacrebleu_format(&r, buf, sizeof buf);
  ck_assert_str_eq(buf, "BLEU = 0.00 100.0/100.0/0.0/0.0 (BP = 0.607 ratio = 0.667 hyp_len = 2 ref_len = 3)");
}
END_TEST

START_TEST(test_utf8) {
  lv_sacrebleu_opts o = lv_sacrebleu_default_opts();
  lv_sacrebleu_score r;
  char buf[256];
  /* Cedilla and comma-below t differ; 13a splits the final period off. */
  lv_sacrebleu_opts none = opts_with(LV_SACREBLEU_TOK_NONE, LV_SACREBLEU_SMOOTH_EXP, NAN, 4, false);
  const char *h = "\u0163ar\u0103 e mare .", *rf = "\u021bar\u0103 e mare .";
  corpus(&none, &h, 1, (const char *const *const[]){&rf}, 1, &r);
  lv_sacrebleu_format(&r, buf, sizeof buf);
  ck_assert_str_eq(buf, "BLEU = 59.46 75.0/66.7/50.0/50.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)");
  ASSERT_NEAR(one(&o, "\u0163ar\u0103 e mare.", "\u0163ar\u0103 e mare ."), 100.0, 1e-9);
  /* CJK, emoji and Unicode white space between tokens match a plain-space reference. */
  ASSERT_NEAR(one(&o, "\u4e2d\u6587\u00a0\U0001F600\u3000x\u2028y", "\u4e2d\u6587 \U0001F600 x y"), 100.0, 1e-9);
  /* Bytes that are not UTF-8 are opaque characters (the library does not validate). */
  ASSERT_NEAR(one(&o, "a \xff\xfe b c.", "a \xff\xfe b c."), 100.0, 1e-9);
}
END_TEST

/* Very long lines: counts checked exactly against closed forms. */
START_TEST(test_long_lines) {
  /* "a" repeated N times against M times: order n has N-n+1 hypothesis n-grams, of which
   * min(N, M)-n+1 match. */
  const int N = 100000, M = 60000;
  char *hyp = malloc(2 * (size_t)N + 1), *ref = malloc(2 * (size_t)M + 1);
  ck_assert_ptr_nonnull(hyp);
  ck_assert_ptr_nonnull(ref);
  for (int i = 0; i < N; i++) hyp[2 * i] = 'a', hyp[2 * i + 1] = ' ';
  hyp[2 * N] = '\0';
  for (int i = 0; i < M; i++) ref[2 * i] = 'a', ref[2 * i + 1] = ' ';
  ref[2 * M] = '\0';
  lv_sacrebleu s;
  EXPECT_OK(lv_sacrebleu_init(&s, NULL));
  EXPECT_OK(lv_sacrebleu_add_sentence(&s, ref, hyp));
  for (int n = 1; n <= 4; n++) {
    ck_assert_int_eq(s.stats.total[n - 1], N - n + 1);
    ck_assert_int_eq(s.stats.correct[n - 1], M - n + 1);
  }
  ck_assert_int_eq(s.stats.sys_len, N);
  ck_assert_int_eq(s.stats.ref_len, M);
  free(hyp);
  free(ref);

  /* 100,000 words with punctuation (about 0.8 MB, 214,286 tokens): identical hypothesis and
   * reference score 100; dropping the last word from the hypothesis leaves every
   * remaining n-gram matched and a brevity penalty. */
  const int W = 100000;
  size_t cap = (size_t)W * 12 + 1, len = 0;
  char *line = malloc(cap);
  ck_assert_ptr_nonnull(line);
  for (int i = 0; i < W; i++) len += (size_t)snprintf(line + len, cap - len, "w%d,%s", i, i % 7 ? " " : ". ");
  EXPECT_OK(lv_sacrebleu_init(&s, NULL));
  EXPECT_OK(lv_sacrebleu_add_sentence(&s, line, line));
  ASSERT_NEAR(lv_sacrebleu_value(&s), 100.0, 1e-9);
  int64_t ntok = s.stats.sys_len;
  ck_assert_int_eq(ntok, 2 * W + (W + 6) / 7); /* word, comma, and a period every 7th */
  char *shorter = strdup(line);
  ck_assert_ptr_nonnull(shorter);
  char *cut = strrchr(shorter, 'w');
  *cut = '\0';
  EXPECT_OK(lv_sacrebleu_init(&s, NULL));
  EXPECT_OK(lv_sacrebleu_add_sentence(&s, line, shorter));
  lv_sacrebleu_score r;
  lv_sacrebleu_result(&s, &r);
  int64_t h = s.stats.sys_len;
  for (int n = 1; n <= 4; n++) ck_assert_int_eq(s.stats.correct[n - 1], h - n + 1);
  ASSERT_NEAR(r.bp, exp(1.0 - (double)ntok / (double)h), 1e-15);
  ASSERT_NEAR(r.score, 100.0 * r.bp, 1e-9);
  free(shorter);
  free(line);
}
END_TEST

/* Several references: n-gram counts clip at the max over them; the reference length is
 * the closest one, the shorter on a tie. */
START_TEST(test_multi_refs) {
  lv_sacrebleu_opts o = opts_with(LV_SACREBLEU_TOK_NONE, LV_SACREBLEU_SMOOTH_EXP, NAN, 1, false);
  lv_sacrebleu s;
  EXPECT_OK(lv_sacrebleu_init(&s, &o));
  const char *r1[] = {"a a b", "a b b b"};
  EXPECT_OK(lv_sacrebleu_add(&s, "a a a b b b", r1, 2));
  ck_assert_int_eq(s.stats.correct[0], 5); /* a: min(3, 2), b: min(3, 3) */
  ck_assert_int_eq(s.stats.ref_len, 4);    /* |6-3| = 3 > |6-4| = 2 */
  const char *r2[] = {"x x x x", "y y"};  /* hyp 3 tokens: distances 1 and 1: the shorter */
  EXPECT_OK(lv_sacrebleu_add(&s, "x y z", r2, 2));
  ck_assert_int_eq(s.stats.ref_len, 4 + 2);
  const char *r3[] = {"q", "q q q q q", "q q q"}; /* hyp 4: distances 3, 1, 1: 3 */
  EXPECT_OK(lv_sacrebleu_add(&s, "q q q q", r3, 3));
  ck_assert_int_eq(s.stats.ref_len, 4 + 2 + 3);
  ck_assert_int_eq(s.stats.correct[0], 5 + 2 + 4);
  /* Many references (more than the small buffer). */
  const char *many[12];
  for (int i = 0; i < 12; i++) many[i] = i == 11 ? "m n o" : "z";
  EXPECT_OK(lv_sacrebleu_add(&s, "m n o", many, 12));
  ck_assert_int_eq(s.stats.ref_len, 4 + 2 + 3 + 3);
  ck_assert_int_eq(s.segments, 4);
}
END_TEST

START_TEST(test_errors) {
  lv_sacrebleu s;
  lv_sacrebleu_opts o = lv_sacrebleu_default_opts();
  o.max_ngram_order = 0;
  EXPECT_ERR(lv_sacrebleu_init(&s, &o), LV_ERR_INVALID, "max_ngram_order 0");
  o.max_ngram_order = LV_SACREBLEU_MAX_ORDER + 1;
  EXPECT_ERR(lv_sacrebleu_init(&s, &o), LV_ERR_INVALID, "max_ngram_order 17");
  o = lv_sacrebleu_default_opts();
  o.smooth_value = -1;
  EXPECT_ERR(lv_sacrebleu_init(&s, &o), LV_ERR_INVALID, "smooth_value -1");
  o.smooth_value = INFINITY;
  EXPECT_ERR(lv_sacrebleu_init(&s, &o), LV_ERR_INVALID, "smooth_value inf");
  o = lv_sacrebleu_default_opts();
  o.smooth = LV_SACREBLEU_SMOOTH_COUNT;
  EXPECT_ERR(lv_sacrebleu_init(&s, &o), LV_ERR_INVALID, "smooth method");
  EXPECT_OK(lv_sacrebleu_init(&s, NULL));
  EXPECT_ERR(lv_sacrebleu_add(&s, "a", NULL, 0), LV_ERR_INVALID, "at least one reference");
  const char *refs[] = {"a", NULL};
  EXPECT_ERR(lv_sacrebleu_add(&s, "a", refs, 2), LV_ERR_INVALID, "reference 2 of 2");
  ck_assert_int_eq(s.segments, 0);

  lv_sacrebleu_tokenizer t;
  lv_sacrebleu_smooth sm;
  EXPECT_OK(lv_sacrebleu_tokenizer_parse("none", &t));
  ck_assert_int_eq(t, LV_SACREBLEU_TOK_NONE);
  EXPECT_OK(lv_sacrebleu_smooth_parse("add-k", &sm));
  ck_assert_int_eq(sm, LV_SACREBLEU_SMOOTH_ADD_K);
  EXPECT_ERR(lv_sacrebleu_tokenizer_parse("intl", &t), LV_ERR_INVALID, "'intl'", "13a, none");
  EXPECT_ERR(lv_sacrebleu_smooth_parse("add_k", &sm), LV_ERR_INVALID, "'add_k'", "exp, floor, add-k, none");
}
END_TEST

int main(void) {
  Suite *s = suite_create("sacrebleu");
  TCase *tc = tcase_create("sacrebleu");
  tcase_add_test(tc, test_tokenizer_13a);
  tcase_add_test(tc, test_corpus_bleu_cases);
  tcase_add_test(tc, test_readme_lines);
  tcase_add_test(tc, test_raw_bleu);
  tcase_add_test(tc, test_compute_bleu);
  tcase_add_test(tc, test_sentence_bleu);
  tcase_add_test(tc, test_empty);
  tcase_add_test(tc, test_utf8);
  tcase_add_test(tc, test_long_lines);
  tcase_add_test(tc, test_multi_refs);
  tcase_add_test(tc, test_errors);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
