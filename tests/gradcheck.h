/* The finite-difference gradient checker shared by the Check suites (header-only; each
 * suite is its own executable). gradcheck runs an op's forward on inputs built from
 * specs, backpropagates loss = sum(out * w) for a fixed pseudo-random w, and compares
 * every checked input's gradient with central differences.
 *
 * A check's name is a string literal in the call that starts with the ops.def names of
 * the ops it checks ("reshape+transpose", "concat+slice axis 0"; a choice between
 * literals where a loop checks several): tests/check_coverage.c reads these names and
 * fails naming every differentiable op that has no gradient check. gradcheck_detail, when
 * set, is added to the name in failure messages (which activation, which case). */
#ifndef LV_TESTS_GRADCHECK_H
#define LV_TESTS_GRADCHECK_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "core/graph.h"
#include "core/ops.h"

#define MAXIN 6

typedef struct spec {
  lv_dtype dtype;
  lv_shape shape;
  bool grad;  /* check this input's gradient */
  void *data; /* heap copy that survives graph resets */
} spec;

typedef lv_tensor *(*fwd_fn)(lv_graph *g, lv_tensor **in, const void *ctx);

static const char *gradcheck_detail;

static inline float *rand_floats(int64_t n, uint64_t seed, float lo, float hi) {
  float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
  lv_rng r;
  lv_rng_init(&r, seed, 7);
  for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * lv_rng_uniform(&r);
  return x;
}

static inline spec fspec(lv_shape s, uint64_t seed) {
  spec sp = {LV_F32, s, true, rand_floats(lv_shape_numel(&s), seed, -1.0f, 1.0f)};
  return sp;
}

static inline spec ispec(lv_shape s, const int32_t *ids) {
  spec sp = {LV_I32, s, false, malloc(sizeof(int32_t) * (size_t)(lv_shape_numel(&s) + 1))};
  memcpy(sp.data, ids, sizeof(int32_t) * (size_t)lv_shape_numel(&s));
  return sp;
}

static inline lv_tensor *make_input(lv_graph *g, const spec *sp, bool want_grad) {
  lv_tensor *t = lv_graph_tensor(g, sp->dtype, sp->shape);
  ck_assert_ptr_nonnull(t);
  memcpy(t->data, sp->data, (size_t)lv_shape_numel(&sp->shape) * lv_dtype_size(sp->dtype));
  t->requires_grad = want_grad && sp->grad;
  return t;
}

/* sum(out * w) in double, w a fixed pseudo-random weighting so every output matters
 * differently. */
static inline double weighted(const lv_tensor *out) {
  double s = 0;
  for (int64_t i = 0; i < lv_tensor_numel(out); i++) s += lv_f32(out)[i] * (0.5 + 0.37 * (double)((i * 7919) % 13));
  return s;
}

static inline double eval_loss(lv_graph *g, int n, spec *in, fwd_fn f, const void *ctx) {
  lv_graph_reset(g);
  lv_tensor *t[MAXIN];
  for (int i = 0; i < n; i++) t[i] = make_input(g, &in[i], false);
  lv_tensor *out = f(g, t, ctx);
  ck_assert_msg(out != NULL, "forward failed");
  return weighted(out);
}

static inline void gradcheck(const char *name, int n, spec *in, fwd_fn f, const void *ctx, double eps,
                      double tol) {
  char full[160];
  snprintf(full, sizeof full, "%s%s%s", name, gradcheck_detail ? " " : "", gradcheck_detail ? gradcheck_detail : "");
  name = full;
  lv_graph *g = lv_graph_create(0);
  lv_tensor *t[MAXIN];
  for (int i = 0; i < n; i++) t[i] = make_input(g, &in[i], true);
  lv_tensor *out = f(g, t, ctx);
  lv_status st = lv_graph_status(g);
  ck_assert_msg(st == NULL, "%s: %s", name, st ? lv_status_msg(st) : "");
  /* loss = sum(out * w), built from ops so backward runs through them. */
  lv_tensor *w = lv_graph_tensor(g, LV_F32, out->shape);
  for (int64_t i = 0; i < lv_tensor_numel(out); i++) lv_f32(w)[i] = (float)(0.5 + 0.37 * (double)((i * 7919) % 13));
  lv_tensor *loss = lv_op_reduce_sum(g, lv_op_mul(g, out, w), LV_ALL_AXES, false);
  st = lv_graph_backward(g, loss);
  ck_assert_msg(st == NULL, "%s: backward: %s", name, st ? lv_status_msg(st) : "");
  float *grads[MAXIN] = {0};
  for (int i = 0; i < n; i++) {
    if (!in[i].grad || in[i].dtype != LV_F32) continue;
    int64_t m = lv_shape_numel(&in[i].shape);
    grads[i] = malloc(sizeof(float) * (size_t)(m ? m : 1));
    ck_assert_msg(t[i]->grad != NULL, "%s: input %d got no gradient", name, i);
    memcpy(grads[i], t[i]->grad->data, sizeof(float) * (size_t)m);
  }
  for (int i = 0; i < n; i++) {
    if (!grads[i]) continue;
    float *x = in[i].data;
    int64_t m = lv_shape_numel(&in[i].shape);
    for (int64_t j = 0; j < m; j++) {
      float keep = x[j];
      x[j] = keep + (float)eps;
      double lp = eval_loss(g, n, in, f, ctx);
      x[j] = keep - (float)eps;
      double lm = eval_loss(g, n, in, f, ctx);
      x[j] = keep;
      double num = (lp - lm) / (2 * eps), an = grads[i][j];
      double err = fabs(num - an) / fmax(1.0, fmax(fabs(num), fabs(an)));
      ck_assert_msg(err < tol, "%s: input %d element %lld: analytic %.6f numeric %.6f", name, i,
                    (long long)j, an, num);
    }
    free(grads[i]);
  }
  for (int i = 0; i < n; i++) free(in[i].data);
  lv_graph_destroy(g);
}

#endif
