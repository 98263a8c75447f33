/* AsrInput (input/asr_input.c) on records in create_asr_features' layout written here:
 * the eval pass's batch (frames [B, T, F, 1] with Lingvo's extra eos frame and its
 * paddings, grapheme targets from AsciiTokenizer, sample ids and transcripts as strings,
 * bucket keys T + 1), append_eos_frame off, pad_to_max_seq_length, a training batch,
 * bucket limits, and a record whose frame count is not a multiple of frame_size (an
 * error naming file and offset, or skipped). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "input/input.h"
#include "input/tokenizer.h"
#include "io/example.h"
#include "io/tfrecord.h"

static char g_dir[256];

static void add_record(lv_tfrecord_writer *w, const char *id, const char *text, int t, int f, float base) {
  lv_example *e = lv_example_new();
  const char *iv[1] = {id}, *tv[1] = {text};
  size_t il[1] = {strlen(id)}, tl[1] = {strlen(text)};
  float *fr = malloc(sizeof(float) * (size_t)(t * f + 1));
  for (int i = 0; i < t * f; i++) fr[i] = base + (float)i;
  lv_example_add_bytes(e, "uttid", 1, iv, il);
  lv_example_add_bytes(e, "transcript", 1, tv, tl);
  lv_example_add_floats(e, "frames", t * f, fr);
  uint8_t *bytes;
  size_t n;
  EXPECT_OK(lv_example_serialize(e, &bytes, &n));
  EXPECT_OK(lv_tfrecord_writer_write(w, bytes, n));
  free(bytes);
  free(fr);
  lv_example_free(e);
}

/* Three utterances of 3, 5 and 2 frames of 4 values; with bad, a fourth of 7 values. */
static void write_records(const char *name, bool bad) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  lv_tfrecord_writer *w;
  EXPECT_OK(lv_tfrecord_writer_open(path, false, &w));
  add_record(w, "u0", "ab", 3, 4, 100);
  add_record(w, "u1", "hello world", 5, 4, 200);
  if (bad) {
    lv_example *e = lv_example_new();
    const char *iv[1] = {"bad"};
    size_t il[1] = {3};
    float fr[7] = {0};
    lv_example_add_bytes(e, "uttid", 1, iv, il);
    lv_example_add_bytes(e, "transcript", 1, iv, il);
    lv_example_add_floats(e, "frames", 7, fr);
    uint8_t *bytes;
    size_t n;
    EXPECT_OK(lv_example_serialize(e, &bytes, &n));
    EXPECT_OK(lv_tfrecord_writer_write(w, bytes, n));
    free(bytes);
    lv_example_free(e);
  }
  add_record(w, "u2", "c", 2, 4, 300);
  EXPECT_OK(lv_tfrecord_writer_close(w));
}

static lv_params *params(const char *name) {
  lv_input_register_all();
  const lv_input_class *c = lv_input_class_find("AsrInput");
  ck_assert_ptr_nonnull(c);
  lv_params *p = c->params();
  char pat[512];
  snprintf(pat, sizeof pat, "tfrecord:%s/%s", g_dir, name);
  EXPECT_OK(lv_params_set_string(p, "file_pattern", pat));
  EXPECT_OK(lv_params_set_int(p, "frame_size", 4));
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 12));
  EXPECT_OK(lv_params_set_int(p, "file_random_seed", 7));
  return p;
}

static lv_input *create(lv_params *p) {
  lv_params_freeze(p);
  lv_input *in = NULL;
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  return in;
}

static const lv_tensor *get(const lv_batch *b, const char *k) {
  const lv_tensor *t = lv_batch_get(b, k);
  ck_assert_msg(t != NULL, "batch lacks %s", k);
  return t;
}

static void setup(void) { lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_asr_input"); }
static void teardown(void) { lv_test_rmtree(g_dir); }

START_TEST(test_eval_batch) {
  write_records("a.tfrecord", false);
  lv_params *p = params("a.tfrecord");
  lv_input *in = create(p);
  lv_batch b;
  lv_batch_init(&b);
  bool done = false;
  EXPECT_OK(lv_input_reset(in));
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert(!done);
  ck_assert_int_eq(b.size, 3);
  const lv_tensor *src = get(&b, "src.src_inputs"), *pad = get(&b, "src.paddings");
  /* Longest utterance 5 frames + the eos frame. */
  ck_assert_int_eq(src->shape.rank, 4);
  ck_assert(src->shape.d[0] == 3 && src->shape.d[1] == 6 && src->shape.d[2] == 4 && src->shape.d[3] == 1);
  static const float want_pad[3][6] = {{0, 0, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 1, 1}};
  static const int T[3] = {3, 5, 2};
  static const float base[3] = {100, 200, 300};
  for (int r = 0; r < 3; r++)
    for (int t = 0; t < 6; t++) {
      ck_assert_msg(lv_f32(pad)[r * 6 + t] == want_pad[r][t], "paddings[%d][%d] = %g", r, t, lv_f32(pad)[r * 6 + t]);
      for (int f = 0; f < 4; f++) {
        float want = t < T[r] ? base[r] + (float)(t * 4 + f) : 0.0f;
        ck_assert_msg(lv_f32(src)[(r * 6 + t) * 4 + f] == want, "frames[%d][%d][%d] = %g, want %g", r, t, f,
                      lv_f32(src)[(r * 6 + t) * 4 + f], want);
      }
    }
  const lv_tensor *ids = get(&b, "sample_ids"), *tr = get(&b, "tgt.transcripts"), *bk = get(&b, "bucket_keys");
  ck_assert_str_eq(lv_tensor_str(ids, 0), "u0");
  ck_assert_str_eq(lv_tensor_str(ids, 2), "u2");
  ck_assert_str_eq(lv_tensor_str(tr, 1), "hello world");
  ck_assert_int_eq(((int32_t *)bk->data)[0], 4);
  ck_assert_int_eq(((int32_t *)bk->data)[1], 6);
  ck_assert_int_eq(((int32_t *)bk->data)[2], 3);
  /* AsciiTokenizer: <s>=1, </s>=2, a=5, b=6, c=7; padded to target_max_length. */
  const lv_tensor *tid = get(&b, "tgt.ids"), *tlab = get(&b, "tgt.labels"), *tp = get(&b, "tgt.paddings"),
                  *tw = get(&b, "tgt.weights");
  ck_assert_int_eq(tid->shape.d[1], 12);
  const int32_t *I = (const int32_t *)tid->data, *Lb = (const int32_t *)tlab->data;
  ck_assert(I[0] == 1 && I[1] == 5 && I[2] == 6);
  ck_assert(Lb[0] == 5 && Lb[1] == 6 && Lb[2] == 2);
  ck_assert(lv_f32(tp)[2] == 0 && lv_f32(tp)[3] == 1 && lv_f32(tw)[2] == 1 && lv_f32(tw)[3] == 0);
  ck_assert(I[24] == 1 && I[25] == 7 && Lb[25] == 2);
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert(done);
  lv_batch_free(&b);
  lv_batch_init(&b);
  lv_input_destroy(in);
  lv_params_free(p);
}
END_TEST

START_TEST(test_no_eos_frame_and_padded) {
  write_records("a.tfrecord", false);
  lv_params *p = params("a.tfrecord");
  EXPECT_OK(lv_params_set_bool(p, "append_eos_frame", false));
  lv_input *in = create(p);
  lv_batch b;
  lv_batch_init(&b);
  bool done;
  EXPECT_OK(lv_input_reset(in));
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  const lv_tensor *src = get(&b, "src.src_inputs"), *pad = get(&b, "src.paddings");
  ck_assert_int_eq(src->shape.d[1], 5);
  ck_assert(lv_f32(pad)[0 * 5 + 2] == 0 && lv_f32(pad)[0 * 5 + 3] == 1 && lv_f32(pad)[2 * 5 + 2] == 1);
  ck_assert_int_eq(((int32_t *)get(&b, "bucket_keys")->data)[1], 5);
  lv_batch_free(&b);
  lv_batch_init(&b);
  lv_input_destroy(in);
  lv_params_free(p);

  p = params("a.tfrecord");
  EXPECT_OK(lv_params_set_bool(p, "pad_to_max_seq_length", true));
  EXPECT_OK(lv_params_set_int(p, "source_max_length", 9));
  in = create(p);
  EXPECT_OK(lv_input_reset(in));
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  src = get(&b, "src.src_inputs");
  pad = get(&b, "src.paddings");
  ck_assert(src->shape.d[1] == 9 && pad->shape.d[1] == 9);
  ck_assert(lv_f32(pad)[1 * 9 + 5] == 0 && lv_f32(pad)[1 * 9 + 6] == 1);
  ck_assert_int_eq(get(&b, "tgt.ids")->shape.d[1], 12);
  lv_batch_free(&b);
  lv_batch_init(&b);
  lv_input_destroy(in);
  lv_params_free(p);

  p = params("a.tfrecord");
  EXPECT_OK(lv_params_set_bool(p, "pad_to_max_seq_length", true));
  EXPECT_OK(lv_params_set_int(p, "source_max_length", 5));
  in = create(p);
  EXPECT_OK(lv_input_reset(in));
  EXPECT_ERR(lv_input_next_eval(in, &b, &done), LV_ERR_INVALID, "u1", "source_max_length 5");
  lv_batch_free(&b);
  lv_batch_init(&b);
  lv_input_destroy(in);
  lv_params_free(p);
}
END_TEST

START_TEST(test_training_buckets) {
  write_records("a.tfrecord", false);
  lv_params *p = params("a.tfrecord");
  EXPECT_OK(lv_params_set_list(p, "bucket_upper_bound", lv_pvalue_ints(2, (const int64_t[]){4, 10})));
  EXPECT_OK(lv_params_set_list(p, "bucket_batch_limit", lv_pvalue_ints(2, (const int64_t[]){2, 1})));
  EXPECT_OK(lv_params_set_int(p, "prefetch_batches", 0));
  lv_input *in = create(p);
  lv_batch b;
  lv_batch_init(&b);
  for (int step = 0; step < 4; step++) {
    EXPECT_OK(lv_input_train_batch(in, step, &b));
    const lv_tensor *bk = get(&b, "bucket_keys");
    int32_t k0 = ((int32_t *)bk->data)[0];
    /* Keys 3 and 4 share the first bucket (batches of 2); key 6 comes alone. */
    ck_assert_int_eq(b.size, k0 <= 4 ? 2 : 1);
    for (int64_t i = 0; i < b.size; i++) ck_assert((((int32_t *)bk->data)[i] <= 4) == (k0 <= 4));
    ck_assert_int_eq(get(&b, "src.src_inputs")->shape.d[2], 4);
  }
  lv_batch_free(&b);
  lv_batch_init(&b);
  lv_input_destroy(in);
  lv_params_free(p);
}
END_TEST

START_TEST(test_bad_frames) {
  write_records("bad.tfrecord", true);
  lv_params *p = params("bad.tfrecord");
  lv_input *in = create(p);
  lv_batch b;
  lv_batch_init(&b);
  bool done;
  EXPECT_OK(lv_input_reset(in));
  EXPECT_ERR(lv_input_next_eval(in, &b, &done), LV_ERR_CORRUPT, "bad.tfrecord", "not a multiple of input.frame_size 4");
  lv_batch_free(&b);
  lv_batch_init(&b);
  lv_input_destroy(in);
  lv_params_free(p);
  p = params("bad.tfrecord");
  EXPECT_OK(lv_params_set_bool(p, "skip_corrupt_records", true));
  in = create(p);
  EXPECT_OK(lv_input_reset(in));
  EXPECT_OK(lv_input_next_eval(in, &b, &done));
  ck_assert_int_eq(b.size, 3);
  lv_batch_free(&b);
  lv_batch_init(&b);
  lv_input_destroy(in);
  lv_params_free(p);
  p = params("bad.tfrecord");
  EXPECT_OK(lv_params_set_int(p, "frame_size", 0));
  lv_params_freeze(p);
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.frame_size 0");
  lv_params_free(p);
}
END_TEST

/* Reading a one-record file whose record is bad fails, naming the file and what is wrong. */
static void expect_bad_record(const char *name, const char *what) {
  lv_params *p = params(name);
  lv_input *in = create(p);
  lv_batch b;
  lv_batch_init(&b);
  bool done;
  EXPECT_OK(lv_input_reset(in));
  EXPECT_ERR(lv_input_next_eval(in, &b, &done), LV_ERR_CORRUPT, name, what);
  lv_batch_free(&b);
  lv_input_destroy(in);
  lv_params_free(p);
}

/* Writes e as the one record of g_dir/name. */
static void write_one(const char *name, const lv_example *e) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  uint8_t *bytes;
  size_t n;
  EXPECT_OK(lv_example_serialize(e, &bytes, &n));
  lv_tfrecord_writer *w;
  EXPECT_OK(lv_tfrecord_writer_open(path, false, &w));
  EXPECT_OK(lv_tfrecord_writer_write(w, bytes, n));
  EXPECT_OK(lv_tfrecord_writer_close(w));
  free(bytes);
}

START_TEST(test_no_frames_and_nan) {
  char path[512];
  lv_tfrecord_writer *w;
  /* No frames at all: an empty list, then no frames feature. */
  snprintf(path, sizeof path, "%s/empty.tfrecord", g_dir);
  EXPECT_OK(lv_tfrecord_writer_open(path, false, &w));
  add_record(w, "e0", "ab", 0, 4, 0);
  EXPECT_OK(lv_tfrecord_writer_close(w));
  expect_bad_record("empty.tfrecord", "utterance e0: no frames");
  lv_example *e = lv_example_new();
  const char *iv[1] = {"n0"};
  size_t il[1] = {2};
  lv_example_add_bytes(e, "uttid", 1, iv, il);
  lv_example_add_bytes(e, "transcript", 1, iv, il);
  write_one("noframes.tfrecord", e);
  expect_bad_record("noframes.tfrecord", "utterance n0: no frames");
  /* A NaN among the values: named by value, frame and bin. */
  float fr[8] = {1, 2, 3, 4, 5, NAN, 7, 8};
  lv_example_add_floats(e, "frames", 8, fr);
  write_one("nan.tfrecord", e);
  lv_example_free(e);
  expect_bad_record("nan.tfrecord", "utterance n0: frames value 5 (frame 1, bin 1) is nan");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("asr_input");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_eval_batch);
  tcase_add_test(tc, test_no_eos_frame_and_padded);
  tcase_add_test(tc, test_training_buckets);
  tcase_add_test(tc, test_bad_frames);
  tcase_add_test(tc, test_no_frames_and_nan);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
