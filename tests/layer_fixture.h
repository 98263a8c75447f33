/* Helpers for layer suites (header-only): a layer built from its registered params with
 * a few settings, its var store and a graph; and a finite-difference check of a scalar
 * loss against the gradients of the layer's variables (and of float inputs). */
#ifndef LV_TESTS_LAYER_FIXTURE_H
#define LV_TESTS_LAYER_FIXTURE_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "core/graph.h"
#include "core/ops.h"
#include "core/variable.h"
#include "layers/layer.h"

/* Params of class cls from its registered defaults with "key=value" settings: True /
 * False set bools, a number with '.' or 'e' a float, an integer an int, else a string. */
static inline lv_params *lf_params(const char *cls, const char *const *settings) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  for (int i = 0; settings && settings[i]; i++) {
    char key[128];
    const char *eq = strchr(settings[i], '=');
    ck_assert(eq && (size_t)(eq - settings[i]) < sizeof key);
    memcpy(key, settings[i], (size_t)(eq - settings[i]));
    key[eq - settings[i]] = 0;
    const char *v = eq + 1;
    char *end;
    if (!strcmp(v, "True") || !strcmp(v, "False")) {
      EXPECT_OK(lv_params_set_bool(p, key, !strcmp(v, "True")));
    } else if (*v && (strtoll(v, &end, 10), *end == 0)) {
      EXPECT_OK(lv_params_set_int(p, key, strtoll(v, NULL, 10)));
    } else if (*v && (strtod(v, &end), *end == 0)) {
      EXPECT_OK(lv_params_set_float(p, key, strtod(v, NULL)));
    } else {
      EXPECT_OK(lv_params_set_string(p, key, v));
    }
  }
  lv_params_freeze(p);
  return p;
}
#define LF_SET(...) ((const char *const[]){__VA_ARGS__, NULL})

typedef struct {
  lv_params *p;
  lv_varstore *vs;
  lv_layer *l;
  lv_graph *g;
} lf_fixture;

static inline void lf_open(lf_fixture *f, const char *cls, const char *const *settings, uint64_t seed) {
  f->p = lf_params(cls, settings);
  f->vs = lv_varstore_create();
  EXPECT_OK(lv_layer_create(f->p, NULL, f->vs, &f->l));
  EXPECT_OK(lv_varstore_finalize(f->vs, seed));
  lv_varstore_zero_grads(f->vs);
  f->g = lv_graph_create(0);
}

static inline void lf_close(lf_fixture *f) {
  lv_graph_destroy(f->g);
  lv_layer_free(f->l);
  lv_varstore_destroy(f->vs);
  lv_params_free(f->p);
}

static inline void lf_ok(lv_graph *g) {
  lv_status s = lv_graph_status(g);
  ck_assert_msg(!s, "%s", s ? lv_status_msg(s) : "");
}

/* A float32 arena tensor from host values. */
static inline lv_tensor *lf_tensor(lv_graph *g, lv_shape s, const float *v) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, s);
  ck_assert_ptr_nonnull(t);
  memcpy(t->data, v, sizeof(float) * (size_t)lv_shape_numel(&s));
  return t;
}
static inline lv_tensor *lf_ids(lv_graph *g, lv_shape s, const int32_t *v) {
  lv_tensor *t = lv_graph_tensor(g, LV_I32, s);
  ck_assert_ptr_nonnull(t);
  memcpy(t->data, v, sizeof(int32_t) * (size_t)lv_shape_numel(&s));
  return t;
}

static inline double lf_scalar(const lv_tensor *t) {
  ck_assert_ptr_nonnull(t);
  double v;
  EXPECT_OK(lv_tensor_item(t, &v));
  return v;
}

/* Builds the scalar loss on a reset graph; ctx carries the inputs. */
typedef lv_tensor *(*lf_loss_fn)(lf_fixture *f, void *ctx);

/* Runs loss forward and backward once, then compares every listed element's gradient
 * with the central difference (eps) of the loss. elems: for each variable (by name) a
 * list of flat indices; NULL names end the list; an index list ending in -1. Elements
 * of a variable the loss does not touch must have zero gradient too. */
typedef struct {
  const char *var;
  int64_t idx[64];
} lf_elems;

static inline void lf_gradcheck(lf_fixture *f, lf_loss_fn loss_fn, void *ctx, const lf_elems *elems, double eps,
                                double tol) {
  lv_graph_reset(f->g);
  lv_varstore_zero_grads(f->vs);
  lv_tensor *loss = loss_fn(f, ctx);
  lf_ok(f->g);
  EXPECT_OK(lv_graph_backward(f->g, loss));
  for (const lf_elems *e = elems; e->var; e++) {
    lv_var *v = lv_varstore_find(f->vs, e->var);
    ck_assert_msg(v, "no variable %s", e->var);
    for (int k = 0; e->idx[k] >= 0; k++) {
      int64_t j = e->idx[k];
      ck_assert(j < lv_tensor_numel(&v->value));
      float *x = lv_f32(&v->value), keep = x[j];
      x[j] = keep + (float)eps;
      lv_graph_reset(f->g);
      double lp = lf_scalar(loss_fn(f, ctx));
      x[j] = keep - (float)eps;
      lv_graph_reset(f->g);
      double lm = lf_scalar(loss_fn(f, ctx));
      x[j] = keep;
      double num = (lp - lm) / (2 * eps), an = lv_f32(&v->grad)[j];
      double err = fabs(num - an) / fmax(1.0, fmax(fabs(num), fabs(an)));
      ck_assert_msg(err < tol, "%s element %lld: analytic %.6f numeric %.6f", e->var, (long long)j, an, num);
    }
  }
  lv_graph_reset(f->g);
}

#endif
