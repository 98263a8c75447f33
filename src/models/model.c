#include "models/model.h"
#include "base/names.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/env.h"
#include "base/file.h"
#include "base/log.h"
#include "base/path.h"
#include "models/task.h"

/* Lingvo's model params classes define their datasets as methods (Train, Dev, Test, and
 * e.g. Librispeech960Base's DevOther / TestOther); lingvoc lists the names its experiments
 * may define. Real: the real-speech test set of asr.bible_tts (scripts/prepare_asr_real.sh). */
static const char *const kDatasets[] = {"Train", "Dev", "Test", "DevOther", "TestOther", "Real"};
static const char *const kCopiedTrainKeys[] = {
    "start_up_delay_steps", "max_steps", "tpu_steps_per_loop", "enqueue_max_steps", "save_interval_seconds",
    "save_interval_steps", "save_max_to_keep", "save_keep_checkpoint_every_n_hours", "summary_interval_steps",
    "async_checkpointing", "checkpoint_finite_check", "ema_decay",
};

void lv_model_options_init(lv_model_options *o) {
  memset(o, 0, sizeof *o);
  o->saver_max_to_keep = -1;
  o->saver_keep_checkpoint_every_n_hours = -1;
}

lv_params *lv_model_default_params(void) {
  lv_tasks_register_all();
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "model", "", "Which model is this (registry key @ experiment file).");
  lv_params *c = lv_params_new();
  lv_params_define_string(c, "mode", "sync", "A string noting the overall training method. Valid values: sync, async.");
  lv_params_define_string(c, "job", "trainer_client", "The role of this job in the training cluster.");
  lv_params_define_int(c, "task", 0, "This process is the task-th task in the job.");
  lv_params_define_string(c, "logdir", "", "The root dir of the training job.");
  lv_params_define_bool(c, "do_eval", false, "Whether to do eval.");
  lv_params_define_int(c, "num_threads", 0, "lingvoc: kernel threads (OpenMP and OpenBLAS); 0 = one per core.");
  lv_params *w = lv_params_new();
  lv_params_define_int(w, "replicas", 1, "The number of tasks.");
  lv_params_define_int(w, "gpus_per_replica", 0, "The number of GPUs per task.");
  lv_params_define_int(w, "devices_per_split", 1, "Devices of one split of the model (model parallelism).");
  lv_params_define_params(c, "worker", w, "The worker job.");
  lv_params_define_params(p, "cluster", c, "Training cluster.");
  lv_params *t = lv_task_base_params("BaseTask");
  lv_params *train = lv_params_new();
  lv_params *tt = lv_params_sub(t, "train");
  for (size_t i = 0; i < LV_ARRAY_LEN(kCopiedTrainKeys); i++) {
    const char *k = kCopiedTrainKeys[i];
    switch (lv_params_kind(tt, k)) {
      case LV_PV_INT:
        if (lv_params_is_set(tt, k)) lv_params_define_int(train, k, lv_params_int(tt, k), lv_params_desc(tt, k));
        else lv_params_define_none(train, k, LV_PV_INT, lv_params_desc(tt, k));
        break;
      case LV_PV_FLOAT: lv_params_define_float(train, k, lv_params_float(tt, k), lv_params_desc(tt, k)); break;
      case LV_PV_BOOL: lv_params_define_bool(train, k, lv_params_bool(tt, k), lv_params_desc(tt, k)); break;
      default: LV_ASSERT(0);
    }
  }
  lv_params_free(t);
  lv_params_define_params(p, "train", train, "Model-level training params, read by the runners (copied from task.train).");
  lv_params_define_params(p, "task", NULL, "The task (set task.cls to a registered task class).");
  lv_params_define_params(p, "input", NULL, "Input generator params of the chosen dataset.");
  lv_params *ds = lv_params_new();
  lv_params_define_params(ds, "train", NULL, "Input params of dataset Train.");
  lv_params_define_params(ds, "dev", NULL, "Input params of dataset Dev.");
  lv_params_define_params(ds, "test", NULL, "Input params of dataset Test.");
  lv_params_define_params(ds, "devother", NULL, "Input params of dataset DevOther.");
  lv_params_define_params(ds, "testother", NULL, "Input params of dataset TestOther.");
  lv_params_define_params(ds, "real", NULL, "Input params of dataset Real.");
  /* asr.synth_en's held-out sets (experiments/asr/synth_en.cfg) */
  lv_params_define_params(ds, "testgeneral", NULL, "Input params of dataset TestGeneral.");
  lv_params_define_params(ds, "heldoutespeak", NULL, "Input params of dataset HeldoutEspeak.");
  lv_params_define_params(ds, "heldoutflite", NULL, "Input params of dataset HeldoutFlite.");
  lv_params_define_params(ds, "heldoutfestival", NULL, "Input params of dataset HeldoutFestival.");
  lv_params_define_params(p, "datasets", ds, "Input params of every dataset (experiment files only).");
  return p;
}

lv_status lv_model_experiments_dir(const char *flag_value, char *out, size_t n) {
  if (flag_value && *flag_value) {
    if (!lv_file_is_dir(flag_value))
      return lv_status_make(LV_ERR_NOT_FOUND, "--experiments_dir=%s is not a directory", flag_value);
    return lv_status_wrap(lv_path_fmt(out, n, "%s", flag_value), "--experiments_dir");
  }
  const char *env = lv_env_get()->experiments;
  if (env && *env && lv_file_is_dir(env)) {
    return lv_status_wrap(lv_path_fmt(out, n, "%s", env), "$LINGVOC_EXPERIMENTS");
  }
  char exe[LV_PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0 && (size_t)len < sizeof exe - 1) {
    exe[len] = 0;
    char cand[LV_PATH_MAX];
    LV_TRY(lv_path_fmt(cand, sizeof cand, "%s/../experiments", dirname(exe)));
    if (lv_file_is_dir(cand)) return lv_path_fmt(out, n, "%s", cand);
  }
  /* A program linking liblingvoc.so: the library's <prefix>/lib/../experiments. */
  Dl_info info;
  if (dladdr((void *)lv_model_experiments_dir, &info) && info.dli_fname && strlen(info.dli_fname) < sizeof exe) {
    snprintf(exe, sizeof exe, "%s", info.dli_fname);
    char cand[LV_PATH_MAX];
    LV_TRY(lv_path_fmt(cand, sizeof cand, "%s/../experiments", dirname(exe)));
    if (lv_file_is_dir(cand)) return lv_path_fmt(out, n, "%s", cand);
  }
  if (lv_file_is_dir("experiments")) return lv_path_fmt(out, n, "experiments");
  return lv_status_make(LV_ERR_NOT_FOUND, "cannot find the experiments directory (tried $LINGVOC_EXPERIMENTS, "
                        "<bin>/../experiments, <liblingvoc.so>/../experiments and ./experiments); pass --experiments_dir");
}

/* Lists "dir.sub.Group" model names under root into buf. */
static void list_models(const char *root, const char *rel, char *buf, size_t n) {
  char *path = NULL;
  LV_ASSERT(asprintf(&path, "%s%s%s", root, *rel ? "/" : "", rel) >= 0);
  DIR *d = opendir(path);
  free(path);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char *sub = NULL, *full = NULL;
    LV_ASSERT(asprintf(&sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >= 0);
    LV_ASSERT(asprintf(&full, "%s/%s", root, sub) >= 0);
    size_t l = strlen(sub);
    char **groups = NULL;
    int ng = 0;
    lv_status s = NULL;
    if (lv_file_is_dir(full)) list_models(root, sub, buf, n);
    else if (l >= 5 && !strcmp(sub + l - 4, ".cfg")) s = lv_params_cfg_groups(full, &groups, &ng);
    free(full);
    if (s || !groups) {
      lv_status_free(s);
      free(sub);
      continue;
    }
    sub[l - 4] = 0;
    for (char *c = sub; *c; c++)
      if (*c == '/') *c = '.';
    for (int i = 0; i < ng; i++) {
      size_t used = strlen(buf);
      if (used + strlen(sub) + strlen(groups[i]) + 4 < n) snprintf(buf + used, n - used, "\n  %s.%s", sub, groups[i]);
    }
    free(groups);
    free(sub);
  }
  closedir(d);
}

static lv_status resolve(const lv_model_options *o, char *path, size_t pn, char *group, size_t gn) {
  if (!o->model || !*o->model)
    return lv_status_make(LV_ERR_INVALID, "--model is required (e.g. --model=image.mnist.LeNet5)");
  char dir[LV_PATH_MAX];
  LV_TRY(lv_model_experiments_dir(o->experiments_dir, dir, sizeof dir));
  const char *dot = strrchr(o->model, '.');
  if (!dot || dot == o->model || !dot[1]) {
    char known[8192] = "";
    list_models(dir, "", known, sizeof known);
    return lv_status_make(LV_ERR_INVALID, "--model=%s: expected <task>.<file>.<Group>; known models:%s", o->model, known);
  }
  char rel[LV_PATH_MAX];
  LV_TRY(lv_status_wrap(lv_path_fmt(rel, sizeof rel, "%.*s", (int)(dot - o->model), o->model), "--model"));
  for (char *c = rel; *c; c++)
    if (*c == '.') *c = '/';
  LV_TRY(lv_status_wrap(lv_path_fmt(path, pn, "%s/%s.cfg", dir, rel), "--model=%s", o->model));
  if (strlen(dot + 1) >= gn)
    return lv_status_make(LV_ERR_INVALID, "--model=%s: the group name is longer than %zu bytes", o->model, gn - 1);
  memcpy(group, dot + 1, strlen(dot + 1) + 1);
  char **groups = NULL;
  int ng = 0;
  bool found = false;
  if (lv_file_exists(path)) {
    LV_TRY(lv_params_cfg_groups(path, &groups, &ng));
    for (int i = 0; i < ng; i++) found |= !strcmp(groups[i], group);
    free(groups);
  }
  if (!found) {
    char known[8192] = "";
    list_models(dir, "", known, sizeof known);
    return lv_status_make(LV_ERR_NOT_FOUND, "model %s not found (looked for group %s in %s); known models:%s",
                          o->model, group, path, known);
  }
  return NULL;
}

static lv_status copy_field(const lv_params *from, lv_params *to, const char *k) {
  if (!lv_params_is_set(from, k)) return lv_params_set_none(to, k);
  switch (lv_params_kind(from, k)) {
    case LV_PV_INT: return lv_params_set_int(to, k, lv_params_int(from, k));
    case LV_PV_FLOAT: return lv_params_set_float(to, k, lv_params_float(from, k));
    case LV_PV_BOOL: return lv_params_set_bool(to, k, lv_params_bool(from, k));
    default: LV_ASSERT(0);
  }
  return NULL;
}

static bool same_value(const lv_params *a, const lv_params *b, const char *k) {
  if (lv_params_is_set(a, k) != lv_params_is_set(b, k)) return false;
  if (!lv_params_is_set(a, k)) return true;
  switch (lv_params_kind(a, k)) {
    case LV_PV_INT: return lv_params_int(a, k) == lv_params_int(b, k);
    case LV_PV_FLOAT: return lv_params_float(a, k) == lv_params_float(b, k);
    case LV_PV_BOOL: return lv_params_bool(a, k) == lv_params_bool(b, k);
    default: return false;
  }
}

/* What the runners read through getters that stop the program on a missing key must be
 * there: an override can set a group to NoneType, or swap task for another class's params
 * (task.cls: 'Adam'). where: the file or flag that set them. */
static bool is_group(const lv_params *p, const char *key) {
  return lv_params_has(p, key) && lv_params_kind(p, key) == LV_PV_PARAMS && lv_params_sub(p, key);
}

static lv_status need_groups(const lv_params *p, const char *const *keys, size_t n, const char *where) {
  for (size_t i = 0; i < n; i++)
    if (!is_group(p, keys[i]))
      return lv_status_make(LV_ERR_INVALID, "%s: %s must be a params group, not None", where, keys[i]);
  return NULL;
}

static lv_status check_structure(const lv_params *p, const char *where) {
  static const char *const kGroups[] = {"cluster", "cluster.worker", "train", "task"};
  LV_TRY(need_groups(p, kGroups, LV_ARRAY_LEN(kGroups), where));
  const char *cls = lv_params_has(p, "task.cls") ? lv_params_str(p, "task.cls") : "";
  lv_tasks_register_all();
  if (!lv_task_class_find(cls))
    return lv_status_make(LV_ERR_INVALID, "%s: task.cls is '%s', which is not a task class (e.g. "
                          "'mt.model.TransformerModel', 'lm.model.LanguageModel', 'asr.model.AsrModel')", where, cls);
  static const char *const kTaskGroups[] = {"task.train", "task.eval"};
  return need_groups(p, kTaskGroups, LV_ARRAY_LEN(kTaskGroups), where);
}

static lv_status load(const lv_model_options *o, lv_params **out, char *path, size_t pn) {
  char group[256];
  LV_TRY(resolve(o, path, pn, group, sizeof group));
  lv_params *p = lv_model_default_params();
  lv_status s = lv_params_load_cfg(p, path, group);
  if (!s && !lv_params_sub(p, "task"))
    s = lv_status_make(LV_ERR_INVALID, "%s: group %s sets no task (add task: { cls = \"...\"; ... };)", path, group);
  if (!s) s = check_structure(p, path);
  if (s) {
    lv_params_free(p);
    return s;
  }
  /* SingleTaskModel.Params(task): the runners read model-level train.*; take the task's
   * value for every field the experiment did not set at model level. */
  lv_params *defaults = lv_model_default_params();
  lv_params *mt = lv_params_sub(p, "train"), *dt = lv_params_sub(defaults, "train");
  const lv_params *tt = lv_params_sub(p, "task.train");
  for (size_t i = 0; i < LV_ARRAY_LEN(kCopiedTrainKeys) && !s; i++)
    if (same_value(mt, dt, kCopiedTrainKeys[i])) s = copy_field(tt, mt, kCopiedTrainKeys[i]);
  lv_params_free(defaults);
  if (s) {
    lv_params_free(p);
    return s;
  }
  *out = p;
  return NULL;
}

/* "Train" -> "datasets.train". */
static void dataset_key(const char *dataset, char *key, size_t n) {
  char l[32];
  lv_str_lower(dataset, l, sizeof l);
  snprintf(key, n, "datasets.%s", l);
}

/* A dataset name as --dataset takes it: a letter, then letters, digits or '_', shorter
 * than LV_DATASET_NAME_MAX (so "Train.tokenizer" is no dataset, though it names a group). */
static bool dataset_name_ok(const char *ds) {
  size_t n = strlen(ds);
  if (n == 0 || n >= LV_DATASET_NAME_MAX || !isalpha((unsigned char)ds[0])) return false;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)ds[i]) && ds[i] != '_') return false;
  return true;
}

/* The datasets an experiment defines (the groups under `datasets`, as Lingvo's are the
 * methods of its params class): Lingvo's names first, in kDatasets order and spelling,
 * then the experiment's others as written; returns the count (at most cap). */
static int defined_datasets(const lv_params *p, char (*names)[LV_DATASET_NAME_MAX], int cap) {
  int n = 0;
  for (size_t i = 0; i < LV_ARRAY_LEN(kDatasets) && n < cap; i++) {
    char key[64];
    dataset_key(kDatasets[i], key, sizeof key);
    if (is_group(p, key)) snprintf(names[n++], LV_DATASET_NAME_MAX, "%s", kDatasets[i]);
  }
  const lv_params *d = lv_params_sub(p, "datasets");
  for (int i = 0; d && i < lv_params_num_keys(d) && n < cap; i++) {
    const char *k = lv_params_key(d, i);
    bool lingvo = false;
    for (size_t j = 0; j < LV_ARRAY_LEN(kDatasets); j++) lingvo |= !strcasecmp(k, kDatasets[j]);
    if (!lingvo && dataset_name_ok(k) && is_group(d, k)) snprintf(names[n++], LV_DATASET_NAME_MAX, "%s", k);
  }
  return n;
}

lv_status lv_model_datasets(const lv_model_options *o, char (*names)[LV_DATASET_NAME_MAX], int cap, int *n) {
  lv_params *p = NULL;
  char path[4096];
  LV_TRY(load(o, &p, path, sizeof path));
  *n = defined_datasets(p, names, cap);
  lv_params_free(p);
  return NULL;
}

/* key = value (a flag's) when the override (which changed key from `before`) had set
 * something else: an error for --model_params_override (both were typed for this run),
 * a warning for a params file (another run's dump names its own logdir). */
static lv_status own_string(lv_params *p, const char *key, const char *before, const char *value, const char *flag,
                            const char *src, bool from_file) {
  const char *cur = lv_params_str(p, key);
  if (cur && *cur && strcmp(cur, value) && strcmp(cur, before)) {
    if (!from_file)
      return lv_status_make(LV_ERR_INVALID, "%s sets %s to '%s', but %s owns it (%s=%s): set it with %s only",
                            src, key, cur, flag, flag, value, flag);
    lv_warn("%s sets %s to '%s', but %s owns it: using '%s'", src, key, cur, flag, value);
  }
  return lv_params_set_string(p, key, value);
}

/* The dataset's input params win over a params file's input.* (takes before). */
static lv_status own_input(lv_params *p, lv_params *before, const char *dataset, const char *src) {
  char *a = lv_params_to_text(before), *b = lv_params_to_text(lv_params_sub(p, "input"));
  if (strcmp(a, b)) {
    /* Name the first few lines that differ. */
    char diff[1024] = "";
    int nd = 0;
    for (char *save = NULL, *line = strtok_r(b, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      char *needle = NULL, *hay = NULL;
      LV_ASSERT(asprintf(&needle, "\n%s\n", line) >= 0 && asprintf(&hay, "\n%s\n", a) >= 0);
      bool same = strstr(hay, needle) != NULL;
      free(hay);
      free(needle);
      if (same) continue;
      if (nd++ < 4) {
        strncat(diff, "\n  input.", sizeof diff - strlen(diff) - 1);
        strncat(diff, line, sizeof diff - strlen(diff) - 1);
      }
    }
    lv_warn("%s sets input params that differ from dataset %s's; --dataset owns input.*, so %s's are used "
            "(use --model_params_override for deliberate input changes):%s%s", src, dataset, dataset, diff,
            nd > 4 ? "\n  ..." : "");
  }
  free(a);
  free(b);
  return lv_params_set_params(p, "input", before);
}

lv_status lv_model_params_build(const lv_model_options *o, lv_params **out) {
  *out = NULL;
  lv_params *p = NULL;
  char path[4096];
  LV_TRY(load(o, &p, path, sizeof path));
  lv_status s = NULL;
  char key[64], avail[512];
  char defined[LV_MAX_DATASETS][LV_DATASET_NAME_MAX];
  const char *defined_ptr[LV_MAX_DATASETS];
  const char *ds = o->dataset ? o->dataset : "Train";
  /* A name, not a key path: "Train.cls" or "Train.tokenizer" is no dataset. */
  bool known = dataset_name_ok(ds);
  dataset_key(ds, key, sizeof key);
  int nd = defined_datasets(p, defined, LV_MAX_DATASETS);
  for (int i = 0; i < nd; i++) defined_ptr[i] = defined[i];
  lv_names_join(defined_ptr, nd, ", ", avail, sizeof avail);
  if (!known || !is_group(p, key))
    s = lv_status_make(LV_ERR_NOT_FOUND, "model %s has no dataset %s; available datasets are: [%s]", o->model,
                       o->dataset ? o->dataset : "Train", avail);
  if (!s) s = lv_params_set_params(p, "input", lv_params_copy(lv_params_sub(p, key)));
  if (!s) lv_params_delete(p, "datasets");
  char *model_str = NULL;
  LV_ASSERT(asprintf(&model_str, "%s@%s", o->model, path) >= 0);
  if (!s) s = lv_params_set_string(p, "model", model_str);
  int64_t task_max_steps = lv_params_int(p, "task.train.max_steps");
  /* Lingvo applies the overrides first and the flags after them: a flag owns the params
   * it names (an inspect_params dump of another run must not move this run to that
   * run's logdir or swap in another dataset's input). */
  lv_params *input_before = s ? NULL : lv_params_copy(lv_params_sub(p, "input"));
  static const char *const kOwned[] = {"model", "cluster.logdir", "cluster.mode", "cluster.job"};
  char *before[4] = {0};
  for (int i = 0; i < 4 && !s; i++) before[i] = strdup(lv_params_str(p, kOwned[i]));
  if (!s) s = lv_params_apply_overrides(p, o->params_override, o->params_file_override);
  if (!s && o->flag_params && *o->flag_params) s = lv_params_from_text(p, o->flag_params, "<flags>");
  bool from_file = o->params_file_override && *o->params_file_override;
  const char *src = from_file ? "--model_params_file_override" : "--model_params_override";
  if (!s) s = check_structure(p, src);
  static const char *const kInput[] = {"input"};
  if (!s) s = need_groups(p, kInput, 1, src);
  if (!s) s = own_string(p, "model", before[0], model_str, "--model", src, from_file);
  if (!s && o->logdir && *o->logdir)
    s = own_string(p, "cluster.logdir", before[1], o->logdir, "--logdir", src, from_file);
  if (!s && o->mode && *o->mode) s = own_string(p, "cluster.mode", before[2], o->mode, "--mode", src, from_file);
  if (!s && o->job && *o->job) s = own_string(p, "cluster.job", before[3], o->job, "--job", src, from_file);
  for (int i = 0; i < 4; i++) free(before[i]);
  free(model_str);
  if (!s && o->job && (!strncmp(o->job, "evaler", 6) || !strncmp(o->job, "decoder", 7)))
    s = lv_params_set_bool(p, "cluster.do_eval", true);
  if (!s && from_file) s = own_input(p, input_before, o->dataset ? o->dataset : "Train", src);
  else lv_params_free(input_before);
  if (!s && o->num_threads > 0) s = lv_params_set_int(p, "cluster.num_threads", o->num_threads);
  if (!s && o->worker_replicas > 0) s = lv_params_set_int(p, "cluster.worker.replicas", o->worker_replicas);
  if (!s && o->gpus_per_replica > 0) s = lv_params_set_int(p, "cluster.worker.gpus_per_replica", o->gpus_per_replica);
  if (!s && o->saver_max_to_keep >= 0) s = lv_params_set_int(p, "train.save_max_to_keep", o->saver_max_to_keep);
  if (!s && o->saver_keep_checkpoint_every_n_hours >= 0)
    s = lv_params_set_float(p, "train.save_keep_checkpoint_every_n_hours", o->saver_keep_checkpoint_every_n_hours);
  if (!s && lv_params_int(p, "task.train.max_steps") != task_max_steps &&
      lv_params_int(p, "task.train.max_steps") != lv_params_int(p, "train.max_steps"))
    lv_warn("task.train.max_steps (%lld) differs from train.max_steps (%lld): the runners use train.max_steps, "
            "as Lingvo's do; override train.max_steps", (long long)lv_params_int(p, "task.train.max_steps"),
            (long long)lv_params_int(p, "train.max_steps"));
  if (s) {
    lv_params_free(p);
    return s;
  }
  lv_params_freeze(p);
  *out = p;
  return NULL;
}

lv_status lv_model_params_from_text(const char *text, const char *source, lv_params **out) {
  *out = NULL;
  lv_params *p = lv_model_default_params();
  lv_params_delete(p, "datasets"); /* as lv_model_params_build leaves it: the dataset's are input.* */
  lv_status s = lv_params_from_text(p, text, source);
  if (s) {
    lv_params_free(p);
    return s;
  }
  *out = p;
  return NULL;
}
