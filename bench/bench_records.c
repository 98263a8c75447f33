/* Benchmark of src/io: TFRecord read + crc + tf.Example parse throughput on one core, for
 * MT-like examples (Lingvo's wpm_encode_file features) and ASR-like examples (80x3 stacked
 * log-mel frames), and the caller's cost of lv_events_scalar. Built and run by
 * bench/bench_records.sh. Usage: bench_records TMPDIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/log.h"
#include "io/events.h"
#include "io/example.h"
#include "io/tfrecord.h"

static void die(lv_status s) {
  if (s) {
    fprintf(stderr, "bench_records: %s\n", lv_status_msg(s));
    exit(1);
  }
}

static double cpu_secs(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static uint32_t g_rng = 1;
static uint32_t rnd(void) {
  g_rng = g_rng * 1664525u + 1013904223u;
  return g_rng >> 8;
}

static lv_example *mt_example(void) {
  lv_example *e = lv_example_new();
  int sl = 10 + (int)(rnd() % 40), tl = 10 + (int)(rnd() % 40);
  int64_t ids[64];
  float pad[64], w[64];
  for (int i = 0; i < sl; i++) ids[i] = rnd() % 32000, pad[i] = 0;
  lv_example_add_int64s(e, "source_id", sl, ids);
  lv_example_add_floats(e, "source_padding", sl, pad);
  for (int i = 0; i < tl; i++) ids[i] = rnd() % 32000, pad[i] = 0, w[i] = 1;
  lv_example_add_int64s(e, "target_id", tl, ids);
  lv_example_add_int64s(e, "target_label", tl, ids);
  lv_example_add_floats(e, "target_padding", tl, pad);
  lv_example_add_floats(e, "target_weight", tl, w);
  char sw[400], tw[400];
  int a = 0, b = 0;
  for (int i = 0; i < sl; i++) a += snprintf(sw + a, sizeof sw - (size_t)a, "w%u ", rnd() % 5000);
  for (int i = 0; i < tl; i++) b += snprintf(tw + b, sizeof tw - (size_t)b, "w%u ", rnd() % 5000);
  const char *sv[1] = {sw}, *tv[1] = {tw};
  size_t sn[1] = {(size_t)a}, tn[1] = {(size_t)b};
  lv_example_add_bytes(e, "source_word", 1, sv, sn);
  lv_example_add_bytes(e, "target_word", 1, tv, tn);
  int64_t one = 1;
  lv_example_add_int64s(e, "natural_order", 1, &one);
  return e;
}

static lv_example *asr_example(void) {
  lv_example *e = lv_example_new();
  int frames = 200 + (int)(rnd() % 800);
  int n = frames * 240;
  float *f = malloc((size_t)n * sizeof(float));
  for (int i = 0; i < n; i++) f[i] = (float)(rnd() % 1000) * 0.01f - 5.0f;
  lv_example_add_floats(e, "frames", n, f);
  free(f);
  const char *u[1] = {"1089-134686-0000"}, *t[1] = {"he hoped there would be stew for dinner turnips and carrots"};
  size_t ul[1] = {16}, tl[1] = {strlen(t[0])};
  lv_example_add_bytes(e, "uttid", 1, u, ul);
  lv_example_add_bytes(e, "transcript", 1, t, tl);
  return e;
}

static void write_file(const char *path, lv_example *(*make)(void), size_t target_bytes) {
  lv_tfrecord_writer *w;
  die(lv_tfrecord_writer_open(path, false, &w));
  /* A pool of distinct serialized examples, written round-robin until the target size. */
  enum { POOL = 64 };
  uint8_t *bufs[POOL];
  size_t lens[POOL];
  for (int i = 0; i < POOL; i++) {
    lv_example *e = make();
    die(lv_example_serialize(e, &bufs[i], &lens[i]));
    lv_example_free(e);
  }
  size_t total = 0;
  for (int i = 0; total < target_bytes; i++) {
    die(lv_tfrecord_writer_write(w, bufs[i % POOL], lens[i % POOL]));
    total += lens[i % POOL] + LV_TFRECORD_OVERHEAD;
  }
  for (int i = 0; i < POOL; i++) free(bufs[i]);
  die(lv_tfrecord_writer_close(w));
}

/* Reads + parses the whole file; returns MB/s of file bytes (best of 3 passes). */
static double read_parse(const char *path, int64_t *nrec) {
  double best = 0;
  for (int pass = 0; pass < 3; pass++) {
    double t0 = lv_now_monotonic();
    lv_tfrecord_reader *r;
    die(lv_tfrecord_reader_open(path, false, &r));
    int64_t n = 0;
    double checksum = 0;
    for (;;) {
      const uint8_t *d;
      size_t len;
      bool eof;
      die(lv_tfrecord_reader_next(r, &d, &len, &eof));
      if (eof) break;
      lv_example *e;
      die(lv_example_parse(d, len, &e));
      checksum += lv_example_feature_size(e, 0);
      lv_example_free(e);
      n++;
    }
    double bytes = (double)lv_tfrecord_reader_offset(r);
    lv_tfrecord_reader_close(r);
    double dt = lv_now_monotonic() - t0;
    if (checksum < 0) printf("impossible\n");
    double mbs = bytes / dt / 1e6;
    if (mbs > best) best = mbs;
    *nrec = n;
  }
  return best;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: bench_records TMPDIR\n");
    return 2;
  }
  char path[1024];
  struct {
    const char *name;
    lv_example *(*make)(void);
    size_t bytes;
  } kinds[2] = {{"MT (wpm_encode_file features)", mt_example, 150u << 20},
                {"ASR (80x3 log-mel frames)", asr_example, 300u << 20}};
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/bench_%d.tfrecord", argv[1], k);
    write_file(path, kinds[k].make, kinds[k].bytes);
    int64_t n;
    double mbs = read_parse(path, &n);
    printf("tfrecord read+crc+parse, %-30s %7.0f MB/s  (%lld records, %.0f MB, one core; target >= 200)\n",
           kinds[k].name, mbs, (long long)n, (double)kinds[k].bytes / 1e6);
    remove(path);
  }

  /* Events: 12 scalars per step (Lingvo's trainer summaries), 100k steps. */
  snprintf(path, sizeof path, "%s/events", argv[1]);
  lv_events_writer *w;
  die(lv_events_writer_open(path, 5, &w));
  const char *tags[12] = {"loss", "log_pplx", "fraction_of_correct_next_step_preds", "learning_rate",
                          "grad_norm/all", "var_norm/all", "has_nan_or_inf", "examples/sec",
                          "global_step/sec", "grad_scale_all", "num_samples_in_batch", "total_samples"};
  const int steps = 100000;
  double c0 = cpu_secs(), t0 = lv_now_monotonic();
  for (int s = 0; s < steps; s++)
    for (int i = 0; i < 12; i++) lv_events_scalar(w, tags[i], s, s * 0.001 + i);
  double t_caller = lv_now_monotonic() - t0;
  die(lv_events_writer_close(w));
  double c_total = cpu_secs() - c0;
  double per_step_us = t_caller / steps * 1e6;
  printf("events: lv_events_scalar %.0f ns per call in the caller; 12 scalars per step = %.2f us = %.4f%% of a 10 ms step\n",
         t_caller / (steps * 12.0) * 1e9, per_step_us, per_step_us / 10000.0 * 100.0);
  printf("events: all CPU including the writer thread (serialize, crc, write, close) %.0f ns per scalar = %.4f%% of a 10 ms step for 12\n",
         c_total / (steps * 12.0) * 1e9, c_total / steps / 0.010 * 100.0);
  return 0;
}
