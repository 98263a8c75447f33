/* The CPU backend (cpu:0): host memory, its context (threads, kernel error) and the
 * kernel table generated from kernels.def. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

void lv_cpu_ctx_init(lv_kctx *ctx) { memset(ctx, 0, sizeof *ctx); }

int lv_cpu_threads(const lv_kctx *ctx) {
  return ctx->num_threads > 0 ? ctx->num_threads : omp_get_max_threads();
}

void lv_cpu_record_error(lv_kctx *ctx, lv_kerror err) {
  if (ctx->has_error) return;
  ctx->has_error = true;
  ctx->error = err;
}

bool lv_cpu_error_take(lv_kctx *ctx, lv_kerror *err) {
  if (!ctx->has_error) return false;
  *err = ctx->error;
  ctx->has_error = false;
  return true;
}

static void *cpu_alloc(lv_kctx *ctx, size_t bytes) {
  (void)ctx;
  void *p = NULL;
  size_t n = bytes ? (bytes + 63) & ~(size_t)63 : 64;
  return posix_memalign(&p, 64, n) == 0 ? p : NULL;
}

static void cpu_free(lv_kctx *ctx, void *p) {
  (void)ctx;
  free(p);
}

static void cpu_copy(lv_kctx *ctx, void *dst, const void *src, size_t bytes, lv_copy_kind kind) {
  (void)ctx;
  (void)kind;
  if (bytes) memmove(dst, src, bytes);
}

static void cpu_sync(lv_kctx *ctx) { (void)ctx; }

const lv_kernel_table lv_cpu_kernels = {
    .name = "cpu",
#define K(name, params, args) .name = lv_cpu_##name,
#define KR(type, name, params, args) K(name, params, args)
#include "kernels/kernels.def"
#undef K
#undef KR
};

static lv_kctx g_cpu_ctx;

static const lv_backend g_cpu_backend = {
    .name = "cpu:0",
    .device = {LV_DEVICE_CPU, 0},
    .ctx = &g_cpu_ctx,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .kernels = &lv_cpu_kernels,
};

const lv_backend *lv_cpu_backend(void) { return &g_cpu_backend; }

void lv_set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  g_cpu_ctx.num_threads = n;
  /* Every kernel splits its work with lv_cpu_par (cpu_par.c), which reads the context; no
   * kernel opens an OpenMP team any more (idle OpenMP workers spin for the cores the
   * pool's workers need). OpenMP's default still sets the thread count of a NULL
   * context. OpenBLAS stays single-threaded (see cpu_gemm.c). */
  omp_set_num_threads(n);
  lv_cpu_blas_init();
}

int lv_get_num_threads(void) { return lv_cpu_threads(&g_cpu_ctx); }
