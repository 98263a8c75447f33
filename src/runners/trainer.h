/* The training loop (Lingvo's Controller + Trainer in one process, --mode=sync; with a
 * communicator of several ranks, one sync replica per process): restore or initialize, run train.max_steps steps, log progress with rate and
 * ETA, write summaries every train.summary_interval_steps, checkpoint by the policy in
 * checkpointer.h, and on SIGINT/SIGTERM save a checkpoint and return cleanly. A resumed
 * checkpoint is never written again; temporary files of killed trainers are removed on
 * start. */
#ifndef LV_RUNNERS_TRAINER_H
#define LV_RUNNERS_TRAINER_H

#include "base/status.h"
#include "comm/comm.h"
#include "params/params.h"

typedef struct lv_trainer_options {
  int64_t log_interval_steps; /* progress line every N steps (0: every 100 or 10 s) */
  bool install_signal_handlers;
  bool check_numerics; /* a non-finite loss stops the run with an error (else the step is skipped) */
  /* A missing, unreadable or empty train/checkpoint beside ckpt-N files: rebuild it from
   * them and resume from the newest (else such a start is an error). */
  bool rebuild_checkpoint_state;
  /* Resume even if the checkpoint's tensors differ from the run's (another optimizer):
   * restore what matches, initialize the rest (else an error listing the differences). */
  bool allow_partial_restore;
  /* Sync replicas (runners/replicas.h): this process is rank r of the communicator's
   * size; rank 0 alone writes checkpoints, summaries and control files. NULL: one
   * process. A failure on one rank of several is returned to the caller, whose peers
   * may be blocked in a collective: the caller stops them (lv_comm_abort). */
  lv_comm *comm;
  /* With several ranks: the gradient all-reduce starts bucket by bucket during backward
   * (buckets of about this many bytes; runners/replicas.h, lv_grad_overlap); 0: one
   * all-reduce of the whole buffer after backward. */
  int64_t allreduce_bucket_bytes;
  /* Give each step tensor's memory back during backward once no later backward function
   * reads it (core/graph.h: lv_graph_set_free_in_backward); the same bits either way. */
  bool free_in_backward;
  /* --mode=memory_report: stop after this many steps of this run and print where the
   * memory went to stdout (runners/memory_report.h); 0: train as usual. */
  int64_t memory_report_steps;
} lv_trainer_options;

lv_status lv_trainer_run(const lv_params *cfg, const lv_trainer_options *opt);
/* Writes control/params.txt, control/model_analysis.txt and train/trainer_params.txt. */
lv_status lv_trainer_write_control(const lv_params *cfg, const char *analysis);

#endif
