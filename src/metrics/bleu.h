/* Corpus BLEU (Lingvo's scorers.BleuScorer and Unsegmenter, lingvo/core/scorers.py).
 *
 * add_sentence un-segments both strings (bpe: drop "@@ "; wpm/spm: drop ASCII spaces, then
 * U+2581 becomes a space), splits them on whitespace as Python's str.split() does (ASCII
 * and Unicode white space), and accumulates, for each order 1..max_ngram, the hypothesis
 * n-grams (totals) and their matches clipped to the reference's counts of the same n-gram.
 * score() is the geometric mean of matches/totals over the orders with at least one match
 * (orders with none are skipped, not zero; no order with a match gives 0), times the
 * brevity penalty exp(1 - ref_len/hyp_len) when the hypotheses are shorter: a fraction
 * in [0, 1], not x100. Strings are UTF-8 and compared byte for byte. The scorer is a
 * plain value: no allocation outlives a call. */
#ifndef LV_METRICS_BLEU_H
#define LV_METRICS_BLEU_H

#include <stdint.h>

#include "base/status.h"

#define LV_BLEU_MAX_ORDER 16

typedef enum lv_bleu_separator {
  LV_BLEU_SEP_NONE, /* identity (Lingvo's separator_type=None) */
  LV_BLEU_SEP_BPE,
  LV_BLEU_SEP_WPM,
  LV_BLEU_SEP_SPM, /* same rule as wpm */
  LV_BLEU_SEP_COUNT
} lv_bleu_separator;

/* "none", "bpe", "wpm", "spm" */
extern const char *const lv_bleu_separator_names[LV_BLEU_SEP_COUNT];

typedef struct lv_bleu_scorer {
  int max_ngram; /* 1..LV_BLEU_MAX_ORDER; Lingvo's default is 4 */
  lv_bleu_separator sep;
  int64_t matches[LV_BLEU_MAX_ORDER]; /* [max_ngram] clipped n-gram matches */
  int64_t totals[LV_BLEU_MAX_ORDER];  /* [max_ngram] hypothesis n-grams */
  int64_t ref_tokens, hyp_tokens;
} lv_bleu_scorer;

/* max_ngram outside 1..LV_BLEU_MAX_ORDER is LV_ERR_INVALID. */
lv_status lv_bleu_init(lv_bleu_scorer *s, int max_ngram, lv_bleu_separator sep);
/* Lingvo's Unsegmenter(sep)(line) (with its strip() where it strips): a new string the
 * caller frees. */
lv_status lv_bleu_unsegment(lv_bleu_separator sep, const char *line, char **out);
lv_status lv_bleu_add_sentence(lv_bleu_scorer *s, const char *ref, const char *hyp);
/* ComputeOverallScore(). */
double lv_bleu_score(const lv_bleu_scorer *s);

#endif
