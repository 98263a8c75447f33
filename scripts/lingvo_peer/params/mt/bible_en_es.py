"""Lingvo experiments for the cross-checks: mt.bible_en_es.TransformerSmall and TinyTest.

Registered by scripts/lingvo_peer/run.py under Lingvo's own module name
(lingvo.tasks.mt.params.bible_en_es), so the model names are lingvoc's. Each mirrors the
group of that name in lingvoc's experiments/mt/bible_en_es.cfg key for key: Lingvo's
mt.model.TransformerModel with TransformerEncoder / TransformerDecoder set up as
lingvo/tasks/mt/base_config.py's SetupTransformerParams does (Adam.ParamsB,
TransformerSchedule, label smoothing 0.1, sqrt(d)-scaled token embeddings, no variational
noise), sized as lingvoc's cfg sizes it. The records are lingvoc's (wpm_encode_file writes
Lingvo's tf.Example layout); $LINGVO_PEER_MT_DATA (default /tmp/bible) holds
train/dev/test.tfrecord-00000-of-00001 and wpm.voc, as scripts/prepare_bible_en_es.sh
writes them.

Lingvo-only settings, none of which changes the model: the dev/test inputs read their
records once, in file order (one_pass.py).
"""
import math
import os

from lingvo import model_registry
from lingvo.core import base_model_params
from lingvo.core import layers
from lingvo.core import optimizer
from lingvo.core import py_utils
from lingvo.core import schedule
from lingvo.core import tokenizers
from lingvo.tasks.mt import input_generator
from lingvo.tasks.mt import model
import one_pass  # pylint: disable=g-bad-import-order  (scripts/lingvo_peer, run.py's directory)


def _Data(name):
  return os.path.join(os.environ.get('LINGVO_PEER_MT_DATA', '/tmp/bible'), name)


def _Input(split, seed, bounds, limits):
  p = input_generator.NmtInput.Params()
  p.file_pattern = 'tfrecord:' + _Data(split + '.tfrecord-00000-of-00001')
  p.file_random_seed = seed
  p.bucket_upper_bound = bounds
  p.bucket_batch_limit = limits
  return p


def _EvalInput(split, vocab_size):
  p = one_pass.OnePassParams(_Input(split, 27182818, [16, 24, 32, 48, 64, 100, 300],
                                    [160, 104, 80, 52, 40, 24, 8]))
  # Ids back to text: the pieces joined by spaces, which the decoder's BLEU metric
  # (CorpusBleuMetric(separator_type='wpm')) unsegments, as Lingvo's own MT experiments
  # do. lingvoc's cfg names WpmTokenizer, whose IdsToStrings is already text: Lingvo's
  # unsegmenter would then delete its spaces, and score each sentence as one word.
  p.tokenizer = tokenizers.VocabFileTokenizer.Params().Set(
      token_vocab_filepath=_Data('wpm.voc'), load_token_ids_from_vocab=False,
      vocab_size=vocab_size)
  return p


def _Transformer(vocab, dim, heads, hidden, layers_n, learning_rate, warmup,
                 emb_scale):
  """lingvoc's TransformerSmall tree with the given sizes."""
  p = model.TransformerModel.Params()
  p.name = 'transformer'
  emb_init = py_utils.WeightInit.Gaussian(emb_scale)
  for side in (p.encoder, p.decoder):
    side.model_dim = dim
    side.input_dropout_prob = 0.1
    side.token_emb.Set(vocab_size=vocab, embedding_dim=dim, max_num_shards=16,
                       scale_sqrt_depth=True, params_init=emb_init)
    side.position_emb.Set(embedding_dim=dim, trainable_scaling=False)
  enc = p.encoder
  enc.transformer_stack.model_dim = dim
  enc.transformer_stack.num_transformer_layers = layers_n
  tr = [enc.transformer_stack.transformer_tpl, p.decoder.trans_tpl]
  dec = p.decoder
  dec.source_dim = dim
  dec.num_trans_layers = layers_n
  # The sizes SetupTransformerDecoder/Encoder give the templates (lingvoc derives them).
  dec.trans_tpl.source_dim = dim
  dec.trans_tpl.tr_atten_tpl.source_dim = dim
  dec.trans_tpl.tr_fflayer_tpl.input_dim = dim
  for t in tr:
    t.tr_atten_tpl.atten_tpl.Set(num_attention_heads=heads, context_dim=dim)
    t.tr_atten_tpl.Set(num_attention_heads=heads, residual_dropout_prob=0.1,
                       atten_dropout_prob=0.0)
    t.tr_fflayer_tpl.Set(hidden_dim=hidden, residual_dropout_prob=0.1,
                         relu_dropout_prob=0.0)
  dec.softmax.Set(num_classes=vocab, num_shards=1, params_init=emb_init)
  dec.label_smoothing = layers.UniformLabelSmoother.Params().Set(
      num_classes=vocab, uncertainty=0.1)
  dec.per_word_avg_loss = True
  dec.target_seq_len = 150
  p.train.Set(
      learning_rate=learning_rate,
      clip_gradient_norm_to_value=0.0,
      grad_norm_to_clip_to_zero=0.0,
      optimizer=optimizer.Adam.ParamsB(),
      lr_schedule=schedule.TransformerSchedule.Params().Set(
          warmup_steps=warmup, worker_replicas=1, model_dim=dim),
      max_steps=100000,
      save_interval_seconds=600,
      summary_interval_steps=50)
  p.eval.samples_per_summary = 0
  return p


@model_registry.RegisterSingleTaskModel
class TransformerSmall(base_model_params.SingleTaskModelParams):
  """Model 256, 4 heads, hidden 1024, 3 + 3 layers, a shared 8k wordpiece vocabulary."""
  VOCAB = 8000

  @classmethod
  def Train(cls):
    return _Input('train', 1234, [16, 24, 32, 48, 64, 100],
                  [160, 104, 80, 52, 40, 24])

  @classmethod
  def Dev(cls):
    return _EvalInput('dev', cls.VOCAB)

  @classmethod
  def Test(cls):
    return _EvalInput('test', cls.VOCAB)

  @classmethod
  def Task(cls):
    return _Transformer(8000, 256, 4, 1024, 3, 0.7, 1000, 1.0 / math.sqrt(256))


@model_registry.RegisterSingleTaskModel
class TinyTest(TransformerSmall):
  """lingvoc's few-second model: dim 32, 2 heads, hidden 64, 1 + 1 layers, 128 pieces."""
  VOCAB = 128

  @classmethod
  def Train(cls):
    p = super().Train()
    p.file_random_seed = 1
    p.bucket_upper_bound = [100]
    p.bucket_batch_limit = [16]
    return p

  @classmethod
  def Task(cls):
    # lingvoc's TinyTest keeps TransformerSmall's embedding and softmax init scale,
    # 1 / sqrt(256), not 1 / sqrt(32).
    p = _Transformer(128, 32, 2, 64, 1, 1.0, 10, 1.0 / math.sqrt(256))
    p.train.Set(max_steps=20, save_interval_seconds=3600, summary_interval_steps=5)
    return p
