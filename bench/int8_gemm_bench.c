/* The int8 GEMM (kernels/cpu/cpu_int8.h) against the float32 one (lv_cpu_gemm: OpenBLAS and
 * the few-row tiles) on inference's shapes: Y [m, n] = X [m, k] W [k, n] for a decoder
 * step's few rows and an encoder's many, TransformerSmall's and RnnLmSmall's widths. Each
 * row: the median of REPS timings (each at least ~20 ms of repeated calls) of float32 and
 * of every int8 path the CPU has, as microseconds per call and GOP/s (2 m k n).
 * Usage: int8_gemm_bench [threads] [reps]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/rng.h"
#include "kernels/cpu/cpu_int8.h"
#include "kernels/cpu/cpu_kernels.h"

static const int64_t kShapes[][3] = {
    {4, 256, 256}, {4, 256, 1024}, {4, 1024, 256}, {4, 256, 8000}, {16, 256, 1024},
    {256, 256, 1024}, {64, 512, 2048}, {1, 1024, 4096},
};

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median seconds per call of fn over reps timings. */
typedef void (*call_fn)(void *arg);
static double time_calls(call_fn fn, void *arg, int reps) {
  double t[64];
  fn(arg); /* warm */
  for (int r = 0; r < reps; r++) {
    int n = 0;
    const double t0 = lv_now_monotonic();
    double el;
    do {
      fn(arg);
      n++;
      el = lv_now_monotonic() - t0;
    } while (el < 0.02);
    t[r] = el / n;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_d);
  return t[reps / 2];
}

typedef struct job {
  lv_kctx *ctx;
  int64_t m, k, n;
  const float *x, *w;
  float *y;
  const lv_q8_mat *q;
  lv_int8_isa isa;
} job;

static void run_f32(void *a) {
  const job *j = a;
  lv_cpu_gemm(j->ctx, false, false, j->m, j->n, j->k, 1.0f, j->x, j->k, j->w, j->n, 0.0f, j->y, j->n);
}
static void run_q8(void *a) {
  const job *j = a;
  lv_cpu_q8_gemm_with(j->isa, j->ctx, j->m, j->x, j->k, j->q, NULL, false, j->y, j->n);
}

int main(int argc, char **argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 2, reps0 = argc > 2 ? atoi(argv[2]) : 5;
  const int reps = reps0 < 1 ? 1 : reps0 > 64 ? 64 : reps0;
  lv_kctx ctx;
  lv_cpu_ctx_init(&ctx);
  ctx.num_threads = threads;
  printf("| m x k x n | float32 us | GOP/s |");
  for (int i = 0; i < LV_INT8_ISA_COUNT; i++)
    if (lv_cpu_int8_isa_ok((lv_int8_isa)i)) printf(" int8 %s us | GOP/s | vs float32 |", lv_int8_isa_names[i]);
  printf("\n|---|---|---|");
  for (int i = 0; i < LV_INT8_ISA_COUNT; i++)
    if (lv_cpu_int8_isa_ok((lv_int8_isa)i)) printf("---|---|---|");
  printf("\n");
  for (size_t s = 0; s < sizeof kShapes / sizeof kShapes[0]; s++) {
    const int64_t m = kShapes[s][0], k = kShapes[s][1], n = kShapes[s][2];
    float *x = malloc(sizeof(float) * (size_t)(m * k)), *w = malloc(sizeof(float) * (size_t)(k * n));
    float *y = malloc(sizeof(float) * (size_t)(m * n)), *ws = malloc(sizeof(float) * (size_t)n);
    int8_t *qw = malloc((size_t)(k * n));
    for (int64_t i = 0; i < m * k; i++) x[i] = 2.0f * lv_rng_uniform_at(1, 0, (uint64_t)i) - 1.0f;
    for (int64_t i = 0; i < k * n; i++) w[i] = 0.1f * (2.0f * lv_rng_uniform_at(2, 0, (uint64_t)i) - 1.0f);
    lv_q8_quantize(w, n, k, 1, n, qw, ws);
    lv_q8_mat q;
    if (!lv_q8_mat_pack(&q, qw, ws, k, n)) return 1;
    job j = {&ctx, m, k, n, x, w, y, &q, LV_INT8_OFF};
    const double ops = 2.0 * (double)m * (double)k * (double)n;
    const double tf = time_calls(run_f32, &j, reps);
    printf("| %lld x %lld x %lld | %.1f | %.1f |", (long long)m, (long long)k, (long long)n, tf * 1e6, ops / tf * 1e-9);
    for (int i = 0; i < LV_INT8_ISA_COUNT; i++) {
      if (!lv_cpu_int8_isa_ok((lv_int8_isa)i)) continue;
      j.isa = (lv_int8_isa)i;
      const double tq = time_calls(run_q8, &j, reps);
      printf(" %.1f | %.1f | %.2fx |", tq * 1e6, ops / tq * 1e-9, tf / tq);
    }
    printf("\n");
    fflush(stdout);
    lv_q8_mat_free(&q);
    free(x), free(w), free(y), free(ws), free(qw);
  }
  return 0;
}
