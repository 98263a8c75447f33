/* The lingvoc side of bench/bench_mt.sh: mt.model.TransformerModel built from the
 * experiment mt.bible_en_es.TransformerSmall exactly as the runners build it
 * (lv_model_params_build + lv_instance_create + the task.train learner), on a fixed
 * synthetic batch, timing
 *   train:  full training steps as src/runners/trainer.c runs them (fprop with the
 *           configured dropout, label-smoothed loss, backward, the learner's Adam update
 *           with TransformerSchedule, deferred updates);
 *   greedy: lv_greedy_search_decode over the KV-cached decoder (lv_mt_decode_step, rows
 *           continuing themselves: no cache reorder), encoder included;
 *   beam:   lv_beam_search_decode with num_hyps_per_beam H over the same decoder, the
 *           experiment's other beam_search params, caches reordered by parent each step.
 * Both searches run exactly `steps` steps: </s> is masked out of the log-probs before
 * the last step (PyTorch's greedy side does the same), so no row stops early; the beam's
 * last step forces </s> (force_eos_in_last_step) so every hyp has `steps` tokens, which
 * is checked.
 * Variables are the experiment's fresh initialization (random seed of the experiment).
 * Training times the steps after two warm-up steps (both sides): lingvoc's step arena
 * grows block by block in the first step and is remade as one block at the next reset,
 * whose pages the second step faults in once (a one-time cost of a training run, about
 * 0.2 s here, not a per-step one).
 *
 * Usage: mt_bench threads train_steps batch src_len tgt_len dec_batch dec_steps hyps
 * Prints one line: "lingvoc train_ms=<ms/step> train_tok=<target tokens/step>
 * greedy_ms=<ms/search> greedy_tok=<tokens/search> beam_ms=<ms> beam_tok=<tokens>
 * params=<trainable parameters>".
 * Target tokens: non-padded target positions (training), batch x steps (searches).
 *
 * Environment (scripts/gpu-check.sh): MT_BENCH_GPU=1 runs on cuda:0 (as --run_locally=gpu
 * does; needs a CUDA build and a visible GPU); MT_BENCH_MODEL=NAME another experiment
 * (mt.bible_en_es.TransformerBase: model 512, 8 heads, 6 + 6 layers); MT_BENCH_OVERRIDE=TEXT
 * is applied as --model_params_override is. Every step reads its loss back, so GPU times
 * include the work. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "kernels/kernels.h"
#include "search/beam_search.h"
#include "models/model.h"
#include "models/mt.h"
#include "optim/optim_params.h"
#include "runners/instance.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(lv_status s) { exit(lv_status_report("mt_bench", s)); }

/* The synthetic batch (bench/mt_torch.py uses the same formulas): sentence b has
 * len(b) = T - (b * 3) % 8 real tokens, ids in [3, V) from a fixed hash of (b, t); the
 * target input is <s> + labels[:-1], labels end with </s>. */
static int seq_len(int T, int b) { return T - (b * 3) % 8; }
static int32_t tok(int b, int t, int salt, int V) {
  return 3 + (int32_t)(((int64_t)b * 7919 + (int64_t)t * 104729 + (int64_t)salt * 15485863) % (V - 3));
}

typedef struct host_batch {
  int32_t *src_ids, *tgt_ids, *tgt_labels;
  float *src_pads, *tgt_pads, *tgt_w;
  lv_tensor t[6];
  lv_batch b;
  int64_t target_tokens;
} host_batch;

static void make_batch(host_batch *h, int B, int S, int T, int V) {
  h->src_ids = calloc((size_t)B * S, sizeof(int32_t));
  h->tgt_ids = calloc((size_t)B * T, sizeof(int32_t));
  h->tgt_labels = calloc((size_t)B * T, sizeof(int32_t));
  h->src_pads = calloc((size_t)B * S, sizeof(float));
  h->tgt_pads = calloc((size_t)B * T, sizeof(float));
  h->tgt_w = calloc((size_t)B * T, sizeof(float));
  LV_ASSERT(h->src_ids && h->tgt_ids && h->tgt_labels && h->src_pads && h->tgt_pads && h->tgt_w);
  h->target_tokens = 0;
  for (int b = 0; b < B; b++) {
    int ls = seq_len(S, b), lt = seq_len(T, b);
    for (int t = 0; t < S; t++) {
      h->src_ids[b * S + t] = t < ls ? (t == ls - 1 ? 2 : tok(b, t, 1, V)) : 0;
      h->src_pads[b * S + t] = t < ls ? 0.0f : 1.0f;
    }
    for (int t = 0; t < T; t++) {
      bool real = t < lt;
      h->tgt_labels[b * T + t] = real ? (t == lt - 1 ? 2 : tok(b, t, 2, V)) : 0;
      h->tgt_ids[b * T + t] = real ? (t == 0 ? 1 : tok(b, t - 1, 2, V)) : 0;
      h->tgt_pads[b * T + t] = real ? 0.0f : 1.0f;
      h->tgt_w[b * T + t] = real ? 1.0f : 0.0f;
      h->target_tokens += real;
    }
  }
  h->t[0] = lv_tensor_view(LV_I32, lv_shape2(B, S), h->src_ids);
  h->t[1] = lv_tensor_view(LV_F32, lv_shape2(B, S), h->src_pads);
  h->t[2] = lv_tensor_view(LV_I32, lv_shape2(B, T), h->tgt_ids);
  h->t[3] = lv_tensor_view(LV_F32, lv_shape2(B, T), h->tgt_pads);
  h->t[4] = lv_tensor_view(LV_I32, lv_shape2(B, T), h->tgt_labels);
  h->t[5] = lv_tensor_view(LV_F32, lv_shape2(B, T), h->tgt_w);
  static const char *const keys[6] = {"src.ids", "src.paddings", "tgt.ids", "tgt.paddings", "tgt.labels", "tgt.weights"};
  lv_batch_init(&h->b);
  for (int i = 0; i < 6; i++) {
    lv_status s = lv_nmap_set(&h->b.map, keys[i], &h->t[i]);
    if (s) die(s);
  }
  h->b.size = B;
}

static void free_batch(host_batch *h) {
  lv_batch_free(&h->b);
  free(h->src_ids), free(h->tgt_ids), free(h->tgt_labels);
  free(h->src_pads), free(h->tgt_pads), free(h->tgt_w);
}

/* One search's decoder state; </s> is masked out of every step but the last. */
typedef struct search_ctx {
  lv_mt_decode_state st;
  int n, steps, eos;
  int64_t V;
  bool reorder; /* beam search: gather the caches by parent */
} search_ctx;

static lv_status step_fn(void *ctx, int t, const int32_t *step_ids, const int32_t *parent, float *log_probs,
                         float *atten_probs) {
  (void)atten_probs;
  search_ctx *c = ctx;
  /* Greedy rows always continue themselves (parent[i] = i): no reorder. */
  LV_TRY(lv_mt_decode_step(&c->st, c->n, step_ids, c->reorder && t ? parent : NULL, log_probs));
  if (t < c->steps - 1)
    for (int i = 0; i < c->n; i++) log_probs[(int64_t)i * c->V + c->eos] = -INFINITY;
  return NULL;
}

/* Encodes src (host [B, S]) into g and starts the decoder state for n rows. */
static void start_search(lv_instance *m, host_batch *src, search_ctx *c, int n, int steps, int eos, bool reorder) {
  lv_graph *g = m->graph;
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  lv_tensor *ids = lv_graph_from_host(g, &src->t[0]), *pads = lv_graph_from_host(g, &src->t[1]), *vecs, *vp;
  if (!ids || !pads || !lv_mt_transformer_encode(m->task, g, ids, pads, &vecs, &vp)) die(lv_graph_status(g));
  memset(c, 0, sizeof *c);
  lv_status s = lv_mt_decode_state_init(m->task, g, vecs, vp, &c->st);
  if (s) die(s);
  c->n = n, c->steps = steps, c->eos = eos, c->reorder = reorder;
  c->V = lv_mt_transformer_vocab_size(m->task);
}

int main(int argc, char **argv) {
  int a[8] = {2, 5, 64, 32, 32, 32, 32, 4};
  for (int i = 0; i < 8 && i + 1 < argc; i++) a[i] = atoi(argv[i + 1]);
  int threads = a[0], train_steps = a[1], B = a[2], S = a[3], T = a[4], DB = a[5], DN = a[6], H = a[7];
  if (threads < 1 || train_steps < 1 || B < 1 || S < 8 || T < 8 || DB < 1 || DN < 1 || H < 1) {
    fprintf(stderr, "mt_bench: usage: mt_bench threads train_steps batch src_len tgt_len dec_batch dec_steps hyps "
                    "(positive; lengths >= 8)\n");
    return 2;
  }
  lv_model_options o;
  lv_model_options_init(&o);
  const char *model = getenv("MT_BENCH_MODEL");
  o.model = model && *model ? model : "mt.bible_en_es.TransformerSmall";
  o.dataset = "Train";
  o.num_threads = threads;
  const char *gpu = getenv("MT_BENCH_GPU"), *override = getenv("MT_BENCH_OVERRIDE");
  if (gpu && !strcmp(gpu, "1")) {
    int n = lv_cuda_device_count();
    if (n <= 0) {
      fprintf(stderr, "mt_bench: MT_BENCH_GPU=1: %s\n", n < 0 ? "this build has no CUDA (make CUDA=1)" : "no GPU is visible");
      return 2;
    }
    o.gpus_per_replica = 1;
  }
  if (override) o.params_override = override;
  lv_params *cfg = NULL;
  lv_status s = lv_model_params_build(&o, &cfg);
  if (s) die(s);
  lv_instance *m = NULL;
  /* The model only: the batch is synthetic, so the dataset's files are not needed. */
  if ((s = lv_instance_create(cfg, false, lv_input_no_shard(), &m))) die(s);
  lv_graph_set_free_in_backward(m->graph, true); /* as bin/trainer does by default */
  int nv = lv_varstore_count(m->vs);
  lv_var **vars = calloc((size_t)nv, sizeof *vars);
  LV_ASSERT(vars);
  int64_t params = 0;
  for (int i = 0; i < nv; i++) {
    vars[i] = lv_varstore_get(m->vs, i);
    if (vars[i]->trainable) params += lv_tensor_numel(&vars[i]->value);
  }
  lv_learner *learner = NULL;
  if ((s = lv_learner_from_params(lv_params_sub(cfg, "task.train"), 1, m->backend, vars, nv, &learner))) die(s);
  free(vars);
  const int V = (int)lv_mt_transformer_vocab_size(m->task);

  host_batch hb;
  make_batch(&hb, B, S, T, V);
  lv_metrics mt;
  lv_metrics_init(&mt);
  double train_s = 0;
  enum { WARMUP = 2 };
  for (int step = 0; step < train_steps + WARMUP; step++) { /* steps 0 and 1 warm up */
    double t0 = now();
    lv_varstore_zero_grads(m->vs);
    s = lv_instance_fprop(m, &hb.b, true, step, &mt);
    if (!s) s = lv_graph_backward(m->graph, mt.loss);
    lv_learner_stats st;
    if (!s) s = lv_learner_step(learner, step, &st);
    if (!s && !st.skipped) s = lv_graph_apply_updates(m->graph);
    if (s) die(s);
    if (step >= WARMUP) train_s += now() - t0;
    double loss = NAN;
    for (int i = 0; i < mt.n; i++)
      if (!strcmp(mt.name[i], "loss")) loss = lv_metrics_value(&mt, i);
    if (!isfinite(loss) || st.skipped) die(lv_status_make(LV_ERR_INTERNAL, "step %d: loss %g%s", step, loss,
                                                          st.skipped ? ", step skipped" : ""));
    lv_vlog(1, "step %d loss %.4f", step, loss);
  }
  lv_metrics_free(&mt);

  /* Searches over the first DB sentences' sources (the same for both sides). */
  host_batch db;
  make_batch(&db, DB, S, T, V);
  const int eos = (int)lv_params_int(cfg, "task.decoder.target_eos_id");
  search_ctx c;
  lv_greedy_search_params gp = lv_greedy_search_params_default();
  gp.target_sos_id = (int)lv_params_int(cfg, "task.decoder.target_sos_id");
  gp.target_eos_id = eos;
  gp.target_seq_len = DN;
  double greedy_s = 0, beam_s = 0;
  for (int rep = 0; rep < 2; rep++) { /* rep 0 warms up */
    double t0 = now();
    start_search(m, &db, &c, DB, DN, eos, false);
    lv_greedy_search_result gr = {0};
    s = lv_greedy_search_decode(&gp, DB, V, step_fn, &c, &gr);
    lv_mt_decode_state_free(&c.st);
    if (s) die(s);
    if (rep) greedy_s = now() - t0;
    if (gr.num_steps != DN) die(lv_status_make(LV_ERR_INTERNAL, "greedy search ran %d steps, not %d", gr.num_steps, DN));
    lv_greedy_search_result_free(&gr);
  }

  const lv_params *bsp = lv_params_sub(cfg, "task.decoder.beam_search");
  lv_beam_search_params bp = lv_beam_search_params_default();
  bp.num_hyps_per_beam = H;
  bp.length_normalization = (float)lv_params_float(bsp, "length_normalization");
  bp.valid_eos_max_logit_delta = (float)lv_params_float(bsp, "valid_eos_max_logit_delta");
  bp.local_eos_threshold = (float)lv_params_float(bsp, "local_eos_threshold");
  bp.beam_size = (float)lv_params_float(bsp, "beam_size");
  bp.target_sos_id = gp.target_sos_id;
  bp.target_eos_id = eos;
  bp.target_seq_len = DN;
  bp.force_eos_in_last_step = true;
  for (int rep = 0; rep < 2; rep++) {
    double t0 = now();
    start_search(m, &db, &c, DB * H, DN, eos, true);
    lv_beam_search_result br = {0};
    s = lv_beam_search_decode(&bp, DB, V, 0, NULL, step_fn, &c, &br);
    lv_mt_decode_state_free(&c.st);
    if (s) die(s);
    if (rep) beam_s = now() - t0;
    if (br.num_steps != DN) die(lv_status_make(LV_ERR_INTERNAL, "beam search ran %d steps, not %d", br.num_steps, DN));
    for (int b = 0; b < DB; b++)
      if (br.lens[b * H] != DN)
        die(lv_status_make(LV_ERR_INTERNAL, "beam search: sentence %d's best hyp has %d tokens, not %d", b,
                           br.lens[b * H], DN));
    lv_beam_search_result_free(&br);
  }
  printf("lingvoc train_ms=%.2f train_tok=%lld greedy_ms=%.2f greedy_tok=%d beam_ms=%.2f beam_tok=%d params=%lld\n",
         train_s / train_steps * 1e3, (long long)hb.target_tokens, greedy_s * 1e3, DB * DN, beam_s * 1e3, DB * DN, (long long)params);
  free_batch(&hb);
  free_batch(&db);
  lv_learner_free(learner);
  lv_instance_destroy(m);
  lv_params_free(cfg);
  return 0;
}
