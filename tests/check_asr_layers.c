/* Lingvo's speech layers: ConvLayer with time paddings (Lingvo's Conv2DLayer of
 * core/conv_layers_with_time_padding.py: variable names in the conv's scope, output
 * paddings by max-pooling, padded frames zeroed, batch norm over the non-padded frames,
 * finite differences, PyTorch parity in tests/parity/conv_padded.py). */
#include <check.h>

#include "layer_fixture.h"
#include "layers/conv.h"
#include "layers/owner.h"
#include "parity.h"
#include "base/rng.h"

enum { B = 3, T = 7, FQ = 6, C = 2, O = 4 };
static const int kLens[B] = {7, 4, 2};

/* lf_open for the conv of these tests: filter [3,3,C,O], stride [2,2]. */
static void conv_open(lf_fixture *f, uint64_t seed) {
  lv_layers_register_all();
  EXPECT_OK(lv_registry_instantiate("ConvLayer", &f->p));
  int64_t filt[4] = {3, 3, C, O}, stride[2] = {2, 2};
  EXPECT_OK(lv_params_set_string(f->p, "name", "conv"));
  EXPECT_OK(lv_params_set_list(f->p, "filter_shape", lv_pvalue_ints(4, filt)));
  EXPECT_OK(lv_params_set_list(f->p, "filter_stride", lv_pvalue_ints(2, stride)));
  lv_params_set_init(f->p, "gaussian", 0.5);
  lv_params_freeze(f->p);
  f->vs = lv_varstore_create();
  EXPECT_OK(lv_layer_create(f->p, NULL, f->vs, &f->l));
  EXPECT_OK(lv_varstore_finalize(f->vs, seed));
  lv_varstore_zero_grads(f->vs);
  f->g = lv_graph_create(0);
}

static void conv_data(float *x, float *pad) {
  for (int i = 0; i < B * T * FQ * C; i++) x[i] = (float)(((i * 37) % 23) - 11) / 7.0f;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) pad[b * T + t] = t < kLens[b] ? 0.0f : 1.0f;
}

START_TEST(test_conv_padded_shapes_and_names) {
  lf_fixture f;
  conv_open(&f, 3);
  static const char *const names[] = {"conv/w/var", "conv/beta/var", "conv/gamma/var", "conv/moving_mean/var",
                                      "conv/moving_variance/var"};
  ck_assert_int_eq(lv_varstore_count(f.vs), 5);
  for (int i = 0; i < 5; i++) ck_assert_msg(lv_varstore_find(f.vs, names[i]), "missing %s", names[i]);
  ck_assert(!lv_varstore_find(f.vs, "conv/moving_mean/var")->trainable);
  float x[B * T * FQ * C], pad[B * T];
  conv_data(x, pad);
  /* Garbage in padded frames must not matter. */
  float x2[B * T * FQ * C];
  memcpy(x2, x, sizeof x);
  for (int b = 0; b < B; b++)
    for (int t = kLens[b]; t < T; t++)
      for (int k = 0; k < FQ * C; k++) x2[(b * T + t) * FQ * C + k] = 1e3f * (float)(k + 1);
  lv_graph_set_training(f.g, true);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "act", lf_tensor(f.g, lv_shape4(B, T, FQ, C), x)));
  EXPECT_OK(lv_nmap_set(&in, "paddings", lf_tensor(f.g, lv_shape2(B, T), pad)));
  ck_assert(f.l->cls->fprop(f.l, f.g, &in, &out));
  lv_tensor *y = lv_nmap_get(&out, "act"), *op = lv_nmap_get(&out, "paddings");
  ck_assert_ptr_nonnull(y);
  ck_assert_ptr_nonnull(op);
  ck_assert_int_eq(y->shape.rank, 4);
  ck_assert_int_eq(y->shape.d[1], 4);
  ck_assert_int_eq(y->shape.d[2], 3);
  ck_assert_int_eq(y->shape.d[3], O);
  /* Pairwise max of the paddings right-padded with 1 to 8 frames. */
  static const float want[B][4] = {{0, 0, 0, 1}, {0, 0, 1, 1}, {0, 1, 1, 1}};
  for (int b = 0; b < B; b++)
    for (int t = 0; t < 4; t++) ck_assert_float_eq(lv_f32(op)[b * 4 + t], want[b][t]);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < 4; t++)
      for (int k = 0; k < 3 * O; k++) {
        float v = lv_f32(y)[(b * 4 + t) * 3 * O + k];
        if (want[b][t] > 0) ck_assert_float_eq(v, 0.0f);
        else ck_assert(v >= 0.0f); /* ReLU */
      }
  lv_nmap_clear(&out);
  lv_nmap_clear(&in);
  EXPECT_OK(lv_nmap_set(&in, "act", lf_tensor(f.g, lv_shape4(B, T, FQ, C), x2)));
  EXPECT_OK(lv_nmap_set(&in, "paddings", lf_tensor(f.g, lv_shape2(B, T), pad)));
  ck_assert(f.l->cls->fprop(f.l, f.g, &in, &out));
  lv_tensor *y2 = lv_nmap_get(&out, "act");
  for (int64_t i = 0; i < lv_tensor_numel(y); i++) ck_assert_float_eq_tol(lv_f32(y2)[i], lv_f32(y)[i], 1e-5);
  /* A paddings tensor of the wrong shape is an error naming the layer. */
  lv_tensor *bad = lv_conv_layer_fprop_padded((lv_conv_layer *)f.l, f.g, lf_tensor(f.g, lv_shape4(B, T, FQ, C), x),
                                              lf_tensor(f.g, lv_shape2(B, T - 1), pad), NULL);
  ck_assert_ptr_null(bad);
  lv_status s = lv_graph_status(f.g);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(lv_status_msg(s), "conv: paddings must be float32 [N,H]"), "%s", lv_status_msg(s));
  lv_status_free(s);
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  lf_close(&f);
}
END_TEST

typedef struct {
  float x[B * T * FQ * C], pad[B * T];
} conv_ctx;

static lv_tensor *conv_loss(lf_fixture *f, void *vctx) {
  conv_ctx *c = vctx;
  lv_graph_set_training(f->g, true);
  lv_tensor *y = lv_conv_layer_fprop_padded((lv_conv_layer *)f->l, f->g, lf_tensor(f->g, lv_shape4(B, T, FQ, C), c->x),
                                            lf_tensor(f->g, lv_shape2(B, T), c->pad), NULL);
  ck_assert_ptr_nonnull(y);
  float wt[B * 4 * 3 * O];
  for (int i = 0; i < B * 4 * 3 * O; i++) wt[i] = (float)(0.3 + 0.2 * ((i * 7) % 5));
  return lv_op_reduce_sum(f->g, lv_op_mul(f->g, y, lf_tensor(f->g, y->shape, wt)), LV_ALL_AXES, false);
}

START_TEST(test_conv_padded_gradcheck) {
  lf_fixture f;
  conv_open(&f, 1);
  float *gamma = lv_f32(&lv_varstore_find(f.vs, "conv/gamma/var")->value);
  float *beta = lv_f32(&lv_varstore_find(f.vs, "conv/beta/var")->value);
  for (int i = 0; i < O; i++) gamma[i] = 0.1f * (float)(i + 1), beta[i] = 0.3f - 0.05f * (float)(i + 2);
  conv_ctx c;
  conv_data(c.x, c.pad);
  lf_elems e[] = {{"conv/w/var", {0, 1, 5, 17, 30, 45, 63, 71, -1}},
                  {"conv/gamma/var", {0, 1, 2, 3, -1}},
                  {"conv/beta/var", {0, 1, 2, 3, -1}},
                  {NULL, {-1}}};
  lf_gradcheck(&f, conv_loss, &c, e, 1e-3, 3e-3);
  lf_close(&f);
}
END_TEST

START_TEST(test_parity_conv_padded) {
  if (!lv_parity_have_torch()) return;
  lf_fixture f;
  conv_open(&f, 17);
  lv_rng r;
  lv_rng_init(&r, 99, 1);
  for (const char *const *n = (const char *const[]){"conv/beta/var", "conv/gamma/var", NULL}; *n; n++) {
    lv_var *v = lv_varstore_find(f.vs, *n);
    for (int i = 0; i < O; i++) lv_f32(&v->value)[i] = 0.3f * (2.0f * lv_rng_uniform(&r) - 1.0f);
  }
  lv_graph_set_training(f.g, true);
  lv_parity p;
  lv_parity_open(&p, "conv_padded");
  lv_parity_attr(&p, "stride_t", 2);
  lv_parity_attr(&p, "stride_f", 2);
  lv_tensor *x = lv_parity_input(&p, f.g, "act", lv_shape4(B, T, FQ, C), 2.0f, 1);
  lv_tensor *pad = lv_parity_paddings(&p, f.g, "paddings", T, B, kLens, false);
  lv_tensor *op = NULL;
  lv_tensor *y = lv_conv_layer_fprop_padded((lv_conv_layer *)f.l, f.g, x, pad, &op);
  lv_parity_put(&p, "out:paddings", op);
  lv_tensor *loss = lv_parity_output(&p, f.g, "act", y, NULL, 2);
  EXPECT_OK(lv_graph_backward(f.g, loss));
  lv_parity_put_grad(&p, "act", x);
  lv_parity_put_vars(&p, f.vs);
  lv_parity_run(&p, "conv_padded.py");
  lf_close(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("asr_layers");
  TCase *tc = tcase_create("asr_layers");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_conv_padded_shapes_and_names);
  tcase_add_test(tc, test_conv_padded_gradcheck);
  tcase_add_test(tc, test_parity_conv_padded);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
