#!/usr/bin/env bash
# lingvoc against CTranslate2 (issue 46): the same trained mt.bible_en_es.TransformerSmall,
# lingvoc's checkpoint converted to a CTranslate2 model by bench/ct2_convert.py (mapping
# and its one architectural difference in that file's header), the same Test lines, beam,
# threads and batch (one sentence at a time, as bin/decoder --decode_text):
#   lv f32    bin/decoder --model_file (bin/export, float32) --decode_text --num_threads
#   lv int8   the same with bin/export --quantize=int8
#   ct2 f32   bench/ct2_translate.py, compute_type float32, intra_threads THREADS, inter 1
#   ct2 int8  the same, compute_type int8 (CTranslate2 quantizes the weights at load)
# RUNS interleaved runs of the four; per system the median and spread (min..max) of the
# whole process' wall time (model load and, for CTranslate2, Python's start included),
# CTranslate2's own translate_batch time beside it, target tokens/s (the outputs encoded
# back into wordpieces + </s>, the same count for every system), peak RSS (/usr/bin/time),
# sacrebleu BLEU against the references (bin/sacrebleu_score), and how many lines are the
# same text as lingvoc float32's.
# Beam: lingvoc's experiment (num_hyps_per_beam 8, length_normalization 0.5 in Lingvo's
# ((5 + len) / 5) ** a form, beam_size 3.0 score window, EOS within 5.0 of the best logit);
# CTranslate2 gets beam_size BEAM and length_penalty LP (its len ** LP form; it has no
# score window or EOS rule), max_decoding_length 150 (target_seq_len).
# CTranslate2 computes the same function only for a model trained with
# add_unnormalized_input true in both stacks (bench/ct2_convert.py's header; the converter's
# verdict is printed); for TransformerSmall as configured (Lingvo's normalized residual) the
# CTranslate2 rows are its nearest model, not the same translations.
# Usage: bench/bench_ct2.sh
#   MODEL (mt.bible_en_es.TransformerSmall), OVERRIDE (--model_params_override for bin/export:
#   the overrides the checkpoint was trained with), MT_LOGDIR (/tmp/q/transformer) MT_CKPT (its latest; copied first, so a running trainer
#   can rotate its checkpoints), SRC (/tmp/bible/test.en), REF (/tmp/bible/test.es),
#   VOCAB (/tmp/bible/wpm.voc), LINES (all), RUNS (5), THREADS (2), BEAM (8), LP (0.5),
#   PEERS_VENV (~/.cache/lingvoc/peers: scripts/peers.sh installs ctranslate2 there).
# Exits 77 (skipped) when the peers venv, ctranslate2 or the checkpoint is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5} THREADS=${THREADS:-2} BEAM=${BEAM:-8} LP=${LP:-0.5}
MT_LOGDIR=${MT_LOGDIR:-/tmp/q/transformer}
SRC=${SRC:-/tmp/bible/test.en} REF=${REF:-/tmp/bible/test.es} VOCAB=${VOCAB:-/tmp/bible/wpm.voc}
PEERS=${PEERS_VENV:-$HOME/.cache/lingvoc/peers}
py=$PEERS/bin/python
if ! [ -x "$py" ] || ! "$py" -c 'import ctranslate2, numpy' 2>/dev/null; then
  echo "SKIP bench_ct2.sh: no ctranslate2 in $PEERS (scripts/peers.sh installs it)"
  exit 77
fi
if [ -z "${MT_CKPT:-}" ] && ! [ -f "$MT_LOGDIR/train/checkpoint" ]; then
  echo "SKIP bench_ct2.sh: no $MT_LOGDIR/train/checkpoint (train mt.bible_en_es.TransformerSmall there, or set MT_LOGDIR / MT_CKPT)"
  exit 77
fi
for f in "$SRC" "$REF" "$VOCAB"; do
  [ -f "$f" ] || { echo "SKIP bench_ct2.sh: no $f (scripts/prepare_bible_en_es.sh /tmp/bible)"; exit 77; }
done
. bench/peer_env.sh
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS PYTHONDONTWRITEBYTECODE=1
make -s -j2 bin/export bin/decoder bin/sacrebleu_score
tmp=$(mktemp -d /tmp/bench_ct2.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# stats FILE: "median (min..max)" of the numbers in FILE, one a line.
stats() { sort -g "$1" | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                                                   printf "%.2f (%.2f..%.2f)", m, v[1], v[NR] }'; }
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
maxof() { sort -g "$1" | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# timed NAME CMD...: runs CMD, appends its wall seconds to $tmp/NAME.s and its peak RSS
# (KB) to $tmp/NAME.rss; stdout to $tmp/NAME.out, stderr to $tmp/NAME.err.
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
    { echo "bench_ct2.sh: $name failed: $(tail -3 "$tmp/$name.err")" >&2; exit 1; }
  read -r s rss <"$tmp/time"
  echo "$s" >>"$tmp/$name.s"
  echo "$rss" >>"$tmp/$name.rss"
}

ck=${MT_CKPT:-$MT_LOGDIR/train/$(sed -n 's/^model_checkpoint_path: "\(.*\)"/\1/p' "$MT_LOGDIR/train/checkpoint")}
mkdir -p "$tmp/mt/train"
cp "$ck".* "$tmp/mt/train/"
ck=$tmp/mt/train/$(basename "$ck")
M=${MODEL:-mt.bible_en_es.TransformerSmall}
ov=(); [ -n "${OVERRIDE:-}" ] && ov=(--model_params_override="$OVERRIDE")
bin/export --model="$M" "${ov[@]}" --logdir="$tmp/mt" --checkpoint="$ck" --out="$tmp/f32.lvm" >/dev/null
bin/export --model="$M" "${ov[@]}" --logdir="$tmp/mt" --checkpoint="$ck" --quantize=int8 --out="$tmp/int8.lvm" >/dev/null
"$py" bench/ct2_convert.py "$ck" "$VOCAB" "$tmp/ct2" 2>"$tmp/convert.err" ||
  { echo "bench_ct2.sh: ct2_convert.py failed: $(tail -3 "$tmp/convert.err")" >&2; exit 1; }
verdict=$(grep -o 'add_unnormalized_input.*' "$tmp/convert.err" | tail -1)
if [ -n "${LINES:-}" ]; then
  head -"$LINES" "$SRC" >"$tmp/in"
  head -"$LINES" "$REF" >"$tmp/ref"
else
  cp "$SRC" "$tmp/in"
  cp "$REF" "$tmp/ref"
fi
n=$(wc -l <"$tmp/in")

echo "# bench_ct2.sh $(date -u +%FT%TZ) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg), THREADS=$THREADS, BEAM=$BEAM, LP=$LP," \
  "ctranslate2 $("$py" -c 'import ctranslate2; print(ctranslate2.__version__)')"
systems=(lv_f32 lv_int8 ct2_f32 ct2_int8)
for r in $(seq "$RUNS"); do
  timed lv_f32 bin/decoder --model_file="$tmp/f32.lvm" --decode_text="$tmp/in" --num_threads="$THREADS"
  timed lv_int8 bin/decoder --model_file="$tmp/int8.lvm" --decode_text="$tmp/in" --num_threads="$THREADS"
  for q in f32 int8; do
    ct=$q; [ $q = f32 ] && ct=float32
    timed ct2_$q "$py" bench/ct2_translate.py "$tmp/ct2" "$VOCAB" "$tmp/in" $ct "$THREADS" "$BEAM" "$LP"
    sed -n 's/.*translate_s=\([0-9.]*\).*/\1/p' "$tmp/ct2_$q.err" >>"$tmp/ct2_$q.ts"
  done
done

echo
echo "## $M ($(basename "$ck")): $n lines of $SRC, beam $BEAM, $THREADS threads, one sentence at a time, $RUNS runs interleaved"
echo
echo "ct2_convert.py: $verdict"
echo
echo "| system | wall s | translate_batch s | target tokens/s (wall) | peak RSS (MB) | BLEU | lines = lv f32 |"
echo "|---|---|---|---|---|---|---|"
for s in "${systems[@]}"; do
  toks=$("$py" bench/ct2_convert.py --encode "$VOCAB" <"$tmp/$s.out" | wc -w)
  awk -v t="$toks" '{ print t / $1 }' "$tmp/$s.s" >"$tmp/$s.tps"
  bleu=$(bin/sacrebleu_score --ref="$tmp/ref" --hyp="$tmp/$s.out" | awk '{ print $3 }')
  same=$(paste -d'\t' "$tmp/lv_f32.out" "$tmp/$s.out" | awk -F'\t' '$1 == $2' | wc -l)
  ts=-; [ -f "$tmp/$s.ts" ] && ts=$(stats "$tmp/$s.ts")
  echo "| ${s/_/ } | $(stats "$tmp/$s.s") | $ts | $(stats "$tmp/$s.tps") |" \
    "$(awk '{ printf "%.0f", $1 / 1024 }' <<<"$(maxof "$tmp/$s.rss")") | $bleu | $same |"
done
echo
echo "lv int8 / ct2 int8 speed (median wall): $(ratio "$(median "$tmp/ct2_int8.s")" "$(median "$tmp/lv_int8.s")")x;" \
  "lv f32 / ct2 f32: $(ratio "$(median "$tmp/ct2_f32.s")" "$(median "$tmp/lv_f32.s")")x (above 1: lingvoc faster)"
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP"
  for s in "${systems[@]}"; do cp "$tmp/$s.out" "$KEEP/$s.out"; done
  echo "outputs kept in $KEEP"
fi
