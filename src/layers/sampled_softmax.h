/* Sampled softmax for training over a large vocabulary: Lingvo's SimpleFullSoftmax with
 * num_sampled > 0, which calls tf.nn.sampled_softmax_loss with its defaults:
 *
 *   - candidates: TF's log_uniform_candidate_sampler (unique, range_max = num_classes):
 *     P(c) = log((c + 2) / (c + 1)) / log(num_classes + 1), drawn as
 *     floor(exp(u * log(num_classes + 1))) - 1, rejecting repeats until num_sampled
 *     distinct classes are drawn (num_tries draws), one set per batch;
 *   - expected counts as TF's RangeSampler: p * num_sampled when no draw was rejected,
 *     else 1 - (1 - p)^num_tries;
 *   - logits [N, 1 + S]: the true class's, then the S sampled classes', each minus the log
 *     of its expected count (subtract_log_q); remove_accidental_hits: a sampled class
 *     equal to a row's label gets -FLT_MAX in that row (no gradient);
 *   - per-example loss: softmax cross-entropy with the true class at column 0.
 *
 * The layer's variables stay SimpleFullSoftmax's (full_softmax.h: weight_k [input_dim,
 * num_classes / n], class axis split into shards). Lingvo stores them transposed
 * ([num_classes / n, input_dim]) when num_sampled > 0; a lingvoc checkpoint of a sampled
 * model therefore keeps the full-softmax layout, and evaluation (the full softmax, as
 * Lingvo's eval) reads the same variables. The random draws come from lingvoc's Philox
 * generator, keyed by the layer's seed and the graph's step stream, so a resumed run
 * draws what an uninterrupted one does; they are not TF's draws. The loss gathers only the
 * N + S classes' columns of each shard and adds its gradient into those columns
 * (lv_op_gather_cols), with no transposed copy of the table (one_billion_wds: 793k x
 * 1024 floats, 3 GB); per-step weight noise, when on, still perturbs the whole table, as
 * Lingvo's _ConcatWeights does.
 *
 * Ownership: nothing here is allocated beyond the step's graph tensors. */
#ifndef LV_LAYERS_SAMPLED_SOFTMAX_H
#define LV_LAYERS_SAMPLED_SOFTMAX_H

#include "base/rng.h"
#include "layers/full_softmax.h"

/* Log-uniform (Zipfian) probability of class c in [0, range). */
double lv_log_uniform_prob(int64_t range, int64_t c);
/* TF's unique log-uniform draw: num_sampled distinct classes of [0, range) into out
 * (num_sampled <= range), *num_tries = draws taken (>= num_sampled). */
void lv_log_uniform_sample(lv_rng *r, int64_t range, int64_t num_sampled, int64_t *out, int64_t *num_tries);
/* TF's ExpectedCountHelper: the expected count of a class of probability p among
 * num_sampled unique draws that took num_tries tries. */
double lv_sampled_expected_count(double p, int64_t num_sampled, int64_t num_tries);

/* The sampled-softmax FProp of SimpleFullSoftmax (training): x [..., input_dim],
 * class_weights [...], class_ids int32 [...] (or [..., 1]); num_sampled in
 * [1, num_classes]. Fills per_example_xent (the sampled loss), per_example_argmax
 * (= class_ids, as Lingvo: no logits are computed), per_example_weight, total_xent,
 * total_weight, avg_xent; logits and log_probs are NULL. Reads the class ids on the host
 * (a sync point). False with the graph's error set on failure. */
bool lv_sampled_softmax_fprop(lv_softmax_layer *l, lv_graph *g, int64_t num_sampled, lv_tensor *x,
                              lv_tensor *class_weights, lv_tensor *class_ids, lv_xent_output *out);

#endif
