/* sacrebleu_score: corpus BLEU of a hypothesis file against one or more reference files,
 * as sacrebleu 2.x computes it (metrics/sacrebleu.h: 13a tokenization, exp smoothing,
 * order 4), printed as str(BLEUScore):
 *   BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)
 * Files are read as sacrebleu reads them: UTF-8 (strictly: anything else is an error
 * naming the file and line), split on "\n" only, each line rstrip()ed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/flags.h"
#include "base/status.h"
#include "base/text_lines.h"
#include "metrics/sacrebleu.h"

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
    "Exit 0 ok, 2 bad flags or input (a missing or non-regular file, invalid UTF-8, a NUL byte,\n"
    "line counts that differ, no line at all).";

/* Lines left in st after the current one (for the length-mismatch message). */
static long count_rest(lv_text_lines *st) {
  long n = 0;
  while (getline(&st->line, &st->cap, st->f) >= 0) n++;
  return n;
}

/* --print_tokens: each line of --hyp as the tokenizer leaves it. */
static lv_status print_tokens(lv_sacrebleu_tokenizer tok) {
  lv_text_lines st;
  lv_status s = lv_text_lines_open(&st, flag_hyp, "hyp");
  for (bool eof = false; !s;) {
    s = lv_text_lines_next(&st, &eof);
    if (s || eof) break;
    char *t = NULL;
    s = lv_sacrebleu_tokenize(tok, st.line, &t);
    if (!s) printf("%s\n", t);
    free(t);
  }
  if (!s && fflush(stdout)) s = lv_status_make(LV_ERR_IO, "stdout: write error");
  lv_text_lines_close(&st);
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
  lv_text_lines *st = calloc((size_t)nrefs + 1, sizeof *st); /* st[0] the hypotheses */
  const char **lines = calloc((size_t)nrefs, sizeof *lines);
  lv_status s = NULL;
  if (!refnames || !st || !lines) s = lv_status_make(LV_ERR_RESOURCE, "out of memory");
  if (!s) {
    s = lv_text_lines_open(&st[0], flag_hyp, "hyp");
    char *save = NULL, *tok = strtok_r(refnames, ",", &save);
    for (int r = 1; !s && r <= nrefs; r++, tok = strtok_r(NULL, ",", &save)) {
      if (!tok || !*tok) {
        s = lv_status_make(LV_ERR_INVALID, "--ref=%s: an empty file name", flag_ref);
        break;
      }
      s = lv_text_lines_open(&st[r], tok, "ref");
    }
  }
  while (!s) {
    bool eof0 = false, eof = false;
    s = lv_text_lines_next(&st[0], &eof0);
    for (int r = 1; !s && r <= nrefs; r++) {
      s = lv_text_lines_next(&st[r], &eof);
      if (!s && eof != eof0) {
        lv_text_lines *longer = eof ? &st[0] : &st[r], *shorter = eof ? &st[r] : &st[0];
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
  /* sacrebleu refuses an empty test set too: it is almost always a mistake, and its
   * "BLEU = 0.00" would read as a score. */
  if (!s && st[0].lineno == 0)
    s = lv_status_make(LV_ERR_INVALID, "%s and --ref=%s contain no sentence: nothing to score", st[0].name, flag_ref);
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
  for (int r = 0; st && r <= nrefs; r++) lv_text_lines_close(&st[r]);
  free(st);
  free(lines);
  free(refnames);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
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
