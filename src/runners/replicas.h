/* Synchronous data-parallel replicas of one training job (Lingvo's sync replicas;
 * PyTorch DDP without buckets): every rank of a communicator (comm/comm.h) builds the
 * same model, rank 0 (the chief) restores or initializes and broadcasts the state,
 * each step every rank reads its own shard of the input, the ranks agree on the step's
 * metrics and on the share of the global loss weight each rank's gradient carries, sum
 * the gradient buffer, and apply the same update, so the variables stay identical.
 *
 * Gradients: Lingvo's FProp combines the splits' metrics with WeightedAvgOfMetrics, so
 * the global loss is sum_r w_r L_r / sum_r w_r (w_r: rank r's loss weight, e.g. its
 * number of examples). Each rank backpropagates its loss scaled by w_r / sum w, and the
 * summed gradients are the gradient of the global loss: 2 ranks x batch 128 take the
 * steps of 1 rank x batch 256 on the same examples (up to float rounding).
 *
 * Non-trainable float variables (batch norm's moving statistics) are updated by each
 * rank from its own batch and then replaced by their mean over the ranks.
 *
 * Every call is a collective: all ranks make it, in the same order. With a one-rank
 * communicator (or NULL) each call is the single-process computation. */
#ifndef LV_RUNNERS_REPLICAS_H
#define LV_RUNNERS_REPLICAS_H

#include <stdbool.h>

#include "comm/comm.h"
#include "core/graph.h"
#include "core/variable.h"
#include "models/task.h"
#include "runners/checkpointer.h"

typedef struct lv_replica_step {
  bool stop;        /* some rank asked to stop (a signal): every rank stops after this step */
  float loss_scale; /* this rank's share of the global loss weight, w_r / sum_r w_r */
  int n;            /* metrics, in mt's order */
  double value[LV_MAX_METRICS];  /* global weighted mean of each metric */
  double weight[LV_MAX_METRICS]; /* global sum of each metric's weight */
} lv_replica_step;

/* After a step's forward pass: exchanges every rank's metrics (value x weight, weight)
 * and stop request. Metric names and counts are the same on every rank (same model). */
lv_status lv_replicas_exchange(lv_comm *c, const lv_metrics *mt, bool stop, lv_replica_step *out);
/* Sums the variable store's gradient buffer over the ranks (in place). */
lv_status lv_replicas_allreduce_grads(lv_comm *c, lv_varstore *vs);

/* The gradient all-reduce overlapped with backward (PyTorch DDP's buckets): the gradient
 * buffer is cut at variable boundaries into buckets of about bucket_bytes; a bucket's
 * sum starts (a non-blocking all-reduce) as soon as backward has finished every tape
 * node that reads its variables, and buckets start strictly from the last to the first
 * (the order in which a forward-ordered model's gradients become final), so every rank
 * starts the same reductions in the same order whatever its tape looks like. The sums
 * are those of lv_replicas_allreduce_grads (each element is reduced once, by the same
 * communicator).
 *
 * Per step: lv_grad_overlap_arm(o, graph) after the forward pass (it reads the tape and
 * installs the graph's backward hook), lv_graph_backward, then lv_grad_overlap_finish
 * (starts what is left, waits for every bucket, removes the hook) in place of
 * lv_replicas_allreduce_grads. */
typedef struct lv_grad_overlap lv_grad_overlap;
/* *out = NULL when overlap does not apply: one rank, a communicator without a
 * non-blocking all-reduce (nccl), gradients in device memory, or bucket_bytes <= 0. */
lv_status lv_grad_overlap_create(lv_comm *c, lv_varstore *vs, int64_t bucket_bytes, lv_grad_overlap **out);
int lv_grad_overlap_num_buckets(const lv_grad_overlap *o);
lv_status lv_grad_overlap_arm(lv_grad_overlap *o, lv_graph *g);
/* Also after a failed backward: the buckets started must complete on every rank. */
lv_status lv_grad_overlap_finish(lv_grad_overlap *o);
void lv_grad_overlap_destroy(lv_grad_overlap *o);

/* Replaces every non-trainable float32 variable by its mean over the ranks. */
lv_status lv_replicas_mean_nontrainable(lv_comm *c, lv_varstore *vs);
/* Rank 0's items are copied to every rank (host or device memory). */
lv_status lv_replicas_broadcast(lv_comm *c, const lv_saveable *items, int n);
/* Checks that every rank holds rank 0's variables bit for bit (crc32c of every value):
 * an error naming the ranks that differ, and `what` the variables are ("variables",
 * "variables with weight noise"). */
lv_status lv_replicas_check_same(lv_comm *c, lv_varstore *vs, int64_t step, const char *what);
/* An error naming the ranks whose crc is not rank 0's ("step S: the <what> of rank 1
 * differ from rank 0's"); nothing with one rank. */
lv_status lv_replicas_check_crc(lv_comm *c, uint32_t crc, int64_t step, const char *what);
/* At start, before any other collective: compares every rank's `config` (the params
 * text and the flags that change what a step does) with rank 0's; an LV_ERR_INVALID
 * on every rank, naming the first rank that differs and its first differing line
 * with both values, when one does. Ranks started with other settings would otherwise
 * wait for each other in mismatched collectives (other max_steps, another optimizer's
 * slots, other bucket boundaries, other variable shapes). */
lv_status lv_replicas_check_config(lv_comm *c, const char *config);

#endif
