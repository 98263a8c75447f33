/* lm.model.LanguageModel: see lm.h. Params follow Lingvo's LanguageModel.Params() with its
 * training defaults; Lingvo options lingvoc does not implement (packed_input,
 * train.max_lstm_gradient_norm) are errors when set, not ignored. */
#include "models/lm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
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
                         "Clip LSTM gradients by their own global norm (lingvoc: not supported, must be 0).");
  lv_params_define_bool(tp, "sum_loss_across_tokens_in_batch", false,
                        "Sum the logP across predicted tokens in batch when set to True; average otherwise.");
  /* LanguageModel.Params()'s training defaults. */
  LV_ASSERT(!lv_params_set_float(tp, "learning_rate", 0.001));
  LV_ASSERT(!lv_params_set_float(tp, "l2_regularizer_weight", 1e-6));
  LV_ASSERT(!lv_params_set_float(tp, "clip_gradient_norm_to_value", 1.0));
  LV_ASSERT(!lv_params_set_float(tp, "grad_norm_to_clip_to_zero", 100.0));
  return p;
}

static void lm_destroy(lv_task *t) {
  lm_task *m = (lm_task *)t;
  lv_layer_free(m->layer);
  lv_params_free(m->lm_p);
  lv_task_free_decode_state(t);
  free(m);
}

static lv_status lm_create(const lv_params *p, const lv_params *input_p, lv_varstore *vs, lv_task **out) {
  (void)input_p;
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
  if (!s && lv_params_float(p, "train.max_lstm_gradient_norm") != 0.0)
    s = lv_status_make(LV_ERR_INVALID, "task.train.max_lstm_gradient_norm: per-LSTM gradient clipping is not "
                       "supported by lingvoc yet; leave it 0");
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

const lv_task_class lv_lm_language_model = {
    .cls = "lm.model.LanguageModel",
    .params = lm_task_params,
    .create = lm_create,
    .fprop = lm_fprop,
    .destroy = lm_destroy,
};
