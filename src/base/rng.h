/* Deterministic random numbers: Philox-4x32-10 counter-based generator. A stream is
 * (seed, stream id); the same seed gives the same numbers on every machine and thread
 * count, so a restarted run repeats an uninterrupted one. */
#ifndef LV_BASE_RNG_H
#define LV_BASE_RNG_H

#include <stdint.h>

typedef struct lv_rng {
  uint64_t key;     /* seed */
  uint64_t counter; /* advances by one per 4 draws */
  uint32_t buf[4];
  int avail;
} lv_rng;

void lv_rng_init(lv_rng *r, uint64_t seed, uint64_t stream);
uint32_t lv_rng_u32(lv_rng *r);
uint64_t lv_rng_u64(lv_rng *r);
/* Uniform in [0, 1). */
float lv_rng_uniform(lv_rng *r);
/* Standard normal (Box-Muller). */
float lv_rng_normal(lv_rng *r);
/* Uniform integer in [0, n). */
uint64_t lv_rng_below(lv_rng *r, uint64_t n);
/* Stateless: the i-th uniform [0,1) of (seed, stream) without a generator. */
float lv_rng_uniform_at(uint64_t seed, uint64_t stream, uint64_t i);
/* Mixes several values into one 64-bit seed (splitmix64). */
uint64_t lv_rng_mix(uint64_t a, uint64_t b);

#endif
