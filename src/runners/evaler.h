/* The evaluation loop (Lingvo's Evaler, job evaler_<dataset>): polls <logdir>/train for
 * new checkpoints with Lingvo's backoff (1 s x1.5 up to 300 s), evaluates each on the
 * dataset (eval.samples_per_summary examples; 0 = all), writes eval_<ds>/score-%08d.txt,
 * events and processed_ckpts.txt, and stops after the checkpoint at train.max_steps.
 * --once evaluates one checkpoint (the latest, or the one given) and returns. */
#ifndef LV_RUNNERS_EVALER_H
#define LV_RUNNERS_EVALER_H

#include "base/status.h"
#include "params/params.h"

typedef struct lv_evaler_options {
  const char *dataset;    /* "Test" */
  bool once;
  const char *checkpoint; /* with once: a prefix to evaluate; NULL = latest */
  double max_poll_secs;   /* backoff cap (Lingvo: 300) */
  double timeout_secs;    /* give up waiting for a new checkpoint after this long; 0 = never */
} lv_evaler_options;

lv_status lv_evaler_run(const lv_params *cfg, const lv_evaler_options *opt);

#endif
