#!/usr/bin/env bash
# Builds bench/bench_lenet_ops.c as build/bench/bench_lenet_ops (make) and runs it.
# Usage: bench/bench_lenet_ops.sh [threads] [steps]
set -eu
cd "$(dirname "$0")/.."
. bench/build.sh
bench_build bench_lenet_ops
"$bench_dir/bench_lenet_ops" "${1:-2}" "${2:-20}"
