#!/usr/bin/env bash
# lm.model.LanguageModel through the real executables on generated text: a missing data
# file is exit 2 naming it; RnnLmTinyTest and TransformerLmTinyTest train 200 steps (loss
# falls); the evaler reports Lingvo's LM metrics on Dev; bin/decoder --score_text's corpus
# log_pplx equals the evaler's; --sample is deterministic for a seed; kill -9 and resume is
# bit-identical (with a sampled softmax); the one_billion_wds params load and exit 2 without
# their data. A UTF-16 text file is exit 2 naming its line (a NUL byte); a line of 10 MB
# costs about its size in memory, once.
. "$(dirname "$0")/lib.sh"
awk -v out="$T" 'BEGIN { n = split("the lord said unto moses and aaron speak to the children of israel saying this is the thing which god hath commanded", w, " "); x = 7
  for (l = 0; l < 400; l++) { x = (x * 16807) % 2147483647; nw = 3 + x % 8; s = ""; st = 1 + x % n
    for (i = 0; i < nw; i++) s = s (i ? " " : "") w[1 + (st + i - 1) % n]
    print s "." > (out "/" (l % 10 == 9 ? "dev.txt" : "train.txt")) } }'
TR="input.file_pattern: \"text:$T/train.txt\""
DV="input.file_pattern: \"text:$T/dev.txt\""
expect_exit 2 "trainer without the data" "$LV_BIN/trainer" --model=lm.bible.RnnLmTinyTest --logdir="$T/none" \
  --model_params_override="input.file_pattern: \"text:$T/missing.txt\""
err_has "$T/missing.txt"
err_has "experiments/lm/bible.cfg"
# A UTF-16 file (NUL bytes throughout) is exit 2 naming the file and line, in training and
# evaluation, not empty lines trained on.
printf '\xff\xfeh\0i\0\n\0' >"$T/utf16.txt"
U16="input.file_pattern: \"text:$T/utf16.txt\"; train.max_steps: 2"
expect_exit 2 "trainer on a UTF-16 file" "$LV_BIN/trainer" --model=lm.bible.RnnLmTinyTest --logdir="$T/utf16" \
  --model_params_override="$U16"
err_has "$T/utf16.txt:1: a NUL byte at column 4"
expect_exit 2 "evaler on a UTF-16 file" "$LV_BIN/evaler" --model=lm.bible.RnnLmTinyTest --logdir="$T/utf16" \
  --dataset=Dev --once --model_params_override="$U16"
err_has "$T/utf16.txt:1: a NUL byte at column 4"
# A line of 10 MB with two words costs its text about once, not per copy and per id: the
# trainer's peak RSS is within 30 MB of a run whose long line is 1 KB (it was 75-110 MB
# over, and grew with the line).
if [ -x /usr/bin/time ]; then
  awk 'BEGIN { for (k = 0; k < 2; k++) { s = "a"; while (length(s) < (k ? 5000000 : 500)) s = s s
      print substr(s, 1, k ? 5000000 : 500) " " substr(s, 1, k ? 5000000 : 500) > (ARGV[1] "/long" k ".txt") }
    for (i = 0; i < 50; i++) for (k = 0; k < 2; k++) print "the lord said unto moses" > (ARGV[1] "/long" k ".txt") }' "$T"
  for k in 0 1; do
    expect_exit 0 "trainer: 3 steps with a line of $([ $k = 1 ] && echo 10 MB || echo 1 KB)" /usr/bin/time -v \
      -o "$T/time$k" "$LV_BIN/trainer" --model=lm.bible.RnnLmTinyTest --logdir="$T/long$k" \
      --model_params_override="input.file_pattern: \"text:$T/long$k.txt\"; train.max_steps: 3"
  done
  r0=$(awk '/Maximum resident set size/ { print int($NF / 1024) }' "$T/time0")
  r1=$(awk '/Maximum resident set size/ { print int($NF / 1024) }' "$T/time1")
  if asan_build; then
    skip_part "peak RSS with a 10 MB line: a sanitizer build's RSS holds ASan's shadow memory (${r1} against ${r0} MB)"
  else
    check "peak RSS with a 10 MB line ${r1} MB <= ${r0} MB + 30 MB" test "${r1:-999999}" -le $((${r0:-0} + 30))
  fi
else
  skip_part "/usr/bin/time is missing: the long line's peak RSS not checked"
fi
for M in RnnLmTinyTest TransformerLmTinyTest; do
  expect_exit 0 "trainer: 200 steps of $M" "$LV_BIN/trainer" --model=lm.bible.$M --logdir="$T/$M" --model_params_override="$TR"
  grep -o 'log_pplx:[0-9.]*' "$T/err" | cut -d: -f2 >"$T/l"
  first=$(head -1 "$T/l"); last=$(tail -1 "$T/l")
  check "$M: log_pplx falls ($first -> $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'
  expect_exit 0 "evaler on Dev" "$LV_BIN/evaler" --model=lm.bible.$M --logdir="$T/$M" --dataset=Dev --once \
    --model_params_override="$DV"
  sc="$T/$M/eval_dev/score-00000200.txt"
  for k in log_pplx log_pplx_per_word num_predictions num_words; do check "$M: evaler reports $k" grep -q "^$k: " "$sc"; done
  ev=$(awk '$1 == "log_pplx:" { print $2 }' "$sc")
  expect_exit 0 "score_text" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" --dataset=Dev \
    --model_params_override="$DV" --score_text="$T/dev.txt"
  check "$M: one line per input line and a corpus line" test "$(wc -l <"$T/out")" -eq 41
  dec=$(tail -1 "$T/out" | sed 's/.*log_pplx \([0-9.]*\),.*/\1/')
  check "$M: score_text log_pplx $dec = evaler's $ev" awk -v a="$dec" -v b="$ev" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'
  for i in 1 2; do
    expect_exit 0 "sample run $i" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" --dataset=Dev \
      --model_params_override="$DV" --sample=3 --prefix="the lord" --seed=9 --temperature=0.8
    cp "$T/out" "$T/sample$i"
  done
  check "$M: 3 samples" test "$(wc -l <"$T/sample1")" -eq 3
  check "$M: samples start with the prefix" test "$(grep -c '^the lord' "$T/sample1")" -eq 3
  check "$M: the same seed, the same samples" cmp -s "$T/sample1" "$T/sample2"
  check "$M: sampling settings are not model params that drifted" bash -c "! grep -q 'differ from this job' '$T/err'"
  # The sampling flags with --model_params_file_override (they were merged into
  # --model_params_override, which excludes it).
  echo "task.decoder.sample_max_length: 300" >"$T/ovr.txt"
  expect_exit 0 "sample with --model_params_file_override" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" \
    --dataset=Dev --model_params_file_override="$T/ovr.txt" --sample=3 --prefix="the lord" --seed=9 --temperature=0.8
  check "$M: 3 samples with a params file" test "$(wc -l <"$T/out")" -eq 3
  # A temperature so small that logits / T overflow (above 5.4): the argmax continuation, as top_k 1.
  for k in "--temperature=3e-308" "--top_k=1"; do
    expect_exit 0 "sample $k" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" --dataset=Dev \
      --model_params_override="$DV" --sample=2 --prefix="the lord" --seed=3 "$k"
    cp "$T/out" "$T/greedy${k%%=*}"
  done
  check "$M: a tiny temperature samples the argmax" cmp -s "$T/greedy--temperature" "$T/greedy--top_k"
done
# The sampling flags' bad values (each also a flag's "not given" default) and misuse.
M=RnnLmTinyTest
for bad in "--sample=0|--sample=0: expected" "--sample=2 --temperature=0|--temperature=0: expected a temperature > 0" \
  "--sample=2 --top_k=-3|--top_k=-3: expected >= 0" "--sample=2 --seed=-1|--seed=-1: expected >= 0" \
  "--temperature=0.5|go with --sample=N" "--score_text=|--score_text= is empty" \
  "--sample=2 --top_k=1000|sample_top_k (--top_k) = 1000: expected 0 (all tokens) to the vocabulary's 76"; do
  # shellcheck disable=SC2086
  expect_exit 2 "decoder ${bad%%|*}" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" --dataset=Dev \
    --model_params_override="$DV" ${bad%%|*}
  err_has "${bad#*|}"
done
check "no decoder job directory made by a bad --sample" test ! -e "$T/$M/decoder_dev"
# The prefix whole: without append_eos (the batch's ids then lack its last token), and
# one longer than input.target_max_length is an error, not a cut.
expect_exit 0 "sample without append_eos" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" --dataset=Dev \
  --model_params_override="$DV; input.tokenizer.append_eos: False" --sample=3 --prefix="the lord" --seed=9
check "the samples without append_eos start with the whole prefix" test "$(grep -c '^the lord' "$T/out")" -eq 3
expect_exit 2 "a prefix longer than target_max_length" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" \
  --dataset=Dev --model_params_override="$DV; input.target_max_length: 20" --sample=1 --prefix="the lord said unto moses and aaron"
err_has "--prefix: 35 tokens with <s>, more than input.target_max_length 20"
expect_exit 2 "sample_max_length beyond 2^20" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" --dataset=Dev \
  --model_params_override="$DV; task.decoder.sample_max_length: 4611686018427387904" --sample=1
err_has "task.decoder.sample_max_length = 4611686018427387904: expected 1 to 1048576 tokens"
expect_exit 2 "score_text on a missing file" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" --dataset=Dev \
  --model_params_override="$DV" --score_text="$T/no_such.txt"
err_has "--score_text=$T/no_such.txt: cannot open it"
: >"$T/empty.txt"
expect_exit 0 "score_text on an empty file" "$LV_BIN/decoder" --model=lm.bible.$M --logdir="$T/$M" --dataset=Dev \
  --model_params_override="$DV" --score_text="$T/empty.txt"
check "an empty file has no perplexity (not 1)" grep -q "^corpus: 0 lines, 0 tokens, log_pplx nan, perplexity nan$" "$T/out"
head -c 300 /dev/zero | tr '\0' 'a' >"$T/long.txt"
expect_exit 0 "score_text on a line longer than target_max_length" "$LV_BIN/decoder" --model=lm.bible.$M \
  --logdir="$T/$M" --dataset=Dev --model_params_override="$DV" --score_text="$T/long.txt"
err_has "score_text: line 1: 301 tokens, more than input.target_max_length 256: only its first 256 are scored"
# A NUL byte or invalid UTF-8: no score (an empty line), not a score of other text.
printf 'the lord\nabc\0def\nthe \377 lord\nsaid\n' >"$T/bad.txt"
expect_exit 0 "score_text with a NUL byte and invalid UTF-8" "$LV_BIN/decoder" --model=lm.bible.$M \
  --logdir="$T/$M" --dataset=Dev --model_params_override="$DV" --score_text="$T/bad.txt"
check "4 output lines (the bad ones empty) and the corpus line" test "$(sed -n '2p;3p' "$T/out" | tr -d '\n')" = "" -a "$(wc -l <"$T/out")" -eq 5
check "the corpus line counts the 2 good lines" grep -q "^corpus: 2 lines," "$T/out"
err_has "score_text: line 2: a NUL byte at byte 3: not scored"
err_has "score_text: line 3: invalid UTF-8 at byte 4: not scored"
# SIGKILL mid-run and restart (RnnLmTinyTest with embedding dropout and a sampled softmax
# of 20 classes, both keyed by the step): the same final weights and Adam slots as an
# uninterrupted run.
M=lm.bible.RnnLmTinyTest
K="input.file_pattern: \"text:$T/train.txt\"; train.max_steps: 40; train.save_interval_steps: 10; task.lm.embedding_dropout_keep_prob: 0.9; task.lm.softmax.num_sampled: 20"
expect_exit 0 "trainer: 40 steps uninterrupted (sampled softmax)" "$LV_BIN/trainer" --model=$M --logdir="$T/ka" --model_params_override="$K"
"$LV_BIN/trainer" --model=$M --logdir="$T/kb" --model_params_override="$K" >"$T/kb1.log" 2>&1 &
pid=$!
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
check "dumps hold the softmax's Adam slots" grep -q 'tensor_name.*softmax/weight_0/var/Adam_1' "$T/wa"
check "same final weights and Adam slots after kill -9 and resume" cmp -s "$T/wa" "$T/wb"

# input.target_max_length as LmInput reads it: 0 is no limit for SentencePiece only.
expect_exit 2 "score_text with input.target_max_length 0 (ASCII tokenizer)" "$LV_BIN/decoder" \
  --model=lm.bible.RnnLmTinyTest --logdir="$T/RnnLmTinyTest" --dataset=Dev \
  --model_params_override="$DV; input.target_max_length: 0" --score_text="$T/dev.txt"
err_has "input.target_max_length must be in [1, 2^31)"
# Lingvo's one_billion_wds params load; without the data the trainer exits 2 naming the
# missing file and the recipe, before the model allocates its variables (the full-size
# one, whose variables take gigabytes, runs under a 1 GB address-space limit).
for M in WordLevelOneBwdsSimpleSampledSoftmax WordLevelOneBwdsSimpleSampledSoftmaxTiny; do
  expect_exit 0 "inspect_params of $M" "$LV_BIN/trainer" --model=lm.one_billion_wds.$M --mode=inspect_params --logdir="$T/p1b_$M"
  check "$M: num_sampled in the params" grep -q 'num_sampled *: *[18]' "$T/p1b_$M/train-params.txt"
done
expect_exit 2 "one_billion_wds Tiny without the data" "$LV_BIN/trainer" \
  --model=lm.one_billion_wds.WordLevelOneBwdsSimpleSampledSoftmaxTiny --logdir="$T/1b"
err_has "training-monolingual.tokenized.shuffled/news.en*"
err_has "experiments/lm/one_billion_wds.cfg"
# (A sanitizer build reserves terabytes of address space and cannot start under the limit.)
if (ulimit -v 1000000 && "$LV_BIN/trainer" --help >/dev/null 2>&1) 2>/dev/null; then
  expect_exit 2 "one_billion_wds full size without the data, in 1 GB of address space" bash -c \
    "ulimit -v 1000000 && exec '$LV_BIN/trainer' --model=lm.one_billion_wds.WordLevelOneBwdsSimpleSampledSoftmax --logdir='$T/1bf'"
  err_has "training-monolingual.tokenized.shuffled/news.en*"
  err_has "experiments/lm/one_billion_wds.cfg"
else
  skip_part "the trainer does not start under ulimit -v 1000000 (a sanitizer build reserves more)"
fi
# train.max_lstm_gradient_norm (Lingvo's LanguageModel.AdjustGradients): a tiny cap clips
# the cells' gradients, so the LSTM weights move less than without it; the softmax is
# not in the group. A TransformerLm has no lm.rnns: exit 2.
LSTM_W=lm/lm/rnns_0/wm/var
inspect() { "$LV_BIN/ckpt_inspect" --file_name="$1" --tensor_name="$2" --printoptions=threshold=100000000 | tail -n +2; }
for cap in 0 1e-4; do
  expect_exit 0 "RnnLmTinyTest, max_lstm_gradient_norm $cap" "$LV_BIN/trainer" --model=lm.bible.RnnLmTinyTest \
    --logdir="$T/clip$cap" --model_params_override="$TR; train.max_steps: 3; task.train.max_lstm_gradient_norm: $cap"
done
if inspect "$T/clip0/train/ckpt-00000003" "$LSTM_W" >/dev/null 2>&1; then
  check "clipped LSTM weights differ" [ "$(inspect "$T/clip0/train/ckpt-00000003" $LSTM_W)" != "$(inspect "$T/clip1e-4/train/ckpt-00000003" $LSTM_W)" ]
else
  fail "no $LSTM_W in the RnnLmTinyTest checkpoint"
fi
expect_exit 2 "max_lstm_gradient_norm on a TransformerLm" "$LV_BIN/trainer" --model=lm.bible.TransformerLmTinyTest \
  --logdir="$T/clipT" --model_params_override="$TR; train.max_steps: 1; task.train.max_lstm_gradient_norm: 1.0"
err_has "task.train.max_lstm_gradient_norm: 1 needs an RnnLm"
# The ASCII tokenizer's 76 ids into an LM of 50 rows: refused before the first step, not
# by the embedding's gather minutes in.
expect_exit 2 "an LM vocabulary smaller than the tokenizer's" "$LV_BIN/trainer" --model=lm.bible.RnnLmTinyTest \
  --logdir="$T/small_vocab" --model_params_override="$TR; task.lm.vocab_size: 50; task.lm.emb.vocab_size: 50; \
task.lm.softmax.num_classes: 50"
err_has "input.tokenizer's vocabulary has 76 ids, more than task.lm.vocab_size 50"
check "no step ran with the small vocabulary" test ! -e "$T/small_vocab/train/ckpt-00000000.index"
finish
