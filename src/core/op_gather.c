/* Embedding lookup: rows of a [V, D] table; the gradient scatter-adds into the table,
 * touching only the rows of ids (gather_cols: the same for columns of a [D, C] shard). A variable's gradient buffer already exists (zeroed by
 * its store before the step), so no dense [V, D] pass happens here; only a table with no
 * gradient buffer yet (an arena leaf) gets a fresh zeroed one. */
#include "core/graph_impl.h"
#include "core/ops.h"
#include "kernels/qweight.h"

static void gather_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *gt = lv_graph_grad_zeroed(g, nd->in[0]);
  if (!gt) return;
  lv_tensor *t = nd->in[0], *ids = nd->in[1];
  LV_K(nd->be, gather_bwd, t->shape.d[0], t->shape.d[1], lv_tensor_numel(ids), lv_i32(ids),
                    lv_f32(nd->out->grad), lv_f32(gt));
}

lv_tensor *lv_op_gather(lv_graph *g, lv_tensor *table, lv_tensor *ids) {
  const lv_op op = LV_OP_GATHER;
  lv_tensor *ins[2] = {table, ids};
  if (!lv_graph_inputs_ok_q(g, op, 2, ins, 0)) return NULL;
  char s1[128], s2[128];
  if (table->dtype != LV_F32 || table->shape.rank != 2 || ids->dtype != LV_I32 ||
      ids->shape.rank >= LV_MAX_RANK) {
    lv_graph_failf(g, op, "float32 table [V,D] and int32 ids required: table %s %s vs ids %s %s",
                   lv_dtype_names[table->dtype], LV_SHP(table, s1), lv_dtype_names[ids->dtype],
                   LV_SHP(ids, s2));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_shape os = ids->shape;
  os.d[os.rank++] = table->shape.d[1];
  lv_tensor *out = lv_graph_out(g, op, LV_F32, os);
  if (!out) return NULL;
  char detail[160];
  snprintf(detail, sizeof detail, "(table %s)", LV_SHP(table, s1));
  uint64_t tag = lv_graph_id_check(g, op, "id", detail);
  /* A float-less table quantized per row (kernels/qweight.h) on the host: its rows from
   * the twin, the same floats as from its dequantized table. */
  if (lv_tensor_floatless(table) && table->qw->axis == 0 && lv_device_is_host(k->device)) {
    lv_qtype_traits_of(table->qw->type)->gather(k->ctx, table->qw, lv_tensor_numel(ids), lv_i32(ids), lv_f32(out),
                                                tag);
    return lv_graph_poll_errors(g) ? out : NULL;
  }
  if (!lv_graph_floats(g, op, table)) return NULL;
  LV_K(k, gather_fwd, table->shape.d[0], table->shape.d[1], lv_f32(table), lv_tensor_numel(ids),
       lv_i32(ids), lv_f32(out), tag);
  if (!lv_graph_poll_errors(g)) return NULL;
  lv_node *nd = lv_graph_record(g, op, gather_bwd, out, 2, ins);
  if (nd) nd->be = k;
  return out;
}

bool lv_graph_gather_into(lv_graph *g, lv_tensor *dst, lv_tensor *table, lv_tensor *ids) {
  const lv_op op = LV_OP_GATHER;
  lv_tensor *ins[2] = {table, ids};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return false;
  char s1[128], s2[128], s3[128];
  if (!dst || dst->dtype != LV_F32 || table->dtype != LV_F32 || table->shape.rank != 2 || ids->dtype != LV_I32 ||
      lv_tensor_numel(ids) * table->shape.d[1] > lv_tensor_numel(dst)) {
    lv_graph_failf(g, op, "gather_into: float32 table [v, d], int32 ids and a float32 dst of at least numel(ids) * d "
                   "elements required, got table %s %s, ids %s %s, dst %s",
                   lv_dtype_names[table->dtype], LV_SHP(table, s1), lv_dtype_names[ids->dtype], LV_SHP(ids, s2),
                   dst ? LV_SHP(dst, s3) : "NULL");
    return false;
  }
  lv_tensor *all[3] = {table, ids, dst};
  const lv_backend *k = lv_graph_kernels(g, op, 3, all);
  if (!k) return false;
  char detail[160];
  snprintf(detail, sizeof detail, "(table %s)", LV_SHP(table, s1));
  uint64_t tag = lv_graph_id_check(g, op, "id", detail);
  LV_K(k, gather_fwd, table->shape.d[0], table->shape.d[1], lv_f32(table), lv_tensor_numel(ids), lv_i32(ids),
       lv_f32(dst), tag);
  return lv_graph_poll_errors(g);
}

static void gather_cols_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *gw = lv_graph_grad_zeroed(g, nd->in[0]);
  if (!gw) return;
  lv_tensor *w = nd->in[0], *ids = nd->in[1];
  LV_K(nd->be, gather_cols_bwd, w->shape.d[0], w->shape.d[1], lv_tensor_numel(ids), lv_i32(ids),
       nd->s.axis.start, lv_f32(nd->out->grad), lv_f32(gw));
}

lv_tensor *lv_op_gather_cols(lv_graph *g, lv_tensor *w, lv_tensor *ids, int64_t offset) {
  const lv_op op = LV_OP_GATHER_COLS;
  lv_tensor *ins[2] = {w, ids};
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
  char s1[128], s2[128];
  if (w->dtype != LV_F32 || w->shape.rank != 2 || ids->dtype != LV_I32 || ids->shape.rank != 1 || offset < 0) {
    lv_graph_failf(g, op, "float32 w [D,C], int32 ids [N] and an offset >= 0 required: w %s %s, ids %s %s, offset %lld",
                   lv_dtype_names[w->dtype], LV_SHP(w, s1), lv_dtype_names[ids->dtype], LV_SHP(ids, s2),
                   (long long)offset);
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, op, LV_F32, lv_shape2(ids->shape.d[0], w->shape.d[0]));
  if (!out) return NULL;
  LV_K(k, gather_cols_fwd, w->shape.d[0], w->shape.d[1], lv_f32(w), ids->shape.d[0], lv_i32(ids), offset,
       lv_f32(out));
  lv_node *nd = lv_graph_record(g, op, gather_cols_bwd, out, 2, ins);
  if (nd) {
    nd->be = k;
    nd->s.axis = (lv_saved_axis){0, offset};
  }
  return out;
}
