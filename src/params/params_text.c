/* Lingvo's ToText / FromText (reference/lingvo.md §3.3-3.4) for typed trees, and the
 * Python-literal syntax that list values are written in. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"
#include "params/params_internal.h"

/* ---- writing ---- */

void lv_params_float_repr(char *out, size_t n, double v) {
  if (isnan(v)) {
    snprintf(out, n, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(out, n, v < 0 ? "-inf" : "inf");
    return;
  }
  /* Shortest digits that read back to the same double, then Python's repr layout:
   * positional for decimal exponents in [-4, 16), else d.ddde+XX. */
  char buf[64];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (strtod(buf, NULL) == v) break;
  }
  bool neg = buf[0] == '-';
  char digits[32];
  int nd = 0;
  const char *q = buf + neg;
  for (; *q && *q != 'e'; q++)
    if (isdigit((unsigned char)*q)) digits[nd++] = *q;
  int exp = atoi(q + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = 0;
  lv_pbuf b = {0};
  if (neg) lv_pbuf_addf(&b, "-");
  if (exp < -4 || exp >= 16) {
    lv_pbuf_addn(&b, digits, 1);
    if (nd > 1) lv_pbuf_addf(&b, ".%s", digits + 1);
    lv_pbuf_addf(&b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  } else if (exp >= 0) {
    if (nd <= exp + 1) {
      lv_pbuf_addf(&b, "%s", digits);
      for (int i = 0; i < exp + 1 - nd; i++) lv_pbuf_addf(&b, "0");
      lv_pbuf_addf(&b, ".0");
    } else {
      lv_pbuf_addn(&b, digits, (size_t)exp + 1);
      lv_pbuf_addf(&b, ".%s", digits + exp + 1);
    }
  } else {
    lv_pbuf_addf(&b, "0.");
    for (int i = 0; i < -exp - 1; i++) lv_pbuf_addf(&b, "0");
    lv_pbuf_addf(&b, "%s", digits);
  }
  snprintf(out, n, "%s", b.s);
  free(b.s);
}

/* Lingvo's _QuoteString: the quote needing less escaping, that quote and backslash
 * escaped, newlines kept verbatim. */
static void quote_string(lv_pbuf *b, const char *s) {
  int singles = 0, doubles = 0;
  for (const char *c = s; *c; c++) {
    singles += *c == '\'';
    doubles += *c == '"';
  }
  char q = singles <= doubles ? '\'' : '"';
  lv_pbuf_addn(b, &q, 1);
  for (const char *c = s; *c; c++) {
    if (*c == q || *c == '\\') lv_pbuf_addf(b, "\\");
    lv_pbuf_addn(b, c, 1);
  }
  lv_pbuf_addn(b, &q, 1);
}

/* Python's repr of a str (used for strings inside lists, as str(list) does). */
static void py_repr_string(lv_pbuf *b, const char *s) {
  char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
  lv_pbuf_addn(b, &q, 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == (unsigned char)q || *c == '\\') lv_pbuf_addf(b, "\\%c", *c);
    else if (*c == '\n') lv_pbuf_addf(b, "\\n");
    else if (*c == '\r') lv_pbuf_addf(b, "\\r");
    else if (*c == '\t') lv_pbuf_addf(b, "\\t");
    else if (*c < 0x20 || *c == 0x7f) lv_pbuf_addf(b, "\\x%02x", *c);
    else lv_pbuf_addn(b, (const char *)c, 1);
  }
  lv_pbuf_addn(b, &q, 1);
}

void lv_pvalue_repr(lv_pbuf *b, const lv_pvalue *v) {
  if (!v) {
    lv_pbuf_addf(b, "None");
    return;
  }
  char num[64];
  switch (v->kind) {
    case LV_PV_INT: lv_pbuf_addf(b, "%lld", (long long)v->u.i); break;
    case LV_PV_FLOAT:
      lv_params_float_repr(num, sizeof num, v->u.f);
      lv_pbuf_addf(b, "%s", num);
      break;
    case LV_PV_BOOL: lv_pbuf_addf(b, "%s", v->u.b ? "True" : "False"); break;
    case LV_PV_STRING: py_repr_string(b, v->u.s); break;
    case LV_PV_LIST: {
      bool t = v->u.list.tuple;
      lv_pbuf_addf(b, t ? "(" : "[");
      for (int i = 0; i < v->u.list.n; i++) {
        if (i) lv_pbuf_addf(b, ", ");
        lv_pvalue_repr(b, v->u.list.items[i]);
      }
      if (t && v->u.list.n == 1) lv_pbuf_addf(b, ",");
      lv_pbuf_addf(b, t ? ")" : "]");
      break;
    }
    default: LV_ASSERTF(0, "bad params value kind %d", (int)v->kind);
  }
}

typedef struct {
  char *key, *val;
} kv_line;

typedef struct {
  kv_line *v;
  int n, cap;
} kv_lines;

static void kv_push(kv_lines *l, char *key, char *val) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    kv_line *nv = realloc(l->v, sizeof(kv_line) * (size_t)l->cap);
    LV_ASSERTF(nv, "out of memory writing params text");
    l->v = nv;
  }
  l->v[l->n].key = key;
  l->v[l->n].val = val;
  l->n++;
}

static void traverse(const lv_params *p, const char *prefix, kv_lines *out) {
  for (int i = 0; i < p->n; i++) {
    const lv_pentry *e = &p->e[i];
    char *key = NULL;
    LV_ASSERT(asprintf(&key, "%s%s%s", prefix, *prefix ? "." : "", e->name) >= 0);
    if (e->kind == LV_PV_PARAMS && e->child) {
      traverse(e->child, key, out);
      free(key);
      continue;
    }
    if (e->kind == LV_PV_PARAMS_LIST && e->nitems > 0) {
      /* Lingvo's Traverse enters a list whose items are all Params: key[i].sub. */
      for (int k = 0; k < e->nitems; k++) {
        char *ik = NULL;
        LV_ASSERT(asprintf(&ik, "%s[%d]", key, k) >= 0);
        traverse(e->items[k], ik, out);
        free(ik);
      }
      free(key);
      continue;
    }
    lv_pbuf b = {0};
    if (e->kind == LV_PV_PARAMS_LIST)
      lv_pbuf_addf(&b, "[]");
    else if (e->kind == LV_PV_PARAMS || !e->val) lv_pbuf_addf(&b, "NoneType");
    else if (e->val->kind == LV_PV_STRING) quote_string(&b, e->val->u.s);
    else lv_pvalue_repr(&b, e->val);
    kv_push(out, key, lv_pbuf_take(&b));
  }
}

static int kv_cmp(const void *a, const void *b) {
  return strcmp(((const kv_line *)a)->key, ((const kv_line *)b)->key);
}

char *lv_params_to_text(const lv_params *p) {
  kv_lines l = {0};
  traverse(p, "", &l);
  if (l.n > 1) qsort(l.v, (size_t)l.n, sizeof(kv_line), kv_cmp);
  lv_pbuf b = {0};
  for (int i = 0; i < l.n; i++) {
    lv_pbuf_addf(&b, "%s : %s\n", l.v[i].key, l.v[i].val);
    free(l.v[i].key);
    free(l.v[i].val);
  }
  free(l.v);
  return lv_pbuf_take(&b);
}

/* ---- Python literals ---- */

typedef struct {
  const char *s, *c;
  char *err; /* first error, with column */
  int depth; /* lists open around the current position */
} lit_parser;

static void lit_fail(lit_parser *lp, const char *what) {
  if (lp->err) return;
  LV_ASSERT(asprintf(&lp->err, "%s at column %d", what, (int)(lp->c - lp->s) + 1) >= 0);
}

static void lit_ws(lit_parser *lp) {
  while (*lp->c == ' ' || *lp->c == '\t' || *lp->c == '\r' || *lp->c == '\n') lp->c++;
}

static bool is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

static bool lit_word(lit_parser *lp, const char *w) {
  size_t n = strlen(w);
  if (strncmp(lp->c, w, n) != 0 || is_ident_char(lp->c[n])) return false;
  lp->c += n;
  return true;
}

/* Digits with single underscores between them (Python 3.6+). Returns the count of
 * digits consumed, -1 on a misplaced underscore. Appends digits to out. */
static int scan_digits(const char **c, lv_pbuf *out) {
  int n = 0;
  while (isdigit((unsigned char)**c) || **c == '_') {
    if (**c == '_') {
      if (n == 0 || !isdigit((unsigned char)(*c)[1])) return -1;
    } else {
      lv_pbuf_addn(out, *c, 1);
      n++;
    }
    (*c)++;
  }
  return n;
}

/* A decimal int or float, with an optional sign, as Python's int()/float() of a
 * literal would read it (literal_eval also allows the unary sign). inf and nan are
 * accepted because ToText writes them. On success *is_float tells which. */
static bool scan_number(const char **pc, bool *is_float, int64_t *iv, double *fv, const char **why) {
  const char *c = *pc;
  lv_pbuf b = {0};
  bool ok = false;
  *why = "malformed number";
  if (*c == '+' || *c == '-') lv_pbuf_addn(&b, c++, 1);
  if (!strncasecmp(c, "inf", 3) || !strncasecmp(c, "nan", 3)) {
    size_t n = !strncasecmp(c, "infinity", 8) ? 8 : 3;
    if (!is_ident_char(c[n])) {
      lv_pbuf_addn(&b, c, n);
      c += n;
      *is_float = true;
      *fv = strtod(b.s, NULL);
      ok = true;
    }
    goto done;
  }
  int int_digits = scan_digits(&c, &b);
  if (int_digits < 0) goto done;
  bool flt = false;
  int frac_digits = 0;
  if (*c == '.') {
    flt = true;
    lv_pbuf_addn(&b, c++, 1);
    frac_digits = scan_digits(&c, &b);
    if (frac_digits < 0) goto done;
  }
  if (int_digits + frac_digits == 0) goto done;
  if (*c == 'e' || *c == 'E') {
    flt = true;
    lv_pbuf_addn(&b, c++, 1);
    if (*c == '+' || *c == '-') lv_pbuf_addn(&b, c++, 1);
    if (scan_digits(&c, &b) <= 0) goto done;
  }
  *is_float = flt;
  errno = 0;
  if (flt) {
    *fv = strtod(b.s, NULL); /* overflow gives inf, as Python's float() does */
  } else {
    *iv = strtoll(b.s, NULL, 10);
    if (errno == ERANGE) {
      *why = "integer out of the int64 range";
      goto done;
    }
  }
  ok = true;
done:
  free(b.s);
  if (ok) *pc = c;
  return ok;
}

static lv_pvalue *lit_value(lit_parser *lp, bool *is_none);
static lv_pvalue *lit_seq_items(lit_parser *lp, char close, bool *is_none);

/* A quoted string with Python's escapes (\\ \' \" \n \r \t \0 \xhh); other backslashes
 * stay as written, as Python keeps unknown escapes. */
static lv_pvalue *lit_string(lit_parser *lp) {
  char q = *lp->c++;
  lv_pbuf b = {0};
  for (;;) {
    char ch = *lp->c;
    if (!ch || ch == '\n') {
      free(b.s);
      lit_fail(lp, "unterminated string");
      return NULL;
    }
    lp->c++;
    if (ch == q) break;
    if (ch != '\\') {
      lv_pbuf_addn(&b, &ch, 1);
      continue;
    }
    char e = *lp->c;
    if (!e) continue;
    lp->c++;
    char out;
    switch (e) {
      case 'n': out = '\n'; break;
      case 'r': out = '\r'; break;
      case 't': out = '\t'; break;
      case '0': out = '\0'; break;
      case '\\': case '\'': case '"': out = e; break;
      case 'x':
        if (isxdigit((unsigned char)lp->c[0]) && isxdigit((unsigned char)lp->c[1])) {
          char hex[3] = {lp->c[0], lp->c[1], 0};
          out = (char)strtol(hex, NULL, 16);
          lp->c += 2;
          break;
        }
        free(b.s);
        lit_fail(lp, "bad \\x escape");
        return NULL;
      default:
        lv_pbuf_addf(&b, "\\");
        out = e;
    }
    if (out == '\0') {
      free(b.s);
      lit_fail(lp, "NUL character in string");
      return NULL;
    }
    lv_pbuf_addn(&b, &out, 1);
  }
  char *s = lv_pbuf_take(&b);
  lv_pvalue *v = lv_pvalue_string(s);
  free(s);
  return v;
}

static lv_pvalue *lit_seq(lit_parser *lp, char close, bool *is_none) {
  /* The parser, lv_pvalue_free and the writers recurse once per level. */
  if (lp->depth >= LV_PARAMS_MAX_NESTING) {
    char msg[64];
    snprintf(msg, sizeof msg, "lists nested more than %d deep", LV_PARAMS_MAX_NESTING);
    lit_fail(lp, msg);
    return NULL;
  }
  lp->depth++;
  lv_pvalue *v = lit_seq_items(lp, close, is_none);
  lp->depth--;
  return v;
}

static lv_pvalue *lit_seq_items(lit_parser *lp, char close, bool *is_none) {
  bool tuple = close == ')';
  lv_pvalue *l = tuple ? lv_pvalue_tuple() : lv_pvalue_list();
  bool saw_comma = false;
  lp->c++;
  for (;;) {
    lit_ws(lp);
    if (*lp->c == close) {
      lp->c++;
      break;
    }
    bool none = false;
    lv_pvalue *item = lit_value(lp, &none);
    if (!item && !none) {
      lv_pvalue_free(l);
      return NULL;
    }
    lv_pvalue_append(l, item);
    lit_ws(lp);
    if (*lp->c == ',') {
      saw_comma = true;
      lp->c++;
    } else if (*lp->c != close) {
      lit_fail(lp, close == ']' ? "expected ',' or ']'" : "expected ',' or ')'");
      lv_pvalue_free(l);
      return NULL;
    }
  }
  /* (x) is x in Python; only (x,) or () is a tuple. */
  if (tuple && l->u.list.n == 1 && !saw_comma) {
    lv_pvalue *x = l->u.list.items[0];
    l->u.list.n = 0;
    lv_pvalue_free(l);
    if (!x) *is_none = true;
    return x;
  }
  return l;
}

static lv_pvalue *lit_value(lit_parser *lp, bool *is_none) {
  *is_none = false;
  lit_ws(lp);
  char ch = *lp->c;
  if (ch == '[') return lit_seq(lp, ']', is_none);
  if (ch == '(') return lit_seq(lp, ')', is_none);
  if (ch == '\'' || ch == '"') return lit_string(lp);
  if (lit_word(lp, "True")) return lv_pvalue_bool(true);
  if (lit_word(lp, "False")) return lv_pvalue_bool(false);
  if (lit_word(lp, "None")) {
    *is_none = true;
    return NULL;
  }
  if (ch == '{') {
    lit_fail(lp, "dicts are not supported in params values");
    return NULL;
  }
  bool flt;
  int64_t iv;
  double fv;
  const char *why;
  if (ch && scan_number(&lp->c, &flt, &iv, &fv, &why)) {
    if (is_ident_char(*lp->c) || *lp->c == '.') {
      lit_fail(lp, "malformed number");
      return NULL;
    }
    return flt ? lv_pvalue_float(fv) : lv_pvalue_int(iv);
  }
  if (!ch) {
    lit_fail(lp, "expected a value");
  } else if (isdigit((unsigned char)ch) || ch == '-' || ch == '+' || ch == '.') {
    lit_fail(lp, why);
  } else {
    char msg[64];
    snprintf(msg, sizeof msg, "unexpected '%c'", ch);
    lit_fail(lp, msg);
  }
  return NULL;
}

/* Parses a whole Python literal. *out NULL with no error means None. */
static lv_status parse_literal(const char *text, lv_pvalue **out) {
  lit_parser lp = {text, text, NULL, 0};
  bool none = false;
  lv_pvalue *v = lit_value(&lp, &none);
  if (v || none) {
    lit_ws(&lp);
    if (*lp.c) {
      lit_fail(&lp, "unexpected text after the value");
      lv_pvalue_free(v);
      v = NULL;
    }
  }
  if (lp.err) {
    lv_status s = lv_status_make(LV_ERR_INVALID, "%s", lp.err);
    free(lp.err);
    return s;
  }
  *out = v;
  return NULL;
}

/* ---- reading ---- */

typedef struct {
  int line;
  char *key;
  char *value; /* stripped text after ':'; a quoted string keeps its quotes */
  bool done;   /* applied in an earlier pass (`key : []` of a list of params) */
} stmt;

typedef struct {
  stmt *v;
  int n, cap;
} stmts;

static void stmt_push(stmts *l, int line, char *key, char *value) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 32;
    stmt *nv = realloc(l->v, sizeof(stmt) * (size_t)l->cap);
    LV_ASSERTF(nv, "out of memory reading params text");
    l->v = nv;
  }
  l->v[l->n++] = (stmt){line, key, value, false};
}

/* Errors of one FromText call, reported in line order although `cls` lines and the
 * line splitting are handled in separate passes. */
typedef struct {
  int line, seq;
  char *msg;
} line_err;

typedef struct {
  line_err *v;
  int n, cap;
  const char *source;
} line_errs;

static void lerr_add(line_errs *l, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void lerr_add(line_errs *l, int line, const char *fmt, ...) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    line_err *nv = realloc(l->v, sizeof(line_err) * (size_t)l->cap);
    LV_ASSERTF(nv, "out of memory collecting params errors");
    l->v = nv;
  }
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  LV_ASSERT(vasprintf(&msg, fmt, ap) >= 0);
  va_end(ap);
  l->v[l->n] = (line_err){line, l->n, msg};
  l->n++;
}

static void lerr_add_status(line_errs *l, int line, lv_status s) {
  if (!s) return;
  lerr_add(l, line, "%s", lv_status_msg(s));
  lv_status_free(s);
}

static int lerr_cmp(const void *a, const void *b) {
  const line_err *x = a, *y = b;
  return x->line != y->line ? (x->line > y->line) - (x->line < y->line) : (x->seq > y->seq) - (x->seq < y->seq);
}

static lv_status lerr_finish(line_errs *l) {
  if (l->n > 1) qsort(l->v, (size_t)l->n, sizeof(line_err), lerr_cmp);
  lv_perrs errs = {0};
  for (int i = 0; i < l->n; i++) {
    lv_perrs_add(&errs, "%s:%d: %s", l->source, l->v[i].line, l->v[i].msg);
    free(l->v[i].msg);
  }
  free(l->v);
  return lv_perrs_finish(&errs);
}

static char *strip_dup(const char *a, const char *b) {
  while (a < b && isspace((unsigned char)*a)) a++;
  while (b > a && isspace((unsigned char)b[-1])) b--;
  return lv_params_xstrndup(a, (size_t)(b - a));
}

static void add_found(lv_pbuf *b, const char *text) { quote_string(b, text); }

/* Splits text into key/value statements: lines or ';'-separated parts (a ';' inside
 * quotes belongs to the value), '#' comment lines, quoted values that may span lines
 * (Lingvo's multi-line strings). */
static void split_statements(const char *text, stmts *out, line_errs *errs) {
  const char *c = text;
  int line = 1;
  while (*c) {
    if (*c == '\n') {
      line++;
      c++;
      continue;
    }
    if (isspace((unsigned char)*c) || *c == ';') {
      c++;
      continue;
    }
    if (*c == '#') {
      while (*c && *c != '\n') c++;
      continue;
    }
    int sline = line;
    const char *ks = c;
    while (*c && *c != ':' && *c != '\n' && *c != ';') c++;
    if (*c != ':') {
      char *bad = strip_dup(ks, c);
      lv_pbuf b = {0};
      add_found(&b, bad);
      lerr_add(errs, sline, "expected a line in <key> : <value> format, found %s%s", b.s,
                   strchr(bad, '=') ? " (use ':' between key and value, not '=')" : "");
      free(b.s);
      free(bad);
      continue;
    }
    char *key = strip_dup(ks, c);
    c++;
    while (*c == ' ' || *c == '\t') c++;
    char *value;
    if (*c == '\'' || *c == '"') {
      char q = *c;
      const char *vs = c++;
      while (*c && *c != q) {
        if (*c == '\n') line++;
        if (*c == '\\' && c[1]) {
          if (c[1] == '\n') line++;
          c++;
        }
        c++;
      }
      if (!*c) {
        lerr_add(errs, sline, "%s: unterminated string: no closing %c", key, q);
        free(key);
        return;
      }
      c++;
      value = lv_params_xstrndup(vs, (size_t)(c - vs));
      const char *after = c;
      while (*c == ' ' || *c == '\t' || *c == '\r') c++;
      if (*c && *c != '\n' && *c != ';') {
        const char *e = c;
        while (*e && *e != '\n' && *e != ';') e++;
        char *rest = strip_dup(after, e);
        lerr_add(errs, line, "%s: unexpected text after the closing quote: %s", key, rest);
        free(rest);
        free(key);
        free(value);
        c = e;
        continue;
      }
    } else {
      const char *vs = c;
      /* Quotes hide a ';' only inside a list or tuple (['a;b', 'c']); in a bare value
       * (it's) a quote is a character and ';' still ends the statement, as Lingvo's
       * override reads it. */
      const bool nested = *c == '[' || *c == '(';
      char inq = 0;
      while (*c && *c != '\n') {
        if (inq) {
          if (*c == '\\' && c[1] && c[1] != '\n') c++;
          else if (*c == inq) inq = 0;
        } else if (nested && (*c == '\'' || *c == '"')) {
          inq = *c;
        } else if (*c == ';') {
          break;
        }
        c++;
      }
      value = strip_dup(vs, c);
    }
    stmt_push(out, sline, key, value);
  }
}

/* Lingvo's _UnquoteString, undoing exactly what _QuoteString does: the outer quotes
 * and backslash before \, ' or ". Unquoted text is taken literally. */
static char *unquote(const char *v) {
  size_t n = strlen(v);
  if (n < 2 || (v[0] != '\'' && v[0] != '"') || v[n - 1] != v[0]) return lv_params_xstrdup(v);
  lv_pbuf b = {0};
  lv_pbuf_addf(&b, "%s", "");
  for (size_t i = 1; i + 1 < n; i++) {
    if (v[i] == '\\' && i + 2 < n && (v[i + 1] == '\\' || v[i + 1] == '\'' || v[i + 1] == '"')) i++;
    lv_pbuf_addn(&b, &v[i], 1);
  }
  return lv_pbuf_take(&b);
}

/* Python int(text): sign, decimal digits, single underscores between digits. */
static bool parse_py_int(const char *t, int64_t *out, bool *range) {
  const char *c = t;
  bool flt;
  double fv;
  const char *why = NULL;
  *range = false;
  if (!*c || !scan_number(&c, &flt, out, &fv, &why)) {
    *range = why && strstr(why, "range");
    return false;
  }
  return !flt && !*c;
}

/* Python float(text): decimal with optional exponent, inf, infinity, nan. */
static bool parse_py_float(const char *t, double *out) {
  const char *c = t;
  bool flt;
  int64_t iv;
  const char *why;
  if (!*c || !scan_number(&c, &flt, &iv, out, &why) || *c) return false;
  if (!flt) *out = (double)iv;
  return true;
}

static lv_status expected(const char *key, const char *what, const char *text, const char *why) {
  lv_pbuf b = {0};
  add_found(&b, text);
  lv_status s = lv_status_make(LV_ERR_INVALID, "%s: expected %s, found %s%s%s", key, what, b.s, why ? ": " : "",
                               why ? why : "");
  free(b.s);
  return s;
}

/* Converts text to a value for entry e (FromText's per-type rules) and sets it. */
static lv_status apply_one(lv_params *p, const char *key, const char *text) {
  lv_pentry *e;
  LV_TRY(lv_params_resolve_mutable(p, key, &e));
  bool none_text = strcmp(text, "NoneType") == 0;
  if (e->kind == LV_PV_PARAMS) {
    if (none_text) return lv_params_set_none(p, key);
    return expected(key, "NoneType or keys below it (a nested params)", text, NULL);
  }
  if (e->kind == LV_PV_PARAMS_LIST)
    return expected(key, "[] or keys below its items (key[<i>].<name>, a list of params)", text, NULL);
  if (none_text && e->kind != LV_PV_STRING) return lv_params_entry_set(e, key, NULL);
  if (none_text && e->nullable) return lv_params_entry_set(e, key, NULL);
  lv_pvalue *v = NULL;
  switch (e->kind) {
    case LV_PV_BOOL:
      /* Lingvo: anything but '', 'False' and 'false' is True ("False # off", "0" and "no"
       * too): kept for its params files, said when it is not True/False. */
      v = lv_pvalue_bool(*text && strcmp(text, "False") != 0 && strcmp(text, "false") != 0);
      if (*text && strcmp(text, "True") && strcmp(text, "true") && strcmp(text, "False") && strcmp(text, "false"))
        lv_warn("%s: '%s' is read as True, as Lingvo reads any text but False/false (write True or False)", key, text);
      break;
    case LV_PV_INT: {
      int64_t i;
      bool range;
      if (!parse_py_int(text, &i, &range))
        return expected(key, "int", text, range ? "out of the int64 range" : NULL);
      v = lv_pvalue_int(i);
      break;
    }
    case LV_PV_FLOAT: {
      double f;
      if (!parse_py_float(text, &f)) return expected(key, "float", text, NULL);
      v = lv_pvalue_float(f);
      break;
    }
    case LV_PV_STRING: {
      char *s = unquote(text);
      v = lv_pvalue_string(s);
      free(s);
      break;
    }
    case LV_PV_LIST: {
      lv_status s = parse_literal(text, &v);
      if (s) {
        lv_status r = expected(key, "list", text, lv_status_msg(s));
        lv_status_free(s);
        return r;
      }
      if (!v) return lv_params_entry_set(e, key, NULL);
      if (v->kind != LV_PV_LIST) {
        lv_pvalue_free(v);
        return expected(key, "list", text, NULL);
      }
      break;
    }
    default: LV_ASSERT(0);
  }
  return lv_params_entry_set(e, key, v);
}

static bool is_cls_key(const char *key) {
  size_t n = strlen(key);
  return strcmp(key, "cls") == 0 || (n > 4 && strcmp(key + n - 4, ".cls") == 0);
}

/* Key order with the digits of an index compared as numbers: a[2] before a[10]. Ties
 * (the same key twice) keep line order. */
static int natural_cmp(const void *a, const void *b) {
  const stmt *x = *(const stmt *const *)a, *y = *(const stmt *const *)b;
  const char *p = x->key, *q = y->key;
  while (*p && *q) {
    if (isdigit((unsigned char)*p) && isdigit((unsigned char)*q)) {
      char *pe, *qe;
      unsigned long long u = strtoull(p, &pe, 10), v = strtoull(q, &qe, 10);
      if (u != v) return u < v ? -1 : 1;
      p = pe;
      q = qe;
      continue;
    }
    if (*p != *q) return (unsigned char)*p < (unsigned char)*q ? -1 : 1;
    p++;
    q++;
  }
  if (*p || *q) return *p ? 1 : -1;
  return (x->line > y->line) - (x->line < y->line);
}

/* `key : []` for a list of params empties it; silent (false) for anything else, which
 * apply_one then handles or reports. */
static bool is_list_clear(lv_params *p, const stmt *s, line_errs *errs) {
  if (strcmp(s->value, "[]") != 0) return false;
  lv_params *parent;
  lv_pentry *e;
  int index;
  lv_status st = lv_params_resolve_slot(p, s->key, &parent, &e, &index);
  if (st || index >= 0 || e->kind != LV_PV_PARAMS_LIST) {
    lv_status_free(st);
    return false;
  }
  if (p->frozen || parent->frozen)
    lerr_add(errs, s->line, "This Params instance is immutable: cannot set %s", s->key);
  else
    lv_params_entry_clear_items(e);
  return true;
}

static int depth(const char *key) {
  int d = 0;
  for (; *key; key++) d += *key == '.';
  return d;
}

static bool under(const char *key, const char *prefix) {
  size_t n = strlen(prefix);
  return n == 0 || (strncmp(key, prefix, n) == 0 && key[n] == '.');
}

/* A `cls` value, unquoted. Lingvo's params.txt writes a class as type/<module>/<Name>
 * (`type/lingvo.tasks.lm.model/LanguageModel`): that is the registered class whose name is
 * the longest dotted tail of <module>.<Name> (`lm.model.LanguageModel`, `RnnLm`); when
 * none is registered the value stays whole, for set_class's unknown-class error. */
static char *lingvo_class_name(const char *value) {
  char *cls = unquote(value);
  const char *slash = strrchr(cls, '/');
  if (strncmp(cls, "type/", 5) != 0 || slash <= cls + 5 || !slash[1]) return cls;
  char *dotted = lv_params_xstrdup(cls + 5);
  dotted[slash - cls - 5] = '.';
  for (const char *t = dotted; t; t = strchr(t, '.') ? strchr(t, '.') + 1 : NULL) {
    if (lv_registry_find(t)) {
      char *found = lv_params_xstrdup(t);
      free(dotted);
      free(cls);
      return found;
    }
  }
  free(dotted);
  return cls;
}

lv_status lv_params_from_text(lv_params *p, const char *text, const char *source) {
  LV_ASSERT(p && text);
  if (!source) source = "<text>";
  if (p->frozen) return lv_status_make(LV_ERR_INVALID, "%s: This Params instance is immutable", source);
  line_errs errs = {.source = source};
  stmts st = {0};
  split_statements(text, &st, &errs);

  /* `cls` first, outermost first: replacing a tree by a class's defaults must happen
   * before the keys set inside it, whatever order the lines come in (ToText sorts
   * `task.a` before `task.cls`). */
  int maxd = 0;
  for (int i = 0; i < st.n; i++)
    if (depth(st.v[i].key) > maxd) maxd = depth(st.v[i].key);
  char **failed = lv_params_xmalloc(sizeof(char *) * (size_t)(st.n + 1));
  stmt **order = lv_params_xmalloc(sizeof(stmt *) * (size_t)(st.n + 1));
  int nfailed = 0;
  for (int d = 0; d <= maxd; d++) {
    /* This depth's cls lines in key order (a list's items in index order, so each new
     * item lands at the end), then its `list : []` lines, which empty lists before the
     * cls lines of their items (one level deeper) append to them. */
    int m = 0;
    for (int i = 0; i < st.n; i++)
      if (is_cls_key(st.v[i].key) && depth(st.v[i].key) == d) order[m++] = &st.v[i];
    if (m > 1) qsort(order, (size_t)m, sizeof(stmt *), natural_cmp);
    for (int j = 0; j < m; j++) {
      stmt *s = order[j];
      char *prefix = lv_params_xstrndup(s->key, strlen(s->key) - (d ? 4 : 3));
      bool skip = false;
      for (int k = 0; k < nfailed; k++) skip |= under(prefix, failed[k]) || !strcmp(prefix, failed[k]);
      lv_status err = NULL;
      if (!skip) {
        char *cls = lingvo_class_name(s->value);
        err = lv_params_set_class(p, prefix, cls);
        free(cls);
      }
      if (err) {
        failed[nfailed++] = prefix;
        lerr_add_status(&errs, s->line, err);
      } else {
        free(prefix);
      }
    }
    for (int i = 0; i < st.n; i++) {
      stmt *s = &st.v[i];
      if (is_cls_key(s->key) || depth(s->key) != d) continue;
      bool skip = false;
      for (int k = 0; k < nfailed && !skip; k++) skip = under(s->key, failed[k]);
      s->done = skip || is_list_clear(p, s, &errs);
    }
  }
  free(order);
  for (int i = 0; i < st.n; i++) {
    stmt *s = &st.v[i];
    bool skip = is_cls_key(s->key) || s->done;
    for (int k = 0; k < nfailed && !skip; k++) skip = under(s->key, failed[k]);
    if (!skip) lerr_add_status(&errs, s->line, apply_one(p, s->key, s->value));
  }
  for (int k = 0; k < nfailed; k++) free(failed[k]);
  free(failed);
  for (int i = 0; i < st.n; i++) {
    free(st.v[i].key);
    free(st.v[i].value);
  }
  free(st.v);
  return lerr_finish(&errs);
}

lv_status lv_params_apply_overrides(lv_params *p, const char *override_text, const char *override_file) {
  bool have_text = override_text && *override_text;
  bool have_file = override_file && *override_file;
  if (have_text && have_file)
    return lv_status_make(LV_ERR_INVALID,
                          "Only one of --model_params_override and --model_params_file_override may be specified.");
  if (have_text) return lv_params_from_text(p, override_text, "<command line>");
  if (!have_file) return NULL;
  if (!lv_file_exists(override_file))
    return lv_status_make(LV_ERR_NOT_FOUND, "--model_params_file_override: %s does not exist", override_file);
  char *data;
  size_t len;
  LV_TRY(lv_file_read_regular(override_file, LV_FILE_TEXT_MAX, "--model_params_file_override", &data, &len));
  if (strlen(data) != len) {
    free(data);
    return lv_status_make(LV_ERR_INVALID, "%s: contains a NUL byte; expected text lines <key> : <value>",
                          override_file);
  }
  lv_params *before = lv_params_copy(p);
  lv_status s = lv_params_from_text(p, data, override_file);
  if (!s) lv_params_keep_assigned_if_unchanged(p, before);
  lv_params_free(before);
  free(data);
  return s;
}
