/* WpmTokenizer (Lingvo's lingvo/core/wpm_encoder.py WpmEncoder, Schuster & Nakajima).
 *
 * Vocab file: one piece per line (the first TAB field, ASCII whitespace stripped); the id
 * is the line number. <unk>, <s> and </s> must be present at target_unk_id,
 * target_sos_id and target_eos_id. An empty piece line is an error (Lingvo's vocab op
 * would skip it and shift every later id), except after the last newline.
 * Encode: split on ASCII whitespace; each word becomes '▁'+word split into UTF-8
 * characters (each byte of an invalid sequence becomes U+FFFD), each character its id
 * or <unk>; then repeatedly merge the adjacent pair whose concatenation is a piece with
 * the smallest id (leftmost on ties) until no pair is a piece. With merge_prob < 1 each
 * merge step happens with that probability (from a per-tokenizer counter hashed by
 * SplitMix64, so runs are not reproducible across threads, as in Lingvo). Merging is
 * quadratic in the length of one word, as in Lingvo.
 * Decode: concatenate pieces (an unknown id gives "<unk>"), '▁' -> ' ', strip ASCII
 * whitespace at both ends. */
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "input/tokenizer.h"

#define BOW "\xe2\x96\x81"
enum { kNoToken = 1 << 30 };

typedef struct {
  lv_tokenizer base;
  lv_tok_vocab *vocab;
  double merge_prob;
  uint64_t counter; /* random state for merge_prob < 1 (atomic) */
} wpm_tokenizer;

static lv_params *wpm_params(void) {
  lv_params *p = lv_tokenizer_base_params("WpmTokenizer");
  lv_params_define_none(p, "vocab_filepath", LV_PV_STRING,
                        "Specifies a filepath to the WPM vocab. The vocab is sorted by descending merge score.");
  lv_params_define_float(p, "merge_prob", 1.,
                         "Probability of merging WPMs. If less than 1, then decomposition of words into wordpieces "
                         "will no longer be deterministic, and result in longer ID sequences. At 0, it will be "
                         "graphemes.");
  return p;
}

static void wpm_destroy(lv_tokenizer *t) {
  wpm_tokenizer *w = (wpm_tokenizer *)t;
  lv_tok_vocab_free(w->vocab);
  free(w);
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

static lv_status wpm_load(wpm_tokenizer *w, const lv_params *p) {
  if (!lv_params_is_set(p, "vocab_filepath"))
    return lv_status_make(LV_ERR_INVALID, "tokenizer.vocab_filepath: WpmTokenizer needs a vocab file (it is None)");
  const char *path = lv_params_str(p, "vocab_filepath");
  char *data;
  size_t len;
  LV_TRY(lv_status_wrap(lv_file_read_all(path, &data, &len), "tokenizer.vocab_filepath"));
  static const char *const names[3] = {"<unk>", "<s>", "</s>"};
  static const char *const keys[3] = {"target_unk_id", "target_sos_id", "target_eos_id"};
  int32_t first[3] = {-1, -1, -1};
  lv_status s = NULL;
  int32_t id = 0;
  for (size_t pos = 0; pos < len && !s; id++) {
    const char *l = data + pos;
    const char *nl = memchr(l, '\n', len - pos);
    size_t ln = nl ? (size_t)(nl - l) : len - pos;
    pos += ln + 1;
    while (ln && is_space(*l)) l++, ln--;
    while (ln && is_space(l[ln - 1])) ln--;
    const char *tab = memchr(l, '\t', ln);
    if (tab) ln = (size_t)(tab - l);
    if (!ln) {
      s = lv_status_make(LV_ERR_CORRUPT, "tokenizer.vocab_filepath: %s:%d: expected a piece, found an empty line",
                         path, (int)id + 1);
      break;
    }
    for (int k = 0; k < 3; k++)
      if (first[k] < 0 && ln == strlen(names[k]) && !memcmp(l, names[k], ln)) first[k] = id;
    s = lv_tok_vocab_add(w->vocab, l, ln, id);
  }
  free(data);
  for (int k = 0; k < 3 && !s; k++) {
    if (first[k] < 0)
      s = lv_status_make(LV_ERR_CORRUPT, "tokenizer.vocab_filepath: %s: %s is not in the vocab", path, names[k]);
    else if (first[k] != lv_params_int(p, keys[k]))
      s = lv_status_make(LV_ERR_INVALID, "tokenizer.%s: is %lld but %s is on line %d of %s (id %d)", keys[k],
                         (long long)lv_params_int(p, keys[k]), names[k], (int)first[k] + 1, path, (int)first[k]);
  }
  return s;
}

static lv_status wpm_create(const lv_params *p, lv_tokenizer **out) {
  wpm_tokenizer *w = calloc(1, sizeof *w);
  if (!w || !(w->vocab = lv_tok_vocab_new())) {
    free(w);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory creating a WpmTokenizer");
  }
  w->base.layout = LV_TOK_LAYOUT_PAD_OR_TRIM;
  w->base.unk_id = (int32_t)lv_params_int(p, "target_unk_id");
  w->base.sos_id = (int32_t)lv_params_int(p, "target_sos_id");
  w->base.eos_id = (int32_t)lv_params_int(p, "target_eos_id");
  w->merge_prob = lv_params_float(p, "merge_prob");
  lv_status s = wpm_load(w, p);
  if (s) {
    wpm_destroy(&w->base);
    return s;
  }
  w->base.num_ids = lv_tok_vocab_num_ids(w->vocab);
  *out = &w->base;
  return NULL;
}

static const char *piece_of(const wpm_tokenizer *w, int32_t id, size_t *n) {
  const char *p = lv_tok_vocab_piece(w->vocab, id, n);
  if (!p) p = "<unk>", *n = 5;
  return p;
}

/* id of piece(a)+piece(b), or kNoToken. */
static int32_t merged(const wpm_tokenizer *w, int32_t a, int32_t b, lv_tok_str *buf) {
  size_t na, nb;
  const char *pa = piece_of(w, a, &na), *pb = piece_of(w, b, &nb);
  buf->n = 0;
  if (lv_tok_str_append(buf, pa, na) || lv_tok_str_append(buf, pb, nb)) return kNoToken; /* OOM: no merge */
  int32_t id = lv_tok_vocab_find(w->vocab, buf->s, buf->n);
  return id < 0 ? kNoToken : id;
}

static bool should_merge(const wpm_tokenizer *w) {
  if (w->merge_prob >= 1.) return true;
  if (w->merge_prob <= 0.) return false;
  uint64_t z = __atomic_add_fetch((uint64_t *)&w->counter, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-53 < w->merge_prob;
}

static lv_status encode_word(const wpm_tokenizer *w, const char *s, size_t n, lv_tok_ids *out, lv_tok_str *buf) {
  lv_tok_ids tok = {0}, cand = {0};
  lv_status st = NULL;
  int32_t bow = lv_tok_vocab_find(w->vocab, BOW, 3);
  st = lv_tok_ids_push(&tok, bow < 0 ? w->base.unk_id : bow);
  for (size_t i = 0; i < n && !st;) {
    int len;
    uint32_t c = lv_utf8_decode(s + i, n - i, &len);
    int32_t id = c == 0xfffd && len == 1 ? lv_tok_vocab_find(w->vocab, "\xef\xbf\xbd", 3)
                                          : lv_tok_vocab_find(w->vocab, s + i, (size_t)len);
    st = lv_tok_ids_push(&tok, id < 0 ? w->base.unk_id : id);
    i += (size_t)len;
  }
  for (int i = 0; i + 1 < tok.n && !st; i++) st = lv_tok_ids_push(&cand, merged(w, tok.v[i], tok.v[i + 1], buf));
  while (!st && cand.n > 0) {
    int best = 0;
    for (int i = 1; i < cand.n; i++)
      if (cand.v[i] < cand.v[best]) best = i;
    if (cand.v[best] == kNoToken || !should_merge(w)) break;
    tok.v[best] = cand.v[best];
    memmove(tok.v + best + 1, tok.v + best + 2, (size_t)(tok.n - best - 2) * sizeof *tok.v);
    tok.n--;
    memmove(cand.v + best, cand.v + best + 1, (size_t)(cand.n - best - 1) * sizeof *cand.v);
    cand.n--;
    if (best > 0) cand.v[best - 1] = merged(w, tok.v[best - 1], tok.v[best], buf);
    if (best < tok.n - 1) cand.v[best] = merged(w, tok.v[best], tok.v[best + 1], buf);
  }
  for (int i = 0; i < tok.n && !st; i++) st = lv_tok_ids_push(out, tok.v[i]);
  lv_tok_ids_free(&tok);
  lv_tok_ids_free(&cand);
  return st;
}

static lv_status wpm_encode(const lv_tokenizer *t, const char *s, size_t n, lv_tok_ids *out) {
  const wpm_tokenizer *w = (const wpm_tokenizer *)t;
  lv_tok_str buf = {0};
  lv_status st = NULL;
  for (size_t i = 0; i < n && !st;) {
    while (i < n && is_space(s[i])) i++;
    size_t start = i;
    while (i < n && !is_space(s[i])) i++;
    if (i > start) st = encode_word(w, s + start, i - start, out, &buf);
  }
  free(buf.s);
  return st;
}

static lv_status wpm_decode(const lv_tokenizer *t, const int32_t *ids, int n, char **out) {
  const wpm_tokenizer *w = (const wpm_tokenizer *)t;
  lv_tok_str b = {0};
  lv_status s = lv_tok_str_append(&b, "", 0);
  for (int i = 0; i < n && !s; i++) {
    size_t pn;
    const char *p = piece_of(w, ids[i], &pn);
    s = lv_tok_str_append_piece(&b, p, pn);
  }
  if (s) {
    free(b.s);
    return s;
  }
  size_t a = 0, e = b.n;
  while (a < e && is_space(b.s[a])) a++;
  while (e > a && is_space(b.s[e - 1])) e--;
  memmove(b.s, b.s + a, e - a);
  b.s[e - a] = 0;
  *out = b.s;
  return NULL;
}

const lv_tokenizer_class lv_wpm_tokenizer = {
    .cls = "WpmTokenizer",
    .params = wpm_params,
    .create = wpm_create,
    .encode = wpm_encode,
    .decode = wpm_decode,
    .destroy = wpm_destroy,
};
