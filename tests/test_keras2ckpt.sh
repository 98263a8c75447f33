#!/usr/bin/env bash
# End-to-end test of bin/keras2ckpt: Fashion-MNIST from Debian's package (or Keras' cache)
# into a checkpoint checked with bin/ckpt_inspect; an .npz source; broken and missing
# sources.
set -u
LV_ROOT=${LV_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
LV_BIN=${LV_BIN:-$LV_ROOT/bin}
fails=0
ok() { echo "ok - $1"; }
fail() { echo "FAIL - $1"; fails=$((fails + 1)); }
expect_eq() { if [ "$2" == "$3" ]; then ok "$1"; else fail "$1: got [$2], want [$3]"; fi; }
expect_has() { case "$2" in *"$3"*) ok "$1" ;; *) fail "$1: [$2] lacks [$3]" ;; esac; }
tmp=$(mktemp -d /tmp/test_keras2ckpt.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

FM=/usr/share/datasets/fashion-mnist
if [ -d "$FM" ] || [ -d "$HOME/.keras/datasets/fashion-mnist" ]; then
  out=$("$LV_BIN/keras2ckpt" --dataset=fashion_mnist --out="$tmp/fm/fm" 2>&1); rc=$?
  expect_eq "fashion_mnist converts" "$rc" 0
  expect_has "fashion_mnist prints what it wrote" "$out" "x_train (DT_UINT8) [60000,28,28]"
  out=$("$LV_BIN/ckpt_inspect" --file_name="$tmp/fm/fm")
  expect_eq "fashion_mnist tensors" "$out" "$(printf 'x_test (DT_UINT8) [10000,28,28]\nx_train (DT_UINT8) [60000,28,28]\ny_test (DT_UINT8) [10000]\ny_train (DT_UINT8) [60000]')"
  # Known labels of Fashion-MNIST (Keras: y_test[:3] = 9 2 1, y_train[:3] = 9 0 0).
  out=$("$LV_BIN/ckpt_inspect" --file_name="$tmp/fm/fm" --tensor_name=y_test)
  expect_eq "fashion_mnist y_test" "$out" "$(printf 'tensor_name:  y_test\n[9 2 1 ... 8 1 5]')"
  out=$("$LV_BIN/ckpt_inspect" --file_name="$tmp/fm/fm" --tensor_name=y_train)
  expect_eq "fashion_mnist y_train" "$out" "$(printf 'tensor_name:  y_train\n[9 0 0 ... 3 0 5]')"
  expect_eq "no temporaries left" "$(ls "$tmp/fm" | tr '\n' ' ')" "fm.data-00000-of-00001 fm.index "

  # A truncated copy of one source file: exit 2 naming the file.
  if [ -d "$FM" ]; then
    mkdir -p "$tmp/broken"
    cp "$FM"/*.gz "$tmp/broken/"
    chmod u+w "$tmp/broken"/*
    truncate -s 1000 "$tmp/broken/t10k-labels-idx1-ubyte.gz"
    err=$("$LV_BIN/keras2ckpt" --dataset=fashion_mnist --source="$tmp/broken" --out="$tmp/b/b" 2>&1); rc=$?
    expect_eq "truncated source exits 2" "$rc" 2
    expect_has "truncated source message" "$err" "$tmp/broken/t10k-labels-idx1-ubyte.gz"
    [ ! -e "$tmp/b/b.index" ] && ok "nothing written for a broken source" || fail "index written for a broken source"
  fi
else
  skip_part "Fashion-MNIST absent ($FM, ~/.keras/datasets/fashion-mnist); run scripts/install-deps.sh"
fi

# An .npz source (Keras' mnist.npz layout), deflated, built with Python's zipfile.
if command -v python3 > /dev/null; then
  mkdir -p "$tmp/npz"
  python3 - "$tmp/npz/mnist.npz" <<'PY'
import struct, sys, zipfile
def npy(descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("x_train.npy", npy("|u1", (3, 28, 28), bytes(range(256)) * 9 + bytes(3 * 784 - 2304)))
    z.writestr("y_train.npy", npy("|u1", (3,), bytes([5, 0, 4])))
    z.writestr("x_test.npy", npy("|u1", (2, 28, 28), bytes(2 * 784)))
    z.writestr("y_test.npy", npy("|u1", (2,), bytes([7, 2])))
PY
  out=$("$LV_BIN/keras2ckpt" --dataset=mnist --source="$tmp/npz" --out="$tmp/m/m" 2>&1); rc=$?
  expect_eq "mnist.npz converts" "$rc" 0
  out=$("$LV_BIN/ckpt_inspect" --file_name="$tmp/m/m")
  expect_eq "mnist.npz tensors" "$out" "$(printf 'x_test (DT_UINT8) [2,28,28]\nx_train (DT_UINT8) [3,28,28]\ny_test (DT_UINT8) [2]\ny_train (DT_UINT8) [3]')"
  out=$("$LV_BIN/ckpt_inspect" --file_name="$tmp/m/m" --tensor_name=y_train)
  expect_eq "mnist.npz y_train" "$out" "$(printf 'tensor_name:  y_train\n[5 0 4]')"
  # Corrupt one byte of the compressed data: the zip crc or inflate catches it.
  printf '\x00\x00\x00\x00' | dd of="$tmp/npz/mnist.npz" bs=1 seek=200 conv=notrunc status=none
  err=$("$LV_BIN/keras2ckpt" --dataset=mnist --source="$tmp/npz" --out="$tmp/m2/m" 2>&1); rc=$?
  expect_eq "corrupt npz exits 2" "$rc" 2
  expect_has "corrupt npz message" "$err" "$tmp/npz/mnist.npz"
else
  skip_part "python3 absent: no .npz test"
fi

# Missing data, unknown and unsupported datasets: exit 2 with guidance.
mkdir -p "$tmp/empty"
err=$("$LV_BIN/keras2ckpt" --dataset=fashion_mnist --source="$tmp/empty" --out="$tmp/x/x" 2>&1); rc=$?
expect_eq "missing source exits 2" "$rc" 2
expect_has "missing source lists where it looked" "$err" "$tmp/empty/{train,t10k}"
expect_has "missing source says how to get the data" "$err" "apt-get install dataset-fashion-mnist"
# A prefix that names a directory (it would write DIR/.index).
mkdir -p "$tmp/outdir"
err=$("$LV_BIN/keras2ckpt" --dataset=fashion_mnist --out="$tmp/outdir/" 2>&1); rc=$?
expect_eq "--out=DIR/ exits 2" "$rc" 2
expect_has "--out=DIR/ message" "$err" "expected a checkpoint prefix DIR/NAME"
expect_eq "--out=DIR/ writes nothing" "$(ls -A "$tmp/outdir")" ""
err=$("$LV_BIN/keras2ckpt" --dataset=cifar10 2>&1); rc=$?
expect_eq "cifar10 exits 2" "$rc" 2
expect_has "cifar10 message" "$err" "not supported"
err=$("$LV_BIN/keras2ckpt" --dataset=imagenet 2>&1); rc=$?
expect_eq "unknown dataset exits 2" "$rc" 2
out=$("$LV_BIN/keras2ckpt" --help); rc=$?
expect_eq "--help exits 0" "$rc" 0
expect_has "--help lists --dataset" "$out" "--dataset"

echo "keras2ckpt: $fails failed"
[ "$fails" -eq 0 ]
