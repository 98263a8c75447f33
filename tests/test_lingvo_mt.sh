#!/usr/bin/env bash
# Real Lingvo (the peers' venv, scripts/peers.sh) beside lingvoc on the MT Transformer
# (mt.bible_en_es.TinyTest on the committed 20 pairs), without the speed race
# (scripts/lingvo_peer/mt.sh with RUNS=0): one step from Lingvo's step-0 checkpoint on the
# same batch gives the same loss and gradient norm and the same change of every weight and
# Adam slot (the key biases, whose true gradient is zero, exempt); each evaler and decoder
# reads the other's checkpoint with no conversion (Lingvo's variable names,
# transformer/enc/... and transformer/dec/...) and reports the same log_pplx, loss and
# BLEU and the same beam-search hypotheses; tf.train.load_checkpoint reads lingvoc's.
# Skipped (counted) without the venv.
. "$(dirname "$0")/lib.sh"
need_lingvo
RUNS=0 STEPS=40 WORK="$T/mt" bash "$LV_ROOT/scripts/lingvo_peer/mt.sh" >"$T/out" 2>&1
rc=$?
R=$T/mt/report.md
check "mt.sh finds no disagreement (exit $rc)" [ "$rc" -eq 0 ]
check "one step: every weight's change within 1e-3 but the 9 key biases" \
  grep -q "change in the step | 132 shared tensors (129 float), 0 outside relative 0.001, 9 exempt" "$R"
check "one step: the same loss and gradient norm" sh -c "! grep -q 'DISAGREE: one step' \"$R\""
check "four evaluations and decodings" [ "$(grep -c '^| \(Lingvo\|lingvoc\) | \(Lingvo\|lingvoc\) | [0-9]' "$R")" -eq 4 ]
check "the same top hypotheses both ways" [ "$(grep -c '| 20/20 | [a-z]* |$' "$R")" -eq 4 ]
# Every hypothesis of the beam in the same order: an optimized build's float order; -O1's
# (make asan) may swap near-tied hypotheses of this tiny model.
if asan_build; then
  skip_part "all beam hypotheses in order: a sanitizer build (-O1) sums in another order"
else
  check "the same hypotheses both ways" [ "$(grep -c '| yes |$' "$R")" -eq 4 ]
fi
check "no DISAGREE line" sh -c "! grep -q DISAGREE \"$R\""
check "tf.train.load_checkpoint: Lingvo's names, dtypes and shapes" grep -q "problems: 0" "$R"
[ "$NFAIL" -eq 0 ] || cat "$T/out"
finish
