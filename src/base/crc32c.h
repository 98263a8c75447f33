/* CRC-32C (Castagnoli), as used by TFRecord, tensor bundles and LevelDB tables, plus
 * TensorFlow's masking (rotate right by 15, add 0xa282ead8). Uses SSE4.2 when the CPU
 * has it, a slicing-by-8 table otherwise. */
#ifndef LV_BASE_CRC32C_H
#define LV_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t lv_crc32c_extend(uint32_t crc, const void *data, size_t n);
static inline uint32_t lv_crc32c(const void *data, size_t n) { return lv_crc32c_extend(0, data, n); }
static inline uint32_t lv_crc32c_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
static inline uint32_t lv_crc32c_unmask(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

#endif
