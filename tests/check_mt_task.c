/* mt.model.TransformerModel: Lingvo's variable names, overfitting a handful of pairs
 * through the task API, stepwise (ExtendStep) decoder log-probs equal to the
 * teacher-forced ones (also with beam-style parent reordering), and a batch padded
 * longer giving the same loss. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "core/ops.h"
#include "kernels/cpu/cpu_kernels.h"
#include "models/mt.h"
#include "mt_util.h"
#include "optim/optimizer.h"

enum { V = 20, D = 16 };

/* A tiny model: vocab 20, dim 16, 2 heads, hidden 32, 1 + 1 layers. */
static lv_params *tiny_params(double smoothing, bool per_word) {
  lv_tasks_register_all();
  const lv_task_class *tc = lv_task_class_find("mt.model.TransformerModel");
  ck_assert_ptr_nonnull(tc);
  lv_params *p = tc->params();
  EXPECT_OK(lv_params_set_string(p, "name", "tiny"));
  const char *sides[2] = {"encoder", "decoder"};
  char k[128];
  for (int s = 0; s < 2; s++) {
#define SETI(key, v)                                \
  do {                                              \
    snprintf(k, sizeof k, "%s.%s", sides[s], key);  \
    EXPECT_OK(lv_params_set_int(p, k, v));          \
  } while (0)
    SETI("model_dim", D);
    SETI("token_emb.vocab_size", V);
    SETI("token_emb.embedding_dim", D);
    SETI("position_emb.embedding_dim", D);
    snprintf(k, sizeof k, "%s.token_emb.params_init.scale", sides[s]);
    EXPECT_OK(lv_params_set_float(p, k, 0.25));
  }
  int s = 1;
  SETI("source_dim", D);
  SETI("num_trans_layers", 1);
  SETI("trans_tpl.tr_atten_tpl.num_attention_heads", 2);
  SETI("trans_tpl.tr_fflayer_tpl.hidden_dim", 32);
  SETI("softmax.num_classes", V);
  SETI("softmax.num_shards", 2);
#undef SETI
  EXPECT_OK(lv_params_set_int(p, "encoder.transformer_stack.num_transformer_layers", 1));
  EXPECT_OK(lv_params_set_int(p, "encoder.transformer_stack.transformer_tpl.tr_atten_tpl.num_attention_heads", 2));
  EXPECT_OK(lv_params_set_int(p, "encoder.transformer_stack.transformer_tpl.tr_fflayer_tpl.hidden_dim", 32));
  return mt_loss_params(p, smoothing, per_word);
}

static lv_task *make_task(const lv_params *p, lv_varstore *vs) {
  return mt_make_task(&lv_mt_transformer_model, p, vs, 7);
}

/* Fixed pairs: source = 3..8 tokens, target = a function of the source. */
enum { NB = 4, MAXS = 8, MAXT = 9 };
static const int kSrcLen[NB] = {5, 3, 7, 4}, kTgtLen[NB] = {4, 6, 5, 3};

typedef struct host_batch {
  int32_t sids[NB * 16], tids[NB * 16], tlab[NB * 16];
  float spad[NB * 16], tpad[NB * 16], tw[NB * 16];
  lv_tensor t[6];
  lv_batch b;
} host_batch;

/* The pairs padded to S x T (S >= MAXS, T >= MAXT); padded steps hold junk ids. */
static void make_batch(host_batch *h, int S, int T) {
  for (int b = 0; b < NB; b++) {
    for (int s = 0; s < S; s++) {
      bool real = s < kSrcLen[b];
      h->sids[b * S + s] = real ? (s == kSrcLen[b] - 1 ? 2 : 3 + (b * 5 + s * 3) % (V - 3)) : (s * 7) % V;
      h->spad[b * S + s] = real ? 0.0f : 1.0f;
    }
    int lab[16];
    for (int t = 0; t < kTgtLen[b]; t++) lab[t] = t == kTgtLen[b] - 1 ? 2 : 3 + (b * 11 + t * 5 + 1) % (V - 3);
    for (int t = 0; t < T; t++) {
      bool real = t < kTgtLen[b];
      h->tids[b * T + t] = real ? (t == 0 ? 1 : lab[t - 1]) : (t * 5) % V;
      h->tlab[b * T + t] = real ? lab[t] : (t * 3) % V;
      h->tpad[b * T + t] = real ? 0.0f : 1.0f;
      h->tw[b * T + t] = real ? 1.0f : 0.0f;
    }
  }
  mt_batch_wrap(&h->b, h->t, NB, S, T, h->sids, h->spad, h->tids, h->tpad, h->tlab, h->tw);
}

static double eval_loss(lv_task *t, host_batch *h, double *weight, double *acc) {
  double log_pplx = 0, loss = mt_eval_loss(t, &h->b, weight, acc, &log_pplx);
  ck_assert(fabs(log_pplx - loss) < 1e-6 || !lv_params_bool(t->p, "decoder.per_word_avg_loss"));
  return loss;
}

START_TEST(test_variable_names) {
  lv_params *p = tiny_params(0.1, true);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  static const struct { const char *name; int64_t d0, d1; } want[] = {
      {"tiny/enc/token_emb/var_0", V, D},
      {"tiny/enc/trans_0/multihead_self_atten/atten_ln/scale", D, 0},
      {"tiny/enc/trans_0/multihead_self_atten/multihead_atten/query_proj", D, D},
      {"tiny/enc/trans_0/tr_fflayer/fflayer/fflayer_0/w", D, 32},
      {"tiny/dec/token_emb/var_0", V, D},
      {"tiny/dec/trans_layer_0/multihead_self_atten/multihead_atten/source_proj", D, D},
      {"tiny/dec/trans_layer_0/multihead_atten/multihead_atten/ctx_post_proj", D, D},
      {"tiny/dec/trans_layer_0/tr_fflayer/fflayer/fflayer_1/w", 32, D},
      {"tiny/dec/softmax/weight_0", D, V / 2},
      {"tiny/dec/softmax/weight_1", D, V / 2},
      {"tiny/dec/softmax/bias_1", V / 2, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char n[256];
    snprintf(n, sizeof n, "%s/var", want[i].name);
    lv_var *v = lv_varstore_find(vs, n);
    ck_assert_msg(v, "missing %s", n);
    ck_assert_int_eq(v->value.shape.d[0], want[i].d0);
    if (want[i].d1) ck_assert_int_eq(v->value.shape.d[1], want[i].d1);
  }
  /* Encoder layer 15 + decoder layer 24 + 2 embeddings + 4 softmax shards. */
  ck_assert_int_eq(lv_varstore_count(vs), 15 + 24 + 2 + 4);
  ck_assert_int_eq(lv_mt_transformer_vocab_size(t), V);
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

START_TEST(test_bad_params) {
  lv_tasks_register_all();
  lv_params *p = lv_mt_transformer_model.params();
  EXPECT_OK(lv_params_set_string(p, "name", "x"));
  EXPECT_OK(lv_params_set_int(p, "decoder.softmax.num_classes", 100));
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = NULL;
  EXPECT_ERR(lv_mt_transformer_model.create(p, NULL, vs, &t), LV_ERR_INVALID, "softmax.num_classes",
             "token_emb.vocab_size");
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

/* Teacher-forced log-probs vs. stepping the decoder; and with two hyps per sentence
 * whose rows are swapped each step through parent. */
START_TEST(test_extend_step_matches_teacher_forcing) {
  lv_params *p = tiny_params(0.1, true);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  host_batch h;
  make_batch(&h, MAXS, MAXT);
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *sids = lv_graph_from_host(g, &h.t[0]), *spad = lv_graph_from_host(g, &h.t[1]);
  lv_tensor *tids = lv_graph_from_host(g, &h.t[2]), *tpad = lv_graph_from_host(g, &h.t[3]);
  lv_tensor *vecs, *pads, *lp;
  ck_assert(lv_mt_transformer_encode(t, g, sids, spad, &vecs, &pads));
  ck_assert(lv_mt_transformer_log_probs(t, g, vecs, pads, tids, tpad, &lp));
  ck_assert_int_eq(lp->shape.d[0], MAXT);
  ck_assert_int_eq(lp->shape.d[2], V);
  for (int beam = 1; beam <= 2; beam++) {
    lv_mt_decode_state st;
    EXPECT_OK(lv_mt_decode_state_init(t, g, vecs, pads, &st));
    int n = beam * NB;
    int32_t ids[2 * NB], parent[2 * NB];
    float out[2 * NB * V];
    double maxd = 0;
    for (int s = 0; s < MAXT; s++) {
      /* With 2 hyps, row r of step s continues row (r + NB) % (2 NB) of step s-1: the
       * copies swap halves every step, so a wrong reorder would mix the sentences. */
      for (int r = 0; r < n; r++) {
        int b = r % NB;
        ids[r] = h.tids[b * MAXT + s];
        parent[r] = beam == 1 ? r : (r + NB) % n;
      }
      float ap[2 * NB * MAXS];
      EXPECT_OK(lv_mt_decode_step_probs(&st, n, ids, s ? parent : NULL, out, ap));
      /* Encoder attention for the coverage penalty: no weight on a sentence's </s> (its
       * last real token) or its padding, the rest renormalized to 1. */
      for (int r = 0; r < n; r++) {
        int b = r % NB;
        double sum = 0;
        for (int k = 0; k < MAXS; k++) {
          float a = ap[r * MAXS + k];
          if (k >= kSrcLen[b] - 1) ck_assert_msg(fabsf(a) < 1e-6f, "row %d source %d: %g", r, k, a);
          ck_assert(a >= 0);
          sum += a;
        }
        ck_assert_msg(fabs(sum - 1.0) < 1e-4, "row %d: attention sums to %g", r, sum);
      }
      for (int r = 0; r < n; r++) {
        int b = r % NB;
        if (s >= kTgtLen[b]) continue;
        for (int v = 0; v < V; v++) {
          double d = fabs(out[r * V + v] - lv_f32(lp)[(s * NB + b) * V + v]);
          if (d > maxd) maxd = d;
        }
      }
    }
    ck_assert_msg(maxd < 1e-5, "beam %d: stepwise vs teacher-forced log-probs differ by %g", beam, maxd);
    /* Bad step arguments are errors, not crashes. */
    int32_t bad = V;
    EXPECT_ERR(lv_mt_decode_step(&st, 1, &bad, NULL, out), LV_ERR_INVALID, "multiple of the batch");
    lv_mt_decode_state_free(&st);
  }
  lv_graph_destroy(g);
  lv_batch_free(&h.b);
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

/* A search's graph memory is that of one step (the caches live in buffers outside the
 * graph, which is rewound before every step): it grows linearly with the steps run,
 * not quadratically as it did when every step's reordered caches stayed in the graph. */
static size_t decode_peak(lv_task *t, host_batch *h, int steps) {
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *sids = lv_graph_from_host(g, &h->t[0]), *spad = lv_graph_from_host(g, &h->t[1]), *vecs, *pads;
  ck_assert(lv_mt_transformer_encode(t, g, sids, spad, &vecs, &pads));
  lv_mt_decode_state st;
  EXPECT_OK(lv_mt_decode_state_init(t, g, vecs, pads, &st));
  enum { H = 3 };
  int32_t ids[H * NB], parent[H * NB];
  float *out = malloc(sizeof(float) * H * NB * V);
  for (int s = 0; s < steps; s++) {
    for (int r = 0; r < H * NB; r++) ids[r] = 3 + (r + s) % (V - 3), parent[r] = (r + NB) % (H * NB);
    EXPECT_OK(lv_mt_decode_step(&st, H * NB, ids, s ? parent : NULL, out));
  }
  lv_mt_decode_state_free(&st);
  size_t peak = lv_graph_arena_peak(g);
  lv_graph_destroy(g);
  free(out);
  return peak;
}

START_TEST(test_decode_memory_linear) {
  lv_params *p = tiny_params(0.1, true);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  host_batch h;
  make_batch(&h, MAXS, MAXT);
  size_t p60 = decode_peak(t, &h, 60), p240 = decode_peak(t, &h, 240);
  /* Linear: about 4x for 4x the steps (plus the encoder's fixed part); quadratic: 16x. */
  ck_assert_msg(p240 < 5 * p60, "graph peak %zu bytes for 240 steps vs %zu for 60", p240, p60);
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
    host_batch a, b;
    make_batch(&a, MAXS, MAXT);
    make_batch(&b, MAXS + 5, MAXT + 6);
    double wa, wb, acc_a, acc_b;
    double la = eval_loss(t, &a, &wa, &acc_a), lb = eval_loss(t, &b, &wb, &acc_b);
    ck_assert_msg(fabs(la - lb) < 1e-5, "loss %g vs %g when padded longer", la, lb);
    ck_assert(wa == wb && acc_a == acc_b);
    int tokens = 0;
    for (int i = 0; i < NB; i++) tokens += kTgtLen[i];
    ck_assert(wa == (per_word ? tokens : NB));
    lv_batch_free(&a.b);
    lv_batch_free(&b.b);
    t->cls->destroy(t);
    lv_varstore_destroy(vs);
    lv_params_free(p);
  }
}
END_TEST

/* Adam on the task's loss: the 4 pairs are learnt (no smoothing: the loss goes to 0). */
START_TEST(test_overfits_pairs) {
  lv_params *p = tiny_params(0.0, true);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = make_task(p, vs);
  host_batch h;
  make_batch(&h, MAXS, MAXT);
  float *vals = NULL;
  lv_optimizer *o = mt_adam(vs, 1e-9, &vals);
  double acc0 = 0, first = eval_loss(t, &h, NULL, &acc0), last = first;
  lv_graph *g = lv_graph_create(0);
  for (int step = 0; step < 300; step++) mt_train_step(t, g, vs, o, vals, &h.b, step, 3e-3f);
  lv_graph_destroy(g);
  double acc = 0;
  last = eval_loss(t, &h, NULL, &acc);
  ck_assert_msg(first > 2.0 && last < 0.05, "loss %g -> %g", first, last);
  ck_assert_msg(acc == 1.0, "next-step accuracy %g after training", acc);
  lv_optimizer_free(o);
  lv_batch_free(&h.b);
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("mt_task");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_variable_names);
  tcase_add_test(tc, test_bad_params);
  tcase_add_test(tc, test_extend_step_matches_teacher_forcing);
  tcase_add_test(tc, test_padding_invariance);
  tcase_add_test(tc, test_decode_memory_linear);
  tcase_add_test(tc, test_overfits_pairs);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
