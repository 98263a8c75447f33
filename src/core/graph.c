/* The graph: step arena, tape, sticky error, backward pass. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "core/backend.h"
#include "core/graph_impl.h"

const char *const lv_op_names[LV_OP_COUNT] = {
#define X(id, name) name,
#include "core/ops.def"
#undef X
};
_Static_assert(LV_ARRAY_LEN(lv_op_names) == LV_OP_COUNT, "ops.def and lv_op_names disagree");

struct lv_graph {
  lv_arena *arena;
  lv_node *nodes;
  int n_nodes, cap_nodes;
  /* Leaves (inputs made by the caller) given an arena gradient: their grad pointer is
   * cleared at reset, before the arena goes, so it never dangles into the next step.
   * Such a leaf must therefore live until the reset. */
  lv_tensor **heap_leaves;
  int n_heap_leaves, cap_heap_leaves;
  bool training;
  bool backward_done;
  bool failed;
  char err[1024];
};

lv_graph *lv_graph_create(size_t arena_cap_bytes) {
  lv_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->arena = lv_arena_create(arena_cap_bytes);
  g->training = true;
  return g;
}

void lv_graph_destroy(lv_graph *g) {
  if (!g) return;
  lv_graph_reset(g);
  lv_arena_destroy(g->arena);
  free(g->nodes);
  free(g->heap_leaves);
  free(g);
}

void lv_graph_reset(lv_graph *g) {
  for (int i = 0; i < g->n_heap_leaves; i++) g->heap_leaves[i]->grad = NULL;
  g->n_heap_leaves = 0;
  g->n_nodes = 0;
  g->failed = false;
  g->backward_done = false;
  g->err[0] = 0;
  lv_arena_reset(g->arena);
}

void lv_graph_set_training(lv_graph *g, bool training) { g->training = training; }
bool lv_graph_is_training(const lv_graph *g) { return g->training; }
size_t lv_graph_arena_peak(const lv_graph *g) { return lv_arena_peak(g->arena); }
bool lv_graph_failed(const lv_graph *g) { return g->failed; }

lv_status lv_graph_status(const lv_graph *g) {
  if (!g->failed) return NULL;
  bool resource = strstr(g->err, "arena exhausted") != NULL;
  return lv_status_make(resource ? LV_ERR_RESOURCE : LV_ERR_INVALID, "%s", g->err);
}

static void vfail(lv_graph *g, const char *prefix, const char *fmt, va_list ap) {
  if (g->failed) return;
  g->failed = true;
  int k = snprintf(g->err, sizeof g->err, "%s%s", prefix ? prefix : "", prefix ? ": " : "");
  if (k < 0) k = 0;
  if ((size_t)k < sizeof g->err) vsnprintf(g->err + k, sizeof g->err - (size_t)k, fmt, ap);
}

void lv_graph_fail(lv_graph *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(g, NULL, fmt, ap);
  va_end(ap);
}

void lv_graph_failf(lv_graph *g, lv_op op, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(g, lv_op_names[op], fmt, ap);
  va_end(ap);
}

bool lv_graph_inputs_ok(lv_graph *g, lv_op op, int n, lv_tensor *const *ins) {
  if (!g) return false;
  if (g->failed) return false;
  for (int i = 0; i < n; i++)
    if (!ins[i]) {
      lv_graph_failf(g, op, "input %d is NULL", i);
      return false;
    }
  return true;
}

const lv_backend *lv_backend_get(lv_device d) {
  /* CUDA joins here when src/kernels/cuda is built in. */
  return d == LV_DEVICE_CPU ? &lv_cpu_backend : NULL;
}

static const char *const device_names[LV_DEVICE_COUNT] = {"cpu", "cuda"};

const lv_kernel_table *lv_graph_kernels(lv_graph *g, lv_op op, int n, lv_tensor *const *ins) {
  lv_device d = n > 0 ? ins[0]->device : LV_DEVICE_CPU;
  for (int i = 1; i < n; i++)
    if (ins[i]->device != d) {
      lv_graph_failf(g, op, "inputs on different devices: input 0 on %s, input %d on %s",
                     device_names[d], i, device_names[ins[i]->device]);
      return NULL;
    }
  const lv_backend *be = lv_backend_get(d);
  const lv_kernel_table *k = be ? be->kernels : NULL;
  if (!k) lv_graph_failf(g, op, "no kernels for device %s in this build", device_names[d]);
  return k;
}

static void *arena_alloc(lv_graph *g, const char *what, size_t bytes) {
  void *p = lv_arena_alloc(g->arena, bytes);
  if (!p && !g->failed) {
    g->failed = true;
    snprintf(g->err, sizeof g->err,
             "%s: step arena exhausted: need %zu bytes with %zu of %zu in use (peak %zu); "
             "raise the arena cap or lower the batch size",
             what, bytes, lv_arena_used(g->arena), lv_arena_cap(g->arena),
             lv_arena_peak(g->arena));
  }
  return p;
}

static lv_tensor *new_tensor(lv_graph *g, const char *what, lv_dtype dtype, lv_shape shape,
                             lv_device dev) {
  for (int i = 0; i < shape.rank; i++)
    if (shape.d[i] < 0) {
      char b[128];
      lv_graph_fail(g, "%s: negative dimension in shape %s", what,
                    lv_shape_str(&shape, b, sizeof b));
      return NULL;
    }
  lv_tensor *t = arena_alloc(g, what, sizeof *t);
  if (!t) return NULL;
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->shape = shape;
  t->device = dev;
  t->node = -1;
  t->data = arena_alloc(g, what, (size_t)lv_shape_numel(&shape) * lv_dtype_size(dtype));
  return t->data ? t : NULL;
}

lv_tensor *lv_graph_out(lv_graph *g, lv_op op, lv_dtype dtype, lv_shape shape, lv_device dev) {
  return new_tensor(g, lv_op_names[op], dtype, shape, dev);
}

lv_tensor *lv_graph_view_of(lv_graph *g, lv_op op, lv_tensor *x, lv_shape shape) {
  lv_tensor *t = arena_alloc(g, lv_op_names[op], sizeof *t);
  if (!t) return NULL;
  memset(t, 0, sizeof *t);
  t->dtype = x->dtype;
  t->shape = shape;
  t->device = x->device;
  t->data = x->data;
  t->node = -1;
  return t;
}

void *lv_graph_scratch(lv_graph *g, lv_op op, size_t bytes) {
  return arena_alloc(g, lv_op_names[op], bytes);
}

lv_tensor *lv_graph_tensor(lv_graph *g, lv_dtype dtype, lv_shape shape) {
  if (!g || g->failed) return NULL;
  return new_tensor(g, "tensor", dtype, shape, LV_DEVICE_CPU);
}

lv_tensor *lv_graph_zeros(lv_graph *g, lv_dtype dtype, lv_shape shape) {
  lv_tensor *t = lv_graph_tensor(g, dtype, shape);
  if (t) memset(t->data, 0, lv_tensor_nbytes(t));
  return t;
}

lv_node *lv_graph_record(lv_graph *g, lv_op op, lv_backward_fn bw, lv_tensor *out, int n,
                         lv_tensor *const *ins) {
  if (!g->training || !out) return NULL;
  bool need = false;
  for (int i = 0; i < n; i++) need |= ins[i]->requires_grad;
  if (!need) return NULL;
  lv_tensor **in = arena_alloc(g, lv_op_names[op], sizeof(lv_tensor *) * (size_t)(n ? n : 1));
  if (!in) return NULL;
  if (g->n_nodes == g->cap_nodes) {
    int cap = g->cap_nodes ? 2 * g->cap_nodes : 256;
    lv_node *nn = realloc(g->nodes, sizeof *nn * (size_t)cap);
    if (!nn) {
      lv_graph_failf(g, op, "out of memory growing the tape to %d nodes", cap);
      return NULL;
    }
    g->nodes = nn;
    g->cap_nodes = cap;
  }
  lv_node *node = &g->nodes[g->n_nodes];
  memset(node, 0, sizeof *node);
  node->op = op;
  node->backward = bw;
  node->out = out;
  node->in = in;
  node->n_in = n;
  memcpy(in, ins, sizeof(lv_tensor *) * (size_t)n);
  out->requires_grad = true;
  out->node = g->n_nodes++;
  return node;
}

static lv_tensor *alloc_grad(lv_graph *g, lv_tensor *t) {
  lv_tensor *gr = new_tensor(g, "backward", LV_F32, t->shape, t->device);
  if (!gr) return NULL;
  if (t->node < 0) {
    if (g->n_heap_leaves == g->cap_heap_leaves) {
      int cap = g->cap_heap_leaves ? 2 * g->cap_heap_leaves : 16;
      lv_tensor **nl = realloc(g->heap_leaves, sizeof *nl * (size_t)cap);
      if (!nl) {
        lv_graph_fail(g, "backward: out of memory");
        return NULL;
      }
      g->heap_leaves = nl;
      g->cap_heap_leaves = cap;
    }
    g->heap_leaves[g->n_heap_leaves++] = t;
  }
  t->grad = gr;
  return gr;
}

lv_tensor *lv_graph_grad(lv_graph *g, lv_tensor *t, bool *acc) {
  if (!t->requires_grad || t->dtype != LV_F32) return NULL;
  if (t->grad) {
    *acc = true;
    return t->grad;
  }
  *acc = false;
  return alloc_grad(g, t);
}

lv_tensor *lv_graph_grad_zeroed(lv_graph *g, lv_tensor *t) {
  bool acc;
  lv_tensor *gr = lv_graph_grad(g, t, &acc);
  if (gr && !acc) memset(gr->data, 0, lv_tensor_nbytes(gr));
  return gr;
}

bool lv_graph_grad_alias(lv_graph *g, lv_tensor *t, lv_tensor *src) {
  if (t->grad || t->node < 0) return false;
  lv_tensor *gr = arena_alloc(g, "backward", sizeof *gr);
  if (!gr) return true;
  *gr = *src;
  gr->shape = t->shape;
  gr->grad = NULL;
  gr->node = -1;
  gr->requires_grad = false;
  t->grad = gr;
  return true;
}

lv_status lv_graph_backward(lv_graph *g, lv_tensor *loss) {
  if (g->failed) return lv_status_wrap(lv_graph_status(g), "backward");
  if (!loss) return lv_status_make(LV_ERR_INVALID, "backward: loss is NULL");
  char b[128];
  if (loss->dtype != LV_F32 || lv_tensor_numel(loss) != 1)
    return lv_status_make(LV_ERR_INVALID, "backward: loss must be a float32 scalar, got %s %s",
                          lv_dtype_names[loss->dtype], LV_SHP(loss, b));
  if (g->backward_done)
    return lv_status_make(LV_ERR_INTERNAL, "backward: already ran since the last reset");
  if (loss->node < 0 || !loss->requires_grad)
    return lv_status_make(LV_ERR_INVALID,
                          "backward: loss does not depend on any variable that requires a "
                          "gradient (or the graph is not in training mode)");
  g->backward_done = true;
  bool acc;
  lv_tensor *gl = lv_graph_grad(g, loss, &acc);
  if (!gl) return lv_graph_status(g);
  if (acc)
    lv_f32(gl)[0] += 1.0f;
  else
    lv_f32(gl)[0] = 1.0f;
  for (int i = loss->node; i >= 0 && !g->failed; i--) {
    lv_node *n = &g->nodes[i];
    if (n->out->grad) n->backward(g, n);
  }
  return lv_graph_status(g);
}
