#include "layers/owner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/rnn_cell.h"

void lv_layer_owner_free(lv_layer_owner *o) {
  for (int i = o->nlayers - 1; i >= 0; i--) lv_layer_free(o->layers[i]);
  for (int i = 0; i < o->nparams; i++) lv_params_free(o->params[i]);
  free(o->layers);
  free(o->params);
  memset(o, 0, sizeof *o);
}

static void *grow(void *v, int *cap, int n, size_t elem) {
  if (n < *cap) return v;
  int c = *cap ? 2 * *cap : 16;
  void *g = realloc(v, elem * (size_t)c);
  LV_ASSERT(g);
  *cap = c;
  return g;
}

lv_status lv_owner_params(lv_layer_owner *o, const lv_params *src, const char *who, const char *name, lv_params **out) {
  if (!src) return lv_status_make(LV_ERR_INVALID, "%s must be set (it is None)", who);
  o->params = grow(o->params, &o->cap_params, o->nparams, sizeof *o->params);
  lv_params *p = lv_params_copy(src);
  o->params[o->nparams++] = p;
  *out = p;
  return name ? lv_params_set_string(p, "name", name) : NULL;
}

/* Keeps l (if any) and passes s on, wrapped with who. */
static lv_status keep_layer(lv_layer_owner *o, lv_status s, lv_layer *l, const char *who, lv_layer **out) {
  if (l) {
    o->layers = grow(o->layers, &o->cap_layers, o->nlayers, sizeof *o->layers);
    o->layers[o->nlayers++] = l;
  }
  if (s) return lv_status_wrap(s, "%s", who);
  *out = l;
  return NULL;
}

lv_status lv_owner_layer(lv_layer_owner *o, lv_params *p, const char *scope, lv_varstore *vs, const char *who,
                         lv_layer **out) {
  lv_params_freeze(p);
  lv_layer *l = NULL;
  lv_status s = lv_layer_create(p, scope, vs, &l);
  return keep_layer(o, s, l, who, out);
}

lv_status lv_owner_cell(lv_layer_owner *o, const lv_params *tpl, const char *who, const char *name, int64_t in,
                        int64_t out_dim, const char *scope, lv_varstore *vs, lv_layer **out) {
  lv_params *p = NULL;
  LV_TRY(lv_owner_params(o, tpl, who, name, &p));
  if (!lv_params_has(p, "num_input_nodes") || !lv_params_has(p, "num_output_nodes"))
    return lv_status_make(LV_ERR_INVALID, "%s.cls: %s is not an RNN cell", who, lv_params_str(p, "cls"));
  LV_TRY(lv_params_set_int(p, "num_input_nodes", in));
  LV_TRY(lv_params_set_int(p, "num_output_nodes", out_dim));
  lv_params_freeze(p);
  char w[LV_VAR_NAME_MAX + 64];
  snprintf(w, sizeof w, "%s (%s)", who, name);
  lv_layer *l = NULL;
  lv_status s = lv_rnn_cell_create(p, scope, vs, who, &l);
  return keep_layer(o, s, l, w, out);
}

lv_status lv_owner_embedding(lv_layer_owner *o, const lv_params *sp, const char *who, const char *scope,
                             lv_varstore *vs, lv_embedding_layer **out) {
  char w[128];
  snprintf(w, sizeof w, "%s.emb", who);
  lv_params *p = NULL;
  LV_TRY(lv_owner_params(o, lv_params_sub(sp, "emb"), w, "emb", &p));
  lv_layer *l = NULL;
  LV_TRY(lv_owner_layer(o, p, scope, vs, w, &l));
  if (strcmp(l->cls->cls, "EmbeddingLayer") && strcmp(l->cls->cls, "SimpleEmbeddingLayer"))
    return lv_status_make(LV_ERR_INVALID, "%s.cls must be EmbeddingLayer or SimpleEmbeddingLayer, got %s", w,
                          l->cls->cls);
  *out = (lv_embedding_layer *)l;
  return NULL;
}

lv_status lv_check_int_range(const char *key, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    return lv_status_make(LV_ERR_INVALID, "%s must be in [%lld, %lld], got %lld", key, (long long)lo, (long long)hi,
                          (long long)v);
  return NULL;
}

lv_status lv_check_prob(const char *key, double v, float *out) {
  if (!(v >= 0 && v < 1)) return lv_status_make(LV_ERR_INVALID, "%s must be in [0, 1), got %g", key, v);
  *out = (float)v;
  return NULL;
}

lv_params *lv_params_instantiate(const char *cls) {
  lv_params *p = NULL;
  LV_ASSERT(!lv_registry_instantiate(cls, &p));
  return p;
}

void lv_params_set_init(lv_params *p, const char *method, double scale) {
  LV_ASSERT(!lv_params_set_string(p, "params_init.method", method));
  LV_ASSERT(!lv_params_set_float(p, "params_init.scale", scale));
}

lv_params *lv_mt_default_embedding_params(void) {
  lv_params *e = lv_params_instantiate("EmbeddingLayer");
  LV_ASSERT(!lv_params_set_int(e, "vocab_size", 32000));
  LV_ASSERT(!lv_params_set_int(e, "embedding_dim", 1024));
  LV_ASSERT(!lv_params_set_int(e, "max_num_shards", 16));
  lv_params_set_init(e, "uniform", 0.04);
  return e;
}

lv_params *lv_mt_default_cell_params(void) {
  lv_params *c = lv_params_instantiate("LSTMCellSimple");
  lv_params_set_init(c, "uniform", 0.04);
  return c;
}
