/* Quantized weights: the one table a quantized type is added to (ggml's type traits).
 *
 * A quantized weight is a variable's twin for inference, on the host, in one of two forms:
 *  - axis 1, a matmul's W [K, N] quantized per output column, in the type's packed form:
 *    what a forward matmul on a graph that records no gradients multiplies with
 *    (op_matmul.c: matmul, addmm, matmul_bias; op_shape.c: a row slice of a twin is a
 *    twin, a view of its root's rows);
 *  - axis 0, a table [V, D] read by gathers (embeddings) quantized per row, kept as the
 *    type's values and one scale per row: op_gather.c gathers the rows from them.
 * The variable owns its twin (lv_var.quant); a tensor only points at one (lv_tensor.qw).
 *
 * Float values. A model file's quantized variable on the host is restored without float
 * storage (lv_var.deferred: its tensor's data is NULL; runners/model_export.h) unless
 * LINGVOC_INT8=float. An op that reads such a tensor as floats (anything but the twin
 * paths above: a transposed matmul, a concat, a training graph, ...) gets them from
 * lv_graph_inputs_ok, which calls lv_qweight_floats: the twin's root dequantizes itself
 * once, under its lock, and keeps those floats as long as it lives (so a weight pays for
 * floats only if some op of the model needs them, and then once for every session that
 * shares the twin). Elsewhere (the GPU, LINGVOC_INT8=float) the variable keeps its float
 * values as restored (the dequantized weights) beside an axis-1 twin.
 *
 * In a model file a quantized tensor is stored unpacked (the type's bytes, row-major, and
 * one float scale per channel along its axis) under the type's name as its dtype.
 *
 * Adding a type: one enum value, one name, one lv_qtype_traits entry in qweight.c. */
#ifndef LV_KERNELS_QWEIGHT_H
#define LV_KERNELS_QWEIGHT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* int8: symmetric per channel, multiplied by the int8 GEMM (cpu_int8.h). bf16: each value
 * rounded to bfloat16 (scales 1), half the file; widened to float32 at load and multiplied
 * by the float32 GEMM (nothing to gain in speed, nearly nothing lost in quality). */
typedef enum { LV_QTYPE_INT8, LV_QTYPE_BF16, LV_QTYPE_COUNT } lv_qtype;
/* The types' names in model files and on bin/export's --quantize ("int8", "bf16"), and
 * the dtype names their tensors carry in a model file ("qint8", "qbf16"). */
extern const char *const lv_qtype_names[LV_QTYPE_COUNT];
extern const char *const lv_qtype_dtype_names[LV_QTYPE_COUNT];
bool lv_qtype_from_name(const char *name, lv_qtype *out);
bool lv_qtype_from_dtype_name(const char *name, lv_qtype *out);

/* A [k, n] weight in a type's form (or a view of rows of another's). */
typedef struct lv_qweight {
  lv_qtype type;
  int64_t k, n;
  int axis;     /* 1: packed matmul weight, per column; 0: gather table, per row */
  void *packed; /* axis 1: the type's own (int8: lv_q8_mat); axis 0: k * n values then k scales */
  bool owned;   /* a root: packed is freed with the twin (a slice's is not) */
  /* A view (slice): rows [r0, r0 + k) of root; NULL for a root. */
  const struct lv_qweight *root;
  int64_t r0;
  /* A root's floats, made on demand (lv_qweight_floats) and freed with it. */
  pthread_mutex_t mu;
  float *floats;
} lv_qweight;

typedef struct lv_qtype_traits {
  size_t elem_bytes; /* bytes of one quantized value in a model file */
  /* Quantizes float [rows, cols] per channel along axis (0: rows, 1: columns) into q
   * (rows * cols values) and scales (one per channel). */
  void (*quantize)(const float *x, int64_t rows, int64_t cols, int axis, void *q, float *scales);
  /* quantize for values that quantization-aware training put on a grid of the given
   * step (multiples of it): a channel whose values all lie on it within one level of the
   * type's range (int8: [-127, 127]) is stored as the grid's levels with the step as its
   * scale (a value one level past the range, -128 or 128 of an asymmetric 8-bit grid, is
   * clamped to it, counted in *clamped); any other channel as quantize stores it.
   * Returns how many channels kept the grid. */
  int64_t (*quantize_grid)(const float *x, int64_t rows, int64_t cols, int axis, float step, void *q, float *scales,
                           int64_t *clamped); /* NULL: the type keeps no grid (quantize) */
  /* The float values q and scales stand for. */
  void (*dequantize)(const void *q, const float *scales, int64_t rows, int64_t cols, int axis, float *x);
  /* The packed twin of W [k, n] quantized per column (axis 1); false if out of memory. */
  bool (*pack)(lv_qweight *w, const void *q, const float *scales, int64_t k, int64_t n);
  void (*free_packed)(lv_qweight *w);
  /* The float values [k, n] of a root of either axis: the bytes dequantize gives. */
  void (*unpack)(const lv_qweight *w, float *x);
  /* out [n_ids, w->n] = rows ids of an axis-0 table w, the bytes of gathering from its
   * dequantized floats, on the CPU; an id outside [0, k) is recorded as the CPU's
   * gather_fwd records it (tag: lv_graph_id_check's) and nothing is gathered. */
  void (*gather)(lv_kctx *ctx, const lv_qweight *w, int64_t n_ids, const int32_t *ids, float *out, uint64_t tag);
  /* Rows [r0, r0 + len) of w as a twin into out, its memory from alloc (the graph's step
   * arena); false when the type cannot view them (then the float slice is used). */
  bool (*slice_rows)(const lv_qweight *w, int64_t r0, int64_t len, void *(*alloc)(void *actx, size_t bytes),
                     void *actx, lv_qweight *out);
  /* y [m, n] (row stride ldy) = x [m, k] (row stride ldx) w (+ bias [n]) (+ y), on the CPU. */
  void (*matmul)(lv_kctx *ctx, int64_t m, const float *x, int64_t ldx, const lv_qweight *w, const float *bias,
                 bool accumulate, float *y, int64_t ldy);
  /* What matmul runs on in this process ("the int8 GEMM, path avx512", ...), for logs. */
  const char *(*engine)(void);
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
/* A new owned gather table [k, n] (axis 0) from its quantized values and per-row scales
 * (copied); NULL if out of memory. */
lv_qweight *lv_qweight_new_rows(lv_qtype type, const void *q, const float *scales, int64_t k, int64_t n);
void lv_qweight_free(lv_qweight *w);
/* w's float values [k, n] (a view's: its rows of its root's), made once per root and
 * kept until the root is freed (*made: by this call); thread-safe. NULL if out of memory. */
const float *lv_qweight_floats(const lv_qweight *w, bool *made);

#endif
