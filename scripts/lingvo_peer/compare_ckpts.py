"""Compares the float tensors two checkpoints share.

  python compare_ckpts.py A_PREFIX B_PREFIX [--base=PREFIX] [--rtol=1e-5] [--exempt=REGEX]

For each float tensor in both: the largest absolute difference and the relative
difference in the 2-norm, |a - b| / |a|, which must be at most rtol. With --base (the
checkpoint both started from), variables that --base also has are compared by their
change since it (a - base against b - base): after one step the change is what the step
computed, and the weights themselves hide it. Integer tensors must be equal. Tensors whose
name matches --exempt (a regular expression) are printed but not held to rtol: a variable
whose true gradient is zero, which Adam's first update turns from rounding noise into a
full-size step of either sign.
Exits 1 if any shared tensor is outside the tolerance or has another shape, or if the two
share no float tensor.
"""
import argparse
import os
import re
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top


def numeric_pairs(ra, rb):
  """The two readers' shared tensor names, sorted; the numeric tensors among them of equal
  shapes as (name, a, b); and how many had another shape (each printed)."""
  names = sorted(set(ra.get_variable_to_shape_map()) & set(rb.get_variable_to_shape_map()))
  pairs, mismatched = [], 0
  for n in names:
    x, y = ra.get_tensor(n), rb.get_tensor(n)
    if not isinstance(x, np.ndarray) or x.dtype.kind not in 'fiu':
      continue
    if x.shape != y.shape:
      print('%-44s shapes %s against %s' % (n, x.shape, y.shape))
      mismatched += 1
      continue
    pairs.append((n, x, y))
  return names, pairs, mismatched


def main():
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('a')
  ap.add_argument('b')
  ap.add_argument('--base', help='the checkpoint both started from')
  ap.add_argument('--rtol', type=float, default=1e-5)
  ap.add_argument('--exempt', help='names (a regular expression) not held to rtol')
  args = ap.parse_args()
  ra, rb = tf.train.load_checkpoint(args.a), tf.train.load_checkpoint(args.b)
  base = tf.train.load_checkpoint(args.base) if args.base else None
  in_base = set(base.get_variable_to_shape_map()) if base else set()
  names, pairs, bad = numeric_pairs(ra, rb)
  nfloat = exempt = 0
  for n, x, y in pairs:
    if x.dtype.kind == 'f':
      nfloat += 1
      x, y = x.astype(np.float64), y.astype(np.float64)
      what = ''
      if n in in_base and not n.endswith('_power'):
        b0 = base.get_tensor(n).astype(np.float64)
        x, y, what = x - b0, y - b0, ' (change)'
      d = float(np.max(np.abs(x - y))) if x.size else 0.0
      nx = float(np.linalg.norm(x.ravel()))
      rel = float(np.linalg.norm((x - y).ravel())) / nx if nx else d
      ok = rel <= args.rtol
      if not ok and args.exempt and re.search(args.exempt, n):
        ok, exempt = True, exempt + 1
        what += '  EXEMPT'
      print('%-44s %-14s max |diff| %.3g, relative %.3g%s%s' % (n, list(x.shape), d, rel, what,
                                                                '' if ok else '  OUTSIDE'))
    else:
      ok = np.array_equal(x, y)
      print('%-44s %-14s %s' % (n, list(x.shape), 'equal' if ok else 'DIFFERS'))
    bad += not ok
  print('%d shared tensors (%d float), %d outside relative %g%s' %
        (len(names), nfloat, bad, args.rtol, ', %d exempt' % exempt if exempt else ''))
  return 1 if bad or not nfloat else 0


if __name__ == '__main__':
  sys.exit(main())
