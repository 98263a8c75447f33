/* The device -> backend map: cpu:0 always, other devices once registered; with CUDA
 * (LV_HAVE_CUDA), a visible GPU's backend is opened the first time it is asked for. */
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>

#include "kernels/cpu/cpu_kernels.h"
#ifdef LV_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

static _Atomic(const lv_backend *) g_backends[LV_DEVICE_KIND_COUNT][LV_DEVICE_MAX_ORDINAL];

static bool in_range(lv_device d) {
  return (unsigned)d.kind < LV_DEVICE_KIND_COUNT && d.ordinal >= 0 && d.ordinal < LV_DEVICE_MAX_ORDINAL;
}

#ifdef LV_HAVE_CUDA
static pthread_mutex_t g_open_mu = PTHREAD_MUTEX_INITIALIZER;

static const lv_backend *open_cuda(lv_device d) {
  pthread_mutex_lock(&g_open_mu);
  const lv_backend *b = atomic_load(&g_backends[d.kind][d.ordinal]);
  if (!b && d.ordinal < lv_cuda_device_count()) {
    b = lv_cuda_backend_create(d.ordinal);
    if (b) atomic_store(&g_backends[d.kind][d.ordinal], b);
  }
  pthread_mutex_unlock(&g_open_mu);
  return b;
}
#else
int lv_cuda_device_count(void) { return -1; }
void lv_cuda_allow_tf32(bool allow) { (void)allow; }
void lv_cuda_use_cudnn(bool use) { (void)use; }
bool lv_cuda_cudnn_describe(int ordinal, char *buf, size_t n) {
  (void)ordinal;
  if (n) snprintf(buf, n, "not built (no CUDA)");
  return false;
}
void lv_cuda_cudnn_counts(int64_t *on_cudnn, int64_t *own) { *on_cudnn = *own = 0; }
#endif

const lv_backend *lv_backend_get(lv_device d) {
  if (lv_device_is_host(d)) return lv_cpu_backend();
  if (!in_range(d)) return NULL;
  const lv_backend *b = atomic_load(&g_backends[d.kind][d.ordinal]);
#ifdef LV_HAVE_CUDA
  if (!b && d.kind == LV_DEVICE_CUDA) b = open_cuda(d);
#endif
  return b;
}

bool lv_backend_register(const lv_backend *b) {
  if (!b || !in_range(b->device) || lv_device_is_host(b->device)) return false;
  atomic_store(&g_backends[b->device.kind][b->device.ordinal], b);
  return true;
}

void lv_backend_unregister(lv_device d) {
  if (in_range(d) && !lv_device_is_host(d)) atomic_store(&g_backends[d.kind][d.ordinal], NULL);
}
