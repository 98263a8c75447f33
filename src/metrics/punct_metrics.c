/* Punctuator decoder metrics: see punct_metrics.h for the definitions. */
#include "metrics/punct_metrics.h"

#include "metrics/metrics.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const char *const lv_punct_class_names[LV_PUNCT_CLASS_COUNT] = {",", ".", "?", "!", ";", ":", "\"", "marks",
                                                                "Capital"};
_Static_assert(LV_PUNCT_CLASS_COUNT == 9, "lv_punct_class_names");

#define NMARKS LV_PUNCT_ALL_MARKS
static const char kMarks[NMARKS + 1] = ",.?!;:\"";
/* Python's string.punctuation: deleted from words, as PunctuatorInput's Normalize does. */
static const char kPunct[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

static bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static bool is_punct(unsigned char c) { return c != 0 && strchr(kPunct, c) != NULL; }

/* One side of a pair: its words (lower-cased, punctuation deleted, in `text`), whether
 * each is capitalized, and the marks of each gap. */
typedef struct side {
  char *text;      /* the words' bytes, back to back */
  int64_t *start;  /* [n] offset of word i in text */
  int64_t *len;    /* [n] */
  bool *cap;       /* [n] */
  int32_t *gaps;   /* [(n + 1) * NMARKS] marks of gap g (0: before word 0) */
  int64_t n;
} side;

static void side_free(side *s) {
  free(s->text);
  free(s->start);
  free(s->len);
  free(s->cap);
  free(s->gaps);
}

static lv_status side_parse(const char *str, side *s) {
  size_t n = strlen(str);
  memset(s, 0, sizeof *s);
  /* at most one word per two bytes plus one; sized by n + 1 for simplicity */
  s->text = malloc(n + 1);
  s->start = malloc((n + 1) * sizeof *s->start);
  s->len = malloc((n + 1) * sizeof *s->len);
  s->cap = malloc((n + 1) * sizeof *s->cap);
  s->gaps = calloc((n + 2) * NMARKS, sizeof *s->gaps);
  if (!s->text || !s->start || !s->len || !s->cap || !s->gaps) {
    side_free(s);
    return lv_status_make(LV_ERR_RESOURCE, "punct_metrics: out of memory for a %zu-byte sentence", n);
  }
  int64_t t = 0;
  bool in_word = false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)str[i];
    if (is_space(c)) {
      in_word = false;
    } else if (is_punct(c)) {
      const char *k = strchr(kMarks, c);
      if (k) s->gaps[s->n * NMARKS + (k - kMarks)]++;
    } else {
      if (!in_word) {
        s->start[s->n] = t;
        s->len[s->n] = 0;
        s->cap[s->n] = c >= 'A' && c <= 'Z';
        s->n++;
        in_word = true;
      }
      s->text[t++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      s->len[s->n - 1]++;
    }
  }
  return NULL;
}

static bool word_eq(const side *a, int64_t i, const side *b, int64_t j) {
  return a->len[i] == b->len[j] && memcmp(a->text + a->start[i], b->text + b->start[j], (size_t)a->len[i]) == 0;
}

/* al[i] = the ref word aligned to hyp word i, or -1: common prefix and suffix, then a
 * longest common subsequence of the middle when its table is small enough. */
static lv_status align_words(const side *h, const side *r, int64_t *al) {
  for (int64_t i = 0; i < h->n; i++) al[i] = -1;
  int64_t p = 0;
  while (p < h->n && p < r->n && word_eq(h, p, r, p)) {
    al[p] = p;
    p++;
  }
  int64_t s = 0;
  while (s < h->n - p && s < r->n - p && word_eq(h, h->n - 1 - s, r, r->n - 1 - s)) {
    al[h->n - 1 - s] = r->n - 1 - s;
    s++;
  }
  int64_t hn = h->n - p - s, rn = r->n - p - s;
  if (hn == 0 || rn == 0 || (hn + 1) * (rn + 1) > LV_PUNCT_ALIGN_MAX_CELLS) return NULL;
  int32_t *L = calloc((size_t)((hn + 1) * (rn + 1)), sizeof *L); /* [hn + 1, rn + 1] LCS of suffixes */
  if (!L) return lv_status_make(LV_ERR_RESOURCE, "punct_metrics: out of memory aligning words");
#define LCS(i, j) L[(i) * (rn + 1) + (j)]
  for (int64_t i = hn - 1; i >= 0; i--)
    for (int64_t j = rn - 1; j >= 0; j--)
      LCS(i, j) = word_eq(h, p + i, r, p + j) ? LCS(i + 1, j + 1) + 1
                                               : (LCS(i + 1, j) >= LCS(i, j + 1) ? LCS(i + 1, j) : LCS(i, j + 1));
  for (int64_t i = 0, j = 0; i < hn && j < rn;) {
    if (word_eq(h, p + i, r, p + j) && LCS(i, j) == LCS(i + 1, j + 1) + 1) {
      al[p + i] = p + j;
      i++, j++;
    } else if (LCS(i + 1, j) >= LCS(i, j + 1)) {
      i++;
    } else {
      j++;
    }
  }
#undef LCS
  free(L);
  return NULL;
}

/* Equal up to ASCII white space (the token sequences of str.split()). */
static bool same_tokens(const char *a, const char *b) {
  for (;;) {
    while (is_space((unsigned char)*a)) a++;
    while (is_space((unsigned char)*b)) b++;
    if (!*a || !*b) return !*a && !*b;
    while (*a && *b && !is_space((unsigned char)*a) && *a == *b) a++, b++;
    bool ea = !*a || is_space((unsigned char)*a), eb = !*b || is_space((unsigned char)*b);
    if (!ea || !eb) return false;
  }
}

static void count_gap(lv_punct_metrics *m, const int32_t *hg, const int32_t *rg) {
  for (int k = 0; k < NMARKS; k++) {
    int32_t hv = hg ? hg[k] : 0, rv = rg ? rg[k] : 0, both = hv < rv ? hv : rv;
    m->counts[k].tp += both;
    m->counts[k].fp += hv - both;
    m->counts[k].fn += rv - both;
    m->counts[LV_PUNCT_ALL_MARKS].tp += both;
    m->counts[LV_PUNCT_ALL_MARKS].fp += hv - both;
    m->counts[LV_PUNCT_ALL_MARKS].fn += rv - both;
  }
}

lv_status lv_punct_metrics_init(lv_punct_metrics *m) {
  memset(m, 0, sizeof *m);
  return lv_sacrebleu_init(&m->bleu, NULL);
}

lv_status lv_punct_metrics_add(lv_punct_metrics *m, const char *hyp, const char *ref) {
  LV_TRY(lv_sacrebleu_add_sentence(&m->bleu, ref, hyp));
  side h, r;
  LV_TRY(side_parse(hyp, &h));
  lv_status s = side_parse(ref, &r);
  if (s) {
    side_free(&h);
    return s;
  }
  int64_t *al = malloc((size_t)(h.n + 1) * sizeof *al);
  bool *ref_seen = calloc((size_t)(r.n + 1), sizeof *ref_seen); /* [r.n + 1] gaps; reused for words */
  if (!al || !ref_seen) s = lv_status_make(LV_ERR_RESOURCE, "punct_metrics: out of memory");
  if (!s) s = align_words(&h, &r, al);
  if (!s) {
    m->sentences++;
    m->exact += same_tokens(hyp, ref);
    bool mismatch = h.n != r.n;
    for (int64_t i = 0; i < h.n && !mismatch; i++) mismatch = al[i] != i;
    m->word_mismatch += mismatch;

    for (int64_t g = 0; g <= h.n; g++) {
      int64_t rg = g == 0 ? 0 : (al[g - 1] >= 0 ? al[g - 1] + 1 : -1);
      if (rg >= 0) ref_seen[rg] = true;
      count_gap(m, h.gaps + g * NMARKS, rg >= 0 ? r.gaps + rg * NMARKS : NULL);
    }
    for (int64_t g = 0; g <= r.n; g++)
      if (!ref_seen[g]) count_gap(m, NULL, r.gaps + g * NMARKS);

    lv_punct_counts *c = &m->counts[LV_PUNCT_CAPITAL];
    memset(ref_seen, 0, (size_t)(r.n + 1) * sizeof *ref_seen);
    for (int64_t i = 0; i < h.n; i++) {
      bool rc = al[i] >= 0 && r.cap[al[i]];
      if (al[i] >= 0) ref_seen[al[i]] = true;
      c->tp += h.cap[i] && rc;
      c->fp += h.cap[i] && !rc;
      c->fn += !h.cap[i] && rc;
    }
    for (int64_t j = 0; j < r.n; j++) c->fn += !ref_seen[j] && r.cap[j];
  }
  free(al);
  free(ref_seen);
  side_free(&h);
  side_free(&r);
  return s;
}

lv_status lv_punct_trivial_answer(const char *ref, char **out) {
  size_t n = strlen(ref), t = 0;
  char *s = malloc(n + 2);
  if (!s) return lv_status_make(LV_ERR_RESOURCE, "punct_metrics: out of memory for a %zu-byte sentence", n);
  bool pending_space = false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)ref[i];
    if (is_punct(c)) continue;
    if (is_space(c)) {
      pending_space = t > 0;
      continue;
    }
    if (pending_space) s[t++] = ' ';
    pending_space = false;
    s[t++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  if (t > 0 && s[0] >= 'a' && s[0] <= 'z') s[0] = (char)(s[0] - 'a' + 'A');
  s[t++] = '.';
  s[t] = '\0';
  *out = s;
  return NULL;
}

void lv_punct_prf(const lv_punct_counts *c, double *precision, double *recall, double *f1) {
  double p = c->tp + c->fp > 0 ? (double)c->tp / (double)(c->tp + c->fp) : 0;
  double r = c->tp + c->fn > 0 ? (double)c->tp / (double)(c->tp + c->fn) : 0;
  *precision = p;
  *recall = r;
  *f1 = p + r > 0 ? 2 * p * r / (p + r) : 0;
}

double lv_punct_exact_rate(const lv_punct_metrics *m) {
  return m->sentences > 0 ? (double)m->exact / (double)m->sentences : 0;
}

double lv_punct_bleu(const lv_punct_metrics *m) { return lv_sacrebleu_value(&m->bleu); }

int lv_punct_metrics_format(const lv_punct_metrics *m, char *buf, size_t n) {
  lv_sacrebleu_score b;
  lv_sacrebleu_result(&m->bleu, &b);
  size_t used = 0;
  int w = lv_sacrebleu_format(&b, buf, n);
  if (w < 0) return w;
  used += (size_t)w;
#define PUT(...)                                                          \
  do {                                                                    \
    w = snprintf(buf + (used < n ? used : n), used < n ? n - used : 0, __VA_ARGS__); \
    if (w < 0) return w;                                                  \
    used += (size_t)w;                                                    \
  } while (0)
  PUT("\nexact match %.4f (%lld of %lld sentences; %lld with other words than the reference)\n",
      lv_punct_exact_rate(m), (long long)m->exact, (long long)m->sentences, (long long)m->word_mismatch);
  for (int k = 0; k < LV_PUNCT_CLASS_COUNT; k++) {
    double p, r, f;
    lv_punct_prf(&m->counts[k], &p, &r, &f);
    PUT("  %-8s P %.4f R %.4f F1 %.4f  (tp %lld fp %lld fn %lld)\n", lv_punct_class_names[k], p, r, f,
        (long long)m->counts[k].tp, (long long)m->counts[k].fp, (long long)m->counts[k].fn);
  }
#undef PUT
  return (int)used;
}

/* ---- as a decoder metric ---- */

static const char *const kClassTags[LV_PUNCT_CLASS_COUNT] = {"comma", "period", "question", "exclamation",
                                                             "semicolon", "colon", "quote", "marks", "capital"};

static lv_status metric_value(const void *ctx, double *value) {
  *value = lv_punct_exact_rate(ctx);
  return NULL;
}

static int metric_summary_count(const void *ctx) {
  (void)ctx;
  return 1 + 3 * LV_PUNCT_CLASS_COUNT;
}

static lv_status metric_summary(const void *ctx, const char *name, lv_summary_value *sv) {
  (void)name;
  const lv_punct_metrics *pm = ctx;
  int n = 0;
  snprintf(sv[n].tag, sizeof sv[n].tag, "exact_match");
  sv[n++].value = lv_punct_exact_rate(pm);
  for (int c = 0; c < LV_PUNCT_CLASS_COUNT; c++) {
    double p, r, f;
    lv_punct_prf(&pm->counts[c], &p, &r, &f);
    snprintf(sv[n].tag, sizeof sv[n].tag, "precision_%s", kClassTags[c]);
    sv[n++].value = p;
    snprintf(sv[n].tag, sizeof sv[n].tag, "recall_%s", kClassTags[c]);
    sv[n++].value = r;
    snprintf(sv[n].tag, sizeof sv[n].tag, "f1_%s", kClassTags[c]);
    sv[n++].value = f;
  }
  return NULL;
}

static const lv_metric_custom_ops kPunctMetricOps = {.kind_name = "PunctuationMetric",
                                                     .value = metric_value,
                                                     .summary_count = metric_summary_count,
                                                     .summary = metric_summary,
                                                     .free = free};

lv_metric *lv_punct_metric_new(void) {
  lv_punct_metrics *pm = malloc(sizeof *pm);
  if (!pm) return NULL;
  lv_status s = lv_punct_metrics_init(pm);
  LV_ASSERTF(!s, "%s", lv_status_msg(s)); /* default sacrebleu options */
  return lv_metric_custom_new(&kPunctMetricOps, pm);
}

lv_status lv_punct_metric_add(lv_metric *m, const char *hyp, const char *ref) {
  return lv_punct_metrics_add(lv_metric_custom_ctx(m, &kPunctMetricOps), hyp, ref);
}

int lv_punct_metric_format(lv_metric *m, char *buf, size_t n) {
  return lv_punct_metrics_format(lv_metric_custom_ctx(m, &kPunctMetricOps), buf, n);
}
