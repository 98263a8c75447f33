/* PNG decoding of 8-bit images with libpng (its simplified API), for the library's
 * lv_classify_files and bin/decoder --decode_images. */
#ifndef LV_IO_PNG_DECODE_H
#define LV_IO_PNG_DECODE_H

#include <stdint.h>

#include "base/status.h"

/* The PNG file path as [h, w, channels] uint8 (channels 1: gray, 3: RGB, 4: RGBA;
 * converted from whatever the file holds, 16-bit samples scaled to 8); *pixels is
 * malloc'd, the caller frees it. A file that is not a PNG, or a damaged one, is an error
 * naming it; so is an image over 16384 pixels a side. */
lv_status lv_png_decode_file(const char *path, int channels, int *h, int *w, uint8_t **pixels);

#endif
