/* Elementwise activations (Lingvo's names), forward and backward. */
#include <string.h>
#include <strings.h>

#include "core/graph_impl.h"
#include "core/ops.h"

const char *const lv_activation_names[LV_ACT_COUNT] = {
    "NONE", "RELU", "RELU6", "SIGMOID", "TANH", "GELU", "SILU",
    "SOFTPLUS", "LEAKY_RELU", "EXP", "LOG", "SQRT", "SQUARE", "RSQRT",
};
_Static_assert(LV_ARRAY_LEN(lv_activation_names) == LV_ACT_COUNT, "activation names");

bool lv_activation_from_name(const char *name, lv_activation *out) {
  for (int i = 0; i < LV_ACT_COUNT; i++)
    if (strcasecmp(name, lv_activation_names[i]) == 0) {
      *out = (lv_activation)i;
      return true;
    }
  /* Lingvo's SWISH is SILU. */
  if (strcasecmp(name, "SWISH") == 0) {
    *out = LV_ACT_SILU;
    return true;
  }
  return false;
}

static void act_bwd(lv_graph *g, lv_node *nd) {
  bool acc;
  lv_tensor *gx = lv_graph_grad(g, nd->in[0], &acc);
  if (!gx) return;
  const unsigned r = lv_act_bwd_reads(nd->s.act.act);
  const lv_tensor *x = r & 1 ? nd->in[0] : nd->out, *y = r & 2 ? nd->out : nd->in[0];
  LV_K(nd->be, act_bwd, (int)nd->s.act.act, lv_tensor_numel(gx), lv_f32(x), lv_f32(y), lv_f32(nd->out->grad),
       lv_f32(gx), acc);
}

lv_tensor *lv_op_activation(lv_graph *g, lv_tensor *x, lv_activation act) {
  if (!lv_graph_inputs_ok(g, LV_OP_ACTIVATION, 1, &x)) return NULL;
  char s1[128];
  if (x->dtype != LV_F32 || (int)act < 0 || act >= LV_ACT_COUNT) {
    lv_graph_failf(g, LV_OP_ACTIVATION, "float32 input and a known activation required, got %s %s, activation %d",
                   lv_dtype_names[x->dtype], LV_SHP(x, s1), (int)act);
    return NULL;
  }
  if (act == LV_ACT_NONE) return x;
  const lv_backend *k = lv_graph_kernels(g, LV_OP_ACTIVATION, 1, &x);
  if (!k) return NULL;
  lv_tensor *out = lv_graph_out(g, LV_OP_ACTIVATION, LV_F32, x->shape);
  if (!out) return NULL;
  LV_K(k, act_fwd, (int)act, lv_tensor_numel(x), lv_f32(x), lv_f32(out));
  lv_node *nd = lv_graph_record(g, LV_OP_ACTIVATION, act_bwd, out, 1, &x);
  if (nd) {
    nd->be = k;
    nd->s.act.act = act;
  }
  return out;
}
