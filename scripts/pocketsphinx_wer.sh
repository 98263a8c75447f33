#!/bin/sh
# pocketsphinx_wer.sh TSV OUT [JOBS...] - CMU Sphinx (Debian's pocketsphinx 0.8 with its en-us
# model, pocketsphinx-en-us) on the utterances of an ASR corpus list, the baseline of issue 47:
# TSV holds path<TAB>transcript lines (prepare_asr_synth.sh's and prepare_asr_real.sh's .tsv;
# a relative path is relative to TSV's directory). Writes OUT in bin/decoder's decoder_out
# format (id, "ref: ...", "hyp 0: score 0: ...", blank line; id = the file's name without .wav,
# the records' uttid) and prints scripts/wer_by_voice.py's table of it (per voice with the
# JOBS files). Needs pocketsphinx and pocketsphinx-en-us (installed here when missing, as root
# or through sudo). One process at a time, ~0.1 s per second of audio.
set -eu
case ${1:-} in -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -ge 2 ] || { echo "usage: $0 TSV OUT [JOBS...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
tsv=$1 out=$2
shift 2
[ -s "$tsv" ] || { echo "pocketsphinx_wer.sh: $tsv is missing or empty" >&2; exit 2; }
command -v pocketsphinx_continuous >/dev/null || { . "$here/data/apt_ensure.sh"; apt_ensure pocketsphinx pocketsphinx-en-us; }
base=$(cd "$(dirname "$tsv")" && pwd)
tab=$(printf '\t')
: >"$out.tmp"
while IFS="$tab" read -r path text; do
  case $path in /*) ;; *) path="$base/$path" ;; esac
  [ -f "$path" ] || { echo "pocketsphinx_wer.sh: $path (in $tsv) is missing" >&2; exit 2; }
  id=$(basename "$path" .wav)
  hyp=$(pocketsphinx_continuous -infile "$path" -logfn /dev/null 2>/dev/null | tr '\n' ' ' | tr 'A-Z' 'a-z')
  printf '%s\nref: %s\nhyp 0: score 0: %s\n\n' "$id" "$(printf '%s' "$text" | tr 'A-Z' 'a-z')" "$hyp" >>"$out.tmp"
done <"$tsv"
mv "$out.tmp" "$out"
python3 "$here/wer_by_voice.py" "$out" "$@"
