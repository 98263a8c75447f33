/* --mode=inspect_input (beyond Lingvo): the first batches a dataset gives, so a user
 * checks the data before training: per batch its size, every key (sorted, Lingvo's
 * NestedMap order) with dtype and shape, the bucket keys where the input buckets, and the
 * first example's values. */
#ifndef LV_INPUT_INSPECT_INPUT_H
#define LV_INPUT_INSPECT_INPUT_H

#include <stdio.h>

#include "base/status.h"
#include "params/params.h"

/* cfg: the frozen model params of the dataset to read (its `input`). train: read
 * training batches by step (0, 1, ...), else one eval pass from the start. */
lv_status lv_inspect_input(const lv_params *cfg, int64_t nbatches, bool train, FILE *out);

#endif
