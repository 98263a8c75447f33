/* VocabFileTokenizer (Lingvo's str_to_vocab_tokens / ngram_id_to_token with the vocab of
 * lingvo/core/ops/simple_vocab.cc).
 *
 * Vocab file: one token per line; with load_token_ids_from_vocab "token<TAB>id", else the
 * id is the number of non-empty lines before it. Empty lines are skipped; a later line
 * with the same token wins. The vocab must hold <s>, </s> and <unk>, or (consistently)
 * <S>, </S> and <UNK>; their ids, not target_*_id, go into StringsToIds, as in Lingvo.
 * Encode splits on any byte of tokens_delimiter, dropping pieces that are empty or all
 * ASCII whitespace, or into single bytes when the delimiter is ''; tokens not in the
 * vocab (invalid UTF-8 included: bytes are compared as they are) become <unk>.
 * Decode joins the tokens with tokens_delimiter (ngram_separator for an ngram vocab);
 * an unknown id decodes to <unk>. Unlike Lingvo, which re-reads the vocab by line
 * number for IdsToStrings, decode uses the same ids as encode. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "input/tokenizer.h"

enum { kMaxVocabId = 1 << 26 };

typedef struct {
  lv_tokenizer base;
  lv_tok_vocab *vocab;
  bool ngram;              /* loaded from ngram_vocab_filepath: no StringsToIds */
  const char *delimiter;   /* split / join text */
  const char *unk_token;   /* "<unk>" or "<UNK>" */
} vocab_tokenizer;

static lv_params *vocab_params(void) {
  lv_params *p = lv_tokenizer_base_params("VocabFileTokenizer");
  lv_params_define_none(p, "token_vocab_filepath", LV_PV_STRING,
                        "If set, specifies a filepath to the token vocab file.");
  lv_params_define_none(p, "ngram_vocab_filepath", LV_PV_STRING,
                        "If set, specifies a filepath to the Ngram vocab file.");
  lv_params_define_string(p, "ngram_separator", "", "string separator to use when joining ngrams.");
  lv_params_define_string(p, "tokens_delimiter", " ", "The delimiter to split a string to tokens with.");
  lv_params_define_bool(p, "load_token_ids_from_vocab", true,
                        "Whether token ids are present in vocab (i.e. vocab contains two colums, one for IDs and "
                        "one for words).  If false, line numbers are used.");
  return p;
}

static void vocab_destroy(lv_tokenizer *t) {
  vocab_tokenizer *v = (vocab_tokenizer *)t;
  lv_tok_vocab_free(v->vocab);
  free(v);
}

/* Parses a whole decimal int (optional sign) in s[0..n). */
static bool parse_id(const char *s, size_t n, long *out) {
  if (!n || n > 12) return false;
  char buf[16];
  memcpy(buf, s, n);
  buf[n] = 0;
  char *end;
  errno = 0;
  long v = strtol(buf, &end, 10);
  if (errno || *end || !(isdigit((unsigned char)buf[0]) || buf[0] == '-' || buf[0] == '+')) return false;
  *out = v;
  return true;
}

static lv_status load_vocab(vocab_tokenizer *v, const char *key, const char *path, bool load_ids) {
  char *data;
  size_t len;
  lv_status s = lv_file_read_all(path, &data, &len);
  if (s) return lv_status_wrap(s, "tokenizer.%s", key);
  long next_id = 0;
  int line = 0;
  for (size_t pos = 0; pos < len && !s;) {
    line++;
    const char *l = data + pos;
    const char *nl = memchr(l, '\n', len - pos);
    size_t ln = nl ? (size_t)(nl - l) : len - pos;
    pos += ln + 1;
    if (!ln) continue;
    const char *tab = memchr(l, '\t', ln);
    size_t tn = tab ? (size_t)(tab - l) : ln;
    long id = next_id++;
    if (load_ids) {
      const char *f = tab ? tab + 1 : NULL;
      size_t fn = f ? ln - tn - 1 : 0;
      const char *tab2 = f ? memchr(f, '\t', fn) : NULL;
      if (tab2) fn = (size_t)(tab2 - f);
      if (!f || !parse_id(f, fn, &id))
        s = lv_status_make(LV_ERR_CORRUPT,
                           "tokenizer.%s: %s:%d: expected \"token<TAB>id\" with an integer id "
                           "(load_token_ids_from_vocab is True), found \"%.*s\"",
                           key, path, line, (int)(ln > 60 ? 60 : ln), l);
    }
    if (!s && (id < 0 || id >= kMaxVocabId))
      s = lv_status_make(LV_ERR_CORRUPT, "tokenizer.%s: %s:%d: id %ld is outside [0, %d)", key, path, line, id,
                         kMaxVocabId);
    if (!s) s = lv_tok_vocab_add(v->vocab, l, tn, (int32_t)id);
  }
  free(data);
  if (s) return s;
  static const char *const lowers[3] = {"<s>", "</s>", "<unk>"}, *const uppers[3] = {"<S>", "</S>", "<UNK>"};
  bool upper = lv_tok_vocab_find(v->vocab, "<s>", 3) < 0;
  const char *const *want = upper ? uppers : lowers, *const *unwanted = upper ? lowers : uppers;
  for (int i = 0; i < 3; i++) {
    if (lv_tok_vocab_find(v->vocab, want[i], strlen(want[i])) < 0)
      return lv_status_make(LV_ERR_CORRUPT, "tokenizer.%s: %s: %s is not found in the vocab (it needs %s, %s, %s)",
                            key, path, want[i], want[0], want[1], want[2]);
    if (lv_tok_vocab_find(v->vocab, unwanted[i], strlen(unwanted[i])) >= 0)
      return lv_status_make(LV_ERR_CORRUPT, "tokenizer.%s: %s: invalid token %s is found in the vocab (it uses %s)",
                            key, path, unwanted[i], want[i]);
  }
  v->base.sos_id = lv_tok_vocab_find(v->vocab, want[0], strlen(want[0]));
  v->base.eos_id = lv_tok_vocab_find(v->vocab, want[1], strlen(want[1]));
  v->base.unk_id = lv_tok_vocab_find(v->vocab, want[2], strlen(want[2]));
  v->unk_token = want[2];
  return NULL;
}

static lv_status vocab_create(const lv_params *p, lv_tokenizer **out) {
  bool tok = lv_params_is_set(p, "token_vocab_filepath"), ngram = lv_params_is_set(p, "ngram_vocab_filepath");
  if (tok == ngram)
    return lv_status_make(LV_ERR_INVALID,
                          "tokenizer: Exactly one vocab file should be specified! (token_vocab_filepath and "
                          "ngram_vocab_filepath are both %s)",
                          tok ? "set" : "None");
  vocab_tokenizer *v = calloc(1, sizeof *v);
  if (!v || !(v->vocab = lv_tok_vocab_new())) {
    free(v);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory creating a VocabFileTokenizer");
  }
  v->base.layout = LV_TOK_LAYOUT_VOCAB_OP;
  v->ngram = ngram;
  v->delimiter = lv_params_str(p, tok ? "tokens_delimiter" : "ngram_separator");
  const char *key = tok ? "token_vocab_filepath" : "ngram_vocab_filepath";
  lv_status s = load_vocab(v, key, lv_params_str(p, key), tok ? lv_params_bool(p, "load_token_ids_from_vocab") : false);
  if (s) {
    vocab_destroy(&v->base);
    return s;
  }
  v->base.num_ids = lv_tok_vocab_num_ids(v->vocab);
  *out = &v->base;
  return NULL;
}

static bool all_space(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)s[i])) return false;
  return true;
}

static lv_status vocab_encode(const lv_tokenizer *t, const char *s, size_t n, lv_tok_ids *out) {
  const vocab_tokenizer *v = (const vocab_tokenizer *)t;
  if (v->ngram) return lv_status_make(LV_ERR_INVALID, "VocabFileTokenizer: ngram vocab StringsToIds is not supported.");
  const char *d = v->delimiter;
  size_t dn = strlen(d);
  if (!dn) {
    for (size_t i = 0; i < n; i++) {
      int32_t id = lv_tok_vocab_find(v->vocab, s + i, 1);
      LV_TRY(lv_tok_ids_push(out, id < 0 ? t->unk_id : id));
    }
    return NULL;
  }
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && !memchr(d, s[i], dn)) continue;
    if (!all_space(s + start, i - start)) {
      int32_t id = lv_tok_vocab_find(v->vocab, s + start, i - start);
      LV_TRY(lv_tok_ids_push(out, id < 0 ? t->unk_id : id));
    }
    start = i + 1;
  }
  return NULL;
}

static lv_status vocab_decode(const lv_tokenizer *t, const int32_t *ids, int n, char **out) {
  const vocab_tokenizer *v = (const vocab_tokenizer *)t;
  lv_tok_str b = {0};
  lv_status s = lv_tok_str_append(&b, "", 0);
  for (int i = 0; i < n && !s; i++) {
    size_t pn;
    const char *piece = lv_tok_vocab_piece(v->vocab, ids[i], &pn);
    if (!piece) piece = v->unk_token, pn = strlen(piece);
    if (i) s = lv_tok_str_append(&b, v->delimiter, strlen(v->delimiter));
    if (!s) s = lv_tok_str_append(&b, piece, pn);
  }
  if (s) {
    free(b.s);
    return s;
  }
  *out = b.s;
  return NULL;
}

const lv_tokenizer_class lv_vocab_file_tokenizer = {
    .cls = "VocabFileTokenizer",
    .params = vocab_params,
    .create = vocab_create,
    .encode = vocab_encode,
    .decode = vocab_decode,
    .destroy = vocab_destroy,
};
