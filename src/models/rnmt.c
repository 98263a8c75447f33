/* mt.model.RNMTModel: see rnmt.h. Params follow Lingvo's MTEncoderBiRNN.Params() and
 * MTDecoderV1.Params() with the keys lingvoc implements; unsupported Lingvo options
 * (shared_emb, cc_schedule, is_transparent, packed_input, emb_projection_tpl,
 * init_step_ids, force_alignment, ...) are left out rather than ignored. */
#include "models/rnmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "layers/atten_lstm_decoder.h"
#include "layers/projection.h"
#include "search/seq_decode.h"

#define RNMT_MAX_LAYERS 32

typedef struct rnmt_model {
  lv_task base;
  lv_layer_owner own; /* the encoder's params and layers */
  /* encoder */
  lv_embedding_layer *enc_emb;
  int enc_layers;
  lv_frnn_layer enc_rnn[RNMT_MAX_LAYERS][2]; /* views over L<i>_rnn_fwd / L<i>_rnn_bak */
  lv_projection_layer *enc_proj;             /* NULL when 2 * lstm_cell_size == encoder_out_dim */
  int64_t enc_residual_start;
  float enc_dropout;
  lv_atten_lstm_decoder dec;
  float smoothing;
  bool per_word_avg_loss;
  uint64_t seed;
} rnmt_model;

/* ---- params -------------------------------------------------------------------------- */

static lv_params *encoder_params(void) {
  lv_params *p = lv_layer_base_params("MTEncoderBiRNN");
  LV_ASSERT(!lv_params_set_string(p, "name", "enc"));
  lv_params_define_params(p, "emb", lv_mt_default_embedding_params(), "Embedding layer params.");
  lv_params_define_params(p, "lstm_tpl", lv_mt_default_cell_params(), "Configs template for the RNN layer.");
  lv_params_define_params(p, "proj_tpl", lv_params_instantiate("ProjectionLayer"),
                          "Configs template for the projection layer.");
  lv_params_define_int(p, "lstm_cell_size", 512, "LSTM cell size for the RNN layer.");
  lv_params_define_int(p, "num_lstm_layers", 8, "Number of rnn layers to create");
  lv_params_define_float(p, "dropout_prob", 0.0, "Prob at which we do dropout.");
  lv_params_define_int(p, "residual_start", 2, "Layer at which we start residual connections.");
  lv_params_define_int(p, "encoder_out_dim", 1024, "Depth of the encoder output.");
  return p;
}

static lv_params *decoder_params(void) {
  lv_params *p = lv_layer_base_params("MTDecoderV1");
  LV_ASSERT(!lv_params_set_string(p, "name", "dec"));
  lv_atten_lstm_decoder_define_params(p);
  /* MTDecoderV1's length_normalization 0.2 and coverage_penalty 0.2. */
  lv_mt_define_decoder_params(p, 0.2, 0.2);
  return p;
}

static lv_params *rnmt_params_cls(const char *cls) {
  lv_params *p = lv_task_base_params(cls);
  lv_params_define_params(p, "encoder", encoder_params(), "Encoder params.");
  lv_params_define_params(p, "decoder", decoder_params(), "Decoder params.");
  return p;
}

static lv_params *rnmt_model_params(void) { return rnmt_params_cls("mt.model.RNMTModel"); }
static lv_params *punctuator_model_params(void) { return rnmt_params_cls("punctuator.model.RNMTModel"); }

/* ---- create -------------------------------------------------------------------------- */

static void rnmt_destroy(lv_task *t) {
  rnmt_model *m = (rnmt_model *)t;
  lv_atten_lstm_decoder_free(&m->dec);
  lv_layer_owner_free(&m->own);
  lv_task_free_decode_state(t);
  free(m);
}

static lv_status build_encoder(rnmt_model *m, const lv_params *ep, const char *task_name, lv_varstore *vs) {
  char scope[LV_VAR_NAME_MAX];
  snprintf(scope, sizeof scope, "%s/%s", task_name, lv_params_str(ep, "name"));
  LV_TRY(lv_layer_scope_vn(vs, scope, ep, "task.encoder"));
  lv_layer_owner *o = &m->own;
  LV_TRY(lv_owner_embedding(o, ep, "task.encoder", scope, vs, &m->enc_emb));
  int64_t n = lv_params_int(ep, "num_lstm_layers"), cell = lv_params_int(ep, "lstm_cell_size");
  int64_t out_dim = lv_params_int(ep, "encoder_out_dim");
  LV_TRY(lv_check_int_range("task.encoder.num_lstm_layers", n, 1, RNMT_MAX_LAYERS));
  LV_TRY(lv_check_int_range("task.encoder.lstm_cell_size", cell, 1, 1 << 20));
  LV_TRY(lv_check_int_range("task.encoder.encoder_out_dim", out_dim, 1, 1 << 20));
  LV_TRY(lv_check_prob("task.encoder.dropout_prob", lv_params_float(ep, "dropout_prob"), &m->enc_dropout));
  m->enc_residual_start = lv_params_int(ep, "residual_start");
  const int64_t emb_dim = m->enc_emb->embedding_dim;
  if (m->enc_residual_start <= 0 && emb_dim != 2 * cell)
    return lv_status_make(LV_ERR_INVALID, "task.encoder.residual_start = %lld adds layer 0's input (emb.embedding_dim "
                          "%lld) to its output (2 * lstm_cell_size = %lld): the widths must match, or start at 1",
                          (long long)m->enc_residual_start, (long long)emb_dim, (long long)(2 * cell));
  for (int i = 0; i < n; i++) {
    for (int d = 0; d < 2; d++) {
      char name[64];
      snprintf(name, sizeof name, "L%d_rnn_%s", i, d ? "bak" : "fwd");
      lv_layer *c = NULL;
      LV_TRY(lv_owner_cell(o, lv_params_sub(ep, "lstm_tpl"), "task.encoder.lstm_tpl", name, i ? 2 * cell : emb_dim, cell,
                       scope, vs, &c));
      char view[LV_VAR_NAME_MAX + 16];
      snprintf(view, sizeof view, "%s/L%d/%s", scope, i, d ? "bak" : "fwd");
      lv_frnn_view(&m->enc_rnn[i][d], view, c, d == 1);
    }
    m->enc_layers = i + 1;
  }
  if (2 * cell != out_dim) {
    lv_params *p = NULL;
    LV_TRY(lv_owner_params(o, lv_params_sub(ep, "proj_tpl"), "task.encoder.proj_tpl", "proj", &p));
    LV_TRY(lv_params_set_bool(p, "batch_norm", false));
    LV_TRY(lv_params_set_int(p, "input_dim", 2 * cell));
    LV_TRY(lv_params_set_int(p, "output_dim", out_dim));
    LV_TRY(lv_params_set_bool(p, "has_bias", true));
    LV_TRY(lv_params_set_string(p, "activation", "NONE"));
    lv_layer *l = NULL;
    LV_TRY(lv_owner_layer(o, p, scope, vs, "task.encoder.proj_tpl", &l));
    if (strcmp(l->cls->cls, "ProjectionLayer"))
      return lv_status_make(LV_ERR_INVALID, "task.encoder.proj_tpl.cls must be ProjectionLayer, got %s", l->cls->cls);
    m->enc_proj = (lv_projection_layer *)l;
  }
  return NULL;
}

/* The encoder's dropout stream k of the graph's step (training only): the masks depend on
 * the step only. The decoder's streams start at STREAM_DEC. */
enum { STREAM_ENC_EMB = 0, STREAM_ENC_LAYER = 1, STREAM_DEC = 40 };

static lv_status build_decoder(rnmt_model *m, const lv_params *dp, const char *task_name, int64_t enc_out,
                               lv_varstore *vs) {
  char scope[LV_VAR_NAME_MAX];
  snprintf(scope, sizeof scope, "%s/%s", task_name, lv_params_str(dp, "name"));
  LV_TRY(lv_layer_scope_vn(vs, scope, dp, "task.decoder"));
  if (lv_params_int(dp, "source_dim") != enc_out)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.source_dim (%lld) must equal the encoder's output depth "
                          "task.encoder.encoder_out_dim (%lld)", (long long)lv_params_int(dp, "source_dim"),
                          (long long)enc_out);
  LV_TRY(lv_atten_lstm_decoder_init(&m->dec, dp, "task.decoder", scope, enc_out, vs, m->base.cls->cls, m->seed,
                                    STREAM_DEC));
  LV_TRY(lv_mt_label_smoothing(dp, "mt.model.RNMTModel", &m->smoothing));
  m->per_word_avg_loss = lv_params_bool(dp, "per_word_avg_loss");
  return NULL;
}

static lv_status rnmt_create(const lv_params *p, const lv_params *input_p, lv_varstore *vs, lv_task **out) {
  (void)input_p;
  rnmt_model *m = calloc(1, sizeof *m);
  LV_ASSERT(m);
  m->base.cls = strcmp(lv_params_str(p, "cls"), lv_punctuator_rnmt_model.cls) ? &lv_mt_rnmt_model
                                                                                : &lv_punctuator_rnmt_model;
  m->base.p = p;
  m->seed = lv_params_is_set(p, "random_seed") ? (uint64_t)lv_params_int(p, "random_seed") : 0x52a3e7b1ull;
  const char *name = lv_params_str(p, "name");
  lv_status s = NULL;
  if (!*name) s = lv_status_make(LV_ERR_INVALID, "task.name must be set (e.g. \"rnmt\")");
  if (!s) s = build_encoder(m, lv_params_sub(p, "encoder"), name, vs);
  if (!s) {
    const lv_params *ep = lv_params_sub(p, "encoder");
    s = build_decoder(m, lv_params_sub(p, "decoder"), name, lv_params_int(ep, "encoder_out_dim"), vs);
  }
  if (s) {
    rnmt_destroy(&m->base);
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

static lv_tensor *dropout(const rnmt_model *m, lv_graph *g, lv_tensor *x, float prob, int k) {
  return lv_op_step_dropout(g, x, prob, m->seed, LV_ATTEN_DEC_STREAMS, (uint64_t)k);
}

bool lv_rnmt_encode(lv_task *t, lv_graph *g, lv_tensor *src_ids, lv_tensor *src_paddings, lv_tensor **encoded,
                    lv_tensor **paddings) {
  rnmt_model *m = (rnmt_model *)t;
  lv_tensor *xs = lv_embedding_layer_lookup_time_major(m->enc_emb, g, src_ids, src_paddings);
  lv_tensor *pads = transpose2(g, src_paddings); /* [S, B] */
  if (!xs || !pads) return false;
  lv_tensor *ps = lv_op_reshape(g, pads, lv_shape3(pads->shape.d[0], pads->shape.d[1], 1));
  xs = dropout(m, g, xs, m->enc_dropout, STREAM_ENC_EMB);
  for (int i = 0; xs && i < m->enc_layers; i++) {
    lv_tensor *o[2];
    if (!lv_frnn_run(&m->enc_rnn[i][0], g, xs, ps, NULL, &o[0], NULL) ||
        !lv_frnn_run(&m->enc_rnn[i][1], g, xs, ps, NULL, &o[1], NULL))
      return false;
    lv_tensor *ys = dropout(m, g, lv_op_concat(g, o, 2, -1), m->enc_dropout, STREAM_ENC_LAYER + i);
    xs = i >= m->enc_residual_start ? lv_op_add(g, xs, ys) : ys;
  }
  if (xs && m->enc_proj) xs = lv_projection_layer_fprop_padded(m->enc_proj, g, xs, ps);
  if (!xs) return false;
  *encoded = xs;
  *paddings = pads;
  return true;
}

bool lv_rnmt_log_probs(lv_task *t, lv_graph *g, lv_tensor *encoded, lv_tensor *paddings, lv_tensor *tgt_ids,
                       lv_tensor *tgt_paddings, lv_tensor **log_probs, lv_tensor **atten_probs) {
  rnmt_model *m = (rnmt_model *)t;
  lv_tensor *x = lv_atten_lstm_decoder_fprop(&m->dec, g, encoded, paddings, tgt_ids, tgt_paddings, atten_probs);
  *log_probs = x ? lv_op_log_softmax(g, lv_softmax_layer_logits(m->dec.softmax, g, x)) : NULL;
  return *log_probs != NULL;
}

static bool rnmt_fprop(lv_task *t, lv_graph *g, lv_batch *b, bool is_eval, int64_t step, lv_metrics *mt) {
  (void)step; /* the graph's step picks the dropout masks */
  rnmt_model *m = (rnmt_model *)t;
  lv_mt_batch in;
  if (!lv_mt_batch_get(g, b, "mt.model.RNMTModel", &in)) return false;
  lv_tensor *enc, *pads;
  if (!lv_rnmt_encode(t, g, in.src_ids, in.src_paddings, &enc, &pads)) return false;
  lv_tensor *x = lv_atten_lstm_decoder_fprop(&m->dec, g, enc, pads, in.tgt_ids, in.tgt_paddings, NULL);
  if (!x) return false;
  return lv_mt_softmax_metrics(m->dec.softmax, g, x, in.tgt_labels, in.tgt_weights, m->smoothing, m->per_word_avg_loss,
                               is_eval, "mt.model.RNMTModel", mt);
}

/* ---- incremental decoding (bin/decoder's interface) ------------------------------------ */

static lv_status rnmt_decode_begin(lv_task *t, lv_graph *g, const lv_batch *b, int64_t *atten_len,
                                   int32_t *atten_lens, void **state) {
  rnmt_model *m = (rnmt_model *)t;
  *state = NULL;
  lv_tensor *src_ids, *src_paddings, *enc, *pads;
  LV_TRY(lv_mt_decode_source(g, b, "mt.model.RNMTModel decoder", &src_ids, &src_paddings, atten_len, atten_lens));
  if (!lv_rnmt_encode(t, g, src_ids, src_paddings, &enc, &pads)) {
    lv_status s = lv_graph_status(g);
    return s ? lv_status_wrap(s, "%s decoder encoding the source", t->cls->cls)
             : lv_status_make(LV_ERR_INTERNAL, "%s decoder: encoding the source failed", t->cls->cls);
  }
  return lv_atten_lstm_decoder_begin(&m->dec, g, enc, pads, state);
}

static int64_t rnmt_vocab_size(const lv_task *t) { return ((const rnmt_model *)t)->dec.softmax->num_classes; }

static int64_t rnmt_row_bytes(const lv_task *t, const lv_batch *b, int64_t target_seq_len) {
  (void)target_seq_len;
  return lv_atten_lstm_decoder_row_bytes(&((const rnmt_model *)t)->dec, lv_mt_source_len(b));
}

static const lv_seq_decode_ops kRnmtDecodeOps = {
    .vocab_size = rnmt_vocab_size,
    .atten_probs = true,
    .row_bytes = rnmt_row_bytes,
    .begin = rnmt_decode_begin,
    .step = lv_atten_lstm_decoder_step,
    .end = lv_atten_lstm_decoder_end,
};

const lv_task_class lv_mt_rnmt_model = {
    .cls = "mt.model.RNMTModel",
    .params = rnmt_model_params,
    .create = rnmt_create,
    .fprop = rnmt_fprop,
    .destroy = rnmt_destroy,
    LV_SEQ_DECODE_HOOKS(lv_seq_decoder_setup, &kRnmtDecodeOps),
};

/* lingvo/tasks/punctuator/model.py: the MT model (its Inference graph is bin/decoder's
 * --decode_text). */
const lv_task_class lv_punctuator_rnmt_model = {
    .cls = "punctuator.model.RNMTModel",
    .params = punctuator_model_params,
    .create = rnmt_create,
    .fprop = rnmt_fprop,
    .destroy = rnmt_destroy,
    LV_SEQ_DECODE_HOOKS(lv_seq_decoder_setup_punct, &kRnmtDecodeOps),
};
