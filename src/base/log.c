#include "base/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static lv_log_level g_min_level = LV_LOG_INFO;
static const char kLevelChar[LV_LOG_COUNT] = {'D', 'I', 'W', 'E'};

void lv_log_set_level(lv_log_level min_level) { g_min_level = min_level; }

static _Thread_local lv_log_sink t_sink;

lv_log_sink lv_log_thread_sink_set(lv_log_sink sink) {
  lv_log_sink prev = t_sink;
  t_sink = sink;
  t_sink.active = true;
  return prev;
}

void lv_log_thread_sink_restore(lv_log_sink previous) { t_sink = previous; }

static int g_verbosity;
#define VMODULE_MAX 32
static struct {
  char pat[64];
  int level;
} g_vmodule[VMODULE_MAX];
static int g_nvmodule;

void lv_log_set_verbosity(int v) { g_verbosity = v; }

const char *lv_log_set_vmodule(const char *spec) {
  int n = 0;
  for (const char *p = spec; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    const char *eq = memchr(p, '=', len);
    if (!eq || eq == p) return "expected pattern=N entries separated by commas, e.g. trainer=2,check*=1";
    if ((size_t)(eq - p) >= sizeof g_vmodule[0].pat) return "a pattern is longer than 63 characters";
    char num[16];
    size_t nl = len - (size_t)(eq - p) - 1;
    if (nl == 0 || nl >= sizeof num) return "each pattern needs an integer level after '='";
    memcpy(num, eq + 1, nl);
    num[nl] = 0;
    char *end;
    long lvl = strtol(num, &end, 10);
    if (*end) return "each pattern needs an integer level after '='";
    if (n == VMODULE_MAX) return "more than 32 patterns";
    memcpy(g_vmodule[n].pat, p, (size_t)(eq - p));
    g_vmodule[n].pat[eq - p] = 0;
    g_vmodule[n].level = (int)lvl;
    n++;
    p += len + (comma != NULL);
  }
  g_nvmodule = n;
  return NULL;
}

static bool glob_match(const char *pat, const char *s) {
  if (!*pat) return !*s;
  if (*pat == '*') return glob_match(pat + 1, s) || (*s && glob_match(pat, s + 1));
  return *s && (*pat == '?' || *pat == *s) && glob_match(pat + 1, s + 1);
}

int lv_log_verbosity(const char *file) {
  if (!g_nvmodule) return g_verbosity;
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char mod[128];
  snprintf(mod, sizeof mod, "%s", base);
  char *dot = strrchr(mod, '.');
  if (dot) *dot = 0;
  for (int i = 0; i < g_nvmodule; i++)
    if (glob_match(g_vmodule[i].pat, mod)) return g_vmodule[i].level;
  return g_verbosity;
}

static void vlog(lv_log_level level, const char *fmt, va_list ap);

void lv_vlog_at(const char *file, int n, const char *fmt, ...) {
  if (n > lv_log_verbosity(file)) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(LV_LOG_INFO, fmt, ap);
  va_end(ap);
}

void lv_log(lv_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(level, fmt, ap);
  va_end(ap);
}

static void vlog(lv_log_level level, const char *fmt, va_list ap) {
  if (t_sink.active) {
    if (!t_sink.fn || level < t_sink.min_level) return;
    char line[4096];
    vsnprintf(line, sizeof line, fmt, ap);
    t_sink.fn(t_sink.user, level, line);
    return;
  }
  if (level < g_min_level) return;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char msg[4096];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fprintf(stderr, "%c%02d%02d %02d:%02d:%02d.%03d %s\n", kLevelChar[level], tm.tm_mon + 1,
          tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000), msg);
}

double lv_now_monotonic(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double lv_now_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
