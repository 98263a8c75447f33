/* LayerNorm (Lingvo layers.LayerNorm): over the last dim,
 *   out = (x - mean) / sqrt(var + epsilon) * (1 + scale) + bias
 * with variables `scale` [input_dim] (init 0; with direct_scale=True the factor is
 * `scale` itself, init 1) and `bias` [input_dim] (init 0; absent when bias=False).
 * Fprop reads "act" [..., input_dim] and writes "act". */
#ifndef LV_LAYERS_LAYER_NORM_H
#define LV_LAYERS_LAYER_NORM_H

#include "layers/layer.h"

typedef struct lv_layer_norm_layer {
  lv_layer base;
  int64_t input_dim;
  float epsilon;
  bool direct_scale;
  lv_var *scale, *bias; /* bias NULL when p.bias is False */
} lv_layer_norm_layer;

lv_params *lv_layer_norm_layer_params(void);
lv_status lv_layer_norm_layer_create(lv_layer_norm_layer *l, const lv_params *p, const char *parent_scope,
                                     lv_varstore *vs);
/* [..., input_dim] -> [..., input_dim]; NULL (graph error naming the layer) on a wrong
 * last dim. */
lv_tensor *lv_layer_norm_layer_fprop(lv_layer_norm_layer *l, lv_graph *g, lv_tensor *x);

#endif
