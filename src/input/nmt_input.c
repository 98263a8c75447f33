/* NmtInput (lingvo/tasks/mt/input_generator.py): TFRecord files of tf.Examples with the
 * VarLen features source_id (int64), source_padding (float), target_id (int64),
 * target_padding (float), target_label (int64), target_weight (float) — the layout of
 * Lingvo's wmt14_ende_wpm_32k_test.tfrecord — bucketed by
 * int(max(sum(1 - source_padding), sum(1 - target_padding))) and padded with
 * [0, 1, 0, 1, 0, 0]. Batch: src.ids [B,S] int32, src.paddings [B,S], tgt.ids [B,T]
 * int32 (Lingvo leaves it int64; lingvoc's embedding lookups take int32),
 * tgt.paddings, tgt.labels [B,T] int32, tgt.weights, bucket_keys [B] int32. A missing
 * feature is an empty vector (VarLenFeature); a feature of another kind, an id outside
 * int32 or an unparsable record is an error naming the file and offset (or, with
 * skip_corrupt_records, skipped and counted).
 *
 * Training, resume, evaluation and sharding: stream_input.h (a shuffled endless stream
 * re-seeded from (file_random_seed, step) on resume; one sequential eval pass with the
 * partial buckets flushed at the end; replica r of R reads the records at positions
 * r mod R). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "input/stream_input.h"
#include "io/example.h"

static lv_params *nmt_params(void) {
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "cls", "NmtInput", "Class that this param object is associated with.");
  lv_params_define_string(p, "name", "input", "Name of this input generator.");
  lv_params_define_int(p, "num_samples", 0, "If non-zero, the dataset size (unused by NmtInput's reader).");
  int64_t bub = 2560, bbl = 8;
  lv_stream_input_define_params(p, 1, &bub, &bbl);
  lv_params_define_int(p, "source_max_length", 300, "The maximum length of the source sequence.");
  lv_params_define_int(p, "target_max_length", 300, "The maximum length of the target sequence.");
  lv_params_define_bool(p, "pad_to_max_seq_length", false,
                        "If True, input tensors will be padded to source/target_max_length.");
  lv_params_define_bool(p, "natural_order_model", true,
                        "Whether the model consuming the input is a natural order model.");
  lv_params_define_bool(p, "skip_corrupt_records", false,
                        "lingvoc: skip (and count) corrupt records instead of failing.");
  /* Lingvo's default is a VocabFileTokenizer with no vocab; None says the same plainly. */
  lv_params_define_params(p, "tokenizer", NULL,
                          "Tokenizer of the ids (e.g. WpmTokenizer with the vocab the records were encoded with): "
                          "turns ids back into text for the decoder and --mode=inspect_input. None: ids only.");
  return p;
}

/* The values of a VarLen feature: absent -> empty; another kind -> error. */
static lv_status feature(const lv_example *e, const char *key, lv_feature_kind kind, const void **vals, int *n) {
  *vals = NULL;
  *n = 0;
  for (int i = 0; i < lv_example_num_features(e); i++) {
    if (strcmp(lv_example_feature_key(e, i), key)) continue;
    lv_feature_kind k = lv_example_feature_kind(e, i);
    if (k == LV_FEATURE_NONE) return NULL;
    if (k != kind)
      return lv_status_make(LV_ERR_CORRUPT, "feature %s is a %s list, want %s", key, lv_feature_kind_names[k],
                            lv_feature_kind_names[kind]);
    if (kind == LV_FEATURE_INT64) lv_example_get_int64s(e, key, (const int64_t **)vals, n);
    else lv_example_get_floats(e, key, (const float **)vals, n);
  }
  return NULL;
}

static const char *const kFeat[6] = {"source_id", "source_padding", "target_id",
                                     "target_padding", "target_label", "target_weight"};

static lv_status process_example(const lv_example *e, lv_sample *out, int64_t *key) {
  float sums[2] = {0, 0};
  int len[6];
  for (int f = 0; f < 6; f++) {
    bool is_int = f == 0 || f == 2 || f == 4;
    const void *v;
    int n;
    LV_TRY(feature(e, kFeat[f], is_int ? LV_FEATURE_INT64 : LV_FEATURE_FLOAT, &v, &n));
    /* The features of one side are read position by position: the same length. */
    len[f] = n;
    int first = f < 2 ? 0 : 2;
    if (f != first && n != len[first])
      return lv_status_make(LV_ERR_CORRUPT, "feature %s has %d values but %s has %d: expected the same length",
                            kFeat[f], n, kFeat[first], len[first]);
    if (is_int) {
      int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
      LV_ASSERT(ids);
      for (int i = 0; i < n; i++) {
        int64_t x = ((const int64_t *)v)[i];
        if (x < 0 || x > INT32_MAX) {
          free(ids);
          return lv_status_make(LV_ERR_CORRUPT, "feature %s[%d] = %lld: expected an id in [0, 2^31)", kFeat[f], i,
                                (long long)x);
        }
        ids[i] = (int32_t)x;
      }
      lv_sample_set(out, f, ids, n);
      free(ids);
    } else {
      lv_sample_set(out, f, v, n);
      if (f == 1 || f == 3)
        for (int i = 0; i < n; i++) sums[f == 3] += 1.0f - ((const float *)v)[i];
    }
  }
  float m = sums[0] > sums[1] ? sums[0] : sums[1];
  *key = isfinite(m) ? (int64_t)m : -1;
  return NULL;
}

static lv_status nmt_process(void *ctx, const lv_record *rec, lv_sample *out, int64_t *key) {
  (void)ctx;
  lv_example *e = NULL;
  LV_TRY(lv_example_parse(rec->data, rec->len, &e));
  lv_status s = process_example(e, out, key);
  lv_example_free(e);
  return s;
}

static void nmt_destroy(lv_input *base) {
  lv_stream_input_fini((lv_stream_input *)base);
  free(base);
}

static lv_status nmt_create(const lv_params *p, lv_input_shard shard, lv_input **out) {
  *out = NULL;
  lv_stream_input *in = calloc(1, sizeof *in);
  LV_ASSERT(in);
  lv_status s = lv_stream_input_init(in, "NmtInput", p, shard, lv_params_str(p, "file_pattern"));
  bool pad = lv_params_bool(p, "pad_to_max_seq_length");
  int64_t smax = lv_params_int(p, "source_max_length"), tmax = lv_params_int(p, "target_max_length");
  if (!s && pad && (smax <= 0 || tmax <= 0))
    s = lv_status_make(LV_ERR_INVALID, "input.pad_to_max_seq_length needs source_max_length and target_max_length > 0");
  if (s) {
    nmt_destroy(&in->base);
    return s;
  }
  static const char *const names[6] = {"src.ids", "src.paddings", "tgt.ids", "tgt.paddings", "tgt.labels",
                                       "tgt.weights"};
  static const double pads[6] = {0, 1, 0, 1, 0, 0};
  lv_batcher_opts *o = &in->bopts;
  o->n_features = 6;
  for (int f = 0; f < 6; f++)
    o->features[f] = (lv_batcher_feature){names[f], f % 2 == 0 ? LV_I32 : LV_F32, pads[f],
                                          pad ? (f < 2 ? smax : tmax) : 0, lv_shape0()};
  o->process = nmt_process;
  *out = &in->base;
  return NULL;
}

const lv_input_class lv_nmt_input = {.cls = "NmtInput",
                                     .params = nmt_params,
                                     .create = nmt_create,
                                     .train_batch = lv_stream_input_train_batch,
                                     .reset = lv_stream_input_reset,
                                     .next_eval = lv_stream_input_next_eval,
                                     .num_samples = lv_stream_input_num_samples,
                                     .batch_size = lv_stream_input_batch_size,
                                     .buffer_peak_bytes = lv_stream_input_buffer_peak_bytes,
                                     .destroy = nmt_destroy};
