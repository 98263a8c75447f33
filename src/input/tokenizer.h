/* Tokenizers (Lingvo's lingvo/core/tokenizers.py, reference/lingvo.md §8.3): turn UTF-8
 * strings into piece ids for sequence inputs, and ids back into strings.
 *
 * A tokenizer class is registered by its Lingvo name (AsciiTokenizer,
 * VocabFileTokenizer, WpmTokenizer, SentencePieceTokenizer) with a params constructor
 * that starts from lv_tokenizer_base_params (Lingvo's BaseTokenizer params: vocab_size,
 * append_eos, pad_to_max_length, target_unk_id, target_sos_id, target_eos_id,
 * target_wb_id) and adds its own; lv_tokenizer_create instantiates p.cls.
 *
 * Every class provides encode (one string -> piece ids, without <s>/</s>) and decode
 * (ids -> one string). lv_tokenizer_strings_to_ids lays a batch out as Lingvo does,
 * with the class's own truncation and padding rule (they differ, see lv_tok_layout).
 *
 * Ownership: a tokenizer borrows its frozen params (they must outlive it) and owns
 * everything it loaded (vocab, model). Output buffers belong to the caller (free with
 * lv_tok_batch_free / free). A tokenizer is read-only after create, so one may be used
 * from several threads at once.
 *
 * Untrusted inputs: vocab and .model files are validated; errors name the param, the
 * file, the line or offset and what was expected. Input strings are arbitrary bytes:
 * no class fails on invalid UTF-8 or empty strings (see each class for what invalid
 * UTF-8 becomes). */
#ifndef LV_INPUT_TOKENIZER_H
#define LV_INPUT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "params/params.h"

/* A growable list of ids. */
typedef struct lv_tok_ids {
  int32_t *v;
  int n, cap;
} lv_tok_ids;
lv_status lv_tok_ids_push(lv_tok_ids *a, int32_t id);
void lv_tok_ids_free(lv_tok_ids *a);

/* How StringsToIds lays out one row (Lingvo's rules differ per class):
 *  ASCII_OP  (ascii_to_token_id): tokens cut to max_length-1 when n+1 > max_length;
 *            ids = <s> toks, labels = toks </s>, the </s> slot padded iff !append_eos;
 *            the rest ids = labels = </s>, paddings 1. Width max_length, or the longest
 *            n+1 when !pad_to_max_length.
 *  VOCAB_OP  (str_to_vocab_tokens): tokens fill labels up to max_length (no </s> when
 *            they do), ids[j+1] = tok[j] while j+1 < max_length; otherwise as ASCII_OP.
 *  PAD_OR_TRIM (WpmTokenizer): ids = PadOrTrim(<s> toks (</s>), L, </s>), labels =
 *            PadOrTrim(toks (</s>), L, </s>), paddings 0 on toks (</s>) then 1; with
 *            !pad_to_max_length, L = the longest unpadded row.
 *  SPM       (SentencePieceTokenizer): labels = toks (</s> if the params' append_eos)
 *            padded with target_unk_id to max_length, or to the longest row when
 *            max_length <= 0 (Lingvo's None); ids = <s> + labels[:-1]; paddings 1
 *            after min(len, max_length). append_eos must equal p.append_eos. */
typedef enum { LV_TOK_LAYOUT_ASCII_OP, LV_TOK_LAYOUT_VOCAB_OP, LV_TOK_LAYOUT_PAD_OR_TRIM, LV_TOK_LAYOUT_SPM,
               LV_TOK_LAYOUT_COUNT } lv_tok_layout;

typedef struct lv_tokenizer lv_tokenizer;

typedef struct lv_tokenizer_class {
  const char *cls;
  lv_params *(*params)(void);
  /* p: frozen params (borrowed). Fills a zeroed struct of its own type; returns it. */
  lv_status (*create)(const lv_params *p, lv_tokenizer **out);
  /* Appends the ids of s[0..n) (no <s> / </s>) to out. */
  lv_status (*encode)(const lv_tokenizer *t, const char *s, size_t n, lv_tok_ids *out);
  /* The string of ids[0..n) (malloc'd, NUL-terminated). */
  lv_status (*decode)(const lv_tokenizer *t, const int32_t *ids, int n, char **out);
  void (*destroy)(lv_tokenizer *t);
} lv_tokenizer_class;

/* Every tokenizer struct starts with this; create fills layout, sos/eos/unk. */
struct lv_tokenizer {
  const lv_tokenizer_class *cls;
  const lv_params *p;
  lv_tok_layout layout;
  int32_t sos_id, eos_id, unk_id; /* the ids StringsToIds writes */
  int64_t num_ids; /* the ids it gives are in [0, num_ids) (its vocabulary's size) */
  bool append_eos, pad_to_max_length;
};

/* Lingvo's BaseTokenizer params for class cls. */
lv_params *lv_tokenizer_base_params(const char *cls);
/* Registers every tokenizer class in the params registry. Idempotent. */
void lv_tokenizer_register_all(void);
const lv_tokenizer_class *lv_tokenizer_class_find(const char *cls);
/* Instantiates p.cls (p frozen, borrowed). Errors name "tokenizer.<key>". */
lv_status lv_tokenizer_create(const lv_params *p, lv_tokenizer **out);
void lv_tokenizer_destroy(lv_tokenizer *t);

lv_status lv_tokenizer_encode(const lv_tokenizer *t, const char *s, size_t n, lv_tok_ids *out);
lv_status lv_tokenizer_decode(const lv_tokenizer *t, const int32_t *ids, int n, char **out);

/* A batch on the host: ids, labels [batch, len] int32; paddings [batch, len] float
 * (1.0 on padding). */
typedef struct lv_tok_batch {
  int batch, len;
  int32_t *ids;     /* [batch, len] */
  int32_t *labels;  /* [batch, len] */
  float *paddings;  /* [batch, len] */
} lv_tok_batch;
void lv_tok_batch_free(lv_tok_batch *b);

/* Lingvo's StringsToIds(strs, max_length, external_append_eos): strs[0..batch), lens
 * their byte lengths (NULL: NUL-terminated). append_eos < 0 uses p.append_eos, else
 * 0/1 overrides it. max_length must be > 0 except for SentencePieceTokenizer (<= 0:
 * pad to the longest row). Errors name the row that failed. */
lv_status lv_tokenizer_strings_to_ids(const lv_tokenizer *t, const char *const *strs, const size_t *lens,
                                      int batch, int max_length, int append_eos, lv_tok_batch *out);
/* Lingvo's IdsToStrings(ids [batch, width], lens [batch]): out[b] decodes
 * ids[b, 0..min(max(lens[b], 0), width)). out is an array of batch malloc'd strings. */
lv_status lv_tokenizer_ids_to_strings(const lv_tokenizer *t, const int32_t *ids, int batch, int width,
                                      const int32_t *lens, char **out);

/* ---- helpers for tokenizer implementations ---- */

/* A piece table: strings (any bytes) -> id, and id -> string. */
typedef struct lv_tok_vocab lv_tok_vocab;
lv_tok_vocab *lv_tok_vocab_new(void);
void lv_tok_vocab_free(lv_tok_vocab *v);
/* Maps piece -> id (a later add of the same piece replaces its id, as Lingvo's map
 * does) and id -> piece (ids must be >= 0). */
lv_status lv_tok_vocab_add(lv_tok_vocab *v, const char *piece, size_t n, int32_t id);
/* -1 if absent. */
int32_t lv_tok_vocab_find(const lv_tok_vocab *v, const char *piece, size_t n);
/* NULL if no piece has this id. */
const char *lv_tok_vocab_piece(const lv_tok_vocab *v, int32_t id, size_t *n);
/* Number of distinct pieces. */
int lv_tok_vocab_size(const lv_tok_vocab *v);
/* The largest id added + 1 (0 when empty). */
int32_t lv_tok_vocab_num_ids(const lv_tok_vocab *v);

/* Whether s[0..n) is valid UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF); *bad = the offset of the first bad byte. */
bool lv_utf8_valid(const char *s, size_t n, size_t *bad);
/* SentencePiece's DecodeUTF8: the code point at s[0..n) (n >= 1) and its byte length;
 * invalid sequences give U+FFFD with *len 1. */
uint32_t lv_utf8_decode(const char *s, size_t n, int *len);

/* A growable string. */
typedef struct lv_tok_str {
  char *s;
  size_t n, cap;
} lv_tok_str;
lv_status lv_tok_str_append(lv_tok_str *b, const char *s, size_t n);
/* Appends piece p[0..n) with every "\u2581" (the word-boundary mark of WPM and
 * SentencePiece pieces) turned into a space. */
lv_status lv_tok_str_append_piece(lv_tok_str *b, const char *p, size_t n);

#endif
