#!/usr/bin/env bash
# Lingvo's own WMT'14 En-De test records (lingvo/tasks/mt/testdata/
# wmt14_ende_wpm_32k_test.tfrecord, 32k wordpieces, copied into tests/data/lingvo_mt/)
# train mt.wmt14_en_de.WmtEnDeTransformerSmall, Lingvo's registered experiment, for 20
# steps with its params unchanged except: the records' path, batches of 16 in one
# bucket (a handful of records per step instead of up to 512), and warmup_steps 100
# (with Lingvo's 40000 the learning rate of the first 20 steps is ~1e-6 and the loss
# would not move). The loss falls by more than 2 nats; the checkpoint holds Lingvo's
# variable names under the task name.
. "$(dirname "$0")/lib.sh"
R="$LV_ROOT/tests/data/lingvo_mt/wmt14_ende_wpm_32k_test.tfrecord"
M=mt.wmt14_en_de.WmtEnDeTransformerSmall
NOVOC="input.tokenizer.token_vocab_filepath: $T/absent/wpm/wpm-ende.voc"
# Lingvo's default data path, read from the params (not from /tmp/wmt14 itself, which
# a machine that ran Lingvo's recipe or another run of this suite may hold); the
# missing-data error on a directory of this run's own, which surely lacks the records.
expect_exit 0 "inspect_params $M" "$LV_BIN/trainer" --model=$M --logdir="$T/params" --mode=inspect_params
check "Lingvo's default data path" grep -qxF "input.file_pattern : 'tfrecord:/tmp/wmt14/wpm/train.tfrecords-*'" \
  "$T/params/train-params.txt"
expect_exit 2 "trainer without Lingvo's WMT data" "$LV_BIN/trainer" --model=$M --logdir="$T/none" \
  --model_params_override="input.file_pattern: \"tfrecord:$T/absent/wpm/train.tfrecords-*\"; $NOVOC"
err_has "$T/absent/wpm/train.tfrecords-*"
err_has "wmt14_en_de.cfg"
O="input.file_pattern: \"tfrecord:$R\"; $NOVOC; train.max_steps: 20; task.train.lr_schedule.warmup_steps: 100"
O="$O; input.bucket_upper_bound: [100]; input.bucket_batch_limit: [16]"
# Peak memory: Lingvo's 10M-record shuffle buffer over these 100 records and the 32k
# softmax once took 11.5 GB here.
TIME=()
if [ -x /usr/bin/time ]; then TIME=(/usr/bin/time -v -o "$T/time"); else skip_part "/usr/bin/time is missing: peak RSS not checked"; fi
expect_exit 0 "trainer: 20 steps of $M on Lingvo's records" "${TIME[@]}" "$LV_BIN/trainer" --model=$M --logdir="$T/run" \
  --model_params_override="$O" --v=1
if [ -f "$T/time" ]; then
  rss=$(awk '/Maximum resident set size/ { print int($NF / 1024) }' "$T/time")
  check "peak RSS ${rss} MB < 2048 MB" test "${rss:-999999}" -lt 2048
fi
grep -o 'step *[0-9]*: loss [0-9.]*' "$T/err" >"$T/losses"
first=$(head -1 "$T/losses" | awk '{print $NF}')
last=$(tail -1 "$T/losses" | awk '{print $NF}')
check "20 steps logged" test "$(wc -l <"$T/losses")" -eq 20
check "first loss near ln(32000) = 10.4 + smoothing ($first)" awk -v a="$first" 'BEGIN { exit !(a > 10 && a < 13) }'
check "loss falls by > 2 ($first -> $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 2) }'
check "checkpoint at step 20" test -f "$T/run/train/ckpt-00000020.index"
"$LV_BIN/ckpt_inspect" --file_name="$T/run/train/ckpt-00000020" >"$T/vars" 2>&1
# 8 embedding shards (32000 x 64 over min_params_per_shard 262144, as Lingvo computes).
for v in wmt14_en_de_transformer_small/enc/token_emb/var_7/ \
  wmt14_en_de_transformer_small/dec/softmax/weight_15 wmt14_en_de_transformer_small/dec/trans_layer_1/; do
  check "checkpoint has $v" grep -q "$v" "$T/vars"
done
finish
