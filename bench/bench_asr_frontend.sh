#!/usr/bin/env bash
# The speech frontend (src/audio/mel_frontend.c: Lingvo's MelAsrFrontend, 80 bins, FFTW)
# against torchaudio.compliance.kaldi.fbank (80 bins, Debian's python3-torchaudio) on the
# same files, one thread each, pinned to one CPU: the five LibriVox recordings of
# pocketsphinx-testdata (24.7 s) plus FILES (default: none), each computed REPS times per
# run (default 20), RUNS runs (default 7) of each side interleaved. Prints per side the
# median seconds per run with min-max, the real-time factor (compute seconds per audio
# second) and the speed ratio torchaudio / lingvoc. Builds bench/asr_frontend_bench.c
# against $LV_BUILD/liblingvoc.a (run `make` first).
set -euo pipefail
root=${LV_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$root/bench/peer_env.sh"   # the peers get the OpenBLAS kernels lingvoc selects
build=${LV_BUILD:-$root/build}
cd "$root"
RUNS=${RUNS:-7}
REPS=${REPS:-20}
CPU=${CPU:-0}
PS=/usr/share/pocketsphinx/test/data/librivox
[ -e "$build/liblingvoc.a" ] || { echo "bench_asr_frontend: $build/liblingvoc.a missing: run make first" >&2; exit 1; }
ls "$PS"/*.wav >/dev/null 2>&1 || { echo "bench_asr_frontend: install pocketsphinx-testdata" >&2; exit 1; }
/usr/bin/python3 -c 'import torchaudio' 2>/dev/null || { echo "bench_asr_frontend: install python3-torchaudio" >&2; exit 1; }
tmp=$(mktemp -d /tmp/lv_bench_asr_fe.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -march=x86-64-v2 -mtune=generic -Isrc -I"$build/gen" bench/asr_frontend_bench.c \
  "$build/liblingvoc.a" -lfftw3f -lsndfile -lsoxr -lm -lpthread -fopenmp -o "$tmp/fe"
files=("$PS"/*.wav ${FILES:-})
for _ in $(seq "$RUNS"); do
  OMP_NUM_THREADS=1 taskset -c "$CPU" "$tmp/fe" 1 "$REPS" "${files[@]}" 2>/dev/null
  OMP_NUM_THREADS=1 taskset -c "$CPU" /usr/bin/python3 bench/asr_frontend_torch.py 1 "$REPS" "${files[@]}" 2>/dev/null
done >"$tmp/runs"
echo "load (1-minute average) at the end: $(cut -d' ' -f1 /proc/loadavg) on $(nproc) CPUs"
/usr/bin/python3 - "$tmp/runs" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, secs, audio = line.split()
    rows.setdefault(name, []).append((float(secs), float(audio)))
med = {}
for name in ("lingvoc", "torchaudio"):
    s = sorted(x[0] for x in rows[name])
    audio = rows[name][0][1]
    med[name] = statistics.median(s)
    print("%-10s median %.3f s per run (min %.3f, max %.3f, %d runs) for %.1f s of audio: real-time factor %.5f "
          "(%.0fx real time)" % (name, med[name], s[0], s[-1], len(s), audio, med[name] / audio, audio / med[name]))
print("lingvoc is %.2fx torchaudio's kaldi.fbank (median / median)" % (med["torchaudio"] / med["lingvoc"]))
PY
