/* The attention LSTM decoder: Lingvo's MTDecoderV1 (lingvo/tasks/mt/decoder.py), the
 * machine AsrDecoder shares, as a piece any task with its own encoder composes. Time-major:
 *
 *   target ids -> embeddings (`emb`) -> dropout -> layer 0: FRNNWithAttention (cell
 *   `atten_rnn` fed [emb, previous context]; `attention`: AdditiveAttention,
 *   DotProductAttention or MultiHeadedAttention over the encoder's output) ->
 *   rnn_layers - 1 LSTMs `rnn<i>` fed [output, context] (dropout after each, residual from
 *   layer residual_start on) -> the softmax input: [output, context]
 *   (feed_attention_context_vec_to_softmax) or the output -> `softmax` (SimpleFullSoftmax).
 *
 * Variables under the scope given at creation (e.g. N/dec): emb/var_k, atten_rnn/...,
 * atten/... (the attention's own), rnn<i>/..., softmax/{weight_k,bias_k}/var.
 *
 * Dropout masks are the graph step's streams stream_base + k (lv_graph_stream with
 * LV_ATTEN_DEC_STREAMS per step, k = 0 for the embeddings and 1 + i after layer i), so a resumed
 * run draws the masks an uninterrupted one would.
 *
 * Incremental decoding keeps per hyp the LSTM states {m, c} of every layer, the attention
 * context and probabilities; a step gathers them by parent, feeds the token and gives
 * log-probs and the attention probabilities (the coverage penalty).
 *
 * Lingvo's AsrDecoder (lingvo/tasks/asr/decoder.py) is the same machine with other names
 * and three rules of its own (lv_atten_lstm_decoder_init_asr): every cell comes from
 * rnn_cell_tpl, named `rnn_cell`, `rnn_cell_1`, ... (layer 0 fed [emb, previous context],
 * the others [output, context]); a layer i >= 1 adds its input when residual_start > 0 and
 * i + 1 >= residual_start; the softmax reads [output, context] when softmax_uses_attention;
 * and with use_unnormalized_logits_as_log_probs a search step gives the logits themselves
 * as its log-probs. Its embedding's width is emb_dim. */
#ifndef LV_LAYERS_ATTEN_LSTM_DECODER_H
#define LV_LAYERS_ATTEN_LSTM_DECODER_H

#include "layers/attention.h"
#include "layers/embedding.h"
#include "layers/full_softmax.h"
#include "layers/owner.h"
#include "layers/rnn_layers.h"

#define LV_ATTEN_DEC_MAX_LAYERS 32
/* Dropout streams a step of a task using the decoder numbers (the decoder's and its own). */
#define LV_ATTEN_DEC_STREAMS 96

typedef struct lv_atten_lstm_decoder {
  lv_layer_owner own;
  char who[96];      /* the task class, for messages */
  uint64_t seed;     /* dropout */
  uint64_t stream_base;
  lv_embedding_layer *emb;
  lv_layer *atten_cell;
  lv_attention *atten;
  lv_frnn_atten_layer atten_rnn;                  /* view over atten_rnn + atten */
  int layers;                                     /* rnn_layers: the attention layer + layers - 1 */
  lv_frnn_layer rnn[LV_ATTEN_DEC_MAX_LAYERS];     /* views over rnn1 ... (index i - 1) */
  int64_t residual_start;
  float dropout;
  bool use_prev_atten_ctx, use_zero_atten_state, feed_ctx;
  bool asr;            /* AsrDecoder's names and residual rule */
  bool unnorm_log_probs; /* a search step's log-probs are the logits */
  int64_t cell_dim, ctx_dim;
  lv_softmax_layer *softmax;
} lv_atten_lstm_decoder;

/* Defines MTDecoderV1's layer params in p (emb, source_dim, attention, atten_rnn_cell_tpl,
 * rnn_cell_tpl, rnn_cell_dim, rnn_layers, residual_start, use_prev_atten_ctx,
 * dropout_prob, use_zero_atten_state, softmax, feed_attention_context_vec_to_softmax)
 * with Lingvo's defaults. */
void lv_atten_lstm_decoder_define_params(lv_params *p);

/* Builds the decoder from params dp (path `path` in messages, e.g. "task.decoder") under
 * scope for an encoder whose output depth is enc_out_dim (dp's source_dim must equal
 * it). who names the task in decoding errors; seed and stream_base pick the dropout
 * masks. On error *d holds what was made (lv_atten_lstm_decoder_free releases it). */
lv_status lv_atten_lstm_decoder_init(lv_atten_lstm_decoder *d, const lv_params *dp, const char *path,
                                     const char *scope, int64_t enc_out_dim, lv_varstore *vs, const char *who,
                                     uint64_t seed, uint64_t stream_base);
/* AsrDecoder's layer params (emb, emb_dim, rnn_cell_tpl, rnn_cell_dim, rnn_cell_hidden_dim,
 * attention, softmax, softmax_uses_attention, source_dim, atten_context_dim, rnn_layers,
 * residual_start, dropout_prob, use_unnormalized_logits_as_log_probs) with Lingvo's
 * defaults, and the same decoder built from them. */
void lv_atten_lstm_decoder_define_asr_params(lv_params *p);
lv_status lv_atten_lstm_decoder_init_asr(lv_atten_lstm_decoder *d, const lv_params *dp, const char *path,
                                         const char *scope, int64_t enc_out_dim, lv_varstore *vs, const char *who,
                                         uint64_t seed, uint64_t stream_base);
void lv_atten_lstm_decoder_free(lv_atten_lstm_decoder *d);

/* Teacher forcing: encoded [S, B, D] and its paddings [S, B], target ids int32 [B, T] and
 * paddings [B, T] -> the softmax input [T, B, width] and (if not NULL) *probs [T, B, S].
 * NULL with the graph's error set. */
lv_tensor *lv_atten_lstm_decoder_fprop(lv_atten_lstm_decoder *d, lv_graph *g, lv_tensor *encoded,
                                       lv_tensor *enc_paddings, lv_tensor *tgt_ids, lv_tensor *tgt_paddings,
                                       lv_tensor **probs);

/* Incremental decoding for beam search (the protocol of search/seq_decode.h's
 * lv_seq_decode_ops, whose begin / step / end a task forwards here): begin packs the
 * encoder output (encoded [S, B, D], paddings [S, B], tensors of g) and the initial state;
 * the graph must not be reset until end. */
lv_status lv_atten_lstm_decoder_begin(lv_atten_lstm_decoder *d, lv_graph *g, lv_tensor *encoded,
                                      lv_tensor *enc_paddings, void **state);
lv_status lv_atten_lstm_decoder_step(void *state, int n, const int32_t *step_ids, const int32_t *parent,
                                     float *log_probs, float *atten_probs);
void lv_atten_lstm_decoder_end(void *state);
/* Per hyp, the bytes a search over sources of src_len positions holds (the decoder's
 * search sizes its parts by it). */
int64_t lv_atten_lstm_decoder_row_bytes(const lv_atten_lstm_decoder *d, int64_t src_len);

#endif
