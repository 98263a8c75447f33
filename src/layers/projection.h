/* ProjectionLayer / FCLayer (Lingvo layers.ProjectionLayer, FCLayer = bias, no batch
 * norm): act(x . w + b). Variables w [input_dim, output_dim], b [output_dim]. */
#ifndef LV_LAYERS_PROJECTION_H
#define LV_LAYERS_PROJECTION_H

#include "layers/layer.h"

typedef struct lv_projection_layer {
  lv_layer base;
  int64_t input_dim, output_dim;
  lv_activation act;
  lv_var *w, *b;
} lv_projection_layer;

lv_params *lv_projection_layer_params(void);
lv_params *lv_fc_layer_params(void);
lv_status lv_projection_layer_create(lv_projection_layer *l, const lv_params *p, const char *parent_scope,
                                     lv_varstore *vs);
/* [..., input_dim] -> [..., output_dim]. */
lv_tensor *lv_projection_layer_fprop(lv_projection_layer *l, lv_graph *g, lv_tensor *x);

#endif
