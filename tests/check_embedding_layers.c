/* SimpleEmbeddingLayer, EmbeddingLayer (sharded) and PositionalEmbeddingLayer: variable
 * names and shapes as Lingvo makes them, the shard layout (id -> var_{id % n} row
 * id / n), lookups and their sparse gradients, sinusoid values against hand-computed
 * ones, errors, finite differences. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "layer_fixture.h"
#include "layers/embedding.h"

static void expect_var(lv_varstore *vs, const char *name, int64_t d0, int64_t d1) {
  lv_var *v = lv_varstore_find(vs, name);
  ck_assert_msg(v, "missing variable %s", name);
  ck_assert_int_eq(v->value.shape.rank, d1 ? 2 : 1);
  ck_assert_int_eq(v->value.shape.d[0], d0);
  if (d1) ck_assert_int_eq(v->value.shape.d[1], d1);
  ck_assert(v->trainable);
}

START_TEST(test_simple_embedding_lookup) {
  lf_fixture f;
  lf_open(&f, "SimpleEmbeddingLayer", LF_SET("name=emb", "vocab_size=11", "embedding_dim=4"), 3);
  ck_assert_int_eq(lv_varstore_count(f.vs), 1);
  expect_var(f.vs, "emb/wm/var", 11, 4);
  /* A gather's gradient (Lingvo: IndexedSlices): L2/L1 regularize the looked-up rows. */
  ck_assert(lv_varstore_find(f.vs, "emb/wm/var")->lp_looked_up_rows);
  const float *wm = lv_f32(&lv_varstore_find(f.vs, "emb/wm/var")->value);
  const int32_t ids[6] = {3, 0, 10, 3, 7, 1};
  lv_tensor *out = lv_embedding_layer_lookup((lv_embedding_layer *)f.l, f.g, lf_ids(f.g, lv_shape2(2, 3), ids));
  lf_ok(f.g);
  ck_assert_int_eq(out->shape.rank, 3);
  ck_assert_int_eq(out->shape.d[0], 2);
  ck_assert_int_eq(out->shape.d[1], 3);
  ck_assert_int_eq(out->shape.d[2], 4);
  for (int i = 0; i < 6; i++)
    for (int d = 0; d < 4; d++) ck_assert_float_eq(lv_f32(out)[i * 4 + d], wm[ids[i] * 4 + d]);
  /* The generic fprop: "ids" -> "act". */
  lv_nmap in, o;
  lv_nmap_init(&in);
  lv_nmap_init(&o);
  EXPECT_OK(lv_nmap_set(&in, "ids", lf_ids(f.g, lv_shape1(2), ids)));
  ck_assert(lv_layer_fprop(f.l, f.g, &in, &o));
  ck_assert_float_eq(lv_f32(lv_nmap_get(&o, "act"))[5], wm[0 * 4 + 1]);
  lv_nmap_free(&in);
  lv_nmap_free(&o);
  /* An id out of range is an error. */
  const int32_t bad[2] = {1, 11};
  ck_assert_ptr_null(lv_embedding_layer_lookup((lv_embedding_layer *)f.l, f.g, lf_ids(f.g, lv_shape1(2), bad)));
  lv_status s = lv_graph_status(f.g);
  ck_assert_msg(s && strstr(lv_status_msg(s), "11"), "%s", s ? lv_status_msg(s) : "no error");
  lv_status_free(s);
  lf_close(&f);
}
END_TEST

START_TEST(test_simple_embedding_scale_sqrt_depth) {
  lf_fixture f;
  lf_open(&f, "SimpleEmbeddingLayer",
          LF_SET("name=emb", "vocab_size=5", "embedding_dim=9", "scale_sqrt_depth=True", "use_matmul=True"), 3);
  /* use_matmul: Lingvo's one-hot matmul has a dense gradient, regularized whole. */
  ck_assert(!lv_varstore_find(f.vs, "emb/wm/var")->lp_looked_up_rows);
  const float *wm = lv_f32(&lv_varstore_find(f.vs, "emb/wm/var")->value);
  const int32_t ids[1] = {4};
  lv_tensor *out = lv_embedding_layer_lookup((lv_embedding_layer *)f.l, f.g, lf_ids(f.g, lv_shape1(1), ids));
  lf_ok(f.g);
  for (int d = 0; d < 9; d++) ck_assert_float_eq_tol(lv_f32(out)[d], 3.0f * wm[4 * 9 + d], 1e-6);
  lf_close(&f);
}
END_TEST

START_TEST(test_embedding_num_shards) {
  /* min(max_num_shards, ceil(vocab * dim / (1024 * 256))). */
  ck_assert_int_eq(lv_embedding_num_shards(32000, 512, 16), 16);
  ck_assert_int_eq(lv_embedding_num_shards(32000, 512, 100), 63);
  ck_assert_int_eq(lv_embedding_num_shards(1000, 100, 16), 1);
  ck_assert_int_eq(lv_embedding_num_shards(5000, 128, 8), 3);
  ck_assert_int_eq(lv_embedding_num_shards(1024, 256, 8), 1);
  ck_assert_int_eq(lv_embedding_num_shards(1025, 256, 8), 2);
  lf_fixture f;
  lf_open(&f, "EmbeddingLayer", LF_SET("name=emb", "vocab_size=5000", "embedding_dim=128", "max_num_shards=8"), 1);
  ck_assert_int_eq(lv_varstore_count(f.vs), 3);
  expect_var(f.vs, "emb/var_0/var", 1667, 128);
  expect_var(f.vs, "emb/var_1/var", 1667, 128);
  expect_var(f.vs, "emb/var_2/var", 1667, 128);
  lf_close(&f);
  /* max_num_shards must be set (Lingvo asserts it is > 0). */
  lv_params *p = lf_params("EmbeddingLayer", LF_SET("name=emb", "vocab_size=10", "embedding_dim=4"));
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_ERR(lv_layer_create(p, "enc", vs, &l), LV_ERR_INVALID, "enc/emb", "max_num_shards");
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

/* vocab 1001, dim 1024: 4 shards of 251 rows (the last row of shard 1..3 unused). Each
 * var_k row r is filled with the id it holds, r * 4 + k, so a lookup shows the layout a
 * Lingvo checkpoint has. */
START_TEST(test_embedding_shard_layout) {
  enum { V = 1001, D = 1024, N = 4, R = 251 };
  lf_fixture f;
  lf_open(&f, "EmbeddingLayer",
          LF_SET("name=emb", "vocab_size=1001", "embedding_dim=1024", "max_num_shards=8", "scale_sqrt_depth=True"), 1);
  ck_assert_int_eq(lv_varstore_count(f.vs), N);
  char name[64];
  for (int k = 0; k < N; k++) {
    snprintf(name, sizeof name, "emb/var_%d/var", k);
    expect_var(f.vs, name, R, D);
    ck_assert(lv_varstore_find(f.vs, name)->lp_looked_up_rows);
    float *w = lv_f32(&lv_varstore_find(f.vs, name)->value);
    for (int r = 0; r < R; r++)
      for (int d = 0; d < D; d++) w[r * D + d] = (float)(r * N + k) + (float)d / 4096.0f;
  }
  const int32_t ids[7] = {0, 1000, 5, 4, 5, 999, 2};
  lv_tensor *out = lv_embedding_layer_lookup((lv_embedding_layer *)f.l, f.g, lf_ids(f.g, lv_shape2(7, 1), ids));
  lf_ok(f.g);
  ck_assert_int_eq(out->shape.rank, 3);
  ck_assert_int_eq(out->shape.d[2], D);
  for (int i = 0; i < 7; i++)
    for (int d = 0; d < D; d += 97)
      ck_assert_float_eq_tol(lv_f32(out)[i * D + d], 32.0f * ((float)ids[i] + (float)d / 4096.0f), 1e-3);
  /* The gradient lands in the right rows, summed over repeated ids, times sqrt(D). */
  lv_tensor *loss = lv_op_reduce_sum(f.g, out, LV_ALL_AXES, false);
  EXPECT_OK(lv_graph_backward(f.g, loss));
  for (int k = 0; k < N; k++) {
    snprintf(name, sizeof name, "emb/var_%d/var", k);
    const float *gw = lv_f32(&lv_varstore_find(f.vs, name)->grad);
    for (int r = 0; r < R; r++) {
      int id = r * N + k, uses = 0;
      for (int i = 0; i < 7; i++) uses += ids[i] == id;
      ck_assert_msg(gw[r * D + 3] == 32.0f * (float)uses, "%s row %d (id %d): grad %g, uses %d", name, r, id,
                    gw[r * D + 3], uses);
    }
  }
  /* Out-of-range ids name the layer. */
  lv_graph_reset(f.g);
  const int32_t bad[2] = {3, 1001};
  ck_assert_ptr_null(lv_embedding_layer_lookup((lv_embedding_layer *)f.l, f.g, lf_ids(f.g, lv_shape1(2), bad)));
  lv_status s = lv_graph_status(f.g);
  ck_assert_msg(s && strstr(lv_status_msg(s), "emb: id 1001") && strstr(lv_status_msg(s), "vocab_size=1001"), "%s",
                s ? lv_status_msg(s) : "no error");
  lv_status_free(s);
  lf_close(&f);
}
END_TEST

typedef struct {
  const int32_t *ids;
  lv_shape shape;
} emb_ctx;

static lv_tensor *emb_loss(lf_fixture *f, void *vctx) {
  emb_ctx *c = vctx;
  lv_tensor *out = lv_embedding_layer_lookup((lv_embedding_layer *)f->l, f->g, lf_ids(f->g, c->shape, c->ids));
  ck_assert_ptr_nonnull(out);
  int64_t n = lv_tensor_numel(out);
  float *w = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) w[i] = (float)sin(0.37 * (double)i + 0.1);
  lv_tensor *wt = lf_tensor(f->g, out->shape, w);
  free(w);
  lv_tensor *sq = lv_op_mul(f->g, out, out); /* nonlinear in the table */
  return lv_op_reduce_sum(f->g, lv_op_mul(f->g, lv_op_add(f->g, sq, out), wt), LV_ALL_AXES, false);
}

START_TEST(test_embedding_gradcheck) {
  /* vocab 300, dim 1024: 2 shards of 150 rows. */
  lf_fixture f;
  lf_open(&f, "EmbeddingLayer",
          LF_SET("name=emb", "vocab_size=300", "embedding_dim=1024", "max_num_shards=4", "scale_sqrt_depth=True",
                 "params_init.method=uniform", "params_init.scale=0.05"),
          5);
  const int32_t ids[5] = {7, 2, 299, 7, 150};
  emb_ctx c = {ids, lv_shape1(5)};
  /* id 7 -> var_1 row 3; 2 -> var_0 row 1; 299 -> var_1 row 149; 150 -> var_0 row 75;
   * var_0 row 0 and var_1 row 0 are untouched. */
  lf_elems e[] = {{"emb/var_1/var", {3 * 1024, 3 * 1024 + 17, 149 * 1024 + 1023, 5, -1}},
                  {"emb/var_0/var", {1 * 1024 + 2, 75 * 1024, 0, 1023, -1}},
                  {NULL, {-1}}};
  lf_gradcheck(&f, emb_loss, &c, e, 1e-3, 2e-3);
  lf_close(&f);
  lf_open(&f, "SimpleEmbeddingLayer",
          LF_SET("name=emb", "vocab_size=6", "embedding_dim=3", "params_init.method=uniform", "params_init.scale=0.5"),
          5);
  const int32_t ids2[4] = {5, 0, 5, 2};
  emb_ctx c2 = {ids2, lv_shape2(2, 2)};
  lf_elems e2[] = {{"emb/wm/var", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, -1}}, {NULL, {-1}}};
  lf_gradcheck(&f, emb_loss, &c2, e2, 1e-3, 2e-3);
  lf_close(&f);
}
END_TEST

static double inv_timescale(int j, int d) {
  return exp(-(double)j * log(10000.0) / (d / 2 - 1));
}

START_TEST(test_positional_embedding_values) {
  enum { D = 8, T = 6 };
  lf_fixture f;
  lf_open(&f, "PositionalEmbeddingLayer", LF_SET("name=pos", "embedding_dim=8"), 1);
  ck_assert_int_eq(lv_varstore_count(f.vs), 0);
  lv_positional_embedding_layer *l = (lv_positional_embedding_layer *)f.l;
  lv_tensor *pe = lv_positional_embedding_fprop(l, f.g, T);
  lf_ok(f.g);
  ck_assert_int_eq(pe->shape.rank, 2);
  ck_assert_int_eq(pe->shape.d[0], T);
  ck_assert_int_eq(pe->shape.d[1], D);
  /* Row 0 is [0 0 0 0 | 1 1 1 1]; sin half first, then cos, not interleaved. */
  for (int j = 0; j < D / 2; j++) {
    ck_assert_float_eq(lv_f32(pe)[j], 0.0f);
    ck_assert_float_eq(lv_f32(pe)[D / 2 + j], 1.0f);
  }
  for (int t = 0; t < T; t++)
    for (int j = 0; j < D / 2; j++) {
      double a = t * inv_timescale(j, D);
      ck_assert_float_eq_tol(lv_f32(pe)[t * D + j], sin(a), 1e-6);
      ck_assert_float_eq_tol(lv_f32(pe)[t * D + D / 2 + j], cos(a), 1e-6);
    }
  /* Timescales run from 1 (j = 0: sin(t)) to 1e4 (j = D/2 - 1: sin(t / 1e4)). */
  ck_assert_float_eq_tol(lv_f32(pe)[5 * D + 0], sin(5.0), 1e-6);
  ck_assert_float_eq_tol(lv_f32(pe)[5 * D + 3], sin(5e-4), 1e-7);
  /* Explicit positions [B, T] through the generic fprop. */
  const int32_t pos[6] = {0, 1, 2, 7, 3, 250};
  lv_nmap in, o;
  lv_nmap_init(&in);
  lv_nmap_init(&o);
  EXPECT_OK(lv_nmap_set(&in, "position", lf_ids(f.g, lv_shape2(2, 3), pos)));
  ck_assert(lv_layer_fprop(f.l, f.g, &in, &o));
  lv_tensor *pw = lv_nmap_get(&o, "act");
  ck_assert_int_eq(pw->shape.rank, 3);
  ck_assert_int_eq(pw->shape.d[2], D);
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < D / 2; j++) {
      double a = pos[i] * inv_timescale(j, D);
      ck_assert_float_eq_tol(lv_f32(pw)[i * D + j], sin(a), 5e-5);
      ck_assert_float_eq_tol(lv_f32(pw)[i * D + D / 2 + j], cos(a), 5e-5);
    }
  lv_nmap_free(&in);
  lv_nmap_free(&o);
  lf_close(&f);
  /* Odd dims are refused. */
  lv_params *p = lf_params("PositionalEmbeddingLayer", LF_SET("name=pos", "embedding_dim=7"));
  lv_varstore *vs = lv_varstore_create();
  lv_layer *bad = NULL;
  EXPECT_ERR(lv_layer_create(p, NULL, vs, &bad), LV_ERR_INVALID, "pos", "embedding_dim", "7");
  lv_varstore_destroy(vs);
  lv_params_free(p);
}
END_TEST

static lv_tensor *pos_loss(lf_fixture *f, void *ctx) {
  (void)ctx;
  lv_tensor *pe = lv_positional_embedding_fprop((lv_positional_embedding_layer *)f->l, f->g, 3);
  return lv_op_reduce_sum(f->g, lv_op_mul(f->g, pe, pe), LV_ALL_AXES, false);
}

START_TEST(test_positional_embedding_trainable_scaling) {
  lf_fixture f;
  lf_open(&f, "PositionalEmbeddingLayer",
          LF_SET("name=pos", "embedding_dim=4", "min_timescale=2", "max_timescale=50", "trainable_scaling=True",
                 "trainable_scaling_init=0.5"),
          1);
  expect_var(f.vs, "pos/scale/var", 1, 0);
  lv_f32(&lv_varstore_find(f.vs, "pos/scale/var")->value)[0] = 0.25f;
  lv_tensor *pe = lv_positional_embedding_fprop((lv_positional_embedding_layer *)f.l, f.g, 4);
  lf_ok(f.g);
  /* inv_t = 2 * exp(-j * log(25) / 1): j = 0 -> 2, j = 1 -> 2/25. */
  ck_assert_float_eq_tol(lv_f32(pe)[3 * 4 + 0], 0.75 * sin(6.0), 1e-6);
  ck_assert_float_eq_tol(lv_f32(pe)[3 * 4 + 1], 0.75 * sin(3 * 2.0 / 25), 1e-6);
  ck_assert_float_eq_tol(lv_f32(pe)[3 * 4 + 3], 0.75 * cos(3 * 2.0 / 25), 1e-6);
  lf_elems e[] = {{"pos/scale/var", {0, -1}}, {NULL, {-1}}};
  lf_gradcheck(&f, pos_loss, NULL, e, 1e-3, 1e-3);
  lf_close(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("embedding_layers");
  TCase *tc = tcase_create("embedding");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_simple_embedding_lookup);
  tcase_add_test(tc, test_simple_embedding_scale_sqrt_depth);
  tcase_add_test(tc, test_embedding_num_shards);
  tcase_add_test(tc, test_embedding_shard_layout);
  tcase_add_test(tc, test_embedding_gradcheck);
  tcase_add_test(tc, test_positional_embedding_values);
  tcase_add_test(tc, test_positional_embedding_trainable_scaling);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
