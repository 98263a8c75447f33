/* The communicator vtable each implementation fills (comm_local.c in comm.c,
 * comm_mpi.c, comm_nccl.c). Only src/comm/ includes this. */
#ifndef LV_COMM_COMM_IMPL_H
#define LV_COMM_COMM_IMPL_H

#include "comm/comm.h"

typedef struct lv_comm_ops {
  lv_status (*allreduce_f32)(lv_comm *c, float *buf, int64_t n);
  lv_status (*allreduce_f64)(lv_comm *c, double *buf, int64_t n);
  /* Non-blocking (NULL: not supported): *req is the implementation's handle; wait frees it. */
  lv_status (*iallreduce_f32)(lv_comm *c, float *buf, int64_t n, void **req);
  lv_status (*test)(lv_comm *c, void *req, bool *done);
  lv_status (*wait)(lv_comm *c, void *req);
  lv_status (*broadcast)(lv_comm *c, void *buf, size_t bytes, int root);
  lv_status (*barrier)(lv_comm *c);
  void (*abort)(lv_comm *c, int code); /* does not return */
  lv_status (*destroy)(lv_comm *c); /* finalizes and frees impl (not c) */
} lv_comm_ops;

struct lv_comm {
  const lv_comm_ops *ops;
  lv_comm_kind kind;
  int rank, size;
  char describe[256];
  double reduce_seconds;
  int64_t reduce_bytes;
  void *impl;
};

/* Fill c (ops, rank, size, describe, impl) or return an error; c is zeroed on entry. */
lv_status lv_comm_mpi_init(lv_comm *c);
lv_status lv_comm_nccl_init(lv_comm *c);

#endif
