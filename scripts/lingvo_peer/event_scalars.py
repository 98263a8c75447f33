"""Prints `step tag value` for every scalar summary of TensorFlow event files.

  python event_scalars.py EVENTS_FILE... [--step=N] [--tags=loss,grad_norm/all/loss]
"""
import argparse
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tensorflow.python.framework import tensor_util  # pylint: disable=g-import-not-at-top


def main():
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('files', nargs='+')
  ap.add_argument('--step', type=int)
  ap.add_argument('--tags', help='comma-separated; all when absent')
  a = ap.parse_args()
  tags = set(a.tags.split(',')) if a.tags else None
  for f in a.files:
    for e in tf.compat.v1.train.summary_iterator(f):
      if a.step is not None and e.step != a.step:
        continue
      for v in e.summary.value:
        if tags is not None and v.tag not in tags:
          continue
        if v.HasField('simple_value'):
          print(e.step, v.tag, repr(v.simple_value))
        elif v.HasField('tensor') and v.tensor.dtype == 1 and not v.tensor.tensor_shape.dim:
          print(e.step, v.tag, repr(float(tensor_util.MakeNdarray(v.tensor))))


if __name__ == '__main__':
  main()
