#!/usr/bin/env bash
# quality_fusion.sh - the shallow-fusion figure of the language-model issue: BLEU of
# mt.bible_en_es.TransformerSmall on the Bible Test lines (Ruth, James, Philippians) with and
# without the Spanish word-piece LM lm.bible.RnnLmSpanishSmall fused into its beam search
# (task.decoder.fusion), the LM's weight chosen on Dev (never part of `make test`: hours).
#
#   1. the MT model trains for MT_HOURS (default 2) in MT_LOGDIR (default
#      /tmp/quality_transformer, scripts/quality.sh transformer's: a run there resumes);
#   2. the LM trains for LM_HOURS (default 0.5) in LM_LOGDIR (default /tmp/lm_es);
#      MT_HOURS=0 / LM_HOURS=0 skip a training and use the log directory's latest checkpoint;
#   3. bin/decoder on Dev with each of WEIGHTS (default "0 0.1 0.2 0.3"; 0 decodes exactly as
#      without fusion), then on Test without the LM and with the weight of the best Dev
#      sacrebleu. Each decode has a log directory of its own under OUT (default
#      MT_LOGDIR/fusion), so its score and decoder_out files stay.
#
# Data: /tmp/bible (made first when missing: scripts/prepare_bible_en_es.sh, ~10 min).
#   THREADS=N   kernel threads (default 2)
#
# Exit 0 when the trainings and the decodes finished (whatever the BLEU), 2 bad arguments,
# 1 a step failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${LV_BIN:-$root/bin} q_name=quality_fusion.sh
. "$here/lib/quality.sh"
q_usage_or_help "${1:-}" 21 "(MT_HOURS, LM_HOURS, MT_LOGDIR, LM_LOGDIR, WEIGHTS, OUT, THREADS; --help)"
mt_hours=${MT_HOURS:-2} lm_hours=${LM_HOURS:-0.5} threads=${THREADS:-2}
mt_logdir=${MT_LOGDIR:-/tmp/quality_transformer} lm_logdir=${LM_LOGDIR:-/tmp/lm_es}
weights=${WEIGHTS:-0 0.1 0.2 0.3} out=${OUT:-$mt_logdir/fusion}
q_hours MT_HOURS "$mt_hours" 0
q_hours LM_HOURS "$lm_hours" 0
[ -n "$weights" ] || { echo "quality_fusion.sh: WEIGHTS is empty" >&2; exit 2; }
for w in $weights; do
  awk -v w="$w" 'BEGIN { exit !(w ~ /^[0-9]*\.?[0-9]+$/) }' ||
    { echo "quality_fusion.sh: WEIGHTS: '$w' is not a weight (a number >= 0)" >&2; exit 2; }
done
q_need_bins trainer decoder
[ -s /tmp/bible/test.tfrecord-00000-of-00001 ] || LV_BIN=$bin "$here/prepare_bible_en_es.sh" /tmp/bible

MT=mt.bible_en_es.TransformerSmall LM=lm.bible.RnnLmSpanishSmall
# latest DIR: the path of DIR's latest checkpoint (empty before the first).
latest() {
  local c
  c=$(sed -n 's/^model_checkpoint_path: "\(ckpt-[0-9]*\)"/\1/p' "$1/train/checkpoint" 2>/dev/null || true)
  [ -z "$c" ] || echo "$1/train/$c"
}
# train MODEL LOGDIR HOURS: until max_steps or the budget (SIGTERM: the trainer saves).
train() {
  local secs
  secs=$(q_seconds "$3")
  if [ "$secs" -eq 0 ]; then
    [ -n "$(latest "$2")" ] || { echo "quality_fusion.sh: $2 has no checkpoint of $1 to use (its HOURS is 0)" >&2; exit 2; }
    return 0
  fi
  echo "quality_fusion.sh: training $1 in $2 for $secs s"
  q_train "$secs" " of $1" --model="$1" --logdir="$2" --num_threads="$threads" || true
}
train $MT "$mt_logdir" "$mt_hours"
train $LM "$lm_logdir" "$lm_hours"
mt_ck=$(latest "$mt_logdir") lm_ck=$(latest "$lm_logdir")
echo "quality_fusion.sh: $mt_ck with $lm_ck"

# decode DATASET WEIGHT: decodes into OUT/DATASET-WEIGHT and prints its sacrebleu.
decode() {
  local d="$out/${1,,}-$2" o="task.decoder.beam_search.num_hyps_per_beam: 4"
  [ "$2" = 0 ] || o="$o; task.decoder.fusion.lm_model: $LM; task.decoder.fusion.lm_checkpoint: \"$lm_ck\"; \
task.decoder.fusion.lm_weight: $2"
  rm -rf "$d"
  "$bin/decoder" --model=$MT --logdir="$d" --checkpoint="$mt_ck" --dataset="$1" --once \
    --num_threads="$threads" --model_params_override="$o" >"$d.log" 2>&1 ||
    { echo "quality_fusion.sh: the decode of $1 at weight $2 failed (see $d.log)" >&2; exit 1; }
  sed -n 's/^sacrebleu: //p' "$d"/decoder_${1,,}/score-*.txt | tail -1
}
mkdir -p "$out"
best=0 best_bleu=-1
for w in $weights; do
  b=$(decode Dev "$w")
  echo "quality_fusion.sh: Dev sacrebleu at lm_weight $w: $b"
  awk -v a="$b" 'BEGIN { exit !(a ~ /^[0-9]+(\.[0-9]*)?$/) }' ||
    { echo "quality_fusion.sh: the Dev decode at weight $w gave no sacrebleu ('$b')" >&2; exit 1; }
  if awk -v a="$b" -v c="$best_bleu" 'BEGIN { exit !(a + 0 > c + 0) }'; then best=$w best_bleu=$b; fi
done
t=$(decode Test 0)
echo "quality_fusion.sh: Test sacrebleu without the LM: $t"
if [ "$best" = 0 ]; then
  echo "quality_fusion.sh: no lm_weight beat 0 on Dev: the LM is not used on Test"
else
  t=$(decode Test "$best")
  echo "quality_fusion.sh: Test sacrebleu with the LM at lm_weight $best (best on Dev): $t"
fi
