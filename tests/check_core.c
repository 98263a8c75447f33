/* src/core and src/kernels/cpu: finite-difference gradient checks for every
 * differentiable op, forward values against hand-computed / TensorFlow values, sticky
 * errors, arena reuse, the variable store. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "gradcheck.h"
#include "base/rng.h"
#include "core/backend.h"
#include "core/graph.h"
#include "core/ops.h"
#include "core/variable.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_math.h"

#define EPS 1e-2
#define TOL 1e-2

/* ---- gradient checks, one per op ----------------------------------------------- */

typedef struct mmctx { bool ta, tb; } mmctx;
static lv_tensor *f_matmul(lv_graph *g, lv_tensor **in, const void *c) {
  const mmctx *m = c;
  return lv_op_matmul(g, in[0], in[1], m->ta, m->tb);
}
static lv_tensor *f_addmm(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_addmm(g, in[0], in[1], in[2]);
}
static lv_tensor *f_bmm(lv_graph *g, lv_tensor **in, const void *c) {
  const mmctx *m = c;
  return lv_op_batch_matmul(g, in[0], in[1], m->ta, m->tb);
}

START_TEST(grad_matmul) {
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      mmctx c = {ta, tb};
      spec in[2] = {fspec(ta ? lv_shape2(4, 3) : lv_shape2(3, 4), 1),
                    fspec(tb ? lv_shape2(5, 4) : lv_shape2(4, 5), 2)};
      gradcheck("matmul", 2, in, f_matmul, &c, EPS, TOL);
      spec bi[2] = {fspec(ta ? lv_shape3(2, 4, 3) : lv_shape3(2, 3, 4), 3),
                    fspec(tb ? lv_shape3(2, 5, 4) : lv_shape3(2, 4, 5), 4)};
      gradcheck("batch_matmul", 2, bi, f_bmm, &c, EPS, TOL);
      /* One row of output: the kernel's matrix-vector path. */
      spec row[2] = {fspec(ta ? lv_shape2(4, 1) : lv_shape2(1, 4), 7),
                     fspec(tb ? lv_shape2(5, 4) : lv_shape2(4, 5), 8)};
      char what[64];
      snprintf(what, sizeof what, "matmul one row ta %d tb %d", ta, tb);
      gradcheck(what, 2, row, f_matmul, &c, EPS, TOL);
    }
  mmctx c = {false, false};
  spec in[2] = {fspec(lv_shape3(2, 3, 4), 5), fspec(lv_shape2(4, 2), 6)};
  gradcheck("matmul rank 3", 2, in, f_matmul, &c, EPS, TOL);
  spec am[3] = {fspec(lv_shape2(3, 5), 11), fspec(lv_shape2(3, 4), 12), fspec(lv_shape2(4, 5), 13)};
  gradcheck("addmm", 3, am, f_addmm, NULL, EPS, TOL);
  /* addmm's values are add(c, matmul(a, b))'s; shapes that do not chain are an error */
  lv_graph *g = lv_graph_create(0);
  lv_tensor *t[3];
  const lv_shape sh[3] = {lv_shape2(7, 9), lv_shape2(7, 33), lv_shape2(33, 9)};
  for (int i = 0; i < 3; i++) {
    t[i] = lv_graph_tensor(g, LV_F32, sh[i]);
    float *r = rand_floats(lv_shape_numel(&sh[i]), 20 + i, -1, 1);
    memcpy(t[i]->data, r, sizeof(float) * (size_t)lv_shape_numel(&sh[i]));
    free(r);
  }
  lv_tensor *y = lv_op_addmm(g, t[0], t[1], t[2]), *z = lv_op_add(g, t[0], lv_op_matmul(g, t[1], t[2], false, false));
  for (int i = 0; i < 63; i++) ck_assert_float_eq_tol(lv_f32(y)[i], lv_f32(z)[i], 1e-5f);
  ck_assert_ptr_null(lv_op_addmm(g, t[0], t[2], t[1]));
  lv_status st = lv_graph_status(g);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(lv_status_msg(st), "addmm: float32 c [M, N], a [M, K] and b [K, N] required, got c [7,9], "
                       "a [33,9], b [7,33]"), "%s", lv_status_msg(st));
  lv_status_free(st);
  lv_graph_destroy(g);
}
END_TEST

static lv_tensor *f_add(lv_graph *g, lv_tensor **in, const void *c) { (void)c; return lv_op_add(g, in[0], in[1]); }
static lv_tensor *f_sub(lv_graph *g, lv_tensor **in, const void *c) { (void)c; return lv_op_sub(g, in[0], in[1]); }
static lv_tensor *f_mul(lv_graph *g, lv_tensor **in, const void *c) { (void)c; return lv_op_mul(g, in[0], in[1]); }
static lv_tensor *f_div(lv_graph *g, lv_tensor **in, const void *c) { (void)c; return lv_op_div(g, in[0], in[1]); }

START_TEST(grad_binary_broadcast) {
  fwd_fn fs[4] = {f_add, f_sub, f_mul, f_div};
  lv_shape pairs[][2] = {
      {{2, {3, 4}}, {2, {3, 4}}},          {{2, {3, 4}}, {1, {4}}},
      {{3, {2, 3, 4}}, {3, {2, 1, 4}}},    {{2, {3, 1}}, {2, {1, 4}}},
      {{1, {1}}, {3, {2, 3, 2}}},          {{0, {0}}, {2, {2, 3}}},
      {{2, {3, 4}}, {2, {3, 1}}},          {{3, {2, 3, 4}}, {3, {2, 3, 1}}},
  };
  for (int op = 0; op < 4; op++)
    for (size_t p = 0; p < LV_ARRAY_LEN(pairs); p++) {
      spec in[2] = {fspec(pairs[p][0], 10 + p), fspec(pairs[p][1], 20 + p)};
      if (op == 3) { /* keep divisors away from 0 */
        float *b = in[1].data;
        for (int64_t i = 0; i < lv_shape_numel(&pairs[p][1]); i++) b[i] = b[i] >= 0 ? b[i] + 0.5f : b[i] - 0.5f;
      }
      gradcheck(op == 0 ? "add" : op == 1 ? "sub" : op == 2 ? "mul" : "div", 2, in, fs[op], NULL, 1e-3, TOL);
    }
}
END_TEST

/* b of one value per row ([rows, 1], [B, T, 1]: the padding masks' shape) takes the
 * kernel's column path: each element is exactly a op b[row], for every op. */
START_TEST(binary_column_broadcast_exact) {
  const lv_shape as[] = {lv_shape2(5, 7), lv_shape3(2, 3, 33), lv_shape2(1, 9)};
  const lv_shape bs[] = {lv_shape2(5, 1), lv_shape3(2, 3, 1), lv_shape2(1, 1)};
  lv_tensor *(*ops[])(lv_graph *, lv_tensor *, lv_tensor *) = {lv_op_mul, lv_op_add, lv_op_sub, lv_op_div};
  for (size_t k = 0; k < LV_ARRAY_LEN(as); k++)
    for (size_t op = 0; op < LV_ARRAY_LEN(ops); op++) {
      lv_graph *g = lv_graph_create(0);
      lv_tensor *a = lv_graph_tensor(g, LV_F32, as[k]), *b = lv_graph_tensor(g, LV_F32, bs[k]);
      float *ra = rand_floats(lv_tensor_numel(a), 40 + k, -2, 2), *rb = rand_floats(lv_tensor_numel(b), 50 + k, 0.5, 2);
      memcpy(a->data, ra, sizeof(float) * (size_t)lv_tensor_numel(a));
      memcpy(b->data, rb, sizeof(float) * (size_t)lv_tensor_numel(b));
      lv_tensor *y = ops[op](g, a, b);
      ck_assert_ptr_nonnull(y);
      const int64_t in = as[k].d[as[k].rank - 1];
      for (int64_t i = 0; i < lv_tensor_numel(a); i++) {
        const float x = ra[i], c = rb[i / in];
        const float want = op == 0 ? x * c : op == 1 ? x + c : op == 2 ? x - c : x / c;
        ck_assert_msg(lv_f32(y)[i] == want, "shape %zu op %zu element %lld: %g, want %g", k, op, (long long)i,
                      lv_f32(y)[i], want);
      }
      free(ra);
      free(rb);
      lv_graph_destroy(g);
    }
}
END_TEST

static lv_tensor *f_scale(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_add_scalar(g, lv_op_scale(g, in[0], -2.5f), 3.0f);
}
/* a [B, S, H] op b [B, 1, H] (an additive attention's sum): the kernel's blocks of H give
 * exactly the elementwise results, both operand orders, and the gradient of b (a sum over
 * S, in S's order) exactly the serial sum. */
START_TEST(binary_middle_broadcast_exact) {
  enum { B = 3, S = 5, H = 24 };
  lv_tensor *(*ops[])(lv_graph *, lv_tensor *, lv_tensor *) = {lv_op_add, lv_op_sub, lv_op_mul, lv_op_div};
  for (size_t op = 0; op < LV_ARRAY_LEN(ops); op++)
    for (int swap = 0; swap < 2; swap++) {
      lv_graph *g = lv_graph_create(0);
      lv_tensor *a = lv_graph_tensor(g, LV_F32, lv_shape3(B, S, H)), *b = lv_graph_tensor(g, LV_F32, lv_shape3(B, 1, H));
      float *ra = rand_floats(B * S * H, 60 + op, 0.5, 2), *rb = rand_floats(B * H, 70 + op, 0.5, 2);
      memcpy(a->data, ra, sizeof(float) * B * S * H);
      memcpy(b->data, rb, sizeof(float) * B * H);
      a->requires_grad = b->requires_grad = true;
      lv_tensor *y = swap ? ops[op](g, b, a) : ops[op](g, a, b);
      ck_assert_ptr_nonnull(y);
      for (int i = 0; i < B; i++)
        for (int t = 0; t < S; t++)
          for (int h = 0; h < H; h++) {
            const float x = ra[(i * S + t) * H + h], c = rb[i * H + h];
            const float p = swap ? c : x, q = swap ? x : c;
            const float want = op == 0 ? p + q : op == 1 ? p - q : op == 2 ? p * q : p / q;
            ck_assert_msg(lv_f32(y)[(i * S + t) * H + h] == want, "op %zu swap %d [%d,%d,%d]", op, swap, i, t, h);
          }
      if (op < 2) { /* add, sub: b's gradient is +-the sum over S of y's (ones) */
        EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, lv_op_mul(g, y, a), LV_ALL_AXES, false)));
        /* d/db of sum(y * a) with y = a +- b (or b +- a): +-a (or a), summed over S in order. */
        for (int i = 0; i < B; i++)
          for (int h = 0; h < H; h++) {
            float want = 0.0f;
            for (int t = 0; t < S; t++) want += (op == 1 && !swap ? -1.0f : 1.0f) * ra[(i * S + t) * H + h];
            ck_assert_msg(lv_f32(b->grad)[i * H + h] == want, "grad op %zu swap %d [%d,%d]: %.9g want %.9g", op, swap, i,
                          h, (double)lv_f32(b->grad)[i * H + h], (double)want);
          }
      }
      free(ra);
      free(rb);
      lv_graph_destroy(g);
    }
}
END_TEST

/* lv_graph_remat's node: y = tanh(x . w + b) * x with b a variable the function reads
 * through its ctx (not among its inputs); the graph gives memory back, so the forward runs
 * without a tape and backward runs it again. */
static lv_tensor *remat_tanh_body(lv_graph *g, const void *c, lv_tensor *const *in) {
  lv_tensor *b = *(lv_tensor *const *)c;
  lv_tensor *h = lv_op_add(g, lv_op_matmul(g, in[0], in[1], false, false), b);
  return lv_op_mul(g, lv_op_activation(g, h, LV_ACT_TANH), in[0]);
}
static lv_tensor *f_remat(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  lv_graph_set_free_in_backward(g, true);
  return lv_graph_remat(g, remat_tanh_body, &in[2], sizeof in[2], 2, in);
}
START_TEST(grad_remat) {
  spec in[3] = {fspec(lv_shape2(3, 4), 41), fspec(lv_shape2(4, 4), 42), fspec(lv_shape1(4), 43)};
  gradcheck("remat", 3, in, f_remat, NULL, EPS, TOL);
}
END_TEST

START_TEST(grad_scale) {
  spec in[1] = {fspec(lv_shape2(3, 5), 3)};
  gradcheck("scale/add_scalar", 1, in, f_scale, NULL, EPS, TOL);
}
END_TEST

static lv_tensor *f_act(lv_graph *g, lv_tensor **in, const void *c) {
  return lv_op_activation(g, in[0], *(const lv_activation *)c);
}
START_TEST(grad_activations) {
  for (int a = 1; a < LV_ACT_COUNT; a++) {
    lv_activation act = (lv_activation)a;
    spec in[1] = {fspec(lv_shape2(3, 7), 40 + a)};
    float *x = in[0].data;
    for (int i = 0; i < 21; i++) {
      /* away from kinks (0, 6) and inside the domain of log/sqrt/rsqrt */
      if (act == LV_ACT_LOG || act == LV_ACT_SQRT || act == LV_ACT_RSQRT) x[i] = 0.5f + fabsf(x[i]);
      else if (fabsf(x[i]) < 0.05f) x[i] += 0.1f;
      if (act == LV_ACT_RELU6) x[i] *= 8.0f;
      if (act == LV_ACT_RELU6 && fabsf(x[i] - 6.0f) < 0.1f) x[i] = 5.0f;
    }
    gradcheck_detail = lv_activation_names[a];
    gradcheck("activation", 1, in, f_act, &act, 1e-3, TOL);
  }
  gradcheck_detail = NULL;
  lv_activation out;
  ck_assert(lv_activation_from_name("relu", &out) && out == LV_ACT_RELU);
  ck_assert(lv_activation_from_name("SWISH", &out) && out == LV_ACT_SILU);
  ck_assert(!lv_activation_from_name("RELUX", &out));
}
END_TEST

typedef struct convctx { int sh, sw, dh, dw; lv_padding pad; } convctx;
static lv_tensor *f_conv(lv_graph *g, lv_tensor **in, const void *c) {
  const convctx *k = c;
  return lv_op_conv2d(g, in[0], in[1], k->sh, k->sw, k->dh, k->dw, k->pad);
}

START_TEST(grad_conv2d) {
  convctx cs[] = {{1, 1, 1, 1, LV_PAD_SAME}, {1, 1, 1, 1, LV_PAD_VALID}, {2, 2, 1, 1, LV_PAD_SAME},
                  {2, 1, 1, 1, LV_PAD_VALID}, {1, 1, 2, 2, LV_PAD_SAME}, {1, 2, 2, 1, LV_PAD_VALID}};
  for (size_t i = 0; i < LV_ARRAY_LEN(cs); i++) {
    spec in[2] = {fspec(lv_shape4(2, 6, 5, 3), 60 + i), fspec(lv_shape4(3, 2, 3, 4), 70 + i)};
    gradcheck("conv2d", 2, in, f_conv, &cs[i], EPS, TOL);
  }
  /* Filter-only gradient (the input needs none, as for the first layer). */
  spec in[2] = {fspec(lv_shape4(2, 5, 5, 1), 80), fspec(lv_shape4(3, 3, 1, 2), 81)};
  in[0].grad = false;
  gradcheck("conv2d filter only", 2, in, f_conv, &cs[0], EPS, TOL);
}
END_TEST

typedef struct poolctx { int kh, kw, sh, sw; lv_padding pad; bool max; } poolctx;
static lv_tensor *f_pool(lv_graph *g, lv_tensor **in, const void *c) {
  const poolctx *p = c;
  return p->max ? lv_op_max_pool2d(g, in[0], p->kh, p->kw, p->sh, p->sw, p->pad)
                : lv_op_avg_pool2d(g, in[0], p->kh, p->kw, p->sh, p->sw, p->pad);
}

START_TEST(grad_pool) {
  poolctx ps[] = {{2, 2, 2, 2, LV_PAD_SAME, true},  {3, 3, 2, 2, LV_PAD_SAME, true},
                  {3, 2, 1, 2, LV_PAD_VALID, true}, {2, 2, 2, 2, LV_PAD_SAME, false},
                  {3, 3, 2, 2, LV_PAD_SAME, false}, {3, 2, 1, 2, LV_PAD_VALID, false}};
  for (size_t i = 0; i < LV_ARRAY_LEN(ps); i++) {
    spec in[1] = {fspec(lv_shape4(2, 5, 7, 2), 90 + i)};
    /* distinct values so no two window entries tie within eps */
    float *x = in[0].data;
    for (int j = 0; j < 140; j++) x[j] = (float)((j * 37) % 140) * 0.05f;
    gradcheck(ps[i].max ? "max_pool2d" : "avg_pool2d", 1, in, f_pool, &ps[i], 1e-3, TOL);
  }
}
END_TEST

static lv_tensor *f_reshape_t(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  int perm[3] = {2, 0, 1};
  lv_tensor *r = lv_op_reshape(g, in[0], lv_shape3(2, -1, 3));
  return lv_op_transpose(g, r, perm);
}
static lv_tensor *f_concat_slice(lv_graph *g, lv_tensor **in, const void *c) {
  int axis = *(const int *)c;
  lv_tensor *cat = lv_op_concat(g, in, 3, axis);
  lv_tensor *s = lv_op_slice(g, cat, axis, 1, 3);
  /* use an input twice: its gradient must accumulate over both uses */
  return lv_op_add(g, s, lv_op_slice(g, in[0], axis, 0, 3));
}

START_TEST(grad_shape_ops) {
  spec in[1] = {fspec(lv_shape2(4, 3), 100)};
  gradcheck("reshape+transpose", 1, in, f_reshape_t, NULL, EPS, TOL);
  int axis = 1;
  spec cs[3] = {fspec(lv_shape3(2, 3, 2), 101), fspec(lv_shape3(2, 1, 2), 102), fspec(lv_shape3(2, 2, 2), 103)};
  gradcheck("concat+slice axis 1", 3, cs, f_concat_slice, &axis, EPS, TOL);
  axis = 0;
  spec c0[3] = {fspec(lv_shape2(3, 2), 104), fspec(lv_shape2(1, 2), 105), fspec(lv_shape2(2, 2), 106)};
  gradcheck("concat+slice axis 0", 3, c0, f_concat_slice, &axis, EPS, TOL);
}
END_TEST

typedef struct redctx { int kind, axis; bool keep; } redctx;
static lv_tensor *f_reduce(lv_graph *g, lv_tensor **in, const void *c) {
  const redctx *r = c;
  if (r->kind == 0) return lv_op_reduce_sum(g, in[0], r->axis, r->keep);
  if (r->kind == 1) return lv_op_reduce_mean(g, in[0], r->axis, r->keep);
  return lv_op_reduce_max(g, in[0], r->axis, r->keep);
}

START_TEST(grad_reduce) {
  int axes[] = {0, 1, -1, LV_ALL_AXES};
  for (int kind = 0; kind < 3; kind++)
    for (size_t a = 0; a < LV_ARRAY_LEN(axes); a++) {
      redctx c = {kind, axes[a], a % 2 == 0};
      spec in[1] = {fspec(lv_shape3(3, 4, 2), 110 + a)};
      float *x = in[0].data;
      for (int j = 0; j < 24; j++) x[j] = (float)((j * 11) % 24) * 0.1f;
      gradcheck(kind == 0 ? "reduce_sum" : kind == 1 ? "reduce_mean" : "reduce_max", 1, in, f_reduce, &c, 1e-3, TOL);
    }
}
END_TEST

static lv_tensor *f_softmax(lv_graph *g, lv_tensor **in, const void *c) {
  return *(const int *)c ? lv_op_log_softmax(g, in[0]) : lv_op_softmax(g, in[0]);
}
static lv_tensor *f_sxent(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_sparse_softmax_xent(g, in[0], in[1]);
}
static lv_tensor *f_xent(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_softmax_xent(g, in[0], in[1]);
}

START_TEST(grad_softmax_xent) {
  for (int log_ = 0; log_ < 2; log_++) {
    spec in[1] = {fspec(lv_shape3(2, 3, 5), 120 + log_)};
    gradcheck(log_ ? "log_softmax" : "softmax", 1, in, f_softmax, &log_, 1e-3, TOL);
  }
  int32_t ids[6] = {0, 4, 2, 2, 1, 3};
  spec in[2] = {fspec(lv_shape3(2, 3, 5), 130), ispec(lv_shape2(2, 3), ids)};
  gradcheck("sparse_softmax_xent", 2, in, f_sxent, NULL, 1e-3, TOL);
  spec xe[2] = {fspec(lv_shape2(4, 5), 131), fspec(lv_shape2(4, 5), 132)};
  xe[1].grad = false;
  float *t = xe[1].data;
  for (int i = 0; i < 20; i++) t[i] = fabsf(t[i]) / 2.5f;
  gradcheck("softmax_xent", 2, xe, f_xent, NULL, 1e-3, TOL);
}
END_TEST

static lv_tensor *f_dropout(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_dropout(g, in[0], 0.7f, 1234, 5);
}
/* (x + noise)^2 through a reshape: the gradient 2 (x + noise) is taken at the noisy x. */
static lv_tensor *f_add_noise(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  lv_tensor *y = lv_op_reshape(g, lv_op_add_noise(g, in[0], 0.5f, false, 1234, 5), lv_shape1(32));
  return lv_op_mul(g, y, y);
}
static lv_tensor *f_add_noise_mm(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  lv_tensor *v = lv_op_add_noise(g, in[0], 0.5f, false, 1234, 5);
  lv_tensor *h = lv_op_activation(g, in[1], LV_ACT_TANH);
  return lv_op_matmul(g, h, lv_op_reshape(g, v, lv_shape2(8, 1)), false, false);
}
static lv_tensor *f_layer_norm(lv_graph *g, lv_tensor **in, const void *c) {
  int which = *(const int *)c;
  return lv_op_layer_norm(g, in[0], which & 1 ? in[1] : NULL, which & 2 ? in[2] : NULL, 1e-3f);
}
static lv_tensor *f_maximum_scalar(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_maximum_scalar(g, in[0], 0.1f);
}
static lv_tensor *f_gather(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_gather(g, in[0], in[1]);
}

static lv_tensor *f_gather_cols(lv_graph *g, lv_tensor **in, const void *c) {
  return lv_op_gather_cols(g, in[0], in[1], *(const int64_t *)c);
}

START_TEST(grad_dropout_layer_norm_gather) {
  spec d[1] = {fspec(lv_shape2(4, 8), 140)};
  gradcheck("dropout", 1, d, f_dropout, NULL, EPS, TOL);
  spec an[1] = {fspec(lv_shape2(4, 8), 141)};
  gradcheck("add_noise", 1, an, f_add_noise, NULL, EPS, TOL);
  spec am[2] = {fspec(lv_shape1(8), 142), fspec(lv_shape3(2, 3, 8), 143)};
  gradcheck("add_noise", 2, am, f_add_noise_mm, NULL, EPS, TOL);
  for (int which = 0; which < 4; which++) {
    spec in[3] = {fspec(lv_shape3(2, 3, 6), 150 + which), fspec(lv_shape1(6), 160), fspec(lv_shape1(6), 170)};
    in[1].grad = which & 1;
    in[2].grad = (which & 2) != 0;
    gradcheck("layer_norm", 3, in, f_layer_norm, &which, 1e-3, 2e-2);
  }
  int32_t ids[5] = {2, 0, 2, 3, 2}; /* repeated ids accumulate */
  spec in[2] = {fspec(lv_shape2(4, 3), 180), ispec(lv_shape1(5), ids)};
  gradcheck("gather", 2, in, f_gather, NULL, EPS, TOL);
  /* Columns of a [3, 4] shard holding classes 2..5: repeated ids accumulate, the ids of
   * other shards (0, 7) get zero rows and no gradient. */
  int32_t cids[6] = {3, 0, 5, 3, 7, 2};
  int64_t off = 2;
  spec cin[2] = {fspec(lv_shape2(3, 4), 185), ispec(lv_shape1(6), cids)};
  gradcheck("gather_cols", 2, cin, f_gather_cols, &off, EPS, TOL);
  /* max(x, 0.1): inputs are spread well away from the kink. */
  spec m[1] = {fspec(lv_shape2(3, 5), 190)};
  gradcheck("maximum_scalar", 1, m, f_maximum_scalar, NULL, EPS, TOL);
}
END_TEST

static lv_tensor *tensor_of(lv_graph *g, lv_shape s, const float *v);

START_TEST(fwd_moving_average_and_fill) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *avg = lv_graph_fill(g, lv_shape1(3), 2.0f);
  float xv[3] = {0, 1, 10};
  lv_tensor *x = tensor_of(g, lv_shape1(3), xv);
  ck_assert(lv_op_moving_average_update(g, avg, x, 0.9));
  /* Deferred until the step is applied. */
  for (int i = 0; i < 3; i++) ck_assert_float_eq(lv_f32(avg)[i], 2.0f);
  ck_assert_int_eq(lv_graph_num_updates(g), 1);
  ck_assert(lv_graph_apply_updates(g) == NULL);
  for (int i = 0; i < 3; i++) ck_assert_float_eq(lv_f32(avg)[i], (float)(2.0f * 0.9 + xv[i] * (1 - 0.9)));
  ck_assert(!lv_op_moving_average_update(g, avg, lv_graph_zeros(g, LV_F32, lv_shape1(2)), 0.9));
  lv_status st = lv_graph_status(g);
  ck_assert_msg(strstr(lv_status_msg(st), "moving_average: float32 average and value of equal size") != NULL, "%s",
                lv_status_msg(st));
  lv_status_free(st);
  lv_graph_destroy(g);
}
END_TEST

/* ---- batch norm ------------------------------------------------------------------ */

/* Inputs x, paddings, gamma, beta, moving mean, moving variance; the flags pick which the
 * op gets. */
typedef struct bnctx { bool pad, zero, gamma, beta, training; } bnctx;
static lv_tensor *f_batch_norm(lv_graph *g, lv_tensor **in, const void *c) {
  const bnctx *b = c;
  return lv_op_batch_norm(g, in[0], b->pad ? in[1] : NULL, b->gamma ? in[2] : NULL, b->beta ? in[3] : NULL, 1e-3f,
                          b->zero, b->training, b->training ? NULL : in[4], b->training ? NULL : in[5], 0.9);
}

START_TEST(grad_batch_norm) {
  static const float pad[10] = {0, 0, 1, 0, 0, 0, 0, 1, 1, 0};
  static const bnctx cases[] = {{false, false, true, true, true}, {true, true, true, true, true},
                                {true, false, true, false, true}, {true, true, false, true, true},
                                {false, false, true, true, false}, {true, true, true, true, false}};
  for (size_t k = 0; k < LV_ARRAY_LEN(cases); k++) {
    spec in[6] = {fspec(lv_shape3(2, 5, 3), 400 + k), fspec(lv_shape2(2, 5), 410), fspec(lv_shape1(3), 420),
                  fspec(lv_shape1(3), 430),           fspec(lv_shape1(3), 440),   fspec(lv_shape1(3), 450)};
    memcpy(in[1].data, pad, sizeof pad);
    for (int i = 0; i < 3; i++) ((float *)in[5].data)[i] = 0.5f + 0.3f * (float)i; /* a variance */
    in[1].grad = in[4].grad = in[5].grad = false;
    in[2].grad = cases[k].gamma;
    in[3].grad = cases[k].beta;
    gradcheck("batch_norm", 6, in, f_batch_norm, &cases[k], 1e-3, 2e-2);
  }
}
END_TEST

/* rows x c with offset 5 (the moments must not lose the variance to the mean), every 7th
 * row padded and holding garbage. */
enum { BN_ROWS = 4000, BN_C = 24 };
typedef struct bn_run {
  float y[BN_ROWS * BN_C], gx[BN_ROWS * BN_C], gg[BN_C], gb[BN_C], mm[BN_C], mv[BN_C];
} bn_run;

static void bn_data(float *x, float *pad, float *gamma, float *beta, float *wy) {
  float *r = rand_floats(BN_ROWS * BN_C, 460, -1, 1);
  for (int i = 0; i < BN_ROWS; i++) {
    pad[i] = i % 7 == 3;
    for (int j = 0; j < BN_C; j++)
      x[i * BN_C + j] = pad[i] ? 1e6f * (float)(j + 1) : 5.0f + (1.0f + 0.1f * (float)j) * r[i * BN_C + j];
  }
  for (int j = 0; j < BN_C; j++) gamma[j] = 0.05f * (float)(j - 12), beta[j] = 0.01f * (float)j;
  for (int i = 0; i < BN_ROWS * BN_C; i++) wy[i] = 0.5f + 0.25f * (float)((i * 7919) % 13);
  free(r);
}

/* One training step of the op: output, gradients to x, gamma, beta, and the moving
 * statistics (starting at 0 and 1) after the queued updates are applied. */
static void bn_step(int threads, bn_run *o) {
  static float x[BN_ROWS * BN_C], pad[BN_ROWS], gamma[BN_C], beta[BN_C], wy[BN_ROWS * BN_C];
  bn_data(x, pad, gamma, beta, wy);
  lv_set_num_threads(threads);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *tx = tensor_of(g, lv_shape2(BN_ROWS, BN_C), x), *tp = tensor_of(g, lv_shape2(BN_ROWS, 1), pad);
  lv_tensor *tg = tensor_of(g, lv_shape1(BN_C), gamma), *tb = tensor_of(g, lv_shape1(BN_C), beta);
  lv_tensor *mm = lv_graph_fill(g, lv_shape1(BN_C), 0.0f), *mv = lv_graph_fill(g, lv_shape1(BN_C), 1.0f);
  tx->requires_grad = tg->requires_grad = tb->requires_grad = true;
  lv_tensor *y = lv_op_batch_norm(g, tx, tp, tg, tb, 1e-3f, true, true, mm, mv, 0.9);
  ck_assert_ptr_nonnull(y);
  ck_assert_int_eq(lv_graph_num_updates(g), 2);
  lv_tensor *loss = lv_op_reduce_sum(g, lv_op_mul(g, y, tensor_of(g, y->shape, wy)), LV_ALL_AXES, false);
  EXPECT_OK(lv_graph_backward(g, loss));
  EXPECT_OK(lv_graph_apply_updates(g));
  memcpy(o->y, lv_f32(y), sizeof o->y);
  memcpy(o->gx, lv_f32(tx->grad), sizeof o->gx);
  memcpy(o->gg, lv_f32(tg->grad), sizeof o->gg);
  memcpy(o->gb, lv_f32(tb->grad), sizeof o->gb);
  memcpy(o->mm, lv_f32(mm), sizeof o->mm);
  memcpy(o->mv, lv_f32(mv), sizeof o->mv);
  lv_graph_destroy(g);
  lv_set_num_threads(1);
}

#define BN_CLOSE(a, b, tol, what, i) \
  ck_assert_msg(fabs((a) - (b)) <= (tol) * (1 + fabs(b)), "%s[%d]: %.9g vs %.9g", what, (int)(i), (double)(a), (double)(b))

/* Several row blocks: values against a double computation, and the same bits with 1 and
 * 2 threads. */
START_TEST(batch_norm_matches_reference_and_threads) {
  bn_run *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  bn_step(1, a);
  bn_step(2, b);
  ck_assert_msg(memcmp(a, b, sizeof *a) == 0, "batch_norm: 1 and 2 threads differ");
  static float x[BN_ROWS * BN_C], pad[BN_ROWS], gamma[BN_C], beta[BN_C], wy[BN_ROWS * BN_C];
  bn_data(x, pad, gamma, beta, wy);
  for (int j = 0; j < BN_C; j++) {
    double n = 0, m = 0, v = 0, sg = 0, sgx = 0, sabs = 0;
    for (int i = 0; i < BN_ROWS; i++)
      if (!pad[i]) n++, m += x[i * BN_C + j];
    m /= n;
    for (int i = 0; i < BN_ROWS; i++)
      if (!pad[i]) v += (x[i * BN_C + j] - m) * (x[i * BN_C + j] - m);
    v /= n;
    const double rs = 1 / sqrt(v + 1e-3), k = rs * (1 + gamma[j]);
    BN_CLOSE(a->mm[j], 0.1 * m, 1e-6, "moving_mean", j);
    BN_CLOSE(a->mv[j], 0.9 + 0.1 * v, 1e-6, "moving_variance", j);
    for (int i = 0; i < BN_ROWS; i++) {
      const double xh = (x[i * BN_C + j] - m) * rs, g = pad[i] ? 0 : wy[i * BN_C + j];
      BN_CLOSE(a->y[i * BN_C + j], pad[i] ? 0 : xh * (1 + gamma[j]) + beta[j], 1e-5, "y", i * BN_C + j);
      sg += g;
      sgx += g * xh;
      sabs += fabs(g);
    }
    BN_CLOSE(a->gb[j], sg, 1e-5, "gbeta", j);
    /* The mean is float32 (as TF's): its rounding (2^-24 |m|) shifts every xhat alike, by
     * up to 3e-7 here, which sum(g * xhat) collects from every row. */
    ck_assert_msg(fabs(a->gg[j] - sgx) <= 1e-6 * sabs, "ggamma[%d]: %.9g vs %.9g", j, a->gg[j], sgx);
    for (int i = 0; i < BN_ROWS; i++) {
      const double xh = (x[i * BN_C + j] - m) * rs;
      const double want = pad[i] ? 0 : k * (wy[i * BN_C + j] - (sg + xh * sgx) / n);
      BN_CLOSE(a->gx[i * BN_C + j], want, 1e-4, "gx", i * BN_C + j);
    }
  }
  free(a);
  free(b);
}
END_TEST

/* Eval uses the moving statistics; every row padded gives zero moments (n = max(0, 1));
 * bad inputs are errors naming the op. */
START_TEST(batch_norm_eval_all_padded_and_errors) {
  lv_graph *g = lv_graph_create(0);
  const float xv[6] = {1, 2, 3, 4, 5, 6}, gv[2] = {0.5f, -0.5f}, bv[2] = {0.1f, 0.2f}, mmv[2] = {1, 2},
              mvv[2] = {4, 0.25f}, all[3] = {1, 1, 1};
  lv_tensor *x = tensor_of(g, lv_shape2(3, 2), xv), *ga = tensor_of(g, lv_shape1(2), gv), *be = tensor_of(g, lv_shape1(2), bv);
  lv_tensor *mm = tensor_of(g, lv_shape1(2), mmv), *mv = tensor_of(g, lv_shape1(2), mvv);
  lv_tensor *y = lv_op_batch_norm(g, x, NULL, ga, be, 1e-3f, false, false, mm, mv, 0.9);
  ck_assert_ptr_nonnull(y);
  ck_assert_int_eq(lv_graph_num_updates(g), 0);
  for (int i = 0; i < 6; i++) {
    const int j = i % 2;
    BN_CLOSE(lv_f32(y)[i], (xv[i] - mmv[j]) / sqrt(mvv[j] + 1e-3) * (1 + gv[j]) + bv[j], 1e-6, "eval y", i);
  }
  lv_tensor *pz = lv_op_batch_norm(g, x, tensor_of(g, lv_shape1(3), all), ga, be, 1e-3f, false, true, mm, mv, 0.9);
  ck_assert_ptr_nonnull(pz);
  ck_assert(lv_graph_apply_updates(g) == NULL);
  for (int i = 0; i < 6; i++) {
    const int j = i % 2;
    BN_CLOSE(lv_f32(pz)[i], xv[i] / sqrt(1e-3) * (1 + gv[j]) + bv[j], 1e-5, "all-padded y", i);
  }
  for (int j = 0; j < 2; j++) {
    BN_CLOSE(lv_f32(mm)[j], 0.9 * mmv[j], 1e-6, "all-padded moving_mean", j);
    BN_CLOSE(lv_f32(mv)[j], 0.9 * mvv[j], 1e-6, "all-padded moving_variance", j);
  }
  ck_assert_ptr_null(lv_op_batch_norm(g, x, tensor_of(g, lv_shape1(2), all), ga, be, 1e-3f, true, true, NULL, NULL, 0.9));
  lv_status st = lv_graph_status(g);
  ck_assert_msg(strstr(lv_status_msg(st), "batch_norm: paddings must be float32 with one value per row of x [3,2] (3)"),
                "%s", lv_status_msg(st));
  lv_status_free(st);
  lv_graph_reset(g);
  x = tensor_of(g, lv_shape2(3, 2), xv);
  ck_assert_ptr_null(lv_op_batch_norm(g, x, NULL, NULL, NULL, 1e-3f, false, false, NULL, NULL, 0.9));
  st = lv_graph_status(g);
  ck_assert_msg(strstr(lv_status_msg(st), "batch_norm: the moving mean and variance are required"), "%s",
                lv_status_msg(st));
  lv_status_free(st);
  lv_graph_reset(g);
  x = tensor_of(g, lv_shape2(3, 2), xv);
  ck_assert_ptr_null(lv_op_batch_norm(g, x, NULL, tensor_of(g, lv_shape1(3), all), NULL, 1e-3f, false, true, NULL, NULL, 0.9));
  st = lv_graph_status(g);
  ck_assert_msg(strstr(lv_status_msg(st), "batch_norm: gamma must be float32 of 2 values"), "%s", lv_status_msg(st));
  lv_status_free(st);
  /* No rows at all: an empty output, and the backward runs. */
  lv_graph_reset(g);
  lv_tensor *e = lv_graph_zeros(g, LV_F32, lv_shape3(0, 4, 2));
  ga = tensor_of(g, lv_shape1(2), gv);
  e->requires_grad = ga->requires_grad = true;
  lv_tensor *ey = lv_op_batch_norm(g, e, NULL, ga, NULL, 1e-3f, false, true, NULL, NULL, 0.9);
  ck_assert_ptr_nonnull(ey);
  ck_assert_int_eq(lv_tensor_numel(ey), 0);
  EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, ey, LV_ALL_AXES, false)));
  ck_assert_float_eq(lv_f32(ga->grad)[0], 0.0f);
  lv_graph_destroy(g);
}
END_TEST

/* The LeNet5 pipeline end to end at a small batch: conv, relu, pool, dropout, fc, xent. */
static lv_tensor *f_lenet(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  lv_tensor *x = lv_op_per_image_standardization(g, in[0]);
  lv_tensor *h = lv_op_relu(g, lv_op_conv2d(g, x, in[1], 1, 1, 1, 1, LV_PAD_SAME));
  h = lv_op_max_pool2d(g, h, 2, 2, 2, 2, LV_PAD_SAME);
  h = lv_op_dropout(g, h, 0.8f, 3, 1);
  h = lv_op_reshape(g, h, lv_shape2(2, -1));
  h = lv_op_add(g, lv_op_matmul(g, h, in[2], false, false), in[3]);
  lv_tensor *l = lv_op_sparse_softmax_xent(g, h, in[4]);
  return lv_op_reduce_mean(g, l, LV_ALL_AXES, false);
}

START_TEST(grad_lenet_small) {
  int32_t labels[2] = {1, 3};
  spec in[5] = {fspec(lv_shape4(2, 6, 6, 1), 190), fspec(lv_shape4(3, 3, 1, 2), 191),
                fspec(lv_shape2(18, 4), 192), fspec(lv_shape1(4), 193), ispec(lv_shape1(2), labels)};
  in[0].grad = false;
  gradcheck("lenet", 5, in, f_lenet, NULL, 1e-3, TOL);
}
END_TEST

/* ---- forward values ----------------------------------------------------------- */

static lv_tensor *tensor_of(lv_graph *g, lv_shape s, const float *v) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, s);
  memcpy(t->data, v, sizeof(float) * (size_t)lv_shape_numel(&s));
  return t;
}

START_TEST(fwd_conv_pool_shapes) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = lv_graph_zeros(g, LV_F32, lv_shape4(1, 28, 28, 1));
  lv_tensor *w = lv_graph_zeros(g, LV_F32, lv_shape4(5, 5, 1, 20));
  lv_tensor *y = lv_op_conv2d(g, x, w, 1, 1, 1, 1, LV_PAD_SAME);
  ck_assert_int_eq(y->shape.d[1], 28);
  ck_assert_int_eq(y->shape.d[3], 20);
  y = lv_op_max_pool2d(g, y, 2, 2, 2, 2, LV_PAD_SAME);
  ck_assert_int_eq(y->shape.d[1], 14);
  /* TF: 7x7 SAME stride 2 -> 4; VALID 3x3 stride 2 on 7 -> 3; SAME 5x5 stride 3 on 14 -> 5 */
  lv_tensor *x7 = lv_graph_zeros(g, LV_F32, lv_shape4(1, 7, 7, 2));
  ck_assert_int_eq(lv_op_max_pool2d(g, x7, 2, 2, 2, 2, LV_PAD_SAME)->shape.d[1], 4);
  ck_assert_int_eq(lv_op_avg_pool2d(g, x7, 3, 3, 2, 2, LV_PAD_VALID)->shape.d[2], 3);
  lv_tensor *w2 = lv_graph_zeros(g, LV_F32, lv_shape4(5, 5, 20, 3));
  lv_tensor *y2 = lv_op_conv2d(g, lv_graph_zeros(g, LV_F32, lv_shape4(1, 14, 14, 20)), w2, 3, 3, 1, 1, LV_PAD_SAME);
  ck_assert_int_eq(y2->shape.d[1], 5);
  /* dilation 2 VALID on 7 with k=3: effective 5 -> 3 */
  lv_tensor *w3 = lv_graph_zeros(g, LV_F32, lv_shape4(3, 3, 2, 1));
  ck_assert_int_eq(lv_op_conv2d(g, x7, w3, 1, 1, 2, 2, LV_PAD_VALID)->shape.d[1], 3);
  ck_assert_ptr_null(lv_graph_status(g));
  lv_graph_destroy(g);
}
END_TEST

START_TEST(fwd_conv_values) {
  /* 1x3x3x1 image 1..9, 2x2 filter of ones, SAME: TF pads bottom/right only. */
  lv_graph *g = lv_graph_create(0);
  float xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, wv[4] = {1, 1, 1, 1};
  lv_tensor *x = tensor_of(g, lv_shape4(1, 3, 3, 1), xv), *w = tensor_of(g, lv_shape4(2, 2, 1, 1), wv);
  lv_tensor *y = lv_op_conv2d(g, x, w, 1, 1, 1, 1, LV_PAD_SAME);
  float want[9] = {12, 16, 9, 24, 28, 15, 15, 17, 9};
  for (int i = 0; i < 9; i++) ck_assert_float_eq_tol(lv_f32(y)[i], want[i], 1e-5);
  /* avg pool SAME 2x2 stride 2 divides by the in-image count */
  lv_tensor *p = lv_op_avg_pool2d(g, x, 2, 2, 2, 2, LV_PAD_SAME);
  float pw[4] = {3, 4.5f, 7.5f, 9};
  for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(lv_f32(p)[i], pw[i], 1e-5);
  lv_tensor *m = lv_op_max_pool2d(g, x, 2, 2, 2, 2, LV_PAD_SAME);
  float mw[4] = {5, 6, 8, 9};
  for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(lv_f32(m)[i], mw[i], 1e-5);
  lv_graph_destroy(g);
}
END_TEST

START_TEST(fwd_per_image_std_in_top_k_argmax) {
  lv_graph *g = lv_graph_create(0);
  /* image 0: 1..4 -> mean 2.5, std sqrt(1.25); image 1 constant -> std 0 so divide by
   * 1/sqrt(4) = 0.5 after subtracting the mean -> zeros. */
  float xv[8] = {1, 2, 3, 4, 7, 7, 7, 7};
  lv_tensor *x = tensor_of(g, lv_shape4(2, 2, 2, 1), xv);
  lv_tensor *y = lv_op_per_image_standardization(g, x);
  double sd = sqrt(1.25);
  for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(lv_f32(y)[i], (xv[i] - 2.5) / sd, 1e-5);
  for (int i = 4; i < 8; i++) ck_assert_float_eq_tol(lv_f32(y)[i], 0.0, 1e-6);
  /* tiny spread: std 0.05 < 1/sqrt(4) = 0.5, so values are (x - mean) / 0.5 */
  float tv[4] = {0.0f, 0.1f, 0.0f, 0.1f};
  lv_tensor *t = lv_op_per_image_standardization(g, tensor_of(g, lv_shape2(1, 4), tv));
  ck_assert_float_eq_tol(lv_f32(t)[0], -0.1, 1e-5);
  ck_assert_float_eq_tol(lv_f32(t)[1], 0.1, 1e-5);

  /* in_top_k: ties at the boundary all count (TF semantics). */
  float lv[12] = {0.1f, 0.5f, 0.5f, 0.2f,  /* label 2 tied with 1 for top-1: in */
                  1, 2, 3, 4,              /* label 1, k=1: out; */
                  5, 5, 5, 5};             /* all tied, label 3 k=1: in */
  int32_t lab[3] = {2, 1, 3};
  lv_tensor *logits = tensor_of(g, lv_shape2(3, 4), lv);
  lv_tensor *labels = lv_graph_tensor(g, LV_I32, lv_shape1(3));
  memcpy(labels->data, lab, sizeof lab);
  lv_tensor *k1 = lv_op_in_top_k(g, logits, labels, 1);
  ck_assert_float_eq(lv_f32(k1)[0], 1.0f);
  ck_assert_float_eq(lv_f32(k1)[1], 0.0f);
  ck_assert_float_eq(lv_f32(k1)[2], 1.0f);
  lv_tensor *k3 = lv_op_in_top_k(g, logits, labels, 3);
  ck_assert_float_eq(lv_f32(k3)[1], 1.0f);
  lv_tensor *am = lv_op_argmax(g, logits);
  ck_assert_int_eq(lv_i32(am)[0], 1);
  ck_assert_int_eq(lv_i32(am)[1], 3);
  ck_assert_int_eq(lv_i32(am)[2], 0);
  /* cast uint8 -> float32 */
  lv_tensor *u = lv_graph_tensor(g, LV_U8, lv_shape1(3));
  lv_u8(u)[0] = 0; lv_u8(u)[1] = 128; lv_u8(u)[2] = 255;
  lv_tensor *uf = lv_op_cast(g, u, LV_F32);
  ck_assert_float_eq(lv_f32(uf)[2], 255.0f);
  lv_tensor *ui = lv_op_cast(g, lv_op_cast(g, uf, LV_I64), LV_I32);
  ck_assert_int_eq(lv_i32(ui)[1], 128);
  ck_assert_ptr_null(lv_graph_status(g));
  lv_graph_destroy(g);
}
END_TEST

START_TEST(fwd_softmax_stable_and_xent) {
  lv_graph *g = lv_graph_create(0);
  float xv[3] = {1000.0f, 1000.0f, -1000.0f};
  lv_tensor *x = tensor_of(g, lv_shape2(1, 3), xv);
  lv_tensor *s = lv_op_softmax(g, x);
  ck_assert_float_eq_tol(lv_f32(s)[0], 0.5, 1e-6);
  ck_assert_float_eq_tol(lv_f32(s)[2], 0.0, 1e-6);
  lv_tensor *ls = lv_op_log_softmax(g, x);
  ck_assert_float_eq_tol(lv_f32(ls)[0], -log(2.0), 1e-5);
  lv_tensor *ids = lv_graph_tensor(g, LV_I32, lv_shape1(1));
  lv_i32(ids)[0] = 1;
  lv_tensor *l = lv_op_sparse_softmax_xent(g, x, ids);
  ck_assert_float_eq_tol(lv_f32(l)[0], log(2.0), 1e-5);
  ck_assert(isfinite(lv_f32(l)[0]));
  lv_i32(ids)[0] = 3;
  ck_assert_ptr_null(lv_op_sparse_softmax_xent(g, x, ids));
  lv_status st = lv_graph_status(g);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(lv_status_msg(st), "class id 3") != NULL, "%s", lv_status_msg(st));
  lv_status_free(st);
  lv_graph_destroy(g);
}
END_TEST

/* log_softmax sums its exps without storing them (the beam search's 8000-way rows);
 * that sum (the same exps, in double) must be the one sparse_softmax_xent takes from the
 * softmax: its loss (max - x[id]) + lse is then exactly -log_softmax[id] (equal values; 0
 * and -0). Rows of several lengths (the vector loops' tails) and an 8000-way one. A float
 * sum fails it. */
START_TEST(fwd_log_softmax_sum_is_softmax_sum) {
  const int64_t lens[] = {1, 7, 33, 8000};
  lv_rng st;
  lv_rng_init(&st, 5, 0);
  for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
    const int64_t rows = 3, c = lens[li];
    lv_graph *g = lv_graph_create(0);
    float *xv = malloc(sizeof(float) * (size_t)(rows * c));
    ck_assert_ptr_nonnull(xv);
    for (int64_t i = 0; i < rows * c; i++) xv[i] = 4.0f * lv_rng_normal(&st);
    lv_tensor *x = tensor_of(g, lv_shape2(rows, c), xv);
    lv_tensor *ids = lv_graph_tensor(g, LV_I32, lv_shape1(rows));
    for (int64_t r = 0; r < rows; r++) lv_i32(ids)[r] = (int32_t)((r * 7919) % c);
    lv_tensor *ls = lv_op_log_softmax(g, x), *l = lv_op_sparse_softmax_xent(g, x, ids);
    ck_assert_ptr_nonnull(ls);
    ck_assert_ptr_nonnull(l);
    for (int64_t r = 0; r < rows; r++) {
      const float a = lv_f32(l)[r], b = -lv_f32(ls)[r * c + lv_i32(ids)[r]];
      ck_assert_msg(a == b, "row %lld of %lld: xent %.9g, -log_softmax %.9g", (long long)r,
                    (long long)c, a, b);
    }
    free(xv);
    lv_graph_destroy(g);
  }
}
END_TEST

/* ulp distance between two finite floats of the same sign region (bit patterns as
 * sign-magnitude integers). */
static int64_t ulp_dist(float a, float b) {
  int32_t ua, ub;
  memcpy(&ua, &a, 4);
  memcpy(&ub, &b, 4);
  int64_t ia = ua < 0 ? -(int64_t)(ua & 0x7fffffff) : ua, ib = ub < 0 ? -(int64_t)(ub & 0x7fffffff) : ub;
  return ia > ib ? ia - ib : ib - ia;
}

/* The softmax kernels' exp against the correctly rounded one (exp in double, rounded):
 * every 997th float of [-87.3, 0] (by bit pattern, so every binade), the edges, and the
 * special values. */
START_TEST(fwd_cpu_exp_le0_accuracy) {
  enum { N = 4096 };
  static float x[N], y[N];
  int64_t worst = 0;
  float at = 0;
  const float lo = -87.3f;
  uint32_t end;
  memcpy(&end, &lo, 4);
  int n = 0;
  for (uint32_t b = 0x80000000u;; b += 997) {
    bool last = b >= end;
    if (!last) memcpy(&x[n++], &b, 4);
    if (n < N && !last) continue;
    lv_cpu_exp_le0(n, x, y);
    for (int i = 0; i < n; i++) {
      int64_t u = ulp_dist(y[i], (float)exp((double)x[i]));
      if (u > worst) worst = u, at = x[i];
    }
    n = 0;
    if (last) break;
  }
  ck_assert_msg(worst <= 1, "exp_le0 is %lld ulp off at %.9g", (long long)worst, at);
  const float sx[6] = {0.0f, -0.0f, -87.0f, -88.0f, -INFINITY, NAN};
  float sy[6];
  lv_cpu_exp_le0(6, sx, sy);
  ck_assert(sy[0] == 1.0f && sy[1] == 1.0f);
  ck_assert_float_eq_tol(sy[2], (float)exp(-87.0), 1e-43);
  ck_assert(sy[3] == 0.0f && sy[4] == 0.0f);
  ck_assert(isnan(sy[5]));
}
END_TEST

/* The tanh and sigmoid activation kernels (kernel_math.h's branch-free forms, which the
 * LSTM gates use too) against the correctly rounded values (double, rounded): every 997th
 * float of each sign (by bit pattern, so every binade), then the edges and the specials. */
START_TEST(fwd_cpu_tanh_sigmoid_accuracy) {
  enum { N = 4096 };
  static float x[N], yt[N], ys[N];
  int64_t worst_t = 0, worst_s = 0;
  float at_t = 0, at_s = 0;
  for (uint32_t sign = 0; sign < 2; sign++) {
    int n = 0;
    for (uint64_t b = 0;; b += 997) {
      bool last = b >= 0x7f800000u;
      if (!last) {
        uint32_t u = (uint32_t)b | (sign << 31);
        memcpy(&x[n++], &u, 4);
      }
      if (n < N && !last) continue;
      lv_cpu_act_fwd(NULL, LV_ACT_TANH, n, x, yt);
      lv_cpu_act_fwd(NULL, LV_ACT_SIGMOID, n, x, ys);
      for (int i = 0; i < n; i++) {
        int64_t u = ulp_dist(yt[i], (float)tanh((double)x[i]));
        if (u > worst_t) worst_t = u, at_t = x[i];
        float rs = (float)(1.0 / (1.0 + exp(-(double)x[i])));
        if (rs >= 1.17549435e-38f) {
          u = ulp_dist(ys[i], rs);
          if (u > worst_s) worst_s = u, at_s = x[i];
        } else {
          ck_assert_msg(ys[i] >= 0.0f && ys[i] <= 1.2e-38f, "sigmoid(%.9g) = %.9g", x[i], ys[i]);
        }
      }
      n = 0;
      if (last) break;
    }
  }
  ck_assert_msg(worst_t <= 2, "tanh is %lld ulp off at %.9g", (long long)worst_t, at_t);
  ck_assert_msg(worst_s <= 2, "sigmoid is %lld ulp off at %.9g", (long long)worst_s, at_s);
  const float sx[9] = {0.0f, -0.0f, 0.625f, -0.625f, 9.5f, -9.5f, INFINITY, -INFINITY, NAN};
  float st[9], ss[9];
  lv_cpu_act_fwd(NULL, LV_ACT_TANH, 9, sx, st);
  lv_cpu_act_fwd(NULL, LV_ACT_SIGMOID, 9, sx, ss);
  ck_assert(st[0] == 0.0f && !signbit(st[0]) && st[1] == 0.0f && signbit(st[1]));
  ck_assert(ulp_dist(st[2], (float)tanh(0.625)) <= 2 && st[3] == -st[2]);
  ck_assert(st[4] == 1.0f && st[5] == -1.0f && st[6] == 1.0f && st[7] == -1.0f && isnan(st[8]));
  ck_assert(ss[0] == 0.5f && ss[1] == 0.5f && ss[6] == 1.0f && ss[7] == 0.0f && isnan(ss[8]));
  /* The activation's backward from y: gy * (1 - y^2) and gy * y (1 - y), accumulating. */
  const float gy[3] = {1.0f, -2.0f, 0.5f}, yy[3] = {0.25f, -0.5f, 0.75f};
  float gx[3] = {1.0f, 1.0f, 1.0f};
  lv_cpu_act_bwd(NULL, LV_ACT_TANH, 3, sx, yy, gy, gx, true);
  ck_assert(gx[0] == 1.0f + 0.9375f && gx[1] == 1.0f - 1.5f && gx[2] == 1.0f + 0.21875f);
  lv_cpu_act_bwd(NULL, LV_ACT_SIGMOID, 3, sx, yy, gy, gx, false);
  ck_assert(gx[0] == 0.1875f && gx[1] == -2.0f * -0.75f && gx[2] == 0.09375f);
}
END_TEST

/* The LSTM step's vectorized rows against the same formulas written plainly (fwd) and
 * against the kernel's own general rows (bwd: with gm_prev NULL the kernel takes them),
 * bit for bit, for every combination of cell cap, output nonlinearity, missing gc / gm
 * and accumulation, with a width that leaves a vector tail. */
START_TEST(lstm_step_simd_rows_match_plain) {
  enum { B = 5, H = 37 };
  static float gates[B * 4 * H], cp[B * H], mp[B * H], gc[B * H], gm[B * H], c[B * H], m[B * H];
  static float gg1[B * 4 * H], gg2[B * 4 * H], gcp1[B * H], gcp2[B * H], gmp[B * H];
  lv_rng r;
  lv_rng_init(&r, 7, 0);
  for (int i = 0; i < B * 4 * H; i++) gates[i] = 8.0f * lv_rng_uniform(&r) - 4.0f;
  for (int i = 0; i < B * H; i++) {
    cp[i] = 4.0f * lv_rng_uniform(&r) - 2.0f;
    mp[i] = 2.0f * lv_rng_uniform(&r) - 1.0f;
    gc[i] = 2.0f * lv_rng_uniform(&r) - 1.0f;
    gm[i] = 2.0f * lv_rng_uniform(&r) - 1.0f;
  }
  const float pad[B] = {0, 1, 0, 0, 0};
  for (int v = 0; v < 64; v++) {
    const float cap = v & 1 ? 0.9f : 0.0f;
    const bool out_nl = v & 2, no_gc = v & 4, no_gm = v & 8, acc = v & 16, with_pad = v & 32;
    lv_cpu_lstm_step_fwd(NULL, B, H, gates, cp, mp, with_pad ? pad : NULL, 1.0f, cap, out_nl, c, m);
    for (int b = 0; b < B; b++)
      for (int j = 0; j < H; j++) {
        const float *g = gates + b * 4 * H;
        float nc = lv_ksigm(g[2 * H + j] + 1.0f) * cp[b * H + j] + lv_ksigm(g[H + j]) * lv_ktanh(g[j]);
        if (cap > 0) nc = nc < -cap ? -cap : (nc > cap ? cap : nc);
        float mm = lv_ksigm(g[3 * H + j]) * (out_nl ? lv_ktanh(nc) : nc);
        if (with_pad && pad[b] > 0.5f) nc = cp[b * H + j], mm = mp[b * H + j];
        ck_assert_msg(c[b * H + j] == nc && m[b * H + j] == mm, "fwd variant %d row %d unit %d", v, b, j);
      }
    for (int i = 0; i < B * 4 * H; i++) gg1[i] = gg2[i] = (float)i / 100.0f;
    for (int i = 0; i < B * H; i++) gcp1[i] = gcp2[i] = gmp[i] = (float)i / 50.0f;
    /* With gm_prev (the vectorized rows), then without (the general rows). */
    lv_cpu_lstm_step_bwd(NULL, B, H, gates, cp, with_pad ? pad : NULL, 1.0f, cap, out_nl, no_gc ? NULL : gc,
                         no_gm ? NULL : gm, gg1, acc, gcp1, !acc, gmp, acc);
    lv_cpu_lstm_step_bwd(NULL, B, H, gates, cp, with_pad ? pad : NULL, 1.0f, cap, out_nl, no_gc ? NULL : gc,
                         no_gm ? NULL : gm, gg2, acc, gcp2, !acc, NULL, acc);
    ck_assert_msg(!memcmp(gg1, gg2, sizeof gg1), "bwd ggates, variant %d", v);
    ck_assert_msg(!memcmp(gcp1, gcp2, sizeof gcp1), "bwd gc_prev, variant %d", v);
    for (int i = 0; i < B * H; i++) {
      /* A padded row passes gm through; the others give m_prev no gradient here. */
      float d = with_pad && pad[i / H] > 0.5f && !no_gm ? gm[i] : 0.0f;
      ck_assert(gmp[i] == (acc ? (float)i / 50.0f + d : d));
    }
  }
}
END_TEST

START_TEST(fwd_dropout_deterministic) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = lv_graph_tensor(g, LV_F32, lv_shape1(10000));
  for (int i = 0; i < 10000; i++) lv_f32(x)[i] = 1.0f;
  lv_tensor *a = lv_op_dropout(g, x, 0.8f, 42, 3), *b = lv_op_dropout(g, x, 0.8f, 42, 3);
  lv_tensor *c = lv_op_dropout(g, x, 0.8f, 42, 4);
  int kept = 0, same = 0;
  for (int i = 0; i < 10000; i++) {
    ck_assert(lv_f32(a)[i] == 0.0f || fabsf(lv_f32(a)[i] - 1.25f) < 1e-6f);
    ck_assert_float_eq(lv_f32(a)[i], lv_f32(b)[i]);
    kept += lv_f32(a)[i] != 0.0f;
    same += lv_f32(a)[i] == lv_f32(c)[i];
  }
  ck_assert_int_gt(kept, 7700);
  ck_assert_int_lt(kept, 8300);
  ck_assert_int_lt(same, 9500);
  lv_graph_set_training(g, false);
  ck_assert_ptr_eq(lv_op_dropout(g, x, 0.8f, 42, 3), x);
  lv_graph_destroy(g);
}
END_TEST

/* Naive double-precision conv reference (TF SAME/VALID) against the im2col kernel on
 * a batch large enough to be split into several chunks, with 2 threads. */
static void ref_conv(const float *x, const float *w, int n, int h, int wd, int c, int kh, int kw,
                     int o, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow, double *y) {
  for (int b = 0; b < n; b++)
    for (int i = 0; i < oh; i++)
      for (int j = 0; j < ow; j++)
        for (int q = 0; q < o; q++) {
          double s = 0;
          for (int u = 0; u < kh; u++)
            for (int v = 0; v < kw; v++) {
              int ih = i * sh - pt + u * dh, iw = j * sw - pl + v * dw;
              if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
              for (int e = 0; e < c; e++)
                s += (double)x[((b * h + ih) * wd + iw) * c + e] * w[((u * kw + v) * c + e) * o + q];
            }
          y[((b * oh + i) * ow + j) * o + q] = s;
        }
}

START_TEST(conv_chunked_matches_reference) {
  lv_set_num_threads(2);
  /* 5 images of ~0.9M patch floats each: one image per chunk, enough chunks for the
   * chunk-per-thread path. */
  const int n = 5, h = 70, wd = 66, c = 16, kh = 5, kw = 5, o = 8;
  lv_graph *g = lv_graph_create(0);
  float *xv = rand_floats((int64_t)n * h * wd * c, 300, -1, 1), *wv = rand_floats(kh * kw * c * o, 301, -1, 1);
  lv_tensor *x = tensor_of(g, lv_shape4(n, h, wd, c), xv), *w = tensor_of(g, lv_shape4(kh, kw, c, o), wv);
  x->requires_grad = w->requires_grad = true;
  lv_tensor *y = lv_op_conv2d(g, x, w, 2, 1, 1, 2, LV_PAD_SAME);
  ck_assert_ptr_nonnull(y);
  int oh = 35, ow = 66; /* ceil(70/2), ceil(66/1) */
  ck_assert_int_eq(y->shape.d[1], oh);
  ck_assert_int_eq(y->shape.d[2], ow);
  /* SAME: rows total pad (35-1)*2+5-70 = 3 -> top 1; cols (66-1)+9-66 = 8 -> left 4 */
  double *ref = malloc(sizeof(double) * (size_t)lv_tensor_numel(y));
  ref_conv(xv, wv, n, h, wd, c, kh, kw, o, 2, 1, 1, 2, 1, 4, oh, ow, ref);
  for (int64_t i = 0; i < lv_tensor_numel(y); i++)
    ck_assert_msg(fabs(lv_f32(y)[i] - ref[i]) < 1e-4 * (1 + fabs(ref[i])), "y[%lld] %f vs %f",
                  (long long)i, lv_f32(y)[i], ref[i]);
  /* loss = sum(y): dW[u,v,e,q] = sum over outputs of the matching input, dX likewise. */
  ck_assert_ptr_null(lv_graph_backward(g, lv_op_reduce_sum(g, y, LV_ALL_AXES, false)));
  double *dw = calloc((size_t)kh * kw * c * o, sizeof(double));
  double *dx = calloc((size_t)n * h * wd * c, sizeof(double));
  for (int b = 0; b < n; b++)
    for (int i = 0; i < oh; i++)
      for (int j = 0; j < ow; j++)
        for (int u = 0; u < kh; u++)
          for (int v = 0; v < kw; v++) {
            int ih = i * 2 - 1 + u, iw = j - 4 + v * 2;
            if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
            for (int e = 0; e < c; e++)
              for (int q = 0; q < o; q++) {
                dw[((u * kw + v) * c + e) * o + q] += xv[((b * h + ih) * wd + iw) * c + e];
                dx[((b * h + ih) * wd + iw) * c + e] += wv[((u * kw + v) * c + e) * o + q];
              }
          }
  for (int i = 0; i < kh * kw * c * o; i++)
    ck_assert_msg(fabs(lv_f32(w->grad)[i] - dw[i]) < 1e-3 * (1 + fabs(dw[i])), "dw[%d] %f vs %f", i,
                  lv_f32(w->grad)[i], dw[i]);
  for (int64_t i = 0; i < (int64_t)n * h * wd * c; i++)
    ck_assert_msg(fabs(lv_f32(x->grad)[i] - dx[i]) < 1e-3 * (1 + fabs(dx[i])), "dx[%lld]", (long long)i);
  free(ref);
  free(dw);
  free(dx);
  free(xv);
  free(wv);
  lv_graph_destroy(g);
  lv_set_num_threads(1);
}
END_TEST

/* TF's output size and leading pad, written out again so the test does not trust the
 * code under test for them. */
static void tf_pad(bool same, int in, int k, int s, int *out, int *lead) {
  if (same) {
    *out = (in + s - 1) / s;
    int total = (*out - 1) * s + k - in;
    *lead = total > 0 ? total / 2 : 0;
  } else {
    *out = in >= k ? (in - k) / s + 1 : 0;
    *lead = 0;
  }
}


/* The direct (stride 1, dilation 1) AVX-512 convolution of cpu_conv_direct.c against a
 * double-precision reference, forward and both gradients (overwrite and accumulate), on
 * odd shapes: one and several output-channel blocks and tile tails, kernels larger than
 * the image, asymmetric and no padding, more images than filter-gradient groups; and
 * bit for bit the same with 1 and 2 threads. */
static void ref_conv_bwd(const float *x, const float *w, const float *gy, const lv_conv_geom *g, double *gx,
                         double *gw) {
  for (int b = 0; b < g->n; b++)
    for (int i = 0; i < g->oh; i++)
      for (int j = 0; j < g->ow; j++)
        for (int u = 0; u < g->kh; u++)
          for (int v = 0; v < g->kw; v++) {
            int ih = i - g->pt + u, iw = j - g->pl + v;
            if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w) continue;
            for (int e = 0; e < g->c; e++)
              for (int q = 0; q < g->o; q++) {
                double d = gy[((b * g->oh + i) * g->ow + j) * g->o + q];
                gw[((u * g->kw + v) * g->c + e) * g->o + q] += d * x[((b * g->h + ih) * g->w + iw) * g->c + e];
                gx[((b * g->h + ih) * g->w + iw) * g->c + e] += d * w[((u * g->kw + v) * g->c + e) * g->o + q];
              }
          }
}

static void check_close(const char *what, int shape, const float *got, const double *want, int64_t n, double tol) {
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])), "shape %d %s[%lld]: %.7g vs %.7g", shape, what,
                  (long long)i, got[i], want[i]);
}

START_TEST(conv_direct_matches_reference) {
  /* n, h, w, c, kh, kw, o, pt, pl, oh, ow */
  static const int shapes[][11] = {
      {3, 28, 28, 1, 5, 5, 20, 2, 2, 28, 28},  {9, 14, 14, 20, 5, 5, 50, 2, 2, 14, 14},
      {2, 5, 19, 17, 3, 3, 70, 0, 0, 3, 17},   {2, 7, 6, 3, 3, 2, 5, 1, 0, 7, 5},
      {3, 8, 9, 2, 4, 4, 16, 1, 1, 8, 9},      {2, 3, 2, 4, 5, 5, 33, 2, 2, 3, 2},
      {4, 5, 5, 1, 1, 1, 1, 0, 0, 5, 5},       {2, 4, 40, 3, 1, 3, 16, 0, 1, 4, 40},
      {1, 2, 2, 2, 3, 3, 3, 0, 0, 0, 0},       {2, 6, 7, 16, 3, 3, 5, 1, 1, 6, 7},
      {2, 5, 6, 32, 5, 5, 3, 2, 2, 5, 6},      {2, 6, 9, 3, 3, 7, 4, 1, 3, 6, 9},
  };
  if (!lv_cpu_has_avx512()) {
    fprintf(stderr, "conv_direct_matches_reference: this CPU has no AVX-512: the direct conv is not used here\n");
    return;
  }
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const int *s = shapes[si];
    lv_conv_geom g = {s[0], s[1], s[2], s[3], s[4], s[5], s[6], 1, 1, 1, 1, s[7], s[8], s[9], s[10]};
    ck_assert(lv_cpu_conv2d_direct_ok(&g));
    const int64_t nx = (int64_t)g.n * g.h * g.w * g.c, nw = (int64_t)g.kh * g.kw * g.c * g.o,
                  ny = (int64_t)g.n * g.oh * g.ow * g.o;
    float *x = rand_floats(nx, 400 + si, -1, 1), *w = rand_floats(nw, 500 + si, -1, 1),
          *gy = rand_floats(ny > 0 ? ny : 1, 600 + si, -1, 1);
    double *ry = malloc(sizeof(double) * (size_t)(ny + 1)), *rgx = calloc((size_t)nx, sizeof(double)),
           *rgw = calloc((size_t)nw, sizeof(double));
    ref_conv(x, w, g.n, g.h, g.w, g.c, g.kh, g.kw, g.o, 1, 1, 1, 1, g.pt, g.pl, g.oh, g.ow, ry);
    ref_conv_bwd(x, w, gy, &g, rgx, rgw);
    float *scratch = malloc(sizeof(float) * (lv_cpu_conv2d_direct_scratch(&g) + 1));
    float *y[2], *gx[2], *gw[2];
    for (int th = 0; th < 2; th++) {
      lv_set_num_threads(th + 1);
      y[th] = malloc(sizeof(float) * (size_t)(ny + 1));
      gx[th] = malloc(sizeof(float) * (size_t)nx);
      gw[th] = malloc(sizeof(float) * (size_t)nw);
      lv_cpu_conv2d_direct_fwd(NULL, &g, x, w, y[th]);
      lv_cpu_conv2d_direct_bwd(NULL, &g, x, w, gy, gx[th], false, gw[th], false, scratch);
      check_close("y", (int)si, y[th], ry, ny, 1e-4);
      check_close("gx", (int)si, gx[th], rgx, nx, 1e-4);
      check_close("gw", (int)si, gw[th], rgw, nw, 1e-4);
    }
    ck_assert_msg(!memcmp(y[0], y[1], sizeof(float) * (size_t)ny), "shape %zu: y differs with 2 threads", si);
    ck_assert_msg(!memcmp(gx[0], gx[1], sizeof(float) * (size_t)nx), "shape %zu: gx differs with 2 threads", si);
    ck_assert_msg(!memcmp(gw[0], gw[1], sizeof(float) * (size_t)nw), "shape %zu: gw differs with 2 threads", si);
    /* Accumulating forms add to what is there; one gradient alone leaves the other. */
    for (int64_t i = 0; i < nx; i++) rgx[i] += 0.5;
    for (int64_t i = 0; i < nw; i++) rgw[i] -= 0.25;
    for (int64_t i = 0; i < nx; i++) gx[0][i] = 0.5f;
    for (int64_t i = 0; i < nw; i++) gw[0][i] = -0.25f;
    lv_cpu_conv2d_direct_bwd(NULL, &g, x, w, gy, gx[0], true, NULL, false, scratch);
    lv_cpu_conv2d_direct_bwd(NULL, &g, x, w, gy, NULL, false, gw[0], true, scratch);
    check_close("gx acc", (int)si, gx[0], rgx, nx, 1e-4);
    check_close("gw acc", (int)si, gw[0], rgw, nw, 1e-4);
    for (int th = 0; th < 2; th++) {
      free(y[th]);
      free(gx[th]);
      free(gw[th]);
    }
    free(scratch);
    free(x);
    free(w);
    free(gy);
    free(ry);
    free(rgx);
    free(rgw);
  }
  /* Strides and dilations go to im2col + GEMM. */
  lv_conv_geom s2 = {1, 8, 8, 2, 3, 3, 4, 2, 2, 1, 1, 1, 1, 4, 4}, d2 = {1, 8, 8, 2, 3, 3, 4, 1, 1, 2, 2, 2, 2, 8, 8};
  ck_assert(!lv_cpu_conv2d_direct_ok(&s2));
  ck_assert(!lv_cpu_conv2d_direct_ok(&d2));
  lv_set_num_threads(1);
}
END_TEST

/* Undilated convs whose windows hang over the image on one or both sides (the padded
 * run copy of im2col): single-channel and multi-channel images, odd and even filters,
 * SAME and VALID, filters wider than the image. */
START_TEST(conv_padded_runs_match_reference) {
  const int cases[][8] = {/* h, w, c, kh, kw, o, sh, sw */
                          {9, 8, 1, 5, 5, 20, 1, 1}, {7, 7, 3, 3, 4, 5, 1, 1},
                          {6, 5, 2, 5, 7, 3, 2, 2},  {4, 3, 20, 5, 5, 6, 1, 1},
                          {8, 9, 1, 1, 1, 2, 1, 1}};
  for (size_t t = 0; t < LV_ARRAY_LEN(cases); t++)
    for (int same = 0; same < 2; same++) {
      const int n = 3, h = cases[t][0], wd = cases[t][1], c = cases[t][2], kh = cases[t][3],
                kw = cases[t][4], o = cases[t][5], sh = cases[t][6], sw = cases[t][7];
      if (!same && (kh > h || kw > wd)) continue;
      lv_graph *g = lv_graph_create(0);
      float *xv = rand_floats((int64_t)n * h * wd * c, 400 + t, -1, 1);
      float *wv = rand_floats(kh * kw * c * o, 410 + t, -1, 1);
      lv_tensor *x = tensor_of(g, lv_shape4(n, h, wd, c), xv), *w = tensor_of(g, lv_shape4(kh, kw, c, o), wv);
      lv_tensor *y = lv_op_conv2d(g, x, w, sh, sw, 1, 1, same ? LV_PAD_SAME : LV_PAD_VALID);
      ck_assert_ptr_nonnull(y);
      int oh, ow, pt, pl;
      tf_pad(same, h, kh, sh, &oh, &pt);
      tf_pad(same, wd, kw, sw, &ow, &pl);
      ck_assert_int_eq(y->shape.d[1], oh);
      ck_assert_int_eq(y->shape.d[2], ow);
      double *ref = malloc(sizeof(double) * (size_t)lv_tensor_numel(y));
      ref_conv(xv, wv, n, h, wd, c, kh, kw, o, sh, sw, 1, 1, pt, pl, oh, ow, ref);
      for (int64_t i = 0; i < lv_tensor_numel(y); i++)
        ck_assert_msg(fabs(lv_f32(y)[i] - ref[i]) < 1e-4 * (1 + fabs(ref[i])),
                      "case %zu same %d y[%lld] %f vs %f", t, same, (long long)i, lv_f32(y)[i], ref[i]);
      free(ref);
      free(xv);
      free(wv);
      lv_graph_destroy(g);
    }
}
END_TEST

/* Max pooling against a naive reference, with ties (the first maximum in window order
 * takes the gradient) and windows both whole (the 2x2 path) and cut by SAME padding. */
START_TEST(max_pool_matches_reference_with_ties) {
  const int n = 2, wd = 6, c = 5;
  const int64_t nx_max = (int64_t)n * 7 * wd * c;
  float *xv = malloc(sizeof(float) * (size_t)nx_max);
  for (int64_t i = 0; i < nx_max; i++) xv[i] = (float)((i * 7919) % 5); /* many ties */
  /* kh, kw, sh, sw, h; the last two tile the image (cpu_pool.c's streaming backward). */
  const int ps[][5] = {{2, 2, 2, 2, 7}, {3, 3, 2, 2, 7}, {2, 2, 1, 1, 7}, {2, 2, 2, 2, 6}, {2, 3, 2, 3, 4}};
  for (size_t t = 0; t < LV_ARRAY_LEN(ps); t++) {
    const int kh = ps[t][0], kw = ps[t][1], sh = ps[t][2], sw = ps[t][3], h = ps[t][4];
    const int64_t nx = (int64_t)n * h * wd * c;
    lv_graph *g = lv_graph_create(0);
    lv_tensor *x = tensor_of(g, lv_shape4(n, h, wd, c), xv);
    x->requires_grad = true;
    lv_tensor *y = lv_op_max_pool2d(g, x, kh, kw, sh, sw, LV_PAD_SAME);
    ck_assert_ptr_nonnull(y);
    int oh, ow, pt, pl;
    tf_pad(true, h, kh, sh, &oh, &pt);
    tf_pad(true, wd, kw, sw, &ow, &pl);
    ck_assert_ptr_null(lv_graph_backward(g, lv_op_reduce_sum(g, y, LV_ALL_AXES, false)));
    float *dx = calloc((size_t)nx, sizeof(float));
    for (int b = 0; b < n; b++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++)
          for (int e = 0; e < c; e++) {
            int64_t best = -1;
            for (int u = 0; u < kh; u++)
              for (int v = 0; v < kw; v++) {
                int ih = i * sh - pt + u, iw = j * sw - pl + v;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                int64_t at = (((int64_t)b * h + ih) * wd + iw) * c + e;
                if (best < 0 || xv[at] > xv[best]) best = at;
              }
            int64_t yi = (((int64_t)b * oh + i) * ow + j) * c + e;
            ck_assert_msg(lv_f32(y)[yi] == xv[best], "case %zu y[%lld]", t, (long long)yi);
            dx[best] += 1.0f;
          }
    for (int64_t i = 0; i < nx; i++)
      ck_assert_msg(lv_f32(x->grad)[i] == dx[i], "case %zu dx[%lld] %f vs %f", t, (long long)i,
                    lv_f32(x->grad)[i], dx[i]);
    free(dx);
    lv_graph_destroy(g);
  }
  free(xv);
}
END_TEST

/* Large products take the threaded split path of the GEMM kernel; products with one row
 * its matrix-vector path, whole (shape 2) and split by columns (shape 3). */
START_TEST(matmul_threaded_matches_reference) {
  lv_set_num_threads(2);
  lv_graph *g = lv_graph_create(0);
  const int ms[4] = {300, 4, 1, 1}, ks[4] = {170, 170, 170, 1100}, ns[4] = {60, 900, 900, 2000};
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int shape = 0; shape < 4; shape++) {
        int m = ms[shape], k = ks[shape], n = ns[shape];
        float *av = rand_floats((int64_t)m * k, 400 + ta, -1, 1), *bv = rand_floats((int64_t)k * n, 410 + tb, -1, 1);
        lv_tensor *a = tensor_of(g, ta ? lv_shape2(k, m) : lv_shape2(m, k), av);
        lv_tensor *b = tensor_of(g, tb ? lv_shape2(n, k) : lv_shape2(k, n), bv);
        lv_tensor *y = lv_op_matmul(g, a, b, ta, tb);
        ck_assert_ptr_nonnull(y);
        for (int i = 0; i < m; i++)
          for (int j = 0; j < n; j++) {
            double s = 0;
            for (int e = 0; e < k; e++)
              s += (double)(ta ? av[e * m + i] : av[i * k + e]) * (tb ? bv[j * k + e] : bv[e * n + j]);
            ck_assert_msg(fabs(lv_f32(y)[i * n + j] - s) < 1e-3, "ta %d tb %d [%d,%d]", ta, tb, i, j);
          }
        free(av);
        free(bv);
      }
  lv_graph_destroy(g);
  lv_set_num_threads(1);
}
END_TEST

/* Products with few rows and a large B (an LSTM step's) skip OpenBLAS's packing
 * (cpu_gemm_small.c), with AVX-512 or AVX2 tiles: each the CPU has, A B and A B^T
 * against a double reference, tile and block remainders in every dimension, leading
 * dimensions wider than the rows, alpha and beta (beta 0 never reads C: NaN there stays
 * out), nothing written past a row, and the same bits with 1 and 2 threads. */
START_TEST(gemm_small_matches_reference) {
  /* (n, k): column tails of every width (A B: 8, 26 and 5 of a 32-column panel; A B^T: 1 and
   * 2 of its 4 columns), k tails and a second k block of A B^T (4200 > 4096), and two B
   * too small to take. */
  const int ms[] = {2, 5, 10, 17, 24, 33, 40};
  const int nks[][2] = {{520, 304}, {520, 520}, {1040, 304}, {1040, 520}, {1050, 304}, {16, 4200}, {37, 4200},
                        {16, 17}, {37, 520}};
  const float alphas[] = {1.0f, 0.5f}, betas[] = {0.0f, 1.0f, -0.25f};
  const bool have[3] = {false, lv_cpu_has_avx2_fma(), lv_cpu_has_avx512()};
  for (int isa = LV_GEMM_SMALL_AVX2; isa <= LV_GEMM_SMALL_AVX512; isa++) {
    if (!have[isa]) {
      fprintf(stderr, "gemm_small_matches_reference: this CPU has no %s: its tiles are not tested here\n",
              lv_gemm_small_isa_names[isa]);
      continue;
    }
    int taken = 0;
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
      for (size_t ni = 0; ni < sizeof nks / sizeof *nks; ni++)
          for (int tb = 0; tb < 2; tb++) {
            const int m = ms[mi], n = nks[ni][0], k = nks[ni][1];
            const int64_t lda = k + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
            const float alpha = alphas[(mi + ni / 2) % 2], beta = betas[(ni + mi + (size_t)tb) % 3];
            float *a = rand_floats((int64_t)m * lda, 600 + (int)mi, -1, 1);
            float *b = rand_floats((tb ? (int64_t)n : k) * ldb, 610 + (int)ni, -1, 1);
            float *c0 = rand_floats((int64_t)m * ldc, 620 + (int)ni, -1, 1);
            if (beta == 0.0f) c0[0] = c0[ldc + 1] = c0[(m - 1) * ldc + n - 1] = NAN;
            float *c[2];
            bool small[2];
            for (int th = 0; th < 2; th++) {
              lv_set_num_threads(th + 1);
              c[th] = malloc(sizeof(float) * (size_t)(m * ldc));
              memcpy(c[th], c0, sizeof(float) * (size_t)(m * ldc));
              small[th] = lv_cpu_gemm_small_with((lv_gemm_small_isa)isa, NULL, false, tb, m, n, k, alpha, a, lda, b,
                                                 ldb, beta, c[th], ldc);
            }
            lv_set_num_threads(1);
            ck_assert(small[0] == small[1]);
            for (int i = 0; small[0] && i < m; i++)
              for (int j = 0; j < ldc; j++) {
                const float got = c[0][i * ldc + j];
                ck_assert_msg(memcmp(&got, &c[1][i * ldc + j], sizeof got) == 0,
                              "%s m %d n %d k %d tb %d [%d,%d]: 1 and 2 threads differ", lv_gemm_small_isa_names[isa],
                              m, n, k, tb, i, j);
                if (j >= n) { /* past the row: untouched */
                  ck_assert_msg(memcmp(&got, &c0[i * ldc + j], sizeof got) == 0, "%s m %d n %d k %d tb %d: [%d,%d] written",
                                lv_gemm_small_isa_names[isa], m, n, k, tb, i, j);
                  continue;
                }
                double s = 0;
                for (int e = 0; e < k; e++) s += (double)a[i * lda + e] * (tb ? b[j * ldb + e] : b[e * ldb + j]);
                const double want = alpha * s + (beta == 0.0f ? 0.0 : beta * (double)c0[i * ldc + j]);
                ck_assert_msg(fabs(got - want) < 1e-4 * sqrt(k) + 1e-5, "%s m %d n %d k %d tb %d alpha %g beta %g [%d,%d]: %g vs %g",
                              lv_gemm_small_isa_names[isa], m, n, k, tb, alpha, beta, i, j, got, want);
              }
            taken += small[0];
            for (int th = 0; th < 2; th++) free(c[th]);
            free(a), free(b), free(c0);
          }
    /* Rows 2-40 (A B) or 2-24 (A B^T) of the 7 B of 64k elements or more; AVX2 also needs
     * n % 16 == 0 (A B: 3 of them) or k % 8 == 0 (A B^T: all 7). */
    ck_assert_int_eq(taken, isa == LV_GEMM_SMALL_AVX512 ? 7 * 7 + 5 * 7 : 7 * 3 + 5 * 7);
  }
  /* It declines what it is not for: one row (OpenBLAS's matrix-vector path), more rows
   * than it wins at, A transposed, a small B, and every shape when off. */
  for (int isa = LV_GEMM_SMALL_OFF; isa <= LV_GEMM_SMALL_AVX512; isa++) {
    const lv_gemm_small_isa x = (lv_gemm_small_isa)isa;
    ck_assert(!lv_cpu_gemm_small_with(x, NULL, false, false, 1, 2048, 512, 1.0f, NULL, 512, NULL, 2048, 0.0f, NULL, 2048));
    ck_assert(!lv_cpu_gemm_small_with(x, NULL, false, false, 41, 2048, 512, 1.0f, NULL, 512, NULL, 2048, 0.0f, NULL, 2048));
    ck_assert(!lv_cpu_gemm_small_with(x, NULL, false, true, 25, 512, 2048, 1.0f, NULL, 2048, NULL, 2048, 0.0f, NULL, 512));
    ck_assert(!lv_cpu_gemm_small_with(x, NULL, true, false, 8, 2048, 512, 1.0f, NULL, 8, NULL, 2048, 0.0f, NULL, 2048));
    ck_assert(!lv_cpu_gemm_small_with(x, NULL, false, false, 8, 64, 64, 1.0f, NULL, 64, NULL, 64, 0.0f, NULL, 64));
    ck_assert(!lv_cpu_gemm_small_with(x, NULL, false, false, 8, 2048, 512, 0.0f, NULL, 512, NULL, 2048, 1.0f, NULL, 2048));
  }
  ck_assert(!lv_cpu_gemm_small_with(LV_GEMM_SMALL_OFF, NULL, false, false, 8, 2048, 512, 1.0f, NULL, 512, NULL, 2048,
                                    0.0f, NULL, 2048));
}
END_TEST

START_TEST(dropout_mask_is_rng_uniform_at) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = lv_graph_tensor(g, LV_F32, lv_shape1(1003));
  for (int i = 0; i < 1003; i++) lv_f32(x)[i] = 2.0f;
  lv_tensor *y = lv_op_dropout(g, x, 0.6f, 77, 9);
  for (int i = 0; i < 1003; i++) {
    bool keep = lv_rng_uniform_at(77, 9, (uint64_t)i) < 0.6f;
    ck_assert_float_eq_tol(lv_f32(y)[i], keep ? 2.0f / 0.6f : 0.0f, 1e-5);
  }
  lv_graph_destroy(g);
}
END_TEST

/* A LeNet5 step at batch 128 (several conv chunks and groups): every variable gradient
 * must be bit-identical with 1 and 2 threads and across repeated runs, or a restarted
 * training run could not repeat an uninterrupted one. */
static void lenet_grads(int threads, float *out, int64_t *n_out) {
  lv_set_num_threads(threads);
  lv_varstore *vs = lv_varstore_create();
  lv_var *w0, *w1, *fw, *fb;
  lv_var_init xav = {LV_INIT_XAVIER, 1.000001}, zero = {LV_INIT_CONSTANT, 0.0};
  ck_assert_ptr_null(lv_varstore_add(vs, "c0", LV_F32, lv_shape4(5, 5, 1, 20), xav, true, &w0));
  ck_assert_ptr_null(lv_varstore_add(vs, "c1", LV_F32, lv_shape4(5, 5, 20, 50), xav, true, &w1));
  ck_assert_ptr_null(lv_varstore_add(vs, "fw", LV_F32, lv_shape2(2450, 10), xav, true, &fw));
  ck_assert_ptr_null(lv_varstore_add(vs, "fb", LV_F32, lv_shape1(10), zero, true, &fb));
  ck_assert_ptr_null(lv_varstore_finalize(vs, 3));
  lv_graph *g = lv_graph_create(0);
  const int B = 128;
  float *img = rand_floats(B * 784, 500, 0, 255);
  lv_tensor *x = tensor_of(g, lv_shape4(B, 28, 28, 1), img);
  lv_tensor *y = lv_graph_tensor(g, LV_I32, lv_shape1(B));
  for (int i = 0; i < B; i++) lv_i32(y)[i] = (i * 7) % 10;
  x = lv_op_per_image_standardization(g, x);
  lv_tensor *h = lv_op_relu(g, lv_op_conv2d(g, x, &w0->value, 1, 1, 1, 1, LV_PAD_SAME));
  h = lv_op_dropout(g, lv_op_max_pool2d(g, h, 2, 2, 2, 2, LV_PAD_SAME), 0.8f, 1, 2);
  h = lv_op_relu(g, lv_op_conv2d(g, h, &w1->value, 1, 1, 1, 1, LV_PAD_SAME));
  h = lv_op_reshape(g, lv_op_max_pool2d(g, h, 2, 2, 2, 2, LV_PAD_SAME), lv_shape2(B, -1));
  lv_tensor *logits = lv_op_add(g, lv_op_matmul(g, h, &fw->value, false, false), &fb->value);
  lv_tensor *loss = lv_op_reduce_mean(g, lv_op_sparse_softmax_xent(g, logits, y), LV_ALL_AXES, false);
  ck_assert_ptr_null(lv_graph_backward(g, loss));
  float *gr = lv_varstore_grads(vs, n_out);
  memcpy(out, gr, sizeof(float) * (size_t)*n_out);
  free(img);
  lv_graph_destroy(g);
  lv_varstore_destroy(vs);
  lv_set_num_threads(1);
}

START_TEST(training_step_deterministic_across_threads) {
  float *a = malloc(sizeof(float) * 60000), *b = malloc(sizeof(float) * 60000), *c = malloc(sizeof(float) * 60000);
  int64_t na, nb, nc;
  lenet_grads(1, a, &na);
  lenet_grads(2, b, &nb);
  lenet_grads(2, c, &nc);
  ck_assert_int_eq(na, nb);
  ck_assert_int_lt(na, 60000);
  double norm = 0;
  for (int64_t i = 0; i < na; i++) norm += (double)a[i] * a[i];
  ck_assert(norm > 0);
  for (int64_t i = 0; i < na; i++) {
    ck_assert_msg(memcmp(&a[i], &b[i], sizeof(float)) == 0, "1 vs 2 threads differ at %lld: %g vs %g", (long long)i, a[i], b[i]);
    ck_assert_msg(memcmp(&b[i], &c[i], sizeof(float)) == 0, "2-thread runs differ at %lld", (long long)i);
  }
  free(a);
  free(b);
  free(c);
}
END_TEST

/* ---- matmul_ones_col ----------------------------------------------------------- */

static lv_tensor *f_ones_col(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_matmul_ones_col(g, in[0], in[1]);
}

/* x [rows, k] . w + b through [x, 1] . [w; b], fused or as matmul(concat), then times a
 * function of x again (so that x's gradient accumulates). */
static lv_tensor *ones_col_net(lv_graph *g, lv_tensor *x, lv_tensor *w, lv_tensor *b, bool fused) {
  const int64_t k = w->shape.d[0], h = w->shape.d[1], rows = lv_tensor_numel(x) / k;
  lv_tensor *x2 = lv_op_reshape(g, x, lv_shape2(rows, k));
  lv_tensor *wb[2] = {w, lv_op_reshape(g, b, lv_shape2(1, h))};
  lv_tensor *wbc = lv_op_concat(g, wb, 2, 0), *y;
  if (fused) {
    y = lv_op_matmul_ones_col(g, x2, wbc);
  } else {
    lv_tensor *x1[2] = {x2, lv_graph_fill(g, lv_shape2(rows, 1), 1.0f)};
    y = lv_op_matmul(g, lv_op_concat(g, x1, 2, 1), wbc, false, false);
  }
  return lv_op_mul(g, y, lv_op_reduce_sum(g, lv_op_mul(g, x2, x2), 1, true));
}

/* The same bits as matmul(concat([x, 1]), wb), forward and backward, with memory given back
 * in backward or not; given back, the [x, 1] copy is not kept, so the step's peak is lower. */
START_TEST(matmul_ones_col_same_bits) {
  spec gc[2] = {fspec(lv_shape3(2, 3, 4), 31), fspec(lv_shape2(5, 2), 32)};
  gradcheck("matmul_ones_col", 2, gc, f_ones_col, NULL, EPS, TOL);
  const int64_t dims[2][3] = {{6, 4, 5}, {300, 64, 96}}; /* rows, k, h */
  for (int d = 0; d < 2; d++) {
    const int64_t rows = dims[d][0], k = dims[d][1], h = dims[d][2];
    const lv_shape sh[3] = {lv_shape2(rows, k), lv_shape2(k, h), lv_shape1(h)};
    float *ref[4] = {0}, *got[4];
    size_t peak[2] = {0};
    for (int v = 0; v < 4; v++) { /* v & 1: fused; v & 2: free_in_backward */
      lv_graph *g = lv_graph_create(0);
      lv_graph_set_free_in_backward(g, v & 2);
      lv_tensor *p[3];
      for (int i = 0; i < 3; i++) {
        p[i] = lv_graph_tensor(g, LV_F32, sh[i]);
        float *r = rand_floats(lv_shape_numel(&sh[i]), 40 + (uint64_t)i, -1, 1);
        memcpy(p[i]->data, r, lv_tensor_nbytes(p[i]));
        free(r);
        p[i]->requires_grad = true;
      }
      lv_tensor *y = ones_col_net(g, p[0], p[1], p[2], v & 1);
      ck_assert_ptr_nonnull(y);
      got[0] = malloc(lv_tensor_nbytes(y));
      memcpy(got[0], y->data, lv_tensor_nbytes(y));
      EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, y, LV_ALL_AXES, false)));
      for (int i = 0; i < 3; i++) {
        got[i + 1] = malloc(lv_tensor_nbytes(p[i]));
        memcpy(got[i + 1], p[i]->grad->data, lv_tensor_nbytes(p[i]));
      }
      for (int i = 0; i < 4; i++) {
        const size_t n = i ? lv_tensor_nbytes(p[i - 1]) : sizeof(float) * (size_t)(rows * h);
        if (!v) {
          ref[i] = got[i];
          continue;
        }
        ck_assert_msg(!memcmp(ref[i], got[i], n), "[%lld, %lld] . [%lld, %lld], variant %d: %s differs",
                      (long long)rows, (long long)k, (long long)k, (long long)h, v, i ? "a gradient" : "the output");
        free(got[i]);
      }
      lv_graph_mem_stats ms;
      lv_graph_mem_stats_get(g, false, &ms);
      if (v & 2) peak[v & 1] = ms.live_peak;
      lv_graph_destroy(g);
    }
    ck_assert_uint_lt(peak[1], peak[0]);
    for (int i = 0; i < 4; i++) free(ref[i]);
  }
  lv_graph *g = lv_graph_create(0);
  ck_assert_ptr_null(lv_op_matmul_ones_col(g, lv_graph_zeros(g, LV_F32, lv_shape2(3, 4)),
                                           lv_graph_zeros(g, LV_F32, lv_shape2(4, 2))));
  lv_status st = lv_graph_status(g);
  ck_assert_ptr_nonnull(st);
  ck_assert_str_eq(lv_status_msg(st), "matmul_ones_col: float32 x [..., K] (rank >= 2) and wb [K + 1, N] required, "
                                      "got x float32 [3,4] and wb float32 [4,2]");
  lv_status_free(st);
  lv_graph_destroy(g);
}
END_TEST

/* ---- graph behaviour ------------------------------------------------------------ */

/* A small network over every op backward_reads (graph.c) lists, inside a forward scope
 * that keeps only its output: in free mode the scope gives back what no backward reads,
 * backward gives back the rest as it goes, and every gradient keeps its bits. */
static lv_tensor *free_net(lv_graph *g, lv_tensor *const *p, lv_tensor *ids) {
  lv_graph_scope sc = lv_graph_scope_begin(g);
  lv_tensor *x = p[0], *w = p[1], *b = p[2], *sc_ln = p[3], *tab = p[4];
  lv_tensor *h = lv_op_addmm(g, lv_op_reshape(g, lv_op_add(g, x, x), lv_shape2(6, 4)), x, w); /* [6,4] */
  h = lv_op_matmul(g, lv_op_scale(g, h, 0.5f), w, false, true);
  h = lv_op_div(g, lv_op_mul(g, h, lv_op_add_scalar(g, h, 2.0f)), lv_op_add_scalar(g, lv_op_mul(g, h, h), 1.0f));
  int perm[2] = {1, 0};
  lv_tensor *t = lv_op_transpose(g, lv_op_sub(g, h, b), perm);                 /* [4,6] */
  lv_tensor *parts[2] = {lv_op_slice(g, t, 1, 0, 3), lv_op_slice(g, t, 1, 3, 3)};
  lv_tensor *c = lv_op_concat(g, parts, 2, 0);                                   /* [8,3] */
  c = lv_op_layer_norm(g, lv_op_dropout(g, c, 0.75f, 7, 1), sc_ln, NULL, 1e-6f);
  lv_tensor *s1 = lv_op_softmax(g, c), *s2 = lv_op_log_softmax(g, c);
  lv_tensor *r = lv_op_add(g, lv_op_reduce_mean(g, s1, 1, true), lv_op_reduce_max(g, s2, 1, true));
  r = lv_op_add(g, lv_op_reduce_sum(g, c, 1, true), r);                          /* [8,1] */
  lv_tensor *y = lv_op_mul(g, lv_op_gather(g, tab, ids), r);                    /* [8,3] */
  lv_graph_scope_end(g, &sc, &y, 1);
  return y;
}

START_TEST(graph_free_in_backward_same_bits) {
  float grads[2][5][32];
  size_t peak[2], fwd[2];
  lv_shape shapes[5] = {lv_shape2(6, 4), lv_shape2(4, 4), lv_shape1(4), lv_shape1(3), lv_shape2(5, 3)};
  int32_t ids[8] = {0, 4, 1, 1, 3, 2, 0, 4};
  lv_tensor *kept = NULL;
  for (int mode = 0; mode < 2; mode++) {
    lv_rng st;
    lv_rng_init(&st, 99, 0);
    lv_graph *g = lv_graph_create(0);
    lv_graph_set_free_in_backward(g, mode == 1);
    lv_tensor *p[5];
    for (int i = 0; i < 5; i++) {
      p[i] = lv_graph_tensor(g, LV_F32, shapes[i]);
      for (int64_t j = 0; j < lv_tensor_numel(p[i]); j++) lv_f32(p[i])[j] = (float)lv_rng_uniform(&st) - 0.5f;
      p[i]->requires_grad = true;
    }
    lv_tensor *idt = lv_graph_tensor(g, LV_I32, lv_shape1(8));
    memcpy(idt->data, ids, sizeof ids);
    lv_tensor *y = free_net(g, p, idt);
    ck_assert_ptr_nonnull(y);
    /* The classes of the xent: the gather's ids, mod 3. */
    lv_tensor *cls = lv_graph_tensor(g, LV_I32, lv_shape1(8));
    for (int i = 0; i < 8; i++) lv_i32(cls)[i] = ids[i] % 3;
    lv_tensor *loss = lv_op_sparse_softmax_xent(g, y, cls);
    loss = lv_op_reduce_sum(g, loss, LV_ALL_AXES, false);
    EXPECT_OK(lv_graph_backward(g, loss));
    for (int i = 0; i < 5; i++) memcpy(grads[mode][i], p[i]->grad->data, lv_tensor_nbytes(p[i]));
    lv_graph_mem_stats ms;
    lv_graph_mem_stats_get(g, false, &ms);
    peak[mode] = ms.arena_peak;
    fwd[mode] = ms.released_forward;
    size_t sum = 0;
    for (int k = 0; k < LV_GRAPH_MEM_COUNT; k++) sum += ms.at_peak[k];
    ck_assert_uint_eq(sum, ms.live_peak);
    ck_assert_uint_le(ms.live_peak, ms.arena_peak);
    if (mode == 1) {
      ck_assert_uint_gt(ms.released, ms.released_forward);
      ck_assert_uint_gt(ms.reused, 0);
      /* A tensor given back at a scope's end is an error for any op that reads it. */
      lv_graph_reset(g);
      for (int i = 0; i < 5; i++) {
        p[i] = lv_graph_fill(g, shapes[i], 0.5f);
        p[i]->requires_grad = true;
      }
      lv_graph_scope sc = lv_graph_scope_begin(g);
      lv_tensor *a = lv_op_add(g, p[0], p[0]);
      kept = lv_op_scale(g, a, 2.0f);
      lv_graph_scope_end(g, &sc, &kept, 1);
      ck_assert_ptr_null(a->data);
      ck_assert_ptr_nonnull(kept->data);
      ck_assert_ptr_null(lv_op_add(g, a, p[0]));
      lv_status s = lv_graph_status(g);
      ck_assert_ptr_nonnull(s);
      ck_assert_msg(strstr(lv_status_msg(s), "given back at the end of a forward scope"), "%s", lv_status_msg(s));
      lv_status_free(s);
    }
    lv_graph_destroy(g);
  }
  for (int i = 0; i < 5; i++)
    ck_assert_msg(!memcmp(grads[0][i], grads[1][i], sizeof(float) * (size_t)lv_shape_numel(&shapes[i])),
                  "gradient %d differs with free_in_backward", i);
  ck_assert_uint_eq(fwd[0], 0);
  ck_assert_uint_gt(fwd[1], 0);
  ck_assert_uint_lt(peak[1], peak[0]);
}
END_TEST

/* A residual block for lv_graph_remat: x + dropout(relu(LN(x) . w1)) . w2 + a scaled
 * add; reads x (in[0]) and the variables in ctx. bad: also reads ctx's other tensor,
 * which is not among the inputs. */
typedef struct remat_ctx {
  lv_tensor *w1, *w2, *s, *b, *other;
  bool bad;
} remat_ctx;
static lv_tensor *remat_block(lv_graph *g, const void *c, lv_tensor *const *in) {
  const remat_ctx *r = c;
  lv_graph_scope sc = lv_graph_scope_begin(g);
  lv_tensor *h = lv_op_layer_norm(g, in[0], r->s, r->b, 1e-6f);
  h = lv_op_relu(g, lv_op_matmul(g, h, r->w1, false, false));
  h = lv_op_dropout(g, h, 0.75f, 7, lv_graph_next_stream(g));
  h = lv_op_matmul(g, h, r->w2, false, false);
  if (r->bad) h = lv_op_add(g, h, r->other);
  lv_tensor *y = lv_op_add(g, in[0], lv_op_scale(g, h, 0.5f));
  lv_graph_scope_end(g, &sc, &y, 1);
  return y;
}

START_TEST(graph_remat_same_bits) {
  enum { N = 24, D = 8, H = 32, L = 4, NP = 5 };
  lv_shape shapes[NP] = {lv_shape2(N, D), lv_shape2(D, H), lv_shape2(H, D), lv_shape1(D), lv_shape1(D)};
  static float grads[2][NP][N * H];
  float loss_v[2];
  size_t live[2], acts[2];
  for (int mode = 0; mode < 2; mode++) {
    lv_rng st;
    lv_rng_init(&st, 5, 0);
    lv_graph *g = lv_graph_create(0);
    lv_graph_set_free_in_backward(g, true);
    lv_graph_set_step(g, 3);
    lv_tensor *p[NP];
    for (int i = 0; i < NP; i++) {
      p[i] = lv_graph_tensor(g, LV_F32, shapes[i]);
      for (int64_t j = 0; j < lv_tensor_numel(p[i]); j++) lv_f32(p[i])[j] = (float)lv_rng_uniform(&st) - 0.5f;
      p[i]->requires_grad = true;
    }
    remat_ctx rc = {p[1], p[2], p[3], p[4], NULL, false};
    /* x0 is not a leaf of the tape: the first block reads a tape tensor through in[0]. */
    lv_tensor *x = lv_op_scale(g, p[0], 1.5f);
    for (int l = 0; l < L; l++)
      x = mode ? lv_graph_remat(g, remat_block, &rc, sizeof rc, 1, &x) : remat_block(g, &rc, &x);
    /* A dropout after the blocks draws the same stream in both modes. */
    x = lv_op_dropout(g, x, 0.5f, 9, lv_graph_next_stream(g));
    lv_tensor *cls = lv_graph_tensor(g, LV_I32, lv_shape1(N));
    for (int i = 0; i < N; i++) lv_i32(cls)[i] = (i * 5) % D;
    lv_tensor *loss = lv_op_reduce_sum(g, lv_op_sparse_softmax_xent(g, x, cls), LV_ALL_AXES, false);
    ck_assert_ptr_nonnull(loss);
    loss_v[mode] = lv_f32(loss)[0];
    EXPECT_OK(lv_graph_backward(g, loss));
    for (int i = 0; i < NP; i++) memcpy(grads[mode][i], p[i]->grad->data, lv_tensor_nbytes(p[i]));
    lv_graph_mem_stats ms;
    lv_graph_mem_stats_get(g, false, &ms);
    live[mode] = ms.live_peak;
    acts[mode] = ms.at_peak[LV_GRAPH_MEM_ACTIVATIONS] + ms.at_peak[LV_GRAPH_MEM_FWD_SCRATCH];
    if (mode == 1) {
      /* A tensor the function reads but was not given is an error naming the rule. */
      lv_graph_reset(g);
      for (int i = 0; i < NP; i++) {
        p[i] = lv_graph_fill(g, shapes[i], 0.25f);
        p[i]->requires_grad = true;
      }
      lv_tensor *a = lv_op_scale(g, p[0], 1.0f);
      lv_tensor *other = lv_op_scale(g, p[0], 2.0f);
      remat_ctx bad = {p[1], p[2], p[3], p[4], other, true};
      ck_assert_ptr_null(lv_graph_remat(g, remat_block, &bad, sizeof bad, 1, &a));
      lv_status s = lv_graph_status(g);
      ck_assert_ptr_nonnull(s);
      ck_assert_msg(strstr(lv_status_msg(s), "not among the remat function's inputs"), "%s", lv_status_msg(s));
      lv_status_free(s);
      /* In eval it is the function itself. */
      lv_graph_reset(g);
      lv_graph_set_training(g, false);
      for (int i = 0; i < NP; i++) p[i] = lv_graph_fill(g, shapes[i], 0.25f);
      rc = (remat_ctx){p[1], p[2], p[3], p[4], NULL, false};
      ck_assert_ptr_nonnull(lv_graph_remat(g, remat_block, &rc, sizeof rc, 1, &p[0]));
      EXPECT_OK(lv_graph_status(g));
    }
    lv_graph_destroy(g);
  }
  ck_assert_msg(!memcmp(&loss_v[0], &loss_v[1], sizeof(float)), "loss %.9g vs %.9g", (double)loss_v[0],
                (double)loss_v[1]);
  for (int i = 0; i < NP; i++)
    ck_assert_msg(!memcmp(grads[0][i], grads[1][i], sizeof(float) * (size_t)lv_shape_numel(&shapes[i])),
                  "gradient %d differs with remat", i);
  /* The blocks' hidden activations ([N, H] x 3 per block) are not kept: the peak holds
   * far less than without. */
  ck_assert_msg(acts[1] * 2 < acts[0], "activations at the peak: %zu with remat, %zu without", acts[1], acts[0]);
  ck_assert_uint_lt(live[1], live[0]);
}
END_TEST

/* lv_graph_gather_into: rows of a table straight into a tensor outside the step; a bad id
 * or a dst too small is an error naming it. */
START_TEST(graph_gather_into) {
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *table = lv_graph_tensor(g, LV_F32, lv_shape2(4, 3));
  for (int i = 0; i < 12; i++) lv_f32(table)[i] = (float)i;
  lv_tensor *ids = lv_graph_tensor(g, LV_I32, lv_shape1(3));
  const int32_t iv[3] = {2, 0, 2};
  memcpy(ids->data, iv, sizeof iv);
  lv_tensor *dst = lv_tensor_new(LV_F32, lv_shape3(2, 3, 3));
  ck_assert(lv_graph_gather_into(g, dst, table, ids));
  for (int r = 0; r < 3; r++)
    for (int j = 0; j < 3; j++) ck_assert_float_eq(lv_f32(dst)[r * 3 + j], (float)(iv[r] * 3 + j));
  lv_tensor *small = lv_tensor_new(LV_F32, lv_shape1(8));
  ck_assert(!lv_graph_gather_into(g, small, table, ids));
  lv_status s = lv_graph_status(g);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "gather_into"), "%s", lv_status_msg(s));
  lv_status_free(s);
  lv_graph_reset(g);
  table = lv_graph_fill(g, lv_shape2(4, 3), 1.0f);
  ids = lv_graph_tensor(g, LV_I32, lv_shape1(1));
  lv_i32(ids)[0] = 4;
  ck_assert(!lv_graph_gather_into(g, dst, table, ids));
  s = lv_graph_status(g);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "id 4 at position 0 is outside [0, 4)"), "%s", lv_status_msg(s));
  lv_status_free(s);
  lv_tensor_free(dst);
  lv_tensor_free(small);
  lv_graph_destroy(g);
}
END_TEST

START_TEST(graph_sticky_errors) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *a = lv_graph_zeros(g, LV_F32, lv_shape2(256, 2450));
  lv_tensor *b = lv_graph_zeros(g, LV_F32, lv_shape2(300, 10));
  ck_assert_ptr_null(lv_op_matmul(g, a, b, false, false));
  lv_status st = lv_graph_status(g);
  ck_assert_str_eq(lv_status_msg(st), "matmul: inner dimensions differ: a [256,2450] vs b [300,10]");
  lv_status_free(st);
  /* Later ops return NULL; the first message stays. */
  ck_assert_ptr_null(lv_op_relu(g, a));
  ck_assert_ptr_null(lv_op_add(g, NULL, a));
  st = lv_graph_status(g);
  ck_assert_ptr_nonnull(strstr(lv_status_msg(st), "inner dimensions"));
  lv_status_free(st);
  lv_graph_reset(g);
  ck_assert_ptr_null(lv_graph_status(g));
  ck_assert_ptr_null(lv_op_relu(g, NULL));
  st = lv_graph_status(g);
  ck_assert_str_eq(lv_status_msg(st), "activation: input 0 is NULL");
  lv_status_free(st);
  lv_graph_reset(g);
  lv_tensor *x = lv_graph_zeros(g, LV_F32, lv_shape2(2, 3)), *y = lv_graph_zeros(g, LV_F32, lv_shape2(4, 3));
  ck_assert_ptr_null(lv_op_add(g, x, y));
  st = lv_graph_status(g);
  ck_assert_str_eq(lv_status_msg(st), "add: shapes do not broadcast: a [2,3] vs b [4,3]");
  lv_status_free(st);
  lv_graph_reset(g);
  lv_graph_fail(g, "layer %s: bad", "fc");
  ck_assert_ptr_null(lv_op_relu(g, lv_graph_zeros(g, LV_F32, lv_shape1(1))));
  st = lv_graph_status(g);
  ck_assert_str_eq(lv_status_msg(st), "layer fc: bad");
  lv_status_free(st);
  lv_graph_destroy(g);
}
END_TEST

START_TEST(graph_arena_exhaustion_and_reuse) {
  lv_graph *g = lv_graph_create(1 << 20);
  lv_tensor *big = lv_graph_tensor(g, LV_F32, lv_shape2(1024, 1024));
  ck_assert_ptr_null(big);
  lv_status st = lv_graph_status(g);
  ck_assert_int_eq(lv_status_code(st), LV_ERR_RESOURCE);
  ck_assert_msg(strstr(lv_status_msg(st), "arena exhausted: need 4194304 bytes") != NULL, "%s",
                lv_status_msg(st));
  lv_status_free(st);
  lv_graph_reset(g);
  size_t peak = 0;
  for (int step = 0; step < 5; step++) {
    lv_tensor *x = lv_graph_zeros(g, LV_F32, lv_shape2(64, 64));
    lv_tensor *y = lv_op_relu(g, lv_op_add_scalar(g, x, 1.0f));
    ck_assert_ptr_nonnull(y);
    ck_assert_float_eq(lv_f32(y)[100], 1.0f);
    if (step == 0) peak = lv_graph_arena_peak(g);
    ck_assert_uint_eq(lv_graph_arena_peak(g), peak);
    lv_graph_reset(g);
  }
  lv_graph_destroy(g);
}
END_TEST

START_TEST(graph_backward_rules) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = lv_graph_zeros(g, LV_F32, lv_shape2(2, 2));
  x->requires_grad = true;
  lv_tensor *y = lv_op_scale(g, x, 2.0f);
  lv_status st = lv_graph_backward(g, y);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(lv_status_msg(st), "scalar") != NULL, "%s", lv_status_msg(st));
  lv_status_free(st);
  /* x used three times: grads accumulate (2 + 3 + 1). */
  lv_tensor *s = lv_op_reduce_sum(g, lv_op_add(g, lv_op_add(g, y, lv_op_scale(g, x, 3.0f)), x), LV_ALL_AXES, false);
  ck_assert_ptr_null(lv_graph_backward(g, s));
  for (int i = 0; i < 4; i++) ck_assert_float_eq(lv_f32(x->grad)[i], 6.0f);
  st = lv_graph_backward(g, s);
  ck_assert_ptr_nonnull(st);
  lv_status_free(st);
  lv_graph_reset(g);
  /* Eval mode records nothing. */
  lv_graph_set_training(g, false);
  lv_tensor *z = lv_graph_zeros(g, LV_F32, lv_shape1(3));
  z->requires_grad = true;
  lv_tensor *r = lv_op_reduce_sum(g, z, 0, false);
  ck_assert_int_eq(r->node, -1);
  st = lv_graph_backward(g, r);
  ck_assert_ptr_nonnull(st);
  lv_status_free(st);
  lv_graph_destroy(g);
}
END_TEST

START_TEST(graph_device_dispatch) {
  const lv_device cuda = lv_device_make(LV_DEVICE_CUDA, 0);
  const lv_backend *cpu = lv_backend_get(lv_device_host());
  ck_assert_ptr_nonnull(cpu);
  ck_assert_str_eq(cpu->name, "cpu:0");
  ck_assert(lv_device_is_host(cpu->device));
  float *p = cpu->alloc(cpu->ctx, 100);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq((uintptr_t)p % 64, 0);
  cpu->free(cpu->ctx, p);
  ck_assert_ptr_null(lv_backend_get(cuda));
  ck_assert_ptr_null(lv_graph_create_on(cuda, 0));
  char buf[32];
  ck_assert_str_eq(lv_device_str(cuda, buf, sizeof buf), "cuda:0");
  lv_device d;
  ck_assert(lv_device_parse("cuda:1", &d) && d.kind == LV_DEVICE_CUDA && d.ordinal == 1);
  ck_assert(lv_device_parse("cpu", &d) && lv_device_is_host(d));
  ck_assert(!lv_device_parse("tpu:0", &d) && !lv_device_parse("cpu:x", &d) && !lv_device_parse("cpu:99", &d));
  lv_graph *g = lv_graph_create(0);
  lv_tensor *a = lv_graph_zeros(g, LV_F32, lv_shape1(4)), *b = lv_graph_zeros(g, LV_F32, lv_shape1(4));
  b->device = cuda;
  ck_assert_ptr_null(lv_op_add(g, a, b));
  lv_status st = lv_graph_status(g);
  ck_assert_str_eq(lv_status_msg(st), "add: inputs on different devices: input 0 on cpu:0, input 1 on cuda:0");
  lv_status_free(st);
  lv_graph_reset(g);
  a = lv_graph_zeros(g, LV_F32, lv_shape1(4));
  a->device = cuda;
  ck_assert_ptr_null(lv_op_relu(g, a));
  st = lv_graph_status(g);
  ck_assert_str_eq(lv_status_msg(st), "activation: no kernels for device cuda:0 in this build");
  lv_status_free(st);
  lv_graph_destroy(g);
}
END_TEST

/* ---- variables ------------------------------------------------------------------ */

static lv_varstore *lenet_store(uint64_t seed) {
  lv_varstore *vs = lv_varstore_create();
  lv_var_init xav = {LV_INIT_XAVIER, 1.000001};
  lv_var_init zero = {LV_INIT_CONSTANT, 0.0};
  ck_assert_ptr_null(lv_varstore_add(vs, "lenet5/conv0/w/var", LV_F32, lv_shape4(5, 5, 1, 20), xav, true, NULL));
  ck_assert_ptr_null(lv_varstore_add(vs, "lenet5/conv1/w/var", LV_F32, lv_shape4(5, 5, 20, 50), xav, true, NULL));
  ck_assert_ptr_null(lv_varstore_add(vs, "lenet5/fc/w/var", LV_F32, lv_shape2(2450, 300), xav, true, NULL));
  ck_assert_ptr_null(lv_varstore_add(vs, "lenet5/fc/b/var", LV_F32, lv_shape1(300), zero, true, NULL));
  ck_assert_ptr_null(lv_varstore_add(vs, "global_step", LV_I64, lv_shape0(), zero, false, NULL));
  ck_assert_ptr_null(lv_varstore_finalize(vs, seed));
  return vs;
}

START_TEST(var_store) {
  lv_varstore *a = lenet_store(1), *b = lenet_store(1), *c = lenet_store(2);
  ck_assert_int_eq(lv_varstore_count(a), 5);
  lv_var *w0 = lv_varstore_find(a, "lenet5/conv0/w/var");
  lv_var *w1 = lv_varstore_find(a, "lenet5/conv1/w/var");
  ck_assert(w0->value.requires_grad && w0->value.grad == &w0->grad && w0->trainable);
  /* Xavier bounds: conv0 fan_in 25, fan_out 500; conv1 500, 1250; fc 2450, 300. */
  struct { const char *n; double lim; } lims[] = {
      {"lenet5/conv0/w/var", 1.000001 * sqrt(6.0 / 525)},
      {"lenet5/conv1/w/var", 1.000001 * sqrt(6.0 / 1750)},
      {"lenet5/fc/w/var", 1.000001 * sqrt(6.0 / 2750)}};
  for (int k = 0; k < 3; k++) {
    lv_var *v = lv_varstore_find(a, lims[k].n);
    double mx = 0;
    for (int64_t i = 0; i < lv_tensor_numel(&v->value); i++) {
      double av = fabs(lv_f32(&v->value)[i]);
      ck_assert(av <= lims[k].lim);
      mx = fmax(mx, av);
    }
    ck_assert(mx > 0.9 * lims[k].lim); /* fills the range */
  }
  /* Same seed, same values; other seed or other name, other values. */
  lv_var *w0b = lv_varstore_find(b, "lenet5/conv0/w/var"), *w0c = lv_varstore_find(c, "lenet5/conv0/w/var");
  ck_assert(memcmp(w0->value.data, w0b->value.data, 500 * sizeof(float)) == 0);
  ck_assert(memcmp(w0->value.data, w0c->value.data, 500 * sizeof(float)) != 0);
  ck_assert(lv_f32(&w0->value)[0] != lv_f32(&w1->value)[0]);
  /* Adding a variable in front does not change the others. */
  lv_varstore *d = lv_varstore_create();
  lv_var_init xav = {LV_INIT_XAVIER, 1.000001};
  ck_assert_ptr_null(lv_varstore_add(d, "extra", LV_F32, lv_shape2(3, 3), xav, true, NULL));
  lv_var *w0d;
  ck_assert_ptr_null(lv_varstore_add(d, "lenet5/conv0/w/var", LV_F32, lv_shape4(5, 5, 1, 20), xav, true, &w0d));
  lv_status st = lv_varstore_add(d, "extra", LV_F32, lv_shape1(1), xav, true, NULL);
  ck_assert_int_eq(lv_status_code(st), LV_ERR_INTERNAL);
  lv_status_free(st);
  ck_assert_ptr_null(lv_varstore_finalize(d, 1));
  ck_assert(memcmp(w0->value.data, w0d->value.data, 500 * sizeof(float)) == 0);
  /* Contiguous grads; fc bias constant 0; global_step int64 0. */
  int64_t n;
  float *gr = lv_varstore_grads(a, &n);
  ck_assert_int_ge(n, 500 + 25000 + 735000 + 300);
  ck_assert_ptr_eq(w0->grad.data, gr);
  lv_var *gs = lv_varstore_find(a, "global_step");
  ck_assert(!gs->trainable && gs->value.dtype == LV_I64 && lv_i64(&gs->value)[0] == 0);
  ck_assert_float_eq(lv_f32(&lv_varstore_find(a, "lenet5/fc/b/var")->value)[7], 0.0f);
  lv_init_method m;
  ck_assert(lv_init_method_from_name("GaussianSqrtDim", &m) && m == LV_INIT_GAUSSIAN_SQRT_DIM);
  ck_assert(lv_init_method_from_name("xavier", &m) && m == LV_INIT_XAVIER);
  ck_assert(!lv_init_method_from_name("kaiming", &m));
  lv_varstore_destroy(a);
  lv_varstore_destroy(b);
  lv_varstore_destroy(c);
  lv_varstore_destroy(d);
}
END_TEST

/* A model's sessions share one copy of its weights: b reads a's memory (its own freed),
 * destroying b leaves a's intact; stores of other declarations refuse. */
START_TEST(var_store_share) {
  lv_varstore *a = lenet_store(1), *b = lenet_store(2), *d = lv_varstore_create();
  lv_var_init xav = {LV_INIT_XAVIER, 1.0};
  ck_assert_ptr_null(lv_varstore_add(d, "lenet5/conv0/w/var", LV_F32, lv_shape4(5, 5, 1, 20), xav, true, NULL));
  ck_assert_ptr_null(lv_varstore_finalize(d, 1));
  lv_var *da = lv_varstore_find(d, "lenet5/conv0/w/var");
  void *d_own = da->value.data;
  ck_assert(!lv_varstore_share_values(d, a)); /* other variables */
  ck_assert_ptr_eq(da->value.data, d_own);
  ck_assert(!lv_varstore_share_values(a, a));
  ck_assert(lv_varstore_share_values(b, a));
  ck_assert(!lv_varstore_share_values(b, a)); /* already sharing */
  for (int i = 0; i < lv_varstore_count(a); i++) {
    ck_assert_ptr_eq(lv_varstore_get(b, i)->value.data, lv_varstore_get(a, i)->value.data);
    ck_assert_str_eq(lv_varstore_get(b, i)->name, lv_varstore_get(a, i)->name);
  }
  int64_t na, nb;
  ck_assert_ptr_eq(lv_varstore_values(b, &nb), lv_varstore_values(a, &na));
  ck_assert_int_eq(na, nb);
  lv_f32(&lv_varstore_find(a, "lenet5/fc/b/var")->value)[3] = 0.25f;
  ck_assert_float_eq(lv_f32(&lv_varstore_find(b, "lenet5/fc/b/var")->value)[3], 0.25f);
  lv_varstore_destroy(b); /* frees nothing of a's (ASan would tell) */
  ck_assert_float_eq(lv_f32(&lv_varstore_find(a, "lenet5/fc/b/var")->value)[3], 0.25f);
  lv_varstore_destroy(a);
  lv_varstore_destroy(d);
}
END_TEST

/* An evaluation store has no gradient buffer; its values are those of a training store. */
START_TEST(var_store_no_grads) {
  lv_varstore *a = lenet_store(1), *b = lv_varstore_create();
  lv_var_init xav = {LV_INIT_XAVIER, 1.000001};
  lv_var *w = NULL;
  ck_assert_ptr_null(lv_varstore_add(b, "lenet5/conv0/w/var", LV_F32, lv_shape4(5, 5, 1, 20), xav, true, &w));
  lv_varstore_set_no_grads(b);
  ck_assert_ptr_null(lv_varstore_finalize(b, 1));
  int64_t n;
  ck_assert_ptr_null(lv_varstore_grads(b, &n));
  ck_assert_ptr_null(w->grad.data);
  lv_varstore_zero_grads(b); /* nothing to zero */
  ck_assert(memcmp(w->value.data, lv_varstore_find(a, "lenet5/conv0/w/var")->value.data, 500 * sizeof(float)) == 0);
  lv_varstore_destroy(a);
  lv_varstore_destroy(b);
}
END_TEST

START_TEST(var_grads_flow_into_store) {
  lv_varstore *vs = lv_varstore_create();
  lv_var *w;
  lv_var_init xav = {LV_INIT_XAVIER, 1.0};
  ck_assert_ptr_null(lv_varstore_add(vs, "w", LV_F32, lv_shape2(3, 2), xav, true, &w));
  ck_assert_ptr_null(lv_varstore_finalize(vs, 9));
  lv_graph *g = lv_graph_create(0);
  for (int step = 0; step < 2; step++) {
    lv_varstore_zero_grads(vs);
    lv_tensor *x = lv_graph_tensor(g, LV_F32, lv_shape2(4, 3));
    for (int i = 0; i < 12; i++) lv_f32(x)[i] = (float)i;
    lv_tensor *loss = lv_op_reduce_sum(g, lv_op_matmul(g, x, &w->value, false, false), LV_ALL_AXES, false);
    ck_assert_ptr_null(lv_graph_backward(g, loss));
    /* d/dw sum(x w) = column sums of x, for every output column */
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 2; j++) ck_assert_float_eq_tol(lv_f32(&w->grad)[i * 2 + j], 18.0f + 4.0f * i, 1e-5);
    ck_assert_ptr_eq(w->value.grad, &w->grad);
    lv_graph_reset(g);
  }
  lv_graph_destroy(g);
  lv_varstore_destroy(vs);
}
END_TEST

int main(void) {
  Suite *s = suite_create("core");
  TCase *gc = tcase_create("gradients");
  tcase_set_timeout(gc, 120);
  tcase_add_test(gc, grad_matmul);
  tcase_add_test(gc, matmul_ones_col_same_bits);
  tcase_add_test(gc, grad_binary_broadcast);
  tcase_add_test(gc, binary_column_broadcast_exact);
  tcase_add_test(gc, binary_middle_broadcast_exact);
  tcase_add_test(gc, grad_remat);
  tcase_add_test(gc, grad_scale);
  tcase_add_test(gc, grad_activations);
  tcase_add_test(gc, grad_conv2d);
  tcase_add_test(gc, grad_pool);
  tcase_add_test(gc, grad_shape_ops);
  tcase_add_test(gc, grad_reduce);
  tcase_add_test(gc, grad_softmax_xent);
  tcase_add_test(gc, grad_dropout_layer_norm_gather);
  tcase_add_test(gc, fwd_moving_average_and_fill);
  tcase_add_test(gc, grad_lenet_small);
  tcase_add_test(gc, grad_batch_norm);
  suite_add_tcase(s, gc);
  TCase *fw = tcase_create("forward");
  tcase_add_test(fw, fwd_conv_pool_shapes);
  tcase_add_test(fw, fwd_conv_values);
  tcase_add_test(fw, fwd_per_image_std_in_top_k_argmax);
  tcase_add_test(fw, fwd_softmax_stable_and_xent);
  tcase_add_test(fw, fwd_log_softmax_sum_is_softmax_sum);
  tcase_add_test(fw, fwd_cpu_exp_le0_accuracy);
  tcase_add_test(fw, fwd_cpu_tanh_sigmoid_accuracy);
  tcase_add_test(fw, lstm_step_simd_rows_match_plain);
  tcase_add_test(fw, fwd_dropout_deterministic);
  tcase_add_test(fw, dropout_mask_is_rng_uniform_at);
  tcase_add_test(fw, conv_chunked_matches_reference);
  tcase_add_test(fw, conv_padded_runs_match_reference);
  tcase_add_test(fw, conv_direct_matches_reference);
  tcase_add_test(fw, max_pool_matches_reference_with_ties);
  tcase_add_test(fw, matmul_threaded_matches_reference);
  tcase_add_test(fw, gemm_small_matches_reference);
  tcase_add_test(fw, training_step_deterministic_across_threads);
  tcase_add_test(fw, batch_norm_matches_reference_and_threads);
  tcase_add_test(fw, batch_norm_eval_all_padded_and_errors);
  suite_add_tcase(s, fw);
  TCase *gr = tcase_create("graph");
  tcase_add_test(gr, graph_sticky_errors);
  tcase_add_test(gr, graph_arena_exhaustion_and_reuse);
  tcase_add_test(gr, graph_backward_rules);
  tcase_add_test(gr, graph_device_dispatch);
  tcase_add_test(gr, graph_free_in_backward_same_bits);
  tcase_add_test(gr, graph_remat_same_bits);
  tcase_add_test(gr, graph_gather_into);
  suite_add_tcase(s, gr);
  TCase *vt = tcase_create("variables");
  tcase_add_test(vt, var_store);
  tcase_add_test(vt, var_store_share);
  tcase_add_test(vt, var_store_no_grads);
  tcase_add_test(vt, var_grads_flow_into_store);
  suite_add_tcase(s, vt);
  return lv_test_run(s);
}
