/* BaseTinyDatasetInput (lingvo/core/base_input_generator.py) and the MNIST inputs
 * (lingvo/tasks/image/input_generator.py): a whole small dataset held in memory, read
 * from a checkpoint written by keras2ckpt (tensors `data` and `label`).
 *
 * Resume: a training batch is a pure function of (file_random_seed, step, replica): the
 * examples of global step s are positions [s*R*B, (s+1)*R*B) of an endless sequence of
 * epochs, each epoch a Philox-seeded (seed, epoch) permutation; replica r takes its B of
 * them. A run resumed at step s therefore reads what an uninterrupted run would. */
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"
#include "base/path.h"
#include "base/mem.h"
#include "base/rng.h"
#include "input/input.h"
#include "io/bundle.h"

typedef struct tiny_input {
  lv_input base;
  int64_t n, batch_size, example_bytes;
  int64_t lo, hi; /* this shard's eval range */
  lv_shape example_shape; /* data_shape, e.g. [28,28,1] */
  bool repeat;
  uint64_t seed;
  uint8_t *data;    /* [n, example_bytes] */
  int32_t *labels;  /* [n] */
  /* training: permutation of the current epoch */
  int64_t *perm, perm_epoch;
  /* evaluation cursor */
  int64_t cursor;
  /* batch buffers */
  uint8_t *b_data;
  int32_t *b_label;
  float *b_weight;
  lv_tensor t_raw, t_label, t_weight;
} tiny_input;

static lv_params *tiny_params(const char *cls) {
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "cls", cls, "Class that this param object is associated with.");
  lv_params_define_string(p, "name", "input", "Name of this input generator.");
  lv_params_define_int(p, "batch_size", 0, "Batch size.");
  lv_params_define_int(p, "num_samples", 0, "If non-zero, the dataset size (examples beyond it are not used).");
  lv_params_define_bool(p, "repeat", true, "If true, goes through the dataset repeatedly (shuffled every epoch).");
  lv_params_define_string(p, "ckpt", "", "A TensorFlow checkpoint holding the dataset (see keras2ckpt).");
  lv_params_define_string(p, "data", "", "The variable name in ckpt holding the examples.");
  lv_params_define_string(p, "label", "", "The variable name in ckpt holding the labels.");
  lv_params_define_string(p, "data_dtype", "uint8", "Data type of the examples.");
  int64_t shape[3] = {28, 28, 1};
  lv_params_define_list(p, "data_shape", lv_pvalue_ints(3, shape), "Shape of each example.");
  lv_params_define_string(p, "label_dtype", "uint8", "Data type of the labels.");
  lv_params_define_int(p, "file_random_seed", 301, "Random seed for shuffling the examples.");
  return p;
}

static lv_params *base_tiny_params(void) { return tiny_params("BaseTinyDatasetInput"); }

static lv_params *mnist_params(const char *cls, const char *data, const char *label, int64_t n, bool repeat) {
  lv_params *p = tiny_params(cls);
  LV_ASSERT(!lv_params_set_string(p, "data", data));
  LV_ASSERT(!lv_params_set_string(p, "label", label));
  LV_ASSERT(!lv_params_set_int(p, "num_samples", n));
  LV_ASSERT(!lv_params_set_int(p, "batch_size", 256));
  LV_ASSERT(!lv_params_set_bool(p, "repeat", repeat));
  LV_ASSERT(!lv_params_set_string(p, "ckpt", "/tmp/mnist/mnist"));
  return p;
}
static lv_params *mnist_train_params(void) { return mnist_params("MnistTrainInput", "x_train", "y_train", 60000, true); }
static lv_params *mnist_test_params(void) { return mnist_params("MnistTestInput", "x_test", "y_test", 10000, false); }


static lv_status read_entry(lv_bundle_reader *r, const char *ckpt, const char *key, const char *name,
                            const lv_bundle_entry **e) {
  *e = lv_bundle_reader_find(r, name);
  if (!*e) {
    char known[1024] = "";
    for (int i = 0; i < lv_bundle_reader_count(r) && strlen(known) < 900; i++) {
      strcat(known, i ? ", " : "");
      strncat(known, lv_bundle_reader_entry(r, i)->name, 64);
    }
    return lv_status_make(LV_ERR_INVALID, "input.%s: no tensor \"%s\" in dataset checkpoint %s (it holds: %s)", key,
                          name, ckpt, known);
  }
  return NULL;
}

static void tiny_destroy(lv_input *base);

static lv_status tiny_create(const lv_params *p, lv_input_shard shard, lv_input **out) {
  *out = NULL;
  const char *ckpt = lv_params_str(p, "ckpt");
  char index[LV_PATH_MAX];
  LV_TRY(lv_status_wrap(lv_path_fmt(index, sizeof index, "%s.index", ckpt), "input.ckpt"));
  if (!*ckpt || !lv_file_exists(index))
    return lv_status_make(LV_ERR_NOT_FOUND,
                          "input.ckpt: dataset checkpoint \"%s\" not found (no %s); create it with "
                          "`bin/keras2ckpt --dataset=fashion_mnist --out=%s` or point input.ckpt at one "
                          "(--model_params_override='input.ckpt: \"/path/prefix\"')",
                          ckpt, index, *ckpt ? ckpt : "/tmp/mnist/mnist");
  if (strcmp(lv_params_str(p, "data_dtype"), "uint8") || strcmp(lv_params_str(p, "label_dtype"), "uint8"))
    return lv_status_make(LV_ERR_INVALID, "input: data_dtype and label_dtype must be \"uint8\" (got \"%s\", \"%s\")",
                          lv_params_str(p, "data_dtype"), lv_params_str(p, "label_dtype"));
  int64_t bs = lv_params_int(p, "batch_size");
  if (bs <= 0) return lv_status_make(LV_ERR_INVALID, "input.batch_size must be > 0, got %lld", (long long)bs);
  int64_t shape[LV_MAX_RANK];
  int rank = lv_pvalue_to_ints(lv_params_list(p, "data_shape"), shape, LV_MAX_RANK);
  if (rank <= 0) return lv_status_make(LV_ERR_INVALID, "input.data_shape must be a non-empty list of ints");
  int64_t ex = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] <= 0) return lv_status_make(LV_ERR_INVALID, "input.data_shape entries must be > 0");
    if (shape[i] > INT64_MAX / ex)
      return lv_status_make(LV_ERR_INVALID, "input.data_shape: an example of more than 2^63 values");
    ex *= shape[i];
  }
  lv_bundle_reader *r = NULL;
  LV_TRY(lv_status_wrap(lv_bundle_reader_open(ckpt, &r), "input.ckpt"));
  const lv_bundle_entry *de, *le;
  lv_status s = read_entry(r, ckpt, "data", lv_params_str(p, "data"), &de);
  if (!s) s = read_entry(r, ckpt, "label", lv_params_str(p, "label"), &le);
  if (!s && (de->dtype != LV_U8 || le->dtype != LV_U8))
    s = lv_status_make(LV_ERR_INVALID, "dataset checkpoint %s: %s and %s must be uint8, found %s and %s", ckpt,
                       de->name, le->name, lv_dtype_names[de->dtype], lv_dtype_names[le->dtype]);
  int64_t n = 0;
  if (!s) {
    n = de->shape.rank > 0 ? de->shape.d[0] : 0;
    int64_t per = n > 0 ? lv_shape_numel(&de->shape) / n : 0;
    char ds[96], ls[96];
    if (n <= 0 || per != ex || le->shape.rank != 1 || le->shape.d[0] != n)
      s = lv_status_make(LV_ERR_INVALID,
                         "dataset checkpoint %s: %s has shape %s and %s has shape %s; expected [N,...] with %lld "
                         "values per example (input.data_shape) and [N]",
                         ckpt, de->name, lv_shape_str(&de->shape, ds, sizeof ds), le->name,
                         lv_shape_str(&le->shape, ls, sizeof ls), (long long)ex);
  }
  if (s) {
    lv_bundle_reader_close(r);
    return s;
  }
  tiny_input *in = calloc(1, sizeof *in);
  if (!in) {
    lv_bundle_reader_close(r);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory creating input %s", lv_params_str(p, "cls"));
  }
  in->example_shape.rank = rank;
  for (int i = 0; i < rank; i++) in->example_shape.d[i] = shape[i];
  in->example_bytes = ex;
  in->batch_size = bs;
  in->repeat = lv_params_bool(p, "repeat");
  in->seed = (uint64_t)lv_params_int(p, "file_random_seed");
  uint8_t *all = NULL, *labels8 = NULL;
  s = lv_mem_alloc((size_t)n, (size_t)ex, false, "input: the dataset's examples", (void **)&all);
  if (!s) s = lv_mem_alloc((size_t)n, 1, false, "input: the dataset's labels", (void **)&labels8);
  if (!s) s = lv_bundle_reader_read(r, de, all, (size_t)(n * ex));
  if (!s) s = lv_bundle_reader_read(r, le, labels8, (size_t)n);
  lv_bundle_reader_close(r);
  in->data = all;
  int64_t cap = lv_params_int(p, "num_samples");
  in->n = cap > 0 && cap < n ? cap : n;
  if (!s) s = lv_mem_alloc((size_t)in->n, sizeof(int32_t), false, "input: labels", (void **)&in->labels);
  if (!s) s = lv_mem_alloc((size_t)in->n, sizeof(int64_t), false, "input: the shuffle order", (void **)&in->perm);
  char what[96];
  snprintf(what, sizeof what, "input.batch_size: a batch of %lld examples", (long long)bs);
  if (!s) s = lv_mem_alloc((size_t)bs, (size_t)ex, false, what, (void **)&in->b_data);
  if (!s) s = lv_mem_alloc((size_t)bs, sizeof(int32_t), false, what, (void **)&in->b_label);
  if (!s) s = lv_mem_alloc((size_t)bs, sizeof(float), false, what, (void **)&in->b_weight);
  if (s) {
    free(labels8);
    tiny_destroy(&in->base);
    return s;
  }
  for (int64_t i = 0; i < in->n; i++) in->labels[i] = labels8[i];
  free(labels8);
  in->perm_epoch = -1;
  in->lo = in->n * shard.replica / shard.num_replicas;
  in->hi = in->n * (shard.replica + 1) / shard.num_replicas;
  in->cursor = in->lo;
  if (shard.num_replicas > 1)
    lv_info("input %s: %lld examples from %s (%s, %s), batch %lld, replica %d of %d", lv_params_str(p, "cls"),
            (long long)in->n, ckpt, lv_params_str(p, "data"), lv_params_str(p, "label"), (long long)bs, shard.replica,
            shard.num_replicas);
  else
    lv_info("input %s: %lld examples from %s (%s, %s), batch %lld", lv_params_str(p, "cls"), (long long)in->n, ckpt,
            lv_params_str(p, "data"), lv_params_str(p, "label"), (long long)bs);
  *out = &in->base;
  return NULL;
}

static void tiny_destroy(lv_input *base) {
  tiny_input *in = (tiny_input *)base;
  free(in->data);
  free(in->labels);
  free(in->perm);
  free(in->b_data);
  free(in->b_label);
  free(in->b_weight);
  free(in);
}

static int64_t tiny_num_samples(const lv_input *in) { return ((const tiny_input *)in)->hi - ((const tiny_input *)in)->lo; }
static int64_t tiny_batch_size(const lv_input *in) { return ((const tiny_input *)in)->batch_size; }

static lv_status fill_batch(tiny_input *in, int64_t count, lv_batch *out) {
  lv_shape ds;
  ds.rank = in->example_shape.rank + 1;
  ds.d[0] = count;
  for (int i = 0; i < in->example_shape.rank; i++) ds.d[i + 1] = in->example_shape.d[i];
  in->t_raw = lv_tensor_view(LV_U8, ds, in->b_data);
  in->t_label = lv_tensor_view(LV_I32, lv_shape1(count), in->b_label);
  in->t_weight = lv_tensor_view(LV_F32, lv_shape1(count), in->b_weight);
  lv_nmap_clear(&out->map);
  LV_TRY(lv_nmap_set(&out->map, "raw", &in->t_raw));
  LV_TRY(lv_nmap_set(&out->map, "label", &in->t_label));
  LV_TRY(lv_nmap_set(&out->map, "weight", &in->t_weight));
  out->size = count;
  return NULL;
}

static void shuffle_epoch(tiny_input *in, int64_t epoch) {
  if (in->perm_epoch == epoch) return;
  for (int64_t i = 0; i < in->n; i++) in->perm[i] = i;
  lv_rng r;
  lv_rng_init(&r, in->seed, (uint64_t)epoch);
  for (int64_t i = in->n - 1; i > 0; i--) {
    int64_t j = (int64_t)lv_rng_below(&r, (uint64_t)i + 1);
    int64_t t = in->perm[i];
    in->perm[i] = in->perm[j];
    in->perm[j] = t;
  }
  in->perm_epoch = epoch;
}

/* Replica r of R takes examples [r*B, (r+1)*B) of the global batch of R*B at each step. */
static lv_status tiny_train_batch(lv_input *base, int64_t step, lv_batch *out) {
  tiny_input *in = (tiny_input *)base;
  const int64_t R = base->shard.num_replicas, first = (step * R + base->shard.replica) * in->batch_size;
  for (int64_t k = 0; k < in->batch_size; k++) {
    int64_t pos = first + k, idx;
    if (in->repeat) {
      shuffle_epoch(in, pos / in->n);
      idx = in->perm[pos % in->n];
    } else {
      idx = pos % in->n;
    }
    memcpy(in->b_data + k * in->example_bytes, in->data + idx * in->example_bytes, (size_t)in->example_bytes);
    in->b_label[k] = in->labels[idx];
    in->b_weight[k] = 1.0f;
  }
  return fill_batch(in, in->batch_size, out);
}

static lv_status tiny_reset(lv_input *base) {
  tiny_input *in = (tiny_input *)base;
  in->cursor = in->lo;
  return NULL;
}

static lv_status tiny_next_eval(lv_input *base, lv_batch *out, bool *done) {
  tiny_input *in = (tiny_input *)base;
  *done = in->cursor >= in->hi;
  if (*done) return NULL;
  int64_t count = in->hi - in->cursor < in->batch_size ? in->hi - in->cursor : in->batch_size;
  memcpy(in->b_data, in->data + in->cursor * in->example_bytes, (size_t)(count * in->example_bytes));
  for (int64_t k = 0; k < count; k++) {
    in->b_label[k] = in->labels[in->cursor + k];
    in->b_weight[k] = 1.0f;
  }
  in->cursor += count;
  return fill_batch(in, count, out);
}

#define TINY_CLASS(sym, name, ctor)                                                                          \
  const lv_input_class sym = {.cls = name,                                                                  \
                              .params = ctor,                                                               \
                              .create = tiny_create,                                                        \
                              .train_batch = tiny_train_batch,                                              \
                              .reset = tiny_reset,                                                          \
                              .next_eval = tiny_next_eval,                                                  \
                              .num_samples = tiny_num_samples,                                              \
                              .batch_size = tiny_batch_size,                                                \
                              .destroy = tiny_destroy};
TINY_CLASS(lv_base_tiny_dataset_input, "BaseTinyDatasetInput", base_tiny_params)
TINY_CLASS(lv_mnist_train_input, "MnistTrainInput", mnist_train_params)
TINY_CLASS(lv_mnist_test_input, "MnistTestInput", mnist_test_params)
