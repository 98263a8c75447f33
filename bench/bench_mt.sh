#!/usr/bin/env bash
# mt.bible_en_es.TransformerSmall (model 256, 4 heads, FFN 1024, 3 + 3 layers, vocab 8000,
# label smoothing 0.1, dropout 0.1, Adam) against the same Transformer in PyTorch 1.13
# (/usr/bin/python3, torch.set_num_threads), THREADS (default 2) threads, in the same run:
# RUNS (default 3) interleaved runs of each side, each timing
#   training:  STEPS (default 5) full steps on a fixed batch BATCH x SRC_LEN -> TGT_LEN
#              (64 x 32 -> 32, some rows padded) -> target tokens/s;
#   greedy:    decoding with a key/value cache, DEC_BATCH (32) sentences, DEC_STEPS (32)
#              steps each (</s> masked until the last step, so both sides do every step);
#   beam:      lingvoc's beam search, HYPS (4) hyps per sentence, same sentences and steps
#              (no PyTorch counterpart; reported beside greedy).
# Prints per-run figures, medians, spread (min..max), the ratios against the issue's
# targets (training >= 1.5x, greedy >= 2x) and training GFLOP/s (matmul FLOPs, the same
# count for both sides), and each side's peak RSS (/usr/bin/time: the whole process,
# whose peak is the training steps') with their ratio (the memory issue's figure).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
RUNS=${RUNS:-3}
STEPS=${STEPS:-5}
THREADS=${THREADS:-2}
BATCH=${BATCH:-64} SRC_LEN=${SRC_LEN:-32} TGT_LEN=${TGT_LEN:-32}
DEC_BATCH=${DEC_BATCH:-32} DEC_STEPS=${DEC_STEPS:-32} HYPS=${HYPS:-4}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
. bench/build.sh
bench_build mt_bench
have_torch=1
/usr/bin/python3 -c 'import torch' 2>/dev/null || { have_torch=0; echo "SKIP torch side: /usr/bin/python3 cannot import torch"; }
lv=() ; pt=()
rss=$(mktemp)
trap 'rm -f "$rss"' EXIT
# peak CMD...: runs CMD under /usr/bin/time, its stdout followed by " rss_mb=N".
peak() { local o; o=$(/usr/bin/time -f %M -o "$rss" "$@") && echo "$o rss_mb=$(( $(tail -1 "$rss") / 1024 ))"; }
for r in $(seq "$RUNS"); do
  out=$(peak "$bench_dir/mt_bench" "$THREADS" "$STEPS" "$BATCH" "$SRC_LEN" "$TGT_LEN" "$DEC_BATCH" "$DEC_STEPS" "$HYPS")
  echo "run $r: $out"
  lv+=("$out")
  if [ $have_torch = 1 ]; then
    out=$(peak /usr/bin/python3 bench/mt_torch.py "$THREADS" "$STEPS" "$BATCH" "$SRC_LEN" "$TGT_LEN" "$DEC_BATCH" "$DEC_STEPS")
    echo "run $r: $out"
    pt+=("$out")
  fi
done
printf '%s\n' "${lv[@]}" >build/bench/mt_lingvoc.txt
printf '%s\n' "${pt[@]:-}" >build/bench/mt_torch.txt
/usr/bin/python3 - "$BATCH" "$SRC_LEN" "$TGT_LEN" "$DEC_BATCH" "$DEC_STEPS" "$HYPS" <<'PY'
import statistics, sys

B, S, T, DB, DN, H = [int(v) for v in sys.argv[1:7]]
D, F, V, L = 256, 1024, 8000, 3

def parse(path):
    runs = []
    for line in open(path):
        if line.strip():
            runs.append({k: float(v) for k, v in (kv.split("=") for kv in line.split()[1:])})
    return runs

lv, pt = parse("build/bench/mt_lingvoc.txt"), parse("build/bench/mt_torch.txt")
for side in (lv, pt):
    for r in side:
        if (r["train_tok"], r["greedy_tok"], r["params"]) != (lv[0]["train_tok"], lv[0]["greedy_tok"], lv[0]["params"]):
            sys.exit("the two sides disagree on target tokens or parameter count: %r vs %r" % (r, lv[0]))

# Matmul FLOPs of one training step (forward x 3), counted the same for both sides:
# projections, attention scores and contexts (full, not halved by the causal mask), FFN,
# softmax; no value projection (Lingvo's MultiHeadedAttention in TransformerLayer).
ns, nt = B * S, B * T
enc = L * (3 * 2 * ns * D * D + 2 * 2 * B * S * S * D + 2 * 2 * ns * D * F)
dec = L * (3 * 2 * nt * D * D + 2 * 2 * B * T * T * D
           + 2 * 2 * nt * D * D + 2 * ns * D * D + 2 * 2 * B * T * S * D
           + 2 * 2 * nt * D * F)
gflop = 3 * (enc + dec + 2 * nt * D * V) / 1e9

def stat(runs, ms, tok):
    rates = [r[tok] / (r[ms] / 1e3) for r in runs]
    return statistics.median(rates), min(rates), max(rates), statistics.median(r[ms] for r in runs)

print("TransformerSmall (d 256, 4 heads, FFN 1024, 3+3 layers, vocab 8000), %d params; %d runs" % (lv[0]["params"], len(lv)))
print("training: batch %d, source %d, target %d (%d target tokens), %.1f GFLOP/step" % (B, S, T, lv[0]["train_tok"], gflop))
res = {}
for name, runs in (("lingvoc", lv), ("pytorch", pt)):
    if not runs:
        continue
    m, lo, hi, ms = stat(runs, "train_ms", "train_tok")
    res[name, "train"] = m
    print("  %-8s median %8.0f target tok/s  spread %.0f..%.0f  %.0f ms/step  %.1f GFLOP/s" % (name, m, lo, hi, ms, gflop / (ms / 1e3)))
if pt:
    print("  speed-up lingvoc / pytorch: %.2fx (target >= 1.5x)" % (res["lingvoc", "train"] / res["pytorch", "train"]))
print("greedy decoding with a cache: %d sentences x %d steps" % (DB, DN))
for name, runs in (("lingvoc", lv), ("pytorch", pt)):
    if not runs:
        continue
    m, lo, hi, ms = stat(runs, "greedy_ms", "greedy_tok")
    res[name, "greedy"] = m
    print("  %-8s median %8.0f target tok/s  spread %.0f..%.0f  %.0f ms/search" % (name, m, lo, hi, ms))
if pt:
    print("  speed-up lingvoc / pytorch: %.2fx (target >= 2x)" % (res["lingvoc", "greedy"] / res["pytorch", "greedy"]))
m, lo, hi, ms = stat(lv, "beam_ms", "beam_tok")
print("beam search, %d hyps x %d sentences x %d steps" % (H, DB, DN))
print("  lingvoc  median %8.0f target tok/s  spread %.0f..%.0f  %.0f ms/search (%.0f hyp tok/s)" % (m, lo, hi, ms, m * H))
print("peak RSS (the whole process: training, then decoding)")
for name, runs in (("lingvoc", lv), ("pytorch", pt)):
    if runs:
        r = [x["rss_mb"] for x in runs]
        res[name, "rss"] = statistics.median(r)
        print("  %-8s median %6.0f MB  spread %.0f..%.0f" % (name, statistics.median(r), min(r), max(r)))
if pt:
    print("  lingvoc / pytorch: %.2fx (target <= 0.8x)" % (res["lingvoc", "rss"] / res["pytorch", "rss"]))
PY
