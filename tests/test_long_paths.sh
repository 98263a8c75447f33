#!/usr/bin/env bash
# Over-long paths are errors that name them (exit 2), never paths truncated to fit a
# buffer: a --logdir longer than the OS allows, and one that fits but whose train/ or
# eval_<dataset>/ would not.
. "$(dirname "$0")/lib.sh"
M=image.mnist.LeNet5
X=(--experiments_dir="$LV_ROOT/experiments")

# deep_dir LEN: creates and prints a directory under $T whose path is LEN bytes long
# (components of at most 200 bytes, as a file system allows 255).
deep_dir() {
  local p="$T/deep" want=$1
  while [ $((want - ${#p})) -gt 201 ]; do p="$p/$(printf '%0200d' 0 | tr 0 d)"; done
  local rest=$((want - ${#p} - 1))
  p="$p/$(printf "%0${rest}d" 0 | tr 0 e)"
  mkdir -p "$p" && printf '%s' "$p"
}

# A logdir beyond the OS limit (4095 bytes): each tool refuses it before doing anything.
LONG="$T/long/$(printf '%05000d' 0 | tr 0 x)"
for tool in trainer evaler decoder; do
  expect_exit 2 "$tool: 5000-byte --logdir" "$LV_BIN/$tool" --model=$M --logdir="$LONG" "${X[@]}"
  err_has "path too long"
  err_has "$T/long/xxxxxxxx"
done

# A logdir that fits (4093 bytes) but whose train/ does not: lingvoc's own path building
# says so instead of truncating <logdir>/train to another directory.
D=$(deep_dir 4093)
check "deep logdir of 4093 bytes made" [ ${#D} -eq 4093 ]
expect_exit 2 "trainer: --logdir whose train/ is too long" "$LV_BIN/trainer" --model=$M --logdir="$D" "${X[@]}"
err_has "--logdir: path too long: \"$(printf '%.64s' "$D")...\" (4099 bytes; the limit is 4095)"
check "nothing written into the logdir" [ -z "$(ls -A "$D")" ]
expect_exit 2 "trainer --mode=inspect_params: params file path too long" "$LV_BIN/trainer" --model=$M \
  --logdir="$D" --mode=inspect_params "${X[@]}"
err_has "--logdir: path too long"
finish
