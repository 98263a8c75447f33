/* Ops without gradients: cast, per-image standardization, in_top_k, argmax, a decoding
 * step's cached attention. */
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

lv_tensor *lv_op_cached_attention(lv_graph *g, lv_tensor *q, lv_tensor *k, lv_tensor *v, int64_t t, int64_t heads,
                                  lv_tensor *anc) {
  const lv_op op = LV_OP_CACHED_ATTENTION;
  lv_tensor *ins[4] = {q, k, v, anc};
  if (!lv_graph_inputs_ok(g, op, anc ? 4 : 3, ins)) return NULL;
  char s1[128], s2[128], s3[128], s4[128];
  const int64_t R = q->shape.rank == 2 ? q->shape.d[0] : -1, cap = k->shape.rank == 3 ? k->shape.d[0] : -1;
  if (q->dtype != LV_F32 || k->dtype != LV_F32 || v->dtype != LV_F32 || q->shape.rank != 2 || k->shape.rank != 3 ||
      v->shape.rank != 3 || heads < 1 || q->shape.d[1] % heads || v->shape.d[2] % heads || k->shape.d[1] != R ||
      k->shape.d[2] != q->shape.d[1] || v->shape.d[0] != cap || v->shape.d[1] != R || t < 1 || t > cap ||
      (anc && (anc->dtype != LV_I32 || lv_tensor_numel(anc) < t * R))) {
    lv_graph_failf(g, op,
                   "float32 q [R, heads * d], k [cap, R, heads * d], v [cap, R, heads * dv] with 1 <= t <= cap and "
                   "int32 anc of >= t * R ids required, got q %s, k %s, v %s, anc %s, t %lld, heads %lld",
                   LV_SHP(q, s1), LV_SHP(k, s2), LV_SHP(v, s3), anc ? LV_SHP(anc, s4) : "none", (long long)t,
                   (long long)heads);
    return NULL;
  }
  if (lv_graph_is_training(g) && (q->requires_grad || k->requires_grad || v->requires_grad)) {
    lv_graph_failf(g, op, "has no gradient: a graph that trains cannot use it (decoding only)");
    return NULL;
  }
  const lv_backend *kt = lv_graph_kernels(g, op, anc ? 4 : 3, ins);
  if (!kt) return NULL;
  const int64_t d = q->shape.d[1] / heads, dv = v->shape.d[2] / heads;
  lv_tensor *scratch = lv_graph_tensor(g, LV_F32, lv_shape1(R * heads * t));
  lv_tensor *out = scratch ? lv_graph_out(g, op, LV_F32, lv_shape2(R, heads * dv)) : NULL;
  if (!out) return NULL;
  uint64_t tag = 0;
  if (anc) {
    char detail[160];
    snprintf(detail, sizeof detail, "(a cache row of the [%lld, %lld] rows)", (long long)cap, (long long)R);
    tag = lv_graph_id_check(g, op, "cache row", detail);
  }
  LV_K(kt, cached_attention, t, R, heads, d, dv, cap, lv_f32(q), lv_f32(k), lv_f32(v), anc ? lv_i32(anc) : NULL,
       lv_f32(scratch), lv_f32(out), tag);
  return lv_graph_poll_errors(g) ? out : NULL;
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
