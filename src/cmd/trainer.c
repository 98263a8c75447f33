/* bin/trainer: Lingvo's trainer job (controller + trainer_client in one process; under
 * mpirun one sync replica per process), plus --mode=inspect_params / inspect_model /
 * inspect_evaler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/env.h"
#include "base/file.h"
#include "base/names.h"
#include "base/path.h"
#include "base/log.h"
#include "comm/comm.h"
#include "models/model.h"
#include "runners/cli.h"
#include "input/inspect_input.h"
#include "runners/instance.h"
#include "runners/model_export.h"
#include "runners/trainer.h"

static const char kUsage[] =
    "usage: trainer --model=image.mnist.LeNet5 --logdir=DIR [--run_locally=cpu --mode=sync] [flags]\n"
    "\n"
    "Trains a model from a checked-in experiment file, resuming from the latest checkpoint in\n"
    "DIR/train. Checkpoints are TensorFlow V2 checkpoints (DIR/train/ckpt-%08d), summaries are\n"
    "TensorBoard event files. SIGINT/SIGTERM save a checkpoint and exit 0; a second one a\n"
    "second or more later stops at once (a copy within the second is ignored).\n"
    "--mode=inspect_params writes DIR/<dataset>-params.txt for every dataset;\n"
    "--mode=inspect_model prints the variables and their sizes; --mode=inspect_evaler prints\n"
    "the datasets; --mode=inspect_input prints the first batches of --dataset (default Train);\n"
    "--mode=write_inference_graph writes the latest checkpoint as one model file,\n"
    "DIR/inference_graphs/model.lvm (as bin/export; --dataset, default Test, gives its tokenizer);\n"
    "--mode=memory_report trains --memory_report_steps steps in DIR (as sync), then prints where the\n"
    "memory went: variables, gradients, optimizer slots, the step arena by kind, peak RSS.\n";

static lv_status inspect_params(lv_cli *c, lv_flag *flags, int n) {
  if (!*c->logdir) return lv_status_make(LV_ERR_INVALID, "--logdir is required with --mode=inspect_params");
  /* Lingvo's InspectParams builds every dataset's params for its controller job, whatever
   * --job says: the dump then reads as Lingvo's (scripts/lingvo_peer/params_diff.py). */
  c->job = "controller";
  lv_model_options o;
  LV_TRY(lv_cli_model_options(c, flags, n, "Train", &o));
  char names[LV_MAX_DATASETS][LV_DATASET_NAME_MAX];
  int nd = 0;
  LV_TRY(lv_model_datasets(&o, names, LV_MAX_DATASETS, &nd));
  LV_TRY(lv_file_mkdirs(c->logdir));
  for (int i = 0; i < nd; i++) {
    lv_params *p = NULL;
    LV_TRY(lv_cli_build_params(c, flags, n, names[i], &p));
    char *text = lv_params_to_text(p), path[LV_PATH_MAX], lower[32];
    lv_str_lower(names[i], lower, sizeof lower);
    lv_status s = lv_status_wrap(lv_path_fmt(path, sizeof path, "%s/%s-params.txt", c->logdir, lower), "--logdir");
    if (!s) s = lv_file_write_atomic(path, text, strlen(text));
    free(text);
    lv_params_free(p);
    if (s) return s;
    printf("%s\n", path);
  }
  return NULL;
}

static lv_status inspect_model(lv_cli *c, lv_flag *flags, int n) {
  lv_params *p = NULL;
  LV_TRY(lv_cli_build_params(c, flags, n, "Train", &p));
  lv_instance *m = NULL;
  /* Only the variables are needed: build the task without reading the dataset. */
  lv_status s = lv_instance_create(p, false, lv_input_no_shard(), &m);
  if (!s) {
    char *a = lv_instance_analysis(m);
    fputs(a, stdout);
    free(a);
    s = lv_file_flush_check(stdout, "stdout");
  }
  lv_instance_destroy(m);
  lv_params_free(p);
  return s;
}

/* Lingvo's write_inference_graph: the model file of the latest checkpoint (bin/export). */
static lv_status write_inference_graph(lv_cli *c, lv_flag *flags, int n, const char *dataset) {
  if (!*c->logdir) return lv_status_make(LV_ERR_INVALID, "--logdir is required with --mode=write_inference_graph");
  char dir[LV_PATH_MAX], out[LV_PATH_MAX];
  LV_TRY(lv_status_wrap(lv_path_fmt(dir, sizeof dir, "%s/inference_graphs", c->logdir), "--logdir"));
  LV_TRY(lv_status_wrap(lv_path_fmt(out, sizeof out, "%s/model.lvm", dir), "--logdir"));
  c->job = "decoder";
  c->mode = "sync";
  lv_params *p = NULL;
  LV_TRY(lv_cli_build_params(c, flags, n, dataset, &p));
  lv_export_info info;
  lv_status s = lv_file_mkdirs(dir);
  if (!s) s = lv_export_model_file(p, NULL, NULL, out, &info);
  lv_params_free(p);
  if (!s) printf("%s\n", out);
  return s;
}

static lv_status inspect_evaler(lv_cli *c, lv_flag *flags, int n) {
  lv_model_options o;
  LV_TRY(lv_cli_model_options(c, flags, n, "Train", &o));
  char names[LV_MAX_DATASETS][LV_DATASET_NAME_MAX];
  int nd = 0;
  LV_TRY(lv_model_datasets(&o, names, LV_MAX_DATASETS, &nd));
  for (int i = 0; i < nd; i++) {
    if (!strcmp(names[i], "Train")) continue;
    char lower[32];
    lv_str_lower(names[i], lower, sizeof lower);
    printf("%s%c", lower, i + 1 < nd ? ',' : '\n');
  }
  return NULL;
}

static lv_status inspect_input(lv_cli *c, lv_flag *flags, int n, const char *dataset, int64_t nbatches) {
  lv_params *p = NULL;
  LV_TRY(lv_cli_build_params(c, flags, n, dataset, &p));
  lv_status s = lv_inspect_input(p, nbatches, !strcasecmp(dataset, "Train"), stdout);
  lv_params_free(p);
  return s;
}

static lv_status run(int argc, char **argv) {
  lv_cli c;
  lv_cli_init(&c);
  int64_t log_interval = 100;
  lv_flag flags[LV_CLI_MAX_FLAGS];
  int n = lv_cli_add_flags(&c, flags, 0);
  flags[n++] = (lv_flag)LV_FLAG_STR("mode", &c.mode, "sync (default), async (one worker replica: the same updates), inspect_params, inspect_model, inspect_evaler, inspect_input, write_inference_graph, memory_report.");
  flags[n++] = (lv_flag)LV_FLAG_I64("log_interval_steps", &log_interval, "Log a progress line every this many steps.");
  const char *dataset = "Train";
  int64_t inspect_batches = 3;
  flags[n++] = (lv_flag)LV_FLAG_STR("dataset", &dataset, "With --mode=inspect_input: the dataset to read (Train, Dev, Test); with --mode=write_inference_graph: whose input params (tokenizer) the model file keeps (default Test). Training always reads Train.");
  flags[n++] = (lv_flag)LV_FLAG_I64("inspect_input_batches", &inspect_batches, "With --mode=inspect_input: how many batches to print.");
  bool rebuild_state = false, partial_restore = false;
  flags[n++] = (lv_flag)LV_FLAG_BOOL("rebuild_checkpoint_state", &rebuild_state, "When <logdir>/train/checkpoint is missing, empty or unreadable but ckpt-* files are there: write a new one listing them and resume from the newest (without it such a start is an error: nothing is overwritten).");
  flags[n++] = (lv_flag)LV_FLAG_BOOL("allow_partial_restore", &partial_restore, "Resume from a checkpoint whose tensors differ from this run's (e.g. another task.train.optimizer): restore those that match, initialize the others (without it that is an error listing them). The checkpoint itself is kept.");
  double bucket_mb = 4.0;
  flags[n++] = (lv_flag)LV_FLAG_F64("allreduce_bucket_mb", &bucket_mb, "Sync replicas (mpirun -np N): sum the gradients in buckets of about this many MB, each started while backward still runs (as PyTorch DDP's buckets); 0: one all-reduce of the whole gradient buffer after backward. Same sums either way.");
  int64_t report_steps = 3;
  flags[n++] = (lv_flag)LV_FLAG_I64("memory_report_steps", &report_steps, "With --mode=memory_report: how many steps to train before the report (its arena figures are the worst step's).");
  bool free_in_backward = true;
  flags[n++] = (lv_flag)LV_FLAG_BOOL("free_in_backward", &free_in_backward, "Give each step tensor's memory (its data, its gradient) back as soon as backward no longer reads it, for the rest of backward to reuse (the same bits; --nofree_in_backward keeps every tensor until the step ends).");
  bool help = false;
  LV_TRY(lv_flags_parse(flags, n, argc, argv, kUsage, &help));
  if (!(bucket_mb >= 0 && bucket_mb <= 1 << 20))
    return lv_status_make(LV_ERR_INVALID, "--allreduce_bucket_mb=%g: expected 0 (off) up to %d MB", bucket_mb, 1 << 20);
  if (help) return NULL;
  if (!*c.model) return lv_status_make(LV_ERR_INVALID, "--model is required (e.g. --model=image.mnist.LeNet5); see --help");
  int launched = 1, launched_rank = 0;
  bool under_mpi = lv_comm_launched_by_mpi(&launched, &launched_rank) && launched > 1;
  /* The inspect modes run without the communicator: a rank in one would leave the
   * others waiting for it. */
  if (under_mpi && !strncmp(c.mode, "inspect_", 8))
    return lv_status_make(LV_ERR_INVALID, "--mode=%s runs in one process, not under mpirun with %d processes (the "
                          "other ranks would wait for this one); run it without mpirun", c.mode, launched);
  if (!strcmp(c.mode, "inspect_params")) return inspect_params(&c, flags, n);
  const bool memory_report = !strcmp(c.mode, "memory_report");
  if (memory_report) {
    if (under_mpi)
      return lv_status_make(LV_ERR_INVALID, "--mode=memory_report runs in one process, not under mpirun with %d "
                            "processes", launched);
    if (report_steps < 1)
      return lv_status_make(LV_ERR_INVALID, "--memory_report_steps=%lld: expected >= 1", (long long)report_steps);
    c.mode = "sync";
  }
  if (!strcmp(c.mode, "inspect_model")) return inspect_model(&c, flags, n);
  if (!strcmp(c.mode, "inspect_evaler")) return inspect_evaler(&c, flags, n);
  if (!strcmp(c.mode, "inspect_input")) return inspect_input(&c, flags, n, dataset, inspect_batches);
  if (!strcmp(c.mode, "write_inference_graph"))
    return write_inference_graph(&c, flags, n, lv_flags_find(flags, n, "dataset")->set ? dataset : "Test");
  LV_TRY(lv_cli_trainer_job(&c));
  if (under_mpi && !strcmp(c.mode, "async"))
    return lv_status_make(LV_ERR_INVALID, "--mode=async (--job=trainer) with %d replicas: lingvoc's replicas are "
                          "synchronous (Lingvo's async trainers need parameter servers); use --mode=sync", launched);
  if (!*c.logdir) return lv_status_make(LV_ERR_INVALID, "--logdir is required (e.g. --logdir=/tmp/mnist/log)");
  LV_TRY(lv_file_check_writable_dir(c.logdir));
  lv_params *p = NULL;
  if (log_interval < 1)
    return lv_status_make(LV_ERR_INVALID, "--log_interval_steps=%lld: expected >= 1", (long long)log_interval);
  LV_TRY(lv_cli_build_params(&c, flags, n, "Train", &p));
  /* The communicator follows the launch: mpi under mpirun, else local. Only rank 0
   * logs beyond errors. */
  lv_comm *comm = NULL;
  lv_status s = lv_comm_create_auto(&comm);
  if (s) {
    lv_params_free(p);
    return s;
  }
  if (lv_comm_rank(comm) != 0) lv_log_set_level(LV_LOG_ERROR);
  lv_trainer_options o = {.log_interval_steps = log_interval, .install_signal_handlers = true,
                          .check_numerics = c.enable_check_numerics, .rebuild_checkpoint_state = rebuild_state,
                          .allow_partial_restore = partial_restore, .comm = comm,
                          .allreduce_bucket_bytes = (int64_t)(bucket_mb * (1 << 20)),
                          .free_in_backward = free_in_backward,
                          .memory_report_steps = memory_report ? report_steps : 0};
  s = lv_trainer_run(p, &o);
  lv_params_free(p);
  /* A failed rank's peers may wait in a collective: stop them all. */
  if (s && lv_comm_size(comm) > 1) {
    char msg[8192];
    snprintf(msg, sizeof msg, "%s: error: %s", lv_cli_prog(argv[0]), lv_status_msg(s));
    lv_comm_abort(comm, lv_status_exit_code(s), msg);
  }
  lv_status s2 = lv_comm_destroy(comm);
  if (!s) return s2;
  lv_status_free(s2);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  return lv_status_report(lv_cli_prog(argv[0]), run(argc, argv));
}
