/* A model built from frozen params for one job, as the trainer, evaler and decoder use
 * it: the variable store (with global_step) on one device (cuda:0 when
 * cluster.worker.gpus_per_replica > 0, else the host), the task, optionally its input
 * generator (on the host, serving one replica's shard), the step graph, and the logdir
 * and its train/ directory (an over-long --logdir is an error here). lv_instance_fprop
 * copies a host batch to the step's device and runs the task's forward pass; the
 * instance also lists its variables as checkpoint saveables and writes Lingvo's
 * model_analysis.txt. The instance owns everything it points to except cfg. */
#ifndef LV_RUNNERS_INSTANCE_H
#define LV_RUNNERS_INSTANCE_H

#include "base/path.h"
#include "core/graph.h"
#include "core/variable.h"
#include "input/input.h"
#include "io/model_file.h"
#include "kernels/kernels.h"
#include "models/task.h"
#include "runners/checkpointer.h"

typedef struct lv_instance {
  const lv_params *cfg;
  lv_varstore *vs;
  lv_task *task;
  lv_var *global_step;
  lv_input *input;
  lv_graph *graph;
  const lv_backend *backend; /* of the device the variables and the step live on */
  lv_batch step_batch; /* the batch on the step's device; lives until the next fprop */
  char logdir[LV_PATH_MAX], train_dir[LV_PATH_MAX]; /* <logdir>/train */
} lv_instance;

/* with_input: also create the input generator, after the task has checked its params and
 * before the variables are allocated (missing data is an error before a large model's
 * memory is taken; inspect_model needs only the model, so it runs without the dataset). The input serves replica `shard`. */
lv_status lv_instance_create(const lv_params *cfg, bool with_input, lv_input_shard shard, lv_instance **out);
/* Creates the input generator of an instance made without one (the decoder first sets the
 * task's decoding up, whose errors come before the dataset's). */
lv_status lv_instance_create_input(lv_instance *m, lv_input_shard shard);
/* The same with variables and step graph on device dev (the input stays on the host;
 * each batch is copied in by lv_instance_fprop). */
lv_status lv_instance_create_on(const lv_params *cfg, lv_device dev, bool with_input, lv_input_shard shard,
                                lv_instance **out);
/* An instance (no input) for the weights of model file f, which
 * lv_instance_restore_model_file then restores: on the host, unless LINGVOC_INT8=float,
 * every variable f holds quantized gets no float storage (lv_var_defer; kernels/qweight.h
 * says when its floats are made). */
lv_status lv_instance_create_for_file(const lv_params *cfg, const lv_model_file *f, lv_instance **out);
void lv_instance_destroy(lv_instance *m);
int64_t lv_instance_step(const lv_instance *m);
/* Saveables for every model variable (including global_step), in var-store order;
 * caller frees the array. */
lv_saveable *lv_instance_saveables(lv_instance *m, int *n);
/* Restores the model's variables from checkpoint prefix for evaluation (the evaler, the
 * decoder): Lingvo's eval theta. With task.train.ema_decay > 0, every variable whose
 * moving average "<var>/ExponentialMovingAverage" the checkpoint holds is restored from
 * the average (*num_averages, if not NULL, counts them); the others, and all of them with ema_decay 0,
 * from the raw weights. The trainer restores the raw weights (and the averages as
 * averages) itself. */
lv_status lv_instance_restore(lv_instance *m, const char *prefix, int *num_averages);
/* Lingvo's model_analysis.txt text (caller frees). */
char *lv_instance_analysis(lv_instance *m);
/* Runs one forward pass (training or eval) of batch b; on success m->graph holds the
 * arena tensors referenced by metrics until the next reset. metrics must be initialized
 * (lv_metrics_init) before the first call; each call frees what the previous one held,
 * and the caller frees the last (lv_metrics_free). */
lv_status lv_instance_fprop(lv_instance *m, lv_batch *b, bool training, int64_t step, lv_metrics *metrics);

#endif
