#!/bin/sh
# prepare_asr_real.sh OUT - a second test set of real speech for the asr.bible_tts
# experiments (dataset `Real`): the five LibriVox recordings of Debian's
# pocketsphinx-testdata (a reader of Sense and Sensibility, 16 kHz mono, 24.7 s in all)
# with their transcripts, made into AsrInput records by bin/create_asr_features:
#
#   OUT/real.tsv                          path<TAB>transcript (the package's lower-case
#                                         transcripts without <s>, </s> and the utterance id)
#   OUT/real.tfrecords-00000-of-00001     the records (uttid = the file's name)
#
# A model trained on espeak-ng's voices does badly on a human reader: the point is that the
# whole path (libsndfile, the frontend, the records, the decoder) runs on real audio:
#
#   bin/decoder --model=asr.bible_tts.LasSmall --logdir=/tmp/las --dataset=Real --once
#
# Env: PS_DATA (default /usr/share/pocketsphinx/test/data/librivox).
set -eu
if [ $# -ne 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  echo "usage: $0 OUT   (env: PS_DATA=/usr/share/pocketsphinx/test/data/librivox)" >&2
  [ $# -eq 1 ] && exit 0 || exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${LV_BIN:-$root/bin}
caf="$bin/create_asr_features"
[ -x "$caf" ] || { echo "prepare_asr_real.sh: $caf is missing; run make first" >&2; exit 1; }
data=${PS_DATA:-/usr/share/pocketsphinx/test/data/librivox}
if [ -z "${PS_DATA:-}" ]; then
  . "$here/data/apt_ensure.sh"
  apt_ensure pocketsphinx-testdata
fi
[ -f "$data/transcription" ] || { echo "prepare_asr_real.sh: $data/transcription is missing" >&2; exit 1; }
out=$1
mkdir -p "$out"
# Lines "<s> words </s> (uttid)" -> "DATA/uttid.wav<TAB>words".
sed -n 's/^<s> *\(.*[^ ]\) *<\/s> *(\([^)]*\)) *$/\2\t\1/p' "$data/transcription" |
  while IFS="$(printf '\t')" read -r id text; do
    [ -f "$data/$id.wav" ] || { echo "prepare_asr_real.sh: $data/$id.wav is missing" >&2; exit 1; }
    printf '%s/%s.wav\t%s\n' "$data" "$id" "$text"
  done >"$out/real.tsv"
n=$(wc -l <"$out/real.tsv")
[ "$n" -gt 0 ] || { echo "prepare_asr_real.sh: no utterance read from $data/transcription" >&2; exit 1; }
"$caf" --input_list="$out/real.tsv" --generate_tfrecords --num_output_shards=1 \
  --output_template="$out/real.tfrecords-%5.5d-of-%5.5d"
echo "prepare_asr_real.sh: $n utterances in $out/real.tfrecords-00000-of-00001"
