#!/usr/bin/env bash
# scripts/build_wpm_vocab.sh and bin/wpm_encode_file end to end on 3000 generated
# parallel lines (a few seconds): the vocab is in Lingvo's WPM format with every
# character; WpmTokenizer with it segments exactly as `spm_encode` with the BPE model it
# came from (the BPE merge order is WpmEncoder's merge order); wpm_encode_file writes
# N shards with Lingvo's pair n -> shard n % N assignment and layout, --shard_id and
# --spm_model give byte-identical files, NmtInput (trainer --mode=inspect_input) reads
# every record; bad input exits 2 naming the file and line and leaves earlier outputs
# untouched. tests/check_wpm_tools.c checks the records' contents field by field.
# Skips with one line when sentencepiece is not installed.
. "$(dirname "$0")/lib.sh"
for c in spm_train spm_encode spm_export_vocab perl; do
  if ! command -v "$c" >/dev/null 2>&1; then
    skip "$c not installed (apt-get install sentencepiece perl)"
  fi
done
BUILD_VOCAB=$LV_ROOT/scripts/build_wpm_vocab.sh
ENC=$LV_BIN/wpm_encode_file

# Two made-up languages (a Park-Miller generator, so every awk gives the same text).
gen() { # seed lines syllables...
  awk -v seed="$1" -v lines="$2" -v syl="$3" 'BEGIN {
    x = seed; ns = split(syl, s, " ")
    for (l = 0; l < lines; l++) {
      x = (x * 16807) % 2147483647; nw = 3 + x % 12; line = ""
      for (w = 0; w < nw; w++) {
        x = (x * 16807) % 2147483647; k = 1 + x % 3; word = ""
        for (j = 0; j < k; j++) { x = (x * 16807) % 2147483647; word = word s[1 + x % ns] }
        x = (x * 16807) % 2147483647
        if (w == 0) word = toupper(substr(word, 1, 1)) substr(word, 2)
        else if (x % 9 == 0) word = word ","
        line = line (w ? " " : "") word
      }
      print line "."
    }
  }'
}
gen 11 3500 "ka to ri en the an do mi su ne lo pa ve ra tion ing er" >"$T/all.src"
gen 29 3500 "ño la sé ü re qué el los ción tar ma çi 中 文 ga bre di" >"$T/all.tgt"
head -n 3000 "$T/all.src" >"$T/train.src"; head -n 3000 "$T/all.tgt" >"$T/train.tgt"
tail -n 500 "$T/all.src" >"$T/test.src"; tail -n 500 "$T/all.tgt" >"$T/test.tgt"

# ---- build_wpm_vocab.sh ----
expect_exit 0 "build_wpm_vocab.sh --help" sh "$BUILD_VOCAB" --help
expect_exit 2 "build_wpm_vocab.sh without --input" sh "$BUILD_VOCAB" --vocab_size=100 --out="$T/v"
expect_exit 2 "build_wpm_vocab.sh with a missing input" sh "$BUILD_VOCAB" --input="$T/nope" --vocab_size=100 --out="$T/v"
err_has "$T/nope"
expect_exit 2 "build_wpm_vocab.sh --vocab_size=abc" sh "$BUILD_VOCAB" --input="$T/train.src" --vocab_size=abc --out="$T/v"
expect_exit 2 "build_wpm_vocab.sh --vocab_size below the characters" \
  sh "$BUILD_VOCAB" --input="$T/train.src,$T/train.tgt" --vocab_size=10 --out="$T/v"
err_has "vocab_size=10"
check "a failed build writes no vocab" test ! -e "$T/v"

expect_exit 0 "build_wpm_vocab.sh on 6000 lines" \
  sh "$BUILD_VOCAB" --input="$T/train.src,$T/train.tgt" --vocab_size=600 --out="$T/wpm.voc" --model_prefix="$T/bpe"
cat "$T/err"
V=$T/wpm.voc
check "vocab has 600 lines ($(wc -l <"$V"))" test "$(wc -l <"$V")" -eq 600
check "lines 1-3 are <unk> <s> </s>" test "$(head -n 3 "$V" | tr '\n' ' ')" = "<unk> <s> </s> "
check "one piece per line, no tabs or spaces" test "$(grep -c '[[:space:]]' "$V")" -eq 0
check "no duplicate pieces" test "$(sort "$V" | uniq -d | wc -l)" -eq 0
check "the conversion kept the model's order (nothing dropped or appended)" grep -q "0 dropped for edge whitespace, 0 characters appended" "$T/err"
check "the model is kept under --model_prefix" test -s "$T/bpe.model"

# WpmTokenizer with the vocab == spm_encode with the BPE model, piece for piece,
# on training and unseen lines.
cat "$T/train.src" "$T/train.tgt" "$T/test.src" "$T/test.tgt" >"$T/every.txt"
spm_encode --model="$T/bpe.model" --output_format=piece <"$T/every.txt" >"$T/ref.pieces"
"$LV_BIN/spm_encode_file" --cls=WpmTokenizer --vocab="$V" --input="$T/every.txt" >"$T/ours.ids"
awk 'NR == FNR { p[NR - 1] = $0; next } { s = ""; for (i = 1; i <= NF; i++) s = s (i > 1 ? " " : "") p[$i]; print s }' \
  "$V" "$T/ours.ids" >"$T/ours.pieces"
total=$(wc -l <"$T/ref.pieces")
mism=$(paste -d '\n' "$T/ref.pieces" "$T/ours.pieces" | paste - - | awk -F '\t' '$1 != $2' | wc -l)
echo "test_wpm_tools: WpmTokenizer vs spm_encode (BPE): $total lines, $mism differ"
check "WpmTokenizer pieces equal spm_encode's on all $total lines ($mism differ)" test "$mism" -eq 0 -a "$total" -eq 7000
check "no <unk> on the text (every character is a piece)" test "$(tr ' ' '\n' <"$T/ours.ids" | grep -cx 0)" -eq 0

# ---- wpm_encode_file ----
expect_exit 0 "wpm_encode_file --help" "$ENC" --help
mkdir -p "$T/shards"
expect_exit 0 "wpm_encode_file, 3 shards" "$ENC" --source_filepaths="$T/train.src" --target_filepaths="$T/train.tgt" \
  --wpm_filepath="$V" --output_filepath="$T/shards/mt" --num_shards=3 --progress_seconds=0.000001
err_has "ETA"
err_has "pairs/s"
err_has "3000 records written"
check "three shard files, nothing else" test "$(ls "$T/shards" | tr '\n' ' ')" = "mt-00000-of-00003 mt-00001-of-00003 mt-00002-of-00003 "
for k in 0 1 2; do
  got=$("$LV_BIN/print_tf_records" --input_filepattern="$T/shards/mt-0000$k-of-00003" --count_only)
  check "shard $k has 1000 records ($got)" test "$got" = "== Total entries: 1000"
done
"$LV_BIN/print_tf_records" --input_filepattern="$T/shards/mt-00001-of-00003" --print_only_n=1 --bytes_as_utf8 >"$T/rec"
for f in "natural_order: [int64]" "source_id: [int64]" "source_padding: [float]" "source_word: [bytes]" \
         "target_id: [int64]" "target_label: [int64]" "target_padding: [float]" "target_weight: [float]" \
         "target_word: [bytes]"; do
  check "feature $f" grep -qxF "$f" "$T/rec"
done
# Shard 1 starts with pair 1: its source words are the pieces of line 1, then </s>.
first=$(head -n 1 "$T/ref.pieces" | awk '{ printf "%s", $1 }')
check "shard 1, record 0 is pair 1 (source_word starts with '$first')" grep -q "^source_word: \[$first " "$T/rec"
check "target_word starts with <s>" grep -q '^target_word: \[<s> ' "$T/rec"
check "source_word ends with </s>" grep -q '^source_word: .* </s>\]$' "$T/rec"

# NmtInput reads every record: trainer --mode=inspect_input, one eval pass of Test.
mkdir -p "$T/exp/mt"
cat >"$T/exp/mt/wpm.cfg" <<EOF
Check: {
  task: { cls = "classifier.ModelV1"; name = "check"; softmax: { input_dim = 300; num_classes = 10; }; };
  datasets: {
    test: { cls = "NmtInput"; file_pattern = "tfrecord:$T/shards/mt@3";
            bucket_upper_bound = [20, 1000]; bucket_batch_limit = [256, 128]; };
    dev: { cls = "PunctuatorInput"; file_pattern = "text:$T/train.src";
           bucket_upper_bound = [1000]; bucket_batch_limit = [4]; repeat_count = 1;
           source_max_length = 1002; target_max_length = 1002;
           tokenizer: { cls = "WpmTokenizer"; vocab_filepath = "$V"; vocab_size = 600; }; };
  };
};
EOF
"$LV_BIN/trainer" --model=mt.wpm.Check --experiments_dir="$T/exp" --mode=inspect_input --dataset=Test \
  --inspect_input_batches=1000 >"$T/inspect" 2>"$T/err"
check "trainer --mode=inspect_input reads the shards (exit $?)" test $? -eq 0
n=$(awk '/^batch [0-9]+: [0-9]+ examples/ { n += $3 } END { print n + 0 }' "$T/inspect")
check "NmtInput's eval pass yields all 3000 records ($n)" test "$n" -eq 3000
check "src.ids are int32" grep -q '^  src.ids  *int32' "$T/inspect"
# With a tokenizer, inspect_input shows the first example as text.
"$LV_BIN/trainer" --model=mt.wpm.Check --experiments_dir="$T/exp" --mode=inspect_input --dataset=Dev \
  --inspect_input_batches=1 >"$T/inspect" 2>"$T/err"
check "inspect_input of a PunctuatorInput (exit $?)" test $? -eq 0
first=$(head -1 "$T/train.src")
check "the first target decodes to the first line" grep -qF "  tgt.labels       text: \"$first\"" "$T/inspect"

# Lingvo's one-shard-per-process mode and the SentencePiece model give the same bytes.
"$ENC" --source_filepaths="$T/train.src" --target_filepaths="$T/train.tgt" --wpm_filepath="$V" \
  --output_filepath="$T/one" --num_shards=3 --shard_id=1 --progress_seconds=0 2>"$T/err"
check "--shard_id=1 writes shard 1 of the full run" cmp -s "$T/one" "$T/shards/mt-00001-of-00003"
mkdir -p "$T/spm"
"$ENC" --source_filepaths="$T/train.src" --target_filepaths="$T/train.tgt" --spm_model="$T/bpe.model" \
  --output_filepath="$T/spm/mt" --num_shards=3 --progress_seconds=0 2>"$T/err"
for k in 0 1 2; do
  check "--spm_model shard $k equals the --wpm_filepath shard" cmp -s "$T/spm/mt-0000$k-of-00003" "$T/shards/mt-0000$k-of-00003"
done
"$ENC" --source_filepaths="$T/train.src,$T/test.src" --target_filepaths="$T/train.tgt,$T/test.tgt" --wpm_filepath="$V" \
  --output_filepath="$T/two" --max_len=12 --progress_seconds=0 2>"$T/err"
check "two file pairs, --max_len=12 (exit $?)" test $? -eq 0
kept=$("$LV_BIN/print_tf_records" --input_filepattern="$T/two-00000-of-00001" --count_only | awk '{ print $NF }')
dropped=$(sed -n 's/.*; \([0-9]*\) dropped by --max_len.*/\1/p' "$T/err")
check "3500 pairs: $kept kept + $dropped dropped" test "$((kept + dropped))" -eq 3500 -a "$dropped" -gt 0 -a "$kept" -gt 0

# ---- bad input: exit 2, a message naming the file and line, earlier outputs untouched ----
md5sum "$T"/shards/* >"$T/before.md5"
head -n 2999 "$T/train.tgt" >"$T/short.tgt"
enc_args=(--wpm_filepath="$V" --output_filepath="$T/shards/mt" --num_shards=3 --progress_seconds=0)
expect_exit 2 "target file one line short" "$ENC" --source_filepaths="$T/train.src" --target_filepaths="$T/short.tgt" "${enc_args[@]}"
err_has "$T/short.tgt ends after 2999 lines but $T/train.src has line 3000"
sed '1500s/^/<s> /' "$T/train.src" >"$T/bad.src"
expect_exit 2 "a source line starting with <s>" "$ENC" --source_filepaths="$T/bad.src" --target_filepaths="$T/train.tgt" "${enc_args[@]}"
err_has "$T/bad.src:1500:"
expect_exit 2 "a missing vocab" "$ENC" --source_filepaths="$T/train.src" --target_filepaths="$T/train.tgt" \
  --wpm_filepath="$T/nope.voc" --output_filepath="$T/shards/mt" --num_shards=3
err_has "nope.voc"
expect_exit 2 "a vocab without <unk>" "$ENC" --source_filepaths="$T/train.src" --target_filepaths="$T/train.tgt" \
  --wpm_filepath="$T/train.src" --output_filepath="$T/shards/mt" --num_shards=3
err_has "<unk>"
expect_exit 2 "a missing source file" "$ENC" --source_filepaths="$T/nope.src" --target_filepaths="$T/train.tgt" "${enc_args[@]}"
err_has "nope.src"
expect_exit 2 "two source files, one target file" "$ENC" --source_filepaths="$T/train.src,$T/test.src" \
  --target_filepaths="$T/train.tgt" "${enc_args[@]}"
expect_exit 2 "both --wpm_filepath and --spm_model" "$ENC" --source_filepaths="$T/train.src" \
  --target_filepaths="$T/train.tgt" --spm_model="$T/bpe.model" "${enc_args[@]}"
expect_exit 2 "--shard_id=3 of 3" "$ENC" --source_filepaths="$T/train.src" --target_filepaths="$T/train.tgt" \
  "${enc_args[@]}" --shard_id=3
expect_exit 2 "an unknown flag" "$ENC" --source_filepath="$T/train.src"
expect_exit 2 "a missing output directory" "$ENC" --source_filepaths="$T/train.src" --target_filepaths="$T/train.tgt" \
  --wpm_filepath="$V" --output_filepath="$T/nodir/mt"
check "failed runs left the earlier shards untouched" md5sum --quiet -c "$T/before.md5"
check "failed runs left no temporary files" test "$(ls "$T/shards" | wc -l)" -eq 3
finish
