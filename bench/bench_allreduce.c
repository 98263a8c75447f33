/* All-reduce bandwidth of the communicator the launch gives (run under mpirun -np N):
 * for each size, the median over REPS of one in-place lv_comm_allreduce_f32 after a
 * barrier (so waiting for a slower rank is not counted). Rank 0 prints the size, the
 * time, the algorithm bandwidth (bytes / time) and the bus bandwidth (2 (N-1)/N x bytes
 * / time: what each rank's link carries in a ring all-reduce). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "comm/comm.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 10;
  if (reps < 1) reps = 1;
  lv_comm *c = NULL;
  lv_status s = lv_comm_create_auto(&c);
  if (s) return lv_status_report("bench_allreduce", s);
  int rank = lv_comm_rank(c), n = lv_comm_size(c);
  if (rank == 0) printf("%s\n", lv_comm_describe(c));
  /* LeNet5 (0.76M params), TransformerSmall (11.1M), Transformer Base (~93M). */
  const int64_t sizes[] = {763810, 11090048, 93300000};
  double *t = calloc((size_t)reps, sizeof *t);
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    int64_t m = sizes[k];
    float *buf = malloc(sizeof(float) * (size_t)m);
    for (int64_t i = 0; i < m; i++) buf[i] = (float)(i % 13);
    for (int r = 0; r < reps && !s; r++) {
      s = lv_comm_barrier(c);
      double t0 = lv_now_monotonic();
      if (!s) s = lv_comm_allreduce_f32(c, buf, m);
      t[r] = lv_now_monotonic() - t0;
    }
    free(buf);
    if (s) break;
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    double med = t[reps / 2], bytes = 4.0 * (double)m;
    if (rank == 0)
      printf("%10lld floats (%7.1f MB): %8.2f ms, algbw %6.2f GB/s, busbw %6.2f GB/s\n", (long long)m, bytes / 1e6,
             1e3 * med, bytes / med / 1e9, 2.0 * (n - 1) / n * bytes / med / 1e9);
  }
  free(t);
  if (s) lv_comm_abort(c, 1, lv_status_msg(s));
  return lv_status_report("bench_allreduce", lv_comm_destroy(c));
}
