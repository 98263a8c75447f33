/* The op front end. Each op takes the graph and arena/variable tensors and returns a new
 * arena tensor (NULL after an error, see graph.h). Shapes are checked here, kernels are
 * looked up by op id and the inputs' device (ops.def), and the backward of every
 * differentiable op sits beside its forward in src/core/op_<family>.c.
 * All float ops are float32. Broadcasting follows numpy (trailing dims, 1 stretches). */
#ifndef LV_CORE_OPS_H
#define LV_CORE_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"
#include "kernels/activation.h"

typedef enum { LV_PAD_SAME, LV_PAD_VALID } lv_padding;

/* ---- linear algebra ---- */
/* [M,K] x [K,N] -> [M,N] (after optional transposes). a may have rank > 2: its leading
 * dims are flattened into M and restored in the output ([B,T,K] x [K,N] -> [B,T,N]). */
lv_tensor *lv_op_matmul(lv_graph *g, lv_tensor *a, lv_tensor *b, bool trans_a, bool trans_b);
/* c + a b for c [M, N], a [M, K], b [K, N] in one GEMM (c copied into the output, then
 * accumulated into): an RNN step's gates xw_t + m_prev w. Not bit-identical to
 * add(c, matmul(a, b)) (the GEMM adds its K blocks into c one by one). */
lv_tensor *lv_op_addmm(lv_graph *g, lv_tensor *c, lv_tensor *a, lv_tensor *b);
/* a w + bias for w [K, N], bias [N]: add(matmul(a, w), bias), the same bits, except that
 * a quantized w (its twin, kernels/qweight.h) on a graph that records no gradients
 * multiplies and adds the bias in one kernel. matmul and addmm use the twin likewise. */
lv_tensor *lv_op_matmul_bias(lv_graph *g, lv_tensor *a, lv_tensor *w, lv_tensor *bias);
/* [x, 1] wb for x [..., K] (rank >= 2) and wb [K + 1, N] -> [..., N]: x w + b as one GEMM
 * when wb is [w; b]. The values and gradients are matmul(concat([x, ones], -1), wb)'s bit
 * for bit (the same GEMM calls on the same operands), but the [M, K + 1] copy is not
 * kept for backward: it is built in scratch for the forward GEMM and given back at once
 * (lv_graph_scratch_done), and backward builds it again from x, which it keeps instead. */
lv_tensor *lv_op_matmul_ones_col(lv_graph *g, lv_tensor *x, lv_tensor *wb);
/* [...,M,K] x [...,K,N] -> [...,M,N] (after optional transposes of the last two dims;
 * equal leading dims, rank >= 3): one strided batched GEMM kernel call for all of them
 * (all heads of an attention at once), not a loop of GEMMs. */
lv_tensor *lv_op_batch_matmul(lv_graph *g, lv_tensor *a, lv_tensor *b, bool trans_a, bool trans_b);

/* ---- elementwise (broadcasting) ---- */
lv_tensor *lv_op_add(lv_graph *g, lv_tensor *a, lv_tensor *b);
lv_tensor *lv_op_sub(lv_graph *g, lv_tensor *a, lv_tensor *b);
lv_tensor *lv_op_mul(lv_graph *g, lv_tensor *a, lv_tensor *b);
lv_tensor *lv_op_div(lv_graph *g, lv_tensor *a, lv_tensor *b);
lv_tensor *lv_op_scale(lv_graph *g, lv_tensor *a, float s);       /* a * s */
lv_tensor *lv_op_add_scalar(lv_graph *g, lv_tensor *a, float s);  /* a + s */
/* max(a, s); the gradient flows where a > s. */
lv_tensor *lv_op_maximum_scalar(lv_graph *g, lv_tensor *a, float s);

/* ---- activations (elementwise; lv_activation in kernels/activation.h) ---- */
/* Lingvo's names: "NONE", "RELU", "RELU6", "SIGMOID", "TANH", "GELU", "SILU", ... */
extern const char *const lv_activation_names[LV_ACT_COUNT];
bool lv_activation_from_name(const char *name, lv_activation *out);
lv_tensor *lv_op_activation(lv_graph *g, lv_tensor *x, lv_activation act);
static inline lv_tensor *lv_op_relu(lv_graph *g, lv_tensor *x) { return lv_op_activation(g, x, LV_ACT_RELU); }

/* ---- convolution and pooling, NHWC ---- */
/* x [N,H,W,C], w [KH,KW,C,O] (TF's HWIO) -> [N,OH,OW,O]. SAME pads like TF (extra on the
 * bottom/right). */
lv_tensor *lv_op_conv2d(lv_graph *g, lv_tensor *x, lv_tensor *w, int stride_h, int stride_w,
                        int dilation_h, int dilation_w, lv_padding pad);
lv_tensor *lv_op_max_pool2d(lv_graph *g, lv_tensor *x, int kh, int kw, int sh, int sw, lv_padding pad);
lv_tensor *lv_op_avg_pool2d(lv_graph *g, lv_tensor *x, int kh, int kw, int sh, int sw, lv_padding pad);

/* ---- shape ---- */
/* Same data, new shape (numel must match); one dim may be -1. */
lv_tensor *lv_op_reshape(lv_graph *g, lv_tensor *x, lv_shape shape);
lv_tensor *lv_op_transpose(lv_graph *g, lv_tensor *x, const int *perm);
lv_tensor *lv_op_concat(lv_graph *g, lv_tensor *const *xs, int n, int axis);
lv_tensor *lv_op_slice(lv_graph *g, lv_tensor *x, int axis, int64_t start, int64_t len);

/* ---- reductions ---- */
/* axis < 0 counts from the end; LV_ALL_AXES reduces to a scalar. keepdims keeps size-1 dims. */
#define LV_ALL_AXES 1000
lv_tensor *lv_op_reduce_sum(lv_graph *g, lv_tensor *x, int axis, bool keepdims);
lv_tensor *lv_op_reduce_mean(lv_graph *g, lv_tensor *x, int axis, bool keepdims);
lv_tensor *lv_op_reduce_max(lv_graph *g, lv_tensor *x, int axis, bool keepdims); /* grad to argmax */

/* ---- softmax and losses (over the last axis) ---- */
lv_tensor *lv_op_softmax(lv_graph *g, lv_tensor *logits);
lv_tensor *lv_op_log_softmax(lv_graph *g, lv_tensor *logits);
/* logits [...,C], class ids int32 [...] -> per-example cross-entropy [...]. An id outside
 * [0,C) is an error naming it. */
lv_tensor *lv_op_sparse_softmax_xent(lv_graph *g, lv_tensor *logits, lv_tensor *ids);
/* logits [...,C], target probabilities [...,C] (no grad to probs) -> [...]. */
lv_tensor *lv_op_softmax_xent(lv_graph *g, lv_tensor *logits, lv_tensor *probs);

/* ---- regularization and normalization ---- */
/* Training only (identity in eval): keeps each element with prob keep_prob, scaled by
 * 1/keep_prob. The mask is a function of (seed, stream, element index): deterministic. */
lv_tensor *lv_op_dropout(lv_graph *g, lv_tensor *x, float keep_prob, uint64_t seed, uint64_t stream);
/* x + scale * noise, noise N(0, 1) (U[-0.5, 0.5) if uniform) a function of (seed, stream,
 * element index), in training and eval alike (callers decide); the gradient passes to x
 * unchanged (Lingvo's AddVN). x itself when scale is 0. */
lv_tensor *lv_op_add_noise(lv_graph *g, lv_tensor *x, float scale, bool uniform, uint64_t seed, uint64_t stream);
/* Dropout with drop probability prob and stream k of the graph's step (lv_graph_stream(g,
 * per_step, k)) in training mode; x itself (and NULL for NULL) otherwise or when prob is 0. */
lv_tensor *lv_op_step_dropout(lv_graph *g, lv_tensor *x, float prob, uint64_t seed, uint64_t per_step, uint64_t k);
/* Over the last dim: (x-mean)/sqrt(var+eps)*scale+bias; scale/bias [D] (either may be NULL). */
lv_tensor *lv_op_layer_norm(lv_graph *g, lv_tensor *x, lv_tensor *scale, lv_tensor *bias, float eps);
/* Lingvo's LayerNorm form: (x-mean)/sqrt(var+eps)*(1+scale)+bias over the last dim
 * (scale initialized to 0); the gradient to scale is the same as the plain form's. */
lv_tensor *lv_op_layer_norm_plus1(lv_graph *g, lv_tensor *x, lv_tensor *scale, lv_tensor *bias, float eps);
/* Lingvo's BatchNormLayer over every axis but the last of x [..., C], in one kernel each
 * way: y = (x - mean) * rsqrt(var + eps) * (1 + gamma) + beta, gamma and beta [C] (either
 * may be NULL: 0). paddings (float32, 1.0 = padded, one value per row of x: [...] or
 * [..., 1]; NULL: none) leave their rows out of the batch moments, which are taken over
 * the rows with weight 1 - padding: mean = sum(w x) / n, var = sum(w (x - mean)^2) / n, n =
 * max(sum(w), 1); zero_padded (set_padded_output_to_zero) multiplies the output by 1 -
 * padding, padded rows exactly 0. training: the batch moments, with the gradient through
 * them (TF's), and when moving_mean/moving_var are given ([C] float32 variables, else
 * NULL) their updates queued as lv_op_moving_average_update does (decay); else the moving
 * statistics, which are then required, as constants. No gradient to paddings or the
 * moving statistics. The moments are computed in double and do not depend on the
 * threads. */
lv_tensor *lv_op_batch_norm(lv_graph *g, lv_tensor *x, lv_tensor *paddings, lv_tensor *gamma, lv_tensor *beta,
                            float eps, bool zero_padded, bool training, lv_tensor *moving_mean,
                            lv_tensor *moving_var, double decay);

/* ---- embedding ---- */
/* table [V,D], ids int32 [...] -> [...,D]; out-of-range id is an error. Backward
 * scatter-adds into the rows of ids only (in id order, so the sum does not depend on
 * threads): no dense [V,D] pass when the table's gradient buffer exists (a variable's,
 * zeroed by its store); a table without one gets a fresh zeroed buffer. The buffer
 * itself is dense [V,D]: the learner still updates every row. */
lv_tensor *lv_op_gather(lv_graph *g, lv_tensor *table, lv_tensor *ids);
/* Columns of w [D, C] as rows, for a column-sharded table: out [numel(ids), D], row i =
 * w[:, ids[i] - offset] where ids[i] - offset is in [0, C), zeros elsewhere (the ids of
 * other shards). The gradient adds into those columns only, in ids' order. A sampled
 * softmax gathers its few classes this way without transposing the whole table. */
lv_tensor *lv_op_gather_cols(lv_graph *g, lv_tensor *w, lv_tensor *ids, int64_t offset);

/* ---- no gradient ---- */
/* uint8/int32/int64/float -> dtype. */
lv_tensor *lv_op_cast(lv_graph *g, lv_tensor *x, lv_dtype dtype);
/* tf.image.per_image_standardization on [N,H,W,C] (or [N,...]): per image,
 * (x - mean) / max(stddev, 1/sqrt(numel)). */
lv_tensor *lv_op_per_image_standardization(lv_graph *g, lv_tensor *x);
/* logits [B,C], labels int32 [B] -> float32 [B]: 1 if label is in the top k, else 0.
 * tf.nn.in_top_k semantics: the label counts as in when fewer than k classes score
 * strictly higher (ties on the boundary are all in); an out-of-range label or a
 * non-finite label score gives 0. */
lv_tensor *lv_op_in_top_k(lv_graph *g, lv_tensor *logits, lv_tensor *labels, int k);
/* [...,C] -> int32 [...]. */
lv_tensor *lv_op_argmax(lv_graph *g, lv_tensor *x);
/* One decoding step of multi-head dot-product attention over key/value caches, without a
 * gradient (a graph that trains refuses it for a query that needs one): q [R, heads * d]
 * (projected and scaled), k [cap, R, heads * d] and v [cap, R, heads * dv] time-major
 * buffers whose first t steps hold the keys and values, anc NULL (row r of step s is at
 * s * R + r) or int32 [>= t * R]: anc[s * R + r], the row of the buffers' [cap * R] that
 * holds step s of row r (a beam search's ancestors, so the caches need no reorder).
 * Returns out [R, heads * dv]: row r, head n is sum_s softmax_s(q[r, n] . k[s, n]) v[s, n]. */
lv_tensor *lv_op_cached_attention(lv_graph *g, lv_tensor *q, lv_tensor *k, lv_tensor *v, int64_t t, int64_t heads,
                                  lv_tensor *anc);
/* avg = avg * decay + x * (1 - decay), computed in double (batch norm's moving
 * statistics), applied only once the step succeeds: it is queued in the graph and run by
 * lv_graph_apply_updates after the learner applied the step (so replicas can all-reduce
 * the statistics first, and a skipped step changes nothing). avg is a float32 variable
 * on the graph's device, x float32 of its size. False (the error recorded) on bad input. */
bool lv_op_moving_average_update(lv_graph *g, lv_tensor *avg, lv_tensor *x, double decay);
/* The same, then avg = clip(avg, lo, hi) (PassiveAsymQDomain's min(0, .) / max(0, .)). */
bool lv_op_moving_average_update_clip(lv_graph *g, lv_tensor *avg, lv_tensor *x, double decay, float lo, float hi);

/* ---- fake quantization (reference/lingvo_asr_lm.md §13.2) ---- */
/* tf.quantization.fake_quant_with_min_max_vars(x, min, max, num_bits, narrow_range): x
 * rounded to the 2^num_bits levels (one fewer with narrow_range) of [min, max] nudged so
 * that 0 is a level; min and max are float32 tensors of one element (variables, or
 * computed, e.g. a reduce_max) and get TF's gradients: the sums of the output gradient
 * where x is below the nudged min / above the nudged max; x's gradient is the
 * straight-through one (1 inside the nudged range, bounds included; all of it when
 * min == max == 0, where the output is 0). num_bits in [2, 16]. */
lv_tensor *lv_op_fake_quant_vars(lv_graph *g, lv_tensor *x, lv_tensor *min, lv_tensor *max, int num_bits,
                                 bool narrow_range);
/* tf.quantization.fake_quant_with_min_max_args: constant min < max (TF's check), x * (1 /
 * scale) where _vars divides; the same straight-through gradient to x. */
lv_tensor *lv_op_fake_quant_args(lv_graph *g, lv_tensor *x, float min, float max, int num_bits, bool narrow_range);

/* ==== Sequence ops (layers of rnn_cell / rnn_layers / attention / layers_with_attention).
 * Declared together as one contract; each is implemented in src/core/op_<family>.c with
 * a CPU kernel, a finite-difference test and a device (cpu:1) test. ==== */

/* ---- elementwise, broadcasting (numpy rules) ---- */
/* max(a, b) / min(a, b); the gradient goes to a where a wins or ties, else to b. */
lv_tensor *lv_op_maximum(lv_graph *g, lv_tensor *a, lv_tensor *b);
lv_tensor *lv_op_minimum(lv_graph *g, lv_tensor *a, lv_tensor *b);
typedef enum { LV_CMP_LT, LV_CMP_LE, LV_CMP_GT, LV_CMP_GE, LV_CMP_EQ, LV_CMP_NE, LV_CMP_COUNT } lv_compare;
/* float32 1.0 where `a cmp b` holds, else 0.0; no gradient. */
lv_tensor *lv_op_compare(lv_graph *g, lv_tensor *a, lv_tensor *b, lv_compare cmp);
/* cond != 0 ? a : b (float32 cond, all three broadcast to one shape); gradients go to a
 * where cond is set and to b elsewhere (summed over broadcast dims); none to cond. */
lv_tensor *lv_op_select(lv_graph *g, lv_tensor *cond, lv_tensor *a, lv_tensor *b);
/* clip(x, lo, hi) (lo <= hi); the gradient flows where lo <= x <= hi, bounds included,
 * as tf.clip_by_value's does. */
lv_tensor *lv_op_clip(lv_graph *g, lv_tensor *x, float lo, float hi);

/* ---- masked softmax ---- */
/* Softmax over the last axis of logits [..., S] (rank >= 1) ignoring positions where paddings
 * (float32, 1.0 = padded, broadcastable to logits' shape, e.g. [B, 1, S] against
 * [B, T, S]) is > 0.5: they get probability 0 and no gradient. A row whose positions are
 * all padded gives all zeros (not NaN) and a zero gradient. */
lv_tensor *lv_op_masked_softmax(lv_graph *g, lv_tensor *logits, lv_tensor *paddings);

/* ---- sequences ---- */
/* Time-major x [T, B, ...] with paddings [T, B] or [T, B, 1] (1.0 = padded; a
 * sequence's padding is at its end): the first len_b steps of each sequence b are
 * reversed (len_b = rint(sum over time of 1 - padding), the number of steps with padding
 * 0, as Lingvo's ReversePaddedSequence), padded steps stay where they are
 * (tf.reverse_sequence). Its own inverse; the gradient is the same reversal. */
lv_tensor *lv_op_reverse_sequence(lv_graph *g, lv_tensor *x, lv_tensor *paddings);
/* The k largest entries of the last axis of x [..., N] (0 <= k <= N): values float32
 * [..., k] and indices int32 [..., k], in descending order; equal values keep the lower
 * index first; NaN counts as larger than any number. No gradient (beam search). False
 * (graph error set) on bad input. */
bool lv_op_top_k(lv_graph *g, lv_tensor *x, int k, lv_tensor **values, lv_tensor **indices);

/* ---- losses ---- */
/* Per-row cross-entropy of logits [..., C] against class ids int32 [...], with Lingvo's
 * UniformLabelSmoother target (on = 1 - smoothing for the id, off = smoothing / (C - 1)
 * elsewhere; smoothing 0 is plain sparse cross-entropy) and per-row weights float32
 * [...] (NULL = 1): out [...] = weight * xent. smoothing must be in [0, 1]. An id outside
 * [0, C) is an error naming it. Gradient to logits only. */
lv_tensor *lv_op_smoothed_xent(lv_graph *g, lv_tensor *logits, lv_tensor *ids, lv_tensor *weights,
                               float smoothing);
/* The same loss for logits = x [N, D] . w [D, C] + b [C] (b may be NULL) without
 * keeping the [N, C] logits: forward and backward go over the classes in chunks of
 * `chunk` columns (<= 0 or > C: all at once), recomputing each chunk's logits in
 * backward, so peak memory is O(N * chunk) rather than O(N * C). Gradients to x, w and
 * b. When argmax is not NULL it receives int32 [N], the row's highest-scoring class
 * (the first on ties; no gradient). */
lv_tensor *lv_op_projected_smoothed_xent(lv_graph *g, lv_tensor *x, lv_tensor *w, lv_tensor *b,
                                         lv_tensor *ids, lv_tensor *weights, float smoothing,
                                         int64_t chunk, lv_tensor **argmax);

/* ---- LSTM ---- */
/* One fused LSTMCellSimple gate step (Lingvo's rnn_cell.py) over gates [B, 4H] = the
 * pre-activation x.wm + b, column blocks in Lingvo's order (i_i, i_g, f_g, o_g):
 *   c' = sigmoid(f_g + forget_gate_bias) * c + sigmoid(i_g) * tanh(i_i)
 *   c' = clip(c', -cell_value_cap, cell_value_cap)      (cap <= 0: no clipping)
 *   m' = sigmoid(o_g) * tanh(c')   (output_nonlinearity false: sigmoid(o_g) * c')
 * and where paddings [B, 1] (or [B]; NULL = none) is 1.0 (> 0.5) the previous c, m are
 * kept, as Lingvo's ApplyPadding selects them.
 * One pass over the 4H gates; *c_out and *m_out are [B, H]. Gradients to gates, c_prev
 * and m_prev (m_prev only through the padded rows). False (graph error set) on bad input. */
bool lv_op_lstm_step(lv_graph *g, lv_tensor *gates, lv_tensor *c_prev, lv_tensor *m_prev,
                     lv_tensor *paddings, float forget_gate_bias, float cell_value_cap,
                     bool output_nonlinearity, lv_tensor **c_out, lv_tensor **m_out);
/* A recurrent weight's gradient over a whole sequence in one GEMM, where each step's
 * matmul would add [B, K]^T x [B, G] into it (T small GEMMs re-reading the [K, G]
 * gradient). xw [T, B, G] is the input's part of every step's gates (gates_t =
 * xw[t] + rec_t . w, w [K, G]); returns a view of xw for the steps to slice, and in
 * *w_nograd a view of w whose gradient the steps' matmuls leave alone. After the steps,
 * lv_op_rnn_seq_finish names their recurrent inputs: act [T, B, K] (the output of step t
 * at row t; NULL when T is 1) and m0 [B, K] (what the first step read; NULL: zeros), in
 * time order or reversed. The view's backward passes its gradient to xw and adds
 * sum_t rec_t^T dgates_t to w's gradient: rec of the first step is m0, of each later one
 * the previous step's act. A graph whose sequence was never finished fails in backward.
 * Not bit-identical to the per-step sums (another summation order). */
lv_tensor *lv_op_rnn_seq_anchor(lv_graph *g, lv_tensor *xw, lv_tensor *w, lv_tensor **w_nograd);
/* Does nothing when anchor is not lv_op_rnn_seq_anchor's output (or has no tape node). */
void lv_op_rnn_seq_finish(lv_graph *g, lv_tensor *anchor, lv_tensor *act, lv_tensor *m0, bool reverse);

#endif
