/* The CUDA backend's entry points for backends.c (C, no CUDA headers). Built only with
 * `make CUDA=1` (which defines LV_HAVE_CUDA for every C file). */
#ifndef LV_KERNELS_CUDA_CUDA_H
#define LV_KERNELS_CUDA_CUDA_H

#include "kernels/kernels.h"

/* A backend for cuda:<ordinal> (context, stream, cuBLAS handle, pinned staging); NULL
 * when the device is not there. Lives until the process ends. */
const lv_backend *lv_cuda_backend_create(int ordinal);

#endif
