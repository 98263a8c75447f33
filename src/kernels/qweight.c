/* The quantized types' table (qweight.h). */
#include "kernels/qweight.h"

#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/names.h"
#include "base/status.h"
#include "kernels/cpu/cpu_int8.h"

const char *const lv_qtype_names[LV_QTYPE_COUNT] = {"int8"};
const char *const lv_qtype_dtype_names[LV_QTYPE_COUNT] = {"qint8"};

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

static bool q8_slice_rows(const lv_qweight *w, int64_t r0, int64_t len, void *(*alloc)(void *, size_t), void *actx,
                          lv_qweight *out) {
  const lv_q8_mat *m = w->packed;
  lv_q8_mat *v = alloc(actx, sizeof *v);
  int32_t *colsum = v ? alloc(actx, (size_t)m->np * sizeof *colsum) : NULL;
  if (!colsum || !lv_q8_mat_rows(m, r0, len, colsum, v)) return false;
  *out = (lv_qweight){.type = LV_QTYPE_INT8, .k = len, .n = w->n, .packed = v, .owned = false};
  return true;
}

static void q8_matmul(lv_kctx *ctx, int64_t m, const float *x, int64_t ldx, const lv_qweight *w, const float *bias,
                      bool accumulate, float *y, int64_t ldy) {
  lv_cpu_q8_gemm(ctx, m, x, ldx, w->packed, bias, accumulate, y, ldy);
}

static const char *q8_path(void) { return lv_int8_isa_names[lv_cpu_int8_isa()]; }

const lv_qtype_traits lv_qtype_traits_table[LV_QTYPE_COUNT] = {
    [LV_QTYPE_INT8] = {.elem_bytes = 1,
                       .quantize = q8_quantize,
                       .dequantize = q8_dequantize,
                       .pack = q8_pack,
                       .free_packed = q8_free,
                       .slice_rows = q8_slice_rows,
                       .matmul = q8_matmul,
                       .path = q8_path},
};

lv_qweight *lv_qweight_new(lv_qtype type, const void *q, const float *scales, int64_t k, int64_t n) {
  lv_qweight *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  *w = (lv_qweight){.type = type, .k = k, .n = n, .owned = true};
  if (!lv_qtype_traits_of(type)->pack(w, q, scales, k, n)) {
    free(w);
    return NULL;
  }
  return w;
}

void lv_qweight_free(lv_qweight *w) {
  if (!w) return;
  if (w->owned) lv_qtype_traits_of(w->type)->free_packed(w);
  free(w);
}
