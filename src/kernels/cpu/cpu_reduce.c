/* Reductions over the middle axis of [outer, n, inner]: sum, mean, max (max's gradient
 * goes to the first maximum). */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

typedef struct red_job {
  int kind;
  int64_t n, inner;
  float sc;
  const float *x, *y, *gy;
  float *out;
} red_job;

LV_CPU_PAR_LOOP(reduce_fwd_outer, red_job, o, {
  const int64_t n = J->n, inner = J->inner;
  float *yo = J->out + o * inner;
  const float *xo = J->x + o * n * inner;
  if (J->kind == LV_RED_MAX) {
    for (int64_t j = 0; j < inner; j++) yo[j] = n > 0 ? xo[j] : 0.0f;
    for (int64_t i = 1; i < n; i++)
      for (int64_t j = 0; j < inner; j++)
        if (xo[i * inner + j] > yo[j]) yo[j] = xo[i * inner + j];
  } else {
    /* Double accumulators: a mean over a whole batch of logits should not drift. */
    for (int64_t j = 0; j < inner; j++) {
      double s = 0;
      for (int64_t i = 0; i < n; i++) s += xo[i * inner + j];
      yo[j] = (float)(J->kind == LV_RED_MEAN ? (n ? s / (double)n : 0.0) : s);
    }
  }
})

/* Each outer slice is one piece's alone: any split gives the same bits. */
static int64_t outer_grain(int64_t outer, int64_t n, int64_t inner) {
  return outer * n * inner > 65536 ? lv_cpu_grain(outer, 1) : outer;
}

void lv_cpu_reduce_fwd(lv_kctx *ctx, int kind, int64_t outer, int64_t n, int64_t inner, const float *x, float *y) {
  red_job j = {.kind = kind, .n = n, .inner = inner, .x = x, .out = y};
  lv_cpu_par(ctx, outer, outer_grain(outer, n, inner), reduce_fwd_outer, &j);
}

LV_CPU_PAR_LOOP(reduce_bwd_outer, red_job, o, {
  const int64_t n = J->n, inner = J->inner;
  const float *go = J->gy + o * inner;
  float *gxo = J->out + o * n * inner;
  if (J->kind == LV_RED_MAX) {
    const float *xo = J->x + o * n * inner, *yo = J->y + o * inner;
    for (int64_t j = 0; j < inner; j++)
      for (int64_t i = 0; i < n; i++)
        if (xo[i * inner + j] == yo[j]) {
          gxo[i * inner + j] += go[j];
          break;
        }
  } else {
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < inner; j++) gxo[i * inner + j] += go[j] * J->sc;
  }
})

void lv_cpu_reduce_bwd(lv_kctx *ctx, int kind, int64_t outer, int64_t n, int64_t inner, const float *x,
                       const float *y, const float *gy, float *gx, bool acc) {
  if (!acc) memset(gx, 0, sizeof(float) * (size_t)(outer * n * inner));
  float sc = kind == LV_RED_MEAN && n > 0 ? 1.0f / (float)n : 1.0f;
  red_job j = {.kind = kind, .n = n, .inner = inner, .sc = sc, .x = x, .y = y, .gy = gy, .out = gx};
  lv_cpu_par(ctx, outer, outer_grain(outer, n, inner), reduce_bwd_outer, &j);
}
