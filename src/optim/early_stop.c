#include "optim/early_stop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/path.h"

lv_status lv_metric_history_file(const char *logdir, const lv_metric_history *h, char *out, size_t cap) {
  return lv_path_fmt(out, cap, "%s/%s/%s.history.txt", logdir, h->jobname, h->metric);
}

lv_status lv_metric_history_append(const char *path, int64_t step, double value) {
  char line[96];
  snprintf(line, sizeof line, "%lld %f", (long long)step, value);
  return lv_status_wrap(lv_file_append_line(path, line), "metric history %s", path);
}

typedef struct step_value {
  int64_t step;
  float value;
  int64_t order; /* line number: the first line of a step wins, as std::map::insert */
} step_value;

static int cmp_step(const void *a, const void *b) {
  const step_value *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

lv_status lv_best_step(const char *path, double tolerance, bool minimize, int64_t *best, int64_t *last) {
  *best = *last = 0;
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return NULL; /* no evaluation yet */
    return lv_status_make(LV_ERR_IO, "metric history %s: %s", path, strerror(errno));
  }
  step_value *sv = NULL;
  size_t n = 0, cap = 0;
  char *line = NULL;
  size_t lcap = 0;
  ssize_t len;
  int64_t lineno = 0;
  lv_status s = NULL;
  while (!s && (len = getline(&line, &lcap, f)) >= 0) {
    lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    char *sp = strchr(line, ' '), *end1 = NULL, *end2 = NULL;
    long long step = sp ? strtoll(line, &end1, 10) : 0;
    float v = sp ? strtof(sp + 1, &end2) : 0;
    if (!sp || end1 != sp || sp == line || strchr(sp + 1, ' ') || !end2 || end2 == sp + 1 || *end2) {
      s = lv_status_make(LV_ERR_INVALID, "metric history %s:%lld: expected \"STEP VALUE\", found \"%.60s\"", path,
                         (long long)lineno, line);
      break;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      step_value *p = realloc(sv, cap * sizeof *p);
      LV_ASSERT(p);
      sv = p;
    }
    sv[n++] = (step_value){step, minimize ? v : -v, lineno};
  }
  free(line);
  fclose(f);
  if (s) {
    free(sv);
    return s;
  }
  qsort(sv, n, sizeof *sv, cmp_step);
  const float tol = (float)tolerance;
  float best_val = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && sv[i].step == sv[i - 1].step) continue;
    *last = sv[i].step;
    if (*best == 0 || sv[i].value + tol < best_val) {
      *best = sv[i].step;
      best_val = sv[i].value;
    }
  }
  free(sv);
  return NULL;
}

bool lv_early_stop_triggered(const lv_early_stop_config *c, int64_t best, int64_t last) {
  return c->window > 0 && last - best > c->window && last >= c->min_steps;
}
