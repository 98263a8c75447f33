/* ProjectionLayer with batch_norm=True and paddings (Lingvo's padding-aware
 * BatchNormLayer): variable names in the projection's scope, batch moments over the
 * non-padded rows only, padded outputs zeroed, moving statistics, eval mode,
 * affine_last, finite differences. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "layer_fixture.h"
#include "layers/projection.h"

enum { B = 2, T = 4, I = 3, O = 2 };

static void data(float *x, float *pad) {
  for (int i = 0; i < B * T * I; i++) x[i] = (float)(0.8 * sin(1.7 * i + 0.4) + 0.1);
  const float p[B * T] = {0, 0, 0, 1, 0, 0, 1, 1};
  memcpy(pad, p, sizeof p);
}

START_TEST(test_projection_bn_variables) {
  lf_fixture f;
  lf_open(&f, "ProjectionLayer", LF_SET("name=proj", "input_dim=3", "output_dim=2", "batch_norm=True"), 1);
  /* Lingvo's ProjectionLayerTest.testProjectionLayerConstruction. */
  const char *names[] = {"proj/w/var", "proj/beta/var", "proj/gamma/var", "proj/moving_mean/var",
                         "proj/moving_variance/var"};
  ck_assert_int_eq(lv_varstore_count(f.vs), 5);
  for (int i = 0; i < 5; i++) {
    lv_var *v = lv_varstore_find(f.vs, names[i]);
    ck_assert_msg(v, "missing %s", names[i]);
    ck_assert_int_eq(v->value.shape.d[v->value.shape.rank - 1], 2);
    ck_assert(v->trainable == (i < 3));
  }
  ck_assert_float_eq(lv_f32(&lv_varstore_find(f.vs, "proj/moving_variance/var")->value)[1], 1.0f);
  lf_close(&f);
  /* Under a parent scope, with affine_last the batch norm is over input_dim. */
  lv_params *p = lf_params("ProjectionLayer",
                           LF_SET("name=proj", "input_dim=3", "output_dim=2", "batch_norm=True", "affine_last=True"));
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(p, "enc/ff", vs, &l));
  lv_var *beta = lv_varstore_find(vs, "enc/ff/proj/beta/var");
  ck_assert_ptr_nonnull(beta);
  ck_assert_int_eq(beta->value.shape.d[0], 3);
  lv_layer_free(l);
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

/* act(bn(x . w)) against a double computation with moments over non-padded rows. */
static void reference(lf_fixture *f, const float *x, const float *pad, double gamma_add, double *y, double *mean,
                      double *var) {
  const float *w = lv_f32(&lv_varstore_find(f->vs, "proj/w/var")->value);
  double z[B * T][O], n = 0;
  for (int o = 0; o < O; o++) mean[o] = var[o] = 0;
  for (int r = 0; r < B * T; r++)
    for (int o = 0; o < O; o++) {
      z[r][o] = 0;
      for (int i = 0; i < I; i++) z[r][o] += x[r * I + i] * w[i * O + o];
    }
  for (int r = 0; r < B * T; r++) {
    n += 1 - pad[r];
    for (int o = 0; o < O; o++) mean[o] += z[r][o] * (1 - pad[r]);
  }
  for (int o = 0; o < O; o++) mean[o] /= n;
  for (int r = 0; r < B * T; r++)
    for (int o = 0; o < O; o++) var[o] += (z[r][o] - mean[o]) * (z[r][o] - mean[o]) * (1 - pad[r]);
  for (int o = 0; o < O; o++) var[o] /= n;
  for (int r = 0; r < B * T; r++)
    for (int o = 0; o < O; o++) {
      double v = (z[r][o] - mean[o]) / sqrt(var[o] + 0.001) * (1 + gamma_add);
      y[r * O + o] = pad[r] ? 0 : fmax(v, 0);
    }
}

START_TEST(test_projection_bn_padded_moments) {
  lf_fixture f;
  lf_open(&f, "ProjectionLayer",
          LF_SET("name=proj", "input_dim=3", "output_dim=2", "batch_norm=True", "bn_params.decay=0.9",
                 "params_init.method=gaussian", "params_init.scale=0.5"),
          1);
  float x[B * T * I], pad[B * T];
  data(x, pad);
  double y[B * T * O], mean[O], var[O];
  reference(&f, x, pad, 0, y, mean, var);
  lv_projection_layer *l = (lv_projection_layer *)f.l;
  lv_tensor *out = lv_projection_layer_fprop_padded(l, f.g, lf_tensor(f.g, lv_shape3(B, T, I), x),
                                                    lf_tensor(f.g, lv_shape3(B, T, 1), pad));
  lf_ok(f.g);
  ck_assert_int_eq(out->shape.rank, 3);
  ck_assert_int_eq(out->shape.d[2], O);
  for (int i = 0; i < B * T * O; i++) ck_assert_float_eq_tol(lv_f32(out)[i], y[i], 1e-5);
  /* Garbage in the padded rows changes nothing. */
  float x2[B * T * I];
  memcpy(x2, x, sizeof x);
  for (int r = 0; r < B * T; r++)
    if (pad[r])
      for (int i = 0; i < I; i++) x2[r * I + i] = 1000.0f * (float)(i + r);
  lv_tensor *out2 = lv_projection_layer_fprop_padded(l, f.g, lf_tensor(f.g, lv_shape3(B, T, I), x2),
                                                     lf_tensor(f.g, lv_shape2(B, T), pad));
  lf_ok(f.g);
  for (int i = 0; i < B * T * O; i++) ck_assert_float_eq_tol(lv_f32(out2)[i], y[i], 1e-5);
  /* The moving statistics take the padded moments once the step is applied (two
   * updates queued: avg = 0.9 * (0.9 * avg0 + 0.1 m) + 0.1 m). */
  EXPECT_OK(lv_graph_apply_updates(f.g));
  const float *mm = lv_f32(&lv_varstore_find(f.vs, "proj/moving_mean/var")->value);
  const float *mv = lv_f32(&lv_varstore_find(f.vs, "proj/moving_variance/var")->value);
  for (int o = 0; o < O; o++) {
    ck_assert_float_eq_tol(mm[o], 0.19 * mean[o], 1e-6);
    ck_assert_float_eq_tol(mv[o], 0.81 + 0.19 * var[o], 1e-6);
  }
  /* Eval uses the moving statistics; padded rows are still zero. */
  lv_graph_reset(f.g);
  lv_graph_set_training(f.g, false);
  lv_tensor *ev = lv_projection_layer_fprop_padded(l, f.g, lf_tensor(f.g, lv_shape3(B, T, I), x),
                                                   lf_tensor(f.g, lv_shape2(B, T), pad));
  lf_ok(f.g);
  const float *w = lv_f32(&lv_varstore_find(f.vs, "proj/w/var")->value);
  for (int r = 0; r < B * T; r++)
    for (int o = 0; o < O; o++) {
      double z = 0;
      for (int i = 0; i < I; i++) z += x[r * I + i] * w[i * O + o];
      double want = pad[r] ? 0 : fmax((z - mm[o]) / sqrt(mv[o] + 0.001), 0);
      ck_assert_float_eq_tol(lv_f32(ev)[r * O + o], want, 1e-5);
    }
  /* Paddings of the wrong size are an error naming the layer. */
  ck_assert_ptr_null(lv_projection_layer_fprop_padded(l, f.g, lf_tensor(f.g, lv_shape3(B, T, I), x),
                                                      lf_tensor(f.g, lv_shape1(B), pad)));
  lv_status s = lv_graph_status(f.g);
  ck_assert_msg(s && strstr(lv_status_msg(s), "proj: paddings"), "%s", s ? lv_status_msg(s) : "no error");
  lv_status_free(s);
  lf_close(&f);
}
END_TEST

START_TEST(test_projection_paddings_without_bn) {
  lf_fixture f;
  lf_open(&f, "FCLayer", LF_SET("name=fc", "input_dim=3", "output_dim=2", "activation=NONE", "bias_init=0.5"), 1);
  float x[B * T * I], pad[B * T];
  data(x, pad);
  lv_nmap in, o;
  lv_nmap_init(&in);
  lv_nmap_init(&o);
  EXPECT_OK(lv_nmap_set(&in, "act", lf_tensor(f.g, lv_shape3(B, T, I), x)));
  EXPECT_OK(lv_nmap_set(&in, "paddings", lf_tensor(f.g, lv_shape3(B, T, 1), pad)));
  ck_assert(lv_layer_fprop(f.l, f.g, &in, &o));
  lv_tensor *y = lv_nmap_get(&o, "act");
  const float *w = lv_f32(&lv_varstore_find(f.vs, "fc/w/var")->value);
  for (int r = 0; r < B * T; r++)
    for (int k = 0; k < O; k++) {
      double z = 0.5;
      for (int i = 0; i < I; i++) z += x[r * I + i] * w[i * O + k];
      ck_assert_float_eq_tol(lv_f32(y)[r * O + k], pad[r] ? 0.0 : z, 1e-6);
    }
  lv_nmap_free(&in);
  lv_nmap_free(&o);
  lf_close(&f);
}
END_TEST

typedef struct {
  float x[B * T * I], pad[B * T];
} bn_ctx;

static lv_tensor *bn_loss(lf_fixture *f, void *vctx) {
  bn_ctx *c = vctx;
  lv_tensor *y = lv_projection_layer_fprop_padded((lv_projection_layer *)f->l, f->g,
                                                  lf_tensor(f->g, lv_shape3(B, T, I), c->x),
                                                  lf_tensor(f->g, lv_shape2(B, T), c->pad));
  ck_assert_ptr_nonnull(y);
  float wt[B * T * O];
  for (int i = 0; i < B * T * O; i++) wt[i] = (float)(0.3 + 0.2 * ((i * 7) % 5));
  return lv_op_reduce_sum(f->g, lv_op_mul(f->g, y, lf_tensor(f->g, y->shape, wt)), LV_ALL_AXES, false);
}

START_TEST(test_projection_bn_gradcheck) {
  const char *const *settings[] = {
      LF_SET("name=proj", "input_dim=3", "output_dim=2", "batch_norm=True", "activation=TANH", "has_bias=True",
             "params_init.method=gaussian", "params_init.scale=0.5"),
      LF_SET("name=proj", "input_dim=3", "output_dim=2", "batch_norm=True", "activation=TANH", "affine_last=True",
             "params_init.method=gaussian", "params_init.scale=0.5")};
  for (int k = 0; k < 2; k++) {
    lf_fixture f;
    lf_open(&f, "ProjectionLayer", settings[k], 1);
    float *gamma = lv_f32(&lv_varstore_find(f.vs, "proj/gamma/var")->value);
    float *beta = lv_f32(&lv_varstore_find(f.vs, "proj/beta/var")->value);
    for (int i = 0; i < (k ? I : O); i++) gamma[i] = 0.1f * (float)(i + 1), beta[i] = -0.05f * (float)(i + 2);
    bn_ctx c;
    data(c.x, c.pad);
    lf_elems e[] = {{"proj/w/var", {0, 1, 2, 3, 4, 5, -1}},
                    {"proj/gamma/var", {0, 1, -1}},
                    {"proj/beta/var", {0, 1, -1}},
                    {k ? "proj/gamma/var" : "proj/b/var", {0, 1, -1}},
                    {NULL, {-1}}};
    lf_gradcheck(&f, bn_loss, &c, e, 1e-3, 3e-3);
    lf_close(&f);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("projection_bn");
  TCase *tc = tcase_create("projection_bn");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_projection_bn_variables);
  tcase_add_test(tc, test_projection_bn_padded_moments);
  tcase_add_test(tc, test_projection_paddings_without_bn);
  tcase_add_test(tc, test_projection_bn_gradcheck);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
