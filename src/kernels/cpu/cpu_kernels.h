/* CPU kernels (the specification every other backend is tested against): plain
 * functions over host buffers, declared from kernels/kernels.def and collected in the
 * cpu:0 backend (cpu_table.c). Shapes and meanings are those of kernels.def. */
#ifndef LV_KERNELS_CPU_CPU_KERNELS_H
#define LV_KERNELS_CPU_CPU_KERNELS_H

#include "kernels/kernels.h"

/* Signatures come from kernels.def; most CPU kernels have no use for their context. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* The CPU backend's context: its kernels' thread count and the first kernel error. A
 * wrapping backend (guarded.c) makes its own with lv_cpu_ctx_init. */
struct lv_kctx {
  int num_threads; /* 0: OpenMP's current default */
  bool has_error;
  lv_kerror error;
};
void lv_cpu_ctx_init(lv_kctx *ctx);
/* The threads ctx's kernels split work over. */
int lv_cpu_threads(const lv_kctx *ctx);
/* Records err in ctx unless an earlier error is still there. */
void lv_cpu_record_error(lv_kctx *ctx, lv_kerror err);

/* Runs fn(arg, lo, hi, slot) over [0, n) cut in pieces of grain elements (the last one
 * shorter), handed out to the ctx's threads as they become available (cpu_par.c); slot
 * (< lv_cpu_threads(ctx)) is unique among the calls running at once, for per-thread
 * scratch; a NULL ctx uses OpenMP's thread count. Pieces depend only on n and grain,
 * so results do not depend on the threads. */
typedef void (*lv_cpu_par_fn)(void *arg, int64_t lo, int64_t hi, int slot);
void lv_cpu_par(lv_kctx *ctx, int64_t n, int64_t grain, lv_cpu_par_fn fn, void *arg);
/* Defines NAME, an lv_cpu_par piece function running BODY for each index VAR of its
 * piece, with J pointing at the caller's job struct of type T. */
#define LV_CPU_PAR_LOOP(NAME, T, VAR, ...)                                   \
  static void NAME(void *lv_arg_, int64_t lv_lo_, int64_t lv_hi_, int lv_slot_) { \
    const T *J = lv_arg_;                                                    \
    (void)lv_slot_;                                                          \
    for (int64_t VAR = lv_lo_; VAR < lv_hi_; VAR++) { __VA_ARGS__ }          \
  }
/* The same for elementwise loops that vectorize (no calls, no reductions): the arrays are
 * read through J, which the compiler cannot prove unaliased, so say it. */
#define LV_CPU_PAR_SIMD_LOOP(NAME, T, VAR, ...)                              \
  static void NAME(void *lv_arg_, int64_t lv_lo_, int64_t lv_hi_, int lv_slot_) { \
    const T *J = lv_arg_;                                                    \
    (void)lv_slot_;                                                          \
    _Pragma("omp simd") for (int64_t VAR = lv_lo_; VAR < lv_hi_; VAR++) { __VA_ARGS__ } \
  }
/* Pieces for a loop of n cheap independent iterations: at least min_grain each, at
 * most about 16 in all (claiming a piece costs an atomic on a shared line). */
static inline int64_t lv_cpu_grain(int64_t n, int64_t min_grain) {
  int64_t g = (n + 15) / 16;
  return g > min_grain ? g : min_grain;
}
/* True inside a piece of lv_cpu_par (where further calls run inline). */
bool lv_cpu_par_active(void);

extern const lv_kernel_table lv_cpu_kernels;
/* The cpu:0 instance (what lv_backend_get returns for cpu:0). */
const lv_backend *lv_cpu_backend(void);

/* Whether the CPU (and OS) have AVX-512 F/BW/VL/DQ, and AVX2 with FMA. */
bool lv_cpu_has_avx512(void);
bool lv_cpu_has_avx2_fma(void);
/* Makes OpenBLAS use the kernels this CPU supports (see cpu_gemm.c); idempotent. */
void lv_cpu_blas_init(void);
/* OpenBLAS's core name after lv_cpu_blas_init ("SkylakeX", "Haswell", ...). */
const char *lv_cpu_blas_core(void);
/* C = alpha A op(B) + beta C for 2-40 rows (A B) or 2-24 (A B^T) and a large B, without packing B
 * (cpu_gemm_small.c); false when it does not handle the shapes or the CPU (then
 * lv_cpu_gemm's OpenBLAS path does). */
bool lv_cpu_gemm_small(lv_kctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                       int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* Its instruction sets: the one picked for this process (the CPU's widest, or
 * LINGVOC_GEMM_SMALL's off/avx2/avx512), and the call with a given one (tests run each). */
typedef enum { LV_GEMM_SMALL_OFF, LV_GEMM_SMALL_AVX2, LV_GEMM_SMALL_AVX512 } lv_gemm_small_isa;
extern const char *const lv_gemm_small_isa_names[3];
lv_gemm_small_isa lv_cpu_gemm_small_isa(void);
bool lv_cpu_gemm_small_with(lv_gemm_small_isa isa, lv_kctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                            float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                            float *c, int64_t ldc);
/* Convolution with stride and dilation 1 as AVX-512 register tiles over padded input rows
 * (cpu_conv_direct.c), which lv_cpu_conv2d_fwd/bwd use where _ok says so; its scratch
 * (backward only) depends only on the shapes. */
bool lv_cpu_conv2d_direct_ok(const lv_conv_geom *g);
size_t lv_cpu_conv2d_direct_scratch(const lv_conv_geom *g);
void lv_cpu_conv2d_direct_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, float *y);
void lv_cpu_conv2d_direct_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                              float *gx, bool gx_acc, float *gw, bool gw_acc, float *scratch);
/* The im2col + GEMM convolution for every geometry (cpu_conv.c): what runs where the
 * direct one does not, and the reference its tests compare with. */
size_t lv_cpu_conv2d_gemm_scratch(lv_kctx *ctx, const lv_conv_geom *g);
void lv_cpu_conv2d_fwd_gemm(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, float *y,
                            float *scratch, size_t scratch_floats);
void lv_cpu_conv2d_bwd_gemm(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                            float *gx, bool gx_acc, float *gw, bool gw_acc, float *scratch, size_t scratch_floats);
/* y[i] = exp(x[i]) for x[i] <= 0: the vectorized exp of the softmax kernels
 * (cpu_softmax.c); within 1 ulp of the correctly rounded value down to -87.3, 0 below. */
void lv_cpu_exp_le0(int64_t n, const float *x, float *y);

#define K(name, params, args) void lv_cpu_##name params;
#define KR(type, name, params, args) type lv_cpu_##name params;
#include "kernels/kernels.def"
#undef K
#undef KR

#endif
