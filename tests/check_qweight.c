/* Float-less quantized weights (kernels/qweight.h): a deferred variable holds its twin
 * alone, and every op gives the bytes it gives on the dequantized floats beside a twin
 * (the way a quantized model file was restored before): matmul, addmm and matmul_bias
 * on the twin, a row slice of it, a gather from an int8 table; ops without an int8 path
 * (a transposed matmul, a concat) make the floats once, shared by every store that
 * shares the twin, and keep the others float-less. And a QAT grid's values stored as its
 * levels (quantize_grid). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "check_util.h"
#include "core/graph.h"
#include "core/ops.h"
#include "core/variable.h"
#include "kernels/cpu/cpu_int8.h"
#include "kernels/qweight.h"

enum { K = 40, N = 24, V = 30, D = 12, M = 3 };

static void fill(float *x, int64_t n, uint64_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = (2.0f * lv_rng_uniform_at(seed, 0, (uint64_t)i) - 1.0f) * (i % 13 == 4 ? 3 : 1);
}

/* Quantized W [K, N] (per column) and E [V, D] (per row), and their dequantized floats. */
typedef struct qdata {
  int8_t qw[K * N], qe[V * D];
  float ws[N], es[V], w[K * N], e[V * D];
} qdata;

static void qdata_make(qdata *q) {
  float w[K * N], e[V * D];
  fill(w, K * N, 1);
  fill(e, V * D, 2);
  const lv_qtype_traits *tr = lv_qtype_traits_of(LV_QTYPE_INT8);
  tr->quantize(w, K, N, 1, q->qw, q->ws);
  tr->quantize(e, V, D, 0, q->qe, q->es);
  tr->dequantize(q->qw, q->ws, K, N, 1, q->w);
  tr->dequantize(q->qe, q->es, V, D, 0, q->e);
}

/* A store with w [K, N] and e [V, D]: deferred (twins alone) or with the floats and W's
 * twin (a model file's restore before float-less weights). */
static lv_varstore *store(const qdata *q, bool deferred, lv_var **w, lv_var **e) {
  lv_varstore *vs = lv_varstore_create();
  lv_var_init zero = {LV_INIT_CONSTANT, 0.0};
  EXPECT_OK(lv_varstore_add(vs, "w/var", LV_F32, lv_shape2(K, N), zero, true, w));
  EXPECT_OK(lv_varstore_add(vs, "e/var", LV_F32, lv_shape2(V, D), zero, true, e));
  lv_varstore_set_no_grads(vs);
  if (deferred) {
    lv_var_defer(*w);
    lv_var_defer(*e);
  }
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  lv_var_set_quant(*w, lv_qweight_new(LV_QTYPE_INT8, q->qw, q->ws, K, N));
  if (deferred) {
    ck_assert_ptr_null((*w)->value.data);
    ck_assert_ptr_null((*e)->value.data);
    lv_var_set_quant(*e, lv_qweight_new_rows(LV_QTYPE_INT8, q->qe, q->es, V, D));
  } else {
    memcpy((*w)->value.data, q->w, sizeof q->w);
    memcpy((*e)->value.data, q->e, sizeof q->e);
  }
  return vs;
}

static lv_tensor *host_input(lv_graph *g, lv_shape s, uint64_t seed) {
  lv_tensor *t = lv_graph_tensor(g, LV_F32, s);
  fill(lv_f32(t), lv_shape_numel(&s), seed);
  return t;
}

static lv_tensor *ids_tensor(lv_graph *g, const int32_t *ids, int n) {
  lv_tensor *t = lv_graph_tensor(g, LV_I32, lv_shape1(n));
  memcpy(t->data, ids, sizeof(int32_t) * (size_t)n);
  return t;
}

static void same_bytes(const lv_tensor *a, const lv_tensor *b, const char *what) {
  ck_assert_msg(a && b, "%s: an op failed", what);
  ck_assert_msg(lv_shape_eq(&a->shape, &b->shape), "%s: shapes differ", what);
  ck_assert_msg(!memcmp(a->data, b->data, lv_tensor_nbytes(a)), "%s: the bytes differ", what);
}

/* The ops a float-less weight goes through: results of each as with floats beside a twin. */
static void run_ops(lv_graph *g, lv_var *w, lv_var *e, lv_tensor **out) {
  const int32_t ids[5] = {0, 29, 7, 7, 12};
  lv_tensor *x = host_input(g, lv_shape2(M, K), 3), *bias = host_input(g, lv_shape1(N), 4);
  lv_tensor *c = host_input(g, lv_shape2(M, N), 5), *x8 = host_input(g, lv_shape2(M, 8), 6);
  out[0] = lv_op_matmul(g, x, &w->value, false, false);
  out[1] = lv_op_matmul_bias(g, x, &w->value, bias);
  out[2] = lv_op_addmm(g, c, x, &w->value);
  out[3] = lv_op_matmul(g, x8, lv_op_slice(g, &w->value, 0, 8, 8), false, false); /* a twin's rows */
  out[4] = lv_op_gather(g, &e->value, ids_tensor(g, ids, 5));
}

START_TEST(floatless_weights_give_the_same_bytes) {
  qdata q;
  qdata_make(&q);
  lv_var *w0, *e0, *w1, *e1;
  lv_varstore *ref = store(&q, false, &w0, &e0), *vs = store(&q, true, &w1, &e1);
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *a[5], *b[5];
  run_ops(g, w0, e0, a);
  run_ops(g, w1, e1, b);
  EXPECT_OK(lv_graph_status(g));
  static const char *const what[5] = {"matmul", "matmul_bias", "addmm", "matmul of a row slice", "gather"};
  for (int i = 0; i < 5; i++) same_bytes(a[i], b[i], what[i]);
  /* None of them needed floats. */
  ck_assert_ptr_null(w1->value.data);
  ck_assert_ptr_null(e1->value.data);
  ck_assert_ptr_null(w1->quant->floats);
  ck_assert_ptr_null(e1->quant->floats);
  /* An id past the int8 table is the graph's error, as the float gather's. */
  const int32_t bad[2] = {1, V};
  ck_assert_ptr_null(lv_op_gather(g, &e1->value, ids_tensor(g, bad, 2)));
  lv_status s = lv_graph_status(g);
  ck_assert_msg(s && strstr(lv_status_msg(s), "30"), "%s", s ? lv_status_msg(s) : "no error");
  lv_status_free(s);
  lv_graph_destroy(g);
  lv_varstore_destroy(ref);
  lv_varstore_destroy(vs);
}
END_TEST

/* bf16: rounding to nearest even (NaN stays NaN, infinity infinity), scales 1; its twins
 * (float-less W and E) give every op the bytes of plain float32 variables holding the
 * rounded values. */
START_TEST(bf16_twins_give_the_rounded_floats_bytes) {
  const lv_qtype_traits *tr = lv_qtype_traits_of(LV_QTYPE_BF16);
  const float in[6] = {1.0f, 1.00390625f, 1.01171875f, -2.5f, 1e-40f, 3.0e38f};
  const uint16_t want[6] = {0x3f80, 0x3f80, 0x3f82, 0xc020, 0x0001, 0x7f62};
  uint16_t got[6];
  float sc[6];
  tr->quantize(in, 1, 6, 1, got, sc);
  for (int i = 0; i < 6; i++) {
    ck_assert_msg(got[i] == want[i], "%.9g: bf16 %04x, want %04x", in[i], got[i], want[i]);
    ck_assert(sc[i] == 1.0f);
  }
  const float odd[2] = {NAN, INFINITY};
  tr->quantize(odd, 1, 2, 1, got, sc);
  ck_assert(isnan(sc[0]) && isnan(sc[1])); /* export refuses them */
  float w[K * N], e[V * D], sw[N], se[V];
  uint16_t qw[K * N], qe[V * D];
  fill(w, K * N, 1);
  fill(e, V * D, 2);
  tr->quantize(w, K, N, 1, qw, sw);
  tr->quantize(e, V, D, 0, qe, se);
  tr->dequantize(qw, sw, K, N, 1, w);
  tr->dequantize(qe, se, V, D, 0, e);
  lv_var *v[2][2];
  lv_varstore *vs[2];
  lv_var_init zero = {LV_INIT_CONSTANT, 0.0};
  for (int m = 0; m < 2; m++) {
    vs[m] = lv_varstore_create();
    EXPECT_OK(lv_varstore_add(vs[m], "w/var", LV_F32, lv_shape2(K, N), zero, true, &v[m][0]));
    EXPECT_OK(lv_varstore_add(vs[m], "e/var", LV_F32, lv_shape2(V, D), zero, true, &v[m][1]));
    lv_varstore_set_no_grads(vs[m]);
    if (m) {
      lv_var_defer(v[m][0]);
      lv_var_defer(v[m][1]);
    }
    EXPECT_OK(lv_varstore_finalize(vs[m], 1));
    if (m) {
      lv_var_set_quant(v[m][0], lv_qweight_new(LV_QTYPE_BF16, qw, sw, K, N));
      lv_var_set_quant(v[m][1], lv_qweight_new_rows(LV_QTYPE_BF16, qe, se, V, D));
    } else {
      memcpy(v[m][0]->value.data, w, sizeof w);
      memcpy(v[m][1]->value.data, e, sizeof e);
    }
  }
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *a[5], *b[5];
  run_ops(g, v[0][0], v[0][1], a);
  run_ops(g, v[1][0], v[1][1], b);
  EXPECT_OK(lv_graph_status(g));
  static const char *const what[5] = {"matmul", "matmul_bias", "addmm", "matmul of a row slice", "gather"};
  for (int i = 0; i < 5; i++) same_bytes(a[i], b[i], what[i]);
  ck_assert_ptr_null(v[1][0]->value.data);
  ck_assert_ptr_null(v[1][0]->quant->floats);
  lv_graph_destroy(g);
  for (int m = 0; m < 2; m++) lv_varstore_destroy(vs[m]);
}
END_TEST

START_TEST(ops_without_an_int8_path_make_the_floats_once) {
  qdata q;
  qdata_make(&q);
  lv_var *w0, *e0, *w1, *e1, *w2, *e2;
  lv_varstore *ref = store(&q, false, &w0, &e0), *vs = store(&q, true, &w1, &e1);
  lv_varstore *other = lv_varstore_create();
  lv_var_init zero = {LV_INIT_CONSTANT, 0.0};
  EXPECT_OK(lv_varstore_add(other, "w/var", LV_F32, lv_shape2(K, N), zero, true, &w2));
  EXPECT_OK(lv_varstore_add(other, "e/var", LV_F32, lv_shape2(V, D), zero, true, &e2));
  lv_varstore_set_no_grads(other);
  lv_var_defer(w2);
  lv_var_defer(e2);
  EXPECT_OK(lv_varstore_finalize(other, 1));
  ck_assert(lv_varstore_share_values(other, vs));
  lv_graph *g = lv_graph_create(0);
  lv_graph_set_training(g, false);
  lv_tensor *y = host_input(g, lv_shape2(M, N), 7);
  /* y W^T: no twin for a transposed W; concat: no int8 path at all. */
  same_bytes(lv_op_matmul(g, y, &w0->value, false, true), lv_op_matmul(g, y, &w1->value, false, true), "matmul, W^T");
  lv_tensor *ee0[2] = {&e0->value, &e0->value}, *ee1[2] = {&e1->value, &e1->value};
  same_bytes(lv_op_concat(g, ee0, 2, 0), lv_op_concat(g, ee1, 2, 0), "concat of a table");
  EXPECT_OK(lv_graph_status(g));
  ck_assert(w1->value.data && !memcmp(w1->value.data, q.w, sizeof q.w));
  ck_assert(e1->value.data && !memcmp(e1->value.data, q.e, sizeof q.e));
  /* The store sharing the twins takes the same floats, made once. */
  ck_assert_ptr_null(w2->value.data);
  lv_tensor *z = lv_op_matmul(g, y, &w2->value, false, true);
  ck_assert(z && w2->value.data == w1->value.data);
  lv_graph_destroy(g);
  lv_varstore_destroy(other);
  lv_varstore_destroy(ref);
  lv_varstore_destroy(vs);
}
END_TEST

/* The floats a twin makes are the dequantized values, from the packed form (axis 1, a
 * view's rows of its root's) and from the rows (axis 0). */
START_TEST(unpack_gives_the_dequantized_floats) {
  qdata q;
  qdata_make(&q);
  lv_qweight *w = lv_qweight_new(LV_QTYPE_INT8, q.qw, q.ws, K, N), *e = lv_qweight_new_rows(LV_QTYPE_INT8, q.qe, q.es, V, D);
  ck_assert(w && e);
  bool made = false;
  ck_assert(!memcmp(lv_qweight_floats(w, &made), q.w, sizeof q.w) && made);
  ck_assert(!memcmp(lv_qweight_floats(e, &made), q.e, sizeof q.e) && made);
  ck_assert_ptr_eq(lv_qweight_floats(w, &made), w->floats); /* made once */
  ck_assert(!made);
  lv_qweight view = {.type = LV_QTYPE_INT8, .k = 8, .n = N, .axis = 1, .root = w, .r0 = 16};
  ck_assert_ptr_eq(lv_qweight_floats(&view, &made), w->floats + 16 * N);
  lv_qweight_free(w);
  lv_qweight_free(e);
}
END_TEST

/* A QAT grid (export of a quantization-aware model): channels on it keep it, a level past
 * [-127, 127] by one is clamped, a channel off it (or too wide) is quantized as usual. */
START_TEST(quantize_grid_keeps_the_grid) {
  enum { R = 6, C = 4 };
  const float step = 0.03125f;
  float x[R * C], scales[C];
  int8_t q[R * C], want_q[R * C];
  float want_s[C];
  for (int r = 0; r < R; r++) {
    x[r * C + 0] = (float)(r * 20 - 50) * step; /* on the grid */
    x[r * C + 1] = (float)(r == 0 ? -128 : r * 3) * step; /* one level past */
    x[r * C + 2] = (float)(r * 3) * step + (r == 4 ? 0.3f * step : 0.0f); /* off it */
    x[r * C + 3] = (float)(r == 5 ? 129 : r) * step; /* two levels past */
  }
  const lv_qtype_traits *tr = lv_qtype_traits_of(LV_QTYPE_INT8);
  int64_t clamped = 0;
  ck_assert_int_eq(tr->quantize_grid(x, R, C, 1, step, q, scales, &clamped), 2);
  ck_assert_int_eq(clamped, 1);
  tr->quantize(x, R, C, 1, want_q, want_s);
  for (int c = 0; c < C; c++) {
    const bool grid = c < 2;
    ck_assert_float_eq(scales[c], grid ? step : want_s[c]);
    for (int r = 0; r < R; r++) {
      const int want = grid ? (c == 1 && r == 0 ? -127 : (int)(x[r * C + c] / step)) : want_q[r * C + c];
      ck_assert_msg(q[r * C + c] == want, "[%d,%d]: %d, want %d", r, c, q[r * C + c], want);
    }
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("qweight");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, floatless_weights_give_the_same_bytes);
  tcase_add_test(tc, ops_without_an_int8_path_make_the_floats_once);
  tcase_add_test(tc, unpack_gives_the_dequantized_floats);
  tcase_add_test(tc, quantize_grid_keeps_the_grid);
  tcase_add_test(tc, bf16_twins_give_the_rounded_floats_bytes);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return lv_test_run(suite()); }
