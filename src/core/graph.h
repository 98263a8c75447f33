/* Define-by-run autodiff. Ops run immediately and, when any input requires a gradient,
 * record a tape node; lv_graph_backward walks the tape in reverse. Every op output and
 * every intermediate gradient lives in the graph's step arena, freed at once by
 * lv_graph_reset. Variable gradients accumulate into the variables' own grad tensors
 * (zeroed by the caller before a step).
 *
 * Errors are sticky: an op that fails (shape mismatch, arena exhausted) records a
 * message naming the op and the shapes, returns NULL, and every later op given NULL or
 * run on a failed graph returns NULL too. Check lv_graph_status after a forward pass. */
#ifndef LV_CORE_GRAPH_H
#define LV_CORE_GRAPH_H

#include <stdbool.h>

#include "base/status.h"
#include "core/tensor.h"

typedef struct lv_graph lv_graph;

/* arena_cap_bytes: the most one step may allocate (0 = 16 GiB). A new graph is in
 * training mode. Tensors given to ops must live until the next reset; a leaf that
 * requires a gradient but has no grad tensor gets one in the arena, valid until reset. */
lv_graph *lv_graph_create(size_t arena_cap_bytes);
void lv_graph_destroy(lv_graph *g);
/* Drops the tape and every arena tensor; clears the sticky error. */
void lv_graph_reset(lv_graph *g);
/* Training mode: dropout active; records tape. Eval mode records no tape. */
void lv_graph_set_training(lv_graph *g, bool training);
bool lv_graph_is_training(const lv_graph *g);
/* NULL if no op failed since the last reset; else a new status (caller frees). */
lv_status lv_graph_status(const lv_graph *g);
/* Records an error from outside the ops (a layer's own check); keeps the first. */
void lv_graph_fail(lv_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Backpropagates from a float32 scalar; grads of every requires_grad leaf accumulate. */
lv_status lv_graph_backward(lv_graph *g, lv_tensor *loss);
size_t lv_graph_arena_peak(const lv_graph *g);

/* A new arena tensor (uninitialized / zeroed) — for inputs built by the caller. */
lv_tensor *lv_graph_tensor(lv_graph *g, lv_dtype dtype, lv_shape shape);
lv_tensor *lv_graph_zeros(lv_graph *g, lv_dtype dtype, lv_shape shape);

#endif
