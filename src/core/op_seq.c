/* Sequence ops: reverse_sequence (time-major, lengths from paddings; its gradient is the
 * same reversal) and top_k (no gradient). */
#include "core/graph_impl.h"
#include "core/ops.h"

static void reverse_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *x = nd->in[0], *pad = nd->in[1];
  lv_tensor *gx = lv_graph_grad(g, x, &acc);
  if (!gx) return;
  int64_t t = x->shape.d[0], b = x->shape.d[1];
  int32_t *lens = lv_graph_scratch(g, nd->op, sizeof(int32_t) * (size_t)(b ? b : 1));
  if (!lens) return;
  LV_K(nd->be, reverse_seq, t, b, b && t ? lv_tensor_numel(x) / (t * b) : 0, lv_f32(pad),
       lv_f32(nd->out->grad), lv_f32(gx), acc, lens);
}

lv_tensor *lv_op_reverse_sequence(lv_graph *g, lv_tensor *x, lv_tensor *paddings) {
  const lv_op op = LV_OP_REVERSE_SEQUENCE;
  lv_tensor *ins[2] = {x, paddings};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
  char s1[128], s2[128];
  bool ok = x->dtype == LV_F32 && x->shape.rank >= 2 && paddings->dtype == LV_F32;
  if (ok) {
    const lv_shape *p = &paddings->shape;
    ok = (p->rank == 2 || (p->rank == 3 && p->d[2] == 1)) && p->d[0] == x->shape.d[0] && p->d[1] == x->shape.d[1];
  }
  if (!ok) {
    lv_graph_failf(g, op, "float32 x [T,B,...] and paddings [T,B] or [T,B,1] required: x %s %s vs paddings %s %s",
                   lv_dtype_names[x->dtype], LV_SHP(x, s1), lv_dtype_names[paddings->dtype], LV_SHP(paddings, s2));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  int64_t t = x->shape.d[0], b = x->shape.d[1];
  lv_tensor *out = lv_graph_out(g, op, LV_F32, x->shape);
  int32_t *lens = lv_graph_scratch(g, op, sizeof(int32_t) * (size_t)(b ? b : 1));
  if (!out || !lens) return NULL;
  LV_K(k, reverse_seq, t, b, b && t ? lv_tensor_numel(x) / (t * b) : 0, lv_f32(paddings), lv_f32(x), lv_f32(out),
       false, lens);
  /* No gradient to paddings: only x decides whether a node is recorded. */
  lv_node *nd = x->requires_grad ? lv_graph_record(g, op, reverse_bwd, out, 2, ins) : NULL;
  if (nd) nd->be = k;
  return out;
}

bool lv_op_top_k(lv_graph *g, lv_tensor *x, int k, lv_tensor **values, lv_tensor **indices) {
  const lv_op op = LV_OP_TOP_K;
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!lv_graph_inputs_ok(g, op, 1, &x)) return false;
  char s1[128];
  if (!values || !indices) {
    lv_graph_failf(g, op, "values and indices must not be NULL");
    return false;
  }
  int64_t n = x->shape.rank >= 1 ? x->shape.d[x->shape.rank - 1] : 0;
  if (x->dtype != LV_F32 || x->shape.rank < 1 || k < 0 || k > n) {
    lv_graph_failf(g, op, "float32 x [...,N] and 0 <= k <= N required, got %s %s and k %d", lv_dtype_names[x->dtype],
                   LV_SHP(x, s1), k);
    return false;
  }
  const lv_backend *kt = lv_graph_kernels(g, op, 1, &x);
  if (!kt) return false;
  lv_shape os = x->shape;
  os.d[os.rank - 1] = k;
  lv_tensor *v = lv_graph_out(g, op, LV_F32, os), *ix = lv_graph_out(g, op, LV_I32, os);
  if (!v || !ix) return false;
  LV_K(kt, top_k, n ? lv_tensor_numel(x) / n : 0, n, k, lv_f32(x), lv_f32(v), lv_i32(ix));
  *values = v;
  *indices = ix;
  return true;
}
