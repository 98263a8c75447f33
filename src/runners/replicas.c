#include "runners/replicas.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/log.h"
#include "kernels/kernels.h"

lv_status lv_replicas_exchange(lv_comm *c, const lv_metrics *mt, bool stop, lv_replica_step *out) {
  memset(out, 0, sizeof *out);
  out->n = mt->n;
  /* [stop, (value * weight, weight) per metric] */
  double buf[1 + 2 * LV_MAX_METRICS];
  buf[0] = stop ? 1 : 0;
  double w_local = 0;
  for (int i = 0; i < mt->n; i++) {
    double v = lv_metrics_value(mt, i), w = mt->weight[i];
    buf[1 + 2 * i] = v * w;
    buf[2 + 2 * i] = w;
    if (!strcmp(mt->name[i], "loss")) w_local = w;
  }
  if (lv_comm_size(c) > 1) LV_TRY(lv_status_wrap(lv_comm_allreduce_f64(c, buf, 1 + 2 * mt->n), "step metrics"));
  out->stop = buf[0] > 0;
  out->loss_scale = 1.0f;
  for (int i = 0; i < mt->n; i++) {
    double vw = buf[1 + 2 * i], w = buf[2 + 2 * i];
    /* A lone rank keeps its own value even at weight 0 (as Lingvo's divide_no_nan would
     * not); across ranks a zero total weight gives 0. */
    out->value[i] = lv_comm_size(c) == 1 ? lv_metrics_value(mt, i) : (w != 0 ? vw / w : 0);
    out->weight[i] = w;
    if (!strcmp(mt->name[i], "loss") && lv_comm_size(c) > 1)
      out->loss_scale = w != 0 ? (float)(w_local / w) : 1.0f / (float)lv_comm_size(c);
  }
  return NULL;
}

/* The host view of n floats at dev_ptr on vs's device: dev_ptr itself on the host, else
 * a copy (*staged = true; copy it back with unstage). */
static float *stage(const lv_backend *be, float *dev_ptr, int64_t n, bool *staged) {
  *staged = !lv_device_is_host(be->device);
  if (!*staged) return dev_ptr;
  float *h = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  LV_ASSERT(h);
  be->sync(be->ctx);
  be->copy(be->ctx, h, dev_ptr, sizeof(float) * (size_t)n, LV_COPY_DEVICE_TO_HOST);
  return h;
}

static void unstage(const lv_backend *be, float *dev_ptr, float *h, int64_t n, bool staged) {
  if (!staged) return;
  be->copy(be->ctx, dev_ptr, h, sizeof(float) * (size_t)n, LV_COPY_HOST_TO_DEVICE);
  be->sync(be->ctx);
  free(h);
}

lv_status lv_replicas_allreduce_grads(lv_comm *c, lv_varstore *vs) {
  if (lv_comm_size(c) <= 1) return NULL;
  int64_t n = 0;
  float *g = lv_varstore_grads(vs, &n);
  const lv_backend *be = lv_backend_get(lv_varstore_device(vs));
  LV_ASSERT(be);
  /* NCCL reduces device memory where it lies; MPI needs the host's. */
  if (lv_comm_kind_of(c) == LV_COMM_NCCL) {
    be->sync(be->ctx);
    return lv_status_wrap(lv_comm_allreduce_f32(c, g, n), "all-reduce of %lld gradients", (long long)n);
  }
  bool staged;
  float *h = stage(be, g, n, &staged);
  lv_status s = lv_comm_allreduce_f32(c, h, n);
  unstage(be, g, h, n, staged);
  return s ? lv_status_wrap(s, "all-reduce of %lld gradients", (long long)n) : NULL;
}

struct lv_grad_overlap {
  lv_comm *c;
  float *grads;
  int64_t n;
  int nb;
  int64_t *start;        /* [nb + 1]: bucket b is grads[start[b], start[b + 1]) */
  int *ready;            /* [nb]: the lowest tape node reading the bucket (INT_MAX: none) */
  lv_comm_request **req; /* [nb] */
  int next;              /* the next bucket to start (nb - 1 down to 0; -1: all started) */
  int oldest;            /* the highest-numbered bucket not known to be done */
  lv_graph *g;
  lv_status err;
};

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

lv_status lv_grad_overlap_create(lv_comm *c, lv_varstore *vs, int64_t bucket_bytes, lv_grad_overlap **out) {
  *out = NULL;
  const lv_backend *be = lv_backend_get(lv_varstore_device(vs));
  if (lv_comm_size(c) <= 1 || !lv_comm_can_overlap(c) || bucket_bytes <= 0 || !be || !lv_device_is_host(be->device))
    return NULL;
  int64_t n = 0;
  float *grads = lv_varstore_grads(vs, &n);
  if (!grads || n <= 0) return NULL;
  lv_grad_overlap *o = calloc(1, sizeof *o);
  int nv = lv_varstore_count(vs);
  o->start = malloc(sizeof *o->start * (size_t)(nv + 2));
  LV_ASSERT(o && o->start);
  o->c = c;
  o->grads = grads;
  o->n = n;
  /* Cut at the first variable boundary past each bucket_bytes of gradients. */
  int64_t *offs = malloc(sizeof *offs * (size_t)(nv + 1));
  LV_ASSERT(offs);
  int k = 0;
  for (int i = 0; i < nv; i++) {
    const lv_var *v = lv_varstore_get(vs, i);
    if (v->grad.data) offs[k++] = (const float *)v->grad.data - grads;
  }
  qsort(offs, (size_t)k, sizeof *offs, cmp_i64);
  o->start[0] = 0;
  int64_t per = bucket_bytes / (int64_t)sizeof(float);
  if (per < 1) per = 1;
  for (int i = 0; i < k; i++)
    if (offs[i] - o->start[o->nb] >= per && offs[i] < n) o->start[++o->nb] = offs[i];
  o->start[++o->nb] = n;
  free(offs);
  o->ready = malloc(sizeof *o->ready * (size_t)o->nb);
  o->req = calloc((size_t)o->nb, sizeof *o->req);
  LV_ASSERT(o->ready && o->req);
  o->next = o->oldest = -1;
  *out = o;
  return NULL;
}

int lv_grad_overlap_num_buckets(const lv_grad_overlap *o) { return o ? o->nb : 0; }

static int bucket_of(const lv_grad_overlap *o, int64_t off) {
  int lo = 0, hi = o->nb - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (o->start[mid] <= off) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

static void note_reader(void *ctx, int node, int64_t off, int64_t numel) {
  lv_grad_overlap *o = ctx;
  int last = bucket_of(o, off + (numel > 0 ? numel - 1 : 0));
  for (int b = bucket_of(o, off); b <= last; b++)
    if (node < o->ready[b]) o->ready[b] = node;
}

/* Starts buckets next, next - 1, ... while each is ready (its lowest reader is >= done,
 * the tape node whose backward just finished; finish passes INT_MIN: all of them), then
 * lets MPI progress the oldest running one. */
static void start_ready(lv_grad_overlap *o, int done) {
  while (!o->err && o->next >= 0 && o->ready[o->next] >= done) {
    int b = o->next--;
    o->err = lv_comm_iallreduce_f32(o->c, o->grads + o->start[b], o->start[b + 1] - o->start[b], &o->req[b]);
  }
  while (!o->err && o->oldest > o->next) {
    bool finished = false;
    o->err = lv_comm_test(o->c, o->req[o->oldest], &finished);
    if (!finished) break;
    o->oldest--;
  }
}

static void on_backward(void *ctx, int node) { start_ready(ctx, node); }

lv_status lv_grad_overlap_arm(lv_grad_overlap *o, lv_graph *g) {
  for (int b = 0; b < o->nb; b++) o->ready[b] = INT_MAX;
  lv_graph_visit_leaf_grads(g, o->grads, o->n, note_reader, o);
  o->next = o->oldest = o->nb - 1;
  o->err = NULL;
  o->g = g;
  lv_graph_set_backward_hook(g, on_backward, o);
  return NULL;
}

lv_status lv_grad_overlap_finish(lv_grad_overlap *o) {
  if (o->g) lv_graph_set_backward_hook(o->g, NULL, NULL);
  o->g = NULL;
  start_ready(o, INT_MIN);
  lv_status s = o->err;
  for (int b = o->nb - 1; b >= 0; b--) {
    if (!o->req[b]) continue;
    lv_status w = lv_comm_wait(o->c, o->req[b]);
    o->req[b] = NULL;
    if (!s) s = w;
    else lv_status_free(w);
  }
  o->err = NULL;
  o->next = o->oldest = -1;
  return s ? lv_status_wrap(s, "all-reduce of %lld gradients in %d buckets", (long long)o->n, o->nb) : NULL;
}

void lv_grad_overlap_destroy(lv_grad_overlap *o) {
  if (!o) return;
  if (o->g) lv_graph_set_backward_hook(o->g, NULL, NULL);
  for (int b = 0; b < o->nb; b++)
    if (o->req[b]) lv_status_free(lv_comm_wait(o->c, o->req[b]));
  free(o->start);
  free(o->ready);
  free(o->req);
  free(o);
}

lv_status lv_replicas_mean_nontrainable(lv_comm *c, lv_varstore *vs) {
  if (lv_comm_size(c) <= 1) return NULL;
  int nv = lv_varstore_count(vs);
  int64_t total = 0;
  for (int i = 0; i < nv; i++) {
    lv_var *v = lv_varstore_get(vs, i);
    if (!v->trainable && v->value.dtype == LV_F32) total += lv_tensor_numel(&v->value);
  }
  if (total == 0) return NULL;
  float *f = malloc(sizeof(float) * (size_t)total);
  double *d = malloc(sizeof(double) * (size_t)total);
  LV_ASSERT(f && d);
  lv_status s = NULL;
  int64_t off = 0;
  for (int i = 0; i < nv && !s; i++) {
    lv_var *v = lv_varstore_get(vs, i);
    if (v->trainable || v->value.dtype != LV_F32) continue;
    int64_t k = lv_tensor_numel(&v->value);
    s = lv_tensor_to_host(&v->value, f + off);
    off += k;
  }
  for (int64_t i = 0; i < total; i++) d[i] = f[i];
  if (!s) s = lv_comm_allreduce_f64(c, d, total);
  for (int64_t i = 0; i < total; i++) f[i] = (float)(d[i] / lv_comm_size(c));
  off = 0;
  for (int i = 0; i < nv && !s; i++) {
    lv_var *v = lv_varstore_get(vs, i);
    if (v->trainable || v->value.dtype != LV_F32) continue;
    s = lv_tensor_from_host(&v->value, f + off);
    off += lv_tensor_numel(&v->value);
  }
  free(f);
  free(d);
  return s ? lv_status_wrap(s, "mean of the non-trainable variables over %d replicas", lv_comm_size(c)) : NULL;
}

lv_status lv_replicas_broadcast(lv_comm *c, const lv_saveable *items, int n) {
  if (lv_comm_size(c) <= 1) return NULL;
  for (int i = 0; i < n; i++) {
    const lv_saveable *it = &items[i];
    size_t bytes = (size_t)lv_shape_numel(&it->shape) * lv_dtype_size(it->dtype);
    if (!bytes) continue;
    const lv_backend *be = lv_backend_get(it->device);
    LV_ASSERT(be);
    bool host = lv_device_is_host(it->device);
    void *h = it->data;
    if (!host) {
      h = malloc(bytes);
      LV_ASSERT(h);
      be->sync(be->ctx);
      be->copy(be->ctx, h, it->data, bytes, LV_COPY_DEVICE_TO_HOST);
    }
    lv_status s = lv_comm_broadcast(c, h, bytes, 0);
    if (!host) {
      if (!s) be->copy(be->ctx, it->data, h, bytes, LV_COPY_HOST_TO_DEVICE), be->sync(be->ctx);
      free(h);
    }
    if (s) return lv_status_wrap(s, "broadcast of %s from rank 0", it->name);
  }
  return NULL;
}

static lv_status vars_crc(lv_varstore *vs, uint32_t *crc) {
  *crc = 0;
  int nv = lv_varstore_count(vs);
  for (int i = 0; i < nv; i++) {
    lv_var *v = lv_varstore_get(vs, i);
    size_t bytes = (size_t)lv_tensor_numel(&v->value) * lv_dtype_size(v->value.dtype);
    void *h = malloc(bytes ? bytes : 1);
    LV_ASSERT(h);
    lv_status s = lv_tensor_to_host(&v->value, h);
    if (s) {
      free(h);
      return s;
    }
    *crc = lv_crc32c_extend(*crc, h, bytes);
    free(h);
  }
  return NULL;
}

lv_status lv_replicas_check_crc(lv_comm *c, uint32_t crc, int64_t step, const char *what) {
  int size = lv_comm_size(c), rank = lv_comm_rank(c);
  if (size <= 1) return NULL;
  uint32_t chief = crc;
  LV_TRY(lv_comm_broadcast(c, &chief, sizeof chief, 0));
  double *differs = calloc((size_t)size, sizeof *differs);
  LV_ASSERT(differs);
  differs[rank] = chief != crc;
  lv_status s = lv_comm_allreduce_f64(c, differs, size);
  if (!s) {
    char list[512] = "";
    int nd = 0;
    size_t off = 0;
    for (int r = 0; r < size; r++)
      if (differs[r] > 0 && off < sizeof list - 16) off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", nd++ ? ", " : "", r);
    if (nd)
      s = lv_status_make(LV_ERR_INTERNAL, "step %lld: the %s of rank%s %s differ from rank 0's: the replicas "
                         "diverged (an update that was not the same on every rank)",
                         (long long)step, what, nd > 1 ? "s" : "", list);
  }
  free(differs);
  return s;
}

lv_status lv_replicas_check_same(lv_comm *c, lv_varstore *vs, int64_t step, const char *what) {
  if (lv_comm_size(c) <= 1) return NULL;
  uint32_t crc;
  LV_TRY(vars_crc(vs, &crc));
  return lv_replicas_check_crc(c, crc, step, what);
}

/* The line of text starting at p into out (without its newline). */
static void copy_line(const char *p, char *out, size_t cap) {
  size_t n = strcspn(p, "\n");
  snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
}

/* Length of the key of the line at p: up to " : " (the params text's separator), else
 * the whole line. */
static size_t key_len(const char *p) {
  size_t n = strcspn(p, "\n");
  for (size_t i = 0; i + 3 <= n; i++)
    if (!memcmp(p + i, " : ", 3)) return i;
  return n;
}

static const char *next_line(const char *p) {
  p = strchr(p, '\n');
  return p ? p + 1 : NULL;
}

/* How `mine` first differs from `chief` (they differ): the first of mine's lines whose
 * key chief has with another value, else the first line that differs by position (a
 * key one side lacks: another optimizer's params), as chief's and mine. */
static void first_difference(const char *chief, const char *mine, char *ours, char *theirs, size_t cap) {
  for (const char *m = mine; m && *m; m = next_line(m)) {
    size_t km = key_len(m), lm = strcspn(m, "\n");
    for (const char *c = chief; c && *c; c = next_line(c)) {
      size_t kc = key_len(c), lc = strcspn(c, "\n");
      if (kc != km || memcmp(c, m, km)) continue;
      if (lc != lm || memcmp(c, m, lm)) {
        copy_line(c, ours, cap);
        copy_line(m, theirs, cap);
        return;
      }
      break;
    }
  }
  const char *c = chief, *m = mine;
  while (c && m && *c && *m) {
    size_t lc = strcspn(c, "\n"), lm = strcspn(m, "\n");
    if (lc != lm || memcmp(c, m, lc)) break;
    c = next_line(c);
    m = next_line(m);
  }
  copy_line(c ? c : "", ours, cap);
  copy_line(m ? m : "", theirs, cap);
}

lv_status lv_replicas_check_config(lv_comm *c, const char *config) {
  int size = lv_comm_size(c), rank = lv_comm_rank(c);
  if (size <= 1) return NULL;
  /* Rank 0's text to every rank: its length first, then its bytes. */
  double len = (double)strlen(config);
  LV_TRY(lv_status_wrap(lv_comm_broadcast(c, &len, sizeof len, 0), "comparing the replicas' settings"));
  size_t n = (size_t)len;
  char *chief = malloc(n + 1);
  LV_ASSERT(chief);
  if (rank == 0) memcpy(chief, config, n);
  lv_status s = lv_comm_broadcast(c, chief, n, 0);
  chief[n] = 0;
  /* Which ranks differ, known to all. */
  double *diff = calloc((size_t)size, sizeof *diff);
  LV_ASSERT(diff);
  if (!s) {
    diff[rank] = strcmp(chief, config) != 0;
    s = lv_comm_allreduce_f64(c, diff, size);
  }
  int first = -1, ndiff = 0;
  for (int r = 0; !s && r < size; r++)
    if (diff[r] > 0 && !ndiff++) first = r;
  if (!s && first > 0) {
    /* The first differing rank finds where, and tells every rank. */
    char lines[2][512] = {"", ""};
    if (rank == first) first_difference(chief, config, lines[0], lines[1], sizeof lines[0]);
    s = lv_comm_broadcast(c, lines, sizeof lines, first);
    lines[0][sizeof lines[0] - 1] = lines[1][sizeof lines[1] - 1] = 0;
    if (!s)
      s = lv_status_make(LV_ERR_INVALID,
                         "the replicas were started with different settings (params and flags): rank %d differs "
                         "from rank 0: rank 0 has \"%s\", rank %d has \"%s\"%s; start every rank with the same "
                         "--model, --model_params_override and flags",
                         first, *lines[0] ? lines[0] : "(nothing)", first, *lines[1] ? lines[1] : "(nothing)",
                         ndiff > 1 ? " (other ranks differ too)" : "");
  }
  free(diff);
  free(chief);
  return s;
}
