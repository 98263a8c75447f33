#!/usr/bin/env bash
# quality_asr_synth.sh - issue 47's speech quality run: asr.synth_en.LasSmall trained from
# scratch by one trainer command (its curriculum is params of the experiment) within HOURS,
# then its WER on every test set, per voice and per synthesizer, with and without the
# character LM, and CMU Sphinx on the same clips (never part of `make test`: it takes hours):
#
#   1. bin/trainer --model=asr.synth_en.LasSmall until the budget ends (SIGTERM: it saves
#      and stops) or max_steps;
#   2. when LM_HOURS > 0 and LM_LOGDIR has no checkpoint yet: lm.bible.RnnLmSynthTranscripts
#      trained for LM_HOURS on LM_THREADS threads beside it (scripts/prepare_asr_synth_lm.sh);
#   3. bin/decoder on each of DATASETS, scripts/wer_by_voice.py's table of each, and the same
#      with the LM fused at LM_WEIGHT when LM_LOGDIR has a checkpoint (LM_WEIGHT=auto, the
#      default: the weight of LM_WEIGHTS with the lowest WER on the first DEV_UTTS (300)
#      utterances of Dev, never a test set);
#   4. scripts/pocketsphinx_wer.sh on Real and on the held-out sets (PS_SETS).
#
# Data: /tmp/asr_synth (the experiment's path; scripts/prepare_asr_synth.sh, ~25 min, and
# scripts/prepare_asr_real.sh for Real), made first when missing.
#
#   HOURS=N       training budget in hours (default 2.5; fractions allowed; 0: decode only)
#   LOGDIR=D      run directory (default /tmp/quality_asr_synth); one with checkpoints resumes,
#                 and the budget counts from this start only
#   THREADS=N     kernel threads of the trainer and the decoder (default 2)
#   DATASETS=...  (default "Test TestGeneral HeldoutEspeak HeldoutFlite HeldoutFestival Real")
#   LM_LOGDIR=D   the LM's run directory (default /tmp/lm_synth_run); LM_HOURS (default 0),
#                 LM_THREADS (1), LM_WEIGHT (auto, or a number), LM_WEIGHTS ("0.1 0.2 0.3 0.4
#                 0.5"), DEV_UTTS (300)
#   PS_SETS=...   sets CMU Sphinx decodes (default "real heldout_espeak heldout_flite
#                 heldout_festival test_general"; "" for none)
#
# Exit 0 when the training and the decodes finished (whatever the WER), 2 bad arguments,
# 1 a step failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${LV_BIN:-$root/bin} q_name=quality_asr_synth.sh
. "$here/lib/quality.sh"
q_usage_or_help "${1:-}" 30 "(HOURS, LOGDIR, THREADS, DATASETS, LM_LOGDIR, LM_HOURS, LM_THREADS, LM_WEIGHT, PS_SETS; --help)"
hours=${HOURS:-2.5} logdir=${LOGDIR:-/tmp/quality_asr_synth} threads=${THREADS:-2}
datasets=${DATASETS-Test TestGeneral HeldoutEspeak HeldoutFlite HeldoutFestival Real}
lm_logdir=${LM_LOGDIR:-/tmp/lm_synth_run} lm_hours=${LM_HOURS:-0} lm_threads=${LM_THREADS:-1}
lm_weight=${LM_WEIGHT:-auto} lm_weights=${LM_WEIGHTS:-0.1 0.2 0.3 0.4 0.5} dev_utts=${DEV_UTTS:-300}
ps_sets=${PS_SETS-real heldout_espeak heldout_flite heldout_festival test_general}
q_hours HOURS "$hours" 0
q_hours LM_HOURS "$lm_hours" 0
q_need_bins trainer decoder create_asr_features
data=/tmp/asr_synth
[ -f "$data/.done-heldout_festival" ] || LV_BIN=$bin sh "$here/prepare_asr_synth.sh" "$data"
[ -s "$data/real.tfrecords-00000-of-00001" ] || LV_BIN=$bin sh "$here/prepare_asr_real.sh" "$data"
[ -s "$data/lm/train.txt" ] || sh "$here/prepare_asr_synth_lm.sh" "$data"

M=asr.synth_en.LasSmall LM=lm.bible.RnnLmSynthTranscripts
step() {
  local s
  s=$(sed -n 's/^model_checkpoint_path: "ckpt-0*\([0-9][0-9]*\)"/\1/p' "$1/train/checkpoint" 2>/dev/null || true)
  echo "${s:-0}"
}
lm_pid=
if [ "$(q_seconds "$lm_hours")" -gt 0 ] && [ "$(step "$lm_logdir")" = 0 ]; then
  echo "$q_name: $LM for $lm_hours h on $lm_threads threads beside the recognizer ($lm_logdir)"
  timeout -s TERM -k 300 "$(q_seconds "$lm_hours")" "$bin/trainer" --model=$LM --logdir="$lm_logdir" \
    --num_threads="$lm_threads" >"$lm_logdir.log" 2>&1 &
  lm_pid=$!
fi
start=$(date +%s)
if [ "$(q_seconds "$hours")" -gt 0 ]; then
  q_train "$(q_seconds "$hours")" "" --model=$M --logdir="$logdir" --num_threads="$threads" ||
    echo "$q_name: the budget ran out"
fi
echo "$q_name: trained for $(( $(date +%s) - start )) s, to step $(step "$logdir")"
[ -z "$lm_pid" ] || { wait "$lm_pid" || true; echo "$q_name: the LM reached step $(step "$lm_logdir")"; }

ck="$logdir/train/ckpt-$(printf %08d "$(step "$logdir")")"
fuse=no
ls "$lm_logdir"/train/ckpt-*.index >/dev/null 2>&1 && fuse=yes
jobs=("$data"/*.jobs)
# report DIR DS: the decoder's WER lines and the per-voice table of DIR's decode of DS.
report() {
  local d="$1/decoder_${2,,}"
  grep -H -E '^(norm_wer|error_rates/(del|ins|sub)):' "$d/score-"*.txt | tail -4
  python3 "$here/wer_by_voice.py" "$(ls "$d"/decoder_out_* | tail -1)" "${jobs[@]}"
}
fused() { # DIR DS WEIGHT [PARAMS]: the decoder on DS with the LM fused at WEIGHT into DIR
  "$bin/decoder" --model=$M --logdir="$1" --checkpoint="$ck" --dataset="$2" --once \
    --num_threads="$threads" --model_params_override="task.decoder.fusion.lm_model: $LM; \
task.decoder.fusion.lm_logdir: \"$lm_logdir\"; task.decoder.fusion.lm_weight: $3${4:+; $4}"
}
if [ $fuse = yes ] && [ "$lm_weight" = auto ]; then
  best=
  for w in $lm_weights; do
    fused "$logdir/lm_dev_$w" Dev "$w" "task.eval.decoder_samples_per_summary: $dev_utts" >"$logdir/lm_dev_$w.log" 2>&1 ||
      { echo "$q_name: the Dev decode at lm_weight $w failed: $(tail -2 "$logdir/lm_dev_$w.log")" >&2; exit 1; }
    wer=$(sed -n 's/^norm_wer: //p' "$logdir/lm_dev_$w"/decoder_dev/score-*.txt | tail -1)
    echo "Dev ($dev_utts utterances) WER with $LM fused at $w: $wer"
    if [ -z "$best" ] || awk -v a="$wer" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$wer lm_weight=$w; fi
  done
  echo "$q_name: lm_weight $lm_weight (Dev WER $best)"
fi
for ds in $datasets; do
  echo "== $ds"
  "$bin/decoder" --model=$M --logdir="$logdir" --checkpoint="$ck" --dataset="$ds" --once --num_threads="$threads"
  report "$logdir" "$ds"
  [ $fuse = yes ] || continue
  echo "== $ds with $LM fused at $lm_weight"
  fused "$logdir/lm_fused_$lm_weight" "$ds" "$lm_weight"
  report "$logdir/lm_fused_$lm_weight" "$ds"
done
for s in $ps_sets; do
  echo "== CMU Sphinx on $s"
  sh "$here/pocketsphinx_wer.sh" "$data/$s.tsv" "$logdir/pocketsphinx_$s.txt" "${jobs[@]}"
done
