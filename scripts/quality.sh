#!/usr/bin/env bash
# quality.sh transformer|rnmt|punctuator|punctuator-transformer - the MT and punctuator quality runs, from the
# data to the score (never part of `make test`: they take hours):
#
#   transformer  mt.bible_en_es.TransformerSmall, 3 h of training, then bin/decoder on
#                Test (Ruth, James, Philippians: 297 lines). Target: sacrebleu >= 15.
#   rnmt         mt.bible_en_es.RNMTSmall, 3 h, the same decode (no target: reported).
#   punctuator   punctuator.codelab.RNMTModelSmall, 2 h, bin/decoder on the 2,432-line
#                test split. Targets: sacrebleu >= 75 and exact_match >= 0.30.
#   punctuator-transformer  punctuator.codelab.TransformerSmall (lingvoc's variant), the
#                same 2 h and decode.
#
# The experiment files read their data from /tmp/bible and /tmp/punctuator_data: the
# script makes it there first when it is missing (scripts/prepare_*.sh). Training stops
# by SIGTERM at the time budget (the trainer saves a checkpoint and exits), then the
# decoder scores that checkpoint once and the score file is printed.
#
#   HOURS=N     training budget in hours (default 3, punctuator 2; fractions allowed)
#   LOGDIR=D    run directory (default /tmp/quality_<name>); a directory with checkpoints
#               resumes, and the budget then counts from this start only
#   THREADS=N   kernel threads (default 2: the targets are for 2 cores)
#
# Exit 0 when the run and the decode finished (whatever the score), 2 bad arguments, 1
# a step failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${LV_BIN:-$root/bin}
case "${1:-}" in
  transformer) model=mt.bible_en_es.TransformerSmall; hours=${HOURS:-3}; data=/tmp/bible ;;
  rnmt) model=mt.bible_en_es.RNMTSmall; hours=${HOURS:-3}; data=/tmp/bible ;;
  punctuator) model=punctuator.codelab.RNMTModelSmall; hours=${HOURS:-2}; data=/tmp/punctuator_data ;;
  punctuator-transformer) model=punctuator.codelab.TransformerSmall; hours=${HOURS:-2}; data=/tmp/punctuator_data ;;
  -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
  *) echo "usage: $0 transformer|rnmt|punctuator|punctuator-transformer   (HOURS, LOGDIR, THREADS; --help)" >&2
     exit 2 ;;
esac
logdir=${LOGDIR:-/tmp/quality_$1}
threads=${THREADS:-2}
if ! awk -v h="$hours" 'BEGIN { exit !(h + 0 > 0) }'; then
  echo "quality.sh: HOURS=$hours: expected a positive number of hours" >&2
  exit 2
fi
for b in trainer decoder; do
  [ -x "$bin/$b" ] || { echo "quality.sh: $bin/$b is missing: run make first" >&2; exit 1; }
done
if [ "$data" = /tmp/punctuator_data ]; then
  [ -s "$data/test.txt" ] || "$here/prepare_punctuator.sh" "$data"
else
  [ -s "$data/test.tfrecord-00000-of-00001" ] || "$here/prepare_bible_en_es.sh" "$data"
fi
secs=$(awk -v h="$hours" 'BEGIN { printf "%d", h * 3600 }')
echo "quality.sh: training $model in $logdir for $hours h ($secs s) on $threads threads"
start=$(date +%s)
rc=0
timeout -s TERM -k 300 "$secs" "$bin/trainer" --model="$model" --logdir="$logdir" --num_threads="$threads" || rc=$?
# 124: the budget ran out (SIGTERM: the trainer saved and stopped); 0: max_steps reached.
if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then
  echo "quality.sh: the trainer failed (exit $rc)" >&2
  exit 1
fi
echo "quality.sh: trained for $(( $(date +%s) - start )) s; decoding Test"
"$bin/decoder" --model="$model" --logdir="$logdir" --dataset=Test --once --num_threads="$threads"
score=$(ls "$logdir"/decoder_test/score-*.txt | tail -1)
echo "quality.sh: $score"
cat "$score"
