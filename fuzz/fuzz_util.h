/* Shared by the fuzz targets that parse files: a scratch directory (in /dev/shm where it
 * is writable, so the files cost no disk I/O) and writing one input to a file. */
#ifndef LV_FUZZ_UTIL_H
#define LV_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A fresh directory <shm or tmp>/<name>.XXXXXX into dir (size n). */
static void fuzz_mkdtemp(const char *name, char *dir, size_t n) {
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(dir, n, "%s/%s.XXXXXX", base, name);
  if (!mkdtemp(dir)) abort();
}

static void put_file(const char *path, const uint8_t *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n && fwrite(p, 1, n, f) != n) abort();
  if (fclose(f) != 0) abort();
}

#endif
