/* Private to src/core: the tape, the op table (ops.def) and the helpers every op front
 * end uses (input checks, device dispatch, arena outputs, gradient buffers). Not for
 * layers: they use ops.h and graph.h only. */
#ifndef LV_CORE_GRAPH_IMPL_H
#define LV_CORE_GRAPH_IMPL_H

#include "core/graph.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "kernels/kernels.h"

typedef enum {
#define X(id, name) LV_OP_##id,
#include "core/ops.def"
#undef X
  LV_OP_COUNT
} lv_op;

extern const char *const lv_op_names[LV_OP_COUNT];

typedef struct lv_node lv_node;
typedef void (*lv_backward_fn)(lv_graph *g, lv_node *n);

/* One recorded op: inputs, output, and whatever its backward needs. */
struct lv_node {
  lv_op op;
  lv_backward_fn backward;
  const lv_kernel_table *k;
  lv_tensor *out;
  lv_tensor **in; /* n_in entries, arena */
  int n_in;
  void *saved;    /* op-specific arena data (argmax, mask, probs, stats) */
  void *saved2;
  int64_t i[8];
  float f[4];
  lv_conv_geom geom;
};

/* False (after recording an error unless one is already there) if the graph has failed
 * or any of the n inputs is NULL. */
bool lv_graph_inputs_ok(lv_graph *g, lv_op op, int n, lv_tensor *const *ins);
/* The kernel table for the inputs' common device; an error if they differ or the device
 * has no kernels. */
const lv_kernel_table *lv_graph_kernels(lv_graph *g, lv_op op, int n, lv_tensor *const *ins);
/* An arena output (device of the op's inputs); NULL with an error naming op and sizes. */
lv_tensor *lv_graph_out(lv_graph *g, lv_op op, lv_dtype dtype, lv_shape shape, lv_device dev);
/* An arena tensor sharing x's data under a new shape (same numel). */
lv_tensor *lv_graph_view_of(lv_graph *g, lv_op op, lv_tensor *x, lv_shape shape);
/* Arena scratch for op; NULL with an error. */
void *lv_graph_scratch(lv_graph *g, lv_op op, size_t bytes);
/* Records a tape node for out if training and any input requires a gradient. */
lv_node *lv_graph_record(lv_graph *g, lv_op op, lv_backward_fn bw, lv_tensor *out, int n,
                         lv_tensor *const *ins);
/* In backward: t's gradient buffer, or NULL if t needs none (or the arena is full).
 * *acc tells the kernel whether to add (existing buffer) or overwrite (fresh, not
 * zeroed). */
lv_tensor *lv_graph_grad(lv_graph *g, lv_tensor *t, bool *acc);
/* Same, but a fresh buffer is zeroed, for kernels that write only part of it. */
lv_tensor *lv_graph_grad_zeroed(lv_graph *g, lv_tensor *t);
/* t's gradient as an alias of src's buffer when t has none yet (reshape); returns false
 * if t already had one (the caller then adds). */
bool lv_graph_grad_alias(lv_graph *g, lv_tensor *t, lv_tensor *src);
/* Records the first error for op ("<name>: <message>"). */
void lv_graph_failf(lv_graph *g, lv_op op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool lv_graph_failed(const lv_graph *g);

/* TF's SAME/VALID output size and leading pad for one spatial dim (k: effective kernel
 * extent). Shared by conv and pooling. */
void lv_core_same_valid(lv_padding pad, int64_t in, int64_t k, int s, int *out, int *lead);

/* "[a,b,c]" into a caller buffer; for error messages. */
#define LV_SHP(t, buf) lv_shape_str(&(t)->shape, (buf), sizeof(buf))

#endif
