#include "core/tensor.h"

#include <stdlib.h>
#include <string.h>

#include "core/backend.h"

static lv_status no_backend(const char *what, lv_device d) {
  char b[32];
  return lv_status_make(LV_ERR_INVALID, "%s: no backend for device %s in this build", what,
                        lv_device_str(d, b, sizeof b));
}

lv_tensor *lv_tensor_new_on(lv_device dev, lv_dtype dtype, lv_shape shape) {
  if (dtype == LV_STRING && !lv_device_is_host(dev)) return NULL;
  const lv_backend *be = lv_backend_get(dev);
  if (!be) return NULL;
  lv_tensor *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->dtype = dtype;
  t->shape = shape;
  t->device = dev;
  t->node = -1;
  size_t bytes = (size_t)lv_shape_numel(&shape) * lv_tensor_elem_size(dtype);
  size_t alloc = bytes ? (bytes + 63) & ~(size_t)63 : 64;
  if (!(t->data = be->alloc(be->ctx, alloc))) {
    free(t);
    return NULL;
  }
  be->kernels->zero(be->ctx, alloc, t->data);
  t->owns_data = true;
  return t;
}

lv_tensor *lv_tensor_new(lv_dtype dtype, lv_shape shape) {
  return lv_tensor_new_on(lv_device_host(), dtype, shape);
}

void lv_tensor_free(lv_tensor *t) {
  if (!t) return;
  if (t->owns_data) {
    lv_tensor_free_strs(t);
    const lv_backend *be = lv_backend_get(t->device);
    LV_ASSERT(be);
    be->free(be->ctx, t->data);
  }
  free(t);
}

const char *lv_tensor_str(const lv_tensor *t, int64_t i) {
  LV_ASSERT(t->dtype == LV_STRING && i >= 0 && i < lv_tensor_numel(t));
  const char *s = lv_str(t)[i];
  return s ? s : "";
}

void lv_tensor_set_str(lv_tensor *t, int64_t i, const char *s, size_t n) {
  LV_ASSERT(t->dtype == LV_STRING && lv_device_is_host(t->device) && i >= 0 && i < lv_tensor_numel(t));
  char *copy = malloc(n + 1);
  LV_ASSERT(copy);
  if (n) memcpy(copy, s, n);
  copy[n] = 0;
  free(lv_str(t)[i]);
  lv_str(t)[i] = copy;
}

void lv_tensor_free_strs(lv_tensor *t) {
  if (t->dtype != LV_STRING || !t->data) return;
  for (int64_t i = 0; i < lv_tensor_numel(t); i++) {
    free(lv_str(t)[i]);
    lv_str(t)[i] = NULL;
  }
}

lv_tensor lv_tensor_view(lv_dtype dtype, lv_shape shape, void *data) {
  lv_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.shape = shape;
  t.data = data;
  t.node = -1;
  return t;
}

lv_status lv_tensor_to_host(const lv_tensor *t, void *dst) {
  const lv_backend *be = lv_backend_get(t->device);
  if (!be) return no_backend("to_host", t->device);
  be->sync(be->ctx);
  be->copy(be->ctx, dst, t->data, lv_tensor_nbytes(t), LV_COPY_DEVICE_TO_HOST);
  return NULL;
}

lv_status lv_tensor_from_host(lv_tensor *t, const void *src) {
  const lv_backend *be = lv_backend_get(t->device);
  if (!be) return no_backend("from_host", t->device);
  be->copy(be->ctx, t->data, src, lv_tensor_nbytes(t), LV_COPY_HOST_TO_DEVICE);
  return NULL;
}

lv_status lv_tensor_item(const lv_tensor *t, double *out) {
  char b[128];
  if (lv_tensor_numel(t) != 1)
    return lv_status_make(LV_ERR_INVALID, "item: one element required, got %s %s", lv_dtype_names[t->dtype],
                          lv_shape_str(&t->shape, b, sizeof b));
  union {
    float f;
    double d;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    int8_t i8;
  } v;
  switch (t->dtype) {
    case LV_F32: case LV_F64: case LV_I32: case LV_I64: case LV_U8: case LV_BOOL: case LV_I8: break;
    default:
      return lv_status_make(LV_ERR_INVALID, "item: dtype %s is not a number", lv_dtype_names[t->dtype]);
  }
  LV_TRY(lv_tensor_to_host(t, &v));
  switch (t->dtype) {
    case LV_F32: *out = v.f; break;
    case LV_F64: *out = v.d; break;
    case LV_I32: *out = v.i32; break;
    case LV_I64: *out = (double)v.i64; break;
    case LV_I8: *out = v.i8; break;
    default: *out = v.u8; break;
  }
  return NULL;
}
