#include "io/bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/file.h"
#include "base/hash.h"
#include "io/leveldb_table.h"
#include "tensor_bundle.pb-c.h"

/* TensorFlow's kTensorBundleVersion / kTensorBundleMinConsumer. */
enum { kBundleVersion = 1, kMaxShards = 4096 };
/* Tensor bytes are checksummed and written in chunks so each chunk is still in cache when
 * it is written, and so large tensors never need a second buffer. */
static const size_t kChunk = (size_t)4 << 20;
static const size_t kWriteBuf = (size_t)1 << 20;
/* Reads go in chunks small enough that the crc pass finds the bytes pread just copied
 * still in the core's L2 cache. */
static const size_t kReadChunk = (size_t)256 << 10;
static const size_t kIndexBlockSize = 262144; /* TensorFlow's table::Options default */

static lv_status os_err(const char *what, const char *path) {
  return lv_status_make(LV_ERR_IO, "%s %s: %s", what, path, strerror(errno));
}

static char *xstrdup(const char *s) {
  char *d = strdup(s);
  LV_ASSERT(d);
  return d;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *out = NULL;
  int r = vasprintf(&out, fmt, ap);
  va_end(ap);
  LV_ASSERT(r >= 0);
  return out;
}

static lv_status write_all(int fd, const char *path, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t k = write(fd, c, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return os_err("cannot write", path);
    }
    c += k;
    n -= (size_t)k;
  }
  return NULL;
}

/* ---------------- writer ---------------- */

typedef struct {
  char *name;
  lv_dtype dtype;
  lv_shape shape;
  uint64_t offset, size;
  uint32_t crc;
} wentry;

struct lv_bundle_writer {
  char *data_tmp, *data_path, *index_path;
  int fd;
  uint64_t offset;
  uint8_t *buf;
  size_t buf_len;
  wentry *e;
  int n, cap;
  int *slots; /* open-addressing set of entry indices, -1 empty */
  size_t nslots;
  bool broken; /* a write failed: the data file no longer matches the entries */
  unsigned serial; /* of this writer in the process, in its temporary file names */
};

static int *set_lookup(lv_bundle_writer *w, const char *name) {
  size_t mask = w->nslots - 1;
  for (size_t i = lv_fnv1a(name) & mask;; i = (i + 1) & mask) {
    int *slot = &w->slots[i];
    if (*slot < 0 || strcmp(w->e[*slot].name, name) == 0) return slot;
  }
}

static void set_grow(lv_bundle_writer *w) {
  free(w->slots);
  w->nslots = w->nslots ? w->nslots * 2 : 64;
  w->slots = malloc(sizeof(int) * w->nslots);
  LV_ASSERT(w->slots);
  for (size_t i = 0; i < w->nslots; i++) w->slots[i] = -1;
  for (int i = 0; i < w->n; i++) *set_lookup(w, w->e[i].name) = i;
}

static void writer_free(lv_bundle_writer *w) {
  if (w->fd >= 0) close(w->fd);
  for (int i = 0; i < w->n; i++) free(w->e[i].name);
  free(w->e);
  free(w->slots);
  free(w->buf);
  free(w->data_tmp);
  free(w->data_path);
  free(w->index_path);
  free(w);
}

lv_status lv_bundle_writer_open(const char *prefix, lv_bundle_writer **out) {
  *out = NULL;
  if (!prefix || !*prefix) return lv_status_make(LV_ERR_INVALID, "empty checkpoint prefix");
  const char *slash = strrchr(prefix, '/');
  if (slash && slash != prefix) {
    char *dir = strndup(prefix, (size_t)(slash - prefix));
    LV_ASSERT(dir);
    lv_status s = lv_file_mkdirs(dir);
    free(dir);
    LV_TRY(s);
  }
  static atomic_uint counter;
  lv_bundle_writer *w = calloc(1, sizeof(*w));
  LV_ASSERT(w);
  w->data_path = xasprintf("%s.data-00000-of-00001", prefix);
  w->index_path = xasprintf("%s.index", prefix);
  w->serial = atomic_fetch_add(&counter, 1);
  w->data_tmp = xasprintf("%s.tempstate%d-%u", w->data_path, (int)getpid(), w->serial);
  w->buf = malloc(kWriteBuf);
  LV_ASSERT(w->buf);
  w->fd = open(w->data_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    lv_status s = os_err("cannot create", w->data_tmp);
    writer_free(w);
    return s;
  }
  set_grow(w);
  *out = w;
  return NULL;
}

static lv_status flush_buf(lv_bundle_writer *w) {
  if (w->buf_len == 0) return NULL;
  lv_status s = write_all(w->fd, w->data_tmp, w->buf, w->buf_len);
  w->buf_len = 0;
  return s;
}

static lv_status put_bytes(lv_bundle_writer *w, const void *p, size_t n) {
  lv_status s = NULL;
  if (n >= kWriteBuf / 2) {
    s = flush_buf(w);
    if (!s) s = write_all(w->fd, w->data_tmp, p, n);
  } else {
    if (w->buf_len + n > kWriteBuf) s = flush_buf(w);
    if (!s) {
      memcpy(w->buf + w->buf_len, p, n);
      w->buf_len += n;
    }
  }
  if (s) {
    w->broken = true;
    return s;
  }
  w->offset += n;
  return NULL;
}

static lv_status check_new_entry(lv_bundle_writer *w, const char *name, const lv_shape *shape,
                                 int64_t *numel) {
  if (w->broken)
    return lv_status_make(LV_ERR_IO, "%s: an earlier write failed; abort this checkpoint",
                          w->data_tmp);
  if (!name || !*name)
    return lv_status_make(LV_ERR_INVALID, "%s: tensor name must not be empty (the empty key "
                          "holds the bundle header)", w->index_path);
  if (!shape || shape->rank < 0 || shape->rank > LV_MAX_RANK)
    return lv_status_make(LV_ERR_INVALID, "%s: tensor %s: rank must be 0..%d", w->index_path,
                          name, LV_MAX_RANK);
  int64_t n = 1;
  for (int i = 0; i < shape->rank; i++) {
    if (shape->d[i] < 0 || __builtin_mul_overflow(n, shape->d[i], &n))
      return lv_status_make(LV_ERR_INVALID, "%s: tensor %s: bad dimension %d (%lld)",
                            w->index_path, name, i, (long long)shape->d[i]);
  }
  if (*set_lookup(w, name) >= 0)
    return lv_status_make(LV_ERR_INVALID, "%s: tensor %s added twice", w->index_path, name);
  *numel = n;
  return NULL;
}

static void push_entry(lv_bundle_writer *w, const char *name, lv_dtype dtype,
                       const lv_shape *shape, uint64_t offset, uint64_t size, uint32_t crc) {
  if (w->n == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 64;
    w->e = realloc(w->e, sizeof(wentry) * (size_t)w->cap);
    LV_ASSERT(w->e);
  }
  wentry *e = &w->e[w->n];
  e->name = xstrdup(name);
  e->dtype = dtype;
  e->shape = *shape;
  e->offset = offset;
  e->size = size;
  e->crc = crc;
  *set_lookup(w, e->name) = w->n;
  w->n++;
  if ((size_t)w->n * 2 > w->nslots) set_grow(w);
}

lv_status lv_bundle_writer_add(lv_bundle_writer *w, const char *name, lv_dtype dtype,
                               const lv_shape *shape, const void *data) {
  int64_t numel;
  LV_TRY(check_new_entry(w, name, shape, &numel));
  if ((unsigned)dtype >= LV_DTYPE_COUNT || dtype == LV_STRING)
    return lv_status_make(LV_ERR_INVALID,
                          "%s: tensor %s: dtype %d is not a fixed-size type (strings go through "
                          "lv_bundle_writer_add_strings)",
                          w->index_path, name, (int)dtype);
  uint64_t size;
  if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)lv_dtype_size(dtype), &size) ||
      size > (uint64_t)INT64_MAX)
    return lv_status_make(LV_ERR_INVALID, "%s: tensor %s: size overflows", w->index_path, name);
  if (size > 0 && !data)
    return lv_status_make(LV_ERR_INVALID, "%s: tensor %s: NULL data", w->index_path, name);
  uint64_t offset = w->offset;
  uint32_t crc = 0;
  const uint8_t *p = data;
  for (uint64_t done = 0; done < size;) {
    size_t k = size - done < kChunk ? (size_t)(size - done) : kChunk;
    crc = lv_crc32c_extend(crc, p + done, k);
    LV_TRY(put_bytes(w, p + done, k));
    done += k;
  }
  push_entry(w, name, dtype, shape, offset, size, crc);
  return NULL;
}

lv_status lv_bundle_writer_add_strings(lv_bundle_writer *w, const char *name,
                                       const lv_shape *shape, const char *const *strs,
                                       const size_t *lens) {
  int64_t numel;
  LV_TRY(check_new_entry(w, name, shape, &numel));
  if (numel > 0 && (!strs || !lens))
    return lv_status_make(LV_ERR_INVALID, "%s: tensor %s: NULL strings", w->index_path, name);
  if ((uint64_t)numel > (uint64_t)(SIZE_MAX / 16))
    return lv_status_make(LV_ERR_INVALID, "%s: tensor %s: %lld strings is too many",
                          w->index_path, name, (long long)numel);
  /* TensorFlow's layout: varint64 lengths, masked crc32c of the lengths (each as uint32,
   * or uint64 when it does not fit), then the bytes; the entry crc covers the lengths as
   * checksummed, the 4 checksum bytes and the bytes. */
  uint8_t *lenbuf = malloc((size_t)numel * 10 + 1);
  LV_ASSERT(lenbuf);
  size_t lb = 0;
  uint32_t crc = 0;
  for (int64_t i = 0; i < numel; i++) {
    uint64_t len = lens[i];
    lb += lv_varint64_encode(lenbuf + lb, len);
    if (len <= UINT32_MAX) {
      uint32_t l32 = (uint32_t)len;
      crc = lv_crc32c_extend(crc, &l32, 4);
    } else {
      crc = lv_crc32c_extend(crc, &len, 8);
    }
  }
  uint32_t lencrc = lv_crc32c_mask(crc);
  uint8_t lc[4] = {(uint8_t)lencrc, (uint8_t)(lencrc >> 8), (uint8_t)(lencrc >> 16),
                   (uint8_t)(lencrc >> 24)};
  crc = lv_crc32c_extend(crc, lc, 4);
  uint64_t offset = w->offset;
  lv_status s = put_bytes(w, lenbuf, lb);
  free(lenbuf);
  LV_TRY(s);
  LV_TRY(put_bytes(w, lc, 4));
  for (int64_t i = 0; i < numel; i++) {
    if (lens[i] > 0 && !strs[i])
      return lv_status_make(LV_ERR_INVALID, "%s: tensor %s: string %lld is NULL", w->index_path,
                            name, (long long)i);
    crc = lv_crc32c_extend(crc, strs[i], lens[i]);
    LV_TRY(put_bytes(w, strs[i], lens[i]));
  }
  push_entry(w, name, LV_STRING, shape, offset, w->offset - offset, crc);
  return NULL;
}

static int wentry_cmp(const void *a, const void *b) {
  return strcmp(((const wentry *)a)->name, ((const wentry *)b)->name);
}

static void pack_into(const ProtobufCMessage *m, uint8_t **buf, size_t *cap, size_t *len) {
  size_t n = protobuf_c_message_get_packed_size(m);
  if (n > *cap) {
    *cap = n * 2;
    *buf = realloc(*buf, *cap);
    LV_ASSERT(*buf);
  }
  *len = protobuf_c_message_pack(m, *buf);
  LV_ASSERT(*len == n);
}

static void build_index(lv_bundle_writer *w, lv_table_builder *tb) {
  uint8_t *pb = NULL;
  size_t cap = 0, len = 0;
  Tensorflow__VersionDef ver = TENSORFLOW__VERSION_DEF__INIT;
  ver.producer = kBundleVersion;
  Tensorflow__BundleHeaderProto hdr = TENSORFLOW__BUNDLE_HEADER_PROTO__INIT;
  hdr.num_shards = 1;
  hdr.endianness = TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__LITTLE;
  hdr.version = &ver;
  pack_into(&hdr.base, &pb, &cap, &len);
  lv_table_builder_add(tb, "", 0, pb, len);
  Tensorflow__TensorShapeProto__Dim dims[LV_MAX_RANK];
  Tensorflow__TensorShapeProto__Dim *dimp[LV_MAX_RANK];
  for (int i = 0; i < w->n; i++) {
    const wentry *e = &w->e[i];
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    for (int d = 0; d < e->shape.rank; d++) {
      tensorflow__tensor_shape_proto__dim__init(&dims[d]);
      dims[d].size = e->shape.d[d];
      dimp[d] = &dims[d];
    }
    shape.n_dim = (size_t)e->shape.rank;
    shape.dim = dimp;
    Tensorflow__BundleEntryProto be = TENSORFLOW__BUNDLE_ENTRY_PROTO__INIT;
    be.dtype = (Tensorflow__DataType)lv_dtype_to_tf(e->dtype);
    be.shape = &shape;
    be.offset = (int64_t)e->offset;
    be.size = (int64_t)e->size;
    be.crc32c = lv_crc32c_mask(e->crc);
    pack_into(&be.base, &pb, &cap, &len);
    lv_table_builder_add(tb, e->name, strlen(e->name), pb, len);
  }
  free(pb);
}

lv_status lv_bundle_writer_finish(lv_bundle_writer *w) {
  lv_status s = w->broken ? lv_status_make(LV_ERR_IO, "%s: an earlier write failed; nothing "
                                           "was saved", w->data_tmp)
                          : flush_buf(w);
  if (!s && fsync(w->fd) != 0) s = os_err("cannot fsync", w->data_tmp);
  if (!s) {
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) s = os_err("cannot close", w->data_tmp);
  }
  if (s) {
    lv_bundle_writer_abort(w);
    return s;
  }
  if (w->n > 1) qsort(w->e, (size_t)w->n, sizeof(wentry), wentry_cmp);
  lv_table_builder *tb = lv_table_builder_new(kIndexBlockSize);
  build_index(w, tb);
  const uint8_t *idx;
  size_t idx_len;
  lv_table_builder_finish(tb, &idx, &idx_len);
  /* Both files complete under temporary names before either is published. The index is
   * what makes a checkpoint visible: an older index of this prefix goes first, so its
   * data is never replaced under it, and the new index comes last. */
  char *index_tmp = xasprintf("%s.tempstate%d-%u", w->index_path, (int)getpid(), w->serial);
  int ifd = open(index_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (ifd < 0) s = os_err("cannot create", index_tmp);
  if (!s) s = write_all(ifd, index_tmp, idx, idx_len);
  if (!s && fsync(ifd) != 0) s = os_err("cannot fsync", index_tmp);
  if (ifd >= 0 && close(ifd) != 0 && !s) s = os_err("cannot close", index_tmp);
  if (!s && unlink(w->index_path) != 0 && errno != ENOENT) s = os_err("cannot remove the old", w->index_path);
  if (!s && rename(w->data_tmp, w->data_path) != 0) s = os_err("cannot rename into", w->data_path);
  if (!s && rename(index_tmp, w->index_path) != 0) {
    s = os_err("cannot rename into", w->index_path);
    unlink(w->data_path);
  }
  if (!s) s = lv_file_sync_parent_dir(w->index_path);
  if (s) {
    unlink(w->data_tmp);
    unlink(index_tmp);
  }
  free(index_tmp);
  lv_table_builder_free(tb);
  writer_free(w);
  return s;
}

void lv_bundle_writer_abort(lv_bundle_writer *w) {
  if (!w) return;
  if (w->fd >= 0) {
    close(w->fd);
    w->fd = -1;
  }
  unlink(w->data_tmp);
  writer_free(w);
}

/* ---------------- reader ---------------- */

struct lv_bundle_reader {
  char *prefix, *index_path;
  int nshards;
  int *fds;
  char **paths;
  uint64_t *sizes;
  lv_bundle_entry *e;
  int32_t *shard;
  int n, cap;
  bool have_header;
};

void lv_bundle_reader_close(lv_bundle_reader *r) {
  if (!r) return;
  for (int i = 0; i < r->nshards; i++) {
    if (r->fds && r->fds[i] >= 0) close(r->fds[i]);
    if (r->paths) free(r->paths[i]);
  }
  for (int i = 0; i < r->n; i++) free((char *)r->e[i].name);
  free(r->fds);
  free(r->paths);
  free(r->sizes);
  free(r->e);
  free(r->shard);
  free(r->prefix);
  free(r->index_path);
  free(r);
}

static lv_status parse_header(lv_bundle_reader *r, const uint8_t *val, size_t vlen,
                              uint64_t where) {
  Tensorflow__BundleHeaderProto *h =
      tensorflow__bundle_header_proto__unpack(NULL, vlen, val);
  if (!h)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu: header entry is not a BundleHeaderProto",
                          r->index_path, (unsigned long long)where);
  lv_status s = NULL;
  if (h->num_shards < 1 || h->num_shards > kMaxShards)
    s = lv_status_make(LV_ERR_CORRUPT, "%s: header: num_shards %d (expected 1..%d)",
                       r->index_path, h->num_shards, kMaxShards);
  else if (h->endianness != TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__LITTLE)
    s = lv_status_make(LV_ERR_INVALID,
                       "%s: header: the checkpoint was written big-endian; lingvoc reads "
                       "little-endian checkpoints only",
                       r->index_path);
  else if (h->version && h->version->min_consumer > kBundleVersion)
    s = lv_status_make(LV_ERR_INVALID,
                       "%s: header: needs a reader of bundle version >= %d (this is %d)",
                       r->index_path, h->version->min_consumer, kBundleVersion);
  if (!s && h->version)
    for (size_t i = 0; i < h->version->n_bad_consumers; i++)
      if (h->version->bad_consumers[i] == kBundleVersion)
        s = lv_status_make(LV_ERR_INVALID, "%s: header: bundle version %d is marked bad",
                           r->index_path, kBundleVersion);
  if (!s) r->nshards = h->num_shards;
  tensorflow__bundle_header_proto__free_unpacked(h, NULL);
  return s;
}

static lv_status parse_entry(lv_bundle_reader *r, const char *name, const uint8_t *val,
                             size_t vlen, uint64_t where) {
  Tensorflow__BundleEntryProto *p = tensorflow__bundle_entry_proto__unpack(NULL, vlen, val);
  if (!p)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu: entry %s is not a BundleEntryProto",
                          r->index_path, (unsigned long long)where, name);
  lv_status s = NULL;
  lv_bundle_entry e = {0};
  lv_dtype dt = LV_F32;
  int64_t numel = 1;
  size_t rank = p->shape ? p->shape->n_dim : 0;
#define BAD(code, ...)                                                                   \
  do {                                                                                   \
    s = lv_status_wrap(lv_status_make(code, __VA_ARGS__), "%s: block at offset %llu: entry %s", \
                       r->index_path, (unsigned long long)where, name);                 \
    goto done;                                                                           \
  } while (0)
  if (p->n_slices > 0)
    BAD(LV_ERR_INVALID,
        "partitioned tensor (%zu slices); lingvoc reads whole tensors only, re-save it "
        "unpartitioned",
        p->n_slices);
  if (!lv_dtype_from_tf((int)p->dtype, &dt)) BAD(LV_ERR_INVALID, "unsupported dtype %d", (int)p->dtype);
  if (p->shape && p->shape->unknown_rank) BAD(LV_ERR_CORRUPT, "shape of unknown rank");
  if (rank > LV_MAX_RANK) BAD(LV_ERR_INVALID, "rank %zu exceeds %d", rank, LV_MAX_RANK);
  e.shape.rank = (int)rank;
  for (size_t i = 0; i < rank; i++) {
    int64_t d = p->shape->dim[i]->size;
    if (d < 0 || __builtin_mul_overflow(numel, d, &numel))
      BAD(LV_ERR_CORRUPT, "bad dimension %zu: %lld", i, (long long)d);
    e.shape.d[i] = d;
  }
  if (p->shard_id < 0 || p->shard_id >= r->nshards)
    BAD(LV_ERR_CORRUPT, "shard_id %d outside 0..%d", p->shard_id, r->nshards - 1);
  if (p->offset < 0 || p->size < 0)
    BAD(LV_ERR_CORRUPT, "negative offset %lld or size %lld", (long long)p->offset,
        (long long)p->size);
  if (dt == LV_STRING) {
    if (p->size < 4 || (uint64_t)numel > (uint64_t)p->size - 4)
      BAD(LV_ERR_CORRUPT, "%lld strings cannot fit in %lld bytes", (long long)numel,
          (long long)p->size);
  } else {
    int64_t want;
    if (__builtin_mul_overflow(numel, (int64_t)lv_dtype_size(dt), &want) || want != p->size)
      BAD(LV_ERR_CORRUPT, "size %lld bytes but %lld elements of %s need %lld",
          (long long)p->size, (long long)numel, lv_dtype_tf_names[dt],
          (long long)(numel * (int64_t)lv_dtype_size(dt)));
  }
#undef BAD
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 64;
    r->e = realloc(r->e, sizeof(lv_bundle_entry) * (size_t)r->cap);
    r->shard = realloc(r->shard, sizeof(int32_t) * (size_t)r->cap);
    LV_ASSERT(r->e && r->shard);
  }
  e.name = xstrdup(name);
  e.dtype = dt;
  e.offset = (uint64_t)p->offset;
  e.size = (uint64_t)p->size;
  e.crc = lv_crc32c_unmask(p->crc32c);
  r->shard[r->n] = p->shard_id;
  r->e[r->n++] = e;
done:
  tensorflow__bundle_entry_proto__free_unpacked(p, NULL);
  return s;
}

static lv_status visit(void *ctx, const uint8_t *key, size_t klen, const uint8_t *val,
                       size_t vlen, uint64_t where) {
  lv_bundle_reader *r = ctx;
  if (klen == 0) {
    r->have_header = true;
    return parse_header(r, val, vlen, where);
  }
  if (!r->have_header)
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu: the first key is not the bundle header "
                          "(empty key)",
                          r->index_path, (unsigned long long)where);
  if (memchr(key, 0, klen))
    return lv_status_make(LV_ERR_CORRUPT,
                          "%s: block at offset %llu: key with a NUL byte (a partitioned tensor's "
                          "slice?)",
                          r->index_path, (unsigned long long)where);
  char *name = strndup((const char *)key, klen);
  LV_ASSERT(name);
  lv_status s = parse_entry(r, name, val, vlen, where);
  free(name);
  return s;
}

lv_status lv_bundle_reader_open(const char *prefix, lv_bundle_reader **out) {
  *out = NULL;
  lv_bundle_reader *r = calloc(1, sizeof(*r));
  LV_ASSERT(r);
  r->prefix = xstrdup(prefix);
  r->index_path = xasprintf("%s.index", prefix);
  char *idx = NULL;
  size_t len = 0;
  lv_status s = NULL;
  if (!lv_file_exists(r->index_path)) {
    s = lv_status_make(LV_ERR_NOT_FOUND, "checkpoint %s not found (no file %s)", prefix,
                       r->index_path);
    goto fail;
  }
  s = lv_file_read_all(r->index_path, &idx, &len);
  if (s) goto fail;
  s = lv_table_scan(r->index_path, (const uint8_t *)idx, len, visit, r);
  free(idx);
  if (s) goto fail;
  if (!r->have_header) {
    s = lv_status_make(LV_ERR_CORRUPT, "%s: no bundle header entry (empty table)", r->index_path);
    goto fail;
  }
  r->fds = malloc(sizeof(int) * (size_t)r->nshards);
  r->paths = calloc((size_t)r->nshards, sizeof(char *));
  r->sizes = calloc((size_t)r->nshards, sizeof(uint64_t));
  LV_ASSERT(r->fds && r->paths && r->sizes);
  for (int i = 0; i < r->nshards; i++) r->fds[i] = -1;
  for (int i = 0; i < r->nshards; i++) {
    r->paths[i] = xasprintf("%s.data-%05d-of-%05d", prefix, i, r->nshards);
    r->fds[i] = open(r->paths[i], O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (r->fds[i] < 0) {
      s = lv_status_make(errno == ENOENT ? LV_ERR_NOT_FOUND : LV_ERR_IO,
                         "checkpoint %s: cannot open data file %s: %s", prefix, r->paths[i],
                         strerror(errno));
      goto fail;
    }
    if (fstat(r->fds[i], &st) != 0) {
      s = os_err("cannot stat", r->paths[i]);
      goto fail;
    }
    r->sizes[i] = (uint64_t)st.st_size;
  }
  for (int i = 0; i < r->n; i++) {
    const lv_bundle_entry *e = &r->e[i];
    uint64_t fsize = r->sizes[r->shard[i]];
    if (e->offset > fsize || e->size > fsize - e->offset) {
      s = lv_status_make(LV_ERR_CORRUPT,
                         "%s: entry %s: bytes [%llu, %llu) lie beyond the end of %s (%llu bytes)",
                         r->index_path, e->name, (unsigned long long)e->offset,
                         (unsigned long long)(e->offset + e->size), r->paths[r->shard[i]],
                         (unsigned long long)fsize);
      goto fail;
    }
  }
  *out = r;
  return NULL;
fail:
  lv_bundle_reader_close(r);
  return s;
}

int lv_bundle_reader_count(const lv_bundle_reader *r) { return r->n; }
const char *lv_bundle_reader_prefix(const lv_bundle_reader *r) { return r->prefix; }

const lv_bundle_entry *lv_bundle_reader_entry(const lv_bundle_reader *r, int i) {
  return i >= 0 && i < r->n ? &r->e[i] : NULL;
}

const lv_bundle_entry *lv_bundle_reader_find(const lv_bundle_reader *r, const char *name) {
  int lo = 0, hi = r->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(r->e[mid].name, name);
    if (c == 0) return &r->e[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

static lv_status entry_index(const lv_bundle_reader *r, const lv_bundle_entry *e, int *idx) {
  if (e < r->e || e >= r->e + r->n)
    return lv_status_make(LV_ERR_INVALID, "%s: entry does not belong to this reader",
                          r->index_path);
  *idx = (int)(e - r->e);
  return NULL;
}

/* pread of exactly n bytes at off; a short read means the file shrank since open. */
static lv_status pread_all(lv_bundle_reader *r, int shard, const lv_bundle_entry *e, uint64_t off,
                           void *dst, size_t n) {
  uint8_t *p = dst;
  size_t done = 0;
  while (done < n) {
    ssize_t k = pread(r->fds[shard], p + done, n - done, (off_t)(off + done));
    if (k < 0) {
      if (errno == EINTR) continue;
      return lv_status_make(LV_ERR_IO, "%s: offset %llu: cannot read tensor %s: %s",
                            r->paths[shard], (unsigned long long)(off + done), e->name,
                            strerror(errno));
    }
    if (k == 0)
      return lv_status_make(LV_ERR_CORRUPT,
                            "%s: offset %llu: file ends inside tensor %s (bytes [%llu, %llu))",
                            r->paths[shard], (unsigned long long)(off + done), e->name,
                            (unsigned long long)e->offset,
                            (unsigned long long)(e->offset + e->size));
    done += (size_t)k;
  }
  return NULL;
}

static lv_status crc_mismatch(lv_bundle_reader *r, int shard, const lv_bundle_entry *e,
                              uint32_t got) {
  return lv_status_make(LV_ERR_CORRUPT,
                        "%s: offset %llu: tensor %s (%llu bytes): crc32c mismatch (index says "
                        "0x%08x, data gives 0x%08x)",
                        r->paths[shard], (unsigned long long)e->offset, e->name,
                        (unsigned long long)e->size, e->crc, got);
}

/* crc32c(A || B) from crc32c(A), crc32c(B) and len(B): zlib's crc32_combine (GF(2)
 * matrix powers of the shift-by-one-zero-bit operator) with the Castagnoli polynomial.
 * It lets the chunks of a large tensor be read and checksummed by several threads. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec; vec >>= 1, mat++)
    if (vec & 1) sum ^= *mat;
  return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat) {
  for (int n = 0; n < 32; n++) sq[n] = gf2_times(mat, mat[n]);
}

static uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
  if (len2 == 0) return crc1;
  uint32_t even[32], odd[32];
  odd[0] = 0x82f63b78u; /* reflected Castagnoli polynomial */
  for (int n = 1; n < 32; n++) odd[n] = 1u << (n - 1);
  gf2_square(even, odd); /* two zero bits */
  gf2_square(odd, even); /* four zero bits */
  for (;;) {
    gf2_square(even, odd);
    if (len2 & 1) crc1 = gf2_times(even, crc1);
    len2 >>= 1;
    if (!len2) break;
    gf2_square(odd, even);
    if (len2 & 1) crc1 = gf2_times(odd, crc1);
    len2 >>= 1;
    if (!len2) break;
  }
  return crc1 ^ crc2;
}

lv_status lv_bundle_reader_read(lv_bundle_reader *r, const lv_bundle_entry *e, void *dst,
                                size_t dst_bytes) {
  int idx = 0;
  LV_TRY(entry_index(r, e, &idx));
  if (e->dtype == LV_STRING)
    return lv_status_make(LV_ERR_INVALID,
                          "%s: tensor %s is DT_STRING; read it with lv_bundle_reader_read_strings",
                          r->prefix, e->name);
  if (dst_bytes != e->size)
    return lv_status_make(LV_ERR_INVALID, "%s: tensor %s has %llu bytes, destination has %zu",
                          r->prefix, e->name, (unsigned long long)e->size, dst_bytes);
  int shard = r->shard[idx];
  uint8_t *p = dst;
  /* Each chunk is read and checksummed by one thread while it is hot in cache; one core's
   * crc32c instruction stream alone is slower than the page cache. */
  int64_t nchunks = (int64_t)((e->size + kReadChunk - 1) / kReadChunk);
  uint32_t crc1;
  lv_status s1;
  uint32_t *crcs = nchunks > 1 ? malloc(sizeof(uint32_t) * (size_t)nchunks) : &crc1;
  lv_status *sts = nchunks > 1 ? calloc((size_t)nchunks, sizeof(lv_status)) : &s1;
  LV_ASSERT(crcs && sts);
  s1 = NULL;
  crc1 = 0;
#pragma omp parallel for schedule(static, 1) if (nchunks > 1)
  for (int64_t c = 0; c < nchunks; c++) {
    uint64_t off = (uint64_t)c * kReadChunk;
    size_t k = e->size - off < kReadChunk ? (size_t)(e->size - off) : kReadChunk;
    sts[c] = pread_all(r, shard, e, e->offset + off, p + off, k);
    crcs[c] = sts[c] ? 0 : lv_crc32c(p + off, k);
  }
  lv_status s = NULL;
  uint32_t crc = 0;
  for (int64_t c = 0; c < nchunks; c++) {
    if (sts[c] && !s) s = sts[c];
    else if (sts[c]) lv_status_free(sts[c]);
    uint64_t k = e->size - (uint64_t)c * kReadChunk < kReadChunk ? e->size - (uint64_t)c * kReadChunk : kReadChunk;
    crc = crc32c_combine(crc, crcs[c], k);
  }
  if (nchunks > 1) {
    free(crcs);
    free(sts);
  }
  if (s) return s;
  if (crc != e->crc) return crc_mismatch(r, shard, e, crc);
  return NULL;
}

void lv_bundle_strings_free(char **strs, size_t *lens, int64_t n) {
  if (strs)
    for (int64_t i = 0; i < n; i++) free(strs[i]);
  free(strs);
  free(lens);
}

lv_status lv_bundle_reader_read_strings(lv_bundle_reader *r, const lv_bundle_entry *e,
                                        char ***strs_out, size_t **lens_out) {
  *strs_out = NULL;
  *lens_out = NULL;
  int idx = 0;
  LV_TRY(entry_index(r, e, &idx));
  if (e->dtype != LV_STRING)
    return lv_status_make(LV_ERR_INVALID, "%s: tensor %s is %s, not DT_STRING", r->prefix,
                          e->name, lv_dtype_tf_names[e->dtype]);
  int shard = r->shard[idx];
  int64_t numel = lv_shape_numel(&e->shape);
  uint8_t *buf = malloc(e->size ? e->size : 1);
  if (!buf)
    return lv_status_make(LV_ERR_RESOURCE, "%s: tensor %s: cannot allocate %llu bytes", r->prefix,
                          e->name, (unsigned long long)e->size);
  lv_status s = pread_all(r, shard, e, e->offset, buf, e->size);
  if (s) {
    free(buf);
    return s;
  }
  size_t *lens = malloc(sizeof(size_t) * (size_t)(numel ? numel : 1));
  char **strs = calloc((size_t)(numel ? numel : 1), sizeof(char *));
  LV_ASSERT(lens && strs);
  uint32_t crc = 0;
  size_t pos = 0;
  uint64_t total = 0;
  for (int64_t i = 0; i < numel && !s; i++) {
    uint64_t len;
    size_t k = lv_varint64_decode(buf + pos, e->size - pos, &len);
    if (!k || __builtin_add_overflow(total, len, &total) || total > e->size)
      s = lv_status_make(LV_ERR_CORRUPT, "%s: offset %llu: tensor %s: bad length of string %lld",
                         r->paths[shard], (unsigned long long)(e->offset + pos), e->name,
                         (long long)i);
    else {
      lens[i] = (size_t)len;
      pos += k;
      if (len <= UINT32_MAX) {
        uint32_t l32 = (uint32_t)len;
        crc = lv_crc32c_extend(crc, &l32, 4);
      } else {
        crc = lv_crc32c_extend(crc, &len, 8);
      }
    }
  }
  if (!s && (e->size - pos < 4 || total != e->size - pos - 4))
    s = lv_status_make(LV_ERR_CORRUPT,
                       "%s: offset %llu: tensor %s: string lengths add up to %llu bytes, the "
                       "entry has %llu after the lengths",
                       r->paths[shard], (unsigned long long)e->offset, e->name,
                       (unsigned long long)total,
                       (unsigned long long)(e->size - pos >= 4 ? e->size - pos - 4 : 0));
  if (!s) {
    uint32_t stored = (uint32_t)buf[pos] | (uint32_t)buf[pos + 1] << 8 |
                      (uint32_t)buf[pos + 2] << 16 | (uint32_t)buf[pos + 3] << 24;
    if (lv_crc32c_unmask(stored) != crc)
      s = lv_status_make(LV_ERR_CORRUPT,
                         "%s: offset %llu: tensor %s: checksum of the string lengths mismatches",
                         r->paths[shard], (unsigned long long)(e->offset + pos), e->name);
    crc = lv_crc32c_extend(crc, buf + pos, 4);
    pos += 4;
  }
  if (!s) {
    crc = lv_crc32c_extend(crc, buf + pos, e->size - pos);
    if (crc != e->crc) s = crc_mismatch(r, shard, e, crc);
  }
  for (int64_t i = 0; i < numel && !s; i++) {
    strs[i] = malloc(lens[i] + 1);
    LV_ASSERT(strs[i]);
    memcpy(strs[i], buf + pos, lens[i]);
    strs[i][lens[i]] = 0;
    pos += lens[i];
  }
  free(buf);
  if (s) {
    lv_bundle_strings_free(strs, lens, numel);
    return s;
  }
  *strs_out = strs;
  *lens_out = lens;
  return NULL;
}
