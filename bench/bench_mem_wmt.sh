#!/usr/bin/env bash
# Peak resident memory of training mt.wmt14_en_de.WmtEnDeTransformerSmall (model 64,
# 32k vocabulary) against the same model and batch in PyTorch (bench/mem_wmt_torch.py,
# /usr/bin/python3), THREADS (default 2) threads, STEPS (default 10) steps each.
#
# lingvoc: bin/trainer on Lingvo's WMT'14 test records (tests/data/lingvo_mt, 100
# sentence pairs, the longest 53 source and 64 target tokens) in one bucket of BATCH
# (default 64) sentences, the experiment's other input settings unchanged (its shuffle
# buffer of 10M records included); /usr/bin/time -v gives the peak RSS. It is run with
# the softmax as it is now (chunked once the vocabulary reaches 8192 classes) and, for
# the comparison, with task.decoder.softmax.chunk_size -1 (the dense [tokens, 32k]
# logits, their softmax and gradient, as before).
# PyTorch: the same Transformer, BATCH x 53 -> 64 tokens (every batch of lingvoc's is at
# most that long), log_softmax over the dense logits.
# Prints each side's peak RSS in MB and the ratio lingvoc / PyTorch (the issue's target:
# <= 1.5).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/peer_env.sh   # the peers get the OpenBLAS kernels lingvoc selects
THREADS=${THREADS:-2} STEPS=${STEPS:-10} BATCH=${BATCH:-64}
BIN=${BIN:-bin}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
R=$PWD/tests/data/lingvo_mt/wmt14_ende_wpm_32k_test.tfrecord
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
O="input.file_pattern: \"tfrecord:$R\"; train.max_steps: $STEPS; input.bucket_upper_bound: [256]"
O="$O; input.bucket_batch_limit: [$BATCH]; input.file_random_seed: 301; cluster.num_threads: $THREADS"
lingvoc() { # lingvoc NAME EXTRA_OVERRIDES: prints the peak RSS in MB
  /usr/bin/time -v "$BIN/trainer" --model=mt.wmt14_en_de.WmtEnDeTransformerSmall --logdir="$tmp/$1" \
    --model_params_override="$O$2" >"$tmp/$1.log" 2>&1 || { tail -5 "$tmp/$1.log" >&2; exit 1; }
  awk '/Maximum resident set size/ { printf "%.0f", $NF / 1024 }' "$tmp/$1.log"
}
chunked=$(lingvoc chunked "")
echo "lingvoc (softmax chunked by 2048 classes): peak_rss_mb=$chunked"
dense=$(lingvoc dense "; task.decoder.softmax.chunk_size: -1")
echo "lingvoc (chunk_size -1: dense [tokens, 32k]): peak_rss_mb=$dense"
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP torch side: /usr/bin/python3 cannot import torch"
  exit 0
fi
pt=$(/usr/bin/python3 bench/mem_wmt_torch.py "$THREADS" "$STEPS" "$BATCH" 53 64)
echo "$pt"
torch_mb=$(sed -n 's/.*peak_rss_mb=\([0-9]*\).*/\1/p' <<<"$pt")
awk -v a="$chunked" -v d="$dense" -v t="$torch_mb" 'BEGIN {
  printf "ratio lingvoc/PyTorch: chunked %.2f, dense %.2f (target <= 1.5)\n", a / t, d / t }'
