/* Bump allocator for per-step memory (activations, gradients of activations, scratch).
 * Allocation is a pointer bump, lv_arena_reset frees everything at once. Exhaustion is
 * reported (NULL + lv_arena_error text with the numbers), never a crash. Blocks grow on
 * demand up to a cap so the first step sizes the arena. 64-byte aligned. */
#ifndef LV_BASE_ARENA_H
#define LV_BASE_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct lv_arena lv_arena;

/* Where blocks come from: host memory by default, a device's memory for a step arena
 * on that device (the arena never touches block contents itself). */
typedef struct lv_arena_mem {
  void *(*alloc)(void *user, size_t bytes); /* 64-byte aligned; NULL when out of memory */
  void (*free)(void *user, void *p);
  void *user;
  /* Extra room (percent) of the block a reset consolidates into. Host memory is only
   * committed when touched, so room there is free until a later, larger step uses it;
   * without it every new peak (a longer bucket) made the next reset allocate, and the
   * kernel zero-fill, the whole step's memory again. */
  unsigned headroom_pct;
} lv_arena_mem;

/* cap_bytes: the most this arena may hold (0 = 16 GiB). */
lv_arena *lv_arena_create(size_t cap_bytes);
/* The same with blocks from mem (copied); lv_arena_calloc is then not allowed. */
lv_arena *lv_arena_create_mem(size_t cap_bytes, const lv_arena_mem *mem);
void lv_arena_destroy(lv_arena *a);
/* Returns NULL when the cap would be exceeded. Memory is not zeroed. */
void *lv_arena_alloc(lv_arena *a, size_t bytes);
void *lv_arena_calloc(lv_arena *a, size_t bytes);
void lv_arena_reset(lv_arena *a);
/* A position in the arena: lv_arena_rewind frees everything allocated after it (blocks
 * added since are released), keeping what came before. Marks are valid until a reset
 * or a rewind to an earlier mark. */
typedef struct lv_arena_mark {
  void *head;
  size_t head_used, used;
} lv_arena_mark;
lv_arena_mark lv_arena_get_mark(const lv_arena *a);
void lv_arena_rewind(lv_arena *a, const lv_arena_mark *m);
size_t lv_arena_used(const lv_arena *a);
/* Bytes of the blocks the arena holds (used or not). */
size_t lv_arena_reserved(const lv_arena *a);
/* The block the last allocation came from, as a number no other block of this arena has
 * had: two allocations with different numbers are never one range of memory. */
uint64_t lv_arena_block_id(const lv_arena *a);
size_t lv_arena_peak(const lv_arena *a);
size_t lv_arena_cap(const lv_arena *a);

#endif
