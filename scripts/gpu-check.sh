#!/usr/bin/env bash
# gpu-check.sh OUTDIR - every GPU check of lingvoc in one go, run from the directory that
# scripts/make-gpu-bundle.sh (`make gpu-bundle`) prepares, on a machine with one or more
# NVIDIA GPUs, the driver, CUDA 13's cuBLAS and runtime, and python3 with PyTorch and
# TensorBoard. It checks its prerequisites first (one line naming what is missing; exit 3
# if a hard one is), then runs, each under its own timeout:
#   ops          check_backend_ops on cuda:0 against cpu:0 (conv and pooling with cuDNN and
#                without: the cudnn line); compute-sanitizer memcheck on it
#   lenet5       image.mnist.LeNet5Fashion, LENET_STEPS steps on the CPU and on the GPU from
#                the same seed: per-step loss curves within a tolerance
#   mt           mt.bible_en_es.TransformerSmall, MT_GPU_STEPS on the GPU and MT_CPU_STEPS on
#                the CPU (all cores): curves within a tolerance; the CPU's checkpoint at
#                MT_CPU_STEPS/2 resumed on the GPU, the GPU's resumed on the CPU and on the
#                GPU, each continuing the curves to MT_CPU_STEPS; MT_REMAT_STEPS (20) with the
#                layers rematerialized (remat) on the GPU against the plain GPU curve
#   int8         an int8 model file (bin/export --quantize=int8 of the GPU run's last checkpoint)
#                decoding 20 Test lines on the GPU (its weights dequantized to float32
#                there: the int8 kernels are CPU-only) against the same file on the CPU with
#                LINGVOC_INT8=float (float32 GEMMs on the same values)
#   multi_gpu    --worker_gpus beyond the visible GPUs refused (exit 2, nothing written);
#                NCCL one rank against no communicator (SKIP: the bundle is MPI=0)
#   tensorboard  the trainer's and evaler's event directories read with TensorBoard's
#                EventAccumulator: scalars against the logs and score file, images, text
#   speed        LeNet5 training examples/s (and without cuDNN) and the Transformer (model
#                512, 8 heads, 6 + 6 layers, ~4k target tokens a batch) training and greedy
#                decoding tokens/s against PyTorch eager on the same GPU, with GPU
#                utilisation; ratios
# The CPU reference runs go in the background while the GPU runs; the speed runs come last,
# alone. Writes OUTDIR/summary.txt (one line a check), OUTDIR/<check>.txt (figures and
# curves) and OUTDIR/logs.tar.gz (every log, each cut to its last MiB): 8 files at most.
#
# GPU_CHECK_CPU_ONLY=1: a dry run without a GPU: the prerequisites minus the GPU, and the
# CPU halves (LeNet5 and MT CPU runs, a CPU resume, the curve comparison of a run with its
# resumed self, the refusals); exits 0 when those pass.
# Environment: LENET_STEPS (200) MT_GPU_STEPS (300) MT_CPU_STEPS (80) GPU_CHECK_WORK (a
# fresh /tmp dir) GPU_CHECK_BUDGET (seconds, 420: the Transformer speed run is skipped when
# less than 100 s are left) and the tolerances below.
set -uo pipefail
[ $# -eq 1 ] && [ "$1" != "-h" ] && [ "$1" != "--help" ] || {
  echo "usage: $0 OUTDIR   (run from the GPU bundle of \`make gpu-bundle\`)" >&2; exit 2; }
T0=$(date +%s)
here=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
CPU_ONLY=${GPU_CHECK_CPU_ONLY:-0}
if [ -n "${GPU_CHECK_WORK:-}" ]; then W=$GPU_CHECK_WORK; mkdir -p "$W"; else W=$(mktemp -d /tmp/gpu-check.XXXXXX); fi
BUDGET=${GPU_CHECK_BUDGET:-420}
LENET_STEPS=${LENET_STEPS:-200}
MT_GPU_STEPS=${MT_GPU_STEPS:-300}
MT_REMAT_STEPS=${MT_REMAT_STEPS:-20}
MT_REMAT="task.encoder.transformer_stack.transformer_tpl.remat: true; task.decoder.trans_tpl.remat: true"
MT_CPU_STEPS=${MT_CPU_STEPS:-80}
MT_HALF=$((MT_CPU_STEPS / 2))
# Tolerances (relative, per step): the first EARLY steps must agree closely (a wrong kernel
# shows at once); later steps may drift as float32 rounding differences grow through Adam.
EARLY=${GPU_CHECK_EARLY_STEPS:-10}
RTOL_EARLY=${GPU_CHECK_RTOL_EARLY:-1e-4}
RTOL=${GPU_CHECK_RTOL:-2e-2}
NPROC=$(nproc)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PY=${PYTHON:-python3}
rm -f "$OUT"/summary.txt "$OUT"/{ops,lenet5,mt,int8,multi_gpu,tensorboard,speed}.txt "$OUT"/logs.tar.gz
elapsed() { echo $(($(date +%s) - T0)); }
# result CHECK FILE STATUS FIGURE: one summary line, also at the end of the check's file.
result() {
  local line
  line=$(printf '%-17s %-4s %s' "$1" "$3" "$4")
  echo "$line" | tee -a "$OUT/summary.txt"
  echo "== $line" >>"$OUT/$2.txt"
}
note() { echo "$2" >>"$OUT/$1.txt"; }

# ---- Prerequisites ---------------------------------------------------------------------
missing=() soft=()
command -v "$PY" >/dev/null || missing+=("python3 (PYTHON=)")
for f in avx2 fma bmi2 f16c movbe; do
  grep -qw "$f" /proc/cpuinfo || missing+=("CPU lacks $f (the bundle is built for x86-64-v3: make X86_LEVEL=x86-64-v2 gpu-bundle)")
done
# The bundle runs from a copy in the work dir ($W/run: bin/, lib/ and data/ unpacked from
# payload.tar.xz, experiments/), so that the bundle itself stays as it travelled.
R=$W/run
mkdir -p "$R" && cp -r "$here/bin" "$here/experiments" "$R/" 2>/dev/null || missing+=("bin/ and experiments/ in $here")
if [ -f "$here/payload.tar.xz" ]; then
  (cd "$R" && { tar -xJf "$here/payload.tar.xz" 2>/dev/null ||
    "$PY" -c 'import tarfile,sys; tarfile.open(sys.argv[1]).extractall(".")' "$here/payload.tar.xz"; }) ||
    missing+=("could not unpack payload.tar.xz")
fi
[ -d "$R/lib" ] && [ -d "$R/data" ] || missing+=("lib/ and data/ from $here/payload.tar.xz")
BIN=$R/bin
# CUDA's libraries: /usr/local/cuda/lib64 (the RPATH), else wherever this machine has them.
cuda_libs_ok() { ! ldd "$BIN/trainer" 2>/dev/null | grep -q 'libcu.*not found'; }
if ! cuda_libs_ok; then
  for d in "$CUDA_HOME/lib64" /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
           $("$PY" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null | xargs -n1 -I{} sh -c 'ls -d {}/nvidia/*/lib 2>/dev/null'); do
    [ -f "$d/libcublas.so.13" ] || [ -f "$d/libcudart.so.13" ] || continue
    export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
fi
# cuDNN 9: the executables link libcudnn.so.9, whose sub-libraries (some 500 MB) the bundle
# cannot carry, so this machine's runs: CUDA's (the RPATH), else PyTorch's wheel's
# (nvidia/cudnn/lib or torch/lib: the whole set from one folder, as the shim loads its
# sub-libraries from its own); with none, the bundle's shim alone lets the executables
# start, and conv and pooling run without cuDNN (the cudnn line of ops says why).
CUDNN_FROM=$(ldd "$BIN/trainer" 2>/dev/null | awk '$1 == "libcudnn.so.9" && $3 ~ /^\// { print $3 }')
if [ -z "$CUDNN_FROM" ]; then
  for d in "$CUDA_HOME/lib64" /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
           $("$PY" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null | xargs -n1 -I{} sh -c 'ls -d {}/nvidia/cudnn/lib {}/torch/lib 2>/dev/null'); do
    [ -f "$d/libcudnn.so.9" ] && [ -f "$d/libcudnn_cnn.so.9" ] || continue
    export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    CUDNN_FROM=$d/libcudnn.so.9
    break
  done
fi
if [ -z "$CUDNN_FROM" ] && [ -f "$R/cudnn-shim/libcudnn.so.9" ] && [ -d "$R/lib" ]; then
  cp "$R/cudnn-shim/libcudnn.so.9" "$R/lib/"
  CUDNN_FROM="none (the bundle's shim alone: conv and pooling without cuDNN)"
  soft+=("cuDNN 9 (neither CUDA's nor PyTorch's: conv and pooling run without it)")
fi
for b in "$BIN"/*; do
  nf=$(ldd "$b" 2>&1 | grep 'not found' | awk '{print $1}' | sort -u | tr '\n' ' ')
  [ -z "$nf" ] || missing+=("$(basename "$b") needs ${nf% } (libcudart/libcublas .so.13: CUDA 13 in /usr/local/cuda or LD_LIBRARY_PATH)")
done
GPUS=0
if [ "$CPU_ONLY" != 1 ]; then
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  [ "$GPUS" -gt 0 ] || GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
  [ "$GPUS" -gt 0 ] || missing+=("no GPU visible (nvidia-smi -L lists none, GPU_CHECK_CPU_ONLY=1 runs the CPU halves)")
fi
SANITIZER=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
[ -x "$SANITIZER" ] || { SANITIZER=""; soft+=("compute-sanitizer (memcheck skipped)"); }
HAVE_TORCH=0 HAVE_TB=0
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && HAVE_TORCH=1 ||
  soft+=("python3 with CUDA PyTorch (speed skipped)")
"$PY" -c 'from tensorboard.backend.event_processing import event_accumulator' 2>/dev/null && HAVE_TB=1 ||
  soft+=("python3 tensorboard (tensorboard check skipped)")
all=("${missing[@]}" "${soft[@]}")
if [ ${#all[@]} -eq 0 ]; then
  echo "gpu-check: prerequisites: all present ($GPUS GPU(s), $NPROC cores, work dir $W)"
else
  echo "gpu-check: prerequisites missing: $(IFS=';'; echo "${all[*]}" | sed 's/;/; /g')"
fi
if [ ${#missing[@]} -gt 0 ]; then [ -n "${GPU_CHECK_WORK:-}" ] || rm -rf "$W"; exit 3; fi
{
  echo "gpu-check on $(hostname), $(date -u +%Y-%m-%dT%H:%MZ), $NPROC cores, CPU_ONLY=$CPU_ONLY"
  [ "$CPU_ONLY" = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "cuDNN: ${CUDNN_FROM:-not found}"
  head -2 "$here/MANIFEST" 2>/dev/null
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"
DATA=$R/data
export OMP_NUM_THREADS=$NPROC OPENBLAS_NUM_THREADS=1

# ---- Run helpers -------------------------------------------------------------------------
LENET=image.mnist.LeNet5Fashion
MT=mt.bible_en_es.TransformerSmall
# Summaries 4 times a LeNet5 run, every MT_HALF/2 steps of an MT run (the tensorboard check).
LENET_OV="input.ckpt: \"$W/fm/fm\"; input.num_samples: 12000; train.max_steps: $LENET_STEPS; train.save_interval_steps: 100000; train.summary_interval_steps: $(((LENET_STEPS + 3) / 4)); cluster.num_threads: $NPROC"
MT_OV="input.file_pattern: \"$DATA/bible/train.tfrecord@1\"; train.summary_interval_steps: $(((MT_HALF + 1) / 2)); cluster.num_threads: $NPROC"
# train LOGDIR DEVICE(cpu|gpu) TIMEOUT MODEL OVERRIDE [LOG_EVERY]: a trainer run logging
# every step (or every LOG_EVERY).
train() {
  local dir=$1 dev=$2 secs=$3 model=$4 ov=$5 every=${6:-1}
  timeout -k 10 "$secs" "$BIN/trainer" --model="$model" --logdir="$dir" --run_locally="$dev" \
    --log_interval_steps="$every" --model_params_override="$ov" >"$dir.log" 2>&1
}
# resume_from SRC_LOGDIR STEP DST_LOGDIR: DST holds SRC's checkpoint at STEP only.
resume_from() {
  local src=$1 step dst=$3
  step=$(printf '%08d' "$2")
  mkdir -p "$dst/train" && cp "$src/train/ckpt-$step".* "$dst/train/" &&
    printf 'model_checkpoint_path: "ckpt-%s"\nall_model_checkpoint_paths: "ckpt-%s"\n' "$step" "$step" >"$dst/train/checkpoint"
}
wait_file() { local f=$1 secs=$2; for _ in $(seq $((secs * 2))); do [ -f "$f" ] && return 0; sleep 0.5; done; return 1; }
curves() { "$PY" "$here/scripts/gpu_check_curves.py" "$@"; }
ckpt_of() { printf '%s/train/ckpt-%08d.index' "$1" "$2"; }

# ---- The CPU references, in the background -------------------------------------------------
"$BIN/keras2ckpt" --dataset=fashion_mnist --source="$DATA/fashion" --out="$W/fm/fm" >"$W/keras2ckpt.log" 2>&1 ||
  { echo "gpu-check: keras2ckpt failed: $(tail -1 "$W/keras2ckpt.log")"; exit 1; }
cpu_refs() {
  train "$W/lenet_cpu" cpu 300 "$LENET" "$LENET_OV"; echo "lenet_cpu rc=$?"
  train "$W/mt_cpu" cpu 330 "$MT" "$MT_OV; train.max_steps: $MT_CPU_STEPS; train.save_interval_steps: $MT_HALF"
  echo "mt_cpu rc=$?"
  if [ "$CPU_ONLY" = 1 ]; then src=$W/mt_cpu; else src=$W/mt_gpu; fi
  if wait_file "$(ckpt_of "$src" "$MT_HALF")" 300 && resume_from "$src" "$MT_HALF" "$W/mt_cpu_from_gpu"; then
    train "$W/mt_cpu_from_gpu" cpu 300 "$MT" "$MT_OV; train.max_steps: $MT_CPU_STEPS; train.save_interval_steps: $MT_HALF"
    echo "mt_cpu_from_gpu rc=$?"
  else
    echo "mt_cpu_from_gpu: no checkpoint $(ckpt_of "$src" "$MT_HALF")"
  fi
  if [ "$CPU_ONLY" = 1 ]; then  # the event directories for the tensorboard check
    timeout -k 10 200 "$BIN/evaler" --model=$LENET --logdir="$W/lenet_cpu" --once --dataset=Test \
      --model_params_override="$LENET_OV; input.num_samples: 2000" >"$W/lenet_cpu_eval.log" 2>&1
    echo "lenet_cpu evaler rc=$?"
  fi
}
cpu_refs >"$W/cpu_refs.log" 2>&1 &
CPU_PID=$!

# ---- ops -----------------------------------------------------------------------------------
echo "check_backend_ops (cuda:0 and the guarded cpu:1 against cpu:0), timeout 180 s" >"$OUT/ops.txt"
timeout -k 10 180 "$BIN/check_backend_ops" >"$W/ops.log" 2>&1
rc=$?
grep '^check_backend_ops:' "$W/ops.log" >>"$OUT/ops.txt"
grep -E '^FAIL|differ' "$W/ops.log" | head -40 >>"$OUT/ops.txt"
cuda_line=$(grep '^check_backend_ops: cuda' "$W/ops.log" | sed 's/^check_backend_ops: //')
if [ "$CPU_ONLY" = 1 ]; then
  [ $rc -eq 77 ] && result ops ops SKIP "no GPU (CPU_ONLY); cpu:1 part: $(grep -o 'cpu:1 vs cpu:0: .*' "$W/ops.log")" ||
    result ops ops FAIL "exit $rc without a GPU (expected 77)"
elif [ $rc -eq 0 ] && [ -n "$cuda_line" ]; then result ops ops PASS "$cuda_line"
elif [ $rc -ge 124 ]; then result ops ops FAIL "timed out after 180 s"
else result ops ops FAIL "exit $rc: ${cuda_line:-no cuda:0 line} (see ops.txt)"
fi
# The same run's conv and pooling cases with cuDNN and without it (check_backend_ops's
# cudnn: and im2col: lines): PASS when cuDNN ran some and every case passed.
cudnn_line=$(grep '^check_backend_ops: cudnn:' "$W/ops.log" | sed 's/^check_backend_ops: cudnn: //')
im2col_line=$(grep '^check_backend_ops: im2col:' "$W/ops.log" | sed 's/^check_backend_ops: im2col: //')
repeat_line=$(grep '^check_backend_ops: repeat: conv2d on cuda' "$W/ops.log" | sed 's/^check_backend_ops: repeat: //')
im2col_line="$im2col_line; ${repeat_line:-no repeat: line}"
if [ "$CPU_ONLY" = 1 ]; then result cudnn ops SKIP "no GPU (CPU_ONLY)"
elif [ -z "$cudnn_line" ] || [ -z "$im2col_line" ]; then result cudnn ops FAIL "exit $rc, no cudnn:/im2col: line (see ops.txt)"
elif echo "$cudnn_line" | grep -q ' 0 conv/avg-pool calls on cuDNN'; then
  [ $rc -eq 0 ] && result cudnn ops SKIP "cuDNN did not run: $cudnn_line; $im2col_line" ||
    result cudnn ops FAIL "exit $rc: $cudnn_line; $im2col_line"
elif [ $rc -eq 0 ]; then result cudnn ops PASS "$cudnn_line; $im2col_line"
else result cudnn ops FAIL "exit $rc: $cudnn_line; $im2col_line"
fi
if [ "$CPU_ONLY" = 1 ] || [ -z "$SANITIZER" ]; then
  result memcheck ops SKIP "$([ -z "$SANITIZER" ] && echo 'no compute-sanitizer' || echo 'no GPU (CPU_ONLY)')"
else
  CK_FORK=no timeout -k 10 180 "$SANITIZER" --tool memcheck --error-exitcode 99 "$BIN/check_backend_ops" >"$W/memcheck.log" 2>&1
  rc=$?
  summ=$(grep -o 'ERROR SUMMARY: [0-9]* error[s]*' "$W/memcheck.log" | tail -1)
  { echo "compute-sanitizer --tool memcheck check_backend_ops (CK_FORK=no), timeout 180 s: exit $rc"; grep -E 'ERROR SUMMARY|Invalid|out of bounds|leak' "$W/memcheck.log" | head -40; } >>"$OUT/ops.txt"
  if [ $rc -ge 124 ] && [ $rc -ne 99 ]; then result memcheck ops FAIL "timed out after 180 s (${summ:-no summary})"
  elif [ $rc -eq 0 ] && [ "$summ" = "ERROR SUMMARY: 0 errors" ]; then result memcheck ops PASS "$summ"
  else result memcheck ops FAIL "exit $rc, ${summ:-no summary}"
  fi
fi

# ---- GPU training runs (the CPU references run meanwhile) -----------------------------------
if [ "$CPU_ONLY" != 1 ]; then
  train "$W/lenet_gpu" gpu 120 "$LENET" "$LENET_OV"; echo "lenet_gpu rc=$?" >>"$W/gpu_runs.log"
  timeout -k 10 90 "$BIN/evaler" --model=$LENET --logdir="$W/lenet_gpu" --run_locally=gpu --once --dataset=Test \
    --model_params_override="$LENET_OV; input.num_samples: 2000" >"$W/lenet_gpu_eval.log" 2>&1
  echo "lenet_gpu evaler rc=$?" >>"$W/gpu_runs.log"
  train "$W/mt_gpu" gpu 180 "$MT" "$MT_OV; train.max_steps: $MT_GPU_STEPS; train.save_interval_steps: $MT_HALF"
  echo "mt_gpu rc=$?" >>"$W/gpu_runs.log"
  resume_from "$W/mt_gpu" "$MT_HALF" "$W/mt_gpu_from_gpu" &&
    train "$W/mt_gpu_from_gpu" gpu 90 "$MT" "$MT_OV; train.max_steps: $MT_CPU_STEPS; train.save_interval_steps: $MT_HALF"
  echo "mt_gpu_from_gpu rc=$?" >>"$W/gpu_runs.log"
  if wait_file "$(ckpt_of "$W/mt_cpu" "$MT_HALF")" 240 && resume_from "$W/mt_cpu" "$MT_HALF" "$W/mt_gpu_from_cpu"; then
    train "$W/mt_gpu_from_cpu" gpu 90 "$MT" "$MT_OV; train.max_steps: $MT_CPU_STEPS; train.save_interval_steps: $MT_HALF"
    echo "mt_gpu_from_cpu rc=$?" >>"$W/gpu_runs.log"
  fi
  # Rematerialized Transformer layers (lv_graph_remat) on the GPU: the plain run's curve.
  train "$W/mt_gpu_remat" gpu 90 "$MT" "$MT_OV; $MT_REMAT; train.max_steps: $MT_REMAT_STEPS; train.save_interval_steps: $MT_REMAT_STEPS"
  echo "mt_gpu_remat rc=$?" >>"$W/gpu_runs.log"
fi
wait $CPU_PID
cat "$W/cpu_refs.log" >>"$W/gpu_runs.log"

# ---- lenet5 and mt: the curves ---------------------------------------------------------------
tol=(--early "$EARLY" --rtol_early "$RTOL_EARLY" --rtol "$RTOL")
{ echo "$LENET, $LENET_STEPS steps, batch 256, 12000 training images, --log_interval_steps=1; tolerance: relative"
  echo "difference per step <= $RTOL_EARLY for the first $EARLY steps, <= $RTOL after"; } >"$OUT/lenet5.txt"
if [ "$CPU_ONLY" = 1 ]; then
  fig=$(curves cpu "$W/lenet_cpu.log" cpu "$W/lenet_cpu.log" "${tol[@]}" --want "$LENET_STEPS" 2>&1 >>"$OUT/lenet5.txt")
  rc=$?
  [ $rc -eq 0 ] && result lenet5 lenet5 SKIP "no GPU (CPU_ONLY); the CPU run: $fig" || result lenet5 lenet5 FAIL "CPU run: $fig"
else
  fig=$(curves cpu "$W/lenet_cpu.log" gpu "$W/lenet_gpu.log" "${tol[@]}" --want "$LENET_STEPS" 2>&1 >>"$OUT/lenet5.txt")
  [ $? -eq 0 ] && result lenet5 lenet5 PASS "$fig" || result lenet5 lenet5 FAIL "$fig"
fi
{ echo "$MT on the Bible subset (MANIFEST): GPU $MT_GPU_STEPS steps, CPU ($NPROC cores) $MT_CPU_STEPS steps;"
  echo "checkpoints at step $MT_HALF resumed to $MT_CPU_STEPS; tolerance as for lenet5"; } >"$OUT/mt.txt"
if [ "$CPU_ONLY" = 1 ]; then
  fig=$(curves cpu "$W/mt_cpu.log" cpu-resumed "$W/mt_cpu_from_gpu.log" "${tol[@]}" --from $((MT_HALF + 1)) --want "$MT_CPU_STEPS" 2>&1 >>"$OUT/mt.txt")
  [ $? -eq 0 ] && result mt mt SKIP "no GPU (CPU_ONLY); CPU ckpt-$MT_HALF resumed on the CPU: $fig" || result mt mt FAIL "CPU resume: $fig"
else
  fails=0 figs=()
  H1=$((MT_HALF + 1))
  # A resumed run against the run whose checkpoint it started from (same weights at the
  # start: the early tolerance holds), and the GPU-resumed CPU run against the CPU's own
  # curve (it starts from the GPU's weights: only the drift tolerance).
  for pair in "cpu mt_cpu gpu mt_gpu 1 $EARLY" "cpu mt_cpu cpu->gpu mt_gpu_from_cpu $H1 $EARLY" \
              "gpu mt_gpu gpu->cpu mt_cpu_from_gpu $H1 $EARLY" "gpu mt_gpu gpu->gpu mt_gpu_from_gpu $H1 $EARLY" \
              "cpu mt_cpu gpu->cpu mt_cpu_from_gpu $H1 0" "gpu mt_gpu gpu-remat mt_gpu_remat 1 $MT_REMAT_STEPS"; do
    set -- $pair
    note mt "-- $1 ($2) against $3 ($4) from step $5"
    want=$MT_CPU_STEPS
    [ "$4" = mt_gpu_remat ] && want=$MT_REMAT_STEPS
    fig=$(curves "$1" "$W/$2.log" "$3" "$W/$4.log" --early "$6" --rtol_early "$RTOL_EARLY" --rtol "$RTOL" \
          --from "$5" --want "$want" 2>&1 >>"$OUT/mt.txt") || fails=$((fails + 1))
    note mt "$fig"
    figs+=("$3 vs $1: ${fig%%;*}")
  done
  fig=$(curves gpu "$W/mt_gpu.log" gpu "$W/mt_gpu.log" --want "$MT_GPU_STEPS" 2>&1 >/dev/null) || fails=$((fails + 1))
  gpu_end=$(echo "$fig" | grep -o 'step [0-9]*: gpu [0-9.]*' | head -1)
  note mt "GPU run to step $MT_GPU_STEPS: $fig"
  [ $fails -eq 0 ] && result mt mt PASS "$(IFS=';'; echo "${figs[*]}"); GPU ${gpu_end#step }" ||
    result mt mt FAIL "$fails comparison(s) out of tolerance or incomplete: $(IFS=';'; echo "${figs[*]}")"
fi

# ---- int8 ------------------------------------------------------------------------------------
# The GPU run's model (the CPU run's without a GPU) exported int8; each decode's text and log.
if [ "$CPU_ONLY" = 1 ]; then I8_RUN=$W/mt_cpu; else I8_RUN=$W/mt_gpu; fi
I8=$W/mt_int8.lvm I8_SRC=$DATA/bible/test20.en
echo "int8 model file: bin/export --quantize=int8 of $I8_RUN's last checkpoint; --decode_text of $I8_SRC" >"$OUT/int8.txt"
# i8_decode NAME [ARGS...]: the decoder on the int8 file, its lines in $W/NAME.txt, its log in $W/NAME.log.
i8_decode() {
  local name=$1; shift
  timeout -k 5 120 "$BIN/decoder" --model_file="$I8" --decode_text="$I8_SRC" "$@" >"$W/$name.txt" 2>"$W/$name.log"
  local rc=$?
  note int8 "-- $name ($*): exit $rc"
  grep 'model file' "$W/$name.log" >>"$OUT/int8.txt"
  return $rc
}
same_lines() { paste -d '\n' "$1" "$2" | awk 'NR % 2 { a = $0; next } { n += (a == $0) } END { print n + 0 }'; }
if ! [ -f "$I8_SRC" ]; then
  result int8 int8 FAIL "no $I8_SRC in the bundle (make gpu-bundle again)"
elif ! "$BIN/export" --model=$MT --logdir="$I8_RUN" --quantize=int8 --out="$I8" \
       --model_params_override="input.tokenizer.vocab_filepath: \"$DATA/bible/wpm.voc\"" >"$W/int8_export.log" 2>&1; then
  result int8 int8 FAIL "bin/export --quantize=int8 failed: $(tail -1 "$W/int8_export.log")"
else
  note int8 "$(tail -1 "$W/int8_export.log")"
  n=$(wc -l <"$I8_SRC")
  LINGVOC_INT8=float i8_decode int8_cpu_float; rcf=$?
  i8_decode int8_cpu; rci=$?
  cpu_same=$(same_lines "$W/int8_cpu_float.txt" "$W/int8_cpu.txt")
  if [ $rcf -ne 0 ] || [ $rci -ne 0 ]; then
    result int8 int8 FAIL "the CPU decodes failed (exit $rcf with LINGVOC_INT8=float, $rci with the int8 GEMM)"
  elif [ "$CPU_ONLY" = 1 ]; then
    result int8 int8 SKIP "no GPU (CPU_ONLY); on the CPU the int8 GEMM and float32 GEMMs on the same values: $cpu_same of $n lines the same"
  else
    i8_decode int8_gpu --run_locally=gpu; rc=$?
    gpu_same=$(same_lines "$W/int8_cpu_float.txt" "$W/int8_gpu.txt")
    fig="$gpu_same of $n lines the same as the CPU's float32 GEMMs on the same values (CPU int8 GEMM: $cpu_same)"
    if [ $rc -ne 0 ]; then result int8 int8 FAIL "exit $rc on the GPU: $(tail -1 "$W/int8_gpu.log")"
    elif ! grep -q 'dequantized to float32 on cuda' "$W/int8_gpu.log"; then result int8 int8 FAIL "no 'dequantized to float32 on cuda' line in the GPU decoder's log; $fig"
    elif [ $((gpu_same * 4)) -lt $((n * 3)) ]; then result int8 int8 FAIL "$fig (want at least 3/4)"
    else result int8 int8 PASS "$fig"
    fi
  fi
fi

# ---- multi_gpu -------------------------------------------------------------------------------
want=$((GPUS + 1))
"$BIN/trainer" --model=$LENET --logdir="$W/wg" --run_locally=gpu --worker_gpus=$want \
  --model_params_override="$LENET_OV" >"$W/worker_gpus.log" 2>&1
rc=$?
{ echo "trainer --worker_gpus=$want with $GPUS GPU(s) visible: exit $rc"; cat "$W/worker_gpus.log"; } >"$OUT/multi_gpu.txt"
if [ $rc -eq 2 ] && [ -z "$(ls -A "$W/wg" 2>/dev/null)" ]; then
  result worker_gpus multi_gpu PASS "--worker_gpus=$want refused, exit 2, nothing written: $(head -c 160 "$W/worker_gpus.log" | head -1)"
else
  result worker_gpus multi_gpu FAIL "--worker_gpus=$want: exit $rc (want 2, nothing written)"
fi
mpi=$(command -v mpirun || echo "no mpirun on this machine")
result nccl multi_gpu SKIP "the bundle is built with MPI=0 (lingvoc's NCCL communicator exchanges its id over MPI; Open MPI's runtime does not travel in it); $mpi"

# ---- tensorboard -----------------------------------------------------------------------------
echo "TensorBoard's EventAccumulator on the trainer's and evaler's event directories" >"$OUT/tensorboard.txt"
if [ "$HAVE_TB" != 1 ]; then
  result tensorboard tensorboard SKIP "python3 has no tensorboard"
else
  if [ "$CPU_ONLY" = 1 ]; then runs=(lenet:"$W/lenet_cpu" mt:"$W/mt_cpu"); else runs=(lenet:"$W/lenet_gpu" mt:"$W/mt_gpu"); fi
  fig=$(timeout -k 5 120 "$PY" "$here/scripts/gpu_check_tb.py" "${runs[@]}" 2>&1 >>"$OUT/tensorboard.txt")
  [ $? -eq 0 ] && result tensorboard tensorboard PASS "$fig" || result tensorboard tensorboard FAIL "$fig"
fi

# ---- speed -----------------------------------------------------------------------------------
echo "Speed against PyTorch eager $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) on the same GPU, one after the other" >"$OUT/speed.txt"
# util_start FILE / util_stop: GPU utilisation sampled every 100 ms; util_stop prints the mean.
util_start() { nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$1" 2>/dev/null & UPID=$!; }
util_stop() { kill "$UPID" 2>/dev/null; wait "$UPID" 2>/dev/null; awk '$1 ~ /^[0-9]+$/ { s += $1; n++ } END { printf "%.0f%%", n ? s / n : 0 }' "$1"; }
if [ "$CPU_ONLY" = 1 ] || [ "$HAVE_TORCH" != 1 ]; then
  result speed_lenet5 speed SKIP "$([ "$CPU_ONLY" = 1 ] && echo 'no GPU (CPU_ONLY)' || echo 'no CUDA PyTorch')"
  result speed_transformer speed SKIP "$([ "$CPU_ONLY" = 1 ] && echo 'no GPU (CPU_ONLY)' || echo 'no CUDA PyTorch')"
else
  # eps LOG: examples/sec of the steps after the first 50 (warm-up), the mean over their log lines.
  eps() { awk -F'examples/sec: ' '/^.*step: +[0-9]+,/ { split($0, a, "step: *"); split(a[2], b, ","); if (b[1] + 0 > 50) { split($2, c, " "); s += c[1]; n++ } } END { if (n) printf "%.0f", s / n }' "$1"; }
  util_start "$W/util_lv_lenet"
  train "$W/speed_lenet" gpu 120 "$LENET" "$LENET_OV; train.max_steps: 400; train.summary_interval_steps: 100000" 50
  rc=$?; u_lv=$(util_stop "$W/util_lv_lenet")
  lv=$(eps "$W/speed_lenet.log")
  # The same without cuDNN (im2col + cuBLAS, lingvoc's pooling), shorter.
  LINGVOC_CUDNN=0 train "$W/speed_lenet_im2col" gpu 90 "$LENET" "$LENET_OV; train.max_steps: 200; train.summary_interval_steps: 100000" 50
  rc0=$?; lv0=$(eps "$W/speed_lenet_im2col.log")
  util_start "$W/util_pt_lenet"
  pt=$(timeout -k 5 120 "$PY" "$here/bench/lenet5_torch.py" --device cuda --threads "$NPROC" --batch 256 --train_steps 400 --eval_batches 50 2>"$W/torch_lenet.err" | tail -1)
  u_pt=$(util_stop "$W/util_pt_lenet")
  pt_eps=$(echo "$pt" | "$PY" -c 'import json,sys; print("%.0f" % json.loads(sys.stdin.read())["train_examples_per_sec"])' 2>/dev/null)
  { echo "LeNet5 training, batch 256: lingvoc trainer --run_locally=gpu (exit $rc, steps 51..400, input pipeline included) ${lv:-?} examples/s, GPU utilisation $u_lv"
    echo "  lingvoc with LINGVOC_CUDNN=0 (exit $rc0, steps 51..200): ${lv0:-?} examples/s"
    echo "  PyTorch (bench/lenet5_torch.py --device cuda, fixed batch): ${pt_eps:-?} examples/s, GPU utilisation $u_pt; $pt"; } >>"$OUT/speed.txt"
  if [ -n "$lv" ] && [ -n "$pt_eps" ]; then
    ratio=$(awk -v a="$lv" -v b="$pt_eps" 'BEGIN { printf "%.2f", a / b }')
    st=$(awk -v r="$ratio" 'BEGIN { print (r >= 1.0 ? "PASS" : "FAIL") }')
    result speed_lenet5 speed "$st" "lingvoc $lv / PyTorch $pt_eps examples/s = ${ratio}x (target >= 1x); GPU util $u_lv / $u_pt; without cuDNN ${lv0:-?}"
  else
    result speed_lenet5 speed FAIL "no figure (lingvoc ${lv:-none}, PyTorch ${pt_eps:-none}; see logs)"
  fi
  left=$((BUDGET - $(elapsed)))
  if [ $left -lt 100 ]; then
    result speed_transformer speed SKIP "only $left s of the ${BUDGET} s budget left"
  else
    # 144 sentences x 32 -> 32 tokens (some padded): about 4.1k target tokens a step.
    args=("$NPROC" 20 144 32 32 64 32 4)
    util_start "$W/util_lv_mt"
    lvm=$(MT_BENCH_GPU=1 MT_BENCH_MODEL=mt.bible_en_es.TransformerBase timeout -k 5 150 "$BIN/mt_bench" "${args[@]}" 2>"$W/mt_bench.err" | tail -1)
    u_lv=$(util_stop "$W/util_lv_mt")
    util_start "$W/util_pt_mt"
    ptm=$(MT_DIMS=512,8,2048,6 MT_DEVICE=cuda timeout -k 5 150 "$PY" "$here/bench/mt_torch.py" "${args[@]:0:7}" 2>"$W/mt_torch.err" | tail -1)
    u_pt=$(util_stop "$W/util_pt_mt")
    { echo "Transformer (model 512, 8 heads, FFN 2048, 6 + 6 layers, vocab 8000), batch 144 x 32 -> 32, 20 timed steps; greedy and beam (4 hyps): 64 sentences x 32 steps"
      echo "  lingvoc bench/mt_bench (MT_BENCH_GPU=1, mt.bible_en_es.TransformerBase): $lvm; GPU utilisation $u_lv"
      echo "  PyTorch bench/mt_torch.py (MT_DEVICE=cuda): $ptm; GPU utilisation $u_pt"; } >>"$OUT/speed.txt"
    fig=$("$PY" - "$lvm" "$ptm" <<'PY'
import sys
def kv(line, side):
    if not line.startswith(side + " "):
        sys.exit("no %s figures: %r" % (side, line))
    return {k: float(v) for k, v in (x.split("=") for x in line.split()[1:])}
lv, pt = kv(sys.argv[1], "lingvoc"), kv(sys.argv[2], "torch")
tr = lambda d: d["train_tok"] / d["train_ms"] * 1e3
gr = lambda d: d["greedy_tok"] / d["greedy_ms"] * 1e3
r = tr(lv) / tr(pt)
print("%s training %.0f / PyTorch %.0f tokens/s = %.2fx (target >= 1x); greedy %.0f / %.0f tokens/s = %.2fx; beam %.0f tokens/s"
      % ("PASS" if r >= 1 else "FAIL", tr(lv), tr(pt), r, gr(lv), gr(pt), gr(lv) / gr(pt), lv["beam_tok"] / lv["beam_ms"] * 1e3))
PY
)
    if [ $? -eq 0 ]; then result speed_transformer speed "${fig%% *}" "${fig#* }; GPU util $u_lv / $u_pt"
    else result speed_transformer speed FAIL "$fig (see mt_bench.err, mt_torch.err in logs)"; fi
  fi
fi

# ---- Summary ---------------------------------------------------------------------------------
(cd "$W" && for f in *.log *.err util_*; do [ -f "$f" ] && tail -c 1048576 "$f" >"$f.tail" 2>/dev/null; done
 tar -czf "$OUT/logs.tar.gz" *.tail 2>/dev/null; rm -f *.tail)
nfail=$(grep -c ' FAIL ' "$OUT/summary.txt")
echo "gpu-check: $(grep -cE ' (PASS|FAIL|SKIP) ' "$OUT/summary.txt") checks, $nfail failed, $(elapsed) s; results in $OUT ($(ls "$OUT" | wc -l) files)" | tee -a "$OUT/summary.txt"
[ "$nfail" -eq 0 ]
