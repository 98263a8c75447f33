#include "layers/batch_norm.h"

lv_params *lv_batch_norm_layer_params(void) {
  lv_params *p = lv_layer_base_params("BatchNormLayer");
  lv_params_define_int(p, "dim", 0, "Depth of the input/output.");
  lv_params_define_float(p, "decay", 0.999, "Decay in updating the mean and variance moving average.");
  lv_params_define_float(p, "epsilon", 0.001, "Small value added to the variance to avoid dividing by zero.");
  lv_params_define_bool(p, "set_padded_output_to_zero", true, "If True, sets the padded outputs to zero.");
  return p;
}

lv_status lv_batch_norm_layer_create(lv_batch_norm_layer *l, const lv_params *p, const char *parent_scope,
                                     lv_varstore *vs) {
  LV_TRY(lv_layer_setup(&l->base, p, parent_scope, vs));
  l->dim = lv_params_int(p, "dim");
  l->decay = lv_params_float(p, "decay");
  l->epsilon = lv_params_float(p, "epsilon");
  l->set_padded_output_to_zero = lv_params_bool(p, "set_padded_output_to_zero");
  if (l->dim <= 0) return lv_status_make(LV_ERR_INVALID, "%s: dim must be > 0, got %lld", l->base.scope, (long long)l->dim);
  lv_var_init zero = {LV_INIT_CONSTANT, 0.0}, one = {LV_INIT_CONSTANT, 1.0};
  LV_TRY(lv_layer_add_var(&l->base, "beta", lv_shape1(l->dim), &zero, true, &l->beta));
  LV_TRY(lv_layer_add_var(&l->base, "gamma", lv_shape1(l->dim), &zero, true, &l->gamma));
  LV_TRY(lv_layer_add_var(&l->base, "moving_mean", lv_shape1(l->dim), &zero, false, &l->moving_mean));
  LV_TRY(lv_layer_add_var(&l->base, "moving_variance", lv_shape1(l->dim), &one, false, &l->moving_variance));
  l->beta->skip_lp_regularization = l->gamma->skip_lp_regularization = true;
  return NULL;
}

static bool check_dim(lv_batch_norm_layer *l, lv_graph *g, lv_tensor *x) {
  if (x->shape.d[x->shape.rank - 1] == l->dim) return true;
  lv_graph_fail(g, "%s: input depth %lld does not match dim %lld", l->base.scope,
                (long long)x->shape.d[x->shape.rank - 1], (long long)l->dim);
  return false;
}

/* Training: the batch moments (over the rows whose padding is 0, as Lingvo's
 * ComputeMoments with m = 1 - padding and n = max(sum(m), 1)), the gradient flowing
 * through them as in TensorFlow, and the moving statistics' updates queued; eval: the
 * moving statistics. One fused op (lv_op_batch_norm) either way. */
static lv_tensor *fprop(lv_batch_norm_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings) {
  return lv_op_batch_norm(g, x, paddings, &l->gamma->value, &l->beta->value, (float)l->epsilon,
                          paddings && l->set_padded_output_to_zero, lv_graph_is_training(g), &l->moving_mean->value,
                          &l->moving_variance->value, l->decay);
}

lv_tensor *lv_batch_norm_layer_fprop(lv_batch_norm_layer *l, lv_graph *g, lv_tensor *x) {
  if (!x || !check_dim(l, g, x)) return NULL;
  return fprop(l, g, x, NULL);
}

lv_tensor *lv_batch_norm_layer_fprop_padded(lv_batch_norm_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings) {
  if (!paddings) return lv_batch_norm_layer_fprop(l, g, x);
  if (!x) return NULL;
  char s1[96], s2[96];
  const int64_t rows = x->shape.d[x->shape.rank - 1] ? lv_tensor_numel(x) / x->shape.d[x->shape.rank - 1] : 0;
  if (x->shape.d[x->shape.rank - 1] != l->dim || lv_tensor_numel(paddings) != rows || paddings->dtype != LV_F32) {
    lv_graph_fail(g, "%s: inputs %s with dim %lld need float32 paddings of one value per row (%lld), got %s %s",
                  l->base.scope, lv_shape_str(&x->shape, s1, sizeof s1), (long long)l->dim, (long long)rows,
                  lv_dtype_names[paddings->dtype], lv_shape_str(&paddings->shape, s2, sizeof s2));
    return NULL;
  }
  return fprop(l, g, x, paddings);
}

static lv_status batch_norm_create(lv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  return lv_batch_norm_layer_create((lv_batch_norm_layer *)l, p, parent_scope, vs);
}
/* "act" and optional "paddings" -> "act". */
static bool batch_norm_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  return lv_layer_set_out(l, g, out, "act",
                          lv_batch_norm_layer_fprop_padded((lv_batch_norm_layer *)l, g, lv_layer_in(l, g, in, "act"),
                                                           lv_nmap_get(in, "paddings")));
}
static bool batch_norm_out_shape(const lv_layer *l, lv_shape in, lv_shape *out) {
  if (in.rank < 1 || in.d[in.rank - 1] != ((const lv_batch_norm_layer *)l)->dim) return false;
  *out = in;
  return true;
}

const lv_layer_class lv_batch_norm_layer_class = {
    .cls = "BatchNormLayer",
    .params = lv_batch_norm_layer_params,
    .size = sizeof(lv_batch_norm_layer),
    .create = batch_norm_create,
    .fprop = batch_norm_fprop,
    .out_shape = batch_norm_out_shape,
};
