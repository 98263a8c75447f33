/* RnnLm, RnnLmNoEmbedding and TransformerLm (Lingvo lingvo/tasks/lm/layers.py): see
 * lm_layers.h. Params carry Lingvo's names and defaults; Lingvo options lingvoc does not
 * implement (direct_features_dim > 0, a list of cell templates) are errors, not ignored. */
#include "layers/lm_layers.h"
#include "layers/sampled_softmax.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const lv_layer_class lv_rnn_lm_class;
extern const lv_layer_class lv_rnn_lm_no_emb_class;
extern const lv_layer_class lv_transformer_lm_class;

/* ---- params ---------------------------------------------------------------------- */

static lv_params *lm_base_params(const char *cls) {
  lv_params *p = lv_layer_base_params(cls);
  LV_ASSERT(!lv_params_set_string(p, "name", "lm"));
  lv_params_define_int(p, "vocab_size", 0, "Number of vocabulary tokens.");
  return p;
}

static void define_rnn_params(lv_params *p) {
  lv_params *rnns = lv_params_instantiate("StackedFRNNLayerByLayer");
  LV_ASSERT(!lv_params_set_string(rnns, "name", "rnns"));
  lv_params_define_params(p, "rnns", rnns,
                          "The stacked-RNNs layer params (cells `<rnns.name>_<i>` in this layer's scope; "
                          "num_input_nodes, if > 0, is the first cell's input width).");
  lv_params_define_params(p, "softmax", lv_params_instantiate("SimpleFullSoftmax"), "The softmax layer params.");
  lv_params_define_int(p, "direct_features_dim", 0,
                       "If > 0, then the number of dimensions of direct features that bypass the RNN and are "
                       "provided directly to the softmax input (lingvoc: must be 0).");
}

static void define_emb_params(lv_params *p) {
  lv_params *emb = lv_params_instantiate("EmbeddingLayer");
  LV_ASSERT(!lv_params_set_int(emb, "max_num_shards", 1));
  LV_ASSERT(!lv_params_set_string(emb, "name", "emb"));
  lv_params_define_params(p, "emb", emb, "The embedding layer params.");
}

lv_params *lv_rnn_lm_no_emb_params(void) {
  lv_params *p = lm_base_params("RnnLmNoEmbedding");
  define_rnn_params(p);
  return p;
}

lv_params *lv_rnn_lm_params(void) {
  lv_params *p = lm_base_params("RnnLm");
  define_rnn_params(p);
  define_emb_params(p);
  lv_params_define_float(p, "embedding_dropout_keep_prob", 1.0, "Embedding dropout keep prob.");
  lv_params_define_none(p, "embedding_dropout_seed", LV_PV_INT, "Embedding dropout seed.");
  return p;
}

lv_params *lv_transformer_lm_params(void) {
  lv_params *p = lm_base_params("TransformerLm");
  lv_params_define_params(p, "position_emb", lv_params_instantiate("PositionalEmbeddingLayer"),
                          "Position embedding layer params.");
  lv_params_define_int(p, "model_dim", 512,
                       "Model dimension that applies to embedding layers and all Transformer layers.");
  lv_params_define_int(p, "num_trans_layers", 6, "Number of Transformer layers.");
  lv_params *tr = lv_params_instantiate("TransformerLayer");
  LV_ASSERT(!lv_params_set_bool(tr, "is_decoder", false));
  LV_ASSERT(!lv_params_set_bool(tr, "mask_self_atten", true));
  LV_ASSERT(!lv_params_set_int(tr, "tr_atten_tpl.num_attention_heads", 8));
  LV_ASSERT(!lv_params_set_bool(tr, "tr_atten_tpl.atten_tpl.enable_ctx_pre_proj", true));
  LV_ASSERT(!lv_params_set_bool(tr, "tr_atten_tpl.atten_tpl.enable_ctx_post_proj", true));
  LV_ASSERT(!lv_params_set_int(tr, "tr_fflayer_tpl.hidden_dim", 2048));
  lv_params_define_params(p, "trans_tpl", tr, "Transformer Layer params (layers layer_0 ...).");
  lv_params_define_float(p, "input_dropout_prob", 0.0, "Prob at which we do input dropout.");
  lv_params_define_float(p, "residual_dropout_prob", 0.0,
                         "Dropout prob to the output of each sub-layer before it is added to the sub-layer input.");
  lv_params_define_float(p, "atten_dropout_prob", 0.0,
                         "Dropout prob to the attention weights in each Transformer attention sub-layer.");
  lv_params_define_float(p, "relu_dropout_prob", 0.0,
                         "Dropout prob to the inner layer output (ReLU activation) in each Transformer "
                         "feed-forward sub-layer.");
  lv_params_define_params(p, "softmax", lv_params_instantiate("SimpleFullSoftmax"), "The softmax layer params.");
  define_emb_params(p);
  return p;
}

/* ---- create ---------------------------------------------------------------------- */

lv_lm *lv_lm_of(lv_layer *l) {
  if (!l || (l->cls != &lv_rnn_lm_class && l->cls != &lv_rnn_lm_no_emb_class && l->cls != &lv_transformer_lm_class))
    return NULL;
  return (lv_lm *)l;
}

/* The softmax from p.softmax with input_dim and num_classes filled in where 0. */
static lv_status make_softmax(lv_lm *lm, const lv_params *p, int64_t input_dim) {
  char who[LV_VAR_NAME_MAX + 16];
  snprintf(who, sizeof who, "%s.softmax", lm->base.scope);
  lv_params *sp = NULL;
  LV_TRY(lv_owner_params(&lm->own, lv_params_sub(p, "softmax"), who, "softmax", &sp));
  /* num_sampled > 0: the LM trains through lv_sampled_softmax_fprop over the softmax's
   * variables; the SimpleFullSoftmax itself (this private copy of its params) is the full
   * softmax that evaluation, scoring and sampling use. */
  lm->num_sampled = lv_params_int(sp, "num_sampled");
  if (lm->num_sampled < 0 || lm->num_sampled > lm->vocab_size)
    return lv_status_make(LV_ERR_INVALID, "%s.num_sampled must be in [0, vocab_size=%lld], got %lld", who,
                          (long long)lm->vocab_size, (long long)lm->num_sampled);
  /* The accidental-hit test compares class ids as float32, exact up to 2^24. */
  if (lm->num_sampled > 0 && lm->vocab_size > (1 << 24))
    return lv_status_make(LV_ERR_INVALID, "%s.num_sampled: a sampled softmax over %lld classes is not supported "
                          "(at most 2^24 = 16777216)", who, (long long)lm->vocab_size);
  LV_TRY(lv_params_set_int(sp, "num_sampled", 0));
  if (lv_params_int(sp, "input_dim") == 0) LV_TRY(lv_params_set_int(sp, "input_dim", input_dim));
  if (lv_params_int(sp, "num_classes") == 0) LV_TRY(lv_params_set_int(sp, "num_classes", lm->vocab_size));
  if (lv_params_int(sp, "input_dim") != input_dim)
    return lv_status_make(LV_ERR_INVALID, "%s.input_dim (%lld) must be the last layer's output width %lld (or 0)",
                          who, (long long)lv_params_int(sp, "input_dim"), (long long)input_dim);
  if (lv_params_int(sp, "num_classes") != lm->vocab_size)
    return lv_status_make(LV_ERR_INVALID, "%s.num_classes (%lld) must be vocab_size (%lld) (or 0)", who,
                          (long long)lv_params_int(sp, "num_classes"), (long long)lm->vocab_size);
  lv_layer *l = NULL;
  LV_TRY(lv_owner_layer(&lm->own, sp, lm->base.scope, lm->base.vs, who, &l));
  lm->softmax = (lv_softmax_layer *)l;
  return NULL;
}

static lv_status make_emb(lv_lm *lm, const lv_params *p) {
  char who[LV_VAR_NAME_MAX + 16];
  snprintf(who, sizeof who, "%s.emb", lm->base.scope);
  if (lv_params_int(p, "emb.vocab_size") != lm->vocab_size)
    return lv_status_make(LV_ERR_INVALID, "%s.vocab_size (%lld) must be vocab_size (%lld)", who,
                          (long long)lv_params_int(p, "emb.vocab_size"), (long long)lm->vocab_size);
  LV_TRY(lv_owner_embedding(&lm->own, p, who, lm->base.scope, lm->base.vs, &lm->emb));
  lm->input_dim = lm->emb->embedding_dim;
  return NULL;
}

static lv_status check_vocab(const lv_lm *lm) {
  if (lm->vocab_size <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s.vocab_size must be > 0, got %lld", lm->base.scope,
                          (long long)lm->vocab_size);
  return NULL;
}

static lv_status keep_prob(const lv_lm *lm, const char *key, double v, float *out) {
  if (!(v > 0.0 && v <= 1.0))
    return lv_status_make(LV_ERR_INVALID, "%s.%s must be in (0, 1], got %g", lm->base.scope, key, v);
  *out = (float)v;
  return NULL;
}

static lv_status rnn_create(lv_lm *lm, const lv_params *p, bool with_emb) {
  char who[LV_VAR_NAME_MAX + 64];
  lm->vocab_size = lv_params_int(p, "vocab_size");
  LV_TRY(check_vocab(lm));
  if (lv_params_int(p, "direct_features_dim") != 0)
    return lv_status_make(LV_ERR_INVALID, "%s.direct_features_dim: direct features are not supported by lingvoc; "
                          "leave it 0", lm->base.scope);
  const lv_params *rp = lv_params_sub(p, "rnns");
  snprintf(who, sizeof who, "%s.rnns", lm->base.scope);
  if (!rp) return lv_status_make(LV_ERR_INVALID, "%s must be set (it is None)", who);
  if (lv_params_bool(rp, "packed_input") || lv_params_bool(rp, "dropout.dropout_at_eval"))
    return lv_status_make(LV_ERR_INVALID, "%s: packed_input and dropout.dropout_at_eval are not supported by "
                          "lingvoc; leave them False", who);
  int64_t n = lv_params_int(rp, "num_layers");
  LV_TRY(lv_check_int_range("rnns.num_layers", n, 1, LV_LM_MAX_LAYERS));
  lm->num_layers = (int)n;
  lm->skip_start = lv_params_int(rp, "skip_start");
  /* The dropouts' seeds: embedding_dropout_seed and rnns.dropout.random_seed when set,
   * else the layer's own. */
  lm->emb_seed = lv_params_is_set(p, "embedding_dropout_seed") ? (uint64_t)lv_params_int(p, "embedding_dropout_seed")
                                                               : lm->base.seed;
  lm->rnn_seed = lv_params_is_set(rp, "dropout.random_seed") ? (uint64_t)lv_params_int(rp, "dropout.random_seed")
                                                             : lm->base.seed;
  LV_TRY(keep_prob(lm, "rnns.dropout.keep_prob", lv_params_float(rp, "dropout.keep_prob"), &lm->rnn_keep_prob));
  const lv_params *cell = lv_params_sub(rp, "cell_tpl");
  if (!cell) return lv_status_make(LV_ERR_INVALID, "%s.cell_tpl must be set (it is None)", who);
  /* Lingvo's StackedFRNNLayerByLayer: the overrides apply when > 0. */
  const int64_t rin = lv_params_int(rp, "num_input_nodes"), rout = lv_params_int(rp, "num_output_nodes");
  int64_t in0 = rin > 0 ? rin : lv_params_int(cell, "num_input_nodes");
  int64_t width = lv_params_int(cell, "num_output_nodes");
  if (with_emb) {
    LV_TRY(keep_prob(lm, "embedding_dropout_keep_prob", lv_params_float(p, "embedding_dropout_keep_prob"),
                     &lm->emb_keep_prob));
    LV_TRY(make_emb(lm, p));
    if (lm->input_dim != in0)
      return lv_status_make(LV_ERR_INVALID, "%s.emb.embedding_dim (%lld) must be the first cell's num_input_nodes "
                            "(%lld: rnns.num_input_nodes, or rnns.cell_tpl.num_input_nodes when that is <= 0)",
                            lm->base.scope, (long long)lm->input_dim, (long long)in0);
  }
  lm->input_dim = in0;
  const char *rname = lv_params_str(rp, "name");
  int64_t in = in0;
  for (int i = 0; i < lm->num_layers; i++) {
    int64_t out = i == lm->num_layers - 1 && rout > 0 ? rout : width;
    char name[96];
    snprintf(name, sizeof name, "%.80s_%d", *rname ? rname : "rnns", i);
    snprintf(who, sizeof who, "%s.rnns.cell_tpl", lm->base.scope);
    LV_TRY(lv_owner_cell(&lm->own, cell, who, name, in, out, lm->base.scope, lm->base.vs, &lm->cells[i]));
    char scope[LV_VAR_NAME_MAX + 100];
    snprintf(scope, sizeof scope, "%s/%s", lm->base.scope, name);
    lv_frnn_view(&lm->frnn[i], scope, lm->cells[i], false);
    lm->residual[i] = lv_stacked_rnn_residual(lm->skip_start, i, lm->num_layers, rin, rout);
    if (lm->residual[i] && in != out)
      return lv_status_make(LV_ERR_INVALID, "%s.rnns: layer %d has a residual (skip_start %lld) but its input (%lld) "
                            "and output (%lld) widths differ", lm->base.scope, i, (long long)lm->skip_start,
                            (long long)in, (long long)out);
    in = out;
  }
  return make_softmax(lm, p, in);
}

static lv_status rnn_lm_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_lm *lm = (lv_lm *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  lm->kind = LV_LM_RNN;
  return rnn_create(lm, p, true);
}

static lv_status rnn_lm_no_emb_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_lm *lm = (lv_lm *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  lm->kind = LV_LM_RNN_NO_EMB;
  lm->emb_keep_prob = 1.0f;
  return rnn_create(lm, p, false);
}

static lv_status transformer_lm_create(lv_layer *base, const lv_params *p, const char *parent_scope,
                                       lv_varstore *vs) {
  lv_lm *lm = (lv_lm *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  lm->kind = LV_LM_TRANSFORMER;
  lm->vocab_size = lv_params_int(p, "vocab_size");
  LV_TRY(check_vocab(lm));
  const int64_t d = lv_params_int(p, "model_dim");
  LV_TRY(lv_check_int_range("model_dim", d, 1, INT32_MAX));
  int64_t n = lv_params_int(p, "num_trans_layers");
  LV_TRY(lv_check_int_range("num_trans_layers", n, 0, LV_LM_MAX_LAYERS));
  lm->num_layers = (int)n;
  LV_TRY(lv_check_prob("input_dropout_prob", lv_params_float(p, "input_dropout_prob"), &lm->input_dropout_prob));
  float unused;
  LV_TRY(lv_check_prob("residual_dropout_prob", lv_params_float(p, "residual_dropout_prob"), &unused));
  LV_TRY(lv_check_prob("atten_dropout_prob", lv_params_float(p, "atten_dropout_prob"), &unused));
  LV_TRY(lv_check_prob("relu_dropout_prob", lv_params_float(p, "relu_dropout_prob"), &unused));
  LV_TRY(make_emb(lm, p));
  if (lm->input_dim != d)
    return lv_status_make(LV_ERR_INVALID, "%s.emb.embedding_dim (%lld) must be model_dim (%lld)", base->scope,
                          (long long)lm->input_dim, (long long)d);
  char who[LV_VAR_NAME_MAX + 32];
  snprintf(who, sizeof who, "%s.position_emb", base->scope);
  lv_params *pp = NULL;
  LV_TRY(lv_owner_params(&lm->own, lv_params_sub(p, "position_emb"), who, "position_emb", &pp));
  LV_TRY(lv_params_set_int(pp, "embedding_dim", d));
  lv_layer *l = NULL;
  LV_TRY(lv_owner_layer(&lm->own, pp, base->scope, vs, who, &l));
  lm->pos = (lv_positional_embedding_layer *)l;
  snprintf(who, sizeof who, "%s.trans_tpl", base->scope);
  for (int i = 0; i < lm->num_layers; i++) {
    char name[32];
    snprintf(name, sizeof name, "layer_%d", i);
    lv_params *tp = NULL;
    LV_TRY(lv_owner_params(&lm->own, lv_params_sub(p, "trans_tpl"), who, name, &tp));
    /* Lingvo's TransformerLmNoEmbedding.__init__ hands its dropout probs to every layer. */
    LV_TRY(lv_params_set_int(tp, "source_dim", d));
    LV_TRY(lv_params_set_float(tp, "tr_atten_tpl.residual_dropout_prob", lv_params_float(p, "residual_dropout_prob")));
    LV_TRY(lv_params_set_float(tp, "tr_atten_tpl.atten_dropout_prob", lv_params_float(p, "atten_dropout_prob")));
    LV_TRY(lv_params_set_float(tp, "tr_fflayer_tpl.residual_dropout_prob", lv_params_float(p, "residual_dropout_prob")));
    LV_TRY(lv_params_set_float(tp, "tr_fflayer_tpl.relu_dropout_prob", lv_params_float(p, "relu_dropout_prob")));
    if (lv_params_bool(tp, "is_decoder") || lv_params_bool(tp, "has_aux_atten") || !lv_params_bool(tp, "mask_self_atten"))
      return lv_status_make(LV_ERR_INVALID, "%s: a language model's layers need mask_self_atten True, is_decoder "
                            "and has_aux_atten False", who);
    LV_TRY(lv_owner_layer(&lm->own, tp, base->scope, vs, who, &l));
    lm->trans[i] = (lv_transformer_layer *)l;
  }
  return make_softmax(lm, p, d);
}

static void lm_destroy(lv_layer *base) { lv_layer_owner_free(&((lv_lm *)base)->own); }

/* ---- fprop ----------------------------------------------------------------------- */

static lv_tensor *dropout_seeded(lv_graph *g, lv_tensor *x, float keep, uint64_t seed) {
  if (!x || keep >= 1.0f || !lv_graph_is_training(g)) return x;
  return lv_op_dropout(g, x, keep, seed, lv_graph_next_stream(g));
}
static lv_tensor *dropout(lv_lm *lm, lv_graph *g, lv_tensor *x, float keep) {
  return dropout_seeded(g, x, keep, lm->base.seed);
}

/* ids [T, B] int32 -> [T, B, D] embeddings. */
static lv_tensor *embed(lv_lm *lm, lv_graph *g, lv_tensor *ids) {
  if (!ids || ids->dtype != LV_I32 || ids->shape.rank < 1) {
    lv_graph_fail(g, "%s: ids must be int32 [T, B]", lm->base.scope);
    return NULL;
  }
  return lv_embedding_layer_lookup(lm->emb, g, ids);
}

/* The stack over x [T, B, D] from st (NULL: zeros; updated with the final states). */
static lv_tensor *rnn_stack(lv_lm *lm, lv_graph *g, lv_tensor *x, lv_tensor *paddings, lv_rnn_state *st) {
  for (int i = 0; x && i < lm->num_layers; i++) {
    lv_tensor *y = NULL;
    lv_rnn_state fin;
    if (!lv_frnn_run(&lm->frnn[i], g, x, paddings, st ? &st[i] : NULL, &y, st ? &fin : NULL)) return NULL;
    if (st) st[i] = fin;
    y = dropout_seeded(g, y, lm->rnn_keep_prob, lm->rnn_seed);
    if (y && lm->residual[i]) y = lv_op_add(g, y, x);
    x = y;
  }
  return x;
}

/* ids [T, B] -> the Transformer's input [T, B, D]: embeddings + positions, dropout. */
static lv_tensor *transformer_input(lv_lm *lm, lv_graph *g, lv_tensor *ids) {
  lv_tensor *x = embed(lm, g, ids);
  if (!x) return NULL;
  if (x->shape.rank != 3) {
    lv_graph_fail(g, "%s: ids must be [T, B]", lm->base.scope);
    return NULL;
  }
  const int64_t T = x->shape.d[0], D = x->shape.d[2];
  lv_tensor *pos = lv_positional_embedding_fprop(lm->pos, g, T);
  if (!pos) return NULL;
  x = lv_op_add(g, x, lv_op_reshape(g, pos, lv_shape3(T, 1, D)));
  return dropout(lm, g, x, 1.0f - lm->input_dropout_prob);
}

bool lv_lm_fprop(lv_lm *lm, lv_graph *g, lv_tensor *inputs, lv_tensor *paddings, lv_tensor *labels,
                 lv_tensor *weights, lv_lm_out *out) {
  memset(out, 0, sizeof *out);
  lv_tensor *x = NULL;
  if (!inputs || !paddings || paddings->shape.rank != 2) {
    lv_graph_fail(g, "%s: needs inputs and paddings [T, B]", lm->base.scope);
    return false;
  }
  switch (lm->kind) {
    case LV_LM_RNN:
      x = rnn_stack(lm, g, dropout_seeded(g, embed(lm, g, inputs), lm->emb_keep_prob, lm->emb_seed), paddings, NULL);
      break;
    case LV_LM_RNN_NO_EMB:
      x = rnn_stack(lm, g, inputs, paddings, NULL);
      break;
    case LV_LM_TRANSFORMER:
      x = transformer_input(lm, g, inputs);
      for (int i = 0; x && i < lm->num_layers; i++)
        if (!lv_transformer_layer_fprop(lm->trans[i], g, x, paddings, NULL, NULL, &x, NULL)) x = NULL;
      break;
    default:
      LV_ASSERT(!"unknown LM kind");
  }
  if (!x) return false;
  out->last_hidden = x;
  if (!labels) {
    out->xent.logits = lv_softmax_layer_logits(lm->softmax, g, x);
    out->xent.log_probs = lv_op_log_softmax(g, out->xent.logits);
    return out->xent.log_probs != NULL;
  }
  if (lm->num_sampled > 0 && lv_graph_is_training(g))
    return lv_sampled_softmax_fprop(lm->softmax, g, lm->num_sampled, x, weights, labels, &out->xent);
  return lv_softmax_layer_fprop(lm->softmax, g, x, weights, labels, NULL, 0.0f, &out->xent);
}

/* ---- step by step ---------------------------------------------------------------- */

bool lv_lm_state_begin(lv_lm *lm, lv_graph *g, int64_t b, lv_lm_state *st) {
  memset(st, 0, sizeof *st);
  st->batch = b;
  if (lm->kind == LV_LM_RNN_NO_EMB) {
    lv_graph_fail(g, "%s: RnnLmNoEmbedding takes activations, not ids: it has no step over tokens", lm->base.scope);
    return false;
  }
  int n = lm->num_layers > 0 ? lm->num_layers : 1;
  st->rnn = calloc((size_t)n, sizeof *st->rnn);
  st->cache = calloc((size_t)n, sizeof *st->cache);
  LV_ASSERT(st->rnn && st->cache);
  if (lm->kind == LV_LM_RNN)
    for (int i = 0; i < lm->num_layers; i++)
      if (!lv_rnn_cell_zero_state(lm->cells[i], g, b, &st->rnn[i])) return false;
  return true;
}

void lv_lm_state_free(lv_lm_state *st) {
  free(st->rnn);
  free(st->cache);
  memset(st, 0, sizeof *st);
}

bool lv_lm_step(lv_lm *lm, lv_graph *g, lv_lm_state *st, lv_tensor *ids, lv_tensor **logits) {
  *logits = NULL;
  if (!ids || ids->dtype != LV_I32 || ids->shape.rank != 1 || ids->shape.d[0] != st->batch) {
    lv_graph_fail(g, "%s: a step takes int32 ids [B=%lld]", lm->base.scope, (long long)st->batch);
    return false;
  }
  const int64_t B = st->batch;
  lv_tensor *x = embed(lm, g, ids); /* [B, D] */
  if (!x) return false;
  const int64_t D = x->shape.d[1];
  if (lm->kind == LV_LM_RNN) {
    x = rnn_stack(lm, g, lv_op_reshape(g, x, lv_shape3(1, B, D)), NULL, st->rnn);
    if (x) x = lv_op_reshape(g, x, lv_shape2(B, x->shape.d[2]));
  } else {
    lv_tensor *pos = lv_positional_embedding_fprop(lm->pos, g, st->t + 1);
    x = pos ? lv_op_add(g, x, lv_op_slice(g, pos, 0, st->t, 1)) : NULL;
    for (int i = 0; x && i < lm->num_layers; i++)
      if (!lv_transformer_layer_extend_step(lm->trans[i], g, x, &st->cache[i], NULL, &x)) x = NULL;
  }
  if (!x) return false;
  *logits = lv_softmax_layer_logits(lm->softmax, g, x);
  st->t++;
  return *logits != NULL;
}

/* ---- over a search's hyps ---------------------------------------------------------- */

struct lv_lm_search {
  lv_lm *lm;
  lv_graph *g;
  lv_graph_mark mark;
  int64_t rows; /* rows of the last step */
  int64_t step; /* steps done */
  lv_rnn_state *rnn;  /* [num_layers]: views of kept[] between steps */
  lv_tensor **kept;   /* [2 * num_layers] the RNN states (m, c) outside the graph */
  lv_tr_step_caches kv;
  int32_t *ids;       /* host scratch [cap] */
  int cap;
};

lv_status lv_lm_search_begin(lv_lm *lm, lv_graph *g, lv_lm_search **out) {
  *out = NULL;
  if (lm->kind == LV_LM_RNN_NO_EMB)
    return lv_status_make(LV_ERR_INVALID, "%s: RnnLmNoEmbedding takes activations, not ids: it cannot score hyps",
                          lm->base.scope);
  lv_lm_search *s = calloc(1, sizeof *s);
  LV_ASSERT(s);
  s->lm = lm;
  s->g = g;
  const int L = lm->num_layers > 0 ? lm->num_layers : 1;
  s->rnn = calloc((size_t)L, sizeof *s->rnn);
  s->kept = calloc(2 * (size_t)L, sizeof *s->kept);
  LV_ASSERT(s->rnn && s->kept);
  lv_tr_step_caches_init(&s->kv, g, lm->kind == LV_LM_TRANSFORMER ? lm->num_layers : 0, lm->base.scope);
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  s->mark = lv_graph_get_mark(g);
  *out = s;
  return NULL;
}

void lv_lm_search_end(lv_lm_search *s) {
  if (!s) return;
  for (int i = 0; s->kept && i < 2 * s->lm->num_layers; i++) lv_tensor_free(s->kept[i]);
  free(s->kept);
  free(s->rnn);
  free(s->ids);
  lv_tr_step_caches_free(&s->kv);
  free(s);
}

static lv_status search_graph_error(lv_lm_search *s, const char *what) {
  lv_status st = lv_graph_status(s->g);
  return st ? lv_status_wrap(st, "%s: %s at step %lld", s->lm->base.scope, what, (long long)s->step)
            : lv_status_make(LV_ERR_INTERNAL, "%s: %s failed at step %lld", s->lm->base.scope, what,
                             (long long)s->step);
}

/* Copies the graph tensor *t into buffer *b (made or remade to its shape) and points *t
 * at it, which outlives the next rewind. */
static lv_status keep(lv_lm_search *s, lv_tensor **b, lv_tensor **t) {
  if (!*b || (*b)->dtype != (*t)->dtype || !lv_shape_eq(&(*b)->shape, &(*t)->shape)) {
    lv_tensor_free(*b);
    *b = lv_tensor_new_on(lv_graph_device(s->g), (*t)->dtype, (*t)->shape);
    if (!*b)
      return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory for a state of %lld values", s->lm->base.scope,
                            (long long)lv_tensor_numel(*t));
  }
  if (!lv_graph_copy_into(s->g, *b, 0, *t)) return search_graph_error(s, "keeping the state");
  *t = *b;
  return NULL;
}

/* Host ids [n] as a graph tensor. */
static lv_tensor *search_ids(lv_lm_search *s, int n, const int32_t *v) {
  if (s->cap < n) {
    free(s->ids);
    s->ids = malloc(sizeof *s->ids * (size_t)n);
    LV_ASSERT(s->ids);
    s->cap = n;
  }
  memcpy(s->ids, v, sizeof *v * (size_t)n);
  lv_tensor h = lv_tensor_view(LV_I32, lv_shape1(n), s->ids);
  return lv_graph_from_host(s->g, &h);
}

lv_status lv_lm_search_step(lv_lm_search *s, int n, const int32_t *step_ids, const int32_t *parent, float *log_probs) {
  lv_lm *lm = s->lm;
  lv_graph *g = s->g;
  if (n <= 0) return lv_status_make(LV_ERR_INVALID, "%s search step: %d rows", lm->base.scope, n);
  if (s->step > 0 && !parent && n != s->rows)
    return lv_status_make(LV_ERR_INVALID, "%s search step: %d rows without parents after a step of %lld rows",
                          lm->base.scope, n, (long long)s->rows);
  for (int i = 0; i < n; i++) {
    if (step_ids[i] < 0 || step_ids[i] >= lm->vocab_size)
      return lv_status_make(LV_ERR_INVALID, "%s search step: step_ids[%d] = %d is outside [0, %lld)", lm->base.scope,
                            i, step_ids[i], (long long)lm->vocab_size);
    if (s->step > 0 && parent && (parent[i] < 0 || parent[i] >= s->rows))
      return lv_status_make(LV_ERR_INVALID, "%s search step: parent[%d] = %d is outside [0, %lld)", lm->base.scope, i,
                            parent[i], (long long)s->rows);
  }
  if (s->step == 0) parent = NULL;
  if (parent && n == s->rows) {
    bool same = true;
    for (int i = 0; same && i < n; i++) same = parent[i] == i;
    if (same) parent = NULL;
  }
  lv_graph_rewind(g, &s->mark);
  if (lm->kind == LV_LM_RNN) {
    lv_tensor *idx = parent ? search_ids(s, n, parent) : NULL;
    if (parent && !idx) return search_graph_error(s, "reorder ids");
    for (int i = 0; i < lm->num_layers; i++) {
      if (s->step == 0) {
        if (!lv_rnn_cell_zero_state(lm->cells[i], g, n, &s->rnn[i])) return search_graph_error(s, "zero state");
      } else if (parent) {
        s->rnn[i].m = lv_op_gather(g, s->rnn[i].m, idx);
        s->rnn[i].c = lv_op_gather(g, s->rnn[i].c, idx);
        if (!s->rnn[i].m || !s->rnn[i].c) return search_graph_error(s, "reordering the state");
      }
    }
  } else if (s->step > 0) {
    LV_TRY(lv_tr_step_caches_prepare(&s->kv, s->step, s->rows, n, parent));
  }
  lv_lm_state st = {.batch = n, .t = s->step, .rnn = s->rnn, .cache = s->kv.cache};
  lv_tensor *ids = search_ids(s, n, step_ids), *logits = NULL;
  if (!ids || !lv_lm_step(lm, g, &st, ids, &logits)) return search_graph_error(s, "step");
  lv_tensor *lp = lv_op_log_softmax(g, logits);
  if (!lp) return search_graph_error(s, "log_softmax");
  LV_TRY(lv_tensor_to_host(lp, log_probs));
  if (lm->kind == LV_LM_RNN)
    for (int i = 0; i < lm->num_layers; i++) {
      LV_TRY(keep(s, &s->kept[2 * i], &s->rnn[i].m));
      LV_TRY(keep(s, &s->kept[2 * i + 1], &s->rnn[i].c));
    }
  else if (s->step == 0)
    LV_TRY(lv_tr_step_caches_keep_first(&s->kv));
  s->rows = n;
  s->step++;
  return NULL;
}

/* ---- generic fprop --------------------------------------------------------------- */

static bool lm_fprop_generic(lv_layer *base, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_lm *lm = (lv_lm *)base;
  lv_tensor *x = lv_layer_in(base, g, in, lm->kind == LV_LM_RNN_NO_EMB ? "act" : "ids");
  lv_tensor *pads = lv_layer_in(base, g, in, "paddings");
  if (!x || !pads) return false;
  lv_tensor *labels = lv_nmap_get(in, "labels"), *weights = lv_nmap_get(in, "weights");
  if (labels && !weights) weights = lv_op_add_scalar(g, lv_op_scale(g, pads, -1.0f), 1.0f);
  lv_lm_out o;
  if (!lv_lm_fprop(lm, g, x, pads, labels, weights, &o)) return false;
  const struct {
    const char *key;
    lv_tensor *t;
  } outs[] = {{"logits", o.xent.logits},
              {"log_probs", o.xent.log_probs},
              {"per_example_xent", o.xent.per_example_xent},
              {"per_example_argmax", o.xent.per_example_argmax},
              {"total_xent", o.xent.total_xent},
              {"total_weight", o.xent.total_weight},
              {"avg_xent", o.xent.avg_xent},
              {"last_hidden", o.last_hidden}};
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
    if (outs[i].t && !lv_layer_set_out(base, g, out, outs[i].key, outs[i].t)) return false;
  return true;
}

const lv_layer_class lv_rnn_lm_class = {
    .cls = "RnnLm",
    .params = lv_rnn_lm_params,
    .size = sizeof(lv_lm),
    .create = rnn_lm_create,
    .fprop = lm_fprop_generic,
    .destroy = lm_destroy,
};

const lv_layer_class lv_rnn_lm_no_emb_class = {
    .cls = "RnnLmNoEmbedding",
    .params = lv_rnn_lm_no_emb_params,
    .size = sizeof(lv_lm),
    .create = rnn_lm_no_emb_create,
    .fprop = lm_fprop_generic,
    .destroy = lm_destroy,
};

const lv_layer_class lv_transformer_lm_class = {
    .cls = "TransformerLm",
    .params = lv_transformer_lm_params,
    .size = sizeof(lv_lm),
    .create = transformer_lm_create,
    .fprop = lm_fprop_generic,
    .destroy = lm_destroy,
};
