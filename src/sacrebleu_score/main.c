/* sacrebleu_score: corpus BLEU of a hypothesis file against one or more reference files,
 * as sacrebleu 2.x computes it (models/sacrebleu.h: 13a tokenization, exp smoothing,
 * order 4), printed as str(BLEUScore):
 *   BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)
 * Files are read as sacrebleu reads them: UTF-8 (strictly: anything else is an error
 * naming the file and line), split on "\n" only, each line rstrip()ed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flags.h"
#include "base/status.h"
#include "models/sacrebleu.h"

static const char *flag_ref = "";
static const char *flag_hyp = "-";
static const char *flag_tokenize = "13a";
static const char *flag_smooth_method = "exp";
static double flag_smooth_value = 0;
static int64_t flag_max_ngram_order = 4;
static bool flag_effective_order = false;
static bool flag_score_only = false;
static bool flag_signature = false;
static int64_t flag_width = 2;
static bool flag_print_tokens = false;

static const char *kUsage =
    "Usage: sacrebleu_score --ref=REF[,REF2...] [--hyp=HYP]\n"
    "Corpus BLEU of HYP (default stdin) against the references, line by line, as sacrebleu 2.x\n"
    "computes it (default: tokenizer 13a, smoothing exp, max order 4, case-sensitive). Several\n"
    "comma-separated reference files give several references per line. Prints\n"
    "  BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n"
    "Exit 0 ok, 2 bad flags or input (a missing file, invalid UTF-8, a NUL byte, line counts\n"
    "that differ).";

/* Strict UTF-8 as Python's decoder: no overlong forms, surrogates or code points past
 * U+10FFFF. Returns the byte offset of the first bad sequence, or -1. */
static long bad_utf8(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t k;
    unsigned lo = 0x80, hi = 0xbf;
    if (c < 0x80) k = 1;
    else if (c >= 0xc2 && c <= 0xdf) k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
      k = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      k = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return (long)i;
    }
    if (i + k > n) return (long)i;
    for (size_t j = 1; j < k; j++) {
      unsigned d = s[i + j];
      if (j == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xbf)) return (long)i;
    }
    i += k;
  }
  return -1;
}

typedef struct stream {
  const char *name;
  FILE *f;
  char *line;
  size_t cap;
  long lineno;
} stream;

/* The next line of st into st->line without its "\n"; *eof at the end. */
static lv_status next_line(stream *st, bool *eof) {
  ssize_t n = getline(&st->line, &st->cap, st->f);
  if (n < 0) {
    if (ferror(st->f)) return lv_status_make(LV_ERR_IO, "%s: read error after line %ld", st->name, st->lineno);
    *eof = true;
    return NULL;
  }
  *eof = false;
  st->lineno++;
  if (n > 0 && st->line[n - 1] == '\n') st->line[--n] = '\0';
  if (memchr(st->line, '\0', (size_t)n))
    return lv_status_make(LV_ERR_INVALID, "%s:%ld: a NUL byte in the line", st->name, st->lineno);
  long bad = bad_utf8((const unsigned char *)st->line, (size_t)n);
  if (bad >= 0)
    return lv_status_make(LV_ERR_INVALID, "%s:%ld: invalid UTF-8 at byte %ld (byte 0x%02x)", st->name, st->lineno,
                          bad + 1, (unsigned char)st->line[bad]);
  return NULL;
}

/* Lines left in st after the current one (for the length-mismatch message). */
static long count_rest(stream *st) {
  long n = 0;
  while (getline(&st->line, &st->cap, st->f) >= 0) n++;
  return n;
}

/* --print_tokens: each line of --hyp as the tokenizer leaves it. */
static lv_status print_tokens(lv_sacrebleu_tokenizer tok) {
  stream st = {.name = strcmp(flag_hyp, "-") ? flag_hyp : "<stdin>"};
  st.f = strcmp(flag_hyp, "-") ? fopen(flag_hyp, "rb") : stdin;
  if (!st.f) return lv_status_make(LV_ERR_NOT_FOUND, "--hyp=%s: cannot open", flag_hyp);
  lv_status s = NULL;
  for (bool eof = false; !s;) {
    s = next_line(&st, &eof);
    if (s || eof) break;
    char *t = NULL;
    s = lv_sacrebleu_tokenize(tok, st.line, &t);
    if (!s) printf("%s\n", t);
    free(t);
  }
  if (!s && fflush(stdout)) s = lv_status_make(LV_ERR_IO, "stdout: write error");
  free(st.line);
  if (st.f != stdin) fclose(st.f);
  return s;
}

static lv_status run(bool smooth_value_set) {
  lv_sacrebleu_opts o = lv_sacrebleu_default_opts();
  LV_TRY(lv_status_wrap(lv_sacrebleu_tokenizer_parse(flag_tokenize, &o.tokenizer), "--tokenize"));
  LV_TRY(lv_status_wrap(lv_sacrebleu_smooth_parse(flag_smooth_method, &o.smooth), "--smooth_method"));
  if (smooth_value_set) o.smooth_value = flag_smooth_value;
  if (flag_max_ngram_order < 1 || flag_max_ngram_order > LV_SACREBLEU_MAX_ORDER)
    return lv_status_make(LV_ERR_INVALID, "--max_ngram_order=%lld: expected 1..%d", (long long)flag_max_ngram_order,
                          LV_SACREBLEU_MAX_ORDER);
  if (flag_width < 0 || flag_width > 17)
    return lv_status_make(LV_ERR_INVALID, "--width=%lld: expected 0..17", (long long)flag_width);
  o.max_ngram_order = (int)flag_max_ngram_order;
  o.effective_order = flag_effective_order;
  lv_sacrebleu sb;
  LV_TRY(lv_status_wrap(lv_sacrebleu_init(&sb, &o), "flags"));
  if (flag_print_tokens) return print_tokens(o.tokenizer);
  if (!*flag_ref) return lv_status_make(LV_ERR_INVALID, "--ref: at least one reference file is required");

  int nrefs = 1;
  for (const char *p = flag_ref; *p; p++) nrefs += *p == ',';
  char *refnames = strdup(flag_ref);
  stream *st = calloc((size_t)nrefs + 1, sizeof *st); /* st[0] the hypotheses */
  const char **lines = calloc((size_t)nrefs, sizeof *lines);
  lv_status s = NULL;
  if (!refnames || !st || !lines) s = lv_status_make(LV_ERR_RESOURCE, "out of memory");
  if (!s) {
    st[0].name = strcmp(flag_hyp, "-") ? flag_hyp : "<stdin>";
    st[0].f = strcmp(flag_hyp, "-") ? fopen(flag_hyp, "rb") : stdin;
    if (!st[0].f) s = lv_status_make(LV_ERR_NOT_FOUND, "--hyp=%s: cannot open", flag_hyp);
    char *save = NULL, *tok = strtok_r(refnames, ",", &save);
    for (int r = 1; !s && r <= nrefs; r++, tok = strtok_r(NULL, ",", &save)) {
      if (!tok || !*tok) {
        s = lv_status_make(LV_ERR_INVALID, "--ref=%s: an empty file name", flag_ref);
        break;
      }
      st[r].name = tok;
      st[r].f = fopen(tok, "rb");
      if (!st[r].f) s = lv_status_make(LV_ERR_NOT_FOUND, "--ref: %s: cannot open", tok);
    }
  }
  while (!s) {
    bool eof0 = false, eof = false;
    s = next_line(&st[0], &eof0);
    for (int r = 1; !s && r <= nrefs; r++) {
      s = next_line(&st[r], &eof);
      if (!s && eof != eof0) {
        stream *longer = eof ? &st[0] : &st[r], *shorter = eof ? &st[r] : &st[0];
        long total = longer->lineno + count_rest(longer);
        s = lv_status_make(LV_ERR_INVALID, "%s has %ld lines but %s has %ld: one line per segment in each",
                           shorter->name, shorter->lineno, longer->name, total);
      }
      if (!s) lines[r - 1] = st[r].line;
    }
    if (s || eof0) break;
    s = lv_sacrebleu_add(&sb, st[0].line, lines, nrefs);
    if (s) s = lv_status_wrap(s, "%s:%ld", st[0].name, st[0].lineno);
  }
  if (!s) {
    lv_sacrebleu_score r;
    lv_sacrebleu_result(&sb, &r);
    if (flag_score_only) {
      printf("%.*f\n", (int)flag_width, r.score);
    } else {
      char buf[512], sig[256];
      lv_sacrebleu_format(&r, buf, sizeof buf);
      if (flag_width != 2) { /* the score with another width, the rest as sacrebleu's */
        char head[64];
        snprintf(head, sizeof head, "BLEU = %.*f", (int)flag_width, r.score);
        const char *rest = strchr(buf + strlen("BLEU = "), ' ');
        memmove(buf + strlen(head), rest, strlen(rest) + 1);
        memcpy(buf, head, strlen(head));
      }
      if (flag_signature) {
        lv_sacrebleu_signature(&o, nrefs, sig, sizeof sig);
        printf("BLEU|%s%s\n", sig, buf + strlen("BLEU"));
      } else {
        printf("%s\n", buf);
      }
    }
    if (fflush(stdout)) s = lv_status_make(LV_ERR_IO, "stdout: write error");
  }
  for (int r = 0; st && r <= nrefs; r++) {
    free(st[r].line);
    if (st[r].f && st[r].f != stdin) fclose(st[r].f);
  }
  free(st);
  free(lines);
  free(refnames);
  return s;
}

int main(int argc, char **argv) {
  lv_flag flags[] = {
      LV_FLAG_STR("ref", &flag_ref, "Reference file(s), comma-separated for several references per line."),
      LV_FLAG_STR("hyp", &flag_hyp, "Hypothesis file, one segment per line ('-': stdin)."),
      LV_FLAG_STR("tokenize", &flag_tokenize, "Tokenizer: 13a (sacrebleu's default) or none."),
      LV_FLAG_STR("smooth_method", &flag_smooth_method, "Smoothing: exp, floor, add-k or none."),
      LV_FLAG_F64("smooth_value", &flag_smooth_value, "Value for floor (default 0.1) and add-k (default 1)."),
      LV_FLAG_I64("max_ngram_order", &flag_max_ngram_order, "Largest n-gram order."),
      LV_FLAG_BOOL("effective_order", &flag_effective_order, "Stop at the last order with hypothesis n-grams."),
      LV_FLAG_BOOL("score_only", &flag_score_only, "Print the score alone."),
      LV_FLAG_BOOL("signature", &flag_signature, "Prefix sacrebleu's signature (without its version field)."),
      LV_FLAG_I64("width", &flag_width, "Decimals of the score."),
      LV_FLAG_BOOL("print_tokens", &flag_print_tokens, "Print each --hyp line tokenized (--tokenize) instead."),
  };
  bool help = false;
  lv_status s = lv_flags_parse(flags, (int)LV_ARRAY_LEN(flags), argc, argv, kUsage, &help);
  if (s || help) return lv_status_report("sacrebleu_score", s);
  return lv_status_report("sacrebleu_score", run(lv_flags_find(flags, (int)LV_ARRAY_LEN(flags), "smooth_value")->set));
}
