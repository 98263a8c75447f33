/* The learner's and optimizer's calls into their backend (internal to src/optim): every
 * byte of a variable, gradient or optimizer slot is touched through the backend's
 * kernels or copies, never by host code, so the update runs where the variables live.
 * These wrappers are the only place that knows how a backend's functions are called. */
#ifndef LV_OPTIM_OPTIM_DEV_H
#define LV_OPTIM_OPTIM_DEV_H

#include <stddef.h>

#include "kernels/kernels.h"

/* The context the kernels take (the CPU kernels ignore it). */
static inline lv_kctx *lv_optim_ctx(const lv_backend *be) { return be->ctx; }
/* NULL when out of memory. */
static inline void *lv_optim_alloc(const lv_backend *be, size_t bytes) { return be->alloc(be->ctx, bytes); }
static inline void lv_optim_free(const lv_backend *be, void *p) {
  if (p) be->free(be->ctx, p);
}
/* Waits for the queued kernels, then copies. */
static inline void lv_optim_to_host(const lv_backend *be, void *dst, const void *src,
                                    size_t bytes) {
  be->sync(be->ctx);
  if (dst != src) be->copy(be->ctx, dst, src, bytes, LV_COPY_DEVICE_TO_HOST);
}
static inline void lv_optim_from_host(const lv_backend *be, void *dst, const void *src,
                                      size_t bytes) {
  if (dst != src) be->copy(be->ctx, dst, src, bytes, LV_COPY_HOST_TO_DEVICE);
}

static inline void lv_optim_copy(const lv_backend *be, void *dst, const void *src, size_t bytes) {
  be->copy(be->ctx, dst, src, bytes, LV_COPY_DEVICE_TO_DEVICE);
}

#endif
