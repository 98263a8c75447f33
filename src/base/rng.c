#include "base/rng.h"

#include <math.h>

uint64_t lv_rng_mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void lv_rng_init(lv_rng *r, uint64_t seed, uint64_t stream) {
  r->key = lv_rng_mix(seed, stream);
  r->counter = 0;
  r->avail = 0;
}

uint32_t lv_rng_u32(lv_rng *r) {
  if (r->avail == 0) {
    lv_philox4x32(r->key, 0, r->counter++, r->buf);
    r->avail = 4;
  }
  return r->buf[4 - r->avail--];
}

uint64_t lv_rng_u64(lv_rng *r) {
  uint64_t hi = lv_rng_u32(r);
  return (hi << 32) | lv_rng_u32(r);
}

float lv_rng_uniform(lv_rng *r) { return (lv_rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

float lv_rng_normal(lv_rng *r) {
  float u1 = lv_rng_uniform(r), u2 = lv_rng_uniform(r);
  if (u1 < 1e-7f) u1 = 1e-7f;
  return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

uint64_t lv_rng_below(lv_rng *r, uint64_t n) {
  if (n <= 1) return 0;
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t v;
  do v = lv_rng_u64(r);
  while (v >= limit);
  return v % n;
}

float lv_rng_uniform_at(uint64_t seed, uint64_t stream, uint64_t i) {
  uint32_t out[4];
  lv_philox4x32(lv_rng_mix(seed, stream), 0, i / 4, out);
  return (out[i % 4] >> 8) * (1.0f / 16777216.0f);
}
