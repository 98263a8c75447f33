#!/usr/bin/env bash
# Every benchmark driver links, and every bench script builds it the Makefile's way (no
# timing here; the timings are `make bench`'s):
#  1. each bench/NAME.c is an executable $LV_BUILD/bench/NAME (`make all` links them with
#     the Makefile's flags and libraries, so a driver that no longer links fails the build);
#  2. no bench/*.sh compiles or links by hand (cc ... liblingvoc.a): each builds through
#     bench/build.sh's bench_build, naming drivers that exist;
#  3. each script that builds a driver, run with BUILD_ONLY=1, builds it and stops (only
#     against the plain build/: another tree, e.g. build-asan, has flags make's command
#     line would have to repeat).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LV_ROOT"
build=${LV_BUILD:-$LV_ROOT/build}

for c in bench/*.c; do
  n=$(basename "$c" .c)
  check "bench/$n.c linked as $build/bench/$n" [ -x "$build/bench/$n" -a "$build/bench/$n" -nt "$c" ]
done

builders=()
for s in bench/*.sh; do
  # Comment lines left out; a cc/gcc/$CC command or the archive named outside make.
  by_hand=$(grep -nvE '^\s*#' "$s" | grep -E '(^|[;&|(]|^[0-9]+:)\s*(cc|gcc|clang|\$CC|\$\{CC\})\s|liblingvoc\.a' |
    grep -v 'LINGVOC_BASE/build/liblingvoc.a' || true)
  check "$s links nothing by hand${by_hand:+: $by_hand}" [ -z "$by_hand" ]
  names=$(sed -n 's/^\s*bench_build \(.*\)$/\1/p' "$s")
  [ -n "$names" ] || continue
  builders+=("$s")
  for n in $names; do
    n=${n%_base} # bench_bn.sh's LINGVOC_BASE twin: the same source
    check "$s builds bench/$n.c, which exists" [ -f "bench/$n.c" ]
  done
done
check "some bench scripts build drivers (${#builders[@]})" [ "${#builders[@]}" -ge 5 ]

if [ "$(cd "$build" 2>/dev/null && pwd)" != "$LV_ROOT/build" ]; then
  skip_part "BUILD_ONLY=1 runs of the bench scripts: $build is not $LV_ROOT/build"
else
  for s in "${builders[@]}"; do
    # Not a make recipe's job: MAKEFLAGS of `make test` would name a jobserver it closed.
    env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u LINGVOC_BASE -u LV_BUILD BUILD_ONLY=1 \
      bash "$s" >"$T/out" 2>&1
    rc=$?
    grep -q "^$(basename "$s"): built " "$T/out" || rc="$rc, no 'built' line"
    check "BUILD_ONLY=1 $s builds and stops (exit $rc): $(tail -1 "$T/out")" [ "$rc" = 0 ]
  done
fi
finish
