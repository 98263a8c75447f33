#include "layers/full_softmax.h"

#include <stdlib.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

lv_params *lv_softmax_layer_params(void) {
  lv_params *p = lv_layer_base_params("SimpleFullSoftmax");
  lv_params_define_int(p, "input_dim", 0, "Dimension of the input.");
  lv_params_define_int(p, "num_classes", 0, "Total number of target classes.");
  lv_params_define_int(p, "chunk_size", 0,
                       "If non-zero, computes the per example xent by small chunks (lingvoc: of chunk_size "
                       "classes, without keeping the full logits; logits and log_probs are then not output). "
                       "lingvoc: 0 chunks by " STR(LV_SOFTMAX_AUTO_CHUNK) " classes when num_classes >= "
                       STR(LV_SOFTMAX_AUTO_CHUNK_MIN_CLASSES) " (the dense [tokens, classes] logits, their "
                       "softmax and gradient would dominate a step's memory) and not below; -1 never chunks.");
  lv_params_define_int(p, "num_sampled", 0, "Number of samples to use for the sampled soft-max (lingvoc supports 0).");
  lv_params_define_int(p, "num_shards", 1, "Number of shards to split params into. num_shards should divide "
                       "num_classes.");
  lv_params_define_bool(p, "use_bias", true, "Whether or not to use a bias variable.");
  lv_params_define_float(p, "bias_init", 0, "Weight initialization constant for bias.");
  const lv_qdomain_name qd[] = {
      {"logits", "Quantization domain for logits."},
      {"weight", "Quantization domain for the weights."},
      {"b_compression", "Quantization domain for the b matrix of the compression (lingvoc: no compression)."},
      {"c_compression", "Quantization domain for the c matrix of the compression (lingvoc: no compression)."},
      {"d_compression", "Quantization domain for the d matrix of the compression (lingvoc: no compression)."},
  };
  lv_qdomain_define_params(p, qd, 5);
  return p;
}

lv_status lv_softmax_layer_create(lv_softmax_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  LV_TRY(lv_layer_setup(&l->base, p, parent_scope, vs));
  l->input_dim = lv_params_int(p, "input_dim");
  l->num_classes = lv_params_int(p, "num_classes");
  l->chunk_size = lv_params_int(p, "chunk_size");
  int64_t shards = lv_params_int(p, "num_shards");
  if (l->input_dim <= 0 || l->num_classes <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: input_dim and num_classes must be > 0, got %lld and %lld",
                          l->base.scope, (long long)l->input_dim, (long long)l->num_classes);
  if (shards <= 0 || shards > l->num_classes || l->num_classes % shards)
    return lv_status_make(LV_ERR_INVALID, "%s: num_shards must divide num_classes=%lld, got %lld", l->base.scope,
                          (long long)l->num_classes, (long long)shards);
  if (l->chunk_size < -1)
    return lv_status_make(LV_ERR_INVALID, "%s: chunk_size must be >= -1 (-1: never chunk, 0: chunk only "
                          "num_classes >= %d), got %lld", l->base.scope, LV_SOFTMAX_AUTO_CHUNK_MIN_CLASSES,
                          (long long)l->chunk_size);
  if (lv_params_int(p, "num_sampled") != 0)
    return lv_status_make(LV_ERR_INVALID, "%s: lingvoc's SimpleFullSoftmax supports num_sampled=0 only, got %lld",
                          l->base.scope, (long long)lv_params_int(p, "num_sampled"));
  l->num_shards = (int)shards;
  l->w = calloc((size_t)l->num_shards, sizeof *l->w);
  l->b = calloc((size_t)l->num_shards, sizeof *l->b);
  if (!l->w || !l->b) return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory", l->base.scope);
  const int64_t per = l->num_classes / l->num_shards;
  for (int i = 0; i < l->num_shards; i++) {
    char name[32];
    snprintf(name, sizeof name, "weight_%d", i);
    LV_TRY(lv_layer_add_var(&l->base, name, lv_shape2(l->input_dim, per), NULL, true, &l->w[i]));
    lv_layer_vn_target(&l->base, l->w[i], true); /* AddGlobalVN, and AddVN(per_step) in DenseWeights */
  }
  if (lv_params_bool(p, "use_bias")) {
    lv_var_init bi = {LV_INIT_CONSTANT, lv_params_float(p, "bias_init")};
    for (int i = 0; i < l->num_shards; i++) {
      char name[32];
      snprintf(name, sizeof name, "bias_%d", i);
      LV_TRY(lv_layer_add_var(&l->base, name, lv_shape1(per), &bi, true, &l->b[i]));
      lv_layer_vn_target(&l->base, l->b[i], true);
    }
  } else {
    free(l->b);
    l->b = NULL;
  }
  LV_TRY(lv_qlayer_setup(&l->q, &l->base));
  for (int i = 0; i < l->num_shards; i++) lv_qlayer_bind_weight(&l->q, "weight", l->w[i]);
  LV_TRY(lv_qlayer_track(&l->q, "default", "inputs"));
  LV_TRY(lv_qlayer_track(&l->q, "logits", "logits"));
  return NULL;
}

bool lv_softmax_layer_dense_weights(lv_softmax_layer *l, lv_graph *g, lv_tensor **w, lv_tensor **b) {
  *w = *b = NULL;
  /* _ConcatWeights: AddPerStepVN on the weights and biases at every call. */
  lv_qlayer *q = &l->q;
  if (l->num_shards == 1) {
    *w = lv_layer_step_weight(g, l->w[0]);
    *b = l->b ? lv_layer_step_weight(g, l->b[0]) : NULL;
    if (lv_qlayer_on(q)) {
      *w = lv_qlayer_weight(q, g, "weight", *w);
      if (*b) *b = lv_qlayer_weight(q, g, "weight", *b);
    }
    return *w && (!l->b || *b);
  }
  lv_tensor *parts[l->num_shards];
  for (int i = 0; i < l->num_shards; i++) parts[i] = lv_qlayer_weight(q, g, "weight", lv_layer_step_weight(g, l->w[i]));
  *w = lv_op_concat(g, parts, l->num_shards, 1);
  if (l->b) {
    for (int i = 0; i < l->num_shards; i++)
      parts[i] = lv_qlayer_weight(q, g, "weight", lv_layer_step_weight(g, l->b[i]));
    *b = lv_op_concat(g, parts, l->num_shards, 0);
  }
  return *w && (!l->b || *b);
}

/* A sharded softmax of a quantized model file (int8 shards, no float copies) at
 * inference: each shard's logits from its own int8 GEMM, then the columns concatenated,
 * rather than a concat of the shards' weights, which would need their floats. */
static lv_tensor *sharded_q_logits(lv_softmax_layer *l, lv_graph *g, lv_tensor *x) {
  lv_tensor *parts[l->num_shards];
  for (int i = 0; i < l->num_shards; i++) {
    lv_tensor *w = &l->w[i]->value;
    parts[i] = l->b ? lv_op_matmul_bias(g, x, w, &l->b[i]->value) : lv_op_matmul(g, x, w, false, false);
  }
  return lv_op_concat(g, parts, l->num_shards, x->shape.rank - 1);
}

lv_tensor *lv_softmax_layer_logits(lv_softmax_layer *l, lv_graph *g, lv_tensor *x) {
  if (!x) return NULL;
  char s[96];
  if (x->shape.rank < 1 || x->shape.d[x->shape.rank - 1] != l->input_dim) {
    lv_graph_fail(g, "%s: input_dim is %lld but the input has shape %s", l->base.scope, (long long)l->input_dim,
                  lv_shape_str(&x->shape, s, sizeof s));
    return NULL;
  }
  lv_qlayer *q = &l->q;
  if (l->num_shards > 1 && l->w[0]->value.qw && !lv_graph_is_training(g) && !lv_qlayer_on(q))
    return sharded_q_logits(l, g, x);
  lv_tensor *w, *b;
  if (!lv_softmax_layer_dense_weights(l, g, &w, &b)) return NULL;
  if (!lv_qlayer_on(q)) {
    /* The GEMM's output dies once the bias is added, before a loss allocates its softmax. */
    const lv_graph_scope scope = lv_graph_scope_begin(g);
    lv_tensor *y = b ? lv_op_matmul_bias(g, x, w, b) : lv_op_matmul(g, x, w, false, false);
    lv_graph_scope_end(g, &scope, &y, 1);
    return y;
  }
  lv_tensor *y = lv_op_matmul(g, lv_qlayer_act(q, g, "inputs", x), lv_qlayer_weight(q, g, "weight", w), false, false);
  if (b) y = lv_op_add(g, y, lv_qlayer_weight(q, g, "weight", b));
  return lv_qlayer_act(q, g, "logits", y);
}

int64_t lv_softmax_layer_chunk(const lv_softmax_layer *l) {
  if (l->chunk_size) return l->chunk_size > 0 ? l->chunk_size : 0;
  return l->num_classes >= LV_SOFTMAX_AUTO_CHUNK_MIN_CLASSES ? LV_SOFTMAX_AUTO_CHUNK : 0;
}

/* per_shape with one more dim of size c. */
static lv_shape with_last(lv_shape s, int64_t c) {
  s.d[s.rank++] = c;
  return s;
}

static bool xent_fprop(lv_softmax_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *class_weights,
                       lv_tensor *class_ids, lv_tensor *class_probs, float label_smoothing, bool loss_only,
                       lv_xent_output *out) {
  memset(out, 0, sizeof *out);
  if (!x || !class_weights || (!class_ids && !class_probs)) {
    lv_graph_fail(g, "%s: missing input (x, class_weights and one of class_ids / class_probabilities are needed)",
                  l->base.scope);
    return false;
  }
  if ((class_ids == NULL) == (class_probs == NULL)) {
    lv_graph_fail(g, "%s: exactly one of class_ids and class_probabilities is required", l->base.scope);
    return false;
  }
  char s1[96], s2[96];
  const lv_shape ps = class_weights->shape; /* the per-example shape */
  const int64_t n = lv_shape_numel(&ps);
  if (x->shape.rank < 1 || x->shape.d[x->shape.rank - 1] != l->input_dim ||
      lv_tensor_numel(x) != n * l->input_dim) {
    lv_graph_fail(g, "%s: inputs %s do not match class_weights %s and input_dim %lld", l->base.scope,
                  lv_shape_str(&x->shape, s1, sizeof s1), lv_shape_str(&ps, s2, sizeof s2), (long long)l->input_dim);
    return false;
  }
  if (class_ids && (class_ids->dtype != LV_I32 || lv_tensor_numel(class_ids) != n)) {
    lv_graph_fail(g, "%s: class_ids must be int32 with one id per example of class_weights %s, got %s %s",
                  l->base.scope, lv_shape_str(&ps, s2, sizeof s2), lv_dtype_names[class_ids->dtype],
                  lv_shape_str(&class_ids->shape, s1, sizeof s1));
    return false;
  }
  if (class_probs && lv_tensor_numel(class_probs) != n * l->num_classes) {
    lv_graph_fail(g, "%s: class_probabilities %s do not match class_weights %s and num_classes %lld", l->base.scope,
                  lv_shape_str(&class_probs->shape, s1, sizeof s1), lv_shape_str(&ps, s2, sizeof s2),
                  (long long)l->num_classes);
    return false;
  }
  if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f) || (class_probs && label_smoothing != 0.0f)) {
    lv_graph_fail(g, "%s: label smoothing must be in [0, 1) and goes with class_ids only, got %g%s", l->base.scope,
                  (double)label_smoothing, class_probs ? " with class_probabilities" : "");
    return false;
  }
  lv_tensor *x2 = lv_op_reshape(g, x, lv_shape2(n, l->input_dim));
  lv_tensor *ids = class_ids ? lv_op_reshape(g, class_ids, lv_shape1(n)) : NULL;
  lv_tensor *xent, *argmax = NULL;
  const int64_t chunk = lv_softmax_layer_chunk(l);
  if (ids && chunk > 0 && !lv_qlayer_on(&l->q)) {
    lv_tensor *w, *b;
    if (!lv_softmax_layer_dense_weights(l, g, &w, &b)) return false;
    xent = lv_op_projected_smoothed_xent(g, x2, w, b, ids, NULL, label_smoothing, chunk, &argmax);
  } else {
    /* Without logits among the outputs the logits are read by no backward
     * (smoothed_xent's reads its softmax): they die here. */
    const lv_graph_scope scope = lv_graph_scope_begin(g);
    lv_tensor *logits = lv_softmax_layer_logits(l, g, x2);
    lv_tensor *log_probs = loss_only ? NULL : lv_op_log_softmax(g, logits);
    argmax = lv_op_argmax(g, logits);
    if (ids)
      xent = lv_op_smoothed_xent(g, logits, ids, NULL, label_smoothing);
    else
      xent = lv_op_softmax_xent(g, logits, lv_op_reshape(g, class_probs, lv_shape2(n, l->num_classes)));
    if (!loss_only) {
      if (!log_probs) return false;
      out->logits = lv_op_reshape(g, logits, with_last(ps, l->num_classes));
      out->log_probs = lv_op_reshape(g, log_probs, with_last(ps, l->num_classes));
    }
    lv_tensor *keep[4] = {xent, argmax, out->logits, out->log_probs};
    lv_graph_scope_end(g, &scope, keep, 4);
  }
  if (!xent || !argmax) return false;
  out->per_example_xent = lv_op_reshape(g, xent, ps);
  out->per_example_argmax = lv_op_reshape(g, argmax, ps);
  out->per_example_weight = class_weights;
  out->total_xent = lv_op_reduce_sum(g, lv_op_mul(g, out->per_example_xent, class_weights), LV_ALL_AXES, false);
  out->total_weight = lv_op_reduce_sum(g, class_weights, LV_ALL_AXES, false);
  if (!out->total_weight) return false;
  /* total_xent * (1 / max(total_weight, 1e-6)). */
  lv_tensor *inv = lv_op_div(g, lv_graph_fill(g, lv_shape0(), 1.0f), lv_op_maximum_scalar(g, out->total_weight, 1e-6f));
  out->avg_xent = lv_op_mul(g, out->total_xent, inv);
  return out->avg_xent != NULL;
}

bool lv_softmax_layer_fprop(lv_softmax_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *class_weights,
                            lv_tensor *class_ids, lv_tensor *class_probs, float label_smoothing,
                            lv_xent_output *out) {
  return xent_fprop(l, g, x, class_weights, class_ids, class_probs, label_smoothing, false, out);
}

bool lv_softmax_layer_fprop_loss(lv_softmax_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *class_weights,
                                 lv_tensor *class_ids, lv_tensor *class_probs, float label_smoothing,
                                 lv_xent_output *out) {
  return xent_fprop(l, g, x, class_weights, class_ids, class_probs, label_smoothing, true, out);
}

static lv_status softmax_create(lv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  return lv_softmax_layer_create((lv_softmax_layer *)l, p, parent_scope, vs);
}

static void softmax_destroy(lv_layer *base) {
  lv_softmax_layer *l = (lv_softmax_layer *)base;
  free(l->w);
  free(l->b);
  l->w = l->b = NULL;
}

/* Lingvo's SimpleFullSoftmax.FProp(theta, inputs, class_weights, class_ids=None,
 * class_probabilities=None): inputs "act", "class_weights" and exactly one of
 * "class_ids" / "class_probabilities"; outputs as lv_xent_output (logits and log_probs
 * only when not chunked). Label smoothing goes through lv_softmax_layer_fprop. */
static bool softmax_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_tensor *x = lv_layer_in(l, g, in, "act"), *w = lv_layer_in(l, g, in, "class_weights");
  lv_tensor *ids = lv_nmap_get(in, "class_ids"), *probs = lv_nmap_get(in, "class_probabilities");
  if (!x || !w) return false;
  lv_xent_output xo;
  if (!lv_softmax_layer_fprop((lv_softmax_layer *)l, g, x, w, ids, probs, 0.0f, &xo)) return false;
  if (xo.logits && !(lv_layer_set_out(l, g, out, "logits", xo.logits) &&
                     lv_layer_set_out(l, g, out, "log_probs", xo.log_probs)))
    return false;
  return lv_layer_set_out(l, g, out, "per_example_argmax", xo.per_example_argmax) &&
         lv_layer_set_out(l, g, out, "per_example_xent", xo.per_example_xent) &&
         lv_layer_set_out(l, g, out, "per_example_weight", xo.per_example_weight) &&
         lv_layer_set_out(l, g, out, "total_xent", xo.total_xent) &&
         lv_layer_set_out(l, g, out, "total_weight", xo.total_weight) &&
         lv_layer_set_out(l, g, out, "avg_xent", xo.avg_xent);
}

const lv_layer_class lv_softmax_layer_class = {
    .cls = "SimpleFullSoftmax",
    .params = lv_softmax_layer_params,
    .size = sizeof(lv_softmax_layer),
    .create = softmax_create,
    .fprop = softmax_fprop,
    .destroy = softmax_destroy,
};

/* ---- UniformLabelSmoother ---- */

lv_params *lv_label_smoother_params(void) {
  lv_params *p = lv_layer_base_params("UniformLabelSmoother");
  lv_params_define_int(p, "num_classes", 0, "Number of classes");
  lv_params_define_float(p, "uncertainty", 0.1, "Uncertainty of correct label, eps.");
  lv_params_define_float(p, "uncertainty_larger", 0.1, "Apply a larger uncertainty to specific tokens, as specified "
                         "by token_from_target_ids.");
  lv_params_define_none(p, "token_id_uncertainty_larger", LV_PV_INT,
                        "Id of token from target_ids to apply uncertainty_larger to.");
  return p;
}

static lv_status label_smoother_create(lv_layer *base, const lv_params *p, const char *parent_scope,
                                       lv_varstore *vs) {
  lv_label_smoother *l = (lv_label_smoother *)base;
  LV_TRY(lv_layer_setup(&l->base, p, parent_scope, vs));
  l->num_classes = lv_params_int(p, "num_classes");
  l->uncertainty = lv_params_float(p, "uncertainty");
  l->uncertainty_larger = lv_params_float(p, "uncertainty_larger");
  l->token_id_uncertainty_larger =
      lv_params_is_set(p, "token_id_uncertainty_larger") ? lv_params_int(p, "token_id_uncertainty_larger") : -1;
  if (l->num_classes <= 1)
    return lv_status_make(LV_ERR_INVALID, "%s: num_classes must be > 1, got %lld", l->base.scope,
                          (long long)l->num_classes);
  if (!(l->uncertainty >= 0 && l->uncertainty < 1) || !(l->uncertainty_larger >= 0 && l->uncertainty_larger < 1))
    return lv_status_make(LV_ERR_INVALID, "%s: uncertainty and uncertainty_larger must be in [0, 1), got %g and %g",
                          l->base.scope, l->uncertainty, l->uncertainty_larger);
  if (lv_params_is_set(p, "token_id_uncertainty_larger") && l->token_id_uncertainty_larger < 0)
    return lv_status_make(LV_ERR_INVALID, "%s: token_id_uncertainty_larger must be >= 0, got %lld", l->base.scope,
                          (long long)l->token_id_uncertainty_larger);
  return NULL;
}

bool lv_label_smoother_uniform(const lv_label_smoother *l, float *uncertainty) {
  if (l->token_id_uncertainty_larger >= 0) return false;
  *uncertainty = (float)l->uncertainty;
  return true;
}

static bool read_ids(const lv_label_smoother *l, lv_graph *g, lv_tensor *t, const char *what, int32_t *out) {
  lv_status st = lv_tensor_to_host(t, out);
  if (!st) return true;
  lv_graph_fail(g, "%s: reading %s: %s", l->base.scope, what, lv_status_msg(st));
  lv_status_free(st);
  return false;
}

lv_tensor *lv_label_smoother_fprop(lv_label_smoother *l, lv_graph *g, lv_tensor *labels, lv_tensor *ids) {
  if (!labels) return NULL;
  char s1[96], s2[96];
  const int64_t n = lv_tensor_numel(labels), c = l->num_classes;
  const bool larger = l->token_id_uncertainty_larger >= 0;
  if (labels->dtype != LV_I32 || labels->shape.rank >= LV_MAX_RANK ||
      (larger && (!ids || ids->dtype != LV_I32 || lv_tensor_numel(ids) != n))) {
    lv_graph_fail(g, "%s: int32 target_labels%s required, got %s %s and %s", l->base.scope,
                  larger ? " and target_ids of the same size" : "", lv_dtype_names[labels->dtype],
                  lv_shape_str(&labels->shape, s1, sizeof s1),
                  ids ? lv_shape_str(&ids->shape, s2, sizeof s2) : "no target_ids");
    return NULL;
  }
  int32_t *lab = malloc(sizeof *lab * (size_t)(n ? n : 1)), *tid = larger ? malloc(sizeof *tid * (size_t)(n ? n : 1)) : NULL;
  float *probs = malloc(sizeof *probs * (size_t)(n > 0 ? n * c : 1));
  lv_tensor *out = NULL;
  if (!lab || !probs || (larger && !tid)) {
    lv_graph_fail(g, "%s: out of memory for [%lld, %lld] targets", l->base.scope, (long long)n, (long long)c);
    goto done;
  }
  if (!read_ids(l, g, labels, "target_labels", lab) || (larger && !read_ids(l, g, ids, "target_ids", tid))) goto done;
  for (int64_t i = 0; i < n; i++) {
    double u = larger && tid[i] == l->token_id_uncertainty_larger ? l->uncertainty_larger : l->uncertainty;
    float off = (float)u / (float)(c - 1), on = (float)(1.0 - u);
    for (int64_t j = 0; j < c; j++) probs[i * c + j] = off;
    if (lab[i] >= 0 && lab[i] < c) probs[i * c + lab[i]] = on;
  }
  lv_shape os = labels->shape;
  os.d[os.rank++] = c;
  out = lv_graph_tensor(g, LV_F32, os);
  if (out) {
    lv_status st = lv_tensor_from_host(out, probs);
    if (st) {
      lv_graph_fail(g, "%s: %s", l->base.scope, lv_status_msg(st));
      lv_status_free(st);
      out = NULL;
    }
  }
done:
  free(lab);
  free(tid);
  free(probs);
  return out;
}

static bool label_smoother_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  return lv_layer_set_out(l, g, out, "act",
                          lv_label_smoother_fprop((lv_label_smoother *)l, g, lv_layer_in(l, g, in, "target_labels"),
                                                  lv_nmap_get(in, "target_ids")));
}

const lv_layer_class lv_label_smoother_class = {
    .cls = "UniformLabelSmoother",
    .params = lv_label_smoother_params,
    .size = sizeof(lv_label_smoother),
    .create = label_smoother_create,
    .fprop = label_smoother_fprop,
};

lv_status lv_softmax_next_step_accuracy(const lv_xent_output *xo, lv_tensor *labels, lv_tensor *weights, double *acc,
                                    double *num) {
  int64_t n = lv_tensor_numel(weights);
  int32_t *am = malloc(sizeof(int32_t) * (size_t)(n + 1)), *lb = malloc(sizeof(int32_t) * (size_t)(n + 1));
  float *w = malloc(sizeof(float) * (size_t)(n + 1));
  LV_ASSERT(am && lb && w);
  lv_status s = lv_tensor_to_host(xo->per_example_argmax, am);
  if (!s) s = lv_tensor_to_host(labels, lb);
  if (!s) s = lv_tensor_to_host(weights, w);
  double c = 0, tot = 0;
  for (int64_t i = 0; !s && i < n; i++) {
    tot += w[i];
    if (am[i] == lb[i]) c += w[i];
  }
  free(am);
  free(lb);
  free(w);
  *acc = c / (tot > 0 ? tot : 1.0);
  *num = tot;
  return s;
}
