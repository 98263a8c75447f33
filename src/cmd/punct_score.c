/* punct_score: the punctuator's decoder metrics (metrics/punct_metrics.h) of a hypothesis
 * file against a reference file, line by line: sacrebleu BLEU, sentence exact match, and
 * precision / recall / F1 of , . ? ! ; : " and of capitalized words. --baseline scores
 * the trivial answer made from each reference line instead of a hypothesis file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/env.h"
#include "base/flags.h"
#include "base/status.h"
#include "base/text_lines.h"
#include "metrics/punct_metrics.h"

static const char *flag_ref = "";
static const char *flag_hyp = "-";
static bool flag_baseline = false;
static const char *flag_write_hyp = "";

static const char *kUsage =
    "Usage: punct_score --ref=REF [--hyp=HYP | --baseline] [--write_hyp=FILE]\n"
    "Scores the restored sentences of HYP (default stdin) against REF, one sentence per line:\n"
    "sacrebleu BLEU (13a, case-sensitive), the share of sentences equal to the reference up to\n"
    "white space, and precision / recall / F1 of each mark , . ? ! ; : \" (per gap between\n"
    "words) and of capitalized words (see src/metrics/punct_metrics.h for the alignment).\n"
    "--baseline scores the trivial answer instead: each reference lower-cased and stripped of\n"
    "punctuation (the model's input), its first letter capitalized, a final period added;\n"
    "--write_hyp=FILE also writes the hypotheses scored (one per line).\n"
    "Exit 0 ok, 2 bad flags or input (a missing file, invalid UTF-8, a NUL byte, line counts\n"
    "that differ).";

static lv_status score(lv_punct_metrics *m, lv_text_lines *ref, lv_text_lines *hyp, FILE *out) {
  for (;;) {
    bool eof_r = false, eof_h = false;
    LV_TRY(lv_text_lines_next(ref, &eof_r));
    if (hyp) LV_TRY(lv_text_lines_next(hyp, &eof_h));
    else eof_h = eof_r;
    if (eof_r != eof_h) {
      lv_text_lines *shorter = eof_r ? ref : hyp, *longer = eof_r ? hyp : ref;
      return lv_status_make(LV_ERR_INVALID, "%s ends after %ld lines but %s has more: one sentence per line in each",
                            shorter->name, shorter->lineno, longer->name);
    }
    if (eof_r) return NULL;
    char *base = NULL;
    if (!hyp) LV_TRY(lv_punct_trivial_answer(ref->line, &base));
    const char *h = hyp ? hyp->line : base;
    lv_status s = lv_punct_metrics_add(m, h, ref->line);
    if (!s && out && fprintf(out, "%s\n", h) < 0) s = lv_status_make(LV_ERR_IO, "--write_hyp=%s: write error", flag_write_hyp);
    free(base);
    if (s) return lv_status_wrap(s, "%s:%ld", ref->name, ref->lineno);
  }
}

static lv_status run(void) {
  if (!*flag_ref) return lv_status_make(LV_ERR_INVALID, "--ref: the reference file is required");
  if (flag_baseline && strcmp(flag_hyp, "-"))
    return lv_status_make(LV_ERR_INVALID, "--baseline makes the hypotheses: give it without --hyp");
  lv_punct_metrics m;
  LV_TRY(lv_punct_metrics_init(&m));
  lv_text_lines ref = {0}, hyp = {0};
  FILE *out = NULL;
  lv_status s = lv_text_lines_open(&ref, flag_ref, "ref");
  if (!s && !flag_baseline) s = lv_text_lines_open(&hyp, flag_hyp, "hyp");
  if (!s && *flag_write_hyp) {
    struct stat w, r;
    if (stat(flag_write_hyp, &w) == 0 &&
        ((stat(flag_ref, &r) == 0 && w.st_dev == r.st_dev && w.st_ino == r.st_ino) ||
         (hyp.f && hyp.f != stdin && stat(flag_hyp, &r) == 0 && w.st_dev == r.st_dev && w.st_ino == r.st_ino)))
      s = lv_status_make(LV_ERR_INVALID, "--write_hyp=%s is an input file; it would be overwritten", flag_write_hyp);
  }
  if (!s && *flag_write_hyp) {
    out = fopen(flag_write_hyp, "w");
    if (!out) s = lv_status_make(LV_ERR_IO, "--write_hyp=%s: cannot create", flag_write_hyp);
  }
  if (!s) s = score(&m, &ref, flag_baseline ? NULL : &hyp, out);
  if (out && fclose(out) && !s) s = lv_status_make(LV_ERR_IO, "--write_hyp=%s: write error", flag_write_hyp);
  if (!s) {
    char buf[2048];
    lv_punct_metrics_format(&m, buf, sizeof buf);
    fputs(buf, stdout);
    if (fflush(stdout)) s = lv_status_make(LV_ERR_IO, "stdout: write error");
  }
  lv_text_lines_close(&ref);
  lv_text_lines_close(&hyp);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  lv_flag flags[] = {
      LV_FLAG_STR("ref", &flag_ref, "Reference sentences, one per line."),
      LV_FLAG_STR("hyp", &flag_hyp, "Restored sentences, one per line ('-': stdin)."),
      LV_FLAG_BOOL("baseline", &flag_baseline, "Score the trivial answer made from each reference instead."),
      LV_FLAG_STR("write_hyp", &flag_write_hyp, "Also write the hypotheses scored to this file."),
  };
  bool help = false;
  lv_status s = lv_flags_parse(flags, (int)LV_ARRAY_LEN(flags), argc, argv, kUsage, &help);
  if (s || help) return lv_status_report("punct_score", s);
  return lv_status_report("punct_score", run());
}
