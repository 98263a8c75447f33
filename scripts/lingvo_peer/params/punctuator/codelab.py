"""Lingvo experiments for the cross-checks: punctuator.codelab.RNMTModel and smaller.

Registered by scripts/lingvo_peer/run.py under Lingvo's own module name
(lingvo.tasks.punctuator.params.codelab), so the model names are Lingvo's. RNMTModel is
the params of Lingvo's lingvo/tasks/punctuator/params/codelab.py (which the PyPI wheel
does not ship): base_config.SetupRNMTParams on punctuator.model.RNMTModel. The datasets
and RNMTModelSmall / RNMTTinyTest mirror lingvoc's experiments/punctuator/codelab.cfg
groups of those names, key for key. Lingvo 0.14's PunctuatorInput reads its lines through
file_datasource (a glob, no 'text:' prefix), so the codelab's file_random_seed,
file_parallelism and file_buffer_size have no counterpart there.

The data comes from the environment (scripts/prepare_punctuator.sh DIR makes it):
  LINGVO_PEER_PUNCT_DIR    train.txt and test.txt (default /tmp/punctuator_data)
  LINGVO_PEER_PUNCT_TRAIN  the training lines (default $DIR/train.txt)
  LINGVO_PEER_PUNCT_TEST   the test lines (default $DIR/test.txt)
  LINGVO_PEER_PUNCT_VOCAB  the WPM vocabulary (default $DIR/web_wpm.16000.vocab)
  LINGVO_PEER_PUNCT_VOCAB_SIZE  the tokenizer's vocab_size (default 16000)
  LINGVO_PEER_PUNCT_ONE_EPOCH   set: training reads its file once, unshuffled (below)
  LINGVO_PEER_PUNCT_ZERO_PADDINGS  set: Lingvo 0.14's own padding (PeerPunctuatorInput)
"""
import os

from lingvo import model_registry
import lingvo.compat as tf
from lingvo.core import base_model_params
from lingvo.core import py_utils
from lingvo.tasks.mt import base_config
from lingvo.tasks.punctuator import input_generator
from lingvo.tasks.punctuator import model


def _Env(name, default):
  return os.environ.get(name, default)


def _Dir():
  return _Env('LINGVO_PEER_PUNCT_DIR', '/tmp/punctuator_data')


class OneEpochTextLines(input_generator.TextLines):
  """TextLines read once in file order, for the one-step check.

  The trainer's TextLines shuffles and repeats, and PunctuatorInput's parallel map is
  non-deterministic (cluster.require_sequential_input_order is False in a trainer, and the
  trainer sets the cluster after --model_params_override), so a batch of a file of exactly
  batch-size lines may hold a line of the second pass instead of one of the first. Read
  once, the first batch is every line of the file (in some order).
  """

  def GetDataset(self):
    return tf.data.TextLineDataset(self.params.file_pattern)


class PeerPunctuatorInput(input_generator.PunctuatorInput):
  """Lingvo's PunctuatorInput with two fixes the cross-checks need.

  Paddings: the bucketing pads each example to source_max_length / target_max_length
  with _InputPaddingValue, which returns 1 only for keys ending in '_paddings'; the keys
  are 'src.paddings' and 'tgt.paddings', so Lingvo 0.14 pads them with 0 and the model
  reads every sentence followed by real-looking <unk> (id 0) tokens up to the bucket's
  maximum (the encoder runs over them, attention attends to them; the loss is unchanged
  only because tgt.weights pads with 0). Padded with 1 here, as the docstring of
  PunctuatorInput says and as lingvoc pads; LINGVO_PEER_PUNCT_ZERO_PADDINGS=1 keeps
  Lingvo's behaviour.

  End of the evaler's pass: Lingvo's evaler stops after eval.samples_per_summary samples,
  counted by the num_samples_in_batch metric, which is 0 for this input in Lingvo 0.14,
  so only the OutOfRange of a resettable input generator ends its loop
  (runners.Evaler._EvalOnce); PunctuatorInput does not implement Reset. This one resets
  its tf.data iterator.

  Decoding: mt.model.RNMTModel's decoder turns ids back to text with
  input_generator.IdsToStrings, which Lingvo 0.14 defines on BaseSequenceInputGenerator
  but not on PunctuatorInput (a BaseInputGenerator): the decoder job fails with
  "IdsToStrings is not a sub-layer" (and then "tokenizer_dict is not a sub-layer", which
  mt.model reads to pick the key). This one delegates to its tokenizer, as
  BaseSequenceInputGenerator does.
  """

  @classmethod
  def Params(cls):
    p = super().Params()
    p.resettable = True
    return p

  def Reset(self, sess=None):
    self.datasource.Reset(sess)

  @property
  def tokenizer_dict(self):
    return {'default': self.tokenizer}

  def IdsToStrings(self, ids, lens, key=None):
    del key  # one tokenizer
    return self.tokenizer.IdsToStrings(ids, lens)

  def _InputPaddingValue(self, key, tensorspec):
    if key.endswith('paddings') and not os.environ.get('LINGVO_PEER_PUNCT_ZERO_PADDINGS'):
      return tf.ones([], dtype=tensorspec.dtype)
    return super()._InputPaddingValue(key, tensorspec)


class WebCorpusWPM(base_model_params.SingleTaskModelParams):
  """The codelab's BrownCorpusWPM datasets on lingvoc's World English Bible split."""

  @classmethod
  def _Input(cls, path, bounds, limits):
    p = PeerPunctuatorInput.Params()
    p.file_datasource.file_pattern = path
    p.bucket_upper_bound = bounds
    p.bucket_batch_limit = limits
    p.tokenizer.vocab_filepath = _Env(
        'LINGVO_PEER_PUNCT_VOCAB', os.path.join(_Dir(), 'web_wpm.16000.vocab'))
    p.tokenizer.vocab_size = int(_Env('LINGVO_PEER_PUNCT_VOCAB_SIZE', '16000'))
    p.tokenizer.pad_to_max_length = False
    p.source_max_length = bounds[-1] + 2
    p.target_max_length = bounds[-1] + 2
    return p

  @classmethod
  def Train(cls):
    p = cls._Input(
        _Env('LINGVO_PEER_PUNCT_TRAIN', os.path.join(_Dir(), 'train.txt')),
        [10, 20, 30, 60, 120], [512, 256, 160, 80, 40])
    if os.environ.get('LINGVO_PEER_PUNCT_ONE_EPOCH'):
      path = p.file_datasource.file_pattern
      p.file_datasource = OneEpochTextLines.Params().Set(file_pattern=path)
    return p

  @classmethod
  def Test(cls):
    return cls._Input(
        _Env('LINGVO_PEER_PUNCT_TEST', os.path.join(_Dir(), 'test.txt')),
        [10, 20, 30, 60, 120, 200], [16] * 4 + [4] * 2)


@model_registry.RegisterSingleTaskModel
class RNMTModel(WebCorpusWPM):
  """The codelab's RNMT+ model, unchanged."""

  _VOCAB_SIZE = 16000

  @classmethod
  def Task(cls):
    p = base_config.SetupRNMTParams(
        model.RNMTModel.Params(),
        name='punctuator_rnmt',
        vocab_size=cls._VOCAB_SIZE,
        embedding_dim=1024,
        hidden_dim=1024,
        num_heads=4,
        num_encoder_layers=6,
        num_decoder_layers=8,
        learning_rate=1e-4,
        l2_regularizer_weight=1e-5,
        lr_warmup_steps=500,
        lr_decay_start=400000,
        lr_decay_end=1200000,
        lr_min=0.5,
        ls_uncertainty=0.1,
        atten_dropout_prob=0.3,
        residual_dropout_prob=0.3,
        adam_beta2=0.98,
        adam_epsilon=1e-6,
    )
    p.eval.samples_per_summary = 2466
    return p


def _Shrink(p, dim, enc_layers, dec_layers):
  """RNMTModel's encoder and decoder at width dim, residuals from layer 1, no dropout."""
  enc = p.encoder
  enc.emb.embedding_dim = dim
  enc.lstm_tpl.num_output_nodes = dim
  enc.num_lstm_layers = enc_layers
  enc.lstm_cell_size = dim
  enc.encoder_out_dim = dim
  enc.dropout_prob = 0.0
  enc.residual_start = 1
  dec = p.decoder
  dec.emb.embedding_dim = dim
  dec.rnn_cell_dim = dim
  dec.rnn_layers = dec_layers
  dec.rnn_cell_tpl.num_output_nodes = dim
  dec.atten_rnn_cell_tpl.num_output_nodes = dim
  dec.dropout_prob = 0.0
  dec.residual_start = 1
  a = dec.attention
  a.source_dim = a.hidden_dim = a.query_dim = a.context_dim = dim
  a.atten_dropout_prob = 0.0
  dec.source_dim = dim
  return p


@model_registry.RegisterSingleTaskModel
class RNMTModelSmall(RNMTModel):
  """lingvoc's RNMTModelSmall: 256 wide, 2 + 2 layers, 8 hyps, 3e-3 decaying to 3e-4."""

  @classmethod
  def Train(cls):
    p = super().Train()
    p.bucket_batch_limit = [128, 64, 40, 20, 10]
    return p

  @classmethod
  def Task(cls):
    p = _Shrink(super().Task(), 256, 2, 2)
    p.decoder.per_word_avg_loss = True
    p.decoder.attention.params_init = py_utils.WeightInit.Gaussian(0.04419417)
    p.decoder.beam_search.num_hyps_per_beam = 8
    p.decoder.beam_search.force_eos_in_last_step = True
    p.train.learning_rate = 3e-3
    p.train.lr_schedule.decay_start = 2000
    p.train.lr_schedule.decay_end = 4000
    p.train.lr_schedule.min = 0.1
    p.train.save_interval_seconds = 600
    p.train.summary_interval_steps = 50
    return p


@model_registry.RegisterSingleTaskModel
class RNMTTinyTest(RNMTModelSmall):
  """lingvoc's RNMTTinyTest: 64 wide, 1 + 1 layers, vocabulary 256, 2 hyps."""

  @classmethod
  def Train(cls):
    p = super().Train()
    p.bucket_upper_bound = [40]
    p.bucket_batch_limit = [32]
    p.source_max_length = p.target_max_length = 42
    return p

  @classmethod
  def Test(cls):
    p = super().Test()
    p.bucket_upper_bound = [40, 200]
    p.bucket_batch_limit = [32, 4]
    return p

  @classmethod
  def Task(cls):
    p = _Shrink(super().Task(), 64, 1, 1)
    p.encoder.emb.vocab_size = 256
    p.decoder.emb.vocab_size = 256
    p.decoder.attention.num_attention_heads = 2
    p.decoder.attention.params_init = py_utils.WeightInit.Gaussian(0.0884)
    p.decoder.softmax.num_classes = 256
    p.decoder.label_smoothing.num_classes = 256
    p.decoder.label_smoothing.uncertainty = 0.0
    p.decoder.beam_search.num_hyps_per_beam = 2
    p.decoder.target_seq_len = 40
    p.decoder.per_word_avg_loss = False
    p.train.learning_rate = 3e-3
    p.train.lr_schedule.warmup = 10
    p.train.lr_schedule.decay_start = 600
    p.train.lr_schedule.decay_end = 1200
    p.train.max_steps = 1200
    p.train.save_interval_seconds = 3600
    p.train.summary_interval_steps = 50
    return p
