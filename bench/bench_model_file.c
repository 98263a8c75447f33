/* Load time of a model file against the same model from its experiment and checkpoint:
 * lv_model_load_file(FILE) and lv_model_load(MODEL, LOGDIR, CHECKPOINT, OVERRIDE), each
 * REPEATS times, keeping the best (the machine may be shared). Prints
 * `file_ms <t> checkpoint_ms <t>` for bench/bench_model_file.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lingvoc.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds of one load (file != NULL: the model file), or -1 on an error (printed). */
static double load_once(const char *file, const lv_load_options *o) {
  lv_model *m = NULL;
  double t0 = now();
  lv_status s = file ? lv_model_load_file(file, NULL, &m) : lv_model_load(o, &m);
  double t = now() - t0;
  if (s) fprintf(stderr, "bench_model_file: %s\n", lv_status_msg(s));
  lv_status_free(s);
  lv_model_free(m);
  return s ? -1 : t;
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s REPEATS FILE MODEL LOGDIR CHECKPOINT OVERRIDE\n", argv[0]);
    return 2;
  }
  const int repeats = atoi(argv[1]);
  lv_load_options o;
  lv_load_options_init(&o);
  o.model = argv[3], o.logdir = argv[4], o.checkpoint = argv[5], o.params_override = argv[6];
  double best_file = 1e9, best_ckpt = 1e9;
  for (int r = 0; r < repeats; r++) {
    double a = load_once(argv[2], NULL), b = load_once(NULL, &o);
    if (a < 0 || b < 0) return 1;
    if (a < best_file) best_file = a;
    if (b < best_ckpt) best_ckpt = b;
  }
  printf("file_ms %.2f checkpoint_ms %.2f\n", 1e3 * best_file, 1e3 * best_ckpt);
  return 0;
}
