/* The bucketing batcher (see batcher.h). */
#include "input/batcher.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

struct lv_sample {
  int n_features;
  const lv_batcher_feature *ft; /* the batcher's [n_features] */
  int64_t key;
  int64_t len[LV_BATCHER_MAX_FEATURES];  /* steps; bytes of a string */
  void *data[LV_BATCHER_MAX_FEATURES];   /* [len, inner...] 4-byte elements; a string's bytes + NUL */
};

void lv_sample_set(lv_sample *s, int f, const void *vals, int64_t n) {
  LV_ASSERT(f >= 0 && f < s->n_features && n >= 0 && s->ft[f].dtype != LV_STRING);
  size_t bytes = (size_t)n * (size_t)lv_shape_numel(&s->ft[f].inner) * 4;
  free(s->data[f]);
  s->data[f] = malloc(bytes ? bytes : 1);
  LV_ASSERT(s->data[f]);
  if (bytes) memcpy(s->data[f], vals, bytes);
  s->len[f] = n;
}

void lv_sample_set_str(lv_sample *s, int f, const char *str, size_t n) {
  LV_ASSERT(f >= 0 && f < s->n_features && s->ft[f].dtype == LV_STRING && n < INT64_MAX);
  free(s->data[f]);
  char *copy = malloc(n + 1);
  LV_ASSERT(copy);
  if (n) memcpy(copy, str, n);
  copy[n] = 0;
  s->data[f] = copy;
  s->len[f] = (int64_t)n;
}

static void sample_free(lv_sample *s) {
  if (!s) return;
  for (int f = 0; f < s->n_features; f++) free(s->data[f]);
  free(s);
}

/* ---- batch stores ---- */

void lv_batch_store_init(lv_batch_store *st) {
  memset(st, 0, sizeof *st);
  lv_batch_init(&st->batch);
}

void lv_batch_store_free(lv_batch_store *st) {
  for (int i = 0; i < st->n; i++) lv_tensor_free_strs(&st->t[i]);
  for (int i = 0; i < LV_BATCH_STORE_MAX; i++) free(st->buf[i]);
  lv_batch_free(&st->batch);
  memset(st, 0, sizeof *st);
}

void lv_batch_store_clear(lv_batch_store *st) {
  for (int i = 0; i < st->n; i++) lv_tensor_free_strs(&st->t[i]);
  lv_nmap_clear(&st->batch.map);
  st->batch.size = 0;
  st->n = 0;
}

lv_status lv_batch_store_add(lv_batch_store *st, const char *key, lv_dtype dtype, lv_shape shape, lv_tensor **out) {
  *out = NULL;
  if (st->n == LV_BATCH_STORE_MAX)
    return lv_status_make(LV_ERR_INVALID, "batch: more than %d tensors (adding %s)", LV_BATCH_STORE_MAX, key);
  int i = st->n;
  size_t need = (size_t)lv_shape_numel(&shape) * lv_tensor_elem_size(dtype);
  if (need + 4 > st->cap[i]) { /* + 4: never a zero-byte buffer */
    free(st->buf[i]);
    st->cap[i] = need + 4 > 2 * st->cap[i] ? need + 4 : 2 * st->cap[i];
    st->buf[i] = malloc(st->cap[i]);
    LV_ASSERT(st->buf[i]);
  }
  if (dtype == LV_STRING) memset(st->buf[i], 0, need);
  st->t[i] = lv_tensor_view(dtype, shape, st->buf[i]);
  LV_TRY(lv_nmap_set(&st->batch.map, key, &st->t[i]));
  st->n++;
  *out = &st->t[i];
  return NULL;
}

lv_status lv_batch_store_add_copy(lv_batch_store *st, const char *key, const lv_tensor *src, lv_tensor **out) {
  LV_ASSERT(lv_device_is_host(src->device));
  lv_tensor *t;
  LV_TRY(lv_batch_store_add(st, key, src->dtype, src->shape, &t));
  if (src->dtype == LV_STRING) {
    for (int64_t i = 0; i < lv_tensor_numel(src); i++) {
      const char *str = lv_tensor_str(src, i);
      lv_tensor_set_str(t, i, str, strlen(str));
    }
  } else if (lv_tensor_nbytes(src)) {
    memcpy(t->data, src->data, lv_tensor_nbytes(src));
  }
  if (out) *out = t;
  return NULL;
}

lv_status lv_batch_store_view(const lv_batch_store *st, lv_batch *out) {
  lv_nmap_clear(&out->map);
  out->size = 0;
  for (int i = 0; i < lv_nmap_count(&st->batch.map); i++) {
    const lv_nmap_entry *e = lv_nmap_at(&st->batch.map, i);
    LV_TRY(lv_nmap_set(&out->map, e->key, e->t));
  }
  out->size = st->batch.size;
  return NULL;
}

/* ---- the batcher ---- */

typedef struct group {
  int bucket, n;
  lv_sample **s;
} group;

/* Records (file, offset) in an open-addressed hash set. */
typedef struct dropped_key {
  const char *file; /* the yielder's string: one pointer per file */
  uint64_t offset;
} dropped_key;

typedef struct dropped_set {
  dropped_key *k; /* [cap], file NULL: free */
  int64_t n, cap;
} dropped_set;

static uint64_t key_hash(dropped_key k) {
  uint64_t h = (k.offset + (uint64_t)(uintptr_t)k.file * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

/* Adds k; false if it was there. */
static bool dropped_add(dropped_set *d, dropped_key k) {
  if (2 * (d->n + 1) > d->cap) {
    dropped_set g = {calloc((size_t)(d->cap ? 2 * d->cap : 1024), sizeof(dropped_key)), 0, d->cap ? 2 * d->cap : 1024};
    LV_ASSERT(g.k);
    for (int64_t i = 0; i < d->cap; i++)
      if (d->k[i].file) dropped_add(&g, d->k[i]);
    free(d->k);
    *d = g;
  }
  uint64_t i = key_hash(k) & (uint64_t)(d->cap - 1);
  while (d->k[i].file) {
    if (d->k[i].file == k.file && d->k[i].offset == k.offset) return false;
    i = (i + 1) & (uint64_t)(d->cap - 1);
  }
  d->k[i] = k;
  d->n++;
  return true;
}

static void dropped_free(dropped_set *d) {
  free(d->k);
  memset(d, 0, sizeof *d);
}

struct lv_batcher {
  lv_batcher_opts o;
  char *who; /* e.g. "input", for messages */
  lv_record_yielder *y;
  lv_sample **bucket[LV_BATCHER_MAX_BUCKETS]; /* [limit] each */
  int bucket_n[LV_BATCHER_MAX_BUCKETS];
  group *pending; /* FIFO of batches to merge */
  int pending_head, pending_n, pending_cap;
  int64_t since_flush;
  bool ended;
  lv_batcher_stats st;
  lv_batch_store last; /* lv_batcher_next's batch */
  dropped_set dropped; /* until a record joins a bucket: the distinct records dropped */
};

static void pending_push(lv_batcher *b, int bucket) {
  if (b->pending_head + b->pending_n == b->pending_cap) {
    if (b->pending_head > 0) {
      memmove(b->pending, b->pending + b->pending_head, sizeof(group) * (size_t)b->pending_n);
      b->pending_head = 0;
    } else {
      b->pending_cap = b->pending_cap ? b->pending_cap * 2 : 8;
      b->pending = realloc(b->pending, sizeof(group) * (size_t)b->pending_cap);
      LV_ASSERT(b->pending);
    }
  }
  lv_sample **fresh = calloc((size_t)b->o.bucket_batch_limit[bucket], sizeof(lv_sample *));
  LV_ASSERT(fresh);
  b->pending[b->pending_head + b->pending_n++] = (group){bucket, b->bucket_n[bucket], b->bucket[bucket]};
  b->bucket[bucket] = fresh;
  b->bucket_n[bucket] = 0;
}

static void flush_all(lv_batcher *b) {
  for (int i = 0; i < b->o.n_buckets; i++)
    if (b->bucket_n[i] > 0) pending_push(b, i);
}

lv_status lv_batcher_create(const lv_batcher_opts *opts, const char *who, lv_record_yielder *y, lv_batcher **out) {
  *out = NULL;
  lv_status s = NULL;
  if (opts->n_buckets < 1 || opts->n_buckets > LV_BATCHER_MAX_BUCKETS)
    s = lv_status_make(LV_ERR_INVALID, "%s.bucket_upper_bound: want 1 to %d buckets, got %d", who,
                       LV_BATCHER_MAX_BUCKETS, opts->n_buckets);
  for (int i = 0; !s && i < opts->n_buckets; i++) {
    if (i > 0 && opts->bucket_upper_bound[i] < opts->bucket_upper_bound[i - 1])
      s = lv_status_make(LV_ERR_INVALID, "%s.bucket_upper_bound must be sorted ascending: [%d] = %lld < [%d] = %lld",
                         who, i, (long long)opts->bucket_upper_bound[i], i - 1,
                         (long long)opts->bucket_upper_bound[i - 1]);
    else if (opts->bucket_batch_limit[i] < 1 || opts->bucket_batch_limit[i] > (1 << 24))
      s = lv_status_make(LV_ERR_INVALID, "%s.bucket_batch_limit[%d] must be in [1, 2^24], got %lld", who, i,
                         (long long)opts->bucket_batch_limit[i]);
  }
  if (!s && (opts->n_features < 1 || opts->n_features > LV_BATCHER_MAX_FEATURES || !opts->process))
    s = lv_status_make(LV_ERR_INVALID, "%s: the batcher needs a processor and 1 to %d features", who,
                       LV_BATCHER_MAX_FEATURES);
  for (int f = 0; !s && f < opts->n_features; f++) {
    const lv_batcher_feature *ft = &opts->features[f];
    const lv_shape *in = &ft->inner;
    bool dims_ok = in->rank >= 0 && in->rank <= LV_MAX_RANK - 2 && (ft->dtype != LV_STRING || in->rank == 0);
    for (int d = 0; dims_ok && d < in->rank; d++) dims_ok = in->d[d] >= 1 && in->d[d] <= (1 << 24);
    if ((unsigned)ft->dtype >= LV_DTYPE_COUNT ||
        (ft->dtype != LV_I32 && ft->dtype != LV_F32 && ft->dtype != LV_STRING))
      s = lv_status_make(LV_ERR_INVALID, "%s: feature %s: the batcher holds int32, float32 or string, not %s", who,
                         ft->name, (unsigned)ft->dtype < LV_DTYPE_COUNT ? lv_dtype_names[ft->dtype] : "?");
    else if (!dims_ok)
      s = lv_status_make(LV_ERR_INVALID,
                         "%s: feature %s: bad per-step shape (rank %d; want rank 0 to %d, dims 1 to 2^24, "
                         "rank 0 for strings)",
                         who, ft->name, in->rank, LV_MAX_RANK - 2);
  }
  if (s) {
    lv_record_yielder_destroy(y);
    return s;
  }
  lv_batcher *b = calloc(1, sizeof *b);
  LV_ASSERT(b);
  b->o = *opts;
  b->y = y;
  b->who = strdup(who);
  LV_ASSERT(b->who);
  lv_batch_store_init(&b->last);
  for (int i = 0; i < opts->n_buckets; i++) {
    b->bucket[i] = calloc((size_t)opts->bucket_batch_limit[i], sizeof(lv_sample *));
    LV_ASSERT(b->bucket[i]);
  }
  *out = b;
  return NULL;
}

/* Stacks group g into out's tensors, padding each feature. */
static lv_status merge(lv_batcher *b, group *g, lv_batch_store *out) {
  const int64_t B = g->n;
  lv_batch_store_clear(out);
  for (int f = 0; f < b->o.n_features; f++) {
    const lv_batcher_feature *ft = &b->o.features[f];
    lv_tensor *t;
    if (ft->dtype == LV_STRING) {
      LV_TRY(lv_batch_store_add(out, ft->name, LV_STRING, lv_shape1(B), &t));
      for (int64_t i = 0; i < B; i++)
        if (g->s[i]->data[f]) lv_tensor_set_str(t, i, g->s[i]->data[f], (size_t)g->s[i]->len[f]);
      continue;
    }
    int64_t T = 0;
    for (int i = 0; i < B; i++) T = g->s[i]->len[f] > T ? g->s[i]->len[f] : T;
    if (ft->pad_to > 0) {
      /* add_one refused every longer sample, naming its record. */
      LV_ASSERTF(T <= ft->pad_to, "%s: a sample of length %lld in a batch padded to %lld", ft->name, (long long)T,
                 (long long)ft->pad_to);
      T = ft->pad_to;
    }
    /* [B, T, inner...]: K values per step */
    const int64_t K = lv_shape_numel(&ft->inner);
    lv_shape shape = lv_shape2(B, T);
    for (int d = 0; d < ft->inner.rank; d++) shape.d[shape.rank++] = ft->inner.d[d];
    LV_TRY(lv_batch_store_add(out, ft->name, ft->dtype, shape, &t));
    for (int64_t i = 0; i < B; i++) {
      const lv_sample *s = g->s[i];
      const int64_t used = s->len[f] * K;
      if (ft->dtype == LV_F32) {
        float *row = (float *)t->data + i * T * K;
        memcpy(row, s->data[f], (size_t)used * 4);
        for (int64_t j = used; j < T * K; j++) row[j] = (float)ft->pad;
      } else {
        int32_t *row = (int32_t *)t->data + i * T * K;
        memcpy(row, s->data[f], (size_t)used * 4);
        for (int64_t j = used; j < T * K; j++) row[j] = (int32_t)ft->pad;
      }
    }
  }
  lv_tensor *keys;
  LV_TRY(lv_batch_store_add(out, "bucket_keys", LV_I32, lv_shape1(B), &keys));
  for (int64_t i = 0; i < B; i++) ((int32_t *)keys->data)[i] = (int32_t)g->s[i]->key;
  out->batch.size = B;
  b->st.batches++;
  return NULL;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Called for each dropped record while no record has joined a bucket: once every
 * distinct record this shard can get has been dropped, no batch can ever form, and an
 * endless stream would keep the caller waiting for ever. */
static lv_status note_dropped(lv_batcher *b, const lv_record *rec) {
  if (b->st.batched > 0 || !lv_record_yielder_repeats_forever(b->y)) return NULL;
  dropped_add(&b->dropped, (dropped_key){rec->file, rec->offset});
  int64_t pass = lv_record_yielder_pass_records(b->y);
  if (pass <= 0) return NULL;
  /* Replica r of R takes the positions r mod R of the endless stream: over the passes,
   * the records at indices r mod gcd(pass, R) of a pass when every pass has one order;
   * when the files are shuffled each pass, any record may come to it later. */
  int64_t reps = lv_record_yielder_num_replicas(b->y);
  int64_t g = lv_record_yielder_fixed_order(b->y) ? gcd64(pass, reps) : 1;
  if (b->dropped.n < pass / g) return NULL;
  const lv_batcher_stats *st = &b->st;
  return lv_status_make(LV_ERR_INVALID,
                        "%s: no batch can ever form from %s: every one of its %lld distinct records%s was dropped "
                        "(%lld times above the last bucket_upper_bound %lld, %lld filtered, %lld bad); check "
                        "%s.file_pattern, %s.bucket_upper_bound and the length limits",
                        b->who, lv_record_yielder_pattern(b->y), (long long)(pass / g),
                        reps > 1 ? " of this replica" : "", (long long)st->dropped_too_long,
                        (long long)b->o.bucket_upper_bound[b->o.n_buckets - 1], (long long)st->dropped_filtered,
                        (long long)st->dropped_bad, b->who, b->who);
}

/* Reads one record into the buckets (or drops it). */
static lv_status add_one(lv_batcher *b) {
  lv_record rec;
  bool eof;
  LV_TRY(lv_record_yielder_next(b->y, &rec, &eof));
  if (eof) {
    b->ended = true;
    flush_all(b);
    return NULL;
  }
  b->st.records++;
  lv_sample *s = calloc(1, sizeof *s);
  LV_ASSERT(s);
  s->n_features = b->o.n_features;
  s->ft = b->o.features;
  int64_t key = 0;
  lv_status ps = b->o.process(b->o.ctx, &rec, s, &key);
  /* pad_to_max_seq_length: a record longer than a feature's pad length is this record's
   * fault, named here (at merge time it would fail its whole batch, unnamed). */
  for (int f = 0; !ps && f < b->o.n_features; f++) {
    const lv_batcher_feature *ft = &b->o.features[f];
    if (ft->dtype != LV_STRING && ft->pad_to > 0 && s->len[f] > ft->pad_to)
      ps = lv_status_make(LV_ERR_INVALID, "%s has length %lld, longer than its pad length %lld (pad_to_max_seq_length: "
                          "raise the max length or lower bucket_upper_bound)", ft->name, (long long)s->len[f],
                          (long long)ft->pad_to);
  }
  if (ps && lv_status_code(ps) != LV_ERR_CANCELLED) {
    sample_free(s);
    if (!b->o.skip_bad_records) {
      lv_status e = lv_status_make(LV_ERR_CORRUPT, "%s: record at byte offset %" PRIu64 ": %s", rec.file, rec.offset,
                                   lv_status_msg(ps));
      lv_status_free(ps);
      return e;
    }
    if (b->st.dropped_bad++ < 10)
      lv_warn("%s: skipping the record at byte offset %" PRIu64 ": %s", rec.file, rec.offset, lv_status_msg(ps));
    lv_status_free(ps);
    return note_dropped(b, &rec);
  }
  if (ps || key < 0) {
    lv_status_free(ps);
    sample_free(s);
    b->st.dropped_filtered++;
    return note_dropped(b, &rec);
  }
  int i = 0;
  while (i < b->o.n_buckets && key > b->o.bucket_upper_bound[i]) i++;
  if (i == b->o.n_buckets) {
    sample_free(s);
    b->st.dropped_too_long++;
    return note_dropped(b, &rec);
  }
  s->key = key;
  b->bucket[i][b->bucket_n[i]++] = s;
  if (!b->st.batched++) dropped_free(&b->dropped);
  if (b->bucket_n[i] == b->o.bucket_batch_limit[i]) pending_push(b, i);
  if (b->o.flush_every_n > 0 && ++b->since_flush >= b->o.flush_every_n) {
    flush_all(b);
    b->since_flush = 0;
  }
  return NULL;
}

lv_status lv_batcher_next_into(lv_batcher *b, lv_batch_store *out, bool *done) {
  *done = false;
  lv_batch_store_clear(out);
  while (b->pending_n == 0) {
    if (b->ended) {
      *done = true;
      return NULL;
    }
    LV_TRY(add_one(b));
  }
  group g = b->pending[b->pending_head++];
  b->pending_n--;
  lv_status s = merge(b, &g, out);
  for (int i = 0; i < g.n; i++) sample_free(g.s[i]);
  free(g.s);
  return s;
}

lv_status lv_batcher_next(lv_batcher *b, lv_batch *out, bool *done) {
  lv_nmap_clear(&out->map);
  out->size = 0;
  LV_TRY(lv_batcher_next_into(b, &b->last, done));
  return lv_batch_store_view(&b->last, out);
}

lv_batcher_stats lv_batcher_get_stats(const lv_batcher *b) { return b->st; }
lv_record_yielder *lv_batcher_yielder(lv_batcher *b) { return b->y; }

void lv_batcher_destroy(lv_batcher *b) {
  if (!b) return;
  lv_record_yielder_destroy(b->y);
  for (int i = 0; i < b->o.n_buckets; i++) {
    for (int j = 0; j < b->bucket_n[i]; j++) sample_free(b->bucket[i][j]);
    free(b->bucket[i]);
  }
  for (int k = 0; k < b->pending_n; k++) {
    group *g = &b->pending[b->pending_head + k];
    for (int i = 0; i < g->n; i++) sample_free(g->s[i]);
    free(g->s);
  }
  free(b->pending);
  lv_batch_store_free(&b->last);
  dropped_free(&b->dropped);
  free(b->who);
  free(b);
}
