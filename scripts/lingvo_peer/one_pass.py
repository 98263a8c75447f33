"""Evaluation inputs for Lingvo's evaler and decoder jobs in the cross-checks.

Imported by the experiment files under params/ (run.py's directory is on sys.path).
Lingvo's evaler and decoder take the whole dataset in one pass only when the input is
resettable with repeat_count 1 (eval.samples_per_summary 0: they stop at the input's
OutOfRange), as lingvoc's do by themselves; a GenericInput-based generator (NmtInput,
AsrInput, LmInput) has no Reset, which the runners call before each pass: the one here
does nothing, right for the *_once jobs, whose one pass starts fresh. Its records are read
in file order (require_sequential_order, which repeat_count needs and Lingvo's cluster
gives only the jobs named evaler/decoder, not evaler_once_*). None of this changes the
model.
"""


def OnePass(cls):
  """cls's subclass read once in file order, whose Reset does nothing."""

  class OnePassInput(cls):

    def Reset(self, sess):
      del sess

    def CommonInputOpArgs(self):
      args = super().CommonInputOpArgs()
      args['require_sequential_order'] = True
      return args

  OnePassInput.__name__ = OnePassInput.__qualname__ = 'OnePass' + cls.__name__
  return OnePassInput


def OnePassParams(p):
  """Params p of a GenericInput-based generator, made to read its files once (above)."""
  p.cls = OnePass(p.cls)
  p.resettable = True
  p.repeat_count = 1
  return p
