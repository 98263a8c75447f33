/* Convolution and pooling on the GPU: cuDNN first where it runs and takes the geometry
 * (cuda_cudnn.cu: conv2d and average pooling), else lingvoc's own kernels here: conv2d
 * as im2col + cuBLAS GEMM per chunk of images, as the CPU kernel (NHWC input, HWIO
 * filter, so a chunk's patch matrix times the filter is the NHWC output); the input
 * gradient gathers patch gradients back per input element (col2im without atomics, so
 * it is deterministic). Pooling: one thread per output (forward) or per input element
 * (backward, gathering from the windows that cover it, in the CPU's order); max pooling
 * always runs here (its argmax contract). */
#include "kernels/cuda/cuda_kernels.cuh"

/* Patch-matrix floats per chunk: large GEMMs, bounded scratch (128 MiB). */
#define CHUNK_FLOATS ((int64_t)32 << 20)

static int64_t patch_len(const lv_conv_geom *g) { return (int64_t)g->kh * g->kw * g->c; }
static int64_t image_rows(const lv_conv_geom *g) { return (int64_t)g->oh * g->ow; }

static size_t im2col_scratch(const lv_conv_geom *g) {
  int64_t per = image_rows(g) * patch_len(g);
  if (per <= 0 || g->n <= 0) return 1;
  int64_t nb = CHUNK_FLOATS / per;
  if (nb < 1) nb = 1;
  if (nb > g->n) nb = g->n;
  return (size_t)(nb * per);
}

/* Enough for either path, whether or not cuDNN is on: a call can always fall back to
 * im2col, and switching cuDNN between sizing and the call is harmless. */
extern "C" size_t lv_cuda_conv2d_scratch(lv_kctx *ctx, const lv_conv_geom *g) {
  size_t a = im2col_scratch(g), b = lv_cudnn_conv2d_scratch(g);
  return a > b ? a : b;
}

/* Images per chunk for the scratch the caller has. */
static int chunk_images(const lv_conv_geom *g, size_t scratch_floats) {
  int64_t per = image_rows(g) * patch_len(g);
  int64_t nb = per > 0 ? (int64_t)scratch_floats / per : g->n;
  LV_ASSERTF(nb >= 1 || g->n == 0, "conv2d: scratch of %zu floats holds no image (%lld each)", scratch_floats,
             (long long)per);
  if (nb > g->n) nb = g->n;
  return (int)(nb < 1 ? 1 : nb);
}

/* Splits flat index i of an [n, h, w, c] tensor. */
__device__ inline void nhwc(int64_t i, int h, int w, int c, int64_t *n, int *y, int *x, int *ch) {
  *ch = (int)(i % c);
  int64_t t = i / c;
  *x = (int)(t % w);
  t /= w;
  *y = (int)(t % h);
  *n = t / h;
}

__global__ void im2col_k(lv_conv_geom g, int cnt, const float *x, float *cols) {
  const int64_t K = (int64_t)g.kh * g.kw * g.c, R = (int64_t)g.oh * g.ow;
  LV_GRID_LOOP(i, cnt * R * K) {
    int64_t k = i % K, row = i / K;
    int64_t img = row / R, rr = row % R;
    int oh = (int)(rr / g.ow), ow = (int)(rr % g.ow);
    int c = (int)(k % g.c), kw = (int)((k / g.c) % g.kw), kh = (int)(k / ((int64_t)g.c * g.kw));
    int ih = oh * g.sh - g.pt + kh * g.dh, iw = ow * g.sw - g.pl + kw * g.dw;
    cols[i] = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w
                  ? x[((img * g.h + ih) * g.w + iw) * (int64_t)g.c + c]
                  : 0.0f;
  }
}

__global__ void col2im_k(lv_conv_geom g, int cnt, const float *gcols, float *gx, bool acc) {
  const int64_t K = (int64_t)g.kh * g.kw * g.c;
  LV_GRID_LOOP(i, (int64_t)cnt * g.h * g.w * g.c) {
    int64_t img;
    int ih, iw, c;
    nhwc(i, g.h, g.w, g.c, &img, &ih, &iw, &c);
    float s = 0.0f;
    for (int kh = 0; kh < g.kh; kh++) {
      int th = ih + g.pt - kh * g.dh;
      if (th < 0 || th % g.sh) continue;
      int oh = th / g.sh;
      if (oh >= g.oh) continue;
      for (int kw = 0; kw < g.kw; kw++) {
        int tw = iw + g.pl - kw * g.dw;
        if (tw < 0 || tw % g.sw) continue;
        int ow = tw / g.sw;
        if (ow >= g.ow) continue;
        s += gcols[((img * g.oh + oh) * g.ow + ow) * K + ((int64_t)kh * g.kw + kw) * g.c + c];
      }
    }
    gx[i] = acc ? gx[i] + s : s;
  }
}

static void im2col(lv_kctx *ctx, const lv_conv_geom *g, int cnt, const float *x, float *cols) {
  int64_t n = cnt * image_rows(g) * patch_len(g);
  if (n <= 0) return;
  im2col_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(*g, cnt, x, cols);
  LV_CUDA_LAUNCHED();
}

extern "C" void lv_cuda_conv2d_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, float *y,
                                   float *scratch, size_t scratch_floats) {
  if (lv_cudnn_conv2d_fwd(ctx, g, x, w, y, scratch, scratch_floats)) return;
  if (g->n <= 0 || g->o <= 0 || image_rows(g) <= 0) return;
  const int64_t K = patch_len(g), R = image_rows(g);
  const int nb = chunk_images(g, scratch_floats);
  for (int n0 = 0; n0 < g->n; n0 += nb) {
    int cnt = g->n - n0 < nb ? g->n - n0 : nb;
    im2col(ctx, g, cnt, x + (int64_t)n0 * g->h * g->w * g->c, scratch);
    lv_cuda_gemm(ctx, false, false, cnt * R, g->o, K, 1.0f, scratch, K, w, g->o, 0.0f, y + n0 * R * g->o, g->o);
  }
}

extern "C" void lv_cuda_conv2d_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w,
                                   const float *gy, float *gx, bool gx_acc, float *gw, bool gw_acc, float *scratch,
                                   size_t scratch_floats) {
  if (lv_cudnn_conv2d_bwd(ctx, g, x, w, gy, &gx, gx_acc, &gw, gw_acc, scratch, scratch_floats)) return;
  const int64_t K = patch_len(g), R = image_rows(g);
  if (gw && !gw_acc && (g->n <= 0 || R <= 0)) lv_cuda_zero(ctx, sizeof(float) * (size_t)(K * g->o), gw);
  if (g->n <= 0) return;
  if (R <= 0) {
    /* No output position: the input gradient is zero. */
    if (gx && !gx_acc) lv_cuda_zero(ctx, sizeof(float) * (size_t)g->n * g->h * g->w * g->c, gx);
    return;
  }
  const int nb = chunk_images(g, scratch_floats);
  for (int n0 = 0; n0 < g->n; n0 += nb) {
    int cnt = g->n - n0 < nb ? g->n - n0 : nb;
    const float *gyc = gy + n0 * R * g->o;
    const int64_t xoff = (int64_t)n0 * g->h * g->w * g->c;
    if (gw) {
      im2col(ctx, g, cnt, x + xoff, scratch);
      lv_cuda_gemm(ctx, true, false, K, g->o, cnt * R, 1.0f, scratch, K, gyc, g->o, gw_acc || n0 > 0 ? 1.0f : 0.0f,
                   gw, g->o);
    }
    if (gx) {
      lv_cuda_gemm(ctx, false, true, cnt * R, K, g->o, 1.0f, gyc, g->o, w, g->o, 0.0f, scratch, K);
      int64_t n = (int64_t)cnt * g->h * g->w * g->c;
      if (n > 0) {
        col2im_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(*g, cnt, scratch, gx + xoff, gx_acc);
        LV_CUDA_LAUNCHED();
      }
    }
  }
}

/* ---- pooling ---- */

__device__ inline void window(int o, int s, int pad, int k, int lim, int *b, int *e) {
  int start = o * s - pad;
  *b = start < 0 ? 0 : start;
  *e = start + k > lim ? lim : start + k;
}

/* Outputs whose window (before clipping) covers input position i: [*lo, *hi]. */
__device__ inline void covering(int i, int s, int pad, int k, int outs, int *lo, int *hi) {
  int a = i + pad - k + 1;
  *lo = a <= 0 ? 0 : (a + s - 1) / s;
  int b = (i + pad) / s;
  *hi = b < outs - 1 ? b : outs - 1;
}

__global__ void max_pool_fwd_k(lv_conv_geom g, const float *x, float *y, int32_t *argmax) {
  LV_GRID_LOOP(i, (int64_t)g.n * g.oh * g.ow * g.c) {
    int64_t n;
    int oh, ow, c;
    nhwc(i, g.oh, g.ow, g.c, &n, &oh, &ow, &c);
    int h0, h1, w0, w1;
    window(oh, g.sh, g.pt, g.kh, g.h, &h0, &h1);
    window(ow, g.sw, g.pl, g.kw, g.w, &w0, &w1);
    const float *xi = x + n * g.h * g.w * g.c;
    int32_t best = (int32_t)(((int64_t)h0 * g.w + w0) * g.c + c);
    float v = xi[best];
    for (int ih = h0; ih < h1; ih++)
      for (int iw = w0; iw < w1; iw++) {
        int32_t a = (int32_t)(((int64_t)ih * g.w + iw) * g.c + c);
        if (xi[a] > v) {
          v = xi[a];
          best = a;
        }
      }
    y[i] = v;
    argmax[i] = best;
  }
}

extern "C" void lv_cuda_max_pool_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, float *y, int32_t *argmax) {
  int64_t n = (int64_t)g->n * g->oh * g->ow * g->c;
  if (n <= 0) return;
  max_pool_fwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(*g, x, y, argmax);
  LV_CUDA_LAUNCHED();
}

/* mode 0: max (gy where argmax names this element), 1: average (gy / window size). */
__global__ void pool_bwd_k(lv_conv_geom g, int mode, const int32_t *argmax, const float *gy, float *gx, bool acc) {
  LV_GRID_LOOP(i, (int64_t)g.n * g.h * g.w * g.c) {
    int64_t n;
    int ih, iw, c;
    nhwc(i, g.h, g.w, g.c, &n, &ih, &iw, &c);
    const int32_t self = (int32_t)(((int64_t)ih * g.w + iw) * g.c + c);
    int oh0, oh1, ow0, ow1;
    covering(ih, g.sh, g.pt, g.kh, g.oh, &oh0, &oh1);
    covering(iw, g.sw, g.pl, g.kw, g.ow, &ow0, &ow1);
    float s = 0.0f;
    for (int oh = oh0; oh <= oh1; oh++)
      for (int ow = ow0; ow <= ow1; ow++) {
        int64_t o = ((n * g.oh + oh) * g.ow + ow) * g.c + c;
        if (mode == 0) {
          if (argmax[o] == self) s += gy[o];
        } else {
          int h0, h1, w0, w1;
          window(oh, g.sh, g.pt, g.kh, g.h, &h0, &h1);
          window(ow, g.sw, g.pl, g.kw, g.w, &w0, &w1);
          int cnt = (h1 - h0) * (w1 - w0);
          s += gy[o] * (cnt > 0 ? 1.0f / (float)cnt : 0.0f);
        }
      }
    gx[i] = acc ? gx[i] + s : s;
  }
}

extern "C" void lv_cuda_max_pool_bwd(lv_kctx *ctx, const lv_conv_geom *g, const int32_t *argmax, const float *gy,
                                     float *gx, bool acc) {
  int64_t n = (int64_t)g->n * g->h * g->w * g->c;
  if (n <= 0) return;
  pool_bwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(*g, 0, argmax, gy, gx, acc);
  LV_CUDA_LAUNCHED();
}

__global__ void avg_pool_fwd_k(lv_conv_geom g, const float *x, float *y) {
  LV_GRID_LOOP(i, (int64_t)g.n * g.oh * g.ow * g.c) {
    int64_t n;
    int oh, ow, c;
    nhwc(i, g.oh, g.ow, g.c, &n, &oh, &ow, &c);
    int h0, h1, w0, w1;
    window(oh, g.sh, g.pt, g.kh, g.h, &h0, &h1);
    window(ow, g.sw, g.pl, g.kw, g.w, &w0, &w1);
    float s = 0.0f;
    for (int ih = h0; ih < h1; ih++)
      for (int iw = w0; iw < w1; iw++) s += x[((n * g.h + ih) * g.w + iw) * g.c + c];
    int cnt = (h1 - h0) * (w1 - w0);
    y[i] = s * (cnt > 0 ? 1.0f / (float)cnt : 0.0f);
  }
}

extern "C" void lv_cuda_avg_pool_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, float *y) {
  if (lv_cudnn_avg_pool_fwd(ctx, g, x, y)) return;
  int64_t n = (int64_t)g->n * g->oh * g->ow * g->c;
  if (n <= 0) return;
  avg_pool_fwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(*g, x, y);
  LV_CUDA_LAUNCHED();
}

extern "C" void lv_cuda_avg_pool_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *gy, float *gx, bool acc) {
  if (lv_cudnn_avg_pool_bwd(ctx, g, gy, gx, acc)) return;
  int64_t n = (int64_t)g->n * g->h * g->w * g->c;
  if (n <= 0) return;
  pool_bwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(*g, 1, NULL, gy, gx, acc);
  LV_CUDA_LAUNCHED();
}
