# Sourced by the bench scripts, from the repository root. bench_build NAME... builds each
# driver bench/NAME.c as $LV_BUILD/bench/NAME (default build/bench/NAME) through the
# Makefile's own rule, flags and libraries, and sets bench_dir to that folder; with
# BUILD_ONLY=1 the script stops there, so its build step can be checked without timing
# anything (tests/test_bench_link.sh). The drivers are also part of `make all`.
bench_build() {
  local build=${LV_BUILD:-build} n targets=()
  build=${build#"$PWD"/} # the same BUILD string as a plain make, so no flags change rebuilds
  for n in "$@"; do targets+=("$build/bench/$n"); done
  make -s -j"$(nproc)" BUILD="$build" "${targets[@]}" || exit
  bench_dir=$build/bench
  if [ "${BUILD_ONLY:-0}" = 1 ]; then
    echo "$(basename "$0"): built ${targets[*]}"
    exit 0
  fi
}
