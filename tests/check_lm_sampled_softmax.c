/* The sampled softmax of SimpleFullSoftmax (layers/sampled_softmax.h) inside an RnnLm:
 * TF's log-uniform sampler (draw frequencies against P(c), unique draws, expected
 * counts), the training loss's expectation approaching the full softmax's on a small
 * vocabulary as num_sampled grows to the vocabulary, per_example_argmax = labels and no
 * logits in training, the full softmax in eval, draws fixed by the step (a resumed run
 * repeats them), finite-difference gradients, and the num_sampled range check. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_util.h"
#include "layer_fixture.h"
#include "lm_batch_util.h"
#include "base/rng.h"
#include "layers/lm_layers.h"
#include "layers/sampled_softmax.h"

enum { V = 40 };
#define SSM_SET(...)                                                                                 \
  LF_SET("name=lm", "vocab_size=40", "emb.vocab_size=40", "emb.embedding_dim=4", "rnns.num_layers=1", \
         "rnns.num_input_nodes=4", "rnns.cell_tpl.num_input_nodes=6", "rnns.cell_tpl.num_output_nodes=6", \
         "softmax.input_dim=6", __VA_ARGS__)

static const int32_t kIds[T * B] = {1, 1, 1, 17, 3, 9, 4, 30, 2, 26, 2, 5, 8, 0, 3};
static const int32_t kLabels[T * B] = {17, 3, 9, 4, 30, 2, 26, 2, 5, 8, 2, 3, 2, 2, 2};

static void randomize(lv_varstore *vs, uint64_t seed) {
  lv_rng r;
  lv_rng_init(&r, seed, 5);
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    lv_var *v = lv_varstore_get(vs, i);
    for (int64_t j = 0; j < lv_tensor_numel(&v->value); j++)
      lv_f32(&v->value)[j] = 1.5f * (2.0f * lv_rng_uniform(&r) - 1.0f);
  }
}

/* avg_xent of the LM on the fixed batch, at a step, in training or eval mode. */
static lv_lm_out run(lf_fixture *f, int64_t step, bool training) {
  lv_graph_reset(f->g);
  lv_graph_set_step(f->g, step);
  lv_graph_set_training(f->g, training);
  lv_lm_out o;
  float w[T * B];
  for (int i = 0; i < T * B; i++) w[i] = i / B < kLens[i % B] ? 1.0f : 0.0f;
  ck_assert(lv_lm_fprop(lv_lm_of(f->l), f->g, lf_ids(f->g, lv_shape2(T, B), kIds), paddings(f->g),
                        lf_ids(f->g, lv_shape2(T, B), kLabels), lf_tensor(f->g, lv_shape2(T, B), w), &o));
  lf_ok(f->g);
  return o;
}

START_TEST(log_uniform_sampler) {
  enum { R = 30, N = 300000 };
  lv_rng r;
  lv_rng_init(&r, 77, 1);
  int64_t count[R] = {0}, v, tries;
  for (int i = 0; i < N; i++) {
    lv_log_uniform_sample(&r, R, 1, &v, &tries);
    ck_assert(v >= 0 && v < R && tries == 1);
    count[v]++;
  }
  double sum = 0;
  for (int c = 0; c < R; c++) {
    double p = lv_log_uniform_prob(R, c);
    sum += p;
    /* 5 standard deviations of a binomial frequency. */
    ck_assert_msg(fabs((double)count[c] / N - p) < 5 * sqrt(p * (1 - p) / N), "class %d: %g drawn, P %g", c,
                  (double)count[c] / N, p);
  }
  ck_assert_msg(fabs(sum - 1.0) < 1e-12, "P sums to %g", sum);
  int64_t all[R];
  lv_log_uniform_sample(&r, R, R, all, &tries);
  int seen[R] = {0};
  for (int i = 0; i < R; i++) seen[all[i]]++;
  for (int c = 0; c < R; c++) ck_assert_msg(seen[c] == 1, "class %d drawn %d times among unique draws", c, seen[c]);
  ck_assert(tries > R);
  /* TF's ExpectedCountHelper: p * S without rejections, else 1 - (1 - p)^tries. */
  ck_assert(fabs(lv_sampled_expected_count(0.1, 4, 4) - 0.4) < 1e-12);
  ck_assert(fabs(lv_sampled_expected_count(0.1, 4, 6) - (1 - pow(0.9, 6))) < 1e-12);
}
END_TEST

/* Over many steps' draws the sampled loss's mean nears the full softmax's as num_sampled
 * grows, and with every class sampled (S = V) it is the full loss up to the log expected
 * count corrections, which are then all near log(1): the rarest of 40 classes (P 0.0066)
 * after the few hundred tries a full unique draw takes has 1 - (1 - P)^tries > 0.9, so
 * the corrections differ by < 0.1 nats and the mean by a few hundredths (0.02 here). */
START_TEST(expected_loss_approaches_full) {
  const int sizes[3] = {4, 16, V};
  double err[3];
  double full = 0;
  for (int k = 0; k < 3; k++) {
    char ns[32];
    snprintf(ns, sizeof ns, "softmax.num_sampled=%d", sizes[k]);
    lf_fixture f;
    lf_open(&f, "RnnLm", SSM_SET(ns), 3);
    randomize(f.vs, 21);
    lv_lm_out o = run(&f, 0, false);
    ck_assert_ptr_nonnull(o.xent.logits);
    full = lf_scalar(o.xent.avg_xent);
    double mean = 0;
    enum { STEPS = 300 };
    for (int s = 0; s < STEPS; s++) mean += lf_scalar(run(&f, s, true).xent.avg_xent) / STEPS;
    err[k] = fabs(mean - full);
    fprintf(stderr, "num_sampled %d: mean sampled loss %.4f, full %.4f\n", sizes[k], mean, full);
    lf_close(&f);
  }
  ck_assert_msg(full > 1.0, "the full loss %g should not be trivial", full);
  ck_assert_msg(err[2] < 0.05, "S = V: mean %g off the full loss", err[2]);
  ck_assert_msg(err[2] < err[1] && err[1] < err[0], "errors %g %g %g do not shrink", err[0], err[1], err[2]);
}
END_TEST

START_TEST(training_outputs_and_determinism) {
  lf_fixture f;
  lf_open(&f, "RnnLm", SSM_SET("softmax.num_sampled=6"), 3);
  randomize(f.vs, 4);
  lv_lm_out o = run(&f, 12, true);
  ck_assert_ptr_null(o.xent.logits);
  ck_assert_ptr_null(o.xent.log_probs);
  int32_t am[T * B];
  EXPECT_OK(lv_tensor_to_host(o.xent.per_example_argmax, am));
  for (int i = 0; i < T * B; i++) ck_assert_int_eq(am[i], kLabels[i]);
  double a = lf_scalar(o.xent.avg_xent), b = lf_scalar(run(&f, 12, true).xent.avg_xent);
  double c = lf_scalar(run(&f, 13, true).xent.avg_xent);
  ck_assert_msg(a == b, "step 12 twice: %g vs %g", a, b);
  ck_assert_msg(a != c, "steps 12 and 13 drew the same classes (%g)", a);
  o = run(&f, 12, false);
  ck_assert_ptr_nonnull(o.xent.logits);
  lf_close(&f);
}
END_TEST

static lv_tensor *sampled_loss(lf_fixture *f, void *ctx) {
  (void)ctx;
  lv_graph_set_step(f->g, 7);
  lv_graph_set_training(f->g, true);
  float w[T * B];
  for (int i = 0; i < T * B; i++) w[i] = i / B < kLens[i % B] ? 1.0f : 0.0f;
  lv_lm_out o;
  ck_assert(lv_lm_fprop(lv_lm_of(f->l), f->g, lf_ids(f->g, lv_shape2(T, B), kIds), paddings(f->g),
                        lf_ids(f->g, lv_shape2(T, B), kLabels), lf_tensor(f->g, lv_shape2(T, B), w), &o));
  return o.xent.avg_xent;
}

START_TEST(finite_differences) {
  lf_fixture f;
  lf_open(&f, "RnnLm", SSM_SET("softmax.num_sampled=8"), 4);
  randomize(f.vs, 9);
  for (int i = 0; i < lv_varstore_count(f.vs); i++) {
    lv_var *v = lv_varstore_get(f.vs, i);
    for (int64_t j = 0; j < lv_tensor_numel(&v->value); j++) lv_f32(&v->value)[j] /= 3.0f;
  }
  const lf_elems el[] = {{"lm/emb/var_0/var", {4, 9, 30, 43, -1}},
                         {"lm/rnns_0/wm/var", {0, 17, 40, 71, -1}},
                         {"lm/softmax/weight_0/var", {3, 17, 20, 54, 100, 200, -1}},
                         {"lm/softmax/bias_0/var", {0, 2, 3, 17, 30, 39, -1}},
                         {NULL, {-1}}};
  lf_gradcheck(&f, sampled_loss, NULL, el, 1e-2, 2e-3);
  lf_close(&f);
}
END_TEST

/* A table in 4 column shards (Lingvo's num_shards) gives the one-shard table's loss bit
 * for bit with the same weights (each shard gathers its own classes' columns, zeros for
 * the others' ids), and finite-difference gradients in the middle shards. */
START_TEST(sharded_table) {
  lf_fixture f1, f4;
  lf_open(&f1, "RnnLm", SSM_SET("softmax.num_sampled=8"), 3);
  lf_open(&f4, "RnnLm", SSM_SET("softmax.num_sampled=8", "softmax.num_shards=4"), 3);
  randomize(f1.vs, 31);
  for (int i = 0; i < lv_varstore_count(f4.vs); i++) {
    lv_var *v = lv_varstore_get(f4.vs, i);
    int shard = -1;
    char kind[16] = "";
    float *dst = lv_f32(&v->value);
    if (sscanf(v->name, "lm/softmax/%15[a-z]_%d/var", kind, &shard) == 2) {
      bool weight = !strcmp(kind, "weight");
      lv_var *u = lv_varstore_find(f1.vs, weight ? "lm/softmax/weight_0/var" : "lm/softmax/bias_0/var");
      ck_assert_ptr_nonnull(u);
      const float *src = lv_f32(&u->value);
      for (int c = 0; c < V / 4; c++)
        if (weight)
          for (int d = 0; d < 6; d++) dst[d * (V / 4) + c] = src[d * V + shard * (V / 4) + c];
        else
          dst[c] = src[shard * (V / 4) + c];
    } else {
      lv_var *u = lv_varstore_find(f1.vs, v->name);
      ck_assert_msg(u != NULL, "%s: no such variable in the one-shard LM", v->name);
      memcpy(dst, lv_f32(&u->value), sizeof(float) * (size_t)lv_tensor_numel(&v->value));
    }
  }
  for (int64_t step = 12; step < 15; step++) {
    double a = lf_scalar(run(&f1, step, true).xent.avg_xent), b = lf_scalar(run(&f4, step, true).xent.avg_xent);
    ck_assert_msg(a == b, "step %lld: one shard %.9g, four shards %.9g", (long long)step, a, b);
  }
  lf_close(&f1);
  for (int i = 0; i < lv_varstore_count(f4.vs); i++) {
    lv_var *v = lv_varstore_get(f4.vs, i);
    for (int64_t j = 0; j < lv_tensor_numel(&v->value); j++) lv_f32(&v->value)[j] /= 3.0f;
  }
  const lf_elems el[] = {{"lm/softmax/weight_1/var", {0, 3, 9, 17, 30, 59, -1}},
                         {"lm/softmax/weight_2/var", {1, 5, 22, 48, -1}},
                         {"lm/softmax/bias_1/var", {0, 2, 5, 9, -1}},
                         {"lm/softmax/bias_3/var", {1, 4, 8, -1}},
                         {NULL, {-1}}};
  lf_gradcheck(&f4, sampled_loss, NULL, el, 1e-2, 2e-3);
  lf_close(&f4);
}
END_TEST

START_TEST(num_sampled_range) {
  lv_params *p = lf_params("RnnLm", SSM_SET("softmax.num_sampled=41"));
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_ERR(lv_layer_create(p, NULL, vs, &l), LV_ERR_INVALID, "lm.softmax.num_sampled", "41");
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("lm_sampled_softmax");
  TCase *tc = tcase_create("sampled");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, log_uniform_sampler);
  tcase_add_test(tc, expected_loss_approaches_full);
  tcase_add_test(tc, training_outputs_and_determinism);
  tcase_add_test(tc, finite_differences);
  tcase_add_test(tc, sharded_table);
  tcase_add_test(tc, num_sampled_range);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
