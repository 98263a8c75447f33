/* Helpers of the attention / Transformer suites (header-only): random inputs, paddings,
 * layers built from params with overrides, and a finite-difference check of every
 * trainable variable (and optionally one input) of a layer. Host graphs (cpu:0). */
#ifndef LV_TESTS_ATT_UTIL_H
#define LV_TESTS_ATT_UTIL_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "core/graph.h"
#include "core/ops.h"
#include "layers/layer.h"

static inline void att_fill(float *h, int64_t n, float scale, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    h[i] = scale * (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

/* An arena tensor of uniform(-scale, scale) values. */
static inline lv_tensor *att_rand(lv_graph *g, lv_shape s, float scale, uint64_t seed) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, s);
  ck_assert_ptr_nonnull(t);
  att_fill(lv_f32(t), lv_shape_numel(&s), scale, seed);
  return t;
}

/* Paddings [T, B]: 0 for t < lens[b], else 1. */
static inline lv_tensor *att_pads(lv_graph *g, int64_t T, int64_t B, const int *lens) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, lv_shape2(T, B));
  ck_assert_ptr_nonnull(t);
  for (int64_t i = 0; i < T; i++)
    for (int64_t b = 0; b < B; b++) lv_f32(t)[i * B + b] = i < lens[b] ? 0.0f : 1.0f;
  return t;
}

/* Layer of class cls with `overrides` ("key : value" lines) applied; p is returned for
 * the caller to free after the layer. */
static inline lv_layer *att_layer(const char *cls, const char *overrides, lv_varstore *vs, lv_params **p) {
  lv_layers_register_all();
  lv_params *pp = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &pp));
  if (overrides) EXPECT_OK(lv_params_from_text(pp, overrides, "<test>"));
  lv_params_freeze(pp);
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(pp, "", vs, &l));
  *p = pp;
  return l;
}

/* Sets every float variable of vs to uniform(-scale, scale) (so zero-initialized scales
 * and biases matter in the checks). */
static inline void att_randomize_vars(lv_varstore *vs, float scale, uint64_t seed) {
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    lv_var *v = lv_varstore_get(vs, i);
    if (v->value.dtype == LV_F32) att_fill(lv_f32(&v->value), lv_tensor_numel(&v->value), scale, seed + (uint64_t)i);
  }
}

static inline float att_weight(int64_t i) { return (float)(0.5 + 0.37 * (double)((i * 7919) % 13)); }

/* sum(out * w) with w a fixed weighting (att_weight). */
static inline lv_tensor *att_weighted_sum(lv_graph *g, lv_tensor *out) {
  ck_assert_msg(out, "forward failed: %s", lv_status_msg(lv_graph_status(g)));
  lv_tensor *w = lv_graph_tensor(g, LV_F32, out->shape);
  for (int64_t i = 0; i < lv_tensor_numel(out); i++) lv_f32(w)[i] = att_weight(i);
  return lv_op_reduce_sum(g, lv_op_mul(g, out, w), LV_ALL_AXES, false);
}

/* Builds the scalar loss in g (inputs made inside, from host data the check may
 * perturb); *grad_in, if the function sets it, is an input tensor whose gradient is
 * checked against host_in. */
typedef lv_tensor *(*att_loss_fn)(lv_graph *g, void *ctx, lv_tensor **grad_in);

static inline double att_loss_value(lv_graph *g, att_loss_fn f, void *ctx) {
  lv_graph_reset(g);
  lv_tensor *in = NULL;
  lv_tensor *loss = f(g, ctx, &in);
  ck_assert_msg(loss, "loss: %s", lv_status_msg(lv_graph_status(g)));
  return lv_f32(loss)[0];
}

static inline void att_compare(const char *name, const char *what, int64_t j, double an, double num, double tol) {
  double err = fabs(num - an) / fmax(0.05, fmax(fabs(num), fabs(an)));
  ck_assert_msg(err < tol, "%s: %s[%lld]: analytic %.6f numeric %.6f", name, what, (long long)j, an, num);
}

/* Finite differences (central, eps) on up to per_var elements of every trainable
 * variable of vs and of the input host_in[n_in] (when given). */
static inline void att_gradcheck(const char *name, lv_varstore *vs, att_loss_fn f, void *ctx, float *host_in,
                                 int64_t n_in, int per_var, double eps, double tol) {
  lv_graph *g = lv_graph_create(0);
  lv_varstore_zero_grads(vs);
  lv_tensor *in = NULL;
  lv_tensor *loss = f(g, ctx, &in);
  ck_assert_msg(loss, "%s: %s", name, lv_status_msg(lv_graph_status(g)));
  EXPECT_OK(lv_graph_backward(g, loss));
  int nv = lv_varstore_count(vs);
  float **grads = calloc((size_t)nv + 1, sizeof *grads);
  for (int i = 0; i < nv; i++) {
    lv_var *v = lv_varstore_get(vs, i);
    if (!v->trainable || !v->grad.data) continue;
    grads[i] = malloc(lv_tensor_nbytes(&v->grad));
    memcpy(grads[i], v->grad.data, lv_tensor_nbytes(&v->grad));
  }
  float *gin = NULL;
  if (host_in) {
    ck_assert_msg(in && in->grad, "%s: the input got no gradient", name);
    gin = malloc(sizeof(float) * (size_t)n_in);
    memcpy(gin, in->grad->data, sizeof(float) * (size_t)n_in);
  }
  for (int i = 0; i < nv; i++) {
    if (!grads[i]) continue;
    lv_var *v = lv_varstore_get(vs, i);
    float *x = lv_f32(&v->value);
    int64_t n = lv_tensor_numel(&v->value);
    int k = per_var < n ? per_var : (int)n;
    for (int s = 0; s < k; s++) {
      int64_t j = (int64_t)s * n / k + (s * 7) % (n / k > 0 ? n / k : 1);
      float keep = x[j];
      x[j] = keep + (float)eps;
      double lp = att_loss_value(g, f, ctx);
      x[j] = keep - (float)eps;
      double lm = att_loss_value(g, f, ctx);
      x[j] = keep;
      att_compare(name, v->name, j, grads[i][j], (lp - lm) / (2 * eps), tol);
    }
    free(grads[i]);
  }
  if (host_in) {
    int k = per_var < n_in ? per_var : (int)n_in;
    for (int s = 0; s < k; s++) {
      int64_t j = (int64_t)s * n_in / k;
      float keep = host_in[j];
      host_in[j] = keep + (float)eps;
      double lp = att_loss_value(g, f, ctx);
      host_in[j] = keep - (float)eps;
      double lm = att_loss_value(g, f, ctx);
      host_in[j] = keep;
      att_compare(name, "input", j, gin[j], (lp - lm) / (2 * eps), tol);
    }
    free(gin);
  }
  free(grads);
  lv_graph_destroy(g);
}

/* A host array copied into an arena tensor that requires a gradient. */
static inline lv_tensor *att_input(lv_graph *g, lv_shape s, const float *host) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, s);
  ck_assert_ptr_nonnull(t);
  memcpy(t->data, host, sizeof(float) * (size_t)lv_shape_numel(&s));
  t->requires_grad = true;
  return t;
}

static inline void att_expect_var(lv_varstore *vs, const char *name, int rank, const int64_t *d) {
  lv_var *v = lv_varstore_find(vs, name);
  ck_assert_msg(v != NULL, "missing variable %s", name);
  ck_assert_int_eq(v->value.shape.rank, rank);
  for (int i = 0; i < rank; i++) ck_assert_int_eq(v->value.shape.d[i], d[i]);
}
#define ATT_EXPECT_VAR(vs, name, ...) \
  att_expect_var((vs), (name), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

#endif
