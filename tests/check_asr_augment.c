/* Waveform augmentation (audio/augment.h) and AsrInput's use of it (input/asr_input.c):
 * noise at the asked SNR for every colour (and the colours' spectra told apart by their
 * lag-1 correlation), speed 1.1 shortening by 1/1.1 and raising a tone's frequency by
 * 1.1, reverberation with RT60 0 the identity and FFT convolution equal to the direct
 * sum, the same draws for the same key; through AsrInput: augmentation off reads the
 * stored frames bit for bit, a 0 dB gain recomputes exactly the stored frames, training
 * batches the same for a seed and prefetch, a resumed stream the same batches, evaluation
 * untouched, records without pcm16 refused naming --write_pcm. And the frontend's
 * noise_scale dither (Lingvo's MelAsrFrontend) in int16 LSB units. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/augment.h"
#include "audio/mel_frontend.h"
#include "check_util.h"
#include "input/input.h"
#include "io/example.h"
#include "io/tfrecord.h"

static char g_dir[256];

/* A speech-like test signal: two tones under a syllable-rate envelope, int16 range. */
static float *signal(int64_t n, double f0) {
  float *x = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    double t = (double)i / 16000;
    x[i] = (float)(8000 * (0.6 + 0.4 * sin(2 * M_PI * 4 * t)) *
                   (sin(2 * M_PI * f0 * t) + 0.3 * sin(2 * M_PI * 3.1 * f0 * t)));
  }
  return x;
}

START_TEST(test_noise_snr_and_colours) {
  const int64_t n = 32000;
  float *x = signal(n, 220), *y = malloc(sizeof(float) * n), *nz = malloc(sizeof(float) * n);
  double lag1[LV_NOISE_COUNT];
  for (int c = 0; c < LV_NOISE_COUNT; c++) {
    lv_rng r;
    lv_rng_init(&r, 5, (uint64_t)c);
    lv_augment_noise(&r, (lv_noise_color)c, nz, n);
    ck_assert(fabs(lv_augment_power(nz, n) - 1) < 1e-4);
    double acc = 0;
    for (int64_t i = 1; i < n; i++) acc += (double)nz[i] * nz[i - 1];
    lag1[c] = acc / (double)(n - 1);
    for (double snr = -5; snr <= 30; snr += 7) {
      memcpy(y, x, sizeof(float) * n);
      lv_augment_add_noise(y, n, nz, snr);
      for (int64_t i = 0; i < n; i++) nz[i] = y[i] - x[i];
      double got = 10 * log10(lv_augment_power(x, n) / lv_augment_power(nz, n));
      ck_assert_msg(fabs(got - snr) < 0.01, "%s noise: asked %g dB, got %g", lv_noise_color_names[c], snr, got);
      lv_augment_noise(&r, (lv_noise_color)c, nz, n);
    }
  }
  /* white: uncorrelated; pink: correlated; brown: nearly a random walk */
  ck_assert(fabs(lag1[LV_NOISE_WHITE]) < 0.03);
  ck_assert(lag1[LV_NOISE_PINK] > 0.3 && lag1[LV_NOISE_PINK] < 0.95);
  ck_assert(lag1[LV_NOISE_BROWN] > 0.98);
  /* silence gets no noise */
  memset(y, 0, sizeof(float) * n);
  lv_augment_add_noise(y, n, nz, 10);
  ck_assert(lv_augment_power(y, n) == 0);
  free(x);
  free(y);
  free(nz);
}
END_TEST

static int crossings(const float *x, int64_t n) {
  int c = 0;
  for (int64_t i = 1; i < n; i++) c += (x[i - 1] < 0) != (x[i] < 0);
  return c;
}

START_TEST(test_speed) {
  const int64_t n = 16000;
  float *x = malloc(sizeof(float) * n), *y = NULL;
  for (int64_t i = 0; i < n; i++) x[i] = (float)(1000 * sin(2 * M_PI * 500 * (double)i / 16000));
  int64_t m = 0;
  EXPECT_OK(lv_augment_speed(x, n, 16000, 1.1, &y, &m));
  ck_assert_msg(llabs(m - (int64_t)lround(n / 1.1)) <= 2, "speed 1.1: %lld samples from %lld", (long long)m,
                (long long)n);
  /* 500 Hz for 1 s: 1000 crossings; at 1.1, 550 Hz for 1/1.1 s: 1000 crossings in fewer samples */
  double f = crossings(y, m) / 2.0 / ((double)m / 16000);
  ck_assert_msg(fabs(f - 550) < 5, "speed 1.1 of 500 Hz: %g Hz", f);
  free(y);
  EXPECT_OK(lv_augment_speed(x, n, 16000, 0.9, &y, &m));
  ck_assert(llabs(m - (int64_t)lround(n / 0.9)) <= 2);
  free(y);
  EXPECT_OK(lv_augment_speed(x, n, 16000, 1.0, &y, &m));
  ck_assert(m == n && !memcmp(x, y, sizeof(float) * n));
  free(y);
  free(x);
}
END_TEST

START_TEST(test_reverb) {
  lv_rng r;
  lv_rng_init(&r, 1, 2);
  float *h = NULL;
  int64_t m = 0;
  EXPECT_OK(lv_augment_rir(&r, 0, 16000, &h, &m));
  ck_assert(m == 1 && h[0] == 1.0f);
  const int64_t n = 8000;
  float *x = signal(n, 300), *y = malloc(sizeof(float) * n);
  EXPECT_OK(lv_augment_convolve(x, n, h, m, y));
  ck_assert(!memcmp(x, y, sizeof(float) * n));
  free(h);
  /* RT60 -> 0: a few taps, almost all energy in the direct path */
  EXPECT_OK(lv_augment_rir(&r, 0.0005, 16000, &h, &m));
  ck_assert_int_eq(m, 8);
  EXPECT_OK(lv_augment_convolve(x, n, h, m, y));
  double err = 0;
  for (int64_t i = 0; i < n; i++) err += (double)(y[i] - x[i]) * (y[i] - x[i]);
  ck_assert_msg(err / (double)n < 0.02 * lv_augment_power(x, n), "rt60 0.5 ms: relative error %g",
                err / (double)n / lv_augment_power(x, n));
  free(h);
  /* RT60 0.3 s: 4800 taps, -60 dB envelope; FFT convolution equals the direct sum */
  EXPECT_OK(lv_augment_rir(&r, 0.3, 16000, &h, &m));
  ck_assert_int_eq(m, 4800);
  EXPECT_OK(lv_augment_convolve(x, n, h, m, y));
  for (int64_t i = 0; i < n; i += 997) {
    double d = 0;
    for (int64_t k = 0; k < m && k <= i; k++) d += (double)h[k] * x[i - k];
    ck_assert_msg(fabs(d - y[i]) < 1e-3 * 8000, "y[%lld] %g, direct %g", (long long)i, (double)y[i], d);
  }
  free(h);
  free(x);
  free(y);
}
END_TEST

static lv_augment_opts all_on(void) {
  lv_augment_opts o = {.rate = 16000, .n_speeds = 3, .speeds = {0.9, 1.0, 1.1}, .reverb = true, .rt60 = {0.1, 0.5},
                       .noise = true, .snr_db = {5, 20}, .n_colors = 3,
                       .colors = {LV_NOISE_WHITE, LV_NOISE_PINK, LV_NOISE_BROWN}, .gain = true,
                       .gain_db = {-6, 6}, .prob = 1};
  return o;
}

START_TEST(test_apply_deterministic) {
  lv_augment_opts o = all_on();
  EXPECT_OK(lv_augment_check(&o));
  ck_assert(lv_augment_active(&o));
  const int64_t n = 12000;
  float *x = signal(n, 180), *a = NULL, *b = NULL;
  int64_t na = 0, nb = 0, lens[3] = {0};
  int distinct = 0;
  for (uint64_t key = 0; key < 12; key++) {
    EXPECT_OK(lv_augment_apply(&o, key, x, n, &a, &na));
    EXPECT_OK(lv_augment_apply(&o, key, x, n, &b, &nb));
    ck_assert(na == nb && !memcmp(a, b, sizeof(float) * (size_t)na));
    for (int i = 0; i < 3; i++)
      if (lens[i] == na) break;
      else if (!lens[i]) { lens[i] = na; distinct++; break; }
    free(a);
    free(b);
  }
  ck_assert_int_eq(distinct, 3); /* all three speeds drawn */
  lv_augment_opts off = {.rate = 16000, .n_speeds = 1, .speeds = {1.0}, .prob = 1};
  ck_assert(!lv_augment_active(&off));
  o.rt60[0] = 1;
  o.rt60[1] = 0.5;
  EXPECT_ERR(lv_augment_check(&o), LV_ERR_INVALID, "input.reverb_rt60_range [1, 0.5]");
  free(x);
}
END_TEST

/* ---- through AsrInput ---- */

static void write_utts(const char *name, int n_utts, bool pcm) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  lv_tfrecord_writer *w;
  EXPECT_OK(lv_tfrecord_writer_open(path, false, &w));
  lv_mel_frontend_opts fo = lv_mel_frontend_opts_librispeech();
  lv_mel_frontend *fe;
  EXPECT_OK(lv_mel_frontend_create(&fo, &fe));
  for (int u = 0; u < n_utts; u++) {
    int64_t n = 4000 + 1600 * u;
    float *x = signal(n, 150 + 20 * u);
    for (int64_t i = 0; i < n; i++) x[i] = nearbyintf(x[i]);
    int64_t t = lv_mel_frontend_num_frames(fe, n);
    float *fr = malloc(sizeof(float) * (size_t)t * 80);
    EXPECT_OK(lv_mel_frontend_compute(fe, x, NULL, n, fr, NULL));
    char id[16], *bytes16 = malloc((size_t)n * 2);
    snprintf(id, sizeof id, "u%d", u);
    for (int64_t i = 0; i < n; i++) {
      int16_t q = (int16_t)x[i];
      bytes16[2 * i] = (char)(q & 0xff);
      bytes16[2 * i + 1] = (char)((uint16_t)q >> 8);
    }
    lv_example *e = lv_example_new();
    const char *iv[1] = {id}, *tv[1] = {"some words"}, *pv[1] = {bytes16};
    size_t il[1] = {strlen(id)}, tl[1] = {10}, pl[1] = {(size_t)n * 2};
    lv_example_add_bytes(e, "uttid", 1, iv, il);
    lv_example_add_bytes(e, "transcript", 1, tv, tl);
    lv_example_add_floats(e, "frames", (int)(t * 80), fr);
    if (pcm) lv_example_add_bytes(e, "pcm16", 1, pv, pl);
    uint8_t *bytes;
    size_t nbytes;
    EXPECT_OK(lv_example_serialize(e, &bytes, &nbytes));
    EXPECT_OK(lv_tfrecord_writer_write(w, bytes, nbytes));
    free(bytes);
    lv_example_free(e);
    free(bytes16);
    free(fr);
    free(x);
  }
  EXPECT_OK(lv_tfrecord_writer_close(w));
  lv_mel_frontend_free(fe);
}

static lv_params *params(const char *name, int prefetch) {
  lv_input_register_all();
  lv_params *p = lv_input_class_find("AsrInput")->params();
  char pat[512];
  snprintf(pat, sizeof pat, "tfrecord:%s/%s", g_dir, name);
  EXPECT_OK(lv_params_set_string(p, "file_pattern", pat));
  EXPECT_OK(lv_params_set_int(p, "frame_size", 80));
  EXPECT_OK(lv_params_set_int(p, "file_random_seed", 11));
  EXPECT_OK(lv_params_set_int(p, "prefetch_batches", prefetch));
  EXPECT_OK(lv_params_set_list(p, "bucket_upper_bound", lv_pvalue_ints(1, (const int64_t[]){1000})));
  EXPECT_OK(lv_params_set_list(p, "bucket_batch_limit", lv_pvalue_ints(1, (const int64_t[]){3})));
  return p;
}

static void set_all_on(lv_params *p) {
  EXPECT_OK(lv_params_set_list(p, "speed_perturb_factors", lv_pvalue_floats(3, (const double[]){0.9, 1.0, 1.1})));
  EXPECT_OK(lv_params_set_list(p, "reverb_rt60_range", lv_pvalue_floats(2, (const double[]){0.1, 0.4})));
  EXPECT_OK(lv_params_set_list(p, "noise_snr_db_range", lv_pvalue_floats(2, (const double[]){5, 25})));
  EXPECT_OK(lv_params_set_list(p, "gain_db_range", lv_pvalue_floats(2, (const double[]){-6, 6})));
  EXPECT_OK(lv_params_set_float(p, "augment_prob", 0.8));
  EXPECT_OK(lv_params_set_float(p, "frontend_noise_scale", 8));
}

static lv_input *create(lv_params *p) {
  lv_params_freeze(p);
  lv_input *in = NULL;
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &in));
  return in;
}

/* The training batches of steps [from, to) as one buffer of their src inputs and keys. */
static size_t train_batches(lv_input *in, int from, int to, float **out) {
  size_t n = 0;
  *out = NULL;
  lv_batch b;
  lv_batch_init(&b);
  for (int step = from; step < to; step++) {
    EXPECT_OK(lv_input_train_batch(in, step, &b));
    const lv_tensor *x = lv_batch_get(&b, "src.src_inputs"), *pd = lv_batch_get(&b, "src.paddings");
    size_t k = (size_t)lv_tensor_numel(x), kp = (size_t)lv_tensor_numel(pd);
    *out = realloc(*out, sizeof(float) * (n + k + kp));
    memcpy(*out + n, x->data, sizeof(float) * k);
    memcpy(*out + n + k, pd->data, sizeof(float) * kp);
    n += k + kp;
  }
  lv_batch_free(&b);
  return n;
}

START_TEST(test_input_off_identical) {
  write_utts("a.tfrecord", 5, true);
  write_utts("nopcm.tfrecord", 5, false);
  lv_params *p0 = params("nopcm.tfrecord", 0), *p1 = params("a.tfrecord", 2), *p2 = params("a.tfrecord", 0);
  /* [1.0] alone is off; a 0 dB gain recomputes the frames with create_asr_features' frontend */
  EXPECT_OK(lv_params_set_list(p1, "speed_perturb_factors", lv_pvalue_floats(1, (const double[]){1.0})));
  EXPECT_OK(lv_params_set_list(p2, "gain_db_range", lv_pvalue_floats(2, (const double[]){0, 0})));
  lv_input *i0 = create(p0), *i1 = create(p1), *i2 = create(p2);
  float *a, *b, *c;
  size_t na = train_batches(i0, 0, 4, &a), nb = train_batches(i1, 0, 4, &b), nc = train_batches(i2, 0, 4, &c);
  ck_assert(na == nb && na == nc);
  ck_assert(!memcmp(a, b, sizeof(float) * na));
  ck_assert(!memcmp(a, c, sizeof(float) * na));
  free(a);
  free(b);
  free(c);
  lv_input_destroy(i0);
  lv_input_destroy(i1);
  lv_input_destroy(i2);
  lv_params_free(p0);
  lv_params_free(p1);
  lv_params_free(p2);
}
END_TEST

START_TEST(test_input_deterministic_and_resumable) {
  write_utts("a.tfrecord", 5, true);
  lv_params *p0 = params("a.tfrecord", 0), *p1 = params("a.tfrecord", 2), *p2 = params("a.tfrecord", 2),
            *poff = params("a.tfrecord", 0);
  set_all_on(p0);
  set_all_on(p1);
  set_all_on(p2);
  lv_input *i0 = create(p0), *i1 = create(p1), *i2 = create(p2), *ioff = create(poff);
  float *a, *b, *c, *d;
  size_t na = train_batches(i0, 0, 8, &a), nb = train_batches(i1, 0, 8, &b);
  ck_assert(na == nb && !memcmp(a, b, sizeof(float) * na));
  /* resumed at step 5: the same batches as steps 5..7 of the uninterrupted stream */
  float *a5;
  size_t n5 = train_batches(i0, 5, 8, &a5), nc = train_batches(i2, 5, 8, &c);
  ck_assert(n5 == nc && !memcmp(a5, c, sizeof(float) * nc));
  ck_assert(n5 <= na && !memcmp(a + na - n5, a5, sizeof(float) * n5));
  /* augmented differs from the stored frames */
  size_t nd = train_batches(ioff, 0, 8, &d);
  ck_assert(nd != na || memcmp(a, d, sizeof(float) * na));
  /* evaluation reads the stored frames */
  lv_batch e0, e1;
  lv_batch_init(&e0);
  lv_batch_init(&e1);
  bool done0 = false, done1 = false;
  EXPECT_OK(lv_input_next_eval(i0, &e0, &done0));
  EXPECT_OK(lv_input_next_eval(ioff, &e1, &done1));
  const lv_tensor *x0 = lv_batch_get(&e0, "src.src_inputs"), *x1 = lv_batch_get(&e1, "src.src_inputs");
  ck_assert(lv_tensor_numel(x0) == lv_tensor_numel(x1));
  ck_assert(!memcmp(x0->data, x1->data, sizeof(float) * (size_t)lv_tensor_numel(x0)));
  lv_batch_free(&e0);
  lv_batch_free(&e1);
  free(a);
  free(a5);
  free(b);
  free(c);
  free(d);
  lv_input_destroy(i0);
  lv_input_destroy(i1);
  lv_input_destroy(i2);
  lv_input_destroy(ioff);
  lv_params_free(p0);
  lv_params_free(p1);
  lv_params_free(p2);
  lv_params_free(poff);
}
END_TEST

START_TEST(test_input_needs_pcm) {
  write_utts("nopcm.tfrecord", 2, false);
  lv_params *p = params("nopcm.tfrecord", 0);
  set_all_on(p);
  lv_input *in = create(p);
  lv_batch b;
  lv_batch_init(&b);
  EXPECT_ERR(lv_input_train_batch(in, 0, &b), LV_ERR_CORRUPT, "needs the samples", "--write_pcm");
  lv_batch_free(&b);
  lv_input_destroy(in);
  lv_params_free(p);
  p = params("nopcm.tfrecord", 0);
  EXPECT_OK(lv_params_set_list(p, "noise_colors", lv_pvalue_append(lv_pvalue_list(), lv_pvalue_string("blue"))));
  EXPECT_OK(lv_params_set_list(p, "noise_snr_db_range", lv_pvalue_floats(1, (const double[]){5})));
  lv_params_freeze(p);
  EXPECT_ERR(lv_input_create(p, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.noise_snr_db_range");
  lv_params_free(p);
}
END_TEST

/* The curriculum params: short_first_epochs leaves the long utterances out of its epochs,
 * augment_start_epoch reads the stored frames before its epoch; both resume bit-identically. */
START_TEST(test_input_curriculum) {
  write_utts("a.tfrecord", 5, true); /* keys 26, 36, 46, 56, 66 */
  lv_params *ps = params("a.tfrecord", 0), *pall = params("a.tfrecord", 0), *pla = params("a.tfrecord", 0),
            *poff = params("a.tfrecord", 0);
  EXPECT_OK(lv_params_set_int(ps, "short_first_epochs", 1000));
  EXPECT_OK(lv_params_set_int(ps, "short_first_max_frames", 40));
  set_all_on(pla);
  EXPECT_OK(lv_params_set_int(pla, "augment_start_epoch", 1000));
  lv_input *is = create(ps), *iall = create(pall), *ila = create(pla), *ioff = create(poff);
  lv_batch b;
  lv_batch_init(&b);
  bool long_seen = false;
  for (int step = 0; step < 6; step++) {
    EXPECT_OK(lv_input_train_batch(is, step, &b));
    const lv_tensor *k = lv_batch_get(&b, "bucket_keys");
    for (int64_t i = 0; i < lv_tensor_numel(k); i++) ck_assert_int_le(((const int32_t *)k->data)[i], 40);
    EXPECT_OK(lv_input_train_batch(iall, step, &b));
    k = lv_batch_get(&b, "bucket_keys");
    for (int64_t i = 0; i < lv_tensor_numel(k); i++) long_seen |= ((const int32_t *)k->data)[i] > 40;
  }
  ck_assert(long_seen);
  lv_batch_free(&b);
  /* augmentation from a later epoch: the stored frames until then */
  float *a, *d;
  size_t na = train_batches(ila, 0, 6, &a), nd = train_batches(ioff, 0, 6, &d);
  ck_assert(na == nd && !memcmp(a, d, sizeof(float) * na));
  free(a);
  free(d);
  /* both switching within the run (records of epochs 0, 1 short; augmented from epoch 1):
   * the same batches from step 5 whether resumed there or not */
  lv_params *pc[2] = {params("a.tfrecord", 0), params("a.tfrecord", 2)};
  for (int i = 0; i < 2; i++) {
    set_all_on(pc[i]);
    EXPECT_OK(lv_params_set_int(pc[i], "augment_start_epoch", 1));
    EXPECT_OK(lv_params_set_int(pc[i], "short_first_epochs", 2));
    EXPECT_OK(lv_params_set_int(pc[i], "short_first_max_frames", 50));
  }
  lv_input *ic0 = create(pc[0]), *ic1 = create(pc[1]);
  float *full, *resumed;
  size_t nf = train_batches(ic0, 0, 12, &full), nr = train_batches(ic1, 5, 12, &resumed);
  ck_assert(nr <= nf && !memcmp(full + nf - nr, resumed, sizeof(float) * nr));
  free(full);
  free(resumed);
  lv_input *inputs[] = {is, iall, ila, ioff, ic0, ic1};
  lv_params *params_[] = {ps, pall, pla, poff, pc[0], pc[1]};
  for (int i = 0; i < 6; i++) {
    lv_input_destroy(inputs[i]);
    lv_params_free(params_[i]);
  }
  /* short_first_epochs without a length */
  lv_params *pbad = params("a.tfrecord", 0);
  EXPECT_OK(lv_params_set_int(pbad, "short_first_epochs", 1));
  lv_params_freeze(pbad);
  lv_input *in = NULL;
  EXPECT_ERR(lv_input_create(pbad, lv_input_no_shard(), &in), LV_ERR_INVALID, "short_first_max_frames");
  lv_params_free(pbad);
}
END_TEST

/* Lingvo's noise_scale: Gaussian dither of that stddev in int16 units, before the window;
 * doubling it doubles every magnitude of silence: log-mels up by ln 2. */
START_TEST(test_frontend_dither_scale) {
  float zeros[16000] = {0};
  static float a[100 * 80], b[100 * 80];
  double mean[2];
  for (int k = 0; k < 2; k++) {
    lv_mel_frontend_opts o = lv_mel_frontend_opts_librispeech();
    o.noise_scale = k ? 16 : 8;
    lv_mel_frontend *fe;
    EXPECT_OK(lv_mel_frontend_create(&o, &fe));
    int64_t t = lv_mel_frontend_num_frames(fe, 16000);
    EXPECT_OK(lv_mel_frontend_compute(fe, zeros, NULL, 16000, k ? b : a, NULL));
    double s = 0;
    for (int64_t i = 0; i < t * 80; i++) s += (k ? b : a)[i];
    mean[k] = s / (double)(t * 80);
    lv_mel_frontend_free(fe);
  }
  ck_assert_msg(fabs(mean[1] - mean[0] - log(2.0)) < 0.01, "log-mel means %g, %g", mean[0], mean[1]);
}
END_TEST

static void setup(void) { lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_asr_augment"); }
static void teardown(void) { lv_test_rmtree(g_dir); }

static Suite *suite(void) {
  Suite *s = suite_create("asr_augment");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_noise_snr_and_colours);
  tcase_add_test(tc, test_speed);
  tcase_add_test(tc, test_reverb);
  tcase_add_test(tc, test_apply_deterministic);
  tcase_add_test(tc, test_input_off_identical);
  tcase_add_test(tc, test_input_deterministic_and_resumable);
  tcase_add_test(tc, test_input_needs_pcm);
  tcase_add_test(tc, test_input_curriculum);
  tcase_add_test(tc, test_frontend_dither_scale);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
