/* ConvLayer (Lingvo Conv2DLayer, core/conv_layers_with_time_padding.py): NHWC conv,
 * SAME padding, optional bias, optional batch norm, then activation. Variable
 * w [h, w, in, out] (TF's HWIO); with batch_norm the BatchNormLayer (made from the conv's
 * params, named as the conv, as Lingvo does) puts beta, gamma, moving_mean and
 * moving_variance in the conv's own scope ("conv_L0/beta/var").
 *
 * With time paddings ([N, H], H the time axis, 1.0 = padded) the layer is Lingvo's
 * speech conv: padded input frames are zeroed, the output paddings are the input's
 * right-padded with 1 to a multiple of the time stride and max-pooled with window =
 * stride (ComputeConvOutputPadding, the "V1" Lingvo's ConvLayer uses), the batch norm's
 * moments skip padded output frames, and padded output frames are zeroed after the
 * activation.
 *
 * Quantization (p.qdomain.default): w through QWeight, the output through QAct
 * "activation" (after the activation), the pre-activation through QAct "pre_activation"
 * for an activation other than NONE, RELU, RELU6, and the paddings through QRAct PADDING,
 * as Lingvo's Conv2DLayer; batch norm with a qdomain is an error (Lingvo folds it into the
 * weights, lingvoc does not yet). */
#ifndef LV_LAYERS_CONV_H
#define LV_LAYERS_CONV_H

#include "layers/batch_norm.h"
#include "layers/layer.h"
#include "layers/qdomain.h"

typedef struct lv_conv_layer {
  lv_layer base;
  int64_t filter[4], stride[2], dilation[2];
  lv_activation act;
  lv_var *w, *b;
  bool has_bn;
  lv_params *bn_params;
  lv_batch_norm_layer bn;
  lv_qlayer q;
} lv_conv_layer;

lv_params *lv_conv_layer_params(void);
lv_status lv_conv_layer_create(lv_conv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs);
void lv_conv_layer_destroy(lv_conv_layer *l);
/* [N,H,W,in] -> [N,ceil(H/sh),ceil(W/sw),out]. */
lv_shape lv_conv_layer_out_shape(const lv_conv_layer *l, lv_shape in);
lv_tensor *lv_conv_layer_fprop(lv_conv_layer *l, lv_graph *g, lv_tensor *x);
/* The same without the activation (conv, bias, batch norm): for a caller that applies it
 * later, e.g. after a max pool, with which a ReLU commutes. Not for a quantized layer
 * (lv_qlayer_on(&l->q)), whose activation's range is tracked after the activation. */
lv_tensor *lv_conv_layer_fprop_preact(lv_conv_layer *l, lv_graph *g, lv_tensor *x);
/* x [N,H,W,in] with paddings [N,H] (NULL: lv_conv_layer_fprop) -> [N,H',W',out] and, when
 * out_paddings is not NULL, *out_paddings [N,H'] (H' = ceil(H / stride_h)). */
lv_tensor *lv_conv_layer_fprop_padded(lv_conv_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings,
                                      lv_tensor **out_paddings);
/* Lingvo's ComputeConvOutputPadding for a time stride: paddings [N,H] -> [N,ceil(H/stride)]. */
lv_tensor *lv_conv_output_paddings(lv_graph *g, lv_tensor *paddings, int stride);

#endif
