#!/usr/bin/env bash
# Lingvo's early stopping and DevBasedSchedule with the real trainer and evaler on the
# Fashion-MNIST subset: the evaler appends "<step> <value>" to
# <logdir>/eval_test/loss.history.txt for the metric task.train.early_stop watches; a
# trainer whose history shows no improvement for `window` steps stops (exit 0, a
# checkpoint at the step it stopped), and one with no such history trains to max_steps;
# a DevBasedSchedule halves the learning rate when the history stalls and checkpoints its
# factor. Also: Adafactor trains the model (the loss falls) and its factored slots are
# checkpointed under TF's names.
. "$(dirname "$0")/lib.sh"
if ! ensure_fashion_mnist; then
  fail "keras2ckpt could not build the Fashion-MNIST checkpoint (apt-get install dataset-fashion-mnist)"
  finish; exit 1
fi
M=image.mnist.LeNet5Fashion
BASE="input.ckpt: \"$FM\"; input.num_samples: 2000; input.batch_size: 32; train.save_interval_steps: 10; cluster.num_threads: 2"
ES="task.train.early_stop.window: 15; task.train.early_stop.metric_history.jobname: 'eval_test'; task.train.early_stop.metric_history.metric: 'loss'"
train() { "$LV_BIN/trainer" --model=$M --run_locally=cpu --mode=sync --log_interval_steps=10 "$@"; }
value() { "$LV_BIN/ckpt_inspect" --file_name="$1" --tensor_name="$2" --printoptions=threshold=100000000 | tail -n +2; }

# 1. The evaler keeps the history of the watched metric.
train --logdir="$T/a" --model_params_override="$BASE; train.max_steps: 20; $ES" >"$T/a.log" 2>&1
check "trainer exits 0" [ $? -eq 0 ]
check "trainer logs the early-stop setup" grep -q "early stop: training stops once $T/a/eval_test/loss.history.txt" "$T/a.log"
EVAL="input.ckpt: \"$FM\"; input.num_samples: 300; task.eval.eval_all_checkpoints: true; train.max_steps: 20; $ES"
"$LV_BIN/evaler" --model=$M --logdir="$T/a" --dataset=Test --timeout_secs=120 --model_params_override="$EVAL" >"$T/e.log" 2>&1
check "evaler exits 0" [ $? -eq 0 ]
H="$T/a/eval_test/loss.history.txt"
check "history file written" [ -f "$H" ]
check "one line per checkpoint, Lingvo's format" awk 'NF != 2 || $2 !~ /^[0-9]+\.[0-9][0-9][0-9][0-9][0-9][0-9]$/ {bad = 1} END {exit bad || NR != 3}' "$H"
check "steps 0, 10, 20" [ "$(cut -d' ' -f1 "$H" | tr '\n' ' ')" = "0 10 20 " ]
loss20=$(grep '^loss:' "$T/a/eval_test/score-00000020.txt" | cut -d' ' -f2)
check "the value is the score's loss ($loss20)" awk -v a="$(tail -1 "$H" | cut -d' ' -f2)" -v b="$loss20" 'BEGIN{d = a - b; exit !(d < 1e-5 && d > -1e-5)}'
check "no history for a metric nobody watches" [ ! -e "$T/a/eval_test/accuracy.history.txt" ]

# 2. A stalled history stops the resumed run at once; without early_stop it trains on.
printf '20 1.0\n30 2.0\n40 2.0\n' >"$H"
train --logdir="$T/a" --model_params_override="$BASE; train.max_steps: 60; $ES" >"$T/b.log" 2>&1
check "early-stopped trainer exits 0" [ $? -eq 0 ]
check "logs Lingvo's check line" grep -q "early stop check: best_step=20, last_step=40, stop=1" "$T/b.log"
check "logs the stop" grep -q "early stop at step 20" "$T/b.log"
check "no step trained past 20" [ ! -e "$T/a/train/ckpt-00000030.index" ]
printf '20 1.0\n30 0.5\n40 0.4\n' >"$H"
train --logdir="$T/a" --model_params_override="$BASE; train.max_steps: 30; $ES" >"$T/c.log" 2>&1
check "an improving history trains to max_steps" [ -f "$T/a/train/ckpt-00000030.index" ]
check "and logs best 40" grep -q "early stop check: best_step=40, last_step=40, stop=0" "$T/c.log"
expect_exit 2 "tfevent_file is refused" train --logdir="$T/x" --model_params_override="$BASE; train.max_steps: 1; $ES; task.train.early_stop.metric_history.tfevent_file: true"
err_has "tfevent_file: reading the metric from events files is not supported"

# 3. DevBasedSchedule: the history stalls for window steps -> the factor halves.
DEV="task.train.lr_schedule.cls: 'DevBasedSchedule'; task.train.lr_schedule.window: 5; task.train.lr_schedule.metric_history.jobname: 'eval_test'; task.train.lr_schedule.metric_history.metric: 'loss'"
mkdir -p "$T/d/eval_test"
# (Lingvo's best_step takes step 0 as "no best yet": a line at step 0 is always replaced.)
printf '1 2.0\n10 2.5\n' >"$T/d/eval_test/loss.history.txt"
train --logdir="$T/d" --model_params_override="$BASE; train.max_steps: 10; $DEV" >"$T/d.log" 2>&1
check "DevBasedSchedule run exits 0" [ $? -eq 0 ]
check "logs the decay" grep -q "DevBasedSchedule: step 0: loss best at step 1, last at 10: learning rate factor now 0.5" "$T/d.log"
check "lr_schedule is 0.5 in the step metrics" grep -q "lr_schedule:0.5 " "$T/d.log"
check "checkpoint holds the factor" [ "$(value "$T/d/train/ckpt-00000010" LRSched/cur_factor/var)" = "0.5" ]
check "and ref_step" [ "$(value "$T/d/train/ckpt-00000010" LRSched/ref_step/var)" = "10" ]
"$LV_BIN/trainer" --model=$M --mode=inspect_params --logdir="$T/d" --model_params_override="$BASE; $DEV; $ES" >"$T/ip.log" 2>&1
cp "$T/d/train-params.txt" "$T/ip.txt"
check "inspect_params shows the schedule's metric_history" grep -q "task.train.lr_schedule.metric_history.jobname : 'eval_test'" "$T/ip.txt"
check "inspect_params shows early_stop" grep -q "task.train.early_stop.window : 15" "$T/ip.txt"

# 4. Adafactor trains LeNet5 and checkpoints TF's slots (fc/w is factored).
ADA="task.train.optimizer.cls: 'XLAShardingAdafactor'; task.train.learning_rate: 0.01"
train --logdir="$T/f" --model_params_override="$BASE; train.max_steps: 40; $ADA" >"$T/f.log" 2>&1
check "Adafactor run exits 0" [ $? -eq 0 ]
first=$(grep -o ' loss:[0-9.e+-]*' "$T/f.log" | head -1 | cut -d: -f2)
last=$(grep -o ' loss:[0-9.e+-]*' "$T/f.log" | tail -1 | cut -d: -f2)
check "Adafactor: the loss falls ($first -> $last)" awk "BEGIN{exit !($last < $first * 0.8)}"
"$LV_BIN/ckpt_inspect" --file_name="$T/f/train/ckpt-00000040" >"$T/f.vars" 2>&1
check "factored slots of fc/w under TF's names" grep -q "lenet5/fc/w/var/Adafactor_1" "$T/f.vars"
"$LV_BIN/trainer" --model=$M --mode=inspect_params --logdir="$T/f" --model_params_override="$BASE; $ADA" >"$T/ipf.log" 2>&1
cp "$T/f/train-params.txt" "$T/ipf.txt"
check "inspect_params shows Adafactor's params" grep -q "task.train.optimizer.min_dim_size_to_factor : 128" "$T/ipf.txt"
finish
