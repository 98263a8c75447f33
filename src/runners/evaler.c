#include "runners/evaler.h"
#include "base/names.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"
#include "base/path.h"
#include "io/events.h"
#include "metrics/metrics.h"
#include "runners/follower.h"
#include "runners/instance.h"
#include "runners/memory_report.h"

typedef struct eval_state {
  lv_instance *m;
  lv_events_writer *ev;
  char dir[LV_PATH_MAX], job[64];
} eval_state;

/* The AverageMetric named, created on first use. */
static lv_status average_metric(lv_metric_set *ms, const char *name, lv_metric **out) {
  *out = lv_metric_set_get(ms, name);
  if (*out) return NULL;
  LV_TRY(lv_metric_set_add(ms, name, lv_metric_average_new()));
  *out = lv_metric_set_get(ms, name);
  return NULL;
}

static lv_status add(lv_metric_set *ms, const char *name, double v, double w) {
  lv_metric *am = NULL;
  LV_TRY(average_metric(ms, name, &am));
  return lv_metric_average_update(am, v, w);
}

/* Lingvo's total_weight = 1 (num_predictions, total_samples): a total, not an average. */
static lv_status report_total(lv_metric_set *ms, const char *name, double total) {
  lv_metric *am = NULL;
  LV_TRY(average_metric(ms, name, &am));
  lv_metric_set_totals(am, total, 1.0);
  return NULL;
}

/* A NaN or Inf metric value or weight would poison its average (the sums become NaN,
 * reported as 0 or NaN for the whole set): the evaluation stops instead, naming the
 * batch, and writes no score. */
static lv_status check_finite(const lv_metrics *mt, const char *prefix, int64_t batch, int64_t seen, int64_t size) {
  for (int i = 0; i < mt->n; i++) {
    double v = lv_metrics_value(mt, i), w = mt->weight[i];
    if (isfinite(v) && isfinite(w)) continue;
    return lv_status_make(LV_ERR_INVALID,
                          "evaluating %s: batch %lld (examples %lld to %lld of the pass) gives metric %s = %g with "
                          "weight %g: a non-finite %s (%s); no score written",
                          prefix, (long long)batch, (long long)seen, (long long)(seen + size - 1), mt->name[i], v, w,
                          isfinite(w) ? "value" : "weight",
                          isfinite(w) ? "a NaN or Inf in the batch's inputs, or variables that diverged"
                                      : "a NaN or Inf weight in the data, e.g. a record's target_weight");
  }
  return NULL;
}

static lv_status eval_checkpoint(eval_state *e, const char *prefix) {
  lv_instance *m = e->m;
  double t0 = lv_now_monotonic();
  LV_TRY(lv_instance_restore(e->m, prefix, NULL));
  int64_t step = lv_instance_step(m);
  const lv_params *ep = lv_params_sub(m->cfg, "task.eval");
  if (step < lv_params_int(ep, "start_eval_after")) {
    lv_info("%s: step %lld < eval.start_eval_after: skipped", prefix, (long long)step);
    return NULL;
  }
  int64_t want = lv_params_int(ep, "samples_per_summary"), total = lv_input_num_samples(m->input);
  /* total is -1 when the input cannot tell (record streams): then the pass ends with the
   * input (done), or at samples_per_summary when that is set. */
  if (total < 0) want = want > 0 ? want : INT64_MAX;
  else if (want <= 0 || want > total) want = total;
  lv_metric_set *ms = lv_metric_set_new();
  LV_ASSERT(ms);
  int64_t seen = 0;
  LV_TRY(lv_input_reset(m->input));
  lv_batch b;
  lv_batch_init(&b);
  lv_metrics mt;
  lv_metrics_init(&mt);
  lv_status s = NULL;
  int64_t batch = 0;
  for (bool first = true, done = false; !s && seen < want; first = false) {
    s = lv_input_next_eval(m->input, &b, &done);
    if (s || done) break;
    s = lv_instance_fprop(m, &b, false, step, &mt);
    if (!s) s = check_finite(&mt, prefix, batch, seen, b.size);
    batch++;
    for (int i = 0; !s && i < mt.n; i++) s = add(ms, mt.name[i], lv_metrics_value(&mt, i), mt.weight[i]);
    if (!s) s = add(ms, "num_samples_in_batch", (double)b.size, 1.0);
    if (!s && first && m->task->cls->eval_summaries) s = m->task->cls->eval_summaries(m->task, &b, &mt, step, e->ev);
    seen += b.size;
  }
  lv_metrics_free(&mt);
  lv_batch_free(&b);
  lv_metric *preds = lv_metric_set_get(ms, "num_preds");
  if (!s && preds) s = report_total(ms, "num_preds", lv_metric_total_value(preds));
  if (!s) s = report_total(ms, "total_samples", (double)seen);
  lv_summary_value *sv = NULL;
  int nsv = 0;
  if (!s) s = lv_metric_set_summaries(ms, &sv, &nsv);
  lv_metric_set_free(ms);
  if (s) return s;
  char *score = lv_summary_score_text(sv, nsv), *status = NULL;
  size_t stl = 0;
  FILE *stf = open_memstream(&status, &stl);
  LV_ASSERT(score && stf);
  fprintf(stf, "%s: step:%6lld", e->job, (long long)step);
  for (int i = 0; i < nsv; i++) {
    fprintf(stf, ", %s: %.8g", sv[i].tag, sv[i].value);
    lv_events_scalar(e->ev, sv[i].tag, step, sv[i].value);
  }
  fclose(stf);
  s = lv_append_metric_histories(m->cfg, e->job, e->dir, step, sv, nsv);
  free(sv);
  char path[LV_PATH_MAX];
  if (!s) s = lv_path_fmt(path, sizeof path, "%s/score-%08lld.txt", e->dir, (long long)lv_checkpoint_step(prefix));
  if (!s) s = lv_file_write_atomic(path, score, strlen(score));
  lv_info("%s (%lld examples, %.3f s)", status, (long long)seen, lv_now_monotonic() - t0);
  char mem[320];
  lv_memory_summary(m, mem, sizeof mem);
  lv_info("%s: memory: %s", e->job, mem);
  free(score);
  free(status);
  if (!s) s = lv_events_flush(e->ev);
  return s;
}

/* Nothing was left to evaluate: say what was scored before and the last scores. */
static void report_finished(const eval_state *e, int64_t max_steps) {
  char path[LV_PATH_MAX];
  char *data = NULL;
  size_t len = 0;
  lv_status s = lv_path_fmt(path, sizeof path, "%s/processed_ckpts.txt", e->dir);
  if (!s) s = lv_file_read_all(path, &data, &len);
  if (s) {
    lv_status_free(s);
    return;
  }
  int n = 0;
  char *last = NULL;
  for (char *save = NULL, *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    n++;
    free(last);
    last = strdup(line);
    LV_ASSERT(last);
  }
  free(data);
  if (!n) return;
  lv_info("%s: nothing left to evaluate: the checkpoint at train.max_steps %lld is already scored (%d checkpoint%s "
          "in %s; the last is %s)", e->job, (long long)max_steps, n, n > 1 ? "s" : "", path, last);
  s = lv_path_fmt(path, sizeof path, "%s/score-%08lld.txt", e->dir, (long long)lv_checkpoint_step(last));
  free(last);
  if (!s) s = lv_file_read_all(path, &data, &len);
  if (s) {
    lv_status_free(s);
    return;
  }
  for (char *save = NULL, *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
    lv_info("  %s", line);
  free(data);
}

lv_status lv_evaler_run(const lv_params *cfg, const lv_evaler_options *opt) {
  eval_state e = {0};
  const char *logdir = lv_params_str(cfg, "cluster.logdir");
  LV_TRY(lv_job_dir_prepare(cfg, "eval", opt->dataset, e.dir, sizeof e.dir, e.job, sizeof e.job));
  lv_status s = NULL;
  const int64_t own_max_steps = lv_params_int(cfg, "train.max_steps");
  const lv_params *ep = lv_params_sub(cfg, "task.eval");
  const char *load_from = lv_params_str(ep, "load_checkpoint_from");
  char train_dir[LV_PATH_MAX];
  LV_TRY(lv_path_fmt(train_dir, sizeof train_dir, "%s/train", logdir));
  /* The trainer may have run with another train.max_steps (an override this job was not
   * given): its params are in every checkpoint, so the newest one says when to stop. */
  int64_t max_steps;
  LV_TRY(lv_trainer_max_steps_latest(train_dir, own_max_steps, &max_steps));
  lv_follower_options fo = {.train_dir = train_dir,
                            .job_dir = e.dir,
                            .job = e.job,
                            .max_steps = max_steps,
                            .all_checkpoints = lv_params_bool(ep, "eval_all_checkpoints"),
                            .once = opt->once || *load_from,
                            .checkpoint = opt->checkpoint && *opt->checkpoint ? opt->checkpoint : load_from,
                            .verb = "evaluated",
                            .max_poll_secs = opt->max_poll_secs,
                            .timeout_secs = opt->timeout_secs};
  lv_follower *f = NULL;
  LV_TRY(lv_follower_create(&fo, &f));
  /* The model (and its input) now, so a bad config fails before any wait. */
  s = lv_instance_create(cfg, true, lv_input_no_shard(), &e.m);
  char prefix[8192];
  int64_t step;
  bool done = false;
  int evaluated = 0;
  while (!s) {
    s = lv_follower_next(f, prefix, sizeof prefix, &step, &done);
    if (s || done) break;
    /* The events file only once there is something to write into it. */
    if (!e.ev && (s = lv_events_writer_open(e.dir, 5.0, &e.ev))) break;
    lv_warn_model_params_drift(prefix, cfg);
    s = eval_checkpoint(&e, prefix);
    if (!s && !fo.once) {
      max_steps = lv_trainer_max_steps(prefix, max_steps, own_max_steps);
      lv_follower_set_max_steps(f, max_steps);
    }
    s = s ? lv_follower_failed(f, s) : lv_follower_mark_processed(f);
    if (!s) evaluated++;
  }
  if (!s && !evaluated && !fo.once) report_finished(&e, max_steps);
  if (e.ev) {
    lv_status s2 = lv_events_writer_close(e.ev);
    if (!s) s = s2;
    else lv_status_free(s2);
  }
  lv_instance_destroy(e.m);
  lv_follower_destroy(f);
  return s;
}
