#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, converts Fashion-MNIST
# into a TensorFlow checkpoint, trains LeNet5 on it and evaluates the result.
#   scripts/quickstart.sh [LOGDIR]          (default /tmp/mnist/log)
#   STEPS=1000 scripts/quickstart.sh        a shorter run (default: the model's 5000 steps)
set -euo pipefail
cd "$(dirname "$0")/.."
LOGDIR=${1:-/tmp/mnist/log}
MODEL=${LINGVOC_MODEL:-image.mnist.LeNet5Fashion}
scripts/install-deps.sh
make -j"$(nproc)"
bin/keras2ckpt --dataset=fashion_mnist --out=/tmp/mnist/mnist
OVERRIDE=()
if [ -n "${STEPS:-}" ]; then OVERRIDE=(--model_params_override="train.max_steps: $STEPS"); fi
bin/trainer --model="$MODEL" --logdir="$LOGDIR" --run_locally=cpu --mode=sync "${OVERRIDE[@]}"
bin/evaler --model="$MODEL" --logdir="$LOGDIR" --dataset=Test --once
echo
echo "Test-set scores of the final checkpoint:"
cat "$(ls "$LOGDIR"/eval_test/score-*.txt | tail -1)"
