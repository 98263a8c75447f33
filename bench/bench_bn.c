/* Times the training step of a 3-conv classifier.ModelV1 (filter_shapes [3,3,1,32],
 * [3,3,32,64], [3,3,64,64], 2x2 max pools, fc to 300, softmax over 10; no dropout) on a
 * random Fashion-MNIST-shaped batch (28x28x1 uint8), with or without batch norm after each
 * conv: forward, backward, the learner's Adam update and the deferred moving-average
 * updates, as the trainer runs them (no input reader, no summaries). Prints the median
 * ms/step and steps/s of `reps` repetitions of `steps` steps each (and the process's CPU
 * time per step, which contention on a shared machine inflates less), and the eval
 * forward.
 * Usage: bench_bn threads steps reps batch_norm(0|1) [experiments_dir]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/rng.h"
#include "kernels/kernels.h"
#include "models/model.h"
#include "models/task.h"
#include "optim/learner.h"
#include "optim/optim_params.h"
#include "runners/instance.h"

static void die(lv_status s) { exit(lv_status_report("bench_bn", s)); }

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: bench_bn threads steps reps batch_norm(0|1) [experiments_dir]\n");
    return 2;
  }
  int threads = atoi(argv[1]), steps = atoi(argv[2]), reps = atoi(argv[3]);
  bool bn = atoi(argv[4]) != 0;
  enum { B = 256, MAXREPS = 64 };
  if (steps < 1 || reps < 1 || reps > MAXREPS) return 2;
  lv_tasks_register_all();
  char override[512];
  snprintf(override, sizeof override,
           "task.filter_shapes: ([3, 3, 1, 32], [3, 3, 32, 64], [3, 3, 64, 64]);"
           "task.window_shapes: ([2, 2], [2, 2], [2, 2]); task.batch_norm: %s; task.dropout_prob: 0.0;"
           "input.batch_size: %d; cluster.num_threads: %d",
           bn ? "true" : "false", B, threads);
  lv_model_options o;
  lv_model_options_init(&o);
  o.model = "image.mnist.LeNet5";
  o.dataset = "Train";
  o.experiments_dir = argc > 5 ? argv[5] : "experiments";
  o.logdir = "/tmp/lingvoc-bench-bn";
  o.params_override = override;
  lv_params *cfg = NULL;
  lv_status s = lv_model_params_build(&o, &cfg);
  if (s) die(s);
  lv_instance *m = NULL;
  if ((s = lv_instance_create(cfg, false, (lv_input_shard){0, 1}, &m))) die(s);
  int nv = lv_varstore_count(m->vs);
  lv_var **vars = calloc((size_t)nv, sizeof *vars);
  for (int i = 0; i < nv; i++) vars[i] = lv_varstore_get(m->vs, i);
  lv_learner *learner = NULL;
  if ((s = lv_learner_from_params(lv_params_sub(cfg, "task.train"), 1, m->backend, vars, nv, &learner))) die(s);

  static uint8_t raw[B * 784];
  int32_t labels[B];
  float weights[B];
  lv_rng r;
  lv_rng_init(&r, 5, 0);
  for (int i = 0; i < B * 784; i++) raw[i] = (uint8_t)(lv_rng_u32(&r) & 255);
  for (int i = 0; i < B; i++) labels[i] = (int32_t)lv_rng_below(&r, 10), weights[i] = 1.0f;
  lv_tensor traw = lv_tensor_view(LV_U8, lv_shape4(B, 28, 28, 1), raw);
  lv_tensor tlabel = lv_tensor_view(LV_I32, lv_shape1(B), labels);
  lv_tensor tweight = lv_tensor_view(LV_F32, lv_shape1(B), weights);
  lv_batch b;
  lv_batch_init(&b);
  if ((s = lv_nmap_set(&b.map, "raw", &traw)) || (s = lv_nmap_set(&b.map, "label", &tlabel)) ||
      (s = lv_nmap_set(&b.map, "weight", &tweight)))
    die(s);
  b.size = B;

  lv_metrics met;
  lv_metrics_init(&met);
  double ms[MAXREPS], cpu[MAXREPS], loss = 0;
  int64_t step = 0;
  for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up */
    double t0 = lv_now_monotonic(), c0 = cpu_seconds();
    for (int i = 0; i < (rep < 0 ? 3 : steps); i++, step++) {
      lv_varstore_zero_grads(m->vs);
      if ((s = lv_instance_fprop(m, &b, true, step, &met))) die(s);
      if ((s = lv_graph_backward(m->graph, met.loss))) die(s);
      if ((s = lv_learner_step(learner, step, NULL))) die(s);
      if ((s = lv_graph_apply_updates(m->graph))) die(s);
      loss = lv_metrics_value(&met, 0);
    }
    if (rep >= 0) ms[rep] = (lv_now_monotonic() - t0) / steps * 1e3, cpu[rep] = (cpu_seconds() - c0) / steps * 1e3;
  }
  qsort(cpu, (size_t)reps, sizeof(double), cmp_double);
  double sorted[MAXREPS];
  memcpy(sorted, ms, sizeof(double) * (size_t)reps);
  qsort(sorted, (size_t)reps, sizeof(double), cmp_double);
  double med = sorted[reps / 2];
  printf("3-conv ModelV1 train step, batch %d, %d threads, batch_norm %s: median %.1f ms/step "
         "(%.2f steps/s; min %.1f, max %.1f over %d x %d steps), cpu %.1f ms/step, arena peak %.1f MiB, "
         "loss %.4f\n",
         B, threads, bn ? "true " : "false", med, 1e3 / med, sorted[0], sorted[reps - 1], reps, steps, cpu[reps / 2],
         (double)lv_graph_arena_peak(m->graph) / (1 << 20), loss);
  double te[MAXREPS];
  for (int rep = -1; rep < reps; rep++) {
    double t0 = lv_now_monotonic();
    for (int i = 0; i < steps; i++)
      if ((s = lv_instance_fprop(m, &b, false, step, &met))) die(s);
    if (rep >= 0) te[rep] = (lv_now_monotonic() - t0) / steps * 1e3;
  }
  qsort(te, (size_t)reps, sizeof(double), cmp_double);
  printf("3-conv ModelV1 eval forward, batch %d, %d threads, batch_norm %s: median %.1f ms/batch\n", B, threads,
         bn ? "true " : "false", te[reps / 2]);
  lv_metrics_free(&met);
  lv_batch_free(&b);
  lv_learner_free(learner);
  free(vars);
  lv_instance_destroy(m);
  lv_params_free(cfg);
  return 0;
}
