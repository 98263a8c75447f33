#include "io/dataset_files.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/file.h"

void lv_ndarray_free(lv_ndarray *a) {
  if (!a) return;
  free(a->data);
  memset(a, 0, sizeof(*a));
}

/* Datasets this tool converts fit in memory many times over; a bound keeps a forged
 * header from asking for terabytes. */
static const uint64_t kMaxBytes = (uint64_t)16 << 30;

static lv_status gz_err(gzFile f, const char *path, uint64_t off, const char *what) {
  int code;
  const char *msg = gzerror(f, &code);
  return lv_status_make(code == Z_ERRNO ? LV_ERR_IO : LV_ERR_CORRUPT,
                        "%s: offset %llu (uncompressed): %s: %s", path, (unsigned long long)off,
                        what, code == Z_ERRNO ? strerror(errno) : code == Z_OK ? "file too short" : msg);
}

static lv_status gz_read_exact(gzFile f, const char *path, uint64_t off, void *dst, uint64_t n,
                               const char *what) {
  uint8_t *p = dst;
  uint64_t done = 0;
  while (done < n) {
    unsigned k = (unsigned)(n - done > (1u << 30) ? (1u << 30) : n - done);
    int got = gzread(f, p + done, k);
    if (got <= 0) return gz_err(f, path, off + done, what);
    done += (uint64_t)got;
  }
  return NULL;
}

static void swap_bytes(uint8_t *p, size_t n, size_t w) {
  if (w <= 1) return;
  for (size_t i = 0; i < n; i += w)
    for (size_t a = 0, b = w - 1; a < b; a++, b--) {
      uint8_t t = p[i + a];
      p[i + a] = p[i + b];
      p[i + b] = t;
    }
}

lv_status lv_idx_read(const char *path, lv_ndarray *out) {
  memset(out, 0, sizeof(*out));
  gzFile f = gzopen(path, "rb");
  if (!f)
    return lv_status_make(errno == ENOENT ? LV_ERR_NOT_FOUND : LV_ERR_IO, "cannot open %s: %s",
                          path, errno ? strerror(errno) : "out of memory");
  gzbuffer(f, 1 << 18);
  uint8_t hdr[4];
  lv_status s = gz_read_exact(f, path, 0, hdr, 4, "reading the IDX magic");
  lv_dtype dt = LV_U8;
  if (!s) {
    static const struct { uint8_t code; lv_dtype dt; } kTypes[] = {
        {0x08, LV_U8}, {0x09, LV_I8}, {0x0B, LV_I16}, {0x0C, LV_I32}, {0x0D, LV_F32}, {0x0E, LV_F64}};
    bool ok = false;
    for (size_t i = 0; i < LV_ARRAY_LEN(kTypes); i++)
      if (kTypes[i].code == hdr[2]) dt = kTypes[i].dt, ok = true;
    if (hdr[0] != 0 || hdr[1] != 0 || !ok || hdr[3] < 1 || hdr[3] > LV_MAX_RANK)
      s = lv_status_make(LV_ERR_CORRUPT,
                         "%s: offset 0: bad IDX magic %02x %02x %02x %02x (expected 00 00, a type "
                         "08/09/0b/0c/0d/0e and 1..%d dimensions)",
                         path, hdr[0], hdr[1], hdr[2], hdr[3], LV_MAX_RANK);
  }
  uint64_t nbytes = lv_dtype_size(dt);
  if (!s) {
    uint8_t dims[4 * LV_MAX_RANK];
    s = gz_read_exact(f, path, 4, dims, 4u * hdr[3], "reading the IDX dimensions");
    out->shape.rank = hdr[3];
    for (int i = 0; !s && i < hdr[3]; i++) {
      uint32_t d = (uint32_t)dims[4 * i] << 24 | (uint32_t)dims[4 * i + 1] << 16 |
                   (uint32_t)dims[4 * i + 2] << 8 | dims[4 * i + 3];
      out->shape.d[i] = d;
      if (__builtin_mul_overflow(nbytes, (uint64_t)d, &nbytes) || nbytes > kMaxBytes)
        s = lv_status_make(LV_ERR_CORRUPT, "%s: offset %d: dimensions describe more than %llu bytes",
                           path, 4 + 4 * i, (unsigned long long)kMaxBytes);
    }
  }
  uint64_t data_off = 4 + 4u * hdr[3];
  /* The buffer grows as data actually arrives, so a forged header costs no more memory
   * than the bytes the file really holds. */
  uint64_t have = 0, cap = 0;
  while (!s && have < nbytes) {
    if (have == cap) {
      cap = cap ? cap * 2 : (uint64_t)1 << 20;
      if (cap > nbytes) cap = nbytes;
      void *p = realloc(out->data, cap);
      if (!p) {
        s = lv_status_make(LV_ERR_RESOURCE, "%s: cannot allocate %llu bytes", path,
                           (unsigned long long)cap);
        break;
      }
      out->data = p;
    }
    s = gz_read_exact(f, path, data_off + have, (uint8_t *)out->data + have, cap - have,
                      "reading the IDX data");
    have = cap;
  }
  if (!s) {
    out->dtype = dt;
    out->nbytes = (size_t)nbytes;
    if (!out->data) out->data = malloc(1);
    LV_ASSERT(out->data);
  }
  if (!s) {
    uint8_t extra;
    int got = gzread(f, &extra, 1);
    if (got < 0) s = gz_err(f, path, data_off + nbytes, "reading past the data");
    else if (got > 0)
      s = lv_status_make(LV_ERR_CORRUPT,
                         "%s: offset %llu: trailing bytes after the %llu bytes of data the "
                         "dimensions describe",
                         path, (unsigned long long)(data_off + nbytes), (unsigned long long)nbytes);
  }
  gzclose(f);
  if (s) {
    lv_ndarray_free(out);
    return s;
  }
  swap_bytes(out->data, out->nbytes, lv_dtype_size(dt)); /* IDX is big-endian */
  return NULL;
}

/* ---- .npy ---- */

static const char *find_key(const char *h, const char *key) {
  const char *p = strstr(h, key);
  if (!p) return NULL;
  p += strlen(key);
  while (*p == ' ') p++;
  if (*p != ':') return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
}

lv_status lv_npy_parse(const char *what, const void *data, size_t n, lv_ndarray *out) {
  memset(out, 0, sizeof(*out));
  const uint8_t *b = data;
  if (n < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
    return lv_status_make(LV_ERR_CORRUPT, "%s: offset 0: not a .npy array (bad magic)", what);
  size_t hl, ho;
  if (b[6] == 1) {
    hl = (size_t)b[8] | (size_t)b[9] << 8;
    ho = 10;
  } else if (b[6] == 2 || b[6] == 3) {
    if (n < 12) return lv_status_make(LV_ERR_CORRUPT, "%s: truncated .npy header", what);
    hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    ho = 12;
  } else {
    return lv_status_make(LV_ERR_CORRUPT, "%s: offset 6: unknown .npy version %u", what, b[6]);
  }
  if (hl > n - ho || hl > 65536)
    return lv_status_make(LV_ERR_CORRUPT, "%s: offset 8: header length %zu beyond the %zu bytes",
                          what, hl, n);
  char *h = malloc(hl + 1);
  LV_ASSERT(h);
  memcpy(h, b + ho, hl);
  h[hl] = 0;
  lv_status s = NULL;
  const char *descr = find_key(h, "'descr'");
  const char *fo = find_key(h, "'fortran_order'");
  const char *shape = find_key(h, "'shape'");
  char d[8] = {0};
  if (!descr || !fo || !shape)
    s = lv_status_make(LV_ERR_CORRUPT, "%s: .npy header lacks descr/fortran_order/shape: %s", what, h);
  else if (strncmp(fo, "False", 5) != 0)
    s = lv_status_make(LV_ERR_INVALID, "%s: Fortran-order arrays are not supported", what);
  else if (*descr != '\'' || !strchr(descr + 1, '\'') || strchr(descr + 1, '\'') - descr - 1 >= 8)
    s = lv_status_make(LV_ERR_CORRUPT, "%s: malformed descr in .npy header: %s", what, h);
  if (!s) memcpy(d, descr + 1, (size_t)(strchr(descr + 1, '\'') - descr - 1));
  static const struct { const char *code; lv_dtype dt; } kTypes[] = {
      {"b1", LV_BOOL}, {"i1", LV_I8}, {"i2", LV_I16}, {"i4", LV_I32}, {"i8", LV_I64},
      {"u1", LV_U8},   {"u2", LV_U16}, {"u4", LV_U32}, {"u8", LV_U64}, {"f2", LV_F16},
      {"f4", LV_F32},  {"f8", LV_F64}};
  bool found = false;
  if (!s) {
    bool little = d[0] == '<' || d[0] == '|' || d[0] == '=';
    for (size_t i = 0; i < LV_ARRAY_LEN(kTypes); i++)
      if (strcmp(d + 1, kTypes[i].code) == 0) out->dtype = kTypes[i].dt, found = true;
    if (!found || (!little && !(d[0] == '>' && lv_dtype_size(out->dtype) == 1)))
      s = lv_status_make(LV_ERR_INVALID, "%s: unsupported .npy dtype '%s'", what, d);
  }
  if (!s) {
    const char *p = shape;
    if (*p != '(') s = lv_status_make(LV_ERR_CORRUPT, "%s: malformed shape in .npy header: %s", what, h);
    else p++;
    while (!s) {
      while (*p == ' ' || *p == ',') p++;
      if (*p == ')') break;
      if (!isdigit((unsigned char)*p) || out->shape.rank == LV_MAX_RANK) {
        s = lv_status_make(LV_ERR_CORRUPT, "%s: malformed or too long shape in .npy header: %s", what, h);
        break;
      }
      char *e;
      errno = 0;
      long long v = strtoll(p, &e, 10);
      if (errno || v < 0) {
        s = lv_status_make(LV_ERR_CORRUPT, "%s: bad dimension in .npy header: %s", what, h);
        break;
      }
      out->shape.d[out->shape.rank++] = v;
      p = e;
    }
  }
  free(h);
  if (s) return s;
  uint64_t nbytes = lv_dtype_size(out->dtype);
  for (int i = 0; i < out->shape.rank; i++)
    if (__builtin_mul_overflow(nbytes, (uint64_t)out->shape.d[i], &nbytes) || nbytes > kMaxBytes)
      return lv_status_make(LV_ERR_CORRUPT, "%s: shape describes too many bytes", what);
  if (nbytes != n - ho - hl)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: offset %zu: %zu bytes of data, the header's shape needs %llu", what,
                          ho + hl, n - ho - hl, (unsigned long long)nbytes);
  out->nbytes = (size_t)nbytes;
  out->data = malloc(nbytes ? nbytes : 1);
  LV_ASSERT(out->data);
  memcpy(out->data, b + ho + hl, nbytes);
  return NULL;
}

/* ---- .npz (zip) ---- */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16; }
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

typedef struct {
  char name[256];
  uint16_t method, flags;
  uint32_t crc;
  uint64_t csize, usize, local_off;
} zip_member;

static lv_status zip_directory(const char *path, const uint8_t *f, size_t n, zip_member **out,
                               int *count) {
  *out = NULL;
  *count = 0;
  if (n < 22) return lv_status_make(LV_ERR_CORRUPT, "%s: %zu bytes, too short for a zip archive", path, n);
  size_t eocd = SIZE_MAX;
  for (size_t i = n - 22 + 1; i-- > 0 && n - i <= 22 + 65535;)
    if (le32(f + i) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd == SIZE_MAX)
    return lv_status_make(LV_ERR_CORRUPT, "%s: no zip end-of-central-directory record; not an .npz", path);
  uint64_t entries = le16(f + eocd + 10), cd_size = le32(f + eocd + 12), cd_off = le32(f + eocd + 16);
  if ((entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_off == 0xFFFFFFFF) && eocd >= 20 &&
      le32(f + eocd - 20) == 0x07064b50) {
    uint64_t z = le64(f + eocd - 20 + 8);
    if (z > n || n - z < 56 || le32(f + z) != 0x06064b50)
      return lv_status_make(LV_ERR_CORRUPT, "%s: offset %llu: bad zip64 end record", path, (unsigned long long)z);
    entries = le64(f + z + 32);
    cd_size = le64(f + z + 40);
    cd_off = le64(f + z + 48);
  }
  if (cd_off > n || cd_size > n - cd_off || entries > cd_size / 46)
    return lv_status_make(LV_ERR_CORRUPT, "%s: central directory [%llu, +%llu) with %llu entries "
                          "does not fit the file", path, (unsigned long long)cd_off,
                          (unsigned long long)cd_size, (unsigned long long)entries);
  zip_member *m = calloc(entries ? entries : 1, sizeof(zip_member));
  LV_ASSERT(m);
  uint64_t p = cd_off, end = cd_off + cd_size;
  for (uint64_t i = 0; i < entries; i++) {
    if (end - p < 46 || le32(f + p) != 0x02014b50) {
      free(m);
      return lv_status_make(LV_ERR_CORRUPT, "%s: offset %llu: bad central directory entry", path,
                            (unsigned long long)p);
    }
    zip_member *z = &m[i];
    z->flags = le16(f + p + 8);
    z->method = le16(f + p + 10);
    z->crc = le32(f + p + 16);
    z->csize = le32(f + p + 20);
    z->usize = le32(f + p + 24);
    uint16_t nl = le16(f + p + 28), el = le16(f + p + 30), cl = le16(f + p + 32);
    z->local_off = le32(f + p + 42);
    if ((uint64_t)46 + nl + el + cl > end - p) {
      free(m);
      return lv_status_make(LV_ERR_CORRUPT, "%s: offset %llu: central directory entry overruns", path,
                            (unsigned long long)p);
    }
    size_t cn = nl < sizeof z->name ? nl : sizeof z->name - 1;
    memcpy(z->name, f + p + 46, cn);
    z->name[cn] = 0;
    /* zip64 extra field: the 64-bit values of whichever fields hold 0xFFFFFFFF, in order. */
    const uint8_t *x = f + p + 46 + nl, *xe = x + el;
    while (xe - x >= 4) {
      uint16_t id = le16(x), sz = le16(x + 2);
      if (sz > xe - x - 4) break;
      if (id == 1) {
        const uint8_t *q = x + 4, *qe = q + sz;
        if (z->usize == 0xFFFFFFFF && qe - q >= 8) z->usize = le64(q), q += 8;
        if (z->csize == 0xFFFFFFFF && qe - q >= 8) z->csize = le64(q), q += 8;
        if (z->local_off == 0xFFFFFFFF && qe - q >= 8) z->local_off = le64(q), q += 8;
      }
      x += 4 + sz;
    }
    p += 46 + nl + el + cl;
  }
  *out = m;
  *count = (int)entries;
  return NULL;
}

static lv_status zip_extract(const char *path, const uint8_t *f, size_t n, const zip_member *z,
                             uint8_t **data) {
  *data = NULL;
  uint64_t lo = z->local_off;
  if (lo > n || n - lo < 30 || le32(f + lo) != 0x04034b50)
    return lv_status_make(LV_ERR_CORRUPT, "%s: offset %llu: bad local header of %s", path,
                          (unsigned long long)lo, z->name);
  uint64_t doff = lo + 30 + le16(f + lo + 26) + le16(f + lo + 28);
  if (doff > n || z->csize > n - doff)
    return lv_status_make(LV_ERR_CORRUPT, "%s: offset %llu: member %s (%llu bytes) overruns the file",
                          path, (unsigned long long)doff, z->name, (unsigned long long)z->csize);
  if (z->flags & 1) return lv_status_make(LV_ERR_INVALID, "%s: member %s is encrypted", path, z->name);
  /* Deflate cannot expand more than 1032:1. */
  if (z->usize > kMaxBytes || (z->method == 8 && z->usize > 1032 * z->csize + 1024) ||
      (z->method == 0 && z->usize != z->csize))
    return lv_status_make(LV_ERR_CORRUPT, "%s: member %s: implausible sizes (%llu compressed, %llu)",
                          path, z->name, (unsigned long long)z->csize, (unsigned long long)z->usize);
  /* Stored members are bounded by the file; deflated ones grow their buffer as output
   * really appears, so a forged size costs nothing. */
  uint64_t cap = z->method == 0 ? z->usize : (z->usize < ((uint64_t)1 << 20) ? z->usize : (uint64_t)1 << 20);
  uint8_t *out = malloc(cap ? cap : 1);
  if (!out) return lv_status_make(LV_ERR_RESOURCE, "%s: cannot allocate %llu bytes", path,
                                  (unsigned long long)cap);
  if (z->method == 0) {
    memcpy(out, f + doff, z->usize);
  } else if (z->method == 8) {
    z_stream zs = {0};
    if (inflateInit2(&zs, -15) != Z_OK) {
      free(out);
      return lv_status_make(LV_ERR_RESOURCE, "zlib inflateInit2 failed");
    }
    const uint8_t *src = f + doff;
    uint64_t src_left = z->csize, dst_done = 0;
    int rc = Z_OK;
    while (rc == Z_OK) {
      if (dst_done == cap && cap < z->usize) {
        cap = cap * 2 < z->usize ? cap * 2 : z->usize;
        uint8_t *p = realloc(out, cap);
        if (!p) {
          inflateEnd(&zs);
          free(out);
          return lv_status_make(LV_ERR_RESOURCE, "%s: cannot allocate %llu bytes", path,
                                (unsigned long long)cap);
        }
        out = p;
      }
      uInt in = (uInt)(src_left > (1u << 30) ? (1u << 30) : src_left);
      uInt room = (uInt)(cap - dst_done > (1u << 30) ? (1u << 30) : cap - dst_done);
      zs.next_in = (Bytef *)src;
      zs.avail_in = in;
      zs.next_out = out + dst_done;
      zs.avail_out = room;
      rc = inflate(&zs, Z_NO_FLUSH);
      src += in - zs.avail_in;
      src_left -= in - zs.avail_in;
      dst_done += room - zs.avail_out;
      if (rc == Z_OK && zs.avail_in == in && zs.avail_out == room) rc = Z_BUF_ERROR;
      if (rc == Z_BUF_ERROR && zs.avail_out == 0 && dst_done == cap && cap < z->usize) rc = Z_OK;
    }
    inflateEnd(&zs);
    if (rc != Z_STREAM_END || dst_done != z->usize) {
      free(out);
      return lv_status_make(LV_ERR_CORRUPT, "%s: member %s: deflate data is corrupt or truncated",
                            path, z->name);
    }
  } else {
    free(out);
    return lv_status_make(LV_ERR_INVALID, "%s: member %s: compression method %u (expected 0 or 8)",
                          path, z->name, z->method);
  }
  uLong crc = crc32(0, Z_NULL, 0);
  for (uint64_t done = 0; done < z->usize;) {
    uInt k = (uInt)(z->usize - done > (1u << 30) ? (1u << 30) : z->usize - done);
    crc = crc32(crc, out + done, k);
    done += k;
  }
  if ((uint32_t)crc != z->crc) {
    free(out);
    return lv_status_make(LV_ERR_CORRUPT, "%s: member %s: crc32 mismatch", path, z->name);
  }
  *data = out;
  return NULL;
}

lv_status lv_npz_read(const char *path, const char *const *names, int n, lv_ndarray *out) {
  for (int i = 0; i < n; i++) memset(&out[i], 0, sizeof(out[i]));
  char *file;
  size_t len;
  LV_TRY(lv_file_read_all(path, &file, &len));
  zip_member *m;
  int count;
  lv_status s = zip_directory(path, (const uint8_t *)file, len, &m, &count);
  for (int i = 0; i < n && !s; i++) {
    char want[256];
    snprintf(want, sizeof want, "%s.npy", names[i]);
    const zip_member *z = NULL;
    for (int j = 0; j < count; j++)
      if (strcmp(m[j].name, want) == 0) z = &m[j];
    if (!z) {
      s = lv_status_make(LV_ERR_CORRUPT, "%s: no member %s in the archive", path, want);
      break;
    }
    uint8_t *data;
    s = zip_extract(path, (const uint8_t *)file, len, z, &data);
    if (s) break;
    char *what = NULL;
    LV_ASSERT(asprintf(&what, "%s:%s", path, want) >= 0);
    s = lv_npy_parse(what, data, z->usize, &out[i]);
    free(what);
    free(data);
  }
  free(m);
  free(file);
  if (s)
    for (int i = 0; i < n; i++) lv_ndarray_free(&out[i]);
  return s;
}
