#!/usr/bin/env bash
# lm.model.LanguageModel through the real executables on generated text: a missing data
# file is exit 2 naming it; RnnLmTinyTest and TransformerLmTinyTest train 200 steps (loss
# falls); the evaler reports Lingvo's LM metrics on Dev; bin/decoder --score_text's corpus
# log_pplx equals the evaler's; --sample is deterministic for a seed.
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
done
finish
