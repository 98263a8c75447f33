/* Logging to stderr with a timestamp and level, like Lingvo's absl logging
 * ("I1121 20:15:05.123 trainer] step: ..."). Thread-safe (one fprintf per line). A thread
 * may send its lines elsewhere instead (lv_log_thread_sink): the library API
 * (src/api/) routes what its calls log to the caller's callback, or drops it. */
#ifndef LV_BASE_LOG_H
#define LV_BASE_LOG_H

#include <stdbool.h>

typedef enum { LV_LOG_DEBUG, LV_LOG_INFO, LV_LOG_WARN, LV_LOG_ERROR, LV_LOG_COUNT } lv_log_level;

void lv_log_set_level(lv_log_level min_level);

/* Where the calling thread's log lines go: sink(user, level, message) for each line of at
 * least min_level (the message without timestamp; NULL sink with quiet: none at all),
 * instead of stderr. Per thread, so a library call on one thread does not silence
 * another. lv_log_thread_sink_set returns the previous setting, which the caller restores
 * (lv_log_thread_sink_restore) before returning. */
typedef void (*lv_log_sink_fn)(void *user, lv_log_level level, const char *message);
typedef struct lv_log_sink {
  bool active; /* false: the process-wide stderr logging */
  lv_log_sink_fn fn; /* NULL with active: drop every line */
  void *user;
  lv_log_level min_level;
} lv_log_sink;
lv_log_sink lv_log_thread_sink_set(lv_log_sink sink);
void lv_log_thread_sink_restore(lv_log_sink previous);
void lv_log(lv_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* absl's verbose logging: lv_vlog(n, ...) prints (as an info line) when n <= the
 * verbosity of the calling source file: --vmodule's level for the first pattern that
 * matches the file's base name without extension (globs with * and ?), else --v. */
void lv_log_set_verbosity(int v);
/* "pattern=N,pattern=N"; an error message (static) for a malformed spec, else NULL. */
const char *lv_log_set_vmodule(const char *spec);
int lv_log_verbosity(const char *file);
void lv_vlog_at(const char *file, int n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define lv_vlog(n, ...) lv_vlog_at(__FILE__, (n), __VA_ARGS__)
#define lv_info(...) lv_log(LV_LOG_INFO, __VA_ARGS__)
#define lv_warn(...) lv_log(LV_LOG_WARN, __VA_ARGS__)
#define lv_error(...) lv_log(LV_LOG_ERROR, __VA_ARGS__)
#define lv_debug(...) lv_vlog(1, __VA_ARGS__)

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC) and wall-clock seconds. */
double lv_now_monotonic(void);
double lv_now_wall(void);

#endif
