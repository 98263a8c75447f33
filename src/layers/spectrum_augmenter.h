/* SpectrumAugmenter (Lingvo lingvo/core/spectrum_augmenter.py; reference/lingvo_asr_lm.md
 * §3): SpecAugment on a batch of features [B, T, F, C] with paddings [B, T], in Lingvo's
 * order: frequency warp, time warp, time masks, frequency masks. Paddings pass through
 * unchanged; the time warp and time masks stay inside each utterance's unpadded length
 * (sum of 1 - paddings, as Lingvo counts it).
 *
 * The random choices (mask sizes and starts, warp shifts and origins) are drawn on the host
 * from the Philox stream (layer seed, graph step): the same step of the same run draws the
 * same masks, so a run resumed from a checkpoint repeats an uninterrupted one bit for bit
 * (Lingvo's TF stateful RNG cannot be reproduced; §3.6). They become a [B, T, T] and a
 * [B, F, F] warp matrix and [B, T] / [B, F] 0/1 masks, applied on the graph's device with
 * batch matmuls and broadcast multiplies, so no kernel of its own is needed.
 *
 * Params with Lingvo's names and defaults. Not implemented (an error naming the key when
 * set): use_noise / gaussian_noise, freq_noise_max_stddev, block_mask_prob, unstack,
 * several domain_ids, use_input_dependent_random_seed. The layer has no variables; the
 * caller applies it in training only (AsrEncoder: use_specaugment and not eval). */
#ifndef LV_LAYERS_SPECTRUM_AUGMENTER_H
#define LV_LAYERS_SPECTRUM_AUGMENTER_H

#include "base/rng.h"
#include "layers/layer.h"

typedef struct lv_spectrum_augmenter {
  lv_layer base;
  int64_t freq_mask_max_bins, freq_mask_count;
  bool dynamic_time_mask;
  int64_t time_mask_max_frames, time_mask_count;
  double time_mask_max_ratio, time_masks_per_frame;
  int64_t freq_warp_max_bins;
  bool time_warp_dynamic; /* time_warp_bound == "dynamic" */
  int64_t time_warp_max_frames;
  double time_warp_max_ratio;
} lv_spectrum_augmenter;

extern const lv_layer_class lv_spectrum_augmenter_class;

lv_params *lv_spectrum_augmenter_params(void);
lv_status lv_spectrum_augmenter_create(lv_spectrum_augmenter *a, const lv_params *p, const char *parent_scope,
                                       lv_varstore *vs);
/* x [B, T, F, C], paddings [B, T] -> augmented x (x itself when nothing is configured).
 * NULL with the graph's error set on failure. */
lv_tensor *lv_spectrum_augmenter_fprop(lv_spectrum_augmenter *a, lv_graph *g, lv_tensor *x, lv_tensor *paddings);

/* ---- the host-side pieces (Lingvo's _GetMask, _GetWarpMatrix, _ConstructWarpMatrix) ---- */

/* mask [B, mask_size]: 0 where one of `multiplicity` masks of row b covers the position,
 * else 1. Per row, per mask k: size = int(maxlen * u1) with maxlen = max_length if > 0
 * else choose_range[b] * max_ratio; length = min(size, max(int(max_ratio * range), 1));
 * start = int(u2 * (range - length + 1)); with masks_per_frame > 0 mask k counts only if
 * k < masks_per_frame * range. Draws all u1 (row-major [B, multiplicity]) then all u2. */
void lv_specaug_mask(lv_rng *r, int64_t batch, const int64_t *choose_range, int64_t mask_size, int64_t max_length,
                     double masks_per_frame, int64_t multiplicity, double max_ratio, float *mask);
/* W [B, n, n] of the piecewise-linear map fixing 0 and choose_range[b] and moving
 * origin[b] to destination[b] (clipped to [1, range - 1]); rows with range < 2 are the
 * identity (Lingvo divides by zero there). out[i] = sum_j W[i][j] in[j]. */
void lv_specaug_construct_warp(int64_t batch, int64_t n, const float *origin, const float *destination,
                               const int64_t *choose_range, float *w);
/* Random warp matrices W [B, n, n]: shift uniform in [-max_warp, max_warp] when
 * max_warp > 0, else int(u * bound) with u in [-1, 1); bound = int(max_ratio * range);
 * shift clipped to +-bound; origin = int(u' * max(range - 2, 0)) + 1. Draws all shifts,
 * then all origins. */
void lv_specaug_warp_matrix(lv_rng *r, int64_t batch, const int64_t *choose_range, int64_t n, int64_t max_warp,
                            double max_ratio, float *w);

#endif
