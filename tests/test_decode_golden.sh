#!/usr/bin/env bash
# bin/decoder on fixed checkpoints (tests/data/decode_golden: 20 training steps of the
# Transformer, RNMT and punctuator tiny tests, made by its make.sh) writes the same
# decoder_out, score file (less examples/sec) and --decode_text output, byte for byte,
# as the build that made the fixtures: a change to the decoder job, the tasks' decode
# hooks or the beam search that changes what a user reads fails here.
. "$(dirname "$0")/lib.sh"
G=$LV_ROOT/tests/data/decode_golden
. "$G/models.sh"
for name in $GOLDEN_MODELS; do
  if ! bash "$G/decode.sh" "$LV_BIN" "$name" "$T/$name" 2>"$T/err"; then
    fail "$name: decode.sh failed: $(tail -3 "$T/err")"
    continue
  fi
  for f in decoder_out score.txt decode_text.out; do
    check "$name: $f byte-identical to the fixture" cmp -s "$G/$name/expected/$f" "$T/$name/$f"
  done
done
finish
