/* Small helpers over name tables (the `_names[X_COUNT]` arrays every enum has) and
 * names: lookup, joining for "known: a, b, c" messages, lower-casing ("Test" -> "test"). */
#ifndef LV_BASE_NAMES_H
#define LV_BASE_NAMES_H

#include <stddef.h>

/* Index of name in names[0..n), or -1 (exact, case-sensitive match). */
int lv_name_index(const char *const *names, int n, const char *name);
/* names joined by sep into out (truncated to size, always NUL-terminated). */
void lv_names_join(const char *const *names, int n, const char *sep, char *out, size_t size);
/* ASCII lower-case copy of in (truncated to size, always NUL-terminated). */
void lv_str_lower(const char *in, char *out, size_t size);

#endif
