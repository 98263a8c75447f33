/* asr.model.AsrModel: see asr.h. Params follow Lingvo's AsrModel, AsrEncoder and
 * AsrDecoder with the keys lingvoc implements (frontend, contextualizer and scheduled
 * sampling are left out rather than ignored; fusion is lingvoc's shallow fusion,
 * search/lm_fusion.h, not Lingvo's NullFusion). */
#include "models/asr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "layers/asr_encoder.h"
#include "layers/atten_lstm_decoder.h"
#include "search/lm_fusion.h"
#include "models/mt_base.h"

typedef struct asr_model {
  lv_task base;
  lv_asr_encoder enc;
  lv_atten_lstm_decoder dec;
  float smoothing;
  bool per_token_avg_loss;
  uint64_t seed;
} asr_model;

/* ---- params -------------------------------------------------------------------------- */

static lv_params *decoder_params(void) {
  lv_params *p = lv_layer_base_params("AsrDecoder");
  LV_ASSERT(!lv_params_set_string(p, "name", "dec"));
  lv_atten_lstm_decoder_define_asr_params(p);
  lv_params_define_params(p, "label_smoothing", NULL, "Label smoothing class (UniformLabelSmoother).");
  lv_params_define_bool(p, "per_token_avg_loss", true, "Use per-token average loss when set to True (default); "
                        "when set to False use sequence average loss (sum losses for each sequence and average "
                        "across all sequences).");
  lv_params_define_int(p, "target_seq_len", 300, "Target seq length.");
  lv_params_define_int(p, "target_sos_id", 1, "Id of the start of sentence token.");
  lv_params_define_int(p, "target_eos_id", 2, "Id of the end of sentence token.");
  lv_params_define_params(p, "beam_search", lv_mt_beam_search_params(0.0, 0.0), "BeamSearchHelper params.");
  lv_lm_fusion_define_params(p);
  return p;
}

static lv_params *asr_model_params(void) {
  lv_params *p = lv_task_base_params("asr.model.AsrModel");
  lv_params_define_params(p, "encoder", lv_asr_encoder_params(), "Encoder Params.");
  lv_params_define_params(p, "decoder", decoder_params(), "Decoder Params.");
  /* AsrModel's training defaults (lingvo/tasks/asr/model.py). */
  LV_ASSERT(!lv_params_set_float(p, "train.learning_rate", 0.001));
  LV_ASSERT(!lv_params_set_float(p, "train.clip_gradient_norm_to_value", 1.0));
  LV_ASSERT(!lv_params_set_float(p, "train.grad_norm_to_clip_to_zero", 100.0));
  LV_ASSERT(!lv_params_set_float(p, "train.l2_regularizer_weight", 1e-6));
  LV_ASSERT(!lv_params_set_int(p, "train.tpu_steps_per_loop", 20));
  LV_ASSERT(!lv_params_set_int(p, "train.vn_start_step", 20000));
  LV_ASSERT(!lv_params_set_float(p, "train.vn_std", 0.075));
  lv_task_set_piecewise_lr_schedule(lv_params_sub(p, "train"));
  return p;
}

/* ---- create -------------------------------------------------------------------------- */

static void asr_destroy(lv_task *t) {
  asr_model *m = (asr_model *)t;
  lv_atten_lstm_decoder_free(&m->dec);
  lv_asr_encoder_free(&m->enc);
  lv_task_free_decode_state(t);
  free(m);
}

/* The decoder's dropout streams start after the encoder's (which has none). */
enum { STREAM_DEC = 0 };

static lv_status build(asr_model *m, const lv_params *p, lv_varstore *vs) {
  const char *name = lv_params_str(p, "name");
  if (!*name) return lv_status_make(LV_ERR_INVALID, "task.name must be set (e.g. \"librispeech\")");
  const lv_params *ep = lv_params_sub(p, "encoder"), *dp = lv_params_sub(p, "decoder");
  if (!ep || !dp) return lv_status_make(LV_ERR_INVALID, "task.encoder and task.decoder must be set");
  char scope[LV_VAR_NAME_MAX];
  snprintf(scope, sizeof scope, "%s/%s", name, lv_params_str(ep, "name"));
  LV_TRY(lv_layer_scope_vn(vs, scope, ep, "task.encoder"));
  LV_TRY(lv_asr_encoder_init(&m->enc, ep, "task.encoder", scope, vs));
  snprintf(scope, sizeof scope, "%s/%s", name, lv_params_str(dp, "name"));
  LV_TRY(lv_layer_scope_vn(vs, scope, dp, "task.decoder"));
  LV_TRY(lv_atten_lstm_decoder_init_asr(&m->dec, dp, "task.decoder", scope, lv_asr_encoder_out_dim(&m->enc), vs,
                                        m->base.cls->cls, m->seed, STREAM_DEC));
  LV_TRY(lv_mt_label_smoothing(dp, m->base.cls->cls, &m->smoothing));
  m->per_token_avg_loss = lv_params_bool(dp, "per_token_avg_loss");
  return NULL;
}

static lv_status asr_create(const lv_params *p, const lv_params *input_p, lv_varstore *vs, lv_task **out) {
  (void)input_p;
  asr_model *m = calloc(1, sizeof *m);
  LV_ASSERT(m);
  m->base.cls = &lv_asr_model;
  m->base.p = p;
  m->seed = lv_params_is_set(p, "random_seed") ? (uint64_t)lv_params_int(p, "random_seed") : 0x5a5e11c0ull;
  lv_status s = build(m, p, vs);
  if (s) {
    asr_destroy(&m->base);
    return s;
  }
  *out = &m->base;
  return NULL;
}

/* ---- forward ------------------------------------------------------------------------- */

static lv_tensor *transpose2(lv_graph *g, lv_tensor *x) {
  static const int perm[2] = {1, 0};
  return x ? lv_op_transpose(g, x, perm) : NULL;
}

/* The batch's src.src_inputs [B, T, F, 1] and src.paddings [B, T] encoded. */
static bool encode(asr_model *m, lv_graph *g, lv_tensor *frames, lv_tensor *pads, lv_tensor **enc, lv_tensor **epads) {
  if (!frames || !pads) {
    lv_graph_fail(g, "asr.model.AsrModel needs batch keys src.src_inputs [batch, time, bins, 1] and src.paddings "
                     "[batch, time] (an AsrInput dataset)");
    return false;
  }
  return lv_asr_encoder_fprop(&m->enc, g, frames, pads, enc, epads);
}


static bool asr_fprop(lv_task *t, lv_graph *g, lv_batch *b, bool is_eval, int64_t step, lv_metrics *mt) {
  (void)step; /* the graph's step picks the dropout masks */
  (void)is_eval;
  asr_model *m = (asr_model *)t;
  lv_tensor *tgt_ids = lv_batch_get(b, "tgt.ids"), *tgt_pads = lv_batch_get(b, "tgt.paddings");
  lv_tensor *tgt_labels = lv_batch_get(b, "tgt.labels"), *tgt_w = lv_batch_get(b, "tgt.weights");
  if (!tgt_ids || !tgt_pads || !tgt_labels || !tgt_w) {
    lv_graph_fail(g, "asr.model.AsrModel needs batch keys tgt.ids, tgt.labels, tgt.paddings and tgt.weights "
                     "[batch, length] (an AsrInput dataset)");
    return false;
  }
  lv_tensor *enc, *epads;
  if (!encode(m, g, lv_batch_get(b, "src.src_inputs"), lv_batch_get(b, "src.paddings"), &enc, &epads)) return false;
  lv_tensor *x = lv_atten_lstm_decoder_fprop(&m->dec, g, enc, epads, tgt_ids, tgt_pads, NULL);
  lv_tensor *labels = transpose2(g, tgt_labels), *weights = transpose2(g, tgt_w); /* [L, B] */
  lv_xent_output xo;
  if (!x || !labels || !weights ||
      !lv_softmax_layer_fprop_loss(m->dec.softmax, g, x, weights, labels, NULL, m->smoothing, &xo))
    return false;
  double total_weight = 0;
  if (lv_tensor_item(xo.total_weight, &total_weight)) {
    lv_graph_fail(g, "asr.model.AsrModel: cannot read the total target weight");
    return false;
  }
  /* Lingvo: per_token_avg = sum(per_sequence_loss) / (sum(weights) + 1e-6). */
  lv_tensor *avg = lv_op_scale(g, xo.total_xent, (float)(1.0 / (total_weight + 1e-6)));
  int64_t batch = tgt_labels->shape.d[0];
  if (m->per_token_avg_loss) lv_metrics_add(mt, "loss", avg, total_weight);
  else lv_metrics_add(mt, "loss", lv_op_scale(g, xo.total_xent, 1.0f / (float)batch), (double)batch);
  lv_metrics_add(mt, "log_pplx", avg, total_weight);
  double lp = 0;
  if (!avg || lv_tensor_item(avg, &lp)) {
    lv_graph_fail(g, "asr.model.AsrModel: cannot read the loss");
    return false;
  }
  lv_metrics_add_const(mt, "token_normed_prob", exp(-lp), total_weight);
  double acc = 0, num = 0;
  lv_status s = lv_softmax_next_step_accuracy(&xo, labels, weights, &acc, &num);
  if (s) {
    lv_graph_fail(g, "%s", lv_status_msg(s));
    lv_status_free(s);
    return false;
  }
  lv_metrics_add_const(mt, "fraction_of_correct_next_step_preds", acc, num);
  return lv_graph_status(g) == NULL;
}

/* ---- incremental decoding ------------------------------------------------------------ */

static lv_status asr_decode_begin(lv_task *t, lv_graph *g, const lv_batch *b, int64_t *atten_len,
                                  int32_t *atten_lens, void **state) {
  asr_model *m = (asr_model *)t;
  *state = NULL;
  const lv_tensor *hf = lv_batch_get(b, "src.src_inputs"), *hp = lv_batch_get(b, "src.paddings");
  if (!hf || !hp || hp->dtype != LV_F32 || hp->shape.rank != 2)
    return lv_status_make(LV_ERR_INVALID, "%s decoder: the batch needs src.src_inputs [batch, time, bins, 1] and "
                          "src.paddings float32 [batch, time] (an AsrInput dataset)", t->cls->cls);
  lv_tensor *frames = lv_graph_from_host(g, hf), *pads = lv_graph_from_host(g, hp), *enc = NULL, *epads = NULL;
  if (!frames || !pads || !encode(m, g, frames, pads, &enc, &epads)) {
    lv_status s = lv_graph_status(g);
    return s ? lv_status_wrap(s, "%s decoder encoding the source", t->cls->cls)
             : lv_status_make(LV_ERR_INTERNAL, "%s decoder: encoding the source failed", t->cls->cls);
  }
  /* The encoder's frames and how many are real per utterance. */
  const int64_t S = enc->shape.d[0], B = enc->shape.d[1];
  float *p = malloc(sizeof(float) * (size_t)(S * B));
  LV_ASSERT(p);
  lv_status s = lv_tensor_to_host(epads, p);
  for (int64_t i = 0; !s && i < B; i++) {
    int32_t n = 0;
    for (int64_t j = 0; j < S; j++) n += p[j * B + i] < 0.5f;
    atten_lens[i] = n;
  }
  free(p);
  LV_TRY(s);
  *atten_len = S;
  return lv_atten_lstm_decoder_begin(&m->dec, g, enc, epads, state);
}

static int64_t asr_vocab_size(const lv_task *t) { return ((const asr_model *)t)->dec.softmax->num_classes; }

/* Encoder frames of host batch b: the conv strides applied to T + pad_steps. */
static int64_t asr_row_bytes(const lv_task *t, const lv_batch *b, int64_t target_seq_len) {
  (void)target_seq_len;
  const asr_model *m = (const asr_model *)t;
  const lv_tensor *f = lv_batch_get(b, "src.src_inputs");
  const int64_t frames = f && f->shape.rank >= 2 ? f->shape.d[1] : 0;
  int64_t s = frames + m->enc.pad_steps;
  for (int i = 0; i < m->enc.cnn_layers; i++) s = (s + m->enc.conv[i]->stride[0] - 1) / m->enc.conv[i]->stride[0];
  /* A search encodes its examples first: the encoder's activations count with the
   * decoder's, shared by the example's num_hyps_per_beam hyps. */
  const lv_params *bs = lv_params_sub(t->p, "decoder.beam_search");
  const int64_t H = bs && lv_params_has(bs, "num_hyps_per_beam") ? lv_params_int(bs, "num_hyps_per_beam") : 1;
  return lv_asr_encoder_row_bytes(&m->enc, frames) / (H > 1 ? H : 1) + lv_atten_lstm_decoder_row_bytes(&m->dec, s);
}

const lv_seq_decode_ops lv_asr_decode_ops = {
    .vocab_size = asr_vocab_size,
    .atten_probs = true,
    .row_bytes = asr_row_bytes,
    .begin = asr_decode_begin,
    .step = lv_atten_lstm_decoder_step,
    .end = lv_atten_lstm_decoder_end,
};

const lv_task_class lv_asr_model = {
    .cls = "asr.model.AsrModel",
    .params = asr_model_params,
    .create = asr_create,
    .fprop = asr_fprop,
    .destroy = asr_destroy,
    .decoder_setup = lv_asr_decoder_setup,
    .create_decoder_metrics = lv_asr_create_decoder_metrics,
    .decode = lv_asr_decode,
    .post_process_decode_out = lv_asr_post_process_decode_out,
    .decoder_report = lv_asr_decoder_report,
    .line_describe = lv_asr_line_describe,
    .lines_to_batch = lv_asr_lines_to_batch,
    .line_batch_limit = lv_asr_line_batch_limit,
    .decode_out_nbest = lv_asr_decode_out_nbest,
    .item_seconds = lv_asr_item_seconds,
    .samples_to_batch = lv_asr_samples_to_batch,
    .seq_decode = &lv_asr_decode_ops,
};
