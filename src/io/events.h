/* TensorBoard event files: <dir>/events.out.tfevents.<unix time>.<hostname>, TFRecord
 * framing of tensorflow.Event protos (event.proto / summary.proto); the first event has
 * file_version "brain.Event:2". Scalars are Summary.Value.simple_value, images
 * Summary.Image (PNG), text a TF2 text-plugin tensor summary (DT_STRING scalar, metadata
 * plugin_name "text"), histograms HistogramProto with TensorFlow's default buckets.
 *
 * The summary calls are cheap and never block on I/O: they copy their arguments into a
 * queue; a background thread serializes, encodes PNGs and writes. The thread flushes
 * (fflush + fsync) every flush_secs and on lv_events_flush / close, so a killed process
 * leaves a file that readers can read up to the last flush. All calls are thread-safe.
 * A write error is kept and returned by the next lv_events_flush / close; later summaries
 * are dropped. The writer owns its thread and file; close joins and frees. */
#ifndef LV_IO_EVENTS_H
#define LV_IO_EVENTS_H

#include <stdint.h>

#include "base/status.h"

#define LV_EVENTS_FILE_VERSION "brain.Event:2"

typedef struct lv_events_writer lv_events_writer;

/* Creates dir if needed. flush_secs <= 0 means 120 s (TensorFlow's default). */
lv_status lv_events_writer_open(const char *dir, double flush_secs, lv_events_writer **out);
const char *lv_events_writer_path(const lv_events_writer *w);
void lv_events_scalar(lv_events_writer *w, const char *tag, int64_t step, double value);
/* pixels: [h, wdt, c] uint8, c = 1 or 3; copied before returning. */
void lv_events_image(lv_events_writer *w, const char *tag, int64_t step, int h, int wdt, int c,
                     const uint8_t *pixels);
void lv_events_text(lv_events_writer *w, const char *tag, int64_t step, const char *text);
/* vals: [n]; NaNs are left out of the histogram, +-inf count in the outermost buckets. */
void lv_events_histogram(lv_events_writer *w, const char *tag, int64_t step, const float *vals, int64_t n);
/* Blocks until everything queued before the call is written and fsync'ed. */
lv_status lv_events_flush(lv_events_writer *w);
/* Flushes, joins the thread, closes the file and frees w (also on error). */
lv_status lv_events_writer_close(lv_events_writer *w);

/* Reading event files back (tests, tools): one visit per summary value, plus one for the
 * file_version event. Pointers are valid only during the callback. */
typedef enum {
  LV_EVENTS_KIND_FILE_VERSION,
  LV_EVENTS_KIND_SCALAR,    /* simple_value */
  LV_EVENTS_KIND_IMAGE,     /* data/len = encoded image, h/w/c */
  LV_EVENTS_KIND_TEXT,      /* data/len = the string of a DT_STRING tensor */
  LV_EVENTS_KIND_HISTOGRAM, /* hist_num, hist_sum, value = hist_min, value2 = hist_max */
  LV_EVENTS_KIND_OTHER,     /* anything else (graphs, audio, other tensors, session logs) */
  LV_EVENTS_KIND_COUNT
} lv_events_kind;

extern const char *const lv_events_kind_names[LV_EVENTS_KIND_COUNT];

typedef struct {
  lv_events_kind kind;
  int64_t step;
  double wall_time;
  const char *tag;          /* "" for the file_version event */
  const char *file_version; /* LV_EVENTS_KIND_FILE_VERSION only */
  double value, value2;
  const uint8_t *data;
  size_t len;
  int h, w, c;
  double hist_num, hist_sum;
} lv_events_record;

/* Return non-NULL to stop reading; that status is returned by lv_events_read_file. */
typedef lv_status (*lv_events_visit_fn)(const lv_events_record *rec, void *ctx);
/* Checks the framing (LV_ERR_CORRUPT with path and offset) and decodes every Event. */
lv_status lv_events_read_file(const char *path, lv_events_visit_fn fn, void *ctx);

/* TensorFlow's default histogram bucket limits (-DBL_MAX..., 0, ...DBL_MAX, growing by
 * 1.1 from 1e-12 to 1e20). Returns a static array; *n receives its length. */
const double *lv_events_default_bucket_limits(int *n);

#endif
