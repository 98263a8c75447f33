/* LmInput (lingvo/tasks/lm/input_generator.py): plain text, one example per record
 * (usually `text:` files; Lingvo's GenericInput reads any record type, and so does this:
 * a pattern without a type prefix is TFRecord, as there).
 *
 * Per record (Lingvo's ReadInput): the line and word_count = the number of
 * whitespace-separated words (tf.strings.split: runs of ASCII space, \t, \n, \v, \f, \r
 * separate, empty words do not count); the bucket key is Lingvo's `strlen` =
 * size(strings.split([line], '')), and StringSplitV2 with an empty separator splits on
 * whitespace too, so the key is also the word count (not the byte count). Lines whose
 * key is above the last bucket bound are dropped; an empty line is kept (key 0, one
 * row of just </s>).
 *
 * Batch (Lingvo's BuildInputBatch): the lines of a batch go through the tokenizer's
 * StringsToIds(lines, target_max_length) together, so the layout is exactly the
 * tokenizer class's (tokenizer.h, lv_tok_layout): ids [B,L] int32 (with <s>), labels
 * [B,L] int32 (with </s>), paddings [B,L] float; weights = 1 - paddings; word_count [B]
 * int32; bucket_keys [B] int32; and lingvoc's text [B] string, the lines themselves
 * (host only, for scoring and decoding to read). A NUL byte is an error (string tensors
 * hold C strings, which would cut the line there): a `text:` file's names the file and
 * line (record_yielder.h), a TFRecord's the file and offset; skip_corrupt_records skips
 * such a line or record instead. L is target_max_length when the tokenizer's
 * pad_to_max_length is true (the default of every tokenizer, and what Lingvo's LmInput
 * relies on: it forces pad_to_max_seq_length, which its batch does not otherwise read;
 * that param and fixed_input_shape are kept for configs and have no effect here), else
 * the longest row of the batch. Default tokenizer: AsciiTokenizer (lines longer than
 * target_max_length - 1 characters are cut, as the tokenizer does). Before tokenizing, a
 * line is cut to its first 64 x target_max_length bytes (its word count, the bucket key,
 * is the whole line's): the ids are the same unless its first target_max_length ids
 * would stand for more than that, and memory stays bounded whatever a line's length; the
 * text feature is the line so cut (a SentencePiece tokenizer without a target_max_length
 * reads lines whole). Non-ASCII and
 * invalid UTF-8 bytes become what the tokenizer makes of them (AsciiTokenizer: <unk>).
 *
 * Training, resume, evaluation and sharding: stream_input.h (a resumed run re-seeds its
 * stream from (file_random_seed, step); one sequential eval pass with a partial last
 * batch; replica r of R reads the records at positions r mod R of the stream). */
#include <stdlib.h>
#include <string.h>

#include "input/stream_input.h"
#include "input/tokenizer.h"

/* The bytes kept per id of target_max_length: at least the longest text one id stands for
 * (AsciiTokenizer's <text_only> is 11 bytes; word pieces are far shorter than 64). */
#define LV_LM_BYTES_PER_ID 64

typedef struct lm_input {
  lv_stream_input st;
  lv_tokenizer *tok;
  int64_t tmax;
} lm_input;

static lv_params *lm_params(void) {
  lv_tokenizer_register_all();
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "cls", "LmInput", "Class that this param object is associated with.");
  lv_params_define_string(p, "name", "input", "Name of this input generator.");
  lv_params_define_int(p, "num_samples", 0, "If non-zero, the dataset size (unused by the streaming reader).");
  int64_t bub = 2560, bbl = 8;
  lv_stream_input_define_params(p, 1, &bub, &bbl);
  lv_params_define_none(p, "source_max_length", LV_PV_INT, "The maximum length of the source sequence.");
  lv_params_define_int(p, "target_max_length", 300, "The maximum length of the target sequence.");
  lv_params_define_bool(p, "pad_to_max_seq_length", false,
                        "If True, input tensors will be padded to source/target_max_length (LmInput forces "
                        "it; the width comes from the tokenizer's pad_to_max_length).");
  lv_params_define_params(p, "tokenizer", lv_tokenizer_class_find("AsciiTokenizer")->params(), "Tokenizer params.");
  lv_params_define_bool(p, "fixed_input_shape", false, "Fixed input shape or not (no effect in lingvoc).");
  lv_params_define_bool(p, "skip_corrupt_records", false,
                        "lingvoc: skip (and count) corrupt records instead of failing.");
  return p;
}

/* The processor and the finish step are reentrant (the batcher threads of a training
 * stream and an eval pass may run them at once): every buffer is their own. */
static lv_status lm_process(void *ctx, const lv_record *rec, lv_sample *out, int64_t *key) {
  const lm_input *in = ctx;
  const uint8_t *nul = memchr(rec->data, 0, rec->len);
  if (nul)
    return lv_status_make(LV_ERR_CORRUPT, "a NUL byte at byte %zu of the record (expected UTF-8 text)",
                          (size_t)(nul - rec->data) + 1);
  const size_t len = rec->len;
  if (len > INT32_MAX / 4) return lv_status_make(LV_ERR_INVALID, "a record of %zu bytes is too long", len);
  int32_t wc = rec->words >= 0 ? (int32_t)rec->words : lv_text_count_words(rec->data, len);
  /* Only the start the tokenizer's first target_max_length ids can come from is kept
   * (LV_LM_BYTES_PER_ID bytes an id): a line of megabytes costs its text once here,
   * not per copy and per id. */
  const size_t keep = in->tmax > 0 ? (size_t)in->tmax * LV_LM_BYTES_PER_ID : len; /* 0: SentencePiece, no cut */
  lv_sample_set_str(out, 0, (const char *)rec->data, len < keep ? len : keep);
  lv_sample_set(out, 1, &wc, 1);
  *key = wc;
  return NULL;
}

/* The batcher's batch of lines (raw: text [B] string, word_count [B,1], bucket_keys [B])
 * -> Lingvo's LM batch in out, plus the text. */
static lv_status lm_finish(void *ctx, const lv_batch *raw, lv_batch_store *out) {
  const lm_input *in = ctx;
  const lv_tensor *text = lv_batch_get(raw, "text"), *wc = lv_batch_get(raw, "word_count");
  const lv_tensor *keys = lv_batch_get(raw, "bucket_keys");
  LV_ASSERT(text && text->dtype == LV_STRING && wc && keys);
  const int64_t B = raw->size;
  const char **strs = malloc(sizeof(char *) * (size_t)(B + 1));
  size_t *lens = malloc(sizeof(size_t) * (size_t)(B + 1));
  LV_ASSERT(strs && lens);
  for (int64_t b = 0; b < B; b++) {
    strs[b] = lv_tensor_str(text, b);
    lens[b] = strlen(strs[b]);
  }
  lv_tok_batch tb = {0};
  lv_status s = lv_tokenizer_strings_to_ids(in->tok, strs, lens, (int)B, (int)in->tmax, -1, &tb);
  free(strs);
  free(lens);
  if (s) return lv_status_wrap(s, "input.tokenizer");
  const int64_t L = tb.len;
  lv_tensor *ids, *labels, *paddings, *weights, *word_count, *bucket_keys;
  s = lv_batch_store_add(out, "ids", LV_I32, lv_shape2(B, L), &ids);
  if (!s) s = lv_batch_store_add(out, "labels", LV_I32, lv_shape2(B, L), &labels);
  if (!s) s = lv_batch_store_add(out, "paddings", LV_F32, lv_shape2(B, L), &paddings);
  if (!s) s = lv_batch_store_add(out, "weights", LV_F32, lv_shape2(B, L), &weights);
  if (!s) s = lv_batch_store_add(out, "word_count", LV_I32, lv_shape1(B), &word_count);
  if (!s) s = lv_batch_store_add(out, "bucket_keys", LV_I32, lv_shape1(B), &bucket_keys);
  if (!s) s = lv_batch_store_add_copy(out, "text", text, NULL);
  if (!s) {
    memcpy(ids->data, tb.ids, sizeof(int32_t) * (size_t)(B * L));
    memcpy(labels->data, tb.labels, sizeof(int32_t) * (size_t)(B * L));
    memcpy(paddings->data, tb.paddings, sizeof(float) * (size_t)(B * L));
    for (int64_t i = 0; i < B * L; i++) lv_f32(weights)[i] = 1.0f - tb.paddings[i];
    memcpy(word_count->data, wc->data, sizeof(int32_t) * (size_t)B);
    memcpy(bucket_keys->data, keys->data, sizeof(int32_t) * (size_t)B);
    out->batch.size = B;
  }
  lv_tok_batch_free(&tb);
  return s;
}

static void lm_destroy(lv_input *base) {
  lm_input *in = (lm_input *)base;
  lv_stream_input_fini(&in->st);
  lv_tokenizer_destroy(in->tok);
  free(in);
}

static lv_status lm_create(const lv_params *p, lv_input_shard shard, lv_input **out) {
  *out = NULL;
  lm_input *in = calloc(1, sizeof *in);
  LV_ASSERT(in);
  char *pattern = NULL;
  lv_status s = lv_text_pattern("LmInput", lv_params_str(p, "file_pattern"), false, &pattern);
  if (!s) s = lv_stream_input_init(&in->st, "LmInput", p, shard, pattern);
  free(pattern);
  if (!s) s = lv_text_tokenizer_create(p, &in->tok);
  if (!s) s = lv_text_max_length(p, "target_max_length", in->tok, &in->tmax);
  if (!s) in->st.yopts.text_keep = in->tmax > 0 ? (size_t)in->tmax * LV_LM_BYTES_PER_ID : 0;
  if (s) {
    lm_destroy(&in->st.base);
    return s;
  }
  lv_batcher_opts *o = &in->st.bopts;
  o->n_features = 2;
  o->features[0] = (lv_batcher_feature){"text", LV_STRING, 0, 0, lv_shape0()};
  o->features[1] = (lv_batcher_feature){"word_count", LV_I32, 0, 0, lv_shape0()};
  o->process = lm_process;
  o->ctx = in;
  in->st.finish = lm_finish;
  *out = &in->st.base;
  return NULL;
}

const lv_input_class lv_lm_input = {.cls = "LmInput",
                                    .params = lm_params,
                                    .create = lm_create,
                                    .train_batch = lv_stream_input_train_batch,
                                    .reset = lv_stream_input_reset,
                                    .next_eval = lv_stream_input_next_eval,
                                    .num_samples = lv_stream_input_num_samples,
                                    .batch_size = lv_stream_input_batch_size,
                                    .buffer_peak_bytes = lv_stream_input_buffer_peak_bytes,
                                    .destroy = lm_destroy};
