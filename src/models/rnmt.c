/* mt.model.RNMTModel: see rnmt.h. Params follow Lingvo's MTEncoderBiRNN.Params() and
 * MTDecoderV1.Params() with the keys lingvoc implements; unsupported Lingvo options
 * (shared_emb, cc_schedule, is_transparent, packed_input, emb_projection_tpl,
 * init_step_ids, force_alignment, ...) are left out rather than ignored. */
#include "models/rnmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "layers/attention.h"
#include "layers/embedding.h"
#include "layers/projection.h"
#include "layers/rnn_layers.h"
#include "models/seq_decode.h"

#define RNMT_MAX_LAYERS 32
#define RNMT_MAX_OWNED (4 * RNMT_MAX_LAYERS + 16)

typedef struct rnmt_model {
  lv_task base;
  lv_params *owned_p[RNMT_MAX_OWNED]; /* child params (layers borrow them) */
  int n_owned_p;
  lv_layer *owned_l[RNMT_MAX_OWNED]; /* every layer created, freed in reverse */
  int n_owned_l;
  /* encoder */
  lv_embedding_layer *enc_emb;
  int enc_layers;
  lv_frnn_layer enc_rnn[RNMT_MAX_LAYERS][2]; /* views over L<i>_rnn_fwd / L<i>_rnn_bak */
  lv_projection_layer *enc_proj;             /* NULL when 2 * lstm_cell_size == encoder_out_dim */
  int64_t enc_residual_start;
  float enc_dropout;
  /* decoder */
  lv_embedding_layer *dec_emb;
  lv_layer *atten_cell;
  lv_attention *atten;
  lv_frnn_atten_layer dec_atten_rnn;         /* view over atten_rnn + atten */
  int dec_layers;                            /* rnn_layers: the attention layer + dec_layers - 1 */
  lv_frnn_layer dec_rnn[RNMT_MAX_LAYERS];    /* views over rnn1 ... (index i - 1) */
  int64_t dec_residual_start;
  float dec_dropout;
  bool use_prev_atten_ctx, use_zero_atten_state, feed_ctx;
  int64_t cell_dim, ctx_dim;
  lv_softmax_layer *softmax;
  float smoothing;
  bool per_word_avg_loss;
  uint64_t seed;
} rnmt_model;

/* ---- params -------------------------------------------------------------------------- */

static lv_params *instantiate(const char *cls) {
  lv_params *p = NULL;
  LV_ASSERT(!lv_registry_instantiate(cls, &p));
  return p;
}

static void set_init(lv_params *p, const char *method, double scale) {
  LV_ASSERT(!lv_params_set_string(p, "params_init.method", method));
  LV_ASSERT(!lv_params_set_float(p, "params_init.scale", scale));
}

/* Lingvo's MT defaults: EmbeddingLayer vocab 32000, dim 1024, 16 shards, Uniform(0.04). */
static lv_params *emb_params(void) {
  lv_params *e = instantiate("EmbeddingLayer");
  LV_ASSERT(!lv_params_set_int(e, "vocab_size", 32000));
  LV_ASSERT(!lv_params_set_int(e, "embedding_dim", 1024));
  LV_ASSERT(!lv_params_set_int(e, "max_num_shards", 16));
  set_init(e, "uniform", 0.04);
  return e;
}

static lv_params *cell_params(void) {
  lv_params *c = instantiate("LSTMCellSimple");
  set_init(c, "uniform", 0.04);
  return c;
}

static lv_params *encoder_params(void) {
  lv_params *p = lv_layer_base_params("MTEncoderBiRNN");
  LV_ASSERT(!lv_params_set_string(p, "name", "enc"));
  lv_params_define_params(p, "emb", emb_params(), "Embedding layer params.");
  lv_params_define_params(p, "lstm_tpl", cell_params(), "Configs template for the RNN layer.");
  lv_params_define_params(p, "proj_tpl", instantiate("ProjectionLayer"),
                          "Configs template for the projection layer.");
  lv_params_define_int(p, "lstm_cell_size", 512, "LSTM cell size for the RNN layer.");
  lv_params_define_int(p, "num_lstm_layers", 8, "Number of rnn layers to create");
  lv_params_define_float(p, "dropout_prob", 0.0, "Prob at which we do dropout.");
  lv_params_define_int(p, "residual_start", 2, "Layer at which we start residual connections.");
  lv_params_define_int(p, "encoder_out_dim", 1024, "Depth of the encoder output.");
  return p;
}

static lv_params *decoder_params(void) {
  lv_params *p = lv_layer_base_params("MTDecoderV1");
  LV_ASSERT(!lv_params_set_string(p, "name", "dec"));
  lv_params_define_params(p, "emb", emb_params(), "Embedding layer params.");
  lv_params_define_int(p, "source_dim", 1024, "Dimension of the source encoding.");
  lv_params *at = instantiate("AdditiveAttention");
  LV_ASSERT(!lv_params_set_int(at, "hidden_dim", 1024));
  /* Lingvo leaves it None and fills in Gaussian(1 / sqrt(source_dim + query_dim)); lingvoc
   * has no None here: this is that value for the default dims (1024 + 1024). */
  set_init(at, "gaussian", 1.0 / sqrt(2048.0));
  lv_params_define_params(p, "attention", at, "Additive attention params (source_dim and query_dim are set by the "
                          "decoder: source_dim, rnn_cell_dim).");
  lv_params_define_params(p, "atten_rnn_cell_tpl", cell_params(), "Attention RNNCell params template.");
  lv_params_define_params(p, "rnn_cell_tpl", cell_params(), "RNNCell params template.");
  lv_params_define_int(p, "rnn_cell_dim", 1024, "size of the rnn cells.");
  lv_params_define_int(p, "rnn_layers", 8, "Number of rnn layers.");
  lv_params_define_int(p, "residual_start", 2, "Start residual connections from this layer.");
  lv_params_define_bool(p, "use_prev_atten_ctx", false, "If True, all decoder layers use previous attention context "
                        "as input. Otherwise, only first decoder layer uses previous attention context and the rest "
                        "of the layers use current attention context.");
  lv_params_define_float(p, "dropout_prob", 0.0, "Prob at which we do dropout.");
  lv_params_define_bool(p, "use_zero_atten_state", false, "To use zero attention state instead of computing "
                        "attention with zero query vector.");
  lv_params *sm = instantiate("SimpleFullSoftmax");
  LV_ASSERT(!lv_params_set_int(sm, "num_classes", 32000));
  LV_ASSERT(!lv_params_set_int(sm, "num_shards", 16));
  set_init(sm, "uniform", 0.04);
  lv_params_define_params(p, "softmax", sm, "Softmax params (input_dim is set by the decoder).");
  lv_params_define_bool(p, "feed_attention_context_vec_to_softmax", false,
                        "Whether to concatenate attention context vector to rnn output before softmax.");
  /* MTDecoderV1's length_normalization 0.2 and coverage_penalty 0.2. */
  lv_mt_define_decoder_params(p, 0.2, 0.2);
  return p;
}

static lv_params *rnmt_params_cls(const char *cls) {
  lv_params *p = lv_task_base_params(cls);
  lv_params_define_params(p, "encoder", encoder_params(), "Encoder params.");
  lv_params_define_params(p, "decoder", decoder_params(), "Decoder params.");
  return p;
}

static lv_params *rnmt_model_params(void) { return rnmt_params_cls("mt.model.RNMTModel"); }
static lv_params *punctuator_model_params(void) { return rnmt_params_cls("punctuator.model.RNMTModel"); }

/* ---- create -------------------------------------------------------------------------- */

static void rnmt_destroy(lv_task *t) {
  rnmt_model *m = (rnmt_model *)t;
  for (int i = m->n_owned_l - 1; i >= 0; i--) lv_layer_free(m->owned_l[i]);
  for (int i = 0; i < m->n_owned_p; i++) lv_params_free(m->owned_p[i]);
  lv_task_free_decode_state(t);
  free(m);
}

/* A copy of src (owned by m) named name; the caller sets more keys, then freezes it. */
static lv_status child_params(rnmt_model *m, const lv_params *src, const char *who, const char *name,
                              lv_params **out) {
  if (!src) return lv_status_make(LV_ERR_INVALID, "%s must be set (it is None)", who);
  LV_ASSERT(m->n_owned_p < RNMT_MAX_OWNED);
  lv_params *p = lv_params_copy(src);
  m->owned_p[m->n_owned_p++] = p;
  *out = p;
  return name ? lv_params_set_string(p, "name", name) : NULL;
}

static lv_status keep_layer(rnmt_model *m, lv_status s, lv_layer *l, const char *who, lv_layer **out) {
  if (l) {
    LV_ASSERT(m->n_owned_l < RNMT_MAX_OWNED);
    m->owned_l[m->n_owned_l++] = l;
  }
  if (s) return lv_status_wrap(s, "%s", who);
  *out = l;
  return NULL;
}

/* A layer of p's class (p frozen here) under scope. */
static lv_status make_layer(rnmt_model *m, lv_params *p, const char *scope, lv_varstore *vs, const char *who,
                            lv_layer **out) {
  lv_params_freeze(p);
  lv_layer *l = NULL;
  lv_status s = lv_layer_create(p, scope, vs, &l);
  return keep_layer(m, s, l, who, out);
}

/* An RNN cell from template tpl named name with the given widths. */
static lv_status make_cell(rnmt_model *m, const lv_params *tpl, const char *who, const char *name, int64_t in,
                           int64_t out_dim, const char *scope, lv_varstore *vs, lv_layer **out) {
  lv_params *p = NULL;
  LV_TRY(child_params(m, tpl, who, name, &p));
  if (!lv_params_has(p, "num_input_nodes") || !lv_params_has(p, "num_output_nodes"))
    return lv_status_make(LV_ERR_INVALID, "%s.cls: %s is not an RNN cell", who, lv_params_str(p, "cls"));
  LV_TRY(lv_params_set_int(p, "num_input_nodes", in));
  LV_TRY(lv_params_set_int(p, "num_output_nodes", out_dim));
  lv_params_freeze(p);
  char w[LV_VAR_NAME_MAX + 64];
  snprintf(w, sizeof w, "%s (%s)", who, name);
  lv_layer *l = NULL;
  lv_status s = lv_rnn_cell_create(p, scope, vs, who, &l);
  return keep_layer(m, s, l, w, out);
}

static lv_status make_emb(rnmt_model *m, const lv_params *sp, const char *key, const char *scope, lv_varstore *vs,
                          lv_embedding_layer **out) {
  char who[64];
  snprintf(who, sizeof who, "task.%s.emb", key);
  lv_params *p = NULL;
  LV_TRY(child_params(m, lv_params_sub(sp, "emb"), who, "emb", &p));
  lv_layer *l = NULL;
  LV_TRY(make_layer(m, p, scope, vs, who, &l));
  if (strcmp(l->cls->cls, "EmbeddingLayer") && strcmp(l->cls->cls, "SimpleEmbeddingLayer"))
    return lv_status_make(LV_ERR_INVALID, "%s.cls must be EmbeddingLayer or SimpleEmbeddingLayer, got %s", who,
                          l->cls->cls);
  *out = (lv_embedding_layer *)l;
  return NULL;
}

static lv_status check_range(const char *key, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    return lv_status_make(LV_ERR_INVALID, "%s must be in [%lld, %lld], got %lld", key, (long long)lo, (long long)hi,
                          (long long)v);
  return NULL;
}

static lv_status check_prob(const char *key, double v, float *out) {
  if (!(v >= 0 && v < 1)) return lv_status_make(LV_ERR_INVALID, "%s must be in [0, 1), got %g", key, v);
  *out = (float)v;
  return NULL;
}

static lv_status build_encoder(rnmt_model *m, const lv_params *ep, const char *task_name, lv_varstore *vs) {
  char scope[LV_VAR_NAME_MAX];
  snprintf(scope, sizeof scope, "%s/%s", task_name, lv_params_str(ep, "name"));
  LV_TRY(make_emb(m, ep, "encoder", scope, vs, &m->enc_emb));
  int64_t n = lv_params_int(ep, "num_lstm_layers"), cell = lv_params_int(ep, "lstm_cell_size");
  int64_t out_dim = lv_params_int(ep, "encoder_out_dim");
  LV_TRY(check_range("task.encoder.num_lstm_layers", n, 1, RNMT_MAX_LAYERS));
  LV_TRY(check_range("task.encoder.lstm_cell_size", cell, 1, 1 << 20));
  LV_TRY(check_range("task.encoder.encoder_out_dim", out_dim, 1, 1 << 20));
  LV_TRY(check_prob("task.encoder.dropout_prob", lv_params_float(ep, "dropout_prob"), &m->enc_dropout));
  m->enc_residual_start = lv_params_int(ep, "residual_start");
  const int64_t emb_dim = m->enc_emb->embedding_dim;
  if (m->enc_residual_start <= 0 && emb_dim != 2 * cell)
    return lv_status_make(LV_ERR_INVALID, "task.encoder.residual_start = %lld adds layer 0's input (emb.embedding_dim "
                          "%lld) to its output (2 * lstm_cell_size = %lld): the widths must match, or start at 1",
                          (long long)m->enc_residual_start, (long long)emb_dim, (long long)(2 * cell));
  for (int i = 0; i < n; i++) {
    for (int d = 0; d < 2; d++) {
      char name[64];
      snprintf(name, sizeof name, "L%d_rnn_%s", i, d ? "bak" : "fwd");
      lv_layer *c = NULL;
      LV_TRY(make_cell(m, lv_params_sub(ep, "lstm_tpl"), "task.encoder.lstm_tpl", name, i ? 2 * cell : emb_dim, cell,
                       scope, vs, &c));
      char view[LV_VAR_NAME_MAX + 16];
      snprintf(view, sizeof view, "%s/L%d/%s", scope, i, d ? "bak" : "fwd");
      lv_frnn_view(&m->enc_rnn[i][d], view, c, d == 1);
    }
    m->enc_layers = i + 1;
  }
  if (2 * cell != out_dim) {
    lv_params *p = NULL;
    LV_TRY(child_params(m, lv_params_sub(ep, "proj_tpl"), "task.encoder.proj_tpl", "proj", &p));
    LV_TRY(lv_params_set_bool(p, "batch_norm", false));
    LV_TRY(lv_params_set_int(p, "input_dim", 2 * cell));
    LV_TRY(lv_params_set_int(p, "output_dim", out_dim));
    LV_TRY(lv_params_set_bool(p, "has_bias", true));
    LV_TRY(lv_params_set_string(p, "activation", "NONE"));
    lv_layer *l = NULL;
    LV_TRY(make_layer(m, p, scope, vs, "task.encoder.proj_tpl", &l));
    if (strcmp(l->cls->cls, "ProjectionLayer"))
      return lv_status_make(LV_ERR_INVALID, "task.encoder.proj_tpl.cls must be ProjectionLayer, got %s", l->cls->cls);
    m->enc_proj = (lv_projection_layer *)l;
  }
  return NULL;
}

/* The width of the attention's contexts given source contexts of width source_dim. */
static int64_t atten_ctx_width(const lv_attention *a, int64_t source_dim) {
  if (a->context_dim > 0) return a->context_dim;
  if (!strcmp(a->base.cls->cls, "MultiHeadedAttention")) {
    const lv_multi_headed_attention *h = (const lv_multi_headed_attention *)a;
    if (h->use_source_vec_as_attention_value) return h->enable_source_proj ? h->hidden_dim : source_dim;
    return h->enable_ctx_pre_proj ? h->hidden_dim : source_dim;
  }
  return source_dim;
}

static lv_status build_decoder(rnmt_model *m, const lv_params *dp, const char *task_name, int64_t enc_out,
                               lv_varstore *vs) {
  char scope[LV_VAR_NAME_MAX];
  snprintf(scope, sizeof scope, "%s/%s", task_name, lv_params_str(dp, "name"));
  LV_TRY(make_emb(m, dp, "decoder", scope, vs, &m->dec_emb));
  int64_t src_dim = lv_params_int(dp, "source_dim"), n = lv_params_int(dp, "rnn_layers");
  m->cell_dim = lv_params_int(dp, "rnn_cell_dim");
  if (src_dim != enc_out)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.source_dim (%lld) must equal the encoder's output depth "
                          "task.encoder.encoder_out_dim (%lld)", (long long)src_dim, (long long)enc_out);
  LV_TRY(check_range("task.decoder.rnn_layers", n, 1, RNMT_MAX_LAYERS));
  LV_TRY(check_range("task.decoder.rnn_cell_dim", m->cell_dim, 1, 1 << 20));
  LV_TRY(check_prob("task.decoder.dropout_prob", lv_params_float(dp, "dropout_prob"), &m->dec_dropout));
  m->dec_residual_start = lv_params_int(dp, "residual_start");
  m->use_prev_atten_ctx = lv_params_bool(dp, "use_prev_atten_ctx");
  m->use_zero_atten_state = lv_params_bool(dp, "use_zero_atten_state");
  m->feed_ctx = lv_params_bool(dp, "feed_attention_context_vec_to_softmax");
  /* The attention, as MTDecoderV1 sets it up. */
  lv_params *ap = NULL;
  LV_TRY(child_params(m, lv_params_sub(dp, "attention"), "task.decoder.attention", NULL, &ap));
  const char *an = lv_params_str(ap, "name");
  if (!an || !*an) LV_TRY(lv_params_set_string(ap, "name", "atten"));
  if (!lv_params_has(ap, "source_dim") || !lv_params_has(ap, "query_dim"))
    return lv_status_make(LV_ERR_INVALID, "task.decoder.attention.cls: %s is not an attention class",
                          lv_params_str(ap, "cls"));
  LV_TRY(lv_params_set_int(ap, "source_dim", src_dim));
  LV_TRY(lv_params_set_int(ap, "query_dim", m->cell_dim));
  lv_layer *al = NULL;
  LV_TRY(make_layer(m, ap, scope, vs, "task.decoder.attention", &al));
  m->atten = lv_attention_of(al);
  if (!m->atten)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.attention.cls must be AdditiveAttention, DotProductAttention "
                          "or MultiHeadedAttention, got %s", al->cls->cls);
  /* Lingvo's atten_context_dim: ctx_post_proj_dim with enable_ctx_post_proj, else source_dim. */
  bool post = lv_params_has(ap, "enable_ctx_post_proj") && lv_params_bool(ap, "enable_ctx_post_proj");
  m->ctx_dim = post ? lv_params_int(ap, "ctx_post_proj_dim") : src_dim;
  int64_t got = atten_ctx_width(m->atten, src_dim);
  if (got != m->ctx_dim)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.attention gives contexts of width %lld but MTDecoderV1 sizes "
                          "its cells for %lld (%s): e.g. set attention.hidden_dim to source_dim",
                          (long long)got, (long long)m->ctx_dim,
                          post ? "attention.ctx_post_proj_dim" : "task.decoder.source_dim");
  const int64_t emb_dim = m->dec_emb->embedding_dim;
  LV_TRY(make_cell(m, lv_params_sub(dp, "atten_rnn_cell_tpl"), "task.decoder.atten_rnn_cell_tpl", "atten_rnn",
                   emb_dim + m->ctx_dim, m->cell_dim, scope, vs, &m->atten_cell));
  char view[LV_VAR_NAME_MAX + 32];
  snprintf(view, sizeof view, "%s/frnn_with_atten", scope);
  LV_TRY(lv_frnn_atten_view(&m->dec_atten_rnn, view, m->atten_cell, al, m->use_prev_atten_ctx,
                            m->use_zero_atten_state, m->ctx_dim));
  for (int i = 1; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "rnn%d", i);
    lv_layer *c = NULL;
    LV_TRY(make_cell(m, lv_params_sub(dp, "rnn_cell_tpl"), "task.decoder.rnn_cell_tpl", name, m->cell_dim + m->ctx_dim,
                     m->cell_dim, scope, vs, &c));
    snprintf(view, sizeof view, "%s/frnn%d", scope, i);
    lv_frnn_view(&m->dec_rnn[i - 1], view, c, false);
  }
  m->dec_layers = (int)n;
  /* The softmax over [output, context] or the output. */
  int64_t v = m->dec_emb->vocab_size;
  if (lv_params_int(dp, "softmax.num_classes") != v)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.softmax.num_classes (%lld) must equal "
                          "task.decoder.emb.vocab_size (%lld)",
                          (long long)lv_params_int(dp, "softmax.num_classes"), (long long)v);
  lv_params *sp = NULL;
  LV_TRY(child_params(m, lv_params_sub(dp, "softmax"), "task.decoder.softmax", "softmax", &sp));
  LV_TRY(lv_params_set_int(sp, "input_dim", m->cell_dim + (m->feed_ctx ? m->ctx_dim : 0)));
  lv_layer *l = NULL;
  LV_TRY(make_layer(m, sp, scope, vs, "task.decoder.softmax", &l));
  if (strcmp(l->cls->cls, "SimpleFullSoftmax"))
    return lv_status_make(LV_ERR_INVALID, "task.decoder.softmax.cls must be SimpleFullSoftmax, got %s", l->cls->cls);
  m->softmax = (lv_softmax_layer *)l;
  LV_TRY(lv_mt_label_smoothing(dp, "mt.model.RNMTModel", &m->smoothing));
  m->per_word_avg_loss = lv_params_bool(dp, "per_word_avg_loss");
  return NULL;
}

static lv_status rnmt_create(const lv_params *p, const lv_params *input_p, lv_varstore *vs, lv_task **out) {
  (void)input_p;
  rnmt_model *m = calloc(1, sizeof *m);
  LV_ASSERT(m);
  m->base.cls = strcmp(lv_params_str(p, "cls"), lv_punctuator_rnmt_model.cls) ? &lv_mt_rnmt_model
                                                                                : &lv_punctuator_rnmt_model;
  m->base.p = p;
  const char *name = lv_params_str(p, "name");
  lv_status s = NULL;
  if (!*name) s = lv_status_make(LV_ERR_INVALID, "task.name must be set (e.g. \"rnmt\")");
  if (!s) s = build_encoder(m, lv_params_sub(p, "encoder"), name, vs);
  if (!s) {
    const lv_params *ep = lv_params_sub(p, "encoder");
    s = build_decoder(m, lv_params_sub(p, "decoder"), name, lv_params_int(ep, "encoder_out_dim"), vs);
  }
  if (s) {
    rnmt_destroy(&m->base);
    return s;
  }
  m->seed = lv_params_is_set(p, "random_seed") ? (uint64_t)lv_params_int(p, "random_seed") : 0x52a3e7b1ull;
  *out = &m->base;
  return NULL;
}

/* ---- forward ------------------------------------------------------------------------- */

static const int kSwap01[3] = {1, 0, 2};

static lv_tensor *transpose2(lv_graph *g, lv_tensor *x) {
  static const int perm[2] = {1, 0};
  return x ? lv_op_transpose(g, x, perm) : NULL;
}

/* Dropout stream k of a training step: the masks depend on the step only. */
enum { STREAM_ENC_EMB = 0, STREAM_ENC_LAYER = 1, STREAM_DEC_EMB = 40, STREAM_DEC_LAYER = 41, STREAMS = 96 };

static lv_tensor *dropout(const rnmt_model *m, lv_graph *g, lv_tensor *x, float prob, int64_t step, int k) {
  if (!x || prob <= 0 || !lv_graph_is_training(g)) return x;
  return lv_op_dropout(g, x, 1.0f - prob, m->seed, (uint64_t)step * STREAMS + (uint64_t)k);
}

/* ids [B, T] -> time-major embeddings [T, B, E]. */
static lv_tensor *embed(lv_embedding_layer *emb, lv_graph *g, lv_tensor *ids, lv_tensor *paddings) {
  if (!ids || !paddings || ids->shape.rank != 2 || !lv_shape_eq(&ids->shape, &paddings->shape)) {
    lv_graph_fail(g, "%s: ids and paddings must be [batch, time] of the same shape", emb->base.scope);
    return NULL;
  }
  lv_tensor *x = lv_embedding_layer_lookup(emb, g, ids);
  return x ? lv_op_transpose(g, x, kSwap01) : NULL;
}

static lv_tensor *concat2(lv_graph *g, lv_tensor *a, lv_tensor *b, int axis) {
  if (!a || !b) return NULL;
  lv_tensor *parts[2] = {a, b};
  return lv_op_concat(g, parts, 2, axis);
}

bool lv_rnmt_encode(lv_task *t, lv_graph *g, lv_tensor *src_ids, lv_tensor *src_paddings, int64_t step,
                    lv_tensor **encoded, lv_tensor **paddings) {
  rnmt_model *m = (rnmt_model *)t;
  lv_tensor *xs = embed(m->enc_emb, g, src_ids, src_paddings);
  lv_tensor *pads = transpose2(g, src_paddings); /* [S, B] */
  if (!xs || !pads) return false;
  lv_tensor *ps = lv_op_reshape(g, pads, lv_shape3(pads->shape.d[0], pads->shape.d[1], 1));
  xs = dropout(m, g, xs, m->enc_dropout, step, STREAM_ENC_EMB);
  for (int i = 0; xs && i < m->enc_layers; i++) {
    lv_tensor *o[2];
    if (!lv_frnn_run(&m->enc_rnn[i][0], g, xs, ps, NULL, &o[0], NULL) ||
        !lv_frnn_run(&m->enc_rnn[i][1], g, xs, ps, NULL, &o[1], NULL))
      return false;
    lv_tensor *ys = dropout(m, g, lv_op_concat(g, o, 2, -1), m->enc_dropout, step, STREAM_ENC_LAYER + i);
    xs = i >= m->enc_residual_start ? lv_op_add(g, xs, ys) : ys;
  }
  if (xs && m->enc_proj) xs = lv_projection_layer_fprop_padded(m->enc_proj, g, xs, ps);
  if (!xs) return false;
  *encoded = xs;
  *paddings = pads;
  return true;
}

/* Teacher-forced decoder: the softmax input [T, B, D] (and *probs [T, B, S]). */
static lv_tensor *decode_seq(rnmt_model *m, lv_graph *g, lv_tensor *encoded, lv_tensor *enc_pads, lv_tensor *tgt_ids,
                             lv_tensor *tgt_paddings, int64_t step, lv_tensor **probs) {
  lv_tensor *x = embed(m->dec_emb, g, tgt_ids, tgt_paddings);
  lv_tensor *tp = transpose2(g, tgt_paddings);
  if (!x || !tp) return NULL;
  tp = lv_op_reshape(g, tp, lv_shape3(tp->shape.d[0], tp->shape.d[1], 1));
  x = dropout(m, g, x, m->dec_dropout, step, STREAM_DEC_EMB);
  lv_frnn_atten_out o;
  if (!x || !lv_frnn_atten_run(&m->dec_atten_rnn, g, encoded, enc_pads, NULL, x, tp, &o)) return NULL;
  lv_tensor *xs = o.rnn_output, *ctxs = o.atten_context;
  for (int i = 1; xs && i < m->dec_layers; i++) {
    lv_tensor *ys = NULL;
    if (!lv_frnn_run(&m->dec_rnn[i - 1], g, concat2(g, xs, ctxs, 2), tp, NULL, &ys, NULL)) return NULL;
    ys = dropout(m, g, ys, m->dec_dropout, step, STREAM_DEC_LAYER + i);
    xs = i >= m->dec_residual_start ? lv_op_add(g, xs, ys) : ys;
  }
  if (probs) *probs = o.atten_probs;
  return m->feed_ctx ? concat2(g, xs, ctxs, 2) : xs;
}

bool lv_rnmt_log_probs(lv_task *t, lv_graph *g, lv_tensor *encoded, lv_tensor *paddings, lv_tensor *tgt_ids,
                       lv_tensor *tgt_paddings, lv_tensor **log_probs, lv_tensor **atten_probs) {
  rnmt_model *m = (rnmt_model *)t;
  lv_tensor *x = decode_seq(m, g, encoded, paddings, tgt_ids, tgt_paddings, 0, atten_probs);
  *log_probs = x ? lv_op_log_softmax(g, lv_softmax_layer_logits(m->softmax, g, x)) : NULL;
  return *log_probs != NULL;
}

static bool rnmt_fprop(lv_task *t, lv_graph *g, lv_batch *b, bool is_eval, int64_t step, lv_metrics *mt) {
  rnmt_model *m = (rnmt_model *)t;
  lv_mt_batch in;
  if (!lv_mt_batch_get(g, b, "mt.model.RNMTModel", &in)) return false;
  lv_tensor *enc, *pads;
  if (!lv_rnmt_encode(t, g, in.src_ids, in.src_paddings, step, &enc, &pads)) return false;
  lv_tensor *x = decode_seq(m, g, enc, pads, in.tgt_ids, in.tgt_paddings, step, NULL);
  if (!x) return false;
  return lv_mt_softmax_metrics(m->softmax, g, x, in.tgt_labels, in.tgt_weights, m->smoothing, m->per_word_avg_loss,
                               is_eval, "mt.model.RNMTModel", mt);
}

/* ---- incremental decoding (bin/decoder's interface) ------------------------------------ */

typedef struct rnmt_decode {
  rnmt_model *m;
  lv_graph *g;
  lv_atten_packed src;
  int64_t batch, src_len, rows; /* B, S, rows of the state (B before the first step) */
  int step;
  lv_rnn_state *states; /* [dec_layers] */
  lv_tensor *ctx;       /* [rows, C]: the last step's context */
  lv_tensor *probs;     /* [rows, S]: the last step's attention probabilities */
  /* Host ids a step's graph reads in place (and checks at its sync points): the state's
   * gather indices and the step's ids. The rewind at the next step's start syncs and
   * takes those checks, so the buffers are reused from step to step. */
  int32_t *idx, *sid;
  int cap_idx, cap_sid;
  /* Each step starts by rewinding the graph to this mark (taken after the encoder and the
   * initial state), so a search's graph memory is that of one step: the state a step
   * passes on (every layer's m and c, ctx, probs) is copied out of the graph into one of
   * two buffer sets (bufs[set * nslots + slot], device tensors outside the graph). */
  lv_graph_mark mark;
  lv_tensor **bufs;
  int nslots, set;
} rnmt_decode;

static lv_status graph_error(lv_graph *g, const char *what, int step) {
  lv_status s = lv_graph_status(g);
  return s ? lv_status_wrap(s, "mt.model.RNMTModel decoder %s %d", what, step)
           : lv_status_make(LV_ERR_INTERNAL, "mt.model.RNMTModel decoder %s %d failed", what, step);
}

static lv_status rnmt_decode_begin(lv_task *t, lv_graph *g, const lv_batch *b, int64_t *atten_len,
                                   int32_t *atten_lens, void **state) {
  rnmt_model *m = (rnmt_model *)t;
  *state = NULL;
  lv_tensor *src_ids, *src_paddings;
  LV_TRY(lv_mt_decode_source(g, b, "mt.model.RNMTModel decoder", &src_ids, &src_paddings, atten_len, atten_lens));
  rnmt_decode *d = calloc(1, sizeof *d);
  LV_ASSERT(d);
  *state = d;
  d->m = m;
  d->g = g;
  d->states = calloc((size_t)m->dec_layers, sizeof *d->states);
  LV_ASSERT(d->states);
  lv_tensor *enc, *pads;
  if (!lv_rnmt_encode(t, g, src_ids, src_paddings, 0, &enc, &pads) ||
      !lv_attention_pack_source(m->atten, g, enc, NULL, pads, &d->src))
    return graph_error(g, "encoding the source, step", 0);
  d->src_len = enc->shape.d[0];
  d->batch = d->rows = enc->shape.d[1];
  for (int i = 0; i < m->dec_layers; i++) {
    lv_layer *cell = i ? m->dec_rnn[i - 1].cell : m->atten_cell;
    if (!lv_rnn_cell_zero_state(cell, g, d->batch, &d->states[i])) return graph_error(g, "initial state, step", 0);
  }
  if (m->use_zero_atten_state) {
    d->ctx = lv_graph_zeros(g, LV_F32, lv_shape2(d->batch, m->ctx_dim));
    d->probs = lv_graph_zeros(g, LV_F32, lv_shape2(d->batch, d->src_len));
  } else {
    lv_tensor *q = lv_graph_zeros(g, LV_F32, lv_shape2(d->batch, m->cell_dim));
    if (!q) d->ctx = NULL;
    else if (!lv_attention_compute_context(m->atten, g, &d->src, q, &d->ctx, &d->probs)) d->ctx = NULL;
  }
  if (!d->ctx || !d->probs) return graph_error(g, "initial attention, step", 0);
  d->nslots = 2 * m->dec_layers + 2;
  d->bufs = calloc(2 * (size_t)d->nslots, sizeof *d->bufs);
  LV_ASSERT(d->bufs);
  d->mark = lv_graph_get_mark(g);
  return NULL;
}

static void rnmt_decode_end(void *state) {
  rnmt_decode *d = state;
  if (!d) return;
  free(d->idx);
  free(d->sid);
  for (int i = 0; d->bufs && i < 2 * d->nslots; i++) lv_tensor_free(d->bufs[i]);
  free(d->bufs);
  free(d->states);
  free(d);
}

/* *buf holding at least n ids (valid until the next step's rewind). */
static int32_t *step_ids_buf(int32_t **buf, int *cap, int n) {
  if (*cap < n) {
    free(*buf);
    *buf = malloc(sizeof **buf * (size_t)n);
    LV_ASSERT(*buf);
    *cap = n;
  }
  return *buf;
}

/* Copies the graph tensor *t (NULL: nothing) into buffer `slot` of the set after d->set
 * and points *t at that buffer, which outlives the next rewind. */
static lv_status keep_state(rnmt_decode *d, int slot, lv_tensor **t) {
  if (!*t) return NULL;
  lv_tensor **b = &d->bufs[(1 - d->set) * d->nslots + slot];
  if (!*b || (*b)->dtype != (*t)->dtype || !lv_shape_eq(&(*b)->shape, &(*t)->shape)) {
    lv_tensor_free(*b);
    *b = lv_tensor_new_on(lv_graph_device(d->g), (*t)->dtype, (*t)->shape);
    if (!*b)
      return lv_status_make(LV_ERR_RESOURCE, "mt.model.RNMTModel decoder: out of memory for a state of %lld values",
                            (long long)lv_tensor_numel(*t));
  }
  if (!lv_graph_copy_into(d->g, *b, 0, *t)) return graph_error(d->g, "keeping the state of step", d->step);
  *t = *b;
  return NULL;
}

/* Rows of x [rows, k] by idx (a graph int32 [n]). */
static lv_tensor *gather_rows(lv_graph *g, lv_tensor *x, lv_tensor *idx) { return x ? lv_op_gather(g, x, idx) : NULL; }

/* One cell step on input x [n, D] (+ extra [n, E]) from s0. */
static bool cell_step(lv_layer *cell, lv_graph *g, lv_tensor *x, lv_tensor *extra, const lv_rnn_state *s0,
                      lv_rnn_state *s1) {
  const lv_rnn_cell_class *cc = lv_rnn_cell_class_of(cell);
  lv_rnn_seq seq;
  if (!x || !cc->begin(cell, g, lv_op_reshape(g, x, lv_shape3(1, x->shape.d[0], x->shape.d[1])), &seq)) return false;
  return cc->step(cell, g, &seq, 0, s0, extra, NULL, s1);
}

static lv_status rnmt_decode_step(void *state, int n, const int32_t *step_ids, const int32_t *parent, float *log_probs,
                                  float *atten_probs) {
  rnmt_decode *d = state;
  rnmt_model *m = d->m;
  lv_graph *g = d->g;
  const int64_t V = m->softmax->num_classes;
  if (n <= 0 || n % d->batch)
    return lv_status_make(LV_ERR_INVALID, "mt.model.RNMTModel decoder step: %d rows is not a multiple of the batch %lld",
                          n, (long long)d->batch);
  if (!parent && n != d->rows && d->step > 0)
    return lv_status_make(LV_ERR_INVALID, "mt.model.RNMTModel decoder step: %d rows without parents after a step of "
                          "%lld rows", n, (long long)d->rows);
  for (int i = 0; i < n; i++) {
    if (step_ids[i] < 0 || step_ids[i] >= V)
      return lv_status_make(LV_ERR_INVALID, "mt.model.RNMTModel decoder step: step_ids[%d] = %d is outside [0, %lld)",
                            i, step_ids[i], (long long)V);
    if (parent && (parent[i] < 0 || parent[i] >= d->rows || parent[i] % d->batch != i % d->batch))
      return lv_status_make(LV_ERR_INVALID, "mt.model.RNMTModel decoder step: parent[%d] = %d is not a row of "
                            "sentence %lld among the %lld rows", i, parent[i], (long long)(i % d->batch),
                            (long long)d->rows);
  }
  /* The previous step's state is in d->bufs (or, before step 1, before the mark). */
  lv_graph_rewind(g, &d->mark);
  /* Gather the per-row state: by parent, or from the B initial rows (row i: sentence i % B). */
  if (parent || n != d->rows) {
    int32_t *idx = step_ids_buf(&d->idx, &d->cap_idx, n);
    for (int i = 0; i < n; i++) idx[i] = parent ? parent[i] : (int32_t)(i % d->rows);
    lv_tensor hi = lv_tensor_view(LV_I32, lv_shape1(n), idx);
    lv_tensor *it = lv_graph_from_host(g, &hi);
    if (!it) return graph_error(g, "step", d->step);
    for (int i = 0; i < m->dec_layers; i++) {
      d->states[i].m = gather_rows(g, d->states[i].m, it);
      d->states[i].c = gather_rows(g, d->states[i].c, it);
    }
    d->ctx = gather_rows(g, d->ctx, it);
    d->probs = gather_rows(g, d->probs, it);
  }
  int32_t *sid = step_ids_buf(&d->sid, &d->cap_sid, n);
  memcpy(sid, step_ids, sizeof *sid * (size_t)n);
  lv_tensor hs = lv_tensor_view(LV_I32, lv_shape1(n), sid);
  lv_tensor *ids = lv_graph_from_host(g, &hs);
  lv_tensor *emb = ids ? lv_embedding_layer_lookup(m->dec_emb, g, ids) : NULL; /* [n, E] */
  lv_rnn_state s1;
  lv_tensor *ctx = NULL, *probs = NULL, *out = NULL;
  bool ok = emb && d->ctx && cell_step(m->atten_cell, g, emb, d->ctx, &d->states[0], &s1) &&
            lv_attention_compute_context(m->atten, g, &d->src, s1.m, &ctx, &probs);
  if (ok) {
    d->states[0] = s1;
    out = s1.m;
  }
  lv_tensor *atten_ctx = m->use_prev_atten_ctx ? d->ctx : ctx;
  for (int i = 1; ok && i < m->dec_layers; i++) {
    ok = cell_step(m->dec_rnn[i - 1].cell, g, concat2(g, out, atten_ctx, 1), NULL, &d->states[i], &s1);
    if (ok) {
      d->states[i] = s1;
      out = i >= m->dec_residual_start ? lv_op_add(g, out, s1.m) : s1.m;
    }
  }
  if (ok && m->feed_ctx) out = concat2(g, out, atten_ctx, 1);
  lv_tensor *lp = ok && out ? lv_op_log_softmax(g, lv_softmax_layer_logits(m->softmax, g, out)) : NULL;
  if (!lp) return graph_error(g, "step", d->step);
  LV_TRY(lv_tensor_to_host(lp, log_probs));
  /* The probabilities exposed to the search: those of the context this step consumed. */
  if (atten_probs) LV_TRY(lv_tensor_to_host(m->use_prev_atten_ctx ? d->probs : probs, atten_probs));
  d->ctx = ctx;
  d->probs = probs;
  for (int i = 0; i < m->dec_layers; i++) {
    LV_TRY(keep_state(d, 2 * i, &d->states[i].m));
    LV_TRY(keep_state(d, 2 * i + 1, &d->states[i].c));
  }
  LV_TRY(keep_state(d, 2 * m->dec_layers, &d->ctx));
  LV_TRY(keep_state(d, 2 * m->dec_layers + 1, &d->probs));
  d->set = 1 - d->set;
  d->rows = n;
  d->step++;
  return NULL;
}

static int64_t rnmt_vocab_size(const lv_task *t) { return ((const rnmt_model *)t)->softmax->num_classes; }

/* Per hyp, float32: one step's graph memory (the graph is rewound every step): the logits
 * and log-probs (2 V), each layer's gates and their layer norm (~8 x 4 cell_dim) and the
 * attention's per-position hidden activations (~4 x src_len x hidden); plus the two sets of
 * kept states (m, c per layer, context, probs). target_seq_len does not matter. */
static int64_t rnmt_row_bytes(const lv_task *t, const lv_batch *b, int64_t target_seq_len) {
  const rnmt_model *m = (const rnmt_model *)t;
  int64_t src_len = lv_mt_source_len(b);
  int64_t hidden = m->cell_dim;
  if (!strcmp(m->atten->base.cls->cls, "AdditiveAttention"))
    hidden = ((const lv_additive_attention *)m->atten)->hidden_dim;
  else if (!strcmp(m->atten->base.cls->cls, "MultiHeadedAttention"))
    hidden = ((const lv_multi_headed_attention *)m->atten)->hidden_dim;
  (void)target_seq_len;
  int64_t per_step = 2 * m->softmax->num_classes + 32 * m->cell_dim * m->dec_layers + 4 * src_len * hidden;
  int64_t kept = 2 * (2 * m->cell_dim * m->dec_layers + m->ctx_dim + src_len);
  return (per_step + kept) * 4;
}

static const lv_seq_decode_ops kRnmtDecodeOps = {
    .vocab_size = rnmt_vocab_size,
    .atten_probs = true,
    .row_bytes = rnmt_row_bytes,
    .begin = rnmt_decode_begin,
    .step = rnmt_decode_step,
    .end = rnmt_decode_end,
};

const lv_task_class lv_mt_rnmt_model = {
    .cls = "mt.model.RNMTModel",
    .params = rnmt_model_params,
    .create = rnmt_create,
    .fprop = rnmt_fprop,
    .destroy = rnmt_destroy,
    LV_SEQ_DECODE_HOOKS(lv_seq_decoder_setup, &kRnmtDecodeOps),
};

/* lingvo/tasks/punctuator/model.py: the MT model (its Inference graph is bin/decoder's
 * --decode_text). */
const lv_task_class lv_punctuator_rnmt_model = {
    .cls = "punctuator.model.RNMTModel",
    .params = punctuator_model_params,
    .create = rnmt_create,
    .fprop = rnmt_fprop,
    .destroy = rnmt_destroy,
    LV_SEQ_DECODE_HOOKS(lv_seq_decoder_setup_punct, &kRnmtDecodeOps),
};
