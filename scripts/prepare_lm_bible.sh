#!/bin/sh
# prepare_lm_bible.sh OUTDIR - the English language-model corpus of experiments/lm/bible.cfg:
# the World English Bible (SWORD module engWEB2015eb, Debian's sword-text-web, public
# domain), one sentence per line, split by book so that the test set is text no model saw:
#
#   OUTDIR/test.txt    every sentence of Ruth, James and Philippians (held out)
#   OUTDIR/dev.txt     every 100th sentence of the other books, in canonical order
#   OUTDIR/train.txt   the rest of the other books, in canonical order
#   OUTDIR/{train,dev,test}.refs   "Book Chapter" of each line of the matching .txt
#
# The models are character level (AsciiTokenizer), so no vocabulary is written.
# The sentences are scripts/data/bible_sentences.sh's (a copy of
# ../shared/data-tools/bible_sentences.sh) with their chapters (WITH_CHAPTER=1): the verses
# of a chapter are joined and split into sentences after . ! ? (and any closing quote) when a capital, digit or opening quote follows; quotes and dashes
# are folded to ASCII. A sentence never crosses a chapter, so each has one book.
# Installs libsword-utils and sword-text-web when missing. Deterministic: the same packages
# give byte-identical files. About 10-20 s.
set -eu
if [ $# -ne 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  echo "usage: $0 OUTDIR   (writes OUTDIR/{train,dev,test}.txt and .refs)" >&2
  [ $# -eq 1 ] && exit 0 || exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/data/apt_ensure.sh"
apt_ensure libsword-utils sword-text-web perl
out=$1
mod=engWEB2015eb
if ! mod2imp "$mod" 2>/dev/null | head -c 1 | grep -q .; then
  echo "prepare_lm_bible.sh: SWORD module $mod not installed (apt-get install sword-text-web)" >&2
  exit 2
fi
mkdir -p "$out"
tmp="$out/.all.tsv.$$"
trap 'rm -f "$tmp"' EXIT

# "Book Chapter<TAB>sentence" per sentence, in canonical order.
WITH_CHAPTER=1 sh "$here/data/bible_sentences.sh" "$tmp" "$mod"

awk -F '\t' -v out="$out" '
  BEGIN { held["Ruth"] = 1; held["James"] = 1; held["Philippians"] = 1
          split("train dev test", names, " ")
          for (i = 1; i <= 3; i++) { printf "" > (out "/" names[i] ".txt"); printf "" > (out "/" names[i] ".refs") } }
  {
    book = $1; sub(/ [0-9]+$/, "", book)
    if (book in held) s = "test"
    else { k++; s = (k % 100 == 0) ? "dev" : "train" }
    print $2 > (out "/" s ".txt"); print $1 > (out "/" s ".refs"); n[s]++
  }
  END {
    if (n["test"] == 0 || n["dev"] == 0) { print "prepare_lm_bible.sh: no held-out sentences found" > "/dev/stderr"; exit 1 }
    printf "prepare_lm_bible.sh: %d train, %d dev, %d test sentences (Ruth, James, Philippians) in %s\n", n["train"], n["dev"], n["test"], out > "/dev/stderr"
  }' "$tmp"
