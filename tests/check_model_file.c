/* The model file's format (io/model_file.h): what is written reads back (params text,
 * assets, tensors with dtype and shape); every shorter prefix of a file and every
 * single-byte flip of it is an error (CORRUPT or, for the magic, INVALID) naming the
 * file, never a crash or a file that loads (with a quantized tensor too); a newer version, unknown flags and a second
 * tensor of one name are refused. The params text of each kind of task (MT, RNMT, both
 * punctuators, LM, LeNet5, LAS) reads back into the same tree. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/file.h"
#include "check_util.h"
#include "io/model_file.h"
#include "models/model.h"

static char g_dir[] = "/tmp/lingvoc-check-model-file.XXXXXX";
static char g_path[256];

static const char kParams[] = "input.tokenizer.vocab_filepath : 'wpm.voc'\ntask.cls : 'mt.model.TransformerModel'\n";
static const float kW[6] = {1, 2, 3, 4, 5, 6};
static const int64_t kStep = 20;

static const int8_t kQ[6] = {127, -3, 0, 64, -127, 5};
static const float kScales[3] = {0.5f, 0.25f, 2.0f};

/* Writes the two-tensor file (three with a qint8 [2, 3] per column: format version 2) to
 * g_path; returns its bytes (caller frees) and size. */
static char *write_sample_q(bool quantized, size_t *size) {
  lv_mf_asset a = {.key = "input.tokenizer.vocab_filepath", .name = "wpm.voc", .data = "<unk>\n", .size = 6};
  lv_mf_tensor t[3] = {{.name = "m/w/var", .dtype = LV_F32, .shape = lv_shape2(2, 3), .data = kW, .size = sizeof kW},
                       {.name = "global_step", .dtype = LV_I64, .shape = lv_shape0(), .data = &kStep, .size = 8},
                       {.name = "m/q/var", .dtype = LV_F32, .shape = lv_shape2(2, 3), .data = kQ, .size = sizeof kQ,
                        .quantized = true, .qtype = LV_QTYPE_INT8, .axis = 1, .scales = kScales}};
  EXPECT_OK(lv_model_file_write(g_path, kParams, &a, 1, t, quantized ? 3 : 2));
  char *data = NULL;
  EXPECT_OK(lv_file_read_all(g_path, &data, size));
  return data;
}

static char *write_sample(size_t *size) { return write_sample_q(false, size); }

START_TEST(test_round_trip) {
  size_t size = 0;
  free(write_sample(&size));
  lv_model_file *f = NULL;
  EXPECT_OK(lv_model_file_read(g_path, &f));
  ck_assert_uint_eq(f->version, 1); /* no quantized tensor: the oldest version that holds it */
  ck_assert_uint_eq(f->file_size, size);
  ck_assert_uint_eq(size % 8, 0);
  ck_assert_str_eq(f->params_text, kParams);
  ck_assert_int_eq(f->n_assets, 1);
  ck_assert_str_eq(f->assets[0].key, "input.tokenizer.vocab_filepath");
  ck_assert_str_eq(f->assets[0].name, "wpm.voc");
  ck_assert_int_eq(f->assets[0].size, 6);
  ck_assert_int_eq(memcmp(f->assets[0].data, "<unk>\n", 6), 0);
  ck_assert_int_eq(f->n_tensors, 2);
  const lv_mf_tensor *w = lv_model_file_tensor(f, "m/w/var"), *g = lv_model_file_tensor(f, "global_step");
  ck_assert_ptr_nonnull(w);
  ck_assert_ptr_nonnull(g);
  ck_assert_ptr_null(lv_model_file_tensor(f, "m/w"));
  ck_assert_int_eq(w->dtype, LV_F32);
  ck_assert_int_eq(w->shape.rank, 2);
  ck_assert_int_eq(w->shape.d[1], 3);
  ck_assert_int_eq(memcmp(w->data, kW, sizeof kW), 0);
  ck_assert_int_eq(g->dtype, LV_I64);
  ck_assert_int_eq(g->shape.rank, 0);
  ck_assert_int_eq(*(const int64_t *)g->data, 20);
  lv_model_file_free(f);
}
END_TEST

/* A quantized tensor reads back with its type, axis and scales, in a version 2 file; the
 * same tensor in a version 1 file is refused. */
START_TEST(test_quantized_round_trip) {
  size_t size = 0;
  char *d = write_sample_q(true, &size);
  lv_model_file *f = NULL;
  EXPECT_OK(lv_model_file_read(g_path, &f));
  ck_assert_uint_eq(f->version, 2);
  const lv_mf_tensor *q = lv_model_file_tensor(f, "m/q/var"), *w = lv_model_file_tensor(f, "m/w/var");
  ck_assert_ptr_nonnull(q);
  ck_assert(q->quantized && !w->quantized);
  ck_assert_int_eq(q->qtype, LV_QTYPE_INT8);
  ck_assert_int_eq(q->dtype, LV_F32);
  ck_assert_int_eq(q->axis, 1);
  ck_assert_int_eq(q->size, 6);
  ck_assert_int_eq(memcmp(q->data, kQ, sizeof kQ), 0);
  ck_assert_int_eq(memcmp(q->scales, kScales, sizeof kScales), 0);
  float x[6];
  lv_qtype_traits_of(q->qtype)->dequantize(q->data, q->scales, 2, 3, q->axis, x);
  ck_assert_float_eq(x[0], 63.5f);
  ck_assert_float_eq(x[4], -31.75f);
  ck_assert_float_eq(x[5], 10.0f);
  lv_model_file_free(f);
  const uint32_t v1 = 1;
  memcpy(d + 8, &v1, 4);
  const uint32_t c = lv_crc32c_mask(lv_crc32c(d, 32));
  memcpy(d + 32, &c, 4);
  f = NULL;
  lv_status s = lv_model_file_parse("X.lvm", d, size, &f);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "X.lvm: section 4 (tensor m/q/var): quantized dtype 'qint8' in a format "
                                         "version 1 file"), "%s", lv_status_msg(s));
  lv_status_free(s);
  free(d);
}
END_TEST

static void expect_refused(const char *what, const void *data, size_t n, const char *needle) {
  lv_model_file *f = NULL;
  lv_status s = lv_model_file_parse("X.lvm", data, n, &f);
  ck_assert_msg(s != NULL, "%s: loaded", what);
  ck_assert_ptr_null(f);
  ck_assert_msg(lv_status_code(s) == LV_ERR_CORRUPT || lv_status_code(s) == LV_ERR_INVALID, "%s: %s", what,
                lv_status_msg(s));
  ck_assert_msg(strstr(lv_status_msg(s), "X.lvm"), "%s: %s", what, lv_status_msg(s));
  if (needle) ck_assert_msg(strstr(lv_status_msg(s), needle), "%s: '%s' not in: %s", what, needle, lv_status_msg(s));
  lv_status_free(s);
}

START_TEST(test_every_prefix_and_flip) {
  size_t size = 0;
  char *d = write_sample_q(_i == 1, &size);
  char what[64];
  for (size_t n = 0; n < size; n++) {
    snprintf(what, sizeof what, "a prefix of %zu bytes", n);
    expect_refused(what, d, n, n < 8 ? "not a lingvoc model file" : n < 40 ? NULL : "truncated");
  }
  for (size_t i = 0; i < size; i++)
    for (int bit = 0; bit < 8; bit += 7) {
      d[i] ^= (char)(1 << bit);
      snprintf(what, sizeof what, "bit %d of byte %zu flipped", bit, i);
      expect_refused(what, d, size, NULL);
      d[i] ^= (char)(1 << bit);
    }
  free(d);
}
END_TEST

/* Sets the header's u32 at off to v and re-checksums the header, as a writer would. */
static void patch_header(char *d, int off, uint32_t v) {
  memcpy(d + off, &v, 4);
  uint32_t c = lv_crc32c_mask(lv_crc32c(d, 32));
  memcpy(d + 32, &c, 4);
}

START_TEST(test_version_and_flags) {
  size_t size = 0;
  char *d = write_sample(&size);
  patch_header(d, 8, LV_MODEL_FILE_VERSION + 1);
  expect_refused("a newer version", d, size, "newer than this lingvoc reads");
  patch_header(d, 8, LV_MODEL_FILE_VERSION);
  patch_header(d, 12, 1);
  expect_refused("a flag", d, size, "flags 0x1");
  free(d);
}
END_TEST

START_TEST(test_duplicate_tensor) {
  lv_mf_tensor t[2] = {{.name = "w", .dtype = LV_F32, .shape = lv_shape1(1), .data = kW, .size = 4},
                       {.name = "w", .dtype = LV_F32, .shape = lv_shape1(1), .data = kW, .size = 4}};
  EXPECT_OK(lv_model_file_write(g_path, "", NULL, 0, t, 2));
  lv_model_file *f = NULL;
  lv_status s = lv_model_file_read(g_path, &f);
  ck_assert_ptr_nonnull(s);
  ck_assert_ptr_nonnull(strstr(lv_status_msg(s), "a second tensor w"));
  lv_status_free(s);
}
END_TEST

/* A model file keeps the params as text: default params + that text must give the same
 * tree back (and the same text) for every kind of task, as the decoder builds them. */
START_TEST(test_params_round_trip) {
  static const char *const kModels[][2] = {
      {"mt.bible_en_es.TinyTest", "Train"},          {"mt.bible_en_es.RNMTTinyTest", "Train"},
      {"punctuator.codelab.RNMTTinyTest", "Test"},   {"punctuator.codelab.TransformerTinyTest", "Test"},
      {"lm.bible.RnnLmTinyTest", "Test"},            {"image.mnist.LeNet5", "Test"},
      {"asr.bible_tts.TinyTest", "Test"},            {"asr.bible_tts.LasSmall", "Test"}};
  for (size_t i = 0; i < sizeof kModels / sizeof *kModels; i++) {
    lv_model_options o;
    lv_model_options_init(&o);
    o.model = kModels[i][0];
    o.dataset = kModels[i][1];
    o.logdir = g_dir;
    o.mode = "sync";
    o.job = "decoder";
    lv_params *p = NULL;
    EXPECT_OK(lv_model_params_build(&o, &p));
    char *text = lv_params_to_text(p);
    lv_params *q = NULL;
    EXPECT_OK(lv_model_params_from_text(text, "round trip", &q));
    char *again = lv_params_to_text(q);
    ck_assert_msg(!strcmp(text, again), "%s: the params text does not read back the same", kModels[i][0]);
    ck_assert_msg(lv_params_equal(p, q), "%s: the params tree does not read back the same", kModels[i][0]);
    free(text);
    free(again);
    lv_params_free(p);
    lv_params_free(q);
  }
}
END_TEST

int main(void) {
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(g_path, sizeof g_path, "%s/m.lvm", g_dir);
  Suite *s = suite_create("model_file");
  TCase *tc = tcase_create("model_file");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_quantized_round_trip);
  tcase_add_loop_test(tc, test_every_prefix_and_flip, 0, 2); /* float only, with a qint8 tensor */
  tcase_add_test(tc, test_version_and_flags);
  tcase_add_test(tc, test_duplicate_tensor);
  tcase_add_test(tc, test_params_round_trip);
  suite_add_tcase(s, tc);
  int rc = lv_test_run(s);
  unlink(g_path);
  rmdir(g_dir);
  return rc;
}
