#!/usr/bin/env bash
# Listen, Attend and Spell (asr.bible_tts.TinyTest) with real Lingvo (lingvo.tasks.asr's
# AsrModel, AsrEncoder, AsrDecoder) and with lingvoc on the same machine, the same records
# and the same threads: one step from Lingvo's step-0 checkpoint on the same batch,
# checkpoints both ways (each evaler and each decoder on the other's checkpoint: log_pplx,
# next-step accuracy, beam-search hypotheses, WER), tf.train.load_checkpoint on lingvoc's,
# params.txt side by side, training speed and peak memory. Lingvo's experiments are
# scripts/lingvo_peer/params/asr/bible_tts.py. Prints a report and writes it to
# $WORK/report.md; exits 1 if a crossing disagrees.
#
#   scripts/lingvo_peer/asr.sh             # STEPS=100 RUNS=1 WORK=/tmp/lingvo_peer_asr
#   RUNS=0 STEPS=40 scripts/lingvo_peer/asr.sh   # no race: the crossings only
#   EMA=0.99 RUNS=0 STEPS=40 scripts/lingvo_peer/asr.sh   # with moving averages (see below)
#   MODEL=LasSmall RUNS=3 STEPS=40 scripts/lingvo_peer/asr.sh   # the Small model (no dropout
#                                   # either), its one step, crossings and race on the same batch
#
# The data: eight utterances of two words spoken by espeak-ng (as tests/test_asr_e2e.sh
# makes them), one record file of lingvoc's create_asr_features (Lingvo's layout: uttid,
# transcript, frames), read by both as train and test. Needs the peers' venv
# (scripts/peers.sh), espeak-ng and sox.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STEPS=${STEPS:-100} RUNS=${RUNS:-1} WORK=${WORK:-/tmp/lingvo_peer_asr}
BIN=${LV_BIN:-$ROOT/bin} M=asr.bible_tts.${MODEL:-TinyTest}
export LINGVOC_EXPERIMENTS=${LINGVOC_EXPERIMENTS:-$ROOT/experiments} # a $LV_BIN outside the checkout
# EMA=DECAY: both train with task.train.ema_decay DECAY (the moving averages in the
# checkpoints as <var>/ExponentialMovingAverage, batch-norm statistics included), and both
# evalers and decoders read the averages.
if [ -n "${EMA:-}" ]; then
  LV_OV="task.train.ema_decay: $EMA; train.ema_decay: $EMA" LC_OV="task.train.ema_decay: $EMA"
fi
rm -rf "$WORK"; mkdir -p "$WORK/wavs" "$WORK/rec"
cd "$WORK"
. "$ROOT/scripts/lingvo_peer/lib.sh"   # PY, say, rate, median, spread, versions
. "$ROOT/scripts/lingvo_peer/common.sh"
i=0
for text in "yes go" "no stop" "up left" "down right" "go up" "stop down" "left yes" "right no"; do
  espeak-ng -v en-us -s 150 --stdout "$text" | sox -q -t wav - -r 16000 -c 1 -b 16 "wavs/utt0$i.wav" gain -2
  printf 'wavs/utt0%d.wav\t%s\n' $i "$text" >>list.tsv
  i=$((i + 1))
done
"$BIN/create_asr_features" --input_list=list.tsv --generate_tfrecords --output_template=rec/utt-%5.5d-of-%5.5d >features.log 2>&1
export LINGVO_PEER_ASR_TRAIN=$WORK/rec/utt-00000-of-00001 LINGVO_PEER_ASR_TEST=$WORK/rec/utt-00000-of-00001
LC_DATA="input.file_pattern: \"$WORK/rec/utt@1\""
say "# LAS ($M): $(versions) and lingvoc, $(nproc) cores, $(date -u +%F)"
say ""
[ -z "${EMA:-}" ] || say "- task.train.ema_decay $EMA in both: the evalers and decoders read the moving averages"
say "- data: 8 espeak-ng utterances ($(grep -o '[0-9.]* s of audio' features.log)), one record file of create_asr_features, train = test"

# 1. One step from Lingvo's step-0 checkpoint on the same batch: the 8 utterances are one
#    batch (bucket_batch_limit 8), read in file order; the model has no dropout. Lingvo
#    pads the targets to target_max_length (400), lingvoc to the longest: the padded steps
#    have weight 0.
one_step "the same 8 utterances in one batch" loss,log_pplx,fraction_of_correct_next_step_preds,grad_norm/all,l2_loss \
  "$LC_DATA"
say "  (Lingvo regularizes every embedding row its lookup read, the padded target positions' included)"

# 2. Checkpoints both ways: STEPS steps of each trainer, then both evalers and both
#    decoders (beam search, 4 hyps, as configured) on each checkpoint.
lingvo --logdir="$WORK/tr_lingvo" \
  --model_params_override="train.max_steps: $STEPS; task.train.max_steps: $STEPS${LV_OV:+; $LV_OV}" >tr_lingvo.log 2>&1
"$BIN/trainer" --model=$M --logdir="$WORK/tr_lingvoc" \
  --model_params_override="$LC_DATA; train.max_steps: $STEPS${LC_OV:+; $LC_OV}" >tr_lingvoc.log 2>&1
CK=$(printf %08d "$STEPS")
LV_CK=$WORK/tr_lingvo/train/ckpt-$CK LC_CK=$WORK/tr_lingvoc/train/ckpt-$CK
CKSTEP=$STEPS LC_EVAL=$LC_DATA AGREE_REL=log_pplx AGREE_ABS=fraction_of_correct_next_step_preds
say ""
say "Checkpoints both ways ($STEPS steps each, the 8 utterances as the test set):"
cross_evals "$LV_CK" "$LC_CK" log_pplx loss fraction_of_correct_next_step_preds token_normed_prob
say ""
say "| checkpoint written by | decoded by | norm_wer | sacc | ter | corpus_bleu |"
say "|---|---|---|---|---|---|"
score() { grep "^$2: " "$1" | cut -d' ' -f2; }   # FILE NAME: NAME's value in a score file
: >decodes.md
for pair in "Lingvo:$LV_CK" "lingvoc:$LC_CK"; do
  who=${pair%%:*} ck=${pair#*:}
  logdir_of "$ck" "$WORK/lvdec_$who"
  lingvo --logdir="$WORK/lvdec_$who" --job=decoder_test \
    --model_params_override="train.max_steps: $STEPS; task.train.max_steps: $STEPS${LV_OV:+; $LV_OV}" \
    >"decode_lingvo_of_$who.log" 2>&1
  "$BIN/decoder" --model=$M --logdir="$WORK/lcdec_$who" --dataset=Test --once --checkpoint="$ck" \
    --model_params_override="$LC_DATA${LC_OV:+; $LC_OV}" >"decode_lingvoc_of_$who.log" 2>&1
  lv_sc=$(ls "$WORK"/lvdec_$who/decoder_test/score-*.txt) lc_sc=$(ls "$WORK"/lcdec_$who/decoder_test/score-*.txt)
  for e in "Lingvo:$lv_sc" "lingvoc:$lc_sc"; do
    say "| $who | ${e%%:*} |$(for m in norm_wer sacc ter corpus_bleu; do printf ' %s |' "$(score "${e#*:}" $m)"; done)"
  done
  for m in norm_wer sacc ter corpus_bleu; do
    close_abs "$(score "$lv_sc" $m)" "$(score "$lc_sc" $m)" 1e-6 ||
      { say "DISAGREE: decoders on $who's checkpoint, $m: Lingvo $(score "$lv_sc" $m), lingvoc $(score "$lc_sc" $m)"; BAD=1; }
  done
  if "$PY" "$ROOT/scripts/lingvo_peer/punct_decodes.py" --asr "decode_lingvo_of_$who.log" \
      "$WORK/lcdec_$who/decoder_test/decoder_out_$(printf %09d "$STEPS")" >"decodes_$who.txt" 2>&1; then
    echo "- decoders on $who's checkpoint: $(tail -1 "decodes_$who.txt")" >>decodes.md
  else
    say "DISAGREE: decoders on $who's checkpoint: $(tail -3 "decodes_$who.txt")"; BAD=1
  fi
done

# Lingvo's decoder as it is (PeerAsrModel's repair off): its references end in </s>.
logdir_of "$LC_CK" "$WORK/lvdec_ref_eos"
LINGVO_PEER_ASR_REF_EOS=1 lingvo --logdir="$WORK/lvdec_ref_eos" --job=decoder_test \
  --model_params_override="train.max_steps: $STEPS; task.train.max_steps: $STEPS${LV_OV:+; $LV_OV}" \
  >decode_lingvo_ref_eos.log 2>&1
sc=$(ls "$WORK"/lvdec_ref_eos/decoder_test/score-*.txt)
say "| lingvoc | Lingvo as it is (references with </s>) |$(for m in norm_wer sacc ter corpus_bleu; do printf ' %s |' "$(score "$sc" $m)"; done)"
say ""
say "$(cat decodes.md)"

# 3. tf.train.load_checkpoint on lingvoc's checkpoint, names/dtypes/shapes against Lingvo's.
ckpt_compat "$LC_CK" "$LV_CK"

# 4. params.txt side by side (--mode=inspect_params: the params only).
params_side_by_side

# 5. Speed and memory: RUNS alternating runs of STEPS steps, steps/s between step STEPS/3
#    and STEPS from each log's own timestamps, peak RSS by /usr/bin/time. Lingvo pads every
#    target to target_max_length (400): LINGVO_PEER_ASR_TGT_LEN=16 here, the longest
#    transcript (10 characters + </s>) with room, so both decoders run about as many steps.
race "$LC_DATA" LINGVO_PEER_ASR_TGT_LEN=16
echo "report: $R" >&2
exit $BAD
