#include "runners/decoder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/log.h"
#include "base/path.h"
#include "io/events.h"
#include "metrics/metrics.h"
#include "models/model.h"
#include "runners/follower.h"
#include "runners/instance.h"
#include "runners/memory_report.h"
#include "runners/model_export.h"
#include "runners/scorers.h"

typedef struct dec_state {
  lv_instance *m;
  lv_scorers *scorers; /* what the task's searches add to its decoder (runners/scorers.h) */
  lv_events_writer *ev;
  char dir[LV_PATH_MAX], job[64];
} dec_state;

static int cmp_tag(const void *a, const void *b) {
  return strcmp(((const lv_summary_value *)a)->tag, ((const lv_summary_value *)b)->tag);
}

/* The decoder_out file's text: per key/value pair the key's line, the value and an empty
 * line. */
static void write_pairs(FILE *f, const lv_kv_list *kv) {
  for (int i = 0; i < kv->n; i++) fprintf(f, "%s\n%s\n\n", kv->key[i], kv->value[i]);
}

/* The log line's metrics when the task has no decoder_report: every summary value. */
static char *summary_headline(const lv_summary_value *sv, int n) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  LV_ASSERT(f);
  for (int i = 0; i < n; i++) fprintf(f, "%s%s: %.6g", i ? ", " : "", sv[i].tag, sv[i].value);
  fclose(f);
  return text;
}

/* Writes score-%08d.txt, events and the log lines of a checkpoint's decode. */
static lv_status report(dec_state *d, int64_t step, lv_metric_set *ms, int64_t seen, double secs) {
  lv_summary_value *sv = NULL;
  int n = 0;
  LV_TRY(lv_metric_set_summaries(ms, &sv, &n));
  lv_summary_value *all = realloc(sv, sizeof *all * (size_t)(n + 2));
  LV_ASSERT(all);
  snprintf(all[n].tag, sizeof all[n].tag, "examples/sec");
  all[n++].value = secs > 0 ? seen / secs : 0;
  snprintf(all[n].tag, sizeof all[n].tag, "total_samples");
  all[n++].value = (double)seen;
  /* Sorted by tag, as Lingvo's score files are. */
  qsort(all, (size_t)n, sizeof *all, cmp_tag);
  char *score = lv_summary_score_text(all, n);
  LV_ASSERT(score);
  char path[LV_PATH_MAX];
  /* Named by the global step, as Lingvo's DecodeCheckpoint names it. */
  lv_status s = lv_path_fmt(path, sizeof path, "%s/score-%08lld.txt", d->dir, (long long)step);
  if (!s) s = lv_file_write_atomic(path, score, strlen(score));
  free(score);
  for (int i = 0; !s && i < n; i++) lv_events_scalar(d->ev, all[i].tag, step, all[i].value);
  if (!s) s = lv_append_metric_histories(d->m->cfg, d->job, d->dir, step, all, n);
  char *headline = NULL, *detail = NULL;
  const lv_task_class *c = d->m->task->cls;
  if (!s && c->decoder_report) s = c->decoder_report(d->m->task, ms, &headline, &detail);
  else if (!s) headline = summary_headline(all, n);
  free(all);
  if (!s) {
    lv_info("%s: step:%6lld, %s (%lld examples, %.3f s, %.2f examples/sec)", d->job, (long long)step, headline,
            (long long)seen, secs, secs > 0 ? seen / secs : 0);
    if (detail) lv_info("%s: step %lld: %s", d->job, (long long)step, detail);
    char mem[320];
    lv_memory_summary(d->m, mem, sizeof mem);
    lv_info("%s: memory: %s", d->job, mem);
  }
  free(headline);
  free(detail);
  if (!s) s = lv_events_flush(d->ev);
  return s;
}

static lv_status decode_checkpoint(dec_state *d, const char *prefix) {
  lv_instance *m = d->m;
  LV_TRY(lv_instance_restore(d->m, prefix, NULL));
  double t0 = lv_now_monotonic(); /* the rate counts decoding, not the restore (Lingvo's) */
  int64_t step = lv_instance_step(m);
  /* Lingvo's DecodeCheckpoint: batches until decoder_samples_per_summary examples (None:
   * samples_per_summary; 0: the whole dataset), then decoder_out_<checkpoint id>. */
  const lv_params *ep = lv_params_sub(m->cfg, "task.eval");
  int64_t want = lv_params_is_set(ep, "decoder_samples_per_summary") ? lv_params_int(ep, "decoder_samples_per_summary")
                                                                      : lv_params_int(ep, "samples_per_summary");
  if (want <= 0) want = INT64_MAX;
  int64_t ckpt_id = lv_checkpoint_step(prefix);
  if (ckpt_id < 0) ckpt_id = step; /* a prefix not named ckpt-N */
  if (ckpt_id != step)
    lv_warn("%s: checkpoint id %lld != global step %lld: decoder_out is named by the id, the score by the step",
            prefix, (long long)ckpt_id, (long long)step);
  lv_metric_set *ms = lv_metric_set_new();
  LV_ASSERT(ms);
  lv_status s = m->task->cls->create_decoder_metrics(m->task, ms);
  if (!s) s = lv_input_reset(m->input);
  char *out = NULL;
  size_t outlen = 0;
  FILE *of = open_memstream(&out, &outlen);
  LV_ASSERT(of);
  lv_batch b;
  lv_batch_init(&b);
  lv_kv_list kv = {0};
  int64_t seen = 0;
  double last_log = t0;
  for (bool done = false; !s && seen < want;) {
    s = lv_input_next_eval(m->input, &b, &done);
    if (s || done) break;
    s = lv_task_decode_batch(m->task, m->graph, &b, ms, &kv);
    if (s) break;
    write_pairs(of, &kv);
    seen += kv.n;
    lv_kv_list_free(&kv);
    double now = lv_now_monotonic();
    if (now - last_log > 10) {
      lv_info("%s: step %lld: decoded %lld examples, %.2f examples/sec", d->job, (long long)step, (long long)seen,
              seen / (now - t0));
      last_log = now;
    }
  }
  lv_kv_list_free(&kv);
  lv_batch_free(&b);
  fclose(of);
  double secs = lv_now_monotonic() - t0;
  if (!s) {
    char path[LV_PATH_MAX];
    s = lv_path_fmt(path, sizeof path, "%s/decoder_out_%09lld", d->dir, (long long)ckpt_id);
    if (!s) s = lv_file_write_atomic(path, out, outlen);
  }
  free(out);
  if (!s) s = report(d, step, ms, seen, secs);
  lv_metric_set_free(ms);
  return s;
}

/* with_input: the decoder job (its input made here); else interactive decoding, which
 * needs only decode and the line hooks (checked by its caller), or with any_task the
 * library API, which also takes a task without a decode path (set up without decoding). */
static lv_status setup(const lv_params *cfg, bool with_input, bool any_task, const lv_model_file *f, dec_state *d) {
  LV_TRY(f ? lv_instance_create_for_file(cfg, f, &d->m) : lv_instance_create(cfg, false, lv_input_no_shard(), &d->m));
  lv_task *t = d->m->task;
  if (any_task && !t->cls->decode) return NULL;
  if (with_input ? !lv_task_class_decodes(t->cls) || !t->cls->create_decoder_metrics : !t->cls->decode)
    return lv_status_make(LV_ERR_INVALID, "task %s has no decoder job (no Decode / PostProcessDecodeOut): run "
                          "bin/evaler for its metrics", t->cls->cls);
  if (t->cls->decoder_setup) LV_TRY(t->cls->decoder_setup(t, cfg));
  LV_TRY(lv_scorers_open(cfg, t, &d->scorers));
  if (with_input) LV_TRY(lv_instance_create_input(d->m, lv_input_no_shard()));
  return NULL;
}

static void teardown(dec_state *d) {
  lv_scorers_close(d->scorers, d->m ? d->m->task : NULL);
  lv_instance_destroy(d->m);
}

#define MAX_LINE_BYTES LV_DECODER_MAX_LINE_BYTES

lv_status lv_decoder_read_line(FILE *in, const char *name, char **line, size_t *cap, ssize_t *len, bool *cut) {
  size_t n = 0;
  int c;
  *cut = false;
  while ((c = getc_unlocked(in)) != EOF && c != '\n') {
    if (n >= MAX_LINE_BYTES) {
      *cut = true;
      continue;
    }
    if (n + 2 > *cap) {
      size_t nc = *cap ? 2 * *cap : 4096;
      char *g = realloc(*line, nc);
      if (!g) return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory reading a line", name);
      *line = g;
      *cap = nc;
    }
    (*line)[n++] = (char)c;
  }
  if (ferror(in)) return lv_status_make(LV_ERR_IO, "%s: read error: %s", name, strerror(errno));
  if (c == EOF && n == 0 && !*cut) {
    *len = -1;
    return NULL;
  }
  while (n > 0 && (*line)[n - 1] == '\r') n--;
  if (!*line) {
    *line = malloc(1);
    if (!*line) return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory reading a line", name);
    *cap = 1;
  }
  (*line)[n] = 0;
  *len = (ssize_t)n;
  return NULL;
}

/* Writes one output line and flushes it; a failed write (a full disk) is an error, so no
 * output line is lost silently. */
lv_status lv_decoder_write_line(const char *kind, FILE *out, const char *text, int64_t lineno) {
  if (fprintf(out, "%s\n", text) < 0 || fflush(out) != 0)
    return lv_status_make(LV_ERR_IO, "--%s: writing the output of line %lld failed: %s", kind, (long long)lineno,
                          strerror(errno));
  return NULL;
}

lv_status lv_decoder_open_input(const char *kind, const char *path, FILE **in) {
  *in = NULL;
  if (!strcmp(path, "-")) {
    *in = stdin;
    return NULL;
  }
  struct stat st;
  if (!stat(path, &st) && S_ISDIR(st.st_mode))
    return lv_status_make(LV_ERR_INVALID, "--%s=%s: is a directory (expected a file of lines, or - for stdin)", kind,
                          path);
  *in = fopen(path, "rb");
  if (!*in)
    return lv_status_make(LV_ERR_NOT_FOUND, "--%s=%s: cannot open it: %s", kind, path, strerror(errno));
  return NULL;
}

lv_status lv_decoder_checkpoint_prefix(const lv_params *cfg, const char *checkpoint, const char *what, char *prefix,
                                        size_t n) {
  const char *logdir = lv_params_str(cfg, "cluster.logdir");
  char train_dir[LV_PATH_MAX];
  LV_TRY(lv_status_wrap(lv_path_fmt(train_dir, sizeof train_dir, "%s/train", logdir), "--logdir"));
  const char *ck = checkpoint && *checkpoint ? checkpoint : train_dir;
  struct stat st;
  if (ck == train_dir && stat(ck, &st) != 0)
    return lv_status_make(LV_ERR_NOT_FOUND, "%s: no checkpoint: %s does not exist (train first, or give "
                          "--checkpoint=PREFIX)", what, ck);
  if (!stat(ck, &st) && S_ISDIR(st.st_mode)) {
    int64_t step;
    bool found = false;
    LV_TRY(lv_checkpoint_latest(ck, prefix, n, &step, &found));
    if (!found) return lv_status_make(LV_ERR_NOT_FOUND, "%s: no checkpoint in %s", what, ck);
    return NULL;
  }
  return lv_status_wrap(lv_path_fmt(prefix, n, "%s", ck), "--checkpoint");
}

struct lv_line_decoder {
  dec_state d;
  char prefix[LV_PATH_MAX];
};

lv_status lv_line_decoder_open(const lv_params *cfg, const lv_model_file *f, lv_line_decoder **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  lv_status s = setup(cfg, false, true, f, &(*out)->d);
  if (s) {
    lv_line_decoder_close(*out);
    *out = NULL;
  }
  return s;
}

lv_status lv_line_decoder_restore(lv_line_decoder *ld, const char *checkpoint, const char *what) {
  const lv_params *cfg = ld->d.m->cfg;
  LV_TRY(lv_decoder_checkpoint_prefix(cfg, checkpoint, what, ld->prefix, sizeof ld->prefix));
  LV_TRY(lv_status_wrap(lv_instance_restore(ld->d.m, ld->prefix, NULL), "%s", what));
  lv_warn_model_params_drift(ld->prefix, cfg);
  return NULL;
}

lv_status lv_line_decoder_restore_file(lv_line_decoder *ld, const lv_model_file *f) {
  LV_TRY(lv_instance_restore_model_file(ld->d.m, f));
  return lv_path_fmt(ld->prefix, sizeof ld->prefix, "%s", f->path);
}

bool lv_line_decoder_share(lv_line_decoder *ld, lv_line_decoder *src) {
  if (!lv_varstore_share_values(ld->d.m->vs, src->d.m->vs)) return false;
  lv_scorers_share(ld->d.scorers, src->d.scorers);
  snprintf(ld->prefix, sizeof ld->prefix, "%s", src->prefix);
  return true;
}

lv_instance *lv_line_decoder_instance(lv_line_decoder *ld) { return ld->d.m; }
lv_scorers *lv_line_decoder_scorers(lv_line_decoder *ld) { return ld->d.scorers; }
const char *lv_line_decoder_checkpoint(const lv_line_decoder *ld) { return ld->prefix; }

void lv_line_decoder_close(lv_line_decoder *ld) {
  if (!ld) return;
  teardown(&ld->d);
  free(ld);
}

lv_status lv_decoder_run(const lv_params *cfg, const lv_decoder_options *opt) {
  dec_state d = {0};
  const char *logdir = lv_params_str(cfg, "cluster.logdir");
  LV_TRY(lv_job_dir_prepare(cfg, "decoder", opt->dataset, d.dir, sizeof d.dir, d.job, sizeof d.job));
  lv_status s = NULL;
  char train_dir[LV_PATH_MAX];
  LV_TRY(lv_status_wrap(lv_path_fmt(train_dir, sizeof train_dir, "%s/train", logdir), "--logdir"));
  const lv_params *ep = lv_params_sub(cfg, "task.eval");
  const int64_t own_max_steps = lv_params_int(cfg, "train.max_steps");
  int64_t max_steps;
  LV_TRY(lv_trainer_max_steps_latest(train_dir, own_max_steps, &max_steps));
  lv_follower_options fo = {.train_dir = train_dir,
                            .job_dir = d.dir,
                            .job = d.job,
                            .max_steps = max_steps,
                            .all_checkpoints = lv_params_has(ep, "decode_all_checkpoints") &&
                                               lv_params_bool(ep, "decode_all_checkpoints"),
                            .once = opt->once,
                            .checkpoint = opt->checkpoint,
                            .start_after = lv_params_has(ep, "start_decoder_after")
                                               ? lv_params_int(ep, "start_decoder_after") : 0,
                            .start_after_name = "eval.start_decoder_after",
                            .verb = "decoded",
                            .max_poll_secs = opt->max_poll_secs,
                            .timeout_secs = opt->timeout_secs};
  lv_follower *f = NULL;
  LV_TRY(lv_follower_create(&fo, &f));
  s = setup(cfg, true, false, NULL, &d);
  char prefix[LV_PATH_MAX];
  int64_t step;
  bool done = false;
  while (!s) {
    s = lv_follower_next(f, prefix, sizeof prefix, &step, &done);
    if (s || done) break;
    if (!d.ev && (s = lv_events_writer_open(d.dir, 5.0, &d.ev))) break;
    lv_warn_model_params_drift(prefix, cfg);
    s = decode_checkpoint(&d, prefix);
    if (!s && !fo.once) lv_follower_set_max_steps(f, max_steps = lv_trainer_max_steps(prefix, max_steps, own_max_steps));
    s = s ? lv_follower_failed(f, s) : lv_follower_mark_processed(f);
  }
  if (d.ev) {
    lv_status s2 = lv_events_writer_close(d.ev);
    if (!s) s = s2;
    else lv_status_free(s2);
  }
  teardown(&d);
  lv_follower_destroy(f);
  return s;
}
