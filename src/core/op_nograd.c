/* Ops without gradients: cast, per-image standardization, in_top_k, argmax. */
#include <math.h>

#include "core/graph_impl.h"
#include "core/ops.h"

static bool castable(lv_dtype t) {
  return t == LV_F32 || t == LV_F64 || t == LV_I32 || t == LV_I64 || t == LV_U8 || t == LV_BOOL;
}

lv_tensor *lv_op_cast(lv_graph *g, lv_tensor *x, lv_dtype dtype) {
  if (!lv_graph_inputs_ok(g, LV_OP_CAST, 1, &x)) return NULL;
  if (!castable(x->dtype) || !castable(dtype)) {
    lv_graph_failf(g, LV_OP_CAST, "cannot cast %s to %s", lv_dtype_names[x->dtype],
                   lv_dtype_names[dtype]);
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, LV_OP_CAST, 1, &x);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, LV_OP_CAST, dtype, x->shape);
  if (!out) return NULL;
  LV_K(k, cast, x->dtype, dtype, lv_tensor_numel(x), x->data, out->data);
  return out;
}

lv_tensor *lv_op_per_image_standardization(lv_graph *g, lv_tensor *x) {
  const lv_op op = LV_OP_PER_IMAGE_STANDARDIZATION;
  if (!lv_graph_inputs_ok(g, op, 1, &x)) return NULL;
  char s1[128];
  if (x->dtype != LV_F32 || x->shape.rank < 2) {
    lv_graph_failf(g, op, "float32 images [N,...] required, got %s %s", lv_dtype_names[x->dtype],
                   LV_SHP(x, s1));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 1, &x);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, x->shape);
  if (!out) return NULL;
  int64_t n = x->shape.d[0];
  LV_K(k, per_image_std, n, n ? lv_tensor_numel(x) / n : 0, lv_f32(x), lv_f32(out));
  return out;
}

lv_tensor *lv_op_in_top_k(lv_graph *g, lv_tensor *logits, lv_tensor *labels, int k) {
  lv_tensor *ins[2] = {logits, labels};
  if (!lv_graph_inputs_ok(g, LV_OP_IN_TOP_K, 2, ins)) return NULL;
  char s1[128], s2[128];
  if (logits->dtype != LV_F32 || logits->shape.rank != 2 || labels->dtype != LV_I32 ||
      labels->shape.rank != 1 || labels->shape.d[0] != logits->shape.d[0]) {
    lv_graph_failf(g, LV_OP_IN_TOP_K, "float32 logits [B,C] and int32 labels [B] required: logits %s %s vs labels %s %s",
                   lv_dtype_names[logits->dtype], LV_SHP(logits, s1), lv_dtype_names[labels->dtype],
                   LV_SHP(labels, s2));
    return NULL;
  }
  const lv_backend *kt = lv_graph_kernels(g, LV_OP_IN_TOP_K, 2, ins);
  if (!kt) return NULL;
  lv_tensor *out = lv_graph_out(g, LV_OP_IN_TOP_K, LV_F32, labels->shape);
  if (!out) return NULL;
  LV_K(kt, in_top_k, logits->shape.d[0], logits->shape.d[1], lv_f32(logits), lv_i32(labels), k, lv_f32(out));
  return out;
}

lv_tensor *lv_op_argmax(lv_graph *g, lv_tensor *x) {
  if (!lv_graph_inputs_ok(g, LV_OP_ARGMAX, 1, &x)) return NULL;
  char s1[128];
  if (x->dtype != LV_F32 || x->shape.rank < 1 || x->shape.d[x->shape.rank - 1] < 1) {
    lv_graph_failf(g, LV_OP_ARGMAX, "float32 x [...,C] with C >= 1 required, got %s %s",
                   lv_dtype_names[x->dtype], LV_SHP(x, s1));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, LV_OP_ARGMAX, 1, &x);
  if (!k) return NULL;
  lv_shape os = x->shape;
  os.rank--;
  lv_tensor *out = lv_graph_out(g, LV_OP_ARGMAX, LV_I32, os);
  if (!out) return NULL;
  int64_t c = x->shape.d[x->shape.rank - 1];
  LV_K(k, argmax, lv_tensor_numel(x) / c, c, lv_f32(x), lv_i32(out));
  return out;
}

bool lv_op_moving_average_update(lv_graph *g, lv_tensor *avg, lv_tensor *x, double decay) {
  return lv_op_moving_average_update_clip(g, avg, x, decay, -INFINITY, INFINITY);
}

bool lv_op_moving_average_update_clip(lv_graph *g, lv_tensor *avg, lv_tensor *x, double decay, float lo, float hi) {
  const lv_op op = LV_OP_MOVING_AVERAGE;
  lv_tensor *ins[2] = {avg, x};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return false;
  char s1[128], s2[128];
  if (avg->dtype != LV_F32 || x->dtype != LV_F32 || lv_tensor_numel(avg) != lv_tensor_numel(x)) {
    lv_graph_failf(g, op, "float32 average and value of equal size required: avg %s %s vs x %s %s",
                   lv_dtype_names[avg->dtype], LV_SHP(avg, s1), lv_dtype_names[x->dtype], LV_SHP(x, s2));
    return false;
  }
  if (!lv_graph_kernels(g, op, 2, ins)) return false;
  if (!(lo <= hi)) {
    lv_graph_failf(g, op, "bounds lo %g <= hi %g required", lo, hi);
    return false;
  }
  lv_deferred_update u = {avg, x, decay, lo, hi};
  return lv_graph_defer_update(g, op, &u);
}
