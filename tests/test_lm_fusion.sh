#!/usr/bin/env bash
# Shallow fusion (task.decoder.fusion, search/lm_fusion.h), a few seconds: mt.bible_en_es.TinyTest
# overfits a generated 20-pair corpus (as tests/test_mt_decode.sh) and two LMs of its target
# side (lm.bible.RnnLmSpanishTinyTest and TransformerLmSpanishTinyTest, the same 128-piece
# vocabulary) train on train.es. For each LM: bin/decoder with lm_weight 0 writes the same
# decoder_out and score values, byte for byte, as without fusion (also --decode_text); with
# lm_weight 0.5 and length_normalization 0, every top hyp that is the same as without fusion
# scores the model's score + 0.5 x the LM's log-probability of that hyp, as bin/decoder
# --score_text gives it. An LM of another vocabulary size, one of the same size but other
# pieces, a search whose </s> is not the LM's, and a missing LM checkpoint are exit 2 naming
# the problem; an lm_model that is no LM (LeNet5, an MT model) is exit 2 saying so; lm_checkpoint
# may name the LM's log directory; an lm_weight without an lm_model warns. Then RNMT
# (mt.bible_en_es.RNMTTinyTest) with the RNN LM: lm_weight 0 is bit-identical there too.
# Skips with one line when sentencepiece is not installed.
. "$(dirname "$0")/lib.sh"
mt_toy_model
LMDATA="input.file_pattern: \"text:$T/train.es\"; input.tokenizer.vocab_filepath: $T/wpm.voc"
for lm in RnnLmSpanishTinyTest TransformerLmSpanishTinyTest; do
  expect_exit 0 "trainer: 100 steps of lm.bible.$lm on train.es" "$LV_BIN/trainer" --model=lm.bible.$lm \
    --logdir="$T/$lm" --model_params_override="$LMDATA"
done
TOK="input.tokenizer.cls: WpmTokenizer; input.tokenizer.vocab_filepath: $T/wpm.voc; input.tokenizer.vocab_size: 128"
DEC="$DATA; $TOK; task.decoder.target_seq_len: 40; task.decoder.beam_search.num_hyps_per_beam: 4"
# fusion LM M: the overrides that fuse lm.bible.M (its checkpoint in $T/M) into the search.
fusion() {
  echo "task.decoder.fusion.lm_model: lm.bible.$1; task.decoder.fusion.lm_logdir: $T/$1"
  echo "; task.decoder.fusion.lm_params_override: \"input.tokenizer.vocab_filepath: $T/wpm.voc\""
}
# decode NAME MODEL LOGDIR OVERRIDES: bin/decoder --once on Train into $T/NAME.out (the
# decoder_out file) and $T/NAME.score (the score file less examples/sec).
decode() {
  rm -rf "$3/decoder_train"
  expect_exit 0 "decoder: $1" "$LV_BIN/decoder" --model="$2" --logdir="$3" --once --job=decoder_train \
    --model_params_override="$4"
  cp "$3"/decoder_train/decoder_out_* "$T/$1.out"
  grep -v '^examples/sec' "$3"/decoder_train/score-*.txt >"$T/$1.score"
}
# Top hyp and its score per example: "score<TAB>text".
tops() { sed -n 's/^hyp 0: score \([^:]*\): /\1\t/p' "$1"; }
decode plain $M "$T/run" "$DEC"
decode plain_ln0 $M "$T/run" "$DEC; task.decoder.beam_search.length_normalization: 0"
check "without fusion the model translates (>= 18 of 20 top hyps are the targets)" \
  test "$(tops "$T/plain.out" | cut -f2 | paste - "$T/train.es" | awk -F'\t' '$1 == $2' | wc -l)" -ge 18
for lm in RnnLmSpanishTinyTest TransformerLmSpanishTinyTest; do
  F=$(fusion $lm | tr -d '\n')
  decode w0_$lm $M "$T/run" "$DEC; $F; task.decoder.fusion.lm_weight: 0"
  check "$lm: the decoder logs the fusion" grep -q "shallow fusion: lm.bible.$lm" "$T/err"
  check "$lm: the fusion keys are not model params that drifted from the trainer's" \
    bash -c "! grep -q 'task.decoder.fusion.lm' '$T/err'"
  check "$lm, lm_weight 0: decoder_out byte-identical to no fusion" cmp "$T/plain.out" "$T/w0_$lm.out"
  check "$lm, lm_weight 0: the same scores" cmp "$T/plain.score" "$T/w0_$lm.score"
  decode w5_$lm $M "$T/run" "$DEC; $F; task.decoder.fusion.lm_weight: 0.5; task.decoder.beam_search.length_normalization: 0"
  # The LM's log-probability of each fused top hyp, as --score_text gives it.
  tops "$T/w5_$lm.out" | cut -f2 >"$T/hyps_$lm"
  expect_exit 0 "$lm: --score_text of the fused top hyps" "$LV_BIN/decoder" --model=lm.bible.$lm --logdir="$T/$lm" \
    --score_text="$T/hyps_$lm" --model_params_override="$LMDATA"
  cp "$T/out" "$T/lmscores_$lm"
  # fused score = model score + 0.5 * LM log-prob, for the hyps that are the model's own top hyps.
  tops "$T/plain_ln0.out" >"$T/plain_tops"
  tops "$T/w5_$lm.out" >"$T/w5_tops"
  res=$(paste "$T/plain_tops" "$T/w5_tops" <(head -20 "$T/lmscores_$lm") | awk -F'\t' '
    $2 == $4 { n++; want = $1 + 0.5 * $5; d = $3 - want; if (d < 0) d = -d
               if (d > 1e-3 + 1e-4 * (want < 0 ? -want : want)) { bad++; print "  " $2 ": fused " $3 ", model " $1 " + 0.5 x LM " $5 " = " want > "/dev/stderr" } }
    END { print n + 0, bad + 0 }')
  set -- $res
  check "$lm, lm_weight 0.5: fused score = model + 0.5 x LM log-prob for all $1 top hyps the fusion kept ($2 off)" \
    test "$1" -ge 10 -a "$2" -eq 0
  check "$lm: the LM's log-probs are not all 0 (the check above can fail)" \
    awk -F'\t' 'NR <= 20 && $1 < -0.01 { n++ } END { exit !(n >= 10) }' "$T/lmscores_$lm"
  # --decode_text goes through the same search.
  head -3 "$T/train.en" >"$T/src3"
  expect_exit 0 "$lm: --decode_text, no fusion" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --decode_text="$T/src3" \
    --model_params_override="$DEC"
  cp "$T/out" "$T/text_plain"
  expect_exit 0 "$lm: --decode_text, lm_weight 0" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
    --decode_text="$T/src3" --model_params_override="$DEC; $F; task.decoder.fusion.lm_weight: 0"
  check "$lm: --decode_text with lm_weight 0 gives the same lines" cmp "$T/text_plain" "$T/out"
done
# Vocabularies that differ: 76 ASCII classes, and 128 pieces learned on other text.
F=$(fusion RnnLmSpanishTinyTest | tr -d '\n')
expect_exit 0 "trainer: lm.bible.RnnLmTinyTest (76 ASCII classes), 5 steps" "$LV_BIN/trainer" \
  --model=lm.bible.RnnLmTinyTest --logdir="$T/ascii" \
  --model_params_override="input.file_pattern: \"text:$T/train.es\"; train.max_steps: 5"
expect_exit 2 "decoder fusing an LM of 76 classes into a 128-piece model" "$LV_BIN/decoder" --model=$M \
  --logdir="$T/run" --once --job=decoder_train --model_params_override="$DEC; task.decoder.fusion.lm_model: \
lm.bible.RnnLmTinyTest; task.decoder.fusion.lm_logdir: $T/ascii; task.decoder.fusion.lm_weight: 0.3"
err_has "the LM lm.bible.RnnLmTinyTest@"
err_has "has 76 classes"
err_has "decoder has 128"
mkdir -p "$T/other"
gen_mt_pairs 11 20 "$T/other"
expect_exit 0 "build_wpm_vocab.sh (128 pieces of English only)" \
  sh "$LV_ROOT/scripts/build_wpm_vocab.sh" --input="$T/other/train.en" --vocab_size=128 --out="$T/other.voc"
expect_exit 2 "decoder fusing an LM whose 128 pieces are other pieces" "$LV_BIN/decoder" --model=$M \
  --logdir="$T/run" --once --job=decoder_train --model_params_override="$DEC; $F; task.decoder.fusion.lm_weight: 0.3; \
task.decoder.fusion.lm_params_override: \"input.tokenizer.vocab_filepath: $T/other.voc\""
err_has "in the decoder's input.tokenizer but"
err_has "must be the same vocabulary"
expect_exit 2 "decoder fusing an LM whose </s> is another id" "$LV_BIN/decoder" --model=$M \
  --logdir="$T/run" --once --job=decoder_train --model_params_override="$DEC; $F; task.decoder.fusion.lm_weight: 0.3; \
task.decoder.fusion.lm_params_override: \"input.tokenizer.vocab_filepath: $T/wpm.voc; input.tokenizer.target_eos_id: 5\""
# (the word-piece tokenizer itself refuses an </s> its vocabulary puts elsewhere, before the
# fusion's own <s>/</s> comparison)
err_has "the LM's input.tokenizer: tokenizer.target_eos_id: is 5"
expect_exit 2 "decoder whose search ends at another id than the LM's </s>" "$LV_BIN/decoder" --model=$M \
  --logdir="$T/run" --once --job=decoder_train --model_params_override="$DEC; $F; task.decoder.fusion.lm_weight: 0.3; \
task.decoder.target_eos_id: 5"
err_has "ends at target_eos_id 5, but the LM's input.tokenizer has <s> 1 and </s> 2"
expect_exit 0 "decoder with lm_checkpoint naming the LM's log directory" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
  --once --job=decoder_train --model_params_override="$DEC; task.decoder.fusion.lm_model: lm.bible.RnnLmSpanishTinyTest; \
task.decoder.fusion.lm_checkpoint: $T/RnnLmSpanishTinyTest; task.decoder.fusion.lm_weight: 0.3; \
task.decoder.fusion.lm_params_override: \"input.tokenizer.vocab_filepath: $T/wpm.voc\""
err_has "shallow fusion: lm.bible.RnnLmSpanishTinyTest ($T/RnnLmSpanishTinyTest/train/ckpt-"
expect_exit 0 "decoder with an lm_weight but no lm_model" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
  --once --job=decoder_train --model_params_override="$DEC; task.decoder.fusion.lm_weight: 0.3"
err_has "task.decoder.fusion.lm_model is empty: decoding without shallow fusion"
expect_exit 2 "decoder with an LM logdir that has no checkpoint" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
  --once --job=decoder_train --model_params_override="$DEC; task.decoder.fusion.lm_model: lm.bible.RnnLmSpanishTinyTest; \
task.decoder.fusion.lm_logdir: $T/nothing"
err_has "$T/nothing/train does not exist"
# An lm_model that is no language model is said to be one, before its checkpoint is looked for.
for notlm in image.mnist.LeNet5 mt.bible_en_es.TinyTest; do
  expect_exit 2 "decoder fusing $notlm (not a language model)" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
    --once --job=decoder_train --model_params_override="$DEC; task.decoder.fusion.lm_model: $notlm; \
task.decoder.fusion.lm_logdir: $T/run"
  err_has "task.decoder.fusion.lm_model: $notlm is not a language model (its task.cls is "
done
# A fused model exported to one model file (bin/export stores the LM's model file inside,
# as task.decoder.fusion.lm_model_file's asset) decodes as the experiment + both logdirs do;
# an LM model file named by lm_model_file does too.
F=$(fusion RnnLmSpanishTinyTest | tr -d '\n')
W="task.decoder.fusion.lm_weight: 0.5"
expect_exit 0 "decoder --decode_text, fused at 0.5 from the two logdirs" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
  --decode_text="$T/src3" --model_params_override="$DEC; $F; $W"
cp "$T/out" "$T/text_fused"
check "fusion at 0.5 changes the --decode_text lines (the comparisons below can fail)" \
  bash -c "! cmp -s '$T/text_plain' '$T/text_fused'"
mkdir -p "$T/tmpx"
expect_exit 0 "export of the fused model" env TMPDIR="$T/tmpx" "$LV_BIN/export" --model=$M --logdir="$T/run" \
  --out="$T/fused.lvm" --model_params_override="$DEC; $F; $W"
err_has "export: the fusion LM lm.bible.RnnLmSpanishTinyTest"
check "export leaves no private directory in TMPDIR" test -z "$(ls -A "$T/tmpx")"
mkdir -p "$T/empty_exp"
expect_exit 0 "decoder --model_file of the fused model (no experiments, no logdirs)" env LINGVOC_EXPERIMENTS="$T/empty_exp" \
  "$LV_BIN/decoder" --model_file="$T/fused.lvm" --decode_text="$T/src3"
check "the fused model file decodes the same lines as the two logdirs" cmp "$T/text_fused" "$T/out"
err_has "shallow fusion: lm.bible.RnnLmSpanishTinyTest"
expect_exit 0 "export of the fused model, --quantize=int8" "$LV_BIN/export" --model=$M --logdir="$T/run" \
  --out="$T/fused8.lvm" --quantize=int8 --model_params_override="$DEC; $F; $W"
expect_exit 0 "decoder --model_file of the int8 fused model" "$LV_BIN/decoder" --model_file="$T/fused8.lvm" \
  --decode_text="$T/src3"
check "the int8 fused model's MT model and its LM both run int8 matmuls" \
  test "$(grep -c 'int8 weight matrices, their matmuls on' "$T/err")" -ge 2
expect_exit 0 "export of the LM alone" "$LV_BIN/export" --model=lm.bible.RnnLmSpanishTinyTest --logdir="$T/RnnLmSpanishTinyTest" \
  --out="$T/lm_es.lvm" --model_params_override="$LMDATA"
LMF="task.decoder.fusion.lm_model_file: $T/lm_es.lvm; $W"
expect_exit 0 "decoder fusing lm_model_file" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --decode_text="$T/src3" \
  --model_params_override="$DEC; $LMF"
check "lm_model_file decodes the same lines as lm_model + lm_logdir" cmp "$T/text_fused" "$T/out"
expect_exit 2 "decoder with lm_model_file and lm_logdir" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
  --decode_text="$T/src3" --model_params_override="$DEC; $LMF; task.decoder.fusion.lm_logdir: $T/RnnLmSpanishTinyTest"
err_has "lm_model_file ($T/lm_es.lvm) and lm_logdir/lm_checkpoint both set"
head -c 1000 "$T/lm_es.lvm" >"$T/cut.lvm"
expect_exit 2 "decoder with a truncated lm_model_file" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
  --decode_text="$T/src3" --model_params_override="$DEC; task.decoder.fusion.lm_model_file: $T/cut.lvm; $W"
err_has "task.decoder.fusion.lm_model_file: "
err_has "$T/cut.lvm"
expect_exit 2 "decoder fusing a model file that is no language model" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
  --decode_text="$T/src3" --model_params_override="$DEC; task.decoder.fusion.lm_model_file: $T/fused.lvm; $W"
err_has "is not a language model"
# RNMT: the fused RNN LM with weight 0 changes nothing either.
R=mt.bible_en_es.RNMTTinyTest
ROV="$DATA; train.max_steps: 150; task.encoder.dropout_prob: 0; task.decoder.dropout_prob: 0"
expect_exit 0 "trainer: 150 steps of $R" "$LV_BIN/trainer" --model=$R --logdir="$T/rnmt" --model_params_override="$ROV"
decode rnmt_plain $R "$T/rnmt" "$DEC"
decode rnmt_w0 $R "$T/rnmt" "$DEC; $F; task.decoder.fusion.lm_weight: 0"
check "RNMT, lm_weight 0: decoder_out byte-identical to no fusion" cmp "$T/rnmt_plain.out" "$T/rnmt_w0.out"
decode rnmt_w1 $R "$T/rnmt" "$DEC; $F; task.decoder.fusion.lm_weight: 1"
check "RNMT, lm_weight 1: the scores change" bash -c "! cmp -s '$T/rnmt_plain.out' '$T/rnmt_w1.out'"
finish
