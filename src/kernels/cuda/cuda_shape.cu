/* Reductions over [outer, n, inner], data movement (block copies, transpose, casts,
 * reverse_sequence), embedding gather and its gradient, argmax, in_top_k and top_k on
 * the GPU. Each output element is written by one thread that reads its inputs in the
 * CPU's order, so sums match the CPU's up to float rounding and never depend on timing. */
#include <float.h>

#include "kernels/cuda/cuda_kernels.cuh"
#include "kernels/kernel_math.h"

__global__ void reduce_fwd_k(int kind, int64_t outer, int64_t n, int64_t inner, const float *x, float *y) {
  LV_GRID_LOOP(i, outer * inner) {
    int64_t o = i / inner, j = i % inner;
    const float *xo = x + o * n * inner + j;
    if (kind == LV_RED_MAX) {
      float m = n > 0 ? xo[0] : 0.0f;
      for (int64_t k = 1; k < n; k++)
        if (xo[k * inner] > m) m = xo[k * inner];
      y[i] = m;
    } else {
      double s = 0;
      for (int64_t k = 0; k < n; k++) s += xo[k * inner];
      y[i] = (float)(kind == LV_RED_MEAN ? (n ? s / (double)n : 0.0) : s);
    }
  }
}

extern "C" void lv_cuda_reduce_fwd(lv_kctx *ctx, int kind, int64_t outer, int64_t n, int64_t inner, const float *x,
                                   float *y) {
  if (outer * inner <= 0) return;
  reduce_fwd_k<<<lv_cuda_blocks(ctx, outer * inner), LV_CUDA_THREADS, 0, ctx->stream>>>(kind, outer, n, inner, x, y);
  LV_CUDA_LAUNCHED();
}

/* One thread per input element; max: the gradient goes to the first maximum. */
__global__ void reduce_bwd_k(int kind, int64_t outer, int64_t n, int64_t inner, const float *x, const float *y,
                             const float *gy, float sc, float *gx, bool acc) {
  LV_GRID_LOOP(i, outer * n * inner) {
    int64_t j = i % inner, k = (i / inner) % n, o = i / (n * inner);
    float g;
    if (kind == LV_RED_MAX) {
      const float *xo = x + o * n * inner + j;
      const float yv = y[o * inner + j];
      int64_t first = 0;
      while (first < n && xo[first * inner] != yv) first++;
      g = first == k ? gy[o * inner + j] : 0.0f;
    } else {
      g = gy[o * inner + j] * sc;
    }
    gx[i] = acc ? gx[i] + g : g;
  }
}

extern "C" void lv_cuda_reduce_bwd(lv_kctx *ctx, int kind, int64_t outer, int64_t n, int64_t inner, const float *x,
                                   const float *y, const float *gy, float *gx, bool acc) {
  int64_t total = outer * n * inner;
  if (total <= 0) return;
  float sc = kind == LV_RED_MEAN && n > 0 ? 1.0f / (float)n : 1.0f;
  reduce_bwd_k<<<lv_cuda_blocks(ctx, total), LV_CUDA_THREADS, 0, ctx->stream>>>(kind, outer, n, inner, x, y, gy, sc,
                                                                                gx, acc);
  LV_CUDA_LAUNCHED();
}

__global__ void copy_block_k(int64_t outer, int64_t run, int64_t inner, const float *src, int64_t src_n,
                             int64_t src_off, float *dst, int64_t dst_n, int64_t dst_off, bool acc) {
  LV_GRID_LOOP(i, outer * run) {
    int64_t o = i / run, k = i % run;
    float v = src[(o * src_n + src_off) * inner + k];
    float *d = dst + (o * dst_n + dst_off) * inner + k;
    *d = acc ? *d + v : v;
  }
}

extern "C" void lv_cuda_copy_block(lv_kctx *ctx, int64_t outer, int64_t len, int64_t inner, const float *src,
                                   int64_t src_n, int64_t src_off, float *dst, int64_t dst_n, int64_t dst_off,
                                   bool acc) {
  int64_t run = len * inner;
  if (outer * run <= 0) return;
  copy_block_k<<<lv_cuda_blocks(ctx, outer * run), LV_CUDA_THREADS, 0, ctx->stream>>>(
      outer, run, inner, src, src_n, src_off, dst, dst_n, dst_off, acc);
  LV_CUDA_LAUNCHED();
}

typedef struct tr_arg {
  int rank;
  int64_t ys[LV_KMAX_RANK], ystr[LV_KMAX_RANK];
} tr_arg;

template <typename T>
__global__ void transpose_k(tr_arg a, int64_t n, const T *x, T *y, bool acc) {
  LV_GRID_LOOP(i, n) {
    int64_t r = i, off = 0;
    for (int d = a.rank - 1; d >= 0; d--) {
      off += (r % a.ys[d]) * a.ystr[d];
      r /= a.ys[d];
    }
    y[i] = acc ? (T)(y[i] + x[off]) : x[off];
  }
}

extern "C" void lv_cuda_transpose(lv_kctx *ctx, int rank, const int64_t *shape, const int *perm, size_t elem,
                                  const void *x, void *y, bool acc_f32) {
  tr_arg a;
  memset(&a, 0, sizeof a);
  int64_t xstride[LV_KMAX_RANK], st = 1, n = 1;
  for (int d = rank - 1; d >= 0; d--) {
    xstride[d] = st;
    st *= shape[d];
  }
  a.rank = rank;
  for (int d = 0; d < rank; d++) {
    a.ys[d] = shape[perm[d]];
    a.ystr[d] = xstride[perm[d]];
    n *= a.ys[d];
  }
  if (n <= 0) return;
  unsigned blocks = lv_cuda_blocks(ctx, n);
  if (acc_f32) {
    transpose_k<float><<<blocks, LV_CUDA_THREADS, 0, ctx->stream>>>(a, n, (const float *)x, (float *)y, true);
  } else if (elem == 4) {
    transpose_k<uint32_t><<<blocks, LV_CUDA_THREADS, 0, ctx->stream>>>(a, n, (const uint32_t *)x, (uint32_t *)y,
                                                                        false);
  } else if (elem == 8) {
    transpose_k<uint64_t><<<blocks, LV_CUDA_THREADS, 0, ctx->stream>>>(a, n, (const uint64_t *)x, (uint64_t *)y,
                                                                        false);
  } else if (elem == 2) {
    transpose_k<uint16_t><<<blocks, LV_CUDA_THREADS, 0, ctx->stream>>>(a, n, (const uint16_t *)x, (uint16_t *)y,
                                                                        false);
  } else {
    LV_ASSERTF(elem == 1, "transpose: %zu-byte elements", elem);
    transpose_k<uint8_t><<<blocks, LV_CUDA_THREADS, 0, ctx->stream>>>(a, n, (const uint8_t *)x, (uint8_t *)y, false);
  }
  LV_CUDA_LAUNCHED();
}

/* The CPU's lv_cpu_cast element by element (kernel_math.h). */
__global__ void cast_k(int from, int to, int64_t n, const void *x, void *y) {
  LV_GRID_LOOP(i, n) lv_kcast_at(from, to, x, y, i);
}

extern "C" void lv_cuda_cast(lv_kctx *ctx, lv_dtype from, lv_dtype to, int64_t n, const void *x, void *y) {
  if (n <= 0) return;
  cast_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(from, to, n, x, y);
  LV_CUDA_LAUNCHED();
}

/* ---- embedding ---- */

__global__ void gather_k(int64_t v, int64_t d, const float *table, int64_t n, const int32_t *ids, float *out) {
  LV_GRID_LOOP(i, n * d) {
    int64_t r = i / d, j = i % d;
    int32_t id = ids[r];
    if (id >= 0 && id < v) out[i] = table[(int64_t)id * d + j];
  }
}

extern "C" void lv_cuda_gather_fwd(lv_kctx *ctx, int64_t v, int64_t d, const float *table, int64_t n,
                                   const int32_t *ids, float *out, uint64_t tag) {
  if (n <= 0) return;
  lv_cuda_check_ids(ctx, n, ids, v, tag);
  if (d <= 0) return;
  gather_k<<<lv_cuda_blocks(ctx, n * d), LV_CUDA_THREADS, 0, ctx->stream>>>(v, d, table, n, ids, out);
  LV_CUDA_LAUNCHED();
}

/* The sparse gradient without atomics, in the CPU's order: positions holding the same id
 * form a chain (next[r]: the next position with ids[r], or -1); the first position of
 * each chain owns the id's row and adds the chain's gradients column by column, so
 * repeated ids sum in position order whatever the launch. Building the chains compares
 * ids only (O(n^2) int compares, n = a batch's tokens); the sums are O(n d). */
__global__ void gather_chain_k(int64_t n, const int32_t *ids, int32_t *next, uint8_t *first) {
  LV_GRID_LOOP(r, n) {
    const int32_t id = ids[r];
    int32_t nx = -1;
    for (int64_t q = r + 1; q < n; q++)
      if (ids[q] == id) {
        nx = (int32_t)q;
        break;
      }
    bool f = true;
    for (int64_t q = 0; q < r && f; q++) f = ids[q] != id;
    next[r] = nx;
    first[r] = f;
  }
}

__global__ void gather_bwd_k(int64_t d, int64_t n, const int32_t *ids, const int32_t *next, const uint8_t *first,
                             const float *gy, float *gtable) {
  LV_GRID_LOOP(i, n * d) {
    int64_t r = i / d, j = i % d;
    if (!first[r]) continue;
    float *row = gtable + (int64_t)ids[r] * d;
    float s = row[j];
    for (int64_t q = r; q >= 0; q = next[q]) s += gy[q * d + j];
    row[j] = s;
  }
}

extern "C" void lv_cuda_gather_bwd(lv_kctx *ctx, int64_t v, int64_t d, int64_t n, const int32_t *ids, const float *gy,
                                   float *gtable) {
  if (n <= 0 || d <= 0) return;
  LV_ASSERTF(n < INT32_MAX, "gather_bwd: %lld ids", (long long)n);
  void *chain = NULL;
  /* Stream-ordered scratch from the backend's pool: no device-wide synchronization. */
  LV_CUDA_CHECK(cudaMallocAsync(&chain, (size_t)n * (sizeof(int32_t) + 1), ctx->stream));
  int32_t *next = (int32_t *)chain;
  uint8_t *first = (uint8_t *)(next + n);
  gather_chain_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, ids, next, first);
  LV_CUDA_LAUNCHED();
  gather_bwd_k<<<lv_cuda_blocks(ctx, n * d), LV_CUDA_THREADS, 0, ctx->stream>>>(d, n, ids, next, first, gy, gtable);
  LV_CUDA_LAUNCHED();
  LV_CUDA_CHECK(cudaFreeAsync(chain, ctx->stream));
}

/* ---- columns of a [d, c] shard (sampled softmax) ---- */

__global__ void gather_cols_k(int64_t d, int64_t c, const float *w, int64_t n, const int32_t *ids, int64_t off,
                              float *out) {
  LV_GRID_LOOP(i, n * d) {
    int64_t r = i / d, j = i % d;
    int64_t col = (int64_t)ids[r] - off;
    out[i] = col >= 0 && col < c ? w[j * c + col] : 0.0f;
  }
}

extern "C" void lv_cuda_gather_cols_fwd(lv_kctx *ctx, int64_t d, int64_t c, const float *w, int64_t n,
                                        const int32_t *ids, int64_t off, float *out) {
  if (n <= 0 || d <= 0) return;
  gather_cols_k<<<lv_cuda_blocks(ctx, n * d), LV_CUDA_THREADS, 0, ctx->stream>>>(d, c, w, n, ids, off, out);
  LV_CUDA_LAUNCHED();
}

/* One thread per row of gw adds the ids' gradients in position order: the CPU's sums,
 * without atomics (d threads of n steps each: a sampled softmax's few thousand classes). */
__global__ void gather_cols_bwd_k(int64_t d, int64_t c, int64_t n, const int32_t *ids, int64_t off, const float *gy,
                                  float *gw) {
  LV_GRID_LOOP(j, d) {
    float *row = gw + j * c;
    for (int64_t i = 0; i < n; i++) {
      int64_t col = (int64_t)ids[i] - off;
      if (col >= 0 && col < c) row[col] += gy[i * d + j];
    }
  }
}

extern "C" void lv_cuda_gather_cols_bwd(lv_kctx *ctx, int64_t d, int64_t c, int64_t n, const int32_t *ids,
                                        int64_t off, const float *gy, float *gw) {
  if (n <= 0 || d <= 0) return;
  gather_cols_bwd_k<<<lv_cuda_blocks(ctx, d), LV_CUDA_THREADS, 0, ctx->stream>>>(d, c, n, ids, off, gy, gw);
  LV_CUDA_LAUNCHED();
}

/* ---- index results ---- */

__global__ void argmax_k(int64_t rows, int64_t c, const float *x, int32_t *out) {
  LV_GRID_LOOP(r, rows) {
    const float *xr = x + r * c;
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
      if (xr[j] > xr[best]) best = j;
    out[r] = (int32_t)best;
  }
}

extern "C" void lv_cuda_argmax(lv_kctx *ctx, int64_t rows, int64_t c, const float *x, int32_t *out) {
  if (rows <= 0) return;
  argmax_k<<<lv_cuda_blocks(ctx, rows), LV_CUDA_THREADS, 0, ctx->stream>>>(rows, c, x, out);
  LV_CUDA_LAUNCHED();
}

__global__ void in_top_k_k(int64_t b, int64_t c, const float *x, const int32_t *labels, int k, float *out) {
  LV_GRID_LOOP(r, b) {
    const float *xr = x + r * c;
    int32_t t = labels[r];
    if (t < 0 || t >= c || !isfinite(xr[t])) {
      out[r] = 0.0f;
      continue;
    }
    int64_t more = 0;
    for (int64_t j = 0; j < c; j++)
      if (xr[j] > xr[t]) more++;
    out[r] = more < k ? 1.0f : 0.0f;
  }
}

extern "C" void lv_cuda_in_top_k(lv_kctx *ctx, int64_t b, int64_t c, const float *x, const int32_t *labels, int k,
                                 float *out) {
  if (b <= 0) return;
  in_top_k_k<<<lv_cuda_blocks(ctx, b), LV_CUDA_THREADS, 0, ctx->stream>>>(b, c, x, labels, k, out);
  LV_CUDA_LAUNCHED();
}

/* top_k by rank: element j of a row goes to position (number of elements ranking before
 * it) when that is below k; the ranking is a strict total order, so positions are unique.
 * One block per row, O(n^2 / threads): beam search's rows are beam * vocabulary chunks. */
__global__ void top_k_k(int64_t rows, int64_t n, int64_t k, const float *x, float *values, int32_t *indices) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * n;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      float v = xr[j];
      int64_t rank = 0;
      for (int64_t q = 0; q < n && rank < k; q++) rank += lv_kbetter(xr[q], q, v, j);
      if (rank < k) {
        values[r * k + rank] = v;
        indices[r * k + rank] = (int32_t)j;
      }
    }
  }
}

extern "C" void lv_cuda_top_k(lv_kctx *ctx, int64_t rows, int64_t n, int64_t k, const float *x, float *values,
                              int32_t *indices) {
  if (rows <= 0 || k <= 0) return;
  top_k_k<<<(unsigned)(rows < 65535 ? rows : 65535), 256, 0, ctx->stream>>>(rows, n, k, x, values, indices);
  LV_CUDA_LAUNCHED();
}

/* ---- reverse_sequence ---- */

__global__ void rev_lens_k(int64_t t, int64_t b, const float *pad, int32_t *lens) {
  LV_GRID_LOOP(bi, b) {
    double sum = 0;
    for (int64_t s = 0; s < t; s++) sum += 1.0 - (double)pad[s * b + bi];
    double len = rint(sum);
    lens[bi] = (int32_t)(len < 0 ? 0 : (len > (double)t ? (double)t : len));
  }
}

__global__ void rev_k(int64_t t, int64_t b, int64_t inner, const int32_t *lens, const float *x, float *y, bool acc) {
  LV_GRID_LOOP(i, t * b * inner) {
    int64_t row = i / inner, k = i % inner;
    int64_t s = row / b, bi = row % b, len = lens[bi];
    int64_t src = s < len ? len - 1 - s : s;
    float v = x[(src * b + bi) * inner + k];
    y[i] = acc ? y[i] + v : v;
  }
}

extern "C" void lv_cuda_reverse_seq(lv_kctx *ctx, int64_t t, int64_t b, int64_t inner, const float *pad,
                                    const float *x, float *y, bool acc, int32_t *lens) {
  if (b <= 0) return;
  rev_lens_k<<<lv_cuda_blocks(ctx, b), LV_CUDA_THREADS, 0, ctx->stream>>>(t, b, pad, lens);
  LV_CUDA_LAUNCHED();
  if (t * b * inner <= 0) return;
  rev_k<<<lv_cuda_blocks(ctx, t * b * inner), LV_CUDA_THREADS, 0, ctx->stream>>>(t, b, inner, lens, x, y, acc);
  LV_CUDA_LAUNCHED();
}
