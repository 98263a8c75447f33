#!/usr/bin/env bash
# LeNet5 (image.mnist.LeNet5Fashion) with real Lingvo and with lingvoc on the same machine,
# the same data and the same threads: the data both keras2ckpts write, the training speed
# and peak memory (RUNS alternating runs of STEPS steps each), checkpoints both ways (each
# evaler on the other's checkpoint, tf.train.load_checkpoint on lingvoc's) and the metrics.
# Prints a report and writes it to $WORK/report.md; exits 1 if a crossing disagrees.
#
#   scripts/lingvo_peer/lenet5.sh                 # STEPS=300 RUNS=3 WORK=/tmp/lingvo_peer_lenet5
#   RUNS=0 EVAL_N=1024 scripts/lingvo_peer/lenet5.sh   # no race: the crossings only (the test)
#
# Needs the peers' venv (scripts/peers.sh makes it) and Debian's dataset-fashion-mnist.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STEPS=${STEPS:-300} RUNS=${RUNS:-3} WORK=${WORK:-/tmp/lingvo_peer_lenet5}
EVAL_N=${EVAL_N:-9984}   # 39 full batches of 256: see the note under the table
BIN=${LV_BIN:-$ROOT/bin} M=image.mnist.LeNet5Fashion
export LINGVOC_EXPERIMENTS=${LINGVOC_EXPERIMENTS:-$ROOT/experiments} # a $LV_BIN outside the checkout
rm -rf "$WORK"; mkdir -p "$WORK"
cd "$WORK"
. "$ROOT/scripts/lingvo_peer/lib.sh"
lingvo() { LINGVO_PEER_DATA=$WORK/data_lingvo/mnist "$PY" "$ROOT/scripts/lingvo_peer/run.py" "$@"; }

# 1. Data: Lingvo's keras2ckpt (keras reads Debian's files from its cache folder under HOME,
#    as if it had downloaded them) and lingvoc's.
mkdir -p home/.keras/datasets/fashion-mnist data_lingvo data_lingvoc
cp /usr/share/datasets/fashion-mnist/*.gz home/.keras/datasets/fashion-mnist/
HOME=$WORK/home lingvo keras2ckpt --dataset=fashion_mnist --out="$WORK/data_lingvo/mnist" >keras2ckpt_lingvo.log 2>&1
"$BIN/keras2ckpt" --dataset=fashion_mnist --out="$WORK/data_lingvoc/mnist" >keras2ckpt_lingvoc.log 2>&1
same_data=yes
for t in x_train y_train x_test y_test; do
  cmp -s <("$BIN/ckpt_inspect" --file_name=data_lingvo/mnist --tensor_name=$t --printoptions=threshold=100000000) \
    <("$BIN/ckpt_inspect" --file_name=data_lingvoc/mnist --tensor_name=$t --printoptions=threshold=100000000) || same_data=no
done
say "# LeNet5Fashion: $(versions) and lingvoc, $(nproc) cores, $(date -u +%F)"
say ""
say "- data: Lingvo's and lingvoc's keras2ckpt --dataset=fashion_mnist give the same four tensors: $same_data"
[ "$same_data" = yes ] || BAD=1

# 2. The same numbers: one step from Lingvo's step-0 checkpoint on the same batch (the
#    first 256 training images, so both shuffles hold the same images; dropout off): the
#    loss and gradient norm each logs, and every weight and Adam slot after the step.
ONE="train.max_steps: 1; task.dropout_prob: 0.0; input.num_samples: 256"
lingvo trainer --model=$M --run_locally=cpu --mode=sync --logdir="$WORK/one_lingvo" \
  --model_params_override="$ONE; task.train.max_steps: 1" >one_lingvo.log 2>&1
mkdir -p one_lingvoc/train
cp one_lingvo/train/ckpt-00000000.index one_lingvo/train/ckpt-00000000.data-* one_lingvoc/train/
printf 'model_checkpoint_path: "ckpt-00000000"\n' >one_lingvoc/train/checkpoint
"$BIN/trainer" --model=$M --logdir="$WORK/one_lingvoc" --log_interval_steps=1 \
  --model_params_override="$ONE; input.ckpt: \"$WORK/data_lingvoc/mnist\"" >one_lingvoc.log 2>&1
"$PY" "$ROOT/scripts/lingvo_peer/event_scalars.py" --step=1 --tags=loss,grad_norm/all/loss \
  "$WORK"/one_lingvo/train/events.* >one_lingvo.scalars 2>/dev/null
lc_line=$(grep 'step: *1,' one_lingvoc.log)
say ""
say "One step from Lingvo's step-0 checkpoint, the same 256 images, dropout off:"
say ""
say "| | Lingvo | lingvoc |"
say "|---|---|---|"
for k in loss grad_norm/all; do
  lv_v=$(awk -v k="$k" '$2 == k || $2 == k "/loss" {print $3}' one_lingvo.scalars)
  say "| $k | $lv_v | $(echo "$lc_line" | grep -o " $k:[0-9.e+-]*" | cut -d: -f2) |"
done
if "$PY" "$ROOT/scripts/lingvo_peer/compare_ckpts.py" one_lingvo/train/ckpt-00000001 one_lingvoc/train/ckpt-00000001 \
    --base=one_lingvo/train/ckpt-00000000 --rtol=5e-3 >one_step_weights.log 2>&1; then
  say "| weights' and Adam slots' change in the step | $(tail -1 one_step_weights.log) | |"
  say ""
  say "(the largest relative difference, in the 2-norm: $(sed -n 's/.*, relative \([0-9.e+-]*\).*/\1/p' one_step_weights.log | sort -g | tail -1);"
  say "the convolutions' weight gradients are sums over 256 x 784 or 256 x 196 positions in"
  say "another order (oneDNN against lingvoc's direct AVX-512 kernels), and Adam's first update g / (|g| + 1e-6)"
  say "magnifies the difference where |g| is near epsilon)"
else
  say "DISAGREE: the weights after one step: $(tail -1 one_step_weights.log)"; BAD=1
fi
# 3. Speed and memory: alternating runs, steps/s between step 100 and STEPS from each log's
#    own timestamps (past start-up and the first checkpoint), peak RSS by /usr/bin/time.
OV="train.max_steps: $STEPS; task.train.max_steps: $STEPS"
for r in $(seq "$RUNS"); do   # RUNS=0: no race (tests/test_lingvo_lenet5.sh)
  /usr/bin/time -f "%M" -o "rss_lingvo_$r" \
    env LINGVO_PEER_DATA="$WORK/data_lingvo/mnist" "$PY" "$ROOT/scripts/lingvo_peer/run.py" trainer \
    --model=$M --run_locally=cpu --mode=sync --logdir="$WORK/lingvo_$r" --model_params_override="$OV" \
    >"lingvo_$r.log" 2>&1
  /usr/bin/time -f "%M" -o "rss_lingvoc_$r" "$BIN/trainer" --model=$M --logdir="$WORK/lingvoc_$r" \
    --log_interval_steps=100 --model_params_override="input.ckpt: \"$WORK/data_lingvoc/mnist\"; train.max_steps: $STEPS" \
    >"lingvoc_$r.log" 2>&1
  echo "$(rate "lingvo_$r.log" 100 "$STEPS") $(tail -1 "rss_lingvo_$r")" >>lingvo.runs
  echo "$(rate "lingvoc_$r.log" 100 "$STEPS") $(tail -1 "rss_lingvoc_$r")" >>lingvoc.runs
done
[ "$RUNS" -gt 0 ] || { : >lingvo.runs; : >lingvoc.runs; }
if [ "$RUNS" -gt 0 ]; then
lv=$(cut -d' ' -f1 lingvo.runs | median) lc=$(cut -d' ' -f1 lingvoc.runs | median)
lvm=$(cut -d' ' -f2 lingvo.runs | median) lcm=$(cut -d' ' -f2 lingvoc.runs | median)
say "- training steps/s (median of $RUNS, steps 100-$STEPS, batch 256): Lingvo $lv [$(cut -d' ' -f1 lingvo.runs | spread)], lingvoc $lc [$(cut -d' ' -f1 lingvoc.runs | spread)]: $(awk -v a="$lc" -v b="$lv" 'BEGIN{printf "%.2fx", a / b}')"
say "- peak RSS (median): Lingvo $((lvm / 1024)) MiB, lingvoc $((lcm / 1024)) MiB: $(awk -v a="$lcm" -v b="$lvm" 'BEGIN{printf "%.2fx", a / b}')"
fi

# 4. Checkpoints both ways, run 1's final ones (with RUNS=0, the one-step ones), each
#    evaluated by both evalers on the same EVAL_N test images.
if [ "$RUNS" -gt 0 ]; then
  LV_CK=$WORK/lingvo_1/train/ckpt-$(printf %08d "$STEPS") LC_CK=$WORK/lingvoc_1/train/ckpt-$(printf %08d "$STEPS")
else
  STEPS=1 LV_CK=$WORK/one_lingvo/train/ckpt-00000001 LC_CK=$WORK/one_lingvoc/train/ckpt-00000001
fi
lingvo_eval() { # CKPT OUT_LOG: Lingvo's evaler once on CKPT (copied into a log dir of its own)
  local d=$WORK/lingvo_eval_$(basename "$(dirname "$(dirname "$1")")")
  rm -rf "$d"; mkdir -p "$d/train"; cp "$1".index "$1".data-* "$d/train/"
  printf 'model_checkpoint_path: "%s"\n' "$(basename "$1")" >"$d/train/checkpoint"
  lingvo trainer --model=$M --run_locally=cpu --mode=sync --logdir="$d" --job="evaler_once_test@$STEPS" \
    --model_params_override="input.num_samples: $EVAL_N" >"$2" 2>&1
  grep -o 'eval_test: step:.*' "$2" | tail -1
}
lingvoc_eval() { # CKPT OUT_LOG
  "$BIN/evaler" --model=$M --logdir="$WORK/lingvoc_eval_$(basename "$2" .log)" --dataset=Test --once --checkpoint="$1" \
    --model_params_override="input.ckpt: \"$WORK/data_lingvoc/mnist\"; input.num_samples: $EVAL_N" >"$2" 2>&1
  grep -o 'eval_test: step:.*' "$2" | tail -1
}
metric() { echo "$1" | grep -o " $2: [0-9.e+-]*" | cut -d' ' -f3; }
say ""
say "| checkpoint written by | evaluated by | accuracy | acc5 | loss |"
say "|---|---|---|---|---|"
for pair in "Lingvo:$LV_CK" "lingvoc:$LC_CK"; do
  who=${pair%%:*} ck=${pair#*:}
  a=$(lingvo_eval "$ck" "eval_lingvo_of_$who.log") b=$(lingvoc_eval "$ck" "eval_lingvoc_of_$who.log")
  for e in "Lingvo:$a" "lingvoc:$b"; do
    say "| $who | ${e%%:*} | $(metric "${e#*:}" accuracy) | $(metric "${e#*:}" acc5) | $(metric "${e#*:}" loss) |"
  done
  if ! awk -v x="$(metric "$a" accuracy)" -v y="$(metric "$b" accuracy)" -v l="$(metric "$a" loss)" \
      -v m="$(metric "$b" loss)" 'BEGIN { d = x - y; e = l - m; exit !(x != "" && y != "" && d * d < 1e-12 && e * e < 1e-10) }'; then
    say "DISAGREE: $who's checkpoint: Lingvo's evaler says [$a], lingvoc's [$b]"; BAD=1
  fi
done
say ""
say "Both evalers ran on $EVAL_N test images ($((EVAL_N / 256)) full batches of 256). On the full 10,000 Lingvo"
say "pads the last batch to 256 (BaseTinyDatasetInput) and weights its metrics as 256 images"
say "(classifier.FPropTower's (acc1, batch)), so its whole-set figures count the 16 real images"
say "of that batch 16 times over; lingvoc weights by real images (the exact mean over 10,000)."

# 5. tf.train.load_checkpoint on lingvoc's checkpoint, names/dtypes/shapes against Lingvo's,
#    and TensorFlow's copy of every value read back by lingvoc.
if "$PY" "$ROOT/scripts/lingvo_peer/ckpt_compat.py" --lingvoc="$LC_CK" --lingvo="$LV_CK" --resave="$WORK/tf_copy" \
    >ckpt_compat.log 2>&1; then
  say ""
  say "- tf.train.load_checkpoint reads lingvoc's checkpoint: $(tail -2 ckpt_compat.log | head -1)"
else
  say "DISAGREE: ckpt_compat.py: $(tail -3 ckpt_compat.log)"; BAD=1
fi
dump() { "$BIN/ckpt_inspect" --file_name="$1" | cut -d' ' -f1 | while read -r n; do
  "$BIN/ckpt_inspect" --file_name="$1" --tensor_name="$n" --printoptions=threshold=100000000; done; }
if cmp -s <(dump "$LC_CK") <(dump "$WORK/tf_copy"); then
  say "- TensorFlow's copy of every tensor (tf.raw_ops.SaveV2 of what it read) is bit-identical to lingvoc's"
else
  say "DISAGREE: TensorFlow's copy of lingvoc's checkpoint differs"; BAD=1
fi
echo "report: $R" >&2
exit $BAD
