#!/usr/bin/env bash
# End to end: keras2ckpt -> trainer -> evaler on a Fashion-MNIST subset with the real
# executables. Loss falls and accuracy beats chance; a SIGKILLed and restarted run ends
# with exactly the weights of an uninterrupted one; SIGTERM saves and exits 0; the evaler
# scores every checkpoint; bad input exits 2 with a clear message and overwrites nothing.
. "$(dirname "$0")/lib.sh"
if ! ensure_fashion_mnist; then
  fail "keras2ckpt could not build the Fashion-MNIST checkpoint (apt-get install dataset-fashion-mnist)"
  finish; exit 1
fi
M=image.mnist.LeNet5Fashion
SMALL="input.ckpt: \"$FM\"; input.num_samples: 4000; input.batch_size: 64; train.save_interval_steps: 20; train.max_steps: 100; cluster.num_threads: 2"
TRAIN=("$LV_BIN/trainer" --model=$M --run_locally=cpu --mode=sync --log_interval_steps=20)
train() { "${TRAIN[@]}" "$@"; }

# 1. Training: the loss falls.
train --logdir="$T/a" --model_params_override="$SMALL" >"$T/a.log" 2>&1
check "trainer exits 0" [ $? -eq 0 ]
first=$(grep -o ' loss:[0-9.e+-]*' "$T/a.log" | head -1 | cut -d: -f2)
last=$(grep -o ' loss:[0-9.e+-]*' "$T/a.log" | tail -1 | cut -d: -f2)
check "loss falls ($first -> $last)" awk "BEGIN{exit !($last < $first * 0.8)}"
check "checkpoint at max_steps" [ -f "$T/a/train/ckpt-00000100.index" ]
check "state file names it" grep -q 'model_checkpoint_path: ".*ckpt-00000100"' "$T/a/train/checkpoint"
check "control/params.txt" grep -q "^task.train.learning_rate : 0.001$" "$T/a/control/params.txt"
check "control/model_analysis.txt" grep -q "total #params: 763,810" "$T/a/control/model_analysis.txt"
check "trainer events file" ls "$T"/a/train/events.out.tfevents.* >/dev/null

# 2. The evaler scores every checkpoint (eval_all_checkpoints) on 1000 test images.
EVAL="input.ckpt: \"$FM\"; input.num_samples: 1000; task.eval.eval_all_checkpoints: true; train.max_steps: 100"
"$LV_BIN/evaler" --model=$M --logdir="$T/a" --dataset=Test --timeout_secs=120 --model_params_override="$EVAL" >"$T/e.log" 2>&1
check "evaler exits 0" [ $? -eq 0 ]
n_ckpt=$(grep -c all_model_checkpoint_paths "$T/a/train/checkpoint")
n_score=$(ls "$T"/a/eval_test/score-*.txt | wc -l)
check "a score file per checkpoint ($n_score of $n_ckpt)" [ "$n_score" -eq "$n_ckpt" ]
check "processed_ckpts.txt lists them" [ "$(wc -l <"$T/a/eval_test/processed_ckpts.txt")" -eq "$n_ckpt" ]
acc=$(grep '^accuracy:' "$T/a/eval_test/score-00000100.txt" | cut -d' ' -f2)
check "test accuracy beats chance (accuracy $acc)" awk "BEGIN{exit !($acc > 0.5)}"
check "score file has Lingvo's tags" grep -q '^acc5: ' "$T/a/eval_test/score-00000100.txt"
check "total_samples is 1000" grep -q '^total_samples: 1000$' "$T/a/eval_test/score-00000100.txt"
# Run again: nothing new to evaluate, it exits at once.
expect_exit 0 "evaler rerun is idempotent" "$LV_BIN/evaler" --model=$M --logdir="$T/a" --model_params_override="$EVAL"
check "no checkpoint evaluated twice" [ "$(wc -l <"$T/a/eval_test/processed_ckpts.txt")" -eq "$n_ckpt" ]

# 3. SIGKILL mid-run, restart: same final weights as the uninterrupted run.
# Started directly (not through the function) so that $! is the trainer itself.
"${TRAIN[@]}" --logdir="$T/b" --model_params_override="$SMALL" >"$T/b1.log" 2>&1 &
pid=$!
wait_ckpt_listed "$T/b/train" 40
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
check "killed before the end" [ ! -f "$T/b/train/ckpt-00000100.index" ]
train --logdir="$T/b" --model_params_override="$SMALL" >"$T/b2.log" 2>&1
check "restart exits 0" [ $? -eq 0 ]
check "restart resumed from a checkpoint" grep -q "restored .* tensors" "$T/b2.log"
# Every tensor but the params text (it names the logdir), all values printed in full.
ckpt_dump "$T/a/train/ckpt-00000100" >"$T/wa"
ckpt_dump "$T/b/train/ckpt-00000100" >"$T/wb"
check "dumps are complete" [ "$(grep -c tensor_name "$T/wa")" -eq 21 ]
check "same final weights and Adam slots" cmp -s "$T/wa" "$T/wb"
# Every tensor, the params string tensor included (UBSan once caught a memcpy from NULL
# there: `make asan` runs this).
expect_exit 0 "ckpt_inspect --all_tensors on a trainer checkpoint" "$LV_BIN/ckpt_inspect" \
  --file_name="$T/a/train/ckpt-00000100" --all_tensors
check "--all_tensors prints the params string tensor" grep -q "^tensor_name:  _lingvoc/params_txt" "$T/out"
check "Adam slots saved under TF names" grep -q '^lenet5/fc/w/var/Adam_1 (DT_FLOAT) \[2450,300\]' <("$LV_BIN/ckpt_inspect" --file_name="$T/a/train/ckpt-00000100")

# 4. SIGTERM: checkpoint and exit 0.
# start_long DIR: a long run in the background ($pid), returning once it is past step 20.
start_long() {
  "${TRAIN[@]}" --logdir="$1" --model_params_override="$SMALL; train.max_steps: 100000; train.save_interval_steps: 100000" >"$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "step:     20" "$1.log" 2>/dev/null && break; sleep 0.05; done
}
# stopped_ok WHAT DIR: the trainer ($pid, signalled) exits 0 having saved a checkpoint past step 0.
stopped_ok() {
  wait $pid
  check "$1 exits 0" [ $? -eq 0 ]
  local last_ckpt=$(grep -o 'ckpt-[0-9]*' "$2/train/checkpoint" | tail -1)
  check "$1 saved a checkpoint past step 0 ($last_ckpt)" [ "$last_ckpt" != "ckpt-00000000" ]
}
start_long "$T/c"
expect_exit 2 "a second trainer on the same logdir" train --logdir="$T/c" --model_params_override="$SMALL"
err_has "another trainer (pid $pid) is already training"
kill -TERM $pid
stopped_ok "SIGTERM" "$T/c"
# The same SIGTERM delivered twice within a second (timeout and batch schedulers signal the
# process and its process group): one request, still a checkpoint and exit 0.
start_long "$T/c2"
kill -TERM $pid; sleep 0.05; kill -TERM $pid 2>/dev/null
stopped_ok "SIGTERM twice within a second" "$T/c2"

# 5. Bad input: exit 2, a clear message, nothing overwritten.
expect_exit 2 "unknown model" "$LV_BIN/trainer" --model=image.mnist.LeNet6 --logdir="$T/x"
err_has "image.mnist.LeNet5"
expect_exit 2 "typo'd key" "$LV_BIN/trainer" --model=$M --logdir="$T/x" --model_params_override="task.train.learnin_rate: 1"
err_has "learning_rate"
expect_exit 2 "wrong type" "$LV_BIN/trainer" --model=$M --logdir="$T/x" --model_params_override="train.max_steps: ten"
err_has "train.max_steps"
expect_exit 2 "malformed override" "$LV_BIN/trainer" --model=$M --logdir="$T/x" --model_params_override="train.max_steps=5"
expect_exit 2 "--run_locally=tpu" "$LV_BIN/trainer" --model=$M --logdir="$T/x" --run_locally=tpu
err_has "does not run on TPUs"
expect_exit 2 "unknown flag" "$LV_BIN/trainer" --model=$M --logdir="$T/x" --max_steps=5
err_has "unknown flag --max_steps"
expect_exit 2 "missing dataset checkpoint" "$LV_BIN/trainer" --model=$M --logdir="$T/x" --model_params_override="input.ckpt: \"$T/nope/fm\""
err_has "keras2ckpt"
touch "$T/file"
expect_exit 2 "unwritable logdir" "$LV_BIN/trainer" --model=$M --logdir="$T/file/log" --model_params_override="$SMALL"
# Move the run (checkpoint paths in the state file are relative) and corrupt its last checkpoint.
mv "$T/a" "$T/d"
data="$T/d/train/ckpt-00000100.data-00000-of-00001"
printf '\x55' | dd of="$data" bs=1 seek=1000 conv=notrunc status=none
files() { ls "$T"/d/train/* | grep -v '/LOCK$'; }  # LOCK holds the pid of the last trainer
sum_before=$(md5sum $(files) | md5sum)
expect_exit 2 "corrupt checkpoint: evaler" "$LV_BIN/evaler" --model=$M --logdir="$T/d" --once --model_params_override="$EVAL"
err_has "ckpt-00000100"
expect_exit 2 "corrupt checkpoint: trainer resume" train --logdir="$T/d" --model_params_override="$SMALL; train.max_steps: 120"
check "nothing overwritten" [ "$(md5sum $(files) | md5sum)" = "$sum_before" ]

# 6. --help and inspect modes.
for b in trainer evaler keras2ckpt ckpt_inspect; do expect_exit 0 "$b --help" "$LV_BIN/$b" --help; done
expect_exit 0 "inspect_params" "$LV_BIN/trainer" --model=$M --logdir="$T/i" --mode=inspect_params
check "train-params.txt and test-params.txt" [ -f "$T/i/train-params.txt" -a -f "$T/i/test-params.txt" ]
check "inspect_params shows the dataset" grep -q "^input.cls : 'MnistTestInput'$" "$T/i/test-params.txt"
# ckpt_inspect on a train directory reads its latest checkpoint; --all_tensor_names lists names only.
expect_exit 0 "ckpt_inspect DIR --all_tensor_names" "$LV_BIN/ckpt_inspect" --file_name="$T/b/train" --all_tensor_names
check "22 names of the latest checkpoint (21 tensors and the params text)" [ "$(grep -c '^tensor_name:  ' "$T/out")" -eq 22 ]
check "names only" grep -qx 'tensor_name:  lenet5/fc/w/var' "$T/out"
err_has "ckpt-00000100"
expect_exit 2 "ckpt_inspect: --all_tensors with --all_tensor_names" "$LV_BIN/ckpt_inspect" --file_name="$T/b/train" \
  --all_tensors --all_tensor_names
mkdir -p "$T/empty"
expect_exit 2 "ckpt_inspect on a directory without checkpoints" "$LV_BIN/ckpt_inspect" --file_name="$T/empty"
err_has "no checkpoint"
# inspect_model builds the model only: it needs no dataset.
expect_exit 0 "inspect_model without the dataset" "$LV_BIN/trainer" --model=$M --logdir="$T/im" --mode=inspect_model \
  --model_params_override="input.ckpt: \"$T/no/such/dataset\""
check "inspect_model lists the variables" grep -q "lenet5/fc/w/var" "$T/out"
expect_exit 0 "inspect_input" "$LV_BIN/trainer" --model=$M --mode=inspect_input --dataset=Test --inspect_input_batches=2 \
  --model_params_override="input.ckpt: \"$FM\"; input.batch_size: 7"
check "inspect_input prints two batches with their keys" \
  [ "$(grep -c '^batch ' "$T/out")" -eq 2 -a "$(grep -c '^  raw  *uint8  *\[7,28,28,1\]' "$T/out")" -eq 2 ]
expect_exit 2 "inspect_input of an unknown dataset" "$LV_BIN/trainer" --model=$M --mode=inspect_input --dataset=Nope
finish
