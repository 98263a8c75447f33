/* Beam search and greedy search with Lingvo's semantics (lingvo/core/beam_search_helper.py,
 * ops beam_search_step / top_k_terminated_hyps / unpack_hyp in
 * lingvo/core/ops/beam_search_step_op_kernels.cc), independent of any model: the model is a
 * step callback that scores the next token of every live hypothesis.
 *
 * Layout, as Lingvo: num_beams B source sentences, H = num_hyps_per_beam hyps each, N = H*B
 * rows; hyp h of sentence b is row h*B + b. Each step t (0 <= t < target_seq_len):
 *   1. step(ctx, t, step_ids, parent, log_probs, atten_probs): row i is the hyp that extends
 *      the row parent[i] of step t-1 with token step_ids[i] (at t = 0 every row holds
 *      target_sos_id and parent[i] = i). The model first gathers its per-row state (KV
 *      cache, RNN state) by parent, then consumes step_ids, then writes log_probs [N, V]
 *      and, if src_len > 0, atten_probs [N, src_len] (used by the coverage penalty only).
 *   2. Every live row proposes its top H+1 extensions by global score (prev + log_prob; at
 *      t = 0 only rows 0..B-1, hyp 0 of each beam, are live). With force_eos_in_top_k an
 *      absent </s> replaces the worst of them. A </s> extension terminates the hyp if
 *      global > (best extension of that row) - valid_eos_max_logit_delta and its log-prob
 *      > local_eos_threshold, or unconditionally on the last step when
 *      force_eos_in_last_step (which also ranks </s> first when picking the H+1); other
 *      </s> extensions are dropped. The other extensions of a sentence's rows are merged and
 *      the best H by global score become its rows for step t+1.
 *   3. A beam is done (for good) when every one of its H rows scores <= its best terminated
 *      score - beam_size (and, with ensure_full_beam, it has >= H terminated hyps). The
 *      search stops when every beam is done or after target_seq_len steps. Done beams keep
 *      being extended (and may still collect terminated hyps) unless
 *      terminate_beams_independently, which freezes them (their rows are then fed </s> with
 *      parent = own row, and their log_probs are ignored).
 *   A row with only NaN log-probs is an error, as in Lingvo.
 * Ties order as the C++ kernel's comparators: higher global score, then lower token id,
 * then lower parent row.
 *
 * Result: per sentence up to H terminated hyps, best first by the normalized score
 *   Σ log p / ((len+5)^α / 5^α) + r·β·Σ_{j<src_lens[b]} log(clip(cum_atten_j / r, 0.001, 0.5))
 * (α length_normalization, β coverage_penalty, r target_seq_length_ratio, len counting
 * </s>, cum_atten_j the sum over the hyp's tokens of the attention of the step that chose
 * it; positions j >= src_len count as 0), ties to the shorter. Missing hyps are empty
 * (len 0, scores 0), as Lingvo's unpack_hyp gives.
 *
 * Beyond Lingvo: a sentence can have fewer than H candidates (V <= H, or rows of -inf/NaN
 * log-probs); Lingvo then fills the rows with zero-initialised hyps (score 0, token 0), here
 * the rows are left dead (never extended, ignored by the done test; step_ids = </s>,
 * parent = own row). Full ties of normalized score and length, which Lingvo's threads
 * leave unordered, go to the hyp found first. Not implemented: merge_paths, target_eoc_id
 * and the other epsilon/neural-transducer options.
 *
 * Memory is host memory owned by the library between calls; results are malloc'd and
 * freed with their _free function. Nothing here exits; errors are lv_status. */
#ifndef LV_SEARCH_BEAM_SEARCH_H
#define LV_SEARCH_BEAM_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

/* The model. t is the step; step_ids [N] and parent [N] as above; log_probs [N, V] and
 * atten_probs [N, src_len] (NULL when src_len is 0) are to be written. For greedy search
 * N = batch, parent[i] = i. A returned error stops the search and is passed up. */
typedef lv_status (*lv_search_step_fn)(void *ctx, int t, const int32_t *step_ids, const int32_t *parent,
                                       float *log_probs, float *atten_probs);

/* Lingvo's BeamSearchHelper params, same names and defaults
 * (lv_beam_search_params_default()). */
typedef struct lv_beam_search_params {
  int num_hyps_per_beam;           /* 8: H */
  float target_seq_length_ratio;   /* 1.0: r, scales the coverage penalty; > 0 */
  float length_normalization;      /* 0.0: α >= 0 */
  float coverage_penalty;          /* 0.0: β >= 0 */
  float valid_eos_max_logit_delta; /* 5.0 */
  float local_eos_threshold;       /* -100.0 */
  float beam_size;                 /* 3.0: > 0 */
  int target_sos_id;               /* 1 */
  int target_eos_id;               /* 2 */
  int target_seq_len;              /* 0: must be set; the maximum number of steps */
  bool force_eos_in_top_k;         /* false */
  bool force_eos_in_last_step;     /* false */
  bool ensure_full_beam;           /* false */
  bool allow_empty_terminated_hyp; /* true; only matters with an epsilon id (not here) */
  bool terminate_beams_independently; /* false */
} lv_beam_search_params;

lv_beam_search_params lv_beam_search_params_default(void);

/* LV_ERR_INVALID naming the first bad param (and its value) for vocab_size V. */
lv_status lv_beam_search_params_validate(const lv_beam_search_params *p, int vocab_size);

/* Lingvo's BeamSearchDecodeOutput topk_ids / topk_lens / topk_scores, hyp h of sentence b
 * at b*H + h, best first. */
typedef struct lv_beam_search_result {
  int num_beams;         /* B */
  int num_hyps_per_beam; /* H */
  int max_len;           /* target_seq_len */
  int num_steps;         /* steps run (< max_len when every beam was done early) */
  int32_t *ids;          /* [B*H, max_len] tokens including the final </s>, 0-padded */
  int32_t *lens;         /* [B*H] tokens in ids, </s> included; 0 for an empty hyp */
  float *scores;         /* [B*H] normalized score (topk_scores); 0 for an empty hyp */
  float *raw_scores;     /* [B*H] Σ log p over the hyp's tokens; 0 for an empty hyp */
} lv_beam_search_result;

/* Runs the search for num_beams sentences over a vocabulary of vocab_size tokens with
 * src_len attention positions (0: the model gives none). src_lens [num_beams] are the
 * source lengths for the coverage penalty (NULL: src_len each). On error *out is left
 * empty ({0}). */
lv_status lv_beam_search_decode(const lv_beam_search_params *p, int num_beams, int vocab_size, int src_len,
                                const int32_t *src_lens, lv_search_step_fn step, void *ctx,
                                lv_beam_search_result *out);

/* Search over a list of scorers (Marian's createScorers): each step every scorer writes
 * its log-probs [N, V] of each hyp's next token, and a candidate scores the sum of weight
 * x log-prob. Scorer 0 is the model's decoder, taken as it is (its weight must be 1; it
 * alone writes atten_probs); the others (language models: shallow fusion,
 * search/lm_fusion.h) are called with atten_probs NULL, and one of weight 0 steps but adds
 * nothing, so the search is the one without it, bit for bit. lv_beam_search_decode is
 * this with the model alone. */
typedef struct lv_search_scorer {
  lv_search_step_fn step;
  void *ctx;
  float weight;
} lv_search_scorer;
lv_status lv_beam_search_decode_scorers(const lv_beam_search_params *p, int num_beams, int vocab_size, int src_len,
                                        const int32_t *src_lens, const lv_search_scorer *scorers, int n_scorers,
                                        lv_beam_search_result *out);

/* A scorer a task's searches add to its decoder's (task.h's scorers): begin starts one
 * search of n rows over vocab ids (its state in *state), whose step is then step (ctx:
 * that state) and which end frees. name says which in messages; self is the scorer's. */
typedef struct lv_scorer {
  const char *name;
  float weight;
  void *self;
  lv_status (*begin)(const struct lv_scorer *sc, int64_t vocab, int n, void **state);
  lv_search_step_fn step;
  void (*end)(void *state);
} lv_scorer;
void lv_beam_search_result_free(lv_beam_search_result *r);

/* Lingvo's GreedySearchHelper: argmax (lowest id on ties) each step until </s> or
 * target_seq_len. Rows that have emitted </s> keep being fed their argmax, as in Lingvo, but
 * their later tokens are not kept. */
typedef struct lv_greedy_search_params {
  int target_sos_id;  /* 1 */
  int target_eos_id;  /* 2 */
  int target_seq_len; /* 0: must be set */
} lv_greedy_search_params;

lv_greedy_search_params lv_greedy_search_params_default(void);

typedef struct lv_greedy_search_result {
  int batch;
  int max_len;    /* target_seq_len */
  int num_steps;  /* steps run */
  int32_t *ids;   /* [batch, max_len] tokens up to and including </s>, 0-padded after */
  int32_t *lens;  /* [batch] tokens in ids, </s> included */
  bool *done;     /* [batch] whether </s> was emitted */
  float *scores;  /* [batch] Σ log p of the kept tokens (Lingvo returns none) */
} lv_greedy_search_result;

lv_status lv_greedy_search_decode(const lv_greedy_search_params *p, int batch, int vocab_size,
                                  lv_search_step_fn step, void *ctx, lv_greedy_search_result *out);
void lv_greedy_search_result_free(lv_greedy_search_result *r);

#endif
