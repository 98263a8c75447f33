/* libFuzzer target for the params text parser (Lingvo's FromText: --model_params_override
 * and --model_params_file_override, Python list literals). Every input must give a clean
 * error or a tree whose ToText loads back into a copy of itself unchanged; never a
 * crash, a hang or unbounded recursion. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_params_tree.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_register_classes();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = 0; /* a NUL inside ends the text, as the override file loader refuses them */
  lv_params *p = fuzz_root();
  lv_status s = lv_params_from_text(p, text, "fuzz");
  if (s) {
    if (!lv_status_msg(s) || !*lv_status_msg(s)) abort();
    lv_status_free(s);
  } else {
    /* ToText of the result loads back into a copy of it and writes the same text. */
    char *t1 = lv_params_to_text(p);
    lv_params *q = lv_params_copy(p);
    lv_status s2 = lv_params_from_text(q, t1, "round trip");
    if (s2) {
      lv_status_free(s2);
      abort();
    }
    char *t2 = lv_params_to_text(q);
    if (strcmp(t1, t2) != 0) abort();
    free(t1);
    free(t2);
    lv_params_free(q);
  }
  lv_params_free(p);
  free(text);
  return 0;
}
