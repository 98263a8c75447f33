/* TFRecord reader and writer; see tfrecord.h for the format and the error policy. */
#include "io/tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/crc32c.h"
#include "base/file.h"

static void put_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static uint32_t get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- writer ---- */

struct lv_tfrecord_writer {
  FILE *f;
  char *path;
};

lv_status lv_tfrecord_writer_open(const char *path, bool append, lv_tfrecord_writer **out) {
  *out = NULL;
  FILE *f = fopen(path, append ? "ab" : "wb");
  if (!f) return lv_status_make(LV_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
  lv_tfrecord_writer *w = calloc(1, sizeof(*w));
  LV_ASSERT(w);
  w->f = f;
  w->path = strdup(path);
  LV_ASSERT(w->path);
  /* Records are small and many; a large stdio buffer turns them into few write(2)s. */
  setvbuf(f, NULL, _IOFBF, 1 << 16);
  *out = w;
  return NULL;
}

const char *lv_tfrecord_writer_path(const lv_tfrecord_writer *w) { return w->path; }

void lv_tfrecord_frame(const void *data, size_t len, uint8_t *out) {
  put_le64(out, (uint64_t)len);
  put_le32(out + 8, lv_crc32c_mask(lv_crc32c(out, 8)));
  if (len) memcpy(out + 12, data, len);
  put_le32(out + 12 + len, lv_crc32c_mask(lv_crc32c(data, len)));
}

lv_status lv_tfrecord_writer_write(lv_tfrecord_writer *w, const void *data, size_t len) {
  uint8_t head[12], foot[4];
  put_le64(head, (uint64_t)len);
  put_le32(head + 8, lv_crc32c_mask(lv_crc32c(head, 8)));
  put_le32(foot, lv_crc32c_mask(lv_crc32c(data, len)));
  if (fwrite(head, 1, 12, w->f) != 12 || (len && fwrite(data, 1, len, w->f) != len) ||
      fwrite(foot, 1, 4, w->f) != 4)
    return lv_status_make(LV_ERR_IO, "%s: write of a %zu-byte record failed: %s", w->path, len,
                          strerror(errno));
  return NULL;
}

lv_status lv_tfrecord_writer_flush(lv_tfrecord_writer *w) {
  if (fflush(w->f) != 0)
    return lv_status_make(LV_ERR_IO, "%s: flush failed: %s", w->path, strerror(errno));
  if (fsync(fileno(w->f)) != 0 && errno != EINVAL && errno != EROFS)
    return lv_status_make(LV_ERR_IO, "%s: fsync failed: %s", w->path, strerror(errno));
  return NULL;
}

lv_status lv_tfrecord_writer_close(lv_tfrecord_writer *w) {
  if (!w) return NULL;
  lv_status s = lv_tfrecord_writer_flush(w);
  if (fclose(w->f) != 0 && !s)
    s = lv_status_make(LV_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
  free(w->path);
  free(w);
  return s;
}

/* ---- reader ---- */

struct lv_tfrecord_reader {
  char *path;
  const uint8_t *map; /* mapped: the whole file, read-only; NULL when streaming */
  size_t size;        /* mapped: the file's size */
  size_t pos;
  bool skip_corrupt;
  int64_t skipped;
  /* Streaming (gzip): a window of the uncompressed stream, buf[0] at offset base. */
  gzFile gz;
  uint8_t *buf;
  size_t base, have, cap;
  bool at_eof;
};

/* A record in a gzip file may have at most this many bytes: the window holds a whole
 * record, and a corrupt length field must not ask for gigabytes. */
#define STREAM_MAX_RECORD ((size_t)1 << 30)
#define STREAM_CHUNK ((size_t)1 << 16)

lv_status lv_tfrecord_reader_open(const char *path, bool skip_corrupt, lv_tfrecord_reader **out) {
  *out = NULL;
  int fd;
  /* A FIFO would block the open and cannot be mapped: refused before it is opened. */
  LV_TRY(lv_file_open_regular(path, "TFRecord file", &fd));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return lv_status_make(LV_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
  }
  const uint8_t *map = NULL;
  if (st.st_size > 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int e = errno;
      close(fd);
      return lv_status_make(LV_ERR_IO, "%s: cannot map: %s", path, strerror(e));
    }
    madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
    map = m;
  }
  close(fd);
  lv_tfrecord_reader *r = calloc(1, sizeof(*r));
  LV_ASSERT(r);
  r->path = strdup(path);
  LV_ASSERT(r->path);
  r->map = map;
  r->size = (size_t)st.st_size;
  r->skip_corrupt = skip_corrupt;
  *out = r;
  return NULL;
}

lv_status lv_tfrecord_reader_open_gzip(const char *path, bool skip_corrupt, lv_tfrecord_reader **out) {
  *out = NULL;
  int fd;
  LV_TRY(lv_file_open_regular(path, "TFRecord file", &fd));
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    close(fd);
    return lv_status_make(LV_ERR_RESOURCE, "%s: cannot open: out of memory", path);
  }
  lv_tfrecord_reader *r = calloc(1, sizeof(*r));
  LV_ASSERT(r);
  LV_ASSERT(asprintf(&r->path, "%s (gzip; offsets uncompressed)", path) >= 0);
  r->skip_corrupt = skip_corrupt;
  r->gz = gz;
  *out = r;
  return NULL;
}

/* The byte at offset pos (which the caller made available). */
static const uint8_t *at(const lv_tfrecord_reader *r, size_t pos) {
  return r->gz ? r->buf + (pos - r->base) : r->map + pos;
}

/* Makes [pos, pos + n) available if the file has those bytes; *avail: how many bytes from
 * pos are (fewer than n only at the end of the file). Streaming, the bytes before pos are
 * dropped: callers never look back before the offset they ask for. */
static lv_status fill(lv_tfrecord_reader *r, size_t pos, size_t n, size_t *avail) {
  if (!r->gz) {
    *avail = r->size - pos;
    return NULL;
  }
  LV_ASSERT(pos >= r->base && pos <= r->base + r->have);
  if (pos + n > r->base + r->have && !r->at_eof) {
    size_t drop = pos - r->base;
    if (drop) memmove(r->buf, r->buf + drop, r->have - drop);
    r->have -= drop;
    r->base = pos;
    if (n + STREAM_CHUNK > r->cap) {
      size_t cap = n + STREAM_CHUNK;
      uint8_t *b = realloc(r->buf, cap);
      if (!b)
        return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory for a %zu-byte window at byte offset %zu", r->path,
                              n, pos);
      r->buf = b;
      r->cap = cap;
    }
    while (r->have < n && !r->at_eof) {
      size_t want = r->cap - r->have;
      int got = gzread(r->gz, r->buf + r->have, (unsigned)(want < ((size_t)1 << 30) ? want : (size_t)1 << 30));
      if (got < 0) {
        int code;
        const char *msg = gzerror(r->gz, &code), *colon = strstr(msg, ": ");
        /* zlib's message starts with the name it was given, "<fd:N>: " */
        return lv_status_make(LV_ERR_CORRUPT, "%s: bad gzip data after %zu uncompressed bytes: %s", r->path,
                              r->base + r->have, colon ? colon + 2 : msg);
      }
      if (got == 0) {
        /* zlib's gzread ends a gzip stream cut short as if it were whole. */
        int code;
        gzerror(r->gz, &code);
        if (code == Z_BUF_ERROR)
          return lv_status_make(LV_ERR_CORRUPT, "%s: the gzip data ends early (a truncated file?) after %zu "
                                "uncompressed bytes", r->path, r->base + r->have);
        r->at_eof = true;
      }
      r->have += (size_t)got;
    }
  }
  *avail = r->base + r->have - pos;
  return NULL;
}

/* Checks the record at pos: *why NULL if it is whole and valid (setting *dlen); otherwise a
 * short description of what is wrong. An error: the file could not be read. */
static lv_status check_record(lv_tfrecord_reader *r, size_t pos, size_t *dlen, const char **why) {
  size_t avail;
  *why = NULL;
  LV_TRY(fill(r, pos, 12, &avail));
  if (avail < 12) {
    *why = "truncated record header";
    return NULL;
  }
  const uint8_t *p = at(r, pos);
  if (lv_crc32c_unmask(get_le32(p + 8)) != lv_crc32c(p, 8)) {
    *why = "length checksum mismatch";
    return NULL;
  }
  uint64_t len = get_le64(p);
  if (r->gz) {
    if (len > STREAM_MAX_RECORD) {
      *why = "record length over the 1 GiB a gzip file's record may have";
      return NULL;
    }
    LV_TRY(fill(r, pos, 12 + (size_t)len + 4, &avail));
    p = at(r, pos);
  }
  if (len > avail - 12 || avail - 12 - len < 4) {
    *why = "truncated record data";
    return NULL;
  }
  if (lv_crc32c_unmask(get_le32(p + 12 + len)) != lv_crc32c(p + 12, (size_t)len)) {
    *why = "data checksum mismatch";
    return NULL;
  }
  *dlen = (size_t)len;
  return NULL;
}

lv_status lv_tfrecord_reader_next(lv_tfrecord_reader *r, const uint8_t **data, size_t *len, bool *eof) {
  *data = NULL;
  *len = 0;
  *eof = false;
  size_t avail;
  LV_TRY(fill(r, r->pos, 1, &avail));
  if (avail == 0) {
    *eof = true;
    return NULL;
  }
  size_t dlen;
  const char *why;
  LV_TRY(check_record(r, r->pos, &dlen, &why));
  if (why && !r->skip_corrupt) {
    LV_TRY(fill(r, r->pos, 12, &avail));
    char size[64] = "";
    if (!r->gz)
      snprintf(size, sizeof size, ", file size %zu", r->size);
    else if (r->at_eof)
      snprintf(size, sizeof size, ", uncompressed size %zu", r->base + r->have);
    if (avail >= 12) {
      uint64_t l = get_le64(at(r, r->pos));
      return lv_status_make(LV_ERR_CORRUPT, "%s: corrupt record at byte offset %zu: %s (record length field %llu%s)",
                            r->path, r->pos, why, (unsigned long long)l, size);
    }
    return lv_status_make(LV_ERR_CORRUPT, "%s: corrupt record at byte offset %zu: %s (%zu bytes left)", r->path,
                          r->pos, why, avail);
  }
  if (why) {
    /* Resynchronise: the next offset where a record with both checksums valid starts. A
     * random 8-byte window matches its crc with probability 2^-32, and the data crc must
     * match too, so false resyncs are negligible. */
    r->skipped++;
    size_t p = r->pos + 1;
    for (;;) {
      LV_TRY(fill(r, p, 1, &avail));
      if (avail == 0) {
        r->pos = p;
        *eof = true;
        return NULL;
      }
      LV_TRY(check_record(r, p, &dlen, &why));
      if (!why) break;
      p++;
    }
    r->pos = p;
  }
  *data = at(r, r->pos + 12);
  *len = dlen;
  r->pos += 12 + dlen + 4;
  return NULL;
}

int64_t lv_tfrecord_reader_skipped(const lv_tfrecord_reader *r) { return r->skipped; }
uint64_t lv_tfrecord_reader_offset(const lv_tfrecord_reader *r) { return r->pos; }
const char *lv_tfrecord_reader_path(const lv_tfrecord_reader *r) { return r->path; }

void lv_tfrecord_reader_close(lv_tfrecord_reader *r) {
  if (!r) return;
  if (r->map) munmap((void *)r->map, r->size);
  if (r->gz) gzclose(r->gz);
  free(r->buf);
  free(r->path);
  free(r);
}
