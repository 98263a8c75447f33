#!/usr/bin/env bash
# Runs every bench/bench_*.sh in turn (each prints its own figures and ratios).
set -u
cd "$(dirname "$0")/.."
rc=0
for b in bench/bench_*.sh; do
  echo "=== $b"
  bash "$b" || rc=1
done
exit $rc
