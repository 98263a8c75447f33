#!/usr/bin/env bash
# Builds with make's whole output in a log file and one progress line on the terminal
# ("build: 57/312 (18%) src/core/tensor.c"), for scripts/quickstart.sh and `make test`;
# on failure the log's last 30 lines, its path, and make's exit status.
#   scripts/quiet-make.sh LOG [MAKE ARGUMENTS...]
# Runs make -jNPROC unless the calling make already shares its jobs (make -jN test).
set -euo pipefail
cd "$(dirname "$0")/.."
lv_name=build
. scripts/lib/progress.sh
log=$1
shift
mkdir -p "$(dirname "$log")"
jobs=("-j$(nproc)")
case " ${MAKEFLAGS:-} " in *" -j"* | *jobserver*) jobs=() ;; esac
# What is left to do, counted from a dry run's one line per step (the Makefile's V=0).
total=$(make -n V=0 "$@" 2>/dev/null | grep -c "^printf '  %-7s %s" || true)
if [ "$total" -eq 0 ]; then
  lv_logged "$log" make make V=0 "${jobs[@]}" "$@"
  echo "build: up to date (log: $log)"
  exit 0
fi
echo "build: $total steps to do, log in $log"
lv_progress "$log" make make build "$total" make V=0 "${jobs[@]}" "$@"
echo "build: done"
