/* Text files read line by line as Python 3 reads them with encoding="utf-8": split on
 * "\n" only (the "\n" removed, nothing else stripped), strictly valid UTF-8 (no overlong
 * forms, surrogates or code points past U+10FFFF) and no NUL bytes; a bad line is an
 * error naming the file, the line and the byte. For tools that score or compare text
 * files (bin/sacrebleu_score, bin/punct_score). The reader owns its line buffer. */
#ifndef LV_BASE_TEXT_LINES_H
#define LV_BASE_TEXT_LINES_H

#include <stdbool.h>
#include <stdio.h>

#include "base/status.h"

typedef struct lv_text_lines {
  const char *name; /* the path, or "<stdin>" */
  FILE *f;
  char *line; /* the current line, NUL-terminated, without its "\n" */
  size_t cap;
  long lineno; /* 1-based number of the current line */
} lv_text_lines;

/* Opens path ("-": stdin); flag names the command-line flag for the error message. */
lv_status lv_text_lines_open(lv_text_lines *r, const char *path, const char *flag);
/* The next line into r->line; *eof at the end. */
lv_status lv_text_lines_next(lv_text_lines *r, bool *eof);
/* Frees the buffer and closes the file (not stdin); r may be zeroed and never opened. */
void lv_text_lines_close(lv_text_lines *r);
/* LV_ERR_CORRUPT "<name>:<line>: a NUL byte at column <c> (expected text ...)" for the
 * first NUL byte of s[0..n), or NULL when it has none: text readers refuse a line that a
 * C string would cut short (a UTF-16 file is NUL bytes throughout). */
lv_status lv_text_refuse_nul(const char *name, long line, const void *s, size_t n);
/* Byte offset of the first invalid UTF-8 sequence of s[0..n), or -1. */
long lv_text_bad_utf8(const unsigned char *s, size_t n);

#endif
