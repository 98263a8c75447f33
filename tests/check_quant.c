/* Quantization-aware training (core/ops.h's fake_quant ops, layers/qdomain.h): TF's
 * fake_quant_with_min_max_args / _vars outputs and gradients (wrt x, min and max) on
 * the vectors TF 2.13 computed (tests/fake_quant_tf.h, scripts/lingvo_peer/
 * fake_quant_vectors.py: min > 0, max < 0, narrow_range, 2, 4, 8 and 16 bits, min == max
 * == 0), finite differences of the straight-through gradient at 16 bits, Lingvo's
 * schedule tests (reference/lingvo_asr_lm.md §13.3: LinearClippingCapSchedule,
 * FakeQuantizationSchedule through SymmetricScheduledClipQDomain), PassiveAsymQDomain's
 * QRAct tests, and a ProjectionLayer under PassiveAsymQDomain: Lingvo's variable names,
 * the batch ranges, one moving-average update per step over every call of the step, the
 * stored ranges in eval, inheritance from an enclosing scope and a layer's own domain
 * overriding it, and no extra op without a domain; against real Lingvo (0.14.0 on TF 2.13,
 * scripts/lingvo_peer/qat_vectors.py): a ProjectionLayer and an LSTMCellSimple under
 * PassiveAsymQDomain, their training outputs, every range variable after the step and the
 * eval outputs with those ranges, within 2e-6. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "fake_quant_tf.h"
#include "gradcheck.h"
#include "layer_fixture.h"
#include "layers/attention.h"
#include "layers/conv.h"
#include "layers/full_softmax.h"
#include "layers/projection.h"
#include "layers/qdomain.h"
#include "layers/rnn_cell.h"

static lv_tensor *host_vec(lv_graph *g, const float *v, int64_t n) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, lv_shape1(n));
  memcpy(t->data, v, sizeof(float) * (size_t)n);
  return t;
}

static lv_tensor *host_scalar(lv_graph *g, float v) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, lv_shape0());
  lv_f32(t)[0] = v;
  return t;
}

START_TEST(test_fake_quant_args_tf) {
  lv_graph *g = lv_graph_create(0);
  for (size_t c = 0; c < sizeof fq_cases / sizeof fq_cases[0]; c++) {
    const fq_case *k = &fq_cases[c];
    lv_graph_reset(g);
    lv_tensor *y = lv_op_fake_quant_args(g, host_vec(g, fq_x, FQ_N), k->min, k->max, k->bits, k->narrow);
    lf_ok(g);
    for (int i = 0; i < FQ_N; i++)
      ck_assert_msg(lv_f32(y)[i] == k->args_y[i], "case %zu [%g, %g] %d bits narrow %d: x %.9g -> %.9g, TF %.9g", c,
                    k->min, k->max, k->bits, k->narrow, fq_x[i], lv_f32(y)[i], k->args_y[i]);
  }
  lv_graph_destroy(g);
}
END_TEST

/* Forward, and the gradients of sum(y * dy) wrt x, min and max. */
START_TEST(test_fake_quant_vars_tf) {
  lv_graph *g = lv_graph_create(0);
  for (size_t c = 0; c <= sizeof fq_cases / sizeof fq_cases[0]; c++) {
    const bool zero = c == sizeof fq_cases / sizeof fq_cases[0];
    const fq_case *k = zero ? NULL : &fq_cases[c];
    lv_graph_reset(g);
    lv_tensor *x = host_vec(g, fq_x, FQ_N), *mn = host_scalar(g, zero ? 0.0f : k->min),
              *mx = host_scalar(g, zero ? 0.0f : k->max);
    x->requires_grad = mn->requires_grad = mx->requires_grad = true;
    lv_tensor *y = lv_op_fake_quant_vars(g, x, mn, mx, zero ? 8 : k->bits, zero ? false : k->narrow);
    lv_tensor *loss = lv_op_reduce_sum(g, lv_op_mul(g, y, host_vec(g, fq_dy, FQ_N)), LV_ALL_AXES, false);
    lf_ok(g);
    EXPECT_OK(lv_graph_backward(g, loss));
    const float *want_y = zero ? fq_zero_y : k->vars_y, *want_dx = zero ? fq_zero_dx : k->dx;
    for (int i = 0; i < FQ_N; i++) {
      ck_assert_msg(lv_f32(y)[i] == want_y[i], "case %zu: x %.9g -> %.9g, TF %.9g", c, fq_x[i], lv_f32(y)[i],
                    want_y[i]);
      ck_assert_msg(lv_f32(x->grad)[i] == want_dx[i], "case %zu: dx[%d] %.9g, TF %.9g", c, i, lv_f32(x->grad)[i],
                    want_dx[i]);
    }
    const float dmin = zero ? fq_zero_dmin : k->dmin, dmax = zero ? fq_zero_dmax : k->dmax;
    ck_assert_msg(fabsf(lv_f32(mn->grad)[0] - dmin) <= 1e-6f * fmaxf(1.0f, fabsf(dmin)), "case %zu: dmin %.9g, TF %.9g",
                  c, lv_f32(mn->grad)[0], dmin);
    ck_assert_msg(fabsf(lv_f32(mx->grad)[0] - dmax) <= 1e-6f * fmaxf(1.0f, fabsf(dmax)), "case %zu: dmax %.9g, TF %.9g",
                  c, lv_f32(mx->grad)[0], dmax);
  }
  lv_graph_destroy(g);
}
END_TEST

START_TEST(test_fake_quant_errors) {
  lv_graph *g = lv_graph_create(0);
  const float v[2] = {0.5f, -0.5f};
  ck_assert_ptr_null(lv_op_fake_quant_args(g, host_vec(g, v, 2), 1.0f, 1.0f, 8, false));
  lv_status s = lv_graph_status(g);
  EXPECT_ERR(s, LV_ERR_INVALID, "fake_quant", "min has to be smaller than max");
  lv_graph_reset(g);
  ck_assert_ptr_null(lv_op_fake_quant_args(g, host_vec(g, v, 2), -1.0f, 1.0f, 17, false));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "num_bits must be between 2 and 16");
  lv_graph_reset(g);
  ck_assert_ptr_null(lv_op_fake_quant_vars(g, host_vec(g, v, 2), host_vec(g, v, 2), host_scalar(g, 1.0f), 8, false));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "min and max of one element each");
  lv_graph_destroy(g);
}
END_TEST

/* At 16 bits a level is (max - min) / 65535, far below the differences' eps, so the
 * straight-through gradient is the derivative of the (nearly continuous) clamp: 1 inside
 * the range, 0 outside, and the clipped parts' slopes for min and max. */
static lv_tensor *fq16(lv_graph *g, lv_tensor **in, const void *ctx) {
  (void)ctx;
  return lv_op_fake_quant_vars(g, in[0], in[1], in[2], 16, false);
}

START_TEST(test_fake_quant_gradcheck) {
  spec in[3] = {fspec(lv_shape2(3, 5), 11), fspec(lv_shape0(), 12), fspec(lv_shape0(), 13)};
  float *x = in[0].data;
  for (int i = 0; i < 15; i++) x[i] = -1.6f + 0.2f * (float)i + 0.013f; /* 4 below the range, 3 above */
  *(float *)in[1].data = -1.0f;
  *(float *)in[2].data = 1.0f;
  gradcheck("fake_quant", 3, in, fq16, NULL, 1e-2, 2e-3);
}
END_TEST

/* ---- domains ---- */

static lv_params *domain_params(const char *cls, const char *const *settings) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  for (int i = 0; settings && settings[i]; i += 2) {
    if (strchr(settings[i + 1], '.')) EXPECT_OK(lv_params_set_float(p, settings[i], strtod(settings[i + 1], NULL)));
    else EXPECT_OK(lv_params_set_int(p, settings[i], strtoll(settings[i + 1], NULL, 10)));
  }
  lv_params_freeze(p);
  return p;
}

/* SymmetricScheduledClipQDomain with caps 6 -> 1 over steps [start, end] (and quantization
 * from quant_start; < 0: a LinearClippingCapSchedule). Not frozen. */
static lv_params *scheduled_params(int64_t start, int64_t end, int64_t quant_start) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate("SymmetricScheduledClipQDomain", &p));
  const bool linear = quant_start < 0;
  if (linear) EXPECT_OK(lv_params_set_class(p, "cc_schedule", "LinearClippingCapSchedule"));
  else EXPECT_OK(lv_params_set_int(p, "cc_schedule.quant_start_step", quant_start));
  EXPECT_OK(lv_params_set_int(p, linear ? "cc_schedule.start_step" : "cc_schedule.clip_start_step", start));
  EXPECT_OK(lv_params_set_int(p, linear ? "cc_schedule.end_step" : "cc_schedule.clip_end_step", end));
  EXPECT_OK(lv_params_set_float(p, "cc_schedule.start_cap", 6.0));
  EXPECT_OK(lv_params_set_float(p, "cc_schedule.end_cap", 1.0));
  return p;
}

/* quant_utils_test.testLinearClippingCapSchedule. */
START_TEST(test_linear_clipping_cap_schedule) {
  lv_params *p = scheduled_params(50, 100, -1);
  lv_qdomain d;
  EXPECT_OK(lv_qdomain_init(&d, p, "l/q/qdomain_default", "l.qdomain.default"));
  const int64_t steps[8] = {25, 50, 60, 70, 80, 90, 100, 110};
  const float caps[8] = {6, 6, 5, 4, 3, 2, 1, 1};
  lv_graph *g = lv_graph_create(0);
  const float big[2] = {-100.0f, 100.0f};
  for (int i = 0; i < 8; i++) {
    lv_graph_reset(g);
    lv_graph_set_step(g, steps[i]);
    lv_tensor *y = lv_qdomain_weight(&d, g, host_vec(g, big, 2));
    lf_ok(g);
    ck_assert_msg(fabsf(lv_f32(y)[0] + caps[i]) < 1e-6f && fabsf(lv_f32(y)[1] - caps[i]) < 1e-6f,
                  "step %lld: [%g, %g], want +-%g", (long long)steps[i], lv_f32(y)[0], lv_f32(y)[1], caps[i]);
  }
  lv_graph_destroy(g);
  lv_params_free(p);
}
END_TEST

/* quant_utils_test.testFakeQuantizationScheduleTraining (§13.3's table): cs 5, ce 10,
 * qs 15, caps 6 -> 1. */
START_TEST(test_fake_quantization_schedule) {
  lv_params *p = scheduled_params(5, 10, 15);
  lv_qdomain d;
  EXPECT_OK(lv_qdomain_init(&d, p, "l/q/qdomain_default", "l.qdomain.default"));
  struct {
    int64_t step;
    float big[2], small[2];
  } rows[] = {
      {0, {-100.0f, 100.0f}, {-0.123456f, 0.123456f}},      {5, {-6.0f, 5.953125f}, {-0.123456f, 0.123456f}},
      {7, {-4.0f, 3.96875f}, {-0.123456f, 0.123456f}},      {10, {-1.0f, 0.9921875f}, {-0.123456f, 0.123456f}},
      {11, {-1.0f, 0.9921875f}, {-0.123456f, 0.123456f}},   {15, {-1.0f, 0.9921875f}, {-0.125f, 0.125f}},
      {16, {-1.0f, 0.9921875f}, {-0.125f, 0.125f}},
  };
  const float big[2] = {-100.0f, 100.0f}, small[2] = {-0.123456f, 0.123456f};
  lv_graph *g = lv_graph_create(0);
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    lv_graph_reset(g);
    lv_graph_set_step(g, rows[r].step);
    lv_tensor *yb = lv_qdomain_weight(&d, g, host_vec(g, big, 2));
    lv_tensor *ys = lv_qdomain_weight(&d, g, host_vec(g, small, 2));
    lf_ok(g);
    for (int i = 0; i < 2; i++) {
      ck_assert_msg(fabsf(lv_f32(yb)[i] - rows[r].big[i]) < 1e-6f, "step %lld: %g, want %g", (long long)rows[r].step,
                    lv_f32(yb)[i], rows[r].big[i]);
      ck_assert_msg(fabsf(lv_f32(ys)[i] - rows[r].small[i]) < 1e-6f, "step %lld: %g, want %g",
                    (long long)rows[r].step, lv_f32(ys)[i], rows[r].small[i]);
    }
  }
  /* testFakeQuantizationScheduleFromDefun: at step 16, 8 and 16 bits, 0.5 passes, its
   * gradient (straight-through) is 1. */
  for (int bits = 8; bits <= 16; bits += 8) {
    EXPECT_OK(lv_params_set_int(p, "cc_schedule.bits", bits));
    EXPECT_OK(lv_qdomain_init(&d, p, "l/q/qdomain_default", "l.qdomain.default"));
    lv_graph_reset(g);
    lv_graph_set_step(g, 16);
    const float half = 0.5f;
    lv_tensor *x = host_vec(g, &half, 1);
    x->requires_grad = true;
    lv_tensor *y = lv_qdomain_weight(&d, g, x);
    lf_ok(g);
    ck_assert_float_eq(lv_f32(y)[0], 0.5f);
    EXPECT_OK(lv_graph_backward(g, lv_op_reduce_sum(g, y, LV_ALL_AXES, false)));
    ck_assert_float_eq(lv_f32(x->grad)[0], 1.0f);
  }
  /* Lingvo's assert, as an error. */
  EXPECT_OK(lv_params_set_int(p, "cc_schedule.quant_start_step", 9));
  EXPECT_ERR(lv_qdomain_init(&d, p, "l/q/qdomain_default", "l.qdomain.default"), LV_ERR_INVALID,
             "l.qdomain.default.cc_schedule: quant_start_step must be >= clip_end_step");
  lv_graph_destroy(g);
  lv_params_free(p);
}
END_TEST

/* quant_utils_test: PassiveAsymQDomain(bits=4) QRAct SOFTMAX. */
START_TEST(test_passive_asym_ract) {
  lv_params *p = domain_params("PassiveAsymQDomain", (const char *const[]){"bits", "4", NULL});
  lv_params *pn = lv_params_copy(p);
  EXPECT_OK(lv_params_set_bool(pn, "narrow_to_asym_bit_depth", false));
  lv_params_freeze(pn);
  lv_params *proj = NULL;
  EXPECT_OK(lv_registry_instantiate("ProjectionLayer", &proj));
  EXPECT_OK(lv_params_set_string(proj, "name", "proj"));
  EXPECT_OK(lv_params_set_int(proj, "input_dim", 2));
  EXPECT_OK(lv_params_set_int(proj, "output_dim", 2));
  EXPECT_OK(lv_params_set_params(proj, "qdomain.default", lv_params_copy(pn)));
  lv_params_freeze(proj);
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(proj, NULL, vs, &l));
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  lv_qlayer *q = &((lv_projection_layer *)l)->q;
  lv_graph *g = lv_graph_create(0);
  float r16[16];
  for (int i = 0; i < 16; i++) r16[i] = (float)i / 15.0f;
  lv_tensor *y = lv_qlayer_ract(q, g, "default", host_vec(g, r16, 16), LV_QDIST_SOFTMAX);
  lf_ok(g);
  for (int i = 0; i < 16; i++) ck_assert_msg(fabsf(lv_f32(y)[i] - r16[i]) < 1e-6f, "%d: %g", i, lv_f32(y)[i]);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(proj);
  /* narrow_to_asym_bit_depth (the default): softmax's 1.0 -> 15/16. */
  lv_qdomain d;
  EXPECT_OK(lv_qdomain_init(&d, p, "l/q/qdomain_default", "l"));
  lv_graph_reset(g);
  const float one = 1.0f;
  lv_qlayer q2 = {0};
  q2.n_domains = 1;
  q2.names[0] = "default";
  q2.use[0] = &d;
  y = lv_qlayer_ract(&q2, g, "default", host_vec(g, &one, 1), LV_QDIST_SOFTMAX);
  lf_ok(g);
  ck_assert_float_eq_tol(lv_f32(y)[0], 0.9375f, 1e-7f);
  /* log_softmax_range (-1, 0): the minimum comes out exactly -1; without it, an error. */
  lv_graph_reset(g);
  const float lo = -3.0f;
  ck_assert_ptr_null(lv_qlayer_ract(&q2, g, "default", host_vec(g, &lo, 1), LV_QDIST_LOG_SOFTMAX));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "p.log_softmax_range must be set");
  lv_params *pl = lv_params_copy(p);
  double r[2] = {-1.0, 0.0};
  EXPECT_OK(lv_params_set_list(pl, "log_softmax_range", lv_pvalue_floats(2, r)));
  EXPECT_OK(lv_qdomain_init(&d, pl, "l/q/qdomain_default", "l"));
  lv_graph_reset(g);
  y = lv_qlayer_ract(&q2, g, "default", host_vec(g, &lo, 1), LV_QDIST_LOG_SOFTMAX);
  lf_ok(g);
  ck_assert_float_eq(lv_f32(y)[0], -1.0f);
  lv_graph_destroy(g);
  lv_params_free(pl);
  lv_params_free(pn);
  lv_params_free(p);
}
END_TEST

/* ---- a ProjectionLayer under PassiveAsymQDomain ---- */

/* A 3 -> 2 ProjectionLayer "proj" (not frozen). */
static lv_params *qproj_params_open(const char *activation, const char *domain_cls) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate("ProjectionLayer", &p));
  EXPECT_OK(lv_params_set_string(p, "name", "proj"));
  EXPECT_OK(lv_params_set_int(p, "input_dim", 3));
  EXPECT_OK(lv_params_set_int(p, "output_dim", 2));
  EXPECT_OK(lv_params_set_string(p, "activation", activation));
  if (domain_cls) EXPECT_OK(lv_params_set_class(p, "qdomain.default", domain_cls));
  return p;
}

static lv_params *qproj_params(const char *activation, const char *domain_cls) {
  lv_params *p = qproj_params_open(activation, domain_cls);
  lv_params_freeze(p);
  return p;
}

static float var_value(lv_varstore *vs, const char *name) {
  lv_var *v = lv_varstore_find(vs, name);
  ck_assert_msg(v, "no variable %s", name);
  return lv_f32(&v->value)[0];
}

static void range_of(const lv_tensor *t, float *mn, float *mx) {
  *mn = *mx = 0.0f;
  for (int64_t i = 0; i < lv_tensor_numel(t); i++) *mn = fminf(*mn, lv_f32(t)[i]), *mx = fmaxf(*mx, lv_f32(t)[i]);
}

/* One call's quantized TANH projection recomputed on graph h from the TF-checked op: the
 * pre-activation x . w quantized to [min(z, 0), max(z, 0)], tanh, the output likewise.
 * The ranges come back in pre[2] and out[2]. */
static lv_tensor *expect_passive(lv_graph *h, const lv_tensor *w, const float *x, int rows, float pre[2],
                                 float out[2]) {
  float z[8 * 2];
  for (int r = 0; r < rows; r++)
    for (int o = 0; o < 2; o++) {
      float s = 0;
      for (int i = 0; i < 3; i++) s += x[r * 3 + i] * lv_f32(w)[i * 2 + o];
      z[r * 2 + o] = s;
    }
  lv_tensor *zt = host_vec(h, z, rows * 2);
  range_of(zt, &pre[0], &pre[1]);
  lv_tensor *a = lv_op_activation(h, lv_op_fake_quant_vars(h, zt, host_scalar(h, pre[0]), host_scalar(h, pre[1]), 8,
                                                           false), LV_ACT_TANH);
  range_of(a, &out[0], &out[1]);
  lv_tensor *y = lv_op_fake_quant_vars(h, a, host_scalar(h, out[0]), host_scalar(h, out[1]), 8, false);
  lf_ok(h);
  return y;
}

/* Lingvo's names (a TF run of ProjectionLayer with PassiveAsymQDomain). */
static const char *const kProjRanges[4] = {"task/proj/q/qdomain_default/q/activation_min/var",
                                           "task/proj/q/qdomain_default/q/activation_max/var",
                                           "task/proj/q/qdomain_default/q/affine_matmul_min/var",
                                           "task/proj/q/qdomain_default/q/affine_matmul_max/var"};

/* "task/proj" (3 -> 2, TANH) under PassiveAsymQDomain, its variables made. */
static lv_layer *open_passive_proj(lv_params **p, lv_varstore **vs) {
  *p = qproj_params("TANH", "PassiveAsymQDomain");
  *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(*p, "task", *vs, &l));
  EXPECT_OK(lv_varstore_finalize(*vs, 3));
  return l;
}

START_TEST(test_projection_passive_asym) {
  lv_params *p;
  lv_varstore *vs;
  lv_layer *l = open_passive_proj(&p, &vs);
  const char *const *names = kProjRanges;
  for (int i = 0; i < 4; i++) {
    lv_var *v = lv_varstore_find(vs, names[i]);
    ck_assert_msg(v && !v->trainable && lv_tensor_numel(&v->value) == 1, "%s", names[i]);
    ck_assert_float_eq(lv_f32(&v->value)[0], i % 2 ? 1.0f : -1.0f);
  }
  ck_assert_int_eq(lv_varstore_count(vs), 5);
  lv_projection_layer *pl = (lv_projection_layer *)l;
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_step(g, 1);
  const float x1[4 * 3] = {0.3f, -0.2f, 0.5f, 0.1f, 0.9f, -0.4f, -0.7f, 0.2f, 0.05f, 0.6f, 0.6f, -0.1f};
  const float x2[2 * 3] = {2.0f, -1.5f, 1.0f, -2.0f, 1.0f, 0.5f};
  lv_tensor *w = lv_qdomain_weight(pl->q.use[1], g, &pl->w->value); /* the quantized weight the layer uses */
  lf_ok(g);
  float wq_host[6];
  memcpy(wq_host, lv_f32(w), sizeof wq_host);
  /* The weight itself: [min(w), max(w)] at 8 bits. */
  float wmin = 0, wmax = 0;
  for (int i = 0; i < 6; i++) wmin = fminf(wmin, lv_f32(&pl->w->value)[i]), wmax = fmaxf(wmax, lv_f32(&pl->w->value)[i]);
  lv_graph *h = lv_graph_create(0);
  lv_tensor *wq = lv_op_fake_quant_vars(h, &pl->w->value, host_scalar(h, wmin), host_scalar(h, wmax), 8, false);
  lf_ok(h);
  for (int i = 0; i < 6; i++) ck_assert_float_eq(lv_f32(w)[i], lv_f32(wq)[i]);
  lv_graph_destroy(h);
  h = NULL;
  /* Two calls in one training step: each quantized to its own batch's range; the step's
   * range is the union, and one moving-average update follows. */
  lv_tensor *y1 = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(4, 3), x1));
  lv_tensor *y2 = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(2, 3), x2));
  lf_ok(g);
  ck_assert_int_eq(lv_graph_num_updates(g), 4);
  h = lv_graph_create(0);
  float pre1[2], out1[2], pre2[2], out2[2];
  lv_tensor *w1 = expect_passive(h, w, x1, 4, pre1, out1), *w2 = expect_passive(h, w, x2, 2, pre2, out2);
  for (int i = 0; i < 8; i++) ck_assert_msg(fabsf(lv_f32(y1)[i] - lv_f32(w1)[i]) <= 1e-6f, "%d: %g, want %g", i,
                                           lv_f32(y1)[i], lv_f32(w1)[i]);
  for (int i = 0; i < 4; i++) ck_assert_msg(fabsf(lv_f32(y2)[i] - lv_f32(w2)[i]) <= 1e-6f, "%d: %g, want %g", i,
                                           lv_f32(y2)[i], lv_f32(w2)[i]);
  lv_graph_destroy(h);
  const float amin = fminf(out1[0], out2[0]), amax = fmaxf(out1[1], out2[1]);
  const float pmin = fminf(pre1[0], pre2[0]), pmax = fmaxf(pre1[1], pre2[1]);
  EXPECT_OK(lv_graph_apply_updates(g));
  ck_assert_float_eq_tol(var_value(vs, names[0]), 0.99f * -1.0f + 0.01f * amin, 1e-6f);
  ck_assert_float_eq_tol(var_value(vs, names[1]), 0.99f * 1.0f + 0.01f * amax, 1e-6f);
  ck_assert_float_eq_tol(var_value(vs, names[2]), 0.99f * -1.0f + 0.01f * pmin, 1e-6f);
  ck_assert_float_eq_tol(var_value(vs, names[3]), 0.99f * 1.0f + 0.01f * pmax, 1e-6f);
  float lmin = 0, lmax = 0;
  ck_assert(lv_qdomain_learned_act_range(vs, "task/proj", NULL, "activation", &lmin, &lmax));
  ck_assert_float_eq(lmin, var_value(vs, names[0]));
  ck_assert_float_eq(lmax, var_value(vs, names[1]));
  ck_assert(!lv_qdomain_learned_act_range(vs, "task/proj", NULL, "m_output", &lmin, &lmax));
  /* The same through the layer, and the weight's range. */
  float rmin = 0, rmax = 0;
  int bits = 0;
  ck_assert(lv_qlayer_act_range(&pl->q, "affine_matmul", &rmin, &rmax, &bits));
  ck_assert_float_eq(rmin, var_value(vs, names[2]));
  ck_assert_float_eq(rmax, var_value(vs, names[3]));
  ck_assert_int_eq(bits, 8);
  ck_assert(!lv_qlayer_act_range(&pl->q, "no_such_act", &rmin, &rmax, &bits));
  ck_assert(lv_qlayer_weight_range(&pl->q, "weight", &pl->w->value, &rmin, &rmax, &bits));
  ck_assert_float_eq(rmin, wmin);
  ck_assert_float_eq(rmax, wmax);
  /* A new step starts a new running range. */
  lv_graph_reset(g);
  lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(2, 3), x2));
  lf_ok(g);
  ck_assert_int_eq(lv_graph_num_updates(g), 4);
  /* Eval: the stored ranges, no update. */
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  lv_tensor *ye = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(2, 3), x2));
  lf_ok(g);
  ck_assert_int_eq(lv_graph_num_updates(g), 0);
  h = lv_graph_create(0);
  float z[4];
  for (int r = 0; r < 2; r++)
    for (int o = 0; o < 2; o++) {
      float s = 0;
      for (int i = 0; i < 3; i++) s += x2[r * 3 + i] * wq_host[i * 2 + o];
      z[r * 2 + o] = s;
    }
  lv_tensor *pre = lv_op_fake_quant_vars(h, host_vec(h, z, 4), host_scalar(h, var_value(vs, names[2])),
                                         host_scalar(h, var_value(vs, names[3])), 8, false);
  lv_tensor *want = lv_op_fake_quant_vars(h, lv_op_activation(h, pre, LV_ACT_TANH),
                                          host_scalar(h, var_value(vs, names[0])),
                                          host_scalar(h, var_value(vs, names[1])), 8, false);
  lf_ok(h);
  for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(lv_f32(ye)[i], lv_f32(want)[i], 1e-6f);
  lv_graph_destroy(h);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST


/* Real Lingvo (0.14.0, TF 2.13: scripts/lingvo_peer/qat_vectors.py): ProjectionLayer(3 -> 2, TANH) with
 * PassiveAsymQDomain and w set to kW, two training calls in one step (x1, x2), then
 * PostTrainingStepUpdate, then the eval graph on x2 with the updated ranges. */
static const float kW[6] = {0.4f, -0.7f, 0.25f, 0.9f, -0.55f, 0.3f};
static const float kX1[12] = {0.3f, -0.2f, 0.5f, 0.1f, 0.9f, -0.4f, -0.7f, 0.2f, 0.05f, 0.6f, 0.6f, -0.1f};
static const float kX2[6] = {2.0f, -1.5f, 1.0f, -2.0f, 1.0f, 0.5f};
static const float kLingvoY1[8] = {-0.20305654406547546f, -0.23634450137615204f, 0.44938743114471436f,
                                   0.5492513179779053f,   -0.2529884874820709f,  0.5958544611930847f,
                                   0.4194282591342926f,   0.08654869347810745f};
static const float kLingvoY2[4] = {-0.13136880099773407f, -0.9814022183418274f, -0.6800267100334167f,
                                   0.9891297817230225f};
static const float kLingvoRanges[4] = {-0.9998498558998108f, 0.9998554587364197f, -1.014501929283142f,
                                       1.014533281326294f}; /* activation min, max; affine_matmul min, max */
static const float kLingvoEvalY2[4] = {-0.12547171115875244f, -0.7685142159461975f, -0.6822524070739746f,
                                       0.7685142159461975f};

START_TEST(test_projection_passive_asym_lingvo) {
  lv_params *p;
  lv_varstore *vs;
  lv_layer *l = open_passive_proj(&p, &vs);
  lv_projection_layer *pl = (lv_projection_layer *)l;
  memcpy(lv_f32(&pl->w->value), kW, sizeof kW);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *y1 = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(4, 3), kX1));
  lv_tensor *y2 = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(2, 3), kX2));
  lf_ok(g);
  for (int i = 0; i < 8; i++)
    ck_assert_msg(fabsf(lv_f32(y1)[i] - kLingvoY1[i]) < 1e-6f, "y1[%d] %.9g, Lingvo %.9g", i, lv_f32(y1)[i],
                  kLingvoY1[i]);
  for (int i = 0; i < 4; i++)
    ck_assert_msg(fabsf(lv_f32(y2)[i] - kLingvoY2[i]) < 1e-6f, "y2[%d] %.9g, Lingvo %.9g", i, lv_f32(y2)[i],
                  kLingvoY2[i]);
  EXPECT_OK(lv_graph_apply_updates(g));
  const char *const *names = kProjRanges;
  for (int i = 0; i < 4; i++)
    ck_assert_msg(fabsf(var_value(vs, names[i]) - kLingvoRanges[i]) < 1e-6f, "%s %.9g, Lingvo %.9g", names[i],
                  var_value(vs, names[i]), kLingvoRanges[i]);
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  lv_tensor *e2 = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(2, 3), kX2));
  lf_ok(g);
  for (int i = 0; i < 4; i++)
    ck_assert_msg(fabsf(lv_f32(e2)[i] - kLingvoEvalY2[i]) < 1e-6f, "eval y2[%d] %.9g, Lingvo %.9g", i,
                  lv_f32(e2)[i], kLingvoEvalY2[i]);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST


/* The same for LSTMCellSimple (3 -> 4, forget_gate_bias 1, cell_value_cap None; wm, b
 * and the state from scripts/lingvo_peer/qat_vectors.py): two steps (the second padded for
 * row 1), every range Lingvo's cell tracks after the update, the eval graph's state. */
static const float kLingvoCellM[8] = {0.12647834420204163f, 0.12083199620246887f, 0.04065375775098801f, -0.013551251962780952f, -0.26068904995918274f, -0.08814665675163269f, 0.1537877768278122f, 0.21755345165729523f};
static const float kLingvoCellC[8] = {0.28810909390449524f, 0.29690632224082947f, 0.1033673882484436f, -0.03518889844417572f, -0.4442945718765259f, -0.14572861790657043f, 0.27013108134269714f, 0.43007713556289673f};
static const float kLingvoCellEvalM[8] = {0.10896844416856766f, 0.10896844416856766f, 0.04670076072216034f, -0.01556692086160183f, -0.25685420632362366f, -0.08561806380748749f, 0.14010228216648102f, 0.19458651542663574f};
static const float kLingvoCellEvalC[8] = {0.24960798025131226f, 0.2730087339878082f, 0.11700373888015747f, -0.031200997531414032f, -0.43681395053863525f, -0.14040449261665344f, 0.2418077290058136f, 0.3744119703769684f};
typedef struct {
  const char *name;
  float v;
} named_value;
static const named_value kLingvoCellRanges[] = {
    {"cell/q/qdomain_default/q/add_bias_max/var", 1.0047165155410767f},
    {"cell/q/qdomain_default/q/add_bias_min/var", -0.995019793510437f},
    {"cell/q/qdomain_default/q/c_forget_gate_max/var", 0.9918043613433838f},
    {"cell/q/qdomain_default/q/c_forget_gate_min/var", -0.9913805723190308f},
    {"cell/q/qdomain_default/q/c_input_gate_max/var", 0.9956899285316467f},
    {"cell/q/qdomain_default/q/c_input_gate_min/var", -0.9945945143699646f},
    {"cell/q/qdomain_default/q/c_output_gate_max/var", 0.9946343898773193f},
    {"cell/q/qdomain_default/q/c_output_gate_min/var", -0.9944292306900024f},
    {"cell/q/qdomain_default/q/m_output_max/var", 0.9921677708625793f},
    {"cell/q/qdomain_default/q/m_output_min/var", -0.9926146268844604f}};

/* Runs a 3 -> 4 cell of cell size h two steps on graph g (training or eval) from Lingvo's
 * state (the second step padded for row 1); m, c out. */
static void lingvo_cell_steps(lv_layer *l, lv_graph *g, int64_t h, lv_tensor **m, lv_tensor **c) {
  float x[6] = {0.5f, -0.3f, 0.8f, -0.6f, 0.2f, 0.1f}, m0[8], c0[10];
  for (int i = 0; i < 10; i++) m0[i % 8] = (float)(0.3 * sin(1.3 * (i % 8))), c0[i] = (float)(0.7 * cos(0.9 * i));
  const float pads[2][2] = {{0, 0}, {0, 1}};
  *m = lf_tensor(g, lv_shape2(2, 4), m0);
  *c = lf_tensor(g, lv_shape2(2, h), c0);
  for (int t = 0; t < 2; t++) {
    lv_nmap in, out;
    lv_nmap_init(&in);
    lv_nmap_init(&out);
    EXPECT_OK(lv_nmap_set(&in, "act", lf_tensor(g, lv_shape2(2, 3), x)));
    EXPECT_OK(lv_nmap_set(&in, "paddings", lf_tensor(g, lv_shape2(2, 1), pads[t])));
    EXPECT_OK(lv_nmap_set(&in, "m", *m));
    EXPECT_OK(lv_nmap_set(&in, "c", *c));
    if (!lv_layer_fprop(l, g, &in, &out)) lf_ok(g);
    *m = lv_nmap_get(&out, "m");
    *c = lv_nmap_get(&out, "c");
    lv_nmap_free(&in);
    lv_nmap_free(&out);
  }
  lf_ok(g);
}

static void expect_near(const char *what, const float *got, const float *want, int n) {
  for (int i = 0; i < n; i++)
    ck_assert_msg(fabsf(got[i] - want[i]) < 2e-6f, "%s[%d] %.9g, Lingvo %.9g", what, i, got[i], want[i]);
}

/* An LSTMCellSimple "cell" (3 -> 4, cell size hidden or 4, forget_gate_bias 1,
 * cell_value_cap None) with qdomain.default = domain (taken; NULL: none). Frozen. */
static lv_params *cell_params_of(const char *cls, int64_t hidden, lv_params *domain) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  EXPECT_OK(lv_params_set_string(p, "name", "cell"));
  EXPECT_OK(lv_params_set_int(p, "num_input_nodes", 3));
  EXPECT_OK(lv_params_set_int(p, "num_output_nodes", 4));
  EXPECT_OK(lv_params_set_int(p, "num_hidden_nodes", hidden));
  EXPECT_OK(lv_params_set_float(p, "forget_gate_bias", 1.0));
  EXPECT_OK(lv_params_set_none(p, "cell_value_cap"));
  if (domain) EXPECT_OK(lv_params_set_params(p, "qdomain.default", domain));
  lv_params_freeze(p);
  return p;
}

static lv_params *cell_params(int64_t hidden, lv_params *domain) {
  return cell_params_of("LSTMCellSimple", hidden, domain);
}

/* A 3 -> 4 cell of class cls under PassiveAsymQDomain with qat_vectors.py's weights
 * (ln_scale too for the layer-normalized one) against Lingvo's outputs and ranges. */
static void lingvo_cell_case(const char *cls, const float *m_want, const float *c_want, const named_value *ranges,
                             int n_ranges, const float *eval_m, const float *eval_c) {
  lv_layers_register_all();
  lv_params *dp = NULL;
  EXPECT_OK(lv_registry_instantiate("PassiveAsymQDomain", &dp));
  lv_params *p = cell_params_of(cls, 0, dp);
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(p, NULL, vs, &l));
  EXPECT_OK(lv_varstore_finalize(vs, 3));
  lv_lstm_cell *cl = (lv_lstm_cell *)l;
  for (int i = 0; i < 7 * 16; i++) lv_f32(&cl->wm->value)[i] = (float)(0.5 * sin(0.37 * i));
  for (int i = 0; i < 16; i++) lv_f32(&cl->b->value)[i] = (float)(0.2 * cos(0.5 * i));
  if (cl->ln_scale)
    for (int i = 0; i < 16; i++) lv_f32(&cl->ln_scale->value)[i] = (float)(1.0 + 0.1 * sin((double)i));
  lv_graph *g = lv_graph_create(0);
  lv_tensor *m, *c;
  lingvo_cell_steps(l, g, 4, &m, &c);
  expect_near("m", lv_f32(m), m_want, 8);
  expect_near("c", lv_f32(c), c_want, 8);
  EXPECT_OK(lv_graph_apply_updates(g));
  for (int i = 0; i < n_ranges; i++)
    ck_assert_msg(fabsf(var_value(vs, ranges[i].name) - ranges[i].v) < 2e-6f, "%s %.9g, Lingvo %.9g", ranges[i].name,
                  var_value(vs, ranges[i].name), ranges[i].v);
  /* Every other range Lingvo's cell tracks (zero_m, m_zoneout, mixed, ...) exists and kept
   * its default, as in Lingvo's run. */
  int others = 0;
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    const lv_var *v = lv_varstore_get(vs, i);
    bool listed = !strstr(v->name, "/q/");
    for (int k = 0; k < n_ranges && !listed; k++) listed = !strcmp(v->name, ranges[k].name);
    if (listed) continue;
    others++;
    const bool is_min = strstr(v->name, "_min/var") != NULL;
    ck_assert_msg(lv_f32(&v->value)[0] == (is_min ? -1.0f : 1.0f), "%s moved: %g", v->name, lv_f32(&v->value)[0]);
  }
  ck_assert_int_eq(n_ranges + others, (cl->ln_scale ? 32 : 24)); /* Lingvo's 12 / 16 acts */
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  lingvo_cell_steps(l, g, 4, &m, &c);
  expect_near("eval m", lv_f32(m), eval_m, 8);
  expect_near("eval c", lv_f32(c), eval_c, 8);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}

START_TEST(test_lstm_cell_passive_asym_lingvo) {
  lingvo_cell_case("LSTMCellSimple", kLingvoCellM, kLingvoCellC, kLingvoCellRanges,
                   (int)(sizeof kLingvoCellRanges / sizeof kLingvoCellRanges[0]), kLingvoCellEvalM, kLingvoCellEvalC);
}
END_TEST

/* LayerNormalizedLSTMCellSimple: its per-gate add_bias_<i> ranges besides the cell's. */
static const float kLingvoLnCellM[8] = {0.2598794400691986f, -0.0119484793394804f, 0.16130447387695312f, 0.1538366675376892f, 0.01998230628669262f, 0.009222603403031826f, 0.023056507110595703f, 0.004611301701515913f};
static const float kLingvoLnCellC[8] = {0.3184328079223633f, -0.019298957660794258f, 0.5162470936775208f, 0.6513398289680481f, 0.02541615627706051f, 0.013685622252523899f, 0.05083231255412102f, 0.027371244505047798f};
static const float kLingvoLnCellEvalM[8] = {0.015569695271551609f, -0.038924239575862885f, 0.16348180174827576f, 0.1323424130678177f, 0.0077848476357758045f, 0.0077848476357758045f, 0.0f, -0.0077848476357758045f};
static const float kLingvoLnCellEvalC[8] = {0.02343885973095894f, -0.07031658291816711f, 0.5312808156013489f, 0.5156549215316772f, 0.007812953554093838f, 0.007812953554093838f, 0.007812953554093838f, -0.03906476870179176f};
static const named_value kLingvoLnCellRanges[] = {
    {"cell/q/qdomain_default/q/add_bias_0_max/var", 1.0076993703842163f},
    {"cell/q/qdomain_default/q/add_bias_0_min/var", -1.0011731386184692f},
    {"cell/q/qdomain_default/q/add_bias_1_max/var", 1.0034606456756592f},
    {"cell/q/qdomain_default/q/add_bias_1_min/var", -1.0060436725616455f},
    {"cell/q/qdomain_default/q/add_bias_2_max/var", 1.0128021240234375f},
    {"cell/q/qdomain_default/q/add_bias_2_min/var", -0.9980334043502808f},
    {"cell/q/qdomain_default/q/add_bias_3_max/var", 1.0073153972625732f},
    {"cell/q/qdomain_default/q/add_bias_3_min/var", -1.0050305128097534f},
    {"cell/q/qdomain_default/q/c_forget_gate_max/var", 0.9957755208015442f},
    {"cell/q/qdomain_default/q/c_forget_gate_min/var", -0.99603271484375f},
    {"cell/q/qdomain_default/q/c_input_gate_max/var", 0.9963536858558655f},
    {"cell/q/qdomain_default/q/c_input_gate_min/var", -0.9930112957954407f},
    {"cell/q/qdomain_default/q/c_output_gate_max/var", 0.9965305924415588f},
    {"cell/q/qdomain_default/q/c_output_gate_min/var", -0.9957724809646606f},
    {"cell/q/qdomain_default/q/m_output_max/var", 0.9939196109771729f},
    {"cell/q/qdomain_default/q/m_output_min/var", -0.9912165403366089f}};

START_TEST(test_ln_lstm_cell_passive_asym_lingvo) {
  lingvo_cell_case("LayerNormalizedLSTMCellSimple", kLingvoLnCellM, kLingvoLnCellC, kLingvoLnCellRanges,
                   (int)(sizeof kLingvoLnCellRanges / sizeof kLingvoLnCellRanges[0]), kLingvoLnCellEvalM,
                   kLingvoLnCellEvalC);
}
END_TEST


/* Gradients through the fake quantization, against real Lingvo (qat_vectors.py's
 * projection_grads): d(sum(y1^2) + sum(y2))/dw of the training graph for
 * PassiveAsymQDomain (the straight-through gradient and the min/max sums flowing back
 * through the weight's and the batches' reductions) and SymmetricScheduledClipQDomain at
 * step 7 (clipping to [-4, 3.96875]) and 16 (8-bit quantization), with the outputs. */
static const float kLingvoPassiveDw[6] = {1.5862767696380615f, -0.49042755365371704f, 0.1081920862197876f, 1.022330641746521f, 0.6779251098632812f, -0.4652697443962097f};
static const struct {
  int64_t step;
  float y1[8], y2[4], dw[6];
} kLingvoScheduled[2] = {
    {7, {-0.20217575132846832f, -0.23549576103687286f, 0.45023900270462036f, 0.5511280298233032f, -0.25195568799972534f, 0.5947602987289429f, 0.4177803695201874f, 0.0897577702999115f}, {-0.12435299903154373f, -0.9852168560028076f, -0.6777821779251099f, 0.9852168560028076f}, {1.587475299835205f, -0.48799222707748413f, 0.10696381330490112f, 1.0255990028381348f, 0.6811869144439697f, -0.4647657573223114f}},
    {16, {-0.203125f, -0.234375f, 0.453125f, 0.546875f, -0.25f, 0.59375f, 0.421875f, 0.0859375f}, {-0.125f, -0.7578125f, -0.671875f, 0.7578125f}, {1.5817933082580566f, -0.4895388185977936f, 0.12002825736999512f, 1.0313597917556763f, 0.6793747544288635f, -0.5055084824562073f}},
};

/* loss and dw of the projection l on graph g at global step `step`. */
static void lingvo_loss_grad(lv_layer *l, lv_graph *g, int64_t step, lv_tensor **y1, lv_tensor **y2) {
  lv_projection_layer *pl = (lv_projection_layer *)l;
  memcpy(lv_f32(&pl->w->value), kW, sizeof kW);
  lv_graph_reset(g);
  lv_graph_set_step(g, step);
  *y1 = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(4, 3), kX1));
  *y2 = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(2, 3), kX2));
  lv_tensor *loss = lv_op_add(g, lv_op_reduce_sum(g, lv_op_mul(g, *y1, *y1), LV_ALL_AXES, false),
                              lv_op_reduce_sum(g, *y2, LV_ALL_AXES, false));
  lf_ok(g);
  memset(lv_f32(&pl->w->grad), 0, sizeof(float) * 6);
  EXPECT_OK(lv_graph_backward(g, loss));
}

START_TEST(test_projection_grads_lingvo) {
  lv_params *p;
  lv_varstore *vs;
  lv_layer *l = open_passive_proj(&p, &vs);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *y1, *y2;
  lingvo_loss_grad(l, g, 0, &y1, &y2);
  expect_near("PassiveAsymQDomain dw", lv_f32(&((lv_projection_layer *)l)->w->grad), kLingvoPassiveDw, 6);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
  p = qproj_params_open("TANH", NULL);
  EXPECT_OK(lv_params_set_params(p, "qdomain.default", scheduled_params(5, 10, 15)));
  lv_params_freeze(p);
  vs = lv_varstore_create();
  EXPECT_OK(lv_layer_create(p, "task", vs, &l));
  EXPECT_OK(lv_varstore_finalize(vs, 3));
  for (int k = 0; k < 2; k++) {
    lingvo_loss_grad(l, g, kLingvoScheduled[k].step, &y1, &y2);
    expect_near("scheduled y1", lv_f32(y1), kLingvoScheduled[k].y1, 8);
    expect_near("scheduled y2", lv_f32(y2), kLingvoScheduled[k].y2, 4);
    expect_near("scheduled dw", lv_f32(&((lv_projection_layer *)l)->w->grad), kLingvoScheduled[k].dw, 6);
  }
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST


/* delay_start_steps: no quantization while training before it (the ranges still
 * accumulate and update), from it on as usual, -1 never; eval always quantizes. freeze:
 * quantized, but the ranges never move. */
START_TEST(test_passive_asym_delay_freeze) {
  lv_layers_register_all();
  for (int mode = 0; mode < 3; mode++) { /* delay 5, delay -1, freeze */
    lv_params *p = qproj_params_open("TANH", "PassiveAsymQDomain");
    if (mode < 2) EXPECT_OK(lv_params_set_int(p, "qdomain.default.delay_start_steps", mode == 0 ? 5 : -1));
    else EXPECT_OK(lv_params_set_bool(p, "qdomain.default.freeze", true));
    lv_params_freeze(p);
    lv_varstore *vs = lv_varstore_create();
    lv_layer *l = NULL;
    EXPECT_OK(lv_layer_create(p, "task", vs, &l));
    EXPECT_OK(lv_varstore_finalize(vs, 3));
    lv_projection_layer *pl = (lv_projection_layer *)l;
    memcpy(lv_f32(&pl->w->value), kW, sizeof kW);
    lv_graph *g = lv_graph_create(0);
    for (int64_t step = 4; step <= 5; step++) {
      lv_graph_reset(g);
      lv_graph_set_step(g, step);
      lv_tensor *y = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(4, 3), kX1));
      lf_ok(g);
      ck_assert_int_eq(lv_graph_num_updates(g), mode == 2 ? 0 : 4);
      bool quantized = mode == 2 || (mode == 0 && step >= 5);
      for (int r = 0; r < 4; r++)
        for (int o = 0; o < 2; o++) {
          float z = 0;
          for (int i = 0; i < 3; i++) z += kX1[r * 3 + i] * kW[i * 2 + o];
          const float got = lv_f32(y)[r * 2 + o];
          if (!quantized) ck_assert_msg(fabsf(got - tanhf(z)) < 1e-6f, "mode %d step %lld: %g, float %g", mode,
                                        (long long)step, got, tanhf(z));
          else if (r == 0 && o == 0) ck_assert_float_eq_tol(got, kLingvoY1[0], 1e-6f); /* Lingvo's quantized value */
        }
      EXPECT_OK(lv_graph_apply_updates(g));
    }
    const float amin = var_value(vs, kProjRanges[0]);
    if (mode == 2) ck_assert_float_eq(amin, -1.0f);
    else ck_assert(amin > -1.0f);
    /* Eval quantizes with the ranges whatever the delay. */
    lv_graph_reset(g);
    lv_graph_set_training(g, false);
    lv_tensor *e = lv_projection_layer_fprop(pl, g, lf_tensor(g, lv_shape2(4, 3), kX1));
    lf_ok(g);
    float z = kX1[0] * kW[0] + kX1[1] * kW[2] + kX1[2] * kW[4];
    ck_assert_msg(fabsf(lv_f32(e)[0] - tanhf(z)) > 1e-5f, "mode %d: eval output %g is the float one", mode,
                  lv_f32(e)[0]);
    lv_graph_destroy(g);
    lv_layer_free(l);
    lv_varstore_destroy(vs);
    lv_params_free(p);
  }
}
END_TEST


/* MultiHeadedAttention (4 -> 4, 2 heads, dot-product inner with per-dim scale) under
 * PassiveAsymQDomain, its inner attention too (Lingvo's inner_atten_params.qdomain; in
 * lingvoc inherited), against real Lingvo (qat_vectors.py's mha): the training context
 * and probabilities with a padded source position, the ranges after the step (the four
 * projections' that moved; every other stays at its default), and the eval graph on an
 * unpadded source (Lingvo's eval fake-quantizes padded positions' very negative logits
 * with the never-trained "logits" range, giving them weight, which lingvoc does not
 * reproduce: docs/learner.md). */
static const float kLingvoMhaCtx[8] = {-0.11629465222358704f, -0.09882698208093643f, 0.00406269496306777f, 0.11897756159305573f, 0.24575474858283997f, 0.024893593043088913f, -0.21217043697834015f, -0.2701883912086487f};
static const float kLingvoMhaProbs[6] = {0.33984375f, 0.33203125f, 0.328125f, 0.49609375f, 0.50390625f, 0.0f};
static const float kLingvoMhaEvalCtx[8] = {-0.11464780569076538f, -0.09429234266281128f, 0.0025558427441865206f, 0.12161551415920258f, 0.26805922389030457f, 0.05513318255543709f, -0.197378009557724f, -0.2753616273403168f};
static const float kLingvoMhaEvalProbs[6] = {0.33984375f, 0.33203125f, 0.328125f, 0.33203125f, 0.3359375f, 0.3359375f};
static const named_value kLingvoMhaRanges[] = {
    {"mha/q/qdomain_default/q/query_proj_add_max/var", 0.992079496383667f},
    {"mha/q/qdomain_default/q/query_proj_add_min/var", -0.992294192314148f},
    {"mha/q/qdomain_default/q/query_proj_matmul_max/var", 0.9915398955345154f},
    {"mha/q/qdomain_default/q/query_proj_matmul_min/var", -0.9913495182991028f},
    {"mha/q/qdomain_default/q/source_proj_add_max/var", 0.9930910468101501f},
    {"mha/q/qdomain_default/q/source_proj_add_min/var", -0.9931639432907104f},
    {"mha/q/qdomain_default/q/source_proj_matmul_max/var", 0.9925600290298462f},
    {"mha/q/qdomain_default/q/source_proj_matmul_min/var", -0.9926859140396118f}};

/* Params of class cls named name with int settings keys[i] = vals[i] (not frozen). */
static lv_params *int_params(const char *cls, const char *name, const char *const *keys, const int64_t *vals, int n) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  EXPECT_OK(lv_params_set_string(p, "name", name));
  for (int i = 0; i < n; i++) EXPECT_OK(lv_params_set_int(p, keys[i], vals[i]));
  return p;
}

/* p (not frozen) with qdomain.default PassiveAsymQDomain, frozen, built at the top scope
 * in a new var store (finalized, seed 3). */
static lv_layer *open_passive(lv_params *p, lv_varstore **vs) {
  EXPECT_OK(lv_params_set_class(p, "qdomain.default", "PassiveAsymQDomain"));
  lv_params_freeze(p);
  *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(p, NULL, *vs, &l));
  EXPECT_OK(lv_varstore_finalize(*vs, 3));
  return l;
}

/* An attention's pack + context on g: qat_vectors.py's source [3, 2, 4] with paddings
 * pads [3, 2], its query [2, 4]. */
static void atten_context_of(lv_layer *l, lv_graph *g, const float *pads, lv_tensor **ctx, lv_tensor **probs) {
  float src[24], query[8];
  for (int i = 0; i < 24; i++) src[i] = (float)(0.8 * sin(0.7 * i + 0.3));
  for (int i = 0; i < 8; i++) query[i] = (float)(0.6 * cos(1.1 * i));
  lv_atten_packed packed;
  lv_attention *a = lv_attention_of(l);
  lv_tensor *s = lf_tensor(g, lv_shape3(3, 2, 4), src);
  ck_assert(lv_attention_pack_source(a, g, s, s, lf_tensor(g, lv_shape2(3, 2), pads), &packed));
  ck_assert(lv_attention_compute_context(a, g, &packed, lf_tensor(g, lv_shape2(2, 4), query), ctx, probs));
  lf_ok(g);
}

/* The eval graph of attention l on an unpadded source against Lingvo's; then frees it all. */
static void atten_eval_and_close(lv_layer *l, lv_graph *g, lv_varstore *vs, lv_params *p, const float *ctx_want,
                                 const float *probs_want) {
  const float none[6] = {0};
  lv_tensor *ctx, *probs;
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  atten_context_of(l, g, none, &ctx, &probs);
  expect_near("eval ctx", lv_f32(ctx), ctx_want, 8);
  expect_near("eval probs", lv_f32(probs), probs_want, 6);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}

START_TEST(test_mha_passive_asym_lingvo) {
  lv_params *p = NULL;
  const char *keys[5] = {"source_dim", "query_dim", "hidden_dim", "context_dim", "num_attention_heads"};
  const int64_t vals[5] = {4, 4, 4, 4, 2};
  p = int_params("MultiHeadedAttention", "mha", keys, vals, 5);
  lv_varstore *vs;
  lv_layer *l = open_passive(p, &vs);
  const char *projs[2] = {"mha/query_proj/var", "mha/source_proj/var"};
  const char *biases[2] = {"mha/query_proj_b/var", "mha/source_proj_b/var"};
  for (int k = 0; k < 2; k++) {
    lv_var *w = lv_varstore_find(vs, projs[k]), *b = lv_varstore_find(vs, biases[k]);
    ck_assert_msg(w && b, "%s", projs[k]);
    for (int i = 0; i < 16; i++) lv_f32(&w->value)[i] = (float)(0.5 * sin(k + 0.9 * i));
    for (int i = 0; i < 4; i++) lv_f32(&b->value)[i] = (float)(0.1 * cos(k + i));
  }
  lv_var *pds = lv_varstore_find(vs, "mha/inner_att/per_dim_scale/var");
  ck_assert_ptr_nonnull(pds);
  lv_f32(&pds->value)[0] = 0.1f;
  lv_f32(&pds->value)[1] = -0.2f;
  lv_graph *g = lv_graph_create(0);
  const float pads[6] = {0, 0, 0, 0, 0, 1};
  lv_tensor *ctx, *probs;
  atten_context_of(l, g, pads, &ctx, &probs);
  expect_near("ctx", lv_f32(ctx), kLingvoMhaCtx, 8);
  expect_near("probs", lv_f32(probs), kLingvoMhaProbs, 6);
  EXPECT_OK(lv_graph_apply_updates(g));
  const int n = (int)(sizeof kLingvoMhaRanges / sizeof kLingvoMhaRanges[0]);
  int others = 0;
  for (int i = 0; i < lv_varstore_count(vs); i++) {
    const lv_var *v = lv_varstore_get(vs, i);
    if (!strstr(v->name, "/q/")) continue;
    int k = 0;
    while (k < n && strcmp(v->name, kLingvoMhaRanges[k].name)) k++;
    const float want = k < n ? kLingvoMhaRanges[k].v : strstr(v->name, "_min/var") ? -1.0f : 1.0f;
    others += k == n;
    ck_assert_msg(fabsf(lv_f32(&v->value)[0] - want) < 2e-6f, "%s %.9g, Lingvo %.9g", v->name, lv_f32(&v->value)[0],
                  want);
  }
  ck_assert_int_eq(n + others, 20); /* Lingvo's 8 + 1 acts of the layer, 1 of the inner */
  atten_eval_and_close(l, g, vs, p, kLingvoMhaEvalCtx, kLingvoMhaEvalProbs);
}
END_TEST


/* ConvLayer (3x3, 2 -> 2 channels, no batch norm, TANH) under PassiveAsymQDomain with time
 * paddings (the last frame of the second example padded) against real Lingvo
 * (qat_vectors.py's conv): training output, the pre_activation and activation ranges
 * after the step, the eval output. */
static const float kLingvoConvY[48] = {-0.3230006992816925f, 0.16748183965682983f, -0.039876628667116165f, 0.13159288465976715f, 0.1196298897266388f, 0.1196298897266388f, 0.5104208588600159f, -0.24324743449687958f, 0.03588896617293358f, -0.1794448345899582f, -0.2591980993747711f, -0.07177793234586716f, -0.5064331889152527f, 0.3230006992816925f, 0.07177793234586716f, 0.19539548456668854f, 0.45060592889785767f, -0.0598149448633194f, 0.39477863907814026f, -0.18742015957832336f, -0.07975325733423233f, -0.13956820964813232f, -0.4187045991420746f, 0.01196298934519291f, -0.04386429116129875f, 0.2352721095085144f, 0.15950651466846466f, 0.04785195738077164f, 0.33097603917121887f, -0.2711610794067383f, 0.007975325919687748f, -0.21134613454341888f, -0.23128445446491241f, -0.04386429116129875f, -0.474531888961792f, 0.2910993993282318f, 0.09969157725572586f, 0.13159288465976715f, 0.1794448345899582f, 0.02392597869038582f, 0.3190130293369293f, -0.17146950960159302f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, 0.0f};
static const float kLingvoConvEvalY[48] = {-0.3199878931045532f, 0.16389623284339905f, -0.039022915065288544f, 0.13267791271209717f, 0.11706874519586563f, 0.11706874519586563f, 0.5072978734970093f, -0.23413749039173126f, 0.039022915065288544f, -0.17950540781021118f, -0.2575512230396271f, -0.07024124264717102f, -0.5072978734970093f, 0.3199878931045532f, 0.07024124264717102f, 0.19511456787586212f, 0.4526658058166504f, -0.06243666261434555f, 0.3980337381362915f, -0.18730998039245605f, -0.07804583013057709f, -0.14048248529434204f, -0.4214474856853485f, 0.015609165653586388f, -0.039022915065288544f, 0.23413749039173126f, 0.16389623284339905f, 0.046827495098114014f, 0.3277924656867981f, -0.26535582542419434f, 0.007804582826793194f, -0.21852831542491913f, -0.23413749039173126f, -0.046827495098114014f, -0.4760795533657074f, 0.28876957297325134f, 0.1014595776796341f, 0.13267791271209717f, 0.17950540781021118f, 0.023413747549057007f, 0.3199878931045532f, -0.17170082032680511f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, 0.0f};
static const named_value kLingvoConvRanges[4] = {
    {"conv/q/qdomain_default/q/activation_max/var", 0.9951005578041077f},
    {"conv/q/qdomain_default/q/activation_min/var", -0.9950679540634155f},
    {"conv/q/qdomain_default/q/pre_activation_max/var", 0.9956177473068237f},
    {"conv/q/qdomain_default/q/pre_activation_min/var", -0.9955944418907166f}};

static lv_tensor *lingvo_conv_fprop(lv_layer *l, lv_graph *g) {
  float x[48];
  for (int i = 0; i < 48; i++) x[i] = (float)(0.9 * sin(0.45 * i + 0.2));
  const float pads[8] = {0, 0, 0, 0, 0, 0, 0, 1};
  lv_tensor *out_pads = NULL;
  lv_tensor *y = lv_conv_layer_fprop_padded((lv_conv_layer *)l, g, lf_tensor(g, lv_shape4(2, 4, 3, 2), x),
                                            lf_tensor(g, lv_shape2(2, 4), pads), &out_pads);
  lf_ok(g);
  return y;
}

START_TEST(test_conv_passive_asym_lingvo) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate("ConvLayer", &p));
  EXPECT_OK(lv_params_set_string(p, "name", "conv"));
  int64_t fs[4] = {3, 3, 2, 2}, st[2] = {1, 1};
  EXPECT_OK(lv_params_set_list(p, "filter_shape", lv_pvalue_ints(4, fs)));
  EXPECT_OK(lv_params_set_list(p, "filter_stride", lv_pvalue_ints(2, st)));
  EXPECT_OK(lv_params_set_bool(p, "batch_norm", false));
  EXPECT_OK(lv_params_set_string(p, "activation", "TANH"));
  lv_varstore *vs;
  lv_layer *l = open_passive(p, &vs);
  float *w = lv_f32(&((lv_conv_layer *)l)->w->value);
  for (int i = 0; i < 36; i++) w[i] = (float)(0.4 * cos(0.8 * i));
  lv_graph *g = lv_graph_create(0);
  expect_near("conv y", lv_f32(lingvo_conv_fprop(l, g)), kLingvoConvY, 48);
  EXPECT_OK(lv_graph_apply_updates(g));
  for (int i = 0; i < 4; i++) {
    const named_value *r = &kLingvoConvRanges[i];
    ck_assert_msg(fabsf(var_value(vs, r->name) - r->v) < 2e-6f, "%s %.9g, Lingvo %.9g", r->name,
                  var_value(vs, r->name), r->v);
  }
  ck_assert_int_eq(lv_varstore_count(vs), 5);
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  expect_near("conv eval y", lv_f32(lingvo_conv_fprop(l, g)), kLingvoConvEvalY, 48);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST


/* SimpleFullSoftmax (3 -> 6 classes in 2 shards) under PassiveAsymQDomain against real
 * Lingvo (qat_vectors.py's softmax): the logits of two calls in one training step (the
 * shards' weights and biases quantized each, then again whole, the inputs and logits
 * ranges), the ranges after the step, the eval logits. */
static const float kLingvoSmLogits1[24] = {0.06117768958210945f, 0.30079030990600586f, 0.43844011425971985f, 0.4945196509361267f, 0.4945196509361267f, 0.41804754734039307f, 0.16823863983154297f, -0.22431819140911102f, -0.6066787838935852f, -0.8055062294006348f, -0.7443285584449768f, -0.45883268117904663f, 0.056079547852277756f, -0.22941634058952332f, -0.4945196509361267f, -0.6117768883705139f, -0.5098140835762024f, -0.2447107583284378f, 0.16314050555229187f, 0.07647211104631424f, -0.06117768958210945f, -0.15294422209262848f, -0.14784608781337738f, -0.056079547852277756f};
static const float kLingvoSmLogits2[12] = {0.08212050795555115f, 1.3139281272888184f, 2.2172536849975586f, 2.59500789642334f, 2.3814945220947266f, 1.6588342189788818f, -0.04927230253815651f, -0.7883568406105042f, -1.3796244859695435f, -1.5931377410888672f, -1.3632004261016846f, -0.7555086612701416f};
static const float kLingvoSmEvalLogits1[24] = {0.06343157589435577f, 0.3012999892234802f, 0.4360920786857605f, 0.49159470200538635f, 0.49159470200538635f, 0.42023420333862305f, 0.16650788486003876f, -0.2220105230808258f, -0.6025999784469604f, -0.8087525963783264f, -0.7453210353851318f, -0.45987892150878906f, 0.05550263077020645f, -0.2220105230808258f, -0.49159470200538635f, -0.6105289459228516f, -0.5074526071548462f, -0.23786841332912445f, 0.15857893228530884f, 0.07928946614265442f, -0.06343157589435577f, -0.15857893228530884f, -0.1506499946117401f, -0.05550263077020645f};
static const float kLingvoSmEvalLogits2[12] = {0.03171578794717789f, 0.8483973145484924f, 1.0149052143096924f, 1.0149052143096924f, 1.0149052143096924f, 1.0149052143096924f, 0.007928946986794472f, -0.4678078591823578f, -0.8563262820243835f, -1.0069762468338013f, -0.8483973145484924f, -0.4440210461616516f};
static const named_value kLingvoSmRanges[4] = {
    {"softmax/q/qdomain_default/q/inputs_max/var", 1.0099999904632568f},
    {"softmax/q/qdomain_default/q/inputs_min/var", -1.0099999904632568f},
    {"softmax/q/qdomain_default/q/logits_max/var", 1.0158711671829224f},
    {"softmax/q/qdomain_default/q/logits_min/var", -1.0060102939605713f}};

START_TEST(test_softmax_passive_asym_lingvo) {
  const char *keys[3] = {"input_dim", "num_classes", "num_shards"};
  const int64_t vals[3] = {3, 6, 2};
  lv_params *p = int_params("SimpleFullSoftmax", "softmax", keys, vals, 3);
  lv_varstore *vs;
  lv_layer *l = open_passive(p, &vs);
  lv_softmax_layer *sm = (lv_softmax_layer *)l;
  for (int s = 0; s < 2; s++) {
    for (int r = 0; r < 3; r++) /* shard s: columns [3s, 3s + 3) of the [3, 6] weight */
      for (int c = 0; c < 3; c++)
        lv_f32(&sm->w[s]->value)[r * 3 + c] = (float)(0.6 * sin(0.5 * (r * 6 + 3 * s + c) + 0.1));
    for (int c = 0; c < 3; c++) lv_f32(&sm->b[s]->value)[c] = (float)(0.1 * cos((double)(3 * s + c)));
  }
  lv_graph *g = lv_graph_create(0);
  for (int pass = 0; pass < 2; pass++) {
    if (pass) {
      EXPECT_OK(lv_graph_apply_updates(g));
      for (int i = 0; i < 4; i++) {
        const named_value *r = &kLingvoSmRanges[i];
        ck_assert_msg(fabsf(var_value(vs, r->name) - r->v) < 2e-6f, "%s %.9g, Lingvo %.9g", r->name,
                      var_value(vs, r->name), r->v);
      }
      lv_graph_reset(g);
      lv_graph_set_training(g, false);
    }
    lv_tensor *l1 = lv_softmax_layer_logits(sm, g, lf_tensor(g, lv_shape2(4, 3), kX1));
    lv_tensor *l2 = lv_softmax_layer_logits(sm, g, lf_tensor(g, lv_shape2(2, 3), kX2));
    lf_ok(g);
    expect_near(pass ? "eval logits1" : "logits1", lv_f32(l1), pass ? kLingvoSmEvalLogits1 : kLingvoSmLogits1, 24);
    expect_near(pass ? "eval logits2" : "logits2", lv_f32(l2), pass ? kLingvoSmEvalLogits2 : kLingvoSmLogits2, 12);
  }
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST


/* AdditiveAttention (4 -> hidden 3) under PassiveAsymQDomain against real Lingvo
 * (qat_vectors.py's additive): the context and the quantized probabilities of a training
 * step with a padded source position, and the eval graph on an unpadded source. */
static const float kLingvoAddCtx[8] = {-0.24145404994487762f, 0.22499102354049683f, 0.5856193900108337f, 0.6708217263221741f, 0.2857036292552948f, -0.23085401952266693f, -0.6388373970985413f, -0.7463656067848206f};
static const float kLingvoAddProbs[6] = {0.34765625f, 0.33203125f, 0.3203125f, 0.4921875f, 0.5078125f, 0.0f};
static const float kLingvoAddEvalCtx[8] = {-0.24145404994487762f, 0.22499102354049683f, 0.5856193900108337f, 0.6708217263221741f, 0.4573665261268616f, 0.022842716425657272f, -0.42242440581321716f, -0.6690187454223633f};
static const float kLingvoAddEvalProbs[6] = {0.34765625f, 0.33203125f, 0.3203125f, 0.328125f, 0.3359375f, 0.33984375f};

START_TEST(test_additive_passive_asym_lingvo) {
  const char *keys[3] = {"source_dim", "query_dim", "hidden_dim"};
  const int64_t vals[3] = {4, 4, 3};
  lv_params *p = int_params("AdditiveAttention", "att", keys, vals, 3);
  lv_varstore *vs;
  lv_layer *l = open_passive(p, &vs);
  for (int i = 0; i < 12; i++) {
    lv_f32(&lv_varstore_find(vs, "att/source_var/var")->value)[i] = (float)(0.5 * sin(0.6 * i));
    lv_f32(&lv_varstore_find(vs, "att/query_var/var")->value)[i] = (float)(0.5 * cos(0.7 * i));
  }
  const float hidden[3] = {0.9f, -1.2f, 0.6f};
  memcpy(lv_f32(&lv_varstore_find(vs, "att/hidden_var/var")->value), hidden, sizeof hidden);
  lv_graph *g = lv_graph_create(0);
  const float pads[6] = {0, 0, 0, 0, 0, 1};
  lv_tensor *ctx, *probs;
  atten_context_of(l, g, pads, &ctx, &probs);
  expect_near("ctx", lv_f32(ctx), kLingvoAddCtx, 8);
  expect_near("probs", lv_f32(probs), kLingvoAddProbs, 6);
  atten_eval_and_close(l, g, vs, p, kLingvoAddEvalCtx, kLingvoAddEvalProbs);
}
END_TEST

/* SymmetricScheduledClipQDomain's export range is its end range (GetQuantizedEndRange);
 * the identity QDomain and a clip-only schedule export none. */
START_TEST(test_export_ranges_scheduled) {
  lv_params *p = qproj_params_open("TANH", NULL);
  EXPECT_OK(lv_params_set_params(p, "qdomain.default", scheduled_params(5, 10, 15)));
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(p, NULL, vs, &l));
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  ck_assert_int_eq(lv_varstore_count(vs), 1); /* no range variables */
  lv_projection_layer *pl = (lv_projection_layer *)l;
  float mn = 0, mx = 0;
  int bits = 0;
  ck_assert(lv_qlayer_act_range(&pl->q, "activation", &mn, &mx, &bits));
  ck_assert(mn == -1.0f && mx == 0.9921875f && bits == 8);
  ck_assert(lv_qlayer_weight_range(&pl->q, "weight", &pl->w->value, &mn, &mx, &bits));
  ck_assert(mn == -1.0f && mx == 0.9921875f);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
  p = qproj_params("TANH", "QDomain");
  vs = lv_varstore_create();
  EXPECT_OK(lv_layer_create(p, NULL, vs, &l));
  ck_assert(!lv_qlayer_act_range(&((lv_projection_layer *)l)->q, "activation", &mn, &mx, &bits));
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

/* A scope's domain reaches the layers under it whose own default is None; a layer's own
 * (here the identity QDomain) overrides it; without any, the layer runs the float ops. */
START_TEST(test_qdomain_inheritance) {
  lv_params *task = NULL;
  lv_layers_register_all();
  EXPECT_OK(lv_registry_instantiate("PassiveAsymQDomain", &task));
  lv_params_freeze(task);
  lv_params *plain = qproj_params("RELU", NULL), *own = qproj_params("RELU", "QDomain");
  lv_varstore *vs = lv_varstore_create();
  lv_varstore_set_scope_qdomain(vs, "", task);
  lv_layer *a = NULL, *b = NULL;
  EXPECT_OK(lv_layer_create(plain, "m/enc", vs, &a));
  EXPECT_OK(lv_layer_create(own, "m/dec", vs, &b));
  ck_assert_ptr_nonnull(lv_varstore_find(vs, "m/enc/proj/q/qdomain_default/q/activation_max/var"));
  /* RELU is fused (TFLite): no pre-activation range. */
  ck_assert_ptr_null(lv_varstore_find(vs, "m/enc/proj/q/qdomain_default/q/affine_matmul_max/var"));
  ck_assert(lv_qlayer_on(&((lv_projection_layer *)a)->q));
  ck_assert(!lv_qlayer_on(&((lv_projection_layer *)b)->q));
  ck_assert_int_eq(lv_varstore_count(vs), 4);
  lv_layer_free(a);
  lv_layer_free(b);
  lv_varstore_destroy(vs);
  /* No domain anywhere: the float projection's ops only (matmul, relu). */
  lf_fixture f;
  f.p = plain;
  f.vs = lv_varstore_create();
  EXPECT_OK(lv_layer_create(f.p, NULL, f.vs, &f.l));
  EXPECT_OK(lv_varstore_finalize(f.vs, 1));
  ck_assert_int_eq(lv_varstore_count(f.vs), 1);
  lv_graph *g = lv_graph_create(0);
  const float x[3] = {1, 2, 3};
  lv_tensor *xt = lf_tensor(g, lv_shape2(1, 3), x);
  lv_tensor *y = lv_projection_layer_fprop((lv_projection_layer *)f.l, g, xt);
  lf_ok(g);
  const float *w = lv_f32(&((lv_projection_layer *)f.l)->w->value);
  for (int o = 0; o < 2; o++) {
    float s = x[0] * w[o] + x[1] * w[2 + o] + x[2] * w[4 + o];
    ck_assert_float_eq(lv_f32(y)[o], s > 0 ? s : 0);
  }
  lv_graph_destroy(g);
  lv_layer_free(f.l);
  lv_varstore_destroy(f.vs);
  lv_params_free(plain);
  lv_params_free(own);
  lv_params_free(task);
}
END_TEST

/* Config errors name the layer, the param and what was expected. */
START_TEST(test_qdomain_errors) {
  lv_params *p = qproj_params_open("RELU", NULL);
  EXPECT_OK(lv_params_set_class(p, "qdomain.weight", "FakeQuantizationSchedule"));
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_ERR(lv_layer_create(p, "m", vs, &l), LV_ERR_INVALID, "m/proj.qdomain.weight.cls: \"FakeQuantizationSchedule\"",
             "is not a quantization domain");
  lv_varstore_destroy(vs);
  lv_params_free(p);
  p = qproj_params("RELU", "PassiveAsymQDomain");
  lv_params *pb = lv_params_copy(p);
  EXPECT_OK(lv_params_set_bool(pb, "batch_norm", true));
  lv_params_freeze(pb);
  vs = lv_varstore_create();
  EXPECT_ERR(lv_layer_create(pb, "m", vs, &l), LV_ERR_INVALID, "m/proj: batch_norm with a qdomain");
  lv_varstore_destroy(vs);
  lv_params_free(pb);
  lv_params *pq = lv_params_copy(p);
  EXPECT_OK(lv_params_set_int(pq, "qdomain.default.bits", 17));
  lv_params_freeze(pq);
  vs = lv_varstore_create();
  EXPECT_ERR(lv_layer_create(pq, "m", vs, &l), LV_ERR_INVALID, "m/proj.qdomain.default.bits: 17",
             "expected a bit depth in [2, 16]");
  lv_varstore_destroy(vs);
  lv_params_free(pq);
  lv_params_free(p);
}
END_TEST


/* The quantized LSTMCellSimple step runs Lingvo's gates op by op: with a domain that does
 * nothing yet (a FakeQuantizationSchedule before clip_start_step) it must give the fused
 * lstm_step's state and gradients (forget_gate_bias, padding, with and without a
 * projection); with the schedule quantizing, m comes out on the 8-bit grid of its range. */
typedef struct {
  lv_params *p;
  lv_varstore *vs;
  lv_layer *l;
} cell_fx;

static void cell_open(cell_fx *f, int64_t hidden, bool quantized) {
  f->p = cell_params(hidden, quantized ? scheduled_params(1000, 2000, 2000) : NULL);
  f->vs = lv_varstore_create();
  EXPECT_OK(lv_layer_create(f->p, NULL, f->vs, &f->l));
  EXPECT_OK(lv_varstore_finalize(f->vs, 5));
  lv_varstore_zero_grads(f->vs);
}

static void cell_close(cell_fx *f) {
  lv_layer_free(f->l);
  lv_varstore_destroy(f->vs);
  lv_params_free(f->p);
}

/* lingvo_cell_steps at global step `step`, then the gradient of sum(m * m) + sum(c). */
static void cell_run(cell_fx *f, lv_graph *g, int64_t step, float *m_out, float *c_out) {
  const int64_t h = ((lv_lstm_cell *)f->l)->hidden;
  lv_graph_reset(g);
  lv_graph_set_step(g, step);
  lv_tensor *m, *c;
  lingvo_cell_steps(f->l, g, h, &m, &c);
  lv_tensor *loss = lv_op_add(g, lv_op_reduce_sum(g, lv_op_mul(g, m, m), LV_ALL_AXES, false),
                              lv_op_reduce_sum(g, c, LV_ALL_AXES, false));
  lf_ok(g);
  EXPECT_OK(lv_graph_backward(g, loss));
  memcpy(m_out, lv_f32(m), sizeof(float) * 8);
  memcpy(c_out, lv_f32(c), sizeof(float) * 2 * (size_t)h);
}

START_TEST(test_lstm_cell_quantized_step) {
  lv_graph *g = lv_graph_create(0);
  for (int64_t hidden = 0; hidden <= 5; hidden += 5) {
    cell_fx fl, qu;
    cell_open(&fl, hidden, false);
    cell_open(&qu, hidden, true);
    ck_assert(lv_qlayer_on(&((lv_lstm_cell *)qu.l)->q) && !lv_qlayer_on(&((lv_lstm_cell *)fl.l)->q));
    float m1[8], c1[10], m2[8], c2[10];
    cell_run(&fl, g, 0, m1, c1);
    cell_run(&qu, g, 0, m2, c2);
    for (int i = 0; i < 8; i++)
      ck_assert_msg(fabsf(m1[i] - m2[i]) < 2e-6f, "hidden %lld m[%d]: fused %.8g, op by op %.8g", (long long)hidden,
                    i, m1[i], m2[i]);
    for (int i = 0; i < (hidden ? 10 : 8); i++)
      ck_assert_msg(fabsf(c1[i] - c2[i]) < 2e-6f, "hidden %lld c[%d]: %.8g vs %.8g", (long long)hidden, i, c1[i],
                    c2[i]);
    const char *vars[] = {"cell/wm/var", "cell/b/var", "cell/w_proj/var"};
    for (int v = 0; v < (hidden ? 3 : 2); v++) {
      lv_var *a = lv_varstore_find(fl.vs, vars[v]), *b = lv_varstore_find(qu.vs, vars[v]);
      for (int64_t i = 0; i < lv_tensor_numel(&a->grad); i++)
        ck_assert_msg(fabsf(lv_f32(&a->grad)[i] - lv_f32(&b->grad)[i]) < 1e-5f, "%s grad[%lld]: %.8g vs %.8g",
                      vars[v], (long long)i, lv_f32(&a->grad)[i], lv_f32(&b->grad)[i]);
    }
    /* Quantizing (step 2000: cap 1, 8 bits): every m on the grid of [-1, 127/128]. */
    lv_varstore_zero_grads(qu.vs);
    cell_run(&qu, g, 2000, m2, c2);
    for (int i = 0; i < 8; i++) {
      const float k = m2[i] * 128.0f;
      ck_assert_msg(fabsf(k - rintf(k)) < 1e-3f && m2[i] >= -1.0f && m2[i] <= 0.9921875f, "m[%d] %.8g off the grid",
                    i, m2[i]);
    }
    cell_close(&fl);
    cell_close(&qu);
  }
  lv_graph_destroy(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("quant");
  TCase *tc = tcase_create("quant");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_fake_quant_args_tf);
  tcase_add_test(tc, test_fake_quant_vars_tf);
  tcase_add_test(tc, test_fake_quant_errors);
  tcase_add_test(tc, test_fake_quant_gradcheck);
  tcase_add_test(tc, test_linear_clipping_cap_schedule);
  tcase_add_test(tc, test_fake_quantization_schedule);
  tcase_add_test(tc, test_passive_asym_ract);
  tcase_add_test(tc, test_projection_passive_asym);
  tcase_add_test(tc, test_projection_passive_asym_lingvo);
  tcase_add_test(tc, test_lstm_cell_passive_asym_lingvo);
  tcase_add_test(tc, test_ln_lstm_cell_passive_asym_lingvo);
  tcase_add_test(tc, test_mha_passive_asym_lingvo);
  tcase_add_test(tc, test_conv_passive_asym_lingvo);
  tcase_add_test(tc, test_softmax_passive_asym_lingvo);
  tcase_add_test(tc, test_additive_passive_asym_lingvo);
  tcase_add_test(tc, test_projection_grads_lingvo);
  tcase_add_test(tc, test_passive_asym_delay_freeze);
  tcase_add_test(tc, test_qdomain_inheritance);
  tcase_add_test(tc, test_export_ranges_scheduled);
  tcase_add_test(tc, test_qdomain_errors);
  tcase_add_test(tc, test_lstm_cell_quantized_step);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
