/* Internals shared by params.c (tree, registry), params_text.c (ToText/FromText) and
 * params_cfg.c (libconfig experiment files). Not for use outside src/params/. */
#ifndef LV_PARAMS_PARAMS_INTERNAL_H
#define LV_PARAMS_PARAMS_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "params/params.h"

struct lv_pvalue {
  lv_pv_kind kind; /* never LV_PV_PARAMS */
  union {
    int64_t i;
    double f;
    bool b;
    char *s;
    struct {
      lv_pvalue **items; /* an item may be NULL: None inside a list */
      int n, cap;
      bool tuple; /* printed (a, b) instead of [a, b], as Python keeps them apart */
    } list;
  } u;
};

typedef struct {
  char *name;
  char *desc;
  lv_pv_kind kind;
  bool nullable;     /* may hold None (defined with lv_params_define_none, or a params slot) */
  lv_pvalue *val;    /* scalars and lists; NULL means None */
  lv_params *child;  /* LV_PV_PARAMS; NULL means None */
  lv_params **items; /* LV_PV_PARAMS_LIST: nitems trees, none NULL */
  int nitems;
  bool assigned;     /* set after its definition (lv_params_entry_set), even to the same value */
} lv_pentry;

struct lv_params {
  lv_pentry *e;
  int n, cap;
  bool frozen;
};

/* Growable string. */
typedef struct {
  char *s;
  size_t len, cap;
} lv_pbuf;
void lv_pbuf_addf(lv_pbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lv_pbuf_addn(lv_pbuf *b, const char *s, size_t n);
/* Returns the string (never NULL); the buffer is reset. */
char *lv_pbuf_take(lv_pbuf *b);

/* Error collector: every problem found, in order, reported together (LV_ERR_INVALID). */
typedef struct {
  lv_pbuf b;
  int n;
} lv_perrs;
void lv_perrs_add(lv_perrs *el, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds "source:line: <msg of s>" and frees s; s NULL adds nothing. */
void lv_perrs_add_status(lv_perrs *el, const char *source, int line, lv_status s);
/* NULL if no error; otherwise one status listing them all; el is reset. */
lv_status lv_perrs_finish(lv_perrs *el);

void *lv_params_xmalloc(size_t n);
char *lv_params_xstrdup(const char *s);
char *lv_params_xstrndup(const char *s, size_t n);

lv_pentry *lv_params_entry(const lv_params *p, const char *name); /* top level, NULL if absent */

/* Walks all but the last component of dotted from p. On success *parent is the tree
 * holding the last component and *leaf points into dotted at it. Errors name the first
 * missing/None/non-params component with a did-you-mean. */
lv_status lv_params_walk(lv_params *p, const char *dotted, lv_params **parent, const char **leaf);
/* Like lv_params_walk, then finds the entry (unknown key -> did-you-mean error). */
lv_status lv_params_resolve(lv_params *p, const char *dotted, lv_pentry **entry);
/* Like lv_params_resolve, for a last component that may be a list item "name[i]": then
 * *index is i (checked against 0 <= i <= nitems: one past the end is allowed, for an
 * append) and *entry the list; otherwise *index is -1. *parent is the tree holding
 * the entry. */
lv_status lv_params_resolve_slot(lv_params *p, const char *dotted, lv_params **parent, lv_pentry **entry,
                                 int *index);
/* Appends item (taken) to list entry e. */
void lv_params_entry_append(lv_pentry *e, lv_params *item);
/* Empties list entry e. */
void lv_params_entry_clear_items(lv_pentry *e);
/* lv_params_resolve, plus an "immutable" error when the tree holding the key is frozen. */
lv_status lv_params_resolve_mutable(lv_params *p, const char *dotted, lv_pentry **entry);
/* "name (did you mean: [a,b])" or "name (keys are ['a', 'b'])" (Lingvo's _KeyErrorString),
 * candidates are p's keys. */
char *lv_params_key_error_string(const lv_params *p, const char *shown_name, const char *leaf);

/* Sets a resolved entry to v (taken; NULL = None) after checking the kind: an int is
 * converted for a float entry. Errors read "<dotted>: expected <kind>, found <...>". */
lv_status lv_params_entry_set(lv_pentry *e, const char *dotted, lv_pvalue *v);

/* Replaces the contents of tree t with class cls's defaults (t keeps its address). */
lv_status lv_params_replace_with_class(lv_params *t, const char *cls);

/* Python repr of a value (lists of strings use repr quoting, floats the shortest
 * round-trip digits); NULL prints None. Appends to b. */
void lv_pvalue_repr(lv_pbuf *b, const lv_pvalue *v);
/* Python repr of a double: 0.0001, 3.0, 1e-05, 1e+16, inf, nan. */
void lv_params_float_repr(char *out, size_t n, double v);
/* Short description for error messages: int 5, float 2.5, string "abc", a list. */
void lv_pvalue_describe(lv_pbuf *b, const lv_pvalue *v);

#endif
