#include "layers/embedding.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- SimpleEmbeddingLayer / EmbeddingLayer ---- */

lv_params *lv_simple_embedding_layer_params(void) {
  lv_params *p = lv_layer_base_params("SimpleEmbeddingLayer");
  lv_params_define_int(p, "vocab_size", 0, "Depth of the input. I.e., the number of classes.");
  lv_params_define_int(p, "embedding_dim", 0, "Depth of the output.");
  lv_params_define_bool(p, "use_matmul", false,
                        "If True, use a matmul to implement the embedding lookup. (lingvoc always gathers: "
                        "the result and the gradient are the same, the gather is cheaper on every device.)");
  lv_params_define_bool(p, "scale_sqrt_depth", false,
                        "If set True, activations are scaled with sqrt(embedding_dim) in EmbLookup.");
  return p;
}

lv_params *lv_embedding_layer_params(void) {
  lv_params *p = lv_layer_base_params("EmbeddingLayer");
  lv_params_define_int(p, "vocab_size", 0, "Depth of the input.");
  lv_params_define_int(p, "embedding_dim", 0, "Depth of the output.");
  lv_params_define_int(p, "max_num_shards", 0, "Num param shards.");
  lv_params_define_bool(p, "on_ps", true, "True if to perform the embedding lookup on ps. (No effect in lingvoc.)");
  lv_params_define_bool(p, "scale_sqrt_depth", false,
                        "If set True, activations are scaled with sqrt(embedding_dim) in EmbLookup.");
  return p;
}

int lv_embedding_num_shards(int64_t vocab_size, int64_t embedding_dim, int64_t max_num_shards) {
  double total = (double)vocab_size * (double)embedding_dim;
  int64_t need = (int64_t)ceil(total / (double)LV_EMB_MIN_PARAMS_PER_SHARD);
  return (int)(max_num_shards < need ? max_num_shards : need);
}

static lv_status embedding_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_embedding_layer *l = (lv_embedding_layer *)base;
  LV_TRY(lv_layer_setup(&l->base, p, parent_scope, vs));
  bool sharded = !strcmp(lv_params_str(p, "cls"), "EmbeddingLayer");
  l->vocab_size = lv_params_int(p, "vocab_size");
  l->embedding_dim = lv_params_int(p, "embedding_dim");
  l->scale_sqrt_depth = lv_params_bool(p, "scale_sqrt_depth");
  if (l->vocab_size <= 0 || l->embedding_dim <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: vocab_size and embedding_dim must be > 0, got %lld and %lld",
                          l->base.scope, (long long)l->vocab_size, (long long)l->embedding_dim);
  l->num_shards = 1;
  if (sharded) {
    int64_t max_shards = lv_params_int(p, "max_num_shards");
    if (max_shards <= 0)
      return lv_status_make(LV_ERR_INVALID, "%s: max_num_shards must be > 0 for an EmbeddingLayer, got %lld",
                            l->base.scope, (long long)max_shards);
    l->num_shards = lv_embedding_num_shards(l->vocab_size, l->embedding_dim, max_shards);
  }
  l->ids_per_shard = (l->vocab_size + l->num_shards - 1) / l->num_shards;
  l->shards = calloc((size_t)l->num_shards, sizeof *l->shards);
  if (!l->shards) return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory", l->base.scope);
  lv_shape shape = lv_shape2(l->ids_per_shard, l->embedding_dim);
  /* tf.nn.embedding_lookup's gradient is an IndexedSlices: Lingvo's L2/L1 regularize the
   * looked-up rows only. SimpleEmbeddingLayer looks up that way too unless use_matmul
   * (a one-hot matmul: a dense gradient, regularized whole). */
  if (!sharded) {
    LV_TRY(lv_layer_add_var(&l->base, "wm", shape, NULL, true, &l->shards[0]));
    lv_layer_vn_target(&l->base, l->shards[0], false);
    l->shards[0]->lp_looked_up_rows = !lv_params_bool(p, "use_matmul");
    return NULL;
  }
  for (int i = 0; i < l->num_shards; i++) {
    char name[32];
    snprintf(name, sizeof name, "var_%d", i);
    LV_TRY(lv_layer_add_var(&l->base, name, shape, NULL, true, &l->shards[i]));
    lv_layer_vn_target(&l->base, l->shards[i], false);
    l->shards[i]->lp_looked_up_rows = true;
  }
  return NULL;
}

static void embedding_destroy(lv_layer *base) {
  lv_embedding_layer *l = (lv_embedding_layer *)base;
  free(l->shards);
  l->shards = NULL;
}

/* An int32 arena tensor of shape s holding host data. */
static lv_tensor *ids_tensor(lv_graph *g, lv_shape s, const int32_t *host) {
  lv_tensor *t = lv_graph_tensor(g, LV_I32, s);
  if (!t) return NULL;
  lv_status st = lv_tensor_from_host(t, host);
  if (st) {
    lv_graph_fail(g, "copying ids to the device: %s", lv_status_msg(st));
    lv_status_free(st);
    return NULL;
  }
  return t;
}

/* The "mod" partitioned lookup over n > 1 shards: the ids are grouped by shard (stable),
 * each shard gathers its rows, the groups are concatenated [N, D] and one more gather
 * puts the rows back in the ids' order. Both gathers keep the shards' gradients sparse. */
static lv_tensor *sharded_lookup(lv_embedding_layer *l, lv_graph *g, lv_tensor *ids, const int32_t *h) {
  const int n = l->num_shards;
  const int64_t num = lv_tensor_numel(ids);
  int64_t *count = calloc((size_t)n + 1, sizeof *count);
  int32_t *local = malloc(sizeof *local * (size_t)(num ? num : 1));
  int32_t *inv = malloc(sizeof *inv * (size_t)(num ? num : 1));
  lv_tensor **parts = calloc((size_t)n, sizeof *parts);
  lv_tensor *out = NULL;
  if (!count || !local || !inv || !parts) {
    lv_graph_fail(g, "%s: out of memory grouping %lld ids by shard", l->base.scope, (long long)num);
    goto done;
  }
  for (int64_t i = 0; i < num; i++) count[h[i] % n + 1]++;
  for (int k = 0; k < n; k++) count[k + 1] += count[k]; /* count[k]: first slot of shard k */
  int64_t *next = calloc((size_t)n, sizeof *next);
  if (!next) {
    lv_graph_fail(g, "%s: out of memory", l->base.scope);
    goto done;
  }
  memcpy(next, count, sizeof *next * (size_t)n);
  for (int64_t i = 0; i < num; i++) {
    int64_t slot = next[h[i] % n]++;
    local[slot] = h[i] / n;
    inv[i] = (int32_t)slot;
  }
  free(next);
  int np = 0;
  for (int k = 0; k < n; k++) {
    int64_t c = count[k + 1] - count[k];
    if (!c) continue;
    lv_tensor *lid = ids_tensor(g, lv_shape1(c), local + count[k]);
    parts[np++] = lv_op_gather(g, &l->shards[k]->value, lid);
  }
  lv_tensor *grouped = np == 1 ? parts[0] : lv_op_concat(g, parts, np, 0);
  out = lv_op_gather(g, grouped, ids_tensor(g, ids->shape, inv));
done:
  free(count);
  free(local);
  free(inv);
  free(parts);
  return out;
}

lv_tensor *lv_embedding_layer_lookup(lv_embedding_layer *l, lv_graph *g, lv_tensor *ids) {
  if (!ids) return NULL;
  char s[96];
  if (ids->dtype != LV_I32) {
    lv_graph_fail(g, "%s: ids must be int32, got %s %s", l->base.scope, lv_dtype_names[ids->dtype],
                  lv_shape_str(&ids->shape, s, sizeof s));
    return NULL;
  }
  const int64_t num = lv_tensor_numel(ids);
  if (num == 0) {
    lv_graph_fail(g, "%s: no ids to look up (shape %s)", l->base.scope, lv_shape_str(&ids->shape, s, sizeof s));
    return NULL;
  }
  lv_tensor *out;
  if (l->num_shards == 1) {
    /* The gather checks the ids' range (its error names the id and the table). */
    out = lv_op_gather(g, &l->shards[0]->value, ids);
  } else {
    int32_t *h = malloc(sizeof *h * (size_t)num);
    if (!h) {
      lv_graph_fail(g, "%s: out of memory reading %lld ids", l->base.scope, (long long)num);
      return NULL;
    }
    lv_status st = lv_tensor_to_host(ids, h);
    if (st) {
      lv_graph_fail(g, "%s: reading ids: %s", l->base.scope, lv_status_msg(st));
      lv_status_free(st);
      free(h);
      return NULL;
    }
    for (int64_t i = 0; i < num; i++)
      if (h[i] < 0 || h[i] >= l->vocab_size) {
        lv_graph_fail(g, "%s: id %d at flat index %lld is outside [0, vocab_size=%lld)", l->base.scope, h[i],
                      (long long)i, (long long)l->vocab_size);
        free(h);
        return NULL;
      }
    out = sharded_lookup(l, g, ids, h);
    free(h);
  }
  if (out && l->scale_sqrt_depth) out = lv_op_scale(g, out, (float)sqrt((double)l->embedding_dim));
  return out;
}

lv_tensor *lv_embedding_layer_lookup_time_major(lv_embedding_layer *l, lv_graph *g, lv_tensor *ids,
                                                lv_tensor *paddings) {
  static const int swap01[3] = {1, 0, 2};
  if (!ids || !paddings || ids->shape.rank != 2 || !lv_shape_eq(&ids->shape, &paddings->shape)) {
    lv_graph_fail(g, "%s: ids and paddings must be [batch, time] of the same shape", l->base.scope);
    return NULL;
  }
  lv_tensor *x = lv_embedding_layer_lookup(l, g, ids);
  return x ? lv_op_transpose(g, x, swap01) : NULL;
}

static bool embedding_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  return lv_layer_set_out(l, g, out, "act",
                          lv_embedding_layer_lookup((lv_embedding_layer *)l, g, lv_layer_in(l, g, in, "ids")));
}

const lv_layer_class lv_simple_embedding_layer_class = {
    .cls = "SimpleEmbeddingLayer",
    .params = lv_simple_embedding_layer_params,
    .size = sizeof(lv_embedding_layer),
    .create = embedding_create,
    .fprop = embedding_fprop,
    .destroy = embedding_destroy,
};

const lv_layer_class lv_embedding_layer_class = {
    .cls = "EmbeddingLayer",
    .params = lv_embedding_layer_params,
    .size = sizeof(lv_embedding_layer),
    .create = embedding_create,
    .fprop = embedding_fprop,
    .destroy = embedding_destroy,
};

/* ---- PositionalEmbeddingLayer ---- */

lv_params *lv_positional_embedding_layer_params(void) {
  lv_params *p = lv_layer_base_params("PositionalEmbeddingLayer");
  lv_params_define_float(p, "min_timescale", 1, "Start of the geometric index. Determines the periodicity of the "
                         "added signal.");
  lv_params_define_float(p, "max_timescale", 10000, "End of the geometric index. Determines the frequency of the "
                         "added signal.");
  lv_params_define_int(p, "embedding_dim", 0, "Dimension of the embedding to be generated.");
  lv_params_define_bool(p, "trainable_scaling", false, "Introduces a trainable scaling parameter (a scalar) that "
                        "multiplies the positional embedding in FProp.");
  lv_params_define_float(p, "trainable_scaling_init", 1.0, "Initial value of the scaling parameter.");
  return p;
}

static lv_status positional_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_positional_embedding_layer *l = (lv_positional_embedding_layer *)base;
  LV_TRY(lv_layer_setup(&l->base, p, parent_scope, vs));
  l->embedding_dim = lv_params_int(p, "embedding_dim");
  l->min_timescale = lv_params_float(p, "min_timescale");
  l->max_timescale = lv_params_float(p, "max_timescale");
  l->trainable_scaling_init = lv_params_float(p, "trainable_scaling_init");
  if (l->embedding_dim <= 0 || l->embedding_dim % 2)
    return lv_status_make(LV_ERR_INVALID, "%s: embedding_dim must be even and > 0, got %lld", l->base.scope,
                          (long long)l->embedding_dim);
  if (!(l->min_timescale > 0) || !(l->max_timescale > 0))
    return lv_status_make(LV_ERR_INVALID, "%s: min_timescale and max_timescale must be > 0, got %g and %g",
                          l->base.scope, l->min_timescale, l->max_timescale);
  if (lv_params_bool(p, "trainable_scaling")) {
    lv_var_init zero = {LV_INIT_CONSTANT, 0.0};
    LV_TRY(lv_layer_add_var(&l->base, "scale", lv_shape1(1), &zero, true, &l->scale));
  }
  return NULL;
}

/* The signal for n float32 positions into out [n, D], in float32 as Lingvo computes it. */
static void positional_signal(const lv_positional_embedding_layer *l, const float *pos, int64_t n, float *out) {
  const int64_t d = l->embedding_dim, nt = d / 2;
  const float incr = (float)log(l->max_timescale / l->min_timescale) / fmaxf(1.0f, (float)nt - 1.0f);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < nt; j++) {
      float inv = (float)l->min_timescale * expf((float)j * -incr);
      float st = pos[i] * inv;
      out[i * d + j] = sinf(st);
      out[i * d + nt + j] = cosf(st);
    }
}

static lv_tensor *positional_from_host(lv_positional_embedding_layer *l, lv_graph *g, const float *pos, int64_t n,
                                       lv_shape out_shape) {
  float *h = malloc(sizeof *h * (size_t)(n * l->embedding_dim));
  if (!h) {
    lv_graph_fail(g, "%s: out of memory for %lld positions", l->base.scope, (long long)n);
    return NULL;
  }
  positional_signal(l, pos, n, h);
  lv_tensor *t = lv_graph_tensor(g, LV_F32, out_shape);
  if (t) {
    lv_status st = lv_tensor_from_host(t, h);
    if (st) {
      lv_graph_fail(g, "%s: %s", l->base.scope, lv_status_msg(st));
      lv_status_free(st);
      t = NULL;
    }
  }
  free(h);
  if (t && l->scale) t = lv_op_mul(g, t, lv_op_add_scalar(g, &l->scale->value, (float)l->trainable_scaling_init));
  return t;
}

lv_tensor *lv_positional_embedding_fprop(lv_positional_embedding_layer *l, lv_graph *g, int64_t seq_length) {
  if (seq_length <= 0) {
    lv_graph_fail(g, "%s: seq_length must be > 0, got %lld", l->base.scope, (long long)seq_length);
    return NULL;
  }
  float *pos = malloc(sizeof *pos * (size_t)seq_length);
  if (!pos) {
    lv_graph_fail(g, "%s: out of memory", l->base.scope);
    return NULL;
  }
  for (int64_t i = 0; i < seq_length; i++) pos[i] = (float)i;
  lv_tensor *t = positional_from_host(l, g, pos, seq_length, lv_shape2(seq_length, l->embedding_dim));
  free(pos);
  return t;
}

lv_tensor *lv_positional_embedding_fprop_with_position(lv_positional_embedding_layer *l, lv_graph *g,
                                                       lv_tensor *position) {
  if (!position) return NULL;
  char s[96];
  if (position->shape.rank != 2 || (position->dtype != LV_I32 && position->dtype != LV_F32)) {
    lv_graph_fail(g, "%s: position must be int32 or float32 [B, T], got %s %s", l->base.scope,
                  lv_dtype_names[position->dtype], lv_shape_str(&position->shape, s, sizeof s));
    return NULL;
  }
  int64_t n = lv_tensor_numel(position);
  float *pos = malloc(sizeof *pos * (size_t)(n ? n : 1));
  if (!pos) {
    lv_graph_fail(g, "%s: out of memory", l->base.scope);
    return NULL;
  }
  lv_status st = lv_tensor_to_host(position, pos);
  if (st) {
    lv_graph_fail(g, "%s: reading positions: %s", l->base.scope, lv_status_msg(st));
    lv_status_free(st);
    free(pos);
    return NULL;
  }
  if (position->dtype == LV_I32)
    for (int64_t i = 0; i < n; i++) {
      int32_t v;
      memcpy(&v, &pos[i], sizeof v);
      pos[i] = (float)v;
    }
  lv_tensor *t = positional_from_host(
      l, g, pos, n, lv_shape3(position->shape.d[0], position->shape.d[1], l->embedding_dim));
  free(pos);
  return t;
}

static bool positional_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  return lv_layer_set_out(l, g, out, "act",
                          lv_positional_embedding_fprop_with_position((lv_positional_embedding_layer *)l, g,
                                                                      lv_layer_in(l, g, in, "position")));
}

const lv_layer_class lv_positional_embedding_layer_class = {
    .cls = "PositionalEmbeddingLayer",
    .params = lv_positional_embedding_layer_params,
    .size = sizeof(lv_positional_embedding_layer),
    .create = positional_create,
    .fprop = positional_fprop,
};
