#!/usr/bin/env bash
# make-gpu-bundle.sh [DIR]  (default gpu-bundle/; `make gpu-bundle`)
#
# Prepares a directory to carry to a GPU machine that has the NVIDIA driver, CUDA 13
# (cuBLAS and the runtime under /usr/local/cuda), python3 with PyTorch and TensorBoard, but
# none of lingvoc's Debian libraries and no network; there scripts/gpu-check.sh (copied in)
# runs every GPU check. In DIR:
#   bin/         trainer evaler decoder export ckpt_inspect keras2ckpt wpm_encode_file,
#                check_backend_ops and bench/mt_bench from `make CUDA=1 MPI=0` (into
#                BUILD, default build-gpu-bundle/), linked with RPATH $ORIGIN/../lib
#                (DT_RPATH, so the libraries' own dependencies are found there too)
#   payload.tar.xz  lib/: every shared library those need except glibc's (libc, libm,
#                libdl, libpthread, librt, ld-linux), libgcc_s, libstdc++, CUDA's
#                (libcuda, libcudart, libcublas, libcublasLt: the target's own) and
#                cuDNN's; cudnn-shim/: libcudnn.so.9 alone (cuDNN 9's 130 KB front, which
#                loads its sub-libraries at the first cuDNN call: those are some 500 MB, far
#                over the limit, so the target's own cuDNN runs: /usr/local/cuda's or
#                PyTorch's wheel's, which gpu-check.sh looks for; the shim only lets the
#                executables start where there is none, and they then run without cuDNN); data/:
#                a Fashion-MNIST subset (FM_TRAIN=12000 / FM_TEST=2000 images, IDX gz) and
#                a Bible en-es subset (every BIBLE_EVERY=5th training pair of BIBLE_DIR,
#                default /tmp/bible from scripts/prepare_bible_en_es.sh, encoded with its
#                wpm.voc; the Dev records and the vocabulary as they are; the first 20 Test
#                source lines, test20.en, for the int8 model file check). Compressed
#                because OpenBLAS alone is 36 MB; gpu-check.sh unpacks it.
#   experiments/ scripts/gpu-check.sh scripts/gpu_check_*.py bench/{lenet5,mt}_torch.py
#   MANIFEST     commit, build flags, contents
# MPI=0: Open MPI's runtime (orted, plugins, help files) would have to travel too, and
# NCCL in lingvoc needs MPI to exchange its id, so the bundle has no NCCL; gpu-check.sh
# reports that check as SKIP with the reason.
# Fails if DIR ends up over 60 MiB (the device machine takes 64 MiB in all).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${1:-gpu-bundle}
B=${BUILD:-build-gpu-bundle}
JOBS=${JOBS:-2}
FM_DIR=${FM_DIR:-/usr/share/datasets/fashion-mnist}
FM_TRAIN=${FM_TRAIN:-12000} FM_TEST=${FM_TEST:-2000}
BIBLE_DIR=${BIBLE_DIR:-/tmp/bible}
BIBLE_EVERY=${BIBLE_EVERY:-5}
die() { echo "make-gpu-bundle.sh: $*" >&2; exit 1; }

[ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] || die "nvcc not found under ${CUDA_HOME:-/usr/local/cuda} (CUDA 13 is needed to build)"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -f "$FM_DIR/$f.gz" ] || die "$FM_DIR/$f.gz missing (apt-get install dataset-fashion-mnist, or FM_DIR=)"
done
for f in train.en train.es test.en wpm.voc dev.tfrecord-00000-of-00001; do
  [ -f "$BIBLE_DIR/$f" ] || die "$BIBLE_DIR/$f missing: run scripts/prepare_bible_en_es.sh $BIBLE_DIR first (or BIBLE_DIR=)"
done

# 1. The CUDA build, MPI=0, linked with RPATH $ORIGIN/../lib (relinked every time: the
#    link flags are not part of make's dependencies).
BINS=(trainer evaler decoder export ckpt_inspect keras2ckpt wpm_encode_file)
targets=()
for b in "${BINS[@]}"; do targets+=("$B/bin/$b"); done
targets+=("$B/tests/check_backend_ops" "$B/bench/mt_bench")
rm -f "${targets[@]}"
# The make variable holds \$$ORIGIN: make makes it \$ORIGIN, the shell $ORIGIN.
make --no-print-directory CUDA=1 MPI=0 -j"$JOBS" BUILD="$B" BINDIR="$B/bin" \
  LDFLAGS='-fopenmp -Wl,--disable-new-dtags -Wl,-rpath,\$$ORIGIN/../lib' "${targets[@]}"
for t in "${targets[@]}"; do
  readelf -d "$t" | grep -q 'RPATH.*\$ORIGIN/\.\./lib' || die "$t has no RPATH \$ORIGIN/../lib"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out"
mkdir -p "$out/bin" "$out/scripts" "$out/bench" "$tmp/lib" "$tmp/data/fashion" "$tmp/data/bible"
for t in "${targets[@]}"; do
  # Symbols kept (backtraces, compute-sanitizer), DWARF dropped: a fifth of the size.
  strip --strip-debug -o "$out/bin/$(basename "$t")" "$t"
done

# 2. Shared libraries: what ldd resolves here, less what the target has.
is_target_lib() {
  case "$1" in
    linux-vdso.so.*|ld-linux-x86-64.so.*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*) return 0 ;;
    libgcc_s.so.*|libstdc++.so.*) return 0 ;;
    libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libcudnn*.so.*) return 0 ;;
  esac
  return 1
}
for t in "${targets[@]}"; do
  ldd "$t" | grep -q 'not found' && die "$t: ldd finds not everything here: $(ldd "$t" | grep 'not found' | tr '\n' ' ')"
  ldd "$t" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  is_target_lib "$name" || cp -L "$path" "$tmp/lib/$name"
done
mkdir -p "$tmp/cudnn-shim"
shim=$(ldd "$B/bin/trainer" | awk '$1 == "libcudnn.so.9" { print $3 }')
[ -n "$shim" ] || die "$B/bin/trainer does not link libcudnn.so.9"
cp -L "$shim" "$tmp/cudnn-shim/libcudnn.so.9"

# 3. Data subsets.
python3 - "$FM_DIR" "$tmp/data/fashion" "$FM_TRAIN" "$FM_TEST" <<'PY'
import gzip, struct, sys
src, dst, ntrain, ntest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for split, n in (("train", ntrain), ("t10k", ntest)):
    for kind, dims in (("images-idx3-ubyte", 3), ("labels-idx1-ubyte", 1)):
        name = "%s-%s.gz" % (split, kind)
        data = gzip.open("%s/%s" % (src, name)).read()
        hdr = 4 + 4 * dims
        shape = struct.unpack(">%dI" % dims, data[4:hdr])
        if shape[0] < n:
            sys.exit("make-gpu-bundle.sh: %s has %d items, fewer than %d" % (name, shape[0], n))
        item = 1
        for d in shape[1:]:
            item *= d
        body = data[hdr:hdr + n * item]
        with gzip.GzipFile("%s/%s" % (dst, name), "wb", mtime=0) as f:
            f.write(data[:4] + struct.pack(">%dI" % dims, n, *shape[1:]) + body)
PY
awk -v e="$BIBLE_EVERY" 'NR % e == 1' "$BIBLE_DIR/train.en" >"$tmp/train.en"
awk -v e="$BIBLE_EVERY" 'NR % e == 1' "$BIBLE_DIR/train.es" >"$tmp/train.es"
"$B/bin/wpm_encode_file" --source_filepaths="$tmp/train.en" --target_filepaths="$tmp/train.es" \
  --wpm_filepath="$BIBLE_DIR/wpm.voc" --output_filepath="$tmp/data/bible/train.tfrecord" --max_len=100 \
  --progress_seconds=0 >/dev/null
cp "$BIBLE_DIR/wpm.voc" "$BIBLE_DIR/dev.tfrecord-00000-of-00001" "$tmp/data/bible/"
head -20 "$BIBLE_DIR/test.en" >"$tmp/data/bible/test20.en"
tar -C "$tmp" --owner=0 --group=0 --sort=name -cf - cudnn-shim lib data | xz -T"$JOBS" -6 >"$out/payload.tar.xz"

# 4. Scripts, experiments, the PyTorch baselines.
cp -r experiments "$out/"
cp scripts/gpu-check.sh scripts/gpu_check_curves.py scripts/gpu_check_tb.py "$out/scripts/"
cp bench/lenet5_torch.py bench/mt_torch.py "$out/bench/"
{
  echo "lingvoc GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "build: make CUDA=1 MPI=0 into $B, $(cat "$B/cflags.txt")"
  echo "nvcc: $("${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version | tail -1)"
  echo "assumed on the target: glibc (libc, libm, libdl, libpthread, librt), libgcc_s, libstdc++, the NVIDIA driver (libcuda), CUDA 13's libcudart and libcublas/libcublasLt; cuDNN 9 (/usr/local/cuda or PyTorch's wheel) or else no cuDNN (cudnn-shim/ lets the executables start)"
  echo "fashion subset: $FM_TRAIN train / $FM_TEST test images; bible: every ${BIBLE_EVERY}th training pair ($(wc -l <"$tmp/train.en") pairs) of $BIBLE_DIR"
  echo "libraries in payload.tar.xz:"; (cd "$tmp/lib" && ls -l | awk 'NR > 1 { print "  " $9, $5 }')
  echo "  cudnn-shim/libcudnn.so.9 $(stat -c %s "$tmp/cudnn-shim/libcudnn.so.9") (the front library alone; headers: cuDNN $(awk '/define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{ printf "%s%s", s, $3; s = "." }' "${CUDA_HOME:-/usr/local/cuda}/include/cudnn_version.h"))"
  echo "files:"; (cd "$out" && find . -type f ! -path './experiments/*' | sort | xargs ls -l | awk '{ print "  " $9, $5 }')
} >"$out/MANIFEST"
kib=$(du -sk "$out" | cut -f1)
echo "make-gpu-bundle.sh: $out is $((kib / 1024)) MiB ($kib KiB): $(ls "$tmp/lib" | wc -l) libraries, $(wc -l <"$tmp/train.en") Bible pairs, $FM_TRAIN/$FM_TEST Fashion-MNIST images"
[ "$kib" -le $((60 * 1024)) ] || die "$out is over 60 MiB"
