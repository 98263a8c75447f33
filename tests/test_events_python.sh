#!/usr/bin/env bash
# Independent decode of a lingvoc event file: build/tests/check_events --write writes the
# sample; protoc generates Python modules from src/io/proto/*.proto; /usr/bin/python3 with
# python3-protobuf reads the file (its own TFRecord/crc32c code) and checks every value
# (tests/read_events.py). Needs the Debian packages python3-protobuf and protobuf-compiler
# (scripts/install-deps.sh); installs nothing itself.
set -euo pipefail
root=${LV_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
build=${LV_BUILD:-$root/build}
py=/usr/bin/python3
if ! command -v protoc >/dev/null; then
  echo "test_events_python: FAIL: protoc not found (apt-get install protobuf-compiler)" >&2; exit 1
fi
if ! "$py" -c 'import google.protobuf' 2>/dev/null; then
  echo "test_events_python: FAIL: $py cannot import google.protobuf (apt-get install python3-protobuf)" >&2; exit 1
fi
tmp=$(mktemp -d /tmp/lv_events_py.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/gen" "$tmp/logdir"
protoc --proto_path="$root/src/io/proto" --python_out="$tmp/gen" "$root"/src/io/proto/*.proto
path=$("$build/tests/check_events" --write "$tmp/logdir/train")
case "$path" in
  "$tmp/logdir/train/events.out.tfevents."*) ;;
  *) echo "test_events_python: FAIL: unexpected event file path '$path'" >&2; exit 1 ;;
esac
"$py" "$root/tests/read_events.py" "$tmp/gen" "$path"
