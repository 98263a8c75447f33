/* asr.model.AsrModel (lingvo/tasks/asr/model.py): Listen, Attend and Spell. The encoder is
 * layers/asr_encoder.h (Lingvo's AsrEncoder: convs with time paddings, bidirectional LSTMs
 * with projections), the decoder layers/atten_lstm_decoder.h built as Lingvo's AsrDecoder
 * (lingvo/tasks/asr/decoder.py); variables task.name/enc/... and task.name/dec/....
 *
 * Batches are AsrInput's: src.src_inputs float [B, T, F, 1] (log-mel frames), src.paddings
 * [B, T], tgt.ids / tgt.labels / tgt.paddings / tgt.weights [B, L] (and host strings
 * sample_ids and tgt.transcripts [B], read by decoding). Metrics (AsrDecoder's
 * _ComputeMetrics): loss and log_pplx (per-token average cross-entropy, weight the target
 * tokens; with per_token_avg_loss False the loss is per sequence), token_normed_prob =
 * exp(-log_pplx), fraction_of_correct_next_step_preds (argmax accuracy over the target
 * tokens). Beam search runs over lv_asr_decode_ops (models/seq_decode.h's protocol);
 * with use_unnormalized_logits_as_log_probs a step's log-probs are the logits. */
#ifndef LV_MODELS_ASR_H
#define LV_MODELS_ASR_H

#include "models/seq_decode.h"
#include "models/task.h"

extern const lv_task_class lv_asr_model;
/* The incremental decoder of an lv_asr_model task (begin reads src.src_inputs and
 * src.paddings of the host batch). */
extern const lv_seq_decode_ops lv_asr_decode_ops;

#endif
