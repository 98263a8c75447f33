/* Softmax, log-softmax, the softmax cross-entropies (sparse, dense, label-smoothed,
 * chunked over classes) and the id check, on the GPU: one block per row, the row's max
 * and sums reduced in the block, sums of exponentials in double as on the CPU. */
#include <float.h>

#include "kernels/cuda/cuda_kernels.cuh"

#define ROW_THREADS 256

static unsigned row_blocks(int64_t rows) { return (unsigned)(rows < 65535 ? rows : 65535); }

#define ROW_LOOP(r, rows) for (int64_t r = blockIdx.x; r < (rows); r += gridDim.x)
#define COL_LOOP(j, c) for (int64_t j = threadIdx.x; j < (c); j += blockDim.x)

/* The CPU's softmax_row: p = softmax(x) into p; returns log(sum exp(x - max)) and the max. */
__device__ float softmax_row(int64_t c, const float *x, float *p, float *max_out) {
  __shared__ float shf[32];
  __shared__ double shd[32];
  float m = -FLT_MAX;
  COL_LOOP(j, c) m = x[j] > m ? x[j] : m;
  m = lv_block_max(m, shf);
  double s = 0;
  COL_LOOP(j, c) {
    float e = expf(x[j] - m);
    p[j] = e;
    s += e;
  }
  s = lv_block_sum(s, shd);
  float inv = (float)(1.0 / s);
  COL_LOOP(j, c) p[j] *= inv;
  *max_out = m;
  return (float)log(s);
}

__global__ void softmax_k(int64_t rows, int64_t c, const float *x, float *y, bool log_) {
  ROW_LOOP(r, rows) {
    float m, ls = softmax_row(c, x + r * c, y + r * c, &m);
    if (log_) COL_LOOP(j, c) y[r * c + j] = (x[r * c + j] - m) - ls;
    __syncthreads();
  }
}

extern "C" void lv_cuda_softmax_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, float *y, bool log_) {
  if (rows <= 0 || c <= 0) return;
  softmax_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, c, x, y, log_);
  LV_CUDA_LAUNCHED();
}

__global__ void softmax_bwd_k(int64_t rows, int64_t c, const float *y, const float *gy, float *gx, bool log_,
                              bool acc) {
  __shared__ double shd[32];
  ROW_LOOP(r, rows) {
    const float *yr = y + r * c, *gr = gy + r * c;
    float *xr = gx + r * c;
    double s = 0;
    if (log_) COL_LOOP(j, c) s += gr[j];
    else COL_LOOP(j, c) s += (double)gr[j] * yr[j];
    s = lv_block_sum(s, shd);
    COL_LOOP(j, c) {
      float g = log_ ? gr[j] - expf(yr[j]) * (float)s : yr[j] * (gr[j] - (float)s);
      xr[j] = acc ? xr[j] + g : g;
    }
    __syncthreads();
  }
}

extern "C" void lv_cuda_softmax_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *y, const float *gy,
                                    float *gx, bool log_, bool acc) {
  if (rows <= 0 || c <= 0) return;
  softmax_bwd_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, c, y, gy, gx, log_, acc);
  LV_CUDA_LAUNCHED();
}

/* ---- the id check: the lowest bad position, recorded in launch order ---- */

__global__ void check_ids_k(int64_t n, const int32_t *ids, int64_t bound, uint64_t tag, lv_cuda_err *err) {
  __shared__ unsigned long long first;
  if (threadIdx.x == 0) first = ~0ull;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (ids[i] < 0 || ids[i] >= bound) {
      atomicMin(&first, (unsigned long long)i);
      break;
    }
  __syncthreads();
  if (threadIdx.x == 0 && first != ~0ull) {
    lv_kerror e;
    e.tag = tag;
    e.pos = (int64_t)first;
    e.value = ids[first];
    e.bound = bound;
    lv_cuda_record(err, e);
  }
}

extern "C" void lv_cuda_check_ids(lv_kctx *ctx, int64_t n, const int32_t *ids, int64_t bound, uint64_t tag) {
  if (n <= 0) return;
  check_ids_k<<<1, 1024, 0, ctx->stream>>>(n, ids, bound, tag, ctx->err);
  LV_CUDA_LAUNCHED();
}

__device__ inline bool bad_id(int32_t id, int64_t c) { return id < 0 || id >= c; }

/* ---- sparse and dense cross-entropy ---- */

__global__ void sparse_xent_k(int64_t rows, int64_t c, const float *x, const int32_t *ids, float *loss,
                              float *probs) {
  ROW_LOOP(r, rows) {
    if (bad_id(ids[r], c)) continue; /* recorded by the check; the row is unspecified */
    float m, ls = softmax_row(c, x + r * c, probs + r * c, &m);
    if (threadIdx.x == 0) loss[r] = (m - x[r * c + ids[r]]) + ls;
    __syncthreads();
  }
}

extern "C" void lv_cuda_sparse_xent_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const int32_t *ids,
                                        float *loss, float *probs, uint64_t tag) {
  if (rows <= 0) return;
  lv_cuda_check_ids(ctx, rows, ids, c, tag);
  if (c <= 0) return;
  sparse_xent_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, c, x, ids, loss, probs);
  LV_CUDA_LAUNCHED();
}

__global__ void sparse_xent_bwd_k(int64_t rows, int64_t c, const float *probs, const int32_t *ids,
                                  const float *gloss, float *gx, bool acc) {
  ROW_LOOP(r, rows) {
    float gl = gloss[r];
    COL_LOOP(j, c) {
      float g = (probs[r * c + j] - (j == ids[r] ? 1.0f : 0.0f)) * gl;
      gx[r * c + j] = acc ? gx[r * c + j] + g : g;
    }
  }
}

extern "C" void lv_cuda_sparse_xent_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *probs,
                                        const int32_t *ids, const float *gloss, float *gx, bool acc) {
  if (rows <= 0 || c <= 0) return;
  sparse_xent_bwd_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, c, probs, ids, gloss, gx, acc);
  LV_CUDA_LAUNCHED();
}

__global__ void xent_k(int64_t rows, int64_t c, const float *x, const float *t, float *loss, float *probs) {
  __shared__ double shd[32];
  ROW_LOOP(r, rows) {
    float m, ls = softmax_row(c, x + r * c, probs + r * c, &m);
    double l = 0;
    COL_LOOP(j, c) l -= (double)t[r * c + j] * ((x[r * c + j] - m) - ls);
    l = lv_block_sum(l, shd);
    if (threadIdx.x == 0) loss[r] = (float)l;
    __syncthreads();
  }
}

extern "C" void lv_cuda_xent_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const float *t,
                                 float *loss, float *probs) {
  if (rows <= 0 || c <= 0) return;
  xent_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, c, x, t, loss, probs);
  LV_CUDA_LAUNCHED();
}

__global__ void xent_bwd_k(int64_t rows, int64_t c, const float *probs, const float *t, const float *gloss,
                           float *gx, bool acc) {
  __shared__ double shd[32];
  ROW_LOOP(r, rows) {
    double ts = 0;
    COL_LOOP(j, c) ts += t[r * c + j];
    ts = lv_block_sum(ts, shd);
    float gl = gloss[r];
    COL_LOOP(j, c) {
      float g = (probs[r * c + j] * (float)ts - t[r * c + j]) * gl;
      gx[r * c + j] = acc ? gx[r * c + j] + g : g;
    }
    __syncthreads();
  }
}

extern "C" void lv_cuda_xent_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *probs, const float *t,
                                 const float *gloss, float *gx, bool acc) {
  if (rows <= 0 || c <= 0) return;
  xent_bwd_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, c, probs, t, gloss, gx, acc);
  LV_CUDA_LAUNCHED();
}

/* ---- masked softmax ---- */

typedef struct msm_arg {
  int rank;
  int64_t shape[LV_KMAX_RANK], sa[LV_KMAX_RANK];
} msm_arg;

__global__ void masked_softmax_k(msm_arg bc, int64_t rows, int64_t c, int64_t ps, const float *x,
                                 const float *pad, float *y) {
  __shared__ float shf[32];
  __shared__ double shd[32];
  __shared__ int sany;
  ROW_LOOP(r, rows) {
    int64_t off = 0, t = r;
    for (int d = bc.rank - 2; d >= 0; d--) {
      off += (t % bc.shape[d]) * bc.sa[d];
      t /= bc.shape[d];
    }
    const float *xr = x + r * c, *pr = pad + off;
    float *yr = y + r * c;
    if (threadIdx.x == 0) sany = 0;
    __syncthreads();
    float m = -INFINITY;
    COL_LOOP(j, c) if (pr[j * ps] <= 0.5f) {
      m = fmaxf(m, xr[j]);
      sany = 1;
    }
    m = lv_block_max(m, shf);
    if (!sany) {
      COL_LOOP(j, c) yr[j] = 0.0f;
    } else {
      double s = 0;
      COL_LOOP(j, c) {
        yr[j] = pr[j * ps] <= 0.5f ? expf(xr[j] - m) : 0.0f;
        s += yr[j];
      }
      s = lv_block_sum(s, shd);
      float inv = (float)(1.0 / s);
      COL_LOOP(j, c) yr[j] *= inv;
    }
    __syncthreads();
  }
}

extern "C" void lv_cuda_masked_softmax_fwd(lv_kctx *ctx, const lv_bcast *bc, const float *x, const float *pad,
                                           float *y) {
  int64_t n = 1;
  for (int d = 0; d < bc->rank; d++) n *= bc->shape[d];
  int64_t c = bc->rank ? bc->shape[bc->rank - 1] : 1, rows = c ? n / c : 0;
  if (rows <= 0) return;
  msm_arg a;
  memset(&a, 0, sizeof a);
  a.rank = bc->rank;
  for (int d = 0; d < bc->rank; d++) {
    a.shape[d] = bc->shape[d];
    a.sa[d] = bc->sa[d];
  }
  masked_softmax_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(a, rows, c, bc->rank ? bc->sa[bc->rank - 1] : 0,
                                                                      x, pad, y);
  LV_CUDA_LAUNCHED();
}

/* ---- label-smoothed cross-entropy ---- */

static void smoothing_targets(int64_t c, float smoothing, float *on, float *off) {
  *on = 1.0f - smoothing;
  *off = c > 1 ? smoothing / (float)(c - 1) : 0.0f;
}

__global__ void smoothed_k(int64_t rows, int64_t c, const float *x, const int32_t *ids, const float *weights,
                           float on, float off, float *loss, float *probs) {
  __shared__ double shd[32];
  ROW_LOOP(r, rows) {
    if (bad_id(ids[r], c)) continue;
    const float *xr = x + r * c;
    float m, ls = softmax_row(c, xr, probs + r * c, &m);
    double all = 0;
    COL_LOOP(j, c) all += (double)((xr[j] - m) - ls);
    all = lv_block_sum(all, shd);
    if (threadIdx.x == 0) {
      double lp_id = (double)((xr[ids[r]] - m) - ls);
      double l = -((double)on * lp_id + (double)off * (all - lp_id));
      loss[r] = (float)(weights ? l * (double)weights[r] : l);
    }
    __syncthreads();
  }
}

extern "C" void lv_cuda_smoothed_xent_fwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, const int32_t *ids,
                                          const float *weights, float smoothing, float *loss, float *probs,
                                          uint64_t tag) {
  if (rows <= 0) return;
  lv_cuda_check_ids(ctx, rows, ids, c, tag);
  if (c <= 0) return;
  float on, off;
  smoothing_targets(c, smoothing, &on, &off);
  smoothed_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, c, x, ids, weights, on, off, loss, probs);
  LV_CUDA_LAUNCHED();
}

__global__ void smoothed_bwd_k(int64_t rows, int64_t c, const float *probs, const int32_t *ids, const float *weights,
                               float on, float off, const float *gloss, float *gx, bool acc) {
  ROW_LOOP(r, rows) {
    float gl = gloss[r] * (weights ? weights[r] : 1.0f);
    COL_LOOP(j, c) {
      float g = (probs[r * c + j] - (j == ids[r] ? on : off)) * gl;
      gx[r * c + j] = acc ? gx[r * c + j] + g : g;
    }
  }
}

extern "C" void lv_cuda_smoothed_xent_bwd(lv_kctx *ctx, int64_t rows, int64_t c, const float *probs,
                                          const int32_t *ids, const float *weights, float smoothing,
                                          const float *gloss, float *gx, bool acc) {
  if (rows <= 0 || c <= 0) return;
  float on, off;
  smoothing_targets(c, smoothing, &on, &off);
  smoothed_bwd_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, c, probs, ids, weights, on, off, gloss, gx,
                                                                    acc);
  LV_CUDA_LAUNCHED();
}

/* ---- chunked (projected) smoothed cross-entropy ---- */

/* Block-wide first maximum (ties: lower index; NaN never wins), as the CPU's `v > cm`. */
__device__ void block_argmax(float *v, int64_t *ix) {
  __shared__ float sv[32];
  __shared__ int64_t si[32];
  float bv = *v;
  int64_t bi = *ix;
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  bv = sv[0];
  bi = si[0];
  for (int w = 1; w < nw; w++)
    if (sv[w] > bv || (sv[w] == bv && si[w] < bi)) {
      bv = sv[w];
      bi = si[w];
    }
  *v = bv;
  *ix = bi;
}

__global__ void chunk_stats_k(int64_t rows, int64_t cs, int64_t c0, const float *z, const float *bias,
                              const int32_t *ids, bool first, float *max, double *sumexp, double *sumz, float *zid,
                              int32_t *argmax) {
  __shared__ double shd[32];
  ROW_LOOP(r, rows) {
    const float *zr = z + r * cs;
    float cm = -INFINITY;
    int64_t ci = INT64_MAX;
    double sz = 0;
    COL_LOOP(j, cs) {
      float v = zr[j] + (bias ? bias[j] : 0.0f);
      if (v > cm || (v == cm && j < ci)) {
        cm = v;
        ci = j;
      }
      sz += v;
    }
    block_argmax(&cm, &ci);
    if (ci == INT64_MAX) ci = 0;
    sz = lv_block_sum(sz, shd);
    float prev = max[r];
    float m = first || cm > prev ? cm : prev;
    double s = 0;
    COL_LOOP(j, cs) s += expf((zr[j] + (bias ? bias[j] : 0.0f)) - m);
    s = lv_block_sum(s, shd);
    if (threadIdx.x == 0) {
      if (first) {
        sumexp[r] = s;
        sumz[r] = sz;
        if (argmax) argmax[r] = (int32_t)ci;
      } else {
        if (m != prev) {
          sumexp[r] = sumexp[r] * exp((double)prev - (double)m) + s;
          if (argmax) argmax[r] = (int32_t)(c0 + ci);
        } else {
          sumexp[r] += s;
        }
        sumz[r] += sz;
      }
      max[r] = m;
      int64_t id = ids[r] - c0;
      if (id >= 0 && id < cs) zid[r] = zr[id] + (bias ? bias[id] : 0.0f);
    }
    __syncthreads();
  }
}

extern "C" void lv_cuda_xent_chunk_stats(lv_kctx *ctx, int64_t rows, int64_t cs, int64_t c0, const float *z,
                                         const float *bias, const int32_t *ids, bool first, float *max,
                                         double *sumexp, double *sumz, float *zid, int32_t *argmax) {
  if (rows <= 0) return;
  chunk_stats_k<<<row_blocks(rows), ROW_THREADS, 0, ctx->stream>>>(rows, cs, c0, z, bias, ids, first, max, sumexp,
                                                                   sumz, zid, argmax);
  LV_CUDA_LAUNCHED();
}

__global__ void chunk_loss_k(int64_t rows, int64_t c, const float *weights, float on, float off, const float *max,
                             const double *sumexp, const double *sumz, const float *zid, float *loss, float *ls) {
  LV_GRID_LOOP(r, rows) {
    double lse = (double)max[r] + log(sumexp[r]);
    double tsum = (double)on + (double)off * (double)(c - 1);
    double l = tsum * lse - (double)on * zid[r] - (double)off * (sumz[r] - zid[r]);
    loss[r] = (float)(weights ? l * (double)weights[r] : l);
    ls[r] = (float)log(sumexp[r]);
  }
}

extern "C" void lv_cuda_xent_chunk_loss(lv_kctx *ctx, int64_t rows, int64_t c, const float *weights, float smoothing,
                                        const float *max, const double *sumexp, const double *sumz, const float *zid,
                                        float *loss, float *ls) {
  if (rows <= 0) return;
  float on, off;
  smoothing_targets(c, smoothing, &on, &off);
  chunk_loss_k<<<lv_cuda_blocks(ctx, rows), LV_CUDA_THREADS, 0, ctx->stream>>>(rows, c, weights, on, off, max,
                                                                               sumexp, sumz, zid, loss, ls);
  LV_CUDA_LAUNCHED();
}

__global__ void chunk_grad_k(int64_t rows, int64_t cs, int64_t c0, float *z, const float *bias, const int32_t *ids,
                             const float *weights, float on, float off, const float *max, const float *ls,
                             const float *gloss) {
  LV_GRID_LOOP(i, rows * cs) {
    int64_t r = i / cs, j = i % cs;
    const float gl = gloss[r] * (weights ? weights[r] : 1.0f);
    float p = expf(((z[i] + (bias ? bias[j] : 0.0f)) - max[r]) - ls[r]);
    z[i] = (p - (j == ids[r] - c0 ? on : off)) * gl;
  }
}

extern "C" void lv_cuda_xent_chunk_grad(lv_kctx *ctx, int64_t rows, int64_t cs, int64_t c0, int64_t c, float *z,
                                        const float *bias, const int32_t *ids, const float *weights, float smoothing,
                                        const float *max, const float *ls, const float *gloss) {
  if (rows <= 0 || cs <= 0) return;
  float on, off;
  smoothing_targets(c, smoothing, &on, &off);
  chunk_grad_k<<<lv_cuda_blocks(ctx, rows * cs), LV_CUDA_THREADS, 0, ctx->stream>>>(rows, cs, c0, z, bias, ids,
                                                                                    weights, on, off, max, ls, gloss);
  LV_CUDA_LAUNCHED();
}

/* ---- a decoding step's attention over time-major caches (kernels.def): one block per
 * (row, head), its logits in scratch, softmax_row's probabilities in place ---- */

__global__ void cached_attention_k(int64_t t, int64_t rows, int64_t heads, int64_t d, int64_t dv, int64_t cap,
                                   const float *q, const float *k, const float *v, const int32_t *anc,
                                   float *scratch, float *out) {
  const int64_t H = heads * d, C = heads * dv, bound = cap * rows;
  ROW_LOOP(i, rows * heads) {
    const int64_t r = i / heads, n = i % heads;
    const float *qr = q + r * H + n * d;
    float *p = scratch + i * t;
    COL_LOOP(s, t) {
      const int64_t a = anc ? anc[s * rows + r] : s * rows + r;
      float acc = 0.0f;
      if (a >= 0 && a < bound)
        for (int64_t j = 0; j < d; j++) acc += qr[j] * k[a * H + n * d + j];
      p[s] = acc;
    }
    float m;
    softmax_row(t, p, p, &m);
    __syncthreads();
    COL_LOOP(j, dv) {
      float acc = 0.0f;
      for (int64_t s = 0; s < t; s++) {
        const int64_t a = anc ? anc[s * rows + r] : s * rows + r;
        if (a >= 0 && a < bound) acc += p[s] * v[a * C + n * dv + j];
      }
      out[r * C + n * dv + j] = acc;
    }
    __syncthreads();
  }
}

extern "C" void lv_cuda_cached_attention(lv_kctx *ctx, int64_t t, int64_t rows, int64_t heads, int64_t d, int64_t dv,
                                         int64_t cap, const float *q, const float *k, const float *v,
                                         const int32_t *anc, float *scratch, float *out, uint64_t tag) {
  if (rows <= 0 || heads <= 0) return;
  if (anc) lv_cuda_check_ids(ctx, t * rows, anc, cap * rows, tag);
  cached_attention_k<<<row_blocks(rows * heads), ROW_THREADS, 0, ctx->stream>>>(t, rows, heads, d, dv, cap, q, k, v,
                                                                                anc, scratch, out);
  LV_CUDA_LAUNCHED();
}
