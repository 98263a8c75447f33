#include "base/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How much of an over-long path an error shows. */
enum { kShown = 64 };

static lv_status too_long(const char *path, size_t len, size_t cap) {
  return lv_status_make(LV_ERR_INVALID, "path too long: \"%.*s%s\" (%zu bytes; the limit is %zu)",
                        (int)(len < kShown ? len : kShown), path, len > kShown ? "..." : "", len,
                        cap ? cap - 1 : 0);
}

lv_status lv_path_check(const char *path, size_t cap) {
  size_t len = strlen(path);
  return len < cap ? NULL : too_long(path, len, cap);
}

lv_status lv_path_vfmt(char *out, size_t cap, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(out, cap, fmt, ap);
  if (n < 0) {
    va_end(ap2);
    if (cap) out[0] = 0;
    return lv_status_make(LV_ERR_INTERNAL, "cannot format a path from \"%s\"", fmt);
  }
  if ((size_t)n < cap) {
    va_end(ap2);
    return NULL;
  }
  char *full = NULL;
  int m = vasprintf(&full, fmt, ap2);
  va_end(ap2);
  LV_ASSERT(m >= 0);
  if (cap) out[0] = 0;
  lv_status s = too_long(full, (size_t)m, cap);
  free(full);
  return s;
}

lv_status lv_path_fmt(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lv_status s = lv_path_vfmt(out, cap, fmt, ap);
  va_end(ap);
  return s;
}
