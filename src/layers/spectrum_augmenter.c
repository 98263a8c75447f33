/* SpectrumAugmenter: see spectrum_augmenter.h. The arithmetic of masks and warps is in
 * float32 as Lingvo's TF ops do it, so sizes and starts truncate alike. */
#include "layers/spectrum_augmenter.h"

#include <stdlib.h>
#include <string.h>

#include "layers/owner.h"

/* One Philox stream per augmentation: enabling one leaves the others' draws unchanged. */
enum { kTagFreqWarp = 0x5a01, kTagTimeWarp = 0x5a02, kTagTimeMask = 0x5a03, kTagFreqMask = 0x5a04 };

lv_params *lv_spectrum_augmenter_params(void) {
  lv_params *p = lv_layer_base_params("SpectrumAugmenter");
  LV_ASSERT(!lv_params_set_string(p, "name", "specaugment"));
  lv_params_define_int(p, "freq_mask_max_bins", 15, "Maximum number of frequency bins of frequency masking.");
  lv_params_define_int(p, "freq_mask_count", 1, "Number of times we apply masking on the frequency axis.");
  lv_params_define_bool(p, "use_dynamic_time_mask_max_frames", false, "If true, time_mask_max_frames is determined "
                        "by time_mask_max_ratio * utterance_length.");
  lv_params_define_int(p, "time_mask_max_frames", 50, "Maximum number of frames of time masking. Overridden when "
                       "use_dynamic_time_mask_max_frames = True.");
  lv_params_define_int(p, "time_mask_count", 1, "Number of times we apply masking on the time axis. Acts as "
                       "upper-bound when time_masks_per_frame > 0.");
  lv_params_define_float(p, "time_mask_max_ratio", 1.0, "Maximum portion allowed for time masking.");
  lv_params_define_float(p, "time_masks_per_frame", 0.0, "Ratio of number of time masks to be applied against the "
                         "number of frames. If > 0, multiplicity of the time mask is determined by "
                         "min(time_masks_per_frame * utterance_length, time_mask_count).");
  lv_params_define_float(p, "block_mask_prob", 0.0, "Probability of a block being masked (not implemented in "
                         "lingvoc: 0 only).");
  lv_params_define_int(p, "freq_warp_max_bins", 0, "Maximum number of frequency bins for shifting in frequency "
                       "warping.");
  lv_params_define_string(p, "time_warp_bound", "static", "To be set to either `dynamic` or `static`. If `dynamic`, "
                          "time warp bound is determined by time_warp_max_ratio * utterance_length. If `static`, "
                          "time warp bound is determined by min(time_warp_max_frames, time_warp_max_ratio * "
                          "utterance_length).");
  lv_params_define_int(p, "time_warp_max_frames", 0, "Maximum number of frames for shifting in time warping.");
  lv_params_define_float(p, "time_warp_max_ratio", 0.0, "Maximum portion of frames for shifting in time warping.");
  lv_params_define_bool(p, "use_noise", false, "Whether to noisify the time masked region (not implemented in "
                        "lingvoc).");
  lv_params_define_bool(p, "gaussian_noise", false, "Use Gaussian distribution for noise (not implemented in "
                        "lingvoc).");
  lv_params_define_float(p, "freq_noise_max_stddev", 0.0, "Maximum stddev of the multiplicative frequency noise (not "
                         "implemented in lingvoc: 0 only).");
  lv_params_define_int(p, "freq_noise_warmup_steps", 0, "Steps over which the frequency noise ramps up.");
  lv_params_define_bool(p, "unstack", false, "Whether to unstack features before applying SpecAugment (not "
                        "implemented in lingvoc).");
  lv_params_define_int(p, "stack_height", 3, "Number of frames stacked on top of each other.");
  int64_t dom0 = 0;
  lv_params_define_list(p, "domain_ids", lv_pvalue_ints(1, &dom0), "If domain ids was given, this parameters "
                        "describe which domain will be augmented (lingvoc: one domain only).");
  lv_params_define_bool(p, "use_input_dependent_random_seed", false, "Whether to use stateless random ops with "
                        "seeds determined by the input features (not implemented in lingvoc).");
  return p;
}

static lv_status unsupported(const lv_spectrum_augmenter *a, const char *key, const char *what) {
  return lv_status_make(LV_ERR_INVALID, "%s (SpectrumAugmenter): %s is not implemented in lingvoc; %s", a->base.scope,
                        key, what);
}

lv_status lv_spectrum_augmenter_create(lv_spectrum_augmenter *a, const lv_params *p, const char *parent_scope,
                                       lv_varstore *vs) {
  LV_TRY(lv_layer_setup(&a->base, p, parent_scope, vs));
  if (lv_params_bool(p, "use_noise") || lv_params_bool(p, "gaussian_noise"))
    return unsupported(a, "use_noise / gaussian_noise", "set False");
  if (lv_params_float(p, "freq_noise_max_stddev") != 0.0) return unsupported(a, "freq_noise_max_stddev", "set 0");
  if (lv_params_float(p, "block_mask_prob") != 0.0) return unsupported(a, "block_mask_prob", "set 0");
  if (lv_params_bool(p, "unstack")) return unsupported(a, "unstack", "set False");
  if (lv_params_bool(p, "use_input_dependent_random_seed"))
    return unsupported(a, "use_input_dependent_random_seed", "set False");
  if (lv_pvalue_len(lv_params_list(p, "domain_ids")) != 1)
    return unsupported(a, "more than one of domain_ids", "give one domain");
  char k[LV_VAR_NAME_MAX + 40];
#define INT_KEY(field, key, hi)                                       \
  a->field = lv_params_int(p, key);                                   \
  snprintf(k, sizeof k, "%s.%s", a->base.scope, key);                 \
  LV_TRY(lv_check_int_range(k, a->field, 0, hi));
  INT_KEY(freq_mask_max_bins, "freq_mask_max_bins", 1 << 20)
  INT_KEY(freq_mask_count, "freq_mask_count", 1 << 10)
  INT_KEY(time_mask_max_frames, "time_mask_max_frames", 1 << 24)
  INT_KEY(time_mask_count, "time_mask_count", 1 << 10)
  INT_KEY(freq_warp_max_bins, "freq_warp_max_bins", 1 << 20)
  INT_KEY(time_warp_max_frames, "time_warp_max_frames", 1 << 24)
#undef INT_KEY
  a->dynamic_time_mask = lv_params_bool(p, "use_dynamic_time_mask_max_frames");
  a->time_mask_max_ratio = lv_params_float(p, "time_mask_max_ratio");
  a->time_masks_per_frame = lv_params_float(p, "time_masks_per_frame");
  a->time_warp_max_ratio = lv_params_float(p, "time_warp_max_ratio");
  const char *bound = lv_params_str(p, "time_warp_bound");
  if (strcmp(bound, "static") && strcmp(bound, "dynamic"))
    return lv_status_make(LV_ERR_INVALID, "%s.time_warp_bound must be \"static\" or \"dynamic\", got \"%s\"",
                          a->base.scope, bound);
  a->time_warp_dynamic = !strcmp(bound, "dynamic");
  return NULL;
}

/* ---- host pieces ---- */

void lv_specaug_mask(lv_rng *r, int64_t batch, const int64_t *choose_range, int64_t mask_size, int64_t max_length,
                     double masks_per_frame, int64_t multiplicity, double max_ratio, float *mask) {
  const int64_t n = batch * multiplicity;
  int32_t *size = malloc(sizeof *size * (size_t)(n ? n : 1));
  LV_ASSERT(size);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t k = 0; k < multiplicity; k++) {
      float maxlen = max_length > 0 ? (float)max_length : (float)choose_range[b] * (float)max_ratio;
      size[b * multiplicity + k] = (int32_t)(maxlen * lv_rng_uniform(r));
    }
  for (int64_t i = 0; i < batch * mask_size; i++) mask[i] = 1.0f;
  for (int64_t b = 0; b < batch; b++)
    for (int64_t k = 0; k < multiplicity; k++) {
      const int32_t range = (int32_t)choose_range[b];
      const int32_t bound = (int32_t)((float)max_ratio * (float)range);
      int32_t length = size[b * multiplicity + k];
      if (length > (bound > 1 ? bound : 1)) length = bound > 1 ? bound : 1;
      const int32_t start = (int32_t)(lv_rng_uniform(r) * (float)(range - length + 1));
      if (masks_per_frame > 0 && !((float)k < (float)masks_per_frame * (float)range)) continue;
      for (int64_t i = start; i < (int64_t)start + length && i < mask_size; i++)
        if (i >= 0) mask[b * mask_size + i] = 0.0f;
    }
  free(size);
}

static float relu(float x) { return x > 0.0f ? x : 0.0f; }
static float hat(float x) { return relu(x + 1.0f) - 2.0f * relu(x) + relu(x - 1.0f); }

void lv_specaug_construct_warp(int64_t batch, int64_t n, const float *origin, const float *destination,
                               const int64_t *choose_range, float *w) {
  for (int64_t b = 0; b < batch; b++) {
    float *wb = w + b * n * n;
    const float L = (float)choose_range[b];
    if (choose_range[b] < 2) {
      memset(wb, 0, sizeof *wb * (size_t)(n * n));
      for (int64_t i = 0; i < n; i++) wb[i * n + i] = 1.0f;
      continue;
    }
    float d = destination[b] > 1.0f ? destination[b] : 1.0f;
    if (d > L - 1.0f) d = L - 1.0f;
    const float s0 = origin[b] / d, s1 = (L - origin[b]) / (L - d), s2 = 1.0f;
    for (int64_t i = 0; i < n; i++) {
      const float fi = (float)i;
      const float x = s0 * fi + (s1 - s0) * relu(fi - d) + (s2 - s1) * relu(fi - L);
      for (int64_t j = 0; j < n; j++) wb[i * n + j] = hat(x - (float)j);
    }
  }
}

void lv_specaug_warp_matrix(lv_rng *r, int64_t batch, const int64_t *choose_range, int64_t n, int64_t max_warp,
                            double max_ratio, float *w) {
  float *origin = malloc(sizeof(float) * 2 * (size_t)(batch ? batch : 1)), *dest = origin + batch;
  int32_t *shift = malloc(sizeof *shift * (size_t)(batch ? batch : 1));
  LV_ASSERT(origin && shift);
  for (int64_t b = 0; b < batch; b++) {
    const int32_t bound = (int32_t)((float)max_ratio * (float)choose_range[b]);
    int32_t s = max_warp > 0 ? (int32_t)lv_rng_below(r, (uint64_t)(2 * max_warp + 1)) - (int32_t)max_warp
                             : (int32_t)((2.0f * lv_rng_uniform(r) - 1.0f) * (float)bound);
    shift[b] = s < -bound ? -bound : s > bound ? bound : s;
  }
  for (int64_t b = 0; b < batch; b++) {
    const int64_t mid = choose_range[b] - 2 > 0 ? choose_range[b] - 2 : 0;
    const int32_t o = (int32_t)(lv_rng_uniform(r) * (float)mid) + 1;
    origin[b] = (float)o;
    dest[b] = (float)(o + shift[b]);
  }
  lv_specaug_construct_warp(batch, n, origin, dest, choose_range, w);
  free(origin);
  free(shift);
}

/* ---- graph ---- */

static lv_tensor *upload(lv_graph *g, lv_shape s, const float *host) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, s);
  if (!t) return NULL;
  lv_status st = lv_tensor_from_host(t, host);
  if (st) {
    lv_graph_fail(g, "SpectrumAugmenter: copying its masks to the device: %s", lv_status_msg(st));
    lv_status_free(st);
    return NULL;
  }
  return t;
}

static float *host_buf(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  LV_ASSERT(p);
  return p;
}

/* out[b, t, z, c] = sum_y x[b, t, y, c] W[b, z, y]. */
static lv_tensor *apply_freq_warp(lv_graph *g, lv_tensor *x, lv_tensor *w) {
  const int64_t B = x->shape.d[0], T = x->shape.d[1], F = x->shape.d[2], C = x->shape.d[3];
  static const int perm[4] = {0, 1, 3, 2};
  lv_tensor *y = C == 1 ? x : lv_op_transpose(g, x, perm); /* [B, T, C, F] */
  y = y ? lv_op_reshape(g, y, lv_shape3(B, T * C, F)) : NULL;
  y = y ? lv_op_batch_matmul(g, y, w, false, true) : NULL;
  y = y ? lv_op_reshape(g, y, lv_shape4(B, T, C, F)) : NULL;
  if (y && C > 1) y = lv_op_transpose(g, y, perm);
  return y ? lv_op_reshape(g, y, x->shape) : NULL;
}

lv_tensor *lv_spectrum_augmenter_fprop(lv_spectrum_augmenter *a, lv_graph *g, lv_tensor *x, lv_tensor *paddings) {
  if (!x || !paddings) return NULL;
  if (x->shape.rank != 4 || paddings->shape.rank != 2 || paddings->shape.d[0] != x->shape.d[0] ||
      paddings->shape.d[1] != x->shape.d[1] || paddings->dtype != LV_F32) {
    char s1[96], s2[96];
    lv_graph_fail(g, "%s (SpectrumAugmenter): expected inputs [B, T, F, C] and float paddings [B, T], got %s and %s",
                  a->base.scope, lv_shape_str(&x->shape, s1, sizeof s1), lv_shape_str(&paddings->shape, s2, sizeof s2));
    return NULL;
  }
  const int64_t B = x->shape.d[0], T = x->shape.d[1], F = x->shape.d[2], C = x->shape.d[3];
  const bool fwarp = a->freq_warp_max_bins > 0;
  const bool twarp = !((a->time_warp_max_frames == 0 && !a->time_warp_dynamic) || a->time_warp_max_ratio <= 0.0);
  const bool tmask = !((a->time_mask_max_frames == 0 && !a->dynamic_time_mask) || a->time_mask_max_ratio <= 0.0 ||
                       a->time_mask_count == 0);
  const bool fmask = a->freq_mask_max_bins > 0 && a->freq_mask_count > 0;
  if (!fwarp && !twarp && !tmask && !fmask) return x;
  int64_t *len = malloc(sizeof *len * 2 * (size_t)B), *franges = len + B;
  float *pads = host_buf(B * T);
  LV_ASSERT(len);
  lv_status st = lv_tensor_to_host(paddings, pads);
  if (st) {
    lv_graph_fail(g, "%s (SpectrumAugmenter): reading the paddings: %s", a->base.scope, lv_status_msg(st));
    lv_status_free(st);
    free(len);
    free(pads);
    return NULL;
  }
  /* Lingvo: lengths = reduce_sum(1 - paddings, 1). */
  for (int64_t b = 0; b < B; b++) {
    float s = 0;
    for (int64_t t = 0; t < T; t++) s += 1.0f - pads[b * T + t];
    len[b] = (int64_t)s;
    franges[b] = F;
  }
  free(pads);
  const uint64_t step = (uint64_t)lv_graph_step(g);
  lv_rng r;
  if (x && fwarp) {
    float *w = host_buf(B * F * F);
    lv_rng_init(&r, lv_rng_mix(a->base.seed, kTagFreqWarp), step);
    lv_specaug_warp_matrix(&r, B, franges, F, a->freq_warp_max_bins, 1.0, w);
    lv_tensor *wt = upload(g, lv_shape3(B, F, F), w);
    free(w);
    x = wt ? apply_freq_warp(g, x, wt) : NULL;
  }
  if (x && twarp) {
    float *w = host_buf(B * T * T);
    lv_rng_init(&r, lv_rng_mix(a->base.seed, kTagTimeWarp), step);
    lv_specaug_warp_matrix(&r, B, len, T, a->time_warp_dynamic ? 0 : a->time_warp_max_frames, a->time_warp_max_ratio,
                           w);
    lv_tensor *wt = upload(g, lv_shape3(B, T, T), w);
    free(w);
    lv_tensor *y = wt ? lv_op_reshape(g, x, lv_shape3(B, T, F * C)) : NULL;
    y = y ? lv_op_batch_matmul(g, wt, y, false, false) : NULL;
    x = y ? lv_op_reshape(g, y, lv_shape4(B, T, F, C)) : NULL;
  }
  if (x && tmask) {
    float *m = host_buf(B * T);
    lv_rng_init(&r, lv_rng_mix(a->base.seed, kTagTimeMask), step);
    lv_specaug_mask(&r, B, len, T, a->dynamic_time_mask ? 0 : a->time_mask_max_frames, a->time_masks_per_frame,
                    a->time_mask_count, a->time_mask_max_ratio, m);
    lv_tensor *mt = upload(g, lv_shape4(B, T, 1, 1), m);
    free(m);
    x = mt ? lv_op_mul(g, x, mt) : NULL;
  }
  if (x && fmask) {
    float *m = host_buf(B * F);
    lv_rng_init(&r, lv_rng_mix(a->base.seed, kTagFreqMask), step);
    lv_specaug_mask(&r, B, franges, F, a->freq_mask_max_bins, 0.0, a->freq_mask_count, 1.0, m);
    lv_tensor *mt = upload(g, lv_shape4(B, 1, F, 1), m);
    free(m);
    x = mt ? lv_op_mul(g, x, mt) : NULL;
  }
  free(len);
  return x;
}

/* ---- layer class ---- */

static lv_status sa_create(lv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  return lv_spectrum_augmenter_create((lv_spectrum_augmenter *)l, p, parent_scope, vs);
}

static bool sa_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  return lv_layer_set_out(l, g, out, "act",
                          lv_spectrum_augmenter_fprop((lv_spectrum_augmenter *)l, g, lv_layer_in(l, g, in, "act"),
                                                      lv_layer_in(l, g, in, "paddings")));
}

const lv_layer_class lv_spectrum_augmenter_class = {
    .cls = "SpectrumAugmenter",
    .params = lv_spectrum_augmenter_params,
    .size = sizeof(lv_spectrum_augmenter),
    .create = sa_create,
    .fprop = sa_fprop,
};
