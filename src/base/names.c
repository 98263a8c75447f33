#include "base/names.h"

#include <ctype.h>
#include <string.h>

int lv_name_index(const char *const *names, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return i;
  return -1;
}

void lv_names_join(const char *const *names, int n, const char *sep, char *out, size_t size) {
  if (size == 0) return;
  out[0] = 0;
  for (int i = 0; i < n; i++) {
    if (i) strncat(out, sep, size - strlen(out) - 1);
    strncat(out, names[i], size - strlen(out) - 1);
  }
}

void lv_str_lower(const char *in, char *out, size_t size) {
  if (size == 0) return;
  size_t i = 0;
  for (; in[i] && i + 1 < size; i++) out[i] = (char)tolower((unsigned char)in[i]);
  out[i] = 0;
}
