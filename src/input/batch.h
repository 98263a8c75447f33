/* A batch: Lingvo's NestedMap of an input batch as a named map of host tensors, with
 * Lingvo's keys, any number of them. Image inputs give raw [B,h,w,d] uint8, label [B]
 * int32 and weight [B] float32; NMT inputs src.ids, src.paddings, tgt.ids, tgt.labels,
 * tgt.paddings, tgt.weights [B,T]; LmInput ids, labels, paddings, weights [B,L], word_count
 * [B] and text [B] string; the bucketing inputs add bucket_keys [B] int32. Sequence
 * features are [B, T] or, with a per-step shape, [B, T, ...] (speech frames [B, T, 80]),
 * padded along T only (batcher.h). Host strings (utterance ids, transcripts, reference
 * text) are LV_STRING tensors (tensor.h), one string per example, for metrics to read.
 *
 * The map borrows its tensors: they and their strings belong to the input generator (a
 * batch store, batcher.h) and stay valid until its next call; lv_batch_free frees the map
 * only. Before the task sees a batch, lv_batch_to_graph (models/task.h) copies its
 * numeric tensors onto the step's device and passes its string tensors through as these
 * host tensors. */
#ifndef LV_INPUT_BATCH_H
#define LV_INPUT_BATCH_H

#include "core/nmap.h"

typedef struct lv_batch {
  lv_nmap map;
  int64_t size; /* examples in this batch (num_samples_in_batch; the last eval batch may be short) */
} lv_batch;

static inline void lv_batch_init(lv_batch *b) {
  lv_nmap_init(&b->map);
  b->size = 0;
}
static inline void lv_batch_free(lv_batch *b) { lv_nmap_free(&b->map); }
static inline lv_tensor *lv_batch_get(const lv_batch *b, const char *name) { return lv_nmap_get(&b->map, name); }

#endif
