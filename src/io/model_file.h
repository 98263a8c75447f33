/* The model file (wave 4): one versioned, checksummed file holding what inference needs
 * (the resolved params text, the tokenizer's files as assets, the weights), written by
 * bin/export and bin/trainer --mode=write_inference_graph, read by the library and
 * bin/decoder --model_file. This module is the format only; runners/model_export.h
 * makes one from a checkpoint and a model from one.
 *
 * Layout (little-endian; docs/api.md has the table):
 *   header, 40 bytes: magic "LVMODEL\x1a", u32 version, u32 flags (0), u32 sections,
 *     u32 reserved (0), u64 file size, u32 CRC32C (masked) of the 32 bytes before it,
 *     u32 reserved (0);
 *   then `sections` sections, each at an 8-byte aligned offset: a 24-byte head (tag[4],
 *     u32 CRC32C (masked) of the payload, u64 payload length, u32 CRC32C (masked) of
 *     these 16 bytes, u32 reserved) and the payload, zero-padded to 8 bytes.
 *   Sections: one "PRMS" first (the params text), then "ASST" (u32 n + the params key it
 *     replaces, u32 n + the file's base name, u64 n + its bytes) and "TENS" (u32 n + the
 *     variable's name, u32 n + dtype name ("float32"), u32 rank, i64 dims[rank], u64 n,
 *     zeros to an 8-byte aligned offset, the n bytes of row-major data; version 2: a
 *     quantized tensor's dtype name is its type's ("qint8"), its n bytes the quantized
 *     values, then zeros to an 8-byte aligned offset, u32 axis (0 or 1), u32 count
 *     (= dims[axis]) and count f32 scales).
 * The reader checks all of it before anything uses the file: magic, version (a newer one
 * is refused), flags, the size (truncation), every head and payload CRC, reserved fields
 * and padding (zero: no byte goes unchecked), bounds of every
 * field, dtypes, data sizes, unique names; each error names the file and the section.
 *
 * Ownership: a read file owns one buffer; its params text, assets and tensors point into
 * it and live until lv_model_file_free. */
#ifndef LV_IO_MODEL_FILE_H
#define LV_IO_MODEL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/shape.h"
#include "base/status.h"
#include "kernels/qweight.h"

/* Version 2 adds quantized tensors; a file without any is written as version 1. */
#define LV_MODEL_FILE_VERSION 2
#define LV_MODEL_FILE_MAGIC "LVMODEL\x1a"

typedef struct lv_mf_asset {
  const char *key;  /* the params key whose path it was, e.g. "input.tokenizer.vocab_filepath" */
  const char *name; /* the file's base name, e.g. "wpm.voc" */
  const void *data;
  uint64_t size;
} lv_mf_asset;

typedef struct lv_mf_tensor {
  const char *name; /* the variable's name, e.g. "lenet5/conv0/w/var" */
  lv_dtype dtype;   /* float32 for a quantized tensor (the variable's) */
  lv_shape shape;
  const void *data; /* numel * dtype size bytes, row-major; quantized: numel * the type's */
  uint64_t size;
  /* Quantized (format version 2; kernels/qweight.h): rank 2, one scale per channel along
   * axis (0 rows, 1 columns). */
  bool quantized;
  lv_qtype qtype;
  int axis;
  const float *scales; /* shape.d[axis] values, 4-byte aligned */
} lv_mf_tensor;

typedef struct lv_model_file {
  char *path;
  uint32_t version, flags;
  const char *params_text; /* NUL-terminated */
  int n_assets, n_tensors;
  lv_mf_asset *assets;
  lv_mf_tensor *tensors;
  uint64_t file_size;
  char *buf; /* the whole file (plus the strings' NULs, in a copy) */
  char *strings;
} lv_model_file;

/* Writes params text, assets and tensors to path (atomically: a temporary file renamed). */
lv_status lv_model_file_write(const char *path, const char *params_text, const lv_mf_asset *assets, int n_assets,
                              const lv_mf_tensor *tensors, int n_tensors);
/* Reads and validates path. */
lv_status lv_model_file_read(const char *path, lv_model_file **out);
/* The same for bytes already in memory (path only names them in errors). */
lv_status lv_model_file_parse(const char *path, const void *data, size_t size, lv_model_file **out);
void lv_model_file_free(lv_model_file *f);
/* The tensor named name, or NULL. */
const lv_mf_tensor *lv_model_file_tensor(const lv_model_file *f, const char *name);

#endif
