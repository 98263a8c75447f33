#!/usr/bin/env bash
# Sync replicas over MPI (src/comm/, src/runners/replicas.h) with the real trainer on
# Fashion-MNIST, two ranks on this machine (CI runs as root on 2 cores, hence
# --oversubscribe --allow-run-as-root):
#  - the communicator's collectives across two real ranks (check_comm under mpirun);
#  - 2 ranks x batch 128 take the steps of 1 rank x batch 256 on the same examples:
#    every tensor of the checkpoint within 1e-3 relative, the loss of every step within
#    1e-6 (16 steps, across an epoch boundary); also with weight noise and moving averages
#    (the same noise on every rank, the averages compared across ranks);
#  - the same run over the TCP transport (--mca btl tcp,self, as two machines use) ends
#    with bit-identical tensors, and so do runs whose all-reduce overlaps backward in
#    4 KB buckets and runs with one all-reduce after backward;
#  - kill -9 of one rank stops the job naming the rank; the restart (over TCP) resumes
#    from the last checkpoint and ends with exactly the weights of an uninterrupted run;
#  - a rank's error stops every rank with a message naming it; flag errors exit 2.
. "$(dirname "$0")/lib.sh"
if ! command -v mpirun >/dev/null; then
  fail "mpirun not found (scripts/install-deps.sh installs openmpi-bin)"
  finish; exit 1
fi
if ! ensure_fashion_mnist; then
  fail "keras2ckpt could not build the Fashion-MNIST checkpoint (apt-get install dataset-fashion-mnist)"
  finish; exit 1
fi
# Open MPI's own allocations outlive MPI_Finalize: under `make asan` leak reports on the
# ranks would be Open MPI's (the single-process tests keep leak checking for lingvoc).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN=(timeout 600 mpirun --oversubscribe --allow-run-as-root --bind-to none)
M=image.mnist.LeNet5
# Lingvo's LeNet5 without dropout (a mask is drawn per replica, so it would differ from the
# one-process run's) and with the learning-rate schedule pinned to one split (its peak
# otherwise scales with the number of splits, as Lingvo's does).
BASE="input.ckpt: \"$FM\"; input.num_samples: 4000; cluster.num_threads: 1; task.dropout_prob: 0.0; task.train.lr_schedule.num_splits: 1"
trainer() { "$LV_BIN/trainer" --model=$M --run_locally=cpu --mode=sync "$@"; }

# Every tensor but the params text, all values printed in full.
# rel_diff A B: the largest per-tensor relative L2 difference |a-b|/|a| of two dumps.
rel_diff() {
  python3 - "$1" "$2" <<'EOF'
import re, sys
def parse(p):
    d, cur = {}, None
    for line in open(p):
        if line.startswith("tensor_name:"):
            cur = line.split()[1]; d[cur] = []
        elif cur:
            d[cur] += [float(x) for x in re.findall(r'[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?', line)]
    return d
a, b = parse(sys.argv[1]), parse(sys.argv[2])
assert a.keys() == b.keys() and len(a) > 0, "different tensors"
worst = 0.0
for k in a:
    assert len(a[k]) == len(b[k]) and len(a[k]) > 0, k
    num = sum((x - y) ** 2 for x, y in zip(a[k], b[k])) ** 0.5
    den = sum(x * x for x in a[k]) ** 0.5 or 1.0
    worst = max(worst, num / den)
print("%.3g" % worst)
EOF
}
# The global loss of every step (--v=1 lines), one per line.
losses() { grep -o 'step [0-9]*: loss [0-9.e+-]*' "$1" | awk '{print $4}'; }

# 1. The collectives across two real ranks.
CK_FORK=no "${MPIRUN[@]}" -np 2 "$LV_BUILD/tests/check_comm" >"$T/ck.log" 2>&1
check "check_comm under mpirun -np 2 (MPI collectives)" [ $? -eq 0 ]
check "both ranks ran the MPI test" [ "$(grep -c '100%: Checks: 5' "$T/ck.log")" -eq 2 ]
check "MPI test not skipped" bash -c "! grep -q skipped '$T/ck.log'"

# 2. 2 ranks x 128 against 1 rank x 256, same seed and examples.
EQ="$BASE; train.max_steps: 16; train.save_interval_steps: 1000"
trainer --logdir="$T/one" --v=1 --model_params_override="$EQ; input.batch_size: 256" >"$T/one.log" 2>&1
check "1 rank x 256 exits 0" [ $? -eq 0 ]
"${MPIRUN[@]}" -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/two" --v=1 \
  --model_params_override="$EQ; input.batch_size: 128" >"$T/two.log" 2>&1
check "2 ranks x 128 exit 0" [ $? -eq 0 ]
check "the communicator is named in the log" grep -q "communicator mpi: Open MPI.*2 ranks" "$T/two.log"
check "global batch 256 = 2 replicas x 128" grep -q "batch 256 (2 replicas x 128)" "$T/two.log"
check "rank 0 reads shard 0 of 2 (rank 1 logs errors only)" grep -q "batch 128, replica 0 of 2" "$T/two.log"
check "only rank 0 logs progress (one line per step)" [ "$(losses "$T/two.log" | wc -l)" -eq 16 ]
check "only rank 0 writes events" [ "$(ls "$T"/two/train/events.out.tfevents.* | wc -l)" -eq 1 ]
check "allreduce time per step logged" grep -q "allreduce_ms/step:" "$T/two.log"
paste <(losses "$T/one.log") <(losses "$T/two.log") >"$T/losses"
check "16 losses on each side" [ "$(awk 'NF == 2' "$T/losses" | wc -l)" -eq 16 ]
check "every step's global loss within 1e-6 relative ($(awk '{d=($1-$2)/$1; if (d<0) d=-d; if (d>m) m=d} END{printf "%.2g", m}' "$T/losses"))" \
  awk '{d=($1-$2)/$1; if (d<0) d=-d; if (d>1e-6) bad=1} END{exit bad}' "$T/losses"
ckpt_dump "$T/one/train/ckpt-00000016" >"$T/w1"
ckpt_dump "$T/two/train/ckpt-00000016" >"$T/w2"
check "dumps are complete" [ "$(grep -c tensor_name "$T/w2")" -eq 21 ]
worst=$(rel_diff "$T/w1" "$T/w2")
# The two sum each gradient in another order; a bias gradient (a sum over the batch of
# terms of both signs) keeps only a few correct digits of that rounding, and Adam divides it
# by its own small RMS: after 16 steps fc/b's Adam slot differs by ~4e-4 relative on an
# AVX2 build (8-lane sums), while every step's loss stays within 1e-6.
check "every weight and Adam slot within 1e-3 relative of 1 x 256 (worst $worst)" awk "BEGIN{exit !($worst <= 1e-3)}"

# 2b. Weight noise and moving averages with replicas: every rank draws the noise one
# process draws (the step losses of 2 x 128 with noise on the softmax from step 4 equal
# those of 1 x 256 within 1e-5, and differ from a run without noise); the trainer compares
# the noisy variables and the moving averages across ranks (exit 0: identical); the saved
# averages match one process's.
VNE="$EQ; task.vn.global_vn: true; task.train.vn_std: 0.05; task.train.vn_start_step: 4; task.train.ema_decay: 0.99; \
train.summary_interval_steps: 4"
trainer --logdir="$T/vone" --v=1 --model_params_override="$VNE; input.batch_size: 256" >"$T/vone.log" 2>&1
check "1 rank x 256 with noise and averages exits 0" [ $? -eq 0 ]
"${MPIRUN[@]}" -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/vtwo" --v=1 \
  --model_params_override="$VNE; input.batch_size: 128" >"$T/vtwo.log" 2>&1
check "2 ranks x 128 with noise and averages exit 0 (noisy variables and averages the same on both)" [ $? -eq 0 ]
check "the noise is on from step 4" grep -q "step 4: variational weight noise is on" "$T/vtwo.log"
check "the noisy variables compared across ranks at steps 4, 7, 11, 15" \
  [ "$(grep -c 'the variables with weight noise are the same on all 2 ranks' "$T/vtwo.log")" -eq 4 ]
check "the moving averages compared across ranks at steps 4, 8, 12, 16" \
  [ "$(grep -c 'the moving averages are the same on all 2 ranks' "$T/vtwo.log")" -eq 4 ]
paste <(losses "$T/vone.log") <(losses "$T/vtwo.log") <(losses "$T/one.log") >"$T/vlosses"
check "16 losses with noise on each side" [ "$(awk 'NF == 3' "$T/vlosses" | wc -l)" -eq 16 ]
# The two sums' rounding drifts a little faster with noise (2.5e-6 by step 16 here); the
# noise itself moves the loss by ~1e-2, so other noise on a rank would show 1000x over.
check "every step's loss with noise within 1e-5 of one process's ($(awk '{d=($1-$2)/$1; if (d<0) d=-d; if (d>m) m=d} END{printf "%.2g", m}' "$T/vlosses"))" \
  awk '{d=($1-$2)/$1; if (d<0) d=-d; if (d>1e-5) bad=1} END{exit bad}' "$T/vlosses"
check "the noise changes the losses after step 4 (by more than 1e-3)" \
  awk 'NR > 4 {d=($1-$3)/$1; if (d<0) d=-d; if (d>1e-3) n++} END{exit !(n >= 10)}' "$T/vlosses"
ckpt_dump "$T/vone/train/ckpt-00000016" >"$T/vw1"
ckpt_dump "$T/vtwo/train/ckpt-00000016" >"$T/vw2"
check "moving averages saved (6)" [ "$(grep -c 'ExponentialMovingAverage' "$T/vw2")" -eq 6 ]
# Weights and averages as tight as without noise; the Adam slots (of bias gradients
# especially, see above) drift further with noise: 2.2e-3 for fc/b's after 16 steps.
noadam() { awk '/^tensor_name:/ { keep = $2 !~ /\/Adam(_1)?$/ } keep' "$1"; }
worst=$(rel_diff <(noadam "$T/vw1") <(noadam "$T/vw2"))
check "every weight and moving average within 1e-3 relative of 1 x 256 (worst $worst)" awk "BEGIN{exit !($worst <= 1e-3)}"
worst=$(rel_diff "$T/vw1" "$T/vw2")
check "every Adam slot within 5e-3 relative of 1 x 256 (worst $worst)" awk "BEGIN{exit !($worst <= 5e-3)}"

# 3. The same run over TCP: the same sums, bit for bit.
"${MPIRUN[@]}" --mca btl tcp,self -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/tcp" \
  --model_params_override="$EQ; input.batch_size: 128" >"$T/tcp.log" 2>&1
check "2 ranks over --mca btl tcp,self exit 0" [ $? -eq 0 ]
ckpt_dump "$T/tcp/train/ckpt-00000016" >"$T/wt"
check "TCP run ends with the shared-memory run's tensors, bit for bit" cmp -s "$T/w2" "$T/wt"

# 3b. The all-reduce overlapped with backward in buckets (--allreduce_bucket_mb; the run
# above used the default 4 MB: one bucket for LeNet5): many small buckets, and none (one
# all-reduce after backward), give the same sums, bit for bit.
check "the default run overlaps one bucket" grep -q "overlapped with backward: 1 bucket of about 4 MB" "$T/two.log"
"${MPIRUN[@]}" -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/bk" --allreduce_bucket_mb=0.004 \
  --model_params_override="$EQ; input.batch_size: 128" >"$T/bk.log" 2>&1
check "2 ranks with 4 KB buckets exit 0" [ $? -eq 0 ]
nb=$(grep -o "overlapped with backward: [0-9]* buckets" "$T/bk.log" | awk '{print $4}')
check "4 KB buckets: several of them (${nb:-none})" [ "${nb:-0}" -ge 3 ]
ckpt_dump "$T/bk/train/ckpt-00000016" >"$T/wb"
check "small buckets end with the one-bucket run's tensors, bit for bit" cmp -s "$T/w2" "$T/wb"
"${MPIRUN[@]}" -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/b0" --allreduce_bucket_mb=0 \
  --model_params_override="$EQ; input.batch_size: 128" >"$T/b0.log" 2>&1
check "2 ranks with --allreduce_bucket_mb=0 exit 0" [ $? -eq 0 ]
check "no overlap logged with buckets off" bash -c "! grep -q 'overlapped with backward' '$T/b0.log'"
ckpt_dump "$T/b0/train/ckpt-00000016" >"$T/wn"
check "one all-reduce after backward: the same tensors, bit for bit" cmp -s "$T/w2" "$T/wn"
expect_exit 2 "--allreduce_bucket_mb=-1" trainer --logdir="$T/e0" --allreduce_bucket_mb=-1 --model_params_override="$EQ"
err_has "--allreduce_bucket_mb=-1: expected 0 (off)"

# Batch norm: each rank's moving statistics come from its own batch, then their mean
# replaces them; the trainer compares every variable across ranks at each summary step
# (and stops if one differs), so a clean exit says they stayed identical.
"${MPIRUN[@]}" -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/bn" --model_params_override="$BASE; task.batch_norm: true; \
input.batch_size: 32; train.max_steps: 4; train.summary_interval_steps: 2" >"$T/bn.log" 2>&1
check "2 ranks with batch norm keep identical variables, moving statistics included" [ $? -eq 0 ]
check "moving statistics saved" grep -q "conv0/moving_mean/var" <("$LV_BIN/ckpt_inspect" --file_name="$T/bn/train")

# 4. kill -9 of a rank, restart over TCP: exactly the uninterrupted run's weights.
KR="$BASE; input.batch_size: 64; train.max_steps: 40; train.save_interval_steps: 10"
"${MPIRUN[@]}" -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/full" --model_params_override="$KR" >"$T/full.log" 2>&1
check "uninterrupted 2-rank run exits 0" [ $? -eq 0 ]
mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/k" \
  --model_params_override="$KR" >"$T/k1.log" 2>&1 &
mpid=$!
wait_ckpt_listed "$T/k/train" 20
# The ranks are mpirun's children; rank 1 is the one whose environment says so.
victim=""
for p in $(pgrep -P $mpid); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$p; fi
done
check "found rank 1's process" [ -n "$victim" ]
[ -n "$victim" ] && kill -9 "$victim"
wait $mpid
rc=$?
check "the job stops when rank 1 dies (mpirun exit $rc)" [ $rc -ne 0 ]
check "mpirun names the killed rank" grep -q "process rank 1 with PID .* exited on signal 9" "$T/k1.log"
check "killed before the end" [ ! -f "$T/k/train/ckpt-00000040.index" ]
"${MPIRUN[@]}" --mca btl tcp,self -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/k" \
  --model_params_override="$KR" >"$T/k2.log" 2>&1
check "restart (over TCP) exits 0" [ $? -eq 0 ]
check "restart resumed from a checkpoint" grep -q "restored .* tensors from .*ckpt-000000[1-3]0" "$T/k2.log"
ckpt_dump "$T/full/train/ckpt-00000040" >"$T/wf"
ckpt_dump "$T/k/train/ckpt-00000040" >"$T/wk"
check "same final weights and Adam slots as the uninterrupted run" cmp -s "$T/wf" "$T/wk"

# 4b. A 2-replica run resumed with 1 replica says that the replica count changed (the
# batches differ from the interrupted run's), not that it reads what that run would.
. "$LV_ROOT/tests/data/decode_golden/models.sh"
RC="$OV_transformer; train.save_interval_steps: 4"
"${MPIRUN[@]}" -np 2 "$LV_BIN/trainer" --model=$MODEL_transformer --logdir="$T/rc" \
  --model_params_override="$RC; train.max_steps: 4" >"$T/rc1.log" 2>&1
check "2-replica MT run exits 0" [ $? -eq 0 ]
expect_exit 0 "resumed with 1 replica" "$LV_BIN/trainer" --model=$MODEL_transformer --logdir="$T/rc" \
  --model_params_override="$RC; train.max_steps: 6"
err_has "the replica count changed: $T/rc/train/ckpt-00000004 was written by a run of 2 replicas, this run has 1"
err_has "does not train on the batches the interrupted run would have"
check "the replay is not claimed to give the interrupted run's batches" \
  bash -c "! grep -q 'so this run trains on what an uninterrupted run would' '$T/err'"
expect_exit 0 "resumed again with 1 replica" "$LV_BIN/trainer" --model=$MODEL_transformer --logdir="$T/rc" \
  --model_params_override="$RC; train.max_steps: 8"
check "no replica-count warning when it did not change" bash -c "! grep -q 'replica count changed' '$T/err'"

# 5. Errors: a rank's failure stops every rank and names it; flags that cannot hold exit 2.
# The same settings on both ranks (they are compared at start), the same relative
# input.ckpt, but only rank 0's working directory holds the dataset.
mkdir -p "$T/wdir0" "$T/wdir1"
for f in "$FM".*; do ln -s "$f" "$T/wdir0/fm${f#$FM}"; done
KRW="${KR/input.ckpt: \"$FM\"/input.ckpt: \"fm\"}"
XD="--experiments_dir=$LV_ROOT/experiments"
mpirun --oversubscribe --allow-run-as-root -np 1 -wdir "$T/wdir0" "$LV_BIN/trainer" --model=$M --logdir="$T/e" "$XD" \
  --model_params_override="$KRW" : -np 1 -wdir "$T/wdir1" "$LV_BIN/trainer" --model=$M --logdir="$T/e" "$XD" \
  --model_params_override="$KRW" >"$T/out" 2>"$T/err"
rc=$?
check "rank 1's bad input stops the job with exit 2 (exit $rc)" [ $rc -eq 2 ]
err_has "rank 1 of 2: trainer: error: input.ckpt"
err_has "stopping all 2 ranks"
check "no checkpoint written" [ ! -e "$T/e/train/ckpt-00000000.index" ]
expect_exit 2 "--worker_replicas=3 under mpirun -np 2" "${MPIRUN[@]}" -np 2 "$LV_BIN/trainer" --model=$M \
  --logdir="$T/e2" --worker_replicas=3 --model_params_override="$KR"
err_has "--worker_replicas=3 but 2 processes were started by mpirun"
expect_exit 2 "--mode=async under mpirun -np 2" "${MPIRUN[@]}" -np 2 "$LV_BIN/trainer" --model=$M --logdir="$T/e2" \
  --mode=async --model_params_override="$KR"
err_has "replicas are synchronous"
# Ranks started with different settings stop at start, naming the first difference,
# instead of waiting for each other in mismatched collectives.
two_ranks() { # two_ranks LOGDIR "RANK0 ARGS" "RANK1 ARGS": both with $KR
  local dir=$1 a0=$2 a1=$3
  eval "timeout 120 mpirun --oversubscribe --allow-run-as-root --bind-to none \
    -np 1 \"$LV_BIN/trainer\" --model=$M --logdir=\"$dir\" $a0 : -np 1 \"$LV_BIN/trainer\" --model=$M --logdir=\"$dir\" $a1"
}
expect_exit 2 "ranks with different train.max_steps" two_ranks "$T/d1" \
  "--model_params_override='$KR; train.max_steps: 40'" "--model_params_override='$KR; train.max_steps: 41'"
err_has "the replicas were started with different settings"
err_has 'rank 0 has "train.max_steps : 40", rank 1 has "train.max_steps : 41"'
check "no checkpoint written" [ ! -e "$T/d1/train/ckpt-00000000.index" ]
expect_exit 2 "Adam on rank 0, SGD on rank 1" two_ranks "$T/d2" \
  "--model_params_override='$KR'" "--model_params_override=\"$KR; task.train.optimizer.cls: 'SGD'\""
err_has "rank 0 has \"task.train.optimizer.cls : 'Adam'\", rank 1 has \"task.train.optimizer.cls : 'SGD'\""
expect_exit 2 "--allreduce_bucket_mb 4 vs 0" two_ranks "$T/d3" \
  "--allreduce_bucket_mb=4 --model_params_override='$KR'" "--allreduce_bucket_mb=0 --model_params_override='$KR'"
err_has "--allreduce_bucket_mb bytes: 4194304"
expect_exit 2 "variables of other shapes (num_classes 10 vs 11)" two_ranks "$T/d4" \
  "--model_params_override='$KR'" "--model_params_override='$KR; task.softmax.num_classes: 11'"
err_has 'rank 0 has "task.softmax.num_classes : 10", rank 1 has "task.softmax.num_classes : 11"'
expect_exit 2 "one rank in --mode=inspect_params" two_ranks "$T/d5" \
  "--model_params_override='$KR'" "--mode=inspect_params --model_params_override='$KR'"
err_has "--mode=inspect_params runs in one process, not under mpirun"
expect_exit 2 "--worker_replicas=2 without mpirun" trainer --logdir="$T/e3" --worker_replicas=2 --model_params_override="$KR"
err_has "start them with mpirun -np 2"
expect_exit 2 "--worker_split_size=2" trainer --logdir="$T/e3" --worker_split_size=2 --model_params_override="$KR"
err_has "model parallelism"
finish
