/* Recurrent layers (Lingvo lingvo/core/rnn_layers.py), time-major: inputs [T, B, D],
 * paddings [T, B, 1] (or [T, B]; 1.0 = padded, a sequence's padding at its end).
 *
 *   FRNN                       one cell (`cell`, any cell class of rnn_cell.h) unrolled
 *                              over time, backwards when `reverse`; child "cell" (a cell
 *                              with an empty name is named "cell").
 *   BidirectionalFRNN          FRNN children "fwd" (cell `fwd`) and "bak" (cell `bak`,
 *                              reversed) from the `rnn` template; outputs concatenated
 *                              [T, B, out_fwd + out_bak]. The backward pass starts at each
 *                              sequence's own last step: its padded tail comes first and,
 *                              padded steps keeping the state, leaves it at zero.
 *   StackedFRNNLayerByLayer    num_layers FRNNs "frnn_<i>" (cells "<name>_<i>" from
 *                              `cell_tpl`), dropout after each, residual ys + xs from layer
 *                              `skip_start` on (not on a first / last layer whose width
 *                              num_input_nodes / num_output_nodes overrides).
 *   StackedBiFRNNLayerByLayer  the same with BidirectionalFRNNs "bidi_rnn_<i>" (cells
 *                              "f_rnn_<i>", "b_rnn_<i>"); layer i > 0 takes 2 * the cell
 *                              width; num_output_nodes is split between the directions.
 *
 *   FRNNWithAttention          a cell (child "cell") intertwined with an attention (child
 *                              "atten", `attention`: AdditiveAttention, DotProductAttention
 *                              or MultiHeadedAttention of attention.h): the source is packed
 *                              once; each step feeds concat(x_t, previous context) to the
 *                              cell (input_prev_atten_ctx) and attends with the new m. The
 *                              first context attends with a zero query, or is zeros
 *                              (use_zero_atten_state, atten_context_dim wide). Its fprop
 *                              also takes "src_encs" [S, B, Ds], "src_paddings" [S, B]
 *                              (optional) and "src_contexts" [S, B, C] (optional) and gives
 *                              "act" = the cell outputs [T, B, out], "atten_context"
 *                              [T, B, C] (the previous step's with output_prev_atten_ctx),
 *                              "atten_probs" [T, B, S] and "final_state.{m,c,atten}".
 *
 * Generic fprop: {"act" [T, B, D], "paddings" [T, B, 1] (optional: none padded)} ->
 * {"act" [T, B, H]}; FRNN also takes "state0.m" / "state0.c" (optional, else zeros) and
 * gives "final_state.m" / "final_state.c". Padded steps keep the previous state, so a
 * forward output at a padded step repeats the sequence's last output.
 *
 * The `dropout` template of the stacks is Lingvo's DropoutLayer params (keep_prob);
 * lingvoc applies it with lv_op_dropout in training, one stream per fprop and layer. */
#ifndef LV_LAYERS_RNN_LAYERS_H
#define LV_LAYERS_RNN_LAYERS_H

#include "layers/layer.h"
#include "layers/rnn_cell.h"

typedef struct lv_frnn_layer {
  lv_layer base;
  lv_params *cell_p; /* owned: p.cell with its name filled in */
  lv_layer *cell;
  bool reverse;
} lv_frnn_layer;

typedef struct lv_bifrnn_layer {
  lv_layer base;
  lv_params *child_p[2]; /* owned */
  lv_frnn_layer *fwd, *bak;
} lv_bifrnn_layer;

typedef struct lv_stacked_rnn_layer {
  lv_layer base;
  bool bidi;
  int n;
  lv_params **child_p; /* owned, n */
  lv_layer **rnn;      /* n */
  int64_t num_input_nodes, num_output_nodes, skip_start;
  lv_params *drop_p;   /* owned */
  lv_layer drop;       /* the dropout child's scope and seed */
  float keep_prob;
} lv_stacked_rnn_layer;

typedef struct lv_attention lv_attention;

typedef struct lv_frnn_atten_layer {
  lv_layer base;
  lv_params *cell_p, *atten_p; /* owned, names filled in */
  lv_layer *cell, *atten_layer;
  lv_attention *atten;
  bool output_prev_atten_ctx, input_prev_atten_ctx, use_zero_atten_state;
  int64_t atten_context_dim;
} lv_frnn_atten_layer;

/* What FRNNWithAttention computes (Lingvo's FProp tuple). */
typedef struct lv_frnn_atten_out {
  lv_tensor *atten_context; /* [T, B, C] */
  lv_tensor *rnn_output;    /* [T, B, out] */
  lv_tensor *atten_probs;   /* [T, B, S] */
  lv_rnn_state final;       /* after the last step */
  lv_tensor *final_atten;   /* [B, C] */
} lv_frnn_atten_out;

lv_params *lv_frnn_params(void);
lv_params *lv_frnn_atten_params(void);
lv_params *lv_bifrnn_params(void);
lv_params *lv_stacked_frnn_params(void);
lv_params *lv_stacked_bifrnn_params(void);

/* x [T, B, D], paddings [T, B, 1] or [T, B] (NULL: none padded), state0 (NULL: zeros) ->
 * *act [T, B, out] and, if final is not NULL, the state after the last step processed. */
bool lv_frnn_run(lv_frnn_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings, const lv_rnn_state *state0,
                 lv_tensor **act, lv_rnn_state *final);
/* src_encs [S, B, Ds], src_paddings [S, B] (NULL: none), src_contexts [S, B, C] (NULL:
 * src_encs), x [T, B, D], paddings [T, B, 1] or [T, B] (NULL: none). */
bool lv_frnn_atten_run(lv_frnn_atten_layer *l, lv_graph *g, lv_tensor *src_encs, lv_tensor *src_paddings,
                       lv_tensor *src_contexts, lv_tensor *x, lv_tensor *paddings, lv_frnn_atten_out *out);
/* Lingvo's FRNN and FRNNWithAttention create their cell (and attention) in their parent's
 * variable scope (_child_variable_scope_override), so an MT encoder's cells are
 * "enc/L0_rnn_fwd/..." and a decoder's "dec/atten_rnn/...", "dec/atten/...". These make l
 * a view over a cell (and attention) the caller created in that scope and keeps owning:
 * l has no params and no variables, only the *_run functions may be given it, it needs no
 * destroy; scope names it in errors. The attention's query_dim must be the cell's
 * num_output_nodes (an LV_ERR_INVALID error naming scope otherwise). */
void lv_frnn_view(lv_frnn_layer *l, const char *scope, lv_layer *cell, bool reverse);
lv_status lv_frnn_atten_view(lv_frnn_atten_layer *l, const char *scope, lv_layer *cell, lv_layer *atten,
                             bool output_prev_atten_ctx, bool use_zero_atten_state, int64_t atten_context_dim);
/* x [T, B, D] -> [T, B, out_fwd + out_bak]. */
lv_tensor *lv_bifrnn_run(lv_bifrnn_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings);
/* Lingvo's StackedFRNNLayerByLayer residual rule: layer i of n adds its input to its output
 * from skip_start on (< 0: never), except the first layer when num_input_nodes > 0 and the
 * last when num_output_nodes > 0 (those overrides change its width). */
static inline bool lv_stacked_rnn_residual(int64_t skip_start, int i, int n, int64_t num_input_nodes,
                                           int64_t num_output_nodes) {
  return skip_start >= 0 && i >= skip_start && (num_input_nodes <= 0 || i != 0) &&
         (num_output_nodes <= 0 || i != n - 1);
}
/* x [T, B, D] -> [T, B, out of the last layer]. */
lv_tensor *lv_stacked_rnn_run(lv_stacked_rnn_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings);

#endif
