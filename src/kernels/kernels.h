/* Backends and their kernels. A device (base/device.h) has at most one backend instance:
 * its context (lv_kctx, defined by each backend: threads, streams, handles, the error
 * flag), memory (alloc, free, copy), sync, and a kernel table of plain functions over
 * raw device pointers and sizes (no tensors, no autodiff) listed once in kernels.def.
 * Every kernel takes the instance's context first. src/kernels/cpu is the specification
 * (cpu:0, host memory); src/kernels/cuda fills the same table on a GPU and is tested
 * against it (tests/check_backend_ops.c); src/kernels/guarded.c is a test backend whose memory is unreachable outside its
 * kernels. Gradient kernels take `acc`: true adds into the destination, false overwrites
 * it (a fresh gradient buffer needs no memset). */
#ifndef LV_KERNELS_KERNELS_H
#define LV_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/device.h"
#include "base/dtype.h"
#include "kernels/activation.h"

#define LV_KMAX_RANK 8

/* Elements per block of the learner's ordered sums (optim_sum). */
#define LV_OPTIM_SUM_BLOCK 8192

/* One Adafactor update's shape and hyperparameters (kernels.def: optim_adafactor). */
typedef struct lv_adafactor_args {
  int64_t rows, cols; /* the variable as [rows, cols] */
  bool factored;      /* factored second moments (vr_row [rows], vc_col [cols]) */
  bool norm_rows;     /* factored: the row accumulator is the one normalised by its mean */
  bool param_scale;   /* multiply_by_parameter_scale */
  float lr, decay, eps1, eps2;
  float clip;  /* clipping_threshold; 0: no clipping */
  float beta1; /* 0: no first moment */
} lv_adafactor_args;

/* Elementwise binary ops; reduce kinds are LV_RED_*. */
/* MAX / MIN give the larger / smaller operand; LT .. NE give 1.0f where the comparison
 * holds, else 0.0f (in the order of ops.h's lv_compare). */
typedef enum {
  LV_BIN_ADD, LV_BIN_SUB, LV_BIN_MUL, LV_BIN_DIV, LV_BIN_MAX, LV_BIN_MIN,
  LV_BIN_LT, LV_BIN_LE, LV_BIN_GT, LV_BIN_GE, LV_BIN_EQ, LV_BIN_NE, LV_BIN_COUNT
} lv_binary_op;
enum { LV_RED_SUM, LV_RED_MEAN, LV_RED_MAX };

/* A broadcast: the output shape and each operand's strides over it (0 where stretched). */
typedef struct lv_bcast {
  int rank;
  int64_t shape[LV_KMAX_RANK];
  int64_t sa[LV_KMAX_RANK], sb[LV_KMAX_RANK];
} lv_bcast;

/* A three-operand broadcast (select): the output shape and the strides of cond, a, b. */
typedef struct lv_bcast3 {
  int rank;
  int64_t shape[LV_KMAX_RANK];
  int64_t s[3][LV_KMAX_RANK];
} lv_bcast3;

/* Convolution geometry, NHWC input, HWIO filter. */
typedef struct lv_conv_geom {
  int n, h, w, c;       /* input */
  int kh, kw, o;        /* filter */
  int sh, sw, dh, dw;   /* strides, dilations */
  int pt, pl;           /* top / left padding */
  int oh, ow;           /* output */
} lv_conv_geom;

/* An error a kernel found in its data (an id out of range). Kernels cannot return it
 * (on a GPU they finish later), so the backend context keeps the first one until the
 * step's next sync point takes it (graph.h): tag names the launch (the op front end's
 * check), pos the offending position, value the bad id, bound the exclusive limit. */
typedef struct lv_kerror {
  uint64_t tag;
  int64_t pos, value, bound;
} lv_kerror;

typedef struct lv_kctx lv_kctx; /* a backend instance's context; each backend defines it */

typedef struct lv_kernel_table {
  const char *name;
#define K(name, params, args) void (*name) params;
#define KR(type, name, params, args) type (*name) params;
#include "kernels/kernels.def"
#undef K
#undef KR
} lv_kernel_table;

typedef enum { LV_COPY_HOST_TO_DEVICE, LV_COPY_DEVICE_TO_HOST, LV_COPY_DEVICE_TO_DEVICE } lv_copy_kind;

/* One backend instance per device. Everything a device's memory holds is reached
 * through it: the step arena and the variable store allocate with alloc, the host sees
 * data only through copy (after sync for results of queued kernels). */
typedef struct lv_backend {
  const char *name;           /* "cpu:0" */
  lv_device device;
  lv_kctx *ctx;
  void *(*alloc)(lv_kctx *ctx, size_t bytes); /* 64-byte aligned; NULL when out of memory */
  void (*free)(lv_kctx *ctx, void *p);
  void (*copy)(lv_kctx *ctx, void *dst, const void *src, size_t bytes, lv_copy_kind kind);
  void (*sync)(lv_kctx *ctx); /* waits for queued kernels (a no-op on the CPU) */
  const lv_kernel_table *kernels;
} lv_backend;

const lv_backend *lv_backend_get(lv_device d); /* NULL when this build has none */
/* Makes b the backend of b->device (a test backend, a GPU found at start-up) until
 * unregistered; false if the ordinal is out of range or b names cpu:0 (the CPU backend
 * is always there). b must stay valid while registered. */
bool lv_backend_register(const lv_backend *b);
void lv_backend_unregister(lv_device d);

/* The CPU backend (cpu:0) owns the kernels' thread count (OpenMP; 0 = all cores).
 * OpenBLAS itself stays single-threaded and the CPU GEMM kernel splits large products
 * over these threads (OpenBLAS's own threads fight OpenMP's for the cores). Also makes
 * OpenBLAS use the CPU's AVX2/AVX-512 kernels where its model detection fell back to
 * generic ones. */
void lv_set_num_threads(int n);
int lv_get_num_threads(void);

/* CUDA (src/kernels/cuda, built with `make CUDA=1`): the GPUs this process sees, or -1
 * when this build has no CUDA. lv_backend_get(cuda:N) opens the backend of a visible GPU
 * on first use. */
int lv_cuda_device_count(void);
/* Lets cuBLAS use TF32 tensor cores for float32 GEMMs (off by default, for float32
 * parity with the CPU; the environment variable LINGVOC_CUDA_TF32=1 does the same).
 * No effect without CUDA. */
void lv_cuda_allow_tf32(bool allow);
/* cuDNN for conv2d (forward, input and filter gradients) and average pooling (forward and
 * backward) on CUDA backends: on by default where cuDNN loads and takes the geometry
 * (symmetric padding, deterministic algorithms only); LINGVOC_CUDNN=0 or
 * lv_cuda_use_cudnn(false) keeps lingvoc's own kernels (im2col + cuBLAS, pooling kernels);
 * max pooling always runs lingvoc's kernels (the argmax contract, docs/gpu.md). No effect
 * without CUDA. */
void lv_cuda_use_cudnn(bool use);
/* What cuDNN is on cuda:<ordinal> once a conv or pooling kernel has asked for it (or
 * this call has): "cuDNN 9.x.y" when it runs, else why not ("not built", "off
 * (LINGVOC_CUDNN=0)", "unavailable: ..."). Returns true when it runs. */
bool lv_cuda_cudnn_describe(int ordinal, char *buf, size_t n);
/* Kernel calls that ran on cuDNN and calls of the same kernels that ran lingvoc's own
 * (cuDNN off, unavailable, geometry not taken), since the process started. */
void lv_cuda_cudnn_counts(int64_t *on_cudnn, int64_t *own);

#endif
