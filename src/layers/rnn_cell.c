/* LSTMCellSimple and LayerNormalizedLSTMCellSimple (Lingvo rnn_cell.py) and the cell
 * interface the RNN layers unroll. */
#include "layers/rnn_cell.h"

#include <string.h>

#include "base/names.h"

extern const lv_layer_class lv_lstm_cell_simple_class;
extern const lv_layer_class lv_ln_lstm_cell_simple_class;

/* ---- params ---------------------------------------------------------------------- */

static lv_params *rnn_cell_base_params(const char *cls) {
  lv_params *p = lv_layer_base_params(cls);
  lv_params_define_int(p, "inputs_arity", 1, "number of tensors expected for the inputs.act to FProp.");
  lv_params_define_int(p, "num_input_nodes", 0, "Number of input nodes.");
  lv_params_define_int(p, "num_output_nodes", 0,
                       "Number of output nodes. If num_hidden_nodes is 0, also used as cell size.");
  lv_params_define_bool(p, "reset_cell_state", false,
                        "Set True to support resetting cell state in scenarios where multiple inputs are packed "
                        "into a single training example (not supported by lingvoc: must stay False).");
  return p;
}

static lv_params *lstm_params(const char *cls) {
  lv_params *p = rnn_cell_base_params(cls);
  lv_params_define_int(p, "num_hidden_nodes", 0,
                       "Number of projection hidden nodes (see https://arxiv.org/abs/1603.08042). Set to 0 to "
                       "disable projection.");
  lv_params_define_float_or_none(p, "cell_value_cap", 10.0,
                         "LSTM cell values are capped to be within [-cell_value_cap, +cell_value_cap] if the "
                         "value is not None. When set to None, no capping is applied.");
  lv_params_define_float(p, "forget_gate_bias", 0.0, "Bias to apply to the forget gate.");
  lv_params_define_bool(p, "output_nonlinearity", true, "Whether or not to apply tanh non-linearity on lstm output.");
  lv_params_define_float(p, "zo_prob", 0.0,
                         "If > 0, applies ZoneOut regularization with the given prob (not supported by lingvoc: "
                         "must stay 0).");
  lv_params_define_bool(p, "enable_lstm_bias", true, "Enable the LSTM Cell bias.");
  lv_params_define_bool(p, "couple_input_forget_gates", false,
                        "Whether to couple the input and forget gates (not supported by lingvoc: must stay "
                        "False).");
  lv_params_define_bool(p, "apply_pruning", false,
                        "Whether to prune the weights while training (not supported by lingvoc: must stay False).");
  lv_params_define_bool(p, "apply_pruning_to_projection", false,
                        "Whether to prune the projection matrix while training (not supported by lingvoc: must "
                        "stay False).");
  lv_params *bi = lv_params_new();
  lv_params_define_string(bi, "method", "constant", "Initialization method (as params_init.method).");
  lv_params_define_float(bi, "scale", 0.0, "Scale of the initialization (the value for constant).");
  lv_params_define_params(p, "bias_init", bi, "Initialization parameters for bias");
  const lv_qdomain_name qd[] = {
      {"weight", "QDomain params for the weights"},
      {"c_state", "QDomain params for the c-state."},
      {"m_state", "QDomain params for the m-state."},
      {"fullyconnected", "QDomain params for the fully connected layer."},
      {"b_compression", "QDomain for the b matrix of the compression (lingvoc: no compression)."},
      {"c_compression", "QDomain for the c matrix of the compression (lingvoc: no compression)."},
      {"d_compression", "QDomain for the d matrix of the compression (lingvoc: no compression)."},
  };
  lv_qdomain_define_params(p, qd, 7);
  return p;
}

lv_params *lv_lstm_cell_simple_params(void) { return lstm_params("LSTMCellSimple"); }

lv_params *lv_ln_lstm_cell_simple_params(void) {
  lv_params *p = lstm_params("LayerNormalizedLSTMCellSimple");
  lv_params_define_float(p, "layer_norm_epsilon", 1e-8, "Tiny value to guard rsqr against.");
  return p;
}

/* ---- create ---------------------------------------------------------------------- */

static lv_status lstm_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_lstm_cell *l = (lv_lstm_cell *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  const char *sc = base->scope;
  lv_var_vn vn;
  if (lv_varstore_scope_vn(vs, sc, &vn) && vn.per_step) /* RNNCell.__init__'s assertion */
    return lv_status_make(LV_ERR_INVALID, "%s: vn.per_step_vn: We do not support per step VN in RNN cells (Lingvo's "
                          "RNNCell); turn per_step_vn on only where Lingvo has it (the attention's or the softmax's "
                          "own vn, with its scale) or use task.vn.global_vn", sc);
  l->layer_norm = lv_params_has(p, "layer_norm_epsilon");
  l->num_input = lv_params_int(p, "num_input_nodes");
  l->output = lv_params_int(p, "num_output_nodes");
  int64_t nh = lv_params_int(p, "num_hidden_nodes");
  if (l->num_input <= 0 || l->output <= 0 || nh < 0)
    return lv_status_make(LV_ERR_INVALID,
                          "%s: num_input_nodes and num_output_nodes must be > 0 and num_hidden_nodes >= 0, got "
                          "%lld, %lld and %lld",
                          sc, (long long)l->num_input, (long long)l->output, (long long)nh);
  l->hidden = nh ? nh : l->output;
  if (lv_params_int(p, "inputs_arity") != 1)
    return lv_status_make(LV_ERR_INVALID, "%s: inputs_arity must be 1, got %lld", sc,
                          (long long)lv_params_int(p, "inputs_arity"));
  static const char *const unsupported[] = {"reset_cell_state", "couple_input_forget_gates", "apply_pruning",
                                            "apply_pruning_to_projection"};
  for (size_t i = 0; i < LV_ARRAY_LEN(unsupported); i++)
    if (lv_params_bool(p, unsupported[i]))
      return lv_status_make(LV_ERR_INVALID, "%s: %s=True is not supported by lingvoc's %s; set it to False", sc,
                            unsupported[i], lv_params_str(p, "cls"));
  if (lv_params_float(p, "zo_prob") != 0.0)
    return lv_status_make(LV_ERR_INVALID, "%s: zo_prob=%g: zoneout is not supported by lingvoc's %s; set it to 0",
                          sc, lv_params_float(p, "zo_prob"), lv_params_str(p, "cls"));
  l->cell_value_cap = 0.0f;
  if (lv_params_is_set(p, "cell_value_cap")) {
    double cap = lv_params_float(p, "cell_value_cap");
    if (!(cap > 0.0))
      return lv_status_make(LV_ERR_INVALID, "%s: cell_value_cap must be > 0 or None, got %g", sc, cap);
    l->cell_value_cap = (float)cap;
  }
  l->forget_gate_bias = (float)lv_params_float(p, "forget_gate_bias");
  l->output_nonlinearity = lv_params_bool(p, "output_nonlinearity");
  if (l->layer_norm) {
    double eps = lv_params_float(p, "layer_norm_epsilon");
    if (!(eps > 0.0))
      return lv_status_make(LV_ERR_INVALID, "%s: layer_norm_epsilon must be > 0, got %g", sc, eps);
    l->ln_eps = (float)eps;
  }
  LV_TRY(lv_layer_add_var(base, "wm", lv_shape2(l->num_input + l->output, 4 * l->hidden), NULL, true, &l->wm));
  lv_layer_vn_target(base, l->wm, false);
  if (nh) LV_TRY(lv_layer_add_var(base, "w_proj", lv_shape2(l->hidden, l->output), NULL, true, &l->w_proj));
  if (nh) lv_layer_vn_target(base, l->w_proj, false);
  if (lv_params_bool(p, "enable_lstm_bias")) {
    lv_var_init bi;
    const char *m = lv_params_str(p, "bias_init.method");
    if (!lv_init_method_from_name(m, &bi.method)) {
      char known[512];
      lv_names_join(lv_init_method_names, LV_INIT_COUNT, ", ", known, sizeof known);
      return lv_status_make(LV_ERR_INVALID, "%s: bias_init.method: unknown method \"%s\" (known: %s)", sc, m, known);
    }
    bi.scale = lv_params_float(p, "bias_init.scale");
    LV_TRY(lv_layer_add_var(base, "b", lv_shape1(4 * l->hidden), &bi, true, &l->b));
    lv_layer_vn_target(base, l->b, false);
  }
  if (l->layer_norm) {
    lv_var_init one = {LV_INIT_CONSTANT, 1.0};
    LV_TRY(lv_layer_add_var(base, "ln_scale", lv_shape1(4 * l->hidden), &one, true, &l->ln_scale));
    lv_layer_vn_target(base, l->ln_scale, false);
  }
  LV_TRY(lv_qlayer_setup(&l->q, base));
  lv_qlayer_bind_weight(&l->q, "weight", l->wm);
  lv_qlayer_bind_weight(&l->q, "m_state", l->w_proj);
  if (!lv_qlayer_on(&l->q)) return NULL;
  if (l->cell_value_cap > 0.0f && lv_params_is_set(p, "qdomain.default"))
    return lv_status_make(LV_ERR_INVALID, "%s: cell_value_cap must be None with qdomain.default set (Lingvo's "
                          "LSTMCellSimple asserts it); a qdomain inherited from a parent keeps the cap", sc);
  static const char *const m_acts[] = {"zero_m", "m_output", "m_output_projection", "m_zoneout"};
  static const char *const c_acts[] = {"zero_c", "mixed", "c_couple_invert", "c_input_gate", "c_forget_gate",
                                       "c_output_gate", "c_zoneout"};
  for (size_t i = 0; i < LV_ARRAY_LEN(m_acts); i++) LV_TRY(lv_qlayer_track(&l->q, "m_state", m_acts[i]));
  for (size_t i = 0; i < LV_ARRAY_LEN(c_acts); i++) LV_TRY(lv_qlayer_track(&l->q, "c_state", c_acts[i]));
  LV_TRY(lv_qlayer_track(&l->q, "fullyconnected", "add_bias"));
  static const char *const ln_acts[] = {"add_bias_0", "add_bias_1", "add_bias_2", "add_bias_3"};
  for (size_t i = 0; l->layer_norm && i < LV_ARRAY_LEN(ln_acts); i++)
    LV_TRY(lv_qlayer_track(&l->q, "fullyconnected", ln_acts[i]));
  return NULL;
}

/* ---- the cell hooks -------------------------------------------------------------- */

enum { W_M, W_B, W_SCALE, W_PROJ }; /* lv_rnn_seq.w slots */

static int64_t lstm_input_dim(const lv_layer *l) { return ((const lv_lstm_cell *)l)->num_input; }
static int64_t lstm_output_dim(const lv_layer *l) { return ((const lv_lstm_cell *)l)->output; }
static int64_t lstm_hidden_dim(const lv_layer *l) { return ((const lv_lstm_cell *)l)->hidden; }

/* s1 = {c, m}, or with padding [B, 1] old * padding + new * (1 - padding): Lingvo's
 * ApplyPadding, exactly the old state where padding is 1. */
static bool padded_state(lv_graph *g, const lv_rnn_state *s0, lv_tensor *c, lv_tensor *m, lv_tensor *padding,
                         lv_rnn_state *s1) {
  if (padding) {
    lv_tensor *keep = lv_op_add_scalar(g, lv_op_scale(g, padding, -1.0f), 1.0f);
    c = lv_op_add(g, lv_op_mul(g, s0->c, padding), lv_op_mul(g, c, keep));
    m = lv_op_add(g, lv_op_mul(g, s0->m, padding), lv_op_mul(g, m, keep));
  }
  s1->c = c;
  s1->m = m;
  return c && m;
}

/* Lingvo's _GetBias (b, zeros without enable_lstm_bias, plus forget_gate_bias on the f_g
 * block) through QWeight("fullyconnected"). */
static lv_tensor *quantized_bias(lv_lstm_cell *l, lv_graph *g) {
  const int64_t h = l->hidden;
  lv_tensor *b = l->b ? &l->b->value : NULL;
  if (l->forget_gate_bias != 0.0f) {
    lv_tensor *parts[3] = {lv_graph_fill(g, lv_shape1(2 * h), 0.0f), lv_graph_fill(g, lv_shape1(h), l->forget_gate_bias),
                           lv_graph_fill(g, lv_shape1(h), 0.0f)};
    lv_tensor *fgb = lv_op_concat(g, parts, 3, 0);
    b = b ? lv_op_add(g, b, fgb) : fgb;
  }
  if (!b) b = lv_graph_fill(g, lv_shape1(4 * h), 0.0f);
  return lv_qlayer_weight(&l->q, g, "fullyconnected", b);
}

/* Lingvo's _GatesInternal with its QActs, op by op; gates [B, 4H] = x . wm + b (quantized),
 * the m's projection and the padding as the fused path. */
static bool quantized_step(lv_lstm_cell *l, lv_graph *g, const lv_rnn_seq *seq, lv_tensor *gates,
                           const lv_rnn_state *s0, lv_tensor *padding, lv_rnn_state *s1) {
  lv_qlayer *q = &l->q;
  const int64_t h = l->hidden;
  lv_tensor *gate[4];
  if (l->layer_norm) { /* LayerNormalizedLSTMCellSimple._Gates: each gate's own "add_bias_<i>" */
    for (int i = 0; i < 4; i++) {
      char act[24]; /* "add_bias_" and any int */
      snprintf(act, sizeof act, "add_bias_%d", i);
      gate[i] = lv_qlayer_act(q, g, act, lv_op_slice(g, gates, 1, i * h, h));
    }
  } else {
    gates = lv_qlayer_act(q, g, "add_bias", gates);
    for (int i = 0; i < 4; i++) gate[i] = lv_op_slice(g, gates, 1, i * h, h);
  }
  lv_tensor *i_i = gate[0], *i_g = gate[1], *f_g = gate[2], *o_g = gate[3];
  lv_tensor *forget = lv_qlayer_act(q, g, "c_input_gate", lv_op_mul(g, lv_op_activation(g, f_g, LV_ACT_SIGMOID), s0->c));
  lv_tensor *input = lv_qlayer_act(
      q, g, "c_forget_gate",
      lv_op_mul(g, lv_op_activation(g, i_g, LV_ACT_SIGMOID), lv_op_activation(g, i_i, LV_ACT_TANH)));
  lv_tensor *c = lv_qlayer_act(q, g, "c_output_gate", lv_op_add(g, forget, input));
  if (c && l->cell_value_cap > 0.0f) c = lv_op_clip(g, c, -l->cell_value_cap, l->cell_value_cap);
  lv_tensor *m = lv_qlayer_act(
      q, g, "m_output",
      lv_op_mul(g, lv_op_activation(g, o_g, LV_ACT_SIGMOID), l->output_nonlinearity ? lv_op_activation(g, c, LV_ACT_TANH)
                                                                                     : c));
  if (l->w_proj) m = lv_qlayer_act(q, g, "m_output_projection", lv_op_matmul(g, m, seq->w[W_PROJ], false, false));
  return padded_state(g, s0, c, m, padding ? lv_qlayer_ract(q, g, "default", padding, LV_QDIST_PADDING) : NULL, s1);
}

static bool lstm_begin(lv_layer *base, lv_graph *g, lv_tensor *x, bool seq_grad, lv_rnn_seq *seq) {
  lv_lstm_cell *l = (lv_lstm_cell *)base;
  memset(seq, 0, sizeof *seq);
  if (!x) return false;
  if (x->shape.rank != 3 || x->shape.d[2] > l->num_input || x->shape.d[2] < 1) {
    char s[96];
    lv_graph_fail(g, "%s: the input must be [T, B, num_input_nodes=%lld], got %s", base->scope,
                  (long long)l->num_input, lv_shape_str(&x->shape, s, sizeof s));
    return false;
  }
  seq->t = x->shape.d[0];
  seq->b = x->shape.d[1];
  const int64_t d = x->shape.d[2];
  seq->extra = l->num_input - d;
  const bool q = lv_qlayer_on(&l->q);
  lv_tensor *wm = q ? lv_qlayer_weight(&l->q, g, "weight", &l->wm->value) : &l->wm->value;
  /* Rows of wm multiply concat([x, extra, m_prev]): the x rows go into one GEMM over all
   * steps, the rest into each step's. */
  lv_tensor *wx = lv_op_slice(g, wm, 0, 0, d);
  seq->w[W_M] = lv_op_slice(g, wm, 0, d, seq->extra + l->output);
  seq->xw = lv_op_matmul(g, x, wx, false, false);
  if (q && !l->layer_norm) seq->xw = lv_op_add(g, seq->xw, quantized_bias(l, g));
  else if (l->b && !l->layer_norm) seq->xw = lv_op_add(g, seq->xw, &l->b->value);
  /* The steps' gates are xw[t] + m_prev . w[W_M]: wm's recurrent rows get their gradient
   * in one GEMM over the sequence (the steps' matmuls then only give m_prev's). */
  if (seq_grad && seq->extra == 0 && seq->w[W_M])
    seq->xw = lv_op_rnn_seq_anchor(g, seq->xw, seq->w[W_M], &seq->w[W_M]);
  if (l->layer_norm) {
    /* Each step scales and biases [B, 4H]: broadcast ln_scale and b to that shape once, so
     * the steps' ops are dense and their gradients accumulate densely, reduced over the
     * batch once per sequence rather than once per step. */
    lv_tensor *zeros = lv_graph_zeros(g, LV_F32, lv_shape2(seq->b, 4 * l->hidden));
    seq->w[W_SCALE] = lv_op_add(g, zeros, &l->ln_scale->value);
    if (q) seq->w[W_B] = lv_op_add(g, zeros, quantized_bias(l, g)); /* with forget_gate_bias */
    else if (l->b) seq->w[W_B] = lv_op_add(g, zeros, &l->b->value);
  }
  if (l->w_proj) seq->w[W_PROJ] = q ? lv_qlayer_weight(&l->q, g, "m_state", &l->w_proj->value) : &l->w_proj->value;
  return seq->xw && seq->w[W_M] && (!l->layer_norm || (seq->w[W_SCALE] && (!l->b || seq->w[W_B])));
}

static bool lstm_step(lv_layer *base, lv_graph *g, const lv_rnn_seq *seq, int64_t t, const lv_rnn_state *s0,
                      lv_tensor *extra, lv_tensor *padding, lv_rnn_state *s1) {
  lv_lstm_cell *l = (lv_lstm_cell *)base;
  const int64_t b = seq->b, h4 = 4 * l->hidden;
  if ((seq->extra > 0) != (extra != NULL) ||
      (extra && (extra->shape.rank != 2 || extra->shape.d[0] != b || extra->shape.d[1] != seq->extra))) {
    char s[96] = "none";
    if (extra) lv_shape_str(&extra->shape, s, sizeof s);
    lv_graph_fail(g, "%s: a step's extra input must be [B=%lld, %lld], got %s", base->scope, (long long)b,
                  (long long)seq->extra, s);
    return false;
  }
  lv_tensor *xw_t = lv_op_reshape(g, lv_op_slice(g, seq->xw, 0, t, 1), lv_shape2(b, h4));
  lv_tensor *rec = s0->m;
  if (extra) {
    lv_tensor *parts[2] = {extra, s0->m};
    rec = lv_op_concat(g, parts, 2, 1);
  }
  lv_tensor *gates = lv_op_addmm(g, xw_t, rec, seq->w[W_M]);
  if (l->layer_norm) {
    /* Each gate's block of [x, m] . wm is normalized on its own, then scaled; b after. */
    lv_tensor *n = lv_op_layer_norm(g, lv_op_reshape(g, gates, lv_shape3(b, 4, l->hidden)), NULL, NULL, l->ln_eps);
    gates = lv_op_mul(g, lv_op_reshape(g, n, lv_shape2(b, h4)), seq->w[W_SCALE]);
    if (seq->w[W_B]) gates = lv_op_add(g, gates, seq->w[W_B]);
  }
  if (!gates) return false;
  if (lv_qlayer_on(&l->q)) return quantized_step(l, g, seq, gates, s0, padding, s1);
  if (!l->w_proj)
    return lv_op_lstm_step(g, gates, s0->c, s0->m, padding, l->forget_gate_bias, l->cell_value_cap,
                           l->output_nonlinearity, &s1->c, &s1->m);
  /* With a projection m is [B, output] while the gate step's m is [B, hidden]: the step
   * runs unpadded and padding is applied after the projection, as Lingvo does. */
  lv_tensor *c = NULL, *m = NULL;
  if (!lv_op_lstm_step(g, gates, s0->c, lv_graph_zeros(g, LV_F32, s0->c->shape), NULL, l->forget_gate_bias,
                       l->cell_value_cap, l->output_nonlinearity, &c, &m))
    return false;
  m = lv_op_matmul(g, m, seq->w[W_PROJ], false, false);
  return padded_state(g, s0, c, m, padding, s1);
}

/* One step as a plain layer: {"act" [B, D], "paddings" [B, 1] (optional), "m", "c"
 * (optional, else zeros)} -> {"act" = "m", "m", "c"}. */
static bool lstm_fprop(lv_layer *base, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  const lv_rnn_cell_class *cc = lv_rnn_cell_class_of(base);
  lv_tensor *x = lv_layer_in(base, g, in, "act");
  if (!x) return false;
  if (x->shape.rank != 2) {
    char s[96];
    lv_graph_fail(g, "%s: one step's act must be [B, D], got %s", base->scope, lv_shape_str(&x->shape, s, sizeof s));
    return false;
  }
  int64_t b = x->shape.d[0];
  lv_rnn_state s0, s1;
  if (!lv_rnn_cell_zero_state(base, g, b, &s0)) return false;
  if (lv_nmap_get(in, "m")) s0.m = lv_nmap_get(in, "m");
  if (lv_nmap_get(in, "c")) s0.c = lv_nmap_get(in, "c");
  lv_rnn_seq seq;
  if (!cc->begin(base, g, lv_op_reshape(g, x, lv_shape3(1, b, x->shape.d[1])), false, &seq)) return false;
  if (seq.extra) {
    lv_graph_fail(g, "%s: act must be [B, num_input_nodes=%lld], got [%lld, %lld]", base->scope,
                  (long long)cc->input_dim(base), (long long)b, (long long)x->shape.d[1]);
    return false;
  }
  if (!cc->step(base, g, &seq, 0, &s0, NULL, lv_nmap_get(in, "paddings"), &s1)) return false;
  return lv_layer_set_out(base, g, out, "act", s1.m) && lv_layer_set_out(base, g, out, "m", s1.m) &&
         lv_layer_set_out(base, g, out, "c", s1.c);
}

const lv_layer_class lv_lstm_cell_simple_class = {
    .cls = "LSTMCellSimple",
    .params = lv_lstm_cell_simple_params,
    .size = sizeof(lv_lstm_cell),
    .create = lstm_create,
    .fprop = lstm_fprop,
};

const lv_layer_class lv_ln_lstm_cell_simple_class = {
    .cls = "LayerNormalizedLSTMCellSimple",
    .params = lv_ln_lstm_cell_simple_params,
    .size = sizeof(lv_lstm_cell),
    .create = lstm_create,
    .fprop = lstm_fprop,
};

static const lv_rnn_cell_class kCells[] = {
    {&lv_lstm_cell_simple_class, lstm_input_dim, lstm_output_dim, lstm_hidden_dim, lstm_begin, lstm_step},
    {&lv_ln_lstm_cell_simple_class, lstm_input_dim, lstm_output_dim, lstm_hidden_dim, lstm_begin, lstm_step},
};

/* ---- the interface ---------------------------------------------------------------- */

const lv_rnn_cell_class *lv_rnn_cell_class_of(const lv_layer *l) {
  for (size_t i = 0; l && i < LV_ARRAY_LEN(kCells); i++)
    if (l->cls == kCells[i].layer) return &kCells[i];
  return NULL;
}

lv_status lv_rnn_cell_create(const lv_params *p, const char *parent_scope, lv_varstore *vs, const char *who,
                             lv_layer **out) {
  *out = NULL;
  const char *cls = p ? lv_params_str(p, "cls") : NULL;
  const lv_layer_class *c = lv_layer_class_find(cls);
  bool is_cell = false;
  for (size_t i = 0; c && i < LV_ARRAY_LEN(kCells); i++) is_cell |= kCells[i].layer == c;
  if (!is_cell) {
    const char *names[LV_ARRAY_LEN(kCells)];
    for (size_t i = 0; i < LV_ARRAY_LEN(kCells); i++) names[i] = kCells[i].layer->cls;
    char known[256];
    lv_names_join(names, (int)LV_ARRAY_LEN(kCells), ", ", known, sizeof known);
    return lv_status_make(LV_ERR_INVALID, "%s.cls: \"%s\" is not an RNN cell class (known: %s)", who,
                          cls ? cls : "None", known);
  }
  return lv_layer_create(p, parent_scope, vs, out);
}

bool lv_rnn_cell_zero_state(lv_layer *cell, lv_graph *g, int64_t b, lv_rnn_state *out) {
  const lv_rnn_cell_class *cc = lv_rnn_cell_class_of(cell);
  out->m = lv_graph_zeros(g, LV_F32, lv_shape2(b, cc->output_dim(cell)));
  out->c = lv_graph_zeros(g, LV_F32, lv_shape2(b, cc->hidden_dim(cell)));
  return out->m && out->c;
}
