/* Variational weight noise (optim/vn.h, layers/layer.h's vn, BaseTask._UpdateVnConfig in
 * models/task.c) on the tiny RNMT punctuator of tests/data/decode_golden: exactly Lingvo's
 * AddGlobalVN variables get noise (LSTM wm/b/ln_scale, attention source/query/hidden_var,
 * embeddings, softmax weights and biases; not the encoder's projection nor the
 * multi-headed attention's own projections); none before vn_start_step; the noise is
 * w + vn_std * N(0, 1), a function of (seed, step, variable) only, and the clean values
 * come back bit for bit; the gradient the trainer takes is that of the loss at the noisy
 * weights (central differences); a child's own vn (Lingvo's DisableVN, or global_vn false alone) turns its subtree
 * off; and Lingvo's errors: vn.scale or vn.start_step set on the task, per_step_vn
 * without deterministic, a child's global_vn without a scale, per-step noise reaching an
 * RNN cell (and lingvoc's: weight_norm_type, not built yet). Per-step noise
 * (AddVN(per_step=True)) on the attention's hidden_var/query_var and the softmax's weights
 * and biases: drawn afresh at every use in training, never in eval, deterministic for a
 * step, the gradient that at the noisy weights. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "layers/layer.h"
#include "models/model.h"
#include "optim/vn.h"
#include "runners/instance.h"
#include "vars_util.h"

#define G "tests/data/decode_golden/punct"
#define VN_ON "task.vn.global_vn: true; task.train.vn_std: 0.075; task.train.vn_start_step: 5"

static lv_status build(const char *extra, lv_params **out) {
  char ov[2048];
  snprintf(ov, sizeof ov,
           "input.file_pattern: \"text:" G "/train.txt\"; input.tokenizer.vocab_filepath: \"" G "/wpm.voc\"; "
           "input.tokenizer.vocab_size: 128; cluster.num_threads: 1; %s", extra);
  lv_model_options o;
  lv_model_options_init(&o);
  o.model = "punctuator.codelab.RNMTTinyTest";
  o.dataset = "Train";
  o.experiments_dir = "experiments";
  o.logdir = "/tmp/lingvoc-check-vn";
  o.params_override = ov;
  return lv_model_params_build(&o, out);
}

static lv_instance *open_model(const char *extra, lv_params **cfg, bool with_input) {
  EXPECT_OK(build(extra, cfg));
  lv_instance *m = NULL;
  EXPECT_OK(lv_instance_create(*cfg, with_input, lv_input_no_shard(), &m));
  return m;
}

static lv_vn *make_vn(lv_instance *m) {
  int n = lv_varstore_count(m->vs);
  lv_var **vars = calloc((size_t)n, sizeof *vars);
  for (int i = 0; i < n; i++) vars[i] = lv_varstore_get(m->vs, i);
  lv_vn *v = NULL;
  EXPECT_OK(lv_vn_create(m->backend, vars, n, &v));
  free(vars);
  return v;
}

/* Lingvo's AddGlobalVN targets among the tiny RNMT's variables, by name. */
static bool lingvo_target(const char *name) {
  static const char *const leaf[] = {"/wm/var", "/b/var", "/ln_scale/var", "/source_var/var", "/query_var/var",
                                     "/hidden_var/var", "/var_0/var"};
  if (strstr(name, "/enc/proj/")) return false; /* a ProjectionLayer without enable_vn */
  if (strstr(name, "/softmax/weight_") || strstr(name, "/softmax/bias_")) return true;
  for (size_t i = 0; i < sizeof leaf / sizeof *leaf; i++) {
    size_t n = strlen(name), l = strlen(leaf[i]);
    if (n >= l && !strcmp(name + n - l, leaf[i])) return true;
  }
  return false;
}

START_TEST(test_vn_targets) {
  lv_params *cfg = NULL;
  lv_instance *m = open_model(VN_ON, &cfg, false);
  int marked = 0, trainable = 0;
  for (int i = 0; i < lv_varstore_count(m->vs); i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    if (!v->trainable) continue;
    trainable++;
    ck_assert_msg(v->vn.global == lingvo_target(v->name), "%s: global noise %d", v->name, v->vn.global);
    if (!v->vn.global) continue;
    marked++;
    ck_assert(v->vn.scale == 0.075f);
    ck_assert_int_eq(v->vn.start_step, 5);
    ck_assert(!v->vn.per_step && !v->vn.uniform);
  }
  ck_assert_int_eq(marked, 46);
  ck_assert_int_lt(marked, trainable);
  lv_vn *vn = make_vn(m);
  ck_assert_int_eq(lv_vn_num_vars(vn), 46);
  ck_assert_int_eq(lv_vn_start_step(vn), 5);
  lv_vn_free(vn);
  lv_instance_destroy(m);
  lv_params_free(cfg);
  /* vn_std 0 (the default), or global_vn off: nothing is marked, no lv_vn. */
  const char *off[] = {"task.vn.global_vn: true", "task.train.vn_std: 0.075"};
  for (int k = 0; k < 2; k++) {
    m = open_model(off[k], &cfg, false);
    for (int i = 0; i < lv_varstore_count(m->vs); i++) ck_assert(!lv_varstore_get(m->vs, i)->vn.global);
    ck_assert_ptr_null(make_vn(m));
    lv_instance_destroy(m);
    lv_params_free(cfg);
  }
}
END_TEST

START_TEST(test_vn_noise_and_restore) {
  lv_params *cfg = NULL;
  lv_instance *m = open_model(VN_ON, &cfg, false);
  lv_vn *vn = make_vn(m);
  int64_t n, n2;
  float *clean = host_vars(m->vs, &n);
  /* Before vn_start_step: nothing. */
  ck_assert_int_eq(lv_vn_perturb(vn, 4), 0);
  float *same = host_vars(m->vs, &n2);
  ck_assert(memcmp(same, clean, sizeof(float) * (size_t)n) == 0);
  lv_vn_restore(vn);
  free(same);
  /* From it on: every marked variable, w + 0.075 * N(0, 1); the others untouched. */
  ck_assert_int_eq(lv_vn_perturb(vn, 5), 46);
  float *noisy = host_vars(m->vs, &n2);
  double sum = 0, sum2 = 0;
  int64_t cnt = 0, off = 0;
  for (int i = 0; i < lv_varstore_count(m->vs); i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    if (v->value.dtype != LV_F32) continue;
    int64_t k = lv_tensor_numel(&v->value), changed = 0;
    for (int64_t j = off; j < off + k; j++) {
      changed += noisy[j] != clean[j];
      if (v->vn.global) {
        double z = ((double)noisy[j] - clean[j]) / 0.075;
        sum += z;
        sum2 += z * z;
        cnt++;
      }
    }
    if (v->vn.global) ck_assert_msg(changed > k / 2, "%s: %lld of %lld changed", v->name, (long long)changed, (long long)k);
    else ck_assert_msg(changed == 0, "%s has noise", v->name);
    off += k;
  }
  double mean = sum / (double)cnt, var = sum2 / (double)cnt - mean * mean;
  ck_assert_msg(cnt > 5000 && fabs(mean) < 0.05 && fabs(var - 1.0) < 0.05, "noise / vn_std over %lld: mean %g var %g",
                (long long)cnt, mean, var);
  /* Clean values back, bit for bit; the same step draws the same noise again (also in
   * a fresh instance), another step other noise. */
  lv_vn_restore(vn);
  float *back = host_vars(m->vs, &n2);
  ck_assert(memcmp(back, clean, sizeof(float) * (size_t)n) == 0);
  lv_vn_perturb(vn, 5);
  float *again = host_vars(m->vs, &n2);
  ck_assert(memcmp(again, noisy, sizeof(float) * (size_t)n) == 0);
  lv_vn_restore(vn);
  lv_vn_perturb(vn, 6);
  float *other = host_vars(m->vs, &n2);
  ck_assert(memcmp(other, noisy, sizeof(float) * (size_t)n) != 0);
  lv_vn_restore(vn);
  lv_params *cfg2 = NULL;
  lv_instance *m2 = open_model(VN_ON, &cfg2, false);
  lv_vn *vn2 = make_vn(m2);
  lv_vn_perturb(vn2, 5);
  float *fresh = host_vars(m2->vs, &n2);
  ck_assert(memcmp(fresh, noisy, sizeof(float) * (size_t)n) == 0);
  lv_vn_free(vn2);
  lv_instance_destroy(m2);
  lv_params_free(cfg2);
  /* task.vn.seed picks another stream. */
  m2 = open_model(VN_ON "; task.vn.seed: 7", &cfg2, false);
  vn2 = make_vn(m2);
  lv_vn_perturb(vn2, 5);
  float *seeded = host_vars(m2->vs, &n2);
  ck_assert(memcmp(seeded, noisy, sizeof(float) * (size_t)n) != 0);
  lv_vn_free(vn2);
  lv_instance_destroy(m2);
  lv_params_free(cfg2);
  free(clean), free(noisy), free(back), free(again), free(other), free(fresh), free(seeded);
  lv_vn_free(vn);
  lv_instance_destroy(m);
  lv_params_free(cfg);
}
END_TEST

/* The training loss of batch b at the variables' current values (step fixed: the same
 * dropout), and optionally its gradients. */
static double loss_at(lv_instance *m, lv_batch *b, int64_t step, bool backward) {
  lv_metrics mt;
  lv_metrics_init(&mt);
  lv_varstore_zero_grads(m->vs);
  EXPECT_OK(lv_instance_fprop(m, b, true, step, &mt));
  double loss = 0;
  EXPECT_OK(lv_tensor_item(mt.loss, &loss));
  if (backward) EXPECT_OK(lv_graph_backward(m->graph, mt.loss));
  lv_metrics_free(&mt);
  return loss;
}

static float get1(lv_var *v, int64_t j) {
  float *h = malloc(sizeof(float) * (size_t)lv_tensor_numel(&v->value));
  EXPECT_OK(lv_tensor_to_host(&v->value, h));
  float x = h[j];
  free(h);
  return x;
}

static void set1(lv_var *v, int64_t j, float x) {
  int64_t n = lv_tensor_numel(&v->value);
  float *h = malloc(sizeof(float) * (size_t)n);
  EXPECT_OK(lv_tensor_to_host(&v->value, h));
  h[j] = x;
  EXPECT_OK(lv_tensor_from_host(&v->value, h));
  free(h);
}

/* As train_step: perturb, forward and backward, restore. The gradient of a noisy
 * variable is dL/dw at w + noise (central differences there), and differs from the
 * gradient at the clean weights. */
START_TEST(test_vn_gradient_at_noisy_weights) {
  lv_params *cfg = NULL;
  lv_instance *m = open_model(VN_ON "; task.train.vn_std: 0.3", &cfg, true);
  lv_vn *vn = make_vn(m);
  lv_batch b;
  lv_batch_init(&b);
  const int64_t step = 9;
  EXPECT_OK(lv_input_train_batch(m->input, step, &b));
  const char *names[] = {"punctuator_rnmt/dec/atten_rnn/wm/var", "punctuator_rnmt/dec/softmax/weight_3/var",
                         "punctuator_rnmt/enc/L0_rnn_fwd/b/var", "punctuator_rnmt/dec/atten/inner_att/query_var/var"};
  enum { NV = 4, NJ = 3 };
  double clean_grad[NV][NJ];
  int64_t idx[NV][NJ];
  loss_at(m, &b, step, true);
  for (int k = 0; k < NV; k++) {
    lv_var *v = lv_varstore_find(m->vs, names[k]);
    ck_assert_msg(v && v->vn.global, "%s", names[k]);
    int64_t n = lv_tensor_numel(&v->value);
    float *g = malloc(sizeof(float) * (size_t)n);
    EXPECT_OK(lv_tensor_to_host(&v->grad, g));
    /* The NJ largest gradients (finite differences of float32 losses need size). */
    for (int j = 0; j < NJ; j++) {
      int64_t best = -1;
      for (int64_t i = 0; i < n; i++) {
        bool used = false;
        for (int q = 0; q < j; q++) used |= idx[k][q] == i;
        if (!used && (best < 0 || fabsf(g[i]) > fabsf(g[best]))) best = i;
      }
      idx[k][j] = best;
      clean_grad[k][j] = g[best];
    }
    free(g);
  }
  ck_assert_int_eq(lv_vn_perturb(vn, step), 46);
  loss_at(m, &b, step, true);
  double noisy_grad[NV][NJ];
  for (int k = 0; k < NV; k++) {
    lv_var *v = lv_varstore_find(m->vs, names[k]);
    float *g = malloc(sizeof(float) * (size_t)lv_tensor_numel(&v->value));
    EXPECT_OK(lv_tensor_to_host(&v->grad, g));
    for (int j = 0; j < NJ; j++) noisy_grad[k][j] = g[idx[k][j]];
    free(g);
  }
  int differ = 0;
  for (int k = 0; k < NV; k++)
    for (int j = 0; j < NJ; j++) {
      lv_var *v = lv_varstore_find(m->vs, names[k]);
      const float w = get1(v, idx[k][j]), eps = 2e-3f;
      set1(v, idx[k][j], w + eps);
      double lp = loss_at(m, &b, step, false);
      set1(v, idx[k][j], w - eps);
      double lm = loss_at(m, &b, step, false);
      set1(v, idx[k][j], w);
      double fd = (lp - lm) / (2.0 * eps), an = noisy_grad[k][j];
      ck_assert_msg(fabs(fd - an) <= 0.03 * fabs(an) + 0.02, "%s[%lld]: gradient %g at the noisy weights, central "
                    "differences there %g (clean gradient %g)", names[k], (long long)idx[k][j], an, fd,
                    clean_grad[k][j]);
      differ += fabs(an - clean_grad[k][j]) > 0.05 * fabs(clean_grad[k][j]) + 1e-3;
    }
  ck_assert_msg(differ >= NV, "the noise changed only %d of %d gradients", differ, NV * NJ);
  lv_vn_restore(vn);
  lv_batch_free(&b);
  lv_vn_free(vn);
  lv_instance_destroy(m);
  lv_params_free(cfg);
}
END_TEST

/* A child whose vn is not the default keeps it (CopyBaseParams): Lingvo's DisableVN()
 * (scale 1.0, all off) on the decoder's softmax turns noise off there only; a child's
 * own noise with its own scale and start step applies there. */
START_TEST(test_vn_child_params) {
  lv_params *cfg = NULL;
  lv_instance *m = open_model(VN_ON "; task.decoder.softmax.vn.scale: 1.0", &cfg, false);
  int marked = 0;
  for (int i = 0; i < lv_varstore_count(m->vs); i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    if (strstr(v->name, "/softmax/")) ck_assert_msg(!v->vn.global, "%s", v->name);
    marked += v->vn.global;
  }
  ck_assert_int_eq(marked, 46 - 32);
  lv_instance_destroy(m);
  lv_params_free(cfg);
  /* docs/learner.md's `vn: { global_vn = false; }` (values of the default, but set) is the
   * softmax's own too: through a noisy step its weights stay exactly the clean ones while
   * every other target is perturbed. */
  m = open_model(VN_ON "; task.decoder.softmax.vn.global_vn: false", &cfg, false);
  lv_vn *vn = make_vn(m);
  ck_assert_int_eq(lv_vn_num_vars(vn), 46 - 32);
  int64_t n, n2;
  float *clean = host_vars(m->vs, &n);
  ck_assert_int_eq(lv_vn_perturb(vn, 5), 46 - 32);
  float *noisy = host_vars(m->vs, &n2);
  int64_t off = 0;
  int softmax = 0, perturbed = 0;
  for (int i = 0; i < lv_varstore_count(m->vs); i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    if (v->value.dtype != LV_F32) continue;
    int64_t k = lv_tensor_numel(&v->value);
    bool same = memcmp(noisy + off, clean + off, sizeof(float) * (size_t)k) == 0;
    if (strstr(v->name, "/softmax/")) {
      ck_assert_msg(same, "%s has noise under softmax.vn.global_vn false", v->name);
      softmax++;
    } else if (lingvo_target(v->name)) {
      ck_assert_msg(!same, "%s has no noise", v->name);
      perturbed++;
    }
    off += k;
  }
  ck_assert_int_eq(softmax, 32);
  ck_assert_int_eq(perturbed, 46 - 32);
  lv_vn_restore(vn);
  free(clean);
  free(noisy);
  lv_vn_free(vn);
  lv_instance_destroy(m);
  lv_params_free(cfg);
  m = open_model("task.encoder.vn.global_vn: true; task.encoder.vn.scale: 0.5; task.encoder.vn.start_step: 3", &cfg,
                 false);
  marked = 0;
  for (int i = 0; i < lv_varstore_count(m->vs); i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    ck_assert_msg(v->vn.global == (strstr(v->name, "/enc/") && lingvo_target(v->name)), "%s", v->name);
    if (v->vn.global) ck_assert(v->vn.scale == 0.5f && v->vn.start_step == 3);
    marked += v->vn.global;
  }
  ck_assert_int_eq(marked, 7);
  lv_instance_destroy(m);
  lv_params_free(cfg);
}
END_TEST

START_TEST(test_vn_errors) {
  lv_params *cfg = NULL;
  lv_instance *m = NULL;
  EXPECT_OK(build(VN_ON "; task.vn.scale: 0.1", &cfg));
  EXPECT_ERR(lv_instance_create(cfg, false, lv_input_no_shard(), &m), LV_ERR_INVALID, "task.vn.scale",
             "overwritten by p.train.vn_std");
  lv_params_free(cfg);
  EXPECT_OK(build(VN_ON "; task.vn.start_step: 10", &cfg));
  EXPECT_ERR(lv_instance_create(cfg, false, lv_input_no_shard(), &m), LV_ERR_INVALID, "task.vn.start_step",
             "task.train.vn_start_step");
  lv_params_free(cfg);
  EXPECT_OK(build("task.vn.per_step_vn: true; task.train.vn_std: 0.1", &cfg));
  EXPECT_ERR(lv_instance_create(cfg, false, lv_input_no_shard(), &m), LV_ERR_INVALID, "task.vn",
             "per_step vn requires deterministic=True");
  lv_params_free(cfg);
  /* Task-wide per-step noise reaches the LSTM cells: Lingvo's RNNCell asserts. */
  EXPECT_OK(build("task.vn.per_step_vn: true; task.vn.deterministic: true; task.train.vn_std: 0.1", &cfg));
  EXPECT_ERR(lv_instance_create(cfg, false, lv_input_no_shard(), &m), LV_ERR_INVALID, "vn.per_step_vn",
             "We do not support per step VN in RNN cells");
  lv_params_free(cfg);
  /* ... also with vn_std 0 on the task but a cell's own per-step noise. */
  EXPECT_OK(build("task.encoder.lstm_tpl.vn.per_step_vn: true; task.encoder.lstm_tpl.vn.deterministic: true; "
                  "task.encoder.lstm_tpl.vn.scale: 0.1", &cfg));
  EXPECT_ERR(lv_instance_create(cfg, false, lv_input_no_shard(), &m), LV_ERR_INVALID, "enc/",
             "We do not support per step VN in RNN cells");
  lv_params_free(cfg);
  EXPECT_OK(build("task.decoder.emb.vn.global_vn: true", &cfg));
  EXPECT_ERR(lv_instance_create(cfg, false, lv_input_no_shard(), &m), LV_ERR_INVALID, "dec/emb.vn.scale",
             "VN scale must be set");
  lv_params_free(cfg);
  EXPECT_OK(build(VN_ON "; task.vn.weight_norm_type: \"L2\"", &cfg));
  EXPECT_ERR(lv_instance_create(cfg, false, lv_input_no_shard(), &m), LV_ERR_INVALID, "task.vn.weight_norm_type");
  lv_params_free(cfg);
}
END_TEST

/* Per-step noise where Lingvo has it: the attention's and the softmax's own vn. */
#define ATT "task.decoder.attention.inner_atten_params.vn."
#define SMX "task.decoder.softmax.vn."
#define PS ATT "per_step_vn: true; " ATT "deterministic: true; " ATT "scale: 0.3; " ATT "start_step: 5; " SMX \
           "per_step_vn: true; " SMX "deterministic: true; " SMX "scale: 0.3; " SMX "start_step: 5"

static bool per_step_target(const char *name) {
  return strstr(name, "/softmax/weight_") || strstr(name, "/softmax/bias_") ||
         strstr(name, "/inner_att/query_var/") || strstr(name, "/inner_att/hidden_var/");
}

START_TEST(test_vn_per_step) {
  lv_params *cfg = NULL, *cfg0 = NULL;
  lv_instance *m = open_model(PS, &cfg, true), *m0 = open_model("", &cfg0, true);
  int marked = 0;
  for (int i = 0; i < lv_varstore_count(m->vs); i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    ck_assert_msg(v->vn.per_step == per_step_target(v->name), "%s: per-step noise %d", v->name, v->vn.per_step);
    ck_assert_msg(!v->vn.global, "%s: global noise", v->name);
    if (v->vn.per_step) ck_assert(v->vn.scale == 0.3f && v->vn.start_step == 5);
    marked += v->vn.per_step;
  }
  ck_assert_int_eq(marked, 2 + 2 * 16); /* query_var, hidden_var; 16 softmax shards */
  ck_assert_ptr_null(make_vn(m));      /* nothing for the trainer's global perturbation */

  /* Afresh at every use: two reads of query_var in one training step differ from each
   * other and from the clean value by about scale; none before start_step nor in eval. */
  lv_var *q = lv_varstore_find(m->vs, "punctuator_rnmt/dec/atten/inner_att/query_var/var");
  ck_assert_ptr_nonnull(q);
  const int64_t nq = lv_tensor_numel(&q->value);
  float *clean = malloc(sizeof(float) * (size_t)nq), *a = malloc(sizeof(float) * (size_t)nq),
        *b2 = malloc(sizeof(float) * (size_t)nq);
  EXPECT_OK(lv_tensor_to_host(&q->value, clean));
  lv_graph *g = m->graph;
  lv_graph_reset(g);
  lv_graph_set_training(g, true);
  lv_graph_set_step(g, 5);
  lv_tensor *t1 = lv_layer_step_weight(g, q), *t2 = lv_layer_step_weight(g, q);
  ck_assert(t1 != &q->value && t2 != &q->value);
  EXPECT_OK(lv_tensor_to_host(t1, a));
  EXPECT_OK(lv_tensor_to_host(t2, b2));
  double s2 = 0;
  int64_t same = 0;
  for (int64_t j = 0; j < nq; j++) {
    same += a[j] == b2[j];
    s2 += ((double)a[j] - clean[j]) * ((double)a[j] - clean[j]);
  }
  ck_assert_int_lt(same, nq / 100);
  ck_assert_msg(fabs(sqrt(s2 / (double)nq) / 0.3 - 1.0) < 0.1, "noise rms %g, scale 0.3", sqrt(s2 / (double)nq));
  lv_graph_reset(g);
  lv_graph_set_step(g, 4);
  ck_assert_ptr_eq(lv_layer_step_weight(g, q), &q->value);
  lv_graph_set_step(g, 5);
  lv_graph_set_training(g, false);
  ck_assert_ptr_eq(lv_layer_step_weight(g, q), &q->value);
  lv_graph_reset(g);
  lv_graph_set_training(g, true);
  free(clean), free(a), free(b2);

  /* The training loss: the clean one before start_step (same variables, same dropout),
   * another from it on, the same again for the same step; eval sees no noise. */
  lv_batch b;
  lv_batch_init(&b);
  EXPECT_OK(lv_input_train_batch(m->input, 9, &b));
  ck_assert(loss_at(m, &b, 4, false) == loss_at(m0, &b, 4, false));
  const double l9 = loss_at(m, &b, 9, true), l9c = loss_at(m0, &b, 9, true);
  ck_assert_msg(fabs(l9 - l9c) > 1e-4, "per-step noise left the loss at %g", l9);
  ck_assert(loss_at(m, &b, 9, false) == l9);
  lv_metrics e, e0;
  lv_metrics_init(&e);
  lv_metrics_init(&e0);
  EXPECT_OK(lv_instance_fprop(m, &b, false, 9, &e));
  double le, le0;
  EXPECT_OK(lv_tensor_item(e.loss, &le));
  EXPECT_OK(lv_instance_fprop(m0, &b, false, 9, &e0));
  EXPECT_OK(lv_tensor_item(e0.loss, &le0));
  ck_assert(le == le0);
  lv_metrics_free(&e), lv_metrics_free(&e0);

  /* The gradient is that of the noisy loss (central differences through the same draws)
   * and not the clean one. */
  const char *names[] = {"punctuator_rnmt/dec/atten/inner_att/query_var/var",
                         "punctuator_rnmt/dec/atten/inner_att/hidden_var/var",
                         "punctuator_rnmt/dec/softmax/weight_3/var", "punctuator_rnmt/dec/softmax/bias_0/var"};
  enum { NV = 4 };
  float *gv[NV], *g0[NV];
  int64_t nv[NV];
  loss_at(m, &b, 9, true);
  loss_at(m0, &b, 9, true);
  for (int k = 0; k < NV; k++) { /* all before the differences below zero the gradients */
    lv_var *v = lv_varstore_find(m->vs, names[k]), *v0 = lv_varstore_find(m0->vs, names[k]);
    ck_assert_msg(v && v0, "%s", names[k]);
    nv[k] = lv_tensor_numel(&v->value);
    gv[k] = malloc(sizeof(float) * (size_t)nv[k]);
    g0[k] = malloc(sizeof(float) * (size_t)nv[k]);
    EXPECT_OK(lv_tensor_to_host(&v->grad, gv[k]));
    EXPECT_OK(lv_tensor_to_host(&v0->grad, g0[k]));
  }
  int differ = 0, checked = 0;
  for (int k = 0; k < NV; k++) {
    lv_var *v = lv_varstore_find(m->vs, names[k]);
    int64_t best = 0;
    for (int64_t i = 1; i < nv[k]; i++)
      if (fabsf(gv[k][i]) > fabsf(gv[k][best])) best = i;
    const float w = get1(v, best), eps = 2e-3f;
    set1(v, best, w + eps);
    double lp = loss_at(m, &b, 9, false);
    set1(v, best, w - eps);
    double lm = loss_at(m, &b, 9, false);
    set1(v, best, w);
    double fd = (lp - lm) / (2.0 * eps), an = gv[k][best];
    ck_assert_msg(fabs(an) > 1e-3 && fabs(fd - an) <= 0.03 * fabs(an) + 0.02,
                  "%s[%lld]: gradient %g, central differences %g (clean %g)", names[k], (long long)best, an, fd,
                  (double)g0[k][best]);
    checked++;
    for (int64_t i = 0; i < nv[k]; i++) differ += fabsf(gv[k][i] - g0[k][i]) > 0.05f * fabsf(g0[k][i]) + 1e-4f;
    free(gv[k]), free(g0[k]);
  }
  ck_assert_int_eq(checked, 4);
  ck_assert_msg(differ > 10, "the per-step noise changed only %d gradients", differ);
  lv_batch_free(&b);
  lv_instance_destroy(m);
  lv_instance_destroy(m0);
  lv_params_free(cfg);
  lv_params_free(cfg0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("vn");
  TCase *c = tcase_create("vn");
  tcase_set_timeout(c, 120);
  tcase_add_test(c, test_vn_targets);
  tcase_add_test(c, test_vn_noise_and_restore);
  tcase_add_test(c, test_vn_gradient_at_noisy_weights);
  tcase_add_test(c, test_vn_child_params);
  tcase_add_test(c, test_vn_per_step);
  tcase_add_test(c, test_vn_errors);
  suite_add_tcase(s, c);
  return lv_test_run(s);
}
