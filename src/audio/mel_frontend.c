#include "audio/mel_frontend.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/rng.h"

/* Frames computed together: their spectra are stored side by side, so the mel sums run
 * over MEL_BLOCK frames at once in vector lanes (each frame's sum keeps its order). */
#define MEL_BLOCK 8

/* FFTW's planner is not thread-safe (fftwf_execute_* on an existing plan is). */
static pthread_mutex_t g_plan_mu = PTHREAD_MUTEX_INITIALIZER;
void lv_fftw_plan_lock(void) { pthread_mutex_lock(&g_plan_mu); }
void lv_fftw_plan_unlock(void) { pthread_mutex_unlock(&g_plan_mu); }

struct lv_mel_frontend {
  lv_mel_frontend_opts o;
  int frame_size; /* samples framed, +1 for the pre-emphasis */
  int frame_step;
  int win_len;  /* frame_size - 1 samples reach the window */
  int fft_size;
  int num_spec; /* fft_size / 2 + 1 */
  int context;  /* left + right + 1 */
  float *mean;   /* [num_bins] */
  float *stddev; /* [num_bins] */
  float *window; /* [win_len] */
  float *mel;    /* [num_spec, num_bins] TF's matrix, kept for inspection */
  /* The matrix's non-zero rows per bin: weights mel_w[mel_off[j] .. + mel_len[j]] apply
   * to spectrum rows mel_lo[j] ... */
  int *mel_lo, *mel_len, *mel_off; /* [num_bins] */
  float *mel_w;
  /* Spectrum rows spec_lo .. spec_hi - 1 are the only ones any bin weighs. */
  int spec_lo, spec_hi;
  /* The FFT runs in place: fft_in [2 * num_spec] (frame, zeros, 2 spare) becomes fft_out. */
  float *fft_in;
  fftwf_complex *fft_out; /* = fft_in */
  float *spec;           /* [spec_hi - spec_lo, MEL_BLOCK]: a block of frames' spectra, frame fastest */
  fftwf_plan plan;
  lv_rng rng;
  float *logmel;     /* [cap_frames, num_bins] unstacked frames when stacking */
  float *logmel_pad; /* [cap_frames] */
  int64_t cap_frames;
};

lv_mel_frontend_opts lv_mel_frontend_opts_default(void) {
  return (lv_mel_frontend_opts){
      .sample_rate = 16000.0,
      .frame_size_ms = 25.0,
      .frame_step_ms = 10.0,
      .num_bins = 80,
      .lower_edge_hertz = 125.0,
      .upper_edge_hertz = 7600.0,
      .preemph = 0.97,
      .noise_scale = 8.0,
      .hann_window = true,
      .pad_end = false,
      .frame_stride = 1,
      .fft_overdrive = true,
      .output_floor = 1.0,
  };
}

lv_mel_frontend_opts lv_mel_frontend_opts_librispeech(void) {
  lv_mel_frontend_opts o = lv_mel_frontend_opts_default();
  o.noise_scale = 0.0;
  return o;
}

static double hz_to_mel(double f) { return 1127.0 * log(1.0 + f / 700.0); }

static lv_status check_opts(const lv_mel_frontend_opts *o) {
  if (!(o->sample_rate > 0) || !isfinite(o->sample_rate))
    return lv_status_make(LV_ERR_INVALID, "frontend: sample_rate %g: expected a positive rate in Hz", o->sample_rate);
  if (!(o->frame_size_ms > 0) || !(o->frame_step_ms > 0) || o->frame_size_ms > 1e5 || o->frame_step_ms > 1e5)
    return lv_status_make(LV_ERR_INVALID, "frontend: frame_size_ms %g, frame_step_ms %g: expected positive durations",
                          o->frame_size_ms, o->frame_step_ms);
  if (o->num_bins < 1 || o->num_bins > 4096)
    return lv_status_make(LV_ERR_INVALID, "frontend: num_bins %d: expected 1..4096", o->num_bins);
  if (!(o->lower_edge_hertz >= 0) || !(o->upper_edge_hertz > o->lower_edge_hertz) ||
      o->upper_edge_hertz > o->sample_rate / 2)
    return lv_status_make(LV_ERR_INVALID,
                          "frontend: lower_edge_hertz %g, upper_edge_hertz %g: expected 0 <= lower < upper <= "
                          "sample_rate / 2 (%g)",
                          o->lower_edge_hertz, o->upper_edge_hertz, o->sample_rate / 2);
  if (!(o->noise_scale >= 0) || !isfinite(o->preemph))
    return lv_status_make(LV_ERR_INVALID, "frontend: noise_scale %g, preemph %g: expected noise_scale >= 0",
                          o->noise_scale, o->preemph);
  if (o->frame_stride < 1)
    return lv_status_make(LV_ERR_INVALID, "frontend: frame_stride %d: must be positive", o->frame_stride);
  if (o->stack_left_context < 0 || o->stack_right_context < 0 || o->stack_left_context > 1000 ||
      o->stack_right_context > 1000)
    return lv_status_make(LV_ERR_INVALID, "frontend: stack_left_context %d, stack_right_context %d: expected 0..1000",
                          o->stack_left_context, o->stack_right_context);
  for (int j = 0; o->per_bin_stddev && j < o->num_bins; j++)
    if (o->per_bin_stddev[j] == 0)
      return lv_status_make(LV_ERR_INVALID, "frontend: per_bin_stddev[%d] is 0", j);
  return NULL;
}

void lv_mel_frontend_free(lv_mel_frontend *fe) {
  if (!fe) return;
  if (fe->plan) {
    pthread_mutex_lock(&g_plan_mu);
    fftwf_destroy_plan(fe->plan);
    pthread_mutex_unlock(&g_plan_mu);
  }
  fftwf_free(fe->fft_in);
  free(fe->mean);
  free(fe->stddev);
  free(fe->window);
  free(fe->mel);
  free(fe->mel_lo);
  free(fe->mel_len);
  free(fe->mel_off);
  free(fe->mel_w);
  free(fe->spec);
  free(fe->logmel);
  free(fe->logmel_pad);
  free(fe);
}

/* TF's linear_to_mel_weight_matrix (python/ops/signal/mel_ops.py), in double. */
static void build_mel(lv_mel_frontend *fe) {
  const lv_mel_frontend_opts *o = &fe->o;
  int nb = o->num_bins, ns = fe->num_spec;
  double lo = hz_to_mel(o->lower_edge_hertz), hi = hz_to_mel(o->upper_edge_hertz);
  double nyquist = o->sample_rate / 2.0;
  memset(fe->mel, 0, sizeof(float) * (size_t)ns * (size_t)nb);
  for (int j = 0; j < nb; j++) {
    double l = lo + (hi - lo) * j / (nb + 1), c = lo + (hi - lo) * (j + 1) / (nb + 1),
           u = lo + (hi - lo) * (j + 2) / (nb + 1);
    for (int k = 1; k < ns; k++) {
      double m = hz_to_mel(nyquist * k / (ns - 1));
      double w = fmin((m - l) / (c - l), (u - m) / (u - c));
      if (w > 0) fe->mel[(size_t)k * nb + j] = (float)w;
    }
  }
  int off = 0;
  for (int j = 0; j < nb; j++) {
    int first = -1, last = -1;
    for (int k = 0; k < ns; k++)
      if (fe->mel[(size_t)k * nb + j] != 0) {
        if (first < 0) first = k;
        last = k;
      }
    fe->mel_lo[j] = first < 0 ? 0 : first;
    fe->mel_len[j] = first < 0 ? 0 : last - first + 1;
    fe->mel_off[j] = off;
    for (int k = 0; k < fe->mel_len[j]; k++) fe->mel_w[off + k] = fe->mel[(size_t)(first + k) * nb + j];
    off += fe->mel_len[j];
  }
  fe->spec_lo = ns;
  fe->spec_hi = 0;
  for (int j = 0; j < nb; j++)
    if (fe->mel_len[j] > 0) {
      if (fe->mel_lo[j] < fe->spec_lo) fe->spec_lo = fe->mel_lo[j];
      if (fe->mel_lo[j] + fe->mel_len[j] > fe->spec_hi) fe->spec_hi = fe->mel_lo[j] + fe->mel_len[j];
    }
  if (fe->spec_hi <= fe->spec_lo) fe->spec_lo = fe->spec_hi = 0;
}

lv_status lv_mel_frontend_create(const lv_mel_frontend_opts *opts, lv_mel_frontend **out) {
  *out = NULL;
  LV_TRY(check_opts(opts));
  lv_mel_frontend *fe = calloc(1, sizeof *fe);
  if (!fe) return lv_status_make(LV_ERR_RESOURCE, "frontend: out of memory");
  fe->o = *opts;
  fe->o.per_bin_mean = fe->o.per_bin_stddev = NULL;
  /* Python's round(): halves to even (22050 Hz x 10 ms = 220.5 -> 220), as Lingvo's
   * int(round(sample_rate * frame_step_ms / 1000.0)); nearbyint in the default mode. */
  fe->frame_step = (int)nearbyint(opts->sample_rate * opts->frame_step_ms / 1000.0);
  fe->frame_size = (int)nearbyint(opts->sample_rate * opts->frame_size_ms / 1000.0) + 1;
  if (fe->frame_step < 1 || fe->frame_size < 2 || fe->frame_size > (1 << 22)) {
    lv_status s = lv_status_make(LV_ERR_INVALID,
                                 "frontend: frame_size_ms %g / frame_step_ms %g at %g Hz give frames of %d samples "
                                 "every %d: expected at least 1 sample per frame and per step",
                                 opts->frame_size_ms, opts->frame_step_ms, opts->sample_rate, fe->frame_size - 1,
                                 fe->frame_step);
    lv_mel_frontend_free(fe);
    return s;
  }
  fe->win_len = fe->frame_size - 1;
  int p2 = 1;
  while (p2 < fe->win_len) p2 *= 2;
  fe->fft_size = p2 > 512 ? p2 : 512;
  if (opts->fft_overdrive) fe->fft_size *= 2;
  fe->num_spec = fe->fft_size / 2 + 1;
  fe->context = opts->stack_left_context + opts->stack_right_context + 1;
  int nb = opts->num_bins, ns = fe->num_spec;
  fe->mean = calloc((size_t)nb, sizeof(float));
  fe->stddev = calloc((size_t)nb, sizeof(float));
  fe->window = calloc((size_t)fe->win_len, sizeof(float));
  fe->mel = calloc((size_t)ns * (size_t)nb, sizeof(float));
  fe->mel_w = calloc((size_t)ns * (size_t)nb, sizeof(float));
  fe->mel_lo = calloc((size_t)nb, sizeof(int));
  fe->mel_len = calloc((size_t)nb, sizeof(int));
  fe->mel_off = calloc((size_t)nb, sizeof(int));
  fe->fft_in = fftwf_alloc_real(2 * (size_t)ns);
  fe->fft_out = (fftwf_complex *)fe->fft_in;
  if (!fe->mean || !fe->stddev || !fe->window || !fe->mel || !fe->mel_w || !fe->mel_lo || !fe->mel_len ||
      !fe->mel_off || !fe->fft_in || !fe->fft_out) {
    lv_mel_frontend_free(fe);
    return lv_status_make(LV_ERR_RESOURCE, "frontend: out of memory");
  }
  for (int j = 0; j < nb; j++) {
    fe->mean[j] = opts->per_bin_mean ? opts->per_bin_mean[j] : 0.0f;
    fe->stddev[j] = opts->per_bin_stddev ? opts->per_bin_stddev[j] : 1.0f;
  }
  /* tf.signal.hann_window(L, periodic=True): denominator L for even L, L - 1 for odd. */
  int denom = fe->win_len % 2 == 0 ? fe->win_len : fe->win_len - 1;
  for (int k = 0; k < fe->win_len; k++)
    fe->window[k] = !opts->hann_window ? 1.0f
                    : denom == 0       ? 1.0f
                                       : (float)(0.5 - 0.5 * cos(2.0 * M_PI * k / denom));
  build_mel(fe);
  fe->spec = calloc((size_t)(fe->spec_hi - fe->spec_lo) * MEL_BLOCK + 1, sizeof(float));
  if (!fe->spec) {
    lv_mel_frontend_free(fe);
    return lv_status_make(LV_ERR_RESOURCE, "frontend: out of memory");
  }
  /* FFTW_ESTIMATE: no timing runs, so the plan (and the bits) do not vary between runs. In
   * place, FFTW 3.3.10 estimates a radix-8 real step for 1024 points (the plan FFTW_PATIENT
   * finds); out of place it estimated radix 2, and the frontend took about 8% more time. */
  pthread_mutex_lock(&g_plan_mu);
  fe->plan = fftwf_plan_dft_r2c_1d(fe->fft_size, fe->fft_in, fe->fft_out, FFTW_ESTIMATE);
  pthread_mutex_unlock(&g_plan_mu);
  if (!fe->plan) {
    lv_mel_frontend_free(fe);
    return lv_status_make(LV_ERR_INTERNAL, "frontend: FFTW could not plan a %d-point real FFT", fe->fft_size);
  }
  lv_rng_init(&fe->rng, opts->random_seed, 0);
  *out = fe;
  return NULL;
}

int lv_mel_frontend_output_dim(const lv_mel_frontend *fe) { return fe->o.num_bins * fe->context; }
int lv_mel_frontend_frame_size(const lv_mel_frontend *fe) { return fe->frame_size; }
int lv_mel_frontend_frame_step(const lv_mel_frontend *fe) { return fe->frame_step; }
int lv_mel_frontend_fft_size(const lv_mel_frontend *fe) { return fe->fft_size; }
const float *lv_mel_frontend_mel_matrix(const lv_mel_frontend *fe) { return fe->mel; }

/* tf.signal.frame's count. */
static int64_t mel_frames(const lv_mel_frontend *fe, int64_t n) {
  if (n <= 0) return 0;
  if (fe->o.pad_end) return (n + fe->frame_step - 1) / fe->frame_step;
  return n < fe->frame_size ? 0 : 1 + (n - fe->frame_size) / fe->frame_step;
}

static bool stacking(const lv_mel_frontend *fe) { return fe->o.stack_left_context || fe->o.stack_right_context; }

int64_t lv_mel_frontend_num_frames(const lv_mel_frontend *fe, int64_t n) {
  int64_t t = mel_frames(fe, n);
  if (!stacking(fe) || t == 0) return t;
  return 1 + (t - 1) / fe->o.frame_stride;
}

/* Frame `start`'s spectrum into column f of fe->spec (rows spec_lo .. spec_hi - 1); returns
 * the frame's padding. */
static float frame_spectrum(lv_mel_frontend *fe, const float *pcm, const float *pcm_pad, int64_t n, int64_t start,
                            int f) {
  const lv_mel_frontend_opts *o = &fe->o;
  const int win_len = fe->win_len;
  const float scale = o->use_divide_stream ? 1.0f / 32768.0f : 1.0f;
  const float preemph = (float)o->preemph;
  float *restrict y = fe->fft_in;
  const float *restrict window = fe->window;
  /* Samples past n (pad_end) are zeros with padding 0, as tf.signal.frame pads both. */
#define SAMPLE(i) ((start + (i)) < n ? pcm[start + (i)] * scale : 0.0f)
  if (start + win_len + 1 <= n && o->noise_scale <= 0 && preemph != 0.0f) {
    /* A frame inside the signal without dither: the same arithmetic, without the
     * per-sample checks, so that it vectorizes. */
    const float *restrict p = pcm + start;
#pragma omp simd
    for (int i = 0; i < win_len; i++) y[i] = (p[i + 1] * scale - preemph * (p[i] * scale)) * window[i];
  } else {
    for (int i = 0; i < win_len; i++) {
      float v = preemph != 0.0f ? SAMPLE(i + 1) - preemph * SAMPLE(i) : SAMPLE(i);
      if (o->noise_scale > 0) v += (float)o->noise_scale * lv_rng_normal(&fe->rng);
      y[i] = v * window[i];
    }
  }
#undef SAMPLE
  float pad = 0;
  if (pcm_pad) {
    int64_t m = n - start < fe->frame_size ? n - start : fe->frame_size;
    const float *restrict pp = pcm_pad + start;
#pragma omp simd reduction(max : pad)
    for (int64_t i = 0; i < m; i++) pad = pp[i] > pad ? pp[i] : pad;
  }
  memset(y + win_len, 0, sizeof(float) * (size_t)(fe->fft_size - win_len)); /* the last frame's spectrum */
  fftwf_execute_dft_r2c(fe->plan, y, fe->fft_out);
  /* Only the rows the mel matrix weighs: |X| (or |X|^2), correctly rounded either way. */
  const float *restrict x = (const float *)(fe->fft_out + fe->spec_lo);
  float *restrict spec = fe->spec + f;
  const int rows = fe->spec_hi - fe->spec_lo;
  if (o->compute_energy) {
#pragma omp simd
    for (int k = 0; k < rows; k++) spec[k * MEL_BLOCK] = x[2 * k] * x[2 * k] + x[2 * k + 1] * x[2 * k + 1];
  } else {
#pragma omp simd
    for (int k = 0; k < rows; k++) spec[k * MEL_BLOCK] = sqrtf(x[2 * k] * x[2 * k] + x[2 * k + 1] * x[2 * k + 1]);
  }
  return pad;
}

/* t frames from sample 0 into out [t, num_bins] and, if pad is not NULL, pad [t]: the
 * spectra of MEL_BLOCK frames at a time, then their mel sums (in double, in the order of
 * the spectrum rows, as one frame alone), ln(max(floor, .)) and the normalisation. */
static void mel_frames_compute(lv_mel_frontend *fe, const float *pcm, const float *pcm_pad, int64_t n, int64_t t,
                               float *out, float *pad) {
  const int nb = fe->o.num_bins;
  const float floor_v = (float)fe->o.output_floor;
  for (int64_t i0 = 0; i0 < t; i0 += MEL_BLOCK) {
    const int nf = t - i0 < MEL_BLOCK ? (int)(t - i0) : MEL_BLOCK;
    for (int f = 0; f < nf; f++) {
      float p = frame_spectrum(fe, pcm, pcm_pad, n, (i0 + f) * fe->frame_step, f);
      if (pad) pad[i0 + f] = p;
    }
    float *o = out + i0 * nb;
    for (int j = 0; j < nb; j++) {
      const float *restrict w = fe->mel_w + fe->mel_off[j];
      const float *restrict s = fe->spec + (size_t)(fe->mel_lo[j] - fe->spec_lo) * MEL_BLOCK;
      double acc[MEL_BLOCK] = {0};
      for (int k = 0; k < fe->mel_len[j]; k++) {
        const double wk = w[k];
#pragma omp simd
        for (int f = 0; f < MEL_BLOCK; f++) acc[f] += (double)s[k * MEL_BLOCK + f] * wk;
      }
      for (int f = 0; f < nf; f++) {
        float m = (float)acc[f];
        o[f * nb + j] = (logf(m > floor_v ? m : floor_v) - fe->mean[j]) / fe->stddev[j];
      }
    }
  }
}

/* An error when a log-mel value of frames [t, nb] is not finite: samples far outside the
 * int16 range (a float file's samples of 1e16) overflow the power spectrum to +inf, and
 * NaN or inf samples make NaN; a model fed either decodes nothing useful. */
static lv_status check_finite(const float *frames, int64_t t, int nb, const float *pcm, int64_t n) {
  for (int64_t i = 0; i < t * nb; i++) {
    if (isfinite(frames[i])) continue;
    float peak = 0;
    for (int64_t k = 0; k < n; k++)
      if (!(fabsf(pcm[k]) <= peak)) peak = fabsf(pcm[k]);
    return lv_status_make(LV_ERR_CORRUPT, "log-mel frame %lld, bin %d is %g: the samples reach %g (expected "
                          "audio within the int16 range, a float file's samples within [-1, 1])",
                          (long long)(i / nb), (int)(i % nb), (double)frames[i], (double)peak);
  }
  return NULL;
}

lv_status lv_mel_frontend_compute(lv_mel_frontend *fe, const float *pcm, const float *pcm_pad, int64_t n,
                                  float *frames, float *out_pad) {
  int nb = fe->o.num_bins;
  int64_t t = mel_frames(fe, n);
  if (!stacking(fe)) {
    mel_frames_compute(fe, pcm, pcm_pad, n, t, frames, out_pad);
    return check_finite(frames, t, nb, pcm, n);
  }
  if (t > fe->cap_frames) {
    void *m = NULL, *pd = NULL;
    LV_TRY(lv_mem_alloc((size_t)t, sizeof(float) * (size_t)nb, false, "frontend: log-mel frames", &m));
    lv_status s = lv_mem_alloc((size_t)t, sizeof(float), false, "frontend: frame paddings", &pd);
    if (s) {
      free(m);
      return s;
    }
    free(fe->logmel);
    free(fe->logmel_pad);
    fe->logmel = m;
    fe->logmel_pad = pd;
    fe->cap_frames = t;
  }
  mel_frames_compute(fe, pcm, pcm_pad, n, t, fe->logmel, fe->logmel_pad);
  LV_TRY(check_finite(fe->logmel, t, nb, pcm, n));
  int64_t tout = lv_mel_frontend_num_frames(fe, n);
  int left = fe->o.stack_left_context;
  for (int64_t j = 0; j < tout; j++) {
    float p = 0;
    for (int s = 0; s < fe->context; s++) {
      /* Row j * stride + s of the sequence extended by `left` copies of frame 0 and
       * `right` copies of the last frame. */
      int64_t src = j * fe->o.frame_stride + s - left;
      if (src < 0) src = 0;
      if (src > t - 1) src = t - 1;
      memcpy(frames + (j * fe->context + s) * nb, fe->logmel + src * nb, sizeof(float) * (size_t)nb);
      if (fe->logmel_pad[src] > p) p = fe->logmel_pad[src];
    }
    if (out_pad) out_pad[j] = p;
  }
  return NULL;
}

void lv_mel_frontend_seed(lv_mel_frontend *fe, uint64_t seed) { lv_rng_init(&fe->rng, seed, 0); }
