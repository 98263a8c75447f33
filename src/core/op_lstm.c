/* lstm_step: LSTMCellSimple's fused gate step (ops.h). Two outputs, c and m: c_out is the
 * node that runs the backward kernel; m_out has a node of its own whose backward only
 * makes sure c_out's node runs (by giving c_out a zero gradient when nothing else did),
 * so a loss that reads only m, only c, or both reaches the gates. */
#include "core/graph_impl.h"
#include "core/ops.h"

static void lstm_bwd(lv_graph *g, lv_node *nd) {
  const lv_saved_lstm *sv = &nd->s.lstm;
  lv_tensor *gates = nd->in[0], *c_prev = nd->in[1], *m_prev = nd->in[2];
  lv_tensor *pad = sv->has_pad ? nd->in[3] : NULL;
  bool ga = false, ca = false, ma = false;
  lv_tensor *gg = lv_graph_grad(g, gates, &ga);
  lv_tensor *gc = lv_graph_grad(g, c_prev, &ca);
  lv_tensor *gm = lv_graph_grad(g, m_prev, &ma);
  if (lv_graph_failed(g) || (!gg && !gc && !gm)) return;
  lv_tensor *gm_out = sv->m_out->grad;
  LV_K(nd->be, lstm_step_bwd, sv->b, sv->h, lv_f32(gates), lv_f32(c_prev), pad ? lv_f32(pad) : NULL,
       sv->forget_gate_bias, sv->cell_value_cap, sv->output_nonlinearity, lv_f32(nd->out->grad),
       gm_out ? lv_f32(gm_out) : NULL, gg ? lv_f32(gg) : NULL, ga, gc ? lv_f32(gc) : NULL, ca,
       gm ? lv_f32(gm) : NULL, ma);
}

/* m_out's node: its gradient is read by c_out's node; only make sure that one runs. */
static void lstm_m_bwd(lv_graph *g, lv_node *nd) {
  lv_tensor *c_out = nd->in[0];
  if (!c_out->grad) lv_graph_grad_zeroed(g, c_out);
}

bool lv_op_lstm_step(lv_graph *g, lv_tensor *gates, lv_tensor *c_prev, lv_tensor *m_prev,
                     lv_tensor *paddings, float forget_gate_bias, float cell_value_cap,
                     bool output_nonlinearity, lv_tensor **c_out, lv_tensor **m_out) {
  const lv_op op = LV_OP_LSTM_STEP;
  if (c_out) *c_out = NULL;
  if (m_out) *m_out = NULL;
  lv_tensor *ins[4] = {gates, c_prev, m_prev, paddings};
  if (!lv_graph_inputs_ok(g, op, 3, ins)) return false;
  if (!c_out || !m_out) {
    lv_graph_failf(g, op, "c_out and m_out must not be NULL");
    return false;
  }
  char s1[128], s2[128], s3[128], s4[128];
  bool ok = gates->dtype == LV_F32 && c_prev->dtype == LV_F32 && m_prev->dtype == LV_F32 &&
            gates->shape.rank == 2 && gates->shape.d[1] % 4 == 0;
  int64_t b = ok ? gates->shape.d[0] : 0, h = ok ? gates->shape.d[1] / 4 : 0;
  lv_shape bh = lv_shape2(b, h);
  ok = ok && lv_shape_eq(&c_prev->shape, &bh) && lv_shape_eq(&m_prev->shape, &bh);
  if (!ok) {
    lv_graph_failf(g, op, "float32 gates [B,4H], c_prev and m_prev [B,H] required: gates %s %s, c_prev %s %s, m_prev %s %s",
                   lv_dtype_names[gates->dtype], LV_SHP(gates, s1), lv_dtype_names[c_prev->dtype],
                   LV_SHP(c_prev, s2), lv_dtype_names[m_prev->dtype], LV_SHP(m_prev, s3));
    return false;
  }
  if (paddings) {
    bool pok = paddings->dtype == LV_F32 && lv_tensor_numel(paddings) == b &&
               ((paddings->shape.rank == 1) || (paddings->shape.rank == 2 && paddings->shape.d[1] == 1));
    if (!pok) {
      lv_graph_failf(g, op, "paddings must be float32 [B,1] or [B] for gates %s, got %s %s", LV_SHP(gates, s1),
                     lv_dtype_names[paddings->dtype], LV_SHP(paddings, s4));
      return false;
    }
  }
  int n = paddings ? 4 : 3;
  const lv_backend *k = lv_graph_kernels(g, op, n, ins);
  if (!k) return false;
  lv_tensor *c = lv_graph_out(g, op, LV_F32, bh);
  lv_tensor *m = lv_graph_out(g, op, LV_F32, bh);
  if (!c || !m) return false;
  LV_K(k, lstm_step_fwd, b, h, lv_f32(gates), lv_f32(c_prev), lv_f32(m_prev),
       paddings ? lv_f32(paddings) : NULL, forget_gate_bias, cell_value_cap, output_nonlinearity, lv_f32(c),
       lv_f32(m));
  lv_node *nd = lv_graph_record(g, op, lstm_bwd, c, n, ins);
  if (nd) {
    nd->be = k;
    nd->s.lstm = (lv_saved_lstm){b, h, forget_gate_bias, cell_value_cap, output_nonlinearity,
                                 paddings != NULL, m};
    lv_node *nm = lv_graph_record(g, LV_OP_LSTM_STEP_M, lstm_m_bwd, m, 1, &c);
    if (nm) nm->be = k;
  }
  if (lv_graph_failed(g)) return false;
  *c_out = c;
  *m_out = m;
  return true;
}

/* ---- rnn_seq_anchor ---- */

static void rnn_seq_bwd(lv_graph *g, lv_node *nd) {
  const lv_saved_rnn_seq *sv = &nd->s.rnn;
  lv_tensor *xw = nd->in[0], *w = nd->in[1], *gy = nd->out->grad;
  const int64_t t = xw->shape.d[0], b = xw->shape.d[1], gd = xw->shape.d[2], k = w->shape.d[0];
  if (!sv->finished) {
    lv_graph_failf(g, LV_OP_RNN_SEQ_ANCHOR, "internal: the sequence's steps were not named "
                   "(lv_op_rnn_seq_finish), so the recurrent weight's gradient is unknown");
    return;
  }
  lv_graph_grad_pass(g, nd->be, xw, gy);
  bool acc = false;
  lv_tensor *gw = lv_graph_grad(g, w, &acc);
  if (lv_graph_failed(g) || !gw) return;
  /* The first step reads m0 (its gates are row block 0, or T-1 reversed); the others
   * read the act of the step before: one GEMM over (T-1) B rows. */
  const int64_t first = sv->reverse ? t - 1 : 0;
  if (sv->m0) {
    LV_K(nd->be, gemm, true, false, k, gd, b, 1.0f, lv_f32(sv->m0), k, lv_f32(gy) + first * b * gd, gd,
         acc ? 1.0f : 0.0f, lv_f32(gw), gd);
    acc = true;
  }
  if (t > 1) {
    const float *rec = lv_f32(sv->act) + (sv->reverse ? b * k : 0);
    const float *dg = lv_f32(gy) + (sv->reverse ? 0 : b * gd);
    LV_K(nd->be, gemm, true, false, k, gd, (t - 1) * b, 1.0f, rec, k, dg, gd, acc ? 1.0f : 0.0f, lv_f32(gw), gd);
  } else if (!acc) {
    LV_K(nd->be, zero, lv_tensor_nbytes(gw), gw->data);
  }
}

lv_tensor *lv_op_rnn_seq_anchor(lv_graph *g, lv_tensor *xw, lv_tensor *w, lv_tensor **w_nograd) {
  const lv_op op = LV_OP_RNN_SEQ_ANCHOR;
  *w_nograd = NULL;
  lv_tensor *ins[2] = {xw, w};
  /* w (a float-less quantized weight's rows at inference) passes through untouched. */
  if (!lv_graph_inputs_ok_q(g, op, 2, ins, 1)) return NULL;
  char s1[128], s2[128];
  if (xw->dtype != LV_F32 || w->dtype != LV_F32 || xw->shape.rank != 3 || w->shape.rank != 2 ||
      xw->shape.d[2] != w->shape.d[1]) {
    lv_graph_failf(g, op, "float32 xw [T, B, G] and w [K, G] required, got %s and %s", LV_SHP(xw, s1), LV_SHP(w, s2));
    return NULL;
  }
  const lv_backend *k = lv_graph_kernels(g, op, 2, ins);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_view_of(g, op, xw, xw->shape);
  if (!out) return NULL;
  lv_node *nd = lv_graph_record(g, op, rnn_seq_bwd, out, 2, ins);
  /* Without a node (inference, or nothing needs a gradient) the steps may use w itself. */
  if (!nd) {
    *w_nograd = w;
    return out;
  }
  nd->be = k;
  if (!lv_graph_floats(g, op, w)) return NULL;
  *w_nograd = lv_graph_view_of(g, op, w, w->shape); /* a new header: requires no gradient */
  return *w_nograd ? out : NULL;
}

void lv_op_rnn_seq_finish(lv_graph *g, lv_tensor *anchor, lv_tensor *act, lv_tensor *m0, bool reverse) {
  if (!anchor || anchor->node < 0 || lv_graph_failed(g)) return;
  lv_node *nd = lv_graph_node(g, anchor->node);
  if (nd->op != LV_OP_RNN_SEQ_ANCHOR) return; /* the cell did not anchor this sequence */
  char s1[128], s2[128], s3[128], s4[128];
  const int64_t t = anchor->shape.d[0], b = anchor->shape.d[1];
  const int64_t k = nd->in[1]->shape.d[0];
  lv_shape tbk = lv_shape3(t, b, k), bk = lv_shape2(b, k);
  if ((t > 1 && (!act || lv_tensor_numel(act) != t * b * k)) || (m0 && !lv_shape_eq(&m0->shape, &bk))) {
    lv_graph_failf(g, LV_OP_RNN_SEQ_ANCHOR, "act must be %s and m0 %s, got %s and %s",
                   lv_shape_str(&tbk, s1, sizeof s1), lv_shape_str(&bk, s2, sizeof s2),
                   act ? LV_SHP(act, s3) : "none", m0 ? LV_SHP(m0, s4) : "none");
    return;
  }
  nd->s.rnn = (lv_saved_rnn_seq){.act = t > 1 ? act : NULL, .m0 = m0, .reverse = reverse, .finished = true};
}
