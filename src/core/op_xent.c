/* Label-smoothed cross-entropies (Lingvo's UniformLabelSmoother targets, per-row
 * weights): smoothed_xent on explicit logits, and projected_smoothed_xent, which forms
 * the logits x.w + b chunk by chunk over the classes and never keeps all of them. */
#include "core/graph_impl.h"
#include "core/ops.h"

static void smoothed_xent_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  const lv_saved_xent *sv = &nd->s.xent;
  LV_K(nd->be, smoothed_xent_bwd, sv->rows, sv->c, sv->probs, lv_i32(nd->in[1]),
       sv->has_weights ? lv_f32(nd->in[2]) : NULL, sv->smoothing, lv_f32(nd->out->grad), lv_f32(gx), acc);
}

/* ids (and weights) shaped like the rows; smoothing in [0, 1]. */
static bool check_targets(lv_graph *g, lv_op op, const char *what, const lv_tensor *ref, const lv_shape *rows,
                          lv_tensor *ids, lv_tensor *weights, float smoothing) {
  char s1[128], s2[128], s3[128];
  if (ids->dtype != LV_I32 || !lv_shape_eq(&ids->shape, rows)) {
    lv_graph_failf(g, op, "int32 ids %s required for %s %s, got %s %s", lv_shape_str(rows, s3, sizeof s3), what,
                   LV_SHP(ref, s1), lv_dtype_names[ids->dtype], LV_SHP(ids, s2));
    return false;
  }
  if (weights && (weights->dtype != LV_F32 || !lv_shape_eq(&weights->shape, rows))) {
    lv_graph_failf(g, op, "float32 weights %s required for %s %s, got %s %s", lv_shape_str(rows, s3, sizeof s3),
                   what, LV_SHP(ref, s1), lv_dtype_names[weights->dtype], LV_SHP(weights, s2));
    return false;
  }
  if (!(smoothing >= 0.0f && smoothing <= 1.0f)) {
    lv_graph_failf(g, op, "label smoothing must be in [0, 1], got %g", smoothing);
    return false;
  }
  return true;
}

lv_tensor *lv_op_smoothed_xent(lv_graph *g, lv_tensor *logits, lv_tensor *ids, lv_tensor *weights,
                               float smoothing) {
  const lv_op op = LV_OP_SMOOTHED_XENT;
  lv_tensor *ins[3] = {logits, ids, weights};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
  char s1[128];
  if (logits->dtype != LV_F32 || logits->shape.rank < 1) {
    lv_graph_failf(g, op, "float32 logits of rank >= 1 required, got %s %s", lv_dtype_names[logits->dtype],
                   LV_SHP(logits, s1));
    return NULL;
  }
  lv_shape os = logits->shape;
  os.rank--;
  if (!check_targets(g, op, "logits", logits, &os, ids, weights, smoothing)) return NULL;
  int n = weights ? 3 : 2;
  const lv_backend *k = lv_graph_kernels(g, op, n, ins);
  if (!k) return NULL;
  int64_t c = logits->shape.d[logits->shape.rank - 1], rows = lv_shape_numel(&os);
  lv_tensor *out = lv_graph_out(g, op, LV_F32, os);
  float *probs = lv_graph_scratch(g, op, sizeof(float) * (size_t)(rows * c));
  if (!out || !probs) return NULL;
  char detail[160];
  snprintf(detail, sizeof detail, "(logits %s)", LV_SHP(logits, s1));
  uint64_t tag = lv_graph_id_check(g, op, "class id", detail);
  LV_K(k, smoothed_xent_fwd, rows, c, lv_f32(logits), lv_i32(ids), weights ? lv_f32(weights) : NULL, smoothing,
       lv_f32(out), probs, tag);
  if (!lv_graph_poll_errors(g)) return NULL;
  /* Gradient to the logits only. */
  lv_node *nd = logits->requires_grad ? lv_graph_record(g, op, smoothed_xent_bwd, out, n, ins) : NULL;
  if (nd) {
    nd->be = k;
    nd->s.xent = (lv_saved_xent){rows, c, probs, smoothing, weights != NULL};
  }
  return out;
}
