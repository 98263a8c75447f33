"""Lingvo experiments for the cross-checks: lm.bible.RnnLm* and TransformerLm*.

Registered by scripts/lingvo_peer/run.py under Lingvo's own module name
(lingvo.tasks.lm.params.bible), so the model names are lingvoc's. Each mirrors the group
of that name in lingvoc's experiments/lm/bible.cfg key for key: Lingvo's
lm.model.LanguageModel over layers.RnnLm (sqrt(d)-scaled embeddings, a
StackedFRNNLayerByLayer of LSTMCellSimple with a residual from layer 1, a full softmax),
Adam, gradients clipped at 1.0, or over layers.TransformerLm (causal self-attention with
context pre/post projections, sinusoidal positions; Adam (0.9, 0.98, 1e-9) with
TransformerSchedule, no clipping), on characters (LmInput's AsciiTokenizer).

The text comes from the environment (each a Lingvo file pattern, text: prefix added):
  LINGVO_PEER_LM_TRAIN  the training lines (default /tmp/lm_bible/train.txt)
  LINGVO_PEER_LM_TEST   the Dev and Test lines (default /tmp/lm_bible/test.txt)
  LINGVO_PEER_LM_TGT_LEN  the training input's target_max_length (default the cfg's 256)

Lingvo-only settings, none of which changes the model's numbers: the Dev/Test inputs read
their lines once, in file order (one_pass.py). LmInput sets
pad_to_max_seq_length itself: Lingvo pads every line to target_max_length (the padded
positions have weight 0), lingvoc to the batch's longest line.
"""
import os

from lingvo import model_registry
from lingvo.core import base_model_params
from lingvo.core import optimizer
from lingvo.core import py_utils
from lingvo.core import rnn_cell
from lingvo.core import schedule
from lingvo.tasks.lm import input_generator
from lingvo.tasks.lm import layers
from lingvo.tasks.lm import model
import one_pass  # pylint: disable=g-bad-import-order  (scripts/lingvo_peer, run.py's directory)


def _Input(env, default, seed, bounds, limits):
  p = input_generator.LmInput.Params()
  p.file_pattern = 'text:' + os.environ.get(env, default)
  p.file_random_seed = seed
  p.target_max_length = 256
  p.tokenizer.vocab_size = 76
  p.bucket_upper_bound = bounds
  p.bucket_batch_limit = limits
  return p


def _EvalInput():
  return one_pass.OnePassParams(_Input(
      'LINGVO_PEER_LM_TEST', '/tmp/lm_bible/test.txt', 27182818,
      [10, 20, 30, 50, 100, 1000], [64, 48, 32, 20, 10, 4]))


def _RnnLm(emb_dim, rnn_dims, init_scale):
  """RnnLmSmall's tree (vocab 76, 2 LSTM layers, residual from layer 1) sized as given."""
  lm = layers.RnnLm.Params()
  lm.vocab_size = 76
  lm.emb.Set(vocab_size=76, embedding_dim=emb_dim, max_num_shards=1, scale_sqrt_depth=True,
             params_init=py_utils.WeightInit.Uniform(init_scale))
  lm.embedding_dropout_keep_prob = 0.9
  lm.rnns.num_layers = 2
  lm.rnns.skip_start = 1
  lm.rnns.num_input_nodes = emb_dim
  # A template per layer, the first one's input the embedding, as RnnLm.CommonParams sets
  # them (RnnLm asserts it); lingvoc's one template and rnns.num_input_nodes say the same.
  cell = rnn_cell.LSTMCellSimple.Params().Set(
      num_input_nodes=rnn_dims, num_output_nodes=rnn_dims,
      params_init=py_utils.WeightInit.Uniform(init_scale))
  lm.rnns.cell_tpl = [cell.Copy().Set(num_input_nodes=emb_dim), cell.Copy()]
  lm.rnns.dropout.keep_prob = 0.9
  lm.softmax.Set(input_dim=rnn_dims, num_classes=76,
                 params_init=py_utils.WeightInit.Uniform(init_scale))
  return lm


@model_registry.RegisterSingleTaskModel
class RnnLmSmall(base_model_params.SingleTaskModelParams):
  """Characters; embeddings of 128, 2 LSTM layers of 512."""

  @classmethod
  def Train(cls):
    p = _Input('LINGVO_PEER_LM_TRAIN', '/tmp/lm_bible/train.txt', 1234,
               [10, 20, 30, 50, 100], [64, 48, 32, 20, 10])
    p.file_buffer_size = 50000
    p.target_max_length = int(os.environ.get('LINGVO_PEER_LM_TGT_LEN', '256'))
    return p

  @classmethod
  def Dev(cls):
    return _EvalInput()

  @classmethod
  def Test(cls):
    return _EvalInput()

  @classmethod
  def Task(cls):
    p = model.LanguageModel.Params()
    p.name = 'lm'
    p.lm = _RnnLm(128, 512, 0.04419417)
    p.train.Set(learning_rate=2e-3, max_steps=100000, save_interval_seconds=600,
                summary_interval_steps=50)
    p.eval.samples_per_summary = 0
    return p


@model_registry.RegisterSingleTaskModel
class RnnLmTinyTest(RnnLmSmall):
  """Embeddings of 16, 2 LSTM layers of 32, no dropout: lingvoc's suite model."""

  @classmethod
  def Train(cls):
    p = super().Train()
    p.bucket_upper_bound = [100]
    p.bucket_batch_limit = [16]
    return p

  @classmethod
  def Task(cls):
    p = super().Task()
    p.lm = _RnnLm(16, 32, 0.04419417)
    p.lm.embedding_dropout_keep_prob = 1.0
    p.lm.rnns.dropout.keep_prob = 1.0
    p.train.Set(learning_rate=1e-2, max_steps=200, save_interval_seconds=3600,
                summary_interval_steps=20)
    return p


def _TransformerLm(dim, heads, hidden, layers_n, residual_dropout, learning_rate, warmup):
  """TransformerLmSmall's tree (vocab 76, embeddings Gaussian(1/16)) sized as given."""
  p = model.LanguageModel.Params()
  p.name = 'lm'
  lm = layers.TransformerLm.Params()
  lm.vocab_size = 76
  lm.model_dim = dim
  lm.num_trans_layers = layers_n
  lm.residual_dropout_prob = residual_dropout
  lm.emb.Set(vocab_size=76, embedding_dim=dim, max_num_shards=1, scale_sqrt_depth=True,
             params_init=py_utils.WeightInit.Gaussian(0.0625))
  lm.position_emb.Set(embedding_dim=dim, trainable_scaling=False)
  lm.trans_tpl.has_aux_atten = False
  lm.trans_tpl.mask_self_atten = True
  lm.trans_tpl.tr_atten_tpl.num_attention_heads = heads
  lm.trans_tpl.tr_atten_tpl.atten_tpl.Set(enable_ctx_pre_proj=True, enable_ctx_post_proj=True)
  lm.trans_tpl.tr_fflayer_tpl.hidden_dim = hidden
  lm.softmax.Set(input_dim=dim, num_classes=76, num_shards=1)
  p.lm = lm
  p.train.Set(
      learning_rate=learning_rate, clip_gradient_norm_to_value=0.0,
      grad_norm_to_clip_to_zero=0.0,
      optimizer=optimizer.Adam.Params().Set(beta1=0.9, beta2=0.98, epsilon=1e-9),
      lr_schedule=schedule.TransformerSchedule.Params().Set(
          warmup_steps=warmup, worker_replicas=1, model_dim=dim),
      max_steps=100000, save_interval_seconds=600, summary_interval_steps=50)
  p.eval.samples_per_summary = 0
  return p


@model_registry.RegisterSingleTaskModel
class TransformerLmSmall(RnnLmSmall):
  """Model 256, 4 heads, hidden 1024, 4 layers, residual dropout 0.1."""

  @classmethod
  def Task(cls):
    return _TransformerLm(256, 4, 1024, 4, 0.1, 1.0, 1000)


@model_registry.RegisterSingleTaskModel
class TransformerLmTinyTest(TransformerLmSmall):
  """Model 32, 2 heads, hidden 64, 1 layer, no dropout: lingvoc's suite model."""

  @classmethod
  def Train(cls):
    return RnnLmTinyTest.Train()

  @classmethod
  def Task(cls):
    p = _TransformerLm(32, 2, 64, 1, 0.0, 2.0, 50)
    p.train.Set(max_steps=200, save_interval_seconds=3600, summary_interval_steps=20)
    return p
