#!/bin/sh
# prepare_web_sentences.sh OUTDIR - English sentences for the punctuator, prepared the way
# Lingvo's punctuator codelab prepares the Brown corpus (download_brown_corpus.py), from
# the World English Bible (Debian's sword-text-web, public domain):
#
#   OUTDIR/all.txt     one sentence per line, canonical order (scripts/data/bible_sentences.sh)
#   OUTDIR/train.txt   95% } unique sentences, sorted, then shuffled with Python's
#   OUTDIR/test.txt     5% } random.seed(1234); the first 95% train (48,626 unique: 46,194 / 2,432)
#
# --lingvo_filters also applies the sentence filters download_brown_corpus.py applies to
# Brown: drop sentences without letters, with an odd number of ", or unbalanced ( ) / [ ];
# strip one outer pair of quotes or brackets; drop those not starting with a letter or
# digit; upper-case the first letter. On the WEB this drops 15% of the sentences
# (quotations there span several sentences, so 7,451 have an odd number of "), which is
# why it is not the default: the punctuator figures in the README use the default split.
#
# Needs python3 (for Python's exact shuffle) and installs the Debian packages when missing.
set -eu
filters=0
if [ "${1:-}" = "--lingvo_filters" ]; then filters=1; shift; fi
if [ $# -ne 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  echo "usage: $0 [--lingvo_filters] OUTDIR   (writes OUTDIR/train.txt, OUTDIR/test.txt, OUTDIR/all.txt)" >&2
  [ $# -eq 1 ] && exit 0 || exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/data/apt_ensure.sh"
apt_ensure libsword-utils sword-text-web perl python3
out=$1
mkdir -p "$out"
sh "$here/data/bible_sentences.sh" "$out/all.txt"
py=/usr/bin/python3; [ -x "$py" ] || py=python3   # the system Python, standard library only
"$py" - "$out" "$filters" <<'PY'
import random, string, sys
out, filters = sys.argv[1], sys.argv[2] == "1"
letters, digits = set(string.ascii_letters), set(string.digits)
kept = []
with open(out + "/all.txt", encoding="utf-8") as f:
    for line in f:
        s = line.strip()
        if not s:
            continue
        if not filters:
            kept.append(s)
            continue
        if not (set(s) & letters):
            continue
        if s.count('"') % 2 or s.count("(") != s.count(")") or s.count("[") != s.count("]"):
            continue
        if len(s) >= 2 and (s[0], s[-1]) in (('"', '"'), ("(", ")"), ("[", "]")):
            s = s[1:-1]
        if not s or (s[0] not in letters and s[0] not in digits):
            continue
        kept.append(s[:1].upper() + s[1:])
uniq = sorted(set(kept))
random.seed(1234)
random.shuffle(uniq)
cut = int(len(uniq) * 0.95)
for name, part in (("train.txt", uniq[:cut]), ("test.txt", uniq[cut:])):
    with open(out + "/" + name, "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for s in part)
print("prepare_web_sentences.sh: %d sentences kept of %d read, %d unique: %d train, %d test in %s"
      % (len(kept), sum(1 for _ in open(out + "/all.txt", encoding="utf-8")), len(uniq), cut, len(uniq) - cut, out),
      file=sys.stderr)
PY
