#!/usr/bin/env bash
# Quantization-aware training through the real executables (layers/qdomain.h):
# lm.bible.RnnLmTinyTestQat (task.qdomain.default = PassiveAsymQDomain) trains 30 steps on
# generated text; its checkpoint holds Lingvo's q/<act>_min|max variables for every LSTM
# cell and the softmax (names from a TF run of Lingvo's layers), non-trainable (no Adam
# slots), the trained activations' ranges moved from their (-1, 1) start while the
# inference-only ones (zero_m) stayed; inspect_params prints the domain and its text loads
# back to the same tree; a layer's own qdomain (the identity QDomain on the softmax)
# overrides the task's; the evaler runs on the stored ranges; a cell's own
# qdomain.default with cell_value_cap is exit 2 naming the layer; the float
# RnnLmTinyTest has no q variables; TransformerLmTinyTest (multi-headed attention,
# feed-forward, softmax), the punctuator's RNMTTinyTest (layer-normalized LSTM cells; its
# decoder runs on the stored ranges) and LeNet5 (conv, FC, softmax) train under the task's
# domain with Lingvo's names. bin/export --quantize=int8 (runners/model_export.h) stores the
# QAT weights at their inference values: PassiveAsymQDomain's model with most channels on
# its grid (one scale, the grid's step), SymmetricScheduledClipQDomain's (RnnLmTinyTest
# trained with a clip schedule and fake quantization from step 10) with every channel on
# the end cap's grid, scale 1/128; each int8 file scores Dev within 1% of its float32
# file, without float copies of its weights, on the int8 GEMMs.
. "$(dirname "$0")/lib.sh"
awk -v out="$T" 'BEGIN { n = split("the lord said unto moses and aaron speak to the children of israel saying this is the thing which god hath commanded", w, " "); x = 7
  for (l = 0; l < 400; l++) { x = (x * 16807) % 2147483647; nw = 3 + x % 8; s = ""; st = 1 + x % n
    for (i = 0; i < nw; i++) s = s (i ? " " : "") w[1 + (st + i - 1) % n]
    print s "." > (out "/" (l % 10 == 9 ? "dev.txt" : "train.txt")) } }'
M=lm.bible.RnnLmTinyTestQat
TR="input.file_pattern: \"text:$T/train.txt\"; train.max_steps: 30; train.save_interval_steps: 30"
expect_exit 0 "trainer: 30 steps of $M" "$LV_BIN/trainer" --model=$M --logdir="$T/q" --model_params_override="$TR"
CK=$T/q/train/ckpt-00000030
"$LV_BIN/ckpt_inspect" --file_name="$CK" | cut -d' ' -f1 >"$T/names"
value() { "$LV_BIN/ckpt_inspect" --file_name="$CK" --tensor_name="$1" | tail -1; }
missing=0
for cell in rnns_0 rnns_1; do
  for act in zero_m m_output m_output_projection m_zoneout zero_c mixed c_couple_invert c_input_gate c_forget_gate \
    c_output_gate c_zoneout add_bias; do
    for s in min max; do
      grep -qx "lm/lm/$cell/q/qdomain_default/q/${act}_$s/var" "$T/names" || { echo "  missing $cell $act $s"; missing=1; }
    done
  done
done
for act in inputs logits; do
  for s in min max; do
    grep -qx "lm/lm/softmax/q/qdomain_default/q/${act}_$s/var" "$T/names" || { echo "  missing softmax $act"; missing=1; }
  done
done
check "the checkpoint holds Lingvo's 52 q/<act>_min|max variables (2 cells x 12 acts, softmax inputs and logits)" \
  [ "$missing" = 0 -a "$(grep -c '/q/qdomain_default/q/' "$T/names")" = 52 ]
check "the q variables have no Adam slots (non-trainable)" [ "$(grep -c '/q/.*/Adam' "$T/names")" = 0 ]
mmin=$(value lm/lm/rnns_0/q/qdomain_default/q/m_output_min/var)
mmax=$(value lm/lm/rnns_0/q/qdomain_default/q/m_output_max/var)
lmax=$(value lm/lm/softmax/q/qdomain_default/q/logits_max/var)
zmax=$(value lm/lm/rnns_0/q/qdomain_default/q/zero_m_max/var)
echo "  rnns_0 m_output [$mmin, $mmax], softmax logits max $lmax, zero_m max $zmax"
check "trained ranges moved from (-1, 1): m_output inside it, the logits' max elsewhere" \
  awk -v a="$mmin" -v b="$mmax" -v l="$lmax" 'BEGIN { exit !(a > -1 && a < 0 && b < 1 && b > 0 && l != 1) }'
check "an inference-only act (zero_m) keeps its default range" [ "$zmax" = 1.0 ]

expect_exit 0 "evaler on Dev with the stored ranges" "$LV_BIN/evaler" --model=$M --logdir="$T/q" --dataset=Dev --once \
  --model_params_override="input.file_pattern: \"text:$T/dev.txt\""

# ---- bin/export --quantize=int8 with the ranges QAT learned (runners/model_export.h) ----
# scales FILE NAME: the per-channel scales of qint8 tensor NAME, one a line.
scales() {
  python3 - "$1" "$2" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
off, nsec = 40, struct.unpack_from("<I", d, 16)[0]
for _ in range(nsec):
    tag, n = d[off:off + 4], struct.unpack_from("<Q", d, off + 8)[0]
    if tag == b"TENS":
        p = off + 24
        ln = struct.unpack_from("<I", d, p)[0]; name = d[p + 4:p + 4 + ln].decode(); p += 4 + ln
        ln = struct.unpack_from("<I", d, p)[0]; dt = d[p + 4:p + 4 + ln].decode(); p += 4 + ln
        rank = struct.unpack_from("<I", d, p)[0]; p += 4 + 8 * rank
        size = struct.unpack_from("<Q", d, p)[0]; p = (p + 8 + 7) & ~7
        p = (p + size + 7) & ~7
        if name == sys.argv[2] and dt == "qint8":
            axis, count = struct.unpack_from("<II", d, p)
            print("\n".join(repr(v) for v in struct.unpack_from("<%df" % count, d, p + 8)))
    off = (off + 24 + n + 7) & ~7
PY
}
# corpus_pplx FILE: the corpus perplexity of a --score_text output.
corpus_pplx() { sed -n 's/^corpus:.*perplexity \([0-9.]*\).*/\1/p' "$1"; }
# qat_export NAME LOGDIR MODEL: float32 and int8 exports, --score_text of dev.txt with each
# (int8: its own GEMMs, and float32 GEMMs on the same weights); the export's log line.
qat_export() {
  local n=$1 dir=$2 model=$3 ov="input.file_pattern: \"text:$T/train.txt\"; ${4:-}"
  expect_exit 0 "$n: bin/export (float32)" "$LV_BIN/export" --model=$model --logdir="$dir" --model_params_override="$ov" \
    --out="$T/$n.lvm"
  expect_exit 0 "$n: bin/export --quantize=int8" "$LV_BIN/export" --model=$model --logdir="$dir" \
    --model_params_override="$ov" --quantize=int8 --out="$T/$n.q.lvm"
  grep -o 'export: [0-9]* weights of quantization domains.*' "$T/err" >"$T/$n.xlog"
  "$LV_BIN/decoder" --model_file="$T/$n.lvm" --score_text="$T/dev.txt" >"$T/$n.float" 2>/dev/null
  "$LV_BIN/decoder" --model_file="$T/$n.q.lvm" --score_text="$T/dev.txt" >"$T/$n.int8" 2>"$T/err"
  LINGVOC_INT8=float "$LV_BIN/decoder" --model_file="$T/$n.q.lvm" --score_text="$T/dev.txt" >"$T/$n.deq" 2>/dev/null
  echo "  $n: $(cat "$T/$n.xlog"); Dev perplexity float32 $(corpus_pplx "$T/$n.float"), int8 $(corpus_pplx "$T/$n.int8")"
  check "$n: the int8 model's Dev perplexity within 1% of float32's" awk -v a="$(corpus_pplx "$T/$n.float")" \
    -v b="$(corpus_pplx "$T/$n.int8")" 'BEGIN { r = b / a - 1; exit !(a > 0 && r <= 0.01 && r >= -0.01) }'
  check "$n: its weights have no float copies, and the int8 GEMMs ran (float32 GEMMs score otherwise)" sh -c \
    'grep -q "quantized weights without float copies" "$0" && ! cmp -s "$1" "$2"' "$T/err" "$T/$n.int8" "$T/$n.deq"
}
# PassiveAsymQDomain ($M, 30 steps above): the cells' wm and the softmax's weight stored
# at their fake-quantized values, most channels on the domain's grid (the rest, whose
# values reach past 127 steps from zero, rescaled).
qat_export passive "$T/q" $M
check "passive: the 3 weights at their inference values, most of their channels on the grid" awk '{
  for (i = 1; i <= NF; i++) if ($i == "of" && $(i + 1) == "their") { on = $(i - 1); all = $(i + 2) }
  exit !($2 == 3 && on >= all / 2 && all > 0) }' "$T/passive.xlog"
scales "$T/passive.q.lvm" lm/lm/rnns_0/wm/var | sort | uniq -c | sort -rn | head -1 >"$T/mode"
check "passive: most of rnns_0/wm's 128 column scales are one grid step ($(cat "$T/mode"))" \
  awk '{ exit !($1 >= 64 && $2 > 0) }' "$T/mode"
# SymmetricScheduledClipQDomain (clipping to a cap from 8 down to 1 over steps 0-10, fake
# quantization from step 10): every channel on the grid of the final cap 1, step 1/128.
SC="task.qdomain.default.cls: 'SymmetricScheduledClipQDomain'; task.qdomain.default.cc_schedule.clip_end_step: 10; \
task.qdomain.default.cc_schedule.quant_start_step: 10"
expect_exit 0 "trainer: 30 steps of RnnLmTinyTest with SymmetricScheduledClipQDomain" "$LV_BIN/trainer" \
  --model=lm.bible.RnnLmTinyTest --logdir="$T/sc" --model_params_override="$TR; $SC"
qat_export scheduled "$T/sc" lm.bible.RnnLmTinyTest "$SC"
check "scheduled: every channel of the 3 weights on the grid ($(cat "$T/scheduled.xlog"))" awk '{
  for (i = 1; i <= NF; i++) if ($i == "of" && $(i + 1) == "their") { on = $(i - 1); all = $(i + 2) }
  exit !($2 == 3 && on == all && all > 0) }' "$T/scheduled.xlog"
{ scales "$T/scheduled.q.lvm" lm/lm/rnns_1/wm/var; scales "$T/scheduled.q.lvm" lm/lm/softmax/weight_0/var; } |
  sort | uniq -c >"$T/sc_scales"
check "scheduled: rnns_1/wm's 128 and the softmax's scales are all 1/128, the end cap's step ($(tr -s ' ' <"$T/sc_scales"))" \
  awk '{ n++; c = $1; v = $2 } END { exit !(n == 1 && v == "0.0078125" && c > 128) }' "$T/sc_scales"

expect_exit 0 "inspect_params of $M" "$LV_BIN/trainer" --model=$M --logdir="$T/insp" --mode=inspect_params
P=$T/insp/train-params.txt
check "inspect_params prints the task's domain" grep -qx "task.qdomain.default.cls : 'PassiveAsymQDomain'" "$P"
check "inspect_params prints its ema_decay" grep -qx "task.qdomain.default.ema_decay : 0.99" "$P"
check "inspect_params prints the cell's named domains" grep -qx "task.lm.rnns.cell_tpl.qdomain.fullyconnected : NoneType" "$P"
expect_exit 0 "inspect_params from the printed text" "$LV_BIN/trainer" --model=$M --logdir="$T/insp2" \
  --mode=inspect_params --model_params_file_override="$P"
check "the printed params load back to the same text (but cluster.logdir)" \
  cmp -s <(grep -v '^cluster.logdir ' "$P") <(grep -v '^cluster.logdir ' "$T/insp2/train-params.txt")

expect_exit 0 "trainer: the softmax's own identity QDomain" "$LV_BIN/trainer" --model=$M --logdir="$T/own" \
  --model_params_override="$TR; train.max_steps: 1; task.lm.softmax.qdomain.default.cls: 'QDomain'"
"$LV_BIN/ckpt_inspect" --file_name="$T/own/train/ckpt-00000001" | cut -d' ' -f1 >"$T/own_names"
check "a layer's own qdomain overrides the task's (no softmax q variables, the cells' stay)" \
  [ "$(grep -c 'softmax/q/' "$T/own_names")" = 0 -a "$(grep -c 'rnns_0/q/' "$T/own_names")" = 24 ]

expect_exit 2 "a cell's own qdomain.default with cell_value_cap" "$LV_BIN/trainer" --model=lm.bible.RnnLmTinyTest \
  --logdir="$T/cap" --model_params_override="$TR; task.lm.rnns.cell_tpl.qdomain.default.cls: 'PassiveAsymQDomain'"
err_has "rnns_0: cell_value_cap must be None with qdomain.default set"

expect_exit 0 "trainer: 1 step of the float RnnLmTinyTest" "$LV_BIN/trainer" --model=lm.bible.RnnLmTinyTest \
  --logdir="$T/f" --model_params_override="$TR; train.max_steps: 1"
check "the float model has no q variables" \
  [ "$("$LV_BIN/ckpt_inspect" --file_name="$T/f/train/ckpt-00000001" | grep -c '/q/')" = 0 ]

# TransformerLmTinyTest under the task's domain: the multi-headed attention's projections
# and softmax, the feed-forward projections, the softmax.
expect_exit 0 "trainer: 3 steps of TransformerLmTinyTest with task.qdomain.default PassiveAsymQDomain" \
  "$LV_BIN/trainer" --model=lm.bible.TransformerLmTinyTest --logdir="$T/tr" \
  --model_params_override="$TR; train.max_steps: 3; train.save_interval_steps: 3; task.qdomain.default.cls: 'PassiveAsymQDomain'"
"$LV_BIN/ckpt_inspect" --file_name="$T/tr/train/ckpt-00000003" | cut -d' ' -f1 | grep '/q/' >"$T/tr_names"
A=lm/lm/layer_0/multihead_self_atten/multihead_atten
missing=0
for v in $A/q/qdomain_default/q/{source,query,ctx_pre,ctx_post}_proj_{matmul,add}_{min,max}/var \
  $A/q/qdomain_default/q/logits_{min,max}/var $A/inner_att/q/qdomain_default/q/logits_{min,max}/var \
  lm/lm/layer_0/tr_fflayer/fflayer/fflayer_0/q/qdomain_default/q/activation_{min,max}/var \
  lm/lm/layer_0/tr_fflayer/fflayer/fflayer_1/q/qdomain_default/q/affine_matmul_{min,max}/var \
  lm/lm/softmax/q/qdomain_default/q/{inputs,logits}_{min,max}/var; do
  grep -qx "$v" "$T/tr_names" || { echo "  missing $v"; missing=1; }
done
check "the Transformer's attention, feed-forward and softmax ranges under Lingvo's names (28)" \
  [ "$missing" = 0 -a "$(wc -l <"$T/tr_names")" = 28 ]
qmax=$("$LV_BIN/ckpt_inspect" --file_name="$T/tr/train/ckpt-00000003" --tensor_name=$A/q/qdomain_default/q/query_proj_add_max/var | tail -1)
check "the attention's query projection range was trained ($qmax)" [ "$qmax" != 1.0 ]

# The punctuator's RNMTTinyTest (LayerNormalizedLSTMCellSimple encoder and decoder, a
# multi-headed attention, a projection, the softmax) under the task's domain: 2 steps, its
# ranges trained, the decoder evaluates with them.
. "$LV_ROOT/tests/data/decode_golden/models.sh"
PM=$(golden_var MODEL punct_rnmt)
PO="$(golden_var OV punct_rnmt); train.max_steps: 2; train.save_interval_steps: 2; task.qdomain.default.cls: 'PassiveAsymQDomain'"
expect_exit 0 "trainer: 2 steps of $PM with task.qdomain.default PassiveAsymQDomain" "$LV_BIN/trainer" --model=$PM \
  --logdir="$T/pr" --model_params_override="$PO"
PCK=$T/pr/train/ckpt-00000002
"$LV_BIN/ckpt_inspect" --file_name="$PCK" | cut -d' ' -f1 | grep '/q/' >"$T/pr_names"
check "the layer-normalized cells' per-gate ranges (add_bias_0..3) are there" \
  [ "$(grep -c '/L0_rnn_fwd/q/qdomain_default/q/add_bias_[0-3]_m..\/var$' "$T/pr_names")" = 8 ]
ab=$("$LV_BIN/ckpt_inspect" --file_name="$PCK" --tensor_name=punctuator_rnmt/enc/L0_rnn_fwd/q/qdomain_default/q/add_bias_2_max/var | tail -1)
check "a gate's range was trained ($ab)" [ "$ab" != 1.0 ]
expect_exit 0 "decoder on Test with the stored ranges" "$LV_BIN/decoder" --model=$PM --logdir="$T/pr" --dataset=Test \
  --once --model_params_override="$(golden_var OV punct_rnmt); task.qdomain.default.cls: 'PassiveAsymQDomain'"

# LeNet5 (ConvLayer, FCLayer, SimpleFullSoftmax) under the task's domain: 3 steps.
if ensure_fashion_mnist; then
  expect_exit 0 "trainer: 3 steps of LeNet5 with task.qdomain.default PassiveAsymQDomain" "$LV_BIN/trainer" \
    --model=image.mnist.LeNet5 --logdir="$T/l5" --model_params_override="input.ckpt: \"$FM\"; input.num_samples: 640; \
input.batch_size: 64; train.max_steps: 3; train.save_interval_steps: 3; task.qdomain.default.cls: 'PassiveAsymQDomain'"
  "$LV_BIN/ckpt_inspect" --file_name="$T/l5/train/ckpt-00000003" | cut -d' ' -f1 | grep '/q/' >"$T/l5_names"
  check "LeNet5's conv0, conv1, fc and softmax ranges under Lingvo's names" [ "$(tr '\n' ' ' <"$T/l5_names")" = \
    "lenet5/conv0/q/qdomain_default/q/activation_max/var lenet5/conv0/q/qdomain_default/q/activation_min/var \
lenet5/conv1/q/qdomain_default/q/activation_max/var lenet5/conv1/q/qdomain_default/q/activation_min/var \
lenet5/fc/q/qdomain_default/q/activation_max/var lenet5/fc/q/qdomain_default/q/activation_min/var \
lenet5/softmax/q/qdomain_default/q/inputs_max/var lenet5/softmax/q/qdomain_default/q/inputs_min/var \
lenet5/softmax/q/qdomain_default/q/logits_max/var lenet5/softmax/q/qdomain_default/q/logits_min/var " ]
else
  skip_part "LeNet5 with a qdomain: no Fashion-MNIST checkpoint (bin/keras2ckpt failed)"
fi
finish
exit $?
