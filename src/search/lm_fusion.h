/* Shallow fusion (tensorflow/lingvo#103; Gulcehre et al. 2015): a language model over the
 * target vocabulary scores every hyp of a sequence model's beam search beside it, and
 * each candidate token's log-probability becomes
 *     log p_model(y | x, y<t) + lm_weight * log p_LM(y | y<t)
 * (the model's step output, which for a speech model with unnormalized logits is its
 * logits; the LM's log_softmax), </s> included; the LM's state (RNN states or the
 * Transformer's key/value caches) is carried per hyp and reordered with the beam
 * (layers/lm_layers.h's lv_lm_search). With lm_weight 0 the search and its output are
 * the search without fusion, bit for bit.
 *
 * Fusion is one type of scorer (search/beam_search.h's lv_scorer): a search runs over
 * the model's decoder and any number of them, each with its weight (Marian's
 * createScorers). task.decoder.fusion (ShallowFusion params, lv_lm_fusion_params) is the
 * config of a list of one: a LanguageModel experiment (lm_model, e.g.
 * "lm.bible.RnnLmSpanishSmall") and its checkpoint (lm_checkpoint: a prefix, or
 * lm_logdir: the latest of <lm_logdir>/train), which runners/scorers.h builds; the
 * library API adds loaded LMs (lv_decode_options.scorers). lv_lm_fusion_check refuses an
 * LM whose vocabulary is not the task's and makes the scorer, which lv_task_set_scorers
 * gives the task; search/seq_decode.h's lv_seq_beam_decode then adds it to every search
 * it runs. A task decoding through lv_seq_beam_decode gets fusion by defining the params
 * in its decoder params (lv_lm_fusion_define_params). */
#ifndef LV_SEARCH_LM_FUSION_H
#define LV_SEARCH_LM_FUSION_H

#include "search/beam_search.h"
#include "models/task.h"
#include "input/tokenizer.h"

/* The ShallowFusion params: lm_model, lm_logdir, lm_checkpoint, lm_params_override,
 * lm_weight. */
lv_params *lv_lm_fusion_params(void);
/* Defines "fusion" (lv_lm_fusion_params) in a decoder's params p. */
void lv_lm_fusion_define_params(lv_params *decoder_p);

/* A restored LanguageModel and the graph it steps in, owned by whoever made them (the
 * decoder job's scorers, a library session); the task's scorer list points at scorer. */
typedef struct lv_lm_fusion {
  lv_task *lm; /* an lm.model.LanguageModel over token ids (RnnLm or TransformerLm) */
  lv_graph *g; /* the LM's own graph */
  float weight;
  lv_scorer scorer; /* made by lv_lm_fusion_check */
} lv_lm_fusion;

/* Checks, before any checkpoint is read, that lm_cfg (the resolved experiment that
 * task.decoder.fusion.lm_model names) is a language model (task.cls
 * lm.model.LanguageModel); LV_ERR_INVALID naming the param, the model and its class. */
lv_status lv_lm_fusion_check_model(const lv_params *lm_cfg, const char *lm_model);
/* Checks that f->lm is a LanguageModel whose softmax has exactly the ids of task t's
 * decoder and, when both cfgs give an input.tokenizer (cfg: t's experiment, lm_cfg: the
 * LM's), that every id is the same piece in each (LV_ERR_INVALID naming both), and that
 * f->weight is in [0, 1e6]; then makes f->scorer (named name), for lv_task_set_scorers:
 * each search steps the LM over the same step_ids / parent as the model. */
lv_status lv_lm_fusion_check(const lv_task *t, const lv_params *cfg, const lv_params *lm_cfg, const char *name,
                             lv_lm_fusion *f);

#endif
