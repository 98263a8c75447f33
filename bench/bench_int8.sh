#!/usr/bin/env bash
# Post-training int8 against float32, the same trained model, the same machine, in the same
# run (issue 46): bin/export writes the model float32 and --quantize=int8, and RUNS
# interleaved runs of bin/decoder --model_file time each file:
#   MT    mt.bible_en_es.MT_MODEL (TransformerSmall; RNMTSmall), beam search (the
#         experiment's) on the first LINES lines of /tmp/bible/test.en: sentences/s and
#         target words/s (the outputs' whitespace-separated words: the two files' outputs
#         are nearly the same text, so the ratio is the ratio of time), wall time including
#         the model's load; sacrebleu BLEU of the same lines against /tmp/bible/test.es;
#   PUNCT (with PUNCT_LOGDIR, a trained punctuator's log dir) punctuator.codelab.PUNCT_MODEL
#         (RNMTModelSmall; TransformerSmall) --decode_text of the first LINES lines of
#         $PUNCT_DATA/test.txt (/tmp/punctuator_data: scripts/prepare_punctuator.sh; the
#         decoder lower-cases and strips each line as PunctuatorInput does): the same
#         speed figures, and punct_score's BLEU, exact match, F1 of commas, of all marks and of capitals;
#   LM    lm.bible.LM_MODEL --score_text on the first LM_LINES lines of $LM_DATA/LM_SPLIT.txt:
#         predicted tokens/s (</s> included) and the corpus perplexity of each file.
#   GEMM  the kernels alone (bench/int8_gemm_bench.c): float32 lv_cpu_gemm against every
#         int8 path the CPU has, on decoder-step and encoder shapes, us per call and GOP/s.
# Each: median and spread (min..max) of the runs, peak RSS (/usr/bin/time, max over runs),
# the files' sizes, and the int8 path picked (LINGVOC_INT8 as set, default the CPU's best).
# Usage: bench/bench_int8.sh
#   MT_LOGDIR (/tmp/q/transformer) MT_MODEL (TransformerSmall) MT_CKPT (its latest; copied
#   first, so a running trainer can rotate its checkpoints), LINES (100: MT and PUNCT),
#   RUNS (5), THREADS (2), PUNCT_LOGDIR (none: no PUNCT), PUNCT_MODEL, PUNCT_DATA,
#   LM_MODEL (RnnLmSmall; TransformerLmSmall also works), LM_LOGDIR (none: trains LM_STEPS (40)
#   steps of it here on $LM_DATA/train.txt; speed does not depend on the weights' quality),
#   LM_DATA (/tmp/lm_bible: scripts/prepare_lm_bible.sh), LM_SPLIT (dev; test for a quality
#   figure), LM_LINES (200).
#   ASR   (with ASR_LOGDIR, a trained speech model's log dir) ASR_MODEL
#         (asr.synth_en.LasSmall) --decode_audio=@LIST on the first ASR_LINES (50) lines of
#         ASR_TSV (/tmp/asr_synth/test_bible.tsv: path<TAB>transcript, paths relative to
#         its directory): real-time factor (wall time of the whole run, model load
#         included, over the audio's seconds) and WER against the transcripts (the
#         decoder's text upper-cased, as the corpus writes them).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5} LINES=${LINES:-100} THREADS=${THREADS:-2}
MT_LOGDIR=${MT_LOGDIR:-/tmp/q/transformer} MT_MODEL=${MT_MODEL:-TransformerSmall}
PUNCT_MODEL=${PUNCT_MODEL:-RNMTModelSmall} PUNCT_DATA=${PUNCT_DATA:-/tmp/punctuator_data}
LM_MODEL=${LM_MODEL:-RnnLmSmall} LM_DATA=${LM_DATA:-/tmp/lm_bible} LM_LINES=${LM_LINES:-200} LM_STEPS=${LM_STEPS:-40}
LM_SPLIT=${LM_SPLIT:-dev}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
make -s -j2 bin/export bin/decoder bin/trainer bin/sacrebleu_score bin/punct_score
. bench/build.sh
bench_build int8_gemm_bench
tmp=$(mktemp -d /tmp/bench_int8.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# stats FILE [DIGITS]: "median (min..max)" of the numbers in FILE, one a line, DIGITS
# (default 2) after the point.
stats() { sort -g "$1" | awk -v p="${2:-2}" '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                                                   f = "%." p "f"; printf f " (" f ".." f ")", m, v[1], v[NR] }'; }
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# timed KIND NAME CMD...: runs CMD, appends its wall seconds to $tmp/KIND.NAME.s and its
# peak RSS (KB) to $tmp/KIND.NAME.rss; stdout to $tmp/KIND.NAME.out.
timed() {
  local kind=$1 name=$2; shift 2
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$@" >"$tmp/$kind.$name.out" 2>"$tmp/err" ||
    { echo "bench_int8.sh: $kind $name failed: $(tail -3 "$tmp/err")" >&2; exit 1; }
  read -r s rss <"$tmp/time"
  echo "$s" >>"$tmp/$kind.$name.s"
  echo "$rss" >>"$tmp/$kind.$name.rss"
}
maxof() { sort -g "$1" | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "# bench_int8.sh $(date -u +%FT%TZ) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg), THREADS=$THREADS, LINGVOC_INT8=${LINGVOC_INT8:-(best)}"
grep -qw avx512_vnni /proc/cpuinfo && echo "# this CPU has AVX-512 VNNI" || echo "# this CPU has no AVX-512 VNNI"

# text_bench KIND MODEL LOGDIR CKPT IN REF: bin/export of LOGDIR's checkpoint CKPT (its
# latest when empty; copied first, so a running trainer can rotate its checkpoints) float32
# and int8, RUNS interleaved --decode_text runs of each on the first LINES lines of IN, and
# the table: sentences/s, output words/s, peak RSS and the quality against the first LINES
# lines of REF (MT: sacrebleu BLEU; punctuator: punct_score's BLEU and exact match).
text_bench() {
  local kind=$1 M=$2 logdir=$3 ck=$4 in=$5 ref=$6 q
  [ -n "$ck" ] || ck=$logdir/train/$(sed -n 's/^model_checkpoint_path: "\(.*\)"/\1/p' "$logdir/train/checkpoint")
  mkdir -p "$tmp/$kind/train"
  cp "$ck".* "$tmp/$kind/train/"
  ck=$tmp/$kind/train/$(basename "$ck")
  bin/export --model="$M" --logdir="$tmp/$kind" --checkpoint="$ck" --out="$tmp/$kind.f32.lvm" >/dev/null
  bin/export --model="$M" --logdir="$tmp/$kind" --checkpoint="$ck" --quantize=int8 --out="$tmp/$kind.int8.lvm" >/dev/null
  head -"$LINES" "$in" >"$tmp/$kind.in"
  head -"$LINES" "$ref" >"$tmp/$kind.ref"
  for r in $(seq "$RUNS"); do
    for q in f32 int8; do
      timed "$kind" $q bin/decoder --model_file="$tmp/$kind.$q.lvm" --decode_text="$tmp/$kind.in" --num_threads="$THREADS"
    done
  done
  echo
  echo "## $kind $M ($(basename "$ck"), beam search, $(wc -l <"$tmp/$kind.in") lines of $in, $RUNS runs interleaved)"
  echo
  if [ "$kind" = punct ]; then
    echo "| file | bytes | sentences/s | output words/s | peak RSS (MB) | BLEU | exact match | , F1 | marks F1 | capitals F1 |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
  else
    echo "| file | bytes | sentences/s | target words/s | peak RSS (MB) | BLEU |"
    echo "|---|---|---|---|---|---|"
  fi
  for q in f32 int8; do
    local words score
    words=$(wc -w <"$tmp/$kind.$q.out")
    awk -v n="$LINES" '{ print n / $1 }' "$tmp/$kind.$q.s" >"$tmp/$kind.$q.sps"
    awk -v n="$words" '{ print n / $1 }' "$tmp/$kind.$q.s" >"$tmp/$kind.$q.wps"
    if [ "$kind" = punct ]; then
      bin/punct_score --ref="$tmp/$kind.ref" --hyp="$tmp/$kind.$q.out" >"$tmp/punct.$q.score"
      score=$(awk '/^BLEU =/ { b = $3 } /^exact match/ { e = $3 } $1 == "," { c = $7 } $1 == "marks" { m = $7 }
                   $1 == "Capital" { k = $7 } END { printf "%s | %s | %s | %s | %s", b, e, c, m, k }' "$tmp/punct.$q.score")
    else
      score=$(bin/sacrebleu_score --ref="$tmp/$kind.ref" --hyp="$tmp/$kind.$q.out" | awk '{ print $3 }')
    fi
    echo "| $q | $(wc -c <"$tmp/$kind.$q.lvm") | $(stats "$tmp/$kind.$q.sps") | $(stats "$tmp/$kind.$q.wps") |" \
      "$(awk '{ printf "%.0f", $1 / 1024 }' <<<"$(maxof "$tmp/$kind.$q.rss")") | $score |"
  done
  local same
  same=$(paste -d'\t' "$tmp/$kind.f32.out" "$tmp/$kind.int8.out" | awk -F'\t' '$1 == $2' | wc -l)
  echo
  echo "int8 / float32: speed $(ratio "$(median "$tmp/$kind.f32.s")" "$(median "$tmp/$kind.int8.s")")x (median wall times)," \
    "file $(ratio "$(wc -c <"$tmp/$kind.int8.lvm")" "$(wc -c <"$tmp/$kind.f32.lvm")")x," \
    "peak RSS $(ratio "$(maxof "$tmp/$kind.int8.rss")" "$(maxof "$tmp/$kind.f32.rss")")x; $same of $(wc -l <"$tmp/$kind.in") lines the same text"
}

# ---- MT ----
if [ -n "${MT_CKPT:-}" ] || [ -f "$MT_LOGDIR/train/checkpoint" ]; then
  text_bench mt "mt.bible_en_es.$MT_MODEL" "$MT_LOGDIR" "${MT_CKPT:-}" /tmp/bible/test.en /tmp/bible/test.es
else
  echo "SKIP MT: no $MT_LOGDIR/train/checkpoint (train mt.bible_en_es.$MT_MODEL there, or set MT_LOGDIR)"
fi

# ---- punctuator ----
if [ -n "${PUNCT_LOGDIR:-}" ]; then
  [ -f "$PUNCT_DATA/test.txt" ] || { echo "bench_int8.sh: no $PUNCT_DATA/test.txt (scripts/prepare_punctuator.sh)" >&2; exit 2; }
  text_bench punct "punctuator.codelab.$PUNCT_MODEL" "$PUNCT_LOGDIR" "" "$PUNCT_DATA/test.txt" "$PUNCT_DATA/test.txt"
fi

# ---- LM ----
if [ -f "$LM_DATA/$LM_SPLIT.txt" ]; then
  M=lm.bible.$LM_MODEL
  OV="input.file_pattern: \"text:$LM_DATA/train.txt\""
  lm_logdir=${LM_LOGDIR:-}
  if [ -z "$lm_logdir" ]; then
    lm_logdir=$tmp/lm
    bin/trainer --model=$M --logdir="$lm_logdir" \
      --model_params_override="$OV; train.max_steps: $LM_STEPS; train.save_interval_seconds: 100000" >"$tmp/train.log" 2>&1 ||
      { echo "bench_int8.sh: training $M failed: $(tail -3 "$tmp/train.log")" >&2; exit 1; }
  fi
  bin/export --model=$M --logdir="$lm_logdir" --model_params_override="$OV" --out="$tmp/lm.f32.lvm" >/dev/null
  bin/export --model=$M --logdir="$lm_logdir" --model_params_override="$OV" --quantize=int8 --out="$tmp/lm.int8.lvm" >/dev/null
  head -"$LM_LINES" "$LM_DATA/$LM_SPLIT.txt" >"$tmp/lm.in"
  for r in $(seq "$RUNS"); do
    for q in f32 int8; do
      timed lm $q bin/decoder --model_file="$tmp/lm.$q.lvm" --score_text="$tmp/lm.in" --num_threads="$THREADS"
    done
  done
  step=$(grep -o 'step [0-9]*' "$tmp/err" | head -1)
  echo
  echo "## LM $M (${lm_logdir#$tmp/}, $step; --score_text, $(wc -l <"$tmp/lm.in") lines of $LM_DATA/$LM_SPLIT.txt, $RUNS runs interleaved)"
  echo
  echo "| file | bytes | tokens/s | peak RSS (MB) | perplexity |"
  echo "|---|---|---|---|---|"
  for q in f32 int8; do
    toks=$(awk -F'\t' '!/^corpus/ { n += $2 } END { print n }' "$tmp/lm.$q.out")
    awk -v n="$toks" '{ print n / $1 }' "$tmp/lm.$q.s" >"$tmp/lm.$q.tps"
    echo "| $q | $(wc -c <"$tmp/lm.$q.lvm") | $(stats "$tmp/lm.$q.tps") |" \
      "$(awk '{ printf "%.0f", $1 / 1024 }' <<<"$(maxof "$tmp/lm.$q.rss")") | $(sed -n 's/.*perplexity \([0-9.]*\).*/\1/p' "$tmp/lm.$q.out") |"
  done
  echo
  echo "int8 / float32: speed $(ratio "$(median "$tmp/lm.f32.s")" "$(median "$tmp/lm.int8.s")")x (median wall times)," \
    "file $(ratio "$(wc -c <"$tmp/lm.int8.lvm")" "$(wc -c <"$tmp/lm.f32.lvm")")x," \
    "peak RSS $(ratio "$(maxof "$tmp/lm.int8.rss")" "$(maxof "$tmp/lm.f32.rss")")x"
else
  echo "SKIP LM: no $LM_DATA/$LM_SPLIT.txt (scripts/prepare_lm_bible.sh $LM_DATA)"
fi

# ---- ASR ----
if [ -n "${ASR_LOGDIR:-}" ]; then
  M=${ASR_MODEL:-asr.synth_en.LasSmall} TSV=${ASR_TSV:-/tmp/asr_synth/test_bible.tsv} AL=${ASR_LINES:-50}
  [ -f "$TSV" ] || { echo "bench_int8.sh: no $TSV" >&2; exit 2; }
  bin/export --model="$M" --logdir="$ASR_LOGDIR" --out="$tmp/asr.f32.lvm" >/dev/null
  bin/export --model="$M" --logdir="$ASR_LOGDIR" --quantize=int8 --out="$tmp/asr.int8.lvm" >/dev/null
  d=$(cd "$(dirname "$TSV")" && pwd)
  head -"$AL" "$TSV" | awk -F'\t' -v d="$d" '{ print ($1 ~ /^\// ? "" : d "/") $1 }' >"$tmp/asr.list"
  head -"$AL" "$TSV" | cut -f2 >"$tmp/asr.ref"
  secs=$(python3 -c 'import sys, wave
t = 0.0
for p in open(sys.argv[1]):
    with wave.open(p.strip()) as w: t += w.getnframes() / w.getframerate()
print("%.3f" % t)' "$tmp/asr.list")
  for r in $(seq "$RUNS"); do
    for q in f32 int8; do
      timed asr $q bin/decoder --model_file="$tmp/asr.$q.lvm" --decode_audio=@"$tmp/asr.list" --num_threads="$THREADS"
    done
  done
  echo
  echo "## ASR $M ($ASR_LOGDIR; --decode_audio, $AL utterances of $TSV, $secs s of audio, $RUNS runs interleaved)"
  echo
  echo "| file | bytes | real-time factor | peak RSS (MB) | WER |"
  echo "|---|---|---|---|---|"
  for q in f32 int8; do
    awk -v a="$secs" '{ print $1 / a }' "$tmp/asr.$q.s" >"$tmp/asr.$q.rtf"
    wer=$(cut -f2 "$tmp/asr.$q.out" | python3 -c 'import sys
def ed(a, b):
    d = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        p, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            p, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, p + (x != y))
    return d[len(b)]
hyp = [l.upper().split() for l in sys.stdin]
ref = [l.split() for l in open(sys.argv[1])]
assert len(hyp) == len(ref), (len(hyp), len(ref))
print("%.2f%%" % (100.0 * sum(ed(r, h) for r, h in zip(ref, hyp)) / sum(len(r) for r in ref)))' "$tmp/asr.ref")
    echo "| $q | $(wc -c <"$tmp/asr.$q.lvm") | $(stats "$tmp/asr.$q.rtf" 4) |" \
      "$(awk '{ printf "%.0f", $1 / 1024 }' <<<"$(maxof "$tmp/asr.$q.rss")") | $wer |"
  done
  same=$(paste -d'\t' <(cut -f2 "$tmp/asr.f32.out") <(cut -f2 "$tmp/asr.int8.out") | awk -F'\t' '$1 == $2' | wc -l)
  echo
  echo "int8 / float32: speed $(ratio "$(median "$tmp/asr.f32.s")" "$(median "$tmp/asr.int8.s")")x (median wall times)," \
    "file $(ratio "$(wc -c <"$tmp/asr.int8.lvm")" "$(wc -c <"$tmp/asr.f32.lvm")")x," \
    "peak RSS $(ratio "$(maxof "$tmp/asr.int8.rss")" "$(maxof "$tmp/asr.f32.rss")")x; $same of $AL transcripts the same"
fi

# ---- the GEMMs alone ----
echo
echo "## GEMM: float32 (lv_cpu_gemm) against int8 (lv_cpu_q8_gemm_with), $THREADS threads, median of $RUNS"
echo
"$bench_dir/int8_gemm_bench" "$THREADS" "$RUNS"
