/* The graph: step arena, tape, sticky error, backward pass. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/log.h"
#include "core/backend.h"
#include "core/graph_impl.h"
#include "kernels/qweight.h"

const char *const lv_op_names[LV_OP_COUNT] = {
#define X(id, name) name,
#include "core/ops.def"
#undef X
};
_Static_assert(LV_ARRAY_LEN(lv_op_names) == LV_OP_COUNT, "ops.def and lv_op_names disagree");
_Static_assert(LV_OP_COUNT < LV_GRAPH_MEM_OPS, "lv_graph_mem_stats.peak_by_op has no room for every op");

const char *lv_graph_mem_op_name(int i) {
  return i >= 0 && i < LV_OP_COUNT ? lv_op_names[i] : i == LV_OP_COUNT ? "(no op: inputs)" : "(not forward memory)";
}

const char *const lv_graph_mem_kind_names[LV_GRAPH_MEM_COUNT] = {"activations", "forward scratch", "gradients",
                                                                 "backward temporaries"};

/* How a bad id found by a kernel is reported (lv_graph_id_check). */
typedef struct id_check {
  lv_op op;
  const char *what;
  char detail[160];
} id_check;

typedef struct step_buf {
  char *p;
  size_t bytes; /* as the arena rounds */
  uint64_t blk; /* lv_arena_block_id */
  int refs;
  int kind; /* lv_graph_mem_kind */
  int op;   /* the op that made it in forward; LV_OP_COUNT: no op; LV_GRAPH_MEM_OPS - 1: not forward memory */
} step_buf;

typedef struct free_range {
  char *p;
  size_t bytes;
  uint64_t blk;
} free_range;

/* An op output made in forward (lv_tensor.out_seq - 1), for forward scopes. */
typedef struct out_info {
  lv_tensor *t;
  void *data;    /* at creation: a struct copy with other data is another step's */
  bool needed;   /* a backward function reads its data (as far as a scope end looked) */
  bool released; /* given back at a scope's end */
} out_info;

struct lv_graph {
  lv_device device;
  const lv_backend *be;
  lv_arena *arena; /* device data: tensors, scratch */
  lv_arena *meta;  /* host: tensor headers, tape inputs */
  id_check *checks;
  int n_checks, cap_checks;
  lv_node *nodes;
  int n_nodes, cap_nodes;
  /* Leaves (inputs made by the caller) given an arena gradient: their grad pointer is
   * cleared at reset, before the arena goes, so it never dangles into the next step.
   * Such a leaf must therefore live until the reset. */
  lv_tensor **heap_leaves;
  int n_heap_leaves, cap_heap_leaves;
  /* Variable updates that wait for the step to succeed (lv_graph_defer_update). */
  lv_deferred_update *updates;
  int n_updates, cap_updates;
  bool training;
  int64_t step;          /* lv_graph_set_step */
  uint64_t resets;       /* lv_graph_resets */
  uint64_t stream_calls; /* lv_graph_next_stream since the reset */
  bool backward_done;
  bool failed;
  char err[1024];
  lv_graph_backward_hook bwd_hook; /* lv_graph_set_backward_hook */
  void *bwd_hook_ctx;
  /* Every arena allocation of the step (a tensor's data, scratch), with the references
   * to it: the headers that point into it, the step itself for scratch. */
  step_buf *bufs;
  int n_bufs, cap_bufs;
  /* Memory given back during backward, sorted by address; adjacent pieces of one arena
   * block merge. */
  free_range *free;
  int n_free, cap_free;
  bool free_in_backward; /* lv_graph_set_free_in_backward */
  bool free_in_eval;     /* lv_graph_set_free_in_eval */
  bool marked;           /* a mark was taken since the reset (lv_graph_get_mark) */
  bool in_backward;      /* allocations are backward temporaries unless gradients */
  int *temps;            /* buffers (index) the running backward function made, gradients aside */
  int n_temps, cap_temps;
  size_t live[LV_GRAPH_MEM_COUNT], live_total;
  size_t live_by_op[LV_GRAPH_MEM_OPS];
  lv_graph_mem_stats cur, worst;
  /* Op outputs made in forward this step (training with free_in_backward only). */
  out_info *outs;
  int n_outs, cap_outs;
  /* lv_graph_remat: the segment running without a tape (NULL: none); how deep calls nest. */
  struct remat_seg *remat;
  int remat_depth;
};

/* A segment of lv_graph_remat in its first, tape-less run: its inputs, where the step's
 * op outputs stood when it began, and the variables it read. */
typedef struct remat_seg {
  lv_tensor *const *in;
  int n_in, outs0;
  lv_tensor **leaves;
  int n_leaves, cap_leaves;
} remat_seg;

static void *device_alloc(void *user, size_t bytes) {
  const lv_backend *be = user;
  return be->alloc(be->ctx, bytes);
}

static void device_free(void *user, void *p) {
  const lv_backend *be = user;
  be->free(be->ctx, p);
}

lv_graph *lv_graph_create_on(lv_device dev, size_t arena_cap_bytes) {
  const lv_backend *be = lv_backend_get(dev);
  if (!be) return NULL;
  lv_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->device = dev;
  g->be = be;
  /* Room on the host only: a device's memory is taken whole when allocated. */
  const lv_arena_mem mem = {device_alloc, device_free, (void *)be, lv_device_is_host(dev) ? 50 : 0};
  g->arena = lv_arena_create_mem(arena_cap_bytes, &mem);
  g->meta = lv_arena_create(0);
  g->training = true;
  return g;
}

lv_graph *lv_graph_create(size_t arena_cap_bytes) {
  return lv_graph_create_on(lv_device_host(), arena_cap_bytes);
}

lv_device lv_graph_device(const lv_graph *g) { return g->device; }

void lv_graph_destroy(lv_graph *g) {
  if (!g) return;
  lv_graph_reset(g);
  lv_arena_destroy(g->arena);
  lv_arena_destroy(g->meta);
  free(g->nodes);
  free(g->heap_leaves);
  free(g->checks);
  free(g->updates);
  free(g->bufs);
  free(g->free);
  free(g->temps);
  free(g->outs);
  free(g);
}

static void finish_stats(const lv_graph *g, lv_graph_mem_stats *st) {
  *st = g->cur;
  st->arena_reserved = lv_arena_reserved(g->arena);
  st->arena_lifetime_peak = lv_arena_peak(g->arena);
  st->meta_peak = lv_arena_used(g->meta);
  st->nodes = g->n_nodes;
}

static void update_worst(lv_graph *g) {
  lv_graph_mem_stats st;
  finish_stats(g, &st);
  if (st.arena_peak > g->worst.arena_peak || (st.arena_peak == g->worst.arena_peak && st.live_peak > g->worst.live_peak))
    g->worst = st;
}

void lv_graph_mem_stats_get(const lv_graph *g, bool worst, lv_graph_mem_stats *out) {
  finish_stats(g, out);
  if (worst && (g->worst.arena_peak > out->arena_peak ||
                (g->worst.arena_peak == out->arena_peak && g->worst.live_peak > out->live_peak))) {
    size_t lifetime = out->arena_lifetime_peak;
    *out = g->worst;
    out->arena_lifetime_peak = lifetime;
  }
}

void lv_graph_set_free_in_backward(lv_graph *g, bool on) { g->free_in_backward = on; }

bool lv_graph_free_in_backward(const lv_graph *g) { return g->free_in_backward; }
void lv_graph_set_free_in_eval(lv_graph *g, bool on) { g->free_in_eval = on; }

void lv_graph_reset(lv_graph *g) {
  /* Kernels of this step may still run; an error they found belongs to this step. */
  g->be->sync(g->be->ctx);
  lv_kerror e;
  while (LV_K(g->be, error_take, &e)) {
  }
  update_worst(g);
  for (int i = 0; i < g->n_heap_leaves; i++) g->heap_leaves[i]->grad = NULL;
  g->n_heap_leaves = 0;
  g->n_nodes = 0;
  g->n_checks = 0;
  g->n_updates = 0;
  g->resets++;
  g->stream_calls = 0;
  g->failed = false;
  g->backward_done = false;
  g->err[0] = 0;
  g->n_bufs = g->n_free = g->n_temps = 0;
  g->n_outs = 0;
  g->marked = false;
  memset(g->live, 0, sizeof g->live);
  memset(g->live_by_op, 0, sizeof g->live_by_op);
  g->live_total = 0;
  memset(&g->cur, 0, sizeof g->cur);
  lv_arena_reset(g->arena);
  lv_arena_reset(g->meta);
}

void lv_graph_set_training(lv_graph *g, bool training) { g->training = training; }
void lv_graph_set_step(lv_graph *g, int64_t step) { g->step = step; }
int64_t lv_graph_step(const lv_graph *g) { return g->step; }
uint64_t lv_graph_resets(const lv_graph *g) { return g->resets; }
uint64_t lv_graph_stream(const lv_graph *g, uint64_t per_step, uint64_t k) { return (uint64_t)g->step * per_step + k; }
uint64_t lv_graph_next_stream(lv_graph *g) { return lv_graph_stream(g, (uint64_t)1 << 24, g->stream_calls++); }
bool lv_graph_is_training(const lv_graph *g) { return g->training; }
size_t lv_graph_arena_peak(const lv_graph *g) { return lv_arena_peak(g->arena); }
bool lv_graph_failed(const lv_graph *g) { return g->failed; }

static bool take_errors(lv_graph *g);

lv_status lv_graph_status(lv_graph *g) {
  g->be->sync(g->be->ctx);
  take_errors(g);
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

static bool inputs_live(lv_graph *g, lv_op op, int n, lv_tensor *const *ins);

bool lv_graph_floats(lv_graph *g, lv_op op, lv_tensor *t) {
  if (!lv_tensor_floatless(t)) return true;
  bool made = false;
  const float *x = lv_qweight_floats(t->qw, &made);
  const lv_qweight *r = t->qw->root ? t->qw->root : t->qw;
  if (!x) {
    lv_graph_failf(g, op, "out of memory dequantizing a [%lld, %lld] weight", (long long)r->k, (long long)r->n);
    return false;
  }
  if (made)
    lv_info("%s: a quantized (%s) [%lld, %lld] weight gets float values (this op has no path for it; kept from now "
            "on)", lv_op_names[op], lv_qtype_names[r->type], (long long)r->k, (long long)r->n);
  t->data = (void *)x;
  return true;
}

bool lv_graph_inputs_ok_q(lv_graph *g, lv_op op, int n, lv_tensor *const *ins, int keep) {
  if (!g) return false;
  if (g->failed) return false;
  for (int i = 0; i < n; i++)
    if (!ins[i]) {
      lv_graph_failf(g, op, "input %d is NULL", i);
      return false;
    }
  for (int i = 0; i < n; i++)
    if (i != keep && !lv_graph_floats(g, op, ins[i])) return false;
  return inputs_live(g, op, n, ins);
}

bool lv_graph_inputs_ok(lv_graph *g, lv_op op, int n, lv_tensor *const *ins) {
  return lv_graph_inputs_ok_q(g, op, n, ins, -1);
}

const lv_backend *lv_graph_kernels(lv_graph *g, lv_op op, int n, lv_tensor *const *ins) {
  lv_device d = n > 0 ? ins[0]->device : g->device;
  char b0[32], b1[32];
  for (int i = 1; i < n; i++)
    if (!lv_device_eq(ins[i]->device, d)) {
      lv_graph_failf(g, op, "inputs on different devices: input 0 on %s, input %d on %s",
                     lv_device_str(d, b0, sizeof b0), i, lv_device_str(ins[i]->device, b1, sizeof b1));
      return NULL;
    }
  const lv_backend *be = lv_backend_get(d);
  if (!be) {
    lv_graph_failf(g, op, "no kernels for device %s in this build", lv_device_str(d, b0, sizeof b0));
    return NULL;
  }
  if (be != g->be) {
    lv_graph_failf(g, op, "inputs on %s but the graph runs on %s", lv_device_str(d, b0, sizeof b0),
                   lv_device_str(g->device, b1, sizeof b1));
    return NULL;
  }
  return be;
}

static void *alloc_in(lv_graph *g, lv_arena *a, const char *what, size_t bytes) {
  void *p = lv_arena_alloc(a, bytes);
  if (!p && !g->failed) {
    g->failed = true;
    snprintf(g->err, sizeof g->err,
             "%s: step arena exhausted: need %zu bytes with %zu of %zu in use (peak %zu); "
             "raise the arena cap or lower the batch size",
             what, bytes, lv_arena_used(a), lv_arena_cap(a), lv_arena_peak(a));
  }
  return p;
}

/* Room for element n of a doubling array of *cap elements (aborts when out of memory:
 * host bookkeeping, a few bytes per tensor). */
static void *grow_array(void *p, int n, int *cap, size_t elem, int first) {
  if (n < *cap) return p;
  int c = *cap ? 2 * *cap : first;
  while (c <= n) c *= 2;
  void *np = realloc(p, elem * (size_t)c);
  LV_ASSERT(np);
  *cap = c;
  return np;
}

static size_t arena_round(size_t bytes) {
  bytes = (bytes + 63) & ~(size_t)63;
  return bytes ? bytes : 64;
}

/* The smallest given-back piece that holds bytes, cut from its front. */
static void *take_free(lv_graph *g, size_t bytes, uint64_t *blk) {
  int best = -1;
  for (int i = 0; i < g->n_free; i++)
    if (g->free[i].bytes >= bytes && (best < 0 || g->free[i].bytes < g->free[best].bytes)) {
      best = i;
      if (g->free[i].bytes == bytes) break;
    }
  if (best < 0) return NULL;
  free_range *f = &g->free[best];
  char *p = f->p;
  *blk = f->blk;
  if (f->bytes == bytes) {
    memmove(f, f + 1, sizeof *f * (size_t)(g->n_free - best - 1));
    g->n_free--;
  } else {
    f->p += bytes;
    f->bytes -= bytes;
  }
  return p;
}

static void put_free(lv_graph *g, char *p, size_t bytes, uint64_t blk) {
  int i = 0;
  while (i < g->n_free && g->free[i].p < p) i++;
  bool prev = i > 0 && g->free[i - 1].blk == blk && g->free[i - 1].p + g->free[i - 1].bytes == p;
  bool next = i < g->n_free && g->free[i].blk == blk && p + bytes == g->free[i].p;
  if (prev && next) {
    g->free[i - 1].bytes += bytes + g->free[i].bytes;
    memmove(&g->free[i], &g->free[i + 1], sizeof *g->free * (size_t)(g->n_free - i - 1));
    g->n_free--;
  } else if (prev) {
    g->free[i - 1].bytes += bytes;
  } else if (next) {
    g->free[i].p = p;
    g->free[i].bytes += bytes;
  } else {
    g->free = grow_array(g->free, g->n_free, &g->cap_free, sizeof *g->free, 64);
    memmove(&g->free[i + 1], &g->free[i], sizeof *g->free * (size_t)(g->n_free - i));
    g->free[i] = (free_range){p, bytes, blk};
    g->n_free++;
  }
}

/* A reference to buf that the running backward function holds until it returns. */
static void note_temp(lv_graph *g, int buf) {
  if (!g->free_in_backward) return;
  g->temps = grow_array(g->temps, g->n_temps, &g->cap_temps, sizeof *g->temps, 64);
  g->temps[g->n_temps++] = buf;
}

/* Device memory for tensor data and scratch: a buffer with one reference (its index + 1
 * in *buf), counted as kind; a backward function's own buffers (not gradients) are noted
 * as temporaries. */
static void *arena_alloc(lv_graph *g, const char *what, size_t bytes, int kind, int op, int *buf) {
  *buf = 0;
  bytes = arena_round(bytes);
  uint64_t blk = 0;
  /* After a mark nothing is taken from what was given back: a rewind forgets the
   * allocations since the mark, and a piece they took would be lost with them. */
  char *p = g->n_free && !g->marked ? take_free(g, bytes, &blk) : NULL;
  if (p) {
    g->cur.reused += bytes;
  } else {
    if (!(p = alloc_in(g, g->arena, what, bytes))) return NULL;
    blk = lv_arena_block_id(g->arena);
    size_t used = lv_arena_used(g->arena);
    if (used > g->cur.arena_peak) g->cur.arena_peak = used;
  }
  if (g->in_backward && kind != LV_GRAPH_MEM_GRADS) kind = LV_GRAPH_MEM_BWD_TEMPS;
  g->bufs = grow_array(g->bufs, g->n_bufs, &g->cap_bufs, sizeof *g->bufs, 256);
  if (kind != LV_GRAPH_MEM_ACTIVATIONS && kind != LV_GRAPH_MEM_FWD_SCRATCH) op = LV_GRAPH_MEM_OPS - 1;
  g->bufs[g->n_bufs++] = (step_buf){p, bytes, blk, 1, kind, op};
  *buf = g->n_bufs;
  g->cur.allocated[kind] += bytes;
  g->live[kind] += bytes;
  g->live_by_op[op] += bytes;
  g->live_total += bytes;
  if (g->live_total > g->cur.live_peak) {
    g->cur.live_peak = g->live_total;
    memcpy(g->cur.at_peak, g->live, sizeof g->live);
    memcpy(g->cur.peak_by_op, g->live_by_op, sizeof g->live_by_op);
  }
  if (kind == LV_GRAPH_MEM_BWD_TEMPS) note_temp(g, *buf);
  return p;
}

static void buf_unref(lv_graph *g, int buf) {
  step_buf *b = &g->bufs[buf - 1];
  LV_ASSERT(b->refs > 0);
  if (--b->refs) return;
  g->live[b->kind] -= b->bytes;
  g->live_by_op[b->op] -= b->bytes;
  g->live_total -= b->bytes;
  g->cur.released += b->bytes;
  if (!g->in_backward) g->cur.released_forward += b->bytes;
  put_free(g, b->p, b->bytes, b->blk);
}

/* The buffer of t's data if t's reference to it is still good (a struct copy's index
 * may be another step's): 0 if none. */
static int buf_of(const lv_graph *g, const lv_tensor *t) {
  if (t->buf <= 0 || t->buf > g->n_bufs) return 0;
  const step_buf *b = &g->bufs[t->buf - 1];
  const char *d = t->data;
  return b->refs > 0 && d >= b->p && d < b->p + b->bytes ? t->buf : 0;
}

/* Header t shares src's memory: one more reference to its buffer. */
static void share_buf(lv_graph *g, lv_tensor *t, const lv_tensor *src) {
  t->buf = buf_of(g, src);
  t->buf_owner = t;
  if (t->buf) g->bufs[t->buf - 1].refs++;
}

/* Gives back t's reference (the header the graph made only) and forgets its data. */
static void release_data(lv_graph *g, lv_tensor *t) {
  if (t->buf_owner != t || !buf_of(g, t)) return;
  buf_unref(g, t->buf);
  t->buf = 0;
  t->data = NULL;
}

/* Host memory for tensor headers and tape inputs. */
static void *meta_alloc(lv_graph *g, const char *what, size_t bytes) {
  return alloc_in(g, g->meta, what, bytes);
}

/* A host-side tensor header on the graph's device, data unset. */
static lv_tensor *new_header(lv_graph *g, const char *what, lv_dtype dtype, lv_shape shape) {
  lv_tensor *t = meta_alloc(g, what, sizeof *t);
  if (!t) return NULL;
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->shape = shape;
  t->device = g->device;
  t->node = -1;
  return t;
}

/* ---- Forward scopes (graph.h: lv_graph_scope_begin) ---- */

static bool tracking(const lv_graph *g) {
  return g->training ? g->free_in_backward && !g->in_backward : g->free_in_eval && !g->marked;
}

/* Op output t, made in forward, gets its number. */
static void number_out(lv_graph *g, lv_tensor *t) {
  if (!tracking(g)) return;
  g->outs = grow_array(g->outs, g->n_outs, &g->cap_outs, sizeof *g->outs, 256);
  g->outs[g->n_outs++] = (out_info){t, t->data, false, false};
  t->out_seq = g->n_outs;
}

/* t's entry among this step's op outputs, or NULL (not one, or a copy from another step). */
static out_info *out_of(lv_graph *g, const lv_tensor *t) {
  int k = t->out_seq;
  if (k < 1 || k > g->n_outs) return NULL;
  out_info *o = &g->outs[k - 1];
  return o->data == t->data || o->t == t ? o : NULL;
}

static lv_tensor *new_tensor(lv_graph *g, const char *what, lv_dtype dtype, lv_shape shape, int kind, int op) {
  for (int i = 0; i < shape.rank; i++)
    if (shape.d[i] < 0) {
      char b[128];
      lv_graph_fail(g, "%s: negative dimension in shape %s", what,
                    lv_shape_str(&shape, b, sizeof b));
      return NULL;
    }
  lv_tensor *t = new_header(g, what, dtype, shape);
  if (!t) return NULL;
  t->data = arena_alloc(g, what, (size_t)lv_shape_numel(&shape) * lv_dtype_size(dtype), kind, op, &t->buf);
  t->buf_owner = t;
  return t->data ? t : NULL;
}

lv_tensor *lv_graph_out(lv_graph *g, lv_op op, lv_dtype dtype, lv_shape shape) {
  lv_tensor *t = new_tensor(g, lv_op_names[op], dtype, shape, LV_GRAPH_MEM_ACTIVATIONS, (int)op);
  if (t) number_out(g, t);
  return t;
}

lv_tensor *lv_graph_view_of(lv_graph *g, lv_op op, lv_tensor *x, lv_shape shape) {
  return lv_graph_view_at(g, op, x, shape, 0);
}

lv_tensor *lv_graph_view_at(lv_graph *g, lv_op op, lv_tensor *x, lv_shape shape, size_t offset) {
  lv_tensor *t = new_header(g, lv_op_names[op], x->dtype, shape);
  if (!t) return NULL;
  t->device = x->device;
  t->data = x->data ? (char *)x->data + offset : NULL; /* NULL: a float-less weight's (qweight.h) */
  share_buf(g, t, x);
  if (t->buf && g->in_backward) note_temp(g, t->buf);
  number_out(g, t);
  return t;
}

void *lv_graph_scratch(lv_graph *g, lv_op op, size_t bytes) {
  int buf;
  return arena_alloc(g, lv_op_names[op], bytes, LV_GRAPH_MEM_FWD_SCRATCH, (int)op, &buf);
}

void *lv_graph_scratch_buf(lv_graph *g, lv_op op, size_t bytes, int *buf) {
  return arena_alloc(g, lv_op_names[op], bytes, LV_GRAPH_MEM_FWD_SCRATCH, (int)op, buf);
}

void lv_graph_scratch_done(lv_graph *g, int buf) {
  if (buf > 0 && tracking(g)) buf_unref(g, buf);
}

lv_tensor *lv_graph_tensor(lv_graph *g, lv_dtype dtype, lv_shape shape) {
  if (!g || g->failed) return NULL;
  return new_tensor(g, "tensor", dtype, shape, LV_GRAPH_MEM_ACTIVATIONS, LV_OP_COUNT);
}

lv_tensor *lv_graph_zeros(lv_graph *g, lv_dtype dtype, lv_shape shape) {
  lv_tensor *t = lv_graph_tensor(g, dtype, shape);
  if (t) LV_K(g->be, zero, lv_tensor_nbytes(t), t->data);
  return t;
}

lv_tensor *lv_graph_fill(lv_graph *g, lv_shape shape, float v) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, shape);
  if (t) LV_K(g->be, fill, lv_tensor_numel(t), v, lv_f32(t));
  return t;
}

lv_tensor *lv_graph_from_host(lv_graph *g, const lv_tensor *host) {
  if (!g || g->failed) return NULL;
  char b[32];
  if (!host || !lv_device_is_host(host->device)) {
    lv_graph_fail(g, "from_host: %s is not a host tensor",
                  host ? lv_device_str(host->device, b, sizeof b) : "NULL");
    return NULL;
  }
  if (host->dtype == LV_STRING) {
    lv_graph_fail(g, "from_host: a string tensor stays on the host (strings are not graph values)");
    return NULL;
  }
  if (lv_device_is_host(g->device)) {
    lv_tensor *t = new_header(g, "from_host", host->dtype, host->shape);
    if (t) t->data = host->data;
    return t;
  }
  lv_tensor *t = new_tensor(g, "from_host", host->dtype, host->shape, LV_GRAPH_MEM_ACTIVATIONS, LV_OP_COUNT);
  if (t) g->be->copy(g->be->ctx, t->data, host->data, lv_tensor_nbytes(t), LV_COPY_HOST_TO_DEVICE);
  return t;
}

bool lv_graph_copy_into(lv_graph *g, lv_tensor *dst, int64_t dst_offset, const lv_tensor *src) {
  if (!g || g->failed) return false;
  char a[32], b[32];
  if (!dst || !src || dst->dtype != src->dtype || !lv_device_eq(dst->device, g->device) ||
      !lv_device_eq(src->device, g->device)) {
    lv_graph_fail(g, "copy_into: needs two tensors of one dtype on the graph's device (dst %s, src %s)",
                  dst ? lv_device_str(dst->device, a, sizeof a) : "NULL",
                  src ? lv_device_str(src->device, b, sizeof b) : "NULL");
    return false;
  }
  int64_t n = lv_tensor_numel(src), cap = lv_tensor_numel(dst);
  if (dst_offset < 0 || dst_offset > cap || n > cap - dst_offset) {
    lv_graph_fail(g, "copy_into: %lld elements at offset %lld do not fit in %lld", (long long)n,
                  (long long)dst_offset, (long long)cap);
    return false;
  }
  size_t es = lv_dtype_size(src->dtype);
  if (n > 0)
    g->be->copy(g->be->ctx, (char *)dst->data + (size_t)dst_offset * es, src->data, (size_t)n * es,
                LV_COPY_DEVICE_TO_DEVICE);
  return true;
}

lv_graph_mark lv_graph_get_mark(lv_graph *g) {
  g->marked = true;
  lv_graph_mark m = {lv_arena_get_mark(g->arena), lv_arena_get_mark(g->meta), g->n_nodes, g->n_checks,
                     g->n_heap_leaves, g->n_updates, g->n_bufs};
  return m;
}

void lv_graph_rewind(lv_graph *g, const lv_graph_mark *m) {
  LV_ASSERT(!g->training && g->n_nodes == m->n_nodes);
  /* Errors of the kernels queued since the mark name checks that are about to go. */
  g->be->sync(g->be->ctx);
  take_errors(g);
  for (int i = m->n_heap_leaves; i < g->n_heap_leaves; i++) g->heap_leaves[i]->grad = NULL;
  g->n_heap_leaves = m->n_heap_leaves;
  g->n_checks = m->n_checks;
  g->n_updates = m->n_updates;
  for (int i = m->n_bufs; i < g->n_bufs; i++)
    if (g->bufs[i].refs > 0) {
      g->live[g->bufs[i].kind] -= g->bufs[i].bytes;
      g->live_by_op[g->bufs[i].op] -= g->bufs[i].bytes;
      g->live_total -= g->bufs[i].bytes;
    }
  g->n_bufs = m->n_bufs;
  lv_arena_rewind(g->arena, &m->arena);
  lv_arena_rewind(g->meta, &m->meta);
}

uint64_t lv_graph_id_check(lv_graph *g, lv_op op, const char *what, const char *detail) {
  g->checks = grow_array(g->checks, g->n_checks, &g->cap_checks, sizeof *g->checks, 16);
  id_check *c = &g->checks[g->n_checks];
  c->op = op;
  c->what = what;
  snprintf(c->detail, sizeof c->detail, "%s", detail);
  return (uint64_t)g->n_checks++;
}

/* Moves errors the device already knows of into the graph's sticky error; true if any. */
static bool take_errors(lv_graph *g) {
  bool any = false;
  lv_kerror e;
  while (LV_K(g->be, error_take, &e)) {
    any = true;
    if (e.tag >= (uint64_t)g->n_checks) {
      lv_graph_fail(g, "kernel error with unknown tag %llu", (unsigned long long)e.tag);
      continue;
    }
    const id_check *c = &g->checks[e.tag];
    lv_graph_failf(g, c->op, "%s %lld at position %lld is outside [0, %lld) %s", c->what,
                   (long long)e.value, (long long)e.pos, (long long)e.bound, c->detail);
  }
  return any;
}

bool lv_graph_poll_errors(lv_graph *g) { return !take_errors(g); }

static void remat_note(lv_graph *g, lv_op op, int n, lv_tensor *const *ins);

lv_node *lv_graph_record(lv_graph *g, lv_op op, lv_backward_fn bw, lv_tensor *out, int n,
                         lv_tensor *const *ins) {
  if (!g->training || !out) return NULL;
  if (g->remat) {
    remat_note(g, op, n, ins);
    return NULL;
  }
  bool need = false;
  for (int i = 0; i < n; i++) need |= ins[i]->requires_grad;
  if (!need) return NULL;
  lv_tensor **in = meta_alloc(g, lv_op_names[op], sizeof(lv_tensor *) * (size_t)(n ? n : 1));
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

lv_node *lv_graph_node(lv_graph *g, int i) {
  LV_ASSERT(i >= 0 && i < g->n_nodes);
  return &g->nodes[i];
}

/* t's gradient gr (its data set): a leaf's is cleared at the reset. */
static lv_tensor *set_grad(lv_graph *g, lv_tensor *t, lv_tensor *gr) {
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

static lv_tensor *alloc_grad(lv_graph *g, lv_tensor *t) {
  lv_tensor *gr = new_tensor(g, "backward", LV_F32, t->shape, LV_GRAPH_MEM_GRADS, LV_OP_COUNT);
  return gr ? set_grad(g, t, gr) : NULL;
}

lv_tensor *lv_graph_grad_from_scratch(lv_graph *g, lv_tensor *t, int buf) {
  if (!t->requires_grad || t->dtype != LV_F32 || t->grad || buf <= 0 || buf > g->n_bufs) return NULL;
  step_buf *b = &g->bufs[buf - 1];
  if (b->refs != 1 || b->kind != LV_GRAPH_MEM_FWD_SCRATCH || b->bytes < lv_tensor_nbytes(t)) return NULL;
  lv_tensor *gr = new_header(g, "backward", LV_F32, t->shape);
  if (!gr) return NULL;
  gr->data = b->p;
  gr->buf = buf;
  gr->buf_owner = gr;
  /* From forward scratch of its op to gradient memory, in the counts as in the buffer. */
  g->live[b->kind] -= b->bytes;
  g->live_by_op[b->op] -= b->bytes;
  b->kind = LV_GRAPH_MEM_GRADS;
  b->op = LV_GRAPH_MEM_OPS - 1;
  g->live[b->kind] += b->bytes;
  g->live_by_op[b->op] += b->bytes;
  return set_grad(g, t, gr);
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
  if (gr && !acc) LV_K(g->be, zero, lv_tensor_nbytes(gr), gr->data);
  return gr;
}

bool lv_graph_grad_alias(lv_graph *g, lv_tensor *t, lv_tensor *src) {
  if (t->grad || t->node < 0) return false;
  lv_tensor *gr = meta_alloc(g, "backward", sizeof *gr);
  if (!gr) return true;
  *gr = *src;
  share_buf(g, gr, src);
  gr->shape = t->shape;
  gr->grad = NULL;
  gr->node = -1;
  gr->requires_grad = false;
  t->grad = gr;
  return true;
}

void lv_graph_grad_pass(lv_graph *g, const lv_backend *be, lv_tensor *t, lv_tensor *gy) {
  if (!t->requires_grad || lv_graph_grad_alias(g, t, gy)) return;
  bool acc;
  lv_tensor *gt = lv_graph_grad(g, t, &acc);
  if (gt) LV_K(be, axpy, lv_tensor_numel(gt), 1.0f, lv_f32(gy), lv_f32(gt), acc);
}

/* Tensors node n's backward reads besides its inputs and its output (graph_impl.h). */
static int saved_tensors(const lv_node *n, lv_tensor **out) {
  int k = 0;
  switch (n->op) {
    case LV_OP_SOFTMAX_XENT: out[k++] = n->s.sm.target; break;
    case LV_OP_LSTM_STEP: out[k++] = n->s.lstm.m_out; break;
    case LV_OP_RNN_SEQ_ANCHOR:
      out[k++] = n->s.rnn.act;
      out[k++] = n->s.rnn.m0;
      break;
    default: break;
  }
  return k;
}

/* The tensors whose data node n's backward reads: bit j for input j, bit 31 for the
 * output (saved tensors always). An op not listed reads them all; list an op here only
 * after reading its backward function and kernels. */
static uint32_t backward_reads(const lv_node *n) {
  enum { OUT = 1u << 31, ALL = ~0u };
  switch (n->op) {
    case LV_OP_ADD: case LV_OP_SUB: case LV_OP_SCALE: case LV_OP_ADD_SCALAR: case LV_OP_RESHAPE:
    case LV_OP_TRANSPOSE: case LV_OP_CONCAT: case LV_OP_SLICE: case LV_OP_DROPOUT:
      return 0;
    case LV_OP_REDUCE_SUM: case LV_OP_REDUCE_MEAN: return n->s.red.kind == LV_RED_MAX ? ALL : 0;
    case LV_OP_MATMUL: case LV_OP_BATCH_MATMUL: case LV_OP_MUL: case LV_OP_MATMUL_ONES_COL: return 3;
    case LV_OP_ADDMM: return 6;                  /* a and b, not c */
    case LV_OP_DIV: return 2 | OUT;              /* b and the quotient */
    case LV_OP_SOFTMAX: case LV_OP_LOG_SOFTMAX: return OUT;
    case LV_OP_LAYER_NORM: case LV_OP_LAYER_NORM_PLUS1: return ALL & ~OUT;
    case LV_OP_SPARSE_SOFTMAX_XENT: case LV_OP_GATHER: return 2; /* the ids */
    case LV_OP_SMOOTHED_XENT: return 6;                          /* the ids and weights; the softmax is scratch */
    case LV_OP_REMAT: return ALL & ~OUT; /* the inputs, to run fn again; not y */
    case LV_OP_ACTIVATION: {
      const unsigned r = lv_act_bwd_reads(n->s.act.act);
      return (r & 1 ? 1u : 0u) | (r & 2 ? OUT : 0u);
    }
    default: return ALL;
  }
}

static void mark_needed(lv_graph *g, lv_tensor *t) {
  out_info *o = t ? out_of(g, t) : NULL;
  if (o) o->needed = true;
}

/* An op reading a tensor that a scope gave back is a caller's error (a tensor used past
 * its scope without being among the scope's outputs): an error naming the op, never a
 * read of memory that is another tensor's. */
static bool inputs_live(lv_graph *g, lv_op op, int n, lv_tensor *const *ins) {
  if (!g->n_outs) return true;
  for (int i = 0; i < n; i++) {
    const out_info *o = ins[i]->data ? NULL : out_of(g, ins[i]);
    if (o && o->released) {
      lv_graph_failf(g, op, "input %d was given back at the end of a forward scope (lv_graph_scope_end) that did not "
                     "name it among its outputs", i);
      return false;
    }
  }
  return true;
}

lv_graph_scope lv_graph_scope_begin(const lv_graph *g) {
  lv_graph_scope m = {g->n_outs, g->n_nodes};
  return m;
}

void lv_graph_scope_end(lv_graph *g, const lv_graph_scope *m, lv_tensor *const *keep, int n_keep) {
  if (!tracking(g) || g->failed || m->outs >= g->n_outs) return;
  /* Only nodes recorded in the scope can read what the scope made. */
  for (int i = m->nodes; i < g->n_nodes; i++) {
    const lv_node *n = &g->nodes[i];
    lv_tensor *ts[4];
    int k = saved_tensors(n, ts);
    for (int j = 0; j < k; j++) mark_needed(g, ts[j]);
    uint32_t r = backward_reads(n);
    if (r >> 31) mark_needed(g, n->out);
    for (int j = 0; j < n->n_in; j++)
      if (j >= 31 || (r >> j & 1)) mark_needed(g, n->in[j]);
  }
  for (int k = m->outs; k < g->n_outs; k++) {
    out_info *o = &g->outs[k];
    bool kept = o->needed || o->released;
    for (int i = 0; !kept && i < n_keep; i++) kept = keep[i] && out_of(g, keep[i]) == o;
    if (kept) continue;
    release_data(g, o->t);
    o->released = true;
  }
}

/* Which tape tensors die after which node's backward: dead[start[i], start[i + 1]) are
 * the tensors (outputs of nodes) that no node below i reads. */
typedef struct release_plan {
  int *start;
  lv_tensor **dead;
} release_plan;

/* Over the nodes [lo, root] (start and dead indexed from lo): a tensor of a node below lo
 * is another plan's. */
static bool plan_releases(lv_graph *g, int lo, int root, release_plan *p) {
  const int m = root - lo + 1;
  size_t refs = 0;
  for (int i = lo; i <= root; i++) refs += (size_t)g->nodes[i].n_in + 3;
  size_t cap = 64;
  while (cap < 2 * refs) cap *= 2;
  lv_tensor **keys = calloc(cap, sizeof *keys);
  int *last = malloc(sizeof *last * cap);
  p->start = calloc((size_t)m + 1, sizeof *p->start);
  if (!keys || !last || !p->start) goto fail;
  int n_keys = 0;
  /* Ascending, so the first node to note a tensor is the lowest that reads it. */
  for (int i = lo; i <= root; i++) {
    const lv_node *n = &g->nodes[i];
    lv_tensor *ts[4 + 1];
    int k = saved_tensors(n, ts);
    ts[k++] = n->out;
    for (int j = -k; j < n->n_in; j++) {
      lv_tensor *t = j < 0 ? ts[-j - 1] : n->in[j];
      if (!t || t->node < lo) continue;
      size_t h = ((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull & (cap - 1);
      while (keys[h] && keys[h] != t) h = (h + 1) & (cap - 1);
      if (keys[h]) continue;
      keys[h] = t;
      last[h] = i - lo;
      n_keys++;
      p->start[i - lo + 1]++;
    }
  }
  for (int i = 0; i < m; i++) p->start[i + 1] += p->start[i];
  p->dead = malloc(sizeof *p->dead * (size_t)(n_keys ? n_keys : 1));
  int *fill = malloc(sizeof *fill * (size_t)m);
  if (!p->dead || !fill) {
    free(fill);
    goto fail;
  }
  memcpy(fill, p->start, sizeof *fill * (size_t)m);
  for (size_t h = 0; h < cap; h++)
    if (keys[h]) p->dead[fill[last[h]]++] = keys[h];
  free(fill);
  free(keys);
  free(last);
  return true;
fail:
  free(keys);
  free(last);
  free(p->start);
  p->start = NULL;
  return false;
}

/* Runs the backward functions of nodes root down to lo (root's output has its gradient),
 * giving back what dies as it goes (free_in_backward); the hook sees each node if hook.
 * False if planning the releases ran out of memory (nothing ran). */
static bool backward_range(lv_graph *g, int lo, int root, const lv_tensor *keep, bool hook) {
  release_plan plan = {0};
  if (g->free_in_backward && !plan_releases(g, lo, root, &plan)) return false;
  for (int i = root; i >= lo && !g->failed; i--) {
    lv_node *n = &g->nodes[i];
    g->n_temps = 0;
    if (n->out->grad) n->backward(g, n);
    if (hook && g->bwd_hook) g->bwd_hook(g->bwd_hook_ctx, i);
    if (!plan.start) continue;
    for (int k = 0; k < g->n_temps; k++) buf_unref(g, g->temps[k]);
    g->n_temps = 0;
    for (int k = plan.start[i - lo]; k < plan.start[i - lo + 1]; k++) {
      lv_tensor *t = plan.dead[k];
      if (t->grad) release_data(g, t->grad);
      if (t != keep) release_data(g, t);
    }
  }
  free(plan.start);
  free(plan.dead);
  return true;
}

/* ---- Rematerialization (graph.h: lv_graph_remat) ---- */

static bool remat_is_input(const remat_seg *s, const lv_tensor *t) {
  for (int i = 0; i < s->n_in; i++)
    if (s->in[i] == t) return true;
  return false;
}

/* An op of the tape-less run read ins: each must be one of the segment's inputs, a
 * variable (noted, for the node), or made inside. */
static void remat_note(lv_graph *g, lv_op op, int n, lv_tensor *const *ins) {
  remat_seg *s = g->remat;
  for (int i = 0; i < n; i++) {
    lv_tensor *t = ins[i];
    if (!t || remat_is_input(s, t)) continue;
    const out_info *o = out_of(g, t);
    if (t->node >= 0 || (o && t->out_seq <= s->outs0)) {
      lv_graph_failf(g, op, "input %d (%s, a tensor of the step made before lv_graph_remat) is not among the "
                     "remat function's inputs: pass every tensor it reads", i, lv_dtype_names[t->dtype]);
      return;
    }
    if (!t->requires_grad) continue;
    bool seen = false;
    for (int j = 0; j < s->n_leaves && !seen; j++) seen = s->leaves[j] == t;
    if (seen) continue;
    s->leaves = grow_array(s->leaves, s->n_leaves, &s->cap_leaves, sizeof *s->leaves, 16);
    s->leaves[s->n_leaves++] = t;
  }
}

/* Gives back the forward scratch of the ops since buffer bufs0 still held (the ops
 * whose backward would read it have none, or have run). */
static void remat_release_scratch(lv_graph *g, int bufs0) {
  for (int b = bufs0; b < g->n_bufs; b++)
    if (g->bufs[b].kind == LV_GRAPH_MEM_FWD_SCRATCH && g->bufs[b].refs > 0) {
      g->bufs[b].refs = 1;
      buf_unref(g, b + 1);
    }
}

static void remat_bwd(lv_graph *g, lv_node *nd) {
  /* Running fn records nodes: the tape may move, so nd is read now only. */
  const lv_saved_remat sv = nd->s.remat;
  lv_tensor **in = nd->in, *gy = nd->out->grad;
  const int lo = g->n_nodes, bufs0 = g->n_bufs, updates0 = g->n_updates;
  const uint64_t streams = g->stream_calls;
  g->stream_calls = sv.streams;
  g->in_backward = false; /* a forward again: its outputs are activations, its scopes give back */
  g->remat_depth++;
  lv_graph_scope sc = lv_graph_scope_begin(g);
  lv_tensor *y = sv.fn(g, sv.ctx, in);
  g->remat_depth--;
  g->stream_calls = streams;
  g->n_updates = updates0;
  if (y && !g->failed) lv_graph_scope_end(g, &sc, &y, 1);
  g->in_backward = true;
  if (!y || g->failed) {
    if (!g->failed) lv_graph_fail(g, "remat: the forward run again in backward gave no output");
  } else if (y->node >= lo) {
    lv_graph_grad_pass(g, g->be, y, gy);
    if (!backward_range(g, lo, y->node, NULL, false)) lv_graph_fail(g, "remat: out of memory planning backward");
  }
  remat_release_scratch(g, bufs0);
  g->n_nodes = lo;
  g->n_temps = 0;
}

lv_tensor *lv_graph_remat(lv_graph *g, lv_graph_remat_fn fn, const void *ctx, size_t ctx_bytes, int n_in,
                          lv_tensor *const *in) {
  if (!g || g->failed) return NULL;
  if (!g->training || !tracking(g) || g->remat_depth) return fn(g, ctx, in); /* eval, no give-back, nested */
  for (int i = 0; i < n_in; i++)
    if (!in[i]) {
      lv_graph_fail(g, "remat: input %d is NULL", i);
      return NULL;
    }
  void *cc = ctx_bytes ? meta_alloc(g, "remat", ctx_bytes) : NULL;
  lv_tensor **ins = meta_alloc(g, "remat", sizeof *ins * (size_t)(n_in ? n_in : 1));
  if ((ctx_bytes && !cc) || !ins) return NULL;
  if (cc) memcpy(cc, ctx, ctx_bytes);
  memcpy(ins, in, sizeof *ins * (size_t)n_in);
  remat_seg seg = {ins, n_in, g->n_outs, NULL, 0, 0};
  const uint64_t streams = g->stream_calls;
  const int bufs0 = g->n_bufs, updates0 = g->n_updates;
  lv_graph_scope sc = lv_graph_scope_begin(g);
  g->remat = &seg;
  g->remat_depth++;
  lv_tensor *y = fn(g, cc, ins);
  g->remat = NULL;
  g->remat_depth--;
  if (g->n_updates != updates0 && !g->failed)
    lv_graph_fail(g, "remat: the function deferred variable updates (batch norm's moving statistics), which "
                  "rematerialization does not support: leave remat off for such layers");
  if (y && !g->failed && remat_is_input(&seg, y)) {
    free(seg.leaves);
    return y;
  }
  lv_tensor **all = NULL;
  if (y && !g->failed) {
    lv_graph_scope_end(g, &sc, &y, 1);
    remat_release_scratch(g, bufs0);
    all = meta_alloc(g, "remat", sizeof *all * (size_t)(n_in + seg.n_leaves + 1));
  }
  if (!all) {
    free(seg.leaves);
    return NULL;
  }
  memcpy(all, ins, sizeof *all * (size_t)n_in);
  if (seg.n_leaves) memcpy(all + n_in, seg.leaves, sizeof *all * (size_t)seg.n_leaves);
  lv_node *nd = lv_graph_record(g, LV_OP_REMAT, remat_bwd, y, n_in + seg.n_leaves, all);
  free(seg.leaves);
  if (nd) {
    nd->be = g->be;
    nd->s.remat = (lv_saved_remat){fn, cc, streams, n_in};
  }
  return y;
}

lv_status lv_graph_backward(lv_graph *g, lv_tensor *loss) {
  take_errors(g);
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
    LV_K(g->be, scale_add, 1, lv_f32(gl), 1.0f, 1.0f, lv_f32(gl));
  else
    LV_K(g->be, fill, 1, 1.0f, lv_f32(gl));
  g->in_backward = true;
  bool ok = backward_range(g, 0, loss->node, loss, true);
  g->in_backward = false;
  g->n_temps = 0;
  if (!ok)
    return lv_status_make(LV_ERR_RESOURCE, "backward: out of memory planning the release of %d nodes' tensors",
                          loss->node + 1);
  return lv_graph_status(g);
}

void lv_graph_set_backward_hook(lv_graph *g, lv_graph_backward_hook fn, void *ctx) {
  g->bwd_hook = fn;
  g->bwd_hook_ctx = ctx;
}

void lv_graph_visit_leaf_grads(const lv_graph *g, const float *grads, int64_t n,
                               void (*fn)(void *ctx, int node, int64_t offset, int64_t numel), void *ctx) {
  for (int i = 0; i < g->n_nodes; i++) {
    const lv_node *nd = &g->nodes[i];
    for (int j = 0; j < nd->n_in; j++) {
      const lv_tensor *x = nd->in[j];
      if (!x || x->node >= 0 || !x->grad || !x->grad->data) continue;
      const float *d = x->grad->data;
      if (d < grads || d >= grads + n) continue;
      fn(ctx, i, d - grads, lv_tensor_numel(x->grad));
    }
  }
}

bool lv_graph_defer_update(lv_graph *g, lv_op op, const lv_deferred_update *u) {
  if (g->n_updates == g->cap_updates) {
    int cap = g->cap_updates ? 2 * g->cap_updates : 16;
    lv_deferred_update *nu = realloc(g->updates, sizeof *nu * (size_t)cap);
    if (!nu) {
      lv_graph_failf(g, op, "out of memory recording %d deferred updates", cap);
      return false;
    }
    g->updates = nu;
    g->cap_updates = cap;
  }
  g->updates[g->n_updates++] = *u;
  /* Read after backward: its memory stays until the reset. */
  int b = buf_of(g, u->x);
  if (b) g->bufs[b - 1].refs++;
  return true;
}

lv_status lv_graph_apply_updates(lv_graph *g) {
  if (g->failed) return lv_status_wrap(lv_graph_status(g), "deferred updates");
  for (int i = 0; i < g->n_updates; i++) {
    const lv_deferred_update *u = &g->updates[i];
    LV_K(g->be, ema_update, lv_tensor_numel(u->x), u->decay, lv_f32(u->x), lv_f32(u->avg));
    if (u->lo != -INFINITY || u->hi != INFINITY)
      LV_K(g->be, clip_fwd, lv_tensor_numel(u->avg), lv_f32(u->avg), u->lo, u->hi, lv_f32(u->avg));
  }
  g->n_updates = 0;
  return lv_graph_status(g);
}

int lv_graph_num_updates(const lv_graph *g) { return g->n_updates; }
