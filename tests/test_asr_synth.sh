#!/usr/bin/env bash
# scripts/prepare_asr_synth.sh on a tiny size (MAX_UTTS=12: every set 12 utterances) and
# asr.synth_en.TinyTest on it with the input's waveform augmentation: every set made, with
# progress and an ETA; the held-out voices (espeak-ng en-gb-x-gbclan, en-gb-x-gbcwmd,
# en-us-nyc, +m4, +m6; flite rms; festival slt-hts) and the Bible Test books' verses never in
# train or dev; the training records carrying pcm16; a rerun skips every finished set and
# changes nothing; a set made again from scratch is byte-identical (deterministic); then 3
# training steps. Skipped (77) without the synthesizers (LINGVOC_ASR_SYNTH=1
# scripts/install-deps.sh).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
B=$LV_BIN
# The jobs alone (no synthesizer): lines of three kinds interleaved; every held-out espeak-ng
# voice (18 with their variants) reads all three kinds, and each training synthesizer's
# voices too.
for k in b g n; do seq 1 1200 | sed "s/^/$k /" >"$T/kind_$k.txt"; done
jobs() { perl "$LV_ROOT/scripts/data/asr_synth_jobs.pl" jobs "$1" 3600 "$T/kind_b.txt" "$T/kind_g.txt" "$T/kind_n.txt"; }
for set in heldout_espeak train; do
  jobs $set >"$T/$set.jobs" 2>"$T/err"
  check "$set jobs: 3600 lines" test "$(wc -l <"$T/$set.jobs")" -eq 3600
  # (voices with at least 6 lines: the training pools have up to 75 voices)
  one=$(awk -F'\t' '{ split($5, w, " "); n[$3]++; k[$3] = k[$3] (index(k[$3], w[1]) ? "" : w[1]) }
    END { for (v in k) if (n[v] >= 6 && length(k[v]) < 3) print v }' "$T/$set.jobs" | head -3)
  check "$set jobs: every voice reads all three kinds of text${one:+ (not: $one)}" test -z "$one"
done
for c in espeak-ng sox flite text2wave perl; do
  command -v $c >/dev/null || skip "$c not installed (LINGVOC_ASR_SYNTH=1 scripts/install-deps.sh)"
done
for p in festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts fortunes-min fortunes; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    skip "$p not installed (LINGVOC_ASR_SYNTH=1 scripts/install-deps.sh)"
done
S=$LV_ROOT/scripts/prepare_asr_synth.sh
D=$T/synth
sets="train dev test_bible test_general heldout_espeak heldout_flite heldout_festival"
MAX_UTTS=12 PROGRESS_EVERY=6 LV_BIN=$B sh "$S" "$D" >"$T/out" 2>"$T/err"
check "prepare_asr_synth.sh exits 0" test $? -eq 0
check "progress with an ETA" grep -q 'train: 6/12 utterances (50%), .* ETA ' "$T/err"
for s in $sets; do
  check "$s: 12 utterances and records" test "$(wc -l <"$D/$s.tsv")" -eq 12 -a -s "$D/$s.tfrecords-00000-of-0000$([ $s = train ] && echo 4 || echo 1)"
done
cut -f3 "$D/train.jobs" "$D/dev.jobs" >"$T/voices"
check "no held-out espeak-ng voice or variant in train/dev" sh -c "! grep -E 'gbclan|gbcwmd|nyc|\+m4|\+m6|^rms$|slt_arctic_hts' '$T/voices'"
check "held-out espeak-ng set has held-out voices only" sh -c "! cut -f3 '$D/heldout_espeak.jobs' | grep -vE 'gbclan|gbcwmd|nyc|\+m4|\+m6'"
cut -f5 "$D/train.jobs" "$D/dev.jobs" >"$T/texts"
check "no Bible Test verse in train/dev" sh -c "! grep -qxF -f '$D/text/bible_test.txt' '$T/texts'"
for k in bible_train_short general_train numbers_train; do
  check "train has $k lines" grep -qxF -f "$D/text/$k.txt" <(cut -f5 "$D/train.jobs")
done
check "train mixes espeak, flite, festival" test "$(cut -f2 "$D/train.jobs" | sort -u | wc -l)" -eq 3
"$B/print_tf_records" --input_filepattern="$D/train.tfrecords-00000-of-00004" --print_only_n=1 >"$T/rec" 2>&1
check "train records hold pcm16" grep -q pcm16 "$T/rec"
sum0=$(cat "$D"/*.tfrecords-* | md5sum)
MAX_UTTS=12 LV_BIN=$B sh "$S" "$D" >"$T/out" 2>"$T/err2"
check "a rerun skips every set" test "$(grep -c 'done already' "$T/err2")" -eq 7
check "a rerun changes nothing" test "$sum0" = "$(cat "$D"/*.tfrecords-* | md5sum)"
dev0=$(md5sum <"$D/dev.tfrecords-00000-of-00001")
rm -rf "$D/wav/dev" "$D/.done-dev" "$D/dev.tfrecords-00000-of-00001"
MAX_UTTS=12 SETS=dev LV_BIN=$B sh "$S" "$D" >"$T/out" 2>"$T/err3"
check "dev made again is byte-identical" test "$dev0" = "$(md5sum <"$D/dev.tfrecords-00000-of-00001")"
expect_exit 0 "TinyTest trains 3 steps with augmentation" "$B/trainer" --model=asr.synth_en.TinyTest \
  --logdir="$T/log" --model_params_override="input.file_pattern: \"$D/train.tfrecords@4\"; train.max_steps: 3"
check "checkpoint of step 3" test -s "$T/log/train/ckpt-00000003.index"
finish
