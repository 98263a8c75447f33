#include "io/leveldb_table.h"

#include <snappy-c.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"

/* ---- growable byte buffer ---- */

typedef struct {
  uint8_t *p;
  size_t len, cap;
} buf_t;

static void buf_reserve(buf_t *b, size_t extra) {
  if (b->len + extra <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra) cap *= 2;
  b->p = realloc(b->p, cap);
  LV_ASSERT(b->p);
  b->cap = cap;
}
static void buf_append(buf_t *b, const void *d, size_t n) {
  if (n == 0) return;
  buf_reserve(b, n);
  memcpy(b->p + b->len, d, n);
  b->len += n;
}
static void buf_u32(buf_t *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  buf_append(b, x, 4);
}
static void buf_varint(buf_t *b, uint64_t v) {
  uint8_t x[10];
  buf_append(b, x, lv_varint64_encode(x, v));
}

size_t lv_varint64_encode(uint8_t *p, uint64_t v) {
  size_t i = 0;
  while (v >= 0x80) {
    p[i++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[i++] = (uint8_t)v;
  return i;
}

size_t lv_varint64_decode(const uint8_t *p, size_t n, uint64_t *out) {
  uint64_t v = 0;
  for (size_t i = 0; i < n && i < 10; i++) {
    uint64_t byte = p[i];
    if (i == 9 && byte > 1) return 0; /* more than 64 bits */
    v |= (byte & 0x7f) << (7 * i);
    if (!(byte & 0x80)) {
      *out = v;
      return i + 1;
    }
  }
  return 0;
}

static size_t varint32_decode(const uint8_t *p, size_t n, uint32_t *out) {
  uint64_t v;
  size_t k = lv_varint64_decode(p, n < 5 ? n : 5, &v);
  if (k == 0 || v > UINT32_MAX) return 0;
  *out = (uint32_t)v;
  return k;
}

static uint32_t load_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- builder ---- */

enum { kRestartInterval = 16 };

typedef struct {
  buf_t data;
  uint32_t *restarts;
  int nrestarts, cap_restarts;
  int counter; /* entries since the last restart */
  int interval;
  buf_t last_key;
  int nentries;
} block_builder;

struct lv_table_builder {
  size_t block_size;
  buf_t file;
  block_builder data, index;
  buf_t pending_key; /* last key of the block just flushed, indexed at the next add/finish */
  uint64_t pending_off, pending_size;
  bool pending;
  buf_t scratch;
  bool finished;
};

static void block_reset(block_builder *bb) {
  bb->data.len = 0;
  bb->last_key.len = 0;
  bb->nrestarts = 0;
  bb->counter = 0;
  bb->nentries = 0;
  if (bb->cap_restarts == 0) {
    bb->cap_restarts = 64;
    bb->restarts = malloc(sizeof(uint32_t) * 64);
    LV_ASSERT(bb->restarts);
  }
  bb->restarts[bb->nrestarts++] = 0;
}

static void block_add(block_builder *bb, const uint8_t *key, size_t klen, const uint8_t *val,
                      size_t vlen) {
  size_t shared = 0;
  if (bb->counter < bb->interval) {
    size_t m = bb->last_key.len < klen ? bb->last_key.len : klen;
    while (shared < m && bb->last_key.p[shared] == key[shared]) shared++;
  } else {
    if (bb->nrestarts == bb->cap_restarts) {
      bb->cap_restarts *= 2;
      bb->restarts = realloc(bb->restarts, sizeof(uint32_t) * (size_t)bb->cap_restarts);
      LV_ASSERT(bb->restarts);
    }
    bb->restarts[bb->nrestarts++] = (uint32_t)bb->data.len;
    bb->counter = 0;
  }
  buf_varint(&bb->data, shared);
  buf_varint(&bb->data, klen - shared);
  buf_varint(&bb->data, vlen);
  buf_append(&bb->data, key + shared, klen - shared);
  buf_append(&bb->data, val, vlen);
  bb->last_key.len = 0;
  buf_append(&bb->last_key, key, klen);
  bb->counter++;
  bb->nentries++;
}

static size_t block_estimate(const block_builder *bb) {
  return bb->data.len + 4u * (size_t)bb->nrestarts + 4;
}

static void block_finish(block_builder *bb) {
  for (int i = 0; i < bb->nrestarts; i++) buf_u32(&bb->data, bb->restarts[i]);
  buf_u32(&bb->data, (uint32_t)bb->nrestarts);
}

/* Appends the block's contents and trailer to the file; returns its handle. */
static void write_block(lv_table_builder *b, block_builder *bb, uint64_t *off, uint64_t *size) {
  block_finish(bb);
  const uint8_t *contents = bb->data.p;
  size_t n = bb->data.len;
  uint8_t type = 0;
  size_t max = snappy_max_compressed_length(n);
  b->scratch.len = 0;
  buf_reserve(&b->scratch, max);
  size_t clen = max;
  if (snappy_compress((const char *)contents, n, (char *)b->scratch.p, &clen) == SNAPPY_OK &&
      clen < n - n / 8) {
    contents = b->scratch.p;
    n = clen;
    type = 1;
  }
  *off = b->file.len;
  *size = n;
  buf_append(&b->file, contents, n);
  uint32_t crc = lv_crc32c_extend(lv_crc32c(contents, n), &type, 1);
  buf_append(&b->file, &type, 1);
  buf_u32(&b->file, lv_crc32c_mask(crc));
  block_reset(bb);
}

/* LevelDB's bytewise FindShortestSeparator (next != NULL) and FindShortSuccessor: the
 * index key only has to be >= the block's last key and < the next block's first key, so
 * it is shortened as LevelDB and TensorFlow do, which keeps our index byte-identical. */
static void shorten_key(buf_t *k, const uint8_t *next, size_t nlen) {
  if (next) {
    size_t m = k->len < nlen ? k->len : nlen, i = 0;
    while (i < m && k->p[i] == next[i]) i++;
    if (i < m && k->p[i] < 0xff && (uint8_t)(k->p[i] + 1) < next[i]) {
      k->p[i]++;
      k->len = i + 1;
    }
    return;
  }
  for (size_t i = 0; i < k->len; i++)
    if (k->p[i] != 0xff) {
      k->p[i]++;
      k->len = i + 1;
      return;
    }
}

static void add_index_entry(lv_table_builder *b, const uint8_t *next, size_t nlen) {
  shorten_key(&b->pending_key, next, nlen);
  uint8_t h[20];
  size_t k = lv_varint64_encode(h, b->pending_off);
  k += lv_varint64_encode(h + k, b->pending_size);
  block_add(&b->index, b->pending_key.p, b->pending_key.len, h, k);
  b->pending = false;
}

static void flush_data(lv_table_builder *b) {
  if (b->data.nentries == 0) return;
  b->pending_key.len = 0;
  buf_append(&b->pending_key, b->data.last_key.p, b->data.last_key.len);
  write_block(b, &b->data, &b->pending_off, &b->pending_size);
  b->pending = true;
}

lv_table_builder *lv_table_builder_new(size_t block_size) {
  lv_table_builder *b = calloc(1, sizeof(*b));
  LV_ASSERT(b);
  b->block_size = block_size ? block_size : 4096;
  b->data.interval = kRestartInterval;
  b->index.interval = 1; /* as LevelDB: index entries are looked up by binary search */
  block_reset(&b->data);
  block_reset(&b->index);
  return b;
}

void lv_table_builder_free(lv_table_builder *b) {
  if (!b) return;
  block_builder *bbs[2] = {&b->data, &b->index};
  for (int i = 0; i < 2; i++) {
    free(bbs[i]->data.p);
    free(bbs[i]->last_key.p);
    free(bbs[i]->restarts);
  }
  free(b->file.p);
  free(b->pending_key.p);
  free(b->scratch.p);
  free(b);
}

static int key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
  size_t m = alen < blen ? alen : blen;
  int c = m ? memcmp(a, b, m) : 0;
  if (c) return c;
  return alen < blen ? -1 : alen > blen ? 1 : 0;
}

void lv_table_builder_add(lv_table_builder *b, const void *key, size_t klen, const void *val,
                          size_t vlen) {
  LV_ASSERT(!b->finished);
  if (b->data.nentries > 0 || b->pending)
    LV_ASSERTF(key_cmp(b->data.nentries ? b->data.last_key.p : b->pending_key.p,
                       b->data.nentries ? b->data.last_key.len : b->pending_key.len, key,
                       klen) < 0,
               "table keys must be strictly increasing");
  if (b->pending) add_index_entry(b, key, klen);
  block_add(&b->data, key, klen, val, vlen);
  if (block_estimate(&b->data) >= b->block_size) flush_data(b);
}

void lv_table_builder_finish(lv_table_builder *b, const uint8_t **data, size_t *len) {
  if (!b->finished) {
    flush_data(b);
    if (b->pending) add_index_entry(b, NULL, 0);
    block_builder meta = {0};
    meta.interval = kRestartInterval;
    block_reset(&meta);
    uint64_t meta_off, meta_size, index_off, index_size;
    write_block(b, &meta, &meta_off, &meta_size);
    free(meta.data.p);
    free(meta.last_key.p);
    free(meta.restarts);
    write_block(b, &b->index, &index_off, &index_size);
    uint8_t footer[LV_TABLE_FOOTER_SIZE] = {0};
    size_t k = lv_varint64_encode(footer, meta_off);
    k += lv_varint64_encode(footer + k, meta_size);
    k += lv_varint64_encode(footer + k, index_off);
    k += lv_varint64_encode(footer + k, index_size);
    for (int i = 0; i < 8; i++) footer[40 + i] = (uint8_t)(LV_TABLE_MAGIC >> (8 * i));
    buf_append(&b->file, footer, sizeof footer);
    b->finished = true;
  }
  *data = b->file.p;
  *len = b->file.len;
}

/* ---- scanner ---- */

typedef struct {
  const char *path;
  const uint8_t *file;
  size_t n;
  uint8_t *scratch; /* decompressed block */
  size_t scratch_cap;
} scan_ctx;

/* The largest expansion snappy's format allows is a 64-byte copy from a 3-byte tag;
 * bounding the claimed size keeps a forged length from asking for gigabytes. */
static const size_t kMaxBlock = (size_t)1 << 30;

static lv_status read_handle(scan_ctx *c, const uint8_t *p, size_t n, uint64_t where,
                             uint64_t *off, uint64_t *size, size_t *used) {
  size_t a = lv_varint64_decode(p, n, off);
  size_t b = a ? lv_varint64_decode(p + a, n - a, size) : 0;
  if (!a || !b)
    return lv_status_make(LV_ERR_CORRUPT, "%s: offset %llu: malformed block handle", c->path,
                          (unsigned long long)where);
  *used = a + b;
  uint64_t limit = c->n - LV_TABLE_FOOTER_SIZE;
  if (*off > limit || *size > limit - *off || LV_TABLE_BLOCK_TRAILER_SIZE > limit - *off - *size)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: offset %llu: block handle [%llu, +%llu) points outside the %llu "
                          "bytes before the footer",
                          c->path, (unsigned long long)where, (unsigned long long)*off,
                          (unsigned long long)*size, (unsigned long long)limit);
  return NULL;
}

/* Verifies the trailer and returns the uncompressed contents (pointing into the file or
 * into c->scratch). */
static lv_status read_block(scan_ctx *c, uint64_t off, uint64_t size, const uint8_t **out,
                            size_t *out_len) {
  const uint8_t *p = c->file + off;
  uint8_t type = p[size];
  uint32_t stored = lv_crc32c_unmask(load_u32(p + size + 1));
  uint32_t actual = lv_crc32c(p, size + 1);
  if (stored != actual)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu (%llu bytes): crc32c mismatch (stored "
                          "0x%08x, computed 0x%08x)",
                          c->path, (unsigned long long)off, (unsigned long long)size, stored,
                          actual);
  if (type == 0) {
    *out = p;
    *out_len = size;
    return NULL;
  }
  if (type != 1)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu: unknown compression type %u (expected 0 "
                          "raw or 1 snappy)",
                          c->path, (unsigned long long)off, type);
  size_t ulen;
  if (snappy_uncompressed_length((const char *)p, size, &ulen) != SNAPPY_OK ||
      ulen > kMaxBlock || ulen > 32 * size + 64 ||
      snappy_validate_compressed_buffer((const char *)p, size) != SNAPPY_OK)
    return lv_status_make(LV_ERR_CORRUPT, "%s: block at offset %llu: invalid snappy data",
                          c->path, (unsigned long long)off);
  if (ulen > c->scratch_cap) {
    free(c->scratch);
    c->scratch = malloc(ulen ? ulen : 1);
    if (!c->scratch) {
      c->scratch_cap = 0;
      return lv_status_make(LV_ERR_RESOURCE, "%s: block at offset %llu: cannot allocate %zu bytes",
                            c->path, (unsigned long long)off, ulen);
    }
    c->scratch_cap = ulen;
  }
  size_t got = ulen;
  if (snappy_uncompress((const char *)p, size, (char *)c->scratch, &got) != SNAPPY_OK ||
      got != ulen)
    return lv_status_make(LV_ERR_CORRUPT, "%s: block at offset %llu: snappy decompression failed",
                          c->path, (unsigned long long)off);
  *out = c->scratch;
  *out_len = ulen;
  return NULL;
}

typedef lv_status (*entry_fn)(void *ctx, const uint8_t *key, size_t klen, const uint8_t *val,
                              size_t vlen);

/* Walks every entry of a block, checking varints, prefix lengths and that the restart
 * array points exactly at the entries stored with no shared prefix. `key` is a buffer
 * the caller owns (grown here). */
static lv_status parse_block(scan_ctx *c, uint64_t where, const uint8_t *b, size_t n,
                             buf_t *key, entry_fn fn, void *ctx) {
  if (n < 4)
    return lv_status_make(LV_ERR_CORRUPT, "%s: block at offset %llu: %zu bytes, too short",
                          c->path, (unsigned long long)where, n);
  uint32_t nr = load_u32(b + n - 4);
  if (nr == 0 || nr > (n - 4) / 4)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu: %u restart points do not fit in %zu bytes",
                          c->path, (unsigned long long)where, nr, n);
  size_t limit = n - 4 - 4 * (size_t)nr;
  const uint8_t *restarts = b + limit;
  uint32_t ri = 0;
  size_t pos = 0;
  key->len = 0;
  while (pos < limit) {
    bool at_restart = ri < nr && load_u32(restarts + 4 * ri) == pos;
    uint32_t shared, non_shared, vlen;
    size_t k1 = varint32_decode(b + pos, limit - pos, &shared);
    size_t k2 = k1 ? varint32_decode(b + pos + k1, limit - pos - k1, &non_shared) : 0;
    size_t k3 = k2 ? varint32_decode(b + pos + k1 + k2, limit - pos - k1 - k2, &vlen) : 0;
    if (!k3)
      return lv_status_make(LV_ERR_CORRUPT,
                            "%s: block at offset %llu: malformed entry header at block byte %zu",
                            c->path, (unsigned long long)where, pos);
    size_t body = pos + k1 + k2 + k3;
    if (shared > key->len || (uint64_t)non_shared + vlen > limit - body)
      return lv_status_make(LV_ERR_CORRUPT,
                            "%s: block at offset %llu: entry at block byte %zu has lengths "
                            "(shared %u, key %u, value %u) beyond the block",
                            c->path, (unsigned long long)where, pos, shared, non_shared, vlen);
    if (at_restart && shared != 0)
      return lv_status_make(LV_ERR_CORRUPT,
                            "%s: block at offset %llu: restart array disagrees with the entry at "
                            "block byte %zu",
                            c->path, (unsigned long long)where, pos);
    if (at_restart) ri++;
    key->len = shared;
    buf_append(key, b + body, non_shared);
    LV_TRY(fn(ctx, key->p ? key->p : (const uint8_t *)"", key->len, b + body + non_shared, vlen));
    pos = body + non_shared + vlen;
  }
  /* An empty block has the single restart point 0 and no entries. */
  bool empty_ok = pos == 0 && nr == 1 && load_u32(restarts) == 0;
  if (ri != nr && !empty_ok)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu: %u restart points but %u match entries",
                          c->path, (unsigned long long)where, nr, ri);
  return NULL;
}

typedef struct {
  scan_ctx *c;
  lv_table_visit_fn fn;
  void *ctx;
  buf_t prev;     /* last data key seen */
  bool have_prev;
  buf_t dkey;     /* key buffer for data blocks */
  uint64_t block_off;
  const uint8_t *index_key;
  size_t index_klen;
  uint8_t *index_copy; /* index block copied out of scratch, which data blocks reuse */
  uint64_t min_off;    /* data blocks must follow one another without overlapping */
} walk_ctx;

static lv_status on_data_entry(void *vctx, const uint8_t *key, size_t klen, const uint8_t *val,
                               size_t vlen) {
  walk_ctx *w = vctx;
  if (w->have_prev && key_cmp(w->prev.p, w->prev.len, key, klen) >= 0)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu: keys out of order (\"%.*s\" after \"%.*s\")",
                          w->c->path, (unsigned long long)w->block_off, (int)(klen > 200 ? 200 : klen),
                          (const char *)key, (int)(w->prev.len > 200 ? 200 : w->prev.len),
                          (const char *)w->prev.p);
  if (key_cmp(key, klen, w->index_key, w->index_klen) > 0)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu: key \"%.*s\" is beyond its index entry",
                          w->c->path, (unsigned long long)w->block_off,
                          (int)(klen > 200 ? 200 : klen), (const char *)key);
  w->prev.len = 0;
  buf_append(&w->prev, key, klen);
  w->have_prev = true;
  return w->fn(w->ctx, key, klen, val, vlen, w->block_off);
}

static lv_status on_index_entry(void *vctx, const uint8_t *key, size_t klen, const uint8_t *val,
                                size_t vlen) {
  walk_ctx *w = vctx;
  uint64_t off, size;
  size_t used;
  LV_TRY(read_handle(w->c, val, vlen, w->block_off, &off, &size, &used));
  if (used != vlen)
    return lv_status_make(LV_ERR_CORRUPT, "%s: index entry has %zu trailing bytes", w->c->path,
                          vlen - used);
  /* Writers lay data blocks out in key order; requiring that also bounds the work a forged
   * index can cause (no block is checksummed or decompressed twice). */
  if (off < w->min_off)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: offset %llu: index points at a data block at %llu that overlaps "
                          "or precedes the previous one (ends at %llu)",
                          w->c->path, (unsigned long long)w->block_off, (unsigned long long)off,
                          (unsigned long long)w->min_off);
  w->min_off = off + size + LV_TABLE_BLOCK_TRAILER_SIZE;
  const uint8_t *contents;
  size_t clen;
  LV_TRY(read_block(w->c, off, size, &contents, &clen));
  uint64_t saved = w->block_off;
  w->block_off = off;
  w->index_key = key;
  w->index_klen = klen;
  lv_status s = parse_block(w->c, off, contents, clen, &w->dkey, on_data_entry, w);
  w->block_off = saved;
  return s;
}

lv_status lv_table_scan(const char *path, const uint8_t *data, size_t n, lv_table_visit_fn fn,
                        void *ctx) {
  if (n < LV_TABLE_FOOTER_SIZE)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: %zu bytes, shorter than the 48-byte LevelDB table footer", path, n);
  const uint8_t *footer = data + n - LV_TABLE_FOOTER_SIZE;
  uint64_t magic = (uint64_t)load_u32(footer + 40) | (uint64_t)load_u32(footer + 44) << 32;
  if (magic != LV_TABLE_MAGIC)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: offset %zu: bad table magic 0x%016llx (expected 0x%016llx); not a "
                          "checkpoint index",
                          path, n - 8, (unsigned long long)magic, (unsigned long long)LV_TABLE_MAGIC);
  scan_ctx c = {path, data, n, NULL, 0};
  uint64_t moff, msize, ioff, isize;
  size_t u1, u2;
  uint64_t foff = n - LV_TABLE_FOOTER_SIZE;
  lv_status s = read_handle(&c, footer, 40, foff, &moff, &msize, &u1);
  if (!s) s = read_handle(&c, footer + u1, 40 - u1, foff, &ioff, &isize, &u2);
  const uint8_t *meta, *index;
  size_t mlen, ilen;
  /* The meta-index block is checked (crc) but TensorFlow never stores anything in it. */
  if (!s) s = read_block(&c, moff, msize, &meta, &mlen);
  walk_ctx w = {0};
  w.c = &c;
  w.fn = fn;
  w.ctx = ctx;
  w.block_off = ioff;
  if (!s) s = read_block(&c, ioff, isize, &index, &ilen);
  if (!s && index == c.scratch) {
    w.index_copy = malloc(ilen ? ilen : 1);
    LV_ASSERT(w.index_copy);
    memcpy(w.index_copy, index, ilen);
    index = w.index_copy;
  }
  buf_t ikey = {0};
  if (!s) s = parse_block(&c, ioff, index, ilen, &ikey, on_index_entry, &w);
  free(ikey.p);
  free(w.prev.p);
  free(w.dkey.p);
  free(w.index_copy);
  free(c.scratch);
  return s;
}
