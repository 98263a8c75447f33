#include "layers/attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const lv_layer_class lv_additive_attention_class, lv_dot_product_attention_class,
    lv_multi_headed_attention_class;

/* ---- helpers ---- */

static bool fail_shape(const lv_layer *l, lv_graph *g, const char *what, const lv_tensor *t, const char *want) {
  char s[96];
  lv_graph_fail(g, "%s: %s has shape %s, expected %s", l->scope, what, t ? lv_shape_str(&t->shape, s, sizeof s) : "(none)",
                want);
  return false;
}

lv_tensor *lv_atten_masked_softmax(lv_graph *g, lv_tensor *logits, lv_tensor *pad) {
  return pad ? lv_op_masked_softmax(g, logits, pad) : lv_op_softmax(g, logits);
}

/* [a, b, X] -> [b, a, X]; a plain reshape when a or b is 1. */
static lv_tensor *swap01(lv_graph *g, lv_tensor *x) {
  if (!x) return NULL;
  lv_shape s = x->shape;
  int64_t t = s.d[0];
  s.d[0] = s.d[1];
  s.d[1] = t;
  if (s.d[0] == 1 || s.d[1] == 1) return lv_op_reshape(g, x, s);
  int perm[LV_MAX_RANK];
  for (int i = 0; i < s.rank; i++) perm[i] = i;
  perm[0] = 1, perm[1] = 0;
  return lv_op_transpose(g, x, perm);
}

static lv_tensor *atten_dropout(lv_attention *a, lv_graph *g, lv_tensor *probs) {
  if (!probs || a->atten_dropout_prob <= 0.0f || !lv_graph_is_training(g)) return probs;
  return lv_op_dropout(g, probs, 1.0f - a->atten_dropout_prob, a->base.seed, lv_graph_next_stream(g));
}

static lv_params *base_atten_params(const char *cls) {
  lv_params *p = lv_layer_base_params(cls);
  const lv_qdomain_name qd[] = {
      {"softmax", "QDomain for the internal softmax."},
      {"fullyconnected", "Fully connected layers are fed into activation functions which have known input ranges"},
      {"atten_context", "Quantization domain for attention context."},
  };
  lv_qdomain_define_params(p, qd, strcmp(cls, "MultiHeadedAttention") ? 2 : 3);
  lv_params_define_float(p, "atten_dropout_prob", 0.0, "Probability at which we apply dropout to the attention "
                         "weights.");
  lv_params_define_bool(p, "atten_dropout_deterministic", false, "Whether to dropout in a fully deterministic way "
                        "(lingvoc's dropout is always deterministic given the seed).");
  lv_params_define_bool(p, "packed_input", false, "If True, each training example may pack multiple sequences "
                        "(not supported by lingvoc: must stay False).");
  return p;
}

static lv_status base_atten_create(lv_attention *a, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  LV_TRY(lv_layer_setup(&a->base, p, parent_scope, vs));
  a->source_dim = lv_params_int(p, "source_dim");
  a->query_dim = lv_params_int(p, "query_dim");
  a->atten_dropout_prob = (float)lv_params_float(p, "atten_dropout_prob");
  if (lv_params_bool(p, "packed_input"))
    return lv_status_make(LV_ERR_INVALID, "%s: packed_input=True is not supported", a->base.scope);
  if (!(a->atten_dropout_prob >= 0 && a->atten_dropout_prob < 1)) /* NaN too */
    return lv_status_make(LV_ERR_INVALID, "%s: atten_dropout_prob must be in [0, 1), got %g", a->base.scope,
                          a->atten_dropout_prob);
  if (a->source_dim <= 0 || a->query_dim <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: source_dim and query_dim must be > 0, got %lld and %lld",
                          a->base.scope, (long long)a->source_dim, (long long)a->query_dim);
  LV_TRY(lv_qlayer_setup(&a->q, &a->base));
  return lv_qlayer_track(&a->q, "fullyconnected", "logits");
}

/* fns.qsoftmax(logits, qdomain='softmax') of the probabilities p. */
static lv_tensor *q_softmax(lv_attention *a, lv_graph *g, lv_tensor *p) {
  return lv_qlayer_on(&a->q) ? lv_qlayer_ract(&a->q, g, "softmax", p, LV_QDIST_SOFTMAX) : p;
}

lv_attention *lv_attention_of(lv_layer *l) {
  if (l && (l->cls == &lv_additive_attention_class || l->cls == &lv_dot_product_attention_class ||
            l->cls == &lv_multi_headed_attention_class))
    return (lv_attention *)l;
  return NULL;
}

bool lv_attention_pack_source(lv_attention *a, lv_graph *g, lv_tensor *vecs, lv_tensor *ctxs, lv_tensor *pads,
                              lv_atten_packed *out) {
  memset(out, 0, sizeof *out);
  if (!vecs) return false;
  if (!ctxs) ctxs = vecs;
  if (vecs->shape.rank != 3 || vecs->shape.d[2] != a->source_dim) {
    char want[64];
    snprintf(want, sizeof want, "[S, B, %lld]", (long long)a->source_dim);
    return fail_shape(&a->base, g, "source_vecs", vecs, want);
  }
  int64_t S = vecs->shape.d[0], B = vecs->shape.d[1];
  if (ctxs->shape.rank != 3 || ctxs->shape.d[0] != S || ctxs->shape.d[1] != B)
    return fail_shape(&a->base, g, "source_contexts", ctxs, "[S, B, C] with S, B of source_vecs");
  if (pads && (pads->shape.rank != 2 || pads->shape.d[0] != S || pads->shape.d[1] != B))
    return fail_shape(&a->base, g, "source_paddings", pads, "[S, B] with S, B of source_vecs");
  if (!a->pack(a, g, vecs, ctxs, pads, out)) return false;
  out->src_len = S, out->batch = B;
  return true;
}

bool lv_attention_compute_context(lv_attention *a, lv_graph *g, const lv_atten_packed *src, lv_tensor *query,
                                  lv_tensor **ctx, lv_tensor **probs) {
  *ctx = NULL;
  if (probs) *probs = NULL;
  if (!query || !src->vecs) {
    lv_graph_fail(g, "%s: no query or no packed source", a->base.scope);
    return false;
  }
  if (query->shape.rank != 2 || query->shape.d[1] != a->query_dim || query->shape.d[0] % src->batch != 0) {
    char want[96];
    snprintf(want, sizeof want, "[n * %lld, %lld]", (long long)src->batch, (long long)a->query_dim);
    return fail_shape(&a->base, g, "query", query, want);
  }
  return a->context(a, g, src, query, ctx, probs);
}

/* probs [n, B, S] and ctxs [B, S, C] -> ctx [n*B, C] (probs' batched matmul per b). */
static lv_tensor *weighted_contexts(lv_graph *g, lv_tensor *probs, lv_tensor *ctxs) {
  int64_t n = probs->shape.d[0], B = probs->shape.d[1];
  lv_tensor *c = lv_op_batch_matmul(g, swap01(g, probs), ctxs, false, false); /* [B, n, C] */
  c = swap01(g, c);
  return c ? lv_op_reshape(g, c, lv_shape2(n * B, c->shape.d[2])) : NULL;
}

/* ---- AdditiveAttention ---- */

lv_params *lv_additive_attention_params(void) {
  lv_params *p = base_atten_params("AdditiveAttention");
  lv_params_define_int(p, "source_dim", 0, "Number of source nodes.");
  lv_params_define_int(p, "query_dim", 0, "Number of query nodes.");
  lv_params_define_int(p, "hidden_dim", 0, "Number of hidden nodes.");
  lv_params_define_bool(p, "same_batch_size", false, "True iff the source and target sequence has the same batch "
                        "size (lingvoc handles both cases the same way).");
  LV_ASSERT(lv_params_set_string(p, "params_init.method", "gaussian_sqrt_dim") == NULL);
  LV_ASSERT(lv_params_set_float(p, "params_init.scale", 1.0) == NULL);
  return p;
}

static bool additive_pack(lv_attention *a, lv_graph *g, lv_tensor *vecs, lv_tensor *ctxs, lv_tensor *pads,
                          lv_atten_packed *out) {
  lv_additive_attention *l = (lv_additive_attention *)a;
  out->vecs = lv_op_matmul(g, vecs, &l->source_var->value, false, false);
  out->ctxs = swap01(g, ctxs);
  out->pad = pads ? swap01(g, pads) : NULL;
  return out->vecs && out->ctxs && (!pads || out->pad);
}

static bool additive_context(lv_attention *a, lv_graph *g, const lv_atten_packed *src, lv_tensor *query,
                             lv_tensor **ctx, lv_tensor **probs) {
  lv_additive_attention *l = (lv_additive_attention *)a;
  int64_t S = src->src_len, B = src->batch, H = l->hidden_dim, Bq = query->shape.d[0], n = Bq / B;
  /* AddPerStepVN(hidden_var), AddPerStepVN(query_var): afresh at every call. */
  lv_tensor *hidden_w = lv_layer_step_weight(g, l->hidden_var);
  lv_tensor *q = lv_op_matmul(g, query, lv_layer_step_weight(g, l->query_var), false, false); /* [Bq, H] */
  lv_tensor *sum = lv_op_add(g, lv_op_reshape(g, src->vecs, lv_shape4(S, 1, B, H)),
                             q ? lv_op_reshape(g, q, lv_shape4(1, n, B, H)) : NULL);
  lv_tensor *h = lv_op_activation(g, sum, LV_ACT_TANH); /* [S, n, B, H] */
  lv_tensor *v = lv_op_reshape(g, hidden_w, lv_shape2(H, 1));
  lv_tensor *logits = lv_op_matmul(g, h, v, false, false); /* [S, n, B, 1] */
  logits = logits ? lv_op_reshape(g, logits, lv_shape2(S, n * B)) : NULL;
  logits = swap01(g, logits);                                          /* [n*B, S] */
  logits = logits ? lv_op_reshape(g, logits, lv_shape3(n, B, S)) : NULL;
  lv_tensor *p = q_softmax(a, g, lv_atten_masked_softmax(g, logits, src->pad)); /* [n, B, S] */
  if (probs) *probs = p ? lv_op_reshape(g, p, lv_shape2(Bq, S)) : NULL;
  p = atten_dropout(a, g, p);
  *ctx = p ? weighted_contexts(g, p, src->ctxs) : NULL;
  return *ctx && (!probs || *probs);
}

static lv_status additive_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_additive_attention *l = (lv_additive_attention *)base;
  LV_TRY(base_atten_create(&l->a, p, parent_scope, vs));
  l->hidden_dim = lv_params_int(p, "hidden_dim");
  if (l->hidden_dim <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: hidden_dim must be > 0, got %lld", base->scope,
                          (long long)l->hidden_dim);
  l->a.context_dim = -1; /* that of the source contexts */
  l->a.pack = additive_pack;
  l->a.context = additive_context;
  LV_TRY(lv_layer_add_var(base, "source_var", lv_shape2(l->a.source_dim, l->hidden_dim), NULL, true, &l->source_var));
  LV_TRY(lv_layer_add_var(base, "query_var", lv_shape2(l->a.query_dim, l->hidden_dim), NULL, true, &l->query_var));
  LV_TRY(lv_layer_add_var(base, "hidden_var", lv_shape1(l->hidden_dim), NULL, true, &l->hidden_var));
  /* AddGlobalVN: all three; AddVN(per_step=True) in ComputeContextVectorWithSource:
   * hidden_var and query_var. */
  lv_layer_vn_target(base, l->source_var, false);
  lv_layer_vn_target(base, l->query_var, true);
  lv_layer_vn_target(base, l->hidden_var, true);
  return NULL;
}

/* ---- DotProductAttention ---- */

lv_params *lv_dot_product_attention_params(void) {
  lv_params *p = base_atten_params("DotProductAttention");
  lv_params_define_int(p, "source_dim", 0, "Number of source nodes.");
  lv_params_define_int(p, "query_dim", 0, "Number of query nodes.");
  lv_params_define_int(p, "hidden_dim", 0, "Number of hidden nodes.");
  lv_params_define_bool(p, "use_dim_scale", true, "Whether or not to use per_dim_scale to scale the individual "
                        "dims when calculating attention probabilities.");
  lv_params_define_none(p, "atten_logit_cap", LV_PV_FLOAT, "Clip softmax logits (not supported by lingvoc: must "
                        "stay None).");
  return p;
}

/* q [..., D] * softplus(per_dim_scale) / softplus(0) / sqrt(D) (Lingvo's ScaleFn and
 * logit_scale, folded into the query). */
static lv_tensor *dot_scale_query(lv_dot_product_attention *l, lv_graph *g, lv_tensor *q, int64_t d) {
  float s = 1.0f / sqrtf((float)d);
  if (!l->per_dim_scale) return lv_op_scale(g, q, s);
  lv_tensor *sc = lv_op_scale(g, lv_op_activation(g, &l->per_dim_scale->value, LV_ACT_SOFTPLUS),
                              (float)(1.0 / log(2.0)) * s);
  return lv_op_mul(g, q, sc);
}

static bool dot_pack(lv_attention *a, lv_graph *g, lv_tensor *vecs, lv_tensor *ctxs, lv_tensor *pads,
                     lv_atten_packed *out) {
  (void)a;
  out->vecs = swap01(g, vecs);
  out->ctxs = swap01(g, ctxs);
  out->pad = pads ? swap01(g, pads) : NULL;
  return out->vecs && out->ctxs && (!pads || out->pad);
}

static bool dot_context(lv_attention *a, lv_graph *g, const lv_atten_packed *src, lv_tensor *query,
                        lv_tensor **ctx, lv_tensor **probs) {
  lv_dot_product_attention *l = (lv_dot_product_attention *)a;
  int64_t S = src->src_len, B = src->batch, D = a->query_dim, Bq = query->shape.d[0], n = Bq / B;
  lv_tensor *q = dot_scale_query(l, g, query, D);
  q = q ? swap01(g, lv_op_reshape(g, q, lv_shape3(n, B, D))) : NULL;         /* [B, n, D] */
  lv_tensor *logits = lv_op_batch_matmul(g, q, src->vecs, false, true);     /* [B, n, S] */
  lv_tensor *pad = src->pad ? lv_op_reshape(g, src->pad, lv_shape3(B, 1, S)) : NULL;
  lv_tensor *p = q_softmax(a, g, lv_atten_masked_softmax(g, logits, pad));
  p = swap01(g, p); /* [n, B, S] */
  if (probs) *probs = p ? lv_op_reshape(g, p, lv_shape2(Bq, S)) : NULL;
  p = atten_dropout(a, g, p);
  *ctx = p ? weighted_contexts(g, p, src->ctxs) : NULL;
  return *ctx && (!probs || *probs);
}

static lv_status dot_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_dot_product_attention *l = (lv_dot_product_attention *)base;
  LV_TRY(base_atten_create(&l->a, p, parent_scope, vs));
  int64_t h = lv_params_int(p, "hidden_dim");
  if (l->a.source_dim != l->a.query_dim || l->a.source_dim != h)
    return lv_status_make(LV_ERR_INVALID, "%s: DotProductAttention needs source_dim == query_dim == hidden_dim, "
                          "got %lld, %lld, %lld", base->scope, (long long)l->a.source_dim,
                          (long long)l->a.query_dim, (long long)h);
  if (lv_params_is_set(p, "atten_logit_cap"))
    return lv_status_make(LV_ERR_INVALID, "%s: atten_logit_cap is not supported; leave it None", base->scope);
  l->a.context_dim = -1;
  l->a.pack = dot_pack;
  l->a.context = dot_context;
  if (lv_params_bool(p, "use_dim_scale")) {
    lv_var_init zi = {LV_INIT_CONSTANT, 0.0};
    LV_TRY(lv_layer_add_var(base, "per_dim_scale", lv_shape1(h), &zi, true, &l->per_dim_scale));
  }
  return NULL;
}

/* ---- MultiHeadedAttention ---- */

lv_params *lv_multi_headed_attention_params(void) {
  lv_params *p = base_atten_params("MultiHeadedAttention");
  lv_params_define_int(p, "source_dim", 0, "Number of source nodes.");
  lv_params_define_int(p, "query_dim", 0, "Number of query nodes.");
  lv_params_define_int(p, "context_dim", 0, "Number of context nodes.");
  lv_params_define_int(p, "hidden_dim", 0, "Number of hidden nodes.");
  lv_params_define_int(p, "num_attention_heads", 2, "Num of attention heads.");
  lv_params_define_bool(p, "use_source_vec_as_attention_value", true, "Whether or not to use source_vec as the "
                        "attention value as well. If True, we expect source_vec and source_contexts are the same.");
  lv_params_define_bool(p, "enable_source_proj", true, "If False, source side linear projection is disabled.");
  lv_params_define_bool(p, "enable_query_proj", true, "If False, query side linear projection is disabled.");
  lv_params_define_params(p, "inner_atten_params", lv_dot_product_attention_params(),
                          "Params for underlying attention mechanism.");
  lv_params_define_bool(p, "enable_ctx_pre_proj", false, "If True, context is pre-projected before processing into "
                        "hidden_dim.");
  lv_params_define_bool(p, "enable_ctx_post_proj", false, "If True, computed context is post projected into "
                        "ctx_post_proj_dim.");
  lv_params_define_int(p, "ctx_post_proj_dim", 0, "Number of post projection nodes.");
  lv_params_define_int(p, "num_post_proj", 1, "Number of post projections (lingvoc supports 1).");
  lv_params_define_string(p, "proj_init", "default", "Initialization approach for projection layers: uniform: "
                          "Use uniform initialization. default: Use the default Xavier initialization.");
  lv_params_define_int(p, "attention_head_prob_index", -1, "If >= 0, return the probabilities of that head "
                       "instead of the average over heads.");
  lv_params_define_bool(p, "use_bias", true, "Whether to use bias for projection layer.");
  lv_params_define_bool(p, "enable_per_dim_scale", true, "Whether to use per_dim_scale in inner_atten.");
  LV_ASSERT(lv_params_set_float(p, "params_init.scale", 1.0) == NULL);
  return p;
}

/* x . w + b as one GEMM [x, 1] . [w; b] (see lv_atten_affine); w [K, H], b [H]. */
static lv_tensor *affine_t(const lv_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *w, lv_tensor *b) {
  if (!x || !w) return NULL;
  int64_t k = w->shape.d[0], h = w->shape.d[1];
  if (x->shape.d[x->shape.rank - 1] != k) {
    char s1[96];
    lv_graph_fail(g, "%s: input_dim is %lld but the input has shape %s", l->scope, (long long)k,
                  lv_shape_str(&x->shape, s1, sizeof s1));
    return NULL;
  }
  if (!b) return lv_op_matmul(g, x, w, false, false);
  /* Outside training b is added by the GEMM (a quantized w's kernel, or a float GEMM into
   * rows holding b): no [w; b] concat per call. */
  if (!lv_graph_is_training(g)) return lv_op_matmul_bias(g, x, w, b);
  lv_tensor *x2 = lv_op_reshape(g, x, lv_shape2(lv_tensor_numel(x) / k, k));
  lv_tensor *wb[2] = {w, lv_op_reshape(g, b, lv_shape2(1, h))};
  lv_tensor *y = lv_op_matmul_ones_col(g, x2, lv_op_concat(g, wb, 2, 0));
  lv_shape os = x->shape;
  os.d[os.rank - 1] = h;
  return y ? lv_op_reshape(g, y, os) : NULL;
}

lv_tensor *lv_atten_affine(const lv_layer *l, lv_graph *g, lv_tensor *x, lv_var *w, lv_var *b) {
  return affine_t(l, g, x, &w->value, b ? &b->value : NULL);
}

/* Quantized: Lingvo's QWeight(w), matmul, QAct("<name>_matmul"), qadd(QWeight(b),
 * "<name>_add") (the acts in domain "atten_context" for ctx_post_proj). */
static lv_tensor *mha_affine_q(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *x, lv_tensor *w, lv_tensor *b,
                               const char *name) {
  lv_qlayer *q = &m->a.q;
  char act[48];
  snprintf(act, sizeof act, "%s_matmul", name);
  lv_tensor *y = lv_qlayer_act(q, g, act, affine_t(&m->a.base, g, x, lv_qlayer_weight(q, g, "default", w), NULL));
  if (!b || !y) return y;
  snprintf(act, sizeof act, "%s_add", name);
  return lv_qlayer_act(q, g, act, lv_op_add(g, y, lv_qlayer_weight(q, g, "default", b)));
}

static lv_tensor *mha_affine(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *x, lv_var *w, lv_var *b,
                             const char *name) {
  if (lv_qlayer_on(&m->a.q)) return mha_affine_q(m, g, x, &w->value, b ? &b->value : NULL, name);
  return lv_atten_affine(&m->a.base, g, x, w, b);
}

bool lv_mha_project_source(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *vecs, lv_tensor *ctxs,
                           lv_tensor **keys, lv_tensor **values) {
  *keys = m->enable_source_proj ? mha_affine(m, g, vecs, m->source_proj, m->source_proj_b, "source_proj") : vecs;
  if (m->use_source_vec_as_attention_value) *values = *keys;
  else if (m->ctx_proj) *values = mha_affine(m, g, ctxs ? ctxs : vecs, m->ctx_proj, m->ctx_proj_b, "ctx_pre_proj");
  else *values = ctxs ? ctxs : vecs;
  return *keys && *values;
}

/* x [A, C, d] -> [C, A, d] as slices of the smaller side joined by a concat: both move
 * runs of d contiguous floats (block copies), where a general transpose moves single
 * elements; the heads of an attention are split and merged this way. */
static lv_tensor *swap_blocks(lv_graph *g, lv_tensor *x) {
  if (!x) return NULL;
  int64_t A = x->shape.d[0], C = x->shape.d[1], d = x->shape.d[2];
  if (A == 1 || C == 1) return lv_op_reshape(g, x, lv_shape3(C, A, d));
  bool by_a = A <= C; /* slice along A (contiguous), concat along axis 1 */
  int64_t n = by_a ? A : C;
  lv_tensor **parts = malloc(sizeof *parts * (size_t)n);
  if (!parts) {
    lv_graph_fail(g, "out of memory splitting attention heads");
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) {
    lv_tensor *sl = lv_op_slice(g, x, by_a ? 0 : 1, i, 1);
    parts[i] = sl ? lv_op_reshape(g, sl, by_a ? lv_shape3(C, 1, d) : lv_shape3(1, A, d)) : NULL;
  }
  lv_tensor *y = lv_op_concat(g, parts, (int)n, by_a ? 1 : 0);
  free(parts);
  return y;
}

/* [S, B, N*d] -> [B*N, S, d]. */
static lv_tensor *split_heads(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *x) {
  if (!x) return NULL;
  int64_t S = x->shape.d[0], B = x->shape.d[1], N = m->num_heads, d = x->shape.d[2] / N;
  return swap_blocks(g, lv_op_reshape(g, x, lv_shape3(S, B * N, d)));
}

bool lv_mha_pack_projected(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *keys, lv_tensor *values,
                           lv_tensor *pads, lv_atten_packed *out) {
  memset(out, 0, sizeof *out);
  if (!keys || !values) return false;
  int64_t S = keys->shape.d[0], B = keys->shape.d[1], N = m->num_heads;
  if (values->shape.d[2] % N) {
    char want[64];
    snprintf(want, sizeof want, "a last dim divisible by num_attention_heads=%lld", (long long)N);
    return fail_shape(&m->a.base, g, "source_contexts (attention values)", values, want);
  }
  out->src_len = S, out->batch = B;
  if (m->inner_is_dot) {
    out->vecs = split_heads(m, g, keys);
    out->ctxs = split_heads(m, g, values);
    out->pad = pads ? lv_op_reshape(g, swap01(g, pads), lv_shape4(B, 1, 1, S)) : NULL;
    return out->vecs && out->ctxs && (!pads || out->pad);
  }
  /* Another inner attention: its own packing of batch B*N, row b*N + n. */
  lv_tensor *k = lv_op_reshape(g, keys, lv_shape3(S, B * N, m->head_dim));
  lv_tensor *v = lv_op_reshape(g, values, lv_shape3(S, B * N, values->shape.d[2] / N));
  lv_tensor *p = NULL;
  if (pads) {
    lv_tensor *ones = lv_graph_fill(g, lv_shape3(1, 1, N), 1.0f);
    p = lv_op_mul(g, lv_op_reshape(g, pads, lv_shape3(S, B, 1)), ones);
    p = p ? lv_op_reshape(g, p, lv_shape2(S, B * N)) : NULL;
    if (!p) return false;
  }
  if (!lv_attention_pack_source(m->inner, g, k, v, p, out)) return false;
  out->src_len = S, out->batch = B; /* outer batch; the inner's is B*N */
  return true;
}

static bool mha_pack(lv_attention *a, lv_graph *g, lv_tensor *vecs, lv_tensor *ctxs, lv_tensor *pads,
                     lv_atten_packed *out) {
  lv_multi_headed_attention *m = (lv_multi_headed_attention *)a;
  lv_tensor *k, *v;
  if (!lv_mha_project_source(m, g, vecs, ctxs, &k, &v)) return false;
  return lv_mha_pack_projected(m, g, k, v, pads, out);
}

static lv_tensor *causal_pad(lv_graph *g, int64_t T) {
  float *h = malloc(sizeof(float) * (size_t)(T * T));
  if (!h) {
    lv_graph_fail(g, "out of memory for a [%lld, %lld] causal mask", (long long)T, (long long)T);
    return NULL;
  }
  for (int64_t i = 0; i < T; i++)
    for (int64_t j = 0; j < T; j++) h[i * T + j] = j > i ? 1.0f : 0.0f;
  lv_tensor *t = lv_graph_tensor(g, LV_F32, lv_shape4(1, 1, T, T));
  lv_status s = t ? lv_tensor_from_host(t, h) : NULL;
  free(h);
  if (s) {
    lv_graph_fail(g, "causal mask: %s", lv_status_msg(s));
    lv_status_free(s);
    return NULL;
  }
  return t;
}

/* The post-head part: ctx [.., N*dv] -> ctx_post_proj. */
static lv_tensor *mha_post(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *ctx) {
  if (!ctx || !m->enable_ctx_post_proj) return ctx;
  return mha_affine(m, g, ctx, m->ctx_post_proj, m->ctx_post_proj_b, "ctx_post_proj");
}

/* The per-dim scale of the inner DotProductAttention (softplus(per_dim_scale) /
 * softplus(0) / sqrt(d), [d]) tiled over the heads: [H]. */
static lv_tensor *mha_head_scale(lv_multi_headed_attention *m, lv_graph *g) {
  lv_dot_product_attention *dot = (lv_dot_product_attention *)m->inner;
  int64_t N = m->num_heads, d = m->head_dim;
  lv_tensor *one = lv_graph_fill(g, lv_shape2(N, 1), 1.0f);
  lv_tensor *s = dot_scale_query(dot, g, one, d); /* [N, d] or [N, 1] */
  if (s && s->shape.d[1] != d) s = lv_op_mul(g, s, lv_graph_fill(g, lv_shape2(1, d), 1.0f));
  return s ? lv_op_reshape(g, s, lv_shape1(N * d)) : NULL;
}

/* q [..., Dq] -> projected queries [..., H]; for a dot-product inner also scaled per
 * dim. The scale is folded into query_proj and its bias (q . (W * s) + b * s), so no
 * pass over the activations (and no reduction in backward) is spent on it. */
static lv_tensor *mha_project_query(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *q) {
  if (!m->inner_is_dot)
    return m->enable_query_proj ? mha_affine(m, g, q, m->query_proj, m->query_proj_b, "query_proj") : q;
  lv_tensor *sc = mha_head_scale(m, g);
  /* The projection, then the scale on the projected queries: quantized (Lingvo's order),
   * and outside training, where a quantized query_proj keeps its twin and a float one is
   * not scaled whole ([K, H]) at every decoding step. */
  if (lv_qlayer_on(&m->a.q) || !lv_graph_is_training(g) || !m->enable_query_proj) {
    lv_tensor *y = m->enable_query_proj ? mha_affine(m, g, q, m->query_proj, m->query_proj_b, "query_proj") : q;
    return lv_op_mul(g, y, sc);
  }
  lv_tensor *w = lv_op_mul(g, &m->query_proj->value, sc);
  lv_tensor *b = m->query_proj_b ? lv_op_mul(g, &m->query_proj_b->value, sc) : NULL;
  return affine_t(&m->a.base, g, q, w, b);
}

/* qp: projected, scaled queries [T, B, H] -> ctx [T, B, N*dv] (before post proj). */
static bool mha_attend_projected(lv_multi_headed_attention *m, lv_graph *g, const lv_atten_packed *src,
                                 lv_tensor *qp, bool causal, lv_tensor **ctx, lv_tensor **probs) {
  int64_t T = qp->shape.d[0], B = qp->shape.d[1], N = m->num_heads, d = m->head_dim, S = src->src_len;
  int64_t dv = src->ctxs->shape.d[2];
  lv_tensor *q = swap_blocks(g, lv_op_reshape(g, qp, lv_shape3(T, B * N, d))); /* [B*N, T, d] */
  lv_tensor *logits = lv_op_batch_matmul(g, q, src->vecs, false, true); /* [B*N, T, S] */
  logits = logits ? lv_op_reshape(g, logits, lv_shape4(B, N, T, S)) : NULL;
  lv_tensor *pad = src->pad;
  if (causal) {
    if (T != S) {
      lv_graph_fail(g, "%s: causal attention needs as many queries as source positions, got %lld and %lld",
                    m->a.base.scope, (long long)T, (long long)S);
      return false;
    }
    lv_tensor *c = causal_pad(g, T);
    pad = pad ? lv_op_add(g, pad, c) : c;
  }
  lv_tensor *p = q_softmax(m->inner, g, lv_atten_masked_softmax(g, logits, pad)); /* [B, N, T, S] */
  if (probs) {
    static const int to_tbs[3] = {1, 0, 2};
    /* The heads' mean, quantized again by the layer's own softmax domain (Lingvo's QRAct). */
    lv_tensor *mean = q_softmax(&m->a, g, lv_op_reduce_mean(g, p, 1, false)); /* [B, T, S] */
    *probs = lv_op_transpose(g, mean, to_tbs);
  }
  p = atten_dropout(m->inner, g, p);
  p = p ? lv_op_reshape(g, p, lv_shape3(B * N, T, S)) : NULL;
  lv_tensor *c = lv_op_batch_matmul(g, p, src->ctxs, false, false); /* [B*N, T, dv] */
  c = swap_blocks(g, c); /* [T, B*N, dv] */
  *ctx = c ? lv_op_reshape(g, c, lv_shape3(T, B, N * dv)) : NULL;
  return *ctx && (!probs || *probs);
}

bool lv_mha_attend(lv_multi_headed_attention *m, lv_graph *g, const lv_atten_packed *src, lv_tensor *query,
                   bool causal, lv_tensor **ctx, lv_tensor **probs) {
  *ctx = NULL;
  if (probs) *probs = NULL;
  if (!query || !src->vecs) return false;
  if (!m->inner_is_dot) {
    lv_graph_fail(g, "%s: the whole-sequence path needs a DotProductAttention inner attention, have %s",
                  m->a.base.scope, lv_params_str(m->inner_p, "cls"));
    return false;
  }
  if (query->shape.rank != 3 || query->shape.d[1] != src->batch || query->shape.d[2] != m->a.query_dim) {
    char want[96];
    snprintf(want, sizeof want, "[T, %lld, %lld]", (long long)src->batch, (long long)m->a.query_dim);
    return fail_shape(&m->a.base, g, "query", query, want);
  }
  lv_tensor *qp = mha_project_query(m, g, query);
  if (!qp || !mha_attend_projected(m, g, src, qp, causal, ctx, probs)) return false;
  *ctx = mha_post(m, g, *ctx);
  return *ctx != NULL;
}

bool lv_mha_can_attend_cached(const lv_multi_headed_attention *m, const lv_graph *g) {
  return m->inner_is_dot && !lv_qlayer_on(&m->a.q) && !lv_qlayer_on(&m->inner->q) && !lv_graph_is_training(g);
}

bool lv_mha_attend_cached(lv_multi_headed_attention *m, lv_graph *g, lv_tensor *query, lv_tensor *key_buf,
                          lv_tensor *value_buf, int64_t t, lv_tensor *anc, lv_tensor **ctx) {
  *ctx = NULL;
  if (!query) return false;
  if (!lv_mha_can_attend_cached(m, g)) {
    lv_graph_fail(g, "%s: the cached decoding step needs an inner DotProductAttention, no quantization domain and "
                  "a graph that does not train", m->a.base.scope);
    return false;
  }
  if (query->shape.rank != 2 || query->shape.d[1] != m->a.query_dim) {
    char want[64];
    snprintf(want, sizeof want, "[B, %lld]", (long long)m->a.query_dim);
    return fail_shape(&m->a.base, g, "query", query, want);
  }
  lv_tensor *qp = mha_project_query(m, g, query); /* [B, H], scaled */
  lv_tensor *c = qp ? lv_op_cached_attention(g, qp, key_buf, value_buf, t, m->num_heads, anc) : NULL;
  *ctx = mha_post(m, g, c);
  return *ctx != NULL;
}

static bool mha_context(lv_attention *a, lv_graph *g, const lv_atten_packed *src, lv_tensor *query,
                        lv_tensor **ctx, lv_tensor **probs) {
  lv_multi_headed_attention *m = (lv_multi_headed_attention *)a;
  int64_t Bq = query->shape.d[0], B = src->batch, n = Bq / B, N = m->num_heads, S = src->src_len;
  lv_tensor *qp = mha_project_query(m, g, query); /* [Bq, H] */
  if (!qp) return false;
  lv_tensor *c = NULL, *p = NULL;
  if (m->inner_is_dot) {
    /* Query row i = j*B + b is "time" j of sequence b. */
    if (!mha_attend_projected(m, g, src, lv_op_reshape(g, qp, lv_shape3(n, B, m->hidden_dim)), false, &c,
                              probs ? &p : NULL))
      return false;
    c = lv_op_reshape(g, c, lv_shape2(Bq, -1));
    if (probs) *probs = lv_op_reshape(g, p, lv_shape2(Bq, S));
  } else {
    lv_atten_packed inner = *src;
    inner.batch = B * N;
    lv_tensor *q = lv_op_reshape(g, qp, lv_shape2(Bq * N, m->head_dim));
    if (!lv_attention_compute_context(m->inner, g, &inner, q, &c, probs ? &p : NULL)) return false;
    c = lv_op_reshape(g, c, lv_shape2(Bq, -1));
    if (probs) *probs = q_softmax(a, g, lv_op_reduce_mean(g, lv_op_reshape(g, p, lv_shape3(Bq, N, S)), 1, false));
  }
  *ctx = mha_post(m, g, c);
  return *ctx && (!probs || *probs);
}

static void mha_destroy(lv_layer *base) {
  lv_multi_headed_attention *m = (lv_multi_headed_attention *)base;
  lv_layer_free((lv_layer *)m->inner);
  lv_params_free(m->inner_p);
  m->inner = NULL;
  m->inner_p = NULL;
}

static lv_status mha_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_multi_headed_attention *m = (lv_multi_headed_attention *)base;
  LV_TRY(base_atten_create(&m->a, p, parent_scope, vs));
  static const char *const acts[] = {"source_proj_matmul",  "source_proj_add",  "query_proj_matmul",
                                     "query_proj_add",      "ctx_pre_proj_matmul", "ctx_pre_proj_add",
                                     "ctx_post_proj_matmul", "ctx_post_proj_add"};
  for (size_t i = 0; i < LV_ARRAY_LEN(acts); i++)
    LV_TRY(lv_qlayer_track(&m->a.q, i < 6 ? "default" : "atten_context", acts[i]));
  const char *sc = base->scope;
  m->hidden_dim = lv_params_int(p, "hidden_dim");
  m->num_heads = lv_params_int(p, "num_attention_heads");
  int64_t context_dim = lv_params_int(p, "context_dim");
  m->use_source_vec_as_attention_value = lv_params_bool(p, "use_source_vec_as_attention_value");
  m->enable_source_proj = lv_params_bool(p, "enable_source_proj");
  m->enable_query_proj = lv_params_bool(p, "enable_query_proj");
  m->enable_ctx_pre_proj = lv_params_bool(p, "enable_ctx_pre_proj");
  m->enable_ctx_post_proj = lv_params_bool(p, "enable_ctx_post_proj");
  bool use_bias = lv_params_bool(p, "use_bias");
  int64_t post_dim = lv_params_int(p, "ctx_post_proj_dim");
  const char *proj_init = lv_params_str(p, "proj_init");
  if (m->hidden_dim <= 0 || m->num_heads <= 0 || m->hidden_dim % m->num_heads)
    return lv_status_make(LV_ERR_INVALID, "%s: hidden_dim (%lld) must be a positive multiple of "
                          "num_attention_heads (%lld)", sc, (long long)m->hidden_dim, (long long)m->num_heads);
  if (strcmp(proj_init, "default") && strcmp(proj_init, "uniform"))
    return lv_status_make(LV_ERR_INVALID, "%s: proj_init: unknown value \"%s\" (known: default, uniform)", sc,
                          proj_init);
  if (lv_params_int(p, "num_post_proj") != 1)
    return lv_status_make(LV_ERR_INVALID, "%s: num_post_proj must be 1 (several post projections are not "
                          "supported)", sc);
  if (lv_params_int(p, "attention_head_prob_index") >= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: attention_head_prob_index is not supported; leave it -1", sc);
  if (!m->enable_source_proj && m->a.source_dim != m->hidden_dim)
    return lv_status_make(LV_ERR_INVALID, "%s: enable_source_proj=False needs source_dim == hidden_dim (%lld vs "
                          "%lld)", sc, (long long)m->a.source_dim, (long long)m->hidden_dim);
  if (!m->enable_query_proj && m->a.query_dim != m->hidden_dim)
    return lv_status_make(LV_ERR_INVALID, "%s: enable_query_proj=False needs query_dim == hidden_dim (%lld vs "
                          "%lld)", sc, (long long)m->a.query_dim, (long long)m->hidden_dim);
  if (m->enable_ctx_post_proj && post_dim <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: enable_ctx_post_proj needs ctx_post_proj_dim > 0", sc);
  m->head_dim = m->hidden_dim / m->num_heads;

  /* The inner attention, as Lingvo sets it. */
  const lv_params *ip = lv_params_sub(p, "inner_atten_params");
  if (!ip) return lv_status_make(LV_ERR_INVALID, "%s: inner_atten_params is None", sc);
  m->inner_p = lv_params_copy(ip);
  const char *icls = lv_params_str(m->inner_p, "cls");
  m->inner_is_dot = !strcmp(icls, "DotProductAttention");
  if (!m->inner_is_dot && strcmp(icls, "AdditiveAttention"))
    return lv_status_make(LV_ERR_INVALID, "%s: inner_atten_params.cls must be DotProductAttention or "
                          "AdditiveAttention, got \"%s\"", sc, icls);
  lv_status s = NULL;
  const char *keys[] = {"source_dim", "query_dim", "hidden_dim"};
  for (int i = 0; i < 3 && !s; i++) s = lv_params_set_int(m->inner_p, keys[i], m->head_dim);
  if (!s) s = lv_params_set_float(m->inner_p, "atten_dropout_prob", m->a.atten_dropout_prob);
  if (!s && m->inner_is_dot) s = lv_params_set_bool(m->inner_p, "use_dim_scale", lv_params_bool(p, "enable_per_dim_scale"));
  const char *iname = lv_params_str(m->inner_p, "name");
  if (!s && (!iname || !*iname)) s = lv_params_set_string(m->inner_p, "name", "inner_att");
  if (s) return lv_status_wrap(s, "%s: inner_atten_params", sc);
  lv_params_freeze(m->inner_p);
  lv_layer *inner = NULL;
  LV_TRY(lv_layer_create(m->inner_p, sc, vs, &inner));
  m->inner = (lv_attention *)inner;

  m->a.context_dim = m->enable_ctx_post_proj ? post_dim : -1;
  m->a.pack = mha_pack;
  m->a.context = mha_context;
  bool uni = !strcmp(proj_init, "uniform");
  lv_var_init bias_init = {uni ? LV_INIT_UNIFORM : LV_INIT_CONSTANT, uni ? sqrt(1.0 / (double)m->hidden_dim) : 0.0};
  lv_var_init w_init;
  LV_TRY(lv_layer_params_init(base, &w_init));
#define PROJ_INIT(dim) (uni ? &(lv_var_init){LV_INIT_UNIFORM, sqrt(1.0 / (double)(dim))} : &w_init)
  int64_t H = m->hidden_dim;
  if (m->enable_source_proj) {
    LV_TRY(lv_layer_add_var(base, "source_proj", lv_shape2(m->a.source_dim, H), PROJ_INIT(m->a.source_dim), true,
                            &m->source_proj));
    if (use_bias) LV_TRY(lv_layer_add_var(base, "source_proj_b", lv_shape1(H), &bias_init, true, &m->source_proj_b));
  }
  if (m->enable_query_proj) {
    LV_TRY(lv_layer_add_var(base, "query_proj", lv_shape2(m->a.query_dim, H), PROJ_INIT(m->a.query_dim), true,
                            &m->query_proj));
    if (use_bias) LV_TRY(lv_layer_add_var(base, "query_proj_b", lv_shape1(H), &bias_init, true, &m->query_proj_b));
  }
  if (m->enable_ctx_pre_proj && !m->use_source_vec_as_attention_value) {
    if (context_dim <= 0)
      return lv_status_make(LV_ERR_INVALID, "%s: enable_ctx_pre_proj needs context_dim > 0", sc);
    LV_TRY(lv_layer_add_var(base, "ctx_proj", lv_shape2(context_dim, H), PROJ_INIT(context_dim), true, &m->ctx_proj));
    if (use_bias) LV_TRY(lv_layer_add_var(base, "ctx_proj_b", lv_shape1(H), &bias_init, true, &m->ctx_proj_b));
  }
  if (m->enable_ctx_post_proj) {
    lv_var_init pb = {uni ? LV_INIT_UNIFORM : LV_INIT_CONSTANT, uni ? sqrt(1.0 / (double)post_dim) : 0.0};
    LV_TRY(lv_layer_add_var(base, "ctx_post_proj", lv_shape2(H, post_dim), PROJ_INIT(H), true, &m->ctx_post_proj));
    if (use_bias) LV_TRY(lv_layer_add_var(base, "ctx_post_proj_b", lv_shape1(post_dim), &pb, true, &m->ctx_post_proj_b));
  }
#undef PROJ_INIT
  lv_var *const qw[] = {m->source_proj, m->query_proj, m->ctx_proj, m->ctx_post_proj};
  for (size_t i = 0; i < LV_ARRAY_LEN(qw); i++) lv_qlayer_bind_weight(&m->a.q, "default", qw[i]);
  return NULL;
}

/* ---- the generic fprop of all three ---- */

static bool atten_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_attention *a = (lv_attention *)l;
  lv_tensor *vecs = lv_layer_in(l, g, in, "source_vecs");
  lv_tensor *query = lv_layer_in(l, g, in, "query");
  if (!vecs || !query) return false;
  lv_atten_packed src;
  lv_tensor *ctx, *probs;
  if (!lv_attention_pack_source(a, g, vecs, lv_nmap_get(in, "source_contexts"), lv_nmap_get(in, "source_paddings"),
                                &src))
    return false;
  if (query->shape.rank == 3 && l->cls == &lv_multi_headed_attention_class) {
    if (!lv_mha_attend((lv_multi_headed_attention *)a, g, &src, query, false, &ctx, &probs)) return false;
  } else if (!lv_attention_compute_context(a, g, &src, query, &ctx, &probs)) {
    return false;
  }
  return lv_layer_set_out(l, g, out, "ctx", ctx) && lv_layer_set_out(l, g, out, "probs", probs);
}

const lv_layer_class lv_additive_attention_class = {
    .cls = "AdditiveAttention",
    .params = lv_additive_attention_params,
    .size = sizeof(lv_additive_attention),
    .create = additive_create,
    .fprop = atten_fprop,
};

const lv_layer_class lv_dot_product_attention_class = {
    .cls = "DotProductAttention",
    .params = lv_dot_product_attention_params,
    .size = sizeof(lv_dot_product_attention),
    .create = dot_create,
    .fprop = atten_fprop,
};

const lv_layer_class lv_multi_headed_attention_class = {
    .cls = "MultiHeadedAttention",
    .params = lv_multi_headed_attention_params,
    .size = sizeof(lv_multi_headed_attention),
    .create = mha_create,
    .fprop = atten_fprop,
    .destroy = mha_destroy,
};
