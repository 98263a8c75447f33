/* Tests for src/io: tensor bundles (TensorFlow-written checkpoints, round trips of every
 * dtype, empty, large and many tensors, corruption of every byte), the LevelDB table
 * layer, the `checkpoint` state file and the IDX/.npy dataset readers. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check_util.h"
#include "base/crc32c.h"
#include "base/file.h"
#include "base/rng.h"
#include "io/bundle.h"
#include "io/ckpt_state.h"
#include "io/dataset_files.h"
#include "io/leveldb_table.h"
#include "tensor_bundle.pb-c.h"

static char g_tmp[256];

static void make_tmp(void) {
  snprintf(g_tmp, sizeof g_tmp, "/tmp/check_bundle.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_tmp));
}

static void rm_tmp(void) {
  DIR *d = opendir(g_tmp);
  if (!d) return;
  struct dirent *e;
  char p[600];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", g_tmp, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(g_tmp);
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static const char *testdata(void) {
  const char *t = getenv("LV_TESTDATA");
  return t && *t ? t : "tests/data";
}

#define OK(expr)                                                                  \
  do {                                                                            \
    lv_status s_ = (expr);                                                        \
    ck_assert_msg(s_ == NULL, "%s failed: %s", #expr, lv_status_msg(s_));         \
  } while (0)

/* ---------------- TensorFlow-written checkpoints ---------------- */

typedef struct {
  const char *name;
  float value;
} scalar;

static void check_tf_ckpt(const char *dir, const scalar *want, int n) {
  char prefix[1024];
  snprintf(prefix, sizeof prefix, "%s/tf_checkpoints/%s/variables", testdata(), dir);
  lv_bundle_reader *r;
  OK(lv_bundle_reader_open(prefix, &r));
  ck_assert_int_eq(lv_bundle_reader_count(r), n);
  for (int i = 0; i < n; i++) {
    const lv_bundle_entry *e = lv_bundle_reader_entry(r, i);
    ck_assert_str_eq(e->name, want[i].name);
    ck_assert_int_eq(e->dtype, LV_F32);
    ck_assert_int_eq(e->shape.rank, 0);
    ck_assert_uint_eq(e->size, 4);
    ck_assert_ptr_eq(lv_bundle_reader_find(r, want[i].name), e);
    float v = -1;
    OK(lv_bundle_reader_read(r, e, &v, sizeof v));
    ck_assert_msg(v == want[i].value, "%s/%s = %g, want %g", dir, e->name, v, want[i].value);
  }
  ck_assert_ptr_null(lv_bundle_reader_find(r, "nope"));
  lv_bundle_reader_close(r);
}

START_TEST(tf_half_plus_two) {
  scalar w[] = {{"a", 0.5f}, {"a2", 0.5f}, {"b", 2.0f}, {"c", 3.0f}, {"c2", 3.0f}};
  check_tf_ckpt("saved_model_half_plus_two_cpu", w, 5);
}
END_TEST

START_TEST(tf_half_plus_three) {
  scalar w[] = {{"a", 0.5f}, {"b", 3.0f}, {"c", 3.0f}};
  check_tf_ckpt("saved_model_half_plus_three", w, 3);
}
END_TEST

START_TEST(tf_counter) {
  scalar w[] = {{"counter", 0.0f}};
  check_tf_ckpt("saved_model_counter", w, 1);
}
END_TEST

/* Our index for the same tensors matches TensorFlow's byte for byte. */
START_TEST(tf_same_bytes) {
  make_tmp();
  char prefix[512], tfp[1024];
  snprintf(prefix, sizeof prefix, "%s/hp3", g_tmp);
  snprintf(tfp, sizeof tfp, "%s/tf_checkpoints/saved_model_half_plus_three/variables", testdata());
  lv_bundle_writer *w;
  OK(lv_bundle_writer_open(prefix, &w));
  float a = 0.5f, b = 3.0f, c = 3.0f;
  lv_shape s0 = lv_shape0();
  OK(lv_bundle_writer_add(w, "a", LV_F32, &s0, &a));
  OK(lv_bundle_writer_add(w, "b", LV_F32, &s0, &b));
  OK(lv_bundle_writer_add(w, "c", LV_F32, &s0, &c));
  OK(lv_bundle_writer_finish(w));
  const char *ext[] = {".index", ".data-00000-of-00001"};
  for (int i = 0; i < 2; i++) {
    char p1[600], p2[1100];
    snprintf(p1, sizeof p1, "%s%s", prefix, ext[i]);
    snprintf(p2, sizeof p2, "%s%s", tfp, ext[i]);
    char *d1, *d2;
    size_t n1, n2;
    OK(lv_file_read_all(p1, &d1, &n1));
    OK(lv_file_read_all(p2, &d2, &n2));
    ck_assert_uint_eq(n1, n2);
    ck_assert_msg(memcmp(d1, d2, n1) == 0, "%s differs from TensorFlow's", ext[i]);
    free(d1);
    free(d2);
  }
  rm_tmp();
}
END_TEST

/* ---------------- round trips ---------------- */

static void fill_random(void *p, size_t n, uint64_t seed) {
  lv_rng r;
  lv_rng_init(&r, seed, 0);
  uint8_t *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)lv_rng_u32(&r);
}

START_TEST(roundtrip_all_dtypes) {
  make_tmp();
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/sub/dir/ckpt-00000001", g_tmp);
  lv_bundle_writer *w;
  OK(lv_bundle_writer_open(prefix, &w));
  lv_shape shapes[] = {lv_shape0(), lv_shape1(7), lv_shape2(3, 5), lv_shape4(2, 1, 3, 2),
                       lv_shape1(0), lv_shape3(4, 0, 2)};
  const int nshapes = (int)LV_ARRAY_LEN(shapes);
  void *bufs[LV_DTYPE_COUNT][8] = {{0}};
  /* Added in reverse order: the writer sorts. */
  for (int t = LV_DTYPE_COUNT - 1; t >= 0; t--) {
    if (t == LV_STRING) continue;
    for (int k = 0; k < nshapes; k++) {
      size_t n = (size_t)lv_shape_numel(&shapes[k]) * lv_dtype_size((lv_dtype)t);
      bufs[t][k] = malloc(n + 1);
      fill_random(bufs[t][k], n, (uint64_t)(t * 100 + k));
      if (t == LV_BOOL)
        for (size_t i = 0; i < n; i++) ((uint8_t *)bufs[t][k])[i] &= 1;
      char name[64];
      snprintf(name, sizeof name, "%s/v%d", lv_dtype_names[t], k);
      OK(lv_bundle_writer_add(w, name, (lv_dtype)t, &shapes[k], n ? bufs[t][k] : NULL));
    }
  }
  /* Strings: empty, with NUL bytes, longer than 127 bytes (two-byte varint length). */
  char big[300];
  memset(big, 'x', sizeof big);
  const char *strs[] = {"", "hello", "a\0b", big};
  size_t lens[] = {0, 5, 3, sizeof big};
  lv_shape s22 = lv_shape2(2, 2), s0 = lv_shape1(0), sc = lv_shape0();
  OK(lv_bundle_writer_add_strings(w, "str/m", &s22, strs, lens));
  OK(lv_bundle_writer_add_strings(w, "str/empty", &s0, NULL, NULL));
  OK(lv_bundle_writer_add_strings(w, "str/scalar", &sc, &strs[1], &lens[1]));
  OK(lv_bundle_writer_finish(w));
  snprintf(prefix + strlen(prefix) - strlen("ckpt-00000001"), 32, "%s", "");
  ck_assert_int_eq(count_files(prefix), 2); /* no temporaries left */
  snprintf(prefix, sizeof prefix, "%s/sub/dir/ckpt-00000001", g_tmp);

  lv_bundle_reader *r;
  OK(lv_bundle_reader_open(prefix, &r));
  ck_assert_int_eq(lv_bundle_reader_count(r), (LV_DTYPE_COUNT - 1) * nshapes + 3);
  for (int i = 1; i < lv_bundle_reader_count(r); i++)
    ck_assert_int_lt(strcmp(lv_bundle_reader_entry(r, i - 1)->name, lv_bundle_reader_entry(r, i)->name), 0);
  for (int t = 0; t < LV_DTYPE_COUNT; t++) {
    if (t == LV_STRING) continue;
    for (int k = 0; k < nshapes; k++) {
      char name[64];
      snprintf(name, sizeof name, "%s/v%d", lv_dtype_names[t], k);
      const lv_bundle_entry *e = lv_bundle_reader_find(r, name);
      ck_assert_ptr_nonnull(e);
      ck_assert_int_eq(e->dtype, t);
      ck_assert(lv_shape_eq(&e->shape, &shapes[k]));
      size_t n = (size_t)lv_shape_numel(&shapes[k]) * lv_dtype_size((lv_dtype)t);
      ck_assert_uint_eq(e->size, n);
      void *got = malloc(n + 1);
      OK(lv_bundle_reader_read(r, e, got, n));
      ck_assert_msg(memcmp(got, bufs[t][k], n) == 0, "%s differs", name);
      lv_status s = lv_bundle_reader_read(r, e, got, n + 1);
      ck_assert_int_eq(lv_status_code(s), LV_ERR_INVALID);
      lv_status_free(s);
      free(got);
      free(bufs[t][k]);
    }
  }
  const lv_bundle_entry *e = lv_bundle_reader_find(r, "str/m");
  ck_assert_ptr_nonnull(e);
  ck_assert_int_eq(e->dtype, LV_STRING);
  char **gs;
  size_t *gl;
  OK(lv_bundle_reader_read_strings(r, e, &gs, &gl));
  for (int i = 0; i < 4; i++) {
    ck_assert_uint_eq(gl[i], lens[i]);
    ck_assert(memcmp(gs[i], strs[i], lens[i]) == 0);
  }
  lv_bundle_strings_free(gs, gl, 4);
  e = lv_bundle_reader_find(r, "str/empty");
  OK(lv_bundle_reader_read_strings(r, e, &gs, &gl));
  lv_bundle_strings_free(gs, gl, 0);
  e = lv_bundle_reader_find(r, "str/scalar");
  OK(lv_bundle_reader_read_strings(r, e, &gs, &gl));
  ck_assert_str_eq(gs[0], "hello");
  lv_bundle_strings_free(gs, gl, 1);
  char dummy[8];
  lv_status s = lv_bundle_reader_read(r, e, dummy, sizeof dummy);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_INVALID);
  lv_status_free(s);
  lv_bundle_reader_close(r);
  rm_tmp();
  char cleanup[600];
  snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", g_tmp);
  ck_assert_int_eq(system(cleanup), 0);
}
END_TEST

START_TEST(roundtrip_large) {
  make_tmp();
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/big", g_tmp);
  const int64_t n = (int64_t)17 * 1024 * 1024 + 3; /* 68 MiB of float32 */
  float *x = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) x[i] = (float)i * 0.5f;
  lv_bundle_writer *w;
  OK(lv_bundle_writer_open(prefix, &w));
  lv_shape s = lv_shape2(n, 1);
  float small[3] = {1, 2, 3};
  lv_shape s3 = lv_shape1(3);
  OK(lv_bundle_writer_add(w, "small_before", LV_F32, &s3, small));
  OK(lv_bundle_writer_add(w, "big", LV_F32, &s, x));
  OK(lv_bundle_writer_add(w, "small_after", LV_F32, &s3, small));
  OK(lv_bundle_writer_finish(w));
  memset(x, 0, (size_t)n * 4);
  lv_bundle_reader *r;
  OK(lv_bundle_reader_open(prefix, &r));
  const lv_bundle_entry *e = lv_bundle_reader_find(r, "big");
  ck_assert_uint_eq(e->size, (uint64_t)n * 4);
  OK(lv_bundle_reader_read(r, e, x, (size_t)n * 4));
  for (int64_t i = 0; i < n; i++)
    if (x[i] != (float)i * 0.5f) ck_abort_msg("big[%lld] = %g", (long long)i, x[i]);
  float got[3];
  OK(lv_bundle_reader_read(r, lv_bundle_reader_find(r, "small_after"), got, sizeof got));
  ck_assert(memcmp(got, small, sizeof got) == 0);
  lv_bundle_reader_close(r);
  free(x);
  rm_tmp();
}
END_TEST

START_TEST(roundtrip_many) {
  make_tmp();
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/many", g_tmp);
  lv_bundle_writer *w;
  OK(lv_bundle_writer_open(prefix, &w));
  const int n = 10000;
  lv_shape s = lv_shape1(2);
  for (int i = n - 1; i >= 0; i--) {
    char name[64];
    snprintf(name, sizeof name, "layer%d/w/var", i * 7919 % n);
    int32_t v[2] = {i, -i};
    OK(lv_bundle_writer_add(w, name, LV_I32, &s, v));
  }
  lv_status st = lv_bundle_writer_add(w, "layer5/w/var", LV_I32, &s, (int32_t[]){0, 0});
  ck_assert_int_eq(lv_status_code(st), LV_ERR_INVALID);
  lv_status_free(st);
  st = lv_bundle_writer_add(w, "", LV_I32, &s, (int32_t[]){0, 0});
  ck_assert_int_eq(lv_status_code(st), LV_ERR_INVALID);
  lv_status_free(st);
  OK(lv_bundle_writer_finish(w));
  lv_bundle_reader *r;
  OK(lv_bundle_reader_open(prefix, &r));
  ck_assert_int_eq(lv_bundle_reader_count(r), n);
  for (int i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "layer%d/w/var", i * 7919 % n);
    const lv_bundle_entry *e = lv_bundle_reader_find(r, name);
    ck_assert_ptr_nonnull(e);
    int32_t v[2];
    OK(lv_bundle_reader_read(r, e, v, sizeof v));
    ck_assert_int_eq(v[0], i);
    ck_assert_int_eq(v[1], -i);
  }
  lv_bundle_reader_close(r);
  rm_tmp();
}
END_TEST

START_TEST(writer_abort_leaves_nothing) {
  make_tmp();
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/aborted", g_tmp);
  lv_bundle_writer *w;
  OK(lv_bundle_writer_open(prefix, &w));
  float v = 1;
  lv_shape s0 = lv_shape0();
  OK(lv_bundle_writer_add(w, "v", LV_F32, &s0, &v));
  lv_bundle_writer_abort(w);
  ck_assert_int_eq(count_files(g_tmp), 0);
  lv_bundle_reader *r;
  lv_status s = lv_bundle_reader_open(prefix, &r);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_NOT_FOUND);
  lv_status_free(s);
  rm_tmp();
}
END_TEST

/* Writing a prefix that exists replaces both files (the old index is removed before the
 * new data is published, the new index comes last) and leaves no temporary file. */
START_TEST(writer_replaces_prefix) {
  make_tmp();
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/again", g_tmp);
  for (int round = 0; round < 2; round++) {
    float v[8];
    for (int i = 0; i < 8; i++) v[i] = (float)(round * 100 + i);
    lv_shape sh = lv_shape1(round ? 8 : 3);
    lv_bundle_writer *w;
    OK(lv_bundle_writer_open(prefix, &w));
    OK(lv_bundle_writer_add(w, round ? "b" : "a", LV_F32, &sh, v));
    OK(lv_bundle_writer_finish(w));
  }
  ck_assert_int_eq(count_files(g_tmp), 2);
  lv_bundle_reader *r;
  OK(lv_bundle_reader_open(prefix, &r));
  ck_assert_int_eq(lv_bundle_reader_count(r), 1);
  const lv_bundle_entry *e = lv_bundle_reader_find(r, "b");
  ck_assert_ptr_nonnull(e);
  float got[8];
  OK(lv_bundle_reader_read(r, e, got, sizeof got));
  ck_assert(got[0] == 100.0f && got[7] == 107.0f);
  lv_bundle_reader_close(r);
  rm_tmp();
}
END_TEST

/* ---------------- hand-built indexes (as other writers may produce) ---------------- */

static void pack_add(lv_table_builder *b, const char *key, const ProtobufCMessage *m) {
  uint8_t buf[512];
  size_t n = protobuf_c_message_pack(m, buf);
  lv_table_builder_add(b, key, strlen(key), buf, n);
}

/* Writes PREFIX.index with a header (num_shards) unless header < 0, then one entry "t". */
static void write_index(const char *prefix, int num_shards, Tensorflow__BundleEntryProto *e) {
  lv_table_builder *b = lv_table_builder_new(4096);
  Tensorflow__VersionDef ver = TENSORFLOW__VERSION_DEF__INIT;
  ver.producer = 1;
  Tensorflow__BundleHeaderProto h = TENSORFLOW__BUNDLE_HEADER_PROTO__INIT;
  h.num_shards = num_shards;
  h.version = &ver;
  if (num_shards >= 0) pack_add(b, "", &h.base);
  pack_add(b, "t", &e->base);
  const uint8_t *d;
  size_t n;
  lv_table_builder_finish(b, &d, &n);
  char path[700];
  snprintf(path, sizeof path, "%s.index", prefix);
  OK(lv_file_write_atomic(path, d, n));
  lv_table_builder_free(b);
}

static lv_status open_only(const char *prefix) {
  lv_bundle_reader *r;
  lv_status s = lv_bundle_reader_open(prefix, &r);
  if (!s) lv_bundle_reader_close(r);
  return s;
}

START_TEST(handmade_indexes) {
  make_tmp();
  char prefix[600], path[700];
  snprintf(prefix, sizeof prefix, "%s/h", g_tmp);
  /* Two shards: the tensor lives in the second one. */
  float v[2] = {1.5f, -2.0f};
  snprintf(path, sizeof path, "%s.data-00000-of-00002", prefix);
  OK(lv_file_write_atomic(path, "", 0));
  snprintf(path, sizeof path, "%s.data-00001-of-00002", prefix);
  uint8_t shard1[12] = {9, 9, 9, 9};
  memcpy(shard1 + 4, v, 8);
  OK(lv_file_write_atomic(path, shard1, sizeof shard1));
  Tensorflow__TensorShapeProto__Dim dim = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
  dim.size = 2;
  Tensorflow__TensorShapeProto__Dim *dims[] = {&dim};
  Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
  shape.n_dim = 1;
  shape.dim = dims;
  Tensorflow__BundleEntryProto e = TENSORFLOW__BUNDLE_ENTRY_PROTO__INIT;
  e.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
  e.shape = &shape;
  e.shard_id = 1;
  e.offset = 4;
  e.size = 8;
  e.crc32c = lv_crc32c_mask(lv_crc32c(v, 8));
  write_index(prefix, 2, &e);
  lv_bundle_reader *r;
  OK(lv_bundle_reader_open(prefix, &r));
  float got[2];
  OK(lv_bundle_reader_read(r, lv_bundle_reader_find(r, "t"), got, sizeof got));
  ck_assert(got[0] == 1.5f && got[1] == -2.0f);
  lv_bundle_reader_close(r);

  struct {
    int shards;
    int64_t size, offset;
    int dtype;
    bool slices;
    lv_code code;
    const char *msg;
  } cases[] = {
      {2, 8, 4, 1, true, LV_ERR_INVALID, "partitioned"},
      {2, 12, 4, 1, false, LV_ERR_CORRUPT, "need 8"},
      {2, 8, 8, 1, false, LV_ERR_CORRUPT, "beyond the end of"},
      {2, 8, -1, 1, false, LV_ERR_CORRUPT, "negative offset"},
      {2, 8, 4, 8 /* DT_COMPLEX64 */, false, LV_ERR_INVALID, "unsupported dtype 8"},
      {1, 8, 4, 1, false, LV_ERR_CORRUPT, "shard_id 1 outside 0..0"},
      {-1, 8, 4, 1, false, LV_ERR_CORRUPT, "not the bundle header"},
      {0, 8, 4, 1, false, LV_ERR_CORRUPT, "num_shards 0"},
      {3, 8, 4, 1, false, LV_ERR_NOT_FOUND, "h.data-00002-of-00003"},
  };
  Tensorflow__TensorSliceProto slice = TENSORFLOW__TENSOR_SLICE_PROTO__INIT;
  Tensorflow__TensorSliceProto *slices[] = {&slice};
  for (size_t i = 0; i < LV_ARRAY_LEN(cases); i++) {
    e.size = cases[i].size;
    e.offset = cases[i].offset;
    e.dtype = (Tensorflow__DataType)cases[i].dtype;
    e.n_slices = cases[i].slices ? 1 : 0;
    e.slices = slices;
    if (cases[i].shards == 3) {
      snprintf(path, sizeof path, "%s.data-00000-of-00003", prefix);
      OK(lv_file_write_atomic(path, shard1, sizeof shard1));
      snprintf(path, sizeof path, "%s.data-00001-of-00003", prefix);
      OK(lv_file_write_atomic(path, shard1, sizeof shard1));
    }
    write_index(prefix, cases[i].shards, &e);
    lv_status s = open_only(prefix);
    ck_assert_msg(lv_status_code(s) == cases[i].code, "case %zu: %s", i, lv_status_msg(s));
    ck_assert_msg(strstr(lv_status_msg(s), cases[i].msg) != NULL, "case %zu: %s", i,
                  lv_status_msg(s));
    ck_assert_msg(strstr(lv_status_msg(s), "/h.") != NULL, "case %zu names no file: %s", i,
                  lv_status_msg(s));
    lv_status_free(s);
  }
  lv_bundle_writer *w;
  lv_status s = lv_bundle_writer_open("/proc/no/such/dir/x", &w);
  ck_assert_ptr_nonnull(s);
  lv_status_free(s);
  char cleanup[700];
  snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", g_tmp);
  ck_assert_int_eq(system(cleanup), 0);
}
END_TEST

/* ---------------- LevelDB table ---------------- */

typedef struct {
  int n;
  char last[64];
} table_seen;

static lv_status table_visit(void *ctx, const uint8_t *key, size_t klen, const uint8_t *val,
                             size_t vlen, uint64_t where) {
  (void)where;
  table_seen *t = ctx;
  char want[64];
  snprintf(want, sizeof want, "key%06d", t->n);
  if (klen != strlen(want) || memcmp(key, want, klen) != 0 || vlen != (size_t)(t->n % 50) ||
      (vlen && val[0] != (uint8_t)t->n))
    return lv_status_make(LV_ERR_INTERNAL, "entry %d wrong", t->n);
  t->n++;
  return NULL;
}

START_TEST(table_multi_block) {
  /* Compressible values (snappy blocks) and random ones (raw blocks), small and large
   * blocks. */
  for (int pass = 0; pass < 4; pass++) {
    int bs = pass & 1 ? 1 << 18 : 64;
    lv_table_builder *b = lv_table_builder_new((size_t)bs);
    uint8_t val[64];
    lv_rng rng;
    lv_rng_init(&rng, 3, (uint64_t)pass);
    int raw_blocks = 0;
    for (int i = 0; i < 3000; i++) {
      char key[64];
      snprintf(key, sizeof key, "key%06d", i);
      memset(val, (uint8_t)i, sizeof val);
      if (pass >= 2)
        for (size_t j = 1; j < sizeof val; j++) val[j] = (uint8_t)lv_rng_u32(&rng);
      lv_table_builder_add(b, key, strlen(key), val, (size_t)(i % 50));
    }
    const uint8_t *data;
    size_t len;
    lv_table_builder_finish(b, &data, &len);
    table_seen t = {0};
    OK(lv_table_scan("mem", data, len, table_visit, &t));
    ck_assert_int_eq(t.n, 3000);
    /* The last data block ends just before the meta-index block: its trailer's type byte
     * says whether it was stored raw (0) or snappy (1). */
    uint64_t moff;
    ck_assert_uint_gt(lv_varint64_decode(data + len - LV_TABLE_FOOTER_SIZE, 20, &moff), 0);
    raw_blocks = data[moff - LV_TABLE_BLOCK_TRAILER_SIZE] == 0;
    if (pass >= 2) ck_assert_msg(raw_blocks, "random values should give raw blocks");
    else ck_assert_msg(!raw_blocks, "repetitive values should give snappy blocks");
    lv_table_builder_free(b);
  }
}
END_TEST

START_TEST(varints) {
  uint64_t vals[] = {0, 1, 127, 128, 300, (1ull << 32) - 1, 1ull << 35, UINT64_MAX};
  for (size_t i = 0; i < LV_ARRAY_LEN(vals); i++) {
    uint8_t b[10];
    size_t k = lv_varint64_encode(b, vals[i]);
    uint64_t v;
    ck_assert_uint_eq(lv_varint64_decode(b, k, &v), k);
    ck_assert(v == vals[i]);
    ck_assert_uint_eq(lv_varint64_decode(b, k - 1, &v), 0);
  }
  uint8_t over[11];
  memset(over, 0xff, sizeof over);
  uint64_t v;
  ck_assert_uint_eq(lv_varint64_decode(over, sizeof over, &v), 0);
}
END_TEST

/* ---------------- corruption ---------------- */

static char g_prefix[600];
static float g_w[64];
static int32_t g_step = 1234;

static void write_victim(void) {
  snprintf(g_prefix, sizeof g_prefix, "%s/victim", g_tmp);
  lv_bundle_writer *w;
  OK(lv_bundle_writer_open(g_prefix, &w));
  for (int i = 0; i < 64; i++) g_w[i] = (float)i - 10.25f;
  lv_shape s = lv_shape2(8, 8), s0 = lv_shape0(), s2 = lv_shape1(2);
  OK(lv_bundle_writer_add(w, "model/w/var", LV_F32, &s, g_w));
  OK(lv_bundle_writer_add(w, "global_step", LV_I32, &s0, &g_step));
  const char *strs[] = {"alpha", "beta"};
  size_t lens[] = {5, 4};
  OK(lv_bundle_writer_add_strings(w, "names", &s2, strs, lens));
  OK(lv_bundle_writer_finish(w));
}

/* Opens and reads everything; returns 0 if all opened and read back exactly, 1 if an
 * error came back (with a message naming a file). Wrong values fail the test. */
static int read_victim(void) {
  lv_bundle_reader *r;
  lv_status s = lv_bundle_reader_open(g_prefix, &r);
  int failed = 0;
  if (s) {
    ck_assert_msg(strstr(lv_status_msg(s), "victim") != NULL, "error names no file: %s",
                  lv_status_msg(s));
    lv_status_free(s);
    return 1;
  }
  float w[64];
  int32_t step;
  const lv_bundle_entry *e = lv_bundle_reader_find(r, "model/w/var");
  if (!e || (s = lv_bundle_reader_read(r, e, w, sizeof w))) failed = 1;
  else ck_assert_msg(memcmp(w, g_w, sizeof w) == 0, "wrong values read without an error");
  lv_status_free(s);
  s = NULL;
  e = lv_bundle_reader_find(r, "global_step");
  if (!e || (s = lv_bundle_reader_read(r, e, &step, sizeof step))) failed = 1;
  else ck_assert_int_eq(step, g_step);
  lv_status_free(s);
  s = NULL;
  e = lv_bundle_reader_find(r, "names");
  char **strs;
  size_t *lens;
  if (!e || (s = lv_bundle_reader_read_strings(r, e, &strs, &lens))) failed = 1;
  else {
    ck_assert_str_eq(strs[0], "alpha");
    ck_assert_str_eq(strs[1], "beta");
    lv_bundle_strings_free(strs, lens, 2);
  }
  if (s) ck_assert_msg(strstr(lv_status_msg(s), "victim") != NULL, "error names no file: %s",
                       lv_status_msg(s));
  lv_status_free(s);
  lv_bundle_reader_close(r);
  return failed;
}

static void corrupt_file(const char *ext, bool expect_all_detected) {
  make_tmp();
  write_victim();
  char path[700];
  snprintf(path, sizeof path, "%s%s", g_prefix, ext);
  char *orig;
  size_t n;
  OK(lv_file_read_all(path, &orig, &n));
  ck_assert_int_eq(read_victim(), 0);
  int detected = 0, undetected = 0;
  for (size_t i = 0; i < n; i++) {
    for (int bit = 0; bit < 8; bit += 3) {
      orig[i] ^= (char)(1 << bit);
      OK(lv_file_write_atomic(path, orig, n));
      if (read_victim()) detected++;
      else undetected++;
      orig[i] ^= (char)(1 << bit);
    }
  }
  for (size_t len = 0; len < n; len++) {
    OK(lv_file_write_atomic(path, orig, len));
    ck_assert_msg(read_victim() == 1, "truncation of %s to %zu bytes not detected", ext, len);
  }
  if (expect_all_detected) ck_assert_int_eq(undetected, 0);
  ck_assert_int_gt(detected, 0);
  free(orig);
  rm_tmp();
}

START_TEST(corrupt_index) { corrupt_file(".index", false); }
END_TEST

START_TEST(corrupt_data) { corrupt_file(".data-00000-of-00001", true); }
END_TEST

START_TEST(garbage_index) {
  make_tmp();
  write_victim();
  char path[700];
  snprintf(path, sizeof path, "%s.index", g_prefix);
  lv_rng rng;
  lv_rng_init(&rng, 7, 0);
  uint8_t buf[512];
  for (int iter = 0; iter < 200; iter++) {
    size_t n = lv_rng_below(&rng, sizeof buf);
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)lv_rng_u32(&rng);
    /* Half of them with a valid magic, to get past the first check. */
    if (iter % 2 && n >= 48)
      for (int i = 0; i < 8; i++) buf[n - 8 + i] = (uint8_t)(LV_TABLE_MAGIC >> (8 * i));
    OK(lv_file_write_atomic(path, buf, n));
    ck_assert_int_eq(read_victim(), 1);
  }
  rm_tmp();
}
END_TEST

/* ---------------- checkpoint state ---------------- */

START_TEST(state_roundtrip) {
  make_tmp();
  bool exists = true;
  lv_ckpt_state st;
  OK(lv_ckpt_state_read(g_tmp, &st, &exists));
  ck_assert(!exists);
  char *paths[] = {"ckpt-00000100", "ckpt-00000200", "we\"ird\\name\n"};
  double ts[] = {1700000000.25, 1700000100.125, 0.1};
  lv_ckpt_state w = {"ckpt-00000200", 3, paths, ts, 1699999999.5};
  OK(lv_ckpt_state_write(g_tmp, &w));
  OK(lv_ckpt_state_read(g_tmp, &st, &exists));
  ck_assert(exists);
  ck_assert_str_eq(st.model_checkpoint_path, "ckpt-00000200");
  ck_assert_int_eq(st.num_paths, 3);
  for (int i = 0; i < 3; i++) {
    ck_assert_str_eq(st.all_model_checkpoint_paths[i], paths[i]);
    ck_assert(st.all_model_checkpoint_timestamps[i] == ts[i]);
  }
  ck_assert(st.last_preserved_timestamp == 1699999999.5);
  lv_ckpt_state_free(&st);
  ck_assert_int_eq(count_files(g_tmp), 1);
  /* latest: NULL until ckpt-00000200.index exists, then DIR/ckpt-00000200. */
  char *latest = (char *)"unset";
  OK(lv_ckpt_state_latest(g_tmp, &latest));
  ck_assert_ptr_null(latest);
  char prefix[600];
  snprintf(prefix, sizeof prefix, "%s/ckpt-00000200", g_tmp);
  lv_bundle_writer *bw;
  OK(lv_bundle_writer_open(prefix, &bw));
  OK(lv_bundle_writer_finish(bw));
  OK(lv_ckpt_state_latest(g_tmp, &latest));
  ck_assert_str_eq(latest, prefix);
  free(latest);
  lv_bundle_reader *r;
  OK(lv_bundle_reader_open(prefix, &r)); /* an empty bundle is valid */
  ck_assert_int_eq(lv_bundle_reader_count(r), 0);
  lv_bundle_reader_close(r);
  rm_tmp();
}
END_TEST

START_TEST(state_parse_tf_file) {
  make_tmp();
  char path[600];
  snprintf(path, sizeof path, "%s/checkpoint", g_tmp);
  const char *text =
      "# written by TensorFlow\n"
      "model_checkpoint_path: \"/tmp/x/model.ckpt-2\"\n"
      "all_model_checkpoint_paths: '/tmp/x/model.ckpt-1'\n"
      "all_model_checkpoint_paths: \"/tmp/x/model.ckpt-\\062\"\n"
      "all_model_checkpoint_timestamps: 1.5e9\n";
  OK(lv_file_write_atomic(path, text, strlen(text)));
  lv_ckpt_state st;
  bool exists;
  OK(lv_ckpt_state_read(g_tmp, &st, &exists));
  ck_assert_str_eq(st.model_checkpoint_path, "/tmp/x/model.ckpt-2");
  ck_assert_int_eq(st.num_paths, 2);
  ck_assert_str_eq(st.all_model_checkpoint_paths[1], "/tmp/x/model.ckpt-2");
  ck_assert(st.all_model_checkpoint_timestamps[0] == 1.5e9);
  ck_assert(st.all_model_checkpoint_timestamps[1] == 0.0);
  lv_ckpt_state_free(&st);
  const char *bad[] = {"model_checkpoint_path: \"unterminated\n",
                       "model_checkpoint_path \"x\"\n",
                       "\n\nmodel_checkpoint_pth: \"x\"\n",
                       "all_model_checkpoint_timestamps: abc\n"};
  for (size_t i = 0; i < LV_ARRAY_LEN(bad); i++) {
    OK(lv_file_write_atomic(path, bad[i], strlen(bad[i])));
    lv_status s = lv_ckpt_state_read(g_tmp, &st, &exists);
    ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
    ck_assert_msg(strstr(lv_status_msg(s), "checkpoint:") != NULL, "%s", lv_status_msg(s));
    if (i == 2) ck_assert_ptr_nonnull(strstr(lv_status_msg(s), "checkpoint:3:"));
    lv_status_free(s);
  }
  rm_tmp();
}
END_TEST

/* ---------------- dataset files ---------------- */

static void write_gz(const char *path, const void *data, size_t n) {
  gzFile f = gzopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(gzwrite(f, data, (unsigned)n), (int)n);
  ck_assert_int_eq(gzclose(f), Z_OK);
}

START_TEST(idx_files) {
  make_tmp();
  uint8_t img[4 + 12 + 2 * 3 * 4] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4};
  for (int i = 0; i < 24; i++) img[16 + i] = (uint8_t)i;
  char path[600];
  snprintf(path, sizeof path, "%s/imgs.gz", g_tmp);
  write_gz(path, img, sizeof img);
  lv_ndarray a;
  OK(lv_idx_read(path, &a));
  ck_assert_int_eq(a.dtype, LV_U8);
  lv_shape want = lv_shape3(2, 3, 4);
  ck_assert(lv_shape_eq(&a.shape, &want));
  ck_assert_uint_eq(a.nbytes, 24);
  ck_assert_int_eq(((uint8_t *)a.data)[23], 23);
  lv_ndarray_free(&a);
  /* Plain (not gzip) IDX, int32 big-endian. */
  uint8_t i32[4 + 4 + 8] = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe};
  snprintf(path, sizeof path, "%s/ints", g_tmp);
  OK(lv_file_write_atomic(path, i32, sizeof i32));
  OK(lv_idx_read(path, &a));
  ck_assert_int_eq(a.dtype, LV_I32);
  ck_assert_int_eq(((int32_t *)a.data)[0], 258);
  ck_assert_int_eq(((int32_t *)a.data)[1], -2);
  lv_ndarray_free(&a);
  /* Bad magic, truncated data, trailing data, missing file. */
  snprintf(path, sizeof path, "%s/bad.gz", g_tmp);
  uint8_t bad[sizeof img + 1];
  memcpy(bad, img, sizeof img);
  bad[0] = 1;
  write_gz(path, bad, sizeof img);
  lv_status s = lv_idx_read(path, &a);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
  ck_assert_ptr_nonnull(strstr(lv_status_msg(s), "magic"));
  lv_status_free(s);
  write_gz(path, img, sizeof img - 1);
  s = lv_idx_read(path, &a);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
  lv_status_free(s);
  memcpy(bad, img, sizeof img);
  write_gz(path, bad, sizeof bad);
  s = lv_idx_read(path, &a);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
  ck_assert_ptr_nonnull(strstr(lv_status_msg(s), "trailing"));
  lv_status_free(s);
  /* Dimensions whose byte count wraps 64 bits (65536 * 65536 * 4 * 2^30 = 2^64: it read as 0
   * bytes and a shape of 2^64 elements). */
  uint8_t wrap[4 + 16] = {0, 0, 8, 4, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 4, 0x40, 0, 0, 0};
  write_gz(path, wrap, sizeof wrap);
  s = lv_idx_read(path, &a);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
  ck_assert_ptr_nonnull(strstr(lv_status_msg(s), "dimensions describe more than"));
  lv_status_free(s);
  snprintf(path, sizeof path, "%s/missing.gz", g_tmp);
  s = lv_idx_read(path, &a);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_NOT_FOUND);
  lv_status_free(s);
  rm_tmp();
}
END_TEST

START_TEST(npy_parse) {
  char npy[256];
  const char *hdr = "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }";
  size_t hl = 118; /* padded so that 10 + hl is a multiple of 64 */
  memcpy(npy, "\x93NUMPY\x01\x00", 8);
  npy[8] = (char)hl;
  npy[9] = 0;
  memset(npy + 10, ' ', hl);
  memcpy(npy + 10, hdr, strlen(hdr));
  npy[10 + hl - 1] = '\n';
  int16_t vals[6] = {1, -2, 3, -4, 5, -6};
  memcpy(npy + 10 + hl, vals, sizeof vals);
  lv_ndarray a;
  OK(lv_npy_parse("t.npy", npy, 10 + hl + sizeof vals, &a));
  ck_assert_int_eq(a.dtype, LV_I16);
  lv_shape want = lv_shape2(2, 3);
  ck_assert(lv_shape_eq(&a.shape, &want));
  ck_assert(memcmp(a.data, vals, sizeof vals) == 0);
  lv_ndarray_free(&a);
  lv_status s = lv_npy_parse("t.npy", npy, 10 + hl + sizeof vals - 1, &a);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
  lv_status_free(s);
  memcpy(npy + 10 + strlen("{'descr': '"), ">i2", 3);
  s = lv_npy_parse("t.npy", npy, 10 + hl + sizeof vals, &a);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_INVALID);
  lv_status_free(s);
}
END_TEST

static Suite *bundle_suite(void) {
  Suite *s = suite_create("bundle");
  TCase *tf = tcase_create("tensorflow");
  tcase_add_test(tf, tf_half_plus_two);
  tcase_add_test(tf, tf_half_plus_three);
  tcase_add_test(tf, tf_counter);
  tcase_add_test(tf, tf_same_bytes);
  suite_add_tcase(s, tf);
  TCase *rt = tcase_create("roundtrip");
  tcase_set_timeout(rt, 120);
  tcase_add_test(rt, roundtrip_all_dtypes);
  tcase_add_test(rt, roundtrip_large);
  tcase_add_test(rt, roundtrip_many);
  tcase_add_test(rt, writer_abort_leaves_nothing);
  tcase_add_test(rt, writer_replaces_prefix);
  tcase_add_test(rt, handmade_indexes);
  tcase_add_test(rt, table_multi_block);
  tcase_add_test(rt, varints);
  suite_add_tcase(s, rt);
  TCase *cor = tcase_create("corruption");
  tcase_set_timeout(cor, 300);
  tcase_add_test(cor, corrupt_index);
  tcase_add_test(cor, corrupt_data);
  tcase_add_test(cor, garbage_index);
  suite_add_tcase(s, cor);
  TCase *st = tcase_create("state_and_datasets");
  tcase_add_test(st, state_roundtrip);
  tcase_add_test(st, state_parse_tf_file);
  tcase_add_test(st, idx_files);
  tcase_add_test(st, npy_parse);
  suite_add_tcase(s, st);
  return s;
}

int main(void) {
  return lv_test_run(bundle_suite());
}
