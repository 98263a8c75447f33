/* The int8 GEMM (kernels/cpu/cpu_int8.h): every path the CPU has against an exact
 * int32 / double reference of the same quantized arithmetic, on odd shapes; the paths
 * against each other bit for bit; and the product against the float one within the
 * quantization's error. A path the CPU lacks is a skipped case, never a pass. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "check_util.h"
#include "kernels/cpu/cpu_int8.h"
#include "kernels/cpu/cpu_kernels.h"

/* Shapes: one row, rows around the tiles' 2 and 4, k not a multiple of 4/16/64, n not a
 * multiple of 16 (and fewer columns than one block), and a model-sized one. */
static const int64_t kShapes[][3] = {
    {1, 1, 1},   {1, 7, 3},    {1, 512, 512}, {2, 33, 17},  {3, 65, 100}, {4, 130, 48},  {5, 16, 64},
    {7, 257, 31}, {9, 1000, 70}, {13, 6, 129}, {1, 2048, 33}, {16, 512, 1000}, {37, 99, 250},
};
#define N_SHAPES (sizeof kShapes / sizeof kShapes[0])

static float uniform(uint64_t seed, uint64_t i) { return 2.0f * lv_rng_uniform_at(seed, 0, i) - 1.0f; }

/* Random floats with a few outliers, so that a row's and a column's scales differ. */
static float *rand_floats(int64_t n, uint64_t seed) {
  float *x = malloc((size_t)n * sizeof *x);
  for (int64_t i = 0; i < n; i++) x[i] = uniform(seed, (uint64_t)i) * (i % 97 == 5 ? 4.0f : 1.0f);
  return x;
}

typedef struct qcase {
  int64_t m, k, n;
  float *x, *w, *bias;
  int8_t *qw, *qx;
  float *ws, *xs;
  lv_q8_mat mat;
} qcase;

static void qcase_make(qcase *c, int64_t m, int64_t k, int64_t n, uint64_t seed) {
  c->m = m, c->k = k, c->n = n;
  c->x = rand_floats(m * k, seed);
  c->w = rand_floats(k * n, seed + 1);
  c->bias = rand_floats(n, seed + 2);
  c->qw = malloc((size_t)(k * n));
  c->ws = malloc((size_t)n * sizeof *c->ws);
  c->qx = malloc((size_t)(m * k));
  c->xs = malloc((size_t)m * sizeof *c->xs);
  lv_q8_quantize(c->w, n, k, 1, n, c->qw, c->ws); /* per column */
  lv_q8_quantize(c->x, m, k, k, 1, c->qx, c->xs); /* per row */
  ck_assert(lv_q8_mat_pack(&c->mat, c->qw, c->ws, k, n));
}

static void qcase_free(qcase *c) {
  free(c->x), free(c->w), free(c->bias), free(c->qw), free(c->ws), free(c->qx), free(c->xs);
  lv_q8_mat_free(&c->mat);
}

/* Whether this CPU runs isa; a case on a path it lacks is skipped. */
static bool isa_runs(lv_int8_isa isa) {
  if (lv_cpu_int8_isa_ok(isa)) return true;
  lv_test_skip("this CPU lacks the int8 path %s", lv_int8_isa_names[isa]);
  return false;
}

/* The exact sum of a[i] . q[:, j] in 64 bits. */
static int64_t exact_sum(const qcase *c, int64_t i, int64_t j) {
  int64_t s = 0;
  for (int64_t p = 0; p < c->k; p++) s += (int64_t)c->qx[i * c->k + p] * c->qw[p * c->n + j];
  return s;
}

START_TEST(quantize_is_symmetric_per_channel) {
  /* Column 0: max 2.54 -> scale 0.02, values round half to even; column 1 all zero. */
  const float w[3][2] = {{2.54f, 0.0f}, {-0.03f, 0.0f}, {0.01f, 0.0f}};
  int8_t q[6];
  float s[2];
  lv_q8_quantize(&w[0][0], 2, 3, 1, 2, q, s);
  ck_assert_float_eq_tol(s[0], 0.02f, 1e-7);
  ck_assert_float_eq(s[1], 0.0f);
  ck_assert_int_eq(q[0], 127);
  ck_assert_int_eq(q[2], -2); /* -1.5 -> -2 */
  ck_assert_int_eq(q[4], 0);  /* 0.5 -> 0 */
  ck_assert_int_eq(q[1], 0);
  ck_assert_int_eq(q[3], 0);
  ck_assert_int_eq(q[5], 0);
  /* Never -128: |q| <= 127 even where x * 127 / max rounds past it. */
  const float r[4] = {-1.0f, 1.0f, -0.99999f, 0.5f};
  lv_q8_quantize(r, 1, 4, 4, 1, q, s);
  ck_assert_int_eq(q[0], -127);
  ck_assert_int_eq(q[1], 127);
}
END_TEST

/* Each path's int32 sums equal the exact ones (so every path's equal each other's). */
START_TEST(sums_are_exact_on_every_path) {
  const lv_int8_isa isa = (lv_int8_isa)_i;
  if (!isa_runs(isa)) return;
  for (size_t sh = 0; sh < N_SHAPES; sh++) {
    qcase c;
    qcase_make(&c, kShapes[sh][0], kShapes[sh][1], kShapes[sh][2], 100 + sh);
    int32_t *sums = malloc((size_t)(c.m * c.n) * sizeof *sums);
    lv_cpu_q8_sums_with(isa, c.m, c.qx, &c.mat, sums);
    for (int64_t i = 0; i < c.m; i++)
      for (int64_t j = 0; j < c.n; j++)
        ck_assert_msg(sums[i * c.n + j] == exact_sum(&c, i, j), "%s m %lld k %lld n %lld [%lld,%lld]: %d vs %lld",
                      lv_int8_isa_names[isa], (long long)c.m, (long long)c.k, (long long)c.n, (long long)i,
                      (long long)j, sums[i * c.n + j], (long long)exact_sum(&c, i, j));
    free(sums);
    qcase_free(&c);
  }
}
END_TEST

/* The extreme sums: every product 127 * 127 or -127 * 127 over a long k (saturating
 * 16-bit pair sums, vpmaddubsw's, would lose them). */
START_TEST(sums_do_not_saturate) {
  const lv_int8_isa isa = (lv_int8_isa)_i;
  if (!isa_runs(isa)) return;
  const int64_t m = 2, k = 4099, n = 17;
  int8_t *a = malloc((size_t)(m * k)), *q = malloc((size_t)(k * n));
  float *ws = calloc((size_t)n, sizeof *ws);
  for (int64_t p = 0; p < k; p++) {
    a[p] = 127, a[k + p] = -127;
    for (int64_t j = 0; j < n; j++) q[p * n + j] = j % 2 ? -127 : 127;
  }
  lv_q8_mat mat;
  ck_assert(lv_q8_mat_pack(&mat, q, ws, k, n));
  int32_t sums[2 * 17];
  lv_cpu_q8_sums_with(isa, m, a, &mat, sums);
  for (int64_t j = 0; j < n; j++) {
    ck_assert_int_eq(sums[j], (j % 2 ? -1 : 1) * 127 * 127 * (int32_t)k);
    ck_assert_int_eq(sums[n + j], (j % 2 ? 1 : -1) * 127 * 127 * (int32_t)k);
  }
  lv_q8_mat_free(&mat);
  free(a), free(q), free(ws);
  /* Past LV_Q8_MAX_K the int32 sums could overflow: packing refuses it. */
  ck_assert(!lv_q8_mat_pack(&mat, NULL, NULL, LV_Q8_MAX_K + 1, 16));
}
END_TEST

/* The float product on each path: the dequantized sum plus bias (and plus Y when
 * accumulating) in the documented order, bit for bit the scalar path's, within 1 ulp of
 * the double reference; and within the quantization's error of the float product. */
START_TEST(gemm_dequantizes_the_same_bits_on_every_path) {
  const lv_int8_isa isa = (lv_int8_isa)_i;
  if (!isa_runs(isa)) return;
  for (size_t sh = 0; sh < N_SHAPES; sh++)
    for (int variant = 0; variant < 3; variant++) { /* plain, + bias, + bias + Y */
      qcase c;
      qcase_make(&c, kShapes[sh][0], kShapes[sh][1], kShapes[sh][2], 300 + sh);
      const int64_t ldy = c.n + 3; /* past a row's n columns: untouched */
      const bool with_bias = variant >= 1, acc = variant == 2;
      float *y0 = rand_floats(c.m * ldy, 7), *y = malloc((size_t)(c.m * ldy) * sizeof *y),
            *yref = malloc((size_t)(c.m * ldy) * sizeof *y);
      memcpy(y, y0, (size_t)(c.m * ldy) * sizeof *y);
      memcpy(yref, y0, (size_t)(c.m * ldy) * sizeof *y);
      lv_cpu_q8_gemm_with(isa, NULL, c.m, c.x, c.k, &c.mat, with_bias ? c.bias : NULL, acc, y, ldy);
      lv_cpu_q8_gemm_with(LV_INT8_OFF, NULL, c.m, c.x, c.k, &c.mat, with_bias ? c.bias : NULL, acc, yref, ldy);
      double max_err = 0, max_ref = 0;
      for (int64_t i = 0; i < c.m; i++)
        for (int64_t j = 0; j < ldy; j++) {
          const float got = y[i * ldy + j];
          ck_assert_msg(!memcmp(&got, &yref[i * ldy + j], sizeof got), "%s m %lld k %lld n %lld [%lld,%lld]: %a vs off %a",
                        lv_int8_isa_names[isa], (long long)c.m, (long long)c.k, (long long)c.n, (long long)i,
                        (long long)j, got, yref[i * ldy + j]);
          if (j >= c.n) {
            ck_assert(!memcmp(&got, &y0[i * ldy + j], sizeof got));
            continue;
          }
          double want = (double)exact_sum(&c, i, j) * c.xs[i] * c.ws[j] + (with_bias ? c.bias[j] : 0.0) +
                        (acc ? y0[i * ldy + j] : 0.0);
          ck_assert_msg(fabs(got - want) <= 4e-7 * (fabs(want) + fabs(exact_sum(&c, i, j) * c.xs[i] * c.ws[j])) + 1e-6,
                        "%s m %lld k %lld n %lld [%lld,%lld]: %.9g vs %.9g", lv_int8_isa_names[isa], (long long)c.m,
                        (long long)c.k, (long long)c.n, (long long)i, (long long)j, got, want);
          /* Against float: each product's error is at most half a step of either factor. */
          double f = 0, bound = 0;
          for (int64_t p = 0; p < c.k; p++) {
            const double xv = c.x[i * c.k + p], wv = c.w[p * c.n + j];
            f += xv * wv;
            bound += 0.5 * c.xs[i] * fabs(wv) + 0.5 * c.ws[j] * fabs(xv) + 0.25 * c.xs[i] * c.ws[j];
          }
          f += (with_bias ? c.bias[j] : 0.0) + (acc ? y0[i * ldy + j] : 0.0);
          ck_assert_msg(fabs(got - f) <= bound + 1e-5, "%s m %lld k %lld n %lld [%lld,%lld]: %.6g vs float %.6g (bound %g)",
                        lv_int8_isa_names[isa], (long long)c.m, (long long)c.k, (long long)c.n, (long long)i,
                        (long long)j, got, f, bound);
          max_err = fmax(max_err, fabs(got - f));
          max_ref = fmax(max_ref, fabs(f));
        }
      /* And the error is small in practice: a few percent of the outputs' range. */
      if (c.k >= 64) ck_assert_msg(max_err <= 0.03 * max_ref, "k %lld: max error %g of %g", (long long)c.k, max_err, max_ref);
      free(y0), free(y), free(yref);
      qcase_free(&c);
    }
}
END_TEST

/* The pieces a call is cut into are column blocks: 1 and 2 threads give the same bits. */
START_TEST(threads_do_not_change_the_bits) {
  qcase c;
  qcase_make(&c, 6, 300, 530, 9);
  float *y1 = calloc((size_t)(c.m * c.n), sizeof *y1), *y2 = calloc((size_t)(c.m * c.n), sizeof *y2);
  lv_kctx ctx1, ctx2;
  lv_cpu_ctx_init(&ctx1);
  lv_cpu_ctx_init(&ctx2);
  ctx1.num_threads = 1, ctx2.num_threads = 2;
  lv_cpu_q8_gemm(&ctx1, c.m, c.x, c.k, &c.mat, c.bias, false, y1, c.n);
  lv_cpu_q8_gemm(&ctx2, c.m, c.x, c.k, &c.mat, c.bias, false, y2, c.n);
  ck_assert(!memcmp(y1, y2, (size_t)(c.m * c.n) * sizeof *y1));
  free(y1), free(y2);
  qcase_free(&c);
}
END_TEST

/* An all-zero row of X (scale 0) gives the bias alone, never NaN. */
START_TEST(zero_rows_give_the_bias) {
  const int64_t k = 20, n = 18;
  float *w = rand_floats(k * n, 3), ws[18], bias[18], x[2 * 20] = {0}, y[2 * 18];
  int8_t q[20 * 18];
  for (int j = 0; j < n; j++) bias[j] = (float)j;
  for (int p = 0; p < k; p++) x[k + p] = 1.0f;
  lv_q8_quantize(w, n, k, 1, n, q, ws);
  lv_q8_mat mat;
  ck_assert(lv_q8_mat_pack(&mat, q, ws, k, n));
  for (int isa = 0; isa < LV_INT8_ISA_COUNT; isa++) {
    if (!lv_cpu_int8_isa_ok((lv_int8_isa)isa)) continue;
    lv_cpu_q8_gemm_with((lv_int8_isa)isa, NULL, 2, x, k, &mat, bias, false, y, n);
    for (int j = 0; j < n; j++) {
      ck_assert_float_eq(y[j], (float)j);
      ck_assert(isfinite(y[n + j]));
    }
  }
  lv_q8_mat_free(&mat);
  free(w);
}
END_TEST

/* Row views (an LSTM's input and recurrent rows of one weight): exact sums of the
 * sub-matrix on every path, rows not a multiple of 4 refused. */
START_TEST(row_views_sum_their_rows) {
  const lv_int8_isa isa = (lv_int8_isa)_i;
  if (!isa_runs(isa)) return;
  qcase c;
  qcase_make(&c, 3, 70, 37, 11);
  const int64_t cuts[][2] = {{0, 20}, {20, 50}, {8, 4}, {64, 6}, {0, 70}};
  for (size_t v = 0; v < sizeof cuts / sizeof cuts[0]; v++) {
    const int64_t r0 = cuts[v][0], len = cuts[v][1];
    int32_t colsum[48], sums[3 * 37];
    lv_q8_mat view;
    ck_assert(lv_q8_mat_rows(&c.mat, r0, len, colsum, &view));
    int8_t *a = malloc((size_t)(c.m * len));
    for (int64_t i = 0; i < c.m; i++) memcpy(a + i * len, c.qx + i * c.k + r0, (size_t)len);
    lv_cpu_q8_sums_with(isa, c.m, a, &view, sums);
    for (int64_t i = 0; i < c.m; i++)
      for (int64_t j = 0; j < c.n; j++) {
        int64_t want = 0;
        for (int64_t p = r0; p < r0 + len; p++) want += (int64_t)c.qx[i * c.k + p] * c.qw[p * c.n + j];
        ck_assert_msg(sums[i * c.n + j] == want, "%s rows [%lld, %lld) [%lld,%lld]: %d vs %lld",
                      lv_int8_isa_names[isa], (long long)r0, (long long)(r0 + len), (long long)i, (long long)j,
                      sums[i * c.n + j], (long long)want);
      }
    free(a);
  }
  lv_q8_mat view;
  int32_t colsum[48];
  ck_assert(!lv_q8_mat_rows(&c.mat, 2, 8, colsum, &view));  /* start not a multiple of 4 */
  ck_assert(!lv_q8_mat_rows(&c.mat, 4, 7, colsum, &view));  /* ends mid-group, before k */
  ck_assert(!lv_q8_mat_rows(&c.mat, 64, 10, colsum, &view)); /* past k */
  qcase_free(&c);
}
END_TEST

/* A NaN or an infinity in a row of X makes that row's outputs NaN (as float's would be),
 * the other rows untouched; a weight column holding one gets a NaN scale. */
START_TEST(non_finite_values_give_nan) {
  qcase c;
  qcase_make(&c, 3, 40, 20, 5);
  c.x[1 * c.k + 7] = NAN;
  c.x[2 * c.k + 3] = -INFINITY;
  float y[3 * 20];
  for (int isa = 0; isa < LV_INT8_ISA_COUNT; isa++) {
    if (!lv_cpu_int8_isa_ok((lv_int8_isa)isa)) continue;
    lv_cpu_q8_gemm_with((lv_int8_isa)isa, NULL, c.m, c.x, c.k, &c.mat, c.bias, false, y, c.n);
    for (int j = 0; j < c.n; j++) {
      ck_assert(isfinite(y[j]));
      ck_assert(isnan(y[c.n + j]));
      ck_assert(isnan(y[2 * c.n + j]));
    }
  }
  c.w[5 * c.n + 2] = INFINITY;
  lv_q8_quantize(c.w, c.n, c.k, 1, c.n, c.qw, c.ws);
  ck_assert(isnan(c.ws[2]) && isfinite(c.ws[1]) && isfinite(c.ws[3]));
  qcase_free(&c);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("int8_gemm");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, quantize_is_symmetric_per_channel);
  tcase_add_loop_test(tc, sums_are_exact_on_every_path, 0, LV_INT8_ISA_COUNT);
  tcase_add_loop_test(tc, sums_do_not_saturate, 0, LV_INT8_ISA_COUNT);
  tcase_add_loop_test(tc, gemm_dequantizes_the_same_bits_on_every_path, 0, LV_INT8_ISA_COUNT);
  tcase_add_loop_test(tc, row_views_sum_their_rows, 0, LV_INT8_ISA_COUNT);
  tcase_add_test(tc, threads_do_not_change_the_bits);
  tcase_add_test(tc, zero_rows_give_the_bias);
  tcase_add_test(tc, non_finite_values_give_nan);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
