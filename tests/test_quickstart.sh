#!/usr/bin/env bash
# A newcomer's first commands print a few lines per step, keep the whole output in log
# files they name, and fail loudly (scripts/quickstart.sh, scripts/install-deps.sh,
# scripts/quiet-make.sh, scripts/lib/progress.sh); nothing is installed here:
#  1. install-deps.sh, everything present: one line; with missing packages (dpkg-query,
#     apt-get and id faked on PATH): a few lines, apt-get's output in the log it names,
#     and when apt-get fails, the log's last lines, its path and a non-zero exit;
#  2. make's default V=0 prints no compiler command line (V=1 does), and quiet-make.sh
#     a progress line with the output in its log; a compile error is still shown;
#  3. the trainer's progress: one line per update into a file or pipe, one line
#     rewritten with \r on a (pseudo) terminal (script -qc);
#  4. quickstart.sh end to end on 20 steps of 2000 images: about twenty lines, each
#     step's log file, the test scores; a failing step prints its log's tail and exits
#     non-zero.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LV_ROOT"
# Not a make recipe's job: MAKEFLAGS of `make test` would name a jobserver it closed.
unset MAKEFLAGS MAKELEVEL MFLAGS
lines() { wc -l <"$1"; }
not() { ! "$@"; }

# ---- 1. install-deps.sh ----
# apt-get and sudo refuse here: a missing package is reported, never installed.
mkdir -p "$T/guard"
printf '#!/bin/sh\necho "test_quickstart.sh: $0 not run" >&2\nexit 3\n' >"$T/guard/apt-get"
cp "$T/guard/apt-get" "$T/guard/sudo"
chmod +x "$T/guard/apt-get" "$T/guard/sudo"
PATH="$T/guard:$PATH" LINGVOC_DEPS_LOG="$T/deps0.log" scripts/install-deps.sh >"$T/deps.out" 2>&1
rc=$?
all_present=0
if [ "$rc" -eq 0 ] && grep -q "^install-deps: all [0-9]* packages present$" "$T/deps.out"; then all_present=1; fi
if [ "$all_present" = 1 ]; then
  check "install-deps.sh with every package present prints one line" [ "$(lines "$T/deps.out")" -eq 1 ]
else
  skip_part "install-deps.sh with every package present: some are missing here ($(head -1 "$T/deps.out"))"
fi
mkdir -p "$T/fake"
cat >"$T/fake/dpkg-query" <<'EOF'
#!/bin/sh
# Every package missing but perl.
for a; do p=$a; done
[ "$p" = perl ] && printf 'install ok installed'
exit 0
EOF
cat >"$T/fake/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get $*" >>"$FAKE_APT_CALLS"
for i in $(seq 500); do echo "apt-get $1 line $i"; done
case $1 in install) exit "${FAKE_APT_RC:-0}" ;; esac
EOF
printf '#!/bin/sh\necho 0\n' >"$T/fake/id"
chmod +x "$T"/fake/*
fake_deps() {
  PATH="$T/fake:$PATH" FAKE_APT_CALLS="$T/apt.calls" LINGVOC_DEPS_LOG="$T/deps.log" "$@" \
    scripts/install-deps.sh >"$T/deps.out" 2>&1
}
: >"$T/apt.calls"
fake_deps env
rc=$?
check "install-deps.sh installing 30 packages exits 0 (exit $rc)" [ "$rc" -eq 0 ]
check "  prints at most 15 lines ($(lines "$T/deps.out"))" [ "$(lines "$T/deps.out")" -le 15 ]
check "  names its log" grep -qF "$T/deps.log" "$T/deps.out"
check "  says what the packages are for" grep -q "for speech (.*): .*libsoxr-dev" "$T/deps.out"
check "  apt-get's 1000 lines are in the log, not the output" \
  [ "$(grep -c '^apt-get .* line ' "$T/deps.log")" -eq 1000 -a "$(grep -c ' line ' "$T/deps.out")" -eq 0 ]
check "  apt-get update, then install of the missing packages but perl" \
  eval '[ "$(cut -d" " -f1-2 "$T/apt.calls" | tr "\n" " ")" = "apt-get update apt-get install " ] &&
    ! grep -qw perl "$T/apt.calls"'
fake_deps env FAKE_APT_RC=100
rc=$?
check "install-deps.sh, apt-get install failing: exits non-zero ($rc)" [ "$rc" -ne 0 ]
check "  prints the log's last lines" grep -q "| apt-get install line 500$" "$T/deps.out"
check "  and its path" grep -q "install-deps: the whole log: $T/deps.log" "$T/deps.out"
check "  at most 45 lines ($(lines "$T/deps.out"))" [ "$(lines "$T/deps.out")" -le 45 ]

# ---- 2. make V=0 and quiet-make.sh ----
# One object in a scratch build tree: the generated proto headers and one compile.
compiler_lines() { grep -qE '(^|[ /])(cc|gcc|protoc-c|ar) .*(-c |-o |rcs )' "$1"; }
make V=0 BUILD="$T/b" "$T/b/src/base/crc32c.o" >"$T/make.out" 2>&1
rc=$?
check "make V=0 builds one object (exit $rc)" [ "$rc" -eq 0 ]
check "  prints no compiler command line" not compiler_lines "$T/make.out"
check "  prints CC src/base/crc32c.c" grep -qE '^  CC +src/base/crc32c.c$' "$T/make.out"
rm -f "$T/b/src/base/crc32c.o"
make V=1 BUILD="$T/b" "$T/b/src/base/crc32c.o" >"$T/make1.out" 2>&1
check "make V=1 prints the command" compiler_lines "$T/make1.out"
rm -f "$T/b/src/base/crc32c.o"
scripts/quiet-make.sh "$T/qm.log" BUILD="$T/b" "$T/b/src/base/crc32c.o" >"$T/qm.out" 2>&1
rc=$?
check "quiet-make.sh: exit $rc, 3 lines ($(lines "$T/qm.out")), CC line in its log" \
  eval '[ "$rc" -eq 0 -a "$(lines "$T/qm.out")" -eq 3 ] && grep -q "CC .*crc32c" "$T/qm.log"'
mkdir -p "$T/bad"
printf 'int main(void) { return not_declared; }\n' >"$T/bad/bad.c"
scripts/quiet-make.sh "$T/bad.log" BUILD="$T/b" "$T/b/$T/bad/bad.o" >"$T/bad.out" 2>&1
rc=$?
check "quiet-make.sh, a compile error: exit $rc" [ "$rc" -ne 0 ]
check "  shows the compiler's error" grep -q "not_declared. undeclared" "$T/bad.out"
check "  and the log's path" grep -qF "build: the whole log: $T/bad.log" "$T/bad.out"

# ---- 3. the trainer's progress, file and terminal ----
cat >"$T/trainer.canned" <<'EOF'
I1207 08:23:25.723 training image.mnist.LeNet5Fashion@x.cfg from step 0 to 300, batch 256
I1207 08:23:26.000 step:    100, steps/sec: 3.72, examples/sec: 953.39 accuracy:0.7344401 loss:0.73224755 num_preds:256 ETA 53s
I1207 08:23:27.000 step:    200, steps/sec: 3.80, examples/sec: 972.80 accuracy:0.8 loss:0.5 num_preds:256 ETA 26s
I1207 08:23:28.000 step:    300, steps/sec: 3.90, examples/sec: 998.40 accuracy:0.85 loss:0.4 num_preds:256 ETA 0s
EOF
progress='lv_name=t; . scripts/lib/progress.sh; lv_progress "$1" trainer trainer train 0 cat "$2"'
bash -c "$progress" - "$T/p.log" "$T/trainer.canned" >"$T/p.out" 2>&1
check "progress into a file: one line per update" [ "$(lines "$T/p.out")" -eq 3 ]
check "  no carriage return" not grep -q $'\r' "$T/p.out"
check "  step/last, loss, steps/s and ETA" \
  grep -qx "train: step 200/300 (66%), accuracy 0.8, loss 0.5, 3.80 steps/s, ETA 26s" "$T/p.out"
check "  the whole log kept" cmp -s "$T/p.log" "$T/trainer.canned"
if command -v script >/dev/null; then
  script -qc "bash -c '$progress' - '$T/p2.log' '$T/trainer.canned'" /dev/null >"$T/pty.out" 2>&1
  check "progress on a pseudo-terminal: updates in place (\\r, one line)" \
    [ "$(grep -o $'\r\e\\[Ktrain: step' "$T/pty.out" | wc -l)" -eq 3 -a "$(grep -c 'train: step' "$T/pty.out")" -eq 1 ]
else
  skip_part "progress on a pseudo-terminal: no script(1) (util-linux)"
fi

# ---- 4. quickstart.sh ----
if [ "$all_present" != 1 ]; then
  skip_part "quickstart.sh: install-deps.sh would install packages"
elif [ "$(cd "${LV_BUILD:-build}" 2>/dev/null && pwd)" != "$LV_ROOT/build" ]; then
  skip_part "quickstart.sh: it builds build/, and this run's build is $LV_BUILD"
else
  qs() {
    QUICKSTART_LOGS="$T/qs-logs" QUICKSTART_DATA="$T/mnist" STEPS=20 LOG_EVERY=10 \
      QUICKSTART_OVERRIDE='input.num_samples: 2000; input.batch_size: 64; cluster.num_threads: 2' \
      "$@" scripts/quickstart.sh "$T/qs" >"$T/qs.out" 2>&1
  }
  qs env
  rc=$?
  check "quickstart.sh, 20 steps: exit $rc" [ "$rc" -eq 0 ]
  check "  at most 25 lines ($(lines "$T/qs.out"))" [ "$(lines "$T/qs.out")" -le 25 ]
  check "  no compiler or trainer log lines" not grep -qE ' -std=|^I[0-9]{4} ' "$T/qs.out"
  check "  two progress lines" [ "$(grep -c '^train: step [12]0/20 ' "$T/qs.out")" -eq 2 ]
  check "  the test scores" grep -q "^accuracy: 0\.[0-9]" "$T/qs.out"
  for f in build keras2ckpt trainer evaler; do
    check "  $f.log named" grep -qF "$T/qs-logs/$f.log" "$T/qs.out"
    check "  $f.log kept" [ -s "$T/qs-logs/$f.log" ]
  done
  check "  trainer.log is the trainer's whole log" grep -q "trained to step 20" "$T/qs-logs/trainer.log"
  qs env QUICKSTART_OVERRIDE='train.no_such_key: 1'
  rc=$?
  check "quickstart.sh, a misspelt parameter: exit $rc" [ "$rc" -ne 0 ]
  check "  the trainer's error" grep -q "| .*no_such_key" "$T/qs.out"
  check "  the trainer log's path" grep -qF "quickstart: the whole log: $T/qs-logs/trainer.log" "$T/qs.out"
fi
finish
