/* LSTMCellSimple (projection, cell_value_cap clipping active, forget_gate_bias),
 * LayerNormalizedLSTMCellSimple and BidirectionalFRNN against PyTorch references
 * (tests/parity/lstm_frnn.py, frnn_bidi.py): a padded batch with unequal lengths,
 * random weights, outputs and every gradient (weights and inputs) to 1e-5 relative.
 * Skips with a message where /usr/bin/python3 cannot import torch. */
#include <check.h>

#include "check_util.h"
#include "parity.h"
#include "base/rng.h"
#include "layers/layer.h"
#include "layers/rnn_layers.h"

static lv_params *params_of(const char *cls) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  return p;
}

static void set_cell(lv_params *p, const char *key, const char *cls, int in, int out, int hidden, double cap,
                     double fgb, bool nonlin) {
  char k[128];
  EXPECT_OK(lv_params_set_class(p, key, cls));
#define SET(fn, sub, v)                              \
  snprintf(k, sizeof k, "%s.%s", key, sub);          \
  EXPECT_OK(fn(p, k, v))
  SET(lv_params_set_int, "num_input_nodes", in);
  SET(lv_params_set_int, "num_output_nodes", out);
  SET(lv_params_set_int, "num_hidden_nodes", hidden);
  SET(lv_params_set_float, "cell_value_cap", cap);
  SET(lv_params_set_float, "forget_gate_bias", fgb);
  SET(lv_params_set_bool, "output_nonlinearity", nonlin);
#undef SET
}

/* Attributes the reference needs for the cell at scope. */
static void cell_attrs(lv_parity *pr, const char *scope, double cap, double fgb, bool nonlin) {
  char k[200];
  snprintf(k, sizeof k, "%s.cap", scope);
  lv_parity_attr(pr, k, cap);
  snprintf(k, sizeof k, "%s.fgb", scope);
  lv_parity_attr(pr, k, fgb);
  snprintf(k, sizeof k, "%s.nonlin", scope);
  lv_parity_attr(pr, k, nonlin);
}

/* Random weights (ln_scale around 1) so every gate and bias matters. */
static void randomize(lv_varstore *vs) {
  lv_rng r;
  lv_rng_init(&r, 1234, 5);
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    lv_var *v = lv_varstore_get(vs, i);
    bool scale = strstr(v->name, "/ln_scale/") != NULL;
    for (int64_t j = 0; j < lv_tensor_numel(&v->value); j++)
      lv_f32(&v->value)[j] = (scale ? 1.0f : 0.0f) + 0.6f * (2.0f * lv_rng_uniform(&r) - 1.0f);
  }
}

/* Builds p, runs {"act", "paddings"} forward and backward, dumps everything and runs the
 * reference script. */
static void run_case(const char *name, lv_params *p, const char *script, int t, int b, int d, const int *lens,
                     void (*attrs)(lv_parity *), bool final_state) {
  if (!lv_parity_have_torch()) return;
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(p, "", vs, &l));
  EXPECT_OK(lv_varstore_finalize(vs, 3));
  randomize(vs);
  lv_varstore_zero_grads(vs);
  lv_parity pr;
  lv_parity_open(&pr, name);
  attrs(&pr);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = lv_parity_input(&pr, g, "act", lv_shape3(t, b, d), 1.5f, 17);
  lv_tensor *pad = lv_parity_paddings(&pr, g, "paddings", t, b, lens, true);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "act", x));
  EXPECT_OK(lv_nmap_set(&in, "paddings", pad));
  ck_assert(lv_layer_fprop(l, g, &in, &out));
  lv_tensor *loss = lv_parity_output(&pr, g, "act", lv_nmap_get(&out, "act"), NULL, 21);
  if (final_state) {
    loss = lv_parity_output(&pr, g, "final_state.m", lv_nmap_get(&out, "final_state.m"), loss, 22);
    loss = lv_parity_output(&pr, g, "final_state.c", lv_nmap_get(&out, "final_state.c"), loss, 23);
  }
  EXPECT_OK(lv_graph_backward(g, loss));
  lv_parity_put_grad(&pr, "act", x);
  lv_parity_put_vars(&pr, vs);
  lv_parity_run(&pr, script);
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}

static void attrs_proj(lv_parity *pr) {
  lv_parity_attr(pr, "reverse", 0);
  cell_attrs(pr, "rnn/cell", 0.5, 0.3, true);
  lv_parity_attr(pr, "min_clipped", 0.05); /* the cap must bind for at least 5% of c */
}

START_TEST(lstm_cell_simple_projection_cap) {
  const int lens[3] = {5, 2, 4};
  lv_params *p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 5, 4, 6, 0.5, 0.3, true);
  run_case("lstm_proj", p, "lstm_frnn.py", 5, 3, 5, lens, attrs_proj, true);
}
END_TEST

static void attrs_ln(lv_parity *pr) {
  lv_parity_attr(pr, "reverse", 1);
  cell_attrs(pr, "rnn/cell", 10.0, 1.0, true);
  lv_parity_attr(pr, "rnn/cell.eps", 1e-8);
}

START_TEST(ln_lstm_cell_simple) {
  const int lens[3] = {3, 6, 5};
  lv_params *p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  EXPECT_OK(lv_params_set_bool(p, "reverse", true));
  set_cell(p, "cell", "LayerNormalizedLSTMCellSimple", 4, 5, 0, 10.0, 1.0, true);
  run_case("ln_lstm", p, "lstm_frnn.py", 6, 3, 4, lens, attrs_ln, true);
}
END_TEST

static void attrs_bidi(lv_parity *pr) {
  cell_attrs(pr, "bi/fwd/cell", 10.0, 0.0, true);
  cell_attrs(pr, "bi/bak/cell", 0.8, 0.5, false);
  lv_parity_attr(pr, "bi/bak/cell.eps", 1e-8);
}

START_TEST(bidirectional_frnn) {
  const int lens[4] = {6, 3, 1, 5};
  lv_params *p = params_of("BidirectionalFRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "bi"));
  set_cell(p, "fwd", "LSTMCellSimple", 4, 3, 0, 10.0, 0.0, true);
  set_cell(p, "bak", "LayerNormalizedLSTMCellSimple", 4, 5, 0, 0.8, 0.5, false);
  run_case("bidi", p, "frnn_bidi.py", 6, 4, 4, lens, attrs_bidi, false);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("parity_rnn");
  TCase *tc = tcase_create("torch");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, lstm_cell_simple_projection_cap);
  tcase_add_test(tc, ln_lstm_cell_simple);
  tcase_add_test(tc, bidirectional_frnn);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
