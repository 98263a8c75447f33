/* Scalar math shared by the CPU kernels and the CUDA kernels, so both backends compute
 * the same expressions in the same order: the binary ops, the activations and their
 * derivatives, the LSTM's sigmoid and tanh, top-k's ranking and the dtype casts. Plain C; under nvcc the functions are
 * __host__ __device__. */
#ifndef LV_KERNELS_KERNEL_MATH_H
#define LV_KERNELS_KERNEL_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/dtype.h"
#include "kernels/activation.h"
#include "kernels/kernels.h"

#ifdef __CUDACC__
#define LV_KFN static inline __host__ __device__
#else
#define LV_KFN static inline
#endif

#define LV_LEAKY_ALPHA 0.2f /* tf.nn.leaky_relu's default */

/* exp(x) for x <= 0 in a form that vectorizes (no calls, no branches), where expf is a
 * call per element: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by Cephes' polynomial, 2^n
 * put in the exponent bits. Within 1 ulp of the correctly rounded exp on [-87.3, 0]
 * (tests/check_core.c); 0 below -87.34 (where expf is subnormal); NaN stays NaN. n comes
 * out of the 1.5 * 2^23 rounding trick, not a float-to-int cast. The softmaxes' exp and
 * the base of lv_ksigm and lv_ktanh. */
LV_KFN float lv_kexp_le0(float x) {
  const float lo = -87.33654475f;
  float xc = x < lo ? lo : x;
  xc = xc > 0.0f ? 0.0f : xc;
  const float t = xc * 1.44269504088896341f + 12582912.0f;
  const float n = t - 12582912.0f;
  uint32_t tb;
  memcpy(&tb, &t, sizeof tb);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const uint32_t eb = (tb - 0x4B400000u + 127u) << 23; /* n + 127 in the exponent field */
  float scale;
  memcpy(&scale, &eb, sizeof scale);
  return x < lo ? 0.0f : (x != x ? x : p * scale);
}

/* tanh without calls or branches, so the LSTM's gate loops and the tanh activation (the
 * additive attention's [rows, S, hidden] tanh) vectorize: Cephes' odd polynomial below
 * |x| = 0.625, (1 - e) / (1 + e) with e = exp(-2|x|) above (no cancellation there: e <=
 * 0.29). Within 2 ulp of tanh over every float (tests/check_core.c); +-1 from |x| = 9.1;
 * NaN stays NaN; tanh(-0) = -0. Both sides are computed and one is selected. */
LV_KFN float lv_ktanh(float x) {
  const float a = fabsf(x), z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float e = lv_kexp_le0(-2.0f * a);
  return copysignf(a < 0.625f ? p * z * a + a : (1.0f - e) / (1.0f + e), x);
}

/* The logistic sigmoid without calls or branches (see lv_ktanh): with e = exp(-|x|) <= 1,
 * 1 / (1 + e) for x >= 0 and e / (1 + e) below, so neither side overflows or loses the
 * small values' relative precision. Within 2 ulp of 1 / (1 + exp(-x)) wherever that is a
 * normal float (tests/check_core.c); 0 below x = -87.34; NaN stays NaN. */
LV_KFN float lv_ksigm(float x) {
  const float e = lv_kexp_le0(-fabsf(x)), d = 1.0f + e;
  return x >= 0.0f ? 1.0f / d : (x != x ? x : e / d);
}

/* y = act(x) for an lv_activation. */
LV_KFN float lv_kact(int a, float x) {
  switch (a) {
    case LV_ACT_RELU: return x > 0 ? x : 0;
    case LV_ACT_RELU6: return x < 0 ? 0 : (x > 6 ? 6 : x);
    case LV_ACT_SIGMOID: return lv_ksigm(x);
    case LV_ACT_TANH: return lv_ktanh(x);
    case LV_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case LV_ACT_SILU: return x / (1.0f + expf(-x));
    case LV_ACT_SOFTPLUS: return x > 20 ? x : log1pf(expf(x));
    case LV_ACT_LEAKY_RELU: return x > 0 ? x : LV_LEAKY_ALPHA * x;
    case LV_ACT_EXP: return expf(x);
    case LV_ACT_LOG: return logf(x);
    case LV_ACT_SQRT: return sqrtf(x);
    case LV_ACT_SQUARE: return x * x;
    case LV_ACT_RSQRT: return 1.0f / sqrtf(x);
    default: return x;
  }
}

/* dy/dx from x and y. */
LV_KFN float lv_kdact(int a, float x, float y) {
  switch (a) {
    case LV_ACT_RELU: return x > 0 ? 1.0f : 0.0f;
    case LV_ACT_RELU6: return (x > 0 && x < 6) ? 1.0f : 0.0f;
    case LV_ACT_SIGMOID: return y * (1.0f - y);
    case LV_ACT_TANH: return 1.0f - y * y;
    case LV_ACT_GELU:
      return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) +
             x * 0.39894228040143268f * expf(-0.5f * x * x);
    case LV_ACT_SILU: {
      float s = 1.0f / (1.0f + expf(-x));
      return s * (1.0f + x * (1.0f - s));
    }
    case LV_ACT_SOFTPLUS: return 1.0f / (1.0f + expf(-x));
    case LV_ACT_LEAKY_RELU: return x > 0 ? 1.0f : LV_LEAKY_ALPHA;
    case LV_ACT_EXP: return y;
    case LV_ACT_LOG: return 1.0f / x;
    case LV_ACT_SQRT: return 0.5f / y;
    case LV_ACT_SQUARE: return 2.0f * x;
    case LV_ACT_RSQRT: return -0.5f * y / x;
    default: return 1.0f;
  }
}

/* x[i] ranks before x[j] in top_k: larger, or equal with the lower index (NaN largest). */
LV_KFN bool lv_kbetter(float vi, int64_t i, float vj, int64_t j) {
  bool ni = isnan(vi), nj = isnan(vj);
  if (ni || nj) return ni && nj ? i < j : ni;
  return vi > vj || (vi == vj && i < j);
}

/* An lv_binary_op. */
LV_KFN float lv_kbin(int op, float a, float b) {
  switch (op) {
    case LV_BIN_ADD: return a + b;
    case LV_BIN_SUB: return a - b;
    case LV_BIN_MUL: return a * b;
    case LV_BIN_DIV: return a / b;
    case LV_BIN_MAX: return a >= b ? a : b;
    case LV_BIN_MIN: return a <= b ? a : b;
    case LV_BIN_LT: return a < b ? 1.0f : 0.0f;
    case LV_BIN_LE: return a <= b ? 1.0f : 0.0f;
    case LV_BIN_GT: return a > b ? 1.0f : 0.0f;
    case LV_BIN_GE: return a >= b ? 1.0f : 0.0f;
    case LV_BIN_EQ: return a == b ? 1.0f : 0.0f;
    default: return a != b ? 1.0f : 0.0f;
  }
}

LV_KFN double lv_kload(int t, const void *x, int64_t i) {
  switch (t) {
    case LV_F32: return ((const float *)x)[i];
    case LV_F64: return ((const double *)x)[i];
    case LV_I32: return ((const int32_t *)x)[i];
    case LV_I64: return (double)((const int64_t *)x)[i];
    case LV_U8: return ((const uint8_t *)x)[i];
    case LV_BOOL: return ((const uint8_t *)x)[i] != 0;
    default: return 0;
  }
}

/* y[i] = x[i] converted from dtype `from` to `to`, as tf.cast (float to integer truncates
 * toward zero; int64 to int32 wraps). */
LV_KFN void lv_kcast_at(int from, int to, const void *x, void *y, int64_t i) {
  if (from == LV_I64 && (to == LV_I64 || to == LV_I32)) {
    int64_t v = ((const int64_t *)x)[i];
    if (to == LV_I64) ((int64_t *)y)[i] = v;
    else ((int32_t *)y)[i] = (int32_t)v;
    return;
  }
  double v = lv_kload(from, x, i);
  switch (to) {
    case LV_F32: ((float *)y)[i] = (float)v; break;
    case LV_F64: ((double *)y)[i] = v; break;
    case LV_I32: ((int32_t *)y)[i] = (int32_t)v; break;
    case LV_I64: ((int64_t *)y)[i] = from == LV_I32 ? ((const int32_t *)x)[i] : (int64_t)v; break;
    case LV_U8: ((uint8_t *)y)[i] = (uint8_t)v; break;
    case LV_BOOL: ((uint8_t *)y)[i] = v != 0; break;
    default: break;
  }
}

/* TensorFlow's fake quantization (tensorflow/core/kernels/fake_quant_ops_functor.h,
 * reference/lingvo_asr_lm.md §13.2), in its float32 operations and their order. Nudge:
 * the range [min, max] moved so that real 0 is a quantization level (the zero point
 * rounded half away from zero, clamped to [quant_min, quant_max]). */
typedef struct lv_kfq {
  float nmin, nmax, scale, inv_scale, quant_zero;
  bool zero; /* _vars with min == max == 0: the output is 0 and the gradient passes */
} lv_kfq;

LV_KFN lv_kfq lv_kfq_nudge(float min, float max, int quant_min, int quant_max, bool vars) {
  lv_kfq q;
  memset(&q, 0, sizeof q);
  q.zero = vars && min == 0.0f && max == 0.0f;
  if (q.zero) return q;
  const float qminf = (float)quant_min, qmaxf = (float)quant_max;
  q.scale = (max - min) / (qmaxf - qminf);
  q.inv_scale = (qmaxf - qminf) / (max - min);
  const float zp_from_min = qminf - min / q.scale;
  uint16_t zp;
  if (zp_from_min < qminf) zp = (uint16_t)quant_min;
  else if (zp_from_min > qmaxf) zp = (uint16_t)quant_max;
  else if (zp_from_min != zp_from_min) zp = 0; /* NaN (max - min overflowing): x86's cast of it */
  else zp = (uint16_t)roundf(zp_from_min);
  q.nmin = (qminf - (float)zp) * q.scale;
  q.nmax = (qmaxf - (float)zp) * q.scale;
  q.quant_zero = floorf(-q.nmin * q.inv_scale + 0.5f);
  return q;
}

/* One element: _args multiplies by the inverse scale, _vars divides by the scale. */
LV_KFN float lv_kfq_apply(const lv_kfq *q, float x, bool vars) {
  if (q->zero) return 0.0f;
  float c = x < q->nmax ? x : q->nmax;
  c = c > q->nmin ? c : q->nmin;
  const float shifted = c - q->nmin;
  const float t = vars ? shifted / q->scale : shifted * q->inv_scale;
  return floorf(t - q->quant_zero + 0.5f) * q->scale;
}

#endif
