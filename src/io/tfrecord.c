/* TFRecord reader and writer; see tfrecord.h for the format and the error policy. */
#include "io/tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
  const uint8_t *map; /* whole file, read-only */
  size_t size;
  size_t pos;
  bool skip_corrupt;
  int64_t skipped;
};

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

/* Checks the record at pos. Returns NULL if it is whole and valid (setting *dlen);
 * otherwise a short description of what is wrong. */
static const char *check_record(const lv_tfrecord_reader *r, size_t pos, size_t *dlen) {
  size_t avail = r->size - pos;
  if (avail < 12) return "truncated record header";
  const uint8_t *p = r->map + pos;
  if (lv_crc32c_unmask(get_le32(p + 8)) != lv_crc32c(p, 8)) return "length checksum mismatch";
  uint64_t len = get_le64(p);
  if (len > avail - 12 || avail - 12 - len < 4) return "truncated record data";
  if (lv_crc32c_unmask(get_le32(p + 12 + len)) != lv_crc32c(p + 12, (size_t)len))
    return "data checksum mismatch";
  *dlen = (size_t)len;
  return NULL;
}

lv_status lv_tfrecord_reader_next(lv_tfrecord_reader *r, const uint8_t **data, size_t *len, bool *eof) {
  *data = NULL;
  *len = 0;
  *eof = false;
  if (r->pos >= r->size) {
    *eof = true;
    return NULL;
  }
  size_t dlen;
  const char *why = check_record(r, r->pos, &dlen);
  if (why && !r->skip_corrupt) {
    if (r->size - r->pos >= 12) {
      uint64_t l = get_le64(r->map + r->pos);
      return lv_status_make(LV_ERR_CORRUPT,
                            "%s: corrupt record at byte offset %zu: %s (record length field %llu, "
                            "file size %zu)",
                            r->path, r->pos, why, (unsigned long long)l, r->size);
    }
    return lv_status_make(LV_ERR_CORRUPT, "%s: corrupt record at byte offset %zu: %s (%zu bytes left)",
                          r->path, r->pos, why, r->size - r->pos);
  }
  if (why) {
    /* Resynchronise: the next offset where a record with both checksums valid starts. A
     * random 8-byte window matches its crc with probability 2^-32, and the data crc must
     * match too, so false resyncs are negligible. */
    r->skipped++;
    size_t p = r->pos + 1;
    while (p < r->size && check_record(r, p, &dlen) != NULL) p++;
    r->pos = p;
    if (p >= r->size) {
      *eof = true;
      return NULL;
    }
  }
  *data = r->map + r->pos + 12;
  *len = dlen;
  r->pos += 12 + dlen + 4;
  return NULL;
}

int64_t lv_tfrecord_reader_skipped(const lv_tfrecord_reader *r) { return r->skipped; }
uint64_t lv_tfrecord_reader_offset(const lv_tfrecord_reader *r) { return r->pos; }
const char *lv_tfrecord_reader_path(const lv_tfrecord_reader *r) { return r->path; }

void lv_tfrecord_reader_set_name(lv_tfrecord_reader *r, const char *name) {
  char *p = strdup(name);
  LV_ASSERT(p);
  free(r->path);
  r->path = p;
}

void lv_tfrecord_reader_close(lv_tfrecord_reader *r) {
  if (!r) return;
  if (r->map) munmap((void *)r->map, r->size);
  free(r->path);
  free(r);
}
