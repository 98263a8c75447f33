/* Times a stack of Lingvo TransformerLayers (encoder: pre-LN self-attention + FFN)
 * forward + backward on the layer classes of src/layers/transformer.c and prints one
 * line: "lingvoc ms_per_step=<m> fwd_ms=<f> gflop_per_step=<g>". The attention gets a
 * value projection (atten_tpl.enable_ctx_pre_proj) so the work equals PyTorch's
 * nn.TransformerEncoderLayer (q, k, v, out projections).
 * Usage: transformer_bench threads steps layers model heads ffn length batch */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/log.h"
#include "core/graph.h"
#include "core/ops.h"
#include "kernels/kernels.h"
#include "layers/transformer.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(lv_status s) { exit(lv_status_report("transformer_bench", s)); }

int main(int argc, char **argv) {
  int a[8] = {2, 10, 4, 256, 4, 1024, 32, 64};
  for (int i = 0; i < 8 && i + 1 < argc; i++) a[i] = atoi(argv[i + 1]);
  int threads = a[0], steps = a[1], L = a[2], D = a[3], H = a[4], F = a[5], T = a[6], B = a[7];
  lv_set_num_threads(threads);
  lv_layers_register_all();
  lv_varstore *vs = lv_varstore_create();
  lv_layer **layers = calloc((size_t)L, sizeof *layers);
  lv_params **ps = calloc((size_t)L, sizeof *ps);
  for (int i = 0; i < L; i++) {
    lv_status s = lv_registry_instantiate("TransformerLayer", &ps[i]);
    char text[512];
    snprintf(text, sizeof text,
             "name : 'layer_%d'; source_dim : %d; tr_atten_tpl.num_attention_heads : %d; "
             "tr_fflayer_tpl.hidden_dim : %d; tr_atten_tpl.atten_tpl.enable_ctx_pre_proj : True",
             i, D, H, F);
    if (!s) s = lv_params_from_text(ps[i], text, "transformer_bench");
    if (s) die(s);
    lv_params_freeze(ps[i]);
    if ((s = lv_layer_create(ps[i], "enc", vs, &layers[i]))) die(s);
  }
  lv_status s = lv_varstore_finalize(vs, 1);
  if (s) die(s);
  lv_graph *g = lv_graph_create(0);
  float *hx = malloc(sizeof(float) * (size_t)T * B * D), *hw = malloc(sizeof(float) * (size_t)T * B * D);
  for (int64_t i = 0; i < (int64_t)T * B * D; i++) {
    hx[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    hw[i] = (float)((i * 104729) % 997) / 997.0f;
  }
  double total = 0, fwd = 0;
  int timed = 0;
  for (int step = 0; step < steps + 2; step++) {
    lv_graph_reset(g);
    lv_varstore_zero_grads(vs);
    double t0 = now();
    lv_tensor x0 = lv_tensor_view(LV_F32, lv_shape3(T, B, D), hx), w0 = lv_tensor_view(LV_F32, lv_shape3(T, B, D), hw);
    lv_tensor *x = lv_graph_from_host(g, &x0), *w = lv_graph_from_host(g, &w0);
    lv_tensor *pads = lv_graph_zeros(g, LV_F32, lv_shape2(T, B));
    for (int i = 0; i < L; i++)
      if (!lv_transformer_layer_fprop((lv_transformer_layer *)layers[i], g, x, pads, NULL, NULL, &x, NULL)) break;
    lv_tensor *loss = lv_op_reduce_sum(g, lv_op_mul(g, x, w), LV_ALL_AXES, false);
    if ((s = lv_graph_status(g))) die(s);
    double t1 = now();
    if ((s = lv_graph_backward(g, loss))) die(s);
    double t2 = now();
    if (step >= 2) total += t2 - t0, fwd += t1 - t0, timed++;
  }
  double n = (double)T * B;
  double f_layer = 4 * 2 * n * D * D + 2 * 2 * n * D * F + 4.0 * B * T * T * D; /* forward */
  double gflop = 3 * f_layer * L / 1e9;                                          /* + backward */
  printf("lingvoc ms_per_step=%.2f fwd_ms=%.2f gflop_per_step=%.3f\n", total / timed * 1e3, fwd / timed * 1e3, gflop);
  for (int i = 0; i < L; i++) {
    lv_layer_free(layers[i]);
    lv_params_free(ps[i]);
  }
  free(layers);
  free(ps);
  free(hx);
  free(hw);
  lv_graph_destroy(g);
  lv_varstore_destroy(vs);
  return 0;
}
