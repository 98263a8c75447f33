#include "io/ckpt_state.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"

typedef struct {
  char *p;
  size_t len, cap;
} sbuf;

static void sb_putc(sbuf *b, char c) {
  if (b->len + 2 > b->cap) {
    b->cap = b->cap ? b->cap * 2 : 256;
    b->p = realloc(b->p, b->cap);
    LV_ASSERT(b->p);
  }
  b->p[b->len++] = c;
  b->p[b->len] = 0;
}
static void sb_puts(sbuf *b, const char *s) {
  for (; *s; s++) sb_putc(b, *s);
}

/* C-style escaping as protobuf's text format writes strings. */
static void sb_quoted(sbuf *b, const char *s) {
  sb_putc(b, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char tmp[8];
    switch (*p) {
      case '"': sb_puts(b, "\\\""); break;
      case '\\': sb_puts(b, "\\\\"); break;
      case '\n': sb_puts(b, "\\n"); break;
      case '\r': sb_puts(b, "\\r"); break;
      case '\t': sb_puts(b, "\\t"); break;
      case '\'': sb_puts(b, "\\'"); break;
      default:
        if (*p < 32 || *p == 127) {
          snprintf(tmp, sizeof tmp, "\\%03o", *p);
          sb_puts(b, tmp);
        } else {
          sb_putc(b, (char)*p);
        }
    }
  }
  sb_putc(b, '"');
}

/* Shortest decimal that reads back to the same double (as Python's repr). */
static void sb_double(sbuf *b, double v) {
  char buf[64];
  if (isnan(v)) snprintf(buf, sizeof buf, "nan");
  else if (isinf(v)) snprintf(buf, sizeof buf, v < 0 ? "-inf" : "inf");
  else
    for (int prec = 1; prec <= 17; prec++) {
      snprintf(buf, sizeof buf, "%.*g", prec, v);
      if (strtod(buf, NULL) == v) break;
    }
  sb_puts(b, buf);
}

static char *join(const char *dir, const char *name) {
  char *out = NULL;
  LV_ASSERT(asprintf(&out, "%s/%s", dir, name) >= 0);
  return out;
}

void lv_ckpt_state_free(lv_ckpt_state *st) {
  if (!st) return;
  free(st->model_checkpoint_path);
  for (int i = 0; i < st->num_paths; i++) free(st->all_model_checkpoint_paths[i]);
  free(st->all_model_checkpoint_paths);
  free(st->all_model_checkpoint_timestamps);
  memset(st, 0, sizeof(*st));
}

lv_status lv_ckpt_state_write(const char *dir, const lv_ckpt_state *st) {
  sbuf b = {0};
  if (st->model_checkpoint_path) {
    sb_puts(&b, "model_checkpoint_path: ");
    sb_quoted(&b, st->model_checkpoint_path);
    sb_putc(&b, '\n');
  }
  for (int i = 0; i < st->num_paths; i++) {
    sb_puts(&b, "all_model_checkpoint_paths: ");
    sb_quoted(&b, st->all_model_checkpoint_paths[i]);
    sb_putc(&b, '\n');
  }
  if (st->all_model_checkpoint_timestamps)
    for (int i = 0; i < st->num_paths; i++) {
      sb_puts(&b, "all_model_checkpoint_timestamps: ");
      sb_double(&b, st->all_model_checkpoint_timestamps[i]);
      sb_putc(&b, '\n');
    }
  if (st->last_preserved_timestamp != 0) {
    sb_puts(&b, "last_preserved_timestamp: ");
    sb_double(&b, st->last_preserved_timestamp);
    sb_putc(&b, '\n');
  }
  char *path = join(dir, "checkpoint");
  lv_status s = lv_file_write_atomic(path, b.p ? b.p : "", b.len);
  free(path);
  free(b.p);
  return s;
}

/* ---- text-format parser for the four CheckpointState fields ---- */

typedef struct {
  const char *path;
  const char *p, *end;
  int line;
} lexer;

static void skip_space(lexer *lx) {
  while (lx->p < lx->end) {
    if (*lx->p == '\n') {
      lx->line++;
      lx->p++;
    } else if (isspace((unsigned char)*lx->p)) {
      lx->p++;
    } else if (*lx->p == '#') {
      while (lx->p < lx->end && *lx->p != '\n') lx->p++;
    } else {
      break;
    }
  }
}

static lv_status lex_err(const lexer *lx, const char *what) {
  return lv_status_make(LV_ERR_CORRUPT, "%s:%d: %s", lx->path, lx->line, what);
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static lv_status parse_string(lexer *lx, char **out) {
  char q = *lx->p;
  if (q != '"' && q != '\'') return lex_err(lx, "expected a quoted string");
  lx->p++;
  sbuf b = {0};
  sb_putc(&b, 0);
  b.len = 0;
  for (;;) {
    if (lx->p >= lx->end || *lx->p == '\n') {
      free(b.p);
      return lex_err(lx, "unterminated string");
    }
    char c = *lx->p++;
    if (c == q) break;
    if (c != '\\') {
      sb_putc(&b, c);
      continue;
    }
    if (lx->p >= lx->end) {
      free(b.p);
      return lex_err(lx, "unterminated escape");
    }
    c = *lx->p++;
    switch (c) {
      case 'n': sb_putc(&b, '\n'); break;
      case 'r': sb_putc(&b, '\r'); break;
      case 't': sb_putc(&b, '\t'); break;
      case 'a': sb_putc(&b, '\a'); break;
      case 'b': sb_putc(&b, '\b'); break;
      case 'f': sb_putc(&b, '\f'); break;
      case 'v': sb_putc(&b, '\v'); break;
      case '\\': case '\'': case '"': case '?': sb_putc(&b, c); break;
      case 'x': {
        int v = 0, k = 0;
        while (k < 2 && lx->p < lx->end && hexval(*lx->p) >= 0) v = v * 16 + hexval(*lx->p++), k++;
        if (k == 0) {
          free(b.p);
          return lex_err(lx, "\\x without hex digits");
        }
        sb_putc(&b, (char)v);
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          int v = c - '0', k = 1;
          while (k < 3 && lx->p < lx->end && *lx->p >= '0' && *lx->p <= '7') v = v * 8 + (*lx->p++ - '0'), k++;
          if (v > 255) {
            free(b.p);
            return lex_err(lx, "octal escape above \\377");
          }
          sb_putc(&b, (char)v);
        } else {
          free(b.p);
          return lex_err(lx, "unknown escape sequence");
        }
    }
  }
  if (memchr(b.p, 0, b.len)) {
    free(b.p);
    return lex_err(lx, "path contains a NUL byte");
  }
  *out = b.p;
  return NULL;
}

static lv_status parse_double(lexer *lx, double *out) {
  const char *s = lx->p;
  while (lx->p < lx->end && !isspace((unsigned char)*lx->p) && *lx->p != '#') lx->p++;
  size_t n = (size_t)(lx->p - s);
  char tmp[64];
  if (n == 0 || n >= sizeof tmp) return lex_err(lx, "expected a number");
  memcpy(tmp, s, n);
  tmp[n] = 0;
  /* Text format may suffix floats with f/F. */
  if (n > 1 && (tmp[n - 1] == 'f' || tmp[n - 1] == 'F') && strcmp(tmp, "inf") && strcmp(tmp, "-inf"))
    tmp[n - 1] = 0;
  char *endp;
  errno = 0;
  double v = strtod(tmp, &endp);
  if (*endp || endp == tmp) return lex_err(lx, "expected a number");
  *out = v;
  return NULL;
}

static void push_str(char ***arr, int *n, char *s) {
  *arr = realloc(*arr, sizeof(char *) * (size_t)(*n + 1));
  LV_ASSERT(*arr);
  (*arr)[(*n)++] = s;
}

lv_status lv_ckpt_state_read(const char *dir, lv_ckpt_state *st, bool *exists) {
  memset(st, 0, sizeof(*st));
  *exists = false;
  char *path = join(dir, "checkpoint");
  if (!lv_file_exists(path)) {
    free(path);
    return NULL;
  }
  char *text;
  size_t len;
  lv_status s = lv_file_read_all(path, &text, &len);
  if (s) {
    free(path);
    return s;
  }
  *exists = true;
  lexer lx = {path, text, text + len, 1};
  double *ts = NULL;
  int nts = 0;
  for (;;) {
    skip_space(&lx);
    if (lx.p >= lx.end) break;
    const char *k = lx.p;
    while (lx.p < lx.end && (isalnum((unsigned char)*lx.p) || *lx.p == '_')) lx.p++;
    size_t kl = (size_t)(lx.p - k);
    skip_space(&lx);
    if (kl == 0 || lx.p >= lx.end || *lx.p != ':') {
      s = lex_err(&lx, "expected `field: value`");
      break;
    }
    lx.p++;
    skip_space(&lx);
#define IS(name) (kl == strlen(name) && memcmp(k, name, kl) == 0)
    if (IS("model_checkpoint_path")) {
      char *v;
      s = parse_string(&lx, &v);
      if (s) break;
      free(st->model_checkpoint_path);
      st->model_checkpoint_path = v;
    } else if (IS("all_model_checkpoint_paths")) {
      char *v;
      s = parse_string(&lx, &v);
      if (s) break;
      push_str(&st->all_model_checkpoint_paths, &st->num_paths, v);
    } else if (IS("all_model_checkpoint_timestamps")) {
      double v;
      s = parse_double(&lx, &v);
      if (s) break;
      ts = realloc(ts, sizeof(double) * (size_t)(nts + 1));
      LV_ASSERT(ts);
      ts[nts++] = v;
    } else if (IS("last_preserved_timestamp")) {
      s = parse_double(&lx, &st->last_preserved_timestamp);
      if (s) break;
    } else {
      s = lv_status_make(LV_ERR_CORRUPT,
                         "%s:%d: unknown field \"%.*s\" (CheckpointState has model_checkpoint_path, "
                         "all_model_checkpoint_paths, all_model_checkpoint_timestamps, "
                         "last_preserved_timestamp)",
                         path, lx.line, (int)(kl > 100 ? 100 : kl), k);
      break;
    }
#undef IS
  }
  if (!s && nts > st->num_paths)
    s = lv_status_make(LV_ERR_CORRUPT, "%s: %d timestamps for %d checkpoint paths", path, nts,
                       st->num_paths);
  if (!s && nts > 0) {
    st->all_model_checkpoint_timestamps = calloc((size_t)st->num_paths, sizeof(double));
    LV_ASSERT(st->all_model_checkpoint_timestamps);
    memcpy(st->all_model_checkpoint_timestamps, ts, sizeof(double) * (size_t)nts);
  }
  free(ts);
  free(text);
  free(path);
  if (s) lv_ckpt_state_free(st);
  return s;
}

lv_status lv_ckpt_state_latest(const char *dir, char **prefix) {
  *prefix = NULL;
  lv_ckpt_state st;
  bool exists;
  LV_TRY(lv_ckpt_state_read(dir, &st, &exists));
  if (exists && st.model_checkpoint_path && *st.model_checkpoint_path) {
    char *p = st.model_checkpoint_path[0] == '/' ? strdup(st.model_checkpoint_path)
                                                 : join(dir, st.model_checkpoint_path);
    LV_ASSERT(p);
    char *index = NULL;
    LV_ASSERT(asprintf(&index, "%s.index", p) >= 0);
    if (lv_file_exists(index)) *prefix = p;
    else free(p);
    free(index);
  }
  lv_ckpt_state_free(&st);
  return NULL;
}
