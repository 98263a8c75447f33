/* Layer normalization over the last axis with optional scale and bias: the plain form
 * and Lingvo's (1 + scale) form share the kernels (a flag). */
#include "core/graph_impl.h"
#include "core/ops.h"

static void layer_norm_bwd(lv_graph *g, lv_node *nd) {
  const lv_saved_layer_norm *sv = &nd->s.ln;
  lv_tensor *x = nd->in[0], *scale = sv->has_scale ? nd->in[1] : NULL;
  lv_tensor *bias = sv->has_bias ? nd->in[nd->n_in - 1] : NULL;
  bool xa = false, sa = false, ba = false;
  lv_tensor *gx = lv_graph_grad(g, x, &xa);
  lv_tensor *gs = scale ? lv_graph_grad(g, scale, &sa) : NULL;
  lv_tensor *gb = bias ? lv_graph_grad(g, bias, &ba) : NULL;
  if (lv_graph_failed(g)) return;
  int64_t rows = sv->rows, d = sv->d;
  const float *mean = sv->stats, *rstd = sv->stats + rows;
  LV_K(nd->be, layer_norm_bwd, rows, d, lv_f32(x), scale ? lv_f32(scale) : NULL, sv->plus1, mean, rstd,
                        lv_f32(nd->out->grad), gx ? lv_f32(gx) : NULL, xa, gs ? lv_f32(gs) : NULL,
                        sa, gb ? lv_f32(gb) : NULL, ba);
}

static lv_tensor *layer_norm(lv_graph *g, lv_op op, lv_tensor *x, lv_tensor *scale, lv_tensor *bias, float eps) {
  const bool plus1 = op == LV_OP_LAYER_NORM_PLUS1;
  if (!lv_graph_inputs_ok(g, op, 1, &x)) return NULL;
  char s1[128], s2[128];
  if (x->dtype != LV_F32 || x->shape.rank < 1) {
    lv_graph_failf(g, op, "float32 x of rank >= 1 required, got %s %s", lv_dtype_names[x->dtype],
                   LV_SHP(x, s1));
    return NULL;
  }
  int64_t d = x->shape.d[x->shape.rank - 1];
  lv_shape ds = lv_shape1(d);
  lv_tensor *ins[3];
  int n = 0;
  ins[n++] = x;
  lv_tensor *params[2] = {scale, bias};
  for (int i = 0; i < 2; i++) {
    if (!params[i]) continue;
    if (params[i]->dtype != LV_F32 || !lv_shape_eq(&params[i]->shape, &ds)) {
      lv_graph_failf(g, op, "%s must be float32 [%lld] for x %s, got %s", i ? "bias" : "scale",
                     (long long)d, LV_SHP(x, s1), LV_SHP(params[i], s2));
      return NULL;
    }
    ins[n++] = params[i];
  }
  const lv_backend *k = lv_graph_kernels(g, op, n, ins);
  if (!k) return NULL;
  int64_t rows = d ? lv_tensor_numel(x) / d : 0;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, x->shape);
  float *stats = lv_graph_scratch(g, op, sizeof(float) * (size_t)(2 * rows));
  if (!out || !stats) return NULL;
  LV_K(k, layer_norm_fwd, rows, d, lv_f32(x), scale ? lv_f32(scale) : NULL, bias ? lv_f32(bias) : NULL,
                    plus1, eps, lv_f32(out), stats, stats + rows);
  lv_node *nd = lv_graph_record(g, op, layer_norm_bwd, out, n, ins);
  if (nd) {
    nd->be = k;
    nd->s.ln = (lv_saved_layer_norm){rows, d, stats, scale != NULL, bias != NULL, plus1};
  }
  return out;
}

lv_tensor *lv_op_layer_norm(lv_graph *g, lv_tensor *x, lv_tensor *scale, lv_tensor *bias, float eps) {
  return layer_norm(g, LV_OP_LAYER_NORM, x, scale, bias, eps);
}

lv_tensor *lv_op_layer_norm_plus1(lv_graph *g, lv_tensor *x, lv_tensor *scale, lv_tensor *bias, float eps) {
  return layer_norm(g, LV_OP_LAYER_NORM_PLUS1, x, scale, bias, eps);
}
