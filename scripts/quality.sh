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
bin=${LV_BIN:-$root/bin} q_name=quality.sh
. "$here/lib/quality.sh"
case "${1:-}" in
  transformer) model=mt.bible_en_es.TransformerSmall; hours=${HOURS:-3}; data=/tmp/bible ;;
  rnmt) model=mt.bible_en_es.RNMTSmall; hours=${HOURS:-3}; data=/tmp/bible ;;
  punctuator) model=punctuator.codelab.RNMTModelSmall; hours=${HOURS:-2}; data=/tmp/punctuator_data ;;
  punctuator-transformer) model=punctuator.codelab.TransformerSmall; hours=${HOURS:-2}; data=/tmp/punctuator_data ;;
  *) q_usage_or_help "${1:--}" 26 "transformer|rnmt|punctuator|punctuator-transformer   (HOURS, LOGDIR, THREADS; --help)" ;;
esac
logdir=${LOGDIR:-/tmp/quality_$1}
threads=${THREADS:-2}
q_hours HOURS "$hours"
q_need_bins trainer decoder
if [ "$data" = /tmp/punctuator_data ]; then
  [ -s "$data/test.txt" ] || "$here/prepare_punctuator.sh" "$data"
else
  [ -s "$data/test.tfrecord-00000-of-00001" ] || "$here/prepare_bible_en_es.sh" "$data"
fi
secs=$(q_seconds "$hours")
echo "quality.sh: training $model in $logdir for $hours h ($secs s) on $threads threads"
start=$(date +%s)
# Returns 1 when the budget ran out (SIGTERM: the trainer saved and stopped), 0 at max_steps.
q_train "$secs" "" --model="$model" --logdir="$logdir" --num_threads="$threads" || true
echo "quality.sh: trained for $(( $(date +%s) - start )) s; decoding Test"
"$bin/decoder" --model="$model" --logdir="$logdir" --dataset=Test --once --num_threads="$threads"
score=$(ls "$logdir"/decoder_test/score-*.txt | tail -1)
echo "quality.sh: $score"
cat "$score"
