#include "layers/atten_lstm_decoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "layers/rnn_cell.h"

/* path.name into buf (a params path for messages). */
static const char *key(char *buf, const char *path, const char *name) {
  snprintf(buf, 160, "%s.%s", path, name);
  return buf;
}

void lv_atten_lstm_decoder_define_params(lv_params *p) {
  lv_params_define_params(p, "emb", lv_mt_default_embedding_params(), "Embedding layer params.");
  lv_params_define_int(p, "source_dim", 1024, "Dimension of the source encoding.");
  lv_params *at = lv_params_instantiate("AdditiveAttention");
  LV_ASSERT(!lv_params_set_int(at, "hidden_dim", 1024));
  /* Lingvo leaves it None and fills in Gaussian(1 / sqrt(source_dim + query_dim)); lingvoc
   * has no None here: this is that value for the default dims (1024 + 1024). */
  lv_params_set_init(at, "gaussian", 1.0 / sqrt(2048.0));
  lv_params_define_params(p, "attention", at, "Additive attention params (source_dim and query_dim are set by the "
                          "decoder: source_dim, rnn_cell_dim).");
  lv_params_define_params(p, "atten_rnn_cell_tpl", lv_mt_default_cell_params(), "Attention RNNCell params template.");
  lv_params_define_params(p, "rnn_cell_tpl", lv_mt_default_cell_params(), "RNNCell params template.");
  lv_params_define_int(p, "rnn_cell_dim", 1024, "size of the rnn cells.");
  lv_params_define_int(p, "rnn_layers", 8, "Number of rnn layers.");
  lv_params_define_int(p, "residual_start", 2, "Start residual connections from this layer.");
  lv_params_define_bool(p, "use_prev_atten_ctx", false, "If True, all decoder layers use previous attention context "
                        "as input. Otherwise, only first decoder layer uses previous attention context and the rest "
                        "of the layers use current attention context.");
  lv_params_define_float(p, "dropout_prob", 0.0, "Prob at which we do dropout.");
  lv_params_define_bool(p, "use_zero_atten_state", false, "To use zero attention state instead of computing "
                        "attention with zero query vector.");
  lv_params *sm = lv_params_instantiate("SimpleFullSoftmax");
  LV_ASSERT(!lv_params_set_int(sm, "num_classes", 32000));
  LV_ASSERT(!lv_params_set_int(sm, "num_shards", 16));
  lv_params_set_init(sm, "uniform", 0.04);
  lv_params_define_params(p, "softmax", sm, "Softmax params (input_dim is set by the decoder).");
  lv_params_define_bool(p, "feed_attention_context_vec_to_softmax", false,
                        "Whether to concatenate attention context vector to rnn output before softmax.");
}

void lv_atten_lstm_decoder_define_asr_params(lv_params *p) {
  lv_params *e = lv_params_instantiate("EmbeddingLayer");
  LV_ASSERT(!lv_params_set_int(e, "vocab_size", 96));
  LV_ASSERT(!lv_params_set_int(e, "embedding_dim", 96));
  LV_ASSERT(!lv_params_set_int(e, "max_num_shards", 1));
  lv_params_set_init(e, "uniform", 1.0);
  lv_params_define_params(p, "emb", e, "Embedding layer params (embedding_dim is set to emb_dim).");
  lv_params_define_int(p, "emb_dim", 96, "dimension of the embedding layer.");
  lv_params *c = lv_params_instantiate("LSTMCellSimple");
  lv_params_set_init(c, "uniform", 0.1);
  lv_params_define_params(p, "rnn_cell_tpl", c, "RNNCell params template.");
  lv_params_define_int(p, "rnn_cell_dim", 256, "size of the rnn cells.");
  lv_params_define_int(p, "rnn_cell_hidden_dim", 0, "if > 0, size of the projection layer.");
  lv_params *at = lv_params_instantiate("AdditiveAttention");
  LV_ASSERT(!lv_params_set_int(at, "hidden_dim", 128));
  lv_params_set_init(at, "uniform_sqrt_dim", sqrt(3.0));
  lv_params_define_params(p, "attention", at, "Additive attention params (source_dim and query_dim are set by the "
                          "decoder: source_dim, rnn_cell_dim).");
  lv_params *sm = lv_params_instantiate("SimpleFullSoftmax");
  LV_ASSERT(!lv_params_set_int(sm, "num_classes", 96));
  lv_params_set_init(sm, "uniform", 0.1);
  lv_params_define_params(p, "softmax", sm, "Softmax params (input_dim is set by the decoder).");
  lv_params_define_bool(p, "softmax_uses_attention", true, "Controls whether attention is fed to the softmax.");
  lv_params_define_int(p, "source_dim", 512, "Dimension of the source encoding.");
  lv_params_define_int(p, "atten_context_dim", 0, "Depth of the attention context vector output (0: source_dim).");
  lv_params_define_int(p, "rnn_layers", 1, "Number of rnn layers.");
  lv_params_define_int(p, "residual_start", 0, "Start residual connections from this layer. For this and higher "
                       "layers, the layer output is the sum of the RNN cell output and input; if the layer also "
                       "normalizes its output, then the normalization is done over this sum. Set to 0 to disable "
                       "residual connections.");
  lv_params_define_float(p, "dropout_prob", 0.0, "Prob at which we do dropout.");
  lv_params_define_bool(p, "use_unnormalized_logits_as_log_probs", true,
                        "If true, decoder beam search may return unnormalized logits as log_probs.");
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

/* AsrDecoder's embedding: emb with embedding_dim = emb_dim. */
static lv_status asr_embedding(lv_atten_lstm_decoder *d, const lv_params *dp, const char *path, const char *scope,
                               lv_varstore *vs) {
  char w[160];
  lv_params *p = NULL;
  LV_TRY(lv_owner_params(&d->own, lv_params_sub(dp, "emb"), key(w, path, "emb"), "emb", &p));
  LV_TRY(lv_check_int_range(key(w, path, "emb_dim"), lv_params_int(dp, "emb_dim"), 1, 1 << 20));
  LV_TRY(lv_params_set_int(p, "embedding_dim", lv_params_int(dp, "emb_dim")));
  lv_layer *l = NULL;
  LV_TRY(lv_owner_layer(&d->own, p, scope, vs, key(w, path, "emb"), &l));
  if (strcmp(l->cls->cls, "EmbeddingLayer") && strcmp(l->cls->cls, "SimpleEmbeddingLayer"))
    return lv_status_make(LV_ERR_INVALID, "%s.emb.cls must be EmbeddingLayer or SimpleEmbeddingLayer, got %s", path,
                          l->cls->cls);
  d->emb = (lv_embedding_layer *)l;
  return NULL;
}

static lv_status init(lv_atten_lstm_decoder *d, const lv_params *dp, const char *path, const char *scope,
                      int64_t enc_out, lv_varstore *vs, const char *who, uint64_t seed, uint64_t stream_base,
                      bool asr) {
  memset(d, 0, sizeof *d);
  snprintf(d->who, sizeof d->who, "%s", who);
  d->seed = seed;
  d->stream_base = stream_base;
  d->asr = asr;
  char k1[160];
  lv_layer_owner *o = &d->own;
  if (asr) LV_TRY(asr_embedding(d, dp, path, scope, vs));
  else LV_TRY(lv_owner_embedding(o, dp, path, scope, vs, &d->emb));
  int64_t src_dim = lv_params_int(dp, "source_dim"), n = lv_params_int(dp, "rnn_layers");
  d->cell_dim = lv_params_int(dp, "rnn_cell_dim");
  if (src_dim != enc_out)
    return lv_status_make(LV_ERR_INVALID, "%s.source_dim (%lld) must equal the encoder's output depth (%lld)", path,
                          (long long)src_dim, (long long)enc_out);
  LV_TRY(lv_check_int_range(key(k1, path, "rnn_layers"), n, 1, LV_ATTEN_DEC_MAX_LAYERS));
  LV_TRY(lv_check_int_range(key(k1, path, "rnn_cell_dim"), d->cell_dim, 1, 1 << 20));
  LV_TRY(lv_check_prob(key(k1, path, "dropout_prob"), lv_params_float(dp, "dropout_prob"), &d->dropout));
  d->residual_start = lv_params_int(dp, "residual_start");
  if (asr) {
    if (lv_params_int(dp, "rnn_cell_hidden_dim") != 0)
      return lv_status_make(LV_ERR_INVALID, "%s.rnn_cell_hidden_dim = %lld: projected decoder cells are not "
                            "implemented in lingvoc; leave it 0", path, (long long)lv_params_int(dp, "rnn_cell_hidden_dim"));
    d->feed_ctx = lv_params_bool(dp, "softmax_uses_attention");
    d->unnorm_log_probs = lv_params_bool(dp, "use_unnormalized_logits_as_log_probs");
  } else {
    d->use_prev_atten_ctx = lv_params_bool(dp, "use_prev_atten_ctx");
    d->use_zero_atten_state = lv_params_bool(dp, "use_zero_atten_state");
    d->feed_ctx = lv_params_bool(dp, "feed_attention_context_vec_to_softmax");
  }
  /* The attention, as MTDecoderV1 sets it up. */
  lv_params *ap = NULL;
  LV_TRY(lv_owner_params(o, lv_params_sub(dp, "attention"), key(k1, path, "attention"), NULL, &ap));
  const char *an = lv_params_str(ap, "name");
  if (!an || !*an) LV_TRY(lv_params_set_string(ap, "name", "atten"));
  if (!lv_params_has(ap, "source_dim") || !lv_params_has(ap, "query_dim"))
    return lv_status_make(LV_ERR_INVALID, "%s.attention.cls: %s is not an attention class", path,
                          lv_params_str(ap, "cls"));
  LV_TRY(lv_params_set_int(ap, "source_dim", src_dim));
  LV_TRY(lv_params_set_int(ap, "query_dim", d->cell_dim));
  lv_layer *al = NULL;
  LV_TRY(lv_owner_layer(o, ap, scope, vs, key(k1, path, "attention"), &al));
  d->atten = lv_attention_of(al);
  if (!d->atten)
    return lv_status_make(LV_ERR_INVALID, "%s.attention.cls must be AdditiveAttention, DotProductAttention "
                          "or MultiHeadedAttention, got %s", path, al->cls->cls);
  /* Lingvo's atten_context_dim: ctx_post_proj_dim with enable_ctx_post_proj, else source_dim
   * (AsrDecoder: its own atten_context_dim, 0 meaning source_dim). */
  bool post = lv_params_has(ap, "enable_ctx_post_proj") && lv_params_bool(ap, "enable_ctx_post_proj");
  d->ctx_dim = post ? lv_params_int(ap, "ctx_post_proj_dim") : src_dim;
  if (asr && lv_params_int(dp, "atten_context_dim") > 0) d->ctx_dim = lv_params_int(dp, "atten_context_dim");
  int64_t got = atten_ctx_width(d->atten, src_dim);
  if (got != d->ctx_dim)
    return lv_status_make(LV_ERR_INVALID, "%s.attention gives contexts of width %lld but MTDecoderV1 sizes "
                          "its cells for %lld (%s.%s): e.g. set attention.hidden_dim to source_dim", path,
                          (long long)got, (long long)d->ctx_dim, path, post ? "attention.ctx_post_proj_dim" : "source_dim");
  const int64_t emb_dim = d->emb->embedding_dim;
  const char *cell0_tpl = asr ? "rnn_cell_tpl" : "atten_rnn_cell_tpl";
  LV_TRY(lv_owner_cell(o, lv_params_sub(dp, cell0_tpl), key(k1, path, cell0_tpl), asr ? "rnn_cell" : "atten_rnn",
                   emb_dim + d->ctx_dim, d->cell_dim, scope, vs, &d->atten_cell));
  char view[LV_VAR_NAME_MAX + 32];
  snprintf(view, sizeof view, "%s/frnn_with_atten", scope);
  LV_TRY(lv_frnn_atten_view(&d->atten_rnn, view, d->atten_cell, al, d->use_prev_atten_ctx,
                            d->use_zero_atten_state, d->ctx_dim));
  for (int i = 1; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, asr ? "rnn_cell_%d" : "rnn%d", i);
    lv_layer *c = NULL;
    LV_TRY(lv_owner_cell(o, lv_params_sub(dp, "rnn_cell_tpl"), key(k1, path, "rnn_cell_tpl"), name, d->cell_dim + d->ctx_dim,
                     d->cell_dim, scope, vs, &c));
    snprintf(view, sizeof view, "%s/frnn%d", scope, i);
    lv_frnn_view(&d->rnn[i - 1], view, c, false);
  }
  d->layers = (int)n;
  /* The softmax over [output, context] or the output. */
  int64_t v = d->emb->vocab_size;
  if (lv_params_int(dp, "softmax.num_classes") != v)
    return lv_status_make(LV_ERR_INVALID, "%s.softmax.num_classes (%lld) must equal %s.emb.vocab_size (%lld)", path,
                          (long long)lv_params_int(dp, "softmax.num_classes"), path, (long long)v);
  lv_params *sp = NULL;
  LV_TRY(lv_owner_params(o, lv_params_sub(dp, "softmax"), key(k1, path, "softmax"), "softmax", &sp));
  LV_TRY(lv_params_set_int(sp, "input_dim", d->cell_dim + (d->feed_ctx ? d->ctx_dim : 0)));
  lv_layer *l = NULL;
  LV_TRY(lv_owner_layer(o, sp, scope, vs, key(k1, path, "softmax"), &l));
  if (strcmp(l->cls->cls, "SimpleFullSoftmax"))
    return lv_status_make(LV_ERR_INVALID, "%s.softmax.cls must be SimpleFullSoftmax, got %s", path, l->cls->cls);
  d->softmax = (lv_softmax_layer *)l;
  return NULL;
}

lv_status lv_atten_lstm_decoder_init(lv_atten_lstm_decoder *d, const lv_params *dp, const char *path,
                                     const char *scope, int64_t enc_out, lv_varstore *vs, const char *who,
                                     uint64_t seed, uint64_t stream_base) {
  return init(d, dp, path, scope, enc_out, vs, who, seed, stream_base, false);
}

lv_status lv_atten_lstm_decoder_init_asr(lv_atten_lstm_decoder *d, const lv_params *dp, const char *path,
                                         const char *scope, int64_t enc_out, lv_varstore *vs, const char *who,
                                         uint64_t seed, uint64_t stream_base) {
  return init(d, dp, path, scope, enc_out, vs, who, seed, stream_base, true);
}

/* Whether layer i >= 1 adds its input: MTDecoderV1 from residual_start on, AsrDecoder when
 * residual_start > 0 and i + 1 >= residual_start. */
static bool residual(const lv_atten_lstm_decoder *d, int i) {
  return d->asr ? d->residual_start > 0 && i + 1 >= d->residual_start : i >= d->residual_start;
}


static lv_tensor *transpose2(lv_graph *g, lv_tensor *x) {
  static const int perm[2] = {1, 0};
  return x ? lv_op_transpose(g, x, perm) : NULL;
}

/* Dropout stream k of the graph's step (training only). */
static lv_tensor *dropout(const lv_atten_lstm_decoder *d, lv_graph *g, lv_tensor *x, uint64_t k) {
  return lv_op_step_dropout(g, x, d->dropout, d->seed, LV_ATTEN_DEC_STREAMS, d->stream_base + k);
}

static lv_tensor *concat2(lv_graph *g, lv_tensor *a, lv_tensor *b, int axis) {
  if (!a || !b) return NULL;
  lv_tensor *parts[2] = {a, b};
  return lv_op_concat(g, parts, 2, axis);
}

lv_tensor *lv_atten_lstm_decoder_fprop(lv_atten_lstm_decoder *d, lv_graph *g, lv_tensor *encoded,
                                       lv_tensor *enc_pads, lv_tensor *tgt_ids, lv_tensor *tgt_paddings,
                                       lv_tensor **probs) {
  lv_tensor *x = lv_embedding_layer_lookup_time_major(d->emb, g, tgt_ids, tgt_paddings);
  lv_tensor *tp = transpose2(g, tgt_paddings);
  if (!x || !tp) return NULL;
  tp = lv_op_reshape(g, tp, lv_shape3(tp->shape.d[0], tp->shape.d[1], 1));
  x = dropout(d, g, x, 0);
  lv_frnn_atten_out o;
  if (!x || !lv_frnn_atten_run(&d->atten_rnn, g, encoded, enc_pads, NULL, x, tp, &o)) return NULL;
  lv_tensor *xs = o.rnn_output, *ctxs = o.atten_context;
  for (int i = 1; xs && i < d->layers; i++) {
    lv_tensor *ys = NULL;
    if (!lv_frnn_run(&d->rnn[i - 1], g, concat2(g, xs, ctxs, 2), tp, NULL, &ys, NULL)) return NULL;
    ys = dropout(d, g, ys, 1 + (uint64_t)i);
    xs = residual(d, i) ? lv_op_add(g, xs, ys) : ys;
  }
  if (probs) *probs = o.atten_probs;
  return d->feed_ctx ? concat2(g, xs, ctxs, 2) : xs;
}

/* ---- incremental decoding ---- */

typedef struct dec_state {
  lv_atten_lstm_decoder *d;
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
} dec_state;

static lv_status graph_error(const lv_atten_lstm_decoder *d, lv_graph *g, const char *what, int step) {
  lv_status s = lv_graph_status(g);
  return s ? lv_status_wrap(s, "%s decoder %s %d", d->who, what, step)
           : lv_status_make(LV_ERR_INTERNAL, "%s decoder %s %d failed", d->who, what, step);
}

lv_status lv_atten_lstm_decoder_begin(lv_atten_lstm_decoder *m, lv_graph *g, lv_tensor *enc, lv_tensor *pads,
                                      void **state) {
  dec_state *d = calloc(1, sizeof *d);
  LV_ASSERT(d);
  *state = d;
  d->d = m;
  d->g = g;
  d->states = calloc((size_t)m->layers, sizeof *d->states);
  LV_ASSERT(d->states);
  if (!lv_attention_pack_source(m->atten, g, enc, NULL, pads, &d->src))
    return graph_error(m, g, "packing the source, step", 0);
  d->src_len = enc->shape.d[0];
  d->batch = d->rows = enc->shape.d[1];
  for (int i = 0; i < m->layers; i++) {
    lv_layer *cell = i ? m->rnn[i - 1].cell : m->atten_cell;
    if (!lv_rnn_cell_zero_state(cell, g, d->batch, &d->states[i])) return graph_error(m, g, "initial state, step", 0);
  }
  if (m->use_zero_atten_state) {
    d->ctx = lv_graph_zeros(g, LV_F32, lv_shape2(d->batch, m->ctx_dim));
    d->probs = lv_graph_zeros(g, LV_F32, lv_shape2(d->batch, d->src_len));
  } else {
    lv_tensor *q = lv_graph_zeros(g, LV_F32, lv_shape2(d->batch, m->cell_dim));
    if (!q) d->ctx = NULL;
    else if (!lv_attention_compute_context(m->atten, g, &d->src, q, &d->ctx, &d->probs)) d->ctx = NULL;
  }
  if (!d->ctx || !d->probs) return graph_error(m, g, "initial attention, step", 0);
  d->nslots = 2 * m->layers + 2;
  d->bufs = calloc(2 * (size_t)d->nslots, sizeof *d->bufs);
  LV_ASSERT(d->bufs);
  d->mark = lv_graph_get_mark(g);
  return NULL;
}

void lv_atten_lstm_decoder_end(void *state) {
  dec_state *d = state;
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
static lv_status keep_state(dec_state *d, int slot, lv_tensor **t) {
  if (!*t) return NULL;
  lv_tensor **b = &d->bufs[(1 - d->set) * d->nslots + slot];
  if (!*b || (*b)->dtype != (*t)->dtype || !lv_shape_eq(&(*b)->shape, &(*t)->shape)) {
    lv_tensor_free(*b);
    *b = lv_tensor_new_on(lv_graph_device(d->g), (*t)->dtype, (*t)->shape);
    if (!*b)
      return lv_status_make(LV_ERR_RESOURCE, "%s decoder: out of memory for a state of %lld values", d->d->who,
                            (long long)lv_tensor_numel(*t));
  }
  if (!lv_graph_copy_into(d->g, *b, 0, *t)) return graph_error(d->d, d->g, "keeping the state of step", d->step);
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
  if (!x || !cc->begin(cell, g, lv_op_reshape(g, x, lv_shape3(1, x->shape.d[0], x->shape.d[1])), false, &seq)) return false;
  return cc->step(cell, g, &seq, 0, s0, extra, NULL, s1);
}

lv_status lv_atten_lstm_decoder_step(void *state, int n, const int32_t *step_ids, const int32_t *parent,
                                     float *log_probs, float *atten_probs) {
  dec_state *d = state;
  lv_atten_lstm_decoder *m = d->d;
  lv_graph *g = d->g;
  const int64_t V = m->softmax->num_classes;
  if (n <= 0 || n % d->batch)
    return lv_status_make(LV_ERR_INVALID, "%s decoder step: %d rows is not a multiple of the batch %lld", m->who,
                          n, (long long)d->batch);
  if (!parent && n != d->rows && d->step > 0)
    return lv_status_make(LV_ERR_INVALID, "%s decoder step: %d rows without parents after a step of "
                          "%lld rows", m->who, n, (long long)d->rows);
  for (int i = 0; i < n; i++) {
    if (step_ids[i] < 0 || step_ids[i] >= V)
      return lv_status_make(LV_ERR_INVALID, "%s decoder step: step_ids[%d] = %d is outside [0, %lld)",
                            m->who, i, step_ids[i], (long long)V);
    if (parent && (parent[i] < 0 || parent[i] >= d->rows || parent[i] % d->batch != i % d->batch))
      return lv_status_make(LV_ERR_INVALID, "%s decoder step: parent[%d] = %d is not a row of "
                            "sentence %lld among the %lld rows", m->who, i, parent[i], (long long)(i % d->batch),
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
    if (!it) return graph_error(m, g, "step", d->step);
    for (int i = 0; i < m->layers; i++) {
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
  lv_tensor *emb = ids ? lv_embedding_layer_lookup(m->emb, g, ids) : NULL; /* [n, E] */
  lv_rnn_state s1;
  lv_tensor *ctx = NULL, *probs = NULL, *out = NULL;
  bool ok = emb && d->ctx && cell_step(m->atten_cell, g, emb, d->ctx, &d->states[0], &s1) &&
            lv_attention_compute_context(m->atten, g, &d->src, s1.m, &ctx, &probs);
  if (ok) {
    d->states[0] = s1;
    out = s1.m;
  }
  lv_tensor *atten_ctx = m->use_prev_atten_ctx ? d->ctx : ctx;
  for (int i = 1; ok && i < m->layers; i++) {
    ok = cell_step(m->rnn[i - 1].cell, g, concat2(g, out, atten_ctx, 1), NULL, &d->states[i], &s1);
    if (ok) {
      d->states[i] = s1;
      out = residual(m, i) ? lv_op_add(g, out, s1.m) : s1.m;
    }
  }
  if (ok && m->feed_ctx) out = concat2(g, out, atten_ctx, 1);
  lv_tensor *lp = ok && out ? lv_softmax_layer_logits(m->softmax, g, out) : NULL;
  if (lp && !m->unnorm_log_probs) lp = lv_op_log_softmax(g, lp);
  if (!lp) return graph_error(m, g, "step", d->step);
  LV_TRY(lv_tensor_to_host(lp, log_probs));
  /* The probabilities exposed to the search: those of the context this step consumed. */
  if (atten_probs) LV_TRY(lv_tensor_to_host(m->use_prev_atten_ctx ? d->probs : probs, atten_probs));
  d->ctx = ctx;
  d->probs = probs;
  for (int i = 0; i < m->layers; i++) {
    LV_TRY(keep_state(d, 2 * i, &d->states[i].m));
    LV_TRY(keep_state(d, 2 * i + 1, &d->states[i].c));
  }
  LV_TRY(keep_state(d, 2 * m->layers, &d->ctx));
  LV_TRY(keep_state(d, 2 * m->layers + 1, &d->probs));
  d->set = 1 - d->set;
  d->rows = n;
  d->step++;
  return NULL;
}

/* Float32: one step's graph memory (the graph is rewound every step): the logits
 * and log-probs (2 V), each layer's gates and their layer norm (~8 x 4 cell_dim) and the
 * attention's per-position hidden activations (~4 x src_len x hidden); plus the two sets of
 * kept states (m, c per layer, context, probs). target_seq_len does not matter. */
int64_t lv_atten_lstm_decoder_row_bytes(const lv_atten_lstm_decoder *m, int64_t src_len) {
  int64_t hidden = m->cell_dim;
  if (!strcmp(m->atten->base.cls->cls, "AdditiveAttention"))
    hidden = ((const lv_additive_attention *)m->atten)->hidden_dim;
  else if (!strcmp(m->atten->base.cls->cls, "MultiHeadedAttention"))
    hidden = ((const lv_multi_headed_attention *)m->atten)->hidden_dim;
  int64_t per_step = 2 * m->softmax->num_classes + 32 * m->cell_dim * m->layers + 4 * src_len * hidden;
  int64_t kept = 2 * (2 * m->cell_dim * m->layers + m->ctx_dim + src_len);
  return (per_step + kept) * 4;
}


void lv_atten_lstm_decoder_free(lv_atten_lstm_decoder *d) { lv_layer_owner_free(&d->own); }
