/* Streaming inputs on the record yielder and the batcher (see stream_input.h). */
#include "input/stream_input.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

void lv_stream_input_define_params(lv_params *p, int n_buckets, const int64_t *bounds, const int64_t *limits) {
  lv_params_define_string(p, "file_pattern", "",
                          "File pattern: [type:]glob[,glob...] with type tfrecord (default), tfrecord_gzip, "
                          "text or iota; name@N and name@* name sharded files.");
  lv_params_define_int(p, "file_random_seed", 301, "Random seed for shuffling the records (0: random).");
  lv_params_define_int(p, "file_buffer_size", 10000, "How many records are buffered for random shuffling.");
  lv_params_define_int(p, "file_buffer_size_in_seconds", 0, "Not supported; must be 0.");
  lv_params_define_int(p, "file_buffer_max_mb", 0,
                       "lingvoc: > 0: the shuffle buffer also holds at most this many MiB of records (records "
                       "leave it in a random order to make room), so that large records (speech with its samples) "
                       "do not make file_buffer_size records several GB; 0: no limit.");
  lv_params_define_int(p, "file_parallelism", 16, "How many files to read concurrently.");
  lv_params_define_int(p, "flush_every_n", 0,
                       "If non-zero, flushes all batching buckets every n records are yielded.");
  lv_params_define_int(p, "num_batcher_threads", 1, "Number of threads to use for input record batcher.");
  lv_params_define_int(p, "repeat_count", -1,
                       "Number of passes over the training data (-1: forever). Evaluation reads one pass.");
  lv_params_define_list(p, "bucket_upper_bound", n_buckets ? lv_pvalue_ints(n_buckets, bounds) : NULL,
                        "Bucketing scheme. Sorted. Examples longer than the last bound are skipped.");
  lv_params_define_list(p, "bucket_batch_limit", n_buckets ? lv_pvalue_ints(n_buckets, limits) : NULL,
                        "Desired per-split batch size per bucket; same length as bucket_upper_bound.");
  lv_params_define_int(p, "bucket_adjust_every_n", 0, "Not supported; must be 0.");
  lv_params_define_int(p, "prefetch_batches", 2,
                       "lingvoc: finished batches (tokenized, bucketed, padded) that a background batcher thread "
                       "keeps ready, so that the trainer does not wait on input; 0: no thread, each batch is built "
                       "on the caller's thread when asked. The batches are the same either way.");
  lv_params_define_bool(p, "resume_replay", true,
                        "lingvoc: a run resumed at step s reads the training stream from step 0 and drops s "
                        "batches, so it trains on exactly what an uninterrupted run would (needs a fixed "
                        "file_random_seed); false: re-seed from (file_random_seed, s) at once, as Lingvo does.");
}

static lv_status read_buckets(const lv_params *p, lv_batcher_opts *o) {
  int nb = lv_pvalue_to_ints(lv_params_list(p, "bucket_upper_bound"), o->bucket_upper_bound, LV_BATCHER_MAX_BUCKETS);
  int nl = lv_pvalue_to_ints(lv_params_list(p, "bucket_batch_limit"), o->bucket_batch_limit, LV_BATCHER_MAX_BUCKETS);
  if (nb < 1 || nb > LV_BATCHER_MAX_BUCKETS)
    return lv_status_make(LV_ERR_INVALID, "input.bucket_upper_bound must be a list of 1 to %d ints",
                          LV_BATCHER_MAX_BUCKETS);
  if (nl != nb)
    return lv_status_make(LV_ERR_INVALID,
                          "input.bucket_batch_limit must be a list of ints as long as input.bucket_upper_bound "
                          "(%d), got %d",
                          nb, nl);
  /* Keys are lengths of at least one step: a bound below 1 holds no record. */
  for (int i = 0; i < nb; i++)
    if (o->bucket_upper_bound[i] < 1)
      return lv_status_make(LV_ERR_INVALID, "input.bucket_upper_bound[%d] must be >= 1 (a bucket of sequences "
                            "at most %lld steps long holds none), got %lld", i, (long long)o->bucket_upper_bound[i],
                            (long long)o->bucket_upper_bound[i]);
  o->n_buckets = nb;
  return NULL;
}

lv_status lv_stream_input_init(lv_stream_input *in, const char *cls, const lv_params *p, lv_input_shard shard,
                               const char *pattern) {
  in->cls = cls;
  in->next_step = -1;
  if (lv_params_int(p, "bucket_adjust_every_n") != 0 || lv_params_int(p, "file_buffer_size_in_seconds") != 0)
    return lv_status_make(LV_ERR_INVALID,
                          "input.bucket_adjust_every_n and input.file_buffer_size_in_seconds are not supported "
                          "by lingvoc; set them to 0");
  lv_batcher_opts *o = &in->bopts;
  LV_TRY(read_buckets(p, o));
  o->flush_every_n = lv_params_int(p, "flush_every_n");
  int64_t prefetch = lv_params_int(p, "prefetch_batches");
  if (prefetch < 0 || prefetch > 1024)
    return lv_status_make(LV_ERR_INVALID, "input.prefetch_batches must be in [0, 1024], got %lld",
                          (long long)prefetch);
  in->prefetch = (int)prefetch;
  o->skip_bad_records = lv_params_has(p, "skip_corrupt_records") && lv_params_bool(p, "skip_corrupt_records");
  in->batch_size = 0;
  for (int i = 0; i < o->n_buckets; i++)
    if (o->bucket_batch_limit[i] > in->batch_size) in->batch_size = o->bucket_batch_limit[i];

  in->pattern = strdup(pattern);
  LV_ASSERT(in->pattern);
  lv_record_yielder_opts *y = &in->yopts;
  y->file_pattern = in->pattern;
  int64_t seed = lv_params_int(p, "file_random_seed");
  in->random_seed = seed == 0;
  if (seed == 0) {
    seed = (int64_t)time(NULL) ^ (int64_t)(uintptr_t)in;
    lv_info("input: file_random_seed 0: shuffling with random seed %lld", (long long)seed);
  }
  in->replay = lv_params_bool(p, "resume_replay") && lv_params_int(p, "file_random_seed") != 0;
  y->seed = (uint64_t)seed;
  y->buffer_size = lv_params_int(p, "file_buffer_size");
  int64_t mb = lv_params_int(p, "file_buffer_max_mb");
  if (mb < 0 || mb > ((int64_t)1 << 40))
    return lv_status_make(LV_ERR_INVALID, "input.file_buffer_max_mb %lld: expected 0 (no limit) or a size in MiB",
                          (long long)mb);
  y->buffer_max_bytes = mb << 20;
  int64_t par = lv_params_int(p, "file_parallelism");
  y->parallelism = par < 1 ? 0 : par > 4096 ? 4096 : (int)par;
  y->repeat_count = lv_params_int(p, "repeat_count");
  y->skip_corrupt = o->skip_bad_records;
  y->replica = shard.replica;
  y->num_replicas = shard.num_replicas;
  if (y->parallelism < 1)
    return lv_status_make(LV_ERR_INVALID, "input.file_parallelism must be >= 1, got %lld", (long long)par);
  if (y->repeat_count == 0 || y->repeat_count < -1)
    return lv_status_make(LV_ERR_INVALID, "input.repeat_count must be -1 (forever) or > 0, got %lld",
                          (long long)y->repeat_count);
  /* Expand once now so that a bad pattern fails at create, naming input.file_pattern. */
  lv_file_list files;
  LV_TRY(lv_status_wrap(lv_file_pattern_expand(in->pattern, &files), "input.file_pattern"));
  lv_info("input %s: %d file%s from %s, %d bucket%s, batch up to %lld, replica %d of %d", cls, files.n_files,
          files.n_files == 1 ? "" : "s", in->pattern, o->n_buckets, o->n_buckets == 1 ? "" : "s",
          (long long)in->batch_size, shard.replica, shard.num_replicas);
  lv_file_list_free(&files);
  return NULL;
}

/* ---- batch streams ---- */

/* A finished batch in the queue, or (st NULL) the end of the data (err NULL) or an
 * error. */
typedef struct qitem {
  lv_batch_store *st;
  lv_status err;
} qitem;

struct lv_batch_stream {
  lv_batcher *b;
  lv_stream_finish finish;
  void *ctx;
  lv_batch_store raw; /* the batcher's batch, with a finish step (producer's) */
  int cap;            /* prefetch_batches; 0: batches are built on the caller's thread */
  int n_stores;       /* cap + 1: up to cap queued or being built, one held by the caller */
  lv_batch_store *stores;
  /* shared with the thread, under mu */
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  qitem *q; /* [cap] ring */
  int q_head, q_n;
  lv_batch_store **pool; /* free stores */
  int pool_n;
  bool stop;
  bool started;
  pthread_t thread;
  /* the caller's */
  lv_batch_store *held; /* the batch the caller was last given */
  bool over;            /* the end or an error came out: final is all that follows */
  lv_status final;
};

static lv_status status_copy(lv_status s) {
  return s ? lv_status_make(lv_status_code(s), "%s", lv_status_msg(s)) : NULL;
}

/* The next batch of the stream into st (empty at the end). */
static lv_status produce(lv_batch_stream *bs, lv_batch_store *st, bool *done) {
  if (!bs->finish) return lv_batcher_next_into(bs->b, st, done);
  LV_TRY(lv_batcher_next_into(bs->b, &bs->raw, done));
  lv_batch_store_clear(st);
  if (*done) return NULL;
  return bs->finish(bs->ctx, &bs->raw.batch, st);
}

/* The batcher thread: builds batches in stream order while the queue has room; pushes
 * the end or the first error as its last item. */
static void *batcher_main(void *arg) {
  lv_batch_stream *bs = arg;
  pthread_mutex_lock(&bs->mu);
  for (;;) {
    while (bs->q_n == bs->cap && !bs->stop) pthread_cond_wait(&bs->not_full, &bs->mu);
    if (bs->stop) break;
    LV_ASSERT(bs->pool_n > 0);
    lv_batch_store *st = bs->pool[--bs->pool_n];
    pthread_mutex_unlock(&bs->mu);
    bool done = false;
    lv_status s = produce(bs, st, &done);
    pthread_mutex_lock(&bs->mu);
    if (bs->stop) { /* s may be the yielder's cancellation */
      lv_status_free(s);
      bs->pool[bs->pool_n++] = st;
      break;
    }
    bool last = s || done;
    if (last) {
      bs->pool[bs->pool_n++] = st;
      st = NULL;
    }
    bs->q[(bs->q_head + bs->q_n) % bs->cap] = (qitem){st, s};
    bs->q_n++;
    pthread_cond_signal(&bs->not_empty);
    if (last) break;
  }
  pthread_mutex_unlock(&bs->mu);
  return NULL;
}

static void stream_destroy(lv_batch_stream *bs) {
  if (!bs) return;
  if (bs->started) {
    pthread_mutex_lock(&bs->mu);
    bs->stop = true;
    pthread_cond_broadcast(&bs->not_full);
    pthread_mutex_unlock(&bs->mu);
    /* wakes the thread if it waits on the reader, and fails its next read */
    lv_record_yielder_cancel(lv_batcher_yielder(bs->b));
    pthread_join(bs->thread, NULL);
  }
  for (int i = 0; i < bs->q_n; i++) lv_status_free(bs->q[(bs->q_head + i) % bs->cap].err);
  lv_status_free(bs->final);
  lv_batcher_destroy(bs->b);
  for (int i = 0; i < bs->n_stores; i++) lv_batch_store_free(&bs->stores[i]);
  lv_batch_store_free(&bs->raw);
  free(bs->stores);
  free(bs->pool);
  free(bs->q);
  pthread_mutex_destroy(&bs->mu);
  pthread_cond_destroy(&bs->not_empty);
  pthread_cond_destroy(&bs->not_full);
  free(bs);
}

/* Takes ownership of b (also on error); starts the thread when prefetching. */
static lv_status stream_create(const lv_stream_input *in, lv_batcher *b, lv_batch_stream **out) {
  *out = NULL;
  lv_batch_stream *bs = calloc(1, sizeof *bs);
  LV_ASSERT(bs);
  bs->b = b;
  bs->finish = in->finish;
  bs->ctx = in->bopts.ctx;
  bs->cap = in->prefetch;
  bs->n_stores = bs->cap + 1;
  bs->stores = calloc((size_t)bs->n_stores, sizeof *bs->stores);
  bs->pool = calloc((size_t)bs->n_stores, sizeof *bs->pool);
  bs->q = calloc((size_t)(bs->cap > 0 ? bs->cap : 1), sizeof *bs->q);
  LV_ASSERT(bs->stores && bs->pool && bs->q);
  lv_batch_store_init(&bs->raw);
  for (int i = 0; i < bs->n_stores; i++) {
    lv_batch_store_init(&bs->stores[i]);
    bs->pool[bs->pool_n++] = &bs->stores[i];
  }
  pthread_mutex_init(&bs->mu, NULL);
  pthread_cond_init(&bs->not_empty, NULL);
  pthread_cond_init(&bs->not_full, NULL);
  if (bs->cap > 0) {
    int rc = pthread_create(&bs->thread, NULL, batcher_main, bs);
    if (rc) {
      stream_destroy(bs);
      return lv_status_make(LV_ERR_RESOURCE, "input: cannot start the batcher thread: %s", strerror(rc));
    }
    bs->started = true;
  }
  *out = bs;
  return NULL;
}

/* The stream's next batch (views into a store it keeps until the next call). */
static lv_status stream_next(lv_batch_stream *bs, lv_batch *out, bool *done) {
  *done = false;
  lv_nmap_clear(&out->map);
  out->size = 0;
  if (bs->over) {
    *done = !bs->final;
    return status_copy(bs->final);
  }
  qitem it;
  if (bs->cap == 0) {
    it.st = &bs->stores[0];
    bool end = false;
    it.err = produce(bs, it.st, &end);
    if (it.err || end) it.st = NULL;
  } else {
    pthread_mutex_lock(&bs->mu);
    if (bs->held) bs->pool[bs->pool_n++] = bs->held;
    bs->held = NULL;
    /* the thread always ends with an item: only destroy (this thread) stops it early */
    while (bs->q_n == 0) {
      if (lv_record_yielder_interrupted()) {
        pthread_mutex_unlock(&bs->mu);
        return lv_status_make(LV_ERR_CANCELLED, "input: interrupted while waiting for a batch");
      }
      lv_cond_wait_tick(&bs->not_empty, &bs->mu);
    }
    it = bs->q[bs->q_head];
    bs->q_head = (bs->q_head + 1) % bs->cap;
    bs->q_n--;
    pthread_cond_signal(&bs->not_full);
    pthread_mutex_unlock(&bs->mu);
  }
  if (!it.st) {
    bs->over = true;
    bs->final = it.err;
    *done = !it.err;
    return status_copy(it.err);
  }
  if (bs->cap > 0) bs->held = it.st;
  return lv_batch_store_view(it.st, out);
}

static int stream_ready(lv_batch_stream *bs) {
  if (!bs || bs->cap == 0) return 0;
  pthread_mutex_lock(&bs->mu);
  int n = 0;
  for (int i = 0; i < bs->q_n; i++) n += bs->q[(bs->q_head + i) % bs->cap].st != NULL;
  pthread_mutex_unlock(&bs->mu);
  return n;
}

/* ---- the input ---- */

void lv_stream_input_fini(lv_stream_input *in) {
  stream_destroy(in->train);
  stream_destroy(in->eval);
  in->train = in->eval = NULL;
  free(in->pattern);
  in->pattern = NULL;
}

static lv_status start(lv_stream_input *in, bool eval, uint64_t stream, lv_batch_stream **out) {
  lv_record_yielder_opts y = in->yopts;
  y.stream = stream;
  /* Each training replica keeps every num_replicas-th record of one shuffled order: a
   * seed of each process's own would make their shares overlap and miss records. (Eval
   * reads the files in order: the seed does not matter there.) */
  if (!eval && in->random_seed && y.num_replicas > 1)
    return lv_status_make(LV_ERR_INVALID, "input.file_random_seed = 0 (a random seed per process) with %d replicas: "
                          "the replicas must shuffle alike to share the records out; set a nonzero seed",
                          y.num_replicas);
  if (eval) {
    y.sequential = true;
    y.repeat_count = 1;
    y.buffer_size = 1;
    y.parallelism = 1;
  }
  lv_record_yielder *ry = NULL;
  LV_TRY(lv_status_wrap(lv_record_yielder_create(&y, &ry), "input.file_pattern"));
  lv_batcher *b = NULL;
  lv_batcher_opts o = in->bopts;
  if (!eval && in->train_process) o.process = in->train_process;
  LV_TRY(lv_batcher_create(&o, "input", ry, &b));
  return stream_create(in, b, out);
}

static lv_status ran_out(const lv_stream_input *in, int64_t step) {
  return lv_status_make(LV_ERR_INVALID,
                        "input.repeat_count: the training data (%s) ran out after %lld pass%s at step %lld; "
                        "set repeat_count = -1 to repeat forever",
                        in->pattern, (long long)in->yopts.repeat_count, in->yopts.repeat_count == 1 ? "" : "es",
                        (long long)step);
}

/* Reads and drops the training batches of steps [in->next_step, step). */
static lv_status replay_to(lv_stream_input *in, int64_t step) {
  int64_t from = in->next_step, n = step - from;
  lv_info("input %s: resuming at step %lld: reading the training stream's %lld batch%s before it "
          "(input.resume_replay), so this run trains on what an uninterrupted run with its replica count would",
          in->cls, (long long)step, (long long)n, n == 1 ? "" : "es");
  double t0 = lv_now_monotonic(), last = t0;
  lv_batch b;
  lv_batch_init(&b);
  lv_status s = NULL;
  for (int64_t k = from; k < step && !s; k++) {
    bool done = false;
    s = stream_next(in->train, &b, &done);
    if (!s && done) s = ran_out(in, k);
    double now = lv_now_monotonic();
    if (!s && now - last >= 10.0) {
      double per = (now - t0) / (double)(k + 1 - from);
      lv_info("input %s: replayed %lld of %lld batches, ETA %.0f s", in->cls, (long long)(k + 1 - from),
              (long long)n, per * (double)(step - k - 1));
      last = now;
    }
  }
  lv_batch_free(&b);
  if (!s) lv_info("input %s: replayed %lld batches in %.1f s", in->cls, (long long)n, lv_now_monotonic() - t0);
  return s;
}

lv_status lv_stream_input_train_batch(lv_input *base, int64_t step, lv_batch *out) {
  lv_stream_input *in = (lv_stream_input *)base;
  if (step < 0) return lv_status_make(LV_ERR_INVALID, "input %s: training step %lld < 0", in->cls, (long long)step);
  lv_status s = NULL;
  if (!in->train || step != in->next_step) {
    if (in->replay) {
      if (!in->train || in->next_step < 0 || step < in->next_step) {
        stream_destroy(in->train);
        in->train = NULL;
        LV_TRY(start(in, false, 0, &in->train));
        in->next_step = 0;
      }
      if (step > in->next_step) s = replay_to(in, step);
    } else {
      stream_destroy(in->train);
      in->train = NULL;
      LV_TRY(start(in, false, (uint64_t)step, &in->train));
    }
  }
  in->next_step = step + 1;
  bool done = false;
  if (!s) s = stream_next(in->train, out, &done);
  if (!s && done) s = ran_out(in, step);
  if (s) in->next_step = -1; /* the next call starts over */
  return s;
}

lv_status lv_stream_input_reset(lv_input *base) {
  lv_stream_input *in = (lv_stream_input *)base;
  stream_destroy(in->eval);
  in->eval = NULL;
  return start(in, true, 0, &in->eval);
}

lv_status lv_stream_input_next_eval(lv_input *base, lv_batch *out, bool *done) {
  lv_stream_input *in = (lv_stream_input *)base;
  *done = false;
  if (!in->eval) LV_TRY(lv_stream_input_reset(base));
  bool was_over = in->eval->over;
  lv_status s = stream_next(in->eval, out, done);
  if (!s && *done && !was_over) {
    /* the thread no longer touches the batcher once it has queued the end */
    lv_batcher *b = in->eval->b;
    lv_batcher_stats st = lv_batcher_get_stats(b);
    int64_t skipped = lv_record_yielder_skipped(lv_batcher_yielder(b));
    if (st.dropped_too_long || st.dropped_filtered || st.dropped_bad || skipped)
      lv_info("input %s: eval pass over %s: %lld records, %lld batched, %lld above the last bucket bound, "
              "%lld filtered, %lld bad records and %lld corrupt regions skipped",
              in->cls, in->pattern, (long long)st.records, (long long)st.batched, (long long)st.dropped_too_long,
              (long long)st.dropped_filtered, (long long)st.dropped_bad, (long long)skipped);
  }
  return s;
}

int lv_stream_input_train_ready(lv_input *base) { return stream_ready(((lv_stream_input *)base)->train); }

int64_t lv_stream_input_num_samples(const lv_input *in) {
  (void)in;
  return -1;
}
int64_t lv_stream_input_batch_size(const lv_input *in) { return ((const lv_stream_input *)in)->batch_size; }

int64_t lv_stream_input_buffer_peak_bytes(const lv_input *in) {
  const lv_stream_input *si = (const lv_stream_input *)in;
  return si->train && si->train->b ? lv_record_yielder_buffer_peak_bytes(lv_batcher_yielder(si->train->b)) : 0;
}

/* ---- text inputs ---- */

lv_status lv_text_pattern(const char *cls, const char *pattern, bool text_only, char **out) {
  *out = NULL;
  if (!pattern || !*pattern)
    return lv_status_make(LV_ERR_INVALID, "input.file_pattern: %s needs a file pattern (it is empty)", cls);
  const char *colon = strchr(pattern, ':'), *slash = strchr(pattern, '/');
  bool typed = colon && (!slash || slash > colon);
  const char *prefix = "";
  if (text_only && !typed) prefix = "text:";
  else if (text_only && strncmp(pattern, "text:", 5) != 0)
    return lv_status_make(LV_ERR_INVALID, "input.file_pattern: %s reads text lines (a plain glob or text:glob), "
                          "not \"%.*s\" records", cls, (int)(colon - pattern), pattern);
  size_t n = strlen(prefix) + strlen(pattern) + 1;
  *out = malloc(n);
  LV_ASSERT(*out);
  snprintf(*out, n, "%s%s", prefix, pattern);
  return NULL;
}

lv_status lv_text_tokenizer_create(const lv_params *p, lv_tokenizer **out) {
  *out = NULL;
  const lv_params *tp = lv_params_sub(p, "tokenizer");
  if (!tp)
    return lv_status_make(LV_ERR_INVALID,
                          "input.tokenizer is None; give it a tokenizer class (cls = \"WpmTokenizer\", "
                          "\"SentencePieceTokenizer\", \"VocabFileTokenizer\" or \"AsciiTokenizer\") and its params");
  lv_status s = lv_tokenizer_create(tp, out);
  if (!s) return NULL;
  /* The tokenizer names its own keys "tokenizer.<key>": make them input.tokenizer.<key>. */
  if (!strncmp(lv_status_msg(s), "tokenizer.", 10)) {
    lv_status e = lv_status_make(lv_status_code(s), "input.%s", lv_status_msg(s));
    lv_status_free(s);
    return e;
  }
  return lv_status_wrap(s, "input.tokenizer");
}

lv_status lv_text_max_length(const lv_params *p, const char *key, const lv_tokenizer *tok, int64_t *out) {
  *out = lv_params_is_set(p, key) ? lv_params_int(p, key) : 0;
  if (*out > 0 && *out <= INT32_MAX) return NULL;
  if (*out <= 0 && tok->layout == LV_TOK_LAYOUT_SPM) {
    *out = 0;
    return NULL;
  }
  if (!lv_params_is_set(p, key))
    return lv_status_make(LV_ERR_INVALID, "input.%s is None; %s needs a maximum length in [1, 2^31)", key,
                          tok->cls->cls);
  return lv_status_make(LV_ERR_INVALID, "input.%s must be in [1, 2^31) for %s, got %lld", key, tok->cls->cls,
                        (long long)*out);
}
