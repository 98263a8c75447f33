/* SimpleFullSoftmax (Lingvo layers.SimpleFullSoftmax, one shard): logits = x . w + b,
 * softmax cross-entropy against class ids or class probabilities, weighted per example.
 * Variables weight_0 [input_dim, num_classes], bias_0 [num_classes]. */
#ifndef LV_LAYERS_SOFTMAX_H
#define LV_LAYERS_SOFTMAX_H

#include "layers/layer.h"

typedef struct lv_softmax_layer {
  lv_layer base;
  int64_t input_dim, num_classes;
  lv_var *w, *b;
} lv_softmax_layer;

/* Lingvo's NestedMap of SimpleFullSoftmax.FProp. */
typedef struct lv_xent_output {
  lv_tensor *logits;              /* [B, C] */
  lv_tensor *per_example_xent;    /* [B] */
  lv_tensor *per_example_weight;  /* [B] */
  lv_tensor *total_xent;          /* scalar: sum(xent * weight) */
  lv_tensor *total_weight;        /* scalar: sum(weight) */
  lv_tensor *avg_xent;            /* scalar: total_xent / max(total_weight, 1e-6) */
} lv_xent_output;

lv_params *lv_softmax_layer_params(void);
lv_status lv_softmax_layer_create(lv_softmax_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs);
lv_tensor *lv_softmax_layer_logits(lv_softmax_layer *l, lv_graph *g, lv_tensor *x);
/* x [B, input_dim], class_weights [B] float32, exactly one of class_ids (int32 [B]) and
 * class_probs ([B, C]). Returns false (graph error set) on failure. */
bool lv_softmax_layer_fprop(lv_softmax_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *class_weights,
                            lv_tensor *class_ids, lv_tensor *class_probs, lv_xent_output *out);

#endif
