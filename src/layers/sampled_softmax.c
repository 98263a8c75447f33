#include "layers/sampled_softmax.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"

double lv_log_uniform_prob(int64_t range, int64_t c) {
  return log(((double)c + 2.0) / ((double)c + 1.0)) / log1p((double)range);
}

static int64_t log_uniform_draw(lv_rng *r, int64_t range) {
  double u = (double)(lv_rng_u64(r) >> 11) * 0x1p-53;
  /* exp(u * log(range + 1)) - 1 lies in [0, range]; the modulo folds round-off at the
   * top back in, as TF's LogUniformSampler::Sample. */
  int64_t v = (int64_t)exp(u * log1p((double)range)) - 1;
  return v % range;
}

/* Open-addressing set of the drawn classes: the draw needs no sort and stays O(S). */
void lv_log_uniform_sample(lv_rng *r, int64_t range, int64_t num_sampled, int64_t *out, int64_t *num_tries) {
  size_t cap = 16;
  while (cap < (size_t)num_sampled * 2) cap <<= 1;
  int64_t *slot = malloc(cap * sizeof *slot);
  int64_t tries = 0, n = 0;
  if (slot) {
    for (size_t i = 0; i < cap; i++) slot[i] = -1;
  }
  while (n < num_sampled) {
    int64_t v = log_uniform_draw(r, range);
    tries++;
    bool fresh = true;
    if (slot) {
      size_t h = (size_t)((uint64_t)v * 0x9E3779B97F4A7C15ull >> 7) & (cap - 1);
      while (slot[h] >= 0 && slot[h] != v) h = (h + 1) & (cap - 1);
      fresh = slot[h] < 0;
      slot[h] = v;
    } else {
      /* No memory for the set: a linear scan gives the same draws, only slower. */
      for (int64_t i = 0; i < n && fresh; i++) fresh = out[i] != v;
    }
    if (fresh) out[n++] = v;
  }
  free(slot);
  *num_tries = tries;
}

double lv_sampled_expected_count(double p, int64_t num_sampled, int64_t num_tries) {
  if (num_tries == num_sampled) return p * (double)num_sampled;
  return -expm1((double)num_tries * log1p(-p));
}

static bool upload(lv_graph *g, const char *scope, lv_tensor *t, const void *src) {
  if (!t) return false;
  lv_status st = lv_tensor_from_host(t, src);
  if (!st) return true;
  lv_graph_fail(g, "%s: %s", scope, lv_status_msg(st));
  lv_status_free(st);
  return false;
}

bool lv_sampled_softmax_fprop(lv_softmax_layer *l, lv_graph *g, int64_t num_sampled, lv_tensor *x,
                              lv_tensor *class_weights, lv_tensor *class_ids, lv_xent_output *out) {
  memset(out, 0, sizeof *out);
  const char *scope = l->base.scope;
  if (!x || !class_weights || !class_ids) {
    lv_graph_fail(g, "%s: sampled softmax needs inputs, class_weights and class_ids", scope);
    return false;
  }
  const int64_t C = l->num_classes, D = l->input_dim, S = num_sampled;
  const lv_shape ps = class_weights->shape;
  const int64_t n = lv_shape_numel(&ps);
  char s1[96], s2[96], s3[96];
  if (S < 1 || S > C) {
    lv_graph_fail(g, "%s: num_sampled must be in [1, num_classes=%lld], got %lld", scope, (long long)C, (long long)S);
    return false;
  }
  if (x->shape.rank < 1 || x->shape.d[x->shape.rank - 1] != D || lv_tensor_numel(x) != n * D ||
      class_ids->dtype != LV_I32 || lv_tensor_numel(class_ids) != n || n < 1) {
    lv_graph_fail(g, "%s: inputs %s and int32 class_ids %s must match class_weights %s and input_dim %lld", scope,
                  lv_shape_str(&x->shape, s1, sizeof s1), lv_shape_str(&class_ids->shape, s2, sizeof s2),
                  lv_shape_str(&ps, s3, sizeof s3), (long long)D);
    return false;
  }
  int32_t *lab = malloc(sizeof *lab * (size_t)n), *all = malloc(sizeof *all * (size_t)(n + S));
  float *labf = malloc(sizeof *labf * (size_t)n), *tcorr = malloc(sizeof *tcorr * (size_t)n);
  float *samf = malloc(sizeof *samf * (size_t)S), *scorr = malloc(sizeof *scorr * (size_t)S);
  int64_t *sam = malloc(sizeof *sam * (size_t)S);
  lv_tensor *t_all = NULL, *t_labf = NULL, *t_tcorr = NULL, *t_samf = NULL, *t_scorr = NULL;
  bool ok = false;
  if (!lab || !all || !labf || !tcorr || !samf || !scorr || !sam) {
    lv_graph_fail(g, "%s: out of memory for %lld labels and %lld samples", scope, (long long)n, (long long)S);
    goto done;
  }
  lv_status st = lv_tensor_to_host(class_ids, lab);
  if (st) {
    lv_graph_fail(g, "%s: reading class_ids: %s", scope, lv_status_msg(st));
    lv_status_free(st);
    goto done;
  }
  lv_rng r;
  lv_rng_init(&r, l->base.seed, lv_graph_next_stream(g));
  int64_t tries = 0;
  lv_log_uniform_sample(&r, C, S, sam, &tries);
  for (int64_t i = 0; i < n; i++) {
    if (lab[i] < 0 || lab[i] >= C) {
      lv_graph_fail(g, "%s: class id %d at %lld is outside [0, %lld)", scope, lab[i], (long long)i, (long long)C);
      goto done;
    }
    all[i] = lab[i];
    labf[i] = (float)lab[i];
    tcorr[i] = (float)-log(lv_sampled_expected_count(lv_log_uniform_prob(C, lab[i]), S, tries));
  }
  for (int64_t j = 0; j < S; j++) {
    all[n + j] = (int32_t)sam[j];
    samf[j] = (float)sam[j];
    scorr[j] = (float)-log(lv_sampled_expected_count(lv_log_uniform_prob(C, sam[j]), S, tries));
  }
  t_all = lv_graph_tensor(g, LV_I32, lv_shape1(n + S));
  t_labf = lv_graph_tensor(g, LV_F32, lv_shape2(n, 1));
  t_tcorr = lv_graph_tensor(g, LV_F32, lv_shape2(n, 1));
  t_samf = lv_graph_tensor(g, LV_F32, lv_shape2(1, S));
  t_scorr = lv_graph_tensor(g, LV_F32, lv_shape2(1, S));
  if (!upload(g, scope, t_all, all) || !upload(g, scope, t_labf, labf) || !upload(g, scope, t_tcorr, tcorr) ||
      !upload(g, scope, t_samf, samf) || !upload(g, scope, t_scorr, scorr))
    goto done;
  /* The n + S classes' weight columns with their bias, gathered from each shard (a shard
   * gives zero rows for the others' ids), against inputs with a column of ones: each
   * gathered class's logit x . w + b in one product, without a [C, D] copy of the table
   * (one_billion_wds: 793k classes). Per-step weight noise, as Lingvo's _ConcatWeights,
   * still perturbs the whole table. */
  lv_tensor *x2 = lv_op_reshape(g, x, lv_shape2(n, D)), *rows = NULL, *brows = NULL;
  int64_t off = 0;
  for (int i = 0; i < l->num_shards; i++) {
    lv_tensor *w = lv_layer_step_weight(g, l->w[i]);
    if (!w) goto done;
    lv_tensor *r = lv_op_gather_cols(g, w, t_all, off);
    rows = rows ? lv_op_add(g, rows, r) : r;
    if (l->b) {
      lv_tensor *b = lv_layer_step_weight(g, l->b[i]);
      if (!b) goto done;
      lv_tensor *br = lv_op_gather_cols(g, lv_op_reshape(g, b, lv_shape2(1, w->shape.d[1])), t_all, off);
      brows = brows ? lv_op_add(g, brows, br) : br;
    }
    off += w->shape.d[1];
  }
  if (l->b) {
    lv_tensor *tb[2] = {rows, brows};
    lv_tensor *xb[2] = {x2, lv_graph_fill(g, lv_shape2(n, 1), 1.0f)};
    rows = lv_op_concat(g, tb, 2, 1); /* [n + S, D + 1] */
    x2 = lv_op_concat(g, xb, 2, 1);
  }
  lv_tensor *wt = lv_op_slice(g, rows, 0, 0, n), *ws = lv_op_slice(g, rows, 0, n, S);
  lv_tensor *true_logits = lv_op_reduce_sum(g, lv_op_mul(g, x2, wt), 1, true); /* [n, 1] */
  lv_tensor *sampled = lv_op_matmul(g, x2, ws, false, true);                    /* [n, S] */
  lv_tensor *hit = lv_op_compare(g, t_labf, t_samf, LV_CMP_EQ);               /* [n, S] */
  sampled = lv_op_select(g, hit, lv_graph_fill(g, lv_shape2(1, 1), -FLT_MAX), lv_op_add(g, sampled, t_scorr));
  lv_tensor *parts[2] = {lv_op_add(g, true_logits, t_tcorr), sampled};
  lv_tensor *logits = lv_op_concat(g, parts, 2, 1); /* [n, 1 + S] */
  lv_tensor *xent = lv_op_sparse_softmax_xent(g, logits, lv_graph_zeros(g, LV_I32, lv_shape1(n)));
  if (!xent) goto done;
  out->per_example_xent = lv_op_reshape(g, xent, ps);
  out->per_example_argmax = lv_op_reshape(g, class_ids, ps);
  out->per_example_weight = class_weights;
  out->total_xent = lv_op_reduce_sum(g, lv_op_mul(g, out->per_example_xent, class_weights), LV_ALL_AXES, false);
  out->total_weight = lv_op_reduce_sum(g, class_weights, LV_ALL_AXES, false);
  if (!out->total_weight) goto done;
  lv_tensor *inv = lv_op_div(g, lv_graph_fill(g, lv_shape0(), 1.0f), lv_op_maximum_scalar(g, out->total_weight, 1e-6f));
  out->avg_xent = lv_op_mul(g, out->total_xent, inv);
  ok = out->avg_xent != NULL;
done:
  free(lab);
  free(all);
  free(labf);
  free(tcorr);
  free(samf);
  free(scorr);
  free(sam);
  return ok;
}
