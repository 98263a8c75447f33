/* SentencePieceTokenizer (Lingvo's wrapper of tf_text.SentencepieceTokenizer): reads a
 * SentencePiece .model (protobuf, src/io/proto/sentencepiece_model.proto) and encodes as
 * SentencePiece 0.1.97's spm_encode does.
 *
 * Normalization follows the model's normalizer_spec: the precompiled charsmap (a
 * Darts-clone double-array trie over UTF-8 prefixes plus their replacement strings, so
 * nmt_nfkc, nfkc, nfkc_cf and identity models all normalize exactly as SentencePiece),
 * longest match first; user-defined symbols pass through untouched; invalid UTF-8 bytes
 * become U+FFFD one byte at a time; add_dummy_prefix, remove_extra_whitespaces,
 * escape_whitespaces ('▁') and treat_whitespace_as_suffix as SentencePiece applies them.
 * A normalization_rule_tsv (only used while training) is not read.
 * Segmentation: UNIGRAM by SentencePiece's optimized Viterbi (pieces scored by their
 * float scores, user-defined pieces by length * max_score - 0.1, unused pieces skipped,
 * an unknown character scored min_score - 10); BPE by SentencePiece's agenda of adjacent
 * pairs (highest score, leftmost on ties), with unused pieces re-split. Runs of unknown
 * pieces are merged into one <unk>, or split into <0xXX> byte pieces when the model was
 * trained with byte_fallback. WORD and CHAR models are not supported (an error at
 * create). Sampling (alpha, nbest_size > 1) is not implemented: nbest_size must be 0 or 1.
 * Decode: control ids vanish, <unk> becomes the model's unk_surface (" ⁇ "), byte
 * pieces become their bytes, '▁' becomes ' ', and the leading '▁'s of the first piece
 * are dropped; the model's denormalizer spec is not applied. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "input/tokenizer.h"
#include "sentencepiece_model.pb-c.h"

#define WS "\xe2\x96\x81"
enum { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
enum { kUnigram = 1, kBpe = 2 };

typedef struct {
  float score;
  int type;
} spm_piece;

typedef struct {
  lv_tokenizer base;
  char *path;
  int model_type;
  int npieces;
  spm_piece *pieces;
  lv_tok_vocab *normal;   /* NORMAL, USER_DEFINED, UNUSED */
  lv_tok_vocab *reserved; /* UNKNOWN, CONTROL, BYTE */
  size_t max_piece_len;
  int32_t unk;            /* the model's <unk> */
  float min_score, max_score;
  bool byte_fallback;
  /* normalizer */
  bool add_dummy_prefix, remove_extra_ws, escape_ws, ws_suffix;
  uint32_t *trie;         /* [trie_units] */
  size_t trie_units;
  char *norm;             /* [norm_len + 1], NUL-terminated copy */
  size_t norm_len;
  char **user;            /* user-defined symbols */
  size_t *user_n;
  int nuser;
  char *unk_surface;
  /* A byte trie over the normal pieces, for unigram's lattice: slot (node, byte) ->
   * child in an open-addressing table, and each node's piece id (-1: a prefix only).
   * One probe per byte, and the walk from a position stops where no piece continues. */
  uint32_t *tkey, *tchild; /* [tcap]; key (node << 8 | byte) + 1, 0 = empty */
  uint32_t tcap;
  int32_t *tnode_id;       /* [tnodes] */
  uint32_t tnodes;
} spm_tokenizer;

static inline uint32_t trie_slot(const spm_tokenizer *m, uint32_t key) {
  uint32_t i = (key * 2654435761u) & (m->tcap - 1);
  while (m->tkey[i] && m->tkey[i] != key) i = (i + 1) & (m->tcap - 1);
  return i;
}

/* The child of node by byte b, or 0 (the root is never a child). */
static inline uint32_t trie_child(const spm_tokenizer *m, uint32_t node, unsigned char b) {
  uint32_t i = trie_slot(m, ((node << 8) | b) + 1);
  return m->tkey[i] ? m->tchild[i] : 0;
}

static lv_status trie_build(spm_tokenizer *m) {
  size_t bytes = 1;
  for (int32_t id = 0; id < m->npieces; id++) {
    size_t n = 0;
    if (lv_tok_vocab_piece(m->normal, id, &n)) bytes += n;
  }
  if (bytes >= (1u << 23)) return lv_status_make(LV_ERR_INVALID, "tokenizer.spm_model: %s: pieces too long in all (%zu bytes)", m->path, bytes);
  m->tcap = 1;
  while (m->tcap < 2 * bytes) m->tcap <<= 1;
  m->tkey = calloc(m->tcap, sizeof *m->tkey);
  m->tchild = calloc(m->tcap, sizeof *m->tchild);
  m->tnode_id = malloc(bytes * sizeof *m->tnode_id);
  if (!m->tkey || !m->tchild || !m->tnode_id) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  m->tnode_id[0] = -1;
  m->tnodes = 1;
  for (int32_t id = 0; id < m->npieces; id++) {
    int t = m->pieces[id].type;
    if (t != kNormal && t != kUserDefined && t != kUnused) continue;
    size_t n = 0;
    const char *p = lv_tok_vocab_piece(m->normal, id, &n);
    if (!p) continue;
    uint32_t node = 0;
    for (size_t k = 0; k < n; k++) {
      uint32_t key = ((node << 8) | (unsigned char)p[k]) + 1, i = trie_slot(m, key);
      if (!m->tkey[i]) {
        m->tkey[i] = key;
        m->tchild[i] = m->tnodes;
        m->tnode_id[m->tnodes++] = -1;
      }
      node = m->tchild[i];
    }
    m->tnode_id[node] = id;
  }
  return NULL;
}

static lv_params *spm_params(void) {
  lv_params *p = lv_tokenizer_base_params("SentencePieceTokenizer");
  lv_status st = lv_params_set_int(p, "vocab_size", 0);
  LV_ASSERT(!st);
  lv_params_define_none(p, "spm_model", LV_PV_STRING, "The file path to the SentencePiece model.");
  lv_params_define_float(p, "alpha", 1.0, "Inverse temparature for probability rescaling used in eval.");
  lv_params_define_int(p, "nbest_size", 0,
                       "A integer parameter for sampling. nbest_size = {0,1}: No sampling is performed. "
                       "nbest_size > 1: samples from the nbest_size results. nbest_size < 0: assuming that "
                       "nbest_size is infinite and samples from all hypothesis (lattice) using "
                       "forward-filtering-and-backward-sampling algorithm.");
  return p;
}

static void spm_destroy(lv_tokenizer *t) {
  spm_tokenizer *m = (spm_tokenizer *)t;
  lv_tok_vocab_free(m->normal);
  lv_tok_vocab_free(m->reserved);
  for (int i = 0; i < m->nuser; i++) free(m->user[i]);
  free(m->user);
  free(m->user_n);
  free(m->pieces);
  free(m->trie);
  free(m->norm);
  free(m->unk_surface);
  free(m->tkey);
  free(m->tchild);
  free(m->tnode_id);
  free(m->path);
  free(m);
}

#define CORRUPT(...) lv_status_make(LV_ERR_CORRUPT, "tokenizer.spm_model: " __VA_ARGS__)

static lv_status spm_load(spm_tokenizer *m, const Sentencepiece__ModelProto *mp) {
  const char *path = m->path;
  const Sentencepiece__TrainerSpec *ts = mp->trainer_spec;
  const Sentencepiece__NormalizerSpec *ns = mp->normalizer_spec;
  m->model_type = ts ? (int)ts->model_type : kUnigram;
  if (m->model_type != kUnigram && m->model_type != kBpe)
    return lv_status_make(LV_ERR_INVALID,
                          "tokenizer.spm_model: %s: model_type %d is not supported (UNIGRAM=1 and BPE=2 are)", path,
                          m->model_type);
  m->byte_fallback = ts && ts->byte_fallback;
  m->ws_suffix = ts && ts->treat_whitespace_as_suffix;
  m->add_dummy_prefix = ns ? ns->add_dummy_prefix : true;
  m->remove_extra_ws = ns ? ns->remove_extra_whitespaces : true;
  m->escape_ws = ns ? ns->escape_whitespaces : true;
  m->unk_surface = strdup(ts && ts->unk_surface ? ts->unk_surface : " \xe2\x81\x87 ");
  if (!m->unk_surface) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  if (mp->n_pieces == 0 || mp->n_pieces > (1u << 26))
    return CORRUPT("%s: expected 1 to %d pieces, found %zu", path, 1 << 26, mp->n_pieces);
  m->npieces = (int)mp->n_pieces;
  m->pieces = calloc(mp->n_pieces, sizeof *m->pieces);
  m->user = calloc(mp->n_pieces, sizeof *m->user);
  m->user_n = calloc(mp->n_pieces, sizeof *m->user_n);
  if (!m->pieces || !m->user || !m->user_n) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  m->unk = -1;
  m->min_score = 3.40282347e+38f;
  m->max_score = 1.17549435e-38f; /* FLT_MIN, as SentencePiece starts it */
  for (int i = 0; i < m->npieces; i++) {
    const Sentencepiece__ModelProto__SentencePiece *sp = mp->pieces[i];
    const char *s = sp->piece;
    size_t n = s ? strlen(s) : 0;
    if (!n) return CORRUPT("%s: piece %d: piece must not be empty", path, i);
    int type = (int)sp->type;
    if (type < kNormal || type > kByte) return CORRUPT("%s: piece %d (\"%s\"): unknown type %d", path, i, s, type);
    bool normal = type == kNormal || type == kUserDefined || type == kUnused;
    lv_tok_vocab *v = normal ? m->normal : m->reserved;
    if (lv_tok_vocab_find(v, s, n) >= 0) return CORRUPT("%s: piece %d: \"%s\" is already defined", path, i, s);
    LV_TRY(lv_tok_vocab_add(v, s, n, i));
    if (n > m->max_piece_len) m->max_piece_len = n;
    m->pieces[i] = (spm_piece){sp->has_score ? sp->score : 0.f, type};
    if (type == kUserDefined) {
      if (!(m->user[m->nuser] = strdup(s))) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
      m->user_n[m->nuser++] = n;
    }
    if (type == kUnknown) {
      if (m->unk >= 0) return CORRUPT("%s: piece %d: unk is already defined (piece %d)", path, i, (int)m->unk);
      m->unk = i;
    }
    if (type == kByte && !m->byte_fallback)
      return CORRUPT("%s: piece %d: byte piece \"%s\" is found although `byte_fallback` is false", path, i, s);
    if (type == kNormal) {
      if (sp->score < m->min_score) m->min_score = sp->score;
      if (sp->score > m->max_score) m->max_score = sp->score;
    }
  }
  if (m->unk < 0) return CORRUPT("%s: unk is not defined (no piece of type UNKNOWN)", path);
  if (m->byte_fallback)
    for (int b = 0; b < 256; b++) {
      char name[8];
      snprintf(name, sizeof name, "<0x%02X>", b);
      if (lv_tok_vocab_find(m->reserved, name, 6) < 0)
        return CORRUPT("%s: byte_fallback is true but piece %s is missing", path, name);
    }
  if (ns && ns->has_precompiled_charsmap && ns->precompiled_charsmap.len) {
    const uint8_t *blob = ns->precompiled_charsmap.data;
    size_t len = ns->precompiled_charsmap.len;
    uint32_t tsize = len > 4 ? (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                                   (uint32_t)blob[3] << 24
                             : 0;
    if (len <= 4 || tsize >= len - 4 || tsize % 4 || tsize == 0)
      return CORRUPT("%s: normalizer_spec.precompiled_charsmap: blob of %zu bytes is broken (trie size %u)", path, len,
                     tsize);
    m->trie_units = tsize / 4;
    m->trie = malloc(tsize);
    m->norm_len = len - 4 - tsize;
    m->norm = malloc(m->norm_len + 1);
    if (!m->trie || !m->norm) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
    for (size_t u = 0; u < m->trie_units; u++) {
      const uint8_t *q = blob + 4 + 4 * u;
      m->trie[u] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    }
    memcpy(m->norm, blob + 4 + tsize, m->norm_len);
    m->norm[m->norm_len] = 0;
  }
  /* The </s> StringsToIds appends is the model's, as tf_text's add_eos. */
  const char *eos = ts && ts->eos_piece ? ts->eos_piece : "</s>";
  int32_t eos_id = lv_tok_vocab_find(m->reserved, eos, strlen(eos));
  if (eos_id < 0) eos_id = lv_tok_vocab_find(m->normal, eos, strlen(eos));
  m->base.eos_id = eos_id < 0 ? m->unk : eos_id;
  return NULL;
}

static lv_status spm_create(const lv_params *p, lv_tokenizer **out) {
  if (!lv_params_is_set(p, "spm_model"))
    return lv_status_make(LV_ERR_INVALID, "tokenizer.spm_model: SentencePieceTokenizer needs a model file (it is None)");
  int64_t nbest = lv_params_int(p, "nbest_size");
  if (nbest != 0 && nbest != 1)
    return lv_status_make(LV_ERR_INVALID,
                          "tokenizer.nbest_size: sampling is not implemented; expected 0 or 1, found %lld",
                          (long long)nbest);
  const char *path = lv_params_str(p, "spm_model");
  spm_tokenizer *m = calloc(1, sizeof *m);
  if (!m || !(m->path = strdup(path)) || !(m->normal = lv_tok_vocab_new()) || !(m->reserved = lv_tok_vocab_new())) {
    if (m) spm_destroy(&m->base);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory creating a SentencePieceTokenizer");
  }
  m->base.layout = LV_TOK_LAYOUT_SPM;
  m->base.sos_id = (int32_t)lv_params_int(p, "target_sos_id");
  m->base.unk_id = (int32_t)lv_params_int(p, "target_unk_id");
  char *data;
  size_t len;
  lv_status s = lv_status_wrap(lv_file_read_all(path, &data, &len), "tokenizer.spm_model");
  if (!s) {
    Sentencepiece__ModelProto *mp = sentencepiece__model_proto__unpack(NULL, len, (const uint8_t *)data);
    free(data);
    if (!mp)
      s = CORRUPT("%s: not a SentencePiece model (the ModelProto protobuf of %zu bytes does not parse)", path, len);
    else if (!(s = spm_load(m, mp)))
      s = trie_build(m);
    if (mp) sentencepiece__model_proto__free_unpacked(mp, NULL);
  }
  if (s) {
    spm_destroy(&m->base);
    return s;
  }
  m->base.num_ids = m->npieces;
  *out = &m->base;
  return NULL;
}

/* ---- normalizer ---- */

/* Longest charsmap rule matching a prefix of s[0..n): its byte length (0: none) and the
 * offset of its replacement in m->norm. */
static size_t trie_longest(const spm_tokenizer *m, const char *s, size_t n, uint32_t *value) {
  const uint32_t *a = m->trie;
  size_t units = m->trie_units, best = 0;
  int found = 0;
  uint32_t pos = 0, unit = a[0];
  pos ^= (unit >> 10) << ((unit & (1u << 9)) >> 6);
  for (size_t i = 0; i < n; i++) {
    uint8_t c = (uint8_t)s[i];
    pos ^= c;
    if (pos >= units) break;
    unit = a[pos];
    if ((unit & ((1u << 31) | 0xff)) != c) break;
    pos ^= (unit >> 10) << ((unit & (1u << 9)) >> 6);
    if ((unit >> 8) & 1) {
      if (pos >= units) break;
      if (found++ < 32 && i + 1 > best) {
        best = i + 1;
        *value = a[pos] & ((1u << 31) - 1);
      }
    }
  }
  return best;
}

/* SentencePiece's NormalizePrefix: the replacement *r (length *rn) of the prefix of
 * s[0..n) it consumes (returned). */
static lv_status normalize_prefix(const spm_tokenizer *m, const char *s, size_t n, const char **r, size_t *rn,
                                  size_t *consumed) {
  size_t best = 0;
  for (int u = 0; u < m->nuser; u++)
    if (m->user_n[u] <= n && m->user_n[u] > best && !memcmp(s, m->user[u], m->user_n[u])) best = m->user_n[u];
  if (best) {
    *r = s;
    *rn = *consumed = best;
    return NULL;
  }
  if (m->trie) {
    uint32_t value = 0;
    size_t len = trie_longest(m, s, n, &value);
    if (len) {
      if (value >= m->norm_len && !(value == 0 && m->norm_len == 0))
        return CORRUPT("%s: normalizer_spec.precompiled_charsmap: rule points at offset %u beyond the %zu bytes of "
                       "replacements",
                       m->path, value, m->norm_len);
      *r = m->norm + value;
      *rn = strlen(*r);
      *consumed = len;
      return NULL;
    }
  }
  int len;
  uint32_t c = lv_utf8_decode(s, n, &len);
  if (c == 0xfffd && len != 3) {
    *r = "\xef\xbf\xbd";
    *rn = 3;
    *consumed = 1;
  } else {
    *r = s;
    *rn = *consumed = (size_t)len;
  }
  return NULL;
}

static lv_status add_ws(const spm_tokenizer *m, lv_tok_str *o) {
  return m->escape_ws ? lv_tok_str_append(o, WS, 3) : lv_tok_str_append(o, " ", 1);
}

static lv_status normalize(const spm_tokenizer *m, const char *s, size_t n, lv_tok_str *o) {
  o->n = 0;
  LV_TRY(lv_tok_str_append(o, "", 0));
  const char *r;
  size_t rn, used;
  if (m->remove_extra_ws) {
    while (n) {
      LV_TRY(normalize_prefix(m, s, n, &r, &rn, &used));
      if (!(rn == 1 && r[0] == ' ')) break;
      s += used, n -= used;
    }
  }
  if (!n) return NULL;
  if (!m->ws_suffix && m->add_dummy_prefix) LV_TRY(add_ws(m, o));
  bool prev_space = m->remove_extra_ws;
  while (n) {
    LV_TRY(normalize_prefix(m, s, n, &r, &rn, &used));
    while (prev_space && rn && r[0] == ' ') r++, rn--;
    if (rn) {
      for (size_t k = 0; k < rn; k++) {
        if (m->escape_ws && r[k] == ' ') LV_TRY(lv_tok_str_append(o, WS, 3));
        else LV_TRY(lv_tok_str_append(o, r + k, 1));
      }
      prev_space = r[rn - 1] == ' ';
    }
    s += used, n -= used;
    if (!m->remove_extra_ws) prev_space = false;
  }
  if (m->remove_extra_ws) {
    const char *sp = m->escape_ws ? WS : " ";
    size_t spn = m->escape_ws ? 3 : 1;
    while (o->n >= spn && !memcmp(o->s + o->n - spn, sp, spn)) o->n -= spn;
    o->s[o->n] = 0;
  }
  if (m->ws_suffix && m->add_dummy_prefix) LV_TRY(add_ws(m, o));
  return NULL;
}

/* ---- segmentation ---- */

static int one_char_len(const char *s) { return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[((unsigned char)*s) >> 4]; }

typedef struct {
  int32_t id;
  float score;
  int start;
} best_node;

static lv_status unigram(const spm_tokenizer *m, const char *s, int size, lv_tok_ids *out) {
  best_node *best = malloc((size_t)(size + 1) * sizeof *best);
  if (!best) return lv_status_make(LV_ERR_RESOURCE, "out of memory for a lattice of %d bytes", size);
  for (int i = 0; i <= size; i++) best[i] = (best_node){-1, 0.f, -1};
  const float unk_score = m->min_score - 10.0f;
  for (int start = 0; start < size;) {
    const float here = best[start].score;
    bool single = false;
    int mblen = one_char_len(s + start);
    if (mblen > size - start) mblen = size - start;
    uint32_t node = 0;
    for (int end = start + 1; end <= size; end++) {
      if (!(node = trie_child(m, node, (unsigned char)s[end - 1]))) break;
      int32_t id = m->tnode_id[node];
      if (id < 0 || m->pieces[id].type == kUnused) continue;
      int length = end - start;
      best_node *t = &best[end];
      if (m->pieces[id].type == kUserDefined) {
        double cand = (double)((float)length * m->max_score) - 0.1 + (double)here;
        if (t->start == -1 || cand > (double)t->score) *t = (best_node){id, (float)cand, start};
      } else {
        /* In double, as SentencePiece's EncodeOptimized sums it (its score expression is
         * promoted by the user-defined branch's "- 0.1"): a float sum would round some
         * unequal paths to a tie and pick another segmentation. */
        double cand = (double)m->pieces[id].score + (double)here;
        if (t->start == -1 || cand > (double)t->score) *t = (best_node){id, (float)cand, start};
      }
      if (length == mblen) single = true;
    }
    if (!single) {
      best_node *t = &best[start + mblen];
      float cand = unk_score + here;
      if (t->start == -1 || cand > t->score) *t = (best_node){m->unk, cand, start};
    }
    start += mblen;
  }
  int count = 0;
  for (int e = size; e > 0; e = best[e].start, count++)
    if (best[e].start < 0 || best[e].start >= e) {
      free(best);
      return CORRUPT("%s: the lattice has no path to byte %d (a piece ends inside a character)", m->path, e);
    }
  lv_status st = NULL;
  int base = out->n;
  for (int k = 0; k < count && !st; k++) st = lv_tok_ids_push(out, 0);
  for (int e = size, k = count - 1; e > 0 && !st; e = best[e].start, k--) out->v[base + k] = best[e].id;
  free(best);
  return st;
}

typedef struct {
  int left, right;
  float score;
  size_t size;
} bpe_pair;

typedef struct {
  int prev, next;
  bool freeze;
  const char *p;
  size_t n;
} bpe_sym;

static bool pair_less(const bpe_pair *a, const bpe_pair *b) { /* a below b in the max-heap */
  return a->score < b->score || (a->score == b->score && a->left > b->left);
}

typedef struct {
  bpe_pair *v;
  int n, cap;
} pair_heap;

static lv_status heap_push(pair_heap *h, bpe_pair x) {
  if (h->n == h->cap) {
    int cap = h->cap ? h->cap * 2 : 64;
    bpe_pair *v = realloc(h->v, (size_t)cap * sizeof *v);
    if (!v) return lv_status_make(LV_ERR_RESOURCE, "out of memory for BPE pairs");
    h->v = v, h->cap = cap;
  }
  int i = h->n++;
  while (i > 0 && pair_less(&h->v[(i - 1) / 2], &x)) {
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = x;
  return NULL;
}

static bpe_pair heap_pop(pair_heap *h) {
  bpe_pair top = h->v[0], x = h->v[--h->n];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && pair_less(&h->v[c], &h->v[c + 1])) c++;
    if (!pair_less(&x, &h->v[c])) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n) h->v[i] = x;
  return top;
}

typedef struct {
  const char *p;
  size_t n, left;
} rev_merge;

typedef struct {
  rev_merge *v;
  int n, cap;
} rev_list;

static lv_status maybe_add_pair(const spm_tokenizer *m, bpe_sym *sym, int l, int r, pair_heap *h, rev_list *rev) {
  if (l < 0 || r < 0 || sym[l].freeze || sym[r].freeze) return NULL;
  size_t n = sym[l].n + sym[r].n;
  int32_t id = lv_tok_vocab_find(m->normal, sym[l].p, n);
  if (id < 0) return NULL;
  LV_TRY(heap_push(h, (bpe_pair){l, r, m->pieces[id].score, n}));
  if (m->pieces[id].type == kUnused) {
    if (rev->n == rev->cap) {
      int cap = rev->cap ? rev->cap * 2 : 16;
      rev_merge *v = realloc(rev->v, (size_t)cap * sizeof *v);
      if (!v) return lv_status_make(LV_ERR_RESOURCE, "out of memory for BPE merges");
      rev->v = v, rev->cap = cap;
    }
    rev->v[rev->n++] = (rev_merge){sym[l].p, n, sym[l].n};
  }
  return NULL;
}

static int32_t piece_to_id(const spm_tokenizer *m, const char *p, size_t n) {
  int32_t id = lv_tok_vocab_find(m->reserved, p, n);
  if (id < 0) id = lv_tok_vocab_find(m->normal, p, n);
  return id < 0 ? m->unk : id;
}

static lv_status resegment(const spm_tokenizer *m, const char *p, size_t n, const rev_list *rev, lv_tok_ids *out,
                           int depth) {
  int32_t id = piece_to_id(m, p, n);
  if (m->pieces[id].type != kUnused || depth > 64) return lv_tok_ids_push(out, id);
  for (int k = rev->n - 1; k >= 0; k--)
    if (rev->v[k].n == n && !memcmp(rev->v[k].p, p, n)) {
      size_t left = rev->v[k].left;
      LV_TRY(resegment(m, p, left, rev, out, depth + 1));
      return resegment(m, p + left, n - left, rev, out, depth + 1);
    }
  return lv_tok_ids_push(out, id);
}

static lv_status bpe(const spm_tokenizer *m, const char *s, int size, lv_tok_ids *out) {
  bpe_sym *sym = malloc((size_t)size * sizeof *sym);
  if (!sym) return lv_status_make(LV_ERR_RESOURCE, "out of memory for %d BPE symbols", size);
  int nsym = 0;
  for (int i = 0; i < size;) {
    size_t best = 0;
    for (int u = 0; u < m->nuser; u++)
      if (m->user_n[u] <= (size_t)(size - i) && m->user_n[u] > best && !memcmp(s + i, m->user[u], m->user_n[u]))
        best = m->user_n[u];
    int len = best ? (int)best : one_char_len(s + i);
    if (len > size - i) len = size - i;
    sym[nsym] = (bpe_sym){nsym - 1, i + len < size ? nsym + 1 : -1, best > 0, s + i, (size_t)len};
    nsym++;
    i += len;
  }
  pair_heap h = {0};
  rev_list rev = {0};
  lv_status st = NULL;
  for (int i = 1; i < nsym && !st; i++) st = maybe_add_pair(m, sym, i - 1, i, &h, &rev);
  while (!st && h.n) {
    bpe_pair top = heap_pop(&h);
    bpe_sym *l = &sym[top.left], *r = &sym[top.right];
    if (!l->n || !r->n || l->n + r->n != top.size) continue;
    l->n += r->n;
    l->next = r->next;
    if (r->next >= 0) sym[r->next].prev = top.left;
    r->n = 0;
    st = maybe_add_pair(m, sym, l->prev, top.left, &h, &rev);
    if (!st) st = maybe_add_pair(m, sym, top.left, l->next, &h, &rev);
  }
  for (int i = 0; nsym && i != -1 && !st; i = sym[i].next) st = resegment(m, sym[i].p, sym[i].n, &rev, out, 0);
  free(h.v);
  free(rev.v);
  free(sym);
  return st;
}

static lv_status spm_encode(const lv_tokenizer *t, const char *s, size_t n, lv_tok_ids *out) {
  const spm_tokenizer *m = (const spm_tokenizer *)t;
  lv_tok_str norm = {0};
  lv_tok_ids raw = {0};
  lv_status st = normalize(m, s, n, &norm);
  if (!st && norm.n > (size_t)1 << 30) st = lv_status_make(LV_ERR_INVALID, "string of %zu bytes is too long", n);
  if (!st && norm.n)
    st = m->model_type == kUnigram ? unigram(m, norm.s, (int)norm.n, &raw) : bpe(m, norm.s, (int)norm.n, &raw);
  /* Map back to pieces to split unknowns into bytes, or merge runs of <unk>. */
  size_t off = 0;
  bool prev_unk = false;
  for (int i = 0; i < raw.n && !st; i++) {
    int32_t id = raw.v[i];
    bool unk = id == m->unk;
    size_t len;
    if (unk) {
      /* The unknown piece's surface: the normalized bytes up to the next piece. For a
       * run of unknowns each covered one character (unigram) or one symbol (BPE). */
      len = (size_t)one_char_len(norm.s + off);
      if (m->model_type == kBpe) {
        size_t b = 0;
        for (int u = 0; u < m->nuser; u++)
          if (m->user_n[u] <= norm.n - off && m->user_n[u] > b && !memcmp(norm.s + off, m->user[u], m->user_n[u]))
            b = m->user_n[u];
        if (b) len = b;
      }
      if (len > norm.n - off) len = norm.n - off;
    } else {
      lv_tok_vocab_piece(m->pieces[id].type == kNormal || m->pieces[id].type == kUserDefined ||
                                 m->pieces[id].type == kUnused
                             ? m->normal
                             : m->reserved,
                         id, &len);
    }
    if (unk && m->byte_fallback) {
      for (size_t k = 0; k < len && !st; k++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned char)norm.s[off + k]);
        st = lv_tok_ids_push(out, lv_tok_vocab_find(m->reserved, name, 6));
      }
    } else if (!(unk && prev_unk)) {
      st = lv_tok_ids_push(out, id);
    }
    off += len;
    prev_unk = unk;
  }
  free(norm.s);
  lv_tok_ids_free(&raw);
  return st;
}

static lv_status spm_decode(const lv_tokenizer *t, const int32_t *ids, int n, char **out) {
  const spm_tokenizer *m = (const spm_tokenizer *)t;
  lv_tok_str b = {0};
  lv_status s = lv_tok_str_append(&b, "", 0);
  bool first = true;
  for (int i = 0; i < n && !s; i++) {
    int32_t id = ids[i];
    if (id < 0 || id >= m->npieces) {
      s = lv_status_make(LV_ERR_INVALID, "id %d is outside the model's [0, %d)", (int)id, m->npieces);
      break;
    }
    int type = m->pieces[id].type;
    if (type == kControl) continue;
    if (type == kUnknown) {
      s = lv_tok_str_append(&b, m->unk_surface, strlen(m->unk_surface));
      first = false;
      continue;
    }
    size_t pn;
    const char *p = lv_tok_vocab_piece(type == kByte ? m->reserved : m->normal, id, &pn);
    if (type == kByte) {
      unsigned v = 0;
      if (sscanf(p, "<0x%2X>", &v) == 1) {
        char c = (char)v;
        s = lv_tok_str_append(&b, &c, 1);
      }
      first = false;
      continue;
    }
    if (first && (m->add_dummy_prefix || m->remove_extra_ws) && !m->ws_suffix)
      while (pn >= 3 && !memcmp(p, WS, 3)) p += 3, pn -= 3;
    first = false;
    s = lv_tok_str_append_piece(&b, p, pn);
  }
  if (s) {
    free(b.s);
    return s;
  }
  *out = b.s;
  return NULL;
}

const lv_tokenizer_class lv_sentence_piece_tokenizer = {
    .cls = "SentencePieceTokenizer",
    .params = spm_params,
    .create = spm_create,
    .encode = spm_encode,
    .decode = spm_decode,
    .destroy = spm_destroy,
};
