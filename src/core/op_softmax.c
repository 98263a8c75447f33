/* softmax, log_softmax, masked_softmax and the two softmax cross-entropies, over the last
 * axis. The cross-entropies keep the softmax for their backward (p - target). */
#include "core/graph_impl.h"
#include "core/ops.h"

static bool last_axis(lv_graph *g, lv_op op, lv_tensor *x, int64_t *rows, int64_t *c) {
  char s1[128];
  if (x->dtype != LV_F32 || x->shape.rank < 1) {
    lv_graph_failf(g, op, "float32 logits of rank >= 1 required, got %s %s",
                   lv_dtype_names[x->dtype], LV_SHP(x, s1));
    return false;
  }
  *c = x->shape.d[x->shape.rank - 1];
  *rows = *c ? lv_tensor_numel(x) / *c : 0;
  return true;
}

static void softmax_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  LV_K(nd->be, softmax_bwd, nd->s.sm.rows, nd->s.sm.c, lv_f32(nd->out), lv_f32(nd->out->grad), lv_f32(gx),
                     nd->op == LV_OP_LOG_SOFTMAX, acc);
}

static lv_tensor *softmax(lv_graph *g, lv_op op, lv_tensor *x) {
  if (!lv_graph_inputs_ok(g, op, 1, &x)) return NULL;
  int64_t rows, c;
  if (!last_axis(g, op, x, &rows, &c)) return NULL;
  const lv_backend *k = lv_graph_kernels(g, op, 1, &x);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, x->shape);
  if (!out) return NULL;
  LV_K(k, softmax_fwd, rows, c, lv_f32(x), lv_f32(out), op == LV_OP_LOG_SOFTMAX);
  lv_node *nd = lv_graph_record(g, op, softmax_bwd, out, 1, &x);
  if (nd) {
    nd->be = k;
    nd->s.sm = (lv_saved_softmax){rows, c, NULL, NULL};
  }
  return out;
}

/* Padded positions have probability 0, so the plain softmax gradient gives them 0 too. */
lv_tensor *lv_op_masked_softmax(lv_graph *g, lv_tensor *logits, lv_tensor *paddings) {
  const lv_op op = LV_OP_MASKED_SOFTMAX;
  lv_tensor *ins[2] = {logits, paddings};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
  int64_t rows, c;
  if (!last_axis(g, op, logits, &rows, &c)) return NULL;
  char s1[128], s2[128];
  lv_bcast bc;
  bc.rank = logits->shape.rank;
  for (int i = 0; i < bc.rank; i++) bc.shape[i] = logits->shape.d[i];
  if (paddings->dtype != LV_F32 || !lv_core_bcast_strides(&paddings->shape, &logits->shape, bc.sa)) {
    lv_graph_failf(g, op, "float32 paddings that broadcast to the logits required: logits %s vs paddings %s %s",
                   LV_SHP(logits, s1), lv_dtype_names[paddings->dtype], LV_SHP(paddings, s2));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, logits->shape);
  if (!out) return NULL;
  LV_K(k, masked_softmax_fwd, &bc, lv_f32(logits), lv_f32(paddings), lv_f32(out));
  lv_node *nd = lv_graph_record(g, op, softmax_bwd, out, 1, &logits);
  if (nd) {
    nd->be = k;
    nd->s.sm = (lv_saved_softmax){rows, c, NULL, NULL};
  }
  return out;
}

lv_tensor *lv_op_softmax(lv_graph *g, lv_tensor *logits) { return softmax(g, LV_OP_SOFTMAX, logits); }
lv_tensor *lv_op_log_softmax(lv_graph *g, lv_tensor *logits) {
  return softmax(g, LV_OP_LOG_SOFTMAX, logits);
}

static lv_shape drop_last(lv_shape s) {
  s.rank--;
  return s;
}

static void sparse_xent_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  LV_K(nd->be, sparse_xent_bwd, nd->s.sm.rows, nd->s.sm.c, nd->s.sm.probs, lv_i32(nd->in[1]), lv_f32(nd->out->grad),
                         lv_f32(gx), acc);
}

lv_tensor *lv_op_sparse_softmax_xent(lv_graph *g, lv_tensor *logits, lv_tensor *ids) {
  const lv_op op = LV_OP_SPARSE_SOFTMAX_XENT;
  lv_tensor *ins[2] = {logits, ids};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
  int64_t rows, c;
  if (!last_axis(g, op, logits, &rows, &c)) return NULL;
  lv_shape os = drop_last(logits->shape);
  char s1[128], s2[128];
  if (ids->dtype != LV_I32 || !lv_shape_eq(&ids->shape, &os)) {
    lv_graph_failf(g, op, "int32 ids shaped like logits without the class dim required: logits %s vs ids %s %s",
                   LV_SHP(logits, s1), lv_dtype_names[ids->dtype], LV_SHP(ids, s2));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, os);
  float *probs = lv_graph_scratch(g, op, sizeof(float) * (size_t)(rows * c));
  if (!out || !probs) return NULL;
  char detail[160];
  snprintf(detail, sizeof detail, "(logits %s)", LV_SHP(logits, s1));
  uint64_t tag = lv_graph_id_check(g, op, "class id", detail);
  LV_K(k, sparse_xent_fwd, rows, c, lv_f32(logits), lv_i32(ids), lv_f32(out), probs, tag);
  if (!lv_graph_poll_errors(g)) return NULL;
  lv_node *nd = lv_graph_record(g, op, sparse_xent_bwd, out, 2, ins);
  if (nd) {
    nd->be = k;
    nd->s.sm = (lv_saved_softmax){rows, c, probs, NULL};
  }
  return out;
}

static void xent_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  LV_K(nd->be, xent_bwd, nd->s.sm.rows, nd->s.sm.c, nd->s.sm.probs, lv_f32(nd->s.sm.target),
                  lv_f32(nd->out->grad), lv_f32(gx), acc);
}

lv_tensor *lv_op_softmax_xent(lv_graph *g, lv_tensor *logits, lv_tensor *probs_in) {
  const lv_op op = LV_OP_SOFTMAX_XENT;
  lv_tensor *ins[2] = {logits, probs_in};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
  int64_t rows, c;
  if (!last_axis(g, op, logits, &rows, &c)) return NULL;
  char s1[128], s2[128];
  if (probs_in->dtype != LV_F32 || !lv_shape_eq(&probs_in->shape, &logits->shape)) {
    lv_graph_failf(g, op, "float32 target probabilities shaped like the logits required: logits %s vs probs %s %s",
                   LV_SHP(logits, s1), lv_dtype_names[probs_in->dtype], LV_SHP(probs_in, s2));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, drop_last(logits->shape));
  float *sm = lv_graph_scratch(g, op, sizeof(float) * (size_t)(rows * c));
  if (!out || !sm) return NULL;
  LV_K(k, xent_fwd, rows, c, lv_f32(logits), lv_f32(probs_in), lv_f32(out), sm);
  /* Targets get no gradient: only the logits decide whether a node is recorded. */
  lv_node *nd = lv_graph_record(g, op, xent_bwd, out, 1, ins);
  if (nd) {
    nd->be = k;
    nd->s.sm = (lv_saved_softmax){rows, c, sm, probs_in};
  }
  return out;
}
