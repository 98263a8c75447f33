#!/usr/bin/env bash
# bin/decoder --decode_audio's real-time factor (decode seconds per audio second, as the
# decoder logs it: reading, features, encoder and beam search) with beam 4
# (num_hyps_per_beam 4) on one core (taskset, cluster.num_threads 1), batched
# (--decode_batch_size 8) and one file at a time. Needs a trained model: MODEL (default
# asr.bible_tts.LasSmall) and its LOGDIR (default /tmp/las, or CHECKPOINT=PREFIX). The audio:
# the first N (default 16) lines of TEXT (default /tmp/asr_bible/test.tsv's transcripts)
# spoken by espeak-ng (16 kHz mono), plus the five LibriVox recordings of
# pocketsphinx-testdata when installed. RUNS (default 3) runs per setting, interleaved;
# prints median and min-max of the real-time factor.
set -euo pipefail
root=${LV_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$root/bench/peer_env.sh"   # the peers get the OpenBLAS kernels lingvoc selects
bindir=${LV_BIN:-$root/bin}
cd "$root"
export LINGVOC_EXPERIMENTS=$root/experiments
MODEL=${MODEL:-asr.bible_tts.LasSmall}
LOGDIR=${LOGDIR:-/tmp/las}
TEXT=${TEXT:-/tmp/asr_bible/test.tsv}
N=${N:-16}
RUNS=${RUNS:-3}
CPU=${CPU:-0}
[ -x "$bindir/decoder" ] || { echo "bench_asr_decode: $bindir/decoder missing: run make first" >&2; exit 1; }
[ -f "$TEXT" ] || { echo "bench_asr_decode: $TEXT missing (scripts/prepare_asr_bible.sh, or set TEXT)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/lv_bench_asr_dec.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
i=0
head -n "$N" "$TEXT" | cut -f2 | while read -r text; do
  espeak-ng -v en-us -s 160 --stdout "$text" | sox -q -t wav - -r 16000 -c 1 -b 16 "$tmp/$i.wav"
  echo "$tmp/$i.wav"
  i=$((i + 1))
done >"$tmp/files.txt"
ls /usr/share/pocketsphinx/test/data/librivox/*.wav >>"$tmp/files.txt" 2>/dev/null || true
ck=()
[ -n "${CHECKPOINT:-}" ] && ck=(--checkpoint="$CHECKPOINT")
for _ in $(seq "$RUNS"); do
  for bs in 8 1; do
    taskset -c "$CPU" "$bindir/decoder" --model="$MODEL" --logdir="$LOGDIR" "${ck[@]}" --decode_audio=@"$tmp/files.txt" \
      --decode_batch_size=$bs --num_threads=1 \
      --model_params_override="task.decoder.beam_search.num_hyps_per_beam: 4" >"$tmp/out" 2>"$tmp/err" ||
      { tail -3 "$tmp/err" >&2; exit 1; }
    rtf=$(grep -o 'real-time factor [0-9.]*' "$tmp/err" | awk '{print $3}')
    secs=$(grep -o '[0-9.]* s of audio' "$tmp/err" | awk '{print $1}')
    echo "$bs $rtf $secs"
  done
done >"$tmp/runs"
echo "$(wc -l <"$tmp/files.txt") files; load (1-minute average) at the end: $(cut -d' ' -f1 /proc/loadavg) on $(nproc) CPUs"
/usr/bin/python3 - "$tmp/runs" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    bs, rtf, secs = line.split()
    rows.setdefault(int(bs), []).append(float(rtf))
    audio = float(secs)
for bs in sorted(rows, reverse=True):
    r = sorted(rows[bs])
    print("--decode_batch_size=%d: real-time factor median %.4f (min %.4f, max %.4f, %d runs) over %.1f s of audio, "
          "beam 4, one core" % (bs, statistics.median(r), r[0], r[-1], len(r), audio))
if 1 in rows and 8 in rows:
    print("batching 8 files: %.2fx faster than one at a time" % (statistics.median(rows[1]) / statistics.median(rows[8])))
PY
