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
 * tokens). Beam search runs over lv_asr_decode_ops (search/seq_decode.h's protocol);
 * with use_unnormalized_logits_as_log_probs a step's log-probs are the logits. */
#ifndef LV_MODELS_ASR_H
#define LV_MODELS_ASR_H

#include "search/seq_decode.h"
#include "models/task.h"

extern const lv_task_class lv_asr_model;
/* The incremental decoder of an lv_asr_model task (begin reads src.src_inputs and
 * src.paddings of the host batch). */
extern const lv_seq_decode_ops lv_asr_decode_ops;

/* The decoder job (search/asr_decode.c): beam search over lv_asr_decode_ops with
 * task.decoder.beam_search and target_*, the hyps turned into text with input.tokenizer.
 *   metrics       Lingvo's ASR decoder metrics (reference/lingvo_asr_lm.md §6.3, metrics/wer.h):
 *                 norm_wer (corpus errors / words of the top hyps), wer and
 *                 error_rates/{ins,sub,del,wer}, case_insensitive_error_rates/{...},
 *                 oracle_norm_wer, sacc, ter, corpus_bleu, num_samples_in_batch; the log
 *                 line gives the corpus WER.
 *   decoder_out   per utterance its id as the key and the lines "ref: ..." and
 *                 "hyp h: score S: ..." per hyp.
 * Interactive decoding takes kind "audio": a line is an audio file's path, read with
 * audio/audio_file.h at 16 kHz mono, turned into create_asr_features' log-mel frames
 * (plus AsrInput's eos frame) and decoded; the output line is `path<TAB>text`. The
 * runner's batch of lines becomes one batch of utterances padded to the longest (rows
 * in line order, each with its own paddings, so each decodes as it would alone); a
 * silent file (no sample above -60 dBFS) gives an empty text without decoding. A file
 * that cannot be read is that item's error (decode_out_nbest), and the others go on. */
lv_status lv_asr_decoder_setup(lv_task *t, const lv_params *cfg);
lv_status lv_asr_create_decoder_metrics(lv_task *t, lv_metric_set *metrics);
lv_status lv_asr_decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *out);
lv_status lv_asr_post_process_decode_out(lv_task *t, const lv_decode_out *dec_out, lv_metric_set *metrics,
                                         lv_kv_list *out);
lv_status lv_asr_decoder_report(lv_task *t, const lv_metric_set *metrics, char **headline, char **detail);
lv_status lv_asr_line_describe(lv_task *t, const char *kind, const char **verb, const char **note);
/* --decode_audio's batch bound: files of input.source_max_length frames whose frames fit
 * the search's memory budget twice (read, then batched); 0 without a length limit. */
int lv_asr_line_batch_limit(lv_task *t, const char *kind);
/* Seconds of audio input i of the last batch held (lv_task_class.item_seconds). */
double lv_asr_item_seconds(lv_task *t, int i);
lv_status lv_asr_lines_to_batch(lv_task *t, const char *kind, const char *const *lines, const size_t *lens, int n,
                                int64_t first_lineno, lv_batch *b, bool *empty);
lv_status lv_asr_samples_to_batch(lv_task *t, const float *const *samples, const int64_t *lens, int n, lv_batch *b,
                                  bool *empty);
lv_status lv_asr_decode_out_nbest(lv_task *t, const lv_decode_out *dec_out, int i, int k, char **texts, float *scores,
                                  int *n);

#endif
