/* Flags shared by the trainer, evaler and decoder mains (Lingvo's names, reference
 * §1.1), and the step from flags to frozen model params. */
#ifndef LV_RUNNERS_CLI_H
#define LV_RUNNERS_CLI_H

#include "base/flags.h"
#include "models/model.h"

typedef struct lv_cli {
  const char *model, *logdir, *job, *mode, *run_locally, *model_params_override, *model_params_file_override;
  const char *experiments_dir, *model_task_name, *cluster_spec;
  const char *flag_params; /* NULL or params lines the executable's own flags set (lv_model_options) */
  int64_t saver_max_to_keep, task, num_threads, worker_gpus, worker_replicas, worker_split_size;
  double saver_keep_checkpoint_every_n_hours;
  bool enable_asserts, enable_check_numerics;
  char job_dataset[64], job_checkpoint[4096], job_buf[96]; /* storage for what --job names */
} lv_cli;

#define LV_CLI_JOB_MAX 4200

#define LV_CLI_MAX_FLAGS 64
/* --num_threads and cluster.num_threads: 0 (one per core) to this. */
#define LV_CLI_MAX_THREADS 1024

void lv_cli_init(lv_cli *c);
/* Appends the common flags to flags (returns the new count). */
int lv_cli_add_flags(lv_cli *c, lv_flag *flags, int n);
/* Validates the common flags and fills model options for dataset. */
lv_status lv_cli_model_options(lv_cli *c, const lv_flag *flags, int nflags, const char *dataset, lv_model_options *o);
/* Builds the frozen params, applying --num_threads. */
lv_status lv_cli_build_params(lv_cli *c, const lv_flag *flags, int nflags, const char *dataset, lv_params **out);
const char *lv_cli_prog(const char *argv0);
/* bin/trainer's --job / --mode (Lingvo's controller + trainer_client for sync, trainer for
 * async; one worker replica): an error naming the program that runs any other job; sets
 * c->job and c->mode to what the params record. Inspect modes are handled before. */
lv_status lv_cli_trainer_job(lv_cli *c);
/* bin/evaler's --job (evaler_<ds>, evaler_once_<ds>@<ckpt>) and --mode: fills *dataset
 * (unless dataset_given, where they must agree), *once and *checkpoint; sets c->job to
 * "evaler_<ds>". */
lv_status lv_cli_evaler_job(lv_cli *c, bool dataset_given, const char **dataset, bool *once, const char **checkpoint);
/* bin/decoder's --job (decoder_<ds>) and --mode: fills *dataset (unless dataset_given,
 * where they must agree); sets c->job to "decoder_<ds>". */
lv_status lv_cli_decoder_job(lv_cli *c, bool dataset_given, const char **dataset);

#endif
