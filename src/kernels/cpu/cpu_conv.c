/* 2-D convolution, NHWC input and HWIO filter. Stride 1, dilation 1 on an AVX-512 CPU runs
 * the direct kernels of cpu_conv_direct.c; everything else (and their tests' reference)
 * runs here, as batched im2col + GEMM per chunk of
 * images: a chunk's patches form a [chunk*OH*OW, KH*KW*C] matrix whose product with the
 * filter viewed as [KH*KW*C, O] is directly the NHWC output. Chunks keep the patch matrix
 * in cache while leaving GEMMs large enough for OpenBLAS to run at speed.
 * Backward recomputes the patches (measured cheaper than keeping them) for the filter
 * gradient and scatters patch gradients back (col2im) for the input gradient.
 *
 * With several threads and enough chunks, each thread takes whole chunks (forward) or
 * whole groups of chunks (backward, one filter-gradient partial per group): one
 * parallel region per op instead of two per chunk, and the patches never leave the
 * core that wrote them. Otherwise chunks run in turn with the GEMM split across
 * threads. Chunks and groups depend only on the shapes, so results are bit-identical
 * for any thread count. */
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

/* Patch-matrix floats per chunk; tuned with bench/bench_lenet_ops. */
#define CHUNK_FLOATS ((size_t)1 << 20)

static int64_t patch_len(const lv_conv_geom *g) { return (int64_t)g->kh * g->kw * g->c; }
static int64_t image_rows(const lv_conv_geom *g) { return (int64_t)g->oh * g->ow; }

/* Filter-gradient partial sums are kept per group of consecutive chunks and added in
 * group order, so the result does not depend on the thread count or on which thread ran
 * what: a restarted run repeats an uninterrupted one bit for bit. */
#define MAX_GROUPS 8
#define MAX_GROUP_BYTES ((size_t)64 << 20)

typedef struct plan {
  int nb;        /* images per chunk */
  int chunks;
  int groups;    /* filter-gradient partial sums (backward) */
  int nt_fwd;    /* threads taking whole chunks in forward (1: chunks in turn) */
  int nt_bwd;    /* threads taking whole groups in backward */
  size_t cols;   /* floats of patch scratch per thread */
  size_t gw;     /* floats of one filter-gradient partial */
} plan;

/* Depends only on the shapes and the thread count, never on timing. */
static plan make_plan(const lv_kctx *ctx, const lv_conv_geom *g) {
  plan p;
  size_t per = (size_t)(image_rows(g) * patch_len(g));
  size_t nb = per ? CHUNK_FLOATS / per : (size_t)(g->n > 0 ? g->n : 1);
  if (nb < 1) nb = 1;
  if (nb > (size_t)g->n) nb = (size_t)(g->n > 0 ? g->n : 1);
  p.nb = (int)nb;
  p.chunks = g->n > 0 ? (int)((g->n + p.nb - 1) / p.nb) : 0;
  p.cols = nb * per;
  p.gw = (size_t)(patch_len(g) * g->o);
  p.groups = p.chunks < MAX_GROUPS ? p.chunks : MAX_GROUPS;
  while (p.groups > 1 && (size_t)p.groups * p.gw * sizeof(float) > MAX_GROUP_BYTES) p.groups--;
  if (p.groups < 1) p.groups = 1;
  int threads = lv_cpu_par_active() || omp_in_parallel() ? 1 : lv_cpu_threads(ctx);
  p.nt_fwd = p.chunks >= 2 * threads ? threads : 1;
  p.nt_bwd = p.groups >= 2 ? (threads < p.groups ? threads : p.groups) : 1;
  return p;
}

static size_t scratch_need(const plan *p) {
  int nt = p->nt_fwd > p->nt_bwd ? p->nt_fwd : p->nt_bwd;
  return (size_t)nt * p->cols + (size_t)p->groups * p->gw;
}

size_t lv_cpu_conv2d_scratch(lv_kctx *ctx, const lv_conv_geom *g) {
  if (lv_cpu_conv2d_direct_ok(g)) return lv_cpu_conv2d_direct_scratch(g);
  plan p = make_plan(ctx, g);
  return scratch_need(&p);
}

/* Copies n floats. Short runs (a single-channel image's 5 taps) are most of the first
 * layer's patch building: two overlapping fixed-size copies, each a single vector move,
 * cost less than a memcpy call or a loop of scalar moves. */
static inline void copy_run(float *restrict d, const float *restrict s, int n) {
  if (n >= 4 && n <= 8) {
    memcpy(d, s, 4 * sizeof(float));
    memcpy(d + n - 4, s + n - 4, 4 * sizeof(float));
  } else if (n > 8 && n <= 16) {
    memcpy(d, s, 8 * sizeof(float));
    memcpy(d + n - 8, s + n - 8, 8 * sizeof(float));
  } else if (n < 4) {
    for (int j = 0; j < n; j++) d[j] = s[j];
  } else {
    memcpy(d, s, sizeof(float) * (size_t)n);
  }
}

/* One image's patches: rows (oh, ow), columns (kh, kw, c). */
static void im2col(const lv_conv_geom *g, const float *x, float *cols) {
  const int64_t K = patch_len(g);
  const int C = g->c;
  if (g->dw == 1) {
    /* Undilated rows: for each (oh, kh) the input row is fixed, and the output columns
     * whose window lies inside it (most of them) take one straight copy each with no
     * bounds work; only the few at the edges go through the padded path. */
    const int run = g->kw * C;
    int lo = g->sw > 0 ? (g->pl + g->sw - 1) / g->sw : 0; /* first ow with iw0 >= 0 */
    int hi = g->w - g->kw + g->pl >= 0 ? (g->w - g->kw + g->pl) / g->sw + 1 : 0; /* iw0+kw <= w */
    if (lo > g->ow) lo = g->ow;
    if (hi > g->ow) hi = g->ow;
    if (hi < lo) hi = lo;
    for (int oh = 0; oh < g->oh; oh++)
      for (int kh = 0; kh < g->kh; kh++) {
        int ih = oh * g->sh - g->pt + kh * g->dh;
        float *base = cols + (int64_t)oh * g->ow * K + (int64_t)kh * run;
        if (ih < 0 || ih >= g->h) {
          for (int ow = 0; ow < g->ow; ow++) memset(base + ow * K, 0, sizeof(float) * (size_t)run);
          continue;
        }
        const float *src = x + (int64_t)ih * g->w * C;
        for (int ow = lo; ow < hi; ow++)
          copy_run(base + ow * K, src + (int64_t)(ow * g->sw - g->pl) * C, run);
        for (int ow = 0; ow < g->ow; ow++) {
          if (ow == lo) ow = hi;
          if (ow >= g->ow) break;
          float *dst = base + ow * K;
          int iw0 = ow * g->sw - g->pl;
          int k0 = iw0 < 0 ? -iw0 : 0;
          int k1 = g->w - iw0 < g->kw ? g->w - iw0 : g->kw;
          if (k0 > g->kw) k0 = g->kw;
          if (k1 < k0) k1 = k0;
          const int z0 = k0 * C, n = (k1 - k0) * C, z1 = (g->kw - k1) * C;
          for (int j = 0; j < z0; j++) dst[j] = 0.0f;
          if (n > 0) copy_run(dst + z0, src + (int64_t)(iw0 + k0) * C, n);
          for (int j = 0; j < z1; j++) dst[z0 + n + j] = 0.0f;
        }
      }
    return;
  }
  for (int oh = 0; oh < g->oh; oh++) {
    for (int ow = 0; ow < g->ow; ow++) {
      float *row = cols + ((int64_t)oh * g->ow + ow) * K;
      int iw0 = ow * g->sw - g->pl;
      for (int kh = 0; kh < g->kh; kh++) {
        int ih = oh * g->sh - g->pt + kh * g->dh;
        float *dst = row + (int64_t)kh * g->kw * C;
        if (ih < 0 || ih >= g->h) {
          memset(dst, 0, sizeof(float) * (size_t)g->kw * C);
          continue;
        }
        const float *src = x + (int64_t)ih * g->w * C;
        for (int kw = 0; kw < g->kw; kw++) {
          int iw = iw0 + kw * g->dw;
          float *d = dst + (int64_t)kw * C;
          if (iw < 0 || iw >= g->w) {
            for (int c = 0; c < C; c++) d[c] = 0.0f;
          } else {
            const float *s = src + (int64_t)iw * C;
            for (int c = 0; c < C; c++) d[c] = s[c];
          }
        }
      }
    }
  }
}

/* Adds one image's patch gradients back into its input gradient. */
static void col2im(const lv_conv_geom *g, const float *cols, float *gx) {
  const int64_t K = patch_len(g);
  const int C = g->c;
  if (g->dw == 1) {
    /* Rows (oh, kh) as in im2col. For one oh, an input row ih gets only the kh with
     * oh*sh - pt + kh*dh == ih, so each input element still receives its terms ordered by
     * (oh, ow): the sums are the same, bit for bit, as in the general loop below. */
    for (int oh = 0; oh < g->oh; oh++)
      for (int kh = 0; kh < g->kh; kh++) {
        int ih = oh * g->sh - g->pt + kh * g->dh;
        if (ih < 0 || ih >= g->h) continue;
        const float *base = cols + (int64_t)oh * g->ow * K + (int64_t)kh * g->kw * C;
        float *dst = gx + (int64_t)ih * g->w * C;
        for (int ow = 0; ow < g->ow; ow++) {
          int iw0 = ow * g->sw - g->pl;
          int k0 = iw0 < 0 ? -iw0 : 0;
          int k1 = g->w - iw0 < g->kw ? g->w - iw0 : g->kw;
          if (k1 <= k0) continue;
          float *d = dst + (int64_t)(iw0 + k0) * C;
          const float *src = base + ow * K + (int64_t)k0 * C;
          const int run = (k1 - k0) * C;
          for (int j = 0; j < run; j++) d[j] += src[j];
        }
      }
    return;
  }
  for (int oh = 0; oh < g->oh; oh++) {
    for (int ow = 0; ow < g->ow; ow++) {
      const float *row = cols + ((int64_t)oh * g->ow + ow) * K;
      int iw0 = ow * g->sw - g->pl;
      for (int kh = 0; kh < g->kh; kh++) {
        int ih = oh * g->sh - g->pt + kh * g->dh;
        if (ih < 0 || ih >= g->h) continue;
        const float *src = row + (int64_t)kh * g->kw * C;
        float *dst = gx + (int64_t)ih * g->w * C;
        for (int kw = 0; kw < g->kw; kw++) {
          int iw = iw0 + kw * g->dw;
          if (iw < 0 || iw >= g->w) continue;
          float *d = dst + (int64_t)iw * C;
          const float *s = src + (int64_t)kw * C;
          for (int c = 0; c < C; c++) d[c] += s[c];
        }
      }
    }
  }
}

typedef struct conv_job {
  lv_kctx *ctx;
  const lv_conv_geom *g;
  const plan *p;
  const float *x, *w, *gy;
  float *y, *gx, *gw, *scratch, *partial;
  bool gx_acc, gw_acc;
  int n0, per_group;
} conv_job;

static void fwd_chunk(void *arg, int64_t ch, int64_t ch_end, int slot) {
  const conv_job *j = arg;
  const lv_conv_geom *g = j->g;
  const int64_t K = patch_len(g), R = image_rows(g);
  const int64_t xs = (int64_t)g->h * g->w * g->c;
  (void)ch_end;
  float *cols = j->scratch + (size_t)slot * j->p->cols;
  int n0 = (int)ch * j->p->nb, cnt = g->n - n0 < j->p->nb ? g->n - n0 : j->p->nb;
  for (int i = 0; i < cnt; i++) im2col(g, j->x + (n0 + i) * xs, cols + i * R * K);
  lv_cpu_gemm(j->ctx, false, false, cnt * R, g->o, K, 1.0f, cols, K, j->w, g->o, 0.0f, j->y + n0 * R * g->o, g->o);
}

/* Patches of images [lo, hi) of the chunk at j->n0 into j->scratch. */
static void im2col_images(void *arg, int64_t lo, int64_t hi, int slot) {
  const conv_job *j = arg;
  const lv_conv_geom *g = j->g;
  const int64_t K = patch_len(g), R = image_rows(g);
  const int64_t xs = (int64_t)g->h * g->w * g->c;
  (void)slot;
  for (int64_t i = lo; i < hi; i++) im2col(g, j->x + (j->n0 + i) * xs, j->scratch + i * R * K);
}

/* Adds the patch gradients in j->scratch of images [lo, hi) of the chunk at j->n0. */
static void col2im_images(void *arg, int64_t lo, int64_t hi, int slot) {
  const conv_job *j = arg;
  const lv_conv_geom *g = j->g;
  const int64_t K = patch_len(g), R = image_rows(g);
  const int64_t xs = (int64_t)g->h * g->w * g->c;
  (void)slot;
  for (int64_t i = lo; i < hi; i++) {
    if (!j->gx_acc) memset(j->gx + (j->n0 + i) * xs, 0, sizeof(float) * (size_t)xs);
    col2im(g, j->scratch + i * R * K, j->gx + (j->n0 + i) * xs);
  }
}

void lv_cpu_conv2d_fwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, float *y,
                       float *scratch, size_t scratch_floats) {
  if (lv_cpu_conv2d_direct_ok(g)) {
    lv_cpu_conv2d_direct_fwd(ctx, g, x, w, y);
    return;
  }
  lv_cpu_conv2d_fwd_gemm(ctx, g, x, w, y, scratch, scratch_floats);
}

size_t lv_cpu_conv2d_gemm_scratch(lv_kctx *ctx, const lv_conv_geom *g) {
  plan p = make_plan(ctx, g);
  return scratch_need(&p);
}

void lv_cpu_conv2d_fwd_gemm(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, float *y,
                            float *scratch, size_t scratch_floats) {
  const int64_t K = patch_len(g), R = image_rows(g);
  plan p = make_plan(ctx, g);
  if ((size_t)p.nt_fwd * p.cols > scratch_floats) p.nt_fwd = 1; /* caller sized for fewer */
  conv_job j = {.ctx = ctx, .g = g, .p = &p, .x = x, .w = w, .y = y, .scratch = scratch};
  if (p.nt_fwd > 1) {
    lv_cpu_par(ctx, p.chunks, 1, fwd_chunk, &j);
    return;
  }
  for (int n0 = 0; n0 < g->n; n0 += p.nb) {
    int cnt = g->n - n0 < p.nb ? g->n - n0 : p.nb;
    j.n0 = n0;
    lv_cpu_par(ctx, cnt, 1, im2col_images, &j);
    lv_cpu_gemm(ctx, false, false, cnt * R, g->o, K, 1.0f, scratch, K, w, g->o, 0.0f,
                y + n0 * R * g->o, g->o);
  }
}

/* One chunk of the backward: filter gradient (+)= patches^T gy into gw, input gradient
 * via patch gradients and col2im. */
static void bwd_chunk(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                      float *gx, bool gx_acc, float *gw, bool gw_acc, float *cols, int n0,
                      int cnt, bool threaded_inner) {
  const int64_t K = patch_len(g), R = image_rows(g);
  const float *gyc = gy + n0 * R * g->o;
  /* Inside a group piece lv_cpu_par runs inline: the images go in order either way. */
  conv_job j = {.ctx = ctx, .g = g, .x = x, .gx = gx, .gx_acc = gx_acc, .scratch = cols, .n0 = n0};
  lv_kctx *ictx = threaded_inner ? ctx : NULL;
  if (gw) {
    if (ictx) lv_cpu_par(ictx, cnt, 1, im2col_images, &j);
    else im2col_images(&j, 0, cnt, 0);
    lv_cpu_gemm(ctx, true, false, K, g->o, cnt * R, 1.0f, cols, K, gyc, g->o, gw_acc ? 1.0f : 0.0f,
                gw, g->o);
  }
  if (gx) {
    lv_cpu_gemm(ctx, false, true, cnt * R, K, g->o, 1.0f, gyc, g->o, w, g->o, 0.0f, cols, K);
    if (ictx) lv_cpu_par(ictx, cnt, 1, col2im_images, &j);
    else col2im_images(&j, 0, cnt, 0);
  }
}

static void bwd_group(void *arg, int64_t grp, int64_t grp_end, int slot) {
  const conv_job *j = arg;
  const plan *p = j->p;
  const lv_conv_geom *g = j->g;
  (void)grp_end;
  float *cols = j->scratch + (size_t)(p->nt_bwd > 1 ? slot : 0) * p->cols;
  int c0 = (int)grp * j->per_group, c1 = c0 + j->per_group < p->chunks ? c0 + j->per_group : p->chunks;
  for (int ch = c0; ch < c1; ch++) {
    int n0 = ch * p->nb, cnt = g->n - n0 < p->nb ? g->n - n0 : p->nb;
    bwd_chunk(j->ctx, g, j->x, j->w, j->gy, j->gx, j->gx_acc, j->gw ? j->partial + (size_t)grp * p->gw : NULL,
              ch > c0, cols, n0, cnt, p->nt_bwd == 1);
  }
}

void lv_cpu_conv2d_bwd(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                       float *gx, bool gx_acc, float *gw, bool gw_acc, float *scratch,
                       size_t scratch_floats) {
  if (lv_cpu_conv2d_direct_ok(g) && scratch_floats >= lv_cpu_conv2d_direct_scratch(g)) {
    lv_cpu_conv2d_direct_bwd(ctx, g, x, w, gy, gx, gx_acc, gw, gw_acc, scratch);
    return;
  }
  lv_cpu_conv2d_bwd_gemm(ctx, g, x, w, gy, gx, gx_acc, gw, gw_acc, scratch, scratch_floats);
}

void lv_cpu_conv2d_bwd_gemm(lv_kctx *ctx, const lv_conv_geom *g, const float *x, const float *w, const float *gy,
                            float *gx, bool gx_acc, float *gw, bool gw_acc, float *scratch,
                            size_t scratch_floats) {
  plan p = make_plan(ctx, g);
  if (scratch_need(&p) > scratch_floats) {
    /* Sized under another thread count: the same groups, run by one thread. */
    p.nt_bwd = 1;
    p.nt_fwd = 1;
  }
  int nt = p.nt_fwd > p.nt_bwd ? p.nt_fwd : p.nt_bwd;
  float *partial = scratch + (size_t)nt * p.cols;
  int per_group = p.groups ? (p.chunks + p.groups - 1) / p.groups : 0;
  conv_job j = {.ctx = ctx, .g = g, .p = &p, .x = x, .w = w, .gy = gy, .gx = gx, .gw = gw, .scratch = scratch,
                .partial = partial, .gx_acc = gx_acc, .per_group = per_group};
  if (p.nt_bwd > 1) lv_cpu_par(ctx, p.groups, 1, bwd_group, &j);
  else
    for (int grp = 0; grp < p.groups; grp++) bwd_group(&j, grp, grp + 1, 0);
  if (!gw) return;
  const int64_t m = (int64_t)p.gw;
  for (int64_t jj = 0; jj < m; jj++) {
    float s = gw_acc ? gw[jj] : 0.0f;
    for (int grp = 0; grp < p.groups; grp++)
      if (grp * per_group < p.chunks) s += partial[(size_t)grp * p.gw + jj];
    gw[jj] = s;
  }
}
