/* Tasks (Lingvo's BaseTask subclasses). A task class is registered by name
 * ("classifier.ModelV1") with its params constructor and a vtable; tasks.def lists them.
 * fprop runs one split of a batch and fills named scalar metrics (value tensor, weight),
 * `loss` among them (Lingvo's FPropTower returning {name: (value, weight)}). */
#ifndef LV_MODELS_TASK_H
#define LV_MODELS_TASK_H

#include "base/status.h"
#include "core/graph.h"
#include "core/nmap.h"
#include "core/variable.h"
#include "input/batch.h"
#include "io/events.h"
#include "params/params.h"

/* The most metrics one lv_replicas_exchange carries (runners/replicas.h sizes its
 * arrays by it; the trainer exchanges more in several calls). Not a limit of lv_metrics,
 * which grows as metrics are added. */
#define LV_MAX_METRICS 16
#define LV_METRIC_NAME_MAX 64

/* A step's metrics; arrays of n entries (cap allocated), owned by the struct. */
typedef struct lv_metrics {
  int n, cap;
  char (*name)[LV_METRIC_NAME_MAX];
  lv_tensor **value; /* float32 scalars in the step arena */
  double *constant;  /* the value when value[i] is NULL */
  double *weight;
  lv_tensor *loss;   /* the `loss` metric's value */
  /* Lingvo's per_example tensors ([B, ...], e.g. the classifier's "predictions"): read
   * by the task's own summaries and by decoders. lv_metrics_free releases the map. */
  lv_nmap per_example;
} lv_metrics;

/* An empty set of metrics (what a zeroed struct is). */
void lv_metrics_init(lv_metrics *m);
void lv_metrics_free(lv_metrics *m);
/* Any number of metrics may be added (running out of host memory aborts with file:line).
 * Names longer than LV_METRIC_NAME_MAX - 1 are cut. */
void lv_metrics_add(lv_metrics *m, const char *name, lv_tensor *value, double weight);
void lv_metrics_add_const(lv_metrics *m, const char *name, double value, double weight);
/* The metric's value as a double (reads the scalar tensor, or the constant). */
double lv_metrics_value(const lv_metrics *m, int i);

typedef struct lv_task lv_task;
typedef struct lv_metric_set lv_metric_set; /* models/metrics.h */
typedef struct lv_mt_decode_ops lv_mt_decode_ops; /* models/mt.h */

/* Key/value outputs of PostProcessDecodeOut (Lingvo's list of (key, value) pairs: the
 * decoder writes them to decoder_out files). Strings are owned by the list. */
typedef struct lv_kv_list {
  int n, cap;
  char **key, **value;
} lv_kv_list;
void lv_kv_list_free(lv_kv_list *l);
lv_status lv_kv_list_add(lv_kv_list *l, const char *key, const char *value);

typedef struct lv_task_class {
  const char *cls;
  lv_params *(*params)(void);
  /* task_p: the frozen task params; input_p: the dataset's input params. */
  lv_status (*create)(const lv_params *task_p, const lv_params *input_p, lv_varstore *vs, lv_task **out);
  /* Returns false when the graph recorded an error. */
  bool (*fprop)(lv_task *t, lv_graph *g, lv_batch *b, bool is_eval, int64_t step, lv_metrics *m);
  void (*destroy)(lv_task *t);
  /* Optional (NULL: none). Called by the evaler with the first eval batch of each
   * checkpoint and that batch's metrics, to write the task's own summaries (the
   * classifier's captioned images; Lingvo's task-side _AddSummary). The batch is in host
   * memory; metric and per-example tensors are read through host copies. */
  lv_status (*eval_summaries)(lv_task *t, const lv_batch *b, const lv_metrics *m, int64_t step, lv_events_writer *ev);

  /* The decoder job (Lingvo's CreateDecoderMetrics / Decode / PostProcessDecodeOut);
   * all three NULL for a task that does not decode. */
  /* Adds the task's decoder metrics (corpus_bleu, ...) to an empty set. */
  lv_status (*create_decoder_metrics)(lv_task *t, lv_metric_set *metrics);
  /* Decoder outputs for a batch as arena tensors in g (eval mode), e.g. "topk_ids",
   * "topk_lens", "topk_scores", plus whatever post-processing needs from the batch. */
  lv_status (*decode)(lv_task *t, lv_graph *g, const lv_batch *b, lv_nmap *dec_out);
  /* Reads dec_out (through host copies), updates the metrics and appends one key/value
   * pair per example to out (the decoder_out file's lines). */
  lv_status (*post_process_decode_out)(lv_task *t, const lv_nmap *dec_out, lv_metric_set *metrics, lv_kv_list *out);

  /* Optional (NULL: none): incremental decoding for bin/decoder's beam search (MT tasks;
   * models/mt.h). */
  const lv_mt_decode_ops *mt_decode;
} lv_task_class;

struct lv_task {
  const lv_task_class *cls;
  const lv_params *p;
};

/* Brings host batch b into g's step: every tensor copied onto g's device
 * (lv_graph_from_host), under the same keys, into out (cleared first; same size). The
 * error is the graph's (arena, device) or the map's. */
lv_status lv_batch_to_graph(lv_graph *g, const lv_batch *b, lv_batch *out);

/* One decoder step of batch b (host memory; copied onto g's device): resets g, runs the
 * task's decode in eval mode and its post_process_decode_out, which updates metrics
 * and appends to out. A task without a decode path is an LV_ERR_INVALID error naming
 * its class. */
lv_status lv_task_decode_batch(lv_task *t, lv_graph *g, const lv_batch *b, lv_metric_set *metrics, lv_kv_list *out);

/* BaseTask params shared by every task: layer base + train + eval (§5.2, §5.3). */
lv_params *lv_task_base_params(const char *cls);
const lv_task_class *lv_task_class_find(const char *cls);
/* Registers every task class (tasks.def) and their dependencies (layers, optimizers). */
void lv_tasks_register_all(void);

#endif
