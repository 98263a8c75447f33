/* Transformer layers of Lingvo's lingvo/core/layers_with_attention.py, time-major
 * ([T, B, D], paddings [T, B], 1.0 = padded), as Lingvo's MT models use them:
 *
 * TransformerAttentionLayer: with pre_layer_norm (default) and add_unnormalized_input
 *   False (default), out = LN(x) + dropout(MHA(LN(x))) — the residual adds the
 *   *normalized* input. Children `atten_ln` (LayerNorm from ln_tpl) and `multihead_atten`
 *   (MultiHeadedAttention from atten_tpl: no value projection, ctx_post_proj to
 *   source_dim). is_masked: causal self-attention (mask_type "future" only).
 * TransformerFeedForwardLayer: out = x + residual_weight * dropout(fc1(dropout_relu(
 *   act(fc0(LN(x)))))), where fc0/fc1 are the FeedForwardNet `fflayer`'s projections
 *   `fflayer_0` (w, b; activation) and `fflayer_1` (w, b; none), each zeroed at padded
 *   positions as Lingvo's ProjectionLayer does; LayerNorm child `fflayer_ln`.
 * TransformerLayer: `multihead_self_atten` (TransformerAttentionLayer, is_masked =
 *   mask_self_atten), with has_aux_atten the encoder attention `multihead_atten` on the
 *   aux (encoder) vectors, then `tr_fflayer`; optional `tr_post_layer_norm`. is_decoder
 *   sets has_aux_atten and mask_self_atten, as Lingvo does.
 *
 * Incremental decoding (ExtendStep, for beam search): the self-attention keeps a cache of
 * the projected keys [t, B, H] and values [t, B, C] of the steps so far; a step appends
 * its own and attends over them, so running t = 0..T-1 reproduces the causal fprop.
 * The encoder source of the aux attention is packed (projected) once per sequence; a
 * step's queries may be n * B rows (beam search, row i attends source batch i % B).
 *
 * Generic fprop keys: TransformerAttentionLayer "act" [T, B, D] and "paddings" [T, B]
 * (self-attention) or "source_vecs" [S, B, D] + "source_paddings" [S, B] (attention to
 * a source) -> "act", "probs"; TransformerFeedForwardLayer "act", optional "paddings" ->
 * "act"; TransformerLayer "act", "paddings", and with has_aux_atten "aux_vecs",
 * "aux_paddings" -> "act", "probs". */
#ifndef LV_LAYERS_TRANSFORMER_H
#define LV_LAYERS_TRANSFORMER_H

#include "layers/attention.h"
#include "layers/layer_norm.h"
#include "layers/projection.h"

/* The self-attention cache of one TransformerAttentionLayer; start zeroed (t = 0).
 * Without buffers the tensors live in the graph's arena and every step makes new ones
 * (a search then holds O(t^2) memory). With key_buf / value_buf (caller-owned tensors of
 * the graph's device, [cap, B, H] and [cap, B, C], cap >= the steps to run) ExtendStep
 * writes the step's key and value into row t and key / value are views of the first
 * t + 1 rows (key_view / value_view), so the graph keeps nothing of the cache and the
 * caller may rewind it between steps (lv_graph_rewind). */
typedef struct lv_tr_cache {
  lv_tensor *key;   /* [t, B, H] projected keys of the steps so far */
  lv_tensor *value; /* [t, B, C] values */
  lv_tensor *key_buf, *value_buf;
  lv_tensor key_view, value_view;
  /* With buffers: NULL when row b of step s is row s * B + b of the buffers, else int32
   * [(t + 1) * B] on the graph's device: the row that holds step s of row b (a search's
   * ancestors; step t, the one ExtendStep writes, in order), so that a beam's reorder
   * moves no cache rows (lv_op_cached_attention reads through it; key / value are then
   * in the buffers' order, not the rows'). */
  lv_tensor *anc;
} lv_tr_cache;

/* Points key / value at the first t rows of key_buf / value_buf (t = 0: empty cache). */
void lv_tr_cache_view(lv_tr_cache *c, int64_t t);

/* The self-attention caches of a stack of num_layers layers over the steps of a search
 * (beam or greedy), kept outside the graph so that the graph can be rewound to a mark
 * before each step: per layer key and value buffers [cap, rows, .] on the graph's device,
 * two pairs (a step's reorder by parent writes the other pair), doubled when full. A
 * search then holds one step of graph memory plus these buffers: O(steps * rows * dims),
 * not O(steps^2 * ...). Use: step 0 runs on the zeroed caches (cache[i] empty) and is
 * followed by lv_tr_step_caches_keep_first; every later step t is preceded (after the
 * rewind) by lv_tr_step_caches_prepare. Errors name `who`. */
typedef struct lv_tr_step_caches {
  lv_graph *g;
  const char *who;
  int num_layers;
  lv_tr_cache *cache; /* [num_layers]: what the layers' extend_step reads and extends */
  lv_tensor **bufs;   /* [num_layers * 4]: pair p of layer i at 4 * i + 2 * p (key, value) */
  int cur;            /* the pair holding the caches */
  int64_t cap;        /* steps the buffers hold */
  int32_t *idx;       /* host scratch for the reorder's row ids */
  int64_t idx_cap;
  /* The rows' ancestors (lv_tr_cache.anc) on the host: anc [t, rows] while anc_on, and
   * the next step's being made in anc_next; both anc_cap ids. */
  int32_t *anc, *anc_next;
  int64_t anc_cap;
  bool anc_on;
} lv_tr_step_caches;

void lv_tr_step_caches_init(lv_tr_step_caches *c, lv_graph *g, int num_layers, const char *who);
void lv_tr_step_caches_free(lv_tr_step_caches *c);
/* After step 0: its caches [1, n, .] (graph tensors) moved into buffers. */
lv_status lv_tr_step_caches_keep_first(lv_tr_step_caches *c);
/* Before step t > 0: every layer's cache [t, rows, .] reordered by parent [n] (host; rows
 * of the previous step; NULL: kept as is, n == rows) into buffers that hold at least
 * t + 1 steps. While the row count stays (n == rows) and the buffers hold the step, the
 * reorder moves no rows: it composes the ancestors (lv_tr_cache.anc) instead; a growth
 * or a new row count gathers the rows into order. The graph memory this takes is the
 * step's (rewound before the next). */
lv_status lv_tr_step_caches_prepare(lv_tr_step_caches *c, int64_t t, int64_t rows, int n, const int32_t *parent);

typedef struct lv_tr_atten_layer {
  lv_layer base;
  int64_t source_dim;
  bool is_masked, add_unnormalized_input, pre_layer_norm;
  float residual_dropout_prob;
  lv_params *atten_p, *ln_p; /* owned child params */
  lv_multi_headed_attention *atten;
  lv_layer_norm_layer *ln;
} lv_tr_atten_layer;

typedef struct lv_tr_ff_layer {
  lv_layer base;
  int64_t input_dim, hidden_dim;
  float residual_weight, residual_dropout_prob, relu_dropout_prob;
  bool pre_layer_norm, add_skip_connection;
  lv_params *ln_p, *fc_p[2];
  lv_layer_norm_layer *ln;
  lv_projection_layer fc[2]; /* fflayer/fflayer_0, fflayer/fflayer_1 */
} lv_tr_ff_layer;

typedef struct lv_transformer_layer {
  lv_layer base;
  int64_t source_dim;
  bool has_aux_atten, mask_self_atten;
  bool remat; /* Lingvo's ConformerLayer param: lv_graph_remat around the layer in training */
  lv_params *self_p, *aux_p, *ff_p, *post_ln_p;
  lv_tr_atten_layer *self_atten, *atten; /* atten NULL without aux attention */
  lv_tr_ff_layer *fflayer;
  lv_layer_norm_layer *post_ln;          /* NULL unless tr_post_ln_tpl */
} lv_transformer_layer;

lv_params *lv_tr_atten_layer_params(void);
lv_params *lv_tr_ff_layer_params(void);
lv_params *lv_transformer_layer_params(void);

/* query [T, B, D]; source_vecs [S, B, D] or NULL for self-attention (keys = values =
 * LN(query)); source_paddings [S, B] (for self-attention the query's paddings; NULL:
 * none). -> *out [T, B, D], *probs [T, B, S] (head average; probs may be NULL). */
bool lv_tr_atten_layer_fprop(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *query, lv_tensor *source_paddings,
                             lv_tensor *source_vecs, lv_tensor **out, lv_tensor **probs);
/* Encoder attention in two parts: the source packed once, then queries [T, B, D]
 * (T = 1 per decoding step; then also [1, n * B, D] for n hypotheses per sequence)
 * attend to it. */
bool lv_tr_atten_layer_pack_source(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *source_vecs,
                                   lv_tensor *source_paddings, lv_atten_packed *packed);
bool lv_tr_atten_layer_fprop_packed(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *query,
                                    const lv_atten_packed *packed, lv_tensor **out, lv_tensor **probs);
/* One causal self-attention step: query [B, D] -> *out [B, D], *probs [B, t+1] (may be
 * NULL); cache grows by one step. */
bool lv_tr_atten_layer_extend_step(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *query, lv_tr_cache *cache,
                                   lv_tensor **out, lv_tensor **probs);

/* x [..., input_dim] with paddings [...] (x's leading dims; NULL: none) -> [..., input_dim]. */
lv_tensor *lv_tr_ff_layer_fprop(lv_tr_ff_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings);

/* x [T, B, D], paddings [T, B]; aux_vecs [S, B, D] and aux_paddings [S, B] with
 * has_aux_atten (else NULL). *out [T, B, D]; *probs (may be NULL) [T, B, S] of the aux
 * attention, or [T, B, T] of the self-attention without one. With remat (and probs
 * NULL) the layer runs under lv_graph_remat: in training its activations are made again
 * in backward instead of kept. */
bool lv_transformer_layer_fprop(lv_transformer_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings,
                                lv_tensor *aux_vecs, lv_tensor *aux_paddings, lv_tensor **out, lv_tensor **probs);
/* Packs the encoder output for the aux attention (once per sequence). */
bool lv_transformer_layer_pack_aux(lv_transformer_layer *l, lv_graph *g, lv_tensor *aux_vecs,
                                   lv_tensor *aux_paddings, lv_atten_packed *packed);
/* One decoding step (needs mask_self_atten): x [Bq, D] at step t = the cache's length;
 * aux packed by lv_transformer_layer_pack_aux (NULL without aux attention) for source
 * batch B with Bq = n * B (beam search) -> *out [Bq, D]. */
bool lv_transformer_layer_extend_step(lv_transformer_layer *l, lv_graph *g, lv_tensor *x, lv_tr_cache *cache,
                                      const lv_atten_packed *aux, lv_tensor **out);
/* The same, also giving the head-averaged aux (encoder) attention probs *aux_probs [Bq, S]
 * (NULL without aux attention). */
bool lv_transformer_layer_extend_step_probs(lv_transformer_layer *l, lv_graph *g, lv_tensor *x, lv_tr_cache *cache,
                                            const lv_atten_packed *aux, lv_tensor **out, lv_tensor **aux_probs);

#endif
