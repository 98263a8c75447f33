# Shell functions of the Lingvo cross-checks (punctuator.sh, asr.sh, lm.sh), sourced after lib.sh.
# LV_OV / LC_OV, when set: overrides every Lingvo / lingvoc job of $M here also gets.

# metric LINE NAME: the value of " NAME: V" in an evaler's summary line.
metric() { echo "$1" | grep -o " $2: [0-9.e+-]*" | cut -d' ' -f3; }
# logdir_of CKPT DIR: a fresh log dir whose train/ holds checkpoint CKPT as the latest.
logdir_of() {
  rm -rf "$2"; mkdir -p "$2/train"; cp "$1".index "$1".data-* "$2/train/"
  printf 'model_checkpoint_path: "%s"\n' "$(basename "$1")" >"$2/train/checkpoint"
}
# lingvo FLAGS...: Lingvo's trainer binary (any job) on $M, locally, on the CPU.
lingvo() { "$PY" "$ROOT/scripts/lingvo_peer/run.py" trainer --model=$M --run_locally=cpu --mode=sync "$@"; }
# lingvo_eval CKPT OUT_LOG [NAME=VALUE...]: Lingvo's evaler once (job evaler_once_test@$CKSTEP,
# the checkpoint's step) on CKPT alone, with the NAME=VALUE environment; prints its summary.
lingvo_eval() {
  local d=$WORK/lvdir_$(basename "$2" .log)
  logdir_of "$1" "$d"
  env "${@:3}" "$PY" "$ROOT/scripts/lingvo_peer/run.py" trainer --model=$M --run_locally=cpu --mode=sync \
    --logdir="$d" --job="evaler_once_test@$CKSTEP" ${LV_OV:+--model_params_override="$LV_OV"} >"$2" 2>&1
  grep -o 'eval_test: step:.*' "$2" | tail -1
}
# lingvoc_eval CKPT OUT_LOG: lingvoc's evaler once on CKPT (Test, overrides $LC_EVAL).
lingvoc_eval() {
  "$BIN/evaler" --model=$M --logdir="$WORK/lcdir_$(basename "$2" .log)" --dataset=Test --once --checkpoint="$1" \
    --model_params_override="$LC_EVAL${LC_OV:+; $LC_OV}" >"$2" 2>&1
  grep -o 'eval_test: step:.*' "$2" | tail -1
}
# agree LINE_A LINE_B: exit 0 when each metric of $AGREE_REL agrees to 1e-5 relative and
# each of $AGREE_ABS to 1e-6 absolute in the two summary lines.
agree() {
  local m
  for m in $AGREE_REL; do
    awk -v x="$(metric "$1" "$m")" -v y="$(metric "$2" "$m")" 'BEGIN { d = (x - y) / y; exit !(x != "" && y != "" && d * d < 1e-10) }' || return 1
  done
  for m in $AGREE_ABS; do close_abs "$(metric "$1" "$m")" "$(metric "$2" "$m")" 1e-6 || return 1; done
}
# cross_evals LINGVO_CKPT LINGVOC_CKPT METRIC...: both evalers on both checkpoints
# (lingvo_eval, lingvoc_eval above, or the caller's own), a Markdown table of METRICs
# through `say`; `agree` decides whether Lingvo's and lingvoc's summaries agree; a
# disagreement sets BAD=1.
cross_evals() {
  local lv=$1 lc=$2 pair who ck a b e m row
  shift 2
  say ""
  say "| checkpoint written by | evaluated by |$(printf ' %s |' "$@")"
  say "|---|---|$(printf -- '---|%.0s' "$@")"
  for pair in "Lingvo:$lv" "lingvoc:$lc"; do
    who=${pair%%:*} ck=${pair#*:}
    a=$(lingvo_eval "$ck" "eval_lingvo_of_$who.log") b=$(lingvoc_eval "$ck" "eval_lingvoc_of_$who.log")
    for e in "Lingvo:$a" "lingvoc:$b"; do
      row="| $who | ${e%%:*} |"
      for m in "$@"; do row="$row $(metric "${e#*:}" "$m") |"; done
      say "$row"
    done
    agree "$a" "$b" || { say "DISAGREE: $who's checkpoint: Lingvo's evaler says [$a], lingvoc's [$b]"; BAD=1; }
  done
}
# close_abs A B TOL: exit 0 when both are numbers within TOL of each other.
close_abs() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d * d <= t * t) }'; }
# one_step DESC KEYS LINGVOC_DATA [NAME=VALUE...]: one training step of $M from Lingvo's
# step-0 checkpoint on the same batch, and its report. Lingvo's trainer (with the NAME=VALUE
# environment) writes one_lingvo/ (checkpoints 0 and 1, events), lingvoc's trainer restores
# its checkpoint 0 in one_lingvoc/ and takes the step on the overrides LINGVOC_DATA; both
# read their files in order (one file thread, buffer 1). Then a table of the comma-separated
# summary KEYS (loss and log_pplx to 1e-5 relative) and compare_adam_step.py on the two
# step-1 checkpoints (rtol 1e-4, Adam's first step; its output in one_step_weights.log),
# whose l2 line names the embedding rows only Lingvo regularized; tensors matching the
# regular expression $ONE_STEP_EXEMPT are not held to the tolerance. Disagreement: BAD=1.
one_step() {
  local desc=$1 keys=$2 lcdata=$3 k lv_v lc_v lc_line l2
  local one="train.max_steps: 1; input.file_buffer_size: 1; input.file_parallelism: 1"
  shift 3
  env "$@" "$PY" "$ROOT/scripts/lingvo_peer/run.py" trainer --model=$M --run_locally=cpu --mode=sync \
    --logdir="$WORK/one_lingvo" --model_params_override="$one; task.train.max_steps: 1${ONE_OV:+; $ONE_OV}${LV_OV:+; $LV_OV}" >one_lingvo.log 2>&1
  logdir_of "$WORK/one_lingvo/train/ckpt-00000000" "$WORK/one_lingvoc"
  "$BIN/trainer" --model=$M --logdir="$WORK/one_lingvoc" --log_interval_steps=1 \
    --model_params_override="$lcdata; $one${ONE_OV:+; $ONE_OV}${LC_OV:+; $LC_OV}" >one_lingvoc.log 2>&1
  "$PY" "$ROOT/scripts/lingvo_peer/event_scalars.py" --step=1 one_lingvo/train/events.* >one_lingvo.scalars 2>/dev/null
  lc_line=$(grep 'step: *1,' one_lingvoc.log)
  l2=$(grep -m1 -o "l2_regularizer_weight : [0-9.e+-]*" one_lingvo/train/trainer_params.txt | cut -d' ' -f3)
  say ""
  say "One step from Lingvo's step-0 checkpoint, $desc:"
  say ""
  say "| | Lingvo | lingvoc |"
  say "|---|---|---|"
  for k in ${keys//,/ }; do
    lv_v=$(awk -v k="$k" '$2 == k || $2 == k "/loss" {print $3}' one_lingvo.scalars | head -1)
    lc_v=$(echo "$lc_line" | grep -o " $k:[0-9.e+-]*" | cut -d: -f2)
    say "| $k | $lv_v | $lc_v |"
    case $k in loss | log_pplx)
      awk -v a="$lv_v" -v b="$lc_v" 'BEGIN { d = (a - b) / a; exit !(a > 0 && d * d < 1e-10) }' ||
        { say "DISAGREE: one step's $k: Lingvo $lv_v, lingvoc $lc_v"; BAD=1; } ;;
    esac
  done
  # Lingvo's grad_norm/all counts an embedding gradient's IndexedSlices rows, one per
  # lookup (py_utils._TransformAndSum); the norm of the gradient it applied is in its Adam
  # slots, v = (1 - beta2) g^2 after the first step; lingvoc's is grad_norm/all x grad_scale_all.
  local b2 lv_g lc_g
  b2=$(grep -m1 -o "optimizer.beta2 : [0-9.e+-]*" one_lingvo/train/trainer_params.txt | cut -d' ' -f3)
  lv_g=$("$PY" -c 'import sys, numpy as np, tensorflow as tf
r = tf.train.load_checkpoint(sys.argv[1])
v = sum(float(np.sum(r.get_tensor(n))) for n in r.get_variable_to_shape_map() if n.endswith("/Adam_1"))
print("%.8g" % np.sqrt(v / (1 - float(sys.argv[2]))))' one_lingvo/train/ckpt-00000001 "$b2" 2>/dev/null)
  lc_g=$(awk -v a="$(echo "$lc_line" | grep -o " grad_norm/all:[0-9.e+-]*" | cut -d: -f2)" \
    -v b="$(echo "$lc_line" | grep -o " grad_scale_all:[0-9.e+-]*" | cut -d: -f2)" 'BEGIN { printf "%.8g", a * b }')
  say "| the norm of the gradient applied (Lingvo: its Adam slots; lingvoc: grad_norm/all x grad_scale_all) | $lv_g | $lc_g |"
  awk -v a="$lv_g" -v b="$lc_g" 'BEGIN { d = (a - b) / a; exit !(a > 0 && d * d < 1e-8) }' ||
    { say "DISAGREE: one step's applied gradient norm: Lingvo $lv_g, lingvoc $lc_g"; BAD=1; }
  if "$PY" "$ROOT/scripts/lingvo_peer/compare_adam_step.py" one_lingvo/train/ckpt-00000001 one_lingvoc/train/ckpt-00000001 \
      --rtol=1e-4 --adam_first_step --before=one_lingvo/train/ckpt-00000000 --l2="$l2" \
      ${ONE_STEP_EXEMPT:+--exempt="$ONE_STEP_EXEMPT"} >one_step_weights.log 2>&1; then
    say "| weights and Adam slots after the step | $(tail -1 one_step_weights.log) | |"
  else
    say "DISAGREE: the weights after one step: $(tail -3 one_step_weights.log)"; BAD=1
  fi
  say "- l2_loss: $(grep '^rows with a gradient only' one_step_weights.log |
    sed 's/^rows with a gradient only in A: /embedding rows Lingvo regularizes and lingvoc does not: /' || true)"
}
# ckpt_compat LINGVOC_CKPT LINGVO_CKPT: tf.train.load_checkpoint on lingvoc's checkpoint,
# every name, dtype and shape of Lingvo's in it (ckpt_compat.py, log in ckpt_compat.log).
ckpt_compat() {
  if "$PY" "$ROOT/scripts/lingvo_peer/ckpt_compat.py" --lingvoc="$1" --lingvo="$2" >ckpt_compat.log 2>&1; then
    say "- tf.train.load_checkpoint reads lingvoc's checkpoint: $(grep "names in both" ckpt_compat.log)"
  else
    say "DISAGREE: ckpt_compat.py: $(tail -3 ckpt_compat.log)"; BAD=1
  fi
}
# params_side_by_side: Lingvo's and lingvoc's --mode=inspect_params of $M (Train) through
# params_diff.py (output in params_diff.log); an unexplained difference sets BAD=1.
params_side_by_side() {
  "$PY" "$ROOT/scripts/lingvo_peer/run.py" trainer --model=$M --run_locally=cpu --mode=inspect_params \
    --logdir="$WORK/params_lingvo" --inspect_params_dataset_name=Train >params_lingvo.log 2>&1
  "$BIN/trainer" --model=$M --mode=inspect_params --logdir="$WORK/params_lingvoc" >params_lingvoc.log 2>&1
  if python3 "$ROOT/scripts/lingvo_peer/params_diff.py" "$WORK/params_lingvo/train-params.txt" \
      "$WORK/params_lingvoc/train-params.txt" >params_diff.log 2>&1; then
    say "- params.txt side by side (params_diff.py): $(tail -1 params_diff.log)"
  else
    say "DISAGREE: params_diff.py: $(tail -1 params_diff.log) (params_diff.log)"; BAD=1
  fi
}
# race LINGVOC_OVERRIDES [NAME=VALUE...]: RUNS alternating training runs of $M, STEPS steps
# each (Lingvo with the NAME=VALUE environment), steps/s between step STEPS/3 and STEPS
# from each log's own timestamps, peak RSS by /usr/bin/time; medians through `say`.
race() {
  local lcov=$1 r first=$((STEPS / 3 / 10 * 10)) lv lc lvm lcm
  shift
  [ "$RUNS" -gt 0 ] || return 0
  [ "$first" -ge 10 ] || first=10
  : >lingvo.runs; : >lingvoc.runs
  for r in $(seq "$RUNS"); do
    env "$@" /usr/bin/time -f "%M" -o "rss_lingvo_$r" "$PY" "$ROOT/scripts/lingvo_peer/run.py" trainer --model=$M \
      --run_locally=cpu --mode=sync --logdir="$WORK/race_lingvo_$r" \
      --model_params_override="train.max_steps: $STEPS; task.train.max_steps: $STEPS${LV_OV:+; $LV_OV}" >"race_lingvo_$r.log" 2>&1
    /usr/bin/time -f "%M" -o "rss_lingvoc_$r" "$BIN/trainer" --model=$M --logdir="$WORK/race_lingvoc_$r" \
      --log_interval_steps=1 --model_params_override="$lcov; train.max_steps: $STEPS${LC_OV:+; $LC_OV}" >"race_lingvoc_$r.log" 2>&1
    echo "$(rate "race_lingvo_$r.log" "$first" "$STEPS") $(tail -1 "rss_lingvo_$r")" >>lingvo.runs
    echo "$(rate "race_lingvoc_$r.log" "$first" "$STEPS") $(tail -1 "rss_lingvoc_$r")" >>lingvoc.runs
  done
  lv=$(cut -d' ' -f1 lingvo.runs | median) lc=$(cut -d' ' -f1 lingvoc.runs | median)
  lvm=$(cut -d' ' -f2 lingvo.runs | median) lcm=$(cut -d' ' -f2 lingvoc.runs | median)
  say ""
  say "- training steps/s (median of $RUNS, steps $first-$STEPS, load average $(cut -d' ' -f1-3 /proc/loadavg)): Lingvo $lv [$(cut -d' ' -f1 lingvo.runs | spread)], lingvoc $lc [$(cut -d' ' -f1 lingvoc.runs | spread)]: $(awk -v a="$lc" -v b="$lv" 'BEGIN{printf "%.2fx", a / b}')"
  say "- peak RSS (median): Lingvo $((lvm / 1024)) MiB, lingvoc $((lcm / 1024)) MiB: $(awk -v a="$lcm" -v b="$lvm" 'BEGIN{printf "%.2fx", a / b}')"
}
