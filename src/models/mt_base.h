/* What the MT tasks share (Lingvo's MTBaseDecoder, lingvo/tasks/mt/decoder.py, and the
 * NmtInput batch they read): the decoder's search params (BeamSearchHelper), label
 * smoothing, and the softmax with its metrics (_FPropSoftmax + _ComputeSoftmaxMetrics).
 * mt.model.TransformerModel (models/mt.h), mt.model.RNMTModel and the punctuator
 * (models/rnmt.h) use them; their decoding is search/seq_decode.h. */
#ifndef LV_MODELS_MT_BASE_H
#define LV_MODELS_MT_BASE_H

#include "layers/full_softmax.h"
#include "models/task.h"

/* BeamSearchHelper params as task.decoder.beam_search, with the decoder's defaults. */
lv_params *lv_mt_beam_search_params(double length_normalization, double coverage_penalty);
/* Defines MTBaseDecoder's label_smoothing (None), per_word_avg_loss, target_seq_len,
 * target_sos_id, target_eos_id, beam_search and fusion (search/lm_fusion.h) in decoder
 * params p. */
void lv_mt_define_decoder_params(lv_params *p, double length_normalization, double coverage_penalty);
/* An NmtInput batch's tensors (Lingvo's input_batch.src / .tgt). */
typedef struct lv_mt_batch {
  lv_tensor *src_ids, *src_paddings;                          /* [B, S] */
  lv_tensor *tgt_ids, *tgt_paddings, *tgt_labels, *tgt_weights; /* [B, T] */
} lv_mt_batch;
/* False with the graph's error set (naming who and the keys) when b lacks one. */
bool lv_mt_batch_get(lv_graph *g, lv_batch *b, const char *who, lv_mt_batch *out);
/* task.decoder.label_smoothing (dp = the decoder params): None -> 0, else the
 * UniformLabelSmoother's uncertainty; other smoothers are errors naming task_cls. */
lv_status lv_mt_label_smoothing(const lv_params *dp, const char *task_cls, float *uncertainty);
/* _FPropSoftmax + _ComputeSoftmaxMetrics: the softmax input x [T, B, D] against
 * tgt_labels / tgt_weights [B, T] -> metrics `loss` (per word, or per sequence averaged
 * over the batch), `log_pplx` and in eval `fraction_of_correct_next_step_preds`. False
 * with the graph's error set (naming who). */
bool lv_mt_softmax_metrics(lv_softmax_layer *sm, lv_graph *g, lv_tensor *x, lv_tensor *tgt_labels, lv_tensor *tgt_w,
                           float smoothing, bool per_word_avg_loss, bool is_eval, const char *who, lv_metrics *mt);

/* For a decoder's begin (search/seq_decode.h): the host batch b's src.ids [B, S] and
 * src.paddings [B, S] copied onto g (*ids, *paddings), *atten_len = S and atten_lens [B]
 * the unpadded length of each source. who names the decoder in errors. */
lv_status lv_mt_decode_source(lv_graph *g, const lv_batch *b, const char *who, lv_tensor **ids, lv_tensor **paddings,
                              int64_t *atten_len, int32_t *atten_lens);
/* S, the source positions of host batch b (src.ids' width; 0 without it). */
int64_t lv_mt_source_len(const lv_batch *b);

#endif
