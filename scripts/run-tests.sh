#!/usr/bin/env bash
# Runs every Check suite binary given, then every tests/*.sh shell test, and closes with
# one line "suites: N passed, M failed, K skipped". A suite or test that cannot run (no
# GPU, a missing tool) exits 77 after one line saying why: it is counted as skipped, never
# as passed. Exits non-zero if anything failed.
# Usage: run-tests.sh BUILD_DIR BIN_DIR SUITE...
# LV_SHELL_TESTS (a list of paths; empty: none) replaces tests/test_*.sh.
set -u
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
build=$1; bindir=$2; shift 2
export LV_BIN="$(abs "$bindir")" LV_BUILD="$(abs "$build")" LV_ROOT="$PWD"
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-600}
passed=0; failed=0; skipped=0; failures=(); skips=()
# run NAME CMD...: runs one suite or test and counts its exit code.
run() {
  local name=$1; shift
  echo "== $name"
  local start=$(date +%s) rc r
  "$@"; rc=$?
  case $rc in
    0) passed=$((passed+1)); r=ok ;;
    77) skipped=$((skipped+1)); skips+=("$name"); r=SKIPPED ;;
    *) failed=$((failed+1)); failures+=("$name"); r="FAILED (exit $rc)" ;;
  esac
  echo "-- $name: $r ($(( $(date +%s) - start )) s)"
}
for t in "$@"; do run "$t" "$t"; done
for t in ${LV_SHELL_TESTS-tests/test_*.sh}; do
  [ -e "$t" ] || continue
  run "$t" bash "$t"
done
echo
[ ${#skips[@]} -gt 0 ] && printf 'SKIPPED: %s\n' "${skips[@]}"
[ ${#failures[@]} -gt 0 ] && printf 'FAILED: %s\n' "${failures[@]}"
echo "suites: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
