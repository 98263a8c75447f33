/* int8 GEMM on the CPU (post-training quantization, CTranslate2's scheme): Y [m, n] =
 * X [m, k] W [k, n] (+ bias [n]) (+ Y) with W quantized once, symmetric, per output column
 * (w[p][j] ~ q[p][j] * ws[j], q in [-127, 127]) and X quantized per row on the fly
 * (x[i][p] ~ a[i][p] * xs[i], xs[i] = max_p |x[i][p]| / 127). The sum over p of a q is
 * exact in int32 (|a q| <= 16129, so k up to 133 144), the same bits on every path; it is
 * then dequantized and the bias added in float, in one fixed order:
 *   y = (float)sum * (xs[i] * ws[j]);  y = y + bias[j];  y = Y + y (accumulate).
 * Paths (picked once at run time, or forced with LINGVOC_INT8=avx512|avx2|off):
 *  - avx512: AVX-512 VNNI vpdpbusd, unsigned x signed bytes: X goes in as a + 128 (u8)
 *    and 128 * (the column's sum of q) is taken off the int32 sum, exactly;
 *  - avx2: vpmaddwd on sign-extended 16-bit values (no saturation, unlike vpmaddubsw);
 *  - off: portable scalar code, the reference the tests hold the others to.
 * Ownership: an lv_q8_mat owns its packed buffers (lv_q8_mat_free). */
#ifndef LV_KERNELS_CPU_CPU_INT8_H
#define LV_KERNELS_CPU_CPU_INT8_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef enum { LV_INT8_OFF, LV_INT8_AVX2, LV_INT8_AVX512, LV_INT8_ISA_COUNT } lv_int8_isa;
extern const char *const lv_int8_isa_names[LV_INT8_ISA_COUNT]; /* "off", "avx2", "avx512" */

/* Column blocks of 16, k in groups of 4: block b, group g holds columns 16b..16b+15, each
 * as its 4 bytes q[4g..4g+3][j] (vpdpbusd's operand); padding columns and rows are 0. */
#define LV_Q8_NB 16
#define LV_Q8_KG 4

typedef struct lv_q8_mat {
  int64_t k, n;   /* logical shape of W [k, n] */
  int64_t kp, np; /* k rounded up to 4, n to 16 */
  int8_t *q;      /* [np / 16][kp / 4][16][4], blocks bstride bytes apart */
  int64_t bstride; /* kp * 16, or more in a view of rows of a larger matrix */
  float *scale;   /* [np]: ws (0 past n) */
  int32_t *colsum; /* [np]: sum over p of q[p][j] */
} lv_q8_mat;

/* Symmetric per-channel quantization of float data: n_ch channels of len values each,
 * channel c's value i at x[c * ch_stride + i * stride]; q (same layout) and scale[c] =
 * max |x| / 127 (0 for an all-zero channel, whose q are 0; NaN for a channel holding a
 * NaN or an infinity, whose q are 0). */
void lv_q8_quantize(const float *x, int64_t n_ch, int64_t len, int64_t ch_stride, int64_t stride, int8_t *q,
                    float *scale);
/* The longest k whose sums fit in int32: 127 * 127 * k <= 2^31 - 1. */
#define LV_Q8_MAX_K 133144
/* Packs q [k, n] (row-major) with per-column scales into m. Returns false if out of memory
 * or k > LV_Q8_MAX_K. */
bool lv_q8_mat_pack(lv_q8_mat *m, const int8_t *q, const float *scale, int64_t k, int64_t n);
void lv_q8_mat_free(lv_q8_mat *m);
/* x [k, n] (row-major) = q [p][j] * scale[j]: the floats m's values stand for. */
void lv_q8_mat_unpack(const lv_q8_mat *m, float *x);
/* Rows [r0, r0 + len) of m as a view (r0 a multiple of 4, and r0 + len one too or m's
 * k): its q and scale point into m's, its colsum (np values) is the caller's memory.
 * False for other rows. */
bool lv_q8_mat_rows(const lv_q8_mat *m, int64_t r0, int64_t len, int32_t *colsum, lv_q8_mat *out);

/* Y [m, n] (row stride ldy) = X [m, k] (row stride ldx) W (+ bias when not NULL) (+ Y
 * when accumulate), on the picked path. */
void lv_cpu_q8_gemm(lv_kctx *ctx, int64_t m, const float *x, int64_t ldx, const lv_q8_mat *w, const float *bias,
                    bool accumulate, float *y, int64_t ldy);
/* The path picked for this process (the CPU's best, or LINGVOC_INT8's), whether the CPU
 * can run isa, and the product on a given path (the tests run each). */
lv_int8_isa lv_cpu_int8_isa(void);
bool lv_cpu_int8_isa_ok(lv_int8_isa isa);
void lv_cpu_q8_gemm_with(lv_int8_isa isa, lv_kctx *ctx, int64_t m, const float *x, int64_t ldx, const lv_q8_mat *w,
                         const float *bias, bool accumulate, float *y, int64_t ldy);
/* The int32 sums alone (sum over p of a[i][p] q[p][j], [m, n] row-major) on a given path,
 * from activations already quantized (a [m, k], row-major): what the tests compare
 * bit for bit. */
void lv_cpu_q8_sums_with(lv_int8_isa isa, int64_t m, const int8_t *a, const lv_q8_mat *w, int32_t *sums);

#endif
