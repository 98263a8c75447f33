#!/usr/bin/env bash
# The quality scripts (scripts/quality.sh, quality_asr.sh, quality_fusion.sh: hours-long
# runs, never run whole here) and the helpers they share (scripts/lib/quality.sh): --help,
# bad arguments exit 2 naming the variable, a missing executable exits 1, and the timed
# training q_train: 1 when the budget ran out (the trainer saved a checkpoint on SIGTERM),
# 0 at max_steps, exit 1 naming the stage when the trainer failed.
. "$(dirname "$0")/lib.sh"
S="$LV_ROOT/scripts"

for s in quality quality_asr quality_fusion; do
  expect_exit 0 "$s.sh --help" "$S/$s.sh" --help
  check "$s.sh --help prints its header" grep -q "^# $s.sh" "$T/out"
  expect_exit 2 "$s.sh with an unknown argument" "$S/$s.sh" --bogus
  err_has "usage: "
done
expect_exit 2 "quality.sh without a run name" "$S/quality.sh"
HOURS=abc expect_exit 2 "quality.sh HOURS=abc" "$S/quality.sh" transformer
err_has "quality.sh: HOURS=abc: expected a positive number of hours"
HOURS=0 expect_exit 2 "quality_asr.sh HOURS=0" "$S/quality_asr.sh"
err_has "HOURS=0: expected a positive number"
STAGE1=5 STAGE2=3 expect_exit 2 "quality_asr.sh STAGE1 above STAGE2" "$S/quality_asr.sh"
err_has "STAGE1 (5) must be below STAGE2 (3)"
MT_HOURS=-1 expect_exit 2 "quality_fusion.sh MT_HOURS=-1" "$S/quality_fusion.sh"
err_has "MT_HOURS=-1: expected a number of hours (0: no training)"
WEIGHTS="0 x" expect_exit 2 "quality_fusion.sh WEIGHTS with a non-number" "$S/quality_fusion.sh"
err_has "WEIGHTS: 'x' is not a weight"
LV_BIN=$T/nobin expect_exit 1 "quality_fusion.sh without the executables" "$S/quality_fusion.sh"
err_has "$T/nobin/trainer is missing: run make first"

# q_train with the real trainer on a Fashion-MNIST subset.
if ! ensure_fashion_mnist; then
  fail "keras2ckpt could not build the Fashion-MNIST checkpoint (apt-get install dataset-fashion-mnist)"
  finish; exit 1
fi
q_name=test bin=$LV_BIN
. "$S/lib/quality.sh"
check "q_seconds 0.5 is 1800" [ "$(q_seconds 0.5)" = 1800 ]
SMALL="input.ckpt: \"$FM\"; input.num_samples: 2000; input.batch_size: 32; cluster.num_threads: 1"
rc=0
q_train 60 "" --model=image.mnist.LeNet5Fashion --logdir="$T/a" \
  --model_params_override="$SMALL; train.max_steps: 3" >"$T/a.log" 2>&1 || rc=$?
check "q_train returns 0 when the trainer reaches max_steps" [ "$rc" -eq 0 ]
rc=0
q_train 3 "" --model=image.mnist.LeNet5Fashion --logdir="$T/b" \
  --model_params_override="$SMALL; train.max_steps: 100000000" >"$T/b.log" 2>&1 || rc=$?
check "q_train returns 1 when the budget runs out" [ "$rc" -eq 1 ]
check "the trainer saved a checkpoint on SIGTERM" grep -q "saving a checkpoint at step" "$T/b.log"
check "and it is listed" grep -q '^model_checkpoint_path: "ckpt-' "$T/b/train/checkpoint"
(q_train 60 " in stage 9" --model=image.mnist.NoSuchModel --logdir="$T/c" >"$T/c.log" 2>&1)
check "q_train exits 1 when the trainer fails" [ $? -eq 1 ]
check "naming the stage and the trainer's exit code" grep -q "test: the trainer failed in stage 9 (exit 2)" "$T/c.log"
finish
