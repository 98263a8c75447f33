#!/usr/bin/env bash
# The event files of a short real training + evaluation run, decoded independently with
# python3-protobuf (tests/read_run_events.py): file version, Lingvo's tags, steps, values
# (against the trainer's log and the evaler's score file) and the captioned images.
. "$(dirname "$0")/lib.sh"
if ! command -v protoc >/dev/null || ! /usr/bin/python3 -c 'import google.protobuf' 2>/dev/null; then
  fail "needs protobuf-compiler and python3-protobuf (scripts/install-deps.sh)"; finish; exit 1
fi
ensure_fashion_mnist || { fail "keras2ckpt"; finish; exit 1; }
M=image.mnist.LeNet5Fashion
OV="input.ckpt: \"$FM\"; input.num_samples: 1000; input.batch_size: 32; train.max_steps: 40; train.summary_interval_steps: 10; train.save_interval_steps: 40"
"$LV_BIN/trainer" --model=$M --logdir="$T/log" --log_interval_steps=10 --model_params_override="$OV" >"$T/train.log" 2>&1
check "trainer exits 0" [ $? -eq 0 ]
"$LV_BIN/evaler" --model=$M --logdir="$T/log" --once --model_params_override="$OV; input.num_samples: 500" >"$T/eval.log" 2>&1
check "evaler exits 0" [ $? -eq 0 ]
mkdir -p "$T/gen"
protoc --proto_path="$LV_ROOT/src/io/proto" --python_out="$T/gen" "$LV_ROOT"/src/io/proto/*.proto
check "events decode and match the run" /usr/bin/python3 "$LV_ROOT/tests/read_run_events.py" "$T/gen" "$T/log" "$T/train.log" 10 40
finish
