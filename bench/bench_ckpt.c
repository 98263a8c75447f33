/* Checkpoint write/read throughput: writes MB megabytes of float32 tensors (a model-like
 * mix: large matrices and small vectors) to PREFIX with lv_bundle_writer (including the
 * fsyncs and renames), then reads every tensor back with crc checks, once with the data
 * evicted from the page cache (from disk) and once cached; each REPEATS times, keeping
 * the best (the machine may be shared). Prints write_MBps, read_MBps (cold) and
 * read_cached_MBps for bench/bench_ckpt.sh. */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "io/bundle.h"

/* Drops the (clean, fsynced) pages of the data file from the page cache. */
static void evict(const char *prefix) {
  char path[4096];
  snprintf(path, sizeof path, "%s.data-00000-of-00001", prefix);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PREFIX MB REPEATS\n", argv[0]);
    return 2;
  }
  const char *prefix = argv[1];
  int64_t total = atoll(argv[2]) * 1000 * 1000;
  int repeats = atoi(argv[3]) > 0 ? atoi(argv[3]) : 1;
  const int64_t big = 25 * 1000 * 1000; /* bytes per large tensor */
  float *buf = malloc((size_t)big);
  for (int64_t i = 0; i < big / 4; i++) buf[i] = (float)(i % 1000) * 0.001f;
  lv_status s = NULL;
  int64_t written = 0, read = 0;
  int n = 0;
  double best_w = 1e30, best_r = 1e30;
  for (int rep = 0; rep < repeats && !s; rep++) {
    double t0 = lv_now_monotonic();
    lv_bundle_writer *w;
    s = lv_bundle_writer_open(prefix, &w);
    written = 0;
    n = 0;
    while (!s && written < total) {
      char name[64];
      snprintf(name, sizeof name, "layer%03d/w/var", n);
      int64_t bytes = total - written < big ? total - written : big;
      lv_shape sh = lv_shape2(bytes / 4 / 1000, 1000);
      bytes = lv_shape_numel(&sh) * 4;
      if (bytes == 0) break;
      s = lv_bundle_writer_add(w, name, LV_F32, &sh, buf);
      written += bytes;
      snprintf(name, sizeof name, "layer%03d/b/var", n++);
      lv_shape sb = lv_shape1(1000);
      if (!s) s = lv_bundle_writer_add(w, name, LV_F32, &sb, buf);
      written += 4000;
    }
    if (!s) s = lv_bundle_writer_finish(w);
    else lv_bundle_writer_abort(w);
    double t1 = lv_now_monotonic();
    if (t1 - t0 < best_w) best_w = t1 - t0;
  }
  double best_c = 1e30;
  for (int rep = 0; rep < 2 * repeats && !s; rep++) {
    bool cold = rep % 2 == 0;
    if (cold) evict(prefix);
    double t1 = lv_now_monotonic();
    lv_bundle_reader *r = NULL;
    s = lv_bundle_reader_open(prefix, &r);
    read = 0;
    for (int i = 0; !s && i < lv_bundle_reader_count(r); i++) {
      const lv_bundle_entry *e = lv_bundle_reader_entry(r, i);
      s = lv_bundle_reader_read(r, e, buf, e->size);
      read += (int64_t)e->size;
    }
    double t2 = lv_now_monotonic();
    lv_bundle_reader_close(r);
    double *best = cold ? &best_r : &best_c;
    if (t2 - t1 < *best) *best = t2 - t1;
  }
  free(buf);
  if (s) return lv_status_report("bench_ckpt", s);
  printf("tensors %d bytes %lld\n", 2 * n, (long long)written);
  printf("write_MBps %.1f\n", (double)written / 1e6 / best_w);
  printf("read_MBps %.1f\n", (double)read / 1e6 / best_r);
  printf("read_cached_MBps %.1f\n", (double)read / 1e6 / best_c);
  return 0;
}
