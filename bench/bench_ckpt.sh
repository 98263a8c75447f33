#!/usr/bin/env bash
# Checkpoint throughput against the disk: writes and reads a ~500 MB checkpoint with
# lingvoc's bundle writer/reader and measures `dd` on the same filesystem in the same
# run, then prints the ratios (goal: >= 0.5 of dd for both). Also times keras2ckpt on
# Fashion-MNIST (goal: < 2 s). Needs `make` first (uses build/liblingvoc.a, bin/).
# Usage: bench/bench_ckpt.sh [DIR] (default: a temporary directory under /tmp; MB=500).
set -eu
cd "$(dirname "$0")/.."
MB=${MB:-500}
dir=${1:-$(mktemp -d /tmp/bench_ckpt.XXXXXX)}
mkdir -p "$dir"
trap 'rm -rf "$dir"/bench.* "$dir"/dd.bin "$dir"/fm.*' EXIT
[ -f build/liblingvoc.a ] || make -j2 > /dev/null
cc -std=c11 -D_GNU_SOURCE -O2 -Isrc -Ibuild/gen bench/bench_ckpt.c build/liblingvoc.a \
  $(pkg-config --libs libprotobuf-c) -lsnappy -lz -lm -lpthread -fopenmp -o build/bench_ckpt

# dd: sequential write with the final fsync counted (as the writer fsyncs), then read.
mbps() { awk -v b="$1" -v t="$2" 'BEGIN { printf "%.1f", b / 1e6 / t }'; }
now() { date +%s.%N; }
t0=$(now)
dd if=/dev/zero of="$dir/dd.bin" bs=1M count=$((MB * 1000 * 1000 / 1048576)) conv=fsync status=none
t1=$(now)
dd if="$dir/dd.bin" of=/dev/null bs=1M status=none
t2=$(now)
bytes=$(stat -c %s "$dir/dd.bin")
dd_w=$(mbps "$bytes" "$(echo "$t1 - $t0" | bc -l)")
dd_r=$(mbps "$bytes" "$(echo "$t2 - $t1" | bc -l)")
rm -f "$dir/dd.bin"

out=$(build/bench_ckpt "$dir/bench" "$MB")
ck_w=$(echo "$out" | awk '/write_MBps/ { print $2 }')
ck_r=$(echo "$out" | awk '/read_MBps/ { print $2 }')
echo "filesystem: $(df -h "$dir" | awk 'NR==2 { print $1 " (" $2 ")" }'), $MB MB"
echo "$out" | head -1
printf 'write: dd %8.1f MB/s  checkpoint %8.1f MB/s  ratio %.2f\n' "$dd_w" "$ck_w" "$(echo "$ck_w / $dd_w" | bc -l)"
printf 'read:  dd %8.1f MB/s  checkpoint %8.1f MB/s  ratio %.2f\n' "$dd_r" "$ck_r" "$(echo "$ck_r / $dd_r" | bc -l)"
echo "(reads are from the page cache for both: the files were just written)"

if [ -d /usr/share/datasets/fashion-mnist ] || [ -d "$HOME/.keras/datasets/fashion-mnist" ]; then
  t0=$(now)
  bin/keras2ckpt --dataset=fashion_mnist --out="$dir/fm" > /dev/null
  t1=$(now)
  printf 'keras2ckpt fashion_mnist: %.2f s (goal < 2 s)\n' "$(echo "$t1 - $t0" | bc -l)"
else
  echo "keras2ckpt: skipped (no Fashion-MNIST; apt-get install dataset-fashion-mnist)"
fi
