/* PyTorch parity (tests/parity.h) for the embedding and softmax layers: each case builds
 * the layer, runs forward and backward on a padded batch, and a reference written in
 * PyTorch (tests/parity/<case>.py) recomputes outputs and every gradient in float64. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "layers/layer.h"
#include "parity.h"

/* A layer of class cls from its registered defaults with the int/string settings given
 * ("key=value" strings; values that parse as numbers are set as ints, "True"/"False" as
 * bools, else as floats when they hold a '.', else as strings). */
static lv_params *layer_params(const char *cls, const char *const *settings) {
  lv_layers_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  for (int i = 0; settings[i]; i++) {
    char key[128];
    const char *eq = strchr(settings[i], '=');
    ck_assert(eq && (size_t)(eq - settings[i]) < sizeof key);
    memcpy(key, settings[i], (size_t)(eq - settings[i]));
    key[eq - settings[i]] = 0;
    const char *v = eq + 1;
    char *end;
    if (!strcmp(v, "True") || !strcmp(v, "False")) {
      EXPECT_OK(lv_params_set_bool(p, key, !strcmp(v, "True")));
    } else if (strchr(v, '.') && (strtod(v, &end), *end == 0)) {
      EXPECT_OK(lv_params_set_float(p, key, strtod(v, NULL)));
    } else if ((strtoll(v, &end, 10), *end == 0) && *v) {
      EXPECT_OK(lv_params_set_int(p, key, strtoll(v, NULL, 10)));
    } else {
      EXPECT_OK(lv_params_set_string(p, key, v));
    }
  }
  lv_params_freeze(p);
  return p;
}

typedef struct {
  lv_params *p;
  lv_varstore *vs;
  lv_layer *l;
  lv_graph *g;
} fixture;

static void fixture_open(fixture *f, const char *cls, const char *const *settings, uint64_t seed) {
  f->p = layer_params(cls, settings);
  f->vs = lv_varstore_create();
  EXPECT_OK(lv_layer_create(f->p, NULL, f->vs, &f->l));
  EXPECT_OK(lv_varstore_finalize(f->vs, seed));
  lv_varstore_zero_grads(f->vs);
  f->g = lv_graph_create(0);
}

static void fixture_close(fixture *f) {
  lv_graph_destroy(f->g);
  lv_layer_free(f->l);
  lv_varstore_destroy(f->vs);
  lv_params_free(f->p);
}

static void backward(fixture *f, lv_tensor *loss) {
  lv_status s = lv_graph_status(f->g);
  ck_assert_msg(!s, "%s", s ? lv_status_msg(s) : "");
  EXPECT_OK(lv_graph_backward(f->g, loss));
}

/* FCLayer on [B, T, D] with a TANH activation: validates the harness itself. */
START_TEST(test_parity_fc_layer) {
  if (!lv_parity_have_torch()) return;
  fixture f;
  fixture_open(&f, "FCLayer", (const char *const[]){"name=fc", "input_dim=5", "output_dim=3", "activation=TANH",
                                                     "params_init.method=gaussian", "params_init.scale=0.5", NULL}, 7);
  lv_parity p;
  lv_parity_open(&p, "fc_layer");
  lv_tensor *x = lv_parity_input(&p, f.g, "act", lv_shape3(2, 4, 5), 1.0f, 1);
  lv_tensor *y = lv_layer_fprop_act(f.l, f.g, x);
  lv_tensor *loss = lv_parity_output(&p, f.g, "act", y, NULL, 2);
  backward(&f, loss);
  lv_parity_put_grad(&p, "act", x);
  lv_parity_put_vars(&p, f.vs);
  lv_parity_run(&p, "fc_layer.py");
  fixture_close(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("parity_embedding");
  TCase *tc = tcase_create("parity");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_parity_fc_layer);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
