/* PNG encoding into memory with libpng (write callback appends to a growing buffer;
 * libpng reports errors by longjmp, caught here and turned into a status). */
#include "io/png_encode.h"

#include <png.h>
#include <string.h>

typedef struct {
  uint8_t *data;
  size_t len, cap;
} membuf;

static void write_cb(png_structp png, png_bytep data, png_size_t n) {
  membuf *m = png_get_io_ptr(png);
  if (m->len + n > m->cap) {
    size_t cap = m->cap ? m->cap : 4096;
    while (cap < m->len + n) cap *= 2;
    uint8_t *p = realloc(m->data, cap);
    if (!p) png_error(png, "out of memory");
    m->data = p;
    m->cap = cap;
  }
  memcpy(m->data + m->len, data, n);
  m->len += n;
}

static void flush_cb(png_structp png) { (void)png; }

lv_status lv_png_encode(int h, int w, int c, const uint8_t *pixels, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                               PNG_COLOR_TYPE_RGBA};
  if (h <= 0 || w <= 0 || c < 1 || c > 4 || (int64_t)w * c > INT32_MAX / 2)
    return lv_status_make(LV_ERR_INVALID, "png: bad image shape [%d, %d, %d] (want h, w > 0, c in 1..4)", h, w, c);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  if (!png) return lv_status_make(LV_ERR_RESOURCE, "png: cannot create write struct");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, NULL);
    return lv_status_make(LV_ERR_RESOURCE, "png: cannot create info struct");
  }
  /* Heap-allocated so that the buffer written by the callback survives a longjmp. */
  membuf *m = calloc(1, sizeof(membuf));
  LV_ASSERT(m);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    free(m->data);
    free(m);
    return lv_status_make(LV_ERR_RESOURCE, "png: libpng failed encoding a [%d, %d, %d] image", h, w, c);
  }
  png_set_write_fn(png, m, write_cb, flush_cb);
  /* Summaries are written often and read rarely: favour encoding speed. */
  png_set_compression_level(png, 3);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, types[c], PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; y++) png_write_row(png, (png_const_bytep)(pixels + (size_t)y * (size_t)w * (size_t)c));
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  *out = m->data;
  *len = m->len;
  free(m);
  return NULL;
}
