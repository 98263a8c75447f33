#!/usr/bin/env bash
# TFRecord + tf.Example read/parse throughput (MB/s, one core) and the cost of event
# summaries per trainer step. Builds bench/bench_records.c against build/liblingvoc.a
# (run `make` first) and prints the figures.
set -euo pipefail
root=${LV_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
build=${LV_BUILD:-$root/build}
cd "$root"
[ -f "$build/liblingvoc.a" ] || { echo "bench_records: $build/liblingvoc.a missing: run make first" >&2; exit 1; }
tmp=$(mktemp -d /tmp/lv_bench_records.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -march=x86-64-v2 -mtune=generic -Isrc -I"$build/gen" \
  $(pkg-config --cflags libprotobuf-c) bench/bench_records.c "$build/liblingvoc.a" \
  $(pkg-config --libs libconfig libprotobuf-c) -lopenblas -lsnappy -lz -lpng -lm -lpthread -fopenmp \
  -o "$tmp/bench_records"
# One core for the reader, as the target says; the events writer thread may share it.
taskset -c 0 "$tmp/bench_records" "$tmp"
