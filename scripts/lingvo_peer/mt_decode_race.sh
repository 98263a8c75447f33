#!/usr/bin/env bash
# Decoding speed of real Lingvo's decoder job against lingvoc's, on one trained checkpoint
# of mt.bible_en_es.TransformerSmall (lingvoc's, which Lingvo restores as it is), the Bible
# Test set, the experiment's beam search, the same machine and cores, RUNS alternating
# runs. Each side's own figure: examples/sec of its decoding loop as its score file and
# log report it (Lingvo's DecodeCheckpoint times from the first batch to the last, after
# the restore; lingvoc's decoder the same), beside the whole job's wall time (start-up,
# graph building and restore included) and peak RSS (/usr/bin/time). Also: both score
# files' corpus_bleu and how many top-1 hypotheses are the same text.
#
#   scripts/lingvo_peer/mt_decode_race.sh      # MT_LOGDIR=/tmp/q/transformer BIBLE=/tmp/bible RUNS=3
#
# MT_LOGDIR: a lingvoc log dir of TransformerSmall (its latest checkpoint; MT_CKPT picks
# another); BIBLE: scripts/prepare_bible_en_es.sh's output (test.tfrecord, wpm.voc).
# WORK (/tmp/lingvo_peer_mt_decode) holds the runs and report.md. Needs the peers' venv
# (scripts/peers.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=${RUNS:-3} WORK=${WORK:-/tmp/lingvo_peer_mt_decode} BIBLE=${BIBLE:-/tmp/bible}
MT_LOGDIR=${MT_LOGDIR:-/tmp/q/transformer} M=mt.bible_en_es.TransformerSmall
BIN=${LV_BIN:-$ROOT/bin}
export LINGVOC_EXPERIMENTS=${LINGVOC_EXPERIMENTS:-$ROOT/experiments}
for f in "$BIBLE/test.tfrecord-00000-of-00001" "$BIBLE/wpm.voc"; do
  [ -f "$f" ] || { echo "mt_decode_race.sh: no $f (scripts/prepare_bible_en_es.sh $BIBLE)" >&2; exit 2; }
done
if [ -z "${MT_CKPT:-}" ] && ! [ -f "$MT_LOGDIR/train/checkpoint" ]; then
  echo "mt_decode_race.sh: no $MT_LOGDIR/train/checkpoint (train $M there, or set MT_LOGDIR / MT_CKPT)" >&2
  exit 2
fi
ck=${MT_CKPT:-$MT_LOGDIR/train/$(sed -n 's/^model_checkpoint_path: "\(.*\)"/\1/p' "$MT_LOGDIR/train/checkpoint")}
ls "$ck".index >/dev/null
rm -rf "$WORK"; mkdir -p "$WORK/ckpt"
cp "$ck".index "$ck".data-* "$WORK/ckpt/"
ck=$WORK/ckpt/$(basename "$ck")
cd "$WORK"
. "$ROOT/scripts/lingvo_peer/lib.sh"
step=$("$BIN/ckpt_inspect" --file_name="$ck" --tensor_name=global_step 2>/dev/null | grep -o '[0-9][0-9]*' | tail -1)
[ -n "$step" ] || { echo "mt_decode_race.sh: no global_step in $ck" >&2; exit 1; }
logdir() { # DIR: a log dir holding only the checkpoint
  rm -rf "$1"; mkdir -p "$1/train"; cp "$ck".index "$ck".data-* "$1/train/"
  printf 'model_checkpoint_path: "%s"\n' "$(basename "$ck")" >"$1/train/checkpoint"
}
say "# Decoding $M, step $step: $(versions) and lingvoc, $(nproc) cores, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
: >lingvo.runs; : >lingvoc.runs
for r in $(seq "$RUNS"); do
  logdir "$WORK/lv_$r"
  # Lingvo 0.14 has no decoder_once job: decoder_test stops after the max_steps checkpoint.
  /usr/bin/time -f "%e %M" -o "time_lv_$r" env LINGVO_PEER_MT_DATA="$BIBLE" "$PY" "$ROOT/scripts/lingvo_peer/run.py" \
    trainer --model=$M --run_locally=cpu --mode=sync --logdir="$WORK/lv_$r" --job=decoder_test \
    --model_params_override="train.max_steps: $step; task.train.max_steps: $step" >"lv_$r.log" 2>&1 ||
    { echo "mt_decode_race.sh: Lingvo's decoder failed: $(tail -3 "lv_$r.log")" >&2; exit 1; }
  logdir "$WORK/lc_$r"
  /usr/bin/time -f "%e %M" -o "time_lc_$r" "$BIN/decoder" --model=$M --logdir="$WORK/lc_$r" --dataset=Test --once \
    --model_params_override="input.file_pattern: tfrecord:$BIBLE/test.tfrecord-00000-of-00001; input.tokenizer.vocab_filepath: $BIBLE/wpm.voc" \
    >"lc_$r.log" 2>&1 || { echo "mt_decode_race.sh: lingvoc's decoder failed: $(tail -3 "lc_$r.log")" >&2; exit 1; }
  lv_sc=$(ls "lv_$r"/decoder_test/score-*.txt) lc_sc=$(ls "lc_$r"/decoder_test/score-*.txt)
  lv_eps=$(sed -n 's/^examples\/sec: //p' "$lv_sc")
  lc_eps=$(grep -o '[0-9.]* examples/sec)' "lc_$r.log" | tail -1 | cut -d' ' -f1)
  echo "$lv_eps $(cat "time_lv_$r")" >>lingvo.runs
  echo "$lc_eps $(cat "time_lc_$r")" >>lingvoc.runs
  say "run $r: Lingvo $lv_eps examples/s (job $(cut -d' ' -f1 "time_lv_$r") s, $(( $(cut -d' ' -f2 "time_lv_$r") / 1024 )) MiB)," \
    "lingvoc $lc_eps examples/s (job $(cut -d' ' -f1 "time_lc_$r") s, $(( $(cut -d' ' -f2 "time_lc_$r") / 1024 )) MiB)"
done
hyps_lingvo lv_1.log | awk -F'\t' '$2 == 0' | cut -f1,4 | sort >top_lingvo.tsv
hyps_lingvoc "$(ls lc_1/decoder_test/decoder_out_* | head -1)" | awk -F'\t' '$2 == 0' | cut -f1,4 | sort >top_lingvoc.tsv
n=$(wc -l <top_lingvoc.tsv) same=$(comm -12 top_lingvo.tsv top_lingvoc.tsv | wc -l)
lv=$(cut -d' ' -f1 lingvo.runs | median) lc=$(cut -d' ' -f1 lingvoc.runs | median)
say ""
say "| | Lingvo | lingvoc | ratio |"
say "|---|---|---|---|"
say "| decoding examples/s (median of $RUNS [min-max]) | $lv [$(cut -d' ' -f1 lingvo.runs | spread)] | $lc [$(cut -d' ' -f1 lingvoc.runs | spread)] | **$(awk -v a="$lc" -v b="$lv" 'BEGIN { printf "%.2fx", a / b }')** |"
say "| whole job, s (median) | $(cut -d' ' -f2 lingvo.runs | median) | $(cut -d' ' -f2 lingvoc.runs | median) | |"
say "| peak RSS, MiB (median) | $(( $(cut -d' ' -f3 lingvo.runs | median) / 1024 )) | $(( $(cut -d' ' -f3 lingvoc.runs | median) / 1024 )) | |"
say "| corpus_bleu (run 1) | $(file_metric "$(ls lv_1/decoder_test/score-*.txt)" corpus_bleu) | $(file_metric "$(ls lc_1/decoder_test/score-*.txt)" corpus_bleu) | |"
say ""
say "Top-1 hypotheses with the same text: $same of $n sources (run 1)."
echo "report: $R" >&2
