/* RnnLm, RnnLmNoEmbedding and TransformerLm (layers/lm_layers.h): Lingvo's variable names
 * and shapes, config errors naming the key, step-by-step logits equal to the full
 * sequence's (Lingvo's TransformerLmTest.testStep, atol 1e-5), finite-difference
 * gradients of the loss, and parity with a PyTorch float64 reference with identical
 * weights (tests/parity/lm_layers.py: logits, per-example xent, avg_xent and every
 * variable's gradient). */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_util.h"
#include "layer_fixture.h"
#include "lm_batch_util.h"
#include "parity.h"
#include "base/rng.h"
#include "layers/lm_layers.h"

#define RNN_SET(...)                                                                                  \
  LF_SET("name=lm", "vocab_size=11", "emb.vocab_size=11", "emb.embedding_dim=4", "rnns.num_layers=2", \
         "rnns.num_input_nodes=4", "rnns.cell_tpl.num_input_nodes=5", "rnns.cell_tpl.num_output_nodes=5", \
         "rnns.skip_start=1", "softmax.num_classes=11", "softmax.input_dim=5", __VA_ARGS__)
#define TR_SET(...)                                                                                    \
  LF_SET("name=lm", "vocab_size=11", "emb.vocab_size=11", "emb.embedding_dim=8", "model_dim=8",         \
         "position_emb.embedding_dim=8", "num_trans_layers=2", "trans_tpl.tr_atten_tpl.num_attention_heads=2", \
         "trans_tpl.tr_fflayer_tpl.hidden_dim=12", "emb.scale_sqrt_depth=True", __VA_ARGS__)

static void expect_var(lv_varstore *vs, const char *name, lv_shape s) {
  lv_var *v = lv_varstore_find(vs, name);
  ck_assert_msg(v, "missing variable %s", name);
  ck_assert_msg(lv_shape_eq(&v->value.shape, &s), "%s has another shape", name);
}

/* Random weights in [-0.5, 0.5] (LayerNorm scales too: Lingvo's are 1 + scale). */
static void randomize(lv_varstore *vs, uint64_t seed) {
  lv_rng r;
  lv_rng_init(&r, seed, 5);
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    lv_var *v = lv_varstore_get(vs, i);
    for (int64_t j = 0; j < lv_tensor_numel(&v->value); j++)
      lv_f32(&v->value)[j] = 0.5f * (2.0f * lv_rng_uniform(&r) - 1.0f);
  }
}

START_TEST(names_and_shapes) {
  lf_fixture f;
  lf_open(&f, "RnnLm", RNN_SET("rnns.cell_tpl.num_hidden_nodes=7"), 1);
  expect_var(f.vs, "lm/emb/var_0/var", lv_shape2(11, 4));
  expect_var(f.vs, "lm/rnns_0/wm/var", lv_shape2(4 + 5, 28));
  expect_var(f.vs, "lm/rnns_0/w_proj/var", lv_shape2(7, 5));
  expect_var(f.vs, "lm/rnns_1/wm/var", lv_shape2(5 + 5, 28));
  expect_var(f.vs, "lm/rnns_1/b/var", lv_shape1(28));
  expect_var(f.vs, "lm/softmax/weight_0/var", lv_shape2(5, 11));
  expect_var(f.vs, "lm/softmax/bias_0/var", lv_shape1(11));
  lf_close(&f);
  lf_open(&f, "TransformerLm", TR_SET("softmax.num_classes=0"), 1);
  expect_var(f.vs, "lm/emb/var_0/var", lv_shape2(11, 8));
  expect_var(f.vs, "lm/layer_1/multihead_self_atten/multihead_atten/ctx_proj/var", lv_shape2(8, 8));
  expect_var(f.vs, "lm/layer_1/tr_fflayer/fflayer/fflayer_0/w/var", lv_shape2(8, 12));
  expect_var(f.vs, "lm/softmax/weight_0/var", lv_shape2(8, 11));
  ck_assert_ptr_null(lv_varstore_find(f.vs, "lm/layer_2/tr_fflayer/fflayer_ln/scale/var"));
  lf_close(&f);
}
END_TEST

START_TEST(config_errors) {
  struct {
    const char *cls;
    lv_params *p;
    const char *want[2];
  } cases[] = {
      {"RnnLm", lf_params("RnnLm", RNN_SET("emb.embedding_dim=6")), {"lm.emb.embedding_dim (6)", "num_input_nodes"}},
      {"RnnLm", lf_params("RnnLm", RNN_SET("softmax.num_classes=12")), {"lm.softmax.num_classes (12)", "vocab_size (11)"}},
      {"TransformerLm", lf_params("TransformerLm", TR_SET("model_dim=6")), {"model_dim (6)", "embedding_dim (8)"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lv_varstore *vs = lv_varstore_create();
    lv_layer *l = NULL;
    EXPECT_ERR(lv_layer_create(cases[i].p, NULL, vs, &l), LV_ERR_INVALID, cases[i].want[0], cases[i].want[1]);
    lv_params_free(cases[i].p);
    lv_varstore_destroy(vs);
  }
}
END_TEST

/* Lingvo's StackedFRNNLayerByLayer residual rule: from skip_start (< 0: none), never on the
 * first layer when rnns.num_input_nodes > 0 nor on the last when rnns.num_output_nodes > 0
 * (so neither needs matching widths). */
START_TEST(residual_rule) {
  struct {
    const char *skip, *out;
    bool r0, r1;
  } cases[] = {
      {"rnns.skip_start=1", "rnns.num_output_nodes=-1", false, true},
      {"rnns.skip_start=0", "rnns.num_output_nodes=0", false, true}, /* layer 0: 4 -> 5, no residual */
      {"rnns.skip_start=-1", "rnns.num_output_nodes=-1", false, false},
      {"rnns.skip_start=1", "rnns.num_output_nodes=3", false, false}, /* last layer: 5 -> 3 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lf_fixture f;
    bool narrow = strcmp(cases[i].out, "rnns.num_output_nodes=3") == 0;
    lf_open(&f, "RnnLm", RNN_SET(cases[i].skip, cases[i].out, narrow ? "softmax.input_dim=3" : "softmax.input_dim=5"),
            1);
    lv_lm *lm = lv_lm_of(f.l);
    ck_assert_msg(lm->residual[0] == cases[i].r0 && lm->residual[1] == cases[i].r1, "case %zu: residuals %d %d", i,
                  lm->residual[0], lm->residual[1]);
    lf_close(&f);
  }
}
END_TEST

static const int32_t kIds[T * B] = {1, 1, 1, 7, 3, 9, 4, 10, 2, 6, 2, 5, 8, 0, 3};
static const int32_t kLabels[T * B] = {7, 3, 9, 4, 10, 2, 6, 2, 5, 8, 2, 3, 2, 2, 2};

/* Full-sequence logits at the real steps equal those of T single steps. */
static void step_matches_fprop(const char *cls, const char *const *set) {
  lf_fixture f;
  lf_open(&f, cls, set, 3);
  randomize(f.vs, 11);
  lv_graph_set_training(f.g, false);
  lv_lm *lm = lv_lm_of(f.l);
  ck_assert_ptr_nonnull(lm);
  lv_lm_out o;
  ck_assert(lv_lm_fprop(lm, f.g, lf_ids(f.g, lv_shape2(T, B), kIds), paddings(f.g), NULL, NULL, &o));
  lf_ok(f.g);
  float full[T * B * 11], step[B * 11];
  EXPECT_OK(lv_tensor_to_host(o.xent.logits, full));
  lv_lm_state st;
  ck_assert(lv_lm_state_begin(lm, f.g, B, &st));
  for (int t = 0; t < T; t++) {
    lv_tensor *logits = NULL;
    ck_assert(lv_lm_step(lm, f.g, &st, lf_ids(f.g, lv_shape1(B), kIds + t * B), &logits));
    lf_ok(f.g);
    EXPECT_OK(lv_tensor_to_host(logits, step));
    for (int b = 0; b < B; b++)
      for (int v = 0; t < kLens[b] && v < 11; v++)
        ck_assert_msg(fabsf(step[b * 11 + v] - full[(t * B + b) * 11 + v]) < 1e-5f, "%s t=%d b=%d v=%d: %g vs %g",
                      cls, t, b, v, step[b * 11 + v], full[(t * B + b) * 11 + v]);
  }
  lv_lm_state_free(&st);
  lf_close(&f);
}

START_TEST(step_equals_fprop) {
  step_matches_fprop("RnnLm", RNN_SET("rnns.cell_tpl.num_hidden_nodes=7"));
  step_matches_fprop("TransformerLm", TR_SET("softmax.num_classes=11"));
}
END_TEST

static lv_tensor *xent_loss(lf_fixture *f, void *ctx) {
  (void)ctx;
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "ids", lf_ids(f->g, lv_shape2(T, B), kIds)));
  EXPECT_OK(lv_nmap_set(&in, "labels", lf_ids(f->g, lv_shape2(T, B), kLabels)));
  EXPECT_OK(lv_nmap_set(&in, "paddings", paddings(f->g)));
  ck_assert(lv_layer_fprop(f->l, f->g, &in, &out));
  lv_tensor *loss = lv_nmap_get(&out, "avg_xent");
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  return loss;
}

/* RnnLmNoEmbedding on RnnLm's embeddings of the ids, with RnnLm's other weights, gives
 * RnnLm's logits (the same layer without its embedding lookup). */
START_TEST(no_embedding_equals_rnn_lm) {
  lf_fixture fe, fn;
  lf_open(&fe, "RnnLm", RNN_SET("emb.scale_sqrt_depth=False"), 3);
  randomize(fe.vs, 17);
  lf_open(&fn, "RnnLmNoEmbedding",
          LF_SET("name=lm", "vocab_size=11", "rnns.num_layers=2", "rnns.num_input_nodes=4",
                 "rnns.cell_tpl.num_input_nodes=5", "rnns.cell_tpl.num_output_nodes=5", "rnns.skip_start=1",
                 "softmax.num_classes=11", "softmax.input_dim=5"),
          3);
  ck_assert_ptr_null(lv_varstore_find(fn.vs, "lm/emb/var_0/var"));
  for (int i = 0; i < lv_varstore_count(fn.vs); i++) {
    lv_var *v = lv_varstore_get(fn.vs, i), *src = lv_varstore_find(fe.vs, v->name);
    ck_assert_msg(src && lv_shape_eq(&src->value.shape, &v->value.shape), "RnnLm has no %s of its shape", v->name);
    memcpy(v->value.data, src->value.data, lv_tensor_nbytes(&v->value));
  }
  lv_graph_set_training(fe.g, false);
  lv_graph_set_training(fn.g, false);
  const float *emb = lv_f32(&lv_varstore_find(fe.vs, "lm/emb/var_0/var")->value);
  float x[T * B * 4];
  for (int i = 0; i < T * B; i++) memcpy(x + i * 4, emb + kIds[i] * 4, sizeof(float) * 4);
  lv_tensor hx = lv_tensor_view(LV_F32, lv_shape3(T, B, 4), x);
  lv_lm_out oe, on;
  ck_assert(lv_lm_fprop(lv_lm_of(fe.l), fe.g, lf_ids(fe.g, lv_shape2(T, B), kIds), paddings(fe.g), NULL, NULL, &oe));
  ck_assert(lv_lm_fprop(lv_lm_of(fn.l), fn.g, lv_graph_from_host(fn.g, &hx), paddings(fn.g), NULL, NULL, &on));
  lf_ok(fe.g);
  lf_ok(fn.g);
  float le[T * B * 11], ln[T * B * 11];
  EXPECT_OK(lv_tensor_to_host(oe.xent.logits, le));
  EXPECT_OK(lv_tensor_to_host(on.xent.logits, ln));
  for (int i = 0; i < T * B * 11; i++) ck_assert_msg(fabsf(le[i] - ln[i]) < 1e-6f, "logit %d: %g vs %g", i, le[i], ln[i]);
  lf_close(&fn);
  lf_close(&fe);
}
END_TEST

START_TEST(finite_differences) {
  lf_fixture f;
  lf_open(&f, "RnnLm", RNN_SET("rnns.cell_tpl.num_hidden_nodes=3"), 4);
  randomize(f.vs, 5);
  const lf_elems re[] = {{"lm/emb/var_0/var", {4, 9, 30, 43, -1}},
                         {"lm/rnns_0/wm/var", {0, 17, 40, 71, 100, -1}},
                         {"lm/rnns_1/w_proj/var", {0, 7, 14, -1}},
                         {"lm/softmax/weight_0/var", {3, 20, 54, -1}},
                         {NULL, {-1}}};
  lf_gradcheck(&f, xent_loss, NULL, re, 1e-2, 2e-3);
  lf_close(&f);
  lf_open(&f, "TransformerLm", TR_SET("softmax.num_classes=11"), 4);
  randomize(f.vs, 6);
  const lf_elems te[] = {{"lm/emb/var_0/var", {8, 17, 60, -1}},
                         {"lm/layer_0/multihead_self_atten/multihead_atten/query_proj/var", {0, 9, 33, -1}},
                         {"lm/layer_1/multihead_self_atten/multihead_atten/ctx_proj/var", {2, 40, -1}},
                         {"lm/layer_1/tr_fflayer/fflayer/fflayer_1/w/var", {5, 50, -1}},
                         {"lm/softmax/bias_0/var", {1, 7, -1}},
                         {NULL, {-1}}};
  lf_gradcheck(&f, xent_loss, NULL, te, 1e-2, 2e-3);
  lf_close(&f);
}
END_TEST

/* Forward and backward of the layer on ids/labels/paddings, dumped for the reference. */
static void parity_case(const char *name, const char *cls, const char *const *set, int heads) {
  if (!lv_parity_have_torch()) return;
  lf_fixture f;
  lf_open(&f, cls, set, 7);
  randomize(f.vs, 13);
  lv_parity pr;
  lv_parity_open(&pr, name);
  lv_parity_attr(&pr, "transformer", !strcmp(cls, "TransformerLm"));
  lv_parity_attr(&pr, "num_heads", heads);
  lv_parity_attr(&pr, "scale_sqrt_depth", !strcmp(cls, "TransformerLm"));
  for (int i = 0; i < 2 && strcmp(cls, "TransformerLm"); i++) {
    char k[64];
    snprintf(k, sizeof k, "lm/rnns_%d.cap", i);
    lv_parity_attr(&pr, k, lv_params_float(f.p, "rnns.cell_tpl.cell_value_cap"));
    snprintf(k, sizeof k, "lm/rnns_%d.fgb", i);
    lv_parity_attr(&pr, k, lv_params_float(f.p, "rnns.cell_tpl.forget_gate_bias"));
    snprintf(k, sizeof k, "lm/rnns_%d.nonlin", i);
    lv_parity_attr(&pr, k, lv_params_bool(f.p, "rnns.cell_tpl.output_nonlinearity"));
  }
  lv_parity_put_raw(&pr, "in:ids", LV_I32, lv_shape2(T, B), kIds);
  lv_parity_put_raw(&pr, "in:labels", LV_I32, lv_shape2(T, B), kLabels);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "ids", lf_ids(f.g, lv_shape2(T, B), kIds)));
  EXPECT_OK(lv_nmap_set(&in, "labels", lf_ids(f.g, lv_shape2(T, B), kLabels)));
  lv_tensor *pads = lv_parity_paddings(&pr, f.g, "paddings", T, B, kLens, true);
  EXPECT_OK(lv_nmap_set(&in, "paddings", pads));
  ck_assert(lv_layer_fprop(f.l, f.g, &in, &out));
  lv_tensor *loss = lv_parity_output(&pr, f.g, "logits", lv_nmap_get(&out, "logits"), NULL, 31);
  loss = lv_parity_output(&pr, f.g, "per_example_xent", lv_nmap_get(&out, "per_example_xent"), loss, 32);
  loss = lv_parity_output(&pr, f.g, "avg_xent", lv_nmap_get(&out, "avg_xent"), loss, 33);
  EXPECT_OK(lv_graph_backward(f.g, loss));
  lv_parity_put_vars(&pr, f.vs);
  lv_parity_run(&pr, "lm_layers.py");
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  lf_close(&f);
}

START_TEST(parity_rnn_lm) {
  parity_case("rnn_lm", "RnnLm", RNN_SET("rnns.cell_tpl.num_hidden_nodes=7", "emb.scale_sqrt_depth=False"), 0);
}
END_TEST

START_TEST(parity_transformer_lm) { parity_case("transformer_lm", "TransformerLm", TR_SET("softmax.num_classes=11"), 2); }
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("lm_layers");
  TCase *tc = tcase_create("lm");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, names_and_shapes);
  tcase_add_test(tc, config_errors);
  tcase_add_test(tc, residual_rule);
  tcase_add_test(tc, step_equals_fprop);
  tcase_add_test(tc, no_embedding_equals_rnn_lm);
  tcase_add_test(tc, finite_differences);
  tcase_add_test(tc, parity_rnn_lm);
  tcase_add_test(tc, parity_transformer_lm);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
