# Turns a command's log, read line by line, into progress lines (scripts/lib/progress.sh).
#   awk -v tty=1|0 -v mode=make|trainer -v label=TEXT [-v total=N] -f progress.awk
# tty=1: one line rewritten in place (\r, erase to the end), ended by a newline at the end;
# tty=0 (a file or pipe): one line per update, for make at most one per tenth of the work.
# mode=make: counts the Makefile's V=0 lines ("  CC      src/x.c") out of total.
# mode=trainer: the trainer's "step: N, steps/sec: R, ... loss:L ... ETA T" lines; the
# last step comes from its "from step A to B" line.
function show(msg) {
  if (tty) printf "\r\033[K%s", msg
  else print msg
  fflush()
  shown = 1
}
mode == "make" && /^  [A-Z+]+ +[^ ]+$/ {
  n++
  pct = total > 0 ? int(100 * n / total) : 0
  if (pct > 100) pct = 100
  if (tty || pct >= next_pct || n == total) {
    show(sprintf("%s: %d/%d (%d%%) %s", label, n, total, pct, $2))
    next_pct = pct - pct % 10 + 10
  }
}
mode == "trainer" && match($0, /from step [0-9]+ to [0-9]+/) {
  split(substr($0, RSTART, RLENGTH), w, " ")
  last = w[5]
}
mode == "trainer" && match($0, /step: *[0-9]+, steps\/sec: [0-9.]+/) {
  split(substr($0, RSTART, RLENGTH), w, /[:, ]+/)
  msg = sprintf("%s: step %d", label, w[2])
  if (last > 0) msg = msg sprintf("/%d (%d%%)", last, int(100 * w[2] / last))
  for (i = 1; i <= NF; i++) {
    if ($i ~ /^(loss|accuracy|wer):/) { split($i, kv, ":"); msg = msg sprintf(", %s %.4g", kv[1], kv[2]) }
  }
  msg = msg sprintf(", %s steps/s", w[4])
  if ($(NF - 1) == "ETA") msg = msg ", ETA " $NF
  show(msg)
}
END { if (tty && shown) printf "\n" }
