#include "layers/layer.h"
#include "layers/qdomain.h"
#include "base/hash.h"
#include "base/names.h"
#include "base/rng.h"

#include <stdio.h>
#include <string.h>

lv_params *lv_layer_base_params(const char *cls) {
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "cls", cls, "Class that this param object is associated with.");
  lv_params_define_string(p, "name", "", "Name of this layer object.");
  lv_params_define_none(p, "random_seed", LV_PV_INT, "Random seed for deterministic unittests.");
  lv_params *init = lv_params_new();
  lv_params_define_string(init, "method", "xavier",
                          "Initialization method: xavier, gaussian, uniform, constant, "
                          "gaussian_sqrt_dim, gaussian_sqrt_fanin, uniform_sqrt_dim, truncated_gaussian.");
  lv_params_define_float(init, "scale", 1.000001, "Scale of the initialization.");
  lv_params_define_params(p, "params_init", init, "How model weights should be initialized.");
  lv_params_define_none(p, "skip_lp_regularization", LV_PV_BOOL,
                        "If True, all variables in this layer skip L1/L2 regularization; None: the parent "
                        "layer's (the task's None: False).");
  lv_params_define_params(p, "vn", lv_layer_vn_params(),
                          "How variational noise should be applied (a layer whose vn is the default takes its "
                          "parent's; the task's is set from train.vn_std and train.vn_start_step).");
  return p;
}

lv_params *lv_layer_vn_params(void) {
  lv_params *p = lv_params_new();
  lv_params_define_none(p, "scale", LV_PV_FLOAT,
                        "The multiplier of the variational noise to apply. For Gaussian noise, this is the standard "
                        "deviation. For uniform noise, the range is [-scale/2, scale/2].");
  lv_params_define_bool(p, "global_vn", false, "Adds global variational noise every training setp iff True.");
  lv_params_define_bool(p, "per_step_vn", false, "Adds per-timesetp variational noise iff True.");
  lv_params_define_none(p, "seed", LV_PV_INT, "Random seed used to generate noise.");
  lv_params_define_none(p, "deterministic", LV_PV_BOOL,
                        "If true, generate noise using stateless random ops that are compatible with TF functional "
                        "ops (lingvoc's noise is always stateless: a function of seed, step and variable).");
  lv_params_define_bool(p, "use_uniform_noise", false,
                        "If True, use Unif(-0.5, 0.5) for the noise. Otherwise, use Gaussian(0, 1).");
  lv_params_define_none(p, "weight_norm_type", LV_PV_STRING,
                        "If in the supported set, scale the noise by the norm of the vectorized weight tensor "
                        "(lingvoc: only None, no norm scaling).");
  lv_params_define_bool(p, "weight_norm_stop_grad", true,
                        "If True, when weight_norm_type is nont None, stop the gradient from backpropagating to the norm.");
  lv_params_define_int(p, "start_step", 0, "Step starting from which variational noise is added during training.");
  return p;
}

lv_status lv_layer_vn_settings(const char *where, const lv_params *vn, double scale, int64_t start_step, uint64_t seed,
                               lv_var_vn *out) {
  memset(out, 0, sizeof *out);
  bool global = lv_params_bool(vn, "global_vn"), per_step = lv_params_bool(vn, "per_step_vn");
  if (lv_params_is_set(vn, "weight_norm_type"))
    return lv_status_make(LV_ERR_INVALID, "%s.vn.weight_norm_type: \"%s\": lingvoc scales the noise by no weight norm "
                          "yet; leave it None", where, lv_params_str(vn, "weight_norm_type"));
  if (!global && !per_step) return NULL;
  if (per_step && !(lv_params_is_set(vn, "deterministic") && lv_params_bool(vn, "deterministic")))
    return lv_status_make(LV_ERR_INVALID, "%s.vn: per_step vn requires deterministic=True (as Lingvo's AddVN)", where);
  if (!(scale >= 0.0))
    return lv_status_make(LV_ERR_INVALID, "%s.vn.scale: VN scale must be set (a number >= 0) when global_vn or "
                          "per_step_vn is on", where);
  out->global = global;
  out->per_step = per_step;
  out->uniform = lv_params_bool(vn, "use_uniform_noise");
  out->scale = (float)scale;
  out->start_step = start_step;
  out->seed = lv_params_is_set(vn, "seed") ? (uint64_t)lv_params_int(vn, "seed") : seed;
  return NULL;
}

lv_status lv_layer_scope_vn(lv_varstore *vs, const char *scope, const lv_params *p, const char *where) {
  if (!lv_params_has(p, "vn") || !lv_params_sub(p, "vn")) return NULL;
  const lv_params *vn = lv_params_sub(p, "vn");
  lv_params *def = lv_layer_vn_params();
  /* A vn the experiment set, even to the default's values (`vn: { global_vn = false; }`,
   * docs/learner.md), is the layer's own; Lingvo's CopyBaseParams cannot tell that one
   * from DefaultVN() and has DisableVN() set scale 1.0 for it. */
  bool is_default = lv_params_equal(vn, def) && !lv_params_any_assigned(vn);
  lv_params_free(def);
  if (is_default) return NULL;
  lv_var_vn parent = {0}, own;
  parent.seed = 1234;
  lv_varstore_scope_vn(vs, scope, &parent);
  LV_TRY(lv_layer_vn_settings(where, vn, lv_params_is_set(vn, "scale") ? lv_params_float(vn, "scale") : -1.0,
                              lv_params_int(vn, "start_step"), parent.seed, &own));
  lv_varstore_set_scope_vn(vs, scope, &own);
  return NULL;
}

void lv_layer_vn_target(const lv_layer *l, lv_var *v, bool per_step) {
  lv_var_vn vn = {0};
  if (lv_varstore_scope_vn(l->vs, l->scope, &vn)) {
    vn.per_step &= per_step;
    if (!vn.global && !vn.per_step) memset(&vn, 0, sizeof vn);
  }
  v->vn = vn;
}

lv_tensor *lv_layer_step_weight(lv_graph *g, lv_var *v) {
  const lv_var_vn *c = &v->vn;
  if (!c->per_step || !(c->scale > 0.0f) || !lv_graph_is_training(g) || lv_graph_step(g) < c->start_step)
    return &v->value;
  return lv_op_add_noise(g, &v->value, c->scale, c->uniform, c->seed,
                         lv_rng_mix(lv_fnv1a(v->name), lv_graph_next_stream(g)));
}

lv_status lv_layer_setup(lv_layer *l, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  memset(l, 0, sizeof *l);
  l->cls = lv_layer_class_find(lv_params_str(p, "cls"));
  l->p = p;
  l->vs = vs;
  const char *name = lv_params_str(p, "name");
  if (!name || !*name)
    return lv_status_make(LV_ERR_INVALID, "%s%s%s layer has an empty name; set its `name` param",
                          parent_scope && *parent_scope ? parent_scope : "",
                          parent_scope && *parent_scope ? ": " : "", lv_params_str(p, "cls"));
  int n = parent_scope && *parent_scope ? snprintf(l->scope, sizeof l->scope, "%s/%s", parent_scope, name)
                                        : snprintf(l->scope, sizeof l->scope, "%s", name);
  if (n >= (int)sizeof l->scope) return lv_status_make(LV_ERR_INVALID, "layer scope too long: %s/%s", parent_scope, name);
  l->seed = lv_params_is_set(p, "random_seed") ? (uint64_t)lv_params_int(p, "random_seed") : lv_fnv1a(l->scope);
  if (lv_params_has(p, "skip_lp_regularization") && lv_params_is_set(p, "skip_lp_regularization"))
    lv_varstore_set_scope_skip_lp(vs, l->scope, lv_params_bool(p, "skip_lp_regularization"));
  lv_qdomain_scope(vs, l->scope, p);
  return lv_layer_scope_vn(vs, l->scope, p, l->scope);
}

lv_status lv_layer_params_init(const lv_layer *l, lv_var_init *out) {
  const char *m = lv_params_str(l->p, "params_init.method");
  if (!lv_init_method_from_name(m, &out->method)) {
    char known[512];
    lv_names_join(lv_init_method_names, LV_INIT_COUNT, ", ", known, sizeof known);
    return lv_status_make(LV_ERR_INVALID, "%s: params_init.method: unknown method \"%s\" (known: %s)",
                          l->scope, m, known);
  }
  out->scale = lv_params_float(l->p, "params_init.scale");
  return NULL;
}

lv_status lv_layer_add_var(lv_layer *l, const char *name, lv_shape shape, const lv_var_init *init,
                           bool trainable, lv_var **out) {
  lv_var_init vi;
  if (init) vi = *init;
  else LV_TRY(lv_layer_params_init(l, &vi));
  char full[LV_VAR_NAME_MAX];
  if (snprintf(full, sizeof full, "%s/%s/var", l->scope, name) >= (int)sizeof full)
    return lv_status_make(LV_ERR_INVALID, "variable name too long: %s/%s/var", l->scope, name);
  LV_TRY(lv_varstore_add(l->vs, full, LV_F32, shape, vi, trainable, out));
  (*out)->skip_lp_regularization = lv_varstore_scope_skip_lp(l->vs, l->scope);
  return NULL;
}

lv_status lv_layer_activation(const lv_layer *l, const char *key, lv_activation *out) {
  const char *a = lv_params_str(l->p, key);
  if (lv_activation_from_name(a, out)) return NULL;
  char known[512];
  lv_names_join(lv_activation_names, LV_ACT_COUNT, ", ", known, sizeof known);
  return lv_status_make(LV_ERR_INVALID, "%s: %s: unknown activation \"%s\" (known: %s)", l->scope, key, a,
                        known);
}

lv_status lv_layer_int_list(const lv_layer *l, const char *key, int n, int64_t *out) {
  const lv_pvalue *v = lv_params_list(l->p, key);
  int64_t tmp[16];
  int got = v ? lv_pvalue_to_ints(v, tmp, 16) : -1;
  if (got != n)
    return lv_status_make(LV_ERR_INVALID, "%s: %s must be a list of %d integers (got %d)", l->scope, key, n,
                          got);
  for (int i = 0; i < n; i++) out[i] = tmp[i];
  return NULL;
}

lv_tensor *lv_layer_affine(const lv_layer *l, lv_graph *g, lv_tensor *x, int64_t input_dim, lv_var *w, lv_var *b) {
  return lv_layer_affine_t(l, g, x, input_dim, &w->value, b ? &b->value : NULL);
}

lv_tensor *lv_layer_affine_t(const lv_layer *l, lv_graph *g, lv_tensor *x, int64_t input_dim, lv_tensor *w,
                             lv_tensor *b) {
  if (!x || !w) return NULL;
  if (x->shape.d[x->shape.rank - 1] != input_dim) {
    char s[96];
    lv_graph_fail(g, "%s: input_dim is %lld but the input has shape %s", l->scope, (long long)input_dim,
                  lv_shape_str(&x->shape, s, sizeof s));
    return NULL;
  }
  return b ? lv_op_matmul_bias(g, x, w, b) : lv_op_matmul(g, x, w, false, false);
}
