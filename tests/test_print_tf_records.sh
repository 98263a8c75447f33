#!/usr/bin/env bash
# bin/print_tf_records end to end: a file of five tf.Examples written by
# `check_records --write`, printed, counted, sliced, with bad input failing with exit 2
# and a message naming the file and byte offset.
set -uo pipefail
root=${LV_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
bin=${LV_BIN:-$root/bin}
build=${LV_BUILD:-$root/build}
tmp=$(mktemp -d /tmp/lv_print_tf.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "test_print_tf_records: FAIL: $*" >&2; fails=$((fails+1)); }
expect() { # name, want, got
  if [ "$2" != "$3" ]; then fail "$1"; diff <(printf '%s\n' "$2") <(printf '%s\n' "$3") >&2; fi
}
"$build/tests/check_records" --write "$tmp/a.tfrecord" || { fail "writing the sample"; exit 1; }
p="$bin/print_tf_records"

got=$("$p" --input_filepattern="$tmp/a.tf*" --skip_first_n=1 --print_only_n=1)
want="==== FEATURES ====
frames: [float]
ids: [int64]
word: [bytes]
====
== Record [1]
frames: [0.5 1.0 1.5 2.0 2.5 3.0 ... 4.5 5.0]
ids: [1, -1, 1099511627776]
word: [\"it's\", b'\\xff']
== Total entries: 2"
expect "print --skip_first_n=1 --print_only_n=1" "$want" "$got"

got=$("$p" --input_filepattern="$tmp/a.tfrecord" --count_only)
expect "count_only" "== Total entries: 5" "$got"
got=$("$p" --input_filepattern="$tmp/a.tfrecord" | grep -c '^== Record')
expect "all records printed" "5" "$got"
got=$("$p" --input_filepattern="$tmp/a.tfrecord" --nobytes_as_utf8 --print_only_n=1 | sed -n '/^== Record/,$p' | grep '^word')
expect "nobytes_as_utf8" "word: [b\"it's\", b'\\xff']" "$got"

# Damage the second record's data: exit 2 naming the file and the record's offset.
size=$(stat -c %s "$tmp/a.tfrecord"); rec=$((size / 5))
cp "$tmp/a.tfrecord" "$tmp/bad.tfrecord"
printf 'X' | dd of="$tmp/bad.tfrecord" bs=1 seek=$((rec + 20)) conv=notrunc status=none
err=$("$p" --input_filepattern="$tmp/bad.tfrecord" 2>&1 >/dev/null); rc=$?
expect "corrupt exit code" "2" "$rc"
case "$err" in *"bad.tfrecord: corrupt record at byte offset $rec: data checksum mismatch"*) ;;
  *) fail "corrupt message: $err" ;; esac
got=$("$p" --input_filepattern="$tmp/bad.tfrecord" --skip_corrupt --count_only 2>"$tmp/err"); rc=$?
expect "skip_corrupt exit code" "0" "$rc"
expect "skip_corrupt count" "== Total entries: 4" "$got"
grep -q "skipped 1 corrupt" "$tmp/err" || fail "skip_corrupt does not report the skipped record"

# Truncated file, missing file, missing flag, unknown flag.
head -c $((size - 3)) "$tmp/a.tfrecord" > "$tmp/short.tfrecord"
err=$("$p" --input_filepattern="$tmp/short.tfrecord" 2>&1 >/dev/null); rc=$?
expect "truncated exit code" "2" "$rc"
case "$err" in *"short.tfrecord: corrupt record at byte offset $((rec * 4)): truncated"*) ;;
  *) fail "truncated message: $err" ;; esac
"$p" --input_filepattern="$tmp/none*" 2>/dev/null; expect "no match exit code" "2" "$?"
"$p" 2>/dev/null; expect "missing flag exit code" "2" "$?"
"$p" --input_filepatern=x 2>/dev/null; expect "unknown flag exit code" "2" "$?"
"$p" --help | grep -q -- "--count_only" || fail "--help lists no --count_only"

[ "$fails" -eq 0 ] && echo "test_print_tf_records: OK"
[ "$fails" -eq 0 ]
