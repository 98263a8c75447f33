#include "optim/ema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "optim/optim_dev.h"

typedef struct shadow {
  char *name;   /* "<var>/ExponentialMovingAverage" */
  float *value; /* [n] the variable, borrowed */
  float *data;  /* [n] the shadow, device memory */
  float *host;  /* [n] host copy for checkpoints */
  int64_t n;
} shadow;

struct lv_ema {
  double decay;
  lv_schedule *schedule;
  const lv_backend *be;
  shadow *v;
  int n, cap;
};

lv_status lv_ema_create(double decay, lv_schedule *schedule, const lv_backend *be, lv_ema **out) {
  *out = NULL;
  if (!(decay > 0.0 && decay < 1.0)) {
    lv_schedule_free(schedule);
    return lv_status_make(LV_ERR_INVALID, "task.train.ema_decay: %g: expected a decay in (0, 1) (0 turns the "
                          "moving averages off)", decay);
  }
  lv_ema *e = calloc(1, sizeof *e);
  LV_ASSERT(e);
  e->decay = decay;
  e->schedule = schedule;
  e->be = be;
  *out = e;
  return NULL;
}

void lv_ema_free(lv_ema *e) {
  if (!e) return;
  for (int i = 0; i < e->n; i++) {
    free(e->v[i].name);
    free(e->v[i].host);
    lv_optim_free(e->be, e->v[i].data);
  }
  free(e->v);
  lv_schedule_free(e->schedule);
  free(e);
}

lv_status lv_ema_add(lv_ema *e, const char *var_name, float *value, int64_t n) {
  for (int i = 0; i < e->n; i++)
    if (!strncmp(e->v[i].name, var_name, strlen(var_name)) && !strcmp(e->v[i].name + strlen(var_name), LV_EMA_SUFFIX))
      return lv_status_make(LV_ERR_INTERNAL, "moving average of %s added twice", var_name);
  if (e->n == e->cap) {
    e->cap = e->cap ? 2 * e->cap : 32;
    e->v = realloc(e->v, sizeof *e->v * (size_t)e->cap);
    LV_ASSERT(e->v);
  }
  shadow *s = &e->v[e->n];
  memset(s, 0, sizeof *s);
  LV_ASSERT(asprintf(&s->name, "%s%s", var_name, LV_EMA_SUFFIX) >= 0);
  size_t bytes = sizeof(float) * (size_t)(n > 0 ? n : 1);
  s->data = lv_optim_alloc(e->be, bytes);
  s->host = calloc(1, bytes);
  if (!s->data || !s->host) {
    lv_optim_free(e->be, s->data);
    free(s->host);
    free(s->name);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory for the moving average of %s (%lld floats)", var_name,
                          (long long)n);
  }
  s->value = value;
  s->n = n;
  if (n > 0) lv_optim_copy(e->be, s->data, value, sizeof(float) * (size_t)n);
  e->n++;
  return NULL;
}

lv_status lv_ema_create_for_vars(double decay, lv_schedule *schedule, bool moving_vars, const lv_backend *be,
                                 lv_var *const *vars, int nvars, lv_ema **out) {
  LV_TRY(lv_ema_create(decay, schedule, be, out));
  for (int i = 0; i < nvars; i++) {
    lv_var *v = vars[i];
    if (v->value.dtype != LV_F32 || !(v->trainable || moving_vars)) continue;
    lv_status s = NULL;
    if (lv_backend_get(v->value.device) != be)
      s = lv_status_make(LV_ERR_INTERNAL, "moving average of %s: the variable is not on the EMA's device", v->name);
    if (!s) s = lv_ema_add(*out, v->name, lv_f32(&v->value), lv_tensor_numel(&v->value));
    if (s) {
      lv_ema_free(*out);
      *out = NULL;
      return s;
    }
  }
  return NULL;
}

float lv_ema_decay_at(const lv_ema *e, int64_t step) {
  if (e->schedule) return (float)lv_schedule_value(e->schedule, step);
  float x = (float)step;
  float d = (1.0f + x) / (10.0f + x);
  float cap = (float)e->decay;
  return d < cap ? d : cap;
}

lv_status lv_ema_apply(lv_ema *e, int64_t step) {
  const float d = lv_ema_decay_at(e, step);
  if (!(d >= 0.0f && d <= 1.0f))
    return lv_status_make(LV_ERR_INVALID, "task.train.ema_schedule: the decay at step %lld is %g: expected a value "
                          "in [0, 1]", (long long)step, (double)d);
  const float a = 1.0f - d;
  for (int i = 0; i < e->n; i++)
    if (e->v[i].n > 0) e->be->kernels->optim_ema(lv_optim_ctx(e->be), e->v[i].n, a, e->v[i].value, e->v[i].data);
  return NULL;
}

void lv_ema_reset(lv_ema *e) {
  for (int i = 0; i < e->n; i++) lv_ema_reset_one(e, i);
}

void lv_ema_reset_one(lv_ema *e, int i) {
  LV_ASSERT(i >= 0 && i < e->n);
  if (e->v[i].n > 0) lv_optim_copy(e->be, e->v[i].data, e->v[i].value, sizeof(float) * (size_t)e->v[i].n);
}

int lv_ema_num_vars(const lv_ema *e) { return e ? e->n : 0; }

void lv_ema_shadow(lv_ema *e, int i, const char **name, float **data, int64_t *n) {
  LV_ASSERT(i >= 0 && i < e->n);
  if (name) *name = e->v[i].name;
  if (data) *data = e->v[i].data;
  if (n) *n = e->v[i].n;
}

float *lv_ema_shadow_host(lv_ema *e, int i) {
  LV_ASSERT(i >= 0 && i < e->n);
  return e->v[i].host;
}

void lv_ema_to_host(lv_ema *e) {
  for (int i = 0; e && i < e->n; i++)
    if (e->v[i].n > 0) lv_optim_to_host(e->be, e->v[i].host, e->v[i].data, sizeof(float) * (size_t)e->v[i].n);
}

void lv_ema_from_host(lv_ema *e) {
  for (int i = 0; e && i < e->n; i++)
    if (e->v[i].n > 0) lv_optim_from_host(e->be, e->v[i].data, e->v[i].host, sizeof(float) * (size_t)e->v[i].n);
}
