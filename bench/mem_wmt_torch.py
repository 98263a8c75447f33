"""The PyTorch side of bench/bench_mem_wmt.sh: peak resident memory of training
mt.wmt14_en_de.WmtEnDeTransformerSmall (model 64, 2 heads, FFN 128, 2 + 2 layers,
32k vocabulary, label smoothing 0.1, Adam) on one fixed batch, with the Transformer
of bench/mt_torch.py (lingvoc's computation written in PyTorch) at these dims.

The loss is what a PyTorch user writes: log_softmax over the [B, T, 32000] logits and
the smoothed cross-entropy from them (autograd keeps the logits' softmax for the
backward, as lingvoc's dense path did).

Prints one line: "torch peak_rss_mb=<after training> import_rss_mb=<after import torch>
loss=<last loss> tokens=<target tokens per step>".
Usage: mem_wmt_torch.py threads steps batch src_len tgt_len"""
import math
import os
import resource
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_torch  # noqa: E402  (the model; its dims are module globals read at call time)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main():
    threads, steps, B, S, T = [int(v) for v in sys.argv[1:6]]
    import_mb = peak_rss_mb()
    mt_torch.D, mt_torch.HEADS, mt_torch.FFN, mt_torch.LAYERS, mt_torch.V = 64, 2, 128, 2, 32000
    torch.set_num_threads(threads)
    torch.manual_seed(1234)
    model = mt_torch.TransformerModel(max(S, T))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    batch = mt_torch.make_batch(B, S, T)
    model.train()
    value = float("nan")
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = model.loss(*batch)
        loss.backward()
        opt.step()
        value = loss.item()
        assert math.isfinite(value), value
    print("torch peak_rss_mb=%.0f import_rss_mb=%.0f loss=%.4f tokens=%d"
          % (peak_rss_mb(), import_mb, value, int((1 - batch[4]).sum())))


if __name__ == "__main__":
    main()
