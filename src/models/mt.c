/* mt.model.TransformerModel: see mt.h. Params follow Lingvo's TransformerModel.Params()
 * (encoder = TransformerEncoder, decoder = TransformerDecoder) with the keys the lingvoc
 * layers implement; unsupported Lingvo options (shared_emb, task_emb, packed_input,
 * is_transparent, ln_output, emb projections) are left out rather than ignored. */
#include "models/mt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "layers/embedding.h"
#include "layers/full_softmax.h"
#include "search/seq_decode.h"

#define MT_MAX_LAYERS 64
#define MT_MAX_CHILD_PARAMS (2 * MT_MAX_LAYERS + 8)

typedef struct mt_side {
  lv_embedding_layer *emb;
  lv_positional_embedding_layer *pos;
  int num_layers;
  lv_transformer_layer *layers[MT_MAX_LAYERS];
  double input_dropout_prob;
  int64_t model_dim;
} mt_side;

typedef struct mt_model {
  lv_task base;
  mt_side enc, dec;
  lv_softmax_layer *softmax;
  float smoothing; /* UniformLabelSmoother uncertainty; 0 without label_smoothing */
  bool per_word_avg_loss;
  uint64_t seed;
  lv_params *child_params[MT_MAX_CHILD_PARAMS];
  int nchild_params;
} mt_model;

/* token_emb (EmbeddingLayer: vocab 32000, dim 1024, 16 shards, Gaussian 1/sqrt(1024),
 * scaled by sqrt(dim)) and position_emb (dim 1024), as Lingvo's encoder and decoder
 * define them. */
static void define_embeddings(lv_params *p, const char *emb_doc, const char *pos_doc) {
  lv_params *emb = NULL, *pos = NULL;
  LV_ASSERT(!lv_registry_instantiate("EmbeddingLayer", &emb));
  LV_ASSERT(!lv_params_set_int(emb, "vocab_size", 32000));
  LV_ASSERT(!lv_params_set_int(emb, "embedding_dim", 1024));
  LV_ASSERT(!lv_params_set_int(emb, "max_num_shards", 16));
  LV_ASSERT(!lv_params_set_string(emb, "params_init.method", "gaussian"));
  LV_ASSERT(!lv_params_set_float(emb, "params_init.scale", 1.0 / sqrt(1024.0)));
  LV_ASSERT(!lv_params_set_bool(emb, "scale_sqrt_depth", true));
  lv_params_define_params(p, "token_emb", emb, emb_doc);
  LV_ASSERT(!lv_registry_instantiate("PositionalEmbeddingLayer", &pos));
  LV_ASSERT(!lv_params_set_int(pos, "embedding_dim", 1024));
  lv_params_define_params(p, "position_emb", pos, pos_doc);
}

static lv_params *encoder_params(void) {
  lv_params *p = lv_layer_base_params("TransformerEncoder");
  lv_params *tr = NULL;
  define_embeddings(p, "Embedding layer params.", "Positional Embedding layer params.");
  lv_params_define_int(p, "model_dim", 1024, "Characteristic depth (dimension).");
  lv_params_define_float(p, "input_dropout_prob", 0.0, "Prob at which we do input dropout.");
  lv_params *stack = lv_params_new_cls("TransformerStack");
  lv_params_define_int(stack, "num_transformer_layers", 6, "Number of transformer layers.");
  LV_ASSERT(!lv_registry_instantiate("TransformerLayer", &tr));
  LV_ASSERT(!lv_params_set_int(tr, "tr_atten_tpl.num_attention_heads", 8));
  LV_ASSERT(!lv_params_set_int(tr, "tr_fflayer_tpl.hidden_dim", 8192));
  lv_params_define_params(stack, "transformer_tpl", tr,
                          "TransformerLayer params (source_dim is set to model_dim; layers trans_0 ...).");
  lv_params_define_params(p, "transformer_stack", stack, "TransformerStack layer params.");
  return p;
}

static lv_params *decoder_params(void) {
  lv_params *p = lv_layer_base_params("TransformerDecoder");
  lv_params *tr = NULL, *sm = NULL;
  define_embeddings(p, "Token embedding layer params.", "Position embedding layer params.");
  lv_params_define_int(p, "source_dim", 1024, "Dimension of encoder outputs.");
  lv_params_define_int(p, "model_dim", 1024,
                       "Model dimension that applies to embedding layers and all Transformer layers.");
  lv_params_define_int(p, "num_trans_layers", 6, "Number of Transformer layers.");
  LV_ASSERT(!lv_registry_instantiate("TransformerLayer", &tr));
  LV_ASSERT(!lv_params_set_int(tr, "tr_atten_tpl.num_attention_heads", 8));
  LV_ASSERT(!lv_params_set_int(tr, "tr_fflayer_tpl.hidden_dim", 2048));
  lv_params_define_params(p, "trans_tpl", tr,
                          "Transformer layer params (source_dim = model_dim, with encoder attention and a causal "
                          "self-attention; layers trans_layer_0 ...).");
  lv_params_define_float(p, "input_dropout_prob", 0.0, "Prob at which we do input dropout.");
  LV_ASSERT(!lv_registry_instantiate("SimpleFullSoftmax", &sm));
  LV_ASSERT(!lv_params_set_int(sm, "num_classes", 32000));
  LV_ASSERT(!lv_params_set_int(sm, "num_shards", 8));
  lv_params_define_params(p, "softmax", sm, "Softmax params.");
  /* TransformerDecoder's length_normalization 0.5 (BeamSearchHelper's own is 0.0). */
  lv_mt_define_decoder_params(p, 0.5, 0.0);
  return p;
}

static lv_params *transformer_model_params(void) {
  lv_params *p = lv_task_base_params("mt.model.TransformerModel");
  lv_params_define_params(p, "encoder", encoder_params(), "Encoder params.");
  lv_params_define_params(p, "decoder", decoder_params(), "Decoder params.");
  return p;
}

static void mt_destroy(lv_task *t) {
  mt_model *m = (mt_model *)t;
  mt_side *sides[2] = {&m->enc, &m->dec};
  for (int s = 0; s < 2; s++) {
    lv_layer_free((lv_layer *)sides[s]->emb);
    lv_layer_free((lv_layer *)sides[s]->pos);
    for (int i = 0; i < sides[s]->num_layers; i++) lv_layer_free((lv_layer *)sides[s]->layers[i]);
  }
  lv_layer_free((lv_layer *)m->softmax);
  for (int i = 0; i < m->nchild_params; i++) lv_params_free(m->child_params[i]);
  lv_task_free_decode_state(t);
  free(m);
}

/* A frozen copy of src named name (owned by m), for a child layer. */
static lv_params *child_params(mt_model *m, const lv_params *src, const char *name) {
  LV_ASSERT(m->nchild_params < MT_MAX_CHILD_PARAMS);
  lv_params *p = lv_params_copy(src);
  m->child_params[m->nchild_params++] = p;
  if (name) LV_ASSERT(!lv_params_set_string(p, "name", name));
  return p;
}

static lv_status make_layer(lv_params *p, const char *scope, lv_varstore *vs, lv_layer **out) {
  lv_params_freeze(p);
  return lv_layer_create(p, scope, vs, out);
}

/* Lingvo's MTBaseModel creates its sides as children 'enc' and 'dec', and CreateChild names
 * a child whose params leave name empty after it: variables transformer/enc/...,
 * transformer/dec/... */
static const char *side_name(const lv_params *sp, bool dec) {
  const char *n = lv_params_str(sp, "name");
  return *n ? n : dec ? "dec" : "enc";
}

/* Embeddings and layers of one side; key "encoder" or "decoder". */
static lv_status build_side(mt_model *m, const lv_params *p, const char *key, const char *task_name, lv_varstore *vs,
                            mt_side *side) {
  bool dec = strcmp(key, "decoder") == 0;
  const lv_params *sp = lv_params_sub(p, key);
  char scope[256];
  snprintf(scope, sizeof scope, "%s/%s", task_name, side_name(sp, dec));
  char where[32];
  snprintf(where, sizeof where, "task.%s", key);
  LV_TRY(lv_layer_scope_vn(vs, scope, sp, where));
  side->model_dim = lv_params_int(sp, "model_dim");
  side->input_dropout_prob = lv_params_float(sp, "input_dropout_prob");
  if (!(side->input_dropout_prob >= 0 && side->input_dropout_prob < 1)) /* NaN too */
    return lv_status_make(LV_ERR_INVALID, "task.%s.input_dropout_prob must be in [0, 1), got %g", key,
                          side->input_dropout_prob);
  int64_t d = side->model_dim;
  if (lv_params_int(sp, "token_emb.embedding_dim") != d || lv_params_int(sp, "position_emb.embedding_dim") != d)
    return lv_status_make(LV_ERR_INVALID,
                          "task.%s: token_emb.embedding_dim (%lld) and position_emb.embedding_dim (%lld) must equal "
                          "model_dim (%lld) (lingvoc has no emb_proj)",
                          key, (long long)lv_params_int(sp, "token_emb.embedding_dim"),
                          (long long)lv_params_int(sp, "position_emb.embedding_dim"), (long long)d);
  lv_layer *l = NULL;
  LV_TRY(lv_status_wrap(make_layer(child_params(m, lv_params_sub(sp, "token_emb"), "token_emb"), scope, vs, &l),
                        "task.%s.token_emb", key));
  side->emb = (lv_embedding_layer *)l;
  LV_TRY(lv_status_wrap(make_layer(child_params(m, lv_params_sub(sp, "position_emb"), "position_emb"), scope, vs, &l),
                        "task.%s.position_emb", key));
  side->pos = (lv_positional_embedding_layer *)l;
  int64_t n = dec ? lv_params_int(sp, "num_trans_layers") : lv_params_int(sp, "transformer_stack.num_transformer_layers");
  if (n < 1 || n > MT_MAX_LAYERS)
    return lv_status_make(LV_ERR_INVALID, "task.%s.%s must be in [1, %d], got %lld", key,
                          dec ? "num_trans_layers" : "transformer_stack.num_transformer_layers", MT_MAX_LAYERS,
                          (long long)n);
  const lv_params *tpl = lv_params_sub(sp, dec ? "trans_tpl" : "transformer_stack.transformer_tpl");
  if (!tpl) return lv_status_make(LV_ERR_INVALID, "task.%s: the transformer layer template is None", key);
  for (int i = 0; i < n; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, dec ? "trans_layer_%d" : "trans_%d", i);
    lv_params *lp = child_params(m, tpl, nm);
    LV_TRY(lv_params_set_int(lp, "source_dim", d));
    if (dec) {
      LV_TRY(lv_params_set_bool(lp, "has_aux_atten", true));
      LV_TRY(lv_params_set_bool(lp, "mask_self_atten", true));
    }
    LV_TRY(lv_status_wrap(make_layer(lp, scope, vs, &l), "task.%s.%s", key, nm));
    side->layers[i] = (lv_transformer_layer *)l;
    side->num_layers = i + 1;
  }
  return NULL;
}

static lv_status build(mt_model *m, const lv_params *p, lv_varstore *vs) {
  const char *name = lv_params_str(p, "name");
  if (!*name) return lv_status_make(LV_ERR_INVALID, "task.name must be set (e.g. \"transformer\")");
  LV_TRY(build_side(m, p, "encoder", name, vs, &m->enc));
  LV_TRY(build_side(m, p, "decoder", name, vs, &m->dec));
  const lv_params *dp = lv_params_sub(p, "decoder");
  int64_t v = lv_params_int(dp, "token_emb.vocab_size");
  if (lv_params_int(dp, "softmax.num_classes") != v)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.softmax.num_classes (%lld) must equal "
                          "task.decoder.token_emb.vocab_size (%lld)",
                          (long long)lv_params_int(dp, "softmax.num_classes"), (long long)v);
  if (lv_params_int(dp, "source_dim") != m->enc.model_dim)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.source_dim (%lld) must equal task.encoder.model_dim (%lld)",
                          (long long)lv_params_int(dp, "source_dim"), (long long)m->enc.model_dim);
  if (m->enc.model_dim != m->dec.model_dim)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.model_dim (%lld) must equal task.encoder.model_dim (%lld): "
                          "the encoder attention projects to model_dim",
                          (long long)m->dec.model_dim, (long long)m->enc.model_dim);
  lv_params *sp = child_params(m, lv_params_sub(dp, "softmax"), "softmax");
  if (lv_params_int(sp, "input_dim") == 0) LV_TRY(lv_params_set_int(sp, "input_dim", m->dec.model_dim));
  if (lv_params_int(sp, "input_dim") != m->dec.model_dim)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.softmax.input_dim (%lld) must be model_dim (%lld) or 0",
                          (long long)lv_params_int(sp, "input_dim"), (long long)m->dec.model_dim);
  char scope[256];
  snprintf(scope, sizeof scope, "%s/%s", name, side_name(dp, true));
  lv_layer *l = NULL;
  LV_TRY(lv_status_wrap(make_layer(sp, scope, vs, &l), "task.decoder.softmax"));
  m->softmax = (lv_softmax_layer *)l;
  LV_TRY(lv_mt_label_smoothing(dp, "mt.model.TransformerModel", &m->smoothing));
  m->per_word_avg_loss = lv_params_bool(dp, "per_word_avg_loss");
  m->seed = lv_params_is_set(p, "random_seed") ? (uint64_t)lv_params_int(p, "random_seed") : 0x7a5f0e11ull;
  return NULL;
}

static lv_status mt_create(const lv_params *p, const lv_params *input_p, lv_varstore *vs, lv_task **out) {
  (void)input_p;
  mt_model *m = calloc(1, sizeof *m);
  LV_ASSERT(m);
  m->base.cls = &lv_mt_transformer_model;
  m->base.p = p;
  lv_status s = build(m, p, vs);
  if (s) {
    mt_destroy(&m->base);
    return s;
  }
  *out = &m->base;
  return NULL;
}

int64_t lv_mt_transformer_vocab_size(const lv_task *t) { return ((const mt_model *)t)->softmax->num_classes; }

static const int kSwap01[3] = {1, 0, 2};

/* ids [B, T] -> time-major input embeddings [T, B, D]: token embeddings (x sqrt(d) as
 * configured) + positions, then input dropout when training. */
static lv_tensor *embed(mt_model *m, mt_side *side, lv_graph *g, lv_tensor *ids, uint64_t stream) {
  if (!ids || ids->shape.rank != 2) {
    lv_graph_fail(g, "%s: ids must be [batch, time]", side->emb->base.scope);
    return NULL;
  }
  int64_t T = ids->shape.d[1];
  lv_tensor *x = lv_embedding_layer_lookup(side->emb, g, ids);
  lv_tensor *pos = lv_positional_embedding_fprop(side->pos, g, T);
  if (!x || !pos) return NULL;
  x = lv_op_transpose(g, lv_op_add(g, x, pos), kSwap01);
  if (side->input_dropout_prob > 0 && lv_graph_is_training(g))
    x = lv_op_dropout(g, x, (float)(1.0 - side->input_dropout_prob), m->seed, stream);
  return x;
}

static lv_tensor *transpose2(lv_graph *g, lv_tensor *x) {
  static const int perm[2] = {1, 0};
  return x ? lv_op_transpose(g, x, perm) : NULL;
}

bool lv_mt_transformer_encode(lv_task *t, lv_graph *g, lv_tensor *src_ids, lv_tensor *src_paddings,
                              lv_tensor **vecs, lv_tensor **paddings) {
  mt_model *m = (mt_model *)t;
  lv_tensor *x = embed(m, &m->enc, g, src_ids, lv_graph_next_stream(g));
  lv_tensor *pads = transpose2(g, src_paddings);
  if (!x || !pads) return false;
  for (int i = 0; i < m->enc.num_layers; i++)
    if (!lv_transformer_layer_fprop(m->enc.layers[i], g, x, pads, NULL, NULL, &x, NULL)) return false;
  *vecs = x;
  *paddings = pads;
  return true;
}

/* Teacher-forced decoder output [T, B, D] (the softmax input). */
static lv_tensor *decoder_fprop(mt_model *m, lv_graph *g, lv_tensor *vecs, lv_tensor *paddings, lv_tensor *tgt_ids,
                                lv_tensor *tgt_paddings) {
  lv_tensor *x = embed(m, &m->dec, g, tgt_ids, lv_graph_next_stream(g));
  lv_tensor *pads = transpose2(g, tgt_paddings);
  if (!x || !pads) return NULL;
  for (int i = 0; i < m->dec.num_layers; i++)
    if (!lv_transformer_layer_fprop(m->dec.layers[i], g, x, pads, vecs, paddings, &x, NULL)) return NULL;
  return x;
}

bool lv_mt_transformer_log_probs(lv_task *t, lv_graph *g, lv_tensor *vecs, lv_tensor *paddings,
                                 lv_tensor *tgt_ids, lv_tensor *tgt_paddings, lv_tensor **log_probs) {
  mt_model *m = (mt_model *)t;
  lv_tensor *x = decoder_fprop(m, g, vecs, paddings, tgt_ids, tgt_paddings);
  if (!x) return false;
  *log_probs = lv_op_log_softmax(g, lv_softmax_layer_logits(m->softmax, g, x));
  return *log_probs != NULL;
}

static bool mt_fprop(lv_task *t, lv_graph *g, lv_batch *b, bool is_eval, int64_t step, lv_metrics *mt) {
  (void)step;
  mt_model *m = (mt_model *)t;
  lv_mt_batch in;
  if (!lv_mt_batch_get(g, b, "mt.model.TransformerModel", &in)) return false;
  lv_tensor *vecs, *pads;
  if (!lv_mt_transformer_encode(t, g, in.src_ids, in.src_paddings, &vecs, &pads)) return false;
  lv_tensor *x = decoder_fprop(m, g, vecs, pads, in.tgt_ids, in.tgt_paddings);
  if (!x) return false;
  return lv_mt_softmax_metrics(m->softmax, g, x, in.tgt_labels, in.tgt_weights, m->smoothing, m->per_word_avg_loss,
                               is_eval, "mt.model.TransformerModel", mt);
}

/* ---- incremental decoding ---- */

lv_status lv_mt_decode_state_init(lv_task *t, lv_graph *g, lv_tensor *vecs, lv_tensor *paddings,
                                  lv_mt_decode_state *st) {
  mt_model *m = (mt_model *)t;
  memset(st, 0, sizeof *st);
  st->task = t;
  st->g = g;
  st->num_layers = m->dec.num_layers;
  st->batch = vecs->shape.d[1];
  st->packed = calloc((size_t)st->num_layers, sizeof *st->packed);
  LV_ASSERT(st->packed);
  lv_tr_step_caches_init(&st->kv, g, st->num_layers, "mt decoder");
  for (int i = 0; i < st->num_layers; i++)
    if (!lv_transformer_layer_pack_aux(m->dec.layers[i], g, vecs, paddings, &st->packed[i]))
      return lv_status_wrap(lv_graph_status(g), "mt decoder: packing the encoder output");
  /* Source lengths (sum of 1 - padding) for the attention probs given to beam search. */
  st->src_len = paddings->shape.d[0];
  float *hp = malloc(sizeof(float) * (size_t)(st->src_len * st->batch));
  st->src_lens = calloc((size_t)st->batch, sizeof *st->src_lens);
  LV_ASSERT(hp && st->src_lens);
  lv_status s = lv_tensor_to_host(paddings, hp);
  for (int64_t k = 0; !s && k < st->src_len; k++)
    for (int64_t b = 0; b < st->batch; b++) st->src_lens[b] += hp[k * st->batch + b] < 0.5f;
  free(hp);
  if (s) return s;
  st->mark = lv_graph_get_mark(g);
  return NULL;
}

void lv_mt_decode_state_free(lv_mt_decode_state *st) {
  lv_tr_step_caches_free(&st->kv);
  free(st->src_lens);
  free(st->probs_scratch);
  free(st->packed);
  memset(st, 0, sizeof *st);
}

lv_status lv_mt_decode_step(lv_mt_decode_state *st, int n, const int32_t *step_ids, const int32_t *parent,
                            float *log_probs) {
  return lv_mt_decode_step_probs(st, n, step_ids, parent, log_probs, NULL);
}

/* Adds layer probs p [n, S] (host), EOS-removed and renormalized, times w into acc. */
static void add_layer_probs(const lv_mt_decode_state *st, int n, const float *p, float w, float *acc) {
  const int64_t S = st->src_len;
  for (int i = 0; i < n; i++) {
    const float *r = p + (int64_t)i * S;
    float *a = acc + (int64_t)i * S;
    int64_t eos = st->src_lens[i % st->batch] - 1;
    double sum = 0;
    for (int64_t k = 0; k < S; k++) sum += k == eos ? 0.0 : r[k];
    float inv = (float)(1.0 / (sum + 1e-6));
    for (int64_t k = 0; k < S; k++) a[k] += k == eos ? 0.0f : w * r[k] * inv;
  }
}

lv_status lv_mt_decode_step_probs(lv_mt_decode_state *st, int n, const int32_t *step_ids, const int32_t *parent,
                                  float *log_probs, float *atten_probs) {
  mt_model *m = (mt_model *)st->task;
  lv_graph *g = st->g;
  if (n <= 0 || n % st->batch)
    return lv_status_make(LV_ERR_INVALID, "mt decoder step: %d rows is not a multiple of the batch %lld", n,
                          (long long)st->batch);
  if (st->step > 0 && !parent && n != st->rows)
    return lv_status_make(LV_ERR_INVALID, "mt decoder step: %d rows without parents after a step of %lld rows", n,
                          (long long)st->rows);
  int64_t V = m->softmax->num_classes;
  for (int i = 0; i < n; i++)
    if (step_ids[i] < 0 || step_ids[i] >= V)
      return lv_status_make(LV_ERR_INVALID, "mt decoder step: step_ids[%d] = %d is outside [0, %lld)", i,
                            step_ids[i], (long long)V);
  if (st->step > 0 && parent)
    for (int i = 0; i < n; i++)
      if (parent[i] < 0 || parent[i] >= st->rows)
        return lv_status_make(LV_ERR_INVALID, "mt decoder step: parent[%d] = %d is outside [0, %lld)", i, parent[i],
                              (long long)st->rows);
  if (parent && n == st->rows) {
    /* Rows that continue themselves (greedy search) need no reorder of the caches. */
    bool same = true;
    for (int i = 0; same && i < n; i++) same = parent[i] == i;
    if (same) parent = NULL;
  }
  lv_graph_rewind(g, &st->mark);
  if (st->step > 0) LV_TRY(lv_tr_step_caches_prepare(&st->kv, st->step, st->rows, n, parent));
  lv_tensor hi = lv_tensor_view(LV_I32, lv_shape1(n), (void *)step_ids);
  lv_tensor *ids = lv_graph_from_host(g, &hi);
  lv_tensor *x = ids ? lv_embedding_layer_lookup(m->dec.emb, g, ids) : NULL; /* [n, D] */
  lv_tensor *pos = lv_positional_embedding_fprop(m->dec.pos, g, st->step + 1);
  if (x && pos) x = lv_op_add(g, x, lv_op_slice(g, pos, 0, st->step, 1));
  if (atten_probs) memset(atten_probs, 0, sizeof(float) * (size_t)n * (size_t)st->src_len);
  for (int i = 0; x && i < st->num_layers; i++) {
    lv_tensor *pr = NULL;
    if (!lv_transformer_layer_extend_step_probs(m->dec.layers[i], g, x, &st->kv.cache[i], &st->packed[i], &x,
                                                atten_probs ? &pr : NULL))
      x = NULL;
    else if (atten_probs) {
      float *h = realloc(st->probs_scratch, sizeof(float) * (size_t)n * (size_t)st->src_len);
      LV_ASSERT(h);
      st->probs_scratch = h;
      LV_TRY(lv_tensor_to_host(pr, h));
      add_layer_probs(st, n, h, 1.0f / (float)st->num_layers, atten_probs);
    }
  }
  lv_tensor *lp = x ? lv_op_log_softmax(g, lv_softmax_layer_logits(m->softmax, g, x)) : NULL;
  if (!lp) {
    lv_status s = lv_graph_status(g);
    return s ? lv_status_wrap(s, "mt decoder step %d", st->step)
             : lv_status_make(LV_ERR_INTERNAL, "mt decoder step %d failed", st->step);
  }
  /* The first step's caches [1, n, .] are in the graph: move them to buffers. */
  if (st->step == 0) LV_TRY(lv_tr_step_caches_keep_first(&st->kv));
  LV_TRY(lv_tensor_to_host(lp, log_probs));
  st->rows = n;
  st->step++;
  return NULL;
}

/* ---- the decoder job's incremental decoder (search/seq_decode.h) ---- */

static lv_status tr_decode_begin(lv_task *t, lv_graph *g, const lv_batch *b, int64_t *atten_len, int32_t *atten_lens,
                                void **state) {
  *state = NULL;
  lv_tensor *src_ids, *src_paddings;
  LV_TRY(lv_mt_decode_source(g, b, "mt decoder", &src_ids, &src_paddings, atten_len, atten_lens));
  lv_tensor *vecs, *pads;
  if (!lv_mt_transformer_encode(t, g, src_ids, src_paddings, &vecs, &pads)) {
    lv_status s = lv_graph_status(g);
    return s ? lv_status_wrap(s, "mt decoder: encoding the source")
             : lv_status_make(LV_ERR_INTERNAL, "mt decoder: encoding the source failed");
  }
  lv_mt_decode_state *st = calloc(1, sizeof *st);
  LV_ASSERT(st);
  lv_status s = lv_mt_decode_state_init(t, g, vecs, pads, st);
  if (s) {
    lv_mt_decode_state_free(st);
    free(st);
    return s;
  }
  *state = st;
  return NULL;
}

static lv_status tr_decode_step(void *state, int n, const int32_t *step_ids, const int32_t *parent, float *log_probs,
                                float *atten_probs) {
  return lv_mt_decode_step_probs(state, n, step_ids, parent, log_probs, atten_probs);
}

static void tr_decode_end(void *state) {
  if (!state) return;
  lv_mt_decode_state_free(state);
  free(state);
}

static int64_t tr_vocab_size(const lv_task *t) { return lv_mt_transformer_vocab_size(t); }

/* float32 key/value caches outside the graph (two pairs per layer, up to 2T steps as they
 * double) and one step's graph memory (attention over T steps and S sources, logits). */
static int64_t tr_row_bytes(const lv_task *t, const lv_batch *b, int64_t target_seq_len) {
  const mt_model *m = (const mt_model *)t;
  int64_t src_len = lv_mt_source_len(b);
  int64_t T = target_seq_len, D = m->dec.model_dim, L = m->dec.num_layers;
  return 4 * (4 * L * 2 * T * D + 16 * (T + src_len) * D + 2 * m->softmax->num_classes);
}

static const lv_seq_decode_ops kTransformerDecodeOps = {
    .vocab_size = tr_vocab_size,
    .atten_probs = true,
    .row_bytes = tr_row_bytes,
    .begin = tr_decode_begin,
    .step = tr_decode_step,
    .end = tr_decode_end,
};

const lv_task_class lv_mt_transformer_model = {
    .cls = "mt.model.TransformerModel",
    .params = transformer_model_params,
    .create = mt_create,
    .fprop = mt_fprop,
    .destroy = mt_destroy,
    LV_SEQ_DECODE_HOOKS(lv_seq_decoder_setup, &kTransformerDecodeOps),
};
