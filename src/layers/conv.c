#include "layers/conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lv_params *lv_conv_layer_params(void) {
  lv_params *p = lv_layer_base_params("ConvLayer");
  int64_t zeros4[4] = {0, 0, 0, 0}, zeros2[2] = {0, 0}, ones2[2] = {1, 1};
  lv_params_define_list(p, "filter_shape", lv_pvalue_ints(4, zeros4),
                        "Filter shape. Must be a sequence of length 4. Elements are in the order of "
                        "height (time), width (frequency), in_channel, out_channel.");
  lv_params_define_list(p, "filter_stride", lv_pvalue_ints(2, zeros2),
                        "Filter stride to use. Must be a pair of ints. The first int specifies the "
                        "stride on the time dimension. The second int specifies the stride on the "
                        "frequency dimension.");
  lv_params_define_list(p, "dilation_rate", lv_pvalue_ints(2, ones2),
                        "If > 1, dilation rate for atrous convolution.");
  lv_params_define_string(p, "activation", "RELU", "Activation function to use.");
  lv_params_define_bool(p, "bias", false, "Whether or not to apply a bias before activation.");
  lv_params_define_bool(p, "batch_norm", true, "Whether or not to apply batch norm.");
  lv_params_define_float(p, "bn_decay", 0.999, "Decay in updating the mean and variance moving average used in batch normalization.");
  lv_qdomain_define_params(p, NULL, 0);
  return p;
}

lv_status lv_conv_layer_create(lv_conv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  LV_TRY(lv_layer_setup(&l->base, p, parent_scope, vs));
  LV_TRY(lv_layer_int_list(&l->base, "filter_shape", 4, l->filter));
  LV_TRY(lv_layer_int_list(&l->base, "filter_stride", 2, l->stride));
  LV_TRY(lv_layer_int_list(&l->base, "dilation_rate", 2, l->dilation));
  LV_TRY(lv_layer_activation(&l->base, "activation", &l->act));
  for (int i = 0; i < 4; i++)
    if (l->filter[i] <= 0)
      return lv_status_make(LV_ERR_INVALID, "%s: filter_shape entries must be > 0, got [%lld,%lld,%lld,%lld]",
                            l->base.scope, (long long)l->filter[0], (long long)l->filter[1],
                            (long long)l->filter[2], (long long)l->filter[3]);
  for (int i = 0; i < 2; i++)
    if (l->stride[i] <= 0 || l->dilation[i] <= 0)
      return lv_status_make(LV_ERR_INVALID, "%s: filter_stride and dilation_rate entries must be > 0", l->base.scope);
  LV_TRY(lv_layer_add_var(&l->base, "w", lv_shape4(l->filter[0], l->filter[1], l->filter[2], l->filter[3]), NULL,
                          true, &l->w));
  if (lv_params_bool(p, "bias")) {
    lv_var_init zero = {LV_INIT_CONSTANT, 0.0};
    LV_TRY(lv_layer_add_var(&l->base, "b", lv_shape1(l->filter[3]), &zero, true, &l->b));
  }
  l->has_bn = lv_params_bool(p, "batch_norm");
  if (l->has_bn) {
    l->bn_params = lv_batch_norm_layer_params();
    LV_TRY(lv_params_set_string(l->bn_params, "name", lv_params_str(p, "name")));
    LV_TRY(lv_params_set_int(l->bn_params, "dim", l->filter[3]));
    LV_TRY(lv_params_set_float(l->bn_params, "decay", lv_params_float(p, "bn_decay")));
    lv_params_freeze(l->bn_params);
    /* Same scope as the conv: Lingvo names the child after the parent. */
    char parent[LV_VAR_NAME_MAX] = "";
    const char *slash = strrchr(l->base.scope, '/');
    if (slash) snprintf(parent, sizeof parent, "%.*s", (int)(slash - l->base.scope), l->base.scope);
    LV_TRY(lv_batch_norm_layer_create(&l->bn, l->bn_params, parent, vs));
  }
  LV_TRY(lv_qlayer_setup(&l->q, &l->base));
  if (lv_qlayer_on(&l->q) && l->has_bn)
    return lv_status_make(LV_ERR_INVALID, "%s: batch_norm with a qdomain: Lingvo folds the batch norm into the "
                          "weights (bn_fold_weights), which lingvoc does not yet; set batch_norm = false or no "
                          "qdomain", l->base.scope);
  LV_TRY(lv_qlayer_track(&l->q, "default", "activation"));
  if (l->act != LV_ACT_NONE && l->act != LV_ACT_RELU && l->act != LV_ACT_RELU6)
    LV_TRY(lv_qlayer_track(&l->q, "default", "pre_activation"));
  return NULL;
}

void lv_conv_layer_destroy(lv_conv_layer *l) {
  lv_params_free(l->bn_params);
  l->bn_params = NULL;
}

lv_shape lv_conv_layer_out_shape(const lv_conv_layer *l, lv_shape in) {
  lv_shape o = in;
  o.d[1] = (in.d[1] + l->stride[0] - 1) / l->stride[0];
  o.d[2] = (in.d[2] + l->stride[1] - 1) / l->stride[1];
  o.d[3] = l->filter[3];
  return o;
}

lv_tensor *lv_conv_output_paddings(lv_graph *g, lv_tensor *paddings, int stride) {
  if (!paddings || stride == 1) return paddings;
  const int64_t n = paddings->shape.d[0], h = paddings->shape.d[1], extra = (h + stride - 1) / stride * stride - h;
  lv_tensor *p = paddings;
  if (extra) {
    lv_tensor *parts[2] = {paddings, lv_graph_fill(g, lv_shape2(n, extra), 1.0f)};
    p = parts[1] ? lv_op_concat(g, parts, 2, 1) : NULL;
  }
  if (!p) return NULL;
  p = lv_op_max_pool2d(g, lv_op_reshape(g, p, lv_shape4(n, h + extra, 1, 1)), stride, 1, stride, 1, LV_PAD_VALID);
  return p ? lv_op_reshape(g, p, lv_shape2(n, (h + extra) / stride)) : NULL;
}

/* 1 - paddings [N,H] as [N,H,1,1]. */
static lv_tensor *keep_mask(lv_graph *g, lv_tensor *paddings) {
  lv_tensor *k = lv_op_add_scalar(g, lv_op_scale(g, paddings, -1.0f), 1.0f);
  return k ? lv_op_reshape(g, k, lv_shape4(k->shape.d[0], k->shape.d[1], 1, 1)) : NULL;
}

lv_tensor *lv_conv_layer_fprop(lv_conv_layer *l, lv_graph *g, lv_tensor *x) {
  return lv_conv_layer_fprop_padded(l, g, x, NULL, NULL);
}

static bool input_ok(lv_conv_layer *l, lv_graph *g, lv_tensor *x) {
  if (!x) return false;
  if (x->shape.rank != 4 || x->shape.d[3] != l->filter[2]) {
    char s[96];
    lv_graph_fail(g, "%s: expected input [N,H,W,%lld], got %s", l->base.scope, (long long)l->filter[2],
                  lv_shape_str(&x->shape, s, sizeof s));
    return false;
  }
  return true;
}

lv_tensor *lv_conv_layer_fprop_preact(lv_conv_layer *l, lv_graph *g, lv_tensor *x) {
  if (!input_ok(l, g, x)) return NULL;
  lv_tensor *y = lv_op_conv2d(g, x, lv_qlayer_weight(&l->q, g, "default", &l->w->value), (int)l->stride[0],
                              (int)l->stride[1], (int)l->dilation[0], (int)l->dilation[1], LV_PAD_SAME);
  if (l->b) y = lv_op_add(g, y, &l->b->value);
  if (l->has_bn) y = lv_batch_norm_layer_fprop(&l->bn, g, y);
  return y;
}

/* The activation, with the quantized layer's pre-activation and output ranges. */
static lv_tensor *activate(lv_conv_layer *l, lv_graph *g, lv_tensor *y) {
  const bool q = lv_qlayer_on(&l->q);
  if (l->act == LV_ACT_NONE) return q ? lv_qlayer_act(&l->q, g, "activation", y) : y;
  if (q && l->act != LV_ACT_RELU && l->act != LV_ACT_RELU6) y = lv_qlayer_act(&l->q, g, "pre_activation", y);
  y = y ? lv_op_activation(g, y, l->act) : NULL;
  return q ? lv_qlayer_act(&l->q, g, "activation", y) : y;
}

lv_tensor *lv_conv_layer_fprop_padded(lv_conv_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings,
                                      lv_tensor **out_paddings) {
  if (out_paddings) *out_paddings = NULL;
  if (!input_ok(l, g, x)) return NULL;
  if (!paddings) {
    return activate(l, g, lv_conv_layer_fprop_preact(l, g, x));
  }
  if (paddings->dtype != LV_F32 || paddings->shape.rank != 2 || paddings->shape.d[0] != x->shape.d[0] ||
      paddings->shape.d[1] != x->shape.d[1]) {
    char s1[96], s2[96];
    lv_graph_fail(g, "%s: paddings must be float32 [N,H] of the inputs %s, got %s %s", l->base.scope,
                  lv_shape_str(&x->shape, s1, sizeof s1), lv_dtype_names[paddings->dtype],
                  lv_shape_str(&paddings->shape, s2, sizeof s2));
    return NULL;
  }
  const bool q = lv_qlayer_on(&l->q);
  lv_tensor *y = lv_op_mul(g, x, keep_mask(g, q ? lv_qlayer_ract(&l->q, g, "default", paddings, LV_QDIST_PADDING)
                                                : paddings));
  lv_tensor *op = lv_conv_output_paddings(g, paddings, (int)l->stride[0]);
  y = lv_op_conv2d(g, y, lv_qlayer_weight(&l->q, g, "default", &l->w->value), (int)l->stride[0], (int)l->stride[1],
                   (int)l->dilation[0], (int)l->dilation[1], LV_PAD_SAME);
  if (!y || !op) return NULL;
  if (l->b) y = lv_op_add(g, y, &l->b->value);
  if (y && l->has_bn) {
    /* One padding per output position [N,H',W',1]: the moments count every frequency bin
     * of a frame, as Lingvo's broadcast paddings do. */
    lv_tensor *zeros = lv_graph_zeros(g, LV_F32, lv_shape4(1, 1, y->shape.d[2], 1));
    lv_tensor *rows = zeros ? lv_op_add(g, lv_op_reshape(g, op, lv_shape4(op->shape.d[0], op->shape.d[1], 1, 1)), zeros)
                            : NULL;
    y = rows ? lv_batch_norm_layer_fprop_padded(&l->bn, g, y, rows) : NULL;
  }
  y = y ? activate(l, g, y) : NULL;
  y = y ? lv_op_mul(g, y, keep_mask(g, q ? lv_qlayer_ract(&l->q, g, "default", op, LV_QDIST_PADDING) : op)) : NULL;
  if (y && out_paddings) *out_paddings = op;
  return y;
}

static lv_status conv_create(lv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  return lv_conv_layer_create((lv_conv_layer *)l, p, parent_scope, vs);
}
/* "act" and optional "paddings" [N,H] -> "act" (and "paddings" when given). */
static bool conv_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_tensor *pads = lv_nmap_get(in, "paddings"), *out_pads = NULL;
  lv_tensor *y = lv_conv_layer_fprop_padded((lv_conv_layer *)l, g, lv_layer_in(l, g, in, "act"), pads,
                                            pads ? &out_pads : NULL);
  if (!lv_layer_set_out(l, g, out, "act", y)) return false;
  return !pads || lv_layer_set_out(l, g, out, "paddings", out_pads);
}
static bool conv_out_shape(const lv_layer *l, lv_shape in, lv_shape *out) {
  if (in.rank != 4 || in.d[3] != ((const lv_conv_layer *)l)->filter[2]) return false;
  *out = lv_conv_layer_out_shape((const lv_conv_layer *)l, in);
  return true;
}
static void conv_destroy(lv_layer *l) { lv_conv_layer_destroy((lv_conv_layer *)l); }

const lv_layer_class lv_conv_layer_class = {
    .cls = "ConvLayer",
    .params = lv_conv_layer_params,
    .size = sizeof(lv_conv_layer),
    .create = conv_create,
    .fprop = conv_fprop,
    .out_shape = conv_out_shape,
    .destroy = conv_destroy,
};
