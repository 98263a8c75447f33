/* Times a LayerNormalizedLSTMCellSimple FRNN (num_input_nodes = num_output_nodes = 512)
 * unrolled over 50 steps at batch 64: forward + backward of sum(outputs), as lingvoc's
 * layers run it (one GEMM for the input projection of all steps, then per step the
 * recurrent GEMM, per-gate layer norm and the fused gate step). Prints one line per
 * measurement: "lingvoc_lstm ms_per_iter <ms> forward <ms> backward <ms> gflops <GFLOP/s>".
 * Usage: lstm_bench [threads] [iters] [T] [B] [units]. */
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/rng.h"
#include "kernels/kernels.h"
#include "layers/layer.h"
#include "layers/rnn_layers.h"

static void die(lv_status s) { exit(lv_status_report("lstm_bench", s)); }

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2, iters = argc > 2 ? atoi(argv[2]) : 5;
  int T = argc > 3 ? atoi(argv[3]) : 50, B = argc > 4 ? atoi(argv[4]) : 64, H = argc > 5 ? atoi(argv[5]) : 512;
  lv_set_num_threads(threads);
  lv_layers_register_all();
  lv_params *p = NULL;
  lv_status s = lv_registry_instantiate("FRNN", &p);
  if (!s) s = lv_params_set_string(p, "name", "rnn");
  if (!s) s = lv_params_set_class(p, "cell", "LayerNormalizedLSTMCellSimple");
  if (!s) s = lv_params_set_int(p, "cell.num_input_nodes", H);
  if (!s) s = lv_params_set_int(p, "cell.num_output_nodes", H);
  if (!s) s = lv_params_set_string(p, "cell.params_init.method", "uniform");
  if (!s) s = lv_params_set_float(p, "cell.params_init.scale", 0.04);
  if (s) die(s);
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  if ((s = lv_layer_create(p, "", vs, &l)) || (s = lv_varstore_finalize(vs, 1))) die(s);
  float *xh = malloc(sizeof(float) * (size_t)T * B * H);
  lv_rng r;
  lv_rng_init(&r, 3, 0);
  for (int64_t i = 0; i < (int64_t)T * B * H; i++) xh[i] = 2.0f * lv_rng_uniform(&r) - 1.0f;
  lv_graph *g = lv_graph_create(0);
  double tf = 0, tb = 0, sum = 0;
  for (int it = -2; it < iters; it++) {
    double t0 = lv_now_monotonic();
    lv_varstore_zero_grads(vs);
    lv_tensor *x = lv_graph_tensor(g, LV_F32, lv_shape3(T, B, H));
    for (int64_t i = 0; i < (int64_t)T * B * H; i++) lv_f32(x)[i] = xh[i];
    x->requires_grad = true;
    lv_tensor *act = lv_layer_fprop_act(l, g, x);
    lv_tensor *loss = lv_op_reduce_sum(g, act, LV_ALL_AXES, false);
    if (!loss) die(lv_graph_status(g));
    double t1 = lv_now_monotonic();
    if ((s = lv_graph_backward(g, loss))) die(s);
    double t2 = lv_now_monotonic();
    sum = lv_f32(loss)[0];
    lv_graph_reset(g);
    if (it >= 0) tf += t1 - t0, tb += t2 - t1;
  }
  /* GEMMs: forward x.wm_x and m.wm_m over all steps; backward twice that. */
  double flops = 3.0 * 2.0 * T * B * (double)(H + H) * 4.0 * H;
  double ms = (tf + tb) / iters * 1e3;
  printf("lingvoc_lstm ms_per_iter %.2f forward %.2f backward %.2f gflops %.1f loss %.4f\n", ms,
         tf / iters * 1e3, tb / iters * 1e3, flops / (ms * 1e-3) / 1e9, sum);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
  free(xh);
  return 0;
}
