/* Lingvo's MelAsrFrontend (lingvo/tasks/asr/frontend.py; reference/lingvo_asr_lm.md §2):
 * PCM in int16 range -> log-mel frames, optionally stacked and subsampled.
 *
 * Per frame of frame_size = round(sr * frame_size_ms / 1000) + 1 samples, every
 * frame_step = round(sr * frame_step_ms / 1000) samples (tf.signal.frame; Python's round,
 * halves to even): pre-emphasis inside the frame (y[n] = f[n+1] - preemph * f[n],
 * frame_size - 1 samples), Gaussian
 * dither of stddev noise_scale, TF's periodic Hann window, |rfft| (FFTW, fft_size =
 * max(512, next power of two of frame_size - 1), doubled by fft_overdrive), TF's HTK mel
 * matrix (linear_to_mel_weight_matrix), ln(max(output_floor, mel)), (x - mean) / stddev;
 * then, when a left or right context is set, stacking of S = left + right + 1 frames
 * (edges repeated) every frame_stride frames. A mel frame is padded if any of its
 * samples is.
 *
 * A frontend owns its FFTW plan, buffers and dither generator: one per thread. Its
 * options are copied at creation (per_bin_mean / per_bin_stddev too). */
#ifndef LV_AUDIO_MEL_FRONTEND_H
#define LV_AUDIO_MEL_FRONTEND_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef struct lv_mel_frontend_opts {
  double sample_rate;      /* Hz */
  double frame_size_ms;    /* analysis window */
  double frame_step_ms;    /* hop */
  int num_bins;            /* mel bins */
  double lower_edge_hertz; /* of the lowest mel triangle */
  double upper_edge_hertz; /* of the highest */
  double preemph;          /* 0 turns pre-emphasis off */
  double noise_scale;      /* dither stddev in int16 LSB units; 0 = none */
  bool hann_window;        /* Lingvo's window_fn 'HANNING'; false = None */
  bool pad_end;            /* tf.signal.frame pad_end: zero samples complete the last frame */
  const float *per_bin_mean;   /* [num_bins], NULL = zeros */
  const float *per_bin_stddev; /* [num_bins], NULL = ones */
  int stack_left_context;
  int stack_right_context;
  int frame_stride;   /* subsampling after stacking; ignored without a context */
  bool fft_overdrive; /* twice the minimum FFT size */
  double output_floor;
  bool compute_energy;    /* |X|^2 instead of |X| */
  bool use_divide_stream; /* PCM / 32768 first */
  uint64_t random_seed;   /* of the dither */
} lv_mel_frontend_opts;

/* Lingvo's MelAsrFrontend.Params() defaults (noise_scale 8). */
lv_mel_frontend_opts lv_mel_frontend_opts_default(void);
/* The features of create_asr_features (audio_lib.ExtractLogMelFeatures): 16 kHz, 80 bins,
 * 25/10 ms, 125-7600 Hz, no dither, no stacking. */
lv_mel_frontend_opts lv_mel_frontend_opts_librispeech(void);

typedef struct lv_mel_frontend lv_mel_frontend;

/* Errors (LV_ERR_INVALID) name the offending option and value. */
lv_status lv_mel_frontend_create(const lv_mel_frontend_opts *opts, lv_mel_frontend **out);
void lv_mel_frontend_free(lv_mel_frontend *fe);

/* Values per output frame: num_bins * (left + right + 1). */
int lv_mel_frontend_output_dim(const lv_mel_frontend *fe);
/* Output frames for n input samples. */
int64_t lv_mel_frontend_num_frames(const lv_mel_frontend *fe, int64_t n);
/* Samples per analysis frame (401 at 16 kHz) and between frames (160). */
int lv_mel_frontend_frame_size(const lv_mel_frontend *fe);
int lv_mel_frontend_frame_step(const lv_mel_frontend *fe);
int lv_mel_frontend_fft_size(const lv_mel_frontend *fe);
/* TF's mel weight matrix [fft_size / 2 + 1, num_bins], row-major; borrowed. */
const float *lv_mel_frontend_mel_matrix(const lv_mel_frontend *fe);

/* pcm [n] in int16 range; pcm_pad [n] 0/1 sample paddings or NULL (all real). Writes
 * frames [T, output_dim] and, if out_pad is not NULL, out_pad [T], T =
 * lv_mel_frontend_num_frames(fe, n). Errors: allocation, and a log-mel value that is not
 * finite (LV_ERR_CORRUPT naming the frame and the samples' peak: samples far outside the
 * int16 range, or NaN / inf samples); the caller names the file. */
lv_status lv_mel_frontend_compute(lv_mel_frontend *fe, const float *pcm, const float *pcm_pad, int64_t n,
                                  float *frames, float *out_pad);

/* Re-seeds the dither (opts.random_seed's generator), e.g. per utterance for draws that
 * do not depend on the order utterances come in. */
void lv_mel_frontend_seed(lv_mel_frontend *fe, uint64_t seed);

/* FFTW's planner is not thread-safe: every plan made or destroyed in lingvoc holds this
 * lock (the frontend's, the augmentation's reverberation). */
void lv_fftw_plan_lock(void);
void lv_fftw_plan_unlock(void);

#endif
