/* The MPI communicator: one rank per process, host buffers, MPI_Allreduce in place on
 * a duplicate of MPI_COMM_WORLD whose errors return (MPI_ERRORS_RETURN) so that they
 * become statuses naming the call. Initialized with MPI_THREAD_FUNNELED: only the
 * thread that created the communicator calls MPI (kernel and checkpoint threads never
 * do). */
#include "comm/comm_impl.h"

#ifdef LV_HAVE_MPI

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mpi_impl {
  MPI_Comm comm;
  bool we_initialized;
} mpi_impl;

static lv_status mpi_err(const lv_comm *c, int rc, const char *call) {
  char msg[MPI_MAX_ERROR_STRING + 1] = "";
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
  return lv_status_make(LV_ERR_IO, "rank %d of %d: %s failed: %s", c ? c->rank : -1, c ? c->size : 0, call, msg);
}

/* The one checking macro for MPI calls. */
#define LV_MPI(c, call)                                  \
  do {                                                   \
    int rc_ = (call);                                    \
    if (rc_ != MPI_SUCCESS) return mpi_err((c), rc_, #call); \
  } while (0)

/* MPI counts are ints: large buffers go in pieces of at most 2^30 elements. */
#define MPI_PIECE ((int64_t)1 << 30)

static lv_status mpi_allreduce(lv_comm *c, void *buf, int64_t n, MPI_Datatype t, size_t elem) {
  mpi_impl *m = c->impl;
  for (int64_t off = 0; off < n; off += MPI_PIECE) {
    int cnt = (int)(n - off < MPI_PIECE ? n - off : MPI_PIECE);
    LV_MPI(c, MPI_Allreduce(MPI_IN_PLACE, (char *)buf + (size_t)off * elem, cnt, t, MPI_SUM, m->comm));
  }
  return NULL;
}

static lv_status mpi_allreduce_f32(lv_comm *c, float *buf, int64_t n) {
  return mpi_allreduce(c, buf, n, MPI_FLOAT, sizeof(float));
}

static lv_status mpi_allreduce_f64(lv_comm *c, double *buf, int64_t n) {
  return mpi_allreduce(c, buf, n, MPI_DOUBLE, sizeof(double));
}

static lv_status mpi_broadcast(lv_comm *c, void *buf, size_t bytes, int root) {
  mpi_impl *m = c->impl;
  for (size_t off = 0; off < bytes; off += (size_t)MPI_PIECE) {
    int cnt = (int)(bytes - off < (size_t)MPI_PIECE ? bytes - off : (size_t)MPI_PIECE);
    LV_MPI(c, MPI_Bcast((char *)buf + off, cnt, MPI_BYTE, root, m->comm));
  }
  return NULL;
}

static lv_status mpi_barrier(lv_comm *c) {
  LV_MPI(c, MPI_Barrier(((mpi_impl *)c->impl)->comm));
  return NULL;
}

static _Noreturn void mpi_abort(lv_comm *c, int code) {
  MPI_Abort(((mpi_impl *)c->impl)->comm, code);
  exit(code); /* MPI_Abort does not return; this keeps the promise if it ever did */
}

static lv_status mpi_destroy(lv_comm *c) {
  mpi_impl *m = c->impl;
  lv_status s = NULL;
  if (m->comm != MPI_COMM_NULL && MPI_Comm_free(&m->comm) != MPI_SUCCESS)
    s = lv_status_make(LV_ERR_IO, "rank %d of %d: MPI_Comm_free failed", c->rank, c->size);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (m->we_initialized && !finalized && MPI_Finalize() != MPI_SUCCESS && !s)
    s = lv_status_make(LV_ERR_IO, "rank %d of %d: MPI_Finalize failed", c->rank, c->size);
  free(m);
  return s;
}

/* A non-blocking all-reduce: one MPI request per piece of at most MPI_PIECE floats. */
typedef struct mpi_req {
  int n;
  MPI_Request r[];
} mpi_req;

static lv_status mpi_iallreduce_f32(lv_comm *c, float *buf, int64_t n, void **out) {
  mpi_impl *m = c->impl;
  int pieces = (int)((n + MPI_PIECE - 1) / MPI_PIECE);
  mpi_req *q = calloc(1, sizeof *q + sizeof(MPI_Request) * (size_t)pieces);
  if (!q) return lv_status_make(LV_ERR_RESOURCE, "rank %d of %d: out of memory for an all-reduce request", c->rank, c->size);
  for (int i = 0; i < pieces; i++) {
    int64_t off = (int64_t)i * MPI_PIECE;
    int cnt = (int)(n - off < MPI_PIECE ? n - off : MPI_PIECE);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + off, cnt, MPI_FLOAT, MPI_SUM, m->comm, &q->r[i]);
    if (rc != MPI_SUCCESS) {
      /* The pieces already started cannot be cancelled (collectives): the caller stops
       * every rank (lv_comm_abort). */
      free(q);
      return mpi_err(c, rc, "MPI_Iallreduce");
    }
    q->n = i + 1;
  }
  *out = q;
  return NULL;
}

static lv_status mpi_test(lv_comm *c, void *req, bool *done) {
  mpi_req *q = req;
  int flag = 0;
  LV_MPI(c, MPI_Testall(q->n, q->r, &flag, MPI_STATUSES_IGNORE));
  *done = flag != 0;
  return NULL;
}

static lv_status mpi_wait(lv_comm *c, void *req) {
  mpi_req *q = req;
  int rc = MPI_Waitall(q->n, q->r, MPI_STATUSES_IGNORE);
  free(q);
  return rc == MPI_SUCCESS ? NULL : mpi_err(c, rc, "MPI_Waitall(MPI_Iallreduce)");
}

static const lv_comm_ops kMpiOps = {.allreduce_f32 = mpi_allreduce_f32,
                                    .allreduce_f64 = mpi_allreduce_f64,
                                    .iallreduce_f32 = mpi_iallreduce_f32,
                                    .test = mpi_test,
                                    .wait = mpi_wait,
                                    .broadcast = mpi_broadcast,
                                    .barrier = mpi_barrier,
                                    .abort = mpi_abort,
                                    .destroy = mpi_destroy};

/* "Open MPI v4.1.4": the library's version string up to its first comma or newline. */
static void library_name(char *out, size_t n) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
  int len = 0;
  if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) snprintf(v, sizeof v, "MPI");
  v[strcspn(v, ",\n")] = 0;
  snprintf(out, n, "%.100s", v);
}

lv_status lv_comm_mpi_init(lv_comm *c) {
  mpi_impl *m = calloc(1, sizeof *m);
  LV_ASSERT(m);
  m->comm = MPI_COMM_NULL;
  c->impl = m;
  c->ops = &kMpiOps;
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      free(m);
      return lv_status_make(LV_ERR_IO, "MPI_Init_thread failed (is this process started by mpirun?)");
    }
    m->we_initialized = true;
  }
  lv_status s = NULL;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &m->comm) != MPI_SUCCESS)
    s = lv_status_make(LV_ERR_IO, "MPI_Comm_dup(MPI_COMM_WORLD) failed");
  if (!s && MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS)
    s = lv_status_make(LV_ERR_IO, "MPI_Comm_set_errhandler failed");
  if (!s && (MPI_Comm_rank(m->comm, &c->rank) != MPI_SUCCESS || MPI_Comm_size(m->comm, &c->size) != MPI_SUCCESS))
    s = lv_status_make(LV_ERR_IO, "MPI_Comm_rank/MPI_Comm_size failed");
  /* Hosts: ranks that are the first of their shared-memory node, summed. */
  int hosts = 0;
  if (!s) {
    MPI_Comm node;
    int node_rank = 0;
    if (MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
      MPI_Comm_rank(node, &node_rank);
      MPI_Comm_free(&node);
    }
    int first = node_rank == 0;
    if (MPI_Allreduce(&first, &hosts, 1, MPI_INT, MPI_SUM, m->comm) != MPI_SUCCESS)
      s = mpi_err(c, MPI_ERR_OTHER, "MPI_Allreduce(hosts)");
  }
  if (s) {
    mpi_destroy(c);
    return s;
  }
  char lib[128], host[MPI_MAX_PROCESSOR_NAME + 1] = "";
  int hl = 0;
  library_name(lib, sizeof lib);
  MPI_Get_processor_name(host, &hl);
  snprintf(c->describe, sizeof c->describe, "mpi: %.100s, %d rank%s on %d host%s (rank %d on %.64s)%s", lib, c->size,
           c->size == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s", c->rank, host,
           m->we_initialized && provided < MPI_THREAD_FUNNELED ? ", thread support below FUNNELED" : "");
  return NULL;
}

#else

lv_status lv_comm_mpi_init(lv_comm *c) {
  (void)c;
  return lv_status_make(LV_ERR_INVALID, "this build has no MPI communicator (build with `make MPI=1`)");
}

#endif
