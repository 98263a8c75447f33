/* Private to src/core: the tape, the op table (ops.def) and the helpers every op front
 * end uses (input checks, device dispatch, arena outputs, gradient buffers, kernel error
 * checks). Not for layers: they use ops.h and graph.h only. */
#ifndef LV_CORE_GRAPH_IMPL_H
#define LV_CORE_GRAPH_IMPL_H

#include "core/graph.h"
#include "core/tensor.h"
#include "kernels/kernels.h"

typedef enum {
#define X(id, name) LV_OP_##id,
#include "core/ops.def"
#undef X
  LV_OP_COUNT
} lv_op;

extern const char *const lv_op_names[LV_OP_COUNT];

/* Runs kernel fn of backend be: LV_K(be, gemm, ta, tb, ...). */
#define LV_K(be, fn, ...) ((be)->kernels->fn((be)->ctx, __VA_ARGS__))

typedef struct lv_node lv_node;
typedef void (*lv_backward_fn)(lv_graph *g, lv_node *n);

/* What each op's backward keeps from its forward (arena pointers are device memory).
 * A tensor pointer kept here must be listed in saved_tensors (graph.c), so that its
 * memory lives until this node's backward has run. */
typedef struct { lv_activation act; } lv_saved_activation;
typedef struct { float s; } lv_saved_scalar;                     /* scale, max_scalar */
typedef struct { float lo, hi; } lv_saved_clip;
/* fake_quant: inputs x, min, max ([1] each); the levels and which of TF's two ops. */
typedef struct { int quant_min, quant_max; bool vars; } lv_saved_fake_quant;
/* smoothed_xent: the softmax, the smoothing; weights (if any) are in[2]. */
typedef struct {
  int64_t rows, c;
  float *probs;
  int probs_buf; /* lv_graph_scratch_buf: the logits' gradient is made in it */
  float smoothing;
  bool has_weights;
} lv_saved_xent;
/* projected_smoothed_xent: inputs x, w, [b], ids, [weights]; z is the forward's [n, chunk]
 * scratch, reused by the backward; max and ls [n] the rows' log-sum-exp parts. */
typedef struct {
  int64_t n, d, c, chunk;
  float smoothing;
  float *z, *max, *ls;
  bool has_bias, has_weights;
} lv_saved_pxent;
typedef struct { lv_conv_geom geom; int32_t *argmax; } lv_saved_window; /* conv, pools */
typedef struct { float *mask; } lv_saved_dropout;
typedef struct { int64_t m, n, k, batch; bool ta, tb; } lv_saved_matmul;
typedef struct { int64_t outer, n, inner; int kind; } lv_saved_reduce;
typedef struct { int perm[LV_MAX_RANK]; } lv_saved_transpose;
typedef struct { int axis; int64_t start; } lv_saved_axis;        /* concat, slice */
/* softmax, log_softmax, the cross-entropies: probs (the softmax), target (softmax_xent). */
typedef struct { int64_t rows, c; float *probs; lv_tensor *target; } lv_saved_softmax;
typedef struct { int64_t rows, d; float *stats; bool has_scale, has_bias, plus1; } lv_saved_layer_norm;
/* batch_norm: inputs x, [paddings], [gamma], [beta]; mean and rstd [c] (the batch's, or
 * the moving mean with batch_stats false), count (n), the kernels' scratch. */
typedef struct {
  int64_t rows, c;
  float *mean, *rstd;
  double *count;
  void *scratch;
  bool has_pad, has_gamma, has_beta, batch_stats, zero_padded;
} lv_saved_batch_norm;
/* lstm_step: the node's out is c_out; m_out is the second output (its own node, whose
 * backward makes sure this one runs). Backward recomputes the gates from its inputs. */
typedef struct {
  int64_t b, h;
  float forget_gate_bias, cell_value_cap;
  bool output_nonlinearity, has_pad;
  lv_tensor *m_out;
} lv_saved_lstm;

/* remat: fn and its ctx (a copy in the step), the stream counter when the first run
 * began; in[0, n_in) are fn's inputs, the node's other inputs the variables it read. */
typedef struct {
  lv_graph_remat_fn fn;
  const void *ctx;
  uint64_t streams;
  int n_in;
} lv_saved_remat;

/* rnn_seq_anchor: the steps' recurrent inputs, set by lv_op_rnn_seq_finish. */
typedef struct {
  lv_tensor *act, *m0;
  bool reverse, finished;
} lv_saved_rnn_seq;

/* What an activation's backward reads: its input x (1), its output y (2) or both. The
 * derivative of the ones that read one is a function of it alone (relu's y > 0 is x > 0),
 * so the kernel is given that one for both, and the other may be given back (graph.c:
 * backward_reads). */
static inline unsigned lv_act_bwd_reads(lv_activation a) {
  switch (a) {
    case LV_ACT_RELU: case LV_ACT_SIGMOID: case LV_ACT_TANH: case LV_ACT_EXP: case LV_ACT_SQRT: return 2;
    case LV_ACT_RELU6: case LV_ACT_GELU: case LV_ACT_SILU: case LV_ACT_SOFTPLUS: case LV_ACT_LEAKY_RELU:
    case LV_ACT_LOG: case LV_ACT_SQUARE: return 1;
    default: return 3;
  }
}

/* One recorded op: inputs, output, and whatever its backward needs. */
struct lv_node {
  lv_op op;
  lv_backward_fn backward;
  const lv_backend *be;
  lv_tensor *out;
  lv_tensor **in; /* n_in entries, arena */
  int n_in;
  union {
    lv_saved_activation act;
    lv_saved_scalar scalar;
    lv_saved_window win;
    lv_saved_dropout dropout;
    lv_saved_matmul mm;
    lv_saved_reduce red;
    lv_saved_transpose tr;
    lv_saved_axis axis;
    lv_saved_softmax sm;
    lv_saved_layer_norm ln;
    lv_saved_batch_norm bn;
    lv_saved_lstm lstm;
    lv_saved_rnn_seq rnn;
    lv_saved_clip clip;
    lv_saved_fake_quant fq;
    lv_saved_xent xent;
    lv_saved_pxent pxent;
    lv_saved_remat remat;
  } s;
};

/* False (after recording an error unless one is already there) if the graph has failed
 * or any of the n inputs is NULL. An input without floats (a quantized weight restored
 * without them, kernels/qweight.h) gets them here (lv_graph_floats). */
bool lv_graph_inputs_ok(lv_graph *g, lv_op op, int n, lv_tensor *const *ins);
/* The same, leaving input `keep` without floats: an op that reads it through its twin
 * where it can, and calls lv_graph_floats where it cannot. */
bool lv_graph_inputs_ok_q(lv_graph *g, lv_op op, int n, lv_tensor *const *ins, int keep);
/* Whether t is a quantized weight without float values (data NULL, a twin). */
static inline bool lv_tensor_floatless(const lv_tensor *t) { return !t->data && t->qw; }
/* Gives a float-less t its floats (lv_qweight_floats: its root's, made once); false with
 * the graph's error if out of memory. True at once for any other t. */
bool lv_graph_floats(lv_graph *g, lv_op op, lv_tensor *t);
/* The backend of the inputs' common device, which must be the graph's; an error if they
 * differ or the device has no backend. */
const lv_backend *lv_graph_kernels(lv_graph *g, lv_op op, int n, lv_tensor *const *ins);
/* An arena output on the graph's device; NULL with an error naming op and sizes. */
lv_tensor *lv_graph_out(lv_graph *g, lv_op op, lv_dtype dtype, lv_shape shape);
/* An arena tensor sharing x's data under a new shape (same numel). */
lv_tensor *lv_graph_view_of(lv_graph *g, lv_op op, lv_tensor *x, lv_shape shape);
/* An arena tensor of shape over x's data from byte offset (a contiguous part of x). */
lv_tensor *lv_graph_view_at(lv_graph *g, lv_op op, lv_tensor *x, lv_shape shape, size_t offset);
/* Device scratch in the step arena for op; NULL with an error. */
void *lv_graph_scratch(lv_graph *g, lv_op op, size_t bytes);
/* The same, with *buf naming the scratch for one of the two calls below. */
void *lv_graph_scratch_buf(lv_graph *g, lv_op op, size_t bytes, int *buf);
/* Scratch op needs only while it runs, given back once the kernels that read it are
 * queued (a device runs them in order, so whatever reuses the memory is written after
 * them): at once in a training forward with lv_graph_set_free_in_backward on; in backward
 * when the backward function returns, as all its scratch; otherwise (nothing is given
 * back) at the reset. */
void lv_graph_scratch_done(lv_graph *g, int buf);
/* Records a tape node for out if training and any input requires a gradient. */
lv_node *lv_graph_record(lv_graph *g, lv_op op, lv_backward_fn bw, lv_tensor *out, int n,
                         lv_tensor *const *ins);
/* Tape node i (a tensor's `node`); valid until the next record grows the tape. */
lv_node *lv_graph_node(lv_graph *g, int i);
/* In backward: t's gradient buffer, or NULL if t needs none (or the arena is full).
 * *acc tells the kernel whether to add (existing buffer) or overwrite (fresh, not
 * zeroed). */
lv_tensor *lv_graph_grad(lv_graph *g, lv_tensor *t, bool *acc);
/* In backward: t's gradient over forward scratch buf (lv_graph_scratch_buf, at least t's
 * size) when t has none yet, for a backward kernel that turns what its forward kept into
 * the gradient in place: the scratch is the gradient from then on, given back with it.
 * NULL when t needs no gradient or already has one (then add into lv_graph_grad's). */
lv_tensor *lv_graph_grad_from_scratch(lv_graph *g, lv_tensor *t, int buf);
/* Same, but a fresh buffer is zeroed, for kernels that write only part of it. */
lv_tensor *lv_graph_grad_zeroed(lv_graph *g, lv_tensor *t);
/* t's gradient as an alias of src's buffer when t has none yet (reshape); returns false
 * if t already had one (the caller then adds). */
bool lv_graph_grad_alias(lv_graph *g, lv_tensor *t, lv_tensor *src);
/* In backward: adds gy (t's shape) into t's gradient, as an alias of gy's buffer when t
 * has none yet (a reshape's, a sum's same-shape operand's); nothing if t needs none. */
void lv_graph_grad_pass(lv_graph *g, const lv_backend *be, lv_tensor *t, lv_tensor *gy);
/* Records the first error for op ("<name>: <message>"). */
void lv_graph_failf(lv_graph *g, lv_op op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool lv_graph_failed(const lv_graph *g);
/* A moving-average update of a variable, kept until the step is known good. */
typedef struct lv_deferred_update {
  lv_tensor *avg; /* the variable's value (float32, graph's device) */
  lv_tensor *x;   /* this step's statistic (arena, lives until reset) */
  double decay;
  float lo, hi; /* then avg = clip(avg, lo, hi) (+-INFINITY: no bound) */
} lv_deferred_update;
/* Queues u for lv_graph_apply_updates; false (error recorded) when out of memory. */
bool lv_graph_defer_update(lv_graph *g, lv_op op, const lv_deferred_update *u);

/* Kernel-found errors (kernels.h: lv_kerror). Before launching a kernel that checks ids,
 * an op registers what a bad id would be reported as; the returned tag goes to the
 * kernel. A bad id then reads "<op>: <what> <id> at position <pos> is outside [0,
 * <bound>) <detail>", e.g. what "class id", detail "(logits [4,10])". */
uint64_t lv_graph_id_check(lv_graph *g, lv_op op, const char *what, const char *detail);
/* After such a launch: false (the error recorded) if the device already knows of a bad
 * id (the CPU always does); a device that learns later reports it at the next sync
 * point (lv_graph_status, lv_graph_backward, lv_tensor_item via the graph). */
bool lv_graph_poll_errors(lv_graph *g);

/* TF's SAME (same = true) / VALID output size and leading pad for one spatial dim (k:
 * effective kernel extent). Shared by conv and pooling. */
void lv_core_same_valid(bool same, int64_t in, int64_t k, int s, int *out, int *lead);

/* x's strides over the broadcast shape out (numpy rules, 0 where x's dim is 1 or
 * missing) into s[out->rank]; false if x does not broadcast to exactly out. */
bool lv_core_bcast_strides(const lv_shape *x, const lv_shape *out, int64_t *s);

/* "[a,b,c]" into a caller buffer; for error messages. */
#define LV_SHP(t, buf) lv_shape_str(&(t)->shape, (buf), sizeof(buf))

#endif
