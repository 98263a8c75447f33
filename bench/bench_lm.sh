#!/usr/bin/env bash
# lm.bible.RnnLmSmall or TransformerLmSmall (MODEL; experiments/lm/bible.cfg) against its
# PyTorch twin (bench/lm_torch.py: same architecture, AsciiTokenizer vocabulary, LmInput
# bucketing, optimizer and schedule), same data, same threads, in the same run, RUNS times
# interleaved:
#   training tokens/s  predicted tokens (incl. </s>) per second over steps WARMUP+1..STEPS
#                      (lingvoc: bin/trainer's per-step summaries and their timestamps)
#   scoring tokens/s   the first 200 lines of the training file (lingvoc: bin/decoder
#                      --score_text, wall time including loading the checkpoint)
#   sampling tokens/s  3 samples of 200 characters (lingvoc: bin/decoder --sample, wall)
#   peak RSS           of training (lingvoc: bin/trainer's, /usr/bin/time; PyTorch: the
#                      process's ru_maxrss after its training steps)
# Prints each run, then medians and spread (min-max) and the training speed ratio.
# Target: lingvoc >= 2x PyTorch in training tokens/s (RnnLm; TransformerLm >= 1.5x).
#   MODEL (RnnLmSmall or TransformerLmSmall), BIN (bin), DATA (/tmp/lm_bible:
#   scripts/prepare_lm_bible.sh), THREADS (2), RUNS (3), STEPS (60), WARMUP (5),
#   TORCH_THREADS (THREADS: the twin's own; 1 is PyTorch's faster LSTM setting on 2 cores here)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
BIN=${BIN:-bin} DATA=${DATA:-/tmp/lm_bible} THREADS=${THREADS:-2} RUNS=${RUNS:-3} STEPS=${STEPS:-60} WARMUP=${WARMUP:-5}
TORCH_THREADS=${TORCH_THREADS:-$THREADS}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
[ -f "$DATA/train.txt" ] || { echo "bench_lm.sh: no $DATA/train.txt: run scripts/prepare_lm_bible.sh $DATA" >&2; exit 2; }
MODEL=${MODEL:-RnnLmSmall}
case $MODEL in
  RnnLmSmall) KIND=rnn TARGET=2 ;;
  TransformerLmSmall) KIND=transformer TARGET=1.5 ;;
  *) echo "bench_lm.sh: MODEL=$MODEL: expected RnnLmSmall or TransformerLmSmall" >&2; exit 2 ;;
esac
M=lm.bible.$MODEL
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/results
head -200 "$DATA/train.txt" >"$tmp/score.txt"
secs() { awk '{ split($2, t, ":"); printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3] }'; }
for i in $(seq 1 "$RUNS"); do
  rm -rf "$tmp/run"
  O="input.file_pattern: \"text:$DATA/train.txt\"; train.max_steps: $STEPS; train.summary_interval_steps: 1; train.save_interval_seconds: 100000"
  /usr/bin/time -f %M -o "$tmp/rss" "$BIN/trainer" --model=$M --logdir="$tmp/run" --num_threads="$THREADS" --model_params_override="$O" \
    2>"$tmp/train.log" >/dev/null
  awk '{ printf "lingvoc_lm rss_train %.0f MB\n", $1 / 1024 }' "$tmp/rss" | tee -a "$out"
  grep 'step: *[0-9]*, steps/sec' "$tmp/train.log" >"$tmp/steps"
  t0=$(awk -v w="$WARMUP" '{ s = $4; sub(",", "", s) } s + 0 == w' "$tmp/steps" | secs)
  t1=$(tail -1 "$tmp/steps" | secs)
  tok=$(awk -v w="$WARMUP" '{ s = $4; sub(",", "", s) } s + 0 > w { match($0, /num_predictions:[0-9.]+/); n += substr($0, RSTART + 16, RLENGTH - 16) } END { print n }' "$tmp/steps")
  lp=$(grep -o 'log_pplx:[0-9.]*' "$tmp/steps" | sed -n '1p;$p' | cut -d: -f2 | paste -sd' ')
  awk -v n="$tok" -v a="$t0" -v b="$t1" -v s=$((STEPS - WARMUP)) -v lp="$lp" \
    'BEGIN { split(lp, l, " "); printf "lingvoc_lm train %d steps %.0f tokens/s log_pplx %.3f -> %.3f\n", s, n / (b - a), l[1], l[2] }' | tee -a "$out"
  D=("$BIN/decoder" --model=$M --logdir="$tmp/run" --dataset=Test --num_threads="$THREADS")
  TO="input.file_pattern: \"text:$DATA/test.txt\""
  a=$(date +%s.%N); "${D[@]}" --model_params_override="$TO" --score_text="$tmp/score.txt" >"$tmp/score.out" 2>/dev/null
  b=$(date +%s.%N)
  tok=$(tail -1 "$tmp/score.out" | sed 's/.* \([0-9]*\) tokens.*/\1/')
  awk -v n="$tok" -v a="$a" -v b="$b" 'BEGIN { printf "lingvoc_lm score %.0f tokens/s\n", n / (b - a) }' | tee -a "$out"
  a=$(date +%s.%N)
  "${D[@]}" --sample=3 --seed=1 --model_params_override="$TO; task.decoder.sample_max_length: 200" \
    >"$tmp/sample.out" 2>/dev/null
  b=$(date +%s.%N)
  tok=$(awk '{ n += length($0) + 1 } END { print n }' "$tmp/sample.out")
  awk -v n="$tok" -v a="$a" -v b="$b" 'BEGIN { printf "lingvoc_lm sample %.0f tokens/s\n", n / (b - a) }' | tee -a "$out"
  OMP_NUM_THREADS=$TORCH_THREADS OPENBLAS_NUM_THREADS=$TORCH_THREADS \
    /usr/bin/python3 bench/lm_torch.py "$DATA/train.txt" "$TORCH_THREADS" "$STEPS" "$WARMUP" "$KIND" | tee -a "$out"
done
TH=$THREADS; [ "$TORCH_THREADS" = "$THREADS" ] || TH="$THREADS (PyTorch $TORCH_THREADS)"
/usr/bin/python3 - "$out" "$TH" "$MODEL" "$TARGET" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    unit = "tokens/s" if "tokens/s" in f else "MB"
    rows.setdefault((f[0], f[1]), []).append(float(f[f.index(unit) - 1]))
print("%s (char level, 76 ids), %s threads: median (min-max) of %d runs" % (sys.argv[3], sys.argv[2], len(rows[("lingvoc_lm", "train")])))
for what, unit in (("train", "tokens/s"), ("score", "tokens/s"), ("sample", "tokens/s"), ("rss_train", "MB")):
    for side in ("lingvoc_lm", "torch_lm"):
        v = rows.get((side, what), [])
        if v:
            print("  %-9s %-10s %10.0f %-8s (%.0f-%.0f)" % (what, side, statistics.median(v), unit, min(v), max(v)))
l, t = statistics.median(rows[("lingvoc_lm", "train")]), statistics.median(rows[("torch_lm", "train")])
print("  training speedup lingvoc vs pytorch: %.2fx (target >= %sx)" % (l / t, sys.argv[4]))
PY
