/* Elementwise kernels on the GPU: broadcasting binary ops and their reductions, scaling,
 * activations, dropout (the CPU's Philox stream, element for element), select, masks,
 * clip, fill and moving averages. One thread per element, grid-stride. */
#include "kernels/cuda/cuda_kernels.cuh"
#include "kernels/kernel_math.h"

extern "C" {
#include "base/rng.h"
}

/* The broadcast as kernel arguments (by value). */
typedef struct bc_arg {
  int rank;
  int64_t shape[LV_KMAX_RANK], sa[LV_KMAX_RANK], sb[LV_KMAX_RANK];
} bc_arg;

static bc_arg bc_of(const lv_bcast *bc) {
  bc_arg a;
  memset(&a, 0, sizeof a);
  a.rank = bc->rank;
  for (int d = 0; d < bc->rank; d++) {
    a.shape[d] = bc->shape[d];
    a.sa[d] = bc->sa[d];
    a.sb[d] = bc->sb[d];
  }
  return a;
}

static int64_t numel(const lv_bcast *bc) {
  int64_t n = 1;
  for (int d = 0; d < bc->rank; d++) n *= bc->shape[d];
  return n;
}

__device__ inline void bc_offs(const bc_arg &bc, int64_t i, int64_t *oa, int64_t *ob) {
  int64_t a = 0, b = 0;
  for (int d = bc.rank - 1; d >= 0; d--) {
    int64_t q = i % bc.shape[d];
    i /= bc.shape[d];
    a += q * bc.sa[d];
    b += q * bc.sb[d];
  }
  *oa = a;
  *ob = b;
}

__global__ void binary_k(int op, bc_arg bc, int64_t n, const float *a, const float *b, float *out) {
  LV_GRID_LOOP(i, n) {
    int64_t oa, ob;
    bc_offs(bc, i, &oa, &ob);
    out[i] = lv_kbin(op, a[oa], b[ob]);
  }
}

extern "C" void lv_cuda_binary(lv_kctx *ctx, lv_binary_op op, const lv_bcast *bc, const float *a, const float *b,
                               float *out) {
  int64_t n = numel(bc);
  if (n == 0) return;
  binary_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(op, bc_of(bc), n, a, b, out);
  LV_CUDA_LAUNCHED();
}

/* reduce_to: one thread per destination element sums the source elements mapping to it
 * in increasing source order (the CPU's order for every layout), in float. The sources of
 * destination j are the output positions whose kept coordinates are j's: the summed dims
 * (stride 0) are enumerated inside. */
typedef struct red_arg {
  int nk, ns;                        /* kept and summed dims */
  int64_t kshape[LV_KMAX_RANK], kstride[LV_KMAX_RANK]; /* kept: extent, stride in src */
  int64_t sshape[LV_KMAX_RANK], sstride[LV_KMAX_RANK]; /* summed */
  int64_t inner;                      /* sources per destination */
} red_arg;

__global__ void reduce_to_k(red_arg r, int64_t dn, const float *src, float alpha, float *dst, bool acc) {
  LV_GRID_LOOP(j, dn) {
    int64_t base = 0, t = j;
    for (int d = r.nk - 1; d >= 0; d--) {
      base += (t % r.kshape[d]) * r.kstride[d];
      t /= r.kshape[d];
    }
    float s = 0.0f;
    for (int64_t k = 0; k < r.inner; k++) {
      int64_t off = 0, u = k;
      for (int d = r.ns - 1; d >= 0; d--) {
        off += (u % r.sshape[d]) * r.sstride[d];
        u /= r.sshape[d];
      }
      s += alpha * src[base + off];
    }
    dst[j] = acc ? dst[j] + s : s;
  }
}

__global__ void reduce_rows_k(int64_t inner, int64_t rows, const float *src, float alpha, float *dst, bool acc) {
  LV_GRID_LOOP(j, inner) {
    float s = 0.0f;
    for (int64_t r = 0; r < rows; r++) s += src[r * inner + j];
    dst[j] = acc ? dst[j] + alpha * s : alpha * s;
  }
}

/* The CPU's fast path (operand a covers the trailing `inner` elements and repeats). */
static bool is_row(const lv_bcast *bc, int64_t *inner) {
  int d = bc->rank - 1;
  int64_t st = 1;
  while (d >= 0 && (bc->shape[d] == 1 || bc->sa[d] == st)) {
    st *= bc->shape[d];
    d--;
  }
  for (int e = d; e >= 0; e--)
    if (bc->sa[e] != 0 && bc->shape[e] != 1) return false;
  *inner = st;
  return true;
}

extern "C" void lv_cuda_reduce_to(lv_kctx *ctx, const lv_bcast *bc, const float *src, float alpha, float *dst,
                                  bool acc) {
  int64_t n = numel(bc), inner;
  if (is_row(bc, &inner) && inner > 0) {
    /* The CPU sums alpha * (row sum) here; elsewhere the sum of alpha * each. */
    reduce_rows_k<<<lv_cuda_blocks(ctx, inner), LV_CUDA_THREADS, 0, ctx->stream>>>(inner, n / inner, src, alpha,
                                                                                    dst, acc);
    LV_CUDA_LAUNCHED();
    return;
  }
  red_arg r;
  memset(&r, 0, sizeof r);
  int64_t st = 1, dn = 1;
  int64_t sstr[LV_KMAX_RANK];
  for (int d = bc->rank - 1; d >= 0; d--) {
    sstr[d] = st;
    st *= bc->shape[d];
  }
  r.inner = 1;
  for (int d = 0; d < bc->rank; d++) {
    if (bc->sa[d] != 0) {
      r.kshape[r.nk] = bc->shape[d];
      r.kstride[r.nk++] = sstr[d];
      dn *= bc->shape[d];
    } else {
      r.sshape[r.ns] = bc->shape[d];
      r.sstride[r.ns++] = sstr[d];
      r.inner *= bc->shape[d];
    }
  }
  /* dst is dense over the kept dims in their order (the CPU's dn-element memset). With
   * n == 0 the destination is still zeroed (not acc). */
  if (dn == 0) return;
  if (n == 0) r.inner = 0;
  reduce_to_k<<<lv_cuda_blocks(ctx, dn), LV_CUDA_THREADS, 0, ctx->stream>>>(r, dn, src, alpha, dst, acc);
  LV_CUDA_LAUNCHED();
}

__global__ void scale_add_k(int64_t n, const float *x, float s, float add, float *y) {
  LV_GRID_LOOP(i, n) y[i] = x[i] * s + add;
}
extern "C" void lv_cuda_scale_add(lv_kctx *ctx, int64_t n, const float *x, float s, float add, float *y) {
  if (n <= 0) return;
  scale_add_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, s, add, y);
  LV_CUDA_LAUNCHED();
}

__global__ void axpy_k(int64_t n, float alpha, const float *x, float *y, bool acc) {
  LV_GRID_LOOP(i, n) y[i] = acc ? y[i] + alpha * x[i] : alpha * x[i];
}
extern "C" void lv_cuda_axpy(lv_kctx *ctx, int64_t n, float alpha, const float *x, float *y, bool acc) {
  if (n <= 0) return;
  axpy_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, alpha, x, y, acc);
  LV_CUDA_LAUNCHED();
}

__global__ void act_fwd_k(int a, int64_t n, const float *x, float *y) {
  LV_GRID_LOOP(i, n) y[i] = lv_kact(a, x[i]);
}
/* relu's backward reads y when given (y > 0 exactly where x > 0), as the CPU does. */
__global__ void act_bwd_k(int a, int64_t n, const float *x, const float *y, const float *gy, float *gx, bool acc) {
  LV_GRID_LOOP(i, n) {
    float g;
    if (a == LV_ACT_RELU) g = (y ? y[i] : x[i]) > 0.0f ? gy[i] : 0.0f;
    else g = gy[i] * lv_kdact(a, x ? x[i] : 0.0f, y ? y[i] : 0.0f);
    gx[i] = acc ? gx[i] + g : g;
  }
}
extern "C" void lv_cuda_act_fwd(lv_kctx *ctx, int a, int64_t n, const float *x, float *y) {
  if (n <= 0) return;
  act_fwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(a, n, x, y);
  LV_CUDA_LAUNCHED();
}
extern "C" void lv_cuda_act_bwd(lv_kctx *ctx, int a, int64_t n, const float *x, const float *y, const float *gy,
                                float *gx, bool acc) {
  if (n <= 0) return;
  act_bwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(a, n, x, y, gy, gx, acc);
  LV_CUDA_LAUNCHED();
}

__global__ void max_scalar_fwd_k(int64_t n, const float *x, float s, float *y) {
  LV_GRID_LOOP(i, n) y[i] = x[i] > s ? x[i] : s;
}
__global__ void max_scalar_bwd_k(int64_t n, const float *x, float s, const float *gy, float *gx, bool acc) {
  LV_GRID_LOOP(i, n) {
    float g = x[i] > s ? gy[i] : 0.0f;
    gx[i] = acc ? gx[i] + g : g;
  }
}
extern "C" void lv_cuda_max_scalar_fwd(lv_kctx *ctx, int64_t n, const float *x, float s, float *y) {
  if (n <= 0) return;
  max_scalar_fwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, s, y);
  LV_CUDA_LAUNCHED();
}
extern "C" void lv_cuda_max_scalar_bwd(lv_kctx *ctx, int64_t n, const float *x, float s, const float *gy, float *gx,
                                       bool acc) {
  if (n <= 0) return;
  max_scalar_bwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, s, gy, gx, acc);
  LV_CUDA_LAUNCHED();
}

/* Philox-4x32-10 exactly as lv_philox4x32 (base/rng.h) with ctr_hi = 0: element i takes
 * word i % 4 of block i / 4 under key lv_rng_mix(seed, stream), as the CPU kernel. */
__device__ inline uint32_t philox_word(uint64_t key, uint64_t ctr, int word) {
  uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int i = 0; i < 10; i++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return word == 0 ? c0 : word == 1 ? c1 : word == 2 ? c2 : c3;
}

/* One thread per block of four elements (one Philox call each). */
__global__ void dropout_k(int64_t n, const float *x, float keep, float inv, uint64_t key, float *y, float *mask) {
  LV_GRID_LOOP(b, (n + 3) / 4) {
    for (int j = 0; j < 4 && b * 4 + j < n; j++) {
      int64_t i = b * 4 + j;
      uint32_t r = philox_word(key, (uint64_t)b, j);
      float m = (float)(r >> 8) * (1.0f / 16777216.0f) < keep ? inv : 0.0f;
      mask[i] = m;
      y[i] = x[i] * m;
    }
  }
}
extern "C" void lv_cuda_dropout_fwd(lv_kctx *ctx, int64_t n, const float *x, float keep, uint64_t seed,
                                    uint64_t stream, float *y, float *mask) {
  if (n <= 0) return;
  dropout_k<<<lv_cuda_blocks(ctx, (n + 3) / 4), LV_CUDA_THREADS, 0, ctx->stream>>>(
      n, x, keep, 1.0f / keep, lv_rng_mix(seed, stream), y, mask);
  LV_CUDA_LAUNCHED();
}

/* One thread per Philox block (two elements), as lv_cpu_add_noise. */
__global__ void add_noise_k(int64_t n, const float *x, float scale, bool uniform, uint64_t key, float *y) {
  LV_GRID_LOOP(b, (n + 1) / 2) {
    for (int64_t i = 2 * b; i < 2 * b + 2 && i < n; i++) {
      const int w = 2 * (int)(i & 1);
      uint32_t r0 = philox_word(key, (uint64_t)b, w), r1 = philox_word(key, (uint64_t)b, w + 1);
      float z;
      if (uniform) {
        z = (float)(r0 >> 8) * (1.0f / 16777216.0f) - 0.5f;
      } else {
        float u1 = (float)((r0 >> 8) + 1) * (1.0f / 16777216.0f), u2 = (float)(r1 >> 8) * (1.0f / 16777216.0f);
        z = sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
      }
      y[i] = x[i] + scale * z;
    }
  }
}
extern "C" void lv_cuda_add_noise(lv_kctx *ctx, int64_t n, const float *x, float scale, bool uniform, uint64_t seed,
                                  uint64_t stream, float *y) {
  if (n <= 0) return;
  add_noise_k<<<lv_cuda_blocks(ctx, (n + 1) / 2), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, scale, uniform,
                                                                                     lv_rng_mix(seed, stream), y);
  LV_CUDA_LAUNCHED();
}

extern "C" void lv_cuda_zero(lv_kctx *ctx, size_t bytes, void *y) {
  if (bytes) LV_CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, ctx->stream));
}

__global__ void fill_k(int64_t n, float v, float *y) {
  LV_GRID_LOOP(i, n) y[i] = v;
}
extern "C" void lv_cuda_fill(lv_kctx *ctx, int64_t n, float v, float *y) {
  if (n <= 0) return;
  fill_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, v, y);
  LV_CUDA_LAUNCHED();
}

__global__ void ema_k(int64_t n, double decay, const float *x, float *avg) {
  LV_GRID_LOOP(i, n) avg[i] = (float)(avg[i] * decay + x[i] * (1 - decay));
}
extern "C" void lv_cuda_ema_update(lv_kctx *ctx, int64_t n, double decay, const float *x, float *avg) {
  if (n <= 0) return;
  ema_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, decay, x, avg);
  LV_CUDA_LAUNCHED();
}

typedef struct bc3_arg {
  int rank;
  int64_t shape[LV_KMAX_RANK], s[3][LV_KMAX_RANK];
} bc3_arg;

__global__ void select_k(bc3_arg bc, int64_t n, const float *cond, const float *a, const float *b, float *out) {
  LV_GRID_LOOP(i, n) {
    int64_t o[3] = {0, 0, 0}, t = i;
    for (int d = bc.rank - 1; d >= 0; d--) {
      int64_t q = t % bc.shape[d];
      t /= bc.shape[d];
      for (int k = 0; k < 3; k++) o[k] += q * bc.s[k][d];
    }
    out[i] = cond[o[0]] != 0.0f ? a[o[1]] : b[o[2]];
  }
}
extern "C" void lv_cuda_select_fwd(lv_kctx *ctx, const lv_bcast3 *bc, const float *cond, const float *a,
                                   const float *b, float *out) {
  bc3_arg g;
  memset(&g, 0, sizeof g);
  g.rank = bc->rank;
  int64_t n = 1;
  for (int d = 0; d < bc->rank; d++) {
    g.shape[d] = bc->shape[d];
    n *= bc->shape[d];
    for (int k = 0; k < 3; k++) g.s[k][d] = bc->s[k][d];
  }
  if (n == 0) return;
  select_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(g, n, cond, a, b, out);
  LV_CUDA_LAUNCHED();
}

__global__ void mask_grad_k(bc_arg bc, int64_t n, const float *cond, const float *gy, bool set, float *out,
                            bool acc) {
  LV_GRID_LOOP(i, n) {
    int64_t oa, ob;
    bc_offs(bc, i, &oa, &ob);
    float g = (cond[oa] != 0.0f) == set ? gy[i] : 0.0f;
    out[i] = acc ? out[i] + g : g;
  }
}
extern "C" void lv_cuda_mask_grad(lv_kctx *ctx, const lv_bcast *bc, const float *cond, const float *gy,
                                  bool when_set, float *out, bool acc) {
  int64_t n = numel(bc);
  if (n == 0) return;
  mask_grad_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(bc_of(bc), n, cond, gy, when_set, out,
                                                                            acc);
  LV_CUDA_LAUNCHED();
}

__global__ void clip_fwd_k(int64_t n, const float *x, float lo, float hi, float *y) {
  LV_GRID_LOOP(i, n) {
    float v = x[i];
    y[i] = v < lo ? lo : (v > hi ? hi : v);
  }
}
__global__ void clip_bwd_k(int64_t n, const float *x, float lo, float hi, const float *gy, float *gx, bool acc) {
  LV_GRID_LOOP(i, n) {
    float v = x[i];
    float g = v >= lo && v <= hi ? gy[i] : 0.0f;
    gx[i] = acc ? gx[i] + g : g;
  }
}
extern "C" void lv_cuda_clip_fwd(lv_kctx *ctx, int64_t n, const float *x, float lo, float hi, float *y) {
  if (n <= 0) return;
  clip_fwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, lo, hi, y);
  LV_CUDA_LAUNCHED();
}
extern "C" void lv_cuda_clip_bwd(lv_kctx *ctx, int64_t n, const float *x, float lo, float hi, const float *gy,
                                 float *gx, bool acc) {
  if (n <= 0) return;
  clip_bwd_k<<<lv_cuda_blocks(ctx, n), LV_CUDA_THREADS, 0, ctx->stream>>>(n, x, lo, hi, gy, gx, acc);
  LV_CUDA_LAUNCHED();
}
