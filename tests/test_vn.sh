#!/usr/bin/env bash
# Variational weight noise end to end (task.vn.global_vn, task.train.vn_std,
# task.train.vn_start_step) with the real executables on the tiny RNMT punctuator of
# tests/data/decode_golden: inspect_params lists Lingvo's vn params on every layer; the
# trainer logs once when the noise starts; two runs with the noise are bit-identical, and
# differ from a run without it; a run with vn_std 0 is bit-identical to one that never
# mentions noise; kill -9 and resume is bit-identical with the noise on; the evaler and
# the decoder never add noise (the same metrics and outputs with and without it in their
# config); task.vn.scale set directly exits 2 as Lingvo refuses it; vn_std NaN or inf exits
# 2, a negative one warns and trains without noise (Lingvo's vn_std > 0 rule). Per-step noise on the
# attention and the softmax: logged, deterministic, kill -9 and resume bit-identical;
# on the task of an LSTM model it exits 2 as Lingvo's RNNCell refuses it.
. "$(dirname "$0")/lib.sh"
. "$LV_ROOT/tests/data/decode_golden/models.sh"
M=punctuator.codelab.RNMTTinyTest
BASE="$PUNCT_OV; cluster.num_threads: 1"
VN="task.vn.global_vn: true; task.train.vn_std: 0.075; task.train.vn_start_step: 10"
TRAIN=("$LV_BIN/trainer" --model=$M --run_locally=cpu --mode=sync --log_interval_steps=10)
not() { ! "$@"; }

# 1. inspect_params: the vn params on the task and on its layers, vn_std and vn_start_step.
"$LV_BIN/trainer" --model=$M --mode=inspect_params --logdir="$T/ip" --model_params_override="$BASE; $VN" \
  >"$T/ip.log" 2>&1
check "inspect_params exits 0" [ $? -eq 0 ]
P="$T/ip/train-params.txt"
for k in scale global_vn per_step_vn seed deterministic use_uniform_noise weight_norm_type weight_norm_stop_grad \
  start_step; do
  check "inspect_params lists task.vn.$k" grep -q "^task.vn.$k : " "$P"
done
check "task.vn.global_vn is True" grep -q "^task.vn.global_vn : True" "$P"
check "task.train.vn_std 0.075" grep -q "^task.train.vn_std : 0.075" "$P"
check "task.train.vn_start_step 10" grep -q "^task.train.vn_start_step : 10" "$P"
check "layers have vn (the decoder's softmax)" grep -q "^task.decoder.softmax.vn.global_vn : False" "$P"
check "ProjectionLayer has enable_vn" grep -q "^task.encoder.proj_tpl.enable_vn : False" "$P"

# 2. Noise: logged once at vn_start_step; deterministic; different from no noise.
S="train.max_steps: 30; train.save_interval_steps: 30"
"${TRAIN[@]}" --logdir="$T/a" --model_params_override="$BASE; $VN; $S" >"$T/a.log" 2>&1
check "trainer with noise exits 0" [ $? -eq 0 ]
check "noise announced at start-up" grep -q "variational weight noise (task.train.vn_std 0.075) on 46 variables from step 10" "$T/a.log"
check "one line when the noise starts, at step 10" \
  [ "$(grep -c 'step 10: variational weight noise is on (task.train.vn_start_step 10)' "$T/a.log")" -eq 1 ]
"${TRAIN[@]}" --logdir="$T/a2" --model_params_override="$BASE; $VN; $S" >"$T/a2.log" 2>&1
"${TRAIN[@]}" --logdir="$T/n" --model_params_override="$BASE; $S" >"$T/n.log" 2>&1
"${TRAIN[@]}" --logdir="$T/z" --model_params_override="$BASE; $S; task.vn.global_vn: true; task.train.vn_std: 0.0" \
  >"$T/z.log" 2>&1
ckpt_dump "$T/a/train/ckpt-00000030" >"$T/wa"
ckpt_dump "$T/a2/train/ckpt-00000030" >"$T/wa2"
ckpt_dump "$T/n/train/ckpt-00000030" >"$T/wn"
ckpt_dump "$T/z/train/ckpt-00000030" >"$T/wz"
check "dumps are complete" [ "$(grep -c tensor_name "$T/wa")" -gt 40 ]
check "two runs with noise are bit-identical" cmp -s "$T/wa" "$T/wa2"
check "noise changes the training" not cmp -s "$T/wa" "$T/wn"
check "vn_std 0 is bit-identical to no noise" cmp -s "$T/wn" "$T/wz"
check "vn_std 0 logs no noise" not grep -q "variational weight noise" "$T/z.log"
# Before vn_start_step the runs agree: the step-10 checkpoints are the same.
S10="train.max_steps: 10; train.save_interval_steps: 10"
"${TRAIN[@]}" --logdir="$T/b10" --model_params_override="$BASE; $VN; $S10" >"$T/b10.log" 2>&1
"${TRAIN[@]}" --logdir="$T/n10" --model_params_override="$BASE; $S10" >"$T/n10.log" 2>&1
check "no noise before vn_start_step (same weights at step 10)" \
  cmp -s <(ckpt_dump "$T/b10/train/ckpt-00000010") <(ckpt_dump "$T/n10/train/ckpt-00000010")
check "no noise line before vn_start_step" not grep -q "variational weight noise is on" "$T/b10.log"

# 3. kill -9 mid-run with the noise on, restart: the same weights as the uninterrupted
# run (and the restart says the noise is on, resumed past its start).
R="$BASE; $VN; train.max_steps: 200; train.save_interval_steps: 50"
"${TRAIN[@]}" --logdir="$T/u" --model_params_override="$R" >"$T/u.log" 2>&1
"${TRAIN[@]}" --logdir="$T/k" --model_params_override="$R" >"$T/k1.log" 2>&1 &
pid=$!
wait_ckpt_listed "$T/k/train" 50
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
check "killed before the end" [ ! -f "$T/k/train/ckpt-00000200.index" ]
"${TRAIN[@]}" --logdir="$T/k" --model_params_override="$R" >"$T/k2.log" 2>&1
check "restart exits 0" [ $? -eq 0 ]
check "restart resumed from a checkpoint" grep -q "restored .* tensors" "$T/k2.log"
check "restart says the noise is on" grep -q "variational weight noise is on (resumed past its start)" "$T/k2.log"
check "same weights and slots after kill -9 and resume with noise" \
  cmp -s <(ckpt_dump "$T/u/train/ckpt-00000200") <(ckpt_dump "$T/k/train/ckpt-00000200")

# 4. The evaler and the decoder add no noise: the same metrics and outputs whether their
# config has it or not.
for cfg in n v; do
  ov="$BASE"; [ $cfg = v ] && ov="$BASE; $VN"
  "$LV_BIN/evaler" --model=$M --logdir="$T/a" --dataset=Test --once --model_params_override="$ov" \
    >"$T/e$cfg.log" 2>&1
  check "evaler ($cfg) exits 0" [ $? -eq 0 ]
  "$LV_BIN/decoder" --model=$M --logdir="$T/a" --dataset=Test --once --model_params_override="$ov" \
    >"$T/d$cfg.log" 2>&1
  check "decoder ($cfg) exits 0" [ $? -eq 0 ]
  cat "$T/a/decoder_test/decoder_out_000000030" "$T/a/decoder_test/score-00000030.txt" | grep -v "/sec" >"$T/out$cfg"
  grep -o "eval_test: step: .*examples" "$T/e$cfg.log" >"$T/em$cfg"
  check "evaler ($cfg) warns of no params drift" not grep -q "differ from this job's" "$T/e$cfg.log"
  rm -rf "$T/a/eval_test" "$T/a/decoder_test"
done
check "evaler metrics reported" [ -s "$T/emn" ]
check "the evaler's metrics do not depend on the noise settings" cmp -s "$T/emn" "$T/emv"
check "decoder outputs written" grep -q "^hyp 0: score" "$T/outn"
check "the decoder's outputs do not depend on the noise settings" cmp -s "$T/outn" "$T/outv"

# 5. Lingvo's refusals: vn.scale (and vn.start_step) on the task, exit 2, nothing written.
expect_exit 2 "task.vn.scale set directly" "${TRAIN[@]}" --logdir="$T/bad" \
  --model_params_override="$BASE; $VN; task.vn.scale: 0.1"
err_has "task.vn.scale: A value should not be specified for p.vn.scale"
check "nothing written for a refused config" [ ! -d "$T/bad/train" ] || [ -z "$(ls "$T/bad/train" | grep -v LOCK)" ]
expect_exit 2 "task.vn.start_step set directly" "${TRAIN[@]}" --logdir="$T/bad2" \
  --model_params_override="$BASE; $VN; task.vn.start_step: 3"
err_has "set task.train.vn_start_step instead"
# vn_std NaN or inf is a config error; a negative one is Lingvo's (vn_std > 0 turns noise
# on): no noise, said in the log, the weights of a run without noise.
for bad in nan inf -inf; do
  expect_exit 2 "task.train.vn_std $bad" "${TRAIN[@]}" --logdir="$T/bad_$bad" \
    --model_params_override="$BASE; $VN; task.train.vn_std: $bad"
  err_has "task.train.vn_std: $bad: expected a finite number"
done
S2="train.max_steps: 12; train.save_interval_steps: 12"
"${TRAIN[@]}" --logdir="$T/neg" --model_params_override="$BASE; $VN; task.train.vn_std: -0.075; $S2" >"$T/neg.log" 2>&1
check "trainer with a negative vn_std exits 0" [ $? -eq 0 ]
check "a negative vn_std is said to leave the noise off" grep -q "task.train.vn_std is -0.075: no weight noise" "$T/neg.log"
"${TRAIN[@]}" --logdir="$T/neg0" --model_params_override="$BASE; $S2" >"$T/neg0.log" 2>&1
check "a negative vn_std trains as no noise" \
  cmp -s <(ckpt_dump "$T/neg/train/ckpt-00000012") <(ckpt_dump "$T/neg0/train/ckpt-00000012")

# 6. Per-step noise where Lingvo has it (the attention's and the softmax's own vn).
A=task.decoder.attention.inner_atten_params.vn SM=task.decoder.softmax.vn
PSV="$A.per_step_vn: true; $A.deterministic: true; $A.scale: 0.1; $A.start_step: 10; $SM.per_step_vn: true; \
$SM.deterministic: true; $SM.scale: 0.1; $SM.start_step: 10"
P="$BASE; $PSV; train.max_steps: 60; train.save_interval_steps: 20"
"${TRAIN[@]}" --logdir="$T/p" --model_params_override="$P" >"$T/p.log" 2>&1
check "trainer with per-step noise exits 0" [ $? -eq 0 ]
check "per-step noise announced (34 variables from step 10)" \
  grep -q "per-step variational weight noise (vn.per_step_vn) on 34 variables from step 10" "$T/p.log"
check "one line when the per-step noise starts" \
  [ "$(grep -c 'step 10: per-step variational weight noise is on (from step 10)' "$T/p.log")" -eq 1 ]
"${TRAIN[@]}" --logdir="$T/p2" --model_params_override="$P" >"$T/p2.log" 2>&1
"${TRAIN[@]}" --logdir="$T/pn" --model_params_override="$BASE; train.max_steps: 60; train.save_interval_steps: 20" \
  >"$T/pn.log" 2>&1
check "two runs with per-step noise are bit-identical" \
  cmp -s <(ckpt_dump "$T/p/train/ckpt-00000060") <(ckpt_dump "$T/p2/train/ckpt-00000060")
check "per-step noise changes the training" \
  not cmp -s <(ckpt_dump "$T/p/train/ckpt-00000060") <(ckpt_dump "$T/pn/train/ckpt-00000060")
"${TRAIN[@]}" --logdir="$T/p10" --model_params_override="$BASE; $PSV; $S10" >"$T/p10.log" 2>&1
check "no per-step noise before its start (the same weights at step 10 as without)" \
  cmp -s <(ckpt_dump "$T/p10/train/ckpt-00000010") <(ckpt_dump "$T/n10/train/ckpt-00000010")
"${TRAIN[@]}" --logdir="$T/pk" --model_params_override="$P" >"$T/pk1.log" 2>&1 &
pid=$!
wait_ckpt_listed "$T/pk/train" 20
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
check "per-step run killed before the end" [ ! -f "$T/pk/train/ckpt-00000060.index" ]
"${TRAIN[@]}" --logdir="$T/pk" --model_params_override="$P" >"$T/pk2.log" 2>&1
check "per-step restart resumed" grep -q "restored .* tensors" "$T/pk2.log"
check "same weights after kill -9 and resume with per-step noise" \
  cmp -s <(ckpt_dump "$T/p/train/ckpt-00000060") <(ckpt_dump "$T/pk/train/ckpt-00000060")
expect_exit 2 "per_step_vn on the task of an LSTM model" "${TRAIN[@]}" --logdir="$T/bad3" \
  --model_params_override="$BASE; task.vn.per_step_vn: true; task.vn.deterministic: true; task.train.vn_std: 0.1"
err_has "We do not support per step VN in RNN cells"
finish
