/* Tokenizers against Lingvo's test vectors (reference/lingvo.md §8.3: tokenizer_ops_test,
 * wpm_encoder_test, wpm_tokenizer_test layouts), round trips through IdsToStrings,
 * invalid UTF-8 and empty strings, and file validation errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "input/tokenizer.h"

static char g_dir[256];

static lv_tokenizer *make(const char *cls, const char *const *kv) {
  lv_tokenizer_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  for (int i = 0; kv && kv[i]; i += 2) {
    lv_pv_kind k = lv_params_kind(p, kv[i]);
    if (k == LV_PV_BOOL) EXPECT_OK(lv_params_set_bool(p, kv[i], !strcmp(kv[i + 1], "True")));
    else if (k == LV_PV_INT) EXPECT_OK(lv_params_set_int(p, kv[i], atoll(kv[i + 1])));
    else if (k == LV_PV_FLOAT) EXPECT_OK(lv_params_set_float(p, kv[i], atof(kv[i + 1])));
    else EXPECT_OK(lv_params_set_string(p, kv[i], kv[i + 1]));
  }
  lv_params_freeze(p);
  lv_tokenizer *t = NULL;
  EXPECT_OK(lv_tokenizer_create(p, &t));
  return t;
}

static lv_status make_err(const char *cls, const char *const *kv) {
  lv_tokenizer_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  for (int i = 0; kv && kv[i]; i += 2) {
    lv_pv_kind k = lv_params_kind(p, kv[i]);
    if (k == LV_PV_INT) EXPECT_OK(lv_params_set_int(p, kv[i], atoll(kv[i + 1])));
    else EXPECT_OK(lv_params_set_string(p, kv[i], kv[i + 1]));
  }
  lv_params_freeze(p);
  lv_tokenizer *t = NULL;
  lv_status s = lv_tokenizer_create(p, &t);
  ck_assert_ptr_null(t);
  lv_params_free(p);
  return s;
}

static void destroy(lv_tokenizer *t) {
  lv_params *p = (lv_params *)t->p;
  lv_tokenizer_destroy(t);
  lv_params_free(p);
}

static void expect_rows(const lv_tok_batch *b, int batch, int len, const int32_t *ids, const int32_t *labels,
                        const float *pad) {
  ck_assert_int_eq(b->batch, batch);
  ck_assert_int_eq(b->len, len);
  for (int i = 0; i < batch * len; i++) {
    ck_assert_msg(b->ids[i] == ids[i], "ids[%d][%d] = %d, want %d", i / len, i % len, b->ids[i], ids[i]);
    ck_assert_msg(b->labels[i] == labels[i], "labels[%d][%d] = %d, want %d", i / len, i % len, b->labels[i],
                  labels[i]);
    ck_assert_msg(b->paddings[i] == pad[i], "paddings[%d][%d] = %g, want %g", i / len, i % len, b->paddings[i],
                  pad[i]);
  }
}

static const char *const kAsciiStrs[7] = {"hElLo", "sIr<epsilon>", "What a <unk> day", "america's",
                                          "<noise> early", "1:00 AM", "<text_only>morning"};

START_TEST(ascii_vectors) {
  lv_tokenizer *t = make("AsciiTokenizer", NULL);
  static const int32_t ids[70] = {
      1, 12, 9, 16, 16, 19, 2, 2, 2, 2, 1, 23, 13, 22, 73, 2, 2, 2, 2, 2, 1, 27, 12, 5, 24, 3, 5, 3, 0, 3,
      1, 5, 17, 9, 22, 13, 7, 5, 32, 23, 1, 4, 3, 9, 5, 22, 16, 29, 2, 2, 1, 40, 34, 39, 39, 3, 5, 17, 2, 2,
      1, 74, 17, 19, 22, 18, 13, 18, 11, 2};
  static const int32_t labels[70] = {
      12, 9, 16, 16, 19, 2, 2, 2, 2, 2, 23, 13, 22, 73, 2, 2, 2, 2, 2, 2, 27, 12, 5, 24, 3, 5, 3, 0, 3, 2,
      5, 17, 9, 22, 13, 7, 5, 32, 23, 2, 4, 3, 9, 5, 22, 16, 29, 2, 2, 2, 40, 34, 39, 39, 3, 5, 17, 2, 2, 2,
      74, 17, 19, 22, 18, 13, 18, 11, 2, 2};
  static const float pad[70] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1,
                                0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  lv_tok_batch b;
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, kAsciiStrs, NULL, 7, 10, 1, &b));
  expect_rows(&b, 7, 10, ids, labels, pad);
  lv_tok_batch_free(&b);

  /* append_eos=False, last string '100%'. */
  const char *strs2[7];
  memcpy(strs2, kAsciiStrs, sizeof strs2);
  strs2[6] = "100%";
  int32_t ids2[70], labels2[70];
  memcpy(ids2, ids, sizeof ids2);
  memcpy(labels2, labels, sizeof labels2);
  static const int32_t r7i[10] = {1, 40, 39, 39, 52, 2, 2, 2, 2, 2}, r7l[10] = {40, 39, 39, 52, 2, 2, 2, 2, 2, 2};
  memcpy(ids2 + 60, r7i, sizeof r7i);
  memcpy(labels2 + 60, r7l, sizeof r7l);
  static const float pad2[70] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
                                 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                                 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, strs2, NULL, 7, 10, 0, &b));
  expect_rows(&b, 7, 10, ids2, labels2, pad2);
  lv_tok_batch_free(&b);

  /* IdsToStrings on the labels of the append_eos=False run. */
  static const int32_t lens[7] = {5, 4, 9, 9, 7, 7, 1};
  int32_t lab7[70];
  memcpy(lab7, labels2, sizeof lab7);
  lab7[60] = 52;
  char *out[7];
  EXPECT_OK(lv_tokenizer_ids_to_strings(t, lab7, 7, 10, lens, out));
  static const char *const want[7] = {"hello", "sir<epsilon>", "what a <unk> ", "america's", "<noise> early",
                                      "1:00 am", "%"};
  for (int i = 0; i < 7; i++) {
    ck_assert_str_eq(out[i], want[i]);
    free(out[i]);
  }
  destroy(t);

  /* maxlen=20, pad_to_maxlen=False: width 13. */
  t = make("AsciiTokenizer", (const char *const[]){"pad_to_max_length", "False", NULL});
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, kAsciiStrs, NULL, 7, 20, -1, &b));
  ck_assert_int_eq(b.len, 13);
  static const int32_t r3i[13] = {1, 27, 12, 5, 24, 3, 5, 3, 0, 3, 8, 5, 29},
                       r3l[13] = {27, 12, 5, 24, 3, 5, 3, 0, 3, 8, 5, 29, 2};
  for (int j = 0; j < 13; j++) {
    ck_assert_int_eq(b.ids[2 * 13 + j], r3i[j]);
    ck_assert_int_eq(b.labels[2 * 13 + j], r3l[j]);
    ck_assert(b.paddings[2 * 13 + j] == 0.f);
  }
  lv_tok_batch_free(&b);
  destroy(t);
}
END_TEST

START_TEST(ascii_bytes_and_empty) {
  lv_tokenizer *t = make("AsciiTokenizer", NULL);
  const char *strs[3] = {"", "\xff\xc3", "\xc3\xa9!"};
  lv_tok_batch b;
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, strs, NULL, 3, 4, 1, &b));
  static const int32_t ids[12] = {1, 2, 2, 2, 1, 0, 0, 2, 1, 0, 0, 35},
                       labels[12] = {2, 2, 2, 2, 0, 0, 2, 2, 0, 0, 35, 2};
  static const float pad[12] = {0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0};
  expect_rows(&b, 3, 4, ids, labels, pad);
  lv_tok_batch_free(&b);
  EXPECT_ERR(lv_tokenizer_strings_to_ids(t, strs, NULL, 3, 0, 1, &b), LV_ERR_INVALID, "max_length");
  destroy(t);
}
END_TEST

static char *write_file(const char *name, const char *text) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static const char kTestVocab[] =
    "<epsilon>\t0\n<S>\t1\n</S>\t2\n<UNK>\t3\nthe\t4\na\t5\nb\t6\nc\t7\nd\t8\ne\t9\n\xc3\xb8ut\t10\n"
    "\xc3\xbc" "ber\t11\n\xe2\x99\xa3\t12\n\xe6\x84\xa4\xe9\x9d\x92\t13\n";

START_TEST(vocab_vectors) {
  char path[512];
  snprintf(path, sizeof path, "%s", write_file("test_vocab.txt", kTestVocab));
  lv_tokenizer *t = make("VocabFileTokenizer", (const char *const[]){"token_vocab_filepath", path, NULL});
  const char *strs[3] = {"a b c d e", "<epsilon> <S> </S> <UNK>",
                         "\xc3\xb8ut \xc3\xbc" "ber \xe2\x99\xa3 \xe6\x84\xa4\xe9\x9d\x92 \xe2\x86\x90"};
  static const int32_t ids[30] = {1, 5, 6, 7, 8, 9, 2, 2, 2, 2, 1, 0, 1, 2, 3, 2, 2, 2, 2, 2, 1, 10, 11, 12, 13, 3, 2, 2, 2, 2};
  static const int32_t labels[30] = {5, 6, 7, 8, 9, 2, 2, 2, 2, 2, 0, 1, 2, 3, 2, 2, 2, 2, 2, 2,
                                     10, 11, 12, 13, 3, 2, 2, 2, 2, 2};
  float pad[30] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
  lv_tok_batch b;
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, strs, NULL, 3, 10, 1, &b));
  expect_rows(&b, 3, 10, ids, labels, pad);
  lv_tok_batch_free(&b);
  pad[5] = pad[14] = pad[25] = 1;
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, strs, NULL, 3, 10, 0, &b));
  expect_rows(&b, 3, 10, ids, labels, pad);
  lv_tok_batch_free(&b);

  /* Truncation: 'a b c d e ' * 1000, maxlen 5. */
  char *longs = malloc(10 * 1000 + 1);
  for (int i = 0; i < 1000; i++) memcpy(longs + 10 * i, "a b c d e ", 10);
  longs[10000] = 0;
  const char *one[1] = {longs};
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, one, NULL, 1, 5, 1, &b));
  expect_rows(&b, 1, 5, (const int32_t[]){1, 5, 6, 7, 8}, (const int32_t[]){5, 6, 7, 8, 9},
              (const float[]){0, 0, 0, 0, 0});
  lv_tok_batch_free(&b);

  /* IdsToStrings joins with the delimiter. */
  char *out[1];
  EXPECT_OK(lv_tokenizer_ids_to_strings(t, labels + 20, 1, 10, (const int32_t[]){5}, out));
  ck_assert_str_eq(out[0], "\xc3\xb8ut \xc3\xbc" "ber \xe2\x99\xa3 \xe6\x84\xa4\xe9\x9d\x92 <UNK>");
  free(out[0]);
  destroy(t);

  t = make("VocabFileTokenizer",
           (const char *const[]){"token_vocab_filepath", path, "pad_to_max_length", "False", NULL});
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, one, NULL, 1, 20, 1, &b));
  ck_assert_int_eq(b.len, 20);
  lv_tok_batch_free(&b);
  const char *shortstr[2] = {"a b", ""};
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, shortstr, NULL, 2, 20, 1, &b));
  expect_rows(&b, 2, 3, (const int32_t[]){1, 5, 6, 1, 2, 2}, (const int32_t[]){5, 6, 2, 2, 2, 2},
              (const float[]){0, 0, 0, 0, 1, 1});
  lv_tok_batch_free(&b);
  free(longs);
  destroy(t);
}
END_TEST

START_TEST(vocab_errors) {
  char *p = write_file("nos.txt", "a\t0\n</s>\t1\n<unk>\t2\n");
  EXPECT_ERR(make_err("VocabFileTokenizer", (const char *const[]){"token_vocab_filepath", p, NULL}), LV_ERR_CORRUPT,
             "nos.txt", "<S> is not found");
  p = write_file("badid.txt", "<s>\t0\n</s>\t1\n<unk>\tx\n");
  EXPECT_ERR(make_err("VocabFileTokenizer", (const char *const[]){"token_vocab_filepath", p, NULL}), LV_ERR_CORRUPT,
             "badid.txt:3", "token<TAB>id");
  p = write_file("mixed.txt", "<s>\t0\n</s>\t1\n<unk>\t2\n<UNK>\t3\n");
  EXPECT_ERR(make_err("VocabFileTokenizer", (const char *const[]){"token_vocab_filepath", p, NULL}), LV_ERR_CORRUPT,
             "invalid token <UNK>");
  EXPECT_ERR(make_err("VocabFileTokenizer", NULL), LV_ERR_INVALID, "Exactly one vocab file should be specified!");
  EXPECT_ERR(make_err("VocabFileTokenizer", (const char *const[]){"token_vocab_filepath", "/nonexistent/v.txt", NULL}),
             LV_ERR_NOT_FOUND, "tokenizer.token_vocab_filepath", "/nonexistent/v.txt");
  /* Without ids: line numbers; delimiter '' splits bytes. */
  p = write_file("lines.txt", "<s>\n</s>\n<unk>\nx\n\ny\n");
  lv_tokenizer *t = make("VocabFileTokenizer", (const char *const[]){"token_vocab_filepath", p,
                                                                    "load_token_ids_from_vocab", "False",
                                                                    "tokens_delimiter", "", NULL});
  lv_tok_ids ids = {0};
  EXPECT_OK(lv_tokenizer_encode(t, "xyz\xff", 4, &ids));
  ck_assert_int_eq(ids.n, 4);
  ck_assert_int_eq(ids.v[0], 3);
  ck_assert_int_eq(ids.v[1], 4);
  ck_assert_int_eq(ids.v[2], 2);
  ck_assert_int_eq(ids.v[3], 2);
  lv_tok_ids_free(&ids);
  destroy(t);
}
END_TEST

/* lingvo/core/wpm_encoder_test.py's vocab. */
static const char kWpmVocab[] =
    "<unk>\n<s>\n</s>\nt\ni\no\nf\nr\nD\nit\nor\nfor\nitt\nto\ni-\ntt\nf.\no-\no.\nfo\n\xc3\xb8\n\xc3\xb6\n\\\n"
    "\xe2\x96\x81\n";

static void expect_ids(const lv_tokenizer *t, const char *s, int n, const int32_t *want) {
  lv_tok_ids ids = {0};
  EXPECT_OK(lv_tokenizer_encode(t, s, strlen(s), &ids));
  ck_assert_msg(ids.n == n, "\"%s\": %d ids, want %d", s, ids.n, n);
  for (int i = 0; i < n; i++) ck_assert_msg(ids.v[i] == want[i], "\"%s\"[%d] = %d, want %d", s, i, ids.v[i], want[i]);
  lv_tok_ids_free(&ids);
}

START_TEST(wpm_vectors) {
  char path[512];
  snprintf(path, sizeof path, "%s", write_file("wpm.voc", kWpmVocab));
  lv_tokenizer *t = make("WpmTokenizer", (const char *const[]){"vocab_filepath", path, NULL});
  /* ▁=23 D=8 itt=12 o=5 f=6 ø=20 ö=21 */
  expect_ids(t, "Ditto", 4, (const int32_t[]){23, 8, 12, 5});
  expect_ids(t, "Ditto Ditto", 8, (const int32_t[]){23, 8, 12, 5, 23, 8, 12, 5});
  expect_ids(t, "", 0, NULL);
  expect_ids(t, " \t ", 0, NULL);
  expect_ids(t, "f\xc3\xb8\xc3\xb6", 4, (const int32_t[]){23, 6, 20, 21});
  expect_ids(t, "D\xff", 3, (const int32_t[]){23, 8, 0});
  char *out;
  EXPECT_OK(lv_tokenizer_decode(t, (const int32_t[]){23, 8, 12, 5, 23, 8, 12, 5}, 8, &out));
  ck_assert_str_eq(out, "Ditto Ditto");
  free(out);
  EXPECT_OK(lv_tokenizer_decode(t, (const int32_t[]){23, 6, 20, 21}, 4, &out));
  ck_assert_str_eq(out, "f\xc3\xb8\xc3\xb6");
  free(out);

  /* wpm_tokenizer_test's layout on this vocab: max_length 6, append_eos. */
  const char *strs[3] = {"Ditto Ditto", "Ditto", ""};
  lv_tok_batch b;
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, strs, NULL, 3, 6, 1, &b));
  expect_rows(&b, 3, 6, (const int32_t[]){1, 23, 8, 12, 5, 23, 1, 23, 8, 12, 5, 2, 1, 2, 2, 2, 2, 2},
              (const int32_t[]){23, 8, 12, 5, 23, 8, 23, 8, 12, 5, 2, 2, 2, 2, 2, 2, 2, 2},
              (const float[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1});
  lv_tok_batch_free(&b);
  char *strs_out[3];
  EXPECT_OK(lv_tokenizer_ids_to_strings(t, b.labels, 0, 6, (const int32_t[]){0}, strs_out));
  destroy(t);

  t = make("WpmTokenizer", (const char *const[]){"vocab_filepath", path, "merge_prob", "0", NULL});
  expect_ids(t, "Ditto", 6, (const int32_t[]){23, 8, 4, 3, 3, 5});
  destroy(t);

  t = make("WpmTokenizer", (const char *const[]){"vocab_filepath", path, "pad_to_max_length", "False", NULL});
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, strs + 1, NULL, 2, 10, 1, &b));
  expect_rows(&b, 2, 5, (const int32_t[]){1, 23, 8, 12, 5, 1, 2, 2, 2, 2},
              (const int32_t[]){23, 8, 12, 5, 2, 2, 2, 2, 2, 2}, (const float[]){0, 0, 0, 0, 0, 0, 1, 1, 1, 1});
  char *o2[2];
  EXPECT_OK(lv_tokenizer_ids_to_strings(t, b.labels, 2, 5, (const int32_t[]){4, 0}, o2));
  ck_assert_str_eq(o2[0], "Ditto");
  ck_assert_str_eq(o2[1], "");
  free(o2[0]);
  free(o2[1]);
  lv_tok_batch_free(&b);
  destroy(t);

  EXPECT_ERR(make_err("WpmTokenizer", (const char *const[]){"vocab_filepath", path, "target_eos_id", "3", NULL}),
             LV_ERR_INVALID, "tokenizer.target_eos_id", "</s>", "wpm.voc");
  char *bad = write_file("bad.voc", "<unk>\n<s>\n\n</s>\n");
  EXPECT_ERR(make_err("WpmTokenizer", (const char *const[]){"vocab_filepath", bad, NULL}), LV_ERR_CORRUPT,
             "bad.voc:3", "empty line");
}
END_TEST

START_TEST(spm_errors) {
  char *p = write_file("garbage.model", "this is not a protobuf \xff\xff\xff\xff");
  EXPECT_ERR(make_err("SentencePieceTokenizer", (const char *const[]){"spm_model", p, NULL}), LV_ERR_CORRUPT,
             "tokenizer.spm_model", "garbage.model");
  /* A valid protobuf with no pieces: field 2 (trainer_spec) empty. */
  p = write_file("empty.model", "\x12");
  EXPECT_ERR(make_err("SentencePieceTokenizer", (const char *const[]){"spm_model", p, NULL}), LV_ERR_CORRUPT,
             "empty.model");
  EXPECT_ERR(make_err("SentencePieceTokenizer", NULL), LV_ERR_INVALID, "tokenizer.spm_model");
  EXPECT_ERR(make_err("SentencePieceTokenizer", (const char *const[]){"spm_model", "/nonexistent/x.model", NULL}),
             LV_ERR_NOT_FOUND, "x.model");
  /* Sampling is refused before the model is read: the message says what is accepted. */
  EXPECT_ERR(make_err("SentencePieceTokenizer",
                      (const char *const[]){"spm_model", "/nonexistent/x.model", "nbest_size", "64", NULL}),
             LV_ERR_INVALID, "tokenizer.nbest_size", "not implemented", "expected 0 or 1, found 64");
  EXPECT_ERR(make_err("SentencePieceTokenizer",
                      (const char *const[]){"spm_model", "/nonexistent/x.model", "nbest_size", "-1", NULL}),
             LV_ERR_INVALID, "tokenizer.nbest_size", "found -1");
}
END_TEST

/* SentencePieceTokenizer's layout on a model trained here (skipped without spm_train). */
START_TEST(spm_layout) {
  if (system("command -v spm_train >/dev/null 2>&1") != 0) {
    printf("spm_layout: skipped (spm_train not installed: apt-get install sentencepiece)\n");
    return;
  }
  char text[512], cmd[2048];
  snprintf(text, sizeof text, "%s/text.txt", g_dir);
  FILE *f = fopen(text, "w");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 300; i++)
    fprintf(f, "Hello world number %d, why not say hello to the world again? %s\n", i, i % 3 ? "Yes." : "No!");
  fclose(f);
  snprintf(cmd, sizeof cmd,
           "cd %s && spm_train --input=text.txt --model_prefix=m --vocab_size=60 --model_type=unigram "
           "--num_threads=1 --minloglevel=2 >/dev/null 2>&1",
           g_dir);
  ck_assert_int_eq(system(cmd), 0);
  char model[512];
  snprintf(model, sizeof model, "%s/m.model", g_dir);
  lv_tokenizer *t = make("SentencePieceTokenizer", (const char *const[]){"spm_model", model, NULL});
  const char *strs[3] = {"Hello world!", "why", ""};
  lv_tok_ids e0 = {0}, e1 = {0};
  EXPECT_OK(lv_tokenizer_encode(t, strs[0], strlen(strs[0]), &e0));
  EXPECT_OK(lv_tokenizer_encode(t, strs[1], strlen(strs[1]), &e1));
  ck_assert_int_gt(e0.n, e1.n);
  lv_tok_batch b;
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, strs, NULL, 3, 0, -1, &b));
  int w = e0.n + 1;
  ck_assert_int_eq(b.len, w);
  for (int r = 0; r < 3; r++) {
    const lv_tok_ids *e = r == 0 ? &e0 : r == 1 ? &e1 : NULL;
    int n = e ? e->n : 0;
    for (int j = 0; j < w; j++) {
      int32_t lab = j < n ? e->v[j] : j == n ? 2 : 0;
      ck_assert_int_eq(b.labels[r * w + j], lab);
      ck_assert_int_eq(b.ids[r * w + j], j == 0 ? 1 : b.labels[r * w + j - 1]);
      ck_assert(b.paddings[r * w + j] == (j <= n ? 0.f : 1.f));
    }
  }
  lv_tok_batch_free(&b);
  EXPECT_ERR(lv_tokenizer_strings_to_ids(t, strs, NULL, 3, 0, 0, &b), LV_ERR_INVALID, "external_append_eos");
  /* max_length 2 truncates (dropping </s>). */
  EXPECT_OK(lv_tokenizer_strings_to_ids(t, strs, NULL, 3, 2, -1, &b));
  ck_assert_int_eq(b.len, 2);
  ck_assert(b.paddings[0] == 0.f && b.paddings[1] == 0.f);
  lv_tok_batch_free(&b);
  char *out;
  EXPECT_OK(lv_tokenizer_decode(t, e0.v, e0.n, &out));
  ck_assert_str_eq(out, "Hello world!");
  free(out);
  lv_tok_ids bad = {0};
  EXPECT_OK(lv_tokenizer_encode(t, "\xff\xfe  \xc3", 5, &bad));
  ck_assert_int_gt(bad.n, 0);
  lv_tok_ids_free(&bad);
  lv_tok_ids_free(&e0);
  lv_tok_ids_free(&e1);
  destroy(t);
}
END_TEST

START_TEST(registry) {
  lv_tokenizer_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate("AsciiTokenizer", &p));
  ck_assert_int_eq(lv_params_int(p, "vocab_size"), 64);
  ck_assert(lv_params_bool(p, "append_eos"));
  ck_assert(lv_params_bool(p, "pad_to_max_length"));
  ck_assert_int_eq(lv_params_int(p, "target_wb_id"), -1);
  ck_assert_str_eq(lv_params_str(p, "name"), "tokenizer");
  lv_params_free(p);
  EXPECT_OK(lv_registry_instantiate("SentencePieceTokenizer", &p));
  ck_assert_int_eq(lv_params_int(p, "vocab_size"), 0);
  ck_assert(!lv_params_is_set(p, "spm_model"));
  EXPECT_OK(lv_params_set_string(p, "cls", "NoSuchTokenizer"));
  lv_params_freeze(p);
  lv_tokenizer *t = NULL;
  EXPECT_ERR(lv_tokenizer_create(p, &t), LV_ERR_INVALID, "NoSuchTokenizer", "WpmTokenizer");
  lv_params_free(p);
}
END_TEST

static void setup(void) { lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_tok"); }
static void teardown(void) { lv_test_rmtree(g_dir); }

int main(void) {
  Suite *s = suite_create("tokenizers");
  TCase *tc = tcase_create("all");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, ascii_vectors);
  tcase_add_test(tc, ascii_bytes_and_empty);
  tcase_add_test(tc, vocab_vectors);
  tcase_add_test(tc, vocab_errors);
  tcase_add_test(tc, wpm_vectors);
  tcase_add_test(tc, spm_errors);
  tcase_add_test(tc, spm_layout);
  tcase_add_test(tc, registry);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
