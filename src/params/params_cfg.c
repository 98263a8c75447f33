/* libconfig experiment files: group G of a file sets keys of a Params tree, after the
 * group named by its `base` (DESIGN.md "Experiment files"). Every problem is collected
 * with file:line before failing. */
#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "params/params_internal.h"

typedef struct {
  const char *path;
  config_setting_t *root;
  lv_params *p;
  lv_perrs errs;
  const char *stack[64]; /* groups being applied, outermost first: finds base cycles */
  int depth;
} cfg_ctx;

static const char *src_file(const cfg_ctx *c, const config_setting_t *s) {
  const char *f = config_setting_source_file(s);
  return f ? f : c->path;
}

static int src_line(const config_setting_t *s) { return (int)config_setting_source_line(s); }

static void add_err(cfg_ctx *c, const config_setting_t *s, lv_status st) {
  lv_perrs_add_status(&c->errs, src_file(c, s), src_line(s), st);
}

static char *join_key(const char *prefix, const char *name) {
  char *k = NULL;
  LV_ASSERT(asprintf(&k, "%s%s%s", prefix, *prefix ? "." : "", name) >= 0);
  return k;
}

/* Converts a scalar, array or list setting; NULL with *err set on a group inside. */
static lv_pvalue *setting_value(const config_setting_t *s, const char **err) {
  switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return lv_pvalue_int(config_setting_get_int64(s));
    case CONFIG_TYPE_FLOAT: return lv_pvalue_float(config_setting_get_float(s));
    case CONFIG_TYPE_BOOL: return lv_pvalue_bool(config_setting_get_bool(s));
    case CONFIG_TYPE_STRING: return lv_pvalue_string(config_setting_get_string(s));
    case CONFIG_TYPE_ARRAY:
    case CONFIG_TYPE_LIST: {
      /* Both ( ... ) and [ ... ] are lists: libconfig needs ( ) to nest, so it says
       * nothing about Python's list/tuple distinction. */
      lv_pvalue *l = lv_pvalue_list();
      int n = config_setting_length(s);
      for (int i = 0; i < n; i++) {
        lv_pvalue *x = setting_value(config_setting_get_elem(s, (unsigned)i), err);
        if (!x) {
          lv_pvalue_free(l);
          return NULL;
        }
        lv_pvalue_append(l, x);
      }
      return l;
    }
    default: *err = "a group { ... } inside a list (lists hold numbers, strings, bools and lists)"; return NULL;
  }
}

static void describe_setting(lv_pbuf *b, const config_setting_t *s) {
  if (config_setting_type(s) == CONFIG_TYPE_GROUP) {
    lv_pbuf_addf(b, "a group { ... }");
    return;
  }
  const char *err = NULL;
  lv_pvalue *v = setting_value(s, &err);
  if (v) lv_pvalue_describe(b, v);
  else lv_pbuf_addf(b, "%s", err);
  lv_pvalue_free(v);
}

static void apply_settings(cfg_ctx *c, config_setting_t *g, const char *prefix, bool top);

static void apply_group_setting(cfg_ctx *c, config_setting_t *s, const char *key) {
  lv_pentry *e;
  lv_status st = lv_params_resolve(c->p, key, &e);
  if (st) {
    add_err(c, s, st);
    return;
  }
  if (e->kind != LV_PV_PARAMS) {
    add_err(c, s, lv_status_make(LV_ERR_INVALID, "%s: expected %s, found a group { ... }%s", key,
                                 lv_pv_kind_names[e->kind],
                                 e->kind == LV_PV_PARAMS_LIST ? " (write a list of groups: ( { cls = ...; }, ... ))"
                                                              : ""));
    return;
  }
  if (!e->child && !config_setting_get_member(s, "cls")) {
    add_err(c, s, lv_status_make(LV_ERR_INVALID,
                                 "%s: is None (no class yet): the group needs cls = \"<registered class>\";", key));
    return;
  }
  apply_settings(c, s, key, false);
}

/* `key = ( { cls = "A"; ... }, { cls = "B"; ... } );` for a list of params e: replaces
 * the whole list; item i is instantiated from its cls, then its other settings apply
 * under key[i]. */
static void apply_params_list_setting(cfg_ctx *c, config_setting_t *s, const char *key, lv_pentry *e) {
  int t = config_setting_type(s);
  if (t != CONFIG_TYPE_LIST && t != CONFIG_TYPE_ARRAY) {
    lv_pbuf b = {0};
    describe_setting(&b, s);
    add_err(c, s, lv_status_make(LV_ERR_INVALID,
                                 "%s: expected a list of params, written ( { cls = \"<class>\"; ... }, ... ), found %s",
                                 key, b.s));
    free(b.s);
    return;
  }
  lv_params_entry_clear_items(e);
  int n = config_setting_length(s);
  for (int i = 0; i < n; i++) {
    config_setting_t *g = config_setting_get_elem(s, (unsigned)i);
    char *ik = NULL;
    LV_ASSERT(asprintf(&ik, "%s[%d]", key, i) >= 0);
    lv_status st = NULL;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
      lv_pbuf b = {0};
      describe_setting(&b, g);
      st = lv_status_make(LV_ERR_INVALID, "%s: expected a group { cls = \"<class>\"; ... }, found %s", ik, b.s);
      free(b.s);
    } else if (!config_setting_get_member(g, "cls")) {
      st = lv_status_make(LV_ERR_INVALID, "%s: an item of a list of params needs cls = \"<registered class>\";", ik);
    }
    if (st) {
      add_err(c, g, st);
      /* A placeholder keeps the later items at their indices, so their errors (if
       * any) are their own. */
      lv_params_entry_append(e, lv_params_new());
    } else {
      int before = e->nitems;
      apply_settings(c, g, ik, false);
      if (e->nitems == before) lv_params_entry_append(e, lv_params_new()); /* its cls failed */
    }
    free(ik);
  }
}

static void apply_scalar_setting(cfg_ctx *c, config_setting_t *s, const char *key) {
  lv_pentry *e;
  lv_status st = lv_params_resolve_mutable(c->p, key, &e);
  if (st) {
    add_err(c, s, st);
    return;
  }
  if (e->kind == LV_PV_PARAMS_LIST) {
    apply_params_list_setting(c, s, key, e);
    return;
  }
  if (e->kind == LV_PV_PARAMS) {
    lv_pbuf b = {0};
    describe_setting(&b, s);
    add_err(c, s, lv_status_make(LV_ERR_INVALID, "%s: expected a group { ... } (nested params), found %s", key, b.s));
    free(b.s);
    return;
  }
  const char *err = NULL;
  lv_pvalue *v = setting_value(s, &err);
  if (!v) {
    add_err(c, s, lv_status_make(LV_ERR_INVALID, "%s: expected %s, found %s", key, lv_pv_kind_names[e->kind], err));
    return;
  }
  add_err(c, s, lv_params_entry_set(e, key, v));
}

/* The settings of one group at tree path prefix: `cls` first (it may replace the whole
 * subtree), then the rest in file order. */
static void apply_settings(cfg_ctx *c, config_setting_t *g, const char *prefix, bool top) {
  config_setting_t *cls = config_setting_get_member(g, "cls");
  if (cls) {
    char *key = join_key(prefix, "cls");
    lv_status st = NULL;
    if (config_setting_type(cls) != CONFIG_TYPE_STRING) {
      lv_pbuf b = {0};
      describe_setting(&b, cls);
      st = lv_status_make(LV_ERR_INVALID, "%s: expected string (a registered class name), found %s", key, b.s);
      free(b.s);
    } else {
      st = lv_params_set_class(c->p, prefix, config_setting_get_string(cls));
    }
    free(key);
    if (st) {
      /* The rest of the group was written for that class: checking it against the old
       * tree would only bury the real error under follow-on ones. */
      add_err(c, cls, st);
      return;
    }
  }
  int n = config_setting_length(g);
  for (int i = 0; i < n; i++) {
    config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
    const char *name = config_setting_name(s);
    if (!strcmp(name, "cls") || (top && !strcmp(name, "base"))) continue;
    char *key = join_key(prefix, name);
    if (config_setting_type(s) == CONFIG_TYPE_GROUP) apply_group_setting(c, s, key);
    else apply_scalar_setting(c, s, key);
    free(key);
  }
}

static void group_names(config_setting_t *root, lv_pbuf *b) {
  int n = config_setting_length(root), k = 0;
  for (int i = 0; i < n; i++) {
    config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
    if (config_setting_type(s) != CONFIG_TYPE_GROUP) continue;
    lv_pbuf_addf(b, "%s%s", k++ ? ", " : "", config_setting_name(s));
  }
}

static void apply_top_group(cfg_ctx *c, config_setting_t *g) {
  const char *name = config_setting_name(g);
  if (c->depth == (int)LV_ARRAY_LEN(c->stack)) {
    add_err(c, g, lv_status_make(LV_ERR_INVALID, "%s: base chain deeper than %d groups", name, c->depth));
    return;
  }
  c->stack[c->depth++] = name;
  config_setting_t *base = config_setting_get_member(g, "base");
  if (base) {
    if (config_setting_type(base) != CONFIG_TYPE_STRING) {
      lv_pbuf b = {0};
      describe_setting(&b, base);
      add_err(c, base, lv_status_make(LV_ERR_INVALID, "base: expected string (a group name), found %s", b.s));
      free(b.s);
    } else {
      const char *bn = config_setting_get_string(base);
      config_setting_t *bg = config_setting_get_member(c->root, bn);
      int cycle_at = -1;
      for (int i = 0; i < c->depth; i++)
        if (!strcmp(c->stack[i], bn)) cycle_at = i;
      if (cycle_at >= 0) {
        lv_pbuf b = {0};
        for (int i = cycle_at; i < c->depth; i++) lv_pbuf_addf(&b, "%s -> ", c->stack[i]);
        lv_pbuf_addf(&b, "%s", bn);
        add_err(c, base, lv_status_make(LV_ERR_INVALID, "base = \"%s\" makes a cycle: %s", bn, b.s));
        free(b.s);
      } else if (!bg || config_setting_type(bg) != CONFIG_TYPE_GROUP) {
        lv_pbuf b = {0};
        group_names(c->root, &b);
        add_err(c, base, lv_status_make(LV_ERR_INVALID, "base: no group \"%s\" in %s (groups: %s)", bn, c->path,
                                        b.s ? b.s : ""));
        free(b.s);
      } else {
        apply_top_group(c, bg);
      }
    }
  }
  apply_settings(c, g, "", true);
  c->depth--;
}

/* ---- a scan of the source before libconfig parses it ----
 * libconfig 1.5 keeps an integer written without L in 32 bits, silently wrapping
 * (5000000000 becomes 705032704), and its parser's stack runs out on deep nesting with
 * a bare "memory exhausted". The scan reports both with file:line, and reads every file
 * (@include'd ones too) as a capped regular file, so a FIFO or /dev/zero named as an
 * experiment file is an error instead of a hang. */

#define CFG_MAX_INCLUDE_DEPTH 10
#define CFG_MAX_INCLUDES 100 /* in all: files that include each other twice would be 2^depth */

typedef struct {
  const char *inc_dir; /* libconfig resolves every @include against the main file's dir */
  lv_perrs *errs;
  const char *open[CFG_MAX_INCLUDE_DEPTH + 1]; /* the files being scanned, outermost first */
  int nincludes;
} scan_ctx;

static bool cfg_name_start(char ch) { return isalpha((unsigned char)ch) || ch == '*'; }
static bool cfg_name_char(char ch) { return isalnum((unsigned char)ch) || ch == '-' || ch == '_' || ch == '*'; }

/* An integer literal [sign](digits | 0x hexdigits)[L[L]] at *pc: reports one that
 * libconfig would not keep exactly. Floats are skipped. */
static void scan_number(scan_ctx *sc, const char *path, int line, const char **pc) {
  const char *c = *pc, *start = c;
  if (*c == '+' || *c == '-') c++;
  bool hex = c[0] == '0' && (c[1] == 'x' || c[1] == 'X') && isxdigit((unsigned char)c[2]);
  const char *digits = hex ? c + 2 : c;
  c = digits;
  while (hex ? isxdigit((unsigned char)*c) : isdigit((unsigned char)*c)) c++;
  if (!hex && (*c == '.' || *c == 'e' || *c == 'E')) {
    while (isdigit((unsigned char)*c) || *c == '.' || *c == 'e' || *c == 'E' ||
           ((*c == '+' || *c == '-') && (c[-1] == 'e' || c[-1] == 'E')))
      c++;
    *pc = c;
    return;
  }
  const char *end = c;
  bool wide = *c == 'L';
  if (wide) c += c[1] == 'L' ? 2 : 1;
  *pc = c;
  int len = (int)(end - start);
  errno = 0;
  bool range;
  long long v = 0;
  if (hex) {
    unsigned long long u = strtoull(digits, NULL, 16);
    range = errno == ERANGE || u > (unsigned long long)INT64_MAX;
    v = (long long)u;
  } else {
    v = strtoll(start, NULL, 10);
    range = errno == ERANGE;
  }
  if (range) {
    lv_perrs_add(sc->errs, "%s:%d: integer %.*s is out of the 64-bit range", path, line, len, start);
  } else if (!wide && (v < INT32_MIN || v > INT32_MAX)) {
    lv_perrs_add(sc->errs, "%s:%d: integer %.*s does not fit in 32 bits (libconfig would read %d): write %.*sL "
                 "for a 64-bit integer", path, line, len, start, (int32_t)(uint32_t)(unsigned long long)v, len,
                 start);
  }
}

static void scan_file(scan_ctx *sc, const char *path, const char *text, int include_depth);

/* @include "name" at *pc (just after the @include word). */
static void scan_include(scan_ctx *sc, const char *path, int line, const char **pc, int include_depth) {
  const char *c = *pc;
  while (*c == ' ' || *c == '\t') c++;
  if (*c != '"') {
    *pc = c;
    return; /* libconfig reports the syntax error */
  }
  const char *q = ++c;
  while (*c && *c != '"' && *c != '\n') c++;
  if (*c != '"') {
    *pc = c;
    return;
  }
  char *name = lv_params_xstrndup(q, (size_t)(c - q));
  *pc = c + 1;
  char *full = NULL;
  LV_ASSERT(asprintf(&full, "%s%s%s", name[0] == '/' || !sc->inc_dir ? "" : sc->inc_dir,
                     name[0] == '/' || !sc->inc_dir ? "" : "/", name) >= 0);
  bool cycle = false;
  for (int i = 0; i <= include_depth; i++) cycle |= !strcmp(sc->open[i], full);
  if (cycle) {
    lv_perrs_add(sc->errs, "%s:%d: @include \"%s\" includes a file that is already being read", path, line, name);
  } else if (include_depth + 1 > CFG_MAX_INCLUDE_DEPTH) {
    lv_perrs_add(sc->errs, "%s:%d: @include nested more than %d deep", path, line, CFG_MAX_INCLUDE_DEPTH);
  } else if (++sc->nincludes > CFG_MAX_INCLUDES) {
    lv_perrs_add(sc->errs, "%s:%d: more than %d @include directives in all", path, line, CFG_MAX_INCLUDES);
  } else {
    char *data = NULL;
    size_t len = 0;
    lv_status st = lv_file_read_regular(full, LV_FILE_TEXT_MAX, "@include file", &data, &len);
    if (st) {
      lv_perrs_add(sc->errs, "%s:%d: %s", path, line, lv_status_msg(st));
      lv_status_free(st);
    } else {
      scan_file(sc, full, data, include_depth + 1);
      free(data);
    }
  }
  free(full);
  free(name);
}

static void scan_file(scan_ctx *sc, const char *path, const char *text, int include_depth) {
  sc->open[include_depth] = path;
  const char *c = text;
  int line = 1, depth = 0;
  while (*c) {
    char ch = *c;
    if (ch == '\n') {
      line++;
      c++;
    } else if (ch == '#' || (ch == '/' && c[1] == '/')) {
      while (*c && *c != '\n') c++;
    } else if (ch == '/' && c[1] == '*') {
      for (c += 2; *c && !(c[0] == '*' && c[1] == '/'); c++) line += *c == '\n';
      if (*c) c += 2;
    } else if (ch == '"') {
      for (c++; *c && *c != '"'; c++) {
        if (*c == '\\' && c[1]) c++;
        line += *c == '\n';
      }
      if (*c) c++;
    } else if (ch == '@') {
      c++;
      if (!strncmp(c, "include", 7) && !cfg_name_char(c[7])) {
        c += 7;
        scan_include(sc, path, line, &c, include_depth);
      }
    } else if (cfg_name_start(ch)) {
      while (cfg_name_char(*c)) c++;
    } else if (isdigit((unsigned char)ch) || ((ch == '-' || ch == '+' || ch == '.') &&
                                              (isdigit((unsigned char)c[1]) || c[1] == '.'))) {
      scan_number(sc, path, line, &c);
    } else if (ch == '{' || ch == '(' || ch == '[') {
      if (++depth > LV_PARAMS_MAX_NESTING) {
        lv_perrs_add(sc->errs, "%s:%d: groups and lists nested more than %d deep", path, line,
                     LV_PARAMS_MAX_NESTING);
        return; /* libconfig would only run out of parser stack further on */
      }
      c++;
    } else if (ch == '}' || ch == ')' || ch == ']') {
      if (depth > 0) depth--;
      c++;
    } else {
      c++;
    }
  }
}

static lv_status read_cfg(const char *path, config_t *cfg) {
  if (!lv_file_exists(path))
    return lv_status_make(LV_ERR_NOT_FOUND, "experiment file %s does not exist", path);
  char *text = NULL;
  size_t len = 0;
  LV_TRY(lv_file_read_regular(path, LV_FILE_TEXT_MAX, "experiment file", &text, &len));
  if (strlen(text) != len) {
    free(text);
    return lv_status_make(LV_ERR_INVALID, "experiment file %s contains a NUL byte; expected libconfig text", path);
  }
  /* @include "x.cfg" is relative to the including file, not to the working directory. */
  char *dir_copy = lv_params_xstrdup(path);
  char *dir = lv_params_xstrdup(dirname(dir_copy));
  free(dir_copy);
  lv_perrs errs = {0};
  scan_ctx sc = {.inc_dir = dir, .errs = &errs};
  scan_file(&sc, path, text, 0);
  lv_status s = lv_perrs_finish(&errs);
  if (s) {
    free(dir);
    free(text);
    return s;
  }
  config_init(cfg);
  config_set_include_dir(cfg, dir);
  free(dir);
  /* From the text already read: the file is read once, as the regular file checked. */
  int ok = config_read_string(cfg, text);
  free(text);
  if (ok != CONFIG_TRUE) {
    const char *f = config_error_file(cfg);
    if (config_error_type(cfg) == CONFIG_ERR_FILE_IO)
      s = lv_status_make(LV_ERR_INVALID, "%s: cannot read: %s", f ? f : path, config_error_text(cfg));
    else
      s = lv_status_make(LV_ERR_INVALID, "%s:%d: %s", f ? f : path, config_error_line(cfg), config_error_text(cfg));
    config_destroy(cfg);
    return s;
  }
  return NULL;
}

lv_status lv_params_load_cfg(lv_params *p, const char *path, const char *group) {
  LV_ASSERT(p && path && group);
  if (p->frozen) return lv_status_make(LV_ERR_INVALID, "%s: This Params instance is immutable", path);
  config_t cfg;
  LV_TRY(read_cfg(path, &cfg));
  cfg_ctx c = {.path = path, .root = config_root_setting(&cfg), .p = p};
  config_setting_t *g = config_setting_get_member(c.root, group);
  if (!g || config_setting_type(g) != CONFIG_TYPE_GROUP) {
    lv_pbuf b = {0};
    group_names(c.root, &b);
    lv_status s = lv_status_make(LV_ERR_NOT_FOUND, "%s: no group \"%s\"; groups in this file: [%s]", path, group,
                                 b.s ? b.s : "");
    free(b.s);
    config_destroy(&cfg);
    return s;
  }
  apply_top_group(&c, g);
  config_destroy(&cfg);
  return lv_perrs_finish(&c.errs);
}

lv_status lv_params_cfg_groups(const char *path, char ***names, int *count) {
  config_t cfg;
  LV_TRY(read_cfg(path, &cfg));
  config_setting_t *root = config_root_setting(&cfg);
  int n = config_setting_length(root), k = 0;
  size_t bytes = 0;
  for (int i = 0; i < n; i++) {
    config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
    if (config_setting_type(s) != CONFIG_TYPE_GROUP) continue;
    k++;
    bytes += strlen(config_setting_name(s)) + 1;
  }
  /* One block: the pointer array, then the strings, so one free() releases it all. */
  char **out = lv_params_xmalloc(sizeof(char *) * (size_t)(k + 1) + bytes);
  char *str = (char *)(out + k + 1);
  k = 0;
  for (int i = 0; i < n; i++) {
    config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
    if (config_setting_type(s) != CONFIG_TYPE_GROUP) continue;
    size_t len = strlen(config_setting_name(s)) + 1;
    memcpy(str, config_setting_name(s), len);
    out[k++] = str;
    str += len;
  }
  out[k] = NULL;
  config_destroy(&cfg);
  *names = out;
  *count = k;
  return NULL;
}
