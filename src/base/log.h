/* Logging to stderr with a timestamp and level, like Lingvo's absl logging
 * ("I1121 20:15:05.123 trainer] step: ..."). Thread-safe (one fprintf per line). */
#ifndef LV_BASE_LOG_H
#define LV_BASE_LOG_H

typedef enum { LV_LOG_DEBUG, LV_LOG_INFO, LV_LOG_WARN, LV_LOG_ERROR, LV_LOG_COUNT } lv_log_level;

void lv_log_set_level(lv_log_level min_level);
void lv_log(lv_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define lv_info(...) lv_log(LV_LOG_INFO, __VA_ARGS__)
#define lv_warn(...) lv_log(LV_LOG_WARN, __VA_ARGS__)
#define lv_error(...) lv_log(LV_LOG_ERROR, __VA_ARGS__)
#define lv_debug(...) lv_log(LV_LOG_DEBUG, __VA_ARGS__)

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC) and wall-clock seconds. */
double lv_now_monotonic(void);
double lv_now_wall(void);

#endif
