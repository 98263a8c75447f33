#include "runners/checkpointer.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/path.h"
#include "base/pyre.h"
#include "core/tensor.h"
#include "base/log.h"
#include "io/bundle.h"
#include "io/ckpt_state.h"

typedef struct pending {
  char prefix[LV_PATH_MAX];
  int64_t step;
  int n;
  lv_saveable *items; /* data point into buf */
  char *buf;
  size_t buf_cap;
  char *params_text;
  double timestamp;
} pending;

struct lv_checkpointer {
  char train_dir[LV_PATH_MAX];
  bool async;
  int64_t save_interval_steps; /* <= 0: by seconds */
  double save_interval_seconds;
  int64_t keep_latest_n;
  double keep_every_n_hours;
  bool finite_check; /* train.checkpoint_finite_check */
  bool first_call_done;
  int64_t prev_ckpt_step;
  double last_save_time;
  pthread_t thread;
  bool thread_running;
  pending job;
  lv_status job_status;
};

lv_status lv_checkpointer_create(const char *train_dir, const lv_params *train_p, bool async, lv_checkpointer **out) {
  *out = NULL;
  lv_checkpointer *ck = calloc(1, sizeof *ck);
  LV_ASSERT(ck);
  lv_status s = lv_path_fmt(ck->train_dir, sizeof ck->train_dir, "%s", train_dir);
  if (s) {
    free(ck);
    return lv_status_wrap(s, "checkpoint directory");
  }
  ck->async = async;
  ck->save_interval_steps = lv_params_is_set(train_p, "save_interval_steps") ? lv_params_int(train_p, "save_interval_steps") : 0;
  ck->save_interval_seconds = lv_params_float(train_p, "save_interval_seconds");
  ck->keep_latest_n = lv_params_int(train_p, "save_max_to_keep");
  ck->keep_every_n_hours = lv_params_float(train_p, "save_keep_checkpoint_every_n_hours");
  ck->finite_check = lv_params_has(train_p, "checkpoint_finite_check") && lv_params_bool(train_p, "checkpoint_finite_check");
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

void lv_checkpointer_note_restored(lv_checkpointer *ck, int64_t step) {
  ck->first_call_done = true;
  ck->prev_ckpt_step = step;
  ck->last_save_time = lv_now_wall();
}

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

/* Copies an item's data to (to_host) or from host memory, through its device's backend. */
static lv_status saveable_copy(const lv_saveable *it, void *host, bool to_host) {
  lv_tensor t = lv_tensor_view(it->dtype, it->shape, it->data);
  t.device = it->device;
  return to_host ? lv_tensor_to_host(&t, host) : lv_tensor_from_host(&t, host);
}

/* A path from the state file: relative ones are relative to the train directory (as in
 * TF), absolute ones (older Lingvo-style files) are kept. */
static lv_status resolve_path(const char *train_dir, const char *path, char *out, size_t n) {
  if (path[0] == '/') return lv_path_fmt(out, n, "%s", path);
  return lv_path_fmt(out, n, "%s/%s", train_dir, path);
}

/* Whether name is "ckpt-" and digits only (a checkpoint prefix this code writes). */
static bool is_ckpt_name(const char *name) {
  if (strncmp(name, "ckpt-", 5) || !name[5]) return false;
  for (const char *p = name + 5; *p; p++)
    if (*p < '0' || *p > '9') return false;
  return true;
}

/* Whether a path from the state file names a checkpoint of train_dir itself: "ckpt-N"
 * (relative) or an absolute path whose directory is train_dir. *base gets "ckpt-N". */
static bool own_checkpoint(const char *train_dir, const char *path, const char **base) {
  const char *slash = strrchr(path, '/');
  *base = slash ? slash + 1 : path;
  if (!is_ckpt_name(*base)) return false;
  if (!slash) return true;
  if (path[0] != '/') return false;
  char *dir = strndup(path, (size_t)(slash - path));
  LV_ASSERT(dir);
  char *a = realpath(dir[0] ? dir : "/", NULL), *b = realpath(train_dir, NULL);
  bool same = a && b && !strcmp(a, b);
  free(a);
  free(b);
  free(dir);
  return same;
}

/* "<base>.data-DDDDD-of-DDDDD" exactly. */
static bool is_data_shard_of(const char *file, const char *base) {
  size_t bl = strlen(base);
  if (strncmp(file, base, bl) || strncmp(file + bl, ".data-", 6)) return false;
  const char *p = file + bl + 6;
  for (int i = 0; i < 5; i++)
    if (p[i] < '0' || p[i] > '9') return false;
  if (strncmp(p + 5, "-of-", 4)) return false;
  for (int i = 9; i < 14; i++)
    if (p[i] < '0' || p[i] > '9') return false;
  return p[14] == 0;
}

/* Deletes the files of checkpoint train_dir/<base> by their exact names: the index first
 * (the checkpoint disappears at once), then the data shards and a V1 .meta. */
static void unlink_in(const char *dir, const char *name, const char *ext) {
  char *path = NULL;
  LV_ASSERT(asprintf(&path, "%s/%s%s", dir, name, ext) >= 0);
  unlink(path);
  free(path);
}

static void delete_ckpt_files(const char *train_dir, const char *base) {
  unlink_in(train_dir, base, ".index");
  unlink_in(train_dir, base, ".meta");
  DIR *d = opendir(train_dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)))
    if (is_data_shard_of(e->d_name, base)) unlink_in(train_dir, e->d_name, "");
  closedir(d);
}

/* The file name a listed path stands for (own: a ckpt-N of this directory), so that two
 * spellings of one checkpoint ("ckpt-N", "/abs/train/ckpt-N") count as one. */
static bool same_checkpoint(const char *train_dir, const char *a, const char *b) {
  if (!strcmp(a, b)) return true;
  const char *ba, *bb;
  return own_checkpoint(train_dir, a, &ba) && own_checkpoint(train_dir, b, &bb) && !strcmp(ba, bb);
}

/* Lingvo's saver._UpdateState: the checkpoints listed and the new one, sorted by
 * timestamp; kept are the newest keep_latest_n (0 = all) and, walking oldest to newest
 * from time 0 at every update (so the same ones stay chosen), one whenever more than
 * keep_every_n_hours have passed since the last one kept that way; the state file lists
 * each kept checkpoint once, and only checkpoints no kept entry names are deleted.
 * last_preserved_timestamp is the new checkpoint's time, as Lingvo writes it. */
static bool double_less(const void *a, const void *b) { return *(const double *)a < *(const double *)b; }
static bool int64_less(const void *a, const void *b) { return *(const int64_t *)a < *(const int64_t *)b; }

/* Stable insertion sort of n checkpoint paths by their keys (n is small: the kept list). */
static void sort_paths_by_key(char **paths, void *keys, size_t size, bool (*less)(const void *, const void *),
                              int n) {
  unsigned char *k = keys, t[sizeof(double) > sizeof(int64_t) ? sizeof(double) : sizeof(int64_t)];
  LV_ASSERT(size <= sizeof t);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && less(k + (size_t)j * size, k + (size_t)(j - 1) * size); j--) {
      memcpy(t, k + (size_t)j * size, size);
      memcpy(k + (size_t)j * size, k + (size_t)(j - 1) * size, size);
      memcpy(k + (size_t)(j - 1) * size, t, size);
      char *p = paths[j];
      paths[j] = paths[j - 1];
      paths[j - 1] = p;
    }
}

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
  LV_ASSERT(paths && tss);
  int m = 0;
  /* Timestamps pair with paths by position: when some are missing (a file written without
   * them, or edited by hand) none can be trusted, and all count as 0 (older than any),
   * which keeps the listed order. */
  bool have_ts = st.all_model_checkpoint_timestamps != NULL;
  for (int i = 0; have_ts && i < n; i++) have_ts = st.all_model_checkpoint_timestamps[i] > 0;
  for (int i = 0; i < n; i++) {
    if (same_checkpoint(ck->train_dir, st.all_model_checkpoint_paths[i], prefix)) continue;
    paths[m] = strdup(st.all_model_checkpoint_paths[i]);
    LV_ASSERT(paths[m]);
    tss[m++] = have_ts ? st.all_model_checkpoint_timestamps[i] : 0;
  }
  lv_ckpt_state_free(&st);
  paths[m] = strdup(prefix);
  LV_ASSERT(paths[m]);
  tss[m++] = ts;
  /* Stable sort by timestamp (a clock set back leaves the new one in its place by time). */
  sort_paths_by_key(paths, tss, sizeof *tss, double_less, m);
  bool *keep = calloc((size_t)m, sizeof *keep);
  LV_ASSERT(keep);
  if (ck->keep_every_n_hours > 0) {
    double last_kept = 0;
    for (int i = 0; i < m; i++)
      if (tss[i] - last_kept > 3600.0 * ck->keep_every_n_hours) {
        keep[i] = true;
        last_kept = tss[i];
      }
  }
  int first_recent = ck->keep_latest_n > 0 && m > ck->keep_latest_n ? m - (int)ck->keep_latest_n : 0;
  for (int i = first_recent; i < m; i++) keep[i] = true;
  /* An entry kept twice (the same checkpoint listed twice) is listed once. */
  for (int i = 0; i < m; i++)
    for (int j = i + 1; keep[i] && j < m; j++)
      if (keep[j] && same_checkpoint(ck->train_dir, paths[i], paths[j])) keep[i] = false;
  lv_ckpt_state ns = {0};
  ns.model_checkpoint_path = strdup(prefix);
  ns.all_model_checkpoint_paths = calloc((size_t)m, sizeof(char *));
  ns.all_model_checkpoint_timestamps = calloc((size_t)m, sizeof(double));
  LV_ASSERT(ns.model_checkpoint_path && ns.all_model_checkpoint_paths && ns.all_model_checkpoint_timestamps);
  ns.last_preserved_timestamp = ts;
  for (int i = 0; i < m; i++)
    if (keep[i]) {
      ns.all_model_checkpoint_paths[ns.num_paths] = paths[i];
      ns.all_model_checkpoint_timestamps[ns.num_paths++] = tss[i];
    }
  lv_status s = lv_ckpt_state_write(ck->train_dir, &ns);
  /* Retention deletes only checkpoints of this train directory that no kept entry names,
   * never what a state file edited by hand (or written elsewhere) points at. */
  if (!s)
    for (int i = 0; i < m; i++) {
      const char *base;
      bool named = keep[i];
      for (int j = 0; j < m && !named; j++) named = keep[j] && same_checkpoint(ck->train_dir, paths[i], paths[j]);
      if (named) continue;
      if (own_checkpoint(ck->train_dir, paths[i], &base)) delete_ckpt_files(ck->train_dir, base);
      else lv_warn("%s/checkpoint listed \"%s\", which is not a checkpoint of this directory (ckpt-N): dropped "
                   "from the list, not deleted", ck->train_dir, paths[i]);
    }
  for (int i = 0; i < m; i++) free(paths[i]);
  free(ns.model_checkpoint_path);
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

/* A checkpoint is never rewritten in place: a ckpt-<step> the state file lists is an
 * error; an unlisted one (left by a crash before its state update) is replaced, which the
 * bundle writer does without ever pairing an old index with new data. */
static lv_status check_not_listed(const lv_checkpointer *ck, const char *prefix) {
  char index[LV_PATH_MAX];
  LV_TRY(lv_path_fmt(index, sizeof index, "%s.index", prefix));
  if (!lv_file_exists(index)) return NULL;
  const char *name = strrchr(prefix, '/') + 1;
  lv_ckpt_state st = {0};
  bool exists = false;
  LV_TRY(lv_ckpt_state_read(ck->train_dir, &st, &exists));
  bool listed = false;
  const char *base;
  for (int i = -1; i < st.num_paths && !listed; i++) {
    const char *p = i < 0 ? st.model_checkpoint_path : st.all_model_checkpoint_paths[i];
    listed = p && own_checkpoint(ck->train_dir, p, &base) && !strcmp(base, name);
  }
  lv_ckpt_state_free(&st);
  if (listed)
    return lv_status_make(LV_ERR_INVALID, "%s already exists and %s/checkpoint lists it: not overwriting a saved "
                          "checkpoint (is global_step behind the checkpoints of this directory?)", prefix, ck->train_dir);
  lv_warn("%s exists but no state file lists it (a crash before its state update?): replacing it", prefix);
  return NULL;
}

/* train.checkpoint_finite_check: the host copies about to be saved hold no NaN/Inf. */
static lv_status check_finite(const pending *j) {
  for (int i = 0; i < j->n; i++) {
    const lv_saveable *it = &j->items[i];
    int64_t n = lv_shape_numel(&it->shape);
    for (int64_t k = 0; k < n; k++) {
      double v = it->dtype == LV_F32 ? ((const float *)it->data)[k] : it->dtype == LV_F64 ? ((const double *)it->data)[k] : 0;
      if (!isfinite(v))
        return lv_status_make(LV_ERR_INTERNAL, "train.checkpoint_finite_check: %s[%lld] is %g; not saving %s (the "
                              "checkpoints saved so far are kept)", it->name, (long long)k, v, j->prefix);
    }
  }
  return NULL;
}

lv_status lv_checkpointer_save(lv_checkpointer *ck, int64_t step, const lv_saveable *items, int n,
                               const char *params_text) {
  LV_TRY(lv_checkpointer_wait(ck));
  pending *j = &ck->job;
  LV_TRY(lv_path_fmt(j->prefix, sizeof j->prefix, "%s/ckpt-%08lld", ck->train_dir, (long long)step));
  LV_TRY(check_not_listed(ck, j->prefix));
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
  if (ck->finite_check) LV_TRY(check_finite(j));
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
    if (path[0] == '/') ps[k] = strdup(path);
    else LV_ASSERT(asprintf(&ps[k], "%s/%s", train_dir, path) >= 0);
    LV_ASSERT(ps[k]);
    ss[k] = lv_checkpoint_step(ps[k]);
    k++;
  }
  /* Ascending by step (Lingvo's SortCheckpointPaths). */
  sort_paths_by_key(ps, ss, sizeof *ss, int64_less, k);
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
  lv_status s = resolve_path(train_dir, st.model_checkpoint_path, prefix, n);
  lv_ckpt_state_free(&st);
  if (s) return lv_status_wrap(s, "the newest checkpoint of %s/checkpoint", train_dir);
  *step = lv_checkpoint_step(prefix);
  *found = true;
  return NULL;
}

/* Appends one problem line (the first kMaxListed of each restore, then a count). */
enum { kMaxListed = 20 };
static void list_problem(FILE *ef, int *nerr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void list_problem(FILE *ef, int *nerr, const char *fmt, ...) {
  if (*nerr < kMaxListed) {
    va_list ap;
    va_start(ap, fmt);
    fputs("\n  ", ef);
    vfprintf(ef, fmt, ap);
    va_end(ap);
  }
  (*nerr)++;
}

static bool has_item(const lv_saveable *items, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(items[i].name, name)) return true;
  return false;
}

/* Whether name is "<item>/ExponentialMovingAverage" for one of the items. */
static bool is_average_of_item(const lv_saveable *items, int n, const char *name) {
  size_t len = strlen(name), sl = strlen(LV_CKPT_AVERAGE_SUFFIX);
  if (len <= sl || strcmp(name + len - sl, LV_CKPT_AVERAGE_SUFFIX)) return false;
  for (int i = 0; i < n; i++)
    if (strlen(items[i].name) == len - sl && !strncmp(items[i].name, name, len - sl)) return true;
  return false;
}

lv_status lv_checkpoint_count_present(const char *prefix, const lv_saveable *items, int n, int *present, bool *each) {
  *present = 0;
  lv_bundle_reader *r = NULL;
  LV_TRY(lv_bundle_reader_open(prefix, &r));
  for (int i = 0; i < n; i++) {
    bool here = lv_bundle_reader_find(r, items[i].name) != NULL;
    *present += here;
    if (each) each[i] = here;
  }
  lv_bundle_reader_close(r);
  return NULL;
}

lv_status lv_checkpoint_restore_mode(const char *prefix, const lv_saveable *items, int n, lv_restore_mode mode,
                                     int *num_restored) {
  if (num_restored) *num_restored = 0;
  lv_bundle_reader *r = NULL;
  LV_TRY(lv_bundle_reader_open(prefix, &r));
  char *errs = NULL;
  size_t elen = 0;
  FILE *ef = open_memstream(&errs, &elen);
  int nerr = 0, nmissing = 0, nextra = 0;
  const lv_bundle_entry **found = calloc((size_t)(n > 0 ? n : 1), sizeof *found);
  char missing[256] = "";
  for (int i = 0; i < n; i++) {
    const lv_bundle_entry *e = lv_bundle_reader_find(r, items[i].name);
    char a[96], b[96];
    if (!e && mode == LV_RESTORE_PARTIAL) {
      if (nmissing++ < 3)
        snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", nmissing > 1 ? ", " : "",
                 items[i].name);
    } else if (!e) {
      list_problem(ef, &nerr, "%s: missing from the checkpoint", items[i].name);
      nmissing++;
    } else if (e->dtype != items[i].dtype || !lv_shape_eq(&e->shape, &items[i].shape)) {
      list_problem(ef, &nerr, "%s: checkpoint has %s %s, the model expects %s %s", items[i].name,
                   lv_dtype_names[e->dtype], lv_shape_str(&e->shape, a, sizeof a), lv_dtype_names[items[i].dtype],
                   lv_shape_str(&items[i].shape, b, sizeof b));
    }
    found[i] = e;
  }
  /* Training resumes the whole state: a tensor the run would not save again (another
   * optimizer's slots) is as much a mismatch as a missing one; moving averages a run no
   * longer keeps are only dropped, as Lingvo drops them. */
  int ndropped = 0;
  for (int i = 0; mode != LV_RESTORE_MODEL && i < lv_bundle_reader_count(r); i++) {
    const char *name = lv_bundle_reader_entry(r, i)->name;
    if (strcmp(name, LV_CKPT_PARAMS_TENSOR) && !has_item(items, n, name)) {
      if (mode == LV_RESTORE_EXACT && is_average_of_item(items, n, name)) {
        ndropped++;
        continue;
      }
      if (mode == LV_RESTORE_EXACT) list_problem(ef, &nerr, "%s: in the checkpoint, not in this run", name);
      nextra++;
    }
  }
  if (nerr > kMaxListed) fprintf(ef, "\n  ... and %d more", nerr - kMaxListed);
  if (mode == LV_RESTORE_EXACT && (nmissing || nextra))
    fprintf(ef, "\n(did task.train.optimizer, the grad norm tracker or the model change?) Nothing was restored or "
            "overwritten; --allow_partial_restore restores the tensors that match, initializes the others and "
            "keeps this checkpoint.");
  fclose(ef);
  lv_status s = NULL;
  if (nerr)
    s = lv_status_make(LV_ERR_INVALID, "checkpoint %s does not match the model (%d problem%s):%s", prefix, nerr,
                       nerr > 1 ? "s" : "", errs);
  /* Read into scratch first so a corrupt tensor leaves the model untouched. */
  void **scratch = calloc((size_t)(n > 0 ? n : 1), sizeof *scratch);
  for (int i = 0; i < n && !s; i++) {
    if (!found[i]) continue;
    size_t b = (size_t)lv_shape_numel(&items[i].shape) * lv_dtype_size(items[i].dtype);
    scratch[i] = malloc(b ? b : 1);
    if (!scratch[i]) s = lv_status_make(LV_ERR_RESOURCE, "out of memory restoring %s", items[i].name);
    else s = lv_bundle_reader_read(r, found[i], scratch[i], b);
  }
  int restored = 0;
  for (int i = 0; i < n && !s; i++)
    if (found[i]) {
      s = saveable_copy(&items[i], scratch[i], false);
      restored++;
    }
  if (!s && nmissing && mode == LV_RESTORE_PARTIAL)
    lv_warn("partial restore from %s: %d of %d tensors restored; %d not in the checkpoint keep their initial values "
            "(%s%s)", prefix, restored, n, nmissing, missing, nmissing > 3 ? ", ..." : "");
  if (!s && nextra && mode == LV_RESTORE_PARTIAL)
    lv_warn("partial restore from %s: %d tensors of the checkpoint are not in this run and were ignored", prefix,
            nextra);
  if (!s && ndropped)
    lv_warn("%s holds the moving averages of %d variables; this run keeps none (task.train.ema_decay is 0): "
            "dropped, training goes on from the raw weights", prefix, ndropped);
  if (!s && num_restored) *num_restored = restored;
  for (int i = 0; i < n; i++) free(scratch[i]);
  free(scratch);
  free(found);
  free(errs);
  lv_bundle_reader_close(r);
  return s;
}

lv_status lv_checkpoint_restore(const char *prefix, const lv_saveable *items, int n) {
  return lv_checkpoint_restore_mode(prefix, items, n, LV_RESTORE_MODEL, NULL);
}

/* A checkpoint file found in a directory: its name (ckpt-N, any number of digits) and step. */
typedef struct found_ckpt {
  int64_t step;
  char name[256];
} found_ckpt;

/* The ckpt-N checkpoints in dir that have an index, by ascending step (names as found:
 * another writer's "ckpt-1" stays "ckpt-1"). */
static int scan_checkpoints(const char *dir, found_ckpt **out) {
  *out = NULL;
  DIR *d = opendir(dir);
  if (!d) return 0;
  int k = 0, cap = 0;
  found_ckpt *f = NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 7 || strcmp(e->d_name + len - 6, ".index")) continue;
    char base[256];
    if (len - 6 >= sizeof base) continue;
    memcpy(base, e->d_name, len - 6);
    base[len - 6] = 0;
    if (!is_ckpt_name(base)) continue;
    if (k == cap) {
      cap = cap ? 2 * cap : 16;
      f = realloc(f, sizeof *f * (size_t)cap);
      LV_ASSERT(f);
    }
    f[k].step = lv_checkpoint_step(base);
    memcpy(f[k].name, base, len - 5);
    k++;
  }
  closedir(d);
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && (f[j].step < f[j - 1].step ||
                              (f[j].step == f[j - 1].step && strcmp(f[j].name, f[j - 1].name) < 0)); j--) {
      found_ckpt t = f[j];
      f[j] = f[j - 1];
      f[j - 1] = t;
    }
  *out = f;
  return k;
}

/* A state file listing the given checkpoints (timestamps: their index files' mtimes). */
static lv_status rebuild_state(const char *train_dir, const found_ckpt *f, int k) {
  lv_ckpt_state ns = {0};
  ns.num_paths = k;
  ns.all_model_checkpoint_paths = calloc((size_t)k, sizeof(char *));
  ns.all_model_checkpoint_timestamps = calloc((size_t)k, sizeof(double));
  LV_ASSERT(ns.all_model_checkpoint_paths && ns.all_model_checkpoint_timestamps);
  for (int i = 0; i < k; i++) {
    ns.all_model_checkpoint_paths[i] = strdup(f[i].name);
    LV_ASSERT(ns.all_model_checkpoint_paths[i]);
    char *index = NULL;
    LV_ASSERT(asprintf(&index, "%s/%s.index", train_dir, f[i].name) >= 0);
    struct stat sb;
    ns.all_model_checkpoint_timestamps[i] = stat(index, &sb) == 0 ? (double)sb.st_mtime : lv_now_wall();
    free(index);
  }
  ns.model_checkpoint_path = strdup(ns.all_model_checkpoint_paths[k - 1]);
  lv_status s = lv_ckpt_state_write(train_dir, &ns);
  lv_ckpt_state_free(&ns);
  return s;
}

lv_status lv_checkpoint_resume_point(const char *train_dir, bool rebuild, char *prefix, size_t n, int64_t *step,
                                     bool *found) {
  *found = false;
  lv_ckpt_state st = {0};
  bool exists = false;
  lv_status rs = lv_ckpt_state_read(train_dir, &st, &exists);
  bool usable = !rs && exists && st.model_checkpoint_path && *st.model_checkpoint_path;
  bool st_empty = !rs && exists && !st.model_checkpoint_path && st.num_paths == 0;
  lv_ckpt_state_free(&st);
  if (usable) {
    lv_status_free(rs);
    return lv_checkpoint_latest(train_dir, prefix, n, step, found);
  }
  found_ckpt *f = NULL;
  int k = scan_checkpoints(train_dir, &f);
  if (k == 0) {
    free(f);
    return rs; /* no checkpoint to lose: a fresh start, or the state file's own error */
  }
  const char *newest = f[k - 1].name;
  lv_status s = NULL;
  if (!rebuild) {
    char why[1200];
    if (rs) snprintf(why, sizeof why, "cannot be read (%s)", lv_status_msg(rs));
    else snprintf(why, sizeof why, "%s", !exists ? "is missing" : st_empty ? "is empty" : "names no checkpoint (no model_checkpoint_path)");
    s = lv_status_make(LV_ERR_INVALID,
                       "%s/checkpoint %s, but %s holds %d checkpoint%s, the newest %s/%s: not starting from freshly "
                       "initialized variables over them (nothing was changed). To resume from %s, rerun with "
                       "--rebuild_checkpoint_state (writes a state file listing the ckpt-* files found); to start "
                       "over, use another --logdir or move the ckpt-* files away.",
                       train_dir, why, train_dir, k, k > 1 ? "s" : "", train_dir, newest, newest);
  } else {
    s = rebuild_state(train_dir, f, k);
    if (!s) lv_warn("--rebuild_checkpoint_state: wrote %s/checkpoint listing the %d checkpoint%s found; resuming from %s",
                    train_dir, k, k > 1 ? "s" : "", newest);
    if (!s) s = lv_checkpoint_latest(train_dir, prefix, n, step, found);
  }
  lv_status_free(rs);
  free(f);
  return s;
}

/* The pid in "<pid>" or "<pid>-<digits>" (the whole of s), or 0. */
static long temp_pid(const char *s) {
  char *end;
  if (*s < '0' || *s > '9') return 0;
  long pid = strtol(s, &end, 10);
  if (*end == '-') {
    const char *p = end + 1;
    if (!*p) return 0;
    for (; *p; p++)
      if (*p < '0' || *p > '9') return 0;
  } else if (*end) {
    return 0;
  }
  return pid;
}

/* The writer pid of one of our temporary files: "checkpoint.tmp<pid>",
 * "ckpt-N.index.tmp<pid>", "ckpt-N.{index,data-D-of-D}.tempstate<pid>-<k>"; else 0. */
static long our_temp_file_pid(const char *name) {
  if (!strncmp(name, "checkpoint.tmp", 14)) return temp_pid(name + 14);
  const char *dot = strchr(name, '.');
  if (!dot) return 0;
  char base[256];
  if ((size_t)(dot - name) >= sizeof base) return 0;
  memcpy(base, name, (size_t)(dot - name));
  base[dot - name] = 0;
  if (!is_ckpt_name(base)) return 0;
  const char *t = strstr(dot, ".tempstate");
  size_t tl = 10;
  if (!t) t = strstr(dot, ".tmp"), tl = 4;
  if (!t) return 0;
  char file[512];
  if ((size_t)(t - name) >= sizeof file) return 0;
  memcpy(file, name, (size_t)(t - name));
  file[t - name] = 0;
  const char *ext = file + (dot - name);
  if (strcmp(ext, ".index") && !is_data_shard_of(file, base)) return 0;
  return temp_pid(t + tl);
}

int lv_checkpoint_clean_stale_temps(const char *train_dir) {
  DIR *d = opendir(train_dir);
  if (!d) return 0;
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    long pid = our_temp_file_pid(e->d_name);
    /* Our own pid too: this runs before the trainer writes anything, so such a file is
     * an earlier process's that had this pid (a container's trainer is often pid 1). */
    if (pid <= 0 || pid > INT32_MAX) continue;
    if (pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)) continue; /* its writer may still run */
    char *path = NULL;
    LV_ASSERT(asprintf(&path, "%s/%s", train_dir, e->d_name) >= 0);
    if (unlink(path) == 0) removed++;
    free(path);
  }
  closedir(d);
  return removed;
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

const char *lv_params_text_value(const char *text, const char *key, size_t klen, size_t *vlen) {
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, key, klen) || strncmp(p + klen, " : ", 3)) continue;
    const char *v = p + klen + 3, *e = strchr(v, '\n');
    *vlen = e ? (size_t)(e - v) : strlen(v);
    return v;
  }
  return NULL;
}

bool lv_params_text_int(const char *text, const char *key, int64_t *out) {
  size_t vl = 0;
  const char *v = lv_params_text_value(text, key, strlen(key), &vl);
  if (!v) return false;
  char *end;
  long long x = strtoll(v, &end, 10);
  if (end == v || end != v + vl) return false;
  *out = x;
  return true;
}

/* ---------------- init_from_checkpoint_rules ---------------- */

#define RULES_KEY "task.train.init_from_checkpoint_rules"
enum { kMaxGroups = 10 };

typedef struct load_rule {
  const char *re_text, *format;
  regex_t re;
  bool compiled;
  int matched;
} load_rule;

/* Python's name_format % match.groups() for the %s-only formats rules use ("%%" is a
 * literal %): each %s takes the next group. */
static lv_status format_groups(const char *fmt, const char *subject, const regmatch_t *m, int ngroups, char *out,
                               size_t cap, const char *where) {
  size_t len = 0;
  int g = 1;
  for (const char *p = fmt; *p; p++) {
    if (*p == '%' && p[1] == '%') {
      if (len + 1 < cap) out[len++] = '%';
      p++;
      continue;
    }
    if (*p != '%') {
      if (len + 1 < cap) out[len++] = *p;
      continue;
    }
    if (p[1] != 's')
      return lv_status_make(LV_ERR_INVALID, "%s: format '%s': only %%s and %%%% are supported", where, fmt);
    if (g > ngroups)
      return lv_status_make(LV_ERR_INVALID, "%s: format '%s' has more %%s than its regex has groups (%d)", where, fmt,
                            ngroups);
    for (regoff_t k = m[g].rm_so; m[g].rm_so >= 0 && k < m[g].rm_eo; k++)
      if (len + 1 < cap) out[len++] = subject[k];
    g++;
    p++;
  }
  if (g <= ngroups)
    return lv_status_make(LV_ERR_INVALID, "%s: format '%s' uses %d of the regex's %d groups (Python's %% operator "
                          "requires all of them)", where, fmt, g - 1, ngroups);
  if (len + 1 >= cap) return lv_status_make(LV_ERR_INVALID, "%s: the name formatted by '%s' is too long", where, fmt);
  out[len] = 0;
  if (len >= 2 && !strcmp(out + len - 2, ":0")) out[len - 2] = 0;
  return NULL;
}

static bool is_string(const lv_pvalue *v) { return v && lv_pvalue_kind(v) == LV_PV_STRING; }
static bool is_list(const lv_pvalue *v) { return v && lv_pvalue_kind(v) == LV_PV_LIST; }

/* Whether re (compiled) matches name from its start. */
static bool match_start(const regex_t *re, const char *name, regmatch_t *m, size_t nm) {
  return regexec(re, name, nm, m, 0) == 0 && m[0].rm_so == 0;
}

/* One entry: (path, [(regex, format), ...], [ignore, ...]). Loads into scratch[i] (host
 * buffers the caller frees) what the rules name; entries later in the list replace
 * earlier loads of the same item. */
static lv_status apply_rule_entry(const lv_pvalue *entry, int ei, const char *override, const lv_saveable *items,
                                  int n, void **scratch, int *loaded) {
  char where[160];
  snprintf(where, sizeof where, RULES_KEY "[%d]", ei);
  if (!is_list(entry) || lv_pvalue_len(entry) != 3 || !is_string(lv_pvalue_at(entry, 0)) ||
      !is_list(lv_pvalue_at(entry, 1)) || !is_list(lv_pvalue_at(entry, 2)))
    return lv_status_make(LV_ERR_INVALID, "%s: expected (checkpoint_path, [(regex, format), ...], [ignore_regex, "
                          "...]), as Lingvo's {checkpoint_path: (loading_rules, ignore_rules)}", where);
  const char *path = override && *override ? override : lv_pvalue_as_string(lv_pvalue_at(entry, 0));
  const lv_pvalue *lr = lv_pvalue_at(entry, 1), *ir = lv_pvalue_at(entry, 2);
  int nl = lv_pvalue_len(lr), ni = lv_pvalue_len(ir);
  if (nl == 0) return lv_status_make(LV_ERR_INVALID, "%s: no loading rules", where);
  load_rule *rules = calloc((size_t)nl, sizeof *rules);
  regex_t *ign = calloc((size_t)(ni > 0 ? ni : 1), sizeof *ign);
  LV_ASSERT(rules && ign);
  int nign = 0;
  lv_status s = NULL;
  for (int k = 0; !s && k < nl; k++) {
    const lv_pvalue *r = lv_pvalue_at(lr, k);
    if (!is_list(r) || lv_pvalue_len(r) != 2 || !is_string(lv_pvalue_at(r, 0)) || !is_string(lv_pvalue_at(r, 1))) {
      s = lv_status_make(LV_ERR_INVALID, "%s: loading rule %d: expected a (regex, format) pair of strings", where, k);
      break;
    }
    rules[k].re_text = lv_pvalue_as_string(lv_pvalue_at(r, 0));
    rules[k].format = lv_pvalue_as_string(lv_pvalue_at(r, 1));
    char why[160];
    if (lv_pyre_compile(&rules[k].re, rules[k].re_text, REG_EXTENDED, why, sizeof why))
      s = lv_status_make(LV_ERR_INVALID, "%s: loading rule %d: '%s' is not a regular expression lingvoc reads: %s",
                         where, k, rules[k].re_text, why);
    else rules[k].compiled = true;
  }
  for (int k = 0; !s && k < ni; k++) {
    const lv_pvalue *r = lv_pvalue_at(ir, k);
    char why[160];
    if (!is_string(r)) s = lv_status_make(LV_ERR_INVALID, "%s: ignore rule %d: expected a string", where, k);
    else if (lv_pyre_compile(&ign[k], lv_pvalue_as_string(r), REG_EXTENDED, why, sizeof why))
      s = lv_status_make(LV_ERR_INVALID, "%s: ignore rule %d: '%s' is not a regular expression lingvoc reads: %s",
                         where, k, lv_pvalue_as_string(r), why);
    else nign++;
  }
  lv_bundle_reader *rd = NULL;
  if (!s) {
    s = lv_bundle_reader_open(path, &rd);
    if (s) s = lv_status_wrap(s, "%s: checkpoint '%s'", where, path);
  }
  for (int i = 0; !s && i < n; i++) {
    if (!strcmp(items[i].name, "global_step")) continue;
    char name[LV_PATH_MAX];
    snprintf(name, sizeof name, "%s:0", items[i].name);
    regmatch_t m[kMaxGroups];
    int k = 0;
    while (k < nl && !match_start(&rules[k].re, name, m, kMaxGroups)) k++;
    if (k == nl) {
      lv_info("init_from_checkpoint_rules: %s matches no rule of %s: not loaded", items[i].name, path);
      continue;
    }
    bool ignored = false;
    for (int j = 0; j < nign && !ignored; j++) {
      regmatch_t mi[1];
      ignored = match_start(&ign[j], name, mi, 1);
    }
    if (ignored) {
      lv_info("init_from_checkpoint_rules: %s matches an ignore rule: not loaded from %s", items[i].name, path);
      continue;
    }
    rules[k].matched++;
    char ck_name[LV_PATH_MAX];
    char rw[200];
    snprintf(rw, sizeof rw, "%s, loading rule %d ('%s', '%s')", where, k, rules[k].re_text, rules[k].format);
    s = format_groups(rules[k].format, name, m, (int)rules[k].re.re_nsub < kMaxGroups - 1 ? (int)rules[k].re.re_nsub
                                                                                        : kMaxGroups - 1,
                      ck_name, sizeof ck_name, rw);
    if (s) break;
    const lv_bundle_entry *e = lv_bundle_reader_find(rd, ck_name);
    char a[96], b[96];
    if (!e) {
      s = lv_status_make(LV_ERR_INVALID, "%s: %s would load %s, which checkpoint %s does not hold", rw, items[i].name,
                         ck_name, path);
    } else if (e->dtype != items[i].dtype || !lv_shape_eq(&e->shape, &items[i].shape)) {
      s = lv_status_make(LV_ERR_INVALID, "%s: %s is %s %s in %s, the model's %s is %s %s", rw, ck_name,
                         lv_dtype_names[e->dtype], lv_shape_str(&e->shape, a, sizeof a), path, items[i].name,
                         lv_dtype_names[items[i].dtype], lv_shape_str(&items[i].shape, b, sizeof b));
    } else {
      size_t bytes = (size_t)lv_shape_numel(&items[i].shape) * lv_dtype_size(items[i].dtype);
      if (!scratch[i]) scratch[i] = malloc(bytes ? bytes : 1);
      LV_ASSERT(scratch[i]);
      s = lv_bundle_reader_read(rd, e, scratch[i], bytes);
      if (!s) {
        lv_info("init_from_checkpoint_rules: loading %s from %s in %s (rule '%s')", items[i].name, ck_name, path,
                rules[k].re_text);
        (*loaded)++;
      }
    }
  }
  for (int k = 0; !s && k < nl; k++)
    if (!rules[k].matched)
      s = lv_status_make(LV_ERR_INVALID, "%s: loading rule %d ('%s', '%s') matches no variable of the model (names "
                         "look like '%s:0')", where, k, rules[k].re_text, rules[k].format,
                         n > 1 ? items[n - 1].name : "scope/layer/w/var");
  lv_bundle_reader_close(rd);
  for (int k = 0; k < nl; k++)
    if (rules[k].compiled) regfree(&rules[k].re);
  for (int k = 0; k < nign; k++) regfree(&ign[k]);
  free(rules);
  free(ign);
  return s;
}

lv_status lv_checkpoint_init_from_rules(const lv_pvalue *rules, const char *override, const lv_saveable *items,
                                        int n, int *num_loaded) {
  if (num_loaded) *num_loaded = 0;
  int ne = rules ? lv_pvalue_len(rules) : 0;
  if (rules && !is_list(rules))
    return lv_status_make(LV_ERR_INVALID, RULES_KEY ": expected a list of (checkpoint_path, loading_rules, "
                          "ignore_rules)");
  if (override && *override && ne != 1)
    return lv_status_make(LV_ERR_INVALID, "task.train.init_from_checkpoint_override is set, so " RULES_KEY
                          " must have exactly one entry (it has %d)", ne);
  if (!ne) return NULL;
  void **scratch = calloc((size_t)(n > 0 ? n : 1), sizeof *scratch);
  LV_ASSERT(scratch);
  int loaded = 0;
  lv_status s = NULL;
  for (int e = 0; !s && e < ne; e++) s = apply_rule_entry(lv_pvalue_at(rules, e), e, override, items, n, scratch, &loaded);
  for (int i = 0; !s && i < n; i++)
    if (scratch[i]) s = saveable_copy(&items[i], scratch[i], false);
  if (!s && num_loaded) *num_loaded = loaded;
  for (int i = 0; i < n; i++) free(scratch[i]);
  free(scratch);
  return s;
}
