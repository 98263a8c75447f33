#!/usr/bin/env bash
# asr.bible_tts.LasSmall (experiments/asr/bible_tts.cfg) training steps against its PyTorch
# twin (bench/las_torch.py: same architecture and sizes, same loss, learner and batches),
# same threads, in the same run, RUNS times interleaved:
#   training steps/s  over steps WARMUP+1..STEPS (lingvoc: the timestamps of bin/trainer's
#                     per-step summaries; PyTorch: the wall time of those steps)
#   peak RSS          of training (lingvoc: bin/trainer's, /usr/bin/time; PyTorch: the
#                     process's ru_maxrss after its training steps)
# Both read FILE (one TFRecord file of scripts/prepare_asr_bible.sh) in order (lingvoc:
# input.file_buffer_size 1, file_parallelism 1) with the experiment's bucketing, so step i
# is the same batch on both sides; checked once against bin/trainer --mode=inspect_input
# (batch size x frames of every step). Also checked once: the trainable parameter counts
# (bin/trainer --mode=inspect_model and the twin's) are equal.
# Prints each run, then medians and spread (min-max), the ratio and the load average.
# Target: lingvoc >= 2x PyTorch in training steps/s.
#   BIN (bin), FILE (/tmp/asr_bible/train.tfrecords-00000-of-00004), THREADS (2), RUNS (3),
#   STEPS (30), WARMUP (5), NICE (15)
# PyTorch: Debian's python3-torch through /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
BIN=${BIN:-bin} FILE=${FILE:-/tmp/asr_bible/train.tfrecords-00000-of-00004}
THREADS=${THREADS:-2} RUNS=${RUNS:-3} STEPS=${STEPS:-30} WARMUP=${WARMUP:-5} NICE=${NICE:-15}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
[ -f "$FILE" ] || { echo "bench_las.sh: no $FILE: run scripts/prepare_asr_bible.sh" >&2; exit 2; }
[ -x "$BIN/trainer" ] || { echo "bench_las.sh: no $BIN/trainer: build lingvoc (make) or set BIN" >&2; exit 2; }
[ "$WARMUP" -ge 1 ] && [ "$STEPS" -gt "$WARMUP" ] || { echo "bench_las.sh: need 1 <= WARMUP < STEPS" >&2; exit 2; }
M=asr.bible_tts.LasSmall
IN="input.file_pattern: \"$FILE\"; input.file_buffer_size: 1; input.file_parallelism: 1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/results
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$tmp/load"

# Once: lingvoc's parameter count and the batches its input gives.
nice -n "$NICE" "$BIN/trainer" --model=$M --mode=inspect_model --model_params_override="$IN" >"$tmp/model" 2>&1
lv_params=$(sed -n 's/^total #params: //p' "$tmp/model" | tr -d ,)
[ -n "$lv_params" ] || { echo "bench_las.sh: no parameter count from --mode=inspect_model:" >&2; tail "$tmp/model" >&2; exit 1; }
nice -n "$NICE" "$BIN/trainer" --model=$M --mode=inspect_input --inspect_input_batches="$STEPS" \
  --model_params_override="$IN" >"$tmp/input" 2>&1
awk '/^batch [0-9]+:/ { n = $3 } $1 == "src.paddings" { s = $3; gsub(/[\[\]]/, "", s); split(s, d, ","); printf "%s%sx%s", sep, n, d[2]; sep = " " }
     END { print "" }' "$tmp/input" >"$tmp/lv_batches"

secs() { awk '{ split($2, t, ":"); printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3] }'; }
for i in $(seq 1 "$RUNS"); do
  rm -rf "$tmp/run"
  O="$IN; train.max_steps: $STEPS; train.summary_interval_steps: 1; train.save_interval_seconds: 1000000"
  nice -n "$NICE" /usr/bin/time -f %M -o "$tmp/rss" "$BIN/trainer" --model=$M --logdir="$tmp/run" \
    --num_threads="$THREADS" --model_params_override="$O" 2>"$tmp/train.log" >/dev/null ||
    { echo "bench_las.sh: bin/trainer failed:" >&2; tail "$tmp/train.log" >&2; exit 1; }
  grep 'step: *[0-9]*, steps/sec' "$tmp/train.log" >"$tmp/steps"
  t0=$(awk -v w="$WARMUP" '{ s = $4; sub(",", "", s) } s + 0 == w' "$tmp/steps" | secs)
  t1=$(awk -v w="$STEPS" '{ s = $4; sub(",", "", s) } s + 0 == w' "$tmp/steps" | secs)
  [ -n "$t0" ] && [ -n "$t1" ] || { echo "bench_las.sh: no step $WARMUP or $STEPS summary in the trainer's log" >&2; exit 1; }
  lp=$(grep -o ' loss:[0-9.]*' "$tmp/steps" | sed -n '1p;$p' | cut -d: -f2 | paste -sd' ')
  awk -v a="$t0" -v b="$t1" -v s=$((STEPS - WARMUP)) -v lp="$lp" \
    'BEGIN { if (b < a) b += 86400; split(lp, l, " "); printf "lingvoc_las train %d steps %.4f steps/s loss %.3f -> %.3f\n", s, s / (b - a), l[1], l[2] }' | tee -a "$out"
  awk '{ printf "lingvoc_las rss_train %.0f MB\n", $1 / 1024 }' "$tmp/rss" | tee -a "$out"
  nice -n "$NICE" /usr/bin/python3 bench/las_torch.py "$THREADS" "$STEPS" "$WARMUP" "$FILE" >"$tmp/torch.out"
  grep -v '^torch_las batches' "$tmp/torch.out" | grep -v '^torch_las params' | tee -a "$out"
  if [ "$i" = 1 ]; then
    sed -n 's/^torch_las params \([0-9]*\) trainable.*/\1/p' "$tmp/torch.out" >"$tmp/torch_params"
    sed -n 's/^torch_las batches //p' "$tmp/torch.out" | sed 's/x[0-9]*:[0-9]*//g' >"$tmp/torch_batches"
    grep '^torch_las params' "$tmp/torch.out"
  fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$tmp/load"

torch_params=$(cat "$tmp/torch_params")
echo "trainable parameters: lingvoc $lv_params (--mode=inspect_model), pytorch $torch_params"
status=0
[ "$lv_params" = "$torch_params" ] || { echo "bench_las.sh: the parameter counts differ" >&2; status=1; }
if [ "$(cat "$tmp/lv_batches")" = "$(cat "$tmp/torch_batches")" ]; then
  echo "batches (size x frames) of steps 1..$STEPS identical on both sides: $(cat "$tmp/lv_batches")"
else
  echo "bench_las.sh: the batches differ: lingvoc $(cat "$tmp/lv_batches") / pytorch $(cat "$tmp/torch_batches")" >&2
  status=1
fi
/usr/bin/python3 - "$out" "$THREADS" "$tmp/load" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    unit = "steps/s" if "steps/s" in f else "MB"
    rows.setdefault((f[0], f[1]), []).append(float(f[f.index(unit) - 1]))
n = len(rows[("lingvoc_las", "train")])
print("asr.bible_tts.LasSmall training, %s threads: median (min-max) of %d interleaved runs" % (sys.argv[2], n))
for what, unit, fmt in (("train", "steps/s", "%.4f"), ("rss_train", "MB", "%.0f")):
    for side in ("lingvoc_las", "torch_las"):
        v = rows.get((side, what), [])
        if v:
            print(("  %-9s %-11s %10s %-7s (" + fmt + "-" + fmt + ")")
                  % (what, side, fmt % statistics.median(v), unit, min(v), max(v)))
l, t = statistics.median(rows[("lingvoc_las", "train")]), statistics.median(rows[("torch_las", "train")])
print("  training speedup lingvoc vs pytorch: %.2fx (target >= 2x)" % (l / t))
print("  " + "; ".join(x.strip() for x in open(sys.argv[3])))
PY
exit $status
