/* Model params (Lingvo's SingleTaskModel params + model registry): resolves
 * --model=image.mnist.LeNet5 to group LeNet5 of experiments/image/mnist.cfg, loads it
 * into the model-level tree {model, cluster, train, task, input}, copies task.train's
 * runner fields to the model-level train (as SingleTaskModel.Params does), picks the
 * dataset's input params, applies --model_params_override / _file_override and the saver
 * flags, and freezes the result. */
#ifndef LV_MODELS_MODEL_H
#define LV_MODELS_MODEL_H

#include "base/status.h"
#include "params/params.h"

typedef struct lv_model_options {
  const char *model;                /* "image.mnist.LeNet5" */
  const char *dataset;              /* "Train", "Test", "Dev" (case-insensitive) */
  const char *experiments_dir;      /* NULL or "": search (see lv_model_experiments_dir) */
  const char *params_override;      /* --model_params_override */
  const char *params_file_override; /* --model_params_file_override */
  const char *flag_params;          /* NULL or params lines an executable's own flags set (after the overrides) */
  const char *logdir, *mode, *job;
  int64_t saver_max_to_keep;                  /* < 0: unset */
  double saver_keep_checkpoint_every_n_hours; /* < 0: unset */
  int64_t num_threads;                        /* <= 0: unset */
  int64_t worker_replicas;                    /* <= 0: unset; cluster.worker.replicas (sync replicas) */
  int64_t gpus_per_replica;                   /* > 0: cluster.worker.gpus_per_replica (--run_locally=gpu) */
} lv_model_options;

/* Fills defaults (unset saver flags). */
void lv_model_options_init(lv_model_options *o);
/* The experiments directory: o->experiments_dir, else $LINGVOC_EXPERIMENTS, else
 * <executable dir>/../experiments, else ./experiments. */
lv_status lv_model_experiments_dir(const char *flag_value, char *out, size_t n);
/* The default model params tree (before any experiment file). */
lv_params *lv_model_default_params(void);
lv_status lv_model_params_build(const lv_model_options *o, lv_params **out);
/* The (unfrozen) params lv_model_params_build made, from their text (lv_params_to_text, as
 * inspect_params writes it and a model file keeps it): the default tree without its
 * datasets, then the text (each cls line instantiating its class). Errors name source. */
lv_status lv_model_params_from_text(const char *text, const char *source, lv_params **out);
/* The dataset names an experiment defines, for inspect_params and inspect_evaler: Lingvo's
 * ("Train", "Dev", "Test", "DevOther", "TestOther", "Real") first, then any other group
 * under `datasets` (e.g. asr.synth_en's "heldoutespeak"; --dataset matches names
 * case-insensitively), at most cap of them. */
#define LV_DATASET_NAME_MAX 32
#define LV_MAX_DATASETS 32
lv_status lv_model_datasets(const lv_model_options *o, char (*names)[LV_DATASET_NAME_MAX], int cap, int *n);

#endif
