#!/usr/bin/env bash
# SentencePieceTokenizer against SentencePiece's own spm_encode: WEB sentences from
# bible_sentences.sh, a unigram and a BPE model trained with spm_train (vocab 2000, a
# few seconds), and bin/spm_encode_file must print the same ids as
# `spm_encode --output_format=id` for every sentence, plus for a file of odd input
# (whitespace runs, NFKC cases, unknown characters, invalid UTF-8, empty lines).
# Skips with one line when sentencepiece / libsword-utils / sword-text-web are missing.
. "$(dirname "$0")/lib.sh"
TOOLS=${LV_DATA_TOOLS:-$LV_ROOT/scripts/data}
for c in spm_train spm_encode mod2imp; do
  if ! command -v "$c" >/dev/null 2>&1; then
    skip "$c not installed (apt-get install sentencepiece libsword-utils sword-text-web)"
  fi
done
if [ ! -f "$TOOLS/bible_sentences.sh" ]; then
  skip "$TOOLS/bible_sentences.sh not found (set LV_DATA_TOOLS)"
fi
if ! sh "$TOOLS/bible_sentences.sh" "$T/web.txt" >"$T/sent.log" 2>&1; then
  skip "bible_sentences.sh failed: $(tail -1 "$T/sent.log")"
fi
n=$(wc -l <"$T/web.txt")
check "at least 10000 WEB sentences ($n)" test "$n" -ge 10000

# Odd input appended to the real sentences.
printf '  Hello   world\t tab \n\n   \n\xef\xac\x81ne \xe2\x91\xa0 \xef\xbc\xa6\xef\xbd\x95ll\xe3\x80\x80width\nCa\xcc\x81fe\xcc\x81 \xc3\x91and\xc3\xba \xc2\xbfqu\xc3\xa9?\n\xe6\x84\xa4\xe9\x9d\x92 \xe2\x86\x90 \xe2\x99\xa3 \xf0\x9f\x98\x80\nbad \xff\xfe bytes \xc3 end\n\xed\xa0\x80 \xc0\xaf x\n' >"$T/odd.txt"
cat "$T/web.txt" "$T/odd.txt" >"$T/all.txt"

compare() { # model_type
  local m=$1
  if ! spm_train --input="$T/web.txt" --model_prefix="$T/$m" --vocab_size=2000 --model_type="$m" \
      --num_threads=2 --minloglevel=2 >"$T/train.log" 2>&1; then
    fail "spm_train $m: $(tail -2 "$T/train.log")"
    return
  fi
  spm_encode --model="$T/$m.model" --output_format=id <"$T/all.txt" >"$T/$m.ref"
  if ! "$LV_BIN/spm_encode_file" --model="$T/$m.model" --input="$T/all.txt" >"$T/$m.ours" 2>"$T/err"; then
    fail "spm_encode_file $m: $(tail -2 "$T/err")"
    return
  fi
  local total mism
  total=$(wc -l <"$T/$m.ref")
  mism=$(paste -d '\n' "$T/$m.ref" "$T/$m.ours" | paste - - | awk -F '\t' '$1 != $2' | wc -l)
  check "$m: same line count ($total vs $(wc -l <"$T/$m.ours"))" test "$total" -eq "$(wc -l <"$T/$m.ours")"
  echo "test_spm_parity: $m: $total sentences compared, $mism mismatches"
  check "$m: ids equal spm_encode's on all $total lines ($mism differ)" test "$mism" -eq 0
}
compare unigram
compare bpe

expect_exit 2 "spm_encode_file on a corrupt model" "$LV_BIN/spm_encode_file" --model="$T/web.txt" --input="$T/odd.txt"
err_has "web.txt"
expect_exit 2 "spm_encode_file with an unknown flag" "$LV_BIN/spm_encode_file" --modle=x
expect_exit 2 "spm_encode_file with a missing input" "$LV_BIN/spm_encode_file" --model="$T/bpe.model" --input="$T/nope.txt"
finish
