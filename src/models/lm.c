/* lm.model.LanguageModel: see lm.h. Params follow Lingvo's LanguageModel.Params() with its
 * training defaults; Lingvo options lingvoc does not implement (packed_input) are errors
 * when set, not ignored. train.max_lstm_gradient_norm marks the RNN cells' variables as the
 * learner's clip group (Lingvo's AdjustGradients clips var_grad.lm.rnns). */
#include "models/lm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/rng.h"
#include "core/ops.h"
#include "input/batcher.h"
#include "input/stream_input.h"
#include "input/tokenizer.h"
#include "layers/lm_layers.h"
#include "layers/owner.h"

typedef struct lm_task {
  lv_task base;
  lv_params *lm_p; /* owned copy of task.lm */
  lv_layer *layer;
  lv_lm *lm;
  bool sum_loss;
} lm_task;

static lv_params *lm_task_params(void) {
  lv_params *p = lv_task_base_params("lm.model.LanguageModel");
  lv_params_define_params(p, "lm", lv_params_instantiate("RnnLm"), "LM layer (RnnLm or TransformerLm).");
  lv_params_define_bool(p, "packed_input", false, "Whether the inputs are packed (lingvoc: must be False).");
  lv_params *tp = lv_params_sub(p, "train");
  lv_params_define_float(tp, "max_lstm_gradient_norm", 0.0,
                         "Clip gradient for vars in lstm layers by setting this value to something > 0.");
  lv_params_define_bool(tp, "sum_loss_across_tokens_in_batch", false,
                        "Sum the logP across predicted tokens in batch when set to True; average otherwise.");
  lv_params *dp = lv_params_new_cls("LmDecoder");
  lv_params_define_float(dp, "sample_temperature", 1.0, "lingvoc: softmax temperature of --sample (> 0).");
  lv_params_define_int(dp, "sample_top_k", 0, "lingvoc: --sample draws from the k most likely tokens (0: all).");
  lv_params_define_int(dp, "sample_seed", 1, "lingvoc: seed of --sample (sample i draws from stream i).");
  lv_params_define_int(dp, "sample_max_length", 200,
                       "lingvoc: most tokens --sample generates after the prefix (it stops earlier at </s>).");
  lv_params_define_params(p, "decoder", dp, "lingvoc: what bin/decoder's --score_text and --sample use.");
  /* LanguageModel.Params()'s training defaults. */
  LV_ASSERT(!lv_params_set_float(tp, "learning_rate", 0.001));
  LV_ASSERT(!lv_params_set_float(tp, "l2_regularizer_weight", 1e-6));
  LV_ASSERT(!lv_params_set_float(tp, "clip_gradient_norm_to_value", 1.0));
  LV_ASSERT(!lv_params_set_float(tp, "grad_norm_to_clip_to_zero", 100.0));
  LV_ASSERT(!lv_params_set_int(tp, "vn_start_step", 20000));
  lv_task_set_piecewise_lr_schedule(tp);
  return p;
}

static void lm_destroy(lv_task *t) {
  lm_task *m = (lm_task *)t;
  lv_layer_free(m->layer);
  lv_params_free(m->lm_p);
  lv_task_free_decode_state(t);
  free(m);
}

/* The variables of the RNN cells (S/<rnns.name>_<i>/...) form the learner's clip group
 * of train.max_lstm_gradient_norm. A TransformerLm has no lm.rnns: Lingvo fails on it. */
static lv_status mark_lstm_vars(lm_task *m, lv_varstore *vs) {
  if (m->lm->kind != LV_LM_RNN)
    return lv_status_make(LV_ERR_INVALID, "task.train.max_lstm_gradient_norm: %g needs an RnnLm (it clips the "
                          "gradients of lm.rnns); task.lm.cls is %s",
                          lv_params_float(m->base.p, "train.max_lstm_gradient_norm"), lv_params_str(m->lm_p, "cls"));
  const char *rname = lv_params_str(m->lm_p, "rnns.name");
  int marked = 0;
  for (int i = 0; i < m->lm->num_layers; i++) {
    char prefix[LV_VAR_NAME_MAX + 100];
    int len = snprintf(prefix, sizeof prefix, "%s/%.80s_%d/", m->lm->base.scope, *rname ? rname : "rnns", i);
    for (int k = 0; k < lv_varstore_count(vs); k++) {
      lv_var *v = lv_varstore_get(vs, k);
      if (v->trainable && !strncmp(v->name, prefix, (size_t)len)) {
        v->grad_clip_group = true;
        marked++;
      }
    }
  }
  if (!marked)
    return lv_status_make(LV_ERR_INTERNAL, "task.train.max_lstm_gradient_norm: no LSTM variable found under %s",
                          m->lm->base.scope);
  return NULL;
}

/* The input's ids index the LM's embedding and softmax: a tokenizer with more ids than
 * task.lm.vocab_size would stop training at the first out-of-range id, minutes in (the
 * gather's error); said here, before anything runs. A tokenizer that cannot be built (its
 * vocabulary file missing) is left to the input, whose error names the file. */
static lv_status check_input_vocab(const lm_task *m, const lv_params *ip) {
  if (!ip || !lv_params_has(ip, "tokenizer") || !lv_params_sub(ip, "tokenizer")) return NULL;
  lv_tokenizer *tok = NULL;
  lv_status e = lv_tokenizer_create(lv_params_sub(ip, "tokenizer"), &tok);
  if (e) {
    lv_status_free(e);
    return NULL;
  }
  int64_t n = tok->num_ids;
  lv_tokenizer_destroy(tok);
  if (n > m->lm->vocab_size)
    return lv_status_make(LV_ERR_INVALID, "input.tokenizer's vocabulary has %lld ids, more than task.lm.vocab_size "
                          "%lld (its embedding and softmax rows): set vocab_size to at least %lld",
                          (long long)n, (long long)m->lm->vocab_size, (long long)n);
  return NULL;
}

static lv_status lm_create(const lv_params *p, const lv_params *input_p, lv_varstore *vs, lv_task **out) {
  *out = NULL;
  lm_task *m = calloc(1, sizeof *m);
  LV_ASSERT(m);
  m->base.cls = &lv_lm_language_model;
  m->base.p = p;
  lv_status s = NULL;
  const char *name = lv_params_str(p, "name");
  if (!*name) s = lv_status_make(LV_ERR_INVALID, "task.name must be set (e.g. \"lm\")");
  if (!s && lv_params_bool(p, "packed_input"))
    s = lv_status_make(LV_ERR_INVALID, "task.packed_input: packed inputs are not supported by lingvoc; leave it False");
  if (!s && !lv_params_sub(p, "lm")) s = lv_status_make(LV_ERR_INVALID, "task.lm must be set (it is None)");
  if (!s) {
    m->lm_p = lv_params_copy(lv_params_sub(p, "lm"));
    lv_params_freeze(m->lm_p);
    s = lv_status_wrap(lv_layer_create(m->lm_p, name, vs, &m->layer), "task.lm");
  }
  if (!s) {
    m->lm = lv_lm_of(m->layer);
    if (!m->lm || m->lm->kind == LV_LM_RNN_NO_EMB)
      s = lv_status_make(LV_ERR_INVALID, "task.lm.cls must be RnnLm or TransformerLm (a layer over token ids), got %s",
                         lv_params_str(m->lm_p, "cls"));
  }
  if (!s) s = check_input_vocab(m, input_p);
  if (!s && lv_params_float(p, "train.max_lstm_gradient_norm") > 0) s = mark_lstm_vars(m, vs);
  m->sum_loss = lv_params_bool(p, "train.sum_loss_across_tokens_in_batch");
  if (s) {
    lm_destroy(&m->base);
    return s;
  }
  *out = &m->base;
  return NULL;
}

/* A host array [T, B] brought into g as an arena tensor (the host buffer may then go). */
static lv_tensor *host_to_graph(lv_graph *g, lv_dtype dt, int64_t t, int64_t b, void *host) {
  lv_tensor hv = lv_tensor_view(dt, lv_shape2(t, b), host);
  lv_tensor *src = lv_graph_from_host(g, &hv);
  lv_tensor *dst = src ? lv_graph_tensor(g, dt, lv_shape2(t, b)) : NULL;
  if (!dst || !lv_graph_copy_into(g, dst, 0, src)) return NULL;
  return dst;
}

/* The batch's tensors, trimmed to the longest real row and time-major. */
typedef struct lm_inputs {
  lv_tensor *ids, *labels, *paddings, *weights; /* [T, B] on the graph */
  int64_t t, b;
  double num_words;
  int32_t *h_labels; /* [T, B] host copies for the accuracy */
  float *h_weights;
} lm_inputs;

static void lm_inputs_free(lm_inputs *in) {
  free(in->h_labels);
  free(in->h_weights);
}

static lv_status read_inputs(lv_graph *g, const lv_batch *b, lm_inputs *in) {
  memset(in, 0, sizeof *in);
  const lv_tensor *ids = lv_batch_get(b, "ids"), *labels = lv_batch_get(b, "labels");
  const lv_tensor *pads = lv_batch_get(b, "paddings"), *w = lv_batch_get(b, "weights");
  const lv_tensor *wc = lv_batch_get(b, "word_count");
  if (!ids || !labels || !pads || !w || !wc)
    return lv_status_make(LV_ERR_INVALID, "lm.model.LanguageModel needs batch keys ids, labels, paddings, weights "
                          "and word_count (an LmInput dataset)");
  if (ids->shape.rank != 2 || ids->dtype != LV_I32 || labels->dtype != LV_I32 || pads->dtype != LV_F32 ||
      w->dtype != LV_F32 || !lv_shape_eq(&ids->shape, &labels->shape) || !lv_shape_eq(&ids->shape, &pads->shape) ||
      !lv_shape_eq(&ids->shape, &w->shape) || wc->dtype != LV_I32 || lv_tensor_numel(wc) != ids->shape.d[0])
    return lv_status_make(LV_ERR_INVALID, "lm.model.LanguageModel: ids, labels (int32), paddings, weights (float) "
                          "must be [B, L] and word_count int32 [B]");
  const int64_t B = ids->shape.d[0], L = ids->shape.d[1];
  size_t n = (size_t)(B * L);
  int32_t *hi = malloc(4 * n + 1), *hl = malloc(4 * n + 1), *hw32 = malloc(4 * (size_t)B + 1);
  float *hp = malloc(4 * n + 1), *hw = malloc(4 * n + 1);
  LV_ASSERT(hi && hl && hp && hw && hw32);
  lv_status s = lv_tensor_to_host(ids, hi);
  if (!s) s = lv_tensor_to_host(labels, hl);
  if (!s) s = lv_tensor_to_host(pads, hp);
  if (!s) s = lv_tensor_to_host(w, hw);
  if (!s) s = lv_tensor_to_host(wc, hw32);
  int64_t T = 0;
  for (int64_t i = 0; !s && i < B; i++) {
    int64_t real = 0;
    for (int64_t j = 0; j < L; j++) real += hp[i * L + j] < 0.5f;
    if (real > T) T = real;
    in->num_words += (double)hw32[i] + 1.0;
  }
  if (T == 0) T = L > 0 ? 1 : 0;
  if (!s && T == 0) s = lv_status_make(LV_ERR_INVALID, "lm.model.LanguageModel: a batch of empty rows (L = 0)");
  if (!s) {
    size_t m = (size_t)(T * B);
    int32_t *ti = malloc(4 * m), *tl = malloc(4 * m);
    float *tp = malloc(4 * m), *tw = malloc(4 * m);
    LV_ASSERT(ti && tl && tp && tw);
    for (int64_t t = 0; t < T; t++)
      for (int64_t i = 0; i < B; i++) {
        ti[t * B + i] = hi[i * L + t];
        tl[t * B + i] = hl[i * L + t];
        tp[t * B + i] = hp[i * L + t];
        tw[t * B + i] = hw[i * L + t];
      }
    in->t = T;
    in->b = B;
    in->ids = host_to_graph(g, LV_I32, T, B, ti);
    in->labels = host_to_graph(g, LV_I32, T, B, tl);
    in->paddings = host_to_graph(g, LV_F32, T, B, tp);
    in->weights = host_to_graph(g, LV_F32, T, B, tw);
    free(ti);
    free(tp);
    in->h_labels = tl;
    in->h_weights = tw;
    if (!in->ids || !in->labels || !in->paddings || !in->weights) s = lv_graph_status(g);
  }
  free(hi);
  free(hl);
  free(hp);
  free(hw);
  free(hw32);
  return s;
}

/* Σ [argmax == label] * w over the [T, B] predictions. */
static lv_status correct_preds(const lm_inputs *in, const lv_tensor *argmax, double *correct) {
  size_t n = (size_t)(in->t * in->b);
  int32_t *am = malloc(4 * n + 4);
  LV_ASSERT(am);
  lv_status s = lv_tensor_to_host(argmax, am);
  *correct = 0;
  for (size_t i = 0; !s && i < n; i++) *correct += am[i] == in->h_labels[i] ? in->h_weights[i] : 0.0;
  free(am);
  return s;
}

static bool graph_ok(lv_graph *g) {
  lv_status s = lv_graph_status(g);
  bool ok = s == NULL;
  lv_status_free(s);
  return ok;
}

static bool lm_fprop(lv_task *t, lv_graph *g, lv_batch *b, bool is_eval, int64_t step, lv_metrics *mt) {
  (void)step;
  (void)is_eval;
  lm_task *m = (lm_task *)t;
  lm_inputs in;
  lv_status s = read_inputs(g, b, &in);
  lv_lm_out o;
  if (!s && !lv_lm_fprop(m->lm, g, in.ids, in.paddings, in.labels, in.weights, &o)) s = lv_graph_status(g);
  double num_preds = 0, correct = 0;
  if (!s) s = lv_tensor_item(o.xent.total_weight, &num_preds);
  if (!s) s = correct_preds(&in, o.xent.per_example_argmax, &correct);
  if (!s) {
    lv_metrics_add(mt, "loss", m->sum_loss ? o.xent.total_xent : o.xent.avg_xent, num_preds);
    lv_metrics_add_const(mt, "fraction_of_correct_next_step_preds", correct / (num_preds + 1e-4), num_preds);
    lv_metrics_add(mt, "log_pplx", o.xent.avg_xent, num_preds);
    lv_metrics_add(mt, "log_pplx_per_word", lv_op_scale(g, o.xent.total_xent, (float)(1.0 / in.num_words)),
                   in.num_words);
    lv_metrics_add_const(mt, "num_predictions", num_preds, 1.0);
    lv_metrics_add_const(mt, "num_words", in.num_words, 1.0);
  }
  lm_inputs_free(&in);
  if (s) {
    /* The graph keeps its first error; a status of our own is recorded on it. */
    lv_graph_fail(g, "%s", lv_status_msg(s));
    lv_status_free(s);
    return false;
  }
  return graph_ok(g);
}

/* ---- bin/decoder: --score_text and --sample ---------------------------------------- */

typedef struct lm_decode_state {
  lv_tokenizer *tok;
  int64_t tmax; /* input.target_max_length (0: SentencePiece without a limit) */
  double temperature;
  int64_t top_k, max_len;
  uint64_t seed;
  /* the current line's one-example batch */
  lv_batch_store store;
  bool have_store;
  int64_t lineno;
  bool sampling;     /* the line is a prefix to continue (kind "sample") */
  lv_tok_ids prefix; /* then: <s> and the prefix's tokens */
  float *probs; /* [V] sampling scratch */
  int32_t *order;
} lm_decode_state;

static void decode_state_free(void *v) {
  lm_decode_state *d = v;
  if (!d) return;
  lv_tokenizer_destroy(d->tok);
  if (d->have_store) lv_batch_store_free(&d->store);
  lv_tok_ids_free(&d->prefix);
  free(d->probs);
  free(d->order);
  free(d);
}

/* The longest continuation --sample may ask for (task.decoder.sample_max_length). */
enum { kMaxSampleLength = 1 << 20 };

static lv_status lm_decoder_setup(lv_task *t, const lv_params *cfg) {
  lm_task *m = (lm_task *)t;
  const lv_params *ip = lv_params_sub(cfg, "input");
  if (!ip || !lv_params_has(ip, "tokenizer") || !lv_params_sub(ip, "tokenizer") || !lv_params_has(ip, "target_max_length"))
    return lv_status_make(LV_ERR_INVALID, "lm.model.LanguageModel decodes with the dataset's input.tokenizer and "
                          "input.target_max_length (an LmInput dataset)");
  lm_decode_state *d = calloc(1, sizeof *d);
  LV_ASSERT(d);
  t->decode_state = d;
  t->decode_state_free = decode_state_free;
  const lv_params *dp = lv_params_sub(t->p, "decoder");
  d->temperature = lv_params_float(dp, "sample_temperature");
  d->top_k = lv_params_int(dp, "sample_top_k");
  d->max_len = lv_params_int(dp, "sample_max_length");
  d->seed = (uint64_t)lv_params_int(dp, "sample_seed");
  if (!(d->temperature > 0))
    return lv_status_make(LV_ERR_INVALID, "task.decoder.sample_temperature (--temperature) must be > 0, got %g",
                          d->temperature);
  int64_t V = m->lm->vocab_size;
  if (d->top_k < 0 || d->top_k > V)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.sample_top_k (--top_k) = %lld: expected 0 (all tokens) to the "
                          "vocabulary's %lld", (long long)d->top_k, (long long)V);
  if (d->max_len < 1 || d->max_len > kMaxSampleLength)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.sample_max_length = %lld: expected 1 to %d tokens",
                          (long long)d->max_len, kMaxSampleLength);
  LV_TRY(lv_status_wrap(lv_tokenizer_create(lv_params_sub(ip, "tokenizer"), &d->tok), "input.tokenizer"));
  /* As LmInput reads it: None is an error, 0 (SentencePiece only) no limit. */
  LV_TRY(lv_text_max_length(ip, "target_max_length", d->tok, &d->tmax));
  /* Its ids fit the LM's embedding and softmax: lm_create checked this input's tokenizer. */
  d->probs = malloc(sizeof(float) * (size_t)V);
  d->order = malloc(sizeof(int32_t) * (size_t)V);
  LV_ASSERT(d->probs && d->order);
  return NULL;
}

static lv_status lm_line_describe(lv_task *t, const char *kind, const char **verb, const char **note) {
  (void)t;
  *note = "";
  if (!strcmp(kind, "score_text")) *verb = "scoring";
  else if (!strcmp(kind, "sample")) *verb = "sampling";
  else
    return lv_status_make(LV_ERR_INVALID, "--%s: lm.model.LanguageModel scores and samples text (--score_text, --sample)",
                          kind);
  return NULL;
}

/* The --sample line: d->prefix = <s> and the line's tokens, whole (StringsToIds' ids would
 * be cut at target_max_length and, without append_eos, lack the last token); one longer
 * than target_max_length is an error, not a cut. */
static lv_status lm_prefix(lm_decode_state *d, const char *line, size_t n) {
  lv_tok_ids ti = {0};
  d->prefix.n = 0;
  lv_status s = lv_tokenizer_encode(d->tok, line, n, &ti);
  if (!s) s = lv_tok_ids_push(&d->prefix, d->tok->sos_id);
  for (int i = 0; !s && i < ti.n; i++) s = lv_tok_ids_push(&d->prefix, ti.v[i]);
  lv_tok_ids_free(&ti);
  if (!s && d->tmax > 0 && d->prefix.n > d->tmax)
    s = lv_status_make(LV_ERR_INVALID, "%d tokens with <s>, more than input.target_max_length %lld: shorten it",
                       d->prefix.n, (long long)d->tmax);
  return s ? lv_status_wrap(s, "--prefix") : NULL;
}

/* The line as LmInput batches it: ids, labels, paddings, weights [1, L], word_count [1]. */
static lv_status lm_line_to_batch(lv_task *t, const char *kind, const char *line, size_t len, int64_t lineno,
                                  lv_batch *b, bool *empty) {
  lm_decode_state *d = t->decode_state;
  *empty = false;
  d->sampling = !strcmp(kind, "sample");
  d->lineno = lineno;
  size_t n = strnlen(line, len);
  if (d->sampling) return lm_prefix(d, line, n); /* sample() reads the prefix, not a batch */
  /* Bytes the tokenizer would read as something else (<unk>, U+FFFD, the end of the line)
   * get no score rather than a wrong one: an empty output line, as --decode_text does. */
  size_t bad = n;
  if (n < len || !lv_utf8_valid(line, len, &bad)) {
    lv_warn("score_text: line %lld: %s at byte %zu: not scored (empty output line)", (long long)lineno,
            n < len ? "a NUL byte" : "invalid UTF-8", bad);
    *empty = true;
    return NULL;
  }
  lv_tok_batch tb = {0};
  const char *strs[1] = {line};
  LV_TRY(lv_status_wrap(lv_tokenizer_strings_to_ids(d->tok, strs, &n, 1, (int)d->tmax, -1, &tb), "input.tokenizer"));
  /* The line whole, as the tokenizer encodes it: the batch's labels are cut at
   * target_max_length, which scores the line cut, as the evaler does. */
  lv_tok_ids ti = {0};
  lv_status ps = lv_tokenizer_encode(d->tok, line, n, &ti);
  if (!ps) {
    int64_t scored = 0;
    for (int64_t i = 0; i < tb.len; i++) scored += tb.paddings[i] < 0.5f;
    if (ti.n + (d->tok->append_eos ? 1 : 0) > scored)
      lv_warn("score_text: line %lld: %d tokens, more than input.target_max_length %lld: only its first %lld are "
              "scored (as the evaler does)", (long long)lineno, ti.n + (d->tok->append_eos ? 1 : 0),
              (long long)d->tmax, (long long)scored);
  }
  lv_tok_ids_free(&ti);
  if (ps) {
    lv_tok_batch_free(&tb);
    return lv_status_wrap(ps, "--score_text line %lld", (long long)lineno);
  }
  if (d->have_store) lv_batch_store_free(&d->store);
  lv_batch_store_init(&d->store);
  d->have_store = true;
  const int64_t L = tb.len;
  lv_tensor *ids, *labels, *pads, *w, *wc;
  lv_status s = lv_batch_store_add(&d->store, "ids", LV_I32, lv_shape2(1, L), &ids);
  if (!s) s = lv_batch_store_add(&d->store, "labels", LV_I32, lv_shape2(1, L), &labels);
  if (!s) s = lv_batch_store_add(&d->store, "paddings", LV_F32, lv_shape2(1, L), &pads);
  if (!s) s = lv_batch_store_add(&d->store, "weights", LV_F32, lv_shape2(1, L), &w);
  if (!s) s = lv_batch_store_add(&d->store, "word_count", LV_I32, lv_shape1(1), &wc);
  if (!s) {
    memcpy(ids->data, tb.ids, 4 * (size_t)L);
    memcpy(labels->data, tb.labels, 4 * (size_t)L);
    memcpy(pads->data, tb.paddings, 4 * (size_t)L);
    for (int64_t i = 0; i < L; i++) lv_f32(w)[i] = 1.0f - tb.paddings[i];
    lv_i32(wc)[0] = 0;
    d->store.batch.size = 1;
    s = lv_batch_store_view(&d->store, b);
  }
  lv_tok_batch_free(&tb);
  return s;
}

static lv_status take_scalars(lv_decode_out *out, const char *key, const double *v, int n) {
  lv_tensor *r = lv_tensor_new(LV_F32, lv_shape1(n));
  if (r)
    for (int i = 0; i < n; i++) lv_f32(r)[i] = (float)v[i];
  return lv_decode_out_take(out, key, r);
}

/* Draws a token from logits [V] (host) with the decoder's temperature and top_k; -1 when
 * the logits are not finite. */
static int32_t draw(lm_decode_state *d, const float *logits, int64_t V, lv_rng *r) {
  int64_t k = d->top_k > 0 && d->top_k < V ? d->top_k : V;
  for (int64_t i = 0; i < V; i++) {
    if (!isfinite(logits[i])) return -1;
    d->order[i] = (int32_t)i;
  }
  /* Partial selection sort of the k largest logits. */
  for (int64_t i = 0; k < V && i < k; i++) {
    int64_t best = i;
    for (int64_t j = i + 1; j < V; j++)
      if (logits[d->order[j]] > logits[d->order[best]]) best = j;
    int32_t tmp = d->order[i];
    d->order[i] = d->order[best];
    d->order[best] = tmp;
  }
  /* exp((l - max) / T): the exponents are <= 0 for any temperature, the largest is 0. */
  double mx = -INFINITY, sum = 0;
  for (int64_t i = 0; i < k; i++) mx = fmax(mx, logits[d->order[i]]);
  for (int64_t i = 0; i < k; i++) sum += d->probs[i] = (float)exp((logits[d->order[i]] - mx) / d->temperature);
  double u = (double)lv_rng_uniform(r) * sum, acc = 0;
  for (int64_t i = 0; i < k; i++) {
    acc += d->probs[i];
    if (u < acc) return d->order[i];
  }
  return d->order[k - 1];
}

static lv_status graph_err(lv_graph *g, const char *what) {
  lv_status s = lv_graph_status(g);
  return s ? lv_status_wrap(s, "%s", what) : lv_status_make(LV_ERR_INTERNAL, "%s failed", what);
}

/* Continues the line's prefix (<s> and its tokens) by sampling; "sample" = the ids after <s>.
 * Steps through lv_lm_search (as shallow fusion does): the RNN states and the
 * Transformer's key/value caches live outside the graph, which is rewound every step, so
 * memory and time per token stay flat however long the sample. */
static lv_status sample(lm_task *m, lv_graph *g, lv_decode_out *out) {
  lm_decode_state *d = m->base.decode_state;
  const int64_t V = m->lm->vocab_size, np = d->prefix.n;
  int32_t *toks = malloc(sizeof(int32_t) * (size_t)(np + d->max_len));
  float *logp = malloc(sizeof(float) * (size_t)V);
  LV_ASSERT(toks && logp);
  memcpy(toks, d->prefix.v, sizeof(int32_t) * (size_t)np);
  lv_rng r;
  lv_rng_init(&r, d->seed, (uint64_t)d->lineno);
  lv_lm_search *ls = NULL;
  lv_status s = lv_status_wrap(lv_lm_search_begin(m->lm, g, &ls), "sample");
  int64_t len = np;
  for (int64_t t = 0; !s && t < len && len - np < d->max_len + 1; t++) {
    if ((s = lv_status_wrap(lv_lm_search_step(ls, 1, &toks[t], NULL, logp), "sample: an LM step"))) break;
    if (t < len - 1) continue;
    if (len - np == d->max_len) break;
    /* Softmax of log_softmax(logits) / T is that of logits / T. */
    int32_t next = draw(d, logp, V, &r);
    if (next < 0) {
      s = lv_status_make(LV_ERR_INTERNAL, "sample: the LM's log-probabilities after %lld tokens are not finite",
                         (long long)(len - 1));
      break;
    }
    if (next == d->tok->eos_id) break;
    toks[len++] = next;
  }
  lv_lm_search_end(ls);
  free(logp);
  if (!s) {
    lv_tensor *res = lv_tensor_new(LV_I32, lv_shape1(len - 1));
    if (res) memcpy(res->data, toks + 1, sizeof(int32_t) * (size_t)(len - 1));
    s = lv_decode_out_take(out, "sample", res);
  }
  free(toks);
  return s;
}

/* "token_logprobs" [n]: the log-probability of each scored token of a one-line batch
 * (per-token xent [T, 1] on the graph's device; weights [1, L] host, L >= T: a tokenizer
 * that pads to its max length gives padded weights that the graph's inputs cut to the
 * line's length), </s> included. */
static lv_status token_logprobs(const lv_tensor *xent, const lv_tensor *w, lv_decode_out *out) {
  if (!xent || !w) return NULL;
  const int64_t T = lv_tensor_numel(xent), L = lv_tensor_numel(w);
  if (T > L) return NULL; /* not a one-line batch */
  for (int64_t i = T; i < L; i++)
    if (lv_f32(w)[i] > 0) return NULL;
  float *x = malloc(sizeof(float) * (size_t)(T + 1));
  LV_ASSERT(x);
  lv_status s = lv_tensor_to_host(xent, x);
  int64_t n = 0;
  for (int64_t i = 0; !s && i < T; i++)
    if (lv_f32(w)[i] > 0) x[n++] = -x[i];
  lv_tensor *r = s ? NULL : lv_tensor_new(LV_F32, lv_shape1(n));
  if (r) memcpy(r->data, x, sizeof(float) * (size_t)n);
  free(x);
  return s ? s : lv_decode_out_take(out, "token_logprobs", r);
}

static lv_status lm_decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *out) {
  lm_task *m = (lm_task *)t;
  if (!t->decode_state) return lv_status_make(LV_ERR_INVALID, "lm decoder: decoder_setup was not run");
  if (((lm_decode_state *)t->decode_state)->sampling) return sample(m, g, out);
  if (!lv_batch_get(b, "word_count"))
    return lv_status_make(LV_ERR_INVALID, "lm.model.LanguageModel's decoder job: use --score_text or --sample");
  lv_batch gb;
  lv_batch_init(&gb);
  lv_status s = lv_batch_to_graph(g, b, &gb);
  lm_inputs in;
  memset(&in, 0, sizeof in);
  if (!s) s = read_inputs(g, &gb, &in);
  lv_lm_out o;
  if (!s && !lv_lm_fprop(m->lm, g, in.ids, in.paddings, in.labels, in.weights, &o)) s = graph_err(g, "scoring");
  double v[2] = {0, 0};
  if (!s) s = lv_tensor_item(o.xent.total_xent, &v[0]);
  if (!s) s = lv_tensor_item(o.xent.total_weight, &v[1]);
  v[0] = -v[0];
  if (!s) s = take_scalars(out, "score", v, 2);
  if (!s) s = token_logprobs(o.xent.per_example_xent, lv_batch_get(b, "weights"), out);
  lm_inputs_free(&in);
  lv_batch_free(&gb);
  return s;
}

static lv_status lm_decode_out_to_line(lv_task *t, const lv_decode_out *o, char **line) {
  lm_decode_state *d = t->decode_state;
  *line = NULL;
  const lv_tensor *smp = lv_decode_out_get(o, "sample"), *sc = lv_decode_out_get(o, "score");
  if (smp) {
    int32_t len = (int32_t)lv_tensor_numel(smp);
    char *text = NULL;
    LV_TRY(lv_tokenizer_ids_to_strings(d->tok, lv_i32(smp), 1, len, &len, &text));
    *line = text;
    return NULL;
  }
  if (!sc) return lv_status_make(LV_ERR_INTERNAL, "lm decoder: no score or sample in the decode output");
  double lp = lv_f32(sc)[0], n = lv_f32(sc)[1];
  return asprintf(line, "%.6f\t%.0f\t%.6g", lp, n, exp(-lp / fmax(n, 1.0))) < 0
             ? lv_status_make(LV_ERR_RESOURCE, "out of memory")
             : NULL;
}

lv_lm *lv_lm_task_lm(lv_task *t) { return t && t->cls == &lv_lm_language_model ? ((lm_task *)t)->lm : NULL; }

const lv_task_class lv_lm_language_model = {
    .cls = "lm.model.LanguageModel",
    .params = lm_task_params,
    .create = lm_create,
    .fprop = lm_fprop,
    .destroy = lm_destroy,
    .decoder_setup = lm_decoder_setup,
    .decode = lm_decode,
    .line_describe = lm_line_describe,
    .line_to_batch = lm_line_to_batch,
    .decode_out_to_line = lm_decode_out_to_line,
};

