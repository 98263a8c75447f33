/* spm_encode_file: encodes a text file line by line with lingvoc's tokenizers, writing
 * one line of space-separated ids per input line, as `spm_encode --output_format=id`
 * does (no <s>/</s>). For parity tests of SentencePieceTokenizer against SentencePiece;
 * --cls picks another tokenizer class and --vocab its vocab file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
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
    "like `spm_encode --output_format=id`. Exit 0 ok, 2 bad flags, model or input file.";

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
    in = *flag_input ? fopen(flag_input, "rb") : stdin;
    if (!in) s = lv_status_make(LV_ERR_NOT_FOUND, "--input=%s: cannot open", flag_input);
  }
  if (!s) {
    out = *flag_output ? fopen(flag_output, "wb") : stdout;
    if (!out) s = lv_status_make(LV_ERR_IO, "--output=%s: cannot create", flag_output);
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  lv_tok_ids ids = {0};
  for (long lineno = 1; !s && (n = getline(&line, &cap, in)) >= 0; lineno++) {
    if (n > 0 && line[n - 1] == '\n') n--;
    ids.n = 0;
    s = lv_tokenizer_encode(t, line, (size_t)n, &ids);
    if (s) {
      s = lv_status_wrap(s, "%s:%ld", *flag_input ? flag_input : "<stdin>", lineno);
      break;
    }
    for (int i = 0; i < ids.n; i++) fprintf(out, i ? " %d" : "%d", (int)ids.v[i]);
    fputc('\n', out);
  }
  if (!s && in && ferror(in)) s = lv_status_make(LV_ERR_IO, "--input=%s: read error", flag_input);
  if (out && out != stdout && fclose(out) && !s) s = lv_status_make(LV_ERR_IO, "--output=%s: write error", flag_output);
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
