/* Lingvo layer machinery. A layer is a C struct whose first member is lv_layer: its
 * (frozen, borrowed) params, its variable scope ("lenet5/conv0") and the var store its
 * variables live in. Variables are named "<scope>/<name>/var" as Lingvo names them, so
 * checkpoints line up with Lingvo's. Concrete layers (one file each, listed in
 * layers.def) define `lv_<layer>_params()` (registered by class name), `_create` (children
 * and variables) and `_fprop` with their own input/output signatures. */
#ifndef LV_LAYERS_LAYER_H
#define LV_LAYERS_LAYER_H

#include "base/status.h"
#include "core/graph.h"
#include "core/ops.h"
#include "core/variable.h"
#include "params/params.h"

typedef struct lv_layer {
  const lv_params *p;
  char scope[LV_VAR_NAME_MAX];
  lv_varstore *vs;
  uint64_t seed; /* for dropout streams: random_seed if set, else derived from scope */
} lv_layer;

/* BaseLayer params: cls, name, random_seed (None), params_init {method, scale},
 * skip_lp_regularization (None). */
lv_params *lv_layer_base_params(const char *cls);
/* scope = parent_scope + "/" + p.name (or p.name at the top). Errors if name is empty. */
lv_status lv_layer_setup(lv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs);
/* Adds "<scope>/<name>/var" (float32, trainable) initialized by params_init or init. */
lv_status lv_layer_add_var(lv_layer *l, const char *name, lv_shape shape, const lv_var_init *init,
                           bool trainable, lv_var **out);
/* The layer's params_init as an lv_var_init (error if the method name is unknown). */
lv_status lv_layer_params_init(const lv_layer *l, lv_var_init *out);
/* Parses an activation param ("RELU", ...) naming the layer in the error. */
lv_status lv_layer_activation(const lv_layer *l, const char *key, lv_activation *out);
/* Reads an int list param of exactly n entries into out. */
lv_status lv_layer_int_list(const lv_layer *l, const char *key, int n, int64_t *out);

/* x [..., input_dim] . w [input_dim, n] (+ b [n]); fails the graph naming the layer if
 * x's last dim is not input_dim. */
lv_tensor *lv_layer_affine(const lv_layer *l, lv_graph *g, lv_tensor *x, int64_t input_dim, lv_var *w, lv_var *b);

/* Registers every layer class of layers.def in the params registry. Idempotent. */
void lv_layers_register_all(void);

#endif
