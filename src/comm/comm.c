#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/env.h"
#include "base/log.h"
#include "comm/comm_impl.h"

const char *const lv_comm_kind_names[LV_COMM_KIND_COUNT] = {"local", "mpi", "nccl"};
_Static_assert(sizeof lv_comm_kind_names / sizeof *lv_comm_kind_names == LV_COMM_KIND_COUNT, "comm kind names");

/* A launcher variable's value as a non-negative int; false when unset or not a number. */
static bool env_int(const char *v, int *out) {
  if (!v || !*v) return false;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > 1 << 24) return false;
  *out = (int)x;
  return true;
}

bool lv_comm_launched_by_mpi(int *size, int *rank) { return lv_comm_launched_by_mpi_env(lv_env_get(), size, rank); }

bool lv_comm_launched_by_mpi_env(const lv_env *env, int *size, int *rank) {
  for (size_t i = 0; i < sizeof env->launcher_size / sizeof *env->launcher_size; i++) {
    int s, r;
    if (env_int(env->launcher_size[i], &s) && env_int(env->launcher_rank[i], &r) && s >= 1 && r < s) {
      *size = s;
      *rank = r;
      return true;
    }
  }
  *size = 1;
  *rank = 0;
  return false;
}

bool lv_comm_kind_built(lv_comm_kind kind) {
  switch (kind) {
    case LV_COMM_LOCAL: return true;
#ifdef LV_HAVE_MPI
    case LV_COMM_MPI: return true;
#endif
#if defined(LV_HAVE_NCCL) && defined(LV_HAVE_MPI)
    case LV_COMM_NCCL: return true;
#endif
    default: return false;
  }
}

/* local: one rank, nothing to exchange. */
static lv_status local_allreduce_f32(lv_comm *c, float *buf, int64_t n) {
  (void)c, (void)buf, (void)n;
  return NULL;
}
static lv_status local_allreduce_f64(lv_comm *c, double *buf, int64_t n) {
  (void)c, (void)buf, (void)n;
  return NULL;
}
static lv_status local_broadcast(lv_comm *c, void *buf, size_t bytes, int root) {
  (void)c, (void)buf, (void)bytes, (void)root;
  return NULL;
}
static lv_status local_barrier(lv_comm *c) {
  (void)c;
  return NULL;
}
static _Noreturn void local_abort(lv_comm *c, int code) {
  (void)c;
  exit(code);
}
static lv_status local_destroy(lv_comm *c) {
  (void)c;
  return NULL;
}
static const lv_comm_ops kLocalOps = {.allreduce_f32 = local_allreduce_f32,
                                      .allreduce_f64 = local_allreduce_f64,
                                      .broadcast = local_broadcast,
                                      .barrier = local_barrier,
                                      .abort = local_abort,
                                      .destroy = local_destroy};

lv_status lv_comm_create(lv_comm_kind kind, lv_comm **out) {
  *out = NULL;
  if ((int)kind < 0 || kind >= LV_COMM_KIND_COUNT)
    return lv_status_make(LV_ERR_INVALID, "communicator kind %d out of range", (int)kind);
  if (!lv_comm_kind_built(kind))
    return lv_status_make(LV_ERR_INVALID, "this build has no %s communicator (%s)", lv_comm_kind_names[kind],
                          kind == LV_COMM_MPI ? "build with `make MPI=1` and libopenmpi-dev" : "build with `make CUDA=1`");
  lv_comm *c = calloc(1, sizeof *c);
  LV_ASSERT(c);
  c->kind = kind;
  lv_status s = NULL;
  if (kind == LV_COMM_LOCAL) {
    c->ops = &kLocalOps;
    c->size = 1;
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    snprintf(c->describe, sizeof c->describe, "local: one process (%s), no all-reduce", host);
  } else if (kind == LV_COMM_MPI) {
    s = lv_comm_mpi_init(c);
  } else {
    s = lv_comm_nccl_init(c);
  }
  if (s) {
    free(c);
    return s;
  }
  *out = c;
  return NULL;
}

lv_status lv_comm_create_auto(lv_comm **out) {
  int size, rank;
  if (lv_comm_launched_by_mpi(&size, &rank)) {
    if (!lv_comm_kind_built(LV_COMM_MPI)) {
      *out = NULL;
      if (size > 1)
        return lv_status_make(LV_ERR_INVALID, "started by an MPI launcher as rank %d of %d, but this build has no MPI "
                              "(rebuild with `make MPI=1`; libopenmpi-dev): the ranks would train independently",
                              rank, size);
      return lv_comm_create(LV_COMM_LOCAL, out);
    }
    return lv_comm_create(LV_COMM_MPI, out);
  }
  return lv_comm_create(LV_COMM_LOCAL, out);
}

lv_status lv_comm_destroy(lv_comm *c) {
  if (!c) return NULL;
  lv_status s = c->ops->destroy(c);
  free(c);
  return s;
}

int lv_comm_rank(const lv_comm *c) { return c ? c->rank : 0; }
int lv_comm_size(const lv_comm *c) { return c ? c->size : 1; }
lv_comm_kind lv_comm_kind_of(const lv_comm *c) { return c ? c->kind : LV_COMM_LOCAL; }
const char *lv_comm_describe(const lv_comm *c) { return c ? c->describe : "local: one process, no all-reduce"; }

lv_status lv_comm_allreduce_f32(lv_comm *c, float *buf, int64_t n) {
  if (n < 0) return lv_status_make(LV_ERR_INTERNAL, "all-reduce of %lld floats", (long long)n);
  double t0 = lv_now_monotonic();
  lv_status s = c->ops->allreduce_f32(c, buf, n);
  c->reduce_seconds += lv_now_monotonic() - t0;
  c->reduce_bytes += n * (int64_t)sizeof(float);
  return s;
}

struct lv_comm_request {
  void *impl; /* NULL: done at once (one rank) */
};

bool lv_comm_can_overlap(const lv_comm *c) { return !c || c->size == 1 || c->ops->iallreduce_f32; }

lv_status lv_comm_iallreduce_f32(lv_comm *c, float *buf, int64_t n, lv_comm_request **req) {
  *req = NULL;
  if (n < 0) return lv_status_make(LV_ERR_INTERNAL, "all-reduce of %lld floats", (long long)n);
  if (!lv_comm_can_overlap(c))
    return lv_status_make(LV_ERR_INTERNAL, "the %s communicator has no non-blocking all-reduce",
                          lv_comm_kind_names[lv_comm_kind_of(c)]);
  lv_comm_request *q = calloc(1, sizeof *q);
  if (!q) return lv_status_make(LV_ERR_RESOURCE, "out of memory for an all-reduce request");
  if (c && c->size > 1) {
    double t0 = lv_now_monotonic();
    lv_status s = c->ops->iallreduce_f32(c, buf, n, &q->impl);
    c->reduce_seconds += lv_now_monotonic() - t0;
    if (s) {
      free(q);
      return s;
    }
    c->reduce_bytes += n * (int64_t)sizeof(float);
  }
  *req = q;
  return NULL;
}

lv_status lv_comm_test(lv_comm *c, lv_comm_request *req, bool *done) {
  *done = true;
  if (!req->impl) return NULL;
  double t0 = lv_now_monotonic();
  lv_status s = c->ops->test(c, req->impl, done);
  c->reduce_seconds += lv_now_monotonic() - t0;
  return s;
}

lv_status lv_comm_wait(lv_comm *c, lv_comm_request *req) {
  if (!req) return NULL;
  lv_status s = NULL;
  if (req->impl) {
    double t0 = lv_now_monotonic();
    s = c->ops->wait(c, req->impl);
    c->reduce_seconds += lv_now_monotonic() - t0;
  }
  free(req);
  return s;
}

lv_status lv_comm_allreduce_f64(lv_comm *c, double *buf, int64_t n) {
  if (n < 0) return lv_status_make(LV_ERR_INTERNAL, "all-reduce of %lld doubles", (long long)n);
  return c->ops->allreduce_f64(c, buf, n);
}

lv_status lv_comm_broadcast(lv_comm *c, void *buf, size_t bytes, int root) {
  if (root < 0 || root >= c->size)
    return lv_status_make(LV_ERR_INTERNAL, "broadcast from rank %d of %d", root, c->size);
  return c->ops->broadcast(c, buf, bytes, root);
}

lv_status lv_comm_barrier(lv_comm *c) { return c->ops->barrier(c); }

_Noreturn void lv_comm_abort(lv_comm *c, int code, const char *message) {
  if (c && c->size > 1)
    lv_error("rank %d of %d: %s; stopping all %d ranks", c->rank, c->size, message ? message : "failed", c->size);
  else if (message)
    lv_error("%s", message);
  fflush(stderr);
  if (c) c->ops->abort(c, code);
  exit(code);
}

double lv_comm_allreduce_seconds(const lv_comm *c) { return c ? c->reduce_seconds : 0; }
int64_t lv_comm_allreduce_bytes(const lv_comm *c) { return c ? c->reduce_bytes : 0; }
