/* PNG encoding of 8-bit images with libpng, for TensorBoard image summaries. */
#ifndef LV_IO_PNG_ENCODE_H
#define LV_IO_PNG_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* pixels: [h, w, c] uint8, row-major; c = 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA).
 * *out is malloc'd; the caller frees it. */
lv_status lv_png_encode(int h, int w, int c, const uint8_t *pixels, uint8_t **out, size_t *len);

#endif
