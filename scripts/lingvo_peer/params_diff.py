"""Lingvo's params.txt beside lingvoc's inspect_params, every difference explained.

  python3 params_diff.py LINGVO_PARAMS_TXT LINGVOC_PARAMS_TXT [--explain FILE] [--all]

LINGVO_PARAMS_TXT is Lingvo's Params.ToText() of a model (its trainer's
--mode=inspect_params writes LOGDIR/train-params.txt; so does lingvoc's). The two files are
read as `key : value` lines; values are compared after the normalization rules below, which
only equate two spellings of the same value. What is left, keys only one side has and
shared keys whose values differ, is looked up in the explanations table (default
params_explained.tsv beside this script) and printed grouped by category with its reason.
Exit 0 when every difference is explained, 1 when one is not (it is printed under
UNEXPLAINED), 2 on a usage or file error. Needs only Python's standard library.

Normalization rules (a rule equates a Lingvo value with a lingvoc value; both are parsed as
Python literals first, `NoneType` being None):
  class   Lingvo writes a class as type/<module>/<Class>; lingvoc names its registered
          class by a string, the Lingvo class name, optionally after the last components of
          Lingvo's module (`'classifier.ModelV1'` for type/lingvo.tasks.image.classifier/
          ModelV1, `'lm.model.LanguageModel'` for type/lingvo.tasks.lm.model/LanguageModel,
          `'FCLayer'` for type/lingvo.core.layers/FCLayer).
  seq     a tuple equals a list with the same items: lingvoc's experiment files
          (libconfig) have one list type and print lists as [..]; Lingvo's experiments
          mix tuples and lists for the same params.
  symbol  a bare name Lingvo prints unquoted (a tf.DType such as uint8 or float32, an enum)
          equals lingvoc's string of the same name: lingvoc keeps dtypes as strings.
  number  an int equals a float of the same value: lingvoc's params are typed, so a float
          param whose Lingvo default is written as an int literal (`bias_init : 0`) prints
          0.0.
  mapping an empty dict equals an empty list: lingvoc has no dict type and keeps Lingvo's
          dict params as lists of (key, value...) tuples (init_from_checkpoint_rules).
  model   the `model` key is '<registry name>@<where it was defined>': the registry names
          must be equal; the place (Lingvo's params .py file and line, lingvoc's .cfg file)
          is each toolkit's own.
None against ''/False/[] is not a rule: Lingvo often tests `is None`, so each such key is a
difference the table must explain.

The explanations table: tab-separated `side  pattern  category  reason` lines (# comments
and blank lines ignored). side is `lingvo` (a key only Lingvo has), `lingvoc` (only lingvoc
has it) or `value` (both have it, the values differ). pattern is a shell-style pattern
matched against the whole dotted key (`*` also crosses dots: `*.vn.*`, `cluster.ps.*`);
several patterns may be given separated by commas.
For `value` rows the reason names both values. The first matching row of the side wins, so
put specific rows before general ones.
"""
import argparse
import ast
import collections
import fnmatch
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KEY_LINE = re.compile(r'^([A-Za-z_][\w.\[\]\'"]*) : (.*)$')
CLASS = re.compile(r'^type/([\w.]+)/(\w+)$')
BARE = re.compile(r'^[A-Za-z_]\w*$')


class Class(collections.namedtuple('Class', 'module name')):
  pass


class Symbol(str):
  pass


def read_params(path):
  """The `key : value` lines of a ToText() file; a line that is no key line continues
  the previous value (Lingvo keeps newlines of strings verbatim)."""
  out = collections.OrderedDict()
  last = None
  with open(path, encoding='utf-8') as f:
    for line in f.read().split('\n'):
      m = KEY_LINE.match(line)
      if m:
        last = m.group(1)
        out[last] = m.group(2)
      elif last is not None and line:
        out[last] += '\n' + line
  return out


def parse(text):
  t = text.strip()
  if t == 'NoneType':
    return None
  m = CLASS.match(t)
  if m:
    return Class(m.group(1), m.group(2))
  if BARE.match(t) and t not in ('True', 'False', 'None', 'nan', 'inf'):
    return Symbol(t)
  try:
    return ast.literal_eval(t)
  except (ValueError, SyntaxError, MemoryError, RecursionError):
    return Symbol(t)


def same(a, b, key, rules):
  """Whether Lingvo's value a equals lingvoc's value b under the rules; records the rules
  that were needed in `rules`."""
  if key == 'model' and isinstance(a, str) and isinstance(b, str):
    ok = a.split('@')[0] == b.split('@')[0]
    if ok:
      rules.add('model')
    return ok
  if type(a) is type(b) and not isinstance(a, (list, tuple, dict)):
    return a == b
  if isinstance(a, Class):
    if not isinstance(b, str) or isinstance(b, Symbol):
      return False
    prefix, _, name = b.rpartition('.')
    ok = name == a.name and (not prefix or ('.' + a.module).endswith('.' + prefix))
    if ok:
      rules.add('class')
    return ok
  if isinstance(a, Symbol) and isinstance(b, str):
    ok = str(a) == b
    if ok:
      rules.add('symbol')
    return ok
  if isinstance(a, bool) or isinstance(b, bool):
    return a is b
  if isinstance(a, (int, float)) and isinstance(b, (int, float)):
    ok = float(a) == float(b)
    if ok:
      rules.add('number')
    return ok
  if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
    if len(a) != len(b):
      return False
    if type(a) is not type(b):
      rules.add('seq')
    return all(same(x, y, key, rules) for x, y in zip(a, b))
  if isinstance(a, dict) and isinstance(b, (list, tuple)):
    ok = not a and not b
    if ok:
      rules.add('mapping')
    return ok
  if isinstance(a, dict) and isinstance(b, dict):
    return a.keys() == b.keys() and all(same(a[k], b[k], key, rules) for k in a)
  return a == b


def read_explanations(path):
  rows = []
  with open(path, encoding='utf-8') as f:
    for n, line in enumerate(f, 1):
      line = line.rstrip('\n')
      if not line.strip() or line.lstrip().startswith('#'):
        continue
      parts = line.split('\t')
      if len(parts) != 4 or parts[0] not in ('lingvo', 'lingvoc', 'value') or not all(parts):
        raise ValueError('%s:%d: expected `side<TAB>pattern<TAB>category<TAB>reason` with side '
                         'lingvo, lingvoc or value; got %r' % (path, n, line))
      rows.append(dict(side=parts[0], pattern=parts[1], category=parts[2], reason=parts[3],
                       line=n, used=0))
  return rows


def explain(rows, side, key):
  for r in rows:
    if r['side'] == side and any(fnmatch.fnmatchcase(key, p) for p in r['pattern'].split(',')):
      r['used'] += 1
      return r
  return None


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument('lingvo', help="Lingvo's params text (ToText(), e.g. LOGDIR/train-params.txt)")
  ap.add_argument('lingvoc', help="lingvoc's inspect_params text")
  ap.add_argument('--explain', default=os.path.join(HERE, 'params_explained.tsv'),
                  help='the explanations table (default: %(default)s)')
  ap.add_argument('--all', action='store_true',
                  help='list every key of each category (default: the first 8 and a count)')
  args = ap.parse_args(argv)
  try:
    lv, lc = read_params(args.lingvo), read_params(args.lingvoc)
    rows = read_explanations(args.explain)
  except (OSError, ValueError) as e:
    print('params_diff: %s' % e, file=sys.stderr)
    return 2
  if not lv or not lc:
    print('params_diff: %s has no `key : value` lines' % (args.lingvo if not lv else args.lingvoc),
          file=sys.stderr)
    return 2

  shared = [k for k in lv if k in lc]
  only_lv = [k for k in lv if k not in lc]
  only_lc = [k for k in lc if k not in lv]
  identical, normalized, differ = 0, collections.Counter(), []
  for k in shared:
    if lv[k] == lc[k]:
      identical += 1
      continue
    rules = set()
    if same(parse(lv[k]), parse(lc[k]), k, rules):
      for r in rules:
        normalized[r] += 1
      continue
    differ.append(k)

  unexplained = []
  sections = [('Only in Lingvo', 'lingvo', only_lv), ('Only in lingvoc', 'lingvoc', only_lc),
              ('Values that differ (Lingvo -> lingvoc)', 'value', differ)]
  summary = {}
  for title, side, keys in sections:
    groups = collections.OrderedDict()
    for k in keys:
      r = explain(rows, side, k)
      if r is None:
        unexplained.append((side, k))
        continue
      groups.setdefault((r['category'], r['reason']), []).append(k)
    by_cat = collections.OrderedDict()
    for (cat, reason), ks in sorted(groups.items(), key=lambda kv: kv[0][0]):
      by_cat.setdefault(cat, []).append((reason, ks))
    summary[side] = collections.Counter({c: sum(len(k) for _, k in v) for c, v in by_cat.items()})
    print('== %s: %d keys (%d explained)' % (title, len(keys), sum(summary[side].values())))
    for cat, items in by_cat.items():
      print('-- %s: %d' % (cat, sum(len(ks) for _, ks in items)))
      for reason, ks in items:
        print('   %s' % reason)
        shown = ks if args.all or len(ks) <= 8 else ks[:8]
        for k in shown:
          if side == 'value':
            print('     %s : %s -> %s' % (k, lv[k], lc[k]))
          else:
            print('     %s' % k)
        if len(shown) < len(ks):
          print('     ... and %d more (--all lists them)' % (len(ks) - len(shown)))
    print()

  if unexplained:
    print('== UNEXPLAINED: %d (add a row to %s)' % (len(unexplained), args.explain))
    for side, k in unexplained:
      if side == 'value':
        print('   value   %s : %s -> %s' % (k, lv[k], lc[k]))
      else:
        print('   %-7s %s' % (side, k))
    print()
  same_count = identical + (len(shared) - identical - len(differ))
  print('Lingvo %d keys, lingvoc %d keys; shared %d: %d the same (%d as written, %d after '
        'normalization: %s), %d differ; only in Lingvo %d; only in lingvoc %d; '
        'unexplained %d' % (
            len(lv), len(lc), len(shared), same_count, identical, same_count - identical,
            ', '.join('%s %d' % kv for kv in sorted(normalized.items())) or 'none',
            len(differ), len(only_lv), len(only_lc), len(unexplained)))
  return 1 if unexplained else 0


if __name__ == '__main__':
  sys.exit(main())
