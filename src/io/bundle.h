/* TensorFlow V2 checkpoints (tensor bundles): PREFIX.index, a LevelDB table mapping each
 * tensor name to a BundleEntryProto (dtype, shape, shard, offset, size, masked crc32c),
 * with a BundleHeaderProto under the empty key; and PREFIX.data-00000-of-00001 holding the
 * raw little-endian tensor bytes. Files we write open in TensorFlow and Lingvo; files they
 * write open here.
 *
 * Writer: tensors may be added in any order; their bytes go to a temporary data file at
 * once (the caller keeps ownership of its buffers). finish() sorts the entries, writes the
 * index, fsyncs and renames both files into place (data first, index last, so a reader
 * never sees an index whose data is missing), then frees the writer, also on error.
 *
 * Reader: open() reads and validates the whole index (footer, block crcs, restart arrays,
 * key order, every entry's dtype/shape/size and that its bytes lie inside its data file);
 * read() fetches one tensor with pread and checks its size and crc32c (large tensors are
 * read and checksummed in chunks by the OpenMP threads). Reads keep no state, so several
 * threads may read from one reader at once. Entries and their names are owned by the
 * reader. Every error names the file and offset.
 *
 * Not supported (clear errors at open): partitioned tensors (entries with slices), dtypes
 * outside lv_dtype (complex, quantized, resource, variant), big-endian bundles. */
#ifndef LV_IO_BUNDLE_H
#define LV_IO_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/shape.h"
#include "base/status.h"

typedef struct lv_bundle_writer lv_bundle_writer;

/* Creates PREFIX's directory if needed and a temporary data file beside it. */
lv_status lv_bundle_writer_open(const char *prefix, lv_bundle_writer **out);
/* Numeric, bool and half types: data is numel * lv_dtype_size(dtype) bytes (may be NULL
 * when numel is 0), written immediately. Names must be non-empty and unique. */
lv_status lv_bundle_writer_add(lv_bundle_writer *w, const char *name, lv_dtype dtype,
                               const lv_shape *shape, const void *data);
/* A DT_STRING tensor: numel strings strs[i] of lens[i] bytes (any bytes, NUL included). */
lv_status lv_bundle_writer_add_strings(lv_bundle_writer *w, const char *name,
                                       const lv_shape *shape, const char *const *strs,
                                       const size_t *lens);
/* Writes PREFIX.index and PREFIX.data-00000-of-00001 under temporary names, fsyncs,
 * renames; frees w (also on error, leaving nothing under the final names). */
lv_status lv_bundle_writer_finish(lv_bundle_writer *w);
/* Discards everything written so far and frees w. */
void lv_bundle_writer_abort(lv_bundle_writer *w);

typedef struct lv_bundle_reader lv_bundle_reader;

typedef struct lv_bundle_entry {
  const char *name;
  lv_dtype dtype;
  lv_shape shape;
  uint64_t offset, size; /* bytes [offset, offset + size) of the entry's data shard */
  uint32_t crc;          /* crc32c of those bytes, unmasked */
} lv_bundle_entry;

/* Validates the whole index and that every data shard exists and is large enough. */
lv_status lv_bundle_reader_open(const char *prefix, lv_bundle_reader **out);
void lv_bundle_reader_close(lv_bundle_reader *r);
int lv_bundle_reader_count(const lv_bundle_reader *r);
/* Sorted by name; the header entry is not listed. */
const lv_bundle_entry *lv_bundle_reader_entry(const lv_bundle_reader *r, int i);
/* NULL if absent (binary search). */
const lv_bundle_entry *lv_bundle_reader_find(const lv_bundle_reader *r, const char *name);
/* Reads a non-string tensor into dst; dst_bytes must equal e->size. Checks the crc32c. */
lv_status lv_bundle_reader_read(lv_bundle_reader *r, const lv_bundle_entry *e, void *dst,
                                size_t dst_bytes);
/* Reads a DT_STRING tensor: *strs[i] (NUL-terminated copies, lengths in *lens[i]); the
 * caller frees each string and both arrays. Checks the length checksum and the crc32c. */
lv_status lv_bundle_reader_read_strings(lv_bundle_reader *r, const lv_bundle_entry *e,
                                        char ***strs, size_t **lens);
/* Frees what read_strings returned (n = numel of the entry). */
void lv_bundle_strings_free(char **strs, size_t *lens, int64_t n);
const char *lv_bundle_reader_prefix(const lv_bundle_reader *r);

#endif
