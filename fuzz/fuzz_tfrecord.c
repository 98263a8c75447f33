/* libFuzzer target for the TFRecord reader and the tf.Example parser. The first byte
 * picks the mode: 0 and 1 write the rest as a TFRecord file and read every record
 * (1 with skip_corrupt), parsing each as a tf.Example; 2 parses the rest as one
 * tf.Example directly. A parsed Example must serialize and parse back to the same
 * features. Every input must give a clean error or a consistent result, never a crash,
 * a hang or an overrun. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/example.h"
#include "io/tfrecord.h"
#include "fuzz_util.h"

static char g_dir[256], g_file[300];

static void cleanup(void) {
  unlink(g_file);
  rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_mkdtemp("fuzz_tfrecord", g_dir, sizeof g_dir);
  snprintf(g_file, sizeof g_file, "%s/records", g_dir);
  atexit(cleanup);
  return 0;
}

/* Reads every value of every feature (ASan sees any overrun). */
static void touch_example(const lv_example *e) {
  volatile uint8_t sink = 0;
  for (int i = 0; i < lv_example_num_features(e); i++) {
    const char *key = lv_example_feature_key(e, i);
    int n = lv_example_feature_size(e, i), m = -1;
    switch (lv_example_feature_kind(e, i)) {
      case LV_FEATURE_BYTES:
        for (int k = 0; k < n; k++) {
          const uint8_t *v;
          size_t len;
          if (!lv_example_get_bytes(e, key, k, &v, &len, &m)) abort();
          for (size_t j = 0; j < len; j++) sink ^= v[j];
        }
        break;
      case LV_FEATURE_FLOAT: {
        const float *v;
        if (!lv_example_get_floats(e, key, &v, &m) || m != n) abort();
        for (int k = 0; k < n; k++) sink ^= (uint8_t)(v[k] == v[k]);
        break;
      }
      case LV_FEATURE_INT64: {
        const int64_t *v;
        if (!lv_example_get_int64s(e, key, &v, &m) || m != n) abort();
        for (int k = 0; k < n; k++) sink ^= (uint8_t)v[k];
        break;
      }
      default: break;
    }
  }
  (void)sink;
}

/* Serialize and parse back: the same keys, kinds and sizes. */
static void round_trip(const lv_example *e) {
  uint8_t *buf = NULL;
  size_t len = 0;
  lv_status s = lv_example_serialize(e, &buf, &len);
  if (s) abort();
  lv_example *b = NULL;
  s = lv_example_parse(buf, len, &b);
  if (s) abort();
  if (lv_example_num_features(b) != lv_example_num_features(e)) abort();
  for (int i = 0; i < lv_example_num_features(e); i++) {
    if (strcmp(lv_example_feature_key(e, i), lv_example_feature_key(b, i))) abort();
    if (lv_example_feature_size(e, i) != lv_example_feature_size(b, i)) abort();
  }
  lv_example_free(b);
  free(buf);
}

static void parse_example(const uint8_t *data, size_t size) {
  lv_example *e = NULL;
  lv_status s = lv_example_parse(data, size, &e);
  if (s) {
    lv_status_free(s);
    return;
  }
  touch_example(e);
  round_trip(e);
  lv_example_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int mode = data[0] % 3;
  data++;
  size--;
  if (mode == 2) {
    parse_example(data, size);
    return 0;
  }
  put_file(g_file, data, size);
  lv_tfrecord_reader *r = NULL;
  lv_status s = lv_tfrecord_reader_open(g_file, mode == 1, &r);
  if (s) {
    lv_status_free(s);
    return 0;
  }
  for (int i = 0; i < 10000; i++) {
    const uint8_t *rec;
    size_t len;
    bool eof = false;
    s = lv_tfrecord_reader_next(r, &rec, &len, &eof);
    if (s) {
      lv_status_free(s);
      break;
    }
    if (eof) break;
    if (len > size) abort();
    parse_example(rec, len);
  }
  lv_tfrecord_reader_close(r);
  return 0;
}
