#!/usr/bin/env bash
# Trains image.mnist.LeNet5 for 300 steps, and the four golden sequence models of
# tests/data/decode_golden/models.sh (the Transformer, RNMT and punctuator tiny tests) for
# 20 steps, each with 1 and with 2 threads, and compares every tensor of the final
# checkpoint (all but the params text) with reference dumps made the same way by another
# build (e.g. the previous main), to prove a refactor left the CPU numerics bit for bit
# unchanged.
#
#   scripts/check_bitwise.sh make-ref REF_DIR    # with the old build's bin/
#   scripts/check_bitwise.sh compare  REF_DIR    # with the new build's bin/
#
# Needs the Fashion-MNIST checkpoint at /tmp/mnist/mnist (bin/keras2ckpt
# --dataset=fashion_mnist --out=/tmp/mnist/mnist). BIN (default bin) picks the build;
# MODELS (default: all) a subset, e.g. MODELS="transformer rnmt".
set -euo pipefail
mode=${1:?make-ref or compare}; ref=${2:?reference directory}
bin=${BIN:-bin}
. "$(dirname "$0")/../tests/data/decode_golden/models.sh"
models=${MODELS:-lenet5 $GOLDEN_MODELS}
mkdir -p "$ref"
status=0
for name in $models; do
  if [ "$name" = lenet5 ]; then
    M=image.mnist.LeNet5 steps=300 OV=""
  else
    M=$(golden_var MODEL "$name") steps=20 OV="$(golden_var OV "$name"); "
  fi
  for t in 1 2; do
    log=$(mktemp -d)
    "$bin/trainer" --model="$M" --logdir="$log" --run_locally=cpu --mode=sync --num_threads=$t \
      --model_params_override="${OV}train.max_steps: $steps; train.save_interval_steps: $steps" \
      >"$log/out.txt" 2>&1 || { cat "$log/out.txt"; exit 1; }
    "$bin/ckpt_inspect" --file_name="$log/train/ckpt-$(printf %08d $steps)" --all_tensors \
      --printoptions=threshold=100000000 | grep -v '^b' >"$log/dump.txt"
    f=$ref/$name.threads$t.txt
    if [ "$mode" = make-ref ]; then
      cp "$log/dump.txt" "$f"
      echo "$name, reference for $t thread(s): $(sha256sum <"$f" | cut -c1-16)"
    elif cmp -s "$log/dump.txt" "$f"; then
      echo "$name, $t thread(s): every tensor bit-identical to the reference"
    else
      echo "$name, $t thread(s): DIFFERS from the reference:"; diff "$f" "$log/dump.txt" | head -5
      status=1
    fi
    rm -rf "$log"
  done
done
exit $status
