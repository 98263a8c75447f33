/* LevelDB table format (the .index file of a TensorFlow tensor bundle), internal to
 * src/io. The builder lays out prefix-compressed data blocks with restart points, an
 * empty meta-index block, an index block and the 48-byte footer, each block followed by
 * its 5-byte trailer (compression type, masked crc32c), exactly as TensorFlow's
 * table::TableBuilder does (snappy when it saves at least 1/8, raw otherwise). The
 * scanner checks every byte of an untrusted table held in memory (footer, handles, crcs,
 * restart arrays, strictly increasing keys) and hands each key/value to a callback.
 * The builder owns its buffers; the scanner's callback sees pointers into memory that
 * lives only for the duration of the call. */
#ifndef LV_IO_LEVELDB_TABLE_H
#define LV_IO_LEVELDB_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define LV_TABLE_MAGIC 0xdb4775248b80fb57ull
#define LV_TABLE_FOOTER_SIZE 48
#define LV_TABLE_BLOCK_TRAILER_SIZE 5

typedef struct lv_table_builder lv_table_builder;

/* block_size: target uncompressed size of a data block (TensorFlow's default 256 KiB). */
lv_table_builder *lv_table_builder_new(size_t block_size);
void lv_table_builder_free(lv_table_builder *b);
/* Keys must be strictly increasing (bytewise); violating that is a programmer error. */
void lv_table_builder_add(lv_table_builder *b, const void *key, size_t klen, const void *val,
                          size_t vlen);
/* The finished table; the bytes stay owned by b (valid until lv_table_builder_free). */
void lv_table_builder_finish(lv_table_builder *b, const uint8_t **data, size_t *len);

/* Called once per entry in key order. `where` is the file offset of the block holding
 * the entry, for error messages. A non-NULL status stops the scan and is returned. */
typedef lv_status (*lv_table_visit_fn)(void *ctx, const uint8_t *key, size_t klen,
                                       const uint8_t *val, size_t vlen, uint64_t where);

/* Validates and walks the whole table in data[0..n). `path` names the file in errors. */
lv_status lv_table_scan(const char *path, const uint8_t *data, size_t n, lv_table_visit_fn fn,
                        void *ctx);

/* Varints shared with the bundle code (string tensors). Return bytes consumed, 0 if the
 * varint is truncated or longer than allowed. */
size_t lv_varint64_decode(const uint8_t *p, size_t n, uint64_t *out);
size_t lv_varint64_encode(uint8_t *p, uint64_t v); /* p needs 10 bytes */

#endif
