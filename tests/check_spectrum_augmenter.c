/* SpectrumAugmenter (layers/spectrum_augmenter.h): Lingvo's warp-matrix test vector
 * (spectrum_augmenter_test.py testSpectrumAugmenterWarpMatrixConstructor), the structural
 * facts of its mask tests (§3.6: sizes under the limits, inside the unpadded length, the
 * count, masks_per_frame and max_ratio), warps that keep padded frames and constants,
 * masks that depend on the step only (resume repeats them), and AsrEncoder applying it in
 * training only (with use_specaugment) and never changing an eval pass. */
#include <check.h>

#include "layer_fixture.h"
#include "layers/asr_encoder.h"
#include "layers/owner.h"
#include "layers/spectrum_augmenter.h"

START_TEST(test_warp_matrix_vector) {
  /* [test] Lingvo: origin [2,4,4,5], destination [3,2,6,8], choose_range [4,8,8,10]. */
  const float origin[4] = {2, 4, 4, 5}, dest[4] = {3, 2, 6, 8};
  const int64_t range[4] = {4, 8, 8, 10};
  static const float want[4][10] = {
      {0, 0.6666667f, 1.3333333f, 2, 4, 5, 6, 7, 8, 9},
      {0, 2, 4, 4.6666667f, 5.3333333f, 6, 6.6666667f, 7.3333333f, 8, 9},
      {0, 0.6666667f, 1.3333333f, 2, 2.6666667f, 3.3333333f, 4, 6, 8, 9},
      {0, 0.625f, 1.25f, 1.875f, 2.5f, 3.125f, 3.75f, 4.375f, 5, 7.5f}};
  float w[4 * 10 * 10];
  lv_specaug_construct_warp(4, 10, origin, dest, range, w);
  for (int b = 0; b < 4; b++)
    for (int i = 0; i < 10; i++) {
      double s = 0;
      for (int j = 0; j < 10; j++) s += w[(b * 10 + i) * 10 + j] * j;
      ck_assert_msg(fabs(s - want[b][i]) < 1e-5, "row %d [%d]: %.7f, Lingvo %.7f", b, i, s, want[b][i]);
    }
}
END_TEST

/* Zero runs of one mask row: their count and the longest. */
static void runs(const float *m, int n, int *count, int *longest, int *last_zero) {
  *count = *longest = 0;
  *last_zero = -1;
  for (int i = 0, cur = 0; i < n; i++) {
    if (m[i] == 0.0f) {
      if (!cur++) ++*count;
      if (cur > *longest) *longest = cur;
      *last_zero = i;
    } else {
      cur = 0;
    }
  }
}

START_TEST(test_time_mask_structure) {
  /* Lingvo's testSpectrumAugmenterWithTimeMask: batch 5, T 20, valid lengths 12..16,
   * time_mask_max_frames 5, count 2: one mask is at most 4 frames, inside the length. */
  enum { B = 5, T = 20 };
  const int64_t len[B] = {12, 13, 14, 15, 16};
  int seen_longest = 0, masked_rows = 0;
  for (uint64_t seed = 0; seed < 300; seed++) {
    lv_rng r;
    lv_rng_init(&r, seed, 9);
    float m[B * T];
    lv_specaug_mask(&r, B, len, T, 5, 0.0, 1, 1.0, m);
    for (int b = 0; b < B; b++) {
      int count, longest, last;
      runs(m + b * T, T, &count, &longest, &last);
      ck_assert_int_le(count, 1);
      ck_assert_int_le(longest, 4);
      ck_assert_int_lt(last, len[b]);
      if (longest > seen_longest) seen_longest = longest;
      masked_rows += count;
    }
    lv_rng_init(&r, seed, 10);
    lv_specaug_mask(&r, B, len, T, 5, 0.0, 2, 1.0, m);
    for (int b = 0; b < B; b++) {
      int count, longest, last;
      runs(m + b * T, T, &count, &longest, &last);
      ck_assert_int_le(count, 2);
      ck_assert_int_le(longest, 8);
      ck_assert_int_lt(last, len[b]);
    }
  }
  ck_assert_int_eq(seen_longest, 4); /* int(5 * u) reaches 4, never 5 */
  ck_assert_int_gt(masked_rows, 300 * B / 2);
  /* max_ratio 0.1 of 12 frames: bound int(1.2) = 1 frame per mask. */
  for (uint64_t seed = 0; seed < 50; seed++) {
    lv_rng r;
    lv_rng_init(&r, seed, 11);
    float m[B * T];
    lv_specaug_mask(&r, B, len, T, 0, 0.0, 3, 0.1, m);
    for (int b = 0; b < B; b++) {
      int count, longest, last;
      runs(m + b * T, T, &count, &longest, &last);
      ck_assert_int_le(longest, 3);
      ck_assert_int_le(count, 3);
    }
  }
  /* masks_per_frame 0.1 of 12..16 frames: masks 0 and 1 count, not 2..9 of count 10. */
  for (uint64_t seed = 0; seed < 50; seed++) {
    lv_rng r;
    lv_rng_init(&r, seed, 12);
    float m[B * T];
    lv_specaug_mask(&r, B, len, T, 3, 0.1, 10, 1.0, m);
    for (int b = 0; b < B; b++) {
      int count, longest, last;
      runs(m + b * T, T, &count, &longest, &last);
      ck_assert_int_le(count, 2);
      ck_assert_int_le(longest, 4);
    }
  }
}
END_TEST

START_TEST(test_freq_mask_structure) {
  enum { B = 4, F = 80 };
  const int64_t range[B] = {F, F, F, F};
  int seen = 0;
  for (uint64_t seed = 0; seed < 200; seed++) {
    lv_rng r;
    lv_rng_init(&r, seed, 3);
    float m[B * F];
    lv_specaug_mask(&r, B, range, F, 27, 0.0, 1, 1.0, m);
    for (int b = 0; b < B; b++) {
      int count, longest, last;
      runs(m + b * F, F, &count, &longest, &last);
      ck_assert_int_le(longest, 26);
      if (longest > seen) seen = longest;
    }
  }
  ck_assert_int_ge(seen, 24);
}
END_TEST

START_TEST(test_random_warp_keeps_padding_and_constants) {
  /* Every row has a padded frame: Lingvo's map sends frame i < L to a point in [0, L),
   * interpolated between frames that exist; with L = N the last rows would lean on a
   * frame N that does not, and lose weight (as in Lingvo). */
  enum { B = 3, N = 32 };
  const int64_t len[B] = {31, 17, 1};
  for (uint64_t seed = 0; seed < 100; seed++) {
    lv_rng r;
    lv_rng_init(&r, seed, 5);
    float w[B * N * N];
    lv_specaug_warp_matrix(&r, B, len, N, 5, 0.2, w);
    for (int b = 0; b < B; b++) {
      float prev = -1;
      for (int i = 0; i < N; i++) {
        double s = 0, ramp = 0;
        for (int j = 0; j < N; j++) {
          s += w[(b * N + i) * N + j];
          ramp += w[(b * N + i) * N + j] * j;
        }
        ck_assert_msg(fabs(s - 1.0) < 1e-5, "row %d of batch %d sums to %f", i, b, s);
        ck_assert_msg(ramp >= prev - 1e-5, "not monotone at %d", i);
        prev = (float)ramp;
        /* The shift is at most min(5, int(0.2 * len)); padded frames map to themselves. */
        if (i >= len[b] || len[b] < 2) ck_assert_msg(fabs(ramp - i) < 1e-4, "padded %d of %d: %f", i, b, ramp);
        double lim = len[b] * 0.2 < 5 ? (int)(len[b] * 0.2) : 5;
        ck_assert_msg(fabs(ramp - i) <= lim + 1e-4, "frame %d of batch %d moved by %f > %f", i, b, ramp - i, lim);
      }
    }
  }
}
END_TEST

enum { SB = 3, ST = 24, SF = 10 };
static const int kLens[SB] = {24, 15, 9};

static void sa_inputs(lv_graph *g, lv_tensor **x, lv_tensor **pads) {
  float xv[SB * ST * SF], pv[SB * ST];
  for (int b = 0; b < SB; b++)
    for (int t = 0; t < ST; t++) {
      pv[b * ST + t] = t < kLens[b] ? 0.0f : 1.0f;
      for (int f = 0; f < SF; f++) xv[(b * ST + t) * SF + f] = 1.0f + 0.01f * (float)(t * SF + f);
    }
  *x = lf_tensor(g, lv_shape4(SB, ST, SF, 1), xv);
  *pads = lf_tensor(g, lv_shape2(SB, ST), pv);
}

static void sa_run(lf_fixture *f, int64_t step, float *out) {
  lv_graph_reset(f->g);
  lv_graph_set_training(f->g, true);
  lv_graph_set_step(f->g, step);
  lv_tensor *x, *pads;
  sa_inputs(f->g, &x, &pads);
  lv_tensor *y = lv_spectrum_augmenter_fprop((lv_spectrum_augmenter *)f->l, f->g, x, pads);
  lf_ok(f->g);
  ck_assert_int_eq(lv_tensor_numel(y), SB * ST * SF);
  EXPECT_OK(lv_tensor_to_host(y, out));
}

START_TEST(test_layer_masks_follow_the_step) {
  lf_fixture f;
  lf_open(&f, "SpectrumAugmenter",
          LF_SET("name=specaugment", "freq_mask_max_bins=4", "freq_mask_count=1", "time_mask_max_frames=5",
                 "time_mask_count=2", "time_warp_max_frames=3", "time_warp_max_ratio=0.2"),
          1);
  ck_assert_int_eq(lv_varstore_count(f.vs), 0);
  float a[SB * ST * SF], b[SB * ST * SF], c[SB * ST * SF];
  sa_run(&f, 7, a);
  sa_run(&f, 8, b);
  sa_run(&f, 7, c);
  ck_assert(!memcmp(a, c, sizeof a));
  ck_assert(memcmp(a, b, sizeof a));
  /* Padded frames are neither warped nor masked; masked bins are 0. */
  int zeros = 0;
  for (int bb = 0; bb < SB; bb++)
    for (int t = 0; t < ST; t++)
      for (int k = 0; k < SF; k++) {
        float v = a[(bb * ST + t) * SF + k], in = 1.0f + 0.01f * (float)(t * SF + k);
        if (t >= kLens[bb]) ck_assert_msg(fabs(v - in) < 1e-4 || v == 0.0f, "padded %d,%d,%d: %f", bb, t, k, v);
        zeros += v == 0.0f;
      }
  ck_assert_int_gt(zeros, 0);
  lf_close(&f);
}
END_TEST

START_TEST(test_layer_off_by_default_and_bad_params) {
  lf_fixture f;
  lf_open(&f, "SpectrumAugmenter",
          LF_SET("name=specaugment", "freq_mask_max_bins=0", "time_mask_max_frames=0"), 1);
  lv_graph_set_training(f.g, true);
  lv_tensor *x, *pads;
  sa_inputs(f.g, &x, &pads);
  ck_assert_ptr_eq(lv_spectrum_augmenter_fprop((lv_spectrum_augmenter *)f.l, f.g, x, pads), x);
  lf_close(&f);
  lv_params *p = lf_params("SpectrumAugmenter", LF_SET("name=sa", "use_noise=True"));
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  lv_status s = lv_layer_create(p, NULL, vs, &l);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "use_noise"), "%s", lv_status_msg(s));
  lv_status_free(s);
  lv_layer_free(l);
  lv_params_free(p);
  p = lf_params("SpectrumAugmenter", LF_SET("name=sa", "time_warp_bound=elastic"));
  s = lv_layer_create(p, NULL, vs, &l);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "time_warp_bound"), "%s", lv_status_msg(s));
  lv_status_free(s);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

/* An AsrEncoder [B, T, 10, 1] -> 1 conv -> 1 BiLSTM of 8, with or without SpecAugment. */
static void encode(bool specaug, bool training, float *out, int64_t *n) {
  lv_layers_register_all();
  lv_params *p = lv_asr_encoder_params();
  int64_t in[4] = {-1, -1, SF, 1}, fs[4] = {3, 3, 1, 4}, st[2] = {2, 2};
  EXPECT_OK(lv_params_set_list(p, "input_shape", lv_pvalue_ints(4, in)));
  EXPECT_OK(lv_params_set_list(p, "conv_filter_shapes", lv_pvalue_append(lv_pvalue_list(), lv_pvalue_ints(4, fs))));
  EXPECT_OK(lv_params_set_list(p, "conv_filter_strides", lv_pvalue_append(lv_pvalue_list(), lv_pvalue_ints(2, st))));
  EXPECT_OK(lv_params_set_int(p, "num_cnn_layers", 1));
  EXPECT_OK(lv_params_set_int(p, "num_conv_lstm_layers", 0));
  EXPECT_OK(lv_params_set_int(p, "num_lstm_layers", 1));
  EXPECT_OK(lv_params_set_int(p, "lstm_cell_size", 8));
  EXPECT_OK(lv_params_set_bool(p, "use_specaugment", specaug));
  EXPECT_OK(lv_params_set_int(p, "specaugment_network.time_mask_max_frames", 6));
  EXPECT_OK(lv_params_set_int(p, "specaugment_network.freq_mask_max_bins", 3));
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_asr_encoder e;
  EXPECT_OK(lv_asr_encoder_init(&e, p, "task.encoder", "t/enc", vs));
  EXPECT_OK(lv_varstore_finalize(vs, 5));
  ck_assert(specaug == (e.specaug != NULL));
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, training);
  lv_graph_set_step(g, 3);
  lv_tensor *x, *pads, *enc = NULL, *ep = NULL;
  sa_inputs(g, &x, &pads);
  ck_assert(lv_asr_encoder_fprop(&e, g, x, pads, &enc, &ep));
  lf_ok(g);
  *n = lv_tensor_numel(enc);
  EXPECT_OK(lv_tensor_to_host(enc, out));
  lv_graph_destroy(g);
  lv_asr_encoder_free(&e);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}

START_TEST(test_encoder_training_only) {
  static float off[4096], on[4096], off_t[4096], on_t[4096];
  int64_t n1, n2, n3, n4;
  encode(false, false, off, &n1);
  encode(true, false, on, &n2);
  encode(false, true, off_t, &n3);
  encode(true, true, on_t, &n4);
  ck_assert(n1 == n2 && n2 == n3 && n3 == n4 && n1 < 4096);
  ck_assert_msg(!memcmp(off, on, sizeof(float) * (size_t)n1), "SpecAugment changed an eval pass");
  ck_assert_msg(memcmp(off_t, on_t, sizeof(float) * (size_t)n1), "SpecAugment did nothing in training");
}
END_TEST

int main(void) {
  Suite *s = suite_create("spectrum_augmenter");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_warp_matrix_vector);
  tcase_add_test(tc, test_time_mask_structure);
  tcase_add_test(tc, test_freq_mask_structure);
  tcase_add_test(tc, test_random_warp_keeps_padding_and_constants);
  tcase_add_test(tc, test_layer_masks_follow_the_step);
  tcase_add_test(tc, test_layer_off_by_default_and_bad_params);
  tcase_add_test(tc, test_encoder_training_only);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
