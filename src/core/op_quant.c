/* Fake quantization: TF's fake_quant_with_min_max_vars / _args and their gradients
 * (straight-through to x; the clipped parts' sums to min and max for _vars). The
 * arithmetic is the kernels' (kernel_math.h's lv_kfq_*). */
#include "core/graph_impl.h"
#include "core/ops.h"

static void fake_quant_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *x = nd->in[0], *mn = nd->in[1], *mx = nd->in[2];
  bool ax = false, amin = false, amax = false;
  lv_tensor *gx = lv_graph_grad(g, x, &ax);
  lv_tensor *gmin = nd->s.fq.vars ? lv_graph_grad(g, mn, &amin) : NULL;
  lv_tensor *gmax = nd->s.fq.vars ? lv_graph_grad(g, mx, &amax) : NULL;
  if (!gx && !gmin && !gmax) return;
  LV_K(nd->be, fake_quant_bwd, lv_tensor_numel(x), lv_f32(x), lv_f32(mn), lv_f32(mx), nd->s.fq.quant_min,
       nd->s.fq.quant_max, nd->s.fq.vars, lv_f32(nd->out->grad), gx ? lv_f32(gx) : NULL, ax,
       gmin ? lv_f32(gmin) : NULL, amin, gmax ? lv_f32(gmax) : NULL, amax);
}

static lv_tensor *fake_quant(lv_graph *g, lv_tensor *x, lv_tensor *mn, lv_tensor *mx, int num_bits, bool narrow,
                             bool vars) {
  const lv_op op = LV_OP_FAKE_QUANT;
  lv_tensor *ins[3] = {x, mn, mx};
  if (!lv_graph_inputs_ok(g, op, 3, ins)) return NULL;
  char s1[128], s2[128], s3[128];
  if (x->dtype != LV_F32 || mn->dtype != LV_F32 || mx->dtype != LV_F32 || lv_tensor_numel(mn) != 1 ||
      lv_tensor_numel(mx) != 1) {
    lv_graph_failf(g, op, "float32 x and float32 min and max of one element each required, got x %s %s, min %s %s, "
                   "max %s %s", lv_dtype_names[x->dtype], LV_SHP(x, s1), lv_dtype_names[mn->dtype], LV_SHP(mn, s2),
                   lv_dtype_names[mx->dtype], LV_SHP(mx, s3));
    return NULL;
  }
  if (num_bits < 2 || num_bits > 16) {
    lv_graph_failf(g, op, "num_bits must be between 2 and 16, inclusive (got %d)", num_bits);
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 3, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, x->shape);
  if (!out) return NULL;
  const int qmin = narrow ? 1 : 0, qmax = (1 << num_bits) - 1;
  LV_K(k, fake_quant_fwd, lv_tensor_numel(x), lv_f32(x), lv_f32(mn), lv_f32(mx), qmin, qmax, vars, lv_f32(out));
  lv_node *nd = lv_graph_record(g, op, fake_quant_bwd, out, 3, ins);
  if (nd) {
    nd->be = k;
    nd->s.fq = (lv_saved_fake_quant){qmin, qmax, vars};
  }
  return out;
}

lv_tensor *lv_op_fake_quant_vars(lv_graph *g, lv_tensor *x, lv_tensor *min, lv_tensor *max, int num_bits,
                                 bool narrow_range) {
  return fake_quant(g, x, min, max, num_bits, narrow_range, true);
}

lv_tensor *lv_op_fake_quant_args(lv_graph *g, lv_tensor *x, float min, float max, int num_bits, bool narrow_range) {
  if (!lv_graph_inputs_ok(g, LV_OP_FAKE_QUANT, 1, &x)) return NULL;
  if (!(min < max)) {
    lv_graph_failf(g, LV_OP_FAKE_QUANT, "min has to be smaller than max, was: %g >= %g", min, max);
    return NULL;
  }
  lv_tensor *mn = lv_graph_fill(g, lv_shape1(1), min), *mx = lv_graph_fill(g, lv_shape1(1), max);
  return fake_quant(g, x, mn, mx, num_bits, narrow_range, false);
}
