/* Bump allocator for per-step memory (activations, gradients of activations, scratch).
 * Allocation is a pointer bump, lv_arena_reset frees everything at once. Exhaustion is
 * reported (NULL + lv_arena_error text with the numbers), never a crash. Blocks grow on
 * demand up to a cap so the first step sizes the arena. 64-byte aligned. */
#ifndef LV_BASE_ARENA_H
#define LV_BASE_ARENA_H

#include <stddef.h>

typedef struct lv_arena lv_arena;

/* cap_bytes: the most this arena may hold (0 = 16 GiB). */
lv_arena *lv_arena_create(size_t cap_bytes);
void lv_arena_destroy(lv_arena *a);
/* Returns NULL when the cap would be exceeded. Memory is not zeroed. */
void *lv_arena_alloc(lv_arena *a, size_t bytes);
void *lv_arena_calloc(lv_arena *a, size_t bytes);
void lv_arena_reset(lv_arena *a);
size_t lv_arena_used(const lv_arena *a);
size_t lv_arena_peak(const lv_arena *a);
size_t lv_arena_cap(const lv_arena *a);

#endif
