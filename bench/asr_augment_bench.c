/* The cost of AsrInput's waveform augmentation (audio/augment.h) per second of audio,
 * beside the log-mel frontend it feeds: a synthetic 5 s utterance at 16 kHz, each step
 * alone (speed 1.1 through libsoxr, reverberation of RT60 0.5 s (the longest response of
 * the synth_en experiments), white/pink/brown noise at 10 dB, gain) and all of them with
 * the draws of lv_augment_apply, REPS times each. Prints milliseconds per second of audio.
 * One thread, as AsrInput's batcher thread runs them. Usage: asr_augment_bench [REPS]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/augment.h"
#include "audio/mel_frontend.h"
#include "base/log.h"

#define N 80000 /* 5 s */

static double now(void) { return lv_now_monotonic(); }

int main(int argc, char **argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N * 2), *nz = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) x[i] = (float)(8000 * sin(2 * M_PI * 180 * i / 16000.0) * (0.6 + 0.4 * sin(i / 600.0)));
  lv_mel_frontend_opts fo = lv_mel_frontend_opts_librispeech();
  lv_mel_frontend *fe = NULL;
  lv_status s = lv_mel_frontend_create(&fo, &fe);
  float *frames = malloc(sizeof(float) * 600 * 80);
  lv_augment_opts o = {.rate = 16000, .n_speeds = 3, .speeds = {0.9, 1.0, 1.1}, .reverb = true, .rt60 = {0.1, 0.5},
                       .noise = true, .snr_db = {5, 25}, .n_colors = 3,
                       .colors = {LV_NOISE_WHITE, LV_NOISE_PINK, LV_NOISE_BROWN}, .gain = true,
                       .gain_db = {-6, 6}, .prob = 1};
  const char *names[] = {"frontend (log-mel)", "speed 1.1 (soxr HQ)", "reverb RT60 0.5 s", "noise white",
                         "noise pink", "noise brown", "gain", "all (apply, prob 1)"};
  for (int k = 0; !s && k < 8; k++) {
    double t0 = now();
    for (int r = 0; !s && r < reps; r++) {
      lv_rng rng;
      lv_rng_init(&rng, 3, (uint64_t)r);
      float *out = NULL, *h = NULL;
      int64_t m = 0;
      switch (k) {
        case 0: s = lv_mel_frontend_compute(fe, x, NULL, N, frames, NULL); break;
        case 1: s = lv_augment_speed(x, N, 16000, 1.1, &out, &m); break;
        case 2:
          s = lv_augment_rir(&rng, 0.5, 16000, &h, &m);
          if (!s) s = lv_augment_convolve(x, N, h, m, y);
          break;
        case 3: case 4: case 5:
          lv_augment_noise(&rng, (lv_noise_color)(k - 3), nz, N);
          memcpy(y, x, sizeof(float) * N);
          lv_augment_add_noise(y, N, nz, 10);
          break;
        case 6:
          for (int i = 0; i < N; i++) y[i] = x[i] * 1.5f;
          break;
        default: s = lv_augment_apply(&o, (uint64_t)r, x, N, &out, &m); break;
      }
      free(out);
      free(h);
    }
    double ms = (now() - t0) * 1000 / reps / (N / 16000.0);
    printf("%-22s %8.3f ms per second of audio\n", names[k], ms);
  }
  if (s) fprintf(stderr, "asr_augment_bench: %s\n", lv_status_msg(s));
  lv_mel_frontend_free(fe);
  free(frames);
  free(x);
  free(y);
  free(nz);
  return s ? 1 : 0;
}
