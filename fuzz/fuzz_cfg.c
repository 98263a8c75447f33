/* libFuzzer target for the experiment-file loader (libconfig, base chains, cls
 * replacement, lists of params, the integer-range and nesting scan). The input is written
 * as main.cfg; after a "\n@@@\n" separator, the rest is part.cfg, which main.cfg may
 * @include. Every group of the file is loaded into a fresh tree: each must give a clean
 * error or a tree that ToText can write; never a crash, a hang or unbounded recursion. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_params_tree.h"
#include "fuzz_util.h"

static char g_dir[256], g_main[300], g_part[300];

static void cleanup(void) {
  unlink(g_main);
  unlink(g_part);
  rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_register_classes();
  fuzz_mkdtemp("fuzz_cfg", g_dir, sizeof g_dir);
  snprintf(g_main, sizeof g_main, "%s/main.cfg", g_dir);
  snprintf(g_part, sizeof g_part, "%s/part.cfg", g_dir);
  atexit(cleanup);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char sep[] = "\n@@@\n";
  const uint8_t *cut = NULL;
  for (size_t i = 0; i + sizeof sep - 1 <= size && !cut; i++)
    if (!memcmp(data + i, sep, sizeof sep - 1)) cut = data + i;
  size_t main_len = cut ? (size_t)(cut - data) : size;
  put_file(g_main, data, main_len);
  if (cut) put_file(g_part, cut + sizeof sep - 1, size - main_len - (sizeof sep - 1));
  else unlink(g_part);
  char **groups = NULL;
  int n = 0;
  lv_status s = lv_params_cfg_groups(g_main, &groups, &n);
  if (s) {
    lv_status_free(s);
    return 0;
  }
  for (int i = 0; i < n && i < 8; i++) {
    lv_params *p = fuzz_root();
    s = lv_params_load_cfg(p, g_main, groups[i]);
    if (s) {
      lv_status_free(s);
    } else {
      char *t = lv_params_to_text(p);
      free(t);
    }
    lv_params_free(p);
  }
  free(groups);
  return 0;
}
