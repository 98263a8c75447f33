#!/usr/bin/env bash
# What rematerialization costs and saves: bin/trainer on one experiment (MODEL) plain and
# with OVERRIDE (default: every TransformerLayer's `remat` of MODEL's family on), RUNS
# times interleaved, same build, same data, same threads:
#   peak RSS      of the whole trainer (/usr/bin/time)
#   CPU seconds   user + system of the whole run (start-up and STEPS steps)
#   steps/s       over steps WARMUP+1..STEPS, from the timestamps of the per-step summaries
# Prints each run, then medians with their spread (min-max) and the ratios remat / plain,
# with the load average before and after. The data is the experiment's own (its
# input.file_pattern) unless EXTRA (params for both runs) says otherwise.
# With BASE_BIN the plain runs use that build instead (a before/after of a code change:
# OVERRIDE=- then adds nothing to the second side).
#   MODEL (mt.bible_en_es.TransformerSmall), OVERRIDE, EXTRA (none), BIN (bin), BASE_BIN
#   (none), THREADS (2), RUNS (3), STEPS (12), WARMUP (2)
# E.g. MODEL=lm.bible.TransformerLmSmall EXTRA='input.file_pattern: "text:/tmp/lm_bible/train.txt"'.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-mt.bible_en_es.TransformerSmall} BIN=${BIN:-bin} THREADS=${THREADS:-2} RUNS=${RUNS:-3}
STEPS=${STEPS:-12} WARMUP=${WARMUP:-2} EXTRA=${EXTRA:-}
case $MODEL in
  mt.*) DEF='task.encoder.transformer_stack.transformer_tpl.remat: true; task.decoder.trans_tpl.remat: true' ;;
  lm.*) DEF='task.lm.trans_tpl.remat: true' ;;
  *) DEF= ;;
esac
OVERRIDE=${OVERRIDE:-$DEF}
[ -n "$OVERRIDE" ] || { echo "bench_remat.sh: no default OVERRIDE for $MODEL: set OVERRIDE" >&2; exit 2; }
[ "$OVERRIDE" != - ] || OVERRIDE=
BASE_BIN=${BASE_BIN:-}
A=plain B=remat
[ -z "$BASE_BIN" ] || { A=base; B=this; }
for b in "$BIN" $BASE_BIN; do
  [ -x "$b/trainer" ] || { echo "bench_remat.sh: no $b/trainer: build lingvoc (make) or set BIN / BASE_BIN" >&2; exit 2; }
done
[ "$WARMUP" -ge 1 ] && [ "$STEPS" -gt "$WARMUP" ] || { echo "bench_remat.sh: need 1 <= WARMUP < STEPS" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/results
secs() { awk '{ split($2, t, ":"); printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3] }'; }
# run SIDE BINDIR OVERRIDE: one training run, "SIDE rss N", "SIDE cpu N", "SIDE steps N" lines.
run() {
  local side=$1 bin=$2 ov=$3
  rm -rf "$tmp/run"
  local O="train.max_steps: $STEPS; train.summary_interval_steps: 1; train.save_interval_seconds: 100000"
  [ -z "$EXTRA" ] || O="$O; $EXTRA"
  [ -z "$ov" ] || O="$O; $ov"
  if ! /usr/bin/time -f "%M %U %S" -o "$tmp/rss" "$bin/trainer" --model="$MODEL" --logdir="$tmp/run" \
      --num_threads="$THREADS" --model_params_override="$O" 2>"$tmp/train.log" >/dev/null; then
    echo "bench_remat.sh: the $side run failed:" >&2
    tail -5 "$tmp/train.log" >&2
    exit 1
  fi
  awk -v s="$side" '{ printf "%s rss %.0f\n%s cpu %.2f\n", s, $1 / 1024, s, $2 + $3 }' "$tmp/rss"
  grep 'step: *[0-9]*, steps/sec' "$tmp/train.log" >"$tmp/steps"
  local t0 t1
  t0=$(awk -v w="$WARMUP" '{ s = $4; sub(",", "", s) } s + 0 == w' "$tmp/steps" | secs)
  t1=$(tail -1 "$tmp/steps" | secs)
  [ -n "$t0" ] && [ -n "$t1" ] || { echo "bench_remat.sh: no per-step summaries in the $side run's log" >&2; exit 1; }
  awk -v s="$side" -v n=$((STEPS - WARMUP)) -v a="$t0" -v b="$t1" 'BEGIN { printf "%s steps %.4f\n", s, n / (b - a) }'
}
echo "$MODEL, $THREADS threads, steps $((WARMUP + 1))-$STEPS, $A: ${BASE_BIN:-$BIN}, $B: $BIN${OVERRIDE:+ with $OVERRIDE}"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$RUNS"); do
  run $A "${BASE_BIN:-$BIN}" "" | sed "s/^/run $i /" | tee -a "$out"
  run $B "$BIN" "$OVERRIDE" | sed "s/^/run $i /" | tee -a "$out"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$RUNS" "$A" "$B" <<'PY'
import statistics, sys
A, B = sys.argv[3], sys.argv[4]
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[2], f[3]), []).append(float(f[4]))
med = statistics.median
print("median (min-max) of %s runs" % sys.argv[2])
for side in (A, B):
    r, c, s = rows[(side, "rss")], rows[(side, "cpu")], rows[(side, "steps")]
    print("  %-6s peak RSS %5.0f MB (%.0f-%.0f)  steps/s %.4f (%.4f-%.4f)  CPU %.1f s (%.1f-%.1f)" %
          (side, med(r), min(r), max(r), med(s), min(s), max(s), med(c), min(c), max(c)))
q = lambda k: med(rows[(B, k)]) / med(rows[(A, k)])
print("  %s / %s: peak RSS %.2fx, steps/s %.3fx (step time %+.1f%%), CPU s %.3fx" %
      (B, A, q("rss"), q("steps"), 100 * (1 / q("steps") - 1), q("cpu")))
PY
