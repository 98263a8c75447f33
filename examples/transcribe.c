/* Transcribes audio files (WAV, FLAC, OGG) with a speech model, `path<TAB>text` each:
 *   transcribe -f MODEL_FILE FILE...            (a model file from bin/export)
 *   transcribe MODEL LOGDIR FILE...             (an experiment and its log directory) */
#include <lingvoc.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 4) return fprintf(stderr, "usage: transcribe MODEL LOGDIR|-f MODEL_FILE FILE...\n"), 2;
  lv_load_options o;
  lv_load_options_init(&o);
  const int file = !strcmp(argv[1], "-f");
  if (!file) o.model = argv[1], o.logdir = argv[2];
  lv_model *m = NULL;
  lv_status s = file ? lv_model_load_file(argv[2], &o, &m) : lv_model_load(&o, &m);
  lv_nbest *r = NULL;
  if (!s) s = lv_transcribe_files(m, NULL, (const char *const *)argv + 3, argc - 3, 1, &r);
  for (int i = 0; !s && i < r->n_items; i++) printf("%s\t%s\n", argv[3 + i], r->n[i] ? r->text[i][0] : "");
  int rc = s ? 1 : 0;
  if (s) fprintf(stderr, "transcribe: %s\n", lv_status_msg(s));
  lv_status_free(s);
  lv_nbest_free(r);
  lv_model_free(m);
  return rc;
}
