#include "io/caption.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

/* 3x5 glyphs, one row per 3-bit number (bit 2 = left column); letters print as capitals. */
static const struct {
  char ch;
  uint8_t rows[5];
} kFont[] = {
    {'0', {7, 5, 5, 5, 7}}, {'1', {2, 6, 2, 2, 7}}, {'2', {7, 1, 7, 4, 7}}, {'3', {7, 1, 7, 1, 7}},
    {'4', {5, 5, 7, 1, 1}}, {'5', {7, 4, 7, 1, 7}}, {'6', {7, 4, 7, 5, 7}}, {'7', {7, 1, 1, 1, 1}},
    {'8', {7, 5, 7, 5, 7}}, {'9', {7, 5, 7, 1, 7}}, {'A', {2, 5, 7, 5, 5}}, {'B', {6, 5, 6, 5, 6}},
    {'C', {3, 4, 4, 4, 3}}, {'D', {6, 5, 5, 5, 6}}, {'E', {7, 4, 6, 4, 7}}, {'F', {7, 4, 6, 4, 4}},
    {'G', {3, 4, 5, 5, 3}}, {'H', {5, 5, 7, 5, 5}}, {'I', {7, 2, 2, 2, 7}}, {'J', {1, 1, 1, 5, 2}},
    {'K', {5, 5, 6, 5, 5}}, {'L', {4, 4, 4, 4, 7}}, {'M', {5, 7, 7, 5, 5}}, {'N', {6, 5, 5, 5, 5}},
    {'O', {2, 5, 5, 5, 2}}, {'P', {6, 5, 6, 4, 4}}, {'Q', {2, 5, 5, 6, 3}}, {'R', {6, 5, 6, 5, 5}},
    {'S', {3, 4, 2, 1, 6}}, {'T', {7, 2, 2, 2, 2}}, {'U', {5, 5, 5, 5, 7}}, {'V', {5, 5, 5, 5, 2}},
    {'W', {5, 5, 7, 7, 5}}, {'X', {5, 5, 2, 5, 5}}, {'Y', {5, 5, 2, 2, 2}}, {'Z', {7, 1, 2, 4, 7}},
    {'.', {0, 0, 0, 0, 2}}, {'-', {0, 0, 7, 0, 0}}, {':', {0, 2, 0, 2, 0}}, {'/', {1, 1, 2, 4, 4}},
    {'(', {1, 2, 2, 2, 1}}, {')', {4, 2, 2, 2, 4}}, {'=', {0, 7, 0, 7, 0}}, {'!', {2, 2, 2, 0, 2}},
    {' ', {0, 0, 0, 0, 0}},
};

static const uint8_t *glyph(char ch) {
  for (size_t i = 0; i < LV_ARRAY_LEN(kFont); i++)
    if (kFont[i].ch == (char)toupper((unsigned char)ch)) return kFont[i].rows;
  return kFont[LV_ARRAY_LEN(kFont) - 1].rows;
}

uint8_t *lv_caption_render(const uint8_t *img, int h, int w, int c, const char *text, int *oh, int *ow, int *oc) {
  const int scale = 2, line_h = 7 * scale, glyph_w = 4 * scale;
  /* Lines split at '\n'; the widest sets the width. */
  int nlines = 1, longest = 0, cur = 0;
  for (const char *p = text; *p; p++) {
    if (*p == '\n') nlines++, cur = 0;
    else if (++cur > longest) longest = cur;
  }
  int width = w * scale;
  if (longest * glyph_w + 4 > width) width = longest * glyph_w + 4;
  int band = nlines * line_h;
  int height = h * scale + band;
  uint8_t *out = calloc((size_t)width * (size_t)height, 1);
  LV_ASSERT(out);
  int x0 = (width - w * scale) / 2;
  for (int y = 0; y < h * scale; y++)
    for (int x = 0; x < w * scale; x++) {
      const uint8_t *px = img + ((size_t)(y / scale) * (size_t)w + (size_t)(x / scale)) * (size_t)c;
      out[(size_t)y * (size_t)width + (size_t)(x0 + x)] = c == 3 ? (uint8_t)((px[0] * 77 + px[1] * 150 + px[2] * 29) >> 8) : px[0];
    }
  /* Caption band: white background, black glyphs, each line centred. */
  for (int y = h * scale; y < height; y++) memset(out + (size_t)y * (size_t)width, 255, (size_t)width);
  const char *line = text;
  for (int li = 0; li < nlines; li++) {
    int len = (int)strcspn(line, "\n");
    int tx = (width - len * glyph_w) / 2, ty = h * scale + 2 + li * line_h;
    for (int i = 0; i < len; i++) {
      const uint8_t *g = glyph(line[i]);
      for (int r = 0; r < 5; r++)
        for (int col = 0; col < 3; col++) {
          if (!(g[r] & (4 >> col))) continue;
          for (int dy = 0; dy < scale; dy++)
            for (int dx = 0; dx < scale; dx++)
              out[(size_t)(ty + r * scale + dy) * (size_t)width + (size_t)(tx + i * glyph_w + col * scale + dx)] = 0;
        }
    }
    line += len + (line[len] == '\n');
  }
  *oh = height;
  *ow = width;
  *oc = 1;
  return out;
}
