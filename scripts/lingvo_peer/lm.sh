#!/usr/bin/env bash
# The RNN language model (lm.bible.RnnLmTinyTest; MODEL=TransformerLmTinyTest the
# Transformer one) with real Lingvo (lingvo.tasks.lm's LanguageModel over layers.RnnLm or
# layers.TransformerLm) and with lingvoc on the same machine, the same lines
# and the same threads: one step from Lingvo's step-0 checkpoint on the same batch,
# checkpoints both ways (each evaler on the other's checkpoint: log_pplx,
# log_pplx_per_word, next-step accuracy; lingvoc's --score_text on Lingvo's),
# tf.train.load_checkpoint on lingvoc's, params.txt side by side, training speed and peak
# memory. Lingvo's experiments are scripts/lingvo_peer/params/lm/bible.py. Prints a report
# and writes it to $WORK/report.md; exits 1 if a crossing disagrees.
#
#   scripts/lingvo_peer/lm.sh              # STEPS=100 RUNS=1 WORK=/tmp/lingvo_peer_lm
#   RUNS=0 STEPS=40 scripts/lingvo_peer/lm.sh   # no race: the crossings only
#   RUNS=0 STEPS=0 scripts/lingvo_peer/lm.sh    # cross the one-step checkpoints (the test)
#   MODEL=TransformerLmTinyTest scripts/lingvo_peer/lm.sh
#   EMA=0.99 RUNS=0 STEPS=20 scripts/lingvo_peer/lm.sh   # with moving averages (see below)
#
# The text: the 40 sentences of tests/data/decode_golden/punct/train.txt (characters,
# AsciiTokenizer), train = test; the one-step batch is its first 16 lines. Needs the
# peers' venv (scripts/peers.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STEPS=${STEPS:-100} RUNS=${RUNS:-1} WORK=${WORK:-/tmp/lingvo_peer_lm}
BIN=${LV_BIN:-$ROOT/bin} M=lm.bible.${MODEL:-RnnLmTinyTest}
export LINGVOC_EXPERIMENTS=${LINGVOC_EXPERIMENTS:-$ROOT/experiments} # a $LV_BIN outside the checkout
# The attention key biases' true gradient is zero (the softmax cancels a bias added to
# every key): each side's is rounding noise, which Adam's first step makes a full step.
case $M in *Transformer*) ONE_STEP_EXEMPT=/source_proj_b/ ;; esac
# The one step runs without dropout on both sides (their generators differ): the
# TinyTests have none, the Small models' is switched off for that step (ONE_OV, common.sh).
case $M in
  *TransformerLm*) ONE_OV="task.lm.residual_dropout_prob: 0.0" ;;
  *RnnLm*) ONE_OV="task.lm.embedding_dropout_keep_prob: 1.0; task.lm.rnns.dropout.keep_prob: 1.0" ;;
esac
# EMA=DECAY: both train with task.train.ema_decay DECAY (the moving averages in the
# checkpoints as <var>/ExponentialMovingAverage), and both evalers read the averages.
if [ -n "${EMA:-}" ]; then
  LV_OV="task.train.ema_decay: $EMA; train.ema_decay: $EMA" LC_OV="task.train.ema_decay: $EMA"
fi
rm -rf "$WORK"; mkdir -p "$WORK"
cd "$WORK"
. "$ROOT/scripts/lingvo_peer/lib.sh"   # PY, say, rate, median, spread, versions
. "$ROOT/scripts/lingvo_peer/common.sh"
cp "$ROOT/tests/data/decode_golden/punct/train.txt" text.txt
head -16 text.txt >one.txt
export LINGVO_PEER_LM_TRAIN=$WORK/text.txt LINGVO_PEER_LM_TEST=$WORK/text.txt
LC_DATA="input.file_pattern: \"text:$WORK/text.txt\""
say "# LM ($M): $(versions) and lingvoc, $(nproc) cores, $(date -u +%F)"
say ""
[ -z "${EMA:-}" ] || say "- task.train.ema_decay $EMA in both: the evalers read the moving averages"
say "- data: $(wc -l <text.txt) lines, $(wc -c <text.txt) characters (tests/data/decode_golden/punct/train.txt), train = test"

# 1. One step from Lingvo's step-0 checkpoint on the same batch: the 16 lines of one.txt,
#    one batch of 16, read in file order (one file thread, buffer 1); no dropout. Lingvo
#    pads the lines to target_max_length (LmInput sets pad_to_max_seq_length), lingvoc to
#    the longest: the padded positions have weight 0.
one_step "the same 16 lines in one batch" loss,log_pplx,fraction_of_correct_next_step_preds,grad_norm/all,l2_loss \
  "input.file_pattern: \"text:$WORK/one.txt\"" LINGVO_PEER_LM_TRAIN="$WORK/one.txt"
say "  (Lingvo regularizes every embedding row its lookup read, the padded positions' included)"

# 2. Checkpoints both ways: STEPS steps of each trainer (STEPS=0: the step-1 checkpoints
#    of section 1), then both evalers on each checkpoint, and lingvoc's --score_text (the
#    corpus log_pplx of the same lines).
if [ "$STEPS" -gt 0 ]; then
  lingvo --logdir="$WORK/tr_lingvo" \
    --model_params_override="train.max_steps: $STEPS; task.train.max_steps: $STEPS${LV_OV:+; $LV_OV}" >tr_lingvo.log 2>&1
  "$BIN/trainer" --model=$M --logdir="$WORK/tr_lingvoc" \
    --model_params_override="$LC_DATA; train.max_steps: $STEPS${LC_OV:+; $LC_OV}" >tr_lingvoc.log 2>&1
  LV_CK=$WORK/tr_lingvo/train/ckpt-$(printf %08d "$STEPS") LC_CK=$WORK/tr_lingvoc/train/ckpt-$(printf %08d "$STEPS")
else
  LV_CK=$WORK/one_lingvo/train/ckpt-00000001 LC_CK=$WORK/one_lingvoc/train/ckpt-00000001
fi
CKSTEP=$((STEPS > 0 ? STEPS : 1))
LC_EVAL=$LC_DATA AGREE_REL="log_pplx log_pplx_per_word" AGREE_ABS=fraction_of_correct_next_step_preds
say ""
say "Checkpoints both ways ($CKSTEP steps each, the 40 lines as the test set):"
cross_evals "$LV_CK" "$LC_CK" log_pplx log_pplx_per_word fraction_of_correct_next_step_preds num_predictions num_words
for pair in "Lingvo:$LV_CK" "lingvoc:$LC_CK"; do
  who=${pair%%:*} ck=${pair#*:}
  logdir_of "$ck" "$WORK/score_$who"
  "$BIN/decoder" --model=$M --logdir="$WORK/score_$who" --score_text=text.txt ${LC_OV:+--model_params_override="$LC_OV"} \
    >"score_$who.out" 2>"score_$who.log"
  say "- lingvoc's decoder --score_text on $who's checkpoint: $(grep -ho 'corpus: .*' "score_$who.out" "score_$who.log" | tail -1)"
done

# 3. tf.train.load_checkpoint on lingvoc's checkpoint, names/dtypes/shapes against Lingvo's.
ckpt_compat "$LC_CK" "$LV_CK"

# 4. params.txt side by side (--mode=inspect_params: the params only).
params_side_by_side

# 5. Speed and memory. Lingvo pads every line to target_max_length (256):
#    LINGVO_PEER_LM_TGT_LEN=64 here, the longest line (39 characters + </s>) with room.
race "$LC_DATA" LINGVO_PEER_LM_TGT_LEN=64
echo "report: $R" >&2
exit $BAD
