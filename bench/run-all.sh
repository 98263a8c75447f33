#!/usr/bin/env bash
# Runs every bench/bench_*.sh in turn (each prints its own figures and ratios); exit 77 is
# a skip (what the bench needs is missing), not a failure.
set -u
cd "$(dirname "$0")/.."
rc=0
for b in bench/bench_*.sh; do
  echo "=== $b"
  bash "$b"
  r=$?
  [ $r = 0 ] || [ $r = 77 ] || rc=1
done
exit $rc
