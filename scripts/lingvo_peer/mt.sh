#!/usr/bin/env bash
# The MT Transformer (mt.bible_en_es.TinyTest, and TransformerSmall for speed) with real
# Lingvo and with lingvoc on the same machine, the same records and the same threads: one
# step from Lingvo's step-0 checkpoint on the same batch, checkpoints both ways (each
# evaler and decoder on the other's checkpoint: log_pplx, loss, beam-search hypotheses,
# BLEU), training speed and peak memory. Lingvo's experiments are
# scripts/lingvo_peer/params/mt/bible_en_es.py. Prints a report and writes it to
# $WORK/report.md; exits 1 if a crossing disagrees.
#
#   scripts/lingvo_peer/mt.sh              # STEPS=200 RUNS=3 WORK=/tmp/lingvo_peer_mt
#   RUNS=0 STEPS=60 scripts/lingvo_peer/mt.sh   # no race: the crossings only (the test)
#   BIBLE=/tmp/bible SMALL_STEPS=60 scripts/lingvo_peer/mt.sh   # + TransformerSmall's speed
#
# TinyTest reads the committed 20 pairs of tests/data/decode_golden/mt (train = dev = test).
# BIBLE names scripts/prepare_bible_en_es.sh's output for TransformerSmall's race.
# Needs the peers' venv (scripts/peers.sh makes it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STEPS=${STEPS:-200} RUNS=${RUNS:-3} WORK=${WORK:-/tmp/lingvo_peer_mt} BIBLE=${BIBLE:-}
SMALL_STEPS=${SMALL_STEPS:-60}
BIN=${LV_BIN:-$ROOT/bin} M=mt.bible_en_es.TinyTest
export LINGVOC_EXPERIMENTS=${LINGVOC_EXPERIMENTS:-$ROOT/experiments} # a $LV_BIN outside the checkout
rm -rf "$WORK"; mkdir -p "$WORK/data"
cd "$WORK"
. "$ROOT/scripts/lingvo_peer/lib.sh"

# The records: lingvoc's wpm_encode_file output (Lingvo's tf.Example layout), read by both.
G=$ROOT/tests/data/decode_golden/mt
for s in train dev test; do ln -s "$G/train.tfrecord-00000-of-00001" "data/$s.tfrecord-00000-of-00001"; done
ln -s "$G/wpm.voc" data/wpm.voc
D=$WORK/data
lingvo() { LINGVO_PEER_MT_DATA=$D "$PY" "$ROOT/scripts/lingvo_peer/run.py" trainer --run_locally=cpu --mode=sync "$@"; }
LC_TRAIN="input.file_pattern: tfrecord:$D/train.tfrecord-00000-of-00001"
LC_TEST="input.file_pattern: tfrecord:$D/test.tfrecord-00000-of-00001; input.tokenizer.vocab_filepath: $D/wpm.voc; input.tokenizer.vocab_size: 128"
say "# MT Transformer ($M): $(versions) and lingvoc, $(nproc) cores, $(date -u +%F)"

# 1. One step from Lingvo's step-0 checkpoint on the same batch: all 20 pairs in one batch
#    (bucket_batch_limit 20), read in file order by both (file_buffer_size 1, one file
#    thread), dropout off, label smoothing 0.1 as configured.
NODROP="task.encoder.input_dropout_prob: 0.0; task.decoder.input_dropout_prob: 0.0"
for t in task.encoder.transformer_stack.transformer_tpl task.decoder.trans_tpl; do
  NODROP="$NODROP; $t.tr_atten_tpl.residual_dropout_prob: 0.0; $t.tr_fflayer_tpl.residual_dropout_prob: 0.0"
done
ONE="train.max_steps: 1; $NODROP; input.bucket_batch_limit: [20]; input.file_buffer_size: 1; input.file_parallelism: 1"
lingvo --model=$M --logdir="$WORK/one_lingvo" --model_params_override="$ONE; task.train.max_steps: 1" >one_lingvo.log 2>&1
mkdir -p one_lingvoc/train
cp one_lingvo/train/ckpt-00000000.index one_lingvo/train/ckpt-00000000.data-* one_lingvoc/train/
printf 'model_checkpoint_path: "ckpt-00000000"\n' >one_lingvoc/train/checkpoint
"$BIN/trainer" --model=$M --logdir="$WORK/one_lingvoc" --log_interval_steps=1 \
  --model_params_override="$ONE; $LC_TRAIN" >one_lingvoc.log 2>&1
"$PY" "$ROOT/scripts/lingvo_peer/event_scalars.py" --step=1 --tags=loss,log_pplx,grad_norm/all/loss,num_samples_in_batch \
  "$WORK"/one_lingvo/train/events.* >one_lingvo.scalars 2>/dev/null
lc_line=$(grep 'step: *1,' one_lingvoc.log)
say ""
say "One step from Lingvo's step-0 checkpoint, the same 20 pairs in one batch, dropout off:"
say ""
say "| | Lingvo | lingvoc |"
say "|---|---|---|"
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = (a - b) / a; exit !(a > 0 && d * d < 1e-10) }'; }
for k in loss log_pplx grad_norm/all; do
  lv_v=$(awk -v k="$k" '$2 == k || $2 == k "/loss" {print $3}' one_lingvo.scalars)
  lc_v=$(echo "$lc_line" | grep -o " $k:[0-9.e+-]*" | cut -d: -f2)
  say "| $k | $lv_v | $lc_v |"
  [ "$k" = grad_norm/all ] || close "$lv_v" "$lc_v" || { say "DISAGREE: one step's $k: Lingvo $lv_v, lingvoc $lc_v"; BAD=1; }
done
# Lingvo's grad_norm/all sums the squares of an embedding gradient's IndexedSlices values,
# one row per token occurrence (py_utils._TransformAndSum), not of the gradient itself;
# the norm of the gradient Lingvo applied is in its Adam slots: v = (1 - beta2) g^2.
lv_g=$("$PY" -c 'import sys, numpy as np, tensorflow as tf
r = tf.train.load_checkpoint(sys.argv[1])
print("%.8g" % np.sqrt(sum(float(np.sum(r.get_tensor(n))) for n in r.get_variable_to_shape_map() if n.endswith("/Adam_1")) / 0.02))' \
  one_lingvo/train/ckpt-00000001 2>/dev/null)
lc_g=$(echo "$lc_line" | grep -o " grad_norm/all:[0-9.e+-]*" | cut -d: -f2)
say "| the norm of the gradient applied (Lingvo: from its Adam slots, v = 0.02 g^2) | $lv_g | $lc_g |"
close "$lv_g" "$lc_g" || { say "DISAGREE: one step's gradient norm: Lingvo $lv_g, lingvoc $lc_g"; BAD=1; }
if "$PY" "$ROOT/scripts/lingvo_peer/compare_ckpts.py" one_lingvo/train/ckpt-00000001 one_lingvoc/train/ckpt-00000001 \
    --base=one_lingvo/train/ckpt-00000000 --rtol=1e-3 --exempt=/source_proj_b/ >one_step_weights.log 2>&1; then
  say "| weights' and Adam slots' change in the step | $(tail -1 one_step_weights.log) | |"
  say ""
  say "(the largest relative difference, in the 2-norm, of the others: $(grep -v EXEMPT one_step_weights.log | sed -n 's/.*, relative \([0-9.e+-]*\).*/\1/p' | sort -g | tail -1);"
  say "exempt: the attention key biases source_proj_b, whose true gradient is zero (a bias added to"
  say "every key shifts each query's logits by one constant, which the softmax cancels): each side's"
  say "is rounding noise of order 1e-9, and Adam's first update g / (sqrt(v) + 1e-9) makes noise a full step)"
else
  say "DISAGREE: the weights after one step: $(tail -1 one_step_weights.log)"; BAD=1
  grep OUTSIDE one_step_weights.log | while read -r line; do say "  $line"; done
fi

# 2. Checkpoints both ways: STEPS steps of each trainer (dropout on, as configured), then
#    both evalers and both decoders (beam search, 8 hyps, as configured) on each checkpoint.
OV="train.max_steps: $STEPS"
lingvo --model=$M --logdir="$WORK/tr_lingvo" --model_params_override="$OV; task.train.max_steps: $STEPS" >tr_lingvo.log 2>&1
"$BIN/trainer" --model=$M --logdir="$WORK/tr_lingvoc" --model_params_override="$OV; $LC_TRAIN" >tr_lingvoc.log 2>&1
CK=$(printf %08d "$STEPS")
lingvo_job() { # evaler|decoder CKPT DIR: Lingvo's evaler / decoder on CKPT alone, in a log dir of its own
  rm -rf "$3"; mkdir -p "$3/train"; cp "$2".index "$2".data-* "$3/train/"
  printf 'model_checkpoint_path: "%s"\n' "$(basename "$2")" >"$3/train/checkpoint"
  if [ "$1" = evaler ]; then
    lingvo --model=$M --logdir="$3" --job="evaler_once_test@$STEPS" >"$3.log" 2>&1
  else   # Lingvo 0.14 has no decoder_once job: decoder_test stops after the max_steps checkpoint
    lingvo --model=$M --logdir="$3" --job=decoder_test \
      --model_params_override="train.max_steps: $STEPS; task.train.max_steps: $STEPS" >"$3.log" 2>&1
  fi
}
say ""
say "Checkpoints both ways ($STEPS steps each; the 20 pairs as the test set, beam 8):"
say ""
say "| checkpoint written by | evaluated by | log_pplx | loss | next-step accuracy | corpus_bleu | decoder top-1 identical | all hyps identical |"
say "|---|---|---|---|---|---|---|---|"
for who in Lingvo lingvoc; do
  if [ $who = Lingvo ]; then ck=$WORK/tr_lingvo/train/ckpt-$CK; else ck=$WORK/tr_lingvoc/train/ckpt-$CK; fi
  lingvo_job evaler "$ck" "$WORK/ev_lingvo_of_$who"
  lingvo_job decoder "$ck" "$WORK/de_lingvo_of_$who"
  "$BIN/evaler" --model=$M --logdir="$WORK/ev_lingvoc_of_$who" --dataset=Test --once --checkpoint="$ck" \
    --model_params_override="$LC_TEST" >"ev_lingvoc_of_$who.log" 2>&1
  "$BIN/decoder" --model=$M --logdir="$WORK/de_lingvoc_of_$who" --dataset=Test --once --checkpoint="$ck" \
    --model_params_override="$LC_TEST" >"de_lingvoc_of_$who.log" 2>&1
  hyps_lingvo "de_lingvo_of_$who.log" >"hyps_lingvo_of_$who.tsv"
  hyps_lingvoc "de_lingvoc_of_$who/decoder_test/decoder_out_$(printf %09d "$STEPS")" >"hyps_lingvoc_of_$who.tsv"
  top1=$(join -t$'\t' <(awk -F'\t' '$2 == 0 {print $1 "\t" $4}' "hyps_lingvo_of_$who.tsv") \
    <(awk -F'\t' '$2 == 0 {print $1 "\t" $4}' "hyps_lingvoc_of_$who.tsv") | awk -F'\t' '$2 == $3' | wc -l)
  nsrc=$(awk -F'\t' '$2 == 0' "hyps_lingvoc_of_$who.tsv" | wc -l)
  allsame=$(cmp -s <(cut -f1,2,4 "hyps_lingvo_of_$who.tsv") <(cut -f1,2,4 "hyps_lingvoc_of_$who.tsv") && echo yes || echo no)
  lv_ev=ev_lingvo_of_$who.log lc_ev=ev_lingvoc_of_$who.log
  lv_sc=$(ls de_lingvo_of_$who/decoder_test/score-*.txt) lc_sc=$(ls de_lingvoc_of_$who/decoder_test/score-*.txt)
  for e in Lingvo lingvoc; do
    if [ $e = Lingvo ]; then ev=$lv_ev sc=$lv_sc; else ev=$lc_ev sc=$lc_sc; fi
    say "| $who | $e | $(file_metric "$ev" log_pplx) | $(file_metric "$ev" loss) | $(file_metric "$ev" fraction_of_correct_next_step_preds) | $(file_metric "$sc" corpus_bleu) | $top1/$nsrc | $allsame |"
  done
  for m in log_pplx loss; do
    awk -v a="$(file_metric "$lv_ev" $m)" -v b="$(file_metric "$lc_ev" $m)" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d * d < 1e-10) }' ||
      { say "DISAGREE: $who's checkpoint, $m: Lingvo's evaler $(file_metric "$lv_ev" $m), lingvoc's $(file_metric "$lc_ev" $m)"; BAD=1; }
  done
  awk -v a="$(file_metric "$lv_sc" corpus_bleu)" -v b="$(file_metric "$lc_sc" corpus_bleu)" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d * d < 1e-10) }' ||
    { say "DISAGREE: $who's checkpoint, corpus_bleu: Lingvo $(file_metric "$lv_sc" corpus_bleu), lingvoc $(file_metric "$lc_sc" corpus_bleu)"; BAD=1; }
  [ "$top1" = "$nsrc" ] && [ "$nsrc" -gt 0 ] || { say "DISAGREE: $who's checkpoint: top-1 hypotheses differ ($top1 of $nsrc the same)"; BAD=1; }
  paste "hyps_lingvo_of_$who.tsv" "hyps_lingvoc_of_$who.tsv" | awk -F'\t' '$3 != $7 { d = $3 - $7; if (d < 0) d = -d; if (d > m) m = d } END { printf "%g\n", m + 0 }' >"score_diff_$who"
done
say ""
say "(beam scores, where the hypotheses are the same: the largest difference $(sort -g score_diff_* | tail -1))"

# 3. tf.train.load_checkpoint on lingvoc's checkpoint: Lingvo's names, dtypes and shapes.
if "$PY" "$ROOT/scripts/lingvo_peer/ckpt_compat.py" --lingvoc="$WORK/tr_lingvoc/train/ckpt-$CK" \
    --lingvo="$WORK/tr_lingvo/train/ckpt-$CK" --resave="$WORK/tf_copy" >ckpt_compat.log 2>&1; then
  say ""
  say "- tf.train.load_checkpoint reads lingvoc's checkpoint: $(tail -2 ckpt_compat.log | head -1)"
else
  say "DISAGREE: ckpt_compat.py: $(tail -3 ckpt_compat.log)"; BAD=1
fi

# 4. Speed and memory: alternating runs, steps/s from each log's own timestamps between
#    step FIRST and the last (past start-up), peak RSS by /usr/bin/time. TinyTest on the 20
#    pairs; TransformerSmall on BIBLE's records when BIBLE is set.
race() { # MODEL DATA_DIR STEPS FIRST LCOV LABEL
  local m=$1 dd=$2 n=$3 first=$4 lcov=$5 tag=$6 r
  : >"$tag.lingvo.runs"; : >"$tag.lingvoc.runs"
  for r in $(seq "$RUNS"); do
    /usr/bin/time -f "%M" -o "rss_${tag}_lingvo_$r" env LINGVO_PEER_MT_DATA="$dd" "$PY" "$ROOT/scripts/lingvo_peer/run.py" \
      trainer --model="$m" --run_locally=cpu --mode=sync --logdir="$WORK/race_${tag}_lingvo_$r" \
      --model_params_override="train.max_steps: $n; task.train.max_steps: $n" \
      >"race_${tag}_lingvo_$r.log" 2>&1
    /usr/bin/time -f "%M" -o "rss_${tag}_lingvoc_$r" "$BIN/trainer" --model="$m" --logdir="$WORK/race_${tag}_lingvoc_$r" \
      --log_interval_steps=1 --model_params_override="$lcov; train.max_steps: $n" >"race_${tag}_lingvoc_$r.log" 2>&1
    echo "$(rate "race_${tag}_lingvo_$r.log" "$first" "$n") $(tail -1 "rss_${tag}_lingvo_$r")" >>"$tag.lingvo.runs"
    echo "$(rate "race_${tag}_lingvoc_$r.log" "$first" "$n") $(tail -1 "rss_${tag}_lingvoc_$r")" >>"$tag.lingvoc.runs"
  done
  local lv lc lvm lcm
  lv=$(cut -d' ' -f1 "$tag.lingvo.runs" | median) lc=$(cut -d' ' -f1 "$tag.lingvoc.runs" | median)
  lvm=$(cut -d' ' -f2 "$tag.lingvo.runs" | median) lcm=$(cut -d' ' -f2 "$tag.lingvoc.runs" | median)
  say "- $m training steps/s (median of $RUNS, steps $first-$n): Lingvo $lv [$(cut -d' ' -f1 "$tag.lingvo.runs" | spread)], lingvoc $lc [$(cut -d' ' -f1 "$tag.lingvoc.runs" | spread)]: $(awk -v a="$lc" -v b="$lv" 'BEGIN{printf "%.2fx", a / b}')"
  say "- $m peak RSS (median): Lingvo $((lvm / 1024)) MiB, lingvoc $((lcm / 1024)) MiB"
}
if [ "$RUNS" -gt 0 ]; then
  say ""
  race $M "$D" "$STEPS" 20 "$LC_TRAIN" tiny
  if [ -n "$BIBLE" ]; then
    race mt.bible_en_es.TransformerSmall "$BIBLE" "$SMALL_STEPS" 10 \
      "input.file_pattern: tfrecord:$BIBLE/train.tfrecord-00000-of-00001" small
  fi
fi
echo "report: $R" >&2
exit $BAD
