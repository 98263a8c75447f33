/* FRNN, BidirectionalFRNN, StackedFRNNLayerByLayer, StackedBiFRNNLayerByLayer (Lingvo
 * rnn_layers.py): time-major loops over a cell's steps on the define-by-run tape. */
#include "layers/rnn_layers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/attention.h"

extern const lv_layer_class lv_frnn_layer_class;
extern const lv_layer_class lv_bifrnn_layer_class;
extern const lv_layer_class lv_frnn_atten_layer_class;

/* ---- params ---------------------------------------------------------------------- */

lv_params *lv_frnn_params(void) {
  lv_params *p = lv_layer_base_params("FRNN");
  lv_params_define_params(p, "cell", lv_lstm_cell_simple_params(), "Configs for the RNN cell.");
  lv_params_define_bool(p, "reverse", false, "Whether or not to unroll the sequence in reversed order.");
  lv_params_define_bool(p, "packed_input", false,
                        "To reset states for packed inputs (not supported by lingvoc: must stay False).");
  return p;
}

lv_params *lv_bifrnn_params(void) {
  lv_params *p = lv_layer_base_params("BidirectionalFRNN");
  lv_params_define_params(p, "fwd", lv_lstm_cell_simple_params(), "Configs for the forward RNN cell.");
  lv_params_define_params(p, "bak", lv_lstm_cell_simple_params(), "Configs for the backward RNN cell.");
  lv_params_define_params(p, "rnn", lv_frnn_params(), "Config for underlying RNNs");
  lv_params_define_bool(p, "packed_input", false,
                        "To reset states for packed inputs (not supported by lingvoc: must stay False).");
  return p;
}

/* Lingvo's DropoutLayer params, as the stacks' `dropout` template. */
static lv_params *dropout_params(void) {
  lv_params *p = lv_layer_base_params("DropoutLayer");
  lv_params_define_float(p, "keep_prob", 1.0, "Keep probability.");
  lv_params_define_bool(p, "dropout_at_eval", false,
                        "Whether or not to also perform dropout at eval time (not supported by lingvoc's RNN "
                        "stacks: must stay False).");
  return p;
}

static lv_params *stacked_base_params(const char *cls) {
  lv_params *p = lv_layer_base_params(cls);
  lv_params_define_int(p, "num_layers", 1, "The number of RNN layers.");
  lv_params_define_int(p, "num_input_nodes", -1, "If >= 0, overrides cell_tpl.num_input_nodes for the first layer.");
  lv_params_define_int(p, "num_output_nodes", -1,
                       "If >= 0, overrides cell_tpl.num_output_nodes for the last layer.");
  lv_params_define_int(p, "skip_start", 1, "The first layer start skip connection.");
  lv_params_define_params(p, "cell_tpl", lv_lstm_cell_simple_params(),
                          "Configs for the RNN cell(s); the same cell config is used for all layers.");
  lv_params_define_params(p, "dropout", dropout_params(), "Dropout applied to each layer.");
  lv_params_define_bool(p, "packed_input", false,
                        "To reset states for packed inputs (not supported by lingvoc: must stay False).");
  return p;
}

lv_params *lv_stacked_frnn_params(void) {
  lv_params *p = stacked_base_params("StackedFRNNLayerByLayer");
  lv_params_define_params(p, "rnn_tpl", lv_frnn_params(), "Rnn cell default params.");
  return p;
}

lv_params *lv_stacked_bifrnn_params(void) {
  lv_params *p = stacked_base_params("StackedBiFRNNLayerByLayer");
  lv_params_define_params(p, "frnn_tpl", lv_bifrnn_params(), "Rnn cell default params.");
  return p;
}

/* ---- helpers --------------------------------------------------------------------- */

/* A copy of p[key] (which must be set) for a child; the caller owns it. */
static lv_status copy_tpl(const lv_layer *l, const lv_params *p, const char *key, lv_params **out) {
  lv_params *t = lv_params_sub(p, key);
  if (!t) return lv_status_make(LV_ERR_INVALID, "%s: %s must be set (it is None)", l->scope, key);
  *out = lv_params_copy(t);
  return *out ? NULL : lv_status_make(LV_ERR_RESOURCE, "out of memory copying %s.%s", l->scope, key);
}

static lv_status no_packed_input(const lv_layer *l) {
  if (lv_params_bool(l->p, "packed_input"))
    return lv_status_make(LV_ERR_INVALID, "%s: packed_input=True is not supported by lingvoc's %s; set it to False",
                          l->scope, lv_params_str(l->p, "cls"));
  return NULL;
}

/* paddings [T, B, 1] or [T, B] -> [T, B, 1]; NULL stays NULL. */
static lv_tensor *paddings_3d(const lv_layer *l, lv_graph *g, lv_tensor *paddings, int64_t t, int64_t b) {
  if (!paddings) return NULL;
  const lv_shape *s = &paddings->shape;
  bool ok = s->d[0] == t && s->d[1] == b && (s->rank == 2 || (s->rank == 3 && s->d[2] == 1));
  if (!ok || paddings->dtype != LV_F32) {
    char s1[96];
    lv_graph_fail(g, "%s: paddings must be float32 [T=%lld, B=%lld, 1], got %s", l->scope, (long long)t,
                  (long long)b, lv_shape_str(s, s1, sizeof s1));
    return NULL;
  }
  return s->rank == 3 ? paddings : lv_op_reshape(g, paddings, lv_shape3(t, b, 1));
}

static bool check_seq(const lv_layer *l, lv_graph *g, lv_tensor *x) {
  if (!x) return false;
  if (x->shape.rank != 3 || x->shape.d[0] < 1) {
    char s[96];
    lv_graph_fail(g, "%s: act must be time-major [T >= 1, B, D], got %s", l->scope,
                  lv_shape_str(&x->shape, s, sizeof s));
    return false;
  }
  return true;
}

/* ---- FRNN ------------------------------------------------------------------------ */

static void frnn_destroy(lv_layer *base) {
  lv_frnn_layer *l = (lv_frnn_layer *)base;
  lv_layer_free(l->cell);
  lv_params_free(l->cell_p);
  l->cell = NULL;
  l->cell_p = NULL;
}

static lv_status frnn_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_frnn_layer *l = (lv_frnn_layer *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  LV_TRY(no_packed_input(base));
  l->reverse = lv_params_bool(p, "reverse");
  LV_TRY(copy_tpl(base, p, "cell", &l->cell_p));
  const char *name = lv_params_str(l->cell_p, "name");
  if (!name || !*name) LV_TRY(lv_params_set_string(l->cell_p, "name", "cell"));
  lv_params_freeze(l->cell_p);
  char who[LV_VAR_NAME_MAX + 8];
  snprintf(who, sizeof who, "%s.cell", base->scope);
  return lv_rnn_cell_create(l->cell_p, base->scope, vs, who, &l->cell);
}

bool lv_frnn_run(lv_frnn_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings, const lv_rnn_state *state0,
                 lv_tensor **act, lv_rnn_state *final) {
  *act = NULL;
  if (!check_seq(&l->base, g, x)) return false;
  const lv_rnn_cell_class *cc = lv_rnn_cell_class_of(l->cell);
  const int64_t t_len = x->shape.d[0], b = x->shape.d[1];
  if (x->shape.d[2] != cc->input_dim(l->cell)) {
    char s[96];
    lv_graph_fail(g, "%s: act has shape %s but the cell %s takes num_input_nodes=%lld", l->base.scope,
                  lv_shape_str(&x->shape, s, sizeof s), l->cell->scope, (long long)cc->input_dim(l->cell));
    return false;
  }
  lv_tensor *pad = paddings_3d(&l->base, g, paddings, t_len, b);
  if (paddings && !pad) return false;
  lv_rnn_state s;
  if (state0) s = *state0;
  else if (!lv_rnn_cell_zero_state(l->cell, g, b, &s)) return false;
  lv_rnn_seq seq;
  if (!cc->begin(l->cell, g, x, true, &seq)) return false;
  lv_tensor **outs = malloc(sizeof *outs * (size_t)t_len);
  if (!outs) {
    lv_graph_fail(g, "%s: out of memory for %lld steps", l->base.scope, (long long)t_len);
    return false;
  }
  const int64_t out_dim = cc->output_dim(l->cell);
  bool ok = true;
  for (int64_t k = 0; ok && k < t_len; k++) {
    int64_t t = l->reverse ? t_len - 1 - k : k;
    lv_tensor *pad_t = pad ? lv_op_reshape(g, lv_op_slice(g, pad, 0, t, 1), lv_shape2(b, 1)) : NULL;
    lv_rnn_state s1;
    ok = (!pad || pad_t) && cc->step(l->cell, g, &seq, t, &s, NULL, pad_t, &s1);
    if (ok) {
      s = s1;
      outs[t] = lv_op_reshape(g, s.m, lv_shape3(1, b, out_dim));
      ok = outs[t] != NULL;
    }
  }
  if (ok) *act = t_len == 1 ? outs[0] : lv_op_concat(g, outs, (int)t_len, 0);
  if (*act) lv_op_rnn_seq_finish(g, seq.xw, *act, state0 ? state0->m : NULL, l->reverse);
  free(outs);
  if (final) *final = s;
  return *act != NULL;
}

/* A view's lv_layer: its class and scope, no params. */
static void view_base(lv_layer *b, const lv_layer_class *cls, const char *scope, const lv_layer *cell) {
  snprintf(b->scope, sizeof b->scope, "%s", scope);
  b->cls = cls;
  b->vs = cell->vs;
}

void lv_frnn_view(lv_frnn_layer *l, const char *scope, lv_layer *cell, bool reverse) {
  memset(l, 0, sizeof *l);
  view_base(&l->base, &lv_frnn_layer_class, scope, cell);
  l->cell = cell;
  l->reverse = reverse;
}

static bool frnn_fprop(lv_layer *base, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_frnn_layer *l = (lv_frnn_layer *)base;
  lv_tensor *x = lv_layer_in(base, g, in, "act");
  if (!x) return false;
  lv_rnn_state s0 = {lv_nmap_get(in, "state0.m"), lv_nmap_get(in, "state0.c")};
  if ((s0.m != NULL) != (s0.c != NULL)) {
    lv_graph_fail(g, "%s: state0.m and state0.c must be given together", base->scope);
    return false;
  }
  lv_tensor *act;
  lv_rnn_state fin;
  if (!lv_frnn_run(l, g, x, lv_nmap_get(in, "paddings"), s0.m ? &s0 : NULL, &act, &fin)) return false;
  return lv_layer_set_out(base, g, out, "act", act) && lv_layer_set_out(base, g, out, "final_state.m", fin.m) &&
         lv_layer_set_out(base, g, out, "final_state.c", fin.c);
}

static bool frnn_out_shape(const lv_layer *base, lv_shape in, lv_shape *out) {
  const lv_frnn_layer *l = (const lv_frnn_layer *)base;
  const lv_rnn_cell_class *cc = lv_rnn_cell_class_of(l->cell);
  if (in.rank != 3 || in.d[2] != cc->input_dim(l->cell)) return false;
  *out = in;
  out->d[2] = cc->output_dim(l->cell);
  return true;
}

const lv_layer_class lv_frnn_layer_class = {
    .cls = "FRNN",
    .params = lv_frnn_params,
    .size = sizeof(lv_frnn_layer),
    .create = frnn_create,
    .fprop = frnn_fprop,
    .out_shape = frnn_out_shape,
    .destroy = frnn_destroy,
};

/* ---- BidirectionalFRNN ----------------------------------------------------------- */

static void bifrnn_destroy(lv_layer *base) {
  lv_bifrnn_layer *l = (lv_bifrnn_layer *)base;
  if (l->fwd) lv_layer_free(&l->fwd->base);
  if (l->bak) lv_layer_free(&l->bak->base);
  for (int i = 0; i < 2; i++) lv_params_free(l->child_p[i]);
  memset(l->child_p, 0, sizeof l->child_p);
  l->fwd = l->bak = NULL;
}

/* An FRNN child from the `rnn` template with the cell of `cell_key`. */
static lv_status bifrnn_child(lv_bifrnn_layer *l, const lv_params *p, int dir, lv_frnn_layer **out) {
  static const char *const names[2] = {"fwd", "bak"};
  lv_params **cp = &l->child_p[dir];
  LV_TRY(copy_tpl(&l->base, p, "rnn", cp));
  lv_params *cell = NULL;
  LV_TRY(copy_tpl(&l->base, p, names[dir], &cell));
  LV_TRY(lv_params_set_params(*cp, "cell", cell));
  LV_TRY(lv_params_set_string(*cp, "name", names[dir]));
  LV_TRY(lv_params_set_bool(*cp, "reverse", dir == 1));
  LV_TRY(lv_params_set_bool(*cp, "packed_input", false));
  lv_params_freeze(*cp);
  lv_layer *c = NULL;
  LV_TRY(lv_layer_create(*cp, l->base.scope, l->base.vs, &c));
  if (c->cls != &lv_frnn_layer_class) {
    lv_layer_free(c);
    return lv_status_make(LV_ERR_INVALID, "%s: rnn.cls must be FRNN, got %s", l->base.scope, lv_params_str(*cp, "cls"));
  }
  *out = (lv_frnn_layer *)c;
  return NULL;
}

static lv_status bifrnn_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_bifrnn_layer *l = (lv_bifrnn_layer *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  LV_TRY(no_packed_input(base));
  LV_TRY(bifrnn_child(l, p, 0, &l->fwd));
  LV_TRY(bifrnn_child(l, p, 1, &l->bak));
  const lv_rnn_cell_class *f = lv_rnn_cell_class_of(l->fwd->cell), *k = lv_rnn_cell_class_of(l->bak->cell);
  if (f->input_dim(l->fwd->cell) != k->input_dim(l->bak->cell))
    return lv_status_make(LV_ERR_INVALID, "%s: fwd.num_input_nodes (%lld) and bak.num_input_nodes (%lld) differ",
                          base->scope, (long long)f->input_dim(l->fwd->cell), (long long)k->input_dim(l->bak->cell));
  return NULL;
}

lv_tensor *lv_bifrnn_run(lv_bifrnn_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings) {
  lv_tensor *o[2] = {NULL, NULL};
  if (!lv_frnn_run(l->fwd, g, x, paddings, NULL, &o[0], NULL)) return NULL;
  if (!lv_frnn_run(l->bak, g, x, paddings, NULL, &o[1], NULL)) return NULL;
  return lv_op_concat(g, o, 2, -1);
}

static bool bifrnn_fprop(lv_layer *base, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_tensor *x = lv_layer_in(base, g, in, "act");
  if (!x) return false;
  return lv_layer_set_out(base, g, out, "act",
                          lv_bifrnn_run((lv_bifrnn_layer *)base, g, x, lv_nmap_get(in, "paddings")));
}

static bool bifrnn_out_shape(const lv_layer *base, lv_shape in, lv_shape *out) {
  const lv_bifrnn_layer *l = (const lv_bifrnn_layer *)base;
  lv_shape a, b;
  if (!frnn_out_shape(&l->fwd->base, in, &a) || !frnn_out_shape(&l->bak->base, in, &b)) return false;
  *out = a;
  out->d[2] = a.d[2] + b.d[2];
  return true;
}

const lv_layer_class lv_bifrnn_layer_class = {
    .cls = "BidirectionalFRNN",
    .params = lv_bifrnn_params,
    .size = sizeof(lv_bifrnn_layer),
    .create = bifrnn_create,
    .fprop = bifrnn_fprop,
    .out_shape = bifrnn_out_shape,
    .destroy = bifrnn_destroy,
};

/* ---- StackedFRNNLayerByLayer / StackedBiFRNNLayerByLayer ------------------------- */

static void stacked_destroy(lv_layer *base) {
  lv_stacked_rnn_layer *l = (lv_stacked_rnn_layer *)base;
  for (int i = 0; i < l->n; i++) {
    if (l->rnn) lv_layer_free(l->rnn[i]);
    lv_params_free(l->child_p[i]);
  }
  free(l->rnn);
  free(l->child_p);
  lv_params_free(l->drop_p);
  l->rnn = NULL;
  l->child_p = NULL;
  l->drop_p = NULL;
  l->n = 0;
}

static int64_t cell_int(const lv_params *cell, const char *key) { return lv_params_int(cell, key); }

/* Layer i's params: an FRNN from rnn_tpl with cell "<name>_<i>", or a BidirectionalFRNN
 * from frnn_tpl with cells "f_rnn_<i>" / "b_rnn_<i>" (Lingvo's names). */
static lv_status stacked_child(lv_stacked_rnn_layer *l, int i, int64_t *feature_dim, lv_params **out) {
  const lv_params *p = l->base.p;
  lv_params *cell = NULL, *c = NULL;
  LV_TRY(copy_tpl(&l->base, p, "cell_tpl", &cell));
  lv_status s = NULL;
  char name[LV_VAR_NAME_MAX];
  if (!l->bidi) {
    if (l->num_input_nodes > 0 && i == 0) s = lv_params_set_int(cell, "num_input_nodes", l->num_input_nodes);
    if (!s && l->num_output_nodes > 0 && i == l->n - 1)
      s = lv_params_set_int(cell, "num_output_nodes", l->num_output_nodes);
    snprintf(name, sizeof name, "%s_%d", lv_params_str(p, "name"), i);
    if (!s) s = lv_params_set_string(cell, "name", name);
    if (!s) s = copy_tpl(&l->base, p, "rnn_tpl", &c);
    if (!s) s = lv_params_set_params(c, "cell", cell), cell = NULL;
    snprintf(name, sizeof name, "frnn_%d", i);
  } else {
    if (i > 0) s = lv_params_set_int(cell, "num_input_nodes", *feature_dim);
    if (!s && l->num_input_nodes > 0 && i == 0) s = lv_params_set_int(cell, "num_input_nodes", l->num_input_nodes);
    if (!s && l->num_output_nodes > 0 && i == l->n - 1)
      s = lv_params_set_int(cell, "num_output_nodes", l->num_output_nodes / 2);
    if (!s) s = copy_tpl(&l->base, p, "frnn_tpl", &c);
    for (int d = 0; !s && d < 2; d++) {
      lv_params *dc = lv_params_copy(cell);
      snprintf(name, sizeof name, "%s_rnn_%d", d ? "b" : "f", i);
      s = lv_params_set_string(dc, "name", name);
      if (!s) s = lv_params_set_params(c, d ? "bak" : "fwd", dc);
      else lv_params_free(dc);
    }
    if (!s) *feature_dim = 2 * cell_int(cell, "num_output_nodes");
    snprintf(name, sizeof name, "bidi_rnn_%d", i);
  }
  if (!s) s = lv_params_set_string(c, "name", name);
  if (!s) s = lv_params_set_bool(c, "packed_input", false);
  lv_params_free(cell);
  if (s) {
    lv_params_free(c);
    return lv_status_wrap(s, "%s: layer %d", l->base.scope, i);
  }
  lv_params_freeze(c);
  *out = c;
  return NULL;
}

static lv_status stacked_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_stacked_rnn_layer *l = (lv_stacked_rnn_layer *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  LV_TRY(no_packed_input(base));
  l->bidi = lv_params_has(p, "frnn_tpl");
  int64_t n = lv_params_int(p, "num_layers");
  if (n < 1 || n > 1024)
    return lv_status_make(LV_ERR_INVALID, "%s: num_layers must be in [1, 1024], got %lld", base->scope, (long long)n);
  l->num_input_nodes = lv_params_int(p, "num_input_nodes");
  l->num_output_nodes = lv_params_int(p, "num_output_nodes");
  l->skip_start = lv_params_int(p, "skip_start");
  if (l->bidi && l->num_output_nodes > 0 && l->num_output_nodes % 2)
    return lv_status_make(LV_ERR_INVALID, "%s: num_output_nodes must be even (split between the directions), got %lld",
                          base->scope, (long long)l->num_output_nodes);
  LV_TRY(copy_tpl(base, p, "dropout", &l->drop_p));
  const char *dn = lv_params_str(l->drop_p, "name");
  if (!dn || !*dn) LV_TRY(lv_params_set_string(l->drop_p, "name", "dropout"));
  lv_params_freeze(l->drop_p);
  double keep = lv_params_has(l->drop_p, "keep_prob") ? lv_params_float(l->drop_p, "keep_prob") : 1.0;
  if (!(keep > 0.0 && keep <= 1.0))
    return lv_status_make(LV_ERR_INVALID, "%s: dropout.keep_prob must be in (0, 1], got %g", base->scope, keep);
  if (lv_params_has(l->drop_p, "dropout_at_eval") && lv_params_bool(l->drop_p, "dropout_at_eval"))
    return lv_status_make(LV_ERR_INVALID, "%s: dropout.dropout_at_eval=True is not supported; set it to False",
                          base->scope);
  l->keep_prob = (float)keep;
  LV_TRY(lv_layer_setup(&l->drop, l->drop_p, base->scope, vs));
  l->child_p = calloc((size_t)n, sizeof *l->child_p);
  l->rnn = calloc((size_t)n, sizeof *l->rnn);
  if (!l->child_p || !l->rnn) return lv_status_make(LV_ERR_RESOURCE, "out of memory creating %s", base->scope);
  l->n = (int)n;
  int64_t feature_dim = 0;
  for (int i = 0; i < l->n; i++) LV_TRY(stacked_child(l, i, &feature_dim, &l->child_p[i]));
  const lv_layer_class *want = l->bidi ? &lv_bifrnn_layer_class : &lv_frnn_layer_class;
  for (int i = 0; i < l->n; i++) {
    LV_TRY(lv_layer_create(l->child_p[i], base->scope, vs, &l->rnn[i]));
    if (l->rnn[i]->cls != want)
      return lv_status_make(LV_ERR_INVALID, "%s: %s.cls must be %s, got %s", base->scope,
                            l->bidi ? "frnn_tpl" : "rnn_tpl", want->cls, lv_params_str(l->child_p[i], "cls"));
  }
  /* One layer's output feeds the next one's input. */
  for (int i = 0; i + 1 < l->n; i++) {
    lv_shape in = lv_shape3(1, 1, 0), o;
    const lv_layer *a = l->rnn[i], *b = l->rnn[i + 1];
    const lv_frnn_layer *fa = l->bidi ? ((const lv_bifrnn_layer *)a)->fwd : (const lv_frnn_layer *)a;
    const lv_frnn_layer *fb = l->bidi ? ((const lv_bifrnn_layer *)b)->fwd : (const lv_frnn_layer *)b;
    in.d[2] = lv_rnn_cell_class_of(fa->cell)->input_dim(fa->cell);
    LV_ASSERT(a->cls->out_shape(a, in, &o));
    int64_t next_in = lv_rnn_cell_class_of(fb->cell)->input_dim(fb->cell);
    if (o.d[2] != next_in)
      return lv_status_make(LV_ERR_INVALID, "%s: layer %d outputs %lld features but layer %d takes num_input_nodes=%lld",
                            base->scope, i, (long long)o.d[2], i + 1, (long long)next_in);
  }
  return NULL;
}

lv_tensor *lv_stacked_rnn_run(lv_stacked_rnn_layer *l, lv_graph *g, lv_tensor *x, lv_tensor *paddings) {
  lv_tensor *xs = x;
  for (int i = 0; xs && i < l->n; i++) {
    lv_tensor *ys = NULL;
    if (l->bidi) ys = lv_bifrnn_run((lv_bifrnn_layer *)l->rnn[i], g, xs, paddings);
    else if (!lv_frnn_run((lv_frnn_layer *)l->rnn[i], g, xs, paddings, NULL, &ys, NULL)) ys = NULL;
    if (ys && l->keep_prob < 1.0f && lv_graph_is_training(g))
      ys = lv_op_dropout(g, ys, l->keep_prob, l->drop.seed, lv_graph_next_stream(g));
    if (ys && lv_stacked_rnn_residual(l->skip_start, i, l->n, l->num_input_nodes, l->num_output_nodes)) {
      if (!lv_shape_eq(&ys->shape, &xs->shape)) {
        char s1[96], s2[96];
        lv_graph_fail(g, "%s: the residual of layer %d adds its input %s to its output %s: the shapes must match",
                      l->base.scope, i, lv_shape_str(&xs->shape, s1, sizeof s1), lv_shape_str(&ys->shape, s2, sizeof s2));
        return NULL;
      }
      ys = lv_op_add(g, ys, xs);
    }
    xs = ys;
  }
  return xs;
}

static bool stacked_fprop(lv_layer *base, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_tensor *x = lv_layer_in(base, g, in, "act");
  if (!x) return false;
  return lv_layer_set_out(base, g, out, "act",
                          lv_stacked_rnn_run((lv_stacked_rnn_layer *)base, g, x, lv_nmap_get(in, "paddings")));
}

static bool stacked_out_shape(const lv_layer *base, lv_shape in, lv_shape *out) {
  const lv_stacked_rnn_layer *l = (const lv_stacked_rnn_layer *)base;
  for (int i = 0; i < l->n; i++)
    if (!l->rnn[i]->cls->out_shape(l->rnn[i], in, &in)) return false;
  *out = in;
  return true;
}

const lv_layer_class lv_stacked_frnn_layer_class = {
    .cls = "StackedFRNNLayerByLayer",
    .params = lv_stacked_frnn_params,
    .size = sizeof(lv_stacked_rnn_layer),
    .create = stacked_create,
    .fprop = stacked_fprop,
    .out_shape = stacked_out_shape,
    .destroy = stacked_destroy,
};

const lv_layer_class lv_stacked_bifrnn_layer_class = {
    .cls = "StackedBiFRNNLayerByLayer",
    .params = lv_stacked_bifrnn_params,
    .size = sizeof(lv_stacked_rnn_layer),
    .create = stacked_create,
    .fprop = stacked_fprop,
    .out_shape = stacked_out_shape,
    .destroy = stacked_destroy,
};

/* ---- FRNNWithAttention ----------------------------------------------------------- */

lv_params *lv_frnn_atten_params(void) {
  lv_params *p = lv_layer_base_params("FRNNWithAttention");
  lv_params_define_params(p, "cell", lv_lstm_cell_simple_params(), "Configs for the RNN cell.");
  lv_params_define_params(p, "attention", lv_additive_attention_params(), "Attention used by this layer.");
  lv_params_define_bool(p, "output_prev_atten_ctx", false,
                        "If True, output previous attention context for each position. Otherwise, output current "
                        "attention context.");
  lv_params_define_bool(p, "input_prev_atten_ctx", true,
                        "If True, concat previous attention context and user input as input. Otherwise, this layer "
                        "will still produce attention context but will not use previous context as input.");
  lv_params_define_bool(p, "use_zero_atten_state", false,
                        "To use zero attention state instead of computing attention with zero query vector.");
  lv_params_define_int(p, "atten_context_dim", 0, "Size of attention context.");
  lv_params_define_bool(p, "packed_input", false,
                        "To reset states for packed inputs (not supported by lingvoc: must stay False).");
  return p;
}

static void frnn_atten_destroy(lv_layer *base) {
  lv_frnn_atten_layer *l = (lv_frnn_atten_layer *)base;
  lv_layer_free(l->cell);
  lv_layer_free(l->atten_layer);
  lv_params_free(l->cell_p);
  lv_params_free(l->atten_p);
  l->cell = l->atten_layer = NULL;
  l->cell_p = l->atten_p = NULL;
}

static lv_status frnn_atten_create(lv_layer *base, const lv_params *p, const char *parent_scope, lv_varstore *vs) {
  lv_frnn_atten_layer *l = (lv_frnn_atten_layer *)base;
  LV_TRY(lv_layer_setup(base, p, parent_scope, vs));
  LV_TRY(no_packed_input(base));
  l->output_prev_atten_ctx = lv_params_bool(p, "output_prev_atten_ctx");
  l->input_prev_atten_ctx = lv_params_bool(p, "input_prev_atten_ctx");
  l->use_zero_atten_state = lv_params_bool(p, "use_zero_atten_state");
  l->atten_context_dim = lv_params_int(p, "atten_context_dim");
  if (l->use_zero_atten_state && l->atten_context_dim <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: atten_context_dim must be > 0 with use_zero_atten_state, got %lld",
                          base->scope, (long long)l->atten_context_dim);
  LV_TRY(copy_tpl(base, p, "cell", &l->cell_p));
  const char *name = lv_params_str(l->cell_p, "name");
  if (!name || !*name) LV_TRY(lv_params_set_string(l->cell_p, "name", "cell"));
  lv_params_freeze(l->cell_p);
  char who[LV_VAR_NAME_MAX + 16];
  snprintf(who, sizeof who, "%s.cell", base->scope);
  LV_TRY(lv_rnn_cell_create(l->cell_p, base->scope, vs, who, &l->cell));
  LV_TRY(copy_tpl(base, p, "attention", &l->atten_p));
  name = lv_params_str(l->atten_p, "name");
  if (!name || !*name) LV_TRY(lv_params_set_string(l->atten_p, "name", "atten"));
  lv_params_freeze(l->atten_p);
  LV_TRY(lv_layer_create(l->atten_p, base->scope, vs, &l->atten_layer));
  l->atten = lv_attention_of(l->atten_layer);
  if (!l->atten)
    return lv_status_make(LV_ERR_INVALID,
                          "%s: attention.cls must be an attention class (AdditiveAttention, DotProductAttention, "
                          "MultiHeadedAttention), got %s",
                          base->scope, lv_params_str(l->atten_p, "cls"));
  const lv_rnn_cell_class *cc = lv_rnn_cell_class_of(l->cell);
  if (l->atten->query_dim != cc->output_dim(l->cell))
    return lv_status_make(LV_ERR_INVALID, "%s: attention.query_dim (%lld) must be the cell's num_output_nodes (%lld)",
                          base->scope, (long long)l->atten->query_dim, (long long)cc->output_dim(l->cell));
  return NULL;
}

lv_status lv_frnn_atten_view(lv_frnn_atten_layer *l, const char *scope, lv_layer *cell, lv_layer *atten,
                             bool output_prev_atten_ctx, bool use_zero_atten_state, int64_t atten_context_dim) {
  memset(l, 0, sizeof *l);
  view_base(&l->base, &lv_frnn_atten_layer_class, scope, cell);
  l->cell = cell;
  l->atten_layer = atten;
  l->atten = lv_attention_of(atten);
  l->output_prev_atten_ctx = output_prev_atten_ctx;
  l->input_prev_atten_ctx = true;
  l->use_zero_atten_state = use_zero_atten_state;
  l->atten_context_dim = atten_context_dim;
  const lv_rnn_cell_class *cc = lv_rnn_cell_class_of(cell);
  if (!l->atten || !cc)
    return lv_status_make(LV_ERR_INVALID, "%s: needs an RNN cell and an attention layer", scope);
  if (use_zero_atten_state && atten_context_dim <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: atten_context_dim must be > 0 with use_zero_atten_state, got %lld",
                          scope, (long long)atten_context_dim);
  if (l->atten->query_dim != cc->output_dim(cell))
    return lv_status_make(LV_ERR_INVALID, "%s: attention.query_dim (%lld) must be the cell's num_output_nodes (%lld)",
                          scope, (long long)l->atten->query_dim, (long long)cc->output_dim(cell));
  return NULL;
}

/* [B, k] per step -> [T, B, k]. */
static lv_tensor *stack_steps(lv_graph *g, lv_tensor **steps, int64_t t_len) {
  for (int64_t t = 0; t < t_len; t++) {
    if (!steps[t]) return NULL;
    steps[t] = lv_op_reshape(g, steps[t], lv_shape3(1, steps[t]->shape.d[0], steps[t]->shape.d[1]));
  }
  return t_len == 1 ? steps[0] : lv_op_concat(g, steps, (int)t_len, 0);
}

bool lv_frnn_atten_run(lv_frnn_atten_layer *l, lv_graph *g, lv_tensor *src_encs, lv_tensor *src_paddings,
                       lv_tensor *src_contexts, lv_tensor *x, lv_tensor *paddings, lv_frnn_atten_out *out) {
  memset(out, 0, sizeof *out);
  if (!check_seq(&l->base, g, x) || !src_encs) return false;
  const lv_rnn_cell_class *cc = lv_rnn_cell_class_of(l->cell);
  const int64_t t_len = x->shape.d[0], b = x->shape.d[1], d = x->shape.d[2];
  if (src_encs->shape.rank != 3 || src_encs->shape.d[1] != b) {
    char s1[96], s2[96];
    lv_graph_fail(g, "%s: src_encs must be [S, B, D] with the batch of act %s, got %s", l->base.scope,
                  lv_shape_str(&x->shape, s1, sizeof s1), lv_shape_str(&src_encs->shape, s2, sizeof s2));
    return false;
  }
  lv_tensor *pad = paddings_3d(&l->base, g, paddings, t_len, b);
  if (paddings && !pad) return false;
  lv_atten_packed src;
  if (!lv_attention_pack_source(l->atten, g, src_encs, src_contexts, src_paddings, &src)) return false;
  const int64_t s_len = src.src_len;
  lv_rnn_state s;
  if (!lv_rnn_cell_zero_state(l->cell, g, b, &s)) return false;
  lv_tensor *ctx0 = NULL, *probs0 = NULL;
  if (l->use_zero_atten_state) {
    ctx0 = lv_graph_zeros(g, LV_F32, lv_shape2(b, l->atten_context_dim));
    probs0 = lv_graph_zeros(g, LV_F32, lv_shape2(b, s_len));
  } else if (!lv_attention_compute_context(l->atten, g, &src, s.m, &ctx0, &probs0)) {
    return false;
  }
  if (!ctx0 || !probs0) return false;
  const int64_t c_dim = ctx0->shape.d[1];
  const int64_t want_in = d + (l->input_prev_atten_ctx ? c_dim : 0);
  if (cc->input_dim(l->cell) != want_in) {
    lv_graph_fail(g, "%s: the cell takes num_input_nodes=%lld but gets act depth %lld%s%lld", l->base.scope,
                  (long long)cc->input_dim(l->cell), (long long)d,
                  l->input_prev_atten_ctx ? " + attention context " : "",
                  l->input_prev_atten_ctx ? (long long)c_dim : 0LL);
    return false;
  }
  lv_rnn_seq seq;
  if (!cc->begin(l->cell, g, x, false, &seq)) return false;
  lv_tensor **buf = calloc((size_t)(3 * t_len + 2), sizeof *buf);
  if (!buf) {
    lv_graph_fail(g, "%s: out of memory for %lld steps", l->base.scope, (long long)t_len);
    return false;
  }
  /* ctxs[0] / probs[0] are the initial context; ctxs[t + 1] what step t attended. */
  lv_tensor **ms = buf, **ctxs = buf + t_len, **probs = buf + 2 * t_len + 1;
  ctxs[0] = ctx0;
  probs[0] = probs0;
  bool ok = true;
  for (int64_t t = 0; ok && t < t_len; t++) {
    lv_tensor *pad_t = pad ? lv_op_reshape(g, lv_op_slice(g, pad, 0, t, 1), lv_shape2(b, 1)) : NULL;
    lv_rnn_state s1;
    ok = (!pad || pad_t) && cc->step(l->cell, g, &seq, t, &s, l->input_prev_atten_ctx ? ctxs[t] : NULL, pad_t, &s1);
    /* Attention runs on every step, padded or not, as Lingvo's does: a padded step's
     * query is the kept m, so its context repeats the previous one. */
    if (ok) ok = lv_attention_compute_context(l->atten, g, &src, s1.m, &ctxs[t + 1], &probs[t + 1]);
    if (ok) {
      s = s1;
      ms[t] = s.m;
    }
  }
  if (ok) {
    /* output_prev_atten_ctx: position t shows the context step t consumed. */
    int64_t o = l->output_prev_atten_ctx ? 0 : 1;
    out->final = s;
    out->final_atten = ctxs[t_len];
    out->rnn_output = stack_steps(g, ms, t_len);
    out->atten_context = stack_steps(g, ctxs + o, t_len);
    out->atten_probs = stack_steps(g, probs + o, t_len);
    ok = out->rnn_output && out->atten_context && out->atten_probs;
  }
  free(buf);
  return ok;
}

static bool frnn_atten_fprop(lv_layer *base, lv_graph *g, const lv_nmap *in, lv_nmap *out) {
  lv_tensor *x = lv_layer_in(base, g, in, "act"), *src = lv_layer_in(base, g, in, "src_encs");
  if (!x || !src) return false;
  lv_frnn_atten_out o;
  if (!lv_frnn_atten_run((lv_frnn_atten_layer *)base, g, src, lv_nmap_get(in, "src_paddings"),
                         lv_nmap_get(in, "src_contexts"), x, lv_nmap_get(in, "paddings"), &o))
    return false;
  return lv_layer_set_out(base, g, out, "act", o.rnn_output) &&
         lv_layer_set_out(base, g, out, "atten_context", o.atten_context) &&
         lv_layer_set_out(base, g, out, "atten_probs", o.atten_probs) &&
         lv_layer_set_out(base, g, out, "final_state.m", o.final.m) &&
         lv_layer_set_out(base, g, out, "final_state.c", o.final.c) &&
         lv_layer_set_out(base, g, out, "final_state.atten", o.final_atten);
}

const lv_layer_class lv_frnn_atten_layer_class = {
    .cls = "FRNNWithAttention",
    .params = lv_frnn_atten_params,
    .size = sizeof(lv_frnn_atten_layer),
    .create = frnn_atten_create,
    .fprop = frnn_atten_fprop,
    .destroy = frnn_atten_destroy,
};
