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
 * task.decoder.fusion (ShallowFusion params, lv_lm_fusion_params) names the LM: a
 * LanguageModel experiment (lm_model, e.g. "lm.bible.RnnLmSpanishSmall") and its
 * checkpoint (lm_checkpoint: a prefix, or lm_logdir: the latest of <lm_logdir>/train).
 * bin/decoder (runners/decoder.c) builds and restores that model when lm_model is set
 * and attaches it to the task (lv_lm_fusion_attach, which refuses an LM whose vocabulary
 * is not the task's); models/seq_decode.h's lv_seq_beam_decode then fuses it into every
 * search it runs. A task decoding through lv_seq_beam_decode gets fusion by defining
 * the params in its decoder params (lv_lm_fusion_define_params). */
#ifndef LV_MODELS_LM_FUSION_H
#define LV_MODELS_LM_FUSION_H

#include "models/task.h"
#include "input/tokenizer.h"

/* The ShallowFusion params: lm_model, lm_logdir, lm_checkpoint, lm_params_override,
 * lm_weight. */
lv_params *lv_lm_fusion_params(void);
/* Defines "fusion" (lv_lm_fusion_params) in a decoder's params p. */
void lv_lm_fusion_define_params(lv_params *decoder_p);

/* A restored LanguageModel and the graph it steps in, owned by whoever made them (the
 * decoder job); the task only points at it. */
struct lv_lm_fusion {
  lv_task *lm; /* an lm.model.LanguageModel over token ids (RnnLm or TransformerLm) */
  lv_graph *g; /* the LM's own graph */
  float weight;
};

/* Checks, before any checkpoint is read, that lm_cfg (the resolved experiment that
 * task.decoder.fusion.lm_model names) is a language model (task.cls
 * lm.model.LanguageModel); LV_ERR_INVALID naming the param, the model and its class. */
lv_status lv_lm_fusion_check_model(const lv_params *lm_cfg, const char *lm_model);
/* Checks that f->lm is a LanguageModel whose softmax has exactly the ids of task t's
 * decoder and, when both cfgs give an input.tokenizer (cfg: t's experiment, lm_cfg: the
 * LM's), that every id is the same piece in each (LV_ERR_INVALID naming both), then
 * makes t's beam searches fuse it (t->fusion = f; f NULL detaches). */
lv_status lv_lm_fusion_attach(lv_task *t, const lv_params *cfg, const lv_params *lm_cfg, lv_lm_fusion *f);

/* One search's fused LM: lv_lm_fusion_begin starts it for rows of any number, each
 * lv_lm_fusion_step runs the LM over the same step_ids / parent as the model and adds
 * weight * its log-probs to log_probs [n, V]. */
typedef struct lv_lm_fusion_search lv_lm_fusion_search;
lv_status lv_lm_fusion_begin(const lv_lm_fusion *f, int64_t vocab, lv_lm_fusion_search **out);
lv_status lv_lm_fusion_step(lv_lm_fusion_search *s, int n, const int32_t *step_ids, const int32_t *parent,
                            float *log_probs);
void lv_lm_fusion_end(lv_lm_fusion_search *s);

#endif
