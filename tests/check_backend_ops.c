/* Every kernel of kernels.def on a backend under test against the CPU backend (cpu:0, the
 * specification), in the style of ggml's test-backend-ops: random inputs of several
 * shapes including padded (leading dimensions and strides larger than the data) and empty
 * ones, forward and backward kernels, accumulate and overwrite forms, kernel errors (bad
 * ids), each output within a tolerance stated per op, and every input left untouched.
 *
 * Backends under test: the guarded CPU backend cpu:1 (always: it proves the harness, as
 * both run the same kernels, bit for bit), and cuda:0 where this build has CUDA and a GPU
 * is visible (otherwise one line says why, and the suite exits 77: skipped, not passed,
 * whatever cpu:1 showed; a failure still fails it). On cuda:0 every case runs with cuDNN
 * on (conv2d and average pooling run on it where it loads and takes the geometry), then
 * the conv and pooling cases again with cuDNN off (im2col + cuBLAS, lingvoc's pooling
 * kernels); lines `cudnn:` and `im2col:` say how many calls ran where. A kernel of
 * kernels.def with no case here fails the suite. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/rng.h"
#include "check_util.h"
#include "kernels/guarded.h"
#include "kernels/kernels.h"

/* ---- the harness ---- */

enum { MAX_SLOTS = 24, MAX_SCRATCH = 4 };

typedef struct slot {
  lv_dtype t;
  int64_t n;
  bool in;     /* an input: must come back unchanged */
  double tol;  /* < 0: the case's tolerance */
  void *host;  /* initial contents (random) */
  void *dev[2];
  void *res[2];
} slot;

static const lv_backend *g_be[2]; /* [0] cpu:0, [1] the backend under test */
static int g_cur;
static slot g_s[MAX_SLOTS];
static int g_ns;
static void *g_scratch[MAX_SCRATCH];
static int g_nscratch;
static char g_desc[256];
static const char *g_op;
static double g_rtol, g_atol;
static const char *g_path = ""; /* on cuda:0: which conv and pooling kernels run */
static lv_rng g_rng;
static int g_cases, g_failures;

static const char *const kKernelNames[] = {
#define K(name, params, args) #name,
#define KR(type, name, params, args) #name,
#include "kernels/kernels.def"
#undef K
#undef KR
};
enum { N_KERNELS = sizeof kKernelNames / sizeof kKernelNames[0] };
static bool g_covered[N_KERNELS];

static void cover(const char *op) {
  for (int i = 0; i < N_KERNELS; i++)
    if (!strcmp(kKernelNames[i], op)) {
      g_covered[i] = true;
      return;
    }
  ck_abort_msg("case for unknown kernel %s", op);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(p);
  return p;
}

static float urand(float lo, float hi) { return lo + (hi - lo) * lv_rng_uniform(&g_rng); }

static int add_slot(lv_dtype t, int64_t n, bool in) {
  ck_assert_int_lt(g_ns, MAX_SLOTS);
  slot *s = &g_s[g_ns];
  memset(s, 0, sizeof *s);
  s->t = t;
  s->n = n;
  s->in = in;
  s->tol = -1;
  s->host = xmalloc((size_t)n * lv_dtype_size(t));
  return g_ns++;
}

/* Float slot of n values uniform in [lo, hi): an input, or an output whose random initial
 * contents must be overwritten (or accumulated into) alike on both backends. */
static int fslot(int64_t n, float lo, float hi, bool in) {
  int i = add_slot(LV_F32, n, in);
  for (int64_t k = 0; k < n; k++) ((float *)g_s[i].host)[k] = urand(lo, hi);
  return i;
}
static int fin(int64_t n, float lo, float hi) { return fslot(n, lo, hi, true); }
static int fout(int64_t n) { return fslot(n, -1, 1, false); }
static int iin(int64_t n, int lo, int hi) {
  int i = add_slot(LV_I32, n, true);
  for (int64_t k = 0; k < n; k++) ((int32_t *)g_s[i].host)[k] = lo + (int32_t)lv_rng_below(&g_rng, (uint64_t)(hi - lo));
  return i;
}
static int iout(int64_t n) {
  int i = add_slot(LV_I32, n, false);
  for (int64_t k = 0; k < n; k++) ((int32_t *)g_s[i].host)[k] = -7;
  return i;
}
static int dout(int64_t n) {
  int i = add_slot(LV_F64, n, false);
  for (int64_t k = 0; k < n; k++) ((double *)g_s[i].host)[k] = 0.25;
  return i;
}
/* A slot whose host contents the case fills (e.g. from a CPU forward). */
static int raw(lv_dtype t, int64_t n, bool in) {
  int i = add_slot(t, n, in);
  memset(g_s[i].host, 0, (size_t)n * lv_dtype_size(t));
  return i;
}
static float *HF(int i) { return g_s[i].host; }
static int32_t *HI(int i) { return g_s[i].host; }
static double *HD(int i) { return g_s[i].host; }

/* Inside RUN: the current backend's kernels, context and slot pointers. */
#define KT (g_be[g_cur]->kernels)
#define CTX (g_be[g_cur]->ctx)
#define PF(i) ((float *)g_s[i].dev[g_cur])
#define PI(i) ((int32_t *)g_s[i].dev[g_cur])
#define PD(i) ((double *)g_s[i].dev[g_cur])
#define PV(i) (g_s[i].dev[g_cur])

/* The CPU kernels on host memory, for inputs computed from other inputs. */
#define CPUK (lv_cpu_backend_kernels())
static const lv_kernel_table *lv_cpu_backend_kernels(void) { return lv_backend_get(lv_device_host())->kernels; }
#define CPUCTX (lv_backend_get(lv_device_host())->ctx)

/* Scratch device memory for the running backend, freed after the case. */
static void *scratch(size_t bytes) {
  ck_assert_int_lt(g_nscratch, MAX_SCRATCH);
  void *p = g_be[g_cur]->alloc(g_be[g_cur]->ctx, bytes);
  ck_assert_ptr_nonnull(p);
  g_scratch[g_nscratch++] = p;
  return p;
}

static void upload(int k) {
  const lv_backend *be = g_be[k];
  for (int i = 0; i < g_ns; i++) {
    size_t bytes = (size_t)g_s[i].n * lv_dtype_size(g_s[i].t);
    g_s[i].dev[k] = be->alloc(be->ctx, bytes);
    ck_assert_ptr_nonnull(g_s[i].dev[k]);
    be->copy(be->ctx, g_s[i].dev[k], g_s[i].host, bytes, LV_COPY_HOST_TO_DEVICE);
  }
}

static bool g_err_has[2];
static lv_kerror g_err[2];

static void download(int k) {
  const lv_backend *be = g_be[k];
  be->sync(be->ctx);
  for (int i = 0; i < g_ns; i++) {
    size_t bytes = (size_t)g_s[i].n * lv_dtype_size(g_s[i].t);
    g_s[i].res[k] = xmalloc(bytes);
    be->copy(be->ctx, g_s[i].res[k], g_s[i].dev[k], bytes, LV_COPY_DEVICE_TO_HOST);
    be->free(be->ctx, g_s[i].dev[k]);
  }
  for (int i = 0; i < g_nscratch; i++) be->free(be->ctx, g_scratch[i]);
  g_nscratch = 0;
  g_err_has[k] = be->kernels->error_take(be->ctx, &g_err[k]);
}

static void mismatch(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mismatch(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL %s on %s%s vs cpu:0 [%s]: ", g_op, g_be[1]->name, g_path, g_desc);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  g_failures++;
}

static double val(const slot *s, const void *p, int64_t i) {
  switch (s->t) {
    case LV_F32: return ((const float *)p)[i];
    case LV_F64: return ((const double *)p)[i];
    case LV_I32: return ((const int32_t *)p)[i];
    case LV_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
  }
}

static void compare(void) {
  g_cases++;
  /* After the same kernel error on both, outputs are unspecified (kernels.def): only the
   * error and the inputs are compared. */
  const bool errored = g_err_has[0] && g_err_has[1];
  for (int i = 0; i < g_ns; i++) {
    const slot *s = &g_s[i];
    size_t bytes = (size_t)s->n * lv_dtype_size(s->t);
    if (errored && !s->in) continue;
    if (s->in) {
      for (int k = 0; k < 2; k++)
        if (bytes && memcmp(s->res[k], s->host, bytes)) {
          mismatch("input slot %d was modified by %s", i, g_be[k]->name);
          return;
        }
      continue;
    }
    const bool exact = s->t != LV_F32 && s->t != LV_F64;
    const double rtol = s->tol >= 0 ? s->tol : g_rtol, atol = s->tol >= 0 ? s->tol : g_atol;
    for (int64_t j = 0; j < s->n; j++) {
      double want = val(s, s->res[0], j), got = val(s, s->res[1], j);
      if (isnan(want) && isnan(got)) continue;
      bool ok = exact ? want == got : fabs(got - want) <= atol + rtol * fabs(want);
      if (!ok) {
        mismatch("slot %d [%lld of %lld]: got %.9g, want %.9g (rtol %g, atol %g)", i, (long long)j, (long long)s->n, got,
             want, rtol, atol);
        return;
      }
    }
  }
  if (g_err_has[0] != g_err_has[1]) {
    mismatch("kernel error on cpu:0: %d, on the backend: %d", g_err_has[0], g_err_has[1]);
  } else if (g_err_has[0] && memcmp(&g_err[0], &g_err[1], sizeof g_err[0])) {
    mismatch("kernel error differs: pos %lld value %lld bound %lld vs pos %lld value %lld bound %lld",
         (long long)g_err[1].pos, (long long)g_err[1].value, (long long)g_err[1].bound, (long long)g_err[0].pos,
         (long long)g_err[0].value, (long long)g_err[0].bound);
  }
}

static void reset(void) {
  for (int i = 0; i < g_ns; i++) {
    free(g_s[i].host);
    free(g_s[i].res[0]);
    free(g_s[i].res[1]);
  }
  g_ns = 0;
}

static int run_begin(const char *op, double rtol, double atol) {
  cover(op);
  g_op = op;
  g_rtol = rtol;
  g_atol = atol;
  g_cur = 0;
  upload(0);
  return 0;
}

static int run_next(int k) {
  download(k);
  if (k == 0) {
    g_cur = 1;
    upload(1);
    return 1;
  }
  compare();
  reset();
  return 2;
}

/* RUN(op, rtol, atol) { body } (the tolerances may be one of the pairs below): the body runs once on cpu:0 and once on the backend under
 * test, with the same initial slot contents; then every slot is compared. */
#define RUN(op, ...) for (int bk_ = run_begin(op, __VA_ARGS__); bk_ < 2; bk_ = run_next(bk_))
#define DESC(...) snprintf(g_desc, sizeof g_desc, __VA_ARGS__)

/* Tolerances: exact data movement; elementwise float math within a few ulps (libm and
 * CUDA's math differ); sums over many terms (GEMM, convolution, reductions) looser. */
#define EXACT 0.0, 0.0
#define ELEM 2e-6, 1e-6
#define MATH 1e-5, 1e-6
#define SUMS 1e-4, 1e-5

/* ---- cases ---- */

/* A broadcast of a (shape sa_shape) and b (sb_shape) over out (rank r): stride 0 where an
 * operand has extent 1 and out does not. */
static lv_bcast make_bcast(int r, const int64_t *out, const int64_t *as, const int64_t *bs) {
  lv_bcast bc;
  memset(&bc, 0, sizeof bc);
  bc.rank = r;
  int64_t sta = 1, stb = 1;
  for (int d = r - 1; d >= 0; d--) {
    bc.shape[d] = out[d];
    bc.sa[d] = as[d] == 1 && out[d] != 1 ? 0 : sta;
    bc.sb[d] = bs[d] == 1 && out[d] != 1 ? 0 : stb;
    sta *= as[d];
    stb *= bs[d];
  }
  return bc;
}
static int64_t prod(int r, const int64_t *s) {
  int64_t n = 1;
  for (int d = 0; d < r; d++) n *= s[d];
  return n;
}

static const struct {
  int r;
  int64_t out[3], a[3], b[3];
} kShapes[] = {
    {2, {4, 5}, {4, 5}, {4, 5}}, {2, {4, 5}, {4, 5}, {1, 5}}, {2, {4, 5}, {4, 1}, {4, 5}},
    {3, {2, 3, 4}, {2, 3, 4}, {2, 1, 4}}, {3, {2, 3, 4}, {1, 3, 1}, {2, 1, 4}}, {2, {0, 5}, {0, 5}, {1, 5}},
    {1, {1}, {1}, {1}},
};
enum { N_SHAPES = sizeof kShapes / sizeof kShapes[0] };

static void cases_binary(void) {
  for (int op = 0; op < LV_BIN_COUNT; op++)
    for (int s = 0; s < N_SHAPES; s++) {
      lv_bcast bc = make_bcast(kShapes[s].r, kShapes[s].out, kShapes[s].a, kShapes[s].b);
      int64_t na = prod(kShapes[s].r, kShapes[s].a), nb = prod(kShapes[s].r, kShapes[s].b);
      int a = fin(na, -2, 2), b = fin(nb, op == LV_BIN_DIV ? 0.5f : -2, 2), o = fout(prod(kShapes[s].r, kShapes[s].out));
      /* Equal operands somewhere, for the comparisons. */
      if (na && nb) HF(b)[0] = HF(a)[0];
      DESC("op %d, shape %d", op, s);
      RUN("binary", ELEM) KT->binary(CTX, op, &bc, PF(a), PF(b), PF(o));
    }
  for (int s = 0; s < N_SHAPES; s++)
    for (int acc = 0; acc < 2; acc++) {
      /* The destination has a's shape (sa) and sums src over the stretched dims. */
      lv_bcast bc = make_bcast(kShapes[s].r, kShapes[s].out, kShapes[s].b, kShapes[s].out);
      int src = fin(prod(kShapes[s].r, kShapes[s].out), -1, 1), dst = fout(prod(kShapes[s].r, kShapes[s].b));
      DESC("shape %d, acc %d", s, acc);
      RUN("reduce_to", SUMS) KT->reduce_to(CTX, &bc, PF(src), 0.5f, PF(dst), acc);
    }
  for (int s = 0; s < N_SHAPES; s++) {
    lv_bcast bc = make_bcast(kShapes[s].r, kShapes[s].out, kShapes[s].b, kShapes[s].out);
    int n = (int)prod(kShapes[s].r, kShapes[s].out);
    for (int set = 0; set < 2; set++)
      for (int acc = 0; acc < 2; acc++) {
        int cond = fin(prod(kShapes[s].r, kShapes[s].b), 0, 1), gy = fin(n, -1, 1), out = fout(n);
        for (int64_t k = 0; k < g_s[cond].n; k++) HF(cond)[k] = HF(cond)[k] < 0.5f ? 0.0f : 1.0f;
        DESC("shape %d, when_set %d, acc %d", s, set, acc);
        RUN("mask_grad", EXACT) KT->mask_grad(CTX, &bc, PF(cond), PF(gy), set, PF(out), acc);
      }
    lv_bcast3 b3;
    memset(&b3, 0, sizeof b3);
    b3.rank = bc.rank;
    for (int d = 0; d < bc.rank; d++) {
      b3.shape[d] = bc.shape[d];
      b3.s[0][d] = bc.sa[d];
      b3.s[1][d] = bc.sb[d];
      b3.s[2][d] = bc.sa[d];
    }
    int cond = fin(prod(kShapes[s].r, kShapes[s].b), 0, 1), a = fin(n, -1, 1),
        b = fin(prod(kShapes[s].r, kShapes[s].b), -1, 1), out = fout(n);
    for (int64_t k = 0; k < g_s[cond].n; k++) HF(cond)[k] = HF(cond)[k] < 0.5f ? 0.0f : 1.0f;
    DESC("shape %d", s);
    RUN("select_fwd", EXACT) KT->select_fwd(CTX, &b3, PF(cond), PF(a), PF(b), PF(out));
  }
}

static const int64_t kSizes[] = {0, 1, 5, 1000, 100003};
enum { N_SIZES = sizeof kSizes / sizeof kSizes[0] };

static void cases_elementwise(void) {
  for (int s = 0; s < N_SIZES; s++) {
    const int64_t n = kSizes[s];
    DESC("n %lld", (long long)n);
    int x = fin(n, -3, 3), y = fout(n);
    RUN("scale_add", ELEM) KT->scale_add(CTX, n, PF(x), 1.5f, -0.25f, PF(y));
    for (int acc = 0; acc < 2; acc++) {
      DESC("n %lld, acc %d", (long long)n, acc);
      x = fin(n, -3, 3), y = fout(n);
      RUN("axpy", ELEM) KT->axpy(CTX, n, -0.75f, PF(x), PF(y), acc);
      x = fin(n, -3, 3), y = fout(n);
      int gy = fin(n, -1, 1);
      RUN("max_scalar_bwd", EXACT) KT->max_scalar_bwd(CTX, n, PF(x), 0.5f, PF(gy), PF(y), acc);
      x = fin(n, -3, 3), y = fout(n), gy = fin(n, -1, 1);
      RUN("clip_bwd", EXACT) KT->clip_bwd(CTX, n, PF(x), -1.0f, 2.0f, PF(gy), PF(y), acc);
    }
    DESC("n %lld", (long long)n);
    x = fin(n, -3, 3), y = fout(n);
    RUN("max_scalar_fwd", EXACT) KT->max_scalar_fwd(CTX, n, PF(x), 0.5f, PF(y));
    x = fin(n, -3, 3), y = fout(n);
    RUN("clip_fwd", EXACT) KT->clip_fwd(CTX, n, PF(x), -1.0f, 2.0f, PF(y));
    /* Fake quantization, _args and _vars (the 0/0 range too), forward and backward. */
    for (int vars = 0; vars < 2; vars++)
      for (int zero = 0; zero <= vars; zero++) {
        DESC("n %lld, %s%s", (long long)n, vars ? "vars" : "args", zero ? ", min = max = 0" : "");
        int mn = fin(1, -1.5f, -0.5f), mx = fin(1, 0.5f, 2.0f);
        if (zero) HF(mn)[0] = HF(mx)[0] = 0.0f;
        x = fin(n, -3, 3), y = fout(n);
        RUN("fake_quant_fwd", EXACT) KT->fake_quant_fwd(CTX, n, PF(x), PF(mn), PF(mx), vars ? 0 : 1, 255, vars, PF(y));
        for (int acc = 0; acc < 2; acc++) {
          x = fin(n, -3, 3), y = fout(n);
          int gy = fin(n, -1, 1), gmn = fout(1), gmx = fout(1);
          RUN("fake_quant_bwd", SUMS)
          KT->fake_quant_bwd(CTX, n, PF(x), PF(mn), PF(mx), 0, 65535, vars, PF(gy), PF(y), acc, PF(gmn), acc, PF(gmx),
                             !acc);
        }
      }
    y = fout(n);
    RUN("fill", EXACT) KT->fill(CTX, n, 3.25f, PF(y));
    y = fout(n);
    RUN("zero", EXACT) KT->zero(CTX, (size_t)n * sizeof(float), PF(y));
    x = fin(n, -3, 3), y = fout(n);
    RUN("ema_update", ELEM) KT->ema_update(CTX, n, 0.999, PF(x), PF(y));
    /* Dropout: the same mask for the same seed and stream, bit for bit. */
    x = fin(n, -3, 3), y = fout(n);
    int mask = fout(n);
    RUN("dropout_fwd", EXACT) KT->dropout_fwd(CTX, n, PF(x), 0.7f, 1234, 17 + (uint64_t)s, PF(y), PF(mask));
    /* Weight noise: the same draws for the same seed and stream (Box-Muller's log and
     * cos within the math tolerance). */
    for (int uniform = 0; uniform < 2; uniform++) {
      DESC("n %lld, %s noise", (long long)n, uniform ? "uniform" : "normal");
      x = fin(n, -3, 3), y = fout(n);
      RUN("add_noise", MATH) KT->add_noise(CTX, n, PF(x), 0.075f, uniform, 1234, 99 + (uint64_t)s, PF(y));
    }
  }
  for (int a = 0; a < LV_ACT_COUNT; a++)
    for (int s = 0; s < 4; s++) {
      const int64_t n = kSizes[s];
      const bool pos = a == LV_ACT_LOG || a == LV_ACT_SQRT || a == LV_ACT_RSQRT;
      const float lo = pos ? 0.1f : -4, hi = 4;
      DESC("activation %d, n %lld", a, (long long)n);
      int x = fin(n, lo, hi), y = fout(n);
      RUN("act_fwd", MATH) KT->act_fwd(CTX, a, n, PF(x), PF(y));
      for (int acc = 0; acc < 2; acc++) {
        x = fin(n, lo, hi);
        int yi = raw(LV_F32, n, true), gy = fin(n, -1, 1), gx = fout(n);
        CPUK->act_fwd(CPUCTX, a, n, HF(x), HF(yi));
        DESC("activation %d, n %lld, acc %d", a, (long long)n, acc);
        RUN("act_bwd", MATH) KT->act_bwd(CTX, a, n, PF(x), PF(yi), PF(gy), PF(gx), acc);
      }
    }
}

static void cases_gemm(void) {
  static const int64_t dims[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {0, 4, 3}, {4, 3, 0}, {64, 70, 130}};
  for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
    for (int t = 0; t < 4; t++)
      for (int bi = 0; bi < 2; bi++) {
        const bool ta = t & 1, tb = t & 2;
        const int64_t m = dims[d][0], n = dims[d][1], k = dims[d][2];
        const float beta = bi ? 0.5f : 0.0f;
        /* Padded leading dimensions: rows longer than the matrix. */
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
        const int64_t ra = ta ? k : m, rb = tb ? n : k;
        for (int batched = 0; batched < 2; batched++) {
          const int64_t batch = batched ? 3 : 1;
          const int64_t sa = ra * lda + 5, sb = rb * ldb + 1, sc = m * ldc + 2;
          int a = fin(batch * sa, -1, 1), b = fin(batch * sb, -1, 1), c = fout(batch * sc);
          DESC("m %lld n %lld k %lld, ta %d tb %d, beta %g, batch %lld", (long long)m, (long long)n, (long long)k, ta,
               tb, beta, (long long)batch);
          if (batched) {
            RUN("gemm_batched", SUMS)
            KT->gemm_batched(CTX, ta, tb, batch, m, n, k, 0.75f, PF(a), lda, sa, PF(b), ldb, sb, beta, PF(c), ldc, sc);
          } else {
            RUN("gemm", SUMS) KT->gemm(CTX, ta, tb, m, n, k, 0.75f, PF(a), lda, PF(b), ldb, beta, PF(c), ldc);
          }
        }
      }
}

static lv_conv_geom geom(int n, int h, int w, int c, int kh, int kw, int o, int s, int d, int pt, int pl) {
  lv_conv_geom g = {n, h, w, c, kh, kw, o, s, s, d, d, pt, pl, 0, 0};
  int eh = (kh - 1) * d + 1, ew = (kw - 1) * d + 1;
  g.oh = (h + 2 * pt - eh) / s + 1;
  g.ow = (w + 2 * pl - ew) / s + 1;
  return g;
}

/* TF's SAME geometry (lv_core_same_valid), whose bottom/right padding may exceed the
 * top/left: cuDNN, padding symmetrically, declines those and lingvoc's kernels run. */
static lv_conv_geom same(int n, int h, int w, int c, int kh, int kw, int o, int s) {
  lv_conv_geom g = {n, h, w, c, kh, kw, o, s, s, 1, 1, 0, 0, 0, 0};
  g.oh = (h + s - 1) / s;
  g.ow = (w + s - 1) / s;
  int th = (g.oh - 1) * s + kh - h, tw = (g.ow - 1) * s + kw - w;
  g.pt = th > 0 ? th / 2 : 0;
  g.pl = tw > 0 ? tw / 2 : 0;
  return g;
}

static void cases_conv_pool(void) {
  const lv_conv_geom gs[] = {
      geom(2, 7, 6, 3, 3, 2, 4, 1, 1, 1, 0), geom(3, 9, 9, 2, 3, 3, 5, 2, 1, 1, 1),
      geom(2, 8, 7, 3, 2, 3, 2, 1, 2, 0, 1), geom(0, 5, 5, 2, 3, 3, 2, 1, 1, 1, 1),
      geom(4, 5, 5, 1, 1, 1, 3, 1, 1, 0, 0), geom(2, 28, 28, 1, 5, 5, 20, 1, 1, 0, 0),
      same(2, 14, 14, 20, 5, 5, 50, 1), same(2, 8, 9, 3, 3, 3, 4, 2),
  };
  for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
    const lv_conv_geom *g = &gs[i];
    const int64_t nx = (int64_t)g->n * g->h * g->w * g->c, nw = (int64_t)g->kh * g->kw * g->c * g->o,
                  ny = (int64_t)g->n * g->oh * g->ow * g->o;
    DESC("conv geometry %zu", i);
    int x = fin(nx, -1, 1), w = fin(nw, -1, 1), y = fout(ny);
    RUN("conv2d_fwd", SUMS) {
      size_t sf = KT->conv2d_scratch(CTX, g);
      KT->conv2d_fwd(CTX, g, PF(x), PF(w), PF(y), scratch(sf * sizeof(float)), sf);
    }
    cover("conv2d_scratch");
    for (int v = 0; v < 4; v++) {
      const bool want_gx = v != 1, want_gw = v != 2, acc = v == 3;
      x = fin(nx, -1, 1), w = fin(nw, -1, 1);
      int gy = fin(ny, -1, 1), gx = fout(nx), gw = fout(nw);
      DESC("conv geometry %zu, gx %d gw %d acc %d", i, want_gx, want_gw, acc);
      RUN("conv2d_bwd", SUMS) {
        size_t sf = KT->conv2d_scratch(CTX, g);
        KT->conv2d_bwd(CTX, g, PF(x), PF(w), PF(gy), want_gx ? PF(gx) : NULL, acc, want_gw ? PF(gw) : NULL, acc,
                       scratch(sf * sizeof(float)), sf);
      }
    }
  }
  /* Pooling windows: VALID 2x2 / 2, SAME 3x3 / 2 (padding 1), overlapping 3x3 / 1. */
  lv_conv_geom ps[] = {geom(2, 6, 6, 3, 2, 2, 3, 2, 1, 0, 0), geom(2, 7, 5, 2, 3, 3, 2, 2, 1, 1, 1),
                       geom(1, 5, 6, 4, 3, 3, 4, 1, 1, 0, 0), geom(0, 4, 4, 2, 2, 2, 2, 2, 1, 0, 0),
                       same(2, 6, 7, 3, 3, 3, 3, 2)};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    lv_conv_geom *g = &ps[i];
    g->o = g->c;
    const int64_t nx = (int64_t)g->n * g->h * g->w * g->c, ny = (int64_t)g->n * g->oh * g->ow * g->c;
    DESC("pool geometry %zu", i);
    int x = fin(nx, -1, 1), y = fout(ny), am = iout(ny);
    RUN("max_pool_fwd", EXACT) KT->max_pool_fwd(CTX, g, PF(x), PF(y), PI(am));
    x = fin(nx, -1, 1), y = fout(ny);
    RUN("avg_pool_fwd", MATH) KT->avg_pool_fwd(CTX, g, PF(x), PF(y));
    for (int acc = 0; acc < 2; acc++) {
      DESC("pool geometry %zu, acc %d", i, acc);
      x = fin(nx, -1, 1);
      int y2 = raw(LV_F32, ny, true), am2 = raw(LV_I32, ny, true), gy = fin(ny, -1, 1), gx = fout(nx);
      CPUK->max_pool_fwd(CPUCTX, g, HF(x), HF(y2), HI(am2));
      RUN("max_pool_bwd", MATH) KT->max_pool_bwd(CTX, g, PI(am2), PF(gy), PF(gx), acc);
      gy = fin(ny, -1, 1), gx = fout(nx);
      RUN("avg_pool_bwd", MATH) KT->avg_pool_bwd(CTX, g, PF(gy), PF(gx), acc);
    }
  }
}

static void cases_reduce_softmax(void) {
  static const int64_t rs[][3] = {{2, 5, 3}, {1, 7, 1}, {3, 0, 2}, {0, 3, 3}, {4, 300, 1}, {2, 1, 6}};
  for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++)
    for (int kind = 0; kind < 3; kind++) {
      const int64_t o = rs[i][0], n = rs[i][1], in = rs[i][2];
      DESC("[%lld, %lld, %lld], kind %d", (long long)o, (long long)n, (long long)in, kind);
      int x = fin(o * n * in, -2, 2), y = fout(o * in);
      RUN("reduce_fwd", SUMS) KT->reduce_fwd(CTX, kind, o, n, in, PF(x), PF(y));
      for (int acc = 0; acc < 2; acc++) {
        x = fin(o * n * in, -2, 2);
        int yi = raw(LV_F32, o * in, true), gy = fin(o * in, -1, 1), gx = fout(o * n * in);
        CPUK->reduce_fwd(CPUCTX, kind, o, n, in, HF(x), HF(yi));
        RUN("reduce_bwd", MATH) KT->reduce_bwd(CTX, kind, o, n, in, PF(x), PF(yi), PF(gy), PF(gx), acc);
      }
    }
  static const int64_t sm[][2] = {{3, 7}, {5, 1000}, {0, 5}, {4, 1}, {2, 4099}};
  for (size_t i = 0; i < sizeof sm / sizeof sm[0]; i++) {
    const int64_t r = sm[i][0], c = sm[i][1];
    for (int lg = 0; lg < 2; lg++) {
      DESC("[%lld, %lld], log %d", (long long)r, (long long)c, lg);
      int x = fin(r * c, -30, 30), y = fout(r * c);
      RUN("softmax_fwd", MATH) KT->softmax_fwd(CTX, r, c, PF(x), PF(y), lg);
      for (int acc = 0; acc < 2; acc++) {
        x = fin(r * c, -5, 5);
        int yi = raw(LV_F32, r * c, true), gy = fin(r * c, -1, 1), gx = fout(r * c);
        CPUK->softmax_fwd(CPUCTX, r, c, HF(x), HF(yi), lg);
        RUN("softmax_bwd", MATH) KT->softmax_bwd(CTX, r, c, PF(yi), PF(gy), PF(gx), lg, acc);
      }
    }
    /* Cross-entropies; the last variant has an id out of range (a kernel error). */
    for (int bad = 0; bad < 2; bad++) {
      if (bad && r == 0) continue;
      DESC("[%lld, %lld], bad id %d", (long long)r, (long long)c, bad);
      int x = fin(r * c, -8, 8), ids = iin(r, 0, (int)c), loss = fout(r), probs = fout(r * c);
      if (bad) HI(ids)[r - 1] = (int32_t)c;
      RUN("sparse_xent_fwd", MATH) KT->sparse_xent_fwd(CTX, r, c, PF(x), PI(ids), PF(loss), PF(probs), 77);
      if (bad) continue; /* outputs are unspecified after an error */
      x = fin(r * c, -8, 8), ids = iin(r, 0, (int)c);
      int w = fin(r, 0, 2);
      loss = fout(r), probs = fout(r * c);
      RUN("smoothed_xent_fwd", MATH)
      KT->smoothed_xent_fwd(CTX, r, c, PF(x), PI(ids), PF(w), 0.1f, PF(loss), PF(probs), 78);
      x = fin(r * c, -8, 8), ids = iin(r, 0, (int)c), loss = fout(r), probs = fout(r * c);
      RUN("smoothed_xent_fwd", MATH)
      KT->smoothed_xent_fwd(CTX, r, c, PF(x), PI(ids), NULL, 0.0f, PF(loss), PF(probs), 78);
      x = fin(r * c, -8, 8);
      int t = fin(r * c, 0, 1);
      loss = fout(r), probs = fout(r * c);
      RUN("xent_fwd", MATH) KT->xent_fwd(CTX, r, c, PF(x), PF(t), PF(loss), PF(probs));
    }
    {
      DESC("[%lld, %lld], bad smoothed id", (long long)r, (long long)c);
      if (r > 0) {
        int x = fin(r * c, -8, 8), ids = iin(r, 0, (int)c), loss = fout(r), probs = fout(r * c);
        HI(ids)[0] = -1;
        RUN("smoothed_xent_fwd", MATH)
        KT->smoothed_xent_fwd(CTX, r, c, PF(x), PI(ids), NULL, 0.1f, PF(loss), PF(probs), 79);
      }
    }
    for (int acc = 0; acc < 2; acc++) {
      DESC("[%lld, %lld], acc %d", (long long)r, (long long)c, acc);
      int p = fin(r * c, 0, 1), ids = iin(r, 0, (int)c), gl = fin(r, -1, 1), gx = fout(r * c);
      RUN("sparse_xent_bwd", ELEM) KT->sparse_xent_bwd(CTX, r, c, PF(p), PI(ids), PF(gl), PF(gx), acc);
      p = fin(r * c, 0, 1);
      int t = fin(r * c, 0, 1);
      gl = fin(r, -1, 1), gx = fout(r * c);
      RUN("xent_bwd", MATH) KT->xent_bwd(CTX, r, c, PF(p), PF(t), PF(gl), PF(gx), acc);
      p = fin(r * c, 0, 1), ids = iin(r, 0, (int)c);
      int w = fin(r, 0, 2);
      gl = fin(r, -1, 1), gx = fout(r * c);
      RUN("smoothed_xent_bwd", ELEM)
      KT->smoothed_xent_bwd(CTX, r, c, PF(p), PI(ids), acc ? NULL : PF(w), 0.2f, PF(gl), PF(gx), acc);
    }
    {
      DESC("[%lld, %lld], in place", (long long)r, (long long)c);
      int p = fslot(r * c, 0, 1, false), ids = iin(r, 0, (int)c), w = fin(r, 0, 2), gl = fin(r, -1, 1);
      RUN("smoothed_xent_bwd", ELEM)
      KT->smoothed_xent_bwd(CTX, r, c, PF(p), PI(ids), PF(w), 0.2f, PF(gl), PF(p), false);
    }
  }
  /* Masked softmax: x [2, 3, 6] with pad [2, 1, 6] (one row fully padded) and [1, 1, 6]. */
  for (int v = 0; v < 2; v++) {
    int64_t out[3] = {2, 3, 6}, ps[3] = {v ? 1 : 2, 1, 6};
    lv_bcast bc = make_bcast(3, out, ps, out);
    int x = fin(36, -5, 5), pad = fin(prod(3, ps), 0, 1), y = fout(36);
    for (int64_t k = 0; k < g_s[pad].n; k++) HF(pad)[k] = HF(pad)[k] < 0.4f ? 1.0f : 0.0f;
    if (!v)
      for (int k = 0; k < 6; k++) HF(pad)[6 + k] = 1.0f;
    DESC("pad variant %d", v);
    RUN("masked_softmax_fwd", MATH) KT->masked_softmax_fwd(CTX, &bc, PF(x), PF(pad), PF(y));
  }
  /* A decoding step's cached attention: in order (anc NULL), through ancestors (each
   * step's row another hypothesis's), one ancestor outside the caches (the kernel error),
   * and heads of 64 over 37 steps (the vector loops' full width). */
  for (int v = 0; v < 4; v++) {
    const int64_t R = v == 3 ? 4 : 3, N = v == 3 ? 4 : 2, d = v == 3 ? 64 : 5, dv = v == 3 ? 64 : 4;
    const int64_t cap = v == 3 ? 40 : 6, t = v == 3 ? 37 : 4;
    int q = fin(R * N * d, -1, 1), k = fin(cap * R * N * d, -1, 1), vv = fin(cap * R * N * dv, -1, 1);
    int anc = v ? iin(t * R, 0, 1) : -1, sc = fout(R * N * t), out = fout(R * N * dv);
    for (int64_t st = 0; v && st < t; st++)
      for (int64_t r = 0; r < R; r++) HI(anc)[st * R + r] = (int32_t)(st * R + (r * 2 + st) % R);
    if (v == 2) HI(anc)[7] = (int32_t)(cap * R);
    DESC("variant %d", v);
    RUN("cached_attention", MATH)
    KT->cached_attention(CTX, t, R, N, d, dv, cap, PF(q), PF(k), PF(vv), v ? PI(anc) : NULL, PF(sc), PF(out), 17);
  }
  /* Ids: all in range, one out of range (lowest bad position reported), empty. */
  for (int v = 0; v < 3; v++) {
    const int64_t n = v == 2 ? 0 : 3000;
    int ids = iin(n, 0, 50);
    if (v == 1) {
      HI(ids)[2500] = 50;
      HI(ids)[1200] = -3;
    }
    DESC("variant %d", v);
    RUN("check_ids", EXACT) KT->check_ids(CTX, n, PI(ids), 50, 5);
  }
}

/* The chunked cross-entropy: statistics over chunks of 5, 5, 2 classes, loss, and the
 * gradient of each chunk, in one run. */
static void cases_xent_chunks(void) {
  const int64_t rows = 6, c = 12, cs[3] = {5, 5, 2};
  for (int v = 0; v < 2; v++) {
    const bool with_bias = v == 0, with_argmax = v == 0;
    int z[3], bias = fin(c, -1, 1), ids = iin(rows, 0, (int)c), w = fin(rows, 0, 2), gl = fin(rows, -1, 1);
    for (int k = 0; k < 3; k++) z[k] = fout(rows * cs[k]);
    int mx = fout(rows), se = dout(rows), sz = dout(rows), zid = fout(rows), am = iout(rows), loss = fout(rows),
        ls = fout(rows);
    /* Forward results feed the backward within the run, so compare them together. */
    DESC("bias %d, argmax %d", with_bias, with_argmax);
    RUN("xent_chunk_stats", SUMS) {
      int64_t c0 = 0;
      for (int k = 0; k < 3; k++) {
        KT->xent_chunk_stats(CTX, rows, cs[k], c0, PF(z[k]), with_bias ? PF(bias) + c0 : NULL, PI(ids), k == 0,
                             PF(mx), PD(se), PD(sz), PF(zid), with_argmax ? PI(am) : NULL);
        c0 += cs[k];
      }
      KT->xent_chunk_loss(CTX, rows, c, v ? NULL : PF(w), 0.1f, PF(mx), PD(se), PD(sz), PF(zid), PF(loss), PF(ls));
      c0 = 0;
      for (int k = 0; k < 3; k++) {
        KT->xent_chunk_grad(CTX, rows, cs[k], c0, c, PF(z[k]), with_bias ? PF(bias) + c0 : NULL, PI(ids),
                            v ? NULL : PF(w), 0.1f, PF(mx), PF(ls), PF(gl));
        c0 += cs[k];
      }
    }
  }
  cover("xent_chunk_loss");
  cover("xent_chunk_grad");
}

static void cases_norm(void) {
  static const int64_t ls[][2] = {{3, 8}, {5, 513}, {0, 4}, {7, 1}};
  for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++)
    for (int v = 0; v < 4; v++) {
      const int64_t r = ls[i][0], d = ls[i][1];
      const bool with_scale = v != 3, plus1 = v == 1, with_bias = v != 2;
      DESC("[%lld, %lld], variant %d", (long long)r, (long long)d, v);
      int x = fin(r * d, -3, 3), sc = fin(d, -0.5f, 0.5f), b = fin(d, -1, 1), y = fout(r * d), mean = fout(r),
          rstd = fout(r);
      RUN("layer_norm_fwd", MATH)
      KT->layer_norm_fwd(CTX, r, d, PF(x), with_scale ? PF(sc) : NULL, with_bias ? PF(b) : NULL, plus1, 1e-6f, PF(y),
                         PF(mean), PF(rstd));
      x = fin(r * d, -3, 3), sc = fin(d, -0.5f, 0.5f);
      int mi = raw(LV_F32, r, true), ri = raw(LV_F32, r, true), yy = raw(LV_F32, r * d, true);
      CPUK->layer_norm_fwd(CPUCTX, r, d, HF(x), HF(sc), NULL, plus1, 1e-6f, HF(yy), HF(mi), HF(ri));
      const bool acc = v & 1;
      int gy = fin(r * d, -1, 1), gx = fout(r * d), gs = fout(d), gb = fout(d);
      RUN("layer_norm_bwd", SUMS)
      KT->layer_norm_bwd(CTX, r, d, PF(x), with_scale ? PF(sc) : NULL, plus1, PF(mi), PF(ri), PF(gy),
                         v == 2 ? NULL : PF(gx), acc, v == 3 ? NULL : PF(gs), acc, PF(gb), !acc);
    }
  static const int64_t bs[][2] = {{6, 3}, {40, 17}, {0, 4}, {3000, 5}};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
    for (int v = 0; v < 6; v++) {
      const int64_t r = bs[i][0], c = bs[i][1];
      const bool batch_stats = v < 4, zero_padded = v & 1, with_pad = v != 2, with_gamma = v != 3;
      DESC("[%lld, %lld], variant %d", (long long)r, (long long)c, v);
      int x = fin(r * c, -2, 3), pad = fin(r, 0, 1), gamma = fin(c, -0.5f, 0.5f), beta = fin(c, -1, 1);
      for (int64_t k = 0; k < r; k++) HF(pad)[k] = HF(pad)[k] < 0.25f ? 1.0f : (HF(pad)[k] < 0.3f ? 0.5f : 0.0f);
      int mean = batch_stats ? fout(c) : fin(c, -1, 1), var = batch_stats ? fout(c) : fin(c, 0.5f, 2);
      int rstd = fout(c), cnt = dout(1), y = fout(r * c);
      RUN("batch_norm_fwd", SUMS) {
        size_t sb = KT->batch_norm_scratch(CTX, r, c);
        KT->batch_norm_fwd(CTX, r, c, PF(x), with_pad ? PF(pad) : NULL, with_gamma ? PF(gamma) : NULL,
                           with_gamma ? PF(beta) : NULL, 1e-3f, batch_stats, zero_padded, PF(mean), PF(var), PF(rstd),
                           PD(cnt), scratch(sb), PF(y));
      }
      cover("batch_norm_scratch");
      /* The backward from the CPU forward's statistics. */
      x = fin(r * c, -2, 3);
      int p2 = raw(LV_F32, r, true), g2 = fin(c, -0.5f, 0.5f), m2 = raw(LV_F32, c, true), v2 = raw(LV_F32, c, true),
          rs2 = raw(LV_F32, c, true), c2 = raw(LV_F64, 1, true), y2 = raw(LV_F32, r * c, true);
      for (int64_t k = 0; k < r; k++) HF(p2)[k] = (k % 5 == 0) ? 1.0f : 0.0f;
      for (int64_t k = 0; k < c; k++) HF(m2)[k] = 0.1f * (float)k, HF(v2)[k] = 1.0f + 0.05f * (float)k;
      {
        size_t sb = CPUK->batch_norm_scratch(CPUCTX, r, c);
        void *hs = xmalloc(sb);
        CPUK->batch_norm_fwd(CPUCTX, r, c, HF(x), HF(p2), HF(g2), NULL, 1e-3f, batch_stats, zero_padded, HF(m2),
                             HF(v2), HF(rs2), HD(c2), hs, HF(y2));
        free(hs);
      }
      const bool acc = v & 2;
      int gy = fin(r * c, -1, 1), gx = fout(r * c), gg = fout(c), gb = fout(c);
      RUN("batch_norm_bwd", SUMS) {
        size_t sb = KT->batch_norm_scratch(CTX, r, c);
        KT->batch_norm_bwd(CTX, r, c, PF(x), PF(p2), with_gamma ? PF(g2) : NULL, PF(m2), PF(rs2), PD(c2),
                           batch_stats, zero_padded, PF(gy), scratch(sb), v == 5 ? NULL : PF(gx), acc,
                           v == 4 ? NULL : PF(gg), acc, PF(gb), !acc);
      }
    }
  static const int64_t pi[][2] = {{3, 784}, {0, 5}, {2, 1}, {4, 3000}};
  for (size_t i = 0; i < sizeof pi / sizeof pi[0]; i++) {
    DESC("[%lld, %lld]", (long long)pi[i][0], (long long)pi[i][1]);
    int x = fin(pi[i][0] * pi[i][1], 0, 255), y = fout(pi[i][0] * pi[i][1]);
    RUN("per_image_std", MATH) KT->per_image_std(CTX, pi[i][0], pi[i][1], PF(x), PF(y));
  }
}

static void cases_shape_index(void) {
  for (int acc = 0; acc < 2; acc++)
    for (int v = 0; v < 2; v++) {
      const int64_t outer = v ? 0 : 3, len = 2, inner = 4, sn = 5, so = 1, dn = 6, dof = 3;
      DESC("outer %lld, acc %d", (long long)outer, acc);
      int src = fin(outer * sn * inner, -1, 1), dst = fout(outer * dn * inner);
      RUN("copy_block", ELEM) KT->copy_block(CTX, outer, len, inner, PF(src), sn, so, PF(dst), dn, dof, acc);
    }
  {
    static const int64_t sh3[3] = {3, 4, 5}, sh4[4] = {2, 3, 1, 4}, sh0[3] = {2, 0, 3};
    static const int p3[3] = {2, 0, 1}, p4[4] = {3, 1, 0, 2};
    static const struct {
      int rank;
      const int64_t *shape;
      const int *perm;
      lv_dtype t;
      bool acc;
    } ts[] = {{3, sh3, p3, LV_F32, false}, {3, sh3, p3, LV_F32, true}, {4, sh4, p4, LV_F32, false},
              {3, sh3, p3, LV_I64, false}, {3, sh3, p3, LV_U8, false}, {3, sh0, p3, LV_F32, false}};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
      const int64_t n = prod(ts[i].rank, ts[i].shape);
      int x = ts[i].t == LV_F32 ? fin(n, -1, 1) : raw(ts[i].t, n, true), y = ts[i].t == LV_F32 ? fout(n) : raw(ts[i].t, n, false);
      for (int64_t k = 0; k < n * (int64_t)lv_dtype_size(ts[i].t) && ts[i].t != LV_F32; k++)
        ((uint8_t *)g_s[x].host)[k] = (uint8_t)(k * 37 + 11);
      DESC("case %zu", i);
      RUN("transpose", EXACT)
      KT->transpose(CTX, ts[i].rank, ts[i].shape, ts[i].perm, lv_dtype_size(ts[i].t), PV(x), PV(y), ts[i].acc);
    }
  }
  {
    static const lv_dtype pairs[][2] = {{LV_F32, LV_I32}, {LV_I32, LV_F32}, {LV_F32, LV_F64}, {LV_I64, LV_I32},
                                        {LV_I32, LV_I64}, {LV_U8, LV_F32},  {LV_F32, LV_BOOL}, {LV_F64, LV_F32},
                                        {LV_I64, LV_I64}, {LV_F32, LV_U8}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
      for (int e = 0; e < 2; e++) {
        const int64_t n = e ? 0 : 257;
        int x = raw(pairs[i][0], n, true), y = raw(pairs[i][1], n, false);
        for (int64_t k = 0; k < n; k++) {
          double v = urand(-100, 200);
          if (k % 7 == 0) v = 0;
          switch (pairs[i][0]) {
            case LV_F32: ((float *)g_s[x].host)[k] = (float)v; break;
            case LV_F64: HD(x)[k] = v; break;
            case LV_I32: HI(x)[k] = (int32_t)v; break;
            case LV_I64: ((int64_t *)g_s[x].host)[k] = (int64_t)v * 3000000000ll; break;
            default: ((uint8_t *)g_s[x].host)[k] = (uint8_t)(k * 7); break;
          }
        }
        if (pairs[i][0] == LV_F32 && pairs[i][1] == LV_U8)
          for (int64_t k = 0; k < n; k++) ((float *)g_s[x].host)[k] = (float)(k % 256) + 0.5f;
        DESC("%d -> %d, n %lld", pairs[i][0], pairs[i][1], (long long)n);
        RUN("cast", EXACT) KT->cast(CTX, pairs[i][0], pairs[i][1], n, PV(x), PV(y));
      }
  }
  /* Embedding: ids with repeats; one variant with an id out of range. */
  for (int v = 0; v < 4; v++) {
    /* v 3: a batch's worth of ids over a small vocabulary (long chains of repeats). */
    const int64_t vocab = v == 3 ? 50 : 10, d = v == 3 ? 64 : 6, n = v == 2 ? 0 : (v == 3 ? 3000 : 37);
    int table = fin(vocab * d, -1, 1), ids = iin(n, 0, (int)vocab), out = fout(n * d);
    if (v == 1) HI(ids)[20] = 10;
    DESC("variant %d", v);
    RUN("gather_fwd", EXACT) KT->gather_fwd(CTX, vocab, d, PF(table), n, PI(ids), PF(out), 91);
    if (v == 1) continue;
    ids = iin(n, 0, (int)vocab);
    int gy = fin(n * d, -1, 1), gt = fout(vocab * d);
    RUN("gather_bwd", ELEM) KT->gather_bwd(CTX, vocab, d, n, PI(ids), PF(gy), PF(gt));
  }
  /* Columns of a [d, c] shard: ids of this shard (repeated), of others (zero rows), none. */
  for (int v = 0; v < 3; v++) {
    const int64_t d = v == 1 ? 64 : 5, c = v == 1 ? 300 : 8, n = v == 2 ? 0 : (v == 1 ? 2000 : 29), off = 4;
    int w = fin(d * c, -1, 1), ids = iin(n, 0, (int)(off + c + 3)), out = fout(n * d);
    DESC("variant %d", v);
    RUN("gather_cols_fwd", EXACT) KT->gather_cols_fwd(CTX, d, c, PF(w), n, PI(ids), off, PF(out));
    int gy = fin(n * d, -1, 1), gw = fout(d * c);
    RUN("gather_cols_bwd", EXACT) KT->gather_cols_bwd(CTX, d, c, n, PI(ids), off, PF(gy), PF(gw));
  }
  for (int v = 0; v < 3; v++) {
    const int64_t rows = v == 2 ? 0 : 5, c = v ? 1 : 9;
    DESC("[%lld, %lld]", (long long)rows, (long long)c);
    int x = fin(rows * c, -1, 1), out = iout(rows);
    RUN("argmax", EXACT) KT->argmax(CTX, rows, c, PF(x), PI(out));
    for (int k = 1; k <= 3; k += 2) {
      x = fin(rows * c, -1, 1);
      int labels = iin(rows, -1, (int)c + 1), o = fout(rows);
      if (rows > 2) HF(x)[c + 1 < rows * c ? c + 1 : 0] = INFINITY;
      RUN("in_top_k", EXACT) KT->in_top_k(CTX, rows, c, PF(x), PI(labels), k, PF(o));
    }
  }
  static const int64_t tk[][3] = {{4, 50, 1}, {4, 50, 5}, {3, 50, 50}, {0, 8, 2}, {2, 40000, 8}};
  for (size_t i = 0; i < sizeof tk / sizeof tk[0]; i++) {
    const int64_t rows = tk[i][0], n = tk[i][1], k = tk[i][2];
    int x = fin(rows * n, -1, 1), vals = fout(rows * k), idx = iout(rows * k);
    /* Ties (lower index first) and a NaN (larger than any number). */
    if (rows > 0) {
      HF(x)[3] = HF(x)[7] = 2.0f;
      HF(x)[n - 1] = NAN;
    }
    DESC("[%lld, %lld], k %lld", (long long)rows, (long long)n, (long long)k);
    RUN("top_k", EXACT) KT->top_k(CTX, rows, n, k, PF(x), PF(vals), PI(idx));
  }
  for (int acc = 0; acc < 2; acc++) {
    const int64_t t = 5, b = 3, inner = 2;
    int pad = raw(LV_F32, t * b, true), x = fin(t * b * inner, -1, 1), y = fout(t * b * inner), lens = iout(b);
    const int len[3] = {5, 3, 0};
    for (int64_t s = 0; s < t; s++)
      for (int64_t bi = 0; bi < b; bi++) HF(pad)[s * b + bi] = s < len[bi] ? 0.0f : 1.0f;
    DESC("acc %d", acc);
    RUN("reverse_seq", ELEM) KT->reverse_seq(CTX, t, b, inner, PF(pad), PF(x), PF(y), acc, PI(lens));
  }
}

static void cases_lstm(void) {
  for (int v = 0; v < 8; v++) {
    const int64_t b = v == 7 ? 0 : 4, h = 5;
    const bool with_pad = v & 1, out_nl = !(v & 2);
    const float cap = v & 4 ? 0.5f : 0.0f;
    DESC("variant %d", v);
    int gates = fin(b * 4 * h, -2, 2), cp = fin(b * h, -1, 1), mp = fin(b * h, -1, 1), pad = fin(b, 0, 1);
    for (int64_t r = 0; r < b; r++) HF(pad)[r] = r == 1 ? 1.0f : 0.0f;
    int c = fout(b * h), m = fout(b * h);
    RUN("lstm_step_fwd", MATH)
    KT->lstm_step_fwd(CTX, b, h, PF(gates), PF(cp), PF(mp), with_pad ? PF(pad) : NULL, 1.0f, cap, out_nl, PF(c), PF(m));
    gates = fin(b * 4 * h, -2, 2), cp = fin(b * h, -1, 1), pad = fin(b, 0, 1);
    for (int64_t r = 0; r < b; r++) HF(pad)[r] = r == 2 ? 1.0f : 0.0f;
    int gc = fin(b * h, -1, 1), gm = fin(b * h, -1, 1), gg = fout(b * 4 * h), gcp = fout(b * h), gmp = fout(b * h);
    const bool acc = v & 1;
    RUN("lstm_step_bwd", MATH)
    KT->lstm_step_bwd(CTX, b, h, PF(gates), PF(cp), with_pad ? PF(pad) : NULL, 1.0f, cap, out_nl, v == 3 ? NULL : PF(gc),
                      v == 5 ? NULL : PF(gm), v == 6 ? NULL : PF(gg), acc, PF(gcp), !acc, v == 4 ? NULL : PF(gmp), acc);
  }
}

static void cases_optim(void) {
  static const int64_t ns[] = {0, 1, 1001, 3 * LV_OPTIM_SUM_BLOCK + 5};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    const int64_t n = ns[i];
    const int64_t nb = (n + LV_OPTIM_SUM_BLOCK - 1) / LV_OPTIM_SUM_BLOCK;
    DESC("n %lld", (long long)n);
    for (int ab = 0; ab < 2; ab++) {
      int x = fin(n, -2, 2), sc = dout(nb > 0 ? nb : 1), out = dout(1);
      g_s[sc].tol = 1e-9;
      RUN("optim_sum", 1e-12, 1e-12) KT->optim_sum(CTX, n, PF(x), ab, PD(sc), PD(out));
    }
    int x = fout(n);
    RUN("optim_fill", EXACT) KT->optim_fill(CTX, n, PF(x), -0.5f);
    x = fout(n);
    RUN("optim_scale", EXACT) KT->optim_scale(CTX, n, PF(x), 0.3f);
    for (int l1 = 0; l1 < 2; l1++) {
      int w = fin(n, -1, 1), g = fout(n);
      RUN("optim_lp_add", ELEM) KT->optim_lp_add(CTX, n, PF(w), 0.01f, l1, PF(g));
    }
    int v = fin(n, -1, 1), sh = fout(n);
    RUN("optim_ema", ELEM) KT->optim_ema(CTX, n, 0.001f, PF(v), PF(sh));
    int w = fout(n), g = fin(n, -1, 1);
    RUN("optim_sgd", ELEM) KT->optim_sgd(CTX, n, 0.1f, PF(w), PF(g));
    for (int nest = 0; nest < 2; nest++) {
      w = fout(n), g = fin(n, -1, 1);
      int a = fout(n);
      RUN("optim_momentum", ELEM) KT->optim_momentum(CTX, n, 0.1f, 0.9f, nest, PF(w), PF(g), PF(a));
    }
    w = fout(n), g = fin(n, -1, 1);
    int ms = fslot(n, 0, 1, false), mom = fout(n);
    RUN("optim_rmsprop", ELEM) KT->optim_rmsprop(CTX, n, 0.01f, 0.9f, 0.5f, 1e-6f, PF(w), PF(g), PF(ms), PF(mom));
    w = fout(n), g = fin(n, -1, 1);
    int acc = fslot(n, 0.1f, 1, false);
    RUN("optim_adagrad", ELEM) KT->optim_adagrad(CTX, n, 0.01f, PF(w), PF(g), PF(acc));
    w = fout(n), g = fin(n, -1, 1), acc = fslot(n, 0, 1, false);
    int up = fslot(n, 0, 1, false);
    RUN("optim_adadelta", ELEM) KT->optim_adadelta(CTX, n, 1.0f, 0.95f, 1e-6f, PF(w), PF(g), PF(acc), PF(up));
    w = fout(n), g = fin(n, -1, 1);
    int m = fout(n), vv = fslot(n, 0, 1, false);
    RUN("optim_adam", ELEM) KT->optim_adam(CTX, n, 1e-3f, 0.9f, 0.999f, 1e-8f, PF(w), PF(g), PF(m), PF(vv));
  }
}

/* Adafactor on matrices (factored both ways, unfactored), a vector and an empty one, with
 * and without parameter scale, clipping and first moment. */
static void cases_optim_adafactor(void) {
  static const int64_t shapes[][2] = {{0, 3}, {1, 7}, {5, 3}, {3, 5}, {300, 257}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int64_t rows = shapes[i][0], cols = shapes[i][1], n = rows * cols;
    for (int v = 0; v < 8; v++) {
      const bool factored = rows > 1 && !(v & 4);
      DESC("rows %lld cols %lld variant %d", (long long)rows, (long long)cols, v);
      lv_adafactor_args a = {.rows = rows, .cols = cols, .factored = factored, .norm_rows = rows < cols,
                             .param_scale = v & 1, .lr = 0.05f, .decay = 0.8f, .eps1 = 1e-30f, .eps2 = 1e-3f,
                             .clip = v & 2 ? 1.0f : 0.0f, .beta1 = v & 4 ? 0.9f : 0.0f};
      int w = fslot(n, -1, 1, false), g = fin(n, -1, 1), m1 = fout(n);
      int vr = fslot(factored ? rows : n, 0.1f, 1, false), vc = fslot(factored ? cols : 1, 0.1f, 1, false);
      int sc = dout(4);
      g_s[sc].tol = 1e-6;
      RUN("optim_adafactor", 1e-5, 1e-6)
      KT->optim_adafactor(CTX, &a, PF(w), PF(g), v & 4 ? PF(m1) : NULL, PF(vr), factored ? PF(vc) : NULL, PD(sc));
    }
  }
}

/* An embedding's L2/L1 on its looked-up rows, every third row's gradient all zero (what
 * the rows get is checked in check_optim; here the backends must agree). */
static void cases_optim_rows(void) {
  static const int64_t shapes[][2] = {{0, 4}, {1, 1}, {7, 5}, {300, 256}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int64_t rows = shapes[i][0], width = shapes[i][1], n = rows * width;
    DESC("rows %lld width %lld", (long long)rows, (long long)width);
    for (int l1 = 0; l1 < 2; l1++) {
      int x = fin(n, -2, 2), g = fout(n), sc = dout(rows > 0 ? rows : 1), out = dout(1);
      for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < width; k++) HF(g)[r * width + k] = r % 3 == 1 ? 0.0f : 0.001f * (float)(r + k + 1);
      g_s[sc].tol = 1e-9;
      RUN("optim_lp_add_rows", ELEM) KT->optim_lp_add_rows(CTX, rows, width, PF(x), 0.01f, l1, PF(g), PD(sc), PD(out));
    }
  }
}

static void run_start(const lv_backend *be) {
  g_be[0] = lv_backend_get(lv_device_host());
  g_be[1] = be;
  lv_rng_init(&g_rng, 42, 0);
  memset(g_covered, 0, sizeof g_covered);
  g_cases = g_failures = 0;
}

/* Runs every case against backend be; returns the failures. */
static int run_all(const lv_backend *be) {
  run_start(be);
  cases_binary();
  cases_elementwise();
  cases_gemm();
  cases_conv_pool();
  cases_reduce_softmax();
  cases_xent_chunks();
  cases_norm();
  cases_optim_rows();
  cases_optim_adafactor();
  cases_shape_index();
  cases_lstm();
  cases_optim();
  cover("error_take"); /* taken and compared after every case */
  for (int i = 0; i < N_KERNELS; i++)
    if (!g_covered[i]) {
      fprintf(stderr, "FAIL kernel %s has no case in check_backend_ops\n", kKernelNames[i]);
      g_failures++;
    }
  printf("check_backend_ops: %s vs cpu:0: %d cases over %d kernels, %d failed\n", be->name, g_cases, N_KERNELS,
         g_failures);
  return g_failures;
}

/* Device copy of n floats from host (random in [-1, 1) when host is NULL). */
static float *dev_floats(const lv_backend *be, int64_t n, const float *host) {
  float *d = be->alloc(be->ctx, sizeof(float) * (size_t)(n ? n : 1));
  ck_assert_ptr_nonnull(d);
  float *h = xmalloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) h[i] = host ? host[i] : urand(-1, 1);
  be->copy(be->ctx, d, h, sizeof(float) * (size_t)n, LV_COPY_HOST_TO_DEVICE);
  free(h);
  return d;
}

/* LeNet5's second convolution (SAME, which cuDNN takes), batch 8. */
static const lv_conv_geom kLenet2 = {8, 14, 14, 20, 5, 5, 50, 1, 1, 1, 1, 2, 2, 14, 14};

/* conv2d forward and backward (both gradients, accumulating onto random values) twice on
 * be from the same inputs: the outputs must agree bit for bit (deterministic algorithms,
 * the same choice each time). Prints a `repeat:` line; returns the failures. */
static int conv_repeats(const lv_backend *be, const lv_conv_geom *g) {
  const int64_t nx = (int64_t)g->n * g->h * g->w * g->c, nw = (int64_t)g->kh * g->kw * g->c * g->o,
                ny = (int64_t)g->n * g->oh * g->ow * g->o, n3[3] = {ny, nx, nw};
  const lv_kernel_table *k = be->kernels;
  float *x = dev_floats(be, nx, NULL), *w = dev_floats(be, nw, NULL), *gy = dev_floats(be, ny, NULL);
  float *h0[3], *out[2][3];
  for (int j = 0; j < 3; j++) {
    h0[j] = xmalloc(sizeof(float) * (size_t)n3[j]);
    for (int64_t i = 0; i < n3[j]; i++) h0[j][i] = urand(-1, 1);
  }
  size_t sf = k->conv2d_scratch(be->ctx, g);
  float *scratch = be->alloc(be->ctx, sizeof(float) * sf);
  ck_assert_ptr_nonnull(scratch);
  for (int r = 0; r < 2; r++) {
    float *y = dev_floats(be, ny, h0[0]), *gx = dev_floats(be, nx, h0[1]), *gw = dev_floats(be, nw, h0[2]);
    k->conv2d_fwd(be->ctx, g, x, w, y, scratch, sf);
    k->conv2d_bwd(be->ctx, g, x, w, gy, gx, true, gw, true, scratch, sf);
    float *d[3] = {y, gx, gw};
    for (int j = 0; j < 3; j++) {
      out[r][j] = xmalloc(sizeof(float) * (size_t)n3[j]);
      be->copy(be->ctx, out[r][j], d[j], sizeof(float) * (size_t)n3[j], LV_COPY_DEVICE_TO_HOST);
      be->free(be->ctx, d[j]);
    }
  }
  int failures = 0;
  static const char *const kNames[3] = {"y", "gx", "gw"};
  for (int j = 0; j < 3; j++) {
    if (memcmp(out[0][j], out[1][j], sizeof(float) * (size_t)n3[j])) {
      fprintf(stderr, "FAIL conv2d on %s%s: %s differs between two runs of the same inputs\n", be->name, g_path,
              kNames[j]);
      failures++;
    }
    free(out[0][j]);
    free(out[1][j]);
    free(h0[j]);
  }
  be->free(be->ctx, scratch);
  be->free(be->ctx, x);
  be->free(be->ctx, w);
  be->free(be->ctx, gy);
  be->sync(be->ctx);
  printf("check_backend_ops: repeat: conv2d on %s%s twice from the same inputs (%dx%dx%dx%d, %dx%d to %d): %s\n",
         be->name, g_path, g->n, g->h, g->w, g->c, g->kh, g->kw, g->o,
         failures ? "outputs differ" : "bit for bit the same");
  return failures;
}

START_TEST(guarded_cpu1_matches_cpu0) {
  const lv_backend *be = lv_guarded_backend_create(1);
  ck_assert_ptr_nonnull(be);
  int failures = run_all(be);
  failures += conv_repeats(be, &kLenet2);
  ck_assert_int_eq(lv_guarded_allocations(be), 0);
  lv_guarded_backend_destroy(be);
  ck_assert_msg(failures == 0, "%d cases differ between cpu:1 and cpu:0 (see above)", failures);
}
END_TEST

START_TEST(cuda0_matches_cpu0) {
  int n = lv_cuda_device_count();
  if (n <= 0) {
    lv_test_skip("check_backend_ops: cuda:0 against cpu:0: %s",
                 n < 0 ? "this build has no CUDA (make CUDA=1)" : "no GPU is visible");
    return;
  }
  const lv_backend *be = lv_backend_get(lv_device_make(LV_DEVICE_CUDA, 0));
  ck_assert_ptr_nonnull(be);
  /* Every case with cuDNN where it runs (conv2d, average pooling), then the conv and
   * pooling cases again with lingvoc's own kernels (im2col + cuBLAS, pooling kernels). */
  lv_cuda_use_cudnn(true);
  g_path = " (cuDNN where it runs)";
  char dnn[256];
  bool have = lv_cuda_cudnn_describe(0, dnn, sizeof dnn);
  int64_t on0, own0, on1, own1, on2, own2;
  lv_cuda_cudnn_counts(&on0, &own0);
  int failures = run_all(be);
  lv_cuda_cudnn_counts(&on1, &own1);
  /* A cuDNN call that returns an error turns cuDNN off (the case still passes on
   * lingvoc's kernels): that is a failure of the cuDNN path. */
  bool still = lv_cuda_cudnn_describe(0, dnn, sizeof dnn);
  printf("check_backend_ops: cudnn: %s: %lld conv/avg-pool calls on cuDNN, %lld on lingvoc's kernels\n", dnn,
         (long long)(on1 - on0), (long long)(own1 - own0));
  if (have && (on1 == on0 || !still)) {
    fprintf(stderr, "FAIL cuDNN loaded on cuda:0 but %s\n", still ? "no conv or pooling case ran on it" : dnn);
    failures++;
  }
  failures += conv_repeats(be, &kLenet2);
  lv_cuda_cudnn_counts(&on1, &own1);
  lv_cuda_use_cudnn(false);
  g_path = " (without cuDNN)";
  run_start(be);
  cases_conv_pool();
  lv_cuda_cudnn_counts(&on2, &own2);
  printf("check_backend_ops: im2col: cuda:0 without cuDNN vs cpu:0: %d conv and pooling cases, %d failed\n", g_cases,
         g_failures);
  if (on2 != on1) {
    fprintf(stderr, "FAIL %lld calls ran on cuDNN with cuDNN off\n", (long long)(on2 - on1));
    failures++;
  }
  failures += g_failures;
  lv_cuda_use_cudnn(!lv_env_get()->cuda_cudnn_off);
  g_path = "";
  ck_assert_msg(failures == 0, "%d cases differ between cuda:0 and cpu:0 (see above)", failures);
}
END_TEST

int main(void) {
  Suite *s = suite_create("backend_ops");
  TCase *tc = tcase_create("ops");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, guarded_cpu1_matches_cpu0);
  tcase_add_test(tc, cuda0_matches_cpu0);
  suite_add_tcase(s, tc);
  return lv_test_run(s);
}
