#!/usr/bin/env python3
"""wer_by_voice.py [--only-listed] DECODER_OUT JOBS... - word error rate of an ASR decode per voice and per
synthesizer: the top hypothesis against the reference of each utterance of bin/decoder's
decoder_out_%09d file (key line = utterance id, "ref: ...", "hyp 0: score S: ...", blank
line), grouped by the synthesizer and voice that scripts/prepare_asr_synth.sh's jobs files
(id, synth, voice, rate, text, transcript) give each id. Utterances of no jobs file (e.g.
the LibriVox recordings) count under "other", or not at all with --only-listed (to score
the same subset of a set as another recognizer). Python's standard library only.

Prints one line per voice, then per synthesizer, then the total (which equals the decoder's
norm_wer when no hypothesis holds <noise> or <epsilon>): errors (sub + ins + del), reference
words, WER %. Exit 2 on a file that is missing or not in that format."""
import sys
from collections import defaultdict


def edits(ref, hyp):
    """Word-level Levenshtein distance."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def read_decoder_out(path):
    out, key, ref, hyp = {}, None, None, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                if key is not None:
                    if ref is None or hyp is None:
                        raise ValueError(f"{path}:{n}: entry {key!r} without a ref: and a hyp 0: line")
                    out[key] = (ref, hyp)
                key, ref, hyp = None, None, None
            elif key is None:
                key = line
            elif line.startswith("ref: ") or line == "ref:":
                ref = line[5:].split()
            elif line.startswith("hyp 0: "):
                parts = line.split(": ", 2)
                hyp = parts[2].split() if len(parts) == 3 else []
    if key is not None and ref is not None and hyp is not None:
        out[key] = (ref, hyp)
    if not out:
        raise ValueError(f"{path}: no entries (expected bin/decoder's decoder_out file)")
    return out


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) > 1 else 2
    only_listed = argv[1] == "--only-listed"
    if only_listed:
        argv = argv[:1] + argv[2:]
        if len(argv) < 3:
            print("wer_by_voice.py: --only-listed needs a DECODER_OUT and JOBS files", file=sys.stderr)
            return 2
    try:
        entries = read_decoder_out(argv[1])
        voice = {}
        for jobs in argv[2:]:
            with open(jobs, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    cols = line.rstrip("\n").split("\t")
                    if len(cols) != 6:
                        raise ValueError(f"{jobs}:{n}: expected 6 tab-separated columns, got {len(cols)}")
                    voice[cols[0]] = (cols[1], cols[2])
    except (OSError, ValueError) as e:
        print(f"wer_by_voice.py: {e}", file=sys.stderr)
        return 2
    by_voice, by_synth = defaultdict(lambda: [0, 0, 0]), defaultdict(lambda: [0, 0, 0])
    total = [0, 0, 0]
    for key, (ref, hyp) in entries.items():
        if only_listed and key not in voice:
            continue
        synth, v = voice.get(key, ("other", "other"))
        e = edits(ref, hyp)
        for acc in (by_voice[(synth, v)], by_synth[synth], total):
            acc[0] += e
            acc[1] += len(ref)
            acc[2] += 1
    def row(name, a):
        wer = 100.0 * a[0] / a[1] if a[1] else 0.0
        print(f"{name:40s} {a[2]:5d} utts {a[1]:6d} words {a[0]:6d} errors  WER {wer:6.2f}%")
    for (s, v), a in sorted(by_voice.items()):
        row(f"voice {s} {v}", a)
    for s, a in sorted(by_synth.items()):
        row(f"synthesizer {s}", a)
    row("total", total)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
