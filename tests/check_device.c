/* Devices without a GPU: the guarded backend (kernels/guarded.h) registers cpu:1, whose
 * memory faults when touched outside its own kernels. On it the real LeNet5 code paths
 * run: a training step (task, backward, learner as the trainer drives them), an eval
 * step with metrics and predictions, a checkpoint save and restore. Every result must
 * equal cpu:0's bit for bit (same kernels), and a deliberate host read must fault. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_util.h"
#include "core/graph.h"
#include "core/ops.h"
#include "io/bundle.h"
#include "kernels/guarded.h"
#include "models/model.h"
#include "optim/optim_params.h"
#include "runners/instance.h"
#include "vars_util.h"

enum { N_EXAMPLES = 64, BATCH = 32 };

static char g_dir[256];
static const lv_backend *g_guard;

static void setup(void) {
  lv_test_mkdtemp(g_dir, sizeof g_dir, "lv_check_device");
  g_guard = lv_guarded_backend_create(1);
  ck_assert_ptr_nonnull(g_guard);
}

static void teardown(void) {
  ck_assert_int_eq(lv_guarded_allocations(g_guard), 0);
  lv_guarded_backend_destroy(g_guard);
  lv_test_rmtree(g_dir);
}

/* A small Fashion-MNIST-shaped dataset checkpoint (keras2ckpt's layout). */
static void write_dataset(const char *prefix) {
  static uint8_t x[N_EXAMPLES * 28 * 28], y[N_EXAMPLES];
  for (int i = 0; i < N_EXAMPLES; i++) {
    y[i] = (uint8_t)(i % 10);
    for (int p = 0; p < 28 * 28; p++) x[i * 28 * 28 + p] = (uint8_t)((p * (y[i] + 3) + i) % 251);
  }
  lv_bundle_writer *w;
  EXPECT_OK(lv_bundle_writer_open(prefix, &w));
  lv_shape xs = lv_shape3(N_EXAMPLES, 28, 28), ys = lv_shape1(N_EXAMPLES);
  const char *names[4] = {"x_train", "y_train", "x_test", "y_test"};
  for (int k = 0; k < 4; k++) EXPECT_OK(lv_bundle_writer_add(w, names[k], LV_U8, k % 2 ? &ys : &xs, k % 2 ? (void *)y : (void *)x));
  EXPECT_OK(lv_bundle_writer_finish(w));
}

static lv_params *lenet5_params(void) {
  char data[300], logdir[300], override[1024];
  snprintf(data, sizeof data, "%s/mnist", g_dir);
  snprintf(logdir, sizeof logdir, "%s/log", g_dir);
  write_dataset(data);
  snprintf(override, sizeof override,
           "input.ckpt: \"%s\"; input.num_samples: %d; input.batch_size: %d; cluster.num_threads: 1", data,
           N_EXAMPLES, BATCH);
  lv_model_options o;
  lv_model_options_init(&o);
  o.model = "image.mnist.LeNet5";
  o.dataset = "Train";
  o.experiments_dir = "experiments";
  o.logdir = logdir;
  o.params_override = override;
  lv_params *p = NULL;
  EXPECT_OK(lv_model_params_build(&o, &p));
  return p;
}

/* What one device computed. */
typedef struct run {
  double train_loss, eval_loss, eval_acc;
  int32_t pred[BATCH];
  float *vars; /* every float variable after the step, in store order, host copy */
  int64_t nvars;
} run;

/* One training step (as lv_trainer_run drives it), one eval step, save, restore. */
static void run_on(lv_device dev, const lv_params *cfg, run *r) {
  bool guarded = !lv_device_is_host(dev);
  lv_instance *m = NULL;
  EXPECT_OK(lv_instance_create_on(cfg, dev, true, lv_input_no_shard(), &m));
  int nv = lv_varstore_count(m->vs);
  lv_var **vars = calloc((size_t)nv, sizeof *vars);
  for (int i = 0; i < nv; i++) vars[i] = lv_varstore_get(m->vs, i);
  lv_learner *learner = NULL;
  EXPECT_OK(lv_learner_from_params(lv_params_sub(cfg, "task.train"), 1, m->backend, vars, nv, &learner));
  free(vars);

  int64_t step = lv_instance_step(m);
  ck_assert_int_eq(step, 0);
  lv_batch b;
  lv_batch_init(&b);
  EXPECT_OK(lv_input_train_batch(m->input, step, &b));
  lv_metrics mt;
  lv_metrics_init(&mt);
  lv_varstore_zero_grads(m->vs);
  EXPECT_OK(lv_instance_fprop(m, &b, true, step, &mt));
  EXPECT_OK(lv_graph_backward(m->graph, mt.loss));
  r->train_loss = lv_metrics_value(&mt, 0);
  /* The learner's update runs as the device's kernels: the guard stays closed. */
  lv_learner_stats st;
  EXPECT_OK(lv_learner_step(learner, step, &st));
  ck_assert(!st.skipped);
  step++;
  EXPECT_OK(lv_tensor_from_host(&m->global_step->value, &step));
  ck_assert_int_eq(lv_instance_step(m), 1);

  EXPECT_OK(lv_input_reset(m->input));
  bool done = true;
  EXPECT_OK(lv_input_next_eval(m->input, &b, &done));
  ck_assert(!done);
  EXPECT_OK(lv_instance_fprop(m, &b, false, step, &mt));
  r->eval_loss = lv_metrics_value(&mt, 0);
  for (int i = 0; i < mt.n; i++)
    if (!strcmp(mt.name[i], "accuracy")) r->eval_acc = lv_metrics_value(&mt, i);
  lv_tensor *pred = lv_nmap_get(&mt.per_example, "predictions");
  ck_assert_ptr_nonnull(pred);
  ck_assert_int_eq(lv_tensor_numel(pred), BATCH);
  EXPECT_OK(lv_tensor_to_host(pred, r->pred));
  lv_metrics_free(&mt);
  lv_batch_free(&b);
  r->vars = host_vars(m->vs, &r->nvars);

  /* Save from this device, restore into a fresh instance on it: same variables. */
  char train_dir[300];
  snprintf(train_dir, sizeof train_dir, "%s/%s", g_dir, guarded ? "guarded" : "host");
  lv_checkpointer *ck = NULL;
  EXPECT_OK(lv_checkpointer_create(train_dir, lv_params_sub(cfg, "train"), false, &ck));
  int ni = 0;
  lv_saveable *items = lv_instance_saveables(m, &ni);
  EXPECT_OK(lv_checkpointer_save(ck, step, items, ni, NULL));
  EXPECT_OK(lv_checkpointer_destroy(ck));
  free(items);
  lv_instance *m2 = NULL;
  EXPECT_OK(lv_instance_create_on(cfg, dev, false, lv_input_no_shard(), &m2));
  items = lv_instance_saveables(m2, &ni);
  char prefix[400];
  snprintf(prefix, sizeof prefix, "%s/ckpt-00000001", train_dir);
  EXPECT_OK(lv_checkpoint_restore(prefix, items, ni));
  free(items);
  ck_assert_int_eq(lv_instance_step(m2), 1);
  int64_t n2;
  float *restored = host_vars(m2->vs, &n2);
  ck_assert_int_eq(n2, r->nvars);
  ck_assert(memcmp(restored, r->vars, sizeof(float) * (size_t)n2) == 0);
  free(restored);
  lv_instance_destroy(m2);
  lv_learner_free(learner);
  lv_instance_destroy(m);
}

START_TEST(lenet5_train_eval_checkpoint_on_guarded_device) {
  lv_params *cfg = lenet5_params();
  run host = {0}, dev = {0};
  run_on(lv_device_host(), cfg, &host);
  run_on(g_guard->device, cfg, &dev);
  ck_assert(host.train_loss > 0.5 && host.train_loss < 10);
  ck_assert(memcmp(&host.train_loss, &dev.train_loss, sizeof(double)) == 0);
  ck_assert(memcmp(&host.eval_loss, &dev.eval_loss, sizeof(double)) == 0);
  ck_assert(memcmp(&host.eval_acc, &dev.eval_acc, sizeof(double)) == 0);
  ck_assert(memcmp(host.pred, dev.pred, sizeof host.pred) == 0);
  ck_assert_int_eq(host.nvars, dev.nvars);
  ck_assert(memcmp(host.vars, dev.vars, sizeof(float) * (size_t)host.nvars) == 0);
  free(host.vars);
  free(dev.vars);
  lv_params_free(cfg);
}
END_TEST

static void on_segv(int sig) {
  (void)sig;
  _exit(42);
}

/* 0: the child read device memory without faulting; 1: it faulted. */
static int host_read_faults(const lv_tensor *t) {
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    volatile float v = lv_f32(t)[0];
    (void)v;
    _exit(0);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  ck_assert_msg((WIFEXITED(status) && WEXITSTATUS(status) == 42) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV),
                "child ended oddly: status %d", status);
  return 1;
}

START_TEST(guarded_memory_faults_outside_kernels) {
  lv_tensor *t = lv_tensor_new_on(g_guard->device, LV_F32, lv_shape1(4));
  ck_assert_ptr_nonnull(t);
  ck_assert(lv_device_eq(t->device, g_guard->device));
  ck_assert_int_eq(host_read_faults(t), 1);
  /* Through the backend it is ordinary memory. */
  float in[4] = {1, 2, 3, 4}, out[4];
  EXPECT_OK(lv_tensor_from_host(t, in));
  EXPECT_OK(lv_tensor_to_host(t, out));
  ck_assert(memcmp(in, out, sizeof in) == 0);
  /* Opened on purpose, the same read works: the fault above was the guard. */
  lv_guarded_set_open(g_guard, true);
  ck_assert_int_eq(host_read_faults(t), 0);
  lv_guarded_set_open(g_guard, false);
  lv_tensor_free(t);
  /* A host tensor is not guarded. */
  lv_tensor *h = lv_tensor_new(LV_F32, lv_shape1(4));
  ck_assert_int_eq(host_read_faults(h), 0);
  lv_tensor_free(h);
}
END_TEST

START_TEST(graph_on_device_item_and_kernel_errors) {
  lv_graph *g = lv_graph_create_on(g_guard->device, 0);
  ck_assert_ptr_nonnull(g);
  ck_assert(lv_device_eq(lv_graph_device(g), g_guard->device));
  float xv[6] = {1, 2, 3, 4, 5, 6};
  lv_tensor hx = lv_tensor_view(LV_F32, lv_shape2(2, 3), xv);
  lv_tensor *x = lv_graph_from_host(g, &hx);
  ck_assert_ptr_nonnull(x);
  ck_assert(x->data != hx.data);
  double v;
  EXPECT_OK(lv_tensor_item(lv_op_reduce_sum(g, x, LV_ALL_AXES, false), &v));
  ck_assert(v == 21.0);
  EXPECT_OK(lv_tensor_item(lv_op_maximum_scalar(g, lv_graph_fill(g, lv_shape0(), -3.0f), 0.5f), &v));
  ck_assert(v == 0.5);
  /* A host tensor given to a device graph's op is an error naming both devices. */
  ck_assert_ptr_null(lv_op_add(g, x, &hx));
  lv_status st = lv_graph_status(g);
  ck_assert_str_eq(lv_status_msg(st), "add: inputs on different devices: input 0 on cpu:1, input 1 on cpu:0");
  lv_status_free(st);
  lv_graph_reset(g);
  /* Bad ids found inside the device's kernels: today's messages, from the error flag. */
  int32_t bad[2] = {1, 7};
  lv_tensor hid = lv_tensor_view(LV_I32, lv_shape1(2), bad);
  x = lv_graph_from_host(g, &hx);
  ck_assert_ptr_null(lv_op_sparse_softmax_xent(g, x, lv_graph_from_host(g, &hid)));
  st = lv_graph_status(g);
  ck_assert_str_eq(lv_status_msg(st), "sparse_softmax_xent: class id 7 at position 1 is outside [0, 3) (logits [2,3])");
  lv_status_free(st);
  lv_graph_reset(g);
  lv_tensor *table = lv_graph_from_host(g, &hx);
  ck_assert_ptr_null(lv_op_gather(g, table, lv_graph_from_host(g, &hid)));
  st = lv_graph_status(g);
  ck_assert_str_eq(lv_status_msg(st), "gather: id 7 at position 1 is outside [0, 2) (table [2,3])");
  lv_status_free(st);
  lv_graph_destroy(g);
}
END_TEST

/* ---- sequence ops on the guarded device ---------------------------------------- */

/* One input of an op run on both devices. */
typedef struct dev_in {
  lv_dtype dtype;
  lv_shape shape;
  const void *data;
  bool grad; /* backpropagate into it */
} dev_in;
typedef lv_tensor *(*dev_fn)(lv_graph *g, lv_tensor **in, const void *ctx);

/* Runs f on dev with inputs brought from the host, then (backward) loss = sum(out * w)
 * for a fixed w and its backward. Returns the output's bytes (*nbytes) and fills grads[i]
 * for the inputs with grad set; all host copies (caller frees). */
static void *dev_run(lv_device dev, int n, const dev_in *in, dev_fn f, const void *ctx, bool backward,
                     size_t *nbytes, void **grads) {
  lv_graph *g = lv_graph_create_on(dev, 0);
  ck_assert_ptr_nonnull(g);
  lv_tensor *t[8];
  for (int i = 0; i < n; i++) {
    lv_tensor h = lv_tensor_view(in[i].dtype, in[i].shape, (void *)in[i].data);
    t[i] = lv_graph_from_host(g, &h);
    ck_assert_ptr_nonnull(t[i]);
    t[i]->requires_grad = backward && in[i].grad;
  }
  lv_tensor *out = f(g, t, ctx);
  EXPECT_OK(lv_graph_status(g));
  *nbytes = lv_tensor_nbytes(out);
  void *res = malloc(*nbytes ? *nbytes : 1);
  EXPECT_OK(lv_tensor_to_host(out, res));
  if (backward) {
    int64_t m = lv_tensor_numel(out);
    float *wv = malloc(sizeof(float) * (size_t)(m ? m : 1));
    for (int64_t i = 0; i < m; i++) wv[i] = 0.5f + 0.25f * (float)((i * 7919) % 13);
    lv_tensor hw = lv_tensor_view(LV_F32, out->shape, wv);
    lv_tensor *loss = lv_op_reduce_sum(g, lv_op_mul(g, out, lv_graph_from_host(g, &hw)), LV_ALL_AXES, false);
    EXPECT_OK(lv_graph_backward(g, loss));
    for (int i = 0; i < n; i++) {
      if (!in[i].grad) continue;
      ck_assert_msg(t[i]->grad != NULL, "input %d got no gradient", i);
      grads[i] = malloc(lv_tensor_nbytes(t[i]->grad) + 1);
      EXPECT_OK(lv_tensor_to_host(t[i]->grad, grads[i]));
    }
    free(wv);
  }
  lv_graph_destroy(g);
  return res;
}

/* The op on cpu:0 and on cpu:1: the same bits, forward and gradients. */
static void same_on_device(const char *name, int n, const dev_in *in, dev_fn f, const void *ctx, bool backward) {
  size_t nh, nd;
  void *gh[8] = {0}, *gd[8] = {0};
  void *h = dev_run(lv_device_host(), n, in, f, ctx, backward, &nh, gh);
  void *d = dev_run(g_guard->device, n, in, f, ctx, backward, &nd, gd);
  ck_assert_int_eq(nh, nd);
  ck_assert_msg(memcmp(h, d, nh) == 0, "%s: outputs differ between cpu:0 and cpu:1", name);
  for (int i = 0; i < n; i++) {
    if (!gh[i]) continue;
    size_t bytes = (size_t)lv_shape_numel(&in[i].shape) * sizeof(float);
    ck_assert_msg(memcmp(gh[i], gd[i], bytes) == 0, "%s: gradient %d differs between cpu:0 and cpu:1", name, i);
    free(gh[i]);
    free(gd[i]);
  }
  free(h);
  free(d);
}

static float *dev_floats(int64_t n, uint32_t seed, float lo, float hi) {
  float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = lo + (hi - lo) * (float)(s >> 8) / 16777216.0f;
  }
  return x;
}

static lv_tensor *d_lstm(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  lv_tensor *co, *mo;
  if (!lv_op_lstm_step(g, in[0], in[1], in[2], in[3], 1.0f, 0.8f, true, &co, &mo)) return NULL;
  lv_tensor *both[2] = {co, mo};
  return lv_op_concat(g, both, 2, 1);
}

static lv_tensor *d_minmax(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_add(g, lv_op_maximum(g, in[0], in[1]), lv_op_minimum(g, in[0], in[1]));
}
static lv_tensor *d_select_clip(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  lv_tensor *cmp = lv_op_compare(g, in[0], in[1], LV_CMP_GT);
  return lv_op_clip(g, lv_op_select(g, cmp, in[0], in[1]), -0.3f, 0.6f);
}
static lv_tensor *d_msm(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_masked_softmax(g, in[0], in[1]);
}
static lv_tensor *d_ln1(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_layer_norm_plus1(g, in[0], in[1], in[2], 1e-6f);
}

/* Inputs x, paddings, gamma, beta, moving mean, moving variance; *c: training. */
static lv_tensor *d_bn(lv_graph *g, lv_tensor **in, const void *c) {
  const bool training = *(const bool *)c;
  return lv_op_batch_norm(g, in[0], in[1], in[2], in[3], 1e-3f, true, training, in[4], in[5], 0.9);
}

static lv_tensor *d_bmm(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_batch_matmul(g, in[0], in[1], false, true);
}

static lv_tensor *d_rev(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_reverse_sequence(g, in[0], in[1]);
}
/* top_k's values and its indices (as floats) side by side. */
static lv_tensor *d_topk(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  lv_tensor *v, *ix;
  if (!lv_op_top_k(g, in[0], 4, &v, &ix)) return NULL;
  lv_tensor *both[2] = {v, lv_op_cast(g, ix, LV_F32)};
  return lv_op_concat(g, both, 2, 1);
}

static lv_tensor *d_sxent(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_smoothed_xent(g, in[0], in[1], in[2], 0.1f);
}

static lv_tensor *d_gather(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  return lv_op_gather(g, in[0], in[1]);
}

static lv_tensor *d_pxent(lv_graph *g, lv_tensor **in, const void *c) {
  (void)c;
  lv_tensor *am;
  lv_tensor *l = lv_op_projected_smoothed_xent(g, in[0], in[1], in[2], in[3], in[4], 0.1f, 3, &am);
  lv_tensor *both[2] = {l, lv_op_cast(g, am, LV_F32)};
  return lv_op_concat(g, both, 2, 0);
}

START_TEST(seq_ops_on_guarded_device) {
  /* lstm_step */
  {
    float *gates = dev_floats(4 * 24, 1, -2, 2), *c0 = dev_floats(4 * 6, 2, -1, 1), *m0 = dev_floats(4 * 6, 3, -1, 1);
    float pad[4] = {0, 1, 0, 0};
    dev_in in[4] = {{LV_F32, lv_shape2(4, 24), gates, true}, {LV_F32, lv_shape2(4, 6), c0, true},
                    {LV_F32, lv_shape2(4, 6), m0, true}, {LV_F32, lv_shape2(4, 1), pad, false}};
    same_on_device("lstm_step", 4, in, d_lstm, NULL, true);
    free(gates);
    free(c0);
    free(m0);
  }
  /* maximum / minimum, compare / select / clip, masked softmax, layer_norm_plus1 */
  {
    float *a = dev_floats(3 * 8, 4, -1, 1), *b = dev_floats(8, 5, -1, 1);
    float pad[3 * 8] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    dev_in in[2] = {{LV_F32, lv_shape2(3, 8), a, true}, {LV_F32, lv_shape1(8), b, true}};
    same_on_device("maximum/minimum", 2, in, d_minmax, NULL, true);
    same_on_device("compare/select/clip", 2, in, d_select_clip, NULL, true);
    dev_in ms[2] = {{LV_F32, lv_shape3(3, 1, 8), a, true}, {LV_F32, lv_shape3(3, 1, 8), pad, false}};
    same_on_device("masked_softmax", 2, ms, d_msm, NULL, true);
    dev_in ln[3] = {{LV_F32, lv_shape2(3, 8), a, true}, {LV_F32, lv_shape1(8), b, true}, {LV_F32, lv_shape1(8), b, true}};
    same_on_device("layer_norm_plus1", 3, ln, d_ln1, NULL, true);
    free(a);
    free(b);
  }
  /* batch_norm with paddings, training (batch moments, several row blocks) and eval */
  {
    float *x = dev_floats(1500 * 16, 14, -1, 3), *gb = dev_floats(2 * 16, 15, -0.5f, 0.5f), pad[1500];
    float mm[16], mv[16];
    for (int i = 0; i < 1500; i++) pad[i] = i % 5 == 2;
    for (int j = 0; j < 16; j++) mm[j] = 0.1f * (float)j, mv[j] = 0.5f + 0.1f * (float)j;
    dev_in in[6] = {{LV_F32, lv_shape2(1500, 16), x, true}, {LV_F32, lv_shape1(1500), pad, false},
                    {LV_F32, lv_shape1(16), gb, true},      {LV_F32, lv_shape1(16), gb + 16, true},
                    {LV_F32, lv_shape1(16), mm, false},     {LV_F32, lv_shape1(16), mv, false}};
    const bool training = true, eval = false;
    same_on_device("batch_norm (training)", 6, in, d_bn, &training, true);
    same_on_device("batch_norm (moving statistics)", 6, in, d_bn, &eval, true);
    free(x);
    free(gb);
  }
  /* batch_matmul [B, N, T, H] x [B, N, S, H]^T */
  {
    float *q = dev_floats(2 * 3 * 4 * 5, 6, -1, 1), *k = dev_floats(2 * 3 * 6 * 5, 7, -1, 1);
    dev_in in[2] = {{LV_F32, lv_shape4(2, 3, 4, 5), q, true}, {LV_F32, lv_shape4(2, 3, 6, 5), k, true}};
    same_on_device("batch_matmul", 2, in, d_bmm, NULL, true);
    free(q);
    free(k);
  }
  /* reverse_sequence, top_k */
  {
    float *x = dev_floats(5 * 3 * 4, 8, -1, 1);
    float pad[15] = {0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1};
    dev_in in[2] = {{LV_F32, lv_shape3(5, 3, 4), x, true}, {LV_F32, lv_shape3(5, 3, 1), pad, false}};
    same_on_device("reverse_sequence", 2, in, d_rev, NULL, true);
    dev_in tk[1] = {{LV_F32, lv_shape2(3, 20), x, false}};
    same_on_device("top_k", 1, tk, d_topk, NULL, false);
    free(x);
  }
  /* smoothed_xent; a bad id is reported from the device's kernel */
  {
    float *x = dev_floats(4 * 9, 9, -2, 2), w[4] = {1, 0.5f, 2, 0};
    int32_t ids[4] = {0, 8, 3, 3};
    dev_in in[3] = {{LV_F32, lv_shape2(4, 9), x, true}, {LV_I32, lv_shape1(4), ids, false}, {LV_F32, lv_shape1(4), w, false}};
    same_on_device("smoothed_xent", 3, in, d_sxent, NULL, true);
    lv_graph *g = lv_graph_create_on(g_guard->device, 0);
    ids[2] = 9;
    lv_tensor hx = lv_tensor_view(LV_F32, lv_shape2(4, 9), x), hi = lv_tensor_view(LV_I32, lv_shape1(4), ids);
    ck_assert_ptr_null(lv_op_smoothed_xent(g, lv_graph_from_host(g, &hx), lv_graph_from_host(g, &hi), NULL, 0.1f));
    lv_status st = lv_graph_status(g);
    ck_assert_str_eq(lv_status_msg(st), "smoothed_xent: class id 9 at position 2 is outside [0, 9) (logits [4,9])");
    lv_status_free(st);
    lv_graph_destroy(g);
    free(x);
  }
  /* gather and its scatter-add gradient */
  {
    float *t = dev_floats(6 * 5, 10, -1, 1);
    int32_t ids[8] = {1, 4, 1, 0, 5, 1, 4, 2};
    dev_in in[2] = {{LV_F32, lv_shape2(6, 5), t, true}, {LV_I32, lv_shape2(2, 4), ids, false}};
    same_on_device("gather", 2, in, d_gather, NULL, true);
    free(t);
  }
  /* projected_smoothed_xent (chunk 3 of 8 classes) with its argmax */
  {
    float *x = dev_floats(5 * 4, 11, -1, 1), *w = dev_floats(4 * 8, 12, -1, 1), *b = dev_floats(8, 13, -1, 1);
    float wt[5] = {1, 2, 0.5f, 1, 0};
    int32_t ids[5] = {7, 0, 3, 3, 5};
    dev_in in[5] = {{LV_F32, lv_shape2(5, 4), x, true}, {LV_F32, lv_shape2(4, 8), w, true}, {LV_F32, lv_shape1(8), b, true},
                    {LV_I32, lv_shape1(5), ids, false}, {LV_F32, lv_shape1(5), wt, false}};
    same_on_device("projected_smoothed_xent", 5, in, d_pxent, NULL, true);
    free(x);
    free(w);
    free(b);
  }
}
END_TEST

int main(void) {
  lv_tasks_register_all();
  Suite *s = suite_create("device");
  TCase *tc = tcase_create("guarded");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, guarded_memory_faults_outside_kernels);
  tcase_add_test(tc, graph_on_device_item_and_kernel_errors);
  tcase_add_test(tc, lenet5_train_eval_checkpoint_on_guarded_device);
  tcase_add_test(tc, seq_ops_on_guarded_device);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
