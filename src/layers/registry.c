/* The layer-class registry (layers.def) and the generic create / fprop front end. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/names.h"
#include "layers/layer.h"
#include "layers/qdomain.h"

#define X(sym) extern const lv_layer_class sym;
#include "layers/layers.def"
#undef X

static const lv_layer_class *const kLayers[] = {
#define X(sym) &sym,
#include "layers/layers.def"
#undef X
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void register_all(void) {
  lv_qdomain_register_all();
  for (size_t i = 0; i < LV_ARRAY_LEN(kLayers); i++) lv_registry_add(kLayers[i]->cls, kLayers[i]->params);
}

void lv_layers_register_all(void) { pthread_once(&g_once, register_all); }

const lv_layer_class *lv_layer_class_find(const char *cls) {
  for (size_t i = 0; cls && i < LV_ARRAY_LEN(kLayers); i++)
    if (!strcmp(kLayers[i]->cls, cls)) return kLayers[i];
  return NULL;
}

lv_status lv_layer_create(const lv_params *p, const char *parent_scope, lv_varstore *vs, lv_layer **out) {
  *out = NULL;
  const char *cls = lv_params_str(p, "cls");
  const lv_layer_class *c = lv_layer_class_find(cls);
  if (!c) {
    const char *names[LV_ARRAY_LEN(kLayers)];
    for (size_t i = 0; i < LV_ARRAY_LEN(kLayers); i++) names[i] = kLayers[i]->cls;
    char known[512];
    lv_names_join(names, (int)LV_ARRAY_LEN(kLayers), ", ", known, sizeof known);
    return lv_status_make(LV_ERR_INVALID, "%s%s%s.cls: \"%s\" is not a layer class (known: %s)",
                          parent_scope && *parent_scope ? parent_scope : "", parent_scope && *parent_scope ? "/" : "",
                          lv_params_str(p, "name"), cls ? cls : "", known);
  }
  lv_layer *l = calloc(1, c->size);
  if (!l) return lv_status_make(LV_ERR_RESOURCE, "out of memory creating a %s", c->cls);
  lv_status s = c->create(l, p, parent_scope, vs);
  l->cls = c;
  if (s) {
    lv_layer_free(l);
    return s;
  }
  *out = l;
  return NULL;
}

void lv_layer_free(lv_layer *l) {
  if (!l) return;
  if (l->cls && l->cls->destroy) l->cls->destroy(l);
  free(l);
}

bool lv_layer_fprop(lv_layer *l, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  if (!l->cls || !l->cls->fprop) {
    lv_graph_fail(g, "%s: layer class %s has no generic fprop", l->scope, lv_params_str(l->p, "cls"));
    return false;
  }
  return l->cls->fprop(l, g, in, out);
}

lv_tensor *lv_layer_in(const lv_layer *l, lv_graph *g, const lv_nmap *in, const char *key) {
  lv_tensor *t = NULL;
  lv_status s = lv_nmap_require(in, key, l->scope, &t);
  if (s) {
    lv_graph_fail(g, "%s", lv_status_msg(s));
    lv_status_free(s);
  }
  return t;
}

bool lv_layer_set_out(const lv_layer *l, lv_graph *g, lv_nmap *out, const char *key, lv_tensor *t) {
  if (!t) {
    lv_graph_fail(g, "%s: no `%s` output", l->scope, key); /* keeps an earlier error */
    return false;
  }
  lv_status s = lv_nmap_set(out, key, t);
  if (s) {
    lv_graph_fail(g, "%s: %s", l->scope, lv_status_msg(s));
    lv_status_free(s);
    return false;
  }
  return true;
}

lv_tensor *lv_layer_fprop_act(lv_layer *l, lv_graph *g, lv_tensor *x) {
  if (!x) return NULL;
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  lv_tensor *y = NULL;
  if (lv_layer_set_out(l, g, &in, "act", x) && lv_layer_fprop(l, g, &in, &out)) y = lv_layer_in(l, g, &out, "act");
  lv_nmap_free(&in);
  lv_nmap_free(&out);
  return y;
}
