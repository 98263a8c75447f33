#!/usr/bin/env bash
# NaN never passes for a number: a NaN target_weight in one evaluation record stops the
# evaler naming the batch and the metric (exit 2, no score) instead of reporting 0s for
# the whole set; NaN dropout probabilities fail their [0, 1) checks like any value
# outside the range.
. "$(dirname "$0")/lib.sh"
. "$LV_ROOT/tests/data/decode_golden/models.sh"
M=$MODEL_transformer
REC="$G/mt/train.tfrecord-00000-of-00001"

# The golden records with record 5's first target weight 1.0 made NaN (CRCs redone).
PYTHONPATH="$LV_ROOT/tests" python3 - "$REC" "$T/nan.tfrecord" <<'EOF'
import struct, sys
from crc32c import masked_crc32c as masked
raw = open(sys.argv[1], "rb").read()
out, pos, k, patched = bytearray(), 0, 0, False
while pos < len(raw):
    n = struct.unpack_from("<Q", raw, pos)[0]
    data = bytearray(raw[pos + 12:pos + 12 + n])
    pos += 12 + n + 4
    if k == 5:
        at = data.find(b"target_weight")
        one = data.find(struct.pack("<f", 1.0), at)
        assert at >= 0 and one > at, "no target_weight of 1.0 in record 5"
        data[one:one + 4] = struct.pack("<f", float("nan"))
        patched = True
    hdr = struct.pack("<Q", n)
    out += hdr + struct.pack("<I", masked(hdr)) + data + struct.pack("<I", masked(bytes(data)))
    k += 1
assert patched
open(sys.argv[2], "wb").write(bytes(out))
EOF
check "a record file with one NaN target_weight written" test -s "$T/nan.tfrecord"

expect_exit 0 "train 2 steps" "$LV_BIN/trainer" --model=$M --logdir="$T/log" \
  --model_params_override="$OV_transformer; train.max_steps: 2"
expect_exit 0 "evaler on the clean records" "$LV_BIN/evaler" --model=$M --logdir="$T/log" --dataset=Train --once \
  --model_params_override="$OV_transformer"
check "clean records: a score" test -f "$T/log/eval_train/score-00000002.txt"
rm -f "$T/log/eval_train/score-00000002.txt"
NAN_OV="${OV_transformer/input.file_pattern: $G\/mt\/train.tfrecord@1/input.file_pattern: $T/nan.tfrecord}"
expect_exit 2 "evaler on records with a NaN target_weight" "$LV_BIN/evaler" --model=$M --logdir="$T/log" \
  --dataset=Train --once --model_params_override="$NAN_OV"
err_has "gives metric"
err_has "a NaN or Inf weight in the data, e.g. a record's target_weight"
err_has "no score written"
check "NaN weight: no score file" test ! -e "$T/log/eval_train/score-00000002.txt"

# NaN probabilities, each on its own key.
for key in task.encoder.input_dropout_prob task.decoder.input_dropout_prob \
  task.encoder.transformer_stack.transformer_tpl.tr_atten_tpl.residual_dropout_prob \
  task.encoder.transformer_stack.transformer_tpl.tr_atten_tpl.atten_dropout_prob \
  task.encoder.transformer_stack.transformer_tpl.tr_fflayer_tpl.relu_dropout_prob \
  task.encoder.transformer_stack.transformer_tpl.tr_fflayer_tpl.residual_dropout_prob; do
  expect_exit 2 "$key: nan" "$LV_BIN/trainer" --model=$M --logdir="$T/nan.$RANDOM" \
    --model_params_override="$OV_transformer; $key: nan"
  err_has "dropout_prob"
  err_has "must be in [0, 1), got nan"
done
expect_exit 2 "classifier task.dropout_prob: nan" "$LV_BIN/trainer" --model=image.mnist.LeNet5 --logdir="$T/nanc" \
  --model_params_override="input.ckpt: \"/nonexistent/unused\"; task.dropout_prob: nan"
err_has "task.dropout_prob must be in [0, 1), got nan"
finish
