/* mt.model.RNMTModel: Lingvo's variable names (cells in their FRNN's parent scope),
 * config errors, stepwise decoding (bin/decoder's mt_decode ops) giving the teacher-forced
 * log-probs and attention probabilities (also with beam-style parent reordering), a batch
 * padded longer giving the same loss, and a tiny model that overfits 50 pairs: training
 * loss < 0.1, then greedy and beam search reproduce every training target exactly; the whole
 * loss and every gradient against a PyTorch reference written from Lingvo (parity); and the
 * tiny model learning to copy random sequences it has never seen (attention at work). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "att_util.h"
#include "check_util.h"
#include "core/ops.h"
#include "kernels/cpu/cpu_kernels.h"
#include "search/beam_search.h"
#include "models/rnmt.h"
#include "search/seq_decode.h"
#include "mt_util.h"
#include "optim/optimizer.h"
#include "parity.h"

enum { V = 24, E = 16, H = 24 };

/* A tiny RNMT+: LN cells (no output nonlinearity) of 24 units, 2 bi-LSTM encoder layers
 * projected to 24, a 2-layer decoder with 2-head multi-headed additive attention. */
static lv_params *tiny_params_with(double smoothing, bool per_word, bool prev_ctx, bool zero_state) {
  lv_tasks_register_all();
  lv_params *p = lv_mt_rnmt_model.params();
  EXPECT_OK(lv_params_set_string(p, "name", "tiny"));
  EXPECT_OK(lv_params_set_int(p, "encoder.emb.vocab_size", V));
  EXPECT_OK(lv_params_set_int(p, "encoder.emb.embedding_dim", E));
  EXPECT_OK(lv_params_set_int(p, "encoder.emb.max_num_shards", 2));
  EXPECT_OK(lv_params_set_float(p, "encoder.emb.params_init.scale", 0.3));
  EXPECT_OK(lv_params_set_class(p, "encoder.lstm_tpl", "LayerNormalizedLSTMCellSimple"));
  EXPECT_OK(lv_params_set_bool(p, "encoder.lstm_tpl.output_nonlinearity", false));
  EXPECT_OK(lv_params_set_string(p, "encoder.lstm_tpl.params_init.method", "uniform"));
  EXPECT_OK(lv_params_set_float(p, "encoder.lstm_tpl.params_init.scale", 0.2));
  EXPECT_OK(lv_params_set_int(p, "encoder.lstm_cell_size", H));
  EXPECT_OK(lv_params_set_int(p, "encoder.num_lstm_layers", 2));
  EXPECT_OK(lv_params_set_int(p, "encoder.residual_start", 1));
  EXPECT_OK(lv_params_set_int(p, "encoder.encoder_out_dim", H));
  EXPECT_OK(lv_params_set_int(p, "decoder.emb.vocab_size", V));
  EXPECT_OK(lv_params_set_int(p, "decoder.emb.embedding_dim", E));
  EXPECT_OK(lv_params_set_float(p, "decoder.emb.params_init.scale", 0.3));
  EXPECT_OK(lv_params_set_int(p, "decoder.source_dim", H));
  EXPECT_OK(lv_params_set_int(p, "decoder.rnn_cell_dim", H));
  EXPECT_OK(lv_params_set_int(p, "decoder.rnn_layers", 2));
  EXPECT_OK(lv_params_set_int(p, "decoder.residual_start", 1));
  const char *cells[2] = {"decoder.atten_rnn_cell_tpl", "decoder.rnn_cell_tpl"};
  char k[128];
  for (int i = 0; i < 2; i++) {
    EXPECT_OK(lv_params_set_class(p, cells[i], "LayerNormalizedLSTMCellSimple"));
    snprintf(k, sizeof k, "%s.output_nonlinearity", cells[i]);
    EXPECT_OK(lv_params_set_bool(p, k, false));
    snprintf(k, sizeof k, "%s.params_init.method", cells[i]);
    EXPECT_OK(lv_params_set_string(p, k, "uniform"));
    snprintf(k, sizeof k, "%s.params_init.scale", cells[i]);
    EXPECT_OK(lv_params_set_float(p, k, 0.2));
  }
  EXPECT_OK(lv_params_set_class(p, "decoder.attention", "MultiHeadedAttention"));
  EXPECT_OK(lv_params_set_int(p, "decoder.attention.hidden_dim", H));
  EXPECT_OK(lv_params_set_int(p, "decoder.attention.context_dim", H));
  EXPECT_OK(lv_params_set_int(p, "decoder.attention.num_attention_heads", 2));
  EXPECT_OK(lv_params_set_class(p, "decoder.attention.inner_atten_params", "AdditiveAttention"));
  EXPECT_OK(lv_params_set_bool(p, "decoder.feed_attention_context_vec_to_softmax", true));
  EXPECT_OK(lv_params_set_int(p, "decoder.softmax.num_classes", V));
  EXPECT_OK(lv_params_set_int(p, "decoder.softmax.num_shards", 2));
  EXPECT_OK(lv_params_set_float(p, "decoder.softmax.params_init.scale", 0.2));
  EXPECT_OK(lv_params_set_bool(p, "decoder.use_prev_atten_ctx", prev_ctx));
  EXPECT_OK(lv_params_set_bool(p, "decoder.use_zero_atten_state", zero_state));
  return mt_loss_params(p, smoothing, per_word);
}

static lv_params *tiny_params(double smoothing, bool per_word) { return tiny_params_with(smoothing, per_word, false, false); }

static lv_task *make_task(const lv_params *p, lv_varstore *vs) { return mt_make_task(&lv_mt_rnmt_model, p, vs, 11); }

/* NB pairs: source 3..7 tokens (the last </s>), target 2..6 tokens, the target a fixed
 * function of the source (NmtInput's layout: ids start with <s>, labels end with </s>). */
enum { MAXN = 50, MAXS = 8, MAXT = 8 };

typedef struct host_batch {
  int n, S, T;
  int slen[MAXN], tlen[MAXN];
  int32_t sids[MAXN * 16], tids[MAXN * 16], tlab[MAXN * 16];
  float spad[MAXN * 16], tpad[MAXN * 16], tw[MAXN * 16];
  lv_tensor t[6];
  lv_batch b;
} host_batch;

/* Pairs padded to S x T (S >= MAXS, T >= MAXT); padded steps hold junk ids. */
static void make_batch(host_batch *h, int n, int S, int T) {
  memset(h, 0, sizeof *h);
  h->n = n, h->S = S, h->T = T;
  uint32_t x = 12345;
  for (int b = 0; b < n; b++) {
    x = x * 1103515245u + 12345u;
    h->slen[b] = 3 + (int)((x >> 16) % 5);
    int words[8];
    for (int s = 0; s + 1 < h->slen[b]; s++) {
      x = x * 1103515245u + 12345u;
      words[s] = 3 + (int)((x >> 16) % (V - 3));
    }
    for (int s = 0; s < S; s++) {
      bool real = s < h->slen[b];
      h->sids[b * S + s] = real ? (s == h->slen[b] - 1 ? 2 : words[s]) : (s * 7 + b) % V;
      h->spad[b * S + s] = real ? 0.0f : 1.0f;
    }
    /* Target: the source words reversed, each mapped to another id (one word dropped on
     * odd sentences). */
    int nw = h->slen[b] - 1 - (b % 2 && h->slen[b] > 3), lab[8];
    for (int j = 0; j < nw; j++) lab[j] = 3 + (words[h->slen[b] - 2 - j] * 5 + 1) % (V - 3);
    lab[nw] = 2;
    h->tlen[b] = nw + 1;
    for (int t = 0; t < T; t++) {
      bool real = t < h->tlen[b];
      h->tids[b * T + t] = real ? (t == 0 ? 1 : lab[t - 1]) : (t * 5 + b) % V;
      h->tlab[b * T + t] = real ? lab[t] : (t * 3) % V;
      h->tpad[b * T + t] = real ? 0.0f : 1.0f;
      h->tw[b * T + t] = real ? 1.0f : 0.0f;
    }
  }
  mt_batch_wrap(&h->b, h->t, n, S, T, h->sids, h->spad, h->tids, h->tpad, h->tlab, h->tw);
}

static double eval_loss(lv_task *t, host_batch *h, double *weight, double *acc) {
  double log_pplx = 0, loss = mt_eval_loss(t, &h->b, weight, acc, &log_pplx);
  ck_assert(isfinite(log_pplx) && isfinite(loss));
  return loss;
}

START_TEST(test_variable_names) {
  lv_params *p = tiny_params(0.1, true);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  static const struct { const char *name; int64_t d0, d1; } want[] = {
      {"tiny/enc/emb/var_0", V, E},
      {"tiny/enc/L0_rnn_fwd/wm", E + H, 4 * H},
      {"tiny/enc/L0_rnn_fwd/b", 4 * H, 0},
      {"tiny/enc/L0_rnn_fwd/ln_scale", 4 * H, 0},
      {"tiny/enc/L0_rnn_bak/wm", E + H, 4 * H},
      {"tiny/enc/L1_rnn_fwd/wm", 2 * H + H, 4 * H},
      {"tiny/enc/L1_rnn_bak/ln_scale", 4 * H, 0},
      {"tiny/enc/proj/w", 2 * H, H},
      {"tiny/enc/proj/b", H, 0},
      {"tiny/dec/emb/var_0", V, E},
      {"tiny/dec/atten_rnn/wm", E + H + H, 4 * H},
      {"tiny/dec/atten_rnn/ln_scale", 4 * H, 0},
      {"tiny/dec/atten/source_proj", H, H},
      {"tiny/dec/atten/query_proj", H, H},
      {"tiny/dec/atten/query_proj_b", H, 0},
      {"tiny/dec/atten/inner_att/hidden_var", H / 2, 0},
      {"tiny/dec/rnn1/wm", H + H + H, 4 * H},
      {"tiny/dec/rnn1/b", 4 * H, 0},
      {"tiny/dec/softmax/weight_0", 2 * H, V / 2},
      {"tiny/dec/softmax/bias_1", V / 2, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char n[256];
    snprintf(n, sizeof n, "%s/var", want[i].name);
    lv_var *v = lv_varstore_find(vs, n);
    ck_assert_msg(v, "missing %s", n);
    ck_assert_msg(v->value.shape.d[0] == want[i].d0 && (!want[i].d1 || v->value.shape.d[1] == want[i].d1),
                  "%s: shape [%lld, %lld]", n, (long long)v->value.shape.d[0], (long long)v->value.shape.d[1]);
  }
  /* 1 + 1 embedding shards (too small for 2), 4 encoder cells and 2 decoder cells of 3 vars each, proj 2,
   * attention 4 projections + 3 inner vars, softmax 2 x 2. */
  ck_assert_int_eq(lv_varstore_count(vs), 2 + 6 * 3 + 2 + 7 + 4);
  ck_assert_int_eq(lv_mt_rnmt_model.seq_decode->vocab_size(t), V);
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

static void expect_create_err(const char *key, int64_t v, const char *want1, const char *want2) {
  lv_tasks_register_all();
  lv_params *p = lv_mt_rnmt_model.params();
  EXPECT_OK(lv_params_set_string(p, "name", "x"));
  EXPECT_OK(lv_params_set_int(p, "encoder.num_lstm_layers", 1));
  EXPECT_OK(lv_params_set_int(p, "decoder.rnn_layers", 1));
  EXPECT_OK(lv_params_set_int(p, key, v));
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = NULL;
  EXPECT_ERR(lv_mt_rnmt_model.create(p, NULL, vs, &t), LV_ERR_INVALID, want1, want2);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}

START_TEST(test_bad_params) {
  expect_create_err("decoder.softmax.num_classes", 100, "softmax.num_classes", "emb.vocab_size");
  expect_create_err("decoder.source_dim", 512, "task.decoder.source_dim", "encoder_out_dim");
  expect_create_err("encoder.num_lstm_layers", 0, "task.encoder.num_lstm_layers", "[1, 32]");
}
END_TEST

/* The decode ops' begin on host batch b (its attention lengths are not checked here). */
static lv_status begin_host(const lv_seq_decode_ops *ops, lv_task *t, lv_graph *g, const lv_batch *b, void **st) {
  int64_t atten_len = 0;
  int32_t atten_lens[MAXN];
  return ops->begin(t, g, b, &atten_len, atten_lens, st);
}

typedef struct step_ctx {
  const lv_seq_decode_ops *ops;
  void *st;
  int n;
} step_ctx;

static lv_status step_fn(void *ctx, int t, const int32_t *step_ids, const int32_t *parent, float *log_probs,
                         float *atten_probs) {
  step_ctx *c = ctx;
  return c->ops->step(c->st, c->n, step_ids, t ? parent : NULL, log_probs, atten_probs);
}

/* Teacher-forced log-probs and attention vs. the decode ops' steps; with two hyps per
 * sentence whose rows swap each step through parent. Loop index _i: MTDecoderV1's
 * use_prev_atten_ctx (bit 0) and use_zero_atten_state (bit 1). */
START_TEST(test_step_matches_teacher_forcing) {
  lv_params *p = tiny_params_with(0.1, true, _i & 1, _i & 2);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  const lv_seq_decode_ops *ops = lv_mt_rnmt_model.seq_decode;
  ck_assert(ops && ops->atten_probs);
  enum { NB = 4 };
  host_batch h;
  make_batch(&h, NB, MAXS, MAXT);
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *sids = lv_graph_from_host(g, &h.t[0]), *spad = lv_graph_from_host(g, &h.t[1]);
  lv_tensor *tids = lv_graph_from_host(g, &h.t[2]), *tpad = lv_graph_from_host(g, &h.t[3]);
  lv_tensor *enc, *pads, *lp, *ap;
  ck_assert(lv_rnmt_encode(t, g, sids, spad, &enc, &pads));
  ck_assert_int_eq(enc->shape.d[0], MAXS);
  ck_assert_int_eq(enc->shape.d[2], H);
  ck_assert(lv_rnmt_log_probs(t, g, enc, pads, tids, tpad, &lp, &ap));
  ck_assert_int_eq(lp->shape.d[2], V);
  ck_assert_int_eq(ap->shape.d[2], MAXS);
  for (int beam = 1; beam <= 2; beam++) {
    void *st = NULL;
    EXPECT_OK(begin_host(ops, t, g, &h.b, &st));
    int n = beam * NB;
    int32_t ids[2 * NB], parent[2 * NB];
    float out[2 * NB * V], atten[2 * NB * MAXS];
    double maxd = 0, maxa = 0;
    for (int s = 0; s < MAXT; s++) {
      for (int r = 0; r < n; r++) {
        ids[r] = h.tids[(r % NB) * MAXT + s];
        parent[r] = beam == 1 ? r : (r + NB) % n;
      }
      EXPECT_OK(ops->step(st, n, ids, s ? parent : NULL, out, atten));
      for (int r = 0; r < n; r++) {
        int b = r % NB;
        if (s >= h.tlen[b]) continue;
        for (int v = 0; v < V; v++) maxd = fmax(maxd, fabs(out[r * V + v] - lv_f32(lp)[(s * NB + b) * V + v]));
        for (int j = 0; j < MAXS; j++)
          maxa = fmax(maxa, fabs(atten[r * MAXS + j] - lv_f32(ap)[(s * NB + b) * MAXS + j]));
      }
    }
    ck_assert_msg(maxd < 1e-5, "beam %d: stepwise vs teacher-forced log-probs differ by %g", beam, maxd);
    ck_assert_msg(maxa < 1e-5, "beam %d: stepwise vs teacher-forced attention differs by %g", beam, maxa);
    int32_t bad = V, zero = 0, other = 1;
    EXPECT_ERR(ops->step(st, 1, &bad, NULL, out, NULL), LV_ERR_INVALID, "multiple of the batch");
    for (int r = 0; r < n; r++) ids[r] = r + 1 < n ? 3 : bad;
    EXPECT_ERR(ops->step(st, n, ids, NULL, out, NULL), LV_ERR_INVALID, "is outside [0, 24)");
    /* A parent of another sentence. */
    int32_t ids4[NB] = {3, 3, 3, 3}, par4[NB] = {other, zero, 2, 3};
    EXPECT_ERR(ops->step(st, NB, ids4, par4, out, NULL), LV_ERR_INVALID, "parent[0]");
    ops->end(st);
  }
  lv_graph_destroy(g);
  lv_batch_free(&h.b);
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

/* Graph memory of a search: the graph is rewound before every step and the state a step
 * passes on lives in buffers outside it, so the peak does not grow with the steps (it did,
 * linearly, when every step's states and attention stayed in the graph). */
static size_t decode_peak(lv_task *t, host_batch *h, int nb, int steps) {
  const lv_seq_decode_ops *ops = lv_mt_rnmt_model.seq_decode;
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  void *st = NULL;
  EXPECT_OK(begin_host(ops, t, g, &h->b, &st));
  enum { K = 3 };
  int n = K * nb;
  int32_t *ids = malloc(sizeof *ids * n), *parent = malloc(sizeof *parent * n);
  float *out = malloc(sizeof(float) * n * V), *atten = malloc(sizeof(float) * n * MAXS);
  for (int s = 0; s < steps; s++) {
    for (int r = 0; r < n; r++) ids[r] = 3 + (r + s) % (V - 3), parent[r] = (r + nb) % n;
    EXPECT_OK(ops->step(st, n, ids, s ? parent : NULL, out, atten));
  }
  ops->end(st);
  size_t peak = lv_graph_arena_peak(g);
  lv_graph_destroy(g);
  free(ids);
  free(parent);
  free(out);
  free(atten);
  return peak;
}

START_TEST(test_decode_memory_constant) {
  lv_params *p = tiny_params(0.1, true);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  enum { NB = 4 };
  host_batch h;
  make_batch(&h, NB, MAXS, MAXT);
  size_t p20 = decode_peak(t, &h, NB, 20), p200 = decode_peak(t, &h, NB, 200);
  ck_assert_msg(p200 < p20 + p20 / 4, "graph peak %zu bytes for 200 steps vs %zu for 20", p200, p20);
  lv_batch_free(&h.b);
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

START_TEST(test_padding_invariance) {
  for (int per_word = 0; per_word < 2; per_word++) {
    lv_params *p = tiny_params(0.1, per_word);
    lv_varstore *vs = lv_varstore_create();
    lv_task *t = make_task(p, vs);
    host_batch *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    make_batch(a, 6, MAXS, MAXT);
    make_batch(b, 6, MAXS + 5, MAXT + 6);
    double wa, wb, acc_a, acc_b;
    double la = eval_loss(t, a, &wa, &acc_a), lb = eval_loss(t, b, &wb, &acc_b);
    ck_assert_msg(fabs(la - lb) < 1e-5, "loss %g vs %g when padded longer", la, lb);
    ck_assert(wa == wb && acc_a == acc_b);
    int tokens = 0;
    for (int i = 0; i < 6; i++) tokens += a->tlen[i];
    ck_assert(wa == (per_word ? tokens : 6));
    lv_batch_free(&a->b);
    lv_batch_free(&b->b);
    free(a);
    free(b);
    t->cls->destroy(t);
    lv_varstore_destroy(vs);
    lv_params_free(p);
  }
}
END_TEST

/* The whole model's training loss and every variable's gradient against a float64 PyTorch
 * reference written from Lingvo's MTEncoderBiRNN and MTDecoderV1 (tests/parity/
 * rnmt_model.py): the layers have their own parity cases, this checks how the task wires
 * them (encoder directions and residuals, the attention's query and context timing, the
 * softmax input, label smoothing and the per-sequence or per-word loss). Variant 0:
 * per-sequence loss with label smoothing; 1: per-word loss, use_prev_atten_ctx. */
START_TEST(test_parity_with_pytorch) {
  if (!lv_parity_have_torch()) return;
  const bool per_word = _i == 1, prev_ctx = _i == 1;
  const double smoothing = _i == 1 ? 0.0 : 0.1;
  lv_params *p = tiny_params_with(smoothing, per_word, prev_ctx, false);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  att_randomize_vars(vs, 0.4f, 77 + (uint64_t)_i);
  host_batch *h = malloc(sizeof *h);
  make_batch(h, 5, MAXS + 1, MAXT + 1);
  lv_parity pp;
  lv_parity_open(&pp, per_word ? "rnmt_model_word" : "rnmt_model_seq");
  lv_parity_put_raw(&pp, "in:src.ids", LV_I32, lv_shape2(h->n, h->S), h->sids);
  lv_parity_put_raw(&pp, "in:src.paddings", LV_F32, lv_shape2(h->n, h->S), h->spad);
  lv_parity_put_raw(&pp, "in:tgt.ids", LV_I32, lv_shape2(h->n, h->T), h->tids);
  lv_parity_put_raw(&pp, "in:tgt.paddings", LV_F32, lv_shape2(h->n, h->T), h->tpad);
  lv_parity_put_raw(&pp, "in:tgt.labels", LV_I32, lv_shape2(h->n, h->T), h->tlab);
  lv_parity_put_raw(&pp, "in:tgt.weights", LV_F32, lv_shape2(h->n, h->T), h->tw);
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, true); /* the tiny model has no dropout */
  lv_batch gb;
  lv_batch_init(&gb);
  EXPECT_OK(lv_batch_to_graph(g, &h->b, &gb));
  lv_metrics m = {0};
  ck_assert_msg(t->cls->fprop(t, g, &gb, false, 0, &m), "%s", lv_status_msg(lv_graph_status(g)));
  EXPECT_OK(lv_graph_backward(g, m.loss));
  lv_parity_put(&pp, "out:loss", m.loss);
  double lp = mt_metric(&m, "log_pplx", NULL);
  lv_parity_put_raw(&pp, "out:log_pplx", LV_F64, lv_shape1(1), &lp);
  lv_parity_put_vars(&pp, vs);
  static const char *cells[] = {"tiny/enc/L0_rnn_fwd", "tiny/enc/L0_rnn_bak", "tiny/enc/L1_rnn_fwd",
                                "tiny/enc/L1_rnn_bak", "tiny/dec/atten_rnn", "tiny/dec/rnn1"};
  for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
    char k[96];
    static const char *keys[] = {"cap", "fgb", "nonlin", "eps"};
    const double vals[] = {0.0, 0.0, 0.0, 1e-8};
    for (int j = 0; j < 4; j++) {
      snprintf(k, sizeof k, "%s.%s", cells[i], keys[j]);
      lv_parity_attr(&pp, k, vals[j]);
    }
  }
  lv_parity_attr(&pp, "num_heads", 2);
  lv_parity_attr(&pp, "label_smoothing", smoothing);
  lv_parity_attr(&pp, "per_word_avg_loss", per_word);
  lv_parity_attr(&pp, "use_prev_atten_ctx", prev_ctx);
  lv_parity_attr(&pp, "enc_residual_start", 1);
  lv_parity_attr(&pp, "dec_residual_start", 1);
  lv_parity_run(&pp, "rnmt_model.py");
  lv_metrics_free(&m);
  lv_batch_free(&gb);
  lv_graph_destroy(g);
  lv_batch_free(&h->b);
  free(h);
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

/* A batch of n random sequences of 4..MAXS-1 words (ids 3..V-1) ending in </s>, the
 * target the same words: only attention can predict a word (an LM cannot). */
static void make_copy_batch(host_batch *h, int n, uint32_t seed) {
  memset(h, 0, sizeof *h);
  h->n = n, h->S = MAXS, h->T = MAXT;
  uint32_t x = seed * 2654435761u + 1;
  for (int b = 0; b < n; b++) {
    x = x * 1103515245u + 12345u;
    int nw = 3 + (int)((x >> 16) % (MAXS - 3)), words[MAXS];
    for (int s = 0; s < nw; s++) {
      x = x * 1103515245u + 12345u;
      words[s] = 3 + (int)((x >> 16) % (V - 3));
    }
    h->slen[b] = nw + 1;
    h->tlen[b] = nw + 1;
    for (int s = 0; s < MAXS; s++) {
      bool real = s < h->slen[b];
      h->sids[b * MAXS + s] = real ? (s == nw ? 2 : words[s]) : 0;
      h->spad[b * MAXS + s] = real ? 0.0f : 1.0f;
    }
    for (int t = 0; t < MAXT; t++) {
      bool real = t < h->tlen[b];
      h->tids[b * MAXT + t] = real ? (t == 0 ? 1 : words[t - 1]) : 0;
      h->tlab[b * MAXT + t] = real ? (t == nw ? 2 : words[t]) : 0;
      h->tpad[b * MAXT + t] = real ? 0.0f : 1.0f;
      h->tw[b * MAXT + t] = real ? 1.0f : 0.0f;
    }
  }
  mt_batch_wrap(&h->b, h->t, n, MAXS, MAXT, h->sids, h->spad, h->tids, h->tpad, h->tlab, h->tw);
}

/* Attention learns to copy: trained on fresh random batches, the model predicts the next
 * word of unseen random sequences (teacher forced) almost always. A model that cannot
 * learn to attend stays near chance (1 / 21 per word). */
START_TEST(test_learns_to_copy_unseen) {
  lv_params *p = tiny_params(0.0, true);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  float *vals = NULL;
  lv_optimizer *o = mt_adam(vs, 1e-6, &vals);
  host_batch *h = malloc(sizeof *h), *test = malloc(sizeof *test);
  make_copy_batch(test, MAXN, 999);
  lv_graph *g = lv_graph_create(0);
  double acc = 0;
  const int steps = 400; /* measured: accuracy 0.85 at step 200, 0.996 at 250, 1.0 from 300 */
  for (int step = 0; step < steps; step++) {
    make_copy_batch(h, 32, (uint32_t)step + 1);
    mt_train_step(t, g, vs, o, vals, &h->b, step, 3e-3f);
    lv_batch_free(&h->b);
  }
  eval_loss(t, test, NULL, &acc);
  ck_assert_msg(acc > 0.9, "next-word accuracy %g on unseen random sequences after %d steps", acc, steps);
  lv_graph_destroy(g);
  lv_optimizer_free(o);
  lv_batch_free(&test->b);
  free(h);
  free(test);
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

/* The label row b (without </s>) equals row ids[0..len-1) ending in </s>. */
static bool same_target(const host_batch *h, int b, const int32_t *ids, int len) {
  if (len != h->tlen[b]) return false;
  for (int j = 0; j < len; j++)
    if (ids[j] != h->tlab[b * h->T + j]) return false;
  return true;
}

/* Adam on the task's loss over 50 pairs (no smoothing, no dropout): loss < 0.1; greedy and
 * beam search through the decode ops then give every target exactly. */
START_TEST(test_overfits_50_pairs) {
  lv_params *p = tiny_params(0.0, true);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  host_batch *h = malloc(sizeof *h);
  make_batch(h, MAXN, MAXS, MAXT);
  float *vals = NULL;
  lv_optimizer *o = mt_adam(vs, 1e-6, &vals);
  double first = eval_loss(t, h, NULL, NULL), last = first, acc = 0;
  lv_graph *g = lv_graph_create(0);
  int step = 0;
  for (; step < 1500; step++) {
    double loss = mt_train_step(t, g, vs, o, vals, &h->b, step, 1e-2f);
    if (loss < 0.02) break;
  }
  last = eval_loss(t, h, NULL, &acc);
  ck_assert_msg(first > 2.0 && last < 0.1, "loss %g -> %g after %d steps", first, last, step);
  ck_assert_msg(acc == 1.0, "next-step accuracy %g after training", acc);

  const lv_seq_decode_ops *ops = lv_mt_rnmt_model.seq_decode;
  /* Greedy search. */
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  step_ctx sc = {.ops = ops, .n = MAXN};
  EXPECT_OK(begin_host(ops, t, g, &h->b, &sc.st));
  lv_greedy_search_params gp = lv_greedy_search_params_default();
  gp.target_seq_len = 12;
  lv_greedy_search_result gr = {0};
  EXPECT_OK(lv_greedy_search_decode(&gp, MAXN, V, step_fn, &sc, &gr));
  ops->end(sc.st);
  int greedy_ok = 0;
  for (int b = 0; b < MAXN; b++) greedy_ok += gr.done[b] && same_target(h, b, gr.ids + b * gr.max_len, gr.lens[b]);
  ck_assert_msg(greedy_ok == MAXN, "greedy search reproduces %d of %d targets", greedy_ok, MAXN);
  lv_greedy_search_result_free(&gr);
  /* Beam search (4 hyps, MTDecoderV1's length normalization and coverage penalty). */
  lv_graph_reset(g);
  lv_beam_search_params bp = lv_beam_search_params_default();
  bp.num_hyps_per_beam = 4;
  bp.length_normalization = 0.2f;
  bp.coverage_penalty = 0.2f;
  bp.target_seq_len = 12;
  EXPECT_OK(lv_beam_search_params_validate(&bp, V));
  sc.n = MAXN * bp.num_hyps_per_beam;
  EXPECT_OK(begin_host(ops, t, g, &h->b, &sc.st));
  int32_t src_lens[MAXN];
  for (int b = 0; b < MAXN; b++) src_lens[b] = h->slen[b];
  lv_beam_search_result br = {0};
  EXPECT_OK(lv_beam_search_decode(&bp, MAXN, V, MAXS, src_lens, step_fn, &sc, &br));
  ops->end(sc.st);
  int beam_ok = 0;
  for (int b = 0; b < MAXN; b++) {
    int r = b * bp.num_hyps_per_beam;
    beam_ok += same_target(h, b, br.ids + (int64_t)r * br.max_len, br.lens[r]);
  }
  ck_assert_msg(beam_ok == MAXN, "beam search's top hyps reproduce %d of %d targets", beam_ok, MAXN);
  lv_beam_search_result_free(&br);
  lv_graph_destroy(g);
  lv_optimizer_free(o);
  lv_batch_free(&h->b);
  free(h);
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("rnmt_task");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_variable_names);
  tcase_add_test(tc, test_bad_params);
  tcase_add_loop_test(tc, test_step_matches_teacher_forcing, 0, 4);
  tcase_add_test(tc, test_decode_memory_constant);
  tcase_add_test(tc, test_padding_invariance);
  tcase_add_loop_test(tc, test_parity_with_pytorch, 0, 2);
  tcase_add_test(tc, test_overfits_50_pairs);
  tcase_add_test(tc, test_learns_to_copy_unseen);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
