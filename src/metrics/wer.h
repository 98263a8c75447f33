/* Word error rate as Lingvo's ASR decoder computes it (reference/lingvo_asr_lm.md §6):
 *
 *  - lv_wer_compute: decoder_utils.ComputeWer, the in-graph "norm_wer" counts: strip,
 *    collapse white space, unit-cost Levenshtein on space-separated words (case counts),
 *    reference words = spaces + 1 (0 for an empty reference); with normalize_punct_and_cap
 *    first ASCII lower-casing (tf.strings.lower) and removal of Unicode punctuation but
 *    '-' and '\''.
 *  - lv_wer_edit_distance: decoder_utils.EditDistance / levenshtein_distance.py, the
 *    PostProcess path: str.split() tokens, ins/sub/del with Lingvo's tie-break (sub only
 *    when strictly below both, else del when below ins, else ins).
 *  - the decode-time filters: the in-graph <noise> regex (' <noise> |^<noise> |
 *    <noise>$|^<noise>$' -> ' ', non-overlapping) and (<epsilon>)+ -> ' ' on hypotheses;
 *    the PostProcess FilterNoise / FilterEpsilon.
 *  - lv_wer_stats: the corpus totals of decoder_metrics.py's PostProcess for n-best lists:
 *    norm_wer (Σ errors / Σ words of the top hypotheses), error_rates/{ins,sub,del,wer}
 *    and their case_insensitive_error_rates twins, oracle_norm_wer, sacc and ter.
 *    References are passed without their trailing </s> (the pre-2021 behaviour; the §6.3
 *    note explains why Lingvo's HEAD glues it to the last word).
 *  - lv_wer_metric_new: those totals as a custom metric of metrics/metrics.h, updated through
 *    lv_wer_metric_stats; its value is norm_wer and its summary lists every rate.
 *
 * Punctuation (\p{P}) is recognised from a table of the Unicode 'P' ranges of ASCII,
 * Latin-1, Greek, Armenian, Hebrew, Arabic, Devanagari, General Punctuation,
 * Supplemental Punctuation, CJK and the full-width forms; other scripts' marks stay.
 * Strings are UTF-8. Functions allocate only what they return; none keeps pointers. */
#ifndef LV_METRICS_WER_H
#define LV_METRICS_WER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "metrics/metrics.h"

typedef struct lv_wer_counts {
  int64_t errors;    /* edit distance in words */
  int64_t ref_words; /* words of the (normalised) reference */
} lv_wer_counts;

lv_status lv_wer_compute(const char *hyp, const char *ref, bool normalize_punct_and_cap, lv_wer_counts *out);

typedef struct lv_edit_stats {
  int64_t ins, subs, dels, total;
} lv_edit_stats;

lv_status lv_wer_edit_distance(const char *ref, const char *hyp, lv_edit_stats *out);
/* EditDistanceInIds: the same over integer tokens. */
lv_status lv_wer_edit_distance_ids(const int *ref, int n_ref, const int *hyp, int n_hyp, lv_edit_stats *out);

/* New malloc'd strings (NULL only when out of memory). */
char *lv_wer_filter_noise_regex(const char *s); /* the in-graph regex */
char *lv_wer_filter_epsilon_regex(const char *s); /* (<epsilon>)+ -> ' ' */
char *lv_wer_filter_noise(const char *s);       /* PostProcess: drop <noise> tokens */
char *lv_wer_filter_epsilon(const char *s);     /* PostProcess: <epsilon> -> ' ', re-join */

typedef struct lv_wer_stats {
  int64_t utterances;
  int64_t norm_errors, norm_words; /* ComputeWer of the top hypotheses */
  int64_t oracle_errors;           /* Σ over utterances of the best hypothesis' errors */
  int64_t correct;                 /* utterances whose top hypothesis has 0 norm errors */
  lv_edit_stats ed;                /* EditDistance of the filtered top hypotheses */
  lv_edit_stats ed_ci;             /* the same lower-cased */
  int64_t ed_words;                /* Σ len(filtered ref .split()) */
  int64_t ter_errors, ter_tokens;  /* id-level edit distance, reference tokens */
} lv_wer_stats;

/* One utterance: its reference (no trailing </s>), n_hyps >= 1 hypotheses best first,
 * and optionally (ref_ids != NULL) the reference's and top hypothesis' token ids for TER
 * (both as Lingvo compares them, EOS included). */
lv_status lv_wer_stats_add(lv_wer_stats *s, const char *ref, const char *const *hyps, int n_hyps, const int *ref_ids,
                           int n_ref_ids, const int *hyp_ids, int n_hyp_ids);
/* Lingvo's metric values: Σ errors / Σ words (0 when there are no words). */
double lv_wer_norm_wer(const lv_wer_stats *s);
double lv_wer_wer(const lv_wer_stats *s);
double lv_wer_sacc(const lv_wer_stats *s);
double lv_wer_oracle(const lv_wer_stats *s);
double lv_wer_ter(const lv_wer_stats *s);

/* A custom metric over an lv_wer_stats (NULL when out of memory). Summary tags: the
 * metric's name (norm_wer), then error_rates/{ins,sub,del,wer},
 * case_insensitive_error_rates/{ins,sub,del,wer}, oracle_norm_wer, sacc, ter, wer. */
lv_metric *lv_wer_metric_new(void);
lv_wer_stats *lv_wer_metric_stats(lv_metric *m);

#endif
