#!/usr/bin/env bash
# The punctuator codelab's data and scoring: scripts/prepare_punctuator.sh
# (WEB sentences split as download_brown_corpus.py splits Brown, 16k WPM vocabulary),
# bin/punct_score (its input checks, the trivial answer's figures on the test split) and
# experiments/punctuator/codelab.cfg's datasets read by PunctuatorInput.
. "$(dirname "$0")/lib.sh"
S="$LV_ROOT/scripts"
P="$LV_BIN/punct_score"

# punct_score's input checks (no data needed).
printf 'Hello, world.\nGood bye.\n' >"$T/ref2"
printf 'Hello world.\n' >"$T/hyp1"
expect_exit 2 "punct_score without --ref" "$P" --hyp="$T/hyp1"
err_has "--ref"
expect_exit 2 "punct_score on a missing file" "$P" --ref="$T/nope" --hyp="$T/hyp1"
err_has "$T/nope"
expect_exit 2 "punct_score with fewer hypotheses than references" "$P" --ref="$T/ref2" --hyp="$T/hyp1"
err_has "$T/hyp1 ends after 1 lines"
printf 'Hello, world.\nGood \xff bye.\n' >"$T/bad"
expect_exit 2 "punct_score on invalid UTF-8" "$P" --ref="$T/ref2" --hyp="$T/bad"
err_has "$T/bad:2: invalid UTF-8 at byte 6 (byte 0xff)"
printf 'a\0b\nc\n' >"$T/nul"
expect_exit 2 "punct_score on a NUL byte" "$P" --ref="$T/ref2" --hyp="$T/nul"
err_has "$T/nul:1: a NUL byte"
cp "$T/ref2" "$T/ref2.bak"
expect_exit 2 "--write_hyp onto the reference is refused" "$P" --ref="$T/ref2" --baseline --write_hyp="$T/ref2"
check "the reference is left intact" cmp -s "$T/ref2" "$T/ref2.bak"
expect_exit 2 "--baseline with --hyp" "$P" --ref="$T/ref2" --hyp="$T/hyp1" --baseline
printf 'Hello world.\nGood bye.\n' | "$P" --ref="$T/ref2" >"$T/out" 2>"$T/err"
check "hypotheses from stdin (exit $?)" grep -q '^exact match 0.5000 (1 of 2 sentences' "$T/out"
check "the missed comma is a false negative" grep -q '^  ,  .*(tp 0 fp 0 fn 1)$' "$T/out"
expect_exit 2 "prepare_punctuator.sh without OUTDIR" "$S/prepare_punctuator.sh"
expect_exit 2 "prepare_punctuator.sh with an unknown option" "$S/prepare_punctuator.sh" --filters "$T/x"

# The data, in one step.
D="$T/data"
"$S/prepare_punctuator.sh" "$D" 2>"$T/prep.log"
check "prepare_punctuator.sh exits 0 ($(tail -1 "$T/prep.log"))" [ $? -eq 0 ]
check "2,432 test and 46,194 train sentences (the codelab's split)" \
  [ "$(wc -l <"$D/test.txt")" -eq 2432 -a "$(wc -l <"$D/train.txt")" -eq 46194 ]
# Python's random.seed(1234) shuffle of the sorted unique sentences puts these first.
check "test.txt starts as Python's shuffle does" \
  [ "$(head -c 40 "$D/test.txt")" = "He went in also to Rachel, and he loved " ]
check "train.txt starts as Python's shuffle does" [ "$(head -1 "$D/train.txt")" = "Rebekah arose with her ladies." ]
check "a 16,000-piece vocabulary, <unk> <s> </s> first" \
  [ "$(wc -l <"$D/web_wpm.16000.vocab")" -eq 16000 -a "$(head -3 "$D/web_wpm.16000.vocab" | tr '\n' ' ')" = "<unk> <s> </s> " ]
check "the SentencePiece model behind it is kept beside it" [ -s "$D/web_spm.16000.model" -a -s "$D/web_spm.16000.vocab" ]

# The trivial answer on the test split: BLEU 63.8 and exact match 0.153.
"$P" --ref="$D/test.txt" --baseline --write_hyp="$T/base.txt" >"$T/base.out" 2>"$T/err"
check "punct_score --baseline (exit $?)" [ -s "$T/base.out" ]
check "trivial answer: BLEU 63.82" grep -q '^BLEU = 63.82 ' "$T/base.out"
check "trivial answer: exact match 0.1525 (371 of 2432)" grep -q '^exact match 0.1525 (371 of 2432 sentences; 0 with' "$T/base.out"
check "trivial answer: every capital but the first is missed" grep -q '^  Capital  P 1.0000 ' "$T/base.out"
check "the written answers score the same from --hyp" \
  cmp -s "$T/base.out" <("$P" --ref="$D/test.txt" --hyp="$T/base.txt")
check "sacrebleu_score agrees on BLEU" \
  [ "$("$LV_BIN/sacrebleu_score" --ref="$D/test.txt" --hyp="$T/base.txt" --score_only)" = 63.82 ]
"$P" --ref="$D/test.txt" --hyp="$D/test.txt" >"$T/self.out"
check "the reference against itself: BLEU 100, exact 1" \
  grep -q '^exact match 1.0000 (2432 of 2432' "$T/self.out"

# codelab.cfg's datasets through PunctuatorInput: the checked-in file plus a stand-in
# task (the file holds the datasets only), its paths pointed at $D.
mkdir -p "$T/exp/punctuator"
{ sed "s|/tmp/punctuator_data|$D|g" "$LV_ROOT/experiments/punctuator/codelab.cfg"
  echo 'Check: { base = "WebCorpusWPM"; task: { cls = "classifier.ModelV1"; name = "check"; softmax: { input_dim = 300; num_classes = 10; }; }; };'
} >"$T/exp/punctuator/codelab.cfg"
"$LV_BIN/trainer" --model=punctuator.codelab.Check --experiments_dir="$T/exp" --logdir="$T/log" --mode=inspect_input \
  --dataset=Test --inspect_input_batches=100000 >"$T/inspect" 2>"$T/err"
check "trainer --mode=inspect_input reads test.txt (exit $?)" [ -s "$T/inspect" ]
n=$(awk '/^batch [0-9]+: [0-9]+ examples/ { n += $3 } END { print n + 0 }' "$T/inspect")
check "one eval pass yields all 2432 test sentences ($n)" [ "$n" -eq 2432 ]
src=$(sed -n 's/^  src.ids  *text: "\(.*\)"$/\1/p' "$T/inspect" | head -1)
tgt=$(sed -n 's/^  tgt.labels  *text: "\(.*\)"$/\1/p' "$T/inspect" | head -1)
want=$(printf '%s' "$tgt" | tr 'A-Z' 'a-z' | tr -d '!"#$%&'"'"'()*+,./:;<=>?@[\\]^_`{|}~-' | tr -s ' ')
check "the target is a test sentence ($tgt)" grep -qxF -- "$tgt" "$D/test.txt"
check "the source is the target lower-cased without punctuation ($src)" [ -n "$src" -a "$src" = "$want" ]
"$LV_BIN/trainer" --model=punctuator.codelab.Check --experiments_dir="$T/exp" --logdir="$T/log" --mode=inspect_input \
  --dataset=Train --inspect_input_batches=1 >"$T/inspect" 2>"$T/err"
check "and train.txt in buckets of up to 512 (exit $?)" grep -q 'training batches, batch size 512' "$T/inspect"
finish
