/* libFuzzer target for the tensor bundle reader (src/io/bundle.c, leveldb_table.c).
 * Input: a mode byte, then
 *  - mode even (raw): 2 bytes little-endian index length k, k bytes of PREFIX.index, then
 *    the bytes of PREFIX.data-00000-of-00001;
 *  - mode odd (structured): records [1-byte key length][key][1-byte value length][value]
 *    until a zero key length, then the data file. The records are sorted and written with
 *    lv_table_builder, so the block checksums are right and the fuzzer reaches the entry
 *    (BundleEntryProto / header) validation and the tensor reads behind them.
 * The reader must return an error or valid entries whose reads fail cleanly or succeed;
 * it must never crash, hang or overrun. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/bundle.h"
#include "io/leveldb_table.h"
#include "fuzz_util.h"

static char g_dir[256];
static char g_prefix[300];

static void cleanup(void) {
  char p[400];
  snprintf(p, sizeof p, "%s.index", g_prefix);
  unlink(p);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", g_prefix);
  unlink(p);
  rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_mkdtemp("fuzz_bundle", g_dir, sizeof g_dir);
  snprintf(g_prefix, sizeof g_prefix, "%s/ckpt", g_dir);
  atexit(cleanup);
  return 0;
}

typedef struct {
  const uint8_t *k, *v;
  size_t kl, vl;
} rec;

static int rec_cmp(const void *a, const void *b) {
  const rec *x = a, *y = b;
  size_t m = x->kl < y->kl ? x->kl : y->kl;
  int c = m ? memcmp(x->k, y->k, m) : 0;
  return c ? c : (x->kl > y->kl) - (x->kl < y->kl);
}

/* Builds a well-formed table from the records; returns bytes consumed. */
static size_t build_structured(const uint8_t *data, size_t size, const char *path) {
  rec recs[256];
  int n = 0;
  size_t pos = 0;
  int have_header = 0;
  while (pos < size && n < 256) {
    size_t kl = data[pos++];
    if (kl == 0 || kl > size - pos) break;
    const uint8_t *k = data + pos;
    pos += kl;
    if (pos >= size) break;
    size_t vl = data[pos++];
    if (vl > size - pos) vl = size - pos;
    /* Key "\x01" stands for the header's empty key. */
    if (kl == 1 && k[0] == 1) kl = 0, have_header = 1;
    recs[n++] = (rec){k, data + pos, kl, vl};
    pos += vl;
  }
  (void)have_header;
  qsort(recs, (size_t)n, sizeof(rec), rec_cmp);
  lv_table_builder *b = lv_table_builder_new(64 + (size % 512));
  for (int i = 0; i < n; i++) {
    if (i > 0 && rec_cmp(&recs[i - 1], &recs[i]) == 0) continue;
    lv_table_builder_add(b, recs[i].k, recs[i].kl, recs[i].v, recs[i].vl);
  }
  const uint8_t *t;
  size_t tl;
  lv_table_builder_finish(b, &t, &tl);
  put_file(path, t, tl);
  lv_table_builder_free(b);
  return pos;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  int structured = data[0] & 1;
  data++;
  size--;
  char p[400];
  snprintf(p, sizeof p, "%s.index", g_prefix);
  size_t k;
  if (structured) {
    k = build_structured(data, size, p);
  } else {
    k = (size_t)data[0] | (size_t)data[1] << 8;
    data += 2;
    size -= 2;
    if (k > size) k = size;
    put_file(p, data, k);
  }
  snprintf(p, sizeof p, "%s.data-00000-of-00001", g_prefix);
  put_file(p, data + k, size - k);

  lv_bundle_reader *r;
  lv_status s = lv_bundle_reader_open(g_prefix, &r);
  if (s) {
    lv_status_free(s);
    return 0;
  }
  for (int i = 0; i < lv_bundle_reader_count(r); i++) {
    const lv_bundle_entry *e = lv_bundle_reader_entry(r, i);
    if (lv_bundle_reader_find(r, e->name) != e) abort();
    if (e->dtype == LV_STRING) {
      char **strs;
      size_t *lens;
      s = lv_bundle_reader_read_strings(r, e, &strs, &lens);
      if (!s) {
        int64_t n = lv_shape_numel(&e->shape);
        for (int64_t j = 0; j < n; j++)
          if (strlen(strs[j]) > lens[j]) abort();
        lv_bundle_strings_free(strs, lens, n);
      }
    } else {
      /* Entries were validated against the data file, so size <= the input size. */
      void *buf = malloc(e->size ? e->size : 1);
      s = lv_bundle_reader_read(r, e, buf, e->size);
      free(buf);
    }
    lv_status_free(s);
  }
  lv_bundle_reader_close(r);
  return 0;
}
