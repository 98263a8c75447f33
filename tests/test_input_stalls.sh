#!/usr/bin/env bash
# The trainer never waits for ever on its input: data from which no batch can ever form
# (empty files, every record too long for the buckets, a bucket bound of 0) is an error
# (exit 2) naming the input, and a signal ends a wait for a batch within seconds, with
# the usual clean stop (exit 0).
. "$(dirname "$0")/lib.sh"
. "$LV_ROOT/tests/data/decode_golden/models.sh"
M=$MODEL_transformer
P=$MODEL_punct_transformer
# Each case runs under a 120 s timeout: a hang shows up as exit 124, not as a stuck suite.
train() { timeout -k 5 120 "$LV_BIN/trainer" --logdir="$T/log.$RANDOM" "$@"; }
train_in() { local dir=$1; shift; timeout -k 5 120 "$LV_BIN/trainer" --logdir="$dir" "$@"; }

: >"$T/empty.tfrecord"
expect_exit 2 "an empty TFRecord file, repeated for ever" train --model=$M \
  --model_params_override="$OV_transformer; input.file_pattern: \"tfrecord:$T/empty.tfrecord\""
err_has "$T/empty.tfrecord"
err_has "read no record"

: >"$T/empty.txt"
expect_exit 2 "an empty text: file, repeated for ever" train --model=$P \
  --model_params_override="$PUNCT_OV; input.file_pattern: \"text:$T/empty.txt\""
err_has "$T/empty.txt"
err_has "read no record"

expect_exit 2 "every record longer than the last bucket bound" train --model=$M \
  --model_params_override="$OV_transformer; input.bucket_upper_bound: [1]; input.bucket_batch_limit: [8]"
err_has "no batch can ever form"
err_has "train.tfrecord"
err_has "bucket_upper_bound 1"

expect_exit 2 "every line of a text: file longer than the last bucket bound" train --model=$P \
  --model_params_override="$PUNCT_OV; input.bucket_upper_bound: [1]; input.bucket_batch_limit: [8]"
err_has "no batch can ever form"
err_has "punct/train.txt"

expect_exit 2 "input.bucket_upper_bound: [0]" train_in "$T/zero" --model=$M \
  --model_params_override="$OV_transformer; input.bucket_upper_bound: [0]; input.bucket_batch_limit: [8]"
err_has "input.bucket_upper_bound[0] must be >= 1"
check "a rejected config writes no checkpoint" test ! -e "$T/zero/train/ckpt-00000000.index"

# The trainer waits for input when the signal comes: a batch of 16M examples over a file of
# 20 (the first batch takes minutes to gather; memory grows ~80 MB/s until the signal),
# with and without the batcher thread; and a FIFO nobody writes, whose reader thread stays
# blocked in open (left behind at exit).
mkfifo "$T/fifo.tfrecord"
for sig in TERM INT TERM.prefetch0 TERM.fifo; do
  log=$T/wait.$sig
  ov="$OV_transformer; input.bucket_upper_bound: [1000]; input.bucket_batch_limit: [16000000]; train.max_steps: 5"
  case $sig in
    *.prefetch0) ov="$ov; input.prefetch_batches: 0" ;;
    *.fifo) ov="$OV_transformer; input.file_pattern: \"tfrecord:$T/fifo.tfrecord\"; train.max_steps: 5" ;;
  esac
  "$LV_BIN/trainer" --model=$M --logdir="$log" --model_params_override="$ov" >"$T/out" 2>"$T/err" &
  pid=$!
  for _ in $(seq 100); do [ -f "$log/train/ckpt-00000000.index" ] && break; sleep 0.1; done
  sleep 0.5
  if [[ $sig == *.fifo ]] && ! kill -0 $pid 2>/dev/null && grep -qE "not a regular file|expected a regular file" "$T/err"; then
    ok "a FIFO as a TFRecord file is refused at start"
    wait $pid
    continue
  fi
  kill -"${sig%%.*}" $pid
  start=$(date +%s)
  for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  if kill -0 $pid 2>/dev/null; then
    fail "SIG$sig while waiting for a batch: still running after 10 s"
    kill -9 $pid
    wait $pid
  else
    wait $pid
    rc=$?
    check "SIG$sig while waiting for a batch: stopped within 10 s, exit 0 (exit $rc, $(($(date +%s) - start)) s)" \
      test $rc -eq 0
    err_has "signal"
    check "SIG$sig: no step trained" bash -c "! ls $log/train/ckpt-00000001.index 2>/dev/null"
  fi
done
finish
