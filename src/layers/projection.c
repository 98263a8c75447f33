#include "layers/projection.h"

#include <stdio.h>
#include <string.h>

static lv_params *projection_params(const char *cls, bool has_bias) {
  lv_params *p = lv_layer_base_params(cls);
  lv_params_define_int(p, "input_dim", 0, "Depth of the input.");
  lv_params_define_int(p, "output_dim", 0, "Depth of the output.");
  lv_params_define_string(p, "activation", "RELU", "Activation function.");
  lv_params_define_bool(p, "batch_norm", false, "Whether or not to apply batch norm.");
  lv_params_define_bool(p, "has_bias", has_bias, "Whether or not to introduce the bias params to the layer.");
  lv_params_define_float(p, "bias_init", 0.0, "Initial value for the bias.");
  lv_params_define_bool(p, "affine_last", false,
                        "If true, apply the affine transformation as the last step, i.e., first apply batch "
                        "normalization on the input, followed by activation, and finally the affine "
                        "transformation. Otherwise, apply affine transformation first, followed by batch "
                        "normalization and activation.");
  lv_params_define_bool(p, "enable_vn", false, "Whether to enable variational noise.");
  lv_params *bn = lv_batch_norm_layer_params();
  LV_ASSERT(!lv_params_set_float(bn, "decay", 0.999));
  lv_params_define_params(p, "bn_params", bn, "Default params for batch norm layer.");
  const lv_qdomain_name qd[] = {{"weight", "Quantization domain for the weights."}};
  lv_qdomain_define_params(p, qd, 1);
  return p;
}

lv_params *lv_projection_layer_params(void) { return projection_params("ProjectionLayer", false); }
lv_params *lv_fc_layer_params(void) { return projection_params("FCLayer", true); }

lv_status lv_projection_layer_create(lv_projection_layer *l, const lv_params *p, const char *parent_scope,
                                     lv_varstore *vs) {
  LV_TRY(lv_layer_setup(&l->base, p, parent_scope, vs));
  l->input_dim = lv_params_int(p, "input_dim");
  l->output_dim = lv_params_int(p, "output_dim");
  if (l->input_dim <= 0 || l->output_dim <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: input_dim and output_dim must be > 0, got %lld and %lld",
                          l->base.scope, (long long)l->input_dim, (long long)l->output_dim);
  LV_TRY(lv_layer_activation(&l->base, "activation", &l->act));
  l->has_bn = lv_params_bool(p, "batch_norm");
  l->affine_last = lv_params_bool(p, "affine_last");
  if (l->has_bn) {
    const lv_params *tpl = lv_params_sub(p, "bn_params");
    if (!tpl)
      return lv_status_make(LV_ERR_INVALID, "%s: batch_norm=True needs bn_params", l->base.scope);
    l->bn_params = lv_params_copy(tpl);
    LV_TRY(lv_params_set_string(l->bn_params, "name", lv_params_str(p, "name")));
    LV_TRY(lv_params_set_int(l->bn_params, "dim", l->affine_last ? l->input_dim : l->output_dim));
    lv_params_freeze(l->bn_params);
    /* Same scope as the projection: Lingvo names the child after the parent. */
    char parent[LV_VAR_NAME_MAX] = "";
    const char *slash = strrchr(l->base.scope, '/');
    if (slash) snprintf(parent, sizeof parent, "%.*s", (int)(slash - l->base.scope), l->base.scope);
    LV_TRY(lv_batch_norm_layer_create(&l->bn, l->bn_params, parent, vs));
  }
  LV_TRY(lv_layer_add_var(&l->base, "w", lv_shape2(l->input_dim, l->output_dim), NULL, true, &l->w));
  if (lv_params_bool(p, "enable_vn")) lv_layer_vn_target(&l->base, l->w, false);
  if (lv_params_bool(p, "has_bias")) {
    lv_var_init bi = {LV_INIT_CONSTANT, lv_params_float(p, "bias_init")};
    LV_TRY(lv_layer_add_var(&l->base, "b", lv_shape1(l->output_dim), &bi, true, &l->b));
  }
  LV_TRY(lv_qlayer_setup(&l->q, &l->base));
  lv_qlayer_bind_weight(&l->q, "weight", l->w);
  if (lv_qlayer_on(&l->q) && l->has_bn)
    return lv_status_make(LV_ERR_INVALID, "%s: batch_norm with a qdomain: Lingvo folds the batch norm into the "
                          "weights (bn_fold_weights), which lingvoc does not yet; set batch_norm = false or no "
                          "qdomain", l->base.scope);
  l->out_qact = l->act != LV_ACT_NONE ? "activation" : "affine_matmul";
  l->pre_qact = l->act != LV_ACT_NONE && l->act != LV_ACT_RELU && l->act != LV_ACT_RELU6 ? "affine_matmul" : NULL;
  LV_TRY(lv_qlayer_track(&l->q, "default", l->out_qact));
  if (l->pre_qact) LV_TRY(lv_qlayer_track(&l->q, "default", l->pre_qact));
  return NULL;
}

/* The float model's ops alone when no domain quantizes. */
static lv_tensor *quantized_fprop(lv_projection_layer *l, lv_graph *g, lv_tensor *x) {
  lv_qlayer *q = &l->q;
  lv_tensor *w = lv_qlayer_weight(q, g, "weight", &l->w->value);
  lv_tensor *y;
  if (l->affine_last) {
    y = l->act != LV_ACT_NONE ? lv_op_activation(g, x, l->act) : x;
    return lv_layer_affine_t(&l->base, g, y, l->input_dim, w, l->b ? &l->b->value : NULL);
  }
  y = lv_layer_affine_t(&l->base, g, x, l->input_dim, w, l->b ? &l->b->value : NULL);
  if (y && l->act != LV_ACT_NONE) {
    if (l->pre_qact) y = lv_qlayer_act(q, g, l->pre_qact, y);
    y = lv_op_activation(g, y, l->act);
  }
  return lv_qlayer_act(q, g, l->out_qact, y);
}

lv_tensor *lv_projection_layer_fprop(lv_projection_layer *l, lv_graph *g, lv_tensor *x) {
  return lv_projection_layer_fprop_padded(l, g, x, NULL);
}

lv_tensor *lv_projection_layer_fprop_padded(lv_projection_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings) {
  if (!x) return NULL;
  if (paddings) {
    char s1[96], s2[96];
    int64_t last = x->shape.rank ? x->shape.d[x->shape.rank - 1] : 0;
    if (paddings->dtype != LV_F32 || !last || lv_tensor_numel(paddings) * last != lv_tensor_numel(x)) {
      lv_graph_fail(g, "%s: paddings must be float32 with one value per row of the inputs %s, got %s %s",
                    l->base.scope, lv_shape_str(&x->shape, s1, sizeof s1), lv_dtype_names[paddings->dtype],
                    lv_shape_str(&paddings->shape, s2, sizeof s2));
      return NULL;
    }
  }
  lv_tensor *y = x;
  if (lv_qlayer_on(&l->q)) {
    y = quantized_fprop(l, g, x);
    if (paddings) paddings = lv_qlayer_ract(&l->q, g, "default", paddings, LV_QDIST_PADDING);
  } else if (l->affine_last) {
    if (l->has_bn) y = lv_batch_norm_layer_fprop_padded(&l->bn, g, y, paddings);
    if (y && l->act != LV_ACT_NONE) y = lv_op_activation(g, y, l->act);
    y = lv_layer_affine(&l->base, g, y, l->input_dim, l->w, l->b);
  } else {
    y = lv_layer_affine(&l->base, g, y, l->input_dim, l->w, l->b);
    if (y && l->has_bn) y = lv_batch_norm_layer_fprop_padded(&l->bn, g, y, paddings);
    if (y && l->act != LV_ACT_NONE) y = lv_op_activation(g, y, l->act);
  }
  if (y && paddings) {
    lv_shape ps = y->shape;
    ps.d[ps.rank - 1] = 1;
    lv_tensor *keep = lv_op_add_scalar(g, lv_op_scale(g, lv_op_reshape(g, paddings, ps), -1.0f), 1.0f);
    y = lv_op_mul(g, y, keep);
  }
  return y;
}

void lv_projection_layer_destroy(lv_projection_layer *l) {
  lv_params_free(l->bn_params);
  l->bn_params = NULL;
}

static lv_status projection_create(lv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  return lv_projection_layer_create((lv_projection_layer *)l, p, parent_scope, vs);
}
/* "act" and optional "paddings" -> "act". */
static bool projection_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  return lv_layer_set_out(l, g, out, "act",
                          lv_projection_layer_fprop_padded((lv_projection_layer *)l, g, lv_layer_in(l, g, in, "act"),
                                                           lv_nmap_get(in, "paddings")));
}
static void projection_destroy(lv_layer *l) { lv_projection_layer_destroy((lv_projection_layer *)l); }
static bool projection_out_shape(const lv_layer *l, lv_shape in, lv_shape *out) {
  const lv_projection_layer *pl = (const lv_projection_layer *)l;
  if (in.rank < 1 || in.d[in.rank - 1] != pl->input_dim) return false;
  *out = in;
  out->d[in.rank - 1] = pl->output_dim;
  return true;
}

const lv_layer_class lv_projection_layer_class = {
    .cls = "ProjectionLayer",
    .params = lv_projection_layer_params,
    .size = sizeof(lv_projection_layer),
    .create = projection_create,
    .fprop = projection_fprop,
    .out_shape = projection_out_shape,
    .destroy = projection_destroy,
};

const lv_layer_class lv_fc_layer_class = {
    .cls = "FCLayer",
    .params = lv_fc_layer_params,
    .size = sizeof(lv_projection_layer),
    .create = projection_create,
    .fprop = projection_fprop,
    .out_shape = projection_out_shape,
    .destroy = projection_destroy,
};
