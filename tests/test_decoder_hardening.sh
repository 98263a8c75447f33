#!/usr/bin/env bash
# bin/decoder against hostile use, on the golden fixtures' Transformer checkpoint
# (tests/data/decode_golden): a task that does not decode (or, for --decode_text, does
# not translate: a tiny LM) is exit 2 saying so; a line
# without end (300 MB of one byte) is cut at 1 MiB in bounded memory; a full output disk
# is an error, not a silent exit 0; a directory as --decode_text, a logdir without train/,
# a bad input.source_max_length and a tokenizer vocabulary larger than the model's are
# exit 2 naming what is wrong.
. "$(dirname "$0")/lib.sh"
G=$LV_ROOT/tests/data/decode_golden
. "$G/models.sh"
M=$MODEL_transformer
CK=$G/transformer/ckpt-00000020
OV=$OV_transformer
printf 'ka ri su ne.\n' >"$T/one.txt"

expect_exit 2 "decoder --once on a task that does not decode" "$LV_BIN/decoder" --model=image.mnist.LeNet5Fashion \
  --logdir="$T/lenet" --once
err_has "classifier.ModelV1 has no decoder job"
# --decode_text is the library's lv_translate: the model loads (a checkpoint first), then
# a model that does not translate is refused before any line is read.
gen_lm_text "$T"
LMOV="input.file_pattern: \"text:$T/train.txt\"; train.max_steps: 2"
expect_exit 0 "trainer: 2 steps of a tiny LM" "$LV_BIN/trainer" --model=lm.bible.RnnLmTinyTest --logdir="$T/lm" \
  --model_params_override="$LMOV"
expect_exit 2 "decoder --decode_text on a model that does not translate" "$LV_BIN/decoder" \
  --model=lm.bible.RnnLmTinyTest --logdir="$T/lm" --decode_text=- --model_params_override="$LMOV"
err_has "--decode_text: lv_translate: model lm.bible.RnnLmTinyTest (task lm.model.LanguageModel) does not take it; it takes lv_score_text, lv_sample_text"

# 300 MB without a newline, under a 2 GB address-space limit: reading the whole line and
# tokenizing it (1.2 GB of ids alone) does not fit, a line cut at 1 MiB does with room to
# spare (the limit must leave room for OpenBLAS's and the threads' mappings: at 400 MB
# OpenBLAS's allocator spun for ever). A sanitizer build, which reserves terabytes of
# shadow memory, gets ASan's RSS limit instead. A hang shows up as the timeout's exit.
if (ulimit -v 2000000 && "$LV_BIN/decoder" --help >/dev/null 2>&1) 2>/dev/null; then
  limit() { ulimit -v 2000000; }
else
  limit() { export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=1500"; }
fi
(
  limit
  head -c 300000000 /dev/zero | tr '\0' a | timeout -k 5 120 "$LV_BIN/decoder" --model=$M --logdir="$T/log" \
    --decode_text=- --checkpoint="$CK" --model_params_override="$OV" >"$T/long.out" 2>"$T/err"
)
check "a 300 MB line decodes in bounded memory ($(tail -1 "$T/err"))" test "$(wc -l <"$T/long.out")" -eq 1
err_has "longer than 1048576 bytes"

expect_exit 1 "decode_text to a full disk (/dev/full)" sh -c "\"$LV_BIN/decoder\" --model=$M --logdir=\"$T/log\" \
  --decode_text=\"$T/one.txt\" --checkpoint=\"$CK\" --model_params_override=\"$OV\" >/dev/full"
err_has "writing the output of line 1 failed"

mkdir -p "$T/adir"
expect_exit 2 "--decode_text=<a directory>" "$LV_BIN/decoder" --model=$M --logdir="$T/log" --decode_text="$T/adir" \
  --checkpoint="$CK" --model_params_override="$OV"
err_has "is a directory"

expect_exit 2 "--decode_text on a logdir without train/" "$LV_BIN/decoder" --model=$M --logdir="$T/empty" \
  --decode_text="$T/one.txt" --model_params_override="$OV"
err_has "$T/empty/train does not exist"

for v in 0 -1 1; do
  expect_exit 2 "input.source_max_length: $v" "$LV_BIN/decoder" --model=$M --logdir="$T/log" \
    --decode_text="$T/one.txt" --checkpoint="$CK" --model_params_override="$OV; input.source_max_length: $v"
  err_has "input.source_max_length = $v"
done

expect_exit 2 "a tokenizer vocabulary larger than the model's" "$LV_BIN/decoder" --model=$M --logdir="$T/log" \
  --decode_text="$T/one.txt" --checkpoint="$CK" --model_params_override="$OV; input.tokenizer.vocab_size: 200"
err_has "input.tokenizer.vocab_size = 200 is larger than the model's vocabulary (128"
# A vocabulary file with more pieces than the model's vocabulary (its vocab_size left at 128).
{ cat "$G/mt/wpm.voc"; for i in $(seq 100); do echo "▁extra$i"; done; } >"$T/big.voc"
expect_exit 2 "a vocabulary file with more ids than the model's" "$LV_BIN/decoder" --model=$M --logdir="$T/log" \
  --decode_text="$T/one.txt" --checkpoint="$CK" \
  --model_params_override="$OV; input.tokenizer.vocab_filepath: $T/big.voc"
err_has "input.tokenizer's vocabulary has $(( $(wc -l <"$G/mt/wpm.voc") + 100 )) ids, more than the model's vocabulary (128"
finish
