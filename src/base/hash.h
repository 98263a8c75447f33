/* FNV-1a (64-bit) of a string's bytes: the one hash lingvoc derives seeds, noise streams
 * and hash-table slots from (a change here changes every seeded run). */
#ifndef LV_BASE_HASH_H
#define LV_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Of the n bytes at s. */
static inline uint64_t lv_fnv1a_n(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

/* Of the NUL-terminated string s. */
static inline uint64_t lv_fnv1a(const char *s) { return lv_fnv1a_n(s, strlen(s)); }

#endif
