"""The CTranslate2 side of bench/bench_ct2.sh: translates the lines of a text file with a
model directory bench/ct2_convert.py wrote, as bin/decoder --decode_text does with
lingvoc's model: each line WpmTokenizer-encoded (pieces + </s>, lingvoc's source ids),
one sentence at a time (max_batch_size 1, as --decode_text), beam search, the best
hypothesis joined back to text as WpmTokenizer decodes. Prints one line per input line
on stdout; on stderr "ct2 load_s=<s> translate_s=<s> tokens=<target pieces, </s> not
counted>".
Usage: ct2_translate.py MODEL_DIR WPM_VOCAB TEXT COMPUTE_TYPE THREADS BEAM LENGTH_PENALTY [MAX_LEN]
  COMPUTE_TYPE float32 or int8 (CTranslate2 quantizes the float32 weights at load);
  THREADS: intra_threads (inter_threads 1); LENGTH_PENALTY: CTranslate2's, which divides a
  hypothesis' log-probability by length ** LENGTH_PENALTY (lingvoc's beam search divides
  by ((length + 5) / 5) ** length_normalization, Lingvo's GNMT form); MAX_LEN
  max_decoding_length (150: TransformerSmall's target_seq_len)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ct2_convert  # noqa: E402

import ctranslate2  # noqa: E402


def main():
    if len(sys.argv) not in (8, 9):
        sys.exit(__doc__.split("\n\n")[0] + "\n" + __doc__.split("Usage: ")[1])
    model, vocab, text, compute_type, threads, beam, lp = sys.argv[1:8]
    max_len = int(sys.argv[8]) if len(sys.argv) > 8 else 150
    tokens = ct2_convert.read_vocab(vocab)
    ids = {t: i for i, t in enumerate(tokens)}
    with open(text, encoding="utf-8") as f:
        src = [ct2_convert.wpm_encode(line, ids) + ["</s>"] for line in f]
    t0 = time.perf_counter()
    tr = ctranslate2.Translator(model, device="cpu", compute_type=compute_type, intra_threads=int(threads),
                                inter_threads=1)
    t1 = time.perf_counter()
    res = tr.translate_batch(src, max_batch_size=1, beam_size=int(beam), length_penalty=float(lp),
                             max_decoding_length=max_len, num_hypotheses=1)
    t2 = time.perf_counter()
    n = 0
    out = []
    for r in res:
        pieces = r.hypotheses[0]
        n += len(pieces)
        out.append(ct2_convert.wpm_decode(pieces))
    sys.stdout.write("".join(s + "\n" for s in out))
    print("ct2 load_s=%.3f translate_s=%.3f tokens=%d" % (t1 - t0, t2 - t1, n), file=sys.stderr)


if __name__ == "__main__":
    main()
