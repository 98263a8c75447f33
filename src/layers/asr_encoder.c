#include "layers/asr_encoder.h"

#include <stdio.h>
#include <string.h>

#include "core/ops.h"

lv_params *lv_asr_encoder_params(void) {
  lv_params *p = lv_layer_base_params("AsrEncoder");
  LV_ASSERT(!lv_params_set_string(p, "name", "enc"));
  lv_params *lstm = lv_params_instantiate("LSTMCellSimple");
  lv_params_set_init(lstm, "uniform", 0.1);
  lv_params_define_params(p, "lstm_tpl", lstm, "Configs template for the RNN layer.");
  lv_params *cnn = lv_params_instantiate("ConvLayer");
  lv_params_set_init(cnn, "truncated_gaussian", 0.1);
  lv_params_define_params(p, "cnn_tpl", cnn, "Configs template for the conv layer.");
  lv_params *proj = lv_params_instantiate("ProjectionLayer");
  lv_params_set_init(proj, "truncated_gaussian", 0.1);
  LV_ASSERT(!lv_params_set_bool(proj, "batch_norm", true));
  LV_ASSERT(!lv_params_set_string(proj, "activation", "RELU"));
  lv_params_define_params(p, "proj_tpl", proj, "Configs template for the projection layer.");
  lv_params_define_params(p, "specaugment_network", lv_params_instantiate("SpectrumAugmenter"),
                          "Configs template for the augmentation network.");
  lv_params_define_bool(p, "use_specaugment", false, "Use specaugmentation or not.");
  lv_params_define_int(p, "specaugment_start_step", 0,
                       "lingvoc: with use_specaugment, the global step from which the masks apply (a curriculum: "
                       "the attention aligns sooner on unmasked features); 0: from the start.");
  lv_params_define_bool(p, "highway_skip", false, "If set, residual connections from different layers are gated. "
                        "Will only be used if residual_start is enabled (not implemented in lingvoc).");
  lv_pvalue *shapes = lv_pvalue_list(), *strides = lv_pvalue_list();
  int64_t s0[4] = {3, 3, 3, 32}, s1[4] = {3, 3, 32, 32}, st[2] = {2, 2};
  lv_pvalue_append(lv_pvalue_append(shapes, lv_pvalue_ints(4, s0)), lv_pvalue_ints(4, s1));
  lv_pvalue_append(lv_pvalue_append(strides, lv_pvalue_ints(2, st)), lv_pvalue_ints(2, st));
  lv_params_define_list(p, "conv_filter_shapes", shapes, "Filter shapes for each conv layer.");
  lv_params_define_list(p, "conv_filter_strides", strides, "Filter strides for each conv layer.");
  lv_pvalue *in = lv_pvalue_append(lv_pvalue_append(lv_pvalue_list(), NULL), NULL);
  lv_pvalue_append(lv_pvalue_append(in, lv_pvalue_int(80)), lv_pvalue_int(3));
  lv_params_define_list(p, "input_shape", in, "Shape of the input. This should a TensorShape with rank 4.");
  lv_params_define_int(p, "lstm_cell_size", 256, "LSTM cell size for the RNN layer.");
  lv_params_define_int(p, "num_cnn_layers", 2, "Number of conv layers to create.");
  lv_params_define_int(p, "num_conv_lstm_layers", 1, "Number of conv lstm layers to create (lingvoc: 0 only).");
  lv_params_define_int(p, "num_lstm_layers", 3, "Number of rnn layers to create");
  lv_params_define_bool(p, "project_lstm_output", true, "If True, apply a projection layer to the output of the "
                        "LSTM layer.");
  lv_params_define_bool(p, "project_after_last_lstm", false, "If True, apply a projection layer to the output of the "
                        "last LSTM layer.");
  lv_params_define_int(p, "pad_steps", 6, "Extend the input sequence by this many steps.");
  lv_params_define_int(p, "residual_start", 0, "Start residual connections from this lstm layer. Disabled if 0 or "
                       "greater than num_lstm_layers (lingvoc: 0 only).");
  lv_params_define_int(p, "residual_stride", 1, "Number of lstm layers to skip per residual connection.");
  lv_params_define_string(p, "bidi_rnn_type", "func", "Options: func. func: BidirectionalFRNN.");
  lv_params_define_int(p, "layer_index_before_stacking", -1, "The (0-based) index of the lstm layer after which "
                       "the stacking layer will be inserted. Negative value means no stacking layer (lingvoc: -1 only).");
  return p;
}

int64_t lv_asr_encoder_out_dim(const lv_asr_encoder *e) { return 2 * e->cell_dim; }

int64_t lv_asr_encoder_row_bytes(const lv_asr_encoder *e, int64_t frames) {
  int64_t t = frames + e->pad_steps, f = e->freq, c = e->channels, floats = t * f * c;
  for (int i = 0; i < e->cnn_layers; i++) {
    const lv_conv_layer *l = e->conv[i];
    int64_t to = (t + l->stride[0] - 1) / l->stride[0], fo = (f + l->stride[1] - 1) / l->stride[1];
    /* the patches of its GEMM, then the output, its batch norm and activation */
    floats += to * fo * (l->filter[0] * l->filter[1] * c + 3 * l->filter[3]);
    t = to, f = fo, c = l->filter[3];
  }
  /* per frame and direction: the input projection and gates (4 cells each), cell, output */
  floats += t * (e->lstm_in_dim + (int64_t)e->lstm_layers * 2 * 10 * e->cell_dim + 2 * e->cell_dim);
  return floats * (int64_t)sizeof(float);
}

void lv_asr_encoder_free(lv_asr_encoder *e) { lv_layer_owner_free(&e->own); }

static lv_status unsupported(const char *path, const char *key, const char *why) {
  return lv_status_make(LV_ERR_INVALID, "%s.%s: %s", path, key, why);
}

lv_status lv_asr_encoder_init(lv_asr_encoder *e, const lv_params *ep, const char *path, const char *scope,
                              lv_varstore *vs) {
  memset(e, 0, sizeof *e);
  char k[160];
  if (lv_params_int(ep, "num_conv_lstm_layers") != 0)
    return unsupported(path, "num_conv_lstm_layers", "conv-LSTM blocks are not implemented in lingvoc; set 0 (as "
                       "Librispeech960Base does)");
  if (lv_params_int(ep, "residual_start") != 0)
    return unsupported(path, "residual_start", "residual connections between encoder LSTM layers are not "
                       "implemented in lingvoc; set 0");
  if (lv_params_int(ep, "layer_index_before_stacking") >= 0)
    return unsupported(path, "layer_index_before_stacking", "stacking is not implemented in lingvoc; set -1");
  if (strcmp(lv_params_str(ep, "bidi_rnn_type"), "func"))
    return unsupported(path, "bidi_rnn_type", "only 'func' (BidirectionalFRNN) is implemented");
  const lv_pvalue *in = lv_params_list(ep, "input_shape");
  if (lv_pvalue_len(in) != 4 || !lv_pvalue_at(in, 2) || !lv_pvalue_at(in, 3) ||
      lv_pvalue_kind(lv_pvalue_at(in, 2)) != LV_PV_INT || lv_pvalue_kind(lv_pvalue_at(in, 3)) != LV_PV_INT)
    return unsupported(path, "input_shape", "expected [None, None, frequency, channels] with whole numbers");
  e->freq = lv_pvalue_as_int(lv_pvalue_at(in, 2));
  e->channels = lv_pvalue_as_int(lv_pvalue_at(in, 3));
  snprintf(k, sizeof k, "%s.input_shape", path);
  LV_TRY(lv_check_int_range(k, e->freq, 1, 1 << 16));
  LV_TRY(lv_check_int_range(k, e->channels, 1, 1 << 16));
  e->pad_steps = lv_params_int(ep, "pad_steps");
  snprintf(k, sizeof k, "%s.pad_steps", path);
  LV_TRY(lv_check_int_range(k, e->pad_steps, 0, 1 << 16));
  int64_t ncnn = lv_params_int(ep, "num_cnn_layers"), nlstm = lv_params_int(ep, "num_lstm_layers");
  snprintf(k, sizeof k, "%s.num_cnn_layers", path);
  LV_TRY(lv_check_int_range(k, ncnn, 0, LV_ASR_ENC_MAX_LAYERS));
  snprintf(k, sizeof k, "%s.num_lstm_layers", path);
  LV_TRY(lv_check_int_range(k, nlstm, 1, LV_ASR_ENC_MAX_LAYERS));
  e->cell_dim = lv_params_int(ep, "lstm_cell_size");
  snprintf(k, sizeof k, "%s.lstm_cell_size", path);
  LV_TRY(lv_check_int_range(k, e->cell_dim, 1, 1 << 20));
  const lv_pvalue *fs = lv_params_list(ep, "conv_filter_shapes"), *fst = lv_params_list(ep, "conv_filter_strides");
  /* Lingvo asserts num_cnn_layers == len(conv_filter_shapes) == len(conv_filter_strides). */
  if (lv_pvalue_len(fs) != ncnn || lv_pvalue_len(fst) != ncnn)
    return lv_status_make(LV_ERR_INVALID, "%s.conv_filter_shapes and conv_filter_strides need num_cnn_layers = %lld "
                          "entries each, got %d and %d", path, (long long)ncnn, lv_pvalue_len(fs), lv_pvalue_len(fst));
  lv_layer_owner *o = &e->own;
  if (lv_params_bool(ep, "use_specaugment")) {
    snprintf(k, sizeof k, "%s.specaugment_network", path);
    lv_params *sp = NULL;
    LV_TRY(lv_owner_params(o, lv_params_sub(ep, "specaugment_network"), k, "specaugment", &sp));
    lv_layer *l = NULL;
    LV_TRY(lv_owner_layer(o, sp, scope, vs, k, &l));
    if (strcmp(l->cls->cls, "SpectrumAugmenter"))
      return lv_status_make(LV_ERR_INVALID, "%s.cls must be SpectrumAugmenter, got %s", k, l->cls->cls);
    e->specaug = (lv_spectrum_augmenter *)l;
    e->specaug_start_step = lv_params_int(ep, "specaugment_start_step");
    if (e->specaug_start_step < 0)
      return lv_status_make(LV_ERR_INVALID, "%s.specaugment_start_step %lld: expected a step >= 0", path,
                            (long long)e->specaug_start_step);
  }
  int64_t freq = e->freq, ch = e->channels;
  for (int i = 0; i < ncnn; i++) {
    int64_t f[4], s[2];
    if (lv_pvalue_to_ints(lv_pvalue_at(fs, i), f, 4) != 4 || lv_pvalue_to_ints(lv_pvalue_at(fst, i), s, 2) != 2)
      return lv_status_make(LV_ERR_INVALID, "%s.conv_filter_shapes[%d] must be 4 ints and conv_filter_strides[%d] "
                            "2 ints", path, i, i);
    if (f[2] != ch)
      return lv_status_make(LV_ERR_INVALID, "%s.conv_filter_shapes[%d] expects %lld input channels but %s gives "
                            "%lld", path, i, (long long)f[2], i ? "the conv below" : "input_shape", (long long)ch);
    char name[32];
    snprintf(name, sizeof name, "conv_L%d", i);
    snprintf(k, sizeof k, "%s.cnn_tpl", path);
    lv_params *cp = NULL;
    LV_TRY(lv_owner_params(o, lv_params_sub(ep, "cnn_tpl"), k, name, &cp));
    LV_TRY(lv_params_set_list(cp, "filter_shape", lv_pvalue_ints(4, f)));
    LV_TRY(lv_params_set_list(cp, "filter_stride", lv_pvalue_ints(2, s)));
    lv_layer *l = NULL;
    LV_TRY(lv_owner_layer(o, cp, scope, vs, k, &l));
    if (strcmp(l->cls->cls, "ConvLayer"))
      return lv_status_make(LV_ERR_INVALID, "%s.cnn_tpl.cls must be ConvLayer, got %s", path, l->cls->cls);
    e->conv[i] = (lv_conv_layer *)l;
    e->cnn_layers = i + 1;
    freq = (freq + s[1] - 1) / s[1];
    ch = f[3];
  }
  e->conv_out_dim = freq * ch;
  e->lstm_in_dim = (e->conv_out_dim + 15) / 16 * 16;
  bool project = lv_params_bool(ep, "project_lstm_output"), after_last = lv_params_bool(ep, "project_after_last_lstm");
  for (int i = 0; i < nlstm; i++) {
    for (int d = 0; d < 2; d++) {
      char name[32];
      snprintf(name, sizeof name, "%s_rnn_L%d", d ? "bak" : "fwd", i);
      snprintf(k, sizeof k, "%s.lstm_tpl", path);
      lv_layer *c = NULL;
      LV_TRY(lv_owner_cell(o, lv_params_sub(ep, "lstm_tpl"), k, name, i ? 2 * e->cell_dim : e->lstm_in_dim,
                           e->cell_dim, scope, vs, &c));
      char view[LV_VAR_NAME_MAX + 16];
      snprintf(view, sizeof view, "%s/brnn_L%d/%s", scope, i, d ? "bak" : "fwd");
      lv_frnn_view(&e->rnn[i][d], view, c, d == 1);
    }
    e->lstm_layers = i + 1;
    if (project && (i < nlstm - 1 || after_last)) {
      char name[32];
      snprintf(name, sizeof name, "proj_L%d", i);
      snprintf(k, sizeof k, "%s.proj_tpl", path);
      lv_params *pp = NULL;
      LV_TRY(lv_owner_params(o, lv_params_sub(ep, "proj_tpl"), k, name, &pp));
      LV_TRY(lv_params_set_int(pp, "input_dim", 2 * e->cell_dim));
      LV_TRY(lv_params_set_int(pp, "output_dim", 2 * e->cell_dim));
      lv_layer *l = NULL;
      LV_TRY(lv_owner_layer(o, pp, scope, vs, k, &l));
      if (strcmp(l->cls->cls, "ProjectionLayer"))
        return lv_status_make(LV_ERR_INVALID, "%s.proj_tpl.cls must be ProjectionLayer, got %s", path, l->cls->cls);
      e->proj[i] = (lv_projection_layer *)l;
    }
  }
  return NULL;
}

static lv_tensor *concat2(lv_graph *g, lv_tensor *a, lv_tensor *b, int axis) {
  if (!a || !b) return NULL;
  lv_tensor *parts[2] = {a, b};
  return lv_op_concat(g, parts, 2, axis);
}

bool lv_asr_encoder_fprop(lv_asr_encoder *e, lv_graph *g, lv_tensor *x, lv_tensor *pads, lv_tensor **encoded,
                          lv_tensor **enc_paddings) {
  if (!x || !pads) return false;
  if (x->shape.rank != 4 || x->shape.d[2] != e->freq || x->shape.d[3] != e->channels || pads->shape.rank != 2 ||
      pads->shape.d[0] != x->shape.d[0] || pads->shape.d[1] != x->shape.d[1]) {
    char s1[96], s2[96];
    lv_graph_fail(g, "AsrEncoder: expected src_inputs [B, T, %lld, %lld] and paddings [B, T], got %s and %s",
                  (long long)e->freq, (long long)e->channels, lv_shape_str(&x->shape, s1, sizeof s1),
                  lv_shape_str(&pads->shape, s2, sizeof s2));
    return false;
  }
  const int64_t B = x->shape.d[0];
  /* Lingvo: `if p.use_specaugment and not self.do_eval` (lingvoc: from specaugment_start_step on). */
  if (e->specaug && lv_graph_is_training(g) && lv_graph_step(g) >= e->specaug_start_step)
    x = lv_spectrum_augmenter_fprop(e->specaug, g, x, pads);
  if (e->pad_steps > 0) {
    x = concat2(g, x, lv_graph_zeros(g, LV_F32, lv_shape4(B, e->pad_steps, e->freq, e->channels)), 1);
    pads = concat2(g, pads, lv_graph_fill(g, lv_shape2(B, e->pad_steps), 1.0f), 1);
  }
  for (int i = 0; x && i < e->cnn_layers; i++) {
    lv_tensor *op = NULL;
    x = lv_conv_layer_fprop_padded(e->conv[i], g, x, pads, &op);
    pads = op;
  }
  if (!x || !pads) return false;
  const int64_t T = x->shape.d[1];
  x = lv_op_reshape(g, x, lv_shape3(B, T, e->conv_out_dim));
  if (x && e->lstm_in_dim > e->conv_out_dim)
    x = concat2(g, x, lv_graph_zeros(g, LV_F32, lv_shape3(B, T, e->lstm_in_dim - e->conv_out_dim)), 2);
  static const int perm3[3] = {1, 0, 2}, perm2[2] = {1, 0};
  x = x ? lv_op_transpose(g, x, perm3) : NULL;
  lv_tensor *tp = lv_op_transpose(g, pads, perm2); /* [T', B] */
  lv_tensor *ps = tp ? lv_op_reshape(g, tp, lv_shape3(T, B, 1)) : NULL;
  if (!x || !ps) return false;
  for (int i = 0; x && i < e->lstm_layers; i++) {
    lv_tensor *o[2];
    if (!lv_frnn_run(&e->rnn[i][0], g, x, ps, NULL, &o[0], NULL) ||
        !lv_frnn_run(&e->rnn[i][1], g, x, ps, NULL, &o[1], NULL))
      return false;
    x = lv_op_concat(g, o, 2, -1);
    if (x && e->proj[i]) x = lv_projection_layer_fprop_padded(e->proj[i], g, x, ps);
  }
  /* Lingvo zeroes the padded frames of the last layer's output. */
  x = x ? lv_op_mul(g, x, lv_op_add_scalar(g, lv_op_scale(g, ps, -1.0f), 1.0f)) : NULL;
  if (!x) return false;
  *encoded = x;
  *enc_paddings = tp;
  return true;
}
