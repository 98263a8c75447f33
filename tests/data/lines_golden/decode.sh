#!/usr/bin/env bash
# decode.sh BIN OUT: bin/decoder's --score_text, --sample and --decode_audio on the
# committed checkpoints of this folder (make.sh): a tiny RNN LM and a tiny LAS, with and
# without the LM fused into the LAS's beam search. Writes OUT/NAME.out (stdout) and
# OUT/NAME.rc (exit status) per run; stderr goes to OUT/NAME.err (not compared: it has
# timings).
set -uo pipefail
bin=$1 out=$2
G=$(cd "$(dirname "$0")" && pwd)
export LINGVOC_EXPERIMENTS=${LINGVOC_EXPERIMENTS:-$(cd "$G/../../../experiments" && pwd)}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
mkdir -p "$out"
LM=lm.bible.RnnLmTinyTest
LMOV="input.file_pattern: \"text:$G/lm/train.txt\""
LMCK=$G/lm/ckpt-00000020
LAS=asr.bible_tts.TinyTest
LASCK=$G/las/ckpt-00000020
FUS="task.decoder.fusion.lm_model: $LM; task.decoder.fusion.lm_checkpoint: $LMCK; task.decoder.fusion.lm_params_override: 'input.file_pattern: \"text:$G/lm/train.txt\"'"
# The audio list: both utterances, an empty line, silence, a missing file, a tab.
printf '%s\n' "$G/las/yes_go.wav" "$G/las/no_stop.wav" "" "$G/las/silence.wav" "$log/missing.wav" \
  "$G/las/no_stop.wav" >"$log/audio.list"
printf '%s\tx\n' "$G/las/yes_go.wav" >>"$log/audio.list"
run() { # NAME ARGS...: bin/decoder ARGS, stdin from $IN (default /dev/null)
  local name=$1; shift
  "$bin/decoder" "$@" <"${IN:-/dev/null}" >"$out/$name.out" 2>"$out/$name.err"
  echo $? >"$out/$name.rc"
  sed -i "s#$log#LOG#g; s#$G#G#g" "$out/$name.out" "$out/$name.err"
}
run score_text --model=$LM --logdir="$log/l" --checkpoint=$LMCK --model_params_override="$LMOV" --score_text="$G/lm/score.in"
IN=$G/lm/score.in run score_text_stdin --model=$LM --logdir="$log/l" --checkpoint=$LMCK --model_params_override="$LMOV" --score_text=-
run sample --model=$LM --logdir="$log/l" --checkpoint=$LMCK --model_params_override="$LMOV" --sample=3 --prefix="the lord" --seed=9 --temperature=0.8
run sample_top_k --model=$LM --logdir="$log/l" --checkpoint=$LMCK --model_params_override="$LMOV" --sample=2 --top_k=3 --seed=4
run sample_default --model=$LM --logdir="$log/l" --checkpoint=$LMCK --model_params_override="$LMOV" --sample=2
run sample_long_prefix --model=$LM --logdir="$log/l" --checkpoint=$LMCK --model_params_override="$LMOV; input.target_max_length: 4" --sample=2 --prefix="the lord said unto"
run audio_file --model=$LAS --logdir="$log/a" --checkpoint=$LASCK --decode_audio="$G/las/yes_go.wav"
run audio_list --model=$LAS --logdir="$log/a" --checkpoint=$LASCK --decode_audio=@"$log/audio.list"
run audio_list_b2 --model=$LAS --logdir="$log/a" --checkpoint=$LASCK --decode_audio=@"$log/audio.list" --decode_batch_size=2
IN=$log/audio.list run audio_stdin --model=$LAS --logdir="$log/a" --checkpoint=$LASCK --decode_audio=- --decode_batch_size=1
run audio_fusion --model=$LAS --logdir="$log/a" --checkpoint=$LASCK --decode_audio=@"$log/audio.list" --model_params_override="$FUS; task.decoder.fusion.lm_weight: 4"
run audio_fusion_w0 --model=$LAS --logdir="$log/a" --checkpoint=$LASCK --decode_audio=@"$log/audio.list" --model_params_override="$FUS"
run audio_missing_list --model=$LAS --logdir="$log/a" --checkpoint=$LASCK --decode_audio=@"$log/nope.list"
run score_wrong_kind --model=$LAS --logdir="$log/a" --checkpoint=$LASCK --score_text="$G/lm/score.in"
run audio_wrong_kind --model=$LM --logdir="$log/l" --checkpoint=$LMCK --model_params_override="$LMOV" --decode_audio="$G/las/yes_go.wav"
exit 0
