/* The decoder job knows no task: a toy decoding task defined here, in its own file, and
 * added with lv_task_class_register (what one line of tasks.def does for the library's
 * tasks) is decoded by the unchanged runner (lv_decoder_run, bin/decoder's job) from an
 * experiment file: decoder_out, the score file with the task's own metric and the
 * interactive line hooks (--decode_text; another kind is refused by the task). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "check_util.h"
#include "io/bundle.h"
#include "lingvoc.h"
#include "metrics/metrics.h"
#include "models/model.h"
#include "models/task.h"
#include "runners/decoder.h"

static char g_dir[256];
static void setup(void) { lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_check_decoder_job"); }
static void teardown(void) { lv_test_rmtree(g_dir); }

/* test.ToyDecoder: an example's hypothesis is the sum of its 4 data bytes mod 4, its
 * reference the label; the metric "accuracy" counts their agreement. */
typedef struct toy_task {
  lv_task base;
  uint8_t line_data[4];
  lv_tensor line_view;
} toy_task;

static lv_params *toy_params(void) { return lv_task_base_params("test.ToyDecoder"); }

static lv_status toy_create(const lv_params *p, const lv_params *input_p, lv_varstore *vs, lv_task **out) {
  (void)input_p;
  (void)vs;
  toy_task *t = calloc(1, sizeof *t);
  ck_assert(t != NULL);
  t->base.p = p;
  t->base.cls = lv_task_class_find("test.ToyDecoder");
  *out = &t->base;
  return NULL;
}

static bool toy_fprop(lv_task *t, lv_graph *g, lv_batch *b, bool is_eval, int64_t step, lv_metrics *m) {
  (void)t, (void)g, (void)b, (void)is_eval, (void)step, (void)m;
  return true;
}

static void toy_destroy(lv_task *t) {
  lv_task_free_decode_state(t);
  free(t);
}

static lv_status toy_metrics(lv_task *t, lv_metric_set *ms) {
  (void)t;
  return lv_metric_set_add(ms, "accuracy", lv_metric_average_new());
}

/* Host tensors only: the hyps [B] as int32 from the batch's raw bytes, and its labels. */
static lv_status toy_decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *out) {
  (void)t, (void)g;
  lv_tensor *data = lv_batch_get(b, "raw");
  int64_t n = b->size;
  lv_tensor *hyp = lv_tensor_new(LV_I32, lv_shape1(n));
  ck_assert(hyp != NULL);
  for (int64_t i = 0; i < n; i++) {
    int sum = 0;
    for (int k = 0; k < 4; k++) sum += lv_u8(data)[i * 4 + k];
    lv_i32(hyp)[i] = sum % 4;
  }
  LV_TRY(lv_decode_out_take(out, "hyp", hyp));
  lv_tensor *label = lv_batch_get(b, "label");
  return label ? lv_decode_out_set(out, "label", label) : NULL;
}

static lv_status toy_post(lv_task *t, const lv_decode_out *o, lv_metric_set *ms, lv_kv_list *out) {
  (void)t;
  lv_tensor *hyp = lv_decode_out_get(o, "hyp"), *label = lv_decode_out_get(o, "label");
  lv_metric *acc = lv_metric_set_get(ms, "accuracy");
  int64_t first = (int64_t)lv_metric_total_weight(acc);
  for (int64_t i = 0; i < lv_tensor_numel(hyp); i++) {
    char key[32], value[64];
    int h = lv_i32(hyp)[i], r = lv_i32(label)[i];
    snprintf(key, sizeof key, "ex%lld", (long long)(first + i));
    snprintf(value, sizeof value, "ref=%d\nhyp=%d", r, h);
    LV_TRY(lv_kv_list_add(out, key, value));
    LV_TRY(lv_metric_average_update(acc, h == r, 1.0));
  }
  return NULL;
}

static lv_status toy_describe(lv_task *t, const char *kind, const char **verb, const char **note) {
  if (strcmp(kind, "decode_text"))
    return lv_status_make(LV_ERR_INVALID, "--%s: %s decodes text", kind, t->cls->cls);
  *verb = "summing";
  *note = "";
  return NULL;
}

/* A line of 4 numbers is one example; an empty line is nothing to decode. */
static lv_status toy_line(lv_task *t, const char *kind, const char *line, size_t len, int64_t lineno, lv_batch *b,
                          bool *empty) {
  (void)kind, (void)len;
  toy_task *tt = (toy_task *)t;
  int v[4];
  *empty = sscanf(line, "%d %d %d %d", &v[0], &v[1], &v[2], &v[3]) != 4;
  if (*empty && *line) return lv_status_make(LV_ERR_INVALID, "line %lld: expected 4 numbers", (long long)lineno);
  if (*empty) return NULL;
  for (int k = 0; k < 4; k++) tt->line_data[k] = (uint8_t)v[k];
  tt->line_view = lv_tensor_view(LV_U8, lv_shape2(1, 4), tt->line_data);
  lv_nmap_clear(&b->map);
  b->size = 1;
  return lv_nmap_set(&b->map, "raw", &tt->line_view);
}

static lv_status toy_out_line(lv_task *t, const lv_decode_out *o, char **line) {
  (void)t;
  return asprintf(line, "hyp=%d", lv_i32(lv_decode_out_get(o, "hyp"))[0]) < 0
             ? lv_status_make(LV_ERR_RESOURCE, "out of memory")
             : NULL;
}

/* The library's n-best of item i: its one hypothesis, score 0 (none for an empty line). */
static lv_status toy_nbest(lv_task *t, const lv_decode_out *o, int i, int k, char **texts, float *scores, int *n) {
  (void)t, (void)k;
  *n = 0;
  if (!o) return NULL;
  if (asprintf(&texts[0], "hyp=%d", lv_i32(lv_decode_out_get(o, "hyp"))[i]) < 0)
    return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  scores[0] = 0;
  *n = 1;
  return NULL;
}

static const lv_task_class kToy = {.cls = "test.ToyDecoder",
                                   .params = toy_params,
                                   .create = toy_create,
                                   .fprop = toy_fprop,
                                   .destroy = toy_destroy,
                                   .create_decoder_metrics = toy_metrics,
                                   .decode = toy_decode,
                                   .post_process_decode_out = toy_post,
                                   .line_describe = toy_describe,
                                   .line_to_batch = toy_line,
                                   .decode_out_to_line = toy_out_line,
                                   .decode_out_nbest = toy_nbest};

enum { N = 5 };
static const uint8_t kData[N][4] = {{1, 2, 3, 0}, {0, 0, 0, 1}, {3, 3, 3, 3}, {2, 2, 2, 1}, {9, 0, 0, 0}};
static const uint8_t kLabel[N] = {2, 1, 0, 0, 1}; /* hyps 2 1 0 3 1: 4 of 5 right */

/* The dataset, a checkpoint at step 7, an experiment file; the params for dataset ds. */
static lv_params *prepare(const char *ds) {
  static bool registered;
  if (!registered) EXPECT_OK(lv_task_class_register(&kToy));
  registered = true;
  char path[512], text[1024];
  lv_bundle_writer *w = NULL;
  snprintf(path, sizeof path, "%s/data", g_dir);
  EXPECT_OK(lv_bundle_writer_open(path, &w));
  lv_shape ds_shape = lv_shape4(N, 2, 2, 1), ls = lv_shape1(N);
  EXPECT_OK(lv_bundle_writer_add(w, "x", LV_U8, &ds_shape, kData));
  EXPECT_OK(lv_bundle_writer_add(w, "y", LV_U8, &ls, kLabel));
  EXPECT_OK(lv_bundle_writer_finish(w));
  snprintf(path, sizeof path, "%s/log/train", g_dir);
  EXPECT_OK(lv_file_mkdirs(path));
  snprintf(path, sizeof path, "%s/log/train/ckpt-00000007", g_dir);
  EXPECT_OK(lv_bundle_writer_open(path, &w));
  int64_t step = 7;
  lv_shape s0 = lv_shape0();
  EXPECT_OK(lv_bundle_writer_add(w, "global_step", LV_I64, &s0, &step));
  EXPECT_OK(lv_bundle_writer_finish(w));
  snprintf(path, sizeof path, "%s/exp/test", g_dir);
  EXPECT_OK(lv_file_mkdirs(path));
  snprintf(path, sizeof path, "%s/exp/test/toy.cfg", g_dir);
  snprintf(text, sizeof text,
           "Toy: {\n  task: { cls = \"test.ToyDecoder\"; name = \"toy\"; };\n"
           "  datasets: { test: { cls = \"BaseTinyDatasetInput\"; ckpt = \"%s/data\"; data = \"x\"; label = \"y\";\n"
           "    data_shape = [2, 2, 1]; batch_size = 2; repeat = false; }; };\n};\n",
           g_dir);
  EXPECT_OK(lv_file_write_atomic(path, text, strlen(text)));
  char exp[300], logdir[300];
  snprintf(exp, sizeof exp, "%s/exp", g_dir);
  snprintf(logdir, sizeof logdir, "%s/log", g_dir);
  lv_model_options o;
  lv_model_options_init(&o);
  o.model = "test.toy.Toy";
  o.dataset = ds;
  o.experiments_dir = exp;
  o.logdir = logdir;
  o.job = "decoder_test";
  lv_params *p = NULL;
  EXPECT_OK(lv_model_params_build(&o, &p));
  return p;
}

static char *read_text(const char *path) {
  char *buf = NULL;
  size_t n = 0;
  EXPECT_OK(lv_file_read_all(path, &buf, &n));
  return buf;
}

START_TEST(test_decoder_job_runs_a_new_task) {
  lv_params *p = prepare("Test");
  char ck[400];
  snprintf(ck, sizeof ck, "%s/log/train/ckpt-00000007", g_dir);
  lv_decoder_options opt = {.dataset = "Test", .once = true, .checkpoint = ck, .max_poll_secs = 1};
  EXPECT_OK(lv_decoder_run(p, &opt));
  char path[512];
  snprintf(path, sizeof path, "%s/log/decoder_test/decoder_out_000000007", g_dir);
  char *out = read_text(path);
  ck_assert_str_eq(out, "ex0\nref=2\nhyp=2\n\nex1\nref=1\nhyp=1\n\nex2\nref=0\nhyp=0\n\nex3\nref=0\nhyp=3\n\n"
                        "ex4\nref=1\nhyp=1\n\n");
  free(out);
  snprintf(path, sizeof path, "%s/log/decoder_test/score-00000007.txt", g_dir);
  char *score = read_text(path);
  ck_assert_msg(!strncmp(score, "accuracy: 0.8\nexamples/sec: ", 28), "score file: %s", score);
  free(score);
  lv_params_free(p);
}
END_TEST

/* A task registered at run time decodes lines through the library (bin/decoder's
 * --decode_text is its client), with no line of the runners or the library naming it. */
START_TEST(test_decoder_lines_through_the_task) {
  lv_params_free(prepare("Test"));
  char ck[400], exp[300], logdir[300];
  snprintf(ck, sizeof ck, "%s/log/train/ckpt-00000007", g_dir);
  snprintf(exp, sizeof exp, "%s/exp", g_dir);
  snprintf(logdir, sizeof logdir, "%s/log", g_dir);
  lv_load_options o;
  lv_load_options_init(&o);
  o.model = "test.toy.Toy", o.logdir = logdir, o.experiments_dir = exp, o.checkpoint = ck;
  lv_model *m = NULL;
  EXPECT_OK(lv_model_load(&o, &m));
  const char *lines[3] = {"1 2 3 0", "", "9 9 9 1"};
  lv_nbest *r = NULL;
  EXPECT_OK(lv_translate(m, NULL, lines, 3, 1, &r));
  ck_assert_int_eq(r->n_items, 3);
  ck_assert_int_eq(r->n[0], 1);
  ck_assert_str_eq(r->text[0][0], "hyp=2");
  ck_assert_int_eq(r->n[1], 0);
  ck_assert_int_eq(r->n[2], 1);
  ck_assert_str_eq(r->text[2][0], "hyp=0");
  lv_nbest_free(r);
  /* A call the task does not take is said to be so, naming what it takes. */
  const float samples[16] = {0};
  EXPECT_ERR(lv_transcribe(m, NULL, samples, 16, 1, &r), LV_ERR_INVALID, "lv_transcribe", "test.ToyDecoder",
             "it takes lv_translate");
  lv_model_free(m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("decoder_job");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_decoder_job_runs_a_new_task);
  tcase_add_test(tc, test_decoder_lines_through_the_task);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
