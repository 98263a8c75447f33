/* The log-mel frontend's speed (bench/bench_asr_frontend.sh): the files named on the
 * command line are read and resampled to 16 kHz first (not timed); then each run computes
 * the LibriSpeech features (80 bins, 25 ms / 10 ms, noise 0: create_asr_features'
 * frontend) of every file REPS times. Prints one line per run: seconds and the audio
 * seconds they covered. One thread (the frontend has none of its own). */
#include <stdio.h>
#include <stdlib.h>

#include "audio/audio_file.h"
#include "audio/mel_frontend.h"
#include "base/log.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s RUNS REPS FILE...\n", argv[0]);
    return 2;
  }
  const int runs = atoi(argv[1]), reps = atoi(argv[2]), nf = argc - 3;
  lv_audio *a = calloc((size_t)nf, sizeof *a);
  double secs = 0;
  int64_t maxf = 0;
  lv_mel_frontend_opts o = lv_mel_frontend_opts_librispeech();
  lv_mel_frontend *fe = NULL;
  lv_status s = lv_mel_frontend_create(&o, &fe);
  for (int i = 0; !s && i < nf; i++) {
    s = lv_audio_read_file(argv[3 + i], 16000, &a[i]);
    if (s) break;
    secs += (double)a[i].n / a[i].rate;
    int64_t t = lv_mel_frontend_num_frames(fe, a[i].n);
    if (t > maxf) maxf = t;
  }
  if (s) {
    fprintf(stderr, "%s\n", lv_status_msg(s));
    return 1;
  }
  float *out = malloc(sizeof(float) * (size_t)(maxf * lv_mel_frontend_output_dim(fe) + 1));
  double check = 0;
  for (int r = 0; r < runs; r++) {
    double t0 = lv_now_monotonic();
    for (int k = 0; k < reps; k++)
      for (int i = 0; i < nf; i++) {
        s = lv_mel_frontend_compute(fe, a[i].samples, NULL, a[i].n, out, NULL);
        if (s) {
          fprintf(stderr, "%s\n", lv_status_msg(s));
          return 1;
        }
        check += out[0];
      }
    printf("lingvoc %.6f %.3f\n", lv_now_monotonic() - t0, secs * reps);
  }
  fprintf(stderr, "checksum %g\n", check);
  for (int i = 0; i < nf; i++) lv_audio_free(&a[i]);
  free(a);
  free(out);
  lv_mel_frontend_free(fe);
  return 0;
}
