#!/usr/bin/env bash
# Checkpoints and the trainer under hostile conditions: retention deletes only its own ckpt-N files;
# a blank, unreadable or missing state file beside checkpoints, or a switched optimizer,
# is an exit-2 error that changes nothing (unless --rebuild_checkpoint_state /
# --allow_partial_restore); a resumed checkpoint is never rewritten and a crash while
# replacing one never leaves an index paired with other data; non-finite updates are
# undone and counted, too many in a row stop the run, train.checkpoint_finite_check
# refuses to save NaN/Inf; train/ or control/ as a file exits 2; temporary files of
# killed trainers are removed.
. "$(dirname "$0")/lib.sh"
if ! ensure_fashion_mnist; then
  fail "keras2ckpt could not build the Fashion-MNIST checkpoint (apt-get install dataset-fashion-mnist)"
  finish; exit 1
fi
M=image.mnist.LeNet5Fashion
O="input.ckpt: \"$FM\"; input.num_samples: 2000; input.batch_size: 64; train.save_interval_steps: 20; cluster.num_threads: 2"
train() { "$LV_BIN/trainer" --model=$M --run_locally=cpu --mode=sync "$@"; }
sums() { md5sum "$1"/train/ckpt-* | sort; }
# Prints every tensor of checkpoint $1 but the params text (its string tensor is read by
# the trainer itself), in full with $2 = full; fails if one does not read back with a
# valid checksum.
dump_tensors() {
  local names name opt=()
  [ "${2:-}" = full ] && opt=(--printoptions=threshold=100000000)
  names=$("$LV_BIN/ckpt_inspect" --file_name="$1" --all_tensor_names 2>/dev/null) || return 1
  for name in $(echo "$names" | sed -n 's/^tensor_name:  //p' | grep -v '^_lingvoc/'); do
    "$LV_BIN/ckpt_inspect" --file_name="$1" --tensor_name="$name" "${opt[@]}" || return 1
  done
}
# Every checkpoint with an index opens and all its tensors read back with valid checksums.
all_valid() {
  local p
  for p in "$1"/train/ckpt-*.index; do
    [ -e "$p" ] || continue
    dump_tensors "${p%.index}" >/dev/null 2>&1 || { echo "invalid: $p"; return 1; }
  done
}

# A finished run with ckpt-0, ckpt-20, ckpt-40; each case below works on a copy.
train --logdir="$T/L0" --model_params_override="$O; train.max_steps: 40" >"$T/L0.log" 2>&1
check "set-up run exits 0" [ $? -eq 0 ]
check "set-up run saved ckpt-40" [ -f "$T/L0/train/ckpt-00000040.index" ]
fresh() { rm -rf "$T/$1"; cp -a "$T/L0" "$T/$1"; }

# 1. Retention deletes only ckpt-N files of its own train directory, by exact names.
fresh L1
mkdir -p "$T/victim"
touch "$T/victim/notes.txt" "$T/victim/notes.md" "$T/L1/train/ckpt-00000000.mine"
sed -i "1a all_model_checkpoint_paths: \"$T/victim/notes\"\nall_model_checkpoint_paths: \"../../victim/notes\"" \
  "$T/L1/train/checkpoint"
expect_exit 0 "retention with foreign paths in the state file" \
  train --logdir="$T/L1" --model_params_override="$O; train.max_steps: 42; train.save_max_to_keep: 3; \
train.save_keep_checkpoint_every_n_hours: 0"
check "files outside the log directory survive" [ -f "$T/victim/notes.txt" -a -f "$T/victim/notes.md" ]
check "a file that only starts with a checkpoint's name survives" [ -f "$T/L1/train/ckpt-00000000.mine" ]
check "retention still deletes the oldest checkpoint" [ ! -e "$T/L1/train/ckpt-00000000.index" -a ! -e "$T/L1/train/ckpt-00000000.data-00000-of-00001" ]
check "the state file no longer lists the foreign paths" bash -c "! grep -q victim '$T/L1/train/checkpoint'"
err_has "not deleted"

# 2. A state file that names no checkpoint, beside checkpoints: exit 2, nothing changed.
for how in empty blank nopath missing garbage; do
  fresh L2
  case $how in
    empty) : >"$T/L2/train/checkpoint" ;;
    blank) printf '  \n\t\n' >"$T/L2/train/checkpoint" ;;
    nopath) grep -v '^model_checkpoint_path' "$T/L0/train/checkpoint" >"$T/L2/train/checkpoint" ;;
    missing) rm "$T/L2/train/checkpoint" ;;
    garbage) printf 'this is not a state file\n' >"$T/L2/train/checkpoint" ;;
  esac
  before=$(sums "$T/L2")
  expect_exit 2 "state file $how beside checkpoints" train --logdir="$T/L2" --model_params_override="$O; train.max_steps: 42"
  err_has "ckpt-00000040"
  err_has "--rebuild_checkpoint_state"
  check "no checkpoint rewritten ($how)" [ "$(sums "$T/L2")" = "$before" ]
  check "no new checkpoint ($how)" [ ! -e "$T/L2/train/ckpt-00000042.index" ]
done
expect_exit 0 "--rebuild_checkpoint_state resumes" \
  train --logdir="$T/L2" --rebuild_checkpoint_state --model_params_override="$O; train.max_steps: 42"
check "it resumed from ckpt-40" grep -q "restored 21 tensors from .*ckpt-00000040 (global_step 40)" "$T/err"
check "the new state file lists the old and new checkpoints" \
  grep -q "model_checkpoint_path: \"ckpt-00000042\"" "$T/L2/train/checkpoint"
check "... and the old ones" grep -q "all_model_checkpoint_paths: \"ckpt-00000000\"" "$T/L2/train/checkpoint"
# An empty train directory is still a fresh start.
mkdir -p "$T/L2b/train"
: >"$T/L2b/train/checkpoint"
expect_exit 0 "empty state file without checkpoints: fresh start" \
  train --logdir="$T/L2b" --model_params_override="$O; train.max_steps: 2"

# 3. A resumed checkpoint is never written again (same inode, same bytes).
fresh L3
stat_before=$(stat -c '%i %s %Y' "$T"/L3/train/ckpt-00000040.*)
before=$(md5sum "$T"/L3/train/ckpt-00000040.*)
expect_exit 0 "resume" train --logdir="$T/L3" --model_params_override="$O; train.max_steps: 42"
check "the resumed checkpoint's files are untouched" [ "$(stat -c '%i %s %Y' "$T"/L3/train/ckpt-00000040.*)" = "$stat_before" ]
check "... and their bytes" [ "$(md5sum "$T"/L3/train/ckpt-00000040.*)" = "$before" ]
check "every checkpoint is valid" all_valid "$T/L3"
# A checkpoint the state file does not list (a crash before the state update) is replaced;
# kill -9 in the middle of that (between its renames, held open by strace) leaves no
# index paired with other data.
if command -v strace >/dev/null; then
  fresh L3b
  train --logdir="$T/L3b" --model_params_override="$O; train.max_steps: 42" >/dev/null 2>&1
  cp "$T/L0/train/checkpoint" "$T/L3b/train/checkpoint"  # ckpt-42 is now unlisted
  ino=$(stat -c %i "$T/L3b/train/ckpt-00000042.data-00000-of-00001")
  strace -f -o /dev/null -e trace=rename,renameat,renameat2 -e inject=rename,renameat,renameat2:delay_exit=1500000 \
    "$LV_BIN/trainer" --model=$M --logdir="$T/L3b" \
    --model_params_override="$O; train.max_steps: 42; task.train.learning_rate: 0.002" >"$T/L3b.log" 2>&1 &
  spid=$!
  for _ in $(seq 1200); do
    [ "$(stat -c %i "$T/L3b/train/ckpt-00000042.data-00000-of-00001" 2>/dev/null)" != "$ino" ] && break
    sleep 0.05
  done
  tpid=$(pgrep -P $spid | head -1)
  kill -9 "$tpid" 2>/dev/null; wait $spid 2>/dev/null
  check "the replacement's data was being published when killed" \
    [ "$(stat -c %i "$T/L3b/train/ckpt-00000042.data-00000-of-00001" 2>/dev/null)" != "$ino" ]
  check "after kill -9 mid-publish every checkpoint with an index is valid" all_valid "$T/L3b"
  expect_exit 0 "and the run resumes" train --logdir="$T/L3b" --model_params_override="$O; train.max_steps: 42"
  check "every checkpoint is valid after the resumed run" all_valid "$T/L3b"
else
  skip_part "strace not installed (kill -9 between the renames of a checkpoint)"
fi

# 4. Another optimizer on resume: exit 2 naming the differences; the flag restores what
#    matches; the old checkpoint is never overwritten.
fresh L4
before=$(sums "$T/L4")
expect_exit 2 "resume an Adam run with SGD" \
  train --logdir="$T/L4" --model_params_override="$O; train.max_steps: 42; task.train.optimizer.cls: 'SGD'"
err_has "lenet5/fc/w/var/Adam: in the checkpoint, not in this run"
err_has "beta1_power"
err_has "--allow_partial_restore"
check "nothing rewritten" [ "$(sums "$T/L4")" = "$before" ]
expect_exit 0 "--allow_partial_restore" train --logdir="$T/L4" --allow_partial_restore \
  --model_params_override="$O; train.max_steps: 42; task.train.optimizer.cls: 'SGD'"
check "restored the 7 matching tensors" grep -q "restored 7 tensors from .*ckpt-00000040" "$T/err"
check "the Adam checkpoint is kept as it was" [ "$(md5sum "$T"/L4/train/ckpt-00000040.*)" = "$(md5sum "$T"/L0/train/ckpt-00000040.* | sed "s#/L0/#/L4/#")" ]
check "the new checkpoint has no Adam slots" bash -c "! '$LV_BIN/ckpt_inspect' --file_name='$T/L4/train/ckpt-00000042' | grep -q Adam"
expect_exit 2 "back to Adam: the SGD checkpoint lacks the slots" \
  train --logdir="$T/L4" --model_params_override="$O; train.max_steps: 44"
err_has "lenet5/fc/w/var/Adam: missing from the checkpoint"

# 5. Finite gradients, non-finite update (learning rate 1e6): such steps are undone and
#    skipped, no NaN is saved, and N in a row stop the run.
expect_exit 0 "learning rate 1e6 with checkpoint_finite_check" train --logdir="$T/N" --log_interval_steps=1 \
  --model_params_override="$O; task.train.learning_rate: 1e6; train.max_steps: 12; train.checkpoint_finite_check: true"
err_has "step skipped (variables unchanged)"
err_has "NaN or Inf"
norms=$(grep -o 'step: *[0-9]*,.*var_norm/all:[^ ]*' "$T/err" | sed 's/.*var_norm\/all://' | tail -9 | sort -u)
check "var_norm/all is finite and constant over the skipped steps ($norms)" \
  bash -c "[ \$(echo '$norms' | wc -l) -eq 1 ] && ! echo '$norms' | grep -qi 'nan\|inf'"
check "checkpoints saved" [ -f "$T/N/train/ckpt-00000012.index" ]
for p in "$T"/N/train/ckpt-*.index; do dump_tensors "${p%.index}" full; done >"$T/N.dump" 2>&1
check "the checkpoints' tensors were read" [ "$(grep -c '^tensor_name' "$T/N.dump")" -ge 42 ]
check "no NaN or Inf in any checkpoint" bash -c "! grep -qiw 'nan\|inf' '$T/N.dump'"
expect_exit 1 "5 skipped steps in a row stop the run" train --logdir="$T/N5" \
  --model_params_override="$O; task.train.learning_rate: 1e6; train.max_steps: 12; task.train.max_consecutive_skipped_steps: 5"
err_has "5 consecutive steps skipped"
err_has "task.train.max_consecutive_skipped_steps"
# Without the learner's checks (scale_gradients false) the variables do go NaN:
# checkpoint_finite_check refuses to save them and keeps what was saved.
expect_exit 1 "checkpoint_finite_check refuses NaN variables" train --logdir="$T/N2" --noenable_check_numerics \
  --model_params_override="$O; train.save_interval_steps: 2; task.train.learning_rate: 1e6; train.max_steps: 12; task.train.scale_gradients: false; train.checkpoint_finite_check: true"
err_has "train.checkpoint_finite_check"
check "no checkpoint after the variables went NaN" [ ! -e "$T/N2/train/ckpt-00000002.index" ]
check "the state file names the last finite one" grep -q 'model_checkpoint_path: "ckpt-00000000"' "$T/N2/train/checkpoint"

# Smaller: train/ or control/ that is a file; stale temporary files of killed trainers.
mkdir -p "$T/F1" "$T/F2"
touch "$T/F1/train"
expect_exit 2 "train/ is a file" train --logdir="$T/F1" --model_params_override="$O; train.max_steps: 2"
err_has "is a file, not a directory"
touch "$T/F2/control"
expect_exit 2 "control/ is a file" train --logdir="$T/F2" --model_params_override="$O; train.max_steps: 2"
err_has "control is a file"

fresh L5
sh -c 'exit 0' & dead=$!
wait $dead
d="$T/L5/train"
touch "$d/checkpoint.tmp$dead" "$d/ckpt-00000040.index.tmp$dead" "$d/ckpt-00000040.index.tempstate$dead-3" \
  "$d/ckpt-00000060.data-00000-of-00001.tempstate$dead-0" \
  "$d/checkpoint.tmp$$" "$d/notes.tmp$dead" "$d/ckpt-00000040.mine.tmp$dead" "$d/checkpoint.tmp${dead}x"
expect_exit 0 "start with temporary files of a dead trainer" train --logdir="$T/L5" --model_params_override="$O; train.max_steps: 42"
check "a dead trainer's temporary files are removed" \
  bash -c "! ls '$d' | grep -q -e 'checkpoint.tmp$dead\$' -e 'index.tmp$dead' -e 'tempstate$dead'"
check "a live process's and other names are kept" \
  [ -e "$d/checkpoint.tmp$$" -a -e "$d/notes.tmp$dead" -a -e "$d/ckpt-00000040.mine.tmp$dead" -a -e "$d/checkpoint.tmp${dead}x" ]
finish
