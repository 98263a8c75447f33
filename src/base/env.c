#include "base/env.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static lv_env g_env;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_env(void) {
  g_env.experiments = getenv("LINGVOC_EXPERIMENTS");
  g_env.openblas_coretype = getenv("OPENBLAS_CORETYPE");
  g_env.gemm_small = getenv("LINGVOC_GEMM_SMALL");
  g_env.int8 = getenv("LINGVOC_INT8");
  const char *tf32 = getenv("LINGVOC_CUDA_TF32");
  g_env.cuda_tf32 = tf32 && !strcmp(tf32, "1");
  const char *cudnn = getenv("LINGVOC_CUDNN");
  g_env.cuda_cudnn_off = cudnn && !strcmp(cudnn, "0");
  static const char *const kLaunchers[3][2] = {
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
      {"PMI_SIZE", "PMI_RANK"},
      {"PMIX_SIZE", "PMIX_RANK"},
  };
  for (int i = 0; i < 3; i++) {
    g_env.launcher_size[i] = getenv(kLaunchers[i][0]);
    g_env.launcher_rank[i] = getenv(kLaunchers[i][1]);
  }
  g_env.ompi_local_rank = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
}

void lv_env_init(void) { pthread_once(&g_once, read_env); }

const lv_env *lv_env_get(void) {
  lv_env_init();
  return &g_env;
}
