/* Classifies raw uint8 images (N images of HxWxC bytes, concatenated in FILE): one line
 * `index<TAB>class<TAB>probability` each.
 *   classify MODEL LOGDIR H W C FILE [CHECKPOINT [PARAMS_OVERRIDE]]
 *   classify -f MODEL_FILE H W C FILE (a model file from bin/export) */
#include <lingvoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 7) return fprintf(stderr, "usage: classify MODEL LOGDIR|-f MODEL_FILE H W C FILE [CHECKPOINT [OVERRIDE]]\n"), 2;
  const int h = atoi(argv[3]), w = atoi(argv[4]), c = atoi(argv[5]);
  const long per = (long)h * w * c;
  FILE *f = fopen(argv[6], "rb");
  if (!f || per <= 0) return fprintf(stderr, "classify: cannot read %s as %dx%dx%d images\n", argv[6], h, w, c), 2;
  unsigned char *data = NULL;
  long n = 0;
  for (unsigned char *grown; (grown = realloc(data, (size_t)((n + 1) * per))); n++)
    if (data = grown, fread(data + n * per, 1, (size_t)per, f) != (size_t)per) break;
  fclose(f);
  lv_load_options o;
  lv_load_options_init(&o);
  const int file = !strcmp(argv[1], "-f"); /* -f FILE: a model file (bin/export) */
  if (!file) o.model = argv[1], o.logdir = argv[2];
  if (argc > 7) o.checkpoint = argv[7];
  if (argc > 8) o.params_override = argv[8];
  lv_model *m = NULL;
  lv_class_probs *r = NULL;
  lv_status s = file ? lv_model_load_file(argv[2], &o, &m) : lv_model_load(&o, &m);
  if (!s) s = lv_classify(m, NULL, data, (int)n, h, w, c, &r);
  for (int i = 0; !s && i < r->n; i++) {
    int best = 0;
    for (int k = 1; k < r->num_classes; k++)
      if (r->probs[i * r->num_classes + k] > r->probs[i * r->num_classes + best]) best = k;
    printf("%d\t%d\t%.6f\n", i, best, r->probs[i * r->num_classes + best]);
  }
  int rc = s ? 1 : 0;
  if (s) fprintf(stderr, "classify: %s\n", lv_status_msg(s));
  lv_status_free(s);
  lv_class_probs_free(r);
  lv_model_free(m);
  free(data);
  return rc;
}
