/* Host-side metric objects (Lingvo's lingvo/core/metrics.py): what an evaler or decoder
 * accumulates over a dataset and reports once per checkpoint. Not tensors; not the
 * per-step (value, weight) pairs a task's fprop fills (lv_metrics in task.h).
 *
 *   AverageMetric        update(value, weight): value = sum(v*w) / sum(w), 0 if sum(w) == 0;
 *                        a negative weight is an error; totals readable and settable.
 *   UniqueAverageMetric  update(key, value, weight): only a key's first update counts; a
 *                        later one with a value not np.isclose to the first is recorded,
 *                        and value() is then an error naming the keys (or only a warning
 *                        with mismatch_is_error=false); summary adds name/total_count,
 *                        name/total_value, name/total_weight.
 *   F1Metric             true/false positives and false negatives: 2PR/(P+R), with P, R
 *                        and F1 0 where their denominators are 0.
 *   MCCMetric            F1Metric plus true negatives: (tp*tn-fp*fn)/sqrt(...) or 0.
 *   CorpusBleuMetric     update(ref, hyp) strings: Lingvo's BleuScorer (metrics/bleu.h).
 *   a custom metric      an accumulator a task defines (sacrebleu, the punctuator's marks):
 *                        its owner updates it through its context; it gives its value and
 *                        any number of summary values through its ops.
 *
 * Each lv_metric is owned by whoever created it, or by the lv_metric_set it was added to.
 * Updating a metric with the update function of another kind is a programmer error. */
#ifndef LV_METRICS_METRICS_H
#define LV_METRICS_METRICS_H

#include <stdbool.h>

#include "base/status.h"
#include "metrics/bleu.h"

typedef enum lv_metric_kind {
  LV_METRIC_AVERAGE,
  LV_METRIC_UNIQUE_AVERAGE,
  LV_METRIC_F1,
  LV_METRIC_MCC,
  LV_METRIC_CORPUS_BLEU,
  LV_METRIC_CUSTOM,
  LV_METRIC_KIND_COUNT
} lv_metric_kind;

/* Lingvo's class names: "AverageMetric", "UniqueAverageMetric", ... */
extern const char *const lv_metric_kind_names[LV_METRIC_KIND_COUNT];

typedef struct lv_metric lv_metric;

/* Constructors return NULL only when out of memory. */
lv_metric *lv_metric_average_new(void);
lv_metric *lv_metric_unique_average_new(bool mismatch_is_error);
lv_metric *lv_metric_f1_new(void);
lv_metric *lv_metric_mcc_new(void);
/* Lingvo's CorpusBleuMetric(separator_type=sep): BleuScorer(max_ngram=4, sep). */
lv_metric *lv_metric_corpus_bleu_new(lv_bleu_separator sep);
void lv_metric_free(lv_metric *m);
lv_metric_kind lv_metric_kind_of(const lv_metric *m);

/* AverageMetric (also UniqueAverageMetric's totals). weight < 0 is LV_ERR_INVALID
 * "weight must be non-negative.  Got: <w>" and changes nothing. */
lv_status lv_metric_average_update(lv_metric *m, double value, double weight);
double lv_metric_total_value(const lv_metric *m);
double lv_metric_total_weight(const lv_metric *m);
/* Lingvo's settable total_value / total_weight (e.g. total_weight = 1 to report a sum). */
void lv_metric_set_totals(lv_metric *m, double total_value, double total_weight);

/* UniqueAverageMetric. A bad weight on a key's first update is an error and the key is
 * not recorded (Lingvo records the key before AverageMetric rejects the weight). */
lv_status lv_metric_unique_update(lv_metric *m, const char *key, double value, double weight);
/* Distinct keys seen (the summary's total_count). */
int64_t lv_metric_unique_count(const lv_metric *m);

/* F1Metric and MCCMetric; true negatives only for MCC. Lingvo's default count is 1. */
void lv_metric_true_positive(lv_metric *m, double count);
void lv_metric_false_positive(lv_metric *m, double count);
void lv_metric_false_negative(lv_metric *m, double count);
void lv_metric_true_negative(lv_metric *m, double count);
/* F1Metric's precision and recall (0 where tp+fp, resp. tp+fn, is 0). */
double lv_metric_precision(const lv_metric *m);
double lv_metric_recall(const lv_metric *m);

/* CorpusBleuMetric. */
lv_status lv_metric_bleu_update(lv_metric *m, const char *ref, const char *hyp);
/* Its scorer (counts, separator: what Lingvo's .unsegmenter property reaches). */
const lv_bleu_scorer *lv_metric_bleu_scorer(const lv_metric *m);

/* The metric's value. Only a UniqueAverageMetric with mismatching duplicates and
 * mismatch_is_error fails (LV_ERR_INVALID naming the keys); without it, a warning is
 * logged and the average returned. */
lv_status lv_metric_value(const lv_metric *m, double *value);

#define LV_METRIC_SUMMARY_MAX 4
#define LV_METRIC_TAG_MAX 128
typedef struct lv_summary_value {
  char tag[LV_METRIC_TAG_MAX];
  double value;
} lv_summary_value;

/* A custom metric's behaviour. ctx is what lv_metric_custom_new was given. */
typedef struct lv_metric_custom_ops {
  const char *kind_name; /* for messages, e.g. "SacreBleuMetric" */
  lv_status (*value)(const void *ctx, double *value);
  /* How many summary values it writes, and the values for metric `name` (tags of its
   * own choosing, at most LV_METRIC_TAG_MAX - 1 bytes each). */
  int (*summary_count)(const void *ctx);
  lv_status (*summary)(const void *ctx, const char *name, lv_summary_value *out);
  void (*free)(void *ctx);
} lv_metric_custom_ops;
/* Takes ctx (freed with ops->free when the metric is, also when this returns NULL). */
lv_metric *lv_metric_custom_new(const lv_metric_custom_ops *ops, void *ctx);
/* The context of a custom metric made with ops (a programmer error for another). */
void *lv_metric_custom_ctx(lv_metric *m, const lv_metric_custom_ops *ops);

/* Summary(name): the scalar (tag, value) pairs Lingvo writes for the metric, in its
 * order: name itself, then for UniqueAverageMetric name/total_count, name/total_value,
 * name/total_weight. */
/* How many values lv_metric_summary writes (at most LV_METRIC_SUMMARY_MAX but for a
 * custom metric). */
int lv_metric_summary_count(const lv_metric *m);
/* out has room for lv_metric_summary_count(m); *n is set to the count. A name too long for a
 * tag is LV_ERR_INVALID. */
lv_status lv_metric_summary(const lv_metric *m, const char *name, lv_summary_value *out, int *n);

/* A task's named metrics (Lingvo's dict from CreateDecoderMetrics): kept sorted by name,
 * which is the order Lingvo writes summaries and score-%08d.txt lines in. */
typedef struct lv_metric_set lv_metric_set;

lv_metric_set *lv_metric_set_new(void);
/* Frees the set and every metric in it. */
void lv_metric_set_free(lv_metric_set *s);
/* Adds m under name, taking ownership of m even when it fails: a NULL m (a constructor
 * out of memory) is LV_ERR_RESOURCE, a name already there or too long LV_ERR_INVALID. */
lv_status lv_metric_set_add(lv_metric_set *s, const char *name, lv_metric *m);
/* The metric named, or NULL. */
lv_metric *lv_metric_set_get(const lv_metric_set *s, const char *name);
int lv_metric_set_count(const lv_metric_set *s);
/* i-th metric in name order, 0 <= i < count. */
const char *lv_metric_set_name(const lv_metric_set *s, int i);
lv_metric *lv_metric_set_at(const lv_metric_set *s, int i);
/* Every metric's summary values, metrics in name order: a new array (caller frees) of *n
 * values. Fails as lv_metric_value fails, naming the metric. */
lv_status lv_metric_set_summaries(const lv_metric_set *s, lv_summary_value **out, int *n);
/* The text of score-%08d.txt for those values: "tag: %.8g" lines joined by "\n" (no final
 * newline), as Lingvo's _WriteSummaries writes it. Caller frees. */
char *lv_summary_score_text(const lv_summary_value *v, int n);

#endif
