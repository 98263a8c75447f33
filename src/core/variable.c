/* The variable store: declared variables, then one finalize that lays out the trainable
 * float32 values and grads contiguously and fills every variable from (seed, name). */
#include "core/variable.h"
#include "kernels/qweight.h"

#include "core/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hash.h"

const char *const lv_init_method_names[LV_INIT_COUNT] = {
    "xavier",         "gaussian",           "uniform",         "constant",
    "gaussian_sqrt_dim", "gaussian_sqrt_fanin", "uniform_sqrt_dim", "truncated_gaussian",
};
_Static_assert(LV_ARRAY_LEN(lv_init_method_names) == LV_INIT_COUNT, "init method names");

bool lv_init_method_from_name(const char *name, lv_init_method *out) {
  /* Lingvo spells them in CamelCase ("GaussianSqrtDim"); compare without underscores. */
  for (int i = 0; i < LV_INIT_COUNT; i++) {
    const char *a = name, *b = lv_init_method_names[i];
    while (*a || *b) {
      if (*a == '_') { a++; continue; }
      if (*b == '_') { b++; continue; }
      if (!*a || !*b || (*a | 32) != (*b | 32)) break;
      a++;
      b++;
    }
    if (!*a && !*b) {
      *out = (lv_init_method)i;
      return true;
    }
  }
  return false;
}

typedef struct entry {
  lv_var var;
  lv_var_init init;
  int64_t offset; /* into the float buffer (trainable) or other buffer, in bytes for other */
} entry;

struct lv_varstore {
  const lv_backend *be;
  entry **vars;
  int n, cap;
  bool finalized;
  bool borrowed;         /* values, grads and other are another store's (lv_varstore_share_values) */
  bool no_grads;         /* lv_varstore_set_no_grads: no gradient buffer */
  float *values, *grads; /* trainable float32 */
  int64_t n_train;
  void *other;           /* every other variable */
  size_t other_bytes;
  struct scope_settings {
    char scope[LV_VAR_NAME_MAX];
    bool has_vn, has_skip_lp; /* which of the two this scope set */
    lv_var_vn vn;
    bool skip_lp;
    const lv_params *qdomain; /* NULL: not set here */
  } *scopes; /* lv_varstore_set_scope_vn, lv_varstore_set_scope_skip_lp */
  int nscopes, capscopes;
};

lv_varstore *lv_varstore_create_on(lv_device dev) {
  const lv_backend *be = lv_backend_get(dev);
  if (!be) return NULL;
  lv_varstore *vs = calloc(1, sizeof *vs);
  if (vs) vs->be = be;
  return vs;
}

lv_varstore *lv_varstore_create(void) { return lv_varstore_create_on(lv_device_host()); }

lv_device lv_varstore_device(const lv_varstore *vs) { return vs->be->device; }

void lv_varstore_destroy(lv_varstore *vs) {
  if (!vs) return;
  for (int i = 0; i < vs->n; i++) {
    lv_var_set_quant(&vs->vars[i]->var, NULL);
    free(vs->vars[i]);
  }
  free(vs->vars);
  if (!vs->borrowed) {
    if (vs->values) vs->be->free(vs->be->ctx, vs->values);
    if (vs->grads) vs->be->free(vs->be->ctx, vs->grads);
    if (vs->other) vs->be->free(vs->be->ctx, vs->other);
  }
  free(vs->scopes);
  free(vs);
}

void lv_var_set_quant(lv_var *v, struct lv_qweight *q) {
  lv_qweight_free(v->quant);
  v->quant = q;
  v->value.qw = q;
}

void lv_var_defer(lv_var *v) {
  if (v->value.dtype == LV_F32 && v->trainable) v->deferred = true;
}

lv_status lv_varstore_add(lv_varstore *vs, const char *name, lv_dtype dtype, lv_shape shape,
                          lv_var_init init, bool trainable, lv_var **out) {
  if (vs->finalized)
    return lv_status_make(LV_ERR_INTERNAL, "variable %s added after the store was finalized", name);
  if (strlen(name) >= LV_VAR_NAME_MAX)
    return lv_status_make(LV_ERR_INVALID, "variable name longer than %d: %s", LV_VAR_NAME_MAX - 1, name);
  if (lv_varstore_find(vs, name))
    return lv_status_make(LV_ERR_INTERNAL, "variable %s declared twice", name);
  if (lv_dtype_size(dtype) == 0)
    return lv_status_make(LV_ERR_INVALID, "variable %s: dtype %s cannot be stored", name,
                          lv_dtype_names[dtype]);
  if ((int)init.method < 0 || init.method >= LV_INIT_COUNT)
    return lv_status_make(LV_ERR_INVALID, "variable %s: unknown init method %d", name, (int)init.method);
  for (int i = 0; i < shape.rank; i++)
    if (shape.d[i] < 0) return lv_status_make(LV_ERR_INVALID, "variable %s: negative dimension", name);
  if (vs->n == vs->cap) {
    int cap = vs->cap ? 2 * vs->cap : 32;
    entry **nv = realloc(vs->vars, sizeof *nv * (size_t)cap);
    if (!nv) return lv_status_make(LV_ERR_RESOURCE, "out of memory adding variable %s", name);
    vs->vars = nv;
    vs->cap = cap;
  }
  entry *e = calloc(1, sizeof *e);
  if (!e) return lv_status_make(LV_ERR_RESOURCE, "out of memory adding variable %s", name);
  snprintf(e->var.name, sizeof e->var.name, "%s", name);
  e->var.value = lv_tensor_view(dtype, shape, NULL);
  e->var.grad = lv_tensor_view(LV_F32, shape, NULL);
  e->var.value.device = e->var.grad.device = vs->be->device;
  e->var.trainable = trainable && dtype == LV_F32;
  e->init = init;
  vs->vars[vs->n++] = e;
  if (out) *out = &e->var;
  return NULL;
}

/* TF's fans: [in, out] for matrices, receptive field times channels for conv filters. */
static void fans(const lv_shape *s, double *fan_in, double *fan_out) {
  if (s->rank == 0) {
    *fan_in = *fan_out = 1;
  } else if (s->rank == 1) {
    *fan_in = *fan_out = (double)s->d[0];
  } else {
    double rf = 1;
    for (int i = 0; i < s->rank - 2; i++) rf *= (double)s->d[i];
    *fan_in = rf * (double)s->d[s->rank - 2];
    *fan_out = rf * (double)s->d[s->rank - 1];
  }
}

static void init_floats(const lv_var *v, lv_var_init in, uint64_t seed, float *x) {
  const lv_shape *s = &v->value.shape;
  int64_t n = lv_shape_numel(s);
  lv_rng r;
  lv_rng_init(&r, seed, lv_fnv1a(v->name));
  double fi, fo, sc = in.scale;
  fans(s, &fi, &fo);
  for (int64_t i = 0; i < n; i++) {
    double val;
    switch (in.method) {
      case LV_INIT_XAVIER: {
        double lim = sc * sqrt(6.0 / (fi + fo));
        val = (2.0 * lv_rng_uniform(&r) - 1.0) * lim;
        break;
      }
      case LV_INIT_GAUSSIAN: val = sc * lv_rng_normal(&r); break;
      case LV_INIT_UNIFORM: val = (2.0 * lv_rng_uniform(&r) - 1.0) * sc; break;
      case LV_INIT_CONSTANT: val = sc; break;
      case LV_INIT_GAUSSIAN_SQRT_DIM:
        val = sc / sqrt(s->rank ? (double)s->d[0] : 1.0) * lv_rng_normal(&r);
        break;
      case LV_INIT_GAUSSIAN_SQRT_FANIN: val = sc / sqrt(fi) * lv_rng_normal(&r); break;
      case LV_INIT_UNIFORM_SQRT_DIM:
        val = (2.0 * lv_rng_uniform(&r) - 1.0) * sc / sqrt(s->rank ? (double)s->d[s->rank - 1] : 1.0);
        break;
      default: { /* truncated gaussian: redraw beyond two standard deviations */
        double z;
        do z = lv_rng_normal(&r);
        while (fabs(z) > 2.0);
        val = sc * z;
        break;
      }
    }
    x[i] = (float)val;
  }
}

/* Fills d (host, the variable's size) with v's initial value. */
static void init_other(const lv_var *v, lv_var_init in, uint64_t seed, void *d) {
  int64_t n = lv_shape_numel(&v->value.shape);
  if (v->value.dtype == LV_F32) {
    init_floats(v, in, seed, d);
    return;
  }
  /* Non-float variables (global_step) only take constants. */
  for (int64_t i = 0; i < n; i++) {
    switch (v->value.dtype) {
      case LV_F64: ((double *)d)[i] = in.scale; break;
      case LV_I32: ((int32_t *)d)[i] = (int32_t)in.scale; break;
      case LV_I64: ((int64_t *)d)[i] = (int64_t)in.scale; break;
      case LV_U8: case LV_BOOL: case LV_I8: ((uint8_t *)d)[i] = (uint8_t)in.scale; break;
      default: break; /* zero from the caller's calloc */
    }
  }
}

lv_status lv_varstore_finalize(lv_varstore *vs, uint64_t seed) {
  if (vs->finalized) return lv_status_make(LV_ERR_INTERNAL, "variable store finalized twice");
  int64_t nt = 0;
  size_t ob = 0;
  for (int i = 0; i < vs->n; i++) {
    lv_var *v = &vs->vars[i]->var;
    int64_t n = lv_shape_numel(&v->value.shape);
    if (v->deferred) {
      vs->vars[i]->offset = -1;
    } else if (v->trainable) {
      vs->vars[i]->offset = nt;
      /* 16-float alignment keeps every variable on its own 64-byte line boundary. */
      nt += (n + 15) & ~(int64_t)15;
    } else {
      vs->vars[i]->offset = (int64_t)ob;
      ob += ((size_t)n * lv_dtype_size(v->value.dtype) + 63) & ~(size_t)63;
    }
  }
  size_t fb = ((size_t)nt * sizeof(float) + 63) & ~(size_t)63;
  const lv_backend *be = vs->be;
  void *host = NULL;
  size_t hb = fb > ob ? fb : ob;
  if (!(vs->values = be->alloc(be->ctx, fb ? fb : 64)) ||
      (!vs->no_grads && !(vs->grads = be->alloc(be->ctx, fb ? fb : 64))) ||
      !(vs->other = be->alloc(be->ctx, ob ? ob : 64)) || !(host = calloc(1, hb ? hb : 64))) {
    free(host);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory allocating %lld variable floats on %s",
                          (long long)nt, be->name);
  }
  if (vs->grads) be->kernels->zero(be->ctx, fb, vs->grads);
  vs->n_train = nt;
  vs->other_bytes = ob;
  vs->finalized = true;
  for (int i = 0; i < vs->n; i++) {
    entry *e = vs->vars[i];
    lv_var *v = &e->var;
    if (v->deferred) {
      v->value.data = v->grad.data = NULL;
    } else if (v->trainable) {
      v->value.data = vs->values + e->offset;
      v->grad.data = vs->grads ? vs->grads + e->offset : NULL;
      v->value.requires_grad = true;
      v->value.grad = &v->grad;
      init_floats(v, e->init, seed, (float *)host + e->offset);
    } else {
      v->value.data = (char *)vs->other + e->offset;
      v->grad.data = NULL;
    }
  }
  be->copy(be->ctx, vs->values, host, fb, LV_COPY_HOST_TO_DEVICE);
  memset(host, 0, hb);
  for (int i = 0; i < vs->n; i++)
    if (!vs->vars[i]->var.trainable) init_other(&vs->vars[i]->var, vs->vars[i]->init, seed, (char *)host + vs->vars[i]->offset);
  be->copy(be->ctx, vs->other, host, ob, LV_COPY_HOST_TO_DEVICE);
  free(host);
  return NULL;
}

void lv_varstore_set_no_grads(lv_varstore *vs) { vs->no_grads = true; }

bool lv_varstore_share_values(lv_varstore *dst, lv_varstore *src) {
  if (!dst->finalized || !src->finalized || dst->borrowed || dst == src || dst->be != src->be || dst->n != src->n ||
      dst->n_train != src->n_train || dst->other_bytes != src->other_bytes)
    return false;
  for (int i = 0; i < dst->n; i++) {
    const entry *a = dst->vars[i], *b = src->vars[i];
    if (strcmp(a->var.name, b->var.name) || a->var.trainable != b->var.trainable || a->var.deferred != b->var.deferred ||
        a->offset != b->offset ||
        a->var.value.dtype != b->var.value.dtype || !lv_shape_eq(&a->var.value.shape, &b->var.value.shape))
      return false;
  }
  const lv_backend *be = dst->be;
  be->free(be->ctx, dst->values);
  if (dst->grads) be->free(be->ctx, dst->grads);
  be->free(be->ctx, dst->other);
  dst->values = src->values;
  dst->grads = src->grads;
  dst->other = src->other;
  dst->borrowed = true;
  for (int i = 0; i < dst->n; i++) {
    lv_var *v = &dst->vars[i]->var;
    const lv_var *w = &src->vars[i]->var;
    v->value.data = w->value.data;
    v->grad.data = w->grad.data;
    v->value.qw = w->value.qw; /* src's quantized twin, borrowed as the values are */
  }
  return true;
}

int lv_varstore_count(const lv_varstore *vs) { return vs->n; }
lv_var *lv_varstore_get(lv_varstore *vs, int i) {
  return i >= 0 && i < vs->n ? &vs->vars[i]->var : NULL;
}
lv_var *lv_varstore_find(lv_varstore *vs, const char *name) {
  for (int i = 0; i < vs->n; i++)
    if (strcmp(vs->vars[i]->var.name, name) == 0) return &vs->vars[i]->var;
  return NULL;
}
float *lv_varstore_values(lv_varstore *vs, int64_t *n) {
  if (n) *n = vs->n_train;
  return vs->values;
}
float *lv_varstore_grads(lv_varstore *vs, int64_t *n) {
  if (n) *n = vs->n_train;
  return vs->grads;
}
void lv_varstore_zero_grads(lv_varstore *vs) {
  if (vs->grads) vs->be->kernels->zero(vs->be->ctx, sizeof(float) * (size_t)vs->n_train, vs->grads);
}

/* The settings of scope, added (nothing set) if it has none yet. */
static struct scope_settings *scope_entry(lv_varstore *vs, const char *scope) {
  int i = 0;
  while (i < vs->nscopes && strcmp(vs->scopes[i].scope, scope)) i++;
  if (i == vs->nscopes) {
    if (vs->nscopes == vs->capscopes) {
      vs->capscopes = vs->capscopes ? 2 * vs->capscopes : 8;
      vs->scopes = realloc(vs->scopes, sizeof *vs->scopes * (size_t)vs->capscopes);
      LV_ASSERT(vs->scopes);
    }
    memset(&vs->scopes[i], 0, sizeof vs->scopes[i]);
    snprintf(vs->scopes[i].scope, sizeof vs->scopes[i].scope, "%s", scope);
    vs->nscopes++;
  }
  return &vs->scopes[i];
}

/* The settings of the longest scope that is scope itself or one of its ancestors ("a/b"
 * for "a/b/c", never for "a/bc"; "" covers all) and set the vn (vn) or skip_lp (!vn). */
enum { FIND_VN, FIND_SKIP_LP, FIND_QDOMAIN };
static bool scope_has(const struct scope_settings *e, int what) {
  return what == FIND_VN ? e->has_vn : what == FIND_SKIP_LP ? e->has_skip_lp : e->qdomain != NULL;
}

static const struct scope_settings *scope_find(const lv_varstore *vs, const char *scope, int what) {
  const struct scope_settings *best = NULL;
  size_t best_len = 0;
  for (int i = 0; i < vs->nscopes; i++) {
    const struct scope_settings *e = &vs->scopes[i];
    size_t n = strlen(e->scope);
    bool covers = n == 0 || (!strncmp(scope, e->scope, n) && (scope[n] == 0 || scope[n] == '/'));
    if (covers && scope_has(e, what) && (!best || n >= best_len)) best = e, best_len = n;
  }
  return best;
}

void lv_varstore_set_scope_vn(lv_varstore *vs, const char *scope, const lv_var_vn *vn) {
  struct scope_settings *e = scope_entry(vs, scope);
  e->has_vn = true;
  e->vn = *vn;
}

bool lv_varstore_scope_vn(const lv_varstore *vs, const char *scope, lv_var_vn *out) {
  const struct scope_settings *e = scope_find(vs, scope, FIND_VN);
  if (e) *out = e->vn;
  return e != NULL;
}

void lv_varstore_set_scope_skip_lp(lv_varstore *vs, const char *scope, bool skip) {
  struct scope_settings *e = scope_entry(vs, scope);
  e->has_skip_lp = true;
  e->skip_lp = skip;
}

bool lv_varstore_scope_skip_lp(const lv_varstore *vs, const char *scope) {
  const struct scope_settings *e = scope_find(vs, scope, FIND_SKIP_LP);
  return e && e->skip_lp;
}

void lv_varstore_set_scope_qdomain(lv_varstore *vs, const char *scope, const lv_params *qd) {
  scope_entry(vs, scope)->qdomain = qd;
}

const lv_params *lv_varstore_scope_qdomain(const lv_varstore *vs, const char *scope) {
  const struct scope_settings *e = scope_find(vs, scope, FIND_QDOMAIN);
  return e ? e->qdomain : NULL;
}
