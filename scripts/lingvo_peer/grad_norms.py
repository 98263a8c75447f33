"""Both gradient norms of a Lingvo model's first training batch, from its checkpoint.

  python grad_norms.py MODEL CKPT_PREFIX [--model_params_override=...]
      (with the environment the model's params read)

Builds MODEL's training graph (the experiments of params/ registered as run.py does),
restores CKPT_PREFIX and prints, for the first training batch: the loss, the norm Lingvo's
learner logs as grad_norm/all (py_utils.SumSquared: an embedding's gradient is an
IndexedSlices whose values hold one row per lookup, so a row looked up twice counts as
two) and the norm of the dense gradient, the one an optimizer applies, with the
variables whose gradient is an IndexedSlices.
"""
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
from absl import flags  # pylint: disable=g-import-not-at-top
import lingvo.compat as tf  # pylint: disable=g-import-not-at-top
from lingvo import model_registry  # pylint: disable=g-import-not-at-top
from lingvo.core import cluster_factory  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # pylint: disable=g-import-not-at-top


def main():
  model, ckpt = sys.argv[1], sys.argv[2]
  flags.FLAGS(sys.argv[:1] + sys.argv[3:])  # GetParams applies --model_params_override
  run._register_params()  # pylint: disable=protected-access
  tf.disable_eager_execution()
  p = model_registry.GetParams(model, 'Train')
  reader = tf.train.load_checkpoint(ckpt)
  with cluster_factory.ForTestingWorker(mode='sync', job='trainer_client'):
    task = p.Instantiate().GetTask()
    metrics, _ = task.FPropDefaultTheta(task.input.GetPreprocessedInputBatch())
    vs = tf.trainable_variables()
    gs = tf.gradients(metrics['loss'][0], vs)
    slices = tf.add_n([tf.reduce_sum(tf.square(g.values if isinstance(g, tf.IndexedSlices) else g)) for g in gs])
    dense = tf.add_n([tf.reduce_sum(tf.square(tf.convert_to_tensor(g))) for g in gs])
    saver = tf.train.Saver(var_list={v.op.name: v for v in tf.global_variables() if reader.has_tensor(v.op.name)})
    with tf.Session() as s:
      task.input.Initialize(s)
      saver.restore(s, ckpt)
      loss, a, b = s.run([metrics['loss'][0], slices, dense])
  sparse = [v.op.name for v, g in zip(vs, gs) if isinstance(g, tf.IndexedSlices)]
  print('loss %.8g; grad_norm/all as Lingvo logs it (IndexedSlices values) %.8g; dense gradient norm %.8g; '
        'IndexedSlices gradients: %s' % (loss, np.sqrt(a), np.sqrt(b), ', '.join(sparse)))


if __name__ == '__main__':
  main()
