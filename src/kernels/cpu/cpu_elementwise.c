/* Elementwise kernels: broadcasting binary ops, their reductions back to an operand's
 * shape, scaling, activations and dropout. */
#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_math.h"

/* Below this many elements threads cost more than they save. */
#define PAR_MIN 32768

/* Offset of flat output index i in an operand with strides s. */
static inline int64_t bc_off(const lv_bcast *bc, const int64_t *s, int64_t i) {
  int64_t off = 0;
  for (int d = bc->rank - 1; d >= 0; d--) {
    int64_t q = i % bc->shape[d];
    i /= bc->shape[d];
    off += q * s[d];
  }
  return off;
}

static int64_t bc_numel(const lv_bcast *bc) {
  int64_t n = 1;
  for (int d = 0; d < bc->rank; d++) n *= bc->shape[d];
  return n;
}

static bool is_dense(const lv_bcast *bc, const int64_t *s) {
  int64_t st = 1;
  for (int d = bc->rank - 1; d >= 0; d--) {
    if (bc->shape[d] != 1 && s[d] != st) return false;
    st *= bc->shape[d];
  }
  return true;
}

/* Operand b covers only the trailing `inner` elements (a bias row) and repeats. */
static bool is_row(const lv_bcast *bc, const int64_t *s, int64_t *inner) {
  int d = bc->rank - 1;
  int64_t st = 1;
  while (d >= 0 && (bc->shape[d] == 1 || s[d] == st)) {
    st *= bc->shape[d];
    d--;
  }
  for (int e = d; e >= 0; e--)
    if (s[e] != 0 && bc->shape[e] != 1) return false;
  *inner = st;
  return true;
}

/* Operand b holds one value per `inner` consecutive elements (a [rows, 1] column spread
 * along the last dims: a padding mask): its trailing dims have stride 0, the leading
 * ones are dense over the rows. */
static bool is_col(const lv_bcast *bc, const int64_t *s, int64_t *inner) {
  int d = bc->rank - 1;
  int64_t in = 1;
  while (d >= 0 && (bc->shape[d] == 1 || s[d] == 0)) {
    in *= bc->shape[d];
    d--;
  }
  int64_t st = 1;
  for (int e = d; e >= 0; e--) {
    if (bc->shape[e] != 1 && s[e] != st) return false;
    st *= bc->shape[e];
  }
  *inner = in;
  return in > 1 && d >= 0;
}

/* The trailing elements, as many as possible, over which both operands run contiguously
 * as the output does (each operand's strides there are the output's dense ones): the
 * output is then blocks of `inner` elements, each x's and b's block at an offset of its
 * own (a [B, S, H] + [B, 1, H] attention sum: blocks of H). */
static int64_t inner_run(const lv_bcast *bc) {
  int64_t st = 1;
  for (int d = bc->rank - 1; d >= 0; d--) {
    if (bc->shape[d] != 1 && (bc->sa[d] != st || bc->sb[d] != st)) break;
    st *= bc->shape[d];
  }
  return st;
}

/* What the parallel loops below read. */
typedef struct ew {
  int op, a;
  const float *x, *y, *gy, *r, *b, *src;
  float *out, *gx, *mask, *dst;
  int64_t inner, rows;
  float alpha, s, add, keep, inv;
  uint64_t key;
  bool acc;
  const lv_bcast *bc;
} ew;

/* out[i] = x[i] op b[i] over n contiguous elements. The common ops get their own loops so
 * they vectorize (a switch per element does not); the results are the same bits. */
#define BIN_SIMD(EXPR) \
  _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { \
    const float a = x[i], c = b[i];                       \
    o[i] = (EXPR);                                        \
  }                                                       \
  return;
static void bin_vec(int op, int64_t n, const float *x, const float *b, float *o) {
  switch (op) {
    case LV_BIN_ADD: BIN_SIMD(a + c)
    case LV_BIN_SUB: BIN_SIMD(a - c)
    case LV_BIN_MUL: BIN_SIMD(a * c)
    case LV_BIN_DIV: BIN_SIMD(a / c)
    case LV_BIN_MAX: BIN_SIMD(a >= c ? a : c)
    case LV_BIN_MIN: BIN_SIMD(a <= c ? a : c)
    default:
      for (int64_t i = 0; i < n; i++) o[i] = lv_kbin(op, x[i], b[i]);
  }
}
#undef BIN_SIMD

static void bin_dense(void *arg, int64_t lo, int64_t hi, int slot) {
  const ew *J = arg;
  (void)slot;
  bin_vec(J->op, hi - lo, J->x + lo, J->b + lo, J->out + lo);
}
LV_CPU_PAR_LOOP(bin_strided, ew, i,
                J->out[i] = lv_kbin(J->op, J->x[bc_off(J->bc, J->bc->sa, i)], J->b[bc_off(J->bc, J->bc->sb, i)]);)
LV_CPU_PAR_LOOP(bin_blocks, ew, r,
                bin_vec(J->op, J->inner, J->x + bc_off(J->bc, J->bc->sa, r * J->inner),
                        J->b + bc_off(J->bc, J->bc->sb, r * J->inner), J->out + r * J->inner);)
LV_CPU_PAR_LOOP(bin_row_b, ew, r, bin_vec(J->op, J->inner, J->x + r * J->inner, J->b, J->out + r * J->inner);)
LV_CPU_PAR_LOOP(bin_row_a, ew, r, bin_vec(J->op, J->inner, J->x, J->b + r * J->inner, J->out + r * J->inner);)
/* Row r of a op its one value b[r] (is_col); the common ops vectorize along the row. */
static void bin_col_b(void *arg, int64_t lo, int64_t hi, int slot) {
  const ew *J = arg;
  (void)slot;
  const int64_t in = J->inner;
  for (int64_t r = lo; r < hi; r++) {
    const float *x = J->x + r * in, c = J->b[r];
    float *o = J->out + r * in;
    switch (J->op) {
      case LV_BIN_MUL: _Pragma("omp simd") for (int64_t i = 0; i < in; i++) o[i] = x[i] * c; break;
      case LV_BIN_ADD: _Pragma("omp simd") for (int64_t i = 0; i < in; i++) o[i] = x[i] + c; break;
      default:
        for (int64_t i = 0; i < in; i++) o[i] = lv_kbin(J->op, x[i], c);
    }
  }
}

/* dst[j] (+)= alpha * sum over r of src[r][j], for the columns [lo, hi). Rows are read in
 * order, a strip of columns at a time, into per-column sums: each column adds its rows in
 * row order as a column-at-a-time loop would (the same bits), but memory is read along
 * the rows and the adds vectorize. */
static void reduce_rows(void *arg, int64_t lo, int64_t hi, int slot) {
  const ew *J = arg;
  (void)slot;
  enum { STRIP = 256 };
  float acc[STRIP];
  for (int64_t j0 = lo; j0 < hi; j0 += STRIP) {
    const int64_t w = hi - j0 < STRIP ? hi - j0 : STRIP;
    for (int64_t j = 0; j < w; j++) acc[j] = 0.0f;
    for (int64_t r = 0; r < J->rows; r++) {
      const float *row = J->src + r * J->inner + j0;
      _Pragma("omp simd") for (int64_t j = 0; j < w; j++) acc[j] += row[j];
    }
    float *d = J->dst + j0;
    const float alpha = J->alpha; /* a local: d might alias *J, which kept these loops scalar */
    if (J->acc) {
      _Pragma("omp simd") for (int64_t j = 0; j < w; j++) d[j] += alpha * acc[j];
    } else {
      _Pragma("omp simd") for (int64_t j = 0; j < w; j++) d[j] = alpha * acc[j];
    }
  }
}

void lv_cpu_binary(lv_kctx *ctx, lv_binary_op op, const lv_bcast *bc, const float *a, const float *b, float *out) {
  int64_t n = bc_numel(bc);
  bool da = is_dense(bc, bc->sa), db = is_dense(bc, bc->sb);
  int64_t inner;
  ew e = {.op = op, .x = a, .b = b, .out = out};
  if (da && db) {
    lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, bin_dense, &e);
  } else if (da && is_row(bc, bc->sb, &inner) && inner > 0) {
    e.inner = inner;
    int64_t rows = n / inner;
    lv_cpu_par(ctx, rows, n > PAR_MIN ? lv_cpu_grain(rows, (4096 + inner - 1) / inner) : rows, bin_row_b, &e);
  } else if (db && is_row(bc, bc->sa, &inner) && inner > 0) {
    e.inner = inner;
    int64_t rows = n / inner;
    lv_cpu_par(ctx, rows, n > PAR_MIN ? lv_cpu_grain(rows, (4096 + inner - 1) / inner) : rows, bin_row_a, &e);
  } else if (da && is_col(bc, bc->sb, &inner)) {
    e.inner = inner;
    int64_t rows = n / inner;
    lv_cpu_par(ctx, rows, n > PAR_MIN ? lv_cpu_grain(rows, (4096 + inner - 1) / inner) : rows, bin_col_b, &e);
  } else if ((inner = inner_run(bc)) >= 8) {
    e.bc = bc;
    e.inner = inner;
    int64_t rows = n / inner;
    lv_cpu_par(ctx, rows, n > PAR_MIN ? lv_cpu_grain(rows, (4096 + inner - 1) / inner) : rows, bin_blocks, &e);
  } else {
    e.bc = bc;
    lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, bin_strided, &e);
  }
}

/* Serial over the source so repeated destinations add up safely, except for the common
 * "sum the rows" case (bias gradients), which is split by column. */
void lv_cpu_reduce_to(lv_kctx *ctx, const lv_bcast *bc, const float *src, float alpha, float *dst, bool acc) {
  int64_t n = bc_numel(bc);
  int64_t dn = 1;
  for (int d = 0; d < bc->rank; d++)
    if (bc->sa[d] != 0) dn *= bc->shape[d];
  int64_t inner;
  if (is_row(bc, bc->sa, &inner) && inner > 0) {
    ew e = {.src = src, .dst = dst, .inner = inner, .rows = n / inner, .alpha = alpha, .acc = acc};
    lv_cpu_par(ctx, inner, n > PAR_MIN ? lv_cpu_grain(inner, 64) : inner, reduce_rows, &e);
    return;
  }
  if (!acc) memset(dst, 0, (size_t)dn * sizeof(float));
  /* Blocks of the trailing elements that dst holds contiguously (the [B, 1, H] operand
   * of a [B, S, H] sum: blocks of H), in the order of i, so each element of dst adds its
   * sources in the same order as the loop below. */
  int64_t st = 1;
  for (int d = bc->rank - 1; d >= 0 && (bc->shape[d] == 1 || bc->sa[d] == st); d--) st *= bc->shape[d];
  if (st >= 8) {
    for (int64_t r = 0; r < n / st; r++) {
      float *d = dst + bc_off(bc, bc->sa, r * st);
      const float *x = src + r * st;
      _Pragma("omp simd") for (int64_t j = 0; j < st; j++) d[j] += alpha * x[j];
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) dst[bc_off(bc, bc->sa, i)] += alpha * src[i];
}

LV_CPU_PAR_SIMD_LOOP(scale_add_piece, ew, i, J->out[i] = J->x[i] * J->s + J->add;)
LV_CPU_PAR_SIMD_LOOP(axpy_acc_piece, ew, i, J->out[i] += J->alpha * J->x[i];)
LV_CPU_PAR_SIMD_LOOP(axpy_piece, ew, i, J->out[i] = J->alpha * J->x[i];)

void lv_cpu_scale_add(lv_kctx *ctx, int64_t n, const float *x, float s, float add, float *y) {
  ew e = {.x = x, .s = s, .add = add, .out = y};
  lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, scale_add_piece, &e);
}

void lv_cpu_axpy(lv_kctx *ctx, int64_t n, float alpha, const float *x, float *y, bool acc) {
  ew e = {.x = x, .alpha = alpha, .out = y};
  lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, acc ? axpy_acc_piece : axpy_piece, &e);
}

LV_CPU_PAR_SIMD_LOOP(relu_fwd, ew, i, {
  float v = J->x[i];
  J->out[i] = v > 0.0f ? v : 0.0f;
})
LV_CPU_PAR_LOOP(act_fwd, ew, i, J->out[i] = lv_kact(J->a, J->x[i]);)
/* act_fwd with the activation a constant, for tanh (the attention's) and sigmoid: the
 * switch folds away and the loop vectorizes. */
LV_CPU_PAR_SIMD_LOOP(tanh_fwd, ew, i, J->out[i] = lv_kact(LV_ACT_TANH, J->x[i]);)
LV_CPU_PAR_SIMD_LOOP(sigm_fwd, ew, i, J->out[i] = lv_kact(LV_ACT_SIGMOID, J->x[i]);)
LV_CPU_PAR_SIMD_LOOP(relu_bwd_acc, ew, i, {
  float g = J->gy[i];
  J->gx[i] += J->r[i] > 0.0f ? g : 0.0f;
})
LV_CPU_PAR_SIMD_LOOP(relu_bwd, ew, i, {
  float g = J->gy[i];
  J->gx[i] = J->r[i] > 0.0f ? g : 0.0f;
})
LV_CPU_PAR_LOOP(act_bwd, ew, i, {
  float g = J->gy[i] * lv_kdact(J->a, J->x[i], J->y[i]);
  J->gx[i] = J->acc ? J->gx[i] + g : g;
})
/* act_bwd with the activation a constant (so lv_kdact's switch folds away): tanh and
 * sigmoid, whose derivatives need y alone. */
LV_CPU_PAR_SIMD_LOOP(tanh_bwd, ew, i, {
  float g = J->gy[i] * lv_kdact(LV_ACT_TANH, 0.0f, J->y[i]);
  J->gx[i] = J->acc ? J->gx[i] + g : g;
})
LV_CPU_PAR_SIMD_LOOP(sigm_bwd, ew, i, {
  float g = J->gy[i] * lv_kdact(LV_ACT_SIGMOID, 0.0f, J->y[i]);
  J->gx[i] = J->acc ? J->gx[i] + g : g;
})

void lv_cpu_act_fwd(lv_kctx *ctx, int a, int64_t n, const float *x, float *y) {
  ew e = {.a = a, .x = x, .out = y};
  if (a == LV_ACT_RELU) {
    lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, relu_fwd, &e);
    return;
  }
  lv_cpu_par_fn fn = a == LV_ACT_TANH ? tanh_fwd : (a == LV_ACT_SIGMOID ? sigm_fwd : act_fwd);
  lv_cpu_par(ctx, n, n > PAR_MIN / 8 ? lv_cpu_grain(n, 4096) : n, fn, &e);
}

void lv_cpu_act_bwd(lv_kctx *ctx, int a, int64_t n, const float *x, const float *y, const float *gy, float *gx,
                    bool acc) {
  if (a == LV_ACT_RELU) {
    /* y > 0 exactly where x > 0, and y is what the caller keeps around. Both loads are
     * unconditional so the select vectorizes (a branch here mispredicts half the time). */
    ew e = {.r = y ? y : x, .gy = gy, .gx = gx};
    lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, acc ? relu_bwd_acc : relu_bwd, &e);
    return;
  }
  ew e = {.a = a, .x = x, .y = y, .gy = gy, .gx = gx, .acc = acc};
  lv_cpu_par_fn fn = act_bwd;
  if (y && a == LV_ACT_TANH) fn = tanh_bwd;
  if (y && a == LV_ACT_SIGMOID) fn = sigm_bwd;
  lv_cpu_par(ctx, n, n > PAR_MIN / 8 ? lv_cpu_grain(n, 4096) : n, fn, &e);
}

/* lv_philox4x32 for LANES consecutive counters at once, written lane-wise so the
 * compiler runs the rounds in vector registers (32x32->64 multiplies); the scalar form
 * spends most of dropout's time in the ten dependent rounds of one block. */
#define LANES 16
static void philox_lanes(uint64_t key, uint64_t ctr0, uint32_t out[4][LANES]) {
  const uint32_t k0i = (uint32_t)key, k1i = (uint32_t)(key >> 32);
#pragma omp simd
  for (int l = 0; l < LANES; l++) {
    uint64_t ctr = ctr0 + (uint64_t)l;
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = k0i, k1 = k1i;
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
    out[0][l] = c0;
    out[1][l] = c1;
    out[2][l] = c2;
    out[3][l] = c3;
  }
}

static inline void dropout_one(const float *x, float keep, float inv, uint32_t r, float *y,
                               float *mask, int64_t i) {
  float m = (float)(r >> 8) * (1.0f / 16777216.0f) < keep ? inv : 0.0f;
  mask[i] = m;
  y[i] = x[i] * m;
}

LV_CPU_PAR_LOOP(dropout_groups, ew, gi, {
  uint32_t r[4][LANES];
  philox_lanes(J->key, (uint64_t)(gi * LANES), r);
  int64_t base = gi * 4 * LANES;
  for (int l = 0; l < LANES; l++)
    for (int j = 0; j < 4; j++) dropout_one(J->x, J->keep, J->inv, r[j][l], J->out, J->mask, base + 4 * l + j);
})

void lv_cpu_dropout_fwd(lv_kctx *ctx, int64_t n, const float *x, float keep, uint64_t seed, uint64_t stream,
                        float *y, float *mask) {
  const float inv = 1.0f / keep;
  const uint64_t key = lv_rng_mix(seed, stream);
  /* Element i takes word i % 4 of block i / 4, as in lv_rng_uniform_at's stream. */
  const int64_t groups = n / (4 * LANES);
  ew e = {.x = x, .keep = keep, .inv = inv, .key = key, .out = y, .mask = mask};
  lv_cpu_par(ctx, groups, n > PAR_MIN / 4 ? lv_cpu_grain(groups, 256) : groups, dropout_groups, &e);
  for (int64_t b = groups * LANES; b * 4 < n; b++) {
    uint32_t r[4];
    lv_philox4x32(key, 0, (uint64_t)b, r);
    for (int j = 0; j < 4 && b * 4 + j < n; j++) dropout_one(x, keep, inv, r[j], y, mask, b * 4 + j);
  }
}

/* The kernel's noise for element i from the four words r of its Philox block. */
static inline float noise_one(const uint32_t r[4], int64_t i, bool uniform) {
  const int w = 2 * (int)(i & 1);
  if (uniform) return (float)(r[w] >> 8) * (1.0f / 16777216.0f) - 0.5f;
  const float u1 = (float)((r[w] >> 8) + 1) * (1.0f / 16777216.0f), u2 = (float)(r[w + 1] >> 8) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

LV_CPU_PAR_LOOP(add_noise_piece, ew, b, {
  uint32_t r[4];
  lv_philox4x32(J->key, 0, (uint64_t)b, r);
  for (int64_t i = 2 * b; i < 2 * b + 2 && i < J->rows; i++)
    J->out[i] = J->x[i] + J->s * noise_one(r, i, J->acc);
})

void lv_cpu_add_noise(lv_kctx *ctx, int64_t n, const float *x, float scale, bool uniform, uint64_t seed,
                      uint64_t stream, float *y) {
  const int64_t blocks = (n + 1) / 2;
  ew e = {.x = x, .s = scale, .acc = uniform, .key = lv_rng_mix(seed, stream), .out = y, .rows = n};
  lv_cpu_par(ctx, blocks, blocks > PAR_MIN / 8 ? lv_cpu_grain(blocks, 1024) : blocks, add_noise_piece, &e);
}

LV_CPU_PAR_LOOP(max_scalar_piece, ew, i, J->out[i] = J->x[i] > J->s ? J->x[i] : J->s;)
LV_CPU_PAR_LOOP(max_scalar_bwd_piece, ew, i, {
  float g = J->x[i] > J->s ? J->gy[i] : 0.0f;
  J->gx[i] = J->acc ? J->gx[i] + g : g;
})

void lv_cpu_max_scalar_fwd(lv_kctx *ctx, int64_t n, const float *x, float s, float *y) {
  ew e = {.x = x, .s = s, .out = y};
  lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, max_scalar_piece, &e);
}

void lv_cpu_max_scalar_bwd(lv_kctx *ctx, int64_t n, const float *x, float s, const float *gy,
                           float *gx, bool acc) {
  ew e = {.x = x, .s = s, .gy = gy, .gx = gx, .acc = acc};
  lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, max_scalar_bwd_piece, &e);
}

void lv_cpu_zero(lv_kctx *ctx, size_t bytes, void *y) { memset(y, 0, bytes); }

void lv_cpu_fill(lv_kctx *ctx, int64_t n, float v, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = v;
}

void lv_cpu_ema_update(lv_kctx *ctx, int64_t n, double decay, const float *x, float *avg) {
  for (int64_t i = 0; i < n; i++) avg[i] = (float)(avg[i] * decay + x[i] * (1 - decay));
}

/* ---- select, masked gradients, clip ---- */

static inline int64_t bc3_off(const lv_bcast3 *bc, int k, int64_t i) {
  int64_t off = 0;
  for (int d = bc->rank - 1; d >= 0; d--) {
    int64_t q = i % bc->shape[d];
    i /= bc->shape[d];
    off += q * bc->s[k][d];
  }
  return off;
}

typedef struct sel_job {
  const lv_bcast3 *bc3;
  const lv_bcast *bc;
  const float *cond, *a, *b, *gy, *x;
  float *out;
  float lo, hi;
  bool set, acc, dense;
} sel_job;

static void select_piece(void *arg, int64_t lo, int64_t hi, int slot) {
  const sel_job *J = arg;
  (void)slot;
  if (J->dense) {
    for (int64_t i = lo; i < hi; i++) J->out[i] = J->cond[i] != 0.0f ? J->a[i] : J->b[i];
    return;
  }
  for (int64_t i = lo; i < hi; i++)
    J->out[i] = J->cond[bc3_off(J->bc3, 0, i)] != 0.0f ? J->a[bc3_off(J->bc3, 1, i)] : J->b[bc3_off(J->bc3, 2, i)];
}

void lv_cpu_select_fwd(lv_kctx *ctx, const lv_bcast3 *bc, const float *cond, const float *a, const float *b,
                       float *out) {
  int64_t n = 1;
  bool dense = true;
  for (int d = 0; d < bc->rank; d++) n *= bc->shape[d];
  for (int k = 0; k < 3; k++) {
    int64_t st = 1;
    for (int d = bc->rank - 1; d >= 0; d--) {
      if (bc->shape[d] != 1 && bc->s[k][d] != st) dense = false;
      st *= bc->shape[d];
    }
  }
  sel_job j = {.bc3 = bc, .cond = cond, .a = a, .b = b, .out = out, .dense = dense};
  lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, select_piece, &j);
}

static void mask_piece(void *arg, int64_t lo, int64_t hi, int slot) {
  const sel_job *J = arg;
  (void)slot;
  for (int64_t i = lo; i < hi; i++) {
    float g = (J->cond[bc_off(J->bc, J->bc->sa, i)] != 0.0f) == J->set ? J->gy[i] : 0.0f;
    J->out[i] = J->acc ? J->out[i] + g : g;
  }
}

void lv_cpu_mask_grad(lv_kctx *ctx, const lv_bcast *bc, const float *cond, const float *gy, bool when_set,
                      float *out, bool acc) {
  int64_t n = bc_numel(bc);
  sel_job j = {.bc = bc, .cond = cond, .gy = gy, .out = out, .set = when_set, .acc = acc};
  lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, mask_piece, &j);
}

LV_CPU_PAR_LOOP(clip_piece, sel_job, i, {
  float v = J->x[i];
  J->out[i] = v < J->lo ? J->lo : (v > J->hi ? J->hi : v);
})
LV_CPU_PAR_LOOP(clip_bwd_piece, sel_job, i, {
  float v = J->x[i];
  float g = v >= J->lo && v <= J->hi ? J->gy[i] : 0.0f;
  J->out[i] = J->acc ? J->out[i] + g : g;
})

void lv_cpu_clip_fwd(lv_kctx *ctx, int64_t n, const float *x, float lo, float hi, float *y) {
  sel_job j = {.x = x, .lo = lo, .hi = hi, .out = y};
  lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, clip_piece, &j);
}

void lv_cpu_clip_bwd(lv_kctx *ctx, int64_t n, const float *x, float lo, float hi, const float *gy, float *gx,
                     bool acc) {
  sel_job j = {.x = x, .lo = lo, .hi = hi, .gy = gy, .out = gx, .acc = acc};
  lv_cpu_par(ctx, n, n > PAR_MIN ? lv_cpu_grain(n, 4096) : n, clip_bwd_piece, &j);
}
