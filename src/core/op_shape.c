/* reshape (no copy), transpose, concat, slice. */
#include <string.h>

#include "core/graph_impl.h"
#include "core/ops.h"
#include "kernels/qweight.h"

static void reshape_bwd(lv_graph *g, lv_node *nd) { lv_graph_grad_pass(g, nd->be, nd->in[0], nd->out->grad); }

lv_tensor *lv_op_reshape(lv_graph *g, lv_tensor *x, lv_shape shape) {
  if (!lv_graph_inputs_ok(g, LV_OP_RESHAPE, 1, &x)) return NULL;
  char s1[128], s2[128];
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < shape.rank; i++) {
    if (shape.d[i] == -1 && infer < 0) {
      infer = i;
    } else if (shape.d[i] < 0) {
      lv_graph_failf(g, LV_OP_RESHAPE, "bad target shape %s for x %s", lv_shape_str(&shape, s2, sizeof s2),
                     LV_SHP(x, s1));
      return NULL;
    } else {
      known *= shape.d[i];
    }
  }
  int64_t n = lv_tensor_numel(x);
  if (infer >= 0) {
    if (known == 0 || n % known != 0) {
      lv_graph_failf(g, LV_OP_RESHAPE, "cannot infer -1 in %s from x %s (%lld elements)",
                     lv_shape_str(&shape, s2, sizeof s2), LV_SHP(x, s1), (long long)n);
      return NULL;
    }
    shape.d[infer] = n / known;
    known = n;
  }
  if (known != n) {
    lv_graph_failf(g, LV_OP_RESHAPE, "element counts differ: x %s (%lld) vs target %s (%lld)",
                   LV_SHP(x, s1), (long long)n, lv_shape_str(&shape, s2, sizeof s2), (long long)known);
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, LV_OP_RESHAPE, 1, &x);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_view_of(g, LV_OP_RESHAPE, x, shape);
  if (!out) return NULL;
  lv_node *nd = lv_graph_record(g, LV_OP_RESHAPE, reshape_bwd, out, 1, &x);
  if (nd) nd->be = k;
  return out;
}

static void transpose_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  lv_tensor *y = nd->out;
  int inv[LV_MAX_RANK];
  for (int i = 0; i < y->shape.rank; i++) inv[nd->s.tr.perm[i]] = i;
  if (!acc) LV_K(nd->be, zero, lv_tensor_nbytes(gx), gx->data);
  LV_K(nd->be, transpose, y->shape.rank, y->shape.d, inv, sizeof(float), lv_f32(y->grad), lv_f32(gx), true);
}

lv_tensor *lv_op_transpose(lv_graph *g, lv_tensor *x, const int *perm) {
  if (!lv_graph_inputs_ok(g, LV_OP_TRANSPOSE, 1, &x)) return NULL;
  char s1[128];
  int r = x->shape.rank;
  bool seen[LV_MAX_RANK] = {false};
  for (int i = 0; i < r; i++) {
    if (perm[i] < 0 || perm[i] >= r || seen[perm[i]]) {
      lv_graph_failf(g, LV_OP_TRANSPOSE, "perm is not a permutation of 0..%d for x %s (entry %d is %d)",
                     r - 1, LV_SHP(x, s1), i, perm[i]);
      return NULL;
    }
    seen[perm[i]] = true;
  }
  if (lv_dtype_size(x->dtype) == 0) {
    lv_graph_failf(g, LV_OP_TRANSPOSE, "dtype %s has no fixed size", lv_dtype_names[x->dtype]);
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, LV_OP_TRANSPOSE, 1, &x);
  if (!k) return NULL;
  lv_shape os = x->shape;
  for (int i = 0; i < r; i++) os.d[i] = x->shape.d[perm[i]];
  lv_tensor *out = lv_graph_out(g, LV_OP_TRANSPOSE, x->dtype, os);
  if (!out) return NULL;
  LV_K(k, transpose, r, x->shape.d, perm, lv_dtype_size(x->dtype), x->data, out->data, false);
  lv_node *nd = lv_graph_record(g, LV_OP_TRANSPOSE, transpose_bwd, out, 1, &x);
  if (nd) {
    nd->be = k;
    for (int i = 0; i < r; i++) nd->s.tr.perm[i] = perm[i];
  }
  return out;
}

static void split3(const lv_shape *s, int axis, int64_t *outer, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= s->d[i];
  for (int i = axis + 1; i < s->rank; i++) *inner *= s->d[i];
}

static void concat_bwd(lv_graph *g, lv_node *nd) {
  int axis = nd->s.axis.axis;
  lv_tensor *y = nd->out;
  int64_t outer, inner, off = 0;
  split3(&y->shape, axis, &outer, &inner);
  for (int i = 0; i < nd->n_in; i++) {
    lv_tensor *x = nd->in[i];
    int64_t len = x->shape.d[axis];
    bool acc;
    lv_tensor *gx = lv_graph_grad(g, x, &acc);
    if (gx)
      LV_K(nd->be, copy_block, outer, len, inner, lv_f32(y->grad), y->shape.d[axis], off, lv_f32(gx), len,
                        0, acc);
    off += len;
  }
}

lv_tensor *lv_op_concat(lv_graph *g, lv_tensor *const *xs, int n, int axis) {
  if (!g || lv_graph_failed(g)) return NULL;
  if (n < 1) {
    lv_graph_failf(g, LV_OP_CONCAT, "needs at least one input, got %d", n);
    return NULL;
  }
  if (!lv_graph_inputs_ok(g, LV_OP_CONCAT, n, xs)) return NULL;
  char s1[128], s2[128];
  int r = xs[0]->shape.rank;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) {
    lv_graph_failf(g, LV_OP_CONCAT, "axis out of range for input 0 %s", LV_SHP(xs[0], s1));
    return NULL;
  }
  lv_shape os = xs[0]->shape;
  os.d[axis] = 0;
  for (int i = 0; i < n; i++) {
    bool ok = xs[i]->dtype == LV_F32 && xs[i]->shape.rank == r;
    for (int d = 0; ok && d < r; d++)
      if (d != axis && xs[i]->shape.d[d] != xs[0]->shape.d[d]) ok = false;
    if (!ok) {
      lv_graph_failf(g, LV_OP_CONCAT, "float32 inputs equal except on axis %d required: input 0 %s vs input %d %s %s",
                     axis, LV_SHP(xs[0], s1), i, lv_dtype_names[xs[i]->dtype], LV_SHP(xs[i], s2));
      return NULL;
    }
    os.d[axis] += xs[i]->shape.d[axis];
  }
  const lv_backend *k = lv_graph_kernels(g, LV_OP_CONCAT, n, xs);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, LV_OP_CONCAT, LV_F32, os);
  if (!out) return NULL;
  int64_t outer, inner, off = 0;
  split3(&os, axis, &outer, &inner);
  for (int i = 0; i < n; i++) {
    int64_t len = xs[i]->shape.d[axis];
    LV_K(k, copy_block, outer, len, inner, lv_f32(xs[i]), len, 0, lv_f32(out), os.d[axis], off, false);
    off += len;
  }
  lv_node *nd = lv_graph_record(g, LV_OP_CONCAT, concat_bwd, out, n, xs);
  if (nd) {
    nd->be = k;
    nd->s.axis.axis = axis;
  }
  return out;
}

static void slice_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *x = nd->in[0], *y = nd->out;
  int axis = nd->s.axis.axis;
  lv_tensor *gx = lv_graph_grad_zeroed(g, x);
  if (!gx) return;
  int64_t outer, inner;
  split3(&x->shape, axis, &outer, &inner);
  LV_K(nd->be, copy_block, outer, y->shape.d[axis], inner, lv_f32(y->grad), y->shape.d[axis], 0,
                    lv_f32(gx), x->shape.d[axis], nd->s.axis.start, true);
}

static void *arena_alloc(void *g, size_t bytes) { return lv_graph_scratch(g, LV_OP_SLICE, bytes); }

/* Rows [start, start + len) of a quantized twin as a twin in the step arena (an LSTM's
 * input and recurrent rows of its weight), or NULL where the type cannot view them. */
static const lv_qweight *slice_twin(lv_graph *g, const lv_qweight *w, int64_t start, int64_t len) {
  if (w->axis != 1) return NULL;
  lv_qweight *t = lv_graph_scratch(g, LV_OP_SLICE, sizeof *t);
  if (!t || !lv_qtype_traits_of(w->type)->slice_rows(w, start, len, arena_alloc, g, t)) return NULL;
  t->root = w->root ? w->root : w;
  t->r0 = w->r0 + start;
  return t;
}

lv_tensor *lv_op_slice(lv_graph *g, lv_tensor *x, int axis, int64_t start, int64_t len) {
  if (!lv_graph_inputs_ok_q(g, LV_OP_SLICE, 1, &x, 0)) return NULL;
  char s1[128];
  int r = x->shape.rank;
  if (axis < 0) axis += r;
  if (x->dtype != LV_F32 || axis < 0 || axis >= r || start < 0 || len < 0 ||
      start + len > x->shape.d[axis]) {
    lv_graph_failf(g, LV_OP_SLICE, "cannot take [%lld, %lld) on axis %d of float32 x, got %s %s",
                   (long long)start, (long long)(start + len), axis, lv_dtype_names[x->dtype],
                   LV_SHP(x, s1));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, LV_OP_SLICE, 1, &x);
  if (!k) return NULL;
  lv_shape os = x->shape;
  os.d[axis] = len;
  int64_t outer, inner;
  split3(&x->shape, axis, &outer, &inner);
  const lv_qweight *twin = x->qw && axis == 0 && r == 2 && !lv_graph_is_training(g) ? slice_twin(g, x->qw, start, len)
                                                                                    : NULL;
  /* A float-less x sliced into a twin stays float-less (its rows' floats, if an op wants
   * them, are its root's); any other slice of it reads its floats. */
  const bool floatless = lv_tensor_floatless(x) && twin;
  if (!floatless && !lv_graph_floats(g, LV_OP_SLICE, x)) return NULL;
  /* Every dimension before axis is 1: the slice is one contiguous block of x, so a view
   * (no copy: a step's slice of a weight matrix or of a sequence's precomputed inputs). */
  lv_tensor *out = outer == 1 ? lv_graph_view_at(g, LV_OP_SLICE, x, os, sizeof(float) * (size_t)(start * inner))
                              : lv_graph_out(g, LV_OP_SLICE, LV_F32, os);
  if (!out) return NULL;
  if (outer != 1)
    LV_K(k, copy_block, outer, len, inner, lv_f32(x), x->shape.d[axis], start, lv_f32(out), len, 0, false);
  if (twin) out->qw = twin;
  lv_node *nd = lv_graph_record(g, LV_OP_SLICE, slice_bwd, out, 1, &x);
  if (nd) {
    nd->be = k;
    nd->s.axis = (lv_saved_axis){axis, start};
  }
  return out;
}
