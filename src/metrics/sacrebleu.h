/* sacrebleu-compatible corpus BLEU (sacrebleu 2.x, sacrebleu/metrics/bleu.py), beside
 * Lingvo's BleuScorer (metrics/bleu.h), so that our figures compare with the field's.
 *
 * Defaults are sacrebleu's BLEU(): tokenizer 13a (mteval-v13a), case-sensitive, smoothing
 * 'exp', max n-gram order 4, effective order off, score x100. Each segment is rstrip()ed
 * and tokenized (13a: <skipped> removed, "-\n" joined, "\n" to " ", &quot; &amp; &lt; &gt;
 * unescaped in that order, then tokenizer_re.py's four regexes and a white-space split);
 * its n-grams of order 1..max are clipped by the reference counts (with several
 * references: the max count over them, and the reference length closest to the
 * hypothesis's, the shorter on a tie). The corpus score is
 *   bp * exp(sum_n log(p_n) / N),  p_n = 100 * correct_n / total_n,
 * with log(0) floored at -9999999999 (so any zero precision gives 0), bp = 1 when
 * hyp_len >= ref_len, else exp(1 - ref_len / hyp_len), or 0 when hyp_len is 0; no match
 * at all gives 0. Smoothing: 'exp' p_n = 100 / (2^k * total_n) for the k-th order without
 * a match; 'floor' p_n = 100 * v / total_n (v default 0.1); 'add-k' adds v (default 1)
 * to correct_n and total_n for n >= 2; 'none' nothing. Effective order stops the mean at
 * the last order with a hypothesis n-gram.
 *
 * Strings are UTF-8, handled as bytes (every rule is about ASCII characters); white space
 * is Python's str.split()/rstrip() set (ASCII and Unicode white space). The scorer is a
 * plain value: no allocation outlives a call. Not supported: lowercase, the intl / zh /
 * char / ja / ko / spm tokenizers, chrF and TER. */
#ifndef LV_METRICS_SACREBLEU_H
#define LV_METRICS_SACREBLEU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define LV_SACREBLEU_MAX_ORDER 16

typedef enum lv_sacrebleu_tokenizer {
  LV_SACREBLEU_TOK_13A, /* sacrebleu's default: mteval-v13a */
  LV_SACREBLEU_TOK_NONE, /* no tokenization (white-space split only) */
  LV_SACREBLEU_TOK_COUNT
} lv_sacrebleu_tokenizer;

typedef enum lv_sacrebleu_smooth {
  LV_SACREBLEU_SMOOTH_EXP, /* sacrebleu's default */
  LV_SACREBLEU_SMOOTH_FLOOR,
  LV_SACREBLEU_SMOOTH_ADD_K,
  LV_SACREBLEU_SMOOTH_NONE,
  LV_SACREBLEU_SMOOTH_COUNT
} lv_sacrebleu_smooth;

/* "13a", "none" (sacrebleu's --tokenize names) */
extern const char *const lv_sacrebleu_tokenizer_names[LV_SACREBLEU_TOK_COUNT];
/* "exp", "floor", "add-k", "none" (sacrebleu's --smooth-method names) */
extern const char *const lv_sacrebleu_smooth_names[LV_SACREBLEU_SMOOTH_COUNT];

/* Name lookups; an unknown name is LV_ERR_INVALID listing the known ones. */
lv_status lv_sacrebleu_tokenizer_parse(const char *name, lv_sacrebleu_tokenizer *out);
lv_status lv_sacrebleu_smooth_parse(const char *name, lv_sacrebleu_smooth *out);

typedef struct lv_sacrebleu_opts {
  lv_sacrebleu_tokenizer tokenizer;
  lv_sacrebleu_smooth smooth;
  double smooth_value; /* NAN: the method's default (floor 0.1, add-k 1); else >= 0 */
  int max_ngram_order; /* 1..LV_SACREBLEU_MAX_ORDER */
  bool effective_order;
} lv_sacrebleu_opts;

/* sacrebleu's BLEU() defaults: 13a, exp, NAN, 4, false. */
lv_sacrebleu_opts lv_sacrebleu_default_opts(void);

/* Sufficient statistics (sacrebleu's [sys_len, ref_len, correct..., total...]). */
typedef struct lv_sacrebleu_stats {
  int64_t sys_len, ref_len;
  int64_t correct[LV_SACREBLEU_MAX_ORDER]; /* [max_ngram_order] clipped matches */
  int64_t total[LV_SACREBLEU_MAX_ORDER];   /* [max_ngram_order] hypothesis n-grams */
} lv_sacrebleu_stats;

typedef struct lv_sacrebleu {
  lv_sacrebleu_opts opts;
  lv_sacrebleu_stats stats; /* summed over the segments added */
  int64_t segments;
} lv_sacrebleu;

/* What sacrebleu's BLEUScore holds. */
typedef struct lv_sacrebleu_score {
  double score;                                /* x100 */
  double precisions[LV_SACREBLEU_MAX_ORDER];   /* x100, smoothed; 0 past a break */
  double bp;                                   /* brevity penalty */
  double ratio;                                /* sys_len / ref_len, 0 when ref_len is 0 */
  int64_t sys_len, ref_len;
  int max_ngram_order;
} lv_sacrebleu_score;

/* opts NULL means the defaults. Bad options (order out of range, negative or infinite
 * smooth_value, unknown enum) are LV_ERR_INVALID. */
lv_status lv_sacrebleu_init(lv_sacrebleu *s, const lv_sacrebleu_opts *opts);

/* The pre-processing of one segment: rstrip() and the tokenizer, as a new string with
 * single spaces between tokens (the caller frees it). */
lv_status lv_sacrebleu_tokenize(lv_sacrebleu_tokenizer tok, const char *line, char **out);

/* Adds one segment: a hypothesis and its nrefs >= 1 references (an empty reference is a
 * reference of length 0, as in sacrebleu). */
lv_status lv_sacrebleu_add(lv_sacrebleu *s, const char *hyp, const char *const *refs, int nrefs);
/* One reference, in the argument order of lv_bleu_add_sentence. */
lv_status lv_sacrebleu_add_sentence(lv_sacrebleu *s, const char *ref, const char *hyp);

/* BLEU.compute_bleu on given statistics (sacrebleu's test_scoring and degenerate-stats
 * vectors call it directly). An empty corpus (all zero) scores 0. */
void lv_sacrebleu_compute(const lv_sacrebleu_opts *opts, const lv_sacrebleu_stats *st, lv_sacrebleu_score *out);
/* The corpus score so far. */
void lv_sacrebleu_result(const lv_sacrebleu *s, lv_sacrebleu_score *out);
/* Its score alone (x100). */
double lv_sacrebleu_value(const lv_sacrebleu *s);

/* str(BLEUScore): "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17
 * ref_len = 18)" with Python's rounding of the same doubles. Returns what snprintf
 * returns. */
int lv_sacrebleu_format(const lv_sacrebleu_score *r, char *buf, size_t n);
/* sacrebleu's signature without the version field, e.g.
 * "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" (floor / add-k: "smooth:floor[0.10]"). */
int lv_sacrebleu_signature(const lv_sacrebleu_opts *opts, int nrefs, char *buf, size_t n);

/* sacrebleu with the default options as a decoder metric (metrics/metrics.h custom kind):
 * value and its one summary value (tagged with the metric's name) the score x100. NULL
 * when out of memory. */
typedef struct lv_metric lv_metric;
lv_metric *lv_sacrebleu_metric_new(void);
/* Adds one sentence pair to a metric made by lv_sacrebleu_metric_new. */
lv_status lv_sacrebleu_metric_add(lv_metric *m, const char *ref, const char *hyp);

#endif
