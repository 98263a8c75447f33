/* The time-major toy batch the language-model tests share: T steps of B sequences of
 * lengths kLens (each test file supplies its own ids and labels, sized to its
 * vocabulary). */
#ifndef LINGVOC_TESTS_LM_BATCH_UTIL_H_
#define LINGVOC_TESTS_LM_BATCH_UTIL_H_

#include "layer_fixture.h"

enum { T = 5, B = 3 };
static const int kLens[B] = {5, 3, 4};

/* [T, B] paddings: 1 past each sequence's length. */
static inline lv_tensor *paddings(lv_graph *g) {
  float p[T * B];
  for (int t = 0; t < T; t++)
    for (int b = 0; b < B; b++) p[t * B + b] = t < kLens[b] ? 0.0f : 1.0f;
  return lf_tensor(g, lv_shape2(T, B), p);
}

#endif
