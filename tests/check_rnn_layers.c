/* src/layers/rnn_cell.c and rnn_layers.c: variable names and shapes as Lingvo names
 * them, output shapes, padded steps keeping the state, the backward direction starting
 * at each sequence's own end, cell_value_cap clipping, errors for bad params, and
 * finite-difference gradients of small cells (every variable and the input). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "base/rng.h"
#include "layers/attention.h"
#include "layers/layer.h"
#include "layers/rnn_cell.h"
#include "layers/rnn_layers.h"

static lv_params *params_of(const char *cls) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  return p;
}

/* A cell template (LSTMCellSimple or LayerNormalizedLSTMCellSimple) at `key` of p. */
static void set_cell(lv_params *p, const char *key, const char *cls, int in, int out, int hidden) {
  char k[128];
  EXPECT_OK(lv_params_set_class(p, key, cls));
  snprintf(k, sizeof k, "%s.num_input_nodes", key);
  EXPECT_OK(lv_params_set_int(p, k, in));
  snprintf(k, sizeof k, "%s.num_output_nodes", key);
  EXPECT_OK(lv_params_set_int(p, k, out));
  snprintf(k, sizeof k, "%s.num_hidden_nodes", key);
  EXPECT_OK(lv_params_set_int(p, k, hidden));
  snprintf(k, sizeof k, "%s.params_init.method", key);
  EXPECT_OK(lv_params_set_string(p, k, "uniform"));
  snprintf(k, sizeof k, "%s.params_init.scale", key);
  EXPECT_OK(lv_params_set_float(p, k, 0.5));
}

typedef struct built {
  lv_params *p;
  lv_varstore *vs;
  lv_layer *l;
} built;

static built build(lv_params *p) {
  built b = {p, lv_varstore_create(), NULL};
  lv_params_freeze(p);
  EXPECT_OK(lv_layer_create(p, "", b.vs, &b.l));
  EXPECT_OK(lv_varstore_finalize(b.vs, 7));
  return b;
}

static lv_status try_build(lv_params *p) {
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  lv_params_freeze(p);
  lv_status s = lv_layer_create(p, "", vs, &l);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
  return s;
}

static void unbuild(built *b) {
  lv_layer_free(b->l);
  lv_varstore_destroy(b->vs);
  lv_params_free(b->p);
}

static void expect_var(lv_varstore *vs, const char *name, lv_shape s) {
  lv_var *v = lv_varstore_find(vs, name);
  ck_assert_msg(v, "no variable %s", name);
  char a[64], e[64];
  ck_assert_msg(lv_shape_eq(&v->value.shape, &s), "%s: shape %s, want %s", name,
                lv_shape_str(&v->value.shape, a, sizeof a), lv_shape_str(&s, e, sizeof e));
}

static lv_tensor *rand_tensor(lv_graph *g, lv_shape s, uint64_t seed, float scale) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, s);
  lv_rng r;
  lv_rng_init(&r, seed, 3);
  for (int64_t i = 0; i < lv_tensor_numel(t); i++) lv_f32(t)[i] = scale * (2.0f * lv_rng_uniform(&r) - 1.0f);
  return t;
}

/* paddings [T, B, 1]: 0 for the first lens[b] steps. */
static lv_tensor *paddings(lv_graph *g, int t, int b, const int *lens) {
  lv_tensor *p = lv_graph_tensor(g, LV_F32, lv_shape3(t, b, 1));
  for (int i = 0; i < t; i++)
    for (int j = 0; j < b; j++) lv_f32(p)[i * b + j] = i < lens[j] ? 0.0f : 1.0f;
  return p;
}

/* FRNNWithAttention's source for run_act (NULL for the other layers): host data kept
 * across graphs, the first src_len[b] positions of sequence b real. */
static const float *g_src;
static lv_shape g_src_shape;
static const int *g_src_len;

/* When set, run_act gives the layer state0.m / state0.c of these shapes. */
static bool g_state0;
static lv_shape g_state0_shape[2];

static lv_tensor *run_act(lv_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *pad) {
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "act", x));
  if (pad) EXPECT_OK(lv_nmap_set(&in, "paddings", pad));
  if (g_src) {
    lv_tensor *src = lv_graph_tensor(g, LV_F32, g_src_shape);
    memcpy(src->data, g_src, sizeof(float) * (size_t)lv_shape_numel(&g_src_shape));
    int64_t S = g_src_shape.d[0], B = g_src_shape.d[1];
    lv_tensor *sp = lv_graph_tensor(g, LV_F32, lv_shape2(S, B));
    for (int64_t i = 0; i < S * B; i++) lv_f32(sp)[i] = i / B < g_src_len[i % B] ? 0.0f : 1.0f;
    EXPECT_OK(lv_nmap_set(&in, "src_encs", src));
    EXPECT_OK(lv_nmap_set(&in, "src_paddings", sp));
  }
  if (g_state0) {
    /* state0.m and .c: fixed values, [B, the cell's output and hidden widths] */
    for (int k = 0; k < 2; k++) {
      lv_tensor *t = lv_graph_tensor(g, LV_F32, g_state0_shape[k]);
      for (int64_t i = 0; i < lv_tensor_numel(t); i++) lv_f32(t)[i] = 0.8f * sinf(1.7f * (float)i + (float)k);
      EXPECT_OK(lv_nmap_set(&in, k ? "state0.c" : "state0.m", t));
    }
  }
  bool ok = lv_layer_fprop(l, g, &in, &out);
  lv_status s = lv_graph_status(g);
  ck_assert_msg(ok && !s, "fprop: %s", s ? lv_status_msg(s) : "?");
  lv_tensor *y = lv_nmap_get(&out, "act");
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  return y;
}

/* ---- variables ------------------------------------------------------------------- */

START_TEST(lstm_cell_variables) {
  lv_params *p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 5, 3, 0);
  built b = build(p);
  ck_assert_int_eq(lv_varstore_count(b.vs), 2);
  expect_var(b.vs, "rnn/cell/wm/var", lv_shape2(8, 12));
  expect_var(b.vs, "rnn/cell/b/var", lv_shape1(12));
  lv_var *bias = lv_varstore_find(b.vs, "rnn/cell/b/var");
  for (int i = 0; i < 12; i++) ck_assert_float_eq(lv_f32(&bias->value)[i], 0.0f);
  unbuild(&b);

  /* Projection: wm [in + out, 4 * hidden], w_proj [hidden, out]; no bias when disabled. */
  p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 5, 3, 7);
  EXPECT_OK(lv_params_set_string(p, "cell.name", "lstm"));
  EXPECT_OK(lv_params_set_bool(p, "cell.enable_lstm_bias", false));
  b = build(p);
  ck_assert_int_eq(lv_varstore_count(b.vs), 2);
  expect_var(b.vs, "rnn/lstm/wm/var", lv_shape2(8, 28));
  expect_var(b.vs, "rnn/lstm/w_proj/var", lv_shape2(7, 3));
  unbuild(&b);

  /* Layer-normalized: ln_scale [4H] initialized to 1, bias_init honored. */
  p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LayerNormalizedLSTMCellSimple", 4, 6, 0);
  EXPECT_OK(lv_params_set_float(p, "cell.bias_init.scale", 0.25));
  ck_assert_double_eq(lv_params_float(p, "cell.layer_norm_epsilon"), 1e-8);
  b = build(p);
  expect_var(b.vs, "rnn/cell/wm/var", lv_shape2(10, 24));
  expect_var(b.vs, "rnn/cell/b/var", lv_shape1(24));
  expect_var(b.vs, "rnn/cell/ln_scale/var", lv_shape1(24));
  lv_var *s = lv_varstore_find(b.vs, "rnn/cell/ln_scale/var");
  bias = lv_varstore_find(b.vs, "rnn/cell/b/var");
  for (int i = 0; i < 24; i++) {
    ck_assert_float_eq(lv_f32(&s->value)[i], 1.0f);
    ck_assert_float_eq(lv_f32(&bias->value)[i], 0.25f);
  }
  unbuild(&b);
}
END_TEST

START_TEST(lstm_param_defaults) {
  lv_params *p = params_of("LSTMCellSimple");
  ck_assert_double_eq(lv_params_float(p, "cell_value_cap"), 10.0);
  ck_assert_double_eq(lv_params_float(p, "forget_gate_bias"), 0.0);
  ck_assert(lv_params_bool(p, "output_nonlinearity"));
  ck_assert(lv_params_bool(p, "enable_lstm_bias"));
  ck_assert(!lv_params_bool(p, "couple_input_forget_gates"));
  ck_assert_double_eq(lv_params_float(p, "zo_prob"), 0.0);
  ck_assert_int_eq(lv_params_int(p, "num_hidden_nodes"), 0);
  ck_assert_str_eq(lv_params_str(p, "bias_init.method"), "constant");
  lv_params_free(p);
  p = params_of("StackedFRNNLayerByLayer");
  ck_assert_int_eq(lv_params_int(p, "num_layers"), 1);
  ck_assert_int_eq(lv_params_int(p, "skip_start"), 1);
  ck_assert_int_eq(lv_params_int(p, "num_input_nodes"), -1);
  ck_assert_str_eq(lv_params_str(p, "rnn_tpl.cls"), "FRNN");
  ck_assert_str_eq(lv_params_str(p, "cell_tpl.cls"), "LSTMCellSimple");
  ck_assert_double_eq(lv_params_float(p, "dropout.keep_prob"), 1.0);
  lv_params_free(p);
}
END_TEST

START_TEST(bidi_and_stack_names) {
  lv_params *p = params_of("BidirectionalFRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "bi"));
  set_cell(p, "fwd", "LSTMCellSimple", 4, 3, 0);
  set_cell(p, "bak", "LayerNormalizedLSTMCellSimple", 4, 5, 0);
  EXPECT_OK(lv_params_set_string(p, "fwd.name", "f"));
  built b = build(p);
  expect_var(b.vs, "bi/fwd/f/wm/var", lv_shape2(7, 12));
  expect_var(b.vs, "bi/bak/cell/wm/var", lv_shape2(9, 20));
  expect_var(b.vs, "bi/bak/cell/ln_scale/var", lv_shape1(20));
  lv_shape o;
  ck_assert(b.l->cls->out_shape(b.l, lv_shape3(6, 2, 4), &o));
  ck_assert_int_eq(o.d[2], 8);
  unbuild(&b);

  p = params_of("StackedFRNNLayerByLayer");
  EXPECT_OK(lv_params_set_string(p, "name", "enc"));
  EXPECT_OK(lv_params_set_int(p, "num_layers", 3));
  set_cell(p, "cell_tpl", "LSTMCellSimple", 6, 6, 0);
  EXPECT_OK(lv_params_set_int(p, "num_input_nodes", 4));
  EXPECT_OK(lv_params_set_int(p, "num_output_nodes", 2));
  b = build(p);
  expect_var(b.vs, "enc/frnn_0/enc_0/wm/var", lv_shape2(10, 24));
  expect_var(b.vs, "enc/frnn_1/enc_1/wm/var", lv_shape2(12, 24));
  expect_var(b.vs, "enc/frnn_2/enc_2/wm/var", lv_shape2(8, 8));
  ck_assert_int_eq(lv_varstore_count(b.vs), 6);
  unbuild(&b);

  p = params_of("StackedBiFRNNLayerByLayer");
  EXPECT_OK(lv_params_set_string(p, "name", "enc"));
  EXPECT_OK(lv_params_set_int(p, "num_layers", 2));
  set_cell(p, "cell_tpl", "LSTMCellSimple", 5, 3, 0);
  EXPECT_OK(lv_params_set_int(p, "num_output_nodes", 8));
  b = build(p);
  expect_var(b.vs, "enc/bidi_rnn_0/fwd/f_rnn_0/wm/var", lv_shape2(8, 12));
  expect_var(b.vs, "enc/bidi_rnn_0/bak/b_rnn_0/wm/var", lv_shape2(8, 12));
  expect_var(b.vs, "enc/bidi_rnn_1/fwd/f_rnn_1/wm/var", lv_shape2(10, 16));
  expect_var(b.vs, "enc/bidi_rnn_1/bak/b_rnn_1/b/var", lv_shape1(16));
  lv_graph *g = lv_graph_create(0);
  lv_tensor *y = run_act(b.l, g, rand_tensor(g, lv_shape3(4, 3, 5), 1, 1.0f), NULL);
  ck_assert_int_eq(y->shape.rank, 3);
  ck_assert_int_eq(y->shape.d[0], 4);
  ck_assert_int_eq(y->shape.d[1], 3);
  ck_assert_int_eq(y->shape.d[2], 8);
  lv_graph_destroy(g);
  unbuild(&b);
}
END_TEST

/* ---- errors ---------------------------------------------------------------------- */

START_TEST(bad_params) {
  lv_params *p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 4, 3, 0);
  EXPECT_OK(lv_params_set_bool(p, "cell.couple_input_forget_gates", true));
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "rnn/cell", "couple_input_forget_gates");

  p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 4, 3, 0);
  EXPECT_OK(lv_params_set_float(p, "cell.zo_prob", 0.1));
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "rnn/cell", "zo_prob", "zoneout");

  p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 0, 3, 0);
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "rnn/cell", "num_input_nodes");

  p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 4, 3, 0);
  EXPECT_OK(lv_params_set_float(p, "cell.cell_value_cap", -1.0));
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "cell_value_cap");

  p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  EXPECT_OK(lv_params_set_class(p, "cell", "FCLayer"));
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "rnn.cell", "FCLayer", "not an RNN cell", "LSTMCellSimple");

  p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 4, 3, 0);
  EXPECT_OK(lv_params_set_bool(p, "packed_input", true));
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "rnn", "packed_input");

  /* Layer 0 outputs 3 but layer 1 takes 4. */
  p = params_of("StackedFRNNLayerByLayer");
  EXPECT_OK(lv_params_set_string(p, "name", "enc"));
  EXPECT_OK(lv_params_set_int(p, "num_layers", 2));
  set_cell(p, "cell_tpl", "LSTMCellSimple", 4, 3, 0);
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "enc", "layer 0 outputs 3", "layer 1 takes num_input_nodes=4");

  p = params_of("StackedFRNNLayerByLayer");
  EXPECT_OK(lv_params_set_string(p, "name", "enc"));
  set_cell(p, "cell_tpl", "LSTMCellSimple", 4, 4, 0);
  EXPECT_OK(lv_params_set_float(p, "dropout.keep_prob", 0.0));
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "enc", "keep_prob");

  /* An input of the wrong depth fails the graph naming the layer. */
  p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 4, 3, 0);
  built b = build(p);
  lv_graph *g = lv_graph_create(0);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "act", rand_tensor(g, lv_shape3(2, 2, 5), 1, 1.0f)));
  ck_assert(!lv_layer_fprop(b.l, g, &in, &out));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "rnn", "num_input_nodes=4");
  lv_graph_reset(g);
  lv_nmap_clear(&in);
  EXPECT_OK(lv_nmap_set(&in, "act", rand_tensor(g, lv_shape3(2, 2, 4), 1, 1.0f)));
  EXPECT_OK(lv_nmap_set(&in, "paddings", lv_graph_zeros(g, LV_F32, lv_shape3(3, 2, 1))));
  ck_assert(!lv_layer_fprop(b.l, g, &in, &out));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "rnn", "paddings");
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  lv_graph_destroy(g);
  unbuild(&b);
}
END_TEST

/* ---- padding --------------------------------------------------------------------- */

static void padded_case(const char *cls, int hidden) {
  enum { T = 6, B = 3, D = 4, H = 5 };
  const int lens[B] = {6, 2, 4};
  lv_params *p = params_of("BidirectionalFRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "bi"));
  set_cell(p, "fwd", cls, D, H, hidden);
  set_cell(p, "bak", cls, D, H, hidden);
  built b = build(p);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = rand_tensor(g, lv_shape3(T, B, D), 11, 1.0f);
  lv_tensor *y = run_act(b.l, g, x, paddings(g, T, B, lens));
  ck_assert_int_eq(y->shape.d[2], 2 * H);
  const float *yo = lv_f32(y);
  for (int j = 0; j < B; j++) {
    /* Forward: padded steps repeat the last real output; backward: still the zero state. */
    for (int t = lens[j]; t < T; t++)
      for (int k = 0; k < H; k++) {
        ck_assert_float_eq(yo[(t * B + j) * 2 * H + k], yo[((lens[j] - 1) * B + j) * 2 * H + k]);
        ck_assert_float_eq(yo[(t * B + j) * 2 * H + H + k], 0.0f);
      }
    /* Each sequence alone, cut to its length, gives the same outputs: the padded tail
     * never feeds either direction's state. */
    lv_tensor *xj = lv_graph_tensor(g, LV_F32, lv_shape3(lens[j], 1, D));
    for (int t = 0; t < lens[j]; t++) memcpy(lv_f32(xj) + t * D, lv_f32(x) + (t * B + j) * D, sizeof(float) * D);
    lv_tensor *yj = run_act(b.l, g, xj, NULL);
    for (int t = 0; t < lens[j]; t++)
      for (int k = 0; k < 2 * H; k++)
        ck_assert_msg(fabsf(lv_f32(yj)[t * 2 * H + k] - yo[(t * B + j) * 2 * H + k]) < 1e-5f,
                      "%s seq %d step %d unit %d: alone %f, batched %f", cls, j, t, k, lv_f32(yj)[t * 2 * H + k],
                      yo[(t * B + j) * 2 * H + k]);
  }
  lv_graph_destroy(g);
  unbuild(&b);
}

START_TEST(padded_steps_keep_state) {
  padded_case("LSTMCellSimple", 0);
  padded_case("LSTMCellSimple", 7); /* projection: padding applied after it */
  padded_case("LayerNormalizedLSTMCellSimple", 0);
}
END_TEST

START_TEST(final_state_and_state0) {
  enum { T = 4, B = 2, D = 3, H = 4 };
  const int lens[B] = {4, 2};
  lv_params *p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", D, H, 0);
  built b = build(p);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = rand_tensor(g, lv_shape3(T, B, D), 5, 1.0f);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "act", x));
  EXPECT_OK(lv_nmap_set(&in, "paddings", paddings(g, T, B, lens)));
  ck_assert(lv_layer_fprop(b.l, g, &in, &out));
  lv_tensor *y = lv_nmap_get(&out, "act"), *fm = lv_nmap_get(&out, "final_state.m");
  ck_assert_ptr_nonnull(lv_nmap_get(&out, "final_state.c"));
  for (int j = 0; j < B; j++)
    for (int k = 0; k < H; k++) ck_assert_float_eq(lv_f32(fm)[j * H + k], lv_f32(y)[((lens[j] - 1) * B + j) * H + k]);
  /* Running the first two steps, then the last two from that state, is one run. */
  lv_tensor *x01 = lv_op_slice(g, x, 0, 0, 2), *x23 = lv_op_slice(g, x, 0, 2, 2);
  lv_nmap_clear(&in);
  lv_nmap_clear(&out);
  EXPECT_OK(lv_nmap_set(&in, "act", x01));
  ck_assert(lv_layer_fprop(b.l, g, &in, &out));
  lv_nmap in2, out2;
  lv_nmap_init(&in2);
  lv_nmap_init(&out2);
  EXPECT_OK(lv_nmap_set(&in2, "act", x23));
  EXPECT_OK(lv_nmap_set(&in2, "state0.m", lv_nmap_get(&out, "final_state.m")));
  EXPECT_OK(lv_nmap_set(&in2, "state0.c", lv_nmap_get(&out, "final_state.c")));
  ck_assert(lv_layer_fprop(b.l, g, &in2, &out2));
  lv_tensor *y2 = lv_nmap_get(&out2, "act");
  /* Sequence 0 is unpadded: steps 2, 3 agree. */
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < H; k++)
      ck_assert(fabsf(lv_f32(y2)[(t * B) * H + k] - lv_f32(y)[((t + 2) * B) * H + k]) < 1e-6f);
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  lv_nmap_free(&in2);
  lv_nmap_free(&out2);
  lv_graph_destroy(g);
  unbuild(&b);
}
END_TEST

START_TEST(cell_value_cap_clips) {
  /* One step of the cell as a layer: a big input drives c past a small cap. */
  lv_params *p = params_of("LSTMCellSimple");
  EXPECT_OK(lv_params_set_string(p, "name", "lstm"));
  EXPECT_OK(lv_params_set_int(p, "num_input_nodes", 3));
  EXPECT_OK(lv_params_set_int(p, "num_output_nodes", 4));
  EXPECT_OK(lv_params_set_float(p, "cell_value_cap", 0.3));
  EXPECT_OK(lv_params_set_float(p, "forget_gate_bias", 2.0));
  EXPECT_OK(lv_params_set_bool(p, "output_nonlinearity", false));
  built b = build(p);
  lv_graph *g = lv_graph_create(0);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "act", rand_tensor(g, lv_shape2(5, 3), 2, 4.0f)));
  EXPECT_OK(lv_nmap_set(&in, "c", rand_tensor(g, lv_shape2(5, 4), 3, 5.0f)));
  ck_assert(lv_layer_fprop(b.l, g, &in, &out));
  lv_tensor *c = lv_nmap_get(&out, "c"), *m = lv_nmap_get(&out, "m");
  int at_cap = 0;
  for (int i = 0; i < 20; i++) {
    ck_assert(fabsf(lv_f32(c)[i]) <= 0.3f + 1e-7f);
    at_cap += fabsf(lv_f32(c)[i]) == 0.3f;
    /* output_nonlinearity=False: |m| = sigmoid(o_g) * |c| <= |c|. */
    ck_assert(fabsf(lv_f32(m)[i]) <= fabsf(lv_f32(c)[i]) + 1e-7f);
  }
  ck_assert_int_gt(at_cap, 3);
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  lv_graph_destroy(g);
  unbuild(&b);
}
END_TEST

/* ---- finite differences ---------------------------------------------------------- */

/* loss = sum(y * w) in double over a fixed weighting. */
static double loss_of(const lv_tensor *y) {
  double s = 0;
  for (int64_t i = 0; i < lv_tensor_numel(y); i++) s += lv_f32(y)[i] * (0.5 + 0.37 * (double)((i * 7919) % 13));
  return s;
}

static double fd_forward(built *b, const float *xh, lv_shape xs, const int *lens) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = lv_graph_tensor(g, LV_F32, xs);
  memcpy(x->data, xh, sizeof(float) * (size_t)lv_shape_numel(&xs));
  double l = loss_of(run_act(b->l, g, x, paddings(g, (int)xs.d[0], (int)xs.d[1], lens)));
  lv_graph_destroy(g);
  return l;
}

/* Every variable's and the input's gradient against central differences (double
 * loss; float32 model, so eps 1e-2 and a loose tolerance). */
static void fd_check(lv_params *p, lv_shape xs, const int *lens) {
  built b = build(p);
  int64_t nx = lv_shape_numel(&xs);
  float *xh = malloc(sizeof(float) * (size_t)nx);
  lv_rng r;
  lv_rng_init(&r, 99, 1);
  for (int64_t i = 0; i < nx; i++) xh[i] = 2.0f * lv_rng_uniform(&r) - 1.0f;

  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = lv_graph_tensor(g, LV_F32, xs);
  memcpy(x->data, xh, sizeof(float) * (size_t)nx);
  x->requires_grad = true;
  lv_varstore_zero_grads(b.vs);
  lv_tensor *y = run_act(b.l, g, x, paddings(g, (int)xs.d[0], (int)xs.d[1], lens));
  lv_tensor *w = lv_graph_tensor(g, LV_F32, y->shape);
  for (int64_t i = 0; i < lv_tensor_numel(y); i++) lv_f32(w)[i] = (float)(0.5 + 0.37 * (double)((i * 7919) % 13));
  EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, lv_op_mul(g, y, w), LV_ALL_AXES, false)));
  ck_assert_ptr_nonnull(x->grad);

  const double eps = 1e-2, tol = 2e-2;
  for (int i = 0; i <= lv_varstore_count(b.vs); i++) {
    float *v, *an;
    int64_t n;
    const char *name;
    if (i < lv_varstore_count(b.vs)) {
      lv_var *var = lv_varstore_get(b.vs, i);
      v = lv_f32(&var->value), an = lv_f32(&var->grad), n = lv_tensor_numel(&var->value), name = var->name;
    } else {
      v = xh, an = lv_f32(x->grad), n = nx, name = "input";
    }
    for (int64_t j = 0; j < n; j++) {
      float keep = v[j];
      v[j] = keep + (float)eps;
      double lp = fd_forward(&b, xh, xs, lens);
      v[j] = keep - (float)eps;
      double lm = fd_forward(&b, xh, xs, lens);
      v[j] = keep;
      double num = (lp - lm) / (2 * eps);
      double err = fabs(num - an[j]) / fmax(1.0, fmax(fabs(num), fabs(an[j])));
      ck_assert_msg(err < tol, "%s[%lld]: analytic %.6f, numeric %.6f", name, (long long)j, an[j], num);
    }
  }
  free(xh);
  lv_graph_destroy(g);
  unbuild(&b);
}

START_TEST(fd_lstm_projection) {
  const int lens[2] = {3, 2};
  lv_params *p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  set_cell(p, "cell", "LSTMCellSimple", 3, 2, 3);
  EXPECT_OK(lv_params_set_float(p, "cell.forget_gate_bias", 0.7));
  EXPECT_OK(lv_params_set_float(p, "cell.bias_init.scale", 0.1));
  fd_check(p, lv_shape3(3, 2, 3), lens);
}
END_TEST

START_TEST(fd_ln_lstm_reverse) {
  const int lens[2] = {2, 3};
  lv_params *p = params_of("FRNN");
  EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
  EXPECT_OK(lv_params_set_bool(p, "reverse", true));
  set_cell(p, "cell", "LayerNormalizedLSTMCellSimple", 3, 3, 0);
  EXPECT_OK(lv_params_set_bool(p, "cell.output_nonlinearity", false));
  fd_check(p, lv_shape3(3, 2, 3), lens);
}
END_TEST

/* A given state0 (the first step's m_prev), forward and reversed: the recurrent weight's
 * gradient includes state0.m^T . dgates of the first step. */
START_TEST(fd_lstm_state0) {
  const int lens[2] = {3, 2};
  for (int rev = 0; rev < 2; rev++) {
    lv_params *p = params_of("FRNN");
    EXPECT_OK(lv_params_set_string(p, "name", "rnn"));
    EXPECT_OK(lv_params_set_bool(p, "reverse", rev == 1));
    set_cell(p, "cell", "LSTMCellSimple", 3, 2, 3);
    g_state0 = true;
    g_state0_shape[0] = lv_shape2(2, 2);
    g_state0_shape[1] = lv_shape2(2, 3);
    fd_check(p, lv_shape3(3, 2, 3), lens);
    g_state0 = false;
  }
}
END_TEST

START_TEST(fd_stacked_residual) {
  const int lens[2] = {3, 1};
  lv_params *p = params_of("StackedFRNNLayerByLayer");
  EXPECT_OK(lv_params_set_string(p, "name", "enc"));
  EXPECT_OK(lv_params_set_int(p, "num_layers", 2));
  set_cell(p, "cell_tpl", "LSTMCellSimple", 3, 3, 0);
  fd_check(p, lv_shape3(3, 2, 3), lens);
}
END_TEST

/* The residual of layer >= skip_start adds the layer's input. */
START_TEST(stacked_residual_and_dropout) {
  enum { T = 3, B = 2, D = 4 };
  lv_params *base = params_of("StackedFRNNLayerByLayer");
  EXPECT_OK(lv_params_set_string(base, "name", "enc"));
  EXPECT_OK(lv_params_set_int(base, "num_layers", 2));
  set_cell(base, "cell_tpl", "LSTMCellSimple", D, D, 0);
  lv_params *noskip = lv_params_copy(base);
  EXPECT_OK(lv_params_set_int(noskip, "skip_start", 5));
  lv_params *drop = lv_params_copy(base);
  EXPECT_OK(lv_params_set_float(drop, "dropout.keep_prob", 0.5));
  built a = build(base), c = build(noskip), d = build(drop);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = rand_tensor(g, lv_shape3(T, B, D), 8, 1.0f);
  /* Same seeds and names: the same weights in all three. */
  lv_tensor *ya = run_act(a.l, g, x, NULL), *yc = run_act(c.l, g, x, NULL);
  /* Without the residual: y = layer1(layer0(x)); with it: layer1(h) + h, h = layer0(x). */
  lv_frnn_layer *l0 = (lv_frnn_layer *)((lv_stacked_rnn_layer *)a.l)->rnn[0];
  lv_frnn_layer *l1 = (lv_frnn_layer *)((lv_stacked_rnn_layer *)a.l)->rnn[1];
  lv_tensor *h, *y1;
  ck_assert(lv_frnn_run(l0, g, x, NULL, NULL, &h, NULL));
  ck_assert(lv_frnn_run(l1, g, h, NULL, NULL, &y1, NULL));
  for (int i = 0; i < T * B * D; i++) {
    ck_assert(fabsf(lv_f32(ya)[i] - (lv_f32(y1)[i] + lv_f32(h)[i])) < 1e-6f);
    ck_assert(fabsf(lv_f32(yc)[i] - lv_f32(y1)[i]) < 1e-6f);
  }
  /* Dropout: training zeroes some of layer 1's outputs (before the residual), eval none. */
  lv_tensor *yd = run_act(d.l, g, x, NULL);
  int differ = 0;
  for (int i = 0; i < T * B * D; i++) differ += fabsf(lv_f32(yd)[i] - lv_f32(ya)[i]) > 1e-6f;
  ck_assert_int_gt(differ, 0);
  lv_graph_set_training(g, false);
  lv_tensor *ye = run_act(d.l, g, x, NULL);
  for (int i = 0; i < T * B * D; i++) ck_assert(fabsf(lv_f32(ye)[i] - lv_f32(ya)[i]) < 1e-6f);
  lv_graph_destroy(g);
  unbuild(&a);
  unbuild(&c);
  unbuild(&d);
}
END_TEST

/* ---- FRNNWithAttention ----------------------------------------------------------- */

static lv_params *atten_params(int d, int c, int out, bool prev_in, bool prev_out) {
  lv_params *p = params_of("FRNNWithAttention");
  EXPECT_OK(lv_params_set_string(p, "name", "dec"));
  set_cell(p, "cell", "LSTMCellSimple", d + (prev_in ? c : 0), out, 0);
  EXPECT_OK(lv_params_set_int(p, "attention.source_dim", c));
  EXPECT_OK(lv_params_set_int(p, "attention.query_dim", out));
  EXPECT_OK(lv_params_set_int(p, "attention.hidden_dim", 4));
  EXPECT_OK(lv_params_set_bool(p, "input_prev_atten_ctx", prev_in));
  EXPECT_OK(lv_params_set_bool(p, "output_prev_atten_ctx", prev_out));
  return p;
}

START_TEST(frnn_with_attention_steps) {
  enum { T = 3, B = 2, D = 3, C = 5, H = 4, S = 4 };
  const int src_len[B] = {4, 2}, lens[B] = {3, 2};
  float *src = malloc(sizeof(float) * S * B * C);
  lv_rng r;
  lv_rng_init(&r, 42, 0);
  for (int i = 0; i < S * B * C; i++) src[i] = 2.0f * lv_rng_uniform(&r) - 1.0f;
  g_src = src, g_src_shape = lv_shape3(S, B, C), g_src_len = src_len;
  for (int prev_out = 0; prev_out < 2; prev_out++) {
    built b = build(atten_params(D, C, H, true, prev_out));
    expect_var(b.vs, "dec/cell/wm/var", lv_shape2(D + C + H, 4 * H));
    expect_var(b.vs, "dec/atten/source_var/var", lv_shape2(C, 4));
    expect_var(b.vs, "dec/atten/query_var/var", lv_shape2(H, 4));
    lv_frnn_atten_layer *l = (lv_frnn_atten_layer *)b.l;
    lv_graph *g = lv_graph_create(0);
    lv_tensor *x = rand_tensor(g, lv_shape3(T, B, D), 4, 1.0f);
    lv_nmap in, out;
    lv_nmap_init(&in);
    lv_nmap_init(&out);
    EXPECT_OK(lv_nmap_set(&in, "act", x));
    lv_tensor *pad = paddings(g, T, B, lens);
    EXPECT_OK(lv_nmap_set(&in, "paddings", pad));
    lv_tensor *srct = lv_graph_tensor(g, LV_F32, g_src_shape);
    memcpy(srct->data, src, sizeof(float) * S * B * C);
    lv_tensor *sp = lv_graph_tensor(g, LV_F32, lv_shape2(S, B));
    for (int i = 0; i < S * B; i++) lv_f32(sp)[i] = i / B < src_len[i % B] ? 0.0f : 1.0f;
    EXPECT_OK(lv_nmap_set(&in, "src_encs", srct));
    EXPECT_OK(lv_nmap_set(&in, "src_paddings", sp));
    ck_assert(lv_layer_fprop(b.l, g, &in, &out));
    lv_tensor *act = lv_nmap_get(&out, "act"), *ctx = lv_nmap_get(&out, "atten_context");
    lv_tensor *probs = lv_nmap_get(&out, "atten_probs");
    ck_assert(lv_shape_eq(&act->shape, &(lv_shape){3, {T, B, H}}));
    ck_assert(lv_shape_eq(&ctx->shape, &(lv_shape){3, {T, B, C}}));
    ck_assert(lv_shape_eq(&probs->shape, &(lv_shape){3, {T, B, S}}));
    /* The same recurrence by hand: the cell's one-step fprop on concat(x_t, ctx_{t-1}),
     * then the attention queried with the new m. */
    lv_atten_packed packed;
    ck_assert(lv_attention_pack_source(l->atten, g, srct, NULL, sp, &packed));
    lv_tensor *m = lv_graph_zeros(g, LV_F32, lv_shape2(B, H)), *c = lv_graph_zeros(g, LV_F32, lv_shape2(B, H));
    lv_tensor *a = NULL, *pr = NULL;
    ck_assert(lv_attention_compute_context(l->atten, g, &packed, m, &a, &pr));
    for (int t = 0; t < T; t++) {
      lv_tensor *parts[2] = {lv_op_reshape(g, lv_op_slice(g, x, 0, t, 1), lv_shape2(B, D)), a};
      lv_nmap ci, co;
      lv_nmap_init(&ci);
      lv_nmap_init(&co);
      EXPECT_OK(lv_nmap_set(&ci, "act", lv_op_concat(g, parts, 2, 1)));
      EXPECT_OK(lv_nmap_set(&ci, "m", m));
      EXPECT_OK(lv_nmap_set(&ci, "c", c));
      EXPECT_OK(lv_nmap_set(&ci, "paddings", lv_op_reshape(g, lv_op_slice(g, pad, 0, t, 1), lv_shape2(B, 1))));
      ck_assert(lv_layer_fprop(l->cell, g, &ci, &co));
      m = lv_nmap_get(&co, "m"), c = lv_nmap_get(&co, "c");
      lv_tensor *a_prev = a, *pr_prev = pr;
      ck_assert(lv_attention_compute_context(l->atten, g, &packed, m, &a, &pr));
      lv_tensor *want_ctx = prev_out ? a_prev : a, *want_pr = prev_out ? pr_prev : pr;
      for (int j = 0; j < B; j++) {
        for (int k = 0; k < H; k++) ck_assert(fabsf(lv_f32(act)[(t * B + j) * H + k] - lv_f32(m)[j * H + k]) < 1e-6f);
        for (int k = 0; k < C; k++)
          ck_assert(fabsf(lv_f32(ctx)[(t * B + j) * C + k] - lv_f32(want_ctx)[j * C + k]) < 1e-6f);
        for (int k = 0; k < S; k++) {
          ck_assert(fabsf(lv_f32(probs)[(t * B + j) * S + k] - lv_f32(want_pr)[j * S + k]) < 1e-6f);
          if (k >= src_len[j]) ck_assert_float_eq(lv_f32(probs)[(t * B + j) * S + k], 0.0f);
        }
      }
      lv_nmap_free(&ci);
      lv_nmap_free(&co);
    }
    ck_assert(fabsf(lv_f32(lv_nmap_get(&out, "final_state.atten"))[0] - lv_f32(a)[0]) < 1e-6f);
    lv_nmap_free(&in);
    lv_nmap_free(&out);
    lv_graph_destroy(g);
    unbuild(&b);
  }
  g_src = NULL;
  free(src);
}
END_TEST

START_TEST(frnn_with_attention_errors) {
  /* The cell must take act + context. */
  lv_params *p = atten_params(3, 5, 4, true, false);
  EXPECT_OK(lv_params_set_int(p, "cell.num_input_nodes", 3));
  built b = build(p);
  enum { S = 2, B = 2 };
  const int src_len[B] = {2, 2};
  float src[S * B * 5] = {0};
  g_src = src, g_src_shape = lv_shape3(S, B, 5), g_src_len = src_len;
  lv_graph *g = lv_graph_create(0);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "act", rand_tensor(g, lv_shape3(2, B, 3), 1, 1.0f)));
  EXPECT_OK(lv_nmap_set(&in, "src_encs", lv_graph_zeros(g, LV_F32, g_src_shape)));
  ck_assert(!lv_layer_fprop(b.l, g, &in, &out));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "dec", "num_input_nodes=3", "attention context 5");
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  lv_graph_destroy(g);
  unbuild(&b);
  g_src = NULL;
  p = atten_params(3, 5, 4, true, false);
  EXPECT_OK(lv_params_set_int(p, "attention.query_dim", 6));
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "dec", "query_dim (6)", "num_output_nodes (4)");
  p = atten_params(3, 5, 4, true, false);
  EXPECT_OK(lv_params_set_bool(p, "use_zero_atten_state", true));
  EXPECT_ERR(try_build(p), LV_ERR_INVALID, "dec", "atten_context_dim");
}
END_TEST

START_TEST(fd_frnn_with_attention) {
  enum { S = 3, B = 2, C = 3 };
  const int src_len[B] = {3, 2}, lens[B] = {2, 3};
  float *src = malloc(sizeof(float) * S * B * C);
  lv_rng r;
  lv_rng_init(&r, 43, 0);
  for (int i = 0; i < S * B * C; i++) src[i] = 2.0f * lv_rng_uniform(&r) - 1.0f;
  g_src = src, g_src_shape = lv_shape3(S, B, C), g_src_len = src_len;
  fd_check(atten_params(2, C, 3, true, false), lv_shape3(3, B, 2), lens);
  lv_params *p = atten_params(2, C, 3, false, true);
  EXPECT_OK(lv_params_set_bool(p, "use_zero_atten_state", true));
  EXPECT_OK(lv_params_set_int(p, "atten_context_dim", C));
  fd_check(p, lv_shape3(3, B, 2), lens);
  g_src = NULL;
  free(src);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("rnn_layers");
  TCase *tc = tcase_create("all");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, lstm_cell_variables);
  tcase_add_test(tc, lstm_param_defaults);
  tcase_add_test(tc, bidi_and_stack_names);
  tcase_add_test(tc, bad_params);
  tcase_add_test(tc, padded_steps_keep_state);
  tcase_add_test(tc, final_state_and_state0);
  tcase_add_test(tc, cell_value_cap_clips);
  tcase_add_test(tc, fd_lstm_projection);
  tcase_add_test(tc, fd_ln_lstm_reverse);
  tcase_add_test(tc, fd_lstm_state0);
  tcase_add_test(tc, fd_stacked_residual);
  tcase_add_test(tc, stacked_residual_and_dropout);
  tcase_add_test(tc, frnn_with_attention_steps);
  tcase_add_test(tc, frnn_with_attention_errors);
  tcase_add_test(tc, fd_frnn_with_attention);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
