/* Direct 2-D convolution for stride 1 and dilation 1 (LeNet's and most small convnets'
 * layers) with AVX-512 register tiles, without im2col, col2im or GEMM packing: on
 * LeNet5's training step those copies (patch building, OpenBLAS packing and its
 * beta-zeroing of C, col2im) took more time than the multiply-adds themselves.
 *
 * Everything is one correlation over a zero-padded input row: output pixel (oh, ow)
 * takes, for each filter row kh, the KW*C floats that start at column ow of the padded
 * input row ih = oh + kh - pt, times the filter's rows [kh][kw][c] of O outputs. One
 * register tile holds R pixels x V vectors of 16 outputs; each tap is a broadcast of one
 * input float times V filter vectors (the filter's rows stay in L1/L2).
 *  - forward: y = corr(x, w);
 *  - input gradient: gx = corr(gy, w') with w' the filter flipped in space and with
 *    C and O swapped, and leading pads KH-1-pt, KW-1-pl (a "full" correlation);
 *  - filter gradient: the same tile with pixels as the summed index: gw[kh][kw*C+c][:]
 *    += x_padded[ih][ow*C + kw*C+c] gy[oh][ow][:], per fixed group of images, the
 *    groups' partial sums added in group order.
 * Every output element is summed in an order fixed by the shapes (taps in (kh, kw, c)
 * order; pixels in image, row, column order), so results do not depend on the threads.
 * Used where the CPU has AVX-512 and the shapes fit (lv_cpu_conv2d_direct_ok); otherwise
 * cpu_conv.c's im2col + GEMM runs, and is the reference the tests compare with. */
#include <string.h>

#include "base/status.h"
#include "kernels/cpu/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512_ISA "avx512f,avx512dq,avx512bw,avx512vl" /* what lv_cpu_has_avx512 checks */
#define AVX512 __attribute__((target(AVX512_ISA)))
#define INLINE_AVX512 static inline __attribute__((always_inline, target(AVX512_ISA)))

#define ROWBUF_FLOATS 8192 /* padded input rows on the stack, per call of a piece */
#define MAX_SEGS 64        /* filter rows (forward) or output rows per block (filter gradient) */
#define MAX_GROUPS 8       /* filter-gradient partial sums */
#define GW_BLOCK_FLOATS 4096 /* gy floats per block of output rows (stays in L1) */
#define MAX_V 4              /* vectors of 16 floats across a tile */

/* A tile's sum: for each segment s and index i < ni, acc[r][v] += x[s][r*xr + i*xi] *
 * vec[s][i*ldv + 16v]; then out[r*ldo + 16v] = acc (or += acc when add), the last
 * vector masked by `last`. */
typedef struct tile_job {
  int nseg;
  const float *x[MAX_SEGS], *vec[MAX_SEGS];
  int64_t ni, xr, xi, ldv, ldo;
  __mmask16 last;
  float *out;
  bool add;
} tile_job;

INLINE_AVX512 void tile_body(const int V, const int R, const tile_job *t) {
  __m512 acc[16][MAX_V]; /* fixed sizes: GCC keeps a variable-length array in memory */
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) acc[r][v] = _mm512_setzero_ps();
  const int64_t xr = t->xr, xi = t->xi, ldv = t->ldv, ni = t->ni;
  const __mmask16 last = t->last;
  for (int s = 0; s < t->nseg; s++) {
    const float *x = t->x[s], *vp = t->vec[s];
    for (int64_t i = 0; i < ni; i++) {
      __m512 w[MAX_V];
#pragma GCC unroll 4
      for (int v = 0; v < V; v++) {
        w[v] = v == V - 1 ? _mm512_maskz_loadu_ps(last, vp + 16 * v) : _mm512_loadu_ps(vp + 16 * v);
        /* In a register: GCC would otherwise fold the load into each of the R FMAs. */
        __asm__("" : "+v"(w[v]));
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        const __m512 b = _mm512_set1_ps(x[r * xr]);
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) acc[r][v] = _mm512_fmadd_ps(b, w[v], acc[r][v]);
      }
      x += xi;
      vp += ldv;
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
      float *o = t->out + r * t->ldo + 16 * v;
      const __mmask16 m = v == V - 1 ? last : (__mmask16)0xffff;
      __m512 a = acc[r][v];
      if (t->add) a = _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), a);
      _mm512_mask_storeu_ps(o, m, a);
    }
}

/* Largest R per V: R*V accumulators, V filter vectors and a broadcast in 32 registers. */
static const int kRmax[MAX_V + 1] = {0, 16, 14, 8, 6};

#define T(V, R) \
  static AVX512 void tile_##V##_##R(const tile_job *t) { tile_body(V, R, t); }
#define T6(V) T(V, 1) T(V, 2) T(V, 3) T(V, 4) T(V, 5) T(V, 6)
#define T8(V) T6(V) T(V, 7) T(V, 8)
#define T14(V) T8(V) T(V, 9) T(V, 10) T(V, 11) T(V, 12) T(V, 13) T(V, 14)
T14(1) T(1, 15) T(1, 16) T14(2) T8(3) T6(4)
#undef T
#define P(V, R) tile_##V##_##R
#define P6(V) P(V, 1), P(V, 2), P(V, 3), P(V, 4), P(V, 5), P(V, 6)
#define P8(V) P6(V), P(V, 7), P(V, 8)
#define P14(V) P8(V), P(V, 9), P(V, 10), P(V, 11), P(V, 12), P(V, 13), P(V, 14)
typedef void (*tile_fn)(const tile_job *);
static tile_fn const kTiles[MAX_V + 1][17] = {
    {0}, {0, P14(1), P(1, 15), P(1, 16)}, {0, P14(2)}, {0, P8(3)}, {0, P6(4)},
};
#undef P

/* Runs t over a line of n tiles' rows, R at a time (balanced), advancing x by step_x
 * and out by step_o floats per row. */
static void tile_line(tile_job *t, int V, int64_t n, int64_t step_x, int64_t step_o) {
  const int rmax = kRmax[V];
  const int64_t tiles = (n + rmax - 1) / rmax, per = (n + tiles - 1) / tiles;
  const float *x0[MAX_SEGS];
  memcpy(x0, t->x, sizeof(float *) * (size_t)t->nseg);
  float *out0 = t->out;
  for (int64_t r0 = 0; r0 < n; r0 += per) {
    const int R = (int)(n - r0 < per ? n - r0 : per);
    for (int s = 0; s < t->nseg; s++) t->x[s] = x0[s] + r0 * step_x;
    t->out = out0 + r0 * step_o;
    kTiles[V][R](t);
  }
  memcpy(t->x, x0, sizeof(float *) * (size_t)t->nseg);
  t->out = out0;
}

/* O outputs in blocks of up to 64 lanes: V vectors, the last one's mask. */
static int block_v(int64_t o, int64_t ob, __mmask16 *last) {
  int64_t rem = o - ob < 64 ? o - ob : 64;
  int v = (int)((rem + 15) / 16);
  int tail = (int)(rem - 16 * (v - 1));
  *last = (__mmask16)(tail == 16 ? 0xffff : (1u << tail) - 1);
  return v;
}

/* The correlation y[n][oh][ow][o] (+)= sum_{kh,kw,c} x[n][oh+kh-pt][ow+kw-pl][c] *
 * f[kh][kw][c][o], input positions outside the image read as zeros. */
typedef struct corr {
  int n, h, w, c;   /* input */
  int oh, ow, o;    /* output */
  int kh, kw, pt, pl;
  const float *x, *f;
  float *y;
  bool acc;
} corr;

static int64_t padded_w(const corr *k) { return (int64_t)k->ow + k->kw - 1; }

/* Input row ih of image n as the padded row (columns -pl .. -pl + padded_w - 1). */
static void pad_row(const corr *k, int n, int ih, float *dst) {
  const int64_t wp = padded_w(k), c = k->c;
  const float *src = k->x + ((int64_t)n * k->h + ih) * k->w * c;
  int64_t lo = k->pl > 0 ? k->pl : 0;              /* first padded column inside */
  int64_t first = k->pl > 0 ? 0 : -(int64_t)k->pl; /* its input column */
  int64_t cnt = k->w - first < wp - lo ? k->w - first : wp - lo;
  if (cnt < 0) cnt = 0;
  if (lo > wp) lo = wp;
  memset(dst, 0, sizeof(float) * (size_t)(lo * c));
  memcpy(dst + lo * c, src + first * c, sizeof(float) * (size_t)(cnt * c));
  memset(dst + (lo + cnt) * c, 0, sizeof(float) * (size_t)((wp - lo - cnt) * c));
}

static void corr_rows(void *arg, int64_t lo, int64_t hi, int slot) {
  const corr *k = arg;
  (void)slot;
  float rows[ROWBUF_FLOATS];
  const int64_t wp = padded_w(k), c = k->c, o = k->o, taps = (int64_t)k->kw * c;
  tile_job t = {.ni = taps, .xr = c, .xi = 1, .ldv = o, .ldo = o, .add = k->acc};
  /* A ring of padded input rows, row ih in slot ih % KH: consecutive output rows share
   * KH-1 of their KH input rows, which are padded once. */
  int64_t have[MAX_SEGS];
  for (int i = 0; i < k->kh; i++) have[i] = -1;
  for (int64_t row = lo; row < hi; row++) {
    const int n = (int)(row / k->oh), oh = (int)(row % k->oh);
    int nseg = 0;
    const float *fk[MAX_SEGS];
    for (int kh = 0; kh < k->kh; kh++) {
      int ih = oh + kh - k->pt;
      if (ih < 0 || ih >= k->h) continue;
      const int sl = ih % k->kh;
      if (have[sl] != (int64_t)n * k->h + ih) {
        pad_row(k, n, ih, rows + sl * wp * c);
        have[sl] = (int64_t)n * k->h + ih;
      }
      t.x[nseg] = rows + sl * wp * c;
      fk[nseg] = k->f + kh * taps * o;
      nseg++;
    }
    t.nseg = nseg;
    float *yrow = k->y + ((int64_t)n * k->oh + oh) * k->ow * o;
    for (int64_t ob = 0; ob < o; ob += 64) {
      const int V = block_v(o, ob, &t.last);
      t.out = yrow + ob;
      if (!nseg) {
        for (int64_t p = 0; p < k->ow; p++)
          if (!k->acc) memset(yrow + p * o + ob, 0, sizeof(float) * (size_t)(o - ob < 64 ? o - ob : 64));
        continue;
      }
      for (int s = 0; s < nseg; s++) t.vec[s] = fk[s] + ob;
      tile_line(&t, V, k->ow, c, o);
    }
  }
}

static void corr_run(lv_kctx *ctx, const corr *k) {
  const int64_t rows = (int64_t)k->n * k->oh;
  if (rows <= 0 || k->ow <= 0 || k->o <= 0) return;
  lv_cpu_par(ctx, rows, lv_cpu_grain(rows, 4), corr_rows, (void *)k);
}

static bool corr_fits(const corr *k) {
  return k->kh <= MAX_SEGS && (int64_t)k->kh * padded_w(k) * k->c <= ROWBUF_FLOATS;
}

/* The filter gradient's view of a conv: which output rows go in one block. */
static int gw_block_rows(const lv_conv_geom *g) {
  int64_t per = (int64_t)g->ow * g->o;
  int64_t rb = per > 0 ? GW_BLOCK_FLOATS / per : 1;
  if (rb < 1) rb = 1;
  if (rb > g->oh) rb = g->oh;
  while (rb > 1 && (rb + g->kh - 1) * ((int64_t)g->ow + g->kw - 1) * g->c > ROWBUF_FLOATS) rb--;
  if (rb > MAX_SEGS) rb = MAX_SEGS;
  return (int)rb;
}

static int gw_groups(const lv_conv_geom *g) { return g->n < MAX_GROUPS ? (g->n > 0 ? g->n : 1) : MAX_GROUPS; }

static corr fwd_corr(const lv_conv_geom *g, const float *x, const float *w, float *y) {
  return (corr){g->n, g->h, g->w, g->c, g->oh, g->ow, g->o, g->kh, g->kw, g->pt, g->pl, x, w, y, false};
}

/* gx = corr(gy, w'): gy is the input, gx the output, pads KH-1-pt and KW-1-pl. */
static corr gx_corr(const lv_conv_geom *g, const float *gy, const float *wt, float *gx, bool acc) {
  return (corr){g->n, g->oh, g->ow, g->o, g->h, g->w, g->c, g->kh, g->kw, g->kh - 1 - g->pt, g->kw - 1 - g->pl,
                gy, wt, gx, acc};
}

bool lv_cpu_conv2d_direct_ok(const lv_conv_geom *g) {
  if (g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || !lv_cpu_has_avx512()) return false;
  corr f = fwd_corr(g, NULL, NULL, NULL), b = gx_corr(g, NULL, NULL, NULL, false);
  return corr_fits(&f) && corr_fits(&b); /* the filter gradient's rows fit as the forward's */
}

size_t lv_cpu_conv2d_direct_scratch(const lv_conv_geom *g) {
  return (size_t)(1 + gw_groups(g)) * (size_t)g->kh * g->kw * g->c * g->o;
}

void lv_cpu_conv2d_direct_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, float *y) {
  corr k = fwd_corr(g, x, w, y);
  corr_run(ctx, &k);
}

typedef struct gw_job {
  const lv_conv_geom *g;
  const float *x, *gy;
  float *partial;
  int groups, rb;
} gw_job;

static void gw_group(void *arg, int64_t lo, int64_t hi, int slot) {
  const gw_job *j = arg;
  const lv_conv_geom *g = j->g;
  (void)slot;
  float rows[ROWBUF_FLOATS];
  const int64_t c = g->c, o = g->o, taps = (int64_t)g->kw * c, wp = (int64_t)g->ow + g->kw - 1;
  const size_t nw = (size_t)g->kh * taps * o;
  /* The correlation's padded rows, built from x with the forward's geometry. */
  corr k = fwd_corr(g, j->x, NULL, NULL);
  tile_job t = {.ni = g->ow, .xr = 1, .xi = c, .ldv = o, .ldo = o, .add = true};
  for (int64_t grp = lo; grp < hi; grp++) {
    float *part = j->partial + (size_t)grp * nw;
    memset(part, 0, sizeof(float) * nw);
    const int n0 = (int)(grp * g->n / j->groups), n1 = (int)((grp + 1) * g->n / j->groups);
    for (int n = n0; n < n1; n++)
      for (int oh0 = 0; oh0 < g->oh; oh0 += j->rb) {
        const int rb = g->oh - oh0 < j->rb ? g->oh - oh0 : j->rb;
        /* Input rows oh0 - pt .. oh0 + rb - 2 + kh - pt, those inside the image. */
        const int ih0 = oh0 - g->pt, nrows = rb + g->kh - 1;
        for (int r = 0; r < nrows; r++)
          if (ih0 + r >= 0 && ih0 + r < g->h) pad_row(&k, n, ih0 + r, rows + r * wp * c);
        for (int kh = 0; kh < g->kh; kh++) {
          int nseg = 0;
          for (int r = 0; r < rb; r++) {
            int ih = oh0 + r + kh - g->pt;
            if (ih < 0 || ih >= g->h) continue;
            t.x[nseg] = rows + (r + kh) * wp * c;
            t.vec[nseg] = j->gy + (((int64_t)n * g->oh + oh0 + r) * g->ow) * o;
            nseg++;
          }
          if (!nseg) continue;
          t.nseg = nseg;
          const float *xs[MAX_SEGS], *vs[MAX_SEGS];
          memcpy(xs, t.x, sizeof(float *) * (size_t)nseg);
          memcpy(vs, t.vec, sizeof(float *) * (size_t)nseg);
          for (int64_t ob = 0; ob < o; ob += 64) {
            const int V = block_v(o, ob, &t.last);
            for (int s = 0; s < nseg; s++) t.vec[s] = vs[s] + ob;
            t.out = part + kh * taps * o + ob;
            tile_line(&t, V, taps, 1, o);
          }
          memcpy(t.x, xs, sizeof(float *) * (size_t)nseg);
        }
      }
  }
}

/* gw (+)= the groups' partial sums, in group order. */
typedef struct gw_sum {
  const float *partial;
  float *gw;
  size_t nw;
  int groups;
  bool acc;
} gw_sum;

LV_CPU_PAR_LOOP(gw_sum_piece, gw_sum, e, {
  float s = J->acc ? J->gw[e] : 0.0f;
  for (int grp = 0; grp < J->groups; grp++) s += J->partial[(size_t)grp * J->nw + (size_t)e];
  J->gw[e] = s;
})

void lv_cpu_conv2d_direct_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                              float *gx, bool gx_acc, float *gw, bool gw_acc, float *scratch) {
  const int64_t c = g->c, o = g->o, kk = (int64_t)g->kh * g->kw;
  const size_t nw = (size_t)kk * c * o;
  if (g->n <= 0) {
    if (gw && !gw_acc) memset(gw, 0, sizeof(float) * nw);
    return;
  }
  if (gx) {
    /* w'[kh'][kw'][o][c] = w[KH-1-kh'][KW-1-kw'][c][o]. */
    float *wt = scratch;
    for (int64_t t = 0; t < kk; t++) {
      const float *src = w + (kk - 1 - t) * c * o;
      float *dst = wt + t * o * c;
      for (int64_t ci = 0; ci < c; ci++)
        for (int64_t oi = 0; oi < o; oi++) dst[oi * c + ci] = src[ci * o + oi];
    }
    corr k = gx_corr(g, gy, wt, gx, gx_acc);
    corr_run(ctx, &k);
  }
  if (gw) {
    gw_job j = {.g = g, .x = x, .gy = gy, .partial = scratch + nw, .groups = gw_groups(g), .rb = gw_block_rows(g)};
    lv_cpu_par(ctx, j.groups, 1, gw_group, &j);
    gw_sum s = {.partial = j.partial, .gw = gw, .nw = nw, .groups = j.groups, .acc = gw_acc};
    lv_cpu_par(ctx, (int64_t)nw, lv_cpu_grain((int64_t)nw, 4096), gw_sum_piece, &s);
  }
}

#else

bool lv_cpu_conv2d_direct_ok(const lv_conv_geom *g) {
  (void)g;
  return false;
}
size_t lv_cpu_conv2d_direct_scratch(const lv_conv_geom *g) {
  (void)g;
  return 0;
}
void lv_cpu_conv2d_direct_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, float *y) {
  (void)ctx, (void)g, (void)x, (void)w, (void)y;
  LV_ASSERT(!"no direct conv on this CPU");
}
void lv_cpu_conv2d_direct_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                              float *gx, bool gx_acc, float *gw, bool gw_acc, float *scratch) {
  (void)ctx, (void)g, (void)x, (void)w, (void)gy, (void)gx, (void)gx_acc, (void)gw, (void)gw_acc, (void)scratch;
  LV_ASSERT(!"no direct conv on this CPU");
}

#endif
