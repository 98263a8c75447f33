#include "base/dtype.h"
#include "base/names.h"

#include <string.h>

#include "base/status.h"

const char *const lv_dtype_names[LV_DTYPE_COUNT] = {
    "float32", "float64", "int8",   "int16", "int32",    "int64",   "uint8",
    "uint16",  "uint32",  "uint64", "bool",  "float16",  "bfloat16", "string",
};
const char *const lv_dtype_tf_names[LV_DTYPE_COUNT] = {
    "DT_FLOAT",  "DT_DOUBLE", "DT_INT8",   "DT_INT16", "DT_INT32", "DT_INT64",    "DT_UINT8",
    "DT_UINT16", "DT_UINT32", "DT_UINT64", "DT_BOOL",  "DT_HALF",  "DT_BFLOAT16", "DT_STRING",
};
static const size_t kSizes[LV_DTYPE_COUNT] = {4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 2, 0};
/* TensorFlow DataType values (tensorflow/core/framework/types.proto). */
static const int kTf[LV_DTYPE_COUNT] = {1, 2, 6, 5, 3, 9, 4, 17, 22, 23, 10, 19, 14, 7};


_Static_assert(sizeof(kSizes) / sizeof(kSizes[0]) == LV_DTYPE_COUNT, "kSizes matches lv_dtype");
_Static_assert(sizeof(kTf) / sizeof(kTf[0]) == LV_DTYPE_COUNT, "kTf matches lv_dtype");

size_t lv_dtype_size(lv_dtype t) { return (unsigned)t < LV_DTYPE_COUNT ? kSizes[t] : 0; }
int lv_dtype_to_tf(lv_dtype t) { return kTf[t]; }

bool lv_dtype_from_tf(int tf_enum, lv_dtype *out) {
  for (int i = 0; i < LV_DTYPE_COUNT; i++)
    if (kTf[i] == tf_enum) {
      *out = (lv_dtype)i;
      return true;
    }
  return false;
}

bool lv_dtype_from_name(const char *name, lv_dtype *out) {
  int i = lv_name_index(lv_dtype_names, LV_DTYPE_COUNT, name);
  if (i >= 0) *out = (lv_dtype)i;
  return i >= 0;
}
