#!/usr/bin/env bash
# quality_asr.sh - the speech quality run: asr.bible_tts.LasSmallSpecAug trained in the
# three stages (Test WER 7.46% in 2 hours, docs/results.md) within one time budget, then
# its WER on Dev and Test (never part of `make test`: it takes hours):
#
#   1. asr.bible_tts.LasSmall (no SpecAugment; the verses of at most 30 words) to step
#      STAGE1 (default 2894): the attention aligns far sooner on short verses without
#      masks (from scratch with both, the training loss at step 1,150 was 1.33 against 0.28);
#   2. LasSmallSpecAug on the same verses to step STAGE2 (default 6564);
#   3. LasSmallSpecAug on those and the 31-80-word verses (input.resume_replay: false)
#      until the budget ends.
# A stage that the budget cuts short ends the training there. Then bin/decoder on each of
# DATASETS (default "Dev Test"), and again with the transcripts LM fused at LM_WEIGHT
# (default 0.3, chosen on Dev) when LM_LOGDIR (default /tmp/lm_asr_run) has a checkpoint of
# lm.bible.RnnLmTranscripts.
#
# Data: /tmp/asr_bible and /tmp/asr_bible_long (the experiments' paths), made first when
# missing (scripts/prepare_asr_bible.sh, ~6 min and ~4 GB in all).
#
#   HOURS=N     training budget in hours for the three stages (default 2; fractions allowed)
#   LOGDIR=D    run directory (default /tmp/quality_asr); one with checkpoints resumes at
#               its stage, and the budget counts from this start only
#   THREADS=N   kernel threads (default 2)
#
# Exit 0 when the training and the decodes finished (whatever the WER), 2 bad arguments,
# 1 a step failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${LV_BIN:-$root/bin} q_name=quality_asr.sh
. "$here/lib/quality.sh"
q_usage_or_help "${1:-}" 26 "(HOURS, LOGDIR, THREADS, STAGE1, STAGE2, DATASETS, LM_LOGDIR, LM_WEIGHT; --help)"
hours=${HOURS:-2} logdir=${LOGDIR:-/tmp/quality_asr} threads=${THREADS:-2}
stage1=${STAGE1:-2894} stage2=${STAGE2:-6564} datasets=${DATASETS-Dev Test}
lm_logdir=${LM_LOGDIR:-/tmp/lm_asr_run} lm_weight=${LM_WEIGHT:-0.3}
q_hours HOURS "$hours"
case "$stage1$stage2" in *[!0-9]*) echo "quality_asr.sh: STAGE1 and STAGE2 must be step numbers" >&2; exit 2 ;; esac
[ "$stage1" -lt "$stage2" ] || { echo "quality_asr.sh: STAGE1 ($stage1) must be below STAGE2 ($stage2)" >&2; exit 2; }
q_need_bins trainer decoder create_asr_features
[ -s /tmp/asr_bible/test.tfrecords-00000-of-00001 ] || LV_BIN=$bin "$here/prepare_asr_bible.sh" /tmp/asr_bible
[ -s /tmp/asr_bible_long/train.tfrecords-00003-of-00004 ] ||
  MIN_WORDS=31 MAX_WORDS=80 TRAIN_EVERY=3 SPLITS=train ID_PREFIX=long- LV_BIN=$bin \
    "$here/prepare_asr_bible.sh" /tmp/asr_bible_long

end=$(( $(date +%s) + $(q_seconds "$hours") ))
# The latest checkpoint's step (0 before the first).
step() {
  local s
  s=$(sed -n 's/^model_checkpoint_path: "ckpt-0*\([0-9][0-9]*\)"/\1/p' "$logdir/train/checkpoint" 2>/dev/null || true)
  echo "${s:-0}"
}
# train NAME MODEL OVERRIDES: until the override's max_steps or the budget; 0 when the
# budget is left, 1 when it ran out.
train() {
  local left=$(( end - $(date +%s) ))
  [ "$left" -gt 60 ] || return 1
  echo "quality_asr.sh: stage $1 ($2) from step $(step), $left s left"
  # 1 when the budget ran out (SIGTERM: the trainer saved and stopped), 0 at max_steps.
  q_train "$left" " in stage $1" --model="$2" --logdir="$logdir" --num_threads="$threads" \
    --model_params_override="$3"
}
start=$(date +%s)
{ [ "$(step)" -ge "$stage1" ] || train 1 asr.bible_tts.LasSmall "train.max_steps: $stage1"; } &&
  { [ "$(step)" -ge "$stage2" ] || train 2 asr.bible_tts.LasSmallSpecAug \
      "train.max_steps: $stage2; input.file_pattern: \"/tmp/asr_bible/train.tfrecords@4\""; } &&
  train 3 asr.bible_tts.LasSmallSpecAug "input.resume_replay: false" ||
  echo "quality_asr.sh: the budget ran out"
echo "quality_asr.sh: trained for $(( $(date +%s) - start )) s, to step $(step)"

M=asr.bible_tts.LasSmallSpecAug
ck="$logdir/train/ckpt-$(printf %08d "$(step)")"
fuse=no
ls "$lm_logdir"/train/ckpt-*.index >/dev/null 2>&1 && fuse=yes
# show DIR DS: the WER lines of DIR's decode of DS.
show() { grep -H -E '^(norm_wer|error_rates/(del|ins|sub)):' "$1/decoder_${2,,}/score-"*.txt | tail -4; }
for ds in $datasets; do
  "$bin/decoder" --model=$M --logdir="$logdir" --dataset="$ds" --once --num_threads="$threads"
  show "$logdir" "$ds"
  [ $fuse = yes ] || continue
  # The same checkpoint with the LM, in a log directory of its own (its own score files).
  "$bin/decoder" --model=$M --logdir="$logdir/lm_fused" --checkpoint="$ck" --dataset="$ds" --once \
    --num_threads="$threads" --model_params_override="task.decoder.fusion.lm_model: lm.bible.RnnLmTranscripts; \
task.decoder.fusion.lm_logdir: \"$lm_logdir\"; task.decoder.fusion.lm_weight: $lm_weight"
  show "$logdir/lm_fused" "$ds"
done
