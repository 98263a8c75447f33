/* src/base/pyre: Lingvo's Python regular expressions as POSIX extended ones. \d and \D
 * match what Python's do (glibc reads \d as the letter d); constructs POSIX would read
 * otherwise are refused with a reason; GNU's \w \s \b pass through. Each case is
 * re.search's answer for the pattern and the string, checked with Python 3. */
#include <check.h>
#include <regex.h>
#include <stdbool.h>
#include <string.h>

#include "check_util.h"

#include "base/pyre.h"

static bool search(const char *pattern, const char *s) {
  regex_t re;
  char why[160];
  ck_assert_msg(lv_pyre_compile(&re, pattern, REG_EXTENDED | REG_NOSUB, why, sizeof why) == 0, "%s: %s", pattern,
                why);
  bool hit = regexec(&re, s, 0, NULL, 0) == 0;
  regfree(&re);
  return hit;
}

static void refused(const char *pattern, const char *needle) {
  regex_t re;
  char why[160] = "";
  ck_assert_msg(lv_pyre_compile(&re, pattern, REG_EXTENDED, why, sizeof why) != 0, "%s compiled", pattern);
  ck_assert_msg(strstr(why, needle), "%s: '%s' lacks '%s'", pattern, why, needle);
}

START_TEST(test_python_escapes) {
  /* re.search(r'/L\d+/', 'lm/L12/w:0') matches; a literal d does not. */
  ck_assert(search("/L\\d+/", "lm/L12/w:0"));
  ck_assert(!search("/L\\d+/", "lm/Ldd/w:0"));
  ck_assert(search("emb_\\D", "emb_x:0"));
  ck_assert(!search("emb_\\D", "emb_0:0"));
  ck_assert(search("layer_[\\d_]+/", "layer_1_2/w:0"));
  ck_assert(!search("layer_[\\d_]+/", "layer_x/w:0"));
  ck_assert(search("\\w+/softmax", "lm/softmax/weight_0/var:0"));
  ck_assert(search("a\\sb", "a b"));
  ck_assert(search("^lm/rnns_\\d/wm/var:0$", "lm/rnns_1/wm/var:0"));
  ck_assert(search("w\\.x", "w.x"));
  ck_assert(!search("w\\.x", "wax"));
  ck_assert(search("(.*)/var", "a/b/var:0"));
}
END_TEST

START_TEST(test_refused) {
  refused("(?:a|b)", "(?...) group");
  refused("(?i)emb", "(?...) group");
  refused("a.*?b", "lazy quantifier");
  refused("a+?", "lazy quantifier");
  refused("[\\D]", "inside [...]");
  refused("\\Aemb", "no POSIX form");
  refused("(a)\\1", "no POSIX form");
  refused("((", "Unmatched ("); /* regcomp's own reason */
}
END_TEST

int main(void) {
  Suite *s = suite_create("pyre");
  TCase *tc = tcase_create("pyre");
  tcase_add_test(tc, test_python_escapes);
  tcase_add_test(tc, test_refused);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
