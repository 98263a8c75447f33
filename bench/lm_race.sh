#!/usr/bin/env bash
# The language-model quality race of issue "Language models": lm.bible.RnnLmSmall or
# TransformerLmSmall (MODEL; experiments/lm/bible.cfg) and its PyTorch twin
# (bench/lm_torch.py: same architecture, AsciiTokenizer vocabulary, LmInput bucketing,
# optimizer and schedule) each train for RACE_SECONDS of wall time (default 3600) on the same
# THREADS (default 2), one after the other on an otherwise idle machine; then (not timed)
# the Test log_pplx (per predicted character, </s> included) of the weights every EVERY
# seconds (default 600): lingvoc's checkpoints through bin/evaler --once --checkpoint,
# PyTorch's in-memory copies through the same per-token sum. Prints both curves
# (seconds, step, Test log_pplx, perplexity) and the final comparison. Target: lingvoc's
# Test perplexity at RACE_SECONDS at or below PyTorch's.
# PARALLEL=1 runs the two side by side instead, each on THREADS (default 1) of the cores,
# so that whatever else loads a shared machine loads both alike.
# SAME_INIT=1 (the default) starts the twin from lingvoc's step-0 checkpoint (the same
# weights; bench/lm_torch.py's INIT_CKPT), so that the race does not turn on one draw of
# the initializers: the twin's own Test log_pplx at initialization spans 5.17-6.76 over
# seeds 1-8 for TransformerLmSmall. SAME_INIT=0: each draws its own.
#   MODEL (RnnLmSmall), RACE_SECONDS (3600; not SECONDS, which bash sets), EVERY (600), THREADS (2, or 1 with PARALLEL=1),
#   TORCH_THREADS (THREADS: the twin's threads, e.g. 1, PyTorch's faster LSTM setting on 2 cores here),
#   PARALLEL (0), SAME_INIT (1), BIN (bin), DATA (/tmp/lm_bible: scripts/prepare_lm_bible.sh),
#   OUT (a temporary folder, removed)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
PARALLEL=${PARALLEL:-0}
[ "$PARALLEL" = 1 ] && THREADS=${THREADS:-1}
BIN=${BIN:-bin} DATA=${DATA:-/tmp/lm_bible} THREADS=${THREADS:-2} SECONDS_=${RACE_SECONDS:-3600} EVERY=${EVERY:-600}
TORCH_THREADS=${TORCH_THREADS:-$THREADS}
MODEL=${MODEL:-RnnLmSmall}
SAME_INIT=${SAME_INIT:-1}
case $MODEL in
  RnnLmSmall) KIND=rnn ;;
  TransformerLmSmall) KIND=transformer ;;
  *) echo "lm_race.sh: MODEL=$MODEL: expected RnnLmSmall or TransformerLmSmall" >&2; exit 2 ;;
esac
for f in train test; do
  [ -f "$DATA/$f.txt" ] || { echo "lm_race.sh: no $DATA/$f.txt: run scripts/prepare_lm_bible.sh $DATA" >&2; exit 2; }
done
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "lm_race.sh: /usr/bin/python3 has no torch (apt-get install python3-torch)" >&2; exit 2; }
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; tmp=$OUT; else tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; fi
M=lm.bible.$MODEL
echo "lm_race: $M, $SECONDS_ s each ($([ "$PARALLEL" = 1 ] && echo "side by side" || echo "one after the other")), \
Test log_pplx every $EVERY s, $THREADS threads for lingvoc and $TORCH_THREADS for PyTorch, \
$([ "$SAME_INIT" = 1 ] && echo "the same initial weights" || echo "each its own initial weights"); load $(cut -d' ' -f1 /proc/loadavg)"
rm -rf "$tmp/lv"
torch_race() {
  if [ "$SAME_INIT" = 1 ]; then
    # lingvoc's trainer writes ckpt-00000000 as it starts (side by side: wait for it).
    for _ in $(seq 600); do
      grep -qs '"ckpt-00000000"' "$tmp/lv/train/checkpoint" && break
      sleep 0.2
    done
    export INIT_CKPT="$tmp/lv/train/ckpt-00000000" CKPT_INSPECT="$BIN/ckpt_inspect"
  fi
  RACE_SECONDS=$SECONDS_ RACE_EVERY=$EVERY TEST_FILE="$DATA/test.txt" \
    OMP_NUM_THREADS=$TORCH_THREADS OPENBLAS_NUM_THREADS=$TORCH_THREADS \
      /usr/bin/python3 bench/lm_torch.py "$DATA/train.txt" "$TORCH_THREADS" 0 0 "$KIND"
}
if [ "$PARALLEL" = 1 ]; then
  torch_race >"$tmp/torch_curve" 2>"$tmp/torch.log" &
  torch_pid=$!
fi

# lingvoc: a checkpoint every EVERY seconds, SIGTERM (which saves one) at RACE_SECONDS; sent
# once (--foreground: timeout otherwise signals its process group as well, and a second
# SIGTERM stops the trainer at once).
O="input.file_pattern: \"text:$DATA/train.txt\"; train.save_interval_seconds: $EVERY; train.save_max_to_keep: 10000; \
cluster.num_threads: $THREADS"
start=$(date +%s.%N)
timeout --foreground -s TERM "$SECONDS_" "$BIN/trainer" --model=$M --logdir="$tmp/lv" --model_params_override="$O" \
  >"$tmp/lv_train.log" 2>&1 || true
grep -q "saving a checkpoint at step" "$tmp/lv_train.log" || { echo "lm_race.sh: the trainer did not stop on SIGTERM (see $tmp/lv_train.log)" >&2; exit 1; }
for idx in "$tmp"/lv/train/ckpt-*.index; do
  p=${idx%.index}
  t=$(awk -v a="$start" -v b="$(stat -c %.9Y "$idx")" 'BEGIN { printf "%.0f", b - a }')
  "$BIN/evaler" --model=$M --logdir="$tmp/lv" --dataset=Test --once --checkpoint="$p" \
    --model_params_override="input.file_pattern: \"text:$DATA/test.txt\"" >"$tmp/lv_eval.log" 2>&1
  step=$((10#${p##*ckpt-}))
  lp=$(sed -n 's/^log_pplx: //p' "$tmp/lv/eval_test/score-$(printf %08d "$step").txt")
  echo "lingvoc_lm race t=$t step=$step test_log_pplx=$lp"
done | tee "$tmp/curves"
if [ "$PARALLEL" = 1 ]; then
  wait $torch_pid || { echo "lm_race.sh: the PyTorch side failed: $(tail -3 "$tmp/torch.log")" >&2; exit 1; }
  tee -a "$tmp/curves" <"$tmp/torch_curve"
else
  torch_race | tee -a "$tmp/curves"
fi
echo "load at the end: $(cut -d' ' -f1 /proc/loadavg) on $(nproc --all) CPUs"
awk '{ split($3, t, "="); split($4, s, "="); split($5, l, "=");
       printf "%-10s t=%6d s  step %7d  Test log_pplx %.4f  perplexity %.3f\n", $1, t[2], s[2], l[2], exp(l[2]);
       last[$1] = l[2] }
     END { a = last["lingvoc_lm"]; b = last["torch_lm"];
           printf "final: lingvoc %.4f, PyTorch %.4f: %s\n", a, b, a <= b ? "lingvoc at or below (target met)" : "lingvoc above (target missed)" }' \
  "$tmp/curves"
