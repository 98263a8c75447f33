/* Paths built into fixed-size buffers. lv_path_fmt formats like snprintf, but a path that
 * does not fit its buffer is an error (LV_ERR_INVALID) naming the path's beginning, its
 * length and the limit, never a truncated path that may name another file. */
#ifndef LV_BASE_PATH_H
#define LV_BASE_PATH_H

#include <stdarg.h>
#include <stddef.h>

#include "base/status.h"

/* Linux's PATH_MAX: the longest path the OS opens, with its NUL. */
#define LV_PATH_MAX 4096

/* Formats into out[cap]. When the result needs cap bytes or more (with its NUL), out is
 * set to "" and the error says: path too long: "<first 64 bytes>..." (N bytes; the limit
 * is cap - 1). */
lv_status lv_path_fmt(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
lv_status lv_path_vfmt(char *out, size_t cap, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
/* The same check for a path that already exists as a string: an error when path has
 * cap bytes or more (it would not fit out[cap] with its NUL). */
lv_status lv_path_check(const char *path, size_t cap);

#endif
