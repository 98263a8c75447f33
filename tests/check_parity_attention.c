/* PyTorch parity of the attention layers (tests/parity.h): AdditiveAttention,
 * MultiHeadedAttention (dot-product and additive heads, beam-layout queries) and
 * TransformerLayer as encoder and as decoder, on padded batches with unequal lengths.
 * Outputs and every gradient (variables and inputs) must match a float64 PyTorch
 * reference (tests/parity/atten_*.py, transformer_layer.py) to 1e-5 relative. Skips with
 * a message when /usr/bin/python3 cannot import torch. */
#include <check.h>

#include "att_util.h"
#include "layers/attention.h"
#include "layers/transformer.h"
#include "parity.h"

enum { S = 6, B = 3 };
static const int kLens[B] = {6, 4, 2};

static void attention_case(const char *case_name, const char *cls, const char *overrides, int64_t ds, int64_t dq,
                           int64_t c, int n, int heads, bool additive_inner, bool use_src_as_value,
                           const char *script) {
  if (!lv_parity_have_torch()) return;
  lv_parity pp;
  lv_parity_open(&pp, case_name);
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer(cls, overrides, vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  att_randomize_vars(vs, 0.6f, 21);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *src = lv_parity_input(&pp, g, "source_vecs", lv_shape3(S, B, ds), 1.0f, 1);
  lv_tensor *cx = lv_parity_input(&pp, g, "source_contexts", lv_shape3(S, B, c), 1.0f, 2);
  lv_tensor *pads = lv_parity_paddings(&pp, g, "source_paddings", S, B, kLens, true);
  lv_tensor *q = lv_parity_input(&pp, g, "query", lv_shape2(n * B, dq), 1.0f, 3);
  lv_atten_packed pk;
  lv_tensor *ctx, *probs;
  lv_attention *a = lv_attention_of(l);
  ck_assert_msg(lv_attention_pack_source(a, g, src, cx, pads, &pk) &&
                    lv_attention_compute_context(a, g, &pk, q, &ctx, &probs),
                "%s", lv_status_msg(lv_graph_status(g)));
  lv_tensor *loss = lv_parity_output(&pp, g, "ctx", ctx, NULL, 101);
  loss = lv_parity_output(&pp, g, "probs", probs, loss, 102);
  EXPECT_OK(lv_graph_backward(g, loss));
  lv_parity_put_vars(&pp, vs);
  lv_parity_put_grad(&pp, "source_vecs", src);
  if (!use_src_as_value) lv_parity_put_grad(&pp, "source_contexts", cx);
  lv_parity_put_grad(&pp, "query", q);
  lv_parity_attr(&pp, "num_heads", heads);
  lv_parity_attr(&pp, "inner_additive", additive_inner);
  lv_parity_attr(&pp, "use_src_as_value", use_src_as_value);
  lv_parity_run(&pp, script);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}

START_TEST(parity_additive_attention) {
  attention_case("atten_additive", "AdditiveAttention", "name : 'att'; source_dim : 5; query_dim : 4; hidden_dim : 7",
                 5, 4, 3, 2, 1, false, false, "atten_additive.py");
}
END_TEST

START_TEST(parity_mha_dot) {
  attention_case("atten_mha_dot", "MultiHeadedAttention",
                 "name : 'mha'; source_dim : 6; query_dim : 5; context_dim : 4; hidden_dim : 8; "
                 "num_attention_heads : 2; use_source_vec_as_attention_value : False; enable_ctx_pre_proj : True; "
                 "enable_ctx_post_proj : True; ctx_post_proj_dim : 7",
                 6, 5, 4, 2, 2, false, false, "atten_mha.py");
}
END_TEST

START_TEST(parity_mha_additive) {
  attention_case("atten_mha_additive", "MultiHeadedAttention",
                 "name : 'mha'; source_dim : 6; query_dim : 5; context_dim : 6; hidden_dim : 8; "
                 "num_attention_heads : 4; inner_atten_params.cls : 'AdditiveAttention'",
                 6, 5, 6, 1, 4, true, true, "atten_mha.py");
}
END_TEST

static void transformer_case(bool decoder) {
  if (!lv_parity_have_torch()) return;
  enum { T = 5, D = 8, SA = 4 };
  static const int lens[B] = {5, 3, 4}, alens[B] = {4, 2, 3};
  lv_parity pp;
  lv_parity_open(&pp, decoder ? "transformer_decoder" : "transformer_encoder");
  lv_varstore *vs = lv_varstore_create();
  lv_params *p;
  lv_layer *l = att_layer("TransformerLayer",
                          decoder ? "name : 'tr'; source_dim : 8; is_decoder : True; "
                                    "tr_atten_tpl.num_attention_heads : 2; tr_fflayer_tpl.hidden_dim : 12"
                                  : "name : 'tr'; source_dim : 8; tr_atten_tpl.num_attention_heads : 2; "
                                    "tr_fflayer_tpl.hidden_dim : 12",
                          vs, &p);
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  att_randomize_vars(vs, 0.5f, 31);
  lv_graph *g = lv_graph_create(0);
  lv_tensor *x = lv_parity_input(&pp, g, "act", lv_shape3(T, B, D), 1.0f, 1);
  lv_tensor *pads = lv_parity_paddings(&pp, g, "paddings", T, B, lens, true);
  lv_tensor *aux = NULL, *aux_pads = NULL;
  if (decoder) {
    aux = lv_parity_input(&pp, g, "aux_vecs", lv_shape3(SA, B, D), 1.0f, 2);
    aux_pads = lv_parity_paddings(&pp, g, "aux_paddings", SA, B, alens, true);
  }
  lv_tensor *y, *probs;
  ck_assert_msg(lv_transformer_layer_fprop((lv_transformer_layer *)l, g, x, pads, aux, aux_pads, &y, &probs), "%s",
                lv_status_msg(lv_graph_status(g)));
  lv_tensor *loss = lv_parity_output(&pp, g, "act", y, NULL, 201);
  loss = lv_parity_output(&pp, g, "probs", probs, loss, 202);
  EXPECT_OK(lv_graph_backward(g, loss));
  lv_parity_put_vars(&pp, vs);
  lv_parity_put_grad(&pp, "act", x);
  if (decoder) lv_parity_put_grad(&pp, "aux_vecs", aux);
  lv_parity_attr(&pp, "num_heads", 2);
  lv_parity_attr(&pp, "decoder", decoder);
  lv_parity_run(&pp, "transformer_layer.py");
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}

START_TEST(parity_transformer_encoder) { transformer_case(false); }
END_TEST

START_TEST(parity_transformer_decoder) { transformer_case(true); }
END_TEST

int main(void) {
  Suite *s = suite_create("parity_attention");
  TCase *tc = tcase_create("parity");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, parity_additive_attention);
  tcase_add_test(tc, parity_mha_dot);
  tcase_add_test(tc, parity_mha_additive);
  tcase_add_test(tc, parity_transformer_encoder);
  tcase_add_test(tc, parity_transformer_decoder);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
