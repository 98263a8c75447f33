#!/usr/bin/env bash
# bin/trainer --mode=memory_report on the tiny LMs (Transformer, and the RNN whose LSTM
# steps keep tensors of later nodes for their backward): its figures agree with each
# other (the kinds of arena memory sum to the live peak, the live peak is within the
# arena's high-water, which is the arena allocator's own peak, the accounted total is the sum of its rows, the peak RSS holds at
# least the variables, their gradients, the slots and the arena), --nofree_in_backward
# gives the same allocations with nothing given back, giving back lowers the arena's
# high-water, and the checkpoints of both runs are bit-identical.
. "$(dirname "$0")/lib.sh"
awk -v out="$T" 'BEGIN { n = split("the lord said unto moses and aaron speak to the children of israel saying this is the thing which god hath commanded", w, " "); x = 7
  for (l = 0; l < 400; l++) { x = (x * 16807) % 2147483647; nw = 3 + x % 8; s = ""; st = 1 + x % n
    for (i = 0; i < nw; i++) s = s (i ? " " : "") w[1 + (st + i - 1) % n]
    print s "." > (out "/train.txt") } }'
TR="input.file_pattern: \"text:$T/train.txt\"; train.save_interval_seconds: 100000"
# fig FILE ROW: the bytes of a report row ("  variables   123 bytes ...").
fig() { awk -v r="$2" '{ s = $0; sub(/^ +/, "", s); p = index(s, "  ")
  if (substr(s, 1, p - 1) == r) for (k = 1; k < NF; k++) if ($(k + 1) == "bytes") { print $k; exit } }' "$1"; }
for M in TransformerLmTinyTest RnnLmTinyTest; do
  for f in free nofree; do
    expect_exit 0 "$M: memory_report, 4 steps, --${f}_in_backward" "$LV_BIN/trainer" --model=lm.bible.$M \
      --logdir="$T/$M.$f" --mode=memory_report --memory_report_steps=4 --${f}_in_backward --model_params_override="$TR"
    cp "$T/out" "$T/$M.$f.txt"
    R=$T/$M.$f.txt
    check "$M $f: the report names the run" grep -q "memory report: lm.bible.$M.*, 4 training steps, free_in_backward $([ $f = free ] && echo on || echo off)" "$R"
    live=$(fig "$R" "live at the peak") hw=$(fig "$R" "step arena high-water")
    kinds=$(( $(fig "$R" activations) + $(fig "$R" "forward scratch") + $(fig "$R" gradients) + $(fig "$R" "backward temporaries") ))
    check "$M $f: the kinds at the peak sum to the live peak ($kinds = $live)" test "$kinds" -eq "$live"
    check "$M $f: live peak $live <= arena high-water $hw" test "$live" -le "$hw"
    check "$M $f: the high-water is the arena allocator's own peak" test "$(fig "$R" "arena allocator's own peak")" -eq "$hw"
    check "$M $f: the gaps are high-water minus live peak" test "$(fig "$R" "gaps between freed pieces")" -eq $((hw - live))
    parts=$(( $(fig "$R" variables) + $(fig "$R" "variable gradients") + $(fig "$R" "optimizer slots") +
      $(fig "$R" "optimizer slot host copies") + $(fig "$R" "gradient accumulators") + $(fig "$R" "moving averages") +
      $(fig "$R" "input batch") + $(fig "$R" "input shuffle buffer peak") + hw + $(fig "$R" "tensor headers and tape") ))
    check "$M $f: accounted is the sum of its rows ($parts)" test "$(fig "$R" accounted)" -eq "$parts"
    held=$(( $(fig "$R" variables) + $(fig "$R" "variable gradients") + $(fig "$R" "optimizer slots") + hw ))
    check "$M $f: peak RSS $(fig "$R" "process peak RSS (VmHWM)") >= variables + gradients + slots + arena ($held)" \
      test "$(fig "$R" "process peak RSS (VmHWM)")" -ge "$held"
    # Adam: two slots per trainable float, as many floats as the gradient buffer.
    check "$M $f: Adam's slots are twice the gradients" test "$(fig "$R" "optimizer slots")" -eq $((2 * $(fig "$R" "variable gradients")))
    # 400 lines of at most ~90 bytes, all in the 10,000-record buffer by the fourth step
    buf=$(fig "$R" "input shuffle buffer peak")
    check "$M $f: the shuffle buffer held the training lines ($buf bytes)" test "$buf" -gt 4000 -a "$buf" -lt 40000
    check "$M $f: host slots need no host copies" test "$(fig "$R" "optimizer slot host copies")" -eq 0
  done
  A=$T/$M.free.txt B=$T/$M.nofree.txt
  check "$M: without giving back, nothing is given back or reused" test "$(fig "$B" "given back")" -eq 0 -a "$(fig "$B" "given back in forward")" -eq 0 -a "$(fig "$B" "reused from what was given")" -eq 0
  check "$M: without giving back, the live peak is the high-water" test "$(fig "$B" "live at the peak")" -eq "$(fig "$B" "step arena high-water")"
  check "$M: giving back reuses memory" test "$(fig "$A" "reused from what was given")" -gt 0
  # The softmax ends a forward scope (its GEMM's output before the bias), as do the
  # Transformer's attention and feed-forward layers.
  fwd=$(fig "$A" "given back in forward")
  check "$M: some is given back in forward, part of all given back" test "$fwd" -gt 0 -a "$fwd" -le "$(fig "$A" "given back")"
  ha=$(fig "$A" "step arena high-water") hb=$(fig "$B" "step arena high-water")
  check "$M: giving back lowers the arena high-water ($ha < $hb)" test "$ha" -lt "$hb"
  ckpt_dump "$T/$M.free/train/ckpt-00000004" >"$T/a.dump"
  ckpt_dump "$T/$M.nofree/train/ckpt-00000004" >"$T/b.dump"
  check "$M: both runs' checkpoints are bit-identical" cmp -s "$T/a.dump" "$T/b.dump"
  check "$M: the checkpoint has tensors" test "$(wc -l <"$T/a.dump")" -gt 10
done
# Rematerialized Transformer layers (task.lm.trans_tpl.remat): the same bits, a lower
# high-water, fewer tape nodes (each layer is one node until its backward runs it again).
M=TransformerLmTinyTest
expect_exit 0 "$M: memory_report with remat" "$LV_BIN/trainer" --model=lm.bible.$M --logdir="$T/$M.remat" \
  --mode=memory_report --memory_report_steps=4 --model_params_override="$TR; task.lm.trans_tpl.remat: true"
cp "$T/out" "$T/$M.remat.txt"
ha=$(fig "$T/$M.free.txt" "step arena high-water") hr=$(fig "$T/$M.remat.txt" "step arena high-water")
check "$M: remat lowers the arena high-water ($hr < $ha)" test "$hr" -lt "$ha"
na=$(grep -o 'worst of the steps: [0-9]* tape nodes' "$T/$M.free.txt" | grep -o '[0-9]*')
nr=$(grep -o 'worst of the steps: [0-9]* tape nodes' "$T/$M.remat.txt" | grep -o '[0-9]*')
check "$M: remat keeps fewer tape nodes ($nr < $na)" test "${nr:-0}" -gt 0 -a "${nr:-0}" -lt "${na:-0}"
ckpt_dump "$T/$M.free/train/ckpt-00000004" >"$T/a.dump"
ckpt_dump "$T/$M.remat/train/ckpt-00000004" >"$T/r.dump"
check "$M: remat's checkpoint is bit-identical to the plain run's" cmp -s "$T/a.dump" "$T/r.dump"
# The evaler's log says what its pass held: peak RSS = weights + step arena + input + other.
expect_exit 0 "$M: evaler --once on the plain run" "$LV_BIN/evaler" --model=lm.bible.$M --logdir="$T/$M.free" \
  --dataset=Train --once --model_params_override="$TR"
check "the evaler logs its memory" grep -q 'eval_train: memory: peak RSS [0-9.]* MB: weights [0-9.]* MB, step arena [0-9.]* MB (worst batch), input buffer [0-9.]* MB, other' "$T/err"
w=$(sed -n 's/.*memory: peak RSS [0-9.]* MB: weights \([0-9.]*\) MB.*/\1/p' "$T/err")
wr=$(awk -v b="$(fig "$T/$M.free.txt" variables)" 'BEGIN { printf "%.1f", b / 1e6 }')
check "... its weights are the trainer's variables ($w = $wr MB)" test "$w" = "$wr"
expect_exit 2 "--memory_report_steps=0 is a usage error" "$LV_BIN/trainer" --model=lm.bible.RnnLmTinyTest \
  --logdir="$T/zero" --mode=memory_report --memory_report_steps=0 --model_params_override="$TR"
err_has "--memory_report_steps=0: expected >= 1"
finish
