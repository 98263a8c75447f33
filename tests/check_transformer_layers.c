/* TransformerAttentionLayer, TransformerFeedForwardLayer, TransformerLayer: variable
 * names as Lingvo's layers_with_attention.py makes them, the normalized residual,
 * causal and padding masks, ExtendStep over t = 0..T-1 reproducing the causal fprop,
 * finite differences, the nmap interface and its errors. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "att_util.h"
#include "layers/transformer.h"

static const char *kDec =
    "name : 'tr'; source_dim : 8; is_decoder : True; tr_atten_tpl.num_attention_heads : 2;"
    "tr_fflayer_tpl.hidden_dim : 16";

START_TEST(test_transformer_variables) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer("TransformerLayer", kDec, vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  const char *attn[] = {"tr/multihead_self_atten", "tr/multihead_atten"};
  char n[256];
  for (int i = 0; i < 2; i++) {
#define V(suffix, ...)                                    \
  snprintf(n, sizeof n, "%s/%s/var", attn[i], suffix); \
  ATT_EXPECT_VAR(vs, n, __VA_ARGS__)
    V("atten_ln/scale", 8);
    V("atten_ln/bias", 8);
    V("multihead_atten/query_proj", 8, 8);
    V("multihead_atten/query_proj_b", 8);
    V("multihead_atten/source_proj", 8, 8);
    V("multihead_atten/source_proj_b", 8);
    V("multihead_atten/ctx_post_proj", 8, 8);
    V("multihead_atten/ctx_post_proj_b", 8);
    V("multihead_atten/inner_att/per_dim_scale", 4);
#undef V
  }
  ATT_EXPECT_VAR(vs, "tr/tr_fflayer/fflayer_ln/scale/var", 8);
  ATT_EXPECT_VAR(vs, "tr/tr_fflayer/fflayer_ln/bias/var", 8);
  ATT_EXPECT_VAR(vs, "tr/tr_fflayer/fflayer/fflayer_0/w/var", 8, 16);
  ATT_EXPECT_VAR(vs, "tr/tr_fflayer/fflayer/fflayer_0/b/var", 16);
  ATT_EXPECT_VAR(vs, "tr/tr_fflayer/fflayer/fflayer_1/w/var", 16, 8);
  ATT_EXPECT_VAR(vs, "tr/tr_fflayer/fflayer/fflayer_1/b/var", 8);
  ck_assert_int_eq(lv_varstore_count(vs), 24);
  lv_transformer_layer *t = (lv_transformer_layer *)l;
  ck_assert(t->self_atten->is_masked && t->atten && !t->atten->is_masked);
  /* Lingvo's defaults reached the children. */
  ck_assert_int_eq(lv_params_int(p, "tr_fflayer_tpl.hidden_dim"), 16);
  ck_assert(!lv_params_bool(p, "tr_atten_tpl.add_unnormalized_input"));
  ck_assert(!lv_params_bool(p, "tr_atten_tpl.atten_tpl.use_source_vec_as_attention_value"));
  lv_layer_free(l);
  lv_params_free(p);

  /* The encoder: no aux attention. */
  lv_varstore_destroy(vs);
  vs = lv_varstore_create();
  l = att_layer("TransformerLayer", "name : 'enc'; source_dim : 8; tr_atten_tpl.num_attention_heads : 4", vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  ck_assert_int_eq(lv_varstore_count(vs), 15);
  ATT_EXPECT_VAR(vs, "enc/tr_fflayer/fflayer/fflayer_0/w/var", 8, 2048);
  ATT_EXPECT_VAR(vs, "enc/multihead_self_atten/multihead_atten/inner_att/per_dim_scale/var", 2);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

/* With the attention output forced to zero, the layer returns LN(x), or x with
 * add_unnormalized_input. */
START_TEST(test_normalized_residual) {
  for (int unnorm = 0; unnorm < 2; unnorm++) {
    lv_varstore *vs = lv_varstore_create();
    lv_params *p;
    lv_layer *l = att_layer("TransformerAttentionLayer",
                            unnorm ? "name : 'a'; source_dim : 6; num_attention_heads : 2; add_unnormalized_input : True"
                                   : "name : 'a'; source_dim : 6; num_attention_heads : 2",
                            vs, &p);
    EXPECT_OK(lv_varstore_finalize(vs, 1));
    att_randomize_vars(vs, 0.5f, 1);
    lv_var *w = lv_varstore_find(vs, "a/multihead_atten/ctx_post_proj/var");
    lv_var *b = lv_varstore_find(vs, "a/multihead_atten/ctx_post_proj_b/var");
    memset(w->value.data, 0, lv_tensor_nbytes(&w->value));
    memset(b->value.data, 0, lv_tensor_nbytes(&b->value));
    lv_graph *g = lv_graph_create(0);
    lv_tensor *x = att_rand(g, lv_shape3(3, 2, 6), 2.0f, 2);
    lv_tensor *y = lv_layer_fprop_act(l, g, x);
    lv_tensor *ln = lv_layer_norm_layer_fprop(((lv_tr_atten_layer *)l)->ln, g, x);
    ck_assert(y && ln);
    for (int i = 0; i < 36; i++) ck_assert(fabs(lv_f32(y)[i] - lv_f32(unnorm ? x : ln)[i]) < 1e-6);
    lv_graph_destroy(g);
    lv_layer_free(l);
    lv_params_free(p);
    lv_varstore_destroy(vs);
  }
}
END_TEST

enum { T = 5, B = 3, D = 8, S = 4 };
static const int kLens[B] = {5, 3, 4}, kAuxLens[B] = {4, 2, 1};

/* The kDec layer with its variables finalized and drawn from seed. */
static lv_layer *dec_layer(lv_varstore *vs, lv_params **p, uint64_t seed) {
  lv_layer *l = att_layer("TransformerLayer", kDec, vs, p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  att_randomize_vars(vs, 0.4f, seed);
  return l;
}

static lv_tensor *run_layer(lv_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *aux) {
  lv_tensor *y = NULL;
  ck_assert(lv_transformer_layer_fprop((lv_transformer_layer *)l, g, x, att_pads(g, T, B, kLens), aux,
                                       aux ? att_pads(g, S, B, kAuxLens) : NULL, &y, NULL));
  return y;
}

START_TEST(test_causal_and_padding_masks) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = dec_layer(vs, &p, 3);
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *x = att_rand(g, lv_shape3(T, B, D), 1.0f, 1), *aux = att_rand(g, lv_shape3(S, B, D), 1.0f, 2);
  lv_tensor *y0 = run_layer(l, g, x, aux);
  /* A later step changes nothing before it. */
  lv_tensor *x2 = lv_op_scale(g, x, 1.0f);
  for (int i = 0; i < B * D; i++) lv_f32(x2)[2 * B * D + i] += 0.5f * (float)(i % 3); /* not a constant: LN would erase it */
  lv_tensor *y1 = run_layer(l, g, x2, aux);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < B * D; i++) {
      double d = fabs(lv_f32(y0)[t * B * D + i] - lv_f32(y1)[t * B * D + i]);
      if (t < 2) ck_assert_msg(d == 0.0, "step %d changed by a later input", t);
    }
  double changed = 0;
  for (int i = 0; i < B * D; i++) changed += fabs(lv_f32(y0)[2 * B * D + i] - lv_f32(y1)[2 * B * D + i]);
  ck_assert(changed > 1e-3);
  /* Padded encoder positions do not matter. */
  lv_tensor *aux2 = lv_op_scale(g, aux, 1.0f);
  for (int s = 0; s < S; s++)
    for (int b = 0; b < B; b++)
      if (s >= kAuxLens[b])
        for (int k = 0; k < D; k++) lv_f32(aux2)[(s * B + b) * D + k] = 7.0f;
  lv_tensor *y2 = run_layer(l, g, x, aux2);
  for (int i = 0; i < T * B * D; i++) ck_assert(fabs(lv_f32(y0)[i] - lv_f32(y2)[i]) < 1e-6);
  /* Encoder self-attention (no causal mask): padded steps of a sequence do not change
   * its other steps. */
  lv_varstore *vs2 = lv_varstore_create();
  lv_params *p2;
  lv_layer *enc = att_layer("TransformerLayer", "name : 'enc'; source_dim : 8; tr_atten_tpl.num_attention_heads : 2;"
                            "tr_fflayer_tpl.hidden_dim : 12", vs2, &p2);
  EXPECT_OK(lv_varstore_finalize(vs2, 2));
  att_randomize_vars(vs2, 0.4f, 4);
  lv_tensor *e0 = run_layer(enc, g, x, NULL);
  lv_tensor *x3 = lv_op_scale(g, x, 1.0f);
  for (int t = kLens[1]; t < T; t++)
    for (int k = 0; k < D; k++) lv_f32(x3)[(t * B + 1) * D + k] = -3.0f;
  lv_tensor *e1 = run_layer(enc, g, x3, NULL);
  for (int t = 0; t < T; t++)
    for (int b = 0; b < B; b++)
      for (int k = 0; k < D; k++) {
        double d = fabs(lv_f32(e0)[(t * B + b) * D + k] - lv_f32(e1)[(t * B + b) * D + k]);
        if (b != 1 || t < kLens[1]) ck_assert_msg(d < 1e-6, "t %d b %d changed by padded steps", t, b);
      }
  lv_graph_destroy(g);
  lv_layer_free(enc);
  lv_params_free(p2);
  lv_varstore_destroy(vs2);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

START_TEST(test_extend_step_matches_fprop) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = dec_layer(vs, &p, 5);
  lv_transformer_layer *tl = (lv_transformer_layer *)l;
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *x = att_rand(g, lv_shape3(T, B, D), 1.0f, 1), *aux = att_rand(g, lv_shape3(S, B, D), 1.0f, 2);
  lv_tensor *full = NULL, *fprobs = NULL; /* [T, B, D], aux probs [T, B, S] */
  ck_assert(lv_transformer_layer_fprop(tl, g, x, att_pads(g, T, B, kLens), aux, att_pads(g, S, B, kAuxLens), &full,
                                       &fprobs));
  lv_atten_packed packed;
  ck_assert(lv_transformer_layer_pack_aux(tl, g, aux, att_pads(g, S, B, kAuxLens), &packed));
  lv_tr_cache cache = {0};
  for (int t = 0; t < T; t++) {
    lv_tensor *xt = lv_op_reshape(g, lv_op_slice(g, x, 0, t, 1), lv_shape2(B, D)), *yt, *pt;
    ck_assert_msg(lv_transformer_layer_extend_step_probs(tl, g, xt, &cache, &packed, &yt, &pt), "%s",
                  lv_status_msg(lv_graph_status(g)));
    ck_assert_int_eq(cache.key->shape.d[0], t + 1);
    ck_assert(pt->shape.d[0] == B && pt->shape.d[1] == S);
    for (int b = 0; b < B; b++) {
      if (t >= kLens[b]) continue; /* the fprop's padded steps differ (FFN zeroes them) */
      for (int k = 0; k < D; k++) {
        float a = lv_f32(yt)[b * D + k], w = lv_f32(full)[(t * B + b) * D + k];
        ck_assert_msg(fabs(a - w) < 1e-5, "t %d b %d k %d: step %f vs fprop %f", t, b, k, a, w);
      }
      for (int k = 0; k < S; k++) {
        float a = lv_f32(pt)[b * S + k], w = lv_f32(fprobs)[(t * B + b) * S + k];
        ck_assert_msg(fabs(a - w) < 1e-6, "t %d b %d s %d: step probs %f vs fprop %f", t, b, k, a, w);
      }
    }
  }
  /* Beam layout: 2 hypotheses per sequence (rows b and B + b, the same inputs here)
   * against the once-packed source give the single-hypothesis outputs twice. */
  lv_tr_cache cb = {0};
  for (int t = 0; t < 2; t++) {
    lv_tensor *xt = lv_op_reshape(g, lv_op_slice(g, x, 0, t, 1), lv_shape2(B, D)), *yt;
    lv_tensor *two[2] = {xt, xt};
    ck_assert(lv_transformer_layer_extend_step(tl, g, lv_op_concat(g, two, 2, 0), &cb, &packed, &yt));
    ck_assert_int_eq(yt->shape.d[0], 2 * B);
    for (int r = 0; r < 2 * B; r++)
      for (int k = 0; k < D; k++)
        ck_assert(fabs(lv_f32(yt)[r * D + k] - lv_f32(full)[(t * B + r % B) * D + k]) < 1e-5);
  }
  /* The self-attention layer on its own: probs over the steps so far. */
  lv_tr_cache c2 = {0};
  lv_tensor *o, *pr;
  ck_assert(lv_tr_atten_layer_extend_step(tl->self_atten, g, lv_op_reshape(g, lv_op_slice(g, x, 0, 0, 1), lv_shape2(B, D)),
                                          &c2, &o, &pr));
  ck_assert(lv_tr_atten_layer_extend_step(tl->self_atten, g, lv_op_reshape(g, lv_op_slice(g, x, 0, 1, 1), lv_shape2(B, D)),
                                          &c2, &o, &pr));
  ck_assert_int_eq(pr->shape.d[1], 2);
  for (int b = 0; b < B; b++) ck_assert(fabs(lv_f32(pr)[b * 2] + lv_f32(pr)[b * 2 + 1] - 1.0) < 1e-5);
  /* An unmasked layer refuses ExtendStep. */
  lv_tr_cache c3 = {0};
  ck_assert(!lv_tr_atten_layer_extend_step(tl->atten, g, lv_op_reshape(g, lv_op_slice(g, x, 0, 0, 1), lv_shape2(B, D)),
                                           &c3, &o, NULL));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "tr/multihead_atten", "is_masked");
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

/* A search's self-attention caches (lv_tr_step_caches): the cached step through the
 * ancestors (no probs asked) against the packing path on the rows gathered into order
 * (probs asked), the same inputs and parents: step 0 with B rows, then 2B (a new row
 * count: gathered), a reorder at every step (composed ancestors) and growth past the
 * buffers' first 8 steps (gathered again). */
START_TEST(test_step_caches_cached_attention_matches_packing) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = dec_layer(vs, &p, 5);
  lv_tr_atten_layer *sa = ((lv_transformer_layer *)l)->self_atten;
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tr_step_caches c[2];
  for (int m = 0; m < 2; m++) lv_tr_step_caches_init(&c[m], g, 1, "test");
  int32_t parent[2 * B];
  int composed = 0;
  for (int t = 0, rows = B; t < 11; t++) {
    const int n = t ? 2 * B : B;
    for (int r = 0; r < n; r++) parent[r] = t == 1 ? r % B : (r * 3 + t) % n;
    lv_tensor *x = att_rand(g, lv_shape2(n, D), 1.0f, 100 + (uint64_t)t), *y[2];
    for (int m = 0; m < 2; m++) {
      if (t) EXPECT_OK(lv_tr_step_caches_prepare(&c[m], t, rows, n, parent));
      lv_tensor *pr = NULL;
      ck_assert_msg(lv_tr_atten_layer_extend_step(sa, g, x, &c[m].cache[0], &y[m], m ? &pr : NULL), "%s",
                    lv_status_msg(lv_graph_status(g)));
      if (!t) EXPECT_OK(lv_tr_step_caches_keep_first(&c[m]));
    }
    composed += c[0].cache[0].anc != NULL;
    for (int64_t i = 0; i < n * D; i++)
      ck_assert_msg(fabsf(lv_f32(y[0])[i] - lv_f32(y[1])[i]) < 1e-5f, "step %d [%lld]: cached %g, packed %g", t,
                    (long long)i, lv_f32(y[0])[i], lv_f32(y[1])[i]);
    rows = n;
  }
  ck_assert_int_eq(composed, 8); /* steps 2-7 and 9-10; 1 (new row count) and 8 (growth) gathered */
  for (int m = 0; m < 2; m++) lv_tr_step_caches_free(&c[m]);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

typedef struct {
  lv_layer *l;
  float x[3 * 2 * 4], aux[3 * 2 * 4];
} fd_case;

static lv_tensor *fd_loss(lv_graph *g, void *ctx, lv_tensor **grad_in) {
  fd_case *c = ctx;
  static const int lens[2] = {3, 2}, alens[2] = {2, 3};
  lv_tensor *x = att_input(g, lv_shape3(3, 2, 4), c->x), *aux = att_input(g, lv_shape3(3, 2, 4), c->aux), *y, *pr;
  *grad_in = x;
  if (!lv_transformer_layer_fprop((lv_transformer_layer *)c->l, g, x, att_pads(g, 3, 2, lens), aux,
                                  att_pads(g, 3, 2, alens), &y, &pr))
    return NULL;
  return lv_op_add(g, att_weighted_sum(g, y), att_weighted_sum(g, pr));
}

START_TEST(test_transformer_finite_differences) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  fd_case c;
  c.l = att_layer("TransformerLayer",
                  "name : 'tr'; source_dim : 4; is_decoder : True; tr_atten_tpl.num_attention_heads : 2;"
                  "tr_fflayer_tpl.hidden_dim : 6",
                  vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  att_randomize_vars(vs, 0.5f, 6);
  att_fill(c.x, 24, 1.0f, 7);
  att_fill(c.aux, 24, 1.0f, 8);
  att_gradcheck("TransformerLayer(decoder)", vs, fd_loss, &c, c.x, 24, 5, 2e-3, 3e-2);
  lv_layer_free(c.l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

/* TransformerFeedForwardLayer on its own: Lingvo's variables, and finite differences of
 * its input and variables (padded rows included). */
static lv_tensor *ff_loss(lv_graph *g, void *ctx, lv_tensor **grad_in) {
  fd_case *c = ctx;
  static const int lens[2] = {3, 1};
  lv_tensor *x = att_input(g, lv_shape3(3, 2, 4), c->x);
  *grad_in = x;
  lv_tensor *y = lv_tr_ff_layer_fprop((lv_tr_ff_layer *)c->l, g, x, att_pads(g, 3, 2, lens));
  return y ? att_weighted_sum(g, y) : NULL;
}

START_TEST(test_feed_forward_layer) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  fd_case c;
  c.l = att_layer("TransformerFeedForwardLayer", "name : 'ff'; input_dim : 4; hidden_dim : 6", vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  ATT_EXPECT_VAR(vs, "ff/fflayer_ln/scale/var", 4);
  ATT_EXPECT_VAR(vs, "ff/fflayer/fflayer_0/w/var", 4, 6);
  ATT_EXPECT_VAR(vs, "ff/fflayer/fflayer_1/w/var", 6, 4);
  ATT_EXPECT_VAR(vs, "ff/fflayer/fflayer_1/b/var", 4);
  att_randomize_vars(vs, 0.5f, 9);
  att_fill(c.x, 24, 1.0f, 10);
  att_gradcheck("TransformerFeedForwardLayer", vs, ff_loss, &c, c.x, 24, 5, 2e-3, 3e-2);
  lv_layer_free(c.l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

START_TEST(test_nmap_interface_and_errors) {
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer("TransformerLayer", kDec, vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  lv_graph *g = lv_graph_create(0);
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  EXPECT_OK(lv_nmap_set(&in, "act", att_rand(g, lv_shape3(T, B, D), 1.0f, 1)));
  EXPECT_OK(lv_nmap_set(&in, "paddings", att_pads(g, T, B, kLens)));
  ck_assert(!lv_layer_fprop(l, g, &in, &out));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "tr", "aux_vecs");
  lv_graph_reset(g);
  EXPECT_OK(lv_nmap_set(&in, "act", att_rand(g, lv_shape3(T, B, D), 1.0f, 1)));
  EXPECT_OK(lv_nmap_set(&in, "paddings", att_pads(g, T, B, kLens)));
  EXPECT_OK(lv_nmap_set(&in, "aux_vecs", att_rand(g, lv_shape3(S, B, D), 1.0f, 2)));
  EXPECT_OK(lv_nmap_set(&in, "aux_paddings", att_pads(g, S, B, kAuxLens)));
  ck_assert(lv_layer_fprop(l, g, &in, &out));
  lv_tensor *y = lv_nmap_get(&out, "act"), *pr = lv_nmap_get(&out, "probs");
  ck_assert(y->shape.rank == 3 && y->shape.d[0] == T && y->shape.d[2] == D);
  ck_assert(pr->shape.rank == 3 && pr->shape.d[2] == S);
  for (int t = 0; t < T; t++)
    for (int b = 0; b < B; b++)
      for (int s = kAuxLens[b]; s < S; s++) ck_assert(lv_f32(pr)[(t * B + b) * S + s] == 0.0f);
  /* Wrong model dim: the error names the layer and the expected dim. */
  lv_graph_reset(g);
  lv_nmap_clear(&in);
  EXPECT_OK(lv_nmap_set(&in, "act", att_rand(g, lv_shape3(T, B, 6), 1.0f, 1)));
  EXPECT_OK(lv_nmap_set(&in, "paddings", att_pads(g, T, B, kLens)));
  EXPECT_OK(lv_nmap_set(&in, "aux_vecs", att_rand(g, lv_shape3(S, B, D), 1.0f, 2)));
  ck_assert(!lv_layer_fprop(l, g, &in, &out));
  EXPECT_ERR(lv_graph_status(g), LV_ERR_INVALID, "tr/multihead_self_atten", "last dim 8");
  /* The feed-forward layer alone: padded positions keep their input. */
  lv_graph_reset(g);
  lv_tr_ff_layer *ff = ((lv_transformer_layer *)l)->fflayer;
  att_randomize_vars(vs, 0.5f, 9);
  lv_tensor *x = att_rand(g, lv_shape3(T, B, D), 1.0f, 3);
  lv_tensor *h = lv_tr_ff_layer_fprop(ff, g, x, att_pads(g, T, B, kLens));
  ck_assert_ptr_nonnull(h);
  for (int t = 0; t < T; t++)
    for (int b = 0; b < B; b++)
      for (int k = 0; k < D; k++) {
        int i = (t * B + b) * D + k;
        if (t >= kLens[b]) ck_assert(lv_f32(h)[i] == lv_f32(x)[i]);
        else ck_assert(lv_f32(h)[i] != lv_f32(x)[i]);
      }
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);

  /* Bad templates are errors naming the layer and the key. */
  lv_layers_register_all();
  lv_params *bp = NULL;
  EXPECT_OK(lv_registry_instantiate("TransformerLayer", &bp));
  EXPECT_OK(lv_params_from_text(bp, "name : 'tr'; source_dim : 8; tr_atten_tpl.mask_type : 'eye'; "
                                    "mask_self_atten : True", "<test>"));
  lv_params_freeze(bp);
  vs = lv_varstore_create();
  lv_layer *bad = NULL;
  EXPECT_ERR(lv_layer_create(bp, "dec", vs, &bad), LV_ERR_INVALID, "dec/tr/multihead_self_atten", "mask_type");
  lv_params_free(bp);
  lv_varstore_destroy(vs);
}
END_TEST

/* Dropouts (attention probs, residuals, relu) act in training only: eval output equals
 * that of the same weights without dropout, training output differs. */
START_TEST(test_dropout_training_only) {
  const char *cfg[2] = {"name : 'tr'; source_dim : 8; is_decoder : True; tr_atten_tpl.num_attention_heads : 2;"
                        "tr_fflayer_tpl.hidden_dim : 16",
                        "name : 'tr'; source_dim : 8; is_decoder : True; tr_atten_tpl.num_attention_heads : 2;"
                        "tr_fflayer_tpl.hidden_dim : 16; tr_atten_tpl.atten_dropout_prob : 0.3;"
                        "tr_atten_tpl.residual_dropout_prob : 0.2; tr_fflayer_tpl.relu_dropout_prob : 0.4;"
                        "tr_fflayer_tpl.residual_dropout_prob : 0.1"};
  lv_varstore *vs[2];
  lv_params *p[2];
  lv_layer *l[2];
  for (int i = 0; i < 2; i++) {
    vs[i] = lv_varstore_create();
    l[i] = att_layer("TransformerLayer", cfg[i], vs[i], &p[i]);
    EXPECT_OK(lv_varstore_finalize(vs[i], 1));
    att_randomize_vars(vs[i], 0.4f, 5);
  }
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = att_rand(g, lv_shape3(T, B, D), 1.0f, 1), *aux = att_rand(g, lv_shape3(S, B, D), 1.0f, 2);
  lv_graph_set_training(g, false);
  lv_tensor *e0 = run_layer(l[0], g, x, aux), *e1 = run_layer(l[1], g, x, aux);
  lv_graph_set_training(g, true);
  lv_tensor *t1 = run_layer(l[1], g, x, aux);
  double diff = 0;
  for (int i = 0; i < T * B * D; i++) {
    ck_assert(lv_f32(e0)[i] == lv_f32(e1)[i]);
    diff += fabs(lv_f32(t1)[i] - lv_f32(e1)[i]);
  }
  ck_assert(diff > 1e-2);
  lv_graph_destroy(g);
  for (int i = 0; i < 2; i++) {
    lv_layer_free(l[i]);
    lv_params_free(p[i]);
    lv_varstore_destroy(vs[i]);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("transformer_layers");
  TCase *tc = tcase_create("transformer");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_transformer_variables);
  tcase_add_test(tc, test_normalized_residual);
  tcase_add_test(tc, test_causal_and_padding_masks);
  tcase_add_test(tc, test_extend_step_matches_fprop);
  tcase_add_test(tc, test_step_caches_cached_attention_matches_packing);
  tcase_add_test(tc, test_transformer_finite_differences);
  tcase_add_test(tc, test_feed_forward_layer);
  tcase_add_test(tc, test_nmap_interface_and_errors);
  tcase_add_test(tc, test_dropout_training_only);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
