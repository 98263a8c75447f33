/* Beam search and greedy search (search/beam_search.h): Lingvo's beam_search_helper_test
 * testBeamSearchForceEosInTopK vectors, the hand-made trees of beam_search_step_op_test.py
 * (three steps with </s>, force_eos_in_last_step, op V2 with and without beam independence,
 * the stopping rules: beam_size, ensure_full_beam, local_eos_threshold), hand-computed cases
 * for the </s> rules, step-0 expansion, tie-breaking and parent rows, length normalization
 * and coverage penalty, a brute-force check against exhaustive search on a tiny
 * vocabulary, greedy search, and errors. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "search/beam_search.h"

/* ---- test models ---------------------------------------------------------------------- */

#define MAXLEN 128

typedef struct model model;
/* Log-probs [V] (and attention [S]) for sentence `beam` after prefix [len] (no <s>). */
typedef void (*prefix_fn)(const model *m, int beam, const int32_t *prefix, int len, float *lp, float *att);

struct model {
  int B, N, V, S, max_steps;
  /* Scripted rows: probabilities [nscript][N][V] used as log(p) at steps t < nscript. */
  const double *script;
  int nscript;
  prefix_fn fn; /* steps past the script (or all steps) */
  const double *fallback; /* [V] probabilities when neither applies */
  double arg;             /* free parameter of fn */
  int fail_at;            /* step at which the callback returns an error (-1: never) */
  /* What the search fed the model. */
  int calls;
  int32_t *rec_ids, *rec_parent; /* [max_steps, N] */
  int32_t *prefix, *tmp;         /* [N, MAXLEN] */
  int *plen, *tmplen;            /* [N] */
};

static void model_init(model *m, int B, int N, int V, int S, int max_steps) {
  memset(m, 0, sizeof *m);
  m->B = B;
  m->N = N;
  m->V = V;
  m->S = S;
  m->max_steps = max_steps;
  m->fail_at = -1;
  m->rec_ids = calloc((size_t)max_steps * N, sizeof(int32_t));
  m->rec_parent = calloc((size_t)max_steps * N, sizeof(int32_t));
  m->prefix = calloc((size_t)N * MAXLEN, sizeof(int32_t));
  m->tmp = calloc((size_t)N * MAXLEN, sizeof(int32_t));
  m->plen = calloc((size_t)N, sizeof(int));
  m->tmplen = calloc((size_t)N, sizeof(int));
}

static void model_free(model *m) {
  free(m->rec_ids);
  free(m->rec_parent);
  free(m->prefix);
  free(m->tmp);
  free(m->plen);
  free(m->tmplen);
}

static lv_status model_step(void *ctx, int t, const int32_t *ids, const int32_t *parent, float *lp, float *att) {
  model *m = ctx;
  ck_assert_int_eq(t, m->calls);
  ck_assert_int_lt(t, m->max_steps);
  m->calls++;
  memcpy(m->rec_ids + (size_t)t * m->N, ids, (size_t)m->N * sizeof *ids);
  memcpy(m->rec_parent + (size_t)t * m->N, parent, (size_t)m->N * sizeof *parent);
  if (t == m->fail_at) return lv_status_make(LV_ERR_INTERNAL, "model exploded");
  /* Reorder the per-row state by parent, then consume the ids (the <s> of step 0 is not kept). */
  for (int i = 0; i < m->N; i++) {
    ck_assert_int_ge(parent[i], 0);
    ck_assert_int_lt(parent[i], m->N);
    if (t > 0) ck_assert_int_eq(parent[i] % m->B, i % m->B); /* a row stays in its sentence */
    memcpy(m->tmp + (size_t)i * MAXLEN, m->prefix + (size_t)parent[i] * MAXLEN, MAXLEN * sizeof(int32_t));
    m->tmplen[i] = m->plen[parent[i]];
    if (t > 0) {
      ck_assert_int_lt(m->tmplen[i], MAXLEN);
      m->tmp[(size_t)i * MAXLEN + m->tmplen[i]++] = ids[i];
    }
  }
  memcpy(m->prefix, m->tmp, (size_t)m->N * MAXLEN * sizeof(int32_t));
  memcpy(m->plen, m->tmplen, (size_t)m->N * sizeof(int));
  for (int i = 0; i < m->N; i++) {
    float *row = lp + (size_t)i * m->V;
    float *arow = att ? att + (size_t)i * m->S : NULL;
    if (arow) memset(arow, 0, (size_t)m->S * sizeof *arow);
    if (t < m->nscript) {
      for (int v = 0; v < m->V; v++) row[v] = (float)log(m->script[((size_t)t * m->N + i) * m->V + v]);
    } else if (m->fn) {
      m->fn(m, i % m->B, m->prefix + (size_t)i * MAXLEN, m->plen[i], row, arow);
    } else {
      ck_assert_ptr_nonnull(m->fallback);
      for (int v = 0; v < m->V; v++) row[v] = (float)log(m->fallback[v]);
    }
  }
  return NULL;
}

static int32_t rec_id(const model *m, int t, int row) { return m->rec_ids[(size_t)t * m->N + row]; }
static int32_t rec_parent(const model *m, int t, int row) { return m->rec_parent[(size_t)t * m->N + row]; }

/* Hyp h of beam b: its ids equal want [n] (then zero padding), len n. */
static void expect_hyp(const lv_beam_search_result *r, int b, int h, const int32_t *want, int n) {
  const int slot = b * r->num_hyps_per_beam + h;
  ck_assert_msg(r->lens[slot] == n, "beam %d hyp %d: len %d, want %d", b, h, r->lens[slot], n);
  for (int j = 0; j < r->max_len; j++) {
    const int32_t w = j < n ? want[j] : 0;
    ck_assert_msg(r->ids[(size_t)slot * r->max_len + j] == w, "beam %d hyp %d: ids[%d] = %d, want %d", b, h, j,
                  r->ids[(size_t)slot * r->max_len + j], w);
  }
}
#define EXPECT_HYP(r, b, h, ...)                                                                 \
  expect_hyp((r), (b), (h), (const int32_t[]){__VA_ARGS__},                                      \
             (int)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))

static void expect_empty(const lv_beam_search_result *r, int b, int h) {
  const int slot = b * r->num_hyps_per_beam + h;
  ck_assert_int_eq(r->lens[slot], 0);
  ck_assert(r->scores[slot] == 0.0f && r->raw_scores[slot] == 0.0f);
  for (int j = 0; j < r->max_len; j++) ck_assert_int_eq(r->ids[(size_t)slot * r->max_len + j], 0);
}

#define NEAR(a, b, tol) ck_assert_msg(fabs((double)(a) - (double)(b)) <= (tol), "%s = %.9g, want %.9g", #a, \
                                      (double)(a), (double)(b))

/* ---- Lingvo's testBeamSearchForceEosInTopK ---------------------------------------------- */

static void eos_minus_one(const model *m, int beam, const int32_t *prefix, int len, float *lp, float *att) {
  (void)beam, (void)prefix, (void)len, (void)att;
  /* Logits 0 except </s> = -1; arg 1: through log_softmax, 0: the logits themselves (as the
   * Lingvo test feeds them). */
  const double lse = m->arg ? log((m->V - 1) + exp(-1.0)) : 0.0;
  for (int v = 0; v < m->V; v++) lp[v] = (float)((v == 2 ? -1.0 : 0.0) - lse);
}

static void run_force_eos_in_top_k(float delta, bool force, bool log_softmax, lv_beam_search_result *r) {
  lv_beam_search_params p = lv_beam_search_params_default();
  p.target_seq_len = 100;
  p.num_hyps_per_beam = 3;
  p.beam_size = 100000.0f;
  p.valid_eos_max_logit_delta = delta;
  p.force_eos_in_top_k = force;
  model m;
  model_init(&m, 2, 6, 300, 0, 100);
  m.fn = eos_minus_one;
  m.arg = log_softmax;
  EXPECT_OK(lv_beam_search_decode(&p, 2, 300, 0, NULL, model_step, &m, r));
  ck_assert_int_eq(r->num_steps, 100); /* beam_size 1e5: to the end */
  ck_assert_int_eq(m.calls, 100);
  /* Equal scores go to the lower token, then the lower row: step 0 keeps 0 1 3 of hyp 0,
   * every later step token 0 of each row in place. */
  const int32_t first[3] = {0, 1, 3};
  for (int i = 0; i < 6; i++) {
    ck_assert_int_eq(rec_id(&m, 1, i), first[i / 2]);
    ck_assert_int_eq(rec_parent(&m, 1, i), i % 2);
    for (int t = 2; t < 100; t++) {
      ck_assert_int_eq(rec_id(&m, t, i), 0);
      ck_assert_int_eq(rec_parent(&m, t, i), i);
    }
  }
  model_free(&m);
}

START_TEST(test_force_eos_in_top_k) {
  for (int ls = 0; ls < 2; ls++) {
    const float deltas[] = {100.0f, 0.5f};
    for (int d = 0; d < 2; d++)
      for (int force = 0; force < 2; force++) {
        lv_beam_search_result r;
        run_force_eos_in_top_k(deltas[d], force, ls, &r);
        const bool terminated = force && deltas[d] > 1.0f;
        for (int i = 0; i < 6; i++) {
          if (terminated)
            ck_assert_msg(r.lens[i] > 0, "delta %g force %d log_softmax %d: lens[%d] = 0", deltas[d], force, ls, i);
          else
            ck_assert_msg(r.lens[i] == 0 && r.scores[i] == 0.0f, "delta %g force %d: lens[%d] = %d", deltas[d],
                          force, i, r.lens[i]);
        }
        if (terminated && !ls) {
          /* Every </s> scores -1: ties go to the shorter, then to the one found first. The
           * non-</s> ties go to the lower token, then the lower row: step 1 keeps 0 0 0. */
          for (int b = 0; b < 2; b++) {
            EXPECT_HYP(&r, b, 0, 2);
            EXPECT_HYP(&r, b, 1, 0, 2);
            EXPECT_HYP(&r, b, 2, 1, 2);
            for (int h = 0; h < 3; h++) NEAR(r.scores[b * 3 + h], -1.0, 0);
          }
        }
        if (terminated && ls) {
          /* Through log_softmax longer hyps score lower: each beam's best is the one-token
           * </s>, then two-token ones. */
          const double lse = log(299 + exp(-1.0));
          for (int b = 0; b < 2; b++) {
            EXPECT_HYP(&r, b, 0, 2);
            NEAR(r.scores[b * 3], -1.0 - lse, 1e-5);
            NEAR(r.scores[b * 3 + 1], -1.0 - 2 * lse, 1e-5);
          }
        }
        lv_beam_search_result_free(&r);
      }
  }
}
END_TEST

/* ---- beam_search_step_op_test.py trees (H = 2 hyps, B = 1, V = 3, </s> = 2) --------------- */

static const double kTiny = 1e-7;

static lv_beam_search_params op_test_params(int T) {
  lv_beam_search_params p = lv_beam_search_params_default();
  p.num_hyps_per_beam = 2;
  p.target_seq_len = T;
  p.valid_eos_max_logit_delta = 0.1f; /* the op test helper's default */
  return p;
}

START_TEST(test_three_steps_eos) {
  /* 0(.6) -> 0(.55) | 1(.45); 1(.4) -> 0(.05) | 1(.95); then </s> .9 everywhere. */
  const double script[3][2][3] = {
      {{0.6, 0.4, kTiny}, {0.6, 0.4, kTiny}},
      {{0.55, 0.45, kTiny}, {0.05, 0.95, kTiny}},
      {{0.05, 0.05, 0.9}, {0.05, 0.05, 0.9}},
  };
  lv_beam_search_params p = op_test_params(3);
  model m;
  model_init(&m, 1, 2, 3, 0, 3);
  m.script = &script[0][0][0];
  m.nscript = 3;
  lv_beam_search_result r;
  EXPECT_OK(lv_beam_search_decode(&p, 1, 3, 0, NULL, model_step, &m, &r));
  /* Lingvo's hyps_expected [[0, 1], [1, 0]] and prev_hyps_expected [[0, 0], [1, 0]]. */
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(rec_id(&m, 0, i), 1); /* <s> */
    ck_assert_int_eq(rec_parent(&m, 0, i), i);
  }
  ck_assert_int_eq(rec_id(&m, 1, 0), 0);
  ck_assert_int_eq(rec_id(&m, 1, 1), 1);
  ck_assert_int_eq(rec_parent(&m, 1, 0), 0);
  ck_assert_int_eq(rec_parent(&m, 1, 1), 0);
  ck_assert_int_eq(rec_id(&m, 2, 0), 1);
  ck_assert_int_eq(rec_id(&m, 2, 1), 0);
  ck_assert_int_eq(rec_parent(&m, 2, 0), 1);
  ck_assert_int_eq(rec_parent(&m, 2, 1), 0);
  EXPECT_HYP(&r, 0, 0, 1, 1, 2);
  EXPECT_HYP(&r, 0, 1, 0, 0, 2);
  NEAR(r.raw_scores[0], log(0.4) + log(0.95) + log(0.9), 1e-5);
  NEAR(r.raw_scores[1], log(0.6) + log(0.55) + log(0.9), 1e-5);
  NEAR(r.scores[0], r.raw_scores[0], 0); /* no normalization by default */
  lv_beam_search_result_free(&r);
  model_free(&m);
}
END_TEST

START_TEST(test_three_steps_force_eos_in_last_step) {
  /* </s> is unlikely at the last step: only force_eos_in_last_step terminates the hyps. */
  const double script[3][2][3] = {
      {{0.6, 0.4, kTiny}, {0.6, 0.4, kTiny}},
      {{0.55, 0.45, kTiny}, {0.05, 0.95, kTiny}},
      {{0.45, 0.44, 0.01}, {0.5, 0.5, 0.01}},
  };
  for (int force = 0; force < 2; force++) {
    lv_beam_search_params p = op_test_params(3);
    p.force_eos_in_last_step = force;
    model m;
    model_init(&m, 1, 2, 3, 0, 3);
    m.script = &script[0][0][0];
    m.nscript = 3;
    lv_beam_search_result r;
    EXPECT_OK(lv_beam_search_decode(&p, 1, 3, 0, NULL, model_step, &m, &r));
    if (!force) {
      expect_empty(&r, 0, 0);
      expect_empty(&r, 0, 1);
    } else {
      EXPECT_HYP(&r, 0, 0, 1, 1, 2);
      EXPECT_HYP(&r, 0, 1, 0, 0, 2);
      NEAR(r.raw_scores[0], log(0.4) + log(0.95) + log(0.01), 1e-5);
      NEAR(r.raw_scores[1], log(0.6) + log(0.55) + log(0.01), 1e-5);
    }
    lv_beam_search_result_free(&r);
    model_free(&m);
  }
}
END_TEST

/* </s> ranked last among a row's candidates still terminates on a forced last step: with
 * V > H+1 it is pulled into the H+1 (HigherScoreWithEos). */
START_TEST(test_force_eos_in_last_step_pulls_eos_in) {
  const double script[2][2][6] = {
      {{0.3, 0.3, 0.001, 0.2, 0.199, kTiny}, {0.3, 0.3, 0.001, 0.2, 0.199, kTiny}},
      {{0.3, 0.3, 0.001, 0.2, 0.199, kTiny}, {0.3, 0.3, 0.001, 0.2, 0.199, kTiny}},
  };
  for (int force = 0; force < 2; force++) {
    lv_beam_search_params p = op_test_params(2);
    p.force_eos_in_last_step = force;
    model m;
    model_init(&m, 1, 2, 6, 0, 2);
    m.script = &script[0][0][0];
    m.nscript = 2;
    lv_beam_search_result r;
    EXPECT_OK(lv_beam_search_decode(&p, 1, 6, 0, NULL, model_step, &m, &r));
    if (force) {
      EXPECT_HYP(&r, 0, 0, 0, 2);
      EXPECT_HYP(&r, 0, 1, 1, 2);
      NEAR(r.raw_scores[0], log(0.3) + log(0.001), 1e-5);
    } else {
      expect_empty(&r, 0, 0);
    }
    lv_beam_search_result_free(&r);
    model_free(&m);
  }
}
END_TEST

/* testBeamSearchOpV2ThreeSteps and testBeamSearchOpV2Independence: B = 2, H = 2, four steps,
 * beam_size 0.1; beam 1 is done after step 1. */
static const double kIndep[4][4][3] = {
    {{0.6, 0.4, 1e-7}, {0.2, 0.8, 1e-7}, {0.6, 0.4, 1e-7}, {0.2, 0.8, 1e-7}},
    {{0.55, 0.45, 1e-7}, {1e-7, 0.3, 0.6}, {0.05, 0.95, 1e-7}, {0.05, 0.9, 0.05}},
    {{1e-7, 1.0, 1e-7}, {1e-7, 1.0, 1e-7}, {1e-7, 1.0, 1e-7}, {1e-7, 1.0, 1e-7}},
    {{0.05, 0.05, 0.9}, {0.05, 0.05, 0.9}, {0.05, 0.05, 0.9}, {0.05, 0.05, 0.9}},
};

START_TEST(test_beam_independence) {
  for (int indep = 0; indep < 2; indep++) {
    lv_beam_search_params p = op_test_params(4);
    p.beam_size = 0.1f;
    p.terminate_beams_independently = indep;
    model m;
    model_init(&m, 2, 4, 3, 0, 4);
    m.script = &kIndep[0][0][0];
    m.nscript = 4;
    lv_beam_search_result r;
    EXPECT_OK(lv_beam_search_decode(&p, 2, 3, 0, NULL, model_step, &m, &r));
    ck_assert_int_eq(r.num_steps, 4);
    /* Rows h*B + b. Step 2 is fed beam 0: rows 0 ("1 1" from row 2), 2 ("0 0" from row 0). */
    ck_assert_int_eq(rec_id(&m, 2, 0), 1);
    ck_assert_int_eq(rec_parent(&m, 2, 0), 2);
    ck_assert_int_eq(rec_id(&m, 2, 2), 0);
    ck_assert_int_eq(rec_parent(&m, 2, 2), 0);
    if (!indep) { /* beam 1: rows 1 ("1 1" from 1), 3 ("0 1" from 3) */
      ck_assert_int_eq(rec_id(&m, 2, 1), 1);
      ck_assert_int_eq(rec_parent(&m, 2, 1), 1);
      ck_assert_int_eq(rec_id(&m, 2, 3), 1);
      ck_assert_int_eq(rec_parent(&m, 2, 3), 3);
    } else { /* a frozen beam's rows stay where they are */
      ck_assert_int_eq(rec_parent(&m, 2, 1), 1);
      ck_assert_int_eq(rec_parent(&m, 2, 3), 3);
    }
    EXPECT_HYP(&r, 0, 0, 1, 1, 1, 2);
    EXPECT_HYP(&r, 0, 1, 0, 0, 1, 2);
    NEAR(r.raw_scores[0], log(0.4) + log(0.95) + log(0.9), 1e-5);
    NEAR(r.raw_scores[1], log(0.6) + log(0.55) + log(0.9), 1e-5);
    EXPECT_HYP(&r, 1, 0, 1, 2);
    NEAR(r.raw_scores[2], log(0.8) + log(0.6), 1e-5);
    if (indep) {
      expect_empty(&r, 1, 1);
    } else {
      /* Also found: [1 1 1 2] (-1.532) and [0 1 1 2] (-1.820); the better is kept. */
      EXPECT_HYP(&r, 1, 1, 1, 1, 1, 2);
      NEAR(r.raw_scores[3], log(0.8) + log(0.3) + log(0.9), 1e-5);
    }
    lv_beam_search_result_free(&r);
    model_free(&m);
  }
}
END_TEST

/* _testBeamSearchStoppingHelper: one step where row 0 ends with </s> .9; then a neutral
 * model where nothing ends. num_steps shows whether the beam was done after step 0. */
static int stopping_steps(float beam_size, bool ensure_full_beam, float local_eos_threshold) {
  const double script[1][2][3] = {{{0.05, 0.05, 0.9}, {0.05, 0.9, 0.05}}};
  const double neutral[3] = {0.5, 0.5, kTiny};
  lv_beam_search_params p = op_test_params(2);
  p.beam_size = beam_size;
  p.ensure_full_beam = ensure_full_beam;
  p.local_eos_threshold = local_eos_threshold;
  model m;
  model_init(&m, 1, 2, 3, 0, 2);
  m.script = &script[0][0][0];
  m.nscript = 1;
  m.fallback = neutral;
  lv_beam_search_result r;
  EXPECT_OK(lv_beam_search_decode(&p, 1, 3, 0, NULL, model_step, &m, &r));
  const int steps = r.num_steps;
  ck_assert_int_eq(steps, m.calls);
  lv_beam_search_result_free(&r);
  model_free(&m);
  return steps;
}

START_TEST(test_stopping) {
  ck_assert_int_eq(stopping_steps(3.0f, false, -100.0f), 2);  /* an active hyp within 3.0 */
  ck_assert_int_eq(stopping_steps(0.1f, false, -100.0f), 1);  /* none within 0.1: done */
  ck_assert_int_eq(stopping_steps(0.1f, true, -100.0f), 2);   /* ensure_full_beam wants 2 */
  ck_assert_int_eq(stopping_steps(0.1f, false, -0.05f), 2);   /* log .9 < -0.05: no </s> */
  /* An active hyp exactly at best - beam_size counts as below: best log .9, actives log .05. */
  const float best = (float)log(0.9), act = (float)log(0.05);
  float bs = best - act;
  while (best - bs > act) bs = nextafterf(bs, INFINITY);
  while (best - bs < act) bs = nextafterf(bs, -INFINITY);
  ck_assert(best - bs == act);
  ck_assert_int_eq(stopping_steps(bs, false, -100.0f), 1);
  while (!(best - bs < act)) bs = nextafterf(bs, INFINITY);
  ck_assert_int_eq(stopping_steps(bs, false, -100.0f), 2);
}
END_TEST

/* test_ensure_full_beam_more_strict: two </s> found within two steps. */
static int strict_steps(float beam_size, float local_eos_threshold, bool ensure_full_beam) {
  const double script[2][2][3] = {
      {{0.1, 0.1, 0.8}, {0.1, 0.1, 0.8}},
      {{0.1, 0.1, 0.8}, {0.9, 0.05, 0.05}},
  };
  const double neutral[3] = {0.5, 0.5, kTiny};
  lv_beam_search_params p = op_test_params(4);
  p.beam_size = beam_size;
  p.local_eos_threshold = local_eos_threshold;
  p.ensure_full_beam = ensure_full_beam;
  model m;
  model_init(&m, 1, 2, 3, 0, 4);
  m.script = &script[0][0][0];
  m.nscript = 2;
  m.fallback = neutral;
  lv_beam_search_result r;
  EXPECT_OK(lv_beam_search_decode(&p, 1, 3, 0, NULL, model_step, &m, &r));
  const int steps = r.num_steps;
  if (beam_size > 1) { /* ran to the end: [2] and [0 2] terminated */
    EXPECT_HYP(&r, 0, 0, 2);
    EXPECT_HYP(&r, 0, 1, 0, 2);
  }
  lv_beam_search_result_free(&r);
  model_free(&m);
  return steps;
}

START_TEST(test_ensure_full_beam) {
  for (int efb = 0; efb < 2; efb++) {
    ck_assert_int_eq(strict_steps(3.0f, -1.0f, efb), 4);
    /* Beam_size 0.1 ends the search after step 0 (actives log .1, best log .8), unless
     * ensure_full_beam waits for the second </s> of step 1. */
    ck_assert_int_eq(strict_steps(0.1f, -1.0f, efb), efb ? 2 : 1);
    ck_assert_int_eq(strict_steps(3.0f, -100.0f, efb), 4);
  }
}
END_TEST

/* ---- </s> rules, step 0, ties, normalization ----------------------------------------- */

START_TEST(test_eos_rules) {
  /* Step 0: 0 .45, 1 .35, </s> .2 (1.609 - 0.799 = 0.811 below the best). Step 1: </s> .3
   * against .35 (0.154 below), so it always ends there. */
  const double s0[3] = {0.45, 0.35, 0.2}, s1[3] = {0.35, 0.35, 0.3};
  double script[2][2][3];
  for (int i = 0; i < 2; i++) {
    memcpy(script[0][i], s0, sizeof s0);
    memcpy(script[1][i], s1, sizeof s1);
  }
  const struct {
    float delta, local;
    bool first_ends;
  } cases[] = {
      {1.0f, -100.0f, true},  /* within the delta */
      {0.8f, -100.0f, false}, /* just outside: dropped, not kept as an active hyp */
      {1.0f, -1.5f, false},   /* log .2 = -1.609 <= local threshold */
      {1.0f, -1.7f, true},
  };
  for (size_t c = 0; c < LV_ARRAY_LEN(cases); c++) {
    lv_beam_search_params p = op_test_params(2);
    p.valid_eos_max_logit_delta = cases[c].delta;
    p.local_eos_threshold = cases[c].local;
    model m;
    model_init(&m, 1, 2, 3, 0, 2);
    m.script = &script[0][0][0];
    m.nscript = 2;
    lv_beam_search_result r;
    EXPECT_OK(lv_beam_search_decode(&p, 1, 3, 0, NULL, model_step, &m, &r));
    /* A dropped </s> leaves 0 and 1 as the two active hyps either way. */
    ck_assert_int_eq(rec_id(&m, 1, 0), 0);
    ck_assert_int_eq(rec_id(&m, 1, 1), 1);
    if (cases[c].first_ends) {
      EXPECT_HYP(&r, 0, 0, 2);
      NEAR(r.raw_scores[0], log(0.2), 1e-6);
      EXPECT_HYP(&r, 0, 1, 0, 2);
    } else {
      EXPECT_HYP(&r, 0, 0, 0, 2);
      EXPECT_HYP(&r, 0, 1, 1, 2);
      NEAR(r.raw_scores[1], log(0.35) + log(0.3), 1e-6);
    }
    lv_beam_search_result_free(&r);
    model_free(&m);
  }
}
END_TEST

START_TEST(test_step0_expands_hyp0_only) {
  /* At step 0 the rows h > 0 of each sentence are ignored, however good they look. B = 2. */
  const double script[1][4][4] = {{
      {0.5, 0.3, 0.01, 0.19},  /* row 0: beam 0 hyp 0 */
      {0.1, 0.2, 0.01, 0.69},  /* row 1: beam 1 hyp 0 */
      {0.0001, 0.0001, 0.0001, 0.9997}, /* row 2: beam 0 hyp 1, ignored */
      {0.9997, 0.0001, 0.0001, 0.0001}, /* row 3: beam 1 hyp 1, ignored */
  }};
  const double last[4] = {0.1, 0.1, 0.7, 0.1};
  lv_beam_search_params p = op_test_params(2);
  model m;
  model_init(&m, 2, 4, 4, 0, 2);
  m.script = &script[0][0][0];
  m.nscript = 1;
  m.fallback = last;
  lv_beam_search_result r;
  EXPECT_OK(lv_beam_search_decode(&p, 2, 4, 0, NULL, model_step, &m, &r));
  /* Beam 0 keeps 0 (.5) and 1 (.3), beam 1 keeps 3 (.69) and 1 (.2), all from hyp 0. */
  ck_assert_int_eq(rec_id(&m, 1, 0), 0);
  ck_assert_int_eq(rec_id(&m, 1, 2), 1);
  ck_assert_int_eq(rec_id(&m, 1, 1), 3);
  ck_assert_int_eq(rec_id(&m, 1, 3), 1);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(rec_parent(&m, 1, i), i % 2);
  EXPECT_HYP(&r, 0, 0, 0, 2);
  EXPECT_HYP(&r, 0, 1, 1, 2);
  EXPECT_HYP(&r, 1, 0, 3, 2);
  EXPECT_HYP(&r, 1, 1, 1, 2);
  NEAR(r.raw_scores[2], log(0.69) + log(0.7), 1e-6);
  lv_beam_search_result_free(&r);
  model_free(&m);
}
END_TEST

/* Length normalization and coverage: A = [</s>] at step 0 (log p -1) and B = [3 </s>]
 * (-0.5 then -0.65); attention [.9 .1 0] at step 0, [0 .5 .5] after 3. */
static void ab_model(const model *m, int beam, const int32_t *prefix, int len, float *lp, float *att) {
  (void)m, (void)beam;
  for (int v = 0; v < 5; v++) lp[v] = -20.0f;
  if (len == 0) {
    lp[3] = -0.5f;
    lp[2] = -1.0f;
    att[0] = 0.9f, att[1] = 0.1f, att[2] = 0.0f;
  } else {
    lp[2] = -0.65f;
    if (prefix[0] == 3) att[0] = 0.0f, att[1] = 0.5f, att[2] = 0.5f;
  }
}

static double ref_norm(double raw, int len, const double *cov, int S, int src_size, double alpha, double beta,
                       double ratio) {
  double pen = 0;
  for (int j = 0; j < src_size; j++) pen += log(fmin(fmax((j < S ? cov[j] : 0.0) / ratio, 0.001), 0.5));
  return raw / (pow(len + 5.0, alpha) / pow(5.0, alpha)) + ratio * beta * pen;
}

START_TEST(test_length_norm_and_coverage) {
  const double covA[3] = {0.9, 0.1, 0.0}, covB[3] = {0.9, 0.6, 0.5};
  const struct {
    double alpha, beta, ratio;
    int src_size; /* -1: NULL src_lens */
    bool b_first;
  } cases[] = {
      {0.0, 0.0, 1.0, -1, false}, /* -1 > -1.15 */
      {1.0, 0.0, 1.0, -1, true},  /* -1/1.2 = -0.833 < -1.15/1.4 = -0.821 */
      {0.2, 0.0, 1.0, -1, false},
      {0.0, 0.1, 1.0, -1, true},  /* A's uncovered source costs 0.1*(log .5 + log .1 + log .001) */
      {0.0, 0.1, 2.0, -1, true},
      {0.0, 0.1, 1.0, 1, false},  /* only position 0 counts: both covered */
      {0.0, 0.1, 1.0, 2, true},
      {0.0, 0.1, 1.0, 5, true},   /* positions past the attention count as 0 */
      {0.5, 0.3, 0.7, 3, true},
  };
  for (size_t c = 0; c < LV_ARRAY_LEN(cases); c++) {
    lv_beam_search_params p = lv_beam_search_params_default();
    p.num_hyps_per_beam = 2;
    p.target_seq_len = 2;
    p.length_normalization = (float)cases[c].alpha;
    p.coverage_penalty = (float)cases[c].beta;
    p.target_seq_length_ratio = (float)cases[c].ratio;
    model m;
    model_init(&m, 1, 2, 5, 3, 2);
    m.fn = ab_model;
    const int32_t src_lens[1] = {cases[c].src_size};
    const int src_size = cases[c].src_size < 0 ? 3 : cases[c].src_size;
    lv_beam_search_result r;
    EXPECT_OK(lv_beam_search_decode(&p, 1, 5, 3, cases[c].src_size < 0 ? NULL : src_lens, model_step, &m, &r));
    const double nA = ref_norm(-1.0, 1, covA, 3, src_size, cases[c].alpha, cases[c].beta, cases[c].ratio);
    const double nB = ref_norm(-1.15, 2, covB, 3, src_size, cases[c].alpha, cases[c].beta, cases[c].ratio);
    ck_assert_msg((nB > nA) == cases[c].b_first, "case %zu: nA %g nB %g", c, nA, nB);
    const int hb = cases[c].b_first ? 0 : 1;
    EXPECT_HYP(&r, 0, hb, 3, 2);
    EXPECT_HYP(&r, 0, 1 - hb, 2);
    NEAR(r.scores[hb], nB, 1e-5);
    NEAR(r.scores[1 - hb], nA, 1e-5);
    NEAR(r.raw_scores[hb], -1.15, 1e-6);
    NEAR(r.raw_scores[1 - hb], -1.0, 1e-6);
    lv_beam_search_result_free(&r);
    model_free(&m);
  }
}
END_TEST

/* Equal normalized scores: the shorter hyp first (BetterTerminatedHyp). */
static void tie_model(const model *m, int beam, const int32_t *prefix, int len, float *lp, float *att) {
  (void)m, (void)beam, (void)prefix, (void)att;
  for (int v = 0; v < 4; v++) lp[v] = -30.0f;
  if (len == 0) lp[3] = -1.0f, lp[2] = -2.0f;
  else lp[2] = -1.0f;
}

START_TEST(test_tie_shorter_first) {
  lv_beam_search_params p = lv_beam_search_params_default();
  p.num_hyps_per_beam = 2;
  p.target_seq_len = 2;
  model m;
  model_init(&m, 1, 2, 4, 0, 2);
  m.fn = tie_model;
  lv_beam_search_result r;
  EXPECT_OK(lv_beam_search_decode(&p, 1, 4, 0, NULL, model_step, &m, &r));
  EXPECT_HYP(&r, 0, 0, 2);
  EXPECT_HYP(&r, 0, 1, 3, 2);
  ck_assert(r.scores[0] == -2.0f && r.scores[1] == -2.0f);
  lv_beam_search_result_free(&r);
  model_free(&m);
}
END_TEST

/* ---- brute force ---------------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* A fixed random model: log_softmax of logits in [-3, 3) hashed from (seed, beam, prefix). */
static void random_model(const model *m, int beam, const int32_t *prefix, int len, float *lp, float *att) {
  uint64_t h = mix((uint64_t)m->arg * 1000003u + (uint64_t)beam);
  for (int j = 0; j < len; j++) h = mix(h ^ (uint64_t)(prefix[j] + 1) * 0x100000001b3ull);
  double logits[64], mx = -1e300, sum = 0;
  for (int v = 0; v < m->V; v++) {
    logits[v] = ((double)(mix(h + (uint64_t)v) >> 11) / 9007199254740992.0) * 6.0 - 3.0;
    mx = fmax(mx, logits[v]);
  }
  for (int v = 0; v < m->V; v++) sum += exp(logits[v] - mx);
  for (int v = 0; v < m->V; v++) lp[v] = (float)(logits[v] - mx - log(sum));
  if (att)
    for (int j = 0; j < m->S; j++) att[j] = (float)((mix(h * 31 + (uint64_t)j) >> 40) / 16777216.0);
}

typedef struct {
  int32_t ids[8];
  int len;
  float raw, norm;
} seq;

static int seq_cmp(const void *a, const void *b) {
  const seq *x = a, *y = b;
  if (x->norm != y->norm) return x->norm > y->norm ? -1 : 1;
  return x->len - y->len;
}

/* Every sequence of up to T-1 non-</s> tokens then </s>, scored as the search scores them. */
static int enumerate(const model *m, int beam, int T, int eos, float alpha, seq *out) {
  int n = 0;
  int32_t pre[8];
  float lp[64];
  for (int L = 0; L < T; L++) {
    int total = 1;
    for (int j = 0; j < L; j++) total *= m->V - 1;
    for (int code = 0; code < total; code++) {
      int c = code;
      for (int j = 0; j < L; j++) {
        int v = c % (m->V - 1);
        c /= m->V - 1;
        pre[j] = v >= eos ? v + 1 : v;
      }
      float raw = 0.0f;
      for (int j = 0; j <= L; j++) {
        random_model(m, beam, pre, j, lp, NULL);
        raw = raw + lp[j < L ? pre[j] : eos];
      }
      seq *s = &out[n++];
      memcpy(s->ids, pre, (size_t)L * sizeof *pre);
      s->ids[L] = eos;
      s->len = L + 1;
      s->raw = raw;
      s->norm = raw / (float)(pow(L + 1 + 5.0, alpha) / pow(5.0, alpha));
    }
  }
  return n;
}

START_TEST(test_brute_force) {
  enum { V = 5, T = 4, H = 64, B = 2 };
  seq all[200];
  for (int seed = 1; seed <= 4; seed++) {
    const float alpha = seed % 2 ? 0.0f : 0.6f;
    lv_beam_search_params p = lv_beam_search_params_default();
    p.num_hyps_per_beam = H;
    p.target_seq_len = T;
    p.beam_size = 1e9f;
    p.valid_eos_max_logit_delta = 1e9f;
    p.local_eos_threshold = -1e9f;
    p.length_normalization = alpha;
    model m;
    model_init(&m, B, H * B, V, 0, T);
    m.fn = random_model;
    m.arg = seed;
    lv_beam_search_result r;
    EXPECT_OK(lv_beam_search_decode(&p, B, V, 0, NULL, model_step, &m, &r));
    for (int b = 0; b < B; b++) {
      const int n = enumerate(&m, b, T, 2, alpha, all);
      ck_assert_int_eq(n, 1 + 4 + 16 + 64);
      qsort(all, (size_t)n, sizeof *all, seq_cmp);
      /* The best H of the 85 sequences, in order, with their scores. */
      for (int h = 0; h < H; h++) {
        expect_hyp(&r, b, h, all[h].ids, all[h].len);
        ck_assert(r.raw_scores[b * H + h] == all[h].raw);
        ck_assert(r.scores[b * H + h] == all[h].norm);
      }
    }
    lv_beam_search_result_free(&r);
    model_free(&m);
  }
}
END_TEST

/* With a narrow beam, coverage and length normalization: every result is a real path whose
 * raw and normalized scores the model confirms, sorted best first. */
START_TEST(test_narrow_beam_consistent) {
  enum { V = 7, T = 5, H = 3, B = 3 };
  lv_beam_search_params p = lv_beam_search_params_default();
  p.num_hyps_per_beam = H;
  p.target_seq_len = T;
  p.length_normalization = 0.3f;
  p.coverage_penalty = 0.2f;
  p.force_eos_in_last_step = true;
  model m;
  model_init(&m, B, H * B, V, 4, T);
  m.fn = random_model;
  m.arg = 11;
  lv_beam_search_result r;
  EXPECT_OK(lv_beam_search_decode(&p, B, V, 4, NULL, model_step, &m, &r));
  float lp[16], att[4];
  for (int b = 0; b < B; b++) {
    ck_assert_int_gt(r.lens[b * H], 0);
    for (int h = 0; h < H; h++) {
      const int slot = b * H + h;
      if (!r.lens[slot]) continue;
      const int32_t *ids = r.ids + (size_t)slot * T;
      float raw = 0.0f, cov[4] = {0};
      for (int j = 0; j < r.lens[slot]; j++) {
        ck_assert(j == r.lens[slot] - 1 ? ids[j] == 2 : ids[j] != 2);
        random_model(&m, b, ids, j, lp, att);
        raw = raw + lp[ids[j]];
        for (int s = 0; s < 4; s++) cov[s] += att[s];
      }
      ck_assert(raw == r.raw_scores[slot]);
      double cv[4];
      for (int s = 0; s < 4; s++) cv[s] = cov[s];
      NEAR(r.scores[slot], ref_norm(raw, r.lens[slot], cv, 4, 4, 0.3, 0.2, 1.0), 1e-5);
      if (h > 0 && r.lens[slot]) ck_assert(r.scores[slot] <= r.scores[slot - 1]);
    }
  }
  lv_beam_search_result_free(&r);
  model_free(&m);
}
END_TEST

/* A vocabulary no larger than the beam: the rows with no candidate stay dead (Lingvo would
 * fill them with zero-score hyps). */
START_TEST(test_small_vocab_dead_rows) {
  const double probs[3] = {0.5, 0.3, 0.2};
  lv_beam_search_params p = lv_beam_search_params_default();
  p.num_hyps_per_beam = 4;
  p.target_seq_len = 2;
  p.force_eos_in_last_step = true;
  model m;
  model_init(&m, 1, 4, 3, 0, 2);
  m.fallback = probs;
  lv_beam_search_result r;
  EXPECT_OK(lv_beam_search_decode(&p, 1, 3, 0, NULL, model_step, &m, &r));
  /* Step 0: [2] ends, 0 and 1 live, rows 2-3 dead (fed </s>, parent = own row). */
  ck_assert_int_eq(rec_id(&m, 1, 2), 2);
  ck_assert_int_eq(rec_parent(&m, 1, 2), 2);
  ck_assert_int_eq(rec_parent(&m, 1, 3), 3);
  EXPECT_HYP(&r, 0, 0, 2);
  EXPECT_HYP(&r, 0, 1, 0, 2);
  EXPECT_HYP(&r, 0, 2, 1, 2);
  expect_empty(&r, 0, 3);
  lv_beam_search_result_free(&r);
  model_free(&m);
}
END_TEST

/* A realistic size once (V = 32k, H = 8, B = 32): the results are consistent paths. */
static void big_model(const model *m, int beam, const int32_t *prefix, int len, float *lp, float *att) {
  (void)att;
  uint64_t h = mix((uint64_t)beam * 7919u);
  for (int j = 0; j < len; j++) h = mix(h ^ (uint64_t)prefix[j]);
  for (int v = 0; v < m->V; v++) lp[v] = -10.0f - (float)((mix(h + (uint64_t)v) >> 40) / 1677721.6);
  lp[(int)(h % 1000) + 3] = -0.5f;
  if (len >= 3 + (int)(h % 4)) lp[2] = -0.3f;
}

START_TEST(test_large) {
  enum { V = 32000, H = 8, B = 32, T = 12 };
  lv_beam_search_params p = lv_beam_search_params_default();
  p.target_seq_len = T;
  model m;
  model_init(&m, B, H * B, V, 0, T);
  m.fn = big_model;
  lv_beam_search_result r;
  EXPECT_OK(lv_beam_search_decode(&p, B, V, 0, NULL, model_step, &m, &r));
  static float lp[V];
  for (int b = 0; b < B; b++) {
    ck_assert_int_gt(r.lens[b * H], 3);
    for (int h = 0; h < H; h++) {
      const int slot = b * H + h;
      if (!r.lens[slot]) continue;
      const int32_t *ids = r.ids + (size_t)slot * T;
      float raw = 0.0f;
      for (int j = 0; j < r.lens[slot]; j++) {
        big_model(&m, b, ids, j, lp, NULL);
        raw = raw + lp[ids[j]];
      }
      ck_assert(raw == r.raw_scores[slot]);
    }
  }
  lv_beam_search_result_free(&r);
  model_free(&m);
}
END_TEST

/* ---- differential: a plain re-statement of the kernel's rules --------------------------- */

/* Tie-heavy random model: log-probs on a grid of 0.5 (many equal scores), attention too. */
static void grid_model(const model *m, int beam, const int32_t *prefix, int len, float *lp, float *att) {
  uint64_t h = mix((uint64_t)m->arg * 7777u + (uint64_t)beam);
  for (int j = 0; j < len; j++) h = mix(h ^ (uint64_t)(prefix[j] + 1) * 0x9e3779b1u);
  for (int v = 0; v < m->V; v++) lp[v] = -0.25f - 0.5f * (float)(mix(h + (uint64_t)v) % 7);
  if (att)
    for (int j = 0; j < m->S; j++) att[j] = 0.125f * (float)(mix(h ^ (uint64_t)(j + 99)) % 5);
}

typedef struct {
  int32_t ids[16];
  int len;
  float cum, cov[4];
  bool live;
} ref_row;

typedef struct {
  float global, local;
  int32_t word, row;
} ref_cand;

static int32_t ref_eos_first = -1; /* qsort has no context: the </s> id when it ranks first */
static int ref_cand_cmp(const void *a, const void *b) {
  const ref_cand *x = a, *y = b;
  if (ref_eos_first >= 0 && (x->word == ref_eos_first) != (y->word == ref_eos_first))
    return x->word == ref_eos_first ? -1 : 1;
  if (x->global != y->global) return x->global > y->global ? -1 : 1;
  if (x->word != y->word) return x->word < y->word ? -1 : 1;
  return x->row - y->row;
}

typedef struct {
  int32_t ids[16];
  int len, beam;
  float raw, norm;
} ref_done;

static int ref_done_cmp(const void *a, const void *b) {
  const ref_done *x = a, *y = b;
  if (x->beam != y->beam) return x->beam - y->beam;
  if (x->norm != y->norm) return x->norm > y->norm ? -1 : 1;
  return x->len - y->len; /* full ties keep discovery order (the sort below is stable) */
}

/* Returns the number of steps run; fills done [ndone] in discovery order. */
static int ref_search(const lv_beam_search_params *p, const model *m, int B, ref_done *done, int *ndone) {
  const int H = p->num_hyps_per_beam, N = H * B, V = m->V, S = m->S, T = p->target_seq_len, eos = p->target_eos_id;
  ref_row *rows = calloc((size_t)N, sizeof *rows), *next = calloc((size_t)N, sizeof *next);
  ref_cand *cands = malloc((size_t)V * sizeof *cands), *merged = malloc((size_t)N * (H + 1) * sizeof *merged);
  float *lp = malloc((size_t)V * sizeof *lp), att[4], best[8];
  bool beam_done[8] = {0};
  int count[8] = {0};
  for (int i = 0; i < N; i++) rows[i].live = true;
  for (int b = 0; b < B; b++) best[b] = -1e36f;
  *ndone = 0;
  int t = 0;
  while (t < T) {
    const bool last = t == T - 1 && p->force_eos_in_last_step;
    for (int b = 0; b < B; b++) {
      const bool skip = p->terminate_beams_independently && beam_done[b];
      int nm = 0;
      for (int h = 0; h < H && !skip; h++) {
        const int i = h * B + b;
        if ((t == 0 && h > 0) || !rows[i].live) continue;
        grid_model(m, b, rows[i].ids, rows[i].len, lp, att);
        for (int v = 0; v < V; v++) cands[v] = (ref_cand){rows[i].cum + lp[v], lp[v], v, i};
        ref_eos_first = last ? eos : -1;
        qsort(cands, (size_t)V, sizeof *cands, ref_cand_cmp);
        int n = V < H + 1 ? V : H + 1;
        ref_eos_first = -1;
        qsort(cands, (size_t)n, sizeof *cands, ref_cand_cmp);
        bool has_eos = false;
        for (int j = 0; j < n; j++) has_eos |= cands[j].word == eos;
        if (p->force_eos_in_top_k && !has_eos) cands[n - 1] = (ref_cand){rows[i].cum + lp[eos], lp[eos], eos, i};
        for (int j = 0; j < n; j++) {
          const ref_cand *c = &cands[j];
          if (c->word != eos) {
            merged[nm++] = *c;
          } else if (last || (c->global > cands[0].global - p->valid_eos_max_logit_delta &&
                              c->local > p->local_eos_threshold)) {
            ref_done *d = &done[(*ndone)++];
            memcpy(d->ids, rows[i].ids, sizeof d->ids);
            d->ids[rows[i].len] = eos;
            d->len = rows[i].len + 1;
            d->beam = b;
            d->raw = c->global;
            float covf[4];
            for (int j2 = 0; j2 < S; j2++) covf[j2] = rows[i].cov[j2] + att[j2];
            float pen = 0.0f;
            for (int j2 = 0; j2 < S; j2++) pen += logf(fminf(fmaxf(covf[j2] / p->target_seq_length_ratio, 0.001f), 0.5f));
            d->norm = c->global / (float)(pow(d->len + 5.0, p->length_normalization) /
                                          pow(5.0, p->length_normalization)) +
                      (p->coverage_penalty != 0.0f ? p->target_seq_length_ratio * p->coverage_penalty * pen : 0.0f);
            if (c->global > best[b]) best[b] = c->global;
            count[b]++;
          }
        }
      }
      qsort(merged, (size_t)nm, sizeof *merged, ref_cand_cmp);
      for (int h = 0; h < H; h++) {
        const int i = h * B + b;
        if (skip) {
          next[i] = rows[i];
        } else if (h < nm) {
          const ref_row *pr = &rows[merged[h].row];
          next[i] = *pr;
          grid_model(m, b, pr->ids, pr->len, lp, att);
          for (int j = 0; j < S; j++) next[i].cov[j] = pr->cov[j] + att[j];
          next[i].ids[next[i].len++] = merged[h].word;
          next[i].cum = merged[h].global;
          next[i].live = true;
        } else {
          memset(&next[i], 0, sizeof next[i]);
        }
      }
    }
    memcpy(rows, next, (size_t)N * sizeof *rows);
    t++;
    bool all = true;
    for (int b = 0; b < B; b++) {
      if (beam_done[b]) continue;
      bool below = !(p->ensure_full_beam && count[b] < H);
      for (int h = 0; h < H && below; h++)
        if (rows[h * B + b].live && rows[h * B + b].cum > best[b] - p->beam_size) below = false;
      beam_done[b] = below;
      all = all && below;
    }
    if (all) break;
  }
  free(rows);
  free(next);
  free(cands);
  free(merged);
  free(lp);
  return t;
}

START_TEST(test_differential) {
  static ref_done done[20000];
  uint64_t rng = 12345;
  for (int iter = 0; iter < 300; iter++) {
    rng = mix(rng);
    const int Vs[] = {3, 5, 17, 40, 100};
    const int V = Vs[rng % 5], H = 1 + (int)(mix(rng + 1) % 5), B = 1 + (int)(mix(rng + 2) % 3);
    const int S = (int)(mix(rng + 3) % 4);
    lv_beam_search_params p = lv_beam_search_params_default();
    p.num_hyps_per_beam = H;
    p.target_seq_len = 1 + (int)(mix(rng + 4) % 6);
    const float deltas[] = {0.3f, 1.0f, 5.0f}, sizes[] = {0.5f, 3.0f, 1e9f}, locals[] = {-100.0f, -1.5f};
    p.valid_eos_max_logit_delta = deltas[mix(rng + 5) % 3];
    p.beam_size = sizes[mix(rng + 6) % 3];
    p.local_eos_threshold = locals[mix(rng + 7) % 2];
    const uint64_t f = mix(rng + 8);
    p.force_eos_in_top_k = f & 1;
    p.force_eos_in_last_step = f & 2;
    p.ensure_full_beam = f & 4;
    p.terminate_beams_independently = f & 8;
    p.length_normalization = (f & 16) ? 0.6f : 0.0f;
    p.coverage_penalty = (f & 32) ? 0.3f : 0.0f;
    p.target_seq_length_ratio = (f & 64) ? 0.8f : 1.0f;
    model m;
    model_init(&m, B, H * B, V, S, p.target_seq_len);
    m.fn = grid_model;
    m.arg = iter;
    int nd = 0;
    const int ref_steps = ref_search(&p, &m, B, done, &nd);
    /* Stable ranking: by beam, score, length, then discovery order. */
    for (int a = 1; a < nd; a++) {
      ref_done x = done[a];
      int j = a;
      while (j > 0 && ref_done_cmp(&x, &done[j - 1]) < 0) {
        done[j] = done[j - 1];
        j--;
      }
      done[j] = x;
    }
    lv_beam_search_result r;
    EXPECT_OK(lv_beam_search_decode(&p, B, V, S, NULL, model_step, &m, &r));
    ck_assert_msg(r.num_steps == ref_steps, "iter %d: %d steps, reference %d", iter, r.num_steps, ref_steps);
    int d = 0;
    for (int b = 0; b < B; b++) {
      int h = 0;
      for (; d < nd && done[d].beam == b; d++, h++) {
        if (h >= H) continue;
        const int slot = b * H + h;
        expect_hyp(&r, b, h, done[d].ids, done[d].len);
        ck_assert_msg(r.raw_scores[slot] == done[d].raw && r.scores[slot] == done[d].norm,
                      "iter %d beam %d hyp %d: scores %.9g %.9g, reference %.9g %.9g", iter, b, h,
                      r.raw_scores[slot], r.scores[slot], done[d].raw, done[d].norm);
      }
      for (; h < H; h++) expect_empty(&r, b, h);
    }
    lv_beam_search_result_free(&r);
    model_free(&m);
  }
}
END_TEST

/* ---- greedy --------------------------------------------------------------------------- */

/* Row 0 says 5 4 </s> (then 4 4 ...); row 1 says 3 forever; row 2 ties 0 and 1 (lowest wins) then </s>. */
static void greedy_model(const model *m, int row, const int32_t *prefix, int len, float *lp, float *att) {
  (void)m, (void)prefix, (void)att;
  for (int v = 0; v < 6; v++) lp[v] = -5.0f;
  if (row == 0) lp[len == 0 ? 5 : len == 1 ? 4 : len == 2 ? 2 : 4] = -0.1f;
  if (row == 1) lp[3] = -0.2f;
  if (row == 2) {
    if (len == 0) lp[0] = lp[1] = -0.7f;
    else lp[2] = -0.05f;
  }
}

START_TEST(test_greedy) {
  lv_greedy_search_params p = lv_greedy_search_params_default();
  ck_assert_int_eq(p.target_sos_id, 1);
  ck_assert_int_eq(p.target_eos_id, 2);
  p.target_seq_len = 5;
  model m;
  model_init(&m, 3, 3, 6, 0, 5);
  m.fn = greedy_model;
  lv_greedy_search_result r;
  EXPECT_OK(lv_greedy_search_decode(&p, 3, 6, model_step, &m, &r));
  ck_assert_int_eq(r.num_steps, 5); /* row 1 never ends */
  const int32_t want[3][5] = {{5, 4, 2, 0, 0}, {3, 3, 3, 3, 3}, {0, 2, 0, 0, 0}};
  const int lens[3] = {3, 5, 2};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(r.lens[i], lens[i]);
    for (int t = 0; t < 5; t++) ck_assert_int_eq(r.ids[i * 5 + t], want[i][t]);
  }
  ck_assert(r.done[0] && !r.done[1] && r.done[2]);
  NEAR(r.scores[0], -0.3, 1e-6);
  NEAR(r.scores[1], -1.0, 1e-6);
  NEAR(r.scores[2], -0.75, 1e-6);
  for (int t = 0; t < 5; t++)
    for (int i = 0; i < 3; i++) ck_assert_int_eq(rec_parent(&m, t, i), i);
  ck_assert_int_eq(rec_id(&m, 0, 0), 1);
  ck_assert_int_eq(rec_id(&m, 1, 2), 0);
  ck_assert_int_eq(rec_id(&m, 3, 0), 2);
  ck_assert_int_eq(rec_id(&m, 4, 0), 4); /* a finished row is still fed its argmax */
  lv_greedy_search_result_free(&r);
  model_free(&m);

  /* All rows end: the loop stops early. */
  p.target_seq_len = 10;
  model m2;
  model_init(&m2, 1, 1, 6, 0, 10);
  m2.fn = greedy_model;
  EXPECT_OK(lv_greedy_search_decode(&p, 1, 6, model_step, &m2, &r));
  ck_assert_int_eq(r.num_steps, 3);
  ck_assert_int_eq(m2.calls, 3);
  lv_greedy_search_result_free(&r);
  model_free(&m2);
}
END_TEST

/* Greedy equals beam search with one hyp when </s> ends a hyp only as the argmax: later
 * terminated hyps only add negative log-probs. */
START_TEST(test_greedy_vs_beam_one_hyp) {
  enum { V = 9, T = 6, B = 4 };
  lv_greedy_search_params gp = lv_greedy_search_params_default();
  gp.target_seq_len = T;
  lv_beam_search_params bp = lv_beam_search_params_default();
  bp.num_hyps_per_beam = 1;
  bp.target_seq_len = T;
  bp.valid_eos_max_logit_delta = 1e-4f; /* </s> ends a hyp only as its row's argmax */
  model m, mb;
  model_init(&m, B, B, V, 0, T);
  model_init(&mb, B, B, V, 0, T);
  m.fn = mb.fn = random_model;
  m.arg = mb.arg = 5;
  lv_greedy_search_result g;
  lv_beam_search_result r;
  EXPECT_OK(lv_greedy_search_decode(&gp, B, V, model_step, &m, &g));
  EXPECT_OK(lv_beam_search_decode(&bp, B, V, 0, NULL, model_step, &mb, &r));
  for (int b = 0; b < B; b++) {
    if (!g.done[b]) continue;
    expect_hyp(&r, b, 0, g.ids + b * T, g.lens[b]);
    ck_assert(r.raw_scores[b] == g.scores[b]);
  }
  lv_greedy_search_result_free(&g);
  lv_beam_search_result_free(&r);
  model_free(&m);
  model_free(&mb);
}
END_TEST

/* ---- params and errors ---------------------------------------------------------------- */

START_TEST(test_defaults) {
  lv_beam_search_params p = lv_beam_search_params_default();
  ck_assert_int_eq(p.num_hyps_per_beam, 8);
  ck_assert(p.target_seq_length_ratio == 1.0f && p.length_normalization == 0.0f && p.coverage_penalty == 0.0f);
  ck_assert(p.valid_eos_max_logit_delta == 5.0f && p.local_eos_threshold == -100.0f && p.beam_size == 3.0f);
  ck_assert_int_eq(p.target_sos_id, 1);
  ck_assert_int_eq(p.target_eos_id, 2);
  ck_assert_int_eq(p.target_seq_len, 0);
  ck_assert(!p.force_eos_in_top_k && !p.force_eos_in_last_step && !p.ensure_full_beam);
  ck_assert(p.allow_empty_terminated_hyp && !p.terminate_beams_independently);
  EXPECT_ERR(lv_beam_search_params_validate(&p, 10), LV_ERR_INVALID, "target_seq_len = 0");
  p.target_seq_len = 3;
  EXPECT_OK(lv_beam_search_params_validate(&p, 10));
}
END_TEST

static lv_status nan_step(void *ctx, int t, const int32_t *ids, const int32_t *parent, float *lp, float *att) {
  (void)ids, (void)parent, (void)att;
  const int *nv = ctx;
  for (int i = 0; i < nv[0]; i++) lp[i] = t == 1 ? NAN : -1.0f;
  return NULL;
}

START_TEST(test_errors) {
  lv_beam_search_params p = lv_beam_search_params_default();
  p.target_seq_len = 4;
  lv_beam_search_params q;
#define BAD(field, value, ...)                                                   \
  q = p;                                                                         \
  q.field = value;                                                               \
  EXPECT_ERR(lv_beam_search_params_validate(&q, 10), LV_ERR_INVALID, __VA_ARGS__)
  BAD(num_hyps_per_beam, 0, "num_hyps_per_beam = 0", ">= 1");
  BAD(target_seq_len, -1, "target_seq_len = -1");
  BAD(beam_size, 0.0f, "beam_size = 0", "> 0");
  BAD(beam_size, NAN, "beam_size = nan");
  BAD(length_normalization, -0.5f, "length_normalization = -0.5");
  BAD(coverage_penalty, -1.0f, "coverage_penalty = -1");
  BAD(target_seq_length_ratio, 0.0f, "target_seq_length_ratio = 0");
  BAD(valid_eos_max_logit_delta, NAN, "valid_eos_max_logit_delta");
  BAD(local_eos_threshold, NAN, "local_eos_threshold");
  BAD(target_eos_id, 10, "target_eos_id = 10", "vocab_size 10");
  BAD(target_eos_id, -1, "target_eos_id = -1");
  BAD(target_sos_id, -3, "target_sos_id = -3");
#undef BAD
  EXPECT_ERR(lv_beam_search_params_validate(&p, 0), LV_ERR_INVALID, "vocab_size = 0");

  model m;
  model_init(&m, 1, 8, 10, 0, 4);
  m.fn = random_model;
  lv_beam_search_result r;
  EXPECT_ERR(lv_beam_search_decode(&p, 1, 10, 0, NULL, NULL, &m, &r), LV_ERR_INVALID, "step callback is NULL");
  EXPECT_ERR(lv_beam_search_decode(&p, 0, 10, 0, NULL, model_step, &m, &r), LV_ERR_INVALID, "num_beams = 0");
  EXPECT_ERR(lv_beam_search_decode(&p, 1, 10, -2, NULL, model_step, &m, &r), LV_ERR_INVALID, "src_len = -2");
  const int32_t neg[1] = {-1};
  EXPECT_ERR(lv_beam_search_decode(&p, 1, 10, 3, neg, model_step, &m, &r), LV_ERR_INVALID, "src_lens[0] = -1");
  q = p;
  q.target_eos_id = 12;
  EXPECT_ERR(lv_beam_search_decode(&q, 1, 10, 0, NULL, model_step, &m, &r), LV_ERR_INVALID, "target_eos_id = 12");
  ck_assert_ptr_null(r.ids);
  ck_assert_int_eq(m.calls, 0);

  /* The model's error comes back with the step. */
  m.fail_at = 2;
  EXPECT_ERR(lv_beam_search_decode(&p, 1, 10, 0, NULL, model_step, &m, &r), LV_ERR_INTERNAL, "beam search step 2",
             "model exploded");
  ck_assert_ptr_null(r.ids);
  model_free(&m);

  /* NaN log-probs: Lingvo's message. */
  int nv[1] = {8 * 10};
  EXPECT_ERR(lv_beam_search_decode(&p, 1, 10, 0, NULL, nan_step, nv, &r), LV_ERR_INTERNAL, "step 1",
             "model is producing NaNs in the output");

  lv_greedy_search_params g = lv_greedy_search_params_default();
  lv_greedy_search_result gr;
  EXPECT_ERR(lv_greedy_search_decode(&g, 1, 10, model_step, NULL, &gr), LV_ERR_INVALID, "target_seq_len = 0");
  g.target_seq_len = 3;
  EXPECT_ERR(lv_greedy_search_decode(&g, 0, 10, model_step, NULL, &gr), LV_ERR_INVALID, "batch = 0");
  EXPECT_ERR(lv_greedy_search_decode(&g, 1, 2, model_step, NULL, &gr), LV_ERR_INVALID, "target_eos_id = 2",
             "vocab_size 2");
  EXPECT_ERR(lv_greedy_search_decode(&g, 1, 10, NULL, NULL, &gr), LV_ERR_INVALID, "step callback is NULL");
  model m2;
  model_init(&m2, 1, 1, 10, 0, 3);
  m2.fn = random_model;
  m2.fail_at = 1;
  EXPECT_ERR(lv_greedy_search_decode(&g, 1, 10, model_step, &m2, &gr), LV_ERR_INTERNAL, "greedy search step 1");
  ck_assert_ptr_null(gr.ids);
  model_free(&m2);
}
END_TEST

int main(void) {
  Suite *s = suite_create("beam_search");
  TCase *tc = tcase_create("beam_search");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_defaults);
  tcase_add_test(tc, test_force_eos_in_top_k);
  tcase_add_test(tc, test_three_steps_eos);
  tcase_add_test(tc, test_three_steps_force_eos_in_last_step);
  tcase_add_test(tc, test_force_eos_in_last_step_pulls_eos_in);
  tcase_add_test(tc, test_beam_independence);
  tcase_add_test(tc, test_stopping);
  tcase_add_test(tc, test_ensure_full_beam);
  tcase_add_test(tc, test_eos_rules);
  tcase_add_test(tc, test_step0_expands_hyp0_only);
  tcase_add_test(tc, test_length_norm_and_coverage);
  tcase_add_test(tc, test_tie_shorter_first);
  tcase_add_test(tc, test_brute_force);
  tcase_add_test(tc, test_narrow_beam_consistent);
  tcase_add_test(tc, test_small_vocab_dead_rows);
  tcase_add_test(tc, test_large);
  tcase_add_test(tc, test_differential);
  tcase_add_test(tc, test_greedy);
  tcase_add_test(tc, test_greedy_vs_beam_one_hyp);
  tcase_add_test(tc, test_errors);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
