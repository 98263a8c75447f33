/* NmtInput batch throughput, with and without the batcher thread (bench_input.sh).
 *
 *   bench_input rate PATTERN PREFETCH SECONDS
 *       training batches as fast as the caller takes them, for SECONDS of wall time after
 *       a warm-up (the shuffle buffer's first fill): batches/s, sentences/s, target and
 *       source tokens/s (unpadded), and the CPU seconds per batch of the whole process.
 *   bench_input consumer PATTERN PREFETCH STEP_MS STEPS
 *       a trainer that computes STEP_MS per step off the CPU (a sleep: a device step)
 *       and then asks for the next batch: the time the caller waits in train_batch.
 *   bench_input digest PATTERN
 *       one line per batch (digest) for a fixed step sequence with jumps and an eval
 *       pass; links against any lingvoc build (sets prefetch_batches only where the
 *       params have it), to compare builds.
 *   bench_input synth OUT N
 *       N synthetic MT records of Lingvo's layout (source/target lengths 3..80, ids <
 *       8000) into OUT-0000K-of-00004, for when the corpus packages are missing.
 *
 * Buckets are Lingvo's WmtEnDeTransformerBase training buckets (bounds 8..96, limits
 * 512..42), file_parallelism 16, file_buffer_size 10000, seed 301. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/log.h"
#include "../tests/batch_util.h"
#include "input/input.h"
#include "io/example.h"
#include "io/tfrecord.h"

static void die(lv_status s, const char *what) {
  if (!s) return;
  fprintf(stderr, "bench_input: %s: %s\n", what, lv_status_msg(s));
  exit(1);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
         1e-6 * (double)u.ru_stime.tv_usec;
}

static lv_input *make_input(const char *pattern, int prefetch, lv_params **pp) {
  lv_input_register_all();
  lv_params *p = lv_input_class_find("NmtInput")->params();
  static const int64_t bounds[15] = {8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96};
  static const int64_t limits[15] = {512, 409, 341, 292, 256, 204, 170, 146, 128, 102, 85, 73, 64, 51, 42};
  die(lv_params_set_string(p, "file_pattern", pattern), "file_pattern");
  die(lv_params_set_list(p, "bucket_upper_bound", lv_pvalue_ints(15, bounds)), "bounds");
  die(lv_params_set_list(p, "bucket_batch_limit", lv_pvalue_ints(15, limits)), "limits");
  die(lv_params_set_int(p, "file_parallelism", 16), "file_parallelism");
  die(lv_params_set_int(p, "file_buffer_size", 10000), "file_buffer_size");
  if (prefetch >= 0) die(lv_params_set_int(p, "prefetch_batches", prefetch), "prefetch_batches");
  lv_params_freeze(p);
  lv_input *in = NULL;
  die(lv_input_create(p, lv_input_no_shard(), &in), "create");
  *pp = p;
  return in;
}

static double unpadded(const lv_batch *b, const char *key) {
  const lv_tensor *t = lv_batch_get(b, key);
  double n = 0;
  for (int64_t i = 0; i < lv_tensor_numel(t); i++) n += 1.0 - lv_f32(t)[i];
  return n;
}

static int rate(const char *pattern, int prefetch, double seconds) {
  lv_params *p;
  lv_input *in = make_input(pattern, prefetch, &p);
  lv_batch b;
  lv_batch_init(&b);
  int64_t step = 0;
  for (; step < 20; step++) die(lv_input_train_batch(in, step, &b), "warm-up");
  double t0 = now(), c0 = cpu_seconds(), t = t0;
  int64_t batches = 0;
  double sents = 0, tgt = 0, src = 0;
  while (t - t0 < seconds) {
    die(lv_input_train_batch(in, step++, &b), "train_batch");
    batches++;
    sents += (double)b.size;
    tgt += unpadded(&b, "tgt.paddings");
    src += unpadded(&b, "src.paddings");
    t = now();
  }
  double wall = t - t0, cpu = cpu_seconds() - c0;
  printf("prefetch_batches=%d: %.0f batches/s, %.0f sentences/s, %.0f target tokens/s, %.0f source tokens/s "
         "(%lld batches in %.1f s; %.2f ms CPU per batch, %.0f sentences per batch)\n",
         prefetch, (double)batches / wall, sents / wall, tgt / wall, src / wall, (long long)batches, wall,
         1e3 * cpu / (double)batches, sents / (double)batches);
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int consumer(const char *pattern, int prefetch, double step_ms, int steps) {
  lv_params *p;
  lv_input *in = make_input(pattern, prefetch, &p);
  lv_batch b;
  lv_batch_init(&b);
  int64_t step = 0;
  for (; step < 20; step++) die(lv_input_train_batch(in, step, &b), "warm-up");
  double *wait = malloc(sizeof(double) * (size_t)steps), total = 0;
  double t_start = now();
  for (int i = 0; i < steps; i++) {
    struct timespec d = {(time_t)(step_ms / 1e3), (long)(fmod(step_ms, 1e3) * 1e6)};
    nanosleep(&d, NULL);
    double t0 = now();
    die(lv_input_train_batch(in, step++, &b), "train_batch");
    wait[i] = 1e3 * (now() - t0);
    total += wait[i];
  }
  double wall = now() - t_start;
  qsort(wait, (size_t)steps, sizeof(double), cmp_double);
  printf("prefetch_batches=%d, %.1f ms per step: the caller waited %.3f ms per step on average "
         "(median %.3f, p99 %.3f, max %.3f ms); %.1f steps/s\n",
         prefetch, step_ms, total / steps, wait[steps / 2], wait[(int)(0.99 * (steps - 1))], wait[steps - 1],
         steps / wall);
  free(wait);
  lv_input_destroy(in);
  lv_batch_free(&b);
  lv_params_free(p);
  return 0;
}

static int digest(const char *pattern) {
  static const int64_t steps[] = {0, 1, 2, 3, 4, 5, 9, 10, 11, 12, 3, 4, 4, 5, 30, 31, 32, 33};
  lv_input_register_all();
  lv_params *defaults = lv_input_class_find("NmtInput")->params();
  bool has_prefetch = lv_params_has(defaults, "prefetch_batches"); /* builds before the batcher thread lack it */
  lv_params_free(defaults);
  for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
    lv_params *p;
    lv_input *in = make_input(pattern, has_prefetch ? prefetch : -1, &p);
    lv_batch b;
    lv_batch_init(&b);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
      if (i == 8) {
        die(lv_input_reset(in), "reset");
        bool done = false;
        for (int k = 0; !done; k++) {
          die(lv_input_next_eval(in, &b, &done), "next_eval");
          if (!done) printf("eval %d %016llx\n", k, (unsigned long long)lv_test_batch_digest(&b));
        }
      }
      die(lv_input_train_batch(in, steps[i], &b), "train_batch");
      printf("step %lld %016llx\n", (long long)steps[i], (unsigned long long)lv_test_batch_digest(&b));
    }
    lv_input_destroy(in);
    lv_batch_free(&b);
    lv_params_free(p);
  }
  return 0;
}

static int synth(const char *out, int n) {
  lv_tfrecord_writer *w[4];
  for (int k = 0; k < 4; k++) {
    char path[4096];
    snprintf(path, sizeof path, "%s-%05d-of-00004", out, k);
    die(lv_tfrecord_writer_open(path, false, &w[k]), path);
  }
  uint64_t x = 88172645463325252ull;
  int64_t ids[128];
  float zeros[128], ones[128];
  for (int i = 0; i < 128; i++) zeros[i] = 0.f, ones[i] = 1.f;
  for (int i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int s = 3 + (int)(x % 78), t = 3 + (int)((x >> 20) % 78);
    lv_example *e = lv_example_new();
    for (int j = 0; j < s; j++) ids[j] = j == s - 1 ? 2 : 3 + (int64_t)((x >> (j % 40)) % 7997);
    lv_example_add_int64s(e, "source_id", s, ids);
    lv_example_add_floats(e, "source_padding", s, zeros);
    for (int j = 0; j < t; j++) ids[j] = j == 0 ? 1 : 3 + (int64_t)((x >> (j % 37)) % 7997);
    lv_example_add_int64s(e, "target_id", t, ids);
    lv_example_add_floats(e, "target_padding", t, zeros);
    ids[t - 1] = 2;
    lv_example_add_int64s(e, "target_label", t, ids);
    lv_example_add_floats(e, "target_weight", t, ones);
    uint8_t *data;
    size_t len;
    die(lv_example_serialize(e, &data, &len), "serialize");
    die(lv_tfrecord_writer_write(w[i % 4], data, len), "write");
    free(data);
    lv_example_free(e);
  }
  for (int k = 0; k < 4; k++) die(lv_tfrecord_writer_close(w[k]), "close");
  return 0;
}

int main(int argc, char **argv) {
  lv_log_set_level(LV_LOG_WARN);
  if (argc == 5 && !strcmp(argv[1], "rate")) return rate(argv[2], atoi(argv[3]), atof(argv[4]));
  if (argc == 6 && !strcmp(argv[1], "consumer"))
    return consumer(argv[2], atoi(argv[3]), atof(argv[4]), atoi(argv[5]));
  if (argc == 3 && !strcmp(argv[1], "digest")) return digest(argv[2]);
  if (argc == 4 && !strcmp(argv[1], "synth")) return synth(argv[2], atoi(argv[3]));
  fprintf(stderr,
          "usage: bench_input rate PATTERN PREFETCH SECONDS | consumer PATTERN PREFETCH STEP_MS STEPS | "
          "digest PATTERN | synth OUT N\n");
  return 2;
}
