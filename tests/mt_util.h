/* Helpers of the MT task suites (check_mt_task.c, check_rnmt_task.c): an NmtInput-style
 * host batch from arrays, a named metric, and a task's eval-mode loss on a batch. */
#ifndef LV_TESTS_MT_UTIL_H
#define LV_TESTS_MT_UTIL_H

#include <check.h>
#include <string.h>

#include "check_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "models/task.h"
#include "optim/optimizer.h"

/* decoder.per_word_avg_loss and, if smoothing > 0, a UniformLabelSmoother; then freezes p. */
static inline lv_params *mt_loss_params(lv_params *p, double smoothing, bool per_word) {
  EXPECT_OK(lv_params_set_bool(p, "decoder.per_word_avg_loss", per_word));
  if (smoothing > 0) {
    EXPECT_OK(lv_params_set_class(p, "decoder.label_smoothing", "UniformLabelSmoother"));
    EXPECT_OK(lv_params_set_float(p, "decoder.label_smoothing.uncertainty", smoothing));
  }
  lv_params_freeze(p);
  return p;
}

/* A task of class c with finalized variables (seeded). */
static inline lv_task *mt_make_task(const lv_task_class *c, const lv_params *p, lv_varstore *vs, uint64_t seed) {
  lv_task *t = NULL;
  EXPECT_OK(c->create(p, NULL, vs, &t));
  EXPECT_OK(lv_varstore_finalize(vs, seed));
  return t;
}

/* b (initialized here) over the six arrays: src [n, S], tgt [n, T]; t holds the views. */
static inline void mt_batch_wrap(lv_batch *b, lv_tensor t[6], int n, int S, int T, int32_t *sids, float *spad,
                                 int32_t *tids, float *tpad, int32_t *tlab, float *tw) {
  static const char *names[6] = {"src.ids", "src.paddings", "tgt.ids", "tgt.paddings", "tgt.labels", "tgt.weights"};
  t[0] = lv_tensor_view(LV_I32, lv_shape2(n, S), sids);
  t[1] = lv_tensor_view(LV_F32, lv_shape2(n, S), spad);
  t[2] = lv_tensor_view(LV_I32, lv_shape2(n, T), tids);
  t[3] = lv_tensor_view(LV_F32, lv_shape2(n, T), tpad);
  t[4] = lv_tensor_view(LV_I32, lv_shape2(n, T), tlab);
  t[5] = lv_tensor_view(LV_F32, lv_shape2(n, T), tw);
  lv_batch_init(b);
  for (int i = 0; i < 6; i++) EXPECT_OK(lv_nmap_set(&b->map, names[i], &t[i]));
  b->size = n;
}

static inline double mt_metric(const lv_metrics *m, const char *name, double *weight) {
  for (int i = 0; i < m->n; i++)
    if (!strcmp(m->name[i], name)) {
      if (weight) *weight = m->weight[i];
      return lv_metrics_value(m, i);
    }
  ck_abort_msg("no metric %s", name);
  return 0;
}

/* The task's eval-mode `loss` on host batch hb (and its weight, next-step accuracy and
 * log_pplx where the pointers are not NULL). */
static inline double mt_eval_loss(lv_task *t, lv_batch *hb, double *weight, double *acc, double *log_pplx) {
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_batch gb;
  lv_batch_init(&gb);
  EXPECT_OK(lv_batch_to_graph(g, hb, &gb));
  lv_metrics m = {0};
  ck_assert_msg(t->cls->fprop(t, g, &gb, true, 0, &m), "%s", lv_status_msg(lv_graph_status(g)));
  double loss = mt_metric(&m, "loss", weight);
  if (acc) *acc = mt_metric(&m, "fraction_of_correct_next_step_preds", NULL);
  if (log_pplx) *log_pplx = mt_metric(&m, "log_pplx", NULL);
  lv_metrics_free(&m);
  lv_batch_free(&gb);
  lv_graph_destroy(g);
  return loss;
}

/* Adam (beta2 0.98, epsilon eps) over all of vs's values as one variable; *vals is that
 * buffer. */
static inline lv_optimizer *mt_adam(lv_varstore *vs, double eps, float **vals) {
  lv_optimizer_config c = lv_optimizer_defaults(LV_OPT_ADAM);
  c.beta2 = 0.98;
  c.epsilon = eps;
  lv_optimizer *o = NULL;
  EXPECT_OK(lv_optimizer_create(&c, lv_cpu_backend(), &o));
  int64_t n = 0;
  *vals = lv_varstore_values(vs, &n);
  EXPECT_OK(lv_optimizer_add_var(o, "all", n, NULL));
  return o;
}

/* One training step of t on host batch hb (g rewound, gradients zeroed, fprop, backward,
 * o at learning rate lr); returns the step's loss. */
static inline double mt_train_step(lv_task *t, lv_graph *g, lv_varstore *vs, lv_optimizer *o, float *vals,
                                   lv_batch *hb, int64_t step, float lr) {
  lv_graph_reset(g);
  lv_graph_set_training(g, true);
  lv_graph_set_step(g, step); /* the step's dropout masks, as the trainer draws them */
  lv_varstore_zero_grads(vs);
  lv_batch gb;
  lv_batch_init(&gb);
  EXPECT_OK(lv_batch_to_graph(g, hb, &gb));
  lv_metrics m = {0};
  ck_assert_msg(t->cls->fprop(t, g, &gb, false, step, &m), "%s", lv_status_msg(lv_graph_status(g)));
  double loss = lv_metrics_value(&m, 0);
  EXPECT_OK(lv_graph_backward(g, m.loss));
  int64_t n;
  const float *gp = lv_varstore_grads(vs, &n);
  EXPECT_OK(lv_optimizer_apply(o, lr, 1, &vals, &gp));
  lv_metrics_free(&m);
  lv_batch_free(&gb);
  return loss;
}

#endif
