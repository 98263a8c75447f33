#!/usr/bin/env bash
# Real speech through the whole path: scripts/prepare_asr_real.sh turns the LibriVox
# recordings of Debian's pocketsphinx-testdata into records with their transcripts; a
# TinyTest model trains a few steps on them; `decoder --dataset=Real` (the dataset entry
# of experiments/asr/bible_tts.cfg) scores all five with WER and writes each reference;
# --decode_audio transcribes the recordings, in batches and one at a time alike. What the
# model says is not checked: a few steps teach it nothing; the path is what is tested.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
B=$LV_BIN
PS=/usr/share/pocketsphinx/test/data/librivox
dpkg-query -W -f='${Status}' pocketsphinx-testdata 2>/dev/null | grep -q "install ok installed" && [ -f "$PS/transcription" ] ||
  skip "pocketsphinx-testdata not installed (scripts/install-deps.sh)"
export LINGVOC_EXPERIMENTS=$LV_ROOT/experiments
cd "$T"
PS_DATA=$PS LV_BIN=$B "$LV_ROOT/scripts/prepare_asr_real.sh" real >prep.log 2>&1
check "prepare_asr_real.sh exits 0" [ $? -eq 0 ]
check "five utterances listed" [ "$(wc -l <real/real.tsv)" -eq 5 ]
check "the transcripts without <s>, </s> and ids" grep -qxP "$PS/sense_and_sensibility_01_austen_64kb-0880.wav\the was not an ill disposed young man" real/real.tsv
check "records written" [ -s real/real.tfrecords-00000-of-00001 ]
expect_exit 2 "prepare_asr_real.sh without OUT" "$LV_ROOT/scripts/prepare_asr_real.sh"

M=asr.bible_tts.TinyTest
OVR="input.file_pattern: \"$T/real/real.tfrecords@1\"; train.max_steps: 6; train.save_interval_steps: 6; cluster.num_threads: 2"
expect_exit 0 "a few training steps on real speech" "$B/trainer" --model=$M --run_locally=cpu --mode=sync \
  --logdir="$T/a" --model_params_override="$OVR"
expect_exit 0 "decoder --dataset=Real --once" "$B/decoder" --model=$M --logdir="$T/a" --dataset=Real --once \
  --model_params_override="input.file_pattern: \"$T/real/real.tfrecords@1\"; train.max_steps: 6"
SCORE=a/decoder_real/score-00000006.txt
check "score file of the Real dataset" [ -f "$SCORE" ]
check "WER over the 5 utterances' 71 words" grep -q "WER [0-9.]*% ([0-9]* errors / 71 words)" "$T/err"
OUT=a/decoder_real/decoder_out_000000006
check "decoder_out keyed by the recordings' ids" [ "$(grep -c '^sense_and_sensibility_01_austen_64kb-0[0-9]*$' "$OUT")" -eq 5 ]
check "decoder_out has a real reference" grep -qx "ref: he might even have been made amiable himself" "$OUT"
check "the Real entry of bible_tts.cfg reads /tmp/asr_bible" \
  grep -q 'file_pattern = "/tmp/asr_bible/real.tfrecords@1"' "$LV_ROOT/experiments/asr/bible_tts.cfg"

cut -f1 real/real.tsv >files.txt
expect_exit 0 "--decode_audio on the recordings" "$B/decoder" --model=$M --logdir="$T/a" --decode_audio=@files.txt
cp "$T/out" batch.out
check "a path<TAB>text line per recording, in order" [ "$(cut -f1 batch.out)" = "$(cat files.txt)" ]
err_has "real-time factor"
expect_exit 0 "--decode_audio one at a time" "$B/decoder" --model=$M --logdir="$T/a" --decode_audio=@files.txt \
  --decode_batch_size=1
check "one at a time gives the batch's lines" cmp -s "$T/out" batch.out
finish
