/* Bucketing batcher: Lingvo's RecordBatcher (lingvo/core/ops/record_batcher.cc) with
 * GenericInput's processor and merge (generic_input_op_kernels.cc), reference/lingvo.md
 * §8.4.
 *
 * A processor callback turns each record from a record yielder into a sample (one
 * variable-length vector per feature) and an integer bucket key. Key < 0, or a processor
 * status of LV_ERR_CANCELLED, drops the record (Lingvo's filtering); a key above the
 * last bucket_upper_bound drops it too; both are counted. Otherwise the record joins
 * bucket i, the first with key <= bucket_upper_bound[i]; a bucket that reaches
 * bucket_batch_limit[i] samples becomes a batch. flush_every_n > 0 turns every partial
 * bucket into a batch each time n more records have joined buckets; at the end of the
 * data (finite repeat_count, e.g. an eval pass) the partial buckets come out as the last
 * batches, in bucket order.
 *
 * Merge: each LV_I32 or LV_F32 feature becomes a [B, T, inner...] tensor ([B, T] for
 * the usual scalar steps; speech frames with inner [80] give [B, T, 80]), T the longest
 * of the batch (or the feature's pad_to, when > 0: pad_to_max_seq_length; a longer
 * sample is an error); shorter rows are filled along T only, every padded step's values
 * the feature's pad constant. An LV_STRING feature (an utterance id, a transcript) holds
 * one string per sample and becomes a [B] string tensor (no inner shape, no padding).
 * Plus `bucket_keys` [B] int32.
 *
 * Everything runs on the caller's thread except the reading (the yielder's thread); the
 * streaming inputs call the batcher from their prefetch thread (stream_input.h), so a
 * processor must be reentrant: it may run on two batchers of one input (a training
 * stream and an evaluation pass) at once. lv_batcher_next's tensors belong to the
 * batcher and stay valid until its next call; lv_batcher_next_into writes into a batch
 * store the caller owns. Corrupt records: a processor error other than CANCELLED is
 * LV_ERR_CORRUPT naming the record's file and offset, or with skip_bad_records a
 * dropped and counted record.
 *
 * An endless stream (repeat_count -1) whose every distinct record is dropped (too long
 * for the buckets, filtered, bad) can never give a batch: once the batcher has dropped
 * each of them, with none joining a bucket, it fails with LV_ERR_INVALID naming the
 * pattern and the counts, instead of reading for ever. */
#ifndef LV_INPUT_BATCHER_H
#define LV_INPUT_BATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "core/tensor.h"
#include "input/batch.h"
#include "input/record_yielder.h"

#define LV_BATCHER_MAX_FEATURES 16
#define LV_BATCHER_MAX_BUCKETS 64

typedef struct lv_batcher_feature {
  const char *name; /* key in the batch, e.g. "src.ids" */
  lv_dtype dtype;   /* LV_I32, LV_F32 or LV_STRING */
  double pad;       /* dynamic padding constant */
  int64_t pad_to;   /* > 0: pad every batch to this length */
  lv_shape inner;   /* shape of one step: rank 0 (zeroed) for scalar steps, [80] for frames */
} lv_batcher_feature;

/* What the processor fills for each feature: its steps (lv_sample_set) or its string
 * (lv_sample_set_str). */
typedef struct lv_sample lv_sample;
/* Copies n steps of numeric feature f (n * numel(inner) values in the feature's dtype,
 * row-major [n, inner...]) into the sample. */
void lv_sample_set(lv_sample *s, int f, const void *vals, int64_t n);
/* Copies the n bytes at str as the string of LV_STRING feature f. */
void lv_sample_set_str(lv_sample *s, int f, const char *str, size_t n);

typedef lv_status (*lv_record_processor)(void *ctx, const lv_record *rec, lv_sample *out, int64_t *bucket_key);

typedef struct lv_batcher_opts {
  int n_features;
  lv_batcher_feature features[LV_BATCHER_MAX_FEATURES];
  int n_buckets;
  int64_t bucket_upper_bound[LV_BATCHER_MAX_BUCKETS]; /* ascending */
  int64_t bucket_batch_limit[LV_BATCHER_MAX_BUCKETS]; /* > 0 */
  int64_t flush_every_n;
  bool skip_bad_records;
  lv_record_processor process;
  void *ctx;
} lv_batcher_opts;

typedef struct lv_batcher_stats {
  int64_t records;           /* records read from the yielder */
  int64_t batched;           /* records that joined a bucket */
  int64_t dropped_too_long;  /* key > last bound */
  int64_t dropped_filtered;  /* key < 0 or CANCELLED */
  int64_t dropped_bad;       /* processor errors under skip_bad_records */
  int64_t batches;
} lv_batcher_stats;

/* A batch that owns its tensors' memory: `batch` maps each key to one of t[], whose
 * buffers the store keeps (and reuses, growing them) from one batch to the next; the
 * strings of its string tensors are the store's too, freed by clear and free. Used to
 * hand finished batches from a producing thread to a consumer. */
#define LV_BATCH_STORE_MAX 16
typedef struct lv_batch_store {
  lv_batch batch;
  int n;
  lv_tensor t[LV_BATCH_STORE_MAX];
  void *buf[LV_BATCH_STORE_MAX];
  size_t cap[LV_BATCH_STORE_MAX]; /* bytes */
} lv_batch_store;

void lv_batch_store_init(lv_batch_store *st);
void lv_batch_store_free(lv_batch_store *st);
/* Empties the batch (size 0, no keys), keeping the buffers and freeing the strings. */
void lv_batch_store_clear(lv_batch_store *st);
/* Adds `key`: a tensor of dtype and shape over a buffer of the store, contents
 * undefined (a string tensor's: all NULL, set with lv_tensor_set_str), into *out.
 * Errors: more than LV_BATCH_STORE_MAX keys, a bad key. */
lv_status lv_batch_store_add(lv_batch_store *st, const char *key, lv_dtype dtype, lv_shape shape, lv_tensor **out);
/* Adds `key` as a copy of host tensor src (its strings copied too), into *out if out is
 * not NULL. */
lv_status lv_batch_store_add_copy(lv_batch_store *st, const char *key, const lv_tensor *src, lv_tensor **out);
/* Points out's map at st's tensors (borrowed: valid while st keeps this batch). */
lv_status lv_batch_store_view(const lv_batch_store *st, lv_batch *out);

typedef struct lv_batcher lv_batcher;

/* Validates opts (bounds ascending, limits > 0, feature dtypes and inner shapes) with
 * errors naming `who` (e.g. "input"); takes ownership of y (also on error). */
lv_status lv_batcher_create(const lv_batcher_opts *opts, const char *who, lv_record_yielder *y, lv_batcher **out);
/* The next batch into out (cleared first); *done (and out->size 0) at the end of the
 * data. */
lv_status lv_batcher_next(lv_batcher *b, lv_batch *out, bool *done);
/* The same, into a store (cleared first; empty at the end of the data). */
lv_status lv_batcher_next_into(lv_batcher *b, lv_batch_store *out, bool *done);
lv_batcher_stats lv_batcher_get_stats(const lv_batcher *b);
lv_record_yielder *lv_batcher_yielder(lv_batcher *b);
void lv_batcher_destroy(lv_batcher *b);

#endif
