#include "layers/transformer.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/* An unfrozen copy of the template p.key, which must be of class want_cls. */
static lv_status child_params(const lv_layer *l, const char *key, const char *want_cls, lv_params **out) {
  *out = NULL;
  const lv_params *t = lv_params_sub(l->p, key);
  if (!t) return lv_status_make(LV_ERR_INVALID, "%s: %s is None", l->scope, key);
  const char *cls = lv_params_str(t, "cls");
  if (strcmp(cls, want_cls))
    return lv_status_make(LV_ERR_INVALID, "%s: %s.cls must be %s, got \"%s\"", l->scope, key, want_cls, cls);
  *out = lv_params_copy(t);
  return *out ? NULL : lv_status_make(LV_ERR_RESOURCE, "%s: out of memory copying %s", l->scope, key);
}

/* Names, freezes and creates a child from an owned params copy. */
static lv_status child_create(lv_layer *l, lv_params *cp, const char *key, const char *name, lv_layer **out) {
  lv_status s = lv_params_set_string(cp, "name", name);
  if (s) return lv_status_wrap(s, "%s: %s", l->scope, key);
  lv_params_freeze(cp);
  s = lv_layer_create(cp, l->scope, l->vs, out);
  return s ? lv_status_wrap(s, "%s: %s", l->scope, key) : NULL;
}

#define SET(kind, cp, key, v)                                                   \
  do {                                                                          \
    lv_status s_ = lv_params_set_##kind((cp), (key), (v));                      \
    if (s_) return lv_status_wrap(s_, "%s: setting %s of a child", sc, (key)); \
  } while (0)

static lv_tensor *dropout(lv_layer *l, lv_graph *g, lv_tensor *x, float prob) {
  if (!x || prob <= 0.0f || !lv_graph_is_training(g)) return x;
  return lv_op_dropout(g, x, 1.0f - prob, l->seed, lv_graph_next_stream(g));
}

static bool check_dims(const lv_layer *l, lv_graph *g, const char *what, lv_tensor *t, int rank, int64_t last) {
  if (!t) return false;
  if (t->shape.rank == rank && t->shape.d[rank - 1] == last) return true;
  char s[96];
  lv_graph_fail(g, "%s: %s has shape %s, expected rank %d with last dim %lld", l->scope, what,
                lv_shape_str(&t->shape, s, sizeof s), rank, (long long)last);
  return false;
}

/* ---- TransformerAttentionLayer ---- */

lv_params *lv_tr_atten_layer_params(void) {
  lv_params *p = lv_layer_base_params("TransformerAttentionLayer");
  lv_params_define_int(p, "source_dim", 0, "Dimension of the transformer block input.");
  lv_params_define_int(p, "context_dim", 0, "Dimension of the attention contexts.");
  lv_params_define_int(p, "atten_hidden_dim", 0, "Dimension of the attention hidden dim.");
  lv_params_define_int(p, "num_attention_heads", 8, "Number of attention heads.");
  lv_params_define_bool(p, "is_masked", false, "If set, uses masked MultiHeadedAttention.");
  lv_params_define_string(p, "mask_type", "future", "Type of attention mask if `is_masked` is set (lingvoc "
                          "supports \"future\").");
  lv_params_define_params(p, "ln_tpl", lv_layer_norm_layer_params(), "Layer norm default params.");
  lv_params *at = lv_multi_headed_attention_params();
  LV_ASSERT(lv_params_set_bool(at, "use_source_vec_as_attention_value", false) == NULL);
  LV_ASSERT(lv_params_set_bool(at, "enable_ctx_post_proj", true) == NULL);
  lv_params_define_params(p, "atten_tpl", at, "Multi-Headed Dot-Attention default params.");
  lv_params_define_float(p, "atten_dropout_prob", 0.0, "Probability at which we apply dropout to the attention "
                         "probs.");
  lv_params_define_float(p, "residual_dropout_prob", 0.0, "Probability at which we apply dropout to the residual "
                         "layers, such that, residual(x, f(x)) = (x + dropout(f(x))).");
  lv_params_define_bool(p, "packed_input", false, "If True, each training example may pack multiple sequences "
                        "(not supported: must stay False).");
  lv_params_define_bool(p, "add_unnormalized_input", false, "If set, uses unnormalized input in the residual add.");
  lv_params_define_bool(p, "pre_layer_norm", true, "When True, layer norm is used before attention module, "
                        "otherwise used after attention module.");
  return p;
}

static lv_status tr_atten_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_tr_atten_layer *l = (lv_tr_atten_layer *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  const char *sc = base->scope;
  l->source_dim = lv_params_int(p, "source_dim");
  l->is_masked = lv_params_bool(p, "is_masked");
  l->add_unnormalized_input = lv_params_bool(p, "add_unnormalized_input");
  l->pre_layer_norm = lv_params_bool(p, "pre_layer_norm");
  l->residual_dropout_prob = (float)lv_params_float(p, "residual_dropout_prob");
  if (l->source_dim <= 0) return lv_status_make(LV_ERR_INVALID, "%s: source_dim must be > 0", sc);
  if (!(l->residual_dropout_prob >= 0 && l->residual_dropout_prob < 1)) /* NaN too */
    return lv_status_make(LV_ERR_INVALID, "%s: residual_dropout_prob must be in [0, 1), got %g", sc,
                          (double)l->residual_dropout_prob);
  if (l->is_masked && strcmp(lv_params_str(p, "mask_type"), "future"))
    return lv_status_make(LV_ERR_INVALID, "%s: mask_type \"%s\" is not supported (lingvoc has \"future\")", sc,
                          lv_params_str(p, "mask_type"));
  if (lv_params_bool(p, "packed_input"))
    return lv_status_make(LV_ERR_INVALID, "%s: packed_input=True is not supported", sc);
  int64_t hidden = lv_params_int(p, "atten_hidden_dim"), ctx = lv_params_int(p, "context_dim");
  if (!hidden) hidden = l->source_dim;
  if (!ctx) ctx = l->source_dim;
  LV_TRY(child_params(base, "atten_tpl", "MultiHeadedAttention", &l->atten_p));
  SET(int, l->atten_p, "source_dim", l->source_dim);
  SET(int, l->atten_p, "query_dim", l->source_dim);
  SET(int, l->atten_p, "hidden_dim", hidden);
  SET(int, l->atten_p, "context_dim", ctx);
  SET(int, l->atten_p, "ctx_post_proj_dim", l->source_dim);
  SET(int, l->atten_p, "num_attention_heads", lv_params_int(p, "num_attention_heads"));
  SET(float, l->atten_p, "atten_dropout_prob", lv_params_float(p, "atten_dropout_prob"));
  lv_layer *c = NULL;
  LV_TRY(child_create(base, l->atten_p, "atten_tpl", "multihead_atten", &c));
  l->atten = (lv_multi_headed_attention *)c;
  if (!l->atten->inner_is_dot)
    return lv_status_make(LV_ERR_INVALID, "%s: atten_tpl.inner_atten_params must be DotProductAttention", sc);
  if (!l->atten->enable_ctx_post_proj && ctx != l->source_dim)
    return lv_status_make(LV_ERR_INVALID, "%s: without ctx_post_proj, context_dim must equal source_dim", sc);
  LV_TRY(child_params(base, "ln_tpl", "LayerNorm", &l->ln_p));
  SET(int, l->ln_p, "input_dim", l->source_dim);
  LV_TRY(child_create(base, l->ln_p, "ln_tpl", "atten_ln", &c));
  l->ln = (lv_layer_norm_layer *)c;
  return NULL;
}

static void tr_atten_destroy(lv_layer *base) {
  lv_tr_atten_layer *l = (lv_tr_atten_layer *)base;
  lv_layer_free((lv_layer *)l->atten);
  lv_layer_free((lv_layer *)l->ln);
  lv_params_free(l->atten_p);
  lv_params_free(l->ln_p);
}

/* The common tail: ctx [.., D] -> residual add (and post layer norm). */
static lv_tensor *tr_atten_residual(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *xn, lv_tensor *ctx) {
  ctx = dropout(&l->base, g, ctx, l->residual_dropout_prob);
  lv_tensor *h = lv_op_add(g, l->add_unnormalized_input ? x : xn, ctx);
  return l->pre_layer_norm ? h : lv_layer_norm_layer_fprop(l->ln, g, h);
}

static lv_tensor *tr_atten_norm(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *x) {
  return l->pre_layer_norm ? lv_layer_norm_layer_fprop(l->ln, g, x) : x;
}

bool lv_tr_atten_layer_pack_source(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *source_vecs,
                                   lv_tensor *source_paddings, lv_atten_packed *packed) {
  memset(packed, 0, sizeof *packed);
  if (!check_dims(&l->base, g, "source_vecs", source_vecs, 3, l->source_dim)) return false;
  return lv_attention_pack_source(&l->atten->a, g, source_vecs, source_vecs, source_paddings, packed);
}

static bool atten_packed(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *query, const lv_atten_packed *packed,
                         lv_tensor **out, lv_tensor **probs) {
  *out = NULL;
  if (!check_dims(&l->base, g, "query", query, 3, l->source_dim)) return false;
  lv_tensor *xn = tr_atten_norm(l, g, query), *ctx;
  int64_t Bq = query->shape.d[1], B = packed->batch;
  if (query->shape.d[0] == 1 && Bq != B && B > 0 && Bq % B == 0) {
    /* Beam search: query row i attends source batch i % B (Lingvo's layout); the
     * n = Bq / B hypotheses of a step become n "time steps" of the source batch. */
    lv_tensor *q = lv_op_reshape(g, xn, lv_shape3(Bq / B, B, l->source_dim)), *p = NULL;
    if (!lv_mha_attend(l->atten, g, packed, q, false, &ctx, probs ? &p : NULL)) return false;
    ctx = lv_op_reshape(g, ctx, lv_shape3(1, Bq, l->source_dim));
    if (probs) *probs = lv_op_reshape(g, p, lv_shape3(1, Bq, packed->src_len));
  } else if (!lv_mha_attend(l->atten, g, packed, xn, false, &ctx, probs)) {
    return false;
  }
  *out = tr_atten_residual(l, g, query, xn, ctx);
  return *out != NULL;
}

/* The layer's own tensors die at its end (graph.h: lv_graph_scope_end): all but the
 * output and the probabilities asked for. */
static bool end_scope(lv_graph *g, const lv_graph_scope *sc, bool ok, lv_tensor **out, lv_tensor **probs) {
  lv_tensor *keep[2] = {*out, probs ? *probs : NULL};
  if (ok) lv_graph_scope_end(g, sc, keep, 2);
  return ok;
}

bool lv_tr_atten_layer_fprop_packed(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *query,
                                    const lv_atten_packed *packed, lv_tensor **out, lv_tensor **probs) {
  lv_graph_scope sc = lv_graph_scope_begin(g);
  return end_scope(g, &sc, atten_packed(l, g, query, packed, out, probs), out, probs);
}

static bool atten_self(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *query, lv_tensor *source_paddings,
                       lv_tensor *source_vecs, lv_tensor **out, lv_tensor **probs) {
  *out = NULL;
  if (probs) *probs = NULL;
  if (source_vecs) {
    lv_atten_packed src;
    return lv_tr_atten_layer_pack_source(l, g, source_vecs, source_paddings, &src) &&
           atten_packed(l, g, query, &src, out, probs);
  }
  if (!check_dims(&l->base, g, "query", query, 3, l->source_dim)) return false;
  lv_tensor *xn = tr_atten_norm(l, g, query), *ctx;
  lv_atten_packed src;
  if (!lv_attention_pack_source(&l->atten->a, g, xn, xn, source_paddings, &src) ||
      !lv_mha_attend(l->atten, g, &src, xn, l->is_masked, &ctx, probs))
    return false;
  *out = tr_atten_residual(l, g, query, xn, ctx);
  return *out != NULL;
}

bool lv_tr_atten_layer_fprop(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *query, lv_tensor *source_paddings,
                             lv_tensor *source_vecs, lv_tensor **out, lv_tensor **probs) {
  lv_graph_scope sc = lv_graph_scope_begin(g);
  return end_scope(g, &sc, atten_self(l, g, query, source_paddings, source_vecs, out, probs), out, probs);
}

static lv_tensor buf_view(const lv_tensor *buf, int64_t t) {
  lv_tensor v = *buf;
  v.shape.d[0] = t;
  v.grad = NULL;
  v.requires_grad = false;
  v.owns_data = false;
  v.node = -1;
  return v;
}

void lv_tr_cache_view(lv_tr_cache *c, int64_t t) {
  if (t <= 0) {
    c->key = c->value = NULL;
    return;
  }
  c->key_view = buf_view(c->key_buf, t);
  c->value_view = buf_view(c->value_buf, t);
  c->key = &c->key_view;
  c->value = &c->value_view;
}

/* ---- a stack's caches over a search --------------------------------------------- */

void lv_tr_step_caches_init(lv_tr_step_caches *c, lv_graph *g, int num_layers, const char *who) {
  memset(c, 0, sizeof *c);
  c->g = g;
  c->who = who;
  c->num_layers = num_layers;
  c->cache = calloc((size_t)(num_layers > 0 ? num_layers : 1), sizeof *c->cache);
  c->bufs = calloc((size_t)(num_layers > 0 ? num_layers : 1) * 4, sizeof *c->bufs);
  LV_ASSERT(c->cache && c->bufs);
}

void lv_tr_step_caches_free(lv_tr_step_caches *c) {
  for (int i = 0; c->bufs && i < c->num_layers * 4; i++) lv_tensor_free(c->bufs[i]);
  free(c->bufs);
  free(c->cache);
  free(c->idx);
  free(c->anc);
  free(c->anc_next);
  memset(c, 0, sizeof *c);
}

/* Buffer j (0 key, 1 value) of pair p of layer i. */
static lv_tensor **buf_at(lv_tr_step_caches *c, int i, int p, int j) { return &c->bufs[4 * i + 2 * p + j]; }

/* Makes buffer *b a [cap, rows, dim] float32 tensor on the graph's device (content
 * undefined when it is new). */
static lv_status ensure_buf(lv_tr_step_caches *c, lv_tensor **b, int64_t cap, int64_t rows, int64_t dim) {
  if (*b && (*b)->shape.d[0] == cap && (*b)->shape.d[1] == rows && (*b)->shape.d[2] == dim) return NULL;
  lv_tensor_free(*b);
  *b = lv_tensor_new_on(lv_graph_device(c->g), LV_F32, lv_shape3(cap, rows, dim));
  if (!*b)
    return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory for a [%lld, %lld, %lld] key/value cache", c->who,
                          (long long)cap, (long long)rows, (long long)dim);
  return NULL;
}

/* Copies the graph tensor src [t, rows, dim] (this step's cache) into pair p's buffer j
 * of layer i, sized [cap, rows, dim]. */
static lv_status store(lv_tr_step_caches *c, int i, int p, int j, const lv_tensor *src, int64_t cap) {
  lv_tensor **b = buf_at(c, i, p, j);
  LV_TRY(ensure_buf(c, b, cap, src->shape.d[1], src->shape.d[2]));
  if (!lv_graph_copy_into(c->g, *b, 0, src))
    return lv_status_wrap(lv_graph_status(c->g), "%s: storing the key/value cache", c->who);
  return NULL;
}

/* Points layer i's cache at pair p's buffers, holding t steps. */
static void use_pair(lv_tr_step_caches *c, int i, int p, int64_t t) {
  c->cache[i].key_buf = *buf_at(c, i, p, 0);
  c->cache[i].value_buf = *buf_at(c, i, p, 1);
  lv_tr_cache_view(&c->cache[i], t);
}

lv_status lv_tr_step_caches_keep_first(lv_tr_step_caches *c) {
  c->cap = 8;
  for (int i = 0; i < c->num_layers; i++) {
    LV_TRY(store(c, i, 0, 0, c->cache[i].key, c->cap));
    LV_TRY(store(c, i, 0, 1, c->cache[i].value, c->cap));
    use_pair(c, i, 0, 1);
    c->cache[i].anc = NULL;
  }
  c->cur = 0;
  c->anc_on = false;
  return NULL;
}

/* The row that holds step s of row i of the previous step (rows wide). */
static int32_t anc_row(const lv_tr_step_caches *c, int64_t s, int64_t rows, int64_t i) {
  return c->anc_on ? c->anc[s * rows + i] : (int32_t)(s * rows + i);
}

/* The reorder by parent as ancestors: anc_next [t + 1, n] (step t in order), then every
 * layer's cache reads through it. rows == n. */
static lv_status compose_ancestors(lv_tr_step_caches *c, int64_t t, int64_t n, const int32_t *parent) {
  const int64_t need = (t + 1) * n;
  if (c->anc_cap < need) {
    const int64_t cap = need > 2 * c->anc_cap ? need : 2 * c->anc_cap;
    int32_t *a = realloc(c->anc, sizeof *a * (size_t)cap), *b = a ? realloc(c->anc_next, sizeof *b * (size_t)cap) : NULL;
    if (a) c->anc = a;
    if (b) c->anc_next = b;
    if (!a || !b) return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory for the beam's ancestors", c->who);
    c->anc_cap = cap;
  }
  for (int64_t s = 0; s < t; s++)
    for (int64_t i = 0; i < n; i++) c->anc_next[s * n + i] = anc_row(c, s, n, parent ? parent[i] : i);
  for (int64_t i = 0; i < n; i++) c->anc_next[t * n + i] = (int32_t)(t * n + i);
  int32_t *tmp = c->anc;
  c->anc = c->anc_next, c->anc_next = tmp;
  c->anc_on = true;
  lv_tensor hv = lv_tensor_view(LV_I32, lv_shape1(need), c->anc);
  lv_tensor *anc = lv_graph_from_host(c->g, &hv);
  if (!anc) return lv_status_wrap(lv_graph_status(c->g), "%s: the beam's ancestors", c->who);
  for (int i = 0; i < c->num_layers; i++) {
    use_pair(c, i, c->cur, t);
    c->cache[i].anc = anc;
  }
  return NULL;
}

lv_status lv_tr_step_caches_prepare(lv_tr_step_caches *c, int64_t t, int64_t rows, int n, const int32_t *parent) {
  bool grow = c->cap <= t;
  if (!grow && rows == n && (parent || c->anc_on)) return compose_ancestors(c, t, n, parent);
  if (!parent && !grow) return NULL;
  int64_t cap = grow ? 2 * c->cap : c->cap;
  /* The rows in order: gathered by parent through the ancestors, or stored as they are. */
  const bool gather = parent || c->anc_on;
  if (gather) {
    if (c->idx_cap < t * n) {
      free(c->idx);
      c->idx_cap = t * n;
      c->idx = malloc(sizeof *c->idx * (size_t)c->idx_cap);
      LV_ASSERT(c->idx);
    }
    for (int64_t s = 0; s < t; s++)
      for (int i = 0; i < n; i++) c->idx[s * n + i] = anc_row(c, s, rows, parent ? parent[i] : i);
  }
  lv_tensor hi = lv_tensor_view(LV_I32, lv_shape1(t * n), c->idx);
  lv_tensor *ids = gather ? lv_graph_from_host(c->g, &hi) : NULL;
  if (gather && !ids) return lv_status_wrap(lv_graph_status(c->g), "%s: reorder ids", c->who);
  int other = 1 - c->cur;
  for (int i = 0; i < c->num_layers; i++) {
    lv_tensor *kv[2] = {c->cache[i].key, c->cache[i].value};
    for (int j = 0; j < 2; j++) {
      lv_tensor *src = kv[j];
      if (!gather) {
        LV_TRY(store(c, i, other, j, src, cap));
        continue;
      }
      /* The rows of the parents, gathered straight into the other pair's buffer. */
      int64_t d = src->shape.d[2];
      lv_tensor **b = buf_at(c, i, other, j);
      LV_TRY(ensure_buf(c, b, cap, n, d));
      if (!lv_graph_gather_into(c->g, *b, lv_op_reshape(c->g, src, lv_shape2(t * rows, d)), ids))
        return lv_status_wrap(lv_graph_status(c->g), "%s: reordering the cache", c->who);
    }
    use_pair(c, i, other, t);
    c->cache[i].anc = NULL;
  }
  c->cur = other;
  c->cap = cap;
  c->anc_on = false;
  return NULL;
}

bool lv_tr_atten_layer_extend_step(lv_tr_atten_layer *l, lv_graph *g, lv_tensor *query, lv_tr_cache *cache,
                                   lv_tensor **out, lv_tensor **probs) {
  *out = NULL;
  if (probs) *probs = NULL;
  if (!l->is_masked) {
    lv_graph_fail(g, "%s: ExtendStep needs causal self-attention (is_masked=True)", l->base.scope);
    return false;
  }
  if (!check_dims(&l->base, g, "query", query, 2, l->source_dim)) return false;
  int64_t B = query->shape.d[0];
  lv_tensor *x3 = lv_op_reshape(g, query, lv_shape3(1, B, l->source_dim));
  lv_tensor *xn = tr_atten_norm(l, g, x3), *k, *v;
  if (!lv_mha_project_source(l->atten, g, xn, xn, &k, &v)) return false;
  if (cache->key && cache->key->shape.d[1] != B) {
    lv_graph_fail(g, "%s: the cache holds batch %lld, the query has %lld", l->base.scope,
                  (long long)cache->key->shape.d[1], (long long)B);
    return false;
  }
  if (cache->key_buf) {
    int64_t t = cache->key ? cache->key->shape.d[0] : 0;
    const lv_shape *ks = &cache->key_buf->shape, *vs = &cache->value_buf->shape;
    if (ks->rank != 3 || vs->rank != 3 || ks->d[0] <= t || vs->d[0] <= t || ks->d[1] != B || vs->d[1] != B ||
        ks->d[2] != k->shape.d[2] || vs->d[2] != v->shape.d[2]) {
      lv_graph_fail(g, "%s: the cache buffers [%lld, %lld, %lld] do not hold step %lld of batch %lld",
                    l->base.scope, (long long)ks->d[0], (long long)ks->d[1], (long long)ks->d[2], (long long)t,
                    (long long)B);
      return false;
    }
    if (!lv_graph_copy_into(g, cache->key_buf, t * B * ks->d[2], k) ||
        !lv_graph_copy_into(g, cache->value_buf, t * B * vs->d[2], v))
      return false;
    lv_tr_cache_view(cache, t + 1);
    if (!probs && lv_mha_can_attend_cached(l->atten, g)) {
      /* Straight from the buffers, through the ancestors: no head packing, no reorder. */
      lv_tensor *ctx;
      if (!lv_mha_attend_cached(l->atten, g, lv_op_reshape(g, xn, lv_shape2(B, l->source_dim)), cache->key_buf,
                                cache->value_buf, t + 1, cache->anc, &ctx))
        return false;
      lv_tensor *h = tr_atten_residual(l, g, x3, xn, lv_op_reshape(g, ctx, lv_shape3(1, B, ctx->shape.d[1])));
      *out = h ? lv_op_reshape(g, h, lv_shape2(B, l->source_dim)) : NULL;
      return *out != NULL;
    }
    k = cache->key, v = cache->value;
    if (cache->anc) {
      /* The rows in order for the packing path: gathered through the ancestors. */
      k = lv_op_gather(g, lv_op_reshape(g, k, lv_shape2((t + 1) * B, ks->d[2])), cache->anc);
      v = lv_op_gather(g, lv_op_reshape(g, v, lv_shape2((t + 1) * B, vs->d[2])), cache->anc);
      k = k ? lv_op_reshape(g, k, lv_shape3(t + 1, B, ks->d[2])) : NULL;
      v = v ? lv_op_reshape(g, v, lv_shape3(t + 1, B, vs->d[2])) : NULL;
    }
  } else {
    if (cache->key) {
      lv_tensor *ks[2] = {cache->key, k}, *vs[2] = {cache->value, v};
      k = lv_op_concat(g, ks, 2, 0);
      v = lv_op_concat(g, vs, 2, 0);
    }
    cache->key = k, cache->value = v;
  }
  lv_atten_packed src;
  lv_tensor *ctx, *p = NULL;
  if (!lv_mha_pack_projected(l->atten, g, k, v, NULL, &src)) return false;
  if (!lv_mha_attend(l->atten, g, &src, xn, false, &ctx, probs ? &p : NULL)) return false;
  lv_tensor *h = tr_atten_residual(l, g, x3, xn, ctx);
  *out = h ? lv_op_reshape(g, h, lv_shape2(B, l->source_dim)) : NULL;
  if (probs && p) *probs = lv_op_reshape(g, p, lv_shape2(B, p->shape.d[2]));
  return *out != NULL;
}

static bool tr_atten_fprop(lv_layer *base, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_tr_atten_layer *l = (lv_tr_atten_layer *)base;
  lv_tensor *x = lv_layer_in(base, g, in, "act");
  lv_tensor *sv = lv_nmap_get(in, "source_vecs");
  lv_tensor *pads = sv ? lv_nmap_get(in, "source_paddings") : lv_nmap_get(in, "paddings");
  lv_tensor *y, *probs;
  if (!x || !lv_tr_atten_layer_fprop(l, g, x, pads, sv, &y, &probs)) return false;
  return lv_layer_set_out(base, g, out, "act", y) && lv_layer_set_out(base, g, out, "probs", probs);
}

/* ---- TransformerFeedForwardLayer ---- */

lv_params *lv_tr_ff_layer_params(void) {
  lv_params *p = lv_layer_base_params("TransformerFeedForwardLayer");
  lv_params_define_int(p, "input_dim", 0, "Dimension of the layer input.");
  lv_params_define_int(p, "output_dim", 0, "Dimension of the layer output (0: input_dim; lingvoc supports only "
                       "that).");
  lv_params_define_int(p, "hidden_dim", 0, "Dimension of the hidden layer.");
  lv_params_define_params(p, "ln_tpl", lv_layer_norm_layer_params(), "Layer norm default params");
  lv_params_define_string(p, "activation", "RELU", "Non-linearity.");
  lv_params_define_float(p, "residual_weight", 1.0, "Weight applied on residual connection. Final output is "
                         "residual_weight * residual_fn(x) + x. Only effective when add_skip_connection is True.");
  lv_params_define_float(p, "residual_dropout_prob", 0.0, "Probability at which we apply dropout to the residual "
                         "layers, such that, residual(x, y) = (x + dropout(y)).");
  lv_params_define_float(p, "relu_dropout_prob", 0.0, "Probability at which we apply dropout to the hidden layer "
                         "of feed-forward network.");
  lv_params_define_bool(p, "add_skip_connection", true, "If True, add skip_connection from input to output.");
  lv_params_define_bool(p, "pre_layer_norm", true, "Pre or post layer norm");
  return p;
}

static lv_status tr_ff_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_tr_ff_layer *l = (lv_tr_ff_layer *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  const char *sc = base->scope;
  l->input_dim = lv_params_int(p, "input_dim");
  l->hidden_dim = lv_params_int(p, "hidden_dim");
  l->residual_weight = (float)lv_params_float(p, "residual_weight");
  l->residual_dropout_prob = (float)lv_params_float(p, "residual_dropout_prob");
  l->relu_dropout_prob = (float)lv_params_float(p, "relu_dropout_prob");
  l->pre_layer_norm = lv_params_bool(p, "pre_layer_norm");
  l->add_skip_connection = lv_params_bool(p, "add_skip_connection");
  int64_t od = lv_params_int(p, "output_dim");
  if (!(l->residual_dropout_prob >= 0 && l->residual_dropout_prob < 1)) /* NaN too */
    return lv_status_make(LV_ERR_INVALID, "%s: residual_dropout_prob must be in [0, 1), got %g", sc,
                          (double)l->residual_dropout_prob);
  if (!(l->relu_dropout_prob >= 0 && l->relu_dropout_prob < 1))
    return lv_status_make(LV_ERR_INVALID, "%s: relu_dropout_prob must be in [0, 1), got %g", sc,
                          (double)l->relu_dropout_prob);
  if (l->input_dim <= 0 || l->hidden_dim <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: input_dim and hidden_dim must be > 0, got %lld and %lld", sc,
                          (long long)l->input_dim, (long long)l->hidden_dim);
  if (od && od != l->input_dim)
    return lv_status_make(LV_ERR_INVALID, "%s: output_dim %lld != input_dim %lld needs a residual projection, "
                          "which lingvoc does not support", sc, (long long)od, (long long)l->input_dim);
  lv_activation act; /* checked here; fflayer_0 applies it */
  LV_TRY(lv_layer_activation(base, "activation", &act));
  char ffscope[LV_VAR_NAME_MAX];
  if (snprintf(ffscope, sizeof ffscope, "%s/fflayer", sc) >= (int)sizeof ffscope)
    return lv_status_make(LV_ERR_INVALID, "%s: scope too long", sc);
  int64_t dims[3] = {l->input_dim, l->hidden_dim, l->input_dim};
  for (int i = 0; i < 2; i++) {
    lv_params *fp = lv_projection_layer_params();
    l->fc_p[i] = fp;
    char name[32];
    snprintf(name, sizeof name, "fflayer_%d", i);
    SET(string, fp, "name", name);
    SET(int, fp, "input_dim", dims[i]);
    SET(int, fp, "output_dim", dims[i + 1]);
    SET(string, fp, "activation", i == 0 ? lv_params_str(p, "activation") : "NONE");
    SET(bool, fp, "has_bias", true);
    if (lv_params_is_set(p, "random_seed")) SET(int, fp, "random_seed", lv_params_int(p, "random_seed"));
    lv_params_freeze(fp);
    LV_TRY(lv_projection_layer_create(&l->fc[i], fp, ffscope, vs));
  }
  LV_TRY(child_params(base, "ln_tpl", "LayerNorm", &l->ln_p));
  SET(int, l->ln_p, "input_dim", l->input_dim);
  lv_layer *c = NULL;
  LV_TRY(child_create(base, l->ln_p, "ln_tpl", "fflayer_ln", &c));
  l->ln = (lv_layer_norm_layer *)c;
  return NULL;
}

static void tr_ff_destroy(lv_layer *base) {
  lv_tr_ff_layer *l = (lv_tr_ff_layer *)base;
  lv_layer_free((lv_layer *)l->ln);
  lv_params_free(l->ln_p);
  for (int i = 0; i < 2; i++) lv_params_free(l->fc_p[i]);
}

/* h [..., F] * keep [rows, 1] (Lingvo's ApplyPadding on a projection's output), the mask
 * broadcast along F: the products are those of a dense [rows, F] mask (keep * 1 is keep),
 * without holding that mask for backward. */
static lv_tensor *apply_keep(lv_graph *g, lv_tensor *h, lv_tensor *keep, int64_t rows) {
  if (!h) return NULL;
  int64_t f = h->shape.d[h->shape.rank - 1];
  if (lv_tensor_numel(h) != rows * f) return NULL;
  lv_tensor *y = lv_op_mul(g, lv_op_reshape(g, h, lv_shape2(rows, f)), keep);
  return y ? lv_op_reshape(g, y, h->shape) : NULL;
}

static lv_tensor *ff_fprop(lv_tr_ff_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings) {
  if (!x) return NULL;
  if (x->shape.rank < 2 || x->shape.d[x->shape.rank - 1] != l->input_dim) {
    check_dims(&l->base, g, "act", x, x->shape.rank < 2 ? 2 : x->shape.rank, l->input_dim);
    return NULL;
  }
  lv_tensor *keep = NULL; /* [N, 1] with N the rows of x */
  int64_t rows = lv_tensor_numel(x) / l->input_dim;
  if (paddings) {
    if (lv_tensor_numel(paddings) != rows) {
      char s1[96], s2[96];
      lv_graph_fail(g, "%s: paddings %s do not match the input %s", l->base.scope,
                    lv_shape_str(&paddings->shape, s1, sizeof s1), lv_shape_str(&x->shape, s2, sizeof s2));
      return NULL;
    }
    keep = lv_op_add_scalar(g, lv_op_scale(g, lv_op_reshape(g, paddings, lv_shape2(rows, 1)), -1.0f), 1.0f);
  }
  lv_tensor *xn = l->pre_layer_norm ? lv_layer_norm_layer_fprop(l->ln, g, x) : x;
  lv_tensor *h;
  if (lv_qlayer_on(&l->fc[0].q) || lv_qlayer_on(&l->fc[1].q)) {
    /* Quantized: the projections' own fprop (QWeight, QActs, the paddings' QRAct). */
    lv_tensor *pads = paddings ? lv_op_reshape(g, paddings, lv_shape1(rows)) : NULL;
    h = lv_projection_layer_fprop_padded(&l->fc[0], g, xn, pads);
    h = dropout(&l->base, g, h, l->relu_dropout_prob);
    h = lv_projection_layer_fprop_padded(&l->fc[1], g, h, pads);
  } else {
    h = lv_atten_affine(&l->fc[0].base, g, xn, l->fc[0].w, l->fc[0].b);
    h = h && l->fc[0].act != LV_ACT_NONE ? lv_op_activation(g, h, l->fc[0].act) : h;
    if (keep) h = apply_keep(g, h, keep, rows);
    h = dropout(&l->base, g, h, l->relu_dropout_prob);
    h = lv_atten_affine(&l->fc[1].base, g, h, l->fc[1].w, l->fc[1].b);
    if (keep) h = apply_keep(g, h, keep, rows);
  }
  h = dropout(&l->base, g, h, l->residual_dropout_prob);
  if (l->add_skip_connection) h = lv_op_add(g, x, l->residual_weight == 1.0f ? h : lv_op_scale(g, h, l->residual_weight));
  if (!l->pre_layer_norm) h = lv_layer_norm_layer_fprop(l->ln, g, h);
  return h;
}

lv_tensor *lv_tr_ff_layer_fprop(lv_tr_ff_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings) {
  lv_graph_scope sc = lv_graph_scope_begin(g);
  lv_tensor *h = ff_fprop(l, g, x, paddings);
  if (h) lv_graph_scope_end(g, &sc, &h, 1);
  return h;
}

static bool tr_ff_fprop(lv_layer *base, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_tensor *x = lv_layer_in(base, g, in, "act");
  return lv_layer_set_out(base, g, out, "act",
                          lv_tr_ff_layer_fprop((lv_tr_ff_layer *)base, g, x, lv_nmap_get(in, "paddings")));
}

/* ---- TransformerLayer ---- */

lv_params *lv_transformer_layer_params(void) {
  lv_params *p = lv_layer_base_params("TransformerLayer");
  lv_params_define_int(p, "source_dim", 0, "Dimension of the transformer block input.");
  lv_params_define_int(p, "output_dim", 0, "Dimension of the transformer block output (0: source_dim).");
  lv_params *at = lv_tr_atten_layer_params();
  LV_ASSERT(lv_params_set_int(at, "num_attention_heads", 8) == NULL);
  lv_params_define_params(p, "tr_atten_tpl", at, "Transformer Attention Layer params.");
  lv_params_define_params(p, "tr_post_ln_tpl", NULL, "(Optional) Layer norm at end of transformer layer.");
  lv_params *ff = lv_tr_ff_layer_params();
  LV_ASSERT(lv_params_set_int(ff, "hidden_dim", 2048) == NULL);
  lv_params_define_params(p, "tr_fflayer_tpl", ff, "Transformer Feed-Forward Layer params.");
  lv_params_define_bool(p, "has_aux_atten", false, "If set, introduces a second attention layer, which attends to "
                        "the auxiliary source contexts.");
  lv_params_define_params(p, "tr_aux_atten_tpl", NULL, "Transformer Attention Layer params.");
  lv_params_define_bool(p, "mask_self_atten", false, "If True, use masked self-attention.");
  lv_params_define_bool(p, "packed_input", false, "If True, each training example may pack multiple sequences "
                        "(not supported: must stay False).");
  lv_params_define_bool(p, "is_decoder", false, "(Deprecated) If true, forces both has_aux_atten and "
                        "mask_self_atten to true.");
  lv_params_define_int(p, "num_aux_atten_post_proj", 1, "Number of post projections for aux attention (lingvoc "
                       "supports 1).");
  lv_params_define_bool(p, "remat", false, "If to rematerialize the layer. If true, intermediate tensors are not "
                        "saved in FProp(): backward runs the layer's forward again (training memory for step time).");
  return p;
}

static lv_status transformer_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_transformer_layer *l = (lv_transformer_layer *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  const char *sc = base->scope;
  l->source_dim = lv_params_int(p, "source_dim");
  bool dec = lv_params_bool(p, "is_decoder");
  l->has_aux_atten = dec || lv_params_bool(p, "has_aux_atten");
  l->mask_self_atten = dec || lv_params_bool(p, "mask_self_atten");
  l->remat = lv_params_bool(p, "remat");
  if (l->source_dim <= 0) return lv_status_make(LV_ERR_INVALID, "%s: source_dim must be > 0", sc);
  if (lv_params_bool(p, "packed_input"))
    return lv_status_make(LV_ERR_INVALID, "%s: packed_input=True is not supported", sc);
  if (lv_params_int(p, "num_aux_atten_post_proj") != 1)
    return lv_status_make(LV_ERR_INVALID, "%s: num_aux_atten_post_proj must be 1", sc);
  lv_layer *c = NULL;
  LV_TRY(child_params(base, "tr_atten_tpl", "TransformerAttentionLayer", &l->self_p));
  SET(int, l->self_p, "source_dim", l->source_dim);
  SET(bool, l->self_p, "is_masked", l->mask_self_atten);
  LV_TRY(child_create(base, l->self_p, "tr_atten_tpl", "multihead_self_atten", &c));
  l->self_atten = (lv_tr_atten_layer *)c;
  if (l->has_aux_atten) {
    const char *key = lv_params_sub(p, "tr_aux_atten_tpl") ? "tr_aux_atten_tpl" : "tr_atten_tpl";
    LV_TRY(child_params(base, key, "TransformerAttentionLayer", &l->aux_p));
    SET(int, l->aux_p, "source_dim", l->source_dim);
    LV_TRY(child_create(base, l->aux_p, key, "multihead_atten", &c));
    l->atten = (lv_tr_atten_layer *)c;
  }
  LV_TRY(child_params(base, "tr_fflayer_tpl", "TransformerFeedForwardLayer", &l->ff_p));
  SET(int, l->ff_p, "input_dim", l->source_dim);
  SET(int, l->ff_p, "output_dim", lv_params_int(p, "output_dim"));
  LV_TRY(child_create(base, l->ff_p, "tr_fflayer_tpl", "tr_fflayer", &c));
  l->fflayer = (lv_tr_ff_layer *)c;
  if (lv_params_sub(p, "tr_post_ln_tpl")) {
    LV_TRY(child_params(base, "tr_post_ln_tpl", "LayerNorm", &l->post_ln_p));
    SET(int, l->post_ln_p, "input_dim", l->source_dim);
    LV_TRY(child_create(base, l->post_ln_p, "tr_post_ln_tpl", "tr_post_layer_norm", &c));
    l->post_ln = (lv_layer_norm_layer *)c;
  }
  return NULL;
}

static void transformer_destroy(lv_layer *base) {
  lv_transformer_layer *l = (lv_transformer_layer *)base;
  lv_layer_free((lv_layer *)l->self_atten);
  lv_layer_free((lv_layer *)l->atten);
  lv_layer_free((lv_layer *)l->fflayer);
  lv_layer_free((lv_layer *)l->post_ln);
  lv_params_free(l->self_p);
  lv_params_free(l->aux_p);
  lv_params_free(l->ff_p);
  lv_params_free(l->post_ln_p);
}

bool lv_transformer_layer_pack_aux(lv_transformer_layer *l, lv_graph *g, lv_tensor *aux_vecs,
                                   lv_tensor *aux_paddings, lv_atten_packed *packed) {
  memset(packed, 0, sizeof *packed);
  if (!l->atten) {
    lv_graph_fail(g, "%s: has no aux attention (has_aux_atten is False)", l->base.scope);
    return false;
  }
  return lv_tr_atten_layer_pack_source(l->atten, g, aux_vecs, aux_paddings, packed);
}

static lv_tensor *transformer_tail(lv_transformer_layer *l, lv_graph *g, lv_tensor *h, lv_tensor *paddings) {
  h = lv_tr_ff_layer_fprop(l->fflayer, g, h, paddings);
  return l->post_ln ? lv_layer_norm_layer_fprop(l->post_ln, g, h) : h;
}

static bool layer_fprop(lv_transformer_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings, lv_tensor *aux_vecs,
                        lv_tensor *aux_paddings, lv_tensor **out, lv_tensor **probs);

/* remat: the layer's inputs in[0..] are x, then paddings, aux_vecs, aux_paddings where given. */
typedef struct remat_args {
  lv_transformer_layer *l;
  bool has[3];
} remat_args;

static lv_tensor *remat_fprop(lv_graph *g, const void *ctx, lv_tensor *const *in) {
  const remat_args *a = ctx;
  lv_tensor *opt[3] = {NULL, NULL, NULL}, *y;
  for (int i = 0, k = 1; i < 3; i++)
    if (a->has[i]) opt[i] = in[k++];
  return layer_fprop(a->l, g, in[0], opt[0], opt[1], opt[2], &y, NULL) ? y : NULL;
}

bool lv_transformer_layer_fprop(lv_transformer_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings,
                                lv_tensor *aux_vecs, lv_tensor *aux_paddings, lv_tensor **out, lv_tensor **probs) {
  if (!l->remat || probs || !x) return layer_fprop(l, g, x, paddings, aux_vecs, aux_paddings, out, probs);
  remat_args a = {l, {paddings != NULL, aux_vecs != NULL, aux_paddings != NULL}};
  lv_tensor *in[4] = {x};
  int n = 1;
  if (paddings) in[n++] = paddings;
  if (aux_vecs) in[n++] = aux_vecs;
  if (aux_paddings) in[n++] = aux_paddings;
  *out = lv_graph_remat(g, remat_fprop, &a, sizeof a, n, in);
  return *out != NULL;
}

static bool layer_fprop(lv_transformer_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings, lv_tensor *aux_vecs,
                        lv_tensor *aux_paddings, lv_tensor **out, lv_tensor **probs) {
  *out = NULL;
  if (probs) *probs = NULL;
  if (!x) return false;
  if (paddings && (x->shape.rank != 3 || paddings->shape.rank != 2 || paddings->shape.d[0] != x->shape.d[0] ||
                   paddings->shape.d[1] != x->shape.d[1])) {
    char s1[96], s2[96];
    lv_graph_fail(g, "%s: paddings %s do not match the input %s (want [T, B] of [T, B, D])", l->base.scope,
                  lv_shape_str(&paddings->shape, s1, sizeof s1), lv_shape_str(&x->shape, s2, sizeof s2));
    return false;
  }
  lv_tensor *h;
  if (!lv_tr_atten_layer_fprop(l->self_atten, g, x, paddings, NULL, &h, l->atten ? NULL : probs)) return false;
  if (l->atten) {
    if (!aux_vecs) {
      lv_graph_fail(g, "%s: has_aux_atten needs aux_vecs (the encoder output)", l->base.scope);
      return false;
    }
    if (!lv_tr_atten_layer_fprop(l->atten, g, h, aux_paddings, aux_vecs, &h, probs)) return false;
  }
  *out = transformer_tail(l, g, h, paddings);
  return *out != NULL;
}

bool lv_transformer_layer_extend_step(lv_transformer_layer *l, lv_graph *g, lv_tensor *x, lv_tr_cache *cache,
                                      const lv_atten_packed *aux, lv_tensor **out) {
  return lv_transformer_layer_extend_step_probs(l, g, x, cache, aux, out, NULL);
}

bool lv_transformer_layer_extend_step_probs(lv_transformer_layer *l, lv_graph *g, lv_tensor *x, lv_tr_cache *cache,
                                            const lv_atten_packed *aux, lv_tensor **out, lv_tensor **aux_probs) {
  *out = NULL;
  if (aux_probs) *aux_probs = NULL;
  lv_tensor *h;
  if (!lv_tr_atten_layer_extend_step(l->self_atten, g, x, cache, &h, NULL)) return false;
  if (l->atten) {
    if (!aux || !aux->vecs) {
      lv_graph_fail(g, "%s: ExtendStep needs the packed aux source (lv_transformer_layer_pack_aux)", l->base.scope);
      return false;
    }
    int64_t B = h->shape.d[0], D = h->shape.d[1];
    lv_tensor *h3, *p = NULL;
    if (!lv_tr_atten_layer_fprop_packed(l->atten, g, lv_op_reshape(g, h, lv_shape3(1, B, D)), aux, &h3,
                                        aux_probs ? &p : NULL))
      return false;
    h = lv_op_reshape(g, h3, lv_shape2(B, D));
    if (aux_probs) {
      if (!p) return false;
      *aux_probs = lv_op_reshape(g, p, lv_shape2(B, p->shape.d[2]));
    }
  }
  *out = transformer_tail(l, g, h, NULL);
  return *out != NULL;
}

static bool transformer_fprop(lv_layer *base, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_tensor *x = lv_layer_in(base, g, in, "act"), *y, *probs;
  lv_tensor *pads = lv_layer_in(base, g, in, "paddings");
  if (!x || !pads ||
      !lv_transformer_layer_fprop((lv_transformer_layer *)base, g, x, pads, lv_nmap_get(in, "aux_vecs"),
                                  lv_nmap_get(in, "aux_paddings"), &y, &probs))
    return false;
  return lv_layer_set_out(base, g, out, "act", y) && lv_layer_set_out(base, g, out, "probs", probs);
}

static bool same_shape_out(const lv_layer *l, lv_shape in, lv_shape *out) {
  (void)l;
  *out = in;
  return true;
}

const lv_layer_class lv_tr_atten_layer_class = {
    .cls = "TransformerAttentionLayer",
    .params = lv_tr_atten_layer_params,
    .size = sizeof(lv_tr_atten_layer),
    .create = tr_atten_create,
    .fprop = tr_atten_fprop,
    .out_shape = same_shape_out,
    .destroy = tr_atten_destroy,
};

const lv_layer_class lv_tr_ff_layer_class = {
    .cls = "TransformerFeedForwardLayer",
    .params = lv_tr_ff_layer_params,
    .size = sizeof(lv_tr_ff_layer),
    .create = tr_ff_create,
    .fprop = tr_ff_fprop,
    .out_shape = same_shape_out,
    .destroy = tr_ff_destroy,
};

const lv_layer_class lv_transformer_layer_class = {
    .cls = "TransformerLayer",
    .params = lv_transformer_layer_params,
    .size = sizeof(lv_transformer_layer),
    .create = transformer_create,
    .fprop = transformer_fprop,
    .out_shape = same_shape_out,
    .destroy = transformer_destroy,
};
