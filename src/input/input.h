/* Input generators. A generator is created from its params (a registered class such as
 * MnistTrainInput) and serves batches in two ways:
 *  - training: lv_input_train_batch(step) is a pure function of (seed, step), so a run
 *    resumed from a checkpoint at step s sees exactly the batches an uninterrupted run
 *    would have seen;
 *  - evaluation: lv_input_reset, then lv_input_next_eval until it says done (one pass,
 *    the last batch may be partial). */
#ifndef LV_INPUT_INPUT_H
#define LV_INPUT_INPUT_H

#include <stdbool.h>

#include "base/status.h"
#include "input/batch.h"
#include "params/params.h"

typedef struct lv_input lv_input;

lv_status lv_input_create(const lv_params *p, lv_input **out);
void lv_input_destroy(lv_input *in);
/* Examples the generator serves (after num_samples capping). */
int64_t lv_input_num_samples(const lv_input *in);
int64_t lv_input_batch_size(const lv_input *in);
void lv_input_train_batch(lv_input *in, int64_t step, lv_batch *out);
void lv_input_reset(lv_input *in);
/* Returns false when the pass is over. */
bool lv_input_next_eval(lv_input *in, lv_batch *out);

/* Registers the input classes (MnistTrainInput, MnistTestInput, BaseTinyDatasetInput). */
void lv_input_register_all(void);

#endif
