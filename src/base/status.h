/* Recoverable errors. A function that can fail returns lv_status: NULL means success,
 * anything else is a heap-allocated error the caller owns (free it with
 * lv_status_free, or pass it up). Messages carry their context ("file:line: key: ...");
 * lv_status_wrap prepends more context as the error travels up. Only a main turns a
 * status into an exit code (lv_status_exit_code). Programmer errors use LV_ASSERT. */
#ifndef LV_BASE_STATUS_H
#define LV_BASE_STATUS_H

#include <stdio.h>
#include <stdlib.h>

typedef enum {
  LV_OK = 0,
  LV_ERR_INVALID,   /* bad argument, config, flag: the user must change something */
  LV_ERR_NOT_FOUND, /* a file, key, model or dataset that does not exist */
  LV_ERR_CORRUPT,   /* an untrusted file failed validation (crc, bounds, format) */
  LV_ERR_IO,        /* the OS refused (permissions, disk full) */
  LV_ERR_RESOURCE,  /* out of memory / arena exhausted */
  LV_ERR_INTERNAL,  /* a bug or an unexpected state */
  LV_ERR_CANCELLED, /* interrupted by a signal */
  LV_ERR_COUNT
} lv_code;

extern const char *const lv_code_names[LV_ERR_COUNT];

typedef struct lv_status_s *lv_status;

lv_status lv_status_make(lv_code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Returns s with "<context>: " prepended; NULL stays NULL. */
lv_status lv_status_wrap(lv_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
lv_code lv_status_code(lv_status s);
const char *lv_status_msg(lv_status s);
void lv_status_free(lv_status s);
/* 0 ok; 2 for invalid/not-found/corrupt input (the user's to fix); 1 otherwise. */
int lv_status_exit_code(lv_status s);
/* Prints "prog: error: msg" to stderr, frees s, returns the exit code. */
int lv_status_report(const char *prog, lv_status s);

#define LV_TRY(expr)                 \
  do {                               \
    lv_status lv_try_s_ = (expr);    \
    if (lv_try_s_) return lv_try_s_; \
  } while (0)

#define LV_ASSERT(cond)                                                        \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: internal error: assertion failed: %s\n",       \
              __FILE__, __LINE__, #cond);                                      \
      abort();                                                                 \
    }                                                                          \
  } while (0)

#define LV_ASSERTF(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: internal error: ", __FILE__, __LINE__);         \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      abort();                                                                 \
    }                                                                          \
  } while (0)

#define LV_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
