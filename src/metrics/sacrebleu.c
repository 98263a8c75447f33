#include "metrics/sacrebleu.h"

#include "metrics/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const lv_sacrebleu_tokenizer_names[LV_SACREBLEU_TOK_COUNT] = {"13a", "none"};
const char *const lv_sacrebleu_smooth_names[LV_SACREBLEU_SMOOTH_COUNT] = {"exp", "floor", "add-k", "none"};
_Static_assert(LV_ARRAY_LEN(lv_sacrebleu_tokenizer_names) == LV_SACREBLEU_TOK_COUNT, "one name per tokenizer");
_Static_assert(LV_ARRAY_LEN(lv_sacrebleu_smooth_names) == LV_SACREBLEU_SMOOTH_COUNT, "one name per method");

static lv_status parse_name(const char *what, const char *name, const char *const *names, int n, int *out) {
  for (int i = 0; i < n; i++)
    if (!strcmp(name, names[i])) {
      *out = i;
      return NULL;
    }
  char list[128] = "";
  for (int i = 0; i < n; i++) {
    size_t l = strlen(list);
    snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", names[i]);
  }
  return lv_status_make(LV_ERR_INVALID, "sacrebleu %s '%s' unknown: expected one of %s", what, name, list);
}

lv_status lv_sacrebleu_tokenizer_parse(const char *name, lv_sacrebleu_tokenizer *out) {
  int i = 0;
  LV_TRY(parse_name("tokenizer", name, lv_sacrebleu_tokenizer_names, LV_SACREBLEU_TOK_COUNT, &i));
  *out = (lv_sacrebleu_tokenizer)i;
  return NULL;
}

lv_status lv_sacrebleu_smooth_parse(const char *name, lv_sacrebleu_smooth *out) {
  int i = 0;
  LV_TRY(parse_name("smooth method", name, lv_sacrebleu_smooth_names, LV_SACREBLEU_SMOOTH_COUNT, &i));
  *out = (lv_sacrebleu_smooth)i;
  return NULL;
}

lv_sacrebleu_opts lv_sacrebleu_default_opts(void) {
  return (lv_sacrebleu_opts){.tokenizer = LV_SACREBLEU_TOK_13A,
                             .smooth = LV_SACREBLEU_SMOOTH_EXP,
                             .smooth_value = NAN,
                             .max_ngram_order = 4,
                             .effective_order = false};
}

lv_status lv_sacrebleu_init(lv_sacrebleu *s, const lv_sacrebleu_opts *opts) {
  memset(s, 0, sizeof *s);
  lv_sacrebleu_opts o = opts ? *opts : lv_sacrebleu_default_opts();
  if ((unsigned)o.tokenizer >= LV_SACREBLEU_TOK_COUNT)
    return lv_status_make(LV_ERR_INVALID, "sacrebleu tokenizer %d unknown", (int)o.tokenizer);
  if ((unsigned)o.smooth >= LV_SACREBLEU_SMOOTH_COUNT)
    return lv_status_make(LV_ERR_INVALID, "sacrebleu smooth method %d unknown", (int)o.smooth);
  if (o.max_ngram_order < 1 || o.max_ngram_order > LV_SACREBLEU_MAX_ORDER)
    return lv_status_make(LV_ERR_INVALID, "sacrebleu max_ngram_order %d: expected 1..%d", o.max_ngram_order,
                          LV_SACREBLEU_MAX_ORDER);
  if (!isnan(o.smooth_value) && !(o.smooth_value >= 0 && isfinite(o.smooth_value)))
    return lv_status_make(LV_ERR_INVALID, "sacrebleu smooth_value %g: expected a finite value >= 0", o.smooth_value);
  s->opts = o;
  return NULL;
}

/* ---- Tokenization ---------------------------------------------------------------- */

/* Bytes of the white-space character at p as Python's str.split() and str.rstrip() see
 * it (ASCII \t\n\v\f\r, \x1c-\x1f and space; in UTF-8 U+0085, U+00A0, U+1680,
 * U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), or 0. p is NUL-terminated:
 * a byte is read only when the bytes before it matched, so never past the NUL. */
static int ws_len(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  unsigned c = p[0];
  if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20)) return 1;
  if (c < 0xc2) return 0;
  if (c == 0xc2) return p[1] == 0x85 || p[1] == 0xa0 ? 2 : 0;
  if (c == 0xe1) return p[1] == 0x9a && p[2] == 0x80 ? 3 : 0;
  if (c == 0xe3) return p[1] == 0x80 && p[2] == 0x80 ? 3 : 0;
  if (c != 0xe2) return 0;
  if (p[1] == 0x80) return (p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf ? 3 : 0;
  return p[1] == 0x81 && p[2] == 0x9f ? 3 : 0;
}

/* Length of s[0..n) without its trailing white space (str.rstrip()). */
static size_t rstrip_len(const char *s, size_t n) {
  size_t end = 0;
  for (size_t i = 0; i < n;) {
    int k = ws_len(s + i);
    if (k) {
      i += (size_t)k;
    } else {
      i++;
      end = i;
    }
  }
  return end;
}

/* In place: every non-overlapping occurrence of from (left to right, as str.replace)
 * becomes to, which is no longer than from. Returns the new length; s stays
 * NUL-terminated. */
static size_t replace_all(char *s, size_t n, const char *from, const char *to) {
  size_t lf = strlen(from), lt = strlen(to), w = 0;
  for (size_t r = 0; r < n;) {
    if (r + lf <= n && !memcmp(s + r, from, lf)) {
      memcpy(s + w, to, lt);
      w += lt;
      r += lf;
    } else {
      s[w++] = s[r++];
    }
  }
  s[w] = '\0';
  return w;
}

/* tokenizer_re.py's first rule's class: ASCII { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * +
 * : ; < = > ? @ / (not ' , - . nor digits or letters). */
static bool is_punct13a(unsigned char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_dot_comma(unsigned char c) { return c == '.' || c == ','; }

/* re.sub of a two-character pattern (a)(b) over in[0..n): the leftmost match, then the
 * search goes on after it. Every class below is about ASCII bytes, and a UTF-8
 * multi-byte character is a run of non-ASCII bytes, so matching bytes matches the code
 * points. which: 2 "([^0-9])([\.,])" -> "\1 \2 ", 3 "([\.,])([^0-9])" -> " \1 \2",
 * 4 "([0-9])(-)" -> "\1 \2 ". Writes to out unless it is NULL; returns the output length
 * (out then holds it and a NUL). */
static size_t sub_pair(int which, const char *in, size_t n, char *out) {
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    unsigned char a = (unsigned char)in[i], b = i + 1 < n ? (unsigned char)in[i + 1] : 0;
    bool match = i + 1 < n && (which == 2   ? !is_digit(a) && is_dot_comma(b)
                               : which == 3 ? is_dot_comma(a) && !is_digit(b)
                                            : is_digit(a) && b == '-');
    if (!match) {
      if (out) out[w] = in[i];
      w++, i++;
      continue;
    }
    if (out) {
      char *o = out + w;
      if (which == 3) *o++ = ' ';
      *o++ = (char)a;
      *o++ = ' ';
      *o++ = (char)b;
      if (which != 3) *o++ = ' ';
    }
    w += 4;
    i += 2;
  }
  if (out) out[w] = '\0';
  return w;
}

/* tokenizer_re.py's first rule, "([\{-\~\[-\` -\&\(-\+\:-\@\/])" -> " \1 ", like
 * sub_pair. */
static size_t sub_punct(const char *in, size_t n, char *out) {
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    bool p = is_punct13a((unsigned char)in[i]);
    if (out) {
      if (p) out[w++] = ' ';
      out[w++] = in[i];
      if (p) out[w++] = ' ';
    } else {
      w += p ? 3 : 1;
    }
  }
  if (out) out[w] = '\0';
  return w;
}

/* ' '.join(s.split()) of s[0..n) into out (at least n + 1 bytes); returns its length. */
static size_t split_join(const char *s, size_t n, char *out) {
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    int k = ws_len(s + i);
    if (k) {
      i += (size_t)k;
      continue;
    }
    if (w) out[w++] = ' ';
    while (i < n && !ws_len(s + i)) out[w++] = s[i++];
  }
  out[w] = '\0';
  return w;
}

/* One rewrite pass of *buf (length *n) into a new buffer of the exact size. */
static bool rewrite(char **buf, size_t *n, int which) {
  size_t m = which == 1 ? sub_punct(*buf, *n, NULL) : sub_pair(which, *buf, *n, NULL);
  char *out = malloc(m + 1);
  if (!out) return false;
  if (which == 1) sub_punct(*buf, *n, out);
  else sub_pair(which, *buf, *n, out);
  free(*buf);
  *buf = out;
  *n = m;
  return true;
}

lv_status lv_sacrebleu_tokenize(lv_sacrebleu_tokenizer tok, const char *line, char **out) {
  *out = NULL;
  if ((unsigned)tok >= LV_SACREBLEU_TOK_COUNT)
    return lv_status_make(LV_ERR_INVALID, "sacrebleu tokenizer %d unknown", (int)tok);
  size_t n = rstrip_len(line, strlen(line));
  if (n > SIZE_MAX / 8) return lv_status_make(LV_ERR_RESOURCE, "sacrebleu: a %zu-byte segment is too long", n);
  char *a = malloc(n + 3);
  if (!a) return lv_status_make(LV_ERR_RESOURCE, "sacrebleu: out of memory tokenizing a %zu-byte segment", n);
  size_t m = n;
  if (tok == LV_SACREBLEU_TOK_13A) {
    /* tokenizer_13a.py: the language-independent part, on " line ". */
    a[0] = ' ';
    memcpy(a + 1, line, n);
    a[n + 1] = '\0';
    m = replace_all(a + 1, m, "<skipped>", "");
    m = replace_all(a + 1, m, "-\n", "");
    for (size_t i = 1; i <= m; i++)
      if (a[i] == '\n') a[i] = ' ';
    if (memchr(a + 1, '&', m)) {
      m = replace_all(a + 1, m, "&quot;", "\"");
      m = replace_all(a + 1, m, "&amp;", "&");
      m = replace_all(a + 1, m, "&lt;", "<");
      m = replace_all(a + 1, m, "&gt;", ">");
    }
    a[m + 1] = ' ';
    a[m + 2] = '\0';
    m += 2;
    /* tokenizer_re.py's four regexes, in order. */
    for (int which = 1; which <= 4; which++) {
      if (!rewrite(&a, &m, which)) {
        free(a);
        return lv_status_make(LV_ERR_RESOURCE, "sacrebleu: out of memory tokenizing a %zu-byte segment", n);
      }
    }
  } else {
    memcpy(a, line, n);
    a[n] = '\0';
  }
  /* In place: the output is never longer than what it has read. */
  m = split_join(a, m, a);
  char *shrunk = realloc(a, m + 1);
  *out = shrunk ? shrunk : a;
  return NULL;
}

/* ---- N-gram statistics ------------------------------------------------------------ */

/* Segments are tokenized to tokens joined by single spaces, so an n-gram is a byte range
 * and two n-grams are equal exactly when their bytes are. The statistics go one order at
 * a time through a table of the hypothesis's n-grams of that order; the references only
 * look up what the hypothesis has (others cannot match), so the table never holds more
 * than the hypothesis's token count. */
typedef struct ngram_entry {
  uint64_t hash;
  uint32_t off, len; /* the n-gram's bytes in the hypothesis; len 0: an empty slot */
  int32_t ref_id;    /* the reference that last counted it */
  uint32_t cur;      /* its count in that reference */
  uint32_t ref_max;  /* the max count over the references */
  uint32_t hyp;      /* its count in the hypothesis */
} ngram_entry;

typedef struct segment {
  char *txt;      /* tokenized */
  size_t *starts; /* token start offsets; starts[ntok] = strlen(txt) + 1 */
  int64_t ntok;
} segment;

static lv_status segment_make(lv_sacrebleu_tokenizer tok, const char *line, segment *sg) {
  LV_TRY(lv_sacrebleu_tokenize(tok, line, &sg->txt));
  size_t len = strlen(sg->txt), n = len ? 1 : 0;
  /* Counts and offsets are 32-bit in the table. */
  if (len >= UINT32_MAX)
    return lv_status_make(LV_ERR_RESOURCE, "sacrebleu: a segment of %zu bytes after tokenization is too long", len);
  for (size_t i = 0; i < len; i++) n += sg->txt[i] == ' ';
  sg->starts = malloc((n + 1) * sizeof *sg->starts);
  if (!sg->starts) return lv_status_make(LV_ERR_RESOURCE, "sacrebleu: out of memory splitting %zu tokens", n);
  size_t k = 0;
  if (len) sg->starts[k++] = 0;
  for (size_t i = 0; i < len; i++)
    if (sg->txt[i] == ' ') sg->starts[k++] = i + 1;
  sg->starts[k] = len + 1;
  sg->ntok = (int64_t)n;
  return NULL;
}

/* FNV-1a of the n-gram of order n at token i. */
static uint64_t ngram_hash(const segment *sg, int64_t i, int n, size_t *off, size_t *len) {
  *off = sg->starts[i];
  *len = sg->starts[i + n] - 1 - *off;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t k = 0; k < *len; k++) {
    h ^= (unsigned char)sg->txt[*off + k];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* The entry of the n-gram s[off..off+len) with hash h, or its empty slot. */
static ngram_entry *slot_of(ngram_entry *t, size_t mask, const char *hyp, const char *s, size_t off, size_t len,
                            uint64_t h) {
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    ngram_entry *e = &t[i];
    if (!e->len || (e->hash == h && e->len == len && !memcmp(hyp + e->off, s + off, len))) return e;
  }
}

static int64_t closest_ref_len(int64_t hyp_len, const segment *refs, int nrefs) {
  int64_t best_diff = -1, best = -1;
  for (int r = 0; r < nrefs; r++) {
    int64_t l = refs[r].ntok, d = hyp_len > l ? hyp_len - l : l - hyp_len;
    if (best_diff == -1 || d < best_diff) best_diff = d, best = l;
    else if (d == best_diff && l < best) best = l;
  }
  return best;
}

lv_status lv_sacrebleu_add(lv_sacrebleu *s, const char *hyp, const char *const *refs, int nrefs) {
  const int order = s->opts.max_ngram_order;
  LV_ASSERT(order >= 1 && order <= LV_SACREBLEU_MAX_ORDER);
  if (nrefs < 1) return lv_status_make(LV_ERR_INVALID, "sacrebleu: a segment needs at least one reference, got %d", nrefs);
  if (!hyp) return lv_status_make(LV_ERR_INVALID, "sacrebleu: the hypothesis is NULL");
  for (int r = 0; r < nrefs; r++)
    if (!refs[r]) return lv_status_make(LV_ERR_INVALID, "sacrebleu: reference %d of %d is NULL", r + 1, nrefs);
  segment *sg = calloc((size_t)nrefs + 1, sizeof *sg); /* sg[0] the hypothesis */
  ngram_entry *t = NULL;
  lv_status st = sg ? NULL : lv_status_make(LV_ERR_RESOURCE, "sacrebleu: out of memory");
  for (int i = 0; !st && i <= nrefs; i++) st = segment_make(s->opts.tokenizer, i ? refs[i - 1] : hyp, &sg[i]);
  size_t cap = 16;
  if (!st) {
    while (cap < 2 * (size_t)sg[0].ntok) cap *= 2;
    t = malloc(cap * sizeof *t);
    if (!t) st = lv_status_make(LV_ERR_RESOURCE, "sacrebleu: out of memory counting %lld n-grams", (long long)sg[0].ntok);
  }
  if (!st) {
    const segment *h = &sg[0];
    lv_sacrebleu_stats *x = &s->stats;
    for (int n = 1; n <= order && n <= h->ntok; n++) {
      memset(t, 0, cap * sizeof *t);
      size_t off, len;
      for (int64_t i = 0; i + n <= h->ntok; i++) {
        uint64_t hash = ngram_hash(h, i, n, &off, &len);
        ngram_entry *e = slot_of(t, cap - 1, h->txt, h->txt, off, len, hash);
        if (!e->len) *e = (ngram_entry){.hash = hash, .off = (uint32_t)off, .len = (uint32_t)len, .ref_id = -1};
        e->hyp++;
      }
      for (int r = 1; r <= nrefs; r++) {
        for (int64_t i = 0; i + n <= sg[r].ntok; i++) {
          uint64_t hash = ngram_hash(&sg[r], i, n, &off, &len);
          ngram_entry *e = slot_of(t, cap - 1, h->txt, sg[r].txt, off, len, hash);
          if (!e->len) continue;
          if (e->ref_id != r) e->ref_id = r, e->cur = 0;
          if (++e->cur > e->ref_max) e->ref_max = e->cur;
        }
      }
      for (size_t i = 0; i < cap; i++) {
        const ngram_entry *e = &t[i];
        if (!e->len) continue;
        x->total[n - 1] += e->hyp;
        x->correct[n - 1] += e->hyp < e->ref_max ? e->hyp : e->ref_max;
      }
    }
    x->sys_len += h->ntok;
    x->ref_len += closest_ref_len(h->ntok, sg + 1, nrefs);
    s->segments++;
  }
  free(t);
  for (int i = 0; sg && i <= nrefs; i++) {
    free(sg[i].txt);
    free(sg[i].starts);
  }
  free(sg);
  return st;
}

lv_status lv_sacrebleu_add_sentence(lv_sacrebleu *s, const char *ref, const char *hyp) {
  return lv_sacrebleu_add(s, hyp, &ref, 1);
}

/* ---- Score -------------------------------------------------------------------------- */

/* utils.my_log: log floored for 0. */
static double floored_log(double x) { return x == 0.0 ? -9999999999.0 : log(x); }

void lv_sacrebleu_compute(const lv_sacrebleu_opts *opts, const lv_sacrebleu_stats *st, lv_sacrebleu_score *out) {
  const int order = opts->max_ngram_order;
  LV_ASSERT(order >= 1 && order <= LV_SACREBLEU_MAX_ORDER);
  memset(out, 0, sizeof *out);
  out->max_ngram_order = order;
  out->sys_len = st->sys_len;
  out->ref_len = st->ref_len;
  out->ratio = st->ref_len ? (double)st->sys_len / (double)st->ref_len : 0.0;
  double v = opts->smooth_value;
  if (isnan(v)) v = opts->smooth == LV_SACREBLEU_SMOOTH_FLOOR ? 0.1 : opts->smooth == LV_SACREBLEU_SMOOTH_ADD_K ? 1.0 : 0.0;

  out->bp = 1.0;
  if (st->sys_len < st->ref_len)
    out->bp = st->sys_len > 0 ? exp(1.0 - (double)st->ref_len / (double)st->sys_len) : 0.0;

  bool any = false;
  for (int n = 0; n < order; n++) any |= st->correct[n] != 0;
  if (!any) return; /* sacrebleu #141: no match at all is 0 whatever the smoothing */

  double smooth_mteval = 1.0;
  int eff = order;
  for (int n = 1; n <= order; n++) {
    double correct = (double)st->correct[n - 1], total = (double)st->total[n - 1];
    if (opts->smooth == LV_SACREBLEU_SMOOTH_ADD_K && n > 1) correct += v, total += v;
    if (total == 0) break;
    if (opts->effective_order) eff = n;
    if (correct == 0) {
      if (opts->smooth == LV_SACREBLEU_SMOOTH_EXP) {
        smooth_mteval *= 2;
        out->precisions[n - 1] = 100. / (smooth_mteval * total);
      } else if (opts->smooth == LV_SACREBLEU_SMOOTH_FLOOR) {
        out->precisions[n - 1] = 100. * v / total;
      }
    } else {
      out->precisions[n - 1] = 100. * correct / total;
    }
  }
  double sum = 0;
  for (int n = 0; n < eff; n++) sum += floored_log(out->precisions[n]);
  out->score = out->bp * exp(sum / eff);
}

void lv_sacrebleu_result(const lv_sacrebleu *s, lv_sacrebleu_score *out) { lv_sacrebleu_compute(&s->opts, &s->stats, out); }

double lv_sacrebleu_value(const lv_sacrebleu *s) {
  lv_sacrebleu_score r;
  lv_sacrebleu_result(s, &r);
  return r.score;
}

int lv_sacrebleu_format(const lv_sacrebleu_score *r, char *buf, size_t n) {
  char prec[LV_SACREBLEU_MAX_ORDER * 12] = "";
  size_t w = 0;
  for (int i = 0; i < r->max_ngram_order; i++)
    w += (size_t)snprintf(prec + w, sizeof prec - w, "%s%.1f", i ? "/" : "", r->precisions[i]);
  return snprintf(buf, n, "BLEU = %.2f %s (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", r->score, prec,
                  r->bp, r->ratio, (long long)r->sys_len, (long long)r->ref_len);
}

int lv_sacrebleu_signature(const lv_sacrebleu_opts *opts, int nrefs, char *buf, size_t n) {
  char nr[16], smooth[48];
  if (nrefs < 0) snprintf(nr, sizeof nr, "var");
  else snprintf(nr, sizeof nr, "%d", nrefs);
  const char *name = (unsigned)opts->smooth < LV_SACREBLEU_SMOOTH_COUNT ? lv_sacrebleu_smooth_names[opts->smooth] : "?";
  if (opts->smooth == LV_SACREBLEU_SMOOTH_FLOOR || opts->smooth == LV_SACREBLEU_SMOOTH_ADD_K) {
    double v = opts->smooth_value;
    if (isnan(v)) v = opts->smooth == LV_SACREBLEU_SMOOTH_FLOOR ? 0.1 : 1.0;
    snprintf(smooth, sizeof smooth, "%s[%.2f]", name, v);
  } else {
    snprintf(smooth, sizeof smooth, "%s", name);
  }
  const char *tok = (unsigned)opts->tokenizer < LV_SACREBLEU_TOK_COUNT ? lv_sacrebleu_tokenizer_names[opts->tokenizer] : "?";
  return snprintf(buf, n, "nrefs:%s|case:mixed|eff:%s|tok:%s|smooth:%s", nr, opts->effective_order ? "yes" : "no",
                  tok, smooth);
}

/* ---- as a decoder metric ---- */

static lv_status metric_value(const void *ctx, double *value) {
  *value = lv_sacrebleu_value(ctx);
  return NULL;
}

static int metric_summary_count(const void *ctx) {
  (void)ctx;
  return 1;
}

static lv_status metric_summary(const void *ctx, const char *name, lv_summary_value *sv) {
  if (strlen(name) >= sizeof sv->tag)
    return lv_status_make(LV_ERR_INVALID, "metric name %s: longer than %zu characters", name, sizeof sv->tag - 1);
  snprintf(sv->tag, sizeof sv->tag, "%s", name);
  sv->value = lv_sacrebleu_value(ctx);
  return NULL;
}

static const lv_metric_custom_ops kSacrebleuMetricOps = {.kind_name = "SacreBleuMetric",
                                                         .value = metric_value,
                                                         .summary_count = metric_summary_count,
                                                         .summary = metric_summary,
                                                         .free = free};

lv_metric *lv_sacrebleu_metric_new(void) {
  lv_sacrebleu *sb = malloc(sizeof *sb);
  if (!sb) return NULL;
  lv_status s = lv_sacrebleu_init(sb, NULL);
  LV_ASSERTF(!s, "%s", lv_status_msg(s)); /* the default options are valid */
  return lv_metric_custom_new(&kSacrebleuMetricOps, sb);
}

lv_status lv_sacrebleu_metric_add(lv_metric *m, const char *ref, const char *hyp) {
  return lv_sacrebleu_add_sentence(lv_metric_custom_ctx(m, &kSacrebleuMetricOps), ref, hyp);
}
