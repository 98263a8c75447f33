/* spm_encode_file: encodes a text file line by line with lingvoc's tokenizers, writing
 * one line of space-separated ids per input line, as `spm_encode --output_format=id`
 * does (no <s>/</s>). For parity tests of SentencePieceTokenizer against SentencePiece;
 * --cls picks another tokenizer class and --vocab its vocab file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/file.h"
#include "base/flags.h"
#include "base/status.h"
#include "input/tokenizer.h"

static const char *flag_model = "";
static const char *flag_input = "";
static const char *flag_output = "";
static const char *flag_cls = "SentencePieceTokenizer";
static const char *flag_vocab = "";

static const char *kUsage =
    "Usage: spm_encode_file --model=M.model [--input=FILE] [--output=FILE]\n"
    "Encodes each line of FILE (default stdin) into piece ids, one output line per input line,\n"
    "like `spm_encode --output_format=id`. Exit 0 ok, 1 a write error (a full disk), 2 bad flags,\n"
    "model or input file (a FIFO or device is refused), or --output naming an input.";

static lv_status run(void) {
  lv_tokenizer_register_all();
  lv_params *p = NULL;
  LV_TRY(lv_registry_instantiate(flag_cls, &p));
  lv_status s = NULL;
  if (!strcmp(flag_cls, "SentencePieceTokenizer")) {
    if (!*flag_model) s = lv_status_make(LV_ERR_INVALID, "--model: a SentencePiece .model file is required");
    else s = lv_params_set_string(p, "spm_model", flag_model);
    if (!s) s = lv_params_set_bool(p, "append_eos", false);
  } else if (!strcmp(flag_cls, "VocabFileTokenizer")) {
    s = lv_params_set_string(p, "token_vocab_filepath", flag_vocab);
  } else if (!strcmp(flag_cls, "WpmTokenizer")) {
    s = lv_params_set_string(p, "vocab_filepath", flag_vocab);
  }
  lv_tokenizer *t = NULL;
  if (!s) {
    lv_params_freeze(p);
    s = lv_tokenizer_create(p, &t);
  }
  FILE *in = NULL, *out = NULL;
  if (!s) {
    if (*flag_input) s = lv_file_fopen_regular(flag_input, "--input", &in);
    else in = stdin;
  }
  if (!s && *flag_output) {
    const char *inputs[][2] = {{"--input", flag_input}, {"--model", flag_model}, {"--vocab", flag_vocab}};
    for (size_t i = 0; i < LV_ARRAY_LEN(inputs) && !s; i++)
      if (*inputs[i][1] && lv_file_same(flag_output, inputs[i][1]))
        s = lv_status_make(LV_ERR_INVALID, "--output=%s is the %s file; it would be overwritten", flag_output,
                           inputs[i][0]);
  }
  if (!s) {
    out = *flag_output ? fopen(flag_output, "wb") : stdout;
    if (!out) s = lv_status_make(LV_ERR_IO, "--output=%s: cannot create: %s", flag_output, strerror(errno));
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  lv_tok_ids ids = {0};
  long lineno = 1;
  for (errno = 0; !s && (n = getline(&line, &cap, in)) >= 0; lineno++, errno = 0) {
    if (n > 0 && line[n - 1] == '\n') n--;
    ids.n = 0;
    s = lv_tokenizer_encode(t, line, (size_t)n, &ids);
    if (s) {
      s = lv_status_wrap(s, "%s:%ld", *flag_input ? flag_input : "<stdin>", lineno);
      break;
    }
    for (int i = 0; i < ids.n; i++) fprintf(out, i ? " %d" : "%d", (int)ids.v[i]);
    if (fputc('\n', out) == EOF || ferror(out)) break; /* a full disk: stop reading */
  }
  /* getline's ENOMEM (a line past the memory limit) sets neither ferror nor feof. */
  if (!s && in && !(out && ferror(out)) && (ferror(in) || !feof(in)))
    s = lv_status_make(errno == ENOMEM ? LV_ERR_RESOURCE : LV_ERR_IO, "%s: cannot read line %ld: %s",
                       *flag_input ? flag_input : "<stdin>", lineno, strerror(errno ? errno : EIO));
  if (out) {
    const char *name = out == stdout ? "stdout" : flag_output;
    errno = 0;
    bool bad = fflush(out) != 0 || ferror(out);
    int e = errno;
    if (out != stdout && fclose(out)) bad = true;
    if (bad && !s) s = lv_status_make(LV_ERR_IO, "%s: write error: %s", name, strerror(e ? e : EIO));
  }
  if (in && in != stdin) fclose(in);
  free(line);
  lv_tok_ids_free(&ids);
  lv_tokenizer_destroy(t);
  lv_params_free(p);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  lv_flag flags[] = {
      LV_FLAG_STR("model", &flag_model, "SentencePiece .model file (SentencePieceTokenizer)."),
      LV_FLAG_STR("input", &flag_input, "Text file to encode, one sentence per line (default: stdin)."),
      LV_FLAG_STR("output", &flag_output, "Where to write the ids (default: stdout)."),
      LV_FLAG_STR("cls", &flag_cls, "Tokenizer class: SentencePieceTokenizer, VocabFileTokenizer, WpmTokenizer."),
      LV_FLAG_STR("vocab", &flag_vocab, "Vocab file for VocabFileTokenizer / WpmTokenizer."),
  };
  bool help = false;
  lv_status s = lv_flags_parse(flags, (int)LV_ARRAY_LEN(flags), argc, argv, kUsage, &help);
  if (s || help) return lv_status_report("spm_encode_file", s);
  return lv_status_report("spm_encode_file", run());
}
