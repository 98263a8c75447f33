/* PNG decoding (png_decode.h). */
#include "io/png_decode.h"

#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"

#define MAX_SIDE 16384

lv_status lv_png_decode_file(const char *path, int channels, int *h, int *w, uint8_t **pixels) {
  *pixels = NULL;
  *h = *w = 0;
  const png_uint_32 format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  if (channels != 1 && channels != 3 && channels != 4)
    return lv_status_make(LV_ERR_INVALID, "%s: %d channels: a PNG decodes to 1 (gray), 3 (RGB) or 4 (RGBA)", path,
                          channels);
  char *data = NULL;
  size_t len = 0;
  LV_TRY(lv_status_wrap(lv_file_read_all(path, &data, &len), "image"));
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, data, len)) {
    lv_status s = lv_status_make(LV_ERR_INVALID, "image %s: not a PNG libpng reads: %s", path, img.message);
    png_image_free(&img);
    free(data);
    return s;
  }
  if (img.width > MAX_SIDE || img.height > MAX_SIDE) {
    lv_status s = lv_status_make(LV_ERR_INVALID, "image %s: %ux%u pixels: over %d a side", path, img.width, img.height,
                                 MAX_SIDE);
    png_image_free(&img);
    free(data);
    return s;
  }
  img.format = format;
  uint8_t *out = malloc(PNG_IMAGE_SIZE(img) + 1);
  if (!out) {
    png_image_free(&img);
    free(data);
    return lv_status_make(LV_ERR_RESOURCE, "image %s: out of memory", path);
  }
  if (!png_image_finish_read(&img, NULL, out, 0, NULL)) {
    lv_status s = lv_status_make(LV_ERR_CORRUPT, "image %s: a damaged PNG: %s", path, img.message);
    png_image_free(&img);
    free(data);
    free(out);
    return s;
  }
  free(data);
  *h = (int)img.height;
  *w = (int)img.width;
  *pixels = out;
  return NULL;
}
