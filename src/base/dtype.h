/* Element types. lv_dtype is ours (dense, with _COUNT); lv_dtype_to_tf/from_tf map to
 * TensorFlow's DataType enum values (types.proto) used in checkpoints and events. */
#ifndef LV_BASE_DTYPE_H
#define LV_BASE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
  LV_F32,
  LV_F64,
  LV_I8,
  LV_I16,
  LV_I32,
  LV_I64,
  LV_U8,
  LV_U16,
  LV_U32,
  LV_U64,
  LV_BOOL,
  LV_F16,  /* raw bits */
  LV_BF16, /* raw bits */
  LV_STRING,
  LV_DTYPE_COUNT
} lv_dtype;

/* "float32", "int64", ... (Lingvo / numpy names). */
extern const char *const lv_dtype_names[LV_DTYPE_COUNT];
/* "DT_FLOAT", "DT_INT64", ... (TensorFlow's names, as inspect_checkpoint prints). */
extern const char *const lv_dtype_tf_names[LV_DTYPE_COUNT];
/* Bytes per element; 0 for LV_STRING (variable length). */
size_t lv_dtype_size(lv_dtype t);
int lv_dtype_to_tf(lv_dtype t);
/* Returns false if tf_enum is not a type lingvoc handles. */
bool lv_dtype_from_tf(int tf_enum, lv_dtype *out);
/* Parses "float32"/"int32"/...; returns false if unknown. */
bool lv_dtype_from_name(const char *name, lv_dtype *out);

#endif
