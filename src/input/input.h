/* Input generators (Lingvo's BaseInputGenerator subclasses). An input class is
 * registered by its `cls` name (inputs.def) with a params constructor and a vtable;
 * lv_input_create instantiates the class named by p.cls.
 *
 * Two ways to serve batches:
 *  - training: lv_input_train_batch(in, step, b) gives the batch of global step `step`.
 *  - evaluation: lv_input_reset, then lv_input_next_eval until *done (one deterministic
 *    pass over the data; the last batch may be partial, its `size` says how many).
 *
 * Sharding: an input is created for one replica of `num_replicas` and serves only that
 * replica's share, each example to exactly one replica: the tiny datasets give replica
 * r its own batch_size examples of each global batch (num_replicas * batch_size) and a
 * contiguous 1/num_replicas of the data in evaluation; streaming inputs (NmtInput) keep
 * the records at positions r mod num_replicas of their stream.
 *
 * Resume: what a resumed run reads is a deterministic function of (file_random_seed,
 * step, replica), and every input class documents its rule. The tiny datasets are a pure
 * function of (seed, step), so a run resumed at step s reads exactly what an
 * uninterrupted run reads from s on. Streaming inputs have no saved read position: they
 * re-seed their reader from (seed, global step) when asked for a step that does not
 * follow the previous one, so every run resumed at s reads the same batches, though not
 * the ones the uninterrupted run read after s.
 *
 * Every call returns a status; the batch tensors are host memory owned by the input and
 * valid until its next call. */
#ifndef LV_INPUT_INPUT_H
#define LV_INPUT_INPUT_H

#include <stdbool.h>

#include "base/status.h"
#include "input/batch.h"
#include "params/params.h"

typedef struct lv_input_shard {
  int replica;      /* 0 .. num_replicas-1 */
  int num_replicas; /* >= 1 */
} lv_input_shard;

typedef struct lv_input lv_input;

typedef struct lv_input_class {
  const char *cls;
  lv_params *(*params)(void);
  /* p: frozen params (borrowed; they outlive the input). */
  lv_status (*create)(const lv_params *p, lv_input_shard shard, lv_input **out);
  lv_status (*train_batch)(lv_input *in, int64_t step, lv_batch *out);
  lv_status (*reset)(lv_input *in);
  lv_status (*next_eval)(lv_input *in, lv_batch *out, bool *done);
  /* Examples this shard serves in one eval pass (after num_samples capping); -1 when
   * unknown before reading. */
  int64_t (*num_samples)(const lv_input *in);
  /* Examples in a full batch of this shard. */
  int64_t (*batch_size)(const lv_input *in);
  void (*destroy)(lv_input *in);
  /* Optional: the largest number of record bytes the training stream's shuffle buffer has
   * held so far (NULL: the class has none). */
  int64_t (*buffer_peak_bytes)(const lv_input *in);
} lv_input_class;

/* Every input struct starts with this. */
struct lv_input {
  const lv_input_class *cls;
  const lv_params *p;
  lv_input_shard shard;
};

const lv_input_class *lv_input_class_find(const char *cls);
/* Instantiates p.cls. Errors: unknown class (naming the known ones), bad shard, or the
 * class's own (missing files, bad params), all naming input.<key>. */
lv_status lv_input_create(const lv_params *p, lv_input_shard shard, lv_input **out);
void lv_input_destroy(lv_input *in);
int64_t lv_input_num_samples(const lv_input *in);
int64_t lv_input_batch_size(const lv_input *in);
/* The class's buffer_peak_bytes, or 0 when it has none. */
int64_t lv_input_buffer_peak_bytes(const lv_input *in);
lv_status lv_input_train_batch(lv_input *in, int64_t step, lv_batch *out);
lv_status lv_input_reset(lv_input *in);
lv_status lv_input_next_eval(lv_input *in, lv_batch *out, bool *done);

/* The whole-job shard (replica 0 of 1). */
static inline lv_input_shard lv_input_no_shard(void) { return (lv_input_shard){0, 1}; }

/* Registers every input class of inputs.def in the params registry. Idempotent. */
void lv_input_register_all(void);

#endif
