/* create_asr_features: audio plus transcripts -> sharded TFRecords of tf.Examples, as
 * Lingvo's lingvo/tools/create_asr_features.py writes them (reference/lingvo_asr_lm.md
 * §1.1): `uttid` (bytes), `transcript` (bytes, lower-cased) and `frames` (floats: the
 * [T, 80] log-mel matrix of audio/mel_frontend.h with LibriSpeech's parameters, row-major).
 *
 * Inputs: --input_tarball (LibriSpeech's .tar.gz as downloaded: *.trans.txt beside *.flac,
 * read with libarchive), --input_dir (the same layout unpacked) or --input_list (lines
 * path<TAB>transcript; relative paths are relative to the list's directory). Audio goes
 * through libsndfile (WAV, FLAC, OGG), is mixed to mono and resampled to 16 kHz.
 * Lingvo's modes: --dump_transcripts writes "uttid TEXT" lines, sorted, to
 * --transcripts_filepath; --generate_tfrecords reads the transcripts from that file when
 * it exists. Sharding: audio file n (1-based, in archive, sorted-path or list order) is
 * this process's when n % num_shards == shard_id; its examples go to output shards
 * [output_range_begin, output_range_end) of --output_template % (shard, num_output_shards),
 * round-robin (Lingvo picks one at random; round-robin keeps runs reproducible).
 * Where Lingvo's defaults would do nothing (shard -1 of -1, an empty output range), ours
 * take every file and all output shards (or shard_id's 1/num_shards of them).
 *
 * Shards are written under temporary names and renamed at the end, so an error leaves
 * every existing output as it was. A bad audio file (unreadable, truncated, shorter than
 * one frame, samples whose log-mels are not finite, a name whose utterance id holds
 * whitespace or a control byte) or one without a transcript is an error naming it (exit
 * 2), or with --skip_bad_files a warning, skipped and counted. Progress and an ETA go to
 * stderr.
 *
 * Outputs (issue 44): a symlink to a regular file is written through (its target
 * replaced, the link kept); --transcripts_filepath may be a FIFO or character device
 * (/dev/stdout, a pipe), written directly; a shard that is one is refused, as is a
 * directory or a dangling link. An output that is one of the inputs (the list, tarball,
 * transcripts file read, a listed recording or transcript file; same inode, or the same
 * resolved name) is refused before any work, as are more shards than the open-file
 * limit holds (the soft limit is first raised toward the hard one). SIGINT, SIGTERM and
 * SIGHUP remove this run's temporary files, say so and exit 128 + the signal; another
 * run's leftovers are not touched (a PID says nothing about another host's run). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <math.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audio/audio_file.h"
#include "audio/mel_frontend.h"
#include "base/env.h"
#include "base/file.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/path.h"
#include "base/text_lines.h"
#include "base/status.h"
#include "io/example.h"
#include "io/tfrecord.h"

static const char *flag_input_tarball = "";
static const char *flag_input_dir = "";
static const char *flag_input_list = "";
static const char *flag_input_text = "";
static const char *flag_output_template = "";
static bool flag_dump_transcripts = false;
static const char *flag_transcripts_filepath = "";
static bool flag_generate_tfrecords = false;
static int64_t flag_shard_id = -1;
static int64_t flag_num_shards = -1;
static int64_t flag_output_range_begin = -1;
static int64_t flag_output_range_end = -1;
static int64_t flag_num_output_shards = -1;
static bool flag_skip_bad_files = false;
static double flag_progress_seconds = 10;
static bool flag_write_pcm = false;

static const char *kUsage =
    "Usage: create_asr_features (--input_tarball=X.tar.gz | --input_dir=DIR | --input_list=FILE)\n"
    "         (--dump_transcripts --transcripts_filepath=F | --generate_tfrecords --output_template=T)\n"
    "Makes Lingvo's ASR records (uttid, transcript, frames [T, 80] log-mel) from LibriSpeech's layout\n"
    "or a list of path<TAB>transcript lines. Both passes may run at once (transcripts dumped, then records).\n"
    "Outputs: a symlink is written through (the link kept); --transcripts_filepath may be a pipe or device\n"
    "(/dev/stdout), written directly; a shard must be a regular file or a new name. An output naming an input\n"
    "(list, tarball, transcripts, a recording), more shards than the open-file limit, audio whose log-mels are\n"
    "not finite (float samples far over 1.0) or whose id holds whitespace are refused (exit 2).\n"
    "SIGINT/SIGTERM remove the run's temporary files and exit 130/143.\n"
    "Exit 0 ok, 2 bad flags or input files, 1 other errors.";

/* ---- transcripts ---- */

typedef struct utt_text {
  char *id;
  char *text;
  int64_t order; /* insertion index */
} utt_text;

typedef struct trans_map {
  utt_text *v;
  int64_t n, cap;
  bool sorted;
} trans_map;

static void trans_free(trans_map *m) {
  for (int64_t i = 0; i < m->n; i++) {
    free(m->v[i].id);
    free(m->v[i].text);
  }
  free(m->v);
  memset(m, 0, sizeof *m);
}

static lv_status trans_add(trans_map *m, const char *id, size_t id_len, const char *text, size_t text_len) {
  if (m->n == m->cap) {
    int64_t cap = m->cap ? m->cap * 2 : 1024;
    utt_text *v = realloc(m->v, sizeof *v * (size_t)cap);
    if (!v) return lv_status_make(LV_ERR_RESOURCE, "out of memory for %lld transcripts", (long long)cap);
    m->v = v;
    m->cap = cap;
  }
  char *a = strndup(id, id_len), *b = strndup(text, text_len);
  if (!a || !b) {
    free(a);
    free(b);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory for transcripts");
  }
  m->v[m->n] = (utt_text){a, b, m->n};
  m->n++;
  m->sorted = false;
  return NULL;
}

/* By id, then insertion order. */
static int cmp_utt(const void *a, const void *b) {
  const utt_text *x = a, *y = b;
  int c = strcmp(x->id, y->id);
  return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* Sorts by id; of duplicates the last added wins (a Python dict's assignment). */
static void trans_sort(trans_map *m) {
  if (m->sorted) return;
  if (m->n > 1) qsort(m->v, (size_t)m->n, sizeof *m->v, cmp_utt);
  int64_t k = 0;
  for (int64_t i = 0; i < m->n; i++) {
    if (i + 1 < m->n && !strcmp(m->v[i].id, m->v[i + 1].id)) {
      free(m->v[i].id);
      free(m->v[i].text);
      continue;
    }
    m->v[k++] = m->v[i];
  }
  m->n = k;
  m->sorted = true;
}

static const char *trans_find(const trans_map *m, const char *id) {
  int64_t lo = 0, hi = m->n;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    int c = strcmp(m->v[mid].id, id);
    if (c == 0) return m->v[mid].text;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* Lines "UTTID TEXT" (a *.trans.txt or a dumped transcripts file). */
static lv_status parse_trans(const char *data, size_t len, const char *name, trans_map *m) {
  size_t i = 0;
  for (int line = 1; i < len; line++) {
    const char *b = data + i, *nl = memchr(b, '\n', len - i);
    size_t l = nl ? (size_t)(nl - b) : len - i;
    i += l + (nl ? 1 : 0);
    if (l > 0 && b[l - 1] == '\r') l--;
    if (l == 0) continue;
    LV_TRY(lv_text_refuse_nul(name, line, b, l));
    const char *sp = memchr(b, ' ', l);
    if (!sp || sp == b)
      return lv_status_make(LV_ERR_CORRUPT, "%s:%d: expected \"UTTID TRANSCRIPT\", got \"%.*s\"", name, line,
                            (int)(l > 80 ? 80 : l), b);
    LV_TRY(trans_add(m, b, (size_t)(sp - b), sp + 1, l - (size_t)(sp - b) - 1));
  }
  return NULL;
}

static bool ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

/* The utterance id of an audio path: its base name without the extension (Lingvo's
 * regular expression, which keeps what lies between the last slash and ".flac"). */
static char *utt_id(const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  const char *dot = strrchr(b, '.');
  return strndup(b, dot && dot > b ? (size_t)(dot - b) : strlen(b));
}

/* An utterance id is written as "UTTID TEXT" (--dump_transcripts) and read back up to
 * its first space, so one with whitespace or a control byte (a file named with a tab or
 * newline) would come back as another id: such a file is refused. */
static lv_status check_uttid(const char *name, const char *id) {
  for (const char *c = id; *c; c++)
    if ((unsigned char)*c <= ' ' || *c == 0x7f)
      return lv_status_make(LV_ERR_INVALID, "%s: utterance id \"%s\" holds a space, tab, newline or control byte "
                            "(0x%02x at byte %d); expected a file name without them", name, id,
                            (unsigned)(unsigned char)*c, (int)(c - id));
  return NULL;
}

static bool is_audio(const char *name) {
  static const char *const kExt[] = {".flac", ".wav", ".ogg", ".oga", ".FLAC", ".WAV", ".OGG"};
  for (size_t i = 0; i < LV_ARRAY_LEN(kExt); i++)
    if (ends_with(name, kExt[i])) return true;
  return false;
}

/* ---- archives ---- */

typedef lv_status (*member_fn)(void *ctx, const char *name, const void *data, size_t len);

/* Calls fn for each regular member whose name passes want(). */
static lv_status tar_walk(const char *path, bool (*want)(const char *), member_fn fn, void *ctx) {
  struct archive *a = archive_read_new();
  if (!a) return lv_status_make(LV_ERR_RESOURCE, "%s: libarchive: out of memory", path);
  archive_read_support_filter_all(a);
  archive_read_support_format_all(a);
  lv_status s = NULL;
  if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
    s = lv_status_make(access(path, R_OK) ? LV_ERR_NOT_FOUND : LV_ERR_CORRUPT, "--input_tarball=%s: %s", path,
                       archive_error_string(a));
    archive_read_free(a);
    return s;
  }
  struct archive_entry *e;
  char *buf = NULL;
  size_t cap = 0;
  for (;;) {
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      s = lv_status_make(LV_ERR_CORRUPT, "--input_tarball=%s: %s", path, archive_error_string(a));
      break;
    }
    const char *name = archive_entry_pathname(e);
    if (archive_entry_filetype(e) != AE_IFREG || !name || !want(name)) continue;
    size_t n = 0;
    for (;;) {
      if (cap - n < 65536) {
        size_t nc = cap ? cap * 2 : 1 << 20;
        char *g = realloc(buf, nc);
        if (!g) {
          s = lv_status_make(LV_ERR_RESOURCE, "%s: %s: out of memory", path, name);
          break;
        }
        buf = g;
        cap = nc;
      }
      la_ssize_t got = archive_read_data(a, buf + n, cap - n);
      if (got < 0) {
        s = lv_status_make(LV_ERR_CORRUPT, "--input_tarball=%s: %s: %s", path, name, archive_error_string(a));
        break;
      }
      if (got == 0) break;
      n += (size_t)got;
    }
    if (!s) s = fn(ctx, name, buf, n);
    if (s) break;
  }
  free(buf);
  archive_read_free(a);
  return s;
}

static bool want_trans(const char *name) { return ends_with(name, ".trans.txt"); }

static lv_status add_trans_member(void *ctx, const char *name, const void *data, size_t len) {
  return parse_trans(data, len, name, ctx);
}

/* ---- directories and lists ---- */

typedef struct item {
  char *path;
  char *text; /* from the list, or NULL */
} item;

typedef struct item_list {
  item *v;
  int64_t n, cap;
} item_list;

static void items_free(item_list *l) {
  for (int64_t i = 0; i < l->n; i++) {
    free(l->v[i].path);
    free(l->v[i].text);
  }
  free(l->v);
  memset(l, 0, sizeof *l);
}

static lv_status items_add(item_list *l, const char *path, const char *text, size_t text_len) {
  if (l->n == l->cap) {
    int64_t cap = l->cap ? l->cap * 2 : 1024;
    item *v = realloc(l->v, sizeof *v * (size_t)cap);
    if (!v) return lv_status_make(LV_ERR_RESOURCE, "out of memory for %lld files", (long long)cap);
    l->v = v;
    l->cap = cap;
  }
  char *p = strdup(path), *t = text ? strndup(text, text_len) : NULL;
  if (!p || (text && !t)) {
    free(p);
    free(t);
    return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  }
  l->v[l->n++] = (item){p, t};
  return NULL;
}

static int cmp_item(const void *a, const void *b) { return strcmp(((const item *)a)->path, ((const item *)b)->path); }

/* nftw has no context argument. */
static item_list *g_walk_audio, *g_walk_trans;
static lv_status g_walk_status;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *f) {
  (void)st, (void)f;
  if (type != FTW_F) return 0;
  if (ends_with(path, ".trans.txt"))
    g_walk_status = items_add(g_walk_trans, path, NULL, 0);
  else if (is_audio(path))
    g_walk_status = items_add(g_walk_audio, path, NULL, 0);
  return g_walk_status ? 1 : 0;
}

static lv_status walk_dir(const char *dir, item_list *audio, item_list *trans) {
  struct stat st;
  if (stat(dir, &st) || !S_ISDIR(st.st_mode))
    return lv_status_make(LV_ERR_NOT_FOUND, "--input_dir=%s: not a directory", dir);
  g_walk_audio = audio;
  g_walk_trans = trans;
  g_walk_status = NULL;
  if (nftw(dir, walk_one, 32, FTW_PHYS) != 0 && !g_walk_status)
    g_walk_status = lv_status_make(LV_ERR_IO, "--input_dir=%s: %s", dir, strerror(errno));
  if (audio->n > 1) qsort(audio->v, (size_t)audio->n, sizeof *audio->v, cmp_item);
  if (trans->n > 1) qsort(trans->v, (size_t)trans->n, sizeof *trans->v, cmp_item);
  return g_walk_status;
}

static lv_status read_list(const char *list, item_list *out) {
  char *data = NULL;
  size_t len = 0;
  LV_TRY(lv_file_read_regular(list, (size_t)1 << 30, "--input_list", &data, &len));
  const char *slash = strrchr(list, '/');
  int dlen = slash ? (int)(slash - list) : 0;
  lv_status s = NULL;
  size_t i = 0;
  char path[4096], what[4096 + 16];
  snprintf(what, sizeof what, "--input_list=%s", list);
  for (int line = 1; !s && i < len; line++) {
    const char *b = data + i, *nl = memchr(b, '\n', len - i);
    size_t l = nl ? (size_t)(nl - b) : len - i;
    i += l + (nl ? 1 : 0);
    if (l > 0 && b[l - 1] == '\r') l--;
    if (l == 0) continue;
    if ((s = lv_text_refuse_nul(what, line, b, l))) break;
    const char *tab = memchr(b, '\t', l);
    if (!tab || tab == b) {
      s = lv_status_make(LV_ERR_CORRUPT, "--input_list=%s:%d: expected \"PATH<TAB>TRANSCRIPT\", got \"%.*s\"", list,
                         line, (int)(l > 80 ? 80 : l), b);
      break;
    }
    int plen = (int)(tab - b);
    if (b[0] == '/' || !slash)
      s = lv_path_fmt(path, sizeof path, "%.*s", plen, b);
    else
      s = lv_path_fmt(path, sizeof path, "%.*s/%.*s", dlen, list, plen, b);
    if (!s) s = items_add(out, path, tab + 1, l - (size_t)plen - 1);
    if (s) s = lv_status_wrap(s, "--input_list=%s:%d", list, line);
  }
  free(data);
  return s;
}

/* ---- output ---- */

/* Checks that t has exactly two integer conversions (%d, %5.5d, ...) and no others. */
static lv_status check_template(const char *t) {
  int convs = 0;
  for (const char *p = t; *p; p++) {
    if (*p != '%') continue;
    p++;
    if (*p == '%') continue;
    while (*p == '-' || *p == '0' || *p == ' ' || *p == '+') p++;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == '.') {
      p++;
      while (*p >= '0' && *p <= '9') p++;
    }
    if (*p != 'd')
      return lv_status_make(LV_ERR_INVALID,
                            "--output_template=%s: expected two integer fields such as "
                            "out.tfrecords-%%5.5d-of-%%5.5d (shard, number of shards), found another %% conversion",
                            t);
    convs++;
  }
  if (convs != 2)
    return lv_status_make(LV_ERR_INVALID,
                          "--output_template=%s: expected two integer fields such as out.tfrecords-%%5.5d-of-%%5.5d "
                          "(shard, number of shards), found %d",
                          t, convs);
  return NULL;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static lv_status shard_path(char *out, size_t cap, int64_t shard, int64_t total) {
  return lv_path_fmt(out, cap, flag_output_template, (int)shard, (int)total);
}
#pragma GCC diagnostic pop

typedef struct job {
  trans_map trans;
  lv_mel_frontend *fe;
  int64_t n_out;
  lv_tfrecord_writer **w; /* [n_out] under temporary names */
  char (*final_path)[4096];
  char (*tmp_path)[4096];
  int64_t next_writer;
  int64_t seen;      /* audio files met, for the shard rule */
  int64_t expected;  /* this process's files, or an estimate; for the ETA */
  int64_t done, written, skipped;
  int64_t frames_total;
  double audio_seconds;
  double t0, last_report;
} job;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fmt_dur(double s, char *out, size_t n) {
  long t = (long)(s + 0.5);
  if (t >= 3600)
    snprintf(out, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60)
    snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
  else
    snprintf(out, n, "%lds", t);
}

static void progress(job *j, bool final) {
  double t = now_s();
  if (!final && t - j->last_report < flag_progress_seconds) return;
  j->last_report = t;
  double el = t - j->t0, rate = el > 0 ? (double)j->done / el : 0;
  char eta[32] = "?", els[32];
  fmt_dur(el, els, sizeof els);
  if (rate > 0 && j->expected > j->done) fmt_dur((double)(j->expected - j->done) / rate, eta, sizeof eta);
  if (final)
    lv_info("create_asr_features: %lld files, %lld examples written, %lld skipped, %.1f s of audio in %s (%.0fx "
            "real time)",
            (long long)j->done, (long long)j->written, (long long)j->skipped, j->audio_seconds, els,
            el > 0 ? j->audio_seconds / el : 0.0);
  else
    lv_info("create_asr_features: %lld/%lld files (%.1f%%), %.1f files/s, %s elapsed, ETA %s", (long long)j->done,
            (long long)j->expected, j->expected ? 100.0 * (double)j->done / (double)j->expected : 0.0, rate, els,
            eta);
}

/* A bad input file: the error, or (--skip_bad_files) a warning and a count. */
static lv_status bad_file(job *j, lv_status s) {
  if (!flag_skip_bad_files) return s;
  lv_warn("skipping: %s", lv_status_msg(s));
  lv_status_free(s);
  j->skipped++;
  return NULL;
}

static void ascii_lower(char *s) {
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

/* One audio file (bytes at data, or read from name when data is NULL). */
static lv_status one_audio(job *j, const char *name, const void *data, size_t len, const char *text) {
  j->seen++;
  if (flag_num_shards > 0 && j->seen % flag_num_shards != flag_shard_id) return NULL;
  char *id = utt_id(name);
  if (!id) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  if (!text) text = trans_find(&j->trans, id);
  lv_status s = check_uttid(name, id);
  lv_audio a = {0};
  float *frames = NULL;
  char *lower = NULL, *pcm = NULL;
  lv_example *ex = NULL;
  uint8_t *bytes = NULL;
  size_t nbytes = 0;
  j->done++;
  if (s) {
    s = bad_file(j, s);
    goto done;
  }
  if (!text) {
    s = bad_file(j, lv_status_make(LV_ERR_NOT_FOUND, "%s: no transcript for utterance %s", name, id));
    goto done;
  }
  s = data ? lv_audio_decode(data, len, name, 16000, &a) : lv_audio_read_file(name, 16000, &a);
  if (s) {
    s = bad_file(j, s);
    goto done;
  }
  int64_t t = lv_mel_frontend_num_frames(j->fe, a.n);
  if (t == 0) {
    s = bad_file(j, lv_status_make(LV_ERR_CORRUPT,
                                   "%s: %lld samples at 16 kHz (%.3f s): too short for one 25 ms frame (401 samples)",
                                   name, (long long)a.n, (double)a.n / 16000));
    goto done;
  }
  frames = malloc(sizeof(float) * (size_t)t * 80);
  lower = strdup(text);
  ex = lv_example_new();
  if (!frames || !lower || !ex) {
    s = lv_status_make(LV_ERR_RESOURCE, "%s: out of memory for %lld frames", name, (long long)t);
    goto done;
  }
  if ((s = lv_mel_frontend_compute(j->fe, a.samples, NULL, a.n, frames, NULL))) {
    s = bad_file(j, lv_status_wrap(s, "%s", name));
    goto done;
  }
  ascii_lower(lower);
  const char *idv[1] = {id}, *tv[1] = {lower};
  size_t idl[1] = {strlen(id)}, tl[1] = {strlen(lower)};
  lv_example_add_bytes(ex, "uttid", 1, idv, idl);
  lv_example_add_bytes(ex, "transcript", 1, tv, tl);
  lv_example_add_floats(ex, "frames", (int)(t * 80), frames);
  if (flag_write_pcm) {
    /* lingvoc's pcm16: the 16 kHz samples the frames came from, for AsrInput's waveform
     * augmentation (speed, reverberation, noise, gain). */
    pcm = malloc((size_t)a.n * 2 + 1);
    if (!pcm) {
      s = lv_status_make(LV_ERR_RESOURCE, "%s: out of memory for %lld samples", name, (long long)a.n);
      goto done;
    }
    for (int64_t i = 0; i < a.n; i++) {
      float v = nearbyintf(a.samples[i]);
      int16_t q = (int16_t)(v > 32767.0f ? 32767 : v < -32768.0f ? -32768 : v);
      pcm[2 * i] = (char)(q & 0xff);
      pcm[2 * i + 1] = (char)((uint16_t)q >> 8);
    }
    const char *pv[1] = {pcm};
    size_t pl[1] = {(size_t)a.n * 2};
    lv_example_add_bytes(ex, "pcm16", 1, pv, pl);
  }
  if ((s = lv_example_serialize(ex, &bytes, &nbytes))) goto done;
  lv_tfrecord_writer *w = j->w[j->next_writer];
  j->next_writer = (j->next_writer + 1) % j->n_out;
  if ((s = lv_tfrecord_writer_write(w, bytes, nbytes))) goto done;
  j->written++;
  j->frames_total += t;
  j->audio_seconds += (double)a.n / 16000.0;
  lv_debug("utt[%lld]: %s [%lld frames, %zu chars]", (long long)j->seen, id, (long long)t, strlen(text));
done:
  progress(j, false);
  free(bytes);
  lv_example_free(ex);
  free(lower);
  free(pcm);
  free(frames);
  lv_audio_free(&a);
  free(id);
  return s;
}

static bool want_audio(const char *name) { return is_audio(name); }

static lv_status tar_audio_member(void *ctx, const char *name, const void *data, size_t len) {
  return one_audio(ctx, name, data, len, NULL);
}

/* ---- signals ---- */

/* The temporary files of this run, removed by the handler of SIGINT, SIGTERM and SIGHUP:
 * g_tmp[0, g_ntmp) (a path is counted before its file is created) and g_trans_tmp. */
static char (*volatile g_tmp)[4096];
static volatile sig_atomic_t g_ntmp;
static char g_trans_tmp[4096];
static volatile sig_atomic_t g_trans_tmp_set;

static void put_err(const char *m) {
  ssize_t r = write(2, m, strlen(m));
  (void)r;
}

/* Async-signal-safe: unlink, write and _exit only. */
static void on_signal(int sig) {
  for (sig_atomic_t i = 0; i < g_ntmp; i++) unlink(g_tmp[i]);
  if (g_trans_tmp_set) unlink(g_trans_tmp);
  put_err(sig == SIGINT ? "create_asr_features: interrupted (SIGINT)"
          : sig == SIGTERM ? "create_asr_features: terminated (SIGTERM)" : "create_asr_features: hung up (SIGHUP)");
  put_err(": its temporary files (*.tmp-PID) removed; outputs not yet renamed into place were not written\n");
  _exit(128 + sig);
}

static void catch_signals(void) {
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  static const int kSigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < LV_ARRAY_LEN(kSigs); i++) sigaddset(&sa.sa_mask, kSigs[i]);
  /* A signal ignored at start (nohup, a background job's SIGINT) stays ignored. */
  for (size_t i = 0; i < LV_ARRAY_LEN(kSigs); i++) {
    struct sigaction old;
    if (sigaction(kSigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(kSigs[i], &sa, NULL);
  }
}

/* ---- outputs ---- */

static void close_outputs(job *j, bool keep) {
  for (int64_t i = 0; i < j->n_out; i++) {
    if (!j->w || !j->w[i]) continue;
    lv_status s = lv_tfrecord_writer_close(j->w[i]);
    j->w[i] = NULL;
    if (s) lv_status_free(s);
    if (!keep) unlink(j->tmp_path[i]);
  }
}

/* An error when an output (flag out_flag, path out) is the input in_flag names. */
static lv_status refuse_input(const char *out_flag, const char *out, const char *in_flag, const char *in) {
  if (!*in || !lv_file_same(out, in)) return NULL;
  return lv_status_make(LV_ERR_INVALID, "%s: %s is the %s file %s; it would be overwritten", out_flag, out, in_flag,
                        in);
}

typedef struct file_id {
  dev_t dev;
  ino_t ino;
  const char *out;
} file_id;

static int cmp_file_id(const void *a, const void *b) {
  const file_id *x = a, *y = b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  return (x->ino > y->ino) - (x->ino < y->ino);
}

/* An error when one of outs[n] (those that exist) is one of the audio or transcript
 * files of the lists: compared by device and inode, one stat per input. */
static lv_status refuse_listed(const char *out_flag, char (*outs)[4096], int64_t n, const item_list *const *lists,
                               int nlists) {
  file_id *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
  if (!ids) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  int64_t k = 0;
  struct stat st;
  for (int64_t i = 0; i < n; i++)
    if (stat(outs[i], &st) == 0) ids[k++] = (file_id){st.st_dev, st.st_ino, outs[i]};
  if (k > 1) qsort(ids, (size_t)k, sizeof *ids, cmp_file_id);
  lv_status s = NULL;
  for (int l = 0; k && !s && l < nlists; l++)
    for (int64_t i = 0; !s && i < lists[l]->n; i++) {
      if (stat(lists[l]->v[i].path, &st) != 0) continue;
      file_id key = {st.st_dev, st.st_ino, NULL};
      const file_id *hit = bsearch(&key, ids, (size_t)k, sizeof *ids, cmp_file_id);
      if (hit)
        s = lv_status_make(LV_ERR_INVALID, "%s: %s is the input file %s; it would be overwritten", out_flag, hit->out,
                           lists[l]->v[i].path);
    }
  free(ids);
  return s;
}

/* Each output shard open at once, plus a few: the soft open-file limit is raised to it
 * when the hard limit allows, else an error before any work. */
static lv_status check_open_files(int64_t n_out) {
  const rlim_t need = (rlim_t)n_out + 16;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return NULL;
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
    struct rlimit up = {need, rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &up) == 0) return NULL;
  }
  return lv_status_make(LV_ERR_INVALID,
                        "%lld output shards stay open at once, but the open-file limit allows %llu (RLIMIT_NOFILE, "
                        "hard limit %llu; %llu needed): raise it (ulimit -n) or give this process fewer shards "
                        "(--output_range_begin/--output_range_end, or --num_shards)",
                        (long long)n_out, (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
                        (unsigned long long)need);
}

/* The output shards' names, where each is written (a symlink's target) and its
 * temporary name, before any work: a bad range, a FIFO or device, an input named as an
 * output or too many shards for the open-file limit fail at once. */
static lv_status plan_outputs(job *j) {
  int64_t total = flag_num_output_shards > 0 ? flag_num_output_shards : 1;
  int64_t b = flag_output_range_begin, e = flag_output_range_end;
  if (b < 0 && e < 0) {
    if (flag_num_shards > 0) {
      if (total % flag_num_shards)
        return lv_status_make(LV_ERR_INVALID, "--num_shards=%lld must divide --num_output_shards=%lld",
                              (long long)flag_num_shards, (long long)total);
      int64_t k = total / flag_num_shards;
      b = flag_shard_id * k;
      e = b + k;
    } else {
      b = 0;
      e = total;
    }
  }
  if (b < 0 || e <= b || e > total)
    return lv_status_make(LV_ERR_INVALID,
                          "--output_range_begin=%lld --output_range_end=%lld: expected 0 <= begin < end <= "
                          "--num_output_shards=%lld",
                          (long long)b, (long long)e, (long long)total);
  if (e - b > 100000) return lv_status_make(LV_ERR_INVALID, "%lld output shards: at most 100000", (long long)(e - b));
  LV_TRY(check_open_files(e - b));
  j->n_out = e - b;
  j->w = calloc((size_t)j->n_out, sizeof *j->w);
  j->final_path = calloc((size_t)j->n_out, sizeof *j->final_path);
  j->tmp_path = calloc((size_t)j->n_out, sizeof *j->tmp_path);
  if (!j->w || !j->final_path || !j->tmp_path) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  char name[4096];
  for (int64_t i = 0; i < j->n_out; i++) {
    bool stream = false;
    LV_TRY(lv_status_wrap(shard_path(name, sizeof name, b + i, total), "--output_template"));
    LV_TRY(lv_file_output_target(name, "--output_template", j->final_path[i], sizeof j->final_path[i], &stream));
    if (stream)
      return lv_status_make(LV_ERR_INVALID, "--output_template: %s is a FIFO, device or socket; expected a regular "
                            "file or a new name (shards are written under a temporary name and renamed into place)",
                            name);
    LV_TRY(lv_path_fmt(j->tmp_path[i], sizeof j->tmp_path[i], "%s.tmp-%ld", j->final_path[i], (long)getpid()));
    static const char *const kInFlag[] = {"--input_list", "--input_tarball", "--transcripts_filepath"};
    const char *in[] = {flag_input_list, flag_input_tarball, flag_transcripts_filepath};
    for (size_t k = 0; k < LV_ARRAY_LEN(in); k++)
      LV_TRY(refuse_input("--output_template", j->final_path[i], kInFlag[k], in[k]));
  }
  return NULL;
}

static lv_status open_outputs(job *j) {
  g_tmp = j->tmp_path;
  for (int64_t i = 0; i < j->n_out; i++) {
    char *slash = strrchr(j->final_path[i], '/');
    if (slash && slash != j->final_path[i]) {
      *slash = 0;
      lv_status s = lv_file_mkdirs(j->final_path[i]);
      *slash = '/';
      LV_TRY(s);
    }
    g_ntmp = (sig_atomic_t)(i + 1);
    lv_status s = lv_tfrecord_writer_open(j->tmp_path[i], false, &j->w[i]);
    if (s) return lv_status_wrap(s, "--output_template=%s", flag_output_template);
  }
  return NULL;
}

/* Closes every shard, then renames each into place; on a failure (a full disk at close, a
 * rename refused) the temporary files not renamed are removed. */
static lv_status commit_outputs(job *j) {
  lv_status s = NULL;
  for (int64_t i = 0; i < j->n_out; i++) {
    lv_status c = lv_tfrecord_writer_close(j->w[i]);
    j->w[i] = NULL;
    if (c && !s) s = c;
    else if (c) lv_status_free(c);
  }
  int64_t renamed = 0;
  while (!s && renamed < j->n_out) {
    if (rename(j->tmp_path[renamed], j->final_path[renamed]))
      s = lv_status_make(LV_ERR_IO, "rename %s -> %s: %s", j->tmp_path[renamed], j->final_path[renamed],
                         strerror(errno));
    else lv_info("wrote %s", j->final_path[renamed++]);
  }
  if (s)
    for (int64_t i = renamed; i < j->n_out; i++) unlink(j->tmp_path[i]);
  return s;
}

/* "UTTID TEXT" lines, sorted, to --transcripts_filepath: atomically into a regular file
 * (a symlink's target), directly into a FIFO or device (/dev/stdout). */
static lv_status dump_transcripts(trans_map *m, const item_list *const *lists, int nlists) {
  char target[4096];
  bool stream = false;
  LV_TRY(lv_file_output_target(flag_transcripts_filepath, "--transcripts_filepath", target, sizeof target, &stream));
  char outs[1][4096];
  memcpy(outs[0], target, sizeof target);
  static const char *const kFlag = "--transcripts_filepath";
  LV_TRY(refuse_input(kFlag, target, "--input_list", flag_input_list));
  LV_TRY(refuse_input(kFlag, target, "--input_tarball", flag_input_tarball));
  if (!stream) LV_TRY(refuse_listed(kFlag, outs, 1, lists, nlists));
  trans_sort(m);
  size_t cap = 1, n = 0;
  for (int64_t i = 0; i < m->n; i++) cap += strlen(m->v[i].id) + strlen(m->v[i].text) + 2;
  char *buf = malloc(cap);
  if (!buf) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  for (int64_t i = 0; i < m->n; i++) n += (size_t)sprintf(buf + n, "%s %s\n", m->v[i].id, m->v[i].text);
  lv_status s = NULL;
  if (stream) {
    s = lv_file_write_stream(target, buf, n);
  } else {
    /* lv_file_write_atomic's temporary name, for the signal handler. */
    s = lv_path_fmt(g_trans_tmp, sizeof g_trans_tmp, "%s.tmp%d", target, (int)getpid());
    g_trans_tmp_set = !s;
    if (!s) s = lv_file_write_atomic(target, buf, n);
  }
  free(buf);
  if (!s) lv_info("%lld transcripts written to %s", (long long)m->n, target);
  return lv_status_wrap(s, "%s", kFlag);
}

static lv_status load_trans_files(const item_list *files, trans_map *m) {
  for (int64_t i = 0; i < files->n; i++) {
    char *data;
    size_t len;
    LV_TRY(lv_file_read_all(files->v[i].path, &data, &len));
    lv_status s = parse_trans(data, len, files->v[i].path, m);
    free(data);
    LV_TRY(s);
  }
  return NULL;
}

static lv_status check_flags(void) {
  int inputs = !!*flag_input_tarball + !!*flag_input_dir + !!*flag_input_list;
  if (inputs != 1)
    return lv_status_make(LV_ERR_INVALID, "give exactly one of --input_tarball, --input_dir, --input_list (%d given)",
                          inputs);
  if (!flag_dump_transcripts && !flag_generate_tfrecords)
    return lv_status_make(LV_ERR_INVALID, "Nothing to do! Use --dump_transcripts, --generate_tfrecords or both");
  if (flag_dump_transcripts && !*flag_transcripts_filepath)
    return lv_status_make(LV_ERR_INVALID, "--dump_transcripts needs --transcripts_filepath");
  if (flag_generate_tfrecords) LV_TRY(check_template(flag_output_template));
  if ((flag_num_shards > 0) != (flag_shard_id >= 0) || (flag_num_shards > 0 && flag_shard_id >= flag_num_shards))
    return lv_status_make(LV_ERR_INVALID, "--shard_id=%lld --num_shards=%lld: expected 0 <= shard_id < num_shards",
                          (long long)flag_shard_id, (long long)flag_num_shards);
  if (flag_num_output_shards == 0 || flag_num_output_shards < -1 || flag_num_output_shards > 100000)
    return lv_status_make(LV_ERR_INVALID, "--num_output_shards=%lld: expected 1..100000 (or -1, the default: 1)",
                          (long long)flag_num_output_shards);
  return NULL;
}

static lv_status run(void) {
  LV_TRY(check_flags());
  catch_signals();
  job j = {0};
  item_list audio = {0}, trans_files = {0};
  const item_list *lists[] = {&audio, &trans_files};
  lv_status s = flag_generate_tfrecords ? plan_outputs(&j) : NULL;
  if (s) goto done;
  bool have_file = false;
  /* With --dump_transcripts too, the transcripts come from the input and are written. */
  if (flag_generate_tfrecords && !flag_dump_transcripts && *flag_transcripts_filepath && !*flag_input_list) {
    struct stat st;
    have_file = stat(flag_transcripts_filepath, &st) == 0;
  }
  /* Pass 1: transcripts. */
  if (*flag_input_list) {
    s = read_list(flag_input_list, &audio);
    if (!s && flag_dump_transcripts)
      for (int64_t i = 0; !s && i < audio.n; i++) {
        char *id = utt_id(audio.v[i].path);
        s = id ? check_uttid(audio.v[i].path, id) : lv_status_make(LV_ERR_RESOURCE, "out of memory");
        if (!s) s = trans_add(&j.trans, id, strlen(id), audio.v[i].text, strlen(audio.v[i].text));
        free(id);
      }
  } else if (have_file) {
    char *data;
    size_t len;
    s = lv_file_read_all(flag_transcripts_filepath, &data, &len);
    if (!s) {
      s = parse_trans(data, len, flag_transcripts_filepath, &j.trans);
      free(data);
    }
  } else if (*flag_input_dir) {
    s = walk_dir(flag_input_dir, &audio, &trans_files);
    if (!s) s = load_trans_files(&trans_files, &j.trans);
  } else {
    lv_info("first pass: reading the transcripts of %s", flag_input_tarball);
    s = tar_walk(flag_input_tarball, want_trans, add_trans_member, &j.trans);
  }
  if (!s && *flag_input_dir && have_file) s = walk_dir(flag_input_dir, &audio, &trans_files);
  if (s) goto done;
  trans_sort(&j.trans);
  if (flag_dump_transcripts) {
    s = dump_transcripts(&j.trans, lists, (int)LV_ARRAY_LEN(lists));
    if (s || !flag_generate_tfrecords) goto done;
  }
  lv_info("total transcripts: %lld", (long long)(*flag_input_list ? audio.n : j.trans.n));
  /* Pass 2: features. */
  lv_mel_frontend_opts fo = lv_mel_frontend_opts_librispeech();
  if ((s = lv_mel_frontend_create(&fo, &j.fe))) goto done;
  if ((s = refuse_listed("--output_template", j.final_path, j.n_out, lists, (int)LV_ARRAY_LEN(lists)))) goto done;
  if ((s = open_outputs(&j))) goto done;
  int64_t n_all = *flag_input_tarball ? j.trans.n : audio.n;
  j.expected = flag_num_shards > 0 ? (n_all + flag_num_shards - 1 - flag_shard_id) / flag_num_shards : n_all;
  j.t0 = j.last_report = now_s();
  if (*flag_input_tarball)
    s = tar_walk(flag_input_tarball, want_audio, tar_audio_member, &j);
  else
    for (int64_t i = 0; !s && i < audio.n; i++) s = one_audio(&j, audio.v[i].path, NULL, 0, audio.v[i].text);
  if (!s && j.written == 0)
    s = lv_status_make(LV_ERR_INVALID, "no examples written: %lld audio files found, %lld skipped",
                       (long long)j.seen, (long long)j.skipped);
  if (!s) {
    progress(&j, true);
    s = commit_outputs(&j);
  }
done:
  close_outputs(&j, false);
  free(j.w);
  free(j.final_path);
  free(j.tmp_path);
  lv_mel_frontend_free(j.fe);
  trans_free(&j.trans);
  items_free(&audio);
  items_free(&trans_files);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  lv_flag flags[] = {
      LV_FLAG_STR("input_tarball", &flag_input_tarball, "Input .tar.gz file (LibriSpeech's layout)."),
      LV_FLAG_STR("input_dir", &flag_input_dir, "Directory in LibriSpeech's layout (*.trans.txt beside the audio)."),
      LV_FLAG_STR("input_list", &flag_input_list,
                  "File of PATH<TAB>TRANSCRIPT lines (relative paths from the list's directory)."),
      LV_FLAG_STR("input_text", &flag_input_text, "Reference text (defined but unused by Lingvo too)."),
      LV_FLAG_STR("output_template", &flag_output_template,
                  "File of tfrecords: a template with two integer fields, e.g. out.tfrecords-%5.5d-of-%5.5d."),
      LV_FLAG_BOOL("dump_transcripts", &flag_dump_transcripts,
                   "First pass through the tarball to read the transcripts."),
      LV_FLAG_STR("transcripts_filepath", &flag_transcripts_filepath, "Where to put the transcripts."),
      LV_FLAG_BOOL("generate_tfrecords", &flag_generate_tfrecords,
                   "Second pass generates the tf records (with --dump_transcripts: after the dump)."),
      LV_FLAG_I64("shard_id", &flag_shard_id, "Processor shard (-1: not sharded)."),
      LV_FLAG_I64("num_shards", &flag_num_shards,
                  "Number of processor shards. Must divide num_output_shards (-1: not sharded)."),
      LV_FLAG_I64("output_range_begin", &flag_output_range_begin,
                  "Begin of output shard IDs (-1: shard_id's share of num_output_shards)."),
      LV_FLAG_I64("output_range_end", &flag_output_range_end, "End of output shard IDs."),
      LV_FLAG_I64("num_output_shards", &flag_num_output_shards,
                  "Total number of output shards, 1..100000 (-1: 1); this process's stay open at once."),
      LV_FLAG_BOOL("skip_bad_files", &flag_skip_bad_files,
                   "Skip (and count) unreadable audio and audio without a transcript instead of failing."),
      LV_FLAG_F64("progress_seconds", &flag_progress_seconds, "Seconds between progress lines."),
      LV_FLAG_BOOL("write_pcm", &flag_write_pcm,
                   "lingvoc: also store the 16 kHz samples (feature pcm16: int16 little-endian bytes), which "
                   "the input's waveform augmentation (input.speed_perturb_factors, ...) needs; as many bytes as "
                   "the frames (twice the records)."),
  };
  bool help = false;
  lv_status s = lv_flags_parse(flags, (int)LV_ARRAY_LEN(flags), argc, argv, kUsage, &help);
  if (s || help) return lv_status_report("create_asr_features", s);
  return lv_status_report("create_asr_features", run());
}
