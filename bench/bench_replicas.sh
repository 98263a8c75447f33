#!/usr/bin/env bash
# Sync-replica scaling (weak scaling, the per-replica batch fixed): 1 rank with 1 thread
# against 2 ranks (mpirun -np 2, each bound to its own core) with 1 thread each, the same
# model and per-replica batch, runs interleaved. Prints steps/s (median of the progress
# lines after the first), examples/s = replicas x per-replica batch x steps/s, the
# scaling (target >= 1.8x) and the all-reduce time per step (the trainer's
# allreduce_ms/step: the MPI_Allreduce of the gradient buffer, waiting for the slower
# rank included).
#
#   RUNS=N         interleaved runs per configuration (default 3 LeNet5, 1 TransformerSmall)
#   STEPS=N        LeNet5 steps per run (default 60); MT_STEPS (default 20)
#   MODELS="lenet5 mt mt-fixed"  which models (mt and mt-fixed need
#                  scripts/prepare_bible_en_es.sh /tmp/bible). mt trains on the length
#                  buckets, so the two ranks' batches differ in shape each step and the
#                  faster rank waits; mt-fixed is the same model on one bucket padded to
#                  64 tokens (40 sentences, 2,560 target tokens per replica): every step
#                  the same work on both ranks, what the replicas themselves cost.
#   BIND=core|none mpirun's --bind-to (default core: each rank on its own core)
# First, build/bench/bench_allreduce (bench/bench_allreduce.c) times the bare all-reduce of
# LeNet5's, TransformerSmall's and Transformer Base's gradient sizes over shared memory
# and over TCP.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
RUNS=${RUNS:-3}
MT_RUNS=${MT_RUNS:-1}
STEPS=${STEPS:-60}
MT_STEPS=${MT_STEPS:-20}
MODELS=${MODELS:-"lenet5 mt mt-fixed"}
FM=${LV_TEST_DATA_DIR:-/tmp/lingvoc-test-data}/fashion_mnist
T=$(mktemp -d /tmp/bench-replicas.XXXXXX)
trap 'rm -rf "$T"' EXIT
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to "${BIND:-core}")
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# steady LOG: median steps/s and mean allreduce ms/step over the progress lines but the first.
steady() {
  python3 - "$1" <<'EOF'
import re, statistics as st, sys
text = open(sys.argv[1]).read()
sps = [float(x) for x in re.findall(r"steps/sec: ([0-9.]+)", text)][1:]
red = [float(x) for x in re.findall(r"allreduce_ms/step:([0-9.]+)", text)][1:]
print("%.4f %s" % (st.median(sps) if sps else float("nan"), "%.2f" % st.mean(red) if red else "-"))
EOF
}

run_model() {
  local name=$1 model=$2 override=$3 batch=$4 steps=$5 runs=$6
  local one=() two=() red=()
  for r in $(seq "$runs"); do
    rm -rf "$T/1" "$T/2"
    bin/trainer --model="$model" --logdir="$T/1" --log_interval_steps=5 \
      --model_params_override="$override; train.max_steps: $steps; cluster.num_threads: 1" >"$T/1.log" 2>&1 ||
      { echo "$name: 1-rank run failed: $(tail -2 "$T/1.log")"; return 1; }
    "${MPIRUN[@]}" -np 2 bin/trainer --model="$model" --logdir="$T/2" --log_interval_steps=5 \
      --model_params_override="$override; train.max_steps: $steps; cluster.num_threads: 1" >"$T/2.log" 2>&1 ||
      { echo "$name: 2-rank run failed: $(tail -2 "$T/2.log")"; return 1; }
    read -r s1 _ < <(steady "$T/1.log")
    read -r s2 a2 < <(steady "$T/2.log")
    one+=("$s1"); two+=("$s2"); red+=("$a2")
    echo "$name run $r: 1 rank $s1 steps/s, 2 ranks $s2 steps/s, allreduce $a2 ms/step"
  done
  python3 - "$name" "$batch" "${one[*]}" "${two[*]}" "${red[*]}" <<'EOF'
import statistics as st, sys
name, batch = sys.argv[1], sys.argv[2]
one = [float(x) for x in sys.argv[3].split()]; two = [float(x) for x in sys.argv[4].split()]
red = [float(x) for x in sys.argv[5].split() if x != "-"]
m1, m2 = st.median(one), st.median(two)
b = float(batch) if batch != "-" else None
ex = lambda r, s: ("%.0f examples/s" % (r * b * s)) if b else ""
print(f"{name}: 1 rank x 1 thread {m1:.3f} steps/s {ex(1, m1)} [{min(one):.3f}-{max(one):.3f}]; "
      f"2 ranks x 1 thread {m2:.3f} steps/s {ex(2, m2)} [{min(two):.3f}-{max(two):.3f}]; "
      f"scaling {2 * m2 / m1:.2f}x (efficiency {100 * m2 / m1:.0f}%); "
      f"allreduce {st.median(red) if red else float('nan'):.2f} ms/step of {1000 / m2:.0f} ms")
EOF
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc --all) cores"
make -s -j"$(nproc)" bin/trainer bin/keras2ckpt
. bench/build.sh
bench_build bench_allreduce
echo "all-reduce, shared memory:"; "${MPIRUN[@]}" -np 2 "$bench_dir/bench_allreduce" 10
echo "all-reduce, TCP:"; "${MPIRUN[@]}" --mca btl tcp,self -np 2 "$bench_dir/bench_allreduce" 5
for m in $MODELS; do
  case $m in
    lenet5)
      [ -f "$FM.index" ] || bin/keras2ckpt --dataset=fashion_mnist --out="$FM" >/dev/null
      run_model LeNet5 image.mnist.LeNet5 "input.ckpt: \"$FM\"; input.batch_size: 256; train.save_interval_steps: 100000" \
        256 "$STEPS" "$RUNS" ;;
    mt)
      if [ ! -f /tmp/bible/train.tfrecord-00000-of-00001 ]; then
        echo "TransformerSmall: skipped (run scripts/prepare_bible_en_es.sh /tmp/bible first)"; continue
      fi
      run_model TransformerSmall mt.bible_en_es.TransformerSmall "train.save_interval_steps: 100000" - "$MT_STEPS" "$MT_RUNS" ;;
    mt-fixed)
      if [ ! -f /tmp/bible/train.tfrecord-00000-of-00001 ]; then
        echo "TransformerSmall (fixed shape): skipped (run scripts/prepare_bible_en_es.sh /tmp/bible first)"; continue
      fi
      run_model "TransformerSmall (one bucket, [40, 64])" mt.bible_en_es.TransformerSmall \
        "train.save_interval_steps: 100000; input.bucket_upper_bound: [64]; input.bucket_batch_limit: [40]; input.pad_to_max_seq_length: true; input.source_max_length: 64; input.target_max_length: 64" \
        40 "$MT_STEPS" "$MT_RUNS" ;;
  esac
done
