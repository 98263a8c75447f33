/* Communicators: what replicas of one training job use to agree (Lingvo's sync
 * replicas; Marian's communicator, llm.c's one gradient buffer). A communicator joins
 * `size` ranks, numbered 0..size-1; every rank calls the same collectives in the same
 * order, and each collective returns on a rank once that rank's part is done.
 *
 * Implementations, picked at start from how the process was launched
 * (lv_comm_create_auto) and named in the log:
 *  - local: one process, one rank; every collective is a no-op.
 *  - mpi:   one rank per process (mpirun -np N, one host or several). Buffers are host
 *           memory; all-reduce runs MPI_Allreduce in place. Built when the Makefile's
 *           MPI=1 (the default; Open MPI from Debian).
 *  - nccl:  one rank per GPU process, bootstrapped over MPI; buffers of allreduce_f32
 *           are device memory. Built only with CUDA=1 (comm_nccl.c).
 *
 * Errors are statuses naming the collective and the rank. lv_comm_abort is the one
 * call that ends the process: a rank that fails between collectives cannot return
 * without leaving its peers blocked in the next one, so it stops them all.
 *
 * Ownership: buffers are borrowed for the call. lv_comm_destroy finalizes the library
 * (MPI_Finalize) and frees the communicator. */
#ifndef LV_COMM_COMM_H
#define LV_COMM_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/env.h"
#include "base/status.h"

typedef enum { LV_COMM_LOCAL, LV_COMM_MPI, LV_COMM_NCCL, LV_COMM_KIND_COUNT } lv_comm_kind;
extern const char *const lv_comm_kind_names[LV_COMM_KIND_COUNT]; /* "local", "mpi", "nccl" */

typedef struct lv_comm lv_comm;

/* The launcher's view, read from the environment before any library is initialized
 * (Open MPI's OMPI_COMM_WORLD_SIZE / _RANK, MPICH's and Slurm's PMI_SIZE / PMI_RANK):
 * *size = 1, *rank = 0 and false when no MPI launcher started this process. The _env
 * form reads the given variables (base/env.h) instead of the process's. */
bool lv_comm_launched_by_mpi(int *size, int *rank);
bool lv_comm_launched_by_mpi_env(const lv_env *env, int *size, int *rank);
/* Whether this build has kind (local always; mpi with MPI=1; nccl with CUDA=1). */
bool lv_comm_kind_built(lv_comm_kind kind);

/* mpi when an MPI launcher started the process, else local. Launched by mpirun in a
 * build without MPI is an error (the ranks would train independently). */
lv_status lv_comm_create_auto(lv_comm **out);
lv_status lv_comm_create(lv_comm_kind kind, lv_comm **out);
/* Finalizes; NULL is a no-op. */
lv_status lv_comm_destroy(lv_comm *c);

int lv_comm_rank(const lv_comm *c);
int lv_comm_size(const lv_comm *c);
lv_comm_kind lv_comm_kind_of(const lv_comm *c);
/* For the log: "mpi: Open MPI v4.1.4, 2 ranks on 1 host (hostname)". */
const char *lv_comm_describe(const lv_comm *c);

/* In place: buf[i] = sum over ranks of buf[i]. allreduce_f32's buffer lives where the
 * communicator's kind says (host for local/mpi, device for nccl); allreduce_f64's is
 * always host memory (small control values: metrics, flags). Every rank gets the same
 * bits. */
lv_status lv_comm_allreduce_f32(lv_comm *c, float *buf, int64_t n);
lv_status lv_comm_allreduce_f64(lv_comm *c, double *buf, int64_t n);
/* Non-blocking all-reduce (sum, in place) of host float32 buf[0..n), for overlapping the
 * gradient reduction with backward: iallreduce_f32 starts it, test advances it (MPI
 * progresses non-blocking collectives inside its calls) and says whether it is done,
 * wait completes it and frees the request. buf must not be touched in between. Every
 * rank starts the same reductions in the same order. Possible when
 * lv_comm_can_overlap: mpi (MPI_Iallreduce) and local (done at once); not nccl. */
typedef struct lv_comm_request lv_comm_request;
bool lv_comm_can_overlap(const lv_comm *c);
lv_status lv_comm_iallreduce_f32(lv_comm *c, float *buf, int64_t n, lv_comm_request **req);
lv_status lv_comm_test(lv_comm *c, lv_comm_request *req, bool *done);
lv_status lv_comm_wait(lv_comm *c, lv_comm_request *req);
/* Host memory: root's bytes are copied to every other rank. */
lv_status lv_comm_broadcast(lv_comm *c, void *buf, size_t bytes, int root);
lv_status lv_comm_barrier(lv_comm *c);
/* Logs "rank r of n: message; stopping all ranks" and ends every rank's process with
 * exit code `code` (local: exits this process). Never returns. */
_Noreturn void lv_comm_abort(lv_comm *c, int code, const char *message);

/* Seconds spent in allreduce_f32 (and in the non-blocking calls: the time the caller
 * waited, not the time the reduction ran beside it) and the bytes reduced, since
 * creation. */
double lv_comm_allreduce_seconds(const lv_comm *c);
int64_t lv_comm_allreduce_bytes(const lv_comm *c);

#endif
