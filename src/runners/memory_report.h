/* The trainer's --mode=memory_report: where the memory of training went, from what the
 * pieces themselves allocated (no estimates): the variables and their gradient buffer,
 * the optimizer's slots and their host copies, gradient accumulators and moving averages,
 * the step graph's arena by kind at its worst step (activations kept for backward,
 * forward scratch, gradients, backward temporaries, the gaps between pieces given back,
 * blocks held), the batch, and the process's peak RSS beside their sum. */
#ifndef LV_RUNNERS_MEMORY_REPORT_H
#define LV_RUNNERS_MEMORY_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "input/batch.h"
#include "optim/ema.h"
#include "optim/learner.h"
#include "runners/instance.h"

/* Prints the report of a trainer that ran `steps` steps (ema may be NULL). */
void lv_memory_report_print(FILE *out, lv_instance *m, lv_learner *l, lv_ema *ema, const lv_batch *batch,
                            int64_t steps, bool free_in_backward);

/* The memory of an evaler's or decoder's pass in one line, for its log: "peak RSS X MB:
 * weights W MB, step arena A MB (worst batch), input buffer I MB, other O MB (code,
 * libraries, BLAS and thread buffers, malloc)". What such a job adds beside a training
 * run is this peak RSS. */
void lv_memory_summary(const lv_instance *m, char *buf, size_t n);

#endif
