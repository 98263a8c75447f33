#!/bin/sh
# prepare_asr_bible.sh OUT - a speech corpus made on this machine for the asr.bible_tts
# experiments: the World English Bible's verses (scripts/bible_parallel.sh's English side)
# spoken by espeak-ng through sox with ../shared/data-tools/synth_speech.sh's scheme
# (voices and rates cycle with the line; 16 kHz mono 16-bit), then bin/create_asr_features:
#
#   OUT/wav/{train,dev,test}/SPLIT-NNNNNN.wav   the audio (removed with KEEP_WAV=0)
#   OUT/{train,dev,test}.tsv         path<TAB>transcript (synth_speech.sh's capitals without
#                                    punctuation; the records hold them lower-cased)
#   OUT/train.tfrecords-0000N-of-0000M, OUT/{dev,test}.tfrecords-00000-of-00001  AsrInput records
#
# Test: Ruth, James and Philippians (never trained on). Dev: every 100th line of the other
# books. Train: of the remaining lines those with at least MIN_WORDS (default 0) and at most
# MAX_WORDS words (default 30), then every TRAIN_EVERY-th of them (default 4: 5419
# utterances) and at most TRAIN_LIMIT (default 0: all). Dev and Test keep verses of every
# length (a fifth of their utterances have more than 30 words); a second set of long
# training verses beside the default one teaches a model those (experiments/asr/
# bible_tts.cfg): MIN_WORDS=31 MAX_WORDS=80 TRAIN_EVERY=3 SPLITS=train ID_PREFIX=long-
# (2,400 utterances, 122 s). SPLITS (default "test dev train") limits what is made;
# ID_PREFIX (default none) starts the utterance ids. Measured on the 2-core machine:
# TRAIN_LIMIT=200 (200 train, 291 dev, 297 test, 1.5 h of audio) took 147 s and 355 MB
# (171 MB WAV) with a build running beside it; the default (5,419 training utterances)
# 221 s and 2.3 GB (with the WAVs); the long-verse set (2,400) 122 s and 1.7 GB. The
# features run at ~900x real time; espeak-ng is the slow part. Deterministic: the same
# Debian packages give the same files. Env: JOBS (synthesis processes, default 2),
# SHARDS (training record shards, default 4), KEEP_WAV (default 1).
set -eu
if [ $# -ne 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  echo "usage: $0 OUT   (env: MIN_WORDS=0 MAX_WORDS=30 TRAIN_EVERY=4 TRAIN_LIMIT=0 JOBS=2 SHARDS=4 KEEP_WAV=1 SPLITS="test dev train" ID_PREFIX=)" >&2
  [ $# -eq 1 ] && exit 0 || exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${LV_BIN:-$root/bin}
caf="$bin/create_asr_features"
[ -x "$caf" ] || { echo "prepare_asr_bible.sh: $caf is missing; run make first" >&2; exit 1; }
# The project's shared data tools sit beside the checkout (../shared), or beside the
# worktree folder of a developer's checkout (../../shared); SYNTH_SPEECH names it elsewhere.
synth=${SYNTH_SPEECH:-$root/../shared/data-tools/synth_speech.sh}
[ -f "$synth" ] || synth="$root/../../shared/data-tools/synth_speech.sh"
[ -f "$synth" ] || { echo "prepare_asr_bible.sh: synth_speech.sh not found (../shared/data-tools/; set SYNTH_SPEECH)" >&2; exit 1; }
. "$here/data/apt_ensure.sh"
apt_ensure espeak-ng sox
out=$1
max_words=${MAX_WORDS:-30}
min_words=${MIN_WORDS:-0}
splits=${SPLITS:-test dev train}
idp=${ID_PREFIX:-}
for split in $splits; do
  case $split in test|dev|train) ;; *) echo "prepare_asr_bible.sh: SPLITS: unknown split '$split' (test, dev, train)" >&2; exit 2 ;; esac
done
every=${TRAIN_EVERY:-4}
limit=${TRAIN_LIMIT:-0}
jobs=${JOBS:-2}
shards=${SHARDS:-4}
start=$(date +%s)
mkdir -p "$out/text"
[ -s "$out/text/raw/train.en" ] || sh "$here/bible_parallel.sh" "$out/text/raw"
awk -v dev="$out/text/dev.txt" -v tr="$out/text/train.txt" -v mw="$max_words" -v nw="$min_words" -v ev="$every" -v lim="$limit" '
  NR % 100 == 0 { print > dev; next }
  NF <= mw && NF >= nw { k++; if (k % ev == 0 && (lim == 0 || n < lim)) { print > tr; n++ } }' "$out/text/raw/train.en"
cp "$out/text/raw/test.en" "$out/text/test.txt"
for split in $splits; do
  d="$out/wav/$split"
  rm -rf "$d"
  sh "$synth" "$out/text/$split.txt" "$d" "$jobs"
  # [ID_PREFIX]SPLIT-NNNNNN: utterance ids unique across the splits (and the sets).
  for f in "$d"/*.wav; do mv "$f" "$d/$idp$split-$(basename "$f")"; done
  awk -v s="$split" -v p="$idp" '{ id = $1; $1 = ""; sub(/^ /, ""); printf "wav/%s/%s%s-%s.wav\t%s\n", s, p, s, id, $0 }' \
    "$d/trans.txt" >"$out/$split.tsv"
  n=1
  [ "$split" = train ] && n=$shards
  "$caf" --input_list="$out/$split.tsv" --generate_tfrecords --num_output_shards="$n" \
    --output_template="$out/$split.tfrecords-%5.5d-of-%5.5d" --progress_seconds=30
done
secs=$(( $(date +%s) - start ))
if [ "${KEEP_WAV:-1}" = 0 ]; then rm -rf "$out/wav"; fi
made=$(for s in $splits; do printf '%s %s, ' "$(wc -l <"$out/$s.tsv")" "$s"; done)
echo "prepare_asr_bible.sh: ${made%, } utterances in $out ($secs s, $(du -sh "$out" | cut -f1))" >&2
