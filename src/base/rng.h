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
/* Philox-4x32-10: the four 32-bit outputs of counter (ctr_hi, ctr_lo) under key. The one
 * definition behind lv_rng_* and the dropout kernel, so masks match element by element. */
static inline void lv_philox4x32(uint64_t key, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32), c2 = (uint32_t)ctr_hi,
           c3 = (uint32_t)(ctr_hi >> 32);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int i = 0; i < 10; i++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}
/* Mixes several values into one 64-bit seed (splitmix64). */
uint64_t lv_rng_mix(uint64_t a, uint64_t b);

#endif
