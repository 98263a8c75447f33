#!/bin/sh
# prepare_bible_en_es.sh OUTDIR - data for mt.bible_en_es.* (experiments/mt/bible_en_es.cfg):
#
#   OUTDIR/train.{en,es,refs}     training verses: every book but Ruth, James, Philippians,
#                                 minus every 100th line (those are Dev)
#   OUTDIR/dev.{en,es,refs}       every 100th line (lines 100, 200, ...) of bible_parallel.sh's
#                                 train split, moved out of training
#   OUTDIR/test.{en,es,refs}      the held-out books Ruth, James, Philippians
#   OUTDIR/wpm.voc                one shared English+Spanish wordpiece vocab (VOCAB_SIZE
#                                 pieces, default 8000) learned on the training lines only
#   OUTDIR/{train,dev,test}.tfrecord   NmtInput records (wpm_encode_file; train drops pairs
#                                 longer than MAX_LEN=100 pieces)
#
# Deterministic (same Debian packages, same files). Needs bin/wpm_encode_file (make).
set -eu
if [ $# -ne 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  echo "usage: $0 OUTDIR   (env: VOCAB_SIZE=8000 MAX_LEN=100)" >&2
  [ $# -eq 1 ] && exit 0 || exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
enc="${LV_BIN:-$root/bin}/wpm_encode_file"
[ -x "$enc" ] || { echo "prepare_bible_en_es.sh: $enc is missing; run make first" >&2; exit 1; }
out=$1
vocab_size=${VOCAB_SIZE:-8000}
max_len=${MAX_LEN:-100}
mkdir -p "$out/raw"
sh "$here/bible_parallel.sh" "$out/raw"
for ext in en es refs; do
  awk -v o="$out/dev.$ext" -v t="$out/train.$ext" 'NR % 100 == 0 { print > o; next } { print > t }' "$out/raw/train.$ext"
  cp "$out/raw/test.$ext" "$out/test.$ext"
done
sh "$here/build_wpm_vocab.sh" --input="$out/train.en,$out/train.es" --vocab_size="$vocab_size" --out="$out/wpm.voc"
"$enc" --source_filepaths="$out/train.en" --target_filepaths="$out/train.es" --wpm_filepath="$out/wpm.voc" \
  --output_filepath="$out/train.tfrecord" --max_len="$max_len" --progress_seconds=0
for split in dev test; do
  "$enc" --source_filepaths="$out/$split.en" --target_filepaths="$out/$split.es" --wpm_filepath="$out/wpm.voc" \
    --output_filepath="$out/$split.tfrecord" --progress_seconds=0
done
echo "prepare_bible_en_es.sh: $(wc -l < "$out/train.en") train, $(wc -l < "$out/dev.en") dev, $(wc -l < "$out/test.en") test lines, vocab $out/wpm.voc ($vocab_size) in $out" >&2
