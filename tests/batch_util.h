/* Batch digests for the input suites: two batches are the same when their digests are
 * (keys in order, dtypes, shapes, sizes and every byte of data; a string tensor's strings). */
#ifndef LV_TESTS_BATCH_UTIL_H
#define LV_TESTS_BATCH_UTIL_H

#include <stdint.h>
#include <string.h>

#include "input/batch.h"

static inline uint64_t lv_test_fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

static inline uint64_t lv_test_batch_digest(const lv_batch *b) {
  uint64_t h = lv_test_fnv(14695981039346656037ull, &b->size, sizeof b->size);
  for (int i = 0; i < lv_nmap_count(&b->map); i++) {
    const lv_nmap_entry *e = lv_nmap_at(&b->map, i);
    const lv_tensor *t = e->t;
    h = lv_test_fnv(h, e->key, strlen(e->key) + 1);
    int32_t dt = (int32_t)t->dtype, rank = (int32_t)t->shape.rank;
    h = lv_test_fnv(h, &dt, sizeof dt);
    h = lv_test_fnv(h, &rank, sizeof rank);
    h = lv_test_fnv(h, t->shape.d, sizeof(int64_t) * (size_t)t->shape.rank);
    if (t->dtype != LV_STRING) {
      h = lv_test_fnv(h, t->data, lv_tensor_nbytes(t));
      continue;
    }
    for (int64_t j = 0; j < lv_tensor_numel(t); j++) {
      const char *s = lv_tensor_str(t, j);
      h = lv_test_fnv(h, s, strlen(s) + 1);
    }
  }
  return h;
}

#endif
