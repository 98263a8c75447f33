/* BatchNormLayer (Lingvo bn_layers.BatchNormLayer): normalizes over every axis but the
 * last. Training uses batch statistics and updates the moving ones; eval uses the
 * moving statistics. Variables beta, gamma (applied as 1 + gamma, both zero-initialized,
 * as Lingvo does), moving_mean, moving_variance (not trainable). With paddings the
 * batch moments are taken over the non-padded rows only and padded outputs are zeroed
 * (set_padded_output_to_zero), as Lingvo's padding-aware BatchNormLayer does. Both paths
 * run one fused op each way (lv_op_batch_norm). */
#ifndef LV_LAYERS_BATCH_NORM_H
#define LV_LAYERS_BATCH_NORM_H

#include "layers/layer.h"

typedef struct lv_batch_norm_layer {
  lv_layer base;
  int64_t dim;
  double decay, epsilon;
  bool set_padded_output_to_zero;
  lv_var *beta, *gamma, *moving_mean, *moving_variance;
} lv_batch_norm_layer;

lv_params *lv_batch_norm_layer_params(void);
lv_status lv_batch_norm_layer_create(lv_batch_norm_layer *l, const lv_params *p, const char *parent_scope,
                                     lv_varstore *vs);
/* x [..., dim] -> same shape. */
lv_tensor *lv_batch_norm_layer_fprop(lv_batch_norm_layer *l, lv_graph *g, lv_tensor *x);
/* x [..., dim] with paddings (float32, 1.0 = padded) of one value per row: [...] or
 * [..., 1]; NULL paddings is lv_batch_norm_layer_fprop. */
lv_tensor *lv_batch_norm_layer_fprop_padded(lv_batch_norm_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings);

#endif
