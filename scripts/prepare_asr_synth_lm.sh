#!/bin/sh
# prepare_asr_synth_lm.sh [DIR [OUT]] - the text of the character language model that is fused
# into the asr.synth_en recognizers (experiments/lm/bible.cfg: lm.bible.RnnLmSynthTranscripts):
# the texts of the speech corpus that scripts/prepare_asr_synth.sh DIR made (default
# /tmp/asr_synth), normalised as its transcripts are and lower-cased as the records hold them,
# split as the speech corpus is (default OUT: DIR/lm):
#
#   OUT/train.txt   every Bible line of the training books (not only those spoken), the general
#                   and number sentences of the speech training set
#   OUT/dev.txt     the speech Dev set's texts
#   OUT/test.txt    the Bible Test books and the general and number test sentences (the texts
#                   of Test, TestGeneral and the held-out sets: never trained on)
#
# Deterministic; a second or two.
set -eu
case ${1:-} in -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -le 2 ] || { echo "usage: $0 [DIR [OUT]]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-/tmp/asr_synth}
out=${2:-$dir/lm}
t=$dir/text
for f in bible_train bible_dev bible_test general_train general_dev general_test numbers_train numbers_dev numbers_test; do
  [ -s "$t/$f.txt" ] || { echo "prepare_asr_synth_lm.sh: $t/$f.txt is missing: run scripts/prepare_asr_synth.sh $dir first" >&2; exit 2; }
done
mkdir -p "$out"
j="$here/data/asr_synth_jobs.pl"
perl "$j" lmtext "$t/bible_train.txt" "$t/general_train.txt" "$t/numbers_train.txt" >"$out/train.txt"
perl "$j" lmtext "$t/bible_dev.txt" "$t/general_dev.txt" "$t/numbers_dev.txt" >"$out/dev.txt"
perl "$j" lmtext "$t/bible_test.txt" "$t/general_test.txt" "$t/numbers_test.txt" >"$out/test.txt"
for s in train dev test; do printf '%s: %s lines\n' "$out/$s.txt" "$(wc -l <"$out/$s.txt")"; done
