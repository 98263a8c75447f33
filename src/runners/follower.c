#include "runners/follower.h"
#include <stdio.h>
#include "params/params.h"
#include "base/names.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/file.h"
#include "base/path.h"
#include "metrics/metrics.h"
#include "optim/optim_params.h"
#include "base/log.h"
#include "runners/checkpointer.h"

struct lv_follower {
  lv_follower_options opt; /* strings owned (copies) */
  char *processed_path;
  /* The scan in progress: every checkpoint the state file listed, oldest first. */
  char **prefixes;
  int64_t *steps;
  int n, pos;
  bool scanning;
  bool did;      /* this scan processed a checkpoint */
  bool finished; /* a checkpoint at or past max_steps is processed */
  bool done;
  double delay, waited;
  char *current; /* the checkpoint last yielded */
  int64_t current_step;
};

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

static void real_sleep(void *ctx, double secs) {
  (void)ctx;
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

lv_status lv_follower_create(const lv_follower_options *opt, lv_follower **out) {
  *out = NULL;
  if (opt->checkpoint && *opt->checkpoint && !opt->once)
    return lv_status_make(LV_ERR_INVALID, "--checkpoint=%s goes with --once (without it the job follows the "
                          "trainer's checkpoints and would not read it)", opt->checkpoint);
  if (!(opt->timeout_secs >= 0))
    return lv_status_make(LV_ERR_INVALID, "--timeout_secs=%g: expected >= 0 (0: wait for ever)", opt->timeout_secs);
  lv_follower *f = calloc(1, sizeof *f);
  LV_ASSERT(f);
  f->opt = *opt;
  f->opt.train_dir = dup_or_empty(opt->train_dir);
  f->opt.job_dir = dup_or_empty(opt->job_dir);
  f->opt.job = dup_or_empty(opt->job);
  f->opt.processed_file = dup_or_empty(opt->processed_file && *opt->processed_file ? opt->processed_file
                                                                                     : "processed_ckpts.txt");
  f->opt.checkpoint = dup_or_empty(opt->checkpoint);
  f->opt.start_after_name = dup_or_empty(opt->start_after_name);
  f->opt.verb = strdup(opt->verb ? opt->verb : "processed");
  if (!f->opt.sleep_fn) f->opt.sleep_fn = real_sleep;
  f->delay = 1.0;
  size_t len = strlen(f->opt.job_dir) + strlen(f->opt.processed_file) + 2;
  f->processed_path = malloc(len);
  LV_ASSERT(f->opt.train_dir && f->opt.job_dir && f->opt.job && f->opt.processed_file && f->opt.checkpoint &&
            f->opt.start_after_name && f->opt.verb && f->processed_path);
  snprintf(f->processed_path, len, "%s/%s", f->opt.job_dir, f->opt.processed_file);
  lv_status s = NULL;
  if (!opt->once && !(opt->max_poll_secs > 0))
    s = lv_status_make(LV_ERR_INVALID, "%s: max_poll_secs must be > 0, not %g", f->opt.job, opt->max_poll_secs);
  else if (!lv_file_exists(f->processed_path)) s = lv_file_write_atomic(f->processed_path, "", 0);
  if (s) {
    lv_follower_destroy(f);
    return s;
  }
  *out = f;
  return NULL;
}

static void end_scan(lv_follower *f) {
  for (int k = 0; k < f->n; k++) free(f->prefixes[k]);
  free(f->prefixes);
  free(f->steps);
  f->prefixes = NULL;
  f->steps = NULL;
  f->n = f->pos = 0;
  f->scanning = false;
}

void lv_follower_destroy(lv_follower *f) {
  if (!f) return;
  end_scan(f);
  free((char *)f->opt.train_dir);
  free((char *)f->opt.job_dir);
  free((char *)f->opt.job);
  free((char *)f->opt.processed_file);
  free((char *)f->opt.checkpoint);
  free((char *)f->opt.start_after_name);
  free((char *)f->opt.verb);
  free(f->processed_path);
  free(f->current);
  free(f);
}

static bool is_processed(const lv_follower *f, const char *prefix) {
  char *text = NULL;
  size_t len = 0;
  lv_status s = lv_file_read_all(f->processed_path, &text, &len);
  if (s) {
    lv_status_free(s);
    return false;
  }
  bool found = false;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save))
    found = !strcmp(line, prefix);
  free(text);
  return found;
}

static void set_current(lv_follower *f, const char *prefix, int64_t step) {
  free(f->current);
  f->current = strdup(prefix);
  LV_ASSERT(f->current);
  f->current_step = step;
}

static lv_status yield(lv_follower *f, char *prefix, size_t n, int64_t *step) {
  if (strlen(f->current) >= n)
    return lv_status_make(LV_ERR_INVALID, "%s: checkpoint path %s is longer than %zu bytes", f->opt.job, f->current,
                          n - 1);
  memcpy(prefix, f->current, strlen(f->current) + 1);
  *step = f->current_step;
  return NULL;
}

static lv_status next_once(lv_follower *f, char *prefix, size_t n, int64_t *step, bool *done) {
  f->done = true; /* whatever happens, once is once */
  const char *given = f->opt.checkpoint;
  if (*given && !lv_file_is_dir(given)) {
    set_current(f, given, lv_checkpoint_step(given));
    return yield(f, prefix, n, step);
  }
  const char *dir = *given ? given : f->opt.train_dir;
  char latest[8192];
  int64_t s = -1;
  bool found = false;
  LV_TRY(lv_checkpoint_latest(dir, latest, sizeof latest, &s, &found));
  if (!found) return lv_status_make(LV_ERR_NOT_FOUND, "no checkpoint found in %s", dir);
  set_current(f, latest, s);
  *done = false;
  return yield(f, prefix, n, step);
}

lv_status lv_follower_next(lv_follower *f, char *prefix, size_t n, int64_t *step, bool *done) {
  *done = true;
  if (f->done) return NULL;
  if (f->opt.once) {
    *done = false;
    return next_once(f, prefix, n, step, done);
  }
  for (;;) {
    if (!f->scanning) {
      LV_TRY(lv_checkpoint_list(f->opt.train_dir, &f->prefixes, &f->steps, &f->n));
      f->scanning = true;
      f->did = false;
      f->pos = f->opt.all_checkpoints ? 0 : (f->n > 0 ? f->n - 1 : 0);
    }
    while (f->pos < f->n) {
      int k = f->pos++;
      if (is_processed(f, f->prefixes[k])) {
        f->finished |= f->steps[k] >= f->opt.max_steps;
        continue;
      }
      set_current(f, f->prefixes[k], f->steps[k]);
      if (f->steps[k] < f->opt.start_after) {
        lv_info("%s: step %lld < %s: skipped", f->current, (long long)f->steps[k], f->opt.start_after_name);
        LV_TRY(lv_follower_mark_processed(f));
        continue;
      }
      *done = false;
      return yield(f, prefix, n, step);
    }
    end_scan(f);
    if (f->finished) {
      f->done = true;
      return NULL;
    }
    if (f->did) {
      f->delay = 1.0;
      f->waited = 0;
      continue;
    }
    if (f->opt.timeout_secs > 0 && f->waited >= f->opt.timeout_secs)
      return lv_status_make(LV_ERR_NOT_FOUND, "no new checkpoint in %s for %.0f s; giving up", f->opt.train_dir,
                            f->waited);
    lv_info("%s: no new checkpoint in %s; sleeping %.1f s", f->opt.job, f->opt.train_dir, f->delay);
    f->opt.sleep_fn(f->opt.sleep_ctx, f->delay);
    f->waited += f->delay;
    f->delay *= 1.5;
    if (f->delay > f->opt.max_poll_secs) f->delay = f->opt.max_poll_secs;
  }
}

lv_status lv_follower_mark_processed(lv_follower *f) {
  LV_ASSERT(f->current);
  LV_TRY(lv_file_append_line(f->processed_path, f->current));
  f->did = true;
  f->finished |= f->current_step >= f->opt.max_steps;
  return NULL;
}

lv_status lv_follower_failed(lv_follower *f, lv_status s) {
  LV_ASSERT(s && f->current);
  if (f->opt.once) return s;
  size_t len = strlen(f->current) + sizeof ".index";
  char *index = malloc(len);
  LV_ASSERT(index);
  snprintf(index, len, "%s.index", f->current);
  bool gone = !lv_file_exists(index);
  free(index);
  /* Only a failure to find or read its files is the deletion's: a NaN metric or a shape
   * mismatch of a checkpoint deleted meanwhile is still the error it is. */
  lv_code c = lv_status_code(s);
  if (!gone || (c != LV_ERR_NOT_FOUND && c != LV_ERR_IO)) return s;
  /* The trainer's retention deleted it after we listed it: not an error. */
  lv_warn("%s: %s was deleted before it could be %s; skipped", f->opt.job, f->current, f->opt.verb);
  lv_status_free(s);
  return NULL;
}

void lv_follower_set_max_steps(lv_follower *f, int64_t max_steps) { f->opt.max_steps = max_steps; }

lv_status lv_job_dir_prepare(const lv_params *cfg, const char *kind, const char *dataset, char *dir, size_t dn,
                             char *job, size_t jn) {
  size_t dsn = strlen(dataset) + 1;
  char *ds = malloc(dsn);
  LV_ASSERT(ds);
  lv_str_lower(dataset, ds, dsn);
  lv_status ps = lv_path_fmt(dir, dn, "%s/%s_%s", lv_params_str(cfg, "cluster.logdir"), kind, ds);
  if (!ps) ps = lv_status_wrap(lv_path_fmt(job, jn, "%s_%s", kind, ds), "--dataset=%s: job name", dataset);
  free(ds);
  LV_TRY(ps);
  LV_TRY(lv_file_check_writable_dir(dir));
  char *path = NULL;
  if (asprintf(&path, "%s/params.txt", dir) < 0) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  char *text = lv_params_to_text(cfg);
  lv_status s = lv_file_write_atomic(path, text, strlen(text));
  free(text);
  free(path);
  return s;
}

int64_t lv_trainer_max_steps(const char *prefix, int64_t current, int64_t own) {
  char *text = NULL;
  lv_status s = lv_checkpoint_params_text(prefix, &text);
  int64_t v = current;
  if (s) {
    lv_warn("cannot read the trainer's params from %s: %s", prefix, lv_status_msg(s));
    lv_status_free(s);
  } else if (text && lv_params_text_int(text, "train.max_steps", &v) && v != current && v != own) {
    /* lv_params_text_int leaves v at current when the key is missing or not an integer. */
    lv_info("train.max_steps is %lld in the trainer's params (%s); this job's params say %lld: stopping after "
            "step %lld", (long long)v, prefix, (long long)own, (long long)v);
  }
  free(text);
  return v;
}

/* Whether the key (klen bytes) of a "key : value" params line describes the model (see the header). */
static bool model_key(const char *key, size_t klen) {
  if (klen < 5 || strncmp(key, "task.", 5)) return false;
  /* Training, evaluation and the search's own settings (fusion, beam search, an LM's
   * sampling: --temperature and friends) change what a job does, not the model. */
  static const char *const kNotModel[] = {"task.train.", "task.eval.", "task.decoder.fusion.",
                                          "task.decoder.beam_search.", "task.decoder.sample_"};
  for (size_t k = 0; k < sizeof kNotModel / sizeof *kNotModel; k++)
    if (klen >= strlen(kNotModel[k]) && !strncmp(key, kNotModel[k], strlen(kNotModel[k]))) return false;
  for (size_t i = 0; i + 7 <= klen; i++)
    if (!strncmp(key + i, "dropout", 7)) return false;
  /* Weight noise is training's only: a layer's vn.* and a projection's enable_vn. */
  for (size_t i = 0; i + 4 <= klen; i++)
    if (!strncmp(key + i, ".vn.", 4)) return false;
  return !(klen >= 10 && !strncmp(key + klen - 10, ".enable_vn", 10));
}

void lv_warn_model_params_drift(const char *prefix, const lv_params *cfg) {
  static bool warned;
  if (warned) return;
  char *theirs = NULL;
  lv_status s = lv_checkpoint_params_text(prefix, &theirs);
  if (s || !theirs) {
    lv_status_free(s);
    free(theirs);
    return;
  }
  char *ours = lv_params_to_text(cfg);
  char msg[2048];
  size_t m = 0;
  int ndiff = 0;
  for (const char *p = theirs; p && *p;) {
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    const char *colon = memchr(p, ':', n);
    if (colon && colon > p && colon + 2 <= p + n && model_key(p, (size_t)(colon - p))) {
      const size_t klen = (size_t)(colon - p - 1), tl = n - klen - 3; /* "key : value" */
      size_t ol = 0;
      const char *o = lv_params_text_value(ours, p, klen, &ol);
      if (!o || ol != tl || strncmp(o, colon + 2, tl)) {
        if (ndiff < 4 && m < sizeof msg)
          m += (size_t)snprintf(msg + m, sizeof msg - m, "%s%.*s (here: %.*s)", ndiff ? "; " : "", (int)n, p,
                                o ? (int)ol : 4, o ? o : "none");
        ndiff++;
      }
    }
    p = e ? e + 1 : NULL;
  }
  if (ndiff) {
    warned = true;
    lv_warn("%s was trained with model params that differ from this job's in %d key%s: %s%s. The variables load, but "
            "the model computes something else than was trained: give this job the trainer's --model_params_override",
            prefix, ndiff, ndiff == 1 ? "" : "s", msg, ndiff > 4 ? "; ..." : "");
  }
  free(ours);
  free(theirs);
}

lv_status lv_trainer_max_steps_latest(const char *train_dir, int64_t own, int64_t *out) {
  *out = own;
  char latest[8192];
  int64_t ls;
  bool found = false;
  LV_TRY(lv_checkpoint_latest(train_dir, latest, sizeof latest, &ls, &found));
  if (found) *out = lv_trainer_max_steps(latest, own, own);
  return NULL;
}

lv_status lv_append_metric_histories(const lv_params *cfg, const char *job, const char *dir, int64_t step,
                                     const lv_summary_value *sv, int n) {
  lv_metric_history h[4];
  int nh = lv_metric_histories_from_params(lv_params_sub(cfg, "task.train"), h, 4);
  for (int k = 0; k < nh; k++) {
    if (strcmp(h[k].jobname, job) != 0) continue;
    for (int i = 0; i < n; i++) {
      if (strcmp(sv[i].tag, h[k].metric) != 0) continue;
      char path[LV_PATH_MAX];
      LV_TRY(lv_path_fmt(path, sizeof path, "%s/%s.history.txt", dir, h[k].metric));
      LV_TRY(lv_metric_history_append(path, step, sv[i].value));
      break;
    }
  }
  return NULL;
}
