/* Record inputs: file patterns, the record yielder (shuffling, sequential passes,
 * sharding, resume, corrupt records), the bucketing batcher and NmtInput. Every test
 * writes its own files under a fresh /tmp directory. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#include "batch_util.h"
#include "check_util.h"
#include "input/batcher.h"
#include "input/input.h"
#include "input/record_yielder.h"
#include "input/stream_input.h"
#include "io/example.h"
#include "io/tfrecord.h"

static char g_dir[256];

static void setup(void) { lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_recin"); }
static void teardown(void) { lv_test_rmtree(g_dir); }

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", g_dir, name); }

/* A TFRecord file `name` of n records "<tag>-<i>". */
static void write_records(const char *name, const char *tag, int n) {
  char path[512];
  path_of(path, sizeof path, name);
  lv_tfrecord_writer *w = NULL;
  EXPECT_OK(lv_tfrecord_writer_open(path, false, &w));
  for (int i = 0; i < n; i++) {
    char rec[64];
    int len = snprintf(rec, sizeof rec, "%s-%d", tag, i);
    EXPECT_OK(lv_tfrecord_writer_write(w, rec, (size_t)len));
  }
  EXPECT_OK(lv_tfrecord_writer_close(w));
}

typedef struct rec_list {
  int n;
  char *r[4096];
} rec_list;

static void rec_list_free(rec_list *l) {
  for (int i = 0; i < l->n; i++) free(l->r[i]);
  l->n = 0;
}

/* Every record of a yielder (which must end). */
static void drain(const lv_record_yielder_opts *o, rec_list *out) {
  lv_record_yielder *y = NULL;
  EXPECT_OK(lv_record_yielder_create(o, &y));
  out->n = 0;
  for (;;) {
    lv_record r;
    bool eof;
    EXPECT_OK(lv_record_yielder_next(y, &r, &eof));
    if (eof) break;
    ck_assert_int_lt(out->n, 4096);
    out->r[out->n++] = strndup((const char *)r.data, r.len);
  }
  lv_record_yielder_destroy(y);
}

static lv_record_yielder_opts opts_for(const char *pattern) {
  return (lv_record_yielder_opts){.file_pattern = pattern, .seed = 301, .buffer_size = 1, .parallelism = 1,
                                  .repeat_count = 1, .sequential = true, .num_replicas = 1};
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static bool same_order(const rec_list *a, const rec_list *b) {
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (strcmp(a->r[i], b->r[i])) return false;
  return true;
}

/* ---- file patterns ---- */

START_TEST(test_pattern_types) {
  char pat[600], path[512];
  /* text: one record per line, '\n' and "\r\n" stripped, the last line may lack '\n' */
  path_of(path, sizeof path, "lines.txt");
  FILE *f = fopen(path, "w");
  fputs("alpha\nbeta\r\n\ngamma", f);
  fclose(f);
  snprintf(pat, sizeof pat, "text:%s", path);
  lv_record_yielder_opts o = opts_for(pat);
  rec_list l;
  drain(&o, &l);
  ck_assert_int_eq(l.n, 4);
  ck_assert_str_eq(l.r[0], "alpha");
  ck_assert_str_eq(l.r[1], "beta");
  ck_assert_str_eq(l.r[2], "");
  ck_assert_str_eq(l.r[3], "gamma");
  rec_list_free(&l);
  /* iota:N */
  o = opts_for("iota:3");
  drain(&o, &l);
  ck_assert_int_eq(l.n, 3);
  ck_assert_str_eq(l.r[0], "0000000000");
  ck_assert_str_eq(l.r[2], "0000000002");
  rec_list_free(&l);
  /* tfrecord_gzip: a TFRecord file gzipped */
  write_records("plain.tfrecord", "g", 5);
  path_of(path, sizeof path, "plain.tfrecord");
  char *data;
  size_t len;
  f = fopen(path, "rb");
  fseek(f, 0, SEEK_END);
  len = (size_t)ftell(f);
  rewind(f);
  data = malloc(len);
  ck_assert_int_eq(fread(data, 1, len, f), len);
  fclose(f);
  path_of(path, sizeof path, "z.tfrecord.gz");
  gzFile gz = gzopen(path, "wb");
  ck_assert_int_eq(gzwrite(gz, data, (unsigned)len), (int)len);
  gzclose(gz);
  free(data);
  snprintf(pat, sizeof pat, "tfrecord_gzip:%s", path);
  o = opts_for(pat);
  drain(&o, &l);
  ck_assert_int_eq(l.n, 5);
  ck_assert_str_eq(l.r[4], "g-4");
  rec_list_free(&l);
  /* no prefix = tfrecord; a path with ':' after a '/' is not a prefix */
  path_of(path, sizeof path, "plain.tfrecord");
  o = opts_for(path);
  drain(&o, &l);
  ck_assert_int_eq(l.n, 5);
  rec_list_free(&l);
  lv_file_list fl;
  EXPECT_ERR(lv_file_pattern_expand("sstable:/x/y", &fl), LV_ERR_INVALID, "unknown record type \"sstable\"",
             "tfrecord, tfrecord_gzip, text, iota");
  EXPECT_ERR(lv_file_pattern_expand("iota:abc", &fl), LV_ERR_INVALID, "iota:N");
}
END_TEST

START_TEST(test_pattern_globs_and_shards) {
  write_records("data-00000-of-00003", "a", 1);
  write_records("data-00001-of-00003", "b", 1);
  write_records("data-00002-of-00003", "c", 1);
  write_records("other-00000-of-00002", "d", 1);
  write_records("x1.rec", "e", 1);
  write_records("x2.rec", "f", 1);
  char pat[1024];
  lv_file_list fl;
  snprintf(pat, sizeof pat, "tfrecord:%s/data@3", g_dir);
  EXPECT_OK(lv_file_pattern_expand(pat, &fl));
  ck_assert_int_eq(fl.type, LV_RECORD_TFRECORD);
  ck_assert_int_eq(fl.n_files, 3);
  ck_assert_ptr_nonnull(strstr(fl.files[2], "data-00002-of-00003"));
  lv_file_list_free(&fl);
  /* an '@' in a directory's name is not a shard count */
  char sub[700];
  snprintf(sub, sizeof sub, "%s/run@2", g_dir);
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  snprintf(pat, sizeof pat, "run@2/data-00000-of-00001");
  write_records(pat, "g", 1);
  snprintf(pat, sizeof pat, "%s/run@2/data@1", g_dir);
  EXPECT_OK(lv_file_pattern_expand(pat, &fl));
  ck_assert_int_eq(fl.n_files, 1);
  ck_assert_ptr_nonnull(strstr(fl.files[0], "run@2/data-00000-of-00001"));
  lv_file_list_free(&fl);
  /* name@* matches every shard count; comma-separated globs keep their order */
  snprintf(pat, sizeof pat, "%s/x*.rec,%s/other@*", g_dir, g_dir);
  EXPECT_OK(lv_file_pattern_expand(pat, &fl));
  ck_assert_int_eq(fl.n_files, 3);
  ck_assert_ptr_nonnull(strstr(fl.files[0], "x1.rec"));
  ck_assert_ptr_nonnull(strstr(fl.files[1], "x2.rec"));
  ck_assert_ptr_nonnull(strstr(fl.files[2], "other-00000-of-00002"));
  lv_file_list_free(&fl);
  /* errors: a glob matching nothing (named, with the expansion), a bad shard count */
  snprintf(pat, sizeof pat, "%s/x*.rec,%s/data@4", g_dir, g_dir);
  EXPECT_ERR(lv_file_pattern_expand(pat, &fl), LV_ERR_NOT_FOUND, "no file matches", "data-?\?\?\?\?-of-00004");
  snprintf(pat, sizeof pat, "%s/nothing*", g_dir);
  EXPECT_ERR(lv_file_pattern_expand(pat, &fl), LV_ERR_NOT_FOUND, "nothing*");
  snprintf(pat, sizeof pat, "%s/data@x", g_dir);
  EXPECT_ERR(lv_file_pattern_expand(pat, &fl), LV_ERR_INVALID, "invalid sharded file pattern");
  snprintf(pat, sizeof pat, "%s/data@100000", g_dir);
  EXPECT_ERR(lv_file_pattern_expand(pat, &fl), LV_ERR_INVALID, "5 digits");
  /* the yielder reports the same at create */
  lv_record_yielder *y = NULL;
  snprintf(pat, sizeof pat, "%s/nothing*", g_dir);
  lv_record_yielder_opts o = opts_for(pat);
  EXPECT_ERR(lv_record_yielder_create(&o, &y), LV_ERR_NOT_FOUND, "nothing*");
}
END_TEST

/* ---- yielder order ---- */

static void write_three_files(void) {
  write_records("s-00000-of-00003", "a", 40);
  write_records("s-00001-of-00003", "b", 25);
  write_records("s-00002-of-00003", "c", 35);
}

START_TEST(test_sequential_pass) {
  write_three_files();
  char pat[600];
  snprintf(pat, sizeof pat, "%s/s@3", g_dir);
  lv_record_yielder_opts o = opts_for(pat);
  rec_list l;
  drain(&o, &l);
  ck_assert_int_eq(l.n, 100);
  /* file order, record order */
  ck_assert_str_eq(l.r[0], "a-0");
  ck_assert_str_eq(l.r[39], "a-39");
  ck_assert_str_eq(l.r[40], "b-0");
  ck_assert_str_eq(l.r[99], "c-34");
  rec_list_free(&l);
  o.repeat_count = 2;
  drain(&o, &l);
  ck_assert_int_eq(l.n, 200);
  ck_assert_str_eq(l.r[100], "a-0");
  rec_list_free(&l);
}
END_TEST

START_TEST(test_shuffle_determinism) {
  write_three_files();
  char pat[600];
  snprintf(pat, sizeof pat, "%s/s@*", g_dir);
  lv_record_yielder_opts o = opts_for(pat);
  o.sequential = false;
  o.buffer_size = 16;
  o.parallelism = 2;
  rec_list a, b, c, seq;
  drain(&o, &a);
  drain(&o, &b);
  ck_assert(same_order(&a, &b));
  o.seed = 302;
  drain(&o, &c);
  ck_assert(!same_order(&a, &c));
  o.seed = 301;
  o.stream = 5; /* e.g. resumed at step 5: another, but again reproducible, order */
  rec_list d, e;
  drain(&o, &d);
  drain(&o, &e);
  ck_assert(same_order(&d, &e));
  ck_assert(!same_order(&a, &d));
  /* one epoch of a shuffled stream is still every record exactly once */
  lv_record_yielder_opts so = opts_for(pat);
  drain(&so, &seq);
  ck_assert(!same_order(&a, &seq));
  qsort(a.r, (size_t)a.n, sizeof(char *), cmp_str);
  qsort(seq.r, (size_t)seq.n, sizeof(char *), cmp_str);
  ck_assert(same_order(&a, &seq));
  rec_list_free(&a);
  rec_list_free(&b);
  rec_list_free(&c);
  rec_list_free(&d);
  rec_list_free(&e);
  rec_list_free(&seq);
}
END_TEST

/* Records "r-0" .. "r-<n-1>" read for `epochs` epochs: each epoch (n consecutive records)
 * holds every record exactly once. */
static void each_epoch_once(const rec_list *a, int epochs, int n, const char *what) {
  ck_assert_int_ge(a->n, epochs * n);
  for (int e = 0; e < epochs; e++) {
    int count[64] = {0};
    ck_assert(n <= 64);
    for (int i = n * e; i < n * e + n; i++) {
      int k = -1;
      ck_assert_msg(sscanf(a->r[i], "r-%d", &k) == 1 && k >= 0 && k < n, "%s: record %d is \"%s\"", what, i, a->r[i]);
      count[k]++;
    }
    for (int k = 0; k < n; k++)
      ck_assert_msg(count[k] == 1, "%s, epoch %d has record %d %d times", what, e, k, count[k]);
  }
}

/* Lingvo's epoch barrier: the shuffle buffer drains before the next epoch starts, so with
 * a buffer larger than the file each epoch's 7 records come out together, each once, in
 * another order each epoch (a buffer that kept filling across epochs held each record
 * many times and mixed epochs); a yielder destroyed while the buffer holds records frees
 * them (checked by the ASan build). With a buffer of 3, epochs still do not mix. */
START_TEST(test_shuffle_buffer_repeats) {
  write_records("r7.tfrecord", "r", 7);
  char pat[600];
  snprintf(pat, sizeof pat, "%s/r7.tfrecord", g_dir);
  lv_record_yielder_opts o = opts_for(pat);
  o.sequential = false;
  o.buffer_size = 1000;
  o.repeat_count = 300;
  rec_list a;
  drain(&o, &a);
  ck_assert_int_eq(a.n, 2100);
  each_epoch_once(&a, 300, 7, "buffer 1000");
  int orders_differ = 0;
  for (int e = 1; e < 300; e++) orders_differ += strcmp(a.r[7 * e], a.r[7 * e - 7]) != 0;
  ck_assert_int_gt(orders_differ, 200); /* the first record changes in ~6 of 7 epochs */
  rec_list_free(&a);
  o.buffer_size = 3;
  o.repeat_count = 20;
  drain(&o, &a);
  ck_assert_int_eq(a.n, 140);
  each_epoch_once(&a, 20, 7, "buffer 3");
  rec_list_free(&a);
  o.buffer_size = 1000;
  o.repeat_count = -1;
  lv_record_yielder *y = NULL;
  EXPECT_OK(lv_record_yielder_create(&o, &y));
  lv_record r;
  bool eof;
  for (int i = 0; i < 50; i++) EXPECT_OK(lv_record_yielder_next(y, &r, &eof));
  lv_record_yielder_destroy(y);
}
END_TEST

/* file_buffer_max_mb's byte cap: the buffer never holds more record bytes than the cap
 * (but always one record), each epoch is still every record once, the order is
 * reproducible, and a cap that never binds gives the uncapped order. */
START_TEST(test_shuffle_buffer_bytes) {
  write_records("r50.tfrecord", "r", 50); /* "r-0" .. "r-49": 3 or 4 bytes */
  char pat[600];
  snprintf(pat, sizeof pat, "%s/r50.tfrecord", g_dir);
  lv_record_yielder_opts o = opts_for(pat);
  o.sequential = false;
  o.buffer_size = 1000;
  o.repeat_count = 3;
  rec_list free_order, capped, again, huge;
  drain(&o, &free_order);
  o.buffer_max_bytes = (int64_t)1 << 30;
  drain(&o, &huge);
  ck_assert(same_order(&free_order, &huge));
  o.buffer_max_bytes = 20;
  lv_record_yielder *y = NULL;
  EXPECT_OK(lv_record_yielder_create(&o, &y));
  capped.n = 0;
  for (;;) {
    lv_record r;
    bool eof;
    EXPECT_OK(lv_record_yielder_next(y, &r, &eof));
    if (eof) break;
    capped.r[capped.n++] = strndup((const char *)r.data, r.len);
  }
  int64_t peak = lv_record_yielder_buffer_peak_bytes(y);
  lv_record_yielder_destroy(y);
  ck_assert_msg(peak > 12 && peak <= 20, "peak %lld bytes", (long long)peak);
  ck_assert_int_eq(capped.n, 150);
  each_epoch_once(&capped, 3, 50, "20-byte cap");
  ck_assert(!same_order(&free_order, &capped));
  drain(&o, &again);
  ck_assert(same_order(&capped, &again));
  o.buffer_max_bytes = 1; /* smaller than any record: one record at a time, file order */
  rec_list one, seq;
  drain(&o, &one);
  o.buffer_size = 1;
  o.buffer_max_bytes = 0;
  drain(&o, &seq);
  ck_assert(same_order(&one, &seq));
  rec_list *all[] = {&free_order, &capped, &again, &huge, &one, &seq};
  for (int i = 0; i < 6; i++) rec_list_free(all[i]);
}
END_TEST

START_TEST(test_sharding_covers_once) {
  write_three_files();
  char pat[600];
  snprintf(pat, sizeof pat, "%s/s@3", g_dir);
  for (int shuffled = 0; shuffled < 2; shuffled++) {
    rec_list all = {0}, part;
    for (int r = 0; r < 3; r++) {
      lv_record_yielder_opts o = opts_for(pat);
      o.replica = r;
      o.num_replicas = 3;
      if (shuffled) {
        o.sequential = false;
        o.buffer_size = 10;
        o.parallelism = 3;
      }
      drain(&o, &part);
      ck_assert_int_ge(part.n, 33);
      ck_assert_int_le(part.n, 34);
      for (int i = 0; i < part.n; i++) all.r[all.n++] = part.r[i];
      part.n = 0;
    }
    rec_list want;
    lv_record_yielder_opts o = opts_for(pat);
    drain(&o, &want);
    qsort(all.r, (size_t)all.n, sizeof(char *), cmp_str);
    qsort(want.r, (size_t)want.n, sizeof(char *), cmp_str);
    ck_assert(same_order(&all, &want));
    rec_list_free(&all);
    rec_list_free(&want);
  }
  lv_record_yielder *y = NULL;
  lv_record_yielder_opts o = opts_for(pat);
  o.replica = 3;
  o.num_replicas = 3;
  EXPECT_ERR(lv_record_yielder_create(&o, &y), LV_ERR_INVALID, "replica 3 of 3");
}
END_TEST

/* ---- corrupt records ---- */

START_TEST(test_corrupt_record) {
  write_records("bad.tfrecord", "r", 6);
  char path[512];
  path_of(path, sizeof path, "bad.tfrecord");
  /* records "r-0".."r-5" are 3 bytes each: frame i starts at 19*i; corrupt record 3's data */
  FILE *f = fopen(path, "r+b");
  fseek(f, 19 * 3 + 12, SEEK_SET);
  fputc('X', f);
  fclose(f);
  lv_record_yielder_opts o = opts_for(path);
  lv_record_yielder *y = NULL;
  EXPECT_OK(lv_record_yielder_create(&o, &y));
  lv_record r;
  bool eof;
  for (int i = 0; i < 3; i++) {
    EXPECT_OK(lv_record_yielder_next(y, &r, &eof));
    ck_assert(!eof);
    ck_assert_int_eq(r.offset, 19 * i);
  }
  EXPECT_ERR(lv_record_yielder_next(y, &r, &eof), LV_ERR_CORRUPT, "bad.tfrecord", "byte offset 57",
             "data checksum mismatch");
  EXPECT_ERR(lv_record_yielder_next(y, &r, &eof), LV_ERR_CORRUPT, "bad.tfrecord");
  lv_record_yielder_destroy(y);
  /* skip and count */
  o.skip_corrupt = true;
  EXPECT_OK(lv_record_yielder_create(&o, &y));
  int n = 0;
  for (;;) {
    EXPECT_OK(lv_record_yielder_next(y, &r, &eof));
    if (eof) break;
    ck_assert(strncmp((const char *)r.data, "r-3", 3) != 0);
    n++;
  }
  ck_assert_int_eq(n, 5);
  ck_assert_int_eq(lv_record_yielder_skipped(y), 1);
  lv_record_yielder_destroy(y);
  /* The same file gzipped: the error names the gzip file (it named /proc/self/fd/N, the
   * memory file it is inflated into), with the offset in the uncompressed stream. */
  f = fopen(path, "rb");
  char data[19 * 6];
  ck_assert_int_eq(fread(data, 1, sizeof data, f), sizeof data);
  fclose(f);
  char gzpath[512], pat[600];
  path_of(gzpath, sizeof gzpath, "bad.tfrecord.gz");
  gzFile gz = gzopen(gzpath, "wb");
  ck_assert_int_eq(gzwrite(gz, data, sizeof data), (int)sizeof data);
  gzclose(gz);
  snprintf(pat, sizeof pat, "tfrecord_gzip:%s", gzpath);
  o = opts_for(pat);
  EXPECT_OK(lv_record_yielder_create(&o, &y));
  for (int i = 0; i < 3; i++) EXPECT_OK(lv_record_yielder_next(y, &r, &eof));
  EXPECT_ERR(lv_record_yielder_next(y, &r, &eof), LV_ERR_CORRUPT, "bad.tfrecord.gz (gzip; offsets uncompressed)",
             "byte offset 57");
  lv_record_yielder_destroy(y);
}
END_TEST

/* ---- bucketing ---- */

/* Text records "<key>" or "<key>:<len>": feature 0 (int32) holds 1..len, feature 1
 * (float) holds len halves; bucket key = key. "bad" is a processor error. */
/* cancel: the reader stops and every later next is LV_ERR_CANCELLED (what a batcher
 * thread's owner uses to stop it wherever it waits). */
START_TEST(test_yielder_cancel) {
  lv_record_yielder_opts o = opts_for("iota:1000000");
  lv_record_yielder *y = NULL;
  EXPECT_OK(lv_record_yielder_create(&o, &y));
  lv_record rec;
  bool eof;
  EXPECT_OK(lv_record_yielder_next(y, &rec, &eof));
  ck_assert(!eof);
  lv_record_yielder_cancel(y);
  EXPECT_ERR(lv_record_yielder_next(y, &rec, &eof), LV_ERR_CANCELLED, "cancelled");
  EXPECT_ERR(lv_record_yielder_next(y, &rec, &eof), LV_ERR_CANCELLED, "cancelled");
  lv_record_yielder_destroy(y);
}
END_TEST

static lv_status text_proc(void *ctx, const lv_record *rec, lv_sample *out, int64_t *key) {
  (void)ctx;
  char buf[64];
  snprintf(buf, sizeof buf, "%.*s", (int)rec->len, (const char *)rec->data);
  if (!strcmp(buf, "bad")) return lv_status_make(LV_ERR_CORRUPT, "unparsable");
  long k = strtol(buf, NULL, 10), len = k;
  const char *c = strchr(buf, ':');
  if (c) len = strtol(c + 1, NULL, 10);
  int32_t ids[64];
  float h[64];
  for (long i = 0; i < len && i < 64; i++) {
    ids[i] = (int32_t)(i + 1);
    h[i] = 0.5f;
  }
  lv_sample_set(out, 0, ids, len > 0 ? len : 0);
  lv_sample_set(out, 1, h, len > 0 ? len : 0);
  *key = k;
  return NULL;
}

static lv_batcher *text_batcher(const char *lines, int64_t flush, int64_t pad_to, bool skip_bad) {
  char path[512], pat[600];
  path_of(path, sizeof path, "keys.txt");
  FILE *f = fopen(path, "w");
  fputs(lines, f);
  fclose(f);
  snprintf(pat, sizeof pat, "text:%s", path);
  lv_record_yielder_opts yo = opts_for(pat);
  lv_record_yielder *y = NULL;
  EXPECT_OK(lv_record_yielder_create(&yo, &y));
  lv_batcher_opts o = {.n_features = 2,
                       .features = {{"x.ids", LV_I32, 7, pad_to, lv_shape0()}, {"x.halves", LV_F32, -1, 0, lv_shape0()}},
                       .n_buckets = 2,
                       .bucket_upper_bound = {3, 6},
                       .bucket_batch_limit = {2, 3},
                       .flush_every_n = flush,
                       .skip_bad_records = skip_bad,
                       .process = text_proc};
  lv_batcher *b = NULL;
  EXPECT_OK(lv_batcher_create(&o, "input", y, &b));
  return b;
}

static void expect_keys(lv_batcher *b, lv_batch *bt, int n, const int *keys) {
  bool done;
  EXPECT_OK(lv_batcher_next(b, bt, &done));
  ck_assert(!done);
  ck_assert_int_eq(bt->size, n);
  lv_tensor *k = lv_batch_get(bt, "bucket_keys");
  ck_assert_int_eq(k->dtype, LV_I32);
  for (int i = 0; i < n; i++) ck_assert_int_eq(((int32_t *)k->data)[i], keys[i]);
}

START_TEST(test_bucketing) {
  /* keys 1,5,2 (bucket 0 fills: [1,2]), 9 (> 6: dropped), -1 (dropped), 4,6 (bucket 1: [5,4,6]),
   * 3 then end: partial [3] */
  lv_batcher *b = text_batcher("1\n5\n2\n9\n-1\n4\n6:2\n3\n", 0, 0, false);
  lv_batch bt;
  lv_batch_init(&bt);
  expect_keys(b, &bt, 2, (int[]){1, 2});
  lv_tensor *ids = lv_batch_get(&bt, "x.ids"), *h = lv_batch_get(&bt, "x.halves");
  ck_assert_int_eq(ids->shape.rank, 2);
  ck_assert_int_eq(ids->shape.d[1], 2); /* longest in the batch */
  int32_t *iv = ids->data;
  ck_assert_int_eq(iv[0], 1);
  ck_assert_int_eq(iv[1], 7); /* pad constant of x.ids */
  ck_assert_int_eq(iv[2], 1);
  ck_assert_int_eq(iv[3], 2);
  ck_assert(((float *)h->data)[1] == -1.0f); /* pad constant of x.halves */
  expect_keys(b, &bt, 3, (int[]){5, 4, 6});
  ids = lv_batch_get(&bt, "x.ids");
  ck_assert_int_eq(ids->shape.d[1], 5); /* "6:2" has length 2; the longest is 5 */
  ck_assert_int_eq(((int32_t *)ids->data)[2 * 5 + 2], 7);
  expect_keys(b, &bt, 1, (int[]){3}); /* partial last batch */
  bool done;
  EXPECT_OK(lv_batcher_next(b, &bt, &done));
  ck_assert(done);
  lv_batcher_stats st = lv_batcher_get_stats(b);
  ck_assert_int_eq(st.records, 8);
  ck_assert_int_eq(st.dropped_too_long, 1);
  ck_assert_int_eq(st.dropped_filtered, 1);
  ck_assert_int_eq(st.batches, 3);
  lv_batcher_destroy(b);
  lv_batch_free(&bt);
}
END_TEST

START_TEST(test_bucketing_flush_and_pad_to) {
  /* flush_every_n = 3: after 1,5,4 -> [1] and [5,4]; then 2 -> ..., bucket 0 full at [2,3] */
  lv_batcher *b = text_batcher("1\n5\n4\n2\n3\n", 3, 0, false);
  lv_batch bt;
  lv_batch_init(&bt);
  expect_keys(b, &bt, 1, (int[]){1});
  expect_keys(b, &bt, 2, (int[]){5, 4});
  expect_keys(b, &bt, 2, (int[]){2, 3});
  bool done;
  EXPECT_OK(lv_batcher_next(b, &bt, &done));
  ck_assert(done);
  lv_batcher_destroy(b);
  /* pad_to_max_seq_length: every batch padded to 6; a longer sample is an error */
  b = text_batcher("1\n2\n3:9\n", 0, 6, false);
  expect_keys(b, &bt, 2, (int[]){1, 2});
  ck_assert_int_eq(lv_batch_get(&bt, "x.ids")->shape.d[1], 6);
  ck_assert_int_eq(lv_batch_get(&bt, "x.halves")->shape.d[1], 2); /* dynamic */
  EXPECT_ERR(lv_batcher_next(b, &bt, &done), LV_ERR_CORRUPT, "keys.txt: record at byte offset", "x.ids has length 9", "pad length 6");
  lv_batcher_destroy(b);
  /* a processor error names the file and offset, or is skipped and counted */
  b = text_batcher("1\nbad\n2\n", 0, 0, false);
  EXPECT_ERR(lv_batcher_next(b, &bt, &done), LV_ERR_CORRUPT, "keys.txt", "byte offset 2", "unparsable");
  lv_batcher_destroy(b);
  b = text_batcher("1\nbad\n2\n", 0, 0, true);
  expect_keys(b, &bt, 2, (int[]){1, 2});
  ck_assert_int_eq(lv_batcher_get_stats(b).dropped_bad, 1);
  lv_batcher_destroy(b);
  /* bad options */
  lv_record_yielder_opts yo = opts_for("iota:3");
  lv_record_yielder *y = NULL;
  EXPECT_OK(lv_record_yielder_create(&yo, &y));
  lv_batcher_opts o = {.n_features = 1, .features = {{"x", LV_I32, 0, 0, lv_shape0()}}, .n_buckets = 2,
                       .bucket_upper_bound = {6, 3}, .bucket_batch_limit = {1, 1}, .process = text_proc};
  EXPECT_ERR(lv_batcher_create(&o, "input", y, &b), LV_ERR_INVALID, "input.bucket_upper_bound", "ascending");
  lv_batch_free(&bt);
}
END_TEST

/* ---- NmtInput ---- */

/* An MT example as in Lingvo's wmt14_ende_wpm_32k_test.tfrecord: ids, 0/1 paddings, labels,
 * weights; source of length s (+ sp padded positions), target of length t. */
static int g_bad_kind; /* what record bad_at gets: 0 an id beyond int32, 1 a negative id, 2 a short padding */
static void write_mt_file_ex(const char *name, int n, int base, int bad_at) {
  char path[512];
  path_of(path, sizeof path, name);
  lv_tfrecord_writer *w = NULL;
  EXPECT_OK(lv_tfrecord_writer_open(path, false, &w));
  for (int i = 0; i < n; i++) {
    int s = 1 + (base + i) % 9, t = 1 + (base + 2 * i) % 11, sp = i % 2;
    int64_t sid[16], tid[16], tl[16];
    float spad[16], tpad[16], tw[16];
    for (int j = 0; j < s + sp; j++) {
      sid[j] = j < s ? 1000 * (base + i) + j : 0;
      if (i == bad_at && g_bad_kind < 2) sid[j] = g_bad_kind == 0 ? (int64_t)1 << 40 : -3;
      spad[j] = j < s ? 0.f : 1.f;
    }
    for (int j = 0; j < t; j++) {
      tid[j] = j == 0 ? 1 : 100 + j;
      tl[j] = j == t - 1 ? 2 : 101 + j;
      tpad[j] = 0.f;
      tw[j] = 1.f;
    }
    lv_example *e = lv_example_new();
    lv_example_add_floats(e, "target_weight", t, tw);
    lv_example_add_int64s(e, "source_id", s + sp, sid);
    lv_example_add_floats(e, "source_padding", s + sp - (i == bad_at && g_bad_kind == 2), spad);
    lv_example_add_int64s(e, "target_id", t, tid);
    lv_example_add_floats(e, "target_padding", t, tpad);
    lv_example_add_int64s(e, "target_label", t, tl);
    uint8_t *data;
    size_t len;
    EXPECT_OK(lv_example_serialize(e, &data, &len));
    EXPECT_OK(lv_tfrecord_writer_write(w, data, len));
    free(data);
    lv_example_free(e);
  }
  EXPECT_OK(lv_tfrecord_writer_close(w));
}
static void write_mt_file(const char *name, int n, int base) { write_mt_file_ex(name, n, base, -1); }

static lv_params *nmt_params(const char *pattern) {
  lv_input_register_all();
  const lv_input_class *c = lv_input_class_find("NmtInput");
  ck_assert_ptr_nonnull(c);
  lv_params *p = c->params();
  EXPECT_OK(lv_params_set_string(p, "file_pattern", pattern));
  int64_t bounds[2] = {5, 10}, limits[2] = {4, 2};
  EXPECT_OK(lv_params_set_list(p, "bucket_upper_bound", lv_pvalue_ints(2, bounds)));
  EXPECT_OK(lv_params_set_list(p, "bucket_batch_limit", lv_pvalue_ints(2, limits)));
  EXPECT_OK(lv_params_set_int(p, "file_buffer_size", 8));
  EXPECT_OK(lv_params_set_int(p, "file_parallelism", 2));
  return p;
}

START_TEST(test_nmt_batch_contents) {
  write_mt_file("mt-00000-of-00002", 20, 0);
  write_mt_file("mt-00001-of-00002", 15, 50);
  char pat[600];
  snprintf(pat, sizeof pat, "tfrecord:%s/mt@2", g_dir);
  lv_params *p = nmt_params(pat);
  lv_input *in = NULL;
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  ck_assert_int_eq(lv_input_batch_size(in), 4);
  lv_batch bt;
  lv_batch_init(&bt);
  bool done;
  EXPECT_OK(lv_input_reset(in));
  int64_t total = 0;
  int batches = 0;
  bool saw_first = false;
  while (true) {
    EXPECT_OK(lv_input_next_eval(in, &bt, &done));
    if (done) break;
    batches++;
    total += bt.size;
    static const char *const keys[] = {"src.ids", "src.paddings", "tgt.ids", "tgt.paddings", "tgt.labels",
                                       "tgt.weights", "bucket_keys"};
    static const lv_dtype dt[] = {LV_I32, LV_F32, LV_I32, LV_F32, LV_I32, LV_F32, LV_I32};
    for (int k = 0; k < 7; k++) {
      lv_tensor *t = lv_batch_get(&bt, keys[k]);
      ck_assert_msg(t, "no %s", keys[k]);
      ck_assert_int_eq(t->dtype, dt[k]);
      ck_assert_int_eq(t->shape.d[0], bt.size);
    }
    lv_tensor *sid = lv_batch_get(&bt, "src.ids"), *sp = lv_batch_get(&bt, "src.paddings");
    lv_tensor *tp = lv_batch_get(&bt, "tgt.paddings"), *tw = lv_batch_get(&bt, "tgt.weights");
    lv_tensor *bk = lv_batch_get(&bt, "bucket_keys");
    int64_t S = sid->shape.d[1], T = tp->shape.d[1];
    for (int64_t i = 0; i < bt.size; i++) {
      float ss = 0, ts = 0;
      for (int64_t j = 0; j < S; j++) ss += 1 - ((float *)sp->data)[i * S + j];
      for (int64_t j = 0; j < T; j++) ts += 1 - ((float *)tp->data)[i * T + j];
      int key = ((int32_t *)bk->data)[i];
      ck_assert_int_eq(key, (int)(ss > ts ? ss : ts));
      ck_assert_int_le(key, 10);
      if (((int32_t *)sid->data)[i * S] == 0) { /* mt-00000 record 0: s = t = 1, label </s> */
        saw_first = true;
        ck_assert_int_eq(key, 1);
        ck_assert_int_eq(((int32_t *)lv_batch_get(&bt, "tgt.labels")->data)[i * T], 2);
        ck_assert_int_eq(((int32_t *)lv_batch_get(&bt, "tgt.ids")->data)[i * T], 1);
      }
      /* padded positions: ids 0, paddings 1, weights 0 */
      for (int64_t j = (int64_t)ss; j < S; j++) {
        ck_assert_int_eq(((int32_t *)sid->data)[i * S + j], 0);
        ck_assert(((float *)sp->data)[i * S + j] == 1.f);
      }
      for (int64_t j = (int64_t)ts; j < T; j++) ck_assert(((float *)tw->data)[i * T + j] == 0.f);
    }
  }
  /* keys: max(s, t) with s in 1..9, t in 1..11: those above 10 are dropped */
  int want = 0;
  for (int f = 0; f < 2; f++)
    for (int i = 0; i < (f ? 15 : 20); i++) {
      int base = f ? 50 : 0, s = 1 + (base + i) % 9, t = 1 + (base + 2 * i) % 11;
      want += (s > t ? s : t) <= 10;
    }
  ck_assert_int_eq(total, want);
  ck_assert_int_gt(batches, 3);
  ck_assert(saw_first);
  lv_input_destroy(in);
  lv_batch_free(&bt);
  lv_params_free(p);
}
END_TEST

static void batch_fingerprint(const lv_batch *b, char *out, size_t n) {
  const int32_t *ids = lv_batch_get(b, "src.ids")->data;
  int64_t S = lv_batch_get(b, "src.ids")->shape.d[1];
  size_t k = 0;
  for (int64_t i = 0; i < b->size && k + 16 < n; i++) k += (size_t)snprintf(out + k, n - k, "%d,", ids[i * S]);
}

START_TEST(test_nmt_resume_and_shards) {
  write_mt_file("mt-00000-of-00002", 30, 0);
  write_mt_file("mt-00001-of-00002", 30, 50);
  char pat[600];
  snprintf(pat, sizeof pat, "%s/mt@*", g_dir);
  lv_params *p = nmt_params(pat);
  lv_input *a = NULL, *b = NULL, *c = NULL;
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &a));
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &b));
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &c));
  lv_batch ba, bb;
  lv_batch_init(&ba);
  lv_batch_init(&bb);
  char fa[256], fb[256];
  /* a: steps 0..2 then resumed at 5 (a jump); b: a fresh run resumed at 5; c: steps
   * 0..11 without a break. With resume_replay (the default) all three read the same
   * batches from step 5 on (a resumed run trains as an uninterrupted one); without it a
   * resumed run re-seeds at 5: a and b still agree, c reads other batches. */
  for (int replay = 1; replay >= 0; replay--) {
    EXPECT_OK(lv_params_set_bool(p, "resume_replay", replay));
    lv_input *r[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &r[i]));
    for (int s = 0; s < 3; s++) EXPECT_OK(lv_input_train_batch(r[0], s, &ba));
    for (int s = 0; s < 5; s++) EXPECT_OK(lv_input_train_batch(r[2], s, &ba));
    int differ = 0;
    for (int s = 5; s < 12; s++) {
      char fc[256];
      EXPECT_OK(lv_input_train_batch(r[0], s, &ba));
      EXPECT_OK(lv_input_train_batch(r[1], s, &bb));
      batch_fingerprint(&ba, fa, sizeof fa);
      batch_fingerprint(&bb, fb, sizeof fb);
      ck_assert_str_eq(fa, fb);
      EXPECT_OK(lv_input_train_batch(r[2], s, &bb));
      batch_fingerprint(&bb, fc, sizeof fc);
      if (replay) ck_assert_str_eq(fa, fc);
      differ += strcmp(fa, fc) != 0;
    }
    if (!replay) ck_assert_int_gt(differ, 0);
    for (int i = 0; i < 3; i++) lv_input_destroy(r[i]);
  }
  EXPECT_OK(lv_params_set_bool(p, "resume_replay", true));
  /* two fresh runs from step 0 agree; the training stream repeats forever */
  lv_input_destroy(a);
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &a));
  for (int s = 0; s < 40; s++) {
    EXPECT_OK(lv_input_train_batch(a, s, &ba));
    EXPECT_OK(lv_input_train_batch(c, s, &bb));
    batch_fingerprint(&ba, fa, sizeof fa);
    batch_fingerprint(&bb, fb, sizeof fb);
    ck_assert_str_eq(fa, fb);
  }
  lv_input_destroy(a);
  lv_input_destroy(b);
  lv_input_destroy(c);
  /* eval shards: together every batched record exactly once (first source id is unique) */
  int seen[100000] = {0};
  int64_t total = 0;
  for (int r = 0; r < 2; r++) {
    lv_input *in = NULL;
    EXPECT_OK(lv_input_create(p, (lv_input_shard){r, 2}, &in));
    bool done;
    for (;;) {
      EXPECT_OK(lv_input_next_eval(in, &ba, &done));
      if (done) break;
      const int32_t *ids = lv_batch_get(&ba, "src.ids")->data;
      int64_t S = lv_batch_get(&ba, "src.ids")->shape.d[1];
      for (int64_t i = 0; i < ba.size; i++) {
        ck_assert_int_eq(seen[ids[i * S]]++, 0);
        total++;
      }
    }
    lv_input_destroy(in);
  }
  lv_input *whole = NULL;
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &whole));
  int64_t want = 0;
  bool done;
  for (;;) {
    EXPECT_OK(lv_input_next_eval(whole, &ba, &done));
    if (done) break;
    want += ba.size;
  }
  ck_assert_int_eq(total, want);
  lv_input_destroy(whole);
  /* file_random_seed 0 (each process its own seed) cannot shard a shuffled training
   * stream between replicas (their shares would overlap); eval reads in order, unaffected. */
  EXPECT_OK(lv_params_set_int(p, "file_random_seed", 0));
  lv_input *rs = NULL;
  EXPECT_OK(lv_input_create(p, (lv_input_shard){1, 2}, &rs));
  EXPECT_ERR(lv_input_train_batch(rs, 0, &ba), LV_ERR_INVALID, "file_random_seed = 0", "with 2 replicas");
  EXPECT_OK(lv_input_next_eval(rs, &ba, &done));
  lv_input_destroy(rs);
  lv_batch_free(&ba);
  lv_batch_free(&bb);
  lv_params_free(p);
}
END_TEST

/* Records NmtInput cannot read position by position: a negative id, a source_padding shorter
 * than source_id. Errors name the file and the feature. */
START_TEST(test_nmt_bad_features) {
  const char *want[2] = {"source_id[0] = -3: expected an id in [0, 2^31)",
                         "source_padding has 0 values but source_id has 1: expected the same length"};
  for (int k = 1; k <= 2; k++) {
    g_bad_kind = k;
    write_mt_file_ex("badf.tfrecord", 3, 0, 0); /* record 0: 1 source id, no padding position */
    g_bad_kind = 0;
    char pat[600];
    snprintf(pat, sizeof pat, "%s/badf.tfrecord", g_dir);
    lv_params *p = nmt_params(pat);
    lv_input *in = NULL;
    EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
    lv_batch b;
    lv_batch_init(&b);
    bool done;
    EXPECT_ERR(lv_input_next_eval(in, &b, &done), LV_ERR_CORRUPT, "badf.tfrecord", want[k - 1]);
    lv_input_destroy(in);
    lv_batch_free(&b);
    lv_params_free(p);
  }
}
END_TEST

/* pad_to_max_seq_length: src.* padded to source_max_length, tgt.* to target_max_length,
 * with NmtInput's pad constants. */
START_TEST(test_nmt_pad_to_max) {
  write_mt_file("pad.tfrecord", 10, 0);
  char pat[600];
  snprintf(pat, sizeof pat, "%s/pad.tfrecord", g_dir);
  lv_params *p = nmt_params(pat);
  EXPECT_OK(lv_params_set_bool(p, "pad_to_max_seq_length", true));
  EXPECT_OK(lv_params_set_int(p, "source_max_length", 12));
  EXPECT_OK(lv_params_set_int(p, "target_max_length", 15));
  lv_input *in = NULL;
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  lv_batch bt;
  lv_batch_init(&bt);
  bool done;
  EXPECT_OK(lv_input_next_eval(in, &bt, &done));
  ck_assert(!done);
  static const char *const keys[] = {"src.ids", "src.paddings", "tgt.ids", "tgt.paddings", "tgt.labels",
                                     "tgt.weights"};
  static const float pad[] = {0, 1, 0, 1, 0, 0};
  for (int k = 0; k < 6; k++) {
    lv_tensor *t = lv_batch_get(&bt, keys[k]);
    int64_t T = t->shape.d[1];
    ck_assert_int_eq(T, k < 2 ? 12 : 15);
    /* the last column is padding in every row (keys <= 10) */
    for (int64_t i = 0; i < bt.size; i++) {
      float v = t->dtype == LV_F32 ? ((float *)t->data)[i * T + T - 1] : (float)((int32_t *)t->data)[i * T + T - 1];
      ck_assert(v == pad[k]);
    }
  }
  lv_input_destroy(in);
  lv_batch_free(&bt);
  lv_params_free(p);
}
END_TEST

START_TEST(test_nmt_errors) {
  char pat[600];
  snprintf(pat, sizeof pat, "%s/none@4", g_dir);
  lv_params *p = nmt_params(pat);
  lv_input *in = NULL;
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_NOT_FOUND, "input.file_pattern",
             "none-?\?\?\?\?-of-00004");
  lv_params_free(p);
  write_mt_file("one.tfrecord", 3, 0);
  snprintf(pat, sizeof pat, "%s/one.tfrecord", g_dir);
  p = nmt_params(pat);
  int64_t limits[1] = {4};
  EXPECT_OK(lv_params_set_list(p, "bucket_batch_limit", lv_pvalue_ints(1, limits)));
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.bucket_batch_limit");
  lv_params_free(p);
  /* a record that is not a tf.Example: error naming the file and the offset */
  p = nmt_params(pat);
  char path[512];
  path_of(path, sizeof path, "one.tfrecord");
  lv_tfrecord_writer *w = NULL;
  EXPECT_OK(lv_tfrecord_writer_open(path, true, &w));
  EXPECT_OK(lv_tfrecord_writer_write(w, "\xff\xff\xff", 3));
  EXPECT_OK(lv_tfrecord_writer_close(w));
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  lv_batch bt;
  lv_batch_init(&bt);
  bool done = false;
  lv_status s = NULL;
  while (!s && !done) s = lv_input_next_eval(in, &bt, &done);
  EXPECT_ERR(s, LV_ERR_CORRUPT, "one.tfrecord", "record at byte offset");
  lv_input_destroy(in);
  /* with repeat_count 1, training runs out with a clear error */
  EXPECT_OK(lv_params_set_int(p, "repeat_count", 1));
  EXPECT_OK(lv_params_set_bool(p, "skip_corrupt_records", true));
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  s = NULL;
  for (int step = 0; step < 10 && !s; step++) s = lv_input_train_batch(in, step, &bt);
  EXPECT_ERR(s, LV_ERR_INVALID, "input.repeat_count", "ran out");
  lv_input_destroy(in);
  lv_batch_free(&bt);
  lv_params_free(p);
}
END_TEST

/* ---- the batcher thread (prefetch_batches) ---- */

enum { PF_MAX = 64 };

/* Digests of what `in` gives for steps[0..split) (training), then one eval pass, then
 * steps[split..n) (training again, while the eval pass's thread may still be around).
 * A training error ends the digests with the error's message in err (when non-NULL). */
typedef struct pf_run {
  uint64_t train[PF_MAX], eval[PF_MAX];
  int n_train, n_eval;
  char err[512];
  int err_at; /* index into steps of the failing call, -1 if none */
} pf_run;

static void pf_collect(lv_input *in, const int64_t *steps, int n, int split, pf_run *r) {
  memset(r, 0, sizeof *r);
  r->err_at = -1;
  lv_batch b;
  lv_batch_init(&b);
  for (int i = 0; i < n; i++) {
    if (i == split) {
      EXPECT_OK(lv_input_reset(in));
      bool done = false;
      while (!done) {
        EXPECT_OK(lv_input_next_eval(in, &b, &done));
        if (!done) {
          ck_assert_int_lt(r->n_eval, PF_MAX);
          r->eval[r->n_eval++] = lv_test_batch_digest(&b);
        }
      }
    }
    lv_status s = lv_input_train_batch(in, steps[i], &b);
    if (s) {
      snprintf(r->err, sizeof r->err, "%s", lv_status_msg(s));
      r->err_at = i;
      lv_status_free(s);
      break;
    }
    r->train[r->n_train++] = lv_test_batch_digest(&b);
  }
  lv_batch_free(&b);
}

static void pf_run_with(lv_params *p, int prefetch, const int64_t *steps, int n, int split, pf_run *r) {
  EXPECT_OK(lv_params_set_int(p, "prefetch_batches", prefetch));
  lv_input *in = NULL;
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  pf_collect(in, steps, n, split, r);
  lv_input_destroy(in);
}

static void pf_expect_same(const pf_run *a, const pf_run *b) {
  ck_assert_int_eq(a->n_train, b->n_train);
  ck_assert_int_eq(a->n_eval, b->n_eval);
  ck_assert_int_eq(a->err_at, b->err_at);
  ck_assert_str_eq(a->err, b->err);
  for (int i = 0; i < a->n_train; i++) ck_assert_msg(a->train[i] == b->train[i], "training batch %d differs", i);
  for (int i = 0; i < a->n_eval; i++) ck_assert_msg(a->eval[i] == b->eval[i], "eval batch %d differs", i);
}

/* The same batches for every prefetch_batches: a step sequence with jumps forward and
 * back (each a resume that re-seeds), a repeated step, and an eval pass in between. */
START_TEST(test_nmt_prefetch_same_batches) {
  write_mt_file("mt-00000-of-00002", 40, 0);
  write_mt_file("mt-00001-of-00002", 40, 50);
  char pat[600];
  snprintf(pat, sizeof pat, "%s/mt@2", g_dir);
  lv_params *p = nmt_params(pat);
  static const int64_t steps[] = {0, 1, 2, 3, 4, 5, 9, 10, 11, 12, 3, 4, 4, 5, 30, 31, 32, 33, 34, 35, 36, 37};
  const int n = (int)(sizeof steps / sizeof steps[0]);
  pf_run r0, r;
  pf_run_with(p, 0, steps, n, 8, &r0);
  ck_assert_int_eq(r0.n_train, n);
  ck_assert_int_gt(r0.n_eval, 10);
  for (int k = 1; k <= 3; k += 2) {
    pf_run_with(p, k, steps, n, 8, &r);
    pf_expect_same(&r0, &r);
  }
  /* and the eval pass alone, with the default (prefetch 2) */
  pf_run_with(p, 2, steps, 0, 0, &r);
  ck_assert_int_eq(r.n_eval, 0);
  lv_input *in = NULL;
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  pf_collect(in, steps, 1, 0, &r);
  for (int i = 0; i < r0.n_eval; i++) ck_assert(r.eval[i] == r0.eval[i]);
  ck_assert_int_eq(r.n_eval, r0.n_eval);
  lv_input_destroy(in);
  EXPECT_OK(lv_params_set_int(p, "prefetch_batches", -1));
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.prefetch_batches");
  lv_params_free(p);
}
END_TEST

/* An error of the batcher thread (a bad id, a corrupt frame) comes back from the same
 * call, with the same message, as without the thread; the good batches before it too. */
START_TEST(test_nmt_prefetch_errors) {
  static const int64_t steps[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  const int n = (int)(sizeof steps / sizeof steps[0]);
  char pat[600];
  snprintf(pat, sizeof pat, "%s/bad.tfrecord", g_dir);
  for (int kind = 0; kind < 2; kind++) {
    if (kind == 0) {
      write_mt_file_ex("bad.tfrecord", 30, 0, 17); /* record 17: an id beyond int32 */
    } else {
      write_mt_file("bad.tfrecord", 30, 0);
      char path[512];
      path_of(path, sizeof path, "bad.tfrecord");
      FILE *f = fopen(path, "ab");
      ck_assert_ptr_nonnull(f);
      fwrite("\x10\0\0\0\0\0\0\0garbage-garbage-garbage", 1, 31, f); /* a frame with bad CRCs */
      fclose(f);
    }
    lv_params *p = nmt_params(pat);
    EXPECT_OK(lv_params_set_int(p, "file_buffer_size", 1)); /* file order: the error comes early */
    EXPECT_OK(lv_params_set_int(p, "repeat_count", 1));
    pf_run r0, r;
    pf_run_with(p, 0, steps, n, n, &r0);
    ck_assert_msg(r0.err_at >= 0, "no error");
    ck_assert_msg(strstr(r0.err, "bad.tfrecord") && strstr(r0.err, kind == 0 ? "expected an id in [0, 2^31)" : "offset"),
                  "%s", r0.err);
    pf_run_with(p, 2, steps, n, n, &r);
    pf_expect_same(&r0, &r);
    /* eval: the same batches, then the error, which stays until reset */
    for (int k = 0; k <= 2; k += 2) {
      EXPECT_OK(lv_params_set_int(p, "prefetch_batches", k));
      lv_input *in = NULL;
      EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
      lv_batch b;
      lv_batch_init(&b);
      for (int pass = 0; pass < 2; pass++) {
        bool done = false;
        lv_status s = NULL;
        int good = 0;
        while (!s && !done) {
          s = lv_input_next_eval(in, &b, &done);
          if (!s && !done) {
            ck_assert_int_lt(good, r0.n_train);
            ck_assert(lv_test_batch_digest(&b) == r0.train[good]); /* buffer 1: training reads in file order too */
            good++;
          }
        }
        ck_assert_int_eq(good, r0.err_at);
        ck_assert_str_eq(lv_status_msg(s), r0.err);
        lv_status_free(s);
        EXPECT_ERR(lv_input_next_eval(in, &b, &done), LV_ERR_CORRUPT, "bad.tfrecord");
        EXPECT_OK(lv_input_reset(in));
      }
      /* training after the eval passes, and again after its error: each run starts at
       * step 0 (the first call, then the call after an error, re-seeds) */
      for (int run = 0; run < 2; run++) {
        lv_status s = NULL;
        int i = 0;
        for (; i < n && !s; i++) s = lv_input_train_batch(in, steps[i], &b);
        ck_assert_int_eq(i - 1, r0.err_at);
        ck_assert_str_eq(lv_status_msg(s), r0.err);
        lv_status_free(s);
      }
      lv_input_destroy(in);
      lv_batch_free(&b);
    }
    lv_params_free(p);
  }
}
END_TEST

/* Waits (up to 10 s) until the training queue holds `want` batches: the batcher thread
 * is then blocked on the full queue. */
static void pf_wait_ready(lv_input *in, int want) {
  for (int i = 0; i < 10000 && lv_stream_input_train_ready(in) < want; i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  ck_assert_int_eq(lv_stream_input_train_ready(in), want);
}

/* Destroy, a restart and reset stop the batcher thread wherever it is: blocked on a
 * full queue, reading, holding an error; no leak, no hang (run under ASan by make asan). */
START_TEST(test_nmt_prefetch_shutdown) {
  write_mt_file("mt-00000-of-00001", 60, 0);
  char pat[600];
  snprintf(pat, sizeof pat, "%s/mt@1", g_dir);
  lv_params *p = nmt_params(pat);
  lv_batch b;
  lv_batch_init(&b);
  lv_input *in = NULL;
  /* never asked for anything */
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  ck_assert_int_eq(lv_stream_input_train_ready(in), 0);
  lv_input_destroy(in);
  for (int k = 1; k <= 3; k++) {
    EXPECT_OK(lv_params_set_int(p, "prefetch_batches", k));
    EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
    EXPECT_OK(lv_input_train_batch(in, 0, &b));
    pf_wait_ready(in, k);
    uint64_t d1 = 0;
    EXPECT_OK(lv_input_train_batch(in, 1, &b));
    d1 = lv_test_batch_digest(&b);
    pf_wait_ready(in, k);
    /* a jump while the queue is full and a batch is held: the stream restarts */
    EXPECT_OK(lv_input_train_batch(in, 7, &b));
    pf_wait_ready(in, k);
    EXPECT_OK(lv_input_train_batch(in, 0, &b));
    EXPECT_OK(lv_input_train_batch(in, 1, &b));
    ck_assert(lv_test_batch_digest(&b) == d1);
    pf_wait_ready(in, k);
    lv_input_destroy(in); /* blocked on the full queue */
  }
  /* an eval pass that drops nearly every record (keys above the last bound 1; a bound
   * of 0 is refused): the thread reads for long without queueing a batch; reset and
   * destroy cancel it mid-read */
  write_mt_file("many.tfrecord", 3000, 0);
  snprintf(pat, sizeof pat, "%s/many.tfrecord", g_dir);
  lv_params_free(p);
  p = nmt_params(pat);
  int64_t bound[1] = {1}, limit[1] = {4};
  EXPECT_OK(lv_params_set_list(p, "bucket_upper_bound", lv_pvalue_ints(1, bound)));
  EXPECT_OK(lv_params_set_list(p, "bucket_batch_limit", lv_pvalue_ints(1, limit)));
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  EXPECT_OK(lv_input_reset(in));
  EXPECT_OK(lv_input_reset(in));
  bool done = false;
  int batches = 0;
  for (; !done && batches < 3000; batches++) {
    EXPECT_OK(lv_input_next_eval(in, &b, &done));
    for (int64_t i = 0; !done && i < b.size; i++) ck_assert_int_eq(lv_i32(lv_batch_get(&b, "bucket_keys"))[i], 1);
  }
  ck_assert(done);
  ck_assert_int_eq(b.size, 0);
  ck_assert_int_lt(batches, 3000 / 4);
  EXPECT_OK(lv_input_next_eval(in, &b, &done)); /* the end stays the end */
  ck_assert(done);
  EXPECT_OK(lv_input_reset(in));
  lv_input_destroy(in);
  /* the thread has queued an error nobody took */
  write_mt_file_ex("early.tfrecord", 30, 0, 0);
  snprintf(pat, sizeof pat, "%s/early.tfrecord", g_dir);
  lv_params_free(p);
  p = nmt_params(pat);
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  EXPECT_OK(lv_input_reset(in));
  nanosleep(&(struct timespec){0, 20000000}, NULL);
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);
}
END_TEST

int main(void) {
  Suite *su = suite_create("records_input");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_pattern_types);
  tcase_add_test(tc, test_pattern_globs_and_shards);
  tcase_add_test(tc, test_sequential_pass);
  tcase_add_test(tc, test_shuffle_determinism);
  tcase_add_test(tc, test_sharding_covers_once);
  tcase_add_test(tc, test_shuffle_buffer_repeats);
  tcase_add_test(tc, test_shuffle_buffer_bytes);
  tcase_add_test(tc, test_corrupt_record);
  tcase_add_test(tc, test_nmt_bad_features);
  tcase_add_test(tc, test_yielder_cancel);
  tcase_add_test(tc, test_bucketing);
  tcase_add_test(tc, test_bucketing_flush_and_pad_to);
  tcase_add_test(tc, test_nmt_batch_contents);
  tcase_add_test(tc, test_nmt_resume_and_shards);
  tcase_add_test(tc, test_nmt_pad_to_max);
  tcase_add_test(tc, test_nmt_errors);
  tcase_add_test(tc, test_nmt_prefetch_same_batches);
  tcase_add_test(tc, test_nmt_prefetch_errors);
  tcase_add_test(tc, test_nmt_prefetch_shutdown);
  suite_add_tcase(su, tc);
  return lv_test_run(su);
}
