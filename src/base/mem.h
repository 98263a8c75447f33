/* Allocations sized by a user's params or data (batch sizes, queue capacities): the
 * size is checked for overflow and against the machine's physical memory before malloc,
 * so an absurd value (input.batch_size: 1000000000) is an "out of memory" error naming
 * what was asked for, never an abort: ASan aborts on an allocation it cannot serve and
 * an overcommitting kernel only fails later, on first touch. */
#ifndef LV_BASE_MEM_H
#define LV_BASE_MEM_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

/* count * size bytes (zeroed if zero) into *out; what names the allocation in the
 * LV_ERR_RESOURCE error ("input.batch_size: a batch of 1000000000 examples"). */
lv_status lv_mem_alloc(size_t count, size_t size, bool zero, const char *what, void **out);

#endif
