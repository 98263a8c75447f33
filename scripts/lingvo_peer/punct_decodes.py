"""Compares a Lingvo decoder's hypotheses with a lingvoc decoder_out_* file.

  python punct_decodes.py LINGVO_DECODER_LOG LINGVOC_DECODER_OUT [--score_tol=1e-4] [--asr]

Lingvo 0.14's mt.model logs each example as "source: S", "target: T" and one
"  SCORE: HYP" line per hypothesis, best first, every string passed through
CorpusBleuMetric(separator_type='wpm')'s unsegmenter, which deletes spaces (it expects
'▁'-marked pieces, but WpmTokenizer.IdsToStrings has already turned them into spaces).
lingvoc's decoder_out_* holds "src:", "ref:" and "hyp N: score S: TEXT" lines. Examples
are matched by their source with spaces removed; hypotheses compared likewise.
With --asr (an AsrModel's decoder): Lingvo's metrics_calculator logs "utt_id: ID" and
one "  SCORE: HYP" line per hypothesis; lingvoc's decoder_out_* blocks start with the
utterance id. Examples are matched by utterance id, hypotheses compared as they are
(Lingvo logs bytes: [b'ID'] and b'HYP' are read as ID and HYP).
Prints one line: examples matched, top hypotheses equal, largest top-score difference;
exits 1 when an example is unmatched, a top hypothesis differs, or a score differs by
more than --score_tol.
"""
import argparse
import re
import sys


def unbytes(s):
  """b'x' and [b'x'] as Lingvo's ASR metrics log bytes: x."""
  m = re.fullmatch(r"\[?b(['\"])(.*)\1\]?", s)
  return m.group(2) if m else s


def lingvo_log(path, asr):
  out, cur = {}, None
  key = r'metrics_calculator\.py:\d+\] (utt_id): (.*)$' if asr else r'model\.py:\d+\] (source|target): (.*)$'
  for line in open(path, encoding='utf-8'):
    m = re.search(key, line)
    if m:
      if m.group(1) in ('source', 'utt_id'):
        cur = unbytes(m.group(2))
        out[cur] = []
      continue
    m = re.search(r'(?:model|metrics_calculator)\.py:\d+\]   (-?[0-9.]+(?:e[+-]?\d+)?): (.*)$', line)
    if m and cur is not None:
      out[cur].append((float(m.group(1)), unbytes(m.group(2)) if asr else m.group(2)))
  return out


def lingvoc_out(path, asr):
  out = {}
  for blk in re.split(r'\n\n+', open(path, encoding='utf-8').read().strip('\n')):
    src, hyps = blk.split('\n')[0] if asr else None, []
    for l in blk.split('\n'):
      if l.startswith('src: ') and not asr:
        src = l[5:].replace(' ', '')
      m = re.match(r'hyp (\d+): score (\S+): ?(.*)$', l)
      if m:
        hyps.append((int(m.group(1)), float(m.group(2)), m.group(3) if asr else m.group(3).replace(' ', '')))
    hyps.sort()
    out[src] = [(s, h) for _, s, h in hyps]
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('lingvo_log')
  ap.add_argument('lingvoc_out')
  ap.add_argument('--score_tol', type=float, default=1e-4)
  ap.add_argument('--asr', action='store_true', help='an AsrModel decoder (see above)')
  a = ap.parse_args()
  lv, lc = lingvo_log(a.lingvo_log, a.asr), lingvoc_out(a.lingvoc_out, a.asr)
  bad, same, every, worst = 0, 0, 0, 0.0
  for src, hyps in lv.items():
    if src not in lc or not hyps or not lc[src]:
      print('unmatched: %r' % src)
      bad += 1
      continue
    (s0, h0), (s1, h1) = hyps[0], lc[src][0]
    worst = max(worst, abs(s0 - s1))
    every += [h for _, h in hyps] == [h for _, h in lc[src]]
    if h0 == h1:
      same += 1
    else:
      print('top hypotheses differ for %r: Lingvo %r (%g), lingvoc %r (%g)' % (src, h0, s0, h1, s1))
      bad += 1
  if len(lc) != len(lv):
    print('Lingvo decoded %d examples, lingvoc %d' % (len(lv), len(lc)))
    bad += 1
  print('%d examples, top hypotheses equal: %d, every hypothesis equal in order: %d, largest top-score difference %.2g'
        % (len(lv), same, every, worst))
  sys.exit(1 if bad or worst > a.score_tol else 0)


if __name__ == '__main__':
  main()
