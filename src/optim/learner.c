#include "optim/learner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_dev.h"

lv_learner_config lv_learner_defaults(void) {
  lv_learner_config c;
  memset(&c, 0, sizeof c);
  c.scale_gradients = true;
  c.max_consecutive_skipped_steps = 100;
  return c;
}

lv_grad_norm_tracker_config lv_grad_norm_tracker_defaults(void) {
  lv_grad_norm_tracker_config t = {0.995, 1e-2, 4.0, 0.0};
  return t;
}

lv_status lv_learner_config_validate(const lv_learner_config *c) {
  if (!(c->learning_rate >= 0) || isinf(c->learning_rate))
    return lv_status_make(LV_ERR_INVALID, "learning_rate: must be a finite value >= 0, found %g",
                          c->learning_rate);
  if (c->has_l2 && !(c->l2_regularizer_weight >= 0))
    return lv_status_make(LV_ERR_INVALID, "l2_regularizer_weight: must be >= 0, found %g",
                          c->l2_regularizer_weight);
  if (c->has_l1 && !(c->l1_regularizer_weight >= 0))
    return lv_status_make(LV_ERR_INVALID, "l1_regularizer_weight: must be >= 0, found %g",
                          c->l1_regularizer_weight);
  if (!(c->clip_gradient_norm_to_value >= 0))
    return lv_status_make(LV_ERR_INVALID, "clip_gradient_norm_to_value: must be >= 0, found %g",
                          c->clip_gradient_norm_to_value);
  if (!(c->clip_gradient_single_norm_to_value >= 0))
    return lv_status_make(LV_ERR_INVALID,
                          "clip_gradient_single_norm_to_value: must be >= 0, found %g",
                          c->clip_gradient_single_norm_to_value);
  if (!(c->grad_norm_to_clip_to_zero >= 0))
    return lv_status_make(LV_ERR_INVALID, "grad_norm_to_clip_to_zero: must be >= 0, found %g",
                          c->grad_norm_to_clip_to_zero);
  if (c->has_grad_norm_tracker) {
    const lv_grad_norm_tracker_config *t = &c->grad_norm_tracker;
    if (!(t->decay >= 0 && t->decay < 1))
      return lv_status_make(LV_ERR_INVALID, "grad_norm_tracker.decay: must be in [0, 1), found %g",
                            t->decay);
    if (!(t->grad_norm_lower_cap > 0))
      return lv_status_make(LV_ERR_INVALID,
                            "grad_norm_tracker.grad_norm_lower_cap: must be > 0, found %g",
                            t->grad_norm_lower_cap);
    if (!(t->clip_threshold > 0))
      return lv_status_make(LV_ERR_INVALID,
                            "grad_norm_tracker.clip_threshold: must be > 0, found %g",
                            t->clip_threshold);
    if (!(t->grad_norm_clip_cap_min >= 0))
      return lv_status_make(LV_ERR_INVALID,
                            "grad_norm_tracker.grad_norm_clip_cap_min: must be >= 0, found %g",
                            t->grad_norm_clip_cap_min);
  }
  if (c->accum_steps < 0)
    return lv_status_make(LV_ERR_INVALID, "optimizer.accum_steps: must be >= 1, found %lld", (long long)c->accum_steps);
  if (!(c->max_group_gradient_norm >= 0) || isinf(c->max_group_gradient_norm))
    return lv_status_make(LV_ERR_INVALID, "max_lstm_gradient_norm: must be a finite value >= 0 (0: off), found %g",
                          c->max_group_gradient_norm);
  if (c->max_consecutive_skipped_steps < 0)
    return lv_status_make(LV_ERR_INVALID, "max_consecutive_skipped_steps: must be >= 0 (0: never stop), found %lld",
                          (long long)c->max_consecutive_skipped_steps);
  if (c->clip_gradient_single_norm_to_value != 0 && c->clip_gradient_norm_to_value != 0)
    return lv_status_make(LV_ERR_INVALID,
                          "clip_gradient_single_norm_to_value: Cannot use "
                          "clip_gradient_single_norm_to_value=%f and "
                          "clip_gradient_norm_to_value=%f.",
                          c->clip_gradient_single_norm_to_value, c->clip_gradient_norm_to_value);
  return NULL;
}

/* The per-variable sums a step reads back, in one copy: [SUM_COUNT][n] doubles. */
enum { SUM_L2, SUM_L1, SUM_GRAD_SQ, SUM_VALUE_SQ, SUM_COUNT };

struct lv_learner {
  lv_learner_config c;
  lv_schedule *schedule;
  lv_optimizer *opt;
  const lv_backend *be; /* the optimizer's */
  const lv_kernel_table *k;
  lv_kctx *ctx;
  int n;             /* trainable variables */
  lv_learner_var *v; /* [n], names owned */
  float **values;    /* [n], for the optimizer */
  const float **grads;
  double *dev_sums;  /* [SUM_COUNT * n] device memory, written by optim_sum */
  double *sums;      /* [SUM_COUNT * n] its host copy */
  double *scratch;   /* device memory: optim_sum's per-block (optim_lp_add_rows' per-row) partials */
  double *gnorm, *vnorm; /* [n], last step's per-variable norms */
  int64_t nan_inf_steps, skipped_steps, consecutive_skipped;
  /* GradNormTracker variables (float32, as Lingvo keeps them). */
  float log_mean, log_mean_squared, total_weight, total_rejections;
  /* The update check: every variable value, then every optimizer slot. */
  int nchk;
  float **chk;         /* [nchk] device memory checked after an update */
  int64_t *chk_n;      /* [nchk] */
  const char **chk_name; /* [nchk] borrowed from l->v / the optimizer */
  float *backup;       /* device memory: their values before the update, concatenated */
  double *dev_chk_sums, *chk_sums; /* [nchk] sums of squares after the update */
  /* accum_steps > 1: per trainable variable, the gradient sum (device), its host copy
   * and checkpoint name. */
  float **acc, **acc_host;
  char **acc_name;
};

static const char *const k_tracker_names[4] = {"log_mean", "log_mean_squared", "total_weight",
                                               "total_rejections"};

/* layers.GradNormTracker.FProp in float32: returns 1 to keep the step, 0 to reject it,
 * and updates the moving statistics (not on NaN steps). */
static float tracker_step(lv_learner *l, double grad_norm, bool has_nan) {
  const lv_grad_norm_tracker_config *p = &l->c.grad_norm_tracker;
  const float decay = (float)p->decay;
  float norm = fmaxf((float)grad_norm, (float)p->grad_norm_lower_cap);
  float tw = fmaxf(l->total_weight, 1e-6f);
  float mean = l->log_mean / tw;
  float var = l->log_mean_squared / tw - mean * mean;
  float std = sqrtf(fmaxf(var, 1e-6f));
  float log_norm = logf(norm + 1.0f);
  float cap = mean + std * (float)p->clip_threshold;
  cap = fmaxf(cap, logf((float)p->grad_norm_clip_cap_min + 1.0f));
  bool trigger = (log_norm > cap && l->total_weight > 0.75f) || has_nan;
  float capped = fminf(log_norm, cap);
  if (!has_nan) {
    l->log_mean += (1.0f - decay) * (capped - l->log_mean);
    l->log_mean_squared += (1.0f - decay) * (capped * capped - l->log_mean_squared);
    l->total_weight += (1.0f - decay) * (1.0f - l->total_weight);
  }
  l->total_rejections += trigger ? 1.0f : 0.0f;
  return trigger ? 0.0f : 1.0f;
}

int lv_learner_num_state(const lv_learner *l) { return l->c.has_grad_norm_tracker ? 4 : 0; }

void lv_learner_state(lv_learner *l, int i, const char **name, float **value) {
  LV_ASSERT(l->c.has_grad_norm_tracker && i >= 0 && i < 4);
  float *v[4] = {&l->log_mean, &l->log_mean_squared, &l->total_weight, &l->total_rejections};
  if (name) *name = k_tracker_names[i];
  if (value) *value = v[i];
}

int lv_learner_num_vars(const lv_learner *l) { return l->n; }
const char *lv_learner_var_name(const lv_learner *l, int i) {
  LV_ASSERT(i >= 0 && i < l->n);
  return l->v[i].name;
}
void lv_learner_var_norms(const lv_learner *l, int i, double *grad_norm, double *var_norm) {
  LV_ASSERT(i >= 0 && i < l->n);
  if (grad_norm) *grad_norm = l->gnorm[i];
  if (var_norm) *var_norm = l->vnorm[i];
}

void lv_learner_free(lv_learner *l) {
  if (!l) return;
  for (int i = 0; i < l->n; i++) free((char *)l->v[i].name);
  free(l->v);
  free(l->values);
  free(l->grads);
  free(l->gnorm);
  free(l->vnorm);
  free(l->sums);
  free(l->chk);
  free(l->chk_n);
  free(l->chk_name);
  free(l->chk_sums);
  for (int i = 0; l->acc && i < l->n; i++) {
    lv_optim_free(l->be, l->acc[i]);
    free(l->acc_host[i]);
    free(l->acc_name[i]);
  }
  free(l->acc);
  free(l->acc_host);
  free(l->acc_name);
  if (l->be) {
    lv_optim_free(l->be, l->dev_sums);
    lv_optim_free(l->be, l->scratch);
    lv_optim_free(l->be, l->backup);
    lv_optim_free(l->be, l->dev_chk_sums);
  }
  lv_schedule_free(l->schedule);
  lv_optimizer_free(l->opt);
  free(l);
}

/* The list of what an update writes (values, then slots) and room for their copies. */
static lv_status alloc_update_check(lv_learner *l) {
  if (!l->c.scale_gradients) return NULL; /* no checks, no copy */
  int nslot = lv_optimizer_num_slot_vars(l->opt);
  l->nchk = l->n + nslot;
  l->chk = calloc((size_t)l->nchk + 1, sizeof *l->chk);
  l->chk_n = calloc((size_t)l->nchk + 1, sizeof *l->chk_n);
  l->chk_name = calloc((size_t)l->nchk + 1, sizeof *l->chk_name);
  l->chk_sums = calloc((size_t)l->nchk + 1, sizeof *l->chk_sums);
  l->dev_chk_sums = lv_optim_alloc(l->be, ((size_t)l->nchk + 1) * sizeof(double));
  if (!l->chk || !l->chk_n || !l->chk_name || !l->chk_sums || !l->dev_chk_sums)
    return lv_status_make(LV_ERR_RESOURCE, "out of memory creating the learner");
  size_t total = 0;
  for (int i = 0; i < l->n; i++) {
    l->chk[i] = l->v[i].value;
    l->chk_n[i] = l->v[i].n;
    l->chk_name[i] = l->v[i].name;
    total += (size_t)l->v[i].n;
  }
  for (int i = 0; i < nslot; i++) {
    int k = l->n + i;
    lv_optimizer_slot_var(l->opt, i, &l->chk_name[k], &l->chk[k], &l->chk_n[k]);
    total += (size_t)l->chk_n[k];
  }
  l->backup = lv_optim_alloc(l->be, (total + 1) * sizeof(float));
  if (!l->backup)
    return lv_status_make(LV_ERR_RESOURCE, "out of memory for the update check's copy of the variables and slots "
                          "(%zu floats)", total);
  return NULL;
}

static lv_status alloc_accumulators(lv_learner *l) {
  l->acc = calloc((size_t)l->n + 1, sizeof *l->acc);
  l->acc_host = calloc((size_t)l->n + 1, sizeof *l->acc_host);
  l->acc_name = calloc((size_t)l->n + 1, sizeof *l->acc_name);
  if (!l->acc || !l->acc_host || !l->acc_name) return lv_status_make(LV_ERR_RESOURCE, "out of memory creating the learner");
  for (int i = 0; i < l->n; i++) {
    size_t bytes = sizeof(float) * (size_t)(l->v[i].n > 0 ? l->v[i].n : 1);
    l->acc[i] = lv_optim_alloc(l->be, bytes);
    l->acc_host[i] = calloc(1, bytes);
    if (!l->acc[i] || !l->acc_host[i] || asprintf(&l->acc_name[i], "%s/grad_accumulator/var", l->v[i].name) < 0)
      return lv_status_make(LV_ERR_RESOURCE, "out of memory for the gradient accumulator of %s", l->v[i].name);
    l->k->optim_fill(l->ctx, l->v[i].n, l->acc[i], 0.0f);
  }
  return NULL;
}

int lv_learner_num_accumulators(const lv_learner *l) { return l->acc ? l->n : 0; }
void lv_learner_accumulator(lv_learner *l, int i, const char **name, int64_t *n) {
  LV_ASSERT(l->acc && i >= 0 && i < l->n);
  if (name) *name = l->acc_name[i];
  if (n) *n = l->v[i].n;
}
float *lv_learner_accumulator_host(lv_learner *l, int i) {
  LV_ASSERT(l->acc && i >= 0 && i < l->n);
  return l->acc_host[i];
}
void lv_learner_accumulators_to_host(lv_learner *l) {
  for (int i = 0; l->acc && i < l->n; i++)
    if (l->v[i].n > 0) lv_optim_to_host(l->be, l->acc_host[i], l->acc[i], sizeof(float) * (size_t)l->v[i].n);
}
void lv_learner_accumulators_from_host(lv_learner *l) {
  for (int i = 0; l->acc && i < l->n; i++)
    if (l->v[i].n > 0) lv_optim_from_host(l->be, l->acc[i], l->acc_host[i], sizeof(float) * (size_t)l->v[i].n);
}

/* Copies every value and slot to the backup (to_backup) or back. */
static void backup_copy(lv_learner *l, bool to_backup) {
  float *b = l->backup;
  for (int i = 0; i < l->nchk; i++) {
    size_t bytes = (size_t)l->chk_n[i] * sizeof(float);
    if (bytes) {
      if (to_backup) lv_optim_copy(l->be, b, l->chk[i], bytes);
      else lv_optim_copy(l->be, l->chk[i], b, bytes);
    }
    b += l->chk_n[i];
  }
}

/* The first value or slot holding NaN/Inf after an update (NULL if none). A float's
 * square is at most ~1.2e77, so the double sum of squares is finite iff every element
 * is. */
static const char *first_nonfinite(lv_learner *l) {
  for (int i = 0; i < l->nchk; i++)
    l->k->optim_sum(l->ctx, l->chk_n[i], l->chk[i], false, l->scratch, &l->dev_chk_sums[i]);
  lv_optim_to_host(l->be, l->chk_sums, l->dev_chk_sums, (size_t)l->nchk * sizeof(double));
  for (int i = 0; i < l->nchk; i++)
    if (!isfinite(l->chk_sums[i])) return l->chk_name[i];
  return NULL;
}

lv_status lv_learner_create(const lv_learner_config *cfg, lv_schedule *schedule,
                            lv_optimizer *optimizer, const lv_learner_var *vars, int nvars,
                            lv_learner **out) {
  *out = NULL;
  lv_learner *l = calloc(1, sizeof *l);
  if (!l) {
    lv_schedule_free(schedule);
    lv_optimizer_free(optimizer);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory creating the learner");
  }
  l->c = *cfg;
  l->schedule = schedule;
  l->opt = optimizer;
  lv_status st = lv_learner_config_validate(cfg);
  if (!st && (!schedule || !optimizer))
    st = lv_status_make(LV_ERR_INTERNAL, "learner: schedule and optimizer are required");
  if (!st && lv_optimizer_num_vars(optimizer) != 0)
    st = lv_status_make(LV_ERR_INTERNAL, "learner: the optimizer already has variables");
  int ntrain = 0;
  int64_t max_blocks = 1;
  for (int i = 0; !st && i < nvars; i++) {
    if (!vars[i].trainable) continue;
    ntrain++;
    int64_t nb = (vars[i].n + LV_OPTIM_SUM_BLOCK - 1) / LV_OPTIM_SUM_BLOCK;
    if (nb > max_blocks) max_blocks = nb;
    if (vars[i].lp_row_width > 0) {
      if (vars[i].n % vars[i].lp_row_width) {
        st = lv_status_make(LV_ERR_INTERNAL, "learner: variable %s has %lld elements, not rows of %lld", vars[i].name,
                            (long long)vars[i].n, (long long)vars[i].lp_row_width);
        break;
      }
      int64_t rows = vars[i].n / vars[i].lp_row_width; /* optim_lp_add_rows' partials */
      if (rows > max_blocks) max_blocks = rows;
    }
  }
  if (!st) {
    l->be = lv_optimizer_backend(optimizer);
    l->k = l->be->kernels;
    l->ctx = lv_optim_ctx(l->be);
    size_t sum_bytes = ((size_t)SUM_COUNT * (size_t)ntrain + 1) * sizeof(double);
    l->v = calloc((size_t)ntrain + 1, sizeof *l->v);
    l->values = calloc((size_t)ntrain + 1, sizeof *l->values);
    l->grads = calloc((size_t)ntrain + 1, sizeof *l->grads);
    l->gnorm = calloc((size_t)ntrain + 1, sizeof *l->gnorm);
    l->vnorm = calloc((size_t)ntrain + 1, sizeof *l->vnorm);
    l->sums = malloc(sum_bytes);
    l->dev_sums = lv_optim_alloc(l->be, sum_bytes);
    l->scratch = lv_optim_alloc(l->be, (size_t)max_blocks * sizeof(double));
    if (!l->v || !l->values || !l->grads || !l->gnorm || !l->vnorm || !l->sums ||
        !l->dev_sums || !l->scratch)
      st = lv_status_make(LV_ERR_RESOURCE, "out of memory creating the learner");
  }
  for (int i = 0; !st && i < nvars; i++) {
    const lv_learner_var *v = &vars[i];
    if (!v->trainable) continue;
    if (v->n < 0 || (v->n > 0 && (!v->value || !v->grad))) {
      st = lv_status_make(LV_ERR_INTERNAL, "learner: variable %s has no value or gradient",
                          v->name);
      break;
    }
    lv_learner_var *d = &l->v[l->n];
    *d = *v;
    d->name = strdup(v->name);
    if (!d->name) {
      st = lv_status_make(LV_ERR_RESOURCE, "out of memory creating the learner");
      break;
    }
    l->values[l->n] = v->value;
    l->grads[l->n] = v->grad;
    l->n++;
    st = v->rank > 0 ? lv_optimizer_add_var_shaped(optimizer, v->name, v->rank, v->shape, NULL)
                     : lv_optimizer_add_var(optimizer, v->name, v->n, NULL);
  }
  if (!st && cfg->max_group_gradient_norm > 0) {
    bool any = false;
    for (int i = 0; i < l->n; i++) any = any || l->v[i].grad_group;
    if (!any)
      st = lv_status_make(LV_ERR_INVALID, "max_lstm_gradient_norm: %g, but no trained variable is an LSTM variable of "
                          "the task (Lingvo clips the gradients of lm.rnns)", cfg->max_group_gradient_norm);
  }
  if (!st) st = alloc_update_check(l);
  if (!st && cfg->accum_steps > 1) st = alloc_accumulators(l);
  if (st) {
    lv_learner_free(l);
    return st;
  }
  *out = l;
  return NULL;
}

lv_optimizer *lv_learner_optimizer(lv_learner *l) { return l->opt; }
const lv_schedule *lv_learner_schedule(const lv_learner *l) { return l->schedule; }
lv_schedule *lv_learner_schedule_mut(lv_learner *l) { return l->schedule; }
int64_t lv_learner_num_nan_inf_steps(const lv_learner *l) { return l->nan_inf_steps; }
int64_t lv_learner_num_skipped_steps(const lv_learner *l) { return l->skipped_steps; }

double lv_learner_learning_rate(const lv_learner *l, int64_t step) {
  return l->c.learning_rate * lv_schedule_value(l->schedule, step);
}

/* grad += w * v (L2) or w * sign(v) (L1) on the variables not marked skip_lp (on an
 * embedding's rows with a nonzero gradient only), and their sum v^2 or sum |v| (over
 * those rows) into the device sums. */
static void add_lp(lv_learner *l, double weight, bool l1, double *dev_sum) {
  for (int i = 0; i < l->n; i++) {
    const lv_learner_var *v = &l->v[i];
    if (v->skip_lp) continue;
    if (v->lp_row_width > 0) {
      l->k->optim_lp_add_rows(l->ctx, v->n / v->lp_row_width, v->lp_row_width, v->value, (float)weight, l1, v->grad,
                              l->scratch, &dev_sum[i]);
      continue;
    }
    l->k->optim_lp_add(l->ctx, v->n, v->value, (float)weight, l1, v->grad);
    l->k->optim_sum(l->ctx, v->n, v->value, l1, l->scratch, &dev_sum[i]);
  }
}

/* The ordered total of the sums of the variables not marked skip_lp. */
static double lp_total(const lv_learner *l, const double *sum) {
  double total = 0;
  for (int i = 0; i < l->n; i++)
    if (!l->v[i].skip_lp) total += sum[i];
  return total;
}

/* tf.clip_by_global_norm over the grad_group variables, in float32 as TF: scale =
 * clip * min(1 / norm, 1 / clip), applied unless it is exactly 1, and returned. Runs on finite
 * gradients only (a non-finite norm makes TF's gradients NaN, and the step is skipped
 * either way). */
static float clip_group(lv_learner *l) {
  const int n = l->n;
  double g2 = 0;
  for (int i = 0; i < n; i++)
    if (l->v[i].grad_group) g2 += l->sums[SUM_GRAD_SQ * n + i];
  const float clip = (float)l->c.max_group_gradient_norm;
  const float norm = (float)sqrt(g2);
  const float scale = clip * fminf(1.0f / norm, 1.0f / clip);
  if (scale == 1.0f) return 1.0f;
  for (int i = 0; i < n; i++)
    if (l->v[i].grad_group) l->k->optim_scale(l->ctx, l->v[i].n, l->v[i].grad, scale);
  return scale;
}

lv_status lv_learner_step(lv_learner *l, int64_t step, lv_learner_stats *out) {
  const lv_learner_config *c = &l->c;
  const lv_kernel_table *k = l->k;
  lv_learner_stats s;
  memset(&s, 0, sizeof s);
  s.lr_schedule = lv_schedule_value(l->schedule, step);
  s.learning_rate = c->learning_rate * s.lr_schedule;
  s.grad_scale_all = 1.0;
  const float tracker0[4] = {l->log_mean, l->log_mean_squared, l->total_weight, l->total_rejections};

  /* Every sum the host needs is formed on the device, then read back in one copy. */
  const int n = l->n;
  if (c->has_l2) add_lp(l, c->l2_regularizer_weight, false, l->dev_sums + SUM_L2 * n);
  if (c->has_l1) add_lp(l, c->l1_regularizer_weight, true, l->dev_sums + SUM_L1 * n);
  if (c->scale_gradients)
    for (int i = 0; i < n; i++) {
      const lv_learner_var *v = &l->v[i];
      k->optim_sum(l->ctx, v->n, v->grad, false, l->scratch, &l->dev_sums[SUM_GRAD_SQ * n + i]);
      k->optim_sum(l->ctx, v->n, v->value, false, l->scratch, &l->dev_sums[SUM_VALUE_SQ * n + i]);
    }
  if (c->has_l2 || c->has_l1 || c->scale_gradients)
    lv_optim_to_host(l->be, l->sums, l->dev_sums, (size_t)SUM_COUNT * (size_t)n * sizeof(double));

  if (c->has_l2) {
    s.has_l2 = true;
    s.l2_loss = 0.5 * c->l2_regularizer_weight * lp_total(l, l->sums + SUM_L2 * n);
  }
  if (c->has_l1) {
    s.has_l1 = true;
    s.l1_loss = c->l1_regularizer_weight * lp_total(l, l->sums + SUM_L1 * n);
  }

  bool skip = false;
  if (c->scale_gradients) {
    double gsq = 0, vsq = 0;
    for (int i = 0; i < n; i++) {
      double g2 = l->sums[SUM_GRAD_SQ * n + i];
      double v2 = l->sums[SUM_VALUE_SQ * n + i];
      l->gnorm[i] = sqrt(g2);
      if (!isfinite(g2) && !s.nonfinite_var) s.nonfinite_var = l->v[i].name;
      l->vnorm[i] = sqrt(v2);
      gsq += g2;
      vsq += v2;
    }
    s.grad_norm_all = sqrt(gsq);
    s.var_norm_all = sqrt(vsq);
    /* Sums of squares in double are finite iff every gradient is; Lingvo's float32 norm
     * also overflows above FLT_MAX, which the float cast reproduces. */
    s.grad_norm_is_nan_or_inf = !isfinite((float)s.grad_norm_all);
    s.has_nan_or_inf = !isfinite(gsq) || s.grad_norm_is_nan_or_inf;
    /* The LSTM adjustment runs after the norms are measured (and reported), and before
     * per-variable clipping, which then sees the adjusted gradients (Lingvo's
     * ScaleGradients: gradient_adjuster, then ApplyGradNormClipping). */
    float group_scale = 1.0f;
    if (c->max_group_gradient_norm > 0 && !s.has_nan_or_inf) group_scale = clip_group(l);

    if (c->clip_gradient_single_norm_to_value != 0) {
      const double clip = c->clip_gradient_single_norm_to_value;
      for (int i = 0; !s.has_nan_or_inf && i < l->n; i++) {
        double norm = l->gnorm[i] * (l->v[i].grad_group ? (double)group_scale : 1.0);
        if (norm > clip) k->optim_scale(l->ctx, l->v[i].n, l->v[i].grad, (float)(clip / norm));
      }
      if (s.has_nan_or_inf) s.grad_scale_all = 0.0;
    } else {
      double scale = 1.0;
      if (c->clip_gradient_norm_to_value != 0)
        scale = fmin(1.0, c->clip_gradient_norm_to_value / s.grad_norm_all);
      if (c->grad_norm_to_clip_to_zero != 0 && !(s.grad_norm_all < c->grad_norm_to_clip_to_zero)) {
        scale = 0.0;
        s.over_clip_to_zero = true;
      }
      if (c->has_grad_norm_tracker && tracker_step(l, s.grad_norm_all, s.has_nan_or_inf) == 0.0f) {
        scale = 0.0;
        s.tracker_rejected = !s.has_nan_or_inf;
      }
      if (s.has_nan_or_inf) scale = 0.0;
      s.grad_scale_all = (float)scale;
      if (scale != 1.0)
        for (int i = 0; i < l->n; i++) {
          if (scale == 0.0)
            k->optim_fill(l->ctx, l->v[i].n, l->v[i].grad, 0.0f);
          else
            k->optim_scale(l->ctx, l->v[i].n, l->v[i].grad, (float)scale);
        }
    }
    if (s.has_nan_or_inf) {
      /* Lingvo zeroes the gradients of such a step (they must stay finite). */
      for (int i = 0; i < l->n; i++) k->optim_fill(l->ctx, l->v[i].n, l->v[i].grad, 0.0f);
      l->nan_inf_steps++;
    }
    skip = s.has_nan_or_inf || s.grad_scale_all == 0.0;
  }

  /* Lingvo's Accumulator: every step adds its gradients; every accum_steps-th step the
   * optimizer runs on their mean. */
  bool apply = !skip;
  if (l->acc) {
    /* A skipped step adds nothing (Lingvo adds its zeroed gradients), but on the cycle's
     * last step the sum of the others is still applied and reset, so that it never
     * carries into the next cycle. */
    if (!skip)
      for (int i = 0; i < l->n; i++) k->axpy(l->ctx, l->v[i].n, 1.0f, l->v[i].grad, l->acc[i], true);
    apply = step % c->accum_steps == c->accum_steps - 1;
    if (apply)
      for (int i = 0; i < l->n; i++) k->optim_scale(l->ctx, l->v[i].n, l->acc[i], (float)(1.0 / (double)c->accum_steps));
  }
  if (apply) {
    lv_optimizer *o = l->opt;
    float nonslot0[2] = {0, 0};
    int nns = lv_optimizer_num_nonslot(o);
    for (int i = 0; i < nns; i++) {
      float *p;
      lv_optimizer_nonslot(o, i, NULL, &p);
      nonslot0[i] = *p;
    }
    /* The update check goes with the gradient checks: scale_gradients = false does
     * neither (as Lingvo does no NaN check then). */
    const bool check = c->scale_gradients;
    if (check) backup_copy(l, true);
    lv_optimizer_set_step(o, step);
    lv_status st = lv_optimizer_apply(o, (float)s.learning_rate, l->n, l->values,
                                      l->acc ? (const float *const *)l->acc : l->grads);
    if (st) return st;
    for (int i = 0; l->acc && i < l->n; i++) k->optim_fill(l->ctx, l->v[i].n, l->acc[i], 0.0f);
    s.nonfinite_update = check ? first_nonfinite(l) : NULL;
    if (s.nonfinite_update) {
      backup_copy(l, false);
      for (int i = 0; i < nns; i++) {
        float *p;
        lv_optimizer_nonslot(o, i, NULL, &p);
        *p = nonslot0[i];
      }
      l->log_mean = tracker0[0], l->log_mean_squared = tracker0[1];
      l->total_weight = tracker0[2], l->total_rejections = tracker0[3];
      s.update_nonfinite = true;
      l->nan_inf_steps++;
      skip = true;
    }
  }
  if (skip) {
    l->skipped_steps++;
    l->consecutive_skipped++;
  } else {
    l->consecutive_skipped = 0;
  }
  s.skipped = skip;
  if (out) *out = s;
  if (skip && c->max_consecutive_skipped_steps > 0 && l->consecutive_skipped >= c->max_consecutive_skipped_steps)
    return lv_status_make(LV_ERR_INTERNAL,
                          "step %lld: %lld consecutive steps skipped (the last one: %s); the model does not train "
                          "(task.train.max_consecutive_skipped_steps is %lld: lower task.train.learning_rate, clip the "
                          "gradients, or raise the limit; 0 never stops)",
                          (long long)step, (long long)l->consecutive_skipped,
                          s.update_nonfinite ? "the update made a variable NaN/Inf"
                          : s.has_nan_or_inf ? "NaN/Inf gradients"
                                             : "grad_scale 0",
                          (long long)c->max_consecutive_skipped_steps);
  return NULL;
}

int lv_learner_stats_metrics(const lv_learner_stats *s, const char **names, double *values,
                             int max) {
  const char *n[LV_LEARNER_MAX_STATS_METRICS];
  double v[LV_LEARNER_MAX_STATS_METRICS];
  int k = 0;
  n[k] = "learning_rate", v[k++] = s->learning_rate;
  n[k] = "lr_schedule", v[k++] = s->lr_schedule;
  n[k] = "grad_norm/all", v[k++] = s->grad_norm_all;
  n[k] = "var_norm/all", v[k++] = s->var_norm_all;
  n[k] = "grad_scale_all", v[k++] = s->grad_scale_all;
  n[k] = "has_nan_or_inf", v[k++] = s->has_nan_or_inf ? 1.0 : 0.0;
  n[k] = "grad_norm_is_nan_or_inf", v[k++] = s->grad_norm_is_nan_or_inf ? 1.0 : 0.0;
  if (s->has_l2) n[k] = "l2_loss", v[k++] = s->l2_loss;
  if (s->has_l1) n[k] = "l1_loss", v[k++] = s->l1_loss;
  int m = k < max ? k : max;
  for (int i = 0; i < m; i++) {
    if (names) names[i] = n[i];
    if (values) values[i] = v[i];
  }
  return m;
}
