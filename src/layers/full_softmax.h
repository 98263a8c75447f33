/* SimpleFullSoftmax (Lingvo layers.SimpleFullSoftmax): logits = x . w + b over a
 * vocabulary split into num_shards column shards, softmax cross-entropy against class
 * ids (optionally label-smoothed) or class probabilities, weighted per example.
 *
 * Variables as Lingvo shards them: weight_0 ... weight_{n-1} [input_dim, num_classes / n]
 * and bias_0 ... bias_{n-1} [num_classes / n] (n = num_shards must divide num_classes);
 * shard k holds classes [k * C/n, (k+1) * C/n) (the shards are concatenated along the
 * class axis, as Lingvo's DenseWeights does).
 *
 * Any input rank: x [..., input_dim], class_weights [...], class_ids int32 [...] (or
 * [..., 1] as Lingvo passes them), class_probabilities [..., num_classes]; the
 * per-example outputs have class_weights' shape.
 *
 * chunk_size > 0 with class ids: the loss goes through lv_op_projected_smoothed_xent,
 * which walks the classes in chunks of chunk_size columns and never holds the [N, C]
 * logits (a 32k vocabulary at batch x length 4k needs O(N * chunk) memory); `logits`
 * and `log_probs` are then not produced (NULL, absent from the generic fprop's map).
 * Lingvo's chunk_size chunks the rows instead; the outputs are the same.
 *
 * chunk_size 0 (Lingvo's default, "no chunks") chunks anyway by LV_SOFTMAX_AUTO_CHUNK
 * classes once num_classes >= LV_SOFTMAX_AUTO_CHUNK_MIN_CLASSES: with a 32k vocabulary the
 * dense path holds the logits, the softmax kept for the backward and the logits'
 * gradient, three [tokens, 32k] float tensors (1.5 GB at 4k tokens), where the chunked
 * one holds one [tokens, chunk]. The threshold keeps smaller vocabularies on the dense
 * path, whose sums run in another order, so their numerics stay what they were;
 * chunk_size -1 keeps the dense path (and its logits) at any size. */
#ifndef LV_LAYERS_FULL_SOFTMAX_H
#define LV_LAYERS_FULL_SOFTMAX_H

#include "layers/layer.h"
#include "layers/qdomain.h"

#define LV_SOFTMAX_AUTO_CHUNK_MIN_CLASSES 8192
#define LV_SOFTMAX_AUTO_CHUNK 2048

typedef struct lv_softmax_layer {
  lv_layer base;
  int64_t input_dim, num_classes;
  int num_shards;
  int64_t chunk_size; /* the param: > 0 chunk, 0 automatic, -1 never */
  lv_var **w, **b; /* [num_shards] each; b NULL without use_bias */
  /* p.qdomain: default, logits, weight. Quantized, the weights and biases go through
   * QWeight("weight") (each shard, then the whole, as Lingvo's _ConcatWeights and logits
   * helper), the inputs through QAct "inputs" and the logits through QAct "logits" (domain
   * "logits"); the xent then takes the dense logits, never the chunked path. */
  lv_qlayer q;
} lv_softmax_layer;

/* Lingvo's NestedMap of SimpleFullSoftmax.FProp (shapes for x [..., D] and weights [...]). */
typedef struct lv_xent_output {
  lv_tensor *logits;              /* [..., C]; NULL when chunked */
  lv_tensor *log_probs;           /* [..., C]; NULL when chunked */
  lv_tensor *per_example_argmax;  /* int32 [...] (no gradient) */
  lv_tensor *per_example_xent;    /* [...] unweighted cross-entropy */
  lv_tensor *per_example_weight;  /* [...] = class_weights */
  lv_tensor *total_xent;          /* scalar: sum(xent * weight) */
  lv_tensor *total_weight;        /* scalar: sum(weight) */
  lv_tensor *avg_xent;            /* scalar: total_xent / max(total_weight, 1e-6) */
} lv_xent_output;

lv_params *lv_softmax_layer_params(void);
lv_status lv_softmax_layer_create(lv_softmax_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs);
/* The full weight [input_dim, num_classes] and bias [num_classes] (NULL without bias):
 * the variables themselves for one shard, their concatenation otherwise. */
bool lv_softmax_layer_dense_weights(lv_softmax_layer *l, lv_graph *g, lv_tensor **w, lv_tensor **b);
/* The chunk fprop uses with class ids (0: the dense path), from chunk_size and num_classes. */
int64_t lv_softmax_layer_chunk(const lv_softmax_layer *l);
/* x [..., input_dim] -> logits [..., num_classes]. */
lv_tensor *lv_softmax_layer_logits(lv_softmax_layer *l, lv_graph *g, lv_tensor *x);
/* FProp(theta, inputs, class_weights, class_ids, class_probabilities) with exactly one of
 * class_ids and class_probs. label_smoothing u in [0, 1) applies to class ids only and
 * is Lingvo's UniformLabelSmoother (uncertainty = u): the target is 1 - u on the id and
 * u / (num_classes - 1) elsewhere, what MT's decoder passes as class_probabilities.
 * Returns false (graph error set) on failure. */
bool lv_softmax_layer_fprop(lv_softmax_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *class_weights,
                            lv_tensor *class_ids, lv_tensor *class_probs, float label_smoothing,
                            lv_xent_output *out);
/* The same without logits and log_probs (NULL, as chunked): for a caller that reads only
 * the losses and the argmax. The log-softmax is not computed, and in a training step
 * that gives memory back the [N, C] logits are not kept to the end of forward. */
bool lv_softmax_layer_fprop_loss(lv_softmax_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *class_weights,
                                 lv_tensor *class_ids, lv_tensor *class_probs, float label_smoothing,
                                 lv_xent_output *out);

/* UniformLabelSmoother (Lingvo layers.UniformLabelSmoother): class-probability targets
 * one_hot(labels, on = 1 - uncertainty, off = uncertainty / (num_classes - 1)), with
 * uncertainty_larger instead where target_ids == token_id_uncertainty_larger (when set).
 * A label outside [0, num_classes) gets the off value everywhere (tf.one_hot). The dense
 * [..., num_classes] targets exist for Lingvo's FProp; a softmax over a large vocabulary
 * should instead pass the uncertainty to lv_softmax_layer_fprop (lv_label_smoother_uniform)
 * and never build them. Generic fprop: "target_labels" (int32 [...]) and, when
 * token_id_uncertainty_larger is set, "target_ids" -> "act" [..., num_classes]. */
typedef struct lv_label_smoother {
  lv_layer base;
  int64_t num_classes;
  double uncertainty, uncertainty_larger;
  int64_t token_id_uncertainty_larger; /* -1 when None */
} lv_label_smoother;

lv_params *lv_label_smoother_params(void);
/* True (and *uncertainty set) when every token gets the same smoothing, i.e.
 * token_id_uncertainty_larger is None: then lv_softmax_layer_fprop(..., uncertainty)
 * computes the same loss as the class probabilities without materializing them. */
bool lv_label_smoother_uniform(const lv_label_smoother *l, float *uncertainty);
/* labels int32 [...], ids int32 [...] (NULL unless token_id_uncertainty_larger is set)
 * -> float32 [..., num_classes]. Reads the labels on the host (a sync point). */
lv_tensor *lv_label_smoother_fprop(lv_label_smoother *l, lv_graph *g, lv_tensor *labels, lv_tensor *ids);

/* Lingvo's fraction_of_correct_next_step_preds on the host: the weight of positions whose
 * argmax (xo->per_example_argmax) equals labels, over the total weight (*num) of weights
 * (labels int32 and weights float32, as many as the argmaxes). */
lv_status lv_softmax_next_step_accuracy(const lv_xent_output *xo, lv_tensor *labels, lv_tensor *weights, double *acc,
                                        double *num);

#endif
