"""Checks a lingvoc checkpoint against TensorFlow's reader and a Lingvo checkpoint.

  python ckpt_compat.py --lingvoc=PREFIX --lingvo=PREFIX [--resave=PREFIX]

1. tf.train.load_checkpoint reads the lingvoc checkpoint: every tensor's name, dtype and
   shape is printed with its checksum.
2. Names, dtypes and shapes against the Lingvo checkpoint of the same experiment: every
   variable Lingvo's model saves is in lingvoc's with the same dtype and shape. Names only
   one side has are listed (lingvoc's own `_lingvoc/*` bookkeeping; Lingvo's Adam
   beta powers, which lingvoc keeps as a step count).
3. With --resave, TensorFlow writes every tensor it read back out (tf.raw_ops.SaveV2) to
   PREFIX, so that lingvoc's own reader can compare TensorFlow's copy with the original,
   value for value (scripts/lingvo_peer/lenet5.sh does that with ckpt_inspect).
Exits 1 when a Lingvo variable is missing or differs in dtype or shape.
"""
import argparse
import os
import sys
import zlib

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
import tensorflow as tf  # pylint: disable=g-import-not-at-top


def read(prefix):
  r = tf.train.load_checkpoint(prefix)
  dtypes = r.get_variable_to_dtype_map()
  shapes = r.get_variable_to_shape_map()
  return r, {n: (dtypes[n].name, tuple(shapes[n])) for n in shapes}


def main():
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('--lingvoc', required=True, help='prefix of a checkpoint lingvoc wrote')
  ap.add_argument('--lingvo', required=True, help='prefix of a checkpoint Lingvo wrote')
  ap.add_argument('--resave', help='prefix to write TensorFlow\'s copy of the lingvoc checkpoint')
  a = ap.parse_args()
  rc, mine = read(a.lingvoc)
  _, theirs = read(a.lingvo)
  print('tf.train.load_checkpoint(%s): %d tensors' % (a.lingvoc, len(mine)))
  for n in sorted(mine):
    v = rc.get_tensor(n)
    print('  %-48s %-8s %-18s crc32 %08x' % (n, mine[n][0], list(mine[n][1]),
                                            zlib.crc32(v.tobytes()) if hasattr(v, 'tobytes') else 0))
  bad = 0
  for n in sorted(theirs):
    if n not in mine:
      print('only in Lingvo\'s: %s %s %s' % (n, theirs[n][0], list(theirs[n][1])))
      if not n.endswith(('_power', 'global_step')):
        bad += 1
    elif mine[n] != theirs[n]:
      print('DIFFERS: %s: lingvoc %s, Lingvo %s' % (n, mine[n], theirs[n]))
      bad += 1
  for n in sorted(set(mine) - set(theirs)):
    print('only in lingvoc\'s: %s %s %s' % (n, mine[n][0], list(mine[n][1])))
  common = sorted(set(mine) & set(theirs))
  print('%d names in both with the same dtype and shape: %d; problems: %d' %
        (len(common), sum(mine[n] == theirs[n] for n in common), bad))
  if a.resave:
    names = sorted(mine)
    tf.raw_ops.SaveV2(prefix=a.resave, tensor_names=names, shape_and_slices=[''] * len(names),
                      tensors=[tf.constant(rc.get_tensor(n)) for n in names])
    print('TensorFlow wrote its copy to %s' % a.resave)
  return 1 if bad else 0


if __name__ == '__main__':
  sys.exit(main())
