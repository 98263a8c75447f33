/* Dropout: keep with probability keep_prob, scale kept values by 1/keep_prob. The mask
 * is a pure function of (seed, stream, element index), so a restarted run repeats it.
 * add_noise: x + scale * noise with the same property (per-step weight noise). */
#include "core/graph_impl.h"
#include "core/ops.h"

static void dropout_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  lv_bcast bc = {0};
  int64_t n = lv_tensor_numel(gx);
  bc.rank = 1;
  bc.shape[0] = n;
  bc.sa[0] = bc.sb[0] = 1;
  if (!acc) {
    LV_K(nd->be, binary, LV_BIN_MUL, &bc, lv_f32(nd->out->grad), nd->s.dropout.mask, lv_f32(gx));
    return;
  }
  float *tmp = lv_graph_scratch(g, LV_OP_DROPOUT, sizeof(float) * (size_t)n);
  if (!tmp) return;
  LV_K(nd->be, binary, LV_BIN_MUL, &bc, lv_f32(nd->out->grad), nd->s.dropout.mask, tmp);
  LV_K(nd->be, axpy, n, 1.0f, tmp, lv_f32(gx), true);
}

lv_tensor *lv_op_dropout(lv_graph *g, lv_tensor *x, float keep_prob, uint64_t seed, uint64_t stream) {
  if (!lv_graph_inputs_ok(g, LV_OP_DROPOUT, 1, &x)) return NULL;
  char s1[128];
  if (x->dtype != LV_F32 || !(keep_prob > 0.0f && keep_prob <= 1.0f)) {
    lv_graph_failf(g, LV_OP_DROPOUT, "float32 x and keep_prob in (0, 1] required, got %s %s keep_prob %g",
                   lv_dtype_names[x->dtype], LV_SHP(x, s1), (double)keep_prob);
    return NULL;
  }
  if (!lv_graph_is_training(g) || keep_prob == 1.0f) return x;
  const lv_backend *k = lv_graph_kernels(g, LV_OP_DROPOUT, 1, &x);
  if (!k) return NULL;
  int64_t n = lv_tensor_numel(x);
  lv_tensor *out = lv_graph_out(g, LV_OP_DROPOUT, LV_F32, x->shape);
  float *mask = lv_graph_scratch(g, LV_OP_DROPOUT, sizeof(float) * (size_t)n);
  if (!out || !mask) return NULL;
  LV_K(k, dropout_fwd, n, lv_f32(x), keep_prob, seed, stream, lv_f32(out), mask);
  lv_node *nd = lv_graph_record(g, LV_OP_DROPOUT, dropout_bwd, out, 1, &x);
  if (nd) {
    nd->be = k;
    nd->s.dropout.mask = mask;
  }
  return out;
}

lv_tensor *lv_op_step_dropout(lv_graph *g, lv_tensor *x, float prob, uint64_t seed, uint64_t per_step, uint64_t k) {
  if (!x || prob <= 0 || !lv_graph_is_training(g)) return x;
  return lv_op_dropout(g, x, 1.0f - prob, seed, lv_graph_stream(g, per_step, k));
}

/* d(x + scale * noise)/dx = 1: the gradient passes through unchanged. */
static void add_noise_bwd(lv_graph *g, lv_node *nd) { lv_graph_grad_pass(g, nd->be, nd->in[0], nd->out->grad); }

lv_tensor *lv_op_add_noise(lv_graph *g, lv_tensor *x, float scale, bool uniform, uint64_t seed, uint64_t stream) {
  if (!lv_graph_inputs_ok(g, LV_OP_ADD_NOISE, 1, &x)) return NULL;
  char s1[128];
  if (x->dtype != LV_F32 || !(scale >= 0.0f)) {
    lv_graph_failf(g, LV_OP_ADD_NOISE, "float32 x and scale >= 0 required, got %s %s scale %g",
                   lv_dtype_names[x->dtype], LV_SHP(x, s1), (double)scale);
    return NULL;
  }
  if (scale == 0.0f) return x;
  const lv_backend *k = lv_graph_kernels(g, LV_OP_ADD_NOISE, 1, &x);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, LV_OP_ADD_NOISE, LV_F32, x->shape);
  if (!out) return NULL;
  LV_K(k, add_noise, lv_tensor_numel(x), lv_f32(x), scale, uniform, seed, stream, lv_f32(out));
  lv_node *nd = lv_graph_record(g, LV_OP_ADD_NOISE, add_noise_bwd, out, 1, &x);
  if (nd) nd->be = k;
  return out;
}
