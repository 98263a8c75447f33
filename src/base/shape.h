/* Tensor shapes: rank and dims, row-major. Small value type shared by core and io. */
#ifndef LV_BASE_SHAPE_H
#define LV_BASE_SHAPE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define LV_MAX_RANK 8

typedef struct lv_shape {
  int rank;
  int64_t d[LV_MAX_RANK];
} lv_shape;

static inline lv_shape lv_shape0(void) { lv_shape s = {0, {0}}; return s; }
static inline lv_shape lv_shape1(int64_t a) { lv_shape s = {1, {a}}; return s; }
static inline lv_shape lv_shape2(int64_t a, int64_t b) { lv_shape s = {2, {a, b}}; return s; }
static inline lv_shape lv_shape3(int64_t a, int64_t b, int64_t c) { lv_shape s = {3, {a, b, c}}; return s; }
static inline lv_shape lv_shape4(int64_t a, int64_t b, int64_t c, int64_t e) {
  lv_shape s = {4, {a, b, c, e}};
  return s;
}
static inline int64_t lv_shape_numel(const lv_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}
static inline bool lv_shape_eq(const lv_shape *a, const lv_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return false;
  return true;
}
/* "[5,5,1,20]", "[]" for a scalar (TensorFlow's debug format). */
static inline const char *lv_shape_str(const lv_shape *s, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < s->rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)s->d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

#endif
