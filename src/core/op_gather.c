/* Embedding lookup: rows of a [V, D] table; the gradient scatter-adds into the table,
 * touching only the rows of ids. A variable's gradient buffer already exists (zeroed by
 * its store before the step), so no dense [V, D] pass happens here; only a table with no
 * gradient buffer yet (an arena leaf) gets a fresh zeroed one. */
#include "core/graph_impl.h"
#include "core/ops.h"

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
  if (!lv_graph_inputs_ok(g, op, 2, ins)) return NULL;
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
  LV_K(k, gather_fwd, table->shape.d[0], table->shape.d[1], lv_f32(table), lv_tensor_numel(ids),
       lv_i32(ids), lv_f32(out), tag);
  if (!lv_graph_poll_errors(g)) return NULL;
  lv_node *nd = lv_graph_record(g, op, gather_bwd, out, 2, ins);
  if (nd) nd->be = k;
  return out;
}
