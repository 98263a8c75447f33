/* GEMM on OpenBLAS.
 *
 * Debian's OpenBLAS picks its kernels at load time from the CPU model; on virtual CPUs
 * it does not recognize ("Intel Xeon Processor") it falls back to the generic Prescott
 * kernels, 5x slower than the AVX-512/AVX2 ones the CPU actually has. lv_cpu_blas_init
 * re-runs the selection with OPENBLAS_CORETYPE set from what the CPU (and OS) support,
 * unless the user set OPENBLAS_CORETYPE. */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/env.h"
#include "kernels/cpu/cpu_kernels.h"

/* Present in DYNAMIC_ARCH builds of OpenBLAS (Debian's); weak so other builds link. */
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));
extern char *openblas_get_corename(void) __attribute__((weak));

bool lv_cpu_has_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

bool lv_cpu_has_avx2_fma(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static void fix_core(void) {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || !openblas_get_corename) return;
  if (lv_env_get()->openblas_coretype) return;
  const char *core = openblas_get_corename();
  if (!core || (strcasecmp(core, "prescott") != 0 && strcasecmp(core, "core2") != 0 &&
                strcasecmp(core, "nehalem") != 0 && strcasecmp(core, "sandybridge") != 0))
    return;
  const char *want = lv_cpu_has_avx512() ? "SkylakeX" : lv_cpu_has_avx2_fma() ? "Haswell" : NULL;
  if (!want || strcasecmp(core, want) == 0) return;
  setenv("OPENBLAS_CORETYPE", want, 0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
}

/* OpenBLAS's own threads fight OpenMP's spinning workers for the cores (measured: a
 * LeNet step 7x slower on 2 cores), so OpenBLAS always runs single-threaded and
 * lv_cpu_gemm splits large products over the OpenMP threads itself. */
static void init(void) {
  fix_core();
  openblas_set_num_threads(1);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

void lv_cpu_blas_init(void) { pthread_once(&once, init); }

const char *lv_cpu_blas_core(void) {
  lv_cpu_blas_init();
  return openblas_get_corename ? openblas_get_corename() : "unknown";
}

/* cblas_sgemm, but a product with one row of C is a matrix-vector product: OpenBLAS's
 * sgemm would pack the whole of B for it (a decoder's step on one hypothesis spent 70% of
 * its time there), sgemv reads B once. */
static void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                  const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 1) {
    /* C[1, n] = alpha op(A)[1, k] op(B)[k, n] + beta C: y = op(B)^T x with x = op(A)'s row. */
    cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, (int)(tb ? n : k), (int)(tb ? k : n), alpha, b,
                (int)ldb, a, ta ? (int)lda : 1, beta, c, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
              alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

typedef struct gemm_job {
  bool ta, tb, by_rows;
  int64_t m, n, k, per, total;
  float alpha;
  const float *a;
  int64_t lda;
  const float *b;
  int64_t ldb;
  float beta;
  float *c;
  int64_t ldc;
} gemm_job;

static void gemm_piece(void *arg, int64_t p, int64_t p_end, int slot) {
  const gemm_job *j = arg;
  (void)p_end;
  (void)slot;
  int64_t lo = p * j->per, hi = lo + j->per < j->total ? lo + j->per : j->total;
  if (j->by_rows) {
    const float *ap = j->ta ? j->a + lo : j->a + lo * j->lda;
    sgemm(j->ta, j->tb, hi - lo, j->n, j->k, j->alpha, ap, j->lda, j->b, j->ldb, j->beta, j->c + lo * j->ldc, j->ldc);
  } else {
    const float *bp = j->tb ? j->b + lo * j->ldb : j->b + lo;
    sgemm(j->ta, j->tb, j->m, hi - lo, j->k, j->alpha, j->a, j->lda, bp, j->ldb, j->beta, j->c + lo, j->ldc);
  }
}

void lv_cpu_gemm(lv_kctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                 int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  lv_cpu_blas_init();
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (lv_cpu_gemm_small(ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
  /* Large products are cut into pieces of C by rows (each piece reads its own slice of
   * A) or, when C has few rows, by columns. The cut depends only on the shapes, never on
   * the thread count: OpenBLAS may pick different kernels (its small-matrix ones, with
   * another summation order) for different piece sizes, and results must be identical
   * with 1 or N threads so a restarted run repeats an uninterrupted one. Several pieces,
   * handed out as threads become free (lv_cpu_par), also keep a preempted thread from
   * stalling the step. Every piece packs the operand it shares with the others (B for
   * row pieces, A for column pieces) on its own: cut the way that shares the smaller one
   * (an LSTM's recurrent weight gradient, [512, 2048] from 3000 rows, packed the 3000 x
   * 2048 operand once per row piece: 10% of a training step). */
  bool by_rows = m >= 64 && (n < 64 || m >= n);
  bool split = (double)m * n * k >= 2e6 && (by_rows || n >= 64);
  if (!split) {
    sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  int64_t total = by_rows ? m : n, unit = by_rows ? 8 : 16;
  /* When the shared operand is big, fewer pieces. */
  double shared = by_rows ? (double)k * n : (double)m * k;
  int64_t pieces = shared > 262144 ? 4 : 8;
  int64_t per = (total + pieces - 1) / pieces;
  per = (per + unit - 1) / unit * unit;
  pieces = (total + per - 1) / per;
  gemm_job j = {ta, tb, by_rows, m, n, k, per, total, alpha, a, lda, b, ldb, beta, c, ldc};
  lv_cpu_par(ctx, pieces, 1, gemm_piece, &j);
}

typedef struct gemm_batch_job {
  lv_kctx *ctx;
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  int64_t lda, ldb, ldc, sa, sb, sc;
} gemm_batch_job;

static void gemm_batch_piece(void *arg, int64_t lo, int64_t hi, int slot) {
  const gemm_batch_job *j = arg;
  (void)slot;
  for (int64_t i = lo; i < hi; i++)
    lv_cpu_gemm(j->ctx, j->ta, j->tb, j->m, j->n, j->k, j->alpha, j->a + i * j->sa, j->lda, j->b + i * j->sb,
                j->ldb, j->beta, j->c + i * j->sc, j->ldc);
}

/* Every entry is one lv_cpu_gemm, whose own split depends only on the shapes (and runs
 * inline inside a piece), so an entry's bits are the same whichever thread runs it and
 * whether the batch is split or not. The batch is cut into pieces of about 256k
 * multiply-adds. */
void lv_cpu_gemm_batched(lv_kctx *ctx, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, int64_t stride_a, const float *b, int64_t ldb,
                         int64_t stride_b, float beta, float *c, int64_t ldc, int64_t stride_c) {
  lv_cpu_blas_init();
  if (batch <= 0 || m == 0 || n == 0) return;
  gemm_batch_job j = {ctx, ta, tb, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc, stride_a, stride_b, stride_c};
  double work = (double)m * (double)n * (double)(k > 0 ? k : 1);
  int64_t per = work >= 262144.0 ? 1 : (int64_t)(262144.0 / work);
  if (batch == 1 || work >= 2e6) {
    /* Entries big enough for lv_cpu_gemm to split them itself. */
    gemm_batch_piece(&j, 0, batch, 0);
    return;
  }
  lv_cpu_par(ctx, batch, lv_cpu_grain(batch, per), gemm_batch_piece, &j);
}
