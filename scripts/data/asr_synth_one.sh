#!/bin/sh
# asr_synth_one.sh OUTDIR ID SYNTH VOICE RATE TEXT - one utterance of
# scripts/prepare_asr_synth.sh: OUTDIR/ID.wav, 16 kHz mono 16-bit, 2 dB below the
# synthesizer's level (espeak-ng's peaks clip when resampled). Written to a temporary name
# first, so that an interrupted run leaves no partial WAV; an existing WAV is kept (resume).
# sox -R: repeatable dither (without it sox seeds its dither from the clock, and the same
# text gives other bytes each run).
set -eu
out=$1 id=$2 synth=$3 voice=$4 rate=$5 text=$6
wav="$out/$id.wav"
[ -s "$wav" ] && exit 0
[ -f "$out/$id.failed" ] && exit 0
tmp="$out/.$id.$$"
printf '%s\n' "$text" >"$tmp.txt"
rc=0
case $synth in
  espeak) espeak-ng -v "$voice" -s "$rate" -f "$tmp.txt" -w "$tmp.raw.wav" || rc=$? ;;
  flite) flite -voice "$voice" -f "$tmp.txt" -o "$tmp.raw.wav" --setf duration_stretch="$rate" || rc=$? ;;
  festival) (text2wave -eval "(voice_$voice)" -eval "(Parameter.set 'Duration_Stretch $rate)" "$tmp.txt" \
              -o "$tmp.raw.wav" >/dev/null) 2>/dev/null || rc=$? ;;
  *) echo "asr_synth_one.sh: unknown synthesizer $synth" >&2; exit 2 ;;
esac
# A synthesizer that fails on a text (festival's ked_diphone crashes on a few lines, the same
# ones every run) leaves OUTDIR/ID.failed instead of a WAV: prepare_asr_synth.sh leaves the
# utterance out of the set and counts it.
if [ "$rc" -ne 0 ] || [ ! -s "$tmp.raw.wav" ]; then
  echo "$synth $voice exit $rc" >"$out/$id.failed"
  echo "asr_synth_one.sh: $id: $synth $voice failed (exit $rc): left out" >&2
  rm -f "$tmp.txt" "$tmp.raw.wav"
  exit 0
fi
sox -q -R "$tmp.raw.wav" -r 16000 -c 1 -b 16 "$tmp.wav" gain -2
mv "$tmp.wav" "$wav"
rm -f "$tmp.txt" "$tmp.raw.wav"
