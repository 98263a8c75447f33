/* Tests of src/io/tfrecord and src/io/example: framing and masked crcs against values
 * written by TensorFlow, round trips, every single-byte corruption and every truncation
 * detected at the right offset, skip-and-resync, tf.Example parse/serialize (cross-checked
 * against protobuf-c's decoder) and malformed tf.Example input. */
#include <check.h>

#include "check_util.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/crc32c.h"
#include "base/file.h"
#include "example.pb-c.h"
#include "io/example.h"
#include "io/tfrecord.h"

static char g_dir[256];

static void make_tmpdir(void) { lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_check_records"); }
static void remove_tmpdir(void) { lv_test_rmtree(g_dir); }

static const char *testdata(void) {
  const char *d = getenv("LV_TESTDATA");
  return d && *d ? d : "tests/data";
}

static void ok(lv_status s) {
  if (s) ck_abort_msg("unexpected error: %s", lv_status_msg(s));
}

static void write_file(const char *path, const uint8_t *d, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(d, 1, n, f), n);
  fclose(f);
}

/* ---- crc ---- */

START_TEST(test_crc_known_values) {
  ck_assert_uint_eq(lv_crc32c("123456789", 9), 0xe3069283u);
  uint8_t buf[32];
  memset(buf, 0, 32);
  ck_assert_uint_eq(lv_crc32c(buf, 32), 0x8a9136aau);
  memset(buf, 0xff, 32);
  ck_assert_uint_eq(lv_crc32c(buf, 32), 0x62a8ab43u);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
  ck_assert_uint_eq(lv_crc32c(buf, 32), 0x46dd794eu);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
  ck_assert_uint_eq(lv_crc32c(buf, 32), 0x113fdb5cu);
  uint32_t c = lv_crc32c("foo", 3);
  ck_assert_uint_ne(lv_crc32c_mask(c), c);
  ck_assert_uint_ne(lv_crc32c_mask(lv_crc32c_mask(c)), c);
  ck_assert_uint_eq(lv_crc32c_unmask(lv_crc32c_mask(c)), c);
  ck_assert_uint_eq(lv_crc32c_unmask(lv_crc32c_mask(lv_crc32c_mask(c))), lv_crc32c_mask(c));
}
END_TEST

/* en_fr.tfrecord was written by TensorFlow: its header and footer are TF's masked crcs. */
START_TEST(test_tf_written_file) {
  char path[512];
  snprintf(path, sizeof path, "%s/tfrecords/en_fr.tfrecord", testdata());
  char *raw;
  size_t rawlen;
  ok(lv_file_read_all(path, &raw, &rawlen));
  ck_assert_uint_eq(rawlen, 140);
  const uint8_t *u = (const uint8_t *)raw;
  /* Record 0: length 56, masked crc of the length bytes a3 79 7d 57, data crc 4c 93 cd 58. */
  ck_assert_uint_eq(lv_crc32c_mask(lv_crc32c(u, 8)), 0x577d79a3u);
  ck_assert_uint_eq(lv_crc32c_mask(lv_crc32c(u + 12, 56)), 0x58cd934cu);
  /* Our framing of the same payload reproduces TF's bytes exactly. */
  uint8_t framed[56 + LV_TFRECORD_OVERHEAD];
  lv_tfrecord_frame(u + 12, 56, framed);
  ck_assert_int_eq(memcmp(framed, u, sizeof framed), 0);

  lv_tfrecord_reader *r;
  ok(lv_tfrecord_reader_open(path, false, &r));
  const uint8_t *d;
  size_t n;
  bool eof;
  size_t lens[2];
  int count = 0;
  for (;;) {
    ok(lv_tfrecord_reader_next(r, &d, &n, &eof));
    if (eof) break;
    ck_assert_int_lt(count, 2);
    lens[count] = n;
    if (count == 0) {
      ck_assert_ptr_nonnull(memmem(d, n, "I love paragliding!", 19));
      ck_assert_ptr_nonnull(memmem(d, n, "J'adore le parapente!", 21));
    } else {
      ck_assert_ptr_nonnull(memmem(d, n, "vol biv paragliding", 19));
      ck_assert_ptr_nonnull(memmem(d, n, "vol biv parapente", 17));
    }
    /* These records hold {text, lang} pairs, not tf.Examples: the strict parser must
     * reject them rather than invent features. */
    lv_example *e = NULL;
    lv_status s = lv_example_parse(d, n, &e);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
    lv_status_free(s);
    count++;
  }
  ck_assert_int_eq(count, 2);
  ck_assert_uint_eq(lens[0], 56);
  ck_assert_uint_eq(lens[1], 52);
  ck_assert_int_eq(lv_tfrecord_reader_skipped(r), 0);
  lv_tfrecord_reader_close(r);
  free(raw);
}
END_TEST

/* ---- round trip ---- */

#define NREC 5
static const size_t rec_lens[NREC] = {0, 1, 17, 1000, 70000};

static uint8_t *rec_data(int i) {
  uint8_t *d = malloc(rec_lens[i] + 1);
  for (size_t k = 0; k < rec_lens[i]; k++) d[k] = (uint8_t)(k * 31 + (size_t)i * 7 + (k >> 8));
  return d;
}

static void write_records(const char *path, bool append) {
  lv_tfrecord_writer *w;
  ok(lv_tfrecord_writer_open(path, append, &w));
  ck_assert_str_eq(lv_tfrecord_writer_path(w), path);
  for (int i = 0; i < NREC; i++) {
    uint8_t *d = rec_data(i);
    ok(lv_tfrecord_writer_write(w, d, rec_lens[i]));
    free(d);
    if (i == 2) ok(lv_tfrecord_writer_flush(w));
  }
  ok(lv_tfrecord_writer_close(w));
}

static int read_all(const char *path, bool skip, int64_t *skipped, lv_status *err) {
  lv_tfrecord_reader *r;
  *err = lv_tfrecord_reader_open(path, skip, &r);
  if (*err) return -1;
  int count = 0;
  for (;;) {
    const uint8_t *d;
    size_t n;
    bool eof;
    *err = lv_tfrecord_reader_next(r, &d, &n, &eof);
    if (*err || eof) break;
    count++;
  }
  *skipped = lv_tfrecord_reader_skipped(r);
  lv_tfrecord_reader_close(r);
  return count;
}

START_TEST(test_round_trip) {
  make_tmpdir();
  char path[512];
  snprintf(path, sizeof path, "%s/a.tfrecord", g_dir);
  write_records(path, false);
  size_t total = 0;
  for (int i = 0; i < NREC; i++) total += rec_lens[i] + LV_TFRECORD_OVERHEAD;
  ck_assert_int_eq(lv_file_size(path), (int64_t)total);
  write_records(path, true);
  ck_assert_int_eq(lv_file_size(path), (int64_t)(2 * total));
  lv_tfrecord_reader *r;
  ok(lv_tfrecord_reader_open(path, false, &r));
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < NREC; i++) {
      const uint8_t *d;
      size_t n;
      bool eof;
      ok(lv_tfrecord_reader_next(r, &d, &n, &eof));
      ck_assert(!eof);
      ck_assert_uint_eq(n, rec_lens[i]);
      uint8_t *want = rec_data(i);
      ck_assert_int_eq(memcmp(d, want, n), 0);
      free(want);
    }
  const uint8_t *d;
  size_t n;
  bool eof;
  ok(lv_tfrecord_reader_next(r, &d, &n, &eof));
  ck_assert(eof);
  ok(lv_tfrecord_reader_next(r, &d, &n, &eof));
  ck_assert(eof);
  ck_assert_uint_eq(lv_tfrecord_reader_offset(r), 2 * total);
  lv_tfrecord_reader_close(r);

  /* An empty file is a clean end; a missing one is NOT_FOUND naming the path. */
  snprintf(path, sizeof path, "%s/empty.tfrecord", g_dir);
  write_file(path, (const uint8_t *)"", 0);
  int64_t sk;
  lv_status s;
  ck_assert_int_eq(read_all(path, false, &sk, &s), 0);
  ck_assert_ptr_null(s);
  snprintf(path, sizeof path, "%s/missing.tfrecord", g_dir);
  ck_assert_int_eq(read_all(path, false, &sk, &s), -1);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(lv_status_msg(s), "missing.tfrecord"));
  lv_status_free(s);
  remove_tmpdir();
}
END_TEST

/* ---- corruption ---- */

/* Three records (12, 0 and 40 bytes of data): every byte of every part (length, length
 * crc, data, data crc) flipped in turn must give LV_ERR_CORRUPT at that record's offset. */
START_TEST(test_every_flip_detected) {
  make_tmpdir();
  const size_t lens[3] = {12, 0, 40};
  size_t offs[4] = {0};
  size_t total = 0;
  uint8_t file[200];
  for (int i = 0; i < 3; i++) {
    uint8_t d[40];
    for (size_t k = 0; k < lens[i]; k++) d[k] = (uint8_t)(i * 50 + k);
    lv_tfrecord_frame(d, lens[i], file + total);
    offs[i] = total;
    total += lens[i] + LV_TFRECORD_OVERHEAD;
  }
  offs[3] = total;
  char path[512];
  snprintf(path, sizeof path, "%s/c.tfrecord", g_dir);
  for (size_t pos = 0; pos < total; pos++) {
    for (int bit = 0; bit < 8; bit += 7) {
      uint8_t bad[200];
      memcpy(bad, file, total);
      bad[pos] ^= (uint8_t)(1u << bit);
      write_file(path, bad, total);
      int rec = 0;
      while (pos >= offs[rec + 1]) rec++;
      int64_t sk;
      lv_status s;
      int n = read_all(path, false, &sk, &s);
      ck_assert_msg(s != NULL, "flip at byte %zu bit %d not detected", pos, bit);
      ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
      ck_assert_int_eq(n, rec);
      char want[64];
      snprintf(want, sizeof want, "byte offset %zu:", offs[rec]);
      ck_assert_msg(strstr(lv_status_msg(s), want) && strstr(lv_status_msg(s), "c.tfrecord"),
                    "flip at %zu: message '%s' lacks '%s' or the path", pos, lv_status_msg(s), want);
      lv_status_free(s);
      /* skip_corrupt: the other two records survive (a flipped length can hide at most the
       * damaged record itself). */
      n = read_all(path, true, &sk, &s);
      ck_assert_ptr_null(s);
      ck_assert_int_eq(sk, 1);
      ck_assert_msg(n == 2, "flip at %zu: skip_corrupt read %d records", pos, n);
    }
  }
  /* Every truncation: inside a record -> CORRUPT naming that record; on a boundary -> a
   * clean end after the whole records. */
  for (size_t cut = 1; cut < total; cut++) {
    write_file(path, file, cut);
    int whole = 0;
    while (whole < 3 && offs[whole + 1] <= cut) whole++;
    int64_t sk;
    lv_status s;
    int n = read_all(path, false, &sk, &s);
    ck_assert_int_eq(n, whole);
    if (cut == offs[whole]) {
      ck_assert_msg(s == NULL, "cut at boundary %zu: %s", cut, s ? lv_status_msg(s) : "");
    } else {
      ck_assert_msg(s != NULL, "truncation at %zu not detected", cut);
      ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
      char want[64];
      snprintf(want, sizeof want, "byte offset %zu:", offs[whole]);
      ck_assert_msg(strstr(lv_status_msg(s), want), "cut %zu: '%s'", cut, lv_status_msg(s));
      ck_assert_ptr_nonnull(strstr(lv_status_msg(s), "truncated"));
      lv_status_free(s);
      n = read_all(path, true, &sk, &s);
      ck_assert_ptr_null(s);
      ck_assert_int_eq(n, whole);
      ck_assert_int_eq(sk, 1);
    }
  }
  remove_tmpdir();
}
END_TEST

/* Garbage inserted between records is skipped and reading resumes on the next record. */
START_TEST(test_resync_after_garbage) {
  make_tmpdir();
  uint8_t file[400];
  size_t total = 0;
  for (int i = 0; i < 4; i++) {
    uint8_t d[30];
    memset(d, 'a' + i, sizeof d);
    if (i == 2) {
      for (int k = 0; k < 37; k++) file[total++] = (uint8_t)(k * 13 + 5);
    }
    lv_tfrecord_frame(d, sizeof d, file + total);
    total += sizeof d + LV_TFRECORD_OVERHEAD;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/g.tfrecord", g_dir);
  write_file(path, file, total);
  lv_tfrecord_reader *r;
  ok(lv_tfrecord_reader_open(path, true, &r));
  char seen[5] = {0};
  int n = 0;
  for (;;) {
    const uint8_t *d;
    size_t len;
    bool eof;
    ok(lv_tfrecord_reader_next(r, &d, &len, &eof));
    if (eof) break;
    ck_assert_uint_eq(len, 30);
    seen[n++] = (char)d[0];
  }
  ck_assert_str_eq(seen, "abcd");
  ck_assert_int_eq(lv_tfrecord_reader_skipped(r), 1);
  lv_tfrecord_reader_close(r);
  remove_tmpdir();
}
END_TEST

/* tfrecord_gzip, inflated as it is read: 300 records of 0 to 3000 bytes and one of
 * 200 KB (wider than the 64 KiB window), 37 bytes of garbage after record 100. The gzip
 * reader yields what the mapped reader yields from the same bytes uncompressed, at the
 * same offsets; without skip_corrupt the garbage is an error at its uncompressed offset,
 * naming the gzip file; a gzip file cut short is an error, not a quiet end. */
static size_t gz_rec_len(int i) { return (size_t)((i * 7919) % 3000) + (i == 150 ? 200000 : 0); }

static lv_status read_all_records(lv_tfrecord_reader *r, int *n, uint64_t *offs, size_t *lens, uint8_t *first,
                                  uint8_t *last) {
  *n = 0;
  for (;;) {
    const uint8_t *d;
    size_t len;
    bool eof;
    lv_status s = lv_tfrecord_reader_next(r, &d, &len, &eof);
    if (s) return s;
    if (eof) return NULL;
    offs[*n] = lv_tfrecord_reader_offset(r);
    lens[*n] = len;
    first[*n] = len ? d[0] : 0;
    last[*n] = len ? d[len - 1] : 0;
    (*n)++;
  }
}

START_TEST(test_gzip_stream) {
  make_tmpdir();
  enum { kN = 300 };
  size_t cap = 0;
  for (int i = 0; i < kN; i++) cap += gz_rec_len(i) + LV_TFRECORD_OVERHEAD;
  cap += 37;
  uint8_t *file = malloc(cap), *d = malloc(200000 + 3000);
  ck_assert(file && d);
  size_t total = 0, garbage_at = 0;
  for (int i = 0; i < kN; i++) {
    size_t len = gz_rec_len(i);
    for (size_t k = 0; k < len; k++) d[k] = (uint8_t)(i * 31 + k * 7);
    lv_tfrecord_frame(d, len, file + total);
    total += len + LV_TFRECORD_OVERHEAD;
    if (i == 100) {
      garbage_at = total;
      for (int k = 0; k < 37; k++) file[total++] = (uint8_t)(k * 13 + 5);
    }
  }
  ck_assert_uint_eq(total, cap);
  char plain[512], gzp[512], cut[512];
  snprintf(plain, sizeof plain, "%s/s.tfrecord", g_dir);
  snprintf(gzp, sizeof gzp, "%s/s.tfrecord.gz", g_dir);
  snprintf(cut, sizeof cut, "%s/cut.tfrecord.gz", g_dir);
  write_file(plain, file, total);
  gzFile gz = gzopen(gzp, "wb");
  ck_assert_ptr_nonnull(gz);
  ck_assert_int_eq(gzwrite(gz, file, (unsigned)total), (int)total);
  ck_assert_int_eq(gzclose(gz), Z_OK);

  static uint64_t o1[kN], o2[kN];
  static size_t l1[kN], l2[kN];
  static uint8_t f1[kN], f2[kN], e1[kN], e2[kN];
  int n1, n2;
  lv_tfrecord_reader *r;
  ok(lv_tfrecord_reader_open(plain, true, &r));
  ok(read_all_records(r, &n1, o1, l1, f1, e1));
  ck_assert_int_eq(lv_tfrecord_reader_skipped(r), 1);
  lv_tfrecord_reader_close(r);
  ok(lv_tfrecord_reader_open_gzip(gzp, true, &r));
  ok(read_all_records(r, &n2, o2, l2, f2, e2));
  ck_assert_int_eq(lv_tfrecord_reader_skipped(r), 1);
  lv_tfrecord_reader_close(r);
  ck_assert_int_eq(n1, kN);
  ck_assert_int_eq(n2, kN);
  for (int i = 0; i < kN; i++) {
    ck_assert_uint_eq(l2[i], gz_rec_len(i));
    ck_assert_uint_eq(o2[i], o1[i]);
    ck_assert_uint_eq(l2[i], l1[i]);
    ck_assert_uint_eq(f2[i], f1[i]);
    ck_assert_uint_eq(e2[i], e1[i]);
    if (l2[i]) ck_assert_uint_eq(e2[i], (uint8_t)(i * 31 + (l2[i] - 1) * 7));
  }

  /* Without skip_corrupt: 101 records, then the garbage, again on the next call. */
  ok(lv_tfrecord_reader_open_gzip(gzp, false, &r));
  lv_status s = read_all_records(r, &n2, o2, l2, f2, e2);
  ck_assert_int_eq(n2, 101);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
  char want[600];
  snprintf(want, sizeof want, "%s (gzip; offsets uncompressed): corrupt record at byte offset %zu", gzp, garbage_at);
  ck_assert_msg(strstr(lv_status_msg(s), want), "got: %s", lv_status_msg(s));
  lv_status_free(s);
  const uint8_t *dd;
  size_t len;
  bool eof;
  s = lv_tfrecord_reader_next(r, &dd, &len, &eof);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
  lv_status_free(s);
  lv_tfrecord_reader_close(r);

  /* Cut the compressed file in half: the records before the cut, then an error. */
  char *zraw;
  size_t zlen;
  ok(lv_file_read_all(gzp, &zraw, &zlen));
  write_file(cut, (const uint8_t *)zraw, zlen / 2);
  free(zraw);
  ok(lv_tfrecord_reader_open_gzip(cut, true, &r));
  s = read_all_records(r, &n2, o2, l2, f2, e2);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
  ck_assert_msg(strstr(lv_status_msg(s), "cut.tfrecord.gz (gzip; offsets uncompressed): the gzip data ends early"),
                "got: %s", lv_status_msg(s));
  ck_assert_int_gt(n2, 0);
  ck_assert_int_lt(n2, kN);
  lv_status_free(s);
  lv_tfrecord_reader_close(r);
  free(file);
  free(d);
  remove_tmpdir();
}
END_TEST

/* ---- tf.Example ---- */

static lv_example *sample_example(void) {
  lv_example *e = lv_example_new();
  const char *words[3] = {"hello", "", "w\0rld"};
  size_t wl[3] = {5, 0, 5};
  lv_example_add_bytes(e, "source_word", 3, words, wl);
  float f[1000];
  for (int i = 0; i < 1000; i++) f[i] = (float)i * 0.5f - 7.25f;
  lv_example_add_floats(e, "frames", 1000, f);
  int64_t ids[6] = {0, 1, -1, 127, 128, INT64_MIN};
  lv_example_add_int64s(e, "source_id", 6, ids);
  lv_example_add_int64s(e, "empty", 0, NULL);
  return e;
}

static void check_sample(const lv_example *e) {
  ck_assert_int_eq(lv_example_num_features(e), 4);
  ck_assert_str_eq(lv_example_feature_key(e, 0), "source_word");
  ck_assert_str_eq(lv_example_feature_key(e, 3), "empty");
  ck_assert_int_eq(lv_example_feature_kind(e, 1), LV_FEATURE_FLOAT);
  ck_assert_int_eq(lv_example_feature_size(e, 1), 1000);
  const uint8_t *b;
  size_t bl;
  int n;
  ck_assert(lv_example_get_bytes(e, "source_word", 0, &b, &bl, &n));
  ck_assert_int_eq(n, 3);
  ck_assert_uint_eq(bl, 5);
  ck_assert_int_eq(memcmp(b, "hello", 5), 0);
  ck_assert(lv_example_get_bytes(e, "source_word", 1, &b, &bl, &n));
  ck_assert_uint_eq(bl, 0);
  ck_assert(lv_example_get_bytes(e, "source_word", 2, &b, &bl, &n));
  ck_assert_int_eq(memcmp(b, "w\0rld", 5), 0);
  ck_assert(!lv_example_get_bytes(e, "source_word", 3, &b, &bl, &n));
  const float *f;
  ck_assert(lv_example_get_floats(e, "frames", &f, &n));
  ck_assert_int_eq(n, 1000);
  for (int i = 0; i < 1000; i++) ck_assert(f[i] == (float)i * 0.5f - 7.25f);
  const int64_t *ids;
  ck_assert(lv_example_get_int64s(e, "source_id", &ids, &n));
  ck_assert_int_eq(n, 6);
  ck_assert(ids[2] == -1 && ids[4] == 128 && ids[5] == INT64_MIN);
  ck_assert(lv_example_get_int64s(e, "empty", &ids, &n));
  ck_assert_int_eq(n, 0);
  ck_assert(!lv_example_get_floats(e, "source_id", &f, &n));
  ck_assert(!lv_example_get_int64s(e, "nope", &ids, &n));
}

START_TEST(test_example_round_trip) {
  lv_example *e = sample_example();
  check_sample(e);
  uint8_t *buf;
  size_t len;
  ok(lv_example_serialize(e, &buf, &len));
  lv_example_free(e);
  lv_example *p;
  ok(lv_example_parse(buf, len, &p));
  check_sample(p);
  /* Re-serializing the parsed example gives the same bytes. */
  uint8_t *buf2;
  size_t len2;
  ok(lv_example_serialize(p, &buf2, &len2));
  ck_assert_uint_eq(len2, len);
  ck_assert_int_eq(memcmp(buf, buf2, len), 0);
  lv_example_free(p);
  /* protobuf-c's own decoder reads our bytes the same way. */
  Tensorflow__Example *pe = tensorflow__example__unpack(NULL, len, buf);
  ck_assert_ptr_nonnull(pe);
  ck_assert_uint_eq(pe->features->n_feature, 4);
  Tensorflow__Features__FeatureEntry *fe = pe->features->feature[2];
  ck_assert_str_eq(fe->key, "source_id");
  ck_assert_int_eq(fe->value->kind_case, TENSORFLOW__FEATURE__KIND_INT64_LIST);
  ck_assert(fe->value->int64_list->value[5] == INT64_MIN);
  ck_assert(pe->features->feature[1]->value->float_list->value[999] == 999 * 0.5f - 7.25f);
  tensorflow__example__free_unpacked(pe, NULL);
  /* Every truncation is either a valid shorter message or CORRUPT; never a crash. */
  for (size_t cut = 0; cut < len; cut++) {
    lv_example *t = NULL;
    lv_status s = lv_example_parse(buf, cut, &t);
    if (s) {
      ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
      ck_assert_ptr_null(t);
      lv_status_free(s);
    } else {
      lv_example_free(t);
    }
  }
  free(buf);
  free(buf2);
}
END_TEST

/* Hand-written wire bytes: unpacked repeated scalars, unknown fields, a repeated key (last
 * wins), an entry without a value. */
START_TEST(test_example_wire_variants) {
  static const uint8_t wire[] = {
      0x0a, 0x35,                                           /* Example.features, 53 bytes */
      0x0a, 0x11,                                           /* entry, 17 */
      0x0a, 0x01, 'f',                                      /* key "f" */
      0x12, 0x0c, 0x12, 0x0a,                               /* value: float_list, 10 */
      0x0d, 0x00, 0x00, 0x80, 0x3f,                         /* value 1.0 (fixed32) */
      0x0d, 0x00, 0x00, 0x00, 0x40,                         /* value 2.0 */
      0x0a, 0x0c,                                           /* entry, 12 */
      0x0a, 0x01, 'i',                                      /* key "i" */
      0x12, 0x07, 0x1a, 0x05,                               /* value: int64_list, 5 */
      0x08, 0x05,                                           /* value 5 (varint) */
      0x0a, 0x01, 0x07,                                     /* packed [7] */
      0x0a, 0x0b,                                           /* entry, 11 */
      0x0a, 0x01, 'f',                                      /* key "f" again */
      0x12, 0x06, 0x0a, 0x04, 0x0a, 0x02, 'o', 'k',         /* bytes_list ["ok"] */
      0x0a, 0x03, 0x0a, 0x01, 'e',                          /* key "e", no value */
      0x18, 0x01,                                           /* Features field 3: unknown */
      0x10, 0x2a,                                           /* Example field 2: unknown */
  };
  lv_example *e;
  ok(lv_example_parse(wire, sizeof wire, &e));
  ck_assert_int_eq(lv_example_num_features(e), 3);
  const uint8_t *b;
  size_t bl;
  int n;
  ck_assert(lv_example_get_bytes(e, "f", 0, &b, &bl, &n));
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(memcmp(b, "ok", 2), 0);
  const int64_t *iv;
  ck_assert(lv_example_get_int64s(e, "i", &iv, &n));
  ck_assert_int_eq(n, 2);
  ck_assert(iv[0] == 5 && iv[1] == 7);
  ck_assert_int_eq(lv_example_feature_kind(e, 2), LV_FEATURE_NONE);
  lv_example_free(e);

  /* Malformed: a length running past its message, reported with its byte offset. */
  static const uint8_t bad[] = {0x0a, 0x05, 0x0a, 0x09, 0x0a, 0x01, 'x'};
  lv_status s = lv_example_parse(bad, sizeof bad, &e);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
  ck_assert_ptr_nonnull(strstr(lv_status_msg(s), "byte 3 of 7"));
  lv_status_free(s);
  /* A packed float list whose length is not a multiple of 4. */
  static const uint8_t bad2[] = {0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'f', 0x12, 0x05,
                                 0x12, 0x03, 0x0a, 0x01, 0x00};
  s = lv_example_parse(bad2, sizeof bad2, &e);
  ck_assert_ptr_nonnull(s);
  ck_assert_ptr_nonnull(strstr(lv_status_msg(s), "multiple of 4"));
  lv_status_free(s);
  /* Empty packed lists (valid protobuf, what a writer may emit for []): zero values, and
   * no memcpy to the list's NULL array (UBSan's "null pointer passed as argument"). */
  static const uint8_t empty[] = {
      0x0a, 0x16,                         /* Example.features, 22 bytes */
      0x0a, 0x09, 0x0a, 0x01, 'f',        /* entry, 9: key "f" */
      0x12, 0x04, 0x12, 0x02, 0x0a, 0x00, /* float_list: packed, 0 bytes */
      0x0a, 0x09, 0x0a, 0x01, 'i',        /* entry, 9: key "i" */
      0x12, 0x04, 0x1a, 0x02, 0x0a, 0x00, /* int64_list: packed, 0 bytes */
  };
  ok(lv_example_parse(empty, sizeof empty, &e));
  const float *fv;
  ck_assert(lv_example_get_floats(e, "f", &fv, &n));
  ck_assert_int_eq(n, 0);
  ck_assert(lv_example_get_int64s(e, "i", &iv, &n));
  ck_assert_int_eq(n, 0);
  lv_example_free(e);
  /* Group wire types are refused. */
  static const uint8_t bad3[] = {0x0b};
  s = lv_example_parse(bad3, sizeof bad3, &e);
  ck_assert_ptr_nonnull(s);
  lv_status_free(s);
}
END_TEST

/* Random damage to a valid example: parse returns OK or CORRUPT, never crashes or reads
 * out of bounds (run under ASan by `make asan`). */
START_TEST(test_example_random_damage) {
  lv_example *e = sample_example();
  uint8_t *buf;
  size_t len;
  ok(lv_example_serialize(e, &buf, &len));
  lv_example_free(e);
  uint32_t x = 12345;
  uint8_t *copy = malloc(len);
  for (int iter = 0; iter < 3000; iter++) {
    memcpy(copy, buf, len);
    for (int k = 0; k < 3; k++) {
      x = x * 1664525u + 1013904223u;
      size_t pos = (x >> 8) % 64; /* the headers and key area, where damage is interesting */
      x = x * 1664525u + 1013904223u;
      copy[pos % len] ^= (uint8_t)(x >> 24);
    }
    lv_example *t = NULL;
    lv_status s = lv_example_parse(copy, len, &t);
    if (s) {
      ck_assert_int_eq(lv_status_code(s), LV_ERR_CORRUPT);
      lv_status_free(s);
    } else {
      lv_example_free(t);
    }
  }
  free(copy);
  free(buf);
}
END_TEST

/* `check_records --write PATH`: five tf.Examples for tests/test_print_tf_records.sh. */
static int write_print_sample(const char *path) {
  lv_tfrecord_writer *w;
  lv_status s = lv_tfrecord_writer_open(path, false, &w);
  for (int r = 0; r < 5 && !s; r++) {
    lv_example *e = lv_example_new();
    const char *words[2] = {"it's", "\xff"};
    size_t wl[2] = {4, 1};
    lv_example_add_bytes(e, "word", 2, words, wl);
    float f[10];
    for (int i = 0; i < 10; i++) f[i] = (float)(r + i) * 0.5f;
    lv_example_add_floats(e, "frames", 10, f);
    int64_t ids[3] = {r, -1, 1LL << 40};
    lv_example_add_int64s(e, "ids", 3, ids);
    uint8_t *b;
    size_t n;
    s = lv_example_serialize(e, &b, &n);
    if (!s) s = lv_tfrecord_writer_write(w, b, n);
    free(b);
    lv_example_free(e);
  }
  lv_status c = lv_tfrecord_writer_close(w);
  if (!s) s = c; else lv_status_free(c);
  return s ? lv_status_report("check_records", s) : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--write") == 0) return write_print_sample(argv[2]);
  if (argc != 1) {
    fprintf(stderr, "usage: check_records [--write PATH]\n");
    return 2;
  }
  Suite *su = suite_create("records");
  TCase *tc = tcase_create("tfrecord");
  tcase_add_test(tc, test_crc_known_values);
  tcase_add_test(tc, test_tf_written_file);
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_every_flip_detected);
  tcase_add_test(tc, test_resync_after_garbage);
  tcase_add_test(tc, test_gzip_stream);
  suite_add_tcase(su, tc);
  TCase *te = tcase_create("example");
  tcase_add_test(te, test_example_round_trip);
  tcase_add_test(te, test_example_wire_variants);
  tcase_add_test(te, test_example_random_damage);
  suite_add_tcase(su, te);
  return lv_test_run(su);
}
