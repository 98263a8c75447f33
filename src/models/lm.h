/* lm.model.LanguageModel (Lingvo lingvo/tasks/lm/model.py): an LmInput batch (ids,
 * labels, paddings, weights [B, L], word_count [B], text [B]) trimmed to its longest real
 * row and made time-major, through the `lm` layer (RnnLm, RnnLmNoEmbedding is not a task
 * LM, or TransformerLm: layers/lm_layers.h) with a full softmax.
 *
 * Metrics (value, weight), as Lingvo's FPropTower: loss (avg_xent, or total_xent with
 * train.sum_loss_across_tokens_in_batch; weight num_preds), fraction_of_correct_next_step_preds,
 * log_pplx (per predicted token including </s>: total_xent / total_weight; weight num_preds),
 * log_pplx_per_word (total_xent / num_words; weight num_words), num_predictions (weight 1)
 * and num_words (= sum(word_count + 1), weight 1). The evaler's weighted averages make the
 * corpus values sum(xent) / sum(tokens) and sum(xent) / sum(words).
 *
 * Decoding (bin/decoder, models/task.h's line hooks): kind "score_text" gives per line
 * "log_prob \t tokens \t perplexity" (the line as LmInput would tokenize it) and a closing
 * corpus line; kind "sample" continues a prefix line by sampling from the softmax
 * (temperature, top_k, seed: task.decoder.sample_*), with carried RNN states or the
 * Transformer's key/value caches. */
#ifndef LV_MODELS_LM_H
#define LV_MODELS_LM_H

#include "models/task.h"

extern const lv_task_class lv_lm_language_model;

typedef struct lv_lm lv_lm; /* layers/lm_layers.h */
/* The LM layer of a LanguageModel task, or NULL for a task of another class. */
lv_lm *lv_lm_task_lm(lv_task *t);

#endif
