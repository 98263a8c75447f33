#include "runners/instance.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/path.h"
#include "io/bundle.h"
#include "kernels/kernels.h"
#include "kernels/qweight.h"
#include "layers/qdomain.h"

/* cluster.worker.gpus_per_replica > 0 (--run_locally=gpu): variables and steps on cuda:0. */
static lv_device cfg_device(const lv_params *cfg) {
  return lv_params_int(cfg, "cluster.worker.gpus_per_replica") > 0 ? lv_device_make(LV_DEVICE_CUDA, 0)
                                                                   : lv_device_host();
}

lv_status lv_instance_create(const lv_params *cfg, bool with_input, lv_input_shard shard, lv_instance **out) {
  return lv_instance_create_on(cfg, cfg_device(cfg), with_input, shard, out);
}

lv_status lv_instance_create_input(lv_instance *m, lv_input_shard shard) {
  LV_ASSERT(!m->input);
  lv_status s = lv_input_create(lv_params_sub(m->cfg, "input"), shard, &m->input);
  if (s && lv_status_code(s) == LV_ERR_NOT_FOUND) {
    /* Data that is not there yet: say where the recipe is ("model" is key@file). */
    const char *at = strchr(lv_params_str(m->cfg, "model"), '@');
    lv_status h = lv_status_make(LV_ERR_NOT_FOUND, "%s\n  The data is made as the comments at the top of %s say; "
                                 "data elsewhere: --model_params_override='input.file_pattern: \"...\"'",
                                 lv_status_msg(s), at ? at + 1 : "the experiment file");
    lv_status_free(s);
    s = h;
  }
  return s;
}

/* Before finalize: the variables f holds quantized get no float storage (model_export.h). */
static void defer_quantized(lv_instance *m, const lv_model_file *f) {
  for (int i = 0; i < lv_varstore_count(m->vs); i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    const lv_mf_tensor *t = lv_model_file_tensor(f, v->name);
    if (t && t->quantized && t->dtype == v->value.dtype && lv_shape_eq(&t->shape, &v->value.shape)) lv_var_defer(v);
  }
}

static lv_status create(const lv_params *cfg, lv_device dev, bool with_input, lv_input_shard shard,
                        const lv_model_file *weights, lv_instance **out) {
  *out = NULL;
  lv_instance *m = calloc(1, sizeof *m);
  LV_ASSERT(m);
  m->cfg = cfg;
  lv_status s = lv_path_fmt(m->logdir, sizeof m->logdir, "%s", lv_params_str(cfg, "cluster.logdir"));
  if (!s) s = lv_path_fmt(m->train_dir, sizeof m->train_dir, "%s/train", m->logdir);
  if (s) {
    free(m);
    return lv_status_wrap(s, "--logdir");
  }
  lv_set_num_threads((int)lv_params_int(cfg, "cluster.num_threads"));
  const lv_params *tp = lv_params_sub(cfg, "task");
  const char *cls = lv_params_str(tp, "cls");
  const lv_task_class *tc = lv_task_class_find(cls);
  if (!tc) s = lv_status_make(LV_ERR_INVALID, "task.cls: \"%s\" is not a task class", cls);
  if (!s && lv_params_float(tp, "train.ema_decay") >= 1.0)
    s = lv_status_make(LV_ERR_INVALID, "task.train.ema_decay: %g: expected a decay below 1 (0 or less: no moving averages)",
                       lv_params_float(tp, "train.ema_decay"));
  m->vs = lv_varstore_create_on(dev);
  m->backend = lv_backend_get(dev);
  char dn[32];
  if (!m->vs) {
    free(m);
    return lv_status_make(LV_ERR_INVALID, "no backend for device %s in this build", lv_device_str(dev, dn, sizeof dn));
  }
  lv_var_init zero = {LV_INIT_CONSTANT, 0.0};
  if (!s) s = lv_varstore_add(m->vs, "global_step", LV_I64, lv_shape0(), zero, false, &m->global_step);
  uint64_t seed = lv_params_is_set(tp, "random_seed") ? (uint64_t)lv_params_int(tp, "random_seed") : 1234;
  if (!s) s = lv_task_update_vn_config(tp, m->vs, seed);
  /* The task's skip_lp_regularization reaches every layer whose own is None. */
  if (!s && lv_params_is_set(tp, "skip_lp_regularization"))
    lv_varstore_set_scope_skip_lp(m->vs, "", lv_params_bool(tp, "skip_lp_regularization"));
  /* The task's qdomain.default reaches every quantizable layer whose own is None. */
  if (!s) lv_qdomain_scope(m->vs, "", tp);
  if (!s) s = tc->create(tp, lv_params_sub(cfg, "input"), m->vs, &m->task);
  /* The input after the task has checked its params (a bad param is reported before
   * missing data) and before the variables are allocated (missing data is reported before
   * lm.one_billion_wds' 13 GB of them). */
  if (!s && with_input) s = lv_instance_create_input(m, shard);
  /* The evaler's and the decoder's jobs (and export's, the library's, a fusion LM's) run
   * no backward pass: no gradient buffer, so they take the weights' memory once. */
  const char *job = lv_params_str(cfg, "cluster.job");
  if (!strncmp(job, "evaler", 6) || !strncmp(job, "decoder", 7)) lv_varstore_set_no_grads(m->vs);
  if (!s && weights && lv_device_is_host(dev) && lv_qweights_enabled()) defer_quantized(m, weights);
  if (!s) s = lv_varstore_finalize(m->vs, seed);
  if (s) {
    lv_instance_destroy(m);
    return s;
  }
  m->graph = lv_graph_create_on(dev, 0);
  LV_ASSERT(m->graph);
  /* An eval-mode forward (evaler, decoder's encoder pass, scoring) holds one layer's
   * temporaries at a time, not all of them (graph.h). */
  lv_graph_set_free_in_eval(m->graph, true);
  *out = m;
  return NULL;
}

lv_status lv_instance_create_on(const lv_params *cfg, lv_device dev, bool with_input, lv_input_shard shard,
                                lv_instance **out) {
  return create(cfg, dev, with_input, shard, NULL, out);
}

lv_status lv_instance_create_for_file(const lv_params *cfg, const lv_model_file *f, lv_instance **out) {
  return create(cfg, cfg_device(cfg), false, lv_input_no_shard(), f, out);
}

void lv_instance_destroy(lv_instance *m) {
  if (!m) return;
  if (m->task) m->task->cls->destroy(m->task);
  lv_input_destroy(m->input);
  if (m->graph) lv_graph_destroy(m->graph);
  lv_batch_free(&m->step_batch);
  lv_varstore_destroy(m->vs);
  free(m);
}

int64_t lv_instance_step(const lv_instance *m) {
  double step = 0;
  lv_status s = lv_tensor_item(&m->global_step->value, &step);
  LV_ASSERT(!s); /* an int64 scalar on the instance's own device */
  return (int64_t)step;
}

lv_saveable *lv_instance_saveables(lv_instance *m, int *n) {
  int c = lv_varstore_count(m->vs);
  lv_saveable *s = calloc((size_t)c, sizeof *s);
  LV_ASSERT(s);
  for (int i = 0; i < c; i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    s[i] = (lv_saveable){v->name, v->value.dtype, v->value.shape, v->value.data, v->value.device};
  }
  *n = c;
  return s;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char *lv_instance_analysis(lv_instance *m) {
  int c = lv_varstore_count(m->vs);
  char **lines = calloc((size_t)c, sizeof *lines);
  size_t maxlen = 0;
  for (int i = 0; i < c; i++) {
    size_t l = strlen(lv_varstore_get(m->vs, i)->name);
    if (l > maxlen) maxlen = l;
  }
  int64_t total = 0;
  int k = 0;
  for (int i = 0; i < c; i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    if (!v->trainable) continue;
    char shape[128] = "[";
    for (int d = 0; d < v->value.shape.rank; d++) {
      char t[32];
      snprintf(t, sizeof t, d ? ", %lld" : "%lld", (long long)v->value.shape.d[d]);
      strcat(shape, t);
    }
    strcat(shape, "]");
    int64_t ne = lv_tensor_numel(&v->value);
    total += ne;
    LV_ASSERT(asprintf(&lines[k++], "%-*s%-20s %10lld %s", (int)maxlen + 4, v->name, shape, (long long)ne, v->name) >= 0);
  }
  qsort(lines, (size_t)k, sizeof *lines, cmp_str);
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  fprintf(f, "\n");
  for (int i = 0; i < k; i++) {
    fprintf(f, "%s\n", lines[i]);
    free(lines[i]);
  }
  for (int i = 0; i < 100; i++) fputc('=', f);
  /* total with thousands separators, as Python's '{:,}' */
  char num[64], grouped[96];
  snprintf(num, sizeof num, "%lld", (long long)total);
  int nl = (int)strlen(num), g = 0;
  for (int i = 0; i < nl; i++) {
    grouped[g++] = num[i];
    if ((nl - i - 1) % 3 == 0 && i != nl - 1) grouped[g++] = ',';
  }
  grouped[g] = 0;
  fprintf(f, "\ntotal #params: %s\n", grouped);
  fclose(f);
  free(lines);
  return out;
}

lv_status lv_instance_fprop(lv_instance *m, lv_batch *b, bool training, int64_t step, lv_metrics *metrics) {
  lv_metrics_free(metrics);
  lv_graph_reset(m->graph);
  lv_graph_set_training(m->graph, training);
  lv_graph_set_step(m->graph, step);
  /* The task sees the batch on the step's device (the tape keeps pointers to it). */
  lv_batch *db = &m->step_batch;
  lv_status s = lv_batch_to_graph(m->graph, b, db);
  if (s) return lv_status_wrap(s, "step %lld", (long long)step);
  bool ok = m->task->cls->fprop(m->task, m->graph, db, !training, step, metrics);
  s = lv_graph_status(m->graph);
  if (!s && !ok) s = lv_status_make(LV_ERR_INTERNAL, "task fprop failed without a message");
  if (!s && !metrics->loss) s = lv_status_make(LV_ERR_INTERNAL, "task produced no `loss` metric");
  return s ? lv_status_wrap(s, "step %lld", (long long)step) : NULL;
}

lv_status lv_instance_restore(lv_instance *m, const char *prefix, int *num_averages) {
  if (num_averages) *num_averages = 0;
  int n = 0;
  lv_saveable *items = lv_instance_saveables(m, &n);
  char (*avg)[LV_VAR_NAME_MAX + sizeof LV_CKPT_AVERAGE_SUFFIX] = calloc((size_t)(n > 0 ? n : 1), sizeof *avg);
  LV_ASSERT(avg);
  bool use = lv_params_float(m->cfg, "task.train.ema_decay") > 0.0;
  int held = 0;
  lv_bundle_reader *r = NULL;
  lv_status s = lv_bundle_reader_open(prefix, &r);
  for (int i = 0; !s && i < n; i++) {
    if (items[i].dtype != LV_F32) continue;
    snprintf(avg[i], sizeof avg[i], "%s%s", items[i].name, LV_CKPT_AVERAGE_SUFFIX);
    if (!lv_bundle_reader_find(r, avg[i])) continue;
    held++;
    if (use) items[i].name = avg[i];
  }
  lv_bundle_reader_close(r);
  if (!s) s = lv_checkpoint_restore(prefix, items, n);
  if (!s && use && num_averages) *num_averages = held;
  if (!s && use && held)
    lv_info("%s: the moving averages of %d variables stand in for them (Lingvo's eval theta)", prefix, held);
  if (!s && held && !use)
    lv_info("%s holds moving averages of %d variables; task.train.ema_decay is 0: using the raw weights", prefix, held);
  else if (!s && use && !held)
    lv_warn("task.train.ema_decay is %g but %s holds no moving averages: using the raw weights",
            lv_params_float(m->cfg, "task.train.ema_decay"), prefix);
  free(avg);
  free(items);
  return s;
}
