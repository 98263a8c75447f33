/* Recurrent cells (Lingvo lingvo/core/rnn_cell.py): LSTMCellSimple and
 * LayerNormalizedLSTMCellSimple, on one cell interface that the RNN layers (rnn_layers.h)
 * unroll over time-major sequences.
 *
 * A cell is an ordinary layer (its lv_layer_class is in layers.def, so `cls` picks it in
 * a params template) whose class also has an lv_rnn_cell_class: the step hooks. The RNN
 * layer runs a cell in three moves:
 *   begin       once per sequence: x [T, B, D] -> seq.xw [T, B, G], the input's share of
 *               every step in one GEMM (Lingvo's ProjectInputSequence), plus the per-call
 *               weights the steps reuse. D may be less than num_input_nodes: the rest of
 *               the cell's input (FRNNWithAttention's previous context) is then given to
 *               each step as `extra` [B, num_input_nodes - D], the columns after x's;
 *   zero_state  {m [B, output], c [B, hidden]} of zeros;
 *   step        (state0, step t of seq, extra_t, padding_t [B, 1]) -> state1; a padded
 *               step (padding 1.0) keeps state0.
 * The cell's output at a step is state.m.
 *
 * Variables are Lingvo's: "<scope>/wm/var" [num_input_nodes + output, 4 * hidden] with gate
 * column blocks (i_i, i_g, f_g, o_g), "<scope>/b/var" [4 * hidden] (enable_lstm_bias),
 * "<scope>/w_proj/var" [hidden, output] (num_hidden_nodes > 0) and, for the layer-normalized
 * cell, "<scope>/ln_scale/var" [4 * hidden] (init 1). hidden = num_hidden_nodes or
 * num_output_nodes; output = num_output_nodes. */
#ifndef LV_LAYERS_RNN_CELL_H
#define LV_LAYERS_RNN_CELL_H

#include "layers/layer.h"
#include "layers/qdomain.h"

/* A cell's recurrent state (arena tensors). */
typedef struct lv_rnn_state {
  lv_tensor *m; /* [B, output]: the cell's output */
  lv_tensor *c; /* [B, hidden] */
} lv_rnn_state;

/* What begin computes for one sequence; the steps read it. */
typedef struct lv_rnn_seq {
  int64_t t, b;      /* steps, batch */
  int64_t extra;     /* width of the per-step extra input (0: none) */
  lv_tensor *xw;     /* [T, B, G]: the input's contribution to each step's gates */
  lv_tensor *w[4];   /* per-call weights the cell's steps reuse (the cell's business) */
} lv_rnn_seq;

typedef struct lv_rnn_cell_class {
  const lv_layer_class *layer;
  int64_t (*input_dim)(const lv_layer *l);  /* num_input_nodes */
  int64_t (*output_dim)(const lv_layer *l); /* width of m */
  int64_t (*hidden_dim)(const lv_layer *l); /* width of c */
  /* x [T, B, D <= input_dim] -> seq. False with the graph's error set. seq_grad: the
   * caller names the steps' outputs after them (lv_op_rnn_seq_finish on seq.xw, ops.h),
   * so the cell may compute its recurrent weight's gradient once for the sequence. */
  bool (*begin)(lv_layer *l, lv_graph *g, lv_tensor *x, bool seq_grad, lv_rnn_seq *seq);
  /* Step t of seq from s0 with extra [B, seq.extra] (NULL when seq.extra is 0) and
   * padding [B, 1] (NULL: none padded) into s1. */
  bool (*step)(lv_layer *l, lv_graph *g, const lv_rnn_seq *seq, int64_t t, const lv_rnn_state *s0,
               lv_tensor *extra, lv_tensor *padding, lv_rnn_state *s1);
} lv_rnn_cell_class;

/* The step hooks of l's class, or NULL if l is not a cell. */
const lv_rnn_cell_class *lv_rnn_cell_class_of(const lv_layer *l);
/* A cell from its params (p.cls must name a cell class; p is borrowed). Errors name
 * `who` (the parent's key, "frnn/cell") and the cell classes there are. */
lv_status lv_rnn_cell_create(const lv_params *p, const char *parent_scope, lv_varstore *vs, const char *who,
                             lv_layer **out);
/* {m, c} of zeros for batch b. */
bool lv_rnn_cell_zero_state(lv_layer *cell, lv_graph *g, int64_t b, lv_rnn_state *out);

/* LSTMCellSimple / LayerNormalizedLSTMCellSimple. */
typedef struct lv_lstm_cell {
  lv_layer base;
  int64_t num_input, output, hidden;
  bool layer_norm;
  float ln_eps;
  float cell_value_cap; /* <= 0: no clipping (cell_value_cap = None) */
  float forget_gate_bias;
  bool output_nonlinearity;
  lv_var *wm, *b, *w_proj, *ln_scale; /* b, w_proj, ln_scale may be NULL */
  /* p.qdomain: default, weight, c_state, m_state, fullyconnected (and Lingvo's pruning
   * b/c/d_compression, which must stay None). Quantized, a step runs
   * Lingvo's _Mix / _RetrieveAndSplitGates / _GatesInternal op by op instead of the fused
   * lstm_step: wm through QWeight("weight"), b (with forget_gate_bias) through
   * QWeight("fullyconnected"), the gates through QAct "add_bias", sigmoid(f) * c through
   * "c_input_gate", sigmoid(i_g) * tanh(i_i) through "c_forget_gate" (Lingvo's names), their
   * sum through "c_output_gate", the output through "m_output", w_proj through
   * QWeight("m_state") and its product through "m_output_projection", the padding through
   * QRAct PADDING; the layer-normalized cell's gates each through "add_bias_<i>" after
   * their norm and scale instead of "add_bias". Every act Lingvo's cell tracks has its variables (zero_m, m_zoneout,
   * zero_c, mixed, c_couple_invert, c_zoneout serve inference and zoneout only). */
  lv_qlayer q;
} lv_lstm_cell;

lv_params *lv_lstm_cell_simple_params(void);
lv_params *lv_ln_lstm_cell_simple_params(void);

#endif
