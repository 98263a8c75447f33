#include "metrics/metrics.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/log.h"

const char *const lv_metric_kind_names[LV_METRIC_KIND_COUNT] = {"AverageMetric", "UniqueAverageMetric", "F1Metric",
                                                                "MCCMetric", "CorpusBleuMetric", "CustomMetric"};
_Static_assert(LV_ARRAY_LEN(lv_metric_kind_names) == LV_METRIC_KIND_COUNT, "one name per metric kind");

/* The longest suffix a summary tag adds to a metric's name. */
#define TAG_SUFFIX_MAX ((int)sizeof "/total_weight")

typedef struct unique_key {
  char *key;
  double value;
  bool mismatch;
} unique_key;

struct lv_metric {
  lv_metric_kind kind;
  double total_value, total_weight; /* Average, UniqueAverage */
  double tp, fp, fn, tn;            /* F1, MCC */
  lv_bleu_scorer bleu;              /* CorpusBleu */
  /* UniqueAverage: keys in first-seen order, and an open-addressing table of
   * index + 1 (0 = empty slot) over them. */
  bool mismatch_is_error;
  unique_key *keys;
  int64_t nkeys, cap_keys, nmismatch;
  int64_t *slots;
  int64_t nslots;
  const lv_metric_custom_ops *custom; /* Custom */
  void *ctx;
};

static lv_metric *metric_new(lv_metric_kind kind) {
  lv_metric *m = calloc(1, sizeof *m);
  if (m) m->kind = kind;
  return m;
}

lv_metric *lv_metric_average_new(void) { return metric_new(LV_METRIC_AVERAGE); }
lv_metric *lv_metric_f1_new(void) { return metric_new(LV_METRIC_F1); }
lv_metric *lv_metric_mcc_new(void) { return metric_new(LV_METRIC_MCC); }

lv_metric *lv_metric_unique_average_new(bool mismatch_is_error) {
  lv_metric *m = metric_new(LV_METRIC_UNIQUE_AVERAGE);
  if (m) m->mismatch_is_error = mismatch_is_error;
  return m;
}

lv_metric *lv_metric_corpus_bleu_new(lv_bleu_separator sep) {
  lv_metric *m = metric_new(LV_METRIC_CORPUS_BLEU);
  if (!m) return NULL;
  lv_status s = lv_bleu_init(&m->bleu, 4, sep);
  LV_ASSERTF(!s, "%s", lv_status_msg(s));
  return m;
}

lv_metric *lv_metric_custom_new(const lv_metric_custom_ops *ops, void *ctx) {
  lv_metric *m = metric_new(LV_METRIC_CUSTOM);
  if (!m) {
    ops->free(ctx);
    return NULL;
  }
  m->custom = ops;
  m->ctx = ctx;
  return m;
}

void *lv_metric_custom_ctx(lv_metric *m, const lv_metric_custom_ops *ops) {
  LV_ASSERTF(m->kind == LV_METRIC_CUSTOM && m->custom == ops, "lv_metric_custom_ctx on a %s",
             m->kind == LV_METRIC_CUSTOM ? m->custom->kind_name : lv_metric_kind_names[m->kind]);
  return m->ctx;
}

void lv_metric_free(lv_metric *m) {
  if (!m) return;
  if (m->custom) m->custom->free(m->ctx);
  for (int64_t i = 0; i < m->nkeys; i++) free(m->keys[i].key);
  free(m->keys);
  free(m->slots);
  free(m);
}

lv_metric_kind lv_metric_kind_of(const lv_metric *m) { return m->kind; }

static void expect_kind(const lv_metric *m, lv_metric_kind a, lv_metric_kind b, const char *fn) {
  LV_ASSERTF(m->kind == a || m->kind == b, "%s on a %s", fn, lv_metric_kind_names[m->kind]);
}

static lv_status check_weight(double weight) {
  if (!(weight < 0.0)) return NULL; /* Lingvo lets a NaN weight through */
  return lv_status_make(LV_ERR_INVALID, "weight must be non-negative.  Got: %f", weight);
}

static void accumulate(lv_metric *m, double value, double weight) {
  m->total_value += value * weight;
  m->total_weight += weight;
}

lv_status lv_metric_average_update(lv_metric *m, double value, double weight) {
  expect_kind(m, LV_METRIC_AVERAGE, LV_METRIC_AVERAGE, __func__);
  LV_TRY(check_weight(weight));
  accumulate(m, value, weight);
  return NULL;
}

double lv_metric_total_value(const lv_metric *m) {
  expect_kind(m, LV_METRIC_AVERAGE, LV_METRIC_UNIQUE_AVERAGE, __func__);
  return m->total_value;
}

double lv_metric_total_weight(const lv_metric *m) {
  expect_kind(m, LV_METRIC_AVERAGE, LV_METRIC_UNIQUE_AVERAGE, __func__);
  return m->total_weight;
}

void lv_metric_set_totals(lv_metric *m, double total_value, double total_weight) {
  expect_kind(m, LV_METRIC_AVERAGE, LV_METRIC_UNIQUE_AVERAGE, __func__);
  m->total_value = total_value;
  m->total_weight = total_weight;
}

/* The slot holding key, or the empty slot where it would go. nslots is a power of 2. */
static int64_t find_slot(const lv_metric *m, const char *key) {
  int64_t mask = m->nslots - 1, i = (int64_t)(lv_fnv1a(key) & (uint64_t)mask);
  while (m->slots[i] && strcmp(m->keys[m->slots[i] - 1].key, key)) i = (i + 1) & mask;
  return i;
}

/* Keeps the table at most half full. */
static lv_status grow_table(lv_metric *m) {
  if (m->nkeys + 1 <= m->cap_keys && 2 * (m->nkeys + 1) <= m->nslots) return NULL;
  int64_t cap = m->cap_keys ? 2 * m->cap_keys : 64;
  unique_key *keys = realloc(m->keys, (size_t)cap * sizeof *keys);
  if (!keys) return lv_status_make(LV_ERR_RESOURCE, "UniqueAverageMetric: out of memory for %lld keys", (long long)cap);
  m->keys = keys;
  m->cap_keys = cap;
  int64_t *slots = calloc((size_t)(2 * cap), sizeof *slots);
  if (!slots) return lv_status_make(LV_ERR_RESOURCE, "UniqueAverageMetric: out of memory for %lld keys", (long long)cap);
  free(m->slots);
  m->slots = slots;
  m->nslots = 2 * cap;
  for (int64_t k = 0; k < m->nkeys; k++) m->slots[find_slot(m, m->keys[k].key)] = k + 1;
  return NULL;
}

/* np.isclose(a, b) with its defaults rtol=1e-5, atol=1e-8. */
static bool is_close(double a, double b) {
  if (a == b) return true;
  return fabs(a - b) <= 1e-8 + 1e-5 * fabs(b);
}

lv_status lv_metric_unique_update(lv_metric *m, const char *key, double value, double weight) {
  expect_kind(m, LV_METRIC_UNIQUE_AVERAGE, LV_METRIC_UNIQUE_AVERAGE, __func__);
  if (m->nslots) {
    int64_t at = m->slots[find_slot(m, key)];
    if (at) {
      unique_key *k = &m->keys[at - 1];
      if (!is_close(k->value, value) && !k->mismatch) {
        k->mismatch = true;
        m->nmismatch++;
      }
      return NULL;
    }
  }
  LV_TRY(check_weight(weight));
  LV_TRY(grow_table(m));
  char *copy = strdup(key);
  if (!copy) return lv_status_make(LV_ERR_RESOURCE, "UniqueAverageMetric: out of memory for key %s", key);
  m->keys[m->nkeys] = (unique_key){copy, value, false};
  m->slots[find_slot(m, key)] = ++m->nkeys;
  accumulate(m, value, weight);
  return NULL;
}

int64_t lv_metric_unique_count(const lv_metric *m) {
  expect_kind(m, LV_METRIC_UNIQUE_AVERAGE, LV_METRIC_UNIQUE_AVERAGE, __func__);
  return m->nkeys;
}

void lv_metric_true_positive(lv_metric *m, double count) {
  expect_kind(m, LV_METRIC_F1, LV_METRIC_MCC, __func__);
  m->tp += count;
}

void lv_metric_false_positive(lv_metric *m, double count) {
  expect_kind(m, LV_METRIC_F1, LV_METRIC_MCC, __func__);
  m->fp += count;
}

void lv_metric_false_negative(lv_metric *m, double count) {
  expect_kind(m, LV_METRIC_F1, LV_METRIC_MCC, __func__);
  m->fn += count;
}

void lv_metric_true_negative(lv_metric *m, double count) {
  expect_kind(m, LV_METRIC_MCC, LV_METRIC_MCC, __func__);
  m->tn += count;
}

double lv_metric_precision(const lv_metric *m) {
  expect_kind(m, LV_METRIC_F1, LV_METRIC_MCC, __func__);
  return m->tp + m->fp > 0 ? m->tp / (m->tp + m->fp) : 0.0;
}

double lv_metric_recall(const lv_metric *m) {
  expect_kind(m, LV_METRIC_F1, LV_METRIC_MCC, __func__);
  return m->tp + m->fn > 0 ? m->tp / (m->tp + m->fn) : 0.0;
}

lv_status lv_metric_bleu_update(lv_metric *m, const char *ref, const char *hyp) {
  expect_kind(m, LV_METRIC_CORPUS_BLEU, LV_METRIC_CORPUS_BLEU, __func__);
  return lv_bleu_add_sentence(&m->bleu, ref, hyp);
}

const lv_bleu_scorer *lv_metric_bleu_scorer(const lv_metric *m) {
  expect_kind(m, LV_METRIC_CORPUS_BLEU, LV_METRIC_CORPUS_BLEU, __func__);
  return &m->bleu;
}

/* "'a', 'b'" for the first keys whose duplicates mismatched (caller frees). */
static char *mismatch_list(const lv_metric *m) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  int shown = 0;
  for (int64_t i = 0; i < m->nkeys; i++) {
    if (!m->keys[i].mismatch) continue;
    if (shown == 10) {
      fprintf(f, " and %lld more", (long long)(m->nmismatch - shown));
      break;
    }
    fprintf(f, "%s'%s'", shown ? ", " : "", m->keys[i].key);
    shown++;
  }
  fclose(f);
  return text;
}

lv_status lv_metric_value(const lv_metric *m, double *value) {
  switch (m->kind) {
    case LV_METRIC_UNIQUE_AVERAGE:
      if (m->nmismatch) {
        char *keys = mismatch_list(m);
        const char *msg = "UniqueAverageMetric received duplicate keys with different values";
        lv_status s = NULL;
        if (m->mismatch_is_error) s = lv_status_make(LV_ERR_INVALID, "%s: {%s}", msg, keys ? keys : "");
        else lv_warn("%s: {%s}", msg, keys ? keys : "");
        free(keys);
        if (s) return s;
      }
      /* fall through */
    case LV_METRIC_AVERAGE:
      *value = m->total_weight > 0 ? m->total_value / m->total_weight : 0.0;
      return NULL;
    case LV_METRIC_F1: {
      double p = lv_metric_precision(m), r = lv_metric_recall(m);
      *value = p + r > 0 ? 2.0 * p * r / (p + r) : 0.0;
      return NULL;
    }
    case LV_METRIC_MCC: {
      double den = (m->tp + m->fp) * (m->tp + m->fn) * (m->tn + m->fp) * (m->tn + m->fn);
      *value = den > 0.0 ? (m->tp * m->tn - m->fp * m->fn) / sqrt(den) : 0.0;
      return NULL;
    }
    case LV_METRIC_CORPUS_BLEU:
      *value = lv_bleu_score(&m->bleu);
      return NULL;
    case LV_METRIC_CUSTOM:
      return m->custom->value(m->ctx, value);
    case LV_METRIC_KIND_COUNT:
      break;
  }
  LV_ASSERTF(false, "metric kind %d", (int)m->kind);
  return NULL;
}

static void summary_value(lv_summary_value *v, const char *name, const char *suffix, double value) {
  snprintf(v->tag, sizeof v->tag, "%s%s", name, suffix);
  v->value = value;
}

int lv_metric_summary_count(const lv_metric *m) {
  if (m->kind == LV_METRIC_CUSTOM) return m->custom->summary_count(m->ctx);
  return m->kind == LV_METRIC_UNIQUE_AVERAGE ? 4 : 1;
}

lv_status lv_metric_summary(const lv_metric *m, const char *name, lv_summary_value *out, int *n) {
  *n = 0;
  if (m->kind == LV_METRIC_CUSTOM) {
    LV_TRY(m->custom->summary(m->ctx, name, out));
    *n = m->custom->summary_count(m->ctx);
    return NULL;
  }
  if (strlen(name) + TAG_SUFFIX_MAX > LV_METRIC_TAG_MAX)
    return lv_status_make(LV_ERR_INVALID, "metric name %s: longer than %d characters", name,
                          LV_METRIC_TAG_MAX - TAG_SUFFIX_MAX);
  double v;
  LV_TRY(lv_metric_value(m, &v));
  summary_value(&out[(*n)++], name, "", v);
  if (m->kind == LV_METRIC_UNIQUE_AVERAGE) {
    summary_value(&out[(*n)++], name, "/total_count", (double)m->nkeys);
    summary_value(&out[(*n)++], name, "/total_value", m->total_value);
    summary_value(&out[(*n)++], name, "/total_weight", m->total_weight);
  }
  return NULL;
}

typedef struct named_metric {
  char *name;
  lv_metric *m;
} named_metric;

struct lv_metric_set {
  named_metric *items; /* sorted by name (strcmp: code-point order, as Python's sorted) */
  int n, cap;
};

lv_metric_set *lv_metric_set_new(void) { return calloc(1, sizeof(lv_metric_set)); }

void lv_metric_set_free(lv_metric_set *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) {
    free(s->items[i].name);
    lv_metric_free(s->items[i].m);
  }
  free(s->items);
  free(s);
}

/* First index whose name is >= name. */
static int lower_bound(const lv_metric_set *s, const char *name) {
  int lo = 0, hi = s->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (strcmp(s->items[mid].name, name) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

lv_status lv_metric_set_add(lv_metric_set *s, const char *name, lv_metric *m) {
  if (!m) return lv_status_make(LV_ERR_RESOURCE, "metric %s: out of memory", name);
  lv_status st = NULL;
  int at = lower_bound(s, name);
  if (strlen(name) + TAG_SUFFIX_MAX > LV_METRIC_TAG_MAX)
    st = lv_status_make(LV_ERR_INVALID, "metric name %s: longer than %d characters", name,
                        LV_METRIC_TAG_MAX - TAG_SUFFIX_MAX);
  else if (at < s->n && !strcmp(s->items[at].name, name))
    st = lv_status_make(LV_ERR_INVALID, "metric %s: defined twice", name);
  if (!st && s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    named_metric *items = realloc(s->items, (size_t)cap * sizeof *items);
    if (items) {
      s->items = items;
      s->cap = cap;
    } else {
      st = lv_status_make(LV_ERR_RESOURCE, "metric %s: out of memory", name);
    }
  }
  char *copy = st ? NULL : strdup(name);
  if (!st && !copy) st = lv_status_make(LV_ERR_RESOURCE, "metric %s: out of memory", name);
  if (st) {
    lv_metric_free(m);
    return st;
  }
  memmove(&s->items[at + 1], &s->items[at], (size_t)(s->n - at) * sizeof *s->items);
  s->items[at] = (named_metric){copy, m};
  s->n++;
  return NULL;
}

lv_metric *lv_metric_set_get(const lv_metric_set *s, const char *name) {
  int at = lower_bound(s, name);
  return at < s->n && !strcmp(s->items[at].name, name) ? s->items[at].m : NULL;
}

int lv_metric_set_count(const lv_metric_set *s) { return s->n; }

const char *lv_metric_set_name(const lv_metric_set *s, int i) {
  LV_ASSERT(i >= 0 && i < s->n);
  return s->items[i].name;
}

lv_metric *lv_metric_set_at(const lv_metric_set *s, int i) {
  LV_ASSERT(i >= 0 && i < s->n);
  return s->items[i].m;
}

lv_status lv_metric_set_summaries(const lv_metric_set *s, lv_summary_value **out, int *n) {
  *out = NULL;
  *n = 0;
  size_t total = 1;
  for (int i = 0; i < s->n; i++) total += (size_t)lv_metric_summary_count(s->items[i].m);
  lv_summary_value *v = malloc(total * sizeof *v);
  if (!v) return lv_status_make(LV_ERR_RESOURCE, "metric summaries: out of memory");
  int k = 0;
  for (int i = 0; i < s->n; i++) {
    int got = 0;
    lv_status st = lv_metric_summary(s->items[i].m, s->items[i].name, v + k, &got);
    if (st) {
      free(v);
      return lv_status_wrap(st, "metric %s", s->items[i].name);
    }
    k += got;
  }
  *out = v;
  *n = k;
  return NULL;
}

char *lv_summary_score_text(const lv_summary_value *v, int n) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  for (int i = 0; i < n; i++) fprintf(f, "%s%s: %.8g", i ? "\n" : "", v[i].tag, v[i].value);
  fclose(f);
  return text;
}
