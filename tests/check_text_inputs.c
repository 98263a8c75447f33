/* Text inputs: PunctuatorInput and LmInput on text files and vocabularies that each
 * test writes: exact batch contents (Normalize included), bucketing and drops,
 * one eval pass with a partial last batch, sharding, resume, empty and non-ASCII lines,
 * errors naming input.<key>. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_util.h"
#include "check_util.h"
#include "input/input.h"
#include "input/tokenizer.h"

static char g_dir[256];

static void setup(void) { lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_textin"); }
static void teardown(void) { lv_test_rmtree(g_dir); }

/* g_dir/name in one of 4 rotating buffers (so that a few may be alive at once). */
static const char *path_of(const char *name) {
  static char paths[4][512];
  static int next;
  char *path = paths[next++ % 4];
  snprintf(path, 512, "%s/%s", g_dir, name);
  return path;
}

static void write_text(const char *name, const char *text) {
  FILE *f = fopen(path_of(name), "wb");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static void write_lines(const char *name, const char *const *lines, int n) {
  FILE *f = fopen(path_of(name), "wb");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < n; i++) fprintf(f, "%s\n", lines[i]);
  fclose(f);
}

/* A VocabFileTokenizer vocab (token \t id). */
static const char kVocab[] =
    "<unk>\t0\n<s>\t1\n</s>\t2\nhello\t3\nworld\t4\nits\t5\n3d\t6\nHello,\t7\nWorld!\t8\nIt's\t9\n3-D.\t10\n"
    "a\t11\nb\t12\nc\t13\n\xc3\x9c" "ber\t14\nalles\t15\n\xc3\xbc" "ber\t16\nwait\t17\nwhat\t18\n";

static lv_params *params_for(const char *cls, const char *pattern) {
  lv_input_register_all();
  lv_tokenizer_register_all();
  const lv_input_class *c = lv_input_class_find(cls);
  ck_assert_ptr_nonnull(c);
  lv_params *p = c->params();
  EXPECT_OK(lv_params_set_string(p, "file_pattern", pattern));
  return p;
}

static void set_buckets(lv_params *p, int n, const int64_t *bounds, const int64_t *limits) {
  EXPECT_OK(lv_params_set_list(p, "bucket_upper_bound", lv_pvalue_ints(n, bounds)));
  EXPECT_OK(lv_params_set_list(p, "bucket_batch_limit", lv_pvalue_ints(n, limits)));
}

/* PunctuatorInput with a VocabFileTokenizer on kVocab, dynamic padding. */
static lv_params *punct_vocab_params(const char *pattern, int64_t max_len) {
  write_text("vocab.txt", kVocab);
  lv_params *p = params_for("PunctuatorInput", pattern);
  EXPECT_OK(lv_params_set_class(p, "tokenizer", "VocabFileTokenizer"));
  EXPECT_OK(lv_params_set_string(p, "tokenizer.token_vocab_filepath", path_of("vocab.txt")));
  EXPECT_OK(lv_params_set_bool(p, "tokenizer.pad_to_max_length", false));
  EXPECT_OK(lv_params_set_int(p, "source_max_length", max_len));
  EXPECT_OK(lv_params_set_int(p, "target_max_length", max_len));
  return p;
}

static lv_input *create(lv_params *p, lv_input_shard shard) {
  if (!lv_params_is_frozen(p)) lv_params_freeze(p);
  lv_input *in = NULL;
  EXPECT_OK(lv_input_create(p, shard, &in));
  return in;
}

static void expect_i32(const lv_batch *b, const char *key, int64_t rows, int64_t cols, const int32_t *want) {
  lv_tensor *t = lv_batch_get(b, key);
  ck_assert_msg(t, "no %s", key);
  ck_assert_int_eq(t->dtype, LV_I32);
  ck_assert_int_eq(t->shape.rank, cols ? 2 : 1);
  ck_assert_int_eq(t->shape.d[0], rows);
  if (cols) ck_assert_int_eq(t->shape.d[1], cols);
  for (int64_t i = 0; i < rows * (cols ? cols : 1); i++)
    ck_assert_msg(lv_i32(t)[i] == want[i], "%s[%lld] = %d, want %d", key, (long long)i, lv_i32(t)[i], want[i]);
}

static void expect_f32(const lv_batch *b, const char *key, int64_t rows, int64_t cols, const float *want) {
  lv_tensor *t = lv_batch_get(b, key);
  ck_assert_msg(t, "no %s", key);
  ck_assert_int_eq(t->dtype, LV_F32);
  ck_assert_int_eq(t->shape.rank, 2);
  ck_assert_int_eq(t->shape.d[0], rows);
  ck_assert_int_eq(t->shape.d[1], cols);
  for (int64_t i = 0; i < rows * cols; i++)
    ck_assert_msg(lv_f32(t)[i] == want[i], "%s[%lld] = %g, want %g", key, (long long)i, lv_f32(t)[i], want[i]);
}

static void expect_strs(const lv_batch *b, const char *key, int64_t rows, const char *const *want) {
  lv_tensor *t = lv_batch_get(b, key);
  ck_assert_msg(t, "no %s", key);
  ck_assert_int_eq(t->dtype, LV_STRING);
  ck_assert_int_eq(t->shape.rank, 1);
  ck_assert_int_eq(t->shape.d[0], rows);
  for (int64_t i = 0; i < rows; i++) ck_assert_str_eq(lv_tensor_str(t, i), want[i]);
}

static void one_minus(const float *a, float *out, int n) {
  for (int i = 0; i < n; i++) out[i] = 1.0f - a[i];
}

/* ---- PunctuatorInput ---- */

START_TEST(test_punct_contents) {
  static const char *const lines[5] = {"Hello, World! It's 3-D.", "hello world", "", "\xc3\x9c" "ber, ALLES!",
                                       "  (Wait)... what?!  "};
  write_lines("punct.txt", lines, 5);
  lv_params *p = punct_vocab_params(path_of("punct.txt"), 12); /* no type prefix: read as text */
  set_buckets(p, 1, (const int64_t[]){10}, (const int64_t[]){3});
  lv_input *in = create(p, lv_input_no_shard());
  ck_assert_int_eq(lv_input_batch_size(in), 3);
  ck_assert_int_eq(lv_input_num_samples(in), -1);
  lv_batch b;
  lv_batch_init(&b);
  bool done;
  for (int pass = 0; pass < 2; pass++) { /* reset gives the same pass again */
    EXPECT_OK(lv_input_reset(in));
    EXPECT_OK(lv_input_next_eval(in, &b, &done));
    ck_assert(!done);
    ck_assert_int_eq(b.size, 3);
    ck_assert_int_eq(lv_nmap_count(&b.map), 7);
    /* Normalize("Hello, World! It's 3-D.") = "hello world its 3d" */
    expect_i32(&b, "src.ids", 3, 5, (const int32_t[]){3, 4, 5, 6, 2, 3, 4, 2, 0, 0, 2, 0, 0, 0, 0});
    static const float pad[15] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1};
    float w[15];
    one_minus(pad, w, 15);
    expect_f32(&b, "src.paddings", 3, 5, pad);
    expect_i32(&b, "tgt.ids", 3, 5, (const int32_t[]){1, 7, 8, 9, 10, 1, 3, 4, 0, 0, 1, 0, 0, 0, 0});
    expect_i32(&b, "tgt.labels", 3, 5, (const int32_t[]){7, 8, 9, 10, 2, 3, 4, 2, 0, 0, 2, 0, 0, 0, 0});
    expect_f32(&b, "tgt.paddings", 3, 5, pad);
    expect_f32(&b, "tgt.weights", 3, 5, w);
    expect_i32(&b, "bucket_keys", 3, 0, (const int32_t[]){5, 3, 1});
    /* the partial last batch: "Über alles" (bytes.lower leaves Ü), "wait what" */
    EXPECT_OK(lv_input_next_eval(in, &b, &done));
    ck_assert(!done);
    ck_assert_int_eq(b.size, 2);
    expect_i32(&b, "src.ids", 2, 3, (const int32_t[]){14, 15, 2, 17, 18, 2});
    expect_f32(&b, "src.paddings", 2, 3, (const float[]){0, 0, 0, 0, 0, 0});
    expect_i32(&b, "tgt.ids", 2, 3, (const int32_t[]){1, 0, 0, 1, 0, 0});
    expect_i32(&b, "tgt.labels", 2, 3, (const int32_t[]){0, 0, 2, 0, 0, 2});
    expect_f32(&b, "tgt.weights", 2, 3, (const float[]){1, 1, 1, 1, 1, 1});
    expect_i32(&b, "bucket_keys", 2, 0, (const int32_t[]){3, 3});
    EXPECT_OK(lv_input_next_eval(in, &b, &done));
    ck_assert(done);
    ck_assert_int_eq(b.size, 0);
  }
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);
}
END_TEST

/* Buckets [2, 4] x 2, max lengths 6 (last bound + 2, as the codelab): keys 1..4 are
 * batched by bucket, longer lines (truncated to 6 by the tokenizer) are dropped; the
 * partial buckets come out last in bucket order. pad_to_max_seq_length: width 6. */
START_TEST(test_punct_buckets_and_drops) {
  static const char *const lines[10] = {"", "a", "a b", "a b c", "a b c a", "a b c a b", "b", "b c",
                                        "a a a a a a a", "c c c c c c c c c"};
  write_lines("b.txt", lines, 10);
  char pat[600];
  snprintf(pat, sizeof pat, "text:%s", path_of("b.txt"));
  for (int padded = 0; padded < 2; padded++) {
    lv_params *p = punct_vocab_params(pat, 6);
    set_buckets(p, 2, (const int64_t[]){2, 4}, (const int64_t[]){2, 2});
    EXPECT_OK(lv_params_set_bool(p, "pad_to_max_seq_length", padded));
    lv_input *in = create(p, lv_input_no_shard());
    lv_batch b;
    lv_batch_init(&b);
    bool done;
    /* batches in order: [line0 line1] (bucket 0 full), [line2 line3] (bucket 1 full), then
     * the flush: [line6], [line7] */
    static const int want_sizes[4] = {2, 2, 1, 1};
    static const int32_t want_keys[6] = {1, 2, 3, 4, 2, 3};
    static const int32_t want_first_label[6] = {2, 11, 11, 11, 12, 12};
    int k = 0;
    for (int i = 0; i < 4; i++) {
      EXPECT_OK(lv_input_next_eval(in, &b, &done));
      ck_assert(!done);
      ck_assert_int_eq(b.size, want_sizes[i]);
      lv_tensor *keys = lv_batch_get(&b, "bucket_keys"), *lab = lv_batch_get(&b, "tgt.labels");
      lv_tensor *sid = lv_batch_get(&b, "src.ids");
      int64_t T = lab->shape.d[1];
      int64_t want_T = 0;
      for (int r = 0; r < b.size; r++, k++) {
        ck_assert_int_eq(lv_i32(keys)[r], want_keys[k]);
        ck_assert_int_eq(lv_i32(lab)[r * T], want_first_label[k]);
        if (want_keys[k] > want_T) want_T = want_keys[k];
      }
      ck_assert_int_eq(T, padded ? 6 : want_T);
      ck_assert_int_eq(sid->shape.d[1], padded ? 6 : want_T);
    }
    EXPECT_OK(lv_input_next_eval(in, &b, &done));
    ck_assert(done);
    lv_input_destroy(in);
    lv_batch_free(&b);
    lv_params_free(p);
  }
}
END_TEST

/* The row of `key` (int32) where `pad_key` is 0, as a string. */
static char *row_string(const lv_batch *b, const char *key, const char *pad_key, int64_t r) {
  lv_tensor *t = lv_batch_get(b, key), *pd = lv_batch_get(b, pad_key);
  ck_assert_ptr_nonnull(t);
  int64_t T = t->shape.d[1];
  char *s = calloc(1, (size_t)T * 12 + 1);
  size_t n = 0;
  for (int64_t j = 0; j < T; j++)
    if (lv_f32(pd)[r * T + j] == 0.f) n += (size_t)sprintf(s + n, "%d,", lv_i32(t)[r * T + j]);
  return s;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every row of one eval pass of p for this shard, appended to rows[*n]. */
static void eval_rows(const lv_params *p, lv_input_shard shard, const char *key, const char *pad_key, char **rows,
                      int *n, int max) {
  lv_input *in = NULL;
  EXPECT_OK(lv_input_create(p, shard, &in));
  lv_batch b;
  lv_batch_init(&b);
  bool done;
  for (;;) {
    EXPECT_OK(lv_input_next_eval(in, &b, &done));
    if (done) break;
    for (int64_t r = 0; r < b.size; r++) {
      ck_assert_int_lt(*n, max);
      rows[(*n)++] = row_string(&b, key, pad_key, r);
    }
  }
  lv_input_destroy(in);
  lv_batch_free(&b);
}

static void train_fingerprint(lv_input *in, int64_t step, const char *key, const char *pad_key, char *out, size_t n) {
  lv_batch b;
  lv_batch_init(&b);
  EXPECT_OK(lv_input_train_batch(in, step, &b));
  ck_assert_int_gt(b.size, 0);
  out[0] = 0;
  for (int64_t r = 0; r < b.size; r++) {
    char *s = row_string(&b, key, pad_key, r);
    strncat(out, s, n - strlen(out) - 2);
    strcat(out, "|");
    free(s);
  }
  lv_batch_free(&b);
}

/* p: two files of `lines` distinct lines in all. Two shards of an eval pass together give every row of the unsharded pass exactly once;
 * training: a run resumed at step 5 reads what a fresh run resumed at 5 reads; two runs
 * from 0 agree. */
static void check_shards_and_resume(lv_params *p, const char *key, const char *pad_key, int lines) {
  EXPECT_OK(lv_params_set_int(p, "file_buffer_size", 8)); /* shuffled, over both files at once */
  EXPECT_OK(lv_params_set_int(p, "file_parallelism", 2));
  lv_params_freeze(p);
  enum { MAX = 512 };
  char *whole[MAX], *parts[MAX];
  int nw = 0, np = 0;
  eval_rows(p, lv_input_no_shard(), key, pad_key, whole, &nw, MAX);
  ck_assert_int_eq(nw, lines);
  eval_rows(p, (lv_input_shard){0, 2}, key, pad_key, parts, &np, MAX);
  int n0 = np;
  eval_rows(p, (lv_input_shard){1, 2}, key, pad_key, parts, &np, MAX);
  ck_assert_int_eq(n0, lines / 2);
  qsort(whole, (size_t)nw, sizeof(char *), cmp_str);
  qsort(parts, (size_t)np, sizeof(char *), cmp_str);
  ck_assert_int_eq(np, nw);
  for (int i = 0; i < nw; i++) {
    ck_assert_str_eq(whole[i], parts[i]);
    if (i) ck_assert_str_ne(whole[i], whole[i - 1]); /* the lines are distinct */
  }
  for (int i = 0; i < nw; i++) {
    free(whole[i]);
    free(parts[i]);
  }
  lv_input *a = create(p, lv_input_no_shard()), *b = create(p, lv_input_no_shard());
  static char fa[8192], fb[8192];
  for (int s = 0; s < 3; s++) train_fingerprint(a, s, key, pad_key, fa, sizeof fa);
  for (int s = 5; s < 12; s++) {
    train_fingerprint(a, s, key, pad_key, fa, sizeof fa);
    train_fingerprint(b, s, key, pad_key, fb, sizeof fb);
    ck_assert_str_eq(fa, fb);
  }
  lv_input_destroy(a);
  lv_input_destroy(b);
  a = create(p, lv_input_no_shard());
  b = create(p, lv_input_no_shard());
  for (int s = 0; s < 30; s++) { /* more batches than one pass: the stream repeats */
    train_fingerprint(a, s, key, pad_key, fa, sizeof fa);
    train_fingerprint(b, s, key, pad_key, fb, sizeof fb);
    ck_assert_str_eq(fa, fb);
  }
  lv_input_destroy(a);
  lv_input_destroy(b);
}

static void write_numbered(const char *name, int from, int n) {
  FILE *f = fopen(path_of(name), "wb");
  ck_assert_ptr_nonnull(f);
  for (int i = from; i < from + n; i++) fprintf(f, "Line number %d, of %s!\n", i, i % 3 ? "many" : "a few");
  fclose(f);
}

START_TEST(test_punct_shards_and_resume) {
  write_numbered("p-00000-of-00002", 0, 30);
  write_numbered("p-00001-of-00002", 30, 30);
  char pat[600];
  snprintf(pat, sizeof pat, "text:%s/p@2", g_dir);
  lv_params *p = params_for("PunctuatorInput", pat);
  EXPECT_OK(lv_params_set_class(p, "tokenizer", "AsciiTokenizer"));
  EXPECT_OK(lv_params_set_bool(p, "tokenizer.pad_to_max_length", false));
  EXPECT_OK(lv_params_set_int(p, "source_max_length", 40));
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 40));
  set_buckets(p, 2, (const int64_t[]){26, 38}, (const int64_t[]){4, 3});
  check_shards_and_resume(p, "tgt.labels", "tgt.paddings", 60);
  lv_params_free(p);
}
END_TEST

/* A tiny WPM vocab (the default tokenizer class), empty, punctuation-only and non-ASCII
 * lines: no failure, the documented layout. */
START_TEST(test_punct_wpm_and_odd_lines) {
  write_text("wpm.voc", "<unk>\n<s>\n</s>\n\xe2\x96\x81\na\nb\n\xe2\x96\x81" "a\n\xe2\x96\x81" "b\n\xe2\x96\x81" "ab\n");
  static const char *const lines[4] = {"ab, B", "", "?!...", "\xc3\xa9\xff ab"};
  write_lines("odd.txt", lines, 4);
  lv_params *p = params_for("PunctuatorInput", path_of("odd.txt"));
  EXPECT_OK(lv_params_set_string(p, "tokenizer.vocab_filepath", path_of("wpm.voc")));
  EXPECT_OK(lv_params_set_bool(p, "tokenizer.pad_to_max_length", false));
  EXPECT_OK(lv_params_set_int(p, "source_max_length", 10));
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 10));
  set_buckets(p, 1, (const int64_t[]){8}, (const int64_t[]){4});
  lv_input *in = create(p, lv_input_no_shard());
  lv_batch b;
  lv_batch_init(&b);
  bool done;
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert(!done);
  ck_assert_int_eq(b.size, 4);
  /* "ab, B": tgt ▁ab , ▁ B -> 8 0 3 0; src "ab b" -> ▁ab ▁b. "": src [</s>], tgt [<s>] / [</s>].
   * "?!...": src [</s>]; tgt ▁ ? ! . . . (unknown pieces). "é\xff ab": ▁ é \xff ▁ab -> 3 0 0 8
   * on both sides (Normalize keeps non-ASCII bytes). */
  expect_i32(&b, "src.ids", 4, 5,
             (const int32_t[]){8, 7, 2, 0, 0, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 8, 2});
  expect_f32(&b, "src.paddings", 4, 5,
             (const float[]){0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0});
  expect_i32(&b, "tgt.ids", 4, 7,
             (const int32_t[]){1, 8, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 3, 0, 0, 0, 0, 0, 1, 3, 0, 0, 8, 0, 0});
  expect_i32(&b, "tgt.labels", 4, 7,
             (const int32_t[]){8, 0, 3, 0, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 2, 3, 0, 0, 8, 2, 0, 0});
  expect_f32(&b, "tgt.weights", 4, 7,
             (const float[]){1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
  expect_i32(&b, "bucket_keys", 4, 0, (const int32_t[]){5, 1, 7, 5});
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert(done);
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);
}
END_TEST

START_TEST(test_punct_errors) {
  write_lines("e.txt", (const char *const[]){"x"}, 1);
  lv_input *in = NULL;
  /* missing file pattern */
  lv_params *p = params_for("PunctuatorInput", "");
  EXPECT_OK(lv_params_set_string(p, "tokenizer.vocab_filepath", path_of("none.voc")));
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.file_pattern", "empty");
  ck_assert_ptr_null(in);
  lv_params_free(p);
  /* a glob that matches nothing, a non-text type */
  char pat[600];
  snprintf(pat, sizeof pat, "%s/nothing*.txt", g_dir);
  p = punct_vocab_params(pat, 6);
  set_buckets(p, 1, (const int64_t[]){4}, (const int64_t[]){2});
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_NOT_FOUND, "input.file_pattern", "nothing*.txt");
  lv_params_free(p);
  snprintf(pat, sizeof pat, "tfrecord:%s", path_of("e.txt"));
  p = punct_vocab_params(pat, 6);
  set_buckets(p, 1, (const int64_t[]){4}, (const int64_t[]){2});
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.file_pattern", "tfrecord");
  lv_params_free(p);
  /* bad tokenizer params: no vocab (WpmTokenizer's default None), a missing vocab file,
   * an unknown class */
  p = params_for("PunctuatorInput", path_of("e.txt"));
  set_buckets(p, 1, (const int64_t[]){4}, (const int64_t[]){2});
  EXPECT_OK(lv_params_set_int(p, "source_max_length", 6));
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 6));
  lv_params *q = lv_params_copy(p);
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.tokenizer.vocab_filepath", "None");
  EXPECT_OK(lv_params_set_string(q, "tokenizer.vocab_filepath", path_of("none.voc")));
  EXPECT_ERR(lv_input_create(q, lv_input_no_shard(), &in), LV_ERR_NOT_FOUND, "input.tokenizer.vocab_filepath",
             "none.voc");
  EXPECT_OK(lv_params_set_string(q, "tokenizer.cls", "NoSuchTokenizer"));
  EXPECT_ERR(lv_input_create(q, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.tokenizer.cls", "NoSuchTokenizer");
  lv_params_free(q);
  lv_params_free(p);
  /* max lengths: Lingvo's default None, and mismatched bucket lists */
  p = punct_vocab_params(path_of("e.txt"), 6);
  set_buckets(p, 1, (const int64_t[]){4}, (const int64_t[]){2});
  EXPECT_OK(lv_params_set_none(p, "source_max_length"));
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.source_max_length", "None");
  EXPECT_OK(lv_params_set_int(p, "source_max_length", 6));
  EXPECT_OK(lv_params_set_list(p, "bucket_upper_bound", lv_pvalue_list()));
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.bucket_upper_bound");
  EXPECT_OK(lv_params_set_list(p, "bucket_upper_bound", lv_pvalue_ints(2, (const int64_t[]){4, 8})));
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.bucket_batch_limit");
  lv_params_free(p);
  /* training data that runs out (repeat_count 1) */
  p = punct_vocab_params(path_of("e.txt"), 6);
  set_buckets(p, 1, (const int64_t[]){4}, (const int64_t[]){1});
  EXPECT_OK(lv_params_set_int(p, "repeat_count", 1));
  in = create(p, lv_input_no_shard());
  lv_batch b;
  lv_batch_init(&b);
  EXPECT_OK(lv_input_train_batch(in, 0, &b));
  EXPECT_ERR(lv_input_train_batch(in, 1, &b), LV_ERR_INVALID, "input.repeat_count", "ran out");
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);
}
END_TEST

/* ---- LmInput ---- */

/* AsciiTokenizer (the default), target_max_length 8, buckets [2, 4] x 2. Keys are word
 * counts; the 5-word line is dropped; the lines of a batch are tokenized together. */
START_TEST(test_lm_contents) {
  static const char *const lines[5] = {"Hi there", "", "  a  b c ", "\xc3\xa9t\xc3\xa9 x", "one two three four five"};
  write_lines("lm.txt", lines, 5);
  char pat[600];
  snprintf(pat, sizeof pat, "text:%s", path_of("lm.txt"));
  lv_params *p = params_for("LmInput", pat);
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 8));
  set_buckets(p, 2, (const int64_t[]){2, 4}, (const int64_t[]){2, 2});
  lv_input *in = create(p, lv_input_no_shard());
  lv_batch b;
  lv_batch_init(&b);
  bool done;
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert(!done);
  ck_assert_int_eq(b.size, 2);
  ck_assert_int_eq(lv_nmap_count(&b.map), 7);
  expect_strs(&b, "text", 2, (const char *const[]){"Hi there", ""});
  /* "Hi there" (8 chars, cut to 7 by the tokenizer) and "" */
  expect_i32(&b, "ids", 2, 8, (const int32_t[]){1, 12, 13, 3, 24, 12, 9, 22, 1, 2, 2, 2, 2, 2, 2, 2});
  expect_i32(&b, "labels", 2, 8, (const int32_t[]){12, 13, 3, 24, 12, 9, 22, 2, 2, 2, 2, 2, 2, 2, 2, 2});
  static const float pad[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1};
  float w[16];
  one_minus(pad, w, 16);
  expect_f32(&b, "paddings", 2, 8, pad);
  expect_f32(&b, "weights", 2, 8, w);
  expect_i32(&b, "word_count", 2, 0, (const int32_t[]){2, 0});
  expect_i32(&b, "bucket_keys", 2, 0, (const int32_t[]){2, 0});
  /* flush: bucket 0 ["été x": each non-ASCII byte is <unk>], then bucket 1 */
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert_int_eq(b.size, 1);
  expect_i32(&b, "ids", 1, 8, (const int32_t[]){1, 0, 0, 24, 0, 0, 3, 28});
  expect_i32(&b, "labels", 1, 8, (const int32_t[]){0, 0, 24, 0, 0, 3, 28, 2});
  expect_f32(&b, "paddings", 1, 8, (const float[]){0, 0, 0, 0, 0, 0, 0, 0});
  expect_i32(&b, "word_count", 1, 0, (const int32_t[]){2});
  expect_strs(&b, "text", 1, (const char *const[]){"\xc3\xa9t\xc3\xa9 x"});
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert_int_eq(b.size, 1);
  expect_i32(&b, "ids", 1, 8, (const int32_t[]){1, 3, 3, 5, 3, 3, 6, 3});
  expect_i32(&b, "labels", 1, 8, (const int32_t[]){3, 3, 5, 3, 3, 6, 3, 2});
  expect_i32(&b, "word_count", 1, 0, (const int32_t[]){3});
  expect_i32(&b, "bucket_keys", 1, 0, (const int32_t[]){3});
  expect_strs(&b, "text", 1, (const char *const[]){"  a  b c "});
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert(done);
  lv_input_destroy(in);
  lv_params_free(p);

  /* tokenizer.pad_to_max_length false: the width is the longest row of the batch */
  p = params_for("LmInput", pat);
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 8));
  EXPECT_OK(lv_params_set_bool(p, "tokenizer.pad_to_max_length", false));
  set_buckets(p, 2, (const int64_t[]){2, 4}, (const int64_t[]){2, 2});
  in = create(p, lv_input_no_shard());
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert_int_eq(lv_batch_get(&b, "ids")->shape.d[1], 8);
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert(done);
  lv_input_destroy(in);
  lv_params_free(p);
  write_lines("short.txt", (const char *const[]){"ab", "a b c"}, 2);
  snprintf(pat, sizeof pat, "text:%s", path_of("short.txt"));
  p = params_for("LmInput", pat);
  EXPECT_OK(lv_params_set_bool(p, "tokenizer.pad_to_max_length", false));
  in = create(p, lv_input_no_shard());
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert_int_eq(b.size, 2);
  expect_i32(&b, "labels", 2, 6, (const int32_t[]){5, 6, 2, 2, 2, 2, 5, 3, 6, 3, 7, 2});
  expect_f32(&b, "paddings", 2, 6, (const float[]){0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0});
  expect_strs(&b, "text", 2, (const char *const[]){"ab", "a b c"});
  lv_input_destroy(in);
  lv_params_free(p);

  /* a NUL byte (a UTF-16 file: "a" is 61 00) is an error naming the file, line and
   * column, not a line cut short; skip_corrupt_records skips that line */
  FILE *f = fopen(path_of("nul.txt"), "wb");
  ck_assert_ptr_nonnull(f);
  fwrite("x y\na\0 \0b\0\nc d\n", 1, 16, f);
  fclose(f);
  snprintf(pat, sizeof pat, "text:%s", path_of("nul.txt"));
  p = params_for("LmInput", pat);
  EXPECT_OK(lv_params_set_bool(p, "tokenizer.pad_to_max_length", false));
  in = create(p, lv_input_no_shard());
  char where[700];
  snprintf(where, sizeof where, "%s:2: a NUL byte at column 2", path_of("nul.txt"));
  EXPECT_ERR(lv_input_next_eval(in, &b, &done), LV_ERR_CORRUPT, where);
  lv_input_destroy(in);
  lv_params *skip = lv_params_copy(p);
  lv_params_free(p);
  p = skip;
  EXPECT_OK(lv_params_set_bool(p, "skip_corrupt_records", true));
  in = create(p, lv_input_no_shard());
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert_int_eq(b.size, 2);
  expect_strs(&b, "text", 2, (const char *const[]){"x y", "c d"});
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);

  /* a line longer than 64 x target_max_length bytes is kept to that as it is read: the
   * ids are the same, the word count (the bucket key) is the whole line's */
  static char longline[1000];
  memset(longline, 'a', 600);
  memcpy(longline + 600, " b c", 5);
  write_lines("long.txt", (const char *const[]){longline}, 1);
  snprintf(pat, sizeof pat, "text:%s", path_of("long.txt"));
  p = params_for("LmInput", pat);
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 4));
  in = create(p, lv_input_no_shard());
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert_int_eq(b.size, 1);
  expect_i32(&b, "word_count", 1, 0, (const int32_t[]){3});
  expect_i32(&b, "labels", 1, 4, (const int32_t[]){5, 5, 5, 2});
  ck_assert_uint_eq(strlen(lv_tensor_str(lv_batch_get(&b, "text"), 0)), 256);
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);
}
END_TEST

START_TEST(test_lm_shards_and_resume) {
  write_numbered("lm-00000-of-00002", 0, 25);
  write_numbered("lm-00001-of-00002", 25, 25);
  char pat[600];
  snprintf(pat, sizeof pat, "text:%s/lm@*", g_dir);
  lv_params *p = params_for("LmInput", pat);
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 40));
  set_buckets(p, 2, (const int64_t[]){4, 10}, (const int64_t[]){3, 4});
  check_shards_and_resume(p, "labels", "paddings", 50);
  lv_params_free(p);
}
END_TEST

START_TEST(test_lm_errors) {
  lv_input *in = NULL;
  lv_params *p = params_for("LmInput", "");
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.file_pattern", "LmInput");
  lv_params_free(p);
  write_lines("x.txt", (const char *const[]){"x"}, 1);
  char pat[600];
  snprintf(pat, sizeof pat, "text:%s", path_of("x.txt"));
  p = params_for("LmInput", pat);
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 0));
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.target_max_length");
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 10));
  EXPECT_OK(lv_params_set_class(p, "tokenizer", "VocabFileTokenizer"));
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.tokenizer");
  ck_assert_ptr_null(in);
  lv_params_free(p);
  /* without a type prefix LmInput reads TFRecords, as Lingvo's GenericInput: a text file
   * is then a corrupt record naming the file */
  p = params_for("LmInput", path_of("x.txt"));
  in = create(p, lv_input_no_shard());
  lv_batch b;
  lv_batch_init(&b);
  bool done = false;
  lv_status s = NULL;
  while (!s && !done) s = lv_input_next_eval(in, &b, &done);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "x.txt"), "%s", lv_status_msg(s));
  lv_status_free(s);
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);
}
END_TEST

/* ---- the batcher thread (prefetch_batches) ---- */

enum { PF_MAX = 128 };

/* Digests of steps[0..split) (training), one eval pass, steps[split..n) of a fresh input
 * of class cls on pattern with the given prefetch_batches (the tokenizer and its
 * batching run on the batcher thread when prefetch > 0). */
static int pf_digests(const char *cls, const char *pattern, int prefetch, const int64_t *steps, int n, int split,
                      uint64_t *out) {
  lv_params *p = params_for(cls, pattern);
  if (!strcmp(cls, "PunctuatorInput")) {
    EXPECT_OK(lv_params_set_class(p, "tokenizer", "AsciiTokenizer"));
    EXPECT_OK(lv_params_set_bool(p, "tokenizer.pad_to_max_length", false));
    EXPECT_OK(lv_params_set_int(p, "source_max_length", 40));
    set_buckets(p, 2, (const int64_t[]){26, 38}, (const int64_t[]){4, 3});
  } else {
    set_buckets(p, 2, (const int64_t[]){4, 10}, (const int64_t[]){3, 4});
  }
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 40));
  EXPECT_OK(lv_params_set_int(p, "file_buffer_size", 8));
  EXPECT_OK(lv_params_set_int(p, "file_parallelism", 2));
  EXPECT_OK(lv_params_set_int(p, "prefetch_batches", prefetch));
  lv_input *in = create(p, lv_input_no_shard());
  lv_batch b;
  lv_batch_init(&b);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (i == split) {
      EXPECT_OK(lv_input_reset(in));
      bool done = false;
      while (!done) {
        EXPECT_OK(lv_input_next_eval(in, &b, &done));
        ck_assert_int_lt(k, PF_MAX);
        out[k++] = done ? 0 : lv_test_batch_digest(&b);
      }
    }
    EXPECT_OK(lv_input_train_batch(in, steps[i], &b));
    ck_assert_int_lt(k, PF_MAX);
    out[k++] = lv_test_batch_digest(&b);
  }
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);
  return k;
}

/* PunctuatorInput and LmInput give the same batches for every prefetch_batches, over a
 * step sequence with jumps (each re-seeds) and an eval pass in between. */
START_TEST(test_text_prefetch_same_batches) {
  write_numbered("t-00000-of-00002", 0, 40);
  write_numbered("t-00001-of-00002", 40, 40);
  char pat[600];
  snprintf(pat, sizeof pat, "text:%s/t@2", g_dir);
  static const int64_t steps[] = {0, 1, 2, 3, 4, 9, 10, 11, 2, 3, 3, 4, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49};
  const int n = (int)(sizeof steps / sizeof steps[0]);
  static const char *const classes[2] = {"PunctuatorInput", "LmInput"};
  for (int c = 0; c < 2; c++) {
    uint64_t want[PF_MAX], got[PF_MAX];
    int nw = pf_digests(classes[c], pat, 0, steps, n, 9, want);
    ck_assert_int_gt(nw, n + 10);
    for (int k = 1; k <= 4; k += 3) {
      int ng = pf_digests(classes[c], pat, k, steps, n, 9, got);
      ck_assert_int_eq(ng, nw);
      for (int i = 0; i < nw; i++) ck_assert_msg(got[i] == want[i], "%s prefetch %d: batch %d differs", classes[c], k, i);
    }
  }
}
END_TEST

int main(void) {
  Suite *su = suite_create("text_inputs");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_punct_contents);
  tcase_add_test(tc, test_punct_buckets_and_drops);
  tcase_add_test(tc, test_punct_shards_and_resume);
  tcase_add_test(tc, test_punct_wpm_and_odd_lines);
  tcase_add_test(tc, test_punct_errors);
  tcase_add_test(tc, test_lm_contents);
  tcase_add_test(tc, test_lm_shards_and_resume);
  tcase_add_test(tc, test_lm_errors);
  tcase_add_test(tc, test_text_prefetch_same_batches);
  suite_add_tcase(su, tc);
  return lv_test_run(su);
}
