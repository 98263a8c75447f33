/* Communicators (comm/comm.h) and the replica helpers (runners/replicas.h).
 *
 * Run plainly (make test), the local communicator and launch detection are checked and
 * the MPI collectives test says it was skipped. tests/test_replicas.sh also runs this
 * suite as `CK_FORK=no mpirun -np 2 build/tests/check_comm`, where the MPI test sums,
 * broadcasts and compares across the two real ranks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "check_util.h"
#include "comm/comm.h"
#include "core/ops.h"
#include "core/variable.h"
#include "runners/replicas.h"

START_TEST(test_local_comm) {
  lv_comm *c = NULL;
  EXPECT_OK(lv_comm_create(LV_COMM_LOCAL, &c));
  ck_assert_int_eq(lv_comm_rank(c), 0);
  ck_assert_int_eq(lv_comm_size(c), 1);
  ck_assert_int_eq(lv_comm_kind_of(c), LV_COMM_LOCAL);
  ck_assert_ptr_nonnull(strstr(lv_comm_describe(c), "local"));
  float f[3] = {1, 2, 3};
  double d[2] = {4, 5};
  char b[4] = "abc";
  EXPECT_OK(lv_comm_allreduce_f32(c, f, 3));
  EXPECT_OK(lv_comm_allreduce_f64(c, d, 2));
  EXPECT_OK(lv_comm_broadcast(c, b, sizeof b, 0));
  EXPECT_OK(lv_comm_barrier(c));
  ck_assert(f[0] == 1 && f[2] == 3 && d[1] == 5 && !strcmp(b, "abc"));
  ck_assert_int_eq(lv_comm_allreduce_bytes(c), 12);
  /* Non-blocking: done at once; one rank has nothing to overlap. */
  lv_comm_request *r = NULL;
  bool done = false;
  ck_assert(lv_comm_can_overlap(c));
  EXPECT_OK(lv_comm_iallreduce_f32(c, f, 3, &r));
  EXPECT_OK(lv_comm_test(c, r, &done));
  ck_assert(done);
  EXPECT_OK(lv_comm_wait(c, r));
  ck_assert(f[0] == 1 && f[2] == 3);
  lv_varstore *vs = lv_varstore_create();
  lv_var *w;
  EXPECT_OK(lv_varstore_add(vs, "w", LV_F32, lv_shape1(5), (lv_var_init){LV_INIT_CONSTANT, 2.0}, true, &w));
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  lv_grad_overlap *o = (lv_grad_overlap *)1;
  EXPECT_OK(lv_grad_overlap_create(c, vs, 1024, &o));
  ck_assert_ptr_null(o);
  lv_varstore_destroy(vs);
  EXPECT_ERR(lv_comm_broadcast(c, b, sizeof b, 1), LV_ERR_INTERNAL, "rank 1 of 1");
  EXPECT_OK(lv_comm_destroy(c));
  /* The null communicator is one process too. */
  ck_assert_int_eq(lv_comm_size(NULL), 1);
  ck_assert_int_eq(lv_comm_rank(NULL), 0);
}
END_TEST

START_TEST(test_launch_detection) {
  lv_env e = {0};
  int size = -1, rank = -1;
  ck_assert(!lv_comm_launched_by_mpi_env(&e, &size, &rank));
  ck_assert_int_eq(size, 1);
  ck_assert_int_eq(rank, 0);
  e.launcher_size[0] = "4", e.launcher_rank[0] = "3"; /* OMPI_COMM_WORLD_SIZE / _RANK */
  ck_assert(lv_comm_launched_by_mpi_env(&e, &size, &rank));
  ck_assert_int_eq(size, 4);
  ck_assert_int_eq(rank, 3);
  /* Malformed or inconsistent values are not a launch. */
  e.launcher_rank[0] = "4";
  ck_assert(!lv_comm_launched_by_mpi_env(&e, &size, &rank));
  e.launcher_rank[0] = "1x";
  ck_assert(!lv_comm_launched_by_mpi_env(&e, &size, &rank));
  e.launcher_size[0] = e.launcher_rank[0] = NULL;
  e.launcher_size[1] = "2", e.launcher_rank[1] = "0"; /* PMI_SIZE / PMI_RANK */
  ck_assert(lv_comm_launched_by_mpi_env(&e, &size, &rank));
  ck_assert_int_eq(size, 2);
}
END_TEST

START_TEST(test_kinds_built) {
  ck_assert(lv_comm_kind_built(LV_COMM_LOCAL));
  ck_assert_str_eq(lv_comm_kind_names[LV_COMM_MPI], "mpi");
  lv_comm *c = (lv_comm *)1;
  if (!lv_comm_kind_built(LV_COMM_NCCL)) {
    EXPECT_ERR(lv_comm_create(LV_COMM_NCCL, &c), LV_ERR_INVALID, "no nccl communicator", "CUDA=1");
    ck_assert_ptr_null(c);
  }
  if (!lv_comm_kind_built(LV_COMM_MPI)) EXPECT_ERR(lv_comm_create(LV_COMM_MPI, &c), LV_ERR_INVALID, "MPI=1");
}
END_TEST

/* With one rank the replica helpers are the single-process computation. */
START_TEST(test_replicas_one_rank) {
  lv_metrics mt;
  lv_metrics_init(&mt);
  lv_metrics_add_const(&mt, "loss", 0.75, 0);
  lv_metrics_add_const(&mt, "accuracy", 0.5, 128);
  lv_replica_step rs;
  EXPECT_OK(lv_replicas_exchange(NULL, &mt, true, &rs));
  ck_assert(rs.stop);
  ck_assert(rs.loss_scale == 1.0f);
  ck_assert(rs.value[0] == 0.75 && rs.weight[0] == 0); /* a lone rank keeps its value at weight 0 */
  ck_assert(rs.value[1] == 0.5 && rs.weight[1] == 128);
  lv_metrics_free(&mt);
  lv_varstore *vs = lv_varstore_create();
  lv_var *w;
  EXPECT_OK(lv_varstore_add(vs, "w", LV_F32, lv_shape1(5), (lv_var_init){LV_INIT_CONSTANT, 2.0}, true, &w));
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  EXPECT_OK(lv_replicas_allreduce_grads(NULL, vs));
  EXPECT_OK(lv_replicas_mean_nontrainable(NULL, vs));
  EXPECT_OK(lv_replicas_check_same(NULL, vs, 0, "variables"));
  lv_varstore_destroy(vs);
}
END_TEST

/* Gradients of loss = sum_k sum(w_k * w_k * x) (x differs per rank) summed over the ranks,
 * by the all-reduce overlapped with backward (one bucket per variable) or by the one
 * after it; copied into out. */
enum { NW = 3, PER = 1000 };
static void summed_grads(lv_comm *c, lv_varstore *vs, lv_var **w, int rank, bool overlap, float *out) {
  lv_graph *g = lv_graph_create(0);
  lv_varstore_zero_grads(vs);
  lv_grad_overlap *o = NULL;
  if (overlap) {
    EXPECT_OK(lv_grad_overlap_create(c, vs, 4, &o));
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(lv_grad_overlap_num_buckets(o), NW);
  }
  float xh[PER];
  for (int i = 0; i < PER; i++) xh[i] = 0.37f * (float)(rank + 1) * (float)(i + 1) / PER;
  lv_tensor xv = lv_tensor_view(LV_F32, lv_shape1(PER), xh);
  lv_tensor *x = lv_graph_from_host(g, &xv), *loss = NULL;
  for (int k = 0; k < NW; k++) {
    lv_tensor *t = lv_op_reduce_sum(g, lv_op_mul(g, lv_op_mul(g, &w[k]->value, &w[k]->value), x), 0, false);
    loss = loss ? lv_op_add(g, loss, t) : t;
  }
  /* w_0 read again at the end of the tape: its gradient is final only after both reads. */
  loss = lv_op_add(g, loss, lv_op_reduce_sum(g, lv_op_mul(g, &w[0]->value, x), 0, false));
  if (o) EXPECT_OK(lv_grad_overlap_arm(o, g));
  EXPECT_OK(lv_graph_backward(g, loss));
  if (o) EXPECT_OK(lv_grad_overlap_finish(o));
  else EXPECT_OK(lv_replicas_allreduce_grads(c, vs));
  lv_grad_overlap_destroy(o);
  int64_t n = 0;
  const float *gr = lv_varstore_grads(vs, &n);
  ck_assert_int_ge(n, NW * PER);
  memcpy(out, gr, sizeof(float) * (size_t)n);
  lv_graph_destroy(g);
}

/* Across real MPI ranks (CK_FORK=no mpirun -np N): sums, broadcasts, weighted metrics,
 * BN-statistics means and divergence detection. */
START_TEST(test_mpi_collectives) {
  int size = 1, rank = 0;
  if (!lv_comm_launched_by_mpi(&size, &rank) || size < 2 || !lv_comm_kind_built(LV_COMM_MPI)) {
    printf("check_comm: MPI collectives skipped (run under mpirun -np 2 with CK_FORK=no; tests/test_replicas.sh does)\n");
    return;
  }
  lv_comm *c = NULL;
  EXPECT_OK(lv_comm_create_auto(&c));
  ck_assert_int_eq(lv_comm_kind_of(c), LV_COMM_MPI);
  ck_assert_int_eq(lv_comm_size(c), size);
  ck_assert_int_eq(lv_comm_rank(c), rank);
  ck_assert_ptr_nonnull(strstr(lv_comm_describe(c), "mpi: "));
  /* A buffer the size of a small model's gradients: exact small-integer sums. */
  const int64_t n = 1000003;
  float *f = malloc(sizeof *f * (size_t)n);
  for (int64_t i = 0; i < n; i++) f[i] = (float)(rank + 1) * (float)(i % 7);
  EXPECT_OK(lv_comm_allreduce_f32(c, f, n));
  const float ranks_sum = (float)(size * (size + 1) / 2);
  for (int64_t i = 0; i < n; i++) ck_assert_msg(f[i] == ranks_sum * (float)(i % 7), "f[%lld] = %g", (long long)i, f[i]);
  free(f);
  ck_assert(lv_comm_allreduce_seconds(c) > 0);
  double d[2] = {0.5 * rank, 1};
  EXPECT_OK(lv_comm_allreduce_f64(c, d, 2));
  ck_assert(d[1] == size);
  char msg[16] = "";
  if (rank == 0) snprintf(msg, sizeof msg, "from rank 0");
  EXPECT_OK(lv_comm_broadcast(c, msg, sizeof msg, 0));
  ck_assert_str_eq(msg, "from rank 0");
  EXPECT_OK(lv_comm_barrier(c));

  /* Metrics: loss v_r = r + 1 with weight w_r = r + 1; loss_scale = w_r / sum w. */
  lv_metrics mt;
  lv_metrics_init(&mt);
  lv_metrics_add_const(&mt, "loss", rank + 1, rank + 1);
  lv_replica_step rs;
  EXPECT_OK(lv_replicas_exchange(c, &mt, rank == size - 1, &rs));
  double wsum = 0, vwsum = 0;
  for (int r = 0; r < size; r++) wsum += r + 1, vwsum += (double)(r + 1) * (r + 1);
  ck_assert(rs.stop); /* the last rank's request reaches every rank */
  ck_assert(fabs(rs.value[0] - vwsum / wsum) < 1e-12);
  ck_assert(rs.weight[0] == wsum);
  ck_assert(rs.loss_scale == (float)((rank + 1) / wsum));
  lv_metrics_free(&mt);

  /* Variables: the gradient sum, the mean of non-trainable ones, divergence and the
   * broadcast that repairs it. */
  lv_varstore *vs = lv_varstore_create();
  lv_var *w, *mv;
  EXPECT_OK(lv_varstore_add(vs, "w", LV_F32, lv_shape1(5), (lv_var_init){LV_INIT_CONSTANT, 2.0}, true, &w));
  EXPECT_OK(lv_varstore_add(vs, "moving_mean", LV_F32, lv_shape1(3), (lv_var_init){LV_INIT_CONSTANT, 0.0}, false, &mv));
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  EXPECT_OK(lv_replicas_check_same(c, vs, 0, "variables"));
  float g[5] = {1, 2, 3, 4, (float)rank};
  EXPECT_OK(lv_tensor_from_host(&w->grad, g));
  EXPECT_OK(lv_replicas_allreduce_grads(c, vs));
  EXPECT_OK(lv_tensor_to_host(&w->grad, g));
  ck_assert(g[0] == size && g[3] == 4 * size && g[4] == (float)(size * (size - 1) / 2));
  float m[3] = {(float)rank, 1, 2 * (float)rank};
  EXPECT_OK(lv_tensor_from_host(&mv->value, m));
  EXPECT_OK(lv_replicas_mean_nontrainable(c, vs));
  EXPECT_OK(lv_tensor_to_host(&mv->value, m));
  ck_assert(m[0] == (float)(size - 1) / 2 && m[1] == 1 && m[2] == (float)(size - 1));
  float v[5] = {2, 2, 2, 2, rank == 1 ? 2.5f : 2.0f};
  EXPECT_OK(lv_tensor_from_host(&w->value, v));
  lv_status s = lv_replicas_check_same(c, vs, 7, "variables");
  if (size >= 2) EXPECT_ERR(s, LV_ERR_INTERNAL, "step 7", "rank 1 differ");
  lv_saveable items[1] = {{"w", LV_F32, lv_shape1(5), w->value.data, lv_device_host()}};
  EXPECT_OK(lv_replicas_broadcast(c, items, 1));
  EXPECT_OK(lv_replicas_check_same(c, vs, 8, "variables"));
  EXPECT_OK(lv_tensor_to_host(&w->value, v));
  ck_assert(v[4] == 2.0f);
  lv_varstore_destroy(vs);

  /* Non-blocking all-reduces: two at once, completed in the other order. */
  float a[4] = {1, 2, 3, (float)rank}, b[3] = {(float)rank, 5, 6};
  lv_comm_request *ra = NULL, *rb = NULL;
  ck_assert(lv_comm_can_overlap(c));
  EXPECT_OK(lv_comm_iallreduce_f32(c, a, 4, &ra));
  EXPECT_OK(lv_comm_iallreduce_f32(c, b, 3, &rb));
  bool done = false;
  for (int i = 0; i < 1000000 && !done; i++) EXPECT_OK(lv_comm_test(c, rb, &done));
  EXPECT_OK(lv_comm_wait(c, rb));
  EXPECT_OK(lv_comm_wait(c, ra));
  const float rsum = (float)(size * (size - 1) / 2);
  ck_assert(a[0] == size && a[2] == 3 * size && a[3] == rsum && b[0] == rsum && b[2] == 6 * size);

  /* The all-reduce overlapped with backward gives the blocking one's sums, bit for bit. */
  vs = lv_varstore_create();
  lv_var *ws[NW];
  for (int k = 0; k < NW; k++) {
    char name[16];
    snprintf(name, sizeof name, "w%d", k);
    EXPECT_OK(lv_varstore_add(vs, name, LV_F32, lv_shape1(PER), (lv_var_init){LV_INIT_CONSTANT, 0.5 + k}, true, &ws[k]));
  }
  EXPECT_OK(lv_varstore_finalize(vs, 1));
  int64_t ng = 0;
  const float *gbase = lv_varstore_grads(vs, &ng);
  const int64_t off1 = (const float *)ws[1]->grad.data - gbase;
  float *g1 = malloc(sizeof *g1 * (size_t)ng), *g2 = malloc(sizeof *g2 * (size_t)ng);
  summed_grads(c, vs, ws, rank, true, g1);
  summed_grads(c, vs, ws, rank, false, g2);
  ck_assert(!memcmp(g1, g2, sizeof *g1 * (size_t)ng));
  /* d/dw_0 = (2 w_0 + 1) sum_r x_r, d/dw_1 = 2 w_1 sum_r x_r: the sums are over every rank. */
  double xs = 0;
  for (int r = 0; r < size; r++) xs += 0.37 * (r + 1) * 1.0 / PER;
  ck_assert_msg(fabs(g1[0] - 2 * xs) < 1e-6, "g[0] = %g, expected %g", g1[0], 2 * xs);
  ck_assert_msg(fabs(g1[off1] - 3 * xs) < 1e-6, "w_1's g[0] = %g, expected %g", g1[off1], 3 * xs);
  free(g1);
  free(g2);
  /* Bucket sizes: everything in one bucket; no overlap object with buckets off. */
  lv_grad_overlap *o = NULL;
  EXPECT_OK(lv_grad_overlap_create(c, vs, 1 << 30, &o));
  ck_assert_int_eq(lv_grad_overlap_num_buckets(o), 1);
  lv_grad_overlap_destroy(o);
  EXPECT_OK(lv_grad_overlap_create(c, vs, 0, &o));
  ck_assert_ptr_null(o);
  lv_varstore_destroy(vs);
  EXPECT_OK(lv_comm_destroy(c));
}
END_TEST

int main(void) {
  Suite *su = suite_create("comm");
  TCase *tc = tcase_create("comm");
  tcase_add_test(tc, test_local_comm);
  tcase_add_test(tc, test_launch_detection);
  tcase_add_test(tc, test_kinds_built);
  tcase_add_test(tc, test_replicas_one_rank);
  tcase_add_test(tc, test_mpi_collectives);
  suite_add_tcase(su, tc);
  return lv_test_run(su);
}
