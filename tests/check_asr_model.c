/* asr.model.AsrModel on synthetic AsrInput-style batches (src.src_inputs [B, T, F, 1],
 * src.paddings, tgt.*): Lingvo's variable names, the metrics, and a tiny model that
 * overfits a handful of utterances (each token class spoken as a few noisy frames of its
 * own random spectrum) and then decodes every one back with beam search. */
#include <check.h>
#include <math.h>

#include "check_util.h"
#include "mt_util.h"
#include "base/rng.h"
#include "input/batch.h"
#include "layers/layer.h"
#include "models/asr.h"
#include "search/beam_search.h"

enum { NU = 6, F = 8, FPT = 4, MAXL = 4, T = MAXL * FPT + 1, L = MAXL + 1, V = 10 };

/* Encoder: 1 conv (3x3x1x4, stride 2) -> 4 bins x 4 channels = 16, 1 BiLSTM of 16; decoder:
 * 1 LSTM of 32 over contexts of 32, additive attention of 16. */
static lv_params *tiny_params_open(void) {
  lv_tasks_register_all();
  lv_params *p = lv_asr_model.params();
  EXPECT_OK(lv_params_set_string(p, "name", "tiny"));
  int64_t in[4] = {-1, -1, F, 1}, fs[4] = {3, 3, 1, 4}, st[2] = {2, 2};
  EXPECT_OK(lv_params_set_list(p, "encoder.input_shape", lv_pvalue_ints(4, in)));
  EXPECT_OK(lv_params_set_list(p, "encoder.conv_filter_shapes", lv_pvalue_append(lv_pvalue_list(), lv_pvalue_ints(4, fs))));
  EXPECT_OK(lv_params_set_list(p, "encoder.conv_filter_strides", lv_pvalue_append(lv_pvalue_list(), lv_pvalue_ints(2, st))));
  EXPECT_OK(lv_params_set_int(p, "encoder.num_cnn_layers", 1));
  EXPECT_OK(lv_params_set_int(p, "encoder.num_conv_lstm_layers", 0));
  EXPECT_OK(lv_params_set_int(p, "encoder.num_lstm_layers", 2));
  EXPECT_OK(lv_params_set_int(p, "encoder.lstm_cell_size", 16));
  EXPECT_OK(lv_params_set_int(p, "encoder.pad_steps", 2));
  EXPECT_OK(lv_params_set_int(p, "decoder.emb.vocab_size", V));
  EXPECT_OK(lv_params_set_int(p, "decoder.emb_dim", 8));
  EXPECT_OK(lv_params_set_int(p, "decoder.softmax.num_classes", V));
  EXPECT_OK(lv_params_set_int(p, "decoder.rnn_cell_dim", 32));
  EXPECT_OK(lv_params_set_int(p, "decoder.source_dim", 32));
  EXPECT_OK(lv_params_set_int(p, "decoder.attention.hidden_dim", 16));
  EXPECT_OK(lv_params_set_int(p, "decoder.target_seq_len", L + 2));
  /* Moving statistics that follow the batch's within the few steps of the test. */
  EXPECT_OK(lv_params_set_float(p, "encoder.cnn_tpl.bn_decay", 0.8));
  /* Lingvo's default scores hyps by summed raw logits, whose level softmax training leaves
   * free: a tiny model's positive logits make longer hyps win. The exact-decoding check
   * uses log-softmax scores (the flag's other value). */
  EXPECT_OK(lv_params_set_bool(p, "decoder.use_unnormalized_logits_as_log_probs", false));
  EXPECT_OK(lv_params_set_float(p, "encoder.proj_tpl.bn_params.decay", 0.8));
  return p;
}

static lv_params *tiny_params(void) {
  lv_params *p = tiny_params_open();
  lv_params_freeze(p);
  return p;
}

typedef struct {
  float frames[NU * T * F], spad[NU * T], tpad[NU * L], tw[NU * L];
  int32_t tids[NU * L], tlab[NU * L];
  int len[NU];
  int32_t tok[NU][MAXL];
  lv_tensor t[6];
  lv_batch b;
} host_batch;

/* Utterance u: 2..MAXL tokens from 3..V-1, each FPT frames of its class's spectrum plus
 * noise, then one zero frame (AsrInput's append_eos_frame); padded to T. */
static void make_batch(host_batch *h) {
  lv_rng r;
  lv_rng_init(&r, 7, 1);
  float spec[V][F];
  for (int c = 0; c < V; c++)
    for (int k = 0; k < F; k++) spec[c][k] = 2.0f * lv_rng_uniform(&r) - 1.0f;
  memset(h->frames, 0, sizeof h->frames);
  for (int u = 0; u < NU; u++) {
    h->len[u] = 2 + u % (MAXL - 1);
    for (int i = 0; i < h->len[u]; i++) h->tok[u][i] = 3 + (int32_t)((u * 5 + i * 3 + i * u) % (V - 3));
    for (int i = 0; i < h->len[u]; i++)
      for (int f = 0; f < FPT; f++)
        for (int k = 0; k < F; k++)
          h->frames[(u * T + i * FPT + f) * F + k] = spec[h->tok[u][i]][k] + 0.1f * (2.0f * lv_rng_uniform(&r) - 1.0f);
    int nf = h->len[u] * FPT + 1;
    for (int t = 0; t < T; t++) h->spad[u * T + t] = t < nf ? 0.0f : 1.0f;
    for (int j = 0; j < L; j++) {
      bool real = j <= h->len[u];
      h->tids[u * L + j] = j == 0 ? 1 : real ? h->tok[u][j - 1] : 2;
      h->tlab[u * L + j] = j < h->len[u] ? h->tok[u][j] : 2;
      h->tpad[u * L + j] = real ? 0.0f : 1.0f;
      h->tw[u * L + j] = real ? 1.0f : 0.0f;
    }
  }
  static const char *names[6] = {"src.src_inputs", "src.paddings", "tgt.ids", "tgt.paddings", "tgt.labels",
                                  "tgt.weights"};
  h->t[0] = lv_tensor_view(LV_F32, lv_shape4(NU, T, F, 1), h->frames);
  h->t[1] = lv_tensor_view(LV_F32, lv_shape2(NU, T), h->spad);
  h->t[2] = lv_tensor_view(LV_I32, lv_shape2(NU, L), h->tids);
  h->t[3] = lv_tensor_view(LV_F32, lv_shape2(NU, L), h->tpad);
  h->t[4] = lv_tensor_view(LV_I32, lv_shape2(NU, L), h->tlab);
  h->t[5] = lv_tensor_view(LV_F32, lv_shape2(NU, L), h->tw);
  lv_batch_init(&h->b);
  for (int i = 0; i < 6; i++) EXPECT_OK(lv_nmap_set(&h->b.map, names[i], &h->t[i]));
  h->b.size = NU;
}

START_TEST(test_variable_names) {
  lv_params *p = tiny_params();
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = mt_make_task(&lv_asr_model, p, vs, 3);
  static const struct { const char *name; int64_t d0, d1; } want[] = {
      {"tiny/enc/conv_L0/w/var", 3, 3},       {"tiny/enc/conv_L0/beta/var", 4, -1},
      {"tiny/enc/conv_L0/moving_variance/var", 4, -1},
      {"tiny/enc/fwd_rnn_L0/wm/var", 32, 64}, {"tiny/enc/bak_rnn_L0/wm/var", 32, 64},
      {"tiny/enc/proj_L0/w/var", 32, 32},     {"tiny/enc/proj_L0/gamma/var", 32, -1},
      {"tiny/enc/fwd_rnn_L1/wm/var", 48, 64}, {"tiny/dec/emb/var_0/var", V, 8},
      {"tiny/dec/rnn_cell/wm/var", 72, 128},  {"tiny/dec/atten/source_var/var", 32, 16},
      {"tiny/dec/atten/query_var/var", 32, 16}, {"tiny/dec/softmax/weight_0/var", 64, V},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    lv_var *v = lv_varstore_find(vs, want[i].name);
    ck_assert_msg(v, "missing %s", want[i].name);
    ck_assert_int_eq(v->value.shape.d[0], want[i].d0);
    if (want[i].d1 > 0) ck_assert_int_eq(v->value.shape.d[1], want[i].d1);
  }
  /* No projection after the last LSTM layer (project_after_last_lstm False). */
  ck_assert_ptr_null(lv_varstore_find(vs, "tiny/enc/proj_L1/w/var"));
  t->cls->destroy(t);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

/* Unsupported encoder settings are errors naming the key. */
START_TEST(test_bad_params) {
  lv_tasks_register_all();
  lv_params *p = lv_asr_model.params();
  EXPECT_OK(lv_params_set_string(p, "name", "x"));
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = NULL;
  lv_status s = lv_asr_model.create(p, NULL, vs, &t);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "task.encoder.num_conv_lstm_layers"), "%s", lv_status_msg(s));
  lv_status_free(s);
  /* AsrModel.Params' training defaults (lingvo/tasks/asr/model.py). */
  ck_assert_double_eq(lv_params_float(p, "train.vn_std"), 0.075);
  ck_assert_int_eq(lv_params_int(p, "train.vn_start_step"), 20000);
  lv_varstore_destroy(vs);
  lv_params_free(p);
  /* Lingvo asserts num_cnn_layers == len(conv_filter_shapes): a second shape beside one
   * layer is an error, not a layer quietly dropped. */
  p = tiny_params_open();
  int64_t fs[4] = {3, 3, 4, 4}, st[2] = {2, 2};
  EXPECT_OK(lv_params_set_list(p, "encoder.conv_filter_shapes",
                               lv_pvalue_append(lv_pvalue_copy(lv_params_list(p, "encoder.conv_filter_shapes")),
                                                lv_pvalue_ints(4, fs))));
  EXPECT_OK(lv_params_set_list(p, "encoder.conv_filter_strides",
                               lv_pvalue_append(lv_pvalue_copy(lv_params_list(p, "encoder.conv_filter_strides")),
                                                lv_pvalue_ints(2, st))));
  lv_params_freeze(p);
  vs = lv_varstore_create();
  EXPECT_ERR(lv_asr_model.create(p, NULL, vs, &t), LV_ERR_INVALID, "num_cnn_layers = 1", "got 2 and 2");
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

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

START_TEST(test_overfits_and_decodes) {
  lv_params *p = tiny_params();
  lv_varstore *vs = lv_varstore_create();
  lv_task *t = mt_make_task(&lv_asr_model, p, vs, 11);
  host_batch *h = malloc(sizeof *h);
  make_batch(h);
  float *vals = NULL;
  lv_optimizer *o = mt_adam(vs, 1e-6, &vals);
  double w = 0, first = mt_eval_loss(t, &h->b, &w, NULL, NULL), acc = 0, lp = 0;
  double want_w = 0;
  for (int u = 0; u < NU; u++) want_w += h->len[u] + 1;
  ck_assert_double_eq(w, want_w);
  lv_graph *g = lv_graph_create(0);
  int step = 0;
  for (; step < 800; step++) {
    double loss = mt_train_step(t, g, vs, o, vals, &h->b, step, 1e-2f);
    EXPECT_OK(lv_graph_apply_updates(g)); /* the batch norms' moving statistics */
    if (loss < 0.01) break;
  }
  /* A few more steps at the minimum so the moving statistics settle. */
  for (int k = 0; k < 30; k++, step++) {
    mt_train_step(t, g, vs, o, vals, &h->b, step, 1e-3f);
    EXPECT_OK(lv_graph_apply_updates(g));
  }
  double last = mt_eval_loss(t, &h->b, NULL, &acc, &lp);
  ck_assert_msg(first > 1.5 && last < 0.1, "loss %g -> %g after %d steps", first, last, step);
  ck_assert_msg(acc == 1.0, "next-step accuracy %g after training", acc);
  ck_assert_double_eq_tol(lp, last, 1e-6);
  /* Beam search through the decode ops: every utterance's tokens, then </s>. */
  const lv_seq_decode_ops *ops = lv_asr_model.seq_decode;
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  lv_beam_search_params bp = lv_beam_search_params_default();
  bp.num_hyps_per_beam = 3;
  bp.target_seq_len = L + 2;
  EXPECT_OK(lv_beam_search_params_validate(&bp, V));
  step_ctx sc = {.ops = ops, .n = NU * bp.num_hyps_per_beam};
  int64_t atten_len = 0;
  int32_t atten_lens[NU];
  EXPECT_OK(ops->begin(t, g, &h->b, &atten_len, atten_lens, &sc.st));
  /* (T + pad_steps) / 2 encoder frames; the real ones: ceil(frames / 2). */
  ck_assert_int_eq(atten_len, (T + 2 + 1) / 2);
  for (int u = 0; u < NU; u++) ck_assert_int_eq(atten_lens[u], (h->len[u] * FPT + 1) / 2);
  lv_beam_search_result br = {0};
  EXPECT_OK(lv_beam_search_decode(&bp, NU, V, 0, NULL, step_fn, &sc, &br));
  ops->end(sc.st);
  int ok = 0;
  for (int u = 0; u < NU; u++) {
    const int32_t *ids = br.ids + (int64_t)u * bp.num_hyps_per_beam * br.max_len;
    int n = br.lens[u * bp.num_hyps_per_beam];
    bool same = n == h->len[u] + 1 && ids[n - 1] == 2;
    for (int i = 0; same && i < h->len[u]; i++) same = ids[i] == h->tok[u][i];
    ok += same;
  }
  ck_assert_msg(ok == NU, "beam search's top hyps reproduce %d of %d utterances", ok, NU);
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
  Suite *s = suite_create("asr_model");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_variable_names);
  tcase_add_test(tc, test_bad_params);
  tcase_add_test(tc, test_overfits_and_decodes);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
