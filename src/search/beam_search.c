/* Beam search and greedy search (see beam_search.h). The step mirrors BeamSearchStepOp<2>
 * and ComputeTopK of lingvo/core/ops/beam_search_step_op_kernels.cc; the final ranking
 * mirrors TopKTerminatedHypsOp::NormalizedScore and UnpackHypOp. */
#include "search/beam_search.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Lingvo's initial best score of a beam (beam_search_helper.py: min_score). */
#define BS_MIN_SCORE (-1e36f)

/* One extension: Lingvo's Hyp less the label history. */
typedef struct {
  float global; /* prev global + local */
  float local;  /* log-prob of word */
  int32_t word;
  int32_t row; /* the row (hyp_id) it extends */
} bs_cand;

/* A terminated hyp: the path of `row` up to step t-1, then </s> at step t. */
typedef struct {
  int32_t beam, t, row;
  float raw, norm;
  int64_t order; /* discovery order: the final sort's last tie-break */
} bs_done;

typedef struct {
  const lv_beam_search_params *p;
  int B, H, N, V, S, T;
  const int32_t *src_lens; /* [B] or NULL */
  bool need_cov;           /* coverage penalty needs the attention history */

  float *cum;      /* [N] global score of each row */
  float *new_cum;  /* [N] */
  uint8_t *live;   /* [N] */
  uint8_t *new_live;
  int32_t *word;   /* [T, N] token chosen at step t for row i */
  int32_t *prev;   /* [T, N] row of step t-1 (the parent) it extends */
  float *cov;      /* [N, S] attention summed over each row's tokens (need_cov) */
  float *new_cov;  /* [N, S] */
  float *best;     /* [B] best terminated global score */
  uint8_t *beam_done;
  uint8_t *skip;   /* [B] frozen this step (terminate_beams_independently) */
  int32_t *ndone;  /* [B] terminated hyps so far */

  bs_cand *items;  /* [N, 2(H+1)] per-row selection buffers; the first nitems[i] are row i's */
  int32_t *nitems; /* [N] */
  bs_cand *merged; /* [B, H] best non-</s> extensions per beam, sorted */
  int32_t *nmerged; /* [B] */
  bs_cand *eos;    /* [N] terminating </s> extension of each row */
  uint8_t *eos_ok; /* [N] */

  bs_done *done;
  int64_t ndone_total, done_cap;
} bs_state;

lv_beam_search_params lv_beam_search_params_default(void) {
  return (lv_beam_search_params){
      .num_hyps_per_beam = 8,
      .target_seq_length_ratio = 1.0f,
      .length_normalization = 0.0f,
      .coverage_penalty = 0.0f,
      .valid_eos_max_logit_delta = 5.0f,
      .local_eos_threshold = -100.0f,
      .beam_size = 3.0f,
      .target_sos_id = 1,
      .target_eos_id = 2,
      .target_seq_len = 0,
      .force_eos_in_top_k = false,
      .force_eos_in_last_step = false,
      .ensure_full_beam = false,
      .allow_empty_terminated_hyp = true,
      .terminate_beams_independently = false,
  };
}

lv_greedy_search_params lv_greedy_search_params_default(void) {
  return (lv_greedy_search_params){.target_sos_id = 1, .target_eos_id = 2, .target_seq_len = 0};
}

static lv_status bad(const char *name, const char *fmt_value, double v, const char *expected) {
  char value[64];
  snprintf(value, sizeof value, fmt_value, v);
  return lv_status_make(LV_ERR_INVALID, "beam search param %s = %s: expected %s", name, value, expected);
}

lv_status lv_beam_search_params_validate(const lv_beam_search_params *p, int vocab_size) {
  if (!p) return lv_status_make(LV_ERR_INVALID, "beam search params: NULL");
  if (vocab_size < 1)
    return lv_status_make(LV_ERR_INVALID, "beam search vocab_size = %d: expected >= 1", vocab_size);
  if (p->num_hyps_per_beam < 1) return bad("num_hyps_per_beam", "%.0f", p->num_hyps_per_beam, ">= 1");
  if (p->num_hyps_per_beam > (1 << 20)) return bad("num_hyps_per_beam", "%.0f", p->num_hyps_per_beam, "<= 1048576");
  if (p->target_seq_len < 1)
    return bad("target_seq_len", "%.0f", p->target_seq_len, ">= 1 (the maximum number of decode steps; set it)");
  if (!(p->beam_size > 0)) return bad("beam_size", "%g", p->beam_size, "> 0");
  if (!(p->length_normalization >= 0) || isinf(p->length_normalization))
    return bad("length_normalization", "%g", p->length_normalization, "a finite value >= 0");
  if (!(p->coverage_penalty >= 0) || isinf(p->coverage_penalty))
    return bad("coverage_penalty", "%g", p->coverage_penalty, "a finite value >= 0");
  if (!(p->target_seq_length_ratio > 0) || isinf(p->target_seq_length_ratio))
    return bad("target_seq_length_ratio", "%g", p->target_seq_length_ratio, "a finite value > 0");
  if (isnan(p->valid_eos_max_logit_delta)) return bad("valid_eos_max_logit_delta", "%g", NAN, "a number");
  if (isnan(p->local_eos_threshold)) return bad("local_eos_threshold", "%g", NAN, "a number");
  if (p->target_eos_id < 0 || p->target_eos_id >= vocab_size) {
    char range[64];
    snprintf(range, sizeof range, "0 <= id < vocab_size %d", vocab_size);
    return bad("target_eos_id", "%.0f", p->target_eos_id, range);
  }
  if (p->target_sos_id < 0) return bad("target_sos_id", "%.0f", p->target_sos_id, ">= 0");
  return NULL;
}

/* ---- selection ------------------------------------------------------------------------ */

/* HigherScoreWithEos (HigherScore when !eos_first): x ranks before y. */
static inline bool cand_higher(const bs_cand *x, const bs_cand *y, int32_t eos, bool eos_first) {
  if (eos_first && !(x->word == eos && y->word == eos)) {
    if (x->word == eos) return true;
    if (y->word == eos) return false;
  }
  if (x->global > y->global) return true;
  if (x->global < y->global) return false;
  if (x->word < y->word) return true;
  if (x->word > y->word) return false;
  return x->row < y->row;
}

static void cand_sort(bs_cand *a, int n, int32_t eos, bool eos_first) {
  for (int i = 1; i < n; i++) {
    bs_cand e = a[i];
    int j = i;
    while (j > 0 && cand_higher(&e, &a[j - 1], eos, eos_first)) {
      a[j] = a[j - 1];
      j--;
    }
    a[j] = e;
  }
}

/* The top k extensions of one row, sorted by HigherScore; Lingvo's TopK<Hyp,
 * HigherScoreWithEos> fed as ComputeTopK feeds it: a buffer of 2k candidates cut back to
 * the best k when full, and a caller-side filter global >= bottom, where bottom is -inf
 * before the first Add, the float lowest() until the first cut, then the k-th best. The
 * filter keeps the result the exact top k, except that a late, low </s> can miss the
 * top k on a force_eos_in_last_step step, and -inf scores after the first one are never
 * candidates; both as in Lingvo. NaN scores are never candidates. */
static int row_topk(const float *lp, int V, float cur, int32_t row, int k, int32_t eos, bool eos_first,
                    bs_cand *items) {
  int n = 0;
  bool selected = false;
  float bottom = -INFINITY;
  int id = 0;
  for (;;) {
    /* Blocks wholly below the bar (the common case once it is set) cost one vector pass. */
    enum { BLOCK = 16 };
    while (id + BLOCK <= V) {
      int any = 0;
      for (int j = 0; j < BLOCK; j++) any |= (cur + lp[id + j] >= bottom);
      if (any) break;
      id += BLOCK;
    }
    if (id >= V) break;
    int end = id + BLOCK <= V ? id + BLOCK : V;
    for (; id < end; id++) {
      float g = cur + lp[id];
      if (!(g >= bottom)) continue;
      bs_cand e = {g, lp[id], id, row};
      if (!selected || cand_higher(&e, &items[k - 1], eos, eos_first)) {
        items[n++] = e;
        if (n >= 2 * k) {
          cand_sort(items, n, eos, eos_first);
          n = k;
          selected = true;
        }
      }
      bottom = selected ? items[k - 1].global : -FLT_MAX;
    }
  }
  if (n > k) {
    cand_sort(items, n, eos, eos_first);
    n = k;
  }
  cand_sort(items, n, eos, false);
  return n;
}

/* Keeps the best H of a beam's non-</s> extensions, sorted (HigherScore). */
static void merged_add(bs_cand *top, int32_t *count, int H, const bs_cand *e) {
  int n = *count;
  if (n == H && !cand_higher(e, &top[H - 1], -1, false)) return;
  int j = n < H ? n : H - 1;
  while (j > 0 && cand_higher(e, &top[j - 1], -1, false)) {
    top[j] = top[j - 1];
    j--;
  }
  top[j] = *e;
  if (n < H) (*count)++;
}

/* ---- scoring -------------------------------------------------------------------------- */

/* TopKTerminatedHypsOp::NormalizedScore for a hyp of len tokens summing to raw, whose
 * attention summed per source position is cov [S] (NULL: no attention). */
static float normalized_score(const lv_beam_search_params *p, float raw, int len, const float *cov, int S,
                              int src_size) {
  float coverage = 0.0f;
  if (p->coverage_penalty != 0.0f) {
    float penalty = 0.0f;
    for (int j = 0; j < src_size; j++) {
      float c = (cov && j < S) ? cov[j] : 0.0f;
      c = c / p->target_seq_length_ratio;
      c = fminf(fmaxf(c, 0.001f), 0.5f);
      penalty += logf(c);
    }
    coverage = p->target_seq_length_ratio * p->coverage_penalty * penalty;
  }
  const float length_norm = (float)(pow(len + 5.0, p->length_normalization) / pow(5.0, p->length_normalization));
  return raw / length_norm + coverage;
}

/* ---- one step ------------------------------------------------------------------------- */

static lv_status record_done(bs_state *s, int32_t beam, int t, int32_t row, float raw, float norm) {
  if (s->ndone_total == s->done_cap) {
    int64_t cap = s->done_cap ? 2 * s->done_cap : 64;
    bs_done *d = realloc(s->done, (size_t)cap * sizeof *d);
    if (!d) return lv_status_make(LV_ERR_RESOURCE, "beam search: out of memory for %lld terminated hyps", (long long)cap);
    s->done = d;
    s->done_cap = cap;
  }
  s->done[s->ndone_total] = (bs_done){beam, t, row, raw, norm, s->ndone_total};
  s->ndone_total++;
  return NULL;
}

/* BeamSearchStepOp<2>::Compute for step t with the model's log_probs [N, V] and
 * atten_probs [N, S]; sets *all_done. */
static lv_status bs_step(bs_state *s, int t, const float *log_probs, const float *atten, bool *all_done) {
  const lv_beam_search_params *p = s->p;
  const int B = s->B, H = s->H, N = s->N, V = s->V, S = s->S;
  const int32_t eos = p->target_eos_id;
  const bool is_first = t == 0;
  const bool is_last = t == s->T - 1 && p->force_eos_in_last_step;
  const int k1 = H + 1;

  for (int b = 0; b < B; b++) {
    s->skip[b] = p->terminate_beams_independently && s->beam_done[b];
    s->nmerged[b] = 0;
  }
  memset(s->eos_ok, 0, (size_t)N);

  /* Each row selects into its own buffer, then rows merge in order. The selection could be
   * sharded by row (Lingvo uses 8 threads) but it reads log_probs once at memory speed,
   * a small part of a step beside the model's output projection, and OpenMP regions stall
   * on a machine shared with other work. */
  for (int i = 0; i < N; i++) {
    s->nitems[i] = -1;
    if ((is_first && i >= B) || s->skip[i % B] || !s->live[i]) continue;
    s->nitems[i] = row_topk(log_probs + (size_t)i * V, V, s->cum[i], i, k1, eos, is_last,
                            s->items + (size_t)i * 2 * k1);
  }

  for (int i = 0; i < N; i++) {
    const int b = i % B;
    int n = s->nitems[i];
    if (n < 0) continue;
    const float *lp = log_probs + (size_t)i * V;
    const float cur = s->cum[i];
    bs_cand *e = s->items + (size_t)i * 2 * k1;
    if (n == 0)
      return lv_status_make(LV_ERR_INTERNAL,
                            "beam search step %d, row %d: No entries in TopK. This typically happens if the "
                            "model is producing NaNs in the output.",
                            t, i);
    if (p->force_eos_in_top_k) {
      bool has_eos = false;
      for (int j = 0; j < n; j++) has_eos |= e[j].word == eos;
      if (!has_eos) e[n - 1] = (bs_cand){cur + lp[eos], lp[eos], eos, i};
    }
    const float eos_threshold = e[0].global - p->valid_eos_max_logit_delta;
    for (int j = 0; j < n; j++) {
      if (e[j].word == eos) {
        if (is_last || (e[j].global > eos_threshold && e[j].local > p->local_eos_threshold)) {
          s->eos_ok[i] = 1;
          s->eos[i] = e[j];
        }
      } else {
        merged_add(s->merged + (size_t)b * H, &s->nmerged[b], H, &e[j]);
      }
    }
  }

  int32_t *word = s->word + (size_t)t * N, *prev = s->prev + (size_t)t * N;
  for (int i = 0; i < N; i++) {
    const int b = i % B, h = i / B;
    if (s->skip[b]) {
      s->new_cum[i] = s->cum[i];
      s->new_live[i] = s->live[i];
      word[i] = eos;
      prev[i] = i;
      continue;
    }
    if (h < s->nmerged[b]) {
      const bs_cand *c = &s->merged[(size_t)b * H + h];
      s->new_cum[i] = c->global;
      s->new_live[i] = 1;
      word[i] = c->word;
      prev[i] = c->row;
    } else {
      s->new_cum[i] = -INFINITY;
      s->new_live[i] = 0;
      word[i] = eos;
      prev[i] = i;
    }
  }

  /* Terminated hyps, in row order as the kernel writes them. */
  for (int i = 0; i < N; i++) {
    if (!s->eos_ok[i]) continue;
    const int b = i % B;
    const bs_cand *c = &s->eos[i];
    if (c->global > s->best[b]) s->best[b] = c->global;
    float norm;
    const int src_size = s->src_lens ? s->src_lens[b] : S;
    if (s->need_cov) {
      float *tmp = s->new_cov + (size_t)i * S; /* scratch: rewritten below */
      const float *cv = s->cov + (size_t)i * S, *at = atten + (size_t)i * S;
      for (int j = 0; j < S; j++) tmp[j] = cv[j] + at[j];
      norm = normalized_score(p, c->global, t + 1, tmp, S, src_size);
    } else {
      norm = normalized_score(p, c->global, t + 1, NULL, 0, src_size);
    }
    LV_TRY(record_done(s, b, t, i, c->global, norm));
    s->ndone[b]++;
  }

  if (s->need_cov) {
    for (int i = 0; i < N; i++) {
      float *dst = s->new_cov + (size_t)i * S;
      if (s->skip[i % B] || !s->new_live[i]) {
        memcpy(dst, s->cov + (size_t)i * S, (size_t)S * sizeof *dst);
        continue;
      }
      const float *cv = s->cov + (size_t)prev[i] * S, *at = atten + (size_t)prev[i] * S;
      for (int j = 0; j < S; j++) dst[j] = cv[j] + at[j];
    }
    float *tc = s->cov;
    s->cov = s->new_cov;
    s->new_cov = tc;
  }
  float *tf = s->cum;
  s->cum = s->new_cum;
  s->new_cum = tf;
  uint8_t *tl = s->live;
  s->live = s->new_live;
  s->new_live = tl;

  /* UpdateAllDone. */
  bool all = true;
  for (int b = 0; b < B; b++) {
    if (s->beam_done[b]) continue;
    if (p->ensure_full_beam && s->ndone[b] < H) {
      all = false;
      continue;
    }
    bool all_below = true;
    for (int h = 0; h < H && all_below; h++) {
      const int i = h * B + b;
      if (s->live[i] && s->cum[i] > s->best[b] - p->beam_size) all_below = false;
    }
    s->beam_done[b] = all_below;
    all = all && all_below;
  }
  *all_done = all;
  return NULL;
}

/* ---- driver --------------------------------------------------------------------------- */

static void bs_state_free(bs_state *s) {
  free(s->cum);
  free(s->new_cum);
  free(s->live);
  free(s->new_live);
  free(s->word);
  free(s->prev);
  free(s->cov);
  free(s->new_cov);
  free(s->best);
  free(s->beam_done);
  free(s->skip);
  free(s->ndone);
  free(s->items);
  free(s->nitems);
  free(s->merged);
  free(s->nmerged);
  free(s->eos);
  free(s->eos_ok);
  free(s->done);
}

static int done_cmp(const void *a, const void *b) {
  const bs_done *x = a, *y = b;
  /* By beam; within a beam BetterTerminatedHyp: higher normalized score, then shorter; then
   * found earlier (Lingvo leaves full ties to its threads). NaN last. */
  if (x->beam != y->beam) return x->beam < y->beam ? -1 : 1;
  const bool xn = isnan(x->norm), yn = isnan(y->norm);
  if (xn != yn) return xn ? 1 : -1;
  if (!xn) {
    if (x->norm > y->norm) return -1;
    if (x->norm < y->norm) return 1;
  }
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->order < y->order ? -1 : (x->order > y->order);
}

void lv_beam_search_result_free(lv_beam_search_result *r) {
  if (!r) return;
  free(r->ids);
  free(r->lens);
  free(r->scores);
  free(r->raw_scores);
  memset(r, 0, sizeof *r);
}

static lv_status fill_result(bs_state *s, int steps, lv_beam_search_result *out) {
  const int B = s->B, H = s->H, N = s->N, T = s->T;
  out->num_beams = B;
  out->num_hyps_per_beam = H;
  out->max_len = T;
  out->num_steps = steps;
  out->ids = calloc((size_t)N * T, sizeof *out->ids);
  out->lens = calloc((size_t)N, sizeof *out->lens);
  out->scores = calloc((size_t)N, sizeof *out->scores);
  out->raw_scores = calloc((size_t)N, sizeof *out->raw_scores);
  if (!out->ids || !out->lens || !out->scores || !out->raw_scores)
    return lv_status_make(LV_ERR_RESOURCE, "beam search: out of memory for results [%d, %d]", N, T);
  if (s->ndone_total) qsort(s->done, (size_t)s->ndone_total, sizeof *s->done, done_cmp);
  int32_t *filled = calloc((size_t)B, sizeof *filled);
  if (!filled) return lv_status_make(LV_ERR_RESOURCE, "beam search: out of memory");
  for (int64_t d = 0; d < s->ndone_total; d++) {
    const bs_done *h = &s->done[d];
    if (filled[h->beam] >= H) continue;
    const int slot = h->beam * H + filled[h->beam]++;
    int32_t *ids = out->ids + (size_t)slot * T;
    int32_t r = h->row;
    for (int st = h->t - 1; st >= 0; st--) {
      ids[st] = s->word[(size_t)st * N + r];
      r = s->prev[(size_t)st * N + r];
    }
    ids[h->t] = s->p->target_eos_id;
    out->lens[slot] = h->t + 1;
    out->scores[slot] = h->norm;
    out->raw_scores[slot] = h->raw;
  }
  free(filled);
  return NULL;
}

#define BS_ALLOC(ptr, count)                                                                              \
  do {                                                                                                    \
    size_t n_ = (size_t)(count);                                                                          \
    (ptr) = calloc(n_ ? n_ : 1, sizeof *(ptr));                                                           \
    if (!(ptr)) {                                                                                         \
      st = lv_status_make(LV_ERR_RESOURCE, "beam search: out of memory for %s (%zu elements)", #ptr, n_); \
      goto fail;                                                                                          \
    }                                                                                                     \
  } while (0)

lv_status lv_beam_search_decode(const lv_beam_search_params *p, int num_beams, int vocab_size, int src_len,
                                const int32_t *src_lens, lv_search_step_fn step, void *ctx,
                                lv_beam_search_result *out) {
  const lv_search_scorer model = {.step = step, .ctx = ctx, .weight = 1.0f};
  return lv_beam_search_decode_scorers(p, num_beams, vocab_size, src_len, src_lens, &model, 1, out);
}

/* One step of every scorer into log_probs [N, V] (and the model's atten); scratch [N, V]
 * holds each other scorer's log-probs before they are added. */
static lv_status score_step(const lv_search_scorer *sc, int n_sc, int t, const int32_t *step_ids,
                            const int32_t *parent, int N, int V, float *log_probs, float *atten, float *scratch) {
  LV_TRY(sc[0].step(sc[0].ctx, t, step_ids, parent, log_probs, atten));
  const size_t m = (size_t)N * (size_t)V;
  for (int k = 1; k < n_sc; k++) {
    LV_TRY(sc[k].step(sc[k].ctx, t, step_ids, parent, scratch, NULL));
    const float w = sc[k].weight;
    if (w == 0) continue; /* exactly the search without it, whatever its outputs */
    for (size_t i = 0; i < m; i++) log_probs[i] += w * scratch[i];
  }
  return NULL;
}

lv_status lv_beam_search_decode_scorers(const lv_beam_search_params *p, int num_beams, int vocab_size, int src_len,
                                        const int32_t *src_lens, const lv_search_scorer *scorers, int n_scorers,
                                        lv_beam_search_result *out) {
  if (!out) return lv_status_make(LV_ERR_INVALID, "beam search: out is NULL");
  memset(out, 0, sizeof *out);
  LV_TRY(lv_beam_search_params_validate(p, vocab_size));
  if (n_scorers < 1 || !scorers) return lv_status_make(LV_ERR_INVALID, "beam search: no scorer (the model's decoder)");
  for (int k = 0; k < n_scorers; k++)
    if (!scorers[k].step) return lv_status_make(LV_ERR_INVALID, "beam search: scorer %d's step callback is NULL", k);
  if (scorers[0].weight != 1.0f)
    return lv_status_make(LV_ERR_INVALID, "beam search: the model's scorer has weight %g: expected 1",
                          scorers[0].weight);
  if (num_beams < 1) return lv_status_make(LV_ERR_INVALID, "beam search num_beams = %d: expected >= 1", num_beams);
  if (src_len < 0) return lv_status_make(LV_ERR_INVALID, "beam search src_len = %d: expected >= 0", src_len);
  if (src_lens)
    for (int b = 0; b < num_beams; b++)
      if (src_lens[b] < 0)
        return lv_status_make(LV_ERR_INVALID, "beam search src_lens[%d] = %d: expected >= 0", b, src_lens[b]);
  const int64_t N64 = (int64_t)p->num_hyps_per_beam * num_beams;
  if (N64 > INT32_MAX || N64 * vocab_size > (int64_t)(SIZE_MAX / 8) ||
      N64 * p->target_seq_len > (int64_t)(SIZE_MAX / 8) || N64 * src_len > (int64_t)(SIZE_MAX / 8))
    return lv_status_make(LV_ERR_INVALID,
                          "beam search: %d hyps x %d beams x (vocab %d, target_seq_len %d, src_len %d) is too large",
                          p->num_hyps_per_beam, num_beams, vocab_size, p->target_seq_len, src_len);

  lv_status st = NULL;
  bs_state s = {0};
  s.p = p;
  s.B = num_beams;
  s.H = p->num_hyps_per_beam;
  s.N = (int)N64;
  s.V = vocab_size;
  s.S = src_len;
  s.T = p->target_seq_len;
  s.src_lens = src_lens;
  s.need_cov = p->coverage_penalty != 0.0f && src_len > 0;
  const int N = s.N;
  float *log_probs = NULL, *atten = NULL, *scratch = NULL;
  int32_t *ids0 = NULL, *parent0 = NULL;

  BS_ALLOC(s.cum, N);
  BS_ALLOC(s.new_cum, N);
  BS_ALLOC(s.live, N);
  BS_ALLOC(s.new_live, N);
  BS_ALLOC(s.word, (size_t)s.T * N);
  BS_ALLOC(s.prev, (size_t)s.T * N);
  if (s.need_cov) {
    BS_ALLOC(s.cov, (size_t)N * src_len);
    BS_ALLOC(s.new_cov, (size_t)N * src_len);
  }
  BS_ALLOC(s.best, num_beams);
  BS_ALLOC(s.beam_done, num_beams);
  BS_ALLOC(s.skip, num_beams);
  BS_ALLOC(s.ndone, num_beams);
  BS_ALLOC(s.items, (size_t)N * 2 * (s.H + 1));
  BS_ALLOC(s.nitems, N);
  BS_ALLOC(s.merged, (size_t)num_beams * s.H);
  BS_ALLOC(s.nmerged, num_beams);
  BS_ALLOC(s.eos, N);
  BS_ALLOC(s.eos_ok, N);
  BS_ALLOC(log_probs, (size_t)N * vocab_size);
  if (n_scorers > 1) BS_ALLOC(scratch, (size_t)N * vocab_size);
  if (src_len > 0) BS_ALLOC(atten, (size_t)N * src_len);
  BS_ALLOC(ids0, N);
  BS_ALLOC(parent0, N);

  for (int i = 0; i < N; i++) {
    s.live[i] = 1;
    ids0[i] = p->target_sos_id;
    parent0[i] = i;
  }
  for (int b = 0; b < num_beams; b++) s.best[b] = BS_MIN_SCORE;

  const int32_t *step_ids = ids0, *parent = parent0;
  int t = 0;
  for (; t < s.T;) {
    st = score_step(scorers, n_scorers, t, step_ids, parent, N, vocab_size, log_probs, atten, scratch);
    if (st) {
      st = lv_status_wrap(st, "beam search step %d", t);
      goto fail;
    }
    bool all_done = false;
    st = bs_step(&s, t, log_probs, atten, &all_done);
    if (st) goto fail;
    step_ids = s.word + (size_t)t * N;
    parent = s.prev + (size_t)t * N;
    t++;
    if (all_done) break;
  }
  st = fill_result(&s, t, out);
  if (st) lv_beam_search_result_free(out);

fail:
  free(log_probs);
  free(scratch);
  free(atten);
  free(ids0);
  free(parent0);
  bs_state_free(&s);
  return st;
}

/* ---- greedy --------------------------------------------------------------------------- */

void lv_greedy_search_result_free(lv_greedy_search_result *r) {
  if (!r) return;
  free(r->ids);
  free(r->lens);
  free(r->done);
  free(r->scores);
  memset(r, 0, sizeof *r);
}

lv_status lv_greedy_search_decode(const lv_greedy_search_params *p, int batch, int vocab_size,
                                  lv_search_step_fn step, void *ctx, lv_greedy_search_result *out) {
  if (!out) return lv_status_make(LV_ERR_INVALID, "greedy search: out is NULL");
  memset(out, 0, sizeof *out);
  if (!p) return lv_status_make(LV_ERR_INVALID, "greedy search params: NULL");
  if (!step) return lv_status_make(LV_ERR_INVALID, "greedy search: step callback is NULL");
  if (batch < 1) return lv_status_make(LV_ERR_INVALID, "greedy search batch = %d: expected >= 1", batch);
  if (vocab_size < 1)
    return lv_status_make(LV_ERR_INVALID, "greedy search vocab_size = %d: expected >= 1", vocab_size);
  if (p->target_seq_len < 1)
    return lv_status_make(LV_ERR_INVALID,
                          "greedy search param target_seq_len = %d: expected >= 1 (the maximum number of decode "
                          "steps; set it)",
                          p->target_seq_len);
  if (p->target_eos_id < 0 || p->target_eos_id >= vocab_size)
    return lv_status_make(LV_ERR_INVALID,
                          "greedy search param target_eos_id = %d: expected 0 <= id < vocab_size %d",
                          p->target_eos_id, vocab_size);
  if (p->target_sos_id < 0)
    return lv_status_make(LV_ERR_INVALID, "greedy search param target_sos_id = %d: expected >= 0",
                          p->target_sos_id);
  if ((int64_t)batch * vocab_size > (int64_t)(SIZE_MAX / 8) ||
      (int64_t)batch * p->target_seq_len > (int64_t)(SIZE_MAX / 8))
    return lv_status_make(LV_ERR_INVALID, "greedy search: batch %d x vocab %d is too large", batch, vocab_size);

  const int T = p->target_seq_len;
  lv_status st = NULL;
  float *log_probs = malloc((size_t)batch * vocab_size * sizeof *log_probs);
  int32_t *step_ids = malloc((size_t)batch * sizeof *step_ids);
  int32_t *parent = malloc((size_t)batch * sizeof *parent);
  out->ids = calloc((size_t)batch * T, sizeof *out->ids);
  out->lens = calloc((size_t)batch, sizeof *out->lens);
  out->done = calloc((size_t)batch, sizeof *out->done);
  out->scores = calloc((size_t)batch, sizeof *out->scores);
  if (!log_probs || !step_ids || !parent || !out->ids || !out->lens || !out->done || !out->scores) {
    st = lv_status_make(LV_ERR_RESOURCE, "greedy search: out of memory (batch %d, vocab %d)", batch, vocab_size);
    goto done;
  }
  out->batch = batch;
  out->max_len = T;
  for (int i = 0; i < batch; i++) {
    step_ids[i] = p->target_sos_id;
    parent[i] = i;
  }
  int t = 0;
  for (; t < T; t++) {
    bool all_done = true;
    for (int i = 0; i < batch; i++) all_done = all_done && out->done[i];
    if (all_done) break;
    st = step(ctx, t, step_ids, parent, log_probs, NULL);
    if (st) {
      st = lv_status_wrap(st, "greedy search step %d", t);
      goto done;
    }
    for (int i = 0; i < batch; i++) {
      const float *lp = log_probs + (size_t)i * vocab_size;
      int32_t arg = 0;
      for (int32_t v = 1; v < vocab_size; v++)
        if (lp[v] > lp[arg]) arg = v;
      step_ids[i] = arg;
      if (out->done[i]) continue;
      out->ids[(size_t)i * T + t] = arg;
      out->lens[i]++;
      out->scores[i] += lp[arg];
      if (arg == p->target_eos_id) out->done[i] = true;
    }
  }
  out->num_steps = t;

done:
  free(log_probs);
  free(step_ids);
  free(parent);
  if (st) lv_greedy_search_result_free(out);
  return st;
}
