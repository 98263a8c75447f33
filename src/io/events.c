/* TensorBoard event writer: callers append to a locked queue; one background thread
 * serializes Event protos (protobuf-c), encodes PNGs, computes histograms and writes
 * TFRecords. The caller's cost is a copy of its arguments, one malloc and one uncontended
 * lock; the thread is woken only when the queue grows large, on flush and on close, and
 * otherwise sleeps until the next periodic flush. */
#include "io/events.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"
#include "event.pb-c.h"
#include "io/png_encode.h"
#include "io/tfrecord.h"
#include "summary.pb-c.h"
#include "tensor.pb-c.h"

/* Queue length at which a caller wakes the thread, bounding queued memory. */
#define WAKE_AT 1024

typedef enum { ITEM_SCALAR, ITEM_IMAGE, ITEM_TEXT, ITEM_HISTO } item_kind;

typedef struct item {
  struct item *next;
  item_kind kind;
  int64_t step;
  double wall;
  double value;
  int h, w, c;
  int64_t n;
  void *payload; /* image pixels, text, or histogram values */
  char tag[];
} item;

struct lv_events_writer {
  lv_tfrecord_writer *rec;
  char *path;
  double flush_secs;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t wake; /* to the thread */
  pthread_cond_t done; /* to flushers */
  item *head, *tail;
  int64_t queued;
  uint64_t flush_req, flush_done;
  bool stop;
  lv_code err_code; /* first write error, LV_OK if none */
  char *err_msg;
  /* thread-only */
  uint8_t *buf;
  size_t buf_cap;
};

/* ---- default histogram buckets (TensorFlow's histogram.cc InitDefaultBuckets) ---- */

static double *g_limits;
static int g_nlimits;
static pthread_once_t g_limits_once = PTHREAD_ONCE_INIT;

static void init_limits(void) {
  int npos = 0;
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) npos++;
  g_nlimits = 2 * (npos + 1) + 1;
  g_limits = malloc((size_t)g_nlimits * sizeof(double));
  LV_ASSERT(g_limits);
  double *pos = g_limits + npos + 2;
  int k = 0;
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) pos[k++] = v;
  pos[k] = DBL_MAX;
  for (int i = 0; i <= npos; i++) g_limits[i] = -pos[npos - i];
  g_limits[npos + 1] = 0.0;
}

const double *lv_events_default_bucket_limits(int *n) {
  pthread_once(&g_limits_once, init_limits);
  *n = g_nlimits;
  return g_limits;
}

/* ---- background thread ---- */

static void set_error(lv_events_writer *w, lv_status s) {
  if (!s) return;
  pthread_mutex_lock(&w->mu);
  if (w->err_code == LV_OK) {
    w->err_code = lv_status_code(s);
    w->err_msg = strdup(lv_status_msg(s));
    LV_ASSERT(w->err_msg);
  }
  pthread_mutex_unlock(&w->mu);
  lv_status_free(s);
}

static lv_status write_event(lv_events_writer *w, const Tensorflow__Event *ev) {
  size_t n = tensorflow__event__get_packed_size(ev);
  if (n > w->buf_cap) {
    size_t cap = w->buf_cap ? w->buf_cap : 4096;
    while (cap < n) cap *= 2;
    w->buf = realloc(w->buf, cap);
    LV_ASSERT(w->buf);
    w->buf_cap = cap;
  }
  size_t got = tensorflow__event__pack(ev, w->buf);
  if (got != n) return lv_status_make(LV_ERR_INTERNAL, "%s: protobuf-c packed %zu bytes, expected %zu", w->path, got, n);
  return lv_tfrecord_writer_write(w->rec, w->buf, n);
}

/* Histogram as TensorFlow's Histogram::EncodeToProto(preserve_zero_buckets=false): runs
 * of empty buckets collapse into one entry at the run's last limit. */
static void fill_histo(Tensorflow__HistogramProto *hp, const float *vals, int64_t n, double **limits_out,
                       double **counts_out) {
  int nl;
  const double *lim = lv_events_default_bucket_limits(&nl);
  double *cnt = calloc((size_t)nl, sizeof(double));
  LV_ASSERT(cnt);
  double mn = DBL_MAX, mx = -DBL_MAX, num = 0, sum = 0, sumsq = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = vals[i];
    if (isnan(v)) continue;
    /* upper_bound: first limit > v. */
    int lo = 0, hi = nl;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (lim[mid] > v) hi = mid; else lo = mid + 1;
    }
    if (lo >= nl) lo = nl - 1;
    cnt[lo] += 1;
    if (v < mn) mn = v;
    if (v > mx) mx = v;
    num += 1;
    sum += v;
    sumsq += v * v;
  }
  double *ol = malloc((size_t)nl * sizeof(double)), *oc = malloc((size_t)nl * sizeof(double));
  LV_ASSERT(ol && oc);
  size_t k = 0;
  for (int i = 0; i < nl;) {
    double end = lim[i], count = cnt[i];
    int j = i + 1;
    while (count == 0.0 && j < nl && cnt[j] == 0.0) {
      end = lim[j];
      count = cnt[j];
      j++;
    }
    ol[k] = end;
    oc[k] = count;
    k++;
    i = j;
  }
  free(cnt);
  hp->min = mn;
  hp->max = mx;
  hp->num = num;
  hp->sum = sum;
  hp->sum_squares = sumsq;
  hp->n_bucket_limit = hp->n_bucket = k;
  hp->bucket_limit = ol;
  hp->bucket = oc;
  *limits_out = ol;
  *counts_out = oc;
}

static lv_status write_item(lv_events_writer *w, const item *it) {
  Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
  Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
  Tensorflow__Summary__Value val = TENSORFLOW__SUMMARY__VALUE__INIT;
  Tensorflow__Summary__Value *vals[1] = {&val};
  Tensorflow__Summary__Image img = TENSORFLOW__SUMMARY__IMAGE__INIT;
  Tensorflow__HistogramProto hp = TENSORFLOW__HISTOGRAM_PROTO__INIT;
  Tensorflow__TensorProto tp = TENSORFLOW__TENSOR_PROTO__INIT;
  Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
  Tensorflow__SummaryMetadata md = TENSORFLOW__SUMMARY_METADATA__INIT;
  Tensorflow__SummaryMetadata__PluginData pd = TENSORFLOW__SUMMARY_METADATA__PLUGIN_DATA__INIT;
  ProtobufCBinaryData str;
  uint8_t *png = NULL;
  double *hl = NULL, *hc = NULL;
  lv_status s = NULL;

  ev.wall_time = it->wall;
  ev.step = it->step;
  ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
  ev.summary = &sum;
  sum.n_value = 1;
  sum.value = vals;
  val.tag = (char *)it->tag;
  switch (it->kind) {
    case ITEM_SCALAR:
      val.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
      val.simple_value = (float)it->value;
      break;
    case ITEM_IMAGE: {
      size_t len;
      s = lv_png_encode(it->h, it->w, it->c, it->payload, &png, &len);
      if (s) return lv_status_wrap(s, "%s: image summary '%s' at step %lld", w->path, it->tag, (long long)it->step);
      img.height = it->h;
      img.width = it->w;
      img.colorspace = it->c;
      img.encoded_image_string.data = png;
      img.encoded_image_string.len = len;
      val.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_IMAGE;
      val.image = &img;
      break;
    }
    case ITEM_TEXT:
      /* TensorBoard's text plugin (TF2 tf.summary.text): a scalar DT_STRING tensor whose
       * metadata names the plugin; content is TextPluginData{version 0}, i.e. empty. */
      str.data = it->payload;
      str.len = strlen(it->payload);
      tp.dtype = TENSORFLOW__DATA_TYPE__DT_STRING;
      tp.tensor_shape = &shape;
      tp.n_string_val = 1;
      tp.string_val = &str;
      pd.plugin_name = "text";
      md.plugin_data = &pd;
      md.data_class = TENSORFLOW__DATA_CLASS__DATA_CLASS_TENSOR;
      val.metadata = &md;
      val.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR;
      val.tensor = &tp;
      break;
    case ITEM_HISTO:
      fill_histo(&hp, it->payload, it->n, &hl, &hc);
      val.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO;
      val.histo = &hp;
      break;
  }
  s = write_event(w, &ev);
  free(png);
  free(hl);
  free(hc);
  return s;
}

static void free_item(item *it) {
  free(it->payload);
  free(it);
}

static void *writer_thread(void *arg) {
  lv_events_writer *w = arg;
  double next_flush = lv_now_monotonic() + w->flush_secs;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->stop && w->flush_req == w->flush_done && w->queued < WAKE_AT) {
      double now = lv_now_monotonic();
      if (now >= next_flush) break;
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      double wait = next_flush - now;
      ts.tv_sec += (time_t)wait;
      ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&w->wake, &w->mu, &ts);
    }
    item *list = w->head;
    w->head = w->tail = NULL;
    w->queued = 0;
    uint64_t req = w->flush_req;
    bool stop = w->stop;
    bool failed = w->err_code != LV_OK;
    pthread_mutex_unlock(&w->mu);

    for (item *it = list, *nx; it; it = nx) {
      nx = it->next;
      if (!failed) {
        lv_status s = write_item(w, it);
        if (s) {
          failed = true;
          set_error(w, s);
        }
      }
      free_item(it);
    }
    bool flushed = false;
    double now = lv_now_monotonic();
    if (req != w->flush_done || stop || now >= next_flush) {
      if (!failed) set_error(w, lv_tfrecord_writer_flush(w->rec));
      next_flush = now + w->flush_secs;
      flushed = true;
    }
    pthread_mutex_lock(&w->mu);
    if (flushed) {
      w->flush_done = req;
      pthread_cond_broadcast(&w->done);
    }
    if (stop && !w->head) break;
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* ---- public API ---- */

lv_status lv_events_writer_open(const char *dir, double flush_secs, lv_events_writer **out) {
  *out = NULL;
  LV_TRY(lv_file_mkdirs(dir));
  char host[256] = "localhost";
  if (gethostname(host, sizeof(host) - 1) != 0) strcpy(host, "localhost");
  host[sizeof(host) - 1] = 0;
  long t = (long)time(NULL);
  size_t plen = strlen(dir) + strlen(host) + 96;
  char *path = malloc(plen);
  LV_ASSERT(path);
  snprintf(path, plen, "%s/events.out.tfevents.%ld.%s", dir, t, host);
  /* Two writers opened in the same second in one directory must not share a file. */
  for (int k = 1; lv_file_exists(path); k++) snprintf(path, plen, "%s/events.out.tfevents.%ld.%s.%d", dir, t, host, k);

  lv_events_writer *w = calloc(1, sizeof(*w));
  LV_ASSERT(w);
  w->path = path;
  w->flush_secs = flush_secs > 0 ? flush_secs : 120.0;
  lv_status s = lv_tfrecord_writer_open(path, false, &w->rec);
  if (!s) {
    Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
    ev.wall_time = lv_now_wall();
    ev.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
    ev.file_version = LV_EVENTS_FILE_VERSION;
    s = write_event(w, &ev);
    if (!s) s = lv_tfrecord_writer_flush(w->rec);
  }
  if (s) {
    if (w->rec) lv_status_free(lv_tfrecord_writer_close(w->rec));
    free(w->buf);
    free(w->path);
    free(w);
    return s;
  }
  pthread_mutex_init(&w->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_cond_init(&w->done, NULL);
  int rc = pthread_create(&w->thread, NULL, writer_thread, w);
  if (rc != 0) {
    lv_status_free(lv_tfrecord_writer_close(w->rec));
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    free(w->buf);
    free(w->path);
    free(w);
    return lv_status_make(LV_ERR_RESOURCE, "events writer: cannot start thread: %s", strerror(rc));
  }
  *out = w;
  return NULL;
}

const char *lv_events_writer_path(const lv_events_writer *w) { return w->path; }

static item *item_new(const char *tag, item_kind kind, int64_t step) {
  size_t tl = strlen(tag);
  item *it = malloc(sizeof(item) + tl + 1);
  LV_ASSERT(it);
  memset(it, 0, sizeof(item));
  memcpy(it->tag, tag, tl + 1);
  it->kind = kind;
  it->step = step;
  it->wall = lv_now_wall();
  return it;
}

static void enqueue(lv_events_writer *w, item *it) {
  pthread_mutex_lock(&w->mu);
  if (w->stop || w->err_code != LV_OK) {
    pthread_mutex_unlock(&w->mu);
    free_item(it);
    return;
  }
  if (w->tail) w->tail->next = it; else w->head = it;
  w->tail = it;
  if (++w->queued == WAKE_AT) pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->mu);
}

void lv_events_scalar(lv_events_writer *w, const char *tag, int64_t step, double value) {
  item *it = item_new(tag, ITEM_SCALAR, step);
  it->value = value;
  enqueue(w, it);
}

void lv_events_image(lv_events_writer *w, const char *tag, int64_t step, int h, int wdt, int c, const uint8_t *pixels) {
  LV_ASSERT(h > 0 && wdt > 0 && (c == 1 || c == 3));
  item *it = item_new(tag, ITEM_IMAGE, step);
  size_t n = (size_t)h * (size_t)wdt * (size_t)c;
  it->payload = malloc(n);
  LV_ASSERT(it->payload);
  memcpy(it->payload, pixels, n);
  it->h = h;
  it->w = wdt;
  it->c = c;
  enqueue(w, it);
}

void lv_events_text(lv_events_writer *w, const char *tag, int64_t step, const char *text) {
  item *it = item_new(tag, ITEM_TEXT, step);
  it->payload = strdup(text);
  LV_ASSERT(it->payload);
  enqueue(w, it);
}

void lv_events_histogram(lv_events_writer *w, const char *tag, int64_t step, const float *vals, int64_t n) {
  LV_ASSERT(n >= 0);
  item *it = item_new(tag, ITEM_HISTO, step);
  it->payload = malloc(n ? (size_t)n * sizeof(float) : 1);
  LV_ASSERT(it->payload);
  if (n) memcpy(it->payload, vals, (size_t)n * sizeof(float));
  it->n = n;
  enqueue(w, it);
}

static lv_status error_status(lv_events_writer *w) {
  return w->err_code == LV_OK ? NULL : lv_status_make(w->err_code, "%s", w->err_msg);
}

lv_status lv_events_flush(lv_events_writer *w) {
  pthread_mutex_lock(&w->mu);
  uint64_t my = ++w->flush_req;
  pthread_cond_signal(&w->wake);
  while (w->flush_done < my) pthread_cond_wait(&w->done, &w->mu);
  lv_status s = error_status(w);
  pthread_mutex_unlock(&w->mu);
  return s;
}

lv_status lv_events_writer_close(lv_events_writer *w) {
  if (!w) return NULL;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  lv_status s = error_status(w);
  lv_status c = lv_tfrecord_writer_close(w->rec);
  if (s) lv_status_free(c); else s = c;
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->wake);
  pthread_cond_destroy(&w->done);
  free(w->err_msg);
  free(w->buf);
  free(w->path);
  free(w);
  return s;
}

/* ---- reading ---- */

const char *const lv_events_kind_names[LV_EVENTS_KIND_COUNT] = {"file_version", "scalar", "image",
                                                                "text", "histogram", "other"};
_Static_assert(LV_ARRAY_LEN(lv_events_kind_names) == LV_EVENTS_KIND_COUNT, "events kind names");

static lv_status visit_event(const Tensorflow__Event *ev, lv_events_visit_fn fn, void *ctx) {
  lv_events_record rec;
  memset(&rec, 0, sizeof rec);
  rec.step = ev->step;
  rec.wall_time = ev->wall_time;
  rec.tag = "";
  if (ev->what_case == TENSORFLOW__EVENT__WHAT_FILE_VERSION) {
    rec.kind = LV_EVENTS_KIND_FILE_VERSION;
    rec.file_version = ev->file_version;
    return fn(&rec, ctx);
  }
  if (ev->what_case != TENSORFLOW__EVENT__WHAT_SUMMARY) {
    rec.kind = LV_EVENTS_KIND_OTHER;
    return fn(&rec, ctx);
  }
  for (size_t i = 0; i < ev->summary->n_value; i++) {
    const Tensorflow__Summary__Value *v = ev->summary->value[i];
    memset(&rec, 0, sizeof rec);
    rec.step = ev->step;
    rec.wall_time = ev->wall_time;
    rec.tag = v->tag;
    rec.kind = LV_EVENTS_KIND_OTHER;
    switch (v->value_case) {
      case TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE:
        rec.kind = LV_EVENTS_KIND_SCALAR;
        rec.value = v->simple_value;
        break;
      case TENSORFLOW__SUMMARY__VALUE__VALUE_IMAGE:
        rec.kind = LV_EVENTS_KIND_IMAGE;
        rec.data = v->image->encoded_image_string.data;
        rec.len = v->image->encoded_image_string.len;
        rec.h = v->image->height;
        rec.w = v->image->width;
        rec.c = v->image->colorspace;
        break;
      case TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO:
        rec.kind = LV_EVENTS_KIND_HISTOGRAM;
        rec.value = v->histo->min;
        rec.value2 = v->histo->max;
        rec.hist_num = v->histo->num;
        rec.hist_sum = v->histo->sum;
        break;
      case TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR:
        if (v->tensor->dtype == TENSORFLOW__DATA_TYPE__DT_STRING && v->tensor->n_string_val == 1) {
          rec.kind = LV_EVENTS_KIND_TEXT;
          rec.data = v->tensor->string_val[0].data;
          rec.len = v->tensor->string_val[0].len;
        }
        break;
      default: break;
    }
    LV_TRY(fn(&rec, ctx));
  }
  return NULL;
}

lv_status lv_events_read_file(const char *path, lv_events_visit_fn fn, void *ctx) {
  lv_tfrecord_reader *r;
  LV_TRY(lv_tfrecord_reader_open(path, false, &r));
  lv_status s = NULL;
  for (;;) {
    const uint8_t *d;
    size_t len;
    bool eof;
    s = lv_tfrecord_reader_next(r, &d, &len, &eof);
    if (s || eof) break;
    Tensorflow__Event *ev = tensorflow__event__unpack(NULL, len, d);
    if (!ev) {
      s = lv_status_make(LV_ERR_CORRUPT, "%s: record at byte offset %llu is not an Event proto", path,
                         (unsigned long long)(lv_tfrecord_reader_offset(r) - len - LV_TFRECORD_OVERHEAD));
      break;
    }
    s = visit_event(ev, fn, ctx);
    tensorflow__event__free_unpacked(ev, NULL);
    if (s) break;
  }
  lv_tfrecord_reader_close(r);
  return s;
}
