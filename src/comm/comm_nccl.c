/* The NCCL communicator: one rank per GPU process (mpirun -np <gpus>), bootstrapped over
 * MPI (rank 0's ncclUniqueId is broadcast), all-reduce in place on device memory on
 * this communicator's own CUDA stream, waited for before returning. Host-side
 * collectives (allreduce_f64 of small control values, broadcast, barrier) go through
 * the MPI communicator it was bootstrapped on. Each rank uses GPU
 * (local rank mod visible GPUs) unless CUDA_VISIBLE_DEVICES already narrowed it to one.
 *
 * Built only with CUDA=1 (LV_HAVE_NCCL, which needs LV_HAVE_MPI for the bootstrap).
 * Not run on this project's machines (no GPU, no NCCL): written against NCCL 2.x's
 * documented API and left for the first GPU machine to prove. */
#include "comm/comm_impl.h"

#include "base/env.h"

#if defined(LV_HAVE_NCCL) && defined(LV_HAVE_MPI)

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nccl_impl {
  lv_comm *mpi; /* host collectives and the bootstrap */
  ncclComm_t comm;
  cudaStream_t stream;
  int gpu;
} nccl_impl;

/* The one checking macro for NCCL (and the CUDA runtime calls it needs). */
#define LV_NCCL(c, call)                                                                              \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess)                                                                            \
      return lv_status_make(LV_ERR_IO, "rank %d of %d: %s failed: %s", (c)->rank, (c)->size, #call,   \
                            ncclGetErrorString(r_));                                                   \
  } while (0)
#define LV_CUDART(c, call)                                                                            \
  do {                                                                                                \
    cudaError_t e_ = (call);                                                                          \
    if (e_ != cudaSuccess)                                                                            \
      return lv_status_make(LV_ERR_IO, "rank %d of %d: %s failed: %s", (c)->rank, (c)->size, #call,   \
                            cudaGetErrorString(e_));                                                  \
  } while (0)

static lv_status nccl_allreduce_f32(lv_comm *c, float *buf, int64_t n) {
  nccl_impl *m = c->impl;
  if (n == 0) return NULL;
  LV_NCCL(c, ncclAllReduce(buf, buf, (size_t)n, ncclFloat, ncclSum, m->comm, m->stream));
  LV_CUDART(c, cudaStreamSynchronize(m->stream));
  return NULL;
}

static lv_status nccl_allreduce_f64(lv_comm *c, double *buf, int64_t n) {
  return lv_comm_allreduce_f64(((nccl_impl *)c->impl)->mpi, buf, n);
}

static lv_status nccl_broadcast(lv_comm *c, void *buf, size_t bytes, int root) {
  return lv_comm_broadcast(((nccl_impl *)c->impl)->mpi, buf, bytes, root);
}

static lv_status nccl_barrier(lv_comm *c) { return lv_comm_barrier(((nccl_impl *)c->impl)->mpi); }

static _Noreturn void nccl_abort(lv_comm *c, int code) {
  nccl_impl *m = c->impl;
  ncclCommAbort(m->comm);
  lv_comm_abort(m->mpi, code, NULL);
}

static lv_status nccl_destroy(lv_comm *c) {
  nccl_impl *m = c->impl;
  lv_status s = NULL;
  if (m->comm) {
    ncclResult_t r = ncclCommDestroy(m->comm);
    if (r != ncclSuccess)
      s = lv_status_make(LV_ERR_IO, "rank %d of %d: ncclCommDestroy failed: %s", c->rank, c->size, ncclGetErrorString(r));
  }
  if (m->stream) cudaStreamDestroy(m->stream);
  lv_status s2 = lv_comm_destroy(m->mpi);
  if (!s) s = s2;
  else lv_status_free(s2);
  free(m);
  return s;
}

/* No non-blocking all-reduce: the gradients are in device memory, reduced after backward. */
static const lv_comm_ops kNcclOps = {.allreduce_f32 = nccl_allreduce_f32,
                                     .allreduce_f64 = nccl_allreduce_f64,
                                     .broadcast = nccl_broadcast,
                                     .barrier = nccl_barrier,
                                     .abort = nccl_abort,
                                     .destroy = nccl_destroy};

static lv_status nccl_setup(lv_comm *c, nccl_impl *m) {
  int ngpu = 0;
  LV_CUDART(c, cudaGetDeviceCount(&ngpu));
  if (ngpu < 1) return lv_status_make(LV_ERR_INVALID, "rank %d of %d: the NCCL communicator needs a GPU; none is visible", c->rank, c->size);
  /* Ranks on one host take consecutive GPUs: local rank from a shared-memory split. */
  int local_rank = 0;
  const char *lr = lv_env_get()->ompi_local_rank;
  if (lr) local_rank = atoi(lr);
  m->gpu = local_rank % ngpu;
  LV_CUDART(c, cudaSetDevice(m->gpu));
  LV_CUDART(c, cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
  ncclUniqueId id;
  if (c->rank == 0) LV_NCCL(c, ncclGetUniqueId(&id));
  LV_TRY(lv_comm_broadcast(m->mpi, &id, sizeof id, 0));
  LV_NCCL(c, ncclCommInitRank(&m->comm, c->size, id, c->rank));
  int version = 0;
  ncclGetVersion(&version);
  snprintf(c->describe, sizeof c->describe, "nccl: NCCL %d.%d.%d, %d ranks, rank %d on GPU %d (bootstrap %s)",
           version / 10000, (version / 100) % 100, version % 100, c->size, c->rank, m->gpu,
           lv_comm_describe(m->mpi));
  return NULL;
}

lv_status lv_comm_nccl_init(lv_comm *c) {
  nccl_impl *m = calloc(1, sizeof *m);
  LV_ASSERT(m);
  lv_status s = lv_comm_create(LV_COMM_MPI, &m->mpi);
  if (s) {
    free(m);
    return lv_status_wrap(s, "the NCCL communicator bootstraps over MPI");
  }
  c->impl = m;
  c->ops = &kNcclOps;
  c->rank = lv_comm_rank(m->mpi);
  c->size = lv_comm_size(m->mpi);
  s = nccl_setup(c, m);
  if (s) {
    lv_status_free(nccl_destroy(c));
    c->impl = NULL;
    return s;
  }
  return NULL;
}

#else

lv_status lv_comm_nccl_init(lv_comm *c) {
  (void)c;
  return lv_status_make(LV_ERR_INVALID, "this build has no NCCL communicator (build with `make CUDA=1` and MPI)");
}

#endif
