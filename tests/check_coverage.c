/* Coverage the suite enforces rather than hopes for, as check_backend_ops does for
 * kernels: every op of src/core/ops.def has a finite-difference gradient check (a
 * gradcheck() call of tests/gradcheck.h whose name literal names the op, in some
 * tests/check_*.c), and every layer class of src/layers/layers.def is built by name in
 * some suite (its registered class name as a string literal: "FCLayer"). A missing one
 * fails naming it. Ops that have no gradient are listed below with the reason. */
#include <check.h>
#include <ctype.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "check_util.h"
#include "core/graph_impl.h"
#include "layers/layer.h"

#define X(sym) extern const lv_layer_class sym;
#include "layers/layers.def"
#undef X
static const lv_layer_class *const kLayerClasses[] = {
#define X(sym) &sym,
#include "layers/layers.def"
#undef X
};

/* Ops without a gradient: they record no tape node (src/core/op_nograd.c, op_seq.c,
 * op_elementwise.c), so there is nothing to check by finite differences. */
static const char *const kNoGradient[] = {
    "cast",                      /* changes the dtype; lingvoc casts ids and masks only */
    "per_image_standardization", /* input preprocessing of images, before any variable */
    "in_top_k",                  /* boolean output */
    "argmax",                    /* integer output */
    "top_k",                     /* integer indices, values used only in beam search */
    "compare",                   /* boolean mask output */
    "moving_average",            /* a deferred variable update, not part of the loss */
    "cached_attention",          /* a decoding step's attention over key/value caches */
};

typedef struct {
  char *text[128];
  char name[128][64];
  int n;
} sources;

static void read_sources(sources *s) {
  const char *root = getenv("LV_ROOT");
  char pat[1024];
  snprintf(pat, sizeof pat, "%s/tests/check_*.c", root && *root ? root : ".");
  glob_t gl;
  ck_assert_msg(glob(pat, 0, NULL, &gl) == 0, "no test sources match %s (set LV_ROOT)", pat);
  s->n = 0;
  for (size_t i = 0; i < gl.gl_pathc && s->n < 128; i++) {
    const char *base = strrchr(gl.gl_pathv[i], '/') + 1;
    if (!strcmp(base, "check_coverage.c")) continue;
    size_t len;
    EXPECT_OK(lv_file_read_all(gl.gl_pathv[i], &s->text[s->n], &len));
    snprintf(s->name[s->n], sizeof s->name[s->n], "%s", base);
    s->n++;
  }
  globfree(&gl);
  ck_assert_int_gt(s->n, 10);
}

static void free_sources(sources *s) {
  for (int i = 0; i < s->n; i++) free(s->text[i]);
}

/* Marks in covered[] every op named by a word of a string literal in the first argument
 * of each gradcheck( call of text. */
static void mark_gradchecks(const char *text, bool *covered) {
  for (const char *p = strstr(text, "gradcheck("); p; p = strstr(p + 1, "gradcheck(")) {
    if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) continue;
    int depth = 0;
    for (const char *q = p + strlen("gradcheck("); *q; q++) {
      if (*q == '"') {
        const char *end = strchr(q + 1, '"');
        if (!end) break;
        for (const char *w = q + 1; w < end;) {
          while (w < end && !(isalnum((unsigned char)*w) || *w == '_')) w++;
          const char *we = w;
          while (we < end && (isalnum((unsigned char)*we) || *we == '_')) we++;
          for (int op = 0; op < LV_OP_COUNT && we > w; op++)
            if (strlen(lv_op_names[op]) == (size_t)(we - w) && !strncmp(lv_op_names[op], w, (size_t)(we - w)))
              covered[op] = true;
          w = we;
        }
        q = end;
      } else if (*q == '(') {
        depth++;
      } else if (*q == ')' && depth-- == 0) {
        break;
      } else if (*q == ',' && depth == 0) {
        break;
      }
    }
  }
}

static bool exempt(const char *op) {
  for (size_t i = 0; i < sizeof kNoGradient / sizeof *kNoGradient; i++)
    if (!strcmp(kNoGradient[i], op)) return true;
  return false;
}

START_TEST(every_op_has_a_gradient_check) {
  sources s;
  read_sources(&s);
  bool covered[LV_OP_COUNT] = {0};
  for (int i = 0; i < s.n; i++) mark_gradchecks(s.text[i], covered);
  int missing = 0;
  for (int op = 0; op < LV_OP_COUNT; op++) {
    if (exempt(lv_op_names[op])) {
      if (covered[op]) {
        fprintf(stderr, "FAIL op %s has a gradient check but is listed as having no gradient\n", lv_op_names[op]);
        missing++;
      }
      continue;
    }
    if (!covered[op]) {
      fprintf(stderr, "FAIL op %s (ops.def) has no gradient check (gradcheck(\"%s\", ...) in tests/)\n",
              lv_op_names[op], lv_op_names[op]);
      missing++;
    }
  }
  for (size_t i = 0; i < sizeof kNoGradient / sizeof *kNoGradient; i++) {
    bool known = false;
    for (int op = 0; op < LV_OP_COUNT; op++) known |= !strcmp(lv_op_names[op], kNoGradient[i]);
    if (!known) {
      fprintf(stderr, "FAIL %s is listed as having no gradient but is no op of ops.def\n", kNoGradient[i]);
      missing++;
    }
  }
  free_sources(&s);
  ck_assert_msg(missing == 0, "%d ops lack a gradient check (named above)", missing);
}
END_TEST

START_TEST(every_layer_class_has_a_test) {
  sources s;
  read_sources(&s);
  int missing = 0;
  for (size_t c = 0; c < sizeof kLayerClasses / sizeof *kLayerClasses; c++) {
    char lit[128];
    snprintf(lit, sizeof lit, "\"%s\"", kLayerClasses[c]->cls);
    bool found = false;
    for (int i = 0; i < s.n && !found; i++) found = strstr(s.text[i], lit) != NULL;
    if (!found) {
      fprintf(stderr, "FAIL layer class %s (layers.def) is built by no suite (no %s in tests/check_*.c)\n",
              kLayerClasses[c]->cls, lit);
      missing++;
    }
  }
  free_sources(&s);
  ck_assert_msg(missing == 0, "%d layer classes lack a test (named above)", missing);
}
END_TEST

/* The scanner itself: a name in a gradcheck call counts, one elsewhere does not. */
START_TEST(scanner_reads_gradcheck_names) {
  bool covered[LV_OP_COUNT] = {0};
  mark_gradchecks("lf_gradcheck(\"matmul\"); x(\"conv2d\"); gradcheck(k ? \"reshape+transpose\" : \"slice axis 1\", "
                  "2, in, f(\"concat\"), NULL);",
                  covered);
  ck_assert(covered[LV_OP_RESHAPE] && covered[LV_OP_TRANSPOSE] && covered[LV_OP_SLICE]);
  ck_assert(!covered[LV_OP_MATMUL] && !covered[LV_OP_CONV2D] && !covered[LV_OP_CONCAT]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("coverage");
  TCase *tc = tcase_create("coverage");
  tcase_add_test(tc, scanner_reads_gradcheck_names);
  tcase_add_test(tc, every_op_has_a_gradient_check);
  tcase_add_test(tc, every_layer_class_has_a_test);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
