/* tf.Example parse (hand-written wire decoder: one copy of the record, values decoded in
 * place, every length checked against its enclosing message) and build/serialize
 * (protobuf-c, example.proto / feature.proto). */
#include "io/example.h"

#include <string.h>

#include "example.pb-c.h"
#include "feature.pb-c.h"

const char *const lv_feature_kind_names[LV_FEATURE_KIND_COUNT] = {"<empty>", "bytes", "float", "int64"};
_Static_assert(LV_ARRAY_LEN(lv_feature_kind_names) == LV_FEATURE_KIND_COUNT, "kind names");

typedef struct {
  char *key;
  lv_feature_kind kind;
  int n, cap;
  float *f;
  int64_t *i;
  const uint8_t **b; /* into lv_example.buf (parsed) or blob (built) */
  size_t *bl;
  uint8_t *blob;     /* built bytes features: all values back to back */
} feat;

struct lv_example {
  feat *f;
  int n, cap;
  uint8_t *buf; /* parsed: owned copy of the record */
};

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  LV_ASSERT(q);
  return q;
}

static void feat_clear_values(feat *x) {
  free(x->f);
  free(x->i);
  free(x->b);
  free(x->bl);
  free(x->blob);
  x->f = NULL;
  x->i = NULL;
  x->b = NULL;
  x->bl = NULL;
  x->blob = NULL;
  x->n = x->cap = 0;
  x->kind = LV_FEATURE_NONE;
}

/* The feature named key (keylen bytes), created empty if absent. Lookups are linear:
 * examples hold a handful of features, and a scan beats hashing at that size. */
static feat *feat_get(lv_example *e, const char *key, size_t keylen) {
  for (int k = 0; k < e->n; k++)
    if (strlen(e->f[k].key) == keylen && memcmp(e->f[k].key, key, keylen) == 0) return &e->f[k];
  if (e->n == e->cap) {
    e->cap = e->cap ? 2 * e->cap : 8;
    e->f = xrealloc(e->f, (size_t)e->cap * sizeof(feat));
  }
  feat *x = &e->f[e->n++];
  memset(x, 0, sizeof(*x));
  x->key = malloc(keylen + 1);
  LV_ASSERT(x->key);
  memcpy(x->key, key, keylen);
  x->key[keylen] = 0;
  return x;
}

static const feat *feat_find(const lv_example *e, const char *key) {
  for (int k = 0; k < e->n; k++)
    if (strcmp(e->f[k].key, key) == 0) return &e->f[k];
  return NULL;
}

/* Makes room for `more` values of x's kind. */
static void feat_reserve(feat *x, size_t more) {
  LV_ASSERT(more <= (size_t)INT32_MAX - (size_t)x->n);
  size_t need = (size_t)x->n + more;
  if (need <= (size_t)x->cap) return;
  size_t cap = x->cap ? 2 * (size_t)x->cap : 4;
  if (cap < need) cap = need;
  if (cap > INT32_MAX) cap = INT32_MAX;
  switch (x->kind) {
    case LV_FEATURE_FLOAT: x->f = xrealloc(x->f, cap * sizeof(float)); break;
    case LV_FEATURE_INT64: x->i = xrealloc(x->i, cap * sizeof(int64_t)); break;
    case LV_FEATURE_BYTES:
      x->b = xrealloc(x->b, cap * sizeof(*x->b));
      x->bl = xrealloc(x->bl, cap * sizeof(size_t));
      break;
    default: LV_ASSERT(0);
  }
  x->cap = (int)cap;
}

/* ---- wire decoding ---- */

typedef struct {
  const uint8_t *base; /* start of the record, for offsets in messages */
  const char *err;
  size_t err_off;
} pctx;

static bool fail(pctx *c, const uint8_t *at, const char *why) {
  c->err = why;
  c->err_off = (size_t)(at - c->base);
  return false;
}

static bool read_varint(pctx *c, const uint8_t **p, const uint8_t *end, uint64_t *v) {
  const uint8_t *q = *p;
  uint64_t r = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (q >= end) return fail(c, *p, "truncated varint");
    uint8_t byte = *q++;
    r |= (uint64_t)(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      *v = r;
      *p = q;
      return true;
    }
  }
  return fail(c, *p, "varint longer than 10 bytes");
}

/* Reads a tag; *field and *wt receive its field number and wire type. */
static bool read_tag(pctx *c, const uint8_t **p, const uint8_t *end, uint32_t *field, int *wt) {
  const uint8_t *at = *p;
  uint64_t t;
  if (!read_varint(c, p, end, &t)) return false;
  if ((t >> 3) == 0 || (t >> 3) > 0x1fffffff) return fail(c, at, "invalid field number");
  *field = (uint32_t)(t >> 3);
  *wt = (int)(t & 7);
  return true;
}

/* Reads a length-delimited payload: [*p, *sub_end). */
static bool read_len(pctx *c, const uint8_t **p, const uint8_t *end, const uint8_t **sub_end) {
  const uint8_t *at = *p;
  uint64_t n;
  if (!read_varint(c, p, end, &n)) return false;
  if (n > (uint64_t)(end - *p)) return fail(c, at, "length runs past the end of its message");
  *sub_end = *p + n;
  return true;
}

static bool skip_field(pctx *c, const uint8_t **p, const uint8_t *end, int wt) {
  const uint8_t *at = *p, *sub;
  uint64_t v;
  switch (wt) {
    case 0: return read_varint(c, p, end, &v);
    case 1:
      if (end - *p < 8) return fail(c, at, "truncated fixed64");
      *p += 8;
      return true;
    case 2:
      if (!read_len(c, p, end, &sub)) return false;
      *p = sub;
      return true;
    case 5:
      if (end - *p < 4) return fail(c, at, "truncated fixed32");
      *p += 4;
      return true;
    default: return fail(c, at, "unsupported wire type (groups or invalid)");
  }
}

/* Room for `more` values, or a CORRUPT error: a feature holds at most INT32_MAX values. */
static bool room(pctx *c, feat *x, size_t more, const uint8_t *at) {
  if (more > (size_t)INT32_MAX - (size_t)x->n) return fail(c, at, "feature with more than 2^31-1 values");
  feat_reserve(x, more);
  return true;
}

static void set_kind(feat *x, lv_feature_kind k) {
  if (x->kind != k) {
    feat_clear_values(x);
    x->kind = k;
  }
}

static bool parse_bytes_list(pctx *c, feat *x, const uint8_t *p, const uint8_t *end) {
  set_kind(x, LV_FEATURE_BYTES);
  while (p < end) {
    uint32_t field;
    int wt;
    if (!read_tag(c, &p, end, &field, &wt)) return false;
    if (field == 1 && wt == 2) {
      const uint8_t *sub;
      if (!read_len(c, &p, end, &sub)) return false;
      if (!room(c, x, 1, p)) return false;
      x->b[x->n] = p;
      x->bl[x->n] = (size_t)(sub - p);
      x->n++;
      p = sub;
    } else if (field == 1) {
      return fail(c, p, "BytesList.value with a wire type other than length-delimited");
    } else if (!skip_field(c, &p, end, wt)) {
      return false;
    }
  }
  return true;
}

static bool parse_float_list(pctx *c, feat *x, const uint8_t *p, const uint8_t *end) {
  set_kind(x, LV_FEATURE_FLOAT);
  while (p < end) {
    uint32_t field;
    int wt;
    if (!read_tag(c, &p, end, &field, &wt)) return false;
    if (field == 1 && wt == 2) {
      const uint8_t *sub, *at = p;
      if (!read_len(c, &p, end, &sub)) return false;
      size_t nb = (size_t)(sub - p);
      if (nb % 4) return fail(c, at, "packed FloatList length not a multiple of 4");
      if (!room(c, x, nb / 4, at)) return false;
      /* wire floats are little-endian IEEE, as on x86/ARM; an empty packed list leaves
       * x->f NULL, which memcpy may not be given even for 0 bytes */
      if (nb) memcpy(x->f + x->n, p, nb);
      x->n += (int)(nb / 4);
      p = sub;
    } else if (field == 1 && wt == 5) {
      if (end - p < 4) return fail(c, p, "truncated float");
      if (!room(c, x, 1, p)) return false;
      memcpy(x->f + x->n, p, 4);
      x->n++;
      p += 4;
    } else if (field == 1) {
      return fail(c, p, "FloatList.value with a wire type other than fixed32 or packed");
    } else if (!skip_field(c, &p, end, wt)) {
      return false;
    }
  }
  return true;
}

static bool parse_int64_list(pctx *c, feat *x, const uint8_t *p, const uint8_t *end) {
  set_kind(x, LV_FEATURE_INT64);
  while (p < end) {
    uint32_t field;
    int wt;
    if (!read_tag(c, &p, end, &field, &wt)) return false;
    if (field == 1 && wt == 2) {
      const uint8_t *sub;
      if (!read_len(c, &p, end, &sub)) return false;
      /* Each varint has at least one byte whose high bit is clear: count them to size
       * the array once. */
      size_t cnt = 0;
      for (const uint8_t *q = p; q < sub; q++) cnt += !(*q & 0x80);
      if (!room(c, x, cnt, p)) return false;
      while (p < sub) {
        uint64_t v;
        if (!read_varint(c, &p, sub, &v)) return false;
        x->i[x->n++] = (int64_t)v;
      }
    } else if (field == 1 && wt == 0) {
      uint64_t v;
      if (!read_varint(c, &p, end, &v)) return false;
      if (!room(c, x, 1, p)) return false;
      x->i[x->n++] = (int64_t)v;
    } else if (field == 1) {
      return fail(c, p, "Int64List.value with a wire type other than varint or packed");
    } else if (!skip_field(c, &p, end, wt)) {
      return false;
    }
  }
  return true;
}

static bool parse_feature(pctx *c, feat *x, const uint8_t *p, const uint8_t *end) {
  while (p < end) {
    uint32_t field;
    int wt;
    if (!read_tag(c, &p, end, &field, &wt)) return false;
    if (field >= 1 && field <= 3) {
      if (wt != 2) return fail(c, p, "Feature kind with a wire type other than length-delimited");
      const uint8_t *sub;
      if (!read_len(c, &p, end, &sub)) return false;
      bool ok = field == 1 ? parse_bytes_list(c, x, p, sub)
              : field == 2 ? parse_float_list(c, x, p, sub)
                           : parse_int64_list(c, x, p, sub);
      if (!ok) return false;
      p = sub;
    } else if (!skip_field(c, &p, end, wt)) {
      return false;
    }
  }
  return true;
}

/* One map entry of Features.feature: key = 1, value = 2 (either may be absent). */
static bool parse_entry(pctx *c, lv_example *e, const uint8_t *p, const uint8_t *end) {
  const uint8_t *key = (const uint8_t *)"", *key_end = key;
  const uint8_t *val = NULL, *val_end = NULL;
  while (p < end) {
    uint32_t field;
    int wt;
    if (!read_tag(c, &p, end, &field, &wt)) return false;
    if ((field == 1 || field == 2) && wt == 2) {
      const uint8_t *sub;
      if (!read_len(c, &p, end, &sub)) return false;
      if (field == 1) {
        key = p;
        key_end = sub;
      } else {
        val = p;
        val_end = sub;
      }
      p = sub;
    } else if (field == 1 || field == 2) {
      return fail(c, p, "Features map entry field with a wire type other than length-delimited");
    } else if (!skip_field(c, &p, end, wt)) {
      return false;
    }
  }
  if (memchr(key, 0, (size_t)(key_end - key))) return fail(c, key, "feature name contains a NUL byte");
  feat *x = feat_get(e, (const char *)key, (size_t)(key_end - key));
  /* A map entry replaces the previous value for its key. */
  feat_clear_values(x);
  return val ? parse_feature(c, x, val, val_end) : true;
}

static bool parse_features(pctx *c, lv_example *e, const uint8_t *p, const uint8_t *end) {
  while (p < end) {
    uint32_t field;
    int wt;
    if (!read_tag(c, &p, end, &field, &wt)) return false;
    if (field == 1 && wt == 2) {
      const uint8_t *sub;
      if (!read_len(c, &p, end, &sub)) return false;
      if (!parse_entry(c, e, p, sub)) return false;
      p = sub;
    } else if (field == 1) {
      return fail(c, p, "Features.feature with a wire type other than length-delimited");
    } else if (!skip_field(c, &p, end, wt)) {
      return false;
    }
  }
  return true;
}

lv_status lv_example_parse(const uint8_t *data, size_t len, lv_example **out) {
  *out = NULL;
  lv_example *e = lv_example_new();
  e->buf = malloc(len ? len : 1);
  LV_ASSERT(e->buf);
  if (len) memcpy(e->buf, data, len);
  pctx c = {e->buf, NULL, 0};
  const uint8_t *p = e->buf, *end = e->buf + len;
  bool ok = true;
  while (ok && p < end) {
    uint32_t field;
    int wt;
    if (!(ok = read_tag(&c, &p, end, &field, &wt))) break;
    if (field == 1 && wt == 2) {
      const uint8_t *sub;
      if (!(ok = read_len(&c, &p, end, &sub))) break;
      ok = parse_features(&c, e, p, sub);
      p = sub;
    } else if (field == 1) {
      ok = fail(&c, p, "Example.features with a wire type other than length-delimited");
    } else {
      ok = skip_field(&c, &p, end, wt);
    }
  }
  if (!ok) {
    lv_status s = lv_status_make(LV_ERR_CORRUPT, "tf.Example: byte %zu of %zu: %s", c.err_off, len, c.err);
    lv_example_free(e);
    return s;
  }
  *out = e;
  return NULL;
}

/* ---- building ---- */

lv_example *lv_example_new(void) {
  lv_example *e = calloc(1, sizeof(*e));
  LV_ASSERT(e);
  return e;
}

void lv_example_add_bytes(lv_example *e, const char *key, int n, const char *const *vals, const size_t *lens) {
  LV_ASSERT(n >= 0);
  feat *x = feat_get(e, key, strlen(key));
  feat_clear_values(x);
  x->kind = LV_FEATURE_BYTES;
  feat_reserve(x, (size_t)n);
  size_t total = 0;
  for (int k = 0; k < n; k++) total += lens[k];
  x->blob = malloc(total ? total : 1);
  LV_ASSERT(x->blob);
  size_t off = 0;
  for (int k = 0; k < n; k++) {
    if (lens[k]) memcpy(x->blob + off, vals[k], lens[k]);
    x->b[k] = x->blob + off;
    x->bl[k] = lens[k];
    off += lens[k];
  }
  x->n = n;
}

void lv_example_add_floats(lv_example *e, const char *key, int n, const float *vals) {
  LV_ASSERT(n >= 0);
  feat *x = feat_get(e, key, strlen(key));
  feat_clear_values(x);
  x->kind = LV_FEATURE_FLOAT;
  feat_reserve(x, (size_t)n);
  if (n) memcpy(x->f, vals, (size_t)n * sizeof(float));
  x->n = n;
}

void lv_example_add_int64s(lv_example *e, const char *key, int n, const int64_t *vals) {
  LV_ASSERT(n >= 0);
  feat *x = feat_get(e, key, strlen(key));
  feat_clear_values(x);
  x->kind = LV_FEATURE_INT64;
  feat_reserve(x, (size_t)n);
  if (n) memcpy(x->i, vals, (size_t)n * sizeof(int64_t));
  x->n = n;
}

lv_status lv_example_serialize(const lv_example *e, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  int n = e->n;
  Tensorflow__Features__FeatureEntry *ent = calloc((size_t)n + 1, sizeof(*ent));
  Tensorflow__Features__FeatureEntry **entp = calloc((size_t)n + 1, sizeof(*entp));
  Tensorflow__Feature *fs = calloc((size_t)n + 1, sizeof(*fs));
  Tensorflow__BytesList *bls = calloc((size_t)n + 1, sizeof(*bls));
  Tensorflow__FloatList *fls = calloc((size_t)n + 1, sizeof(*fls));
  Tensorflow__Int64List *ils = calloc((size_t)n + 1, sizeof(*ils));
  ProtobufCBinaryData **bins = calloc((size_t)n + 1, sizeof(*bins));
  LV_ASSERT(ent && entp && fs && bls && fls && ils && bins);
  for (int k = 0; k < n; k++) {
    const feat *x = &e->f[k];
    tensorflow__features__feature_entry__init(&ent[k]);
    tensorflow__feature__init(&fs[k]);
    ent[k].key = x->key;
    ent[k].value = &fs[k];
    entp[k] = &ent[k];
    switch (x->kind) {
      case LV_FEATURE_BYTES:
        tensorflow__bytes_list__init(&bls[k]);
        bins[k] = calloc((size_t)x->n + 1, sizeof(ProtobufCBinaryData));
        LV_ASSERT(bins[k]);
        for (int v = 0; v < x->n; v++) {
          bins[k][v].data = (uint8_t *)x->b[v];
          bins[k][v].len = x->bl[v];
        }
        bls[k].n_value = (size_t)x->n;
        bls[k].value = bins[k];
        fs[k].kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
        fs[k].bytes_list = &bls[k];
        break;
      case LV_FEATURE_FLOAT:
        tensorflow__float_list__init(&fls[k]);
        fls[k].n_value = (size_t)x->n;
        fls[k].value = x->f;
        fs[k].kind_case = TENSORFLOW__FEATURE__KIND_FLOAT_LIST;
        fs[k].float_list = &fls[k];
        break;
      case LV_FEATURE_INT64:
        tensorflow__int64_list__init(&ils[k]);
        ils[k].n_value = (size_t)x->n;
        ils[k].value = x->i;
        fs[k].kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
        fs[k].int64_list = &ils[k];
        break;
      default: break;
    }
  }
  Tensorflow__Features features = TENSORFLOW__FEATURES__INIT;
  features.n_feature = (size_t)n;
  features.feature = entp;
  Tensorflow__Example ex = TENSORFLOW__EXAMPLE__INIT;
  ex.features = &features;
  size_t sz = tensorflow__example__get_packed_size(&ex);
  uint8_t *buf = malloc(sz ? sz : 1);
  LV_ASSERT(buf);
  size_t got = tensorflow__example__pack(&ex, buf);
  for (int k = 0; k < n; k++) free(bins[k]);
  free(bins);
  free(ils);
  free(fls);
  free(bls);
  free(fs);
  free(entp);
  free(ent);
  if (got != sz) {
    free(buf);
    return lv_status_make(LV_ERR_INTERNAL, "tf.Example: protobuf-c packed %zu bytes, expected %zu", got, sz);
  }
  *out = buf;
  *len = sz;
  return NULL;
}

/* ---- lookups ---- */

bool lv_example_get_floats(const lv_example *e, const char *key, const float **vals, int *n) {
  const feat *x = feat_find(e, key);
  if (!x || x->kind != LV_FEATURE_FLOAT) return false;
  *vals = x->f;
  *n = x->n;
  return true;
}

bool lv_example_get_int64s(const lv_example *e, const char *key, const int64_t **vals, int *n) {
  const feat *x = feat_find(e, key);
  if (!x || x->kind != LV_FEATURE_INT64) return false;
  *vals = x->i;
  *n = x->n;
  return true;
}

bool lv_example_get_bytes(const lv_example *e, const char *key, int i, const uint8_t **val, size_t *len, int *n) {
  const feat *x = feat_find(e, key);
  if (!x || x->kind != LV_FEATURE_BYTES) return false;
  *n = x->n;
  if (i < 0 || i >= x->n) return false;
  *val = x->b[i];
  *len = x->bl[i];
  return true;
}

int lv_example_num_features(const lv_example *e) { return e->n; }

const char *lv_example_feature_key(const lv_example *e, int i) {
  LV_ASSERT(i >= 0 && i < e->n);
  return e->f[i].key;
}

lv_feature_kind lv_example_feature_kind(const lv_example *e, int i) {
  LV_ASSERT(i >= 0 && i < e->n);
  return e->f[i].kind;
}

int lv_example_feature_size(const lv_example *e, int i) {
  LV_ASSERT(i >= 0 && i < e->n);
  return e->f[i].n;
}

void lv_example_free(lv_example *e) {
  if (!e) return;
  for (int k = 0; k < e->n; k++) {
    feat_clear_values(&e->f[k]);
    free(e->f[k].key);
  }
  free(e->f);
  free(e->buf);
  free(e);
}
