/* libFuzzer target for the other untrusted-file parsers of src/io: .npz archives and .npy
 * arrays, IDX files (gzip or plain), and the `checkpoint` state file. The first byte picks
 * the parser; the rest is the file. Every input must give a clean error or a result that
 * is consistent (array sizes match shapes), never a crash, a hang or an overrun. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/ckpt_state.h"
#include "io/dataset_files.h"
#include "fuzz_util.h"

static char g_dir[256];
static char g_file[300];
static char g_state[300];

static void cleanup(void) {
  unlink(g_file);
  unlink(g_state);
  rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_mkdtemp("fuzz_dataset", g_dir, sizeof g_dir);
  snprintf(g_file, sizeof g_file, "%s/input", g_dir);
  snprintf(g_state, sizeof g_state, "%s/checkpoint", g_dir);
  atexit(cleanup);
  return 0;
}

static void check_array(const lv_ndarray *a) {
  size_t n = lv_dtype_size(a->dtype);
  for (int i = 0; i < a->shape.rank; i++) n *= (size_t)a->shape.d[i];
  if (n != a->nbytes) abort();
  if (n) {
    volatile uint8_t x = ((const uint8_t *)a->data)[n - 1];
    (void)x;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int mode = data[0] % 4;
  data++;
  size--;
  lv_status s = NULL;
  if (mode == 0) {
    put_file(g_file, data, size);
    static const char *const names[] = {"x_train", "y_train"};
    lv_ndarray a[2];
    s = lv_npz_read(g_file, names, 2, a);
    if (!s)
      for (int i = 0; i < 2; i++) {
        check_array(&a[i]);
        lv_ndarray_free(&a[i]);
      }
  } else if (mode == 1) {
    put_file(g_file, data, size);
    lv_ndarray a;
    s = lv_idx_read(g_file, &a);
    if (!s) {
      check_array(&a);
      lv_ndarray_free(&a);
    }
  } else if (mode == 2) {
    lv_ndarray a;
    s = lv_npy_parse("fuzz.npy", data, size, &a);
    if (!s) {
      check_array(&a);
      lv_ndarray_free(&a);
    }
  } else {
    put_file(g_state, data, size);
    lv_ckpt_state st;
    bool exists;
    s = lv_ckpt_state_read(g_dir, &st, &exists);
    if (!s) {
      if (!exists) abort();
      for (int i = 0; i < st.num_paths; i++)
        if (!st.all_model_checkpoint_paths[i]) abort();
      lv_ckpt_state_free(&st);
    }
    unlink(g_state);
  }
  lv_status_free(s);
  return 0;
}
