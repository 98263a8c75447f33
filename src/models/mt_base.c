#include "models/mt_base.h"

#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "search/lm_fusion.h"
#include "search/seq_decode.h"

lv_params *lv_mt_beam_search_params(double length_normalization, double coverage_penalty) {
  lv_params *bs = lv_params_new_cls("BeamSearchHelper");
  lv_params_define_int(bs, "num_hyps_per_beam", 8, "Num of hyps to keep per beam during decoding.");
  lv_params_define_float(bs, "target_seq_length_ratio", 1.0, "Ratio of the average target sequence length over the "
                         "average source sequence length.");
  lv_params_define_float(bs, "length_normalization", length_normalization, "Beam search length normalization ratio.");
  lv_params_define_float(bs, "coverage_penalty", coverage_penalty, "Beam search coverage penalty.");
  lv_params_define_float(bs, "valid_eos_max_logit_delta", 5.0, "During beam search, allow </s> to terminate a hyp "
                         "only if its logit is no more than this value away from the logit of the best candidate.");
  lv_params_define_float(bs, "local_eos_threshold", -100.0, "During beam search, allow </s> to terminate a hyp if "
                         "the local score for </s> is greater than local_eos_threshold.");
  lv_params_define_float(bs, "beam_size", 3.0, "The maximum difference between best hyp and the worst in a beam. "
                         "This allows to prune our search when none of the active hyp is close enough to the "
                         "current best.");
  lv_params_define_bool(bs, "force_eos_in_last_step", false, "For all active hyps that are still on the beam after "
                        "target_seq_len steps, return partial hyps with EOS set as the last token.");
  lv_params_define_bool(bs, "force_eos_in_top_k", false, "Whether to always consider the eos token to be among the "
                        "top k tokens for every step.");
  lv_params_define_bool(bs, "ensure_full_beam", false, "If True, we will not terminate the search until both of "
                        "these conditions are satisfied: we have found at least num_hyps_per_beam terminated hyps "
                        "AND no active hyps have a score within beam_size of the best terminated hyp.");
  lv_params_define_bool(bs, "terminate_beams_independently", false, "Whether each beam in the same batch can "
                        "independently terminate.");
  return bs;
}

void lv_mt_define_decoder_params(lv_params *p, double length_normalization, double coverage_penalty) {
  lv_params_define_params(p, "label_smoothing", NULL, "Label smoothing class (UniformLabelSmoother).");
  lv_params_define_bool(p, "per_word_avg_loss", false,
                        "Compute loss averaged per word. If False loss is computed averaged per sequence.");
  lv_params_define_int(p, "target_seq_len", 300, "Target seq length.");
  lv_params_define_int(p, "target_sos_id", 1, "Id of the target sequence sos symbol.");
  lv_params_define_int(p, "target_eos_id", 2, "Id of the target sequence eos symbol.");
  lv_params_define_params(p, "beam_search", lv_mt_beam_search_params(length_normalization, coverage_penalty),
                          "BeamSearchHelper params.");
  lv_lm_fusion_define_params(p);
}

lv_status lv_mt_label_smoothing(const lv_params *dp, const char *task_cls, float *uncertainty) {
  *uncertainty = 0;
  const lv_params *ls = lv_params_sub(dp, "label_smoothing");
  if (!ls) return NULL;
  if (strcmp(lv_params_str(ls, "cls"), "UniformLabelSmoother"))
    return lv_status_make(LV_ERR_INVALID, "task.decoder.label_smoothing.cls: only UniformLabelSmoother is "
                          "supported, found %s", lv_params_str(ls, "cls"));
  if (lv_params_is_set(ls, "token_id_uncertainty_larger"))
    return lv_status_make(LV_ERR_INVALID, "task.decoder.label_smoothing.token_id_uncertainty_larger is not "
                          "supported by %s (leave it None)", task_cls);
  double u = lv_params_float(ls, "uncertainty");
  if (!(u >= 0 && u < 1))
    return lv_status_make(LV_ERR_INVALID, "task.decoder.label_smoothing.uncertainty must be in [0, 1), got %g", u);
  *uncertainty = (float)u;
  return NULL;
}

static lv_tensor *transpose2(lv_graph *g, lv_tensor *x) {
  static const int perm[2] = {1, 0};
  return x ? lv_op_transpose(g, x, perm) : NULL;
}

static bool graph_ok(lv_graph *g) {
  lv_status s = lv_graph_status(g);
  bool ok = s == NULL;
  lv_status_free(s);
  return ok;
}


bool lv_mt_softmax_metrics(lv_softmax_layer *sm, lv_graph *g, lv_tensor *x, lv_tensor *tgt_labels, lv_tensor *tgt_w,
                           float smoothing, bool per_word_avg_loss, bool is_eval, const char *who, lv_metrics *mt) {
  lv_tensor *labels = transpose2(g, tgt_labels), *weights = transpose2(g, tgt_w); /* [T, B] */
  lv_xent_output xo;
  if (!labels || !weights || !lv_softmax_layer_fprop_loss(sm, g, x, weights, labels, NULL, smoothing, &xo))
    return false;
  double total_weight = 0;
  if (lv_tensor_item(xo.total_weight, &total_weight)) {
    lv_graph_fail(g, "%s: cannot read the total target weight", who);
    return false;
  }
  int64_t batch = tgt_labels->shape.d[0];
  if (per_word_avg_loss) {
    lv_metrics_add(mt, "loss", xo.avg_xent, total_weight);
  } else {
    lv_tensor *per_seq_total = lv_op_reduce_sum(g, lv_op_mul(g, xo.per_example_xent, weights), LV_ALL_AXES, false);
    lv_metrics_add(mt, "loss", lv_op_scale(g, per_seq_total, 1.0f / (float)batch), (double)batch);
  }
  lv_metrics_add(mt, "log_pplx", xo.avg_xent, total_weight);
  if (is_eval) {
    double acc = 0, num = 0;
    lv_status s = lv_softmax_next_step_accuracy(&xo, labels, weights, &acc, &num);
    if (s) {
      lv_graph_fail(g, "%s", lv_status_msg(s));
      lv_status_free(s);
      return false;
    }
    lv_metrics_add_const(mt, "fraction_of_correct_next_step_preds", acc, num);
  }
  return graph_ok(g);
}

bool lv_mt_batch_get(lv_graph *g, lv_batch *b, const char *who, lv_mt_batch *out) {
  out->src_ids = lv_batch_get(b, "src.ids");
  out->src_paddings = lv_batch_get(b, "src.paddings");
  out->tgt_ids = lv_batch_get(b, "tgt.ids");
  out->tgt_paddings = lv_batch_get(b, "tgt.paddings");
  out->tgt_labels = lv_batch_get(b, "tgt.labels");
  out->tgt_weights = lv_batch_get(b, "tgt.weights");
  if (out->src_ids && out->src_paddings && out->tgt_ids && out->tgt_paddings && out->tgt_labels && out->tgt_weights)
    return true;
  lv_graph_fail(g, "%s needs batch keys src.ids, src.paddings, tgt.ids, tgt.paddings, tgt.labels, tgt.weights (an "
                   "NmtInput dataset)", who);
  return false;
}


lv_status lv_mt_decode_source(lv_graph *g, const lv_batch *b, const char *who, lv_tensor **ids, lv_tensor **paddings,
                              int64_t *atten_len, int32_t *atten_lens) {
  const lv_tensor *hi = lv_batch_get(b, "src.ids"), *hp = lv_batch_get(b, "src.paddings");
  if (!hi || !hp || hi->shape.rank != 2 || !lv_shape_eq(&hi->shape, &hp->shape) || hi->dtype != LV_I32 ||
      hp->dtype != LV_F32)
    return lv_status_make(LV_ERR_INVALID, "%s: the batch needs src.ids int32 and src.paddings float32 of one shape "
                          "[batch, time]", who);
  const int64_t B = hi->shape.d[0], S = hi->shape.d[1];
  *atten_len = S;
  for (int64_t r = 0; r < B; r++) atten_lens[r] = lv_seq_row_len(hp, r);
  *ids = lv_graph_from_host(g, hi);
  *paddings = lv_graph_from_host(g, hp);
  if (!*ids || !*paddings) {
    lv_status s = lv_graph_status(g);
    return s ? lv_status_wrap(s, "%s: the source batch", who)
             : lv_status_make(LV_ERR_INTERNAL, "%s: copying the source batch failed", who);
  }
  return NULL;
}

int64_t lv_mt_source_len(const lv_batch *b) {
  const lv_tensor *hi = lv_batch_get(b, "src.ids");
  return hi && hi->shape.rank == 2 ? hi->shape.d[1] : 0;
}
