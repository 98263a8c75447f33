/* Checkpoints of a training run (Lingvo's checkpointer.py + saver.py): prefix
 * <train_dir>/ckpt-%08d, the `checkpoint` state file, save policy (save_interval_steps /
 * save_interval_seconds; the first call always saves), retention (save_max_to_keep
 * newest plus one every save_keep_checkpoint_every_n_hours) and restore by name.
 *
 * Saving is asynchronous when asked: the tensors are copied into a buffer the
 * checkpointer owns, and a thread writes the bundle (temporary names, fsync, rename) and
 * then the state file, so a crash at any point leaves the previous checkpoint usable.
 *
 * What is on disk is the user's: a checkpoint the state file lists is never rewritten,
 * retention deletes only train_dir/ckpt-N files by their exact names (whatever else a
 * state file lists is dropped from it, not deleted), and a state file that names no
 * checkpoint beside ckpt-N files is an error rather than a fresh start over them. */
#ifndef LV_RUNNERS_CHECKPOINTER_H
#define LV_RUNNERS_CHECKPOINTER_H

#include <stdbool.h>

#include "base/device.h"
#include "base/dtype.h"
#include "base/shape.h"
#include "base/status.h"
#include "params/params.h"

/* One tensor to save or restore (borrowed data). */
typedef struct lv_saveable {
  const char *name;
  lv_dtype dtype;
  lv_shape shape;
  void *data;
  lv_device device; /* where data lives (zero: the host); copied through its backend */
} lv_saveable;

typedef struct lv_checkpointer lv_checkpointer;

/* train_p: the model-level train params (save_*, max_steps). */
lv_status lv_checkpointer_create(const char *train_dir, const lv_params *train_p, bool async,
                                 lv_checkpointer **out);
/* Waits for a pending save and frees. Returns the pending save's status. */
lv_status lv_checkpointer_destroy(lv_checkpointer *ck);
bool lv_checkpointer_should_save(lv_checkpointer *ck, int64_t step);
/* The step of the last checkpoint saved by this checkpointer (-1 if none). */
int64_t lv_checkpointer_last_step(const lv_checkpointer *ck);
/* The run resumed from the checkpoint of `step`: counts as this checkpointer's first save
 * (a resumed checkpoint is never written again). */
void lv_checkpointer_note_restored(lv_checkpointer *ck, int64_t step);
/* Saves items (plus a string tensor with params_text, if given) as ckpt-<step>. The
 * error of an earlier asynchronous save is returned here. A ckpt-<step> the state file
 * lists is never overwritten (LV_ERR_INVALID); with train.checkpoint_finite_check a NaN or
 * Inf in a float item is an error and nothing is written. */
lv_status lv_checkpointer_save(lv_checkpointer *ck, int64_t step, const lv_saveable *items, int n,
                               const char *params_text);
/* Blocks until no save is pending. */
lv_status lv_checkpointer_wait(lv_checkpointer *ck);

/* The newest checkpoint listed in <train_dir>/checkpoint: prefix and step. *found=false
 * (and no error) if there is none yet. */
lv_status lv_checkpoint_latest(const char *train_dir, char *prefix, size_t n, int64_t *step, bool *found);
/* Every checkpoint listed, oldest first (caller frees each and the array). */
lv_status lv_checkpoint_list(const char *train_dir, char ***prefixes, int64_t **steps, int *n);
/* Step parsed from ".../ckpt-00000205" (-1 if the name has no ckpt-<digits>). */
int64_t lv_checkpoint_step(const char *prefix);
/* Restores every item by name. Missing names, dtype or shape mismatches are one error
 * listing them all (LV_ERR_INVALID), and nothing is changed in that case. */
lv_status lv_checkpoint_restore(const char *prefix, const lv_saveable *items, int n);
typedef enum {
  LV_RESTORE_MODEL,   /* lv_checkpoint_restore: other tensors of the checkpoint are ignored */
  LV_RESTORE_EXACT,   /* resuming training: checkpoint tensors that are not items are errors too */
  LV_RESTORE_PARTIAL, /* items missing from the checkpoint keep their values (warned) */
} lv_restore_mode;
/* *num_restored (may be NULL): items restored. */
lv_status lv_checkpoint_restore_mode(const char *prefix, const lv_saveable *items, int n, lv_restore_mode mode,
                                     int *num_restored);
/* *present: how many of the items' names the checkpoint holds; each[i] (each may be NULL):
 * whether it holds items[i]. */
lv_status lv_checkpoint_count_present(const char *prefix, const lv_saveable *items, int n, int *present, bool *each);
/* A checkpoint tensor "<name>/ExponentialMovingAverage" is the moving average of
 * variable <name> (Lingvo's EMA shadow; optim/ema.h). In LV_RESTORE_EXACT, averages of
 * the items that are not items themselves (a run that turns task.train.ema_decay off)
 * are dropped with a warning instead of being a mismatch. */
#define LV_CKPT_AVERAGE_SUFFIX "/ExponentialMovingAverage"
/* Lingvo's task.train.init_from_checkpoint_rules (py_utils.OverrideVarsFromCheckpoints),
 * for a run that starts without a checkpoint of its own: rules is a list of
 * (checkpoint_path, [(regex, format), ...], [ignore_regex, ...]) tuples (Lingvo's dict
 * {path: (loading_rules, ignore_rules)} as items); override, if not empty, replaces the
 * path of the only entry (init_from_checkpoint_override). For every item (model
 * variables; global_step is never loaded, so a fine-tuning run starts at step 0), the
 * first loading rule whose regex matches "<name>:0" from the start (Python's re.match
 * on a TF variable name) names the checkpoint tensor: format with each %s replaced by
 * the next group, a trailing ":0" dropped; an item an ignore regex matches is not
 * loaded. Each load is logged. Errors (LV_ERR_INVALID, nothing changed): malformed
 * rules, a regex that does not compile, a loading rule that matches no item, a named
 * tensor missing from its checkpoint or of another dtype or shape. *num_loaded (may be
 * NULL): items loaded. */
lv_status lv_checkpoint_init_from_rules(const lv_pvalue *rules, const char *override, const lv_saveable *items,
                                        int n, int *num_loaded);
/* Where training resumes: lv_checkpoint_latest, but when the state file is missing,
 * unreadable or names no checkpoint while ckpt-N files are present, an LV_ERR_INVALID
 * error naming the newest of them (or with rebuild: a new state file listing them, and
 * the newest). No checkpoint files: *found=false, as a fresh start. */
lv_status lv_checkpoint_resume_point(const char *train_dir, bool rebuild, char *prefix, size_t n, int64_t *step,
                                     bool *found);
/* Removes temporary files of checkpoint writes whose writer process is gone
 * (checkpoint.tmp<pid>, ckpt-N.*.tempstate<pid>-<k>, ckpt-N.index.tmp<pid>): only these
 * names, only dead pids or this process's own (call it before this process saves, with
 * the train directory locked). Returns how many were removed. */
int lv_checkpoint_clean_stale_temps(const char *train_dir);

#define LV_CKPT_PARAMS_TENSOR "_lingvoc/params_txt"
/* The trainer's params text stored in a checkpoint (*text = NULL and OK when the
 * checkpoint has none, e.g. one written by keras2ckpt); caller frees. */
lv_status lv_checkpoint_params_text(const char *prefix, char **text);
/* The value of the "key : value" line of a params text whose key is key[0..klen), or
 * NULL; *vlen its length (up to the line's end). */
const char *lv_params_text_value(const char *text, const char *key, size_t klen, size_t *vlen);
/* The integer value of a "key : value" line of a params text; false if absent. */
bool lv_params_text_int(const char *text, const char *key, int64_t *out);

#endif
