/* Products with few rows of C (2 to 40) and a large B, without packing B: an LSTM's step,
 * gates [B, 4H] = m [B, H] . W [H, 4H] forward and dm [B, H] = dgates [B, 4H] . W^T
 * backward, T times a sequence with the same W. OpenBLAS copies ("packs") the whole of W
 * into its own layout on every call, which with B = 10-64 rows costs as much as a third
 * of the product (measured on RnnLmSmall's training: 26% of the step in its copy
 * routines, with the weight gradient's row pieces). Here B is read where it lies:
 *  - C = A B (B [k, n] row-major): tiles of 8 rows x 32 columns of C, each k a broadcast
 *    of A's 8 values times two vectors of B's row k, over k blocks whose 256 x 32 panel
 *    of B stays in L1 while every row tile reads it;
 *  - C = A B^T (B [n, k]): tiles of 4 x 4 dot products along k, 16 lanes at a time,
 *    each reduced at the end.
 * An element's sum runs in an order fixed by k and the block size alone, and pieces are
 * whole column tiles: results do not depend on the thread count (cpu_gemm.c's rule).
 * AVX-512 tiles, and AVX2 ones for x86-64-v3 machines without it, picked at run time
 * (the build targets x86-64-v3); elsewhere OpenBLAS does these products as before. */
#include <pthread.h>
#include <string.h>

#include "base/env.h"
#include "base/log.h"
#include "kernels/cpu/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define NN_MR 8
#define NN_NR 32
#define NN_KC 256
#define NN_PF 16 /* rows of B prefetched ahead */
#define NT_MR 4
#define NT_NR 4
#define NT_KC 4096

typedef struct small_job {
  int64_t m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  int64_t lda, ldb, ldc;
} small_job;

#define AVX512_ISA "avx512f,avx512dq,avx512bw,avx512vl" /* what lv_cpu_has_avx512 checks */
#define AVX512 __attribute__((target(AVX512_ISA)))
#define INLINE_AVX512 static inline __attribute__((always_inline, target(AVX512_ISA)))

/* One element of an A B^T tile: C = beta C + alpha sum for the first k block (beta 0 never
 * reads C), C += alpha sum after it. */
static inline void nt_store1(float *c, float v, float beta, bool first) {
  *c = !first ? *c + v : beta == 0.0f ? v : beta * *c + v;
}

/* C = beta C + alpha acc for the first k block, C += alpha acc after it; beta 0 never
 * reads C (it may hold anything, NaN included). */
INLINE_AVX512 void nn_store(float *c, __mmask16 mask, __m512 acc, float alpha, float beta, bool first) {
  __m512 v = _mm512_mul_ps(_mm512_set1_ps(alpha), acc);
  if (!first) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, c), v);
  else if (beta != 0.0f) v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, c), v);
  _mm512_mask_storeu_ps(c, mask, v);
}

/* One tile: MR (a constant once inlined) rows of A times kc rows of B's 32-column
 * panel (k0, k1: the panel's valid columns). */
INLINE_AVX512 void nn_tile(const int mr, int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                           float *c, int64_t ldc, __mmask16 k0, __mmask16 k1, float alpha, float beta, bool first) {
  __m512 acc0[NN_MR], acc1[NN_MR];
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    const float *bp = b + p * ldb;
    /* B's rows are a page apart or more: the hardware prefetchers do not follow them. */
    _mm_prefetch((const char *)(bp + NN_PF * ldb), _MM_HINT_T0);
    _mm_prefetch((const char *)(bp + NN_PF * ldb + 16), _MM_HINT_T0);
    const __m512 b0 = _mm512_maskz_loadu_ps(k0, bp), b1 = _mm512_maskz_loadu_ps(k1, bp + 16);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      const __m512 av = _mm512_set1_ps(a[r * lda + p]);
      acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++) {
    nn_store(c + r * ldc, k0, acc0[r], alpha, beta, first);
    nn_store(c + r * ldc + 16, k1, acc1[r], alpha, beta, first);
  }
}

static inline __mmask16 lanes(int64_t n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* Column panels [lo, hi) of C = alpha A B + beta C. */
AVX512 static void nn_piece(void *arg, int64_t lo, int64_t hi, int slot) {
  (void)slot;
  const small_job *j = arg;
  for (int64_t pn = lo; pn < hi; pn++) {
    const int64_t j0 = pn * NN_NR, w = j->n - j0 < NN_NR ? j->n - j0 : NN_NR;
    const __mmask16 k0 = lanes(w), k1 = lanes(w - 16);
    for (int64_t kb = 0; kb < j->k; kb += NN_KC) {
      const int64_t kc = j->k - kb < NN_KC ? j->k - kb : NN_KC;
      const float *bp = j->b + kb * j->ldb + j0;
      /* Row tiles of equal height (10 rows: 5 + 5, not 8 + 2, whose 4 accumulators would
       * wait on the FMA latency). */
      const int64_t tiles = (j->m + NN_MR - 1) / NN_MR, h = (j->m + tiles - 1) / tiles;
      for (int64_t i = 0; i < j->m; i += h) {
        const float *ap = j->a + i * j->lda + kb;
        float *cp = j->c + i * j->ldc + j0;
#define NN_CASE(R) \
  case R: nn_tile(R, kc, ap, j->lda, bp, j->ldb, cp, j->ldc, k0, k1, j->alpha, j->beta, kb == 0); break;
        switch (j->m - i < h ? j->m - i : h) {
          NN_CASE(1) NN_CASE(2) NN_CASE(3) NN_CASE(4) NN_CASE(5) NN_CASE(6) NN_CASE(7) NN_CASE(8)
        }
#undef NN_CASE
      }
    }
  }
}

/* One tile of C = A B^T: MR x NR (constants once inlined) dot products over kc values of
 * k; first: C = beta C + alpha sum, else C += alpha sum. */
INLINE_AVX512 void nt_tile(const int mr, const int nr, int64_t kc, const float *a, int64_t lda, const float *b,
                           int64_t ldb, float *c, int64_t ldc, float alpha, float beta, bool first) {
  __m512 acc[NT_MR][NT_NR];
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
    for (int s = 0; s < nr; s++) acc[r][s] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p += 16) {
    const __mmask16 mask = lanes(kc - p);
    __m512 bv[NT_NR];
#pragma GCC unroll 8
    for (int s = 0; s < nr; s++) bv[s] = _mm512_maskz_loadu_ps(mask, b + s * ldb + p);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      const __m512 av = _mm512_maskz_loadu_ps(mask, a + r * lda + p);
#pragma GCC unroll 8
      for (int s = 0; s < nr; s++) acc[r][s] = _mm512_fmadd_ps(av, bv[s], acc[r][s]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
    for (int s = 0; s < nr; s++) {
      nt_store1(c + r * ldc + s, alpha * _mm512_reduce_add_ps(acc[r][s]), beta, first);
    }
}

/* Column groups [lo, hi) (NT_NR columns of C each) of C = alpha A B^T + beta C: k in
 * blocks whose NT_NR rows of B stay in L1 while every row tile reads them. */
AVX512 static void nt_piece(void *arg, int64_t lo, int64_t hi, int slot) {
  (void)slot;
  const small_job *j = arg;
  for (int64_t gi = lo; gi < hi; gi++) {
    const int64_t j0 = gi * NT_NR, nr = j->n - j0 < NT_NR ? j->n - j0 : NT_NR;
    for (int64_t kb = 0; kb < j->k; kb += NT_KC) {
      const int64_t kc = j->k - kb < NT_KC ? j->k - kb : NT_KC;
      const float *bp = j->b + j0 * j->ldb + kb;
      for (int64_t i = 0; i < j->m; i += NT_MR) {
        const int64_t mr = j->m - i < NT_MR ? j->m - i : NT_MR;
        const float *ap = j->a + i * j->lda + kb;
        float *cp = j->c + i * j->ldc + j0;
#define NT_CASE(R, S) \
  case (R) * 16 + (S): nt_tile(R, S, kc, ap, j->lda, bp, j->ldb, cp, j->ldc, j->alpha, j->beta, kb == 0); break;
#define NT_ROW(R) NT_CASE(R, 1) NT_CASE(R, 2) NT_CASE(R, 3) NT_CASE(R, 4)
        switch (mr * 16 + nr) {
          NT_ROW(1) NT_ROW(2) NT_ROW(3) NT_ROW(4)
        }
#undef NT_ROW
#undef NT_CASE
      }
    }
  }
}

/* ---- AVX2 + FMA (x86-64-v3 machines without AVX-512: the AMD Zen machines) ----------
 * The same two tiles at 8 lanes with 16 registers: 6 x 16 for A B, 2 x 4 for A B^T. No
 * masked tails: these take only n a multiple of 16 (A B) and k of 8 (A B^T), as an LSTM's
 * gate widths are; other shapes go to OpenBLAS. */
#define V3_ISA "avx2,fma" /* what lv_cpu_has_avx2_fma checks */
#define V3 __attribute__((target(V3_ISA)))
#define INLINE_V3 static inline __attribute__((always_inline, target(V3_ISA)))
#define NN2_MR 6
#define NN2_NR 16
#define NT2_MR 2
#define NT2_NR 4

INLINE_V3 void nn2_store(float *c, __m256 acc, float alpha, float beta, bool first) {
  __m256 v = _mm256_mul_ps(_mm256_set1_ps(alpha), acc);
  if (!first) v = _mm256_add_ps(_mm256_loadu_ps(c), v);
  else if (beta != 0.0f) v = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_loadu_ps(c), v);
  _mm256_storeu_ps(c, v);
}

INLINE_V3 void nn2_tile(const int mr, int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                        int64_t ldc, float alpha, float beta, bool first) {
  __m256 acc0[NN2_MR], acc1[NN2_MR];
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    const float *bp = b + p * ldb;
    _mm_prefetch((const char *)(bp + NN_PF * ldb), _MM_HINT_T0);
    const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + p);
      acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    nn2_store(c + r * ldc, acc0[r], alpha, beta, first);
    nn2_store(c + r * ldc + 8, acc1[r], alpha, beta, first);
  }
}

V3 static void nn2_piece(void *arg, int64_t lo, int64_t hi, int slot) {
  (void)slot;
  const small_job *j = arg;
  const int64_t tiles = (j->m + NN2_MR - 1) / NN2_MR, h = (j->m + tiles - 1) / tiles;
  for (int64_t pn = lo; pn < hi; pn++) {
    const int64_t j0 = pn * NN2_NR;
    for (int64_t kb = 0; kb < j->k; kb += NN_KC) {
      const int64_t kc = j->k - kb < NN_KC ? j->k - kb : NN_KC;
      const float *bp = j->b + kb * j->ldb + j0;
      for (int64_t i = 0; i < j->m; i += h) {
        const float *ap = j->a + i * j->lda + kb;
        float *cp = j->c + i * j->ldc + j0;
#define NN2_CASE(R) \
  case R: nn2_tile(R, kc, ap, j->lda, bp, j->ldb, cp, j->ldc, j->alpha, j->beta, kb == 0); break;
        switch (j->m - i < h ? j->m - i : h) { NN2_CASE(1) NN2_CASE(2) NN2_CASE(3) NN2_CASE(4) NN2_CASE(5) NN2_CASE(6) }
#undef NN2_CASE
      }
    }
  }
}

/* The sum of v's 8 lanes, in a fixed order. */
INLINE_V3 float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

INLINE_V3 void nt2_tile(const int mr, const int nr, int64_t k, const float *a, int64_t lda, const float *b,
                        int64_t ldb, float *c, int64_t ldc, float alpha, float beta) {
  __m256 acc[NT2_MR][NT2_NR];
#pragma GCC unroll 4
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
    for (int s = 0; s < nr; s++) acc[r][s] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; p += 8) {
    __m256 bv[NT2_NR];
#pragma GCC unroll 4
    for (int s = 0; s < nr; s++) bv[s] = _mm256_loadu_ps(b + s * ldb + p);
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++) {
      const __m256 av = _mm256_loadu_ps(a + r * lda + p);
#pragma GCC unroll 4
      for (int s = 0; s < nr; s++) acc[r][s] = _mm256_fmadd_ps(av, bv[s], acc[r][s]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
    for (int s = 0; s < nr; s++) {
      nt_store1(c + r * ldc + s, alpha * hsum8(acc[r][s]), beta, true);
    }
}

V3 static void nt2_piece(void *arg, int64_t lo, int64_t hi, int slot) {
  (void)slot;
  const small_job *j = arg;
  for (int64_t gi = lo; gi < hi; gi++) {
    const int64_t j0 = gi * NT2_NR, nr = j->n - j0 < NT2_NR ? j->n - j0 : NT2_NR;
    const float *bp = j->b + j0 * j->ldb;
    for (int64_t i = 0; i < j->m; i += NT2_MR) {
      const int64_t mr = j->m - i < NT2_MR ? j->m - i : NT2_MR;
      const float *ap = j->a + i * j->lda;
      float *cp = j->c + i * j->ldc + j0;
#define NT2_CASE(R, S) \
  case (R) * 8 + (S): nt2_tile(R, S, j->k, ap, j->lda, bp, j->ldb, cp, j->ldc, j->alpha, j->beta); break;
      switch (mr * 8 + nr) {
        NT2_CASE(1, 1) NT2_CASE(1, 2) NT2_CASE(1, 3) NT2_CASE(1, 4)
        NT2_CASE(2, 1) NT2_CASE(2, 2) NT2_CASE(2, 3) NT2_CASE(2, 4)
      }
#undef NT2_CASE
    }
  }
}

/* ---- dispatch ---------------------------------------------------------------------- */

/* The widest the CPU has, or what LINGVOC_GEMM_SMALL asks for ("off", "avx2", "avx512",
 * e.g. to time OpenBLAS alone; one the CPU lacks is not used). */
static lv_gemm_small_isa pick(void) {
  const bool v4 = lv_cpu_has_avx512(), v3 = lv_cpu_has_avx2_fma();
  const lv_gemm_small_isa best = v4 ? LV_GEMM_SMALL_AVX512 : v3 ? LV_GEMM_SMALL_AVX2 : LV_GEMM_SMALL_OFF;
  const char *want = lv_env_get()->gemm_small;
  if (!want || !*want) return best;
  if (!strcmp(want, "off")) return LV_GEMM_SMALL_OFF;
  if (!strcmp(want, "avx2") && v3) return LV_GEMM_SMALL_AVX2;
  if (!strcmp(want, "avx512") && v4) return LV_GEMM_SMALL_AVX512;
  if (strcmp(want, "avx2") && strcmp(want, "avx512"))
    lv_warn("LINGVOC_GEMM_SMALL=%s: expected off, avx2 or avx512; using %s", want, lv_gemm_small_isa_names[best]);
  else
    lv_warn("LINGVOC_GEMM_SMALL=%s: this CPU lacks it; using %s", want, lv_gemm_small_isa_names[best]);
  return best;
}

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static lv_gemm_small_isa isa_picked;
static void isa_init(void) { isa_picked = pick(); }

lv_gemm_small_isa lv_cpu_gemm_small_isa(void) {
  pthread_once(&isa_once, isa_init);
  return isa_picked;
}

bool lv_cpu_gemm_small_with(lv_gemm_small_isa x, lv_kctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                            float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                            float *c, int64_t ldc) {
  /* B worth not copying (>= 256 KB) and few enough rows that the copy is a large part
   * (measured with [512, 2048] weights on 2 threads: 10 rows 25-50% faster than
   * OpenBLAS, 32 rows of A B and 20 of A B^T about even, more rows slower). */
  /* alpha 0 is BLAS's "scale C by beta" (NaN in A or B must not reach C): OpenBLAS's. */
  if (ta || alpha == 0.0f || m < 2 || m > (tb ? 24 : 40) || k < 16 || n < 16 || (double)k * n < 65536) return false;
  if (x == LV_GEMM_SMALL_OFF || (x == LV_GEMM_SMALL_AVX2 && (tb ? k % 8 : n % 16))) return false;
  small_job j = {m, n, k, alpha, beta, a, b, c, lda, ldb, ldc};
  const bool v4 = x == LV_GEMM_SMALL_AVX512;
  const int64_t nr = v4 ? (tb ? NT_NR : NN_NR) : (tb ? NT2_NR : NN2_NR);
  const int64_t pieces = (n + nr - 1) / nr;
  lv_cpu_par_fn fn = v4 ? (tb ? nt_piece : nn_piece) : (tb ? nt2_piece : nn2_piece);
  lv_cpu_par(ctx, pieces, lv_cpu_grain(pieces, tb ? 8 : 2), fn, &j);
  return true;
}

#else

lv_gemm_small_isa lv_cpu_gemm_small_isa(void) { return LV_GEMM_SMALL_OFF; }

bool lv_cpu_gemm_small_with(lv_gemm_small_isa x, lv_kctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                            float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                            float *c, int64_t ldc) {
  (void)x, (void)ctx, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b;
  (void)ldb, (void)beta, (void)c, (void)ldc;
  return false;
}

#endif

const char *const lv_gemm_small_isa_names[3] = {"off", "avx2", "avx512"};

bool lv_cpu_gemm_small(lv_kctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                       int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  return lv_cpu_gemm_small_with(lv_cpu_gemm_small_isa(), ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
