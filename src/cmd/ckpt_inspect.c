/* ckpt_inspect: lists or prints the tensors of a TensorFlow V2 checkpoint, like
 * TensorFlow's inspect_checkpoint tool. Values are printed the way numpy prints arrays
 * (nested brackets, summarised with "..." beyond 1000 elements). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/flags.h"
#include "base/file.h"
#include "io/bundle.h"
#include "runners/checkpointer.h"

static const char kUsage[] =
    "Usage: ckpt_inspect --file_name=PREFIX|DIR [--tensor_name=NAME | --all_tensors | --all_tensor_names]\n"
    "Lists the tensors of the TensorFlow checkpoint PREFIX (PREFIX.index +\n"
    "PREFIX.data-*) as `NAME (DTYPE) [SHAPE]`, sorted by name; prints the values of one\n"
    "tensor or of all of them, or only their names. Given a directory (a log directory's\n"
    "train/), reads its latest checkpoint, as its `checkpoint` state file names it.";

enum { kEdge = 3 };
/* numpy's print threshold: arrays with more elements are summarized (--printoptions). */
static int64_t g_threshold = 1000;

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float f;
  if (exp == 0) f = ldexpf((float)man, -24);
  else if (exp == 31) f = man ? NAN : INFINITY;
  else f = ldexpf((float)(man | 0x400), (int)exp - 25);
  return sign ? -f : f;
}

static float bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Shortest text that reads back to the same value, as numpy/Python print floats. */
static bool g_scalar; /* numpy prints a scalar 2.0 as "2.0", inside an array as "2." */

static void print_float(double v, bool single) {
  if (isnan(v)) { fputs("nan", stdout); return; }
  if (isinf(v)) { fputs(v < 0 ? "-inf" : "inf", stdout); return; }
  char buf[64];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
  }
  if (!strpbrk(buf, ".eni")) strcat(buf, g_scalar ? ".0" : ".");
  fputs(buf, stdout);
}

static void print_bytes(const char *s, size_t n) {
  fputs("b'", stdout);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\\' || c == '\'') printf("\\%c", c);
    else if (c == '\n') fputs("\\n", stdout);
    else if (c == '\t') fputs("\\t", stdout);
    else if (c == '\r') fputs("\\r", stdout);
    else if (c < 32 || c >= 127) printf("\\x%02x", c);
    else putchar(c);
  }
  putchar('\'');
}

typedef struct {
  lv_dtype dtype;
  const uint8_t *data;
  char **strs;
  size_t *lens;
  const lv_shape *shape;
  bool summarize;
} printer;

static void print_elem(const printer *p, int64_t i) {
  union { float f; double g; int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint8_t u8;
          uint16_t u16; uint32_t u32; uint64_t u64; } v;
  /* A string tensor has no fixed-size data (p->data is NULL): its elements are p->strs. */
  if (p->dtype != LV_STRING) memcpy(&v, p->data + (size_t)i * lv_dtype_size(p->dtype), lv_dtype_size(p->dtype));
  switch (p->dtype) {
    case LV_F32: print_float(v.f, true); break;
    case LV_F64: print_float(v.g, false); break;
    case LV_I8: printf("%d", v.i8); break;
    case LV_I16: printf("%d", v.i16); break;
    case LV_I32: printf("%d", v.i32); break;
    case LV_I64: printf("%lld", (long long)v.i64); break;
    case LV_U8: printf("%u", v.u8); break;
    case LV_U16: printf("%u", v.u16); break;
    case LV_U32: printf("%u", v.u32); break;
    case LV_U64: printf("%llu", (unsigned long long)v.u64); break;
    case LV_BOOL: fputs(v.u8 ? "True" : "False", stdout); break;
    case LV_F16: print_float(half_to_float(v.u16), true); break;
    case LV_BF16: print_float(bf16_to_float(v.u16), true); break;
    case LV_STRING: print_bytes(p->strs[i], p->lens[i]); break;
    default: break;
  }
}

static void print_dim(const printer *p, int dim, int64_t base) {
  const lv_shape *s = p->shape;
  int64_t n = s->d[dim], stride = 1;
  for (int k = dim + 1; k < s->rank; k++) stride *= s->d[k];
  bool cut = p->summarize && n > 2 * kEdge;
  putchar('[');
  for (int64_t i = 0; i < n; i++) {
    if (cut && i == kEdge) {
      i = n - kEdge;
      if (dim == s->rank - 1) fputs("... ", stdout);
      else {
        fputs("...", stdout);
        for (int k = 0; k < s->rank - 1 - dim; k++) putchar('\n');
        for (int k = 0; k <= dim; k++) putchar(' ');
      }
    }
    if (dim == s->rank - 1) print_elem(p, base + i);
    else print_dim(p, dim + 1, base + i * stride);
    if (i + 1 < n) {
      if (dim == s->rank - 1) putchar(' ');
      else {
        for (int k = 0; k < s->rank - 1 - dim; k++) putchar('\n');
        for (int k = 0; k <= dim; k++) putchar(' ');
      }
    }
  }
  putchar(']');
}

static lv_status print_tensor(lv_bundle_reader *r, const lv_bundle_entry *e) {
  printer p = {e->dtype, NULL, NULL, NULL, &e->shape, lv_shape_numel(&e->shape) > g_threshold};
  uint8_t *buf = NULL;
  if (e->dtype == LV_STRING) {
    LV_TRY(lv_bundle_reader_read_strings(r, e, &p.strs, &p.lens));
  } else {
    buf = malloc(e->size ? e->size : 1);
    if (!buf)
      return lv_status_make(LV_ERR_RESOURCE, "cannot allocate %llu bytes for %s",
                            (unsigned long long)e->size, e->name);
    lv_status s = lv_bundle_reader_read(r, e, buf, e->size);
    if (s) {
      free(buf);
      return s;
    }
    p.data = buf;
  }
  printf("tensor_name:  %s\n", e->name);
  g_scalar = e->shape.rank == 0;
  if (e->shape.rank == 0) print_elem(&p, 0);
  else if (lv_shape_numel(&e->shape) == 0) fputs("[]", stdout); /* numpy's for any empty array ([2^62, 0] too) */
  else print_dim(&p, 0, 0);
  putchar('\n');
  free(buf);
  lv_bundle_strings_free(p.strs, p.lens, p.strs ? lv_shape_numel(&e->shape) : 0);
  return NULL;
}

static lv_status run(const char *file_name, const char *tensor_name, bool all, bool names) {
  if (!file_name || !*file_name)
    return lv_status_make(LV_ERR_INVALID, "--file_name=PREFIX is required (run with --help)");
  if ((tensor_name && *tensor_name) + all + names > 1)
    return lv_status_make(LV_ERR_INVALID, "--tensor_name, --all_tensors and --all_tensor_names exclude each other");
  char latest[8192];
  if (lv_file_is_dir(file_name)) {
    int64_t step;
    bool found = false;
    LV_TRY(lv_checkpoint_latest(file_name, latest, sizeof latest, &step, &found));
    if (!found)
      return lv_status_make(LV_ERR_NOT_FOUND, "%s: a directory with no checkpoint (no `checkpoint` state file naming one)",
                            file_name);
    fprintf(stderr, "ckpt_inspect: latest checkpoint in %s: %s\n", file_name, latest);
    file_name = latest;
  }
  lv_bundle_reader *r;
  LV_TRY(lv_bundle_reader_open(file_name, &r));
  lv_status s = NULL;
  if (tensor_name && *tensor_name) {
    const lv_bundle_entry *e = lv_bundle_reader_find(r, tensor_name);
    if (!e) s = lv_status_make(LV_ERR_NOT_FOUND, "%s: no tensor named \"%s\"", file_name, tensor_name);
    else s = print_tensor(r, e);
  } else {
    for (int i = 0; i < lv_bundle_reader_count(r) && !s; i++) {
      const lv_bundle_entry *e = lv_bundle_reader_entry(r, i);
      if (all) {
        s = print_tensor(r, e);
      } else if (names) {
        printf("tensor_name:  %s\n", e->name); /* TF's inspect_checkpoint --all_tensor_names */
      } else {
        char sh[256];
        printf("%s (%s) %s\n", e->name, lv_dtype_tf_names[e->dtype],
               lv_shape_str(&e->shape, sh, sizeof sh));
      }
    }
  }
  lv_bundle_reader_close(r);
  if (!s) s = lv_file_flush_check(stdout, "stdout");
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  const char *file_name = "", *tensor_name = "", *printoptions = "";
  bool all = false, names = false;
  lv_flag flags[] = {
      LV_FLAG_STR("file_name", &file_name,
                  "Checkpoint prefix (PREFIX.index beside PREFIX.data-*), or a directory: its latest checkpoint."),
      LV_FLAG_STR("tensor_name", &tensor_name, "Print this tensor's values."),
      LV_FLAG_BOOL("all_tensors", &all, "Print the values of every tensor."),
      LV_FLAG_BOOL("all_tensor_names", &names, "Print only the name of every tensor (tensor_name:  NAME)."),
      LV_FLAG_STR("printoptions", &printoptions,
                  "numpy print options as k=v; supported: threshold=N (arrays of more than N elements are "
                  "summarized with '...'; default 1000)."),
  };
  const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  bool help = false;
  lv_status s = lv_flags_parse(flags, (int)LV_ARRAY_LEN(flags), argc, argv, kUsage, &help);
  if (s || help) return lv_status_report(prog, s);
  if (*printoptions) {
    char *end = NULL;
    long long t = strncmp(printoptions, "threshold=", 10) ? -1 : strtoll(printoptions + 10, &end, 10);
    if (t < 0 || !end || *end)
      return lv_status_report(prog, lv_status_make(LV_ERR_INVALID, "--printoptions=%s: expected threshold=N with N >= 0",
                                                   printoptions));
    g_threshold = t;
  }
  return lv_status_report(prog, run(file_name, tensor_name, all, names));
}
