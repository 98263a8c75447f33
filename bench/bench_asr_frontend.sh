#!/usr/bin/env bash
# The speech frontend (src/audio/mel_frontend.c: Lingvo's MelAsrFrontend, 80 bins, FFTW)
# against torchaudio.compliance.kaldi.fbank (80 bins, Debian's python3-torchaudio) on the
# same files, one thread each, pinned to one CPU: the five LibriVox recordings of
# pocketsphinx-testdata (24.7 s) plus FILES (default: none), each computed REPS times per
# run (default 20), RUNS runs (default 7) of each side interleaved. Prints per side the
# median seconds per run with min-max, the real-time factor (compute seconds per audio
# second) and the speed ratio torchaudio / lingvoc. Builds bench/asr_frontend_bench.c
# as $LV_BUILD/bench/asr_frontend_bench (default build/) with make.
set -euo pipefail
root=${LV_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$root/bench/peer_env.sh"   # the peers get the OpenBLAS kernels lingvoc selects
cd "$root"
. bench/build.sh
bench_build asr_frontend_bench
RUNS=${RUNS:-7}
REPS=${REPS:-20}
CPU=${CPU:-0}
PS=/usr/share/pocketsphinx/test/data/librivox
ls "$PS"/*.wav >/dev/null 2>&1 || { echo "bench_asr_frontend: install pocketsphinx-testdata" >&2; exit 1; }
/usr/bin/python3 -c 'import torchaudio' 2>/dev/null || { echo "bench_asr_frontend: install python3-torchaudio" >&2; exit 1; }
tmp=$(mktemp -d /tmp/lv_bench_asr_fe.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
files=("$PS"/*.wav ${FILES:-})
for _ in $(seq "$RUNS"); do
  OMP_NUM_THREADS=1 taskset -c "$CPU" "$bench_dir/asr_frontend_bench" 1 "$REPS" "${files[@]}" 2>/dev/null
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
