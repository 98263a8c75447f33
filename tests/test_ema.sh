#!/usr/bin/env bash
# Moving averages end to end (task.train.ema_decay) with the real executables on the
# Fashion-MNIST subset: checkpoints hold <var>/ExponentialMovingAverage beside every
# trainable variable; the evaler runs on the averages (and on the raw weights with
# ema_decay 0); kill -9 and resume is bit-identical with the averages on; a run resumed
# from a checkpoint without averages starts them from its weights and says so; turning
# them off drops them with a warning; a bad decay exits 2 and writes nothing; skipped
# steps leave them; sync replicas under mpirun keep them.
. "$(dirname "$0")/lib.sh"
if ! ensure_fashion_mnist; then
  fail "keras2ckpt could not build the Fashion-MNIST checkpoint (apt-get install dataset-fashion-mnist)"
  finish; exit 1
fi
M=image.mnist.LeNet5Fashion
BASE="input.ckpt: \"$FM\"; input.num_samples: 2000; input.batch_size: 32; train.save_interval_steps: 10; train.max_steps: 40; cluster.num_threads: 2"
EMA="$BASE; task.train.ema_decay: 0.9"
TRAIN=("$LV_BIN/trainer" --model=$M --run_locally=cpu --mode=sync --log_interval_steps=10)
train() { "${TRAIN[@]}" "$@"; }
names() { "$LV_BIN/ckpt_inspect" --file_name="$1" | cut -d" " -f1; }
tensor() { "$LV_BIN/ckpt_inspect" --file_name="$1" --tensor_name="$2" --printoptions=threshold=100000000; }
value() { tensor "$1" "$2" | tail -n +2; }

# 1. inspect_params shows Lingvo's keys.
"$LV_BIN/trainer" --model=$M --mode=inspect_params --logdir="$T/ip" >"$T/params.log" 2>&1
for k in ema_decay ema_decay_moving_vars ema_schedule; do
  check "inspect_params lists task.train.$k" grep -q "^task.train.$k : " "$T/ip/train-params.txt"
done

# 2. A run with averages: one per trainable variable, beside it, different from it.
train --logdir="$T/a" --model_params_override="$EMA" >"$T/a.log" 2>&1
check "trainer with ema_decay exits 0" [ $? -eq 0 ]
names "$T/a/train/ckpt-00000040" >"$T/a.names"
nvar=$(grep -c '^lenet5/.*/var$' "$T/a.names")
navg=$(grep -c '^lenet5/.*/var/ExponentialMovingAverage$' "$T/a.names")
check "an average per variable ($navg of $nvar)" [ "$nvar" -gt 0 ] && [ "$navg" -eq "$nvar" ]
w=$(value "$T/a/train/ckpt-00000040" lenet5/softmax/bias_0/var)
avg=$(value "$T/a/train/ckpt-00000040" lenet5/softmax/bias_0/var/ExponentialMovingAverage)
check "the average is not the weight" [ -n "$avg" ] && [ "$w" != "$avg" ]
check "ckpt_inspect lists both" grep -q '^lenet5/fc/w/var/ExponentialMovingAverage (DT_FLOAT) \[2450,300\]' \
  <("$LV_BIN/ckpt_inspect" --file_name="$T/a/train/ckpt-00000040")
# At step 0 the averages are the initial weights.
check "averages start at the weights" [ "$(value "$T/a/train/ckpt-00000000" lenet5/fc/w/var)" = \
  "$(value "$T/a/train/ckpt-00000000" lenet5/fc/w/var/ExponentialMovingAverage)" ]

# 3. The evaler runs on the averages; with ema_decay 0 on the raw weights.
EVAL="input.ckpt: \"$FM\"; input.num_samples: 500; train.max_steps: 40"
"$LV_BIN/evaler" --model=$M --logdir="$T/a" --dataset=Test --once --model_params_override="$EVAL; task.train.ema_decay: 0.9" >"$T/e1.log" 2>&1
check "evaler exits 0" [ $? -eq 0 ]
check "evaler uses the averages" grep -q "moving averages of $nvar variables stand in" "$T/e1.log"
"$LV_BIN/evaler" --model=$M --logdir="$T/a" --dataset=Dev --once --model_params_override="$EVAL" >"$T/e2.log" 2>&1
check "evaler with ema_decay 0 uses the raw weights" grep -q "ema_decay is 0: using the raw weights" "$T/e2.log"
l1=$(grep -o 'log_pplx: [0-9.e+-]*' "$T/e1.log" | head -1)
l2=$(grep -o 'log_pplx: [0-9.e+-]*' "$T/e2.log" | head -1)
check "averages and raw weights score differently ($l1 vs $l2)" [ -n "$l1" ] && [ "$l1" != "$l2" ]

# 4. SIGKILL mid-run and resume: bit-identical to the uninterrupted run, averages included.
"${TRAIN[@]}" --logdir="$T/b" --model_params_override="$EMA" >"$T/b1.log" 2>&1 &
pid=$!
wait_ckpt_listed "$T/b/train" 20
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
check "killed before the end" [ ! -f "$T/b/train/ckpt-00000040.index" ]
train --logdir="$T/b" --model_params_override="$EMA" >"$T/b2.log" 2>&1
check "restart exits 0" [ $? -eq 0 ]
check "restart resumed from a checkpoint" grep -q "restored .* tensors" "$T/b2.log"
ckpt_dump "$T/a/train/ckpt-00000040" >"$T/wa"
ckpt_dump "$T/b/train/ckpt-00000040" >"$T/wb"
check "killed + resumed = uninterrupted, averages included" cmp -s "$T/wa" "$T/wb"

# 5. Averages turned on for a run whose checkpoints have none: started from its weights.
train --logdir="$T/c" --model_params_override="$BASE; train.max_steps: 20" >"$T/c1.log" 2>&1
check "no averages without ema_decay" [ "$(names "$T/c/train/ckpt-00000020" | grep -c ExponentialMovingAverage)" -eq 0 ]
train --logdir="$T/c" --model_params_override="$EMA" >"$T/c2.log" 2>&1
check "resume with ema_decay exits 0" [ $? -eq 0 ]
check "says the averages start from the weights" grep -q "has no moving averages .*starting the averages of $nvar variables from its weights" "$T/c2.log"
check "later checkpoints hold them" [ "$(names "$T/c/train/ckpt-00000040" | grep -c ExponentialMovingAverage)" -eq "$nvar" ]

# 6. Turned off again: dropped with a warning, training goes on.
train --logdir="$T/c" --model_params_override="$BASE; train.max_steps: 50" >"$T/c3.log" 2>&1
check "resume without ema_decay exits 0" [ $? -eq 0 ]
check "warns that the averages are dropped" grep -q "moving averages of $nvar variables; this run keeps none" "$T/c3.log"
check "the new checkpoint has none" [ "$(names "$T/c/train/ckpt-00000050" | grep -c ExponentialMovingAverage)" -eq 0 ]

# 7. A decay of 1 or more is a config error: exit 2, nothing written.
expect_exit 2 "ema_decay 1.0 is refused" train --logdir="$T/d" --model_params_override="$BASE; task.train.ema_decay: 1.0"
err_has "task.train.ema_decay"
check "nothing written" [ ! -e "$T/d/train/checkpoint" ]

# 8. A skipped step leaves the averages: from a checkpoint whose averages differ from the
# weights, steps all skipped (grad_norm_to_clip_to_zero) change neither.
mkdir -p "$T/s/train" && cp "$T"/a/train/ckpt-00000040.* "$T/s/train/" &&
  printf 'model_checkpoint_path: "ckpt-00000040"\nall_model_checkpoint_paths: "ckpt-00000040"\n' >"$T/s/train/checkpoint"
train --logdir="$T/s" --model_params_override="$EMA; train.max_steps: 45; task.train.grad_norm_to_clip_to_zero: 1e-9; task.train.max_consecutive_skipped_steps: 0" >"$T/s.log" 2>&1
check "all-skipped run exits 0" [ $? -eq 0 ] && grep -q "5 steps skipped" "$T/s.log"
check "skipped steps leave the averages" [ "$(value "$T/a/train/ckpt-00000040" lenet5/fc/b/var/ExponentialMovingAverage)" = \
  "$(value "$T/s/train/ckpt-00000045" lenet5/fc/b/var/ExponentialMovingAverage)" ]

# 8b. A partial restore that finds some averages and not others (ema_decay_moving_vars
# turned on for a batch-norm model): the missing ones start from the restored moving
# statistics (they were zeros: a moving variance averaged toward 0). One step later the
# average of the moving variance is within 10% of it.
BN="$EMA; task.batch_norm: true"
train --logdir="$T/p" --model_params_override="$BN; train.max_steps: 20" >"$T/p1.log" 2>&1
check "batch-norm run with averages exits 0" [ $? -eq 0 ]
train --logdir="$T/p" --allow_partial_restore \
  --model_params_override="$BN; train.max_steps: 21; task.train.ema_decay_moving_vars: true" >"$T/p2.log" 2>&1
check "partial resume with averages of the moving statistics exits 0" [ $? -eq 0 ]
check "says which averages start from the weights" grep -q "has no moving average of [0-9]* of the [0-9]* averaged variables: those start from its weights" "$T/p2.log"
mvar=$(names "$T/p/train/ckpt-00000021" | grep 'moving_variance/var$' | head -1)
if [ -n "$mvar" ]; then
  paste <(value "$T/p/train/ckpt-00000021" "$mvar" | tr -s ' [],' '\n' | grep .) \
    <(value "$T/p/train/ckpt-00000021" "$mvar/ExponentialMovingAverage" | tr -s ' [],' '\n' | grep .) >"$T/mv"
  check "the moving variance's average starts from it ($(wc -l <"$T/mv") values)" \
    awk '{ n++; d = $1 - $2; if (d < 0) d = -d; if (!(d <= 0.1 * $1)) bad++ } END { exit !(n > 0 && !bad) }' "$T/mv"
else
  fail "no moving_variance variable in the batch-norm checkpoint"
fi

# 9. Sync replicas: two ranks train with averages; they are in the checkpoint and the
# run resumes from it.
if command -v mpirun >/dev/null; then
  # Open MPI's own allocations outlive MPI_Finalize (leak reports under ASan), as in
  # test_replicas.sh.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  MPI=(timeout 600 mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2)
  R="$EMA; cluster.worker.replicas: 2; cluster.num_threads: 1; input.batch_size: 16; train.max_steps: 20"
  "${MPI[@]}" "${TRAIN[@]}" --logdir="$T/r" --model_params_override="$R" >"$T/r.log" 2>&1
  check "mpirun -np 2 with ema_decay exits 0" [ $? -eq 0 ]
  check "replicas' checkpoint holds the averages" [ "$(names "$T/r/train/ckpt-00000020" | grep -c ExponentialMovingAverage)" -eq "$nvar" ]
  "${MPI[@]}" "${TRAIN[@]}" --logdir="$T/r" --model_params_override="${R/train.max_steps: 20/train.max_steps: 30}" >"$T/r2.log" 2>&1
  check "replicas resume with the averages" [ $? -eq 0 ] && grep -q "restored .* tensors" "$T/r2.log"
else
  skip_part "mpirun not installed: the replicas case"
fi
finish
