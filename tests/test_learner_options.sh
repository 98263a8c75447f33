#!/usr/bin/env bash
# Lingvo's learner options beyond the optimizer, with the real trainer on the
# Fashion-MNIST subset: init_from_checkpoint_rules (variables loaded from another run's
# checkpoint by regex renaming rules, logged one by one; a rule matching nothing, a
# missing or misshapen tensor and a bad regex exit 2 and write no checkpoint) and
# bprop_variable_filter / bprop_variable_exclusion (only the selected variables change,
# only they get optimizer slots; a filter leaving nothing or a bad regex exits 2) and
# gradient accumulation (Lingvo's optimizer.Accumulator).
. "$(dirname "$0")/lib.sh"
if ! ensure_fashion_mnist; then
  fail "keras2ckpt could not build the Fashion-MNIST checkpoint (apt-get install dataset-fashion-mnist)"
  finish; exit 1
fi
M=image.mnist.LeNet5Fashion
BASE="input.ckpt: \"$FM\"; input.num_samples: 2000; input.batch_size: 32; train.save_interval_steps: 10; cluster.num_threads: 2"
train() { "$LV_BIN/trainer" --model=$M --run_locally=cpu --mode=sync --log_interval_steps=10 "$@"; }
value() { "$LV_BIN/ckpt_inspect" --file_name="$1" --tensor_name="$2" --printoptions=threshold=100000000 | tail -n +2; }

# A source run to load from.
train --logdir="$T/src" --model_params_override="$BASE; train.max_steps: 20" >"$T/src.log" 2>&1
check "source run exits 0" [ $? -eq 0 ]
SRC="$T/src/train/ckpt-00000020"

# 1. init_from_checkpoint_rules: fc and softmax weights from the source (renamed through
# groups), the softmax bias ignored, the convolutions left as initialized.
RULES="task.train.init_from_checkpoint_rules: [('$SRC', [('lenet5/(fc|softmax)/(.*)', 'lenet5/%s/%s')], ['.*bias'])]"
train --logdir="$T/ft" --model_params_override="$BASE; train.max_steps: 10; $RULES" >"$T/ft.log" 2>&1
check "fine-tuning run exits 0" [ $? -eq 0 ]
check "logs each loaded variable" grep -q "loading lenet5/fc/w/var from lenet5/fc/w/var in $SRC" "$T/ft.log"
check "logs each ignored variable" grep -q "lenet5/softmax/bias_0/var matches an ignore rule" "$T/ft.log"
check "logs each variable no rule matches" grep -q "lenet5/conv0/w/var matches no rule" "$T/ft.log"
check "logs the count" grep -q "init_from_checkpoint_rules: 3 variables loaded" "$T/ft.log"
FT0="$T/ft/train/ckpt-00000000"
check "a loaded variable is the source's" [ "$(value "$FT0" lenet5/fc/w/var)" = "$(value "$SRC" lenet5/fc/w/var)" ]
check "an ignored variable is not" [ "$(value "$FT0" lenet5/softmax/bias_0/var)" != "$(value "$SRC" lenet5/softmax/bias_0/var)" ]
check "an unmatched variable is not" [ "$(value "$FT0" lenet5/conv0/w/var)" != "$(value "$SRC" lenet5/conv0/w/var)" ]
check "the run starts at step 0" [ "$(value "$FT0" global_step)" = "0" ]
# Resuming the fine-tuning run restores its own checkpoint, not the rules.
train --logdir="$T/ft" --model_params_override="$BASE; train.max_steps: 20; $RULES" >"$T/ft2.log" 2>&1
check "resume ignores the rules" [ $? -eq 0 ] && ! grep -q "init_from_checkpoint_rules:" "$T/ft2.log"
# init_from_checkpoint_override replaces the path.
train --logdir="$T/ov" --model_params_override="$BASE; train.max_steps: 1; task.train.init_from_checkpoint_rules: [('/nowhere', [('(.*)', '%s')], [])]; task.train.init_from_checkpoint_override: '$SRC'" >"$T/ov.log" 2>&1
check "init_from_checkpoint_override replaces the path" grep -q "loading lenet5/conv0/w/var from lenet5/conv0/w/var in $SRC" "$T/ov.log"

# Errors: exit 2, nothing saved.
bad() {
  local what=$1 dir=$2 rules=$3 msg=$4
  expect_exit 2 "$what" train --logdir="$T/$dir" --model_params_override="$BASE; train.max_steps: 1; task.train.init_from_checkpoint_rules: $rules"
  err_has "$msg"
  check "$what: no checkpoint written" [ ! -e "$T/$dir/train/checkpoint" ]
}
bad "a rule matching nothing" e1 "[('$SRC', [('lenet5/(.*)', 'lenet5/%s'), ('nothing/(.*)', '%s')], [])]" \
  "loading rule 1 ('nothing/(.*)', '%s') matches no variable of the model"
bad "a tensor the checkpoint lacks" e2 "[('$SRC', [('lenet5/(.*)', 'other/%s')], [])]" \
  "which checkpoint $SRC does not hold"
bad "a tensor of another shape" e3 "[('$SRC', [('lenet5/fc/w/(.*)', 'lenet5/conv1/w/%s'), ('(.*)', '%s')], [])]" \
  "the model's lenet5/fc/w/var is"
bad "a bad regex" e4 "[('$SRC', [('lenet5/((', '%s')], [])]" "is not a regular expression"
bad "a malformed entry" e5 "[('$SRC', '(.*)')]" "expected (checkpoint_path, [(regex, format), ...]"
bad "a missing checkpoint" e6 "[('$T/none/ckpt-1', [('(.*)', '%s')], [])]" "checkpoint '$T/none/ckpt-1'"
# 2. bprop_variable_filter / bprop_variable_exclusion: only the selected variables change,
# and only they get optimizer slots.
train --logdir="$T/bp" --model_params_override="$BASE; train.max_steps: 10; task.train.bprop_variable_filter: 'fc/|softmax/'; task.train.bprop_variable_exclusion: '/b/|bias'" >"$T/bp.log" 2>&1
check "bprop filter run exits 0" [ $? -eq 0 ]
check "logs what is not trained" grep -q "training 2 of 6 variables; not trained .*: lenet5/conv0/w/var, lenet5/conv1/w/var, lenet5/fc/b/var, lenet5/softmax/bias_0/var" "$T/bp.log"
BP0="$T/bp/train/ckpt-00000000" BP1="$T/bp/train/ckpt-00000010"
for v in lenet5/conv0/w/var lenet5/fc/b/var lenet5/softmax/bias_0/var; do
  check "$v is unchanged" [ "$(value "$BP0" $v)" = "$(value "$BP1" $v)" ]
done
for v in lenet5/fc/w/var lenet5/softmax/weight_0/var; do
  check "$v is trained" [ "$(value "$BP0" $v)" != "$(value "$BP1" $v)" ]
done
nslots=$("$LV_BIN/ckpt_inspect" --file_name="$BP1" | grep -c '/Adam ')
check "slots only for the trained variables ($nslots)" [ "$nslots" -eq 2 ]
expect_exit 2 "a filter that leaves nothing" train --logdir="$T/bp2" --model_params_override="$BASE; train.max_steps: 1; task.train.bprop_variable_filter: 'nothing'"
err_has "leave none of the 6 trainable variables to train"
expect_exit 2 "a bad filter regex" train --logdir="$T/bp3" --model_params_override="$BASE; train.max_steps: 1; task.train.bprop_variable_exclusion: '(('"
err_has "task.train.bprop_variable_exclusion: '((' is not a regular expression"
# 3. Gradient accumulation (optimizer Accumulator around Adam, accum_steps 2): the weights
# change every second step only, the accumulators are checkpointed, a resumed run goes on.
ACC="task.train.optimizer.cls: 'Accumulator'; task.train.optimizer.accum_steps: 2; train.save_interval_steps: 1"
train --logdir="$T/acc" --model_params_override="$BASE; train.max_steps: 3; $ACC" >"$T/acc.log" 2>&1
check "Accumulator run exits 0" [ $? -eq 0 ]
A="$T/acc/train/ckpt-0000000"
check "step 0 (accumulating) leaves the weights" [ "$(value ${A}0 lenet5/fc/w/var)" = "$(value ${A}1 lenet5/fc/w/var)" ]
check "step 1 (the second) updates them" [ "$(value ${A}1 lenet5/fc/w/var)" != "$(value ${A}2 lenet5/fc/w/var)" ]
check "the accumulators are in the checkpoint" grep -q '^lenet5/fc/w/var/grad_accumulator/var ' <("$LV_BIN/ckpt_inspect" --file_name=${A}3)
check "and hold step 2's gradients" [ "$(value ${A}3 lenet5/fc/b/var/grad_accumulator/var | tr -d '[]0. \n')" != "" ]
train --logdir="$T/acc" --model_params_override="$BASE; train.max_steps: 4; $ACC" >"$T/acc2.log" 2>&1
check "Accumulator run resumes" [ $? -eq 0 ] && grep -q "restored .* tensors" "$T/acc2.log"
check "inspect_params shows the Accumulator's keys" grep -q "^task.train.optimizer.optimizer_tpl.cls : 'Adam'" "$T/acc/control/params.txt"
finish
