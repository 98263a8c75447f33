#!/usr/bin/env bash
# SentencePiece tokenization speed: lingvoc's SentencePieceTokenizer (bin/spm_encode_file)
# against Debian's spm_encode on the same file in the same run, for a unigram and a BPE
# model (vocab 8000) trained on the WEB sentences (scripts/prepare_web_sentences.sh).
# Both write ids; RUNS (default 5) interleaved runs each, medians, spread and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
RUNS=${RUNS:-5}
for c in spm_train spm_encode; do command -v $c >/dev/null || { echo "bench_tokenizer: $c missing (apt-get install sentencepiece)"; exit 1; }; done
tmp=$(mktemp -d /tmp/lingvoc-bench-tok.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
scripts/prepare_web_sentences.sh "$tmp/web" 2>/dev/null
# Four copies of the corpus: long enough (~200k lines) that start-up costs do not count.
for _ in 1 2 3 4; do cat "$tmp/web/all.txt"; done >"$tmp/in.txt"
lines=$(wc -l <"$tmp/in.txt")
timeit() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null; t1=$(date +%s%N); echo "$(( (t1 - t0) / 1000000 ))e-3"; }
for m in unigram bpe; do
  spm_train --input="$tmp/web/all.txt" --model_prefix="$tmp/$m" --vocab_size=8000 --model_type=$m \
    --num_threads=2 --minloglevel=2 >/dev/null 2>&1
  bin/spm_encode_file --model="$tmp/$m.model" --input="$tmp/in.txt" >"$tmp/ours.txt"
  spm_encode --model="$tmp/$m.model" --output_format=id <"$tmp/in.txt" >"$tmp/ref.txt"
  cmp -s "$tmp/ours.txt" "$tmp/ref.txt" || { echo "bench_tokenizer: $m ids differ from spm_encode"; exit 1; }
  ours=(); ref=()
  for _ in $(seq "$RUNS"); do
    ours+=("$(timeit bin/spm_encode_file --model="$tmp/$m.model" --input="$tmp/in.txt")")
    ref+=("$(timeit sh -c "spm_encode --model='$tmp/$m.model' --output_format=id <'$tmp/in.txt'")")
  done
  /usr/bin/python3 - "$m" "$lines" "${ours[*]}" "${ref[*]}" <<'PY'
import statistics, sys
m, lines = sys.argv[1], int(sys.argv[2])
ours = [float(x) for x in sys.argv[3].split()]; ref = [float(x) for x in sys.argv[4].split()]
mo, mr = statistics.median(ours), statistics.median(ref)
print("%-8s %d lines: lingvoc %.0f lines/s (%.2f-%.2f s), spm_encode %.0f lines/s (%.2f-%.2f s), ratio %.2fx"
      % (m, lines, lines / mo, min(ours), max(ours), lines / mr, min(ref), max(ref), mr / mo))
PY
done
