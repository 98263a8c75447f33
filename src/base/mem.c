#include "base/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double phys_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
}

lv_status lv_mem_alloc(size_t count, size_t size, bool zero, const char *what, void **out) {
  *out = NULL;
  if (size && count > SIZE_MAX / size)
    return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory: %zu x %zu bytes overflows the address space", what,
                          count, size);
  size_t bytes = count * size;
  double phys = phys_bytes();
  if (phys > 0 && (double)bytes > phys)
    return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory: needs %zu bytes (%.3g GB), more than this machine's "
                          "%.3g GB", what, bytes, (double)bytes / 1e9, phys / 1e9);
  void *p = zero ? calloc(bytes ? bytes : 1, 1) : malloc(bytes ? bytes : 1);
  if (!p)
    return lv_status_make(LV_ERR_RESOURCE, "%s: out of memory allocating %zu bytes (%.3g GB)", what, bytes,
                          (double)bytes / 1e9);
  *out = p;
  return NULL;
}
