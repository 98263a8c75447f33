#!/usr/bin/env bash
# Remakes the decoder's golden fixtures in this folder with the build in BIN (default
# bin): toy data (tests/lib.sh's generators, WPM vocabularies of 128 pieces), 20 training
# steps of each model of models.sh (checkpoint kept as NAME/ckpt-00000020.*), and that
# build's decoder outputs on them (decode.sh) as NAME/expected/. tests/test_decode_golden.sh
# checks that today's decoder writes the same bytes. Run it only when a change of decoder
# output is intended, and say why in the commit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
BIN=$(cd "${BIN:-$root/bin}" && pwd)
LV_ROOT=$root LV_BIN=$BIN
. "$root/tests/lib.sh"
set -e
. "$here/models.sh"
mkdir -p "$here/mt" "$here/punct"
gen_mt_pairs 7 20 "$here/mt"
sh "$root/scripts/build_wpm_vocab.sh" --input="$here/mt/train.en,$here/mt/train.es" --vocab_size=128 \
  --out="$here/mt/wpm.voc" >/dev/null 2>&1
"$BIN/wpm_encode_file" --source_filepaths="$here/mt/train.en" --target_filepaths="$here/mt/train.es" \
  --wpm_filepath="$here/mt/wpm.voc" --output_filepath="$here/mt/train.tfrecord" --num_shards=1 >/dev/null 2>&1
gen_punct_text 11 40 >"$here/punct/train.txt"
sh "$root/scripts/build_wpm_vocab.sh" --input="$here/punct/train.txt" --vocab_size=128 \
  --out="$here/punct/wpm.voc" >/dev/null 2>&1
# decode_text inputs: training sources, an empty line, invalid UTF-8, an unseen line.
{ head -3 "$here/mt/train.en"; echo; printf 'veto \xff\xfe ripa.\n'; echo 'ka ri su ne.'; } >"$here/mt/text.in"
{ head -2 "$here/punct/train.txt" | tr 'A-Z' 'a-z' | tr -d '[:punct:]'; echo; sed -n 3p "$here/punct/train.txt"
  printf 'where is jos\xc3\xa9 the caf\xc3\xa9\n'; } >"$here/punct/text.in"
for name in $GOLDEN_MODELS; do
  run=$T/run_$name
  "$BIN/trainer" --model="$(golden_var MODEL "$name")" --logdir="$run" --num_threads=2 \
    --model_params_override="$(golden_var OV "$name"); train.max_steps: 20; train.save_interval_steps: 20" \
    >"$T/train.log" 2>&1 || { cat "$T/train.log"; exit 1; }
  rm -rf "${here:?}/$name"
  mkdir -p "$here/$name"
  cp "$run"/train/ckpt-00000020.* "$here/$name/"
  bash "$here/decode.sh" "$BIN" "$name" "$here/$name/expected"
  echo "$name: $(head -c 300 "$here/$name/expected/score.txt" | tr '\n' ' ')"
done
