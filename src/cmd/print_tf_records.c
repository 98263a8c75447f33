/* print_tf_records: debug-print TFRecord files of tf.Example as text, like Lingvo's
 * lingvo/tools/print_tf_records.py (same flags and layout: a table of features for the
 * first printed record, then "== Record [i]" and one "name: values" line per feature in
 * name order, lists longer than 8 abbreviated to the first 6 and last 2 values). */
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/file.h"
#include "base/flags.h"
#include "base/status.h"
#include "io/example.h"
#include "io/tfrecord.h"

static const char *flag_pattern = "";
static const char *flag_format = "tf.Example";
static int64_t flag_skip_first_n = 0;
static int64_t flag_print_only_n = -1;
static bool flag_count_only = false;
static bool flag_bytes_as_utf8 = true;
static bool flag_skip_corrupt = false;

static const char *usage =
    "Usage: print_tf_records --input_filepattern=GLOB [flags]\n"
    "Prints the tf.Example records of TFRecord files as text (or counts them).";

/* Shortest %g text that reads back as the same double, in Python's repr style ("1.0"). */
static void fmt_float(double v, char *out, size_t n) {
  if (isnan(v)) {
    snprintf(out, n, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(out, n, v > 0 ? "inf" : "-inf");
    return;
  }
  for (int p = 1; p <= 17; p++) {
    snprintf(out, n, "%.*g", p, v);
    if (strtod(out, NULL) == v) break;
  }
  if (!strpbrk(out, ".e")) strncat(out, ".0", n - strlen(out) - 1);
}

static bool valid_utf8(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    int extra = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (extra < 0 || (size_t)extra > n - i - 1) return false;
    for (int k = 1; k <= extra; k++)
      if ((s[i + (size_t)k] & 0xc0) != 0x80) return false;
    i += (size_t)extra + 1;
  }
  return true;
}

/* Python-like repr of one bytes value: 'text' (as UTF-8) or b'..' with \x escapes. With
 * quote=false the text is printed bare (Python's str() of a str, used in long lists). */
static void print_bytes(const uint8_t *s, size_t n, bool quote) {
  bool utf8 = flag_bytes_as_utf8 && valid_utf8(s, n);
  /* Python quotes with ' unless the text holds a ' and no ". */
  char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
  if (!utf8 || quote) printf("%s%c", utf8 ? "" : "b", q);
  for (size_t i = 0; i < n; i++) {
    uint8_t c = s[i];
    if (!quote && utf8) {
      putchar(c);
    } else if (c == '\\' || c == (uint8_t)q) {
      printf("\\%c", c);
    } else if (c == '\n') {
      printf("\\n");
    } else if (c == '\t') {
      printf("\\t");
    } else if (c == '\r') {
      printf("\\r");
    } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) {
      printf("\\x%02x", c);
    } else {
      putchar(c);
    }
  }
  if (!utf8 || quote) putchar(q);
}

static void print_value(const lv_example *e, const char *key, lv_feature_kind kind, int i, bool quote) {
  char buf[64];
  int n;
  if (kind == LV_FEATURE_BYTES) {
    const uint8_t *v;
    size_t len;
    lv_example_get_bytes(e, key, i, &v, &len, &n);
    print_bytes(v, len, quote);
  } else if (kind == LV_FEATURE_FLOAT) {
    const float *v;
    lv_example_get_floats(e, key, &v, &n);
    fmt_float(v[i], buf, sizeof buf);
    fputs(buf, stdout);
  } else {
    const int64_t *v;
    lv_example_get_int64s(e, key, &v, &n);
    printf("%lld", (long long)v[i]);
  }
}

static int cmp_key(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Feature indices of e sorted by name. */
static int *sorted_features(const lv_example *e) {
  int n = lv_example_num_features(e);
  const char **keys = malloc(((size_t)n + 1) * sizeof(*keys));
  int *idx = malloc(((size_t)n + 1) * sizeof(int));
  for (int i = 0; i < n; i++) keys[i] = lv_example_feature_key(e, i);
  qsort(keys, (size_t)n, sizeof(*keys), cmp_key);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (lv_example_feature_key(e, j) == keys[i]) idx[i] = j;
  free(keys);
  return idx;
}

static void print_header(const lv_example *e) {
  int *idx = sorted_features(e);
  printf("==== FEATURES ====\n");
  for (int i = 0; i < lv_example_num_features(e); i++)
    printf("%s: [%s]\n", lv_example_feature_key(e, idx[i]), lv_feature_kind_names[lv_example_feature_kind(e, idx[i])]);
  printf("====\n");
  free(idx);
}

static void print_example(const lv_example *e) {
  int *idx = sorted_features(e);
  for (int f = 0; f < lv_example_num_features(e); f++) {
    int k = idx[f];
    const char *key = lv_example_feature_key(e, k);
    lv_feature_kind kind = lv_example_feature_kind(e, k);
    int n = lv_example_feature_size(e, k);
    printf("%s: [", key);
    if (kind == LV_FEATURE_NONE) {
      /* A Feature with no kind set: Lingvo's tool has no line format for it. */
    } else if (n <= 8) {
      for (int i = 0; i < n; i++) {
        if (i) fputs(", ", stdout);
        print_value(e, key, kind, i, true);
      }
    } else {
      for (int i = 0; i < 6; i++) {
        print_value(e, key, kind, i, false);
        putchar(' ');
      }
      fputs("...", stdout);
      for (int i = n - 2; i < n; i++) {
        putchar(' ');
        print_value(e, key, kind, i, false);
      }
    }
    printf("]\n");
  }
  free(idx);
}

static lv_status run(void) {
  if (!*flag_pattern) return lv_status_make(LV_ERR_INVALID, "--input_filepattern is required; run with --help");
  if (strcmp(flag_format, "tf.Example") != 0)
    return lv_status_make(LV_ERR_INVALID, "--input_format=%s: only \"tf.Example\" is supported", flag_format);
  glob_t g;
  int grc = glob(flag_pattern, 0, NULL, &g);
  if (grc == GLOB_NOMATCH) return lv_status_make(LV_ERR_NOT_FOUND, "no file matches --input_filepattern=%s", flag_pattern);
  if (grc != 0) return lv_status_make(LV_ERR_IO, "cannot expand --input_filepattern=%s", flag_pattern);
  int64_t entry = 0, skipped = 0;
  lv_status s = NULL;
  bool done = false;
  for (size_t fi = 0; fi < g.gl_pathc && !done && !s; fi++) {
    const char *path = g.gl_pathv[fi];
    lv_tfrecord_reader *r = NULL;
    s = lv_tfrecord_reader_open(path, flag_skip_corrupt, &r);
    while (!s) {
      const uint8_t *d;
      size_t len;
      bool eof;
      s = lv_tfrecord_reader_next(r, &d, &len, &eof);
      if (s || eof) break;
      if (entry < flag_skip_first_n) {
        entry++;
        continue;
      }
      if (flag_print_only_n >= 0 && entry - flag_skip_first_n >= flag_print_only_n) {
        done = true;
        break;
      }
      if (flag_count_only) {
        entry++;
        continue;
      }
      lv_example *e;
      s = lv_example_parse(d, len, &e);
      if (s) {
        s = lv_status_wrap(s, "%s: record %lld at byte offset %llu", path, (long long)entry,
                           (unsigned long long)(lv_tfrecord_reader_offset(r) - len - LV_TFRECORD_OVERHEAD));
        break;
      }
      if (entry == flag_skip_first_n) print_header(e);
      printf("== Record [%lld]\n", (long long)entry);
      print_example(e);
      lv_example_free(e);
      entry++;
      if (ferror(stdout)) s = lv_file_flush_check(stdout, "stdout"); /* a full disk: stop */
    }
    if (r) {
      skipped += lv_tfrecord_reader_skipped(r);
      lv_tfrecord_reader_close(r);
    }
  }
  globfree(&g);
  if (s) return s;
  printf("== Total entries: %lld\n", (long long)entry);
  LV_TRY(lv_file_flush_check(stdout, "stdout"));
  if (skipped) fprintf(stderr, "print_tf_records: skipped %lld corrupt region(s)\n", (long long)skipped);
  return NULL;
}

int main(int argc, char **argv) {
  lv_env_init();
  lv_flag flags[] = {
      LV_FLAG_STR("input_filepattern", &flag_pattern, "File pattern (glob) of binary TFRecord files."),
      LV_FLAG_STR("input_format", &flag_format, "Input format: only \"tf.Example\" is supported."),
      LV_FLAG_I64("skip_first_n", &flag_skip_first_n, "Skip the first records."),
      LV_FLAG_I64("print_only_n", &flag_print_only_n, "Only print (or count) this many records; -1 = all."),
      LV_FLAG_BOOL("count_only", &flag_count_only, "Don't print, just count the records."),
      LV_FLAG_BOOL("bytes_as_utf8", &flag_bytes_as_utf8, "Print byte strings as UTF-8 strings."),
      LV_FLAG_BOOL("skip_corrupt", &flag_skip_corrupt,
                   "Skip corrupt or truncated records (counted on stderr) instead of failing."),
  };
  bool help;
  lv_status s = lv_flags_parse(flags, (int)LV_ARRAY_LEN(flags), argc, argv, usage, &help);
  if (!s && help) return 0;
  if (!s) s = run();
  return s ? lv_status_report("print_tf_records", s) : 0;
}
