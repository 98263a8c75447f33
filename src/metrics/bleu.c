#include "metrics/bleu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const lv_bleu_separator_names[LV_BLEU_SEP_COUNT] = {"none", "bpe", "wpm", "spm"};
_Static_assert(LV_ARRAY_LEN(lv_bleu_separator_names) == LV_BLEU_SEP_COUNT, "one name per separator");

lv_status lv_bleu_init(lv_bleu_scorer *s, int max_ngram, lv_bleu_separator sep) {
  memset(s, 0, sizeof *s);
  if (max_ngram < 1 || max_ngram > LV_BLEU_MAX_ORDER)
    return lv_status_make(LV_ERR_INVALID, "BLEU max_ngram %d: expected 1..%d", max_ngram, LV_BLEU_MAX_ORDER);
  if ((unsigned)sep >= LV_BLEU_SEP_COUNT) return lv_status_make(LV_ERR_INVALID, "BLEU separator %d unknown", (int)sep);
  s->max_ngram = max_ngram;
  s->sep = sep;
  return NULL;
}

/* Bytes of the white-space character at p (Python's str.isspace: ASCII \t\n\v\f\r,
 * \x1c-\x1f and space, and in UTF-8 U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000), or 0. Never reads past a NUL. */
static int space_len(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  if ((p[0] >= 0x09 && p[0] <= 0x0d) || (p[0] >= 0x1c && p[0] <= 0x20)) return 1;
  if (p[0] == 0xc2) return p[1] == 0x85 || p[1] == 0xa0 ? 2 : 0;
  if (p[0] == 0xe1) return p[1] == 0x9a && p[2] == 0x80 ? 3 : 0;
  if (p[0] == 0xe3) return p[1] == 0x80 && p[2] == 0x80 ? 3 : 0;
  if (p[0] != 0xe2) return 0;
  if (p[1] == 0x80)
    return (p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf ? 3 : 0;
  return p[1] == 0x81 && p[2] == 0x9f ? 3 : 0;
}

/* Python's strip(): a copy of s[0..len) without leading and trailing white space. */
static char *strip_copy(const char *s, size_t len) {
  size_t b = 0, e = 0, k;
  while (b < len && (k = (size_t)space_len(s + b)) > 0) b += k;
  for (size_t i = b; i < len;) {
    k = (size_t)space_len(s + i);
    if (k) {
      i += k;
    } else {
      i++;
      e = i;
    }
  }
  if (e < b) e = b;
  char *out = malloc(e - b + 1);
  if (!out) return NULL;
  memcpy(out, s + b, e - b);
  out[e - b] = '\0';
  return out;
}

lv_status lv_bleu_unsegment(lv_bleu_separator sep, const char *line, char **out) {
  size_t n = strlen(line), m = 0;
  char *buf = malloc(n + 1);
  if (!buf) return lv_status_make(LV_ERR_RESOURCE, "BLEU: out of memory un-segmenting %zu bytes", n);
  if (sep == LV_BLEU_SEP_BPE) {
    for (size_t i = 0; i < n;) {
      if (!strncmp(line + i, "@@ ", 3)) i += 3;
      else buf[m++] = line[i++];
    }
  } else if (sep == LV_BLEU_SEP_WPM || sep == LV_BLEU_SEP_SPM) {
    /* All ASCII spaces go first; only then does U+2581 become one. */
    for (size_t i = 0; i < n;) {
      if (line[i] == ' ') i++;
      else if (!strncmp(line + i, "\xe2\x96\x81", 3)) buf[m++] = ' ', i += 3;
      else buf[m++] = line[i++];
    }
  } else {
    memcpy(buf, line, n);
    m = n;
  }
  buf[m] = '\0';
  if (sep == LV_BLEU_SEP_NONE) {
    *out = buf;
    return NULL;
  }
  *out = strip_copy(buf, m);
  free(buf);
  return *out ? NULL : lv_status_make(LV_ERR_RESOURCE, "BLEU: out of memory un-segmenting %zu bytes", n);
}

typedef struct token {
  const char *p;
  size_t len;
} token;

/* One n-gram: its first token and its order. */
typedef struct ngram {
  const token *t;
  int n;
} ngram;

static int cmp_ngram(const void *a, const void *b) {
  const ngram *x = a, *y = b;
  for (int i = 0; i < x->n; i++) {
    const token *u = &x->t[i], *v = &y->t[i];
    size_t l = u->len < v->len ? u->len : v->len;
    int c = memcmp(u->p, v->p, l);
    if (c) return c;
    if (u->len != v->len) return u->len < v->len ? -1 : 1;
  }
  return 0;
}

/* Splits s on white space; *toks points into s. */
static lv_status tokenize(const char *s, token **toks, int64_t *n) {
  size_t cap = 16;
  int64_t k = 0;
  token *t = malloc(cap * sizeof *t);
  if (!t) return lv_status_make(LV_ERR_RESOURCE, "BLEU: out of memory tokenizing");
  const char *p = s;
  while (*p) {
    int sp = space_len(p);
    if (sp) {
      p += sp;
      continue;
    }
    const char *start = p;
    while (*p && !space_len(p)) p++;
    if ((size_t)k == cap) {
      cap *= 2;
      token *nt = realloc(t, cap * sizeof *t);
      if (!nt) {
        free(t);
        return lv_status_make(LV_ERR_RESOURCE, "BLEU: out of memory tokenizing");
      }
      t = nt;
    }
    t[k].p = start;
    t[k++].len = (size_t)(p - start);
  }
  *toks = t;
  *n = k;
  return NULL;
}

/* The n-grams of order n of t[0..len), sorted, into grams; returns their count. */
static int64_t sorted_ngrams(const token *t, int64_t len, int n, ngram *grams) {
  int64_t m = len - n + 1;
  if (m <= 0) return 0;
  for (int64_t i = 0; i < m; i++) grams[i] = (ngram){t + i, n};
  qsort(grams, (size_t)m, sizeof *grams, cmp_ngram);
  return m;
}

/* Sum over distinct hypothesis n-grams of min(count in hyp, count in ref). */
static int64_t clipped_matches(const ngram *hyp, int64_t nh, const ngram *ref, int64_t nr) {
  int64_t matches = 0, i = 0, j = 0;
  while (i < nh) {
    int64_t ie = i + 1;
    while (ie < nh && !cmp_ngram(&hyp[i], &hyp[ie])) ie++;
    while (j < nr && cmp_ngram(&ref[j], &hyp[i]) < 0) j++;
    int64_t je = j;
    while (je < nr && !cmp_ngram(&ref[je], &hyp[i])) je++;
    int64_t ch = ie - i, cr = je - j;
    matches += ch < cr ? ch : cr;
    i = ie;
    j = je;
  }
  return matches;
}

lv_status lv_bleu_add_sentence(lv_bleu_scorer *s, const char *ref, const char *hyp) {
  LV_ASSERT(s->max_ngram >= 1 && s->max_ngram <= LV_BLEU_MAX_ORDER);
  char *r = NULL, *h = NULL;
  token *rt = NULL, *ht = NULL;
  ngram *rg = NULL, *hg = NULL;
  int64_t nr = 0, nh = 0;
  lv_status st = lv_bleu_unsegment(s->sep, ref, &r);
  if (!st) st = lv_bleu_unsegment(s->sep, hyp, &h);
  if (!st) st = tokenize(r, &rt, &nr);
  if (!st) st = tokenize(h, &ht, &nh);
  if (!st) {
    rg = malloc((size_t)(nr + 1) * sizeof *rg);
    hg = malloc((size_t)(nh + 1) * sizeof *hg);
    if (!rg || !hg) st = lv_status_make(LV_ERR_RESOURCE, "BLEU: out of memory counting n-grams");
  }
  if (!st) {
    s->ref_tokens += nr;
    s->hyp_tokens += nh;
    for (int n = 1; n <= s->max_ngram; n++) {
      int64_t mr = sorted_ngrams(rt, nr, n, rg), mh = sorted_ngrams(ht, nh, n, hg);
      s->matches[n - 1] += clipped_matches(hg, mh, rg, mr);
      s->totals[n - 1] += mh;
    }
  }
  free(rg);
  free(hg);
  free(rt);
  free(ht);
  free(r);
  free(h);
  return st;
}

double lv_bleu_score(const lv_bleu_scorer *s) {
  double score = 0.0;
  int nonzero = 0;
  for (int i = 0; i < s->max_ngram; i++) {
    if (s->matches[i] > 0 && s->totals[i] > 0) {
      score += log((double)s->matches[i] / (double)s->totals[i]);
      nonzero++;
    }
  }
  if (!nonzero) return 0.0;
  double precision = exp(score / nonzero);
  double brevity = 1.0;
  if (s->hyp_tokens < s->ref_tokens) brevity = exp(1.0 - (double)s->ref_tokens / (double)s->hyp_tokens);
  return brevity * precision;
}
