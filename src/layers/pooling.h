/* PoolingLayer (Lingvo layers.PoolingLayer): max or average pooling over H and W. */
#ifndef LV_LAYERS_POOLING_H
#define LV_LAYERS_POOLING_H

#include "layers/layer.h"

typedef struct lv_pooling_layer {
  lv_layer base;
  int64_t window[2], stride[2];
  bool is_max;
  lv_padding pad;
} lv_pooling_layer;

lv_params *lv_pooling_layer_params(void);
lv_status lv_pooling_layer_create(lv_pooling_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs);
lv_shape lv_pooling_layer_out_shape(const lv_pooling_layer *l, lv_shape in);
lv_tensor *lv_pooling_layer_fprop(lv_pooling_layer *l, lv_graph *g, lv_tensor *x);

#endif
