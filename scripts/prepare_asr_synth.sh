#!/bin/sh
# prepare_asr_synth.sh [DIR] - the speech corpus of experiments/asr/synth_en.cfg (default DIR
# /tmp/asr_synth), made on this machine from Debian 12 main packages only: espeak-ng (its
# English voices and variants), flite (awb, kal16, rms, slt: built in), festival with its
# main-section voices (festvox-kallpc16k, festvox-kdlpc16k, festvox-us-slt-hts), speaking
# English of three kinds in turn: the World English Bible (scripts/bible_parallel.sh),
# general English (the sentences of fortunes-min's and fortunes' files) and
# spelled-out numbers (scripts/data/asr_synth_jobs.pl). Packages: LINGVOC_ASR_SYNTH=1
# scripts/install-deps.sh (or installed here when missing, as root or through sudo).
#
#   DIR/text/*.txt                 the texts (Bible Test books Ruth, James, Philippians kept
#                                  out of train and dev, general and number sentences split
#                                  19:1 into train and test, 1 in 20 to dev)
#   DIR/SET.jobs                   id, synthesizer, voice, rate, text, transcript per utterance
#   DIR/wav/SET/ID.wav, DIR/SET.tsv   16 kHz audio and path<TAB>TRANSCRIPT
#   DIR/SET.tfrecords-*            AsrInput records; train's with the samples (pcm16,
#                                  create_asr_features --write_pcm) for the input's
#                                  waveform augmentation
# SETs: train (training voices: espeak-ng 4 lines in 10, flite 3, festival 3); dev (the same
# voices, dev texts); test_bible (Bible Test books) and test_general (general and number test
# sentences), the training voices on unseen text; heldout_espeak (espeak-ng voices
# en-gb-x-gbclan, en-gb-x-gbcwmd, en-us-nyc and the variants +m4, +m6, never in training),
# heldout_flite (rms) and heldout_festival (cmu_us_slt_arctic_hts), unseen text too.
#
# Deterministic (the same packages give the same files: the voice and rate of a line depend
# on its set and number only) and resumable: a WAV already there is kept, a set whose records
# are complete (DIR/.done-SET) is skipped, so rerunning after an interruption finishes the
# job. Progress with an ETA every PROGRESS_EVERY utterances (default 200).
# Env: MAX_UTTS (cap on every set, default 0: all), HELDOUT_UTTS (cap on each test and held-
# out set, default 400), JOBS (synthesis processes, default 2), SHARDS (train shards, 4),
# KEEP_WAV (1), SETS (default all, in the order above).
set -eu
case ${1:-} in -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -le 1 ] || { echo "usage: $0 [DIR]   (env: MAX_UTTS HELDOUT_UTTS JOBS SHARDS KEEP_WAV SETS)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${LV_BIN:-$root/bin}
caf="$bin/create_asr_features"
[ -x "$caf" ] || { echo "prepare_asr_synth.sh: $caf is missing; run make first" >&2; exit 1; }
. "$here/data/apt_ensure.sh"
apt_ensure espeak-ng sox flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts fortunes-min fortunes perl
out=${1:-/tmp/asr_synth}
max=${MAX_UTTS:-0}
hmax=${HELDOUT_UTTS:-400}
[ "$max" -gt 0 ] && [ "$max" -lt "$hmax" ] && hmax=$max
jobs=${JOBS:-2}
shards=${SHARDS:-4}
every=${PROGRESS_EVERY:-200}
sets=${SETS:-train dev test_bible test_general heldout_espeak heldout_flite heldout_festival}
start=$(date +%s)
mkdir -p "$out/text"
t="$out/text"
[ -s "$t/raw/train.en" ] || sh "$here/bible_parallel.sh" "$t/raw" >&2
fort=/usr/share/games/fortunes
# fortunes-min's and fortunes' files (not the offensive ones of fortunes-off, not in main's
# fortunes), in a fixed order; ascii-art and the like yield no sentence.
[ -s "$t/numbers_test.txt" ] ||
  perl "$here/data/asr_synth_jobs.pl" texts "$t" "$t/raw/train.en" "$t/raw/test.en" \
    $(for f in "$fort"/*; do case $f in *.dat|*.u8) ;; *) [ -f "$f" ] && echo "$f" ;; esac; done | LC_ALL=C sort)
# Training Bible lines: at most 30 words, every 4th (prepare_asr_bible.sh's default choice).
[ -s "$t/bible_train_short.txt" ] ||
  awk 'NF <= 30 { k++; if (k % 4 == 0) print }' "$t/bible_train.txt" >"$t/bible_train_short.txt"

texts_of() {
  case $1 in
    train) echo "$t/bible_train_short.txt $t/general_train.txt $t/numbers_train.txt" ;;
    dev) echo "$t/bible_dev.txt $t/general_dev.txt $t/numbers_dev.txt" ;;
    test_bible) echo "$t/bible_test.txt" ;;
    test_general) echo "$t/general_test.txt $t/numbers_test.txt" ;;
    heldout_*) echo "$t/bible_test.txt $t/general_test.txt $t/numbers_test.txt" ;;
    *) echo "prepare_asr_synth.sh: SETS: unknown set '$1'" >&2; exit 2 ;;
  esac
}

for set in $sets; do
  texts=$(texts_of "$set")
  if [ -f "$out/.done-$set" ]; then
    echo "prepare_asr_synth.sh: $set: done already ($out/.done-$set)" >&2
    continue
  fi
  cap=$hmax
  case $set in train|dev) cap=$max ;; esac
  # shellcheck disable=SC2086
  perl "$here/data/asr_synth_jobs.pl" jobs "$set" "$cap" $texts >"$out/$set.jobs"
  d="$out/wav/$set"
  mkdir -p "$d"
  total=$(wc -l <"$out/$set.jobs")
  t0=$(date +%s)
  before=$(find "$d" -name '*.wav' | wc -l)
  n=0
  # Chunks of PROGRESS_EVERY utterances through xargs -P: a line of progress after each.
  while [ "$n" -lt "$total" ]; do
    sed -n "$((n + 1)),$((n + every))p" "$out/$set.jobs" | cut -f1-5 | tr '\n' '\0' |
      xargs -0 -P "$jobs" -n 1 sh -c 's=$1 d=$2; IFS=$(printf "\t"); set -f; set -- $3; exec sh "$s" "$d" "$@"' \
        sh "$here/data/asr_synth_one.sh" "$d"
    n=$((n + every))
    [ "$n" -gt "$total" ] && n=$total
    el=$(( $(date +%s) - t0 ))
    made=$(( n - before ))
    eta=$(awk -v e="$el" -v m="$made" -v r="$((total - n))" 'BEGIN { if (m > 0) printf "%d", e / m * r; else print "?" }')
    echo "prepare_asr_synth.sh: $set: $n/$total utterances ($((100 * n / total))%), ${el} s, ETA ${eta} s" >&2
  done
  # The utterances a synthesizer failed on (asr_synth_one.sh's ID.failed) are left out.
  failed=$(find "$d" -name '*.failed' | wc -l)
  [ "$failed" -eq 0 ] || echo "prepare_asr_synth.sh: $set: $failed utterances left out: the synthesizer failed ($d/*.failed)" >&2
  awk -F '\t' -v s="$set" -v d="$d" '{ f = d "/" $1 ".failed"; if ((getline l < f) > 0) { close(f); next }
    printf "wav/%s/%s.wav\t%s\n", s, $1, $6 }' "$out/$set.jobs" >"$out/$set.tsv"
  nsh=1 pcm=""
  [ "$set" = train ] && nsh=$shards && pcm=--write_pcm
  "$caf" --input_list="$out/$set.tsv" --generate_tfrecords --num_output_shards="$nsh" $pcm \
    --output_template="$out/$set.tfrecords-%5.5d-of-%5.5d" --progress_seconds=30
  touch "$out/.done-$set"
done
if [ "${KEEP_WAV:-1}" = 0 ]; then rm -rf "$out/wav"; fi
made=$(for s in $sets; do printf '%s %s, ' "$(wc -l <"$out/$s.tsv")" "$s"; done)
echo "prepare_asr_synth.sh: ${made%, } utterances in $out ($(( $(date +%s) - start )) s, $(du -sh "$out" | cut -f1))" >&2
