/* add, sub, mul, div, maximum, minimum, compare and select with numpy broadcasting,
 * scale, add_scalar, maximum_scalar and clip. Gradients of a broadcast operand are
 * summed back over the dims it was stretched along. */
#include <string.h>

#include "core/graph_impl.h"
#include "core/ops.h"

/* Output shape and operand strides; false if the shapes do not broadcast. */
static bool broadcast(const lv_shape *a, const lv_shape *b, lv_bcast *bc) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  bc->rank = r;
  int64_t st_a = 1, st_b = 1;
  for (int i = r - 1; i >= 0; i--) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    bc->shape[i] = da == 1 ? db : da;
    bc->sa[i] = da == 1 ? 0 : st_a;
    bc->sb[i] = db == 1 ? 0 : st_b;
    st_a *= da;
    st_b *= db;
  }
  return true;
}

static void dense_strides(lv_bcast *bc, int64_t *s) {
  int64_t st = 1;
  for (int i = bc->rank - 1; i >= 0; i--) {
    s[i] = st;
    st *= bc->shape[i];
  }
}

static lv_shape bc_shape(const lv_bcast *bc) {
  lv_shape s;
  s.rank = bc->rank;
  for (int i = 0; i < bc->rank; i++) s.d[i] = bc->shape[i];
  return s;
}

/* dst (operand with strides ostr) (+)= alpha * reduce(src dense over bc). */
static void reduce_into(const lv_backend *k, const lv_bcast *bc, const int64_t *ostr,
                        const float *src, float alpha, float *dst, bool acc) {
  lv_bcast r = *bc;
  memcpy(r.sa, ostr, sizeof r.sa);
  LV_K(k, reduce_to, &r, src, alpha, dst, acc);
}

static void binary_bwd(lv_graph *g, lv_node *nd) {
  const lv_backend *k = nd->be;
  lv_tensor *a = nd->in[0], *b = nd->in[1], *out = nd->out;
  bool aa = false, ba = false;
  /* a + b or a - b with a of the output's shape: a's gradient is the output's, the same
   * buffer when a has none yet (as reshape does; not a leaf's, and never both operands). */
  const bool a_is_gy = (nd->op == LV_OP_ADD || nd->op == LV_OP_SUB) && a != b && a->requires_grad &&
                       a->dtype == LV_F32 && lv_shape_eq(&a->shape, &out->shape) &&
                       lv_graph_grad_alias(g, a, out->grad);
  lv_tensor *ga = a_is_gy ? NULL : lv_graph_grad(g, a, &aa);
  lv_tensor *gb = lv_graph_grad(g, b, &ba);
  if (lv_graph_failed(g)) return;
  lv_bcast bc;
  broadcast(&a->shape, &b->shape, &bc);
  int64_t dense[LV_KMAX_RANK];
  dense_strides(&bc, dense);
  int64_t n = lv_tensor_numel(out);
  const float *gy = lv_f32(out->grad);
  float *tmp = NULL;
  if ((nd->op == LV_OP_MUL || nd->op == LV_OP_DIV) && (ga || gb)) {
    tmp = lv_graph_scratch(g, nd->op, sizeof(float) * (size_t)n);
    if (!tmp) return;
  }
  lv_bcast t = bc; /* gy (dense) against one operand */
  memcpy(t.sa, dense, sizeof t.sa);
  switch (nd->op) {
    case LV_OP_ADD:
    case LV_OP_SUB:
      if (ga) reduce_into(k, &bc, bc.sa, gy, 1.0f, lv_f32(ga), aa);
      if (gb) reduce_into(k, &bc, bc.sb, gy, nd->op == LV_OP_SUB ? -1.0f : 1.0f, lv_f32(gb), ba);
      break;
    case LV_OP_MUL:
      if (ga) {
        memcpy(t.sb, bc.sb, sizeof t.sb);
        LV_K(k, binary, LV_BIN_MUL, &t, gy, lv_f32(b), tmp);
        reduce_into(k, &bc, bc.sa, tmp, 1.0f, lv_f32(ga), aa);
      }
      if (gb) {
        memcpy(t.sb, bc.sa, sizeof t.sb);
        LV_K(k, binary, LV_BIN_MUL, &t, gy, lv_f32(a), tmp);
        reduce_into(k, &bc, bc.sb, tmp, 1.0f, lv_f32(gb), ba);
      }
      break;
    default: /* div: da = gy / b, db = -gy * out / b */
      memcpy(t.sb, bc.sb, sizeof t.sb);
      if (ga) {
        LV_K(k, binary, LV_BIN_DIV, &t, gy, lv_f32(b), tmp);
        reduce_into(k, &bc, bc.sa, tmp, 1.0f, lv_f32(ga), aa);
      }
      if (gb) {
        lv_bcast same = t;
        memcpy(same.sb, dense, sizeof same.sb);
        LV_K(k, binary, LV_BIN_MUL, &same, gy, lv_f32(out), tmp);
        LV_K(k, binary, LV_BIN_DIV, &t, tmp, lv_f32(b), tmp);
        reduce_into(k, &bc, bc.sb, tmp, -1.0f, lv_f32(gb), ba);
      }
      break;
  }
}

static lv_tensor *binary_with(lv_graph *g, lv_op op, lv_binary_op bop, lv_tensor *a, lv_tensor *b,
                              lv_backward_fn bw) {
  lv_tensor *ins[2] = {a, b};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
  char s1[128], s2[128];
  if (a->dtype != LV_F32 || b->dtype != LV_F32) {
    lv_graph_failf(g, op, "float32 inputs required, got %s %s and %s %s",
                   lv_dtype_names[a->dtype], LV_SHP(a, s1), lv_dtype_names[b->dtype], LV_SHP(b, s2));
    return NULL;
  }
  lv_bcast bc;
  if (!broadcast(&a->shape, &b->shape, &bc)) {
    lv_graph_failf(g, op, "shapes do not broadcast: a %s vs b %s", LV_SHP(a, s1), LV_SHP(b, s2));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, bc_shape(&bc));
  if (!out) return NULL;
  LV_K(k, binary, bop, &bc, lv_f32(a), lv_f32(b), lv_f32(out));
  lv_node *nd = bw ? lv_graph_record(g, op, bw, out, 2, ins) : NULL;
  if (nd) nd->be = k;
  return out;
}

static lv_tensor *binary(lv_graph *g, lv_op op, lv_binary_op bop, lv_tensor *a, lv_tensor *b) {
  return binary_with(g, op, bop, a, b, binary_bwd);
}

lv_tensor *lv_op_add(lv_graph *g, lv_tensor *a, lv_tensor *b) {
  return binary(g, LV_OP_ADD, LV_BIN_ADD, a, b);
}
lv_tensor *lv_op_sub(lv_graph *g, lv_tensor *a, lv_tensor *b) {
  return binary(g, LV_OP_SUB, LV_BIN_SUB, a, b);
}
lv_tensor *lv_op_mul(lv_graph *g, lv_tensor *a, lv_tensor *b) {
  return binary(g, LV_OP_MUL, LV_BIN_MUL, a, b);
}
lv_tensor *lv_op_div(lv_graph *g, lv_tensor *a, lv_tensor *b) {
  return binary(g, LV_OP_DIV, LV_BIN_DIV, a, b);
}

static void scale_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  float s = nd->op == LV_OP_SCALE ? nd->s.scalar.s : 1.0f;
  LV_K(nd->be, axpy, lv_tensor_numel(gx), s, lv_f32(nd->out->grad), lv_f32(gx), acc);
}

static lv_tensor *scale_add(lv_graph *g, lv_op op, lv_tensor *a, float s, float add) {
  if (!lv_graph_inputs_ok(g, op, 1, &a)) return NULL;
  char s1[128];
  if (a->dtype != LV_F32) {
    lv_graph_failf(g, op, "float32 input required, got %s %s", lv_dtype_names[a->dtype],
                   LV_SHP(a, s1));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 1, &a);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, a->shape);
  if (!out) return NULL;
  LV_K(k, scale_add, lv_tensor_numel(a), lv_f32(a), s, add, lv_f32(out));
  lv_node *nd = lv_graph_record(g, op, scale_bwd, out, 1, &a);
  if (nd) {
    nd->be = k;
    nd->s.scalar.s = s;
  }
  return out;
}

lv_tensor *lv_op_scale(lv_graph *g, lv_tensor *a, float s) {
  return scale_add(g, LV_OP_SCALE, a, s, 0.0f);
}
lv_tensor *lv_op_add_scalar(lv_graph *g, lv_tensor *a, float s) {
  return scale_add(g, LV_OP_ADD_SCALAR, a, 1.0f, s);
}

static void max_scalar_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  LV_K(nd->be, max_scalar_bwd, lv_tensor_numel(gx), lv_f32(nd->in[0]), nd->s.scalar.s,
       lv_f32(nd->out->grad), lv_f32(gx), acc);
}

lv_tensor *lv_op_maximum_scalar(lv_graph *g, lv_tensor *a, float s) {
  const lv_op op = LV_OP_MAXIMUM_SCALAR;
  if (!lv_graph_inputs_ok(g, op, 1, &a)) return NULL;
  char s1[128];
  if (a->dtype != LV_F32) {
    lv_graph_failf(g, op, "float32 input required, got %s %s", lv_dtype_names[a->dtype], LV_SHP(a, s1));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 1, &a);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, a->shape);
  if (!out) return NULL;
  LV_K(k, max_scalar_fwd, lv_tensor_numel(a), lv_f32(a), s, lv_f32(out));
  lv_node *nd = lv_graph_record(g, op, max_scalar_bwd, out, 1, &a);
  if (nd) {
    nd->be = k;
    nd->s.scalar.s = s;
  }
  return out;
}

/* ---- maximum, minimum, compare, select, clip ---- */

bool lv_core_bcast_strides(const lv_shape *x, const lv_shape *out, int64_t *s) {
  if (x->rank > out->rank) return false;
  int64_t st = 1;
  for (int i = out->rank - 1; i >= 0; i--) {
    int ix = i - (out->rank - x->rank);
    int64_t d = ix >= 0 ? x->d[ix] : 1;
    if (d != out->d[i] && d != 1) return false;
    s[i] = d == 1 ? 0 : st;
    st *= d;
  }
  return true;
}

/* The gradient of operand t (strides ts over bc's shape) where cond (strides bc->sa) is
 * (set) or is not (!set) nonzero: straight into t's gradient when t has the output's
 * shape, else through scratch and a sum over the stretched dims. */
static void masked_into(lv_graph *g, lv_node *nd, const lv_bcast *bc, const float *cond, bool set,
                        lv_tensor *t, const int64_t *ts) {
  bool acc;
  lv_tensor *gt = lv_graph_grad(g, t, &acc);
  if (!gt) return;
  const float *gy = lv_f32(nd->out->grad);
  int64_t n = lv_tensor_numel(nd->out);
  if (lv_tensor_numel(t) == n) {
    LV_K(nd->be, mask_grad, bc, cond, gy, set, lv_f32(gt), acc);
    return;
  }
  float *tmp = lv_graph_scratch(g, nd->op, sizeof(float) * (size_t)n);
  if (!tmp) return;
  LV_K(nd->be, mask_grad, bc, cond, gy, set, tmp, false);
  reduce_into(nd->be, bc, ts, tmp, 1.0f, lv_f32(gt), acc);
}

static void minmax_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *a = nd->in[0], *b = nd->in[1];
  lv_bcast bc;
  broadcast(&a->shape, &b->shape, &bc);
  int64_t n = lv_tensor_numel(nd->out);
  /* Where a wins or ties: the mask, dense over the output. */
  float *win = lv_graph_scratch(g, nd->op, sizeof(float) * (size_t)n);
  if (!win) return;
  LV_K(nd->be, binary, nd->op == LV_OP_MAXIMUM ? LV_BIN_GE : LV_BIN_LE, &bc, lv_f32(a), lv_f32(b), win);
  lv_bcast m = bc;
  dense_strides(&bc, m.sa);
  masked_into(g, nd, &m, win, true, a, bc.sa);
  masked_into(g, nd, &m, win, false, b, bc.sb);
}

lv_tensor *lv_op_maximum(lv_graph *g, lv_tensor *a, lv_tensor *b) {
  return binary_with(g, LV_OP_MAXIMUM, LV_BIN_MAX, a, b, minmax_bwd);
}
lv_tensor *lv_op_minimum(lv_graph *g, lv_tensor *a, lv_tensor *b) {
  return binary_with(g, LV_OP_MINIMUM, LV_BIN_MIN, a, b, minmax_bwd);
}

lv_tensor *lv_op_compare(lv_graph *g, lv_tensor *a, lv_tensor *b, lv_compare cmp) {
  if (g && !lv_graph_failed(g) && ((int)cmp < 0 || cmp >= LV_CMP_COUNT)) {
    lv_graph_failf(g, LV_OP_COMPARE, "unknown comparison %d", (int)cmp);
    return NULL;
  }
  return binary_with(g, LV_OP_COMPARE, (lv_binary_op)(LV_BIN_LT + (int)cmp), a, b, NULL);
}

static void select_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *cond = nd->in[0], *a = nd->in[1], *b = nd->in[2];
  lv_bcast bc;
  bc.rank = nd->out->shape.rank;
  for (int i = 0; i < bc.rank; i++) bc.shape[i] = nd->out->shape.d[i];
  int64_t sa[LV_KMAX_RANK], sb[LV_KMAX_RANK];
  lv_core_bcast_strides(&cond->shape, &nd->out->shape, bc.sa);
  lv_core_bcast_strides(&a->shape, &nd->out->shape, sa);
  lv_core_bcast_strides(&b->shape, &nd->out->shape, sb);
  memcpy(bc.sb, sb, sizeof bc.sb);
  masked_into(g, nd, &bc, lv_f32(cond), true, a, sa);
  masked_into(g, nd, &bc, lv_f32(cond), false, b, sb);
}

lv_tensor *lv_op_select(lv_graph *g, lv_tensor *cond, lv_tensor *a, lv_tensor *b) {
  const lv_op op = LV_OP_SELECT;
  lv_tensor *ins[3] = {cond, a, b};
  if (!lv_graph_inputs_ok(g, op, 3, ins)) return NULL;
  char s1[128], s2[128], s3[128];
  lv_bcast ca, all;
  bool ok = cond->dtype == LV_F32 && a->dtype == LV_F32 && b->dtype == LV_F32;
  if (!ok) {
    lv_graph_failf(g, op, "float32 cond, a and b required, got %s, %s and %s", lv_dtype_names[cond->dtype],
                   lv_dtype_names[a->dtype], lv_dtype_names[b->dtype]);
    return NULL;
  }
  lv_shape cas;
  if (broadcast(&cond->shape, &a->shape, &ca)) {
    cas = bc_shape(&ca);
    ok = broadcast(&cas, &b->shape, &all);
  } else {
    ok = false;
  }
  if (!ok) {
    lv_graph_failf(g, op, "shapes do not broadcast: cond %s, a %s, b %s", LV_SHP(cond, s1), LV_SHP(a, s2),
                   LV_SHP(b, s3));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 3, ins);
  if (!k) return NULL;
  lv_shape os = bc_shape(&all);
  lv_tensor *out = lv_graph_out(g, op, LV_F32, os);
  if (!out) return NULL;
  lv_bcast3 b3;
  b3.rank = os.rank;
  for (int i = 0; i < os.rank; i++) b3.shape[i] = os.d[i];
  for (int i = 0; i < 3; i++) lv_core_bcast_strides(&ins[i]->shape, &os, b3.s[i]);
  LV_K(k, select_fwd, &b3, lv_f32(cond), lv_f32(a), lv_f32(b), lv_f32(out));
  /* No gradient to cond: only a and b decide whether a node is recorded. */
  lv_node *nd = (a->requires_grad || b->requires_grad) ? lv_graph_record(g, op, select_bwd, out, 3, ins) : NULL;
  if (nd) nd->be = k;
  return out;
}

static void clip_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  LV_K(nd->be, clip_bwd, lv_tensor_numel(gx), lv_f32(nd->in[0]), nd->s.clip.lo, nd->s.clip.hi,
       lv_f32(nd->out->grad), lv_f32(gx), acc);
}

lv_tensor *lv_op_clip(lv_graph *g, lv_tensor *x, float lo, float hi) {
  const lv_op op = LV_OP_CLIP;
  if (!lv_graph_inputs_ok(g, op, 1, &x)) return NULL;
  char s1[128];
  if (x->dtype != LV_F32 || !(lo <= hi)) {
    lv_graph_failf(g, op, "float32 x and lo <= hi required, got %s %s, lo %g, hi %g", lv_dtype_names[x->dtype],
                   LV_SHP(x, s1), lo, hi);
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 1, &x);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, x->shape);
  if (!out) return NULL;
  LV_K(k, clip_fwd, lv_tensor_numel(x), lv_f32(x), lo, hi, lv_f32(out));
  lv_node *nd = lv_graph_record(g, op, clip_bwd, out, 1, &x);
  if (nd) {
    nd->be = k;
    nd->s.clip = (lv_saved_clip){lo, hi};
  }
  return out;
}
