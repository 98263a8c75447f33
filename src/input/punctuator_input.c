/* PunctuatorInput (lingvo/tasks/punctuator/input_generator.py): text lines; the model
 * learns to restore the line from its lower-cased, punctuation-free form.
 *
 * Per line (Lingvo's _ProcessLine):
 *   tgt.ids, tgt.labels, tgt.paddings = tokenizer.StringsToIds([line], target_max_length)
 *     (ids with <s>, labels with </s>, each the tokenizer's own row layout and width:
 *     tokenizer.h, lv_tok_layout); tgt.weights = 1 - tgt.paddings;
 *   src.ids (= the labels: no <s>, ends with </s>), src.paddings =
 *     tokenizer.StringsToIds([Normalize(line)], source_max_length);
 *   bucket key = round(max(sum(1 - src.paddings), sum(1 - tgt.paddings))).
 * Normalize is Lingvo's on bytes: ASCII A-Z lower-cased (bytes.lower), every byte of
 * Python's string.punctuation deleted (apostrophes and hyphens too), runs of ASCII
 * whitespace collapsed to one space and stripped at both ends (b' '.join(split())).
 * Non-ASCII bytes pass through unchanged (not lower-cased); what the tokenizer makes of
 * them (unknown pieces, U+FFFD for invalid UTF-8) is its class's rule. An empty (or
 * all-punctuation) line is kept, as in Lingvo: src = [</s>], tgt.ids = [<s>], tgt.labels
 * = [</s>] (with append_eos), key 1. Lines longer than the last bucket bound (after the
 * tokenizer's truncation to source/target_max_length) are dropped; set the max lengths
 * above the last bound (the codelab uses last bound + 2) so that truncated lines are
 * dropped rather than trained on.
 *
 * Batch: src.ids [B,S] int32, src.paddings [B,S] float, tgt.ids [B,T] int32, tgt.labels
 * [B,T] int32, tgt.paddings [B,T], tgt.weights [B,T], bucket_keys [B] int32. Padding to
 * the longest row of the batch (ids and labels 0, paddings 1, weights 0); with the
 * lingvoc param pad_to_max_seq_length, src.* to source_max_length and tgt.* to
 * target_max_length, the static shapes of Lingvo's tf.data path. Lingvo's
 * _InputPaddingValue tests key.endswith('_paddings'), which the dotted keys
 * "src.paddings" / "tgt.paddings" never match, so Lingvo pads paddings with 0 (padded
 * positions marked real); lingvoc pads them with 1.
 *
 * file_pattern: Lingvo's TextLines reads a plain glob as text, so a pattern without a
 * type prefix is read as `text:`; a `text:` prefix is accepted, any other type is an
 * error. Training, resume, evaluation and sharding: stream_input.h (TextLines' shuffle
 * buffer is file_buffer_size; a resumed run re-seeds its stream from (file_random_seed,
 * step); one sequential eval pass with a partial last batch; replica r of R reads the
 * lines at positions r mod R of the stream). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "input/punctuator_input.h"
#include "input/stream_input.h"
#include "input/tokenizer.h"

typedef struct punct_input {
  lv_stream_input st;
  lv_tokenizer *tok;
  int64_t smax, tmax;
} punct_input;

static lv_params *punct_params(void) {
  lv_tokenizer_register_all();
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "cls", "PunctuatorInput", "Class that this param object is associated with.");
  lv_params_define_string(p, "name", "input", "Name of this input generator.");
  lv_params_define_int(p, "num_samples", 0, "If non-zero, the dataset size (unused by the streaming reader).");
  lv_stream_input_define_params(p, 0, NULL, NULL);
  lv_params_define_params(p, "tokenizer", lv_tokenizer_class_find("WpmTokenizer")->params(), "Tokenizer params.");
  lv_params_define_none(p, "source_max_length", LV_PV_INT, "The maximum length of the source sequence.");
  lv_params_define_none(p, "target_max_length", LV_PV_INT, "The maximum length of the target sequence.");
  lv_params_define_bool(p, "pad_to_max_seq_length", false,
                        "lingvoc: pad src.* to source_max_length and tgt.* to target_max_length (the static "
                        "shapes of Lingvo's tf.data path) instead of to the longest row of each batch.");
  return p;
}

/* Lingvo's Normalize: bytes.lower(), delete string.punctuation, b' '.join(split()). */
lv_status lv_punctuator_normalize(const char *s, size_t n, lv_tok_str *out) {
  static const char kPunct[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  out->n = 0;
  bool pending_space = false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c != 0 && strchr(kPunct, c)) continue;
    if (lv_text_is_space(c)) {
      pending_space = out->n > 0;
      continue;
    }
    if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
    if (pending_space) LV_TRY(lv_tok_str_append(out, " ", 1));
    pending_space = false;
    LV_TRY(lv_tok_str_append(out, (const char *)&c, 1));
  }
  return NULL;
}

static float unpadded(const float *pad, int n) {
  float sum = 0;
  for (int i = 0; i < n; i++) sum += 1.0f - pad[i];
  return sum;
}

/* Reentrant (the batcher threads of a training stream and an eval pass may run it at
 * once): every buffer is its own. */
static lv_status punct_process(void *ctx, const lv_record *rec, lv_sample *out, int64_t *key) {
  const punct_input *in = ctx;
  const char *line = (const char *)rec->data;
  size_t len = rec->len;
  lv_tok_batch tgt = {0}, src = {0};
  lv_tok_str norm = {0};
  lv_status s = lv_tokenizer_strings_to_ids(in->tok, &line, &len, 1, (int)in->tmax, -1, &tgt);
  if (!s) s = lv_punctuator_normalize(line, len, &norm);
  const char *ns = norm.s ? norm.s : "";
  size_t norm_n = norm.n;
  if (!s) s = lv_tokenizer_strings_to_ids(in->tok, &ns, &norm_n, 1, (int)in->smax, -1, &src);
  free(norm.s);
  if (s) {
    lv_tok_batch_free(&tgt);
    lv_tok_batch_free(&src);
    return lv_status_wrap(s, "input.tokenizer");
  }
  float *weights = malloc(sizeof(float) * (size_t)(tgt.len + 1));
  LV_ASSERT(weights);
  for (int i = 0; i < tgt.len; i++) weights[i] = 1.0f - tgt.paddings[i];
  lv_sample_set(out, 0, src.labels, src.len);
  lv_sample_set(out, 1, src.paddings, src.len);
  lv_sample_set(out, 2, tgt.ids, tgt.len);
  lv_sample_set(out, 3, tgt.labels, tgt.len);
  lv_sample_set(out, 4, tgt.paddings, tgt.len);
  lv_sample_set(out, 5, weights, tgt.len);
  free(weights);
  float ks = unpadded(src.paddings, src.len), kt = unpadded(tgt.paddings, tgt.len);
  *key = (int64_t)nearbyintf(ks > kt ? ks : kt);
  lv_tok_batch_free(&tgt);
  lv_tok_batch_free(&src);
  return NULL;
}

static void punct_destroy(lv_input *base) {
  punct_input *in = (punct_input *)base;
  lv_stream_input_fini(&in->st);
  lv_tokenizer_destroy(in->tok);
  free(in);
}

static lv_status punct_create(const lv_params *p, lv_input_shard shard, lv_input **out) {
  *out = NULL;
  punct_input *in = calloc(1, sizeof *in);
  LV_ASSERT(in);
  char *pattern = NULL;
  lv_status s = lv_text_pattern("PunctuatorInput", lv_params_str(p, "file_pattern"), true, &pattern);
  if (!s) s = lv_stream_input_init(&in->st, "PunctuatorInput", p, shard, pattern);
  free(pattern);
  if (!s) s = lv_text_tokenizer_create(p, &in->tok);
  if (!s) s = lv_text_max_length(p, "source_max_length", in->tok, &in->smax);
  if (!s) s = lv_text_max_length(p, "target_max_length", in->tok, &in->tmax);
  bool pad = lv_params_bool(p, "pad_to_max_seq_length");
  if (!s && pad && (in->smax <= 0 || in->tmax <= 0))
    s = lv_status_make(LV_ERR_INVALID,
                       "input.pad_to_max_seq_length needs source_max_length and target_max_length > 0");
  if (s) {
    punct_destroy(&in->st.base);
    return s;
  }
  static const char *const names[6] = {"src.ids", "src.paddings", "tgt.ids", "tgt.labels", "tgt.paddings",
                                       "tgt.weights"};
  static const double pads[6] = {0, 1, 0, 0, 1, 0};
  lv_batcher_opts *o = &in->st.bopts;
  o->n_features = 6;
  for (int f = 0; f < 6; f++)
    o->features[f] = (lv_batcher_feature){names[f], (f == 1 || f >= 4) ? LV_F32 : LV_I32, pads[f],
                                          pad ? (f < 2 ? in->smax : in->tmax) : 0, lv_shape0()};
  o->process = punct_process;
  o->ctx = in;
  *out = &in->st.base;
  return NULL;
}

const lv_input_class lv_punctuator_input = {.cls = "PunctuatorInput",
                                            .params = punct_params,
                                            .create = punct_create,
                                            .train_batch = lv_stream_input_train_batch,
                                            .reset = lv_stream_input_reset,
                                            .next_eval = lv_stream_input_next_eval,
                                            .num_samples = lv_stream_input_num_samples,
                                            .batch_size = lv_stream_input_batch_size,
                                            .buffer_peak_bytes = lv_stream_input_buffer_peak_bytes,
                                            .destroy = punct_destroy};
