/* PyTorch parity harness for the Check suites (header-only; include from a
 * tests/check_parity_<family>.c suite).
 *
 * A case builds a layer in lingvoc, runs forward and backward on a padded batch, and
 * dumps what it used and what it got into one file: every variable's value and gradient
 * ("<var name>" and "grad:<var name>"), the inputs ("in:<key>") and their gradients
 * ("grad:in:<key>"), the outputs ("out:<key>"), the upstream gradient of each output
 * ("dout:<key>": the loss is sum(out * dout)) and scalar attributes ("attr:<key>").
 * Then tests/parity/<script>.py, a PyTorch reference written for the test, loads the
 * file (tests/parity/lvdump.py), sets the same weights, recomputes everything in float64
 * and compares within a relative tolerance (1e-5 unless the script says otherwise).
 *
 * File format (little-endian): "LVDUMP1\n", then per entry one text line
 * "<name> <dtype f32|i32|f64> <rank> <d0> ... <dn-1>\n" followed by the raw data.
 *
 * PyTorch comes from Debian's python3-torch for /usr/bin/python3 (LV_PYTHON overrides);
 * when it cannot be imported the case is skipped (lv_test_skip: the suite exits 77). */
#ifndef LV_TESTS_PARITY_H
#define LV_TESTS_PARITY_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/status.h"
#include "check_util.h"
#include "core/graph.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "core/variable.h"

typedef struct {
  FILE *f;
  char path[512];
} lv_parity;

static inline const char *lv_parity_python(void) {
  const char *py = getenv("LV_PYTHON");
  return py && *py ? py : "/usr/bin/python3";
}

/* True if the reference interpreter imports torch (checked once per process). When it
 * does not, prints why the parity cases are skipped. */
static inline bool lv_parity_have_torch(void) {
  static int have = -1;
  if (have < 0) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s -c 'import torch, numpy' >/dev/null 2>&1", lv_parity_python());
    have = system(cmd) == 0;
    if (!have)
      lv_test_skip("PyTorch parity checks: %s cannot import torch and numpy (install python3-torch: "
                   "scripts/install-deps.sh does, or set LV_PYTHON)",
                   lv_parity_python());
  }
  return have == 1;
}

static inline void lv_parity_open(lv_parity *p, const char *case_name) {
  const char *tmp = getenv("TMPDIR");
  snprintf(p->path, sizeof p->path, "%s/lv_parity_%s_%d.lvd", tmp && *tmp ? tmp : "/tmp", case_name,
           (int)getpid());
  p->f = fopen(p->path, "wb");
  ck_assert_msg(p->f, "cannot write %s", p->path);
  fputs("LVDUMP1\n", p->f);
}

static inline void lv_parity_put_raw(lv_parity *p, const char *name, lv_dtype dt, lv_shape s, const void *host) {
  const char *tn = dt == LV_F32 ? "f32" : dt == LV_I32 ? "i32" : dt == LV_F64 ? "f64" : NULL;
  ck_assert_msg(tn, "parity dump: %s has an unsupported dtype", name);
  fprintf(p->f, "%s %s %d", name, tn, s.rank);
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) {
    fprintf(p->f, " %lld", (long long)s.d[i]);
    n *= s.d[i];
  }
  fputc('\n', p->f);
  size_t es = dt == LV_F64 ? 8 : 4;
  ck_assert(fwrite(host, es, (size_t)n, p->f) == (size_t)n);
}

/* Any tensor on any device (copied to the host). */
static inline void lv_parity_put(lv_parity *p, const char *name, const lv_tensor *t) {
  ck_assert_msg(t, "parity dump: %s is NULL", name);
  size_t es = t->dtype == LV_F64 ? 8 : 4;
  void *buf = malloc(es * (size_t)(lv_tensor_numel(t) ? lv_tensor_numel(t) : 1));
  lv_status s = lv_tensor_to_host(t, buf);
  ck_assert_msg(!s, "parity dump %s: %s", name, s ? lv_status_msg(s) : "");
  lv_parity_put_raw(p, name, t->dtype, t->shape, buf);
  free(buf);
}

static inline void lv_parity_attr(lv_parity *p, const char *key, double v) {
  char name[300];
  snprintf(name, sizeof name, "attr:%s", key);
  lv_parity_put_raw(p, name, LV_F64, lv_shape1(1), &v);
}

/* Every float32 variable of vs and (trainable ones) its gradient. */
static inline void lv_parity_put_vars(lv_parity *p, lv_varstore *vs) {
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    lv_var *v = lv_varstore_get(vs, i);
    if (v->value.dtype != LV_F32) continue;
    lv_parity_put(p, v->name, &v->value);
    if (v->trainable && v->grad.data) {
      char name[LV_VAR_NAME_MAX + 8];
      snprintf(name, sizeof name, "grad:%s", v->name);
      lv_parity_put(p, name, &v->grad);
    }
  }
}

/* A float32 tensor of shape s filled from a fixed pseudo-random stream (uniform in
 * [-scale, scale]) on g's device, dumped under `dump_name`. */
static inline lv_tensor *lv_parity_random(lv_parity *p, lv_graph *g, const char *dump_name, lv_shape s, float scale,
                                          uint64_t seed, bool requires_grad) {
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) n *= s.d[i];
  float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    h[i] = scale * (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  lv_tensor ht = {0};
  ht.dtype = LV_F32, ht.shape = s, ht.data = h;
  lv_tensor *t = lv_graph_from_host(g, &ht);
  ck_assert_msg(t, "parity tensor %s: %s", dump_name, lv_status_msg(lv_graph_status(g)));
  /* A copy in the arena (from_host may return a view of h, freed below). */
  lv_tensor *own = lv_op_scale(g, t, 1.0f);
  ck_assert(own);
  own->requires_grad = requires_grad;
  lv_parity_put_raw(p, dump_name, LV_F32, s, h);
  free(h);
  return own;
}

/* An input that requires a gradient, dumped as "in:<key>". */
static inline lv_tensor *lv_parity_input(lv_parity *p, lv_graph *g, const char *key, lv_shape s, float scale,
                                         uint64_t seed) {
  char name[300];
  snprintf(name, sizeof name, "in:%s", key);
  return lv_parity_random(p, g, name, s, scale, seed, true);
}

/* Paddings [T, B] (time_major) or [B, T] with 0 for the first lens[b] steps and 1
 * after; dumped as "in:<key>" (no gradient). */
static inline lv_tensor *lv_parity_paddings(lv_parity *p, lv_graph *g, const char *key, int64_t t, int64_t b,
                                            const int *lens, bool time_major) {
  float *h = malloc(sizeof(float) * (size_t)(t * b));
  for (int64_t i = 0; i < t; i++)
    for (int64_t j = 0; j < b; j++) h[time_major ? i * b + j : j * t + i] = i < lens[j] ? 0.0f : 1.0f;
  lv_shape s = time_major ? lv_shape2(t, b) : lv_shape2(b, t);
  lv_tensor ht = {0};
  ht.dtype = LV_F32, ht.shape = s, ht.data = h;
  lv_tensor *x = lv_graph_from_host(g, &ht);
  ck_assert(x);
  lv_tensor *own = lv_op_scale(g, x, 1.0f);
  char name[300];
  snprintf(name, sizeof name, "in:%s", key);
  lv_parity_put_raw(p, name, LV_F32, s, h);
  free(h);
  return own;
}

/* Adds sum(out * dout) to *loss (NULL: starts it) with dout a fixed pseudo-random tensor
 * of out's shape; dumps "out:<key>" and "dout:<key>". */
static inline lv_tensor *lv_parity_output(lv_parity *p, lv_graph *g, const char *key, lv_tensor *out,
                                          lv_tensor *loss, uint64_t seed) {
  ck_assert_msg(out, "parity output %s: %s", key, lv_status_msg(lv_graph_status(g)));
  char name[300];
  snprintf(name, sizeof name, "out:%s", key);
  lv_parity_put(p, name, out);
  snprintf(name, sizeof name, "dout:%s", key);
  lv_tensor *d = lv_parity_random(p, g, name, out->shape, 1.0f, seed, false);
  lv_tensor *term = lv_op_reduce_sum(g, lv_op_mul(g, out, d), LV_ALL_AXES, false);
  return loss ? lv_op_add(g, loss, term) : term;
}

/* After lv_graph_backward: dumps grad:in:<key> of an input made by lv_parity_input. */
static inline void lv_parity_put_grad(lv_parity *p, const char *key, const lv_tensor *in) {
  char name[300];
  snprintf(name, sizeof name, "grad:in:%s", key);
  ck_assert_msg(in->grad, "input %s got no gradient", key);
  lv_parity_put(p, name, in->grad);
}

/* Closes the dump and runs tests/parity/<script> on it; the case fails on any mismatch
 * (the script prints a table of relative errors). Removes the dump when it passes. */
static inline void lv_parity_run(lv_parity *p, const char *script) {
  ck_assert(fclose(p->f) == 0);
  p->f = NULL;
  const char *root = getenv("LV_ROOT");
  char cmd[1600];
  snprintf(cmd, sizeof cmd, "%s %s/tests/parity/%s %s", lv_parity_python(), root && *root ? root : ".", script,
           p->path);
  int rc = system(cmd);
  ck_assert_msg(rc == 0, "PyTorch parity failed: %s (dump kept at %s)", cmd, p->path);
  remove(p->path);
}

#endif
