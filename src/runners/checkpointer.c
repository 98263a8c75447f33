#include "runners/checkpointer.h"

#include <dirent.h>
#include <libgen.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "core/tensor.h"
#include "base/log.h"
#include "io/bundle.h"
#include "io/ckpt_state.h"

typedef struct pending {
  char prefix[4200];
  int64_t step;
  int n;
  lv_saveable *items; /* data point into buf */
  char *buf;
  size_t buf_cap;
  char *params_text;
  double timestamp;
} pending;

struct lv_checkpointer {
  char train_dir[4096];
  bool async;
  int64_t save_interval_steps; /* <= 0: by seconds */
  double save_interval_seconds;
  int64_t keep_latest_n;
  double keep_every_n_hours;
  bool first_call_done;
  int64_t prev_ckpt_step;
  double last_save_time;
  pthread_t thread;
  bool thread_running;
  pending job;
  lv_status job_status;
};

lv_status lv_checkpointer_create(const char *train_dir, const lv_params *train_p, bool async, lv_checkpointer **out) {
  lv_checkpointer *ck = calloc(1, sizeof *ck);
  LV_ASSERT(ck);
  snprintf(ck->train_dir, sizeof ck->train_dir, "%s", train_dir);
  ck->async = async;
  ck->save_interval_steps = lv_params_is_set(train_p, "save_interval_steps") ? lv_params_int(train_p, "save_interval_steps") : 0;
  ck->save_interval_seconds = lv_params_float(train_p, "save_interval_seconds");
  ck->keep_latest_n = lv_params_int(train_p, "save_max_to_keep");
  ck->keep_every_n_hours = lv_params_float(train_p, "save_keep_checkpoint_every_n_hours");
  ck->prev_ckpt_step = -1;
  *out = ck;
  return NULL;
}

bool lv_checkpointer_should_save(lv_checkpointer *ck, int64_t step) {
  if (!ck->first_call_done) return true;
  if (step == ck->prev_ckpt_step) return false;
  if (ck->save_interval_steps > 0) return step - ck->prev_ckpt_step >= ck->save_interval_steps;
  return lv_now_wall() >= ck->last_save_time + ck->save_interval_seconds;
}

int64_t lv_checkpointer_last_step(const lv_checkpointer *ck) { return ck->prev_ckpt_step; }

int64_t lv_checkpoint_step(const char *prefix) {
  const char *p = strstr(prefix, "ckpt-");
  const char *last = NULL;
  while (p) {
    last = p;
    p = strstr(p + 1, "ckpt-");
  }
  if (!last) return -1;
  char *end;
  long long v = strtoll(last + 5, &end, 10);
  if (end == last + 5 || (*end && *end != '.')) return -1;
  return v;
}

/* A path from the state file: relative ones are relative to the train directory (as in
 * TF), absolute ones (older Lingvo-style files) are kept. */
/* Copies an item's data to (to_host) or from host memory, through its device's backend. */
static lv_status saveable_copy(const lv_saveable *it, void *host, bool to_host) {
  lv_tensor t = lv_tensor_view(it->dtype, it->shape, it->data);
  t.device = it->device;
  return to_host ? lv_tensor_to_host(&t, host) : lv_tensor_from_host(&t, host);
}

static void resolve_path(const char *train_dir, const char *path, char *out, size_t n) {
  if (path[0] == '/') snprintf(out, n, "%s", path);
  else snprintf(out, n, "%s/%s", train_dir, path);
}

/* Deletes the files of one checkpoint prefix (index, data, meta, failed). */
static void delete_ckpt_files(const char *prefix) {
  char *copy = strdup(prefix);
  char *dir = dirname(copy);
  const char *base = strrchr(prefix, '/');
  base = base ? base + 1 : prefix;
  size_t bl = strlen(base);
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (strncmp(e->d_name, base, bl) || e->d_name[bl] != '.') continue;
      char path[8192];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  free(copy);
}

/* Lingvo's saver._UpdateState: keep the newest keep_latest_n (0 = all) and, walking
 * oldest to newest, one checkpoint whenever keep_every_n_hours have passed since the
 * last one kept that way. */
static lv_status update_state(lv_checkpointer *ck, const char *full_prefix, double ts) {
  /* Paths are stored relative to the train directory (as TF2 does), so a log directory
   * can be moved or copied and still be resumed and evaluated. */
  const char *prefix = strrchr(full_prefix, '/') ? strrchr(full_prefix, '/') + 1 : full_prefix;
  lv_ckpt_state st = {0};
  bool exists = false;
  LV_TRY(lv_ckpt_state_read(ck->train_dir, &st, &exists));
  int n = st.num_paths;
  char **paths = calloc((size_t)n + 1, sizeof *paths);
  double *tss = calloc((size_t)n + 1, sizeof *tss);
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (!strcmp(st.all_model_checkpoint_paths[i], prefix)) continue;
    paths[m] = strdup(st.all_model_checkpoint_paths[i]);
    tss[m++] = st.all_model_checkpoint_timestamps ? st.all_model_checkpoint_timestamps[i] : ts;
  }
  paths[m] = strdup(prefix);
  tss[m++] = ts;
  double last_preserved = exists ? st.last_preserved_timestamp : 0;
  lv_ckpt_state_free(&st);
  bool *keep = calloc((size_t)m, sizeof *keep);
  if (ck->keep_every_n_hours > 0) {
    double last_kept = last_preserved;
    for (int i = 0; i < m; i++)
      if (tss[i] - last_kept > 3600.0 * ck->keep_every_n_hours) {
        keep[i] = true;
        last_kept = tss[i];
      }
    last_preserved = last_kept;
  }
  int first_recent = ck->keep_latest_n > 0 && m > ck->keep_latest_n ? m - (int)ck->keep_latest_n : 0;
  for (int i = first_recent; i < m; i++) keep[i] = true;
  lv_ckpt_state ns = {0};
  ns.model_checkpoint_path = paths[m - 1];
  ns.all_model_checkpoint_paths = calloc((size_t)m, sizeof(char *));
  ns.all_model_checkpoint_timestamps = calloc((size_t)m, sizeof(double));
  ns.last_preserved_timestamp = last_preserved;
  for (int i = 0; i < m; i++)
    if (keep[i]) {
      ns.all_model_checkpoint_paths[ns.num_paths] = paths[i];
      ns.all_model_checkpoint_timestamps[ns.num_paths++] = tss[i];
    }
  lv_status s = lv_ckpt_state_write(ck->train_dir, &ns);
  if (!s)
    for (int i = 0; i < m; i++)
      if (!keep[i]) {
        char path[8192];
        resolve_path(ck->train_dir, paths[i], path, sizeof path);
        delete_ckpt_files(path);
      }
  for (int i = 0; i < m; i++) free(paths[i]);
  free(ns.all_model_checkpoint_paths);
  free(ns.all_model_checkpoint_timestamps);
  free(paths);
  free(tss);
  free(keep);
  return s;
}

static lv_status write_job(lv_checkpointer *ck) {
  pending *j = &ck->job;
  lv_bundle_writer *w = NULL;
  LV_TRY(lv_bundle_writer_open(j->prefix, &w));
  lv_status s = NULL;
  for (int i = 0; i < j->n && !s; i++)
    s = lv_bundle_writer_add(w, j->items[i].name, j->items[i].dtype, &j->items[i].shape, j->items[i].data);
  if (!s && j->params_text) {
    const char *strs[1] = {j->params_text};
    size_t lens[1] = {strlen(j->params_text)};
    lv_shape scalar = lv_shape0();
    s = lv_bundle_writer_add_strings(w, LV_CKPT_PARAMS_TENSOR, &scalar, strs, lens);
  }
  if (s) {
    lv_bundle_writer_abort(w);
    return s;
  }
  LV_TRY(lv_bundle_writer_finish(w));
  return update_state(ck, j->prefix, j->timestamp);
}

static void *writer_main(void *arg) {
  lv_checkpointer *ck = arg;
  double t0 = lv_now_monotonic();
  ck->job_status = write_job(ck);
  if (!ck->job_status)
    lv_info("saved checkpoint %s (%.2f s)", ck->job.prefix, lv_now_monotonic() - t0);
  return NULL;
}

lv_status lv_checkpointer_wait(lv_checkpointer *ck) {
  if (ck->thread_running) {
    pthread_join(ck->thread, NULL);
    ck->thread_running = false;
  }
  lv_status s = ck->job_status;
  ck->job_status = NULL;
  return s;
}

lv_status lv_checkpointer_save(lv_checkpointer *ck, int64_t step, const lv_saveable *items, int n,
                               const char *params_text) {
  LV_TRY(lv_checkpointer_wait(ck));
  pending *j = &ck->job;
  snprintf(j->prefix, sizeof j->prefix, "%s/ckpt-%08lld", ck->train_dir, (long long)step);
  j->step = step;
  size_t total = 0;
  for (int i = 0; i < n; i++)
    total += ((size_t)lv_shape_numel(&items[i].shape) * lv_dtype_size(items[i].dtype) + 63) & ~(size_t)63;
  if (total > j->buf_cap) {
    free(j->buf);
    j->buf = malloc(total);
    if (!j->buf) {
      j->buf_cap = 0;
      return lv_status_make(LV_ERR_RESOURCE, "out of memory copying %zu bytes for checkpoint %s", total, j->prefix);
    }
    j->buf_cap = total;
  }
  free(j->items);
  j->items = malloc(sizeof *j->items * (size_t)(n > 0 ? n : 1));
  LV_ASSERT(j->items);
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    size_t b = (size_t)lv_shape_numel(&items[i].shape) * lv_dtype_size(items[i].dtype);
    j->items[i] = items[i];
    j->items[i].data = j->buf + off;
    j->items[i].device = lv_device_host();
    LV_TRY(saveable_copy(&items[i], j->buf + off, true));
    off += (b + 63) & ~(size_t)63;
  }
  j->n = n;
  free(j->params_text);
  j->params_text = params_text ? strdup(params_text) : NULL;
  j->timestamp = lv_now_wall();
  ck->first_call_done = true;
  ck->prev_ckpt_step = step;
  ck->last_save_time = j->timestamp;
  if (ck->async) {
    if (pthread_create(&ck->thread, NULL, writer_main, ck) == 0) {
      ck->thread_running = true;
      return NULL;
    }
  }
  writer_main(ck);
  lv_status s = ck->job_status;
  ck->job_status = NULL;
  return s;
}

lv_status lv_checkpointer_destroy(lv_checkpointer *ck) {
  if (!ck) return NULL;
  lv_status s = lv_checkpointer_wait(ck);
  free(ck->job.buf);
  free(ck->job.items);
  free(ck->job.params_text);
  free(ck);
  return s;
}

lv_status lv_checkpoint_list(const char *train_dir, char ***prefixes, int64_t **steps, int *n) {
  *prefixes = NULL;
  *steps = NULL;
  *n = 0;
  lv_ckpt_state st = {0};
  bool exists = false;
  LV_TRY(lv_ckpt_state_read(train_dir, &st, &exists));
  if (!exists) return NULL;
  int m = st.num_paths;
  char **ps = calloc((size_t)m + 1, sizeof *ps);
  int64_t *ss = calloc((size_t)m + 1, sizeof *ss);
  int k = 0;
  for (int i = 0; i < m; i++) {
    const char *path = st.all_model_checkpoint_paths[i];
    char full[8192];
    resolve_path(train_dir, path, full, sizeof full);
    ps[k] = strdup(full);
    ss[k++] = lv_checkpoint_step(full);
  }
  /* Ascending by step (Lingvo's SortCheckpointPaths). */
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && ss[j] < ss[j - 1]; j--) {
      int64_t t = ss[j];
      ss[j] = ss[j - 1];
      ss[j - 1] = t;
      char *tp = ps[j];
      ps[j] = ps[j - 1];
      ps[j - 1] = tp;
    }
  lv_ckpt_state_free(&st);
  *prefixes = ps;
  *steps = ss;
  *n = k;
  return NULL;
}

lv_status lv_checkpoint_latest(const char *train_dir, char *prefix, size_t n, int64_t *step, bool *found) {
  *found = false;
  lv_ckpt_state st = {0};
  bool exists = false;
  LV_TRY(lv_ckpt_state_read(train_dir, &st, &exists));
  if (!exists || !st.model_checkpoint_path || !*st.model_checkpoint_path) {
    lv_ckpt_state_free(&st);
    return NULL;
  }
  resolve_path(train_dir, st.model_checkpoint_path, prefix, n);
  lv_ckpt_state_free(&st);
  *step = lv_checkpoint_step(prefix);
  *found = true;
  return NULL;
}

lv_status lv_checkpoint_restore(const char *prefix, const lv_saveable *items, int n) {
  lv_bundle_reader *r = NULL;
  LV_TRY(lv_bundle_reader_open(prefix, &r));
  char *errs = NULL;
  size_t elen = 0;
  FILE *ef = open_memstream(&errs, &elen);
  int nerr = 0;
  const lv_bundle_entry **found = calloc((size_t)(n > 0 ? n : 1), sizeof *found);
  for (int i = 0; i < n; i++) {
    const lv_bundle_entry *e = lv_bundle_reader_find(r, items[i].name);
    char a[96], b[96];
    if (!e) {
      fprintf(ef, "\n  %s: missing from the checkpoint", items[i].name);
      nerr++;
    } else if (e->dtype != items[i].dtype || !lv_shape_eq(&e->shape, &items[i].shape)) {
      fprintf(ef, "\n  %s: checkpoint has %s %s, the model expects %s %s", items[i].name, lv_dtype_names[e->dtype],
              lv_shape_str(&e->shape, a, sizeof a), lv_dtype_names[items[i].dtype],
              lv_shape_str(&items[i].shape, b, sizeof b));
      nerr++;
    }
    found[i] = e;
  }
  fclose(ef);
  lv_status s = NULL;
  if (nerr)
    s = lv_status_make(LV_ERR_INVALID, "checkpoint %s does not match the model (%d problem%s):%s", prefix, nerr,
                       nerr > 1 ? "s" : "", errs);
  /* Read into scratch first so a corrupt tensor leaves the model untouched. */
  void **scratch = calloc((size_t)(n > 0 ? n : 1), sizeof *scratch);
  for (int i = 0; i < n && !s; i++) {
    size_t b = (size_t)lv_shape_numel(&items[i].shape) * lv_dtype_size(items[i].dtype);
    scratch[i] = malloc(b ? b : 1);
    if (!scratch[i]) s = lv_status_make(LV_ERR_RESOURCE, "out of memory restoring %s", items[i].name);
    else s = lv_bundle_reader_read(r, found[i], scratch[i], b);
  }
  for (int i = 0; i < n && !s; i++) s = saveable_copy(&items[i], scratch[i], false);
  for (int i = 0; i < n; i++) free(scratch[i]);
  free(scratch);
  free(found);
  free(errs);
  lv_bundle_reader_close(r);
  return s;
}

lv_status lv_checkpoint_params_text(const char *prefix, char **text) {
  *text = NULL;
  lv_bundle_reader *r = NULL;
  LV_TRY(lv_bundle_reader_open(prefix, &r));
  const lv_bundle_entry *e = lv_bundle_reader_find(r, LV_CKPT_PARAMS_TENSOR);
  lv_status s = NULL;
  if (e && e->dtype == LV_STRING && lv_shape_numel(&e->shape) == 1) {
    char **strs = NULL;
    size_t *lens = NULL;
    s = lv_bundle_reader_read_strings(r, e, &strs, &lens);
    if (!s) {
      *text = strs[0];
      strs[0] = NULL;
      lv_bundle_strings_free(strs, lens, 1);
    }
  }
  lv_bundle_reader_close(r);
  return s;
}

bool lv_params_text_int(const char *text, const char *key, int64_t *out) {
  size_t kl = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, key, kl) || strncmp(p + kl, " : ", 3)) continue;
    char *end;
    long long v = strtoll(p + kl + 3, &end, 10);
    if (end == p + kl + 3 || (*end && *end != '\n')) return false;
    *out = v;
    return true;
  }
  return false;
}
