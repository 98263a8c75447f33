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

/* A possible merge of node pos with its right neighbour into id; ver: pos's version when it
 * was computed (stale once pos or its neighbour changed). */
typedef struct wpm_cand {
  int32_t id;
  int pos;
  uint32_t ver;
} wpm_cand;

/* Lowest id first, then the leftmost (node order is the word's order). */
static bool cand_less(const wpm_cand *a, const wpm_cand *b) { return a->id < b->id || (a->id == b->id && a->pos < b->pos); }

static void heap_push(wpm_cand *h, int *n, wpm_cand c) {
  int i = (*n)++;
  while (i > 0 && cand_less(&c, &h[(i - 1) / 2])) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = c;
}

static void heap_pop(wpm_cand *h, int *n) {
  wpm_cand last = h[--(*n)];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
    if (!cand_less(&h[c], &last)) break;
    h[i] = h[c];
    i = c;
  }
  if (*n > 0) h[i] = last;
}

/* One word: <BOW> and its characters, then repeatedly the merge of the adjacent pair whose
 * merged piece has the lowest id, leftmost first (Lingvo's wpm_encoder), until no pair is
 * in the vocabulary. The pairs wait in a heap over a linked list, so a word of m
 * characters costs O(m log m), not O(m^2) (a megabyte of text without a space). */
static lv_status encode_word(const wpm_tokenizer *w, const char *s, size_t n, lv_tok_ids *out, lv_tok_str *buf) {
  lv_tok_ids tok = {0};
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
  const int m = tok.n;
  int *next = NULL, *prev = NULL;
  uint32_t *ver = NULL;
  wpm_cand *heap = NULL;
  int nh = 0;
  if (!st) {
    next = malloc(sizeof *next * (size_t)m);
    prev = malloc(sizeof *prev * (size_t)m);
    ver = calloc((size_t)m, sizeof *ver);
    heap = malloc(sizeof *heap * (size_t)(3 * m + 1)); /* m - 1 pairs, then 2 per merge */
    if (!next || !prev || !ver || !heap) st = lv_status_make(LV_ERR_RESOURCE, "wpm: out of memory for a word of %zu bytes", n);
  }
  for (int i = 0; !st && i < m; i++) {
    next[i] = i + 1 < m ? i + 1 : -1;
    prev[i] = i - 1;
    int32_t id = i + 1 < m ? merged(w, tok.v[i], tok.v[i + 1], buf) : kNoToken;
    if (id != kNoToken) heap_push(heap, &nh, (wpm_cand){id, i, 0});
  }
  while (!st && nh > 0) {
    const wpm_cand c = heap[0];
    if (ver[c.pos] != c.ver) {
      heap_pop(heap, &nh);
      continue;
    }
    if (!should_merge(w)) break;
    heap_pop(heap, &nh);
    const int i = c.pos, j = next[i];
    tok.v[i] = c.id;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    ver[j]++; /* gone: its pair with its neighbour too */
    ver[i]++;
    if (prev[i] >= 0) {
      const int p = prev[i];
      ver[p]++;
      int32_t id = merged(w, tok.v[p], tok.v[i], buf);
      if (id != kNoToken) heap_push(heap, &nh, (wpm_cand){id, p, ver[p]});
    }
    if (next[i] >= 0) {
      int32_t id = merged(w, tok.v[i], tok.v[next[i]], buf);
      if (id != kNoToken) heap_push(heap, &nh, (wpm_cand){id, i, ver[i]});
    }
  }
  for (int i = 0; !st && m > 0 && i >= 0; i = next[i]) st = lv_tok_ids_push(out, tok.v[i]);
  free(next);
  free(prev);
  free(ver);
  free(heap);
  lv_tok_ids_free(&tok);
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
