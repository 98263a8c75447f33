#!/usr/bin/env bash
# LeNet5 training and eval throughput, lingvoc against PyTorch (Debian python3-torch) on
# the same machine in the same run: batch 256, 2 threads, same architecture. Each side
# runs RUNS times (default 3), interleaved; medians and ratios are printed with peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
STEPS=${STEPS:-60}
THREADS=${THREADS:-2}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
exec /usr/bin/python3 bench/lenet5_bench.py --runs "$RUNS" --steps "$STEPS" --threads "$THREADS"
