/* Fake quantization (tf.quantization.fake_quant_with_min_max_args / _vars) and its
 * straight-through gradient; the arithmetic is kernel_math.h's, shared with CUDA. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_math.h"

void lv_cpu_fake_quant_fwd(lv_kctx *ctx, int64_t n, const float *x, const float *min, const float *max,
                           int quant_min, int quant_max, bool vars, float *y) {
  (void)ctx;
  const lv_kfq q = lv_kfq_nudge(*min, *max, quant_min, quant_max, vars);
  for (int64_t i = 0; i < n; i++) y[i] = lv_kfq_apply(&q, x[i], vars);
}

void lv_cpu_fake_quant_bwd(lv_kctx *ctx, int64_t n, const float *x, const float *min, const float *max,
                           int quant_min, int quant_max, bool vars, const float *gy, float *gx, bool gx_acc,
                           float *gmin, bool gmin_acc, float *gmax, bool gmax_acc) {
  (void)ctx;
  const lv_kfq q = lv_kfq_nudge(*min, *max, quant_min, quant_max, vars);
  double below = 0.0, above = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i];
    const bool in = q.zero || (v >= q.nmin && v <= q.nmax);
    if (gx) gx[i] = (gx_acc ? gx[i] : 0.0f) + (in ? gy[i] : 0.0f);
    if (!q.zero && v < q.nmin) below += gy[i];
    if (!q.zero && v > q.nmax) above += gy[i];
  }
  if (gmin) *gmin = (gmin_acc ? *gmin : 0.0f) + (float)below;
  if (gmax) *gmax = (gmax_acc ? *gmax : 0.0f) + (float)above;
}
