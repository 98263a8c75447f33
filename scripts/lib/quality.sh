# scripts/lib/quality.sh - sourced by scripts/quality.sh, quality_asr.sh and
# quality_fusion.sh: their argument checks and the timed training they share.
# The script sets q_name (its name in messages) and bin (the executables' folder) first.

# q_usage_or_help ARG HELP_LAST_LINE USAGE: --help prints the script's header comment
# (lines 2..HELP_LAST_LINE) and exits 0; any other argument prints USAGE and exits 2.
# Returns for an empty ARG.
q_usage_or_help() {
  case "$1" in
    "") ;;
    -h | --help) sed -n "2,$2p" "$0"; exit 0 ;;
    *) echo "usage: $0   $3" >&2; exit 2 ;;
  esac
}

# q_hours VAR VALUE [0]: VALUE must be a number of hours; with a third argument 0 is
# allowed (no training), otherwise it must be positive. Exit 2 naming VAR.
q_hours() {
  if [ "${3:-}" = 0 ]; then
    awk -v h="$2" 'BEGIN { exit !(h ~ /^[0-9]*\.?[0-9]+$/) }' ||
      { echo "$q_name: $1=$2: expected a number of hours (0: no training)" >&2; exit 2; }
  else
    awk -v h="$2" 'BEGIN { exit !(h ~ /^[0-9]*\.?[0-9]+$/ && h + 0 > 0) }' ||
      { echo "$q_name: $1=$2: expected a positive number of hours" >&2; exit 2; }
  fi
}

# q_seconds HOURS: the whole seconds in HOURS.
q_seconds() { awk -v h="$1" 'BEGIN { printf "%d", h * 3600 }'; }

# q_need_bins NAME...: exit 1 naming the first of bin/NAME that is missing.
q_need_bins() {
  local b
  for b; do
    [ -x "$bin/$b" ] || { echo "$q_name: $bin/$b is missing: run make first" >&2; exit 1; }
  done
}

# q_train SECS WHAT TRAINER_ARGS...: bin/trainer for at most SECS (SIGTERM then: the trainer
# saves a checkpoint and stops; SIGKILL 300 s later if it has not). Returns 0 when it
# reached max_steps, 1 when the budget ran out; exits 1 naming WHAT when the trainer failed.
q_train() {
  local secs=$1 what=$2 rc=0
  shift 2
  timeout -s TERM -k 300 "$secs" "$bin/trainer" "$@" || rc=$?
  case $rc in 0) return 0 ;; 124) return 1 ;; esac
  echo "$q_name: the trainer failed$what (exit $rc)" >&2
  exit 1
}
