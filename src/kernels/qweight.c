/* The quantized types' table (qweight.h). */
#include "kernels/qweight.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/names.h"
#include "base/status.h"
#include "kernels/cpu/cpu_int8.h"
#include "kernels/cpu/cpu_kernels.h"

const char *const lv_qtype_names[LV_QTYPE_COUNT] = {"int8", "bf16"};
const char *const lv_qtype_dtype_names[LV_QTYPE_COUNT] = {"qint8", "qbf16"};

bool lv_qtype_from_name(const char *name, lv_qtype *out) {
  int i = lv_name_index(lv_qtype_names, LV_QTYPE_COUNT, name);
  if (i >= 0) *out = (lv_qtype)i;
  return i >= 0;
}

bool lv_qtype_from_dtype_name(const char *name, lv_qtype *out) {
  int i = lv_name_index(lv_qtype_dtype_names, LV_QTYPE_COUNT, name);
  if (i >= 0) *out = (lv_qtype)i;
  return i >= 0;
}

bool lv_qweights_enabled(void) {
  const char *v = lv_env_get()->int8;
  return !v || strcmp(v, "float") != 0;
}

/* ---- int8: symmetric, per channel, cpu_int8.c's GEMM ---- */

static void q8_quantize(const float *x, int64_t rows, int64_t cols, int axis, void *q, float *scales) {
  if (axis == 0)
    lv_q8_quantize(x, rows, cols, cols, 1, q, scales);
  else
    lv_q8_quantize(x, cols, rows, 1, cols, q, scales);
}

static int64_t q8_quantize_grid(const float *x, int64_t rows, int64_t cols, int axis, float step, void *q,
                                float *scales, int64_t *clamped) {
  int8_t *v = q;
  const int64_t nch = axis ? cols : rows, len = axis ? rows : cols, cs = axis ? 1 : cols, es = axis ? cols : 1;
  int64_t kept = 0;
  for (int64_t c = 0; c < nch; c++) {
    bool on = step > 0 && isfinite(step);
    int64_t past = 0;
    for (int64_t i = 0; on && i < len; i++) {
      const float y = x[c * cs + i * es], l = nearbyintf(y / step);
      /* On the grid: within float rounding of a level (fake quantization computes a
       * level as (k - zero point) * step + its nudged minimum, in float). */
      on = fabsf(y - l * step) <= 1e-4f * step && fabsf(l) <= 128.0f;
      past += fabsf(l) > 127.0f;
    }
    if (!on) {
      lv_q8_quantize(x + c * cs, 1, len, 0, es, v + c * cs, scales + c);
      continue;
    }
    for (int64_t i = 0; i < len; i++)
      v[c * cs + i * es] = (int8_t)fmaxf(-127.0f, fminf(127.0f, nearbyintf(x[c * cs + i * es] / step)));
    scales[c] = step;
    *clamped += past;
    kept++;
  }
  return kept;
}

static void q8_dequantize(const void *q, const float *scales, int64_t rows, int64_t cols, int axis, float *x) {
  const int8_t *v = q;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) x[r * cols + c] = (float)v[r * cols + c] * scales[axis == 0 ? r : c];
}

static bool q8_pack(lv_qweight *w, const void *q, const float *scales, int64_t k, int64_t n) {
  lv_q8_mat *m = malloc(sizeof *m);
  if (!m || !lv_q8_mat_pack(m, q, scales, k, n)) {
    free(m);
    return false;
  }
  w->packed = m;
  return true;
}

static void q8_free(lv_qweight *w) {
  lv_q8_mat_free(w->packed);
  free(w->packed);
}

/* An axis-0 table's values and scales (packed holds k * n values, then the scales at a
 * 4-byte aligned offset). */
static size_t rows_scales_at(int64_t k, int64_t n, size_t elem) { return ((size_t)(k * n) * elem + 3) & ~(size_t)3; }

static void q8_unpack(const lv_qweight *w, float *x) {
  if (w->axis == 0) {
    const float *s = (const float *)((const char *)w->packed + rows_scales_at(w->k, w->n, 1));
    q8_dequantize(w->packed, s, w->k, w->n, 0, x);
  } else {
    lv_q8_mat_unpack(w->packed, x);
  }
}

/* Rows ids of an axis-0 table (k * n values of elem bytes, then k scales) into out, each
 * row widened by row(); an id outside [0, k) is recorded as gather_fwd records it. */
typedef void (*row_fn)(const void *q, int64_t d, float s, float *y);

typedef struct table_gather_job {
  const char *q;
  size_t row_bytes;
  const float *s;
  int64_t d;
  const int32_t *ids;
  float *out;
  row_fn row;
} table_gather_job;

static void table_gather_rows(void *arg, int64_t lo, int64_t hi, int slot) {
  const table_gather_job *J = arg;
  (void)slot;
  for (int64_t i = lo; i < hi; i++) J->row(J->q + J->ids[i] * J->row_bytes, J->d, J->s[J->ids[i]], J->out + i * J->d);
}

static void table_gather(lv_kctx *ctx, const lv_qweight *w, int64_t n_ids, const int32_t *ids, float *out,
                         uint64_t tag, size_t elem, row_fn row) {
  for (int64_t i = 0; i < n_ids; i++)
    if (ids[i] < 0 || ids[i] >= w->k) {
      lv_cpu_record_error(ctx, (lv_kerror){tag, i, ids[i], w->k});
      return;
    }
  table_gather_job j = {.q = w->packed, .row_bytes = (size_t)w->n * elem,
                        .s = (const float *)((const char *)w->packed + rows_scales_at(w->k, w->n, elem)), .d = w->n,
                        .ids = ids, .out = out, .row = row};
  lv_cpu_par(ctx, n_ids, n_ids * w->n > 65536 ? lv_cpu_grain(n_ids, 16) : n_ids, table_gather_rows, &j);
}

static void q8_row(const void *q, int64_t d, float s, float *y) {
  const int8_t *v = q;
  for (int64_t c = 0; c < d; c++) y[c] = (float)v[c] * s;
}

static void q8_gather(lv_kctx *ctx, const lv_qweight *w, int64_t n_ids, const int32_t *ids, float *out, uint64_t tag) {
  table_gather(ctx, w, n_ids, ids, out, tag, 1, q8_row);
}

static bool q8_slice_rows(const lv_qweight *w, int64_t r0, int64_t len, void *(*alloc)(void *, size_t), void *actx,
                          lv_qweight *out) {
  const lv_q8_mat *m = w->packed;
  lv_q8_mat *v = alloc(actx, sizeof *v);
  int32_t *colsum = v ? alloc(actx, (size_t)m->np * sizeof *colsum) : NULL;
  if (!colsum || !lv_q8_mat_rows(m, r0, len, colsum, v)) return false;
  *out = (lv_qweight){.type = LV_QTYPE_INT8, .k = len, .n = w->n, .axis = 1, .packed = v, .owned = false};
  return true;
}

static void q8_matmul(lv_kctx *ctx, int64_t m, const float *x, int64_t ldx, const lv_qweight *w, const float *bias,
                      bool accumulate, float *y, int64_t ldy) {
  lv_cpu_q8_gemm(ctx, m, x, ldx, w->packed, bias, accumulate, y, ldy);
}

static const char *q8_engine(void) {
  /* Literals, one per lv_int8_isa (no shared buffer for concurrent loads to write). */
  static const char *const kEngines[LV_INT8_ISA_COUNT] = {
      [LV_INT8_OFF] = "the int8 GEMM, path off",
      [LV_INT8_AVX2] = "the int8 GEMM, path avx2",
      [LV_INT8_AVX512] = "the int8 GEMM, path avx512",
  };
  return kEngines[lv_cpu_int8_isa()];
}

/* ---- bf16: values rounded to bfloat16, scales 1; widened to float32 at load ---- */

/* Round to nearest, ties to even; a NaN stays a (quiet) NaN, an infinity an infinity. */
static uint16_t bf16_of(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u);
  return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

static float float_of_bf16(uint16_t h) {
  const uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

static void bf16_quantize(const float *x, int64_t rows, int64_t cols, int axis, void *q, float *scales) {
  uint16_t *v = q;
  for (int64_t c = 0; c < (axis ? cols : rows); c++) scales[c] = 1.0f;
  for (int64_t i = 0; i < rows * cols; i++) {
    v[i] = bf16_of(x[i]);
    /* A NaN or infinity makes its channel's scale NaN, as int8's does: export refuses it. */
    if (!isfinite(x[i])) scales[axis ? i % cols : i / cols] = NAN;
  }
}

static void bf16_dequantize(const void *q, const float *scales, int64_t rows, int64_t cols, int axis, float *x) {
  const uint16_t *v = q;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) x[r * cols + c] = float_of_bf16(v[r * cols + c]) * scales[axis == 0 ? r : c];
}

/* The packed twin is the widened [k, n] floats themselves. */
static bool bf16_pack(lv_qweight *w, const void *q, const float *scales, int64_t k, int64_t n) {
  float *x = malloc(sizeof(float) * (size_t)(k * n) + 1);
  if (!x) return false;
  bf16_dequantize(q, scales, k, n, 1, x);
  w->packed = x;
  return true;
}

static void bf16_free(lv_qweight *w) { free(w->packed); }

static void bf16_unpack(const lv_qweight *w, float *x) {
  if (w->axis == 0)
    bf16_dequantize(w->packed, (const float *)((const char *)w->packed + rows_scales_at(w->k, w->n, 2)), w->k, w->n,
                    0, x);
  else
    memcpy(x, w->packed, sizeof(float) * (size_t)(w->k * w->n));
}

static void bf16_row(const void *q, int64_t d, float s, float *y) {
  const uint16_t *v = q;
  for (int64_t c = 0; c < d; c++) y[c] = float_of_bf16(v[c]) * s;
}

static void bf16_gather(lv_kctx *ctx, const lv_qweight *w, int64_t n_ids, const int32_t *ids, float *out,
                        uint64_t tag) {
  table_gather(ctx, w, n_ids, ids, out, tag, 2, bf16_row);
}

static bool bf16_slice_rows(const lv_qweight *w, int64_t r0, int64_t len, void *(*alloc)(void *, size_t), void *actx,
                            lv_qweight *out) {
  (void)alloc, (void)actx;
  if (r0 < 0 || len <= 0 || r0 + len > w->k) return false;
  *out = (lv_qweight){.type = LV_QTYPE_BF16, .k = len, .n = w->n, .axis = 1,
                      .packed = (float *)w->packed + r0 * w->n, .owned = false};
  return true;
}

static void bf16_matmul(lv_kctx *ctx, int64_t m, const float *x, int64_t ldx, const lv_qweight *w, const float *bias,
                        bool accumulate, float *y, int64_t ldy) {
  for (int64_t r = 0; bias && r < m; r++) {
    float *yr = y + r * ldy;
    if (accumulate) {
#pragma omp simd
      for (int64_t c = 0; c < w->n; c++) yr[c] += bias[c];
    } else {
      memcpy(yr, bias, sizeof *yr * (size_t)w->n);
    }
  }
  lv_cpu_gemm(ctx, false, false, m, w->n, w->k, 1.0f, x, ldx, w->packed, w->n, bias || accumulate ? 1.0f : 0.0f, y,
              ldy);
}

static const char *bf16_engine(void) { return "float32 GEMMs (the bf16 values widened at load)"; }

const lv_qtype_traits lv_qtype_traits_table[LV_QTYPE_COUNT] = {
    [LV_QTYPE_INT8] = {.elem_bytes = 1,
                       .quantize = q8_quantize,
                       .quantize_grid = q8_quantize_grid,
                       .dequantize = q8_dequantize,
                       .pack = q8_pack,
                       .free_packed = q8_free,
                       .unpack = q8_unpack,
                       .gather = q8_gather,
                       .slice_rows = q8_slice_rows,
                       .matmul = q8_matmul,
                       .engine = q8_engine},
    [LV_QTYPE_BF16] = {.elem_bytes = 2,
                       .quantize = bf16_quantize,
                       .quantize_grid = NULL,
                       .dequantize = bf16_dequantize,
                       .pack = bf16_pack,
                       .free_packed = bf16_free,
                       .unpack = bf16_unpack,
                       .gather = bf16_gather,
                       .slice_rows = bf16_slice_rows,
                       .matmul = bf16_matmul,
                       .engine = bf16_engine},
};

static lv_qweight *root_new(lv_qtype type, int axis, int64_t k, int64_t n) {
  lv_qweight *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  *w = (lv_qweight){.type = type, .k = k, .n = n, .axis = axis, .owned = true};
  pthread_mutex_init(&w->mu, NULL);
  return w;
}

lv_qweight *lv_qweight_new(lv_qtype type, const void *q, const float *scales, int64_t k, int64_t n) {
  lv_qweight *w = root_new(type, 1, k, n);
  if (w && !lv_qtype_traits_of(type)->pack(w, q, scales, k, n)) {
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  return w;
}

lv_qweight *lv_qweight_new_rows(lv_qtype type, const void *q, const float *scales, int64_t k, int64_t n) {
  const size_t at = rows_scales_at(k, n, lv_qtype_traits_of(type)->elem_bytes);
  lv_qweight *w = root_new(type, 0, k, n);
  char *b = w ? malloc(at + sizeof(float) * (size_t)k + 1) : NULL;
  if (!b) {
    if (w) pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  memcpy(b, q, (size_t)(k * n) * lv_qtype_traits_of(type)->elem_bytes);
  memcpy(b + at, scales, sizeof(float) * (size_t)k);
  w->packed = b;
  return w;
}

void lv_qweight_free(lv_qweight *w) {
  if (!w) return;
  if (w->owned) {
    if (w->axis == 0)
      free(w->packed);
    else
      lv_qtype_traits_of(w->type)->free_packed(w);
    free(w->floats);
    pthread_mutex_destroy(&w->mu);
  }
  free(w);
}

const float *lv_qweight_floats(const lv_qweight *w, bool *made) {
  /* The cache is the root's own: made once under its lock, whatever const view asks. */
  lv_qweight *r = (lv_qweight *)(w->root ? w->root : w);
  pthread_mutex_lock(&r->mu);
  *made = !r->floats;
  if (!r->floats) {
    float *x = malloc(sizeof(float) * (size_t)(r->k * r->n) + 1);
    if (x) lv_qtype_traits_of(r->type)->unpack(r, x);
    r->floats = x;
  }
  const float *f = r->floats;
  pthread_mutex_unlock(&r->mu);
  return f ? f + w->r0 * w->n : NULL;
}
