#!/usr/bin/env bash
# Checkpoint throughput against the disk: writes and reads a ~500 MB checkpoint with
# lingvoc's bundle writer/reader and measures `dd` on the same filesystem in the same
# run, then prints the ratios (goal: >= 0.5 of dd for both). Writes include fsync for
# both. Reads are measured cold (file evicted from the page cache with
# posix_fadvise(DONTNEED); dd iflag=nocache does the same) and cached. Also times
# keras2ckpt on Fashion-MNIST (goal: < 2 s). Builds what it needs with make.
# Usage: bench/bench_ckpt.sh [DIR] (default: a temporary directory under /tmp; MB=500).
set -eu
cd "$(dirname "$0")/.."
MB=${MB:-500}
dir=${1:-$(mktemp -d /tmp/bench_ckpt.XXXXXX)}
mkdir -p "$dir"
trap 'rm -rf "$dir"/bench.* "$dir"/dd.bin "$dir"/fm.*' EXIT
make -s -j"$(nproc)" bin/keras2ckpt
. bench/build.sh
bench_build bench_ckpt

# dd: sequential write with the final fsync counted (as the writer fsyncs), then read;
# best of REPEATS runs each, as for the checkpoint (the machine may be shared).
REPEATS=${REPEATS:-3}
mbps() { awk -v b="$1" -v t="$2" 'BEGIN { printf "%.1f", b / 1e6 / t }'; }
now() { date +%s.%N; }
best_w=1e9; best_r=1e9; best_c=1e9
minof() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN { d = b - a; print (d < m ? d : m) }'; }
for _ in $(seq "$REPEATS"); do
  t0=$(now)
  dd if=/dev/zero of="$dir/dd.bin" bs=1M count=$((MB * 1000 * 1000 / 1048576)) conv=fsync status=none
  t1=$(now)
  dd if="$dir/dd.bin" iflag=nocache count=0 status=none   # evict it
  t2=$(now)
  dd if="$dir/dd.bin" of=/dev/null bs=1M status=none
  t3=$(now)
  dd if="$dir/dd.bin" of=/dev/null bs=1M status=none
  t4=$(now)
  best_w=$(minof "$t0" "$t1" "$best_w")
  best_r=$(minof "$t2" "$t3" "$best_r")
  best_c=$(minof "$t3" "$t4" "$best_c")
done
bytes=$(stat -c %s "$dir/dd.bin")
dd_w=$(mbps "$bytes" "$best_w")
dd_r=$(mbps "$bytes" "$best_r")
dd_c=$(mbps "$bytes" "$best_c")
rm -f "$dir/dd.bin"

out=$("$bench_dir/bench_ckpt" "$dir/bench" "$MB" "$REPEATS")
ck_w=$(echo "$out" | awk '/write_MBps/ { print $2 }')
ck_r=$(echo "$out" | awk '/^read_MBps/ { print $2 }')
ck_c=$(echo "$out" | awk '/read_cached_MBps/ { print $2 }')
echo "filesystem: $(df -h "$dir" | awk 'NR==2 { print $1 " (" $2 ")" }'), $MB MB"
echo "$out" | head -1
printf 'write (with fsync):      dd %8.1f MB/s  checkpoint %8.1f MB/s  ratio %.2f\n' "$dd_w" "$ck_w" "$(echo "$ck_w / $dd_w" | bc -l)"
printf 'read (from disk):        dd %8.1f MB/s  checkpoint %8.1f MB/s  ratio %.2f\n' "$dd_r" "$ck_r" "$(echo "$ck_r / $dd_r" | bc -l)"
printf 'read (from page cache):  dd %8.1f MB/s  checkpoint %8.1f MB/s  ratio %.2f\n' "$dd_c" "$ck_c" "$(echo "$ck_c / $dd_c" | bc -l)"
echo "(best of $REPEATS each; dd reads into one 1 MiB buffer that stays in cache, the checkpoint reader into 25 MB tensors)"

if [ -d /usr/share/datasets/fashion-mnist ] || [ -d "$HOME/.keras/datasets/fashion-mnist" ]; then
  t0=$(now)
  bin/keras2ckpt --dataset=fashion_mnist --out="$dir/fm" > /dev/null
  t1=$(now)
  printf 'keras2ckpt fashion_mnist: %.2f s (goal < 2 s)\n' "$(echo "$t1 - $t0" | bc -l)"
else
  echo "keras2ckpt: skipped (no Fashion-MNIST; apt-get install dataset-fashion-mnist)"
fi
