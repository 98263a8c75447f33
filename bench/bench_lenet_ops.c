/* Times LeNet5's training step on the core ops (batch 256: conv 5x5x1x20 SAME, max pool
 * 2, relu, conv 5x5x20x50 SAME, max pool 2, relu, fc 2450x300 relu, fc 300x10, sparse xent, mean,
 * backward) and prints ms/step, GFLOP/s of the GEMM-shaped work, and the split between
 * forward and backward. Usage: bench_lenet_ops [threads] [steps]. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/log.h"
#include "base/rng.h"
#include "core/graph.h"
#include "core/ops.h"
#include "core/variable.h"
#include "kernels/cpu/cpu_kernels.h"

static lv_var *add(lv_varstore *vs, const char *name, lv_shape s, lv_init_method m) {
  lv_var *v;
  lv_var_init in = {m, m == LV_INIT_XAVIER ? 1.000001 : 0.0};
  lv_status st = lv_varstore_add(vs, name, LV_F32, s, in, true, &v);
  if (st) exit(lv_status_report("bench_lenet_ops", st));
  return v;
}

typedef struct model { lv_var *w0, *w1, *fw, *fb, *sw, *sb; } model;
static model M;

static lv_tensor *forward(lv_graph *g, lv_tensor *x, lv_tensor *y, uint64_t step) {
  const int B = (int)x->shape.d[0];
  lv_var *w0 = M.w0, *w1 = M.w1, *fw = M.fw, *fb = M.fb, *sw = M.sw, *sb = M.sb;
  x = lv_op_per_image_standardization(g, x);
  /* ReLU after the pool, as classifier.ModelV1 runs a conv block (the same values). */
  lv_tensor *h = lv_op_max_pool2d(g, lv_op_conv2d(g, x, &w0->value, 1, 1, 1, 1, LV_PAD_SAME), 2, 2, 2, 2, LV_PAD_SAME);
  h = lv_op_dropout(g, lv_op_relu(g, h), 0.8f, 1, step * 4);
  h = lv_op_max_pool2d(g, lv_op_conv2d(g, h, &w1->value, 1, 1, 1, 1, LV_PAD_SAME), 2, 2, 2, 2, LV_PAD_SAME);
  h = lv_op_dropout(g, lv_op_relu(g, h), 0.8f, 1, step * 4 + 1);
  h = lv_op_reshape(g, h, lv_shape2(B, -1));
  h = lv_op_relu(g, lv_op_add(g, lv_op_matmul(g, h, &fw->value, false, false), &fb->value));
  lv_tensor *logits = lv_op_add(g, lv_op_matmul(g, h, &sw->value, false, false), &sb->value);
  lv_tensor *loss = lv_op_reduce_mean(g, lv_op_sparse_softmax_xent(g, logits, y), LV_ALL_AXES, false);
  return loss;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2, steps = argc > 2 ? atoi(argv[2]) : 20;
  const int B = 256;
  lv_set_num_threads(threads);
  lv_varstore *vs = lv_varstore_create();
  lv_var *w0 = add(vs, "conv0/w", lv_shape4(5, 5, 1, 20), LV_INIT_XAVIER);
  lv_var *w1 = add(vs, "conv1/w", lv_shape4(5, 5, 20, 50), LV_INIT_XAVIER);
  lv_var *fw = add(vs, "fc/w", lv_shape2(2450, 300), LV_INIT_XAVIER);
  lv_var *fb = add(vs, "fc/b", lv_shape1(300), LV_INIT_CONSTANT);
  lv_var *sw = add(vs, "softmax/w", lv_shape2(300, 10), LV_INIT_XAVIER);
  lv_var *sb = add(vs, "softmax/b", lv_shape1(10), LV_INIT_CONSTANT);
  M = (model){w0, w1, fw, fb, sw, sb};
  lv_status st = lv_varstore_finalize(vs, 1);
  if (st) return lv_status_report("bench_lenet_ops", st);
  float *img = malloc(sizeof(float) * B * 784);
  int32_t *lab = malloc(sizeof(int32_t) * B);
  lv_rng r;
  lv_rng_init(&r, 5, 0);
  for (int i = 0; i < B * 784; i++) img[i] = (float)(lv_rng_u32(&r) & 255);
  for (int i = 0; i < B; i++) lab[i] = (int32_t)lv_rng_below(&r, 10);

  lv_graph *g = lv_graph_create(0);
  double tf = 0, tb = 0, loss_v = 0, cpu0 = 0;
  struct timespec ts;
  for (int step = -3; step < steps; step++) {
    if (step == 0) {
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      cpu0 = ts.tv_sec + ts.tv_nsec * 1e-9;
    }
    double t0 = lv_now_monotonic();
    lv_varstore_zero_grads(vs);
    lv_tensor *x = lv_graph_tensor(g, LV_F32, lv_shape4(B, 28, 28, 1));
    for (int i = 0; i < B * 784; i++) lv_f32(x)[i] = img[i];
    lv_tensor *y = lv_graph_tensor(g, LV_I32, lv_shape1(B));
    for (int i = 0; i < B; i++) lv_i32(y)[i] = lab[i];
    lv_tensor *loss = forward(g, x, y, (uint64_t)step);
    double t1 = lv_now_monotonic();
    st = lv_graph_backward(g, loss);
    if (st) return lv_status_report("bench_lenet_ops", st);
    double t2 = lv_now_monotonic();
    loss_v = lv_f32(loss)[0];
    lv_graph_reset(g);
    if (step >= 0) {
      tf += t1 - t0;
      tb += t2 - t1;
    }
  }
  /* 2*M*N*K per GEMM: forward conv0, conv1, fc, softmax; backward conv0 filter only,
   * conv1 filter+input, fc and softmax both. */
  double c0 = 2.0 * B * 784 * 25 * 20, c1 = 2.0 * B * 196 * 500 * 50, f1 = 2.0 * B * 2450 * 300,
         f2 = 2.0 * B * 300 * 10;
  double flops = (c0 + c1 + f1 + f2) + (c0 + 2 * c1 + 2 * f1 + 2 * f2);
  double ms = (tf + tb) / steps * 1e3;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  double cpu_ms = (ts.tv_sec + ts.tv_nsec * 1e-9 - cpu0) / steps * 1e3;
  printf("lenet5 train step, batch %d, %d threads: %.2f ms/step (forward %.2f, backward %.2f), "
         "%.1f GFLOP/s, %.0f examples/s, cpu %.2f ms/step, arena peak %.1f MiB, loss %.4f\n",
         B, threads, ms, tf / steps * 1e3, tb / steps * 1e3, flops / (ms * 1e-3) / 1e9,
         B / (ms * 1e-3), cpu_ms, (double)lv_graph_arena_peak(g) / (1 << 20), loss_v);
  /* Eval: forward only, no tape, no dropout. */
  lv_graph_set_training(g, false);
  double te = 0;
  for (int step = -2; step < steps; step++) {
    double t0 = lv_now_monotonic();
    lv_tensor *x = lv_graph_tensor(g, LV_F32, lv_shape4(B, 28, 28, 1));
    for (int i = 0; i < B * 784; i++) lv_f32(x)[i] = img[i];
    lv_tensor *y = lv_graph_tensor(g, LV_I32, lv_shape1(B));
    for (int i = 0; i < B; i++) lv_i32(y)[i] = lab[i];
    if (!forward(g, x, y, 0)) return lv_status_report("bench_lenet_ops", lv_graph_status(g));
    lv_graph_reset(g);
    if (step >= 0) te += lv_now_monotonic() - t0;
  }
  printf("lenet5 eval forward, batch %d, %d threads: %.2f ms/batch, %.0f examples/s\n", B, threads,
         te / steps * 1e3, B * steps / te);
  lv_graph_destroy(g);
  lv_varstore_destroy(vs);
  free(img);
  free(lab);
  return 0;
}
