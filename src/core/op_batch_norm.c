/* Batch normalization (Lingvo's BatchNormLayer, padding-aware) as one op: the moments,
 * the normalization and its gradient are one kernel each, in place of a chain of
 * elementwise ops and reductions that each made a pass over the activations. */
#include "core/graph_impl.h"
#include "core/ops.h"

static void batch_norm_bwd(lv_graph *g, lv_node *nd) {
  const lv_saved_batch_norm *sv = &nd->s.bn;
  int i = 1;
  lv_tensor *x = nd->in[0], *pad = sv->has_pad ? nd->in[i++] : NULL;
  lv_tensor *gamma = sv->has_gamma ? nd->in[i++] : NULL, *beta = sv->has_beta ? nd->in[i++] : NULL;
  bool xa = false, ga = false, ba = false;
  lv_tensor *gx = lv_graph_grad(g, x, &xa);
  lv_tensor *gg = gamma ? lv_graph_grad(g, gamma, &ga) : NULL;
  lv_tensor *gb = beta ? lv_graph_grad(g, beta, &ba) : NULL;
  if (lv_graph_failed(g) || (!gx && !gg && !gb)) return;
  LV_K(nd->be, batch_norm_bwd, sv->rows, sv->c, lv_f32(x), pad ? lv_f32(pad) : NULL, gamma ? lv_f32(gamma) : NULL,
       sv->mean, sv->rstd, sv->count, sv->batch_stats, sv->zero_padded, lv_f32(nd->out->grad), sv->scratch,
       gx ? lv_f32(gx) : NULL, xa, gg ? lv_f32(gg) : NULL, ga, gb ? lv_f32(gb) : NULL, ba);
}

lv_tensor *lv_op_batch_norm(lv_graph *g, lv_tensor *x, lv_tensor *paddings, lv_tensor *gamma, lv_tensor *beta,
                            float eps, bool zero_padded, bool training, lv_tensor *moving_mean,
                            lv_tensor *moving_var, double decay) {
  const lv_op op = LV_OP_BATCH_NORM;
  if (!lv_graph_inputs_ok(g, op, 1, &x)) return NULL;
  char s1[128], s2[128];
  if (x->dtype != LV_F32 || x->shape.rank < 1 || x->shape.d[x->shape.rank - 1] < 1) {
    lv_graph_failf(g, op, "float32 x [..., C] with C >= 1 required, got %s %s", lv_dtype_names[x->dtype],
                   LV_SHP(x, s1));
    return NULL;
  }
  const int64_t c = x->shape.d[x->shape.rank - 1], rows = lv_tensor_numel(x) / c;
  if (paddings && (paddings->dtype != LV_F32 || lv_tensor_numel(paddings) != rows)) {
    lv_graph_failf(g, op, "paddings must be float32 with one value per row of x %s (%lld), got %s %s", LV_SHP(x, s1),
                   (long long)rows, lv_dtype_names[paddings->dtype], LV_SHP(paddings, s2));
    return NULL;
  }
  if (!training && !(moving_mean && moving_var)) {
    lv_graph_failf(g, op, "the moving mean and variance are required outside training");
    return NULL;
  }
  if (!moving_mean != !moving_var) {
    lv_graph_failf(g, op, "moving_mean and moving_var go together: give both or neither");
    return NULL;
  }
  const char *pnames[4] = {"gamma", "beta", "moving_mean", "moving_var"};
  lv_tensor *params[4] = {gamma, beta, moving_mean, moving_var};
  for (int i = 0; i < 4; i++) {
    if (!params[i]) continue;
    if (params[i]->dtype != LV_F32 || lv_tensor_numel(params[i]) != c) {
      lv_graph_failf(g, op, "%s must be float32 of %lld values (C of x %s), got %s %s", pnames[i], (long long)c,
                     LV_SHP(x, s1), lv_dtype_names[params[i]->dtype], LV_SHP(params[i], s2));
      return NULL;
    }
  }
  /* Kernel inputs for the device check; the tape keeps x, paddings, gamma, beta. */
  lv_tensor *ins[6];
  int n = 0;
  ins[n++] = x;
  if (paddings) ins[n++] = paddings;
  if (gamma) ins[n++] = gamma;
  if (beta) ins[n++] = beta;
  const int n_tape = n;
  if (moving_mean) ins[n++] = moving_mean, ins[n++] = moving_var;
  const lv_backend *k = lv_graph_kernels(g, op, n, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, x->shape);
  lv_tensor *mean = training ? lv_graph_out(g, op, LV_F32, lv_shape1(c)) : moving_mean;
  lv_tensor *var = training ? lv_graph_out(g, op, LV_F32, lv_shape1(c)) : moving_var;
  float *rstd = lv_graph_scratch(g, op, sizeof(float) * (size_t)c);
  double *count = lv_graph_scratch(g, op, sizeof(double));
  void *scratch = lv_graph_scratch(g, op, LV_K(k, batch_norm_scratch, rows, c));
  if (!out || !mean || !var || !rstd || !count || !scratch) return NULL;
  LV_K(k, batch_norm_fwd, rows, c, lv_f32(x), paddings ? lv_f32(paddings) : NULL, gamma ? lv_f32(gamma) : NULL,
       beta ? lv_f32(beta) : NULL, eps, training, zero_padded, lv_f32(mean), lv_f32(var), rstd, count, scratch,
       lv_f32(out));
  if (training && moving_mean &&
      !(lv_op_moving_average_update(g, moving_mean, mean, decay) &&
        lv_op_moving_average_update(g, moving_var, var, decay)))
    return NULL;
  lv_node *nd = lv_graph_record(g, op, batch_norm_bwd, out, n_tape, ins);
  if (nd) {
    nd->be = k;
    nd->s.bn = (lv_saved_batch_norm){rows,      c,           lv_f32(mean), rstd,     count,       scratch,
                                     !!paddings, gamma != NULL, beta != NULL, training, zero_padded};
  }
  return out;
}
