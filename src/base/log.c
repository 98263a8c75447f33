#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static lv_log_level g_min_level = LV_LOG_INFO;
static const char kLevelChar[LV_LOG_COUNT] = {'D', 'I', 'W', 'E'};

void lv_log_set_level(lv_log_level min_level) { g_min_level = min_level; }

void lv_log(lv_log_level level, const char *fmt, ...) {
  if (level < g_min_level) return;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
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
