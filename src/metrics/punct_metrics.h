/* Decoder metrics of the punctuator (Lingvo's punctuator codelab): how well a hypothesis restores the
 * punctuation and capitalization of its reference sentence.
 *
 *   bleu          sacrebleu corpus BLEU of the hypotheses against the references
 *                 (metrics/sacrebleu.h defaults: 13a, case-sensitive, exp smoothing).
 *   exact         sentences whose hypothesis equals the reference once both are split
 *                 on ASCII white space (runs of spaces and the ends do not count).
 *   per class     true / false positives and false negatives of the marks
 *                 , . ? ! ; : "  and of capitalized words, with precision, recall, F1.
 *
 * Alignment. Both texts are read as PunctuatorInput's Normalize reads a line: a word is
 * a maximal run of bytes that are neither ASCII white space nor one of Python's
 * string.punctuation (those are deleted, so "don't" is the word "dont" and "3:16" the
 * word "316"); words compare with ASCII A-Z lower-cased. The word sequence is exactly
 * the model's input, so a model that only adds punctuation and case produces the
 * reference's words, and the alignment is the identity.
 *   - A mark lies in a gap: gap 0 is before the first word, gap k the one after word k
 *     (a mark inside a word, like the ':' of "3:16", counts in the gap after that
 *     word). Per gap and mark, min(hyp count, ref count) are true positives, the rest
 *     of the hypothesis's false positives, the rest of the reference's false negatives.
 *     Opening and closing quotes are not told apart: `"` is one class.
 *   - A word is capitalized when its first byte that is not punctuation is A-Z
 *     (non-ASCII capitals are not counted). A capitalized word in both is a true
 *     positive, in the hypothesis only a false positive, in the reference only a false
 *     negative.
 *   - When the word sequences differ (a hypothesis that dropped, added or changed
 *     words), they are aligned by a longest common subsequence of words (the common
 *     prefix and suffix first; the middle by dynamic programming when it has at most
 *     LV_PUNCT_ALIGN_MAX_CELLS cells, else left unaligned). Hyp gap g matches ref gap
 *     g' when both are 0 or hyp word g and ref word g' are aligned; marks in unmatched
 *     gaps and capitals of unaligned words are false positives (hyp) or false negatives
 *     (ref). Such sentences are counted in word_mismatch.
 * Precision tp / (tp + fp), recall tp / (tp + fn), F1 their harmonic mean; each is 0
 * when its denominator is 0. "marks" (LV_PUNCT_ALL_MARKS) sums the seven marks.
 *
 * Strings are bytes (UTF-8 is not decoded); the accumulator owns no memory outside a
 * call. */
#ifndef LV_METRICS_PUNCT_METRICS_H
#define LV_METRICS_PUNCT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "metrics/sacrebleu.h"

typedef enum lv_punct_class {
  LV_PUNCT_COMMA,
  LV_PUNCT_PERIOD,
  LV_PUNCT_QUESTION,
  LV_PUNCT_EXCLAMATION,
  LV_PUNCT_SEMICOLON,
  LV_PUNCT_COLON,
  LV_PUNCT_QUOTE,
  LV_PUNCT_ALL_MARKS, /* the seven above together */
  LV_PUNCT_CAPITAL,   /* capitalized words */
  LV_PUNCT_CLASS_COUNT
} lv_punct_class;

/* ",", ".", "?", "!", ";", ":", "\"", "marks", "Capital" */
extern const char *const lv_punct_class_names[LV_PUNCT_CLASS_COUNT];

/* Largest dynamic-programming table (cells) for aligning differing word sequences. */
#define LV_PUNCT_ALIGN_MAX_CELLS ((int64_t)1 << 22)

typedef struct lv_punct_counts {
  int64_t tp, fp, fn;
} lv_punct_counts;

typedef struct lv_punct_metrics {
  lv_sacrebleu bleu;
  int64_t sentences;
  int64_t exact;         /* sentences equal up to white space */
  int64_t word_mismatch; /* sentences whose word sequences differ */
  lv_punct_counts counts[LV_PUNCT_CLASS_COUNT];
} lv_punct_metrics;

/* Empty accumulator with sacrebleu's default options. */
lv_status lv_punct_metrics_init(lv_punct_metrics *m);

/* Adds one sentence pair (NUL-terminated). Errors: out of memory only. */
lv_status lv_punct_metrics_add(lv_punct_metrics *m, const char *hyp, const char *ref);

/* Precision, recall and F1 of counts (each 0 when its denominator is 0). */
void lv_punct_prf(const lv_punct_counts *c, double *precision, double *recall, double *f1);

/* exact / sentences (0 for no sentences). */
double lv_punct_exact_rate(const lv_punct_metrics *m);
/* sacrebleu BLEU x100. */
double lv_punct_bleu(const lv_punct_metrics *m);

/* The trivial answer (the baseline a punctuator must beat): the reference as the model sees it
 * (PunctuatorInput's Normalize: A-Z lower-cased, string.punctuation deleted, white space
 * collapsed), its first byte upper-cased when a-z, and "." appended. *out is malloc'ed. */
lv_status lv_punct_trivial_answer(const char *ref, char **out);

/* The report of bin/punct_score: BLEU line, exact match, then one line per class
 * ("  ,        P 0.9123 R 0.8812 F1 0.8965  (tp 1 fp 2 fn 3)"). Returns what snprintf
 * returns. */
int lv_punct_metrics_format(const lv_punct_metrics *m, char *buf, size_t n);

/* The same accumulator as a decoder metric (metrics/metrics.h custom kind): its summary
 * values are exact_match and per class (comma, period, question, exclamation, semicolon,
 * colon, quote, marks, capital) precision_X, recall_X and f1_X; its value the exact-match
 * rate. NULL when out of memory. */
typedef struct lv_metric lv_metric;
lv_metric *lv_punct_metric_new(void);
/* Adds one sentence pair to a metric made by lv_punct_metric_new. */
lv_status lv_punct_metric_add(lv_metric *m, const char *hyp, const char *ref);
/* Its report (lv_punct_metrics_format) into buf. */
int lv_punct_metric_format(lv_metric *m, char *buf, size_t n);

#endif
