#include "runners/cli.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/names.h"
#include "base/path.h"
#include "comm/comm.h"
#include "kernels/kernels.h"
#include <strings.h>

void lv_cli_init(lv_cli *c) {
  memset(c, 0, sizeof *c);
  c->model = c->logdir = c->job = c->mode = c->run_locally = "";
  c->model_params_override = c->model_params_file_override = c->experiments_dir = "";
  c->model_task_name = c->cluster_spec = "";
  c->saver_max_to_keep = -1;
  c->saver_keep_checkpoint_every_n_hours = -1;
  c->worker_split_size = 1;
  c->enable_asserts = c->enable_check_numerics = true;
}

int lv_cli_add_flags(lv_cli *c, lv_flag *f, int n) {
  lv_flag add[] = {
      LV_FLAG_STR("model", &c->model, "Name of the model class to train, e.g. image.mnist.LeNet5 (group LeNet5 of experiments/image/mnist.cfg)."),
      LV_FLAG_STR("logdir", &c->logdir, "Root log directory: train/ (checkpoints, trainer summaries), control/, eval_<dataset>/."),
      LV_FLAG_STR("job", &c->job, "Lingvo's job names. bin/trainer: controller, trainer_client (sync), trainer (async), comma-separated; bin/evaler: evaler_<dataset> or evaler_once_<dataset>@<checkpoint>. Other jobs are errors naming the program that runs them."),
      LV_FLAG_STR("run_locally", &c->run_locally, "'' or cpu: run on this machine's CPU; gpu: on its first GPU (a CUDA build, make CUDA=1)."),
      LV_FLAG_STR("model_params_override", &c->model_params_override, "Params.FromText lines applied to the model params, separated by ';' or newlines, e.g. 'train.max_steps: 500; task.train.learning_rate: 3e-4'. Setting a param a flag owns (cluster.logdir, cluster.job, cluster.mode, model) to another value than the flag's is an error."),
      LV_FLAG_STR("model_params_file_override", &c->model_params_file_override, "A file of Params.FromText lines (e.g. another run's --mode=inspect_params output) applied to the model params; a missing file is an error. Flags own what they name and win over the file: --logdir (cluster.logdir), --job, --mode, --model and the --dataset's input.* (a conflict is reported)."),
      LV_FLAG_I64("saver_max_to_keep", &c->saver_max_to_keep, "If >= 0, sets train.save_max_to_keep."),
      LV_FLAG_F64("saver_keep_checkpoint_every_n_hours", &c->saver_keep_checkpoint_every_n_hours, "If >= 0, sets train.save_keep_checkpoint_every_n_hours."),
      LV_FLAG_STR("experiments_dir", &c->experiments_dir, "Where experiment files live (default: $LINGVOC_EXPERIMENTS, <bin>/../experiments, ./experiments)."),
      LV_FLAG_I64("num_threads", &c->num_threads, "Kernel threads (OpenMP + OpenBLAS), 0 to 1024; 0 = one per core."),
      LV_FLAG_I64("task", &c->task, "Task index within the job (single machine: 0)."),
      LV_FLAG_I64("worker_gpus", &c->worker_gpus, "GPUs per worker replica (needs a CUDA build)."),
      LV_FLAG_I64("worker_replicas", &c->worker_replicas, "Number of worker replicas (sync data parallelism; batch_size is per replica). One process per replica, started by mpirun -np N (one or several hosts); 0: as many as mpirun started (1 without mpirun). A value that differs from mpirun's count is an error."),
      LV_FLAG_I64("worker_split_size", &c->worker_split_size, "Devices per split (model parallelism, cluster.worker.devices_per_split); lingvoc runs one device per split, so only 1."),
      LV_FLAG_STR("model_task_name", &c->model_task_name, "Multitask models: the task to run (lingvoc has single-task models only)."),
      LV_FLAG_STR("cluster_spec", &c->cluster_spec, "Multi-machine cluster spec (not supported by this build)."),
      LV_FLAG_BOOL("enable_asserts", &c->enable_asserts, "Lingvo's runtime assertions. lingvoc's shape, id and range checks are always on (they cost nothing measurable), so only true is accepted."),
      LV_FLAG_BOOL("enable_check_numerics", &c->enable_check_numerics, "As Lingvo's CheckNumerics (on the loss and every gradient): the trainer stops with an error at the first step whose loss or a gradient is NaN or Inf, naming the variable; its variables stay as they were before the step. false: the step is skipped and counted (has_nan_or_inf), as Lingvo's learner does without CheckNumerics."),
  };
  for (size_t i = 0; i < LV_ARRAY_LEN(add); i++) {
    LV_ASSERT(n < LV_CLI_MAX_FLAGS);
    f[n++] = add[i];
  }
  return n;
}

/* Splits c->job at commas into toks (at most max); returns the count. */
static int job_tokens(const char *job, char toks[][LV_CLI_JOB_MAX], int max) {
  int n = 0;
  for (const char *p = job; *p && n < max;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    snprintf(toks[n], LV_CLI_JOB_MAX, "%.*s", (int)(len < LV_CLI_JOB_MAX - 1 ? len : LV_CLI_JOB_MAX - 1), p);
    if (len) n++;
    p += len + (e != NULL);
  }
  return n;
}

lv_status lv_cli_trainer_job(lv_cli *c) {
  char toks[8][LV_CLI_JOB_MAX];
  int n = job_tokens(c->job, toks, 8);
  bool async = !strcmp(c->mode, "async"), has_trainer = false, has_client = false;
  if (*c->mode && strcmp(c->mode, "sync") && !async)
    return lv_status_make(LV_ERR_INVALID, "--mode=%s: bin/trainer takes sync, async, inspect_params, inspect_model, "
                          "inspect_evaler, inspect_input or write_inference_graph", c->mode);
  for (int i = 0; i < n; i++) {
    const char *t = toks[i];
    if (!strcmp(t, "controller")) continue;
    if (!strcmp(t, "trainer")) { has_trainer = true; continue; }
    if (!strcmp(t, "trainer_client")) { has_client = true; continue; }
    if (!strncmp(t, "evaler_", 7))
      return lv_status_make(LV_ERR_INVALID, "--job=%s: bin/trainer does not run evaler jobs; run bin/evaler --logdir=DIR "
                            "--job=%s beside it (one process per job: several jobs in one process are not supported)",
                            c->job, t);
    if (!strncmp(t, "decoder_", 8))
      return lv_status_make(LV_ERR_INVALID, "--job=%s: bin/trainer does not run decoder jobs; run bin/decoder",
                            c->job);
    return lv_status_make(LV_ERR_INVALID, "--job=%s: bin/trainer runs Lingvo's controller, trainer_client (sync) and "
                          "trainer (async) jobs; '%s' is not one of them", c->job, t);
  }
  if (has_trainer && has_client)
    return lv_status_make(LV_ERR_INVALID, "--job=%s: trainer (async) and trainer_client (sync) exclude each other", c->job);
  if (has_trainer && *c->mode && !async)
    return lv_status_make(LV_ERR_INVALID, "--job=trainer is Lingvo's asynchronous trainer but --mode=%s; use "
                          "--job=trainer_client or --mode=async", c->mode);
  if (has_client && async)
    return lv_status_make(LV_ERR_INVALID, "--job=trainer_client is Lingvo's synchronous trainer but --mode=async; use "
                          "--job=trainer or --mode=sync");
  async |= has_trainer;
  c->mode = async ? "async" : "sync";
  c->job = async ? "trainer" : "trainer_client";
  if (async)
    lv_info("--mode=async with one worker replica: each step applies its own gradients at once, the same updates "
            "as sync training");
  return NULL;
}

lv_status lv_cli_evaler_job(lv_cli *c, bool dataset_given, const char **dataset, bool *once, const char **checkpoint) {
  if (!strncmp(c->mode, "inspect", 7))
    return lv_status_make(LV_ERR_INVALID, "--mode=%s is a trainer mode: run bin/trainer --mode=%s", c->mode, c->mode);
  if (*c->mode && strcmp(c->mode, "sync") && strcmp(c->mode, "async"))
    return lv_status_make(LV_ERR_INVALID, "--mode=%s: bin/evaler takes sync or async (both evaluate the same way)",
                          c->mode);
  char toks[8][LV_CLI_JOB_MAX];
  int n = job_tokens(c->job, toks, 8);
  if (n > 1)
    return lv_status_make(LV_ERR_INVALID, "--job=%s: bin/evaler runs one evaler job; start one process per job "
                          "(several jobs in one process are not supported)", c->job);
  if (n == 1) {
    const char *t = toks[0], *ds = NULL;
    if (!strncmp(t, "evaler_once_", 12)) {
      char *ckpt = c->job_checkpoint;
      const char *at = strchr(t + 12, '@');
      if (!at || at == t + 12 || !at[1])
        return lv_status_make(LV_ERR_INVALID, "--job=%s: expected evaler_once_<dataset>@<checkpoint prefix>", t);
      LV_TRY(lv_status_wrap(lv_path_fmt(ckpt, sizeof c->job_checkpoint, "%s", at + 1), "--job"));
      if (at - (t + 12) >= (ptrdiff_t)sizeof c->job_dataset)
        return lv_status_make(LV_ERR_INVALID, "--job=%s: dataset name too long", t);
      snprintf(c->job_dataset, sizeof c->job_dataset, "%.*s", (int)(at - (t + 12)), t + 12);
      ds = c->job_dataset;
      if (*checkpoint && **checkpoint && strcmp(*checkpoint, ckpt))
        return lv_status_make(LV_ERR_INVALID, "--job=%s names checkpoint %s but --checkpoint=%s", t, ckpt, *checkpoint);
      *checkpoint = ckpt;
      *once = true;
    } else if (!strncmp(t, "evaler_", 7) && t[7]) {
      if (strlen(t + 7) >= sizeof c->job_dataset)
        return lv_status_make(LV_ERR_INVALID, "--job=%s: dataset name too long", t);
      snprintf(c->job_dataset, sizeof c->job_dataset, "%.63s", t + 7);
      ds = c->job_dataset;
    } else if (!strncmp(t, "decoder_", 8)) {
      return lv_status_make(LV_ERR_INVALID, "--job=%s: that is a decoder job; run bin/decoder", t);
    } else if (!strcmp(t, "controller") || !strcmp(t, "trainer") || !strcmp(t, "trainer_client")) {
      return lv_status_make(LV_ERR_INVALID, "--job=%s: that is a trainer job; run bin/trainer", t);
    } else {
      return lv_status_make(LV_ERR_INVALID, "--job=%s: bin/evaler runs evaler_<dataset> and "
                            "evaler_once_<dataset>@<checkpoint> jobs", t);
    }
    if (dataset_given && strcasecmp(ds, *dataset))
      return lv_status_make(LV_ERR_INVALID, "--job=%s evaluates dataset %s but --dataset=%s", t, ds, *dataset);
    if (!dataset_given) *dataset = ds;
  }
  char lower[64];
  lv_str_lower(*dataset, lower, sizeof lower);
  snprintf(c->job_buf, sizeof c->job_buf, "evaler_%s", lower);
  c->job = c->job_buf;
  return NULL;
}

lv_status lv_cli_decoder_job(lv_cli *c, bool dataset_given, const char **dataset) {
  if (!strncmp(c->mode, "inspect", 7))
    return lv_status_make(LV_ERR_INVALID, "--mode=%s is a trainer mode: run bin/trainer --mode=%s", c->mode, c->mode);
  if (*c->mode && strcmp(c->mode, "sync") && strcmp(c->mode, "async"))
    return lv_status_make(LV_ERR_INVALID, "--mode=%s: bin/decoder takes sync or async (both decode the same way)",
                          c->mode);
  char toks[8][LV_CLI_JOB_MAX];
  int n = job_tokens(c->job, toks, 8);
  if (n > 1)
    return lv_status_make(LV_ERR_INVALID, "--job=%s: bin/decoder runs one decoder job; start one process per job "
                          "(several jobs in one process are not supported)", c->job);
  if (n == 1) {
    const char *t = toks[0];
    if (!strncmp(t, "decoder_", 8) && t[8]) {
      if (strlen(t + 8) >= sizeof c->job_dataset)
        return lv_status_make(LV_ERR_INVALID, "--job=%s: dataset name too long", t);
      snprintf(c->job_dataset, sizeof c->job_dataset, "%.63s", t + 8);
    } else if (!strncmp(t, "evaler_", 7)) {
      return lv_status_make(LV_ERR_INVALID, "--job=%s: that is an evaler job; run bin/evaler", t);
    } else if (!strcmp(t, "controller") || !strcmp(t, "trainer") || !strcmp(t, "trainer_client")) {
      return lv_status_make(LV_ERR_INVALID, "--job=%s: that is a trainer job; run bin/trainer", t);
    } else {
      return lv_status_make(LV_ERR_INVALID, "--job=%s: bin/decoder runs decoder_<dataset> jobs", t);
    }
    if (dataset_given && strcasecmp(c->job_dataset, *dataset))
      return lv_status_make(LV_ERR_INVALID, "--job=%s decodes dataset %s but --dataset=%s", t, c->job_dataset,
                            *dataset);
    if (!dataset_given) *dataset = c->job_dataset;
  }
  char lower[64];
  lv_str_lower(*dataset, lower, sizeof lower);
  snprintf(c->job_buf, sizeof c->job_buf, "decoder_%s", lower);
  c->job = c->job_buf;
  return NULL;
}

const char *lv_cli_prog(const char *argv0) {
  const char *s = strrchr(argv0, '/');
  return s ? s + 1 : argv0;
}

lv_status lv_cli_model_options(lv_cli *c, const lv_flag *flags, int nflags, const char *dataset, lv_model_options *o) {
  (void)flags;
  (void)nflags;
  if (!c->enable_asserts)
    return lv_status_make(LV_ERR_INVALID, "--enable_asserts=false is not supported: lingvoc's shape, id and range "
                          "checks are always on (they cost nothing measurable)");
  if (!*c->model) return lv_status_make(LV_ERR_INVALID, "--model is required (e.g. --model=image.mnist.LeNet5); see --help");
  if (!strcmp(c->run_locally, "tpu"))
    return lv_status_make(LV_ERR_INVALID, "--run_locally=tpu: lingvoc does not run on TPUs (Lingvo's TPU jobs and "
                          "executors are not part of it); use --run_locally=cpu");
  const bool gpu = !strcmp(c->run_locally, "gpu");
  if (*c->run_locally && strcmp(c->run_locally, "cpu") && !gpu)
    return lv_status_make(LV_ERR_INVALID, "--run_locally=%s: expected cpu or gpu", c->run_locally);
  const int gpus = gpu || c->worker_gpus > 0 ? lv_cuda_device_count() : 0;
  if (gpus < 0)
    return lv_status_make(LV_ERR_INVALID, "%s: this build has no CUDA (build with `make CUDA=1`, whose executables "
                          "are in build-cuda/bin; or use --run_locally=cpu)", gpu ? "--run_locally=gpu" : "--worker_gpus");
  if ((gpu || c->worker_gpus > 0) && gpus == 0)
    return lv_status_make(LV_ERR_INVALID, "%s: no GPU is visible to this process (CUDA found no device: check "
                          "nvidia-smi and CUDA_VISIBLE_DEVICES; or use --run_locally=cpu)",
                          gpu ? "--run_locally=gpu" : "--worker_gpus");
  if (c->worker_gpus > 0)
    return lv_status_make(LV_ERR_INVALID, "--worker_gpus=%lld: several GPUs in one process are not supported yet; "
                          "--run_locally=gpu trains on one", (long long)c->worker_gpus);
  int launched = 1, rank = 0;
  bool by_mpi = lv_comm_launched_by_mpi(&launched, &rank);
  if (c->worker_replicas < 0)
    return lv_status_make(LV_ERR_INVALID, "--worker_replicas=%lld: expected >= 1 (or 0: as many as mpirun started)",
                          (long long)c->worker_replicas);
  if (c->worker_replicas > 0 && c->worker_replicas != launched)
    return lv_status_make(LV_ERR_INVALID, "--worker_replicas=%lld but %d process%s started%s: lingvoc runs one "
                          "process per replica; start them with mpirun -np %lld (or drop --worker_replicas)",
                          (long long)c->worker_replicas, launched, launched == 1 ? " was" : "es were",
                          by_mpi ? " by mpirun" : " (no mpirun)", (long long)c->worker_replicas);
  if (c->worker_split_size != 1)
    return lv_status_make(LV_ERR_INVALID, "--worker_split_size=%lld: model parallelism (several devices per split) is "
                          "not supported; lingvoc runs one device per split", (long long)c->worker_split_size);
  if (*c->cluster_spec)
    return lv_status_make(LV_ERR_INVALID, "--cluster_spec: lingvoc's replicas are MPI ranks; start them with "
                          "mpirun -np N [--host a,b] instead of a cluster spec");
  if (*c->model_task_name)
    return lv_status_make(LV_ERR_INVALID, "--model_task_name: lingvoc has single-task models only");
  if (c->task != 0)
    return lv_status_make(LV_ERR_INVALID, "--task=%lld: lingvoc's replica index is its MPI rank (start replicas with "
                          "mpirun -np N); --task may only be 0", (long long)c->task);
  if (c->num_threads < 0 || c->num_threads > LV_CLI_MAX_THREADS)
    return lv_status_make(LV_ERR_INVALID, "--num_threads=%lld: expected 0 (one per core) to %d",
                          (long long)c->num_threads, LV_CLI_MAX_THREADS);
  lv_model_options_init(o);
  if (gpu) o->gpus_per_replica = 1; /* Lingvo's run_locally=gpu: one worker with one GPU */
  o->model = c->model;
  o->dataset = dataset;
  o->experiments_dir = c->experiments_dir;
  o->params_override = c->model_params_override;
  o->params_file_override = c->model_params_file_override;
  o->flag_params = c->flag_params;
  o->logdir = c->logdir;
  o->mode = *c->mode && strncmp(c->mode, "inspect", 7) ? c->mode : "sync";
  o->job = c->job;
  o->saver_max_to_keep = c->saver_max_to_keep;
  o->worker_replicas = launched;
  o->saver_keep_checkpoint_every_n_hours = c->saver_keep_checkpoint_every_n_hours;
  return NULL;
}

lv_status lv_cli_build_params(lv_cli *c, const lv_flag *flags, int nflags, const char *dataset, lv_params **out) {
  lv_model_options o;
  LV_TRY(lv_cli_model_options(c, flags, nflags, dataset, &o));
  o.num_threads = c->num_threads;
  LV_TRY(lv_model_params_build(&o, out));
  /* The experiment file or an override may set it too (OpenMP crashes on 100,000). */
  int64_t t = lv_params_int(*out, "cluster.num_threads");
  if (t < 0 || t > LV_CLI_MAX_THREADS) {
    lv_params_free(*out);
    *out = NULL;
    return lv_status_make(LV_ERR_INVALID, "cluster.num_threads = %lld: expected 0 (one per core) to %d",
                          (long long)t, LV_CLI_MAX_THREADS);
  }
  return NULL;
}
