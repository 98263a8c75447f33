/* A minimal stand-in for libcheck, for building tests/check_backend_ops.c on a GPU machine
 * that lacks libcheck (scripts/cuda-op-test-bare.sh): runs each test in process and counts
 * ck_assert failures (which end the test). Not used by the Makefile. */
#ifndef SHIM_CHECK_H
#define SHIM_CHECK_H
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
typedef void (*shim_fn)(void);
typedef struct TCase { shim_fn fn[16]; const char *nm[16]; int n; } TCase;
typedef struct Suite { TCase *tc[8]; int n; } Suite;
typedef struct SRunner { Suite *s; int failed; } SRunner;
enum { CK_NORMAL };
static jmp_buf shim_jb;
#define START_TEST(name) static void name(void) {
#define END_TEST }
#define ck_abort_msg(...) do { fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); longjmp(shim_jb, 1); } while (0)
#define ck_assert_msg(c, ...) do { if (!(c)) ck_abort_msg(__VA_ARGS__); } while (0)
#define ck_assert(c) ck_assert_msg(c, "assertion %s failed", #c)
#define ck_assert_int_eq(a, b) ck_assert_msg((long long)(a) == (long long)(b), "%s == %s: %lld vs %lld", #a, #b, (long long)(a), (long long)(b))
#define ck_assert_int_lt(a, b) ck_assert_msg((long long)(a) < (long long)(b), "%s < %s", #a, #b)
#define ck_assert_ptr_nonnull(p) ck_assert_msg((p) != NULL, "%s is NULL", #p)
static inline Suite *suite_create(const char *n) { (void)n; return calloc(1, sizeof(Suite)); }
static inline TCase *tcase_create(const char *n) { (void)n; return calloc(1, sizeof(TCase)); }
static inline void tcase_set_timeout(TCase *t, double s) { (void)t; (void)s; }
#define tcase_add_test(t, f) do { (t)->nm[(t)->n] = #f; (t)->fn[(t)->n++] = f; } while (0)
static inline void suite_add_tcase(Suite *s, TCase *t) { s->tc[s->n++] = t; }
static inline SRunner *srunner_create(Suite *s) { SRunner *r = calloc(1, sizeof *r); r->s = s; return r; }
static inline void srunner_run_all(SRunner *r, int m) {
  (void)m;
  for (volatile int i = 0; i < r->s->n; i++)
    for (volatile int j = 0; j < r->s->tc[i]->n; j++) {
      if (setjmp(shim_jb) == 0) { r->s->tc[i]->fn[j](); printf("PASS %s\n", r->s->tc[i]->nm[j]); }
      else { r->failed++; printf("FAIL %s\n", r->s->tc[i]->nm[j]); }
    }
}
static inline int srunner_ntests_failed(SRunner *r) { return r->failed; }
static inline void srunner_free(SRunner *r) { free(r); }
#endif
