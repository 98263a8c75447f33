/* Define-by-run autodiff. Ops run immediately (kernels are launched; a GPU may finish
 * them later) and, when any input requires a gradient, record a tape node;
 * lv_graph_backward walks the tape in reverse. A graph runs on one device: every op
 * output and every intermediate gradient lives in the graph's step arena on that device
 * (tensor headers and the tape stay in host memory), freed at once by lv_graph_reset.
 * Variable gradients accumulate into the variables' own grad tensors (zeroed by the
 * caller before a step).
 *
 * Errors are sticky: an op that fails (shape mismatch, arena exhausted) records a
 * message naming the op and the shapes, returns NULL, and every later op given NULL or
 * run on a failed graph returns NULL too. Check lv_graph_status after a forward pass.
 * Errors kernels find in the data (an id out of range) surface at the step's sync points:
 * lv_graph_status and lv_graph_backward (at once on the CPU). */
#ifndef LV_CORE_GRAPH_H
#define LV_CORE_GRAPH_H

#include <stdbool.h>

#include "base/arena.h"
#include "base/status.h"
#include "core/tensor.h"

typedef struct lv_graph lv_graph;

/* arena_cap_bytes: the most one step may allocate (0 = 16 GiB). A new graph is in
 * training mode. Tensors given to ops must live until the next reset; a leaf that
 * requires a gradient but has no grad tensor gets one in the arena, valid until reset. */
lv_graph *lv_graph_create(size_t arena_cap_bytes);
/* The same on device dev; NULL if this build has no backend for it. */
lv_graph *lv_graph_create_on(lv_device dev, size_t arena_cap_bytes);
lv_device lv_graph_device(const lv_graph *g);
void lv_graph_destroy(lv_graph *g);
/* Drops the tape and every arena tensor; clears the sticky error. */
void lv_graph_reset(lv_graph *g);
/* How many resets this graph has had: state kept across the ops of one step (a
 * quantization domain's running min/max over a step's calls) knows a new step by it. */
uint64_t lv_graph_resets(const lv_graph *g);
/* The training step this graph computes (kept across resets; 0 until set). Random ops
 * draw their streams from it, in one scheme: stream k of the step is step * per_step + k,
 * so a step's dropout masks depend on the step and on k, never on how many steps this
 * process ran before (a resumed run repeats them). lv_graph_stream takes k from its
 * caller (a layer that numbers its own dropouts, below per_step);
 * lv_graph_next_stream numbers them in the order of the ops since the reset
 * (per_step 2^24). */
void lv_graph_set_step(lv_graph *g, int64_t step);
int64_t lv_graph_step(const lv_graph *g);
uint64_t lv_graph_stream(const lv_graph *g, uint64_t per_step, uint64_t k);
uint64_t lv_graph_next_stream(lv_graph *g);
/* Training mode: dropout active; records tape. Eval mode records no tape. */
void lv_graph_set_training(lv_graph *g, bool training);
bool lv_graph_is_training(const lv_graph *g);
/* A sync point: waits for the device, then NULL if no op or kernel failed since the last
 * reset; else a new status (caller frees). */
lv_status lv_graph_status(lv_graph *g);
/* Records an error from outside the ops (a layer's own check); keeps the first. */
void lv_graph_fail(lv_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Backpropagates from a float32 scalar; grads of every requires_grad leaf accumulate. */
lv_status lv_graph_backward(lv_graph *g, lv_tensor *loss);
size_t lv_graph_arena_peak(const lv_graph *g);

/* Memory of a step, counted by the graph as it allocates from its step arena (every
 * tensor, gradient and scratch buffer is one arena allocation, rounded as the arena
 * rounds): what each byte was for, and when it was given back. */
typedef enum {
  LV_GRAPH_MEM_ACTIVATIONS, /* tensors made in forward: op outputs, inputs brought in */
  LV_GRAPH_MEM_FWD_SCRATCH, /* ops' scratch in forward (softmax probabilities, dropout masks kept for backward) */
  LV_GRAPH_MEM_GRADS,       /* gradient buffers of tensors (not of variables: those are the varstore's) */
  LV_GRAPH_MEM_BWD_TEMPS,   /* tensors and scratch a backward function makes for itself */
  LV_GRAPH_MEM_COUNT
} lv_graph_mem_kind;
extern const char *const lv_graph_mem_kind_names[LV_GRAPH_MEM_COUNT];
#define LV_GRAPH_MEM_OPS 64
/* Op i's name for peak_by_op (also "(no op: inputs)"; the last entry is the memory of
 * other kinds). */
const char *lv_graph_mem_op_name(int i);
typedef struct lv_graph_mem_stats {
  size_t live_peak;                     /* most bytes allocated and not given back at once */
  size_t at_peak[LV_GRAPH_MEM_COUNT];   /* live bytes of each kind at that moment (they sum to live_peak) */
  size_t peak_by_op[LV_GRAPH_MEM_OPS];  /* of them, activations and forward scratch by the op that made them */
  size_t allocated[LV_GRAPH_MEM_COUNT]; /* all bytes allocated in the step, by kind */
  size_t released;                      /* bytes given back during backward (lv_graph_set_free_in_backward) */
  size_t released_forward;              /* of those, given back in forward (lv_graph_scope_end) */
  size_t reused;                        /* bytes served again from what was given back */
  size_t arena_peak;                    /* the arena's high-water mark in the step: live_peak + gaps between freed pieces */
  size_t arena_reserved;                /* bytes of arena blocks held at the step's end */
  size_t arena_lifetime_peak;           /* the arena's own count: its highest use since the graph was made */
  size_t meta_peak;                     /* host memory of the step's tensor headers and tape inputs */
  int nodes;                            /* tape nodes */
} lv_graph_mem_stats;
/* The step since the last reset (worst false), or the step with the highest arena_peak
 * since the graph was made (worst true; the current step counts). */
void lv_graph_mem_stats_get(const lv_graph *g, bool worst, lv_graph_mem_stats *out);
/* Off by default. On: lv_graph_backward gives a tensor's memory (its data and its
 * gradient) back to the arena as soon as the last backward function that reads it has
 * run, and a backward function's own temporaries when it returns; later allocations of
 * the step reuse that memory (best fit). The values computed are the same, bit for bit;
 * but after backward a tape tensor's data is gone (NULL), except the loss's and what a
 * deferred update reads: read every value you need (metrics) before backward. */
void lv_graph_set_free_in_backward(lv_graph *g, bool on);
bool lv_graph_free_in_backward(const lv_graph *g);
/* Off by default. On: in eval mode (no tape) a forward scope's end gives back every op
 * output made in it that it does not keep, and ops give back their scratch at once, so a
 * forward pass holds a layer's temporaries only while the layer runs (an evaler's batch
 * needs its largest layer, not the sum of all). Until a mark is taken (incremental
 * decoding): from then to the reset nothing more is given back or reused. */
void lv_graph_set_free_in_eval(lv_graph *g, bool on);
/* Forward scopes, as a Python function's locals die when it returns: a layer's fprop
 * between lv_graph_scope_begin and lv_graph_scope_end(keep: its outputs, NULL entries
 * skipped) promises that the op outputs made in between and not kept are read by no
 * later op and not by the host. With lv_graph_set_free_in_backward on, in training (in
 * eval: lv_graph_set_free_in_eval, before a mark), the
 * scope's end gives back those whose data no backward function recorded in the scope
 * reads (an addition's output, a matmul's, a dropout's input: what PyTorch's autograd
 * does not save); backward gives back the rest as it goes. An op given such a tensor
 * later fails with an error naming it. Otherwise both calls do nothing. */
typedef struct lv_graph_scope {
  int outs, nodes;
} lv_graph_scope;
lv_graph_scope lv_graph_scope_begin(const lv_graph *g);
void lv_graph_scope_end(lv_graph *g, const lv_graph_scope *scope, lv_tensor *const *keep, int n_keep);
/* Rematerialization (Lingvo's py_utils.RematerializeFn and the `remat` param of its
 * Conformer layer; PyTorch's torch.utils.checkpoint): y = fn(g, ctx, in) computed so
 * that nothing fn makes on the way is kept for backward. In a training forward with
 * lv_graph_set_free_in_backward on, fn runs without a tape, everything it made but y is
 * given back when it returns (op outputs, the ops' forward scratch: dropout masks, layer
 * norm statistics, softmax probabilities), and one tape node stands for it, reading in
 * and the variables fn read. That node's backward runs fn again on the same inputs with
 * the same random streams (lv_graph_next_stream restarts where the first run started),
 * with a tape, and backpropagates y's gradient through it; what it made is given back as
 * that backward goes, so at most one segment's activations are alive at once. Values
 * and gradients are the same, bit for bit, as calling fn; the cost is fn's forward once
 * more in backward. A function that defers variable updates (batch norm's moving
 * statistics) is refused with an error.
 * fn must read no tensor of the step but in[0, n_in) and variables: an op inside that
 * reads another tape tensor (or an op output made before the call) fails with an error
 * naming it. It must not keep what it makes (y aside) for later ops or the host, as in a
 * forward scope. ctx (ctx_bytes) is copied into the step for the second run. Otherwise
 * (eval, free_in_backward off, or inside another lv_graph_remat) it just calls fn. */
typedef lv_tensor *(*lv_graph_remat_fn)(lv_graph *g, const void *ctx, lv_tensor *const *in);
lv_tensor *lv_graph_remat(lv_graph *g, lv_graph_remat_fn fn, const void *ctx, size_t ctx_bytes, int n_in,
                          lv_tensor *const *in);
/* Called by lv_graph_backward after each tape node's backward, with the node's index
 * (descending from the loss's): once node i is done, a leaf whose consumers all have
 * indices >= i has its final gradient (sync replicas start reducing it then). NULL: none.
 * Kept across resets. */
typedef void (*lv_graph_backward_hook)(void *ctx, int node);
void lv_graph_set_backward_hook(lv_graph *g, lv_graph_backward_hook fn, void *ctx);
/* For every tape node and every input of it that is a leaf (a variable) whose gradient
 * lies in grads[0, n): fn(ctx, node index, offset of that gradient in grads, its numel).
 * Only such nodes' backward writes those gradients. */
void lv_graph_visit_leaf_grads(const lv_graph *g, const float *grads, int64_t n,
                               void (*fn)(void *ctx, int node, int64_t offset, int64_t numel), void *ctx);
/* Applies the variable updates this step's ops deferred (batch norm's moving statistics,
 * lv_op_moving_average_update) as kernels and forgets them. The trainer calls it after a
 * training step the learner applied; a skipped or failed step never calls it, and reset
 * drops what was pending, so such a step leaves those variables as they were. */
lv_status lv_graph_apply_updates(lv_graph *g);
/* Updates pending since the last reset or apply. */
int lv_graph_num_updates(const lv_graph *g);

/* A new arena tensor on the graph's device (uninitialized / zeroed / float32 filled with
 * v) — for inputs built by the caller. */
lv_tensor *lv_graph_tensor(lv_graph *g, lv_dtype dtype, lv_shape shape);
lv_tensor *lv_graph_zeros(lv_graph *g, lv_dtype dtype, lv_shape shape);
lv_tensor *lv_graph_fill(lv_graph *g, lv_shape shape, float v);
/* A host tensor (a batch from the input generator) brought into the step: an arena
 * tensor on the graph's device holding a copy (a view of the host data when the graph
 * runs on the host, cpu:0). Valid until reset; NULL after an error. */
lv_tensor *lv_graph_from_host(lv_graph *g, const lv_tensor *host);

/* Copies src's elements into dst's elements [dst_offset, dst_offset + numel(src)) as a
 * queued device copy; dst is a tensor of the graph's device that outlives the step (an
 * incremental decoder's cache). No gradient flows. False with the graph's error set. */
bool lv_graph_copy_into(lv_graph *g, lv_tensor *dst, int64_t dst_offset, const lv_tensor *src);

/* dst's first numel(ids) * d elements = rows ids of table [v, d] (float32, ids int32),
 * one kernel, no gradient: an incremental decoder's cache reordered straight into a
 * tensor of the graph's device that outlives the step. False with the graph's error set
 * (an id outside [0, v) as lv_op_gather reports it). */
bool lv_graph_gather_into(lv_graph *g, lv_tensor *dst, lv_tensor *table, lv_tensor *ids);

/* Incremental decoding in eval mode: take a mark after the per-search work (encoder
 * output), rewind to it before each step, and a search's arena use stays that of one
 * step. Rewinding waits for queued kernels, keeps their errors (sticky) and frees every
 * tensor made after the mark; it needs eval mode (no tape). */
typedef struct lv_graph_mark {
  lv_arena_mark arena, meta;
  int n_nodes, n_checks, n_heap_leaves, n_updates, n_bufs;
} lv_graph_mark;
lv_graph_mark lv_graph_get_mark(lv_graph *g);
void lv_graph_rewind(lv_graph *g, const lv_graph_mark *m);

#endif
