#!/usr/bin/env bash
# The corpus recipes: the WEB punctuator split (Lingvo's unique/sorted/seed-1234 shuffle,
# 95/5) and the English/Spanish Bible with Ruth, James and Philippians held out. Both
# install their Debian packages when missing and must be deterministic.
. "$(dirname "$0")/lib.sh"
S="$LV_ROOT/scripts"

"$S/prepare_web_sentences.sh" "$T/web" 2>"$T/web.log"
check "prepare_web_sentences.sh exits 0" [ $? -eq 0 ]
check "2,432 test and 46,194 train sentences" [ "$(wc -l <"$T/web/test.txt")" -eq 2432 -a "$(wc -l <"$T/web/train.txt")" -eq 46194 ]
check "train and test share no sentence" [ -z "$(sort "$T/web/train.txt" | comm -12 - <(sort "$T/web/test.txt"))" ]
check "train + test are the unique input sentences" \
  cmp -s <(sort -u "$T/web/all.txt") <(cat "$T/web/train.txt" "$T/web/test.txt" | sort)
"$S/prepare_web_sentences.sh" "$T/web2" 2>/dev/null
check "the split is deterministic" cmp -s "$T/web/test.txt" "$T/web2/test.txt"
"$S/prepare_web_sentences.sh" --lingvo_filters "$T/webf" 2>/dev/null
check "--lingvo_filters leaves no odd number of quotes" [ -z "$(awk -F'"' 'NF % 2 == 0' "$T/webf/train.txt" "$T/webf/test.txt")" ]
expect_exit 2 "prepare_web_sentences.sh without OUTDIR" "$S/prepare_web_sentences.sh"

"$S/bible_parallel.sh" "$T/bible" 2>"$T/bible.log"
check "bible_parallel.sh exits 0" [ $? -eq 0 ]
check "297 held-out lines" [ "$(wc -l <"$T/bible/test.en")" -eq 297 -a "$(wc -l <"$T/bible/test.es")" -eq 297 ]
check "held-out lines are Ruth, James and Philippians only" \
  [ -z "$(grep -vE '^(Ruth|James|Philippians) ' "$T/bible/test.refs")" ]
check "no held-out book in training" [ -z "$(grep -E '^(Ruth|James|Philippians) ' "$T/bible/train.refs")" ]
check "train files are parallel" [ "$(wc -l <"$T/bible/train.en")" -eq "$(wc -l <"$T/bible/train.es")" ]
check "train + test = every aligned line" \
  [ $(( $(wc -l <"$T/bible/train.en") + 297 )) -eq "$(wc -l <"$T/bible/all/en.txt")" ]
# The LM corpus (scripts/prepare_lm_bible.sh): the same held-out books as Test, every
# 100th other sentence as Dev.
"$S/prepare_lm_bible.sh" "$T/lm" 2>"$T/lm.log"
check "prepare_lm_bible.sh exits 0" [ $? -eq 0 ]
check "48,542 train, 490 dev, 371 test sentences" \
  [ "$(wc -l <"$T/lm/train.txt")" -eq 48542 -a "$(wc -l <"$T/lm/dev.txt")" -eq 490 -a "$(wc -l <"$T/lm/test.txt")" -eq 371 ]
check "test sentences are Ruth, James and Philippians only" [ -z "$(grep -vE '^(Ruth|James|Philippians) [0-9]+$' "$T/lm/test.refs")" ]
check "no held-out book in train or dev" [ -z "$(cat "$T/lm/train.refs" "$T/lm/dev.refs" | grep -E '^(Ruth|James|Philippians) ')" ]
check "refs parallel to the text" [ "$(wc -l <"$T/lm/train.refs")" -eq 48542 -a "$(wc -l <"$T/lm/dev.refs")" -eq 490 ]
check "Naomi (Ruth only) is in test, never in train or dev" \
  [ "$(grep -c Naomi "$T/lm/test.txt")" -gt 10 -a -z "$(grep -l Naomi "$T/lm/train.txt" "$T/lm/dev.txt")" ]
check "plain ASCII text" [ -z "$(LC_ALL=C grep -n '[^ -~]' "$T/lm/train.txt" | head -1)" ]
"$S/prepare_lm_bible.sh" "$T/lm2" 2>/dev/null
check "the LM split is deterministic" cmp -s <(cat "$T"/lm/*.txt "$T"/lm/*.refs) <(cat "$T"/lm2/*.txt "$T"/lm2/*.refs)
expect_exit 2 "prepare_lm_bible.sh without OUTDIR" "$S/prepare_lm_bible.sh"
finish
