#include "audio/audio_file.h"

#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/mem.h"

/* libsndfile's virtual I/O over a buffer in memory. */
typedef struct mem_io {
  const unsigned char *data;
  sf_count_t len, pos;
} mem_io;

static sf_count_t mem_len(void *u) { return ((mem_io *)u)->len; }
static sf_count_t mem_seek(sf_count_t off, int whence, void *u) {
  mem_io *m = u;
  sf_count_t p = whence == SEEK_SET ? off : whence == SEEK_CUR ? m->pos + off : m->len + off;
  if (p < 0) p = 0;
  if (p > m->len) p = m->len;
  m->pos = p;
  return p;
}
static sf_count_t mem_read(void *ptr, sf_count_t count, void *u) {
  mem_io *m = u;
  if (count > m->len - m->pos) count = m->len - m->pos;
  if (count <= 0) return 0;
  memcpy(ptr, m->data + m->pos, (size_t)count);
  m->pos += count;
  return count;
}
static sf_count_t mem_write(const void *ptr, sf_count_t count, void *u) {
  (void)ptr, (void)count, (void)u;
  return 0;
}
static sf_count_t mem_tell(void *u) { return ((mem_io *)u)->pos; }

void lv_audio_free(lv_audio *a) {
  if (!a) return;
  free(a->samples);
  memset(a, 0, sizeof *a);
}

lv_status lv_audio_resample(const float *samples, int64_t n, int in_rate, int out_rate, float **out,
                            int64_t *out_n) {
  *out = NULL;
  *out_n = 0;
  if (in_rate <= 0 || out_rate <= 0)
    return lv_status_make(LV_ERR_INVALID, "resample: rates %d -> %d Hz: expected positive rates", in_rate, out_rate);
  double ratio = (double)out_rate / in_rate;
  size_t cap = (size_t)ceil((double)n * ratio) + 16;
  void *buf = NULL;
  LV_TRY(lv_mem_alloc(cap, sizeof(float), false, "resampled audio", &buf));
  size_t done = 0;
  soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
  soxr_runtime_spec_t rt = soxr_runtime_spec(1);
  soxr_error_t err = soxr_oneshot(in_rate, out_rate, 1, samples, (size_t)n, NULL, buf, cap, &done, &io, &q, &rt);
  if (err) {
    free(buf);
    return lv_status_make(LV_ERR_INTERNAL, "resample %d -> %d Hz: libsoxr: %s", in_rate, out_rate, err);
  }
  *out = buf;
  *out_n = (int64_t)done;
  return NULL;
}

/* The line of libsndfile's header log saying that the audio data chunk (WAV "data", AIFF
 * "SSND", IFF "BODY") is longer than the file, or NULL; *len is its length. Only those: the
 * log's other "should be" lines are notes on things libsndfile already worked around (a
 * data chunk of an odd length, legal in RIFF and usual for 8-bit mono; a RIFF size past
 * the end; bext, fact or block-align fields), and such files read in full. A length of 2 GB
 * or more (0xFFFFFFFF, 0x7FFFF000, ...) is the placeholder of a writer that could not seek
 * back (ffmpeg or sox writing to a pipe): the data runs to the end of the file, which is
 * whole. */
static const char *cut_data_line(const char *log, int *len) {
  static const char *const kChunks[] = {"data :", "SSND :", "BODY :"};
  for (const char *l = log; *l;) {
    const char *e = strchr(l, '\n');
    int n = e ? (int)(e - l) : (int)strlen(l);
    const char *t = l;
    while (t < l + n && *t == ' ') t++;
    for (size_t k = 0; k < sizeof kChunks / sizeof *kChunks; k++) {
      size_t kl = strlen(kChunks[k]);
      if ((size_t)(l + n - t) >= kl && !strncmp(t, kChunks[k], kl) && memmem(t, (size_t)(l + n - t), "(should be", 10)) {
        if (strtoull(t + kl, NULL, 10) >= 0x7FFFF000ull) continue; /* a streaming writer's placeholder */
        *len = n;
        return l;
      }
    }
    if (!e) break;
    l = e + 1;
  }
  return NULL;
}

/* sf_open_virtual's error for a file it cannot read. */
static lv_status open_error(SNDFILE *sf, const char *name) {
  return lv_status_make(LV_ERR_CORRUPT, "%s: not an audio file libsndfile can read (WAV, FLAC, OGG, ...): %s", name,
                        sf_strerror(sf));
}

lv_status lv_audio_decode(const void *data, size_t len, const char *name, int target_rate, lv_audio *out) {
  memset(out, 0, sizeof *out);
  if (target_rate < 0)
    return lv_status_make(LV_ERR_INVALID, "%s: target sample rate %d: expected >= 0", name, target_rate);
  if (len == 0) return lv_status_make(LV_ERR_CORRUPT, "%s: empty file (0 bytes): expected audio", name);
  mem_io m = {data, (sf_count_t)len, 0};
  SF_VIRTUAL_IO vio = {mem_len, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info;
  memset(&info, 0, sizeof info);
  SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, &m);
  if (!sf) return open_error(NULL, name);
  lv_status st = NULL;
  float *mono = NULL, *chunk = NULL;
  if (info.channels < 1 || info.channels > 64 || info.samplerate < 1000 || info.samplerate > 1000000) {
    st = lv_status_make(LV_ERR_CORRUPT, "%s: %d channels at %d Hz: expected 1..64 channels at 1000..1000000 Hz", name,
                        info.channels, info.samplerate);
    goto done;
  }
  /* A file whose audio data chunk claims more bytes than the file has: libsndfile notes it
   * in its log and reads what is there; the file was cut short. */
  char log[4096];
  sf_command(sf, SFC_GET_LOG_INFO, log, sizeof log);
  int cut_len = 0;
  const char *cut = cut_data_line(log, &cut_len);
  if (cut) {
    st = lv_status_make(LV_ERR_CORRUPT, "%s: truncated audio file (libsndfile: %.*s)", name, cut_len, cut);
    goto done;
  }
  sf_command(sf, SFC_SET_NORM_FLOAT, NULL, SF_TRUE);
  const sf_count_t kChunk = 4096;
  /* 2^31 samples: 37 hours at 16 kHz; the frontend's frame counts and the features' value
   * counts stay within int. */
  const int64_t kMaxSamples = (int64_t)1 << 31;
  int ch = info.channels;
  chunk = malloc(sizeof(float) * (size_t)kChunk * (size_t)ch);
  /* The header's frame count sizes the first buffer, up to 4M samples: a damaged or
   * hostile header cannot make a small file ask for gigabytes (the buffer grows as the
   * samples arrive). */
  int64_t cap = info.frames > 0 && info.frames < ((int64_t)1 << 22) ? info.frames : ((int64_t)1 << 22), n = 0;
  void *mv = NULL;
  if (!chunk) {
    st = lv_status_make(LV_ERR_RESOURCE, "%s: out of memory", name);
    goto done;
  }
  if ((st = lv_mem_alloc((size_t)cap + 1, sizeof(float), false, name, &mv))) goto done;
  mono = mv;
  for (;;) {
    sf_count_t got = sf_readf_float(sf, chunk, kChunk);
    if (got <= 0) break;
    if (n + got > kMaxSamples) {
      st = lv_status_make(LV_ERR_CORRUPT, "%s: longer than %lld samples (%.1f hours at %d Hz): expected a recording "
                          "to transcribe; split it", name, (long long)kMaxSamples,
                          (double)kMaxSamples / info.samplerate / 3600, info.samplerate);
      goto done;
    }
    if (n + got > cap) {
      int64_t ncap = (n + got) * 2;
      float *g = realloc(mono, sizeof(float) * (size_t)ncap);
      if (!g) {
        st = lv_status_make(LV_ERR_RESOURCE, "%s: out of memory for %lld samples", name, (long long)ncap);
        goto done;
      }
      mono = g;
      cap = ncap;
    }
    for (sf_count_t i = 0; i < got; i++) {
      float acc = 0;
      for (int c = 0; c < ch; c++) acc += chunk[i * ch + c];
      float v = (ch == 1 ? acc : acc / (float)ch) * 32768.0f;
      if (!isfinite(v)) {
        st = lv_status_make(LV_ERR_CORRUPT, "%s: sample %lld is not a finite number", name, (long long)(n + i));
        goto done;
      }
      mono[n + i] = v;
    }
    n += got;
  }
  if (sf_error(sf) != SF_ERR_NO_ERROR) {
    st = lv_status_make(LV_ERR_CORRUPT, "%s: decoding failed after %lld samples: %s", name, (long long)n,
                        sf_strerror(sf));
    goto done;
  }
  if (info.frames > 0 && info.frames < ((int64_t)1 << 40) && n < info.frames) {
    st = lv_status_make(LV_ERR_CORRUPT, "%s: truncated: %lld of the %lld samples its header announces", name,
                        (long long)n, (long long)info.frames);
    goto done;
  }
  out->source_rate = info.samplerate;
  out->source_channels = ch;
  if (target_rate && target_rate != info.samplerate) {
    if ((double)n * target_rate / info.samplerate > (double)kMaxSamples) {
      st = lv_status_make(LV_ERR_CORRUPT, "%s: %lld samples at %d Hz are longer than %lld at %d Hz: expected a "
                          "recording to transcribe; split it", name, (long long)n, info.samplerate,
                          (long long)kMaxSamples, target_rate);
      goto done;
    }
    float *rs = NULL;
    int64_t rn = 0;
    if ((st = lv_audio_resample(mono, n, info.samplerate, target_rate, &rs, &rn))) {
      st = lv_status_wrap(st, "%s", name);
      goto done;
    }
    free(mono);
    mono = rs;
    n = rn;
  }
  out->samples = mono;
  out->n = n;
  out->rate = target_rate ? target_rate : info.samplerate;
  mono = NULL;
done:
  free(chunk);
  free(mono);
  sf_close(sf);
  return st;
}

lv_status lv_audio_read_file(const char *path, int target_rate, lv_audio *out) {
  memset(out, 0, sizeof *out);
  char *data = NULL;
  size_t len = 0;
  lv_status s = lv_file_read_all(path, &data, &len);
  if (s) return s;
  s = lv_audio_decode(data, len, path, target_rate, out);
  free(data);
  return s;
}
