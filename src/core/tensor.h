/* Tensors: dtype, shape, device, contiguous row-major data. A tensor either owns its
 * data (lv_tensor_new: variables, datasets, anything that outlives a step) or lives in a
 * graph's step arena (every op output; freed by lv_graph_reset). Autodiff fields: grad
 * (same shape, float32) and node (the tape entry that produced it, -1 for leaves). */
#ifndef LV_CORE_TENSOR_H
#define LV_CORE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/shape.h"

typedef enum { LV_DEVICE_CPU, LV_DEVICE_CUDA, LV_DEVICE_COUNT } lv_device;

typedef struct lv_tensor {
  lv_dtype dtype;
  lv_shape shape;
  lv_device device;
  void *data;
  struct lv_tensor *grad; /* d(loss)/d(this), float32, same shape; NULL until needed */
  bool requires_grad;     /* a variable, or computed from one */
  bool owns_data;         /* data was malloc'd by lv_tensor_new */
  int node;               /* producing tape node, -1 for a leaf */
} lv_tensor;

/* Heap tensor owning zeroed, 64-byte aligned data. Returns NULL if out of memory. */
lv_tensor *lv_tensor_new(lv_dtype dtype, lv_shape shape);
void lv_tensor_free(lv_tensor *t);
/* A view of caller-owned memory (not freed by lv_tensor_free of the view). */
lv_tensor lv_tensor_view(lv_dtype dtype, lv_shape shape, void *data);
static inline int64_t lv_tensor_numel(const lv_tensor *t) { return lv_shape_numel(&t->shape); }
static inline size_t lv_tensor_nbytes(const lv_tensor *t) {
  return (size_t)lv_tensor_numel(t) * lv_dtype_size(t->dtype);
}
static inline float *lv_f32(const lv_tensor *t) { return (float *)t->data; }
static inline int32_t *lv_i32(const lv_tensor *t) { return (int32_t *)t->data; }
static inline int64_t *lv_i64(const lv_tensor *t) { return (int64_t *)t->data; }
static inline uint8_t *lv_u8(const lv_tensor *t) { return (uint8_t *)t->data; }

/* Sets the number of threads used by kernels (OpenMP; 0 = all cores). OpenBLAS itself
 * stays single-threaded and the CPU GEMM kernel splits large products over these
 * threads (OpenBLAS's own threads fight OpenMP's for the cores). Also makes OpenBLAS
 * use the CPU's AVX2/AVX-512 kernels where its model detection fell back to generic
 * ones. */
void lv_set_num_threads(int n);
int lv_get_num_threads(void);

#endif
