"""PyTorch twin of lm.bible.RnnLmSmall (experiments/lm/bible.cfg) for bench/bench_lm.sh.

Same architecture (Lingvo's RnnLm: embedding x sqrt(dim), embedding dropout, 2 stacked
LSTMs of 512 with dropout after each and a residual from layer 1, full softmax), same
vocabulary (Lingvo's AsciiTokenizer: lower-cased, <s>=1 </s>=2 space=3 a..z=5.. ...), the
same batching (LmInput: bucket by word count with bounds [10,20,30,50,100] and limits
[64,48,32,20,10], lines over 255 characters cut), Adam 2e-3 with gradients clipped to 1.0.
Trains STEPS steps on FILE and prints the training tokens/s (predicted tokens incl. </s>
over the wall time of the steps after the first WARMUP), then scores the first 200 lines
(tokens/s, no gradient) and samples 3 x 200 characters (tokens/s, carried state).

usage: lm_torch.py FILE THREADS STEPS [WARMUP]
"""
import math
import random
import sys
import time

import torch

FILE, THREADS, STEPS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
WARMUP = int(sys.argv[4]) if len(sys.argv) > 4 else 5
torch.set_num_threads(THREADS)
torch.manual_seed(1234)
random.seed(1234)

# AsciiTokenizer's table (core/ops/ascii_tokenizer.cc): ids 0..4 special, then the
# characters below in order; anything else is <unk> 0.
CHARS = "abcdefghijklmnopqrstuvwxyz.'-:!~`;0123456789\"#$%&()*+,/<=>?@[\\]^_{|}"
CMAP = {c: 5 + i for i, c in enumerate(CHARS)}
CMAP[" "] = 3
V = 76
MAXLEN = 256


def tokenize(line):
    ids = [CMAP.get(c, 0) for c in line.lower()][: MAXLEN - 1]
    return [1] + ids, ids + [2]


BOUNDS, LIMITS = [10, 20, 30, 50, 100], [64, 48, 32, 20, 10]


def batches(lines):
    """LmInput's bucketing: a line goes to the first bucket whose bound >= its word count;
    a bucket is emitted when it holds its limit of lines."""
    buckets = [[] for _ in BOUNDS]
    while True:
        random.shuffle(lines)
        for line in lines:
            w = len(line.split())
            for b, ub in enumerate(BOUNDS):
                if w <= ub:
                    buckets[b].append(line)
                    if len(buckets[b]) == LIMITS[b]:
                        yield buckets[b]
                        buckets[b] = []
                    break


def tensors(batch):
    toks = [tokenize(l) for l in batch]
    T = max(len(x) for x, _ in toks)
    ids = torch.full((T, len(batch)), 2, dtype=torch.long)
    lab = torch.full((T, len(batch)), 2, dtype=torch.long)
    w = torch.zeros(T, len(batch))
    for b, (x, y) in enumerate(toks):
        ids[: len(x), b] = torch.tensor(x)
        lab[: len(y), b] = torch.tensor(y)
        w[: len(y), b] = 1
    return ids, lab, w


class RnnLm(torch.nn.Module):
    def __init__(self, emb=128, dim=512):
        super().__init__()
        s = 1 / math.sqrt(dim)
        self.emb = torch.nn.Embedding(V, emb)
        self.l0 = torch.nn.LSTM(emb, dim)
        self.l1 = torch.nn.LSTM(dim, dim)
        self.out = torch.nn.Linear(dim, V)
        for p in self.parameters():
            torch.nn.init.uniform_(p, -s, s)
        self.scale = math.sqrt(emb)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, ids, state=None):
        x = self.drop(self.emb(ids) * self.scale)
        s0, s1 = state if state is not None else (None, None)
        y0, s0 = self.l0(x, s0)
        y0 = self.drop(y0)
        y1, s1 = self.l1(y0, s1)
        y1 = self.drop(y1) + y0  # residual from layer 1 (skip_start 1)
        return self.out(y1), (s0, s1)


lines = [l.rstrip("\n") for l in open(FILE)]
model = RnnLm()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
gen = batches(list(lines))
tokens, t0, first = 0, None, None
for step in range(STEPS):
    if step == WARMUP:
        t0, tokens = time.perf_counter(), 0
    ids, lab, w = tensors(next(gen))
    logits, _ = model(ids)
    xent = torch.nn.functional.cross_entropy(logits.reshape(-1, V), lab.reshape(-1), reduction="none")
    loss = (xent * w.reshape(-1)).sum() / w.sum()
    if first is None:
        first = loss.item()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    tokens += int(w.sum())
dt = time.perf_counter() - t0
print("torch_lm train %d steps %.0f tokens/s log_pplx %.3f -> %.3f" % (STEPS - WARMUP, tokens / dt, first, loss.item()))

model.eval()
with torch.no_grad():
    t0, tokens = time.perf_counter(), 0
    for i in range(0, 200, 20):
        ids, lab, w = tensors(lines[i : i + 20])
        logits, _ = model(ids)
        torch.nn.functional.cross_entropy(logits.reshape(-1, V), lab.reshape(-1), reduction="none")
        tokens += int(w.sum())
    print("torch_lm score %.0f tokens/s" % (tokens / (time.perf_counter() - t0)))
    t0, tokens = time.perf_counter(), 0
    for n in range(3):
        x, state = torch.tensor([[1]]), None
        for t in range(200):
            logits, state = model(x, state)
            x = torch.multinomial(torch.softmax(logits[-1, 0], -1), 1).reshape(1, 1)
            tokens += 1
    print("torch_lm sample %.0f tokens/s" % (tokens / (time.perf_counter() - t0)))
