/* The process environment lingvoc reads, captured in one place at start-up. Every main
 * calls lv_env_init() first; library code asks lv_env() for the values and never calls
 * getenv itself, so what a run depends on is listed here and read once, before any
 * thread starts. A program that never calls lv_env_init (a test suite, a fuzzer) gets the
 * environment read at the first lv_env() call, which is the same values. */
#ifndef LV_BASE_ENV_H
#define LV_BASE_ENV_H

#include <stdbool.h>

/* An unset variable is NULL; strings point into the process environment. */
typedef struct {
  const char *experiments;       /* LINGVOC_EXPERIMENTS: experiment files' folder */
  const char *openblas_coretype; /* OPENBLAS_CORETYPE as the user set it (OpenBLAS core) */
  bool cuda_tf32;                /* LINGVOC_CUDA_TF32=1: cuBLAS may use TF32 */
  bool cuda_cudnn_off;           /* LINGVOC_CUDNN=0: conv and pooling without cuDNN */
  const char *gemm_small;        /* LINGVOC_GEMM_SMALL: off, avx2, avx512 (cpu_gemm_small.c) */
  const char *int8;              /* LINGVOC_INT8: off, avx2, avx512, float (cpu_int8.c, qweight.h) */
  /* MPI launchers' world size and rank, in the order tried: Open MPI's mpirun
   * (OMPI_COMM_WORLD_*), MPICH's hydra and srun --mpi=pmi2 (PMI_*), PMIx (PMIX_*). */
  const char *launcher_size[3], *launcher_rank[3];
  const char *ompi_local_rank; /* OMPI_COMM_WORLD_LOCAL_RANK: GPU of an NCCL rank */
} lv_env;

/* Reads the environment into the process-wide lv_env; idempotent. */
void lv_env_init(void);
/* The values read by lv_env_init (which it calls if nobody has). */
const lv_env *lv_env_get(void);

#endif
