"""Compares the float tensors two checkpoints share, value by value.

  python compare_ckpts.py A_PREFIX B_PREFIX [--rtol=1e-5] [--atol=1e-6]

For each float tensor in both: the largest absolute difference and whether every element
is within atol + rtol * |b| (numpy.allclose's rule). Integer tensors must be equal.
Exits 1 if any shared tensor is outside the tolerance or has another shape, or if the two
share no float tensor.
"""
import argparse
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top


def main():
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('a')
  ap.add_argument('b')
  ap.add_argument('--rtol', type=float, default=1e-5)
  ap.add_argument('--atol', type=float, default=1e-6)
  args = ap.parse_args()
  ra, rb = tf.train.load_checkpoint(args.a), tf.train.load_checkpoint(args.b)
  names = sorted(set(ra.get_variable_to_shape_map()) & set(rb.get_variable_to_shape_map()))
  bad = nfloat = 0
  for n in names:
    x, y = ra.get_tensor(n), rb.get_tensor(n)
    if not isinstance(x, np.ndarray) or x.dtype.kind not in 'fiu':
      continue
    if x.shape != y.shape:
      print('%-44s shapes %s against %s' % (n, x.shape, y.shape))
      bad += 1
      continue
    if x.dtype.kind == 'f':
      nfloat += 1
      d = float(np.max(np.abs(x.astype(np.float64) - y))) if x.size else 0.0
      ok = np.allclose(x, y, rtol=args.rtol, atol=args.atol)
      print('%-44s %-14s max |diff| %.3g%s' % (n, list(x.shape), d, '' if ok else '  OUTSIDE'))
    else:
      ok = np.array_equal(x, y)
      print('%-44s %-14s %s' % (n, list(x.shape), 'equal' if ok else 'DIFFERS'))
    bad += not ok
  print('%d shared tensors (%d float), %d outside rtol %g / atol %g' % (len(names), nfloat, bad, args.rtol,
                                                                       args.atol))
  return 1 if bad or not nfloat else 0


if __name__ == '__main__':
  sys.exit(main())
