#!/usr/bin/env bash
# Builds and runs the CUDA op test (tests/check_backend_ops.c) on a GPU machine that has
# CUDA (with cuDNN 9 beside it), cc and OpenBLAS but not the rest of lingvoc's
# dependencies (libcheck, libconfig, protobuf-c): only the kernels, their base helpers
# and the test, with tests/bare/check.h standing in for libcheck. Then runs it, and under
# compute-sanitizer when SANITIZE=1.
# Usage: scripts/cuda-op-test-bare.sh [OUT_DIR]   (default /tmp/lingvoc-ops)
set -euo pipefail
cd "$(dirname "$0")/.."
O=${1:-/tmp/lingvoc-ops}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$O"
CF="-std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -fopenmp -Isrc -DLV_HAVE_CUDA -Itests/bare"
NV="$CUDA_HOME/bin/nvcc -O2 -g -std=c++17 -fmad=false -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 -Isrc -D_GNU_SOURCE"
pids=()
for f in src/kernels/cuda/*.cu; do $NV -c "$f" -o "$O/$(basename "$f").o" & pids+=($!); done
for f in src/base/status.c src/base/env.c src/base/rng.c src/base/dtype.c src/base/device.c src/base/log.c src/base/names.c \
         src/kernels/*.c src/kernels/cpu/*.c tests/check_backend_ops.c; do
  cc $CF -c "$f" -o "$O/$(echo "$f" | tr / _).o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
cc -fopenmp "$O"/*.o -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudnn -lcublas -lcudart -lstdc++ -lopenblas -lm \
  -lpthread -o "$O/check_backend_ops"
"$O/check_backend_ops"
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck initcheck; do
    echo "== compute-sanitizer --tool $tool"
    "$CUDA_HOME/bin/compute-sanitizer" --tool "$tool" --error-exitcode 1 "$O/check_backend_ops" | tail -2
  done
fi
