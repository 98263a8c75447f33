#!/usr/bin/env bash
# A stack of Transformer layers (model 256, 4 heads, FFN 1024, length 32, batch 64, 4
# layers) forward + backward, lingvoc's TransformerLayer (Lingvo's pre-LN encoder layer,
# with a value projection so the work is the same) against PyTorch's
# nn.TransformerEncoderLayer stack (/usr/bin/python3, torch.set_num_threads), 2 threads,
# in the same run: RUNS (default 5) interleaved runs of STEPS (default 10) timed steps
# each; prints per-run figures, medians, spread (min..max), the ratio and GFLOP/s.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
RUNS=${RUNS:-5}
STEPS=${STEPS:-10}
THREADS=${THREADS:-2}
SHAPE=(${LAYERS:-4} 256 4 1024 32 64)
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
. bench/build.sh
bench_build transformer_bench
have_torch=1
/usr/bin/python3 -c 'import torch' 2>/dev/null || { have_torch=0; echo "SKIP torch side: /usr/bin/python3 cannot import torch"; }
lv=() ; pt=() ; gflop=0
for r in $(seq "$RUNS"); do
  out=$("$bench_dir/transformer_bench" "$THREADS" "$STEPS" "${SHAPE[@]}")
  echo "run $r: $out"
  lv+=("$(sed 's/.*ms_per_step=\([0-9.]*\).*/\1/' <<<"$out")")
  gflop=$(sed 's/.*gflop_per_step=\([0-9.]*\).*/\1/' <<<"$out")
  if [ $have_torch = 1 ]; then
    out=$(/usr/bin/python3 bench/transformer_torch.py "$THREADS" "$STEPS" "${SHAPE[@]}")
    echo "run $r: $out"
    pt+=("$(sed 's/.*ms_per_step=\([0-9.]*\).*/\1/' <<<"$out")")
  fi
done
/usr/bin/python3 - "$gflop" "${lv[*]}" "${pt[*]:-}" <<'PY'
import statistics, sys
gflop = float(sys.argv[1])
lv = [float(v) for v in sys.argv[2].split()]
pt = [float(v) for v in sys.argv[3].split()] if sys.argv[3].strip() else []
def line(name, xs):
    m = statistics.median(xs)
    print("%-8s median %8.2f ms/step  spread %.2f..%.2f  %.1f GFLOP/s" % (name, m, min(xs), max(xs), gflop / (m / 1e3)))
    return m
print("Transformer stack 4 x (model 256, 4 heads, FFN 1024), length 32, batch 64, fwd+bwd, %.2f GFLOP/step" % gflop)
m_lv = line("lingvoc", lv)
if pt:
    m_pt = line("pytorch", pt)
    print("speed-up lingvoc / pytorch: %.2fx (target >= 1.5x)" % (m_pt / m_lv))
PY
