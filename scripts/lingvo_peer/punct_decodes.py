"""Compares a Lingvo punctuator decoder's hypotheses with a lingvoc decoder_out_* file.

  python punct_decodes.py LINGVO_DECODER_LOG LINGVOC_DECODER_OUT [--score_tol=1e-4]

Lingvo 0.14's mt.model logs each example as "source: S", "target: T" and one
"  SCORE: HYP" line per hypothesis, best first, every string passed through
CorpusBleuMetric(separator_type='wpm')'s unsegmenter, which deletes spaces (it expects
'▁'-marked pieces, but WpmTokenizer.IdsToStrings has already turned them into spaces).
lingvoc's decoder_out_* holds "src:", "ref:" and "hyp N: score S: TEXT" lines. Examples
are matched by their source with spaces removed; hypotheses compared likewise.
Prints one line: examples matched, top hypotheses equal, largest top-score difference;
exits 1 when an example is unmatched, a top hypothesis differs, or a score differs by
more than --score_tol.
"""
import argparse
import re
import sys


def lingvo_log(path):
  out, cur = {}, None
  for line in open(path, encoding='utf-8'):
    m = re.search(r'model\.py:\d+\] (source|target): (.*)$', line)
    if m:
      if m.group(1) == 'source':
        cur = m.group(2)
        out[cur] = []
      continue
    m = re.search(r'model\.py:\d+\]   (-?[0-9.]+(?:e[+-]?\d+)?): (.*)$', line)
    if m and cur is not None:
      out[cur].append((float(m.group(1)), m.group(2)))
  return out


def lingvoc_out(path):
  out = {}
  for blk in re.split(r'\n\n+', open(path, encoding='utf-8').read().strip('\n')):
    src, hyps = None, []
    for l in blk.split('\n'):
      if l.startswith('src: '):
        src = l[5:].replace(' ', '')
      m = re.match(r'hyp (\d+): score (\S+): ?(.*)$', l)
      if m:
        hyps.append((int(m.group(1)), float(m.group(2)), m.group(3).replace(' ', '')))
    hyps.sort()
    out[src] = [(s, h) for _, s, h in hyps]
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('lingvo_log')
  ap.add_argument('lingvoc_out')
  ap.add_argument('--score_tol', type=float, default=1e-4)
  a = ap.parse_args()
  lv, lc = lingvo_log(a.lingvo_log), lingvoc_out(a.lingvoc_out)
  bad, same, worst = 0, 0, 0.0
  for src, hyps in lv.items():
    if src not in lc or not hyps or not lc[src]:
      print('unmatched: %r' % src)
      bad += 1
      continue
    (s0, h0), (s1, h1) = hyps[0], lc[src][0]
    worst = max(worst, abs(s0 - s1))
    if h0 == h1:
      same += 1
    else:
      print('top hypotheses differ for %r: Lingvo %r (%g), lingvoc %r (%g)' % (src, h0, s0, h1, s1))
      bad += 1
  if len(lc) != len(lv):
    print('Lingvo decoded %d examples, lingvoc %d' % (len(lv), len(lc)))
    bad += 1
  print('%d examples, top hypotheses equal: %d, largest top-score difference %.2g' % (len(lv), same, worst))
  sys.exit(1 if bad or worst > a.score_tol else 0)


if __name__ == '__main__':
  main()
