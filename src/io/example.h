/* tf.Example: a map from feature name to a list of bytes, floats or int64s
 * (TensorFlow's example.proto / feature.proto). lv_example_parse decodes the wire format
 * directly (zero-copy into one owned copy of the record, every length bounds-checked);
 * lv_example_serialize encodes with protobuf-c from the same .proto files. An lv_example
 * owns all its keys and values; lookups return pointers borrowed from it, valid until
 * lv_example_free. Features keep the order in which they were parsed or added; a key
 * parsed twice keeps its last value (protobuf map semantics). */
#ifndef LV_IO_EXAMPLE_H
#define LV_IO_EXAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum {
  LV_FEATURE_NONE = 0, /* a Feature with no kind set (TF's "<empty>") */
  LV_FEATURE_BYTES,
  LV_FEATURE_FLOAT,
  LV_FEATURE_INT64,
  LV_FEATURE_KIND_COUNT
} lv_feature_kind;

extern const char *const lv_feature_kind_names[LV_FEATURE_KIND_COUNT];

typedef struct lv_example lv_example;

/* Errors are LV_ERR_CORRUPT naming the byte offset within the record. */
lv_status lv_example_parse(const uint8_t *data, size_t len, lv_example **out);
lv_example *lv_example_new(void);
/* Adding a key that already exists replaces its values. */
void lv_example_add_bytes(lv_example *e, const char *key, int n, const char *const *vals, const size_t *lens);
void lv_example_add_floats(lv_example *e, const char *key, int n, const float *vals);
void lv_example_add_int64s(lv_example *e, const char *key, int n, const int64_t *vals);
/* *out is malloc'd; the caller frees it. */
lv_status lv_example_serialize(const lv_example *e, uint8_t **out, size_t *len);

/* Lookups return false if key is absent or of another kind. */
bool lv_example_get_floats(const lv_example *e, const char *key, const float **vals, int *n);
bool lv_example_get_int64s(const lv_example *e, const char *key, const int64_t **vals, int *n);
/* Value i of a bytes feature (and the number of values in *n); false also if i is out of
 * range (then *n is still set when the key exists with bytes). */
bool lv_example_get_bytes(const lv_example *e, const char *key, int i, const uint8_t **val, size_t *len, int *n);
int lv_example_num_features(const lv_example *e);
const char *lv_example_feature_key(const lv_example *e, int i);
lv_feature_kind lv_example_feature_kind(const lv_example *e, int i);
/* Number of values of feature i. */
int lv_example_feature_size(const lv_example *e, int i);
void lv_example_free(lv_example *e);

#endif
