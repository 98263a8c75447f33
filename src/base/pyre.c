#include "base/pyre.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lv_pyre_compile(regex_t *re, const char *pattern, int cflags, char *why, size_t why_len) {
  size_t n = strlen(pattern);
  /* Each input byte becomes at most 6 ("[^0-9]"). */
  char *out = malloc(6 * n + 1);
  if (!out) {
    snprintf(why, why_len, "out of memory");
    return -1;
  }
  size_t o = 0;
  bool in_bracket = false;
  const char *err = NULL;
  for (size_t i = 0; i < n && !err; i++) {
    char c = pattern[i];
    if (in_bracket) {
      /* A ']' first in the bracket (or after '^') is a literal. */
      if (c == ']' && !(i > 0 && pattern[i - 1] == '[') && !(i > 1 && pattern[i - 1] == '^' && pattern[i - 2] == '['))
        in_bracket = false;
      if (c == '\\' && i + 1 < n) {
        char e = pattern[++i];
        if (e == 'd') {
          memcpy(out + o, "0-9", 3), o += 3;
        } else if (e == 'D' || e == 'w' || e == 'W' || e == 's' || e == 'S') {
          err = "a \\D, \\w, \\W, \\s or \\S inside [...] (POSIX brackets take no escapes)";
        } else if (e == ']' || e == '\\' || e == '-' || e == '^') {
          err = "an escaped ], \\, - or ^ inside [...] (POSIX brackets take no escapes: put ] first, - last)";
        } else {
          out[o++] = e; /* \. \/ \( ...: the character itself */
        }
        continue;
      }
      out[o++] = c;
      continue;
    }
    if (c == '[') {
      in_bracket = true;
      out[o++] = c;
      continue;
    }
    if (c == '\\' && i + 1 < n) {
      char e = pattern[++i];
      if (e == 'd') memcpy(out + o, "[0-9]", 5), o += 5;
      else if (e == 'D') memcpy(out + o, "[^0-9]", 6), o += 6;
      else if (e == 'A' || e == 'Z' || e == 'z' || (e >= '1' && e <= '9'))
        err = "\\A, \\Z and back-references have no POSIX form";
      else out[o++] = '\\', out[o++] = e;
      continue;
    }
    if (c == '(' && i + 1 < n && pattern[i + 1] == '?') {
      err = "a (?...) group (non-capturing, lookaround or flags: Python only)";
      continue;
    }
    if ((c == '*' || c == '+' || c == '?' || c == '}') && i + 1 < n && pattern[i + 1] == '?') {
      err = "a lazy quantifier (*?, +?, ??, {m,n}?: Python only)";
      continue;
    }
    out[o++] = c;
  }
  out[o] = 0;
  if (err) {
    snprintf(why, why_len, "%s", err);
    free(out);
    return -1;
  }
  int rc = regcomp(re, out, cflags);
  if (rc) {
    char msg[128];
    regerror(rc, re, msg, sizeof msg);
    snprintf(why, why_len, "%s", msg);
  }
  free(out);
  return rc ? -1 : 0;
}
