/* LayerNorm, AdditiveAttention, DotProductAttention and MultiHeadedAttention: variable
 * names and shapes as Lingvo names them, reference values computed here in double,
 * masking (padded source positions get probability 0, a fully padded row gives zeros),
 * the per-step and whole-sequence paths agreeing, errors naming the layer, and finite
 * differences of every variable. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "att_util.h"
#include "layers/attention.h"
#include "layers/layer_norm.h"

START_TEST(test_layer_norm) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer("LayerNorm", "name : 'ln'; input_dim : 6", vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  ATT_EXPECT_VAR(vs, "ln/scale/var", 6);
  ATT_EXPECT_VAR(vs, "ln/bias/var", 6);
  ck_assert_int_eq(lv_varstore_count(vs), 2);
  lv_layer_norm_layer *ln = (lv_layer_norm_layer *)l;
  for (int i = 0; i < 6; i++) ck_assert(lv_f32(&ln->scale->value)[i] == 0.0f);
  /* Lingvo's SKIP_LP_REGULARIZATION: no L2 on a LayerNorm's scale and bias. */
  ck_assert(ln->scale->skip_lp_regularization && ln->bias->skip_lp_regularization);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = att_rand(g, lv_shape3(2, 3, 6), 2.0f, 5);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1)
      for (int i = 0; i < 6; i++) lv_f32(&ln->scale->value)[i] = 1.0f, lv_f32(&ln->bias->value)[i] = 0.5f;
    lv_tensor *y = lv_layer_fprop_act(l, g, x);
    ck_assert_ptr_nonnull(y);
    for (int r = 0; r < 6; r++) {
      double m = 0, v = 0;
      for (int i = 0; i < 6; i++) m += lv_f32(x)[r * 6 + i];
      m /= 6;
      for (int i = 0; i < 6; i++) v += (lv_f32(x)[r * 6 + i] - m) * (lv_f32(x)[r * 6 + i] - m);
      v /= 6;
      for (int i = 0; i < 6; i++) {
        double want = (lv_f32(x)[r * 6 + i] - m) / sqrt(v + 1e-6) * (pass ? 2.0 : 1.0) + (pass ? 0.5 : 0.0);
        ck_assert_msg(fabs(lv_f32(y)[r * 6 + i] - want) < 1e-4, "row %d col %d: %f vs %f", r, i,
                      lv_f32(y)[r * 6 + i], want);
      }
    }
  }
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

/* ---- a shared small attention problem ---- */
enum { S = 5, B = 3, DS = 6, DQ = 4, C = 8 };
static const int kLens[B] = {5, 3, 1};

typedef struct {
  lv_attention *a;
  float src[S * B * DS], ctx[S * B * C], q[2 * B * DS]; /* queries of width <= DS */
  int nq; /* query rows: B or 2B */
  int which; /* 0: gradient to the query, 1: to the source */
} att_case;

static void att_case_init(att_case *c, lv_attention *a, int64_t ds, int64_t dq) {
  memset(c, 0, sizeof *c);
  c->a = a;
  att_fill(c->src, S * B * ds, 1.0f, 11);
  att_fill(c->ctx, S * B * C, 1.0f, 12);
  att_fill(c->q, 2 * B * dq, 1.0f, 13);
  c->nq = B;
}

static bool att_case_run(att_case *c, lv_graph *g, lv_tensor **ctx, lv_tensor **probs, lv_tensor **grad_in) {
  int64_t ds = c->a->source_dim, dq = c->a->query_dim;
  lv_tensor *src = att_input(g, lv_shape3(S, B, ds), c->src);
  lv_tensor *cx = att_input(g, lv_shape3(S, B, C), c->ctx);
  lv_tensor *q = att_input(g, lv_shape2(c->nq, dq), c->q);
  if (grad_in) *grad_in = c->which ? src : q;
  lv_atten_packed pk;
  return lv_attention_pack_source(c->a, g, src, cx, att_pads(g, S, B, kLens), &pk) &&
         lv_attention_compute_context(c->a, g, &pk, q, ctx, probs);
}

static lv_tensor *att_case_loss(lv_graph *g, void *ctx, lv_tensor **grad_in) {
  lv_tensor *c, *p;
  if (!att_case_run(ctx, g, &c, &p, grad_in)) return NULL;
  return lv_op_add(g, att_weighted_sum(g, c), att_weighted_sum(g, p));
}

static void check_probs_masked(const lv_tensor *probs, int rows) {
  for (int r = 0; r < rows; r++) {
    double sum = 0;
    for (int s = 0; s < S; s++) {
      float v = lv_f32(probs)[r * S + s];
      if (s >= kLens[r % B]) ck_assert_msg(v == 0.0f, "row %d: padded position %d has prob %g", r, s, v);
      sum += v;
    }
    ck_assert_msg(fabs(sum - 1.0) < 1e-5, "row %d: probs sum to %f", r, sum);
  }
}

/* ctx[r] = sum_s probs[r, s] * contexts[s, r % B]. */
static void check_ctx_is_weighted(const att_case *c, const lv_tensor *ctx, const lv_tensor *probs) {
  for (int r = 0; r < c->nq; r++)
    for (int k = 0; k < C; k++) {
      double want = 0;
      for (int s = 0; s < S; s++) want += lv_f32(probs)[r * S + s] * c->ctx[(s * B + r % B) * C + k];
      ck_assert_msg(fabs(lv_f32(ctx)[r * C + k] - want) < 1e-5, "ctx[%d][%d] %f vs %f", r, k, lv_f32(ctx)[r * C + k],
                    want);
    }
}

/* skip_lp_regularization is None by default and then the enclosing scope's (Lingvo's
 * CopyBaseParams: the task's, or a parent layer's), False when no scope sets one; a
 * layer's own True or False wins. */
START_TEST(test_skip_lp_inherited) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p[4];
  lv_layer *l[4];
  l[0] = att_layer("FCLayer", "name : 'plain'; input_dim : 2; output_dim : 3", vs, &p[0]);
  lv_varstore_set_scope_skip_lp(vs, "", true); /* the task's skip_lp_regularization: True */
  l[1] = att_layer("FCLayer", "name : 'inherits'; input_dim : 2; output_dim : 3", vs, &p[1]);
  l[2] = att_layer("FCLayer", "name : 'own'; input_dim : 2; output_dim : 3; skip_lp_regularization : False", vs,
                   &p[2]);
  lv_varstore_set_scope_skip_lp(vs, "", false);
  l[3] = att_layer("FCLayer", "name : 'on'; input_dim : 2; output_dim : 3; skip_lp_regularization : True", vs, &p[3]);
  ck_assert(!lv_params_is_set(p[0], "skip_lp_regularization"));
  ck_assert(!lv_varstore_find(vs, "plain/w/var")->skip_lp_regularization);
  ck_assert(lv_varstore_find(vs, "inherits/w/var")->skip_lp_regularization);
  ck_assert(lv_varstore_find(vs, "inherits/b/var")->skip_lp_regularization);
  ck_assert(!lv_varstore_find(vs, "own/w/var")->skip_lp_regularization);
  ck_assert(lv_varstore_find(vs, "on/w/var")->skip_lp_regularization);
  ck_assert(lv_varstore_scope_skip_lp(vs, "on/child"));
  ck_assert(!lv_varstore_scope_skip_lp(vs, "onx"));
  for (int i = 0; i < 4; i++) {
    lv_layer_free(l[i]);
    lv_params_free(p[i]);
  }
  lv_varstore_destroy(vs);
}
END_TEST

START_TEST(test_additive_attention) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer("AdditiveAttention", "name : 'att'; source_dim : 6; query_dim : 4; hidden_dim : 7", vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  ATT_EXPECT_VAR(vs, "att/source_var/var", DS, 7);
  ATT_EXPECT_VAR(vs, "att/query_var/var", DQ, 7);
  ATT_EXPECT_VAR(vs, "att/hidden_var/var", 7);
  ck_assert_int_eq(lv_varstore_count(vs), 3);
  ck_assert_str_eq(lv_params_str(p, "params_init.method"), "gaussian_sqrt_dim");
  lv_additive_attention *ad = (lv_additive_attention *)l;
  att_case c;
  att_case_init(&c, lv_attention_of(l), DS, DQ);
  c.nq = 2 * B; /* beam layout: rows B..2B-1 attend the same sources as 0..B-1 */
  lv_graph *g = lv_graph_create(0);
  lv_tensor *ctx, *probs;
  ck_assert(att_case_run(&c, g, &ctx, &probs, NULL));
  ck_assert_int_eq(ctx->shape.d[0], 2 * B);
  ck_assert_int_eq(ctx->shape.d[1], C);
  check_probs_masked(probs, 2 * B);
  check_ctx_is_weighted(&c, ctx, probs);
  /* Bahdanau logits computed here: v . tanh(Ws s + Wq q), softmax over non-padded. */
  const float *ws = lv_f32(&ad->source_var->value), *wq = lv_f32(&ad->query_var->value),
              *v = lv_f32(&ad->hidden_var->value);
  for (int r = 0; r < 2 * B; r++) {
    int b = r % B;
    double lg[S], mx = -1e300, z = 0;
    for (int s = 0; s < kLens[b]; s++) {
      lg[s] = 0;
      for (int h = 0; h < 7; h++) {
        double a = 0;
        for (int i = 0; i < DS; i++) a += c.src[(s * B + b) * DS + i] * ws[i * 7 + h];
        for (int j = 0; j < DQ; j++) a += c.q[r * DQ + j] * wq[j * 7 + h];
        lg[s] += v[h] * tanh(a);
      }
      mx = fmax(mx, lg[s]);
    }
    for (int s = 0; s < kLens[b]; s++) z += exp(lg[s] - mx);
    for (int s = 0; s < kLens[b]; s++)
      ck_assert_msg(fabs(lv_f32(probs)[r * S + s] - exp(lg[s] - mx) / z) < 1e-5, "probs[%d][%d]", r, s);
  }
  lv_graph_destroy(g);
  c.nq = B;
  att_gradcheck("AdditiveAttention/query", vs, att_case_loss, &c, c.q, B * DQ, 8, 2e-3, 2e-2);
  c.which = 1;
  att_gradcheck("AdditiveAttention/source", vs, att_case_loss, &c, c.src, S * B * DS, 8, 2e-3, 2e-2);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

START_TEST(test_dot_product_attention) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer("DotProductAttention", "name : 'dot'; source_dim : 6; query_dim : 6; hidden_dim : 6", vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  ATT_EXPECT_VAR(vs, "dot/per_dim_scale/var", DS);
  ck_assert_int_eq(lv_varstore_count(vs), 1);
  att_randomize_vars(vs, 0.8f, 3);
  const float *pds = lv_f32(&((lv_dot_product_attention *)l)->per_dim_scale->value);
  att_case c;
  att_case_init(&c, lv_attention_of(l), DS, DS);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *ctx, *probs;
  ck_assert(att_case_run(&c, g, &ctx, &probs, NULL));
  check_probs_masked(probs, B);
  check_ctx_is_weighted(&c, ctx, probs);
  for (int b = 0; b < B; b++) {
    double lg[S], mx = -1e300, z = 0;
    for (int s = 0; s < kLens[b]; s++) {
      lg[s] = 0;
      for (int i = 0; i < DS; i++)
        lg[s] += c.q[b * DS + i] * (log1p(exp(pds[i])) / log(2.0)) * c.src[(s * B + b) * DS + i] / sqrt((double)DS);
      mx = fmax(mx, lg[s]);
    }
    for (int s = 0; s < kLens[b]; s++) z += exp(lg[s] - mx);
    for (int s = 0; s < kLens[b]; s++)
      ck_assert_msg(fabs(lv_f32(probs)[b * S + s] - exp(lg[s] - mx) / z) < 1e-5, "probs[%d][%d]", b, s);
  }
  lv_graph_destroy(g);
  att_gradcheck("DotProductAttention", vs, att_case_loss, &c, c.q, B * DS, 6, 2e-3, 2e-2);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

static const char *kMha =
    "name : 'mha'; source_dim : 6; query_dim : 4; context_dim : 8; hidden_dim : 8; num_attention_heads : 2;"
    "use_source_vec_as_attention_value : False; enable_ctx_post_proj : True; ctx_post_proj_dim : 5";

START_TEST(test_mha_variables) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer("MultiHeadedAttention", kMha, vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  ATT_EXPECT_VAR(vs, "mha/source_proj/var", 6, 8);
  ATT_EXPECT_VAR(vs, "mha/source_proj_b/var", 8);
  ATT_EXPECT_VAR(vs, "mha/query_proj/var", 4, 8);
  ATT_EXPECT_VAR(vs, "mha/query_proj_b/var", 8);
  ATT_EXPECT_VAR(vs, "mha/ctx_post_proj/var", 8, 5);
  ATT_EXPECT_VAR(vs, "mha/ctx_post_proj_b/var", 5);
  ATT_EXPECT_VAR(vs, "mha/inner_att/per_dim_scale/var", 4);
  ck_assert_int_eq(lv_varstore_count(vs), 7);
  /* Xavier(1.0) weights, zero biases. */
  lv_var *w = lv_varstore_find(vs, "mha/query_proj/var");
  double lim = sqrt(6.0 / 12.0), mx = 0;
  for (int i = 0; i < 32; i++) mx = fmax(mx, fabs(lv_f32(&w->value)[i]));
  ck_assert(mx <= lim && mx > 0.5 * lim);
  ck_assert(lv_f32(&lv_varstore_find(vs, "mha/query_proj_b/var")->value)[3] == 0.0f);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);

  vs = lv_varstore_create();
  l = att_layer("MultiHeadedAttention",
                "name : 'mha'; source_dim : 6; query_dim : 4; context_dim : 8; hidden_dim : 8;"
                "use_source_vec_as_attention_value : False; enable_ctx_pre_proj : True; use_bias : False;"
                "inner_atten_params.cls : 'AdditiveAttention'; proj_init : 'uniform'",
                vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  ATT_EXPECT_VAR(vs, "mha/ctx_proj/var", 8, 8);
  ATT_EXPECT_VAR(vs, "mha/inner_att/source_var/var", 4, 4);
  ATT_EXPECT_VAR(vs, "mha/inner_att/query_var/var", 4, 4);
  ATT_EXPECT_VAR(vs, "mha/inner_att/hidden_var/var", 4);
  ck_assert(lv_varstore_find(vs, "mha/query_proj_b/var") == NULL);
  ck_assert_int_eq(lv_varstore_count(vs), 6);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

static void mha_case(const char *overrides, const char *name) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer("MultiHeadedAttention", overrides, vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  att_randomize_vars(vs, 0.5f, 7);
  att_case c;
  att_case_init(&c, lv_attention_of(l), DS, DQ);
  c.nq = 2 * B;
  lv_graph *g = lv_graph_create(0);
  lv_tensor *ctx, *probs;
  ck_assert_msg(att_case_run(&c, g, &ctx, &probs, NULL), "%s", lv_status_msg(lv_graph_status(g)));
  check_probs_masked(probs, 2 * B);
  /* The second beam copy (same queries) gives the same rows only if queries match;
   * compare each row with a single-row-per-sequence call instead. */
  lv_tensor *ctx1, *probs1;
  c.nq = B;
  float keep[B * DQ];
  memcpy(keep, c.q, sizeof keep);
  memcpy(c.q, c.q + B * DQ, sizeof keep);
  ck_assert(att_case_run(&c, g, &ctx1, &probs1, NULL));
  int64_t cd = ctx1->shape.d[1];
  for (int i = 0; i < B * cd; i++) ck_assert(fabs(lv_f32(ctx1)[i] - lv_f32(ctx)[B * cd + i]) < 1e-5);
  for (int i = 0; i < B * S; i++) ck_assert(fabs(lv_f32(probs1)[i] - lv_f32(probs)[B * S + i]) < 1e-6);
  memcpy(c.q, keep, sizeof keep);
  lv_graph_destroy(g);
  att_gradcheck(name, vs, att_case_loss, &c, c.q, B * DQ, 6, 2e-3, 2e-2);
  c.which = 1;
  att_gradcheck(name, vs, att_case_loss, &c, c.src, S * B * DS, 6, 2e-3, 2e-2);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}

START_TEST(test_mha_dot_product) { mha_case(kMha, "MultiHeadedAttention(dot)"); }
END_TEST

START_TEST(test_mha_additive_inner) {
  mha_case("name : 'mha'; source_dim : 6; query_dim : 4; context_dim : 8; hidden_dim : 8; num_attention_heads : 2;"
           "use_source_vec_as_attention_value : False; enable_ctx_pre_proj : True;"
           "inner_atten_params.cls : 'AdditiveAttention'",
           "MultiHeadedAttention(additive)");
}
END_TEST

/* The whole-sequence path with T queries equals T per-step ComputeContextVector calls. */
START_TEST(test_mha_sequence_matches_steps) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer("MultiHeadedAttention", kMha, vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  att_randomize_vars(vs, 0.5f, 9);
  lv_multi_headed_attention *m = (lv_multi_headed_attention *)l;
  lv_graph *g = lv_graph_create(0);
  enum { T = 4 };
  lv_tensor *src = att_rand(g, lv_shape3(S, B, DS), 1.0f, 1), *cx = att_rand(g, lv_shape3(S, B, C), 1.0f, 2);
  lv_tensor *q = att_rand(g, lv_shape3(T, B, DQ), 1.0f, 3);
  lv_atten_packed pk;
  ck_assert(lv_attention_pack_source(&m->a, g, src, cx, att_pads(g, S, B, kLens), &pk));
  lv_tensor *ctx, *probs;
  ck_assert(lv_mha_attend(m, g, &pk, q, false, &ctx, &probs));
  ck_assert_int_eq(ctx->shape.rank, 3);
  ck_assert_int_eq(ctx->shape.d[2], 5);
  ck_assert_int_eq(probs->shape.d[2], S);
  /* The same through the nmap interface. */
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "source_vecs", src));
  EXPECT_OK(lv_nmap_set(&in, "source_contexts", cx));
  EXPECT_OK(lv_nmap_set(&in, "source_paddings", att_pads(g, S, B, kLens)));
  EXPECT_OK(lv_nmap_set(&in, "query", q));
  ck_assert(lv_layer_fprop(l, g, &in, &out));
  lv_tensor *nc = lv_nmap_get(&out, "ctx");
  ck_assert_int_eq(nc->shape.rank, 3);
  for (int i = 0; i < T * B * 5; i++) ck_assert(lv_f32(nc)[i] == lv_f32(ctx)[i]);
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  for (int t = 0; t < T; t++) {
    lv_tensor *qt = lv_op_reshape(g, lv_op_slice(g, q, 0, t, 1), lv_shape2(B, DQ)), *c1, *p1;
    ck_assert(lv_attention_compute_context(&m->a, g, &pk, qt, &c1, &p1));
    for (int i = 0; i < B * 5; i++) ck_assert(fabs(lv_f32(c1)[i] - lv_f32(ctx)[t * B * 5 + i]) < 1e-5);
    for (int i = 0; i < B * S; i++) ck_assert(fabs(lv_f32(p1)[i] - lv_f32(probs)[t * B * S + i]) < 1e-6);
  }
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

START_TEST(test_masked_softmax_fully_padded) {
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = att_rand(g, lv_shape2(3, 4), 3.0f, 4);
  x->requires_grad = true;
  lv_tensor *pad = lv_graph_zeros(g, LV_F32, lv_shape2(3, 4));
  for (int i = 0; i < 4; i++) lv_f32(pad)[4 + i] = 1.0f; /* row 1 fully padded */
  lv_f32(pad)[2 * 4 + 3] = 1.0f;
  lv_tensor *y = lv_atten_masked_softmax(g, x, pad);
  ck_assert_ptr_nonnull(y);
  for (int i = 0; i < 4; i++) ck_assert(lv_f32(y)[4 + i] == 0.0f);
  ck_assert(lv_f32(y)[11] == 0.0f);
  double s0 = 0, s2 = 0;
  for (int i = 0; i < 4; i++) s0 += lv_f32(y)[i], s2 += lv_f32(y)[8 + i];
  ck_assert(fabs(s0 - 1) < 1e-6 && fabs(s2 - 1) < 1e-6);
  EXPECT_OK(lv_graph_backward(g, att_weighted_sum(g, y)));
  for (int i = 0; i < 12; i++) ck_assert(isfinite(lv_f32(x->grad)[i]));
  for (int i = 0; i < 4; i++) ck_assert(lv_f32(x->grad)[4 + i] == 0.0f);
  lv_graph_destroy(g);
}
END_TEST

START_TEST(test_attention_errors_and_nmap) {
  lv_layers_register_all();
  lv_varstore *vs = lv_varstore_create();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate("MultiHeadedAttention", &p));
  EXPECT_OK(lv_params_from_text(p, "name : 'mha'; source_dim : 6; query_dim : 4; hidden_dim : 9; "
                                   "num_attention_heads : 2", "<test>"));
  lv_params_freeze(p);
  lv_layer *l = NULL;
  EXPECT_ERR(lv_layer_create(p, "enc", vs, &l), LV_ERR_INVALID, "enc/mha", "num_attention_heads");
  lv_params_free(p);
  lv_varstore_destroy(vs);

  vs = lv_varstore_create();
  l = att_layer("AdditiveAttention", "name : 'att'; source_dim : 6; query_dim : 4; hidden_dim : 3", vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  lv_graph *g = lv_graph_create(0);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "source_vecs", att_rand(g, lv_shape3(S, B, DS), 1.0f, 1)));
  EXPECT_OK(lv_nmap_set(&in, "source_paddings", att_pads(g, S, B, kLens)));
  EXPECT_OK(lv_nmap_set(&in, "query", att_rand(g, lv_shape2(B, DQ), 1.0f, 2)));
  ck_assert(lv_layer_fprop(l, g, &in, &out));
  ck_assert_int_eq(lv_nmap_get(&out, "ctx")->shape.d[1], DS);
  check_probs_masked(lv_nmap_get(&out, "probs"), B);
  /* A query of the wrong width: the error names the layer and the input. */
  EXPECT_OK(lv_nmap_set(&in, "query", att_rand(g, lv_shape2(B, 5), 1.0f, 2)));
  ck_assert(!lv_layer_fprop(l, g, &in, &out));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "att", "query", "[n * 3, 4]");
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

int main(void) {
  Suite *s = suite_create("attention_layers");
  TCase *tc = tcase_create("attention");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_layer_norm);
  tcase_add_test(tc, test_skip_lp_inherited);
  tcase_add_test(tc, test_additive_attention);
  tcase_add_test(tc, test_dot_product_attention);
  tcase_add_test(tc, test_mha_variables);
  tcase_add_test(tc, test_mha_dot_product);
  tcase_add_test(tc, test_mha_additive_inner);
  tcase_add_test(tc, test_mha_sequence_matches_steps);
  tcase_add_test(tc, test_masked_softmax_fully_padded);
  tcase_add_test(tc, test_attention_errors_and_nmap);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
