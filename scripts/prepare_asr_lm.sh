#!/bin/sh
# prepare_asr_lm.sh ASR_DIR OUT - the text of a character language model for shallow fusion
# into the asr.bible_tts recognizers (experiments/lm/bible.cfg: lm.bible.RnnLmTranscripts):
# every verse of the speech corpus's text (ASR_DIR/text/raw/{train,test}.en, written by
# scripts/prepare_asr_bible.sh ASR_DIR) normalised as its transcripts are (synth_speech.sh:
# capitals, anything but letters, digits and inner apostrophes made a space), lower-cased
# as the records hold them, split as the speech corpus is:
#
#   OUT/train.txt   the verses of every book but Ruth, James and Philippians, without the
#                   Dev ones (all of them, not only those spoken for the speech training set)
#   OUT/dev.txt     every 100th of those verses (the speech Dev set's text)
#   OUT/test.txt    Ruth, James and Philippians (the speech Test set's text; never trained on)
#
# Deterministic; a second or two.
set -eu
if [ $# -ne 2 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  echo "usage: $0 ASR_DIR OUT   (ASR_DIR from scripts/prepare_asr_bible.sh)" >&2
  [ $# -ge 1 ] && [ "$1" = "--help" -o "$1" = "-h" ] && exit 0 || exit 2
fi
in=$1/text/raw
out=$2
for f in "$in/train.en" "$in/test.en"; do
  [ -s "$f" ] || { echo "prepare_asr_lm.sh: $f is missing: run scripts/prepare_asr_bible.sh $1 first" >&2; exit 2; }
done
mkdir -p "$out"
norm() {
  perl -ne 'chomp; my $tr = uc $_; $tr =~ s/[^A-Z0-9\x27 ]+/ /g; $tr =~ s/(^| )\x27+|\x27+( |$)/ /g;
    $tr =~ s/\s+/ /g; $tr =~ s/^ | $//g; print lc($tr), "\n" if length $tr;'
}
awk -v dev="$out/dev.raw" -v tr="$out/train.raw" 'NR % 100 == 0 { print > dev; next } { print > tr }' "$in/train.en"
norm <"$out/train.raw" >"$out/train.txt"
norm <"$out/dev.raw" >"$out/dev.txt"
norm <"$in/test.en" >"$out/test.txt"
rm -f "$out/train.raw" "$out/dev.raw"
for s in train dev test; do printf '%s: %s lines\n' "$out/$s.txt" "$(wc -l <"$out/$s.txt")"; done
