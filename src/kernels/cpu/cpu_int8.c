/* int8 GEMM (cpu_int8.h): quantization, packing, and the product on three paths that
 * share everything but the int32 sums of one tile (rows x 16-column blocks): the rows'
 * quantization before, the dequantization after (epilogue), so the paths differ in no
 * float operation and their outputs are the same bits. */
#include "kernels/cpu/cpu_int8.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/log.h"
#include "base/status.h"
#include "kernels/cpu/cpu_kernels.h"

const char *const lv_int8_isa_names[LV_INT8_ISA_COUNT] = {"off", "avx2", "avx512"};

static int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

/* One channel of lv_q8_quantize; inlined with stride 1 (a row: activations, embeddings)
 * its loops vectorize. */
static inline __attribute__((always_inline)) void quantize_channel(const float *xc, int64_t len, int64_t stride,
                                                                   int8_t *qc, float *scale) {
  /* max |x| on the bits: for floats >= 0 their order is the bits' (an unsigned integer
   * max, which vectorizes; a float max with its NaN rules does not), and an infinity or
   * a NaN is any bits from 0x7f800000 up. */
  uint32_t mbits = 0;
#pragma omp simd reduction(max : mbits)
  for (int64_t i = 0; i < len; i++) {
    uint32_t b;
    memcpy(&b, xc + i * stride, sizeof b);
    b &= 0x7fffffffu;
    mbits = b > mbits ? b : mbits;
  }
  const bool nonfinite = mbits >= 0x7f800000u;
  float amax;
  memcpy(&amax, &mbits, sizeof amax);
  /* A NaN or infinity anywhere makes the channel's scale NaN (its q 0), so that what it
   * feeds is NaN, as the float product's would be. */
  *scale = nonfinite ? NAN : amax / 127.0f;
  const float inv = !nonfinite && amax > 0.0f ? 127.0f / amax : 0.0f;
#pragma omp simd
  for (int64_t i = 0; i < len; i++) {
    float r = nearbyintf(xc[i * stride] * inv);
    r = r > 127.0f ? 127.0f : r;
    qc[i * stride] = (int8_t)(r >= -127.0f ? r : -127.0f);
  }
}

void lv_q8_quantize(const float *x, int64_t n_ch, int64_t len, int64_t ch_stride, int64_t stride, int8_t *q,
                    float *scale) {
  for (int64_t c = 0; c < n_ch; c++) {
    if (stride == 1)
      quantize_channel(x + c * ch_stride, len, 1, q + c * ch_stride, scale + c);
    else
      quantize_channel(x + c * ch_stride, len, stride, q + c * ch_stride, scale + c);
  }
}

bool lv_q8_mat_pack(lv_q8_mat *m, const int8_t *q, const float *scale, int64_t k, int64_t n) {
  memset(m, 0, sizeof *m);
  if (k > LV_Q8_MAX_K) return false;
  m->k = k, m->n = n;
  m->kp = round_up(k > 0 ? k : 1, LV_Q8_KG);
  m->np = round_up(n > 0 ? n : 1, LV_Q8_NB);
  m->bstride = m->kp * LV_Q8_NB;
  m->q = aligned_alloc(64, (size_t)(m->np * m->kp));
  m->scale = calloc((size_t)m->np, sizeof *m->scale);
  m->colsum = calloc((size_t)m->np, sizeof *m->colsum);
  if (!m->q || !m->scale || !m->colsum) {
    lv_q8_mat_free(m);
    return false;
  }
  memset(m->q, 0, (size_t)(m->np * m->kp));
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < n; j++) {
      const int8_t v = q[p * n + j];
      m->q[(j / LV_Q8_NB) * m->bstride + (p / LV_Q8_KG) * (LV_Q8_NB * LV_Q8_KG) + (j % LV_Q8_NB) * LV_Q8_KG +
           p % LV_Q8_KG] = v;
      m->colsum[j] += v;
    }
  memcpy(m->scale, scale, (size_t)n * sizeof *scale);
  return true;
}

void lv_q8_mat_unpack(const lv_q8_mat *m, float *x) {
  for (int64_t p = 0; p < m->k; p++)
    for (int64_t j = 0; j < m->n; j++)
      x[p * m->n + j] = (float)m->q[(j / LV_Q8_NB) * m->bstride + (p / LV_Q8_KG) * (LV_Q8_NB * LV_Q8_KG) +
                                    (j % LV_Q8_NB) * LV_Q8_KG + p % LV_Q8_KG] * m->scale[j];
}

bool lv_q8_mat_rows(const lv_q8_mat *m, int64_t r0, int64_t len, int32_t *colsum, lv_q8_mat *out) {
  if (r0 < 0 || len <= 0 || r0 + len > m->k || r0 % LV_Q8_KG || ((r0 + len) % LV_Q8_KG && r0 + len != m->k))
    return false;
  *out = *m;
  out->k = len;
  out->kp = round_up(len, LV_Q8_KG);
  out->q = m->q + (r0 / LV_Q8_KG) * (LV_Q8_NB * LV_Q8_KG);
  out->colsum = colsum;
  /* The view's sums run over its kp rows, padding included (zeros past m's k). */
  for (int64_t j = 0; j < m->np; j++) {
    const int8_t *col = out->q + (j / LV_Q8_NB) * m->bstride + (j % LV_Q8_NB) * LV_Q8_KG;
    int32_t sum = 0;
    for (int64_t g = 0; g < out->kp / LV_Q8_KG; g++)
      for (int t = 0; t < LV_Q8_KG; t++) sum += col[g * LV_Q8_NB * LV_Q8_KG + t];
    colsum[j] = sum;
  }
  return true;
}

void lv_q8_mat_free(lv_q8_mat *m) {
  free(m->q);
  free(m->scale);
  free(m->colsum);
  memset(m, 0, sizeof *m);
}

/* ---- the paths' int32 sums of one tile: rows [0, mr) x column blocks [0, nb) ----
 * a: the tile's first row (row stride kp), in the path's own form (int8, u8 = a + 128,
 * int16); w: the first block; s: [mr][nb * 16]. */

static void tile_scalar(int mr, int nb, int64_t kp, int64_t bstride, const int8_t *a, const int8_t *w, int32_t *s) {
  const int64_t groups = kp / LV_Q8_KG;
  for (int r = 0; r < mr; r++)
    for (int b = 0; b < nb; b++)
      for (int j = 0; j < LV_Q8_NB; j++) {
        int32_t acc = 0;
        for (int64_t g = 0; g < groups; g++) {
          const int8_t *wg = w + b * bstride + g * LV_Q8_NB * LV_Q8_KG + j * LV_Q8_KG;
          const int8_t *ag = a + r * kp + g * LV_Q8_KG;
          for (int t = 0; t < LV_Q8_KG; t++) acc += (int32_t)ag[t] * wg[t];
        }
        s[r * nb * LV_Q8_NB + b * LV_Q8_NB + j] = acc;
      }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1

#define VNNI_ISA "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"
#define INLINE_VNNI static inline __attribute__((always_inline, target(VNNI_ISA)))
#define VNNI __attribute__((target(VNNI_ISA)))
#define V3_ISA "avx2,fma"
#define INLINE_V3 static inline __attribute__((always_inline, target(V3_ISA)))
#define V3 __attribute__((target(V3_ISA)))

/* a: u8 (a + 128). The sum comes out as sum (a + 128) q; the driver takes 128 colsum off. */
INLINE_VNNI void tile_vnni_t(const int mr, const int nb, int64_t kp, int64_t bstride, const uint8_t *a, const int8_t *w,
                             int32_t *s) {
  const int64_t groups = kp / LV_Q8_KG;
  __m512i acc[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
    for (int b = 0; b < nb; b++) acc[r][b] = _mm512_setzero_si512();
  for (int64_t g = 0; g < groups; g++) {
    __m512i wv[4];
#pragma GCC unroll 4
    for (int b = 0; b < nb; b++) wv[b] = _mm512_load_si512((const void *)(w + b * bstride + g * 64));
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++) {
      int32_t a4;
      memcpy(&a4, a + r * kp + g * LV_Q8_KG, 4);
      const __m512i av = _mm512_set1_epi32(a4);
#pragma GCC unroll 4
      for (int b = 0; b < nb; b++) acc[r][b] = _mm512_dpbusd_epi32(acc[r][b], av, wv[b]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
    for (int b = 0; b < nb; b++) _mm512_storeu_si512((void *)(s + r * nb * LV_Q8_NB + b * LV_Q8_NB), acc[r][b]);
}

VNNI static void tile_vnni(int mr, int nb, int64_t kp, int64_t bstride, const uint8_t *a, const int8_t *w, int32_t *s) {
#define VCASE(R, B) \
  case (R) * 8 + (B): tile_vnni_t(R, B, kp, bstride, a, w, s); break;
#define VROW(R) VCASE(R, 1) VCASE(R, 2) VCASE(R, 3) VCASE(R, 4)
  switch (mr * 8 + nb) { VROW(1) VROW(2) VROW(3) VROW(4) }
#undef VROW
#undef VCASE
}

/* a: int16. One 16-column block: 4 accumulators a row, each 4 columns x 2 partial sums. */
INLINE_V3 void tile_avx2_t(const int mr, int64_t kp, const int16_t *a, const int8_t *w, int32_t *s, int64_t lds) {
  const int64_t groups = kp / LV_Q8_KG;
  __m256i acc[2][4];
#pragma GCC unroll 2
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) acc[r][c] = _mm256_setzero_si256();
  for (int64_t g = 0; g < groups; g++) {
    __m256i wv[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
      wv[c] = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(w + g * 64 + c * 16)));
#pragma GCC unroll 2
    for (int r = 0; r < mr; r++) {
      int64_t a4;
      memcpy(&a4, a + r * kp + g * LV_Q8_KG, 8);
      const __m256i av = _mm256_set1_epi64x(a4);
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(av, wv[c]));
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < mr; r++) {
    /* hadd of two accumulators gives columns 0 1 4 5 2 3 6 7 of their 8. */
    const __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][0], acc[r][1]), 0xd8);
    const __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][2], acc[r][3]), 0xd8);
    _mm256_storeu_si256((__m256i *)(s + r * lds), lo);
    _mm256_storeu_si256((__m256i *)(s + r * lds + 8), hi);
  }
}

/* Rows [0, mr) (1 or 2) x one block into s (row stride lds). */
V3 static void tile_avx2(int mr, int64_t kp, const int16_t *a, const int8_t *w, int32_t *s, int64_t lds) {
  if (mr == 2)
    tile_avx2_t(2, kp, a, w, s, lds);
  else
    tile_avx2_t(1, kp, a, w, s, lds);
}

#endif

/* ---- the driver ---- */

/* Rows and blocks of one tile on each path; pieces of PIECE_BLOCKS column blocks. */
#define TILE_ROWS 4
#define PIECE_BLOCKS 4

typedef struct q8_job {
  lv_int8_isa isa;
  int64_t m;
  const void *a; /* [m, kp]: int8, u8 or int16 by isa */
  const float *xs; /* [m] rows' scales; NULL: return the int32 sums in sums */
  const lv_q8_mat *w;
  const float *bias;
  bool accumulate;
  float *y;
  int64_t ldy;
  int32_t *sums; /* [m, n] when xs is NULL */
} q8_job;

/* Row r's columns [j0, j0 + nv) from their int32 sums s; vnni: the sums are of a + 128,
 * and 128 times the columns' sums come off first (in unsigned arithmetic: the VNNI sum may
 * wrap past int32, its u8 values reaching 255; the difference is the exact sum all the
 * same). One loop for each case, so that each vectorizes whole. */
static inline void epilogue(const q8_job *j, int64_t r, int64_t j0, int64_t nv, int32_t *s, bool vnni) {
  if (vnni) {
    const int32_t *cs = j->w->colsum + j0;
#pragma omp simd
    for (int64_t c = 0; c < nv; c++) s[c] = (int32_t)((uint32_t)s[c] - (uint32_t)cs[c] * 128u);
  }
  if (!j->xs) {
    memcpy(j->sums + r * j->w->n + j0, s, (size_t)nv * sizeof *s);
    return;
  }
  const float xs = j->xs[r], *ws = j->w->scale + j0, *bias = j->bias ? j->bias + j0 : NULL;
  float *y = j->y + r * j->ldy + j0;
  if (bias && j->accumulate) {
#pragma omp simd
    for (int64_t c = 0; c < nv; c++) y[c] = y[c] + ((float)s[c] * (xs * ws[c]) + bias[c]);
  } else if (bias) {
#pragma omp simd
    for (int64_t c = 0; c < nv; c++) y[c] = (float)s[c] * (xs * ws[c]) + bias[c];
  } else if (j->accumulate) {
#pragma omp simd
    for (int64_t c = 0; c < nv; c++) y[c] = y[c] + (float)s[c] * (xs * ws[c]);
  } else {
#pragma omp simd
    for (int64_t c = 0; c < nv; c++) y[c] = (float)s[c] * (xs * ws[c]);
  }
}

static void q8_piece(void *arg, int64_t lo, int64_t hi, int slot) {
  (void)slot;
  const q8_job *j = arg;
  const lv_q8_mat *w = j->w;
  const int64_t kp = w->kp, bstride = w->bstride, nblocks = w->np / LV_Q8_NB;
  int32_t s[TILE_ROWS * PIECE_BLOCKS * LV_Q8_NB];
  for (int64_t pc = lo; pc < hi; pc++) {
    const int64_t b0 = pc * PIECE_BLOCKS, nb = nblocks - b0 < PIECE_BLOCKS ? nblocks - b0 : PIECE_BLOCKS;
    const int8_t *wp = w->q + b0 * bstride;
    const int rows = j->isa == LV_INT8_AVX2 ? 2 : TILE_ROWS;
    for (int64_t r0 = 0; r0 < j->m; r0 += rows) {
      const int mr = (int)(j->m - r0 < rows ? j->m - r0 : rows);
      switch (j->isa) {
#ifdef HAVE_X86
        case LV_INT8_AVX512:
          tile_vnni(mr, (int)nb, kp, bstride, (const uint8_t *)j->a + r0 * kp, wp, s);
          break;
        case LV_INT8_AVX2:
          for (int64_t b = 0; b < nb; b++)
            tile_avx2(mr, kp, (const int16_t *)j->a + r0 * kp, wp + b * bstride, s + b * LV_Q8_NB, nb * LV_Q8_NB);
          break;
#endif
        default:
          tile_scalar(mr, (int)nb, kp, bstride, (const int8_t *)j->a + r0 * kp, wp, s);
          break;
      }
      /* Every path leaves row r's nb blocks side by side: s + r * nb * 16, columns from jc. */
      const int64_t jc = b0 * LV_Q8_NB, nv = w->n - jc < nb * LV_Q8_NB ? w->n - jc : nb * LV_Q8_NB;
      if (nv > 0)
        for (int r = 0; r < mr; r++) epilogue(j, r0 + r, jc, nv, s + r * nb * LV_Q8_NB, j->isa == LV_INT8_AVX512);
    }
  }
}

/* a [m, k] int8 (row stride k) into the isa's form, rows kp long, zero-padded (u8: a + 128,
 * padded with 128). */
static void *to_isa_form(lv_int8_isa isa, int64_t m, const int8_t *a, int64_t k, int64_t kp) {
  const size_t el = isa == LV_INT8_AVX2 ? 2 : 1;
  void *buf = aligned_alloc(64, round_up((int64_t)el * m * kp, 64));
  LV_ASSERTF(buf, "out of memory for int8 GEMM activations (%lld x %lld)", (long long)m, (long long)kp);
  for (int64_t i = 0; i < m; i++) {
    const int8_t *ai = a + i * k;
    if (isa == LV_INT8_AVX2) {
      int16_t *o = (int16_t *)buf + i * kp;
#pragma omp simd
      for (int64_t p = 0; p < k; p++) o[p] = ai[p];
      for (int64_t p = k; p < kp; p++) o[p] = 0;
    } else if (isa == LV_INT8_AVX512) {
      uint8_t *o = (uint8_t *)buf + i * kp;
#pragma omp simd
      for (int64_t p = 0; p < k; p++) o[p] = (uint8_t)((uint8_t)ai[p] ^ 0x80u); /* (uint8_t)(v + 128) */
      memset(o + k, 128, (size_t)(kp - k));
    } else {
      memcpy((int8_t *)buf + i * kp, ai, (size_t)k);
      memset((int8_t *)buf + i * kp + k, 0, (size_t)(kp - k));
    }
  }
  return buf;
}

static void run(q8_job *j, lv_kctx *ctx, const int8_t *a) {
  void *buf = to_isa_form(j->isa, j->m, a, j->w->k, j->w->kp);
  j->a = buf;
  const int64_t pieces = (j->w->np / LV_Q8_NB + PIECE_BLOCKS - 1) / PIECE_BLOCKS;
  lv_cpu_par(ctx, pieces, 1, q8_piece, j);
  free(buf);
}

static lv_int8_isa usable(lv_int8_isa isa) { return lv_cpu_int8_isa_ok(isa) ? isa : LV_INT8_OFF; }

void lv_cpu_q8_sums_with(lv_int8_isa isa, int64_t m, const int8_t *a, const lv_q8_mat *w, int32_t *sums) {
  if (m <= 0 || w->n <= 0) return;
  q8_job j = {.isa = usable(isa), .m = m, .w = w, .sums = sums};
  run(&j, NULL, a);
}

void lv_cpu_q8_gemm_with(lv_int8_isa isa, lv_kctx *ctx, int64_t m, const float *x, int64_t ldx, const lv_q8_mat *w,
                         const float *bias, bool accumulate, float *y, int64_t ldy) {
  if (m <= 0 || w->n <= 0) return;
  int8_t *a = malloc((size_t)(m * (w->k > 0 ? w->k : 1)));
  float *xs = malloc((size_t)m * sizeof *xs);
  LV_ASSERTF(a && xs, "out of memory for int8 GEMM activations (%lld x %lld)", (long long)m, (long long)w->k);
  for (int64_t i = 0; i < m; i++) lv_q8_quantize(x + i * ldx, 1, w->k, 0, 1, a + i * w->k, xs + i);
  q8_job j = {.isa = usable(isa), .m = m, .xs = xs, .w = w, .bias = bias, .accumulate = accumulate, .y = y,
              .ldy = ldy};
  run(&j, ctx, a);
  free(a);
  free(xs);
}

bool lv_cpu_int8_isa_ok(lv_int8_isa isa) {
#ifdef HAVE_X86
  __builtin_cpu_init();
  if (isa == LV_INT8_AVX512) return lv_cpu_has_avx512() && __builtin_cpu_supports("avx512vnni");
  if (isa == LV_INT8_AVX2) return lv_cpu_has_avx2_fma();
#endif
  return isa == LV_INT8_OFF;
}

/* The best the CPU has, or LINGVOC_INT8's choice (one the CPU lacks is refused with a
 * warning). */
static lv_int8_isa pick(void) {
  const lv_int8_isa best = lv_cpu_int8_isa_ok(LV_INT8_AVX512) ? LV_INT8_AVX512
                           : lv_cpu_int8_isa_ok(LV_INT8_AVX2) ? LV_INT8_AVX2
                                                              : LV_INT8_OFF;
  const char *want = lv_env_get()->int8;
  if (!want || !*want || !strcmp(want, "float")) return best; /* float: qweight.c's */
  for (int i = 0; i < LV_INT8_ISA_COUNT; i++)
    if (!strcmp(want, lv_int8_isa_names[i])) {
      if (lv_cpu_int8_isa_ok((lv_int8_isa)i)) return (lv_int8_isa)i;
      lv_warn("LINGVOC_INT8=%s: this CPU lacks it; using %s", want, lv_int8_isa_names[best]);
      return best;
    }
  lv_warn("LINGVOC_INT8=%s: expected off, avx2, avx512 or float; using %s", want, lv_int8_isa_names[best]);
  return best;
}

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static lv_int8_isa isa_picked;
static void isa_init(void) { isa_picked = pick(); }

lv_int8_isa lv_cpu_int8_isa(void) {
  pthread_once(&isa_once, isa_init);
  return isa_picked;
}

void lv_cpu_q8_gemm(lv_kctx *ctx, int64_t m, const float *x, int64_t ldx, const lv_q8_mat *w, const float *bias,
                    bool accumulate, float *y, int64_t ldy) {
  lv_cpu_q8_gemm_with(lv_cpu_int8_isa(), ctx, m, x, ldx, w, bias, accumulate, y, ldy);
}
