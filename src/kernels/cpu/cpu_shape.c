/* Data movement: block copies (concat, slice and their gradients), transpose, embedding
 * gather and its scatter-add gradient, dtype casts. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_math.h"

typedef struct blk_job {
  int64_t run, inner, src_n, src_off, dst_n, dst_off, rank;
  const float *src;
  float *dst;
  bool acc;
  const int64_t *ys, *ystr;
  size_t elem;
  const void *x;
  void *y;
  const int32_t *ids;
  const float *table;
} blk_job;

LV_CPU_PAR_LOOP(copy_block_outer, blk_job, o, {
  const int64_t run = J->run;
  const float *s = J->src + (o * J->src_n + J->src_off) * J->inner;
  float *d = J->dst + (o * J->dst_n + J->dst_off) * J->inner;
  if (J->acc) {
    _Pragma("omp simd") for (int64_t i = 0; i < run; i++) d[i] += s[i];
  } else {
    memcpy(d, s, sizeof(float) * (size_t)run);
  }
})

void lv_cpu_copy_block(lv_kctx *ctx, int64_t outer, int64_t len, int64_t inner, const float *src, int64_t src_n,
                       int64_t src_off, float *dst, int64_t dst_n, int64_t dst_off, bool acc) {
  const int64_t run = len * inner;
  blk_job j = {.run = run, .inner = inner, .src_n = src_n, .src_off = src_off, .dst_n = dst_n, .dst_off = dst_off,
               .src = src, .dst = dst, .acc = acc};
  lv_cpu_par(ctx, outer, outer * run > 65536 ? lv_cpu_grain(outer, 1) : outer, copy_block_outer, &j);
}

LV_CPU_PAR_LOOP(transpose_elems, blk_job, i, {
  int64_t r = i, off = 0;
  for (int d = (int)J->rank - 1; d >= 0; d--) {
    off += (r % J->ys[d]) * J->ystr[d];
    r /= J->ys[d];
  }
  if (J->acc)
    ((float *)J->y)[i] += ((const float *)J->x)[off];
  else
    memcpy((char *)J->y + (size_t)i * J->elem, (const char *)J->x + (size_t)off * J->elem, J->elem);
})

/* y[perm-ordered index] = x[index]: y's dim i is x's dim perm[i]. */
void lv_cpu_transpose(lv_kctx *ctx, int rank, const int64_t *shape, const int *perm, size_t elem, const void *x,
                      void *y, bool acc_f32) {
  int64_t xstride[LV_KMAX_RANK], ys[LV_KMAX_RANK], ystr[LV_KMAX_RANK];
  int64_t st = 1, n = 1;
  for (int d = rank - 1; d >= 0; d--) {
    xstride[d] = st;
    st *= shape[d];
  }
  for (int d = 0; d < rank; d++) {
    ys[d] = shape[perm[d]];
    ystr[d] = xstride[perm[d]];
    n *= ys[d];
  }
  blk_job j = {.rank = rank, .ys = ys, .ystr = ystr, .elem = elem, .x = x, .y = y, .acc = acc_f32};
  lv_cpu_par(ctx, n, n > 65536 ? lv_cpu_grain(n, 4096) : n, transpose_elems, &j);
}

LV_CPU_PAR_LOOP(gather_rows, blk_job, i,
                memcpy(J->dst + i * J->inner, J->table + (int64_t)J->ids[i] * J->inner, sizeof(float) * (size_t)J->inner);)

void lv_cpu_gather_fwd(lv_kctx *ctx, int64_t v, int64_t d, const float *table, int64_t n,
                       const int32_t *ids, float *out, uint64_t tag) {
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= v) {
      lv_cpu_record_error(ctx, (lv_kerror){tag, i, ids[i], v});
      return;
    }
  blk_job j = {.inner = d, .ids = ids, .table = table, .dst = out};
  lv_cpu_par(ctx, n, n * d > 65536 ? lv_cpu_grain(n, 16) : n, gather_rows, &j);
}

/* Only the rows of ids are touched. Every element adds its ids' rows in id order, so
 * repeated ids sum the same way whichever thread runs: large gradients are split by
 * columns, never by ids. */
typedef struct scatter_job {
  int64_t d, n;
  const int32_t *ids;
  const float *gy;
  float *gtable;
} scatter_job;

static void scatter_cols(void *arg, int64_t lo, int64_t hi, int slot) {
  const scatter_job *J = arg;
  (void)slot;
  for (int64_t i = 0; i < J->n; i++) {
    float *row = J->gtable + (int64_t)J->ids[i] * J->d;
    const float *g = J->gy + i * J->d;
    for (int64_t j = lo; j < hi; j++) row[j] += g[j];
  }
}

void lv_cpu_gather_bwd(lv_kctx *ctx, int64_t v, int64_t d, int64_t n, const int32_t *ids, const float *gy,
                       float *gtable) {
  (void)v;
  scatter_job j = {d, n, ids, gy, gtable};
  lv_cpu_par(ctx, d, n * d > 65536 ? lv_cpu_grain(d, 64) : d, scatter_cols, &j);
}

typedef struct cols_job {
  int64_t d, c, n, off;
  const int32_t *ids;
  const float *w, *gy;
  float *out, *gw;
} cols_job;

LV_CPU_PAR_LOOP(gather_cols_rows, cols_job, i, {
  float *o = J->out + i * J->d;
  const int64_t col = (int64_t)J->ids[i] - J->off;
  if (col < 0 || col >= J->c)
    memset(o, 0, sizeof(float) * (size_t)J->d);
  else
    for (int64_t j = 0; j < J->d; j++) o[j] = J->w[j * J->c + col];
})

void lv_cpu_gather_cols_fwd(lv_kctx *ctx, int64_t d, int64_t c, const float *w, int64_t n, const int32_t *ids,
                            int64_t off, float *out) {
  cols_job j = {.d = d, .c = c, .n = n, .off = off, .ids = ids, .w = w, .out = out};
  lv_cpu_par(ctx, n, n * d > 65536 ? lv_cpu_grain(n, 16) : n, gather_cols_rows, &j);
}

/* A thread owns rows of gw and adds the ids' gradients in position order: the sums do not
 * depend on the thread count. */
LV_CPU_PAR_LOOP(scatter_cols_rows, cols_job, j, {
  float *row = J->gw + j * J->c;
  for (int64_t i = 0; i < J->n; i++) {
    const int64_t col = (int64_t)J->ids[i] - J->off;
    if (col >= 0 && col < J->c) row[col] += J->gy[i * J->d + j];
  }
})

void lv_cpu_gather_cols_bwd(lv_kctx *ctx, int64_t d, int64_t c, int64_t n, const int32_t *ids, int64_t off,
                            const float *gy, float *gw) {
  cols_job j = {.d = d, .c = c, .n = n, .off = off, .ids = ids, .gy = gy, .gw = gw};
  lv_cpu_par(ctx, d, n * d > 65536 ? lv_cpu_grain(d, 16) : d, scatter_cols_rows, &j);
}

/* Float to integer truncates toward zero, like tf.cast (kernel_math.h). */
void lv_cpu_cast(lv_kctx *ctx, lv_dtype from, lv_dtype to, int64_t n, const void *x, void *y) {
  if (from == LV_I64 && to == LV_I64) {
    memcpy(y, x, sizeof(int64_t) * (size_t)n);
    return;
  }
  for (int64_t i = 0; i < n; i++) lv_kcast_at(from, to, x, y, i);
}

typedef struct rev_job {
  int64_t b, inner;
  const int32_t *lens;
  const float *x;
  float *y;
  bool acc;
} rev_job;

/* One (step, sequence) row of y per index. */
LV_CPU_PAR_LOOP(rev_rows, rev_job, row, {
  const int64_t s = row / J->b, bi = row % J->b, len = J->lens[bi];
  const int64_t src = s < len ? len - 1 - s : s;
  const float *xr = J->x + (src * J->b + bi) * J->inner;
  float *yr = J->y + row * J->inner;
  if (J->acc)
    for (int64_t i = 0; i < J->inner; i++) yr[i] += xr[i];
  else
    memcpy(yr, xr, sizeof(float) * (size_t)J->inner);
})

void lv_cpu_reverse_seq(lv_kctx *ctx, int64_t t, int64_t b, int64_t inner, const float *pad, const float *x,
                        float *y, bool acc, int32_t *lens) {
  for (int64_t bi = 0; bi < b; bi++) {
    double sum = 0;
    for (int64_t s = 0; s < t; s++) sum += 1.0 - (double)pad[s * b + bi];
    double len = rint(sum);
    lens[bi] = (int32_t)(len < 0 ? 0 : (len > (double)t ? (double)t : len));
  }
  rev_job j = {b, inner, lens, x, y, acc};
  int64_t rows = t * b;
  lv_cpu_par(ctx, rows, rows * inner > 65536 ? lv_cpu_grain(rows, 16) : rows, rev_rows, &j);
}
