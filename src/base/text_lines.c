/* Strict UTF-8 text lines: see text_lines.h. */
#include "base/text_lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"

long lv_text_bad_utf8(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t k;
    unsigned lo = 0x80, hi = 0xbf;
    if (c < 0x80) k = 1;
    else if (c >= 0xc2 && c <= 0xdf) k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
      k = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      k = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return (long)i;
    }
    if (i + k > n) return (long)i;
    for (size_t j = 1; j < k; j++) {
      unsigned d = s[i + j];
      if (j == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xbf)) return (long)i;
    }
    i += k;
  }
  return -1;
}

lv_status lv_text_lines_open(lv_text_lines *r, const char *path, const char *flag) {
  memset(r, 0, sizeof *r);
  bool in = strcmp(path, "-") == 0;
  r->name = in ? "<stdin>" : path;
  if (in) {
    r->f = stdin;
    return NULL;
  }
  char what[64];
  snprintf(what, sizeof what, "--%s", flag);
  return lv_file_fopen_regular(path, what, &r->f);
}

lv_status lv_text_refuse_nul(const char *name, long line, const void *s, size_t n) {
  const char *nul = memchr(s, 0, n);
  if (!nul) return NULL;
  return lv_status_make(LV_ERR_CORRUPT, "%s:%ld: a NUL byte at column %zu (expected UTF-8 text; a UTF-16 or binary "
                        "file?)", name, line, (size_t)(nul - (const char *)s) + 1);
}

lv_status lv_text_lines_next(lv_text_lines *r, bool *eof) {
  errno = 0;
  ssize_t n = getline(&r->line, &r->cap, r->f);
  if (n < 0) {
    /* getline's ENOMEM (a line longer than memory allows) sets neither ferror nor feof:
     * only feof is the end of the file, or a huge line would end the text silently. */
    if (ferror(r->f) || !feof(r->f))
      return lv_status_make(errno == ENOMEM ? LV_ERR_RESOURCE : LV_ERR_IO, "%s: cannot read line %ld: %s", r->name,
                            r->lineno + 1, strerror(errno ? errno : EIO));
    *eof = true;
    return NULL;
  }
  *eof = false;
  r->lineno++;
  if (n > 0 && r->line[n - 1] == '\n') r->line[--n] = '\0';
  LV_TRY(lv_text_refuse_nul(r->name, r->lineno, r->line, (size_t)n));
  long bad = lv_text_bad_utf8((const unsigned char *)r->line, (size_t)n);
  if (bad >= 0)
    return lv_status_make(LV_ERR_INVALID, "%s:%ld: invalid UTF-8 at byte %ld (byte 0x%02x)", r->name, r->lineno,
                          bad + 1, (unsigned char)r->line[bad]);
  return NULL;
}

void lv_text_lines_close(lv_text_lines *r) {
  free(r->line);
  r->line = NULL;
  if (r->f && r->f != stdin) fclose(r->f);
  r->f = NULL;
}
