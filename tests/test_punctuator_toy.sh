#!/usr/bin/env bash
# The punctuator end to end on a toy corpus, through the real executables: 200
# generated sentences whose punctuation and capitals follow rules (questions, a comma
# after an interjection, "Run ...!", capitalized names) -> a 128-piece WPM vocabulary ->
# bin/trainer trains punctuator.codelab.RNMTTinyTest on them (PunctuatorInput lower-cases
# and strips them for the source) -> bin/decoder restores its own training sentences
# (exact match >= 0.9, with the punctuator's metrics in the score file) -> --decode_text
# answers typed lines one by one: empty, very long and non-ASCII lines included. Skips
# with one line when sentencepiece is not installed.
. "$(dirname "$0")/lib.sh"
if ! command -v spm_train >/dev/null 2>&1; then
  skip "spm_train not installed (apt-get install sentencepiece)"
fi
gen_punct_text 11 200 >"$T/train.txt"
expect_exit 0 "build_wpm_vocab.sh (128 pieces)" \
  sh "$LV_ROOT/scripts/build_wpm_vocab.sh" --input="$T/train.txt" --vocab_size=128 --out="$T/wpm.voc"
M=punctuator.codelab.RNMTTinyTest
TOK="input.tokenizer.vocab_filepath: $T/wpm.voc; input.tokenizer.vocab_size: 128"
O="input.file_pattern: text:$T/train.txt; $TOK"
expect_exit 0 "trainer: $M on the 200 sentences" "$LV_BIN/trainer" --model=$M --logdir="$T/run" \
  --model_params_override="$O"
expect_exit 0 "decoder --once on the training sentences" "$LV_BIN/decoder" --model=$M --logdir="$T/run" --once \
  --dataset=Test --model_params_override="$O"
S=$(ls "$T"/run/decoder_test/score-*.txt 2>/dev/null | tail -1)
check "score file written" test -n "$S"
for tag in exact_match sacrebleu f1_comma f1_question f1_period f1_capital precision_marks recall_marks; do
  check "score has $tag" grep -q "^$tag: " "$S"
done
check "exact match >= 0.9 ($(grep '^exact_match' "$S"))" awk '/^exact_match: / { exit !($2 >= 0.9) }' "$S"
check "decoder log has the per-mark report" grep -q 'punctuation and capitals restored' "$T/err"
# Interactive use: one answer per typed line (training sentences typed as the model sees
# them: lower-cased, unpunctuated; a toy model of 200 sentences does not generalize).
norm() { sed -n "$1p" "$T/train.txt" | tr 'A-Z' 'a-z' | tr -d '[:punct:]'; }
long=$(for i in $(seq 3000); do printf 'the dog '; done)
# The last line is typed with its capitals and marks: the decoder normalizes it first.
printf '%s\n\n%s\n%s\nrun the cat to paris\nwhere is jos\xc3\xa9 the caf\xc3\xa9\n%s\n' "$(norm 2)" "$(norm 1)" "$long" \
  "$(sed -n 2p "$T/train.txt")" >"$T/in.txt"
"$LV_BIN/decoder" --model=$M --logdir="$T/run" --decode_text=- --model_params_override="$O" <"$T/in.txt" \
  >"$T/out.txt" 2>"$T/err"
check "decode_text exits 0 ($?)" test $? -eq 0
check "one output line per input line" test "$(wc -l <"$T/out.txt")" -eq 7
check "a question gets its capitals and '?' ($(sed -n 1p "$T/out.txt"))" test "$(sed -n 1p "$T/out.txt")" = "$(sed -n 2p "$T/train.txt")"
check "empty line -> empty line" test -z "$(sed -n 2p "$T/out.txt")"
check "the interjection gets its comma ($(sed -n 3p "$T/out.txt"))" test "$(sed -n 3p "$T/out.txt")" = "$(sed -n 1p "$T/train.txt")"
check "the 6,000-word line gets an answer (truncated, with a message)" test -n "$(sed -n 4p "$T/out.txt")"
check "non-ASCII text gets an answer" test -n "$(sed -n 6p "$T/out.txt")"
check "a line typed punctuated is normalized first: same answer ($(sed -n 7p "$T/out.txt"))" \
  test "$(sed -n 7p "$T/out.txt")" = "$(sed -n 1p "$T/out.txt")"
check "the log says lines are normalized" grep -q 'lower-cased and stripped of punctuation' "$T/err"
# The same data through an MT Transformer (punctuator.codelab.TransformerTinyTest): the
# decoder scores it with the punctuator's metrics because its input is PunctuatorInput.
expect_exit 0 "trainer: TransformerTinyTest on the 200 sentences" "$LV_BIN/trainer" \
  --model=punctuator.codelab.TransformerTinyTest --logdir="$T/tr" --model_params_override="$O"
expect_exit 0 "decoder --once for the Transformer" "$LV_BIN/decoder" --model=punctuator.codelab.TransformerTinyTest \
  --logdir="$T/tr" --once --dataset=Test --model_params_override="$O"
S=$(ls "$T"/tr/decoder_test/score-*.txt 2>/dev/null | tail -1)
check "Transformer: score file with exact_match and f1_comma" grep -q "^f1_comma: " "${S:-/dev/null}"
check "Transformer: exact match reported ($(grep '^exact_match' "${S:-/dev/null}"))" grep -q "^exact_match: " "${S:-/dev/null}"
finish
