/* Record yielder: Lingvo's RecordYielder (lingvo/core/ops/record_yielder.cc) in C. It
 * expands a file pattern, reads the records of its files on a background thread
 * (pthread) and hands them out one at a time through a bounded queue, so the consumer
 * only waits when the reader falls behind.
 *
 * File patterns: `[type:]glob[,glob...]`. The type prefix (text before the first ':'
 * when no '/' precedes it) is one of
 *   tfrecord       TFRecord files (the default when there is no prefix)
 *   tfrecord_gzip  gzip-compressed TFRecord files (TF's "GZIP" compression)
 *   text           one record per line (the '\n', and a '\r' before it, are stripped)
 *   iota           `iota:N`: no files; yields "%010d" strings 0 .. N-1
 * Each comma-separated glob may be a sharded name: `name@N` is `name-?????-of-0000N`
 * (N up to 99999, written with 5 digits) and `name@*` is `name-?????-of-?????`, as
 * Lingvo expands them. Every glob must match at least one file; one that matches
 * nothing is an LV_ERR_NOT_FOUND naming it. Files of one glob are taken in sorted order,
 * globs in the order written.
 *
 * Order of records (all randomness is Philox keyed by `seed` and `stream`, on the one
 * reader thread, so the order is a pure function of the options):
 *  - sequential (Lingvo's require_sequential_order, for evaluation): files in pattern
 *    order, each file's records in file order, one after the other; no shuffling.
 *  - otherwise: each epoch shuffles the file list (stream, epoch) and reads
 *    `parallelism` files at once, interleaving them record by record; records then pass
 *    through a shuffle buffer of `buffer_size` slots (each incoming record evicts a
 *    uniformly chosen one once the buffer is full) that drains in a random order at the
 *    end of every epoch before the next one starts (Lingvo's epoch barrier: a buffer as
 *    large as an epoch shuffles each epoch as a whole). With buffer_max_bytes the buffer
 *    also holds at most that many bytes of records (at least one record): while an
 *    incoming record would take it over, uniformly chosen records leave it first, so large
 *    records (speech with its samples) shuffle in fewer slots instead of taking gigabytes.
 * repeat_count epochs (-1: forever), then end of data.
 *
 * Sharding (replica r of R): record-level. Every replica computes the same record order
 * before the shuffle buffer (same seed and stream) and keeps the records whose position
 * in it, counted from the start of the stream, is r modulo R; so the replicas' records
 * are disjoint and together cover every record of every epoch exactly once. Each replica
 * reads all files (cheap next to a training step; it keeps shares balanced whatever the
 * number of files).
 *
 * Resume: a training input creates its yielder with stream = the global step it starts
 * at, so the records a run reads from step s on are a function of (seed, s) only: two
 * runs resumed at step s read the same records, whatever happened before.
 *
 * Corrupt data: a bad TFRecord frame is LV_ERR_CORRUPT naming the file and the byte
 * offset of the record (for tfrecord_gzip, the offset in the uncompressed stream),
 * delivered in order after the good records before it. With skip_corrupt the bad bytes
 * are skipped and counted (lv_record_yielder_skipped; a warning per file names the
 * count), in a gzip file as in a plain one; gzip data that does not inflate, or ends
 * early, is an LV_ERR_CORRUPT naming the file even then (what follows cannot be read).
 * A gzip file is inflated as it is read (a window of one record), never whole. A `text:`
 * line holding a NUL byte (a UTF-16 or binary file) is LV_ERR_CORRUPT naming the file,
 * the line and the column (base/text_lines.h lv_text_refuse_nul); with skip_corrupt the
 * line is skipped and counted as above.
 *
 * Empty data: repeating forever (repeat_count -1) a pass that holds no record is an
 * LV_ERR_INVALID naming the pattern, delivered as the next record. */
#ifndef LV_INPUT_RECORD_YIELDER_H
#define LV_INPUT_RECORD_YIELDER_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum {
  LV_RECORD_TFRECORD = 0,
  LV_RECORD_TFRECORD_GZIP,
  LV_RECORD_TEXT,
  LV_RECORD_IOTA,
  LV_RECORD_TYPE_COUNT
} lv_record_type;

extern const char *const lv_record_type_names[LV_RECORD_TYPE_COUNT];

/* An expanded file pattern: the type and the matching files (for iota, n_files == 1 and
 * iota_n is N). */
typedef struct lv_file_list {
  lv_record_type type;
  int n_files;
  char **files;
  int64_t iota_n;
} lv_file_list;

/* Expands pattern (see above). Errors: unknown type prefix (naming the known ones),
 * malformed sharded name or iota count (LV_ERR_INVALID), a glob that matches nothing
 * (LV_ERR_NOT_FOUND naming the glob). */
lv_status lv_file_pattern_expand(const char *pattern, lv_file_list *out);
void lv_file_list_free(lv_file_list *l);

typedef struct lv_record_yielder_opts {
  const char *file_pattern;
  uint64_t seed;      /* file_random_seed */
  uint64_t stream;    /* e.g. the global step a training run starts (or resumes) at */
  int64_t buffer_size; /* file_buffer_size: shuffle-buffer slots (<= 1: no shuffling) */
  int64_t buffer_max_bytes; /* > 0: the shuffle buffer also holds at most this many record bytes */
  int parallelism;     /* file_parallelism: files read at once (>= 1) */
  int64_t repeat_count; /* epochs; -1 = forever */
  bool sequential;      /* require_sequential_order */
  bool skip_corrupt;
  int replica, num_replicas;
  size_t text_keep;     /* > 0: a `text:` line is cut to its first text_keep bytes as it is read */
} lv_record_yielder_opts;

/* A record handed out by lv_record_yielder_next: valid until the next call. */
typedef struct lv_record {
  const uint8_t *data;
  size_t len;
  const char *file; /* the file it came from (the pattern for iota) */
  uint64_t offset;  /* byte offset of its frame or line (record index for iota) */
  int64_t epoch;    /* 0-based */
  int64_t words;    /* a line cut by text_keep: the whole line's words (lv_text_count_words); else -1 */
} lv_record;

typedef struct lv_record_yielder lv_record_yielder;

/* Expands the pattern (its errors come back here, synchronously) and starts the reader
 * thread. */
lv_status lv_record_yielder_create(const lv_record_yielder_opts *opts, lv_record_yielder **out);
/* The next record; *eof at the end of the last epoch. Errors of the reader (corrupt or
 * unreadable file) come back in order; after one, every further call returns an error. */
lv_status lv_record_yielder_next(lv_record_yielder *y, lv_record *rec, bool *eof);
/* Stops the reader and makes lv_record_yielder_next return LV_ERR_CANCELLED from now on,
 * waking a call blocked in it. The one call that may come from another thread than the
 * consumer's (a prefetch thread's owner shutting it down); destroy still follows. */
void lv_record_yielder_cancel(lv_record_yielder *y);
/* The largest number of record bytes the shuffle buffer has held so far. */
int64_t lv_record_yielder_buffer_peak_bytes(lv_record_yielder *y);
/* Corrupt regions skipped so far (skip_corrupt). */
int64_t lv_record_yielder_skipped(lv_record_yielder *y);
/* How many records one whole pass over the files holds (before sharding: every
 * replica's), -1 until the reader has read the first pass. A record is the same in
 * every pass: same file index and offset, same bytes. */
int64_t lv_record_yielder_pass_records(lv_record_yielder *y);
/* The file pattern, for messages. */
const char *lv_record_yielder_pattern(const lv_record_yielder *y);
bool lv_record_yielder_repeats_forever(const lv_record_yielder *y);
int lv_record_yielder_num_replicas(const lv_record_yielder *y);
/* Whether every pass yields the records in one order before sharding (sequential, or a
 * single file): then a replica gets the same positions of a pass every time. */
bool lv_record_yielder_fixed_order(const lv_record_yielder *y);

/* A process-wide stop flag (the trainer's signal flag; NULL: none) that the waits for
 * data check every 100 ms: lv_record_yielder_next, and the streaming inputs' wait for a
 * batch (stream_input.h), return LV_ERR_CANCELLED once it is non-zero, so a signal stops
 * a consumer whose input has nothing to give (a FIFO, a shuffle buffer still filling). */
void lv_record_yielder_set_interrupt(const volatile sig_atomic_t *flag);
bool lv_record_yielder_interrupted(void);
/* pthread_cond_wait that returns after at most 100 ms (callers loop and recheck). */
void lv_cond_wait_tick(pthread_cond_t *c, pthread_mutex_t *mu);
/* Stops and joins the reader thread, frees everything. NULL is fine. */
void lv_record_yielder_destroy(lv_record_yielder *y);

#endif
