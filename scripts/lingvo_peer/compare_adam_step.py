"""Compares two checkpoints written one Adam step after the same one, element by element.

  python compare_adam_step.py A_PREFIX B_PREFIX [--rtol=1e-5] [--atol=1e-6]
      [--adam_first_step [--grad_floor=1e-3] [--beta1=0.9] [--before=PREFIX --l2=WEIGHT]]
      [--exempt=REGEX]

For each float tensor in both: the largest absolute difference and whether every element
is within atol + rtol * |b| (numpy.allclose's rule). Integer tensors must be equal.
Exits 1 if any shared tensor is outside the tolerance or has another shape, or if the two
share no float tensor.

--adam_first_step (two checkpoints written one Adam step after the same one): a weight
element outside the tolerance is excused, counted and reported on the last line, where its
gradient (A's Adam slot m / (1 - beta1)) is below --grad_floor times the tensor's largest.
Adam's first update is lr * g / (|g| + epsilon), about lr * sign(g) whatever |g|: a
float32 summation difference in g, which scales with the tensor's large gradients (about
1e-6 next to gradients of order 1), moves the update of an element with a tiny gradient by
a sizeable part of lr. The slots themselves (the gradient and its square) must agree. A variable's moving average
(NAME/ExponentialMovingAverage, with task.train.ema_decay) is excused by its variable's gradient.
--exempt: tensors whose name matches the regular expression are printed (EXEMPT) but
not held to the tolerance, as compare_ckpts.py's: the attention key biases source_proj_b,
whose true gradient is zero (the softmax cancels a bias added to every key), so each side's
is rounding noise that Adam's first step turns into a full step of either sign.
With --before (the checkpoint both steps started from) and --l2 (the L2 weight), also
prints the rows of 2-D variables whose slot m is non-zero in A only (rows A's L2
regularized and B's did not) and 0.5 * l2 * their squared norm before the step, the
difference the two l2_loss summaries should show.
"""
import argparse
import os
import re
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from compare_ckpts import numeric_pairs  # pylint: disable=g-import-not-at-top

EMA = '/ExponentialMovingAverage'


def l2_only_rows(ra, rb, r0, names, l2):
  """(description, 0.5 * l2 * squared norm) of the rows with a slot m in ra only."""
  rows, total = [], 0.0
  for n in names:
    if len(ra.get_variable_to_shape_map()[n]) != 2 or not (ra.has_tensor(n + '/Adam') and rb.has_tensor(n + '/Adam')):
      continue
    only = np.where((ra.get_tensor(n + '/Adam') != 0).any(1) & ~(rb.get_tensor(n + '/Adam') != 0).any(1))[0]
    if only.size:
      w = r0.get_tensor(n).astype(np.float64)[only]
      rows.append('%s rows %s' % (n, ','.join(map(str, only))))
      total += 0.5 * l2 * float(np.sum(w * w))
  return '; '.join(rows) or 'none', total


def main():
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('a')
  ap.add_argument('b')
  ap.add_argument('--rtol', type=float, default=1e-5)
  ap.add_argument('--atol', type=float, default=1e-6)
  ap.add_argument('--adam_first_step', action='store_true')
  ap.add_argument('--grad_floor', type=float, default=1e-3)
  ap.add_argument('--beta1', type=float, default=0.9)
  ap.add_argument('--before')
  ap.add_argument('--l2', type=float)
  ap.add_argument('--exempt', help='names (a regular expression) not held to the tolerance')
  args = ap.parse_args()
  ra, rb = tf.train.load_checkpoint(args.a), tf.train.load_checkpoint(args.b)
  names, pairs, bad = numeric_pairs(ra, rb)
  nfloat = small = exempt = 0
  worst_small = 0.0
  for n, x, y in pairs:
    if x.dtype.kind == 'f':
      nfloat += 1
      diff = np.abs(x.astype(np.float64) - y)
      d = float(np.max(diff)) if x.size else 0.0
      ok = np.allclose(x, y, rtol=args.rtol, atol=args.atol)
      note = '' if ok else '  OUTSIDE'
      if not ok and args.exempt and re.search(args.exempt, n):
        ok, note = True, '  EXEMPT'
        exempt += 1
      var = n[:-len(EMA)] if n.endswith(EMA) else n  # an EMA shadow: its variable's gradient
      if not ok and args.adam_first_step and var + '/Adam' in names:
        out = diff > args.atol + args.rtol * np.abs(y)
        g = np.abs(ra.get_tensor(var + '/Adam').astype(np.float64)) / (1 - args.beta1)
        if (g[out] < args.grad_floor * g.max()).all():
          ok, note = True, '  %d elements with small gradients' % out.sum()
          small += int(out.sum())
          worst_small = max(worst_small, float(diff[out].max()))
      print('%-44s %-14s max |diff| %.3g%s' % (n, list(x.shape), d, note))
    else:
      ok = np.array_equal(x, y)
      print('%-44s %-14s %s' % (n, list(x.shape), 'equal' if ok else 'DIFFERS'))
    bad += not ok
  if args.before and args.l2:
    rows, l2 = l2_only_rows(ra, rb, tf.train.load_checkpoint(args.before), names, args.l2)
    print('rows with a gradient only in A: %s; 0.5 * %g * their squared norm: %.8g' % (rows, args.l2, l2))
  print('%d shared tensors (%d float), %d outside rtol %g / atol %g%s%s' % (
      len(names), nfloat, bad, args.rtol, args.atol,
      ' (%d exempt: %s)' % (exempt, args.exempt) if exempt else '',
      '; %d weight elements with |gradient| < %g x the tensor\'s largest differ by up to %.3g (Adam\'s first step, '
      'lr * g / (|g| + eps))' % (small, args.grad_floor, worst_small) if args.adam_first_step else ''))
  return 1 if bad or not nfloat else 0


if __name__ == '__main__':
  sys.exit(main())
