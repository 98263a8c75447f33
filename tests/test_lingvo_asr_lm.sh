#!/usr/bin/env bash
# Real Lingvo (the peers' venv, scripts/peers.sh) beside lingvoc on the RNN language model
# (lm.bible.RnnLmTinyTest on the 40 committed lines of tests/data/decode_golden/punct),
# without the speed race (scripts/lingvo_peer/lm.sh with RUNS=0 STEPS=0): one step from
# Lingvo's step-0 checkpoint on the same 16 lines gives the same loss, log_pplx and
# gradient norm and the same change of every weight and Adam slot; each evaler reads the
# other's step-1 checkpoint with no conversion (Lingvo's variable names, lm/lm/...) and
# reports the same log_pplx, log_pplx_per_word and next-step accuracy;
# tf.train.load_checkpoint reads lingvoc's; params.txt side by side has no unexplained
# difference. LINGVO_ASR=1 also runs scripts/lingvo_peer/asr.sh (LAS, about 5 minutes).
# Skipped (counted) without the venv.
. "$(dirname "$0")/lib.sh"
need_lingvo
RUNS=0 STEPS=0 WORK="$T/lm" bash "$LV_ROOT/scripts/lingvo_peer/lm.sh" >"$T/out" 2>&1
rc=$?
R=$T/lm/report.md
check "lm.sh finds no disagreement (exit $rc)" [ "$rc" -eq 0 ]
check "one step: every weight and Adam slot within rtol 1e-4" \
  grep -q "after the step | 24 shared tensors (21 float), 0 outside rtol 0.0001" "$R"
check "one step: the same loss and log_pplx" sh -c "! grep -q 'DISAGREE: one step' \"$R\""
check "four evaluations" [ "$(grep -c '^| \(Lingvo\|lingvoc\) | \(Lingvo\|lingvoc\) | [0-9]' "$R")" -eq 4 ]
check "no DISAGREE line" sh -c "! grep -q DISAGREE \"$R\""
check "tf.train.load_checkpoint: Lingvo's names, dtypes and shapes" grep -q "problems: 0" "$R"
check "params.txt: no unexplained difference" grep -q "unexplained 0" "$R"
if [ "${LINGVO_ASR:-0}" = 1 ]; then
  RUNS=0 STEPS=60 WORK="$T/asr" bash "$LV_ROOT/scripts/lingvo_peer/asr.sh" >"$T/asr.out" 2>&1
  rc=$?
  check "asr.sh finds no disagreement (exit $rc)" [ "$rc" -eq 0 ]
  check "asr: the same hypotheses both ways" [ "$(grep -c 'every hypothesis equal in order: 8,' "$T/asr/report.md")" -eq 2 ]
  [ "$rc" -eq 0 ] || cat "$T/asr.out"
fi
[ "$NFAIL" -eq 0 ] || cat "$T/out"
finish
