/* Follows a training run's checkpoints for a job that processes each one (the evaler,
 * the decoder): Lingvo's BaseRunner checkpoint polling. It reads <train_dir>/checkpoint,
 * yields the checkpoints the job has not processed yet, oldest first when
 * all_checkpoints (eval_all_checkpoints / decode_all_checkpoints) and otherwise only the
 * newest, and keeps the processed list <job_dir>/<processed_file> (one prefix per line,
 * created empty if missing) so a restarted job never repeats a checkpoint.
 *
 * When nothing new is there it sleeps with Lingvo's backoff (1 s, x1.5, capped at
 * max_poll_secs; reset after each checkpoint processed) and gives up after timeout_secs
 * of waiting. It is done once a checkpoint at or past max_steps has been processed (in
 * this run or an earlier one). With `once` it yields one checkpoint (the given prefix,
 * the newest in the given directory, or the newest in train_dir) and is then done.
 *
 *   lv_follower *f;
 *   LV_TRY(lv_follower_create(&opt, &f));
 *   for (;;) {
 *     s = lv_follower_next(f, prefix, sizeof prefix, &step, &done);
 *     if (s || done) break;
 *     s = process(prefix);
 *     s = s ? lv_follower_failed(f, s) : lv_follower_mark_processed(f);
 *     if (s) break;
 *   }
 *   lv_follower_destroy(f);
 */
#ifndef LV_RUNNERS_FOLLOWER_H
#define LV_RUNNERS_FOLLOWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct lv_follower_options {
  const char *train_dir;      /* <logdir>/train */
  const char *job_dir;        /* <logdir>/eval_<ds> or decoder_<ds>; must exist */
  const char *job;            /* "eval_test": the prefix of messages */
  const char *processed_file; /* NULL = "processed_ckpts.txt" */
  int64_t max_steps;          /* train.max_steps */
  bool all_checkpoints;
  bool once;
  const char *checkpoint;     /* with once: a prefix, or a directory; NULL or "" = train_dir */
  /* Checkpoints whose step (from the name) is below this are recorded as processed and
   * skipped without being yielded (Lingvo's start_decoder_after); 0 = none. */
  int64_t start_after;
  const char *start_after_name; /* for the message, e.g. "eval.start_decoder_after" */
  const char *verb;             /* in the deleted-checkpoint warning; NULL = "processed" */
  double max_poll_secs;         /* backoff cap (Lingvo: 300); must be > 0 unless once */
  double timeout_secs;          /* 0 = wait forever */
  /* How to wait; NULL = usleep. Tests pass a hook that records the delay and can change
   * the train dir meanwhile, so they never sleep. */
  void (*sleep_fn)(void *ctx, double secs);
  void *sleep_ctx;
} lv_follower_options;

typedef struct lv_follower lv_follower;

/* Copies opt (strings included) and creates the processed list if missing. */
lv_status lv_follower_create(const lv_follower_options *opt, lv_follower **out);
void lv_follower_destroy(lv_follower *f);
/* The next checkpoint to process (prefix and the step in its name), waiting for one if
 * need be; *done = true (and prefix untouched) when the job should stop. With once, a
 * missing checkpoint is LV_ERR_NOT_FOUND; waiting past timeout_secs is LV_ERR_NOT_FOUND. */
lv_status lv_follower_next(lv_follower *f, char *prefix, size_t n, int64_t *step, bool *done);
/* The checkpoint last yielded was processed: append it to the processed list. */
lv_status lv_follower_mark_processed(lv_follower *f);
/* Processing the checkpoint last yielded failed with s. When polling and the trainer's
 * retention has deleted it meanwhile (no PREFIX.index), s is dropped with a warning and
 * NULL returned: the next call moves on. Otherwise s is returned. */
lv_status lv_follower_failed(lv_follower *f, lv_status s);
/* The trainer's train.max_steps as learned from a checkpoint (the evaler reads it from
 * each checkpoint it processes): applies to the checks that follow. */
void lv_follower_set_max_steps(lv_follower *f, int64_t max_steps);

/* What the jobs that follow a trainer (evaler, decoder) share. */
typedef struct lv_params lv_params;
/* dir = <cluster.logdir>/<kind>_<dataset lower-case>, job = "<kind>_<dataset>"; checks
 * the directory is writable (creating it) and writes the job's params.txt there. */
lv_status lv_job_dir_prepare(const lv_params *cfg, const char *kind, const char *dataset, char *dir, size_t dn,
                             char *job, size_t jn);
/* train.max_steps from the trainer's params stored in checkpoint prefix, else current;
 * logs when it differs from this job's own value (own). */
int64_t lv_trainer_max_steps(const char *prefix, int64_t current, int64_t own);
/* The same from the newest checkpoint listed in train_dir (own when there is none). */
lv_status lv_trainer_max_steps_latest(const char *train_dir, int64_t own, int64_t *out);
/* Warns (once per process) when the model params this job built (cfg's task.*, less
 * task.train.*, task.eval.*, the search's task.decoder.fusion.* (the LM fused into the
 * decoder's searches), task.decoder.beam_search.* and an LM's task.decoder.sample_*,
 * dropout probabilities and weight noise) differ from those the trainer
 * stored in checkpoint prefix: e.g. a trainer run with --model_params_override that this
 * job was not given, where the variables still load but the model computes something
 * else. Names up to 4 keys with both values. */
void lv_warn_model_params_drift(const char *prefix, const lv_params *cfg);

/* Lingvo's MetricHistory.ConditionalAppend after an evaluation or decode of step: each of
 * the n summaries whose (job, tag) is a metric history of task.train (early_stop with a
 * window, a DevBasedSchedule) is appended to <dir>/<tag>.history.txt, dir being the job's
 * <logdir>/<job>. */
struct lv_summary_value;
lv_status lv_append_metric_histories(const lv_params *cfg, const char *job, const char *dir, int64_t step,
                                     const struct lv_summary_value *sv, int n);

#endif
