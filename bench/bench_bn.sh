#!/usr/bin/env bash
# Batch norm's cost in a 3-conv classifier.ModelV1 training step (bench/bench_bn.c): the
# step with batch_norm false and true, interleaved RUNS times, each run the median of REPS
# repetitions of STEPS steps; prints every run, the medians in steps/s and the BN/no-BN
# ratios of wall-clock and CPU time per step.
#
#   THREADS=2 RUNS=3 REPS=5 STEPS=5
#   LINGVOC_BASE=DIR    also measure the library of another checkout (e.g. a build of the
#                       previous main: DIR/build/liblingvoc.a) in the same interleaved runs
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
THREADS=${THREADS:-2}
RUNS=${RUNS:-3}
REPS=${REPS:-5}
STEPS=${STEPS:-5}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
. bench/build.sh
sides=(this)
if [ -n "${LINGVOC_BASE:-}" ]; then
  export LINGVOC_BASE # the Makefile's $(BUILD)/bench/%_base rule reads it
  sides=(base this)
  bench_build bench_bn bench_bn_base
else
  bench_build bench_bn
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq "$RUNS"); do
  for side in "${sides[@]}"; do
    bin=$bench_dir/bench_bn
    [ "$side" = base ] && bin=$bench_dir/bench_bn_base
    for bn in 0 1; do
      line=$("$bin" "$THREADS" "$STEPS" "$REPS" "$bn" experiments | head -1)
      echo "run $run $side: $line"
      ms=$(sed -n 's/.*median \([0-9.]*\) ms\/step.*/\1/p' <<<"$line")
      cpu=$(sed -n 's/.*cpu \([0-9.]*\) ms\/step.*/\1/p' <<<"$line")
      echo "$side $bn $ms $cpu" >>"$out"
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
for side in "${sides[@]}"; do
  python3 - "$out" "$side" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
side = sys.argv[2]
ms = {bn: [float(r[2]) for r in rows if r[0] == side and r[1] == bn] for bn in ("0", "1")}
cpu = {bn: [float(r[3]) for r in rows if r[0] == side and r[1] == bn] for bn in ("0", "1")}
m0, m1 = statistics.median(ms["0"]), statistics.median(ms["1"])
c0, c1 = statistics.median(cpu["0"]), statistics.median(cpu["1"])
print(f"{side}: no BN {m0:.1f} ms/step ({1e3/m0:.2f} steps/s, runs {min(ms['0']):.1f}..{max(ms['0']):.1f}), "
      f"BN {m1:.1f} ms/step ({1e3/m1:.2f} steps/s, runs {min(ms['1']):.1f}..{max(ms['1']):.1f}): "
      f"BN/no-BN {m1/m0:.2f}x wall, {c1/c0:.2f}x cpu ({c0:.0f} vs {c1:.0f} ms/step)")
EOF
done
