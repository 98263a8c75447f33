#include "input/inspect_input.h"

#include <stdlib.h>
#include <string.h>

#include "input/input.h"
#include "input/tokenizer.h"

#define SHOW_VALUES 24

/* The first example's values of t ([B, ...] host memory): up to SHOW_VALUES of them. */
static void print_first(FILE *out, const lv_tensor *t) {
  int64_t per = t->shape.rank > 0 && t->shape.d[0] > 0 ? lv_tensor_numel(t) / t->shape.d[0] : lv_tensor_numel(t);
  int64_t n = per < SHOW_VALUES ? per : SHOW_VALUES;
  fputs("[", out);
  for (int64_t i = 0; i < n; i++) {
    if (i) fputs(" ", out);
    switch (t->dtype) {
      case LV_F32: fprintf(out, "%g", (double)lv_f32(t)[i]); break;
      case LV_I32: fprintf(out, "%d", lv_i32(t)[i]); break;
      case LV_I64: fprintf(out, "%lld", (long long)lv_i64(t)[i]); break;
      case LV_U8: fprintf(out, "%u", lv_u8(t)[i]); break;
      case LV_STRING: { /* quoted, cut at 60 bytes */
        const char *v = lv_str(t)[i] ? lv_str(t)[i] : "";
        size_t len = strlen(v);
        fprintf(out, "\"%.*s%s\"", len > 60 ? 60 : (int)len, v, len > 60 ? "..." : "");
        break;
      }
      default: fputs("?", out); break;
    }
  }
  fprintf(out, "%s]", per > n ? " ..." : "");
}

/* The first example's ids of key decoded back to text (its unpadded part, from
 * paddings_key), when the input has a tokenizer. */
static void print_text(FILE *out, const lv_tokenizer *tok, int32_t eos, const lv_batch *b, const char *key,
                       const char *paddings_key) {
  lv_tensor *ids = lv_batch_get(b, key), *pad = lv_batch_get(b, paddings_key);
  if (!ids || ids->dtype != LV_I32 || ids->shape.rank != 2 || ids->shape.d[0] < 1) return;
  int64_t w = ids->shape.d[1], n = 0;
  for (int64_t j = 0; j < w; j++)
    if (!pad || pad->dtype != LV_F32 || lv_tensor_numel(pad) < w || lv_f32(pad)[j] < 0.5f) n = j + 1;
  if (n > 0 && lv_i32(ids)[n - 1] == eos) n--; /* the sentence, without its </s> */
  char *text = NULL;
  lv_status s = lv_tokenizer_decode(tok, lv_i32(ids), (int)n, &text);
  if (s) {
    fprintf(out, "  %-16s (cannot decode: %s)\n", key, lv_status_msg(s));
    lv_status_free(s);
    return;
  }
  fprintf(out, "  %-16s text: \"%s\"\n", key, text);
  free(text);
}

static void print_batch(FILE *out, int64_t index, const lv_batch *b) {
  fprintf(out, "batch %lld: %lld examples\n", (long long)index, (long long)b->size);
  int n = lv_nmap_count(&b->map);
  int *order = malloc(sizeof *order * (size_t)(n ? n : 1));
  if (!order) return;
  lv_nmap_sorted(&b->map, order);
  for (int k = 0; k < n; k++) {
    const lv_nmap_entry *e = lv_nmap_at(&b->map, order[k]);
    char shape[128];
    fprintf(out, "  %-16s %-8s %-16s first: ", e->key, lv_dtype_names[e->t->dtype],
            lv_shape_str(&e->t->shape, shape, sizeof shape));
    print_first(out, e->t);
    fputs("\n", out);
  }
  lv_tensor *keys = lv_batch_get(b, "bucket_keys");
  if (keys && keys->dtype == LV_I32 && lv_tensor_numel(keys) > 0) {
    int32_t lo = lv_i32(keys)[0], hi = lo;
    for (int64_t i = 1; i < lv_tensor_numel(keys); i++) {
      lo = lv_i32(keys)[i] < lo ? lv_i32(keys)[i] : lo;
      hi = lv_i32(keys)[i] > hi ? lv_i32(keys)[i] : hi;
    }
    fprintf(out, "  bucket keys %d..%d\n", lo, hi);
  }
  free(order);
}

lv_status lv_inspect_input(const lv_params *cfg, int64_t nbatches, bool train, FILE *out) {
  if (nbatches < 1) return lv_status_make(LV_ERR_INVALID, "--inspect_input_batches must be >= 1");
  const lv_params *ip = lv_params_sub(cfg, "input");
  lv_input *in = NULL;
  LV_TRY(lv_input_create(ip, lv_input_no_shard(), &in));
  fprintf(out, "input %s (%s), %s batches, batch size %lld\n", lv_params_str(ip, "cls"), lv_params_str(ip, "name"),
          train ? "training" : "eval", (long long)lv_input_batch_size(in));
  /* The first example decoded back to text where the input has a tokenizer. */
  lv_tokenizer *tok = NULL;
  if (lv_params_has(ip, "tokenizer") && lv_params_sub(ip, "tokenizer")) {
    lv_status ts = lv_tokenizer_create(lv_params_sub(ip, "tokenizer"), &tok);
    if (ts) {
      fprintf(out, "(no text: %s)\n", lv_status_msg(ts));
      lv_status_free(ts);
    }
  }
  lv_batch b;
  lv_batch_init(&b);
  lv_status s = train ? NULL : lv_input_reset(in);
  for (int64_t i = 0; !s && i < nbatches; i++) {
    bool done = false;
    s = train ? lv_input_train_batch(in, i, &b) : lv_input_next_eval(in, &b, &done);
    if (s || done) break;
    print_batch(out, i, &b);
    if (tok) {
      int32_t eos = (int32_t)lv_params_int(lv_params_sub(ip, "tokenizer"), "target_eos_id");
      print_text(out, tok, eos, &b, "src.ids", "src.paddings");
      print_text(out, tok, eos, &b, "tgt.labels", "tgt.paddings");
      print_text(out, tok, eos, &b, "labels", "paddings");
    }
  }
  lv_tokenizer_destroy(tok);
  lv_batch_free(&b);
  lv_input_destroy(in);
  return s;
}
