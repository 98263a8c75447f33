#include "optim/vn.h"

#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/rng.h"
#include "optim/optim_dev.h"

typedef struct noisy {
  lv_var *var;  /* borrowed */
  float *clean; /* [n] device memory */
  int64_t n;
  bool perturbed; /* clean holds the values of this step */
} noisy;

struct lv_vn {
  const lv_backend *be;
  noisy *v;
  int n;
  bool perturbed; /* some variable is */
};

lv_status lv_vn_create(const lv_backend *be, lv_var *const *vars, int nvars, lv_vn **out) {
  *out = NULL;
  int k = 0;
  for (int i = 0; i < nvars; i++) k += vars[i]->vn.global && vars[i]->trainable && vars[i]->value.dtype == LV_F32;
  if (!k) return NULL;
  lv_vn *v = calloc(1, sizeof *v);
  LV_ASSERT(v);
  v->be = be;
  v->v = calloc((size_t)k, sizeof *v->v);
  LV_ASSERT(v->v);
  for (int i = 0; i < nvars; i++) {
    lv_var *var = vars[i];
    if (!(var->vn.global && var->trainable && var->value.dtype == LV_F32)) continue;
    noisy *e = &v->v[v->n++];
    e->var = var;
    e->n = lv_tensor_numel(&var->value);
    e->clean = lv_optim_alloc(be, sizeof(float) * (size_t)(e->n > 0 ? e->n : 1));
    if (lv_backend_get(var->value.device) != be || !e->clean) {
      lv_status s = e->clean ? lv_status_make(LV_ERR_INTERNAL, "weight noise of %s: the variable is not on the "
                                              "trainer's device", var->name)
                             : lv_status_make(LV_ERR_RESOURCE, "out of memory for the clean copy of %s (%lld floats) "
                                              "under weight noise", var->name, (long long)e->n);
      lv_vn_free(v);
      return s;
    }
  }
  *out = v;
  return NULL;
}

void lv_vn_free(lv_vn *v) {
  if (!v) return;
  for (int i = 0; i < v->n; i++) lv_optim_free(v->be, v->v[i].clean);
  free(v->v);
  free(v);
}

int lv_vn_num_vars(const lv_vn *v) { return v ? v->n : 0; }

const lv_var *lv_vn_var(const lv_vn *v, int i) {
  LV_ASSERT(v && i >= 0 && i < v->n);
  return v->v[i].var;
}

int64_t lv_vn_start_step(const lv_vn *v) {
  int64_t s = INT64_MAX;
  for (int i = 0; v && i < v->n; i++)
    if (v->v[i].var->vn.start_step < s) s = v->v[i].var->vn.start_step;
  return s;
}

uint64_t lv_vn_stream(const char *var_name, int64_t step) {
  return lv_rng_mix(lv_fnv1a(var_name), (uint64_t)step);
}

int lv_vn_perturb(lv_vn *v, int64_t step) {
  int k = 0;
  for (int i = 0; v && i < v->n; i++) {
    noisy *e = &v->v[i];
    const lv_var_vn *c = &e->var->vn;
    e->perturbed = false;
    if (step < c->start_step || !(c->scale > 0.0f) || e->n == 0) continue;
    float *w = lv_f32(&e->var->value);
    lv_optim_copy(v->be, e->clean, w, sizeof(float) * (size_t)e->n);
    v->be->kernels->add_noise(lv_optim_ctx(v->be), e->n, w, c->scale, c->uniform, c->seed,
                              lv_vn_stream(e->var->name, step), w);
    e->perturbed = true;
    k++;
  }
  if (v) v->perturbed = k > 0;
  return k;
}

void lv_vn_restore(lv_vn *v) {
  if (!v || !v->perturbed) return;
  for (int i = 0; i < v->n; i++) {
    noisy *e = &v->v[i];
    if (e->perturbed) lv_optim_copy(v->be, lv_f32(&e->var->value), e->clean, sizeof(float) * (size_t)e->n);
    e->perturbed = false;
  }
  v->perturbed = false;
}
