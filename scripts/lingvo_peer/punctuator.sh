#!/usr/bin/env bash
# The punctuator codelab (punctuator.codelab.$MODEL, RNMTTinyTest unless MODEL says
# otherwise) with real Lingvo and with lingvoc on the same machine, the same data, the
# same tokenizer and vocabulary and the same threads: training speed and peak memory
# (RUNS alternating runs of STEPS steps each), checkpoints both ways (each evaler and each
# decoder on the other's checkpoint, tf.train.load_checkpoint on lingvoc's) and one step
# from Lingvo's step-0 checkpoint on the same batch. Prints a report and writes it to
# $WORK/report.md; exits 1 if a crossing disagrees.
#
#   scripts/lingvo_peer/punctuator.sh      # MODEL=RNMTTinyTest STEPS=300 RUNS=3 WORK=/tmp/lingvo_peer_punctuator
#   MODEL=RNMTModelSmall STEPS=60 scripts/lingvo_peer/punctuator.sh   # DATA=/tmp/punctuator_data
#
# RNMTTinyTest reads the 40 sentences and 128-piece WPM vocabulary of
# tests/data/decode_golden/punct (training and evaluation on the same lines, as
# tests/test_punctuator_toy.sh does); other models read scripts/prepare_punctuator.sh's
# DATA directory (made when missing, about 2 minutes) and evaluate on its first EVAL_N
# test sentences. Needs the peers' venv (scripts/peers.sh makes it). Lingvo's side runs
# through scripts/lingvo_peer/params/punctuator/codelab.py, whose PeerPunctuatorInput
# fixes three Lingvo 0.14 faults (see docs/peers.md, "Lingvo beside lingvoc: punctuator").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=${MODEL:-RNMTTinyTest} STEPS=${STEPS:-300} RUNS=${RUNS:-3} WORK=${WORK:-/tmp/lingvo_peer_punctuator}
BIN=${LV_BIN:-$ROOT/bin} M=punctuator.codelab.$MODEL
export LINGVOC_EXPERIMENTS=${LINGVOC_EXPERIMENTS:-$ROOT/experiments} # a $LV_BIN outside the checkout
rm -rf "$WORK"; mkdir -p "$WORK"
cd "$WORK"
. "$ROOT/scripts/lingvo_peer/lib.sh"   # PY, say, rate, median, spread, versions
. "$ROOT/scripts/lingvo_peer/common.sh"
if [ "$MODEL" = RNMTTinyTest ]; then
  G=$ROOT/tests/data/decode_golden/punct
  TRAIN=$G/train.txt VOCAB=$G/wpm.voc VSIZE=128
  cp "$TRAIN" test.txt
else
  DATA=${DATA:-/tmp/punctuator_data} EVAL_N=${EVAL_N:-64}
  [ -s "$DATA/web_wpm.16000.vocab" ] || sh "$ROOT/scripts/prepare_punctuator.sh" "$DATA" >prepare.log 2>&1
  TRAIN=$DATA/train.txt VOCAB=$DATA/web_wpm.16000.vocab VSIZE=16000
  head -"$EVAL_N" "$DATA/test.txt" >test.txt
fi
TEST=$WORK/test.txt
# The one-step batch: 32 short training lines, one bucket of 32, read once by both.
awk 'NF <= 12 && n++ < 32' "$TRAIN" >one.txt
ONE_BUCKET="input.bucket_upper_bound: [40]; input.bucket_batch_limit: [32]; input.source_max_length: 42; input.target_max_length: 42"
export LINGVO_PEER_PUNCT_TRAIN=$TRAIN LINGVO_PEER_PUNCT_TEST=$TEST LINGVO_PEER_PUNCT_VOCAB=$VOCAB LINGVO_PEER_PUNCT_VOCAB_SIZE=$VSIZE
tok() { echo "input.file_pattern: text:$1; input.tokenizer.vocab_filepath: $VOCAB; input.tokenizer.vocab_size: $VSIZE"; }
say "# $M: $(versions) and lingvoc, $(nproc) cores, $(date -u +%F)"
say ""
say "- data: $(wc -l <"$TRAIN") training lines ($TRAIN), $(wc -l <"$TEST") evaluation lines, WPM vocabulary $VOCAB ($VSIZE)"

# 1. Speed and memory: alternating runs, steps/s between step FIRST and STEPS from each
#    log's own timestamps (past start-up and the first checkpoint), peak RSS by /usr/bin/time.
FIRST=$((STEPS / 3 / 10 * 10)); [ "$FIRST" -ge 10 ] || FIRST=10
for r in $(seq "$RUNS"); do
  /usr/bin/time -f "%M" -o "rss_lingvo_$r" "$PY" "$ROOT/scripts/lingvo_peer/run.py" trainer --model=$M \
    --run_locally=cpu --mode=sync --logdir="$WORK/lingvo_$r" \
    --model_params_override="train.max_steps: $STEPS; task.train.max_steps: $STEPS" >"lingvo_$r.log" 2>&1
  /usr/bin/time -f "%M" -o "rss_lingvoc_$r" "$BIN/trainer" --model=$M --logdir="$WORK/lingvoc_$r" \
    --log_interval_steps=10 --model_params_override="$(tok "$TRAIN"); train.max_steps: $STEPS" >"lingvoc_$r.log" 2>&1
  echo "$(rate "lingvo_$r.log" "$FIRST" "$STEPS") $(tail -1 "rss_lingvo_$r")" >>lingvo.runs
  echo "$(rate "lingvoc_$r.log" "$FIRST" "$STEPS") $(tail -1 "rss_lingvoc_$r")" >>lingvoc.runs
done
lv=$(cut -d' ' -f1 lingvo.runs | median) lc=$(cut -d' ' -f1 lingvoc.runs | median)
lvm=$(cut -d' ' -f2 lingvo.runs | median) lcm=$(cut -d' ' -f2 lingvoc.runs | median)
say "- training steps/s (median of $RUNS, steps $FIRST-$STEPS): Lingvo $lv [$(cut -d' ' -f1 lingvo.runs | spread)], lingvoc $lc [$(cut -d' ' -f1 lingvoc.runs | spread)]: $(awk -v a="$lc" -v b="$lv" 'BEGIN{printf "%.2fx", a / b}')"
say "- peak RSS (median): Lingvo $((lvm / 1024)) MiB, lingvoc $((lcm / 1024)) MiB: $(awk -v a="$lcm" -v b="$lvm" 'BEGIN{printf "%.2fx", a / b}')"
say "- final training log_pplx (run 1, step $STEPS): Lingvo $(grep -o "step: *$STEPS,.*" lingvo_1.log | grep -o ' log_pplx:[0-9.e+-]*' | cut -d: -f2), lingvoc $(grep -o "step: *$STEPS,.*" lingvoc_1.log | grep -o ' log_pplx:[0-9.e+-]*' | cut -d: -f2) (each its own initialization and shuffle)"

# 2. Checkpoints both ways, run 1's final ones: each evaler and each decoder on both.
LV_CK=$WORK/lingvo_1/train/ckpt-$(printf %08d "$STEPS") LC_CK=$WORK/lingvoc_1/train/ckpt-$(printf %08d "$STEPS")
CKSTEP=$STEPS LC_EVAL=$(tok "$TEST") AGREE_REL=log_pplx AGREE_ABS=fraction_of_correct_next_step_preds
cross_evals "$LV_CK" "$LC_CK" log_pplx loss fraction_of_correct_next_step_preds
z=$(lingvo_eval "$LC_CK" eval_lingvo_zero_paddings_of_lingvoc.log LINGVO_PEER_PUNCT_ZERO_PADDINGS=1)
say "| lingvoc | Lingvo, its own zero paddings | $(metric "$z" log_pplx) | $(metric "$z" loss) | $(metric "$z" fraction_of_correct_next_step_preds) |"
say ""
for pair in "Lingvo:$LV_CK" "lingvoc:$LC_CK"; do
  who=${pair%%:*} ck=${pair#*:}
  logdir_of "$ck" "$WORK/lvdec_$who"
  "$PY" "$ROOT/scripts/lingvo_peer/run.py" trainer --model=$M --run_locally=cpu --mode=sync --logdir="$WORK/lvdec_$who" \
    --job=decoder_test --model_params_override="train.max_steps: $STEPS; task.train.max_steps: $STEPS" \
    >"decode_lingvo_of_$who.log" 2>&1
  "$BIN/decoder" --model=$M --logdir="$WORK/lcdec_$who" --dataset=Test --once --checkpoint="$ck" \
    --model_params_override="$(tok "$TEST")" >"decode_lingvoc_of_$who.log" 2>&1
  if "$PY" "$ROOT/scripts/lingvo_peer/punct_decodes.py" "decode_lingvo_of_$who.log" \
      "$WORK/lcdec_$who/decoder_test/decoder_out_$(printf %09d "$STEPS")" >"decodes_$who.txt" 2>&1; then
    say "- decoders on $who's checkpoint (beam search, $(grep -m1 -o 'num_hyps_per_beam : [0-9]*' lingvo_1/train/trainer_params.txt | cut -d' ' -f3) hyps): $(tail -1 "decodes_$who.txt"); corpus_bleu Lingvo $(grep -o 'corpus_bleu: [0-9.e+-]*' "decode_lingvo_of_$who.log" | tail -1 | cut -d' ' -f2), lingvoc $(grep -o 'corpus_bleu: [0-9.e+-]*' "decode_lingvoc_of_$who.log" | tail -1 | cut -d' ' -f2), lingvoc's sacrebleu $(grep -o 'sacrebleu: [0-9.e+-]*' "decode_lingvoc_of_$who.log" | tail -1 | cut -d' ' -f2)"
  else
    say "DISAGREE: decoders on $who's checkpoint: $(tail -3 "decodes_$who.txt")"; BAD=1
  fi
done

# 3. tf.train.load_checkpoint on lingvoc's checkpoint, names/dtypes/shapes against Lingvo's.
ckpt_compat "$LC_CK" "$LV_CK"

# 4. One step from Lingvo's step-0 checkpoint on the same batch (one.txt: 32 lines, one
#    bucket of 32, read once in file order by Lingvo, once as one shuffled epoch by lingvoc;
#    the model has no dropout): loss, gradient norm, every weight and Adam slot, to rtol
#    1e-4 (an embedding row's gradient sums float32 terms through every LSTM step and the
#    attention: one Adam m element of RNMTTinyTest's enc/emb came out 2.4e-5 apart).
LINGVO_PEER_PUNCT_ONE_EPOCH=1 LINGVO_PEER_PUNCT_TRAIN=$WORK/one.txt lingvo --logdir="$WORK/one_lingvo" \
  --model_params_override="train.max_steps: 1; task.train.max_steps: 1; $ONE_BUCKET" >one_lingvo.log 2>&1
logdir_of "$WORK/one_lingvo/train/ckpt-00000000" "$WORK/one_lingvoc"
"$BIN/trainer" --model=$M --logdir="$WORK/one_lingvoc" --log_interval_steps=1 \
  --model_params_override="$(tok "$WORK/one.txt"); train.max_steps: 1; $ONE_BUCKET" >one_lingvoc.log 2>&1
"$PY" "$ROOT/scripts/lingvo_peer/event_scalars.py" --step=1 --tags=loss,log_pplx,grad_norm/all/loss,l2_loss/loss \
  "$WORK"/one_lingvo/train/events.* >one_lingvo.scalars 2>/dev/null
lc_line=$(grep 'step: *1,' one_lingvoc.log)
say ""
say "One step from Lingvo's step-0 checkpoint, the same 32 lines:"
say ""
say "| | Lingvo | lingvoc |"
say "|---|---|---|"
for k in loss log_pplx grad_norm/all l2_loss; do
  say "| $k | $(awk -v k="$k" '$2 == k || $2 == k "/loss" {print $3}' one_lingvo.scalars) | $(echo "$lc_line" | grep -o " $k:[0-9.e+-]*" | cut -d: -f2) |"
done
L2=$(grep -m1 -o "l2_regularizer_weight : [0-9.e+-]*" one_lingvo/train/trainer_params.txt | cut -d' ' -f3)
if "$PY" "$ROOT/scripts/lingvo_peer/compare_adam_step.py" one_lingvo/train/ckpt-00000001 one_lingvoc/train/ckpt-00000001 \
    --rtol=1e-4 --adam_first_step --before=one_lingvo/train/ckpt-00000000 --l2="$L2" >one_step_weights.log 2>&1; then
  say "| weights and Adam slots after the step | $(tail -1 one_step_weights.log) | |"
else
  say "DISAGREE: the weights after one step: $(tail -3 one_step_weights.log)"; BAD=1
fi
say ""
say "- l2_loss: $(grep '^rows with a gradient only' one_step_weights.log | sed 's/^rows with a gradient only in A: /embedding rows Lingvo regularizes and lingvoc does not: /')"
say "  (Lingvo regularizes every row its lookup read, padded positions included: the padding id 0)"
say "- grad_norm/all: Lingvo's is the norm of the IndexedSlices values of the embedding gradients, a"
say "  row looked up twice counted as two (py_utils.SumSquared); lingvoc's is the norm of the gradient applied."
say "  Lingvo's graph on the same batch and checkpoint (grad_norms.py): $(LINGVO_PEER_PUNCT_ONE_EPOCH=1 \
  LINGVO_PEER_PUNCT_TRAIN=$WORK/one.txt "$PY" "$ROOT/scripts/lingvo_peer/grad_norms.py" $M \
  one_lingvo/train/ckpt-00000000 --model_params_override="$ONE_BUCKET" 2>/dev/null | tail -1)"
echo "report: $R" >&2
exit $BAD
