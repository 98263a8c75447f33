/* An experiment's scorers: see scorers.h. */
#include "runners/scorers.h"

#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"
#include "base/path.h"
#include "runners/checkpointer.h"
#include "search/lm_fusion.h"
#include "models/model.h"
#include "runners/instance.h"
#include "runners/model_export.h"

struct lv_scorers {
  const lv_scorer **list;
  int n, cap;
  /* task.decoder.fusion's LM (NULL: none): its params, instance and scorer. */
  lv_params *lm_cfg;
  lv_instance *lm;
  lv_lm_fusion fusion;
  lv_model_file *lm_file;           /* lm_model_file's, else NULL */
  char lm_assets[LV_PATH_MAX];      /* its assets (the LM's tokenizer), removed at close */
};

void lv_scorers_share(lv_scorers *dst, lv_scorers *src) {
  if (dst && src && dst->lm && src->lm) (void)lv_varstore_share_values(dst->lm->vs, src->lm->vs);
}

static void push(lv_scorers *d, const lv_scorer *sc) {
  if (d->n == d->cap) {
    d->cap = d->cap ? 2 * d->cap : 4;
    d->list = realloc(d->list, sizeof *d->list * (size_t)d->cap);
    LV_ASSERT(d->list);
  }
  d->list[d->n++] = sc;
}

/* The experiments directory cfg's model was read from ("model" is key@<dir>/<a>/<b>.cfg
 * for key a.b.Group), or "" when it cannot be told. */
static void experiments_dir_of(const lv_params *cfg, char *dir, size_t n) {
  const char *model = lv_params_str(cfg, "model"), *at = strchr(model, '@'), *dot = NULL;
  dir[0] = 0;
  if (!at) return;
  for (const char *c = model; c < at; c++)
    if (*c == '.') dot = c;
  if (!dot) return;
  char rel[LV_PATH_MAX];
  int rn = snprintf(rel, sizeof rel, "/%.*s.cfg", (int)(dot - model), model);
  if (rn < 0 || (size_t)rn >= sizeof rel) return;
  for (char *c = rel; *c; c++)
    if (*c == '.' && strcmp(c, ".cfg")) *c = '/';
  const char *path = at + 1;
  size_t pl = strlen(path), rl = strlen(rel);
  if (pl > rl && !strcmp(path + pl - rl, rel) && pl - rl < n) snprintf(dir, n, "%.*s", (int)(pl - rl), path);
}

/* The checkpoint prefix of task.decoder.fusion fp: lm_checkpoint (a prefix, or a
 * directory's latest), else the latest in <lm_logdir>/train. */
static lv_status lm_checkpoint(const lv_params *fp, char *prefix, size_t n) {
  const char *ck = lv_params_str(fp, "lm_checkpoint"), *logdir = lv_params_str(fp, "lm_logdir");
  char dir[LV_PATH_MAX];
  if (!*ck) {
    if (!*logdir)
      return lv_status_make(LV_ERR_INVALID, "task.decoder.fusion: set lm_logdir (the LM trainer's --logdir) or "
                            "lm_checkpoint (a checkpoint prefix of the LM %s)", lv_params_str(fp, "lm_model"));
    LV_TRY(lv_status_wrap(lv_path_fmt(dir, sizeof dir, "%s/train", logdir), "task.decoder.fusion.lm_logdir"));
    ck = dir;
  }
  if (lv_file_is_dir(ck)) {
    int64_t step;
    bool found = false;
    LV_TRY(lv_checkpoint_latest(ck, prefix, n, &step, &found));
    /* lm_checkpoint naming the LM's log directory: its latest in train/ */
    if (!found && ck != dir && lv_path_fmt(dir, sizeof dir, "%s/train", ck) == NULL && lv_file_is_dir(dir)) {
      ck = dir;
      LV_TRY(lv_checkpoint_latest(ck, prefix, n, &step, &found));
    }
    if (!found)
      return lv_status_make(LV_ERR_NOT_FOUND, "task.decoder.fusion: no checkpoint in %s (train the LM first: "
                            "bin/trainer --model=%s --logdir=...)", ck, lv_params_str(fp, "lm_model"));
    return NULL;
  }
  if (ck == dir)
    return lv_status_make(LV_ERR_NOT_FOUND, "task.decoder.fusion.lm_logdir: %s does not exist (train the LM first: "
                          "bin/trainer --model=%s --logdir=%s)", dir, lv_params_str(fp, "lm_model"), logdir);
  return lv_status_wrap(lv_path_fmt(prefix, n, "%s", ck), "task.decoder.fusion.lm_checkpoint");
}

/* cfg's task.decoder.fusion params, or NULL when it has none (a task without beam search). */
static const lv_params *fusion_params(const lv_params *cfg) {
  const lv_params *tp = lv_params_sub(cfg, "task");
  const lv_params *dp = tp && lv_params_has(tp, "decoder") ? lv_params_sub(tp, "decoder") : NULL;
  const lv_params *fp = dp && lv_params_has(dp, "fusion") ? lv_params_sub(dp, "fusion") : NULL;
  return fp && lv_params_has(fp, "lm_model") ? fp : NULL;
}

lv_status lv_scorers_fusion_lm(const lv_params *cfg, lv_params **lm_cfg, char *prefix, size_t n) {
  *lm_cfg = NULL;
  prefix[0] = 0;
  const lv_params *fp = fusion_params(cfg);
  if (!fp || !*lv_params_str(fp, "lm_model") || *lv_params_str(fp, "lm_model_file")) return NULL;
  char exp_dir[LV_PATH_MAX];
  experiments_dir_of(cfg, exp_dir, sizeof exp_dir);
  lv_model_options o;
  lv_model_options_init(&o);
  o.model = lv_params_str(fp, "lm_model");
  o.dataset = "Train";
  o.experiments_dir = *exp_dir ? exp_dir : NULL;
  o.params_override = lv_params_str(fp, "lm_params_override");
  /* The instance writes nothing; its logdir only names where the checkpoint came from. */
  o.logdir = *lv_params_str(fp, "lm_logdir") ? lv_params_str(fp, "lm_logdir") : lv_params_str(cfg, "cluster.logdir");
  o.mode = "sync";
  o.job = "decoder";
  const int64_t gpus = lv_params_int(cfg, "cluster.worker.gpus_per_replica");
  if (gpus > 0) o.gpus_per_replica = gpus;
  lv_params *p = NULL;
  lv_status s = lv_status_wrap(lv_model_params_build(&o, &p), "task.decoder.fusion.lm_model");
  if (!s) s = lv_lm_fusion_check_model(p, o.model);
  if (!s) s = lm_checkpoint(fp, prefix, n);
  if (s) {
    lv_params_free(p);
    return s;
  }
  *lm_cfg = p;
  return NULL;
}

/* task.decoder.fusion.lm_model_file: the LM's params and weights from a model file (its
 * tokenizer's files in a private directory), with lm_params_override and the model's
 * thread count applied. */
static lv_status open_fusion_file(const lv_params *cfg, const lv_params *fp, lv_scorers *d) {
  const char *path = lv_params_str(fp, "lm_model_file");
  if (*lv_params_str(fp, "lm_logdir") || *lv_params_str(fp, "lm_checkpoint"))
    return lv_status_make(LV_ERR_INVALID, "task.decoder.fusion: lm_model_file (%s) and lm_logdir/lm_checkpoint both "
                          "set: the LM comes from one of them", path);
  LV_TRY(lv_status_wrap(lv_model_file_read(path, &d->lm_file), "task.decoder.fusion.lm_model_file"));
  LV_TRY(lv_model_file_assets_dir(d->lm_file, d->lm_assets, sizeof d->lm_assets));
  LV_TRY(lv_status_wrap(lv_model_file_params(d->lm_file, d->lm_assets, lv_params_str(fp, "lm_params_override"), NULL,
                                             NULL, lv_params_int(cfg, "cluster.num_threads"), &d->lm_cfg),
                        "task.decoder.fusion.lm_model_file"));
  return lv_status_wrap(lv_lm_fusion_check_model(d->lm_cfg, path), "task.decoder.fusion.lm_model_file");
}

/* task.decoder.fusion: builds the LM experiment it names beside the model (or the model
 * file's LM), restores its checkpoint and makes its scorer (search/lm_fusion.h), on the
 * model's device. */
static lv_status open_fusion(const lv_params *cfg, const lv_task *t, lv_scorers *d) {
  const lv_params *fp = fusion_params(cfg);
  if (!fp) return NULL;
  const char *file = lv_params_str(fp, "lm_model_file");
  if (!*lv_params_str(fp, "lm_model") && !*file) {
    if (lv_params_float(fp, "lm_weight") != 0 || *lv_params_str(fp, "lm_logdir") || *lv_params_str(fp, "lm_checkpoint"))
      lv_warn("task.decoder.fusion.lm_model is empty: decoding without shallow fusion (its lm_weight, lm_logdir and "
              "lm_checkpoint are not used)");
    return NULL;
  }
  const char *name = *lv_params_str(fp, "lm_model") ? lv_params_str(fp, "lm_model") : file;
  char prefix[LV_PATH_MAX];
  if (*file) {
    LV_TRY(open_fusion_file(cfg, fp, d));
    snprintf(prefix, sizeof prefix, "%s", file);
  } else {
    LV_TRY(lv_scorers_fusion_lm(cfg, &d->lm_cfg, prefix, sizeof prefix));
  }
  LV_TRY(lv_status_wrap(d->lm_file ? lv_instance_create_for_file(d->lm_cfg, d->lm_file, &d->lm)
                                   : lv_instance_create(d->lm_cfg, false, lv_input_no_shard(), &d->lm),
                        "task.decoder.fusion: the LM %s", name));
  LV_TRY(lv_status_wrap(d->lm_file ? lv_instance_restore_model_file(d->lm, d->lm_file)
                                   : lv_instance_restore(d->lm, prefix, NULL),
                        "task.decoder.fusion: the LM %s", name));
  d->fusion = (lv_lm_fusion){.lm = d->lm->task, .g = d->lm->graph, .weight = (float)lv_params_float(fp, "lm_weight")};
  LV_TRY(lv_lm_fusion_check(t, cfg, d->lm_cfg, name, &d->fusion));
  push(d, &d->fusion.scorer);
  lv_info("shallow fusion: %s (%s, step %lld) with lm_weight %g", name, prefix, (long long)lv_instance_step(d->lm),
          d->fusion.weight);
  return NULL;
}

lv_status lv_scorers_open(const lv_params *cfg, lv_task *t, lv_scorers **out) {
  *out = calloc(1, sizeof **out);
  LV_ASSERT(*out);
  LV_TRY(open_fusion(cfg, t, *out));
  return lv_task_set_scorers(t, (*out)->list, (*out)->n, "task.decoder.fusion");
}

lv_status lv_scorers_add(lv_scorers *s, lv_task *t, const lv_scorer *sc) {
  push(s, sc);
  return lv_task_set_scorers(t, s->list, s->n, sc->name);
}

int lv_scorers_count(const lv_scorers *s) { return s ? s->n : 0; }

void lv_scorers_close(lv_scorers *s, lv_task *t) {
  if (t) lv_status_free(lv_task_set_scorers(t, NULL, 0, ""));
  if (!s) return;
  lv_instance_destroy(s->lm);
  lv_params_free(s->lm_cfg);
  lv_model_file_free(s->lm_file);
  if (s->lm_assets[0]) lv_model_file_assets_remove(s->lm_assets);
  free(s->list);
  free(s);
}
