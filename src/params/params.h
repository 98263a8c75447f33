/* Lingvo's Params in C (reference/lingvo.md §3): an ordered tree of typed, described
 * values. Classes define their params in C starting from their base class's; an
 * experiment file or an override may only set keys that exist, with values of the
 * declared type. A params tree is frozen after loading.
 *
 * Values: int (int64), float (double), bool, string, list (of values, nested lists
 * allowed: filter_shapes = ([5,5,1,20],[5,5,20,50])), params (a nested tree), list of
 * params (Lingvo's p.schedules = [A.Params(), B.Params()], p.layers = [...]). Any scalar
 * or list may be None when defined as nullable (Lingvo's None defaults, e.g.
 * train.save_interval_steps); getters of a None value are programmer errors, check
 * lv_params_is_set first.
 *
 * Ownership: a tree owns its values and children. Getters return borrowed pointers,
 * valid until the tree changes or is freed. Getting an undefined key is a programmer
 * error (LV_ASSERT); setting one returns LV_ERR_INVALID with a did-you-mean. */
#ifndef LV_PARAMS_PARAMS_H
#define LV_PARAMS_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef enum {
  LV_PV_INT, LV_PV_FLOAT, LV_PV_BOOL, LV_PV_STRING, LV_PV_LIST, LV_PV_PARAMS, LV_PV_PARAMS_LIST,
  LV_PV_KIND_COUNT
} lv_pv_kind;
/* "int", "float", "bool", "string", "list", "params", "list of params". */
extern const char *const lv_pv_kind_names[LV_PV_KIND_COUNT];

typedef struct lv_params lv_params;
typedef struct lv_pvalue lv_pvalue;

/* ---- values (lists) ---- */
lv_pvalue *lv_pvalue_int(int64_t v);
lv_pvalue *lv_pvalue_float(double v);
lv_pvalue *lv_pvalue_bool(bool v);
lv_pvalue *lv_pvalue_string(const char *v);
lv_pvalue *lv_pvalue_list(void);
/* A list printed as a Python tuple, (1, 2); otherwise a list (lv_pvalue_kind LV_PV_LIST).
 * Equality tells tuples from lists, as Python does. */
lv_pvalue *lv_pvalue_tuple(void);
bool lv_pvalue_is_tuple(const lv_pvalue *list);
/* Appends item (taking ownership) to a list; returns list. item NULL appends None
 * (Python's None inside a list literal); lv_pvalue_at then returns NULL for it. */
lv_pvalue *lv_pvalue_append(lv_pvalue *list, lv_pvalue *item);
/* Convenience: a list of n ints / floats. */
lv_pvalue *lv_pvalue_ints(int n, const int64_t *v);
lv_pvalue *lv_pvalue_floats(int n, const double *v);
void lv_pvalue_free(lv_pvalue *v);
lv_pvalue *lv_pvalue_copy(const lv_pvalue *v); /* deep; NULL stays NULL */
bool lv_pvalue_equal(const lv_pvalue *a, const lv_pvalue *b); /* NULL (None) == NULL */
/* The value as ToText writes it: 3, 0.0001, True, 'abc', [1, (2, 3)]; caller frees. */
char *lv_pvalue_to_text(const lv_pvalue *v);
lv_pv_kind lv_pvalue_kind(const lv_pvalue *v);
int lv_pvalue_len(const lv_pvalue *list);
const lv_pvalue *lv_pvalue_at(const lv_pvalue *list, int i);
int64_t lv_pvalue_as_int(const lv_pvalue *v);
double lv_pvalue_as_float(const lv_pvalue *v); /* int or float */
bool lv_pvalue_as_bool(const lv_pvalue *v);
const char *lv_pvalue_as_string(const lv_pvalue *v);
/* Reads a list of ints into out (at most max items written); returns the list's length
 * (so a result > max means truncated), or -1 if v is not a list of ints (a None item
 * counts as not an int). to_floats accepts ints and floats. */
int lv_pvalue_to_ints(const lv_pvalue *v, int64_t *out, int max);
int lv_pvalue_to_floats(const lv_pvalue *v, double *out, int max);

/* ---- trees ---- */
lv_params *lv_params_new(void);
/* A tree whose first key is `cls` (string) = cls, as Lingvo's InstantiableParams(cls):
 * the start of every registered class's ctor. */
lv_params *lv_params_new_cls(const char *cls);
void lv_params_free(lv_params *p);
lv_params *lv_params_copy(const lv_params *p); /* deep; the copy is not frozen */
void lv_params_freeze(lv_params *p);            /* recursive */
bool lv_params_is_frozen(const lv_params *p);
bool lv_params_equal(const lv_params *a, const lv_params *b); /* values only */

/* Freeze is recursive (Lingvo's is shallow) and a copy is not frozen (Lingvo's stays
 * frozen): a loaded tree is read-only throughout, and copying is how to change it. */

/* Define: name must match ^[a-z_][a-z0-9_]*$ and be new (else LV_ASSERT: these are
 * programmer errors in C class definitions). desc is mandatory. */
void lv_params_define_int(lv_params *p, const char *name, int64_t def, const char *desc);
void lv_params_define_float(lv_params *p, const char *name, double def, const char *desc);
void lv_params_define_bool(lv_params *p, const char *name, bool def, const char *desc);
void lv_params_define_string(lv_params *p, const char *name, const char *def, const char *desc);
/* A list param; def may be NULL for an empty list; takes ownership of def. */
void lv_params_define_list(lv_params *p, const char *name, lv_pvalue *def, const char *desc);
/* A float whose default is def and that may be set to None (Lingvo's
 * LSTMCellSimple.cell_value_cap: 10.0, None turns the cap off). */
void lv_params_define_float_or_none(lv_params *p, const char *name, double def, const char *desc);
/* A nullable scalar of the given kind whose default is None. */
void lv_params_define_none(lv_params *p, const char *name, lv_pv_kind kind, const char *desc);
/* A nested tree (takes ownership of child, which may be NULL for "None" — a slot that
 * an experiment fills with `cls = "..."`); returns child. */
lv_params *lv_params_define_params(lv_params *p, const char *name, lv_params *child, const char *desc);
/* A list of nested trees (Lingvo's `p.schedules = [A.Params(), B.Params()]`): takes
 * ownership of items[0..n) (none may be NULL; the array itself stays the caller's); n may
 * be 0. Never None. An item is addressed in dotted keys as name[i], as Lingvo's Get does:
 * "lr_schedule.schedules[1].value". */
void lv_params_define_params_list(lv_params *p, const char *name, lv_params **items, int n,
                                  const char *desc);
/* Removes a key (Lingvo's Delete). */
void lv_params_delete(lv_params *p, const char *name);

/* Lookup, dotted ("task.train.learning_rate"). */
bool lv_params_has(const lv_params *p, const char *dotted);
bool lv_params_is_set(const lv_params *p, const char *dotted); /* defined and not None */
/* Whether a scalar or list key of p itself (not of its nested trees) was set after its
 * definition (an experiment file, an override, a class's code), even to its default:
 * what tells `vn: { global_vn = false; }` from a vn left alone. Copies keep it;
 * lv_params_equal ignores it. */
bool lv_params_any_assigned(const lv_params *p);
/* Every scalar or list key of `after` whose value equals the same key's in `before` takes
 * back `before`'s assigned mark: a params file that re-states values (another run's
 * --mode=inspect_params output) assigns only what it changes. */
void lv_params_keep_assigned_if_unchanged(lv_params *after, const lv_params *before);
lv_pv_kind lv_params_kind(const lv_params *p, const char *dotted);
const char *lv_params_desc(const lv_params *p, const char *dotted);
int64_t lv_params_int(const lv_params *p, const char *dotted);
double lv_params_float(const lv_params *p, const char *dotted); /* int params convert */
bool lv_params_bool(const lv_params *p, const char *dotted);
const char *lv_params_str(const lv_params *p, const char *dotted);
const lv_pvalue *lv_params_list(const lv_params *p, const char *dotted);
lv_params *lv_params_sub(const lv_params *p, const char *dotted); /* NULL if None */
/* A list of params: its length, and item i (0 <= i < length; "key[i]" also works with
 * lv_params_sub). Both are programmer errors (LV_ASSERT) on another kind. */
int lv_params_params_list_len(const lv_params *p, const char *dotted);
lv_params *lv_params_params_list_at(const lv_params *p, const char *dotted, int i);
/* Keys in definition order. */
int lv_params_num_keys(const lv_params *p);
const char *lv_params_key(const lv_params *p, int i);

/* Set, dotted. Errors (LV_ERR_INVALID): frozen; unknown key (with did-you-mean, Lingvo's
 * "<name> (did you mean: [a,b])"); wrong type (an int is accepted for a float). */
lv_status lv_params_set_int(lv_params *p, const char *dotted, int64_t v);
lv_status lv_params_set_float(lv_params *p, const char *dotted, double v);
lv_status lv_params_set_bool(lv_params *p, const char *dotted, bool v);
lv_status lv_params_set_string(lv_params *p, const char *dotted, const char *v);
lv_status lv_params_set_list(lv_params *p, const char *dotted, lv_pvalue *v); /* takes v */
lv_status lv_params_set_none(lv_params *p, const char *dotted);
/* Replaces a nested tree (takes child; NULL sets None). set_list and set_params free
 * what they were given when they fail. dotted may name an item, "key[i]": child (not
 * NULL) replaces item i, or is appended when i is the list's length. */
lv_status lv_params_set_params(lv_params *p, const char *dotted, lv_params *child);
/* Replaces a whole list of params (Lingvo's assignment): takes items[0..n) (freed on
 * failure; the array stays the caller's). */
lv_status lv_params_set_params_list(lv_params *p, const char *dotted, lv_params **items, int n);
/* Appends item (taken; freed on failure) to a list of params. */
lv_status lv_params_params_list_append(lv_params *p, const char *dotted, lv_params *item);
/* Points the nested tree at `dotted` ("" for p itself) at registered class cls: if its
 * `cls` already equals cls nothing changes; otherwise (or when the slot is None) the tree
 * is replaced by cls's defaults. What configs and overrides do on `... cls = "X"`.
 * For an item "key[i]" of a list of params, i may be the list's length: the class's
 * defaults are then appended (how FromText and experiment files grow a list). */
lv_status lv_params_set_class(lv_params *p, const char *dotted, const char *cls);
/* (lv_params_set_string(p, "task.cls", ...) is a plain set: only lv_params_set_class,
 * FromText and experiment files replace the tree.) */

/* ---- class registry ---- */
/* A registered class ("classifier.ModelV1", "FCLayer", "Adam", "PiecewiseConstantSchedule")
 * has a function building its default Params, which always include `cls` (string, the
 * class name). Setting `cls` of a nested tree in a config or override replaces that tree
 * with the class's defaults before the other keys of the group are applied. */
typedef lv_params *(*lv_params_ctor)(void);
void lv_registry_add(const char *cls, lv_params_ctor ctor);
/* NULL if unknown. */
lv_params_ctor lv_registry_find(const char *cls);
/* Fills out with the registered class names (sorted); returns how many were written
 * (at most max). */
int lv_registry_names(const char **out, int max);
/* ctor(cls) or an LV_ERR_NOT_FOUND error listing similar class names (all registered
 * names if none is similar). The result's `cls` is set to the registered name, so a
 * subclass ctor that starts from its base's params need not reset it. */
lv_status lv_registry_instantiate(const char *cls, lv_params **out);

/* ---- text (Lingvo's ToText / FromText) ---- */
/* "key : value" lines sorted by key, nested keys dotted; strings quoted as Lingvo
 * does; None as NoneType; lists as [1, 2] / (1, 2). A list of params is written as
 * Lingvo writes one: its items' keys under key[i] ("schedules[0].cls : 'Constant'",
 * sorted as strings, so [10] before [2]); an empty one as "key : []" (Lingvo writes
 * nothing for it, which could not be read back). Caller frees. */
char *lv_params_to_text(const lv_params *p);
/* Applies "key : value" lines (';' also separates lines, as --model_params_override
 * does). Every error names "<source>:<line>", the key, what was expected and what was
 * found; all errors are collected into one status, in line order.
 * Rules (reference §3.4): split on the first ':'; lines starting with '#' are comments;
 * a value opening with a quote runs to the matching unescaped quote, across lines if
 * need be (a ';' inside quotes is part of the value, where Lingvo would split it).
 * Values are read as the key's declared kind: bool is False only for '', False, false
 * (Lingvo's rule: "0" and "no" are True); int and float as Python's int()/float(); a
 * string unquoted (\ ' " undone) or taken literally; a list as a Python literal
 * ([..], (..), numbers, quoted strings, True/False/None; no dicts). NoneType sets a
 * nullable key or a params slot to None. `cls` lines apply first, outer trees before
 * inner ones (lv_params_set_class), so the sorted ToText order loads correctly; keys
 * under a cls that failed are skipped rather than reported against the old tree.
 * Lists of params: "key[i].sub : v" sets a key of item i; "key[i].cls : 'X'" changes
 * item i's class, or appends an item of class X when i is the list's length (cls lines
 * of one list apply in index order, so ToText's [10]-before-[2] order loads); items
 * are never dropped except by "key : []", which empties the list before any of its
 * cls lines apply. So ToText's output loads back exactly into a tree whose list is no
 * longer than the written one (e.g. the class's defaults); to replace a longer list
 * whole, start the text with "key : []". Other values for a list of params are errors. */
lv_status lv_params_from_text(lv_params *p, const char *text, const char *source);
/* How deep lists may nest in a value (FromText) or groups and lists in an experiment
 * file; deeper is an error naming the place. */
#define LV_PARAMS_MAX_NESTING 64
/* --model_params_override / --model_params_file_override (reference §1.1): either may be
 * NULL or ""; both given is an error (Lingvo's message). The text is applied with source
 * "<command line>", the file's contents with the file's path as source. Unlike Lingvo,
 * which skips a file that does not exist, a missing file is an LV_ERR_NOT_FOUND error:
 * a mistyped path must not silently train the unmodified model. */
lv_status lv_params_apply_overrides(lv_params *p, const char *override_text,
                                    const char *override_file);

/* ---- experiment files (libconfig) ---- */
/* Loads group `group` of the libconfig file `path` into p: `base = "Other";` applies
 * group Other (of the same file, recursively; cycles are errors) first; `cls = "X";` in
 * a nested group replaces that subtree with class X's defaults; a list of params is
 * written as a list of groups, each naming its class:
 *   schedules = ( { cls = "PiecewiseConstantSchedule"; boundaries = [100];
 *                   values = [1.0, 0.1]; },
 *                 { cls = "Constant"; value = 0.5; } );
 * and replaces the whole list (Lingvo's assignment semantics; also for a group that
 * inherits the list from its base: the base's items are dropped, not merged); `cls` is
 * required in every item and instantiates that class's defaults before the item's other
 * settings apply; `schedules = ();` empties the list. Errors inside an item name it as
 * dotted.key[index].subkey. Every other setting must
 * name an existing key with a compatible type. `base` is special only directly inside a
 * top-level group; `cls` is applied before the other settings of its group. libconfig
 * lists ( .. ) and arrays [ .. ] both become lists (never tuples); an int may set a float;
 * there is no way to write None. @include paths are relative to the including file.
 * Every error is listed as "path:line: dotted.key: expected ..., found ..." (unknown
 * keys: "path:line: unknown key dotted.key (did you mean: [..])", libconfig syntax errors
 * "path:line: syntax error"); the LV_ERR_INVALID status carries them all. A missing file
 * or group is LV_ERR_NOT_FOUND (listing the file's groups). */
lv_status lv_params_load_cfg(lv_params *p, const char *path, const char *group);
/* Group names in a file, in file order (for "unknown model, known models are ...").
 * *names is one allocation (a NULL-terminated pointer array followed by the strings):
 * the caller releases everything with free(*names). */
lv_status lv_params_cfg_groups(const char *path, char ***names, int *count);

#endif
