/* Streaming inputs: what NmtInput, PunctuatorInput and LmInput share. Each reads a file
 * pattern through a record yielder (record_yielder.h) into the bucketing batcher
 * (batcher.h); a class adds its features and processor and plugs these functions into
 * its lv_input_class.
 *
 * Params (lv_stream_input_define_params, Lingvo's BaseInputGeneratorFromFiles and
 * BaseSequenceInputGenerator names): file_pattern, file_random_seed (0: random, not
 * reproducible), file_buffer_size, file_buffer_size_in_seconds (must be 0),
 * file_parallelism, flush_every_n, num_batcher_threads (unused: one batcher thread),
 * repeat_count, bucket_upper_bound, bucket_batch_limit, bucket_adjust_every_n (must be
 * 0), and lingvoc's prefetch_batches. lv_stream_input_init also reads
 * skip_corrupt_records when the class defines it.
 *
 * Threads: the record yielder reads on its own thread. With prefetch_batches = N > 0
 * (default 2) a batcher thread per stream (the training stream, an evaluation pass)
 * runs everything else -- the class's processor (parsing, tokenizing), bucketing,
 * padding and the class's finish step -- and keeps up to N finished batches in a
 * bounded queue (Lingvo's batcher keeps batches ready the same way); train_batch and
 * next_eval only pop one, so a consumer slower than the pipeline never waits. The
 * thread builds batches in exactly the order the caller's thread would (prefetch 0:
 * no thread, each batch built when asked), so the batches are the same for every
 * prefetch_batches. An error of the thread (a corrupt record, a bad id) comes back from
 * the call that would have built that batch, after the good batches before it, with
 * the same message (file and offset); the stream then stops, returning the error again
 * until it restarts (training: the next call re-seeds; eval: reset). Destroy, a restart
 * and reset stop the thread wherever it is waiting (full queue, the reader) and join it.
 *
 * Training (lv_stream_input_train_batch): an endless shuffled stream (repeat_count
 * passes) bucketed into batches of bucket_batch_limit[i]. Resume (the first call asks
 * for step s > 0, or a call skips steps): with resume_replay (the default) and a fixed
 * file_random_seed the stream is read from step 0 and its first s batches are dropped,
 * so a resumed run reads exactly what an uninterrupted run reads (kill -9 and restart
 * give the same weights); reading is ~500x faster than training a Transformer on it, so
 * the replay costs a small fraction of the time already trained. Otherwise (replay off,
 * or file_random_seed 0: a new seed per process) the stream is re-seeded from
 * (file_random_seed, s): the batches from step s on are a function of
 * (file_random_seed, s, replica) only, as in Lingvo, which restores no reader position.
 *
 * Evaluation (reset / next_eval): one pass in file order (require_sequential_order),
 * partial buckets flushed at the end in bucket order, so every record of this shard
 * whose key fits the buckets comes out exactly once; the last batches may be partial.
 * Sharding is record-level: replica r of R takes the records at positions r mod R of
 * the stream. num_samples is unknown before reading (-1). */
#ifndef LV_INPUT_STREAM_INPUT_H
#define LV_INPUT_STREAM_INPUT_H

#include "input/batcher.h"
#include "input/input.h"
#include "input/tokenizer.h"

/* A class's last step from the batcher's batch (raw) to its own (out, cleared by the
 * caller), e.g. LmInput's batch tokenization. Runs on the batcher thread, possibly on two
 * streams of one input at once: reentrant, like the processor. ctx is bopts.ctx. */
typedef lv_status (*lv_stream_finish)(void *ctx, const lv_batch *raw, lv_batch_store *out);

/* One stream of batches (a batcher and, with prefetch, its thread and queue). */
typedef struct lv_batch_stream lv_batch_stream;

typedef struct lv_stream_input {
  lv_input base;
  const char *cls;          /* for messages */
  lv_batcher_opts bopts;    /* buckets from the params; the class sets features, process, ctx */
  lv_stream_finish finish;  /* NULL: the batcher's batch is the input's batch */
  lv_record_processor train_process; /* NULL: bopts.process; else the training stream's
                                      * (AsrInput's augmentation), evaluation keeping
                                      * bopts.process */
  lv_record_yielder_opts yopts;
  char *pattern;
  int64_t batch_size;       /* the largest bucket_batch_limit */
  int prefetch;             /* prefetch_batches */
  bool replay;              /* resume_replay with a fixed file_random_seed */
  bool random_seed;         /* file_random_seed 0: a seed of this process's own */
  lv_batch_stream *train, *eval;
  int64_t next_step;
} lv_stream_input;

/* Defines the params above, with Lingvo's defaults and the given bucketing defaults
 * (n_buckets may be 0: empty lists). */
void lv_stream_input_define_params(lv_params *p, int n_buckets, const int64_t *bounds, const int64_t *limits);

/* Fills in (zeroed by the caller, first member of the class's struct) from p for this
 * shard and reads `pattern` (p.file_pattern, or the class's rewrite of it); checks every
 * param and expands the pattern once so that a bad one fails here. Errors name
 * input.<key>. On error, lv_stream_input_fini is still the way to clean up. */
lv_status lv_stream_input_init(lv_stream_input *in, const char *cls, const lv_params *p, lv_input_shard shard,
                               const char *pattern);
/* Frees what init and serving allocated (not `in` itself). */
void lv_stream_input_fini(lv_stream_input *in);

/* lv_input_class entries for an lv_input that starts with an lv_stream_input. */
lv_status lv_stream_input_train_batch(lv_input *in, int64_t step, lv_batch *out);
lv_status lv_stream_input_reset(lv_input *in);
lv_status lv_stream_input_next_eval(lv_input *in, lv_batch *out, bool *done);
int64_t lv_stream_input_num_samples(const lv_input *in);
int64_t lv_stream_input_batch_size(const lv_input *in);
/* The training stream's shuffle buffer's peak record bytes (0 before it starts). */
int64_t lv_stream_input_buffer_peak_bytes(const lv_input *in);
/* Finished training batches waiting in the queue now (0 before the first train_batch
 * and without prefetch): for tests and benchmarks, which poll it. */
int lv_stream_input_train_ready(lv_input *in);

/* ---- text inputs (PunctuatorInput, LmInput) ---- */

/* The pattern to read for input.file_pattern `pattern` (malloc'd into *out). Empty is an
 * error. text_only (Lingvo's TextLines): no type prefix reads as `text:`, `text:` is
 * kept, another type is an error; otherwise the pattern is kept as written. */
lv_status lv_text_pattern(const char *cls, const char *pattern, bool text_only, char **out);
/* Instantiates p.tokenizer (by its cls); errors name input.tokenizer.<key>. */
lv_status lv_text_tokenizer_create(const lv_params *p, lv_tokenizer **out);
/* p.<key> as a StringsToIds max_length: > 0, or None / <= 0 only for
 * SentencePieceTokenizer (pad to the longest row; *out 0); else an error naming
 * input.<key>. */
lv_status lv_text_max_length(const lv_params *p, const char *key, const lv_tokenizer *tok, int64_t *out);
/* ASCII whitespace as Python's bytes.split() and TF's StringSplitV2 (empty sep) see it:
 * space, \t, \n, \v, \f, \r. */
static inline bool lv_text_is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
/* The whitespace-separated words of s[0..n) (tf.strings.split's: empty words do not count). */
static inline int32_t lv_text_count_words(const uint8_t *s, size_t n) {
  int32_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < n; i++) {
    bool sp = lv_text_is_space(s[i]);
    if (!sp && !in_word) words++;
    in_word = !sp;
  }
  return words;
}

#endif
