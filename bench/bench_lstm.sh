#!/usr/bin/env bash
# LayerNormalizedLSTMCellSimple unrolled over 50 steps, batch 64, 512 units, forward +
# backward, 2 threads: lingvoc (bench/lstm_bench.c, the FRNN layer) against the same cell
# written in PyTorch (bench/lstm_torch.py, /usr/bin/python3, torch.set_num_threads).
# RUNS interleaved runs per side (default 5) of ITERS timed iterations each (default 5);
# prints each run, then medians, spread (min-max), the ratio and GFLOP/s of the GEMMs.
# Target: lingvoc >= 2x PyTorch.
#   THREADS (2), RUNS (5), ITERS (5), T (50), B (64), UNITS (512)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
THREADS=${THREADS:-2} RUNS=${RUNS:-5} ITERS=${ITERS:-5} T=${T:-50} B=${B:-64} UNITS=${UNITS:-512}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
. bench/build.sh
bench_build lstm_bench
args=("$THREADS" "$ITERS" "$T" "$B" "$UNITS")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq 1 "$RUNS"); do
  "$bench_dir/lstm_bench" "${args[@]}" | tee -a "$out"
  /usr/bin/python3 bench/lstm_torch.py "${args[@]}" | tee -a "$out"
done
/usr/bin/python3 - "$out" "$THREADS" "$T" "$B" "$UNITS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], []).append((float(f[2]), float(f[8])))
def summ(k):
    ms = [r[0] for r in rows[k]]
    gf = [r[1] for r in rows[k]]
    return statistics.median(ms), min(ms), max(ms), statistics.median(gf)
l, t = summ("lingvoc_lstm"), summ("torch_lstm")
print("LayerNormalizedLSTMCellSimple T=%s B=%s units=%s fwd+bwd, %s threads:" % tuple(sys.argv[3:6] + sys.argv[2:3]))
for name, s in (("lingvoc", l), ("pytorch", t)):
    print("  %-8s median %8.2f ms/iter (min %.2f, max %.2f), %.1f GFLOP/s" % ((name,) + s))
print("  speedup lingvoc vs pytorch: %.2fx (target >= 2x)" % (t[0] / l[0]))
PY
