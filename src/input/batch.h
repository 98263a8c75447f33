/* A batch: named tensors (Lingvo's NestedMap of an input batch), e.g. raw [B,28,28,1]
 * uint8, label [B] int32, weight [B] float32. Tensors are views of memory the input
 * generator owns; a batch is valid until the generator's next call. */
#ifndef LV_INPUT_BATCH_H
#define LV_INPUT_BATCH_H

#include "core/tensor.h"

#define LV_BATCH_MAX 8

typedef struct lv_batch {
  int n;
  const char *names[LV_BATCH_MAX];
  lv_tensor t[LV_BATCH_MAX];
  int64_t size; /* examples in this batch (num_samples_in_batch) */
} lv_batch;

static inline lv_tensor *lv_batch_get(lv_batch *b, const char *name) {
  for (int i = 0; i < b->n; i++)
    if (__builtin_strcmp(b->names[i], name) == 0) return &b->t[i];
  return NULL;
}

#endif
