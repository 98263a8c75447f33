/* The fused LSTM gate step and the learner's update on the GPU: TF1's optimizer rules in
 * float32 in TF's order of operations (the CPU's), and the ordered norms: one partial
 * sum per LV_OPTIM_SUM_BLOCK elements, then the partials added in block order, in
 * double, so the result does not depend on the launch. The LSTM's sigmoid and tanh are
 * the CPU's (kernels/kernel_math.h). */
#include "kernels/cuda/cuda_kernels.cuh"
#include "kernels/kernel_math.h"

__device__ inline bool padded(const float *pad, int64_t r) { return pad && pad[r] > 0.5f; }

__global__ void lstm_fwd_k(int64_t b, int64_t h, const float *gates, const float *c_prev, const float *m_prev,
                           const float *pad, float fgb, float cap, bool out_nl, float *c_out, float *m_out) {
  LV_GRID_LOOP(i, b * h) {
    int64_t r = i / h, j = i % h;
    if (padded(pad, r)) {
      c_out[i] = c_prev[i];
      m_out[i] = m_prev[i];
      continue;
    }
    const float *ii = gates + r * 4 * h, *ig = ii + h, *fg = ig + h, *og = fg + h;
    float nc = lv_ksigm(fg[j] + fgb) * c_prev[i] + lv_ksigm(ig[j]) * lv_ktanh(ii[j]);
    if (cap > 0) nc = nc < -cap ? -cap : (nc > cap ? cap : nc);
    c_out[i] = nc;
    m_out[i] = lv_ksigm(og[j]) * (out_nl ? lv_ktanh(nc) : nc);
  }
}

extern "C" void lv_cuda_lstm_step_fwd(lv_kctx *ctx, int64_t b, int64_t h, const float *gates, const float *c_prev,
                                      const float *m_prev, const float *pad, float fgb, float cap, bool out_nl,
                                      float *c_out, float *m_out) {
  if (b * h <= 0) return;
  lstm_fwd_k<<<lv_cuda_blocks(ctx, b * h), LV_CUDA_THREADS, 0, ctx->stream>>>(b, h, gates, c_prev, m_prev, pad, fgb,
                                                                              cap, out_nl, c_out, m_out);
  LV_CUDA_LAUNCHED();
}

__device__ inline void put(float *p, bool acc, float v) { *p = acc ? *p + v : v; }

__global__ void lstm_bwd_k(int64_t b, int64_t h, const float *gates, const float *c_prev, const float *pad, float fgb,
                           float cap, bool out_nl, const float *gc, const float *gm, float *ggates, bool ggates_acc,
                           float *gc_prev, bool gc_acc, float *gm_prev, bool gm_acc) {
  LV_GRID_LOOP(i, b * h) {
    int64_t r = i / h, j = i % h;
    float *gg = ggates ? ggates + r * 4 * h : NULL;
    if (padded(pad, r)) {
      if (gg)
        for (int q = 0; q < 4; q++) put(gg + q * h + j, ggates_acc, 0.0f);
      if (gc_prev) put(gc_prev + i, gc_acc, gc ? gc[i] : 0.0f);
      if (gm_prev) put(gm_prev + i, gm_acc, gm ? gm[i] : 0.0f);
      continue;
    }
    const float *ii = gates + r * 4 * h, *ig = ii + h, *fg = ig + h, *og = fg + h;
    const float cp = c_prev[i];
    float f = lv_ksigm(fg[j] + fgb), in = lv_ksigm(ig[j]), t = lv_ktanh(ii[j]), o = lv_ksigm(og[j]);
    float nc = f * cp + in * t;
    bool pass = true;
    if (cap > 0) {
      pass = nc >= -cap && nc <= cap;
      nc = nc < -cap ? -cap : (nc > cap ? cap : nc);
    }
    float dm = gm ? gm[i] : 0.0f, dc = gc ? gc[i] : 0.0f, dog;
    if (out_nl) {
      float tc = lv_ktanh(nc);
      dog = dm * tc;
      dc += dm * o * (1.0f - tc * tc);
    } else {
      dog = dm * nc;
      dc += dm * o;
    }
    if (!pass) dc = 0.0f;
    if (gg) {
      put(gg + j, ggates_acc, dc * in * (1.0f - t * t));
      put(gg + h + j, ggates_acc, dc * t * in * (1.0f - in));
      put(gg + 2 * h + j, ggates_acc, dc * cp * f * (1.0f - f));
      put(gg + 3 * h + j, ggates_acc, dog * o * (1.0f - o));
    }
    if (gc_prev) put(gc_prev + i, gc_acc, dc * f);
    if (gm_prev) put(gm_prev + i, gm_acc, 0.0f);
  }
}

extern "C" void lv_cuda_lstm_step_bwd(lv_kctx *ctx, int64_t b, int64_t h, const float *gates, const float *c_prev,
                                      const float *pad, float fgb, float cap, bool out_nl, const float *gc,
                                      const float *gm, float *ggates, bool ggates_acc, float *gc_prev, bool gc_acc,
                                      float *gm_prev, bool gm_acc) {
  if (b * h <= 0) return;
  lstm_bwd_k<<<lv_cuda_blocks(ctx, b * h), LV_CUDA_THREADS, 0, ctx->stream>>>(
      b, h, gates, c_prev, pad, fgb, cap, out_nl, gc, gm, ggates, ggates_acc, gc_prev, gc_acc, gm_prev, gm_acc);
  LV_CUDA_LAUNCHED();
}

/* ---- ordered norms ---- */

#define SUM_THREADS 256

__global__ void sum_blocks_k(int64_t n, const float *x, bool absolute, double *scratch) {
  __shared__ double shd[32];
  int64_t lo = (int64_t)blockIdx.x * LV_OPTIM_SUM_BLOCK;
  int64_t hi = lo + LV_OPTIM_SUM_BLOCK < n ? lo + LV_OPTIM_SUM_BLOCK : n;
  double s = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
    s += absolute ? fabs((double)x[i]) : (double)x[i] * (double)x[i];
  s = lv_block_sum(s, shd);
  if (threadIdx.x == 0) scratch[blockIdx.x] = s;
}

__global__ void sum_partials_k(int64_t nb, const double *scratch, double *out) {
  double t = 0;
  for (int64_t b = 0; b < nb; b++) t += scratch[b];
  *out = t;
}

extern "C" void lv_cuda_optim_sum(lv_kctx *ctx, int64_t n, const float *x, bool absolute, double *scratch,
                                  double *out) {
  const int64_t nb = (n + LV_OPTIM_SUM_BLOCK - 1) / LV_OPTIM_SUM_BLOCK;
  LV_ASSERTF(nb < (1ll << 31), "optim_sum: %lld blocks", (long long)nb);
  if (nb > 0) {
    sum_blocks_k<<<(unsigned)nb, SUM_THREADS, 0, ctx->stream>>>(n, x, absolute, scratch);
    LV_CUDA_LAUNCHED();
  }
  sum_partials_k<<<1, 1, 0, ctx->stream>>>(nb, scratch, out);
  LV_CUDA_LAUNCHED();
}

/* ---- elementwise updates ---- */


__global__ void optim_fill_k(int64_t n, float *x, float v) {
  LV_GRID_LOOP(i, n) x[i] = v;
}
extern "C" void lv_cuda_optim_fill(lv_kctx *ctx, int64_t n, float *x, float v) {
  if (n <= 0) return;
  optim_fill_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, v);
  LV_CUDA_LAUNCHED();
}

__global__ void optim_scale_k(int64_t n, float *x, float s) {
  LV_GRID_LOOP(i, n) x[i] *= s;
}
extern "C" void lv_cuda_optim_scale(lv_kctx *ctx, int64_t n, float *x, float s) {
  if (n <= 0) return;
  optim_scale_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, s);
  LV_CUDA_LAUNCHED();
}

__global__ void optim_lp_add_k(int64_t n, const float *x, float w, bool l1, float *g) {
  LV_GRID_LOOP(i, n) g[i] += l1 ? w * (float)((x[i] > 0) - (x[i] < 0)) : w * x[i];
}
extern "C" void lv_cuda_optim_lp_add(lv_kctx *ctx, int64_t n, const float *x, float w, bool l1, float *g) {
  if (n <= 0) return;
  optim_lp_add_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, w, l1, g);
  LV_CUDA_LAUNCHED();
}

/* One block per row: whether any gradient element is nonzero, then (if so) the update
 * and the row's sum, else a zero partial. */
__global__ void optim_lp_add_rows_k(int64_t width, const float *x, float w, bool l1, float *g, double *scratch) {
  __shared__ double shd[32];
  const float *xr = x + (int64_t)blockIdx.x * width;
  float *gr = g + (int64_t)blockIdx.x * width;
  int any = 0;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) any |= gr[i] != 0.0f;
  if (!__syncthreads_or(any)) {
    if (threadIdx.x == 0) scratch[blockIdx.x] = 0.0;
    return;
  }
  double s = 0;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    gr[i] += l1 ? w * (float)((xr[i] > 0) - (xr[i] < 0)) : w * xr[i];
    s += l1 ? fabs((double)xr[i]) : (double)xr[i] * (double)xr[i];
  }
  s = lv_block_sum(s, shd);
  if (threadIdx.x == 0) scratch[blockIdx.x] = s;
}
extern "C" void lv_cuda_optim_lp_add_rows(lv_kctx *ctx, int64_t rows, int64_t width, const float *x, float w, bool l1,
                                          float *g, double *scratch, double *out) {
  LV_ASSERTF(rows < (1ll << 31), "optim_lp_add_rows: %lld rows", (long long)rows);
  if (rows > 0) {
    optim_lp_add_rows_k<<<(unsigned)rows, SUM_THREADS, 0, ctx->stream>>>(width, x, w, l1, g, scratch);
    LV_CUDA_LAUNCHED();
  }
  sum_partials_k<<<1, 1, 0, ctx->stream>>>(rows, scratch, out);
  LV_CUDA_LAUNCHED();
}

__global__ void optim_ema_k(int64_t n, float a, const float *v, float *s) {
  LV_GRID_LOOP(i, n) s[i] -= (s[i] - v[i]) * a;
}
extern "C" void lv_cuda_optim_ema(lv_kctx *ctx, int64_t n, float a, const float *v, float *s) {
  if (n <= 0) return;
  optim_ema_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, a, v, s);
  LV_CUDA_LAUNCHED();
}

__global__ void optim_sgd_k(int64_t n, float lr, float *w, const float *g) {
  LV_GRID_LOOP(i, n) w[i] -= g[i] * lr;
}
extern "C" void lv_cuda_optim_sgd(lv_kctx *ctx, int64_t n, float lr, float *w, const float *g) {
  if (n <= 0) return;
  optim_sgd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, lr, w, g);
  LV_CUDA_LAUNCHED();
}

__global__ void optim_momentum_k(int64_t n, float lr, float mom, bool nesterov, float *w, const float *g,
                                 float *acc) {
  LV_GRID_LOOP(i, n) {
    float a = acc[i] * mom + g[i];
    acc[i] = a;
    if (nesterov) w[i] -= g[i] * lr + a * mom * lr;
    else w[i] -= a * lr;
  }
}
extern "C" void lv_cuda_optim_momentum(lv_kctx *ctx, int64_t n, float lr, float mom, bool nesterov, float *w,
                                       const float *g, float *acc) {
  if (n <= 0) return;
  optim_momentum_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, lr, mom, nesterov, w, g, acc);
  LV_CUDA_LAUNCHED();
}

/* The square roots are IEEE (__fsqrt_rn), as the CPU's sqrtps; divisions are IEEE too
 * (nvcc's default -prec-div=true). */
__global__ void optim_rmsprop_k(int64_t n, float lr, float one_minus_rho, float momentum, float eps, float *w,
                                const float *g, float *ms, float *mom) {
  LV_GRID_LOOP(i, n) {
    float gv = g[i], m = ms[i];
    m = m + (gv * gv - m) * one_minus_rho;
    float mo = mom[i] * momentum + (gv * lr) / __fsqrt_rn(m + eps);
    ms[i] = m;
    mom[i] = mo;
    w[i] = w[i] - mo;
  }
}
extern "C" void lv_cuda_optim_rmsprop(lv_kctx *ctx, int64_t n, float lr, float rho, float momentum, float eps,
                                      float *w, const float *g, float *ms, float *mom) {
  if (n <= 0) return;
  optim_rmsprop_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, lr, 1.0f - rho, momentum, eps, w,
                                                                               g, ms, mom);
  LV_CUDA_LAUNCHED();
}

__global__ void optim_adagrad_k(int64_t n, float lr, float *w, const float *g, float *acc) {
  LV_GRID_LOOP(i, n) {
    float gv = g[i], a = acc[i] + gv * gv;
    acc[i] = a;
    w[i] = w[i] - gv * lr * (1.0f / __fsqrt_rn(a));
  }
}
extern "C" void lv_cuda_optim_adagrad(lv_kctx *ctx, int64_t n, float lr, float *w, const float *g, float *acc) {
  if (n <= 0) return;
  optim_adagrad_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, lr, w, g, acc);
  LV_CUDA_LAUNCHED();
}

__global__ void optim_adadelta_k(int64_t n, float lr, float rho, float one_minus_rho, float eps, float *w,
                                 const float *g, float *acc, float *acc_up) {
  LV_GRID_LOOP(i, n) {
    float gv = g[i], au = acc_up[i];
    float a = acc[i] * rho + gv * gv * one_minus_rho;
    float up = __fsqrt_rn(au + eps) * (1.0f / __fsqrt_rn(a + eps)) * gv;
    acc[i] = a;
    w[i] = w[i] - up * lr;
    acc_up[i] = au * rho + up * up * one_minus_rho;
  }
}
extern "C" void lv_cuda_optim_adadelta(lv_kctx *ctx, int64_t n, float lr, float rho, float eps, float *w,
                                       const float *g, float *acc, float *acc_up) {
  if (n <= 0) return;
  optim_adadelta_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, lr, rho, 1.0f - rho, eps, w, g,
                                                                                acc, acc_up);
  LV_CUDA_LAUNCHED();
}

__global__ void optim_adam_k(int64_t n, float alpha, float omb1, float omb2, float eps, float *w, const float *g,
                             float *m, float *v) {
  LV_GRID_LOOP(i, n) {
    float gv = g[i], mv = m[i], vv = v[i];
    mv = mv + (gv - mv) * omb1;
    vv = vv + (gv * gv - vv) * omb2;
    m[i] = mv;
    v[i] = vv;
    w[i] = w[i] - (mv * alpha) / (__fsqrt_rn(vv) + eps);
  }
}
extern "C" void lv_cuda_optim_adam(lv_kctx *ctx, int64_t n, float alpha, float beta1, float beta2, float eps,
                                   float *w, const float *g, float *m, float *v) {
  if (n <= 0) return;
  optim_adam_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, alpha, 1.0f - beta1, 1.0f - beta2, eps,
                                                                            w, g, m, v);
  LV_CUDA_LAUNCHED();
}

/* ---- Adafactor: the CPU kernel's sums (in double) from single-block reductions, the
 * row/column means one thread per row/column, then the elementwise update reading the
 * sums from scratch (no host round trip). ---- */

__device__ inline float ada_x(const lv_adafactor_args a, const float *g, const float *vr_row, const float *vc_col,
                              float ltm, int64_t r, int64_t c) {
  const int64_t i = r * a.cols + c;
  if (!a.factored) return g[i] * (1.0f / __fsqrt_rn(vr_row[i]));
  float vr = a.norm_rows ? vr_row[r] : vc_col[c], vc = a.norm_rows ? vc_col[c] : vr_row[r];
  return g[i] * (1.0f / __fsqrt_rn(vr / ltm)) * (1.0f / __fsqrt_rn(vc));
}

__device__ inline float ada_ltm(const lv_adafactor_args a, const double *scratch) {
  return a.factored ? (float)(scratch[1] / (double)(a.norm_rows ? a.rows : a.cols)) : 1.0f;
}

/* scratch[0] = sum w^2; scratch[1] = sum of the normalised accumulator (factored). */
__global__ void ada_sums_k(const lv_adafactor_args a, const float *w, const float *vr_row, const float *vc_col,
                           double *scratch) {
  __shared__ double shd[32];
  const int64_t n = a.rows * a.cols;
  double s = 0;
  if (a.param_scale)
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += (double)w[i] * (double)w[i];
  s = lv_block_sum(s, shd);
  if (threadIdx.x == 0) scratch[0] = s;
  if (!a.factored) return;
  const float *vr = a.norm_rows ? vr_row : vc_col;
  const int64_t nvr = a.norm_rows ? a.rows : a.cols;
  double t = 0;
  for (int64_t i = threadIdx.x; i < nvr; i += blockDim.x) t += (double)vr[i];
  t = lv_block_sum(t, shd);
  if (threadIdx.x == 0) scratch[1] = t;
}

/* acc[o] = acc[o] * decay + mean_k(g[o * so + k * sk]^2 + eps1) * (1 - decay) for o < count,
 * k < len: the row accumulator (so = cols, sk = 1) or the column one (so = 1, sk = cols). */
__global__ void ada_means_k(const lv_adafactor_args a, const float *g, float *acc, int64_t count, int64_t len,
                            int64_t so, int64_t sk) {
  const float mix = 1.0f - a.decay;
  LV_GRID_LOOP(o, count) {
    double s = 0;
    for (int64_t k = 0; k < len; k++) s += (double)(g[o * so + k * sk] * g[o * so + k * sk] + a.eps1);
    acc[o] = acc[o] * a.decay + (float)(s / (double)len) * mix;
  }
}

__global__ void ada_v_k(const lv_adafactor_args a, const float *g, float *v) {
  const float mix = 1.0f - a.decay;
  LV_GRID_LOOP(i, a.rows * a.cols) v[i] = v[i] * a.decay + (g[i] * g[i] + a.eps1) * mix;
}

/* scratch[2] = sum x^2. */
__global__ void ada_xsum_k(const lv_adafactor_args a, const float *g, const float *vr_row, const float *vc_col,
                           double *scratch) {
  __shared__ double shd[32];
  const float ltm = ada_ltm(a, scratch);
  double s = 0;
  for (int64_t i = threadIdx.x; i < a.rows * a.cols; i += blockDim.x) {
    float x = ada_x(a, g, vr_row, vc_col, ltm, i / a.cols, i % a.cols);
    s += (double)x * (double)x;
  }
  s = lv_block_sum(s, shd);
  if (threadIdx.x == 0) scratch[2] = s;
}

__global__ void ada_update_k(const lv_adafactor_args a, float *w, const float *g, float *m1, const float *vr_row,
                             const float *vc_col, const double *scratch) {
  const int64_t n = a.rows * a.cols;
  const float scale = a.param_scale ? fmaxf(__fsqrt_rn((float)(scratch[0] / (double)n)), a.eps2) * a.lr : a.lr;
  const float ltm = ada_ltm(a, scratch);
  const float denom = a.clip > 0 ? fmaxf(1.0f, __fsqrt_rn((float)(scratch[2] / (double)n)) / a.clip) : 1.0f;
  LV_GRID_LOOP(i, n) {
    float u = ada_x(a, g, vr_row, vc_col, ltm, i / a.cols, i % a.cols) / denom * scale;
    if (a.beta1 > 0) {
      m1[i] = m1[i] * a.beta1 + u * (1.0f - a.beta1);
      u = m1[i];
    }
    w[i] -= u;
  }
}

extern "C" void lv_cuda_optim_adafactor(lv_kctx *ctx, const lv_adafactor_args *a, float *w, const float *g,
                                        float *m1, float *vr_row, float *vc_col, double *scratch) {
  const int64_t n = a->rows * a->cols;
  if (n <= 0) return;
  if (a->factored) {
    ada_means_k<<<lv_cuda_blocks(ctx, a->rows), LV_CUDA_THREADS, 0, ctx->stream>>>(*a, g, vr_row, a->rows, a->cols,
                                                                                   a->cols, 1);
    LV_CUDA_LAUNCHED();
    ada_means_k<<<lv_cuda_blocks(ctx, a->cols), LV_CUDA_THREADS, 0, ctx->stream>>>(*a, g, vc_col, a->cols, a->rows, 1,
                                                                                   a->cols);
    LV_CUDA_LAUNCHED();
  } else {
    ada_v_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(*a, g, vr_row);
    LV_CUDA_LAUNCHED();
  }
  ada_sums_k<<<1, SUM_THREADS, 0, ctx->stream>>>(*a, w, vr_row, vc_col, scratch);
  LV_CUDA_LAUNCHED();
  if (a->clip > 0) {
    ada_xsum_k<<<1, SUM_THREADS, 0, ctx->stream>>>(*a, g, vr_row, vc_col, scratch);
    LV_CUDA_LAUNCHED();
  }
  ada_update_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(*a, w, g, m1, vr_row, vc_col, scratch);
  LV_CUDA_LAUNCHED();
}
