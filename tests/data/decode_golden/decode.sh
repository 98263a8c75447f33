#!/usr/bin/env bash
# decode.sh BIN NAME OUT: runs BIN/decoder on the committed checkpoint of golden model NAME
# (models.sh): `--once` over its dataset, keeping decoder_out and the score file without
# its examples/sec line (a timing), and `--decode_text` over its text file. Writes
# OUT/decoder_out, OUT/score.txt and OUT/decode_text.out.
set -euo pipefail
bin=$1 name=$2 out=$3
. "$(dirname "$0")/models.sh"
M=$(golden_var MODEL "$name") DS=$(golden_var DATASET "$name") OV=$(golden_var OV "$name")
ck=$G/$name/ckpt-00000020
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
mkdir -p "$out"
"$bin/decoder" --model="$M" --logdir="$log" --once --checkpoint="$ck" --dataset="$DS" \
  --model_params_override="$OV" >"$log/stdout" 2>"$log/stderr" || { cat "$log/stderr" >&2; exit 1; }
lc=$(echo "$DS" | tr 'A-Z' 'a-z')
cp "$log/decoder_$lc/decoder_out_000000020" "$out/decoder_out"
grep -v '^examples/sec: ' "$log/decoder_$lc/score-00000020.txt" >"$out/score.txt"
"$bin/decoder" --model="$M" --logdir="$log" --decode_text=- --checkpoint="$ck" \
  --model_params_override="$OV" <"$G/$(golden_var TEXT "$name")" >"$out/decode_text.out" 2>"$log/stderr" ||
  { cat "$log/stderr" >&2; exit 1; }
