/* cuDNN for conv2d (forward, input gradient, filter gradient) and average pooling (forward
 * and backward), with the kernel table's semantics exactly; cuda_conv.cu calls these first
 * and runs lingvoc's own kernels when they decline. They decline when cuDNN is off
 * (LINGVOC_CUDNN=0, lv_cuda_use_cudnn), when it does not load on this machine, and for
 * geometries it cannot express: TF SAME padding that is larger at the bottom or right than
 * at the top or left (cuDNN pads symmetrically, so its output size differs from
 * lv_conv_geom's: that is the test), empty tensors, sizes beyond int32.
 *
 * Layouts: activations NHWC (CUDNN_TENSOR_NHWC). cuDNN has no HWIO filter layout, so the
 * filter is transposed into the conv scratch as OHWI (cuDNN's NHWC filter, [O, KH, KW, C])
 * and the filter gradient comes back as OHWI in the scratch and is transposed (added where
 * accumulating) into the HWIO gradient: conv2d_scratch holds both.
 *
 * Only deterministic algorithms: forward algorithms all are; backward-data ALGO_0 and
 * backward-filter ALGO_0 and ALGO_3 are not (cuDNN's reproducibility notes) and are never
 * chosen; of the rest, the first that cuDNN's heuristic (cudnnGet*Algorithm_v7, no timing,
 * so the same choice on every run of one machine) lists as deterministic and supported,
 * whose workspace cuDNN accepts and is at most WS_MAX. Math: CUDNN_FMA_MATH (full float32,
 * as cuBLAS's pedantic mode) unless TF32 is allowed (lv_cuda_allow_tf32). The workspace
 * comes from the backend's stream-ordered pool and goes back after the call; when it
 * cannot be had, the call runs lingvoc's kernel. A cuDNN call that returns an error
 * turns cuDNN off on that context (why is kept for lv_cuda_cudnn_describe) and the
 * kernel runs lingvoc's instead: nothing here exits.
 *
 * Max pooling stays on lingvoc's kernel: the kernel table's max_pool_bwd routes each
 * gradient to the argmax the forward saved (the first maximum of the window in (h, w)
 * order, as the CPU), while cuDNN's pooling backward finds the maximum again from x and y
 * with its own tie rule (and CUDNN_POOLING_MAX is not deterministic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.cuh"

extern "C" {
#include "base/env.h"
}

/* Plans kept per context (round robin): a network has a few conv and pooling shapes. */
#define LV_CUDNN_PLANS 32
/* An algorithm wanting more workspace than this is passed over. */
#define WS_MAX ((size_t)512 << 20)

typedef enum { PLAN_CONV, PLAN_AVG_POOL } plan_kind;

struct lv_cudnn_plan {
  bool used, ok, tf32;
  plan_kind kind;
  lv_conv_geom g;
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  cudnnPoolingDescriptor_t pool;
  bool fwd_ok, data_ok, filter_ok;
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t data;
  cudnnConvolutionBwdFilterAlgo_t filter;
  size_t ws_fwd, ws_data, ws_filter;
};

static bool g_use_set, g_use = true;
static lv_kctx *g_dnn_ctx[LV_DEVICE_MAX_ORDINAL];
static int64_t g_on, g_own;

static bool use_wanted(void) {
  if (!g_use_set) {
    g_use = !lv_env_get()->cuda_cudnn_off;
    g_use_set = true;
  }
  return g_use;
}

void lv_cudnn_init(lv_kctx *ctx) {
  ctx->use_cudnn = use_wanted();
  ctx->plans = (lv_cudnn_plan *)calloc(LV_CUDNN_PLANS, sizeof *ctx->plans);
  LV_ASSERT(ctx->plans);
  g_dnn_ctx[ctx->ordinal] = ctx;
}

extern "C" void lv_cuda_use_cudnn(bool use) {
  g_use_set = true;
  g_use = use;
  for (int i = 0; i < LV_DEVICE_MAX_ORDINAL; i++)
    if (g_dnn_ctx[i]) g_dnn_ctx[i]->use_cudnn = use;
}

extern "C" void lv_cuda_cudnn_counts(int64_t *on_cudnn, int64_t *own) {
  *on_cudnn = __atomic_load_n(&g_on, __ATOMIC_RELAXED);
  *own = __atomic_load_n(&g_own, __ATOMIC_RELAXED);
}

static bool ran_on_cudnn(void) {
  __atomic_fetch_add(&g_on, 1, __ATOMIC_RELAXED);
  return true;
}
static bool ran_own(void) {
  __atomic_fetch_add(&g_own, 1, __ATOMIC_RELAXED);
  return false;
}

/* Marks cuDNN unavailable on ctx with what failed and cuDNN's words for it. */
static void unavailable(lv_kctx *ctx, const char *what, cudnnStatus_t st) {
  char last[96] = "";
  const char *s = cudnnGetErrorString(st);
  cudnnGetLastErrorString(last, sizeof last);
  snprintf(ctx->dnn_why, sizeof ctx->dnn_why, "unavailable: %s: %s (%d)%s%s", what, s ? s : "?", (int)st,
           last[0] ? ": " : "", last);
  ctx->dnn_state = -1;
}

/* The handle on first use (cuDNN's sub-libraries load here, so a machine without them
 * only loses cuDNN). */
static bool ready(lv_kctx *ctx) {
  if (!ctx->use_cudnn) return false;
  if (ctx->dnn_state == 0) {
    size_t v = cudnnGetVersion();
    if (v / 10000 != CUDNN_MAJOR) {
      snprintf(ctx->dnn_why, sizeof ctx->dnn_why, "unavailable: libcudnn is version %zu, built for %d.x", v,
               CUDNN_MAJOR);
      ctx->dnn_state = -1;
      return false;
    }
    LV_CUDA_CHECK(cudaSetDevice(ctx->ordinal));
    cudnnStatus_t st = cudnnCreate(&ctx->dnn);
    if (st != CUDNN_STATUS_SUCCESS) {
      unavailable(ctx, "cudnnCreate", st);
      return false;
    }
    st = cudnnSetStream(ctx->dnn, ctx->stream);
    if (st != CUDNN_STATUS_SUCCESS) {
      unavailable(ctx, "cudnnSetStream", st);
      cudnnDestroy(ctx->dnn);
      return false;
    }
    ctx->dnn_state = 1;
  }
  return ctx->dnn_state == 1;
}

extern "C" bool lv_cuda_cudnn_describe(int ordinal, char *buf, size_t n) {
  lv_kctx *ctx = ordinal >= 0 && ordinal < LV_DEVICE_MAX_ORDINAL ? g_dnn_ctx[ordinal] : NULL;
  if (!ctx) {
    snprintf(buf, n, "no backend for cuda:%d", ordinal);
    return false;
  }
  if (!ctx->use_cudnn) {
    snprintf(buf, n, "off (LINGVOC_CUDNN=0 or lv_cuda_use_cudnn(false))");
    return false;
  }
  if (!ready(ctx)) {
    snprintf(buf, n, "%s", ctx->dnn_why);
    return false;
  }
  size_t v = cudnnGetVersion();
  snprintf(buf, n, "cuDNN %zu.%zu.%zu (built with %d.%d.%d; its CUDA runtime %zu)", v / 10000, v / 100 % 100,
           v % 100, CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL, cudnnGetCudartVersion());
  return true;
}

/* ---- plans: descriptors and algorithms per geometry ---- */

static void plan_free(lv_cudnn_plan *p) {
  if (p->x) cudnnDestroyTensorDescriptor(p->x);
  if (p->y) cudnnDestroyTensorDescriptor(p->y);
  if (p->w) cudnnDestroyFilterDescriptor(p->w);
  if (p->conv) cudnnDestroyConvolutionDescriptor(p->conv);
  if (p->pool) cudnnDestroyPoolingDescriptor(p->pool);
  memset(p, 0, sizeof *p);
}

#define TRY(expr)                                     \
  do {                                                \
    if ((expr) != CUDNN_STATUS_SUCCESS) return false; \
  } while (0)

/* cuDNN's descriptors take int dimensions and its kernels int element counts. */
static bool fits_int(const lv_conv_geom *g, int64_t out_c) {
  const int64_t lim = (int64_t)1 << 31;
  return (int64_t)g->n * g->h * g->w * g->c < lim && (int64_t)g->n * g->oh * g->ow * out_c < lim &&
         (int64_t)g->kh * g->kw * g->c * g->o < lim;
}

static bool nhwc_desc(cudnnTensorDescriptor_t *d, int n, int c, int h, int w) {
  TRY(cudnnCreateTensorDescriptor(d));
  TRY(cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, w));
  return true;
}

/* cuDNN's reproducibility notes: these use atomics in a way that changes the rounding from
 * run to run. */
static bool nondeterministic(cudnnConvolutionFwdAlgo_t) { return false; }
static bool nondeterministic(cudnnConvolutionBwdDataAlgo_t a) { return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0; }
static bool nondeterministic(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

/* The first of a heuristic's got entries that may run (supported, deterministic, full
 * float32 unless TF32 is allowed) and whose workspace ws_of(algo, &bytes) cuDNN gives and
 * is at most WS_MAX. */
template <typename Perf, typename Algo, typename WsOf>
static bool first_usable(const Perf *pf, int got, bool tf32, WsOf ws_of, Algo *algo, size_t *ws) {
  for (int i = 0; i < got; i++) {
    const Perf &e = pf[i];
    if (e.status != CUDNN_STATUS_SUCCESS || e.determinism != CUDNN_DETERMINISTIC || nondeterministic(e.algo)) continue;
    if (!tf32 && (e.mathType == CUDNN_TENSOR_OP_MATH || e.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) continue;
    if (ws_of(e.algo, ws) == CUDNN_STATUS_SUCCESS && *ws <= WS_MAX) {
      *algo = e.algo;
      return true;
    }
  }
  return false;
}

static void pick_algorithms(lv_kctx *ctx, lv_cudnn_plan *p) {
  int got = 0;
  cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  if (cudnnGetConvolutionForwardAlgorithm_v7(ctx->dnn, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                             &got, fp) == CUDNN_STATUS_SUCCESS)
    p->fwd_ok = first_usable(
        fp, got, p->tf32,
        [&](cudnnConvolutionFwdAlgo_t a, size_t *ws) {
          return cudnnGetConvolutionForwardWorkspaceSize(ctx->dnn, p->x, p->w, p->conv, p->y, a, ws);
        },
        &p->fwd, &p->ws_fwd);
  cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  if (cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx->dnn, p->w, p->y, p->conv, p->x,
                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                  dp) == CUDNN_STATUS_SUCCESS)
    p->data_ok = first_usable(
        dp, got, p->tf32,
        [&](cudnnConvolutionBwdDataAlgo_t a, size_t *ws) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx->dnn, p->w, p->y, p->conv, p->x, a, ws);
        },
        &p->data, &p->ws_data);
  cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx->dnn, p->x, p->y, p->conv, p->w,
                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                    wp) == CUDNN_STATUS_SUCCESS)
    p->filter_ok = first_usable(
        wp, got, p->tf32,
        [&](cudnnConvolutionBwdFilterAlgo_t a, size_t *ws) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx->dnn, p->x, p->y, p->conv, p->w, a, ws);
        },
        &p->filter, &p->ws_filter);
}

static bool conv_build(lv_kctx *ctx, lv_cudnn_plan *p) {
  const lv_conv_geom *g = &p->g;
  if (g->n <= 0 || g->c <= 0 || g->o <= 0 || g->oh <= 0 || g->ow <= 0 || !fits_int(g, g->o)) return false;
  if (!nhwc_desc(&p->x, g->n, g->c, g->h, g->w) || !nhwc_desc(&p->y, g->n, g->o, g->oh, g->ow)) return false;
  TRY(cudnnCreateFilterDescriptor(&p->w));
  TRY(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, g->o, g->c, g->kh, g->kw));
  TRY(cudnnCreateConvolutionDescriptor(&p->conv));
  TRY(cudnnSetConvolution2dDescriptor(p->conv, g->pt, g->pl, g->sh, g->sw, g->dh, g->dw, CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT));
  TRY(cudnnSetConvolutionMathType(p->conv, p->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  int n, c, h, w;
  TRY(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &c, &h, &w));
  if (n != g->n || c != g->o || h != g->oh || w != g->ow) return false; /* asymmetric padding */
  pick_algorithms(ctx, p);
  return p->fwd_ok || p->data_ok || p->filter_ok;
}

static bool pool_build(lv_kctx *ctx, lv_cudnn_plan *p) {
  const lv_conv_geom *g = &p->g;
  (void)ctx;
  if (g->n <= 0 || g->c <= 0 || g->oh <= 0 || g->ow <= 0 || !fits_int(g, g->c)) return false;
  if (!nhwc_desc(&p->x, g->n, g->c, g->h, g->w) || !nhwc_desc(&p->y, g->n, g->c, g->oh, g->ow)) return false;
  TRY(cudnnCreatePoolingDescriptor(&p->pool));
  /* Padded positions are not counted, as TF's and the CPU kernel's average. */
  TRY(cudnnSetPooling2dDescriptor(p->pool, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, CUDNN_PROPAGATE_NAN, g->kh,
                                  g->kw, g->pt, g->pl, g->sh, g->sw));
  int n, c, h, w;
  TRY(cudnnGetPooling2dForwardOutputDim(p->pool, p->x, &n, &c, &h, &w));
  return n == g->n && c == g->c && h == g->oh && w == g->ow;
}

/* The plan for (kind, geometry) on ctx, made on first use; NULL when cuDNN is off or
 * unavailable or does not take the geometry. */
static lv_cudnn_plan *plan_get(lv_kctx *ctx, plan_kind kind, const lv_conv_geom *g) {
  if (!ready(ctx)) return NULL;
  for (int i = 0; i < LV_CUDNN_PLANS; i++) {
    lv_cudnn_plan *p = &ctx->plans[i];
    if (p->used && p->kind == kind && p->tf32 == ctx->tf32 && !memcmp(&p->g, g, sizeof *g)) return p->ok ? p : NULL;
  }
  lv_cudnn_plan *p = &ctx->plans[ctx->next_plan];
  ctx->next_plan = (ctx->next_plan + 1) % LV_CUDNN_PLANS;
  plan_free(p);
  p->used = true;
  p->kind = kind;
  p->g = *g;
  p->tf32 = ctx->tf32;
  p->ok = kind == PLAN_CONV ? conv_build(ctx, p) : pool_build(ctx, p);
  return p->ok ? p : NULL;
}

/* ---- conv2d ---- */

/* dst = src^T, or dst += src^T: src [rows, cols] row-major, dst [cols, rows]. */
__global__ void transpose_k(int64_t rows, int64_t cols, const float *src, float *dst, bool acc) {
  LV_GRID_LOOP(i, rows * cols) {
    int64_t c = i / rows, r = i % rows;
    float v = src[r * cols + c];
    dst[i] = acc ? dst[i] + v : v;
  }
}

static void transpose(lv_kctx *ctx, int64_t rows, int64_t cols, const float *src, float *dst, bool acc) {
  int64_t n = rows * cols;
  if (n <= 0) return;
  transpose_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(rows, cols, src, dst, acc);
  LV_CUDA_LAUNCHED();
}

static int64_t patch_len(const lv_conv_geom *g) { return (int64_t)g->kh * g->kw * g->c; }

size_t lv_cudnn_conv2d_scratch(const lv_conv_geom *g) {
  int64_t ko = patch_len(g) * g->o;
  return ko > 0 ? 2 * (size_t)ko : 0;
}

/* Workspace of the pool for one call: *ws NULL with bytes 0; false when out of memory. */
static bool workspace(lv_kctx *ctx, size_t bytes, void **ws) {
  *ws = bytes ? lv_cuda_alloc(ctx, bytes) : NULL;
  return !bytes || *ws;
}

static const float kOne = 1.0f, kZero = 0.0f;

bool lv_cudnn_conv2d_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, float *y,
                         float *scratch, size_t scratch_floats) {
  lv_cudnn_plan *p = plan_get(ctx, PLAN_CONV, g);
  void *ws;
  if (!p || !p->fwd_ok || scratch_floats < lv_cudnn_conv2d_scratch(g) || !workspace(ctx, p->ws_fwd, &ws))
    return ran_own();
  float *w_ohwi = scratch;
  transpose(ctx, patch_len(g), g->o, w, w_ohwi, false);
  cudnnStatus_t st = cudnnConvolutionForward(ctx->dnn, &kOne, p->x, x, p->w, w_ohwi, p->conv, p->fwd, ws, p->ws_fwd,
                                             &kZero, p->y, y);
  lv_cuda_free(ctx, ws);
  if (st != CUDNN_STATUS_SUCCESS) {
    unavailable(ctx, "cudnnConvolutionForward", st);
    return ran_own();
  }
  return ran_on_cudnn();
}

/* Runs on cuDNN the parts it can, setting *gx / *gw to NULL for each part done; true
 * when nothing is left for lingvoc's kernel. */
bool lv_cudnn_conv2d_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                         float **gx, bool gx_acc, float **gw, bool gw_acc, float *scratch, size_t scratch_floats) {
  lv_cudnn_plan *p = plan_get(ctx, PLAN_CONV, g);
  if (!p || scratch_floats < lv_cudnn_conv2d_scratch(g)) return ran_own();
  const int64_t K = patch_len(g);
  float *w_ohwi = scratch, *gw_ohwi = scratch + K * g->o;
  void *ws;
  cudnnStatus_t st;
  if (*gw && p->filter_ok && workspace(ctx, p->ws_filter, &ws)) {
    /* beta 0: cuDNN does not read the output, whatever the scratch holds. */
    st = cudnnConvolutionBackwardFilter(ctx->dnn, &kOne, p->x, x, p->y, gy, p->conv, p->filter, ws, p->ws_filter,
                                        &kZero, p->w, gw_ohwi);
    lv_cuda_free(ctx, ws);
    if (st == CUDNN_STATUS_SUCCESS) {
      transpose(ctx, g->o, K, gw_ohwi, *gw, gw_acc);
      *gw = NULL;
    } else {
      unavailable(ctx, "cudnnConvolutionBackwardFilter", st);
    }
  }
  if (*gx && p->data_ok && ctx->dnn_state == 1 && workspace(ctx, p->ws_data, &ws)) {
    transpose(ctx, K, g->o, w, w_ohwi, false);
    st = cudnnConvolutionBackwardData(ctx->dnn, &kOne, p->w, w_ohwi, p->y, gy, p->conv, p->data, ws, p->ws_data,
                                      gx_acc ? &kOne : &kZero, p->x, *gx);
    lv_cuda_free(ctx, ws);
    if (st == CUDNN_STATUS_SUCCESS) *gx = NULL;
    else unavailable(ctx, "cudnnConvolutionBackwardData", st);
  }
  return *gx || *gw ? ran_own() : ran_on_cudnn();
}

/* ---- average pooling ---- */

bool lv_cudnn_avg_pool_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, float *y) {
  lv_cudnn_plan *p = plan_get(ctx, PLAN_AVG_POOL, g);
  if (!p) return ran_own();
  cudnnStatus_t st = cudnnPoolingForward(ctx->dnn, p->pool, &kOne, p->x, x, &kZero, p->y, y);
  if (st != CUDNN_STATUS_SUCCESS) {
    unavailable(ctx, "cudnnPoolingForward", st);
    return ran_own();
  }
  return ran_on_cudnn();
}

bool lv_cudnn_avg_pool_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *gy, float *gx, bool acc) {
  lv_cudnn_plan *p = plan_get(ctx, PLAN_AVG_POOL, g);
  if (!p) return ran_own();
  /* Average pooling's gradient needs neither y nor x; the kernel table passes neither,
   * so gy and gx (the right shapes, valid memory) stand in for them. */
  cudnnStatus_t st = cudnnPoolingBackward(ctx->dnn, p->pool, &kOne, p->y, gy, p->y, gy, p->x, gx,
                                          acc ? &kOne : &kZero, p->x, gx);
  if (st != CUDNN_STATUS_SUCCESS) {
    unavailable(ctx, "cudnnPoolingBackward", st);
    return ran_own();
  }
  return ran_on_cudnn();
}
