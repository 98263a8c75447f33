/* bin/decoder: Lingvo's decoder_<dataset> job for any task that decodes (the task's decoder
 * hooks, models/task.h), and --decode_text to decode raw text lines through the task. */
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "runners/cli.h"
#include "runners/decoder.h"

static const char kUsage[] =
    "usage: decoder --model=mt.bible_en_es.TransformerSmall --logdir=DIR [--dataset=Test] [--once] [flags]\n"
    "       decoder --model=... --logdir=DIR --decode_text=FILE|- [--checkpoint=PREFIX]\n"
    "\n"
    "Decodes the dataset with beam search (task.decoder.beam_search, target_seq_len) for each\n"
    "checkpoint a trainer writes to DIR/train (polling with backoff 1 s x1.5 up to\n"
    "--max_poll_secs) and writes DIR/decoder_<dataset>/decoder_out_%09d (source, reference and\n"
    "top hyps per sentence), score-%08d.txt (corpus_bleu, sacrebleu, ...), events and\n"
    "processed_ckpts.txt; stops after the checkpoint at train.max_steps. --once decodes the\n"
    "latest checkpoint (or --checkpoint=PREFIX) and exits. Text needs input.tokenizer.\n"
    "\n"
    "--decode_text translates the lines of FILE (- = stdin) to stdout, one line per line:\n"
    "empty or invalid-UTF-8 lines give empty lines (the latter with a message on stderr);\n"
    "lines over input.source_max_length pieces are truncated to it (with a message).\n";

static lv_status run(int argc, char **argv) {
  lv_cli c;
  lv_cli_init(&c);
  const char *dataset = "Test", *checkpoint = "", *decode_text = "";
  bool once = false;
  double max_poll = 300, timeout = 0;
  lv_flag flags[LV_CLI_MAX_FLAGS];
  int n = lv_cli_add_flags(&c, flags, 0);
  flags[n++] = (lv_flag)LV_FLAG_STR("mode", &c.mode, "sync or async (the decoder works the same in both).");
  flags[n++] = (lv_flag)LV_FLAG_STR("dataset", &dataset, "Dataset to decode: Test, Dev or Train (--job=decoder_<dataset> sets it too).");
  flags[n++] = (lv_flag)LV_FLAG_BOOL("once", &once, "Decode one checkpoint and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("checkpoint", &checkpoint, "With --once or --decode_text: the checkpoint prefix (or a directory; default: the latest in DIR/train).");
  flags[n++] = (lv_flag)LV_FLAG_F64("max_poll_secs", &max_poll, "Longest wait between polls for a new checkpoint.");
  flags[n++] = (lv_flag)LV_FLAG_F64("timeout_secs", &timeout, "Give up after waiting this long for a new checkpoint (0 = never).");
  flags[n++] = (lv_flag)LV_FLAG_STR("decode_text", &decode_text, "Translate the lines of this file (- = stdin) to stdout and exit.");
  bool help = false;
  LV_TRY(lv_flags_parse(flags, n, argc, argv, kUsage, &help));
  if (help) return NULL;
  if (!*c.logdir) return lv_status_make(LV_ERR_INVALID, "--logdir is required (the trainer's log directory)");
  if (max_poll <= 0) return lv_status_make(LV_ERR_INVALID, "--max_poll_secs must be > 0");
  LV_TRY(lv_cli_decoder_job(&c, lv_flags_find(flags, n, "dataset")->set, &dataset));
  lv_params *p = NULL;
  LV_TRY(lv_cli_build_params(&c, flags, n, dataset, &p));
  lv_decoder_options o = {.dataset = dataset, .once = once, .checkpoint = checkpoint, .max_poll_secs = max_poll,
                          .timeout_secs = timeout, .decode_input = *decode_text ? decode_text : NULL,
                          .decode_kind = "text"};
  lv_status s = lv_decoder_run(p, &o);
  lv_params_free(p);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  return lv_status_report(lv_cli_prog(argv[0]), run(argc, argv));
}
