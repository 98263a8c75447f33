#!/usr/bin/env bash
# Lingvo/absl habits: --job and --mode mean what they say (or are rejected naming the
# program that runs them), flags own the params they name (over a params file), absl's
# --flagfile / --v / --vmodule / --helpshort / --helpfull, --enable_check_numerics, the
# evaler learning train.max_steps from the trainer's checkpoint and reporting a finished
# log directory, no empty events files from no-op starts, and every experiment in
# experiments/ resolving its params.
. "$(dirname "$0")/lib.sh"
ensure_fashion_mnist || { fail "keras2ckpt"; finish; exit 1; }
M=image.mnist.LeNet5Fashion
OV="input.ckpt: \"$FM\"; input.num_samples: 256; input.batch_size: 32"
TR="$LV_BIN/trainer"
EV="$LV_BIN/evaler"

# Params an override or a flag cannot break (exit 2 naming them, never an abort): a group
# set to NoneType, task swapped for a non-task class, a dotted --dataset, --task != 0,
# --checkpoint without --once, a negative --timeout_secs or --log_interval_steps.
expect_exit 2 "override task.train: NoneType" "$TR" --model=$M --logdir="$T/x" --model_params_override="task.train: NoneType"
err_has "task.train must be a params group, not None"
expect_exit 2 "override cluster: NoneType" "$TR" --model=$M --logdir="$T/x" --model_params_override="cluster: NoneType"
err_has "cluster must be a params group, not None"
expect_exit 2 "override task.cls: 'Adam'" "$TR" --model=$M --logdir="$T/x" --model_params_override="task.cls: 'Adam'"
err_has "task.cls is 'Adam', which is not a task class"
expect_exit 2 "evaler --dataset=Train.cls" "$EV" --model=$M --logdir="$T/x" --dataset=Train.cls --once
err_has "has no dataset Train.cls"
expect_exit 2 "evaler --dataset=Train.tokenizer (a group, not a dataset)" "$EV" --model=$M --logdir="$T/x" \
  --dataset=Train.tokenizer --once
err_has "has no dataset Train.tokenizer"
# Datasets beyond Lingvo's six names (an experiment's own, as Lingvo's params-class methods).
expect_exit 0 "inspect_evaler lists an experiment's own datasets" "$TR" --model=asr.synth_en.LasSmall \
  --logdir="$T/synth" --mode=inspect_evaler
check "own datasets after Lingvo's" grep -q "^dev,test,real,testgeneral,heldoutespeak,heldoutflite,heldoutfestival$" "$T/out"
expect_exit 2 "a dataset the experiment lacks lists its own" "$EV" --model=asr.synth_en.LasSmall --logdir="$T/synth" \
  --dataset=HeldoutNone --once
err_has "available datasets are: [Train, Dev, Test, Real, testgeneral, heldoutespeak, heldoutflite, heldoutfestival]"
expect_exit 2 "trainer --task=3" "$TR" --model=$M --logdir="$T/x" --task=3
err_has "--task may only be 0"
expect_exit 2 "evaler --checkpoint without --once" "$EV" --model=$M --logdir="$T/x" --model_params_override="$OV" \
  --checkpoint="$T/x/train/ckpt-1"
err_has "goes with --once"
expect_exit 2 "evaler --timeout_secs=-5" "$EV" --model=$M --logdir="$T/x" --model_params_override="$OV" --timeout_secs=-5
err_has "--timeout_secs=-5: expected >= 0"
expect_exit 2 "trainer --log_interval_steps=0" "$TR" --model=$M --logdir="$T/x" --log_interval_steps=0
err_has "--log_interval_steps=0: expected >= 1"

# --job / --mode
expect_exit 2 "trainer --job=evaler_test" "$TR" --model=$M --logdir="$T/x" --job=evaler_test
err_has "bin/trainer does not run evaler jobs; run bin/evaler"
expect_exit 2 "trainer --job=decoder_test" "$TR" --model=$M --logdir="$T/x" --job=decoder_test
err_has "does not run decoder jobs"
expect_exit 2 "trainer --job=ps" "$TR" --model=$M --logdir="$T/x" --job=ps
err_has "'ps' is not one of them"
expect_exit 2 "trainer --job=trainer --mode=sync" "$TR" --model=$M --logdir="$T/x" --job=trainer --mode=sync
err_has "asynchronous trainer"
expect_exit 2 "trainer --mode=bogus" "$TR" --model=$M --logdir="$T/x" --mode=bogus
err_has "bin/trainer takes sync, async"
expect_exit 2 "evaler --mode=inspect_params" "$EV" --model=$M --logdir="$T/x" --mode=inspect_params
err_has "is a trainer mode: run bin/trainer --mode=inspect_params"
expect_exit 2 "evaler --job=evaler_dev --dataset=Test" "$EV" --model=$M --logdir="$T/x" --job=evaler_dev --dataset=Test
err_has "evaluates dataset dev but --dataset=Test"
expect_exit 2 "evaler --job=trainer_client" "$EV" --model=$M --logdir="$T/x" --job=trainer_client
err_has "that is a trainer job; run bin/trainer"
expect_exit 2 "evaler --job=evaler_once_test (no checkpoint)" "$EV" --model=$M --logdir="$T/x" --job=evaler_once_test
err_has "expected evaler_once_<dataset>@<checkpoint prefix>"
"$EV" --help >"$T/out"
check "evaler --help lists no trainer-only modes" sh -c "! grep -q inspect_params '$T/out' || grep -q \"inspect modes are bin/trainer's\" '$T/out'"
check "evaler --help has no inspect_input" sh -c "! grep -q inspect_input '$T/out'"

# absl flags
"$TR" --help >"$T/out"
check "--help omits absl's flags" sh -c "! grep -q -- '^  --vmodule (' '$T/out' && grep -q -- '--helpfull' '$T/out'"
"$TR" --helpfull >"$T/out"
check "--helpfull lists --vmodule and --flagfile" sh -c "grep -q -- '--vmodule' '$T/out' && grep -q -- '--flagfile' '$T/out'"
"$TR" --helpshort >"$T/out"
check "--helpshort prints the program's flags" grep -q -- "--log_interval_steps" "$T/out"
printf '# a comment\n\n--model=%s\n// another\n  --bogus_flag=1\n' $M >"$T/bad.flags"
expect_exit 2 "bad line in a flagfile" "$TR" --flagfile="$T/bad.flags"
err_has "$T/bad.flags:5: unknown flag --bogus_flag"
expect_exit 2 "missing flagfile" "$TR" --flagfile="$T/nope.flags"
err_has "--flagfile=$T/nope.flags: cannot open"
expect_exit 2 "bad --vmodule" "$TR" --vmodule=trainer
err_has "expected pattern=N"
expect_exit 2 "--enable_asserts=false" "$TR" --model=$M --logdir="$T/x" --enable_asserts=false
err_has "--enable_asserts=false is not supported"
printf -- '--model=%s\n--logdir=%s\n--model_params_override=%s; train.max_steps: 3\n' $M "$T/run" "$OV" >"$T/run.flags"
expect_exit 0 "trainer from a flagfile, --v=1" "$TR" --flagfile="$T/run.flags" --v=1
check "--v=1 logs every step" sh -c "[ \$(grep -c 'step [0-9]*: loss' '$T/err') -eq 3 ]"
grep -o 'step [0-9]*: loss.*' "$T/err" >"$T/sync.steps"
expect_exit 0 "--vmodule=train*=1 (another run dir)" "$TR" --flagfile="$T/run.flags" --logdir="$T/run2" --vmodule='train*=1'
check "--vmodule turns on the trainer's lines" sh -c "[ \$(grep -c 'step [0-9]*: loss' '$T/err') -eq 3 ]"
expect_exit 0 "--vmodule=evaler=1 leaves the trainer quiet" "$TR" --flagfile="$T/run.flags" --logdir="$T/run3" --vmodule='evaler=1'
check "no per-step lines" sh -c "! grep -q 'step [0-9]*: loss' '$T/err'"
check "the control params record the sync trainer job" grep -q "cluster.job : 'trainer_client'" "$T/run/control/params.txt"

# task.train.max_steps is not what the runners read: a warning names train.max_steps.
expect_exit 0 "task.train.max_steps override" "$TR" --flagfile="$T/run.flags" --logdir="$T/tms" --model_params_override="$OV; train.max_steps: 1; task.train.max_steps: 2"
err_has "the runners use train.max_steps"

# A no-op start (already at max_steps) writes no events file.
n0=$(ls "$T/run/train" | grep -c tfevents)
expect_exit 0 "trainer at max_steps" "$TR" --flagfile="$T/run.flags"
err_has "nothing to train"
check "no new events file from a no-op start" [ "$(ls "$T/run/train" | grep -c tfevents)" -eq "$n0" ]

# --mode=async runs (one replica: the same updates) and records the async job.
expect_exit 0 "trainer --mode=async" "$TR" --flagfile="$T/run.flags" --logdir="$T/async" --mode=async --v=1
grep -o 'step [0-9]*: loss.*' "$T/err" >"$T/async.steps"
check "async params" sh -c "grep -q \"cluster.job : 'trainer'\" '$T/async/control/params.txt' && grep -q \"cluster.mode : 'async'\" '$T/async/control/params.txt'"
check "async and sync steps are identical (loss, grad norm)" cmp "$T/async.steps" "$T/sync.steps"

# The evaler learns train.max_steps (3) from the trainer's checkpoint, stops, and
# records its own job.
expect_exit 0 "evaler without the max_steps override stops" timeout 120 "$EV" --model=$M --logdir="$T/run" --job=evaler_test --model_params_override="$OV"
err_has "train.max_steps is 3 in the trainer's params"
check "eval params record the evaler job" sh -c "grep -q \"cluster.job : 'evaler_test'\" '$T/run/eval_test/params.txt' && grep -q 'cluster.do_eval : True' '$T/run/eval_test/params.txt'"
n1=$(ls "$T/run/eval_test" | grep -c tfevents)
expect_exit 0 "evaler on a finished log directory" timeout 60 "$EV" --model=$M --logdir="$T/run" --model_params_override="$OV"
err_has "nothing left to evaluate"
err_has "accuracy:"
check "no new events file on a finished log directory" [ "$(ls "$T/run/eval_test" | grep -c tfevents)" -eq "$n1" ]

# Flags own what they name: another run's inspect_params dump does not move this run to
# that run's logdir, nor swap the dataset's input.
expect_exit 0 "inspect_params" "$TR" --model=$M --logdir="$T/other" --mode=inspect_params --model_params_override="$OV"
# The Test input reads the experiment file's /tmp/mnist/mnist, which only a machine that
# ran the quick start has: a copy of the experiments points it at this run's data.
cp -r "$LV_ROOT/experiments" "$T/exp"
sed -i "s|/tmp/mnist/mnist|$FM|g" "$T/exp/image/mnist.cfg"
expect_exit 0 "evaler with another run's train params file" env LINGVOC_EXPERIMENTS="$T/exp" timeout 120 "$EV" \
  --model=$M --logdir="$T/run" --once --model_params_file_override="$T/other/train-params.txt"
err_has "sets cluster.logdir to '$T/other', but --logdir owns it"
err_has "--dataset owns input.*"
check "the scores went to this run's logdir" [ ! -e "$T/other/eval_test" ]
check "the Test input was used" grep -q "input.cls : 'MnistTestInput'\|data : 'x_test'" "$T/run/eval_test/params.txt"

# --enable_check_numerics (default): a NaN/Inf gradient stops the trainer naming the
# variable; without it the step is skipped and counted.
NAN="$OV; train.max_steps: 4; task.train.learning_rate: 1e30; task.train.clip_gradient_norm_to_value: 0"
expect_exit 1 "a non-finite gradient stops the trainer" "$TR" --model=$M --logdir="$T/nan" --model_params_override="$NAN"
err_has "step 1: the gradient of lenet5/"
err_has "is not finite (--enable_check_numerics stops here"
expect_exit 0 "--noenable_check_numerics skips NaN steps" "$TR" --model=$M --logdir="$T/nan2" --model_params_override="$NAN" --noenable_check_numerics
err_has "step skipped"

# Every experiment that sets a task resolves its params (a misspelt key or a bad value in
# an experiments/ file is an exit-2 error here, not in a user's first long run); groups that
# set only datasets are bases of others.
n=0; bad=
for f in "$LV_ROOT"/experiments/*/*.cfg; do
  d=$(basename "$(dirname "$f")"); b=$(basename "$f" .cfg)
  for g in $(sed -n 's/^\([A-Za-z0-9_]*\): *{.*/\1/p' "$f"); do
    if "$TR" --model="$d.$b.$g" --logdir="$T/ip/$d.$b.$g" --mode=inspect_params >/dev/null 2>"$T/ip.err"; then
      n=$((n + 1))
    elif ! grep -q "group $g sets no task" "$T/ip.err"; then
      bad="$bad $d.$b.$g ($(tail -1 "$T/ip.err"))"
    fi
  done
done
check "every experiment's params resolve ($n of them)" test -z "$bad" -a "$n" -ge 30
[ -z "$bad" ] || echo "  failed:$bad"
finish
