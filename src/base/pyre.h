/* Python regular expressions (Lingvo's re.search / re.match patterns in experiment
 * files: bprop_variable_filter, init_from_checkpoint_rules, ...) compiled as POSIX
 * extended ones. The common Python-only escapes are translated (\d, \D; \d inside a
 * bracket expression); constructs POSIX would read differently are refused with a reason
 * (lazy quantifiers, (?...) groups, \D inside brackets) rather than silently matching
 * something else. GNU's \w \W \s \S \b \B pass through as they mean the same. */
#ifndef LV_BASE_PYRE_H
#define LV_BASE_PYRE_H

#include <regex.h>
#include <stddef.h>

/* 0 on success (free with regfree); otherwise -1 and why (a short reason) is filled. */
int lv_pyre_compile(regex_t *re, const char *pattern, int cflags, char *why, size_t why_len);

#endif
