/* bin/evaler: Lingvo's evaler_<dataset> job. */
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/file.h"
#include "runners/cli.h"
#include "runners/evaler.h"

static const char kUsage[] =
    "usage: evaler --model=image.mnist.LeNet5 --logdir=DIR [--dataset=Test] [--once] [flags]\n"
    "\n"
    "Evaluates the checkpoints a trainer writes to DIR/train on a dataset: polls for new ones\n"
    "(backoff 1 s x1.5 up to --max_poll_secs), writes DIR/eval_<dataset>/score-%08d.txt,\n"
    "events and processed_ckpts.txt, and stops after the checkpoint at train.max_steps.\n"
    "--once evaluates the latest checkpoint (or --checkpoint=PREFIX) and exits.\n";

static lv_status run(int argc, char **argv) {
  lv_cli c;
  lv_cli_init(&c);
  const char *dataset = "Test", *checkpoint = "";
  bool once = false;
  double max_poll = 300, timeout = 0;
  lv_flag flags[LV_CLI_MAX_FLAGS];
  int n = lv_cli_add_flags(&c, flags, 0);
  flags[n++] = (lv_flag)LV_FLAG_STR("mode", &c.mode, "sync or async (the evaler works the same in both; Lingvo's inspect modes are bin/trainer's).");
  flags[n++] = (lv_flag)LV_FLAG_STR("dataset", &dataset, "Dataset to evaluate: Test, Dev or Train (--job=evaler_<dataset> sets it too).");
  flags[n++] = (lv_flag)LV_FLAG_BOOL("once", &once, "Evaluate one checkpoint and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("checkpoint", &checkpoint, "With --once: the checkpoint prefix to evaluate (default: latest).");
  flags[n++] = (lv_flag)LV_FLAG_F64("max_poll_secs", &max_poll, "Longest wait between polls for a new checkpoint.");
  flags[n++] = (lv_flag)LV_FLAG_F64("timeout_secs", &timeout, "Give up after waiting this long for a new checkpoint (0 = never).");
  bool help = false;
  LV_TRY(lv_flags_parse(flags, n, argc, argv, kUsage, &help));
  if (help) return NULL;
  if (!*c.logdir) return lv_status_make(LV_ERR_INVALID, "--logdir is required (the trainer's log directory)");
  if (max_poll <= 0) return lv_status_make(LV_ERR_INVALID, "--max_poll_secs must be > 0");
  LV_TRY(lv_cli_evaler_job(&c, lv_flags_find(flags, n, "dataset")->set, &dataset, &once, &checkpoint));
  lv_params *p = NULL;
  LV_TRY(lv_cli_build_params(&c, flags, n, dataset, &p));
  lv_evaler_options o = {.dataset = dataset, .once = once, .checkpoint = checkpoint, .max_poll_secs = max_poll,
                         .timeout_secs = timeout};
  lv_status s = lv_evaler_run(p, &o);
  lv_params_free(p);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  return lv_status_report(lv_cli_prog(argv[0]), run(argc, argv));
}
