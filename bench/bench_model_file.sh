#!/usr/bin/env bash
# Model file against checkpoint for the golden tiny models (tests/data/decode_golden):
# bin/export's file size against the checkpoint's (index + data, with the optimizer's
# slots), and the library's load time of each (lv_model_load_file against lv_model_load
# with experiment, logdir and checkpoint; best of REPEATS=5). Prints a markdown table.
# Usage: bench/bench_model_file.sh
set -eu
cd "$(dirname "$0")/.."
make -s -j"$(nproc)" bin/export
. bench/build.sh
bench_build bench_model_file
. tests/data/decode_golden/models.sh
dir=$(mktemp -d /tmp/bench_model_file.XXXXXX)
trap 'rm -rf "$dir"' EXIT
echo "| model | checkpoint bytes | model file bytes | load, checkpoint (ms) | load, model file (ms) |"
echo "|---|---|---|---|---|"
for name in $GOLDEN_MODELS; do
  M=$(golden_var MODEL "$name") DS=$(golden_var DATASET "$name") OV=$(golden_var OV "$name")
  ck=$G/$name/ckpt-00000020
  bin/export --model="$M" --logdir="$dir/log" --checkpoint="$ck" --dataset="$DS" --model_params_override="$OV" \
    --out="$dir/$name.lvm" >/dev/null
  read -r _ tf _ tc < <("$bench_dir/bench_model_file" "${REPEATS:-5}" "$dir/$name.lvm" "$M" "$dir/log" "$ck" "$OV")
  echo "| $name ($M) | $(cat "$ck".* | wc -c) | $(wc -c <"$dir/$name.lvm") | $tc | $tf |"
done
