/* A host copy of a var store's float variables, for suites that compare whole models
 * (header-only; each suite is its own executable). */
#ifndef LV_TESTS_VARS_UTIL_H
#define LV_TESTS_VARS_UTIL_H

#include <stdlib.h>

#include "check_util.h"
#include "core/variable.h"

/* Every float32 variable's values, in store order (caller frees); *total floats. */
static inline float *host_vars(lv_varstore *vs, int64_t *total) {
  int64_t n = 0;
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    lv_var *v = lv_varstore_get(vs, i);
    if (v->value.dtype == LV_F32) n += lv_tensor_numel(&v->value);
  }
  float *out = malloc(sizeof(float) * (size_t)(n ? n : 1)), *p = out;
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    lv_var *v = lv_varstore_get(vs, i);
    if (v->value.dtype != LV_F32) continue;
    EXPECT_OK(lv_tensor_to_host(&v->value, p));
    p += lv_tensor_numel(&v->value);
  }
  *total = n;
  return out;
}

#endif
