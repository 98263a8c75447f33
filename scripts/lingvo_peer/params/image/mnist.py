"""Lingvo experiments for the cross-checks: image.mnist.LeNet5 and LeNet5Fashion.

Registered by scripts/lingvo_peer/run.py under Lingvo's own module name
(lingvo.tasks.image.params.mnist), so the model names are Lingvo's. LeNet5 is the params
of Lingvo's lingvo/tasks/image/params/mnist.py (which the PyPI wheel does not ship);
LeNet5Fashion mirrors lingvoc's experiments/image/mnist.cfg group of that name. The
dataset checkpoint is $LINGVO_PEER_DATA (default /tmp/mnist/mnist), as lingvoc's and
Lingvo's keras2ckpt write it.
"""
import os

from lingvo import model_registry
from lingvo.core import base_model_params
from lingvo.core import schedule
from lingvo.tasks.image import classifier
from lingvo.tasks.image import input_generator


class Base(base_model_params.SingleTaskModelParams):
  """Input params for MNIST: the checkpoint that keras2ckpt writes."""

  @classmethod
  def _Path(cls):
    return os.environ.get('LINGVO_PEER_DATA', '/tmp/mnist/mnist')

  @classmethod
  def Train(cls):
    p = input_generator.MnistTrainInput.Params()
    p.ckpt = cls._Path()
    return p

  @classmethod
  def Test(cls):
    p = input_generator.MnistTestInput.Params()
    p.ckpt = cls._Path()
    return p

  @classmethod
  def Dev(cls):
    return cls.Test()


@model_registry.RegisterSingleTaskModel
class LeNet5(Base):
  """Lingvo's LeNet5: conv, maxpool, conv, maxpool, fc, softmax."""

  @classmethod
  def Task(cls):
    p = classifier.ModelV1.Params()
    p.name = 'lenet5'
    p.filter_shapes = [(5, 5, 1, 20), (5, 5, 20, 50)]
    p.window_shapes = [(2, 2), (2, 2)]
    p.batch_norm = False
    p.dropout_prob = 0.2
    p.softmax.input_dim = 300
    p.softmax.num_classes = 10
    p.train.save_interval_seconds = 10
    p.eval.samples_per_summary = 0
    return p


@model_registry.RegisterSingleTaskModel
class LeNet5Fashion(LeNet5):
  """lingvoc's LeNet5Fashion: learning rate 1e-3, decaying to 0.1x over 1500..5000."""

  @classmethod
  def Task(cls):
    p = super().Task()
    p.train.learning_rate = 1e-3
    p.train.max_steps = 5000
    p.train.lr_schedule = (
        schedule.LinearRampupExponentialDecayScaledByNumSplitSchedule.Params().Set(
            warmup=100, decay_start=1500, decay_end=5000, min=0.1))
    return p
