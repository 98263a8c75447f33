#!/usr/bin/env bash
# NmtInput's bucketed MT batches per second on one core, with and without the batcher
# thread (input.prefetch_batches 2 and 0), on the English/Spanish Bible encoded as
# Lingvo's MT records by the repo's own tools:
#   scripts/bible_parallel.sh -> scripts/build_wpm_vocab.sh (8000 pieces)
#   -> bin/wpm_encode_file (4 shards, 29,172 records)
# or, when the corpus packages cannot be had, synthetic records of the same layout
# (bench_input synth). Buckets: Lingvo's WmtEnDeTransformerBase training buckets.
#
# Prints, per setting, batches/s, sentences/s and unpadded target tokens/s (RUNS
# interleaved runs of SECONDS each, default 3 x 5 s, pinned to CPU 0), then the time a
# trainer that spends STEP_MS (default 5) per step off the CPU (a device step) waits in
# train_batch. Builds bench/bench_input.c as $LV_BUILD/bench/bench_input (default build/).
#
# The issue's target is >= 10x the rate at which the MT trainer consumes batches; that
# trainer does not exist yet, so its rate is not known: compare its steps/s with
# the batches/s here when it does.
set -euo pipefail
root=${LV_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
bindir=${LV_BIN:-$root/bin}
cd "$root"
. bench/build.sh
bench_build bench_input
RUNS=${RUNS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
STEP_MS=${STEP_MS:-5}
[ -e "$bindir/wpm_encode_file" ] || { echo "bench_input: $bindir/wpm_encode_file missing: run make first" >&2; exit 1; }
tmp=$(mktemp -d /tmp/lv_bench_input.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pattern="$tmp/train.tfrecords@4"
if scripts/bible_parallel.sh "$tmp/bible" >"$tmp/prep.log" 2>&1 &&
  scripts/build_wpm_vocab.sh --input="$tmp/bible/train.en,$tmp/bible/train.es" --vocab_size=8000 \
    --out="$tmp/wpm.voc" >>"$tmp/prep.log" 2>&1 &&
  "$bindir/wpm_encode_file" --source_filepaths="$tmp/bible/train.en" --target_filepaths="$tmp/bible/train.es" \
    --wpm_filepath="$tmp/wpm.voc" --output_filepath="$tmp/train.tfrecords" --num_shards=4 >>"$tmp/prep.log" 2>&1; then
  echo "data: the Bible's training pairs (en->es), WPM 8000, $(grep -o '[0-9.]* pieces per sentence' "$tmp/prep.log")"
else
  echo "data: the Bible corpus could not be prepared (see below); 30000 synthetic records instead"
  tail -3 "$tmp/prep.log" | sed 's/^/  /'
  "$bench_dir/bench_input" synth "$tmp/train.tfrecords" 30000
fi
for _ in $(seq "$RUNS"); do
  for k in 0 2; do taskset -c 0 "$bench_dir/bench_input" rate "$pattern" $k "$SECONDS_PER_RUN"; done
done
for k in 0 2; do taskset -c 0 "$bench_dir/bench_input" consumer "$pattern" $k "$STEP_MS" 1000; done
echo "target: >= 10x the MT trainer's batches/s (not known yet: no MT trainer)"
