#!/usr/bin/env bash
# Peak training RSS and training speed of lm.bible.TransformerLmSmall and RnnLmSmall
# (MODELS), for the lingvoc build (BIN), optionally a build before a change (BASE_BIN), and
# the PyTorch twin (bench/lm_torch.py), RUNS times interleaved on the same machine in the
# same run: peak RSS of bin/trainer by /usr/bin/time (the twin: its ru_maxrss after
# training), training tokens/s over steps WARMUP+1..STEPS as bench/bench_lm.sh counts them
# (wall time: on a shared machine it moves with the load), and bin/trainer's CPU seconds
# (user + system, the whole run: start-up and STEPS steps), which a busy machine moves far
# less. Prints each run, then per side the medians with their spread (min-max), the RSS
# ratios to PyTorch and the after/before ratios, and the load average.
# A param change is measured the same way: BASE_BIN=bin OVERRIDE='task.lm.trans_tpl.remat:
# true' runs the same build plain ("before") and with the override ("after").
#   BASE_BIN (none), BIN (bin), OVERRIDE / BASE_OVERRIDE (params added to the after /
#   before runs' --model_params_override), DATA (/tmp/lm_bible: scripts/prepare_lm_bible.sh),
#   MODELS ("TransformerLmSmall RnnLmSmall"), THREADS (2), RUNS (3), STEPS (12), WARMUP (2),
#   TORCH_THREADS (THREADS)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh
BASE_BIN=${BASE_BIN:-}
BIN=${BIN:-bin} DATA=${DATA:-/tmp/lm_bible} THREADS=${THREADS:-2} RUNS=${RUNS:-3} STEPS=${STEPS:-12} WARMUP=${WARMUP:-2}
MODELS=${MODELS:-TransformerLmSmall RnnLmSmall}
TORCH_THREADS=${TORCH_THREADS:-$THREADS}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
[ -f "$DATA/train.txt" ] || { echo "bench_mem.sh: no $DATA/train.txt: run scripts/prepare_lm_bible.sh $DATA" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
secs() { awk '{ split($2, t, ":"); printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3] }'; }
# lingvoc SIDE BINDIR MODEL: one training run, "SIDE MODEL rss N MB" and "SIDE MODEL train N tokens/s".
lingvoc() {
  local side=$1 bin=$2 m=$3 extra=$4
  rm -rf "$tmp/run"
  O="input.file_pattern: \"text:$DATA/train.txt\"; train.max_steps: $STEPS; train.summary_interval_steps: 1; train.save_interval_seconds: 100000${extra:+; $extra}"
  /usr/bin/time -f "%M %U %S" -o "$tmp/rss" "$bin/trainer" --model=lm.bible.$m --logdir="$tmp/run" --num_threads="$THREADS" --model_params_override="$O" \
    2>"$tmp/train.log" >/dev/null
  awk -v s="$side" -v m="$m" '{ printf "%s %s rss %.0f MB\n%s %s cpu %.2f s\n", s, m, $1 / 1024, s, m, $2 + $3 }' "$tmp/rss"
  grep 'step: *[0-9]*, steps/sec' "$tmp/train.log" >"$tmp/steps"
  local t0 t1 tok
  t0=$(awk -v w="$WARMUP" '{ s = $4; sub(",", "", s) } s + 0 == w' "$tmp/steps" | secs)
  t1=$(tail -1 "$tmp/steps" | secs)
  tok=$(awk -v w="$WARMUP" '{ s = $4; sub(",", "", s) } s + 0 > w { match($0, /num_predictions:[0-9.]+/); n += substr($0, RSTART + 16, RLENGTH - 16) } END { print n }' "$tmp/steps")
  awk -v s="$side" -v m="$m" -v n="$tok" -v a="$t0" -v b="$t1" 'BEGIN { printf "%s %s train %.0f tokens/s\n", s, m, n / (b - a) }'
}
out=$tmp/results
for i in $(seq 1 "$RUNS"); do
  for m in $MODELS; do
    case $m in TransformerLmSmall) kind=transformer ;; RnnLmSmall) kind=rnn ;; *) echo "bench_mem.sh: unknown model $m" >&2; exit 2 ;; esac
    echo "run $i $m: load $(cut -d' ' -f1-3 /proc/loadavg)"
    [ -z "$BASE_BIN" ] || lingvoc before "$BASE_BIN" "$m" "${BASE_OVERRIDE:-}" | tee -a "$out"
    lingvoc after "$BIN" "$m" "${OVERRIDE:-}" | tee -a "$out"
    OMP_NUM_THREADS=$TORCH_THREADS OPENBLAS_NUM_THREADS=$TORCH_THREADS \
      TRAIN_ONLY=1 /usr/bin/python3 bench/lm_torch.py "$DATA/train.txt" "$TORCH_THREADS" "$STEPS" "$WARMUP" "$kind" |
      awk -v m="$m" '/^torch_lm train/ { printf "pytorch %s train %s tokens/s\n", m, $5 } /^torch_lm rss_train/ { printf "pytorch %s rss %s MB\n", m, $3 }' | tee -a "$out"
  done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" "$RUNS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[0], f[1], f[2]), []).append(float(f[3]))
med = lambda v: statistics.median(v)
models = sorted({k[1] for k in rows}, reverse=True)
print("median (min-max) of %s runs" % sys.argv[2])
for m in models:
    for side in ("before", "after", "pytorch"):
        r, t, c = rows.get((side, m, "rss"), []), rows.get((side, m, "train"), []), rows.get((side, m, "cpu"), [])
        if r:
            print("  %-18s %-8s peak RSS %5.0f MB (%.0f-%.0f)  training %6.0f tokens/s (%.0f-%.0f)%s" %
                  (m, side, med(r), min(r), max(r), med(t), min(t), max(t),
                   "  CPU %.1f s (%.1f-%.1f)" % (med(c), min(c), max(c)) if c else ""))
    p = med(rows[("pytorch", m, "rss")])
    line = "  %-18s RSS / PyTorch's: after %.2fx" % (m, med(rows[("after", m, "rss")]) / p)
    if ("before", m, "rss") in rows:
        line += ", before %.2fx; after / before: RSS %.2f, tokens/s %.3f, CPU s %.3f" % (
            med(rows[("before", m, "rss")]) / p, med(rows[("after", m, "rss")]) / med(rows[("before", m, "rss")]),
            med(rows[("after", m, "train")]) / med(rows[("before", m, "train")]),
            med(rows[("after", m, "cpu")]) / med(rows[("before", m, "cpu")]))
    print(line)
PY
