/* The model file's writer and validating reader (layout in model_file.h). */
#include "io/model_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/file.h"
#include "base/log.h"

#define HEADER_BYTES 40
#define HEAD_BYTES 24
/* Names and params keys are short; anything longer is a corrupt length. */
#define MAX_NAME 4096

static const char kTagParams[4] = {'P', 'R', 'M', 'S'}, kTagAsset[4] = {'A', 'S', 'S', 'T'},
                  kTagTensor[4] = {'T', 'E', 'N', 'S'};

static uint64_t align8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

/* ---- writing ---- */

typedef struct wbuf {
  char *s;
  size_t n, cap;
} wbuf;

static void put(wbuf *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    size_t c = b->cap ? b->cap : 4096;
    while (c < b->n + n) c *= 2;
    char *g = realloc(b->s, c);
    LV_ASSERTF(g, "out of memory writing a model file (%zu bytes)", c);
    b->s = g;
    b->cap = c;
  }
  if (n) memcpy(b->s + b->n, p, n);
  b->n += n;
}
static void put_u32(wbuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(wbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str32(wbuf *b, const char *s) {
  put_u32(b, (uint32_t)strlen(s));
  put(b, s, strlen(s));
}
static void put_pad8(wbuf *b) {
  static const char zero[8] = {0};
  put(b, zero, align8(b->n) - b->n);
}

/* Starts a section: its head, filled in by end_section. Returns the head's offset. */
static size_t begin_section(wbuf *b, const char tag[4]) {
  size_t at = b->n;
  put(b, tag, 4);
  char zero[HEAD_BYTES - 4] = {0};
  put(b, zero, sizeof zero);
  return at;
}

static void end_section(wbuf *b, size_t at) {
  uint64_t len = b->n - at - HEAD_BYTES;
  uint32_t crc = lv_crc32c_mask(lv_crc32c(b->s + at + HEAD_BYTES, len));
  memcpy(b->s + at + 4, &crc, 4);
  memcpy(b->s + at + 8, &len, 8);
  uint32_t hcrc = lv_crc32c_mask(lv_crc32c(b->s + at, 16));
  memcpy(b->s + at + 16, &hcrc, 4);
  put_pad8(b);
}

lv_status lv_model_file_write(const char *path, const char *params_text, const lv_mf_asset *assets, int n_assets,
                              const lv_mf_tensor *tensors, int n_tensors) {
  wbuf b = {0};
  bool quantized = false;
  for (int i = 0; i < n_tensors; i++) quantized |= tensors[i].quantized;
  put(&b, LV_MODEL_FILE_MAGIC, 8);
  put_u32(&b, quantized ? 2 : 1); /* the oldest version that holds the file */
  put_u32(&b, 0);
  put_u32(&b, (uint32_t)(1 + n_assets + n_tensors));
  put_u32(&b, 0);
  put_u64(&b, 0); /* the file size, below */
  put_u32(&b, 0);
  put_u32(&b, 0);
  size_t at = begin_section(&b, kTagParams);
  put(&b, params_text, strlen(params_text));
  end_section(&b, at);
  for (int i = 0; i < n_assets; i++) {
    at = begin_section(&b, kTagAsset);
    put_str32(&b, assets[i].key);
    put_str32(&b, assets[i].name);
    put_u64(&b, assets[i].size);
    put(&b, assets[i].data, assets[i].size);
    end_section(&b, at);
  }
  for (int i = 0; i < n_tensors; i++) {
    const lv_mf_tensor *t = &tensors[i];
    at = begin_section(&b, kTagTensor);
    put_str32(&b, t->name);
    put_str32(&b, t->quantized ? lv_qtype_dtype_names[t->qtype] : lv_dtype_names[t->dtype]);
    put_u32(&b, (uint32_t)t->shape.rank);
    for (int d = 0; d < t->shape.rank; d++) put_u64(&b, (uint64_t)t->shape.d[d]);
    put_u64(&b, t->size);
    put_pad8(&b); /* the data 8-byte aligned in the file (payloads start aligned) */
    put(&b, t->data, t->size);
    if (t->quantized) {
      put_pad8(&b);
      put_u32(&b, (uint32_t)t->axis);
      put_u32(&b, (uint32_t)t->shape.d[t->axis]);
      put(&b, t->scales, sizeof(float) * (size_t)t->shape.d[t->axis]);
    }
    end_section(&b, at);
  }
  uint64_t size = b.n;
  memcpy(b.s + 24, &size, 8);
  uint32_t hcrc = lv_crc32c_mask(lv_crc32c(b.s, 32));
  memcpy(b.s + 32, &hcrc, 4);
  lv_status s = lv_file_write_atomic(path, b.s, b.n);
  free(b.s);
  return s ? lv_status_wrap(s, "writing model file %s", path) : NULL;
}

/* ---- reading ---- */

/* A bounded reader over one section's payload. */
typedef struct rd {
  const char *p;
  uint64_t n, at;
  bool bad;
} rd;

static const void *take(rd *r, uint64_t n) {
  if (r->bad || n > r->n - r->at) {
    r->bad = true;
    return NULL;
  }
  const void *p = r->p + r->at;
  r->at += n;
  return p;
}
static uint32_t take_u32(rd *r) {
  uint32_t v = 0;
  const void *p = take(r, 4);
  if (p) memcpy(&v, p, 4);
  return v;
}
static uint64_t take_u64(rd *r) {
  uint64_t v = 0;
  const void *p = take(r, 8);
  if (p) memcpy(&v, p, 8);
  return v;
}
/* A u32-length string copied NUL-terminated to *dst (advanced); NULL when out of bounds. */
static const char *take_str(rd *r, char **dst) {
  uint32_t n = take_u32(r);
  if (n > MAX_NAME) r->bad = true;
  const char *p = take(r, n);
  if (!p) return NULL;
  char *s = *dst;
  memcpy(s, p, n);
  s[n] = 0;
  *dst += n + 1;
  return s;
}

#define CORRUPT(...) lv_status_make(LV_ERR_CORRUPT, __VA_ARGS__)

static lv_status parse_asset(const char *path, int idx, rd *r, char **strings, lv_mf_asset *a) {
  a->key = take_str(r, strings);
  a->name = a->key ? take_str(r, strings) : NULL;
  a->size = take_u64(r);
  a->data = take(r, a->size);
  if (r->bad || r->at != r->n)
    return CORRUPT("model file %s: section %d (asset%s%s): its fields do not fit its %llu bytes", path, idx,
                   a->key ? " for " : "", a->key ? a->key : "", (unsigned long long)r->n);
  if (!*a->name || strchr(a->name, '/') || !strcmp(a->name, ".") || !strcmp(a->name, ".."))
    return CORRUPT("model file %s: section %d (asset for %s): file name '%s' is not a plain base name", path, idx,
                   a->key, a->name);
  return NULL;
}

static lv_status parse_tensor(const char *path, uint32_t version, int idx, rd *r, char **strings, lv_mf_tensor *t) {
  t->name = take_str(r, strings);
  const char *dt = t->name ? take_str(r, strings) : NULL;
  uint32_t rank = take_u32(r);
  if (!r->bad && rank > LV_MAX_RANK)
    return CORRUPT("model file %s: section %d (tensor %s): rank %u is over %d", path, idx, t->name, rank, LV_MAX_RANK);
  t->shape.rank = (int)rank;
  uint64_t numel = 1;
  bool overflow = false;
  for (uint32_t d = 0; d < rank && !r->bad; d++) {
    uint64_t v = take_u64(r);
    if (v > ((uint64_t)1 << 40) || (v && numel > UINT64_MAX / v)) overflow = true;
    t->shape.d[d] = (int64_t)v;
    numel *= v;
  }
  t->size = take_u64(r);
  const uint64_t npad = align8(r->at) - r->at; /* zeros: the data starts 8-byte aligned */
  const char *pad = take(r, npad);
  for (uint64_t k = 0; pad && k < npad; k++) r->bad |= pad[k] != 0;
  t->data = take(r, t->size);
  t->quantized = dt && lv_qtype_from_dtype_name(dt, &t->qtype);
  if (dt && !t->quantized && (!lv_dtype_from_name(dt, &t->dtype) || t->dtype == LV_STRING)) {
    char known[256] = "";
    for (int q = 0; q < LV_QTYPE_COUNT; q++)
      snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", q ? ", " : "", lv_qtype_dtype_names[q]);
    return CORRUPT("model file %s: section %d (tensor %s): dtype '%s' is neither a numeric lingvoc dtype (float32, "
                   "int64, ...) nor a quantized type this lingvoc reads (%s)", path, idx, t->name, dt, known);
  }
  uint32_t count = 0;
  if (t->quantized && !r->bad) {
    const uint64_t npad2 = align8(r->at) - r->at;
    const char *pad2 = take(r, npad2);
    for (uint64_t k = 0; pad2 && k < npad2; k++) r->bad |= pad2[k] != 0;
    t->axis = (int)take_u32(r);
    count = take_u32(r);
    t->scales = take(r, (uint64_t)count * sizeof(float));
  }
  if (r->bad || r->at != r->n)
    return CORRUPT("model file %s: section %d (tensor%s%s): its fields do not fit its %llu bytes", path, idx,
                   t->name ? " " : "", t->name ? t->name : "", (unsigned long long)r->n);
  if (t->quantized) {
    if (version < 2)
      return CORRUPT("model file %s: section %d (tensor %s): quantized dtype '%s' in a format version %u file (they "
                     "came with version 2)", path, idx, t->name, dt, version);
    if (rank != 2 || (t->axis != 0 && t->axis != 1) || count != (uint64_t)t->shape.d[t->axis])
      return CORRUPT("model file %s: section %d (tensor %s): a %s tensor must be rank 2 with axis 0 or 1 and one "
                     "scale per channel, got rank %u, axis %d, %u scales", path, idx, t->name, dt, rank, t->axis,
                     count);
    t->dtype = LV_F32;
    if (overflow || numel * lv_qtype_traits_of(t->qtype)->elem_bytes != t->size)
      return CORRUPT("model file %s: section %d (tensor %s): %llu data bytes for its shape and dtype %s", path, idx,
                     t->name, (unsigned long long)t->size, dt);
    for (uint32_t c = 0; c < count; c++) {
      float v;
      memcpy(&v, t->scales + c, sizeof v);
      if (!(v >= 0.0f && v <= 3.0e38f))
        return CORRUPT("model file %s: section %d (tensor %s): scale %u is %g, expected a finite value >= 0", path,
                       idx, t->name, c, (double)v);
    }
    return NULL;
  }
  if (overflow || numel * lv_dtype_size(t->dtype) != t->size)
    return CORRUPT("model file %s: section %d (tensor %s): %llu data bytes for its shape and dtype %s", path, idx,
                   t->name, (unsigned long long)t->size, dt);
  return NULL;
}

static lv_status parse(lv_model_file *f) {
  const char *path = f->path;
  const uint64_t size = f->file_size;
  const char *b = f->buf;
  if (size < 8 || memcmp(b, LV_MODEL_FILE_MAGIC, 8))
    return lv_status_make(LV_ERR_INVALID, "%s is not a lingvoc model file (it does not start with the magic "
                          "\"LVMODEL\\x1a\"; make one with bin/export)", path);
  if (size < HEADER_BYTES)
    return CORRUPT("model file %s is truncated: %llu bytes, shorter than its %d-byte header", path,
                   (unsigned long long)size, HEADER_BYTES);
  uint32_t version, flags, nsec, hcrc, reserved1, reserved2;
  uint64_t declared;
  memcpy(&reserved1, b + 20, 4);
  memcpy(&reserved2, b + 36, 4);
  memcpy(&version, b + 8, 4);
  memcpy(&flags, b + 12, 4);
  memcpy(&nsec, b + 16, 4);
  memcpy(&declared, b + 24, 8);
  memcpy(&hcrc, b + 32, 4);
  if (lv_crc32c_unmask(hcrc) != lv_crc32c(b, 32))
    return CORRUPT("model file %s: the header's CRC32C does not match: the header is corrupt", path);
  if (version > LV_MODEL_FILE_VERSION)
    return lv_status_make(LV_ERR_INVALID, "model file %s has format version %u, newer than this lingvoc reads (up to "
                          "%d): use a newer lingvoc, or export the model again with this one", path, version,
                          LV_MODEL_FILE_VERSION);
  if (version == 0) return CORRUPT("model file %s: format version 0 does not exist", path);
  if (flags) return CORRUPT("model file %s: flags 0x%x: format version %u defines none", path, flags, version);
  if (reserved1 || reserved2) return CORRUPT("model file %s: the header's reserved fields are not 0", path);
  if (declared != size)
    return CORRUPT("model file %s is %s: its header says %llu bytes, the file has %llu", path,
                   size < declared ? "truncated" : "longer than written", (unsigned long long)declared,
                   (unsigned long long)size);
  if (nsec == 0 || nsec > (size - HEADER_BYTES) / HEAD_BYTES)
    return CORRUPT("model file %s: %u sections cannot fit in %llu bytes", path, nsec, (unsigned long long)size);
  f->version = version;
  f->flags = flags;
  f->strings = malloc(size + 1);
  f->assets = calloc(nsec, sizeof *f->assets);
  f->tensors = calloc(nsec, sizeof *f->tensors);
  LV_ASSERT(f->strings && f->assets && f->tensors);
  char *strings = f->strings;
  uint64_t off = HEADER_BYTES;
  for (uint32_t i = 0; i < nsec; i++) {
    if (off > size || size - off < HEAD_BYTES)
      return CORRUPT("model file %s is truncated: section %u of %u starts at offset %llu, past its end", path, i, nsec,
                     (unsigned long long)off);
    const char *h = b + off;
    uint32_t crc, shcrc;
    uint64_t len;
    memcpy(&crc, h + 4, 4);
    memcpy(&len, h + 8, 8);
    memcpy(&shcrc, h + 16, 4);
    if (lv_crc32c_unmask(shcrc) != lv_crc32c(h, 16))
      return CORRUPT("model file %s: section %u (at offset %llu): its head's CRC32C does not match: corrupt", path, i,
                     (unsigned long long)off);
    if (len > size - off - HEAD_BYTES)
      return CORRUPT("model file %s is truncated: section %u (%.4s, at offset %llu) has %llu bytes, past the end", path,
                     i, h, (unsigned long long)off, (unsigned long long)len);
    const uint64_t end = align8(off + HEAD_BYTES + len);
    if (end > size)
      return CORRUPT("model file %s is truncated: section %u (%.4s, at offset %llu) has its padding past the end", path,
                     i, h, (unsigned long long)off);
    /* Every byte is checked: the unsummed ones (reserved, padding) must be 0. */
    uint32_t hres;
    memcpy(&hres, h + 20, 4);
    bool zero = hres == 0;
    for (uint64_t k = off + HEAD_BYTES + len; k < end; k++) zero &= b[k] == 0;
    if (!zero)
      return CORRUPT("model file %s: section %u (at offset %llu): nonzero reserved or padding bytes: corrupt", path, i,
                     (unsigned long long)off);
    rd r = {.p = h + HEAD_BYTES, .n = len};
    bool is_params = !memcmp(h, kTagParams, 4), is_asset = !memcmp(h, kTagAsset, 4), is_tensor = !memcmp(h, kTagTensor, 4);
    if (lv_crc32c_unmask(crc) != lv_crc32c(r.p, len)) {
      /* Name what the section holds when its name still reads (the corrupt byte may be
       * anywhere, the name included). */
      char what[160] = "";
      if (is_asset || is_tensor) {
        rd peek = r;
        uint32_t n = take_u32(&peek);
        const char *p = n <= 128 ? take(&peek, n) : NULL;
        if (p) snprintf(what, sizeof what, " '%.*s'", (int)n, p);
      }
      return CORRUPT("model file %s: section %u (%s%s, at offset %llu, %llu bytes): CRC32C mismatch: the file is "
                     "corrupt", path, i, is_params ? "params" : is_asset ? "asset" : is_tensor ? "tensor" : "unknown",
                     what, (unsigned long long)off, (unsigned long long)len);
    }
    lv_status s = NULL;
    if (i == 0 && !is_params)
      return CORRUPT("model file %s: section 0 is '%.4s', expected the params (PRMS)", path, h);
    if (is_params) {
      if (i != 0) return CORRUPT("model file %s: section %u: a second params section", path, i);
      if (memchr(r.p, 0, len)) return CORRUPT("model file %s: section 0 (params): a NUL byte in the params text", path);
      memcpy(strings, r.p, len);
      strings[len] = 0;
      f->params_text = strings;
      strings += len + 1;
    } else if (is_asset) {
      s = parse_asset(path, (int)i, &r, &strings, &f->assets[f->n_assets++]);
    } else if (is_tensor) {
      lv_mf_tensor *t = &f->tensors[f->n_tensors];
      s = parse_tensor(path, version, (int)i, &r, &strings, t);
      if (!s && lv_model_file_tensor(f, t->name))
        s = CORRUPT("model file %s: section %u: a second tensor %s", path, i, t->name);
      f->n_tensors++;
    } else {
      return CORRUPT("model file %s: section %u (at offset %llu): unknown tag '%.4s' for format version %u", path, i,
                     (unsigned long long)off, h, version);
    }
    if (s) return s;
    off = end;
  }
  if (off != size)
    return CORRUPT("model file %s: %llu bytes after its last section", path, (unsigned long long)(size - off));
  return NULL;
}

/* Validates buf (size bytes, taken over: freed with the file or on error). */
static lv_status take_buffer(const char *path, char *buf, size_t size, lv_model_file **out) {
  lv_model_file *f = calloc(1, sizeof *f);
  LV_ASSERT(f);
  f->path = strdup(path);
  LV_ASSERT(f->path);
  f->buf = buf;
  f->file_size = size;
  lv_status s = parse(f);
  if (s) {
    lv_model_file_free(f);
    return s;
  }
  *out = f;
  return NULL;
}

lv_status lv_model_file_parse(const char *path, const void *data, size_t size, lv_model_file **out) {
  *out = NULL;
  char *buf = malloc(size + 1);
  LV_ASSERT(buf);
  memcpy(buf, data, size);
  return take_buffer(path, buf, size, out);
}

lv_status lv_model_file_read(const char *path, lv_model_file **out) {
  *out = NULL;
  char *data = NULL;
  size_t len = 0;
  LV_TRY(lv_status_wrap(lv_file_read_all(path, &data, &len), "model file"));
  return take_buffer(path, data, len, out);
}

void lv_model_file_free(lv_model_file *f) {
  if (!f) return;
  free(f->path);
  free(f->buf);
  free(f->strings);
  free(f->assets);
  free(f->tensors);
  free(f);
}

const lv_mf_tensor *lv_model_file_tensor(const lv_model_file *f, const char *name) {
  for (int i = 0; i < f->n_tensors; i++)
    if (f->tensors[i].name && !strcmp(f->tensors[i].name, name)) return &f->tensors[i];
  return NULL;
}
