/* The log-mel frontend (audio/mel_frontend.h) against Lingvo's frontend_test.py
 * (reference/lingvo_asr_lm.md §2.4: 24 kHz, 2 bins, unstacked / left- / right-stacked
 * means and deviations, padding counts, mean/variance normalisation) and the 16 kHz
 * LibriSpeech-parameter vector and mel matrix rows of the same section; and the audio
 * reader (audio/audio_file.h): 16-bit integers exact, resampling, stereo mixdown,
 * truncated, empty and non-audio files. Test audio: tests/data/asr/ (Lingvo's
 * lingvo/tools/testdata). */
#include <check.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audio/audio_file.h"
#include "audio/mel_frontend.h"
#include "base/file.h"
#include "check_util.h"

static const char *testdata(void) {
  const char *t = getenv("LV_TESTDATA");
  return t && *t ? t : "tests/data";
}

static lv_audio read_wav(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/asr/%s", testdata(), name);
  lv_audio a;
  EXPECT_OK(lv_audio_read_file(path, 0, &a));
  return a;
}

/* Lingvo's test params: 24 kHz, 2 bins, no dither. */
static lv_mel_frontend_opts test_opts(void) {
  lv_mel_frontend_opts o = lv_mel_frontend_opts_default();
  o.sample_rate = 24000;
  o.num_bins = 2;
  o.noise_scale = 0;
  return o;
}

/* Frames [t, dim] of `a`'s first n samples (n < 0: all), with paddings. */
static float *run(const lv_mel_frontend_opts *o, const lv_audio *a, int64_t n, const float *pcm_pad, int64_t *t,
                  float **pad) {
  lv_mel_frontend *fe;
  EXPECT_OK(lv_mel_frontend_create(o, &fe));
  if (n < 0) n = a->n;
  *t = lv_mel_frontend_num_frames(fe, n);
  int dim = lv_mel_frontend_output_dim(fe);
  float *f = malloc(sizeof(float) * (size_t)(*t * dim + 1));
  float *p = malloc(sizeof(float) * (size_t)(*t + 1));
  EXPECT_OK(lv_mel_frontend_compute(fe, a->samples, pcm_pad, n, f, p));
  lv_mel_frontend_free(fe);
  if (pad)
    *pad = p;
  else
    free(p);
  return f;
}

/* Per-column mean and ddof=1 deviation, as frontend_test.py computes them. */
static void expect_stats(const float *f, int64_t t, int dim, const double *mean, const double *sd) {
  for (int j = 0; j < dim; j++) {
    double mu = 0, v = 0;
    for (int64_t i = 0; i < t; i++) mu += f[i * dim + j];
    mu /= (double)t;
    for (int64_t i = 0; i < t; i++) v += (f[i * dim + j] - mu) * (f[i * dim + j] - mu);
    double s = sqrt(v / (double)(t - 1));
    ck_assert_msg(fabs(mu - mean[j]) <= 1e-4, "column %d: mean %.8f, want %.8f", j, mu, mean[j]);
    ck_assert_msg(fabs(s - sd[j]) <= 1e-3, "column %d: stddev %.8f, want %.8f", j, s, sd[j]);
  }
}

START_TEST(test_pcm_in_int16_range) {
  lv_audio a = read_wav("gan_or_vae.wav");
  ck_assert_int_eq(a.rate, 24000);
  ck_assert_int_eq(a.n, 75900);
  ck_assert_int_eq(a.source_channels, 1);
  float mx = 0;
  for (int64_t i = 0; i < a.n; i++) {
    ck_assert_msg(a.samples[i] == floorf(a.samples[i]), "sample %lld = %g is not an integer", (long long)i,
                  a.samples[i]);
    if (fabsf(a.samples[i]) > mx) mx = fabsf(a.samples[i]);
  }
  ck_assert(mx > 2 && mx < 33000);
  lv_audio_free(&a);
}
END_TEST

START_TEST(test_unstacked) {
  lv_audio a = read_wav("gan_or_vae.wav");
  lv_mel_frontend_opts o = test_opts();
  static const double mean[] = {13.46184731, 13.30099297}, sd[] = {1.3840059, 1.24434352};
  int64_t t;
  float *pad;
  /* Lingvo feeds packets of 11 samples: 75889 of the 75900. */
  float *f = run(&o, &a, a.n / 11 * 11, NULL, &t, &pad);
  ck_assert_int_eq(t, 314);
  expect_stats(f, t, 2, mean, sd);
  for (int64_t i = 0; i < t; i++) ck_assert(pad[i] == 0);
  free(f);
  free(pad);
  f = run(&o, &a, -1, NULL, &t, NULL);
  ck_assert_int_eq(t, 314);
  expect_stats(f, t, 2, mean, sd);
  free(f);
  lv_audio_free(&a);
}
END_TEST

START_TEST(test_left_stacked) {
  lv_audio a = read_wav("gan_or_vae.wav");
  lv_mel_frontend_opts o = test_opts();
  o.stack_left_context = 2;
  o.frame_stride = 3;
  static const double mean[] = {13.38236332, 13.2698698, 13.45229626, 13.26469517, 13.46731281, 13.31649303},
                      sd[] = {1.52104115, 1.27433181, 1.41266346, 1.27072334, 1.41251481, 1.28583682};
  int64_t t;
  float *f = run(&o, &a, a.n / 11 * 11, NULL, &t, NULL);
  ck_assert_int_eq(t, 105);
  expect_stats(f, t, 6, mean, sd);
  free(f);
  lv_audio_free(&a);
}
END_TEST

START_TEST(test_right_stacked) {
  lv_audio a = read_wav("gan_or_vae.wav");
  lv_mel_frontend_opts o = test_opts();
  o.stack_right_context = 2;
  o.frame_stride = 3;
  static const double mean[] = {13.46731281, 13.31649303, 13.41263676, 13.28540039, 13.48256969, 13.2802248},
                      sd[] = {1.41251481, 1.28583682, 1.43964291, 1.23710775, 1.32300735, 1.23345602};
  int64_t t;
  float *f = run(&o, &a, a.n / 11 * 11, NULL, &t, NULL);
  ck_assert_int_eq(t, 105);
  expect_stats(f, t, 6, mean, sd);
  free(f);
  lv_audio_free(&a);
}
END_TEST

/* testMelFeaturesPadded{Left,Right}Stacked: packets of 11 samples, the first 455
 * unpadded. */
static void padded_case(int left, int right, int want_unpadded) {
  lv_audio a = read_wav("gan_or_vae.wav");
  lv_mel_frontend_opts o = test_opts();
  o.stack_left_context = left;
  o.stack_right_context = right;
  o.frame_stride = 3;
  int64_t n = a.n / 11 * 11;
  float *pp = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) pp[i] = i < 455 * 11 ? 0.0f : 1.0f;
  int64_t t;
  float *pad;
  float *f = run(&o, &a, n, pp, &t, &pad);
  for (int64_t i = 0; i < t; i++)
    ck_assert_msg(pad[i] == (i < want_unpadded ? 0.0f : 1.0f), "frame %lld: padding %g", (long long)i, pad[i]);
  free(f);
  free(pad);
  free(pp);
  lv_audio_free(&a);
}

START_TEST(test_padded_left) { padded_case(2, 0, 7); }
END_TEST

START_TEST(test_padded_right) { padded_case(0, 2, 6); }
END_TEST

START_TEST(test_mean_var_normalization) {
  lv_audio a = read_wav("gan_or_vae.wav");
  lv_mel_frontend_opts o = test_opts();
  o.stack_left_context = 2;
  o.frame_stride = 3;
  static const float mean[] = {13.38236332f, 13.2698698f}, sd[] = {1.52104115f, 1.27433181f};
  o.per_bin_mean = mean;
  o.per_bin_stddev = sd;
  int64_t t;
  float *f = run(&o, &a, a.n / 11 * 11, NULL, &t, NULL);
  static const double zero[] = {0, 0}, one[] = {1, 1};
  /* Only the base bins (the first num_bins columns), as the Lingvo test. */
  float *base = malloc(sizeof(float) * (size_t)t * 2);
  for (int64_t i = 0; i < t; i++) memcpy(base + i * 2, f + i * 6, sizeof(float) * 2);
  expect_stats(base, t, 2, zero, one);
  free(base);
  free(f);
  lv_audio_free(&a);
}
END_TEST

START_TEST(test_librispeech_16k_vector) {
  lv_audio a = read_wav("gan_or_vae.16k.wav");
  ck_assert_int_eq(a.n, 50600);
  lv_mel_frontend_opts o = lv_mel_frontend_opts_librispeech();
  lv_mel_frontend *fe;
  EXPECT_OK(lv_mel_frontend_create(&o, &fe));
  ck_assert_int_eq(lv_mel_frontend_frame_size(fe), 401);
  ck_assert_int_eq(lv_mel_frontend_frame_step(fe), 160);
  ck_assert_int_eq(lv_mel_frontend_fft_size(fe), 1024);
  {
    /* Python's round halves to even: 22050 Hz x 10 ms = 220.5 -> 220, x 25 ms -> 551.25
     * -> 551 (+1); 44100 Hz x 25 ms = 1102.5 -> 1102 (+1). */
    lv_mel_frontend_opts o2 = o;
    lv_mel_frontend *f2;
    o2.sample_rate = 22050;
    EXPECT_OK(lv_mel_frontend_create(&o2, &f2));
    ck_assert_int_eq(lv_mel_frontend_frame_step(f2), 220);
    ck_assert_int_eq(lv_mel_frontend_frame_size(f2), 552);
    lv_mel_frontend_free(f2);
    o2.sample_rate = 44100;
    EXPECT_OK(lv_mel_frontend_create(&o2, &f2));
    ck_assert_int_eq(lv_mel_frontend_frame_step(f2), 441);
    ck_assert_int_eq(lv_mel_frontend_frame_size(f2), 1103);
    lv_mel_frontend_free(f2);
  }
  const float *w = lv_mel_frontend_mel_matrix(fe);
  static const double w0[] = {0.658289, 0.695546, 0.061066};
  for (int k = 0; k < 513; k++) {
    if (k >= 9 && k <= 11)
      ck_assert_msg(fabs(w[k * 80] - w0[k - 9]) < 1e-5, "W[%d][0] = %.6f, want %.6f", k, w[k * 80], w0[k - 9]);
    else
      ck_assert_msg(w[k * 80] == 0, "W[%d][0] = %g, want 0", k, w[k * 80]);
    ck_assert_msg((w[k * 80 + 79] != 0) == (k >= 457 && k <= 486), "W[%d][79] = %g", k, w[k * 80 + 79]);
  }
  lv_mel_frontend_free(fe);
  int64_t t;
  float *f = run(&o, &a, -1, NULL, &t, NULL);
  ck_assert_int_eq(t, 314);
  static const double f0[] = {3.789163, 4.429522, 4.862923, 5.106376, 5.199069, 4.919166, 4.198346, 3.706137};
  static const double f100a[] = {9.825141, 10.182212, 9.812928, 9.028482, 7.879669, 9.318753, 10.580511, 11.061647};
  static const double f100b[] = {7.808452, 7.908670, 7.298235, 7.504478, 7.897548, 7.735654, 8.243244, 9.461059};
  for (int j = 0; j < 8; j++) {
    ck_assert_msg(fabs(f[j] - f0[j]) < 1e-4, "frame 0 bin %d: %.6f, want %.6f", j, f[j], f0[j]);
    ck_assert_msg(fabs(f[100 * 80 + j] - f100a[j]) < 1e-4, "frame 100 bin %d: %.6f", j, f[100 * 80 + j]);
    ck_assert_msg(fabs(f[100 * 80 + 72 + j] - f100b[j]) < 1e-4, "frame 100 bin %d: %.6f", 72 + j,
                  f[100 * 80 + 72 + j]);
  }
  double mean = 0;
  for (int64_t i = 0; i < t * 80; i++) mean += f[i];
  mean /= (double)(t * 80);
  ck_assert_msg(fabs(mean - 9.178534) < 1e-4, "mean %.6f, want 9.178534", mean);
  free(f);
  lv_audio_free(&a);
}
END_TEST

START_TEST(test_frame_counts_and_dither) {
  lv_mel_frontend_opts o = lv_mel_frontend_opts_default();
  lv_mel_frontend *fe;
  EXPECT_OK(lv_mel_frontend_create(&o, &fe));
  ck_assert_int_eq(lv_mel_frontend_num_frames(fe, 400), 0);
  ck_assert_int_eq(lv_mel_frontend_num_frames(fe, 401), 1);
  ck_assert_int_eq(lv_mel_frontend_num_frames(fe, 560), 1);
  ck_assert_int_eq(lv_mel_frontend_num_frames(fe, 561), 2);
  lv_mel_frontend_free(fe);
  o.pad_end = true;
  EXPECT_OK(lv_mel_frontend_create(&o, &fe));
  ck_assert_int_eq(lv_mel_frontend_num_frames(fe, 1), 1);
  ck_assert_int_eq(lv_mel_frontend_num_frames(fe, 161), 2);
  lv_mel_frontend_free(fe);
  /* Dither (default noise_scale 8) lifts silence above the floor, the same way for the
   * same seed. */
  o = lv_mel_frontend_opts_default();
  float zeros[4000] = {0}, a[24 * 80], b[24 * 80];
  EXPECT_OK(lv_mel_frontend_create(&o, &fe));
  ck_assert_int_eq(lv_mel_frontend_num_frames(fe, 4000), 23);
  EXPECT_OK(lv_mel_frontend_compute(fe, zeros, NULL, 4000, a, NULL));
  lv_mel_frontend_free(fe);
  EXPECT_OK(lv_mel_frontend_create(&o, &fe));
  EXPECT_OK(lv_mel_frontend_compute(fe, zeros, NULL, 4000, b, NULL));
  lv_mel_frontend_free(fe);
  ck_assert(memcmp(a, b, sizeof(float) * 23 * 80) == 0);
  int above = 0;
  for (int i = 0; i < 23 * 80; i++) above += a[i] > 0;
  ck_assert_int_gt(above, 23 * 40);
  o.noise_scale = 0;
  EXPECT_OK(lv_mel_frontend_create(&o, &fe));
  EXPECT_OK(lv_mel_frontend_compute(fe, zeros, NULL, 4000, a, NULL));
  lv_mel_frontend_free(fe);
  for (int i = 0; i < 23 * 80; i++) ck_assert(a[i] == 0.0f); /* ln(max(1, 0)) */
}
END_TEST

START_TEST(test_bad_options) {
  lv_mel_frontend_opts o = lv_mel_frontend_opts_default();
  lv_mel_frontend *fe;
  o.frame_stride = 0;
  EXPECT_ERR(lv_mel_frontend_create(&o, &fe), LV_ERR_INVALID, "frame_stride 0");
  o = lv_mel_frontend_opts_default();
  o.upper_edge_hertz = 9000;
  EXPECT_ERR(lv_mel_frontend_create(&o, &fe), LV_ERR_INVALID, "upper_edge_hertz 9000", "8000");
  o = lv_mel_frontend_opts_default();
  o.num_bins = 0;
  EXPECT_ERR(lv_mel_frontend_create(&o, &fe), LV_ERR_INVALID, "num_bins 0");
  o = lv_mel_frontend_opts_default();
  o.frame_step_ms = 0.01;
  EXPECT_ERR(lv_mel_frontend_create(&o, &fe), LV_ERR_INVALID, "frame_step_ms");
}
END_TEST

/* Writes n frames of `ch` channels at `rate` as a WAV of `subformat` (SF_FORMAT_PCM_16, ...). */
static void write_wav_as(const char *path, int subformat, int rate, int ch, const short *pcm, int64_t n) {
  SF_INFO info = {.samplerate = rate, .channels = ch, .format = SF_FORMAT_WAV | subformat};
  SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
  ck_assert_msg(sf, "%s: %s", path, sf_strerror(NULL));
  ck_assert_int_eq(sf_writef_short(sf, pcm, n), n);
  sf_close(sf);
}

/* Writes n frames of `ch` channels of 16-bit PCM at `rate`. */
static void write_wav(const char *path, int rate, int ch, const short *pcm, int64_t n) {
  write_wav_as(path, SF_FORMAT_PCM_16, rate, ch, pcm, n);
}

START_TEST(test_audio_files) {
  char dir[256], path[512];
  lv_test_mkdtemp(dir, sizeof dir, "lv_audio");
  enum { N = 8000 };
  static short st[2 * N], mono[N];
  for (int i = 0; i < N; i++) {
    mono[i] = (short)(8000 * sin(2 * M_PI * 440.0 * i / 8000.0));
    st[2 * i] = (short)(i % 2 ? 1000 : 3000);
    st[2 * i + 1] = (short)(i % 2 ? -1000 : 1001);
  }
  lv_audio a;
  /* Stereo: channels averaged. */
  snprintf(path, sizeof path, "%s/stereo.wav", dir);
  write_wav(path, 16000, 2, st, N);
  EXPECT_OK(lv_audio_read_file(path, 16000, &a));
  ck_assert_int_eq(a.n, N);
  ck_assert_int_eq(a.source_channels, 2);
  ck_assert(a.samples[0] == 2000.5f && a.samples[1] == 0.0f);
  lv_audio_free(&a);
  /* 8 kHz: one second becomes 16000 samples at 16 kHz, the tone kept. */
  snprintf(path, sizeof path, "%s/8k.wav", dir);
  write_wav(path, 8000, 1, mono, N);
  EXPECT_OK(lv_audio_read_file(path, 16000, &a));
  ck_assert_int_eq(a.source_rate, 8000);
  ck_assert_int_eq(a.rate, 16000);
  ck_assert_msg(a.n >= 15990 && a.n <= 16010, "%lld samples", (long long)a.n);
  double e = 0;
  for (int64_t i = 2000; i < 14000; i++) e += (double)a.samples[i] * a.samples[i];
  ck_assert_msg(fabs(sqrt(e / 12000) - 8000 / sqrt(2)) < 60, "rms %.1f", sqrt(e / 12000));
  lv_audio_free(&a);
  /* Truncated: the header promises 8000 frames, the file holds half. */
  char *bytes;
  size_t len;
  EXPECT_OK(lv_file_read_all(path, &bytes, &len));
  snprintf(path, sizeof path, "%s/cut.wav", dir);
  EXPECT_OK(lv_file_write_atomic(path, bytes, len / 2));
  EXPECT_ERR(lv_audio_read_file(path, 16000, &a), LV_ERR_CORRUPT, "cut.wav", "truncated");
  EXPECT_ERR(lv_audio_decode(bytes, 30, "head.wav", 16000, &a), LV_ERR_CORRUPT, "head.wav");
  /* Written to a pipe: RIFF and data sizes 0xFFFFFFFF (the writer could not seek back).
   * The file is whole: it reads in full, not as truncated. */
  {
    char *pipe_wav = malloc(len);
    ck_assert_ptr_nonnull(pipe_wav);
    memcpy(pipe_wav, bytes, len);
    char *dchunk = memmem(pipe_wav, len, "data", 4);
    ck_assert_ptr_nonnull(dchunk);
    memset(pipe_wav + 4, 0xff, 4);
    memset(dchunk + 4, 0xff, 4);
    EXPECT_OK(lv_audio_decode(pipe_wav, len, "pipe.wav", 0, &a));
    ck_assert_int_eq(a.n, N);
    lv_audio_free(&a);
    free(pipe_wav);
  }
  free(bytes);
  /* 8-bit mono with an odd number of samples: the data chunk has an odd length and a pad
   * byte follows (legal RIFF; libsndfile's log says "should be an even number"): it reads
   * in full. Cut short, it is still truncated. */
  static const int kOdd[] = {SF_FORMAT_PCM_U8, SF_FORMAT_ULAW, SF_FORMAT_ALAW};
  for (size_t k = 0; k < sizeof kOdd / sizeof *kOdd; k++) {
    snprintf(path, sizeof path, "%s/odd%zu.wav", dir, k);
    write_wav_as(path, kOdd[k], 8000, 1, mono, N - 1);
    EXPECT_OK(lv_audio_read_file(path, 0, &a));
    ck_assert_int_eq(a.n, N - 1);
    ck_assert_msg(fabs(a.samples[2] - mono[2]) < 0.03 * 8000, "format %d: %g against %d", kOdd[k], a.samples[2],
                  mono[2]);
    lv_audio_free(&a);
    EXPECT_OK(lv_file_read_all(path, &bytes, &len));
    snprintf(path, sizeof path, "%s/odd%zu_cut.wav", dir, k);
    EXPECT_OK(lv_file_write_atomic(path, bytes, len / 2));
    free(bytes);
    EXPECT_ERR(lv_audio_read_file(path, 0, &a), LV_ERR_CORRUPT, "_cut.wav", "truncated");
  }
  snprintf(path, sizeof path, "%s/empty.wav", dir);
  EXPECT_OK(lv_file_write_atomic(path, "", 0));
  EXPECT_ERR(lv_audio_read_file(path, 16000, &a), LV_ERR_CORRUPT, "empty.wav", "empty");
  snprintf(path, sizeof path, "%s/text.wav", dir);
  EXPECT_OK(lv_file_write_atomic(path, "hello, this is not audio\n", 25));
  EXPECT_ERR(lv_audio_read_file(path, 16000, &a), LV_ERR_CORRUPT, "text.wav", "not an audio file");
  snprintf(path, sizeof path, "%s/missing.wav", dir);
  EXPECT_ERR(lv_audio_read_file(path, 16000, &a), LV_ERR_NOT_FOUND, "missing.wav");
  lv_test_rmtree(dir);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("asr_frontend");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_pcm_in_int16_range);
  tcase_add_test(tc, test_unstacked);
  tcase_add_test(tc, test_left_stacked);
  tcase_add_test(tc, test_right_stacked);
  tcase_add_test(tc, test_padded_left);
  tcase_add_test(tc, test_padded_right);
  tcase_add_test(tc, test_mean_var_normalization);
  tcase_add_test(tc, test_librispeech_16k_vector);
  tcase_add_test(tc, test_frame_counts_and_dither);
  tcase_add_test(tc, test_bad_options);
  tcase_add_test(tc, test_audio_files);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
