/* Command-line flags in absl style, shared by every executable: --name=value or
 * --name value; booleans also --name / --noname. Unknown flags and stray positional
 * arguments are errors (with the closest known flag names); --help / --helpshort print
 * usage and the program's flags with their defaults, --helpfull adds absl's own flags,
 * which every program understands: --v=N and --vmodule=glob=N (verbose logging,
 * base/log.h), --logtostderr / --alsologtostderr (accepted: lingvoc always logs to stderr)
 * and --flagfile=FILE (one flag per line, # and // comments, nestable; errors name the
 * file and line). Defaults are whatever the variables hold before parsing. */
#ifndef LV_BASE_FLAGS_H
#define LV_BASE_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

typedef enum { LV_FLAG_STRING, LV_FLAG_INT, LV_FLAG_FLOAT, LV_FLAG_BOOL, LV_FLAG_TYPE_COUNT } lv_flag_type;

typedef struct lv_flag {
  const char *name;
  lv_flag_type type;
  void *ptr; /* const char ** / int64_t * / double * / bool * */
  const char *help;
  bool set;  /* filled in by lv_flags_parse: given on the command line */
} lv_flag;

#define LV_FLAG_STR(n, p, h) {(n), LV_FLAG_STRING, (p), (h), false}
#define LV_FLAG_I64(n, p, h) {(n), LV_FLAG_INT, (p), (h), false}
#define LV_FLAG_F64(n, p, h) {(n), LV_FLAG_FLOAT, (p), (h), false}
#define LV_FLAG_BOOL(n, p, h) {(n), LV_FLAG_BOOL, (p), (h), false}

/* Parses argv[1..]. On --help/-h prints help to stdout and sets *help_shown. Errors are
 * LV_ERR_INVALID with a message naming the flag and what was expected. */
lv_status lv_flags_parse(lv_flag *flags, int n, int argc, char **argv, const char *usage,
                         bool *help_shown);
/* usage may be NULL (the flag list only). */
void lv_flags_print_help(FILE *out, const char *usage, const lv_flag *flags, int n);
const lv_flag *lv_flags_find(const lv_flag *flags, int n, const char *name);

/* Similar-name suggestion shared with params: fills out with up to max names from
 * candidates that look like name (Lingvo's trigram rule, plus edit distance <= 2).
 * Returns how many were written. */
int lv_similar_names(const char *name, const char *const *candidates, int ncand,
                     const char **out, int max);

#endif
