/* Attention layers of Lingvo's lingvo/core/attention.py, time-major: AdditiveAttention
 * (Bahdanau), DotProductAttention (Luong, with per_dim_scale) and MultiHeadedAttention
 * (query/source/ctx projections, an inner attention per head, ctx_post_proj).
 *
 * Lingvo's split is kept: PackSource projects the source once per sequence,
 * ComputeContextVector attends from one query per step. A packed source lives in the
 * graph's arena (valid until the graph resets); it belongs to the layer that packed it.
 *
 * MultiHeadedAttention over a DotProductAttention inner also has a whole-sequence path
 * (lv_mha_attend: queries [T, B, D] at once; Transformer self-attention) that runs all
 * heads with one batched matmul for the logits and one for the context, and a masked
 * softmax (padded source positions get probability 0; a fully padded row gives zeros,
 * where Lingvo's large-negative-logit softmax would give a uniform row). The per-step
 * path of that combination is the same code with T = 1 (or T = the beam multiplier).
 *
 * Generic fprop (all three classes): "source_vecs" [S, B, Ds], optional
 * "source_contexts" [S, B, C] (default: source_vecs), optional "source_paddings" [S, B]
 * (1.0 = padded), "query" [Bq, Dq] with Bq a multiple n of B (Lingvo's beam layout:
 * query row i attends source batch i % B) -> "ctx" [Bq, context], "probs" [Bq, S];
 * MultiHeadedAttention (dot-product heads) also takes "query" [T, B, Dq] -> "ctx"
 * [T, B, context], "probs" [T, B, S]. */
#ifndef LV_LAYERS_ATTENTION_H
#define LV_LAYERS_ATTENTION_H

#include "layers/layer.h"
#include "layers/qdomain.h"

typedef struct lv_attention lv_attention;

/* A packed source (Lingvo's PackSource NestedMap); layouts depend on the class:
 *   Additive:    vecs [S, B, H] (source . source_var), ctxs [B, S, C], pad [B, S]
 *   DotProduct:  vecs [B, S, D], ctxs [B, S, C], pad [B, S]
 *   MHA (dot):   vecs [B*N, S, d] keys per head, ctxs [B*N, S, dv], pad [B, 1, 1, S]
 *   MHA (other): inner's packing of batch B*N (row b*N + n is head n of sequence b). */
typedef struct lv_atten_packed {
  int64_t src_len, batch; /* S, B */
  lv_tensor *vecs, *ctxs;
  lv_tensor *pad;         /* NULL: no padding */
} lv_atten_packed;

struct lv_attention {
  lv_layer base;
  int64_t source_dim, query_dim, context_dim; /* context_dim: width of ctx out */
  float atten_dropout_prob;
  bool (*pack)(lv_attention *a, lv_graph *g, lv_tensor *vecs, lv_tensor *ctxs, lv_tensor *pads,
               lv_atten_packed *out);
  bool (*context)(lv_attention *a, lv_graph *g, const lv_atten_packed *src, lv_tensor *query, lv_tensor **ctx,
                  lv_tensor **probs);
  /* p.qdomain: default, softmax, fullyconnected (MultiHeadedAttention: atten_context too).
   * Quantized, the probabilities go through QRAct SOFTMAX (domain "softmax", as Lingvo's
   * fns.qsoftmax in _PaddedSoftmax; a multi-headed attention's through its inner
   * attention's, and the heads' mean it returns through its own), and a multi-headed attention's projections through QWeight and QActs
   * "<proj>_matmul" / "<proj>_add" (source_proj, query_proj, ctx_pre_proj; ctx_post_proj
   * in domain "atten_context"), its per-dim scale applied after the query projection
   * instead of folded into it. The "logits" act (domain "fullyconnected") has its
   * variables; Lingvo uses it only in eval, on the very negative logits it gives padded
   * positions, which lingvoc's masked softmax does not have (padded positions get 0). */
  lv_qlayer q;
};

/* The attention behind a layer of class AdditiveAttention, DotProductAttention or
 * MultiHeadedAttention; NULL for any other layer. */
lv_attention *lv_attention_of(lv_layer *l);
/* PackSource: source_vecs [S, B, source_dim], source_contexts [S, B, C] (NULL: the
 * vecs), source_paddings [S, B] (NULL: none). False (graph error naming the layer) on
 * bad shapes. */
bool lv_attention_pack_source(lv_attention *a, lv_graph *g, lv_tensor *source_vecs, lv_tensor *source_contexts,
                              lv_tensor *source_paddings, lv_atten_packed *out);
/* ComputeContextVector: query [Bq, query_dim] (Bq = n * B) -> *ctx [Bq, context_dim],
 * *probs [Bq, S] (probs may be NULL when not wanted). */
bool lv_attention_compute_context(lv_attention *a, lv_graph *g, const lv_atten_packed *src, lv_tensor *query,
                                  lv_tensor **ctx, lv_tensor **probs);

typedef struct lv_additive_attention {
  lv_attention a;
  int64_t hidden_dim;
  lv_var *source_var, *query_var, *hidden_var; /* [Ds, H], [Dq, H], [H] */
} lv_additive_attention;

typedef struct lv_dot_product_attention {
  lv_attention a;
  lv_var *per_dim_scale; /* [D], init 0; NULL when use_dim_scale is False */
} lv_dot_product_attention;

typedef struct lv_multi_headed_attention {
  lv_attention a;
  int64_t hidden_dim, num_heads, head_dim;
  bool use_source_vec_as_attention_value, enable_source_proj, enable_query_proj, enable_ctx_pre_proj,
      enable_ctx_post_proj;
  lv_params *inner_p; /* owned copy of inner_atten_params, as set for the inner */
  lv_attention *inner;
  bool inner_is_dot;  /* the fused path */
  lv_var *query_proj, *query_proj_b, *source_proj, *source_proj_b, *ctx_proj, *ctx_proj_b, *ctx_post_proj,
      *ctx_post_proj_b; /* _b NULL when use_bias is False */
} lv_multi_headed_attention;

lv_params *lv_additive_attention_params(void);
lv_params *lv_dot_product_attention_params(void);
lv_params *lv_multi_headed_attention_params(void);

/* Whole-sequence / fused multi-head path (inner DotProductAttention only). */
/* Projects a source: keys = source_vecs . source_proj (+b) [S, B, H], values =
 * the keys (use_source_vec_as_attention_value), or source_contexts (. ctx_proj + b with
 * enable_ctx_pre_proj) [S, B, C]. */
bool lv_mha_project_source(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *source_vecs,
                           lv_tensor *source_contexts, lv_tensor **keys, lv_tensor **values);
/* Splits projected keys [S, B, H] / values [S, B, C] into heads: a packed source. */
bool lv_mha_pack_projected(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *keys, lv_tensor *values,
                           lv_tensor *source_paddings, lv_atten_packed *out);
/* query [T, B, query_dim] -> *ctx [T, B, out] (after ctx_post_proj when enabled) and,
 * when probs is not NULL, the head-averaged *probs [T, B, S]. causal: query t sees
 * source positions <= t only (needs T == S). */
bool lv_mha_attend(lv_multi_headed_attention *m, lv_graph *g, const lv_atten_packed *src, lv_tensor *query,
                   bool causal, lv_tensor **ctx, lv_tensor **probs);

/* Whether lv_mha_attend_cached computes what lv_mha_attend would for a decoding step:
 * an inner DotProductAttention, no quantization domain, a graph that does not train. */
bool lv_mha_can_attend_cached(const lv_multi_headed_attention *m, const lv_graph *g);
/* One decoding step over time-major key / value caches (lv_op_cached_attention): query
 * [B, query_dim], key_buf [cap, B, H] and value_buf [cap, B, C] holding t steps (rows
 * of anc's ancestors, or in order with anc NULL) -> *ctx [B, out] after ctx_post_proj:
 * lv_mha_attend's context without packing the caches into heads. */
bool lv_mha_attend_cached(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *query, lv_tensor *key_buf,
                          lv_tensor *value_buf, int64_t t, lv_tensor *anc, lv_tensor **ctx);

/* x [..., K] . w [K, H] + b [H] (b may be NULL), failing the graph naming layer l when
 * x's last dim is not K. With a bias it is one GEMM [x, 1] . [w; b]: the bias costs a
 * copy of x (K wide) instead of an add over the output (H wide), and its gradient comes
 * out of the weight GEMM rather than a row reduction. The copy lives only while a GEMM
 * runs (lv_op_matmul_ones_col): backward keeps x and builds it again. */
lv_tensor *lv_atten_affine(const lv_layer *l, lv_graph *g, lv_tensor *x, lv_var *w, lv_var *b);

/* Softmax over the last axis ignoring positions where pad (broadcast to logits) is
 * > 0.5; all-padded rows give zeros. pad NULL: plain softmax. */
lv_tensor *lv_atten_masked_softmax(lv_graph *g, lv_tensor *logits, lv_tensor *pad);

#endif
