/* PyTorch parity (tests/parity.h) for the embedding and softmax layers: each case builds
 * the layer, runs forward and backward on a padded batch, and a reference written in
 * PyTorch (tests/parity/<case>.py) recomputes outputs and every gradient in float64. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "layer_fixture.h"
#include "layers/embedding.h"
#include "layers/full_softmax.h"
#include "layers/projection.h"
#include "parity.h"

#define fixture lf_fixture
#define fixture_open(f, cls, settings, seed) lf_open(f, cls, settings, seed)
#define fixture_close lf_close

static void backward(fixture *f, lv_tensor *loss) {
  lf_ok(f->g);
  EXPECT_OK(lv_graph_backward(f->g, loss));
}

/* Overwrites every float32 variable of vs whose name contains `part` with values from
 * a fixed stream in [-scale, scale] (biases start at a constant). */
static void randomize_vars(lv_varstore *vs, const char *part, float scale, uint64_t seed) {
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    lv_var *v = lv_varstore_get(vs, i);
    if (!strstr(v->name, part)) continue;
    uint64_t x = (seed + (uint64_t)i) * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t j = 0; j < lv_tensor_numel(&v->value); j++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      lv_f32(&v->value)[j] = scale * (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
  }
}

/* FCLayer on [B, T, D] with a TANH activation: validates the harness itself. */
START_TEST(test_parity_fc_layer) {
  if (!lv_parity_have_torch()) return;
  fixture f;
  fixture_open(&f, "FCLayer", LF_SET("name=fc", "input_dim=5", "output_dim=3", "activation=TANH",
                                          "params_init.method=gaussian", "params_init.scale=0.5"), 7);
  lv_parity p;
  lv_parity_open(&p, "fc_layer");
  lv_tensor *x = lv_parity_input(&p, f.g, "act", lv_shape3(2, 4, 5), 1.0f, 1);
  lv_tensor *y = lv_layer_fprop_act(f.l, f.g, x);
  lv_tensor *loss = lv_parity_output(&p, f.g, "act", y, NULL, 2);
  backward(&f, loss);
  lv_parity_put_grad(&p, "act", x);
  lv_parity_put_vars(&p, f.vs);
  lv_parity_run(&p, "fc_layer.py");
  fixture_close(&f);
}
END_TEST

/* SimpleFullSoftmax with 2 shards on [B, T, D] inputs, label smoothing 0.1 and
 * per-token weights (0 on padded steps, unequal lengths); chunk_size 0 (logits kept) or
 * 3 (lv_op_projected_smoothed_xent over chunks of 3 classes: no logits output). */
static void parity_full_softmax(const char *chunk_set) {
  if (!lv_parity_have_torch()) return;
  enum { B = 3, T = 4, D = 6, C = 10 };
  fixture f;
  fixture_open(&f, "SimpleFullSoftmax",
               LF_SET("name=sm", "input_dim=6", "num_classes=10", "num_shards=2", chunk_set), 11);
  randomize_vars(f.vs, "bias", 0.5f, 3);
  lv_parity p;
  lv_parity_open(&p, "full_softmax");
  const float u = 0.1f;
  lv_parity_attr(&p, "label_smoothing", u);
  lv_tensor *x = lv_parity_input(&p, f.g, "act", lv_shape3(B, T, D), 1.5f, 1);
  const int lens[B] = {4, 2, 3};
  float w[B * T];
  int32_t ids[B * T];
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      w[b * T + t] = t < lens[b] ? 0.5f + 0.25f * (float)((b + t) % 3) : 0.0f;
      ids[b * T + t] = (7 * b + 3 * t + 1) % C;
    }
  lv_tensor *wt = lf_tensor(f.g, lv_shape2(B, T), w), *it = lf_ids(f.g, lv_shape2(B, T), ids);
  lv_parity_put(&p, "in:class_weights", wt);
  lv_parity_put(&p, "in:class_ids", it);
  lv_xent_output o;
  ck_assert(lv_softmax_layer_fprop((lv_softmax_layer *)f.l, f.g, x, wt, it, NULL, u, &o));
  lv_parity_put(&p, "out:per_example_argmax", o.per_example_argmax);
  lv_parity_put(&p, "out:total_weight", o.total_weight);
  lv_tensor *loss = NULL;
  if (o.logits) {
    loss = lv_parity_output(&p, f.g, "logits", o.logits, NULL, 2);
    loss = lv_parity_output(&p, f.g, "log_probs", o.log_probs, loss, 3);
  }
  loss = lv_parity_output(&p, f.g, "per_example_xent", o.per_example_xent, loss, 4);
  loss = lv_parity_output(&p, f.g, "total_xent", o.total_xent, loss, 5);
  loss = lv_parity_output(&p, f.g, "avg_xent", o.avg_xent, loss, 6);
  backward(&f, loss);
  lv_parity_put_grad(&p, "act", x);
  lv_parity_put_vars(&p, f.vs);
  lv_parity_run(&p, "softmax_full.py");
  fixture_close(&f);
}

START_TEST(test_parity_full_softmax) { parity_full_softmax("chunk_size=0"); }
END_TEST

START_TEST(test_parity_full_softmax_chunked) { parity_full_softmax("chunk_size=3"); }
END_TEST

/* EmbeddingLayer, vocab 700 x 1024 in 3 "mod" shards of 234 rows, scale_sqrt_depth,
 * ids [B, T] with repeats and ids from every shard. */
START_TEST(test_parity_embedding_sharded) {
  if (!lv_parity_have_torch()) return;
  enum { B = 3, T = 5 };
  fixture f;
  fixture_open(&f, "EmbeddingLayer",
               LF_SET("name=emb", "vocab_size=700", "embedding_dim=1024", "max_num_shards=4", "scale_sqrt_depth=True"),
               13);
  ck_assert_int_eq(lv_varstore_count(f.vs), 3);
  lv_parity p;
  lv_parity_open(&p, "emb_sharded");
  int32_t ids[B * T] = {0, 1, 2, 699, 698, 5, 5, 5, 300, 301, 233, 234, 467, 1, 0};
  lv_tensor *it = lf_ids(f.g, lv_shape2(B, T), ids);
  lv_parity_put(&p, "in:ids", it);
  lv_nmap in, o;
  lv_nmap_init(&in);
  lv_nmap_init(&o);
  EXPECT_OK(lv_nmap_set(&in, "ids", it));
  ck_assert(lv_layer_fprop(f.l, f.g, &in, &o));
  lv_tensor *loss = lv_parity_output(&p, f.g, "act", lv_nmap_get(&o, "act"), NULL, 2);
  backward(&f, loss);
  lv_parity_put_vars(&p, f.vs);
  lv_parity_run(&p, "emb_sharded.py");
  lv_nmap_free(&in);
  lv_nmap_free(&o);
  fixture_close(&f);
}
END_TEST

/* ProjectionLayer with batch_norm on a padded [B, T, D] batch (unequal lengths): moments
 * over the non-padded rows, padded outputs zero, gradients through the moments. (No
 * bias: batch norm cancels it, its gradient is rounding noise around 0.) */
START_TEST(test_parity_projection_bn) {
  if (!lv_parity_have_torch()) return;
  enum { B = 3, T = 5, I = 4, O = 6 };
  fixture f;
  fixture_open(&f, "ProjectionLayer",
               LF_SET("name=proj", "input_dim=4", "output_dim=6", "batch_norm=True", "activation=TANH"),
               17);
  randomize_vars(f.vs, "beta", 0.3f, 5);
  randomize_vars(f.vs, "gamma", 0.3f, 6);
  lv_parity p;
  lv_parity_open(&p, "projection_bn");
  lv_tensor *x = lv_parity_input(&p, f.g, "act", lv_shape3(B, T, I), 2.0f, 1);
  const int lens[B] = {5, 2, 3};
  lv_tensor *pad = lv_parity_paddings(&p, f.g, "paddings", T, B, lens, false);
  lv_tensor *y = lv_projection_layer_fprop_padded((lv_projection_layer *)f.l, f.g, x, pad);
  lv_tensor *loss = lv_parity_output(&p, f.g, "act", y, NULL, 2);
  backward(&f, loss);
  lv_parity_put_grad(&p, "act", x);
  lv_parity_put_vars(&p, f.vs);
  lv_parity_run(&p, "projection_bn.py");
  fixture_close(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("parity_embedding");
  TCase *tc = tcase_create("parity");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_parity_fc_layer);
  tcase_add_test(tc, test_parity_full_softmax);
  tcase_add_test(tc, test_parity_full_softmax_chunked);
  tcase_add_test(tc, test_parity_embedding_sharded);
  tcase_add_test(tc, test_parity_projection_bn);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
