/* The interfaces between modules: input classes (registry, sharding, resume determinism,
 * errors), named maps, the generic layer interface (create by cls, fprop over named
 * maps, stacks from params text, batch norm updates after the step) and the task's
 * decode path with Lingvo's metric classes. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "core/graph.h"
#include "core/nmap.h"
#include "input/input.h"
#include "io/bundle.h"
#include "layers/layer.h"
#include "layers/projection.h"
#include "layers/sequential.h"
#include "metrics/metrics.h"
#include "models/task.h"

enum { N = 50, H = 4, W = 3 };
static char g_dir[256], g_ckpt[300];

/* A tiny dataset checkpoint: example i has every pixel = i, label i % 10. */
static void setup(void) {
  lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_check_interfaces");
  snprintf(g_ckpt, sizeof g_ckpt, "%s/tiny", g_dir);
  static uint8_t x[N * H * W], y[N];
  for (int i = 0; i < N; i++) {
    memset(x + i * H * W, i, H * W);
    y[i] = (uint8_t)(i % 10);
  }
  lv_bundle_writer *w = NULL;
  EXPECT_OK(lv_bundle_writer_open(g_ckpt, &w));
  lv_shape sx = lv_shape3(N, H, W), sy = lv_shape1(N);
  EXPECT_OK(lv_bundle_writer_add(w, "x", LV_U8, &sx, x));
  EXPECT_OK(lv_bundle_writer_add(w, "y", LV_U8, &sy, y));
  EXPECT_OK(lv_bundle_writer_finish(w));
}
static void teardown(void) { lv_test_rmtree(g_dir); }

static lv_params *tiny(const char *cls, int64_t batch, bool repeat) {
  lv_tasks_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate(cls, &p));
  int64_t shape[3] = {H, W, 1};
  EXPECT_OK(lv_params_set_string(p, "ckpt", g_ckpt));
  EXPECT_OK(lv_params_set_string(p, "data", "x"));
  EXPECT_OK(lv_params_set_string(p, "label", "y"));
  EXPECT_OK(lv_params_set_list(p, "data_shape", lv_pvalue_ints(3, shape)));
  EXPECT_OK(lv_params_set_int(p, "num_samples", N));
  EXPECT_OK(lv_params_set_int(p, "batch_size", batch));
  EXPECT_OK(lv_params_set_bool(p, "repeat", repeat));
  lv_params_freeze(p);
  return p;
}

/* The example ids (pixel values) of a batch. */
static int batch_ids(const lv_batch *b, int *ids) {
  lv_tensor *raw = lv_batch_get(b, "raw"), *label = lv_batch_get(b, "label"), *wt = lv_batch_get(b, "weight");
  ck_assert_ptr_nonnull(raw);
  ck_assert_ptr_nonnull(label);
  ck_assert_ptr_nonnull(wt);
  ck_assert_int_eq(raw->shape.d[0], b->size);
  for (int i = 0; i < b->size; i++) {
    ids[i] = lv_u8(raw)[i * H * W];
    ck_assert_int_eq(lv_i32(label)[i], ids[i] % 10);
    ck_assert(lv_f32(wt)[i] == 1.0f);
  }
  return (int)b->size;
}

START_TEST(test_nmap) {
  lv_nmap m;
  lv_nmap_init(&m);
  lv_tensor t[20];
  char key[16];
  for (int i = 0; i < 20; i++) {
    snprintf(key, sizeof key, "k%02d", 19 - i);
    EXPECT_OK(lv_nmap_set(&m, key, &t[i]));
  }
  ck_assert_int_eq(lv_nmap_count(&m), 20); /* no fixed cap */
  ck_assert_ptr_eq(lv_nmap_get(&m, "k00"), &t[19]);
  EXPECT_OK(lv_nmap_set(&m, "k00", &t[0])); /* replaces */
  ck_assert_int_eq(lv_nmap_count(&m), 20);
  ck_assert_ptr_eq(lv_nmap_get(&m, "k00"), &t[0]);
  ck_assert_ptr_null(lv_nmap_get(&m, "tgt.ids"));
  int order[20];
  lv_nmap_sorted(&m, order);
  for (int i = 1; i < 20; i++) ck_assert(strcmp(lv_nmap_at(&m, order[i - 1])->key, lv_nmap_at(&m, order[i])->key) < 0);
  lv_tensor *got;
  EXPECT_ERR(lv_nmap_require(&m, "src.ids", "MyLayer", &got), LV_ERR_INVALID, "MyLayer", "src.ids", "k19, k18");
  char longkey[LV_NMAP_KEY_MAX + 1];
  memset(longkey, 'a', LV_NMAP_KEY_MAX);
  longkey[LV_NMAP_KEY_MAX] = 0;
  EXPECT_ERR(lv_nmap_set(&m, longkey, &t[0]), LV_ERR_INVALID, "characters");
  EXPECT_ERR(lv_nmap_set(&m, "", &t[0]), LV_ERR_INVALID, "characters");
  lv_nmap_free(&m);
  ck_assert_int_eq(lv_nmap_count(&m), 0);
}
END_TEST

/* Training batches are a pure function of (seed, step): a fresh input asked for step 7
 * directly gives what one that walked steps 0..7 gives (what resume relies on). */
START_TEST(test_train_batches_depend_only_on_step) {
  lv_params *p = tiny("MnistTrainInput", 8, true);
  lv_input *a = NULL, *b = NULL;
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &a));
  EXPECT_OK(lv_input_create(p, lv_input_no_shard(), &b));
  ck_assert_int_eq(lv_input_batch_size(a), 8);
  lv_batch ba, bb;
  lv_batch_init(&ba);
  lv_batch_init(&bb);
  int ia[8], ib[8], seen[N] = {0};
  for (int step = 0; step <= 7; step++) {
    EXPECT_OK(lv_input_train_batch(a, step, &ba));
    batch_ids(&ba, ia);
    if (step < 6) /* 6 steps x 8 < 50: the first epoch has no repeats */
      for (int i = 0; i < 8; i++) ck_assert_int_eq(seen[ia[i]]++, 0);
  }
  EXPECT_OK(lv_input_train_batch(b, 7, &bb));
  batch_ids(&bb, ib);
  ck_assert_mem_eq(ia, ib, sizeof ia);
  lv_batch_free(&ba);
  lv_batch_free(&bb);
  lv_input_destroy(a);
  lv_input_destroy(b);
  lv_params_free(p);
}
END_TEST

/* Replica r of R takes examples [r*B, (r+1)*B) of the global batch: 2 replicas of batch 4
 * see exactly what 1 replica of batch 8 sees, step by step. */
START_TEST(test_train_sharding) {
  lv_params *p8 = tiny("MnistTrainInput", 8, true), *p4 = tiny("MnistTrainInput", 4, true);
  lv_input *whole = NULL, *r0 = NULL, *r1 = NULL;
  EXPECT_OK(lv_input_create(p8, lv_input_no_shard(), &whole));
  EXPECT_OK(lv_input_create(p4, (lv_input_shard){0, 2}, &r0));
  EXPECT_OK(lv_input_create(p4, (lv_input_shard){1, 2}, &r1));
  lv_batch b;
  lv_batch_init(&b);
  for (int step = 0; step < 20; step++) {
    int w[8], s[8];
    EXPECT_OK(lv_input_train_batch(whole, step, &b));
    ck_assert_int_eq(batch_ids(&b, w), 8);
    EXPECT_OK(lv_input_train_batch(r0, step, &b));
    ck_assert_int_eq(batch_ids(&b, s), 4);
    EXPECT_OK(lv_input_train_batch(r1, step, &b));
    ck_assert_int_eq(batch_ids(&b, s + 4), 4);
    ck_assert_mem_eq(w, s, sizeof w);
  }
  lv_batch_free(&b);
  lv_input_destroy(whole);
  lv_input_destroy(r0);
  lv_input_destroy(r1);
  lv_params_free(p8);
  lv_params_free(p4);
}
END_TEST

/* Eval: one pass in order, partial last batch; 3 shards cover every example once. */
START_TEST(test_eval_pass_and_sharding) {
  lv_params *p = tiny("MnistTestInput", 16, false);
  int seen[N] = {0};
  for (int r = 0; r < 3; r++) {
    lv_input *in = NULL;
    EXPECT_OK(lv_input_create(p, (lv_input_shard){r, 3}, &in));
    int64_t want = lv_input_num_samples(in), got = 0;
    for (int pass = 0; pass < 2; pass++) {
      EXPECT_OK(lv_input_reset(in));
      lv_batch b;
      lv_batch_init(&b);
      bool done = false;
      got = 0;
      int prev = -1;
      for (;;) {
        EXPECT_OK(lv_input_next_eval(in, &b, &done));
        if (done) break;
        int ids[16];
        int n = batch_ids(&b, ids);
        ck_assert(n >= 1 && n <= 16);
        for (int i = 0; i < n; i++) {
          ck_assert_int_gt(ids[i], prev);
          prev = ids[i];
          if (pass == 0) seen[ids[i]]++;
        }
        got += n;
      }
      lv_batch_free(&b);
      ck_assert_int_eq(got, want);
    }
    lv_input_destroy(in);
  }
  for (int i = 0; i < N; i++) ck_assert_int_eq(seen[i], 1);
  lv_params_free(p);
}
END_TEST

START_TEST(test_input_errors) {
  lv_params *p = tiny("MnistTrainInput", 8, true);
  lv_input *in = NULL;
  EXPECT_ERR(lv_input_create(p, (lv_input_shard){2, 2}, &in), LV_ERR_INVALID, "replica 2 of 2");
  lv_params *q = lv_params_copy(p);
  EXPECT_OK(lv_params_set_string(q, "cls", "NoSuchInput"));
  EXPECT_ERR(lv_input_create(q, lv_input_no_shard(), &in), LV_ERR_INVALID, "input.cls", "NoSuchInput",
             "MnistTrainInput");
  lv_params_free(q);
  q = lv_params_copy(p);
  EXPECT_OK(lv_params_set_int(q, "batch_size", (int64_t)1 << 60));
  EXPECT_ERR(lv_input_create(q, lv_input_no_shard(), &in), LV_ERR_RESOURCE, "input.batch_size", "out of memory");
  lv_params_free(q);
  ck_assert_ptr_null(in);
  lv_params_free(p);
}
END_TEST

static lv_params *fc(const char *name, int64_t in, int64_t out) {
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate("FCLayer", &p));
  EXPECT_OK(lv_params_set_string(p, "name", name));
  EXPECT_OK(lv_params_set_int(p, "input_dim", in));
  EXPECT_OK(lv_params_set_int(p, "output_dim", out));
  lv_params_freeze(p);
  return p;
}

/* A layer made by cls through the generic interface computes what the typed entry point
 * computes, under the same variable names. */
START_TEST(test_layer_interface) {
  lv_tasks_register_all();
  lv_varstore *vs = lv_varstore_create();
  lv_params *p = fc("fc", 3, 2);
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(p, "m", vs, &l));
  ck_assert_str_eq(l->cls->cls, "FCLayer");
  ck_assert_str_eq(l->scope, "m/fc");
  EXPECT_OK(lv_varstore_finalize(vs, 7));
  ck_assert_ptr_nonnull(lv_varstore_find(vs, "m/fc/w/var"));
  ck_assert_ptr_nonnull(lv_varstore_find(vs, "m/fc/b/var"));
  lv_shape os;
  ck_assert(l->cls->out_shape(l, lv_shape2(5, 3), &os));
  ck_assert_int_eq(os.d[1], 2);
  ck_assert(!l->cls->out_shape(l, lv_shape2(5, 4), &os));
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *x = lv_graph_tensor(g, LV_F32, lv_shape2(5, 3));
  for (int i = 0; i < 15; i++) lv_f32(x)[i] = (float)(i % 7) - 3.0f;
  lv_tensor *y1 = lv_layer_fprop_act(l, g, x);
  lv_tensor *y2 = lv_projection_layer_fprop((lv_projection_layer *)l, g, x);
  ck_assert_ptr_nonnull(y1);
  ck_assert_ptr_nonnull(y2);
  ck_assert_mem_eq(y1->data, y2->data, 10 * sizeof(float));
  /* A missing input is a graph error naming the layer and the key. */
  lv_nmap in, out;
  lv_nmap_init(&in);
  lv_nmap_init(&out);
  ck_assert(lv_nmap_set(&in, "paddings", x) == NULL);
  ck_assert(!lv_layer_fprop(l, g, &in, &out));
  lv_status s = lv_graph_status(g);
  EXPECT_ERR(s, LV_ERR_INVALID, "m/fc", "`act`", "paddings");
  lv_nmap_free(&in);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  /* An unknown class names the known ones. */
  lv_params *q = fc("fc2", 3, 2);
  lv_params *r = lv_params_copy(q);
  EXPECT_OK(lv_params_set_string(r, "cls", "FancyLayer"));
  EXPECT_ERR(lv_layer_create(r, "m", vs, &l), LV_ERR_INVALID, "m/fc2.cls", "FancyLayer", "ConvLayer");
  lv_params_free(q);
  lv_params_free(r);
  lv_varstore_destroy(vs);
}
END_TEST

/* Batch norm's moving statistics change only when the step is applied: not in fprop,
 * not on a reset (a skipped step), and by the moving average when applied. */
START_TEST(test_batch_norm_updates_after_step) {
  lv_tasks_register_all();
  lv_varstore *vs = lv_varstore_create();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate("BatchNormLayer", &p));
  EXPECT_OK(lv_params_set_string(p, "name", "bn"));
  EXPECT_OK(lv_params_set_int(p, "dim", 2));
  EXPECT_OK(lv_params_set_float(p, "decay", 0.75));
  lv_params_freeze(p);
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(p, "m", vs, &l));
  EXPECT_OK(lv_varstore_finalize(vs, 3));
  lv_var *mm = lv_varstore_find(vs, "m/bn/moving_mean/var");
  ck_assert_ptr_nonnull(mm);
  float before[2], after[2];
  EXPECT_OK(lv_tensor_to_host(&mm->value, before));
  lv_graph *g = lv_graph_create(0);
  for (int apply = 0; apply < 2; apply++) {
    lv_graph_reset(g);
    lv_graph_set_training(g, true);
    lv_tensor *x = lv_graph_tensor(g, LV_F32, lv_shape2(2, 2));
    const float xv[4] = {1, 10, 3, 30}; /* batch means 2 and 20 */
    EXPECT_OK(lv_tensor_from_host(x, xv));
    ck_assert_ptr_nonnull(lv_layer_fprop_act(l, g, x));
    ck_assert_int_eq(lv_graph_num_updates(g), 2);
    EXPECT_OK(lv_tensor_to_host(&mm->value, after));
    ck_assert_mem_eq(before, after, sizeof before); /* fprop alone changes nothing */
    if (apply) EXPECT_OK(lv_graph_apply_updates(g));
  }
  EXPECT_OK(lv_tensor_to_host(&mm->value, after));
  ck_assert(fabs(after[0] - (0.75 * before[0] + 0.25 * 2)) < 1e-6);
  ck_assert(fabs(after[1] - (0.75 * before[1] + 0.25 * 20)) < 1e-6);
  ck_assert_int_eq(lv_graph_num_updates(g), 0);
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

/* A stack of layers composed from params text by cls (what an experiment file or an
 * override says), with no C code naming the children. */
START_TEST(test_sequential_from_text) {
  lv_tasks_register_all();
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate("SequentialLayer", &p));
  EXPECT_OK(lv_params_from_text(p,
                                "name : 'enc'\n"
                                "sub[0].cls : 'FCLayer'\nsub[0].name : 'fc0'\nsub[0].input_dim : 3\n"
                                "sub[0].output_dim : 5\n"
                                "sub[1].cls : 'ProjectionLayer'\nsub[1].name : 'proj'\nsub[1].input_dim : 5\n"
                                "sub[1].output_dim : 2\n",
                                "test"));
  lv_params_freeze(p);
  lv_varstore *vs = lv_varstore_create();
  lv_layer *l = NULL;
  EXPECT_OK(lv_layer_create(p, "m", vs, &l));
  EXPECT_OK(lv_varstore_finalize(vs, 5));
  ck_assert_ptr_nonnull(lv_varstore_find(vs, "m/enc/fc0/w/var"));
  ck_assert_ptr_nonnull(lv_varstore_find(vs, "m/enc/fc0/b/var"));
  ck_assert_ptr_nonnull(lv_varstore_find(vs, "m/enc/proj/w/var"));
  ck_assert_ptr_null(lv_varstore_find(vs, "m/enc/proj/b/var")); /* ProjectionLayer: no bias */
  lv_shape os;
  ck_assert(l->cls->out_shape(l, lv_shape2(4, 3), &os));
  ck_assert_int_eq(os.d[1], 2);
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *x = lv_graph_tensor(g, LV_F32, lv_shape2(4, 3));
  for (int i = 0; i < 12; i++) lv_f32(x)[i] = 0.25f * (float)i - 1.0f;
  lv_tensor *y = lv_layer_fprop_act(l, g, x);
  ck_assert_ptr_nonnull(y);
  ck_assert_int_eq(y->shape.d[0], 4);
  ck_assert_int_eq(y->shape.d[1], 2);
  /* The same as running the children one after the other. */
  lv_sequential_layer *sl = (lv_sequential_layer *)l;
  lv_tensor *z = lv_layer_fprop_act(sl->sub[1], g, lv_layer_fprop_act(sl->sub[0], g, x));
  ck_assert_mem_eq(y->data, z->data, 8 * sizeof(float));
  lv_graph_destroy(g);
  lv_layer_free(l);
  lv_params_free(p);
  /* A bad child is named by its index. */
  EXPECT_OK(lv_registry_instantiate("SequentialLayer", &p));
  EXPECT_OK(lv_params_from_text(p, "name : 'enc'\nsub[0].cls : 'FCLayer'\nsub[0].name : ''\n", "test"));
  lv_params_freeze(p);
  EXPECT_ERR(lv_layer_create(p, "m", vs, &l), LV_ERR_INVALID, "m/enc: sub[0]", "empty name");
  lv_params_free(p);
  lv_varstore_destroy(vs);
}
END_TEST

/* A toy decoding task: the hypothesis of example i is the argmax of its "logits" row,
 * the reference its "label"; both are written as words ("w3") for BLEU. */
static lv_status toy_decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *dec_out) {
  (void)t;
  lv_tensor *logits = lv_graph_from_host(g, lv_batch_get(b, "logits"));
  lv_tensor *hyp = logits ? lv_op_argmax(g, logits) : NULL;
  if (!hyp) return lv_graph_status(g);
  LV_TRY(lv_decode_out_set(dec_out, "hyp", hyp));
  return lv_decode_out_set(dec_out, "ref", lv_batch_get(b, "label"));
}

static lv_status toy_post(lv_task *t, const lv_decode_out *dec_out, lv_metric_set *ms, lv_kv_list *out) {
  (void)t;
  lv_tensor *hyp = lv_decode_out_get(dec_out, "hyp"), *ref = lv_decode_out_get(dec_out, "ref");
  int64_t n = lv_tensor_numel(hyp);
  int32_t h[16], r[16];
  LV_TRY(lv_tensor_to_host(hyp, h));
  LV_TRY(lv_tensor_to_host(ref, r));
  for (int64_t i = 0; i < n; i++) {
    char key[32], hs[16], rs[16], line[64];
    snprintf(key, sizeof key, "ex%lld", (long long)i);
    snprintf(hs, sizeof hs, "w%d", h[i]);
    snprintf(rs, sizeof rs, "w%d", r[i]);
    LV_TRY(lv_metric_average_update(lv_metric_set_get(ms, "accuracy"), h[i] == r[i], 1.0));
    LV_TRY(lv_metric_bleu_update(lv_metric_set_get(ms, "corpus_bleu"), rs, hs));
    snprintf(line, sizeof line, "ref=%s hyp=%s", rs, hs);
    LV_TRY(lv_kv_list_add(out, key, line));
  }
  return NULL;
}

static lv_status toy_metrics(lv_task *t, lv_metric_set *ms) {
  (void)t;
  LV_TRY(lv_metric_set_add(ms, "accuracy", lv_metric_average_new()));
  return lv_metric_set_add(ms, "corpus_bleu", lv_metric_corpus_bleu_new(LV_BLEU_SEP_NONE));
}

START_TEST(test_task_decode_path) {
  const lv_task_class toy = {.cls = "toy.Decoder",
                             .create_decoder_metrics = toy_metrics,
                             .decode = toy_decode,
                             .post_process_decode_out = toy_post};
  lv_task task = {.cls = &toy};
  lv_metric_set *ms = lv_metric_set_new();
  EXPECT_OK(toy.create_decoder_metrics(&task, ms));
  float logits[4 * 3] = {0, 5, 1, /* 1 */ 9, 0, 0, /* 0 */ 0, 0, 2, /* 2 */ 1, 3, 0 /* 1 */};
  int32_t labels[4] = {1, 0, 2, 2};
  lv_tensor tl = lv_tensor_view(LV_F32, lv_shape2(4, 3), logits), tr = lv_tensor_view(LV_I32, lv_shape1(4), labels);
  lv_batch b;
  lv_batch_init(&b);
  EXPECT_OK(lv_nmap_set(&b.map, "logits", &tl));
  EXPECT_OK(lv_nmap_set(&b.map, "label", &tr));
  b.size = 4;
  lv_graph *g = lv_graph_create(0);
  lv_kv_list kv = {0};
  EXPECT_OK(lv_task_decode_batch(&task, g, &b, ms, &kv));
  ck_assert_int_eq(kv.n, 4);
  ck_assert_str_eq(kv.key[3], "ex3");
  ck_assert_str_eq(kv.value[3], "ref=w2 hyp=w1");
  double acc, bleu;
  EXPECT_OK(lv_metric_value(lv_metric_set_get(ms, "accuracy"), &acc));
  ck_assert(fabs(acc - 0.75) < 1e-12);
  EXPECT_OK(lv_metric_value(lv_metric_set_get(ms, "corpus_bleu"), &bleu));
  ck_assert(bleu >= 0 && bleu < 1); /* one wrong unigram of four: not a perfect score */
  /* A task with no decode path says so. */
  const lv_task_class plain = {.cls = "toy.Plain"};
  lv_task pt = {.cls = &plain};
  EXPECT_ERR(lv_task_decode_batch(&pt, g, &b, ms, &kv), LV_ERR_INVALID, "toy.Plain", "no decode path");
  lv_kv_list_free(&kv);
  lv_graph_destroy(g);
  lv_batch_free(&b);
  lv_metric_set_free(ms);
}
END_TEST

int main(void) {
  Suite *s = suite_create("interfaces");
  TCase *tc = tcase_create("interfaces");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_nmap);
  tcase_add_test(tc, test_train_batches_depend_only_on_step);
  tcase_add_test(tc, test_train_sharding);
  tcase_add_test(tc, test_eval_pass_and_sharding);
  tcase_add_test(tc, test_input_errors);
  tcase_add_test(tc, test_layer_interface);
  tcase_add_test(tc, test_batch_norm_updates_after_step);
  tcase_add_test(tc, test_sequential_from_text);
  tcase_add_test(tc, test_task_decode_path);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
