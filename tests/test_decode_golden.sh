#!/usr/bin/env bash
# bin/decoder on fixed checkpoints (tests/data/decode_golden: 20 training steps of the
# Transformer, RNMT and punctuator tiny tests, made by its make.sh) writes the same
# decoder_out, score file (less examples/sec) and --decode_text output as the build that
# made the fixtures: a change to the decoder job, the tasks' decode hooks or the beam
# search that changes what a user reads fails here. Text (hypotheses, references, counts)
# must be identical; printed floats (scores, metrics) may differ by 1e-5 relative
# (tests/golden_cmp.awk), because their last digit depends on the CPU's summation order
# (fixtures made on an AVX-512 Intel gave -2.489837 where an AMD Zen 5 gives -2.489838).
# Within one machine the outputs are bit-identical run to run (scripts/check_bitwise.sh).
. "$(dirname "$0")/lib.sh"
G=$LV_ROOT/tests/data/decode_golden
. "$G/models.sh"
for name in $GOLDEN_MODELS; do
  if ! bash "$G/decode.sh" "$LV_BIN" "$name" "$T/$name" 2>"$T/err"; then
    fail "$name: decode.sh failed: $(tail -3 "$T/err")"
    continue
  fi
  for f in decoder_out score.txt decode_text.out; do
    check "$name: $f as the fixture (floats to 1e-5)" awk -v TOL=1e-5 -f "$LV_ROOT/tests/golden_cmp.awk" "$G/$name/expected/$f" "$T/$name/$f"
  done
done
finish
