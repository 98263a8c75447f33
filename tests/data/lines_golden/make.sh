#!/usr/bin/env bash
# Remakes this folder's fixtures with the build in BIN (default bin): a tiny RNN LM
# (lm.bible.RnnLmTinyTest, 20 steps on tests/lib.sh's gen_lm_text) and a tiny LAS
# (asr.bible_tts.TinyTest, 20 steps on tiny_las's two espeak-ng utterances), their
# checkpoints (NAME/ckpt-00000020.*), the inputs, and that build's bin/decoder outputs
# (decode.sh) as expected/. tests/test_lines_golden.sh checks today's decoder writes the
# same. Run it only when a change of output is intended, and say why in the commit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
BIN=$(cd "${BIN:-$root/bin}" && pwd)
LV_ROOT=$root LV_BIN=$BIN
. "$root/tests/lib.sh"
set -e
rm -rf "${here:?}/lm" "${here:?}/las" "${here:?}/expected"
mkdir -p "$here/lm" "$here/las"
gen_lm_text "$here/lm"
rm "$here/lm/dev.txt"
# score inputs: training lines, an empty line, invalid UTF-8, a NUL byte, unseen words.
{ head -3 "$here/lm/train.txt"; echo; printf 'the lord \xff\xfe said.\n'; printf 'moses\0 said.\n'
  echo 'Who is Zed?'; } >"$here/lm/score.in"
"$BIN/trainer" --model=lm.bible.RnnLmTinyTest --logdir="$T/lm" --num_threads=2 \
  --model_params_override="input.file_pattern: \"text:$here/lm/train.txt\"; train.max_steps: 20; train.save_interval_steps: 20" \
  >"$T/train.log" 2>&1 || { cat "$T/train.log"; exit 1; }
cp "$T/lm"/train/ckpt-00000020.* "$here/lm/"
tiny_las "$T/asr" >/dev/null
cp "$T/asr"/asr/train/ckpt-00000020.* "$here/las/"
cp "$T/asr"/wavs/*.wav "$here/las/"
sox -q -n -r 16000 -c 1 -b 16 "$here/las/silence.wav" trim 0 0.5
bash "$here/decode.sh" "$BIN" "$here/expected"
rm -f "$here/expected"/*.err
