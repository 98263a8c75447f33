/* Variables: named persistent tensors (Lingvo/TF names such as "lenet5/conv0/w/var")
 * and their gradients. A var store lives on one device: it keeps every float32
 * variable's value in one contiguous buffer of that device and every gradient in
 * another (one all-reduce per step; one kernel to zero the grads), and non-float
 * variables (global_step int64) beside them. Initial values are computed on the host and
 * copied in through the device's backend. */
#ifndef LV_CORE_VARIABLE_H
#define LV_CORE_VARIABLE_H

#include <stdbool.h>

#include "base/rng.h"
#include "base/status.h"
#include "core/tensor.h"
#include "params/params.h"

#define LV_VAR_NAME_MAX 256

/* Lingvo's variational weight noise on one variable (VariationalNoiseParams resolved for
 * the layer that owns it, reference/lingvo_asr_lm.md §9; optim/vn.h applies it): while
 * training from global step start_step on, the step reads w + scale * noise, noise N(0, 1)
 * (U[-0.5, 0.5) if uniform) drawn from (seed, step, variable name). global: once per step
 * (AddGlobalVN); per_step: one of the variables Lingvo also perturbs afresh at each use
 * (AddVN(per_step=True): the layer adds it in its forward pass, lv_layer_step_weight).
 * All zero: no noise. */
typedef struct lv_var_vn {
  bool global, per_step, uniform;
  float scale;
  int64_t start_step;
  uint64_t seed;
} lv_var_vn;

typedef struct lv_var {
  char name[LV_VAR_NAME_MAX];
  lv_tensor value;  /* view into the store's value buffer (requires_grad if trainable) */
  lv_tensor grad;   /* view into the store's grad buffer (float32 only) */
  bool trainable;
  bool skip_lp_regularization;
  /* Rows of a table read by gathers (EmbeddingLayer's shards): TF gives it an
   * IndexedSlices gradient, and Lingvo's L2/L1 regularize only the rows a step looked up
   * (the learner's lp_row_width). */
  bool lp_looked_up_rows;
  /* In the group a task clips by its own global norm before the learner scales the
   * gradients (Lingvo's LanguageModel.AdjustGradients: train.max_lstm_gradient_norm on
   * the LSTM variables, the learner's grad_group). */
  bool grad_clip_group;
  lv_var_vn vn; /* set by the owning layer for Lingvo's AddGlobalVN / AddVN targets */
  /* The quantized twin value.qw points at (owned; NULL for a float model). */
  struct lv_qweight *quant;
  /* No float storage (lv_var_defer): value.data stays NULL and the values are the twin's,
   * made as floats only where an op needs them (kernels/qweight.h). */
  bool deferred;
  /* The quantization domain a quantizable layer fake-quantizes this weight with in
   * training (layers/qdomain.h's lv_qdomain, owned by the layer; NULL: none), for export. */
  const struct lv_qdomain *qdomain;
} lv_var;

/* How to fill a new variable (Lingvo's py_utils.WeightInit). */
typedef enum {
  LV_INIT_XAVIER,    /* uniform(+-scale*sqrt(6/(fan_in+fan_out))) */
  LV_INIT_GAUSSIAN,  /* N(0, scale) */
  LV_INIT_UNIFORM,   /* U(-scale, scale) */
  LV_INIT_CONSTANT,  /* scale */
  LV_INIT_GAUSSIAN_SQRT_DIM,    /* N(0, scale/sqrt(shape[0])) */
  LV_INIT_GAUSSIAN_SQRT_FANIN,  /* N(0, scale/sqrt(fan_in)) */
  LV_INIT_UNIFORM_SQRT_DIM,     /* U(+-scale/sqrt(shape[-1])) */
  LV_INIT_TRUNCATED_GAUSSIAN,   /* N(0, scale) truncated at 2 stddev */
  LV_INIT_COUNT
} lv_init_method;

extern const char *const lv_init_method_names[LV_INIT_COUNT]; /* "xavier", "gaussian", ... */
bool lv_init_method_from_name(const char *name, lv_init_method *out);

typedef struct lv_var_init {
  lv_init_method method;
  double scale;
} lv_var_init;

typedef struct lv_varstore lv_varstore;

lv_varstore *lv_varstore_create(void); /* on the host, cpu:0 */
/* On device dev; NULL if this build has no backend for it. */
lv_varstore *lv_varstore_create_on(lv_device dev);
lv_device lv_varstore_device(const lv_varstore *vs);
void lv_varstore_destroy(lv_varstore *vs);
/* Declares a variable; memory is assigned by lv_varstore_finalize. Duplicate names are
 * an LV_ERR_INTERNAL error. fan_in/fan_out follow TF's Xavier for conv (k*k*in, k*k*out). */
lv_status lv_varstore_add(lv_varstore *vs, const char *name, lv_dtype dtype, lv_shape shape,
                          lv_var_init init, bool trainable, lv_var **out);
/* Allocates the contiguous buffers and initializes every variable from seed (each
 * variable's stream is derived from its name, so adding a variable never changes the
 * others). After this no variable may be added. Non-float variables take the constant
 * init's scale (global_step: LV_INIT_CONSTANT, 0). */
lv_status lv_varstore_finalize(lv_varstore *vs, uint64_t seed);
/* Before finalize: no gradient buffer (a store for evaluation or decoding, which run no
 * backward pass): every variable's grad.data stays NULL and lv_varstore_grads gives NULL. */
void lv_varstore_set_no_grads(lv_varstore *vs);
/* Makes dst's variables read src's memory (the sessions of one loaded model keep one copy
 * of its weights) and frees dst's own. Both stores must be finalized from the same
 * declarations (names, dtypes, shapes, trainability, in order) on the same backend; false,
 * dst unchanged, if they differ. Nothing may write the values, or run a backward pass
 * into the gradients, while both are in use, and src must outlive dst. dst's values also
 * point at src's quantized twins (lv_var.quant stays src's to free). */
bool lv_varstore_share_values(lv_varstore *dst, lv_varstore *src);
int lv_varstore_count(const lv_varstore *vs);
lv_var *lv_varstore_get(lv_varstore *vs, int i);
lv_var *lv_varstore_find(lv_varstore *vs, const char *name);
/* All trainable float32 values / grads as one flat array (valid after finalize). Each
 * variable starts on a 64-byte boundary, so n counts a few padding floats between
 * variables; they start at 0 and, having zero gradient, stay 0 under any optimizer.
 * Non-trainable variables (and non-float ones such as global_step) live elsewhere and
 * have grad.data == NULL. */
/* Device pointers. */
float *lv_varstore_values(lv_varstore *vs, int64_t *n);
float *lv_varstore_grads(lv_varstore *vs, int64_t *n);
void lv_varstore_zero_grads(lv_varstore *vs);
/* Gives v the quantized twin q (taken over; replaces and frees any earlier one; NULL
 * drops it): value.qw then points at it. */
void lv_var_set_quant(lv_var *v, struct lv_qweight *q);
/* Before finalize: v (float32, trainable) gets no float storage; its values come with
 * the twin lv_var_set_quant gives it (a quantized model file's weight on the host). */
void lv_var_defer(lv_var *v);

/* Weight-noise settings by layer scope (Lingvo's CopyBaseParams: a layer whose vn is the
 * default takes its parent's): scope "" is the root (the task's, from train.vn_std).
 * set copies vn (a scope set twice keeps the last); find gives the settings of the
 * longest scope that is scope itself or one of its ancestors ("a/b" for "a/b/c", never
 * for "a/bc"), false if none is set. */
void lv_varstore_set_scope_vn(lv_varstore *vs, const char *scope, const lv_var_vn *vn);
bool lv_varstore_scope_vn(const lv_varstore *vs, const char *scope, lv_var_vn *out);
/* skip_lp_regularization by layer scope, the same way (Lingvo's CopyBaseParams: a layer
 * whose skip_lp_regularization is None takes its parent's): find gives the value of the
 * longest covering scope that set one, false if none did. */
void lv_varstore_set_scope_skip_lp(lv_varstore *vs, const char *scope, bool skip);
bool lv_varstore_scope_skip_lp(const lv_varstore *vs, const char *scope);
/* The quantization domain by layer scope, the same way (layers/qdomain.h: a layer whose
 * qdomain.default is None takes its parent's, the task's at scope ""): set records qd
 * (borrowed params, NULL: unset); find gives the longest covering scope's, NULL if none. */
void lv_varstore_set_scope_qdomain(lv_varstore *vs, const char *scope, const lv_params *qd);
const lv_params *lv_varstore_scope_qdomain(const lv_varstore *vs, const char *scope);

#endif
