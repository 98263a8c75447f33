/* Label-smoothed cross-entropies (Lingvo's UniformLabelSmoother targets, per-row
 * weights): smoothed_xent on explicit logits, and projected_smoothed_xent, which forms
 * the logits x.w + b chunk by chunk over the classes and never keeps all of them. */
#include "core/graph_impl.h"
#include "core/ops.h"

/* The logits' first gradient is made in place of the softmax (each element read, then
 * written: the same values), which is then no longer kept beside it. */
static void smoothed_xent_bwd(lv_graph *g, lv_node *nd) {
  const lv_saved_xent *sv = &nd->s.xent;
  bool acc = false;
  lv_tensor *gx = lv_graph_grad_from_scratch(g, nd->in[0], sv->probs_buf);
  if (!gx) gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  LV_K(nd->be, smoothed_xent_bwd, sv->rows, sv->c, sv->probs, lv_i32(nd->in[1]),
       sv->has_weights ? lv_f32(nd->in[2]) : NULL, sv->smoothing, lv_f32(nd->out->grad), lv_f32(gx), acc);
}

/* ids (and weights) shaped like the rows; smoothing in [0, 1]. */
static bool check_targets(lv_graph *g, lv_op op, const char *what, const lv_tensor *ref, const lv_shape *rows,
                          lv_tensor *ids, lv_tensor *weights, float smoothing) {
  char s1[128], s2[128], s3[128];
  if (ids->dtype != LV_I32 || !lv_shape_eq(&ids->shape, rows)) {
    lv_graph_failf(g, op, "int32 ids %s required for %s %s, got %s %s", lv_shape_str(rows, s3, sizeof s3), what,
                   LV_SHP(ref, s1), lv_dtype_names[ids->dtype], LV_SHP(ids, s2));
    return false;
  }
  if (weights && (weights->dtype != LV_F32 || !lv_shape_eq(&weights->shape, rows))) {
    lv_graph_failf(g, op, "float32 weights %s required for %s %s, got %s %s", lv_shape_str(rows, s3, sizeof s3),
                   what, LV_SHP(ref, s1), lv_dtype_names[weights->dtype], LV_SHP(weights, s2));
    return false;
  }
  if (!(smoothing >= 0.0f && smoothing <= 1.0f)) {
    lv_graph_failf(g, op, "label smoothing must be in [0, 1], got %g", smoothing);
    return false;
  }
  return true;
}

lv_tensor *lv_op_smoothed_xent(lv_graph *g, lv_tensor *logits, lv_tensor *ids, lv_tensor *weights,
                               float smoothing) {
  const lv_op op = LV_OP_SMOOTHED_XENT;
  lv_tensor *ins[3] = {logits, ids, weights};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
  char s1[128];
  if (logits->dtype != LV_F32 || logits->shape.rank < 1) {
    lv_graph_failf(g, op, "float32 logits of rank >= 1 required, got %s %s", lv_dtype_names[logits->dtype],
                   LV_SHP(logits, s1));
    return NULL;
  }
  lv_shape os = logits->shape;
  os.rank--;
  if (!check_targets(g, op, "logits", logits, &os, ids, weights, smoothing)) return NULL;
  int n = weights ? 3 : 2;
  const lv_backend *k = lv_graph_kernels(g, op, n, ins);
  if (!k) return NULL;
  int64_t c = logits->shape.d[logits->shape.rank - 1], rows = lv_shape_numel(&os);
  lv_tensor *out = lv_graph_out(g, op, LV_F32, os);
  int probs_buf;
  float *probs = lv_graph_scratch_buf(g, op, sizeof(float) * (size_t)(rows * c), &probs_buf);
  if (!out || !probs) return NULL;
  char detail[160];
  snprintf(detail, sizeof detail, "(logits %s)", LV_SHP(logits, s1));
  uint64_t tag = lv_graph_id_check(g, op, "class id", detail);
  LV_K(k, smoothed_xent_fwd, rows, c, lv_f32(logits), lv_i32(ids), weights ? lv_f32(weights) : NULL, smoothing,
       lv_f32(out), probs, tag);
  if (!lv_graph_poll_errors(g)) return NULL;
  /* Gradient to the logits only. */
  lv_node *nd = logits->requires_grad ? lv_graph_record(g, op, smoothed_xent_bwd, out, n, ins) : NULL;
  if (nd) {
    nd->be = k;
    nd->s.xent = (lv_saved_xent){rows, c, probs, probs_buf, smoothing, weights != NULL};
  }
  return out;
}

/* Per chunk: z = x . w[:, chunk] again, turned into d(loss)/d(logits) in place, then
 * gx += z . w[:, chunk]^T, gw[:, chunk] = x^T . z, gb[chunk] = column sums of z. */
static void pxent_bwd(lv_graph *g, lv_node *nd) {
  const lv_saved_pxent *sv = &nd->s.pxent;
  int i = 0;
  lv_tensor *x = nd->in[i++], *w = nd->in[i++];
  lv_tensor *b = sv->has_bias ? nd->in[i++] : NULL;
  lv_tensor *ids = nd->in[i++];
  lv_tensor *wt = sv->has_weights ? nd->in[i++] : NULL;
  bool xa = false, wa = false, ba = false;
  lv_tensor *gx = lv_graph_grad(g, x, &xa);
  lv_tensor *gw = lv_graph_grad(g, w, &wa);
  lv_tensor *gb = b ? lv_graph_grad(g, b, &ba) : NULL;
  if (lv_graph_failed(g) || (!gx && !gw && !gb)) return;
  const lv_backend *k = nd->be;
  const int64_t n = sv->n, d = sv->d, c = sv->c;
  for (int64_t c0 = 0; c0 < c; c0 += sv->chunk) {
    int64_t cs = c - c0 < sv->chunk ? c - c0 : sv->chunk;
    LV_K(k, gemm, false, false, n, cs, d, 1.0f, lv_f32(x), d, lv_f32(w) + c0, c, 0.0f, sv->z, cs);
    LV_K(k, xent_chunk_grad, n, cs, c0, c, sv->z, b ? lv_f32(b) + c0 : NULL, lv_i32(ids), wt ? lv_f32(wt) : NULL,
         sv->smoothing, sv->max, sv->ls, lv_f32(nd->out->grad));
    if (gx)
      LV_K(k, gemm, false, true, n, d, cs, 1.0f, sv->z, cs, lv_f32(w) + c0, c, (xa || c0 > 0) ? 1.0f : 0.0f,
           lv_f32(gx), d);
    if (gw) LV_K(k, gemm, true, false, d, cs, n, 1.0f, lv_f32(x), d, sv->z, cs, wa ? 1.0f : 0.0f, lv_f32(gw) + c0, c);
    if (gb) {
      lv_bcast bc = {.rank = 2, .shape = {n, cs}, .sa = {0, 1}};
      LV_K(k, reduce_to, &bc, sv->z, 1.0f, lv_f32(gb) + c0, ba);
    }
  }
}

lv_tensor *lv_op_projected_smoothed_xent(lv_graph *g, lv_tensor *x, lv_tensor *w, lv_tensor *b,
                                         lv_tensor *ids, lv_tensor *weights, float smoothing,
                                         int64_t chunk, lv_tensor **argmax) {
  const lv_op op = LV_OP_PROJECTED_SMOOTHED_XENT;
  if (argmax) *argmax = NULL;
  lv_tensor *req[3] = {x, w, ids};
  if (!lv_graph_inputs_ok(g, op, 3, req)) return NULL;
  char s1[128], s2[128], s3[128];
  bool ok = x->dtype == LV_F32 && w->dtype == LV_F32 && x->shape.rank == 2 && w->shape.rank == 2 &&
            x->shape.d[1] == w->shape.d[0] && w->shape.d[1] >= 1;
  if (!ok) {
    lv_graph_failf(g, op, "float32 x [N,D] and w [D,C] with C >= 1 required: x %s %s vs w %s %s",
                   lv_dtype_names[x->dtype], LV_SHP(x, s1), lv_dtype_names[w->dtype], LV_SHP(w, s2));
    return NULL;
  }
  const int64_t n = x->shape.d[0], d = x->shape.d[1], c = w->shape.d[1];
  lv_shape cs1 = lv_shape1(c);
  if (b && (b->dtype != LV_F32 || !lv_shape_eq(&b->shape, &cs1))) {
    lv_graph_failf(g, op, "float32 b [%lld] required for w %s, got %s %s", (long long)c, LV_SHP(w, s1),
                   lv_dtype_names[b->dtype], LV_SHP(b, s3));
    return NULL;
  }
  lv_shape rows = lv_shape1(n);
  if (!check_targets(g, op, "x", x, &rows, ids, weights, smoothing)) return NULL;
  if (chunk <= 0 || chunk > c) chunk = c;
  lv_tensor *ins[5];
  int ni = 0;
  ins[ni++] = x;
  ins[ni++] = w;
  if (b) ins[ni++] = b;
  ins[ni++] = ids;
  if (weights) ins[ni++] = weights;
  const lv_backend *k = lv_graph_kernels(g, op, ni, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, rows);
  lv_tensor *am = argmax ? lv_graph_out(g, op, LV_I32, rows) : NULL;
  size_t nn = (size_t)(n ? n : 1);
  float *z = lv_graph_scratch(g, op, sizeof(float) * nn * (size_t)chunk);
  float *stats = lv_graph_scratch(g, op, sizeof(float) * 3 * nn); /* max, zid, ls */
  double *sums = lv_graph_scratch(g, op, sizeof(double) * 2 * nn); /* sumexp, sumz */
  if (!out || (argmax && !am) || !z || !stats || !sums) return NULL;
  float *max = stats, *zid = stats + nn, *ls = stats + 2 * nn;
  char detail[160];
  snprintf(detail, sizeof detail, "(w %s)", LV_SHP(w, s1));
  uint64_t tag = lv_graph_id_check(g, op, "class id", detail);
  LV_K(k, check_ids, n, lv_i32(ids), c, tag);
  if (!lv_graph_poll_errors(g)) return NULL;
  for (int64_t c0 = 0; c0 < c; c0 += chunk) {
    int64_t cs = c - c0 < chunk ? c - c0 : chunk;
    LV_K(k, gemm, false, false, n, cs, d, 1.0f, lv_f32(x), d, lv_f32(w) + c0, c, 0.0f, z, cs);
    LV_K(k, xent_chunk_stats, n, cs, c0, z, b ? lv_f32(b) + c0 : NULL, lv_i32(ids), c0 == 0, max, sums, sums + nn,
         zid, am ? lv_i32(am) : NULL);
  }
  LV_K(k, xent_chunk_loss, n, c, weights ? lv_f32(weights) : NULL, smoothing, max, sums, sums + nn, zid,
       lv_f32(out), ls);
  /* Gradients to x, w and b; none to ids or weights. */
  bool need = x->requires_grad || w->requires_grad || (b && b->requires_grad);
  lv_node *nd = need ? lv_graph_record(g, op, pxent_bwd, out, ni, ins) : NULL;
  if (nd) {
    nd->be = k;
    nd->s.pxent = (lv_saved_pxent){n, d, c, chunk, smoothing, z, max, ls, b != NULL, weights != NULL};
  }
  if (argmax) *argmax = am;
  return out;
}
