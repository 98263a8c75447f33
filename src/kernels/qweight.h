/* Quantized weights: the one table a quantized type is added to (ggml's type traits).
 *
 * A quantized weight is a variable's twin for inference: the variable keeps its float32
 * value (the dequantized weights, so every op that reads it sees what the quantized
 * model holds), and the twin, in the type's packed form on the host, is what a forward
 * matmul on a graph that records no gradients multiplies with (op_matmul.c: matmul,
 * addmm, matmul_bias; op_shape.c: a row slice of a twin is a twin). The variable owns
 * its twin (lv_var.quant); a tensor only points at one (lv_tensor.qw).
 *
 * In a model file a quantized tensor is stored unpacked (the type's bytes, row-major, and
 * one float scale per channel along its axis) under the type's name as its dtype; axis 1
 * is per output column of a matmul's W [K, N], axis 0 per row of a table read by gathers
 * (embeddings), whose rows are looked up as the dequantized float rows.
 *
 * Adding a type: one enum value, one name, one lv_qtype_traits entry in qweight.c. */
#ifndef LV_KERNELS_QWEIGHT_H
#define LV_KERNELS_QWEIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef enum { LV_QTYPE_INT8, LV_QTYPE_COUNT } lv_qtype;
/* The types' names in model files and on bin/export's --quantize ("int8"), and the
 * dtype names their tensors carry in a model file ("qint8"). */
extern const char *const lv_qtype_names[LV_QTYPE_COUNT];
extern const char *const lv_qtype_dtype_names[LV_QTYPE_COUNT];
bool lv_qtype_from_name(const char *name, lv_qtype *out);
bool lv_qtype_from_dtype_name(const char *name, lv_qtype *out);

/* A [k, n] weight in a type's packed form (or a view of rows of another's). */
typedef struct lv_qweight {
  lv_qtype type;
  int64_t k, n;
  void *packed; /* the type's own (int8: lv_q8_mat) */
  bool owned;   /* packed is freed with the twin (a slice's is not) */
} lv_qweight;

typedef struct lv_qtype_traits {
  size_t elem_bytes; /* bytes of one quantized value in a model file */
  /* Quantizes float [rows, cols] per channel along axis (0: rows, 1: columns) into q
   * (rows * cols values) and scales (one per channel). */
  void (*quantize)(const float *x, int64_t rows, int64_t cols, int axis, void *q, float *scales);
  /* The float values q and scales stand for. */
  void (*dequantize)(const void *q, const float *scales, int64_t rows, int64_t cols, int axis, float *x);
  /* The packed twin of W [k, n] quantized per column (axis 1); false if out of memory. */
  bool (*pack)(lv_qweight *w, const void *q, const float *scales, int64_t k, int64_t n);
  void (*free_packed)(lv_qweight *w);
  /* Rows [r0, r0 + len) of w as a twin into out, its memory from alloc (the graph's step
   * arena); false when the type cannot view them (then the float slice is used). */
  bool (*slice_rows)(const lv_qweight *w, int64_t r0, int64_t len, void *(*alloc)(void *actx, size_t bytes),
                     void *actx, lv_qweight *out);
  /* y [m, n] (row stride ldy) = x [m, k] (row stride ldx) w (+ bias [n]) (+ y), on the CPU. */
  void (*matmul)(lv_kctx *ctx, int64_t m, const float *x, int64_t ldx, const lv_qweight *w, const float *bias,
                 bool accumulate, float *y, int64_t ldy);
  /* The code path matmul takes in this process ("avx512", ...), for logs. */
  const char *(*path)(void);
} lv_qtype_traits;

extern const lv_qtype_traits lv_qtype_traits_table[LV_QTYPE_COUNT];

/* Whether matmuls use the twins: true unless LINGVOC_INT8=float, which runs a quantized
 * model's float32 GEMMs on its dequantized weights (the weights' quantization error
 * alone, without the activations'; a diagnostic, and the tests' proof that the twins
 * run). */
bool lv_qweights_enabled(void);

static inline const lv_qtype_traits *lv_qtype_traits_of(lv_qtype t) { return &lv_qtype_traits_table[t]; }

/* A new owned twin of W [k, n] from its quantized values (per column); NULL if out of
 * memory. */
lv_qweight *lv_qweight_new(lv_qtype type, const void *q, const float *scales, int64_t k, int64_t n);
void lv_qweight_free(lv_qweight *w);

#endif
