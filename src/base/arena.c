#include "base/arena.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"

typedef struct block {
  struct block *next;
  size_t size, used;
  uint64_t id;
  char *data;
} block;

struct lv_arena {
  block *head; /* current block; older blocks follow */
  size_t cap, total, used, peak;
  uint64_t next_id;
  lv_arena_mem mem;
};

static void *host_alloc(void *user, size_t bytes) {
  (void)user;
  void *p = NULL;
  return posix_memalign(&p, 64, bytes) == 0 ? p : NULL;
}

static void host_free(void *user, void *p) {
  (void)user;
  free(p);
}

lv_arena *lv_arena_create_mem(size_t cap_bytes, const lv_arena_mem *mem) {
  lv_arena *a = calloc(1, sizeof *a);
  LV_ASSERT(a);
  a->cap = cap_bytes ? cap_bytes : ((size_t)16 << 30);
  a->mem = *mem;
  return a;
}

lv_arena *lv_arena_create(size_t cap_bytes) {
  const lv_arena_mem host = {host_alloc, host_free, NULL, 0};
  return lv_arena_create_mem(cap_bytes, &host);
}

static void free_blocks(lv_arena *a, block *b) {
  while (b) {
    block *n = b->next;
    a->mem.free(a->mem.user, b->data);
    free(b);
    b = n;
  }
}

void lv_arena_destroy(lv_arena *a) {
  if (!a) return;
  free_blocks(a, a->head);
  free(a);
}

void *lv_arena_alloc(lv_arena *a, size_t bytes) {
  bytes = (bytes + 63) & ~(size_t)63;
  if (bytes == 0) bytes = 64;
  if (a->used + bytes > a->cap) return NULL;
  block *b = a->head;
  if (!b || b->used + bytes > b->size) {
    size_t sz = b ? b->size * 2 : ((size_t)1 << 20);
    if (sz < bytes) sz = bytes;
    block *nb = calloc(1, sizeof *nb);
    if (!nb) return NULL;
    if (!(nb->data = a->mem.alloc(a->mem.user, sz))) {
      free(nb);
      return NULL;
    }
    nb->size = sz;
    nb->id = ++a->next_id;
    nb->next = b;
    a->head = nb;
    a->total += sz;
    b = nb;
  }
  void *p = b->data + b->used;
  b->used += bytes;
  a->used += bytes;
  if (a->used > a->peak) a->peak = a->used;
  return p;
}

void *lv_arena_calloc(lv_arena *a, size_t bytes) {
  void *p = lv_arena_alloc(a, bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

void lv_arena_reset(lv_arena *a) {
  /* Keep one block big enough for the whole previous step so later steps never grow. */
  if (a->head && a->head->next) {
    size_t want = a->peak + a->peak / 100 * a->mem.headroom_pct;
    if (want > a->cap) want = a->cap; /* the peak never exceeds the cap */
    free_blocks(a, a->head);
    a->head = NULL;
    a->total = 0;
    block *nb = calloc(1, sizeof *nb);
    if (nb && (nb->data = a->mem.alloc(a->mem.user, want))) {
      nb->size = want;
      nb->id = ++a->next_id;
      a->head = nb;
      a->total = want;
    } else {
      free(nb);
    }
  }
  if (a->head) a->head->used = 0;
  a->used = 0;
}

lv_arena_mark lv_arena_get_mark(const lv_arena *a) {
  lv_arena_mark m = {a->head, a->head ? a->head->used : 0, a->used};
  return m;
}

void lv_arena_rewind(lv_arena *a, const lv_arena_mark *m) {
  while (a->head && a->head != m->head) {
    block *b = a->head;
    a->head = b->next;
    a->total -= b->size;
    a->mem.free(a->mem.user, b->data);
    free(b);
  }
  if (a->head) a->head->used = m->head_used;
  a->used = m->used;
}

size_t lv_arena_used(const lv_arena *a) { return a->used; }
size_t lv_arena_peak(const lv_arena *a) { return a->peak; }
size_t lv_arena_reserved(const lv_arena *a) { return a->total; }
uint64_t lv_arena_block_id(const lv_arena *a) { return a->head ? a->head->id : 0; }
size_t lv_arena_cap(const lv_arena *a) { return a->cap; }
