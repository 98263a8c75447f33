/* Lingvo's early stopping and its metric history files (lingvo/core/early_stop.py, the
 * best_step op of lingvo/core/ops/best_step_op_kernels.cc; reference/lingvo.md §5.5):
 *
 * - A metric history is a text file <logdir>/<jobname>/<metric>.history.txt with one line
 *   "%d %f\n" (global step, value) per evaluation, appended by the evaler or decoder job
 *   named jobname ("eval_dev", "decoder_test") for its summary named metric.
 * - best_step reads it into a step -> value map (the first line of a step wins; values
 *   negated when maximizing), walks it by ascending step and returns the step of the best
 *   value (a later value replaces it only when better by more than the tolerance) and the
 *   last step; a missing file gives (0, 0).
 * - EarlyStop (task.train.early_stop, window > 0) stops training once
 *   last - best > window and last >= min_steps; DevBasedSchedule (schedule.h) decays the
 *   learning rate from the same file. */
#ifndef LV_OPTIM_EARLY_STOP_H
#define LV_OPTIM_EARLY_STOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct lv_metric_history {
  char jobname[128]; /* "eval_dev" */
  char metric[128];  /* "log_pplx" */
  bool minimize;
} lv_metric_history;

/* <logdir>/<jobname>/<metric>.history.txt into out[cap]. */
lv_status lv_metric_history_file(const char *logdir, const lv_metric_history *h, char *out, size_t cap);
/* Appends "%d %f\n" % (step, value) to path. */
lv_status lv_metric_history_append(const char *path, int64_t step, double value);
/* The best_step op on path. A malformed line is an LV_ERR_INVALID error naming the file
 * and line (Lingvo CHECK-fails). */
lv_status lv_best_step(const char *path, double tolerance, bool minimize, int64_t *best, int64_t *last);

typedef struct lv_early_stop_config {
  lv_metric_history history;
  double tolerance;
  int64_t window; /* 0: off */
  int64_t min_steps;
  bool verbose;
} lv_early_stop_config;

/* EarlyStop.Stop's criterion. */
bool lv_early_stop_triggered(const lv_early_stop_config *c, int64_t best, int64_t last);

#endif
