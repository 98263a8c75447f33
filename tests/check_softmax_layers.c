/* SimpleFullSoftmax: sharded variables (weight_k [D, C/n], bias_k [C/n]) as Lingvo names
 * them, every output of its FProp against values computed here in double (per-token
 * weights, UniformLabelSmoother targets, class probabilities), chunked against
 * unchunked, errors, finite differences. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "layer_fixture.h"
#include "layers/full_softmax.h"

enum { B = 2, T = 3, N = B * T, D = 5, C = 6 };

/* Fills weight_k / bias_k with fixed values; W [D, C] and bias [C] receive the full
 * (concatenated) matrices. */
static void set_weights(lf_fixture *f, int shards, double W[D][C], double *bias) {
  const int per = C / shards;
  for (int k = 0; k < shards; k++) {
    char name[64];
    snprintf(name, sizeof name, "sm/weight_%d/var", k);
    lv_var *w = lv_varstore_find(f->vs, name);
    ck_assert_msg(w, "missing %s", name);
    for (int i = 0; i < D; i++)
      for (int j = 0; j < per; j++) {
        float v = (float)(0.6 * sin(1.3 * i + 0.7 * (k * per + j) + 0.2));
        lv_f32(&w->value)[i * per + j] = v;
        W[i][k * per + j] = v;
      }
    snprintf(name, sizeof name, "sm/bias_%d/var", k);
    lv_var *b = lv_varstore_find(f->vs, name);
    for (int j = 0; j < per; j++) {
      float v = bias ? (float)(0.1 * (k * per + j) - 0.2) : 0.0f;
      if (b) lv_f32(&b->value)[j] = v;
      if (bias) bias[k * per + j] = v;
    }
  }
}

static void inputs(float *x, float *w, int32_t *ids) {
  for (int i = 0; i < N * D; i++) x[i] = (float)cos(0.9 * i + 0.3);
  const float wv[N] = {1, 0.5f, 0, 1, 2, 1};
  const int32_t iv[N] = {0, 5, 3, 2, 2, 4};
  memcpy(w, wv, sizeof wv);
  memcpy(ids, iv, sizeof iv);
}

/* Reference: logits, log-probs, xent against the smoothed target (u) or probs. */
static void reference(const float *x, double W[D][C], const double *bias, const int32_t *ids, const float *probs,
                      double u, double logits[N][C], double logp[N][C], double *xent, int *amax) {
  for (int n = 0; n < N; n++) {
    double m = -1e300;
    amax[n] = 0;
    for (int c = 0; c < C; c++) {
      double s = bias ? bias[c] : 0;
      for (int i = 0; i < D; i++) s += x[n * D + i] * W[i][c];
      logits[n][c] = s;
      if (s > m) m = s, amax[n] = c;
    }
    double z = 0;
    for (int c = 0; c < C; c++) z += exp(logits[n][c] - m);
    xent[n] = 0;
    for (int c = 0; c < C; c++) {
      logp[n][c] = logits[n][c] - m - log(z);
      double t = probs ? probs[n * C + c] : (c == ids[n] ? 1 - u : u / (C - 1));
      xent[n] -= t * logp[n][c];
    }
  }
}

START_TEST(test_softmax_variables) {
  lf_fixture f;
  lf_open(&f, "SimpleFullSoftmax", LF_SET("name=sm", "input_dim=5", "num_classes=6", "num_shards=3", "bias_init=0.5"), 1);
  ck_assert_int_eq(lv_varstore_count(f.vs), 6);
  for (int k = 0; k < 3; k++) {
    char name[64];
    snprintf(name, sizeof name, "sm/weight_%d/var", k);
    lv_var *w = lv_varstore_find(f.vs, name);
    ck_assert_msg(w, "missing %s", name);
    ck_assert_int_eq(w->value.shape.rank, 2);
    ck_assert_int_eq(w->value.shape.d[0], 5);
    ck_assert_int_eq(w->value.shape.d[1], 2);
    snprintf(name, sizeof name, "sm/bias_%d/var", k);
    lv_var *b = lv_varstore_find(f.vs, name);
    ck_assert_msg(b, "missing %s", name);
    ck_assert_int_eq(b->value.shape.rank, 1);
    ck_assert_int_eq(b->value.shape.d[0], 2);
    ck_assert_float_eq(lv_f32(&b->value)[1], 0.5f);
  }
  lf_close(&f);
  lf_open(&f, "SimpleFullSoftmax", LF_SET("name=sm", "input_dim=5", "num_classes=6", "use_bias=False"), 1);
  ck_assert_int_eq(lv_varstore_count(f.vs), 1);
  ck_assert_ptr_nonnull(lv_varstore_find(f.vs, "sm/weight_0/var"));
  lf_close(&f);
  const char *const *bad[] = {LF_SET("name=sm", "input_dim=5", "num_classes=6", "num_shards=4"),
                              LF_SET("name=sm", "input_dim=5", "num_classes=6", "num_sampled=10"),
                              LF_SET("name=sm", "input_dim=0", "num_classes=6")};
  const char *want[] = {"num_shards", "num_sampled", "input_dim"};
  for (int i = 0; i < 3; i++) {
    lv_params *p = lf_params("SimpleFullSoftmax", bad[i]);
    lv_varstore *vs = lv_varstore_create();
    lv_layer *l = NULL;
    EXPECT_ERR(lv_layer_create(p, "dec", vs, &l), LV_ERR_INVALID, "dec/sm", want[i]);
    lv_varstore_destroy(vs);
    lv_params_free(p);
  }
}
END_TEST

/* Every output of FProp on [B, T, D] inputs with 2 shards, per-token weights (one 0)
 * and label smoothing u (0 and 0.1). */
static void check_outputs(double u, int64_t chunk) {
  char chunk_set[32];
  snprintf(chunk_set, sizeof chunk_set, "chunk_size=%lld", (long long)chunk);
  lf_fixture f;
  lf_open(&f, "SimpleFullSoftmax", LF_SET("name=sm", "input_dim=5", "num_classes=6", "num_shards=2", chunk_set), 1);
  double W[D][C], bias[C], logits[N][C], logp[N][C], xent[N];
  int amax[N];
  set_weights(&f, 2, W, bias);
  float x[N * D], w[N];
  int32_t ids[N];
  inputs(x, w, ids);
  reference(x, W, bias, ids, NULL, u, logits, logp, xent, amax);
  lv_xent_output o;
  ck_assert(lv_softmax_layer_fprop((lv_softmax_layer *)f.l, f.g, lf_tensor(f.g, lv_shape3(B, T, D), x),
                                   lf_tensor(f.g, lv_shape2(B, T), w), lf_ids(f.g, lv_shape3(B, T, 1), ids), NULL,
                                   (float)u, &o));
  lf_ok(f.g);
  if (chunk) {
    ck_assert_ptr_null(o.logits);
    ck_assert_ptr_null(o.log_probs);
  } else {
    ck_assert_int_eq(o.logits->shape.rank, 3);
    ck_assert_int_eq(o.logits->shape.d[2], C);
    ck_assert_int_eq(o.log_probs->shape.rank, 3);
    for (int n = 0; n < N; n++)
      for (int c = 0; c < C; c++) {
        ck_assert_float_eq_tol(lv_f32(o.logits)[n * C + c], logits[n][c], 1e-5);
        ck_assert_float_eq_tol(lv_f32(o.log_probs)[n * C + c], logp[n][c], 1e-5);
      }
  }
  ck_assert_int_eq(o.per_example_xent->shape.rank, 2);
  ck_assert_int_eq(o.per_example_argmax->shape.rank, 2);
  ck_assert_int_eq(o.per_example_argmax->dtype, LV_I32);
  double tx = 0, tw = 0;
  for (int n = 0; n < N; n++) {
    ck_assert_float_eq_tol(lv_f32(o.per_example_xent)[n], xent[n], 1e-5);
    ck_assert_int_eq(lv_i32(o.per_example_argmax)[n], amax[n]);
    ck_assert_float_eq(lv_f32(o.per_example_weight)[n], w[n]);
    tx += xent[n] * w[n];
    tw += w[n];
  }
  ck_assert_float_eq_tol(lf_scalar(o.total_xent), tx, 1e-5);
  ck_assert_float_eq_tol(lf_scalar(o.total_weight), tw, 1e-6);
  ck_assert_float_eq_tol(lf_scalar(o.avg_xent), tx / tw, 1e-5);
  lf_close(&f);
}

START_TEST(test_softmax_outputs) { check_outputs(0.0, 0); }
END_TEST
START_TEST(test_softmax_label_smoothing) {
  check_outputs(0.1, 0);
  check_outputs(0.5, 0);
}
END_TEST

START_TEST(test_softmax_class_probabilities_and_zero_weight) {
  lf_fixture f;
  lf_open(&f, "SimpleFullSoftmax", LF_SET("name=sm", "input_dim=5", "num_classes=6", "num_shards=3"), 1);
  double W[D][C], bias[C], logits[N][C], logp[N][C], xent[N];
  int amax[N];
  set_weights(&f, 3, W, bias);
  float x[N * D], w[N], probs[N * C];
  int32_t ids[N];
  inputs(x, w, ids);
  for (int n = 0; n < N; n++) {
    double z = 0;
    for (int c = 0; c < C; c++) z += (probs[n * C + c] = (float)(1 + (n * 7 + c * 3) % 5));
    for (int c = 0; c < C; c++) probs[n * C + c] = (float)(probs[n * C + c] / z);
  }
  reference(x, W, bias, NULL, probs, 0, logits, logp, xent, amax);
  /* Through the generic fprop, rank-2 inputs; every weight 0: avg_xent = 0 / 1e-6 = 0. */
  float zero[N] = {0};
  lv_nmap in, o;
  lv_nmap_init(&in);
  lv_nmap_init(&o);
  EXPECT_OK(lv_nmap_set(&in, "act", lf_tensor(f.g, lv_shape2(N, D), x)));
  EXPECT_OK(lv_nmap_set(&in, "class_weights", lf_tensor(f.g, lv_shape1(N), zero)));
  EXPECT_OK(lv_nmap_set(&in, "class_probabilities", lf_tensor(f.g, lv_shape2(N, C), probs)));
  ck_assert(lv_layer_fprop(f.l, f.g, &in, &o));
  for (int n = 0; n < N; n++) {
    ck_assert_float_eq_tol(lv_f32(lv_nmap_get(&o, "per_example_xent"))[n], xent[n], 1e-5);
    ck_assert_int_eq(lv_i32(lv_nmap_get(&o, "per_example_argmax"))[n], amax[n]);
  }
  ck_assert_ptr_nonnull(lv_nmap_get(&o, "logits"));
  ck_assert_ptr_nonnull(lv_nmap_get(&o, "log_probs"));
  ck_assert_float_eq(lf_scalar(lv_nmap_get(&o, "total_weight")), 0.0);
  ck_assert_float_eq(lf_scalar(lv_nmap_get(&o, "avg_xent")), 0.0);
  /* Both class_ids and class_probabilities: an error naming the layer. */
  EXPECT_OK(lv_nmap_set(&in, "class_ids", lf_ids(f.g, lv_shape1(N), ids)));
  lv_nmap_clear(&o);
  ck_assert(!lv_layer_fprop(f.l, f.g, &in, &o));
  lv_status s = lv_graph_status(f.g);
  ck_assert_msg(s && strstr(lv_status_msg(s), "sm: exactly one"), "%s", s ? lv_status_msg(s) : "no error");
  lv_status_free(s);
  /* Label smoothing applies to class ids, not to given probabilities. */
  lv_graph_reset(f.g);
  lv_xent_output xo;
  ck_assert(!lv_softmax_layer_fprop((lv_softmax_layer *)f.l, f.g, lf_tensor(f.g, lv_shape2(N, D), x),
                                    lf_tensor(f.g, lv_shape1(N), w), NULL, lf_tensor(f.g, lv_shape2(N, C), probs),
                                    0.1f, &xo));
  s = lv_graph_status(f.g);
  ck_assert_msg(s && strstr(lv_status_msg(s), "with class_probabilities"), "%s", s ? lv_status_msg(s) : "no error");
  lv_status_free(s);
  lv_nmap_free(&in);
  lv_nmap_free(&o);
  lf_close(&f);
}
END_TEST

typedef struct {
  float x[N * D], w[N];
  int32_t ids[N];
  float u;
} sm_ctx;

/* avg_xent plus a term on log_probs (when present) so their gradient is checked too. */
static lv_tensor *sm_loss(lf_fixture *f, void *vctx) {
  sm_ctx *c = vctx;
  lv_xent_output o;
  ck_assert(lv_softmax_layer_fprop((lv_softmax_layer *)f->l, f->g, lf_tensor(f->g, lv_shape2(N, D), c->x),
                                   lf_tensor(f->g, lv_shape1(N), c->w), lf_ids(f->g, lv_shape1(N), c->ids), NULL,
                                   c->u, &o));
  lv_tensor *loss = lv_op_scale(f->g, o.avg_xent, 3.0f);
  if (o.log_probs) {
    lv_tensor *lp = lv_op_slice(f->g, o.log_probs, 1, 1, 2);
    loss = lv_op_add(f->g, loss, lv_op_scale(f->g, lv_op_reduce_sum(f->g, lp, LV_ALL_AXES, false), 0.1f));
  }
  return loss;
}

static void gradcheck(const char *chunk_set) {
  lf_fixture f;
  lf_open(&f, "SimpleFullSoftmax", LF_SET("name=sm", "input_dim=5", "num_classes=6", "num_shards=2", chunk_set), 1);
  double W[D][C], bias[C];
  set_weights(&f, 2, W, bias);
  sm_ctx c;
  inputs(c.x, c.w, c.ids);
  c.u = 0.2f;
  lf_elems e[] = {{"sm/weight_0/var", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, -1}},
                  {"sm/weight_1/var", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, -1}},
                  {"sm/bias_0/var", {0, 1, 2, -1}},
                  {"sm/bias_1/var", {0, 1, 2, -1}},
                  {NULL, {-1}}};
  lf_gradcheck(&f, sm_loss, &c, e, 1e-3, 2e-3);
  lf_close(&f);
}

START_TEST(test_softmax_gradcheck) { gradcheck("chunk_size=0"); }
END_TEST

START_TEST(test_softmax_chunked_outputs) {
  check_outputs(0.0, 4);  /* chunks of 4 and 2 classes */
  check_outputs(0.1, 5);
  check_outputs(0.2, 64); /* one chunk larger than C */
}
END_TEST

START_TEST(test_softmax_chunked_gradcheck) { gradcheck("chunk_size=4"); }
END_TEST

/* Losses and every gradient of a bigger case agree chunked and unchunked; the chunked
 * step's arena peak stays well under one [N, C] logits tensor. */
typedef struct {
  float loss, xent[512];
  int32_t amax[512];
  float *gx, *gw, *gb;
  size_t peak;
} run_out;

static void run_big(int64_t chunk, run_out *r) {
  enum { BN = 512, BD = 32, BC = 4096 };
  char cs[32];
  snprintf(cs, sizeof cs, "chunk_size=%lld", (long long)chunk);
  lf_fixture f;
  lf_open(&f, "SimpleFullSoftmax",
          LF_SET("name=sm", "input_dim=32", "num_classes=4096", "num_shards=4", "bias_init=0.01", cs), 3);
  float *x = malloc(sizeof(float) * BN * BD), w[BN];
  int32_t ids[BN];
  for (int i = 0; i < BN * BD; i++) x[i] = (float)sin(0.37 * i);
  for (int i = 0; i < BN; i++) w[i] = (float)(i % 3), ids[i] = (i * 977) % BC;
  lv_tensor *xt = lf_tensor(f.g, lv_shape3(8, 64, BD), x);
  xt->requires_grad = true;
  lv_xent_output o;
  ck_assert(lv_softmax_layer_fprop((lv_softmax_layer *)f.l, f.g, xt, lf_tensor(f.g, lv_shape2(8, 64), w),
                                   lf_ids(f.g, lv_shape2(8, 64), ids), NULL, 0.1f, &o));
  lf_ok(f.g);
  EXPECT_OK(lv_graph_backward(f.g, o.avg_xent));
  r->peak = lv_graph_arena_peak(f.g);
  r->loss = (float)lf_scalar(o.avg_xent);
  memcpy(r->xent, o.per_example_xent->data, sizeof r->xent);
  memcpy(r->amax, o.per_example_argmax->data, sizeof r->amax);
  r->gx = malloc(sizeof(float) * BN * BD);
  memcpy(r->gx, xt->grad->data, sizeof(float) * BN * BD);
  r->gw = malloc(sizeof(float) * BD * BC);
  r->gb = malloc(sizeof(float) * BC);
  for (int k = 0; k < 4; k++) {
    char name[64];
    snprintf(name, sizeof name, "sm/weight_%d/var", k);
    const float *gw = lv_f32(&lv_varstore_find(f.vs, name)->grad);
    for (int i = 0; i < BD; i++) memcpy(r->gw + i * BC + k * 1024, gw + i * 1024, sizeof(float) * 1024);
    snprintf(name, sizeof name, "sm/bias_%d/var", k);
    memcpy(r->gb + k * 1024, lv_f32(&lv_varstore_find(f.vs, name)->grad), sizeof(float) * 1024);
  }
  free(x);
  lf_close(&f);
}

static double max_rel(const float *a, const float *b, int64_t n) {
  double m = 0, s = 1e-12;
  for (int64_t i = 0; i < n; i++) s = fmax(s, fabs(b[i]));
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
  return m / s;
}

START_TEST(test_softmax_chunked_matches_dense) {
  run_out d, c;
  run_big(0, &d);
  run_big(500, &c);
  ck_assert_float_eq_tol(c.loss, d.loss, 1e-5 * fabs(d.loss));
  ck_assert(max_rel(c.xent, d.xent, 512) < 1e-5);
  for (int i = 0; i < 512; i++) ck_assert_int_eq(c.amax[i], d.amax[i]);
  double ex = max_rel(c.gx, d.gx, 512 * 32), ew = max_rel(c.gw, d.gw, 32 * 4096), eb = max_rel(c.gb, d.gb, 4096);
  ck_assert_msg(ex < 1e-5 && ew < 1e-5 && eb < 1e-5, "gradients differ: x %g w %g b %g", ex, ew, eb);
  /* One [512, 4096] float32 logits tensor is 8 MiB; the dense step holds several. */
  const size_t logits_bytes = 512u * 4096u * 4u;
  ck_assert_msg(d.peak > 2 * logits_bytes, "dense peak %zu", d.peak);
  ck_assert_msg(c.peak < logits_bytes / 2, "chunked peak %zu bytes, one logits tensor is %zu", c.peak, logits_bytes);
  free(d.gx), free(d.gw), free(d.gb), free(c.gx), free(c.gw), free(c.gb);
}
END_TEST

/* A large vocabulary is chunked without being asked (chunk_size 0, the default): no
 * logits, an arena peak under one [N, C] logits tensor, the dense path's loss and
 * gradients; chunk_size -1 keeps the dense path. */
static void run_auto(const char *chunk_set, float *loss, float *gx, size_t *peak, bool *has_logits) {
  enum { AN = 64, AD = 8, AC = LV_SOFTMAX_AUTO_CHUNK_MIN_CLASSES };
  char nc[32];
  snprintf(nc, sizeof nc, "num_classes=%d", AC);
  lf_fixture f;
  lf_open(&f, "SimpleFullSoftmax", LF_SET("name=sm", "input_dim=8", nc, chunk_set), 5);
  float x[AN * AD], w[AN];
  int32_t ids[AN];
  for (int i = 0; i < AN * AD; i++) x[i] = (float)cos(0.41 * i);
  for (int i = 0; i < AN; i++) w[i] = 1.0f, ids[i] = (i * 4099) % AC;
  lv_tensor *xt = lf_tensor(f.g, lv_shape2(AN, AD), x);
  xt->requires_grad = true;
  lv_xent_output o;
  ck_assert(lv_softmax_layer_fprop((lv_softmax_layer *)f.l, f.g, xt, lf_tensor(f.g, lv_shape1(AN), w),
                                   lf_ids(f.g, lv_shape1(AN), ids), NULL, 0.1f, &o));
  lf_ok(f.g);
  EXPECT_OK(lv_graph_backward(f.g, o.avg_xent));
  *peak = lv_graph_arena_peak(f.g);
  *loss = (float)lf_scalar(o.avg_xent);
  *has_logits = o.logits != NULL;
  memcpy(gx, xt->grad->data, sizeof(float) * AN * AD);
  lf_close(&f);
}

START_TEST(test_softmax_large_vocab_chunked_by_default) {
  float ld, la, gd[64 * 8], ga[64 * 8];
  size_t pd, pa;
  bool logits_d, logits_a;
  run_auto("chunk_size=-1", &ld, gd, &pd, &logits_d);
  run_auto("chunk_size=0", &la, ga, &pa, &logits_a);
  ck_assert(logits_d && !logits_a);
  ck_assert_float_eq_tol(la, ld, 1e-5 * fabs(ld));
  ck_assert_msg(max_rel(ga, gd, 64 * 8) < 1e-5, "gradients differ: %g", max_rel(ga, gd, 64 * 8));
  const size_t logits_bytes = 64u * LV_SOFTMAX_AUTO_CHUNK_MIN_CLASSES * 4u;
  ck_assert_msg(pd > 2 * logits_bytes, "dense peak %zu", pd);
  ck_assert_msg(pa < logits_bytes / 2, "default peak %zu bytes, one logits tensor is %zu", pa, logits_bytes);
}
END_TEST

/* UniformLabelSmoother's targets; fed as class_probabilities they give the same loss as
 * the fused label_smoothing path. */
START_TEST(test_label_smoother) {
  lf_fixture sm, f;
  lf_open(&sm, "UniformLabelSmoother", LF_SET("name=ls", "num_classes=6", "uncertainty=0.2"), 1);
  lv_label_smoother *ls = (lv_label_smoother *)sm.l;
  float u = 0;
  ck_assert(lv_label_smoother_uniform(ls, &u));
  ck_assert_float_eq(u, 0.2f);
  lf_open(&f, "SimpleFullSoftmax", LF_SET("name=sm", "input_dim=5", "num_classes=6", "num_shards=2"), 1);
  double W[D][C], bias[C];
  set_weights(&f, 2, W, bias);
  float x[N * D], w[N];
  int32_t ids[N];
  inputs(x, w, ids);
  lv_tensor *probs = lv_label_smoother_fprop(ls, f.g, lf_ids(f.g, lv_shape2(B, T), ids), NULL);
  lf_ok(f.g);
  ck_assert_int_eq(probs->shape.rank, 3);
  ck_assert_int_eq(probs->shape.d[2], C);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      ck_assert_float_eq_tol(lv_f32(probs)[n * C + c], c == ids[n] ? 0.8 : 0.04, 1e-7);
  lv_tensor *xt = lf_tensor(f.g, lv_shape3(B, T, D), x), *wt = lf_tensor(f.g, lv_shape2(B, T), w);
  lv_xent_output a, b;
  ck_assert(lv_softmax_layer_fprop((lv_softmax_layer *)f.l, f.g, xt, wt, NULL, probs, 0.0f, &a));
  ck_assert(lv_softmax_layer_fprop((lv_softmax_layer *)f.l, f.g, xt, wt, lf_ids(f.g, lv_shape2(B, T), ids), NULL, u,
                                   &b));
  lf_ok(f.g);
  for (int n = 0; n < N; n++)
    ck_assert_float_eq_tol(lv_f32(a.per_example_xent)[n], lv_f32(b.per_example_xent)[n], 1e-5);
  ck_assert_float_eq_tol(lf_scalar(a.avg_xent), lf_scalar(b.avg_xent), 1e-5);
  lf_close(&f);
  lf_close(&sm);
  /* A larger uncertainty on one target id (Lingvo's token_id_uncertainty_larger); an
   * out-of-range label gets the off value everywhere, as tf.one_hot does. */
  lf_open(&sm, "UniformLabelSmoother",
          LF_SET("name=ls", "num_classes=5", "uncertainty=0.1", "uncertainty_larger=0.5",
                 "token_id_uncertainty_larger=3"),
          1);
  ls = (lv_label_smoother *)sm.l;
  ck_assert(!lv_label_smoother_uniform(ls, &u));
  const int32_t lab[3] = {1, 4, 7}, tid[3] = {3, 0, 2};
  lv_nmap in, o;
  lv_nmap_init(&in);
  lv_nmap_init(&o);
  EXPECT_OK(lv_nmap_set(&in, "target_labels", lf_ids(sm.g, lv_shape1(3), lab)));
  ck_assert(!lv_layer_fprop(sm.l, sm.g, &in, &o)); /* target_ids are needed */
  lv_status st = lv_graph_status(sm.g);
  ck_assert_msg(st && strstr(lv_status_msg(st), "ls: int32 target_labels and target_ids"), "%s",
                st ? lv_status_msg(st) : "no error");
  lv_status_free(st);
  lv_graph_reset(sm.g);
  EXPECT_OK(lv_nmap_set(&in, "target_labels", lf_ids(sm.g, lv_shape1(3), lab)));
  EXPECT_OK(lv_nmap_set(&in, "target_ids", lf_ids(sm.g, lv_shape1(3), tid)));
  lv_nmap_clear(&o);
  ck_assert(lv_layer_fprop(sm.l, sm.g, &in, &o));
  const float *pr = lv_f32(lv_nmap_get(&o, "act"));
  const float want[3][5] = {{0.125f, 0.5f, 0.125f, 0.125f, 0.125f},
                            {0.025f, 0.025f, 0.025f, 0.025f, 0.9f},
                            {0.025f, 0.025f, 0.025f, 0.025f, 0.025f}};
  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 5; c++) ck_assert_float_eq_tol(pr[i * 5 + c], want[i][c], 1e-7);
  lv_nmap_free(&in);
  lv_nmap_free(&o);
  lf_close(&sm);
}
END_TEST

int main(void) {
  Suite *s = suite_create("softmax_layers");
  TCase *tc = tcase_create("softmax");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_softmax_variables);
  tcase_add_test(tc, test_softmax_outputs);
  tcase_add_test(tc, test_softmax_label_smoothing);
  tcase_add_test(tc, test_softmax_class_probabilities_and_zero_weight);
  tcase_add_test(tc, test_softmax_gradcheck);
  tcase_add_test(tc, test_label_smoother);
  tcase_add_test(tc, test_softmax_chunked_outputs);
  tcase_add_test(tc, test_softmax_chunked_gradcheck);
  tcase_add_test(tc, test_softmax_chunked_matches_dense);
  tcase_add_test(tc, test_softmax_large_vocab_chunked_by_default);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
