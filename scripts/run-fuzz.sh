#!/usr/bin/env bash
# Builds each libFuzzer target given (fuzz/fuzz_*.c) with clang, ASan and UBSan against
# src/base, src/io and src/params, seeds its corpus, and runs it for FUZZ_SECONDS (default 30) each.
# Works from a clean checkout; everything goes to build-fuzz/. Exits non-zero if a target
# fails to build or finds a crash (the crashing input is left in build-fuzz/artifacts/).
# Usage: scripts/run-fuzz.sh fuzz/fuzz_NAME.c...
set -eu
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
CLANG=${CLANG:-clang}
OUT=build-fuzz
if [ $# -eq 0 ]; then echo "usage: $0 fuzz/fuzz_NAME.c..." >&2; exit 2; fi
command -v "$CLANG" > /dev/null || { echo "run-fuzz: $CLANG not found (apt-get install clang)" >&2; exit 1; }
mkdir -p "$OUT/gen" "$OUT/obj" "$OUT/artifacts"
for p in src/io/proto/*.proto; do
  protoc-c --proto_path=src/io/proto --c_out="$OUT/gen" "$p"
done
CFLAGS="-std=c11 -D_GNU_SOURCE -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -Isrc -I$OUT/gen $(pkg-config --cflags libprotobuf-c)"
objs=()
for c in src/base/*.c src/io/*.c src/params/*.c "$OUT"/gen/*.pb-c.c; do
  o="$OUT/obj/$(echo "$c" | tr '/' '_' | sed 's/\.c$/.o/')"
  "$CLANG" $CFLAGS -w -c "$c" -o "$o"
  objs+=("$o")
done
# An archive, so a target links only the objects it uses (other src/io modules may need
# more of the tree than src/base).
rm -f "$OUT/libfuzz.a"
ar rcs "$OUT/libfuzz.a" "${objs[@]}"
LIBS="$OUT/libfuzz.a $(pkg-config --libs libprotobuf-c libconfig) -lsnappy -lz -lm -lpthread"
TD=tests/data/tf_checkpoints
rc=0
for src in "$@"; do
  name=$(basename "$src" .c)
  "$CLANG" $CFLAGS -fsanitize=fuzzer,address,undefined "$src" $LIBS -o "$OUT/$name"
  corpus="$OUT/corpus/$name"
  mkdir -p "$corpus"
  # Seeds for fuzz_bundle: TensorFlow's checkpoints in raw mode
  # ([0][2-byte index length][index][data]) and a header + float entry in structured mode.
  if [ "$name" = fuzz_bundle ]; then
    if [ -d "$TD" ]; then
      for d in "$TD"/*/; do
        idx="$d/variables.index"
        n=$(stat -c %s "$idx")
        { printf "\\x00\\x$(printf %02x $((n & 255)))\\x$(printf %02x $((n >> 8)))"; cat "$idx" "$d/variables.data-00000-of-00001"; } \
          > "$corpus/seed_$(basename "$d")"
      done
    fi
    # header {num_shards: 1, version {producer: 1}}; "a": DT_FLOAT [2] at 0, 8 bytes, crc.
    printf '\x01\x01\x01\x06\x08\x01\x1a\x02\x08\x01\x01a\x0f\x08\x01\x12\x04\x12\x02\x08\x02\x28\x08\x35\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' \
      > "$corpus/seed_structured"
    printf '\x01\x01\x01\x06\x08\x01\x1a\x02\x08\x01\x01s\x0f\x08\x07\x12\x04\x12\x02\x08\x02\x28\x0b\x35\x00\x00\x00\x00\x00\x02\x03\x00\x00\x00\x00abcde' \
      > "$corpus/seed_structured_strings"
  fi
  # Seeds for fuzz_dataset: a `checkpoint` file, a tiny IDX and a tiny .npy.
  if [ "$name" = fuzz_dataset ]; then
    printf '\x03model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-2"\nall_model_checkpoint_timestamps: 1.5e9\n' \
      > "$corpus/seed_state"
    printf '\x01\x00\x00\x08\x02\x00\x00\x00\x02\x00\x00\x00\x02\x01\x02\x03\x04' > "$corpus/seed_idx"
    printf "\\x02\\x93NUMPY\\x01\\x00\\x3a\\x00{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }\\n\\x01\\x00\\x02\\x00" \
      > "$corpus/seed_npy"
  fi
  # Seeds for fuzz_params_text: override lines of every kind.
  if [ "$name" = fuzz_params_text ]; then
    printf 'task.train.learning_rate: 3e-4\ntask.filter_shapes: [[5, 5, 1, 20], (2, 3), ()]\ntask.layers[1].output_dim : 7\n' \
      > "$corpus/seed_values"
    printf "task.cls: 'fz.Model'; task.train.lr_schedule.cls: 'fz.Piecewise'\ntask.train.lr_schedule.values: [1.0, 0.1, -inf]\n" \
      > "$corpus/seed_cls"
    printf 'task.layers : []\ntask.layers[0].cls : "fz.FC"\ntask.l2 : NoneType\nnotes : "a;b\\"c"\ntrain.async_checkpointing: False\n' \
      > "$corpus/seed_lists"
  fi
  # Seeds for fuzz_cfg: the test experiment files, and one that @includes a second part.
  if [ "$name" = fuzz_cfg ]; then
    for f in tests/data/params/*.cfg; do sed 's/cfg\./fz./g' "$f" > "$corpus/seed_$(basename "$f" .cfg)"; done
    printf '@include "part.cfg"\nMain: { base = "Part"; task: { cls = "fz.Model"; filter_shapes = ([5, 5L], [0x10]); '\
'layers = ( { cls = "fz.FC"; output_dim = 3; } ); }; };\n@@@\nPart: { train: { max_steps = 7; }; };\n' \
      > "$corpus/seed_include"
  fi
  # Seeds for fuzz_tfrecord: the test records as a file, and one tf.Example alone.
  if [ "$name" = fuzz_tfrecord ]; then
    for f in tests/data/tfrecords/*.tfrecord; do
      { printf '\x00'; head -c 4096 "$f"; } > "$corpus/seed_$(basename "$f" .tfrecord)"
      { printf '\x01'; head -c 4096 "$f"; } > "$corpus/seed_skip_$(basename "$f" .tfrecord)"
    done
    # Example {features {feature {key: "x" value {int64_list {value: [1, 2]}}}}}
    printf '\x02\x0a\x0f\x0a\x0d\x0a\x01x\x12\x08\x1a\x06\x0a\x04\x01\x02\x03\x04' > "$corpus/seed_example"
  fi
  echo "== $name: fuzzing for ${FUZZ_SECONDS}s"
  if ! LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" "$OUT/$name" "$corpus" -max_total_time="$FUZZ_SECONDS" -max_len=8192 -timeout=10 \
       -artifact_prefix="$OUT/artifacts/$name-" -print_final_stats=1 2>&1 | tail -n 25; then
    rc=1
  fi
  # With pipefail off, check the fuzzer's status explicitly.
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then rc=1; echo "FAIL: $name found a crash (see $OUT/artifacts)"; fi
done
exit $rc
