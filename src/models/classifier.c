/* classifier.ModelV1 (lingvo/tasks/image/classifier.py): conv + max-pool blocks, dropout
 * after each pool (training only), an FC layer down to softmax.input_dim, softmax. */
#include <stdlib.h>
#include <string.h>

#include "io/caption.h"
#include "layers/conv.h"
#include "layers/layer.h"
#include "layers/pooling.h"
#include "models/task.h"

#define MAX_BLOCKS 8

/* Children are built from params templates by their `cls` (lv_layer_create): the conv
 * and pooling blocks from filter_shapes / window_shapes as Lingvo's ModelV1 does, the FC
 * layer, and the softmax from the `softmax` template (any softmax class). */
typedef struct classifier {
  lv_task base;
  int nblocks;
  lv_layer *conv[MAX_BLOCKS], *pool[MAX_BLOCKS], *fc, *softmax;
  lv_params *child_params[2 * MAX_BLOCKS + 2];
  int nchild_params;
  int64_t data_shape[3];
  double dropout_prob;
  uint64_t seed;
} classifier;

static lv_params *model_v1_params(void) {
  lv_params *p = lv_task_base_params("classifier.ModelV1");
  lv_params *sm = NULL;
  LV_ASSERT(!lv_registry_instantiate("SimpleFullSoftmax", &sm));
  lv_params_define_params(p, "softmax", sm, "Softmax layer.");
  int64_t z4[4] = {0, 0, 0, 0}, z2[2] = {0, 0};
  lv_params_define_list(p, "filter_shapes", lv_pvalue_append(lv_pvalue_list(), lv_pvalue_ints(4, z4)),
                        "Conv filter shapes. Must be a list of sequences of 4. Elements are in order of "
                        "height, width, in_channel, out_channel");
  lv_params_define_list(p, "window_shapes", lv_pvalue_append(lv_pvalue_list(), lv_pvalue_ints(2, z2)),
                        "Max pooling window shapes. Must be a list of sequences of 2. Elements are in order "
                        "of height, width.");
  lv_params_define_bool(p, "batch_norm", false, "Apply BN or not after the conv.");
  lv_params_define_list(p, "class_names", lv_pvalue_list(),
                        "Names of the classes, by id, for the captions of the evaler's image summaries "
                        "(lingvoc addition; empty: class ids).");
  lv_params_define_float(p, "dropout_prob", 0.0, "Probability of the dropout applied after pooling.");
  LV_ASSERT(!lv_params_set_float(p, "train.learning_rate", 1e-4));
  lv_params *sched = NULL;
  LV_ASSERT(!lv_registry_instantiate("LinearRampupExponentialDecayScaledByNumSplitSchedule", &sched));
  LV_ASSERT(!lv_params_set_int(sched, "warmup", 100));
  LV_ASSERT(!lv_params_set_int(sched, "decay_start", 100000));
  LV_ASSERT(!lv_params_set_int(sched, "decay_end", 1000000));
  LV_ASSERT(!lv_params_set_float(sched, "min", 0.1));
  LV_ASSERT(!lv_params_set_params(p, "train.lr_schedule", sched));
  return p;
}

static void classifier_destroy(lv_task *t) {
  classifier *c = (classifier *)t;
  for (int i = 0; i < c->nblocks; i++) {
    lv_layer_free(c->conv[i]);
    lv_layer_free(c->pool[i]);
  }
  lv_layer_free(c->fc);
  lv_layer_free(c->softmax);
  for (int i = 0; i < c->nchild_params; i++) lv_params_free(c->child_params[i]);
  free(c);
}

static lv_params *child(classifier *c, lv_params *p) {
  LV_ASSERT(c->nchild_params < (int)LV_ARRAY_LEN(c->child_params));
  c->child_params[c->nchild_params++] = p;
  return p;
}

static lv_status build(classifier *c, const lv_params *p, const lv_params *input_p, lv_varstore *vs) {
  const char *name = lv_params_str(p, "name");
  if (!*name) return lv_status_make(LV_ERR_INVALID, "task.name must be set (e.g. \"lenet5\")");
  const lv_pvalue *fs = lv_params_list(p, "filter_shapes"), *ws = lv_params_list(p, "window_shapes");
  int nf = lv_pvalue_len(fs), nw = lv_pvalue_len(ws);
  if (nf != nw)
    return lv_status_make(LV_ERR_INVALID, "task.filter_shapes has %d entries but task.window_shapes has %d; "
                          "they must match", nf, nw);
  if (nf < 1 || nf > MAX_BLOCKS)
    return lv_status_make(LV_ERR_INVALID, "task.filter_shapes must have 1 to %d entries, got %d", MAX_BLOCKS, nf);
  if (lv_pvalue_to_ints(lv_params_list(input_p, "data_shape"), c->data_shape, 3) != 3)
    return lv_status_make(LV_ERR_INVALID, "input.data_shape must be [height, width, depth]");
  c->dropout_prob = lv_params_float(p, "dropout_prob");
  if (!(c->dropout_prob >= 0 && c->dropout_prob < 1)) /* NaN too */
    return lv_status_make(LV_ERR_INVALID, "task.dropout_prob must be in [0, 1), got %g", c->dropout_prob);
  c->seed = lv_params_is_set(p, "random_seed") ? (uint64_t)lv_params_int(p, "random_seed") : 0x1e4e75ull;
  lv_shape shape = lv_shape4(1, c->data_shape[0], c->data_shape[1], c->data_shape[2]);
  bool bn = lv_params_bool(p, "batch_norm");
  c->nblocks = nf;
  for (int i = 0; i < nf; i++) {
    int64_t k[4], w[2];
    if (lv_pvalue_to_ints(lv_pvalue_at(fs, i), k, 4) != 4)
      return lv_status_make(LV_ERR_INVALID, "task.filter_shapes[%d] must be 4 ints (height, width, in, out)", i);
    if (lv_pvalue_to_ints(lv_pvalue_at(ws, i), w, 2) != 2)
      return lv_status_make(LV_ERR_INVALID, "task.window_shapes[%d] must be 2 ints (height, width)", i);
    if (k[2] != shape.d[3])
      return lv_status_make(LV_ERR_INVALID, "task.filter_shapes[%d] expects %lld input channels but the layer "
                            "below gives %lld", i, (long long)k[2], (long long)shape.d[3]);
    char nm[32];
    lv_params *cp = NULL;
    LV_TRY(lv_registry_instantiate("ConvLayer", &cp));
    child(c, cp);
    snprintf(nm, sizeof nm, "conv%d", i);
    int64_t one2[2] = {1, 1};
    LV_TRY(lv_params_set_string(cp, "name", nm));
    LV_TRY(lv_params_set_list(cp, "filter_shape", lv_pvalue_ints(4, k)));
    LV_TRY(lv_params_set_list(cp, "filter_stride", lv_pvalue_ints(2, one2)));
    LV_TRY(lv_params_set_bool(cp, "batch_norm", bn));
    LV_TRY(lv_params_set_string(cp, "params_init.method", lv_params_str(p, "params_init.method")));
    LV_TRY(lv_params_set_float(cp, "params_init.scale", lv_params_float(p, "params_init.scale")));
    lv_params_freeze(cp);
    LV_TRY(lv_layer_create(cp, name, vs, &c->conv[i]));
    lv_params *pp = NULL;
    LV_TRY(lv_registry_instantiate("PoolingLayer", &pp));
    child(c, pp);
    snprintf(nm, sizeof nm, "pool%d", i);
    LV_TRY(lv_params_set_string(pp, "name", nm));
    LV_TRY(lv_params_set_list(pp, "window_shape", lv_pvalue_ints(2, w)));
    LV_TRY(lv_params_set_list(pp, "window_stride", lv_pvalue_ints(2, w)));
    lv_params_freeze(pp);
    LV_TRY(lv_layer_create(pp, name, vs, &c->pool[i]));
    lv_shape mid;
    if (!c->conv[i]->cls->out_shape(c->conv[i], shape, &mid) || !c->pool[i]->cls->out_shape(c->pool[i], mid, &shape))
      return lv_status_make(LV_ERR_INVALID, "task.window_shapes[%d]: the image is too small for %d conv/pool blocks",
                            i, nf);
  }
  lv_params *fp = NULL;
  LV_TRY(lv_registry_instantiate("FCLayer", &fp));
  child(c, fp);
  LV_TRY(lv_params_set_string(fp, "name", "fc"));
  LV_TRY(lv_params_set_int(fp, "input_dim", shape.d[1] * shape.d[2] * shape.d[3]));
  LV_TRY(lv_params_set_int(fp, "output_dim", lv_params_int(p, "softmax.input_dim")));
  LV_TRY(lv_params_set_string(fp, "params_init.method", lv_params_str(p, "params_init.method")));
  LV_TRY(lv_params_set_float(fp, "params_init.scale", lv_params_float(p, "params_init.scale")));
  lv_params_freeze(fp);
  LV_TRY(lv_layer_create(fp, name, vs, &c->fc));
  lv_params *sp = child(c, lv_params_copy(lv_params_sub(p, "softmax")));
  if (!*lv_params_str(sp, "name")) LV_TRY(lv_params_set_string(sp, "name", "softmax"));
  lv_params_freeze(sp);
  LV_TRY(lv_layer_create(sp, name, vs, &c->softmax));
  return NULL;
}

static lv_status classifier_create(const lv_params *p, const lv_params *input_p, lv_varstore *vs, lv_task **out) {
  classifier *c = calloc(1, sizeof *c);
  LV_ASSERT(c);
  extern const lv_task_class lv_classifier_model_v1;
  c->base.cls = &lv_classifier_model_v1;
  c->base.p = p;
  lv_status s = build(c, p, input_p, vs);
  if (s) {
    classifier_destroy(&c->base);
    return s;
  }
  *out = &c->base;
  return NULL;
}

/* sum(correct * weight) / max(1e-8, sum(weight)) as a new scalar. */
static lv_tensor *weighted_accuracy(lv_graph *g, lv_tensor *logits, lv_tensor *labels, lv_tensor *w, int k) {
  lv_tensor *correct = lv_op_in_top_k(g, logits, labels, k);
  lv_tensor *num = lv_op_reduce_sum(g, lv_op_mul(g, correct, w), LV_ALL_AXES, false);
  lv_tensor *den = lv_op_reduce_sum(g, w, LV_ALL_AXES, false);
  /* num * (1 / max(den, 1e-8)), bit for bit what scaling by the host-computed factor gave. */
  lv_tensor *inv = lv_op_div(g, lv_graph_fill(g, lv_shape0(), 1.0f), lv_op_maximum_scalar(g, den, 1e-8f));
  return lv_op_mul(g, num, inv);
}

/* A conv + max-pool block. A ReLU commutes with a max (both are monotone, and a window
 * whose values are all <= 0 gives 0 with a zero gradient either way), so the block runs
 * conv, pool, ReLU: the same values and gradients, bit for bit, with the ReLU passes over
 * a quarter of the data. */
static lv_tensor *conv_pool_block(classifier *c, int i, lv_graph *g, lv_tensor *x) {
  extern const lv_layer_class lv_conv_layer_class, lv_pooling_layer_class;
  lv_conv_layer *cv = (lv_conv_layer *)c->conv[i];
  lv_pooling_layer *pl = (lv_pooling_layer *)c->pool[i];
  if (c->conv[i]->cls != &lv_conv_layer_class || c->pool[i]->cls != &lv_pooling_layer_class ||
      cv->act != LV_ACT_RELU || !pl->is_max || lv_qlayer_on(&cv->q))
    return lv_layer_fprop_act(c->pool[i], g, lv_layer_fprop_act(c->conv[i], g, x));
  lv_tensor *y = lv_pooling_layer_fprop(pl, g, lv_conv_layer_fprop_preact(cv, g, x));
  return y ? lv_op_activation(g, y, LV_ACT_RELU) : NULL;
}

static bool classifier_fprop(lv_task *t, lv_graph *g, lv_batch *b, bool is_eval, int64_t step, lv_metrics *m) {
  (void)step; /* the graph's step picks the dropout masks */
  classifier *c = (classifier *)t;
  lv_tensor *raw = lv_batch_get(b, "raw"), *label = lv_batch_get(b, "label"), *weight = lv_batch_get(b, "weight");
  LV_ASSERT(raw && label && weight);
  int64_t n = raw->shape.d[0];
  lv_tensor *act = lv_op_per_image_standardization(
      g, lv_op_reshape(g, lv_op_cast(g, raw, LV_F32), lv_shape4(n, c->data_shape[0], c->data_shape[1], c->data_shape[2])));
  for (int i = 0; i < c->nblocks; i++) {
    act = conv_pool_block(c, i, g, act);
    if (c->dropout_prob > 0.0 && !is_eval)
      act = lv_op_dropout(g, act, (float)(1.0 - c->dropout_prob), c->seed, lv_graph_stream(g, MAX_BLOCKS, (uint64_t)i));
  }
  act = lv_op_reshape(g, act, lv_shape2(n, -1));
  act = lv_layer_fprop_act(c->fc, g, act);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  bool ok = lv_layer_set_out(c->softmax, g, &in, "act", act) &&
            lv_layer_set_out(c->softmax, g, &in, "class_weights", weight) &&
            lv_layer_set_out(c->softmax, g, &in, "class_ids", label) && lv_layer_fprop(c->softmax, g, &in, &out);
  lv_tensor *logits = lv_nmap_get(&out, "logits"), *avg_xent = lv_nmap_get(&out, "avg_xent");
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  if (!ok) return false;
  lv_metrics_add(m, "loss", avg_xent, (double)n);
  lv_metrics_add(m, "log_pplx", avg_xent, (double)n);
  lv_metrics_add_const(m, "num_preds", (double)n, 1.0);
  /* Lingvo's ModelV1 reports accuracy in eval only; lingvoc also logs it in training
   * (in_top_k on the logits, no gradient: negligible cost). */
  lv_tensor *acc1 = weighted_accuracy(g, logits, label, weight, 1);
  lv_metrics_add(m, "accuracy", acc1, (double)n);
  if (is_eval) {
    lv_tensor *acc5 = weighted_accuracy(g, logits, label, weight, 5);
    lv_metrics_add(m, "acc5", acc5, (double)n);
    lv_metrics_add(m, "error", lv_op_add_scalar(g, lv_op_scale(g, acc1, -1.0f), 1.0f), (double)n);
    lv_metrics_add(m, "error5", lv_op_add_scalar(g, lv_op_scale(g, acc5, -1.0f), 1.0f), (double)n);
    lv_tensor *pred = lv_op_argmax(g, logits), *probs = lv_op_softmax(g, logits);
    if (pred && probs) {
      lv_status ps = lv_nmap_set(&m->per_example, "predictions", pred);
      if (!ps) ps = lv_nmap_set(&m->per_example, "probs", probs); /* [N, classes]: the library's classify */
      if (ps) {
        lv_graph_fail(g, "%s", lv_status_msg(ps));
        lv_status_free(ps);
      }
    }
  }
  lv_status s = lv_graph_status(g);
  ok = s == NULL;
  lv_status_free(s);
  return ok;
}

/* lv_classify: the eval forward pass over raw images with zero labels and unit weights,
 * reading the softmax of the logits (per_example "probs"). */
static lv_status classifier_classify(lv_task *t, lv_graph *g, const lv_batch *b, lv_tensor **probs) {
  classifier *c = (classifier *)t;
  *probs = NULL;
  const lv_tensor *raw = lv_batch_get(b, "raw");
  if (!raw || raw->dtype != LV_U8 || raw->shape.rank != 4 || raw->shape.d[1] != c->data_shape[0] ||
      raw->shape.d[2] != c->data_shape[1] || raw->shape.d[3] != c->data_shape[2])
    return lv_status_make(LV_ERR_INVALID, "images: expected uint8 [N, %lld, %lld, %lld] (input.data_shape)",
                          (long long)c->data_shape[0], (long long)c->data_shape[1], (long long)c->data_shape[2]);
  const int64_t n = raw->shape.d[0];
  lv_tensor *label = lv_tensor_new(LV_I32, lv_shape1(n)), *weight = lv_tensor_new(LV_F32, lv_shape1(n));
  lv_batch hb, gb;
  lv_batch_init(&hb);
  lv_batch_init(&gb);
  lv_status s = label && weight ? NULL : lv_status_make(LV_ERR_RESOURCE, "images: out of memory");
  if (!s) {
    memset(label->data, 0, lv_tensor_nbytes(label));
    for (int64_t i = 0; i < n; i++) lv_f32(weight)[i] = 1.0f;
    hb.size = n;
    s = lv_nmap_set(&hb.map, "raw", (lv_tensor *)raw);
  }
  if (!s) s = lv_nmap_set(&hb.map, "label", label);
  if (!s) s = lv_nmap_set(&hb.map, "weight", weight);
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  if (!s) s = lv_batch_to_graph(g, &hb, &gb);
  lv_metrics m;
  lv_metrics_init(&m);
  if (!s && !classifier_fprop(t, g, &gb, true, 0, &m) && !(s = lv_graph_status(g)))
    s = lv_status_make(LV_ERR_INTERNAL, "classify: the forward pass failed");
  const lv_tensor *p = s ? NULL : lv_nmap_get(&m.per_example, "probs");
  if (!s && !p) s = lv_status_make(LV_ERR_INTERNAL, "classify: the forward pass gave no probabilities");
  if (!s) {
    *probs = lv_tensor_new(LV_F32, p->shape);
    s = *probs ? lv_tensor_to_host(p, (*probs)->data) : lv_status_make(LV_ERR_RESOURCE, "images: out of memory");
    if (s) {
      lv_tensor_free(*probs);
      *probs = NULL;
    }
  }
  lv_metrics_free(&m);
  lv_batch_free(&gb);
  lv_batch_free(&hb);
  lv_tensor_free(label);
  lv_tensor_free(weight);
  return s;
}

/* The caption name of class id k: class_names[k] if given, else the id. */
static void class_name(const lv_params *p, int32_t k, char *out, size_t n) {
  const lv_pvalue *names = lv_params_list(p, "class_names");
  const lv_pvalue *v = names && k >= 0 && k < lv_pvalue_len(names) ? lv_pvalue_at(names, k) : NULL;
  /* class_names is an untyped list: a number there is shown as the id. */
  const char *str = v && lv_pvalue_kind(v) == LV_PV_STRING ? lv_pvalue_as_string(v) : NULL;
  if (str) snprintf(out, n, "%s", str);
  else snprintf(out, n, "%d", k);
}

/* Lingvo's ModelV1._AddSummary: 10 test images with their label and prediction; the
 * misclassified ones of the batch come first (they are the ones worth looking at), then
 * correct ones fill up to 10. Captions "label: Coat" / "pred: Pullover (wrong)", with
 * class names from the task's class_names. */
static lv_status classifier_eval_summaries(lv_task *t, const lv_batch *b, const lv_metrics *m, int64_t step,
                                           lv_events_writer *ev) {
  lv_tensor *raw = lv_batch_get(b, "raw"), *label = lv_batch_get(b, "label");
  lv_tensor *pred = lv_nmap_get(&m->per_example, "predictions");
  if (!raw || !label || !pred || raw->shape.rank != 4) return NULL;
  int h = (int)raw->shape.d[1], w = (int)raw->shape.d[2], c = (int)raw->shape.d[3];
  int64_t total = raw->shape.d[0], n = total < 10 ? total : 10;
  /* Predictions live on the step's device; the batch is host memory. */
  int32_t *host_pred = malloc(lv_tensor_nbytes(pred) + 1);
  int64_t *order = malloc(sizeof(int64_t) * (size_t)(total + 1));
  if (!host_pred || !order) {
    free(host_pred);
    free(order);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory reading predictions");
  }
  lv_status s = lv_tensor_to_host(pred, host_pred);
  int64_t k = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int64_t i = 0; i < total && k < n; i++)
      if ((lv_i32(label)[i] != host_pred[i]) == (pass == 0)) order[k++] = i;
  for (int64_t j = 0; !s && j < n; j++) {
    int64_t i = order[j];
    char tag[64], caption[160], ln[64], pn[64];
    snprintf(tag, sizeof tag, "examples/image/%lld", (long long)j);
    class_name(t->p, lv_i32(label)[i], ln, sizeof ln);
    class_name(t->p, host_pred[i], pn, sizeof pn);
    snprintf(caption, sizeof caption, "label: %s\npred: %s%s", ln, pn,
             lv_i32(label)[i] == host_pred[i] ? "" : " (wrong)");
    int oh, ow, oc;
    uint8_t *img = lv_caption_render(lv_u8(raw) + i * h * w * c, h, w, c, caption, &oh, &ow, &oc);
    if (!img) s = lv_status_make(LV_ERR_RESOURCE, "out of memory rendering image summary %s", tag);
    else lv_events_image(ev, tag, step, oh, ow, oc, img);
    free(img);
  }
  free(order);
  free(host_pred);
  return s;
}

const lv_task_class lv_classifier_model_v1 = {
    .cls = "classifier.ModelV1",
    .params = model_v1_params,
    .create = classifier_create,
    .fprop = classifier_fprop,
    .destroy = classifier_destroy,
    .eval_summaries = classifier_eval_summaries,
    .classify = classifier_classify,
};
