/* Readers for the files Keras caches datasets in, used by bin/keras2ckpt: IDX files
 * (MNIST / Fashion-MNIST, gzip-compressed or plain) and .npz archives (a zip of .npy
 * arrays, stored or deflated, zip64 included). Both are untrusted input: magic numbers,
 * dimensions, sizes and checksums are checked and errors name the file and offset. The
 * returned arrays own their data (lv_ndarray_free). */
#ifndef LV_IO_DATASET_FILES_H
#define LV_IO_DATASET_FILES_H

#include <stddef.h>

#include "base/dtype.h"
#include "base/shape.h"
#include "base/status.h"

typedef struct lv_ndarray {
  lv_dtype dtype;
  lv_shape shape;
  void *data; /* row-major, little-endian */
  size_t nbytes;
} lv_ndarray;

void lv_ndarray_free(lv_ndarray *a);

/* Reads an IDX file (magic 0x00 0x00 TYPE NDIMS, big-endian dims, then the data), gzip
 * or not. The file must end exactly after the data. */
lv_status lv_idx_read(const char *path, lv_ndarray *out);

/* Parses one .npy image held in memory (`what` names it in errors). */
lv_status lv_npy_parse(const char *what, const void *data, size_t n, lv_ndarray *out);

/* Reads members NAMES[i].npy of the .npz archive at path into out[i]. */
lv_status lv_npz_read(const char *path, const char *const *names, int n, lv_ndarray *out);

#endif
