# scripts/lib/progress.sh - sourced by scripts/quickstart.sh, scripts/install-deps.sh and
# scripts/quiet-make.sh: a command's whole output goes to a log file, the terminal gets a
# few lines (or one progress line), and a failure prints the log's last lines and its path.
# The script sets lv_name (its name in messages) first.

lv_progress_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# lv_fail_log LOG RC WHAT: says WHAT failed with exit RC, prints LOG's last 30 lines and
# its path (on stderr).
lv_fail_log() {
  {
    echo "$lv_name: $3 failed (exit $2); the last 30 lines of $1:"
    tail -n 30 "$1" | sed 's/^/  | /'
    echo "$lv_name: the whole log: $1"
  } >&2
}

# lv_logged LOG WHAT CMD...: runs CMD with stdout and stderr appended to LOG; on failure
# lv_fail_log and exit with CMD's status.
lv_logged() {
  local log=$1 what=$2 rc=0
  shift 2
  "$@" >>"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then lv_fail_log "$log" "$rc" "$what"; exit "$rc"; fi
}

# lv_progress LOG WHAT MODE LABEL TOTAL CMD...: runs CMD with its output in LOG (as
# lv_logged) and shows progress/awk's lines for it (MODE make or trainer, TOTAL the
# number of make steps or 0). On a terminal the line updates in place. Ctrl-C reaches
# CMD alone: the log and the progress line keep reading until CMD has finished (the
# trainer saves a checkpoint on SIGINT).
lv_progress() {
  local log=$1 what=$2 mode=$3 label=$4 total=$5 tty=0 rc
  shift 5
  [ -t 1 ] && tty=1
  : >"$log"
  set +e
  "$@" 2>&1 | tee -i -p -a "$log" |
    (trap '' INT; exec awk -v tty="$tty" -v mode="$mode" -v label="$label" -v total="$total" \
      -f "$lv_progress_dir/progress.awk")
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then lv_fail_log "$log" "$rc" "$what"; exit "$rc"; fi
}
