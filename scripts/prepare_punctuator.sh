#!/bin/sh
# prepare_punctuator.sh [--lingvo_filters] OUTDIR - everything the punctuator codelab
# (experiments/punctuator/codelab.cfg) reads, in one step:
#
#   OUTDIR/train.txt                     46,194 WEB sentences } unique, sorted, Python
#   OUTDIR/test.txt                       2,432 WEB sentences } random.seed(1234) shuffle, 95/5
#   OUTDIR/all.txt                       the 49,403 sentences in canonical order
#   OUTDIR/web_wpm.16000.vocab           16,000-piece WPM vocabulary of train.txt
#   OUTDIR/web_spm.16000.model / .vocab  the SentencePiece BPE model behind it
#
# The sentences come from scripts/prepare_web_sentences.sh, which splits them as Lingvo's
# download_brown_corpus.py splits Brown; the vocabulary from scripts/build_wpm_vocab.sh
# on the training split only (Lingvo's brown_corpus_wpm.16000.vocab is 16,000 pieces,
# a multiple of the 16 softmax shards). Without --lingvo_filters no sentence is
# dropped: that is the split (2,432 test sentences) of README.md's punctuator figures.
# With it, Brown's sentence filters (odd quotes, unbalanced brackets, no letter, not starting
# with a letter or digit; outer quotes stripped) also apply: 39,064 / 2,056 sentences.
# Brown's repeated-mark fixes ("!!" -> "!", "--" -> "-", ...) change nothing on the WEB
# (none of those pairs occurs), so they are not repeated here.
#
# Exit 0 ok, 2 bad arguments, 1 a step failed. Takes about 2 minutes on 2 cores.
set -eu
filters=""
if [ "${1:-}" = "--lingvo_filters" ]; then filters=--lingvo_filters; shift; fi
if [ $# -ne 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  echo "usage: $0 [--lingvo_filters] OUTDIR   (train.txt, test.txt, web_wpm.16000.vocab)" >&2
  [ $# -eq 1 ] && exit 0 || exit 2
fi
case "$1" in -*) echo "prepare_punctuator.sh: unknown option $1" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
out=$1
sh "$here/prepare_web_sentences.sh" $filters "$out" || exit 1
sh "$here/build_wpm_vocab.sh" --input="$out/train.txt" --vocab_size=16000 \
  --out="$out/web_wpm.16000.vocab" --model_prefix="$out/web_spm.16000" || exit 1
echo "prepare_punctuator.sh: $(wc -l <"$out/train.txt") train, $(wc -l <"$out/test.txt") test sentences," \
  "$(wc -l <"$out/web_wpm.16000.vocab") pieces in $out" >&2
