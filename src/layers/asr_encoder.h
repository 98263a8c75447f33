/* Lingvo's AsrEncoder (lingvo/tasks/asr/encoder.py) as a piece a speech task composes:
 *
 *   src_inputs [B, T, F, C] with paddings [B, T]
 *   -> in training with use_specaugment: SpectrumAugmenter `specaugment` of
 *      specaugment_network (layers/spectrum_augmenter.h; off by default, as in Lingvo)
 *   -> pad_steps more frames (zeros, padded)
 *   -> num_cnn_layers ConvLayers `conv_L<i>` with time paddings (layers/conv.h: strided
 *      SAME conv, batch norm over the non-padded frames, ReLU, padded frames zeroed)
 *   -> [B, T', F' * C'] zero-padded on the feature axis to a multiple of 16, time-major
 *   -> num_lstm_layers BidirectionalFRNNs (`fwd_rnn_L<i>`, `bak_rnn_L<i>`, cells of
 *      lstm_tpl, lstm_cell_size each) with a ProjectionLayer `proj_L<i>` (2 * cell ->
 *      2 * cell, batch norm, ReLU, padding-aware) between layers (also after the last with
 *      project_after_last_lstm), the last output times 1 - padding
 *   -> encoded [T', B, 2 * lstm_cell_size], paddings [T', B].
 *
 * Variables under the scope given at creation (e.g. librispeech/enc): conv_L<i>/{w, beta,
 * gamma, moving_mean, moving_variance}, fwd_rnn_L<i>/{wm, b}, bak_rnn_L<i>/{wm, b},
 * proj_L<i>/{w, beta, gamma, moving_mean, moving_variance}, as Lingvo names them.
 * Lingvo's conv-LSTM blocks, residual and highway skips, stacking and
 * final_proj are not implemented: their params exist with Lingvo's defaults and a value
 * that would need them is an error naming the key. */
#ifndef LV_LAYERS_ASR_ENCODER_H
#define LV_LAYERS_ASR_ENCODER_H

#include "layers/conv.h"
#include "layers/owner.h"
#include "layers/projection.h"
#include "layers/rnn_layers.h"
#include "layers/spectrum_augmenter.h"

#define LV_ASR_ENC_MAX_LAYERS 16

typedef struct lv_asr_encoder {
  lv_layer_owner own;
  lv_spectrum_augmenter *specaug; /* `specaugment`, with use_specaugment; NULL otherwise */
  int64_t specaug_start_step;     /* specaugment_start_step: masks from this global step on */
  int64_t pad_steps, freq, channels; /* input_shape's F and C */
  int cnn_layers, lstm_layers;
  lv_conv_layer *conv[LV_ASR_ENC_MAX_LAYERS];
  int64_t conv_out_dim, lstm_in_dim; /* F' * C' and it padded to a multiple of 16 */
  lv_frnn_layer rnn[LV_ASR_ENC_MAX_LAYERS][2]; /* views over fwd_rnn_L<i> / bak_rnn_L<i> */
  lv_projection_layer *proj[LV_ASR_ENC_MAX_LAYERS]; /* NULL where there is none */
  int64_t cell_dim;
} lv_asr_encoder;

/* AsrEncoder's params with Lingvo's defaults. */
lv_params *lv_asr_encoder_params(void);
/* Builds the encoder from ep (path `path` in messages, e.g. "task.encoder") under scope.
 * On error *e holds what was made (lv_asr_encoder_free releases it). */
lv_status lv_asr_encoder_init(lv_asr_encoder *e, const lv_params *ep, const char *path, const char *scope,
                              lv_varstore *vs);
void lv_asr_encoder_free(lv_asr_encoder *e);
/* 2 * lstm_cell_size. */
int64_t lv_asr_encoder_out_dim(const lv_asr_encoder *e);
/* About the bytes of activations fprop keeps for one utterance of `frames` frames (convs'
 * patches and outputs, the LSTMs' gates and outputs): a decoder's memory budget. */
int64_t lv_asr_encoder_row_bytes(const lv_asr_encoder *e, int64_t frames);
/* src_inputs [B, T, F, C], paddings [B, T] -> *encoded [T', B, D], *enc_paddings [T', B].
 * False with the graph's error set. */
bool lv_asr_encoder_fprop(lv_asr_encoder *e, lv_graph *g, lv_tensor *src_inputs, lv_tensor *paddings,
                          lv_tensor **encoded, lv_tensor **enc_paddings);

#endif
