#include "base/status.h"

#include <stdarg.h>
#include <string.h>

const char *const lv_code_names[LV_ERR_COUNT] = {
    "ok", "invalid", "not found", "corrupt", "io", "resource", "internal", "cancelled",
};

struct lv_status_s {
  lv_code code;
  char *msg;
};

static char *vformat(const char *fmt, va_list ap) {
  char *out = NULL;
  if (vasprintf(&out, fmt, ap) < 0) return NULL;
  return out;
}

lv_status lv_status_make(lv_code code, const char *fmt, ...) {
  LV_ASSERT(code != LV_OK && code < LV_ERR_COUNT);
  lv_status s = malloc(sizeof(*s));
  LV_ASSERT(s);
  va_list ap;
  va_start(ap, fmt);
  s->msg = vformat(fmt, ap);
  va_end(ap);
  LV_ASSERT(s->msg);
  s->code = code;
  return s;
}

lv_status lv_status_wrap(lv_status s, const char *fmt, ...) {
  if (!s) return NULL;
  va_list ap;
  va_start(ap, fmt);
  char *ctx = vformat(fmt, ap);
  va_end(ap);
  LV_ASSERT(ctx);
  char *msg = NULL;
  LV_ASSERT(asprintf(&msg, "%s: %s", ctx, s->msg) >= 0);
  free(ctx);
  free(s->msg);
  s->msg = msg;
  return s;
}

lv_code lv_status_code(lv_status s) { return s ? s->code : LV_OK; }
const char *lv_status_msg(lv_status s) { return s ? s->msg : "ok"; }

void lv_status_free(lv_status s) {
  if (!s) return;
  free(s->msg);
  free(s);
}

int lv_status_exit_code(lv_status s) {
  switch (lv_status_code(s)) {
    case LV_OK: return 0;
    case LV_ERR_INVALID:
    case LV_ERR_NOT_FOUND:
    case LV_ERR_CORRUPT: return 2;
    default: return 1;
  }
}

int lv_status_report(const char *prog, lv_status s) {
  int rc = lv_status_exit_code(s);
  if (s) fprintf(stderr, "%s: error: %s\n", prog, lv_status_msg(s));
  lv_status_free(s);
  return rc;
}
