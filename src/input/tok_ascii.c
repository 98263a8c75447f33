/* AsciiTokenizer (Lingvo's ascii_to_token_id / id_to_ascii, lingvo/core/ops/
 * ascii_tokenizer.cc): 76 fixed ids. The string is lower-cased (ASCII only) and scanned
 * byte by byte; at each byte the special tokens <unk> <noise> <s> </s> <epsilon>
 * <text_only> <sorw> are tried in that order, else the byte maps to its character id or
 * to <unk> (0). So every byte of a non-ASCII or invalid UTF-8 character becomes one
 * <unk>, as in Lingvo. <s> and </s> in StringsToIds are always 1 and 2. */
#include <stdlib.h>
#include <string.h>

#include "input/tokenizer.h"

enum { kNumTokens = 76 };

static const char *const kTokens[kNumTokens] = {
    "<unk>", "<s>", "</s>", " ", "<noise>", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
    "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z", ".", "'", "-", ":", "!", "~", "`",
    ";", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "\"", "#", "$", "%", "&", "(", ")", "*", "+",
    ",", "/", "<", "=", ">", "?", "@", "[", "\\", "]", "^", "_", "{", "|", "}", "<epsilon>", "<text_only>",
    "<sorw>"};

static const int kSpecial[] = {0, 4, 1, 2, 73, 74, 75};

static lv_params *ascii_params(void) { return lv_tokenizer_base_params("AsciiTokenizer"); }

static lv_status ascii_create(const lv_params *p, lv_tokenizer **out) {
  (void)p;
  lv_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return lv_status_make(LV_ERR_RESOURCE, "out of memory creating an AsciiTokenizer");
  t->layout = LV_TOK_LAYOUT_ASCII_OP;
  t->sos_id = 1;
  t->eos_id = 2;
  t->unk_id = 0;
  t->num_ids = 76; /* Lingvo's ascii_to_token_id: ids 0 to 75 */
  *out = t;
  return NULL;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

static lv_status ascii_encode(const lv_tokenizer *t, const char *s, size_t n, lv_tok_ids *out) {
  (void)t;
  static int byte_id[256];
  static int init;
  if (!__atomic_load_n(&init, __ATOMIC_ACQUIRE)) {
    int tab[256];
    for (int c = 0; c < 256; c++) tab[c] = 0;
    for (int id = 0; id < kNumTokens; id++)
      if (strlen(kTokens[id]) == 1) tab[(unsigned char)kTokens[id][0]] = id;
    memcpy(byte_id, tab, sizeof tab);
    __atomic_store_n(&init, 1, __ATOMIC_RELEASE);
  }
  for (size_t i = 0; i < n; i++) {
    int id = -1;
    for (size_t k = 0; k < LV_ARRAY_LEN(kSpecial) && id < 0; k++) {
      const char *tok = kTokens[kSpecial[k]];
      size_t m = strlen(tok), j = 0;
      while (j < m && i + j < n && lower((unsigned char)s[i + j]) == tok[j]) j++;
      if (j == m) {
        id = kSpecial[k];
        i += m - 1;
      }
    }
    if (id < 0) id = byte_id[lower((unsigned char)s[i])];
    LV_TRY(lv_tok_ids_push(out, id));
  }
  return NULL;
}

static lv_status ascii_decode(const lv_tokenizer *t, const int32_t *ids, int n, char **out) {
  (void)t;
  lv_tok_str b = {0};
  LV_TRY(lv_tok_str_append(&b, "", 0));
  for (int i = 0; i < n; i++) {
    const char *tok = ids[i] >= 0 && ids[i] < kNumTokens ? kTokens[ids[i]] : kTokens[0];
    lv_status s = lv_tok_str_append(&b, tok, strlen(tok));
    if (s) {
      free(b.s);
      return s;
    }
  }
  *out = b.s;
  return NULL;
}

static void ascii_destroy(lv_tokenizer *t) { free(t); }

const lv_tokenizer_class lv_ascii_tokenizer = {
    .cls = "AsciiTokenizer",
    .params = ascii_params,
    .create = ascii_create,
    .encode = ascii_encode,
    .decode = ascii_decode,
    .destroy = ascii_destroy,
};
