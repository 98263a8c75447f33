"""The PyTorch side of bench/bench_transformer.sh: a stack of nn.TransformerEncoderLayer
(pre-LN, ReLU, no dropout, time-major [T, B, D]) forward + backward; prints one line
"torch ms_per_step=<m> fwd_ms=<f>". Usage: transformer_torch.py threads steps layers
model heads ffn length batch"""
import sys
import time

import torch

threads, steps, L, D, H, F, T, B = [int(v) for v in (sys.argv[1:] + [None] * 8)[:8]]
torch.set_num_threads(threads)
torch.manual_seed(1)
stack = torch.nn.Sequential(*[
    torch.nn.TransformerEncoderLayer(D, H, F, dropout=0.0, activation="relu", norm_first=True)
    for _ in range(L)])
stack.train()
x = (torch.arange(T * B * D, dtype=torch.float32).reshape(T, B, D) * 7919 % 1000) / 500 - 1
w = (torch.arange(T * B * D, dtype=torch.float32).reshape(T, B, D) * 104729 % 997) / 997
total = fwd = 0.0
for step in range(steps + 2):
    stack.zero_grad(set_to_none=False)
    t0 = time.perf_counter()
    loss = (stack(x) * w).sum()
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    if step >= 2:
        total += t2 - t0
        fwd += t1 - t0
print("torch ms_per_step=%.2f fwd_ms=%.2f" % (total / steps * 1e3, fwd / steps * 1e3))
