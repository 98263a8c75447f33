#!/usr/bin/env bash
# bin/decoder on mt.model.TransformerModel and mt.model.RNMTModel (a few seconds): mt.bible_en_es.TinyTest
# (dropout and label smoothing off) overfits a generated 20-pair corpus in 300 steps;
# bin/decoder --once then reproduces the training targets (corpus BLEU 1 / sacrebleu 100
# on the Train data) and writes decoder_out / score / params files; --decode_text from
# stdin translates lines, gives empty lines for an empty line and invalid UTF-8, and
# truncates a 10,000-word line; another model's checkpoint is exit 2 naming variables;
# coverage_penalty > 0 (the Transformer gives no attention probabilities) and a missing
# tokenizer are clear errors. Then the same for mt.bible_en_es.RNMTTinyTest (coverage
# penalty 0.2) and each model's checkpoint read as the other's. Skips with one line when
# sentencepiece is not installed.
. "$(dirname "$0")/lib.sh"
mt_toy_model
TOK="input.tokenizer.cls: WpmTokenizer; input.tokenizer.vocab_filepath: $T/wpm.voc; input.tokenizer.vocab_size: 128"
DEC="task.decoder.target_seq_len: 40; task.decoder.beam_search.num_hyps_per_beam: 4; $TOK"
expect_exit 2 "decoder without input.tokenizer (the Train dataset has none)" "$LV_BIN/decoder" --model=$M \
  --logdir="$T/run" --once --dataset=Train --model_params_override="$DATA"
err_has "input.tokenizer is None"
# The coverage penalty reads the decoder's encoder attention (a copy of the logdir: the
# runs below count what this one would add).
cp -r "$T/run" "$T/runcov"
expect_exit 0 "decoder with coverage_penalty 0.2" "$LV_BIN/decoder" --model=$M --logdir="$T/runcov" --once \
  --model_params_override="$DATA; $DEC; task.decoder.beam_search.coverage_penalty: 0.2" --job=decoder_train
check "coverage-penalized decode still translates (>= 90: $(grep sacrebleu "$T/runcov/decoder_train/score-00000300.txt"))" \
  awk '/^sacrebleu: / { exit !($2 >= 90) }' "$T/runcov/decoder_train/score-00000300.txt"
expect_exit 2 "decoder --job=evaler_train" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --job=evaler_train \
  --model_params_override="$DATA; $DEC"
err_has "run bin/evaler"
expect_exit 0 "decoder --once --job=decoder_train" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --once \
  --job=decoder_train --model_params_override="$DATA; $DEC"
D=$T/run/decoder_train
S=$D/score-00000300.txt
check "score file written" test -f "$S"
for tag in corpus_bleu sacrebleu num_samples_in_batch examples/sec; do
  check "score has $tag" grep -q "^$tag: " "$S"
done
check "corpus_bleu >= 0.9 ($(grep corpus_bleu "$S"))" awk '/^corpus_bleu: / { exit !($2 >= 0.9) }' "$S"
check "sacrebleu >= 90 ($(grep sacrebleu "$S"))" awk '/^sacrebleu: / { exit !($2 >= 90) }' "$S"
check "decoder_out_000000300 written" test -f "$D/decoder_out_000000300"
# Sentences of a decoder_out file whose top hyp is the reference.
exact_top() { awk '/^ref: / { r = substr($0, 6) } /^hyp 0: / { sub(/^hyp 0: score [^:]*: /, ""); n += ($0 == r) } END { print n + 0 }' "$1"; }
exact=$(exact_top "$D/decoder_out_000000300")
check "decoder_out: top hyp == reference for >= 18 of 20 ($exact)" test "$exact" -ge 18
check "decoder_out has the sources" grep -qF "src: $(head -1 "$T/train.en")" "$D/decoder_out_000000300"
check "params.txt has cluster.job decoder_train" grep -q "^cluster.job : 'decoder_train'" "$D/params.txt"
check "processed_ckpts.txt lists the checkpoint" grep -q "ckpt-00000300" "$D/processed_ckpts.txt"
check "progress line with examples/sec" grep -q "examples/sec" "$T/err"
# target_seq_len 2000 makes the memory budget decode one sentence per search: the same top
# hyps (the lower ones may differ: a batch's search runs until all its beams are done).
top() { sed -n 's/^hyp 0: score [^:]*: //p' "$1"; }
top "$D/decoder_out_000000300" >"$T/top_batched"
expect_exit 0 "decoder --once, one sentence per search" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --once \
  --job=decoder_train --model_params_override="$DATA; $DEC; task.decoder.target_seq_len: 2000"
top "$D/decoder_out_000000300" >"$T/top_single"
check "top hyps the same as batched" cmp -s "$T/top_batched" "$T/top_single"
check "20 top hyps" test "$(wc -l <"$T/top_single")" -eq 20
check "score has total_samples 20" grep -q '^total_samples: 20$' "$S"
# eval.decoder_samples_per_summary (Lingvo's DecodeCheckpoint): batches until that many
# examples, here the first batch of 16 (bucket_batch_limit) of the 20.
expect_exit 0 "decoder --once, decoder_samples_per_summary 5" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --once \
  --job=decoder_train --model_params_override="$DATA; $DEC; task.eval.decoder_samples_per_summary: 5"
check "one batch decoded (16 top hyps)" test "$(top "$D/decoder_out_000000300" | wc -l)" -eq 16
check "score has total_samples 16" grep -q '^total_samples: 16$' "$S"
# Polling (no --once) on Dev: decodes the checkpoint at the trainer's max_steps, then stops.
expect_exit 0 "decoder polling --dataset=Dev" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --dataset=Dev \
  --timeout_secs=5 --model_params_override="$DATA; $DEC"
check "decoder_dev/score-00000300.txt written" test -f "$T/run/decoder_dev/score-00000300.txt"
expect_exit 0 "decoder polling again: nothing new" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --dataset=Dev \
  --timeout_secs=5 --model_params_override="$DATA; $DEC"
check "processed_ckpts.txt lists it once" test "$(grep -c ckpt-00000300 "$T/run/decoder_dev/processed_ckpts.txt")" -eq 1
# --decode_text from stdin: 3 training sources, an empty line, invalid UTF-8, 10,000 words.
{
  head -3 "$T/train.en"
  echo
  printf 'veto \xff\xfe ripa.\n'
  yes 'veto ripa' | head -5000 | tr '\n' ' '; echo
  tail -1 "$T/train.en"
} >"$T/in.txt"
"$LV_BIN/decoder" --model=$M --logdir="$T/run" --decode_text=- --model_params_override="$DEC" \
  <"$T/in.txt" >"$T/out.txt" 2>"$T/err"
check "decode_text exits 0 ($?)" test $? -eq 0
check "decode_text: one output line per input line" test "$(wc -l <"$T/out.txt")" -eq 7
{ head -3 "$T/train.es"; tail -1 "$T/train.es"; } >"$T/want.txt"
{ head -3 "$T/out.txt"; tail -1 "$T/out.txt"; } >"$T/got.txt"
check "decode_text translates the training sources" cmp -s "$T/want.txt" "$T/got.txt"
check "empty line -> empty line" test -z "$(sed -n 4p "$T/out.txt")"
check "invalid UTF-8 -> empty line" test -z "$(sed -n 5p "$T/out.txt")"
err_has "line 5: invalid UTF-8"
err_has "line 6: "
err_has "truncated"
# Another model's checkpoint (two decoder layers instead of one).
expect_exit 2 "another model's checkpoint" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --once \
  --model_params_override="$DATA; $DEC; task.decoder.num_trans_layers: 2"
err_has "does not match the model"
err_has "transformer/dec/trans_layer_1/"
expect_exit 2 "decode_text with another model's checkpoint" "$LV_BIN/decoder" --model=$M --logdir="$T/run" \
  --decode_text="$T/in.txt" --model_params_override="$DEC; task.decoder.num_trans_layers: 2"
err_has "transformer/dec/trans_layer_1/"
# mt.model.RNMTModel through the same decoder (mt.bible_en_es.RNMTTinyTest: bi-LSTM encoder,
# LSTM decoder with multi-headed additive attention; MTDecoderV1's coverage penalty 0.2).
R=mt.bible_en_es.RNMTTinyTest
ROV="$DATA; train.max_steps: 300; task.encoder.dropout_prob: 0; task.decoder.dropout_prob: 0"
ROV="$ROV; task.decoder.attention.atten_dropout_prob: 0; task.decoder.label_smoothing.uncertainty: 0"
expect_exit 0 "trainer: 300 steps of $R on 20 pairs" "$LV_BIN/trainer" --model=$R --logdir="$T/rnmt" \
  --model_params_override="$ROV"
expect_exit 0 "decoder --once on the RNMT checkpoint" "$LV_BIN/decoder" --model=$R --logdir="$T/rnmt" --once \
  --job=decoder_train --model_params_override="$DATA; $DEC"
RD=$T/rnmt/decoder_train
check "RNMT: coverage_penalty 0.2" grep -q "^task.decoder.beam_search.coverage_penalty : 0.2" "$RD/params.txt"
check "RNMT: corpus_bleu >= 0.9 ($(grep corpus_bleu "$RD/score-00000300.txt"))" \
  awk '/^corpus_bleu: / { exit !($2 >= 0.9) }' "$RD/score-00000300.txt"
exact=$(exact_top "$RD/decoder_out_000000300")
check "RNMT decoder_out: top hyp == reference for >= 18 of 20 ($exact)" test "$exact" -ge 18
"$LV_BIN/decoder" --model=$R --logdir="$T/rnmt" --decode_text=- --model_params_override="$DEC" \
  <"$T/in.txt" >"$T/out.txt" 2>"$T/err"
check "RNMT decode_text exits 0 ($?)" test $? -eq 0
check "RNMT decode_text: one output line per input line" test "$(wc -l <"$T/out.txt")" -eq 7
{ head -3 "$T/out.txt"; tail -1 "$T/out.txt"; } >"$T/got.txt"
check "RNMT decode_text translates the training sources" cmp -s "$T/want.txt" "$T/got.txt"
check "RNMT: empty line -> empty line" test -z "$(sed -n 4p "$T/out.txt")"
err_has "line 5: invalid UTF-8"
err_has "truncated"
# Each model's checkpoint read as the other: exit 2 naming the variables.
expect_exit 2 "RNMT decoder on the Transformer's checkpoint" "$LV_BIN/decoder" --model=$R --logdir="$T/run" --once \
  --model_params_override="$DATA; $DEC"
err_has "does not match the model"
err_has "rnmt/enc/L0_rnn_fwd/wm/var"
expect_exit 2 "Transformer decode_text on the RNMT checkpoint" "$LV_BIN/decoder" --model=$M --logdir="$T/rnmt" \
  --decode_text="$T/in.txt" --model_params_override="$DEC"
err_has "transformer/dec/token_emb/var_0/var"
expect_exit 2 "RNMT with a third decoder layer on its checkpoint" "$LV_BIN/decoder" --model=$R --logdir="$T/rnmt" \
  --once --model_params_override="$DATA; $DEC; task.decoder.rnn_layers: 3"
err_has "rnmt/dec/rnn2/wm/var"
finish
