/* The sequence ops of ops.h: forward values against references computed here
 * in double, gradients by finite differences (gradcheck.h), edge cases (padded rows,
 * empty sequences, k == N, chunks that do not divide C), shape/dtype errors, and the
 * same bits with 1 and 2 threads. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "gradcheck.h"
#include "core/graph.h"
#include "core/ops.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"

#define EPS 1e-2
#define TOL 1e-2

static lv_tensor *tensor_of(lv_graph *g, lv_shape s, const float *v) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, s);
  ck_assert_ptr_nonnull(t);
  memcpy(t->data, v, sizeof(float) * (size_t)lv_shape_numel(&s));
  return t;
}

static inline lv_tensor *ids_of(lv_graph *g, lv_shape s, const int32_t *v) {
  lv_tensor *t = lv_graph_tensor(g, LV_I32, s);
  ck_assert_ptr_nonnull(t);
  memcpy(t->data, v, sizeof(int32_t) * (size_t)lv_shape_numel(&s));
  return t;
}

/* The graph's error message (which must exist), checked for a substring; resets g. */
static void expect_graph_err(lv_graph *g, const char *sub) {
  lv_status st = lv_graph_status(g);
  ck_assert_msg(st != NULL, "expected an error containing \"%s\"", sub);
  ck_assert_msg(strstr(lv_status_msg(st), sub), "message lacks \"%s\": %s", sub, lv_status_msg(st));
  lv_status_free(st);
  lv_graph_reset(g);
}

static inline double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }

/* ---- lstm_step ---------------------------------------------------------------- */

typedef struct lstm_cfg {
  float fgb, cap;
  bool out_nl, pad;
  int which; /* 0: concat(c, m), 1: c only, 2: m only */
} lstm_cfg;

static lv_tensor *f_lstm(lv_graph *g, lv_tensor **in, const void *c) {
  const lstm_cfg *l = c;
  lv_tensor *co, *mo;
  if (!lv_op_lstm_step(g, in[0], in[1], in[2], l->pad ? in[3] : NULL, l->fgb, l->cap, l->out_nl, &co, &mo))
    return NULL;
  if (l->which == 1) return co;
  if (l->which == 2) return mo;
  lv_tensor *both[2] = {co, mo};
  return lv_op_concat(g, both, 2, 1);
}

/* Lingvo's formulas in double, row by row. */
static void ref_lstm(int b, int h, const float *gates, const float *cp, const float *mp, const float *pad,
                     const lstm_cfg *l, double *c, double *m) {
  for (int r = 0; r < b; r++)
    for (int j = 0; j < h; j++) {
      const float *gr = gates + r * 4 * h;
      if (pad && pad[r] == 1.0f) {
        c[r * h + j] = cp[r * h + j];
        m[r * h + j] = mp[r * h + j];
        continue;
      }
      double nc = sigm(gr[2 * h + j] + l->fgb) * cp[r * h + j] + sigm(gr[h + j]) * tanh(gr[j]);
      if (l->cap > 0) nc = fmin(fmax(nc, -l->cap), l->cap);
      c[r * h + j] = nc;
      m[r * h + j] = sigm(gr[3 * h + j]) * (l->out_nl ? tanh(nc) : nc);
    }
}

START_TEST(lstm_step_forward_values) {
  const int B = 3, H = 5;
  float *gates = rand_floats(B * 4 * H, 1, -3, 3), *cp = rand_floats(B * H, 2, -2, 2), *mp = rand_floats(B * H, 3, -1, 1);
  float pad[3] = {0, 1, 0};
  lstm_cfg cfgs[4] = {{0, 0, true, true, 0}, {1.0f, 0.5f, true, true, 0}, {0.5f, 0, false, false, 0}, {0, 1.2f, false, true, 0}};
  lv_graph *g = lv_graph_create(0);
  for (int t = 0; t < 4; t++) {
    lv_graph_reset(g);
    const lstm_cfg *l = &cfgs[t];
    lv_tensor *co, *mo;
    ck_assert(lv_op_lstm_step(g, tensor_of(g, lv_shape2(B, 4 * H), gates), tensor_of(g, lv_shape2(B, H), cp),
                              tensor_of(g, lv_shape2(B, H), mp), l->pad ? tensor_of(g, lv_shape2(B, 1), pad) : NULL,
                              l->fgb, l->cap, l->out_nl, &co, &mo));
    double c[15], m[15];
    ref_lstm(B, H, gates, cp, mp, l->pad ? pad : NULL, l, c, m);
    int clipped = 0;
    for (int i = 0; i < B * H; i++) {
      ck_assert_msg(fabs(lv_f32(co)[i] - c[i]) < 1e-6, "cfg %d c[%d]: %g vs %g", t, i, lv_f32(co)[i], c[i]);
      ck_assert_msg(fabs(lv_f32(mo)[i] - m[i]) < 1e-6, "cfg %d m[%d]: %g vs %g", t, i, lv_f32(mo)[i], m[i]);
      clipped += l->cap > 0 && fabs(c[i]) == l->cap;
    }
    if (t == 1) ck_assert_int_gt(clipped, 0); /* the cap was exercised */
    if (l->pad) /* the padded row is the previous state, bit for bit */
      ck_assert(!memcmp(lv_f32(co) + H, cp + H, sizeof(float) * H) && !memcmp(lv_f32(mo) + H, mp + H, sizeof(float) * H));
  }
  lv_graph_destroy(g);
  free(gates);
  free(cp);
  free(mp);
}
END_TEST

START_TEST(lstm_step_gradients) {
  const int B = 3, H = 4;
  float pad[3] = {0, 1, 0};
  lstm_cfg cfgs[6] = {{0, 0, true, true, 0},     {1.0f, 0, false, true, 0}, {0.5f, 0, true, false, 1},
                      {0.0f, 0, true, true, 2},  {0, 10.0f, true, true, 0}, {0.3f, 0.35f, true, true, 0}};
  for (int t = 0; t < 6; t++) {
    spec in[4] = {fspec(lv_shape2(B, 4 * H), 10 + t), fspec(lv_shape2(B, H), 20 + t), fspec(lv_shape2(B, H), 30 + t),
                  {LV_F32, lv_shape2(B, 1), false, malloc(sizeof pad)}};
    memcpy(in[3].data, pad, sizeof pad);
    if (t == 5) {
      /* A cap that clips some cells: keep every unclipped value well away from it so the
       * differences do not cross the kink. */
      float *gt = in[0].data, *cp = in[1].data;
      for (int r = 0; r < B; r++)
        for (int j = 0; j < H; j++) {
          double nc = sigm(gt[r * 4 * H + 2 * H + j] + 0.3) * cp[r * H + j] + sigm(gt[r * 4 * H + H + j]) * tanh(gt[r * 4 * H + j]);
          if (fabs(fabs(nc) - 0.35) < 0.05) cp[r * H + j] = 0.0f;
        }
    }
    gradcheck("lstm_step", cfgs[t].pad ? 4 : 3, in, f_lstm, &cfgs[t], 1e-3, TOL);
    if (!cfgs[t].pad) free(in[3].data);
  }
}
END_TEST

/* Forward and backward of a large step with 1 and 2 threads: the same bits. */
static void lstm_run(int threads, int B, int H, float *out) {
  lv_set_num_threads(threads);
  lv_graph *g = lv_graph_create(0);
  float *gv = rand_floats((int64_t)B * 4 * H, 40, -2, 2), *cv = rand_floats((int64_t)B * H, 41, -2, 2),
        *pv = rand_floats(B, 42, 0, 1);
  for (int i = 0; i < B; i++) pv[i] = pv[i] > 0.7f ? 1.0f : 0.0f;
  lv_tensor *gates = tensor_of(g, lv_shape2(B, 4 * H), gv), *c0 = tensor_of(g, lv_shape2(B, H), cv);
  lv_tensor *m0 = tensor_of(g, lv_shape2(B, H), cv), *pad = tensor_of(g, lv_shape1(B), pv);
  gates->requires_grad = c0->requires_grad = m0->requires_grad = true;
  lv_tensor *c, *m;
  ck_assert(lv_op_lstm_step(g, gates, c0, m0, pad, 1.0f, 3.0f, true, &c, &m));
  lv_tensor *loss = lv_op_reduce_sum(g, lv_op_add(g, lv_op_mul(g, m, m), c), LV_ALL_AXES, false);
  EXPECT_OK(lv_graph_backward(g, loss));
  int64_t n = (int64_t)B * H;
  memcpy(out, lv_f32(c), sizeof(float) * (size_t)n);
  memcpy(out + n, lv_f32(m), sizeof(float) * (size_t)n);
  memcpy(out + 2 * n, lv_f32(gates->grad), sizeof(float) * (size_t)(4 * n));
  memcpy(out + 6 * n, lv_f32(c0->grad), sizeof(float) * (size_t)n);
  memcpy(out + 7 * n, lv_f32(m0->grad), sizeof(float) * (size_t)n);
  free(gv);
  free(cv);
  free(pv);
  lv_graph_destroy(g);
  lv_set_num_threads(1);
}

START_TEST(lstm_step_threads_same_bits) {
  const int B = 64, H = 512;
  size_t n = (size_t)8 * B * H;
  float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
  lstm_run(1, B, H, a);
  lstm_run(2, B, H, b);
  ck_assert(memcmp(a, b, sizeof(float) * n) == 0);
  free(a);
  free(b);
}
END_TEST

START_TEST(lstm_step_errors) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *c, *m;
  ck_assert(!lv_op_lstm_step(g, lv_graph_zeros(g, LV_F32, lv_shape2(2, 10)), lv_graph_zeros(g, LV_F32, lv_shape2(2, 2)),
                             lv_graph_zeros(g, LV_F32, lv_shape2(2, 2)), NULL, 0, 0, true, &c, &m));
  ck_assert_ptr_null(c);
  expect_graph_err(g, "lstm_step: float32 gates [B,4H], c_prev and m_prev [B,H] required: gates float32 [2,10]");
  ck_assert(!lv_op_lstm_step(g, lv_graph_zeros(g, LV_F32, lv_shape2(2, 8)), lv_graph_zeros(g, LV_F32, lv_shape2(2, 2)),
                             lv_graph_zeros(g, LV_F32, lv_shape2(2, 2)), lv_graph_zeros(g, LV_F32, lv_shape2(3, 1)), 0, 0,
                             true, &c, &m));
  expect_graph_err(g, "lstm_step: paddings must be float32 [B,1] or [B] for gates [2,8], got float32 [3,1]");
  ck_assert(!lv_op_lstm_step(g, lv_graph_zeros(g, LV_F32, lv_shape2(2, 8)), lv_graph_zeros(g, LV_F32, lv_shape2(2, 3)),
                             lv_graph_zeros(g, LV_F32, lv_shape2(2, 2)), NULL, 0, 0, true, &c, &m));
  expect_graph_err(g, "c_prev float32 [2,3]");
  lv_graph_destroy(g);
}
END_TEST

/* ---- rnn_seq_anchor ------------------------------------------------------------- */

/* An LSTM over T steps as the cells run it with a sequence anchor: gates_t = xw[t] +
 * m_prev . w, the recurrent weight's gradient from the anchor's one GEMM. in: xw [T, B,
 * 4H], w [H, 4H], m0 [B, H], paddings [T, B, 1]. */
typedef struct rseq_cfg {
  bool reverse, m0, pad, anchor;
} rseq_cfg;

static lv_tensor *f_rnn_seq(lv_graph *g, lv_tensor **in, const void *c) {
  const rseq_cfg *r = c;
  lv_tensor *xw = in[0], *w = in[1], *wn = w;
  const int64_t T = xw->shape.d[0], B = xw->shape.d[1], H = w->shape.d[0];
  lv_tensor *a = r->anchor ? lv_op_rnn_seq_anchor(g, xw, w, &wn) : xw;
  if (!a) return NULL;
  lv_tensor *m = r->m0 ? in[2] : lv_graph_zeros(g, LV_F32, lv_shape2(B, H));
  lv_tensor *cc = lv_graph_zeros(g, LV_F32, lv_shape2(B, H)), *outs[8];
  ck_assert(T <= 8);
  for (int64_t k = 0; k < T; k++) {
    const int64_t t = r->reverse ? T - 1 - k : k;
    lv_tensor *gates = lv_op_add(g, lv_op_reshape(g, lv_op_slice(g, a, 0, t, 1), lv_shape2(B, 4 * H)),
                                 lv_op_matmul(g, m, wn, false, false));
    lv_tensor *pad = r->pad ? lv_op_reshape(g, lv_op_slice(g, in[3], 0, t, 1), lv_shape2(B, 1)) : NULL;
    lv_tensor *c1, *m1;
    if (!lv_op_lstm_step(g, gates, cc, m, pad, 1.0f, 0, true, &c1, &m1)) return NULL;
    cc = c1;
    m = m1;
    outs[t] = lv_op_reshape(g, m, lv_shape3(1, B, H));
  }
  lv_tensor *act = T == 1 ? outs[0] : lv_op_concat(g, outs, (int)T, 0);
  if (r->anchor) lv_op_rnn_seq_finish(g, a, act, r->m0 ? in[2] : NULL, r->reverse);
  return act;
}

/* Gradients of xw, w and m0 through the anchor (forward and reversed, with and without a
 * given state and paddings, T = 1 and 4), against finite differences and against the
 * per-step matmuls' gradient of w. */
START_TEST(rnn_seq_anchor_gradients) {
  const int B = 3, H = 4;
  const rseq_cfg cfgs[] = {{false, false, false, true}, {true, false, false, true}, {false, true, true, true},
                           {true, true, true, true}};
  for (int T = 1; T <= 4; T += 3)
    for (size_t i = 0; i < LV_ARRAY_LEN(cfgs); i++) {
      float *pad = rand_floats(T * B, 50 + i, 0, 1);
      for (int j = 0; j < T * B; j++) pad[j] = pad[j] > 0.7f ? 1.0f : 0.0f;
      spec in[4] = {fspec(lv_shape3(T, B, 4 * H), 60 + i), fspec(lv_shape2(H, 4 * H), 70 + i),
                    fspec(lv_shape2(B, H), 80 + i), {LV_F32, lv_shape3(T, B, 1), false, pad}};
      in[2].grad = cfgs[i].m0;
      float *keep[4]; /* gradcheck frees the specs' data */
      for (int j = 0; j < 4; j++) {
        size_t n = sizeof(float) * (size_t)lv_shape_numel(&in[j].shape);
        keep[j] = malloc(n);
        memcpy(keep[j], in[j].data, n);
      }
      gradcheck("rnn_seq_anchor+lstm_step", 4, in, f_rnn_seq, &cfgs[i], 1e-3, TOL);
      /* the same graph with per-step weight gradients: w's gradient agrees */
      float *grads[2];
      for (int v = 0; v < 2; v++) {
        rseq_cfg c = cfgs[i];
        c.anchor = v == 1;
        lv_graph *g = lv_graph_create(0);
        lv_tensor *t[4];
        for (int j = 0; j < 4; j++) {
          t[j] = lv_graph_tensor(g, LV_F32, in[j].shape);
          memcpy(t[j]->data, keep[j], sizeof(float) * (size_t)lv_shape_numel(&in[j].shape));
          t[j]->requires_grad = j < 3;
        }
        EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, f_rnn_seq(g, t, &c), LV_ALL_AXES, false)));
        grads[v] = malloc(sizeof(float) * H * 4 * H);
        memcpy(grads[v], lv_f32(t[1]->grad), sizeof(float) * H * 4 * H);
        lv_graph_destroy(g);
      }
      for (int j = 0; j < H * 4 * H; j++)
        ck_assert_msg(fabsf(grads[0][j] - grads[1][j]) <= 1e-5f * (1 + fabsf(grads[0][j])),
                      "T %d case %zu: w grad %d: per step %g, anchor %g", T, i, j, grads[0][j], grads[1][j]);
      for (int j = 0; j < 4; j++) free(keep[j]);
      free(grads[0]);
      free(grads[1]);
    }
}
END_TEST

/* A sequence whose steps were never named fails in backward instead of leaving w's
 * gradient out; act of the wrong shape is an error at finish. */
START_TEST(rnn_seq_anchor_errors) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *xw = lv_graph_zeros(g, LV_F32, lv_shape3(2, 3, 8)), *w = lv_graph_zeros(g, LV_F32, lv_shape2(2, 8));
  xw->requires_grad = w->requires_grad = true;
  lv_tensor *wn = NULL, *a = lv_op_rnn_seq_anchor(g, xw, w, &wn);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_ne(wn, w);
  ck_assert(!wn->requires_grad);
  lv_status s = lv_graph_backward(g, lv_op_reduce_sum(g, a, LV_ALL_AXES, false));
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "rnn_seq_anchor: internal: the sequence's steps were not named"), "%s",
                lv_status_msg(s));
  lv_status_free(s);
  lv_graph_reset(g);
  xw = lv_graph_zeros(g, LV_F32, lv_shape3(2, 3, 8));
  w = lv_graph_zeros(g, LV_F32, lv_shape2(2, 8));
  xw->requires_grad = w->requires_grad = true;
  a = lv_op_rnn_seq_anchor(g, xw, w, &wn);
  lv_op_rnn_seq_finish(g, a, lv_graph_zeros(g, LV_F32, lv_shape3(2, 3, 3)), NULL, false);
  expect_graph_err(g, "rnn_seq_anchor: act must be [2,3,2] and m0 [3,2], got [2,3,3] and none");
  ck_assert_ptr_null(lv_op_rnn_seq_anchor(g, lv_graph_zeros(g, LV_F32, lv_shape3(2, 3, 8)),
                                          lv_graph_zeros(g, LV_F32, lv_shape2(2, 7)), &wn));
  expect_graph_err(g, "rnn_seq_anchor: float32 xw [T, B, G] and w [K, G] required, got [2,3,8] and [2,7]");
  lv_graph_destroy(g);
}
END_TEST

/* ---- layer_norm_plus1 ----------------------------------------------------------- */

static lv_tensor *f_ln1(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_layer_norm_plus1(g, in[0], in[1], in[2], 1e-6f);
}

/* (x - mean) / sqrt(var + eps) * (1 + scale) + bias: the plain form given 1 + scale, bit
 * for bit, and a hand-computed row. */
START_TEST(layer_norm_plus1_values_and_gradients) {
  lv_graph *g = lv_graph_create(0);
  float xv[8] = {1, 2, 3, 4, -1, 0, 0, 5}, sv[4] = {0, 0.5f, -0.25f, 1}, bv[4] = {0.1f, 0, 0, -1}, s1[4];
  for (int i = 0; i < 4; i++) s1[i] = 1.0f + sv[i];
  lv_tensor *x = tensor_of(g, lv_shape2(2, 4), xv);
  lv_tensor *y = lv_op_layer_norm_plus1(g, x, tensor_of(g, lv_shape1(4), sv), tensor_of(g, lv_shape1(4), bv), 1e-6f);
  lv_tensor *ref = lv_op_layer_norm(g, x, tensor_of(g, lv_shape1(4), s1), tensor_of(g, lv_shape1(4), bv), 1e-6f);
  ck_assert(memcmp(lv_f32(y), lv_f32(ref), sizeof(float) * 8) == 0);
  /* Row 0: mean 2.5, var 1.25. */
  double r = 1.0 / sqrt(1.25 + 1e-6);
  double want[4] = {-1.5 * r * 1 + 0.1, -0.5 * r * 1.5, 0.5 * r * 0.75, 1.5 * r * 2 - 1};
  for (int i = 0; i < 4; i++) ck_assert_msg(fabs(lv_f32(y)[i] - want[i]) < 1e-5, "[%d] %g vs %g", i, lv_f32(y)[i], want[i]);
  lv_graph_destroy(g);
  spec in[3] = {fspec(lv_shape3(2, 3, 6), 60), fspec(lv_shape1(6), 61), fspec(lv_shape1(6), 62)};
  gradcheck("layer_norm_plus1", 3, in, f_ln1, NULL, 1e-3, 2e-2);
}
END_TEST

/* ---- maximum, minimum, compare, select, clip ---------------------------------- */

static lv_tensor *f_max(lv_graph *g, lv_tensor **in, const void *c) { (void)c; return lv_op_maximum(g, in[0], in[1]); }
static lv_tensor *f_min(lv_graph *g, lv_tensor **in, const void *c) { (void)c; return lv_op_minimum(g, in[0], in[1]); }
static lv_tensor *f_select(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_select(g, in[0], in[1], in[2]);
}
static lv_tensor *f_clip(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_clip(g, in[0], -0.5f, 0.25f);
}

START_TEST(maximum_minimum_compare_values) {
  lv_graph *g = lv_graph_create(0);
  float av[6] = {1, -2, 3, 0.5f, 5, -6}, bv[3] = {0.5f, -2, 4};
  lv_tensor *a = tensor_of(g, lv_shape2(2, 3), av), *b = tensor_of(g, lv_shape1(3), bv);
  a->requires_grad = b->requires_grad = true;
  lv_tensor *mx = lv_op_maximum(g, a, b), *mn = lv_op_minimum(g, a, b);
  float wmx[6] = {1, -2, 4, 0.5f, 5, 4}, wmn[6] = {0.5f, -2, 3, 0.5f, -2, -6};
  ck_assert(!memcmp(lv_f32(mx), wmx, sizeof wmx) && !memcmp(lv_f32(mn), wmn, sizeof wmn));
  /* Ties (-2 vs -2, 0.5 vs 0.5) send the gradient to a. */
  EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, mx, LV_ALL_AXES, false)));
  float ga[6] = {1, 1, 0, 1, 1, 0}, gb[3] = {0, 0, 2};
  ck_assert(!memcmp(lv_f32(a->grad), ga, sizeof ga) && !memcmp(lv_f32(b->grad), gb, sizeof gb));
  lv_graph_reset(g);
  a = tensor_of(g, lv_shape2(2, 3), av);
  b = tensor_of(g, lv_shape1(3), bv);
  float want[LV_CMP_COUNT][6] = {
      {0, 0, 1, 0, 0, 1}, {0, 1, 1, 1, 0, 1}, {1, 0, 0, 0, 1, 0},
      {1, 1, 0, 1, 1, 0}, {0, 1, 0, 1, 0, 0}, {1, 0, 1, 0, 1, 1},
  };
  for (int c = 0; c < LV_CMP_COUNT; c++) {
    lv_tensor *y = lv_op_compare(g, a, b, (lv_compare)c);
    ck_assert_ptr_nonnull(y);
    ck_assert_msg(!memcmp(lv_f32(y), want[c], sizeof want[c]), "compare %d", c);
  }
  ck_assert_ptr_null(lv_op_maximum(g, a, tensor_of(g, lv_shape1(2), bv)));
  expect_graph_err(g, "maximum: shapes do not broadcast: a [2,3] vs b [2]");
  ck_assert_ptr_null(lv_op_compare(g, lv_graph_zeros(g, LV_I32, lv_shape1(3)), lv_graph_zeros(g, LV_F32, lv_shape1(3)), LV_CMP_EQ));
  expect_graph_err(g, "compare: float32 inputs required");
  lv_graph_destroy(g);
  spec in[2] = {fspec(lv_shape3(2, 3, 4), 70), fspec(lv_shape2(1, 4), 71)};
  gradcheck("maximum", 2, in, f_max, NULL, 1e-3, TOL);
  spec in2[2] = {fspec(lv_shape1(4), 72), fspec(lv_shape2(3, 4), 73)};
  gradcheck("minimum", 2, in2, f_min, NULL, 1e-3, TOL);
}
END_TEST

START_TEST(select_and_clip) {
  lv_graph *g = lv_graph_create(0);
  float cv[2] = {1, 0}, av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {-1, -2, -3};
  lv_tensor *y = lv_op_select(g, tensor_of(g, lv_shape2(2, 1), cv), tensor_of(g, lv_shape2(2, 3), av),
                              tensor_of(g, lv_shape1(3), bv));
  float want[6] = {1, 2, 3, -1, -2, -3};
  ck_assert(!memcmp(lv_f32(y), want, sizeof want));
  ck_assert_ptr_null(lv_op_select(g, tensor_of(g, lv_shape1(2), cv), tensor_of(g, lv_shape2(2, 3), av),
                                  tensor_of(g, lv_shape1(3), bv)));
  expect_graph_err(g, "select: shapes do not broadcast: cond [2], a [2,3], b [3]");
  float xv[5] = {-1, -0.5f, 0, 0.25f, 2};
  lv_tensor *x = tensor_of(g, lv_shape1(5), xv);
  x->requires_grad = true;
  lv_tensor *cl = lv_op_clip(g, x, -0.5f, 0.25f);
  float wc[5] = {-0.5f, -0.5f, 0, 0.25f, 0.25f}, wg[5] = {0, 1, 1, 1, 0};
  ck_assert(!memcmp(lv_f32(cl), wc, sizeof wc));
  EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, cl, LV_ALL_AXES, false)));
  ck_assert(!memcmp(lv_f32(x->grad), wg, sizeof wg)); /* the bounds pass, as in tf.clip_by_value */
  lv_graph_reset(g);
  ck_assert_ptr_null(lv_op_clip(g, tensor_of(g, lv_shape1(5), xv), 1, 0));
  expect_graph_err(g, "clip: float32 x and lo <= hi required");
  lv_graph_destroy(g);
  float cond[12] = {1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0};
  spec in[3] = {{LV_F32, lv_shape3(2, 3, 2), false, malloc(sizeof cond)}, fspec(lv_shape3(2, 3, 2), 80),
                fspec(lv_shape2(3, 1), 81)};
  memcpy(in[0].data, cond, sizeof cond);
  gradcheck("select", 3, in, f_select, NULL, EPS, TOL);
  spec c[1] = {fspec(lv_shape2(4, 6), 82)};
  gradcheck("clip", 1, c, f_clip, NULL, 1e-3, TOL);
}
END_TEST

/* ---- masked_softmax ------------------------------------------------------------ */

static lv_tensor *f_msm(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_masked_softmax(g, in[0], in[1]);
}

START_TEST(masked_softmax_values_and_gradients) {
  lv_graph *g = lv_graph_create(0);
  /* logits [2, 2, 3] against paddings [2, 1, 3]: batch 1 is fully padded. */
  float lv[12] = {1, 2, 3, 0, 0, 100, 5, 6, 7, 8, 9, 10}, pv[6] = {0, 0, 1, 1, 1, 1};
  lv_tensor *x = tensor_of(g, lv_shape3(2, 2, 3), lv);
  x->requires_grad = true;
  lv_tensor *y = lv_op_masked_softmax(g, x, tensor_of(g, lv_shape3(2, 1, 3), pv));
  ck_assert_ptr_nonnull(y);
  double e = exp(1.0);
  double want[12] = {1 / (1 + e), e / (1 + e), 0, 0.5, 0.5, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 12; i++) ck_assert_msg(fabs(lv_f32(y)[i] - want[i]) < 1e-6, "[%d] %g vs %g", i, lv_f32(y)[i], want[i]);
  float wv[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, lv_op_mul(g, y, tensor_of(g, lv_shape3(2, 2, 3), wv)), LV_ALL_AXES, false)));
  for (int i = 0; i < 12; i++) {
    ck_assert(isfinite(lv_f32(x->grad)[i]));
    if (i == 2 || i == 5 || i >= 6) ck_assert_msg(lv_f32(x->grad)[i] == 0.0f, "padded [%d] has gradient %g", i, lv_f32(x->grad)[i]);
  }
  lv_graph_reset(g);
  ck_assert_ptr_null(lv_op_masked_softmax(g, tensor_of(g, lv_shape3(2, 2, 3), lv), tensor_of(g, lv_shape2(3, 2), pv)));
  expect_graph_err(g, "masked_softmax: float32 paddings that broadcast to the logits required: logits [2,2,3] vs paddings float32 [3,2]");
  lv_graph_destroy(g);
  float pad[8] = {0, 0, 1, 0, 0, 0, 0, 1};
  spec in[2] = {fspec(lv_shape3(2, 3, 4), 90), {LV_F32, lv_shape3(2, 1, 4), false, malloc(sizeof pad)}};
  memcpy(in[1].data, pad, sizeof pad);
  gradcheck("masked_softmax", 2, in, f_msm, NULL, 1e-3, TOL);
}
END_TEST

/* Lingvo's activation names and formulas: GELU with the exact erf, SWISH = x * sigmoid(x)
 * (an alias of SILU), SOFTPLUS, SIGMOID, TANH. */
START_TEST(activations_by_lingvo_name) {
  const char *names[5] = {"GELU", "SWISH", "SOFTPLUS", "SIGMOID", "TANH"};
  lv_graph *g = lv_graph_create(0);
  float xv[5] = {-3, -0.5f, 0, 0.7f, 4};
  for (int k = 0; k < 5; k++) {
    lv_activation act;
    ck_assert_msg(lv_activation_from_name(names[k], &act), "%s", names[k]);
    lv_tensor *y = lv_op_activation(g, tensor_of(g, lv_shape1(5), xv), act);
    for (int i = 0; i < 5; i++) {
      double x = xv[i], w = k == 0 ? 0.5 * x * (1 + erf(x / sqrt(2.0)))
                          : k == 1 ? x / (1 + exp(-x))
                          : k == 2 ? log1p(exp(x))
                          : k == 3 ? 1 / (1 + exp(-x))
                                   : tanh(x);
      ck_assert_msg(fabs(lv_f32(y)[i] - w) < 1e-6, "%s(%g) = %g, want %g", names[k], x, lv_f32(y)[i], w);
    }
  }
  lv_graph_destroy(g);
}
END_TEST

/* ---- batch_matmul (strided, rank >= 3) ------------------------------------------- */

typedef struct bmm_cfg { bool ta, tb; } bmm_cfg;
static lv_tensor *f_bmm4(lv_graph *g, lv_tensor **in, const void *c) {
  const bmm_cfg *m = c;
  return lv_op_batch_matmul(g, in[0], in[1], m->ta, m->tb);
}

/* a [2,3,M,K] (or transposed) x b [2,3,K,N] (or transposed) against a double loop. */
START_TEST(batch_matmul_rank4_values_and_gradients) {
  const int B = 2, N = 3, M = 4, K = 5, C = 6;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      lv_graph *g = lv_graph_create(0);
      float *av = rand_floats(B * N * M * K, 100 + ta, -1, 1), *bv = rand_floats(B * N * K * C, 110 + tb, -1, 1);
      lv_tensor *a = tensor_of(g, ta ? lv_shape4(B, N, K, M) : lv_shape4(B, N, M, K), av);
      lv_tensor *b = tensor_of(g, tb ? lv_shape4(B, N, C, K) : lv_shape4(B, N, K, C), bv);
      lv_tensor *y = lv_op_batch_matmul(g, a, b, ta, tb);
      ck_assert_ptr_nonnull(y);
      lv_shape want = lv_shape4(B, N, M, C);
      ck_assert(lv_shape_eq(&y->shape, &want));
      for (int e = 0; e < B * N; e++)
        for (int i = 0; i < M; i++)
          for (int j = 0; j < C; j++) {
            double sum = 0;
            for (int q = 0; q < K; q++)
              sum += (double)(ta ? av[e * M * K + q * M + i] : av[e * M * K + i * K + q]) *
                     (tb ? bv[e * K * C + j * K + q] : bv[e * K * C + q * C + j]);
            ck_assert_msg(fabs(lv_f32(y)[(e * M + i) * C + j] - sum) < 1e-5, "ta %d tb %d", ta, tb);
          }
      lv_graph_destroy(g);
      free(av);
      free(bv);
      bmm_cfg c = {ta, tb};
      spec in[2] = {fspec(ta ? lv_shape4(2, 2, 3, 2) : lv_shape4(2, 2, 2, 3), 120), fspec(tb ? lv_shape4(2, 2, 4, 3) : lv_shape4(2, 2, 3, 4), 121)};
      gradcheck("batch_matmul", 2, in, f_bmm4, &c, EPS, TOL);
    }
  lv_graph *g = lv_graph_create(0);
  ck_assert_ptr_null(lv_op_batch_matmul(g, lv_graph_zeros(g, LV_F32, lv_shape4(2, 3, 4, 5)),
                                        lv_graph_zeros(g, LV_F32, lv_shape4(2, 2, 5, 4)), false, false));
  expect_graph_err(g, "batch_matmul: a [...,M,K] and b [...,K,N] of equal rank >= 3 with equal leading dims required: a [2,3,4,5] vs b [2,2,5,4]");
  ck_assert_ptr_null(lv_op_batch_matmul(g, lv_graph_zeros(g, LV_F32, lv_shape2(4, 5)), lv_graph_zeros(g, LV_F32, lv_shape2(5, 4)), false, false));
  expect_graph_err(g, "rank >= 3");
  ck_assert_ptr_null(lv_op_batch_matmul(g, lv_graph_zeros(g, LV_F32, lv_shape3(2, 4, 5)), lv_graph_zeros(g, LV_F32, lv_shape3(2, 4, 5)), false, false));
  expect_graph_err(g, "batch_matmul: inner dimensions differ: a [2,4,5] vs b [2,4,5]");
  lv_graph_destroy(g);
}
END_TEST

/* Attention-shaped products ([B, N, T, H] x [B, N, S, H]^T, both split and unsplit batch
 * paths) and their gradients: the same bits with 1 and 2 threads. */
static void bmm_run(int threads, int B, int N, int T, int H, float *out) {
  lv_set_num_threads(threads);
  lv_graph *g = lv_graph_create(0);
  float *qv = rand_floats((int64_t)B * N * T * H, 130, -1, 1), *kv = rand_floats((int64_t)B * N * T * H, 131, -1, 1);
  lv_tensor *q = tensor_of(g, lv_shape4(B, N, T, H), qv), *k = tensor_of(g, lv_shape4(B, N, T, H), kv);
  q->requires_grad = k->requires_grad = true;
  lv_tensor *y = lv_op_batch_matmul(g, q, k, false, true);
  lv_tensor *z = lv_op_batch_matmul(g, y, k, false, false);
  EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, lv_op_mul(g, z, z), LV_ALL_AXES, false)));
  int64_t nq = (int64_t)B * N * T * H;
  memcpy(out, lv_f32(z), sizeof(float) * (size_t)nq);
  memcpy(out + nq, lv_f32(q->grad), sizeof(float) * (size_t)nq);
  memcpy(out + 2 * nq, lv_f32(k->grad), sizeof(float) * (size_t)nq);
  free(qv);
  free(kv);
  lv_graph_destroy(g);
  lv_set_num_threads(1);
}

START_TEST(batch_matmul_threads_same_bits) {
  int shapes[2][4] = {{8, 4, 32, 64}, {2, 1, 200, 128}};
  for (int sh = 0; sh < 2; sh++) {
    int *d = shapes[sh];
    size_t n = (size_t)3 * d[0] * d[1] * d[2] * d[3];
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    bmm_run(1, d[0], d[1], d[2], d[3], a);
    bmm_run(2, d[0], d[1], d[2], d[3], b);
    ck_assert_msg(memcmp(a, b, sizeof(float) * n) == 0, "shape %d differs between 1 and 2 threads", sh);
    free(a);
    free(b);
  }
}
END_TEST

/* ---- reverse_sequence, top_k ------------------------------------------------------ */

static lv_tensor *f_rev(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_reverse_sequence(g, in[0], in[1]);
}

START_TEST(reverse_sequence_values_and_gradients) {
  lv_graph *g = lv_graph_create(0);
  /* x [T=4, B=3, 2]: lengths 4, 2 and 0 (a zero-length sequence stays as it is). */
  float xv[24], pv[12] = {0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1};
  for (int i = 0; i < 24; i++) xv[i] = (float)i;
  lv_tensor *x = tensor_of(g, lv_shape3(4, 3, 2), xv);
  lv_tensor *y = lv_op_reverse_sequence(g, x, tensor_of(g, lv_shape3(4, 3, 1), pv));
  ck_assert_ptr_nonnull(y);
  int src_t[3][4] = {{3, 2, 1, 0}, {1, 0, 2, 3}, {0, 1, 2, 3}};
  for (int t = 0; t < 4; t++)
    for (int b = 0; b < 3; b++)
      for (int d = 0; d < 2; d++)
        ck_assert_msg(lv_f32(y)[(t * 3 + b) * 2 + d] == xv[(src_t[b][t] * 3 + b) * 2 + d], "t %d b %d", t, b);
  /* Its own inverse; paddings [T, B] work too. */
  lv_tensor *z = lv_op_reverse_sequence(g, y, tensor_of(g, lv_shape2(4, 3), pv));
  ck_assert(!memcmp(lv_f32(z), xv, sizeof xv));
  ck_assert_ptr_null(lv_op_reverse_sequence(g, x, tensor_of(g, lv_shape2(3, 4), pv)));
  expect_graph_err(g, "reverse_sequence: float32 x [T,B,...] and paddings [T,B] or [T,B,1] required: x float32 [4,3,2] vs paddings float32 [3,4]");
  lv_graph_destroy(g);
  spec in[2] = {fspec(lv_shape3(4, 3, 2), 140), {LV_F32, lv_shape2(4, 3), false, malloc(sizeof pv)}};
  memcpy(in[1].data, pv, sizeof pv);
  gradcheck("reverse_sequence", 2, in, f_rev, NULL, EPS, TOL);
}
END_TEST

START_TEST(top_k_values) {
  lv_graph *g = lv_graph_create(0);
  float xv[12] = {1, 5, 3, 5, -1, 0, /* row 2: */ 2, 2, 2, NAN, -INFINITY, 7};
  lv_tensor *x = tensor_of(g, lv_shape2(2, 6), xv), *v, *ix;
  ck_assert(lv_op_top_k(g, x, 3, &v, &ix));
  lv_shape want = lv_shape2(2, 3);
  ck_assert(lv_shape_eq(&v->shape, &want) && ix->dtype == LV_I32);
  float wv0[3] = {5, 5, 3};
  int32_t wi[6] = {1, 3, 2, 3, 5, 0};
  ck_assert(!memcmp(lv_f32(v), wv0, sizeof wv0));
  ck_assert(isnan(lv_f32(v)[3]) && lv_f32(v)[4] == 7 && lv_f32(v)[5] == 2);
  ck_assert(!memcmp(lv_i32(ix), wi, sizeof wi));
  /* k == N sorts the whole row (ties by index); k == 0 is empty. */
  ck_assert(lv_op_top_k(g, x, 6, &v, &ix));
  int32_t all[12] = {1, 3, 2, 0, 5, 4, 3, 5, 0, 1, 2, 4};
  ck_assert(!memcmp(lv_i32(ix), all, sizeof all));
  ck_assert(lv_op_top_k(g, x, 0, &v, &ix) && lv_tensor_numel(v) == 0);
  /* A long row against a sort done here. */
  const int N = 1000, K = 37;
  float *big = rand_floats(2 * N, 150, -1, 1);
  for (int i = 0; i < 2 * N; i += 7) big[i] = 0.5f; /* many ties */
  ck_assert(lv_op_top_k(g, tensor_of(g, lv_shape2(2, N), big), K, &v, &ix));
  for (int r = 0; r < 2; r++) {
    bool used[1000] = {false};
    for (int q = 0; q < K; q++) {
      int best = -1;
      for (int j = 0; j < N; j++)
        if (!used[j] && (best < 0 || big[r * N + j] > big[r * N + best])) best = j;
      used[best] = true;
      ck_assert_int_eq(lv_i32(ix)[r * K + q], best);
      ck_assert(lv_f32(v)[r * K + q] == big[r * N + best]);
    }
  }
  free(big);
  ck_assert(!lv_op_top_k(g, x, 7, &v, &ix));
  ck_assert_ptr_null(v);
  expect_graph_err(g, "top_k: float32 x [...,N] and 0 <= k <= N required, got float32 [2,6] and k 7");
  lv_graph_destroy(g);
}
END_TEST

/* ---- smoothed_xent -------------------------------------------------------------- */

/* weight * -sum_j t_j log softmax(x)_j with t = 1 - s at the id, s / (C - 1) elsewhere. */
static double ref_sxent(int c, const float *x, int id, double s, double w) {
  double m = -INFINITY, z = 0, l = 0;
  for (int j = 0; j < c; j++) m = fmax(m, x[j]);
  for (int j = 0; j < c; j++) z += exp(x[j] - m);
  for (int j = 0; j < c; j++) l -= (j == id ? 1 - s : s / (c - 1)) * (x[j] - m - log(z));
  return w * l;
}

typedef struct sx_cfg { float s; bool w; } sx_cfg;
static lv_tensor *f_sxent(lv_graph *g, lv_tensor **in, const void *c) {
  const sx_cfg *x = c;
  return lv_op_smoothed_xent(g, in[0], in[1], x->w ? in[2] : NULL, x->s);
}

START_TEST(smoothed_xent_values_errors_and_gradients) {
  lv_graph *g = lv_graph_create(0);
  const int R = 6, C = 5;
  float *xv = rand_floats(R * C, 160, -3, 3), wv[6] = {1, 0.5f, 0, 2, 1, 1};
  int32_t idv[6] = {0, 4, 2, 1, 3, 3};
  lv_tensor *x = tensor_of(g, lv_shape3(2, 3, C), xv), *ids = ids_of(g, lv_shape2(2, 3), idv);
  lv_tensor *w = tensor_of(g, lv_shape2(2, 3), wv);
  for (int t = 0; t < 3; t++) {
    float s = t == 0 ? 0.0f : t == 1 ? 0.1f : 0.4f;
    lv_tensor *y = lv_op_smoothed_xent(g, x, ids, t ? w : NULL, s);
    ck_assert_ptr_nonnull(y);
    lv_shape ws = lv_shape2(2, 3);
    ck_assert(lv_shape_eq(&y->shape, &ws));
    for (int r = 0; r < R; r++) {
      double want = ref_sxent(C, xv + r * C, idv[r], s, t ? wv[r] : 1);
      ck_assert_msg(fabs(lv_f32(y)[r] - want) < 1e-5, "s %g row %d: %g vs %g", s, r, lv_f32(y)[r], want);
    }
    if (t == 0) { /* smoothing 0 is the sparse cross-entropy */
      lv_tensor *sp = lv_op_sparse_softmax_xent(g, x, ids);
      for (int r = 0; r < R; r++) ck_assert(fabs(lv_f32(y)[r] - lv_f32(sp)[r]) < 1e-6);
    }
  }
  idv[4] = 7;
  ck_assert_ptr_null(lv_op_smoothed_xent(g, x, ids_of(g, lv_shape2(2, 3), idv), w, 0.1f));
  expect_graph_err(g, "smoothed_xent: class id 7 at position 4 is outside [0, 5) (logits [2,3,5])");
  x = tensor_of(g, lv_shape3(2, 3, C), xv);
  ck_assert_ptr_null(lv_op_smoothed_xent(g, x, ids_of(g, lv_shape1(6), idv), NULL, 0.1f));
  expect_graph_err(g, "smoothed_xent: int32 ids [2,3] required for logits [2,3,5], got int32 [6]");
  x = tensor_of(g, lv_shape3(2, 3, C), xv);
  ck_assert_ptr_null(lv_op_smoothed_xent(g, x, ids_of(g, lv_shape2(2, 3), idv), tensor_of(g, lv_shape1(3), wv), 0.1f));
  expect_graph_err(g, "smoothed_xent: float32 weights [2,3] required for logits [2,3,5], got float32 [3]");
  x = tensor_of(g, lv_shape3(2, 3, C), xv);
  ck_assert_ptr_null(lv_op_smoothed_xent(g, x, ids_of(g, lv_shape2(2, 3), idv), NULL, 1.5f));
  expect_graph_err(g, "smoothed_xent: label smoothing must be in [0, 1], got 1.5");
  lv_graph_destroy(g);
  free(xv);
  idv[4] = 3;
  for (int t = 0; t < 2; t++) {
    sx_cfg c = {t ? 0.2f : 0.0f, t == 1};
    spec in[3] = {fspec(lv_shape2(R, C), 170 + t), ispec(lv_shape1(R), idv), {LV_F32, lv_shape1(R), false, malloc(sizeof wv)}};
    memcpy(in[2].data, wv, sizeof wv);
    gradcheck("smoothed_xent", 3, in, f_sxent, &c, 1e-3, TOL);
  }
}
END_TEST

/* The logits' first gradient is made in place of the softmax the forward kept; the bits
 * are the kernel's out of place (a second loss on the same logits adds into it). */
START_TEST(smoothed_xent_gradient_in_place) {
  const int R = 7, C = 9;
  float *xv = rand_floats(R * C, 180, -3, 3), wv[7] = {1, 0.5f, 0, 2, 1, 1, 3};
  int32_t id1[7] = {0, 8, 2, 1, 3, 3, 5}, id2[7] = {4, 4, 0, 7, 6, 1, 2};
  float ones[7] = {1, 1, 1, 1, 1, 1, 1}, loss[7];
  float *p1 = malloc(sizeof(float) * R * C), *p2 = malloc(sizeof(float) * R * C), *want = malloc(sizeof(float) * R * C);
  lv_cpu_smoothed_xent_fwd(NULL, R, C, xv, id1, wv, 0.2f, loss, p1, 0);
  lv_cpu_smoothed_xent_fwd(NULL, R, C, xv, id2, NULL, 0.1f, loss, p2, 0);
  lv_cpu_smoothed_xent_bwd(NULL, R, C, p2, id2, NULL, 0.1f, ones, want, false);
  lv_cpu_smoothed_xent_bwd(NULL, R, C, p1, id1, wv, 0.2f, ones, want, true);
  for (int free_mode = 0; free_mode < 2; free_mode++) {
    lv_graph *g = lv_graph_create(0);
    lv_graph_set_free_in_backward(g, free_mode);
    lv_tensor *x = tensor_of(g, lv_shape2(R, C), xv);
    x->requires_grad = true;
    lv_tensor *s1 = lv_op_reduce_sum(g, lv_op_smoothed_xent(g, x, ids_of(g, lv_shape1(R), id1),
                                                            tensor_of(g, lv_shape1(R), wv), 0.2f), LV_ALL_AXES, false);
    lv_tensor *s2 = lv_op_reduce_sum(g, lv_op_smoothed_xent(g, x, ids_of(g, lv_shape1(R), id2), NULL, 0.1f),
                                     LV_ALL_AXES, false);
    EXPECT_OK(lv_graph_backward(g, lv_op_add(g, s1, s2)));
    ck_assert_msg(!memcmp(lv_f32(x->grad), want, sizeof(float) * R * C), "free_in_backward %d", free_mode);
    lv_graph_destroy(g);
  }
  free(xv);
  free(p1);
  free(p2);
  free(want);
}
END_TEST

/* ---- embedding gradient ------------------------------------------------------------ */

static lv_tensor *f_gather2(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_gather(g, in[0], in[1]);
}

/* A table whose gradient buffer exists (a variable's): backward adds into the rows of
 * ids and leaves every other row as it was (no dense pass); repeated ids sum. */
START_TEST(gather_gradient_touches_only_id_rows) {
  lv_graph *g = lv_graph_create(0);
  const int V = 7, D = 3;
  float *tv = rand_floats(V * D, 180, -1, 1), prior[21];
  lv_tensor *table = tensor_of(g, lv_shape2(V, D), tv);
  for (int i = 0; i < V * D; i++) prior[i] = 100.0f + (float)i;
  table->requires_grad = true;
  table->grad = tensor_of(g, lv_shape2(V, D), prior);
  int32_t idv[6] = {2, 5, 2, 0, 2, 5};
  lv_tensor *y = lv_op_gather(g, table, ids_of(g, lv_shape2(2, 3), idv));
  float gv[18];
  for (int i = 0; i < 18; i++) gv[i] = (float)(i + 1);
  EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, lv_op_mul(g, y, tensor_of(g, lv_shape3(2, 3, D), gv)), LV_ALL_AXES, false)));
  for (int r = 0; r < V; r++)
    for (int j = 0; j < D; j++) {
      float want = prior[r * D + j];
      for (int i = 0; i < 6; i++)
        if (idv[i] == r) want += gv[i * D + j];
      ck_assert_msg(lv_f32(table->grad)[r * D + j] == want, "row %d col %d", r, j);
    }
  lv_graph_destroy(g);
  free(tv);
  int32_t rep[8] = {3, 3, 1, 0, 3, 1, 1, 3};
  spec in[2] = {fspec(lv_shape2(5, 4), 181), ispec(lv_shape2(2, 4), rep)};
  gradcheck("gather", 2, in, f_gather2, NULL, EPS, TOL);
}
END_TEST

static void gather_run(int threads, float *out) {
  lv_set_num_threads(threads);
  lv_graph *g = lv_graph_create(0);
  const int V = 50, D = 512, N = 600;
  float *tv = rand_floats(V * D, 190, -1, 1), *gv = rand_floats(N * D, 191, -1, 1);
  int32_t *idv = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++) idv[i] = (i * 37) % V; /* every row many times */
  lv_tensor *table = tensor_of(g, lv_shape2(V, D), tv);
  table->requires_grad = true;
  lv_tensor *y = lv_op_gather(g, table, ids_of(g, lv_shape1(N), idv));
  EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, lv_op_mul(g, y, tensor_of(g, lv_shape2(N, D), gv)), LV_ALL_AXES, false)));
  memcpy(out, lv_f32(table->grad), sizeof(float) * V * D);
  free(tv);
  free(gv);
  free(idv);
  lv_graph_destroy(g);
  lv_set_num_threads(1);
}

START_TEST(gather_gradient_threads_same_bits) {
  float *a = malloc(sizeof(float) * 50 * 512), *b = malloc(sizeof(float) * 50 * 512);
  gather_run(1, a);
  gather_run(2, b);
  ck_assert(memcmp(a, b, sizeof(float) * 50 * 512) == 0);
  free(a);
  free(b);
}
END_TEST

/* ---- projected_smoothed_xent ----------------------------------------------------- */

/* Loss and gradients of x, w, b through the chunked op, or through explicit logits
 * (matmul + add + smoothed_xent). out: loss [N], gx [N*D], gw [D*C], gb [C], argmax. */
typedef struct px_out {
  float *loss, *gx, *gw, *gb;
  int32_t *am;
} px_out;

static void px_run(int N, int D, int C, int64_t chunk, bool explicit_logits, const float *xv, const float *wv,
                   const float *bv, const int32_t *idv, const float *wtv, float s, px_out *o, size_t *peak) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = tensor_of(g, lv_shape2(N, D), xv), *w = tensor_of(g, lv_shape2(D, C), wv);
  lv_tensor *b = bv ? tensor_of(g, lv_shape1(C), bv) : NULL;
  lv_tensor *ids = ids_of(g, lv_shape1(N), idv), *wt = wtv ? tensor_of(g, lv_shape1(N), wtv) : NULL;
  x->requires_grad = w->requires_grad = true;
  if (b) b->requires_grad = true;
  lv_tensor *loss, *am = NULL;
  if (explicit_logits) {
    lv_tensor *logits = lv_op_matmul(g, x, w, false, false);
    if (b) logits = lv_op_add(g, logits, b);
    loss = lv_op_smoothed_xent(g, logits, ids, wt, s);
    am = lv_op_argmax(g, logits);
  } else {
    loss = lv_op_projected_smoothed_xent(g, x, w, b, ids, wt, s, chunk, &am);
  }
  ck_assert_ptr_nonnull(loss);
  lv_shape want = lv_shape1(N);
  ck_assert(lv_shape_eq(&loss->shape, &want) && am && am->dtype == LV_I32);
  o->loss = malloc(sizeof(float) * N);
  memcpy(o->loss, lv_f32(loss), sizeof(float) * N);
  o->am = malloc(sizeof(int32_t) * N);
  memcpy(o->am, lv_i32(am), sizeof(int32_t) * N);
  float *gv = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) gv[i] = 0.5f + 0.25f * (float)(i % 5);
  EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, lv_op_mul(g, loss, tensor_of(g, lv_shape1(N), gv)), LV_ALL_AXES, false)));
  free(gv);
  o->gx = malloc(sizeof(float) * N * D);
  memcpy(o->gx, lv_f32(x->grad), sizeof(float) * N * D);
  o->gw = malloc(sizeof(float) * D * C);
  memcpy(o->gw, lv_f32(w->grad), sizeof(float) * D * C);
  o->gb = NULL;
  if (b) {
    o->gb = malloc(sizeof(float) * C);
    memcpy(o->gb, lv_f32(b->grad), sizeof(float) * C);
  }
  if (peak) *peak = lv_graph_arena_peak(g);
  lv_graph_destroy(g);
}

static void px_free(px_out *o) {
  free(o->loss);
  free(o->gx);
  free(o->gw);
  free(o->gb);
  free(o->am);
}

static void close_arrays(const char *what, int64_t chunk, const float *a, const float *b, int64_t n, double tol) {
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(fabs(a[i] - b[i]) <= tol * fmax(1.0, fabs(b[i])), "chunk %lld %s[%lld]: %g vs %g", (long long)chunk,
                  what, (long long)i, a[i], b[i]);
}

/* The chunked op against smoothed_xent on explicit logits, chunks that do and do not
 * divide C, with and without bias and weights. */
START_TEST(projected_xent_matches_explicit_logits) {
  const int N = 9, D = 6, C = 10;
  float *xv = rand_floats(N * D, 200, -1, 1), *wv = rand_floats(D * C, 201, -1.5f, 1.5f),
        *bv = rand_floats(C, 202, -1, 1), *wtv = rand_floats(N, 203, 0, 2);
  int32_t idv[9] = {0, 9, 3, 3, 7, 1, 5, 9, 2};
  int64_t chunks[6] = {0, 3, 5, 1, 10, 64};
  for (int variant = 0; variant < 2; variant++) {
    const float *b = variant ? NULL : bv, *wt = variant ? NULL : wtv;
    float s = variant ? 0.0f : 0.1f;
    px_out ref;
    px_run(N, D, C, 0, true, xv, wv, b, idv, wt, s, &ref, NULL);
    for (int ci = 0; ci < 6; ci++) {
      px_out o;
      px_run(N, D, C, chunks[ci], false, xv, wv, b, idv, wt, s, &o, NULL);
      close_arrays("loss", chunks[ci], o.loss, ref.loss, N, 1e-5);
      close_arrays("gx", chunks[ci], o.gx, ref.gx, N * D, 1e-5);
      close_arrays("gw", chunks[ci], o.gw, ref.gw, D * C, 1e-5);
      if (b) close_arrays("gb", chunks[ci], o.gb, ref.gb, C, 1e-5);
      ck_assert(!memcmp(o.am, ref.am, sizeof(int32_t) * N));
      px_free(&o);
    }
    px_free(&ref);
  }
  free(xv);
  free(wv);
  free(bv);
  free(wtv);
}
END_TEST

typedef struct pxc { int64_t chunk; } pxc;
static lv_tensor *f_pxent(lv_graph *g, lv_tensor **in, const void *c) {
  const pxc *p = c;
  return lv_op_projected_smoothed_xent(g, in[0], in[1], in[2], in[3], in[4], 0.2f, p->chunk, NULL);
}

START_TEST(projected_xent_gradients_and_errors) {
  int32_t idv[4] = {2, 0, 6, 2};
  float wt[4] = {1, 0.5f, 2, 1};
  pxc c = {3};
  spec in[5] = {fspec(lv_shape2(4, 3), 210), fspec(lv_shape2(3, 7), 211), fspec(lv_shape1(7), 212),
                ispec(lv_shape1(4), idv), {LV_F32, lv_shape1(4), false, malloc(sizeof wt)}};
  memcpy(in[4].data, wt, sizeof wt);
  gradcheck("projected_smoothed_xent", 5, in, f_pxent, &c, 1e-3, TOL);
  lv_graph *g = lv_graph_create(0);
  idv[1] = 12;
  lv_tensor *x = lv_graph_zeros(g, LV_F32, lv_shape2(4, 3)), *w = lv_graph_zeros(g, LV_F32, lv_shape2(3, 10));
  ck_assert_ptr_null(lv_op_projected_smoothed_xent(g, x, w, NULL, ids_of(g, lv_shape1(4), idv), NULL, 0.1f, 4, NULL));
  expect_graph_err(g, "projected_smoothed_xent: class id 12 at position 1 is outside [0, 10) (w [3,10])");
  x = lv_graph_zeros(g, LV_F32, lv_shape2(4, 3));
  ck_assert_ptr_null(lv_op_projected_smoothed_xent(g, x, lv_graph_zeros(g, LV_F32, lv_shape2(4, 10)), NULL,
                                                   ids_of(g, lv_shape1(4), idv), NULL, 0.1f, 4, NULL));
  expect_graph_err(g, "projected_smoothed_xent: float32 x [N,D] and w [D,C] with C >= 1 required: x float32 [4,3] vs w float32 [4,10]");
  x = lv_graph_zeros(g, LV_F32, lv_shape2(4, 3));
  ck_assert_ptr_null(lv_op_projected_smoothed_xent(g, x, lv_graph_zeros(g, LV_F32, lv_shape2(3, 10)),
                                                   lv_graph_zeros(g, LV_F32, lv_shape1(9)), ids_of(g, lv_shape1(4), idv),
                                                   NULL, 0.1f, 4, NULL));
  expect_graph_err(g, "projected_smoothed_xent: float32 b [10] required for w [3,10], got float32 [9]");
  lv_graph_destroy(g);
}
END_TEST

/* A large vocabulary: the chunked op's whole step (forward and backward) stays far below
 * one [N, C] logits tensor, while the explicit logits need several. */
START_TEST(projected_xent_memory_is_per_chunk) {
  const int N = 256, D = 8, C = 20000;
  float *xv = rand_floats(N * D, 220, -1, 1), *wv = rand_floats(D * C, 221, -0.5f, 0.5f), *bv = rand_floats(C, 222, -1, 1);
  int32_t *idv = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++) idv[i] = (i * 7919) % C;
  px_out o, r;
  size_t chunked, full;
  px_run(N, D, C, 512, false, xv, wv, bv, idv, NULL, 0.1f, &o, &chunked);
  px_run(N, D, C, 0, true, xv, wv, bv, idv, NULL, 0.1f, &r, &full);
  size_t logits = sizeof(float) * (size_t)N * C;
  ck_assert_msg(chunked < logits / 4, "chunked peak %zu bytes vs one [N, C] logits tensor %zu", chunked, logits);
  ck_assert_msg(full > 2 * logits, "explicit logits peak %zu", full);
  close_arrays("loss", 512, o.loss, r.loss, N, 1e-4);
  close_arrays("gw", 512, o.gw, r.gw, D * C, 1e-4);
  px_free(&o);
  px_free(&r);
  free(xv);
  free(wv);
  free(bv);
  free(idv);
}
END_TEST

START_TEST(projected_xent_threads_same_bits) {
  const int N = 300, D = 64, C = 3000;
  float *xv = rand_floats(N * D, 230, -1, 1), *wv = rand_floats(D * C, 231, -0.5f, 0.5f), *bv = rand_floats(C, 232, -1, 1);
  int32_t *idv = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++) idv[i] = (i * 31) % C;
  px_out o[2];
  for (int t = 0; t < 2; t++) {
    lv_set_num_threads(t + 1);
    px_run(N, D, C, 700, false, xv, wv, bv, idv, NULL, 0.1f, &o[t], NULL);
  }
  lv_set_num_threads(1);
  ck_assert(!memcmp(o[0].loss, o[1].loss, sizeof(float) * N));
  ck_assert(!memcmp(o[0].gx, o[1].gx, sizeof(float) * N * D));
  ck_assert(!memcmp(o[0].gw, o[1].gw, sizeof(float) * D * C));
  ck_assert(!memcmp(o[0].gb, o[1].gb, sizeof(float) * C));
  ck_assert(!memcmp(o[0].am, o[1].am, sizeof(int32_t) * N));
  px_free(&o[0]);
  px_free(&o[1]);
  free(xv);
  free(wv);
  free(bv);
  free(idv);
}
END_TEST

/* ---- threads ------------------------------------------------------------------------ */

/* Every other sequence op at sizes above its kernels' parallel thresholds, forward and
 * backward, with 1 and 2 threads: the same bits. */
static void many_ops_run(int threads, float **out, int64_t *n_out) {
  lv_set_num_threads(threads);
  lv_graph *g = lv_graph_create(0);
  const int T = 24, B = 32, S = 96, D = 64;
  float *xv = rand_floats((int64_t)T * B * S, 240, -2, 2), *pv = rand_floats((int64_t)T * B, 241, 0, 1);
  float *sv = rand_floats(S, 242, -0.5f, 0.5f);
  for (int i = 0; i < T * B; i++) pv[i] = pv[i] > 0.8f ? 1.0f : 0.0f;
  lv_tensor *x = tensor_of(g, lv_shape3(T, B, S), xv), *pad = tensor_of(g, lv_shape2(T, B), pv);
  lv_tensor *scale = tensor_of(g, lv_shape1(S), sv);
  x->requires_grad = scale->requires_grad = true;
  /* [T, B, S] time-major: reverse, clip, max/min/select, layer norm (1 + scale). */
  lv_tensor *h = lv_op_reverse_sequence(g, x, pad);
  lv_tensor *cmp = lv_op_compare(g, h, scale, LV_CMP_GT);
  h = lv_op_select(g, cmp, lv_op_maximum(g, h, scale), lv_op_minimum(g, lv_op_clip(g, h, -1.5f, 1.5f), scale));
  h = lv_op_layer_norm_plus1(g, h, scale, NULL, 1e-6f);
  /* Attention-like: masked softmax over S with [T, 1, S] paddings. */
  float *mp = malloc(sizeof(float) * T * S);
  for (int i = 0; i < T * S; i++) mp[i] = (i % 7 == 3) ? 1.0f : 0.0f;
  lv_tensor *p = lv_op_masked_softmax(g, h, tensor_of(g, lv_shape3(T, 1, S), mp));
  /* A loss over S classes per (t, b) with smoothing and weights. */
  int32_t *idv = malloc(sizeof(int32_t) * T * B);
  for (int i = 0; i < T * B; i++) idv[i] = (i * 13) % S;
  lv_tensor *wts = lv_op_sub(g, lv_graph_fill(g, lv_shape2(T, B), 1.0f), pad);
  lv_tensor *xe = lv_op_smoothed_xent(g, lv_op_add(g, h, p), ids_of(g, lv_shape2(T, B), idv), wts, 0.1f);
  lv_tensor *loss = lv_op_reduce_sum(g, xe, LV_ALL_AXES, false);
  lv_tensor *v, *ix;
  ck_assert(lv_op_top_k(g, lv_op_reshape(g, p, lv_shape2(T * B, S)), D / 8, &v, &ix));
  EXPECT_OK(lv_graph_backward(g, loss));
  int64_t nx = (int64_t)T * B * S, nk = (int64_t)T * B * (D / 8);
  *n_out = 2 * nx + S + 2 * nk + 1;
  float *o = malloc(sizeof(float) * (size_t)*n_out);
  memcpy(o, lv_f32(p), sizeof(float) * (size_t)nx);
  memcpy(o + nx, lv_f32(x->grad), sizeof(float) * (size_t)nx);
  memcpy(o + 2 * nx, lv_f32(scale->grad), sizeof(float) * S);
  memcpy(o + 2 * nx + S, lv_f32(v), sizeof(float) * (size_t)nk);
  memcpy(o + 2 * nx + S + nk, lv_i32(ix), sizeof(int32_t) * (size_t)nk);
  o[*n_out - 1] = lv_f32(loss)[0];
  *out = o;
  free(xv);
  free(pv);
  free(sv);
  free(mp);
  free(idv);
  lv_graph_destroy(g);
  lv_set_num_threads(1);
}

START_TEST(sequence_ops_threads_same_bits) {
  float *a, *b;
  int64_t na, nb;
  many_ops_run(1, &a, &na);
  many_ops_run(2, &b, &nb);
  ck_assert_int_eq(na, nb);
  ck_assert(isfinite(a[na - 1]));
  for (int64_t i = 0; i < na; i++)
    ck_assert_msg(!memcmp(&a[i], &b[i], sizeof(float)), "1 vs 2 threads differ at %lld", (long long)i);
  free(a);
  free(b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("seq_ops");
  TCase *lstm = tcase_create("lstm_step");
  tcase_set_timeout(lstm, 120);
  tcase_add_test(lstm, lstm_step_forward_values);
  tcase_add_test(lstm, lstm_step_gradients);
  tcase_add_test(lstm, lstm_step_threads_same_bits);
  tcase_add_test(lstm, lstm_step_errors);
  tcase_add_test(lstm, rnn_seq_anchor_gradients);
  tcase_add_test(lstm, rnn_seq_anchor_errors);
  suite_add_tcase(s, lstm);
  TCase *ew = tcase_create("elementwise");
  tcase_set_timeout(ew, 120);
  tcase_add_test(ew, layer_norm_plus1_values_and_gradients);
  tcase_add_test(ew, maximum_minimum_compare_values);
  tcase_add_test(ew, select_and_clip);
  tcase_add_test(ew, masked_softmax_values_and_gradients);
  tcase_add_test(ew, activations_by_lingvo_name);
  suite_add_tcase(s, ew);
  TCase *mm = tcase_create("batch_matmul");
  tcase_set_timeout(mm, 120);
  tcase_add_test(mm, batch_matmul_rank4_values_and_gradients);
  tcase_add_test(mm, batch_matmul_threads_same_bits);
  suite_add_tcase(s, mm);
  TCase *sq = tcase_create("sequences");
  tcase_set_timeout(sq, 120);
  tcase_add_test(sq, reverse_sequence_values_and_gradients);
  tcase_add_test(sq, top_k_values);
  tcase_add_test(sq, gather_gradient_touches_only_id_rows);
  tcase_add_test(sq, gather_gradient_threads_same_bits);
  suite_add_tcase(s, sq);
  TCase *xe = tcase_create("xent");
  tcase_set_timeout(xe, 120);
  tcase_add_test(xe, smoothed_xent_values_errors_and_gradients);
  tcase_add_test(xe, smoothed_xent_gradient_in_place);
  tcase_add_test(xe, projected_xent_matches_explicit_logits);
  tcase_add_test(xe, projected_xent_gradients_and_errors);
  tcase_add_test(xe, projected_xent_memory_is_per_chunk);
  tcase_add_test(xe, projected_xent_threads_same_bits);
  suite_add_tcase(s, xe);
  TCase *th = tcase_create("threads");
  tcase_set_timeout(th, 120);
  tcase_add_test(th, sequence_ops_threads_same_bits);
  suite_add_tcase(s, th);
  return lv_test_run(s);
}
