#!/usr/bin/env bash
# The data tools and the text inputs against hostile files (no data needed, seconds):
# non-regular files (a FIFO would block, /dev/zero would grow memory without end) are
# refused with exit 2 "... is a FIFO; expected a regular file" wherever a user names a
# file: tokenizer vocabularies and models, spm_encode_file's input, sacrebleu_score's and
# punct_score's references, text: and TFRecord training inputs, print_tf_records' input;
# a compressed file given as text: is refused; an output that is one of the inputs is
# refused before anything is written; a full disk on stdout (/dev/full) is an error
# (exit 1) in spm_encode_file, print_tf_records, ckpt_inspect and trainer
# --mode=inspect_model; an empty test set is not scored; a line longer than memory
# allows is an error, not the end of the file. Every command runs under a timeout: a
# hang fails the check instead of the suite.
. "$(dirname "$0")/lib.sh"
TO="timeout 30"
# A regression that reads /dev/zero must not take the machine's memory: a 4 GB cap on
# address space where the build runs under one (a sanitizer build reserves terabytes:
# there ASan's RSS limit stands in).
if (ulimit -v 4000000 && "$LV_BIN/trainer" --model=image.mnist.LeNet5 --logdir="$T/cap" --mode=inspect_model \
    >/dev/null 2>&1) 2>/dev/null; then
  ulimit -v 4000000
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=4000"
mkfifo "$T/fifo"
# A WPM vocabulary of 128 pieces: the letters and fillers.
{ printf '<unk>\n<s>\n</s>\n\xe2\x96\x81\n'; for c in a b c d e f g h i j k l m n o p q r s t u v w x y z; do echo "$c"; done
  for i in $(seq 98); do echo "x$i"; done; } >"$T/wpm.voc"
# full CMD...: runs CMD with stdout on /dev/full.
full() { "$@" >/dev/full; }

# ---- spm_encode_file (VocabFileTokenizer: no SentencePiece model needed) ----
E=$LV_BIN/spm_encode_file
printf '<unk>\t0\n<s>\t1\n</s>\t2\nhello\t3\nworld\t4\n' >"$T/vocab"
printf 'hello world\nworld hello hello\n' >"$T/in.txt"
V="--cls=VocabFileTokenizer --vocab=$T/vocab"
expect_exit 0 "spm_encode_file with a vocab file" $TO "$E" $V --input="$T/in.txt"
check "its ids" [ "$(tr '\n' '|' <"$T/out")" = "3 4|4 3 3|" ]
expect_exit 2 "vocabulary is a FIFO" $TO "$E" --cls=VocabFileTokenizer --vocab="$T/fifo" --input="$T/in.txt"
err_has "$T/fifo is a FIFO; expected a regular file"
expect_exit 2 "vocabulary is /dev/zero" $TO "$E" --cls=VocabFileTokenizer --vocab=/dev/zero --input="$T/in.txt"
err_has "/dev/zero is a character device; expected a regular file"
expect_exit 2 "--model is a FIFO" $TO "$E" --model="$T/fifo" --input="$T/in.txt"
err_has "$T/fifo is a FIFO"
expect_exit 2 "--input is a FIFO" $TO "$E" $V --input="$T/fifo"
err_has "--input $T/fifo is a FIFO"
expect_exit 2 "--input is /dev/zero" $TO "$E" $V --input=/dev/zero
err_has "--input /dev/zero is a character device"
expect_exit 2 "--input is a directory" $TO "$E" $V --input="$T"
err_has "is a directory"
cp "$T/in.txt" "$T/in2.txt"
expect_exit 2 "--output over --input" $TO "$E" $V --input="$T/in2.txt" --output="$T/in2.txt"
err_has "--output=$T/in2.txt is the --input file"
ln -s in2.txt "$T/link.txt"
expect_exit 2 "--output over --input through a symlink" $TO "$E" $V --input="$T/in2.txt" --output="$T/link.txt"
cp "$T/vocab" "$T/vocab2"
expect_exit 2 "--output over --vocab" $TO "$E" --cls=VocabFileTokenizer --vocab="$T/vocab2" --input="$T/in.txt" \
  --output="$T/vocab2"
err_has "is the --vocab file"
check "the input is left intact" cmp -s "$T/in.txt" "$T/in2.txt"
check "the vocabulary is left intact" cmp -s "$T/vocab" "$T/vocab2"
expect_exit 1 "spm_encode_file to a full disk (stdout)" $TO bash -c 'exec "$@" >/dev/full' _ "$E" $V --input="$T/in.txt"
err_has "stdout: write error: No space left on device"
expect_exit 1 "spm_encode_file to a full disk (--output)" $TO "$E" $V --input="$T/in.txt" --output=/dev/full
err_has "/dev/full: write error"

# ---- sacrebleu_score, punct_score ----
SB=$LV_BIN/sacrebleu_score
PS=$LV_BIN/punct_score
: >"$T/empty_hyp"
: >"$T/empty_ref"
expect_exit 2 "sacrebleu_score on an empty test set" $TO "$SB" --ref="$T/empty_ref" --hyp="$T/empty_hyp"
err_has "$T/empty_hyp and --ref=$T/empty_ref contain no sentence"
check "no score printed" [ ! -s "$T/out" ]
printf 'Hello, world.\n' >"$T/ref1"
expect_exit 2 "sacrebleu_score --ref is a FIFO" $TO "$SB" --ref="$T/fifo" --hyp="$T/ref1"
err_has "--ref $T/fifo is a FIFO; expected a regular file"
expect_exit 2 "sacrebleu_score --ref is /dev/zero" $TO "$SB" --ref=/dev/zero --hyp="$T/ref1"
err_has "--ref /dev/zero is a character device"
expect_exit 2 "sacrebleu_score --hyp is a FIFO" $TO "$SB" --ref="$T/ref1" --hyp="$T/fifo"
expect_exit 2 "punct_score --ref is a FIFO" $TO "$PS" --ref="$T/fifo" --hyp="$T/ref1"
err_has "--ref $T/fifo is a FIFO"
expect_exit 2 "punct_score --ref is /dev/zero" $TO "$PS" --ref=/dev/zero --baseline
err_has "--ref /dev/zero is a character device"
# A third line longer than the memory limit allows: getline fails with ENOMEM, which
# is not the end of the file (both files alike, so line counts cannot give it away).
{ printf 'One line.\nTwo lines.\n'; head -c 80000000 /dev/zero | tr '\0' a; printf '\n'; } >"$T/big.txt"
if (ulimit -v 100000 && "$SB" --ref="$T/ref1" --hyp="$T/ref1" >/dev/null 2>&1) 2>/dev/null; then
  expect_exit 1 "sacrebleu_score: a line past the memory limit" \
    bash -c 'ulimit -v 100000 && exec "$@"' _ $TO "$SB" --ref="$T/big.txt" --hyp="$T/big.txt"
  err_has "$T/big.txt: cannot read line 3: Cannot allocate memory"
  expect_exit 1 "punct_score: a line past the memory limit" \
    bash -c 'ulimit -v 100000 && exec "$@"' _ $TO "$PS" --ref="$T/big.txt" --hyp="$T/big.txt"
  err_has "$T/big.txt: cannot read line 3"
  expect_exit 1 "spm_encode_file: a line past the memory limit" \
    bash -c 'ulimit -v 100000 && exec "$@"' _ $TO "$E" $V --input="$T/big.txt"
  err_has "$T/big.txt: cannot read line 3: Cannot allocate memory"
  expect_exit 1 "wpm_encode_file: a line past the memory limit" \
    bash -c 'ulimit -v 100000 && exec "$@"' _ $TO "$LV_BIN/wpm_encode_file" --wpm_filepath="$T/wpm.voc" \
    --source_filepaths="$T/big.txt" --target_filepaths="$T/big.txt" --output_filepath="$T/bigrec" --shard_id=0
  err_has "$T/big.txt: cannot read line 3: Cannot allocate memory"
  check "no records written" [ ! -e "$T/bigrec" ]
else
  skip_part "sacrebleu_score does not start under ulimit -v 100000 (a sanitizer build reserves more)"
fi
rm -f "$T/big.txt"

# ---- print_tf_records, ckpt_inspect ----
R=$LV_ROOT/tests/data/lingvo_mt/wmt14_ende_wpm_32k_test.tfrecord
P=$LV_BIN/print_tf_records
expect_exit 0 "print_tf_records" $TO "$P" --input_filepattern="$R" --print_only_n=2
expect_exit 2 "print_tf_records on a FIFO" $TO "$P" --input_filepattern="$T/fifo"
err_has "$T/fifo is a FIFO; expected a regular file"
expect_exit 1 "print_tf_records to a full disk" $TO bash -c 'exec "$@" >/dev/full' _ "$P" --input_filepattern="$R"
err_has "stdout: write error"
expect_exit 1 "print_tf_records --count_only to a full disk" $TO bash -c 'exec "$@" >/dev/full' _ "$P" \
  --input_filepattern="$R" --count_only
C=$LV_ROOT/tests/data/tf_checkpoints/saved_model_half_plus_two_cpu/variables
expect_exit 0 "ckpt_inspect" $TO "$LV_BIN/ckpt_inspect" --file_name="$C"
expect_exit 1 "ckpt_inspect to a full disk" $TO bash -c 'exec "$@" >/dev/full' _ "$LV_BIN/ckpt_inspect" --file_name="$C"
err_has "stdout: write error"
expect_exit 1 "ckpt_inspect --all_tensors to a full disk" $TO bash -c 'exec "$@" >/dev/full' _ \
  "$LV_BIN/ckpt_inspect" --file_name="$C" --all_tensors

# ---- trainer ----
TR=$LV_BIN/trainer
expect_exit 0 "trainer --mode=inspect_model" $TO "$TR" --model=image.mnist.LeNet5 --logdir="$T/im" --mode=inspect_model
expect_exit 1 "trainer --mode=inspect_model to a full disk" $TO bash -c 'exec "$@" >/dev/full' _ \
  "$TR" --model=image.mnist.LeNet5 --logdir="$T/im" --mode=inspect_model
err_has "stdout: write error"
# Training inputs through the punctuator's reader, with a hand-made WPM vocabulary.
printf 'Hello, world.\nWhere is the cat?\n' >"$T/train.txt"
M=punctuator.codelab.RNMTTinyTest
inspect() { # file_pattern
  $TO "$TR" --model=$M --logdir="$T/pin" --mode=inspect_input --dataset=Train --inspect_input_batches=1 \
    --model_params_override="input.file_pattern: \"$1\"; input.tokenizer.vocab_filepath: $T/wpm.voc; input.tokenizer.vocab_size: 128"
}

# ---- wpm_encode_file ----
W=$LV_BIN/wpm_encode_file
printf 'a cab\nbad face\n' >"$T/src.txt"
printf 'abc\nfed cab\n' >"$T/tgt.txt"
cp "$T/src.txt" "$T/src2.txt"
cp "$T/wpm.voc" "$T/wpm2.voc"
wenc() { $TO "$W" --wpm_filepath="$T/wpm.voc" --shard_id=0 "$@"; }
expect_exit 0 "wpm_encode_file" wenc --source_filepaths="$T/src.txt" --target_filepaths="$T/tgt.txt" --output_filepath="$T/rec"
check "2 records" [ "$("$LV_BIN/print_tf_records" --input_filepattern="$T/rec" --count_only)" = "== Total entries: 2" ]
expect_exit 2 "wpm_encode_file: a source is a FIFO" wenc --source_filepaths="$T/fifo" --target_filepaths="$T/tgt.txt" \
  --output_filepath="$T/rec2"
err_has "--source_filepaths $T/fifo is a FIFO; expected a regular file"
expect_exit 2 "wpm_encode_file: a target is /dev/zero" wenc --source_filepaths="$T/src.txt" --target_filepaths=/dev/zero \
  --output_filepath="$T/rec2"
err_has "--target_filepaths /dev/zero is a character device"
expect_exit 2 "wpm_encode_file: the vocabulary is a FIFO" $TO "$W" --wpm_filepath="$T/fifo" --source_filepaths="$T/src.txt" \
  --target_filepaths="$T/tgt.txt" --output_filepath="$T/rec2"
err_has "$T/fifo is a FIFO"
check "nothing written for refused inputs" [ ! -e "$T/rec2" ]
expect_exit 2 "wpm_encode_file: output over a source" wenc --source_filepaths="$T/src2.txt" --target_filepaths="$T/tgt.txt" \
  --output_filepath="$T/src2.txt"
err_has "$T/src2.txt is the --source_filepaths file"
check "the source is left intact" cmp -s "$T/src.txt" "$T/src2.txt"
expect_exit 2 "wpm_encode_file: output over the vocabulary" $TO "$W" --wpm_filepath="$T/wpm2.voc" --shard_id=0 \
  --source_filepaths="$T/src.txt" --target_filepaths="$T/tgt.txt" --output_filepath="$T/wpm2.voc"
err_has "is the --wpm_filepath file"
check "the vocabulary is left intact" cmp -s "$T/wpm.voc" "$T/wpm2.voc"
cp "$T/tgt.txt" "$T/out-00001-of-00002"
expect_exit 2 "wpm_encode_file: a shard over a target" $TO "$W" --wpm_filepath="$T/wpm.voc" --num_shards=2 \
  --source_filepaths="$T/src.txt" --target_filepaths="$T/out-00001-of-00002" --output_filepath="$T/out"
err_has "$T/out-00001-of-00002 is the --target_filepaths file"
check "the target is left intact" cmp -s "$T/tgt.txt" "$T/out-00001-of-00002"

expect_exit 0 "inspect_input on text:" inspect "text:$T/train.txt"
expect_exit 2 "text:/dev/zero" inspect "text:/dev/zero"
err_has "/dev/zero is a character device; expected a regular file"
expect_exit 2 "text: on a FIFO" inspect "text:$T/fifo"
err_has "$T/fifo is a FIFO; expected a regular file"
gzip -c "$T/train.txt" >"$T/train.txt.gz"
expect_exit 2 "text: on a .gz file" inspect "text:$T/train.txt.gz"
err_has "$T/train.txt.gz is gzip (magic 1f 8b)-compressed; expected plain UTF-8 text"
expect_exit 2 "a FIFO as a TFRecord file" $TO "$TR" --model=mt.wmt14_en_de.WmtEnDeTransformerSmall --logdir="$T/wmt" \
  --mode=inspect_input --inspect_input_batches=1 --model_params_override="input.file_pattern: \"tfrecord:$T/fifo\"; \
input.tokenizer.token_vocab_filepath: $T/absent/wpm-ende.voc"
err_has "TFRecord file $T/fifo is a FIFO; expected a regular file"
expect_exit 2 "the tokenizer vocabulary is a FIFO" $TO "$TR" --model=$M --logdir="$T/pin" --mode=inspect_input \
  --model_params_override="input.file_pattern: \"text:$T/train.txt\"; input.tokenizer.vocab_filepath: $T/fifo"
err_has "$T/fifo is a FIFO; expected a regular file"
finish
