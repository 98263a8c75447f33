#!/usr/bin/env bash
# Real Lingvo (the peers' venv, scripts/peers.sh) beside lingvoc on LeNet5Fashion, without
# the speed race (scripts/lingvo_peer/lenet5.sh with RUNS=0): both keras2ckpts write the
# same data; one step from Lingvo's step-0 checkpoint on the same batch gives the same loss,
# gradient norm and weight change; each evaler reads the other's checkpoint with no
# conversion and reports the same metrics; tf.train.load_checkpoint reads lingvoc's with
# Lingvo's names, dtypes and shapes, and TensorFlow's copy of it is bit-identical.
# Skipped (counted) without the venv or Debian's Fashion-MNIST.
. "$(dirname "$0")/lib.sh"
need_lingvo
[ -e /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] || skip "no dataset-fashion-mnist"
RUNS=0 EVAL_N=512 WORK="$T/l5" bash "$LV_ROOT/scripts/lingvo_peer/lenet5.sh" >"$T/out" 2>&1
rc=$?
R=$T/l5/report.md
check "lenet5.sh finds no disagreement (exit $rc)" [ "$rc" -eq 0 ]
check "the same data" grep -q "same four tensors: yes" "$R"
check "one step: the weights' change within 5e-3" grep -q "change in the step | 21 shared tensors (18 float), 0 outside" "$R"
lv_loss=$(awk -F'|' '$2 ~ /^ loss / {print $3}' "$R") lc_loss=$(awk -F'|' '$2 ~ /^ loss / {print $4}' "$R")
check "one step: the same loss ($lv_loss, $lc_loss)" awk -v a="$lv_loss" -v b="$lc_loss" 'BEGIN { d = a - b; exit !(a > 0 && d * d < 1e-12) }'
check "four evaluations, none disagreeing" [ "$(grep -c '^| \(Lingvo\|lingvoc\) | \(Lingvo\|lingvoc\) | 0\.' "$R")" -eq 4 ]
check "no DISAGREE line" sh -c "! grep -q DISAGREE \"$R\""
check "tf.train.load_checkpoint: Lingvo's names, dtypes and shapes" grep -q "21 names in both with the same dtype and shape: 21; problems: 0" "$R"
check "TensorFlow's copy is bit-identical" grep -q "bit-identical to lingvoc's" "$R"
[ "$NFAIL" -eq 0 ] || cat "$T/out"
finish
