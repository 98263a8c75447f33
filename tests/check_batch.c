/* Batches that hold frames and strings: the batcher pads features with a per-step shape
 * ([T, 80] speech frames, [T, 4, 1]) along T only, keeps string features as [B] string
 * tensors; string tensors own or borrow their strings as tensor.h says (ASan finds the
 * leaks and double frees); batch stores free and copy them; lv_batch_to_graph leaves
 * them on the host while it moves the numbers onto the device (the guarded cpu:1). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "core/graph.h"
#include "input/batcher.h"
#include "kernels/guarded.h"
#include "models/task.h"

static char g_dir[256];

static void setup(void) { lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_check_batch"); }
static void teardown(void) { lv_test_rmtree(g_dir); }

enum { DIM = 80 };

/* The value of frame t, dimension d of a sample of length len (unique per triple). */
static float frame_value(int64_t len, int64_t t, int64_t d) { return (float)(len * 1000 + t * DIM + d); }

/* A line "<len> <utt>": frames [len, 80], paddings [len] zeros, feats [len, 4, 1] =
 * 10 * len + t, utt the rest of the line; key len. */
static lv_status frames_proc(void *ctx, const lv_record *rec, lv_sample *out, int64_t *key) {
  (void)ctx;
  char line[64];
  snprintf(line, sizeof line, "%.*s", (int)rec->len, (const char *)rec->data);
  char *rest = NULL;
  long len = strtol(line, &rest, 10);
  if (len < 0 || len > 16) return lv_status_make(LV_ERR_CORRUPT, "bad length %ld", len);
  float frames[16 * DIM];
  float paddings[16] = {0};
  int32_t feats[16 * 4];
  for (long t = 0; t < len; t++) {
    for (int d = 0; d < DIM; d++) frames[t * DIM + d] = frame_value(len, t, d);
    for (int d = 0; d < 4; d++) feats[t * 4 + d] = (int32_t)(10 * len + t);
  }
  lv_sample_set(out, 0, frames, len);
  lv_sample_set(out, 1, paddings, len);
  lv_sample_set(out, 2, feats, len);
  while (*rest == ' ') rest++;
  lv_sample_set_str(out, 3, rest, strlen(rest));
  *key = len;
  return NULL;
}

static lv_batcher_opts frames_opts(int64_t pad_to) {
  lv_batcher_opts o = {.n_features = 4,
                       .features = {{"frames", LV_F32, -7, pad_to, lv_shape1(DIM)},
                                    {"paddings", LV_F32, 1, pad_to, lv_shape0()},
                                    {"feats", LV_I32, 9, pad_to, lv_shape2(4, 1)},
                                    {"utt_id", LV_STRING, 0, 0, lv_shape0()}},
                       .n_buckets = 2,
                       .bucket_upper_bound = {3, 10},
                       .bucket_batch_limit = {2, 2},
                       .process = frames_proc};
  return o;
}

static lv_batcher *frames_batcher(const char *lines, const lv_batcher_opts *o) {
  char path[512], pat[600];
  snprintf(path, sizeof path, "%s/frames.txt", g_dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(lines, f);
  fclose(f);
  snprintf(pat, sizeof pat, "text:%s", path);
  lv_record_yielder_opts yo = {.file_pattern = pat, .seed = 1, .buffer_size = 1, .parallelism = 1,
                               .repeat_count = 1, .sequential = true, .num_replicas = 1};
  lv_record_yielder *y = NULL;
  EXPECT_OK(lv_record_yielder_create(&yo, &y));
  lv_batcher *b = NULL;
  EXPECT_OK(lv_batcher_create(o, "input", y, &b));
  return b;
}

static void expect_shape(const lv_tensor *t, lv_shape want) {
  char a[64], b[64];
  ck_assert_msg(lv_shape_eq(&t->shape, &want), "shape %s, want %s", lv_shape_str(&t->shape, a, sizeof a),
                lv_shape_str(&want, b, sizeof b));
}

/* Row i of a frames batch of width T: len frames of values, then T - len frames of -7;
 * paddings 0 then 1; feats 10 * len + t then 9; utt_id utt. */
static void expect_row(const lv_batch *bt, int64_t i, int64_t T, int64_t len, const char *utt) {
  const lv_tensor *fr = lv_batch_get(bt, "frames"), *pad = lv_batch_get(bt, "paddings");
  const lv_tensor *feats = lv_batch_get(bt, "feats"), *ids = lv_batch_get(bt, "utt_id");
  for (int64_t t = 0; t < T; t++) {
    for (int64_t d = 0; d < DIM; d++) {
      float got = lv_f32(fr)[(i * T + t) * DIM + d], want = t < len ? frame_value(len, t, d) : -7.0f;
      ck_assert_msg(got == want, "frames[%lld,%lld,%lld] = %g, want %g", (long long)i, (long long)t, (long long)d,
                    (double)got, (double)want);
    }
    ck_assert_msg(lv_f32(pad)[i * T + t] == (t < len ? 0.0f : 1.0f), "paddings[%lld,%lld]", (long long)i,
                  (long long)t);
    for (int64_t d = 0; d < 4; d++)
      ck_assert_int_eq(lv_i32(feats)[(i * T + t) * 4 + d], t < len ? (int32_t)(10 * len + t) : 9);
  }
  ck_assert_str_eq(lv_tensor_str(ids, i), utt);
}

static void next_batch(lv_batcher *b, lv_batch *bt, int64_t size) {
  bool done = true;
  EXPECT_OK(lv_batcher_next(b, bt, &done));
  ck_assert(!done);
  ck_assert_int_eq(bt->size, size);
}

START_TEST(test_frames_padded_along_t) {
  lv_batcher_opts o = frames_opts(0);
  lv_batcher *b = frames_batcher("2 utt-a\n3 utt-b\n5 utt-c\n4 \n1 utt-e\n", &o);
  lv_batch bt;
  lv_batch_init(&bt);
  /* bucket 0: lengths 2 and 3, T = 3 */
  next_batch(b, &bt, 2);
  expect_shape(lv_batch_get(&bt, "frames"), lv_shape3(2, 3, DIM));
  expect_shape(lv_batch_get(&bt, "paddings"), lv_shape2(2, 3));
  expect_shape(lv_batch_get(&bt, "feats"), lv_shape4(2, 3, 4, 1));
  expect_shape(lv_batch_get(&bt, "utt_id"), lv_shape1(2));
  ck_assert_int_eq(lv_batch_get(&bt, "utt_id")->dtype, LV_STRING);
  expect_row(&bt, 0, 3, 2, "utt-a");
  expect_row(&bt, 1, 3, 3, "utt-b");
  /* bucket 1: lengths 5 and 4, T = 5; an empty utterance id */
  next_batch(b, &bt, 2);
  expect_shape(lv_batch_get(&bt, "frames"), lv_shape3(2, 5, DIM));
  expect_shape(lv_batch_get(&bt, "feats"), lv_shape4(2, 5, 4, 1));
  expect_row(&bt, 0, 5, 5, "utt-c");
  expect_row(&bt, 1, 5, 4, "");
  /* the end: the partial bucket 0 */
  next_batch(b, &bt, 1);
  expect_shape(lv_batch_get(&bt, "frames"), lv_shape3(1, 1, DIM));
  expect_row(&bt, 0, 1, 1, "utt-e");
  bool done = false;
  EXPECT_OK(lv_batcher_next(b, &bt, &done));
  ck_assert(done);
  lv_batcher_destroy(b);
  lv_batch_free(&bt);
}
END_TEST

START_TEST(test_frames_pad_to) {
  lv_batcher_opts o = frames_opts(6);
  lv_batcher *b = frames_batcher("2 x\n3 y\n", &o);
  lv_batch bt;
  lv_batch_init(&bt);
  next_batch(b, &bt, 2);
  expect_shape(lv_batch_get(&bt, "frames"), lv_shape3(2, 6, DIM));
  expect_shape(lv_batch_get(&bt, "feats"), lv_shape4(2, 6, 4, 1));
  expect_row(&bt, 0, 6, 2, "x");
  expect_row(&bt, 1, 6, 3, "y");
  lv_batcher_destroy(b);
  lv_batch_free(&bt);

  /* a sample longer than pad_to is an error naming the record and the feature */
  o = frames_opts(2);
  b = frames_batcher("3 z\n", &o);
  lv_batch_init(&bt);
  bool done;
  EXPECT_ERR(lv_batcher_next(b, &bt, &done), LV_ERR_CORRUPT, "record at byte offset 0",
             "frames has length 3, longer than its pad length 2");
  lv_batcher_destroy(b);
  lv_batch_free(&bt);
}
END_TEST

START_TEST(test_feature_shape_errors) {
  static const struct {
    int f;
    lv_dtype dtype;
    lv_shape inner;
    const char *msg;
  } bad[] = {
      {0, LV_F32, {1, {0}}, "bad per-step shape (rank 1"},
      {0, LV_F32, {7, {1, 1, 1, 1, 1, 1, 1}}, "bad per-step shape (rank 7"},
      {3, LV_STRING, {1, {2}}, "rank 0 for strings"},
      {1, LV_I64, {0, {0}}, "int32, float32 or string, not int64"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    lv_batcher_opts o = frames_opts(0);
    o.features[bad[k].f].dtype = bad[k].dtype;
    o.features[bad[k].f].inner = bad[k].inner;
    lv_record_yielder_opts yo = {.file_pattern = "iota:3", .buffer_size = 1, .parallelism = 1, .repeat_count = 1,
                                 .sequential = true, .num_replicas = 1};
    lv_record_yielder *y = NULL;
    EXPECT_OK(lv_record_yielder_create(&yo, &y));
    lv_batcher *b = NULL;
    EXPECT_ERR(lv_batcher_create(&o, "input", y, &b), LV_ERR_INVALID, "input: feature", bad[k].msg);
    ck_assert_ptr_null(b);
  }
}
END_TEST

START_TEST(test_string_tensors) {
  lv_tensor *t = lv_tensor_new(LV_STRING, lv_shape2(2, 2));
  ck_assert_ptr_nonnull(t);
  ck_assert_uint_eq(lv_tensor_nbytes(t), 4 * sizeof(char *));
  for (int i = 0; i < 4; i++) ck_assert_str_eq(lv_tensor_str(t, i), "");
  lv_tensor_set_str(t, 1, "hello world", 5);
  lv_tensor_set_str(t, 3, "x", 1);
  lv_tensor_set_str(t, 3, "again", 5); /* replaces (frees) "x" */
  ck_assert_str_eq(lv_tensor_str(t, 1), "hello");
  ck_assert_str_eq(lv_tensor_str(t, 3), "again");
  ck_assert_ptr_null(lv_str(t)[0]);
  /* a view borrows the strings: freeing it leaves them to t */
  lv_tensor *v = malloc(sizeof *v);
  ck_assert_ptr_nonnull(v);
  *v = lv_tensor_view(LV_STRING, t->shape, t->data);
  lv_tensor_free(v);
  ck_assert_str_eq(lv_tensor_str(t, 1), "hello");
  lv_tensor_free(t); /* frees its strings (ASan: no leak) */

  /* no device holds strings */
  const lv_backend *be = lv_guarded_backend_create(1);
  ck_assert_ptr_nonnull(be);
  ck_assert_ptr_null(lv_tensor_new_on(be->device, LV_STRING, lv_shape1(2)));
  ck_assert_int_eq(lv_guarded_allocations(be), 0);
  lv_guarded_backend_destroy(be);
}
END_TEST

START_TEST(test_store_strings) {
  lv_batch_store st;
  lv_batch_store_init(&st);
  lv_tensor *ids, *n;
  EXPECT_OK(lv_batch_store_add(&st, "utt_id", LV_STRING, lv_shape1(3), &ids));
  EXPECT_OK(lv_batch_store_add(&st, "n", LV_I32, lv_shape1(3), &n));
  for (int i = 0; i < 3; i++) {
    ck_assert_ptr_null(lv_str(ids)[i]);
    char s[16];
    snprintf(s, sizeof s, "utt-%d", i);
    lv_tensor_set_str(ids, i, s, strlen(s));
    lv_i32(n)[i] = 10 + i;
  }
  st.batch.size = 3;
  /* a copy owns its own strings */
  lv_batch_store cp;
  lv_batch_store_init(&cp);
  for (int i = 0; i < lv_nmap_count(&st.batch.map); i++) {
    const lv_nmap_entry *e = lv_nmap_at(&st.batch.map, i);
    EXPECT_OK(lv_batch_store_add_copy(&cp, e->key, e->t, NULL));
  }
  lv_tensor *cids = lv_batch_get(&cp.batch, "utt_id");
  ck_assert_int_eq(cids->dtype, LV_STRING);
  expect_shape(cids, lv_shape1(3));
  for (int i = 0; i < 3; i++) {
    ck_assert_ptr_ne(lv_str(cids)[i], lv_str(ids)[i]);
    ck_assert_str_eq(lv_tensor_str(cids, i), lv_tensor_str(ids, i));
    ck_assert_int_eq(lv_i32(lv_batch_get(&cp.batch, "n"))[i], 10 + i);
  }
  /* a view borrows: it reads the store's strings */
  lv_batch view;
  lv_batch_init(&view);
  EXPECT_OK(lv_batch_store_view(&st, &view));
  ck_assert_int_eq(view.size, 3);
  ck_assert_str_eq(lv_tensor_str(lv_batch_get(&view, "utt_id"), 2), "utt-2");
  lv_batch_free(&view);
  /* clear frees the strings; the buffer comes back all NULL for the next batch */
  lv_batch_store_clear(&st);
  EXPECT_OK(lv_batch_store_add(&st, "utt_id", LV_STRING, lv_shape1(2), &ids));
  ck_assert_ptr_null(lv_str(ids)[0]);
  ck_assert_ptr_null(lv_str(ids)[1]);
  lv_tensor_set_str(ids, 0, "kept until free", 15);
  ck_assert_str_eq(lv_tensor_str(cids, 0), "utt-0");
  lv_batch_store_free(&st);
  lv_batch_store_free(&cp);
}
END_TEST

/* On the guarded cpu:1 numbers are copied to device memory the host cannot read; the
 * string tensor is the batch's own host tensor, readable by a metric. */
START_TEST(test_batch_to_graph_keeps_strings_on_host) {
  const lv_backend *be = lv_guarded_backend_create(1);
  ck_assert_ptr_nonnull(be);
  lv_graph *g = lv_graph_create_on(be->device, 1 << 20);
  ck_assert_ptr_nonnull(g);
  lv_batch_store st;
  lv_batch_store_init(&st);
  lv_tensor *ids, *x;
  EXPECT_OK(lv_batch_store_add(&st, "x", LV_F32, lv_shape2(2, 3), &x));
  EXPECT_OK(lv_batch_store_add(&st, "transcript", LV_STRING, lv_shape1(2), &ids));
  for (int i = 0; i < 6; i++) lv_f32(x)[i] = (float)i;
  lv_tensor_set_str(ids, 0, "the cat", 7);
  lv_tensor_set_str(ids, 1, "sat", 3);
  st.batch.size = 2;
  lv_batch db;
  lv_batch_init(&db);
  EXPECT_OK(lv_batch_to_graph(g, &st.batch, &db));
  ck_assert_int_eq(db.size, 2);
  lv_tensor *dx = lv_batch_get(&db, "x"), *dt = lv_batch_get(&db, "transcript");
  ck_assert_ptr_nonnull(dx);
  ck_assert_ptr_nonnull(dt);
  ck_assert(lv_device_eq(dx->device, be->device));
  float back[6];
  EXPECT_OK(lv_tensor_to_host(dx, back));
  for (int i = 0; i < 6; i++) ck_assert(back[i] == (float)i);
  ck_assert_ptr_eq(dt, ids);
  ck_assert(lv_device_is_host(dt->device));
  ck_assert_str_eq(lv_tensor_str(dt, 0), "the cat");
  ck_assert_str_eq(lv_tensor_str(dt, 1), "sat");
  lv_batch_free(&db);
  lv_batch_store_free(&st);
  lv_graph_destroy(g);
  ck_assert_int_eq(lv_guarded_allocations(be), 0);
  lv_guarded_backend_destroy(be);
}
END_TEST

int main(void) {
  Suite *su = suite_create("batch");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_frames_padded_along_t);
  tcase_add_test(tc, test_frames_pad_to);
  tcase_add_test(tc, test_feature_shape_errors);
  tcase_add_test(tc, test_string_tensors);
  tcase_add_test(tc, test_store_strings);
  tcase_add_test(tc, test_batch_to_graph_keeps_strings_on_host);
  suite_add_tcase(su, tc);
  return lv_test_run(su);
}
