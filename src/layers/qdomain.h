/* Lingvo's quantization-aware training (lingvo/core/quant_utils.py; reference/
 * lingvo_asr_lm.md §13): quantization domains that a quantizable layer's params name in
 * `qdomain` (`default` plus the layer's named domains: a ProjectionLayer's `weight`, an
 * LSTM cell's `weight`, `c_state`, `m_state`, `fullyconnected`, ...), and the
 * fake quantization they put on the layer's weights and activations while it trains.
 *
 * Domains (registered param classes):
 *   QDomain                        identity.
 *   SymmetricScheduledClipQDomain  every weight and activation goes through cc_schedule:
 *                                  FakeQuantizationSchedule (clip to a cap narrowing from
 *                                  start_cap to end_cap over [clip_start_step,
 *                                  clip_end_step], fake quantization with bits from
 *                                  quant_start_step) or LinearClippingCapSchedule (clip only).
 *   PassiveAsymQDomain             weights fake-quantized to [min(w), max(w)]; each tracked
 *                                  activation to the batch's [min(x, 0), max(x, 0)] while
 *                                  training, whose moving averages it keeps in
 *                                  <layer>/q/qdomain_<domain>/q/<act>_min|max/var (Lingvo's
 *                                  names; non-trainable, in the checkpoint) and uses in eval.
 *
 * Inheritance (lingvoc's, as `vn`): a layer whose qdomain.default is None takes the
 * nearest enclosing layer's (the task's `task.qdomain.default` covers the whole model);
 * a named domain left None is the layer's default (Lingvo's _GetQDomain). A model with no
 * domain anywhere runs no extra op.
 *
 * A quantizable layer embeds an lv_qlayer (fixed size, nothing to free), calls
 * lv_qlayer_setup in create after lv_layer_setup, lv_qlayer_track for each activation
 * it will quantize (Lingvo's TrackQActs, which makes PassiveAsymQDomain's variables),
 * and in fprop lv_qlayer_weight / lv_qlayer_act / lv_qlayer_ract (QWeight, QAct, QRAct);
 * each returns its input unchanged when the domain is off. */
#ifndef LV_LAYERS_QDOMAIN_H
#define LV_LAYERS_QDOMAIN_H

#include "layers/layer.h"

/* Lingvo's QDistribution values with a known range (QRAct). */
typedef enum {
  LV_QDIST_PADDING,        /* [0, 1], a constant range */
  LV_QDIST_RELU,           /* [0, 1] */
  LV_QDIST_RELU6,          /* [0, 6] */
  LV_QDIST_SIGMOID,        /* [0, 1] */
  LV_QDIST_SOFTMAX,        /* [0, 1], max narrowed to (2^b - 1) / 2^b with narrow_to_asym_bit_depth */
  LV_QDIST_TANH,           /* [-1, 1], narrowed likewise */
  LV_QDIST_LOG_SOFTMAX,    /* the domain's log_softmax_range (required) */
  LV_QDIST_RANDOM_UNIFORM, /* [0, 1] */
  LV_QDIST_COUNT
} lv_qdist;

typedef enum { LV_QD_IDENTITY, LV_QD_SCHEDULED_CLIP, LV_QD_PASSIVE_ASYM, LV_QD_KIND_COUNT } lv_qd_kind;
typedef enum { LV_CC_FAKE_QUANT, LV_CC_LINEAR, LV_CC_KIND_COUNT } lv_cc_kind;

/* One domain, resolved from its params. */
typedef struct lv_qdomain {
  lv_qd_kind kind;
  char scope[LV_VAR_NAME_MAX]; /* "<layer>/q/qdomain_<name>" */
  bool narrow_to_asym_bit_depth;
  bool has_log_softmax_range;
  float log_softmax_range[2];
  /* PassiveAsymQDomain */
  int bits;
  double ema_decay;
  float default_min, default_max, quantize_weight_epsilon;
  int64_t delay_start_steps;
  bool freeze;
  /* SymmetricScheduledClipQDomain's cc_schedule */
  lv_cc_kind cc;
  int64_t clip_start_step, clip_end_step, quant_start_step; /* Linear: start_step, end_step */
  float start_cap, end_cap;
  int cc_bits;
} lv_qdomain;

#define LV_QLAYER_MAX_DOMAINS 8
#define LV_QLAYER_MAX_ACTS 24

typedef struct lv_qact {
  char name[48];
  lv_qdomain *d;
  lv_var *min, *max; /* PassiveAsymQDomain's */
  /* This training step's running [count > 0, min, max] (Lingvo's accumulator), arena
   * tensors of graph acc_g until its reset number changes. */
  lv_tensor *acc_min, *acc_max;
  const lv_graph *acc_g;
  uint64_t acc_resets;
} lv_qact;

typedef struct lv_qlayer {
  const lv_layer *l;
  int n_domains;
  const char *names[LV_QLAYER_MAX_DOMAINS]; /* [0] "default" */
  lv_qdomain *use[LV_QLAYER_MAX_DOMAINS];   /* the domain each name uses, NULL: off */
  lv_qdomain own[LV_QLAYER_MAX_DOMAINS];
  int n_acts;
  lv_qact acts[LV_QLAYER_MAX_ACTS];
} lv_qlayer;

/* A layer's named domain for lv_qdomain_define_params: its name and Lingvo's description. */
typedef struct lv_qdomain_name {
  const char *name, *desc;
} lv_qdomain_name;

/* Defines p.qdomain: `default` and names[0, n) (each params, None by default), as
 * QuantizableLayer.Params and the layer's own p.qdomain.Define lines. Names ending in
 * "_compression" are Lingvo's pruning domains: defined, and an error if set. */
void lv_qdomain_define_params(lv_params *p, const lv_qdomain_name *names, int n);
/* Registers the domain and schedule param classes (QDomain, SymmetricScheduledClipQDomain,
 * PassiveAsymQDomain, FakeQuantizationSchedule, LinearClippingCapSchedule). Idempotent;
 * lv_layers_register_all calls it. */
void lv_qdomain_register_all(void);

/* Records p.qdomain.default (when set) for scope: the layers under it take it. Called by
 * lv_layer_setup for every layer, and by the instance for the task at scope "". */
void lv_qdomain_scope(lv_varstore *vs, const char *scope, const lv_params *p);

/* Resolves a domain from its params (cls one of the registered domain classes); scope is
 * where its variables go; where names it in errors ("lm/rnn/cell.qdomain.default"). */
lv_status lv_qdomain_init(lv_qdomain *d, const lv_params *p, const char *scope, const char *where);

/* Resolves l's domains (its p.qdomain's names, in order) as the header says. Errors name
 * the layer and the param. */
lv_status lv_qlayer_setup(lv_qlayer *q, const lv_layer *l);
/* True if any of the layer's domains quantizes. */
bool lv_qlayer_on(const lv_qlayer *q);
/* Tracks activation act in domain (a name of the layer's qdomain). Errors: an unknown
 * domain, an act tracked twice, too many. */
lv_status lv_qlayer_track(lv_qlayer *q, const char *domain, const char *act);

/* Records that v (NULL: nothing) goes through QWeight(v, domain) (lv_var.qdomain: the
 * domain when it quantizes, NULL otherwise), for an exporter; in create, after
 * lv_qlayer_setup. */
void lv_qlayer_bind_weight(const lv_qlayer *q, const char *domain, lv_var *v);
/* QWeight(w, domain): w as the domain quantizes it (w itself when off, and on a graph that
 * records no gradients when w has a quantized twin: export put such a weight on the
 * domain's grid already, runners/model_export.h). NULL with the graph's error on failure. */
lv_tensor *lv_qlayer_weight(lv_qlayer *q, lv_graph *g, const char *domain, lv_tensor *w);
/* QAct(act, x) of a tracked act. */
lv_tensor *lv_qlayer_act(lv_qlayer *q, lv_graph *g, const char *act, lv_tensor *x);
/* QRAct(x, dist, domain). */
lv_tensor *lv_qlayer_ract(lv_qlayer *q, lv_graph *g, const char *domain, lv_tensor *x, lv_qdist dist);

/* A domain's operations on their own (what the lv_qlayer_* calls do). step: the graph's. */
lv_tensor *lv_qdomain_weight(const lv_qdomain *d, lv_graph *g, lv_tensor *w);
lv_tensor *lv_qdomain_natural(const lv_qdomain *d, lv_graph *g, lv_tensor *x, float min, float max);
/* FakeQuantizationSchedule / LinearClippingCapSchedule at step: the range it clips or
 * quantizes to and whether it quantizes (false: clip, or nothing when !*active). */
void lv_qdomain_schedule_range(const lv_qdomain *d, int64_t step, float *min, float *max, bool *quantize,
                               bool *active);

/* ---- for an exporter (int8 export with the ranges QAT learned) ----
 * The float range [*min, *max] a quantized model's int8 kernels should use; TF's fake
 * quantization nudges it so that 0 is a level (kernel_math.h's lv_kfq_nudge gives the
 * nudged range and scale for a bit depth). Each returns false when the domain does not
 * quantize that tensor (no domain, the identity QDomain, a LinearClippingCapSchedule,
 * which only clips) and *bits the domain's bit depth otherwise. */

/* The range the qdomain at layer_scope learned for its activation act (PassiveAsymQDomain:
 * the moving averages <layer_scope>/q/qdomain_<domain>/q/<act>_min|max/var in vs, restored
 * from a checkpoint; domain NULL: "default"), copied to the host. Needs only the
 * variables; false if vs holds no such pair. */
bool lv_qdomain_learned_act_range(lv_varstore *vs, const char *layer_scope, const char *domain, const char *act,
                                  float *min, float *max);
/* The same from a built layer, for any domain: PassiveAsymQDomain's variables, or
 * SymmetricScheduledClipQDomain's final range (Lingvo's GetQuantizedEndRange: -end_cap,
 * end_cap (2^(bits-1) - 1) / 2^(bits-1)). */
bool lv_qlayer_act_range(const lv_qlayer *q, const char *act, float *min, float *max, int *bits);
/* The range a weight w (of domain `domain`, e.g. "weight") is quantized to:
 * PassiveAsymQDomain's [min(min(w), -eps), max(max(w), eps)] (w read to the host), or the
 * scheduled domain's final range. */
bool lv_qlayer_weight_range(const lv_qlayer *q, const char *domain, const lv_tensor *w, float *min, float *max,
                            int *bits);
/* The same for domain d (NULL: false). */
bool lv_qdomain_weight_range(const lv_qdomain *d, const lv_tensor *w, float *min, float *max, int *bits);

#endif
