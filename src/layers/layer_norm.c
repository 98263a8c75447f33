#include "layers/layer_norm.h"

lv_params *lv_layer_norm_layer_params(void) {
  lv_params *p = lv_layer_base_params("LayerNorm");
  lv_params_define_int(p, "input_dim", 0, "Depth of the input to the network.");
  lv_params_define_float(p, "epsilon", 1e-6, "Tiny value to guard rsqrt.");
  lv_params_define_bool(p, "direct_scale", false, "Whether to apply scale directly without a +1.0. Var is "
                        "initialized to 1.0 instead when true.");
  lv_params_define_bool(p, "bias", true, "Whether to use bias.");
  lv_params_define_bool(p, "center", true, "Whether to center the input to zero mean (lingvoc supports only "
                        "True).");
  return p;
}

lv_status lv_layer_norm_layer_create(lv_layer_norm_layer *l, const lv_params *p, const char *parent_scope,
                                     lv_varstore *vs) {
  LV_TRY(lv_layer_setup(&l->base, p, parent_scope, vs));
  l->input_dim = lv_params_int(p, "input_dim");
  l->epsilon = (float)lv_params_float(p, "epsilon");
  l->direct_scale = lv_params_bool(p, "direct_scale");
  if (l->input_dim <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: input_dim must be > 0, got %lld", l->base.scope,
                          (long long)l->input_dim);
  if (!lv_params_bool(p, "center"))
    return lv_status_make(LV_ERR_INVALID, "%s: center=False is not supported by lingvoc's LayerNorm",
                          l->base.scope);
  lv_var_init si = {LV_INIT_CONSTANT, l->direct_scale ? 1.0 : 0.0}, bi = {LV_INIT_CONSTANT, 0.0};
  LV_TRY(lv_layer_add_var(&l->base, "scale", lv_shape1(l->input_dim), &si, true, &l->scale));
  if (lv_params_bool(p, "bias"))
    LV_TRY(lv_layer_add_var(&l->base, "bias", lv_shape1(l->input_dim), &bi, true, &l->bias));
  /* Lingvo's LayerNorm puts both in SKIP_LP_REGULARIZATION: no L2/L1 on them. */
  l->scale->skip_lp_regularization = true;
  if (lv_params_bool(p, "bias")) l->bias->skip_lp_regularization = true;
  return NULL;
}

lv_tensor *lv_layer_norm_layer_fprop(lv_layer_norm_layer *l, lv_graph *g, lv_tensor *x) {
  if (!x) return NULL;
  if (x->shape.rank < 1 || x->shape.d[x->shape.rank - 1] != l->input_dim) {
    char s[96];
    lv_graph_fail(g, "%s: input_dim is %lld but the input has shape %s", l->base.scope, (long long)l->input_dim,
                  lv_shape_str(&x->shape, s, sizeof s));
    return NULL;
  }
  lv_tensor *b = l->bias ? &l->bias->value : NULL;
  if (l->direct_scale) return lv_op_layer_norm(g, x, &l->scale->value, b, l->epsilon);
  return lv_op_layer_norm_plus1(g, x, &l->scale->value, b, l->epsilon);
}

static lv_status ln_create(lv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  return lv_layer_norm_layer_create((lv_layer_norm_layer *)l, p, parent_scope, vs);
}
static bool ln_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  return lv_layer_set_out(l, g, out, "act",
                          lv_layer_norm_layer_fprop((lv_layer_norm_layer *)l, g, lv_layer_in(l, g, in, "act")));
}
static bool ln_out_shape(const lv_layer *l, lv_shape in, lv_shape *out) {
  if (in.rank < 1 || in.d[in.rank - 1] != ((const lv_layer_norm_layer *)l)->input_dim) return false;
  *out = in;
  return true;
}

const lv_layer_class lv_layer_norm_layer_class = {
    .cls = "LayerNorm",
    .params = lv_layer_norm_layer_params,
    .size = sizeof(lv_layer_norm_layer),
    .create = ln_create,
    .fprop = ln_fprop,
    .out_shape = ln_out_shape,
};
