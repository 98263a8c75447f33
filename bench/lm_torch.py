"""PyTorch twins of lm.bible.RnnLmSmall and lm.bible.TransformerLmSmall
(experiments/lm/bible.cfg) for bench/bench_lm.sh.

RnnLmSmall: Lingvo's RnnLm (embedding x sqrt(dim), embedding dropout, 2 stacked LSTMs of
512 with dropout after each and a residual from layer 1, full softmax), Adam 2e-3 with
gradients clipped to 1.0.
TransformerLmSmall: Lingvo's TransformerLm (embedding Gaussian(1/16) x sqrt(256) +
sinusoidal positions; 4 causal layers of 4-head attention with q/k/v/out projections and
hidden 1024 ReLU feed-forward, Xavier(1.0) weights and zero biases as Lingvo's defaults;
pre-layer-norm, the attention residual adding the *normalised* input, residual dropout
0.1; no final layer norm; full softmax), Adam (0.9, 0.98, 1e-9) with TransformerSchedule
(lr 1.0, warmup 1000, model_dim 256), no clipping.
Both: the same vocabulary (Lingvo's AsciiTokenizer: lower-cased, <s>=1 </s>=2 space=3
a..z=5.. ...), the same batching (LmInput: bucket by word count with bounds
[10,20,30,50,100] and limits [64,48,32,20,10], lines over 255 characters cut).
Trains STEPS steps on FILE and prints the training tokens/s (predicted tokens incl. </s>
over the wall time of the steps after the first WARMUP) and the process's peak RSS after
training, then scores the first 200 lines (tokens/s, no gradient) and samples 3 x 200
characters (tokens/s; carried LSTM state, or the whole prefix again each step for the
Transformer, which has no cache here).

usage: lm_torch.py FILE THREADS STEPS [WARMUP] [rnn|transformer]
   or: RACE_SECONDS=S RACE_EVERY=E TEST_FILE=F lm_torch.py FILE THREADS 0 0 KIND
       (bench/lm_race.sh: train for S seconds, then the Test log_pplx of the weights
       every E seconds)
TRAIN_ONLY=1 stops after the training figures (bench/bench_mem.sh).
INIT_CKPT=PREFIX starts from the weights of a lingvoc checkpoint of the same model (read
with CKPT_INSPECT, default bin/ckpt_inspect) instead of PyTorch's own draws of the same
initializers: bench/lm_race.sh's SAME_INIT=1, so one race is not decided by the luck of one
initialization (the twin's Test log_pplx at initialization ranges 5.17-6.76 over seeds 1-8).
"""
import math
import os
import random
import re
import resource
import subprocess
import sys
import time

import torch

FILE, THREADS, STEPS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
WARMUP = int(sys.argv[4]) if len(sys.argv) > 4 else 5
KIND = sys.argv[5] if len(sys.argv) > 5 else "rnn"
assert KIND in ("rnn", "transformer"), KIND
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
        # Lingvo's LSTMCellSimple has one bias; PyTorch's LSTM adds bias_ih and bias_hh.
        # bias_hh stays 0 and frozen, so the one bias gets Adam's step once, not twice.
        for lstm in (self.l0, self.l1):
            torch.nn.init.zeros_(lstm.bias_hh_l0)
            lstm.bias_hh_l0.requires_grad_(False)
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


class Layer(torch.nn.Module):
    """Lingvo's TransformerLayer without aux attention: h = LN(x) + Drop(Attn(LN(x)));
    out = h + Drop(FF(LN(h)))."""

    def __init__(self, dim, heads, hidden, drop):
        super().__init__()
        self.ln0 = torch.nn.LayerNorm(dim)
        self.atten = torch.nn.MultiheadAttention(dim, heads)
        self.ln1 = torch.nn.LayerNorm(dim)
        self.ff0 = torch.nn.Linear(dim, hidden)
        self.ff1 = torch.nn.Linear(hidden, dim)
        self.drop = torch.nn.Dropout(drop)

    def forward(self, x, mask):
        a = self.ln0(x)
        h = a + self.drop(self.atten(a, a, a, attn_mask=mask, need_weights=False)[0])
        return h + self.drop(self.ff1(torch.relu(self.ff0(self.ln1(h)))))


class TransformerLm(torch.nn.Module):
    def __init__(self, dim=256, layers=4, heads=4, hidden=1024, drop=0.1):
        super().__init__()
        self.emb = torch.nn.Embedding(V, dim)
        torch.nn.init.normal_(self.emb.weight, 0.0, 1 / math.sqrt(dim))
        self.scale = math.sqrt(dim)
        self.layers = torch.nn.ModuleList(Layer(dim, heads, hidden, drop) for _ in range(layers))
        self.out = torch.nn.Linear(dim, V)
        self.dim = dim
        # Lingvo's default params_init, Xavier(1.0) per weight matrix, zero biases.
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
                torch.nn.init.zeros_(m.bias)
            elif isinstance(m, torch.nn.MultiheadAttention):
                for w in m.in_proj_weight.data.chunk(3):
                    torch.nn.init.xavier_uniform_(w)
                torch.nn.init.zeros_(m.in_proj_bias)

    def pos(self, T):
        """Lingvo's PositionalEmbeddingLayer: [sin(t / 10000^(i/(D/2-1))), cos(...)]."""
        half = self.dim // 2
        inv = torch.exp(-math.log(1.0e4) * torch.arange(half, dtype=torch.float32) / max(half - 1, 1))
        t = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
        return torch.cat([torch.sin(t), torch.cos(t)], 1)

    def forward(self, ids, state=None):
        T = ids.shape[0]
        x = self.emb(ids) * self.scale + self.pos(T)[:, None, :]
        mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        for l in self.layers:
            x = l(x, mask)
        return self.out(x), None


def lingvoc_tensors(prefix, names):
    """The named float tensors of a lingvoc (TensorFlow-format) checkpoint, via ckpt_inspect."""
    tool = os.environ.get("CKPT_INSPECT", os.path.join(os.path.dirname(__file__), "..", "bin", "ckpt_inspect"))
    listing = subprocess.run([tool, "--file_name=" + prefix], capture_output=True, text=True, check=True).stdout
    shapes = {m.group(1): [int(d) for d in m.group(2).split(",") if d]
              for m in re.finditer(r"^(\S+) \(DT_FLOAT\) \[([0-9,]*)\]$", listing, re.M)}
    out = {}
    for n in names:
        if n not in shapes:
            sys.exit("lm_torch.py: %s has no float tensor %s (a checkpoint of another model?)" % (prefix, n))
        text = subprocess.run([tool, "--file_name=" + prefix, "--tensor_name=" + n, "--printoptions=threshold=1000000000"],
                              capture_output=True, text=True, check=True).stdout.split("\n", 1)[1]
        vals = [float(x) for x in re.findall(r"-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?", text)]
        t = torch.tensor(vals, dtype=torch.float32)
        if t.numel() != math.prod(shapes[n]):
            sys.exit("lm_torch.py: %s: %s has %d values, expected %s" % (prefix, n, t.numel(), shapes[n]))
        out[n] = t.reshape(shapes[n])
    return out


def load_lingvoc(model, prefix):
    """Copies lingvoc's variables into the twin. Lingvo multiplies x by [in, out] matrices
    (PyTorch's Linear holds [out, in]); LSTMCellSimple's wm is [x; m] by the gates
    [new input, input, forget, output] (PyTorch's LSTM: input, forget, new input, output,
    bias split in two); LayerNorm's scale is stored as scale - 1."""
    p = "lm/lm/"
    t = lambda x: x.t()
    # (lingvoc variable, twin tensor it fills, the conversion)
    copies = [(p + "emb/var_0/var", model.emb.weight, None), (p + "softmax/weight_0/var", model.out.weight, t),
              (p + "softmax/bias_0/var", model.out.bias, None)]
    if isinstance(model, RnnLm):
        for i, lstm in enumerate((model.l0, model.l1)):
            h, nin = lstm.hidden_size, lstm.input_size
            order = lambda x, h=h: torch.cat([x[..., k * h:(k + 1) * h] for k in (1, 2, 0, 3)], -1)
            wm, b = p + "rnns_%d/wm/var" % i, p + "rnns_%d/b/var" % i
            copies += [(wm, lstm.weight_ih_l0, lambda x, o=order, n=nin: o(x[:n]).t()),
                       (wm, lstm.weight_hh_l0, lambda x, o=order, n=nin: o(x[n:]).t()),
                       (b, lstm.bias_ih_l0, order), (b, lstm.bias_hh_l0, torch.zeros_like)]
    else:
        for i, l in enumerate(model.layers):
            a, f = p + "layer_%d/multihead_self_atten/" % i, p + "layer_%d/tr_fflayer/" % i
            mh, d = a + "multihead_atten/", l.atten.embed_dim
            one = lambda x: 1 + x
            copies += [(a + "atten_ln/scale/var", l.ln0.weight, one), (a + "atten_ln/bias/var", l.ln0.bias, None),
                       (f + "fflayer_ln/scale/var", l.ln1.weight, one), (f + "fflayer_ln/bias/var", l.ln1.bias, None),
                       (mh + "ctx_post_proj/var", l.atten.out_proj.weight, t),
                       (mh + "ctx_post_proj_b/var", l.atten.out_proj.bias, None)]
            for k, name in enumerate(("query_proj", "source_proj", "ctx_proj")):
                copies += [(mh + name + "/var", l.atten.in_proj_weight[k * d:(k + 1) * d], t),
                           (mh + name + "_b/var", l.atten.in_proj_bias[k * d:(k + 1) * d], None)]
            for j, lin in enumerate((l.ff0, l.ff1)):
                copies += [(f + "fflayer/fflayer_%d/w/var" % j, lin.weight, t),
                           (f + "fflayer/fflayer_%d/b/var" % j, lin.bias, None)]
    T = lingvoc_tensors(prefix, sorted({n for n, _, _ in copies}))
    with torch.no_grad():
        for name, dst, conv in copies:
            dst.copy_(conv(T[name]) if conv else T[name])


lines = [l.rstrip("\n") for l in open(FILE)]
if KIND == "rnn":
    model = RnnLm()
    # Lingvo's Adam defaults (lingvoc's too): betas (0.9, 0.999), epsilon 1e-6.
    opt = torch.optim.Adam([q for q in model.parameters() if q.requires_grad], lr=2e-3, eps=1e-6)
    sched, clip = None, 1.0
else:
    model = TransformerLm()
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    # TransformerSchedule: lr * model_dim^-0.5 * min(step * warmup^-1.5, step^-0.5), step from 1.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 256 ** -0.5 * min((s + 1) * 1000 ** -1.5, (s + 1) ** -0.5))
    clip = 0.0
if os.environ.get("INIT_CKPT"):
    load_lingvoc(model, os.environ["INIT_CKPT"])
gen = batches(list(lines))


def train_step():
    """One update on the next batch; returns its loss and its number of predicted tokens."""
    ids, lab, w = tensors(next(gen))
    logits, _ = model(ids)
    xent = torch.nn.functional.cross_entropy(logits.reshape(-1, V), lab.reshape(-1), reduction="none")
    loss = (xent * w.reshape(-1)).sum() / w.sum()
    opt.zero_grad()
    loss.backward()
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    if sched is not None:
        sched.step()
    return loss, int(w.sum())


def test_log_pplx(path):
    """Per predicted token (</s> included) over every line of path, as lingvoc's evaler's
    log_pplx (lines cut at MAXLEN - 1 characters as LmInput's target_max_length does)."""
    test = [l.rstrip("\n") for l in open(path)]
    model.eval()
    tot, n = 0.0, 0.0
    with torch.no_grad():
        for i in range(0, len(test), 20):
            ids, lab, w = tensors(test[i : i + 20])
            logits, _ = model(ids)
            xent = torch.nn.functional.cross_entropy(logits.reshape(-1, V), lab.reshape(-1), reduction="none")
            tot += float((xent * w.reshape(-1)).sum())
            n += float(w.sum())
    model.train()
    return tot / n


# Race mode (bench/lm_race.sh): train for RACE_SECONDS of wall time instead of STEPS,
# keeping a copy of the weights every RACE_EVERY seconds; after training (not timed),
# each copy's Test log_pplx on TEST_FILE.
RACE = float(os.environ.get("RACE_SECONDS", "0"))
if RACE > 0:
    every, snaps = float(os.environ.get("RACE_EVERY", "600")), []
    start, step, nxt = time.perf_counter(), 0, 0.0
    while True:
        el = time.perf_counter() - start
        if el >= nxt or el >= RACE:
            snaps.append((el, step, {k: v.clone() for k, v in model.state_dict().items()}))
            nxt += every
        if el >= RACE:
            break
        train_step()
        step += 1
    for el, st, sd in snaps:
        model.load_state_dict(sd)
        print("torch_lm race t=%.0f step=%d test_log_pplx=%.4f" % (el, st, test_log_pplx(os.environ["TEST_FILE"])),
              flush=True)
    sys.exit(0)

tokens, t0, first = 0, None, None
for step in range(STEPS):
    if step == WARMUP:
        t0, tokens = time.perf_counter(), 0
    loss, n = train_step()
    if first is None:
        first = loss.item()
    tokens += n
dt = time.perf_counter() - t0
print("torch_lm train %d steps %.0f tokens/s log_pplx %.3f -> %.3f" % (STEPS - WARMUP, tokens / dt, first, loss.item()))
print("torch_lm rss_train %.0f MB" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
if os.environ.get("TRAIN_ONLY"):  # bench/bench_mem.sh: no scoring or sampling
    sys.exit(0)

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
        prefix = x
        for t in range(200):
            logits, state = model(x if KIND == "rnn" else prefix, state)
            x = torch.multinomial(torch.softmax(logits[-1, 0], -1), 1).reshape(1, 1)
            prefix = torch.cat([prefix, x], 0)
            tokens += 1
    print("torch_lm sample %.0f tokens/s" % (tokens / (time.perf_counter() - t0)))
