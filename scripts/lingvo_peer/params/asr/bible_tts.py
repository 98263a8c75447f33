"""Lingvo experiments for the cross-checks: asr.bible_tts.LasSmall and TinyTest.

Registered by scripts/lingvo_peer/run.py under Lingvo's own module name
(lingvo.tasks.asr.params.bible_tts), so the model names are lingvoc's. Each mirrors the
group of that name in lingvoc's experiments/asr/bible_tts.cfg key for key: Lingvo's
asr.model.AsrModel with its AsrEncoder (two strided 3x3 convolutions with batch norm,
bidirectional LSTMs) and AsrDecoder (an attention LSTM over graphemes, AsciiTokenizer's
76 symbols), reading the records of lingvoc's create_asr_features, which writes Lingvo's
layout (uttid, transcript, frames).

One Lingvo 0.14 fault is repaired, as lingvoc does it (PeerAsrModel): the decoder's
reference transcripts are the ids of every unpadded label, the trailing </s> included
(AsrModel calls DecoderMetrics.ComputeMetrics without eos_id), so each reference ends in
"</s>" glued to its last word ("yes go</s>"): every utterance's last word counts as a
substitution and no hypothesis is ever exact (sacc 0). PeerAsrModel passes the decoder's
target_eos_id, which strips it; LINGVO_PEER_ASR_REF_EOS=1 keeps Lingvo's behaviour.

The records come from the environment (each a Lingvo file pattern, tfrecord: prefix added):
  LINGVO_PEER_ASR_TRAIN  the training records (default /tmp/asr_bible/train.tfrecords-*)
  LINGVO_PEER_ASR_TEST   the Dev and Test records (default /tmp/asr_bible/test.tfrecords-*)
  LINGVO_PEER_ASR_TGT_LEN  the training targets' target_max_length (default the cfg's 400)

Lingvo-only settings, none of which changes the model's numbers: the Dev/Test inputs read
their records once, in file order (one_pass.py). Lingvo's tokenizer pads every target to
target_max_length (GenericInput pads the batch along the batch dimension only, so
lingvoc's pad_to_max_length False has no counterpart here): the padded steps have weight
0, so the loss is the same; the decoder runs target_max_length steps instead of the
longest transcript's.
"""
import os

from lingvo import model_registry
from lingvo.core import base_model_params
from lingvo.core import py_utils
from lingvo.tasks.asr import input_generator
from lingvo.tasks.asr import model
import one_pass  # pylint: disable=g-bad-import-order  (scripts/lingvo_peer, run.py's directory)


class PeerAsrModel(model.AsrModel):
  """AsrModel whose decoder metrics read the references without their </s>."""

  def _ComputeDecoderMetrics(self, decoder_outs, input_batch):
    if os.environ.get('LINGVO_PEER_ASR_REF_EOS'):
      return super()._ComputeDecoderMetrics(decoder_outs, input_batch)
    batch = input_batch.DeepCopy()
    batch.tgt = self._GetTargetForDecoderMetrics(input_batch)
    return self.decoder_metrics.ComputeMetrics(
        decoder_outs, batch, ids_to_strings_fn=self.input_generator.IdsToStrings,
        eos_id=self.params.decoder.target_eos_id)


def _Input(env, default, seed, bounds, limits, source_max_length):
  p = input_generator.AsrInput.Params()
  p.file_pattern = 'tfrecord:' + os.environ.get(env, default)
  p.frame_size = 80
  p.file_random_seed = seed
  p.source_max_length = source_max_length
  p.target_max_length = 400
  p.tokenizer.vocab_size = 76
  p.bucket_upper_bound = bounds
  p.bucket_batch_limit = limits
  return p


def _EvalInput():
  return one_pass.OnePassParams(_Input(
      'LINGVO_PEER_ASR_TEST', '/tmp/asr_bible/test.tfrecords-*', 27182818,
      [300, 500, 800, 1200, 3600], [32, 20, 12, 8, 4], 3600))


@model_registry.RegisterSingleTaskModel
class LasSmall(base_model_params.SingleTaskModelParams):
  """2 convs of 16 channels, 3 BiLSTMs of 128, a decoder LSTM of 256, 76 graphemes."""

  @classmethod
  def Train(cls):
    p = _Input('LINGVO_PEER_ASR_TRAIN', '/tmp/asr_bible/train.tfrecords-*', 1234,
               [300, 500, 800, 1200, 3000], [32, 20, 12, 8, 4], 3000)
    p.target_max_length = int(os.environ.get('LINGVO_PEER_ASR_TGT_LEN', '400'))
    return p

  @classmethod
  def Dev(cls):
    return _EvalInput()

  @classmethod
  def Test(cls):
    return _EvalInput()

  @classmethod
  def Task(cls):
    p = PeerAsrModel.Params()
    p.name = 'las'
    ep = p.encoder
    ep.input_shape = [None, None, 80, 1]
    ep.conv_filter_shapes = [(3, 3, 1, 16), (3, 3, 16, 16)]
    ep.conv_filter_strides = [(2, 2), (2, 2)]
    ep.cnn_tpl.params_init = py_utils.WeightInit.Gaussian(0.001)
    ep.cnn_tpl.bn_decay = 0.99
    ep.proj_tpl.bn_params.decay = 0.99
    ep.num_conv_lstm_layers = 0
    ep.lstm_cell_size = 128
    ep.num_lstm_layers = 3
    dp = p.decoder
    dp.emb.vocab_size = 76
    dp.emb_dim = 76
    dp.softmax.num_classes = 76
    dp.rnn_cell_dim = 256
    dp.rnn_layers = 1
    dp.source_dim = 256
    dp.target_seq_len = 400
    dp.use_unnormalized_logits_as_log_probs = False
    dp.beam_search.num_hyps_per_beam = 4
    dp.beam_search.length_normalization = 1.0
    p.train.Set(learning_rate=1e-3, max_steps=100000, save_interval_seconds=600,
                summary_interval_steps=50)
    p.eval.samples_per_summary = 0
    return p


@model_registry.RegisterSingleTaskModel
class TinyTest(LasSmall):
  """2 convs of 8 channels, 1 BiLSTM of 32, a decoder of 64: lingvoc's suite model."""

  @classmethod
  def Train(cls):
    p = super().Train()
    p.bucket_upper_bound = [3000]
    p.bucket_batch_limit = [8]
    return p

  @classmethod
  def Task(cls):
    p = super().Task()
    ep = p.encoder
    ep.conv_filter_shapes = [(3, 3, 1, 8), (3, 3, 8, 8)]
    ep.cnn_tpl.bn_decay = 0.9
    ep.lstm_cell_size = 32
    ep.num_lstm_layers = 1
    dp = p.decoder
    dp.rnn_cell_dim = 64
    dp.source_dim = 64
    dp.target_seq_len = 200
    dp.beam_search.length_normalization = 0.0
    p.train.Set(learning_rate=3e-3, max_steps=200, summary_interval_steps=10,
                save_interval_seconds=3600)
    return p
