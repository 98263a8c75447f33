#!/usr/bin/env bash
# SentencePieceTokenizer against SentencePiece's own spm_encode: WEB sentences from
# bible_sentences.sh plus generated tie-heavy text (dot, dash and "=" runs, digit groups
# such as 250,000 and 20.000, Japanese), unigram models trained with spm_train (vocab 2000
# with the default nmt_nfkc rules, with byte fallback, with identity and nfkc
# normalization, and a 12k vocabulary) and a BPE model; bin/spm_encode_file must print the
# same ids as `spm_encode --output_format=id` for every sentence, plus for a file of odd
# input (whitespace runs, NFKC cases, unknown characters, invalid UTF-8, empty lines).
# Runs of one character are where equal-scoring segmentations meet: the unigram Viterbi
# must sum scores in double as SentencePiece does, or rounding orders those ties
# differently (444 of 52,000 lines did). About a minute (six spm_train runs).
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
# gen_ties SEED LINES: text whose segmentations tie often (deterministic for SEED).
gen_ties() {
  awk -v seed="$1" -v lines="$2" 'BEGIN {
    nj = split("日 本 語 の 文 章 を 書 く こ と は 難 し い で す ね 東 京 大 阪 人 が 行 っ た 。 、 ア イ ウ エ オ カ キ ク 中 国 学 生 時 間 年 月", j, " ")
    nw = split("the of and price was in year to rose fell by about", w, " ")
    x = seed
    for (l = 0; l < lines; l++) {
      x = (x * 16807) % 2147483647; kind = x % 6; s = ""
      x = (x * 16807) % 2147483647; n = 1 + x % 6
      for (i = 0; i < n; i++) {
        x = (x * 16807) % 2147483647; r = x % 30 + 1; t = ""
        if (kind == 0) { for (k = 0; k < r; k++) t = t "." }
        else if (kind == 1) { for (k = 0; k < r; k++) t = t (x % 3 ? "-" : "=") }
        else if (kind == 2) {
          x = (x * 16807) % 2147483647; t = x % 999 + 1; g = 1 + x % 4
          for (k = 0; k < g; k++) { x = (x * 16807) % 2147483647; t = t (x % 2 ? "," : ".") sprintf("%03d", x % 1000) }
        } else if (kind == 3) {
          for (k = 0; k < r % 12 + 1; k++) { x = (x * 16807) % 2147483647; t = t j[1 + x % nj] }
        } else if (kind == 4) { x = (x * 16807) % 2147483647; t = w[1 + x % nw] (x % 2 ? "..." : " --") }
        else { x = (x * 16807) % 2147483647; t = sprintf("%d", x % 100000) }
        s = s (i ? " " : "") t
      }
      print s
    }
  }'
}
gen_ties 7 3000 >"$T/ties_train.txt"
gen_ties 11 3000 >"$T/ties.txt"
printf '.......\n...\n250,000\n20.000\n------\n' >>"$T/ties.txt"
cat "$T/web.txt" "$T/ties_train.txt" >"$T/train.txt"
cat "$T/web.txt" "$T/ties.txt" "$T/odd.txt" >"$T/all.txt"

compare() { # name model_type spm_train-flags...
  local m=$1 type=$2
  shift 2
  if ! spm_train --input="$T/train.txt" --model_prefix="$T/$m" --vocab_size=2000 --model_type="$type" \
      --num_threads=2 --minloglevel=2 "$@" >"$T/train.log" 2>&1; then
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
compare unigram unigram
compare unigram_byte_fallback unigram --byte_fallback=true
compare unigram_identity unigram --normalization_rule_name=identity
compare unigram_nfkc unigram --normalization_rule_name=nfkc
compare unigram_12k unigram --vocab_size=12000
compare bpe bpe

expect_exit 2 "spm_encode_file on a corrupt model" "$LV_BIN/spm_encode_file" --model="$T/web.txt" --input="$T/odd.txt"
err_has "web.txt"
expect_exit 2 "spm_encode_file with an unknown flag" "$LV_BIN/spm_encode_file" --modle=x
expect_exit 2 "spm_encode_file with a missing input" "$LV_BIN/spm_encode_file" --model="$T/bpe.model" --input="$T/nope.txt"
finish
