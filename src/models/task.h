/* Tasks (Lingvo's BaseTask subclasses). A task class is registered by name
 * ("classifier.ModelV1") with its params constructor and a vtable; tasks.def lists them
 * (lv_task_class_register adds one at run time). fprop runs one split of a batch and
 * fills named scalar metrics (value tensor, weight), `loss` among them (Lingvo's
 * FPropTower returning {name: (value, weight)}). A task that decodes fills the decoder
 * hooks, which are all bin/decoder calls: the runners know no task, input or metric. The
 * sequence tasks take theirs from search/seq_decode.h. */
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
typedef struct lv_metric_set lv_metric_set; /* metrics/metrics.h */
typedef struct lv_seq_decode_ops lv_seq_decode_ops; /* search/seq_decode.h */
typedef struct lv_scorer lv_scorer;                 /* search/beam_search.h */

/* Key/value outputs of PostProcessDecodeOut (Lingvo's list of (key, value) pairs): the
 * decoder job writes each pair to its decoder_out file as the key's line, the value's
 * lines and an empty line. Strings are owned by the list. */
typedef struct lv_kv_list {
  int n, cap;
  char **key, **value;
} lv_kv_list;
void lv_kv_list_free(lv_kv_list *l);
lv_status lv_kv_list_add(lv_kv_list *l, const char *key, const char *value);

/* What a task's decode leaves for its post-processing: named tensors that are the
 * graph's (valid until the graph is reset), the host batch's (valid until the input's
 * next batch) or host tensors the decode made and handed over (lv_decode_out_take: freed
 * with the map). */
typedef struct lv_decode_out {
  lv_nmap map;
  lv_tensor **owned;
  int nowned, cap_owned;
} lv_decode_out;
void lv_decode_out_init(lv_decode_out *o);
void lv_decode_out_free(lv_decode_out *o);
/* Sets key to t, borrowed. */
lv_status lv_decode_out_set(lv_decode_out *o, const char *key, lv_tensor *t);
/* Sets key to t and takes t (also when it fails; a NULL t is an out-of-memory error). */
lv_status lv_decode_out_take(lv_decode_out *o, const char *key, lv_tensor *t);
static inline lv_tensor *lv_decode_out_get(const lv_decode_out *o, const char *key) {
  return lv_nmap_get(&o->map, key);
}

typedef struct lv_task_class {
  const char *cls;
  lv_params *(*params)(void);
  /* task_p: the frozen task params; input_p: the dataset's input params. */
  lv_status (*create)(const lv_params *task_p, const lv_params *input_p, lv_varstore *vs, lv_task **out);
  /* Returns false when the graph recorded an error. */
  bool (*fprop)(lv_task *t, lv_graph *g, lv_batch *b, bool is_eval, int64_t step, lv_metrics *m);
  /* Frees what create made, and the decoder state (lv_task_free_decode_state). */
  void (*destroy)(lv_task *t);
  /* Optional (NULL: none). Called by the evaler with the first eval batch of each
   * checkpoint and that batch's metrics, to write the task's own summaries (the
   * classifier's captioned images; Lingvo's task-side _AddSummary). The batch is in host
   * memory; metric and per-example tensors are read through host copies. */
  lv_status (*eval_summaries)(lv_task *t, const lv_batch *b, const lv_metrics *m, int64_t step, lv_events_writer *ev);

  /* ---- The decoder job (bin/decoder; Lingvo's CreateDecoderMetrics / Decode /
   * PostProcessDecodeOut). All NULL for a task that does not decode; the runner knows
   * nothing else of a task's decoding. ---- */
  /* Once per decoder job, before anything else below: reads what decoding needs from the
   * whole experiment cfg (search params, the tokenizer of input.tokenizer, ...) into the
   * task's decode_state. Errors name the key and say how to fix it. */
  lv_status (*decoder_setup)(lv_task *t, const lv_params *cfg);
  /* Adds the task's decoder metrics (corpus_bleu, num_samples_in_batch, ...) to an empty
   * set; called once per checkpoint. */
  lv_status (*create_decoder_metrics)(lv_task *t, lv_metric_set *metrics);
  /* Decodes batch b (host memory, as the input gave it: the task copies onto g what it
   * needs, and may decode in parts, resetting g between them) in eval mode, leaving in
   * out whatever post-processing reads (e.g. "topk_ids", "topk_lens", "topk_scores" and
   * the batch's reference tensors). */
  lv_status (*decode)(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *out);
  /* Reads dec_out (through host copies), updates the metrics and appends one key/value
   * pair per example to out (the decoder_out file's entries). */
  lv_status (*post_process_decode_out)(lv_task *t, const lv_decode_out *dec_out, lv_metric_set *metrics,
                                       lv_kv_list *out);
  /* Optional: the log line's text for a checkpoint's metrics (*headline, e.g.
   * "corpus_bleu: 0.2, sacrebleu: 20.1") and an optional longer report (*detail, NULL
   * for none); both malloc'd. Without it the runner lists every summary value. */
  lv_status (*decoder_report)(lv_task *t, const lv_metric_set *metrics, char **headline, char **detail);

  /* ---- Interactive decoding, kinds of work on lines (the library's calls and
   * bin/decoder's --<kind> flags; which kinds there are is the tasks' and src/api/'s
   * business: the runners pass a kind on); NULL for a task that has none. ---- */
  /* What the task does to each line, for the start-up log: a verb ("translating") and a
   * note appended to the line ("" for none). A kind the task does not take is
   * LV_ERR_INVALID saying which kinds it takes. */
  lv_status (*line_describe)(lv_task *t, const char *kind, const char **verb, const char **note);
  /* One input line (its bytes; lineno counts from 1) into a batch of one example, whose
   * tensors the task owns until its next call; *empty: nothing to decode (the output line
   * is empty; a line the task cannot read is logged and counted as empty). */
  lv_status (*line_to_batch)(lv_task *t, const char *kind, const char *line, size_t len, int64_t lineno,
                             lv_batch *b, bool *empty);
  /* The decoded example of a one-example batch as its output line (malloc'd). */
  lv_status (*decode_out_to_line)(lv_task *t, const lv_decode_out *dec_out, char **line);
  /* Optional, instead of line_to_batch: n input lines (n >= 1, up to the caller's batch
   * size) into one batch of the lines that have something to decode, in input order (the
   * task's tensors until its next call; the task keeps which row is which line); *empty:
   * none has. decode_out_nbest then gives each line's hypotheses. Each row is masked by
   * its paddings, but a model's strided SAME convolutions align frames by the padded
   * length, so a row may decode otherwise than alone. */
  lv_status (*lines_to_batch)(lv_task *t, const char *kind, const char *const *lines, const size_t *lens, int n,
                              int64_t first_lineno, lv_batch *b, bool *empty);
  /* Optional, with lines_to_batch: the most lines of kind one batch may hold within the
   * task's memory budget (0: no limit); a larger --decode_batch_size is cut to it. */
  int (*line_batch_limit)(lv_task *t, const char *kind);
  /* Optional: the n-best of input item i of a decoded batch (0 for line_to_batch's
   * one-example batch; the line's index for lines_to_batch): up to k hyps, best first, as
   * texts (malloc'd) and scores [k]; *n how many (0: the item had nothing to decode;
   * dec_out is NULL when no item had). An item that could not be read (a file) is its
   * error. The library API's top-k results (src/api/). */
  lv_status (*decode_out_nbest)(lv_task *t, const lv_decode_out *dec_out, int i, int k, char **texts, float *scores,
                                int *n);
  /* Optional: the seconds of audio input item i of the last batch held (0: none), for a
   * caller's real-time factor (the library's lv_nbest.seconds). */
  double (*item_seconds)(lv_task *t, int i);
  /* Optional: a task that classifies images: the class probabilities of host batch b,
   * whose "raw" is uint8 images [N, H, W, C] (the experiment's data shape; another is an
   * error naming input.data_shape), in eval mode on g, as a new host tensor *probs
   * [N, classes] (the library's lv_classify). */
  lv_status (*classify)(lv_task *t, lv_graph *g, const lv_batch *b, lv_tensor **probs);
  /* Optional: instead of lines_to_batch, n utterances of 16 kHz mono float samples
   * (samples[i], lens[i] of them) into one batch as lines_to_batch makes it from files
   * (decode_out_nbest's items are the utterances). */
  lv_status (*samples_to_batch)(lv_task *t, const float *const *samples, const int64_t *lens, int n, lv_batch *b,
                                bool *empty);

  /* For tasks that decode with search/seq_decode.h's beam search: their incremental
   * decoder (NULL otherwise). Only models/ reads it. */
  const lv_seq_decode_ops *seq_decode;
} lv_task_class;

struct lv_task {
  const lv_task_class *cls;
  const lv_params *p;
  /* The decoder job's state, made by the class's decoder_setup and freed with
   * decode_state_free by lv_task_free_decode_state (NULL outside a decoder job). */
  void *decode_state;
  void (*decode_state_free)(void *state);
  /* The scorers the task's beam searches add to its decoder's, in order (n_scorers; e.g.
   * fused language models), set with lv_task_set_scorers by whoever sets the task up for
   * decoding; not owned. */
  const lv_scorer *const *scorers;
  int n_scorers;
};

/* Makes t's beam searches add scorers [n] (kept, not owned; n 0: none). A task that does
 * not decode with search/seq_decode.h's beam search takes none (LV_ERR_INVALID naming
 * what names the scorers). */
lv_status lv_task_set_scorers(lv_task *t, const lv_scorer *const *scorers, int n, const char *what);

/* Frees t's decode state, if any (each class's destroy calls it). */
void lv_task_free_decode_state(lv_task *t);

/* Brings host batch b into g's step: every numeric tensor copied onto g's device
 * (lv_graph_from_host), string tensors passed through as the batch's host tensors, under
 * the same keys, into out (cleared first; same size). The error is the graph's (arena,
 * device) or the map's. */
lv_status lv_batch_to_graph(lv_graph *g, const lv_batch *b, lv_batch *out);

/* Whether the task class has a decoder job (decode and post_process_decode_out). */
bool lv_task_class_decodes(const lv_task_class *c);
/* One decoder step of batch b (host memory): resets g in eval mode, runs the task's
 * decode and its post_process_decode_out, which updates metrics and appends to out. A
 * task without a decode path is an LV_ERR_INVALID error naming its class. */
lv_status lv_task_decode_batch(lv_task *t, lv_graph *g, const lv_batch *b, lv_metric_set *metrics, lv_kv_list *out);
/* The task's decode of host batch b in eval mode on a reset g into *dec_out (initialized
 * here, also on error; the caller frees it). */
lv_status lv_task_decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *dec_out);
/* One decode of a one-example batch made by the task's line_to_batch into *line. */
lv_status lv_task_decode_line(lv_task *t, lv_graph *g, const lv_batch *b, char **line);

/* BaseTask._UpdateVnConfig: the weight-noise settings of the task's scope (the root of
 * vs, which every layer without a vn of its own inherits): with train.vn_std > 0 and
 * vn.global_vn or vn.per_step_vn, scale vn_std from train.vn_start_step (an error if
 * task.vn.scale or task.vn.start_step is set, as in Lingvo); otherwise off. seed: vn.seed
 * when it is None. Call before the task creates its layers. */
lv_status lv_task_update_vn_config(const lv_params *task_p, lv_varstore *vs, uint64_t seed);
/* BaseTask params shared by every task: layer base + train + eval (§5.2, §5.3). */
lv_params *lv_task_base_params(const char *cls);
/* The learning-rate schedule of Lingvo's asr.model.AsrModel and lm.model.LanguageModel
 * Params(): PiecewiseConstantSchedule, boundaries [350000, 500000, 600000], values
 * [1, 0.1, 0.01, 0.001], set as train_p's lr_schedule. */
void lv_task_set_piecewise_lr_schedule(lv_params *train_p);
const lv_task_class *lv_task_class_find(const char *cls);
/* Registers every task class (tasks.def) and their dependencies (layers, optimizers). */
void lv_tasks_register_all(void);
/* Adds a task class at run time, as a line of tasks.def would (a program or test that
 * links the library with a task of its own). A class name already known is an error. */
lv_status lv_task_class_register(const lv_task_class *c);

#endif
