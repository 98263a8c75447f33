/* Lingvo layer machinery. A layer is a C struct whose first member is lv_layer: its
 * class, its (frozen, borrowed) params, its variable scope ("lenet5/conv0") and the var
 * store its variables live in. Variables are named "<scope>/<name>/var" as Lingvo names
 * them, so checkpoints line up with Lingvo's.
 *
 * One interface for every layer (lv_layer_class, listed in layers.def and registered
 * under Lingvo's class names): a params constructor, create (children and variables
 * under the parent's scope), fprop from a named map of tensors to a named map of
 * tensors, destroy. A parent builds a child from a params template by its `cls`
 * (lv_layer_create), so an experiment file swaps or stacks layers without C changes.
 * Single-input layers read the key "act" (and "paddings" where they take one) and write
 * "act"; lv_layer_fprop_act is the shorthand. Concrete layers also keep typed C entry
 * points (lv_conv_layer_fprop, ...) for parents that know what they hold. */
#ifndef LV_LAYERS_LAYER_H
#define LV_LAYERS_LAYER_H

#include "base/status.h"
#include "core/graph.h"
#include "core/ops.h"
#include "core/variable.h"
#include "params/params.h"

#include "core/nmap.h"

typedef struct lv_layer_class lv_layer_class;

typedef struct lv_layer {
  const lv_layer_class *cls; /* from p.cls (NULL for params of no registered class) */
  const lv_params *p;
  char scope[LV_VAR_NAME_MAX];
  lv_varstore *vs;
  uint64_t seed; /* for dropout streams: random_seed if set, else derived from scope */
} lv_layer;

struct lv_layer_class {
  const char *cls;              /* Lingvo's class name, "ConvLayer" */
  lv_params *(*params)(void);   /* its defaults */
  size_t size;                  /* sizeof the concrete struct (lv_layer first) */
  /* Fills a zeroed struct of `size` bytes: lv_layer_setup, then children and variables. */
  lv_status (*create)(lv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs);
  /* Reads its inputs from in and sets its outputs in out (arena tensors). Returns false
   * with the graph's error recorded on failure. */
  bool (*fprop)(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out);
  /* Optional: the "act" output shape for an "act" input shape (false if the input
   * cannot be taken). Lets a parent size the layer above (ModelV1's FC input_dim). */
  bool (*out_shape)(const lv_layer *l, lv_shape in, lv_shape *out);
  /* Optional: releases what create allocated (not the struct itself). */
  void (*destroy)(lv_layer *l);
};

const lv_layer_class *lv_layer_class_find(const char *cls);
/* A new layer of class p.cls (heap; p is borrowed and must outlive it). Errors: unknown
 * class (naming the known ones), and the class's own create errors. */
lv_status lv_layer_create(const lv_params *p, const char *parent_scope, lv_varstore *vs, lv_layer **out);
/* Destroys and frees a layer made by lv_layer_create (NULL is fine). */
void lv_layer_free(lv_layer *l);
/* Runs l's fprop; false (graph error set) on failure, naming the layer when its class
 * has no fprop. */
bool lv_layer_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out);
/* {"act": x} -> out["act"]; NULL (graph error set) on failure or a missing output. */
lv_tensor *lv_layer_fprop_act(lv_layer *l, lv_graph *g, lv_tensor *x);
/* out[key] = t in an fprop; false with a graph error if t is NULL or the map fails. */
bool lv_layer_set_out(const lv_layer *l, lv_graph *g, lv_nmap *out, const char *key, lv_tensor *t);
/* in[key], or NULL with a graph error naming the layer, the key and the keys present. */
lv_tensor *lv_layer_in(const lv_layer *l, lv_graph *g, const lv_nmap *in, const char *key);

/* BaseLayer params: cls, name, random_seed (None), params_init {method, scale},
 * skip_lp_regularization (None), vn (lv_layer_vn_params). */
lv_params *lv_layer_base_params(const char *cls);
/* Lingvo's VariationalNoiseParams at DefaultVN(): scale None, global_vn, per_step_vn,
 * seed None, deterministic None, use_uniform_noise, weight_norm_type None,
 * weight_norm_stop_grad, start_step 0. */
lv_params *lv_layer_vn_params(void);
/* The noise settings vn params give (where: "task" or a layer scope, for errors), with
 * scale (< 0: None) and start_step as given and seed when vn.seed is None. All off
 * unless global_vn or per_step_vn. Errors as Lingvo's AddVN: a scale that is None when
 * noise is on; per_step_vn without deterministic=True; and what lingvoc has not yet:
 * a weight_norm_type. */
lv_status lv_layer_vn_settings(const char *where, const lv_params *vn, double scale, int64_t start_step, uint64_t seed,
                               lv_var_vn *out);
/* Records p.vn for scope when it is not the default (Lingvo's CopyBaseParams keeps a
 * child's own vn): the layers and variables under scope take it. lv_layer_setup does this
 * for every layer; a task calls it for the params of the parts it builds without a layer
 * of their own (task.encoder, task.decoder). where names p in errors. */
lv_status lv_layer_scope_vn(lv_varstore *vs, const char *scope, const lv_params *p, const char *where);
/* Marks v as one of the variables Lingvo's AddGlobalVN of l's class perturbs (per_step:
 * also one its AddVN(per_step=True) perturbs), with the settings in force at l's scope. */
void lv_layer_vn_target(const lv_layer *l, lv_var *v, bool per_step);
/* v's value for an op of g, with Lingvo's per-step noise (AddVN(per_step=True)) when v is
 * a per-step target (lv_layer_vn_target) under per_step_vn, g is in training mode and its
 * step has reached vn.start_step: w + scale * noise drawn afresh at every call (every
 * decoder step of an attention, every softmax), a function of vn.seed, v's name and the
 * graph's next stream (lv_graph_next_stream), so a resumed step draws the same. The
 * gradient flows to v unchanged. v->value itself otherwise. */
lv_tensor *lv_layer_step_weight(lv_graph *g, lv_var *v);
/* scope = parent_scope + "/" + p.name (or p.name at the top); cls from p.cls. Errors if
 * name is empty. A vn other than the default is recorded for the layer's scope (its
 * errors: lv_layer_vn_settings). */
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
/* The same with the weights as tensors (a quantized w); NULL w fails quietly (an earlier
 * op's error stands). */
lv_tensor *lv_layer_affine_t(const lv_layer *l, lv_graph *g, lv_tensor *x, int64_t input_dim, lv_tensor *w,
                             lv_tensor *b);

/* Registers every layer class of layers.def in the params registry. Idempotent. */
void lv_layers_register_all(void);

#endif
