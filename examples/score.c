/* Scores each line of a file with a language model: `log-prob<TAB>tokens` per line, then
 * the per-token log-probabilities with -v.
 *   score [-v] MODEL LOGDIR FILE [CHECKPOINT [PARAMS_OVERRIDE]]
 *   score [-v] -f MODEL_FILE FILE (a model file from bin/export) */
#include <lingvoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  int verbose = argc > 1 && !strcmp(argv[1], "-v");
  argv += verbose, argc -= verbose;
  if (argc < 4) return fprintf(stderr, "usage: score [-v] MODEL LOGDIR|-f MODEL_FILE FILE [CHECKPOINT [OVERRIDE]]\n"), 2;
  FILE *f = fopen(argv[3], "r");
  if (!f) return perror(argv[3]), 1;
  lv_load_options o;
  lv_load_options_init(&o);
  const int file = !strcmp(argv[1], "-f"); /* -f FILE: a model file (bin/export) */
  if (!file) o.model = argv[1], o.logdir = argv[2];
  if (argc > 4) o.checkpoint = argv[4];
  if (argc > 5) o.params_override = argv[5];
  lv_model *m = NULL;
  lv_status s = file ? lv_model_load_file(argv[2], &o, &m) : lv_model_load(&o, &m);
  char line[65536];
  while (!s && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    const char *lines[1] = {line};
    lv_scores *r = NULL;
    s = lv_score_text(m, NULL, lines, 1, &r);
    if (s) break;
    printf("%.6f\t%d", r->logprob[0], r->n_tokens[0]);
    for (int i = 0; verbose && i < r->n_tokens[0]; i++) printf("%s%.4f", i ? " " : "\t", r->token_logprob[0][i]);
    printf("\n");
    lv_scores_free(r);
  }
  fclose(f);
  int rc = s ? 1 : 0;
  if (s) fprintf(stderr, "score: %s\n", lv_status_msg(s));
  lv_status_free(s);
  lv_model_free(m);
  return rc;
}
