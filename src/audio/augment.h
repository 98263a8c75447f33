/* Waveform augmentation for speech training (the perturbations of Kaldi's, ESPnet's and
 * icefall's recipes), applied by AsrInput to a record's samples before the frontend
 * (src/input/asr_input.c; the input.* params there):
 *
 *   1. speed perturbation (Kaldi's `sox speed`): one factor f of the list, drawn
 *      uniformly; the samples are read as if recorded at rate * f Hz and resampled to
 *      rate with libsoxr (tempo and pitch change together), so n samples become about
 *      n / f;
 *   2. reverberation: convolution with a synthetic room impulse response, a unit direct
 *      path then exponentially decaying Gaussian noise reaching -60 dB at RT60 seconds,
 *      RT60 uniform in a range; the tail carries rt60 / 0.1 s times the direct path's
 *      energy (a larger room is more reverberant), and the output is scaled back to the
 *      input's power. RT60 0 is the identity;
 *   3. additive noise, white, pink (Paul Kellet's filter) or brown (leaky integration), one
 *      colour drawn from the list, scaled to an SNR uniform in a range against the
 *      utterance's mean power (silence gets none);
 *   4. gain in dB, uniform in a range.
 * Steps 2-4 each happen with probability `prob`. Samples are in int16 range and are not
 * clipped afterwards.
 *
 * Deterministic: every draw comes from Philox streams of one 64-bit key (base/rng.h), one
 * stream per step, so the same key gives the same samples on every machine and thread, and
 * turning one step on or off does not change the others' draws. The caller picks the key
 * (AsrInput: the seed, the record's file, offset and epoch). */
#ifndef LV_AUDIO_AUGMENT_H
#define LV_AUDIO_AUGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/rng.h"
#include "base/status.h"

typedef enum { LV_NOISE_WHITE, LV_NOISE_PINK, LV_NOISE_BROWN, LV_NOISE_COUNT } lv_noise_color;
extern const char *const lv_noise_color_names[LV_NOISE_COUNT];

#define LV_AUGMENT_MAX_SPEEDS 16

typedef struct lv_augment_opts {
  int rate;                              /* Hz of the samples */
  int n_speeds;                          /* 0: no speed perturbation */
  double speeds[LV_AUGMENT_MAX_SPEEDS];  /* factors > 0 */
  bool reverb;
  double rt60[2];                        /* seconds, 0 <= lo <= hi <= 2 */
  bool noise;
  double snr_db[2];                      /* lo <= hi */
  int n_colors;                          /* >= 1 with noise */
  lv_noise_color colors[LV_NOISE_COUNT];
  bool gain;
  double gain_db[2];                     /* lo <= hi */
  double prob;                           /* of each of reverb, noise, gain; in [0, 1] */
} lv_augment_opts;

/* Whether any step is on (a speed list of only 1.0 counts as off). */
bool lv_augment_active(const lv_augment_opts *o);
/* Checks the options; errors name the param as input.<name>. */
lv_status lv_augment_check(const lv_augment_opts *o);

/* pcm [n] -> *out [*out_n] (malloc'd) with the draws of key. */
lv_status lv_augment_apply(const lv_augment_opts *o, uint64_t key, const float *pcm, int64_t n, float **out,
                           int64_t *out_n);

/* The steps, for tests and benchmarks. */
lv_status lv_augment_speed(const float *x, int64_t n, int rate, double factor, float **out, int64_t *out_n);
/* Zero-mean noise of the colour with mean square 1. */
void lv_augment_noise(lv_rng *r, lv_noise_color c, float *out, int64_t n);
/* x += noise scaled so that mean(x^2) / mean(scaled noise^2) is snr_db; no-op on silence. */
void lv_augment_add_noise(float *x, int64_t n, const float *noise, double snr_db);
/* The impulse response of RT60 rt60 at rate: *h [*m], malloc'd; rt60 0 gives [1]. */
lv_status lv_augment_rir(lv_rng *r, double rt60, int rate, float **h, int64_t *m);
/* y [n] = the first n samples of x [n] convolved with h [m] (FFTW); y may be x. */
lv_status lv_augment_convolve(const float *x, int64_t n, const float *h, int64_t m, float *y);
/* Mean square of x [n] (0 for n 0). */
double lv_augment_power(const float *x, int64_t n);

#endif
