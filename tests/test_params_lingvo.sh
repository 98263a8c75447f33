#!/usr/bin/env bash
# Params beside Lingvo's (issue 43 part 4): real Lingvo's trainer --mode=inspect_params
# (scripts/lingvo_peer/run.py, the peers' venv: scripts/peers.sh) and lingvoc's write the
# resolved params of image.mnist.LeNet5Fashion; scripts/lingvo_peer/params_diff.py must
# find every difference explained by scripts/lingvo_peer/params_explained.tsv, and must
# fail on a key or a value that nobody explained. lingvoc's side of what the diff found
# (the controller job, None defaults) is checked first; the rest is skipped without the
# venv. No training and no data: both tools only build the params (~20 s, mostly
# TensorFlow's import).
. "$(dirname "$0")/lib.sh"
PD=$LV_ROOT/scripts/lingvo_peer/params_diff.py
M=image.mnist.LeNet5Fashion

expect_exit 0 "lingvoc inspect_params $M" "$LV_BIN/trainer" --model=$M --mode=inspect_params --logdir="$T/lc"
LC=$T/lc/train-params.txt
# Lingvo's InspectParams builds the params for its controller job, whatever --job says.
check "the dump records Lingvo's controller job" grep -qx "cluster.job : 'controller'" "$LC"
# Lingvo's None defaults: a layer's skip_lp_regularization None takes its parent's.
check "skip_lp_regularization defaults to None" grep -qx "task.softmax.skip_lp_regularization : NoneType" "$LC"
check "init_from_checkpoint_override defaults to None" \
  grep -qx "task.train.init_from_checkpoint_override : NoneType" "$LC"

PY=${PEERS_VENV:-$HOME/.cache/lingvoc/peers}/bin/python
if [ ! -x "$PY" ] || ! "$PY" -c 'import lingvo.core.hyperparams' 2>/dev/null; then
  skip_part "no peers venv with Lingvo at $PY (scripts/peers.sh builds it)"
  finish
  exit $?
fi
export TF_CPP_MIN_LOG_LEVEL=2
expect_exit 0 "Lingvo inspect_params $M" "$PY" "$LV_ROOT/scripts/lingvo_peer/run.py" trainer --model=$M \
  --mode=inspect_params --run_locally=cpu --logdir="$T/lg" --inspect_params_dataset_name=Train
LG=$T/lg/train-params.txt

"$PY" "$PD" "$LG" "$LC" >"$T/diff.out" 2>&1
rc=$?
sed 's/^/  /' "$T/diff.out" | grep -v '^     ' # categories and reasons, not every key
check "every difference of $M is explained (params_diff.py exit $rc)" [ $rc -eq 0 ]
check "the diff compared the shared keys" grep -q "shared [0-9][0-9]*: [0-9]* the same" "$T/diff.out"

# An unexplained key or value fails the diff and is named.
cp "$LC" "$T/extra.txt"
echo "task.made_up_key : 1" >>"$T/extra.txt"
expect_exit 1 "a key only lingvoc has, unexplained" "$PY" "$PD" "$LG" "$T/extra.txt"
check "the unexplained key is named" grep -q "lingvoc task.made_up_key" "$T/out"
sed 's/^task.dropout_prob : .*/task.dropout_prob : 0.3/' "$LC" >"$T/value.txt"
expect_exit 1 "a value that differs, unexplained" "$PY" "$PD" "$LG" "$T/value.txt"
check "the differing value is named" grep -q "value   task.dropout_prob : 0.2 -> 0.3" "$T/out"
# Spelling is not a difference: a tuple for a list, a quoted dtype, a class by its name.
sed -e "s/^input.data_shape : .*/input.data_shape : (28, 28, 1)/" -e "s/^input.data_dtype : .*/input.data_dtype : uint8/" \
  "$LC" >"$T/spell.txt"
expect_exit 0 "tuples and bare dtypes read as lingvoc's lists and strings" "$PY" "$PD" "$LG" "$T/spell.txt"
sed "s/^task.softmax.cls : .*/task.softmax.cls : 'layers.FCLayer'/" "$LC" >"$T/cls.txt"
expect_exit 1 "another class is a difference" "$PY" "$PD" "$LG" "$T/cls.txt"
finish
