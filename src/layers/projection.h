/* ProjectionLayer / FCLayer (Lingvo layers.ProjectionLayer, FCLayer = bias, no batch
 * norm): act(bn(x . w + b)), or with affine_last act(bn(x)) . w + b. Variables
 * w [input_dim, output_dim], b [output_dim]; with batch_norm the BatchNormLayer (made
 * from bn_params, named as the projection, as Lingvo does) puts beta, gamma,
 * moving_mean and moving_variance in the projection's own scope ("proj/beta/var").
 * Paddings (float32, 1.0 = padded, one value per row: [...] or [..., 1]) make the batch
 * norm moments skip padded rows and zero the padded outputs.
 * Quantization (p.qdomain: default, weight): w through QWeight(domain "weight"), the
 * output through QAct "activation" ("affine_matmul" without an activation), the
 * pre-activation through QAct "affine_matmul" for an activation other than RELU / RELU6
 * (TFLite's fused ones), paddings through QRAct PADDING, as Lingvo's FProp. */
#ifndef LV_LAYERS_PROJECTION_H
#define LV_LAYERS_PROJECTION_H

#include "layers/batch_norm.h"
#include "layers/layer.h"
#include "layers/qdomain.h"

typedef struct lv_projection_layer {
  lv_layer base;
  int64_t input_dim, output_dim;
  lv_activation act;
  lv_var *w, *b;
  bool has_bn, affine_last;
  lv_params *bn_params; /* owned: bn_params with name and dim set */
  lv_batch_norm_layer bn;
  lv_qlayer q;
  const char *out_qact, *pre_qact; /* pre_qact NULL: a fused activation */
} lv_projection_layer;

lv_params *lv_projection_layer_params(void);
lv_params *lv_fc_layer_params(void);
lv_status lv_projection_layer_create(lv_projection_layer *l, const lv_params *p, const char *parent_scope,
                                     lv_varstore *vs);
/* [..., input_dim] -> [..., output_dim]. */
lv_tensor *lv_projection_layer_fprop(lv_projection_layer *l, lv_graph *g, lv_tensor *x);
/* The same with paddings (NULL = none) of one value per row of x. */
lv_tensor *lv_projection_layer_fprop_padded(lv_projection_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings);
void lv_projection_layer_destroy(lv_projection_layer *l);

#endif
