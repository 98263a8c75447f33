#!/usr/bin/env bash
# LeNet5 training and eval throughput, lingvoc against PyTorch (Debian python3-torch) on
# the same machine in the same run: batch 256, 2 threads, same architecture. Each side
# runs RUNS times (default 3), interleaved; medians, spread and ratios are printed with
# peak RSS.
#
#   CORUN=1             training is measured with an evaler of the same side running
#                       continuously beside it (both sides face the same contention)
#   LINGVOC_BIN=DIR     the lingvoc build to measure (default bin)
#   LINGVOC_BASE_BIN=DIR  a second lingvoc build (e.g. the previous main's bin/) measured
#                       in the same interleaved runs
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
RUNS=${RUNS:-3}
STEPS=${STEPS:-60}
THREADS=${THREADS:-2}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
args=(--runs "$RUNS" --steps "$STEPS" --threads "$THREADS" --bin "${LINGVOC_BIN:-bin}")
[ -n "${LINGVOC_BASE_BIN:-}" ] && args+=(--base_bin "$LINGVOC_BASE_BIN")
[ "${CORUN:-0}" = 1 ] && args+=(--corun)
exec /usr/bin/python3 bench/lenet5_bench.py "${args[@]}"
