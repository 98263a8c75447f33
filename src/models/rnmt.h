/* mt.model.RNMTModel (lingvo/tasks/mt/model.py RNMTModel: RNMT+ of "The Best of Both
 * Worlds", arXiv 1804.09849) with Lingvo's encoder.MTEncoderBiRNN and decoder.MTDecoderV1,
 * time-major as Lingvo's:
 *
 *   encoder  source ids -> embeddings (EmbeddingLayer `emb`) -> dropout -> num_lstm_layers
 *            bidirectional LSTMs (cells from lstm_tpl, lstm_cell_size each way), dropout
 *            after each, residual from layer residual_start on -> a projection `proj`
 *            (ProjectionLayer, bias, no activation) to encoder_out_dim when that is not
 *            2 * lstm_cell_size.
 *   decoder  target ids -> embeddings -> dropout -> layer 0: FRNNWithAttention (cell
 *            atten_rnn fed [emb, previous context]; `attention`, e.g. MultiHeadedAttention
 *            with AdditiveAttention heads) -> rnn_layers - 1 LSTMs fed [output, context]
 *            (dropout after each, residual from layer residual_start on) -> softmax over
 *            [output, context] (feed_attention_context_vec_to_softmax) or the output, with
 *            UniformLabelSmoother targets.
 *
 * Variables, as Lingvo names them (its FRNNs put their cells in their parent's scope;
 * task name N): N/enc/emb/var_k, N/enc/L<i>_rnn_fwd/{wm,b,ln_scale}/var,
 * N/enc/L<i>_rnn_bak/..., N/enc/proj/{w,b}/var, N/dec/emb/var_k, N/dec/atten_rnn/...,
 * N/dec/atten/... (the attention's own: query_proj, source_proj, inner_att/... for
 * MultiHeadedAttention), N/dec/rnn<i>/..., N/dec/softmax/{weight_k,bias_k}/var.
 *
 * Metrics are MTBaseDecoder's (models/mt_base.h lv_mt_softmax_metrics): loss, log_pplx and in
 * eval fraction_of_correct_next_step_preds. Dropout streams are a function of the step,
 * so a resumed run draws the masks an uninterrupted one would.
 *
 * Decoding (lv_task_class.seq_decode, search/seq_decode.h): per hyp the LSTM states {m, c} of every decoder
 * layer, the attention context and probabilities; a step gathers them by parent, feeds
 * the token, and gives log-probs and the attention probabilities (the coverage penalty). */
#ifndef LV_MODELS_RNMT_H
#define LV_MODELS_RNMT_H

#include "models/mt.h"

extern const lv_task_class lv_mt_rnmt_model;
/* punctuator.model.RNMTModel: the same model under the punctuator's class name. */
extern const lv_task_class lv_punctuator_rnmt_model;

/* The encoder: src_ids int32 [B, S], src_paddings [B, S] -> *encoded [S, B, encoder_out_dim],
 * *paddings [S, B]. The graph's step picks the dropout masks (training only). False with
 * the graph's error set. */
bool lv_rnmt_encode(lv_task *t, lv_graph *g, lv_tensor *src_ids, lv_tensor *src_paddings, lv_tensor **encoded,
                    lv_tensor **paddings);
/* Teacher-forced decoder: tgt_ids int32 [B, T], tgt_paddings [B, T] given the encoder's
 * output -> *log_probs [T, B, V] and (if not NULL) *atten_probs [T, B, S]. */
bool lv_rnmt_log_probs(lv_task *t, lv_graph *g, lv_tensor *encoded, lv_tensor *paddings, lv_tensor *tgt_ids,
                       lv_tensor *tgt_paddings, lv_tensor **log_probs, lv_tensor **atten_probs);

#endif
