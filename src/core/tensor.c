#include "core/tensor.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "kernels/cpu/cpu_kernels.h"

lv_tensor *lv_tensor_new(lv_dtype dtype, lv_shape shape) {
  lv_tensor *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->dtype = dtype;
  t->shape = shape;
  t->device = LV_DEVICE_CPU;
  t->node = -1;
  size_t bytes = (size_t)lv_shape_numel(&shape) * lv_dtype_size(dtype);
  size_t alloc = bytes ? (bytes + 63) & ~(size_t)63 : 64;
  if (posix_memalign(&t->data, 64, alloc) != 0) {
    free(t);
    return NULL;
  }
  memset(t->data, 0, alloc);
  t->owns_data = true;
  return t;
}

void lv_tensor_free(lv_tensor *t) {
  if (!t) return;
  if (t->owns_data) free(t->data);
  free(t);
}

lv_tensor lv_tensor_view(lv_dtype dtype, lv_shape shape, void *data) {
  lv_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.shape = shape;
  t.device = LV_DEVICE_CPU;
  t.data = data;
  t.node = -1;
  return t;
}

static int g_num_threads;

void lv_set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  g_num_threads = n;
  omp_set_num_threads(n);
  /* OpenBLAS stays single-threaded: the CPU GEMM kernel splits work over these OpenMP
   * threads itself (see kernels/cpu/cpu_gemm.c). */
  lv_cpu_blas_init();
}

int lv_get_num_threads(void) { return g_num_threads > 0 ? g_num_threads : omp_get_max_threads(); }
