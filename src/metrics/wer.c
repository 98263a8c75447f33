#include "metrics/wer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 and character classes ---- */

/* The code point at p (n bytes, *len set); a malformed byte is itself (len 1). */
static uint32_t utf8_at(const char *p, size_t n, int *len) {
  const unsigned char *u = (const unsigned char *)p;
  int l = u[0] < 0x80 ? 1 : (u[0] >> 5) == 6 ? 2 : (u[0] >> 4) == 14 ? 3 : (u[0] >> 3) == 30 ? 4 : 0;
  if (l == 0 || (size_t)l > n) {
    *len = 1;
    return u[0];
  }
  uint32_t c = l == 1 ? u[0] : l == 2 ? u[0] & 0x1f : l == 3 ? u[0] & 0x0f : u[0] & 0x07;
  for (int i = 1; i < l; i++) {
    if ((u[i] & 0xc0) != 0x80) {
      *len = 1;
      return u[0];
    }
    c = (c << 6) | (u[i] & 0x3f);
  }
  *len = l;
  return c;
}

/* Unicode general category P (see the header for the scripts covered). */
static const uint32_t kPunct[][2] = {
    {0x21, 0x23},     {0x25, 0x2a},     {0x2c, 0x2f},     {0x3a, 0x3b},     {0x3f, 0x40},     {0x5b, 0x5d},
    {0x5f, 0x5f},     {0x7b, 0x7b},     {0x7d, 0x7d},     {0xa1, 0xa1},     {0xa7, 0xa7},     {0xab, 0xab},
    {0xb6, 0xb7},     {0xbb, 0xbb},     {0xbf, 0xbf},     {0x37e, 0x37e},   {0x387, 0x387},   {0x55a, 0x55f},
    {0x589, 0x58a},   {0x5be, 0x5be},   {0x5c0, 0x5c0},   {0x5c3, 0x5c3},   {0x5c6, 0x5c6},   {0x5f3, 0x5f4},
    {0x609, 0x60a},   {0x60c, 0x60d},   {0x61b, 0x61b},   {0x61d, 0x61f},   {0x66a, 0x66d},   {0x6d4, 0x6d4},
    {0x964, 0x965},   {0x970, 0x970},   {0x2010, 0x2027}, {0x2030, 0x2043}, {0x2045, 0x2051}, {0x2053, 0x205e},
    {0x207d, 0x207e}, {0x208d, 0x208e}, {0x2308, 0x230b}, {0x2329, 0x232a}, {0x2768, 0x2775}, {0x27c5, 0x27c6},
    {0x27e6, 0x27ef}, {0x2983, 0x2998}, {0x29d8, 0x29db}, {0x29fc, 0x29fd}, {0x2cf9, 0x2cfc}, {0x2cfe, 0x2cff},
    {0x2e00, 0x2e2e}, {0x2e30, 0x2e4f}, {0x3001, 0x3003}, {0x3008, 0x3011}, {0x3014, 0x301f}, {0x3030, 0x3030},
    {0x303d, 0x303d}, {0x30a0, 0x30a0}, {0x30fb, 0x30fb}, {0xfd3e, 0xfd3f}, {0xfe10, 0xfe19}, {0xfe30, 0xfe52},
    {0xfe54, 0xfe61}, {0xfe63, 0xfe63}, {0xfe68, 0xfe68}, {0xfe6a, 0xfe6b}, {0xff01, 0xff03}, {0xff05, 0xff0a},
    {0xff0c, 0xff0f}, {0xff1a, 0xff1b}, {0xff1f, 0xff20}, {0xff3b, 0xff3d}, {0xff3f, 0xff3f}, {0xff5b, 0xff5b},
    {0xff5d, 0xff5d}, {0xff5f, 0xff65},
};

static bool is_punct(uint32_t c) {
  for (size_t i = 0; i < sizeof kPunct / sizeof kPunct[0]; i++)
    if (c >= kPunct[i][0] && c <= kPunct[i][1]) return true;
  return false;
}

/* Python's str.split() white space (str.isspace), as UTF-8 bytes at p: its length or 0. */
static int py_space(const char *p, size_t n) {
  unsigned char c = (unsigned char)*p;
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  if (c < 0x80) return 0;
  int l;
  uint32_t u = utf8_at(p, n, &l);
  bool sp = u == 0x85 || u == 0xa0 || u == 0x1680 || (u >= 0x2000 && u <= 0x200a) || u == 0x2028 || u == 0x2029 ||
            u == 0x202f || u == 0x205f || u == 0x3000;
  return sp ? l : 0;
}

/* RE2's \s: [\t\n\f\r ]. */
static bool re2_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }
/* tf.strings.strip (absl's ASCII white space, \v included). */
static bool ascii_space(char c) { return re2_space(c) || c == '\v'; }

/* ---- tokens ---- */

typedef struct tokens {
  const char **p; /* [n] starts, into the string tokenized */
  int *len;       /* [n] byte lengths */
  int n;
} tokens;

static void tokens_free(tokens *t) {
  free(t->p);
  free(t->len);
  memset(t, 0, sizeof *t);
}

/* Python's s.split() (py = true) or tf.string_split(s, ' ') (py = false: single spaces
 * separate, empty tokens dropped). */
static lv_status tokenize(const char *s, bool py, tokens *t) {
  memset(t, 0, sizeof *t);
  size_t n = strlen(s);
  t->p = malloc(sizeof(char *) * (n / 2 + 1));
  t->len = malloc(sizeof(int) * (n / 2 + 1));
  if (!t->p || !t->len) {
    tokens_free(t);
    return lv_status_make(LV_ERR_RESOURCE, "wer: out of memory tokenizing %zu bytes", n);
  }
  size_t i = 0;
  while (i < n) {
    int sp = py ? py_space(s + i, n - i) : s[i] == ' ';
    if (sp) {
      i += (size_t)sp;
      continue;
    }
    size_t b = i;
    while (i < n && !(py ? py_space(s + i, n - i) : s[i] == ' ')) i++;
    t->p[t->n] = s + b;
    t->len[t->n] = (int)(i - b);
    t->n++;
  }
  return NULL;
}

static bool tok_eq(const tokens *a, int i, const tokens *b, int j) {
  return a->len[i] == b->len[j] && memcmp(a->p[i], b->p[j], (size_t)a->len[i]) == 0;
}

/* levenshtein_distance.LevenshteinDistance, rows over the reference, one per hypothesis
 * token. eq(i_ref, j_hyp). */
typedef bool (*eq_fn)(const void *ctx, int r, int h);

static lv_status levenshtein(int n_ref, int n_hyp, eq_fn eq, const void *ctx, lv_edit_stats *out) {
  lv_edit_stats *e = malloc(sizeof *e * (size_t)(n_ref + 1)), *cur = malloc(sizeof *cur * (size_t)(n_ref + 1));
  if (!e || !cur) {
    free(e);
    free(cur);
    return lv_status_make(LV_ERR_RESOURCE, "wer: out of memory for %d reference words", n_ref);
  }
  for (int i = 0; i <= n_ref; i++) e[i] = (lv_edit_stats){0, 0, i, i};
  for (int h = 1; h <= n_hyp; h++) {
    cur[0] = e[0];
    cur[0].ins++;
    cur[0].total++;
    for (int r = 1; r <= n_ref; r++) {
      bool same = eq(ctx, r - 1, h - 1);
      int64_t ins = e[r].total + 1, del = cur[r - 1].total + 1, sub = e[r - 1].total + (same ? 0 : 1);
      if (sub < ins && sub < del) {
        cur[r] = e[r - 1];
        if (!same) cur[r].subs++;
        cur[r].total = sub;
      } else if (del < ins) {
        cur[r] = cur[r - 1];
        cur[r].total = del;
        cur[r].dels++;
      } else {
        cur[r] = e[r];
        cur[r].total = ins;
        cur[r].ins++;
      }
    }
    memcpy(e, cur, sizeof *e * (size_t)(n_ref + 1));
  }
  *out = e[n_ref];
  free(e);
  free(cur);
  return NULL;
}

typedef struct tok_pair {
  const tokens *ref, *hyp;
} tok_pair;
static bool eq_tokens(const void *ctx, int r, int h) {
  const tok_pair *p = ctx;
  return tok_eq(p->ref, r, p->hyp, h);
}

typedef struct id_pair {
  const int *ref, *hyp;
} id_pair;
static bool eq_ids(const void *ctx, int r, int h) {
  const id_pair *p = ctx;
  return p->ref[r] == p->hyp[h];
}

lv_status lv_wer_edit_distance(const char *ref, const char *hyp, lv_edit_stats *out) {
  tokens r, h;
  LV_TRY(tokenize(ref, true, &r));
  lv_status s = tokenize(hyp, true, &h);
  if (!s) {
    tok_pair p = {&r, &h};
    s = levenshtein(r.n, h.n, eq_tokens, &p, out);
  }
  tokens_free(&r);
  tokens_free(&h);
  return s;
}

lv_status lv_wer_edit_distance_ids(const int *ref, int n_ref, const int *hyp, int n_hyp, lv_edit_stats *out) {
  id_pair p = {ref, hyp};
  return levenshtein(n_ref, n_hyp, eq_ids, &p, out);
}

/* ---- ComputeWer ---- */

/* lower (ASCII) + remove \p{P} but '-' and '\'' when norm; then strip and \s+ -> ' '. */
static char *normalize(const char *s, bool norm) {
  size_t n = strlen(s);
  char *a = malloc(n + 1);
  if (!a) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    int l = 1;
    uint32_t c = norm ? utf8_at(s + i, n - i, &l) : 0;
    if (norm && c != '-' && c != '\'' && is_punct(c)) {
      i += (size_t)l;
      continue;
    }
    for (int j = 0; j < l; j++, i++) {
      char ch = s[i];
      a[k++] = norm && ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
    }
  }
  a[k] = 0;
  size_t b = 0, e = k;
  while (b < e && ascii_space(a[b])) b++;
  while (e > b && ascii_space(a[e - 1])) e--;
  size_t o = 0;
  for (size_t i = b; i < e;) {
    if (re2_space(a[i])) {
      while (i < e && re2_space(a[i])) i++;
      a[o++] = ' ';
    } else {
      a[o++] = a[i++];
    }
  }
  a[o] = 0;
  return a;
}

lv_status lv_wer_compute(const char *hyp, const char *ref, bool normalize_punct_and_cap, lv_wer_counts *out) {
  char *h = normalize(hyp, normalize_punct_and_cap), *r = normalize(ref, normalize_punct_and_cap);
  lv_status s = NULL;
  tokens th = {0}, tr = {0};
  if (!h || !r) {
    s = lv_status_make(LV_ERR_RESOURCE, "wer: out of memory");
    goto done;
  }
  if ((s = tokenize(h, false, &th)) || (s = tokenize(r, false, &tr))) goto done;
  tok_pair p = {&tr, &th};
  lv_edit_stats ed;
  if ((s = levenshtein(tr.n, th.n, eq_tokens, &p, &ed))) goto done;
  out->errors = ed.total;
  out->ref_words = 0;
  if (*r) {
    out->ref_words = 1;
    for (const char *c = r; *c; c++) out->ref_words += *c == ' ';
  }
done:
  tokens_free(&th);
  tokens_free(&tr);
  free(h);
  free(r);
  return s;
}

/* ---- filters ---- */

char *lv_wer_filter_noise_regex(const char *s) {
  static const char kTok[] = "<noise>";
  const size_t kt = sizeof kTok - 1;
  size_t n = strlen(s);
  char *o = malloc(n + 1);
  if (!o) return NULL;
  size_t k = 0, i = 0;
  while (i < n) {
    /* The alternatives in the regex's order, at position i. */
    size_t m = 0;
    if (s[i] == ' ' && n - i >= kt + 2 && !memcmp(s + i + 1, kTok, kt) && s[i + 1 + kt] == ' ')
      m = kt + 2;
    else if (i == 0 && n >= kt + 1 && !memcmp(s, kTok, kt) && s[kt] == ' ')
      m = kt + 1;
    else if (s[i] == ' ' && n - i == kt + 1 && !memcmp(s + i + 1, kTok, kt))
      m = kt + 1;
    else if (i == 0 && n == kt && !memcmp(s, kTok, kt))
      m = kt;
    if (m) {
      o[k++] = ' ';
      i += m;
    } else {
      o[k++] = s[i++];
    }
  }
  o[k] = 0;
  return o;
}

char *lv_wer_filter_epsilon_regex(const char *s) {
  static const char kTok[] = "<epsilon>";
  const size_t kt = sizeof kTok - 1;
  size_t n = strlen(s);
  char *o = malloc(n + 1);
  if (!o) return NULL;
  size_t k = 0, i = 0;
  while (i < n) {
    if (n - i >= kt && !memcmp(s + i, kTok, kt)) {
      while (n - i >= kt && !memcmp(s + i, kTok, kt)) i += kt;
      o[k++] = ' ';
    } else {
      o[k++] = s[i++];
    }
  }
  o[k] = 0;
  return o;
}

/* ' '.join of s's str.split() tokens, leaving out those equal to `drop` (if any). */
static char *join_tokens(const char *s, const char *drop) {
  tokens t;
  lv_status st = tokenize(s, true, &t);
  if (st) {
    lv_status_free(st);
    return NULL;
  }
  char *o = malloc(strlen(s) + 1);
  if (o) {
    size_t k = 0;
    for (int i = 0; i < t.n; i++) {
      if (drop && (size_t)t.len[i] == strlen(drop) && !memcmp(t.p[i], drop, (size_t)t.len[i])) continue;
      if (k) o[k++] = ' ';
      memcpy(o + k, t.p[i], (size_t)t.len[i]);
      k += (size_t)t.len[i];
    }
    o[k] = 0;
  }
  tokens_free(&t);
  return o;
}

char *lv_wer_filter_noise(const char *s) { return join_tokens(s, "<noise>"); }

char *lv_wer_filter_epsilon(const char *s) {
  static const char kTok[] = "<epsilon>";
  size_t n = strlen(s), kt = sizeof kTok - 1;
  char *a = malloc(n + 1);
  if (!a) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    if (n - i >= kt && !memcmp(s + i, kTok, kt)) {
      a[k++] = ' ';
      i += kt;
    } else {
      a[k++] = s[i++];
    }
  }
  a[k] = 0;
  char *o = join_tokens(a, NULL);
  free(a);
  return o;
}

/* ---- corpus statistics ---- */

static void ascii_lower(char *s) {
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

static void add_ed(lv_edit_stats *a, const lv_edit_stats *b) {
  a->ins += b->ins;
  a->subs += b->subs;
  a->dels += b->dels;
  a->total += b->total;
}

/* FilterEpsilon(FilterNoise(s)). */
static char *post_filter(const char *s) {
  char *a = lv_wer_filter_noise(s);
  if (!a) return NULL;
  char *b = lv_wer_filter_epsilon(a);
  free(a);
  return b;
}

lv_status lv_wer_stats_add(lv_wer_stats *s, const char *ref, const char *const *hyps, int n_hyps, const int *ref_ids,
                           int n_ref_ids, const int *hyp_ids, int n_hyp_ids) {
  if (n_hyps < 1) return lv_status_make(LV_ERR_INVALID, "wer: an utterance needs at least one hypothesis, got %d", n_hyps);
  lv_status st = NULL;
  char *gref = lv_wer_filter_noise_regex(ref), *fref = NULL, *fhyp = NULL;
  lv_wer_stats d = {0};
  int64_t best = -1;
  if (!gref) goto oom;
  /* In-graph: <noise> regex on both, (<epsilon>)+ on hypotheses, ComputeWer. */
  for (int i = 0; i < n_hyps; i++) {
    char *g1 = lv_wer_filter_noise_regex(hyps[i]);
    char *g2 = g1 ? lv_wer_filter_epsilon_regex(g1) : NULL;
    free(g1);
    if (!g2) goto oom;
    lv_wer_counts c;
    st = lv_wer_compute(g2, gref, false, &c);
    free(g2);
    if (st) goto done;
    if (i == 0) {
      d.norm_errors = c.errors;
      d.norm_words = c.ref_words;
      d.correct = c.errors == 0;
    }
    if (best < 0 || c.errors < best) best = c.errors;
  }
  d.oracle_errors = best;
  /* PostProcess: EditDistance of the filtered top hypothesis, as is and lower-cased. */
  fref = post_filter(ref);
  fhyp = post_filter(hyps[0]);
  if (!fref || !fhyp) goto oom;
  if ((st = lv_wer_edit_distance(fref, fhyp, &d.ed))) goto done;
  tokens t;
  if ((st = tokenize(fref, true, &t))) goto done;
  d.ed_words = t.n;
  tokens_free(&t);
  ascii_lower(fref);
  ascii_lower(fhyp);
  if ((st = lv_wer_edit_distance(fref, fhyp, &d.ed_ci))) goto done;
  if (ref_ids) {
    lv_edit_stats e;
    if ((st = lv_wer_edit_distance_ids(ref_ids, n_ref_ids, hyp_ids, n_hyp_ids, &e))) goto done;
    d.ter_errors = e.total;
    d.ter_tokens = n_ref_ids;
  }
  s->utterances++;
  s->norm_errors += d.norm_errors;
  s->norm_words += d.norm_words;
  s->oracle_errors += d.oracle_errors;
  s->correct += d.correct;
  add_ed(&s->ed, &d.ed);
  add_ed(&s->ed_ci, &d.ed_ci);
  s->ed_words += d.ed_words;
  s->ter_errors += d.ter_errors;
  s->ter_tokens += d.ter_tokens;
  goto done;
oom:
  st = lv_status_make(LV_ERR_RESOURCE, "wer: out of memory");
done:
  free(gref);
  free(fref);
  free(fhyp);
  return st;
}

static double ratio(int64_t a, int64_t b) { return b > 0 ? (double)a / (double)b : 0.0; }

double lv_wer_norm_wer(const lv_wer_stats *s) { return ratio(s->norm_errors, s->norm_words); }
double lv_wer_wer(const lv_wer_stats *s) { return ratio(s->ed.total, s->ed_words); }
double lv_wer_sacc(const lv_wer_stats *s) { return ratio(s->correct, s->utterances); }
/* metrics_calculator.py: total_oracle_errs / total_ref_words, the words of the noise- and
 * epsilon-filtered reference (the WER's denominator, not the norm_wer's). */
double lv_wer_oracle(const lv_wer_stats *s) { return ratio(s->oracle_errors, s->ed_words); }
double lv_wer_ter(const lv_wer_stats *s) { return ratio(s->ter_errors, s->ter_tokens); }

/* ---- the custom metric ---- */

static lv_status wm_value(const void *ctx, double *v) {
  *v = lv_wer_norm_wer(ctx);
  return NULL;
}

enum { kWerSummaries = 13 };

static int wm_summary_count(const void *ctx) {
  (void)ctx;
  return kWerSummaries;
}

static lv_status wm_summary(const void *ctx, const char *name, lv_summary_value *out) {
  const lv_wer_stats *s = ctx;
  if (strlen(name) >= LV_METRIC_TAG_MAX)
    return lv_status_make(LV_ERR_INVALID, "wer metric: name \"%s\" longer than %d bytes", name, LV_METRIC_TAG_MAX - 1);
  struct {
    const char *tag;
    double v;
  } rows[kWerSummaries] = {
      {name, lv_wer_norm_wer(s)},
      {"error_rates/ins", ratio(s->ed.ins, s->ed_words)},
      {"error_rates/sub", ratio(s->ed.subs, s->ed_words)},
      {"error_rates/del", ratio(s->ed.dels, s->ed_words)},
      {"error_rates/wer", ratio(s->ed.total, s->ed_words)},
      {"case_insensitive_error_rates/ins", ratio(s->ed_ci.ins, s->ed_words)},
      {"case_insensitive_error_rates/sub", ratio(s->ed_ci.subs, s->ed_words)},
      {"case_insensitive_error_rates/del", ratio(s->ed_ci.dels, s->ed_words)},
      {"case_insensitive_error_rates/wer", ratio(s->ed_ci.total, s->ed_words)},
      {"oracle_norm_wer", lv_wer_oracle(s)},
      {"sacc", lv_wer_sacc(s)},
      {"ter", lv_wer_ter(s)},
      {"wer", lv_wer_wer(s)},
  };
  for (int i = 0; i < kWerSummaries; i++) {
    snprintf(out[i].tag, sizeof out[i].tag, "%s", rows[i].tag);
    out[i].value = rows[i].v;
  }
  return NULL;
}

static void wm_free(void *ctx) { free(ctx); }

static const lv_metric_custom_ops kWerMetricOps = {.kind_name = "WerMetric",
                                                   .value = wm_value,
                                                   .summary_count = wm_summary_count,
                                                   .summary = wm_summary,
                                                   .free = wm_free};

lv_metric *lv_wer_metric_new(void) {
  lv_wer_stats *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  return lv_metric_custom_new(&kWerMetricOps, s);
}

lv_wer_stats *lv_wer_metric_stats(lv_metric *m) { return lv_metric_custom_ctx(m, &kWerMetricOps); }
