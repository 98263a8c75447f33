/* ConvLayer (Lingvo Conv2DLayer): NHWC conv, SAME padding, optional bias, optional
 * batch norm, then activation. Variable w [h, w, in, out] (TF's HWIO). */
#ifndef LV_LAYERS_CONV_H
#define LV_LAYERS_CONV_H

#include "layers/batch_norm.h"
#include "layers/layer.h"

typedef struct lv_conv_layer {
  lv_layer base;
  int64_t filter[4], stride[2], dilation[2];
  lv_activation act;
  lv_var *w, *b;
  bool has_bn;
  lv_params *bn_params;
  lv_batch_norm_layer bn;
} lv_conv_layer;

lv_params *lv_conv_layer_params(void);
lv_status lv_conv_layer_create(lv_conv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs);
void lv_conv_layer_destroy(lv_conv_layer *l);
/* [N,H,W,in] -> [N,ceil(H/sh),ceil(W/sw),out]. */
lv_shape lv_conv_layer_out_shape(const lv_conv_layer *l, lv_shape in);
lv_tensor *lv_conv_layer_fprop(lv_conv_layer *l, lv_graph *g, lv_tensor *x);

#endif
