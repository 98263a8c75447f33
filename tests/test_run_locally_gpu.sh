#!/usr/bin/env bash
# --run_locally=gpu: a build without CUDA says so, a CUDA build (build-cuda/, make CUDA=1)
# on a machine without a visible GPU says so; both exit 2 and write nothing.
# With a GPU visible the CUDA build's own tests cover it (check_backend_ops).
source "$(dirname "$0")/lib.sh"
M=image.mnist.LeNet5

expect_exit 2 "--run_locally=gpu without CUDA" "$LV_BIN/trainer" --model=$M --logdir="$T/g" --run_locally=gpu
err_has "this build has no CUDA"
err_has "make CUDA=1"
check "nothing written in the log directory" test -z "$(ls -A "$T/g" 2>/dev/null)"
expect_exit 2 "--run_locally=gpu (evaler)" "$LV_BIN/evaler" --model=$M --logdir="$T/g" --run_locally=gpu --once
err_has "this build has no CUDA"
expect_exit 2 "--run_locally=gpux" "$LV_BIN/trainer" --model=$M --logdir="$T/g" --run_locally=gpux
err_has "expected cpu or gpu"
expect_exit 2 "--worker_gpus=1 without CUDA" "$LV_BIN/trainer" --model=$M --logdir="$T/g" --worker_gpus=1
err_has "this build has no CUDA"

CUDA_TRAINER="$LV_ROOT/build-cuda/bin/trainer"
if [ ! -x "$CUDA_TRAINER" ]; then
  skip_part "no CUDA build (make CUDA=1) to check its no-GPU message"
elif nvidia-smi -L >/dev/null 2>&1; then
  skip_part "a GPU is visible; the CUDA build's no-GPU message is not reachable here"
else
  expect_exit 2 "CUDA build, no GPU visible" "$CUDA_TRAINER" --model=$M --logdir="$T/g" --run_locally=gpu
  err_has "no GPU is visible"
  check "nothing written in the log directory" test -z "$(ls -A "$T/g" 2>/dev/null)"
fi
finish
