/* The record yielder (see record_yielder.h): pattern expansion, one reader per file
 * type, and the reader thread feeding a bounded queue. */
#include "input/record_yielder.h"

#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"
#include "base/names.h"
#include "base/rng.h"
#include "base/path.h"
#include "base/text_lines.h"
#include "input/stream_input.h"
#include "io/tfrecord.h"

const char *const lv_record_type_names[LV_RECORD_TYPE_COUNT] = {"tfrecord", "tfrecord_gzip", "text", "iota"};
_Static_assert(LV_RECORD_TYPE_COUNT == 4, "lv_record_type_names must list every lv_record_type");

/* ---- file patterns ---- */

void lv_file_list_free(lv_file_list *l) {
  for (int i = 0; i < l->n_files; i++) free(l->files[i]);
  free(l->files);
  memset(l, 0, sizeof *l);
}

static void list_push(lv_file_list *l, const char *path) {
  char **f = realloc(l->files, sizeof(char *) * (size_t)(l->n_files + 1));
  LV_ASSERT(f);
  l->files = f;
  l->files[l->n_files] = strdup(path);
  LV_ASSERT(l->files[l->n_files]);
  l->n_files++;
}

/* `name@N` -> `name-?????-of-0000N`, `name@*` -> `name-?????-of-?????` (Lingvo's
 * MaybeExpandShardedFilePattern); anything else is copied. Only an '@' in the last path
 * component counts (a directory may have one in its name). */
static lv_status expand_sharded(const char *pattern, const char *glob_in, char *out, size_t n) {
  const char *base = strrchr(glob_in, '/');
  const char *at = strchr(base ? base + 1 : glob_in, '@');
  if (!at) return lv_path_fmt(out, n, "%s", glob_in);
  int plen = (int)(at - glob_in);
  const char *suf = at + 1;
  if (!strcmp(suf, "*")) {
    return lv_path_fmt(out, n, "%.*s-?\?\?\?\?-of-?\?\?\?\?", plen, glob_in);
  }
  char *end = NULL;
  errno = 0;
  unsigned long long shards = *suf >= '0' && *suf <= '9' ? strtoull(suf, &end, 10) : 0;
  if (!end || *end || errno)
    return lv_status_make(LV_ERR_INVALID, "file pattern \"%s\": invalid sharded file pattern \"%s\" (want name@N or name@*)",
                          pattern, glob_in);
  if (shards > 99999)
    return lv_status_make(LV_ERR_INVALID,
                          "file pattern \"%s\": the number of shards should not exceed 5 digits: %llu", pattern,
                          shards);
  return lv_path_fmt(out, n, "%.*s-?\?\?\?\?-of-%05llu", plen, glob_in, shards);
}

lv_status lv_file_pattern_expand(const char *pattern, lv_file_list *out) {
  memset(out, 0, sizeof *out);
  const char *colon = strchr(pattern, ':'), *slash = strchr(pattern, '/');
  const char *rest = pattern;
  out->type = LV_RECORD_TFRECORD;
  if (colon && (!slash || slash > colon)) {
    size_t tl = (size_t)(colon - pattern);
    int t = 0;
    while (t < LV_RECORD_TYPE_COUNT && !(strlen(lv_record_type_names[t]) == tl &&
                                         !strncmp(lv_record_type_names[t], pattern, tl)))
      t++;
    if (t == LV_RECORD_TYPE_COUNT) {
      char known[128];
      lv_names_join(lv_record_type_names, LV_RECORD_TYPE_COUNT, ", ", known, sizeof known);
      return lv_status_make(LV_ERR_INVALID, "file pattern \"%s\": unknown record type \"%.*s\" (known: %s)", pattern,
                            (int)tl, pattern, known);
    }
    out->type = (lv_record_type)t;
    rest = colon + 1;
  }
  if (out->type == LV_RECORD_IOTA) {
    char *end = NULL;
    errno = 0;
    long long n = *rest >= '0' && *rest <= '9' ? strtoll(rest, &end, 10) : -1;
    if (!end || *end || errno || n < 0)
      return lv_status_make(LV_ERR_INVALID, "file pattern \"%s\": iota wants a count, iota:N", pattern);
    out->iota_n = n;
    list_push(out, pattern);
    return NULL;
  }
  if (!*rest) return lv_status_make(LV_ERR_INVALID, "file pattern \"%s\" names no files", pattern);
  char *copy = strdup(rest);
  LV_ASSERT(copy);
  lv_status s = NULL;
  char *save = NULL;
  for (char *g = strtok_r(copy, ",", &save); g && !s; g = strtok_r(NULL, ",", &save)) {
    char expanded[LV_PATH_MAX];
    s = expand_sharded(pattern, g, expanded, sizeof expanded);
    if (s) break;
    glob_t gl;
    int rc = glob(expanded, 0, NULL, &gl);
    if (rc == GLOB_NOMATCH || (rc == 0 && gl.gl_pathc == 0))
      s = lv_status_make(LV_ERR_NOT_FOUND, "file pattern \"%s\": no file matches \"%s\"", pattern, expanded);
    else if (rc != 0)
      s = lv_status_make(LV_ERR_IO, "file pattern \"%s\": cannot expand \"%s\" (glob error %d)", pattern, expanded, rc);
    else
      for (size_t i = 0; i < gl.gl_pathc; i++) list_push(out, gl.gl_pathv[i]);
    if (rc != GLOB_NOMATCH) globfree(&gl);
  }
  free(copy);
  if (!s && out->n_files == 0) s = lv_status_make(LV_ERR_NOT_FOUND, "file pattern \"%s\" matches no file", pattern);
  if (s) lv_file_list_free(out);
  return s;
}

/* ---- one open file ---- */

/* The largest line buffer a text file keeps between lines (bytes). */
#define TEXT_LINE_CAP_KEPT ((size_t)1 << 20)

typedef struct src {
  int file_idx;
  lv_record_type type;
  lv_tfrecord_reader *tf; /* tfrecord and tfrecord_gzip */
  FILE *text;
  char *line;
  size_t line_cap;
  uint64_t line_off;
  long lineno;         /* 1-based number of the last line read */
  bool skip_corrupt;   /* skip (and count) a line with a NUL byte instead of failing */
  size_t keep;         /* lv_record_yielder_opts.text_keep */
  int64_t nul_skipped; /* lines skipped so far */
  int64_t iota_i, iota_n;
} src;

/* Closes s; returns the corrupt regions its reader skipped. */
static int64_t src_close(src *s, const char *path) {
  int64_t k = 0;
  if (s->tf) {
    k = lv_tfrecord_reader_skipped(s->tf);
    if (k > 0) lv_warn("%s: skipped %lld corrupt region%s", path, (long long)k, k == 1 ? "" : "s");
    lv_tfrecord_reader_close(s->tf);
  }
  if (s->text) fclose(s->text);
  if (s->nul_skipped > 0)
    lv_warn("%s: skipped %lld line%s with a NUL byte", path, (long long)s->nul_skipped, s->nul_skipped == 1 ? "" : "s");
  k += s->nul_skipped;
  free(s->line);
  memset(s, 0, sizeof *s);
  return k;
}

/* A compressed file's magic number, or NULL: `text:` reads plain text, and compressed
 * bytes would train on garbage (every token <unk>) without a word. */
static const char *compressed_kind(const unsigned char *b, size_t n) {
  if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return "gzip (magic 1f 8b)";
  if (n >= 3 && !memcmp(b, "BZh", 3)) return "bzip2 (magic BZh)";
  if (n >= 6 && !memcmp(b, "\xfd" "7zXZ\0", 6)) return "xz (magic fd 37 7a 58 5a 00)";
  if (n >= 4 && !memcmp(b, "\x28\xb5\x2f\xfd", 4)) return "zstd (magic 28 b5 2f fd)";
  return NULL;
}

static lv_status open_text(src *s, const char *path) {
  LV_TRY(lv_file_fopen_regular(path, "text: file", &s->text));
  unsigned char head[6];
  size_t n = fread(head, 1, sizeof head, s->text);
  const char *kind = compressed_kind(head, n);
  lv_status st = NULL;
  if (kind)
    st = lv_status_make(LV_ERR_INVALID, "text: file %s is %s-compressed; expected plain UTF-8 text (decompress it)",
                        path, kind);
  else if (ferror(s->text) || fseek(s->text, 0, SEEK_SET) != 0)
    st = lv_status_make(LV_ERR_IO, "text: file %s: cannot read: %s", path, strerror(errno ? errno : EIO));
  if (st) {
    fclose(s->text);
    s->text = NULL;
  }
  return st;
}

static lv_status src_open(src *s, const lv_file_list *l, int idx, const lv_record_yielder_opts *o) {
  const bool skip_corrupt = o->skip_corrupt;
  memset(s, 0, sizeof *s);
  s->file_idx = idx;
  s->type = l->type;
  const char *path = l->files[idx];
  switch (l->type) {
    case LV_RECORD_TFRECORD:
      return lv_tfrecord_reader_open(path, skip_corrupt, &s->tf);
    case LV_RECORD_TFRECORD_GZIP:
      return lv_tfrecord_reader_open_gzip(path, skip_corrupt, &s->tf);
    case LV_RECORD_TEXT:
      s->skip_corrupt = skip_corrupt;
      s->keep = o->text_keep;
      return open_text(s, path);
    case LV_RECORD_IOTA:
      s->iota_n = l->iota_n;
      return NULL;
    case LV_RECORD_TYPE_COUNT:
      break;
  }
  return lv_status_make(LV_ERR_INTERNAL, "bad record type %d", (int)l->type);
}

/* The next record of s into a malloc'd copy. */
static lv_status src_next(src *s, const char *path, uint8_t **data, size_t *len, uint64_t *off, int64_t *words,
                          bool *eof) {
  *eof = false;
  *words = -1;
  if (s->tf) {
    const uint8_t *d;
    *off = lv_tfrecord_reader_offset(s->tf);
    LV_TRY(lv_tfrecord_reader_next(s->tf, &d, len, eof));
    if (*eof) return NULL;
    /* after a resync the record starts later than where we looked */
    *off = lv_tfrecord_reader_offset(s->tf) - *len - LV_TFRECORD_OVERHEAD;
    *data = malloc(*len ? *len : 1);
    LV_ASSERT(*data);
    memcpy(*data, d, *len);
    return NULL;
  }
  if (s->text) {
    ssize_t n;
    for (;;) {
      errno = 0;
      n = getline(&s->line, &s->line_cap, s->text);
      if (n < 0) break;
      s->lineno++;
      *off = s->line_off;
      s->line_off += (uint64_t)n;
      lv_status bad = lv_text_refuse_nul(path, s->lineno, s->line, (size_t)n);
      if (!bad) break;
      if (!s->skip_corrupt) return bad;
      if (s->nul_skipped++ < 10) lv_warn("skipping a line: %s", lv_status_msg(bad));
      lv_status_free(bad);
    }
    if (n < 0) {
      /* getline's ENOMEM (a line past the memory limit) sets neither ferror nor feof:
       * only feof ends the file. */
      if (ferror(s->text) || !feof(s->text))
        return lv_status_make(errno == ENOMEM ? LV_ERR_RESOURCE : LV_ERR_IO,
                              "%s: cannot read the line at byte offset %" PRIu64 ": %s", path, s->line_off,
                              strerror(errno ? errno : EIO));
      *eof = true;
      return NULL;
    }
    if (n > 0 && s->line[n - 1] == '\n') n--;
    if (n > 0 && s->line[n - 1] == '\r') n--;
    if (s->keep > 0 && (size_t)n > s->keep) {
      *words = lv_text_count_words((const uint8_t *)s->line, (size_t)n);
      n = (ssize_t)s->keep;
    }
    *len = (size_t)n;
    *data = malloc((size_t)n + 1);
    LV_ASSERT(*data);
    memcpy(*data, s->line, (size_t)n);
    (*data)[n] = 0;
    if (s->line_cap > TEXT_LINE_CAP_KEPT) { /* a huge line's buffer is not kept for the next line */
      free(s->line);
      s->line = NULL;
      s->line_cap = 0;
    }
    return NULL;
  }
  if (s->iota_i >= s->iota_n) {
    *eof = true;
    return NULL;
  }
  *off = (uint64_t)s->iota_i;
  *data = malloc(24);
  LV_ASSERT(*data);
  *len = (size_t)snprintf((char *)*data, 24, "%010lld", (long long)s->iota_i++);
  return NULL;
}

/* ---- the yielder ---- */

typedef struct item {
  uint8_t *data;
  size_t len;
  int file_idx;
  uint64_t offset;
  int64_t epoch;
  int64_t words;
} item;

#define QUEUE_CAP 256

static void yielder_free(lv_record_yielder *y);

/* The trainer's stop flag (lv_record_yielder_set_interrupt); NULL: none. */
static const volatile sig_atomic_t *g_interrupt;

void lv_record_yielder_set_interrupt(const volatile sig_atomic_t *flag) { g_interrupt = flag; }

bool lv_record_yielder_interrupted(void) { return g_interrupt && *g_interrupt; }

/* cond_wait for at most 100 ms, so that a waiting consumer sees the interrupt flag. */
void lv_cond_wait_tick(pthread_cond_t *c, pthread_mutex_t *mu) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += 100 * 1000 * 1000;
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  pthread_cond_timedwait(c, mu, &ts);
}

struct lv_record_yielder {
  lv_record_yielder_opts o;
  lv_file_list files;
  pthread_t thread;
  bool started;
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  item q[QUEUE_CAP];
  int q_head, q_n;
  bool stop, finished; /* finished: the reader put its last record (end or error) */
  bool abandoned;      /* destroy gave up waiting: the reader frees the yielder */
  lv_status error;     /* the reader's error, delivered after the queued records */
  int64_t skipped;
  int64_t pass_records; /* records of one whole pass (all replicas' shares); -1 until read */
  int64_t buf_peak_bytes; /* the shuffle buffer's largest byte count so far */
  char *pattern;        /* for messages */
  item cur; /* the record the consumer holds */
};

/* Blocks until there is room; false when asked to stop (the item is then freed). */
static bool queue_push(lv_record_yielder *y, item it) {
  pthread_mutex_lock(&y->mu);
  while (y->q_n == QUEUE_CAP && !y->stop) pthread_cond_wait(&y->not_full, &y->mu);
  bool ok = !y->stop;
  if (ok) {
    y->q[(y->q_head + y->q_n) % QUEUE_CAP] = it;
    y->q_n++;
    pthread_cond_signal(&y->not_empty);
  }
  pthread_mutex_unlock(&y->mu);
  if (!ok) free(it.data);
  return ok;
}

static bool should_stop(lv_record_yielder *y) {
  pthread_mutex_lock(&y->mu);
  bool s = y->stop;
  pthread_mutex_unlock(&y->mu);
  return s;
}

static void add_skipped(lv_record_yielder *y, int64_t k) {
  pthread_mutex_lock(&y->mu);
  y->skipped += k;
  pthread_mutex_unlock(&y->mu);
}

typedef struct reader_state {
  lv_record_yielder *y;
  lv_rng rng;
  item *buf; /* shuffle buffer: at most one epoch's records (it drains at each epoch's end) */
  int64_t buf_n, buf_cap;
  int64_t buf_bytes;  /* the records' bytes in buf */
  int64_t peak_bytes; /* buf_bytes' largest value (published to the yielder when it grows) */
  uint64_t position; /* records seen in the global order (for sharding) */
} reader_state;

/* The buffer's bytes changed: a new peak goes to lv_record_yielder_buffer_peak_bytes (the
 * lock is taken only then, not once per record). */
static void note_bytes(reader_state *rs) {
  if (rs->buf_bytes <= rs->peak_bytes) return;
  rs->peak_bytes = rs->buf_bytes;
  lv_record_yielder *y = rs->y;
  pthread_mutex_lock(&y->mu);
  y->buf_peak_bytes = rs->peak_bytes;
  pthread_mutex_unlock(&y->mu);
}

/* Takes a uniformly chosen record out of the shuffle buffer. */
static item buffer_take(reader_state *rs) {
  int64_t j = (int64_t)lv_rng_below(&rs->rng, (uint64_t)rs->buf_n);
  item out = rs->buf[j];
  rs->buf[j] = rs->buf[--rs->buf_n];
  rs->buf_bytes -= (int64_t)out.len;
  return out;
}

/* Passes one record of the global order on: sharding, then the shuffle buffer. */
static bool emit(reader_state *rs, item it) {
  lv_record_yielder *y = rs->y;
  uint64_t pos = rs->position++;
  if ((int64_t)(pos % (uint64_t)y->o.num_replicas) != y->o.replica) {
    free(it.data);
    return true;
  }
  if (y->o.sequential || y->o.buffer_size <= 1) return queue_push(y, it);
  /* The byte cap: records leave in a random order until the new one fits (or the buffer
   * is empty). Without a cap this never runs, and the order is the slots' alone. */
  while (y->o.buffer_max_bytes > 0 && rs->buf_n > 0 && rs->buf_bytes + (int64_t)it.len > y->o.buffer_max_bytes)
    if (!queue_push(y, buffer_take(rs))) {
      free(it.data);
      return false;
    }
  if (rs->buf_n < y->o.buffer_size) {
    if (rs->buf_n == rs->buf_cap) {
      int64_t cap = rs->buf_cap ? rs->buf_cap * 2 : 64;
      if (cap > y->o.buffer_size) cap = y->o.buffer_size;
      item *b = realloc(rs->buf, sizeof(item) * (size_t)cap);
      LV_ASSERT(b);
      rs->buf = b;
      rs->buf_cap = cap;
    }
    rs->buf[rs->buf_n++] = it;
    rs->buf_bytes += (int64_t)it.len;
    note_bytes(rs);
    return true;
  }
  int64_t j = (int64_t)lv_rng_below(&rs->rng, (uint64_t)rs->buf_n);
  item out = rs->buf[j];
  rs->buf[j] = it;
  rs->buf_bytes += (int64_t)it.len - (int64_t)out.len;
  note_bytes(rs);
  return queue_push(y, out);
}

/* One epoch: files in order (sequential) or shuffled, `parallelism` at a time,
 * interleaved record by record. */
static lv_status read_epoch(reader_state *rs, int64_t epoch, bool *stopped) {
  lv_record_yielder *y = rs->y;
  const lv_file_list *l = &y->files;
  int n = l->n_files;
  int *order = malloc(sizeof(int) * (size_t)n);
  LV_ASSERT(order);
  for (int i = 0; i < n; i++) order[i] = i;
  int par = 1;
  if (!y->o.sequential) {
    lv_rng fr;
    lv_rng_init(&fr, lv_rng_mix(y->o.seed, y->o.stream), 1000003u + (uint64_t)epoch);
    for (int i = n - 1; i > 0; i--) {
      int j = (int)lv_rng_below(&fr, (uint64_t)i + 1);
      int t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    par = y->o.parallelism < n ? y->o.parallelism : n;
  }
  src *open = calloc((size_t)par, sizeof(src));
  LV_ASSERT(open);
  int next_file = 0, n_open = 0;
  lv_status s = NULL;
  for (; n_open < par && !s; n_open++) s = src_open(&open[n_open], l, order[next_file++], &y->o);
  int k = 0;
  while (!s && n_open > 0) {
    if (should_stop(y)) {
      *stopped = true;
      break;
    }
    src *cur = &open[k];
    uint8_t *d = NULL;
    size_t len = 0;
    uint64_t off = 0;
    int64_t words = -1;
    bool eof = false;
    const char *path = l->files[cur->file_idx];
    s = src_next(cur, path, &d, &len, &off, &words, &eof);
    if (s) break;
    if (eof) {
      add_skipped(y, src_close(cur, path));
      if (next_file < n) {
        s = src_open(cur, l, order[next_file++], &y->o);
      } else {
        open[k] = open[n_open - 1];
        n_open--;
        if (k >= n_open) k = 0;
      }
      continue;
    }
    if (!emit(rs, (item){d, len, cur->file_idx, off, epoch, words})) {
      *stopped = true;
      break;
    }
    k = (k + 1) % n_open;
  }
  for (int i = 0; i < n_open; i++) add_skipped(y, src_close(&open[i], l->files[open[i].file_idx]));
  free(open);
  free(order);
  return s;
}

/* Empties the shuffle buffer in a random order; false when the yielder is stopping. */
static bool drain(reader_state *rs) {
  while (rs->buf_n > 0)
    if (!queue_push(rs->y, buffer_take(rs))) return false;
  return true;
}

static void *reader_main(void *arg) {
  lv_record_yielder *y = arg;
  reader_state rs = {.y = y};
  lv_rng_init(&rs.rng, lv_rng_mix(y->o.seed, y->o.stream), 7);
  lv_status s = NULL;
  bool stopped = false;
  for (int64_t epoch = 0; !s && !stopped && (y->o.repeat_count < 0 || epoch < y->o.repeat_count); epoch++) {
    uint64_t before = rs.position;
    s = read_epoch(&rs, epoch, &stopped);
    if (!s && !stopped && epoch == 0) {
      pthread_mutex_lock(&y->mu);
      y->pass_records = (int64_t)(rs.position - before);
      pthread_mutex_unlock(&y->mu);
      /* Repeating an empty pass forever would keep the consumer waiting for ever. */
      if (rs.position == before && y->o.repeat_count < 0)
        s = lv_status_make(LV_ERR_INVALID, "%s: a whole pass over its %d file%s read no record (empty files?)",
                           y->pattern, y->files.n_files, y->files.n_files == 1 ? "" : "s");
    }
    /* Lingvo's epoch barrier ("Do not start the next epoch until all buffered records are
     * consumed"): the buffer empties before the next epoch's first record comes in, so a
     * buffer as large as the data is a fresh permutation of it every epoch, and no record
     * waits in the buffer for epochs while later ones pass it. */
    if (!s && !stopped && !drain(&rs)) stopped = true;
  }
  for (int64_t i = 0; i < rs.buf_n; i++) free(rs.buf[i].data);
  free(rs.buf);
  pthread_mutex_lock(&y->mu);
  y->error = s;
  y->finished = true;
  bool abandoned = y->abandoned;
  pthread_cond_broadcast(&y->not_empty);
  pthread_mutex_unlock(&y->mu);
  if (abandoned) yielder_free(y); /* destroy left it to this thread */
  return NULL;
}

lv_status lv_record_yielder_create(const lv_record_yielder_opts *opts, lv_record_yielder **out) {
  *out = NULL;
  if (opts->num_replicas < 1 || opts->replica < 0 || opts->replica >= opts->num_replicas)
    return lv_status_make(LV_ERR_INVALID, "record yielder: replica %d of %d is not a valid shard", opts->replica,
                          opts->num_replicas);
  if (opts->parallelism < 1)
    return lv_status_make(LV_ERR_INVALID, "file_parallelism must be >= 1, got %d", opts->parallelism);
  if (opts->repeat_count == 0 || opts->repeat_count < -1)
    return lv_status_make(LV_ERR_INVALID, "repeat_count must be -1 (forever) or > 0, got %lld",
                          (long long)opts->repeat_count);
  lv_record_yielder *y = calloc(1, sizeof *y);
  LV_ASSERT(y);
  y->o = *opts;
  lv_status s = lv_file_pattern_expand(opts->file_pattern, &y->files);
  if (s) {
    free(y);
    return s;
  }
  y->o.file_pattern = NULL; /* the caller's string may not outlive us */
  y->pattern = strdup(opts->file_pattern);
  LV_ASSERT(y->pattern);
  y->pass_records = -1;
  pthread_mutex_init(&y->mu, NULL);
  pthread_cond_init(&y->not_empty, NULL);
  pthread_cond_init(&y->not_full, NULL);
  int rc = pthread_create(&y->thread, NULL, reader_main, y);
  if (rc) {
    lv_record_yielder_destroy(y);
    return lv_status_make(LV_ERR_RESOURCE, "record yielder: cannot start the reader thread: %s", strerror(rc));
  }
  y->started = true;
  *out = y;
  return NULL;
}

lv_status lv_record_yielder_next(lv_record_yielder *y, lv_record *rec, bool *eof) {
  free(y->cur.data);
  memset(&y->cur, 0, sizeof y->cur);
  memset(rec, 0, sizeof *rec);
  *eof = false;
  pthread_mutex_lock(&y->mu);
  bool interrupted = false;
  while (y->q_n == 0 && !y->finished && !y->stop && !(interrupted = lv_record_yielder_interrupted()))
    lv_cond_wait_tick(&y->not_empty, &y->mu);
  lv_status s = NULL;
  if (y->stop) {
    s = lv_status_make(LV_ERR_CANCELLED, "record yielder: cancelled");
  } else if (interrupted) {
    s = lv_status_make(LV_ERR_CANCELLED, "%s: interrupted while waiting for a record", y->pattern);
  } else if (y->q_n > 0) {
    y->cur = y->q[y->q_head];
    y->q_head = (y->q_head + 1) % QUEUE_CAP;
    y->q_n--;
    pthread_cond_signal(&y->not_full);
  } else if (y->error) {
    s = lv_status_make(lv_status_code(y->error), "%s", lv_status_msg(y->error));
  } else {
    *eof = true;
  }
  pthread_mutex_unlock(&y->mu);
  if (s || *eof) return s;
  rec->data = y->cur.data;
  rec->len = y->cur.len;
  rec->file = y->files.files[y->cur.file_idx];
  rec->offset = y->cur.offset;
  rec->epoch = y->cur.epoch;
  rec->words = y->cur.words;
  return NULL;
}

void lv_record_yielder_cancel(lv_record_yielder *y) {
  pthread_mutex_lock(&y->mu);
  y->stop = true;
  pthread_cond_broadcast(&y->not_full);
  pthread_cond_broadcast(&y->not_empty);
  pthread_mutex_unlock(&y->mu);
}

int64_t lv_record_yielder_pass_records(lv_record_yielder *y) {
  pthread_mutex_lock(&y->mu);
  int64_t n = y->pass_records;
  pthread_mutex_unlock(&y->mu);
  return n;
}

const char *lv_record_yielder_pattern(const lv_record_yielder *y) { return y->pattern; }

bool lv_record_yielder_repeats_forever(const lv_record_yielder *y) { return y->o.repeat_count < 0; }

int lv_record_yielder_num_replicas(const lv_record_yielder *y) { return y->o.num_replicas; }
bool lv_record_yielder_fixed_order(const lv_record_yielder *y) { return y->o.sequential || y->files.n_files == 1; }

int64_t lv_record_yielder_buffer_peak_bytes(lv_record_yielder *y) {
  pthread_mutex_lock(&y->mu);
  int64_t n = y->buf_peak_bytes;
  pthread_mutex_unlock(&y->mu);
  return n;
}

int64_t lv_record_yielder_skipped(lv_record_yielder *y) {
  pthread_mutex_lock(&y->mu);
  int64_t k = y->skipped;
  pthread_mutex_unlock(&y->mu);
  return k;
}

/* How long destroy waits for a cancelled reader before leaving it behind. */
#define READER_GRACE_SECONDS 2

void lv_record_yielder_destroy(lv_record_yielder *y) {
  if (!y) return;
  if (y->started) {
    lv_record_yielder_cancel(y);
    /* A reader blocked in the kernel (opening a FIFO nobody writes, reading a stalled
     * device) never sees the cancellation: after a grace period it is left behind and
     * frees the yielder itself if it ever returns, so that the caller (a trainer told
     * to stop) is not blocked with it. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += READER_GRACE_SECONDS;
    pthread_mutex_lock(&y->mu);
    while (!y->finished && pthread_cond_timedwait(&y->not_empty, &y->mu, &until) != ETIMEDOUT) continue;
    /* Once abandoned is set and the lock released, y belongs to the reader. */
    const pthread_t reader = y->thread;
    const bool abandon = !y->finished;
    if (abandon) {
      y->abandoned = true;
      lv_warn("%s: the reader thread is blocked in a read or open (a FIFO without a writer?): left behind",
              y->pattern);
    }
    pthread_mutex_unlock(&y->mu);
    if (abandon) {
      pthread_detach(reader);
      return;
    }
    pthread_join(reader, NULL);
  }
  yielder_free(y);
}

static void yielder_free(lv_record_yielder *y) {
  for (int i = 0; i < y->q_n; i++) free(y->q[(y->q_head + i) % QUEUE_CAP].data);
  free(y->cur.data);
  lv_status_free(y->error);
  lv_file_list_free(&y->files);
  free(y->pattern);
  pthread_mutex_destroy(&y->mu);
  pthread_cond_destroy(&y->not_empty);
  pthread_cond_destroy(&y->not_full);
  free(y);
}
