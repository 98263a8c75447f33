/* Audio files to mono PCM for the speech frontend: libsndfile decodes WAV, FLAC, OGG and
 * whatever else it knows (from a path or from bytes already in memory, e.g. a tarball
 * member), channels are averaged into one (as `sox -c 1` mixes), and a rate other than
 * the wanted one is converted with libsoxr (high quality, one thread, so the samples do
 * not depend on the machine's core count). Samples come out in int16 range (a 16-bit
 * file gives its integers exactly), as Lingvo's decode_wav * 32768.
 *
 * A file libsndfile cannot open, a truncated one (its header promises more audio than
 * the file holds) and non-finite samples are LV_ERR_CORRUPT naming the file; a missing
 * file is LV_ERR_NOT_FOUND. An lv_audio owns its samples. */
#ifndef LV_AUDIO_AUDIO_FILE_H
#define LV_AUDIO_AUDIO_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct lv_audio {
  float *samples; /* [n] mono, int16 range, at `rate` */
  int64_t n;
  int rate;            /* Hz, after conversion */
  int source_rate;     /* Hz, as stored */
  int source_channels; /* as stored */
} lv_audio;

/* target_rate 0 keeps the file's rate. */
lv_status lv_audio_read_file(const char *path, int target_rate, lv_audio *out);
/* The same from the len bytes at data; name is the file's name in errors. */
lv_status lv_audio_decode(const void *data, size_t len, const char *name, int target_rate, lv_audio *out);
/* Resamples samples [n] from in_rate to out_rate into a malloc'd *out [*out_n]. */
lv_status lv_audio_resample(const float *samples, int64_t n, int in_rate, int out_rate, float **out,
                            int64_t *out_n);
void lv_audio_free(lv_audio *a);

#endif
