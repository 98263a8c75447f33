/* Language-model layers of Lingvo's lingvo/tasks/lm/layers.py, time-major as there:
 *
 *   RnnLmNoEmbedding  inputs [T, B, D] -> a stack of FRNNs (rnns: StackedFRNNLayerByLayer
 *                     params: num_layers, cell_tpl, num_input_nodes for the first layer,
 *                     skip_start, dropout) -> SimpleFullSoftmax `softmax`.
 *   RnnLm             ids [T, B] -> EmbeddingLayer `emb` (x sqrt(dim) when scale_sqrt_depth)
 *                     -> embedding dropout (training) -> RnnLmNoEmbedding.
 *   TransformerLm     ids [T, B] -> `emb` + sinusoidal `position_emb` -> input dropout ->
 *                     num_trans_layers causal TransformerLayers `layer_<i>` -> `softmax`;
 *                     no final layer norm, and each attention residual adds the normalised
 *                     input (TransformerAttentionLayer's defaults), as Lingvo's TransformerLm.
 *
 * Variables (LM scope S, e.g. "lm/lm"): S/emb/var_<k>/var; the RNN cells directly in S as
 * Lingvo's FRNN and stack scope overrides place them: S/rnns_<i>/{wm,b,w_proj}/var (cell
 * names `<rnns.name>_<i>`); S/layer_<i>/... of the TransformerLayers; S/softmax/{weight,bias}_<k>/var.
 *
 * FProp (lv_lm_fprop) gives Lingvo's xent NestedMap (full softmax, see full_softmax.h; in
 * training with softmax.num_sampled > 0 the sampled softmax of sampled_softmax.h) and
 * last_hidden [T, B, D]. The RNN's stack runs from state0 (zeros) and padded steps keep
 * the state. Step by step (lv_lm_step, Lingvo's Step): an lv_lm_state carries the RNN
 * states or the Transformer's key/value caches between calls; all its tensors live in
 * the graph, which must not be reset between the steps of one sequence, and running the
 * steps 0..T-1 gives the logits of the full-sequence FProp.
 *
 * Generic fprop keys: "ids" int32 [T, B] (RnnLmNoEmbedding: "act" [T, B, D]),
 * "paddings" [T, B], "labels" int32 [T, B], "weights" [T, B] -> "logits", "log_probs",
 * "per_example_xent", "per_example_argmax", "total_xent", "total_weight", "avg_xent",
 * "last_hidden". */
#ifndef LV_LAYERS_LM_LAYERS_H
#define LV_LAYERS_LM_LAYERS_H

#include "layers/embedding.h"
#include "layers/full_softmax.h"
#include "layers/owner.h"
#include "layers/rnn_layers.h"
#include "layers/transformer.h"

#define LV_LM_MAX_LAYERS 64

typedef enum { LV_LM_RNN, LV_LM_RNN_NO_EMB, LV_LM_TRANSFORMER, LV_LM_KIND_COUNT } lv_lm_kind;

/* Any of the three classes (RnnLm, RnnLmNoEmbedding, TransformerLm). */
typedef struct lv_lm {
  lv_layer base;
  lv_lm_kind kind;
  int64_t vocab_size, input_dim; /* input_dim: emb dim / model_dim / NoEmbedding's D */
  int num_layers;
  lv_layer_owner own;
  lv_embedding_layer *emb;           /* NULL for RnnLmNoEmbedding */
  lv_softmax_layer *softmax;
  int64_t num_sampled;               /* softmax.num_sampled: > 0 trains a sampled softmax */
  /* RNN */
  lv_layer *cells[LV_LM_MAX_LAYERS];
  lv_frnn_layer frnn[LV_LM_MAX_LAYERS]; /* views over cells */
  int64_t skip_start;
  bool residual[LV_LM_MAX_LAYERS]; /* layer i adds its input to its output (Lingvo's rule) */
  float emb_keep_prob, rnn_keep_prob;
  uint64_t emb_seed, rnn_seed; /* the dropouts' seeds */
  /* Transformer */
  lv_positional_embedding_layer *pos;
  lv_transformer_layer *trans[LV_LM_MAX_LAYERS];
  float input_dropout_prob;
} lv_lm;

typedef struct lv_lm_out {
  lv_xent_output xent;
  lv_tensor *last_hidden; /* [T, B, D] */
} lv_lm_out;

/* Incremental state of one batch of B sequences (start zeroed; lv_lm_state_begin). */
typedef struct lv_lm_state {
  int64_t batch, t;    /* rows, steps taken */
  lv_rnn_state *rnn;   /* [num_layers] */
  lv_tr_cache *cache;  /* [num_layers] */
} lv_lm_state;

lv_params *lv_rnn_lm_params(void);
lv_params *lv_rnn_lm_no_emb_params(void);
lv_params *lv_transformer_lm_params(void);

/* The lv_lm of a layer of one of the LM classes, or NULL. */
lv_lm *lv_lm_of(lv_layer *l);

/* inputs: ids int32 [T, B] (RnnLmNoEmbedding: [T, B, D]); paddings [T, B]; labels int32
 * and weights [T, B] (labels NULL: only logits, log_probs and last_hidden). Dropout runs
 * when the graph is training. False with the graph's error set. */
bool lv_lm_fprop(lv_lm *lm, lv_graph *g, lv_tensor *inputs, lv_tensor *paddings, lv_tensor *labels,
                 lv_tensor *weights, lv_lm_out *out);

/* Zero state for b rows (RnnLm / TransformerLm); st owns two host arrays (lv_lm_state_free). */
bool lv_lm_state_begin(lv_lm *lm, lv_graph *g, int64_t b, lv_lm_state *st);
/* One step: ids int32 [B] (the tokens at step st->t) -> *logits [B, V]. */
bool lv_lm_step(lv_lm *lm, lv_graph *g, lv_lm_state *st, lv_tensor *ids, lv_tensor **logits);
void lv_lm_state_free(lv_lm_state *st);

/* The LM over the hyps of a search (beam search's shallow fusion, search/lm_fusion.h),
 * with the step callback's contract of search/seq_decode.h: each step the per-row state
 * (RNN states, or the Transformer's key/value caches) is first gathered by parent, then
 * step_ids are consumed and log_probs [n, V] (host) receive log_softmax of the LM's
 * logits. The state is kept outside the graph, which is rewound to the mark taken by
 * begin before each step (eval mode), so g must hold nothing else of value during the
 * search. Running it over one row's tokens gives the log-probs of lv_lm_fprop. */
typedef struct lv_lm_search lv_lm_search;
/* Resets g (eval mode) and starts a search; *out is freed with lv_lm_search_end. */
lv_status lv_lm_search_begin(lv_lm *lm, lv_graph *g, lv_lm_search **out);
/* Step for n rows: parent [n] (rows of the previous step; NULL: each row continues its
 * own, which needs the previous step's n; the first step starts every row from the zero
 * state, and ignores parent). */
lv_status lv_lm_search_step(lv_lm_search *s, int n, const int32_t *step_ids, const int32_t *parent, float *log_probs);
void lv_lm_search_end(lv_lm_search *s);

#endif
