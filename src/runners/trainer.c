#include "runners/trainer.h"

#include <math.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/file.h"
#include "base/log.h"
#include "base/path.h"
#include "core/ops.h"
#include "kernels/kernels.h"
#include "input/record_yielder.h"
#include "io/events.h"
#include "optim/optim_params.h"
#include "optim/vn.h"
#include "runners/instance.h"
#include "runners/memory_report.h"
#include "runners/replicas.h"

static volatile sig_atomic_t g_stop_signal;
static struct timespec g_stop_time;

/* The first SIGINT/SIGTERM asks for a checkpoint and a clean stop; a second one stops at
 * once (checkpoints are written atomically, so nothing already saved is lost). A second
 * one within a second of the first is the same request delivered twice and is ignored:
 * `timeout`, a batch scheduler or a terminal's Ctrl-C signal the process and its process
 * group, and the copy used to kill the trainer before it saved. */
static void on_signal(int sig) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe */
  if (g_stop_signal) {
    double since = (double)(now.tv_sec - g_stop_time.tv_sec) + 1e-9 * (double)(now.tv_nsec - g_stop_time.tv_nsec);
    if (since < 1.0) return;
    signal(sig, SIG_DFL);
    raise(sig);
  }
  g_stop_time = now;
  g_stop_signal = sig;
}

static lv_status write_text(const char *dir, const char *name, const char *text) {
  char path[LV_PATH_MAX];
  LV_TRY(lv_path_fmt(path, sizeof path, "%s/%s", dir, name));
  return lv_file_write_atomic(path, text, strlen(text));
}

/* mkdir -p; a file in the way is the user's to move (exit 2), not an OS failure. */
static lv_status make_dir(const char *dir) {
  lv_status s = lv_file_mkdirs(dir);
  if (s && lv_file_exists(dir) && !lv_file_is_dir(dir)) {
    lv_status_free(s);
    return lv_status_make(LV_ERR_INVALID, "%s is a file, not a directory: move it away or use another --logdir", dir);
  }
  return s;
}

lv_status lv_trainer_write_control(const lv_params *cfg, const char *analysis) {
  const char *logdir = lv_params_str(cfg, "cluster.logdir");
  char control[LV_PATH_MAX], train[LV_PATH_MAX];
  LV_TRY(lv_path_fmt(control, sizeof control, "%s/control", logdir));
  LV_TRY(lv_path_fmt(train, sizeof train, "%s/train", logdir));
  LV_TRY(make_dir(control));
  LV_TRY(make_dir(train));
  char *text = lv_params_to_text(cfg);
  lv_status s = write_text(control, "params.txt", text);
  if (!s) s = write_text(train, "trainer_params.txt", text);
  if (!s && analysis) s = write_text(control, "model_analysis.txt", analysis);
  free(text);
  return s;
}

static void format_eta(double secs, char *buf, size_t n) {
  if (!isfinite(secs) || secs < 0) {
    snprintf(buf, n, "?");
    return;
  }
  long s = (long)secs;
  if (s >= 3600) snprintf(buf, n, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60) snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
  else snprintf(buf, n, "%lds", s);
}

typedef struct train_state {
  lv_instance *m;
  lv_learner *learner;
  lv_ema *ema; /* task.train.ema_decay > 0: the variables' moving averages, else NULL */
  lv_vn *vn;   /* task.train.vn_std > 0 with global noise: the variables it perturbs, else NULL */
  bool vn_logged; /* the line that says the noise is on was written */
  int ps_vars;         /* variables with per-step noise (their layers add it, layers/layer.h) */
  int64_t ps_start;    /* the first step one of them gets it */
  bool ps_logged;
  int64_t check_every; /* with replicas: compare the noisy variables across ranks at these steps */
  lv_checkpointer *ck;
  lv_events_writer *ev;
  lv_saveable *items;
  int nitems;
  char tracker_names[4][LV_VAR_NAME_MAX]; /* the grad norm tracker's checkpoint names */
  char *params_text;
  /* What a training step reads and leaves, kept from step to step. */
  lv_comm *comm;
  lv_grad_overlap *ov; /* replicas: the all-reduce overlapped with backward */
  lv_batch batch;
  lv_metrics mt;
  int nvalues;
  double *value, *weight; /* [mt.n] each metric's mean over the replicas, its total weight */
  /* task.train.early_stop (window > 0) and a DevBasedSchedule: their history files. */
  lv_early_stop_config es;
  char es_file[LV_PATH_MAX];
  bool dev_based;
  double dev_tol;
  lv_metric_history dev_hist;
  char dev_file[LV_PATH_MAX];
  int64_t es_seen[2], dev_seen[2]; /* the last (best, last) logged */
} train_state;

/* Every tensor a checkpoint holds: model variables (with global_step), optimizer slots
 * (shaped like their variable: "<var>/Adam", but Adafactor's "<var>/Adafactor_1"; their host copies, see save and
 * restore_or_init), non-slot optimizer state (beta1_power) and learner state
 * (GradNormTracker statistics), gradient accumulators ("<var>/grad_accumulator/var"), and
 * last the moving averages of the variables
 * ("<var>/ExponentialMovingAverage"; host copies like the slots). */
static lv_status collect_saveables(train_state *t) {
  int nm = 0;
  lv_saveable *model = lv_instance_saveables(t->m, &nm);
  lv_optimizer *opt = lv_learner_optimizer(t->learner);
  int ns = lv_optimizer_num_slot_vars(opt), nn = lv_optimizer_num_nonslot(opt), nl = lv_learner_num_state(t->learner);
  int ne = lv_ema_num_vars(t->ema), na = lv_learner_num_accumulators(t->learner);
  t->items = calloc((size_t)(nm + ns + nn + nl + na + ne + 2), sizeof *t->items);
  LV_ASSERT(t->items);
  memcpy(t->items, model, sizeof *model * (size_t)nm);
  free(model);
  int k = nm;
  for (int i = 0; i < ns; i++) {
    const char *name;
    int64_t n;
    lv_optimizer_slot_var(opt, i, &name, NULL, &n);
    const char *slash = strrchr(name, '/');
    char var[LV_VAR_NAME_MAX];
    snprintf(var, sizeof var, "%.*s", (int)(slash ? slash - name : 0), name);
    lv_var *v = lv_varstore_find(t->m->vs, var);
    if (!v) return lv_status_make(LV_ERR_INTERNAL, "optimizer slot %s has no variable %s", name, var);
    /* Shaped like the variable, but Adafactor's factored accumulators. */
    lv_shape shape = v->value.shape;
    if (lv_tensor_numel(&v->value) != n) shape.rank = lv_optimizer_slot_dims(opt, i, shape.d);
    t->items[k++] = (lv_saveable){name, LV_F32, shape, lv_optimizer_slot_host(opt, i), lv_device_host()};
  }
  for (int i = 0; i < nn; i++) {
    const char *name;
    float *value;
    lv_optimizer_nonslot(opt, i, &name, &value);
    t->items[k++] = (lv_saveable){name, LV_F32, lv_shape0(), value, lv_device_host()};
  }
  if (t->dev_based) {
    /* DevBasedSchedule's variables (Lingvo's LRSched/cur_factor, LRSched/ref_step). */
    lv_schedule *sc = lv_learner_schedule_mut(t->learner);
    t->items[k++] = (lv_saveable){"LRSched/cur_factor/var", LV_F32, lv_shape0(), lv_schedule_dev_based_factor(sc),
                                  lv_device_host()};
    t->items[k++] = (lv_saveable){"LRSched/ref_step/var", LV_I64, lv_shape0(), lv_schedule_dev_based_ref_step(sc),
                                  lv_device_host()};
  }
  /* Lingvo's names: the tracker's variables under the task's scope, its learner's ("loss",
   * the one learner of task.train) and the tracker's own (grad_norm_tracker by default). */
  const char *tracker = nl ? lv_params_str(t->m->cfg, "task.train.grad_norm_tracker.name") : NULL;
  for (int i = 0; i < nl; i++) {
    const char *name;
    float *value;
    lv_learner_state(t->learner, i, &name, &value);
    snprintf(t->tracker_names[i], sizeof t->tracker_names[i], "%s/loss/%s/%s/var",
             lv_params_str(t->m->cfg, "task.name"), tracker[0] ? tracker : "grad_norm_tracker", name);
    t->items[k++] = (lv_saveable){t->tracker_names[i], LV_F32, lv_shape0(), value, lv_device_host()};
  }
  for (int i = 0; i < na; i++) {
    const char *name;
    int64_t n;
    lv_learner_accumulator(t->learner, i, &name, &n);
    char var[LV_VAR_NAME_MAX];
    snprintf(var, sizeof var, "%.*s", (int)(strlen(name) - strlen("/grad_accumulator/var")), name);
    lv_var *v = lv_varstore_find(t->m->vs, var);
    if (!v || lv_tensor_numel(&v->value) != n)
      return lv_status_make(LV_ERR_INTERNAL, "gradient accumulator %s has no variable %s of %lld elements", name, var,
                            (long long)n);
    t->items[k++] = (lv_saveable){name, LV_F32, v->value.shape, lv_learner_accumulator_host(t->learner, i),
                                  lv_device_host()};
  }
  for (int i = 0; i < ne; i++) {
    const char *name;
    int64_t n;
    lv_ema_shadow(t->ema, i, &name, NULL, &n);
    char var[LV_VAR_NAME_MAX];
    snprintf(var, sizeof var, "%.*s", (int)(strlen(name) - strlen(LV_EMA_SUFFIX)), name);
    lv_var *v = lv_varstore_find(t->m->vs, var);
    if (!v || lv_tensor_numel(&v->value) != n)
      return lv_status_make(LV_ERR_INTERNAL, "moving average %s has no variable %s of %lld elements", name, var, (long long)n);
    t->items[k++] = (lv_saveable){name, LV_F32, v->value.shape, lv_ema_shadow_host(t->ema, i), lv_device_host()};
  }
  t->nitems = k;
  return NULL;
}

static lv_status create_learner(train_state *t, const lv_params *cfg, int num_splits) {
  int n = lv_varstore_count(t->m->vs);
  lv_var **vars = calloc((size_t)n + 1, sizeof *vars);
  LV_ASSERT(vars);
  for (int i = 0; i < n; i++) vars[i] = lv_varstore_get(t->m->vs, i);
  const lv_params *tp = lv_params_sub(cfg, "task.train");
  const char *logdir = lv_params_str(cfg, "cluster.logdir");
  lv_status s = lv_early_stop_from_params(tp, &t->es);
  if (!s && t->es.window > 0) s = lv_metric_history_file(logdir, &t->es.history, t->es_file, sizeof t->es_file);
  if (!s) t->dev_based = lv_dev_based_schedule_from_params(tp, &t->dev_hist, &t->dev_tol, &s);
  if (!s && t->dev_based) s = lv_metric_history_file(logdir, &t->dev_hist, t->dev_file, sizeof t->dev_file);
  if (!s && t->es.window > 0)
    lv_info("early stop: training stops once %s has not improved by more than %g for %lld steps (min_steps %lld)",
            t->es_file, t->es.tolerance, (long long)t->es.window, (long long)t->es.min_steps);
  if (!s && t->dev_based) lv_info("DevBasedSchedule: the learning rate decays from %s", t->dev_file);
  t->es_seen[0] = t->es_seen[1] = t->dev_seen[0] = t->dev_seen[1] = -1;
  if (!s)
    s = lv_learner_from_params(tp, num_splits, t->m->backend, vars, n, &t->learner);
  if (!s) s = lv_ema_from_params(lv_params_sub(cfg, "task.train"), num_splits, t->m->backend, vars, n, &t->ema);
  if (!s && t->ema)
    lv_info("moving averages of %d variables (task.train.ema_decay %g): the evaler and the decoder use them",
            lv_ema_num_vars(t->ema), lv_params_float(cfg, "task.train.ema_decay"));
  if (!s) s = lv_vn_create(t->m->backend, vars, n, &t->vn);
  if (!s && t->vn)
    lv_info("variational weight noise (task.train.vn_std %g) on %d variables from step %lld (task.train.vn_start_step); "
            "training only, never in eval or decode", lv_params_float(cfg, "task.train.vn_std"),
            lv_vn_num_vars(t->vn), (long long)lv_vn_start_step(t->vn));
  t->ps_start = INT64_MAX;
  for (int i = 0; !s && i < n; i++)
    if (vars[i]->trainable && vars[i]->vn.per_step && vars[i]->vn.scale > 0.0f) {
      t->ps_vars++;
      if (vars[i]->vn.start_step < t->ps_start) t->ps_start = vars[i]->vn.start_step;
    }
  if (t->ps_vars)
    lv_info("per-step variational weight noise (vn.per_step_vn) on %d variables from step %lld: drawn afresh at "
            "every use (each decoder step of an attention, each softmax); training only", t->ps_vars,
            (long long)t->ps_start);
  free(vars);
  return s;
}

static lv_status save(train_state *t, int64_t step) {
  lv_optimizer_slots_to_host(lv_learner_optimizer(t->learner));
  lv_ema_to_host(t->ema);
  lv_learner_accumulators_to_host(t->learner);
  return lv_checkpointer_save(t->ck, step, t->items, t->nitems, t->params_text);
}

/* *restored: whether variables came from a checkpoint (its step is the instance's). */
static lv_status restore_or_init(train_state *t, const lv_trainer_options *opt, bool *restored) {
  char prefix[8192];
  int64_t step = 0;
  bool found = false;
  *restored = false;
  LV_TRY(lv_checkpoint_resume_point(t->m->train_dir, opt->rebuild_checkpoint_state, prefix, sizeof prefix, &step,
                                    &found));
  if (!found) {
    lv_info("no checkpoint in %s: starting from freshly initialized variables", t->m->train_dir);
    const lv_params *tp = lv_params_sub(t->m->cfg, "task.train");
    int loaded = 0;
    LV_TRY(lv_checkpoint_init_from_rules(lv_params_list(tp, "init_from_checkpoint_rules"),
                                         lv_params_is_set(tp, "init_from_checkpoint_override")
                                             ? lv_params_str(tp, "init_from_checkpoint_override")
                                             : NULL,
                                         t->items,
                                         lv_varstore_count(t->m->vs), &loaded));
    if (loaded) {
      lv_info("init_from_checkpoint_rules: %d variables loaded", loaded);
      if (t->ema) lv_ema_reset(t->ema); /* the averages start from the loaded weights */
    }
    return NULL;
  }
  int n = 0, ne = lv_ema_num_vars(t->ema), ne_found = 0;
  /* Moving averages turned on for a run whose checkpoints have none start from the
   * restored weights (the items end with them, in the EMA's order); so do those a partial
   * restore does not find (ema_decay_moving_vars turned on, a variable added). */
  bool *ema_here = NULL;
  if (ne) {
    ema_here = calloc((size_t)ne, sizeof *ema_here);
    LV_ASSERT(ema_here);
    lv_status s = lv_checkpoint_count_present(prefix, t->items + t->nitems - ne, ne, &ne_found, ema_here);
    if (s) {
      free(ema_here);
      return s;
    }
  }
  bool fresh_averages = ne && !ne_found;
  lv_status rs = lv_checkpoint_restore_mode(prefix, t->items, t->nitems - (fresh_averages ? ne : 0),
                                            opt->allow_partial_restore ? LV_RESTORE_PARTIAL : LV_RESTORE_EXACT, &n);
  if (rs) {
    free(ema_here);
    return lv_status_wrap(rs, "cannot resume training");
  }
  lv_optimizer_slots_from_host(lv_learner_optimizer(t->learner));
  lv_learner_accumulators_from_host(t->learner);
  if (fresh_averages) {
    lv_ema_reset(t->ema);
    lv_info("%s has no moving averages (it was written with task.train.ema_decay 0): starting the averages of %d "
            "variables from its weights", prefix, ne);
  } else if (ne) {
    lv_ema_from_host(t->ema);
    /* Only a partial restore gets here with some missing (an exact one fails on them). */
    for (int i = 0; i < ne; i++)
      if (!ema_here[i]) lv_ema_reset_one(t->ema, i);
    if (ne_found < ne)
      lv_info("%s has no moving average of %d of the %d averaged variables: those start from its weights", prefix,
              ne - ne_found, ne);
  }
  free(ema_here);
  lv_info("restored %d tensors from %s (global_step %lld)", n, prefix, (long long)lv_instance_step(t->m));
  *restored = true;
  /* Another replica count changes the global batch and each replica's share of the
   * stream: the batches from here on are not those the interrupted run would have read. */
  char *was_text = NULL;
  int64_t was = 0;
  const int now = lv_comm_size(t->comm);
  lv_status ps = lv_checkpoint_params_text(prefix, &was_text);
  if (!ps && was_text && lv_params_text_int(was_text, "cluster.worker.replicas", &was) && was != now)
    lv_warn("the replica count changed: %s was written by a run of %lld replica%s, this run has %d: the global "
            "batch and each replica's share of the input differ, so from step %lld on this run does not train on "
            "the batches the interrupted run would have", prefix, (long long)was, was == 1 ? "" : "s", now,
            (long long)lv_instance_step(t->m));
  lv_status_free(ps);
  free(was_text);
  return NULL;
}

/* Every metric's weighted sum since the last log line, by name. */
typedef struct metric_acc {
  int n, cap;
  char (*name)[LV_METRIC_NAME_MAX];
  double *sum, *wsum;
  int *order; /* [n] scratch: the names' sort order */
} metric_acc;

static void acc_add(metric_acc *a, const char *name, double v, double w) {
  int i = 0;
  while (i < a->n && strcmp(a->name[i], name)) i++;
  if (i == a->n) {
    if (a->n == a->cap) {
      a->cap = a->cap ? 2 * a->cap : 32;
      a->name = realloc(a->name, sizeof *a->name * (size_t)a->cap);
      a->sum = realloc(a->sum, sizeof *a->sum * (size_t)a->cap);
      a->wsum = realloc(a->wsum, sizeof *a->wsum * (size_t)a->cap);
      a->order = realloc(a->order, sizeof *a->order * (size_t)a->cap);
      LV_ASSERT(a->name && a->sum && a->wsum && a->order);
    }
    snprintf(a->name[a->n], LV_METRIC_NAME_MAX, "%s", name);
    a->sum[i] = a->wsum[i] = 0;
    a->n++;
  }
  a->sum[i] += v * w;
  a->wsum[i] += w;
}

static void acc_free(metric_acc *a) {
  free(a->name);
  free(a->sum);
  free(a->wsum);
  free(a->order);
}

static int cmp_names(const void *x, const void *y) { return strcmp((const char *)x, (const char *)y); }

/* One trainer per log directory: a second one would interleave checkpoints. The lock is
 * an flock on <logdir>/train/LOCK, released by the kernel when the process dies. */
static lv_status lock_train_dir(const char *train_dir, int *fd_out) {
  *fd_out = -1;
  LV_TRY(make_dir(train_dir));
  char path[LV_PATH_MAX];
  LV_TRY(lv_path_fmt(path, sizeof path, "%s/LOCK", train_dir));
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return lv_status_make(LV_ERR_INVALID, "cannot create %s: %s", path, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = "";
    ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? n : 0] = 0;
    close(fd);
    char who[64] = "";
    if (*pid) snprintf(who, sizeof who, " (pid %s)", strtok(pid, "\n"));
    return lv_status_make(LV_ERR_INVALID, "another trainer%s is already training in %s; stop it or use another --logdir",
                          who, train_dir);
  }
  char buf[32];
  int len = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len) lv_warn("cannot record the pid in %s", path);
  *fd_out = fd;
  return NULL;
}

/* "<why>; largest: var a N, var b N, var c N" (the learner's per-variable gradient norms
 * of the step), to find where a spike comes from. */
static void largest_grads(const lv_learner *l, const char *why, char *out, size_t cap) {
  int top[3] = {-1, -1, -1};
  double norm[3] = {0, 0, 0};
  for (int i = 0; i < lv_learner_num_vars(l); i++) {
    double g;
    lv_learner_var_norms(l, i, &g, NULL);
    int k = 3;
    while (k > 0 && (top[k - 1] < 0 || g > norm[k - 1])) k--; /* g's rank among the top 3 */
    for (int j = 2; j > k; j--) top[j] = top[j - 1], norm[j] = norm[j - 1];
    if (k < 3) top[k] = i, norm[k] = g;
  }
  size_t len = (size_t)snprintf(out, cap, "%s; largest:", why);
  for (int k = 0; k < 3 && top[k] >= 0 && len < cap; k++)
    len += (size_t)snprintf(out + len, cap - len, "%s %s %.3g", k ? "," : "", lv_learner_var_name(l, top[k]), norm[k]);
}

/* The step's metrics, exchanged with the other replicas into t->value and t->weight
 * (mt's order); *loss_scale is this rank's share of the global loss, *stop whether a
 * replica asked to stop. An lv_replica_step carries LV_MAX_METRICS metrics, so more are
 * exchanged in parts; the parts without `loss` give a loss scale of exactly 1. */
static lv_status exchange_metrics(train_state *t, bool stop_requested, float *loss_scale, bool *stop) {
  const lv_metrics *mt = &t->mt;
  if (mt->n > t->nvalues) {
    t->nvalues = mt->n;
    t->value = realloc(t->value, sizeof *t->value * (size_t)mt->n);
    t->weight = realloc(t->weight, sizeof *t->weight * (size_t)mt->n);
    LV_ASSERT(t->value && t->weight);
  }
  *loss_scale = 1.0f;
  *stop = false;
  int k = 0;
  do {
    lv_metrics part = *mt;
    part.n = mt->n - k < LV_MAX_METRICS ? mt->n - k : LV_MAX_METRICS;
    if (k) {
      part.name += k;
      part.value += k;
      part.constant += k;
      part.weight += k;
    }
    lv_replica_step rs;
    LV_TRY(lv_replicas_exchange(t->comm, &part, stop_requested, &rs));
    for (int i = 0; i < part.n; i++) t->value[k + i] = rs.value[i], t->weight[k + i] = rs.weight[i];
    *loss_scale *= rs.loss_scale;
    *stop |= rs.stop;
    k += part.n;
  } while (k < mt->n);
  return NULL;
}

/* Forward pass of t->batch in training mode, the loss checked, the metrics exchanged. */
static lv_status step_forward(train_state *t, const lv_trainer_options *opt, int64_t step, float *loss_scale,
                              bool *stop) {
  lv_metrics *mt = &t->mt;
  LV_TRY(lv_instance_fprop(t->m, &t->batch, true, step, mt));
  for (int i = 0; opt->check_numerics && i < mt->n; i++)
    if (!strcmp(mt->name[i], "loss") && !isfinite(lv_metrics_value(mt, i)))
      return lv_status_make(LV_ERR_INTERNAL, "step %lld: the loss is %g (--enable_check_numerics stops here, as "
                            "Lingvo's CheckNumerics does; with --noenable_check_numerics such steps are skipped "
                            "and counted)", (long long)step, lv_metrics_value(mt, i));
  /* Replicas agree on the step's metrics, on stopping, and on each one's share of the
   * global loss; the summed gradients are the global batch's. */
  return exchange_metrics(t, g_stop_signal != 0, loss_scale, stop);
}

/* The gradients of this rank's share of the loss, summed over the replicas. */
static lv_status step_backward(train_state *t, float loss_scale) {
  lv_tensor *loss = loss_scale == 1.0f ? t->mt.loss : lv_op_scale(t->m->graph, t->mt.loss, loss_scale);
  lv_status s = NULL;
  if (loss && t->ov) s = lv_grad_overlap_arm(t->ov, t->m->graph);
  if (!s) s = loss ? lv_graph_backward(t->m->graph, loss) : lv_graph_status(t->m->graph);
  if (t->ov) {
    lv_status f = lv_grad_overlap_finish(t->ov);
    if (!s) s = f;
    else lv_status_free(f);
  }
  if (!s && !t->ov) s = lv_replicas_allreduce_grads(t->comm, t->m->vs);
  return s;
}

/* The learner's update; *st says whether it was applied or skipped, and why. */
static lv_status step_update(train_state *t, const lv_trainer_options *opt, int64_t step, lv_learner_stats *st) {
  LV_TRY(lv_learner_step(t->learner, step, st));
  if (opt->check_numerics && st->has_nan_or_inf)
    return lv_status_make(LV_ERR_INTERNAL, "step %lld: the gradient of %s is not finite (--enable_check_numerics "
                          "stops here, as Lingvo's CheckNumerics does; with --noenable_check_numerics such steps "
                          "are skipped and counted); variables unchanged", (long long)step,
                          st->nonfinite_var ? st->nonfinite_var : "a variable (the norm overflows float32)");
  return NULL;
}

/* After an applied update: the deferred variable updates (batch norm's moving
 * statistics), then the replicas' mean of the non-trainable variables, then the moving
 * averages of the variables (of the step's final values, identical on every replica). */
static lv_status step_after_update(train_state *t, int64_t step) {
  LV_TRY(lv_graph_apply_updates(t->m->graph));
  LV_TRY(lv_replicas_mean_nontrainable(t->comm, t->m->vs));
  if (t->ema) LV_TRY(lv_ema_apply(t->ema, step));
  return NULL;
}

/* One training step at global step `step` (before its increment) on t->batch:
 * forward and backward (at the noisy weights when weight noise is on), update (of the
 * clean weights), and the work that follows an applied update; the moving averages of the
 * variables are updated at the end of step_after_update, so a skipped update leaves them.
 * *st is filled as far as the step got (the learner's stats of a failed update
 * included); *stop says whether the replicas stop after this step. */
/* best_step of a history file, read by the chief and sent to every replica (the file may
 * grow between two ranks' reads). */
static lv_status read_best_step(train_state *t, const char *path, double tol, bool minimize, int64_t bl[2]) {
  lv_status s = NULL;
  if (lv_comm_rank(t->comm) == 0) s = lv_best_step(path, tol, minimize, &bl[0], &bl[1]);
  if (s || lv_comm_size(t->comm) == 1) return s;
  lv_shape sh = {1, {2}};
  lv_saveable it = {"best_step", LV_I64, sh, bl, lv_device_host()};
  return lv_replicas_broadcast(t->comm, &it, 1);
}

/* With replicas: every rank's moving averages are rank 0's, bit for bit. */
static lv_status check_ema_same(train_state *t, int64_t step) {
  lv_ema_to_host(t->ema);
  uint32_t crc = 0;
  for (int i = 0; i < lv_ema_num_vars(t->ema); i++) {
    const char *name;
    float *data;
    int64_t n;
    lv_ema_shadow(t->ema, i, &name, &data, &n);
    crc = lv_crc32c_extend(crc, lv_ema_shadow_host(t->ema, i), sizeof(float) * (size_t)n);
  }
  LV_TRY(lv_replicas_check_crc(t->comm, crc, step, "moving averages (task.train.ema_decay)"));
  lv_vlog(1, "step %lld: the moving averages are the same on all %d ranks (crc32c %08x)", (long long)step,
          lv_comm_size(t->comm), crc);
  return NULL;
}

/* Lingvo's DevBasedSchedule.Value before the step: the factor from the history. */
static lv_status dev_based_update(train_state *t, int64_t step) {
  int64_t bl[2] = {0, 0};
  LV_TRY(read_best_step(t, t->dev_file, t->dev_tol, t->dev_hist.minimize, bl));
  lv_schedule *sc = lv_learner_schedule_mut(t->learner);
  if (lv_schedule_dev_based_update(sc, bl[0], bl[1]))
    lv_info("DevBasedSchedule: step %lld: %s best at step %lld, last at %lld: learning rate factor now %g",
            (long long)step, t->dev_hist.metric, (long long)bl[0], (long long)bl[1],
            (double)*lv_schedule_dev_based_factor(sc));
  return NULL;
}

/* Lingvo's EarlyStop.Stop: *stop when the metric has not improved for window steps. */
static lv_status early_stop_check(train_state *t, bool *stop) {
  int64_t bl[2] = {0, 0};
  LV_TRY(read_best_step(t, t->es_file, t->es.tolerance, t->es.history.minimize, bl));
  *stop = lv_early_stop_triggered(&t->es, bl[0], bl[1]);
  if (t->es.verbose && (bl[0] != t->es_seen[0] || bl[1] != t->es_seen[1] || *stop))
    lv_info("early stop check: best_step=%lld, last_step=%lld, stop=%d", (long long)bl[0], (long long)bl[1], *stop);
  t->es_seen[0] = bl[0], t->es_seen[1] = bl[1];
  return NULL;
}

static lv_status train_step(train_state *t, const lv_trainer_options *opt, int64_t step, lv_learner_stats *st,
                            bool *stop) {
  memset(st, 0, sizeof *st);
  *stop = false;
  lv_varstore_zero_grads(t->m->vs);
  float loss_scale = 1.0f;
  /* Weight noise for the forward and backward passes; the update sees the clean values. */
  int noisy = lv_vn_perturb(t->vn, step);
  /* Every rank must draw the same noise: with replicas, compare the noisy variables at the
   * first noisy step and before each summary. */
  if (noisy && lv_comm_size(t->comm) > 1 &&
      (!t->vn_logged || (t->check_every > 0 && (step + 1) % t->check_every == 0))) {
    lv_status s = lv_replicas_check_same(t->comm, t->m->vs, step, "variables with weight noise");
    if (s) {
      lv_vn_restore(t->vn);
      return s;
    }
    lv_vlog(1, "step %lld: the variables with weight noise are the same on all %d ranks", (long long)step,
            lv_comm_size(t->comm));
  }
  if (noisy && !t->vn_logged) {
    int64_t from = lv_vn_start_step(t->vn);
    lv_info("step %lld: variational weight noise is on%s (task.train.vn_start_step %lld): %d variables perturbed per "
            "step; the training loss and accuracy usually get worse from here for a while", (long long)step,
            step == from ? "" : " (resumed past its start)", (long long)from, noisy);
    t->vn_logged = true;
  }
  if (t->ps_vars && !t->ps_logged && step >= t->ps_start) {
    lv_info("step %lld: per-step variational weight noise is on%s (from step %lld) on %d variables", (long long)step,
            step == t->ps_start ? "" : " (resumed past its start)", (long long)t->ps_start, t->ps_vars);
    t->ps_logged = true;
  }
  lv_status s = step_forward(t, opt, step, &loss_scale, stop);
  if (!s) s = step_backward(t, loss_scale);
  lv_vn_restore(t->vn);
  LV_TRY(s);
  LV_TRY(step_update(t, opt, step, st));
  if (!st->skipped) LV_TRY(step_after_update(t, step));
  return NULL;
}

/* The warning for a skipped step, with what made the learner skip it. */
static void warn_skipped(const train_state *t, const lv_learner_stats *st, int64_t step, int64_t skipped) {
  char why[512];
  if (st->update_nonfinite)
    snprintf(why, sizeof why, "the update (grad norm %.3g, learning rate %.3g) made %s NaN or Inf",
             st->grad_norm_all, st->learning_rate, st->nonfinite_update);
  else if (st->has_nan_or_inf)
    snprintf(why, sizeof why, "gradient of %s has NaN or Inf", st->nonfinite_var ? st->nonfinite_var : "a variable");
  else {
    char what[160];
    if (st->over_clip_to_zero || !st->tracker_rejected)
      snprintf(what, sizeof what, "gradient norm %.3g over grad_norm_to_clip_to_zero", st->grad_norm_all);
    else
      snprintf(what, sizeof what, "gradient norm %.3g rejected by the GradNormTracker (an outlier of its moving "
               "log-norm statistics)", st->grad_norm_all);
    largest_grads(t->learner, what, why, sizeof why);
  }
  lv_warn("step %lld: %s: step skipped (variables unchanged); %lld skipped so far", (long long)step, why,
          (long long)skipped);
}

/* TensorBoard renders text summaries as markdown: as Lingvo does, end every line with
 * two spaces so the params keep one key per line. */
static char *markdown_lines(const char *text) {
  size_t n = strlen(text), lines = 0;
  for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
  char *out = malloc(n + 2 * lines + 1), *o = out;
  LV_ASSERT(out);
  for (size_t i = 0; i < n; i++) {
    if (text[i] == '\n') *o++ = ' ', *o++ = ' ';
    *o++ = text[i];
  }
  *o = 0;
  return out;
}

lv_status lv_trainer_run(const lv_params *cfg, const lv_trainer_options *opt) {
  train_state t = {0};
  metric_acc acc = {0};
  lv_batch_init(&t.batch);
  lv_metrics_init(&t.mt);
  lv_comm *comm = opt->comm;
  t.comm = comm;
  const int nrep = lv_comm_size(comm);
  const bool chief = lv_comm_rank(comm) == 0; /* the only rank that writes into the logdir */
  lv_status s = NULL;
  if (lv_params_int(cfg, "cluster.worker.replicas") != nrep)
    return lv_status_make(LV_ERR_INVALID, "cluster.worker.replicas is %lld but the job runs %d replica%s (%s)",
                          (long long)lv_params_int(cfg, "cluster.worker.replicas"), nrep, nrep == 1 ? "" : "s",
                          lv_comm_describe(comm));
  if (nrep > 1) {
    /* The flags that change what a step does, or which collectives it makes. */
    char *params = lv_params_to_text(cfg), *config = NULL;
    size_t config_len = 0;
    FILE *f = open_memstream(&config, &config_len);
    LV_ASSERT(f);
    fprintf(f, "%s--allreduce_bucket_mb bytes: %lld\n--enable_check_numerics: %d\n--allow_partial_restore: %d\n"
            "--rebuild_checkpoint_state: %d\n", params, (long long)opt->allreduce_bucket_bytes, opt->check_numerics,
            opt->allow_partial_restore, opt->rebuild_checkpoint_state);
    int closed = fclose(f);
    LV_ASSERT(closed == 0 && config);
    s = lv_replicas_check_config(comm, config);
    free(config);
    free(params);
    if (s) return s;
  }
  s = lv_instance_create(cfg, true, (lv_input_shard){lv_comm_rank(comm), nrep}, &t.m);
  if (s) return s;
  lv_graph_set_free_in_backward(t.m->graph, opt->free_in_backward);
  int lock_fd = -1;
  if (chief) s = lock_train_dir(t.m->train_dir, &lock_fd);
  if (s) {
    lv_instance_destroy(t.m);
    lv_batch_free(&t.batch);
    return s;
  }
  const lv_params *train_p = lv_params_sub(cfg, "train");
  int64_t num_splits = lv_params_int(cfg, "cluster.worker.replicas") *
                       (lv_params_int(cfg, "cluster.worker.gpus_per_replica") > 0
                            ? lv_params_int(cfg, "cluster.worker.gpus_per_replica") / lv_params_int(cfg, "cluster.worker.devices_per_split")
                            : 1);
  if (!s && chief) {
    /* The chief alone (it holds the train directory's lock): a replica on another host
     * would take the chief's pid, alive there, for a dead one here. */
    int stale = lv_checkpoint_clean_stale_temps(t.m->train_dir);
    if (stale) lv_info("removed %d temporary checkpoint file%s of trainers that were killed", stale, stale > 1 ? "s" : "");
  }
  bool restored = false;
  if (!s) s = create_learner(&t, cfg, (int)num_splits);
  if (!s) s = collect_saveables(&t);
  if (!s && chief) s = restore_or_init(&t, opt, &restored);
  if (!s && nrep > 1) {
    /* Every rank starts from the chief's variables, slots and step. */
    lv_optimizer_slots_to_host(lv_learner_optimizer(t.learner));
    lv_ema_to_host(t.ema);
    lv_learner_accumulators_to_host(t.learner);
    s = lv_replicas_broadcast(comm, t.items, t.nitems);
    if (!s) lv_optimizer_slots_from_host(lv_learner_optimizer(t.learner));
    if (!s) lv_ema_from_host(t.ema);
    if (!s) lv_learner_accumulators_from_host(t.learner);
  }
  /* Only now, with the model built and any checkpoint restored, write into the logdir:
   * a run that fails on bad input leaves the directory as it was. */
  if (!s && chief) {
    char *analysis = lv_instance_analysis(t.m);
    s = lv_trainer_write_control(cfg, analysis);
    free(analysis);
  }
  if (!s && chief) s = lv_checkpointer_create(t.m->train_dir, train_p, lv_params_bool(train_p, "async_checkpointing"), &t.ck);
  if (!s && restored && t.ck) lv_checkpointer_note_restored(t.ck, lv_instance_step(t.m));
  t.params_text = lv_params_to_text(cfg);
  if (s) goto done;
  if (opt->install_signal_handlers) {
    g_stop_signal = 0;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    /* One process: a signal also ends a wait for input (a FIFO, a shuffle buffer still
     * filling), between two steps, so the stop below still saves. Replicas keep
     * waiting: a stop must reach the others through a step's exchange. */
    if (nrep == 1) lv_record_yielder_set_interrupt(&g_stop_signal);
  }
  const int64_t max_steps = lv_params_int(train_p, "max_steps");
  const int64_t summary_every = lv_params_int(train_p, "summary_interval_steps");
  t.check_every = summary_every;
  /* Lingvo's split semantics: batch_size is per split, the global batch is their sum. */
  const int64_t batch = lv_input_batch_size(t.m->input) * nrep;
  int64_t step = lv_instance_step(t.m);
  if (step >= max_steps) {
    lv_info("global_step %lld >= train.max_steps %lld: nothing to train", (long long)step, (long long)max_steps);
    goto done;
  }
  /* The events file only once there is something to write (a no-op start leaves none). */
  if (chief) {
    if ((s = lv_events_writer_open(t.m->train_dir, 5.0, &t.ev))) goto done;
    char *md = markdown_lines(t.params_text);
    lv_events_text(t.ev, "trainer_params.txt", step, md);
    free(md);
  }
  lv_info("training %s from step %lld to %lld, batch %lld (%d replica%s x %lld), %d threads; communicator %s",
          lv_params_str(cfg, "model"), (long long)step, (long long)max_steps, (long long)batch, nrep,
          nrep == 1 ? "" : "s", (long long)(batch / nrep), lv_get_num_threads(), lv_comm_describe(comm));
  if (t.ck && lv_checkpointer_should_save(t.ck, step) && (s = save(&t, step))) goto done;
  double t_start = lv_now_monotonic(), t_log = t_start;
  int64_t step_log = step, start_step = step, skipped = 0;
  const int64_t log_every = opt->log_interval_steps > 0 ? opt->log_interval_steps : 100;
  bool stop = false;
  double reduce_s0 = lv_comm_allreduce_seconds(comm);
  if ((s = lv_grad_overlap_create(comm, t.m->vs, opt->allreduce_bucket_bytes, &t.ov))) goto done;
  if (t.ov)
    lv_info("gradient all-reduce overlapped with backward: %d bucket%s of about %.3g MB (--allreduce_bucket_mb)",
            lv_grad_overlap_num_buckets(t.ov), lv_grad_overlap_num_buckets(t.ov) == 1 ? "" : "s",
            (double)opt->allreduce_bucket_bytes / (1 << 20));
  bool early_stopped = false;
  const int64_t report_steps = opt->memory_report_steps;
  while (step < max_steps && !stop && !(nrep == 1 && g_stop_signal) &&
         !(report_steps > 0 && step - start_step >= report_steps)) {
    if (t.es.window > 0) {
      if ((s = early_stop_check(&t, &early_stopped))) goto done;
      if (early_stopped) break;
    }
    if (t.dev_based && (s = dev_based_update(&t, step))) goto done;
    if ((s = lv_input_train_batch(t.m->input, step, &t.batch))) {
      if (lv_status_code(s) != LV_ERR_CANCELLED || !(nrep == 1 && g_stop_signal)) goto done;
      lv_status_free(s); /* the signal ended the wait for the batch of `step` */
      s = NULL;
      break;
    }
    lv_learner_stats st;
    s = train_step(&t, opt, step, &st, &stop);
    /* Logged also when the learner stops the run for too many skipped steps in a row. */
    if (st.skipped && !(opt->check_numerics && st.has_nan_or_inf)) warn_skipped(&t, &st, step, ++skipped);
    if (s) goto done;
    step++;
    if (lv_log_verbosity(__FILE__) >= 1) {
      for (int i = 0; i < t.mt.n; i++)
        if (!strcmp(t.mt.name[i], "loss"))
          lv_vlog(1, "step %lld: loss %.9g, grad norm %.9g%s", (long long)step, t.value[i],
                  st.grad_norm_all, st.skipped ? " (skipped)" : "");
    }
    if ((s = lv_tensor_from_host(&t.m->global_step->value, &step))) goto done;
    for (int i = 0; i < t.mt.n; i++) acc_add(&acc, t.mt.name[i], t.value[i], t.weight[i]);
    {
      const char *names[LV_LEARNER_MAX_STATS_METRICS];
      double values[LV_LEARNER_MAX_STATS_METRICS];
      int nlm = lv_learner_stats_metrics(&st, names, values, LV_LEARNER_MAX_STATS_METRICS);
      for (int i = 0; i < nlm; i++) acc_add(&acc, names[i], values[i], 1);
    }
    double now = lv_now_monotonic();
    bool do_summary = summary_every > 0 && step % summary_every == 0;
    if (do_summary || step == max_steps || stop) {
      if ((s = lv_replicas_check_same(comm, t.m->vs, step, "variables"))) goto done;
      if (t.ema && lv_comm_size(comm) > 1 && (s = check_ema_same(&t, step))) goto done;
    }
    do_summary &= t.ev != NULL;
    if (step % log_every == 0 || step == max_steps || now - t_log > 30.0 || do_summary) {
      double dt = now - t_log, rate = dt > 0 ? (double)(step - step_log) / dt : 0;
      double overall = (double)(step - start_step) / (now - t_start);
      char eta[32], *line = NULL;
      size_t line_len = 0;
      format_eta((double)(max_steps - step) / overall, eta, sizeof eta);
      FILE *lf = open_memstream(&line, &line_len);
      LV_ASSERT(lf);
      fprintf(lf, "step: %6lld, steps/sec: %0.2f, examples/sec: %0.2f", (long long)step, rate, rate * (double)batch);
      for (int i = 0; i < acc.n; i++) acc.order[i] = i;
      for (int i = 1; i < acc.n; i++)
        for (int j = i; j > 0 && cmp_names(acc.name[acc.order[j]], acc.name[acc.order[j - 1]]) < 0; j--) {
          int tmp = acc.order[j];
          acc.order[j] = acc.order[j - 1];
          acc.order[j - 1] = tmp;
        }
      for (int k = 0; k < acc.n; k++) {
        int i = acc.order[k];
        double v = acc.wsum[i] > 0 ? acc.sum[i] / acc.wsum[i] : 0;
        fprintf(lf, " %s:%.8g", acc.name[i], v);
        if (do_summary) lv_events_scalar(t.ev, acc.name[i], step, v);
      }
      if (nrep > 1) {
        double rs_now = lv_comm_allreduce_seconds(comm);
        fprintf(lf, " allreduce_ms/step:%.2f",
                step > step_log ? 1e3 * (rs_now - reduce_s0) / (double)(step - step_log) : 0.0);
        reduce_s0 = rs_now;
      }
      int closed = fclose(lf);
      LV_ASSERT(closed == 0 && line);
      lv_info("%s ETA %s", line, eta);
      free(line);
      if (do_summary) {
        lv_events_scalar(t.ev, "global_step/sec", step, rate);
        lv_events_scalar(t.ev, "examples/sec", step, rate * (double)batch);
        lv_events_scalar(t.ev, "total_samples", step, (double)(step * batch));
      }
      acc.n = 0;
      t_log = now;
      step_log = step;
    }
    if (t.ck && lv_checkpointer_should_save(t.ck, step) && (s = save(&t, step))) goto done;
  }
  if (early_stopped)
    lv_info("early stop at step %lld: %s/%s has not improved by more than %g in %lld steps", (long long)step,
            t.es.history.jobname, t.es.history.metric, t.es.tolerance, (long long)t.es.window);
  else if (stop || g_stop_signal) lv_info("signal %d received: saving a checkpoint at step %lld and stopping (send it again, a second or more later, to stop at once)",
                           (int)g_stop_signal, (long long)step);
  /* Lingvo's controller saves when it stops, whatever the interval. */
  if (t.ck && lv_checkpointer_last_step(t.ck) != step) s = save(&t, step);
  if (!s) lv_info("trained to step %lld in %.1f s (%lld steps skipped: NaN/Inf, a gradient norm over grad_norm_to_clip_to_zero, or one the GradNormTracker rejected)", (long long)step,
                  lv_now_monotonic() - t_start, (long long)skipped);
  if (!s && report_steps > 0)
    lv_memory_report_print(stdout, t.m, t.learner, t.ema, &t.batch, step - start_step, opt->free_in_backward);
done:
  acc_free(&acc);
  lv_grad_overlap_destroy(t.ov);
  lv_metrics_free(&t.mt);
  lv_batch_free(&t.batch);
  free(t.value);
  free(t.weight);
  {
    lv_status s2 = lv_checkpointer_destroy(t.ck);
    if (!s) s = s2;
    else lv_status_free(s2);
    if (t.ev) {
      s2 = lv_events_writer_close(t.ev);
      if (!s) s = s2;
      else lv_status_free(s2);
    }
  }
  /* Only now, with the last checkpoint and events written. After a stop signal the handler
   * stays: a copy of that signal arriving while the process exits is still ignored. */
  if (opt->install_signal_handlers) {
    lv_record_yielder_set_interrupt(NULL);
    if (!g_stop_signal) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
    }
  }
  free(t.items);
  free(t.params_text);
  lv_learner_free(t.learner);
  lv_ema_free(t.ema);
  lv_vn_free(t.vn);
  lv_instance_destroy(t.m);
  if (lock_fd >= 0) close(lock_fd);
  return s;
}
