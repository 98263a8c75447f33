/* Checkpoint write/read throughput: writes MB megabytes of float32 tensors (a model-like
 * mix: a few large matrices and many small vectors) to PREFIX with lv_bundle_writer
 * (including the fsyncs and renames), then reads every tensor back with crc checks.
 * Prints "write_MBps R" and "read_MBps R" for bench/bench_ckpt.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "io/bundle.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PREFIX MB\n", argv[0]);
    return 2;
  }
  const char *prefix = argv[1];
  int64_t total = atoll(argv[2]) * 1000 * 1000;
  const int64_t big = 25 * 1000 * 1000; /* bytes per large tensor */
  float *buf = malloc((size_t)big);
  for (int64_t i = 0; i < big / 4; i++) buf[i] = (float)(i % 1000) * 0.001f;
  double t0 = lv_now_monotonic();
  lv_bundle_writer *w;
  lv_status s = lv_bundle_writer_open(prefix, &w);
  int64_t written = 0;
  int n = 0;
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
  lv_bundle_reader *r = NULL;
  if (!s) s = lv_bundle_reader_open(prefix, &r);
  int64_t read = 0;
  for (int i = 0; !s && i < lv_bundle_reader_count(r); i++) {
    const lv_bundle_entry *e = lv_bundle_reader_entry(r, i);
    s = lv_bundle_reader_read(r, e, buf, e->size);
    read += (int64_t)e->size;
  }
  double t2 = lv_now_monotonic();
  lv_bundle_reader_close(r);
  free(buf);
  if (s) return lv_status_report("bench_ckpt", s);
  printf("tensors %d bytes %lld\n", 2 * n, (long long)written);
  printf("write_MBps %.1f\n", (double)written / 1e6 / (t1 - t0));
  printf("read_MBps %.1f\n", (double)read / 1e6 / (t2 - t1));
  return 0;
}
