#!/usr/bin/env bash
# The RNMT experiments (under a second, no data needed): mt.wmt14_en_de.WmtEnDeRNMT resolves
# to Lingvo's SetupRNMTParams numbers; without its data the trainer and the decoder exit 2
# naming the missing file and the experiment file that says how to make it (nothing is
# written outside the log directory); mt.bible_en_es.RNMTSmall resolves with the Bible data
# and vocabulary of TransformerSmall.
. "$(dirname "$0")/lib.sh"
W=mt.wmt14_en_de.WmtEnDeRNMT
expect_exit 0 "inspect_params $W" "$LV_BIN/trainer" --model=$W --logdir="$T/wmt" --mode=inspect_params
P=$T/wmt/train-params.txt
for line in "task.cls : 'mt.model.RNMTModel'" "task.name : 'wmt14_en_de_rnmtplus_base'" \
  "task.encoder.num_lstm_layers : 6" "task.encoder.lstm_cell_size : 1024" "task.encoder.encoder_out_dim : 1024" \
  "task.encoder.lstm_tpl.cls : 'LayerNormalizedLSTMCellSimple'" "task.encoder.lstm_tpl.output_nonlinearity : False" \
  "task.encoder.dropout_prob : 0.3" "task.encoder.residual_start : 2" "task.decoder.rnn_layers : 8" \
  "task.decoder.rnn_cell_dim : 1024" "task.decoder.attention.cls : 'MultiHeadedAttention'" \
  "task.decoder.attention.num_attention_heads : 4" "task.decoder.attention.inner_atten_params.cls : 'AdditiveAttention'" \
  "task.decoder.attention.atten_dropout_prob : 0.3" "task.decoder.feed_attention_context_vec_to_softmax : True" \
  "task.decoder.label_smoothing.uncertainty : 0.1" "task.decoder.softmax.num_classes : 32000" \
  "task.decoder.softmax.num_shards : 16" "task.decoder.beam_search.num_hyps_per_beam : 16" \
  "task.decoder.beam_search.length_normalization : 0.2" "task.decoder.beam_search.coverage_penalty : 0.2" \
  "task.train.learning_rate : 0.0001" "task.train.l2_regularizer_weight : 1e-05" \
  "task.train.lr_schedule.cls : 'LinearRampupExponentialDecayScaledByNumSplitSchedule'" \
  "task.train.lr_schedule.decay_end : 1200000" "task.train.optimizer.beta2 : 0.98" \
  "task.train.grad_norm_to_clip_to_zero : 100000.0" "task.train.grad_norm_tracker.cls : 'GradNormTracker'" \
  "task.eval.samples_per_summary : 7500" "input.bucket_batch_limit : [128, 128, 128, 128, 128, 128, 128, 64]" \
  "input.num_samples : 4492447"; do
  check "$W: $line" grep -qxF "$line" "$P"
done
check "$W Test: 2737 samples" grep -qxF "input.num_samples : 2737" "$T/wmt/test-params.txt"
# Without the data: exit 2 naming the pattern and where the recipe is.
NONE="input.file_pattern: tfrecord:$T/none/train.tfrecords-*"
expect_exit 2 "trainer $W without its data" "$LV_BIN/trainer" --model=$W --logdir="$T/log" \
  --model_params_override="$NONE"
err_has "$T/none/train.tfrecords-*"
err_has "The data is made as the comments at the top of"
err_has "experiments/mt/wmt14_en_de.cfg"
check "no checkpoint written" test ! -e "$T/log/train/checkpoint"
expect_exit 2 "decoder $W without its vocabulary" "$LV_BIN/decoder" --model=$W --logdir="$T/log" --once \
  --model_params_override="input.tokenizer.token_vocab_filepath: $T/none/wpm-ende.voc"
err_has "$T/none/wpm-ende.voc"
err_has "experiments/mt/wmt14_en_de.cfg"
R=mt.bible_en_es.RNMTSmall
expect_exit 0 "inspect_params $R" "$LV_BIN/trainer" --model=$R --logdir="$T/small" --mode=inspect_params
for line in "task.cls : 'mt.model.RNMTModel'" "task.encoder.lstm_cell_size : 256" "task.decoder.rnn_layers : 2" \
  "input.file_pattern : '/tmp/bible/train.tfrecord@1'"; do
  check "$R: $line" grep -qxF "$line" "$T/small/train-params.txt"
done
check "$R Test: the held-out books" grep -qxF "input.file_pattern : '/tmp/bible/test.tfrecord@1'" "$T/small/test-params.txt"
check "$R: no Transformer keys left" bash -c "! grep -q transformer_stack '$T/small/train-params.txt'"
# The punctuator codelab: Lingvo's RNMTModel params unchanged on the WEB
# sentences' 16k vocabulary (WmtEnDeRNMT's 378,866,176 minus the 16k fewer rows of two
# embeddings and the softmax: 313,314,176), and the CPU-sized variant.
for m in RNMTModel:313,314,176 RNMTModelSmall:20,877,760; do
  name=${m%%:*}; n=${m#*:}
  expect_exit 0 "inspect_model punctuator.codelab.$name" "$LV_BIN/trainer" --model=punctuator.codelab.$name \
    --logdir="$T/p_$name" --mode=inspect_model
  check "punctuator.codelab.$name: $n parameters" grep -q "total #params: $n\$" "$T/out"
done
expect_exit 0 "inspect_params punctuator.codelab.RNMTModel" "$LV_BIN/trainer" --model=punctuator.codelab.RNMTModel \
  --logdir="$T/pp" --mode=inspect_params
for line in "task.cls : 'punctuator.model.RNMTModel'" "task.name : 'punctuator_rnmt'" "task.eval.samples_per_summary : 2466" \
  "input.bucket_batch_limit : [512, 256, 160, 80, 40]" "task.decoder.softmax.num_classes : 16000"; do
  check "punctuator.codelab.RNMTModel: $line" grep -qxF "$line" "$T/pp/train-params.txt"
done
# The grad norm tracker's checkpoint names are Lingvo's (task scope, learner "loss", the
# tracker's name), so a Lingvo checkpoint resumes in lingvoc and the other way round:
# two steps of RNMTTinyTest on the golden punctuator lines.
P=$LV_ROOT/tests/data/decode_golden/punct
expect_exit 0 "trainer RNMTTinyTest, 2 steps" "$LV_BIN/trainer" --model=punctuator.codelab.RNMTTinyTest --logdir="$T/tiny" \
  --model_params_override="input.file_pattern: text:$P/train.txt; input.tokenizer.vocab_filepath: $P/wpm.voc; input.tokenizer.vocab_size: 128; train.max_steps: 2"
"$LV_BIN/ckpt_inspect" --file_name="$T/tiny/train/ckpt-00000002" | cut -d' ' -f1 >"$T/names"
for v in log_mean log_mean_squared total_weight total_rejections; do
  check "tracker variable punctuator_rnmt/loss/gradient_norm_tracker/$v/var" \
    grep -qxF "punctuator_rnmt/loss/gradient_norm_tracker/$v/var" "$T/names"
done
check "no bare tracker names" bash -c "! grep -qx 'log_mean\|total_weight' '$T/names'"
finish
