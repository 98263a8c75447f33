/* The sequence ops of ops.h (issue 9): forward values against references computed here
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

int main(void) {
  Suite *s = suite_create("seq_ops");
  TCase *lstm = tcase_create("lstm_step");
  tcase_set_timeout(lstm, 120);
  tcase_add_test(lstm, lstm_step_forward_values);
  tcase_add_test(lstm, lstm_step_gradients);
  tcase_add_test(lstm, lstm_step_threads_same_bits);
  tcase_add_test(lstm, lstm_step_errors);
  suite_add_tcase(s, lstm);
  TCase *ew = tcase_create("elementwise");
  tcase_set_timeout(ew, 120);
  tcase_add_test(ew, layer_norm_plus1_values_and_gradients);
  suite_add_tcase(s, ew);
  return lv_test_run(s);
}
