/* Captioned thumbnails for image summaries (what Lingvo's classifier draws with
 * matplotlib: the image with its label and prediction under it). The image is scaled up
 * 2x and a caption band is drawn with a built-in 3x5 pixel font (digits, capital letters,
 * . - : / ( ) = ! and space); '\n' starts another caption line, and the image widens to
 * fit the longest line. */
#ifndef LV_IO_CAPTION_H
#define LV_IO_CAPTION_H

#include <stdint.h>

/* img: h*w*c uint8 (c = 1 or 3). Returns a malloc'd grayscale image (*oc = 1) of
 * (*oh) x (*ow) pixels. */
uint8_t *lv_caption_render(const uint8_t *img, int h, int w, int c, const char *text, int *oh, int *ow, int *oc);

#endif
