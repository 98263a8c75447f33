#!/usr/bin/env bash
# TFRecord + tf.Example read/parse throughput (MB/s, one core) and the cost of event
# summaries per trainer step. Builds bench/bench_records.c as $LV_BUILD/bench/bench_records
# (default build/) with make and prints the figures.
set -euo pipefail
root=${LV_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
. bench/build.sh
bench_build bench_records
tmp=$(mktemp -d /tmp/lv_bench_records.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# One core for the reader, as the target says; the events writer thread may share it.
taskset -c 0 "$bench_dir/bench_records" "$tmp"
