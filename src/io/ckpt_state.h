/* The `checkpoint` state file of a checkpoint directory: TensorFlow's CheckpointState
 * proto in text format (model_checkpoint_path, all_model_checkpoint_paths,
 * all_model_checkpoint_timestamps, last_preserved_timestamp), as tf.train.Saver and
 * CheckpointManager write it and tf.train.latest_checkpoint reads it. The struct owns its
 * strings and arrays (free with lv_ckpt_state_free). Writes replace the file atomically. */
#ifndef LV_IO_CKPT_STATE_H
#define LV_IO_CKPT_STATE_H

#include <stdbool.h>

#include "base/status.h"

typedef struct lv_ckpt_state {
  char *model_checkpoint_path;
  int num_paths;
  char **all_model_checkpoint_paths;
  /* num_paths entries, or NULL; on read, 0.0 where the file lists fewer timestamps than
   * paths (files written before TensorFlow kept timestamps). */
  double *all_model_checkpoint_timestamps;
  double last_preserved_timestamp;
} lv_ckpt_state;

/* Reads DIR/checkpoint. *exists=false and OK (st zeroed) if there is no such file. Errors
 * name the file and line. */
lv_status lv_ckpt_state_read(const char *dir, lv_ckpt_state *st, bool *exists);
/* Writes DIR/checkpoint atomically (temporary file, fsync, rename). */
lv_status lv_ckpt_state_write(const char *dir, const lv_ckpt_state *st);
void lv_ckpt_state_free(lv_ckpt_state *st);
/* tf.train.latest_checkpoint: the prefix model_checkpoint_path names (joined to DIR when
 * relative), or *prefix = NULL and OK when there is no state file, no path in it, or its
 * PREFIX.index does not exist (yet). Caller frees *prefix. */
lv_status lv_ckpt_state_latest(const char *dir, char **prefix);

#endif
