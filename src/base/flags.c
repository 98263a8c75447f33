#include "base/flags.h"

#include <errno.h>
#include <stdio.h>
#include <sys/types.h>

#include "base/file.h"
#include "base/log.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64) return 99;
  int d[65][65];
  for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      d[i][j] = c;
    }
  return d[la][lb];
}

/* Lingvo's _KeyErrorString similarity: fraction of name's trigrams name[i:i+3] for
 * i in range(len(name)-3) found in the candidate, > 0.5. */
static bool trigram_similar(const char *name, const char *cand) {
  int n = (int)strlen(name);
  if (n - 3 <= 0) return false;
  int hits = 0;
  for (int i = 0; i < n - 3; i++) {
    char tri[4] = {name[i], name[i + 1], name[i + 2], 0};
    if (strstr(cand, tri)) hits++;
  }
  return (double)hits / (n - 3) > 0.5;
}

int lv_similar_names(const char *name, const char *const *candidates, int ncand,
                     const char **out, int max) {
  int k = 0;
  for (int i = 0; i < ncand && k < max; i++)
    if (trigram_similar(name, candidates[i]) || edit_distance(name, candidates[i]) <= 2)
      out[k++] = candidates[i];
  return k;
}

const lv_flag *lv_flags_find(const lv_flag *flags, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(flags[i].name, name) == 0) return &flags[i];
  return NULL;
}

static const char *type_word(lv_flag_type t) {
  switch (t) {
    case LV_FLAG_STRING: return "string";
    case LV_FLAG_INT: return "integer";
    case LV_FLAG_FLOAT: return "number";
    case LV_FLAG_BOOL: return "bool";
    default: return "?";
  }
}

void lv_flags_print_help(FILE *out, const char *usage, const lv_flag *flags, int n) {
  if (usage) fprintf(out, "%s\nFlags:\n", usage);
  for (int i = 0; i < n; i++) {
    const lv_flag *f = &flags[i];
    char def[256];
    switch (f->type) {
      case LV_FLAG_STRING: {
        const char *v = *(const char **)f->ptr;
        snprintf(def, sizeof def, "\"%s\"", v ? v : "");
        break;
      }
      case LV_FLAG_INT: snprintf(def, sizeof def, "%lld", (long long)*(int64_t *)f->ptr); break;
      case LV_FLAG_FLOAT: snprintf(def, sizeof def, "%g", *(double *)f->ptr); break;
      case LV_FLAG_BOOL: snprintf(def, sizeof def, "%s", *(bool *)f->ptr ? "true" : "false"); break;
      default: def[0] = 0;
    }
    fprintf(out, "  --%s (%s; default: %s)\n      %s\n", f->name, type_word(f->type), def, f->help);
  }
}

static lv_status unknown_flag(const lv_flag *flags, int n, const char *name) {
  const char *names[256], *sim[8];
  int m = n < 256 ? n : 256;
  for (int i = 0; i < m; i++) names[i] = flags[i].name;
  int k = lv_similar_names(name, names, m, sim, 8);
  char hint[512] = "";
  if (k > 0) {
    strcat(hint, " (did you mean:");
    for (int i = 0; i < k; i++) {
      strncat(hint, " --", sizeof hint - strlen(hint) - 1);
      strncat(hint, sim[i], sizeof hint - strlen(hint) - 1);
    }
    strncat(hint, "?)", sizeof hint - strlen(hint) - 1);
  }
  return lv_status_make(LV_ERR_INVALID, "unknown flag --%s%s; run with --help for the list", name,
                        hint);
}

static lv_status set_value(lv_flag *f, const char *v) {
  char *end = NULL;
  errno = 0;
  switch (f->type) {
    case LV_FLAG_STRING: *(const char **)f->ptr = v; break;
    case LV_FLAG_INT: {
      long long x = strtoll(v, &end, 10);
      if (!*v || *end || errno)
        return lv_status_make(LV_ERR_INVALID, "flag --%s expects an integer, got \"%s\"", f->name, v);
      *(int64_t *)f->ptr = x;
      break;
    }
    case LV_FLAG_FLOAT: {
      double x = strtod(v, &end);
      if (!*v || *end || errno || !isfinite(x))
        return lv_status_make(LV_ERR_INVALID, "flag --%s expects a number, got \"%s\"", f->name, v);
      *(double *)f->ptr = x;
      break;
    }
    case LV_FLAG_BOOL:
      if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "True")) *(bool *)f->ptr = true;
      else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "False")) *(bool *)f->ptr = false;
      else
        return lv_status_make(LV_ERR_INVALID, "flag --%s expects true or false, got \"%s\"", f->name, v);
      break;
    default: LV_ASSERT(0);
  }
  f->set = true;
  return NULL;
}

/* absl's own flags, understood by every executable (listed by --helpfull). */
static int64_t g_v;
static const char *g_vmodule = "", *g_flagfile = "";
static bool g_logtostderr, g_alsologtostderr, g_helpshort, g_helpfull;
static lv_flag g_absl[] = {
    LV_FLAG_I64("v", &g_v, "Verbose logging: lines logged at verbosity n <= v are printed (absl's --v; 0 = none)."),
    LV_FLAG_STR("vmodule", &g_vmodule, "Per-module verbosity overriding --v: comma-separated <glob>=<level>, the module being a source file's name without extension, e.g. trainer=2,follower=1."),
    LV_FLAG_BOOL("logtostderr", &g_logtostderr, "Log to stderr. lingvoc always does and writes no log files, so this and --alsologtostderr change nothing."),
    LV_FLAG_BOOL("alsologtostderr", &g_alsologtostderr, "Also log to stderr (lingvoc always does; see --logtostderr)."),
    LV_FLAG_STR("flagfile", &g_flagfile, "Read flags from this file: one --flag=value per line; blank lines and lines starting with # or // are skipped; a flagfile may name another."),
    LV_FLAG_BOOL("helpshort", &g_helpshort, "Print this program's flags and exit (same as --help)."),
    LV_FLAG_BOOL("helpfull", &g_helpfull, "Print every flag, absl's logging and flagfile flags included, and exit."),
};
#define N_ABSL ((int)(sizeof g_absl / sizeof g_absl[0]))

/* Strings read from flagfiles live as long as the process (string flags point at them). */
static char **g_kept;
static size_t g_nkept;
static char *keep(char *str) {
  char **k = realloc(g_kept, (g_nkept + 1) * sizeof *k);
  LV_ASSERT(k);
  g_kept = k;
  g_kept[g_nkept++] = str;
  return str;
}

typedef struct {
  lv_flag *flags;
  int n;
  const char *usage;
  int help; /* 0 none, 1 short, 2 full */
} parse_ctx;

static lv_status parse_list(parse_ctx *pc, int argc, char **argv, int first, const char *file, const int *lines,
                            int depth);

static lv_status read_flagfile(parse_ctx *pc, const char *path, int depth) {
  if (depth > 8) return lv_status_make(LV_ERR_INVALID, "--flagfile=%s: flagfiles nest more than 8 deep", path);
  /* A regular file of bounded size: a FIFO would block, /dev/zero never end. */
  if (!lv_file_exists(path))
    return lv_status_make(LV_ERR_NOT_FOUND, "--flagfile=%s: cannot open: %s", path, strerror(ENOENT));
  char *text = NULL;
  size_t text_len = 0;
  LV_TRY(lv_file_read_regular(path, LV_FILE_TEXT_MAX, "--flagfile", &text, &text_len));
  const char *nul = memchr(text, 0, text_len);
  if (nul) {
    int at_line = 1;
    for (const char *c = text; c < nul; c++) at_line += *c == '\n';
    free(text);
    return lv_status_make(LV_ERR_INVALID, "--flagfile=%s:%d: contains a NUL byte; expected text lines --flag=value",
                          path, at_line);
  }
  char **args = NULL;
  int *lines = NULL, na = 0, lineno = 0;
  for (char *line = text, *next; line && line < text + text_len; line = next) {
    next = memchr(line, '\n', (size_t)(text + text_len - line));
    if (next) *next++ = 0;
    lineno++;
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) line[--len] = 0;
    char *t = line;
    while (*t == ' ' || *t == '\t') t++;
    if (!*t || *t == '#' || !strncmp(t, "//", 2)) continue;
    char **a = realloc(args, (size_t)(na + 1) * sizeof *a);
    int *l = realloc(lines, (size_t)(na + 1) * sizeof *l);
    LV_ASSERT(a && l);
    args = a, lines = l;
    args[na] = keep(strdup(t));
    LV_ASSERT(args[na]);
    lines[na++] = lineno;
  }
  free(text);
  lv_status s = parse_list(pc, na, args, 0, path, lines, depth + 1);
  free(args);
  free(lines);
  return s;
}

static lv_status parse_one(parse_ctx *pc, int argc, char **argv, int *i, int depth) {
  const char *a = argv[*i];
  if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "--helpshort")) {
    if (!pc->help) pc->help = 1;
    return NULL;
  }
  if (!strcmp(a, "--helpfull")) {
    pc->help = 2;
    return NULL;
  }
  if (strncmp(a, "--", 2) != 0 && !(a[0] == '-' && a[1] && a[1] != '-'))
    return lv_status_make(LV_ERR_INVALID, "unexpected argument \"%s\": every option is a --flag=value; run with --help", a);
  const char *body = a + (a[1] == '-' ? 2 : 1);
  char name[256];
  const char *eq = strchr(body, '=');
  size_t nl = eq ? (size_t)(eq - body) : strlen(body);
  if (nl == 0 || nl >= sizeof name) return lv_status_make(LV_ERR_INVALID, "malformed flag \"%s\"", a);
  memcpy(name, body, nl);
  name[nl] = 0;
  lv_flag *f = (lv_flag *)lv_flags_find(pc->flags, pc->n, name);
  if (!f) f = (lv_flag *)lv_flags_find(g_absl, N_ABSL, name);
  if (!f && !eq && !strncmp(name, "no", 2)) {
    lv_flag *g = (lv_flag *)lv_flags_find(pc->flags, pc->n, name + 2);
    if (!g) g = (lv_flag *)lv_flags_find(g_absl, N_ABSL, name + 2);
    if (g && g->type == LV_FLAG_BOOL) {
      *(bool *)g->ptr = false;
      g->set = true;
      return NULL;
    }
  }
  if (!f) return unknown_flag(pc->flags, pc->n, name);
  const char *v;
  if (eq) v = eq + 1;
  else if (f->type == LV_FLAG_BOOL) v = "true";
  else if (*i + 1 < argc) v = argv[++*i];
  else return lv_status_make(LV_ERR_INVALID, "flag --%s needs a value", name);
  LV_TRY(set_value(f, v));
  if (f->ptr == &g_flagfile) return read_flagfile(pc, g_flagfile, depth);
  if (f->ptr == &g_vmodule) {
    const char *err = lv_log_set_vmodule(g_vmodule);
    if (err) return lv_status_make(LV_ERR_INVALID, "--vmodule=%s: %s", g_vmodule, err);
  }
  if (f->ptr == &g_v) lv_log_set_verbosity((int)g_v);
  if (f->ptr == &g_helpfull && g_helpfull) pc->help = 2;
  if (f->ptr == &g_helpshort && g_helpshort && !pc->help) pc->help = 1;
  return NULL;
}

static lv_status parse_list(parse_ctx *pc, int argc, char **argv, int first, const char *file, const int *lines,
                            int depth) {
  for (int i = first; i < argc; i++) {
    int at = i;
    lv_status s = parse_one(pc, argc, argv, &i, depth);
    if (s) return file ? lv_status_wrap(s, "%s:%d", file, lines[at]) : s;
  }
  return NULL;
}

lv_status lv_flags_parse(lv_flag *flags, int n, int argc, char **argv, const char *usage,
                         bool *help_shown) {
  *help_shown = false;
  parse_ctx pc = {flags, n, usage, 0};
  LV_TRY(parse_list(&pc, argc, argv, 1, NULL, NULL, 0));
  if (pc.help) {
    lv_flags_print_help(stdout, usage, flags, n);
    if (pc.help == 2) {
      fprintf(stdout, "\nabsl flags (every lingvoc program):\n");
      lv_flags_print_help(stdout, NULL, g_absl, N_ABSL);
    } else {
      fprintf(stdout, "\nRun with --helpfull for absl's logging and flagfile flags too (--v, --vmodule, --flagfile, ...).\n");
    }
    *help_shown = true;
  }
  return NULL;
}
