/* Tensors: dtype, shape, device, contiguous row-major data. A tensor either owns its
 * data (lv_tensor_new: variables, datasets, anything that outlives a step) or lives in a
 * graph's step arena (every op output; freed by lv_graph_reset). Autodiff fields: grad
 * (same shape, float32) and node (the tape entry that produced it, -1 for leaves).
 *
 * The header is host memory; data is memory of the tensor's device. Only kernels touch
 * device data: code outside them reads a scalar with lv_tensor_item and moves whole
 * tensors with lv_tensor_to_host / lv_tensor_from_host (graph.h: lv_graph_from_host
 * brings a host batch into a step). lv_f32() and friends are for host (cpu:0) tensors.
 *
 * Strings (LV_STRING: utterance ids, transcripts, reference text) live on the host only:
 * data is an array of numel `char *`, each a NUL-terminated malloc'd string or NULL (read
 * as ""; a string ends at its first NUL byte). Whoever owns the data owns the strings: a
 * string tensor of lv_tensor_new frees them in lv_tensor_free, a view borrows them. No
 * device holds strings: lv_tensor_new_on refuses them off the host, and a batch passes
 * them to the task as host tensors (task.h: lv_batch_to_graph). */
#ifndef LV_CORE_TENSOR_H
#define LV_CORE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/device.h"
#include "base/dtype.h"
#include "base/shape.h"
#include "base/status.h"

typedef struct lv_tensor {
  lv_dtype dtype;
  lv_shape shape;
  lv_device device;       /* zero-initialized: cpu:0, host memory */
  void *data;
  struct lv_tensor *grad; /* d(loss)/d(this), float32, same shape; NULL until needed */
  bool requires_grad;     /* a variable, or computed from one */
  bool owns_data;         /* data was allocated by lv_tensor_new / lv_tensor_new_on */
  int node;               /* producing tape node, -1 for a leaf */
  /* A quantized twin of this [K, N] weight (kernels/qweight.h): set on a variable's value
   * by a quantized model file, and on a row slice of one; forward matmuls of graphs that
   * record no gradients multiply with it. NULL everywhere else. */
  const struct lv_qweight *qw;
  /* Step-arena bookkeeping of the graph (core/graph.c): the buffer whose memory this
   * header holds a reference to (index + 1; 0 none). Only the header the graph made holds
   * it (buf_owner == the header): a struct copy of a graph tensor holds none. */
  int buf;
  const struct lv_tensor *buf_owner;
  int out_seq; /* graph: its number among the step's op outputs made in forward (1, 2, ...; 0 none) */
} lv_tensor;

/* Heap tensor owning zeroed, 64-byte aligned host data. Returns NULL if out of memory. */
lv_tensor *lv_tensor_new(lv_dtype dtype, lv_shape shape);
/* The same on device dev (through its backend); NULL if out of memory, no backend, or
 * LV_STRING off the host. */
lv_tensor *lv_tensor_new_on(lv_device dev, lv_dtype dtype, lv_shape shape);
void lv_tensor_free(lv_tensor *t);
/* A view of caller-owned host memory (not freed by lv_tensor_free of the view). */
lv_tensor lv_tensor_view(lv_dtype dtype, lv_shape shape, void *data);
static inline int64_t lv_tensor_numel(const lv_tensor *t) { return lv_shape_numel(&t->shape); }
/* Bytes of data: numel * the dtype's size, or numel pointers for LV_STRING. */
static inline size_t lv_tensor_elem_size(lv_dtype dtype) {
  return dtype == LV_STRING ? sizeof(char *) : lv_dtype_size(dtype);
}
static inline size_t lv_tensor_nbytes(const lv_tensor *t) {
  return (size_t)lv_tensor_numel(t) * lv_tensor_elem_size(t->dtype);
}
static inline float *lv_f32(const lv_tensor *t) { return (float *)t->data; }
static inline int32_t *lv_i32(const lv_tensor *t) { return (int32_t *)t->data; }
static inline int64_t *lv_i64(const lv_tensor *t) { return (int64_t *)t->data; }
static inline uint8_t *lv_u8(const lv_tensor *t) { return (uint8_t *)t->data; }
static inline char **lv_str(const lv_tensor *t) { return (char **)t->data; }

/* Element i of a string tensor ("" for NULL). */
const char *lv_tensor_str(const lv_tensor *t, int64_t i);
/* Replaces element i of a string tensor whose strings are owned (lv_tensor_new's, a
 * batch store's) with a copy of the n bytes at s, NUL-terminated. */
void lv_tensor_set_str(lv_tensor *t, int64_t i, const char *s, size_t n);
/* Frees the owned strings of a string tensor and sets them to NULL (a no-op for other
 * dtypes). */
void lv_tensor_free_strs(lv_tensor *t);

/* The value of a one-element tensor of any numeric dtype (like tensor.item()): waits
 * for the device's queued kernels, copies it to the host. */
lv_status lv_tensor_item(const lv_tensor *t, double *out);
/* Copies all of t's data to / from host memory of lv_tensor_nbytes(t) bytes, through
 * the device's backend (to_host waits for queued kernels first). */
lv_status lv_tensor_to_host(const lv_tensor *t, void *dst);
lv_status lv_tensor_from_host(lv_tensor *t, const void *src);

#endif
