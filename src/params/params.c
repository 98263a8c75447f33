/* Params trees and values (reference/lingvo.md §3.1-3.2) and the class registry (§4.1).
 * Text (ToText/FromText) lives in params_text.c, experiment files in params_cfg.c. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flags.h"
#include "params/params_internal.h"

const char *const lv_pv_kind_names[LV_PV_KIND_COUNT] = {"int",  "float",  "bool",          "string",
                                                        "list", "params", "list of params"};
_Static_assert(LV_PV_KIND_COUNT == 7, "lv_pv_kind_names must name every kind");

/* ---- small helpers ---- */

void *lv_params_xmalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  LV_ASSERTF(p, "out of memory allocating %zu bytes for params", n);
  return p;
}

char *lv_params_xstrdup(const char *s) { return lv_params_xstrndup(s, strlen(s)); }

char *lv_params_xstrndup(const char *s, size_t n) {
  char *d = lv_params_xmalloc(n + 1);
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

static void pbuf_reserve(lv_pbuf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1) cap *= 2;
  char *s = realloc(b->s, cap);
  LV_ASSERTF(s, "out of memory growing a string to %zu bytes", cap);
  b->s = s;
  b->cap = cap;
}

void lv_pbuf_addn(lv_pbuf *b, const char *s, size_t n) {
  pbuf_reserve(b, n);
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = 0;
}

void lv_pbuf_addf(lv_pbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  LV_ASSERT(n >= 0);
  pbuf_reserve(b, (size_t)n);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  b->len += (size_t)n;
}

char *lv_pbuf_take(lv_pbuf *b) {
  char *s = b->s ? b->s : lv_params_xstrdup("");
  b->s = NULL;
  b->len = b->cap = 0;
  return s;
}

void lv_perrs_add(lv_perrs *el, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  LV_ASSERT(vasprintf(&msg, fmt, ap) >= 0);
  va_end(ap);
  lv_pbuf_addf(&el->b, "%s%s", el->n ? "\n" : "", msg);
  free(msg);
  el->n++;
}

void lv_perrs_add_status(lv_perrs *el, const char *source, int line, lv_status s) {
  if (!s) return;
  lv_perrs_add(el, "%s:%d: %s", source, line, lv_status_msg(s));
  lv_status_free(s);
}

lv_status lv_perrs_finish(lv_perrs *el) {
  if (el->n == 0) return NULL;
  lv_status s;
  if (el->n == 1) {
    s = lv_status_make(LV_ERR_INVALID, "%s", el->b.s);
  } else {
    /* One error per line, indented under a count, so a long list stays readable. */
    lv_pbuf b = {0};
    lv_pbuf_addf(&b, "%d errors:\n  ", el->n);
    for (const char *c = el->b.s; *c; c++) {
      lv_pbuf_addn(&b, c, 1);
      if (*c == '\n') lv_pbuf_addf(&b, "  ");
    }
    s = lv_status_make(LV_ERR_INVALID, "%s", b.s);
    free(b.s);
  }
  free(el->b.s);
  memset(el, 0, sizeof *el);
  return s;
}

/* ---- values ---- */

static lv_pvalue *pv_new(lv_pv_kind k) {
  lv_pvalue *v = lv_params_xmalloc(sizeof *v);
  v->kind = k;
  return v;
}

lv_pvalue *lv_pvalue_int(int64_t x) {
  lv_pvalue *v = pv_new(LV_PV_INT);
  v->u.i = x;
  return v;
}

lv_pvalue *lv_pvalue_float(double x) {
  lv_pvalue *v = pv_new(LV_PV_FLOAT);
  v->u.f = x;
  return v;
}

lv_pvalue *lv_pvalue_bool(bool x) {
  lv_pvalue *v = pv_new(LV_PV_BOOL);
  v->u.b = x;
  return v;
}

lv_pvalue *lv_pvalue_string(const char *x) {
  LV_ASSERT(x);
  lv_pvalue *v = pv_new(LV_PV_STRING);
  v->u.s = lv_params_xstrdup(x);
  return v;
}

lv_pvalue *lv_pvalue_list(void) { return pv_new(LV_PV_LIST); }

lv_pvalue *lv_pvalue_tuple(void) {
  lv_pvalue *v = pv_new(LV_PV_LIST);
  v->u.list.tuple = true;
  return v;
}

bool lv_pvalue_is_tuple(const lv_pvalue *list) {
  LV_ASSERT(list && list->kind == LV_PV_LIST);
  return list->u.list.tuple;
}

lv_pvalue *lv_pvalue_append(lv_pvalue *list, lv_pvalue *item) {
  LV_ASSERT(list && list->kind == LV_PV_LIST);
  if (list->u.list.n == list->u.list.cap) {
    int cap = list->u.list.cap ? 2 * list->u.list.cap : 4;
    lv_pvalue **items = realloc(list->u.list.items, (size_t)cap * sizeof *items);
    LV_ASSERTF(items, "out of memory growing a params list to %d items", cap);
    list->u.list.items = items;
    list->u.list.cap = cap;
  }
  list->u.list.items[list->u.list.n++] = item;
  return list;
}

lv_pvalue *lv_pvalue_ints(int n, const int64_t *v) {
  lv_pvalue *l = lv_pvalue_list();
  for (int i = 0; i < n; i++) lv_pvalue_append(l, lv_pvalue_int(v[i]));
  return l;
}

lv_pvalue *lv_pvalue_floats(int n, const double *v) {
  lv_pvalue *l = lv_pvalue_list();
  for (int i = 0; i < n; i++) lv_pvalue_append(l, lv_pvalue_float(v[i]));
  return l;
}

void lv_pvalue_free(lv_pvalue *v) {
  if (!v) return;
  if (v->kind == LV_PV_STRING) free(v->u.s);
  if (v->kind == LV_PV_LIST) {
    for (int i = 0; i < v->u.list.n; i++) lv_pvalue_free(v->u.list.items[i]);
    free(v->u.list.items);
  }
  free(v);
}

lv_pvalue *lv_pvalue_copy(const lv_pvalue *v) {
  if (!v) return NULL;
  switch (v->kind) {
    case LV_PV_INT: return lv_pvalue_int(v->u.i);
    case LV_PV_FLOAT: return lv_pvalue_float(v->u.f);
    case LV_PV_BOOL: return lv_pvalue_bool(v->u.b);
    case LV_PV_STRING: return lv_pvalue_string(v->u.s);
    case LV_PV_LIST: {
      lv_pvalue *l = v->u.list.tuple ? lv_pvalue_tuple() : lv_pvalue_list();
      for (int i = 0; i < v->u.list.n; i++) lv_pvalue_append(l, lv_pvalue_copy(v->u.list.items[i]));
      return l;
    }
    default: LV_ASSERTF(0, "bad params value kind %d", (int)v->kind);
  }
  return NULL;
}

bool lv_pvalue_equal(const lv_pvalue *a, const lv_pvalue *b) {
  if (!a || !b) return a == b;
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case LV_PV_INT: return a->u.i == b->u.i;
    /* NaN equals NaN here so that a tree holding one equals its own copy. */
    case LV_PV_FLOAT: return a->u.f == b->u.f || (isnan(a->u.f) && isnan(b->u.f));
    case LV_PV_BOOL: return a->u.b == b->u.b;
    case LV_PV_STRING: return strcmp(a->u.s, b->u.s) == 0;
    case LV_PV_LIST:
      if (a->u.list.tuple != b->u.list.tuple || a->u.list.n != b->u.list.n) return false;
      for (int i = 0; i < a->u.list.n; i++)
        if (!lv_pvalue_equal(a->u.list.items[i], b->u.list.items[i])) return false;
      return true;
    default: return false;
  }
}

char *lv_pvalue_to_text(const lv_pvalue *v) {
  lv_pbuf b = {0};
  lv_pvalue_repr(&b, v);
  return lv_pbuf_take(&b);
}

lv_pv_kind lv_pvalue_kind(const lv_pvalue *v) {
  LV_ASSERTF(v, "lv_pvalue_kind of None");
  return v->kind;
}

int lv_pvalue_len(const lv_pvalue *list) {
  LV_ASSERT(list && list->kind == LV_PV_LIST);
  return list->u.list.n;
}

const lv_pvalue *lv_pvalue_at(const lv_pvalue *list, int i) {
  LV_ASSERT(list && list->kind == LV_PV_LIST);
  LV_ASSERTF(i >= 0 && i < list->u.list.n, "list index %d out of range [0, %d)", i, list->u.list.n);
  return list->u.list.items[i];
}

int64_t lv_pvalue_as_int(const lv_pvalue *v) {
  LV_ASSERTF(v && v->kind == LV_PV_INT, "params value is not an int");
  return v->u.i;
}

double lv_pvalue_as_float(const lv_pvalue *v) {
  LV_ASSERTF(v && (v->kind == LV_PV_FLOAT || v->kind == LV_PV_INT), "params value is not a number");
  return v->kind == LV_PV_INT ? (double)v->u.i : v->u.f;
}

bool lv_pvalue_as_bool(const lv_pvalue *v) {
  LV_ASSERTF(v && v->kind == LV_PV_BOOL, "params value is not a bool");
  return v->u.b;
}

const char *lv_pvalue_as_string(const lv_pvalue *v) {
  LV_ASSERTF(v && v->kind == LV_PV_STRING, "params value is not a string");
  return v->u.s;
}

int lv_pvalue_to_ints(const lv_pvalue *v, int64_t *out, int max) {
  if (!v || v->kind != LV_PV_LIST) return -1;
  for (int i = 0; i < v->u.list.n; i++) {
    const lv_pvalue *x = v->u.list.items[i];
    if (!x || x->kind != LV_PV_INT) return -1;
    if (i < max) out[i] = x->u.i;
  }
  return v->u.list.n;
}

int lv_pvalue_to_floats(const lv_pvalue *v, double *out, int max) {
  if (!v || v->kind != LV_PV_LIST) return -1;
  for (int i = 0; i < v->u.list.n; i++) {
    const lv_pvalue *x = v->u.list.items[i];
    if (!x || (x->kind != LV_PV_INT && x->kind != LV_PV_FLOAT)) return -1;
    if (i < max) out[i] = lv_pvalue_as_float(x);
  }
  return v->u.list.n;
}

void lv_pvalue_describe(lv_pbuf *b, const lv_pvalue *v) {
  if (!v) {
    lv_pbuf_addf(b, "None");
    return;
  }
  lv_pbuf_addf(b, "%s ", v->kind == LV_PV_LIST && v->u.list.tuple ? "tuple" : lv_pv_kind_names[v->kind]);
  size_t start = b->len;
  lv_pvalue_repr(b, v);
  if (b->len - start > 80) { /* a long list is context, not the point of the message */
    b->len = start + 77;
    b->s[b->len] = 0;
    lv_pbuf_addf(b, "...");
  }
}

/* ---- trees ---- */

lv_params *lv_params_new(void) { return lv_params_xmalloc(sizeof(lv_params)); }

lv_params *lv_params_new_cls(const char *cls) {
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "cls", cls, "Cls that this param object is associated with.");
  return p;
}

void lv_params_entry_clear_items(lv_pentry *e) {
  for (int i = 0; i < e->nitems; i++) lv_params_free(e->items[i]);
  free(e->items);
  e->items = NULL;
  e->nitems = 0;
}

void lv_params_entry_append(lv_pentry *e, lv_params *item) {
  LV_ASSERT(e->kind == LV_PV_PARAMS_LIST && item);
  lv_params **items = realloc(e->items, sizeof(lv_params *) * (size_t)(e->nitems + 1));
  LV_ASSERTF(items, "out of memory growing the list of params %s", e->name);
  e->items = items;
  e->items[e->nitems++] = item;
}

static void entry_clear(lv_pentry *e) {
  free(e->name);
  free(e->desc);
  lv_pvalue_free(e->val);
  lv_params_free(e->child);
  lv_params_entry_clear_items(e);
  memset(e, 0, sizeof *e);
}

static void params_clear(lv_params *p) {
  for (int i = 0; i < p->n; i++) entry_clear(&p->e[i]);
  free(p->e);
  p->e = NULL;
  p->n = p->cap = 0;
}

void lv_params_free(lv_params *p) {
  if (!p) return;
  params_clear(p);
  free(p);
}

lv_params *lv_params_copy(const lv_params *p) {
  LV_ASSERT(p);
  lv_params *c = lv_params_new();
  c->cap = c->n = p->n;
  c->e = lv_params_xmalloc(sizeof(lv_pentry) * (size_t)(p->n ? p->n : 1));
  for (int i = 0; i < p->n; i++) {
    const lv_pentry *s = &p->e[i];
    lv_pentry *d = &c->e[i];
    d->name = lv_params_xstrdup(s->name);
    d->desc = lv_params_xstrdup(s->desc);
    d->kind = s->kind;
    d->nullable = s->nullable;
    d->assigned = s->assigned;
    d->val = lv_pvalue_copy(s->val);
    d->child = s->child ? lv_params_copy(s->child) : NULL;
    for (int k = 0; k < s->nitems; k++) lv_params_entry_append(d, lv_params_copy(s->items[k]));
  }
  return c;
}

void lv_params_freeze(lv_params *p) {
  LV_ASSERT(p);
  p->frozen = true;
  for (int i = 0; i < p->n; i++) {
    if (p->e[i].child) lv_params_freeze(p->e[i].child);
    for (int k = 0; k < p->e[i].nitems; k++) lv_params_freeze(p->e[i].items[k]);
  }
}

bool lv_params_is_frozen(const lv_params *p) { return p->frozen; }

lv_pentry *lv_params_entry(const lv_params *p, const char *name) {
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->e[i].name, name) == 0) return &p->e[i];
  return NULL;
}

bool lv_params_equal(const lv_params *a, const lv_params *b) {
  if (!a || !b) return a == b;
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++) {
    const lv_pentry *x = &a->e[i];
    const lv_pentry *y = lv_params_entry(b, x->name);
    if (!y || x->kind != y->kind) return false;
    if (x->kind == LV_PV_PARAMS) {
      if (!lv_params_equal(x->child, y->child)) return false;
    } else if (x->kind == LV_PV_PARAMS_LIST) {
      if (x->nitems != y->nitems) return false;
      for (int k = 0; k < x->nitems; k++)
        if (!lv_params_equal(x->items[k], y->items[k])) return false;
    } else if (!lv_pvalue_equal(x->val, y->val)) {
      return false;
    }
  }
  return true;
}

void lv_params_keep_assigned_if_unchanged(lv_params *after, const lv_params *before) {
  for (int i = 0; after && before && i < after->n; i++) {
    lv_pentry *x = &after->e[i];
    const lv_pentry *y = lv_params_entry(before, x->name);
    if (!y || x->kind != y->kind) continue;
    if (x->kind == LV_PV_PARAMS) {
      lv_params_keep_assigned_if_unchanged(x->child, y->child);
    } else if (x->kind == LV_PV_PARAMS_LIST) {
      for (int k = 0; k < x->nitems && k < y->nitems; k++)
        lv_params_keep_assigned_if_unchanged(x->items[k], y->items[k]);
    } else if (lv_pvalue_equal(x->val, y->val)) {
      x->assigned = y->assigned;
    }
  }
}

static bool name_is_legal(const char *name) {
  /* ^[a-z_][a-z0-9_]*$ */
  if (!name || !*name) return false;
  if (!((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_')) return false;
  for (const char *c = name + 1; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  return true;
}

static lv_pentry *define_entry(lv_params *p, const char *name, lv_pv_kind kind, const char *desc) {
  LV_ASSERT(p);
  LV_ASSERTF(!p->frozen, "This Params instance is immutable: cannot define \"%s\"", name ? name : "");
  LV_ASSERTF(name_is_legal(name), "Attribute name string invalid: \"%s\", must match regex \"^[a-z_][a-z0-9_]*$\".",
             name ? name : "(null)");
  LV_ASSERTF(!lv_params_entry(p, name), "Parameter %s is already defined", name);
  LV_ASSERTF(desc && *desc, "param \"%s\" needs a description", name);
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 8;
    lv_pentry *e = realloc(p->e, sizeof(lv_pentry) * (size_t)cap);
    LV_ASSERTF(e, "out of memory growing params to %d keys", cap);
    p->e = e;
    p->cap = cap;
  }
  lv_pentry *e = &p->e[p->n++];
  memset(e, 0, sizeof *e);
  e->name = lv_params_xstrdup(name);
  e->desc = lv_params_xstrdup(desc);
  e->kind = kind;
  return e;
}

void lv_params_define_int(lv_params *p, const char *name, int64_t def, const char *desc) {
  define_entry(p, name, LV_PV_INT, desc)->val = lv_pvalue_int(def);
}

void lv_params_define_float(lv_params *p, const char *name, double def, const char *desc) {
  define_entry(p, name, LV_PV_FLOAT, desc)->val = lv_pvalue_float(def);
}

void lv_params_define_bool(lv_params *p, const char *name, bool def, const char *desc) {
  define_entry(p, name, LV_PV_BOOL, desc)->val = lv_pvalue_bool(def);
}

void lv_params_define_string(lv_params *p, const char *name, const char *def, const char *desc) {
  LV_ASSERTF(def, "string param \"%s\" needs a default (use lv_params_define_none for None)", name);
  define_entry(p, name, LV_PV_STRING, desc)->val = lv_pvalue_string(def);
}

void lv_params_define_list(lv_params *p, const char *name, lv_pvalue *def, const char *desc) {
  LV_ASSERTF(!def || def->kind == LV_PV_LIST, "list param \"%s\" given a non-list default", name);
  define_entry(p, name, LV_PV_LIST, desc)->val = def ? def : lv_pvalue_list();
}

void lv_params_define_none(lv_params *p, const char *name, lv_pv_kind kind, const char *desc) {
  LV_ASSERTF(kind >= 0 && kind < LV_PV_KIND_COUNT, "bad kind %d for \"%s\"", (int)kind, name);
  lv_pentry *e = define_entry(p, name, kind, desc);
  e->nullable = true;
}

void lv_params_define_float_or_none(lv_params *p, const char *name, double def, const char *desc) {
  lv_params_define_float(p, name, def, desc);
  lv_pentry *e = NULL;
  LV_ASSERT(!lv_params_resolve(p, name, &e));
  e->nullable = true;
}

lv_params *lv_params_define_params(lv_params *p, const char *name, lv_params *child, const char *desc) {
  lv_pentry *e = define_entry(p, name, LV_PV_PARAMS, desc);
  e->nullable = true;
  e->child = child;
  return child;
}

void lv_params_define_params_list(lv_params *p, const char *name, lv_params **items, int n, const char *desc) {
  LV_ASSERTF(n >= 0 && (n == 0 || items), "list of params \"%s\": bad items", name);
  lv_pentry *e = define_entry(p, name, LV_PV_PARAMS_LIST, desc);
  for (int i = 0; i < n; i++) {
    LV_ASSERTF(items[i], "list of params \"%s\": item %d is NULL", name, i);
    lv_params_entry_append(e, items[i]);
  }
}

/* ---- dotted navigation ---- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *lv_params_key_error_string(const lv_params *p, const char *shown_name, const char *leaf) {
  const char **keys = lv_params_xmalloc(sizeof(char *) * (size_t)(p->n + 1));
  const char **sim = lv_params_xmalloc(sizeof(char *) * (size_t)(p->n + 1));
  for (int i = 0; i < p->n; i++) keys[i] = p->e[i].name;
  int k = lv_similar_names(leaf, keys, p->n, sim, p->n);
  lv_pbuf b = {0};
  if (k > 0) {
    qsort(sim, (size_t)k, sizeof(char *), cmp_str);
    lv_pbuf_addf(&b, "%s (did you mean: [", shown_name);
    for (int i = 0; i < k; i++) lv_pbuf_addf(&b, "%s%s", i ? "," : "", sim[i]);
    lv_pbuf_addf(&b, "])");
  } else {
    qsort(keys, (size_t)p->n, sizeof(char *), cmp_str);
    lv_pbuf_addf(&b, "%s (keys are [", shown_name);
    for (int i = 0; i < p->n; i++) lv_pbuf_addf(&b, "%s'%s'", i ? ", " : "", keys[i]);
    lv_pbuf_addf(&b, "])");
  }
  free(keys);
  free(sim);
  return lv_pbuf_take(&b);
}

static lv_status unknown_key(const lv_params *p, const char *dotted, size_t shown_len, const char *leaf) {
  char *shown = lv_params_xstrndup(dotted, shown_len);
  char *msg = lv_params_key_error_string(p, shown, leaf);
  lv_status s = lv_status_make(LV_ERR_INVALID, "unknown key %s", msg);
  free(shown);
  free(msg);
  return s;
}

/* A path component "name[i]": cuts part to "name" and sets *index = i; -1 without [..]. */
static lv_status split_index(const char *dotted, char *part, int *index) {
  *index = -1;
  char *br = strchr(part, '[');
  if (!br) return NULL;
  size_t len = strlen(part);
  long v = -1;
  if (br != part && part[len - 1] == ']' && isdigit((unsigned char)br[1])) {
    char *end;
    errno = 0;
    v = strtol(br + 1, &end, 10);
    if (end != part + len - 1 || errno || v > INT_MAX) v = -1;
  }
  if (v < 0)
    return lv_status_make(LV_ERR_INVALID, "malformed key \"%s\": expected name[<index>], found %s", dotted,
                          part);
  *br = 0;
  *index = (int)v;
  return NULL;
}

/* Checks that entry e (shown as dotted[0..upto), which ends in "[index]") is a list
 * of params holding item index (or, with one_past, index == nitems). */
static lv_status item_error(const lv_pentry *e, const char *dotted, size_t upto, int index, bool one_past) {
  if (e->kind != LV_PV_PARAMS_LIST)
    return lv_status_make(LV_ERR_INVALID, "%.*s: %s is of type %s, not a list of params (in %s)", (int)upto, dotted,
                          e->name, lv_pv_kind_names[e->kind], dotted);
  if (index < e->nitems || (one_past && index == e->nitems)) return NULL;
  return lv_status_make(LV_ERR_INVALID, "%.*s: index %d out of range: %s has %d item%s%s", (int)upto, dotted, index,
                        e->name, e->nitems, e->nitems == 1 ? "" : "s",
                        one_past ? " (a new item goes at the end and needs its cls first)" : "");
}

lv_status lv_params_walk(lv_params *p, const char *dotted, lv_params **parent, const char **leaf) {
  LV_ASSERT(p && dotted);
  const char *start = dotted;
  lv_params *cur = p;
  for (;;) {
    const char *dot = strchr(start, '.');
    size_t len = dot ? (size_t)(dot - start) : strlen(start);
    if (len == 0) return lv_status_make(LV_ERR_INVALID, "malformed key \"%s\": empty name between dots", dotted);
    if (!dot) {
      *parent = cur;
      *leaf = start;
      return NULL;
    }
    char *part = lv_params_xstrndup(start, len);
    int index = -1;
    size_t upto = (size_t)(dot - dotted);
    lv_status s = split_index(dotted, part, &index);
    lv_pentry *e = s ? NULL : lv_params_entry(cur, part);
    if (s) {
    } else if (!e) {
      s = unknown_key(cur, dotted, upto - (len - strlen(part)), part);
    } else if (index >= 0) {
      s = item_error(e, dotted, upto, index, false);
      if (!s) {
        free(part);
        cur = e->items[index];
        start = dot + 1;
        continue;
      }
    } else if (e->kind == LV_PV_PARAMS_LIST) {
      s = lv_status_make(LV_ERR_INVALID, "%.*s is a list of params: name an item, %.*s[<index>] (in %s)", (int)upto,
                         dotted, (int)upto, dotted, dotted);
    } else if (e->kind != LV_PV_PARAMS)
      s = lv_status_make(LV_ERR_INVALID, "%.*s is of type %s, not a nested params (in %s)", (int)upto, dotted,
                         lv_pv_kind_names[e->kind], dotted);
    else if (!e->child)
      s = lv_status_make(LV_ERR_INVALID, "%.*s is None: set %.*s.cls to a class first (in %s)", (int)upto,
                         dotted, (int)upto, dotted, dotted);
    free(part);
    if (s) return s;
    cur = e->child;
    start = dot + 1;
  }
}

lv_status lv_params_resolve_slot(lv_params *p, const char *dotted, lv_params **parent, lv_pentry **entry,
                                 int *index) {
  const char *leaf;
  LV_TRY(lv_params_walk(p, dotted, parent, &leaf));
  char *name = lv_params_xstrdup(leaf);
  lv_status s = split_index(dotted, name, index);
  lv_pentry *e = s ? NULL : lv_params_entry(*parent, name);
  if (!s && !e) s = unknown_key(*parent, dotted, strlen(dotted) - (strlen(leaf) - strlen(name)), name);
  if (!s && *index >= 0) s = item_error(e, dotted, strlen(dotted), *index, true);
  free(name);
  if (s) return s;
  *entry = e;
  return NULL;
}

lv_status lv_params_resolve(lv_params *p, const char *dotted, lv_pentry **entry) {
  lv_params *parent;
  int index;
  LV_TRY(lv_params_resolve_slot(p, dotted, &parent, entry, &index));
  if (index >= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: is an item of a list of params, not a key: set the keys below it "
                          "(%s.<key>)", dotted, dotted);
  return NULL;
}

/* Getters: an undefined key is a programmer error. */
static const lv_pentry *get_entry(const lv_params *p, const char *dotted) {
  lv_pentry *e = NULL;
  lv_status s = lv_params_resolve((lv_params *)p, dotted, &e);
  LV_ASSERTF(!s, "params get: %s", lv_status_msg(s));
  return e;
}

bool lv_params_has(const lv_params *p, const char *dotted) {
  lv_pentry *e = NULL;
  lv_status s = lv_params_resolve((lv_params *)p, dotted, &e);
  bool found = s == NULL;
  lv_status_free(s);
  return found;
}

bool lv_params_is_set(const lv_params *p, const char *dotted) {
  lv_pentry *e = NULL;
  lv_status s = lv_params_resolve((lv_params *)p, dotted, &e);
  if (s) {
    lv_status_free(s);
    return false;
  }
  if (e->kind == LV_PV_PARAMS_LIST) return true;
  return e->kind == LV_PV_PARAMS ? e->child != NULL : e->val != NULL;
}

lv_pv_kind lv_params_kind(const lv_params *p, const char *dotted) { return get_entry(p, dotted)->kind; }

const char *lv_params_desc(const lv_params *p, const char *dotted) { return get_entry(p, dotted)->desc; }

static const lv_pvalue *get_value(const lv_params *p, const char *dotted, lv_pv_kind kind) {
  const lv_pentry *e = get_entry(p, dotted);
  bool ok = e->kind == kind || (kind == LV_PV_FLOAT && e->kind == LV_PV_INT);
  LV_ASSERTF(ok, "params get: %s is a %s, not a %s", dotted, lv_pv_kind_names[e->kind], lv_pv_kind_names[kind]);
  LV_ASSERTF(e->val, "params get: %s is None (check lv_params_is_set first)", dotted);
  return e->val;
}

int64_t lv_params_int(const lv_params *p, const char *dotted) { return get_value(p, dotted, LV_PV_INT)->u.i; }

double lv_params_float(const lv_params *p, const char *dotted) {
  return lv_pvalue_as_float(get_value(p, dotted, LV_PV_FLOAT));
}

bool lv_params_bool(const lv_params *p, const char *dotted) { return get_value(p, dotted, LV_PV_BOOL)->u.b; }

const char *lv_params_str(const lv_params *p, const char *dotted) {
  return get_value(p, dotted, LV_PV_STRING)->u.s;
}

const lv_pvalue *lv_params_list(const lv_params *p, const char *dotted) {
  return get_value(p, dotted, LV_PV_LIST);
}

static const lv_pentry *get_list(const lv_params *p, const char *dotted) {
  const lv_pentry *e = get_entry(p, dotted);
  LV_ASSERTF(e->kind == LV_PV_PARAMS_LIST, "params get: %s is a %s, not a list of params", dotted,
             lv_pv_kind_names[e->kind]);
  return e;
}

int lv_params_params_list_len(const lv_params *p, const char *dotted) { return get_list(p, dotted)->nitems; }

lv_params *lv_params_params_list_at(const lv_params *p, const char *dotted, int i) {
  const lv_pentry *e = get_list(p, dotted);
  LV_ASSERTF(i >= 0 && i < e->nitems, "params get: %s[%d] out of range [0, %d)", dotted, i, e->nitems);
  return e->items[i];
}

lv_params *lv_params_sub(const lv_params *p, const char *dotted) {
  lv_params *parent;
  lv_pentry *slot;
  int index;
  lv_status s = lv_params_resolve_slot((lv_params *)p, dotted, &parent, &slot, &index);
  LV_ASSERTF(!s, "params get: %s", lv_status_msg(s));
  if (index >= 0) {
    LV_ASSERTF(index < slot->nitems, "params get: %s out of range [0, %d)", dotted, slot->nitems);
    return slot->items[index];
  }
  const lv_pentry *e = slot;
  LV_ASSERTF(e->kind == LV_PV_PARAMS, "params get: %s is a %s, not nested params", dotted,
             lv_pv_kind_names[e->kind]);
  return e->child;
}

int lv_params_num_keys(const lv_params *p) { return p->n; }

const char *lv_params_key(const lv_params *p, int i) {
  LV_ASSERTF(i >= 0 && i < p->n, "params key index %d out of range [0, %d)", i, p->n);
  return p->e[i].name;
}

void lv_params_delete(lv_params *p, const char *dotted) {
  lv_params *parent;
  const char *leaf;
  lv_status s = lv_params_walk(p, dotted, &parent, &leaf);
  LV_ASSERTF(!s, "params delete: %s", lv_status_msg(s));
  LV_ASSERTF(!p->frozen && !parent->frozen, "This Params instance is immutable: cannot delete %s", dotted);
  for (int i = 0; i < parent->n; i++) {
    if (strcmp(parent->e[i].name, leaf) != 0) continue;
    entry_clear(&parent->e[i]);
    memmove(&parent->e[i], &parent->e[i + 1], sizeof(lv_pentry) * (size_t)(parent->n - i - 1));
    parent->n--;
    return;
  }
  LV_ASSERTF(0, "params delete: no key %s", dotted);
}

/* ---- setters ---- */

lv_status lv_params_entry_set(lv_pentry *e, const char *dotted, lv_pvalue *v) {
  if (e->kind == LV_PV_PARAMS || e->kind == LV_PV_PARAMS_LIST) {
    lv_pbuf b = {0};
    lv_pvalue_describe(&b, v);
    lv_status s = lv_status_make(LV_ERR_INVALID, "%s: expected %s, found %s", dotted,
                                 e->kind == LV_PV_PARAMS ? "params (a nested group)" : "a list of params", b.s);
    free(b.s);
    lv_pvalue_free(v);
    return s;
  }
  if (!v) {
    if (!e->nullable)
      return lv_status_make(LV_ERR_INVALID, "%s: expected %s, found None (this param cannot be None)", dotted,
                            lv_pv_kind_names[e->kind]);
  } else if (e->kind == LV_PV_FLOAT && v->kind == LV_PV_INT) {
    int64_t i = v->u.i;
    v->kind = LV_PV_FLOAT;
    v->u.f = (double)i;
  } else if (v->kind != e->kind) {
    lv_pbuf b = {0};
    lv_pvalue_describe(&b, v);
    lv_status s = lv_status_make(LV_ERR_INVALID, "%s: expected %s, found %s", dotted, lv_pv_kind_names[e->kind], b.s);
    free(b.s);
    lv_pvalue_free(v);
    return s;
  }
  lv_pvalue_free(e->val);
  e->val = v;
  e->assigned = true;
  return NULL;
}

bool lv_params_any_assigned(const lv_params *p) {
  for (int i = 0; p && i < p->n; i++)
    if (p->e[i].assigned) return true;
  return false;
}

static lv_status frozen_error(const char *dotted) {
  return lv_status_make(LV_ERR_INVALID, "This Params instance is immutable: cannot set %s", dotted);
}

lv_status lv_params_resolve_mutable(lv_params *p, const char *dotted, lv_pentry **entry) {
  lv_params *parent;
  const char *leaf;
  LV_TRY(lv_params_walk(p, dotted, &parent, &leaf));
  if (p->frozen || parent->frozen) return frozen_error(dotted);
  return lv_params_resolve(p, dotted, entry);
}

static lv_status set_value(lv_params *p, const char *dotted, lv_pvalue *v) {
  lv_pentry *e = NULL;
  lv_status s = lv_params_resolve_mutable(p, dotted, &e);
  if (s) {
    lv_pvalue_free(v);
    return s;
  }
  return lv_params_entry_set(e, dotted, v);
}

lv_status lv_params_set_int(lv_params *p, const char *dotted, int64_t v) {
  return set_value(p, dotted, lv_pvalue_int(v));
}

lv_status lv_params_set_float(lv_params *p, const char *dotted, double v) {
  return set_value(p, dotted, lv_pvalue_float(v));
}

lv_status lv_params_set_bool(lv_params *p, const char *dotted, bool v) {
  return set_value(p, dotted, lv_pvalue_bool(v));
}

lv_status lv_params_set_string(lv_params *p, const char *dotted, const char *v) {
  LV_ASSERT(v);
  return set_value(p, dotted, lv_pvalue_string(v));
}

lv_status lv_params_set_list(lv_params *p, const char *dotted, lv_pvalue *v) {
  LV_ASSERTF(v && v->kind == LV_PV_LIST, "lv_params_set_list(%s) needs a list", dotted);
  return set_value(p, dotted, v);
}

lv_status lv_params_set_none(lv_params *p, const char *dotted) {
  lv_params *parent;
  const char *leaf;
  LV_TRY(lv_params_walk(p, dotted, &parent, &leaf));
  if (p->frozen || parent->frozen) return frozen_error(dotted);
  lv_pentry *e;
  LV_TRY(lv_params_resolve(p, dotted, &e));
  if (e->kind == LV_PV_PARAMS) {
    lv_params_free(e->child);
    e->child = NULL;
    return NULL;
  }
  if (e->kind == LV_PV_PARAMS_LIST)
    return lv_status_make(LV_ERR_INVALID, "%s: a list of params cannot be None (set it to [] instead)", dotted);
  return lv_params_entry_set(e, dotted, NULL);
}

/* The list entry at dotted, writable; with want_index, dotted must name an item. */
static lv_status mutable_slot(lv_params *p, const char *dotted, lv_pentry **e, int *index) {
  lv_params *parent;
  LV_TRY(lv_params_resolve_slot(p, dotted, &parent, e, index));
  if (p->frozen || parent->frozen || (*index >= 0 && *index < (*e)->nitems && (*e)->items[*index]->frozen))
    return frozen_error(dotted);
  return NULL;
}

lv_status lv_params_set_params(lv_params *p, const char *dotted, lv_params *child) {
  lv_pentry *e = NULL;
  int index = -1;
  lv_status s = mutable_slot(p, dotted, &e, &index);
  if (!s && index < 0 && e->kind != LV_PV_PARAMS)
    s = lv_status_make(LV_ERR_INVALID, "%s: expected %s, found params (a nested group)", dotted,
                       lv_pv_kind_names[e->kind]);
  if (!s && index >= 0 && !child)
    s = lv_status_make(LV_ERR_INVALID, "%s: an item of a list of params cannot be None", dotted);
  if (s) {
    lv_params_free(child);
    return s;
  }
  if (index < 0) {
    lv_params_free(e->child);
    e->child = child;
  } else if (index == e->nitems) {
    lv_params_entry_append(e, child);
  } else {
    lv_params_free(e->items[index]);
    e->items[index] = child;
  }
  return NULL;
}

static lv_status mutable_list(lv_params *p, const char *dotted, lv_pentry **e) {
  int index = -1;
  LV_TRY(mutable_slot(p, dotted, e, &index));
  if (index >= 0 || (*e)->kind != LV_PV_PARAMS_LIST)
    return lv_status_make(LV_ERR_INVALID, "%s: expected %s, found a list of params", dotted,
                          index >= 0 ? "params (an item)" : lv_pv_kind_names[(*e)->kind]);
  return NULL;
}

lv_status lv_params_set_params_list(lv_params *p, const char *dotted, lv_params **items, int n) {
  LV_ASSERTF(n >= 0 && (n == 0 || items), "lv_params_set_params_list(%s): bad items", dotted);
  for (int i = 0; i < n; i++) LV_ASSERTF(items[i], "lv_params_set_params_list(%s): item %d is NULL", dotted, i);
  lv_pentry *e = NULL;
  lv_status s = mutable_list(p, dotted, &e);
  if (s) {
    for (int i = 0; i < n; i++) lv_params_free(items[i]);
    return s;
  }
  lv_params_entry_clear_items(e);
  for (int i = 0; i < n; i++) lv_params_entry_append(e, items[i]);
  return NULL;
}

lv_status lv_params_params_list_append(lv_params *p, const char *dotted, lv_params *item) {
  LV_ASSERTF(item, "lv_params_params_list_append(%s): NULL item", dotted);
  lv_pentry *e = NULL;
  lv_status s = mutable_list(p, dotted, &e);
  if (s) {
    lv_params_free(item);
    return s;
  }
  lv_params_entry_append(e, item);
  return NULL;
}

/* ---- registry ---- */

typedef struct {
  char *name;
  lv_params_ctor ctor;
} reg_entry;

static reg_entry *g_reg;
static int g_nreg, g_capreg;

void lv_registry_add(const char *cls, lv_params_ctor ctor) {
  LV_ASSERTF(cls && *cls && ctor, "lv_registry_add needs a class name and a ctor");
  LV_ASSERTF(!lv_registry_find(cls), "class %s registered twice", cls);
  if (g_nreg == g_capreg) {
    int cap = g_capreg ? 2 * g_capreg : 32;
    reg_entry *r = realloc(g_reg, sizeof(reg_entry) * (size_t)cap);
    LV_ASSERTF(r, "out of memory growing the class registry");
    g_reg = r;
    g_capreg = cap;
  }
  g_reg[g_nreg].name = lv_params_xstrdup(cls);
  g_reg[g_nreg].ctor = ctor;
  g_nreg++;
}

lv_params_ctor lv_registry_find(const char *cls) {
  for (int i = 0; i < g_nreg; i++)
    if (strcmp(g_reg[i].name, cls) == 0) return g_reg[i].ctor;
  return NULL;
}

int lv_registry_names(const char **out, int max) {
  const char **all = lv_params_xmalloc(sizeof(char *) * (size_t)(g_nreg + 1));
  for (int i = 0; i < g_nreg; i++) all[i] = g_reg[i].name;
  qsort(all, (size_t)g_nreg, sizeof(char *), cmp_str);
  int n = g_nreg < max ? g_nreg : max;
  for (int i = 0; i < n; i++) out[i] = all[i];
  free(all);
  return n;
}

lv_status lv_registry_instantiate(const char *cls, lv_params **out) {
  lv_params_ctor ctor = lv_registry_find(cls);
  if (!ctor) {
    const char **all = lv_params_xmalloc(sizeof(char *) * (size_t)(g_nreg + 1));
    const char **sim = lv_params_xmalloc(sizeof(char *) * (size_t)(g_nreg + 1));
    int n = lv_registry_names(all, g_nreg);
    int k = lv_similar_names(cls, all, n, sim, n);
    lv_pbuf b = {0};
    lv_pbuf_addf(&b, "unknown class \"%s\"", cls);
    const char **list = k ? sim : all;
    int m = k ? k : n;
    lv_pbuf_addf(&b, k ? " (did you mean: [" : " (registered classes: [");
    for (int i = 0; i < m; i++) lv_pbuf_addf(&b, "%s%s", i ? "," : "", list[i]);
    lv_pbuf_addf(&b, "])");
    lv_status s = lv_status_make(LV_ERR_NOT_FOUND, "%s", b.s);
    free(b.s);
    free(all);
    free(sim);
    return s;
  }
  lv_params *p = ctor();
  LV_ASSERTF(p, "ctor of class %s returned NULL", cls);
  lv_pentry *e = lv_params_entry(p, "cls");
  LV_ASSERTF(e && e->kind == LV_PV_STRING, "params of class %s have no string key `cls` (use lv_params_new_cls)",
             cls);
  /* A subclass ctor starting from its base's params may leave the base's name; the
   * registered name is the truth. */
  lv_pvalue_free(e->val);
  e->val = lv_pvalue_string(cls);
  *out = p;
  return NULL;
}

lv_status lv_params_replace_with_class(lv_params *t, const char *cls) {
  lv_params *fresh;
  LV_TRY(lv_registry_instantiate(cls, &fresh));
  params_clear(t);
  *t = *fresh;
  free(fresh);
  return NULL;
}

lv_status lv_params_set_class(lv_params *p, const char *dotted, const char *cls) {
  LV_ASSERT(p && dotted && cls);
  if (!*dotted) {
    if (p->frozen) return frozen_error("cls");
    lv_pentry *c = lv_params_entry(p, "cls");
    if (!c) return unknown_key(p, "cls", 3, "cls");
    if (c->kind == LV_PV_STRING && c->val && strcmp(c->val->u.s, cls) == 0) return NULL;
    return lv_status_wrap(lv_params_replace_with_class(p, cls), "cls");
  }
  lv_params *parent;
  lv_pentry *e;
  int index;
  LV_TRY(lv_params_resolve_slot(p, dotted, &parent, &e, &index));
  if (index >= 0) {
    if (p->frozen || parent->frozen || (index < e->nitems && e->items[index]->frozen)) return frozen_error(dotted);
    if (index < e->nitems) {
      lv_pentry *c = lv_params_entry(e->items[index], "cls");
      if (c && c->kind == LV_PV_STRING && c->val && strcmp(c->val->u.s, cls) == 0) return NULL;
      return lv_status_wrap(lv_params_replace_with_class(e->items[index], cls), "%s.cls", dotted);
    }
    lv_params *fresh;
    LV_TRY(lv_status_wrap(lv_registry_instantiate(cls, &fresh), "%s.cls", dotted));
    lv_params_entry_append(e, fresh);
    return NULL;
  }
  if (e->kind != LV_PV_PARAMS)
    return lv_status_make(LV_ERR_INVALID, "%s.cls: %s is of type %s, not a nested params", dotted, dotted,
                          lv_pv_kind_names[e->kind]);
  if (p->frozen || parent->frozen || (e->child && e->child->frozen)) return frozen_error(dotted);
  if (!e->child) {
    lv_params *fresh;
    LV_TRY(lv_status_wrap(lv_registry_instantiate(cls, &fresh), "%s.cls", dotted));
    e->child = fresh;
    return NULL;
  }
  lv_pentry *c = lv_params_entry(e->child, "cls");
  if (!c) {
    char *shown = NULL;
    LV_ASSERT(asprintf(&shown, "%s.cls", dotted) >= 0);
    lv_status s = unknown_key(e->child, shown, strlen(shown), "cls");
    free(shown);
    return s;
  }
  if (c->kind == LV_PV_STRING && c->val && strcmp(c->val->u.s, cls) == 0) return NULL;
  return lv_status_wrap(lv_params_replace_with_class(e->child, cls), "%s.cls", dotted);
}
