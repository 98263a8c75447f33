/* Waveform augmentation (see augment.h). */
#include "audio/augment.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio_file.h"
#include "audio/mel_frontend.h"
#include "base/mem.h"

const char *const lv_noise_color_names[LV_NOISE_COUNT] = {"white", "pink", "brown"};
_Static_assert(LV_NOISE_COUNT == 3, "lv_noise_color_names");

/* One Philox stream per step, so that a step's draws do not depend on the others. */
enum { S_SPEED = 1, S_REVERB, S_NOISE, S_GAIN };

bool lv_augment_active(const lv_augment_opts *o) {
  bool speed = false;
  for (int i = 0; i < o->n_speeds; i++) speed |= o->speeds[i] != 1.0;
  return speed || o->reverb || o->noise || o->gain;
}

static lv_status check_range(const char *name, const double r[2], double lo, double hi) {
  if (!(r[0] >= lo && r[0] <= r[1] && r[1] <= hi))
    return lv_status_make(LV_ERR_INVALID, "input.%s [%g, %g]: expected [lo, hi] with %g <= lo <= hi <= %g", name,
                          r[0], r[1], lo, hi);
  return NULL;
}

lv_status lv_augment_check(const lv_augment_opts *o) {
  if (o->rate < 1000) return lv_status_make(LV_ERR_INVALID, "augmentation: sample rate %d Hz", o->rate);
  for (int i = 0; i < o->n_speeds; i++)
    if (!(o->speeds[i] >= 0.5 && o->speeds[i] <= 2.0))
      return lv_status_make(LV_ERR_INVALID, "input.speed_perturb_factors[%d] %g: expected 0.5..2", i, o->speeds[i]);
  if (o->reverb) LV_TRY(check_range("reverb_rt60_range", o->rt60, 0, 2));
  if (o->noise) LV_TRY(check_range("noise_snr_db_range", o->snr_db, -30, 100));
  if (o->noise && o->n_colors < 1)
    return lv_status_make(LV_ERR_INVALID, "input.noise_colors: empty; expected some of white, pink, brown");
  if (o->gain) LV_TRY(check_range("gain_db_range", o->gain_db, -60, 60));
  if (!(o->prob >= 0 && o->prob <= 1))
    return lv_status_make(LV_ERR_INVALID, "input.augment_prob %g: expected 0..1", o->prob);
  return NULL;
}

double lv_augment_power(const float *x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return n ? s / (double)n : 0;
}

static double uniform_in(lv_rng *r, const double range[2]) {
  return range[0] + (range[1] - range[0]) * (double)lv_rng_uniform(r);
}

lv_status lv_augment_speed(const float *x, int64_t n, int rate, double factor, float **out, int64_t *out_n) {
  /* sox speed f: the samples played at rate * f, brought back to rate. */
  int in_rate = (int)lround(rate * factor);
  if (in_rate == rate) {
    LV_TRY(lv_mem_alloc((size_t)(n ? n : 1), sizeof(float), false, "speed-perturbed audio", (void **)out));
    memcpy(*out, x, sizeof(float) * (size_t)n);
    *out_n = n;
    return NULL;
  }
  return lv_audio_resample(x, n, in_rate, rate, out, out_n);
}

void lv_augment_noise(lv_rng *r, lv_noise_color c, float *out, int64_t n) {
  double b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0, b5 = 0, b6 = 0, y = 0, mean = 0;
  for (int64_t i = 0; i < n; i++) {
    double w = lv_rng_normal(r), v = w;
    if (c == LV_NOISE_PINK) { /* Paul Kellet's refined pink filter (-3 dB/octave, within 0.05 dB above 9 Hz at 44.1 kHz) */
      b0 = 0.99886 * b0 + w * 0.0555179;
      b1 = 0.99332 * b1 + w * 0.0750759;
      b2 = 0.96900 * b2 + w * 0.1538520;
      b3 = 0.86650 * b3 + w * 0.3104856;
      b4 = 0.55000 * b4 + w * 0.5329522;
      b5 = -0.7616 * b5 - w * 0.0168980;
      v = b0 + b1 + b2 + b3 + b4 + b5 + b6 + w * 0.5362;
      b6 = w * 0.115926;
    } else if (c == LV_NOISE_BROWN) { /* -6 dB/octave above the leak's 13 Hz (at 16 kHz) */
      y = 0.995 * y + w;
      v = y;
    }
    out[i] = (float)v;
    mean += v;
  }
  if (!n) return;
  mean /= (double)n;
  double p = 0;
  for (int64_t i = 0; i < n; i++) {
    out[i] = (float)(out[i] - mean);
    p += (double)out[i] * out[i];
  }
  double k = p > 0 ? 1.0 / sqrt(p / (double)n) : 0;
  for (int64_t i = 0; i < n; i++) out[i] = (float)(out[i] * k);
}

void lv_augment_add_noise(float *x, int64_t n, const float *noise, double snr_db) {
  double ps = lv_augment_power(x, n), pn = lv_augment_power(noise, n);
  if (ps <= 0 || pn <= 0) return;
  double k = sqrt(ps / (pn * pow(10.0, snr_db / 10.0)));
  for (int64_t i = 0; i < n; i++) x[i] = (float)(x[i] + k * noise[i]);
}

lv_status lv_augment_rir(lv_rng *r, double rt60, int rate, float **h, int64_t *m) {
  int64_t len = rt60 > 0 ? (int64_t)ceil(rt60 * rate) : 1;
  if (len < 1) len = 1;
  LV_TRY(lv_mem_alloc((size_t)len, sizeof(float), true, "room impulse response", (void **)h));
  (*h)[0] = 1.0f;
  double e = 0;
  /* amplitude exp(-ln(1000) t / rt60): -60 dB at rt60 */
  for (int64_t i = 1; i < len; i++) {
    double v = lv_rng_normal(r) * exp(-6.907755278982137 * (double)i / (rt60 * rate));
    (*h)[i] = (float)v;
    e += v * v;
  }
  double k = e > 0 ? sqrt((rt60 / 0.1) / e) : 0;
  for (int64_t i = 1; i < len; i++) (*h)[i] = (float)((*h)[i] * k);
  *m = len;
  return NULL;
}

lv_status lv_augment_convolve(const float *x, int64_t n, const float *h, int64_t m, float *y) {
  if (m == 1 || n == 0) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * h[0];
    return NULL;
  }
  int64_t N = 1;
  while (N < n + m - 1) N *= 2;
  float *a = fftwf_alloc_real((size_t)N), *b = fftwf_alloc_real((size_t)N);
  fftwf_complex *A = fftwf_alloc_complex((size_t)N / 2 + 1), *B = fftwf_alloc_complex((size_t)N / 2 + 1);
  lv_status s = NULL;
  if (!a || !b || !A || !B) s = lv_status_make(LV_ERR_RESOURCE, "reverberation: out of memory for a %lld-point FFT",
                                               (long long)N);
  fftwf_plan fa = NULL, fb = NULL, inv = NULL;
  if (!s) {
    lv_fftw_plan_lock();
    /* FFTW_ESTIMATE: no timing runs, so the plans (and the bits) are the same every run. */
    fa = fftwf_plan_dft_r2c_1d((int)N, a, A, FFTW_ESTIMATE);
    fb = fftwf_plan_dft_r2c_1d((int)N, b, B, FFTW_ESTIMATE);
    inv = fftwf_plan_dft_c2r_1d((int)N, A, a, FFTW_ESTIMATE);
    lv_fftw_plan_unlock();
    if (!fa || !fb || !inv) s = lv_status_make(LV_ERR_INTERNAL, "reverberation: FFTW could not plan %lld points",
                                               (long long)N);
  }
  if (!s) {
    memset(a, 0, sizeof(float) * (size_t)N);
    memset(b, 0, sizeof(float) * (size_t)N);
    memcpy(a, x, sizeof(float) * (size_t)n);
    memcpy(b, h, sizeof(float) * (size_t)m);
    fftwf_execute(fa);
    fftwf_execute(fb);
    for (int64_t k = 0; k <= N / 2; k++) {
      float re = A[k][0] * B[k][0] - A[k][1] * B[k][1], im = A[k][0] * B[k][1] + A[k][1] * B[k][0];
      A[k][0] = re;
      A[k][1] = im;
    }
    fftwf_execute(inv);
    for (int64_t i = 0; i < n; i++) y[i] = a[i] / (float)N;
  }
  lv_fftw_plan_lock();
  if (fa) fftwf_destroy_plan(fa);
  if (fb) fftwf_destroy_plan(fb);
  if (inv) fftwf_destroy_plan(inv);
  lv_fftw_plan_unlock();
  fftwf_free(a);
  fftwf_free(b);
  fftwf_free(A);
  fftwf_free(B);
  return s;
}

lv_status lv_augment_apply(const lv_augment_opts *o, uint64_t key, const float *pcm, int64_t n, float **out,
                           int64_t *out_n) {
  lv_rng r;
  double f = 1.0;
  if (o->n_speeds > 0) {
    lv_rng_init(&r, key, S_SPEED);
    f = o->speeds[lv_rng_below(&r, (uint64_t)o->n_speeds)];
  }
  float *y = NULL;
  int64_t m = 0;
  LV_TRY(lv_augment_speed(pcm, n, o->rate, f, &y, &m));
  lv_status s = NULL;
  if (o->reverb) {
    lv_rng_init(&r, key, S_REVERB);
    bool on = lv_rng_uniform(&r) < o->prob;
    double rt60 = uniform_in(&r, o->rt60);
    if (on && rt60 > 0) {
      float *h = NULL;
      int64_t hm = 0;
      double p0 = lv_augment_power(y, m);
      s = lv_augment_rir(&r, rt60, o->rate, &h, &hm);
      if (!s) s = lv_augment_convolve(y, m, h, hm, y);
      free(h);
      double p1 = lv_augment_power(y, m), k = p1 > 0 ? sqrt(p0 / p1) : 1;
      for (int64_t i = 0; !s && i < m; i++) y[i] = (float)(y[i] * k);
    }
  }
  if (!s && o->noise) {
    lv_rng_init(&r, key, S_NOISE);
    bool on = lv_rng_uniform(&r) < o->prob;
    double snr = uniform_in(&r, o->snr_db);
    lv_noise_color c = o->colors[lv_rng_below(&r, (uint64_t)o->n_colors)];
    if (on && m > 0) {
      float *nz = NULL;
      s = lv_mem_alloc((size_t)m, sizeof(float), false, "noise", (void **)&nz);
      if (!s) {
        lv_augment_noise(&r, c, nz, m);
        lv_augment_add_noise(y, m, nz, snr);
      }
      free(nz);
    }
  }
  if (!s && o->gain) {
    lv_rng_init(&r, key, S_GAIN);
    bool on = lv_rng_uniform(&r) < o->prob;
    float g = (float)pow(10.0, uniform_in(&r, o->gain_db) / 20.0);
    for (int64_t i = 0; on && i < m; i++) y[i] *= g;
  }
  if (s) {
    free(y);
    return s;
  }
  *out = y;
  *out_n = m;
  return NULL;
}
