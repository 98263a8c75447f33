#!/usr/bin/env bash
# Files other tools read (issue 43 part 5): scripts/lingvo_peer/check_files.py with the
# peers' Python (scripts/peers.sh; $PEERS_VENV or ~/.cache/lingvoc/peers) on tiny real runs
# (a 40-step LeNet5 on Fashion-MNIST and its evaler; the decoder on the golden Transformer
# and RNMT; a 60-step ASR model and its decoder; check_events' sample, the one histogram):
# TensorBoard (EventAccumulator and the tensorboard command's HTTP API) reads every summary
# as written, with the values of the trainer's log and the score files, and the histogram
# is TensorFlow's own of the same values; the decoder's BLEU equals Lingvo's BleuScorer and
# sacrebleu, its WER jiwer's; sacrebleu_score equals sacrebleu on real English text (GPL-3
# with edits) and the decoder's lines, with each option set. Tampered records must be
# caught. Skipped without the peers' venv.
. "$(dirname "$0")/lib.sh"
PY=${PEERS_VENV:-$HOME/.cache/lingvoc/peers}/bin/python
[ -x "$PY" ] || skip "no peers venv at $PY (scripts/peers.sh builds it)"
"$PY" -c 'import tensorboard, sacrebleu, jiwer, lingvo.core.scorers' 2>/dev/null ||
  skip "$PY lacks tensorboard/sacrebleu/jiwer/lingvo (scripts/peers.sh)"
export TF_CPP_MIN_LOG_LEVEL=2
CF=("$PY" "$LV_ROOT/scripts/lingvo_peer/check_files.py")
B=$LV_BIN
R=$T/runs
# peer WHAT ARGS...: one check_files.py run; its report goes to the test's output.
peer() {
  local what=$1; shift
  "${CF[@]}" "$@" >"$T/peer.out" 2>&1
  local rc=$?
  sed 's/^/  /' "$T/peer.out"
  check "$what" [ $rc -eq 0 ]
}

# 1. LeNet5 on Fashion-MNIST: 40 steps (summaries every 10), the evaler on 500 images.
ensure_fashion_mnist || { fail "keras2ckpt"; finish; exit 1; }
M=image.mnist.LeNet5Fashion
OV="input.ckpt: \"$FM\"; input.num_samples: 1000; input.batch_size: 32; train.max_steps: 40; train.summary_interval_steps: 10; train.save_interval_steps: 20"
expect_exit 0 "trainer: 40 steps of $M" "$B/trainer" --model=$M --logdir="$R/mnist" --log_interval_steps=10 \
  --model_params_override="$OV"
cp "$T/err" "$T/mnist.log"
expect_exit 0 "evaler --once" "$B/evaler" --model=$M --logdir="$R/mnist" --once \
  --model_params_override="$OV; input.num_samples: 500"
if [ -x "${LV_BUILD:-$LV_ROOT/build}/tests/check_events" ]; then
  expect_exit 0 "check_events --write (scalars, image, text, histogram)" \
    "${LV_BUILD:-$LV_ROOT/build}/tests/check_events" --write "$R/mnist/sample"
else
  skip_part "no build/tests/check_events: no histogram event to read"
fi

# 2. The decoder on the golden Transformer and RNMT (20 sentence pairs, beam 4).
. "$LV_ROOT/tests/data/decode_golden/models.sh"
for m in transformer rnmt; do
  expect_exit 0 "decoder --once on the golden $m" "$B/decoder" --model="$(golden_var MODEL $m)" \
    --logdir="$R/$m" --once --checkpoint="$G/$m/ckpt-00000020" --dataset=Train \
    --model_params_override="$(golden_var OV $m)"
done
MTD=$R/transformer/decoder_train

# 3. ASR: eight utterances spoken by espeak-ng, 60 steps of TinyTest, the decoder's WER.
ASRD=
if command -v espeak-ng >/dev/null && command -v sox >/dev/null; then
  mkdir -p "$T/wavs" "$T/rec"
  i=0
  for text in "yes go" "no stop" "up left" "down right" "go up" "stop down" "left yes" "right no"; do
    espeak-ng -v en-us -s 150 --stdout "$text" | sox -q -t wav - -r 16000 -c 1 -b 16 "$T/wavs/utt$i.wav" gain -2
    printf '%s/wavs/utt%d.wav\t%s\n' "$T" $i "$text" >>"$T/list.tsv"
    i=$((i + 1))
  done
  expect_exit 0 "create_asr_features" "$B/create_asr_features" --input_list="$T/list.tsv" --generate_tfrecords \
    --output_template="$T/rec/utt-%5.5d-of-%5.5d"
  AOV="input.file_pattern: \"$T/rec/utt@1\"; train.max_steps: 60; train.save_interval_steps: 1000; train.summary_interval_steps: 20; cluster.num_threads: 2"
  expect_exit 0 "trainer: 60 steps of asr.bible_tts.TinyTest" env LINGVOC_EXPERIMENTS="$LV_ROOT/experiments" \
    "$B/trainer" --model=asr.bible_tts.TinyTest --logdir="$R/asr" --log_interval_steps=20 --model_params_override="$AOV"
  cp "$T/err" "$T/asr.log"
  expect_exit 0 "decoder --once (ASR)" env LINGVOC_EXPERIMENTS="$LV_ROOT/experiments" "$B/decoder" \
    --model=asr.bible_tts.TinyTest --logdir="$R/asr" --dataset=Test --once --model_params_override="$AOV"
  ASRD=$R/asr/decoder_test
else
  skip_part "espeak-ng or sox not installed: no ASR run, no WER check"
fi

# 4. TensorBoard reads every run as lingvoc recorded it.
TL=(--train_log="mnist/train:$T/mnist.log")
[ -n "$ASRD" ] && TL+=(--train_log="asr/train:$T/asr.log")
peer "TensorBoard: EventAccumulator and the HTTP API read every summary as written and logged" \
  events "$R" "${TL[@]}" --http

if [ -d "$R/mnist/sample" ]; then
  awk 'BEGIN { for (i = 0; i < 100; i++) print i / 10 }' >"$T/hist.txt" # check_events' write_sample
  peer "the histogram = TensorFlow's tf.compat.v1.summary.histogram of the same values" histogram \
    "$R/mnist/sample" weights "$T/hist.txt"
fi

# 5. BLEU, sacrebleu_score and WER against Lingvo's scorer, sacrebleu and jiwer.
for m in transformer rnmt; do
  peer "decoder BLEU ($m) = Lingvo BleuScorer and sacrebleu" bleu "$R/$m"/decoder_train/decoder_out_000000020 \
    "$R/$m"/decoder_train/score-00000020.txt
done
grep '^ref: ' "$MTD"/decoder_out_000000020 | cut -c6- >"$T/mt.ref"
grep '^hyp 0: ' "$MTD"/decoder_out_000000020 | cut -d: -f3- | cut -c2- >"$T/mt.hyp"
check "decoder_out: one top hypothesis per reference" [ "$(wc -l <"$T/mt.ref")" -eq "$(wc -l <"$T/mt.hyp")" ]
peer "sacrebleu_score = sacrebleu on the decoder's lines" sacrebleu "$B" "$T/mt.hyp" "$T/mt.ref"
GPL=/usr/share/common-licenses/GPL-3
if [ -f "$GPL" ]; then
  grep -v '^[[:space:]]*$' "$GPL" | head -300 >"$T/ref.txt"
  # Edits a system might make: dropped and swapped words, case, punctuation, HTML entities.
  awk 'BEGIN { x = 11 } { n = split($0, w, " "); o = ""
    for (i = 1; i <= n; i++) { x = (x * 16807) % 2147483647; r = x % 20; t = w[i]
      if (r == 0) continue; if (r == 1 && i < n) { t = w[i + 1] " " w[i]; i++ }
      if (r == 2) t = tolower(t); if (r == 3) t = t "&quot;"; if (r == 4) t = "&amp; " t; if (r == 5) t = t ","
      o = o (o == "" ? "" : " ") t }
    print o }' "$T/ref.txt" >"$T/hyp.txt"
  awk 'BEGIN { x = 5 } { n = split($0, w, " "); o = ""
    for (i = 1; i <= n; i++) { x = (x * 16807) % 2147483647; if (x % 9) o = o (o == "" ? "" : " ") w[i] }
    print o }' "$T/ref.txt" >"$T/ref2.txt"
  awk 'NR > 20 && NR <= 26 { print $2, $1, $3 }' "$T/ref.txt" >"$T/short.hyp"
  awk 'NR > 20 && NR <= 26 { print $1, $2, $3 }' "$T/ref.txt" >"$T/short.ref"
  peer "sacrebleu_score = sacrebleu on 300 lines of GPL-3, one reference" sacrebleu "$B" "$T/hyp.txt" "$T/ref.txt"
  peer "sacrebleu_score = sacrebleu, two references" sacrebleu "$B" "$T/hyp.txt" "$T/ref.txt,$T/ref2.txt"
  peer "sacrebleu_score = sacrebleu on 6 short lines (smoothing, effective order)" sacrebleu "$B" "$T/short.hyp" \
    "$T/short.ref"
else
  skip_part "no $GPL: sacrebleu_score checked on the decoder's lines only"
fi
if [ -n "$ASRD" ]; then
  peer "decoder WER = jiwer, error split = Lingvo's LevenshteinDistance" wer "$ASRD"/decoder_out_000000060 \
    "$ASRD"/score-00000060.txt
fi

# 6. A disagreement is caught: a score file and a trainer log line that differ from the events.
mkdir -p "$T/bad/run"
cp -r "$R/mnist/eval_test" "$T/bad/run/"
sed -i 's/^accuracy: .*/accuracy: 0.123/' "$T/bad/run/eval_test"/score-*.txt
"${CF[@]}" events "$T/bad/run" >"$T/bad.out" 2>&1
check "a tampered eval score file fails (exit 1)" [ $? -eq 1 ]
check "... naming accuracy" grep -q '^DISAGREE: eval_test: accuracy at step 40' "$T/bad.out"
sed 's/ loss:[0-9.e+-]*/ loss:9.5/' "$T/mnist.log" >"$T/bad.log"
cp -r "$R/mnist/train" "$T/bad/run/"
"${CF[@]}" events "$T/bad/run" --train_log="train:$T/bad.log" >"$T/bad.out" 2>&1
check "a trainer log that differs fails (exit 1), naming loss" grep -q '^DISAGREE: train: loss at step 10' "$T/bad.out"
if [ -n "$ASRD" ]; then
  # The tampered figure is the true one plus 0.25 (a fixed value could equal the true WER on some CPU:
  # CI's run decoded to exactly 0.5).
  awk '/^norm_wer: / { printf "norm_wer: %.6f\n", $2 + 0.25; next } { print }' \
    "$ASRD"/score-00000060.txt >"$T/bad_score.txt"
  "${CF[@]}" wer "$ASRD"/decoder_out_000000060 "$T/bad_score.txt" >"$T/bad.out" 2>&1
  check "a WER that differs from jiwer fails (exit 1)" [ $? -eq 1 ]
fi
finish
