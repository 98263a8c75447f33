/* The tokenizer registry, Lingvo's StringsToIds / IdsToStrings layouts, and helpers
 * shared by the tok_*.c classes. */
#include "input/tokenizer.h"

#include <pthread.h>
#include <string.h>

#include "base/hash.h"
#include "base/names.h"

extern const lv_tokenizer_class lv_ascii_tokenizer, lv_vocab_file_tokenizer, lv_wpm_tokenizer,
    lv_sentence_piece_tokenizer;
static const lv_tokenizer_class *const kTokenizers[] = {&lv_ascii_tokenizer, &lv_vocab_file_tokenizer,
                                                        &lv_wpm_tokenizer, &lv_sentence_piece_tokenizer};

/* ---- small buffers ---- */

lv_status lv_tok_ids_push(lv_tok_ids *a, int32_t id) {
  if (a->n == a->cap) {
    int cap = a->cap ? a->cap * 2 : 64;
    int32_t *v = realloc(a->v, (size_t)cap * sizeof *v);
    if (!v) return lv_status_make(LV_ERR_RESOURCE, "out of memory growing an id list to %d", cap);
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = id;
  return NULL;
}

void lv_tok_ids_free(lv_tok_ids *a) {
  free(a->v);
  *a = (lv_tok_ids){0};
}

lv_status lv_tok_str_append(lv_tok_str *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) return lv_status_make(LV_ERR_RESOURCE, "out of memory growing a string to %zu bytes", cap);
    b->s = p;
    b->cap = cap;
  }
  if (n) memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
  return NULL;
}

/* Whether s[0..n) is valid UTF-8; *bad = the offset of the first bad byte. */
bool lv_utf8_valid(const char *s, size_t n, size_t *bad) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    unsigned c = u[i];
    int k;
    uint32_t cp, min;
    if (c < 0x80) { i++; continue; }
    if ((c & 0xe0) == 0xc0) k = 1, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) k = 2, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) k = 3, cp = c & 0x07, min = 0x10000;
    else { *bad = i; return false; }
    for (int j = 1; j <= k; j++) {
      if (i + j >= n || (u[i + j] & 0xc0) != 0x80) { *bad = i; return false; }
      cp = cp << 6 | (u[i + j] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) { *bad = i; return false; }
    i += k + 1;
  }
  return true;
}

uint32_t lv_utf8_decode(const char *str, size_t n, int *len) {
  const unsigned char *s = (const unsigned char *)str;
  *len = 1;
  if (s[0] < 0x80) return s[0];
#define TRAIL(i) ((s[i] & 0xc0) == 0x80)
#define VALID(c) ((c) < 0xd800 || ((c) >= 0xe000 && (c) <= 0x10ffff))
  if (n >= 2 && (s[0] & 0xe0) == 0xc0) {
    uint32_t c = ((uint32_t)(s[0] & 0x1f) << 6) | (s[1] & 0x3f);
    if (TRAIL(1) && c >= 0x80 && VALID(c)) {
      *len = 2;
      return c;
    }
  } else if (n >= 3 && (s[0] & 0xf0) == 0xe0) {
    uint32_t c = ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
    if (TRAIL(1) && TRAIL(2) && c >= 0x800 && VALID(c)) {
      *len = 3;
      return c;
    }
  } else if (n >= 4 && (s[0] & 0xf8) == 0xf0) {
    uint32_t c = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3f) << 12) |
                 ((uint32_t)(s[2] & 0x3f) << 6) | (s[3] & 0x3f);
    if (TRAIL(1) && TRAIL(2) && TRAIL(3) && c >= 0x10000 && VALID(c)) {
      *len = 4;
      return c;
    }
  }
#undef TRAIL
#undef VALID
  return 0xfffd;
}

/* ---- piece table: open addressing on FNV-1a ---- */

typedef struct {
  char *piece; /* NULL: empty slot */
  size_t n;
  int32_t id;
} vocab_slot;

struct lv_tok_vocab {
  vocab_slot *slots;
  size_t cap, used;
  char **by_id; /* [nid] owned copies; NULL where no piece has the id */
  size_t *by_id_n;
  int32_t nid;
  int32_t ids; /* the largest id added + 1 */
};

lv_tok_vocab *lv_tok_vocab_new(void) { return calloc(1, sizeof(lv_tok_vocab)); }

void lv_tok_vocab_free(lv_tok_vocab *v) {
  if (!v) return;
  for (size_t i = 0; i < v->cap; i++) free(v->slots[i].piece);
  for (int32_t i = 0; i < v->nid; i++) free(v->by_id[i]);
  free(v->slots);
  free(v->by_id);
  free(v->by_id_n);
  free(v);
}

static vocab_slot *vocab_lookup(const lv_tok_vocab *v, const char *s, size_t n) {
  if (!v->cap) return NULL;
  size_t mask = v->cap - 1;
  for (size_t i = lv_fnv1a_n(s, n) & mask;; i = (i + 1) & mask) {
    vocab_slot *sl = &v->slots[i];
    if (!sl->piece || (sl->n == n && !memcmp(sl->piece, s, n))) return sl;
  }
}

static lv_status vocab_grow(lv_tok_vocab *v) {
  size_t cap = v->cap ? v->cap * 2 : 1024;
  vocab_slot *old = v->slots;
  size_t oldcap = v->cap;
  v->slots = calloc(cap, sizeof *v->slots);
  if (!v->slots) {
    v->slots = old;
    return lv_status_make(LV_ERR_RESOURCE, "out of memory growing a vocabulary to %zu slots", cap);
  }
  v->cap = cap;
  for (size_t i = 0; i < oldcap; i++)
    if (old[i].piece) *vocab_lookup(v, old[i].piece, old[i].n) = old[i];
  free(old);
  return NULL;
}

lv_status lv_tok_vocab_add(lv_tok_vocab *v, const char *piece, size_t n, int32_t id) {
  LV_ASSERT(id >= 0);
  if ((v->used + 1) * 2 > v->cap) LV_TRY(vocab_grow(v));
  vocab_slot *sl = vocab_lookup(v, piece, n);
  if (!sl->piece) {
    sl->piece = malloc(n + 1);
    if (!sl->piece) return lv_status_make(LV_ERR_RESOURCE, "out of memory adding a vocabulary piece");
    memcpy(sl->piece, piece, n);
    sl->piece[n] = 0;
    sl->n = n;
    v->used++;
  }
  sl->id = id;
  if (id >= v->ids) v->ids = id + 1;
  if (id >= v->nid) {
    int32_t nid = v->nid ? v->nid : 256;
    while (nid <= id) nid = nid > INT32_MAX / 2 ? INT32_MAX : nid * 2;
    char **b = realloc(v->by_id, (size_t)nid * sizeof *b);
    if (b) v->by_id = b;
    size_t *bn = b ? realloc(v->by_id_n, (size_t)nid * sizeof *bn) : NULL;
    if (!b || !bn) return lv_status_make(LV_ERR_RESOURCE, "out of memory for vocabulary id %d", (int)id);
    v->by_id_n = bn;
    memset(v->by_id + v->nid, 0, (size_t)(nid - v->nid) * sizeof *b);
    v->nid = nid;
  }
  char *copy = malloc(n + 1);
  if (!copy) return lv_status_make(LV_ERR_RESOURCE, "out of memory adding a vocabulary piece");
  memcpy(copy, piece, n);
  copy[n] = 0;
  free(v->by_id[id]);
  v->by_id[id] = copy;
  v->by_id_n[id] = n;
  return NULL;
}

int32_t lv_tok_vocab_find(const lv_tok_vocab *v, const char *piece, size_t n) {
  vocab_slot *sl = vocab_lookup(v, piece, n);
  return sl && sl->piece ? sl->id : -1;
}

const char *lv_tok_vocab_piece(const lv_tok_vocab *v, int32_t id, size_t *n) {
  if (id < 0 || id >= v->nid || !v->by_id[id]) return NULL;
  if (n) *n = v->by_id_n[id];
  return v->by_id[id];
}

int lv_tok_vocab_size(const lv_tok_vocab *v) { return (int)v->used; }
int32_t lv_tok_vocab_num_ids(const lv_tok_vocab *v) { return v->ids; }

/* ---- registry ---- */

lv_params *lv_tokenizer_base_params(const char *cls) {
  lv_params *p = lv_params_new_cls(cls);
  lv_params_define_string(p, "name", "tokenizer", "Name of this tokenizer object.");
  lv_params_define_int(p, "vocab_size", 64, "The size of the vocabuary.");
  lv_params_define_bool(p, "append_eos", true,
                        "Whether to append </s> at the end and treat it as a non-padded label.");
  lv_params_define_bool(p, "pad_to_max_length", true, "If True, output ids will be padded to max_length.");
  lv_params_define_int(p, "target_unk_id", 0, "Target unknown token id.");
  lv_params_define_int(p, "target_sos_id", 1, "Target start of sequence id.");
  lv_params_define_int(p, "target_eos_id", 2, "Target end of sequence id.");
  lv_params_define_int(p, "target_wb_id", -1, "Target word boundary id.");
  return p;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void register_all(void) {
  for (size_t i = 0; i < LV_ARRAY_LEN(kTokenizers); i++) lv_registry_add(kTokenizers[i]->cls, kTokenizers[i]->params);
}
void lv_tokenizer_register_all(void) { pthread_once(&g_once, register_all); }

const lv_tokenizer_class *lv_tokenizer_class_find(const char *cls) {
  for (size_t i = 0; cls && i < LV_ARRAY_LEN(kTokenizers); i++)
    if (!strcmp(kTokenizers[i]->cls, cls)) return kTokenizers[i];
  return NULL;
}

lv_status lv_tokenizer_create(const lv_params *p, lv_tokenizer **out) {
  *out = NULL;
  const char *cls = lv_params_str(p, "cls");
  const lv_tokenizer_class *c = lv_tokenizer_class_find(cls);
  if (!c) {
    const char *names[LV_ARRAY_LEN(kTokenizers)];
    for (size_t i = 0; i < LV_ARRAY_LEN(kTokenizers); i++) names[i] = kTokenizers[i]->cls;
    char known[256];
    lv_names_join(names, (int)LV_ARRAY_LEN(kTokenizers), ", ", known, sizeof known);
    return lv_status_make(LV_ERR_INVALID, "tokenizer.cls: \"%s\" is not a tokenizer class (known: %s)",
                          cls ? cls : "", known);
  }
  lv_tokenizer *t = NULL;
  LV_TRY(c->create(p, &t));
  t->cls = c;
  t->p = p;
  t->append_eos = lv_params_bool(p, "append_eos");
  t->pad_to_max_length = lv_params_bool(p, "pad_to_max_length");
  *out = t;
  return NULL;
}

void lv_tokenizer_destroy(lv_tokenizer *t) {
  if (t) t->cls->destroy(t);
}

lv_status lv_tokenizer_encode(const lv_tokenizer *t, const char *s, size_t n, lv_tok_ids *out) {
  return t->cls->encode(t, s, n, out);
}

lv_status lv_tokenizer_decode(const lv_tokenizer *t, const int32_t *ids, int n, char **out) {
  return t->cls->decode(t, ids, n, out);
}

/* ---- StringsToIds ---- */

void lv_tok_batch_free(lv_tok_batch *b) {
  free(b->ids);
  free(b->labels);
  free(b->paddings);
  *b = (lv_tok_batch){0};
}

/* Fills row r (width w) of ids/labels/paddings from toks[0..n) by the class's rule;
 * returns the row's length for !pad_to_max_length widths. */
static int lay_row(const lv_tokenizer *t, const int32_t *toks, int n, int maxlen, bool append_eos, int32_t *ids,
                   int32_t *labels, float *pad) {
  const int32_t sos = t->sos_id, eos = t->eos_id;
  switch (t->layout) {
    case LV_TOK_LAYOUT_ASCII_OP: {
      if (n + 1 > maxlen) n = maxlen - 1;
      ids[0] = sos;
      for (int j = 0; j < n; j++) {
        ids[j + 1] = toks[j];
        labels[j] = toks[j];
        pad[j] = 0.f;
      }
      labels[n] = eos;
      pad[n] = append_eos ? 0.f : 1.f;
      for (int j = n + 1; j < maxlen; j++) {
        ids[j] = eos;
        labels[j] = eos;
        pad[j] = 1.f;
      }
      return n + 1;
    }
    case LV_TOK_LAYOUT_VOCAB_OP: {
      for (int j = 0; j < maxlen; j++) ids[j] = labels[j] = 0, pad[j] = 0.f;
      ids[0] = sos;
      int cur = 0;
      for (int j = 0; j < n; j++) {
        labels[cur] = toks[j];
        pad[cur] = 0.f;
        if (cur + 1 >= maxlen) {
          cur++;
          break;
        }
        ids[cur + 1] = toks[j];
        cur++;
      }
      if (cur < maxlen) {
        labels[cur] = eos;
        pad[cur] = append_eos ? 0.f : 1.f;
        cur++;
      }
      int len = cur;
      for (; cur < maxlen; cur++) {
        ids[cur] = eos;
        labels[cur] = eos;
        pad[cur] = 1.f;
      }
      return len;
    }
    case LV_TOK_LAYOUT_PAD_OR_TRIM: {
      int m = n + (append_eos ? 1 : 0); /* toks (+ </s>) */
      for (int j = 0; j < maxlen; j++) {
        int32_t tj = j < n ? toks[j] : eos;
        labels[j] = j < m ? tj : eos;
        ids[j] = j == 0 ? sos : (j - 1 < m ? (j - 1 < n ? toks[j - 1] : eos) : eos);
        pad[j] = j < m ? 0.f : 1.f;
      }
      return m < maxlen ? m : maxlen;
    }
    case LV_TOK_LAYOUT_SPM: {
      int m = n + (append_eos ? 1 : 0);
      for (int j = 0; j < maxlen; j++) {
        labels[j] = j < n ? toks[j] : (j < m ? eos : t->unk_id);
        pad[j] = j < m ? 0.f : 1.f;
      }
      ids[0] = sos;
      for (int j = 1; j < maxlen; j++) ids[j] = labels[j - 1];
      return m < maxlen ? m : maxlen;
    }
    default:
      LV_ASSERT(0);
  }
  return 0;
}

lv_status lv_tokenizer_strings_to_ids(const lv_tokenizer *t, const char *const *strs, const size_t *lens,
                                      int batch, int max_length, int append_eos_arg, lv_tok_batch *out) {
  *out = (lv_tok_batch){0};
  bool append_eos = append_eos_arg < 0 ? t->append_eos : append_eos_arg != 0;
  if (batch < 0) return lv_status_make(LV_ERR_INVALID, "StringsToIds: batch %d is negative", batch);
  if (t->layout == LV_TOK_LAYOUT_SPM && append_eos != t->append_eos)
    return lv_status_make(LV_ERR_INVALID,
                          "%s: external_append_eos is not supported (tokenizer.append_eos is %s)", t->cls->cls,
                          t->append_eos ? "True" : "False");
  if (t->layout != LV_TOK_LAYOUT_SPM && max_length <= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: max_length must be > 0, got %d", t->cls->cls, max_length);
  lv_tok_ids *toks = calloc(batch ? (size_t)batch : 1, sizeof *toks);
  if (!toks) return lv_status_make(LV_ERR_RESOURCE, "out of memory for %d rows", batch);
  lv_status s = NULL;
  int longest = 0;
  for (int b = 0; b < batch && !s; b++) {
    size_t n = lens ? lens[b] : strlen(strs[b]);
    s = t->cls->encode(t, strs[b], n, &toks[b]);
    if (s) s = lv_status_wrap(s, "%s: row %d", t->cls->cls, b);
    else if (toks[b].n + 1 > longest) longest = toks[b].n + 1;
  }
  int width = max_length;
  if (!s && t->layout == LV_TOK_LAYOUT_SPM && max_length <= 0) width = longest - (append_eos ? 0 : 1);
  if (!s && width > 0) {
    size_t cells = (size_t)(batch ? batch : 1) * (size_t)width;
    out->ids = malloc(cells * sizeof *out->ids);
    out->labels = malloc(cells * sizeof *out->labels);
    out->paddings = malloc(cells * sizeof *out->paddings);
    if (!out->ids || !out->labels || !out->paddings)
      s = lv_status_make(LV_ERR_RESOURCE, "out of memory for a [%d, %d] batch", batch, width);
  }
  int used = 0;
  for (int b = 0; b < batch && !s && width > 0; b++) {
    size_t o = (size_t)b * (size_t)width;
    int len = lay_row(t, toks[b].v, toks[b].n, width, append_eos, out->ids + o, out->labels + o, out->paddings + o);
    if (len > used) used = len;
  }
  for (int b = 0; b < batch; b++) lv_tok_ids_free(&toks[b]);
  free(toks);
  if (s) {
    lv_tok_batch_free(out);
    return s;
  }
  out->batch = batch;
  out->len = width > 0 ? width : 0;
  bool shrink = !t->pad_to_max_length && t->layout != LV_TOK_LAYOUT_SPM && used < width;
  if (shrink) {
    for (int b = 0; b < batch; b++) {
      memmove(out->ids + (size_t)b * used, out->ids + (size_t)b * width, (size_t)used * sizeof *out->ids);
      memmove(out->labels + (size_t)b * used, out->labels + (size_t)b * width, (size_t)used * sizeof *out->labels);
      memmove(out->paddings + (size_t)b * used, out->paddings + (size_t)b * width,
              (size_t)used * sizeof *out->paddings);
    }
    out->len = used;
  }
  return NULL;
}

lv_status lv_tokenizer_ids_to_strings(const lv_tokenizer *t, const int32_t *ids, int batch, int width,
                                      const int32_t *lens, char **out) {
  for (int b = 0; b < batch; b++) out[b] = NULL;
  for (int b = 0; b < batch; b++) {
    int n = lens[b] < 0 ? 0 : lens[b];
    if (n > width) n = width;
    lv_status s = t->cls->decode(t, ids + (size_t)b * (size_t)width, n, &out[b]);
    if (s) {
      for (int k = 0; k < b; k++) free(out[k]), out[k] = NULL;
      return lv_status_wrap(s, "%s: IdsToStrings row %d", t->cls->cls, b);
    }
  }
  return NULL;
}

lv_status lv_tok_str_append_piece(lv_tok_str *b, const char *p, size_t n) {
  lv_status s = NULL;
  for (size_t k = 0; k < n && !s;) {
    if (k + 3 <= n && !memcmp(p + k, "\xe2\x96\x81", 3)) {
      s = lv_tok_str_append(b, " ", 1);
      k += 3;
    } else {
      s = lv_tok_str_append(b, p + k, 1);
      k++;
    }
  }
  return s;
}
