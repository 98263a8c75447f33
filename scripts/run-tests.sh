#!/usr/bin/env bash
# Runs every Check suite binary given, then every tests/*.sh shell test, and prints one
# closing line "N passed, N failed". Exits non-zero if anything failed.
# Usage: run-tests.sh BUILD_DIR BIN_DIR SUITE...
set -u
build=$1; bindir=$2; shift 2
export LV_BIN="$PWD/$bindir" LV_BUILD="$PWD/$build" LV_ROOT="$PWD"
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-600}
passed=0; failed=0; failures=()
for t in "$@"; do
  echo "== $t"
  if "$t"; then passed=$((passed+1)); else failed=$((failed+1)); failures+=("$t"); fi
done
for t in tests/test_*.sh; do
  [ -e "$t" ] || continue
  echo "== $t"
  start=$(date +%s)
  if bash "$t"; then passed=$((passed+1)); r=ok; else failed=$((failed+1)); failures+=("$t"); r=FAILED; fi
  echo "-- $t: $r ($(( $(date +%s) - start )) s)"
done
echo
[ ${#failures[@]} -gt 0 ] && printf 'FAILED: %s\n' "${failures[@]}"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
