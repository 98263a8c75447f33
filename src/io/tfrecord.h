/* TFRecord files, TensorFlow's record framing used for tf.Example datasets and
 * TensorBoard event files. Each record is
 *   uint64 length (little-endian) | uint32 masked crc32c(length bytes) |
 *   data[length] | uint32 masked crc32c(data)
 * The writer owns its FILE and buffers; lv_tfrecord_writer_flush makes everything
 * written so far durable (fflush + fsync), so a killed process leaves a file readable up
 * to the last flush. The reader maps the file read-only and validates both checksums and
 * every bound; a bad or truncated record is LV_ERR_CORRUPT naming the file and the byte
 * offset of the record, or (skip_corrupt) is skipped, counted, and reading resumes at the
 * next offset where a record with valid checksums starts. The reader sees the file as it
 * was when opened (records appended later are not read); the file must not be truncated
 * while a reader has it open. */
#ifndef LV_IO_TFRECORD_H
#define LV_IO_TFRECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Bytes of framing around each record: 8 (length) + 4 (length crc) + 4 (data crc). */
#define LV_TFRECORD_OVERHEAD 16

typedef struct lv_tfrecord_writer lv_tfrecord_writer;

/* Creates (or truncates; with append, appends to) path. */
lv_status lv_tfrecord_writer_open(const char *path, bool append, lv_tfrecord_writer **out);
lv_status lv_tfrecord_writer_write(lv_tfrecord_writer *w, const void *data, size_t len);
/* fflush + fsync: everything written so far is on disk when this returns. */
lv_status lv_tfrecord_writer_flush(lv_tfrecord_writer *w);
/* Flushes, closes and frees w (also on error). */
lv_status lv_tfrecord_writer_close(lv_tfrecord_writer *w);
const char *lv_tfrecord_writer_path(const lv_tfrecord_writer *w);

/* Frames one record into out (LV_TFRECORD_OVERHEAD + len bytes): for writing records
 * into buffers and for tests. */
void lv_tfrecord_frame(const void *data, size_t len, uint8_t *out);

typedef struct lv_tfrecord_reader lv_tfrecord_reader;

lv_status lv_tfrecord_reader_open(const char *path, bool skip_corrupt, lv_tfrecord_reader **out);
/* A gzip-compressed TFRecord file, inflated as it is read (memory: a window of one record
 * and 64 KiB, not the file): offsets are in the uncompressed stream, errors name the file
 * "PATH (gzip; offsets uncompressed)"; bad gzip data is LV_ERR_CORRUPT, not skipped; a
 * record may have at most 1 GiB. */
lv_status lv_tfrecord_reader_open_gzip(const char *path, bool skip_corrupt, lv_tfrecord_reader **out);
/* Next record: *eof=true (and *data=NULL, *len=0) at a clean end. Corruption or truncation
 * -> LV_ERR_CORRUPT naming path and byte offset, unless skip_corrupt (then the bad bytes
 * are skipped and counted, and reading resynchronises on the next valid record). *data is
 * valid until the reader is closed (a gzip reader's: until the next call). After an error,
 * further calls return the same kind of error again. */
lv_status lv_tfrecord_reader_next(lv_tfrecord_reader *r, const uint8_t **data, size_t *len, bool *eof);
/* Number of corrupt regions skipped so far (skip_corrupt mode). */
int64_t lv_tfrecord_reader_skipped(const lv_tfrecord_reader *r);
/* Byte offset of the next record to be read. */
uint64_t lv_tfrecord_reader_offset(const lv_tfrecord_reader *r);
const char *lv_tfrecord_reader_path(const lv_tfrecord_reader *r);
void lv_tfrecord_reader_close(lv_tfrecord_reader *r);

#endif
