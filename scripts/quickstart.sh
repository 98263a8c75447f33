#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, converts Fashion-MNIST
# into a TensorFlow checkpoint, trains LeNet5 on it and evaluates the result.
#   scripts/quickstart.sh [LOGDIR]          (default /tmp/mnist/log)
#   STEPS=1000 scripts/quickstart.sh        a shorter run (default: the model's 5000 steps)
#   LOG_EVERY=N                             a progress line every N steps (default 100)
#   QUICKSTART_DATA=PREFIX                  the checkpoint of Fashion-MNIST (default
#                                           /tmp/mnist/mnist, the experiment file's)
#   QUICKSTART_OVERRIDE='key: value; ...'   more --model_params_override for both runs
# Prints a few lines per step and the trainer's progress (on a terminal one line that
# updates in place, with the ETA); each step's whole output goes to a file under
# QUICKSTART_LOGS (default LOGDIR/../quickstart-logs), named as the step starts. A failed
# step prints its log's last 30 lines and path and exits non-zero.
# Ctrl-C stops the training (the trainer saves a checkpoint) and goes on to evaluate it.
set -euo pipefail
cd "$(dirname "$0")/.."
LOGDIR=${1:-/tmp/mnist/log}
MODEL=${LINGVOC_MODEL:-image.mnist.LeNet5Fashion}
DATA=${QUICKSTART_DATA:-/tmp/mnist/mnist}
overrides=()
if [ "$DATA" != /tmp/mnist/mnist ]; then overrides+=("input.ckpt: \"$DATA\""); fi
if [ -n "${STEPS:-}" ]; then overrides+=("train.max_steps: $STEPS"); fi
if [ -n "${QUICKSTART_OVERRIDE:-}" ]; then overrides+=("$QUICKSTART_OVERRIDE"); fi
override=()
if [ ${#overrides[@]} -gt 0 ]; then override=(--model_params_override="$(IFS=';'; echo "${overrides[*]}")"); fi
LOGS=${QUICKSTART_LOGS:-$(dirname "$LOGDIR")/quickstart-logs}
lv_name=quickstart
. scripts/lib/progress.sh
mkdir -p "$LOGS"
echo "quickstart: logs in $LOGS/"

echo "[1/5] packages (scripts/install-deps.sh)"
LINGVOC_DEPS_LOG=$LOGS/install-deps.log scripts/install-deps.sh

echo "[2/5] build (make)"
scripts/quiet-make.sh "$LOGS/build.log" all

echo "[3/5] Fashion-MNIST as a checkpoint: $DATA (log: $LOGS/keras2ckpt.log)"
: >"$LOGS/keras2ckpt.log"
lv_logged "$LOGS/keras2ckpt.log" keras2ckpt bin/keras2ckpt --dataset=fashion_mnist --out="$DATA"

echo "[4/5] training $MODEL in $LOGDIR (log: $LOGS/trainer.log)"
lv_progress "$LOGS/trainer.log" trainer trainer train 0 bin/trainer --model="$MODEL" --logdir="$LOGDIR" \
  --run_locally=cpu --mode=sync --log_interval_steps="${LOG_EVERY:-100}" "${override[@]}"
grep -o 'trained to step [0-9]* in [0-9.]* s' "$LOGS/trainer.log" | tail -1 | sed 's/^/  /' || true

echo "[5/5] evaluating the last checkpoint on the test set (log: $LOGS/evaler.log)"
: >"$LOGS/evaler.log"
lv_logged "$LOGS/evaler.log" evaler bin/evaler --model="$MODEL" --logdir="$LOGDIR" --dataset=Test --once \
  "${override[@]}"
score=$(ls "$LOGDIR"/eval_test/score-*.txt | tail -1)
echo
echo "Test-set scores of the final checkpoint ($score):"
cat "$score"
