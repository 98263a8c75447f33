#!/usr/bin/env bash
# mt.model.TransformerModel through the real executables (a few seconds): a generated
# 200-line parallel corpus (word order reversed, syllables mapped) -> build_wpm_vocab.sh
# (128 pieces) -> wpm_encode_file -> bin/trainer runs 20 steps of
# mt.bible_en_es.TinyTest (loss falls, checkpoint written) -> bin/evaler --once on Dev
# writes a score file with Lingvo's MT metrics. Skips with one line when sentencepiece
# is not installed. A missing data file is a clear error naming the file pattern.
. "$(dirname "$0")/lib.sh"
for c in spm_train spm_export_vocab; do
  if ! command -v "$c" >/dev/null 2>&1; then
    skip "$c not installed (apt-get install sentencepiece)"
  fi
done
awk -v seed=7 -v lines=200 -v out="$T" 'BEGIN {
  ns = split("ka to ri en an do mi su ne lo pa ve ra", s, " ")
  split("ño la sé re el los ma ga di bre tar qué çi", t, " ")
  x = seed
  for (l = 0; l < lines; l++) {
    x = (x * 16807) % 2147483647; nw = 3 + x % 6; src = ""; tgt = ""
    for (w = 0; w < nw; w++) {
      x = (x * 16807) % 2147483647; k = 1 + x % 2; ws = ""; wt = ""
      for (j = 0; j < k; j++) { x = (x * 16807) % 2147483647; i = 1 + x % ns; ws = ws s[i]; wt = t[i] wt }
      src = src (w ? " " : "") ws; tgt = wt (w ? " " : "") tgt
    }
    f = (l % 10 == 9) ? "dev" : "train"
    print src "." > (out "/" f ".en"); print tgt "." > (out "/" f ".es")
  }
}'
expect_exit 0 "build_wpm_vocab.sh (128 pieces)" \
  sh "$LV_ROOT/scripts/build_wpm_vocab.sh" --input="$T/train.en,$T/train.es" --vocab_size=128 --out="$T/wpm.voc"
for f in train dev; do
  expect_exit 0 "wpm_encode_file $f" "$LV_BIN/wpm_encode_file" --source_filepaths="$T/$f.en" \
    --target_filepaths="$T/$f.es" --wpm_filepath="$T/wpm.voc" --output_filepath="$T/$f.tfrecord" --num_shards=1
done
M=mt.bible_en_es.TinyTest
expect_exit 2 "trainer without the data" "$LV_BIN/trainer" --model=$M --logdir="$T/none" \
  --model_params_override="input.file_pattern: $T/missing.tfrecord@1"
err_has "input.file_pattern"
err_has "$T/missing.tfrecord"
expect_exit 0 "trainer: 20 steps of $M" "$LV_BIN/trainer" --model=$M --logdir="$T/run" \
  --model_params_override="input.file_pattern: $T/train.tfrecord@1" --v=1
grep -o 'step *[0-9]*: loss [0-9.]*' "$T/err" >"$T/losses"
first=$(head -1 "$T/losses" | awk '{print $NF}')
last=$(tail -1 "$T/losses" | awk '{print $NF}')
check "20 steps logged" test "$(wc -l <"$T/losses")" -eq 20
check "loss falls ($first -> $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 0 && b < a - 0.5) }'
check "checkpoint at step 20" test -f "$T/run/train/ckpt-00000020.index"
# SIGKILL mid-run and restart: the same final weights and Adam slots as an uninterrupted
# run (the streaming input replays its batches up to the restored step; dropout is keyed
# by the step).
K="input.file_pattern: $T/train.tfrecord@1; train.max_steps: 40; train.save_interval_steps: 10"
expect_exit 0 "trainer: 40 steps uninterrupted" "$LV_BIN/trainer" --model=$M --logdir="$T/ka" --model_params_override="$K"
"$LV_BIN/trainer" --model=$M --logdir="$T/kb" --model_params_override="$K" >"$T/kb1.log" 2>&1 &
pid=$!
# A tiny model's 20 steps can take less than a poll: the trainer runs in 5 ms slices
# (SIGSTOP between them) until checkpoint 20 is there, so the kill comes before step 40.
for _ in $(seq 6000); do
  ckpt_listed "$T/kb/train" 20 && break
  kill -CONT $pid 2>/dev/null; sleep 0.005; kill -STOP $pid 2>/dev/null
done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
check "killed before the end" [ ! -f "$T/kb/train/ckpt-00000040.index" ]
expect_exit 0 "restart after kill -9" "$LV_BIN/trainer" --model=$M --logdir="$T/kb" --model_params_override="$K"
err_has "replayed"
ckpt_dump "$T/ka/train/ckpt-00000040" >"$T/wa"
ckpt_dump "$T/kb/train/ckpt-00000040" >"$T/wb"
check "dumps hold the Adam slots" grep -q 'tensor_name.*/Adam_1' "$T/wa"
check "same final weights and Adam slots after kill -9 and resume" cmp -s "$T/wa" "$T/wb"
# A step over grad_norm_to_clip_to_zero is skipped, and the warning names the variables
# with the largest gradients (where a spike comes from).
expect_exit 0 "trainer: 2 steps over grad_norm_to_clip_to_zero" "$LV_BIN/trainer" --model=$M --logdir="$T/clip" \
  --model_params_override="input.file_pattern: $T/train.tfrecord@1; train.max_steps: 2; task.train.grad_norm_to_clip_to_zero: 1e-6"
err_has "over grad_norm_to_clip_to_zero; largest: "
check "the warning names a variable" grep -q 'largest: [^ ]*/var [0-9.e+-]*, ' "$T/err"
expect_exit 0 "evaler --once on Dev" "$LV_BIN/evaler" --model=$M --logdir="$T/run" --dataset=Dev --once \
  --model_params_override="input.file_pattern: $T/dev.tfrecord@1"
check "no params warning when the job's model params are the trainer's" bash -c "! grep -q 'differ from this job' '$T/err'"
S=$T/run/eval_dev/score-00000020.txt
check "score file written" test -f "$S"
for tag in loss log_pplx fraction_of_correct_next_step_preds num_samples_in_batch; do
  check "score has $tag" grep -q "^$tag: " "$S"
done
check "eval loss finite and below ln(128)+1" awk '/^loss: / { exit !($2 > 0 && $2 < 5.85) }' "$S"
# A job whose model params differ from the trainer's (an override it was not given) is
# warned, with the key and both values.
expect_exit 0 "evaler --once with another per_word_avg_loss" "$LV_BIN/evaler" --model=$M --logdir="$T/run" \
  --dataset=Dev --once --model_params_override="input.file_pattern: $T/dev.tfrecord@1; task.decoder.per_word_avg_loss: False"
err_has "was trained with model params that differ from this job's in 1 key: task.decoder.per_word_avg_loss : True (here: False)"
finish
