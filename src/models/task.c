#include "models/task.h"
#include "layers/owner.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "input/input.h"
#include "input/tokenizer.h"
#include "layers/layer.h"
#include "layers/qdomain.h"
#include "optim/optim_params.h"

#define X(sym) extern const lv_task_class sym;
#include "models/tasks.def"
#undef X

static const lv_task_class *const kTasks[] = {
#define X(sym) &sym,
#include "models/tasks.def"
#undef X
};

void lv_metrics_init(lv_metrics *m) { memset(m, 0, sizeof *m); }

void lv_metrics_free(lv_metrics *m) {
  lv_nmap_free(&m->per_example);
  free(m->name);
  free(m->value);
  free(m->constant);
  free(m->weight);
  lv_metrics_init(m);
}

static void metrics_grow(lv_metrics *m) {
  int cap = m->cap ? 2 * m->cap : 16;
  m->name = realloc(m->name, sizeof *m->name * (size_t)cap);
  m->value = realloc(m->value, sizeof *m->value * (size_t)cap);
  m->constant = realloc(m->constant, sizeof *m->constant * (size_t)cap);
  m->weight = realloc(m->weight, sizeof *m->weight * (size_t)cap);
  LV_ASSERT(m->name && m->value && m->constant && m->weight);
  m->cap = cap;
}

void lv_metrics_add(lv_metrics *m, const char *name, lv_tensor *value, double weight) {
  if (m->n == m->cap) metrics_grow(m);
  snprintf(m->name[m->n], LV_METRIC_NAME_MAX, "%s", name);
  m->value[m->n] = value;
  m->weight[m->n] = weight;
  m->constant[m->n] = 0;
  m->n++;
  if (!strcmp(name, "loss")) m->loss = value;
}

void lv_metrics_add_const(lv_metrics *m, const char *name, double value, double weight) {
  lv_metrics_add(m, name, NULL, weight);
  m->constant[m->n - 1] = value;
}

double lv_metrics_value(const lv_metrics *m, int i) {
  if (!m->value[i]) return m->constant[i];
  double v = 0;
  lv_status s = lv_tensor_item(m->value[i], &v);
  LV_ASSERT(!s); /* a metric is a scalar of the step's device */
  return v;
}

void lv_kv_list_free(lv_kv_list *l) {
  for (int i = 0; i < l->n; i++) {
    free(l->key[i]);
    free(l->value[i]);
  }
  free(l->key);
  free(l->value);
  memset(l, 0, sizeof *l);
}

lv_status lv_kv_list_add(lv_kv_list *l, const char *key, const char *value) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    char **k = realloc(l->key, sizeof *k * (size_t)cap);
    if (k) l->key = k;
    char **v = k ? realloc(l->value, sizeof *v * (size_t)cap) : NULL;
    if (!v) return lv_status_make(LV_ERR_RESOURCE, "out of memory growing decoder outputs to %d pairs", cap);
    l->value = v;
    l->cap = cap;
  }
  char *k = strdup(key), *v = strdup(value);
  if (!k || !v) {
    free(k);
    free(v);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory adding decoder output %s", key);
  }
  l->key[l->n] = k;
  l->value[l->n++] = v;
  return NULL;
}

lv_status lv_batch_to_graph(lv_graph *g, const lv_batch *b, lv_batch *out) {
  lv_nmap_clear(&out->map);
  out->size = b->size;
  lv_status s = NULL;
  for (int i = 0; !s && i < lv_nmap_count(&b->map); i++) {
    const lv_nmap_entry *e = lv_nmap_at(&b->map, i);
    /* strings never leave the host: the task reads the batch's own tensor */
    lv_tensor *t = e->t->dtype == LV_STRING ? e->t : lv_graph_from_host(g, e->t);
    s = t ? lv_nmap_set(&out->map, e->key, t) : lv_graph_status(g);
  }
  return s;
}

void lv_decode_out_init(lv_decode_out *o) { memset(o, 0, sizeof *o); }

void lv_decode_out_free(lv_decode_out *o) {
  for (int i = 0; i < o->nowned; i++) lv_tensor_free(o->owned[i]);
  free(o->owned);
  lv_nmap_free(&o->map);
  lv_decode_out_init(o);
}

lv_status lv_decode_out_set(lv_decode_out *o, const char *key, lv_tensor *t) { return lv_nmap_set(&o->map, key, t); }

lv_status lv_decode_out_take(lv_decode_out *o, const char *key, lv_tensor *t) {
  if (!t) return lv_status_make(LV_ERR_RESOURCE, "decode output %s: out of memory", key);
  if (o->nowned == o->cap_owned) {
    int cap = o->cap_owned ? 2 * o->cap_owned : 8;
    lv_tensor **n = realloc(o->owned, sizeof *n * (size_t)cap);
    if (!n) {
      lv_tensor_free(t);
      return lv_status_make(LV_ERR_RESOURCE, "decode output %s: out of memory", key);
    }
    o->owned = n;
    o->cap_owned = cap;
  }
  o->owned[o->nowned++] = t;
  return lv_nmap_set(&o->map, key, t);
}

void lv_task_free_decode_state(lv_task *t) {
  if (t->decode_state && t->decode_state_free) t->decode_state_free(t->decode_state);
  t->decode_state = NULL;
  t->decode_state_free = NULL;
}

/* The task's decode of host batch b in eval mode on a reset g, into *dec_out (initialized
 * here; the caller frees it). */
static lv_status decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *dec_out) {
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  lv_decode_out_init(dec_out);
  lv_status s = t->cls->decode(t, g, b, dec_out);
  return s ? s : lv_graph_status(g);
}

lv_status lv_task_decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *dec_out) {
  if (!t->cls->decode) {
    lv_decode_out_init(dec_out);
    return lv_status_make(LV_ERR_INVALID, "task %s has no decode path", t->cls->cls);
  }
  return decode(t, g, b, dec_out);
}

bool lv_task_class_decodes(const lv_task_class *c) { return c->decode && c->post_process_decode_out; }

lv_status lv_task_decode_batch(lv_task *t, lv_graph *g, const lv_batch *b, lv_metric_set *metrics, lv_kv_list *out) {
  const lv_task_class *c = t->cls;
  if (!lv_task_class_decodes(c))
    return lv_status_make(LV_ERR_INVALID, "task %s has no decode path (Decode / PostProcessDecodeOut)", c->cls);
  lv_decode_out dec_out;
  lv_status s = decode(t, g, b, &dec_out);
  if (!s) s = c->post_process_decode_out(t, &dec_out, metrics, out);
  lv_decode_out_free(&dec_out);
  return s ? lv_status_wrap(s, "decode") : NULL;
}

lv_status lv_task_decode_line(lv_task *t, lv_graph *g, const lv_batch *b, char **line) {
  const lv_task_class *c = t->cls;
  *line = NULL;
  if (!c->decode || !c->decode_out_to_line)
    return lv_status_make(LV_ERR_INVALID, "task %s does not decode lines", c->cls);
  lv_decode_out dec_out;
  lv_status s = decode(t, g, b, &dec_out);
  if (!s) s = c->decode_out_to_line(t, &dec_out, line);
  lv_decode_out_free(&dec_out);
  return s;
}

/* Classes added at run time (lv_task_class_register), after tasks.def's. */
#define MAX_EXTRA_TASKS 16
static const lv_task_class *g_extra[MAX_EXTRA_TASKS];
static int g_nextra;
static pthread_mutex_t g_extra_mu = PTHREAD_MUTEX_INITIALIZER;

const lv_task_class *lv_task_class_find(const char *cls) {
  for (size_t i = 0; i < LV_ARRAY_LEN(kTasks); i++)
    if (!strcmp(kTasks[i]->cls, cls)) return kTasks[i];
  pthread_mutex_lock(&g_extra_mu);
  const lv_task_class *c = NULL;
  for (int i = 0; !c && i < g_nextra; i++)
    if (!strcmp(g_extra[i]->cls, cls)) c = g_extra[i];
  pthread_mutex_unlock(&g_extra_mu);
  return c;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void register_all(void) {
  lv_layers_register_all();
  lv_optim_register_all();
  lv_input_register_all();
  lv_tokenizer_register_all();
  for (size_t i = 0; i < LV_ARRAY_LEN(kTasks); i++) lv_registry_add(kTasks[i]->cls, kTasks[i]->params);
}
void lv_tasks_register_all(void) { pthread_once(&g_once, register_all); }

lv_status lv_task_class_register(const lv_task_class *c) {
  lv_tasks_register_all();
  if (lv_task_class_find(c->cls)) return lv_status_make(LV_ERR_INVALID, "task class %s is already registered", c->cls);
  pthread_mutex_lock(&g_extra_mu);
  bool room = g_nextra < MAX_EXTRA_TASKS;
  if (room) g_extra[g_nextra++] = c;
  pthread_mutex_unlock(&g_extra_mu);
  if (!room) return lv_status_make(LV_ERR_RESOURCE, "task class %s: more than %d classes registered at run time", c->cls,
                                   MAX_EXTRA_TASKS);
  lv_registry_add(c->cls, c->params);
  return NULL;
}

static lv_params *train_params(void) {
  lv_params *tp = lv_params_new();
  lv_params_define_int(tp, "start_up_delay_steps", 200, "i-th replica starts training after i*(i+1)/2*start_up_delay_steps steps.");
  lv_params_define_int(tp, "max_steps", 4000000, "Training max of 4M steps.");
  lv_params_define_int(tp, "tpu_steps_per_loop", 1000, "The number of training steps per training loop for TPUs.");
  lv_params_define_int(tp, "vn_start_step", 200000000, "Step starting from which variational noise is added to params values during training.");
  lv_params_define_float(tp, "vn_std", 0.0, "Std of the variational noise.");
  lv_params_define_float(tp, "ema_decay", 0.0, "If > 0, enable ExponentialMovingAverage during training with the give decay. Must be < 1. Disabled if <= 0.");
  lv_params_define_none(tp, "ema_decay_moving_vars", LV_PV_BOOL, "If True, include variables from collection \"moving_vars\" in ema.");
  lv_params_define_params(tp, "ema_schedule", NULL, "If not None, a schedule over global_step giving the moving averages' decay (e.g. EmaDecaySchedule), used instead of ema_decay's min(ema_decay, (1 + step) / (10 + step)).");
  lv_params_define_list(tp, "init_from_checkpoint_rules", lv_pvalue_list(), "A list of (checkpoint_path, loading_rules, ignore_rules) (Lingvo's dictionary {checkpoint_path: (loading_rules, ignore_rules)}): variables are only loaded from these paths when training starts without a checkpoint, overriding their initialization. loading_rules is a list of (regex, format): a variable whose name (with ':0') matches a regex (re.match) is loaded from the checkpoint variable the format names (each %s a group; the first rule that matches is used; a rule matching no variable is an error). ignore_rules is a list of regexes of variables never loaded. Example: [('/path/ckpt-100', [('(.*)', '%s')], [])] initializes every variable from /path/ckpt-100.");
  lv_params_define_none(tp, "init_from_checkpoint_override", LV_PV_STRING, "If set, override keys in init_from_checkpoint_rules with this. Once set, only one key is expected in init_from_checkpoint_rules.");
  lv_params_define_int(tp, "enqueue_max_steps", -1, "Max enqueue steps. -1 meaning no limit. Tests only.");
  lv_params_define_int(tp, "save_interval_seconds", 600, "Generates a checkpoint roughly once every this many seconds.");
  lv_params_define_none(tp, "save_interval_steps", LV_PV_INT, "Generates a checkpoint roughly once every this many training steps. Supersedes save_interval_seconds if not None.");
  lv_params_define_int(tp, "save_max_to_keep", 100, "Maximum number of recent checkpoints to keep.");
  lv_params_define_float(tp, "save_keep_checkpoint_every_n_hours", 0.5, "How often to keep a checkpoint.");
  lv_params_define_bool(tp, "async_checkpointing", true, "Checkpointing asynchronously (copy the variables, write in a thread).");
  lv_params_define_bool(tp, "checkpoint_finite_check", false, "Whether to sanity check that every variable is finite before saving.");
  lv_params_define_int(tp, "summary_interval_steps", 100, "Generates a summary roughly once every this many steps.");
  lv_optim_define_train_params(tp);
  return tp;
}

static lv_params *eval_params(void) {
  lv_params *ep = lv_params_new();
  lv_params_define_int(ep, "samples_per_summary", 1000, "If > 0, generates one summary after this many samples, at most. If == 0 or the dataset has fewer examples, evaluate the whole dataset.");
  lv_params_define_none(ep, "decoder_samples_per_summary", LV_PV_INT, "If > 0, each decoder summary will contain at most this many samples. If None, defaults to the actual value of `p.eval.samples_per_summary` for backwards compatibility.");
  lv_params_define_string(ep, "load_checkpoint_from", "", "If not empty, specifies a location for the checkpoint that should be used for eval. One example format is a checkpoint directory of a training run.");
  lv_params_define_int(ep, "start_eval_after", 0, "Start evaluation after specified number of steps.");
  lv_params_define_int(ep, "start_decoder_after", 0, "Only decode checkpoints after this step.");
  lv_params_define_bool(ep, "eval_all_checkpoints", false, "Compute evaluation metrics for every checkpoint saved by the Trainer.");
  lv_params_define_bool(ep, "decode_all_checkpoints", false, "Compute decoder metrics for every checkpoint saved by the Trainer.");
  return ep;
}

lv_status lv_task_update_vn_config(const lv_params *task_p, lv_varstore *vs, uint64_t seed) {
  const lv_params *vn = lv_params_sub(task_p, "vn");
  const double std = lv_params_float(task_p, "train.vn_std");
  const bool wanted = vn && (lv_params_bool(vn, "global_vn") || lv_params_bool(vn, "per_step_vn"));
  lv_var_vn c = {0};
  c.seed = seed;
  if (!isfinite(std))
    return lv_status_make(LV_ERR_INVALID, "task.train.vn_std: %g: expected a finite number (> 0 turns weight noise "
                          "on, 0 leaves it off)", std);
  if (std < 0.0 && wanted)
    lv_warn("task.train.vn_std is %g: no weight noise (as in Lingvo, only vn_std > 0 turns it on; a negative std "
            "is not read as its absolute value)", std);
  if (!(std > 0.0) || !wanted) {
    /* Said when the experiment set vn_std itself: AsrModel's own default is Lingvo's 0.075,
     * which stays off without global_vn, as in Lingvo. */
    double class_std = 0.0;
    const lv_task_class *tc = lv_params_has(task_p, "cls") ? lv_task_class_find(lv_params_str(task_p, "cls")) : NULL;
    if (tc) {
      lv_params *d = tc->params();
      class_std = lv_params_float(d, "train.vn_std");
      lv_params_free(d);
    }
    if (std > 0.0 && std != class_std)
      lv_warn("task.train.vn_std is %g but task.vn.global_vn and task.vn.per_step_vn are both off: no weight noise "
              "(Lingvo's lines are task.vn.global_vn: true; task.train.vn_std: ...)", std);
    lv_varstore_set_scope_vn(vs, "", &c);
    return NULL;
  }
  if (lv_params_is_set(vn, "scale"))
    return lv_status_make(LV_ERR_INVALID, "task.vn.scale: A value should not be specified for p.vn.scale. It will be "
                          "overwritten by p.train.vn_std (%g); remove task.vn.scale", std);
  if (lv_params_int(vn, "start_step"))
    return lv_status_make(LV_ERR_INVALID, "task.vn.start_step: A value should not be specified for p.vn.start_step. It "
                          "will be overwritten by p.train.vn_start_step; set task.train.vn_start_step instead");
  LV_TRY(lv_layer_vn_settings("task", vn, std, lv_params_int(task_p, "train.vn_start_step"), seed, &c));
  lv_varstore_set_scope_vn(vs, "", &c);
  return NULL;
}

lv_params *lv_task_base_params(const char *cls) {
  lv_params *p = lv_layer_base_params(cls);
  /* lingvoc's: Lingvo's BaseTask has no qdomain; here its default reaches every
   * quantizable layer whose own is None (layers/qdomain.h). */
  lv_qdomain_define_params(p, NULL, 0);
  lv_params_define_params(p, "train", train_params(), "Params to control how this task should be trained.");
  lv_params_define_params(p, "eval", eval_params(), "Params to control how this task should be evaled.");
  return p;
}

void lv_task_set_piecewise_lr_schedule(lv_params *train_p) {
  lv_params *sched = lv_params_instantiate("PiecewiseConstantSchedule");
  int64_t bounds[3] = {350000, 500000, 600000};
  double values[4] = {1.0, 0.1, 0.01, 0.001};
  LV_ASSERT(!lv_params_set_list(sched, "boundaries", lv_pvalue_ints(3, bounds)));
  LV_ASSERT(!lv_params_set_list(sched, "values", lv_pvalue_floats(4, values)));
  LV_ASSERT(!lv_params_set_params(train_p, "lr_schedule", sched));
}

lv_status lv_task_set_scorers(lv_task *t, const lv_scorer *const *scorers, int n, const char *what) {
  if (n > 0 && !t->cls->seq_decode)
    return lv_status_make(LV_ERR_INVALID, "%s: %s does not decode with lingvoc's beam search (search/seq_decode.h), "
                          "into which scorers are added", what, t->cls->cls);
  t->scorers = n > 0 ? scorers : NULL;
  t->n_scorers = n > 0 ? n : 0;
  return NULL;
}
