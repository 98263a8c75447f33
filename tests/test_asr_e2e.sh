#!/usr/bin/env bash
# Speech recognition end to end with the real executables: eight short utterances of a
# few words spoken by espeak-ng, made into records by create_asr_features, learned by
# asr.bible_tts.TinyTest; the decoder job scores them (WER in the score file, the log
# line and decoder_out keyed by utterance id); --decode_audio transcribes the files and
# reports each file it cannot read (truncated WAV, empty file, a text file, a missing
# path) while still transcribing the others (8 kHz and stereo copies included), exit 2;
# batches of files decode as single files; silence gives an empty line; a character LM
# fused into the search (lm_weight 0 changes nothing, 1 the scores); a trainer with
# SpecAugment killed with -9 and restarted ends with the same weights as an uninterrupted one.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
B=$LV_BIN
for c in espeak-ng sox; do command -v $c >/dev/null || skip "$c not installed (scripts/install-deps.sh)"; done
export LINGVOC_EXPERIMENTS=$LV_ROOT/experiments
cd "$T"
mkdir -p wavs rec bad
i=0
while read -r text; do
  id=$(printf 'utt%02d' $i)
  espeak-ng -v en-us -s 150 --stdout "$text" | sox -q -t wav - -r 16000 -c 1 -b 16 "wavs/$id.wav" gain -2
  printf 'wavs/%s.wav\t%s\n' "$id" "$text" >>list.tsv
  i=$((i + 1))
done <<'U'
yes go
no stop
up left
down right
go up
stop down
left yes
right no
U
expect_exit 0 "records of 8 utterances" "$B/create_asr_features" --input_list=list.tsv --generate_tfrecords \
  --output_template=rec/utt-%5.5d-of-%5.5d
M=asr.bible_tts.TinyTest
STEPS=${ASR_E2E_STEPS:-300}
OVR="input.file_pattern: \"$T/rec/utt@1\"; train.max_steps: $STEPS; train.save_interval_steps: 100; cluster.num_threads: 2"
TRAIN=("$B/trainer" --model=$M --run_locally=cpu --mode=sync --log_interval_steps=50)

# 0. inspect_input shows the string features (utterance ids, transcripts) as text.
"$B/trainer" --model=$M --mode=inspect_input --inspect_input_batches=1 --logdir="$T/ins" \
  --model_params_override="input.file_pattern: \"$T/rec/utt@1\"" >ins.out 2>&1
check "inspect_input prints an utterance id" grep -q 'sample_ids .*first: \["utt0[0-7]"\]' ins.out
check "inspect_input prints a transcript" grep -qE 'tgt.transcripts .*first: \["[a-z]+ [a-z]+"\]' ins.out

# 1. Training: the loss falls.
start=$(date +%s)
"${TRAIN[@]}" --logdir="$T/a" --model_params_override="$OVR" >a.log 2>&1
check "trainer exits 0" [ $? -eq 0 ]
echo "training $STEPS steps took $(($(date +%s) - start)) s"
first=$(grep -o ' loss:[0-9.e+-]*' a.log | head -1 | cut -d: -f2)
last=$(grep -o ' loss:[0-9.e+-]*' a.log | tail -1 | cut -d: -f2)
check "loss falls ($first -> $last)" awk "BEGIN{exit !($last < $first * 0.3)}"
CK=$(printf 'ckpt-%08d' "$STEPS")
check "checkpoint at max_steps" [ -f "a/train/$CK.index" ]

# 2. The decoder job: WER of the training utterances, as Lingvo's decoder metrics.
DOVR="input.file_pattern: \"$T/rec/utt@1\"; train.max_steps: $STEPS"
expect_exit 0 "decoder --once" "$B/decoder" --model=$M --logdir="$T/a" --dataset=Test --once --model_params_override="$DOVR"
SCORE=$(printf 'a/decoder_test/score-%08d.txt' "$STEPS")
check "score file" [ -f "$SCORE" ]
for tag in norm_wer wer sacc ter corpus_bleu num_samples_in_batch oracle_norm_wer error_rates/ins \
  case_insensitive_error_rates/wer; do
  check "score file has $tag" grep -q "^$tag: " "$SCORE"
done
wer=$(grep '^norm_wer: ' "$SCORE" | cut -d' ' -f2)
check "the tiny model transcribes its utterances (norm_wer $wer <= 0.25)" awk "BEGIN{exit !($wer <= 0.25)}"
check "the log line gives the corpus WER" grep -q "WER [0-9.]*% ([0-9]* errors / 16 words)" "$T/err"
OUT=$(printf 'a/decoder_test/decoder_out_%09d' "$STEPS")
check "decoder_out is keyed by utterance id" grep -qx "utt03" "$OUT"
check "decoder_out has the reference" grep -qx "ref: down right" "$OUT"
check "decoder_out has scored hyps" grep -q "^hyp 0: score -[0-9.]*: " "$OUT"
check "decoder events" ls a/decoder_test/events.out.tfevents.* >/dev/null

# 3. --decode_audio: good files, converted ones and unreadable ones.
sox wavs/utt03.wav -r 8000 bad/8k.wav
sox wavs/utt03.wav -c 2 bad/stereo.wav
head -c 9000 wavs/utt01.wav >bad/truncated.wav
: >bad/empty.wav
echo "not audio" >bad/text.wav
# The transcripts the model gives the eight clean files, read from a list; every later
# check compares against these (the exact words depend on the CPU's float rounding in
# training, so only their agreement with the truth is held to a threshold).
cut -f1 list.tsv >good.txt
expect_exit 0 "--decode_audio=@LIST of the 8 clean files" "$B/decoder" --model=$M --logdir="$T/a" --decode_audio=@good.txt
cp "$T/out" good.out
H() { sed -n "$1p" good.out | cut -f2; }
check "a line per clean file, path first" [ "$(cut -f1 good.out)" = "$(cat good.txt)" ]
right=$(paste <(cut -f2 good.out) <(cut -f2 list.tsv) | awk -F'\t' '$1 == $2' | wc -l)
check "most files transcribed exactly ($right of 8 >= 5)" [ "$right" -ge 5 ]
# One file at a time and batches of 3 (the default pads all 8 into one): the encoder's
# strided convolutions pad SAME as TensorFlow's do (the leading pad depends on the padded
# length), so a file's frames line up with the filters by its batch's length modulo 4, and
# this tiny model, which always saw its 8 files in one batch, may hear a file otherwise
# (seen: the shortest file alone gave "no stop" for "go up"; padded by 1, 2 or 5 frames,
# "go up"). Each still transcribes most files, a line per file in order.
for bs in 1 3; do
  expect_exit 0 "--decode_audio in batches of $bs" "$B/decoder" --model=$M --logdir="$T/a" --decode_audio=@good.txt \
    --decode_batch_size=$bs
  cp "$T/out" "bs$bs.out"
  r=$(paste <(cut -f2 "$T/out") <(cut -f2 list.tsv) | awk -F'\t' '$1 == $2' | wc -l)
  check "batches of $bs: a line per file, in order" [ "$(cut -f1 "$T/out")" = "$(cat good.txt)" ]
  check "batches of $bs: most files transcribed exactly ($r of 8 >= 5)" [ "$r" -ge 5 ]
done
sox -n -r 16000 -c 1 -b 16 silence.wav trim 0 1.5
printf 'wavs/utt00.wav\nsilence.wav\nwavs/utt05.wav\n' >sil.txt
expect_exit 0 "--decode_audio with a silent file" "$B/decoder" --model=$M --logdir="$T/a" --decode_audio=@sil.txt
check "silence gives an empty line between transcribed ones" \
  [ "$(cat "$T/out")" = "$(printf 'wavs/utt00.wav\t%s\nsilence.wav\t\nwavs/utt05.wav\t%s' "$(H 1)" "$(H 6)")" ]
expect_exit 0 "--decode_audio=FILE" "$B/decoder" --model=$M --logdir="$T/a" --decode_audio=wavs/utt00.wav
check "one path<TAB>text line, as in the list run one at a time" [ "$(cat "$T/out")" = "$(sed -n 1p bs1.out)" ]
err_has "real-time factor"
printf 'wavs/utt01.wav\nbad/truncated.wav\nwavs/utt02.wav\nbad/empty.wav\nbad/text.wav\nbad/missing.wav\nbad/8k.wav\nbad/stereo.wav\n' >files.txt
expect_exit 2 "--decode_audio=@LIST with unreadable files, batches of 3" "$B/decoder" --model=$M --logdir="$T/a" \
  --decode_audio=@files.txt --decode_batch_size=3
cp "$T/out" files3.out
expect_exit 2 "--decode_audio=@LIST with unreadable files" "$B/decoder" --model=$M --logdir="$T/a" --decode_audio=@files.txt
check "batches of 3 around unreadable files give the same lines" cmp -s "$T/out" files3.out
check "a line per file, in order" [ "$(wc -l <"$T/out")" -eq 8 ]
check "files around the bad ones are transcribed" [ "$(sed -n '1p;3p' "$T/out")" = "$(printf 'wavs/utt01.wav\t%s\nwavs/utt02.wav\t%s' "$(H 2)" "$(H 3)")" ]
check "unreadable files give empty lines" [ "$(sed -n '2p;4p;5p;6p' "$T/out" | tr -d '\n')" = "" ]
check "8 kHz is resampled and decoded" grep -qP '^bad/8k.wav\t' "$T/out"
check "8 kHz is not reported unreadable" sh -c "! grep -q 'bad/8k.wav' '$T/err'"
check "stereo is mixed down and transcribed as the mono file" [ "$(sed -n 8p "$T/out")" = "$(printf 'bad/stereo.wav\t%s' "$(H 4)")" ]
err_has "bad/truncated.wav"
err_has "bad/empty.wav"
err_has "bad/missing.wav"
err_has "4 of 8 files could not be read"
"$B/decoder" --model=$M --logdir="$T/a" --decode_audio=- <good.txt >stdin.out 2>stdin.err
check "--decode_audio=- exits 0" [ $? -eq 0 ]
check "--decode_audio=- gives the list run's lines" cmp -s stdin.out good.out
# A recording longer than input.source_max_length (the limit set to 1.5x utt00's frames,
# the recording utt00 three times): that file fails, named, its line empty; the other is
# transcribed.
sox wavs/utt00.wav wavs/utt00.wav wavs/utt00.wav long.wav
lim=$(awk -v d="$(soxi -D wavs/utt00.wav)" 'BEGIN { printf "%d", d * 150 }')
printf 'wavs/utt00.wav\nlong.wav\n' >long.txt
expect_exit 2 "--decode_audio with a recording over source_max_length $lim" "$B/decoder" --model=$M --logdir="$T/a" \
  --decode_audio=@long.txt --model_params_override="input.source_max_length: $lim"
check "the short file is transcribed, the long one's line empty" \
  [ "$(cat "$T/out")" = "$(printf 'wavs/utt00.wav\t%s\n' "$(H 1)")" ]
err_has "long.wav: "
err_has "over input.source_max_length = $lim: split the recording"
# Issue 44: a NUL byte or a tab in a list line, and a float WAV of 1e16 samples (its
# log-mels +inf): each such line fails alone, named with the list and line, its output
# line empty; the files around it are transcribed; exit 2.
huge_float_wav bad/huge.wav
printf 'wavs/utt00.wav\nwavs/utt01.wav\0.bak\nwavs/utt02.wav\nbad/huge.wav\nwavs/utt03.wav\nwa\tvs/utt04.wav\n' >hostile.txt
expect_exit 2 "--decode_audio with a NUL line, a huge-float file and a tab line" "$B/decoder" --model=$M \
  --logdir="$T/a" --decode_audio=@hostile.txt --decode_batch_size=2
# Each good file sits alone in its batch of 2 (its neighbour refused), so the reference is
# the one-file-a-batch run: a file's frames are aligned by its batch's padded length (the
# encoder's strided convolutions), and a tiny model's transcript may change with it.
"$B/decoder" --model=$M --logdir="$T/a" --decode_audio=@good.txt --decode_batch_size=1 >one.out 2>/dev/null
H1() { sed -n "$1p" one.out | cut -f2; }
check "the good files are transcribed around them" [ "$(sed -n '1p;3p;5p' "$T/out")" = "$(printf \
  'wavs/utt00.wav\t%s\nwavs/utt02.wav\t%s\nwavs/utt03.wav\t%s' "$(H1 1)" "$(H1 3)" "$(H1 4)")" ]
check "the refused lines are empty" [ "$(sed -n '2p;4p;6p' "$T/out" | tr -d '\n')" = "" ]
check "six lines" [ "$(wc -l <"$T/out")" -eq 6 ]
err_has "--decode_audio=hostile.txt line 2: a NUL byte at column 15"
err_has "--decode_audio=hostile.txt line 4: bad/huge.wav: log-mel frame 0"
err_has "--decode_audio=hostile.txt line 6: a tab byte at column 3"
err_has "3 of 6 files could not be read"
# --decode_batch_size is cut to what the memory budget holds for files of up to
# input.source_max_length frames (4M frames: one file a batch).
expect_exit 0 "--decode_batch_size=4096 with input.source_max_length 4000000" "$B/decoder" --model=$M \
  --logdir="$T/a" --decode_audio=@good.txt --decode_batch_size=4096 \
  --model_params_override="input.source_max_length: 4000000"
err_has "--decode_batch_size=4096: at most 1 lines a batch"
check "... gives the one-at-a-time lines" cmp -s "$T/out" bs1.out
expect_exit 2 "--decode_audio on an MT model" "$B/decoder" --model=mt.bible_en_es.TransformerSmall --logdir="$T/a" \
  --decode_audio=wavs/utt00.wav
expect_exit 2 "--decode_audio with --decode_text" "$B/decoder" --model=$M --logdir="$T/a" --decode_audio=x.wav --decode_text=-
err_has "exclude each other"
expect_exit 2 "--decode_text on the speech model" "$B/decoder" --model=$M --logdir="$T/a" --decode_text=files.txt
err_has "--decode_text: lv_translate: model $M (task asr.model.AsrModel) does not take it; it takes lv_transcribe, lv_transcribe_files"

# 3b. Shallow fusion (task.decoder.fusion): a character LM of the eight transcripts
# (lm.bible.RnnLmTinyTest, the recognizer's AsciiTokenizer ids) beside the beam search.
# lm_weight 0: decoder_out and the scores byte for byte those without fusion; lm_weight 1
# other hyp scores; --decode_audio fuses too; an LM of another vocabulary is exit 2.
cut -f2 list.tsv >lm.txt
expect_exit 0 "trainer: lm.bible.RnnLmTinyTest on the transcripts" "$B/trainer" --model=lm.bible.RnnLmTinyTest \
  --logdir="$T/lm" --model_params_override="input.file_pattern: \"text:$T/lm.txt\"; cluster.num_threads: 2"
FUS="task.decoder.fusion.lm_model: lm.bible.RnnLmTinyTest; task.decoder.fusion.lm_logdir: $T/lm"
fused() { # NAME WEIGHT: decoder --once with the LM at WEIGHT (none when WEIGHT is -) into NAME.out and NAME.score
  rm -rf a/decoder_test
  local o="$DOVR"
  [ "$2" = - ] || o="$o; $FUS; task.decoder.fusion.lm_weight: $2"
  expect_exit 0 "decoder --once, lm_weight $2" "$B/decoder" --model=$M --logdir="$T/a" --dataset=Test --once \
    --model_params_override="$o"
  cp "$OUT" "$1.out"
  grep -v '^examples/sec' "$SCORE" >"$1.score"
}
fused nofusion -
fused w0 0
check "the LM is named in the log" grep -q "shallow fusion: lm.bible.RnnLmTinyTest (.*) with lm_weight 0" "$T/err"
check "lm_weight 0: decoder_out byte for byte as without fusion" cmp -s nofusion.out w0.out
check "lm_weight 0: the same scores" cmp -s nofusion.score w0.score
fused w1 1
check "lm_weight 1: other hyp scores" sh -c "! cmp -s nofusion.out w1.out"
wer1=$(grep '^norm_wer: ' w1.score | cut -d' ' -f2)
check "lm_weight 1 still transcribes (norm_wer $wer1 <= 0.5)" awk "BEGIN{exit !($wer1 <= 0.5)}"
expect_exit 0 "--decode_audio with fusion" "$B/decoder" --model=$M --logdir="$T/a" --decode_audio=@good.txt \
  --model_params_override="$FUS; task.decoder.fusion.lm_weight: 0"
check "--decode_audio with lm_weight 0 gives the transcripts without fusion" cmp -s "$T/out" good.out
expect_exit 2 "an LM of another vocabulary" "$B/decoder" --model=$M --logdir="$T/a" --dataset=Test --once \
  --model_params_override="$DOVR; $FUS; task.decoder.fusion.lm_params_override: \"task.lm.vocab_size: 80; \
task.lm.emb.vocab_size: 80; task.lm.softmax.num_classes: 80\""
err_has "task.decoder.fusion"

# 4. kill -9 mid-run, restart: the same weights as an uninterrupted run at the same step,
# with SpecAugment on (its masks and warps are drawn per step, so the resumed run draws
# the ones the uninterrupted run drew).
if [ "${ASR_E2E_RESUME:-1}" = 1 ]; then
  SA="task.encoder.use_specaugment: true; task.encoder.specaugment_network.time_mask_max_frames: 10"
  SA="$SA; task.encoder.specaugment_network.freq_mask_max_bins: 8; task.encoder.specaugment_network.time_warp_max_frames: 4"
  SA="$SA; task.encoder.specaugment_network.time_warp_max_ratio: 0.1"
  ROVR="input.file_pattern: \"$T/rec/utt@1\"; train.max_steps: 200; train.save_interval_steps: 100; cluster.num_threads: 2; $SA"
  "${TRAIN[@]}" --logdir="$T/c" --model_params_override="$ROVR" >c.log 2>&1
  check "uninterrupted SpecAugment run exits 0" [ $? -eq 0 ]
  "${TRAIN[@]}" --logdir="$T/b" --model_params_override="$ROVR" >b1.log 2>&1 &
  pid=$!
  for _ in $(seq 6000); do [ -f b/train/ckpt-00000100.index ] && break; sleep 0.05; done
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  check "killed before the end" [ ! -f b/train/ckpt-00000200.index ]
  "${TRAIN[@]}" --logdir="$T/b" --model_params_override="$ROVR" >b2.log 2>&1
  check "restart exits 0" [ $? -eq 0 ]
  check "restart resumed from a checkpoint" grep -q "restored .* tensors" b2.log
  ckpt_dump c/train/ckpt-00000200 >wa
  ckpt_dump b/train/ckpt-00000200 >wb
  check "dumps are complete" [ "$(grep -c tensor_name wa)" -gt 20 ]
  check "same weights and Adam slots after kill -9 and resume" cmp -s wa wb
  ckpt_dump a/train/ckpt-00000200 >w0
  check "SpecAugment changed the training" sh -c "! cmp -s w0 wa"
fi
finish
