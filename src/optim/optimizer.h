/* Optimizers over flat float32 arrays, with TensorFlow 1's update rules, slot names and
 * non-slot state (Lingvo's lingvo/core/optimizer.py wraps tf.train.*Optimizer;
 * reference/lingvo.md §7.1), so a checkpoint written by lingvoc holds the same
 * variables as one written by Lingvo: `<var>/Adam`, `<var>/Adam_1`, `beta1_power`, ...
 *
 * Usage: lv_optimizer_create on the backend of the variables' device, then
 * lv_optimizer_add_var once per trainable variable (in a fixed order; the optimizer
 * allocates that variable's slots on the backend and zero- or constant-initializes them
 * with a kernel), then lv_optimizer_apply once per step with every variable's value and
 * gradient in the same order. The updates are the backend's optim_* kernels
 * (kernels/kernels.h); host code never touches slot memory. Slots and non-slot scalars
 * are exposed by name for checkpointing: slots through host copies
 * (lv_optimizer_slots_to_host before writing them, lv_optimizer_slots_from_host after
 * restoring into them), non-slot scalars (host floats) directly.
 *
 * Ownership: the optimizer owns its slots and their host copies; lv_optimizer_apply
 * reads the gradients and updates values in place (borrowed device memory, not kept).
 * Each element's arithmetic is independent of the thread count, so results are
 * deterministic. */
#ifndef LV_OPTIM_OPTIMIZER_H
#define LV_OPTIM_OPTIMIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "kernels/kernels.h"

typedef enum {
  LV_OPT_SGD,       /* GradientDescentOptimizer: var -= lr * g */
  LV_OPT_MOMENTUM,  /* MomentumOptimizer(lr, alpha, use_nesterov); slot "Momentum" */
  LV_OPT_RMSPROP,   /* RMSPropOptimizer(lr, decay, momentum, epsilon); slots "RMSProp" (ms,
                       initialized to 1), "RMSProp_1" (momentum) */
  LV_OPT_ADAGRAD,   /* AdagradOptimizer(lr, initial_accumulator_value); slot "Adagrad" */
  LV_OPT_ADADELTA,  /* AdadeltaOptimizer(lr, rho=decay, epsilon); slots "Adadelta",
                       "Adadelta_1" */
  LV_OPT_ADAM,      /* AdamOptimizer(lr, beta1, beta2, epsilon); slots "Adam" (m),
                       "Adam_1" (v); non-slot beta1_power, beta2_power */
  LV_OPT_ADAFACTOR, /* XLAShardingAdafactor (mesh_tensorflow's Adafactor, Lingvo's only TF
                       Adafactor); slots "Adafactor", "Adafactor_1", ... in TF's order:
                       m (beta1 > 0), then vr and vc (a factored matrix) or v */
  LV_OPT_COUNT
} lv_optimizer_type;

/* Lingvo class names: "SGD", "Momentum", "RMSProp", "Adagrad", "AdaDelta", "Adam",
 * "XLAShardingAdafactor". */
extern const char *const lv_optimizer_type_names[LV_OPT_COUNT];
bool lv_optimizer_type_from_name(const char *name, lv_optimizer_type *out);

/* The hyperparameters of every class; a class reads the fields its params table names. */
typedef struct lv_optimizer_config {
  lv_optimizer_type type;
  double alpha;                     /* Momentum: momentum (0.9) */
  bool use_nesterov;                /* Momentum (false) */
  double decay;                     /* RMSProp (0.9), AdaDelta rho (0.95) */
  double momentum;                  /* RMSProp (0.9) */
  double epsilon;                   /* RMSProp (1.0), AdaDelta (1e-8), Adam (1e-6) */
  double initial_accumulator_value; /* Adagrad (1.0) */
  double beta1, beta2;              /* Adam (0.9, 0.999); Adafactor (0, 0.999) */
  /* Adafactor */
  bool multiply_by_parameter_scale; /* true */
  double clipping_threshold;        /* None -> 0: no update clipping */
  bool factored;                    /* true */
  double decay_exponent_pow;        /* None -> 0: Adam-like decay from beta2 */
  double decay_exponent_offset;     /* 0 */
  double min_dim_size_to_factor;    /* 128 */
  bool cond_is_finite;              /* false (lingvoc: must stay false) */
  double epsilon1, epsilon2;        /* 1e-30, 1e-3 (constructor defaults, not Params) */
} lv_optimizer_config;

/* ---- optimizer classes ----
 * Every optimizer type is one class (the table in optimizer.c): its params (Lingvo name,
 * kind, default, description, the range Lingvo's constructor accepts, and the
 * lv_optimizer_config field the value lands in), its slots (TF's names and initial
 * values), its non-slot scalars and its update (one backend optim_* kernel per
 * variable). lv_optimizer_defaults, lv_optimizer_create/add_var/apply, the non-slot
 * accessors and the params binding (optim_params.c: defining, reading and registering
 * every class) all walk this one table. Adding an optimizer = an enum value and its name
 * above (config fields for new hyperparameters), a class entry, and its kernel. */
typedef enum {
  LV_OPTP_FLOAT,     /* float param -> double field */
  LV_OPTP_BOOL,      /* bool param -> bool field */
  LV_OPTP_INT,       /* int param -> double field */
  LV_OPTP_OPT_FLOAT, /* float or None (the default) -> double field, None = 0 */
  LV_OPTP_HIDDEN,    /* no param (a constructor argument Lingvo's Params do not expose):
                        the default lands in the double field */
} lv_optim_param_kind;

/* The values a param accepts (checked by lv_optimizer_create; NaN is never accepted). */
typedef enum {
  LV_OPTR_ANY,
  LV_OPTR_NONNEG,    /* >= 0 */
  LV_OPTR_POSITIVE,  /* > 0 */
  LV_OPTR_UNIT,      /* in [0, 1] */
  LV_OPTR_UNIT_OPEN, /* in [0, 1) */
  LV_OPTR_COUNT
} lv_optim_range;

typedef struct {
  const char *name; /* Lingvo's param name */
  lv_optim_param_kind kind;
  double def; /* BOOL: 0 or 1 */
  lv_optim_range range;
  const char *desc;
  size_t off; /* offsetof(lv_optimizer_config, ...) of the value */
} lv_optim_param;

#define LV_OPT_MAX_SLOTS 3   /* slot variables per variable */
#define LV_OPT_MAX_NONSLOT 2 /* non-slot scalars per optimizer */

typedef struct {
  const lv_optim_param *params; /* in Lingvo's definition order */
  int nparams;
  /* TF's slot suffixes ("<var>/<slot>"), the first nslots used; TF uniquifies a second
   * slot of the same variable with _1. */
  int nslots;
  const char *slot_names[LV_OPT_MAX_SLOTS];
  /* Slot k's initial value (NULL: every slot starts at 0). */
  float (*slot_init)(const lv_optimizer_config *c, int k);
  /* Non-slot scalars (checkpointed by name), their initial values and their advance
   * after every step (NULL: none). */
  int nnonslot;
  const char *nonslot_names[LV_OPT_MAX_NONSLOT];
  void (*nonslot_init)(const lv_optimizer_config *c, float *nonslot);
  void (*nonslot_advance)(const lv_optimizer_config *c, float *nonslot);
  /* The step's rate from the learning rate and the non-slot state, computed once per
   * step (NULL: lr itself). */
  float (*step_rate)(const lv_optimizer_config *c, float lr, const float *nonslot);
  /* Updates w[n] from g[n] and the variable's slots with the backend's kernel. */
  void (*update)(const lv_kernel_table *k, lv_kctx *ctx, const lv_optimizer_config *c, float rate, int64_t n,
                 float *w, const float *g, float *const *slot);
  /* Optimizers whose slots depend on the variable's shape (Adafactor), instead of
   * nslots/slot_init/update: slot_shapes gives the variable's slots (count, each one's
   * rank and dims, names "<slot_names[0]>", "<slot_names[0]>_1", ...; zero-initialised)
   * or an error; update_shaped updates it at global step `step` (scratch: 4 doubles of
   * device memory). */
  lv_status (*slot_shapes)(const lv_optimizer_config *c, const char *var, int rank, const int64_t *dims,
                           int *nslots, int *slot_rank, int64_t (*slot_dims)[LV_KMAX_RANK]);
  void (*update_shaped)(const lv_kernel_table *k, lv_kctx *ctx, const lv_optimizer_config *c, float lr, int64_t step,
                        int rank, const int64_t *dims, float *w, const float *g, float *const *slot, double *scratch);
} lv_optimizer_class;

/* The class of type t (its name is lv_optimizer_type_names[t]). */
const lv_optimizer_class *lv_optimizer_class_of(lv_optimizer_type t);

/* Lingvo's default params for type t (the class table's defaults). */
lv_optimizer_config lv_optimizer_defaults(lv_optimizer_type t);

typedef struct lv_optimizer lv_optimizer;

/* Validates (rates in range, epsilon > 0 where TF divides by it, ...). be (borrowed, must
 * outlive the optimizer) holds the slots and runs the updates. */
lv_status lv_optimizer_create(const lv_optimizer_config *cfg, const lv_backend *be,
                              lv_optimizer **out);
void lv_optimizer_free(lv_optimizer *o);
const lv_optimizer_config *lv_optimizer_get_config(const lv_optimizer *o);
const lv_backend *lv_optimizer_backend(const lv_optimizer *o);

/* Registers a variable of n float32 elements and creates its slots. Names must be
 * unique. Returns the variable's index (0, 1, ...) through *index (may be NULL). */
lv_status lv_optimizer_add_var(lv_optimizer *o, const char *var_name, int64_t n, int *index);
/* The same for a variable of shape dims[rank] (Adafactor factors matrices). */
lv_status lv_optimizer_add_var_shaped(lv_optimizer *o, const char *var_name, int rank, const int64_t *dims, int *index);
/* The global step of the next lv_optimizer_apply (Adafactor's decay rate depends on it;
 * 0 until set). */
void lv_optimizer_set_step(lv_optimizer *o, int64_t step);
int lv_optimizer_num_vars(const lv_optimizer *o);

/* One step: updates values[i] (n_i elements of device memory, registered as variable i)
 * from grads[i], for all registered variables, with learning rate lr; then advances
 * non-slot state (Adam's beta powers). nvars must equal lv_optimizer_num_vars. */
lv_status lv_optimizer_apply(lv_optimizer *o, float lr, int nvars, float *const *values,
                             const float *const *grads);

/* Slot variables: every registered variable's slots, in variable order then slot order.
 * The name is "<var>/<slot>" ("fc/w/var/Adam_1"); data has n floats of device memory. */
int lv_optimizer_num_slot_vars(const lv_optimizer *o);
void lv_optimizer_slot_var(lv_optimizer *o, int i, const char **name, float **data, int64_t *n);
/* Slot i's shape: its rank, dims into dims[LV_KMAX_RANK] (the variable's shape for every
 * optimizer but Adafactor's factored accumulators; rank 1 for a variable added by n). */
int lv_optimizer_slot_dims(const lv_optimizer *o, int i, int64_t *dims);
/* Looks a slot variable up by its full name; device memory, NULL if none. */
float *lv_optimizer_find_slot(lv_optimizer *o, const char *name, int64_t *n);
/* For checkpoints: slot i's host copy (n floats, stable while the optimizer lives), and
 * the copies of every slot to its host copy (before a save) or back (after a restore). */
float *lv_optimizer_slot_host(lv_optimizer *o, int i);
void lv_optimizer_slots_to_host(lv_optimizer *o);
void lv_optimizer_slots_from_host(lv_optimizer *o);

/* Non-slot scalar state (the class's: Adam's "beta1_power", "beta2_power"; none for the
 * others). */
int lv_optimizer_num_nonslot(const lv_optimizer *o);
void lv_optimizer_nonslot(lv_optimizer *o, int i, const char **name, float **value);

#endif
