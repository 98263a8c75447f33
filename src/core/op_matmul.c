/* matmul (one GEMM) and batch_matmul (one strided batched GEMM over the leading dims),
 * forward and backward. */
#include "core/graph_impl.h"
#include "core/ops.h"
#include "kernels/qweight.h"

/* Whether a [M, K] x b [K, N] runs on b's quantized twin: a forward-only graph on the
 * host, b not transposed, a matmul twin of b's shape. Otherwise b must have floats (a
 * float-less b gets them: lv_graph_floats). */
static bool use_twin(lv_graph *g, lv_op op, const lv_backend *k, lv_tensor *b, bool ta, bool tb, int64_t kk,
                     int64_t n) {
  if (b->qw && b->qw->axis == 1 && !ta && !tb && !lv_graph_is_training(g) && lv_device_is_host(k->device) &&
      b->qw->k == kk && b->qw->n == n && lv_qweights_enabled())
    return true;
  lv_graph_floats(g, op, b);
  return false;
}

static void twin_matmul(const lv_backend *k, int64_t m, const lv_tensor *a, const lv_tensor *b, const lv_tensor *bias,
                        bool accumulate, lv_tensor *out) {
  lv_qtype_traits_of(b->qw->type)->matmul(k->ctx, m, lv_f32(a), b->qw->k, b->qw, bias ? lv_f32(bias) : NULL, accumulate,
                                          lv_f32(out), b->qw->n);
}

/* C = A' B' with A' = op(A), B' = op(B):
 *   dA = ta ? B' dC^T : dC B'^T      dB = tb ? dC^T A' : A'^T dC */
static void mm_grads(const lv_backend *k, bool ta, bool tb, int64_t m, int64_t n, int64_t kk,
                     const float *a, const float *b, const float *gc, float *ga, bool ga_acc,
                     float *gb, bool gb_acc) {
  int64_t lda = ta ? m : kk, ldb = tb ? kk : n;
  if (ga) {
    if (!ta)
      LV_K(k, gemm, false, !tb, m, kk, n, 1.0f, gc, n, b, ldb, ga_acc ? 1.0f : 0.0f, ga, kk);
    else
      LV_K(k, gemm, tb, true, kk, m, n, 1.0f, b, ldb, gc, n, ga_acc ? 1.0f : 0.0f, ga, m);
  }
  if (gb) {
    if (!tb)
      LV_K(k, gemm, !ta, false, kk, n, m, 1.0f, a, lda, gc, n, gb_acc ? 1.0f : 0.0f, gb, n);
    else
      LV_K(k, gemm, true, ta, n, kk, m, 1.0f, gc, n, a, lda, gb_acc ? 1.0f : 0.0f, gb, kk);
  }
}

static void matmul_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *a = nd->in[0], *b = nd->in[1];
  bool aa = false, ba = false;
  lv_tensor *ga = lv_graph_grad(g, a, &aa);
  lv_tensor *gb = lv_graph_grad(g, b, &ba);
  if (lv_graph_failed(g)) return;
  const lv_saved_matmul *sv = &nd->s.mm;
  int64_t batch = sv->batch, m = sv->m, n = sv->n, kk = sv->k;
  bool ta = sv->ta, tb = sv->tb;
  for (int64_t i = 0; i < batch; i++)
    mm_grads(nd->be, ta, tb, m, n, kk, lv_f32(a) + i * m * kk, lv_f32(b) + i * kk * n,
             lv_f32(nd->out->grad) + i * m * n, ga ? lv_f32(ga) + i * m * kk : NULL, aa,
             gb ? lv_f32(gb) + i * kk * n : NULL, ba);
}

static lv_tensor *matmul_common(lv_graph *g, lv_op op, lv_tensor *a, lv_tensor *b, bool ta,
                                bool tb) {
  lv_tensor *ins[2] = {a, b};
  if (!lv_graph_inputs_ok_q(g, op, 2, ins, 1)) return NULL;
  char s1[128], s2[128];
  if (a->dtype != LV_F32 || b->dtype != LV_F32) {
    lv_graph_failf(g, op, "float32 inputs required, got %s and %s", lv_dtype_names[a->dtype],
                   lv_dtype_names[b->dtype]);
    return NULL;
  }
  int64_t batch = 1, m, kk, kb, n;
  lv_shape os;
  if (a->shape.rank < 2 || b->shape.rank != 2 || (ta && a->shape.rank != 2)) {
    lv_graph_failf(g, op, "a must be rank >= 2 (rank 2 if transposed) and b rank 2: a %s vs b %s",
                   LV_SHP(a, s1), LV_SHP(b, s2));
    return NULL;
  }
  int r = a->shape.rank;
  kk = ta ? a->shape.d[0] : a->shape.d[r - 1];
  m = 1;
  if (ta)
    m = a->shape.d[1];
  else
    for (int i = 0; i < r - 1; i++) m *= a->shape.d[i];
  kb = tb ? b->shape.d[1] : b->shape.d[0];
  n = tb ? b->shape.d[0] : b->shape.d[1];
  os = a->shape;
  if (ta) os.d[0] = m;
  os.d[r - 1] = n;
  if (kk != kb) {
    lv_graph_failf(g, op, "inner dimensions differ: a %s vs b %s%s%s", LV_SHP(a, s1), LV_SHP(b, s2),
                   ta ? " (a transposed)" : "", tb ? " (b transposed)" : "");
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, os);
  if (!out) return NULL;
  if (use_twin(g, op, k, b, ta, tb, kk, n)) {
    twin_matmul(k, m, a, b, NULL, false, out);
    return out;
  }
  if (lv_graph_failed(g)) return NULL;
  for (int64_t i = 0; i < batch; i++)
    LV_K(k, gemm, ta, tb, m, n, kk, 1.0f, lv_f32(a) + i * m * kk, ta ? m : kk, lv_f32(b) + i * kk * n,
            tb ? kk : n, 0.0f, lv_f32(out) + i * m * n, n);
  lv_node *nd = lv_graph_record(g, op, matmul_bwd, out, 2, ins);
  if (nd) {
    nd->be = k;
    nd->s.mm = (lv_saved_matmul){m, n, kk, batch, ta, tb};
  }
  return out;
}

lv_tensor *lv_op_matmul(lv_graph *g, lv_tensor *a, lv_tensor *b, bool trans_a, bool trans_b) {
  return matmul_common(g, LV_OP_MATMUL, a, b, trans_a, trans_b);
}

lv_tensor *lv_op_matmul_bias(lv_graph *g, lv_tensor *a, lv_tensor *w, lv_tensor *bias) {
  lv_tensor *ins[3] = {a, w, bias};
  if (!lv_graph_inputs_ok_q(g, LV_OP_MATMUL, 3, ins, 1)) return NULL;
  const lv_backend *k = lv_graph_kernels(g, LV_OP_MATMUL, 3, ins);
  if (!k) return NULL;
  const int r = a->shape.rank;
  const bool shapes = r >= 2 && w->shape.rank == 2 && a->dtype == LV_F32 && bias->dtype == LV_F32 &&
                      bias->shape.rank == 1 && bias->shape.d[0] == w->shape.d[1] && a->shape.d[r - 1] == w->shape.d[0];
  /* use_twin, when it says no, has given a float-less w its floats. */
  const bool fused = shapes && use_twin(g, LV_OP_MATMUL, k, w, false, false, w->shape.d[0], w->shape.d[1]);
  if (lv_graph_failed(g)) return NULL;
  /* Outside training a float w multiplies into rows that already hold the bias (one GEMM
   * with beta 1: no add pass, no tape); in training the add keeps its own gradient. */
  const bool rows = shapes && !fused && !lv_graph_is_training(g) && w->dtype == LV_F32;
  if (!fused && !rows) return lv_op_add(g, lv_op_matmul(g, a, w, false, false), bias);
  lv_shape os = a->shape;
  os.d[r - 1] = w->shape.d[1];
  lv_tensor *out = lv_graph_out(g, LV_OP_MATMUL, LV_F32, os);
  if (!out) return NULL;
  const int64_t kk = w->shape.d[0], n = w->shape.d[1], m = lv_tensor_numel(a) / kk;
  if (fused) {
    twin_matmul(k, m, a, w, bias, false, out);
    return out;
  }
  LV_K(k, copy_block, m, n, 1, lv_f32(bias), 0, 0, lv_f32(out), n, 0, false);
  LV_K(k, gemm, false, false, m, n, kk, 1.0f, lv_f32(a), kk, lv_f32(w), n, 1.0f, lv_f32(out), n);
  return out;
}

/* ---- matmul_ones_col: [x, 1] wb ---- */

/* [x, 1] for x [m, kk - 1] in op scratch of [m, kk] (*buf for lv_graph_scratch_done),
 * written as concat writes it: x's block, then the ones column. */
static float *ones_col_copy(lv_graph *g, const lv_backend *k, const float *x, int64_t m, int64_t kk, int *buf) {
  const lv_op op = LV_OP_MATMUL_ONES_COL;
  int ones_buf = 0;
  float *x1 = lv_graph_scratch_buf(g, op, sizeof(float) * (size_t)(m * kk), buf);
  float *ones = x1 ? lv_graph_scratch_buf(g, op, sizeof(float) * (size_t)m, &ones_buf) : NULL;
  if (!ones) return NULL;
  LV_K(k, fill, m, 1.0f, ones);
  LV_K(k, copy_block, m, kk - 1, 1, x, kk - 1, 0, x1, kk, 0, false);
  LV_K(k, copy_block, m, 1, 1, ones, 1, 0, x1, kk, kk - 1, false);
  lv_graph_scratch_done(g, ones_buf);
  return x1;
}

/* matmul_bwd's GEMMs for a = [x, 1] (mm_grads, ta = tb = false), then concat_bwd's copy of
 * the x columns of d[x, 1]; d[x, 1] overwrites [x, 1] once d wb has read it. */
static void ones_col_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *x = nd->in[0], *wb = nd->in[1];
  bool wa = false;
  lv_tensor *gw = lv_graph_grad(g, wb, &wa);
  if (lv_graph_failed(g)) return;
  const lv_backend *k = nd->be;
  const int64_t m = nd->s.mm.m, n = nd->s.mm.n, kk = nd->s.mm.k;
  const float *gy = lv_f32(nd->out->grad);
  int buf;
  float *x1 = ones_col_copy(g, k, lv_f32(x), m, kk, &buf);
  if (!x1) return;
  if (gw) LV_K(k, gemm, true, false, kk, n, m, 1.0f, x1, kk, gy, n, wa ? 1.0f : 0.0f, lv_f32(gw), n);
  if (!x->requires_grad) return;
  LV_K(k, gemm, false, true, m, kk, n, 1.0f, gy, n, lv_f32(wb), n, 0.0f, x1, kk);
  bool xa;
  lv_tensor *gx = lv_graph_grad(g, x, &xa);
  if (gx) LV_K(k, copy_block, m, kk - 1, 1, x1, kk, 0, lv_f32(gx), kk - 1, 0, xa);
}

lv_tensor *lv_op_matmul_ones_col(lv_graph *g, lv_tensor *x, lv_tensor *wb) {
  const lv_op op = LV_OP_MATMUL_ONES_COL;
  lv_tensor *ins[2] = {x, wb};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
  char s1[128], s2[128];
  const int r = x->shape.rank;
  if (x->dtype != LV_F32 || wb->dtype != LV_F32 || r < 2 || wb->shape.rank != 2 ||
      wb->shape.d[0] != x->shape.d[r - 1] + 1) {
    lv_graph_failf(g, op, "float32 x [..., K] (rank >= 2) and wb [K + 1, N] required, got x %s %s and wb %s %s",
                   lv_dtype_names[x->dtype], LV_SHP(x, s1), lv_dtype_names[wb->dtype], LV_SHP(wb, s2));
    return NULL;
  }
  const int64_t kk = wb->shape.d[0], n = wb->shape.d[1];
  int64_t m = 1;
  for (int i = 0; i < r - 1; i++) m *= x->shape.d[i];
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_shape os = x->shape;
  os.d[r - 1] = n;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, os);
  if (!out) return NULL;
  int buf;
  float *x1 = ones_col_copy(g, k, lv_f32(x), m, kk, &buf);
  if (!x1) return NULL;
  LV_K(k, gemm, false, false, m, n, kk, 1.0f, x1, kk, lv_f32(wb), n, 0.0f, lv_f32(out), n);
  lv_graph_scratch_done(g, buf);
  lv_node *nd = lv_graph_record(g, op, ones_col_bwd, out, 2, ins);
  if (nd) {
    nd->be = k;
    nd->s.mm = (lv_saved_matmul){m, n, kk, 1, false, false};
  }
  return out;
}

/* ---- addmm: c + a b ---- */

static void addmm_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *c = nd->in[0], *a = nd->in[1], *b = nd->in[2], *gy = nd->out->grad;
  lv_graph_grad_pass(g, nd->be, c, gy); /* c's gradient is the output's */
  bool aa = false, ba = false;
  lv_tensor *ga = lv_graph_grad(g, a, &aa);
  lv_tensor *gb = lv_graph_grad(g, b, &ba);
  if (lv_graph_failed(g)) return;
  const lv_saved_matmul *sv = &nd->s.mm;
  mm_grads(nd->be, false, false, sv->m, sv->n, sv->k, lv_f32(a), lv_f32(b), lv_f32(gy), ga ? lv_f32(ga) : NULL, aa,
           gb ? lv_f32(gb) : NULL, ba);
}

lv_tensor *lv_op_addmm(lv_graph *g, lv_tensor *c, lv_tensor *a, lv_tensor *b) {
  const lv_op op = LV_OP_ADDMM;
  lv_tensor *ins[3] = {c, a, b};
  if (!lv_graph_inputs_ok_q(g, op, 3, ins, 2)) return NULL;
  char s1[128], s2[128], s3[128];
  if (c->dtype != LV_F32 || a->dtype != LV_F32 || b->dtype != LV_F32 || a->shape.rank != 2 || b->shape.rank != 2 ||
      c->shape.rank != 2 || a->shape.d[1] != b->shape.d[0] || c->shape.d[0] != a->shape.d[0] ||
      c->shape.d[1] != b->shape.d[1]) {
    lv_graph_failf(g, op, "float32 c [M, N], a [M, K] and b [K, N] required, got c %s, a %s, b %s", LV_SHP(c, s1),
                   LV_SHP(a, s2), LV_SHP(b, s3));
    return NULL;
  }
  const int64_t m = a->shape.d[0], kk = a->shape.d[1], n = b->shape.d[1];
  const lv_backend *k = lv_graph_kernels(g, op, 3, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, c->shape);
  if (!out) return NULL;
  LV_K(k, axpy, m * n, 1.0f, lv_f32(c), lv_f32(out), false);
  if (use_twin(g, op, k, b, false, false, kk, n)) {
    twin_matmul(k, m, a, b, NULL, true, out);
    return out;
  }
  if (lv_graph_failed(g)) return NULL;
  LV_K(k, gemm, false, false, m, n, kk, 1.0f, lv_f32(a), kk, lv_f32(b), n, 1.0f, lv_f32(out), n);
  lv_node *nd = lv_graph_record(g, op, addmm_bwd, out, 3, ins);
  if (nd) {
    nd->be = k;
    nd->s.mm = (lv_saved_matmul){m, n, kk, 1, false, false};
  }
  return out;
}

/* ---- batch_matmul: one gemm_batched call over the leading dims ---- */

/* The batched form of mm_grads. */
static void bmm_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *a = nd->in[0], *b = nd->in[1];
  bool aa = false, ba = false;
  lv_tensor *ga = lv_graph_grad(g, a, &aa);
  lv_tensor *gb = lv_graph_grad(g, b, &ba);
  if (lv_graph_failed(g)) return;
  const lv_saved_matmul *sv = &nd->s.mm;
  const int64_t bt = sv->batch, m = sv->m, n = sv->n, kk = sv->k;
  const bool ta = sv->ta, tb = sv->tb;
  const int64_t lda = ta ? m : kk, ldb = tb ? kk : n, sa = m * kk, sb = kk * n, sc = m * n;
  const float *gc = lv_f32(nd->out->grad), *av = lv_f32(a), *bv = lv_f32(b);
  const lv_backend *k = nd->be;
  if (ga) {
    float beta = aa ? 1.0f : 0.0f;
    if (!ta)
      LV_K(k, gemm_batched, false, !tb, bt, m, kk, n, 1.0f, gc, n, sc, bv, ldb, sb, beta, lv_f32(ga), kk, sa);
    else
      LV_K(k, gemm_batched, tb, true, bt, kk, m, n, 1.0f, bv, ldb, sb, gc, n, sc, beta, lv_f32(ga), m, sa);
  }
  if (gb) {
    float beta = ba ? 1.0f : 0.0f;
    if (!tb)
      LV_K(k, gemm_batched, !ta, false, bt, kk, n, m, 1.0f, av, lda, sa, gc, n, sc, beta, lv_f32(gb), n, sb);
    else
      LV_K(k, gemm_batched, true, ta, bt, n, kk, m, 1.0f, gc, n, sc, av, lda, sa, beta, lv_f32(gb), kk, sb);
  }
}

lv_tensor *lv_op_batch_matmul(lv_graph *g, lv_tensor *a, lv_tensor *b, bool trans_a, bool trans_b) {
  const lv_op op = LV_OP_BATCH_MATMUL;
  lv_tensor *ins[2] = {a, b};
  if (!lv_graph_inputs_ok_q(g, op, 2, ins, 1)) return NULL;
  char s1[128], s2[128];
  if (a->dtype != LV_F32 || b->dtype != LV_F32) {
    lv_graph_failf(g, op, "float32 inputs required, got %s and %s", lv_dtype_names[a->dtype],
                   lv_dtype_names[b->dtype]);
    return NULL;
  }
  int r = a->shape.rank;
  bool ok = r >= 3 && b->shape.rank == r;
  int64_t batch = 1;
  for (int i = 0; ok && i < r - 2; i++) {
    ok = a->shape.d[i] == b->shape.d[i];
    batch *= a->shape.d[i];
  }
  if (!ok) {
    lv_graph_failf(g, op, "a [...,M,K] and b [...,K,N] of equal rank >= 3 with equal leading dims required: a %s vs b %s",
                   LV_SHP(a, s1), LV_SHP(b, s2));
    return NULL;
  }
  int64_t m = a->shape.d[r - (trans_a ? 1 : 2)], kk = a->shape.d[r - (trans_a ? 2 : 1)];
  int64_t kb = b->shape.d[r - (trans_b ? 1 : 2)], n = b->shape.d[r - (trans_b ? 2 : 1)];
  if (kk != kb) {
    lv_graph_failf(g, op, "inner dimensions differ: a %s vs b %s%s%s", LV_SHP(a, s1), LV_SHP(b, s2),
                   trans_a ? " (a transposed)" : "", trans_b ? " (b transposed)" : "");
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_shape os = a->shape;
  os.d[r - 2] = m;
  os.d[r - 1] = n;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, os);
  if (!out) return NULL;
  LV_K(k, gemm_batched, trans_a, trans_b, batch, m, n, kk, 1.0f, lv_f32(a), trans_a ? m : kk, m * kk, lv_f32(b),
       trans_b ? kk : n, kk * n, 0.0f, lv_f32(out), n, m * n);
  lv_node *nd = lv_graph_record(g, op, bmm_bwd, out, 2, ins);
  if (nd) {
    nd->be = k;
    nd->s.mm = (lv_saved_matmul){m, n, kk, batch, trans_a, trans_b};
  }
  return out;
}
