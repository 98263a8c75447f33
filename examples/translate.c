/* Translates (or punctuates) the lines of stdin with a trained model, one line each:
 *   translate MODEL LOGDIR [CHECKPOINT [PARAMS_OVERRIDE]], or translate -f MODEL_FILE
 * e.g. translate mt.bible_en_es.TransformerSmall /tmp/mt/log <input.txt */
#include <lingvoc.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 3) return fprintf(stderr, "usage: %s MODEL LOGDIR|-f MODEL_FILE [CHECKPOINT [OVERRIDE]] <lines\n", argv[0]), 2;
  lv_load_options o;
  lv_load_options_init(&o);
  const int file = !strcmp(argv[1], "-f"); /* -f FILE: a model file (bin/export) */
  if (!file) o.model = argv[1], o.logdir = argv[2];
  if (argc > 3) o.checkpoint = argv[3];
  if (argc > 4) o.params_override = argv[4];
  lv_model *m = NULL;
  lv_status s = file ? lv_model_load_file(argv[2], &o, &m) : lv_model_load(&o, &m);
  char line[65536];
  while (!s && fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\r\n")] = 0;
    const char *src[1] = {line};
    lv_nbest *r = NULL;
    s = lv_translate(m, NULL, src, 1, 1, &r);
    if (!s) printf("%s\n", r->n[0] ? r->text[0][0] : "");
    lv_nbest_free(r);
  }
  int rc = s ? 1 : 0;
  if (s) fprintf(stderr, "translate: %s\n", lv_status_msg(s));
  lv_status_free(s);
  lv_model_free(m);
  return rc;
}
