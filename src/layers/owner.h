/* What a composite of layers (a task's encoder, the attention LSTM decoder) owns: the
 * params copies its child layers borrow and the layers themselves, created through the
 * helpers below so that every error names the params path (`who`, e.g.
 * "task.decoder.rnn_cell_tpl") and everything is freed in one call, layers in reverse
 * order of creation. */
#ifndef LV_LAYERS_OWNER_H
#define LV_LAYERS_OWNER_H

#include "layers/embedding.h"
#include "layers/layer.h"

typedef struct lv_layer_owner {
  lv_params **params; /* child params (layers borrow them) */
  int nparams, cap_params;
  lv_layer **layers;  /* every layer created */
  int nlayers, cap_layers;
} lv_layer_owner;

/* Frees every layer (last created first), then every params copy; empties o. */
void lv_layer_owner_free(lv_layer_owner *o);
/* A copy of src (owned by o), named name unless NULL; the caller sets more keys, then
 * freezes it. A NULL src (None) is an error naming who. */
lv_status lv_owner_params(lv_layer_owner *o, const lv_params *src, const char *who, const char *name, lv_params **out);
/* A layer of p's class (p frozen here) under scope. */
lv_status lv_owner_layer(lv_layer_owner *o, lv_params *p, const char *scope, lv_varstore *vs, const char *who,
                         lv_layer **out);
/* An RNN cell from template tpl named name with the given input and output widths. */
lv_status lv_owner_cell(lv_layer_owner *o, const lv_params *tpl, const char *who, const char *name, int64_t in,
                        int64_t out_dim, const char *scope, lv_varstore *vs, lv_layer **out);
/* The embedding `emb` of params sp (EmbeddingLayer or SimpleEmbeddingLayer); who is sp's
 * path ("task.decoder"). */
lv_status lv_owner_embedding(lv_layer_owner *o, const lv_params *sp, const char *who, const char *scope,
                             lv_varstore *vs, lv_embedding_layer **out);

/* Range checks of a composite's params, naming the key. */
lv_status lv_check_int_range(const char *key, int64_t v, int64_t lo, int64_t hi);
/* A probability in [0, 1), as float. */
lv_status lv_check_prob(const char *key, double v, float *out);

/* Lingvo's MT defaults: EmbeddingLayer vocab 32000, dim 1024, 16 shards, Uniform(0.04);
 * LSTMCellSimple with Uniform(0.04). */
lv_params *lv_mt_default_embedding_params(void);
lv_params *lv_mt_default_cell_params(void);
/* params_init of p: method ("uniform", "gaussian") and scale. */
void lv_params_set_init(lv_params *p, const char *method, double scale);
/* A new params of registered class cls (a programmer error if it is unknown). */
lv_params *lv_params_instantiate(const char *cls);

#endif
