#!/usr/bin/env bash
# Bad input to the trainer: each is a clear error with the right exit code,
# never a crash or a hang: absurd batch sizes and thread counts, experiment and override
# files that are not regular files or nest too deep, integers libconfig would wrap, and
# an override of a param a flag owns.
. "$(dirname "$0")/lib.sh"
ensure_fashion_mnist || { fail "keras2ckpt"; finish; exit 1; }
M=image.mnist.LeNet5Fashion
OV="input.ckpt: \"$FM\"; input.num_samples: 256; input.batch_size: 32; train.max_steps: 2"
TR="$LV_BIN/trainer"

# 6: a batch far beyond memory is "out of memory" naming the size (was SIGABRT under ASan).
expect_exit 1 "input.batch_size: 1000000000" "$TR" --model=$M --logdir="$T/bs" \
  --model_params_override="$OV; input.batch_size: 1000000000"
err_has "input.batch_size: a batch of 1000000000 examples: out of memory: needs 784000000000 bytes"

# 7: thread counts (100000 crashed inside libgomp; -7 was accepted).
expect_exit 2 "--num_threads=100000" "$TR" --model=$M --logdir="$T/th" --num_threads=100000
err_has "--num_threads=100000: expected 0 (one per core) to 1024"
expect_exit 2 "cluster.num_threads: -7" "$TR" --model=$M --logdir="$T/th" --model_params_override="cluster.num_threads: -7"
err_has "cluster.num_threads = -7: expected 0 (one per core) to 1024"
expect_exit 2 "cluster.num_threads: 100000" "$TR" --model=$M --logdir="$T/th" --model_params_override="cluster.num_threads: 100000"
err_has "cluster.num_threads = 100000"

# 8: lists nested 100,000 deep in an override file (was SIGSEGV), groups 5,000 deep in an
# experiment file (was libconfig's bare "memory exhausted").
python3 -c "print('task.filter_shapes: ' + '[' * 100000 + ']' * 100000)" >"$T/deep.txt"
expect_exit 2 "override file nested 100,000 deep" "$TR" --model=$M --logdir="$T/d" --model_params_file_override="$T/deep.txt"
err_has "lists nested more than 64 deep"
mkdir -p "$T/ex/image"
{ echo 'Deep: { base = "X";'; printf 'x = '; for _ in $(seq 5000); do printf '{ a = '; done; printf '1;'
  for _ in $(seq 5000); do printf ' };'; done; echo; echo '};'; } >"$T/ex/image/deep.cfg"
expect_exit 2 "experiment file nested 5,000 deep" "$TR" --experiments_dir="$T/ex" --model=image.deep.Deep --logdir="$T/d"
err_has "$T/ex/image/deep.cfg:2: groups and lists nested more than 64 deep"

# 9: override and experiment files must be regular files (/dev/zero grew without bound,
# a FIFO blocked forever).
expect_exit 2 "--model_params_file_override=/dev/zero" timeout 20 "$TR" --model=$M --logdir="$T/z" \
  --model_params_file_override=/dev/zero
err_has "--model_params_file_override /dev/zero is a character device; expected a regular file"
mkfifo "$T/fifo"
expect_exit 2 "--model_params_file_override=FIFO" timeout 20 "$TR" --model=$M --logdir="$T/z" --model_params_file_override="$T/fifo"
err_has "is a FIFO; expected a regular file"
mkdir -p "$T/ex2/image" && mkfifo "$T/ex2/image/mnist.cfg"
expect_exit 2 "experiment file is a FIFO" timeout 20 "$TR" --experiments_dir="$T/ex2" --model=image.mnist.LeNet5 --logdir="$T/z"
err_has "experiment file $T/ex2/image/mnist.cfg is a FIFO"
expect_exit 2 "--flagfile=FIFO" timeout 20 "$TR" --flagfile="$T/fifo"
err_has "--flagfile $T/fifo is a FIFO; expected a regular file"
# Smaller: an experiment path that is a directory exits 2 (was 1).
mkdir -p "$T/ex3/image/mnist.cfg"
expect_exit 2 "experiment file is a directory" "$TR" --experiments_dir="$T/ex3" --model=image.mnist.LeNet5 --logdir="$T/z"
err_has "experiment file $T/ex3/image/mnist.cfg is a directory"

# 11: integers libconfig keeps in 32 bits (5000000000 became 705032704).
mkdir -p "$T/ex4/image"
cp "$LV_ROOT/experiments/image/mnist.cfg" "$T/ex4/image/mnist.cfg"
cat >>"$T/ex4/image/mnist.cfg" <<'CFG'
Big: { base = "LeNet5Fashion";
  train: { max_steps = 5000000000; };
  task: { filter_shapes = ([5, 5, 1, 4294967316], [5, 5, 20, 50]); };
};
CFG
# The scan covers the whole file (as a syntax error does): the L form in a clean copy.
mkdir -p "$T/ex5/image"
cp "$LV_ROOT/experiments/image/mnist.cfg" "$T/ex5/image/mnist.cfg"
echo 'Wide: { base = "LeNet5Fashion"; train: { max_steps = 5000000000L; }; };' >>"$T/ex5/image/mnist.cfg"
line=$(grep -n 'max_steps = 5000000000;' "$T/ex4/image/mnist.cfg" | cut -d: -f1)
expect_exit 2 "max_steps = 5000000000 without L" "$TR" --experiments_dir="$T/ex4" --model=image.mnist.Big --logdir="$T/i" --mode=inspect_params
err_has "$T/ex4/image/mnist.cfg:$line: integer 5000000000 does not fit in 32 bits (libconfig would read 705032704)"
err_has "$T/ex4/image/mnist.cfg:$((line + 1)): integer 4294967316 does not fit in 32 bits (libconfig would read 20)"
expect_exit 0 "max_steps = 5000000000L" "$TR" --experiments_dir="$T/ex5" --model=image.mnist.Wide --logdir="$T/i" --mode=inspect_params
check "5000000000L reads as 5000000000" grep -q '^train.max_steps : 5000000000$' "$T/i/train-params.txt"

# 12: an override of a flag-owned param is an error naming the flag; nothing is written
# to the other directory.
expect_exit 2 "--model_params_override cluster.logdir with --logdir" "$TR" --model=$M --logdir="$T/own" \
  --model_params_override="$OV; cluster.logdir: \"$T/other\""
err_has "--model_params_override sets cluster.logdir to '$T/other', but --logdir owns it (--logdir=$T/own)"
check "nothing written to the override's logdir" [ ! -e "$T/other" ]
expect_exit 0 "the same logdir in both is no conflict" "$TR" --model=$M --logdir="$T/own" \
  --model_params_override="$OV; cluster.logdir: \"$T/own\""

finish
